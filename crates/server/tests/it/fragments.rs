//! What clients send the gateway beyond one JSON line (issue 25), over the
//! real binary: fragments (rosbridge's `fragment` op) reassembled on both
//! transports, each refused piece (an error with the piece's id, nothing
//! delivered, other clients unaffected), the deadline and the counters;
//! binary WebSocket frames; raw CDR publishes (`{"bytes": ...}`).

use std::time::Duration;

use rosgate_wire::fragment;
use rosgate_wire::Raw;
use serde_json::Value;

use crate::support::*;
use crate::wsclient::*;

/// The `fragment` requests of `text`, cut every `size` characters.
fn pieces(text: &str, size: usize, id: &str) -> Vec<String> {
    fragment::split(text, size)
        .expect("long enough to split")
        .map(|p| {
            let mut f = Vec::new();
            p.write(&mut f, Raw::from_valid_json(id));
            String::from_utf8(f).expect("UTF-8").trim_end().to_owned()
        })
        .collect()
}

fn piece(id: &str, data: &str, num: u64, total: u64) -> String {
    let data = serde_json::to_string(data).expect("a string");
    format!(r#"{{"op":"fragment","id":{id},"data":{data},"num":{num},"total":{total}}}"#)
}

/// A publish on `/frag` of about 1000 characters (some not ASCII).
fn big_publish(tag: &str) -> (String, Value) {
    let data = format!("{tag}:{}é水🤖\"", "x".repeat(1_000));
    let text = serde_json::json!({"op": "publish", "topic": "/frag", "msg": {"data": data}});
    (text.to_string(), Value::String(data))
}

fn error_text(v: &Value) -> &str {
    v["msg"].as_str().unwrap_or_default()
}

#[test]
fn fragments_reassemble_on_tcp_and_websocket_in_any_order() {
    let gw = Gateway::start(&[]);
    let mut sub = gw.client();
    sub.subscribe("/frag");
    // TCP: pieces in reverse order, one line each.
    let mut tcp = gw.client();
    let (text, data) = big_publish("tcp");
    let mut f = pieces(&text, 256, "\"p-1\"");
    assert!(f.len() >= 4);
    f.reverse();
    for line in &f {
        tcp.send_line(line);
    }
    tcp.assert_quiet();
    assert_eq!(sub.recv()["msg"]["data"], data);
    // WebSocket: one piece per text frame, the last one in a binary frame
    // (rosbridge reads a binary frame as JSON text).
    let mut ws = Ws::connect(&gw);
    let (text, data) = big_publish("ws");
    let f = pieces(&text, 300, "7");
    let (last, first) = f.split_last().expect("pieces");
    for line in first {
        ws.send_text(line);
    }
    ws.send_frame(0x2, true, last.as_bytes());
    assert!(ws.barrier().is_empty(), "no error");
    assert_eq!(sub.recv()["msg"]["data"], data);
    let s = gw.stats();
    assert_eq!(counter(&s, "fragmented_in"), 2, "{s}");
    assert_eq!(
        counter(&s, "fragments_in") as usize,
        pieces(&big_publish("tcp").0, 256, "0").len() + f.len()
    );
    assert_eq!(counter(&s, "errors.bad_fragment"), 0, "{s}");
}

/// The (num, total) of each piece a case sends, given the message's real
/// number of pieces.
type Sent = fn(u64) -> Vec<(u64, u64)>;

#[test]
fn each_malformed_piece_gets_an_error_with_its_id_and_delivers_nothing() {
    let gw = Gateway::start(&[]);
    let mut sub = gw.client();
    sub.subscribe("/frag");
    let mut other = gw.client();
    // Each case: the pieces sent, the last one refused; `n` is the
    // message's real number of pieces.
    let cases: [(Sent, &str); 4] = [
        (|n| vec![(0, n), (n, n)], "not below total"),
        (|n| vec![(0, n), (1, n + 1)], "total differs"),
        (|n| vec![(0, n), (1, n), (1, n)], "arrived twice"),
        (|_| vec![(0, 0)], "total is 0"),
    ];
    for (i, (sent, why)) in cases.iter().enumerate() {
        let id = format!("\"bad-{i}\"");
        let (text, data) = big_publish(&format!("case{i}"));
        let whole = pieces(&text, 256, &id);
        let sent = sent(whole.len() as u64);
        let mut c = gw.client();
        // The first pieces are real ones (they would make the message) ...
        let (last, first) = sent.split_last().expect("a piece");
        for &(num, _) in first {
            c.send_line(&whole[num as usize]);
        }
        // ... the refused one fails it whole.
        c.send_line(&piece(&id, "{", last.0, last.1));
        let e = c.expect_error(format!("bad-{i}"));
        assert!(error_text(&e).contains(why), "{why}: {e}");
        // The rest of the real pieces change nothing: each is refused.
        for line in &whole {
            c.send_line(line);
            c.expect_error(format!("bad-{i}"));
        }
        // Another client sending the same message under the same id is
        // unaffected.
        for line in &whole {
            other.send_line(line);
        }
        other.assert_quiet();
        let got = sub.recv();
        assert_eq!(got["msg"]["data"], data, "{why}: only the other's message");
        sub.assert_quiet();
        c.assert_quiet();
    }
    // On WebSocket too (errors are sent there by default).
    let mut ws = Ws::connect(&gw);
    ws.send_text(&piece("\"w\"", "{", 0, 2));
    ws.send_text(&piece("\"w\"", "{", 0, 2));
    let e = ws.json();
    assert_eq!((&e["level"], &e["id"]), (&"error".into(), &"w".into()));
    assert!(error_text(&e).contains("arrived twice"), "{e}");
    assert!(ws.barrier().is_empty());
    sub.assert_quiet();
    let s = gw.stats();
    assert_eq!(counter(&s, "fragmented_in"), cases.len() as u64, "{s}");
    assert!(counter(&s, "errors.bad_fragment") > cases.len() as u64);
}

#[test]
fn too_large_and_too_many_in_flight_are_refused() {
    let gw = Gateway::start(&["--max-line-bytes", "4096"]);
    let mut c = gw.client();
    c.send_line(&piece("1", &"x".repeat(3_000), 0, 2));
    c.send_line(&piece("1", &"x".repeat(1_000), 1, 2));
    let e = c.expect_error(1);
    assert!(error_text(&e).contains("line limit"), "{e}");
    // The failed message holds its slot until its deadline: 15 more fit.
    for i in 1..fragment::MAX_FRAGMENTED_IN_FLIGHT {
        c.send_line(&piece(&format!("\"m{i}\""), "{", 0, 2));
    }
    c.assert_quiet();
    c.send_line(&piece("\"one-more\"", "{", 0, 2));
    let e = c.expect_error("one-more");
    assert!(error_text(&e).contains("in flight"), "{e}");
    // Another connection has its own table.
    let mut d = gw.client();
    d.send_line(&piece(
        "\"m0\"",
        r#"{"op":"unsubscribe","topic":"/x","id":"inner"}"#,
        0,
        1,
    ));
    d.expect_info("inner");
    let s = gw.stats();
    assert_eq!(counter(&s, "errors.bad_fragment"), 2, "{s}");
}

#[test]
fn an_incomplete_message_expires_and_its_sender_is_told() {
    let gw = Gateway::start(&["--fragment-timeout-ms", "300"]);
    let mut sub = gw.client();
    sub.subscribe("/frag");
    let (text, _) = big_publish("slow");
    let f = pieces(&text, 256, "\"slow\"");
    let mut c = gw.client();
    c.send_line(&f[0]);
    c.send_line(&f[1]);
    let s = gw.stats();
    assert!(counter(&s, "memory_input_bytes") > 512, "held: {s}");
    let dl = deadline(Duration::from_secs(5));
    let e = c.recv_json(dl);
    assert_eq!((&e["level"], &e["id"]), (&"error".into(), &"slow".into()));
    assert!(error_text(&e).contains("300 ms"), "{e}");
    for line in &f[2..] {
        c.send_line(line);
    }
    c.assert_quiet();
    sub.assert_quiet();
    let s = gw.stats();
    assert_eq!(counter(&s, "fragments_expired"), 1, "{s}");
    assert_eq!(counter(&s, "fragmented_in"), 0, "{s}");
    // The same in /metrics.
    let m = crate::http::metrics(&gw);
    let value = |name: &str, label: Option<(&str, &str)>| {
        m.families
            .iter()
            .filter(|f| f.name == name)
            .flat_map(|f| f.samples.iter())
            .find(|x| label.is_none_or(|(k, v)| x.labels.iter().any(|(a, b)| a == k && b == v)))
            .map(|x| x.value)
    };
    assert_eq!(value("rosgate_fragments_expired_total", None), Some(1.0));
    assert_eq!(
        value("rosgate_fragments_in_total", None),
        Some(f.len() as f64)
    );
    assert_eq!(
        value("rosgate_errors_total", Some(("code", "bad_fragment"))),
        Some(1.0)
    );
}

#[test]
fn binary_frames_hold_json_text_and_anything_else_is_refused() {
    let gw = Gateway::start(&[]);
    let mut ws = Ws::connect(&gw);
    ws.send_frame(
        0x2,
        true,
        br#"{"op":"subscribe","topic":"/bin","type":"std_msgs/String","id":"b"}"#,
    );
    let mut tcp = gw.client();
    tcp.publish("/bin", r#"{"data":"hi"}"#);
    let got = ws.json();
    assert_eq!(got["msg"]["data"], "hi", "{got}");
    // A CBOR map ({"op": "publish"}) is not JSON text.
    ws.send_frame(0x2, true, b"\xa1\x62op\x67publish");
    let e = ws.json();
    assert_eq!(e["level"], "error");
    assert!(error_text(&e).contains("CBOR"), "{e}");
    // A binary frame that starts as JSON but is not UTF-8 is judged as a
    // text frame would be.
    ws.send_frame(0x2, true, b"{\"op\":\"\xff\"}");
    let e = ws.json();
    assert!(error_text(&e).contains("UTF-8"), "{e}");
    assert!(ws.barrier().is_empty());
    let s = gw.stats();
    assert_eq!(counter(&s, "errors.binary_frame"), 1, "{s}");
    assert_eq!(counter(&s, "errors.bad_utf8"), 1, "{s}");
}

#[test]
fn a_raw_cdr_publish_reaches_json_subscribers_decoded_by_the_topics_type() {
    let gw = Gateway::start(&[]);
    let mut sub = gw.client();
    let id = "sub-cdr";
    sub.send_line(&format!(
        r#"{{"op":"subscribe","topic":"/cdr","type":"std_msgs/msg/String","id":"{id}"}}"#
    ));
    sub.expect_info(id);
    // std_msgs/msg/String "hi" as CDR, base64 (header 00 01 00 00, u32 3,
    // "hi", NUL), from a WebSocket client whose topic type is rosbridge's
    // short form.
    let mut ws = Ws::connect(&gw);
    ws.send_text(r#"{"op":"advertise","topic":"/cdr","type":"std_msgs/String"}"#);
    ws.send_text(r#"{"op":"publish","topic":"/cdr","msg":{"bytes":"AAEAAAMAAABoaQA="}}"#);
    assert_eq!(sub.recv()["msg"], serde_json::json!({"data": "hi"}));
    // As a list of integers, over TCP.
    let mut tcp = gw.client();
    tcp.publish("/cdr", r#"{"bytes":[0,1,0,0,3,0,0,0,104,111,0]}"#);
    assert_eq!(sub.recv()["msg"]["data"], "ho");
    // Not CDR of the type: an error naming it, nothing delivered.
    tcp.send_line(r#"{"op":"publish","id":"bad","topic":"/cdr","msg":{"bytes":"AAEAAAkAAAA="}}"#);
    let e = tcp.expect_error("bad");
    assert!(error_text(&e).contains("std_msgs/msg/String"), "{e}");
    // A type the gateway does not know: `bytes` may be one of its fields,
    // so the message is relayed as the JSON it is.
    let mut odd = gw.client();
    odd.send_line(r#"{"op":"subscribe","topic":"/odd","type":"test/Odd","id":"o"}"#);
    odd.expect_info("o");
    tcp.send_line(r#"{"op":"advertise","topic":"/odd","type":"test/Odd","id":"a"}"#);
    tcp.expect_info("a");
    tcp.send_line(r#"{"op":"publish","id":"odd","topic":"/odd","msg":{"bytes":"AAEAAA=="}}"#);
    assert_eq!(odd.recv()["msg"], serde_json::json!({"bytes": "AAEAAA=="}));
    assert!(ws.barrier().is_empty());
    sub.assert_quiet();
    let s = gw.stats();
    assert_eq!(counter(&s, "cdr_published"), 2, "{s}");
    assert_eq!(counter(&s, "errors.bad_cdr"), 1, "{s}");
}
