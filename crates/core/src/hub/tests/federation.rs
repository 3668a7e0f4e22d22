//! The federation seam (`hub/federation.rs`) on a fake clock: bridges,
//! interest changes, and no echo of remote samples.

use super::*;
use crate::registry::Provided;

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
        .filter(|c| c.kind == Offer::Topic)
        .map(|c| (c.name.to_string(), c.wanted))
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
    let remote = Origin::Remote { latched: None };
    let msg = rosgate_wire::Raw::from_valid_json(r#"{"r":1}"#);
    t.hub.route(remote, 0, "/x", msg, t.now);
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

fn service_changes(t: &mut T) -> Vec<(String, String, bool)> {
    let mut v = Vec::new();
    let now = t.now;
    t.hub.take_interest_changes(&mut v, now);
    v.into_iter()
        .filter(|c| c.kind == Offer::Service)
        .map(|c| (c.name.to_string(), c.ty.to_string(), c.wanted))
        .collect()
}

#[test]
fn a_local_provider_is_announced_and_wins_over_another_gateways() {
    let mut t = fed();
    let (p, caller) = (t.open(), t.open());
    t.hub
        .remote_provider(Provided::Service, 0, "/add", Some("pkg/srv/Add"));
    assert!(
        service_changes(&mut t).is_empty(),
        "nothing local to announce"
    );
    let br = bridge(&t);
    t.recv(br);
    // Calls go to the bridge (the other gateway's provider).
    t.send(
        caller,
        r#"{"op":"call_service","service":"/add","id":"c1","args":{}}"#,
    );
    let fwd: Vec<Value> = t
        .recv(br)
        .into_iter()
        .filter(|v| v["op"] == "call_service")
        .collect();
    assert_eq!(fwd.len(), 1, "{fwd:?}");
    // A local provider takes over and is announced with its type.
    t.send(
        p,
        r#"{"op":"advertise_service","service":"/add","type":"pkg/srv/Add"}"#,
    );
    assert_eq!(
        service_changes(&mut t),
        vec![("/add".to_string(), "pkg/srv/Add".to_string(), true)]
    );
    t.send(
        caller,
        r#"{"op":"call_service","service":"/add","id":"c2","args":{}}"#,
    );
    assert!(t.recv(p).iter().any(|v| v["op"] == "call_service"));
    // It leaves: withdrawn, and the bridge provides the remote one again.
    t.hub.close(p, CloseReason::PeerClosed, t.now);
    t.free_closed();
    assert_eq!(
        service_changes(&mut t),
        vec![("/add".to_string(), String::new(), false)]
    );
    t.recv(br);
    t.send(
        caller,
        r#"{"op":"call_service","service":"/add","id":"c3","args":{}}"#,
    );
    assert!(t.recv(br).iter().any(|v| v["op"] == "call_service"));
    // The other gateway's provider goes: the bridge's calls fail at once.
    t.send(
        caller,
        r#"{"op":"call_service","service":"/add","id":"c4","args":{}}"#,
    );
    t.recv(caller);
    t.hub.remote_provider(Provided::Service, 0, "/add", None);
    service_changes(&mut t);
    let failed: Vec<Value> = t
        .recv(caller)
        .into_iter()
        .filter(|v| v["op"] == "service_response")
        .collect();
    assert!(
        failed
            .iter()
            .any(|v| v["id"] == "c4" && v["result"] == false),
        "{failed:?}"
    );
}

#[test]
fn a_call_from_another_gateway_never_goes_to_a_third() {
    let mut t = fed();
    t.hub
        .remote_provider(Provided::Service, 0, "/add", Some("pkg/srv/Add"));
    service_changes(&mut t);
    let br = bridge(&t);
    t.recv(br);
    // The bridge provides /add (for gateway X); a call from gateway Y
    // arrives through the same bridge: it must not be sent back out.
    t.hub.remote_call(
        0,
        "/add",
        "fq1",
        rosgate_wire::Raw::from_valid_json("{}"),
        t.now,
    );
    let out = t.recv(br);
    assert!(!out.iter().any(|v| v["op"] == "call_service"), "{out:?}");
    let answer = out
        .iter()
        .find(|v| v["op"] == "service_response")
        .expect("answered at once");
    assert_eq!(answer["id"], "fq1");
    assert_eq!(answer["result"], false);
}

#[test]
fn latched_messages_from_another_gateway_are_kept_for_later_local_subscribers() {
    let mut t = fed();
    let first = t.open();
    t.send(first, r#"{"op":"subscribe","topic":"/map","type":"t"}"#);
    changes(&mut t);
    t.recv(first);
    let msg = rosgate_wire::Raw::from_valid_json(r#"{"v":1}"#);
    let remote = Origin::Remote { latched: Some(1) };
    t.hub.route(remote, 0, "/map", msg, t.now);
    assert_eq!(publishes(&t.recv(first)), vec![serde_json::json!({"v":1})]);
    let later = t.open();
    t.send(later, r#"{"op":"subscribe","topic":"/map","type":"t"}"#);
    assert_eq!(publishes(&t.recv(later)), vec![serde_json::json!({"v":1})]);
    assert!(publishes(&t.recv(first)).is_empty(), "no second copy");
    // Nobody listens here any more: what was kept goes.
    for c in [first, later] {
        t.hub.close(c, CloseReason::PeerClosed, t.now);
    }
    t.free_closed();
    changes(&mut t);
    let again = t.open();
    t.send(again, r#"{"op":"subscribe","topic":"/map","type":"t"}"#);
    assert!(
        publishes(&t.recv(again)).is_empty(),
        "the cache went with the interest"
    );
}

/// What other gateways' graphs make this gateway hold is bounded in all,
/// however many gateways (or peers posing as them) announce one: a graph
/// past the total is cut and marked truncated, and a gateway that leaves
/// gives its room back.
#[test]
fn remote_graphs_are_bounded_together_whatever_the_number_of_gateways() {
    use crate::hub::federation::{MAX_REMOTE_GRAPH_ITEMS, MAX_REMOTE_GRAPH_ITEMS_TOTAL};
    // Graphs of 17 000 items: the total is not a multiple, so one is cut.
    const PARAMS: usize = 7_000;
    let mut t = fed();
    let graph = |gw: usize| {
        let nodes: Vec<String> = (0..MAX_REMOTE_GRAPH_ITEMS)
            .map(|i| format!("/g{gw}/n{i}"))
            .collect();
        let params: Vec<String> = (0..PARAMS).map(|i| format!("/g{gw}/n{i}:p")).collect();
        serde_json::json!({"nodes": nodes, "params": params}).to_string()
    };
    let gateways = MAX_REMOTE_GRAPH_ITEMS_TOTAL / (MAX_REMOTE_GRAPH_ITEMS + PARAMS) + 3;
    for gw in 0..gateways {
        t.hub.set_remote_graph(&format!("gw{gw}"), 0, &graph(gw));
        assert!(t.hub.fed.graph_items <= MAX_REMOTE_GRAPH_ITEMS_TOTAL);
    }
    let held: usize = t.hub.fed.graphs.values().map(|g| g.items()).sum();
    assert_eq!(held, t.hub.fed.graph_items);
    assert_eq!(held, MAX_REMOTE_GRAPH_ITEMS_TOTAL);
    // The last announcements found no room left: nothing of them is kept.
    assert!(!t
        .hub
        .fed
        .graphs
        .contains_key(&(0, format!("gw{}", gateways - 1))));
    // Parameters are cut before nodes: the first cut graph kept its nodes.
    let cut = t
        .hub
        .fed
        .graphs
        .values()
        .find(|g| g.truncated && g.items() > 0)
        .expect("a graph cut on the way");
    assert_eq!(cut.nodes.len(), MAX_REMOTE_GRAPH_ITEMS);
    assert!(cut.params.len() < PARAMS);
    // A gateway that leaves gives its room back to the next announcement.
    t.hub.forget_gateway("gw0", t.now);
    assert_eq!(
        t.hub.fed.graph_items,
        MAX_REMOTE_GRAPH_ITEMS_TOTAL - (MAX_REMOTE_GRAPH_ITEMS + PARAMS)
    );
    t.hub.set_remote_graph("late", 0, &graph(999));
    assert_eq!(t.hub.fed.graph_items, MAX_REMOTE_GRAPH_ITEMS_TOTAL);
    assert!(!t.hub.fed.graphs[&(0, "late".to_string())].truncated);
}
