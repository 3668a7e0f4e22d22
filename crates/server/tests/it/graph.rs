//! Nodes, names and domains (docs/protocol.md, "Nodes, names and domains"
//! and "Built-in services"): `declare_node`/`destroy_node`, the ROS 2 name
//! rules, domains, rosapi, `/rosout`, `/client_count`, `/connected_clients`,
//! `/rosgate/graph`, sim time and `set_level`, over TCP and WebSocket.
//!
//! A connection that declared a node resolves names, so `Client::barrier`
//! (which unsubscribes from `/__barrier__`, an invalid ROS 2 name) cannot
//! be used on it: `quiet` below uses a rosapi call as the barrier instead.

use std::io::Read;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use crate::support::*;
use crate::wsclient::*;

/// The table of invalid names in docs/protocol.md, "Names".
const INVALID: [&str; 10] = [
    "~foo", "a/~/b", "a//b", "a/", "foo__bar", "1abc", "a/9b", "a-b", "a b", "é",
];

/// Every rosapi service the gateway lists (docs/protocol.md, "rosapi").
const ROSAPI: [&str; 26] = [
    "action_servers",
    "action_type",
    "delete_param",
    "get_param",
    "get_param_names",
    "get_ros_version",
    "get_time",
    "has_param",
    "interfaces",
    "message_details",
    "node_details",
    "nodes",
    "publishers",
    "service_node",
    "service_providers",
    "service_request_details",
    "service_response_details",
    "service_type",
    "services",
    "services_for_type",
    "set_param",
    "subscribers",
    "topic_type",
    "topics",
    "topics_and_raw_types",
    "topics_for_type",
];

const GATEWAY_TOPICS: [(&str, &str); 5] = [
    ("/client_count", "std_msgs/msg/Int32"),
    ("/connected_clients", "rosbridge_msgs/msg/ConnectedClients"),
    ("/parameter_events", "rcl_interfaces/msg/ParameterEvent"),
    ("/rosgate/graph", "rosgate_msgs/msg/GraphEvents"),
    ("/rosout", "rcl_interfaces/msg/Log"),
];

// ---------------------------------------------------------------------------------------------
// TCP helpers
// ---------------------------------------------------------------------------------------------

/// Sends `req` with a fresh id; returns the first frame carrying that id
/// (skipping anything else, such as topic messages).
fn request(c: &mut Client, mut req: Value) -> Value {
    let id = format!("r{}", uniq());
    req["id"] = json!(id);
    c.send_json(&req);
    let want = json!(id);
    c.recv_until(|v| v["id"] == want, deadline(REPLY)).0
}

/// `req` must succeed with an info status.
fn ok(c: &mut Client, req: Value) -> Value {
    let v = request(c, req.clone());
    assert_eq!(
        (v["op"].as_str(), v["level"].as_str()),
        (Some("status"), Some("info")),
        "{}: {req} -> {v}",
        c.name
    );
    v
}

/// `req` must be refused with an error status carrying its id; returns the message.
fn refused(c: &mut Client, req: Value) -> String {
    let v = request(c, req.clone());
    assert_eq!(v["op"], "status", "{req} -> {v}");
    assert_eq!(v["level"], "error", "{req} -> {v}");
    let msg = v["msg"].as_str().unwrap_or_default().to_string();
    assert!(!msg.is_empty(), "{req} -> {v}");
    msg
}

/// Declares a node (`body` holds name, namespace, remap, domain); must succeed.
fn declare(c: &mut Client, mut body: Value) -> Value {
    body["op"] = json!("declare_node");
    ok(c, body)
}

fn sub(topic: &str, ty: &str) -> Value {
    json!({"op":"subscribe","topic":topic,"type":ty})
}

fn adv(topic: &str, ty: &str) -> Value {
    json!({"op":"advertise","topic":topic,"type":ty})
}

fn adv_srv(service: &str, ty: &str) -> Value {
    json!({"op":"advertise_service","service":service,"type":ty})
}

/// Calls `/rosapi/<short>`; it must succeed; returns `values`.
fn rosapi(c: &mut Client, short: &str, args: Value) -> Value {
    let name = format!("/rosapi/{short}");
    let v = request(c, json!({"op":"call_service","service":name,"args":args}));
    assert_eq!(v["op"], "service_response", "{name}: {v}");
    assert_eq!(v["service"], name, "{v}");
    assert_eq!(v["result"], true, "{name} failed: {v}");
    v["values"].clone()
}

/// Calls `/rosapi/<short>`; it must fail; returns the reason.
fn rosapi_fails(c: &mut Client, service: &str, args: Value) -> String {
    let v = request(
        c,
        json!({"op":"call_service","service":service,"args":args}),
    );
    assert_failure(&v);
    assert_eq!(v["service"], service, "{v}");
    v["values"].as_str().unwrap_or_default().to_string()
}

/// Asserts nothing is pending for `c` (a rosapi call is the barrier, so
/// this works for connections with a node too).
fn quiet(c: &mut Client) {
    let id = format!("q{}", uniq());
    c.send_json(
        &json!({"op":"call_service","service":"/rosapi/get_ros_version","id":id,"args":{}}),
    );
    let want = json!(id);
    let (_, before) = c.recv_until(|v| v["id"] == want, deadline(REPLY));
    assert!(
        before.is_empty(),
        "{}: unexpected frames: {before:?}",
        c.name
    );
}

/// Frames received before a barrier reply.
fn pending(c: &mut Client) -> Vec<Value> {
    let id = format!("q{}", uniq());
    c.send_json(
        &json!({"op":"call_service","service":"/rosapi/get_ros_version","id":id,"args":{}}),
    );
    let want = json!(id);
    c.recv_until(|v| v["id"] == want, deadline(REPLY)).1
}

/// The next message on `topic` (skipping other frames).
fn next_on(c: &mut Client, topic: &str) -> Value {
    let (v, _) = c.recv_until(
        |v| v["op"] == "publish" && v["topic"] == topic,
        deadline(REPLY),
    );
    v["msg"].clone()
}

/// A node-less connection's own node name (`/rosgate_tcp_<n>`), read back
/// through rosapi while it holds a probe subscription.
fn own_name(c: &mut Client) -> String {
    let probe = format!("/own_probe_{}", uniq());
    ok(c, sub(&probe, "probe/T"));
    let subs = rosapi(c, "subscribers", json!({ "topic": probe }));
    ok(c, json!({"op":"unsubscribe","topic":probe}));
    let list = strs(&subs["subscribers"]);
    assert_eq!(list.len(), 1, "{subs}");
    list[0].clone()
}

fn strs(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|s| {
            s.as_str()
                .unwrap_or_else(|| panic!("not a string: {s}"))
                .to_string()
        })
        .collect()
}

fn assert_sorted(list: &[String], what: &str) {
    let mut sorted = list.to_vec();
    sorted.sort();
    assert_eq!(list, &sorted[..], "{what} must be sorted");
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs()
}

fn assert_recent(t: &Value, what: &str) {
    let sec = t["sec"]
        .as_u64()
        .unwrap_or_else(|| panic!("{what}: sec: {t}"));
    let nsec = t["nanosec"]
        .as_u64()
        .unwrap_or_else(|| panic!("{what}: nanosec: {t}"));
    assert!(nsec < 1_000_000_000, "{what}: {t}");
    assert!(sec.abs_diff(unix_now()) < 120, "{what} is not now: {t}");
}

// ---------------------------------------------------------------------------------------------
// WebSocket helpers
// ---------------------------------------------------------------------------------------------

/// Opens a WebSocket with request target `target`; returns the socket and
/// the response head.
fn ws_open(gw: &Gateway, target: &str) -> (Ws, String) {
    let mut ws = Ws::raw(gw);
    let head = ws.handshake(&upgrade_request(target, ""));
    (ws, head)
}

/// Opens a WebSocket at `target`; the upgrade must succeed, and the
/// response head must come first (nothing before `HTTP/1.1 101`).
fn ws_at(gw: &Gateway, target: &str) -> Ws {
    let (ws, head) = ws_open(gw, target);
    assert!(
        head.starts_with("HTTP/1.1 101 "),
        "upgrade of {target} refused or preceded by other bytes: {head:?}"
    );
    ws
}

/// Reads frames until one matches; returns it and those skipped.
fn ws_until(ws: &mut Ws, pred: impl Fn(&Value) -> bool) -> (Value, Vec<Value>) {
    let dl = deadline(REPLY);
    let mut skipped = Vec::new();
    loop {
        let (op, payload) = ws
            .try_frame(dl)
            .unwrap_or_else(|| panic!("no matching frame; skipped {skipped:?}"));
        assert_eq!(op, 0x1, "text frame expected, got opcode {op}");
        let v: Value = serde_json::from_slice(&payload).expect("frame holds JSON");
        if pred(&v) {
            return (v, skipped);
        }
        skipped.push(v);
    }
}

/// Sends `req` with a fresh id; returns the first frame carrying it.
fn ws_request(ws: &mut Ws, mut req: Value) -> Value {
    let id = format!("w{}", uniq());
    req["id"] = json!(id);
    ws.send_text(&req.to_string());
    let want = json!(id);
    ws_until(ws, |v| v["id"] == want).0
}

fn ws_rosapi(ws: &mut Ws, service: &str, args: Value) -> Value {
    let v = ws_request(
        ws,
        json!({"op":"call_service","service":service,"args":args}),
    );
    assert_eq!(v["op"], "service_response", "{service}: {v}");
    assert_eq!(v["service"], service, "{v}");
    assert_eq!(v["result"], true, "{service} failed: {v}");
    v["values"].clone()
}

/// Everything the server sends until it closes (for refused upgrades).
fn ws_rest(ws: &mut Ws) -> String {
    let dl = deadline(REPLY);
    let mut tmp = [0u8; 4096];
    loop {
        assert!(Instant::now() < dl, "connection not closed");
        match ws.s.read(&mut tmp) {
            Ok(0) => break,
            Ok(n) => ws.buf.extend_from_slice(&tmp[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => break,
        }
    }
    String::from_utf8_lossy(&ws.buf).to_string()
}

// ---------------------------------------------------------------------------------------------
// Graph events
// ---------------------------------------------------------------------------------------------

/// Whether `event` has every field of `want`.
fn matches(event: &Value, want: &Value) -> bool {
    want.as_object()
        .expect("pattern is an object")
        .iter()
        .all(|(k, v)| &event[k] == v)
}

fn position(events: &[Value], want: &Value) -> Option<usize> {
    events.iter().position(|e| matches(e, want))
}

/// Reads `/rosgate/graph` messages until every pattern of `wanted` was
/// seen; returns all events read, in order.
fn graph_until(c: &mut Client, wanted: &[Value]) -> Vec<Value> {
    let dl = deadline(REPLY);
    let mut all: Vec<Value> = Vec::new();
    while !wanted.iter().all(|w| position(&all, w).is_some()) {
        let (v, _) = c.recv_until(
            |v| v["op"] == "publish" && v["topic"] == "/rosgate/graph",
            dl,
        );
        assert_eq!(v["msg"]["resync"], false, "{v}");
        let events = v["msg"]["events"]
            .as_array()
            .unwrap_or_else(|| panic!("events: {v}"));
        assert!(!events.is_empty(), "a graph message lists changes: {v}");
        all.extend(events.iter().cloned());
    }
    all
}

/// Graph events pending for `c` now (read up to a barrier).
fn graph_pending(c: &mut Client) -> Vec<Value> {
    pending(c)
        .into_iter()
        .filter(|v| v["op"] == "publish" && v["topic"] == "/rosgate/graph")
        .flat_map(|v| v["msg"]["events"].as_array().cloned().unwrap_or_default())
        .collect()
}

// =============================================================================================
// Names
// =============================================================================================

#[test]
fn declared_node_expands_relative_absolute_and_private_names() {
    let gw = Gateway::start(&[]);
    let mut node = gw.client();
    let v = declare(&mut node, json!({"name":"my_node","namespace":"/my_ns"}));
    assert!(
        v["msg"].as_str().unwrap_or("").contains("/my_ns/my_node"),
        "{v}"
    );
    let mut plain = gw.client();
    for (written, expanded) in [
        ("camera/image_raw", "/my_ns/camera/image_raw"),
        ("/camera/image_raw", "/camera/image_raw"),
        ("~/image_raw", "/my_ns/my_node/image_raw"),
    ] {
        ok(&mut node, sub(written, "sensor_msgs/msg/Image"));
        if written != expanded {
            // The name as written is an opaque, different topic for a
            // node-less client: nobody receives it.
            plain.publish(written, r#""as written""#);
        }
        plain.publish(expanded, &json!({ "w": written }).to_string());
        assert_eq!(
            node.recv(),
            json!({"op":"publish","topic":expanded,"msg":{"w":written}}),
            "{written} must expand to {expanded}"
        );
    }
    // A relative publish by the node reaches the expanded name.
    plain.subscribe("/my_ns/chatter");
    node.publish("chatter", "1");
    assert_eq!(
        plain.recv(),
        json!({"op":"publish","topic":"/my_ns/chatter","msg":1})
    );
    let d = rosapi(&mut plain, "node_details", json!({"node":"/my_ns/my_node"}));
    assert_eq!(
        d,
        json!({"subscribing":["/camera/image_raw","/my_ns/camera/image_raw","/my_ns/my_node/image_raw"],"publishing":[],"services":[]})
    );
    quiet(&mut node);
    quiet(&mut plain);
}

#[test]
fn invalid_names_are_refused_with_their_id_and_change_nothing() {
    let gw = Gateway::start(&[]);
    let mut c = gw.client();
    declare(&mut c, json!({"name":"n","namespace":"/ns"}));
    let long = "a".repeat(300); // 304 characters after expansion
    let mut names: Vec<&str> = INVALID.to_vec();
    names.push(&long);
    let mut refusals = 0;
    for name in &names {
        for req in [
            sub(name, "t/T"),
            adv(name, "t/T"),
            json!({"op":"publish","topic":name,"msg":{"x":1}}),
            json!({"op":"unsubscribe","topic":name}),
            json!({"op":"unadvertise","topic":name}),
            adv_srv(name, "t/S"),
            json!({"op":"unadvertise_service","service":name}),
            json!({"op":"call_service","service":name,"args":{}}),
        ] {
            let msg = refused(&mut c, req.clone());
            assert!(msg.contains("invalid name"), "{req}: {msg}");
            refusals += 1;
        }
    }
    let s = c.stats();
    assert_eq!(counter(&s, "errors.invalid_name"), refusals, "{s}");
    assert_eq!(counter(&s, "names_rejected"), refusals, "{s}");
    for gauge in [
        "subscriptions",
        "publishers",
        "services",
        "topics",
        "calls_pending",
    ] {
        assert_eq!(counter(&s, gauge), 0, "{gauge}: {s}");
    }
    assert_eq!(
        rosapi(&mut c, "node_details", json!({"node":"/ns/n"})),
        json!({"subscribing":[],"publishing":[],"services":[]})
    );
    let topics = strs(&rosapi(&mut c, "topics", json!({}))["topics"]);
    assert_eq!(
        topics,
        GATEWAY_TOPICS.map(|(t, _)| t.to_string()),
        "only the gateway's own topics"
    );
    // The connection stays usable; a hidden-looking but valid name passes.
    ok(&mut c, sub("_hidden/ok_9", "t/T"));
    quiet(&mut c);
}

#[test]
fn remaps_match_on_expanded_names() {
    let gw = Gateway::start(&[]);
    let mut nav = gw.client();
    declare(
        &mut nav,
        json!({"name":"nav","namespace":"/robot_1","remap":[
            "scan:=/lidar_front/scan",
            "/robot_1/odom:=wheel_odom",
            "~/x:=/y",
            "~/x:=/z"
        ]}),
    );
    for name in ["scan", "/robot_1/scan", "/scan", "odom", "~/x"] {
        ok(&mut nav, sub(name, "t/T"));
    }
    let mut plain = gw.client();
    let d = rosapi(&mut plain, "node_details", json!({"node":"/robot_1/nav"}));
    assert_eq!(
        strs(&d["subscribing"]),
        ["/lidar_front/scan", "/robot_1/wheel_odom", "/scan", "/y"],
        "`scan` and `/robot_1/scan` both remap, `/scan` does not, the first rule wins: {d}"
    );
    // Delivery follows the remapped names, and carries them.
    plain.publish("/robot_1/scan", "0");
    plain.publish("/lidar_front/scan", "1");
    assert_eq!(
        nav.recv(),
        json!({"op":"publish","topic":"/lidar_front/scan","msg":1})
    );
    plain.publish("/robot_1/wheel_odom", "2");
    assert_eq!(nav.recv()["topic"], "/robot_1/wheel_odom");
    // A publish by the node goes through the same rules.
    plain.subscribe("/lidar_front/scan");
    nav.publish("scan", "3");
    assert_eq!(
        plain.recv(),
        json!({"op":"publish","topic":"/lidar_front/scan","msg":3})
    );
    // nav subscribes too: its own message reaches it, once.
    assert_eq!(nav.recv()["msg"], 3);
    quiet(&mut nav);
    quiet(&mut plain);
}

#[test]
fn ns_and_node_remaps_rename_the_node_before_expansion() {
    let gw = Gateway::start(&[]);
    let mut c = gw.client();
    let v = declare(
        &mut c,
        json!({"name":"n","namespace":"/a","remap":["__ns:=/robot_2","__node:=cam","x:=y"]}),
    );
    assert!(
        v["msg"].as_str().unwrap_or("").contains("/robot_2/cam"),
        "{v}"
    );
    ok(&mut c, sub("x", "t/T"));
    ok(&mut c, sub("~/i", "t/T"));
    let nodes = strs(&rosapi(&mut c, "nodes", json!({}))["nodes"]);
    assert_eq!(nodes, ["/robot_2/cam", "/rosgate"]);
    let d = rosapi(&mut c, "node_details", json!({"node":"/robot_2/cam"}));
    assert_eq!(strs(&d["subscribing"]), ["/robot_2/cam/i", "/robot_2/y"]);
    // The node is known by its new name only.
    ok(
        &mut c,
        json!({"op":"subscribe","topic":"z","type":"t/T","node":"cam"}),
    );
    refused(
        &mut c,
        json!({"op":"subscribe","topic":"z","type":"t/T","node":"n"}),
    );
    // Its full name is taken on this connection.
    refused(
        &mut c,
        json!({"op":"declare_node","name":"cam","namespace":"/robot_2"}),
    );
    quiet(&mut c);
}

#[test]
fn invalid_node_declarations_are_refused_and_change_nothing() {
    let gw = Gateway::start(&[]);
    let mut c = gw.client();
    let invalid_name = [
        json!({"name":"a/b"}),
        json!({"name":""}),
        json!({"name":"2x"}),
        json!({"name":"a__b"}),
        json!({"name":"a-b"}),
        json!({"name":"~x"}),
        json!({"name":"ok","namespace":"ns"}),
        json!({"name":"ok","namespace":"/ns/"}),
        json!({"name":"ok","namespace":"/a//b"}),
        json!({"name":"ok","namespace":"/1x"}),
        json!({"name":"ok","remap":["x"]}),
        json!({"name":"ok","remap":[":=b"]}),
        json!({"name":"ok","remap":["a:=b//c"]}),
        json!({"name":"ok","remap":["__ns:=rel"]}),
        json!({"name":"ok","remap":["__node:=a/b"]}),
        json!({"name":"ok","remap":["a:=~b"]}),
    ];
    for body in &invalid_name {
        let mut req = body.clone();
        req["op"] = json!("declare_node");
        refused(&mut c, req);
    }
    for body in [
        json!({"name":"ok","domain":233}),
        json!({"name":"ok","domain":100000}),
    ] {
        let mut req = body.clone();
        req["op"] = json!("declare_node");
        refused(&mut c, req);
    }
    for body in [
        json!({"name":"ok","domain":"3"}),
        json!({"name":"ok","domain":-1}),
        json!({"name":"ok","remap":"a:=b"}),
        json!({"name":7}),
    ] {
        let mut req = body.clone();
        req["op"] = json!("declare_node");
        refused(&mut c, req);
    }
    refused(&mut c, json!({"op":"declare_node"}));
    let s = c.stats();
    let n = invalid_name.len() as u64;
    assert_eq!(counter(&s, "errors.invalid_name"), n, "{s}");
    assert_eq!(counter(&s, "names_rejected"), n, "{s}");
    assert_eq!(counter(&s, "errors.invalid_domain"), 2, "{s}");
    assert_eq!(counter(&s, "errors.wrong_type"), 4, "{s}");
    assert_eq!(counter(&s, "errors.missing_field"), 1, "{s}");
    assert_eq!(counter(&s, "nodes"), 0, "{s}");
    assert_eq!(
        strs(&rosapi(&mut c, "nodes", json!({}))["nodes"]),
        ["/rosgate"]
    );
    // Still a node-less connection: names stay opaque.
    ok(&mut c, sub("weird name//x", "t/T"));
    // And a valid declaration still works afterwards.
    declare(&mut c, json!({"name":"ok"}));
    assert_eq!(counter(&c.stats(), "nodes"), 1);
}

#[test]
fn messages_and_call_replies_carry_the_expanded_name() {
    let gw = Gateway::start(&[]);
    let mut talker = gw.client();
    declare(&mut talker, json!({"name":"talker","namespace":"/ns"}));
    let mut listener = gw.client();
    declare(
        &mut listener,
        json!({"name":"listener","namespace":"/other"}),
    );
    ok(&mut listener, sub("/ns/chatter", "std_msgs/msg/String"));
    talker.publish("chatter", r#"{"data":"hi"}"#);
    assert_eq!(
        listener.recv(),
        json!({"op":"publish","topic":"/ns/chatter","msg":{"data":"hi"}})
    );
    // A provider in /ns advertises `add`; a caller in /ns calls `add`.
    ok(
        &mut talker,
        adv_srv("add", "example_interfaces/srv/AddTwoInts"),
    );
    let mut caller = gw.client();
    declare(&mut caller, json!({"name":"caller","namespace":"/ns"}));
    caller.call("add", r#""c1""#, r#"{"a":1,"b":2}"#);
    let fwd = talker.expect_forwarded("/ns/add");
    talker.respond("add", &fwd["id"].to_string(), r#"{"sum":3}"#, "true");
    let r = caller.expect_response("/ns/add", &json!("c1"));
    assert_eq!(r["values"], json!({"sum":3}));
    // A node-less caller uses the full name.
    let mut plain = gw.client();
    plain.call("/ns/add", "2", "{}");
    let fwd = talker.expect_forwarded("/ns/add");
    talker.respond("/ns/add", &fwd["id"].to_string(), "{}", "true");
    plain.expect_response("/ns/add", &json!(2));
    // And the opaque name `add` is another service: nobody provides it.
    plain.call("add", "3", "{}");
    plain.expect_failure("add", &json!(3));
    quiet(&mut talker);
    quiet(&mut listener);
    quiet(&mut caller);
}

#[test]
fn nodeless_tcp_connection_keeps_opaque_names() {
    let gw = Gateway::start(&[]);
    let mut a = gw.client();
    let mut b = gw.client();
    for t in ["weird name//x", "chatter", "~foo", "a/", "é"] {
        a.subscribe(t);
    }
    b.publish("/chatter", "0");
    for t in ["weird name//x", "chatter", "~foo", "a/", "é"] {
        b.publish(t, &json!(t).to_string());
        assert_eq!(a.recv(), json!({"op":"publish","topic":t,"msg":t}));
    }
    b.advertise_service("svc with space");
    a.call("svc with space", "1", "{}");
    let fwd = b.expect_forwarded("svc with space");
    b.respond("svc with space", &fwd["id"].to_string(), "{}", "true");
    a.expect_response("svc with space", &json!(1));
    // Introspection lists the names as written, under the connection's own node.
    let topics = strs(&rosapi(&mut a, "topics", json!({}))["topics"]);
    for t in ["weird name//x", "chatter", "~foo", "a/", "é"] {
        assert!(topics.iter().any(|x| x == t), "{t} in {topics:?}");
    }
    let services = strs(&rosapi(&mut a, "services", json!({}))["services"]);
    assert!(
        services.iter().any(|s| s == "svc with space"),
        "{services:?}"
    );
    let nodes = strs(&rosapi(&mut a, "nodes", json!({}))["nodes"]);
    assert_eq!(nodes.len(), 3, "{nodes:?}");
    assert!(
        nodes[1..]
            .iter()
            .all(|n| n.starts_with("/rosgate_tcp_") && n[13..].parse::<u32>().is_ok()),
        "{nodes:?}"
    );
    // `node` names a node this connection did not declare.
    let msg = refused(
        &mut a,
        json!({"op":"subscribe","topic":"/x","type":"t","node":"ghost"}),
    );
    assert!(msg.contains("ghost"), "{msg}");
    let s = a.stats();
    assert_eq!(counter(&s, "names_rejected"), 0, "{s}");
    assert_eq!(counter(&s, "errors.invalid_name"), 0, "{s}");
    assert_eq!(counter(&s, "errors.unknown_node"), 1, "{s}");
    a.assert_quiet();
    b.assert_quiet();
}

#[test]
fn names_strict_resolves_nodeless_connections() {
    let gw = Gateway::start(&["--names", "strict", "--ws-status", "all"]);
    let mut c = gw.client();
    let mut p = gw.client();
    ok(&mut c, sub("chatter", "t/T"));
    p.publish("/chatter", "1");
    assert_eq!(c.recv(), json!({"op":"publish","topic":"/chatter","msg":1}));
    // Relative names of a strict publisher expand too.
    p.publish("chatter", "2");
    assert_eq!(c.recv()["topic"], "/chatter");
    let own = rosapi(&mut c, "subscribers", json!({"topic":"/chatter"}));
    let own = strs(&own["subscribers"]);
    assert_eq!(own.len(), 1);
    let own = &own[0];
    assert!(own.starts_with("/rosgate_tcp_"), "{own}");
    ok(&mut c, sub("~/x", "t/T"));
    let topics = strs(&rosapi(&mut c, "topics", json!({}))["topics"]);
    assert!(topics.contains(&format!("{own}/x")), "{topics:?}");
    let mut refusals = 0;
    for name in ["weird name//x", "a//b", "foo__bar", "a/"] {
        refused(&mut c, sub(name, "t/T"));
        refused(&mut p, json!({"op":"publish","topic":name,"msg":1}));
        refusals += 2;
    }
    let s = c.stats();
    assert_eq!(counter(&s, "names_rejected"), refusals, "{s}");
    // WebSocket connections are strict too.
    let mut ws = ws_at(&gw, "/");
    let st = ws_request(&mut ws, sub("chatter", "t/T"));
    assert_eq!(st["level"], "info", "{st}");
    let st = ws_request(&mut ws, sub("a//b", "t/T"));
    assert_eq!(st["level"], "error", "{st}");
    p.publish("/chatter", "3");
    let (m, _) = ws_until(&mut ws, |v| v["op"] == "publish");
    assert_eq!(m, json!({"op":"publish","topic":"/chatter","msg":3}));
    assert_eq!(c.recv()["msg"], 3);
}

// =============================================================================================
// Nodes
// =============================================================================================

#[test]
fn duplicate_node_names_on_one_connection_and_across_connections() {
    let gw = Gateway::start(&[]);
    let mut c1 = gw.client();
    let v = declare(&mut c1, json!({"name":"talker","namespace":"/r1"}));
    let msg = v["msg"].as_str().unwrap_or("");
    assert!(
        msg.contains("/r1/talker") && msg.contains("domain 0"),
        "{v}"
    );
    // The same full name again on this connection, directly or by remap.
    refused(
        &mut c1,
        json!({"op":"declare_node","name":"talker","namespace":"/r1"}),
    );
    refused(
        &mut c1,
        json!({"op":"declare_node","name":"x","namespace":"/r1","remap":["__node:=talker"]}),
    );
    assert_eq!(counter(&c1.stats(), "errors.duplicate_node"), 2);
    // From another connection: allowed, and both owners are warned.
    let mut c2 = gw.client();
    let id = format!("dup-{}", uniq());
    c2.send_json(&json!({"op":"declare_node","name":"talker","namespace":"/r1","id":id}));
    c2.expect_info(id.clone());
    let w2 = c2.expect_status("warning", Some(json!(id)));
    assert!(
        w2["msg"].as_str().unwrap_or("").contains("/r1/talker"),
        "{w2}"
    );
    let w1 = c1.expect_status("warning", None);
    assert_eq!(w1["msg"], w2["msg"]);
    ok(&mut c1, sub("a", "t/A"));
    ok(&mut c2, adv("b", "t/B"));
    let nodes = strs(&rosapi(&mut c1, "nodes", json!({}))["nodes"]);
    assert_eq!(nodes, ["/r1/talker", "/r1/talker", "/rosgate"]);
    let d = rosapi(&mut c2, "node_details", json!({"node":"/r1/talker"}));
    assert_eq!(
        d,
        json!({"subscribing":["/r1/a"],"publishing":["/r1/b"],"services":[]}),
        "both nodes of that name together"
    );
    // The same full name in another domain is another graph: no warning.
    let mut c3 = gw.client();
    declare(
        &mut c3,
        json!({"name":"talker","namespace":"/r1","domain":3}),
    );
    let s = c1.stats();
    assert_eq!(counter(&s, "nodes"), 3, "{s}");
    assert_eq!(counter(&s, "errors.duplicate_node"), 2, "{s}");
    quiet(&mut c1);
    quiet(&mut c2);
    quiet(&mut c3);
}

#[test]
fn registrations_made_before_declaring_stay_with_the_connection() {
    let gw = Gateway::start(&[]);
    let mut c = gw.client();
    let own = own_name(&mut c);
    c.subscribe("early topic");
    declare(&mut c, json!({"name":"late","namespace":"/ns"}));
    ok(&mut c, sub("later", "t/T"));
    let nodes = strs(&rosapi(&mut c, "nodes", json!({}))["nodes"]);
    let mut want = vec!["/ns/late".to_string(), "/rosgate".into(), own.clone()];
    want.sort();
    assert_eq!(nodes, want);
    assert_eq!(
        rosapi(&mut c, "node_details", json!({ "node": own })),
        json!({"subscribing":["early topic"],"publishing":[],"services":[]})
    );
    assert_eq!(
        rosapi(&mut c, "node_details", json!({"node":"/ns/late"})),
        json!({"subscribing":["/ns/later"],"publishing":[],"services":[]})
    );
    // The opaque registration still delivers.
    let mut p = gw.client();
    p.publish("early topic", "1");
    assert_eq!(c.recv()["topic"], "early topic");
}

#[test]
fn destroy_node_withdraws_its_registrations() {
    let gw = Gateway::start(&[]);
    let mut c = gw.client();
    declare(&mut c, json!({"name":"talker","namespace":"/r"}));
    declare(&mut c, json!({"name":"keeper","namespace":"/r"}));
    ok(&mut c, sub("a", "t/A"));
    ok(&mut c, adv("b", "t/B"));
    ok(&mut c, adv_srv("s", "t/S"));
    ok(
        &mut c,
        json!({"op":"subscribe","topic":"kept","type":"t/K","node":"keeper"}),
    );
    let mut plain = gw.client();
    plain.publish("/r/a", "1");
    assert_eq!(c.recv()["topic"], "/r/a");
    let v = ok(&mut c, json!({"op":"destroy_node","name":"/r/talker"}));
    assert!(v["msg"].as_str().unwrap_or("").contains("/r/talker"), "{v}");
    let nodes = strs(&rosapi(&mut plain, "nodes", json!({}))["nodes"]);
    assert_eq!(nodes, ["/r/keeper", "/rosgate"]);
    let topics = strs(&rosapi(&mut plain, "topics", json!({}))["topics"]);
    assert!(
        !topics.iter().any(|t| t == "/r/a" || t == "/r/b"),
        "{topics:?}"
    );
    assert!(topics.iter().any(|t| t == "/r/kept"), "{topics:?}");
    let services = strs(&rosapi(&mut plain, "services", json!({}))["services"]);
    assert!(!services.iter().any(|s| s == "/r/s"), "{services:?}");
    plain.publish("/r/a", "2");
    plain.publish("/r/kept", "3");
    assert_eq!(
        c.recv(),
        json!({"op":"publish","topic":"/r/kept","msg":3}),
        "the destroyed node's subscription is gone, the other node's stays"
    );
    plain.call("/r/s", "9", "{}");
    plain.expect_failure("/r/s", &json!(9));
    // Unknown (or already destroyed) nodes.
    refused(&mut c, json!({"op":"destroy_node","name":"talker"}));
    refused(&mut c, json!({"op":"destroy_node","name":"ghost"}));
    // The name is free again on this connection.
    declare(&mut c, json!({"name":"talker","namespace":"/r"}));
    let s = c.stats();
    assert_eq!(counter(&s, "errors.unknown_node"), 2, "{s}");
    assert_eq!(counter(&s, "nodes"), 2, "{s}");
    assert_eq!(counter(&s, "services"), 0, "{s}");
    assert_eq!(counter(&s, "publishers"), 0, "{s}");
    quiet(&mut c);
}

#[test]
fn node_field_selects_another_declared_node() {
    let gw = Gateway::start(&[]);
    let mut c = gw.client();
    declare(&mut c, json!({"name":"talker","namespace":"/r1"}));
    declare(&mut c, json!({"name":"listener","namespace":"/r2"}));
    ok(&mut c, adv("chatter", "t/T")); // default node: the first declared
    ok(
        &mut c,
        json!({"op":"subscribe","topic":"chatter","type":"t/T","node":"listener"}),
    );
    ok(
        &mut c,
        json!({"op":"subscribe","topic":"news","type":"t/T","node":"/r2/listener"}),
    );
    ok(
        &mut c,
        json!({"op":"subscribe","topic":"/r2/chatter","type":"t/T","node":"/r1/talker"}),
    );
    let mut plain = gw.client();
    assert_eq!(
        rosapi(&mut plain, "node_details", json!({"node":"/r2/listener"})),
        json!({"subscribing":["/r2/chatter","/r2/news"],"publishing":[],"services":[]})
    );
    assert_eq!(
        rosapi(&mut plain, "node_details", json!({"node":"/r1/talker"})),
        json!({"subscribing":["/r2/chatter"],"publishing":["/r1/chatter"],"services":[]})
    );
    // Two of its nodes subscribe /r2/chatter: the connection gets one copy.
    plain.publish("/r2/chatter", "1");
    assert_eq!(
        c.recv(),
        json!({"op":"publish","topic":"/r2/chatter","msg":1})
    );
    // A publish on behalf of the second node resolves in its namespace.
    plain.subscribe("/r2/out");
    c.send_json(&json!({"op":"publish","topic":"out","msg":2,"node":"listener"}));
    assert_eq!(
        plain.recv(),
        json!({"op":"publish","topic":"/r2/out","msg":2})
    );
    let msg = refused(
        &mut c,
        json!({"op":"subscribe","topic":"x","type":"t","node":"ghost"}),
    );
    assert!(msg.contains("ghost"), "{msg}");
    refused(
        &mut c,
        json!({"op":"publish","topic":"x","msg":1,"node":"ghost"}),
    );
    refused(
        &mut c,
        json!({"op":"advertise_service","service":"x","type":"t","node":"ghost"}),
    );
    let s = c.stats();
    assert_eq!(counter(&s, "errors.unknown_node"), 3, "{s}");
    quiet(&mut c);
    plain.assert_quiet();
}

#[test]
fn too_many_nodes_on_one_connection_is_refused() {
    let gw = Gateway::start(&[]);
    let mut c = gw.client();
    for i in 0..64 {
        declare(&mut c, json!({ "name": format!("n{i}") }));
    }
    let msg = refused(&mut c, json!({"op":"declare_node","name":"n64"}));
    assert!(msg.contains("64"), "{msg}");
    let s = c.stats();
    assert_eq!(counter(&s, "nodes"), 64, "{s}");
    assert_eq!(counter(&s, "errors.too_many_registrations"), 1, "{s}");
    let nodes = strs(&rosapi(&mut c, "nodes", json!({}))["nodes"]);
    assert_eq!(nodes.len(), 65, "64 nodes and /rosgate");
    assert!(!nodes.iter().any(|n| n == "/n64"));
    // Destroying one makes room.
    ok(&mut c, json!({"op":"destroy_node","name":"n3"}));
    declare(&mut c, json!({"name":"n64"}));
}

// =============================================================================================
// Domains
// =============================================================================================

#[test]
fn domains_never_meet() {
    let gw = Gateway::start(&[]);
    let mut d3_sub = gw.client();
    declare(&mut d3_sub, json!({"name":"robot","domain":3}));
    let mut d3_pub = gw.client();
    declare(&mut d3_pub, json!({"name":"robot_b","domain":3}));
    let mut d0_sub = gw.client();
    let mut d0_pub = gw.client();
    ok(&mut d3_sub, sub("/chatter", "d3/T"));
    ok(&mut d0_sub, sub("/chatter", "d0/T"));
    d0_pub.publish("/chatter", "0");
    d3_pub.publish("/chatter", "3");
    assert_eq!(d0_sub.recv()["msg"], 0);
    assert_eq!(d3_sub.recv()["msg"], 3);
    quiet(&mut d0_sub);
    quiet(&mut d3_sub);
    // The same service name in both domains: each caller reaches its own.
    ok(&mut d3_pub, adv_srv("/svc", "d3/S"));
    d0_pub.advertise_service("/svc");
    d3_sub.call("/svc", "1", "{}");
    let fwd = d3_pub.expect_forwarded("/svc");
    d3_pub.respond("/svc", &fwd["id"].to_string(), r#""d3""#, "true");
    assert_eq!(d3_sub.expect_response("/svc", &json!(1))["values"], "d3");
    d0_sub.call("/svc", "2", "{}");
    let fwd = d0_pub.expect_forwarded("/svc");
    d0_pub.respond("/svc", &fwd["id"].to_string(), r#""d0""#, "true");
    assert_eq!(d0_sub.expect_response("/svc", &json!(2))["values"], "d0");
    // Introspection is per domain.
    assert_eq!(
        rosapi(&mut d3_sub, "topic_type", json!({"topic":"/chatter"}))["type"],
        "d3/T"
    );
    assert_eq!(
        rosapi(&mut d0_sub, "topic_type", json!({"topic":"/chatter"}))["type"],
        "d0/T"
    );
    let n3 = strs(&rosapi(&mut d3_sub, "nodes", json!({}))["nodes"]);
    assert_eq!(n3, ["/robot", "/robot_b", "/rosgate"]);
    let n0 = strs(&rosapi(&mut d0_sub, "nodes", json!({}))["nodes"]);
    assert_eq!(
        n0.len(),
        3,
        "/rosgate and the two node-less clients: {n0:?}"
    );
    assert!(!n0.iter().any(|n| n.starts_with("/robot")), "{n0:?}");
    assert_eq!(
        rosapi(&mut d3_sub, "service_node", json!({"service":"/svc"}))["node"],
        "/robot_b"
    );
    let d0_node = rosapi(&mut d0_sub, "service_node", json!({"service":"/svc"}));
    assert!(
        d0_node["node"]
            .as_str()
            .unwrap_or("")
            .starts_with("/rosgate_tcp_"),
        "{d0_node}"
    );
    assert_eq!(
        rosapi(&mut d3_sub, "service_type", json!({"service":"/svc"}))["type"],
        "d3/S"
    );
    // Call ids stay unique across domains: the two forwarded ids differ.
    let s = d0_sub.stats();
    assert_eq!(counter(&s, "domains"), 2, "{s}");
    assert_eq!(counter(&s, "calls_forwarded"), 2, "{s}");
}

#[test]
fn a_websocket_in_a_url_domain_meets_tcp_nodes_of_that_domain() {
    let gw = Gateway::start(&[]);
    let mut tcp3 = gw.client();
    declare(&mut tcp3, json!({"name":"talker","domain":3}));
    let mut tcp0 = gw.client();
    let mut ws = ws_at(&gw, "/?domain=3");
    ws.send_text(r#"{"op":"subscribe","topic":"/mixed","type":"t/T"}"#);
    ws.barrier();
    tcp0.publish("/mixed", "0");
    tcp3.publish("/mixed", "3");
    let (m, skipped) = ws_until(&mut ws, |v| v["op"] == "publish");
    assert_eq!(m["msg"], 3, "{skipped:?}");
    assert!(ws.barrier().is_empty());
    let nodes = strs(&ws_rosapi(&mut ws, "/rosapi/nodes", json!({}))["nodes"]);
    assert_eq!(nodes.len(), 3, "{nodes:?}");
    assert_eq!(nodes[0], "/rosgate");
    assert!(nodes[1].starts_with("/rosgate_ws_"), "{nodes:?}");
    assert_eq!(nodes[2], "/talker");
}

#[test]
fn domain_is_fixed_once_the_connection_holds_something() {
    let gw = Gateway::start(&[]);
    let mut c = gw.client();
    c.subscribe("/x");
    let msg = refused(
        &mut c,
        json!({"op":"declare_node","name":"late","domain":3}),
    );
    assert!(msg.contains("domain"), "{msg}");
    assert_eq!(counter(&c.stats(), "nodes"), 0);
    // Its own domain is fine.
    declare(&mut c, json!({"name":"late","domain":0}));
    refused(
        &mut c,
        json!({"op":"declare_node","name":"other","domain":4}),
    );
    // A node alone fixes it too.
    let mut n = gw.client();
    declare(&mut n, json!({"name":"first"}));
    refused(
        &mut n,
        json!({"op":"declare_node","name":"second","domain":4}),
    );
    // Asking things does not.
    let mut q = gw.client();
    rosapi(&mut q, "topics", json!({}));
    let v = declare(&mut q, json!({"name":"roamer","domain":5}));
    assert!(v["msg"].as_str().unwrap_or("").contains("domain 5"), "{v}");
    let s = c.stats();
    assert_eq!(counter(&s, "errors.invalid_domain"), 3, "{s}");
    assert_eq!(counter(&s, "nodes"), 3, "{s}");
    // c is still in domain 0: a domain-0 publish reaches it.
    let mut p = gw.client();
    p.publish("/x", "1");
    assert_eq!(c.recv()["msg"], 1);
    assert_eq!(
        strs(&rosapi(&mut q, "nodes", json!({}))["nodes"]),
        ["/roamer", "/rosgate"]
    );
}

#[test]
fn tcp_and_ws_domain_flags() {
    let gw = Gateway::start(&["--tcp-domain", "7", "--ws-domain", "9"]);
    let mut tcp = gw.client();
    tcp.subscribe("/t");
    let mut ws = ws_at(&gw, "/");
    ws.send_text(r#"{"op":"subscribe","topic":"/t","type":"t/T"}"#);
    ws.barrier();
    ws.send_text(r#"{"op":"publish","topic":"/t","msg":"ws"}"#);
    let (m, _) = ws_until(&mut ws, |v| v["op"] == "publish");
    assert_eq!(m["msg"], "ws", "its own message");
    tcp.publish("/t", r#""tcp""#);
    assert_eq!(tcp.recv()["msg"], "tcp");
    tcp.assert_quiet();
    assert!(ws.barrier().is_empty(), "domains 7 and 9 never meet");
    // declare_node without a domain stays in --tcp-domain.
    let mut n = gw.client();
    let v = declare(&mut n, json!({"name":"n"}));
    assert!(v["msg"].as_str().unwrap_or("").contains("domain 7"), "{v}");
    // A TCP client choosing 9 meets the WebSocket client; a URL choosing 7 meets TCP.
    let mut tcp9 = gw.client();
    declare(&mut tcp9, json!({"name":"m","domain":9}));
    tcp9.publish("/t", r#""tcp9""#);
    let (m, _) = ws_until(&mut ws, |v| v["op"] == "publish");
    assert_eq!(m["msg"], "tcp9");
    let mut ws7 = ws_at(&gw, "/?domain=7");
    ws7.send_text(r#"{"op":"publish","topic":"/t","msg":"ws7"}"#);
    assert_eq!(tcp.recv()["msg"], "ws7");
    let nodes = strs(&ws_rosapi(&mut ws, "rosapi/nodes", json!({}))["nodes"]);
    assert_eq!(nodes, ["/m", "/rosgate", nodes[2].as_str()]);
    assert!(nodes[2].starts_with("/rosgate_ws_"), "{nodes:?}");
}

#[test]
fn websocket_url_declares_domain_node_namespace_and_remaps() {
    let gw = Gateway::start(&["--ws-status", "all"]);
    let mut ws = ws_at(
        &gw,
        "/?domain=3&node=viewer&namespace=/r1&remap=chatter%3A%3D%2Ftalk",
    );
    let (st, _) = ws_until(&mut ws, |v| v["op"] == "status");
    assert_eq!(st["level"], "info", "{st}");
    let msg = st["msg"].as_str().unwrap_or("");
    assert!(
        msg.contains("/r1/viewer") && msg.contains("domain 3"),
        "{st}"
    );
    let st = ws_request(&mut ws, sub("chatter", "t/T"));
    assert_eq!(st["level"], "info", "{st}");
    let st = ws_request(&mut ws, sub("news", "t/T"));
    assert_eq!(st["level"], "info", "{st}");
    let st = ws_request(&mut ws, sub("a//b", "t/T"));
    assert_eq!(
        st["level"], "error",
        "invalid names refused on WebSocket: {st}"
    );
    let mut tcp = gw.client();
    declare(&mut tcp, json!({"name":"talker","domain":3}));
    tcp.publish("/talk", "1");
    tcp.publish("/r1/news", "2");
    let (m1, _) = ws_until(&mut ws, |v| v["op"] == "publish");
    let (m2, _) = ws_until(&mut ws, |v| v["op"] == "publish");
    assert_eq!(m1, json!({"op":"publish","topic":"/talk","msg":1}));
    assert_eq!(m2, json!({"op":"publish","topic":"/r1/news","msg":2}));
    let nodes = strs(&ws_rosapi(&mut ws, "/rosapi/nodes", json!({}))["nodes"]);
    assert_eq!(nodes, ["/r1/viewer", "/rosgate", "/talker"]);
    // Domain 0 sees none of it.
    let mut d0 = gw.client();
    assert_eq!(
        strs(&rosapi(&mut d0, "nodes", json!({}))["nodes"]),
        ["/rosgate"]
    );
    // The same URL again: both owners are warned, the newcomer after its
    // upgrade response.
    let mut ws2 = ws_at(&gw, "/?domain=3&node=viewer&namespace=/r1");
    let (w2, before) = ws_until(&mut ws2, |v| v["level"] == "warning");
    assert!(before.iter().all(|v| v["level"] == "info"), "{before:?}");
    let (w1, _) = ws_until(&mut ws, |v| v["op"] == "status");
    assert_eq!(w1["level"], "warning", "{w1}");
    assert_eq!(w1["msg"], w2["msg"]);
    assert!(w1.get("id").is_none(), "{w1}");
}

#[test]
fn websocket_url_declaration_with_default_status_level() {
    // With --ws-status warning (the default) a duplicate node's warning is
    // sent, and must come after the upgrade response, never before it.
    let gw = Gateway::start(&[]);
    let mut ws1 = ws_at(&gw, "/?node=viewer");
    assert!(ws1.barrier().is_empty(), "the info status is filtered");
    let mut ws2 = ws_at(&gw, "/?node=viewer");
    let (w2, _) = ws_until(&mut ws2, |v| v["op"] == "status");
    assert_eq!(w2["level"], "warning", "{w2}");
    let (w1, _) = ws_until(&mut ws1, |v| v["op"] == "status");
    assert_eq!(w1["level"], "warning", "{w1}");
    assert_eq!(counter(&gw.stats(), "nodes"), 2);
}

#[test]
fn websocket_bad_url_query_is_refused_with_400() {
    let gw = Gateway::start(&[]);
    for target in [
        "/?domain=999",
        "/?domain=233",
        "/?domain=abc",
        "/?domain=-1",
        "/?node=1bad",
        "/?node=a%2Fb",
        "/?node=",
        "/?node=a__b",
        "/?node=ok&namespace=rel",
        "/?node=ok&namespace=/a//b",
        "/?namespace=/x",
        "/?remap=a:=b",
        "/?node=ok&remap=bad",
        "/?node=ok&remap=a%3A%3Db%2F%2Fc",
    ] {
        let (mut ws, head) = ws_open(&gw, target);
        assert!(head.starts_with("HTTP/1.1 400 "), "{target}: {head}");
        let body = ws_rest(&mut ws);
        assert!(!body.trim().is_empty(), "{target}: a plain-text reason");
        assert!(
            !body.contains("\"op\""),
            "{target}: nothing but the reason: {body:?}"
        );
    }
    let s = gw.wait_for_stats("refused upgrades closed", |s| {
        counter(s, "connections_open") == 1
    });
    assert_eq!(counter(&s, "nodes"), 0, "{s}");
    assert_eq!(counter(&s, "closes.protocol_error"), 14, "{s}");
    // Unknown parameters are not ours; a good query still works.
    let mut ws = ws_at(&gw, "/?token=abc&node=fine&domain=232");
    let nodes = strs(&ws_rosapi(&mut ws, "rosapi/nodes", json!({}))["nodes"]);
    assert_eq!(nodes, ["/fine", "/rosgate"]);
}

// =============================================================================================
// rosapi
// =============================================================================================

#[test]
fn rosapi_answers_every_service_with_rosapi_msgs_shapes() {
    let gw = Gateway::start(&[]);
    let mut talker = gw.client();
    declare(&mut talker, json!({"name":"talker","namespace":"/robot"}));
    ok(&mut talker, adv("chatter", "std_msgs/msg/String"));
    ok(&mut talker, sub("/cmd", "sub/Type"));
    ok(&mut talker, adv_srv("reset", "std_srvs/srv/Empty"));
    let mut plain = gw.client();
    // First publisher's type wins over earlier and later subscribers'.
    ok(&mut plain, sub("/robot/chatter", "other/Type"));
    ok(&mut plain, adv("/cmd", "geometry_msgs/msg/Twist"));
    let own = rosapi(&mut plain, "publishers", json!({"topic":"/cmd"}));
    let own = strs(&own["publishers"]);
    assert_eq!(own.len(), 1, "{own:?}");
    let own = own[0].clone();
    assert!(own.starts_with("/rosgate_tcp_"), "{own}");

    let want_topics = [
        ("/client_count", "std_msgs/msg/Int32"),
        ("/cmd", "geometry_msgs/msg/Twist"),
        ("/connected_clients", "rosbridge_msgs/msg/ConnectedClients"),
        ("/parameter_events", "rcl_interfaces/msg/ParameterEvent"),
        ("/robot/chatter", "std_msgs/msg/String"),
        ("/rosgate/graph", "rosgate_msgs/msg/GraphEvents"),
        ("/rosout", "rcl_interfaces/msg/Log"),
    ];
    let t = rosapi(&mut plain, "topics", json!({}));
    assert_eq!(t["topics"], json!(want_topics.map(|(n, _)| n)), "{t}");
    assert_eq!(t["types"], json!(want_topics.map(|(_, ty)| ty)), "{t}");
    let t = rosapi(&mut plain, "topics_and_raw_types", json!({}));
    assert_eq!(t["topics"], json!(want_topics.map(|(n, _)| n)), "{t}");
    assert_eq!(t["types"], json!(want_topics.map(|(_, ty)| ty)), "{t}");
    // Definitions for the types the gateway knows (bundled here), ""
    // for the others (tests/it/typedefs.rs has the texts).
    let texts = strs(&t["typedefs_full_text"]);
    assert_eq!(texts.len(), want_topics.len(), "{t}");
    for ((topic, ty), text) in want_topics.iter().zip(&texts) {
        let unknown = ty.starts_with("rosbridge_msgs/") || ty.starts_with("rosgate_msgs/");
        assert_eq!(text.is_empty(), unknown, "{topic} {ty}: {text:?}");
    }
    assert_eq!(texts[4], "string data\n");
    assert_eq!(
        rosapi(
            &mut plain,
            "topics_for_type",
            json!({"type":"std_msgs/msg/String"})
        )["topics"],
        json!(["/robot/chatter"])
    );
    assert_eq!(
        rosapi(
            &mut plain,
            "topics_for_type",
            json!({"type":"rcl_interfaces/msg/Log"})
        )["topics"],
        json!(["/rosout"])
    );
    assert_eq!(
        rosapi(&mut plain, "topics_for_type", json!({"type":"no/Such"}))["topics"],
        json!([])
    );

    let services = strs(&rosapi(&mut plain, "services", json!({}))["services"]);
    assert_sorted(&services, "services");
    let mut want: Vec<String> = ROSAPI.iter().map(|s| format!("/rosapi/{s}")).collect();
    want.push("/robot/reset".into());
    want.push("/rosgate/connections".into());
    want.push("/rosgate/federation".into());
    want.push("/rosgate/topic_stats".into());
    want.push("/rosgate/stats".into());
    want.push("/rosgate/topic_info".into());
    // TF (docs/tf.md): the gateway's own service and its frame listing.
    want.push("/rosgate/tf_frames".into());
    want.push("/republish_tfs".into());
    want.sort();
    assert_eq!(services, want);
    assert_eq!(
        rosapi(
            &mut plain,
            "services_for_type",
            json!({"type":"std_srvs/srv/Empty"})
        )["services"],
        json!(["/robot/reset"])
    );
    assert_eq!(
        rosapi(
            &mut plain,
            "services_for_type",
            json!({"type":"rosapi_msgs/srv/Topics"})
        )["services"],
        json!(["/rosapi/topics"])
    );

    let nodes = strs(&rosapi(&mut plain, "nodes", json!({}))["nodes"]);
    let mut want_nodes = vec!["/robot/talker".to_string(), "/rosgate".into(), own.clone()];
    want_nodes.sort();
    assert_eq!(nodes, want_nodes);
    assert_eq!(
        rosapi(&mut plain, "node_details", json!({"node":"/robot/talker"})),
        json!({"subscribing":["/cmd"],"publishing":["/robot/chatter"],"services":["/robot/reset"]})
    );
    assert_eq!(
        rosapi(&mut plain, "node_details", json!({ "node": own })),
        json!({"subscribing":["/robot/chatter"],"publishing":["/cmd"],"services":[]})
    );
    assert_eq!(
        rosapi(&mut plain, "node_details", json!({"node":"/nobody"})),
        json!({"subscribing":[],"publishing":[],"services":[]})
    );
    let g = rosapi(&mut plain, "node_details", json!({"node":"/rosgate"}));
    let g_pubs = strs(&g["publishing"]);
    assert_sorted(&g_pubs, "/rosgate's publishing list");
    assert_eq!(g_pubs, GATEWAY_TOPICS.map(|(n, _)| n.to_string()));
    let g_srvs = strs(&g["services"]);
    assert_sorted(&g_srvs, "/rosgate's services");
    assert!(g_srvs.iter().any(|s| s == "/rosgate/stats"), "{g}");
    assert!(g_srvs.iter().any(|s| s == "/rosapi/nodes"), "{g}");
    assert_eq!(g["subscribing"], json!([]), "no sim time: {g}");

    for (topic, ty) in [
        ("/robot/chatter", "std_msgs/msg/String"),
        ("/cmd", "geometry_msgs/msg/Twist"),
        ("/rosout", "rcl_interfaces/msg/Log"),
        ("/client_count", "std_msgs/msg/Int32"),
        ("/nope", ""),
    ] {
        assert_eq!(
            rosapi(&mut plain, "topic_type", json!({ "topic": topic })),
            json!({ "type": ty }),
            "{topic}"
        );
    }
    for (service, ty) in [
        ("/robot/reset", "std_srvs/srv/Empty"),
        ("/rosapi/topics", "rosapi_msgs/srv/Topics"),
        ("/nope", ""),
    ] {
        assert_eq!(
            rosapi(&mut plain, "service_type", json!({ "service": service })),
            json!({ "type": ty }),
            "{service}"
        );
    }
    assert_eq!(
        rosapi(&mut plain, "publishers", json!({"topic":"/robot/chatter"})),
        json!({"publishers":["/robot/talker"]})
    );
    assert_eq!(
        rosapi(&mut plain, "publishers", json!({"topic":"/rosout"})),
        json!({"publishers":["/rosgate"]})
    );
    assert_eq!(
        rosapi(&mut plain, "subscribers", json!({"topic":"/robot/chatter"})),
        json!({ "subscribers": [own.clone()] })
    );
    assert_eq!(
        rosapi(&mut plain, "subscribers", json!({"topic":"/cmd"})),
        json!({"subscribers":["/robot/talker"]})
    );
    assert_eq!(
        rosapi(&mut plain, "subscribers", json!({"topic":"/nope"})),
        json!({"subscribers":[]})
    );
    for (service, providers) in [
        ("/robot/reset", json!(["/robot/talker"])),
        ("std_srvs/srv/Empty", json!(["/robot/talker"])),
        ("/rosapi/nodes", json!(["/rosgate"])),
        ("/nope", json!([])),
    ] {
        assert_eq!(
            rosapi(
                &mut plain,
                "service_providers",
                json!({ "service": service })
            ),
            json!({ "providers": providers }),
            "{service}"
        );
    }
    for (service, node) in [
        ("/robot/reset", "/robot/talker"),
        ("/rosapi/nodes", "/rosgate"),
        ("/rosgate/stats", "/rosgate"),
        ("/nope", ""),
    ] {
        assert_eq!(
            rosapi(&mut plain, "service_node", json!({ "service": service })),
            json!({ "node": node }),
            "{service}"
        );
    }
    let time = rosapi(&mut plain, "get_time", json!({}));
    assert_recent(&time["time"], "get_time");
    let version = rosapi(&mut plain, "get_ros_version", json!({}));
    let distro = std::env::var("ROS_DISTRO")
        .ok()
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| "jazzy".into());
    assert_eq!(version, json!({"version":2,"distro":distro}));
    assert_eq!(
        rosapi(
            &mut plain,
            "message_details",
            json!({"type":"std_msgs/msg/String"})
        ),
        json!({"typedefs":[{"type":"std_msgs/String","fieldnames":["data"],"fieldtypes":["string"],
            "fieldarraylen":[-1],"examples":[""],"constnames":[],"constvalues":[]}]})
    );
    for details in [
        "service_request_details",
        "service_response_details",
        "action_goal_details",
        "action_result_details",
        "action_feedback_details",
    ] {
        let reason = rosapi_fails(
            &mut plain,
            &format!("/rosapi/{details}"),
            json!({"type":"std_msgs/msg/String"}),
        );
        assert!(
            reason.contains("\"std_msgs/msg/String\""),
            "{details}: {reason}"
        );
    }
    assert_eq!(
        rosapi(&mut plain, "action_servers", json!({})),
        json!({"action_servers":["/tf2_web_republisher"],"nodes":["/rosgate"]})
    );
    assert_eq!(
        rosapi(&mut plain, "action_type", json!({"action":"/x"})),
        json!({"type":""})
    );
    let interfaces = strs(&rosapi(&mut plain, "interfaces", json!({}))["interfaces"]);
    assert_sorted(&interfaces, "interfaces");
    for ty in [
        "std_msgs/msg/String",
        "geometry_msgs/msg/Twist",
        "std_srvs/srv/Empty",
        "rcl_interfaces/msg/Log",
    ] {
        assert!(interfaces.iter().any(|i| i == ty), "{ty}: {interfaces:?}");
    }
    assert!(
        !interfaces.iter().any(|i| i == "sub/Type"),
        "{interfaces:?}"
    );
}

#[test]
fn rosapi_names_with_and_without_slash_whatever_the_namespace() {
    let gw = Gateway::start(&[]);
    let mut c = gw.client();
    declare(&mut c, json!({"name":"n","namespace":"/deep/ns"}));
    ok(&mut c, sub("/t", "t/T"));
    for short in ["topics", "nodes", "services", "get_ros_version"] {
        let with = request(
            &mut c,
            json!({"op":"call_service","service":format!("/rosapi/{short}"),"args":{}}),
        );
        let without = request(
            &mut c,
            json!({"op":"call_service","service":format!("rosapi/{short}"),"args":{}}),
        );
        assert_eq!(with["result"], true, "{with}");
        assert_eq!(without["result"], true, "{without}");
        assert_eq!(
            without["service"],
            format!("rosapi/{short}"),
            "the name as written"
        );
        assert_eq!(with["values"], without["values"], "{short}");
    }
    // Failures have the usual shape.
    let why = rosapi_fails(&mut c, "/rosapi/nope", json!({}));
    assert!(why.contains("nope"), "{why}");
    rosapi_fails(&mut c, "rosapi/topics", json!([1]));
    rosapi_fails(&mut c, "/rosapi/nodes", json!("x"));
    // An empty list is taken as no arguments (rosbridge zips lists).
    let v = request(
        &mut c,
        json!({"op":"call_service","service":"/rosapi/nodes","args":[]}),
    );
    assert_eq!(v["result"], true, "{v}");
    let s = c.stats();
    assert_eq!(counter(&s, "errors.bad_args"), 2, "{s}");
    quiet(&mut c);
}

#[test]
fn rosapi_lists_exclude_hidden_names_unless_asked() {
    let gw = Gateway::start(&[]);
    let mut c = gw.client();
    for t in ["/_hidden/x", "/a/_b", "/visible"] {
        ok(&mut c, sub(t, "t/H"));
    }
    ok(&mut c, adv_srv("/_secret", "t/S"));
    ok(&mut c, adv_srv("/open", "t/S"));
    let shown = strs(&rosapi(&mut c, "topics", json!({}))["topics"]);
    assert!(shown.iter().any(|t| t == "/visible"), "{shown:?}");
    assert!(!shown.iter().any(|t| t.contains("/_")), "{shown:?}");
    let all = strs(&rosapi(&mut c, "topics", json!({"include_hidden":true}))["topics"]);
    for t in ["/_hidden/x", "/a/_b", "/visible", "/rosout"] {
        assert!(all.iter().any(|x| x == t), "{t}: {all:?}");
    }
    assert_sorted(&all, "topics");
    assert_eq!(
        rosapi(&mut c, "topics_for_type", json!({"type":"t/H"}))["topics"],
        json!(["/visible"])
    );
    assert_eq!(
        rosapi(
            &mut c,
            "topics_for_type",
            json!({"type":"t/H","include_hidden":true})
        )["topics"],
        json!(["/_hidden/x", "/a/_b", "/visible"])
    );
    let srv = strs(&rosapi(&mut c, "services", json!({}))["services"]);
    assert!(srv.iter().any(|s| s == "/open"), "{srv:?}");
    assert!(!srv.iter().any(|s| s == "/_secret"), "{srv:?}");
    let srv = strs(&rosapi(&mut c, "services", json!({"include_hidden":true}))["services"]);
    assert!(srv.iter().any(|s| s == "/_secret"), "{srv:?}");
    assert_eq!(
        rosapi(&mut c, "services_for_type", json!({"type":"t/S"}))["services"],
        json!(["/open"])
    );
}

#[test]
fn services_under_rosapi_and_rosgate_are_reserved() {
    let gw = Gateway::start(&[]);
    let mut c = gw.client();
    for name in [
        "/rosapi/topics",
        "/rosapi/mine",
        "/rosgate/stats",
        "/rosgate/other",
        // Calls to these reach the built-ins (roslib omits the slash), so
        // nobody may provide them either.
        "rosapi/mine",
        "rosgate/stats",
    ] {
        let msg = refused(&mut c, adv_srv(name, "t/S"));
        assert!(msg.contains("gateway"), "{name}: {msg}");
    }
    // Resolved names count: a node in /rosapi offering `topics`.
    let mut n = gw.client();
    declare(&mut n, json!({"name":"impostor","namespace":"/rosapi"}));
    refused(&mut n, adv_srv("topics", "t/S"));
    let s = c.stats();
    assert_eq!(counter(&s, "errors.reserved_name"), 7, "{s}");
    assert_eq!(counter(&s, "services"), 0, "{s}");
    // The built-ins still answer.
    let t = rosapi(&mut n, "topics", json!({}));
    assert!(t["topics"].is_array(), "{t}");
    let services = strs(&rosapi(&mut c, "services", json!({}))["services"]);
    assert!(
        !services.iter().any(|s| s.ends_with("/mine")),
        "{services:?}"
    );
    // Over WebSocket too (errors pass the default status filter).
    let mut ws = ws_at(&gw, "/");
    let st = ws_request(&mut ws, adv_srv("/rosapi/topics", "t/S"));
    assert_eq!(st["level"], "error", "{st}");
}

#[test]
fn rosapi_over_websocket() {
    let gw = Gateway::start(&[]);
    let mut ws = ws_at(&gw, "/");
    ws.send_text(r#"{"op":"subscribe","topic":"/ws_topic","type":"ws/T"}"#);
    ws.send_text(r#"{"op":"advertise_service","service":"/ws_srv","type":"ws/S"}"#);
    let t = ws_rosapi(&mut ws, "/rosapi/topics", json!({}));
    let topics = strs(&t["topics"]);
    let types = strs(&t["types"]);
    assert_eq!(topics.len(), types.len());
    let at = topics
        .iter()
        .position(|x| x == "/ws_topic")
        .unwrap_or_else(|| panic!("{t}"));
    assert_eq!(types[at], "ws/T");
    assert!(topics.iter().any(|x| x == "/rosout"), "{t}");
    let nodes = strs(&ws_rosapi(&mut ws, "rosapi/nodes", json!({}))["nodes"]);
    assert_eq!(nodes.len(), 2, "{nodes:?}");
    assert!(nodes[1].starts_with("/rosgate_ws_"), "{nodes:?}");
    let d = ws_rosapi(&mut ws, "rosapi/node_details", json!({ "node": nodes[1] }));
    assert_eq!(
        d,
        json!({"subscribing":["/ws_topic"],"publishing":[],"services":["/ws_srv"]})
    );
    assert_eq!(
        ws_rosapi(
            &mut ws,
            "/rosapi/service_type",
            json!({"service":"/ws_srv"})
        ),
        json!({"type":"ws/S"})
    );
    // roslib calls without an id; the answer then has none.
    ws.send_text(r#"{"op":"call_service","service":"/rosapi/get_time","args":{}}"#);
    let (r, _) = ws_until(&mut ws, |v| v["op"] == "service_response");
    assert!(r.get("id").is_none(), "{r}");
    assert_recent(&r["values"]["time"], "get_time over WebSocket");
}

// =============================================================================================
// What the gateway publishes about the graph
// =============================================================================================

fn assert_log_shape(m: &Value, level: u64) {
    let keys: Vec<&String> = m.as_object().expect("Log object").keys().collect();
    let mut keys: Vec<&str> = keys.iter().map(|k| k.as_str()).collect();
    keys.sort();
    assert_eq!(
        keys,
        ["file", "function", "level", "line", "msg", "name", "stamp"],
        "{m}"
    );
    assert_eq!(m["level"], level, "{m}");
    assert_eq!(m["name"], "rosgate", "{m}");
    assert_eq!(m["file"], "", "{m}");
    assert_eq!(m["function"], "", "{m}");
    assert_eq!(m["line"], 0, "{m}");
    assert_recent(&m["stamp"], "rosout stamp");
}

/// The next `/rosout` message whose text contains every fragment.
fn next_log(c: &mut Client, fragments: &[&str]) -> Value {
    let (v, _) = c.recv_until(
        |v| {
            v["op"] == "publish"
                && v["topic"] == "/rosout"
                && fragments
                    .iter()
                    .all(|f| v["msg"]["msg"].as_str().unwrap_or("").contains(f))
        },
        deadline(REPLY),
    );
    v["msg"].clone()
}

#[test]
fn rosout_reports_clients_and_nodes() {
    let gw = Gateway::start(&[]);
    let mut obs = gw.client();
    obs.subscribe("/rosout");
    let mut c = gw.client();
    declare(&mut c, json!({"name":"talker","namespace":"/r1"}));
    let m = next_log(&mut obs, &["connected", "127.0.0.1", "tcp"]);
    assert_log_shape(&m, 20);
    let text = m["msg"].as_str().unwrap_or("").to_string();
    let client = text
        .split_whitespace()
        .find(|w| w.starts_with("/rosgate_tcp_"))
        .unwrap_or_else(|| panic!("client name in {text:?}"))
        .to_string();
    let m = next_log(&mut obs, &["declared node /r1/talker"]);
    assert_log_shape(&m, 20);
    // A duplicate name is a warning (level 30).
    let mut c2 = gw.client();
    declare(&mut c2, json!({"name":"talker","namespace":"/r1"}));
    c.expect_status("warning", None);
    let m = next_log(&mut obs, &["/r1/talker", "2 nodes"]);
    assert_log_shape(&m, 30);
    ok(&mut c2, json!({"op":"destroy_node","name":"talker"}));
    let m = next_log(&mut obs, &["destroyed node /r1/talker"]);
    assert_log_shape(&m, 20);
    drop(c);
    let m = next_log(&mut obs, &[&client, "disconnected", "peer_closed"]);
    assert_log_shape(&m, 20);
    // A forced close (a WebSocket protocol error) is logged at level 30.
    let mut ws = ws_at(&gw, "/");
    let m = next_log(&mut obs, &["connected", "(ws)"]);
    assert_log_shape(&m, 20);
    std::io::Write::write_all(&mut ws.s, b"\x81\x02{}").expect("unmasked frame");
    let m = next_log(&mut obs, &["disconnected", "protocol_error"]);
    assert_log_shape(&m, 30);
    // Clients may publish to /rosout too; both publishers are listed.
    let mut logger = gw.client();
    logger.advertise("/rosout");
    logger.publish("/rosout", r#"{"level":40,"msg":"from a client"}"#);
    let m = next_log(&mut obs, &["from a client"]);
    assert_eq!(m["level"], 40);
    let p = rosapi(&mut obs, "publishers", json!({"topic":"/rosout"}));
    let p = strs(&p["publishers"]);
    assert_eq!(p.len(), 2, "{p:?}");
    assert_eq!(p[0], "/rosgate");
    assert!(p[1].starts_with("/rosgate_tcp_"), "{p:?}");
    // Nothing from another domain.
    let mut d3 = gw.client();
    declare(&mut d3, json!({"name":"elsewhere","domain":3}));
    quiet(&mut d3);
    let leaked: Vec<Value> = pending(&mut obs)
        .into_iter()
        .filter(|v| v["msg"]["msg"].as_str().unwrap_or("").contains("elsewhere"))
        .collect();
    assert!(leaked.is_empty(), "{leaked:?}");
}

#[test]
fn client_count_is_latched_and_follows_clients() {
    let gw = Gateway::start(&[]);
    let mut obs = gw.client();
    obs.subscribe("/client_count");
    assert_eq!(
        obs.recv(),
        json!({"op":"publish","topic":"/client_count","msg":{"data":1}}),
        "the current value at once"
    );
    let mut c2 = gw.client();
    c2.send_line(r#"{"op":"call_service","service":"/rosapi/nodes","id":1,"args":{}}"#);
    assert_eq!(next_on(&mut obs, "/client_count"), json!({"data":2}));
    let ws = ws_at(&gw, "/");
    assert_eq!(next_on(&mut obs, "/client_count"), json!({"data":3}));
    drop(c2);
    assert_eq!(next_on(&mut obs, "/client_count"), json!({"data":2}));
    drop(ws);
    assert_eq!(next_on(&mut obs, "/client_count"), json!({"data":1}));
    // A connection that opens straight into domain 3 is not counted in 0.
    let mut d3 = gw.client();
    declare(&mut d3, json!({"name":"n","domain":3}));
    ok(&mut d3, sub("/client_count", "std_msgs/msg/Int32"));
    assert_eq!(next_on(&mut d3, "/client_count"), json!({"data":1}));
    let counts: Vec<Value> = pending(&mut obs)
        .into_iter()
        .filter(|v| v["topic"] == "/client_count")
        .map(|v| v["msg"].clone())
        .collect();
    assert!(
        counts.iter().all(|m| m == &json!({"data":1})),
        "domain 0 still counts one: {counts:?}"
    );
    // A second subscriber gets the current value; the first gets nothing new.
    let mut late = gw.client();
    late.subscribe("/client_count");
    assert_eq!(late.recv()["msg"], json!({"data":2}));
    assert_eq!(next_on(&mut obs, "/client_count"), json!({"data":2}));
    // A WebSocket subscriber too (it counts itself once upgraded).
    let mut ws = ws_at(&gw, "/");
    ws.send_text(r#"{"op":"subscribe","topic":"/client_count","id":"cc"}"#);
    let (m, _) = ws_until(&mut ws, |v| v["op"] == "publish");
    assert_eq!(
        m,
        json!({"op":"publish","topic":"/client_count","msg":{"data":3}})
    );
    assert_eq!(next_on(&mut obs, "/client_count"), json!({"data":3}));
}

#[test]
fn connected_clients_lists_addresses_and_times() {
    let gw = Gateway::start(&[]);
    let mut obs = gw.client();
    obs.subscribe("/connected_clients");
    let m = obs.recv();
    assert_eq!(m["topic"], "/connected_clients");
    let clients = m["msg"]["clients"].as_array().expect("clients").clone();
    assert_eq!(clients.len(), 1, "{m}");
    let c = &clients[0];
    assert_eq!(c["ip_address"], "127.0.0.1", "{m}");
    assert_recent(&c["connection_time"], "connection_time");
    assert_eq!(c.as_object().map(|o| o.len()), Some(2), "{m}");
    let mut c2 = gw.client();
    c2.send_line(r#"{"op":"call_service","service":"/rosapi/nodes","id":1,"args":{}}"#);
    let m = next_on(&mut obs, "/connected_clients");
    assert_eq!(m["clients"].as_array().map(Vec::len), Some(2), "{m}");
    drop(c2);
    let m = next_on(&mut obs, "/connected_clients");
    assert_eq!(m["clients"].as_array().map(Vec::len), Some(1), "{m}");
}

#[test]
fn graph_events_follow_nodes_endpoints_services_and_clients() {
    let gw = Gateway::start(&[]);
    let mut obs = gw.client();
    obs.subscribe("/rosgate/graph");
    let mut talker = gw.client();
    declare(&mut talker, json!({"name":"talker","namespace":"/robot_1"}));
    let ev = graph_until(
        &mut obs,
        &[
            json!({"event":"client_connected","transport":"tcp"}),
            json!({"event":"node_added","node":"/robot_1/talker"}),
        ],
    );
    let connected = &ev[position(&ev, &json!({"event":"client_connected"})).unwrap_or(0)];
    // The peer with its port: an operator tells two clients of one host apart.
    let address = connected["address"].as_str().unwrap_or("");
    assert!(address.starts_with("127.0.0.1:"), "{connected}");
    assert!(address[10..].parse::<u16>().is_ok(), "{connected}");
    let client = connected["client"].as_str().unwrap_or("").to_string();
    assert!(client.starts_with("/rosgate_tcp_"), "{connected}");
    assert!(
        position(&ev, &json!({"event":"client_connected"}))
            < position(&ev, &json!({"event":"node_added"})),
        "{ev:?}"
    );
    ok(&mut talker, adv("chatter", "std_msgs/msg/String"));
    ok(&mut talker, sub("/x", "t/X"));
    ok(&mut talker, json!({"op":"unsubscribe","topic":"/x"}));
    ok(
        &mut talker,
        adv_srv("add", "example_interfaces/srv/AddTwoInts"),
    );
    let ev = graph_until(
        &mut obs,
        &[
            json!({"event":"publisher_added","topic":"/robot_1/chatter","node":"/robot_1/talker","type":"std_msgs/msg/String"}),
            json!({"event":"subscriber_added","topic":"/x","node":"/robot_1/talker","type":"t/X"}),
            json!({"event":"subscriber_removed","topic":"/x","node":"/robot_1/talker"}),
            json!({"event":"service_added","service":"/robot_1/add","node":"/robot_1/talker","type":"example_interfaces/srv/AddTwoInts"}),
        ],
    );
    let order: Vec<&str> = ev.iter().filter_map(|e| e["event"].as_str()).collect();
    assert_eq!(
        order,
        [
            "publisher_added",
            "subscriber_added",
            "subscriber_removed",
            "service_added"
        ]
    );
    let mut adder2 = gw.client();
    declare(&mut adder2, json!({"name":"adder2","namespace":"/robot_1"}));
    ok(
        &mut adder2,
        adv_srv("add", "example_interfaces/srv/AddTwoInts"),
    );
    ok(
        &mut adder2,
        json!({"op":"unadvertise_service","service":"add"}),
    );
    graph_until(
        &mut obs,
        &[
            json!({"event":"service_replaced","service":"/robot_1/add","node":"/robot_1/adder2","previous":"/robot_1/talker"}),
            json!({"event":"service_removed","service":"/robot_1/add","node":"/robot_1/adder2"}),
        ],
    );
    ok(&mut talker, json!({"op":"destroy_node","name":"talker"}));
    let ev = graph_until(
        &mut obs,
        &[
            json!({"event":"publisher_removed","topic":"/robot_1/chatter","node":"/robot_1/talker"}),
            json!({"event":"node_removed","node":"/robot_1/talker"}),
        ],
    );
    assert!(
        position(&ev, &json!({"event":"publisher_removed"}))
            < position(&ev, &json!({"event":"node_removed"})),
        "{ev:?}"
    );
    // WebSocket clients and their own node name.
    let mut ws = ws_at(&gw, "/");
    ws.send_text(r#"{"op":"subscribe","topic":"/seen","type":"t/S"}"#);
    let ev = graph_until(
        &mut obs,
        &[
            json!({"event":"client_connected","transport":"ws"}),
            json!({"event":"subscriber_added","topic":"/seen"}),
        ],
    );
    let at = position(&ev, &json!({"event":"client_connected"})).unwrap_or(0);
    let ws_client = ev[at]["client"].as_str().unwrap_or("").to_string();
    assert!(ws_client.starts_with("/rosgate_ws_"), "{ev:?}");
    let at = position(&ev, &json!({"event":"subscriber_added"})).unwrap_or(0);
    assert_eq!(ev[at]["node"], ws_client.as_str());
    drop(ws);
    graph_until(
        &mut obs,
        &[
            json!({"event":"subscriber_removed","topic":"/seen","node":ws_client}),
            json!({"event":"client_disconnected","client":ws_client,"reason":"peer_closed"}),
        ],
    );
    drop(talker);
    graph_until(
        &mut obs,
        &[json!({"event":"client_disconnected","client":client,"reason":"peer_closed"})],
    );
}

#[test]
fn graph_events_beyond_the_turn_limit_ask_for_a_resync() {
    let gw = Gateway::start(&[]);
    let mut obs = gw.client();
    obs.subscribe("/rosgate/graph");
    let mut crowd = gw.client();
    // 1 001 subscriptions withdrawn in one turn when the connection closes.
    let mut lines = String::new();
    for i in 0..1001 {
        lines.push_str(&format!(
            "{{\"op\":\"subscribe\",\"topic\":\"/t{i}\",\"type\":\"t\"}}\n"
        ));
    }
    crowd.send_raw(lines.as_bytes());
    for _ in 0..1001 {
        crowd.expect_status("info", None);
    }
    crowd.assert_quiet();
    graph_pending(&mut obs);
    crowd.shutdown_write();
    crowd.expect_closed(REPLY);
    let (v, _) = obs.recv_until(
        |v| v["topic"] == "/rosgate/graph" && v["msg"]["resync"] == true,
        deadline(REPLY),
    );
    let events = v["msg"]["events"].as_array().expect("events");
    assert_eq!(events.len(), 1000, "at most MAX_GRAPH_EVENTS per turn");
    assert!(
        events.iter().all(|e| e["event"] == "subscriber_removed"),
        "the rest is not sent: {:?}",
        events.last()
    );
    // The graph is intact: a re-read shows none of those topics.
    let topics = strs(&rosapi(&mut obs, "topics", json!({}))["topics"]);
    assert!(!topics.iter().any(|t| t.starts_with("/t")), "{topics:?}");
}

#[test]
fn a_client_changing_domain_leaves_one_graph_and_joins_the_other() {
    let gw = Gateway::start(&[]);
    let mut obs0 = gw.client();
    obs0.subscribe("/rosgate/graph");
    let mut obs3 = gw.client();
    declare(&mut obs3, json!({"name":"obs","domain":3}));
    ok(&mut obs3, sub("/rosgate/graph", "t"));
    graph_pending(&mut obs0);
    graph_pending(&mut obs3);
    // Its first line moves it to domain 3.
    let mut mover = gw.client();
    declare(&mut mover, json!({"name":"mover","domain":3}));
    let ev3 = graph_until(
        &mut obs3,
        &[
            json!({"event":"client_connected","transport":"tcp"}),
            json!({"event":"node_added","node":"/mover"}),
        ],
    );
    let at = position(&ev3, &json!({"event":"client_connected"})).unwrap_or(0);
    let client = ev3[at]["client"].clone();
    let ev0 = graph_pending(&mut obs0);
    assert!(
        position(&ev0, &json!({"event":"node_added"})).is_none(),
        "{ev0:?}"
    );
    let joined = ev0
        .iter()
        .filter(|e| e["client"] == client && e["event"] == "client_connected")
        .count();
    let left = ev0
        .iter()
        .filter(|e| e["client"] == client && e["event"] == "client_disconnected")
        .count();
    assert_eq!(joined, left, "domain 0's view stays balanced: {ev0:?}");
    drop(mover);
    graph_until(
        &mut obs3,
        &[
            json!({"event":"node_removed","node":"/mover"}),
            json!({"event":"client_disconnected","client":client,"reason":"peer_closed"}),
        ],
    );
    let ev0 = graph_pending(&mut obs0);
    assert!(ev0.is_empty(), "{ev0:?}");
}

// =============================================================================================
// Sim time
// =============================================================================================

#[test]
fn use_sim_time_get_time_follows_clock() {
    let gw = Gateway::start(&["--use-sim-time"]);
    let mut c = gw.client();
    let why = rosapi_fails(&mut c, "/rosapi/get_time", json!({}));
    assert!(why.contains("/clock"), "{why}");
    c.publish("/clock", r#"{"clock":{"sec":42,"nanosec":500}}"#);
    assert_eq!(
        rosapi(&mut c, "get_time", json!({})),
        json!({"time":{"sec":42,"nanosec":500}})
    );
    // Another client's /clock, later.
    let mut sim = gw.client();
    sim.publish("/clock", r#"{"clock":{"sec":43,"nanosec":0}}"#);
    sim.assert_quiet();
    assert_eq!(
        rosapi(&mut c, "get_time", json!({})),
        json!({"time":{"sec":43,"nanosec":0}})
    );
    // Per domain: nobody published /clock in domain 3.
    let mut d3 = gw.client();
    declare(&mut d3, json!({"name":"n","domain":3}));
    rosapi_fails(&mut d3, "rosapi/get_time", json!({}));
    // The gateway subscribes /clock under sim time.
    let g = rosapi(&mut c, "node_details", json!({"node":"/rosgate"}));
    assert_eq!(g["subscribing"], json!(["/clock"]), "{g}");
    // Over WebSocket too.
    let mut ws = ws_at(&gw, "/");
    assert_eq!(
        ws_rosapi(&mut ws, "rosapi/get_time", json!({})),
        json!({"time":{"sec":43,"nanosec":0}})
    );
}

// =============================================================================================
// set_level
// =============================================================================================

#[test]
fn set_level_on_tcp_filters_statuses() {
    let gw = Gateway::start(&[]);
    let mut c = gw.client();
    c.send_line(r#"{"op":"set_level","level":"error","id":"l1"}"#);
    c.send_line(r#"{"op":"subscribe","topic":"/a","type":"t","id":"s1"}"#);
    c.send_line(r#"{"op":"nope","id":"bad1"}"#);
    c.expect_error("bad1");
    c.send_line(r#"{"op":"set_level","level":"warning"}"#);
    c.send_line(r#"{"op":"declare_node","name":"dup","id":"d1"}"#);
    let mut other = gw.client();
    let id = format!("d{}", uniq());
    other.send_json(&json!({"op":"declare_node","name":"dup","id":id}));
    other.expect_info(id.clone());
    other.expect_status("warning", Some(json!(id)));
    let w = c.recv();
    assert_status(&w, "warning", None);
    c.send_line(r#"{"op":"set_level","level":"none"}"#);
    c.send_line(r#"{"op":"nope","id":"bad2"}"#);
    quiet(&mut c);
    c.send_line(r#"{"op":"set_level","level":"debug"}"#);
    c.send_line(r#"{"op":"subscribe","topic":"/b","type":"t","id":"s2"}"#);
    c.expect_info("s2");
    c.send_line(r#"{"op":"set_level","level":"bogus","id":"l2"}"#);
    c.expect_error("l2");
    c.send_line(r#"{"op":"set_level","level":"info"}"#);
    c.send_line(r#"{"op":"subscribe","topic":"/c","type":"t","id":"s3"}"#);
    c.expect_info("s3");
    quiet(&mut c);
    let s = c.stats();
    assert_eq!(counter(&s, "errors.unknown_op"), 2, "{s}");
    assert_eq!(counter(&s, "subscriptions"), 3, "{s}");
}

#[test]
fn set_level_on_websocket() {
    let gw = Gateway::start(&[]);
    let mut ws = ws_at(&gw, "/");
    ws.send_text(r#"{"op":"subscribe","topic":"/a","type":"t","id":"s1"}"#);
    ws.send_text(r#"{"op":"nope","id":"bad1"}"#);
    let got = ws.barrier();
    assert_eq!(got.len(), 1, "default: warnings and errors only: {got:?}");
    assert_eq!(got[0]["id"], "bad1");
    ws.send_text(r#"{"op":"set_level","level":"info"}"#);
    ws.send_text(r#"{"op":"subscribe","topic":"/b","type":"t","id":"s2"}"#);
    let got = ws.barrier();
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(
        (got[0]["level"].clone(), got[0]["id"].clone()),
        (json!("info"), json!("s2"))
    );
    ws.send_text(r#"{"op":"set_level","level":"none"}"#);
    ws.send_text(r#"{"op":"nope","id":"bad2"}"#);
    assert!(ws.barrier().is_empty());
    ws.send_text(r#"{"op":"set_level","level":"error"}"#);
    ws.send_text(r#"{"op":"set_level","level":"loud","id":"l"}"#);
    let got = ws.barrier();
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(
        (got[0]["level"].clone(), got[0]["id"].clone()),
        (json!("error"), json!("l"))
    );
    let s = gw.stats();
    assert_eq!(counter(&s, "errors.unknown_op"), 2, "{s}");
    assert_eq!(counter(&s, "errors.wrong_type"), 1, "{s}");
}

/// Calls a built-in `/rosgate/...` service over TCP; it must succeed.
fn builtin(c: &mut Client, name: &str) -> Value {
    let v = request(c, json!({"op":"call_service","service":name,"args":{}}));
    assert_eq!(v["op"], "service_response", "{name}: {v}");
    assert_eq!(v["result"], true, "{name} failed: {v}");
    v["values"].clone()
}

/// The entry of `topic` in a `/rosgate/topic_stats` reply.
fn topic_entry(stats: &Value, topic: &str) -> Option<Value> {
    stats["topics"]
        .as_array()?
        .iter()
        .find(|t| t["topic"] == topic)
        .cloned()
}

#[test]
fn topic_stats_count_publishes_per_topic_and_domain() {
    let gw = Gateway::start(&[]);
    let mut pubr = gw.client();
    ok(&mut pubr, adv("/stats_a", "std_msgs/msg/String"));
    ok(&mut pubr, adv("/stats_b", "std_msgs/msg/String"));
    let mut ws = ws_at(&gw, "/");
    // WebSocket clients get no info statuses by default: a built-in call
    // answered after the subscribe proves it applied.
    ws.send_text(r#"{"op":"subscribe","topic":"/stats_a","type":"std_msgs/msg/String"}"#);
    ws_rosapi(&mut ws, "/rosgate/stats", json!({}));
    let msg_a = r#"{"data":"hello"}"#;
    let msg_b = r#"{"data":"a longer message"}"#;
    for _ in 0..5 {
        pubr.publish("/stats_a", msg_a);
    }
    for _ in 0..2 {
        pubr.publish("/stats_b", msg_b);
    }
    // Both transports answer with the same counts (the publisher's
    // connection answers after its publishes: requests are handled in order).
    let tcp = builtin(&mut pubr, "/rosgate/topic_stats");
    let over_ws = ws_rosapi(&mut ws, "/rosgate/topic_stats", json!({}));
    for stats in [&tcp, &over_ws] {
        let a = topic_entry(stats, "/stats_a").unwrap_or_else(|| panic!("{stats}"));
        assert_eq!(a["type"], "std_msgs/msg/String", "{a}");
        assert_eq!(a["publishers"], 1, "{a}");
        assert_eq!(a["subscribers"], 1, "{a}");
        assert_eq!(a["published"], 5, "{a}");
        assert_eq!(a["published_bytes"], 5 * msg_a.len(), "{a}");
        let b = topic_entry(stats, "/stats_b").unwrap_or_else(|| panic!("{stats}"));
        assert_eq!(b["subscribers"], 0, "{b}");
        assert_eq!(b["published"], 2, "{b}");
        assert_eq!(b["published_bytes"], 2 * msg_b.len(), "{b}");
    }
    // A topic that disappears starts again from zero.
    ok(&mut pubr, json!({"op":"unadvertise","topic":"/stats_b"}));
    let epoch = topic_entry(&tcp, "/stats_b").map(|b| b["epoch"].clone());
    let gone = builtin(&mut pubr, "/rosgate/topic_stats");
    assert!(topic_entry(&gone, "/stats_b").is_none(), "{gone}");
    ok(&mut pubr, adv("/stats_b", "std_msgs/msg/String"));
    pubr.publish("/stats_b", msg_b);
    let again = builtin(&mut pubr, "/rosgate/topic_stats");
    let b = topic_entry(&again, "/stats_b").unwrap_or_else(|| panic!("{again}"));
    assert_eq!(b["published"], 1, "{b}");
    // A reader can tell the counters restarted even if they grew past the
    // old ones in between.
    let (old, new) = (
        epoch.and_then(|e| e.as_u64()).unwrap_or(u64::MAX),
        b["epoch"].as_u64().unwrap_or(0),
    );
    assert!(new > old, "epoch {old} -> {new}");
    // Another domain has its own topics.
    let mut other = gw.client();
    declare(&mut other, json!({"name":"peek","domain":3}));
    let elsewhere = builtin(&mut other, "/rosgate/topic_stats");
    assert!(topic_entry(&elsewhere, "/stats_a").is_none(), "{elsewhere}");
}

/// Walks `/rosgate/topic_stats` page by page through `call` (one
/// transport's request); returns the pages' topic names.
fn topic_stats_walk(mut call: impl FnMut(Value) -> Value) -> Vec<Vec<String>> {
    let mut pages = Vec::new();
    let mut args = json!({});
    loop {
        let v = call(args);
        let names: Vec<String> = v["topics"]
            .as_array()
            .unwrap_or_else(|| panic!("{v}"))
            .iter()
            .map(|t| t["topic"].as_str().unwrap_or_default().to_string())
            .collect();
        let next = v.get("next").cloned();
        pages.push(names);
        match next {
            Some(n) => {
                assert_eq!(
                    Some(&n),
                    pages
                        .last()
                        .and_then(|p| p.last())
                        .map(|l| json!(l))
                        .as_ref()
                );
                args = json!({ "after": n });
            }
            None => return pages,
        }
        assert!(pages.len() < 10, "the walk never ended");
    }
}

#[test]
fn topic_stats_answers_a_page_at_a_time_on_both_transports() {
    const N: usize = 1500;
    let gw = Gateway::start(&[]);
    let mut holder = gw.client();
    let mut blob = String::new();
    for k in 0..N {
        blob.push_str(&format!(
            "{{\"op\":\"advertise\",\"topic\":\"/page/{k:04}\",\"type\":\"std_msgs/msg/Empty\"}}\n"
        ));
    }
    holder.send_raw(blob.as_bytes());
    // Requests are handled in order: the answer comes after every advertise.
    builtin(&mut holder, "/rosgate/stats");
    let want: Vec<String> = (0..N).map(|k| format!("/page/{k:04}")).collect();

    let mut tcp = gw.client();
    let mut ws = ws_at(&gw, "/");
    let tcp_pages = topic_stats_walk(|args| {
        let v = request(
            &mut tcp,
            json!({"op":"call_service","service":"/rosgate/topic_stats","args":args}),
        );
        assert_eq!(v["result"], true, "{v}");
        v["values"].clone()
    });
    let ws_pages = topic_stats_walk(|args| ws_rosapi(&mut ws, "/rosgate/topic_stats", args));
    for pages in [&tcp_pages, &ws_pages] {
        assert_eq!(
            pages.iter().map(Vec::len).collect::<Vec<_>>(),
            vec![1000, 500],
            "a page holds at most 1000 topics"
        );
        assert_eq!(pages.concat(), want, "every topic once, sorted");
    }
    // A smaller page on request.
    let v = request(
        &mut tcp,
        json!({"op":"call_service","service":"/rosgate/topic_stats","args":{"limit":2,"after":"/page/0007"}}),
    );
    assert_eq!(v["values"]["topics"][0]["topic"], "/page/0008", "{v}");
    assert_eq!(v["values"]["next"], "/page/0009", "{v}");
}

#[test]
fn node_events_name_the_connection_that_declared_the_node() {
    let gw = Gateway::start(&[]);
    let mut obs = gw.client();
    obs.subscribe("/rosgate/graph");
    let mut talker = gw.client();
    declare(&mut talker, json!({"name":"talker","namespace":"/n"}));
    let ev = graph_until(
        &mut obs,
        &[
            json!({"event":"client_connected","transport":"tcp"}),
            json!({"event":"node_added","node":"/n/talker"}),
        ],
    );
    let connected = &ev[position(&ev, &json!({"event":"client_connected"})).unwrap_or(0)];
    let added = &ev[position(&ev, &json!({"event":"node_added"})).unwrap_or(0)];
    assert!(connected["client"].is_string(), "{connected}");
    assert_eq!(added["client"], connected["client"], "{ev:?}");
    // The connection list names the same client with the node.
    let conns = builtin(&mut obs, "/rosgate/connections");
    let me = conns["connections"]
        .as_array()
        .and_then(|l| {
            l.iter()
                .find(|c| c["nodes"] == json!(["/n/talker"]))
                .cloned()
        })
        .unwrap_or_else(|| panic!("{conns}"));
    assert_eq!(me["client"], "/n/talker", "{me}");
    drop(talker);
    let ev = graph_until(
        &mut obs,
        &[json!({"event":"node_removed","node":"/n/talker"})],
    );
    let removed = &ev[position(&ev, &json!({"event":"node_removed"})).unwrap_or(0)];
    assert_eq!(removed["client"], connected["client"], "{ev:?}");
}
