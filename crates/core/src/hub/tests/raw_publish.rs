//! Raw CDR publishes (`hub/raw_publish.rs`): decoded once by the topic's
//! type for JSON subscribers; every refusal names the topic and type.

use super::*;

/// `std_msgs/msg/String` "hi" as CDR: header, u32 length (with the NUL),
/// the bytes, the NUL.
const HI: [u8; 11] = [0, 1, 0, 0, 3, 0, 0, 0, b'h', b'i', 0];

fn b64(bytes: &[u8]) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::new();
    for c in bytes.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                s.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                s.push('=');
            }
        }
    }
    s
}

fn subscribed(t: &mut T, topic: &str, ty: &str) -> u32 {
    let s = t.open();
    t.send(
        s,
        &format!(r#"{{"op":"subscribe","topic":"{topic}","type":"{ty}"}}"#),
    );
    t.recv(s);
    s
}

#[test]
fn raw_cdr_is_decoded_once_by_the_topics_type() {
    let mut t = T::new(Limits::default());
    let s = subscribed(&mut t, "/chatter", "std_msgs/msg/String");
    let w = t.open_ws();
    t.ws_send(
        w,
        r#"{"op":"subscribe","topic":"/chatter","type":"std_msgs/String"}"#,
    );
    let p = t.open();
    t.send(
        p,
        &format!(
            r#"{{"op":"publish","topic":"/chatter","msg":{{"bytes":"{}"}}}}"#,
            b64(&HI)
        ),
    );
    assert_eq!(t.one(s)["msg"], serde_json::json!({"data": "hi"}));
    assert_eq!(t.ws_recv(w)[0]["msg"]["data"], "hi");
    // A list of integers says the same; so does a node's publish (the
    // general path).
    let list = serde_json::to_string(&HI.to_vec()).expect("JSON");
    t.send(
        p,
        &format!(r#"{{"op":"publish","topic":"/chatter","msg":{{ "bytes" : {list}}}}}"#),
    );
    assert_eq!(t.one(s)["msg"]["data"], "hi");
    assert!(t.recv(p).is_empty(), "no status for a good publish");
    assert_eq!(t.hub.counters().get(Counter::CdrPublished), 2);
    // More members than `bytes`: an ordinary message, passed as it is.
    t.send(
        p,
        r#"{"op":"publish","topic":"/chatter","msg":{"bytes":"AA==","data":"x"}}"#,
    );
    assert_eq!(t.one(s)["msg"]["bytes"], "AA==");
}

#[test]
fn each_refusal_names_the_type_and_delivers_nothing() {
    let mut t = T::new(Limits::default());
    let known = subscribed(&mut t, "/k", "std_msgs/msg/String");
    let unknown = subscribed(&mut t, "/u", "test/Unknown");
    let p = t.open();
    let cases = [
        (
            "/k",
            r#""bytes":"AAEAAAUAAAA=""#,
            "not CDR of std_msgs/msg/String",
        ),
        ("/k", r#""bytes":"%%%""#, "base64"),
        ("/k", r#""bytes":[1,2,300]"#, "base64"),
    ];
    for (i, (topic, member, why)) in cases.iter().enumerate() {
        t.send(
            p,
            &format!(r#"{{"op":"publish","id":{i},"topic":"{topic}","msg":{{{member}}}}}"#),
        );
        let e = t.one(p);
        assert_eq!((&e["level"], &e["id"]), (&"error".into(), &i.into()));
        let msg = e["msg"].as_str().expect("text");
        assert!(msg.contains(why) && msg.contains(topic), "{why}: {msg}");
    }
    assert!(t.recv(known).is_empty() && t.recv(unknown).is_empty());
    let c = t.hub.counters();
    assert_eq!(c.errors_of(ErrorCode::BadCdr), cases.len() as u64);
    assert_eq!(c.get(Counter::CdrPublished), 0);
}

#[test]
fn without_a_known_type_bytes_is_an_ordinary_member() {
    let mut t = T::new(Limits::default());
    let unknown = subscribed(&mut t, "/u", "test/Unknown");
    let untyped = subscribed(&mut t, "/none", "");
    let p = t.open();
    for topic in ["/u", "/none"] {
        t.send(
            p,
            &format!(r#"{{"op":"publish","id":1,"topic":"{topic}","msg":{{"bytes":"AAEAAA=="}}}}"#),
        );
    }
    assert_eq!(t.one(unknown)["msg"]["bytes"], "AAEAAA==");
    assert_eq!(t.one(untyped)["msg"]["bytes"], "AAEAAA==");
    assert!(t.recv(p).is_empty());
    let c = t.hub.counters();
    assert_eq!(c.errors_of(ErrorCode::BadCdr), 0);
    assert_eq!(c.get(Counter::CdrPublished), 0);
}
