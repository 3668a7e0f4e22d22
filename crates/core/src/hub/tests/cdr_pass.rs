//! ROS 2 samples routed with their CDR (`Bridges::remote_publish_cdr`):
//! `cbor-raw` subscribers get the bytes as they came, JSON subscribers
//! the decoded message, and with only `cbor-raw` subscribers nothing
//! needs decoding (`Bridges::needs_json`).

use super::*;
use rosgate_wire::Raw;

/// `std_msgs/msg/String` "hi" as CDR with two bytes of trailing padding
/// a re-encoding would not make: only the bytes as they came carry them.
const HI: [u8; 13] = [0, 1, 0, 0, 3, 0, 0, 0, b'h', b'i', 0, 0xAA, 0xBB];

fn fed() -> T {
    let mut t = T::new(Limits::default());
    t.hub.enable_federation();
    t
}

/// The binary frames queued for WebSocket client `key`.
fn binary_frames(t: &mut T, key: u32) -> Vec<Vec<u8>> {
    let bytes = t.raw(key);
    let mut out = Vec::new();
    client::Reader::new().feed(&bytes, usize::MAX, |e| match e {
        client::Event::Binary(b) => out.push(b.to_vec()),
        other => panic!("a binary frame expected, got {other:?}"),
    });
    out
}

/// The `bytes` of a cbor-raw publish frame: its last item, a byte string
/// of `len` (< 24) bytes, after the key "bytes".
fn raw_bytes(frame: &[u8], len: usize) -> &[u8] {
    assert!(len < 24);
    let tail = 1 + len;
    assert!(frame.len() > tail + 6, "{frame:?}");
    let (head, body) = frame.split_at(frame.len() - tail);
    assert!(head.ends_with(b"\x65bytes"), "{frame:?}");
    assert_eq!(body[0], 0x40 | len as u8, "{frame:?}");
    &body[1..]
}

fn raw_subscriber(t: &mut T, topic: &str) -> u32 {
    let w = t.open_ws();
    t.ws_send(
        w,
        &format!(
            r#"{{"op":"subscribe","topic":"{topic}","type":"std_msgs/msg/String","compression":"cbor-raw"}}"#
        ),
    );
    // The status reply.
    t.raw(w);
    w
}

#[test]
fn cdr_reaches_cbor_raw_untouched_and_json_subscribers_decoded() {
    let mut t = fed();
    let w = raw_subscriber(&mut t, "/chatter");
    let s = t.open();
    t.send(
        s,
        r#"{"op":"subscribe","topic":"/chatter","type":"std_msgs/msg/String"}"#,
    );
    t.recv(s);
    assert!(t.hub.bridges().needs_json(0, "/chatter", None));
    let now = t.now;
    let json = Raw::from_valid_json(r#"{"data":"hi"}"#);
    t.hub
        .bridges()
        .remote_publish_cdr(0, "/chatter", Some(json), &HI, None, now);
    assert_eq!(t.one(s)["msg"], serde_json::json!({"data": "hi"}));
    let got = binary_frames(&mut t, w);
    assert_eq!(got.len(), 1);
    assert_eq!(raw_bytes(&got[0], HI.len()), &HI[..]);
    assert_eq!(t.hub.counters().get(Counter::CdrIn), 1);
    assert_eq!(t.hub.counters().get(Counter::CdrPassedThrough), 0);
}

#[test]
fn with_only_cbor_raw_subscribers_nothing_is_decoded() {
    let mut t = fed();
    let a = raw_subscriber(&mut t, "/chatter");
    let b = raw_subscriber(&mut t, "/chatter");
    assert!(!t.hub.bridges().needs_json(0, "/chatter", None));
    // Latched: the cache keeps JSON for later subscribers of any encoding.
    assert!(t.hub.bridges().needs_json(0, "/chatter", Some(1)));
    // Nobody subscribes: nothing is needed.
    assert!(!t.hub.bridges().needs_json(0, "/other", None));
    let now = t.now;
    t.hub
        .bridges()
        .remote_publish_cdr(0, "/chatter", None, &HI, None, now);
    for w in [a, b] {
        let got = binary_frames(&mut t, w);
        assert_eq!(got.len(), 1);
        assert_eq!(raw_bytes(&got[0], HI.len()), &HI[..]);
    }
    assert_eq!(t.hub.counters().get(Counter::CdrIn), 1);
    assert_eq!(t.hub.counters().get(Counter::CdrPassedThrough), 1);
    // Encoded once for both (the CDR put in its frame), never failed.
    assert_eq!(t.hub.counters().get(Counter::EncodedCborRawFrames), 1);
    assert_eq!(t.hub.counters().get(Counter::EncodeFailed), 0);
    // A JSON subscriber joins: now the sample must be decoded.
    let s = t.open();
    t.send(
        s,
        r#"{"op":"subscribe","topic":"/chatter","type":"std_msgs/msg/String"}"#,
    );
    assert!(t.hub.bridges().needs_json(0, "/chatter", None));
    // A throttled cbor-raw one (it may hold a copy without the CDR) does
    // too.
    t.send(s, r#"{"op":"unsubscribe","topic":"/chatter"}"#);
    assert!(!t.hub.bridges().needs_json(0, "/chatter", None));
    let th = t.open_ws();
    t.ws_send(
        th,
        r#"{"op":"subscribe","topic":"/chatter","type":"std_msgs/msg/String","compression":"cbor-raw","throttle_rate":100}"#,
    );
    assert!(t.hub.bridges().needs_json(0, "/chatter", None));
}

#[test]
fn with_federation_off_nothing_is_routed() {
    let mut t = T::new(Limits::default());
    let w = raw_subscriber(&mut t, "/chatter");
    assert!(!t.hub.bridges().needs_json(0, "/chatter", None));
    let now = t.now;
    t.hub
        .bridges()
        .remote_publish_cdr(0, "/chatter", None, &HI, None, now);
    assert!(t.raw(w).is_empty());
    assert_eq!(t.hub.counters().get(Counter::CdrIn), 0);
}
