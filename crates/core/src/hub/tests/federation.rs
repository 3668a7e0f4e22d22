//! The federation seam (`hub/federation.rs`) on a fake clock: bridges,
//! interest changes, and no echo of remote samples.

use super::*;

fn fed() -> T {
    let mut t = T::new(Limits::default());
    t.hub.enable_federation();
    t
}

fn changes(t: &mut T) -> Vec<(String, bool)> {
    let mut v = Vec::new();
    let now = t.now;
    t.hub.take_interest_changes(&mut v, now);
    v.into_iter()
        .map(|c| (c.topic.to_string(), c.wanted))
        .collect()
}

fn publishes(lines: &[Value]) -> Vec<Value> {
    lines
        .iter()
        .filter(|v| v["op"] == "publish")
        .map(|v| v["msg"].clone())
        .collect()
}

fn bridge(t: &T) -> u32 {
    t.hub.federation_links().next().expect("a bridge").1
}

#[test]
fn interest_is_reported_once_per_topic_and_follows_the_last_local_subscriber() {
    let mut t = fed();
    let (a, b) = (t.open(), t.open());
    assert!(changes(&mut t).is_empty());
    t.send(a, r#"{"op":"subscribe","topic":"/x","type":"t"}"#);
    t.send(b, r#"{"op":"subscribe","topic":"/x","type":"t"}"#);
    assert!(t.hub.has_backlog(), "the shell must not sleep on a change");
    assert_eq!(changes(&mut t), vec![("/x".to_string(), true)]);
    t.send(a, r#"{"op":"unsubscribe","topic":"/x"}"#);
    assert!(changes(&mut t).is_empty(), "b still listens");
    t.hub.close(b, CloseReason::PeerClosed, t.now);
    t.free_closed();
    assert_eq!(changes(&mut t), vec![("/x".to_string(), false)]);
    // Came and went within one turn: no change at all.
    t.send(a, r#"{"op":"subscribe","topic":"/y","type":"t"}"#);
    t.send(a, r#"{"op":"unsubscribe","topic":"/y"}"#);
    assert!(changes(&mut t).is_empty());
}

#[test]
fn a_bridge_subscribes_for_other_gateways_and_is_never_local_interest() {
    let mut t = fed();
    let p = t.open();
    t.hub.remote_interest(0, "/x", true, t.now);
    assert!(changes(&mut t).is_empty(), "a bridge is not local interest");
    let br = bridge(&t);
    t.recv(br);
    t.send(p, r#"{"op":"publish","topic":"/x","msg":{"n":1}}"#);
    assert_eq!(publishes(&t.recv(br)), vec![serde_json::json!({"n":1})]);
    // Withdrawn: nothing more for the bridge.
    t.hub.remote_interest(0, "/x", false, t.now);
    t.send(p, r#"{"op":"publish","topic":"/x","msg":{"n":2}}"#);
    assert!(publishes(&t.recv(br)).is_empty());
}

#[test]
fn remote_samples_reach_local_subscribers_and_never_a_bridge() {
    let mut t = fed();
    let s = t.open();
    t.send(s, r#"{"op":"subscribe","topic":"/x","type":"t"}"#);
    t.recv(s);
    // Another gateway wants /x too: the bridge subscribes.
    t.hub.remote_interest(0, "/x", true, t.now);
    let br = bridge(&t);
    t.recv(br);
    t.hub.remote_publish(
        0,
        "/x",
        rosgate_wire::Raw::from_valid_json(r#"{"r":1}"#),
        t.now,
    );
    assert_eq!(publishes(&t.recv(s)), vec![serde_json::json!({"r":1})]);
    assert!(
        publishes(&t.recv(br)).is_empty(),
        "no echo into the network"
    );
    assert_eq!(t.hub.counters().get(Counter::FederationIn), 1);
}

#[test]
fn with_federation_off_nothing_is_reported_or_opened() {
    let mut t = T::new(Limits::default());
    let a = t.open();
    t.send(a, r#"{"op":"subscribe","topic":"/x","type":"t"}"#);
    assert!(changes(&mut t).is_empty());
    t.hub.remote_interest(0, "/x", true, t.now);
    assert_eq!(t.hub.federation_links().count(), 0);
    assert_eq!(t.hub.conn_count(), 1);
}

#[test]
fn a_bridge_closed_by_the_gateway_comes_back_with_every_remote_interest() {
    let mut t = fed();
    let p = t.open();
    t.hub.remote_interest(0, "/x", true, t.now);
    t.hub.remote_interest(0, "/y", true, t.now);
    let br = bridge(&t);
    t.hub.close(br, CloseReason::MemoryPressure, t.now);
    t.free_closed();
    assert_eq!(
        t.hub.federation_links().count(),
        0,
        "a closed bridge is not drained"
    );
    // The next turn reopens it, with /x and /y again.
    changes(&mut t);
    let br2 = bridge(&t);
    t.recv(br2);
    for topic in ["/x", "/y"] {
        t.send(
            p,
            &format!(r#"{{"op":"publish","topic":"{topic}","msg":{{}}}}"#),
        );
    }
    assert_eq!(publishes(&t.recv(br2)).len(), 2);
}
