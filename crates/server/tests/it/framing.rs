//! Line framing: `\n`, `\r\n`, empty lines, split input, partial final line, compact output.

use crate::support::*;
use serde_json::json;
use std::time::Duration;

/// A script that exercises reply, delivery and a second reply on one connection.
fn script(eol: &str) -> String {
    [
        r#"{"op":"subscribe","topic":"/caf\u00e9","type":"x","id":"s"}"#,
        r#"{"op":"publish","topic":"/café","msg":{"k":"é😀","n":[1, 2]}}"#,
        r#"{"op":"unsubscribe","topic":"/café","id":"u"}"#,
    ]
    .iter()
    .map(|l| format!("{l}{eol}"))
    .collect()
}

fn check_script_replies(c: &mut Client, mode: Mode) {
    let v = c.recv();
    assert_status(&v, "info", Some(&json!("s")));
    let raw = c.recv_raw(deadline(REPLY));
    assert!(
        raw.contains(r#"{"k":"é😀","n":[1, 2]}"#),
        "{mode:?}: payload altered: {raw}"
    );
    let v = parse_line(&raw);
    assert_eq!(v["topic"], "/café", "{mode:?}: {v}");
    let v = c.recv();
    assert_status(&v, "info", Some(&json!("u")));
    c.assert_quiet();
}

#[test]
fn lf_terminated_lines_whole_bytewise_and_halves() {
    let gw = Gateway::start(&[]);
    for mode in MODES {
        let mut c = gw.client();
        c.send_mode(script("\n").as_bytes(), mode);
        check_script_replies(&mut c, mode);
    }
    assert_eq!(total_errors(&gw.stats()), 0);
}

#[test]
fn crlf_terminated_lines_whole_bytewise_and_halves() {
    let gw = Gateway::start(&[]);
    for mode in MODES {
        let mut c = gw.client();
        c.send_mode(script("\r\n").as_bytes(), mode);
        check_script_replies(&mut c, mode);
    }
    assert_eq!(total_errors(&gw.stats()), 0);
}

#[test]
fn empty_lines_are_ignored_whole_bytewise_and_halves() {
    let gw = Gateway::start(&[]);
    for mode in MODES {
        let mut c = gw.client();
        let input = format!(
            "\n\n\r\n{}\n\r\n\n\r\n{}\n\n",
            r#"{"op":"subscribe","topic":"/e","type":"x","id":1}"#,
            r#"{"op":"unsubscribe","topic":"/e","id":2}"#
        );
        c.send_mode(input.as_bytes(), mode);
        c.expect_info(1);
        c.expect_info(2);
        c.assert_quiet();
    }
    assert_eq!(
        total_errors(&gw.stats()),
        0,
        "empty lines must not count as errors"
    );
}

#[test]
fn a_request_split_at_every_byte_position() {
    let gw = Gateway::start(&[]);
    let mut c = gw.client();
    let probe =
        r#"{"op":"subscribe","topic":"/é","type":"x","id":"split-000"}"#.to_string() + "\r\n";
    for i in 1..probe.len() {
        let line = probe.replace("split-000", &format!("split-{i:03}"));
        let bytes = line.as_bytes();
        c.send_raw(&bytes[..i]);
        std::thread::sleep(Duration::from_millis(3));
        c.send_raw(&bytes[i..]);
        c.expect_info(format!("split-{i:03}"));
    }
    c.assert_quiet();
}

#[test]
fn many_pipelined_requests_in_one_write_answered_in_order() {
    let gw = Gateway::start(&[]);
    let mut c = gw.client();
    let mut batch = String::new();
    for i in 0..500 {
        batch.push_str(&format!(
            "{{\"op\":\"subscribe\",\"topic\":\"/p{i}\",\"type\":\"x\",\"id\":{i}}}\n"
        ));
    }
    c.send_raw(batch.as_bytes());
    for i in 0..500 {
        c.expect_info(i);
    }
    c.assert_quiet();
    assert_eq!(counter(&gw.stats(), "subscriptions"), 500);
}

#[test]
fn partial_final_line_at_eof_is_ignored() {
    let gw = Gateway::start(&[]);
    let mut sub = gw.client();
    sub.subscribe("/eof");
    let base = gw.stats();
    let mut b = gw.client();
    b.barrier();
    b.send_raw(br#"{"op":"publish","topic":"/eof","msg":1}"#);
    b.send_raw(b"\n");
    b.send_raw(br#"{"op":"publish","topic":"/eof","msg":2}"#); // no newline
    b.shutdown_write();
    // The gateway sees EOF and closes b without acting on the partial line.
    let lines = b.expect_closed(Duration::from_secs(5));
    assert!(lines.is_empty(), "b must get no output: {lines:?}");
    assert_eq!(sub.recv(), json!({"op":"publish","topic":"/eof","msg":1}));
    sub.assert_quiet();
    let s = gw.stats();
    assert_eq!(
        total_errors(&s),
        total_errors(&base),
        "partial line must not be an error: {s}"
    );
}

#[test]
fn output_lines_are_compact_single_line_json() {
    let gw = Gateway::start(&["--call-timeout-ms", "20000"]);
    let mut p = gw.client();
    let mut c = gw.client();
    let mut raws = Vec::new();
    p.send_line(
        r#"{ "op" : "advertise_service" , "service" : "/cmp" , "type" : "t" , "id" : "a" }"#,
    );
    raws.push(p.recv_raw(deadline(REPLY)));
    c.send_line(r#"{"op":"call_service","service":"/cmp","id":"c","args":{"x":[1,2]}}"#);
    let fwd = p.recv_raw(deadline(REPLY));
    let fid = parse_line(&fwd)["id"].to_string();
    raws.push(fwd);
    p.respond("/cmp", &fid, r#"{"y":"z"}"#, "true");
    raws.push(c.recv_raw(deadline(REPLY)));
    c.call("/missing", r#""m""#, "{}");
    raws.push(c.recv_raw(deadline(REPLY)));
    c.send_line(r#"{"op":"nope","id":"e"}"#);
    raws.push(c.recv_raw(deadline(REPLY)));
    c.send_line(r#"{"op":"subscribe","topic":"/cmp","type":"t"}"#);
    raws.push(c.recv_raw(deadline(REPLY)));
    p.publish("/cmp", r#"{"a":[true,null]}"#);
    raws.push(c.recv_raw(deadline(REPLY)));
    c.send_line(r#"{"op":"call_service","service":"/rosgate/stats","id":"st","args":{}}"#);
    raws.push(c.recv_raw(deadline(REPLY)));
    for raw in &raws {
        assert!(
            !raw.ends_with('\r'),
            "output must end with \\n only: {raw:?}"
        );
        assert!(is_compact(raw), "output not compact: {raw}");
        parse_line(raw);
    }
}
