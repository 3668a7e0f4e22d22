//! The federation seam (`hub/federation.rs`) on a fake clock: bridges,
//! interest changes, and no echo of remote samples.

use super::*;
use crate::bridge::{BridgeMsg, PeerId, MAX_BRIDGE_OUTBOX_BYTES};
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

/// What the hub queued for the peers since the last look.
fn outbox(t: &mut T) -> Vec<BridgeMsg> {
    let mut v = Vec::new();
    t.hub.take_bridge_msgs(&mut v);
    v
}

/// Calls the outbox holds, as (service, peer).
fn calls_out(msgs: &[BridgeMsg]) -> Vec<(String, PeerId)> {
    msgs.iter()
        .filter_map(|m| match m {
            BridgeMsg::Call { service, to, .. } => Some((service.to_string(), *to)),
            _ => None,
        })
        .collect()
}

/// Nothing but topic data in a bridge's queue.
fn only_topic_data(lines: &[Value]) {
    assert!(lines.iter().all(|v| v["op"] == "publish"), "{lines:?}");
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
    t.hub
        .remote_interest(PeerId::Gateways, 0, "/x", true, t.now);
    assert!(changes(&mut t).is_empty(), "a bridge is not local interest");
    let br = bridge(&t);
    t.recv(br);
    t.send(p, r#"{"op":"publish","topic":"/x","msg":{"n":1}}"#);
    assert_eq!(publishes(&t.recv(br)), vec![serde_json::json!({"n":1})]);
    // Withdrawn: nothing more for the bridge.
    t.hub
        .remote_interest(PeerId::Gateways, 0, "/x", false, t.now);
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
    t.hub
        .remote_interest(PeerId::Gateways, 0, "/x", true, t.now);
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

/// Topic changes as (name, wanted, peer it is for).
fn changes_to(t: &mut T) -> Vec<(String, bool, Option<PeerId>)> {
    let mut v = Vec::new();
    let now = t.now;
    t.hub.take_interest_changes(&mut v, now);
    v.into_iter()
        .filter(|c| c.kind == Offer::Topic)
        .map(|c| (c.name.to_string(), c.wanted, c.to))
        .collect()
}

#[test]
fn one_ros2_sides_interest_is_announced_to_the_other_only() {
    let mut t = fed();
    // An rmw_zenoh subscriber of /x: the DDS side (only) is told.
    t.hub.remote_interest(PeerId::Ros2, 0, "/x", true, t.now);
    assert_eq!(
        changes_to(&mut t),
        vec![("/x".to_string(), true, Some(PeerId::Dds))]
    );
    // Another gateway's interest is nobody's but the bridge's.
    t.hub
        .remote_interest(PeerId::Gateways, 0, "/y", true, t.now);
    assert!(changes_to(&mut t).is_empty());
    // A local subscriber now: the peers not told yet are.
    let a = t.open();
    t.send(a, r#"{"op":"subscribe","topic":"/x","type":"t"}"#);
    assert_eq!(
        changes_to(&mut t),
        vec![
            ("/x".to_string(), true, Some(PeerId::Ros2)),
            ("/x".to_string(), true, Some(PeerId::Gateways))
        ]
    );
    // rmw_zenoh's subscriber goes: DDS still has the local one.
    t.hub.remote_interest(PeerId::Ros2, 0, "/x", false, t.now);
    assert!(changes_to(&mut t).is_empty());
    t.send(a, r#"{"op":"unsubscribe","topic":"/x"}"#);
    // Nobody's cross interest left: one change for every peer.
    assert_eq!(changes_to(&mut t), vec![("/x".to_string(), false, None)]);
}

#[test]
fn a_sample_is_forwarded_to_the_other_ros2_side_and_never_back() {
    let mut t = fed();
    t.hub.remote_interest(PeerId::Ros2, 0, "/x", true, t.now);
    t.hub
        .remote_interest(PeerId::Gateways, 0, "/x", true, t.now);
    // From DDS: rmw_zenoh wants it.
    assert!(t.hub.bridges().forward_wanted(PeerId::Dds, 0, "/x"));
    // From rmw_zenoh: only rmw_zenoh (itself) and the gateways want it.
    assert!(!t.hub.bridges().forward_wanted(PeerId::Ros2, 0, "/x"));
    // From the gateways: never forwarded.
    assert!(!t.hub.bridges().forward_wanted(PeerId::Gateways, 0, "/x"));
    t.hub.bridges().forward(
        PeerId::Dds,
        0,
        "/x",
        r#"{"n":1}"#,
        Some(("a/msg/N", &[0, 1, 0, 0, 1, 0, 0, 0])),
        None,
    );
    let mut v = Vec::new();
    t.hub.bridges().take_forwards(&mut v);
    assert_eq!(v.len(), 1);
    assert_eq!(v[0].from, PeerId::Dds);
    let (ty, cdr) = v[0].cdr.as_ref().expect("the CDR goes with the JSON");
    assert_eq!(
        (&**ty, &**cdr),
        ("a/msg/N", &[0u8, 1, 0, 0, 1, 0, 0, 0][..])
    );
    t.hub.bridges().take_forwards(&mut v);
    assert_eq!(v.len(), 1, "taken once");
}

#[test]
fn the_forwarding_rule_crosses_ros2_sides_only() {
    use PeerId::*;
    for from in PeerId::ALL {
        assert!(!from.forwards_to(from), "no echo");
    }
    assert!(Dds.forwards_to(Ros2) && Ros2.forwards_to(Dds));
    assert!(!Dds.forwards_to(Gateways) && !Gateways.forwards_to(Dds));
    assert!(!Ros2.forwards_to(Gateways) && !Gateways.forwards_to(Ros2));
}

#[test]
fn with_federation_off_nothing_is_reported_or_opened() {
    let mut t = T::new(Limits::default());
    let a = t.open();
    t.send(a, r#"{"op":"subscribe","topic":"/x","type":"t"}"#);
    assert!(changes(&mut t).is_empty());
    t.hub
        .remote_interest(PeerId::Gateways, 0, "/x", true, t.now);
    assert_eq!(t.hub.federation_links().count(), 0);
    assert_eq!(t.hub.conn_count(), 1);
}

#[test]
fn a_bridge_closed_by_the_gateway_comes_back_with_every_remote_interest() {
    let mut t = fed();
    let p = t.open();
    t.hub
        .remote_interest(PeerId::Gateways, 0, "/x", true, t.now);
    t.hub
        .remote_interest(PeerId::Gateways, 0, "/y", true, t.now);
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
    t.hub.remote_provider(
        Provided::Service,
        0,
        "/add",
        Some("pkg/srv/Add"),
        PeerId::Gateways,
    );
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
    let fwd = calls_out(&outbox(&mut t));
    assert_eq!(fwd, vec![("/add".to_string(), PeerId::Gateways)]);
    only_topic_data(&t.recv(br));
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
    assert_eq!(calls_out(&outbox(&mut t)).len(), 1);
    // The other gateway's provider goes: the bridge's calls fail at once.
    t.send(
        caller,
        r#"{"op":"call_service","service":"/add","id":"c4","args":{}}"#,
    );
    t.recv(caller);
    t.hub
        .remote_provider(Provided::Service, 0, "/add", None, PeerId::Gateways);
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
    t.hub.remote_provider(
        Provided::Service,
        0,
        "/add",
        Some("pkg/srv/Add"),
        PeerId::Gateways,
    );
    service_changes(&mut t);
    let br = bridge(&t);
    t.recv(br);
    // The bridge provides /add (for gateway X); a call from gateway Y
    // arrives through the same bridge: it must not be sent back out.
    t.hub.remote_call_from(
        PeerId::Gateways,
        0,
        "/add",
        "fq1",
        rosgate_wire::Raw::from_valid_json("{}"),
        t.now,
    );
    only_topic_data(&t.recv(br));
    let out = outbox(&mut t);
    assert!(calls_out(&out).is_empty(), "{out:?}");
    match &out[..] {
        [BridgeMsg::Response { id, result, to, .. }] => {
            assert_eq!(&**id, "\"fq1\"");
            assert!(!result);
            assert_eq!(*to, PeerId::Gateways, "answered at once, to its peer");
        }
        other => panic!("{other:?}"),
    }
}

/// A call to a service a peer provides leaves once, in the outbox,
/// addressed to that peer (ROS 2 when both provide it); the bridge's
/// queue never holds it.
#[test]
fn a_call_to_a_peers_provider_is_addressed_to_that_peer_once() {
    let mut t = fed();
    let caller = t.open();
    t.hub.remote_provider(
        Provided::Service,
        0,
        "/add",
        Some("pkg/srv/Add"),
        PeerId::Gateways,
    );
    t.hub.remote_provider(
        Provided::Service,
        0,
        "/get",
        Some("pkg/srv/Get"),
        PeerId::Ros2,
    );
    service_changes(&mut t);
    let br = bridge(&t);
    t.recv(br);
    for (id, service) in [("a", "/add"), ("g", "/get")] {
        let line = format!(
            r#"{{"op":"call_service","service":"{service}","id":"{id}","args":{{"x":1}}}}"#
        );
        t.send(caller, &line);
    }
    let out = outbox(&mut t);
    assert_eq!(
        calls_out(&out),
        vec![
            ("/add".to_string(), PeerId::Gateways),
            ("/get".to_string(), PeerId::Ros2)
        ]
    );
    match &out[0] {
        BridgeMsg::Call { domain, args, .. } => {
            assert_eq!(*domain, 0);
            assert_eq!(&**args, r#"{"x":1}"#);
        }
        other => panic!("{other:?}"),
    }
    only_topic_data(&t.recv(br));
    assert!(outbox(&mut t).is_empty(), "once");
    // ROS 2 provides /add too: it is preferred; when it goes, the
    // gateways again.
    t.hub.remote_provider(
        Provided::Service,
        0,
        "/add",
        Some("pkg/srv/Add"),
        PeerId::Ros2,
    );
    service_changes(&mut t);
    t.send(
        caller,
        r#"{"op":"call_service","service":"/add","id":"b","args":{}}"#,
    );
    assert_eq!(
        calls_out(&outbox(&mut t)),
        vec![("/add".to_string(), PeerId::Ros2)]
    );
    t.hub
        .remote_provider(Provided::Service, 0, "/add", None, PeerId::Ros2);
    service_changes(&mut t);
    t.send(
        caller,
        r#"{"op":"call_service","service":"/add","id":"c","args":{}}"#,
    );
    let out = outbox(&mut t);
    assert_eq!(
        calls_out(&out),
        vec![("/add".to_string(), PeerId::Gateways)]
    );
    let BridgeMsg::Call { id: seq, .. } = out[0] else {
        panic!("{out:?}")
    };
    // The peer answers: the caller gets it.
    t.recv(caller);
    let answer = format!(
        r#"{{"op":"service_response","service":"/add","id":"rg-{seq}","values":{{"sum":3}},"result":true}}"#
    );
    t.hub.remote_reply(0, answer.as_bytes(), t.now);
    let got = t.recv(caller);
    assert!(
        got.iter()
            .any(|v| v["id"] == "c" && v["values"]["sum"] == 3),
        "{got:?}"
    );
    // The same answer taken apart (`remote_answer`, what other gateways'
    // mail gives): the caller gets it once, a second one is stale.
    t.send(
        caller,
        r#"{"op":"call_service","service":"/add","id":"d","args":{}}"#,
    );
    let out = outbox(&mut t);
    let BridgeMsg::Call { id: seq, .. } = out[0] else {
        panic!("{out:?}")
    };
    let id = format!("\"rg-{seq}\"");
    let sum = Raw::from_valid_json(r#"{"sum":4}"#);
    t.hub.remote_answer(0, &id, sum, false, t.now);
    let got = t.recv(caller);
    assert!(
        got.iter()
            .any(|v| v["id"] == "d" && v["values"]["sum"] == 4 && v["result"] == false),
        "{got:?}"
    );
    t.hub.remote_answer(0, &id, sum, true, t.now);
    assert!(
        !t.recv(caller).iter().any(|v| v["op"] == "service_response"),
        "answered once"
    );
}

/// Answers, feedback and results to a call or goal that came from a peer
/// go back to that peer, never into the bridge's queue.
#[test]
fn answers_to_a_peers_call_or_goal_go_back_to_that_peer() {
    let mut t = fed();
    let p = t.open();
    t.send(
        p,
        r#"{"op":"advertise_service","service":"/add","type":"pkg/srv/Add"}"#,
    );
    t.send(
        p,
        r#"{"op":"advertise_action","action":"/fib","type":"pkg/action/Fib"}"#,
    );
    t.recv(p);
    let args = rosgate_wire::Raw::from_valid_json("{}");
    t.hub
        .remote_call_from(PeerId::Ros2, 0, "/add", "rq1", args, t.now);
    let br = bridge(&t);
    let call = t
        .recv(p)
        .into_iter()
        .find(|v| v["op"] == "call_service")
        .expect("forwarded");
    let line = format!(
        r#"{{"op":"service_response","service":"/add","id":{},"values":{{"sum":3}},"result":true}}"#,
        call["id"]
    );
    t.send(p, &line);
    match &outbox(&mut t)[..] {
        [BridgeMsg::Response {
            id,
            values,
            result,
            to,
        }] => {
            assert_eq!(
                (&**id, &**values, *result),
                ("\"rq1\"", r#"{"sum":3}"#, true)
            );
            assert_eq!(*to, PeerId::Ros2);
        }
        other => panic!("{other:?}"),
    }
    let goal = RemoteGoal {
        action: "/fib",
        id: "fg7",
        ty: "pkg/action/Fib",
        args,
    };
    t.hub.remote_goal_from(PeerId::Gateways, 0, goal, t.now);
    let goal = t
        .recv(p)
        .into_iter()
        .find(|v| v["op"] == "send_action_goal")
        .expect("sent");
    let gid = goal["id"].clone();
    t.send(
        p,
        &format!(r#"{{"op":"action_feedback","action":"/fib","id":{gid},"values":{{"n":1}}}}"#),
    );
    t.send(
        p,
        &format!(r#"{{"op":"action_result","action":"/fib","id":{gid},"values":{{"n":2}},"status":4,"result":true}}"#),
    );
    let out = outbox(&mut t);
    assert_eq!(out.len(), 2, "{out:?}");
    assert!(
        matches!(&out[0], BridgeMsg::Feedback { id, to: PeerId::Gateways, .. } if &**id == "\"fg7\"")
    );
    assert!(
        matches!(&out[1], BridgeMsg::Result { id, status: 4, result: true, to: PeerId::Gateways, .. } if &**id == "\"fg7\"")
    );
    only_topic_data(&t.recv(br));
}

fn service_changes_to(t: &mut T) -> Vec<(String, String, bool, Option<PeerId>)> {
    let mut v = Vec::new();
    let now = t.now;
    t.hub.take_interest_changes(&mut v, now);
    v.into_iter()
        .filter(|c| c.kind != Offer::Topic)
        .map(|c| (c.name.to_string(), c.ty.to_string(), c.wanted, c.to))
        .collect()
}

/// A service one ROS 2 side provides is offered to the other ROS 2 side
/// only (never back, never to other gateways); that side's calls reach
/// the provider's side through the bridge and the answer goes back to
/// the caller's side; another gateway's call does not cross.
#[test]
fn a_service_of_one_ros2_side_is_offered_to_and_called_from_the_other() {
    let mut t = fed();
    t.hub.remote_provider(
        Provided::Service,
        0,
        "/add",
        Some("pkg/srv/Add"),
        PeerId::Dds,
    );
    t.hub.remote_provider(
        Provided::Action,
        0,
        "/fib",
        Some("pkg/action/Fib"),
        PeerId::Ros2,
    );
    let mut got = service_changes_to(&mut t);
    got.sort_by_key(|c| format!("{c:?}"));
    assert_eq!(
        got,
        vec![
            (
                "/add".into(),
                "pkg/srv/Add".into(),
                true,
                Some(PeerId::Ros2)
            ),
            (
                "/fib".into(),
                "pkg/action/Fib".into(),
                true,
                Some(PeerId::Dds)
            ),
        ]
    );
    let br = bridge(&t);
    t.recv(br);
    let args = rosgate_wire::Raw::from_valid_json(r#"{"a":1}"#);
    t.hub
        .remote_call_from(PeerId::Ros2, 0, "/add", "z1", args, t.now);
    let out = outbox(&mut t);
    assert_eq!(calls_out(&out), vec![("/add".to_string(), PeerId::Dds)]);
    let BridgeMsg::Call { id: seq, .. } = out[0] else {
        panic!("{out:?}")
    };
    let answer = format!(
        r#"{{"op":"service_response","service":"/add","id":"rg-{seq}","values":{{"sum":3}},"result":true}}"#
    );
    t.hub.remote_reply(0, answer.as_bytes(), t.now);
    match &outbox(&mut t)[..] {
        [BridgeMsg::Response {
            id,
            values,
            result,
            to,
        }] => {
            assert_eq!(
                (&**id, &**values, *result),
                ("\"z1\"", r#"{"sum":3}"#, true)
            );
            assert_eq!(*to, PeerId::Ros2, "back to the caller's side");
        }
        other => panic!("{other:?}"),
    }
    // A goal from DDS to rmw_zenoh's action crosses the same way.
    let goal = RemoteGoal {
        action: "/fib",
        id: "d1",
        ty: "pkg/action/Fib",
        args,
    };
    t.hub.remote_goal_from(PeerId::Dds, 0, goal, t.now);
    let out = outbox(&mut t);
    assert!(
        matches!(
            &out[..],
            [BridgeMsg::Goal {
                to: PeerId::Ros2,
                ..
            }]
        ),
        "{out:?}"
    );
    // Neither another gateway's call nor the providing side's own goes
    // anywhere: each fails at once, back to its peer.
    for from in [PeerId::Gateways, PeerId::Dds] {
        t.hub.remote_call_from(from, 0, "/add", "x", args, t.now);
        let out = outbox(&mut t);
        assert!(calls_out(&out).is_empty(), "{from:?}: {out:?}");
        assert!(
            matches!(&out[..], [BridgeMsg::Response { result: false, to, .. }] if *to == from),
            "{out:?}"
        );
    }
    only_topic_data(&t.recv(br));
    // rmw_zenoh comes to provide /add itself: no longer offered to it.
    t.hub.remote_provider(
        Provided::Service,
        0,
        "/add",
        Some("pkg/srv/Add"),
        PeerId::Ros2,
    );
    assert_eq!(
        service_changes_to(&mut t),
        vec![("/add".into(), String::new(), false, Some(PeerId::Ros2))]
    );
    // A local provider now: every peer not told yet is; when it goes,
    // the cross offers come back as they were.
    let p = t.open();
    t.send(
        p,
        r#"{"op":"advertise_action","action":"/fib","type":"pkg/action/Fib"}"#,
    );
    let mut got = service_changes_to(&mut t);
    got.sort_by_key(|c| format!("{c:?}"));
    assert_eq!(
        got,
        vec![
            (
                "/fib".into(),
                "pkg/action/Fib".into(),
                true,
                Some(PeerId::Gateways)
            ),
            (
                "/fib".into(),
                "pkg/action/Fib".into(),
                true,
                Some(PeerId::Ros2)
            ),
        ]
    );
    t.hub.close(p, CloseReason::PeerClosed, t.now);
    t.free_closed();
    let mut got = service_changes_to(&mut t);
    got.sort_by_key(|c| format!("{c:?}"));
    assert_eq!(
        got,
        vec![
            ("/fib".into(), String::new(), false, Some(PeerId::Gateways)),
            ("/fib".into(), String::new(), false, Some(PeerId::Ros2)),
        ]
    );
    // The provider's side goes: the offer is withdrawn from the other.
    t.hub
        .remote_provider(Provided::Action, 0, "/fib", None, PeerId::Ros2);
    assert_eq!(
        service_changes_to(&mut t),
        vec![("/fib".into(), String::new(), false, Some(PeerId::Dds))]
    );
}

/// Past the outbox's bound a call to a peer fails at once, exactly once,
/// and is counted; nothing of it reaches the peer.
#[test]
fn a_full_outbox_fails_the_call_once() {
    let mut t = fed();
    let caller = t.open();
    t.hub.remote_provider(
        Provided::Service,
        0,
        "/add",
        Some("pkg/srv/Add"),
        PeerId::Gateways,
    );
    service_changes(&mut t);
    t.recv(caller);
    let filler = BridgeMsg::Cancel {
        domain: 0,
        action: "x".repeat(MAX_BRIDGE_OUTBOX_BYTES).into(),
        id: 0,
        to: PeerId::Gateways,
    };
    assert!(t.hub.fed.outbox.push(filler).is_ok());
    t.send(
        caller,
        r#"{"op":"call_service","service":"/add","id":"c1","args":{}}"#,
    );
    let answers: Vec<Value> = t
        .recv(caller)
        .into_iter()
        .filter(|v| v["op"] == "service_response")
        .collect();
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(answers[0]["result"], false);
    assert!(answers[0]["values"]
        .as_str()
        .is_some_and(|r| r.contains("too busy")));
    assert_eq!(t.hub.counters().get(Counter::FederationOutboxFull), 1);
    let out = outbox(&mut t);
    assert!(calls_out(&out).is_empty(), "{out:?}");
    // Nothing is left of it to end a second time.
    t.advance(120_000);
    let late: Vec<Value> = t.recv(caller);
    assert!(
        late.iter().all(|v| v["op"] != "service_response"),
        "{late:?}"
    );
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

/// One gateway's graphs, all its domains together, are bounded: a peer
/// announcing a full graph in every domain holds no more than one
/// gateway's room; long names are bounded by bytes; every item refused is
/// counted; what is kept is in the memory ledger and leaves with its
/// gateway.
#[test]
fn one_gateways_graphs_are_bounded_across_domains_and_bytes_and_counted() {
    use crate::hub::federation::{
        MAX_REMOTE_GRAPH_BYTES_TOTAL, MAX_REMOTE_GRAPH_ITEMS, MAX_REMOTE_GRAPH_ITEMS_PER_GATEWAY,
    };
    let mut t = fed();
    let graph = |d: u8| {
        let nodes: Vec<String> = (0..MAX_REMOTE_GRAPH_ITEMS)
            .map(|i| format!("/d{d}/n{i}"))
            .collect();
        serde_json::json!({ "nodes": nodes }).to_string()
    };
    let domains = (MAX_REMOTE_GRAPH_ITEMS_PER_GATEWAY / MAX_REMOTE_GRAPH_ITEMS + 2) as u8;
    for d in 0..domains {
        t.hub.set_remote_graph("greedy", d, &graph(d));
    }
    let held: usize = t
        .hub
        .fed
        .graphs
        .iter()
        .filter(|((_, g), _)| g == "greedy")
        .map(|(_, g)| g.items())
        .sum();
    assert_eq!(held, MAX_REMOTE_GRAPH_ITEMS_PER_GATEWAY);
    let refused = t.hub.counters().get(Counter::FederationGraphItemsRefused) as usize;
    assert_eq!(
        refused,
        usize::from(domains) * MAX_REMOTE_GRAPH_ITEMS - MAX_REMOTE_GRAPH_ITEMS_PER_GATEWAY
    );
    // Another gateway still has its own room.
    t.hub.set_remote_graph("modest", 0, r#"{"nodes":["/m"]}"#);
    assert!(!t.hub.fed.graphs[&(0, "modest".to_string())].truncated);
    // The ledger counts the graphs, and what the shell reports.
    let graphs: usize = t.hub.fed.graphs.values().map(|g| g.bytes()).sum();
    assert_eq!(t.hub.fed.graph_bytes, graphs);
    t.hub.set_federation_held(1000);
    assert_eq!(t.hub.memory().federation, graphs + 1000);
    assert_eq!(
        t.hub.gauges().get(Gauge::MemoryFederationBytes),
        (graphs + 1000) as u64
    );
    // Names of the longest kind: the byte bound cuts before the items'.
    t.hub.forget_gateway("greedy", t.now);
    let long = |gw: usize| {
        let nodes: Vec<String> = (0..MAX_REMOTE_GRAPH_ITEMS)
            .map(|i| format!("/{gw}/{i}/{}", "n".repeat(1000)))
            .collect();
        serde_json::json!({ "nodes": nodes }).to_string()
    };
    for gw in 0..4 {
        t.hub.set_remote_graph(&format!("long{gw}"), 0, &long(gw));
        assert!(t.hub.fed.graph_bytes <= MAX_REMOTE_GRAPH_BYTES_TOTAL);
    }
    assert!(t.hub.fed.graph_bytes > MAX_REMOTE_GRAPH_BYTES_TOTAL - 2000);
    // Everyone leaves: nothing is held.
    for gw in ["modest", "long0", "long1", "long2", "long3"] {
        t.hub.forget_gateway(gw, t.now);
    }
    assert_eq!((t.hub.fed.graph_items, t.hub.fed.graph_bytes), (0, 0));
    assert!(t.hub.fed.graphs.is_empty());
}
