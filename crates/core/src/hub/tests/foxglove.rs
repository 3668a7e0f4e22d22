//! Foxglove sessions at the hub (`hub/foxglove.rs`) on a fake clock: the
//! ROS 2 graph's topics become channels, and a ROS 2 sample's CDR reaches
//! a session's subscription as it came, never decoded.

use super::*;
use crate::hub::RemoteGraph;

/// `std_msgs/msg/String` "hi" as CDR with two bytes of trailing padding a
/// re-encoding would not make: only the bytes as they came carry them.
const HI: [u8; 13] = [0, 1, 0, 0, 3, 0, 0, 0, b'h', b'i', 0, 0xAA, 0xBB];

/// A WebSocket connection whose opening offered `foxglove.websocket.v1`,
/// its `serverInfo` read.
fn open_foxglove(t: &mut T) -> u32 {
    let key = t
        .hub
        .open_as(Transport::WebSocket, t.now)
        .expect("admitted")
        .key;
    let hs = client::request(
        "x",
        "/",
        WS_KEY,
        &[("Sec-WebSocket-Protocol", "foxglove.websocket.v1")],
    );
    t.hub.on_bytes(key, hs.as_bytes(), t.now);
    let raw = t.raw(key);
    let head = client::Response::parse(&raw)
        .expect("an HTTP response")
        .expect("a complete head");
    let rest = raw[head.len..].to_vec();
    let mut msgs = Vec::new();
    client::Reader::new().feed(&rest, usize::MAX, |e| {
        if let client::Event::Text(t) = e {
            msgs.push(serde_json::from_slice::<Value>(t).expect("JSON"));
        }
    });
    assert_eq!(msgs[0]["op"], "serverInfo", "{msgs:?}");
    key
}

/// The text messages and binary messages queued for `key`.
fn frames(t: &mut T, key: u32) -> (Vec<Value>, Vec<Vec<u8>>) {
    let bytes = t.raw(key);
    let (mut text, mut bin) = (Vec::new(), Vec::new());
    client::Reader::new().feed(&bytes, usize::MAX, |e| match e {
        client::Event::Text(m) => text.push(serde_json::from_slice(m).expect("JSON")),
        client::Event::Binary(b) => bin.push(b.to_vec()),
        other => panic!("{other:?}"),
    });
    (text, bin)
}

#[test]
fn ros2_topics_are_channels_and_their_cdr_goes_out_untouched() {
    let mut t = T::new(Limits::default());
    t.hub.enable_federation();
    let fx = open_foxglove(&mut t);
    let graph = RemoteGraph::of(
        vec!["/talker".into()],
        vec![("/chatter".into(), "std_msgs/msg/String".into(), 0)],
    );
    t.hub.bridges().install_remote_graph("ros2", 0, graph);
    let now = t.now;
    t.hub.expire(now);
    let (text, _) = frames(&mut t, fx);
    let adv = text
        .iter()
        .find(|v| v["op"] == "advertise")
        .unwrap_or_else(|| panic!("{text:?}"));
    let ch = &adv["channels"][0];
    assert_eq!(ch["topic"], "/chatter");
    assert_eq!(ch["encoding"], "cdr");
    let chan = ch["id"].as_u64().unwrap();
    t.ws_send(
        fx,
        &format!(r#"{{"op":"subscribe","subscriptions":[{{"id":7,"channelId":{chan}}}]}}"#),
    );
    // Only a session taking CDR subscribes: nothing needs decoding.
    assert!(!t.hub.bridges().needs_json(0, "/chatter", None));
    let now = t.now;
    t.hub
        .bridges()
        .remote_publish_cdr(0, "/chatter", None, &HI, None, now);
    let (_, bin) = frames(&mut t, fx);
    assert_eq!(bin.len(), 1, "{bin:?}");
    assert_eq!(&bin[0][..5], &[0x01, 7, 0, 0, 0]);
    assert_eq!(&bin[0][13..], &HI[..]);
    assert_eq!(t.hub.counters().get(Counter::CdrPassedThrough), 1);
    assert_eq!(t.hub.counters().get(Counter::EncodedFoxgloveFrames), 1);
    // The graph forgets the topic: the channel goes, and its subscription.
    t.hub
        .bridges()
        .install_remote_graph("ros2", 0, RemoteGraph::of(vec![], vec![]));
    let now = t.now;
    t.hub.expire(now);
    let (text, _) = frames(&mut t, fx);
    assert!(
        text.iter()
            .any(|v| v["op"] == "unadvertise" && v["channelIds"] == serde_json::json!([chan])),
        "{text:?}"
    );
    assert!(!t.hub.bridges().needs_json(0, "/chatter", None));
}

#[test]
fn one_json_publish_is_encoded_to_cdr_once_for_every_session() {
    let mut t = T::new(Limits::default());
    let sessions: Vec<u32> = (0..3).map(|_| open_foxglove(&mut t)).collect();
    let p = t.open();
    t.send(
        p,
        r#"{"op":"advertise","topic":"/c","type":"std_msgs/msg/String"}"#,
    );
    let now = t.now;
    t.hub.expire(now);
    for (i, &fx) in sessions.iter().enumerate() {
        let (text, _) = frames(&mut t, fx);
        let chan = text.iter().find(|v| v["op"] == "advertise").unwrap()["channels"][0]["id"]
            .as_u64()
            .unwrap();
        // Two sessions number their subscription alike, one not.
        let sub = if i == 2 { 9 } else { 0 };
        t.ws_send(
            fx,
            &format!(r#"{{"op":"subscribe","subscriptions":[{{"id":{sub},"channelId":{chan}}}]}}"#),
        );
    }
    t.send(p, r#"{"op":"publish","topic":"/c","msg":{"data":"hi"}}"#);
    for &fx in &sessions {
        let (_, bin) = frames(&mut t, fx);
        assert_eq!(bin.len(), 1);
        assert_eq!(&bin[0][13..], &[0, 1, 0, 0, 3, 0, 0, 0, b'h', b'i', 0]);
    }
    // One frame per subscription id (two ids), one CDR for all.
    assert_eq!(t.hub.counters().get(Counter::EncodedFoxgloveFrames), 2);
}

/// A masked client binary frame.
fn ws_binary(payload: &[u8]) -> Vec<u8> {
    client::frame(rosgate_wire::ws::frame::OP_BINARY, payload, [3, 5, 7, 11])
}

/// Client message data on client channel `chan`.
fn client_data(chan: u32, cdr: &[u8]) -> Vec<u8> {
    let mut b = vec![0x01];
    b.extend_from_slice(&chan.to_le_bytes());
    b.extend_from_slice(cdr);
    ws_binary(&b)
}

#[test]
fn client_cdr_only_cdr_subscribers_read_is_never_decoded() {
    let mut t = T::new(Limits::default());
    let publisher = open_foxglove(&mut t);
    let sub = open_foxglove(&mut t);
    t.ws_send(
        publisher,
        r#"{"op":"advertise","channels":[{"id":4,"topic":"/c","encoding":"cdr","schemaName":"std_msgs/msg/String"}]}"#,
    );
    let now = t.now;
    t.hub.expire(now);
    let (text, _) = frames(&mut t, sub);
    let chan = text
        .iter()
        .find(|v| v["op"] == "advertise")
        .unwrap_or_else(|| panic!("{text:?}"))["channels"][0]["id"]
        .as_u64()
        .unwrap();
    t.ws_send(
        sub,
        &format!(r#"{{"op":"subscribe","subscriptions":[{{"id":3,"channelId":{chan}}}]}}"#),
    );
    frames(&mut t, publisher);
    let now = t.now;
    t.hub.on_bytes(publisher, &client_data(4, &HI), now);
    let (_, bin) = frames(&mut t, sub);
    assert_eq!(bin.len(), 1, "{bin:?}");
    assert_eq!(
        &bin[0][13..],
        &HI[..],
        "the client's bytes, padding and all"
    );
    let c = t.hub.counters();
    assert_eq!(c.get(Counter::CdrPublishedUntouched), 1);
    assert_eq!(c.get(Counter::CdrPublished), 0, "no JSON made");
    // Bytes that do not frame as the type: an error status, nothing out.
    let now = t.now;
    t.hub.on_bytes(
        publisher,
        &client_data(4, &[0, 1, 0, 0, 9, 0, 0, 0, b'h']),
        now,
    );
    let (text, _) = frames(&mut t, publisher);
    assert!(
        text.iter().any(|v| v["op"] == "status"
            && v["level"] == 2
            && v["message"].as_str().unwrap().contains("not CDR")),
        "{text:?}"
    );
    assert!(frames(&mut t, sub).1.is_empty());
    // A JSON subscriber joins: from now on the CDR is decoded for it.
    let plain = t.open();
    t.send(
        plain,
        r#"{"op":"subscribe","topic":"/c","type":"std_msgs/msg/String"}"#,
    );
    let now = t.now;
    t.hub.on_bytes(publisher, &client_data(4, &HI), now);
    let got = t.recv(plain);
    assert_eq!(got.last().unwrap()["msg"]["data"], "hi", "{got:?}");
    assert_eq!(&frames(&mut t, sub).1[0][13..], &HI[..]);
    let c = t.hub.counters();
    assert_eq!(c.get(Counter::CdrPublished), 1);
    assert_eq!(c.get(Counter::CdrPublishedUntouched), 1);
}

#[test]
fn a_throttled_subscription_gets_the_first_and_the_newest_of_each_interval() {
    let mut t = T::new(Limits::default());
    let fx = open_foxglove(&mut t);
    let p = t.open();
    t.send(
        p,
        r#"{"op":"advertise","topic":"/c","type":"std_msgs/msg/String"}"#,
    );
    let now = t.now;
    t.hub.expire(now);
    let (text, _) = frames(&mut t, fx);
    let chan = text.iter().find(|v| v["op"] == "advertise").unwrap()["channels"][0]["id"]
        .as_u64()
        .unwrap();
    t.ws_send(
        fx,
        &format!(r#"{{"op":"subscribe","subscriptions":[{{"id":5,"channelId":{chan},"throttleMs":100}}]}}"#),
    );
    for s in ["a", "b", "c"] {
        t.send(
            p,
            &format!(r#"{{"op":"publish","topic":"/c","msg":{{"data":"{s}"}}}}"#),
        );
    }
    let (_, bin) = frames(&mut t, fx);
    assert_eq!(bin.len(), 1, "the first at once");
    assert_eq!(&bin[0][13..], &[0, 1, 0, 0, 2, 0, 0, 0, b'a', 0]);
    t.advance(100);
    let (_, bin) = frames(&mut t, fx);
    assert_eq!(bin.len(), 1, "the interval's newest at its end");
    assert_eq!(&bin[0][..5], &[0x01, 5, 0, 0, 0]);
    assert_eq!(&bin[0][13..], &[0, 1, 0, 0, 2, 0, 0, 0, b'c', 0]);
    assert_eq!(t.hub.counters().get(Counter::ThrottleDropped), 1);
}
