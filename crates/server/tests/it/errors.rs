//! Malformed input: error status (with the id when it can be read), the connection stays open
//! and usable, the error is counted by kind, and unrelated connections are unaffected.

use crate::support::*;
use serde_json::{json, Value};

enum Id {
    Exactly(Value),
    Absent,
    /// The id may or may not be readable; if present it must be this one.
    IfPresent(Value),
}

struct Case {
    line: Vec<u8>,
    id: Id,
    /// Acceptable error kinds (stats.errors.<kind> must grow by one for one of them).
    kinds: &'static [&'static str],
}

fn case(line: &str, id: Id, kinds: &'static [&'static str]) -> Case {
    Case {
        line: line.as_bytes().to_vec(),
        id,
        kinds,
    }
}

fn run_cases(cases: Vec<Case>) {
    let gw = Gateway::start(&[]);
    let mut bystander = gw.client();
    bystander.subscribe("/bystander");
    let mut failures = Vec::new();
    for (n, c) in cases.into_iter().enumerate() {
        let shown = String::from_utf8_lossy(&c.line)
            .chars()
            .take(120)
            .collect::<String>();
        let before = gw.stats();
        let mut cl = gw.client();
        let mut line = c.line.clone();
        line.push(b'\n');
        cl.send_raw(&line);
        let reply = match cl.try_recv_line(deadline(REPLY)) {
            Recv::Line(l) => parse_line(&String::from_utf8_lossy(&l)),
            other => {
                failures.push(format!("case {n} {shown}: no reply: {other:?}"));
                continue;
            }
        };
        let ok_status = reply["op"] == "status"
            && reply["level"] == "error"
            && reply["msg"].as_str().is_some_and(|m| !m.is_empty());
        let ok_id = match &c.id {
            Id::Exactly(want) => reply.get("id") == Some(want),
            Id::Absent => reply.get("id").is_none(),
            Id::IfPresent(want) => match reply.get("id") {
                None => true,
                Some(v) => v == want,
            },
        };
        if !ok_status || !ok_id {
            failures.push(format!("case {n} {shown}: bad reply {reply}"));
            continue;
        }
        // The connection stays open and usable.
        let follow = format!("follow-{n}");
        cl.send_line(&format!(
            r#"{{"op":"subscribe","topic":"/follow","type":"t","id":"{follow}"}}"#
        ));
        match cl.try_recv_line(deadline(REPLY)) {
            Recv::Line(l) => {
                let v = parse_line(&String::from_utf8_lossy(&l));
                if !(v["op"] == "status" && v["level"] == "info" && v["id"] == follow.as_str()) {
                    failures.push(format!("case {n} {shown}: follow-up got {v}"));
                    continue;
                }
            }
            other => {
                failures.push(format!(
                    "case {n} {shown}: connection unusable after error: {other:?}"
                ));
                continue;
            }
        }
        let after = gw.stats();
        let grew: Vec<&str> = c
            .kinds
            .iter()
            .copied()
            .filter(|k| {
                counter(&after, &format!("errors.{k}"))
                    == counter(&before, &format!("errors.{k}")) + 1
            })
            .collect();
        if grew.len() != 1 || total_errors(&after) != total_errors(&before) + 1 {
            failures.push(format!(
                "case {n} {shown}: expected errors.{:?} +1 (total +1); before {} after {}",
                c.kinds, before["errors"], after["errors"]
            ));
        }
    }
    // Unrelated connections are unaffected.
    let mut p = gw.client();
    p.publish("/bystander", r#""alive""#);
    assert_eq!(
        bystander.recv(),
        json!({"op":"publish","topic":"/bystander","msg":"alive"})
    );
    bystander.assert_quiet();
    let mut gw = gw;
    gw.assert_alive();
    assert!(
        failures.is_empty(),
        "failing cases:\n{}",
        failures.join("\n")
    );
}

#[test]
fn unknown_and_missing_op() {
    run_cases(vec![
        case(
            r#"{"op":"nope","id":7}"#,
            Id::Exactly(json!(7)),
            &["unknown_op"],
        ),
        case(r#"{"op":"nope"}"#, Id::Absent, &["unknown_op"]),
        case(
            r#"{"op":"Publish","topic":"/t","msg":1,"id":"case"}"#,
            Id::Exactly(json!("case")),
            &["unknown_op"],
        ),
        case(
            r#"{"op":"","id":"e"}"#,
            Id::Exactly(json!("e")),
            &["unknown_op"],
        ),
        case(r#"{"id":"m"}"#, Id::Exactly(json!("m")), &["missing_op"]),
        case(r#"{}"#, Id::Absent, &["missing_op"]),
        case(r#"{"topic":"/t","msg":1}"#, Id::Absent, &["missing_op"]),
        case(
            r#"{"op":5,"id":"x"}"#,
            Id::Exactly(json!("x")),
            &["wrong_type", "missing_op"],
        ),
        case(
            r#"{"op":null,"id":"y"}"#,
            Id::Exactly(json!("y")),
            &["wrong_type", "missing_op"],
        ),
        case(
            r#"{"op":["subscribe"],"id":"z"}"#,
            Id::Exactly(json!("z")),
            &["wrong_type", "missing_op"],
        ),
    ]);
}

#[test]
fn non_object_lines() {
    run_cases(vec![
        case("[1,2]", Id::Absent, &["not_object"]),
        case(r#""x""#, Id::Absent, &["not_object"]),
        case("42", Id::Absent, &["not_object"]),
        case("null", Id::Absent, &["not_object"]),
        case("true", Id::Absent, &["not_object"]),
        case(
            r#"[{"op":"subscribe","topic":"/t","type":"x","id":1}]"#,
            Id::Absent,
            &["not_object"],
        ),
    ]);
}

#[test]
fn invalid_json() {
    run_cases(vec![
        case(r#"{"op":"#, Id::Absent, &["bad_json"]),
        case(r#"{op:"subscribe"}"#, Id::Absent, &["bad_json"]),
        case(
            r#"{"op":"subscribe","topic":"/t",}"#,
            Id::Absent,
            &["bad_json"],
        ),
        case("not json at all", Id::Absent, &["bad_json"]),
        case(
            r#"{"op":"subscribe","topic":"/t","type":"x","id":"tr"} trailing"#,
            Id::IfPresent(json!("tr")),
            &["bad_json"],
        ),
        case(
            r#"{"op":"publish","topic":"/t","msg":"unterminated}"#,
            Id::Absent,
            &["bad_json"],
        ),
        case("\u{0}", Id::Absent, &["bad_json"]),
    ]);
}

#[test]
fn invalid_utf8() {
    let mut cases = Vec::new();
    for bad in [
        &b"\xff"[..],
        b"\xc3",
        b"\xed\xa0\x80",
        b"\xc0\xaf",
        b"\xf8\x88\x80\x80\x80",
    ] {
        let mut line = br#"{"op":"subscribe","topic":"/"#.to_vec();
        line.extend_from_slice(bad);
        line.extend_from_slice(br#"","type":"x","id":"u"}"#);
        cases.push(Case {
            line,
            id: Id::IfPresent(json!("u")),
            kinds: &["bad_utf8"],
        });
    }
    // Invalid UTF-8 inside a payload as well.
    let mut line = br#"{"op":"publish","topic":"/bystander","msg":""#.to_vec();
    line.extend_from_slice(b"\xfe\xff");
    line.extend_from_slice(br#""}"#);
    cases.push(Case {
        line,
        id: Id::Absent,
        kinds: &["bad_utf8"],
    });
    run_cases(cases);
}

#[test]
fn missing_required_fields() {
    run_cases(vec![
        case(
            r#"{"op":"subscribe","id":"s1"}"#,
            Id::Exactly(json!("s1")),
            &["missing_field"],
        ),
        case(
            r#"{"op":"subscribe","topic":"/t","id":"s1b"}"#,
            Id::Exactly(json!("s1b")),
            &["missing_field"],
        ),
        case(
            r#"{"op":"unsubscribe","id":"s1c"}"#,
            Id::Exactly(json!("s1c")),
            &["missing_field"],
        ),
        case(
            r#"{"op":"advertise","topic":"/t","id":"a1"}"#,
            Id::Exactly(json!("a1")),
            &["missing_field"],
        ),
        case(
            r#"{"op":"advertise","type":"t","id":"a2"}"#,
            Id::Exactly(json!("a2")),
            &["missing_field"],
        ),
        case(
            r#"{"op":"unadvertise","id":"a3"}"#,
            Id::Exactly(json!("a3")),
            &["missing_field"],
        ),
        case(
            r#"{"op":"publish","topic":"/bystander","id":"p1"}"#,
            Id::Exactly(json!("p1")),
            &["missing_field"],
        ),
        case(
            r#"{"op":"publish","msg":1,"id":"p2"}"#,
            Id::Exactly(json!("p2")),
            &["missing_field"],
        ),
        case(
            r#"{"op":"advertise_service","type":"t","id":"as1"}"#,
            Id::Exactly(json!("as1")),
            &["missing_field"],
        ),
        case(
            r#"{"op":"advertise_service","service":"/s","id":"as2"}"#,
            Id::Exactly(json!("as2")),
            &["missing_field"],
        ),
        case(
            r#"{"op":"unadvertise_service","id":"us1"}"#,
            Id::Exactly(json!("us1")),
            &["missing_field"],
        ),
        case(
            r#"{"op":"call_service","id":"c1","args":{}}"#,
            Id::Exactly(json!("c1")),
            &["missing_field"],
        ),
        case(
            r#"{"op":"call_service","service":"/s","id":"c2"}"#,
            Id::Exactly(json!("c2")),
            &["missing_field"],
        ),
        case(
            r#"{"op":"call_service","service":"/s","args":{}}"#,
            Id::Absent,
            &["missing_id"],
        ),
        case(
            r#"{"op":"service_response","service":"/s","values":1,"result":true}"#,
            Id::Absent,
            &["missing_id", "missing_field"],
        ),
    ]);
}

#[test]
fn wrong_typed_fields() {
    run_cases(vec![
        case(
            r#"{"op":"subscribe","topic":5,"type":"x","id":"w1"}"#,
            Id::Exactly(json!("w1")),
            &["wrong_type"],
        ),
        case(
            r#"{"op":"subscribe","topic":"/t","type":["x"],"id":"w2"}"#,
            Id::Exactly(json!("w2")),
            &["wrong_type"],
        ),
        case(
            r#"{"op":"unsubscribe","topic":null,"id":"w3"}"#,
            Id::Exactly(json!("w3")),
            &["wrong_type"],
        ),
        case(
            r#"{"op":"advertise","topic":"/t","type":7,"id":"w4"}"#,
            Id::Exactly(json!("w4")),
            &["wrong_type"],
        ),
        case(
            r#"{"op":"unadvertise","topic":{"a":1},"id":"w5"}"#,
            Id::Exactly(json!("w5")),
            &["wrong_type"],
        ),
        case(
            r#"{"op":"publish","topic":true,"msg":1,"id":"w6"}"#,
            Id::Exactly(json!("w6")),
            &["wrong_type"],
        ),
        case(
            r#"{"op":"advertise_service","service":1,"type":"t","id":"w7"}"#,
            Id::Exactly(json!("w7")),
            &["wrong_type"],
        ),
        case(
            r#"{"op":"advertise_service","service":"/s","type":false,"id":"w8"}"#,
            Id::Exactly(json!("w8")),
            &["wrong_type"],
        ),
        case(
            r#"{"op":"unadvertise_service","service":[],"id":"w9"}"#,
            Id::Exactly(json!("w9")),
            &["wrong_type"],
        ),
        case(
            r#"{"op":"call_service","service":2,"id":"w10","args":{}}"#,
            Id::Exactly(json!("w10")),
            &["wrong_type"],
        ),
        case(
            r#"{"op":"service_response","service":3,"id":"w11","values":1,"result":true}"#,
            Id::Exactly(json!("w11")),
            &["wrong_type", "unknown_response"],
        ),
    ]);
}

#[test]
fn nesting_deeper_than_127_in_payload() {
    let gw = Gateway::start(&[]);
    let mut sub = gw.client();
    sub.subscribe("/deep");
    let mut p = gw.client();
    // Comfortably within the limit: delivered intact.
    let ok = nested(120);
    p.publish("/deep", &ok);
    let raw = sub.recv_raw(deadline(REPLY));
    assert!(raw.contains(&ok), "depth-120 payload altered");
    // 127 levels in the payload make 128 with the request: serde_json
    // clients could not read the forwarded frame.
    for depth in [127usize, 129, 200, 100_000] {
        let before = gw.stats();
        p.publish("/deep", &nested(depth));
        p.expect_error_no_id();
        let after = gw.stats();
        assert_eq!(
            counter(&after, "errors.too_deep"),
            counter(&before, "errors.too_deep") + 1,
            "depth {depth}: {after}"
        );
        gw.client().assert_quiet(); // a fresh client is served
    }
    // Deep objects too, and deep call args.
    let deep_obj = format!("{}1{}", r#"{"a":"#.repeat(300), "}".repeat(300));
    p.publish("/deep", &deep_obj);
    p.expect_error_no_id();
    p.call("/deep-srv", r#""dc""#, &nested(1000));
    let e = p.recv();
    assert_eq!(e["op"], "status", "{e}");
    assert_eq!(e["level"], "error", "{e}");
    if let Some(id) = e.get("id") {
        assert_eq!(id, "dc", "{e}");
    }
    sub.assert_quiet();
    p.assert_quiet();
}

#[test]
fn error_status_returns_raw_id_byte_for_byte() {
    let gw = Gateway::start(&[]);
    let mut c = gw.client();
    c.send_line(r#"{"op":"nope","id":{"a": [1, 2.50]}}"#);
    let raw = c.recv_raw(deadline(REPLY));
    assert!(raw.contains(r#""id":{"a": [1, 2.50]}"#), "{raw}");
    assert_status(&parse_line(&raw), "error", Some(&json!({"a":[1,2.5]})));
    c.send_line(r#"{"op":"subscribe","id":12345678901234567890}"#);
    let raw = c.recv_raw(deadline(REPLY));
    assert!(raw.contains(r#""id":12345678901234567890"#), "{raw}");
}

#[test]
fn garbage_flood_never_kills_the_gateway() {
    let gw = Gateway::start(&[]);
    let mut bystander = gw.client();
    bystander.subscribe("/b");
    let mut c = gw.client();
    // Deterministic pseudo-random garbage lines, each starting with '#', no newlines inside.
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut data = Vec::new();
    const LINES: usize = 300;
    for _ in 0..LINES {
        data.push(b'#');
        for _ in 0..100 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let b = (x & 0xff) as u8;
            data.push(if b == b'\n' { b'.' } else { b });
        }
        data.push(b'\n');
    }
    c.send_raw(&data);
    for i in 0..LINES {
        let v = c.recv();
        assert!(
            v["op"] == "status" && v["level"] == "error",
            "garbage line {i}: {v}"
        );
    }
    c.assert_quiet();
    let mut p = gw.client();
    p.publish("/b", "1");
    assert_eq!(bystander.recv()["msg"], 1);
    let mut gw = gw;
    gw.assert_alive();
}
