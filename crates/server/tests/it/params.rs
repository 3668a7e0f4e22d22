//! Parameters (docs/protocol.md, "Parameters"): the owner's ops, the rules,
//! validation by the owner, held (ownerless) and global parameters, rosapi
//! and the six ROS 2 node services, `--params` overrides, domains and
//! `/parameter_events`, over TCP and WebSocket.
//!
//! Peers are `crate::peer`'s: its default barrier, a rosapi call, works on a
//! connection that declared a node (`Client::barrier`, an unsubscribe from
//! the invalid name `/__barrier__`, does not: names resolve there).
//! WebSocket peers ask for every status (`set_level info`) so that both
//! transports answer alike.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use crate::peer::*;
use crate::support::*;

/// The six ROS 2 parameter services served for a node with parameters.
const NODE_SERVICES: [(&str, &str); 6] = [
    (
        "describe_parameters",
        "rcl_interfaces/srv/DescribeParameters",
    ),
    (
        "get_parameter_types",
        "rcl_interfaces/srv/GetParameterTypes",
    ),
    ("get_parameters", "rcl_interfaces/srv/GetParameters"),
    ("list_parameters", "rcl_interfaces/srv/ListParameters"),
    ("set_parameters", "rcl_interfaces/srv/SetParameters"),
    (
        "set_parameters_atomically",
        "rcl_interfaces/srv/SetParametersAtomically",
    ),
];

/// rosapi is reachable with and without the leading slash.
const PREFIXES: [&str; 2] = ["/rosapi/", "rosapi/"];

// ---------------------------------------------------------------------------------------------
// A peer on either transport
// ---------------------------------------------------------------------------------------------

/// Every (owner, other) pairing of transports.
const PAIRS: [(Via, Via); 4] = [
    (Via::Tcp, Via::Tcp),
    (Via::Tcp, Via::Ws),
    (Via::Ws, Via::Tcp),
    (Via::Ws, Via::Ws),
];

/// The parameter ops on a [`Peer`].
impl Peer {
    /// Declares parameter `name` = `value` of the default node; `extra`
    /// adds `descriptor`, `validate` or `node`. Returns the status text.
    fn declare(&mut self, name: &str, value: Value, extra: Value) -> String {
        let mut req = json!({"op":"declare_parameter","name":name,"value":value});
        if let Some(o) = extra.as_object() {
            for (k, v) in o {
                req[k] = v.clone();
            }
        }
        self.ok(req)
    }

    /// Subscribes to `/parameter_events`.
    fn watch(&mut self) {
        self.ok(
            json!({"op":"subscribe","topic":"/parameter_events","type":"rcl_interfaces/msg/ParameterEvent"}),
        );
    }

    /// The next `/parameter_events` message (skipping nothing else but
    /// statuses).
    fn event(&mut self) -> Value {
        let (v, skipped) = self.until(|v| v["op"] == "publish");
        assert!(
            skipped.iter().all(|v| v["op"] == "status"),
            "{}: {skipped:?}",
            self.name
        );
        assert_eq!(v["topic"], "/parameter_events", "{v}");
        v["msg"].clone()
    }

    /// `/parameter_events` messages pending now.
    fn events(&mut self) -> Vec<Value> {
        self.pending()
            .into_iter()
            .filter(|v| v["op"] == "publish" && v["topic"] == "/parameter_events")
            .map(|v| v["msg"].clone())
            .collect()
    }

    /// The next validation call (`<node>/validate_parameters`).
    fn validation(&mut self, node: &str) -> Value {
        let (v, skipped) = self.until(|v| v["op"] == "call_service");
        assert!(
            skipped.iter().all(|v| v["op"] == "status"),
            "{}: {skipped:?}",
            self.name
        );
        assert_eq!(v["service"], format!("{node}/validate_parameters"), "{v}");
        assert!(
            v["id"].as_str().is_some_and(|s| s.starts_with("rg-")),
            "{v}"
        );
        assert_eq!(v["args"]["node"], node, "{v}");
        v
    }

    /// Answers a validation call.
    fn answer(&mut self, call: &Value, successful: bool, reason: &str) {
        self.send(&json!({
            "op":"service_response","service":call["service"],"id":call["id"],
            "values":{"successful":successful,"reason":reason},"result":true
        }));
    }
}

// ---------------------------------------------------------------------------------------------
// Values and access helpers
// ---------------------------------------------------------------------------------------------

/// An `rcl_interfaces/msg/ParameterValue` with all ten fields, as the
/// gateway emits it (`field` holds `v`).
fn pv(ty: u64, field: &str, v: Value) -> Value {
    let mut o = json!({
        "type": ty, "bool_value": false, "integer_value": 0, "double_value": 0.0,
        "string_value": "", "byte_array_value": [], "bool_array_value": [],
        "integer_array_value": [], "double_array_value": [], "string_array_value": [],
    });
    if ty != 0 {
        o[field] = v;
    }
    o
}

fn not_set() -> Value {
    pv(0, "", Value::Null)
}

fn double(d: f64) -> Value {
    pv(3, "double_value", json!(d))
}

fn integer(i: i64) -> Value {
    pv(2, "integer_value", json!(i))
}

/// rosapi `get_param` of `name`: the whole `values`.
fn get_param(p: &mut Peer, prefix: &str, name: &str) -> Value {
    p.values(&format!("{prefix}get_param"), json!({ "name": name }))
}

/// The value of `name` through rosapi `get_param`, parsed from its JSON
/// text (null when unset).
fn value_of(p: &mut Peer, name: &str) -> Value {
    let v = get_param(p, "/rosapi/", name);
    let text = v["value"]
        .as_str()
        .unwrap_or_else(|| panic!("get_param value is JSON text: {v}"));
    serde_json::from_str(text).unwrap_or_else(|e| panic!("get_param value {text:?}: {e}"))
}

/// rosapi `set_param` of `name` to `value` (sent as JSON text, as roslib
/// and roslibpy do); returns the whole response.
fn set_param(p: &mut Peer, prefix: &str, name: &str, value: Value) -> Value {
    p.call(
        &format!("{prefix}set_param"),
        json!({"name": name, "value": value.to_string()}),
    )
}

fn names(p: &mut Peer, prefix: &str) -> Vec<String> {
    strs(&p.values(&format!("{prefix}get_param_names"), json!({}))["names"])
}

fn has(p: &mut Peer, prefix: &str, name: &str) -> bool {
    let v = p.values(&format!("{prefix}has_param"), json!({ "name": name }));
    v["exists"]
        .as_bool()
        .unwrap_or_else(|| panic!("has_param: {v}"))
}

/// `<node>/get_parameters` of `names`: the ParameterValues.
fn get_parameters(p: &mut Peer, node: &str, names: &[&str]) -> Vec<Value> {
    let v = p.values(&format!("{node}/get_parameters"), json!({ "names": names }));
    v["values"]
        .as_array()
        .unwrap_or_else(|| panic!("get_parameters: {v}"))
        .clone()
}

/// `<node>/set_parameters`: one `{successful, reason}` per parameter.
fn set_parameters(p: &mut Peer, node: &str, params: Value) -> Vec<Value> {
    let v = p.values(
        &format!("{node}/set_parameters"),
        json!({ "parameters": params }),
    );
    v["results"]
        .as_array()
        .unwrap_or_else(|| panic!("set_parameters: {v}"))
        .clone()
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

/// A node name no other test uses.
fn fresh(base: &str) -> String {
    format!("{base}_{}", uniq())
}

fn assert_refused_with(result: &Value, fragment: &str) {
    assert_eq!(result["successful"], false, "{result}");
    let reason = result["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains(fragment),
        "reason {reason:?} should mention {fragment:?}"
    );
}

fn assert_recent(stamp: &Value) {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs();
    let sec = stamp["sec"].as_u64().unwrap_or_else(|| panic!("{stamp}"));
    assert!(stamp["nanosec"].as_u64().is_some_and(|n| n < 1_000_000_000));
    assert!(sec.abs_diff(now) < 120, "stamp is not now: {stamp}");
}

/// Checks one `/parameter_events` message: node, and which list holds the
/// one parameter (`kind`: new, changed or deleted) with `value`.
fn assert_event(ev: &Value, node: &str, kind: &str, name: &str, value: &Value) {
    assert_eq!(ev["node"], node, "{ev}");
    assert_recent(&ev["stamp"]);
    for list in ["new_parameters", "changed_parameters", "deleted_parameters"] {
        let want = if list.starts_with(kind) {
            json!([{"name": name, "value": value}])
        } else {
            json!([])
        };
        assert_eq!(ev[list], want, "{list} of {ev}");
    }
}

// =============================================================================================
// Held (ownerless) and global parameters through rosapi
// =============================================================================================

#[test]
fn held_parameters_through_rosapi_under_both_prefixes_on_both_transports() {
    let gw = Gateway::start(&[]);
    for via in VIAS {
        for prefix in PREFIXES {
            let mut p = Peer::open(&gw, via);
            let global = fresh("test_param");
            // Unset: "null", what roslibpy's json.loads and roslib's
            // JSON.parse turn into None/null.
            let v = get_param(&mut p, prefix, &global);
            assert_eq!(
                v,
                json!({"value":"null","successful":true,"reason":""}),
                "{via:?} {prefix}"
            );
            assert!(!has(&mut p, prefix, &global));
            // A default is returned as JSON text; a non-JSON one as a string.
            let d = p.values(
                &format!("{prefix}get_param"),
                json!({"name": global, "default_value": "5"}),
            );
            assert_eq!(d["value"], "5", "{d}");
            let d = p.values(
                &format!("{prefix}get_param"),
                json!({"name": global, "default": "plain words"}),
            );
            assert_eq!(d["value"], "\"plain words\"", "{d}");

            // Set creates, get reads, has sees, the names list it.
            let r = set_param(&mut p, prefix, &global, json!("test_value"));
            assert_eq!(r["result"], true, "{r}");
            assert_eq!(r["values"]["successful"], true, "{r}");
            assert_eq!(
                get_param(&mut p, prefix, &global)["value"],
                "\"test_value\""
            );
            assert!(has(&mut p, prefix, &global));
            assert!(names(&mut p, prefix).contains(&global));
            // A held parameter may change type: nobody declared it.
            let r = set_param(&mut p, prefix, &global, json!([1, 2.5]));
            assert_eq!(r["result"], true, "{r}");
            assert_eq!(value_of(&mut p, &global), json!([1.0, 2.5]));

            // node:param is a parameter of that node ('/' prefixed), held
            // by the gateway while nobody owns the node.
            let node = fresh("free");
            let scoped = format!("{node}:speed");
            let r = set_param(&mut p, prefix, &scoped, json!(3));
            assert_eq!(r["result"], true, "{r}");
            assert_eq!(value_of(&mut p, &scoped), json!(3));
            assert_eq!(value_of(&mut p, &format!("/{node}:speed")), json!(3));
            let all = names(&mut p, prefix);
            assert!(all.contains(&format!("/{node}:speed")), "{all:?}");
            // The plain name and the node's parameter are different ones.
            assert!(!has(&mut p, prefix, "speed"));
            // The node services serve a held node too.
            assert_eq!(
                get_parameters(&mut p, &format!("/{node}"), &["speed", "nope"]),
                vec![integer(3), not_set()]
            );

            // Delete removes; deleting again is harmless.
            for name in [&global, &scoped] {
                let d = p.values(&format!("{prefix}delete_param"), json!({ "name": name }));
                assert_eq!(d["successful"], true, "{d}");
                assert_eq!(get_param(&mut p, prefix, name)["value"], "null");
                assert!(!has(&mut p, prefix, name));
            }
            let d = p.values(&format!("{prefix}delete_param"), json!({ "name": global }));
            assert_eq!(d["successful"], true, "{d}");
            let all = names(&mut p, prefix);
            assert!(
                !all.contains(&global) && !all.iter().any(|n| n.contains(&node)),
                "{all:?}"
            );
            // Nothing else was sent meanwhile.
            p.quiet();
        }
    }
    let s = gw.stats();
    assert_eq!(counter(&s, "parameters"), 0, "{s}");
    assert_eq!(counter(&s, "param_sets_rejected"), 0, "{s}");
    assert_eq!(counter(&s, "param_sets_accepted"), 12, "{s}");
}

#[test]
fn malformed_rosapi_parameter_requests_fail_with_a_reason() {
    let gw = Gateway::start(&[]);
    for via in VIAS {
        let mut p = Peer::open(&gw, via);
        // The value of set_param is JSON text.
        let why = p.fails("/rosapi/set_param", json!({"name":"x","value":"not json"}));
        assert!(why.contains("JSON"), "{why}");
        // An object is no parameter value.
        let why = p.fails("rosapi/set_param", json!({"name":"x","value":"{\"a\":1}"}));
        assert!(why.contains("object"), "{why}");
        // A list of mixed kinds neither.
        let why = p.fails("/rosapi/set_param", json!({"name":"x","value":"[1,\"a\"]"}));
        assert!(why.contains("array"), "{why}");
        // No name, an empty parameter name.
        p.fails("/rosapi/set_param", json!({"value":"1"}));
        p.fails("/rosapi/set_param", json!({"name":"node:","value":"1"}));
        assert!(names(&mut p, "/rosapi/").is_empty());
        p.quiet();
    }
}

// =============================================================================================
// The owner's declarations, read through every path
// =============================================================================================

#[test]
fn declared_parameters_read_through_rosapi_and_every_node_service() {
    let gw = Gateway::start(&[]);
    for (owner_via, other_via) in PAIRS {
        let mut owner = Peer::open(&gw, owner_via);
        let mut other = Peer::open(&gw, other_via);
        let name = fresh("controller");
        let node = owner.node(&name, json!({}));
        assert_eq!(node, format!("/{name}"));
        let msg = owner.declare(
            "max_vel",
            json!(0.5),
            json!({"descriptor":{"description":"m/s","floating_point_range":{"from_value":0.0,"to_value":2.0,"step":0.0}}}),
        );
        assert_eq!(
            msg,
            format!("declared parameter {node}:max_vel = 0.5 (double)")
        );
        let msg = owner.declare(
            "rate",
            json!(10),
            json!({"descriptor":{"integer_range":[{"from_value":0,"to_value":100,"step":5}],"read_only":true}}),
        );
        assert!(msg.ends_with("= 10 (integer)"), "{msg}");
        owner.declare("mode", json!("auto"), json!({}));
        owner.declare("on", json!(true), json!({}));
        owner.declare("pid.p", json!(1.5), json!({}));
        owner.declare("pid.i.max", json!([1, 2]), json!({}));
        owner.declare("frames", json!(["a", "b"]), json!({}));
        let msg = owner.declare(
            "blob",
            json!({"type":5,"byte_array_value":[1,255]}),
            json!({}),
        );
        assert!(msg.ends_with("(byte_array)"), "{msg}");

        // rosapi, both prefixes.
        for prefix in PREFIXES {
            let v = get_param(&mut other, prefix, &format!("{name}:max_vel"));
            assert_eq!(
                v,
                json!({"value":"0.5","successful":true,"reason":""}),
                "{prefix}"
            );
            assert!(has(&mut other, prefix, &format!("{node}:rate")));
            let all = names(&mut other, prefix);
            for p in [
                "blob",
                "frames",
                "max_vel",
                "mode",
                "on",
                "pid.i.max",
                "pid.p",
                "rate",
            ] {
                assert!(all.contains(&format!("{node}:{p}")), "{p} in {all:?}");
            }
        }
        assert_eq!(
            value_of(&mut other, &format!("{node}:pid.i.max")),
            json!([1, 2])
        );
        assert_eq!(
            value_of(&mut other, &format!("{node}:frames")),
            json!(["a", "b"])
        );
        assert_eq!(
            value_of(&mut other, &format!("{node}:blob")),
            json!([1, 255])
        );

        // <node>/get_parameters: ParameterValues, type 0 for unknown names.
        assert_eq!(
            get_parameters(
                &mut other,
                &node,
                &[
                    "max_vel",
                    "rate",
                    "mode",
                    "on",
                    "blob",
                    "pid.i.max",
                    "frames",
                    "nope"
                ]
            ),
            vec![
                double(0.5),
                integer(10),
                pv(4, "string_value", json!("auto")),
                pv(1, "bool_value", json!(true)),
                pv(5, "byte_array_value", json!([1, 255])),
                pv(7, "integer_array_value", json!([1, 2])),
                pv(9, "string_array_value", json!(["a", "b"])),
                not_set(),
            ]
        );
        // get_parameter_types.
        let t = other.values(
            &format!("{node}/get_parameter_types"),
            json!({"names":["max_vel","rate","mode","on","blob","pid.i.max","frames","nope"]}),
        );
        assert_eq!(t, json!({"types":[3, 2, 4, 1, 5, 7, 9, 0]}));
        // describe_parameters: the descriptor as declared.
        let d = other.values(
            &format!("{node}/describe_parameters"),
            json!({"names":["max_vel","rate","nope"]}),
        );
        assert_eq!(
            d,
            json!({"descriptors":[
                {"name":"max_vel","type":3,"description":"m/s","additional_constraints":"","read_only":false,"dynamic_typing":false,
                 "floating_point_range":[{"from_value":0.0,"to_value":2.0,"step":0.0}],"integer_range":[]},
                {"name":"rate","type":2,"description":"","additional_constraints":"","read_only":true,"dynamic_typing":false,
                 "floating_point_range":[],"integer_range":[{"from_value":0,"to_value":100,"step":5}]},
                {"name":"nope","type":0,"description":"","additional_constraints":"","read_only":false,"dynamic_typing":false,
                 "floating_point_range":[],"integer_range":[]}
            ]})
        );
        // list_parameters: all, by prefix, by depth.
        let l = other.values(&format!("{node}/list_parameters"), json!({}));
        let mut listed = strs(&l["result"]["names"]);
        listed.sort();
        assert_eq!(
            listed,
            [
                "blob",
                "frames",
                "max_vel",
                "mode",
                "on",
                "pid.i.max",
                "pid.p",
                "rate"
            ]
        );
        let mut pre = strs(&l["result"]["prefixes"]);
        pre.sort();
        assert_eq!(pre, ["pid", "pid.i"]);
        let l = other.values(
            &format!("{node}/list_parameters"),
            json!({"prefixes":["pid"],"depth":1}),
        );
        assert_eq!(l["result"]["names"], json!(["pid.p"]), "{l}");
        let l = other.values(
            &format!("{node}/list_parameters"),
            json!({"prefixes":["pid"],"depth":0}),
        );
        let mut listed = strs(&l["result"]["names"]);
        listed.sort();
        assert_eq!(listed, ["pid.i.max", "pid.p"], "{l}");
        let l = other.values(
            &format!("{node}/list_parameters"),
            json!({"prefixes":[],"depth":1}),
        );
        let mut listed = strs(&l["result"]["names"]);
        listed.sort();
        assert_eq!(
            listed,
            ["blob", "frames", "max_vel", "mode", "on", "rate"],
            "{l}"
        );

        // The owner changes its own value (the rules apply, not validation).
        let msg = owner.ok(json!({"op":"set_parameter","name":"max_vel","value":1.25}));
        assert!(msg.contains("max_vel"), "{msg}");
        assert_eq!(
            value_of(&mut other, &format!("{node}:max_vel")),
            json!(1.25)
        );
        // The owner undeclares: gone everywhere.
        owner.ok(json!({"op":"undeclare_parameter","name":"mode"}));
        assert!(!has(&mut other, "/rosapi/", &format!("{node}:mode")));
        assert_eq!(
            get_parameters(&mut other, &node, &["mode"]),
            vec![not_set()]
        );
        assert!(!names(&mut other, "rosapi/").contains(&format!("{node}:mode")));
        // An owned parameter cannot be deleted through rosapi.
        let why = other.fails(
            "/rosapi/delete_param",
            json!({"name": format!("{node}:max_vel")}),
        );
        assert!(why.contains("owner"), "{why}");
        assert_eq!(
            value_of(&mut other, &format!("{node}:max_vel")),
            json!(1.25)
        );
        owner.quiet();
        other.quiet();
    }
}

#[test]
fn the_owners_operations_are_checked() {
    let gw = Gateway::start(&[]);
    for via in VIAS {
        let mut p = Peer::open(&gw, via);
        // Parameters belong to a node.
        let why = p.refused(json!({"op":"declare_parameter","name":"a","value":1}));
        assert!(why.contains("declare_node"), "{why}");
        p.refused(json!({"op":"set_parameter","name":"a","value":1}));
        let name = fresh("checked");
        let node = p.node(&name, json!({}));
        // Bad names, values, descriptors.
        for bad in [
            json!({"name":"a:b","value":1}),
            json!({"name":"a b","value":1}),
            json!({"name":"","value":1}),
            json!({"name":"x".repeat(257),"value":1}),
            json!({"name":"obj","value":{"a":1}}),
            json!({"name":"mixed","value":[1,"a"]}),
            json!({"name":"pv","value":{"type":42}}),
            json!({"name":"bytes","value":{"type":5,"byte_array_value":[256]}}),
            json!({"name":"d","value":1,"descriptor":"read_only"}),
            json!({"name":"r","value":1,"descriptor":{"integer_range":{"from_value":"0","to_value":5}}}),
            // The default must satisfy its own range.
            json!({"name":"out","value":9,"descriptor":{"integer_range":{"from_value":0,"to_value":5,"step":1}}}),
        ] {
            let mut req = bad.clone();
            req["op"] = json!("declare_parameter");
            p.refused(req);
        }
        let why =
            p.refused(json!({"op":"declare_parameter","name":"v","value":1,"validate":"yes"}));
        assert!(why.contains("validate"), "{why}");
        // Nothing was declared.
        let mut other = Peer::tcp(&gw);
        assert!(!names(&mut other, "/rosapi/")
            .iter()
            .any(|n| n.starts_with(&node)));
        // Undeclare or set what was never declared.
        p.refused(json!({"op":"undeclare_parameter","name":"nope"}));
        let why = p.refused(json!({"op":"set_parameter","name":"nope","value":1}));
        assert!(why.contains("not declared"), "{why}");
        // "node" names one of this connection's nodes, and no other.
        let second = fresh("second");
        p.node(&second, json!({}));
        p.declare("k", json!(1), json!({ "node": second }));
        assert_eq!(value_of(&mut other, &format!("{second}:k")), json!(1));
        assert!(!has(&mut other, "/rosapi/", &format!("{name}:k")));
        let why =
            p.refused(json!({"op":"declare_parameter","name":"k","value":1,"node":"elsewhere"}));
        assert!(!why.is_empty());
        p.quiet();
    }
    let s = gw.stats();
    // Per transport: 11 bad declarations and the set and undeclare of
    // nothing; the node-less and unknown-node ones count as unknown_node,
    // a non-bool `validate` as wrong_type.
    assert_eq!(counter(&s, "errors.bad_parameter"), 2 * 13, "{s}");
    assert_eq!(counter(&s, "errors.unknown_node"), 2 * 3, "{s}");
    assert_eq!(counter(&s, "errors.wrong_type"), 2, "{s}");
    assert_eq!(counter(&s, "params_declared"), 2, "{s}");
}

// =============================================================================================
// Setting through each path, and the rules
// =============================================================================================

#[test]
fn sets_through_rosapi_and_the_node_services_answer_in_their_shapes() {
    let gw = Gateway::start(&[]);
    for (owner_via, other_via) in PAIRS {
        let mut owner = Peer::open(&gw, owner_via);
        let mut other = Peer::open(&gw, other_via);
        let name = fresh("setter");
        let node = owner.node(&name, json!({}));
        owner.declare("a", json!(1), json!({}));
        owner.declare("b", json!("x"), json!({}));
        owner.declare("ro", json!(true), json!({"descriptor":{"read_only":true}}));

        // rosapi set_param, both prefixes.
        for (prefix, v) in PREFIXES.iter().zip([2, 3]) {
            let r = set_param(&mut other, prefix, &format!("{name}:a"), json!(v));
            assert_eq!(
                r,
                json!({"op":"service_response","service":format!("{prefix}set_param"),"id":r["id"],"values":{"successful":true,"reason":""},"result":true})
            );
            assert_eq!(value_of(&mut other, &format!("{name}:a")), json!(v));
        }
        // set_parameters: each parameter on its own (ParameterValue or
        // plain JSON values).
        let results = set_parameters(
            &mut other,
            &node,
            json!([
                {"name":"a","value":{"type":2,"integer_value":4}},
                {"name":"ro","value":{"type":1,"bool_value":false}},
                {"name":"b","value":"y"},
                {"name":"undeclared","value":1},
            ]),
        );
        assert_eq!(results.len(), 4, "{results:?}");
        assert_eq!(results[0], json!({"successful":true,"reason":""}));
        assert_refused_with(&results[1], "read-only");
        assert_eq!(results[2], json!({"successful":true,"reason":""}));
        assert_refused_with(&results[3], "not declared");
        assert_eq!(
            get_parameters(&mut other, &node, &["a", "ro", "b"]),
            vec![
                integer(4),
                pv(1, "bool_value", json!(true)),
                pv(4, "string_value", json!("y"))
            ]
        );
        // set_parameters_atomically: all or nothing.
        let atomic = format!("{node}/set_parameters_atomically");
        let r = other.values(
            &atomic,
            json!({"parameters":[{"name":"a","value":5},{"name":"ro","value":false}]}),
        );
        assert_refused_with(&r["result"], "read-only");
        assert_eq!(
            value_of(&mut other, &format!("{name}:a")),
            json!(4),
            "nothing applied"
        );
        let r = other.values(
            &atomic,
            json!({"parameters":[{"name":"a","value":6},{"name":"b","value":"z"}]}),
        );
        assert_eq!(r, json!({"result":{"successful":true,"reason":""}}));
        assert_eq!(value_of(&mut other, &format!("{name}:a")), json!(6));
        assert_eq!(value_of(&mut other, &format!("{name}:b")), json!("z"));
        // A parameter without a value, or with an impossible one, fails
        // the whole request.
        for bad in [
            json!({"parameters":[{"name":"a"}]}),
            json!({"parameters":[{"name":"a","value":{"x":1}}]}),
        ] {
            other.fails(&format!("{node}/set_parameters"), bad.clone());
            other.fails(&atomic, bad);
        }
        assert_eq!(value_of(&mut other, &format!("{name}:a")), json!(6));
        owner.quiet();
        other.quiet();
    }
}

#[test]
fn type_read_only_and_range_rules_keep_the_old_value() {
    let gw = Gateway::start(&[]);
    for (owner_via, other_via) in PAIRS {
        let mut owner = Peer::open(&gw, owner_via);
        let mut other = Peer::open(&gw, other_via);
        let name = fresh("ruled");
        let node = owner.node(&name, json!({}));
        owner.declare(
            "count",
            json!(4),
            json!({"descriptor":{"integer_range":{"from_value":0,"to_value":10,"step":2}}}),
        );
        owner.declare("ratio", json!(0.5), json!({"descriptor":{"floating_point_range":{"from_value":0.0,"to_value":1.0,"step":0.1}}}));
        owner.declare(
            "speed",
            json!(1.0),
            json!({"descriptor":{"floating_point_range":{"from_value":0.0,"to_value":2.0}}}),
        );
        owner.declare("label", json!("x"), json!({}));
        owner.declare(
            "anything",
            json!(1),
            json!({"descriptor":{"dynamic_typing":true}}),
        );
        owner.declare("fixed", json!(7), json!({"descriptor":{"read_only":true}}));

        let refused = |other: &mut Peer, param: &str, v: Value, fragment: &str| {
            let r = set_param(other, "/rosapi/", &format!("{name}:{param}"), v.clone());
            assert_failure(&r);
            let why = r["values"].as_str().unwrap_or_default();
            assert!(
                why.contains(param) && why.contains(fragment),
                "{param} = {v}: {why:?} should mention {fragment:?}"
            );
        };
        // Type changes.
        refused(&mut other, "count", json!(4.0), "type integer");
        refused(&mut other, "count", json!("4"), "cannot become string");
        refused(&mut other, "label", json!(1), "type string");
        refused(&mut other, "ratio", json!([0.5]), "double_array");
        // Read-only, whatever the value.
        refused(&mut other, "fixed", json!(7), "read-only");
        refused(&mut other, "fixed", json!(8), "read-only");
        // Integer range, exactly, with its step.
        refused(&mut other, "count", json!(-2), "outside the integer range");
        refused(&mut other, "count", json!(12), "outside the integer range");
        refused(&mut other, "count", json!(5), "step 2");
        // Floating-point ranges, with rclcpp's tolerance.
        refused(
            &mut other,
            "ratio",
            json!(1.2),
            "outside the floating-point range",
        );
        refused(
            &mut other,
            "ratio",
            json!(0.35),
            "outside the floating-point range",
        );
        refused(
            &mut other,
            "speed",
            json!(2.01),
            "outside the floating-point range",
        );
        refused(
            &mut other,
            "speed",
            json!(-0.001),
            "outside the floating-point range",
        );
        // Old values kept.
        assert_eq!(
            get_parameters(
                &mut other,
                &node,
                &["count", "ratio", "speed", "label", "fixed"]
            ),
            vec![
                integer(4),
                double(0.5),
                double(1.0),
                pv(4, "string_value", json!("x")),
                integer(7)
            ]
        );
        // What the rules allow.
        for (param, v) in [
            ("count", json!(0)),
            ("count", json!(10)),
            ("count", json!(8)),
            ("ratio", json!(0.3)),
            ("ratio", json!(1.0)),
            ("ratio", json!(1.0000001)),
            ("speed", json!(2.0000001)),
            ("speed", json!(0.123)),
            ("anything", json!("now a string")),
            ("anything", json!([true, false])),
            ("label", json!("y")),
        ] {
            let r = set_param(&mut other, "rosapi/", &format!("{name}:{param}"), v.clone());
            assert_eq!(r["result"], true, "{param} = {v}: {r}");
            assert_eq!(value_of(&mut other, &format!("{name}:{param}")), v);
        }
        // The owner's own set obeys the same rules.
        let why = owner.refused(json!({"op":"set_parameter","name":"fixed","value":1}));
        assert!(why.contains("read-only"), "{why}");
        let why = owner.refused(json!({"op":"set_parameter","name":"count","value":3}));
        assert!(why.contains("integer range"), "{why}");
        let why = owner.refused(json!({"op":"set_parameter","name":"label","value":false}));
        assert!(why.contains("type string"), "{why}");
        assert_eq!(value_of(&mut other, &format!("{name}:count")), json!(8));
        owner.quiet();
        other.quiet();
    }
    let s = gw.stats();
    assert_eq!(counter(&s, "param_sets_rejected"), 4 * 13 + 4 * 3, "{s}");
}

#[test]
fn undeclared_parameters_of_an_owned_node_are_refused_and_read_as_such() {
    let gw = Gateway::start(&[]);
    for (owner_via, other_via) in PAIRS {
        let mut owner = Peer::open(&gw, owner_via);
        let mut other = Peer::open(&gw, other_via);
        let name = fresh("owned");
        let node = owner.node(&name, json!({}));
        let check = |other: &mut Peer, when: &str| {
            let full = format!("{name}:nope");
            let v = get_param(other, "/rosapi/", &full);
            assert_eq!(v["successful"], false, "{when}: {v}");
            assert_eq!(v["value"], "null", "{when}: {v}");
            assert!(
                v["reason"]
                    .as_str()
                    .is_some_and(|r| r.contains("did not declare")),
                "{when}: {v}"
            );
            assert!(!has(other, "rosapi/", &full), "{when}");
            let r = set_param(other, "/rosapi/", &full, json!(1));
            assert_failure(&r);
            assert!(
                r["values"]
                    .as_str()
                    .is_some_and(|r| r.contains("not declared")),
                "{when}: {r}"
            );
            assert!(
                !names(other, "/rosapi/")
                    .iter()
                    .any(|n| n.starts_with(&node)),
                "{when}: the refused set created nothing"
            );
        };
        // A declared node that declared no parameter yet is owned all the
        // same: nobody else creates parameters in it.
        check(&mut other, "before any declaration");
        owner.declare("yes", json!(1), json!({}));
        let v = get_param(&mut other, "/rosapi/", &format!("{name}:nope"));
        assert_eq!(v["successful"], false, "{v}");
        let r = set_param(&mut other, "/rosapi/", &format!("{name}:nope"), json!(1));
        assert_failure(&r);
        assert_eq!(
            get_parameters(&mut other, &node, &["nope", "yes"]),
            vec![not_set(), integer(1)]
        );
        let results = set_parameters(&mut other, &node, json!([{"name":"nope","value":1}]));
        assert_refused_with(&results[0], "not declared");
        // And after it undeclared its last parameter.
        owner.ok(json!({"op":"undeclare_parameter","name":"yes"}));
        check(&mut other, "after undeclaring everything");
        // Once the node is gone, the name is free: held by the gateway.
        drop(owner);
        let dl = deadline(REPLY);
        loop {
            let r = set_param(&mut other, "/rosapi/", &format!("{name}:nope"), json!(1));
            if r["result"] == true {
                break;
            }
            assert!(Instant::now() < dl, "still owned after its owner left: {r}");
            std::thread::sleep(ms(10));
        }
        assert_eq!(value_of(&mut other, &format!("{name}:nope")), json!(1));
        other.values(
            "/rosapi/delete_param",
            json!({"name": format!("{name}:nope")}),
        );
    }
}

// =============================================================================================
// Validation by the owner
// =============================================================================================

#[test]
fn validation_accepted_and_rejected_through_each_set_path() {
    let gw = Gateway::start(&[]);
    for (owner_via, other_via) in PAIRS {
        let mut owner = Peer::open(&gw, owner_via);
        let mut other = Peer::open(&gw, other_via);
        let mut watcher = Peer::tcp(&gw);
        watcher.watch();
        let name = fresh("controller");
        let node = owner.node(&name, json!({}));
        owner.declare(
            "max_vel",
            json!(0.5),
            json!({"validate":true,"descriptor":{"floating_point_range":{"from_value":0.0,"to_value":2.0}}}),
        );
        owner.declare("plain", json!(1), json!({}));
        assert_event(&watcher.event(), &node, "new", "max_vel", &double(0.5));
        assert_event(&watcher.event(), &node, "new", "plain", &integer(1));

        // A change the rules refuse never reaches the owner.
        let results = set_parameters(&mut other, &node, json!([{"name":"max_vel","value":5.0}]));
        assert_refused_with(&results[0], "floating-point range");
        owner.quiet();

        // rosapi set_param, rejected: the reason reaches the requester.
        let id = format!("s{}", uniq());
        other.send(
            &json!({"op":"call_service","service":"rosapi/set_param","id":id,
            "args":{"name":format!("{name}:max_vel"),"value":"1.9"}}),
        );
        let call = owner.validation(&node);
        assert_eq!(
            call["args"]["parameters"],
            json!([{"name":"max_vel","value":1.9,"type":"double"}])
        );
        owner.answer(&call, false, "too fast near people");
        let (r, _) = other.until(|v| v["id"] == json!(id));
        assert_failure(&r);
        assert_eq!(r["service"], "rosapi/set_param");
        let why = r["values"].as_str().unwrap_or_default();
        assert!(
            why.contains("max_vel") && why.contains("too fast near people"),
            "{why}"
        );
        assert_eq!(value_of(&mut other, &format!("{name}:max_vel")), json!(0.5));
        // An empty reason still says something.
        let id = format!("s{}", uniq());
        other.send(
            &json!({"op":"call_service","service":"/rosapi/set_param","id":id,
            "args":{"name":format!("{name}:max_vel"),"value":"1.8"}}),
        );
        let call = owner.validation(&node);
        owner.answer(&call, false, "");
        let (r, _) = other.until(|v| v["id"] == json!(id));
        assert_failure(&r);

        // rosapi set_param, accepted: applied, then answered.
        let id = format!("s{}", uniq());
        other.send(
            &json!({"op":"call_service","service":"/rosapi/set_param","id":id,
            "args":{"name":format!("{name}:max_vel"),"value":"1.2"}}),
        );
        let call = owner.validation(&node);
        owner.answer(&call, true, "");
        let (r, _) = other.until(|v| v["id"] == json!(id));
        assert_eq!(r["values"], json!({"successful":true,"reason":""}), "{r}");
        assert_eq!(r["result"], true, "{r}");
        assert_event(&watcher.event(), &node, "changed", "max_vel", &double(1.2));
        assert_eq!(value_of(&mut other, &format!("{name}:max_vel")), json!(1.2));

        // set_parameters: the plain parameter is applied at once, the
        // validated one waits for the owner, who sees only it.
        let id = format!("s{}", uniq());
        other.send(&json!({"op":"call_service","service":format!("{node}/set_parameters"),"id":id,
            "args":{"parameters":[{"name":"plain","value":2},{"name":"max_vel","value":{"type":3,"double_value":1.5}}]}}));
        let call = owner.validation(&node);
        assert_eq!(
            call["args"]["parameters"],
            json!([{"name":"max_vel","value":1.5,"type":"double"}])
        );
        owner.answer(&call, false, "not now");
        let (r, _) = other.until(|v| v["id"] == json!(id));
        let results = r["values"]["results"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert_eq!(results.len(), 2, "{r}");
        assert_eq!(results[0], json!({"successful":true,"reason":""}));
        assert_refused_with(&results[1], "not now");
        assert_eq!(
            get_parameters(&mut other, &node, &["plain", "max_vel"]),
            vec![integer(2), double(1.2)]
        );
        assert_event(&watcher.event(), &node, "changed", "plain", &integer(2));

        // set_parameters_atomically: the owner sees every change; its "no"
        // refuses them all.
        let atomic = format!("{node}/set_parameters_atomically");
        let id = format!("s{}", uniq());
        other.send(&json!({"op":"call_service","service":atomic,"id":id,
            "args":{"parameters":[{"name":"plain","value":3},{"name":"max_vel","value":0.7}]}}));
        let call = owner.validation(&node);
        assert_eq!(
            call["args"]["parameters"],
            json!([{"name":"plain","value":3,"type":"integer"},{"name":"max_vel","value":0.7,"type":"double"}])
        );
        owner.answer(&call, false, "all or nothing");
        let (r, _) = other.until(|v| v["id"] == json!(id));
        assert_refused_with(&r["values"]["result"], "all or nothing");
        assert_eq!(
            get_parameters(&mut other, &node, &["plain", "max_vel"]),
            vec![integer(2), double(1.2)]
        );
        // ... and its "yes" applies them all.
        let id = format!("s{}", uniq());
        other.send(&json!({"op":"call_service","service":atomic,"id":id,
            "args":{"parameters":[{"name":"plain","value":3},{"name":"max_vel","value":0.7}]}}));
        let call = owner.validation(&node);
        owner.answer(&call, true, "");
        let (r, _) = other.until(|v| v["id"] == json!(id));
        assert_eq!(
            r["values"],
            json!({"result":{"successful":true,"reason":""}})
        );
        assert_eq!(
            get_parameters(&mut other, &node, &["plain", "max_vel"]),
            vec![integer(3), double(0.7)]
        );
        // The owner's own set is not validated.
        owner.ok(json!({"op":"set_parameter","name":"max_vel","value":1.9}));
        assert_eq!(value_of(&mut other, &format!("{name}:max_vel")), json!(1.9));
        // A rejection answered with result:false, or a bare string, is a
        // rejection too.
        let id = format!("s{}", uniq());
        other.send(
            &json!({"op":"call_service","service":"/rosapi/set_param","id":id,
            "args":{"name":format!("{name}:max_vel"),"value":"0.1"}}),
        );
        let call = owner.validation(&node);
        owner.send(
            &json!({"op":"service_response","service":call["service"],"id":call["id"],
            "values":"validator says no","result":false}),
        );
        let (r, _) = other.until(|v| v["id"] == json!(id));
        assert_failure(&r);
        assert!(
            r["values"]
                .as_str()
                .is_some_and(|s| s.contains("validator says no")),
            "{r}"
        );
        assert_eq!(value_of(&mut other, &format!("{name}:max_vel")), json!(1.9));
        owner.quiet();
        other.quiet();
    }
    let s = gw.stats();
    assert_eq!(counter(&s, "param_validations"), 4 * 7, "{s}");
    assert_eq!(counter(&s, "param_validations_failed"), 0, "{s}");
    assert_eq!(counter(&s, "calls_pending"), 0, "{s}");
}

#[test]
fn a_silent_owner_times_out_the_validation_and_its_late_answer_is_stale() {
    let gw = Gateway::start(&["--call-timeout-ms", "300"]);
    for (owner_via, other_via) in PAIRS {
        let mut owner = Peer::open(&gw, owner_via);
        let mut other = Peer::open(&gw, other_via);
        let name = fresh("slow");
        let node = owner.node(&name, json!({}));
        owner.declare("gain", json!(1), json!({"validate":true}));
        for service in [
            "/rosapi/set_param".to_string(),
            format!("{node}/set_parameters"),
        ] {
            let id = format!("s{}", uniq());
            let args = if service.ends_with("set_param") {
                json!({"name":format!("{name}:gain"),"value":"2"})
            } else {
                json!({"parameters":[{"name":"gain","value":2}]})
            };
            let t0 = Instant::now();
            other.send(&json!({"op":"call_service","service":service,"id":id,"args":args}));
            let call = owner.validation(&node);
            let (r, skipped) = other.until(|v| v["id"] == json!(id));
            let waited = t0.elapsed();
            assert!(skipped.is_empty(), "{skipped:?}");
            assert!(
                waited >= ms(250),
                "answered after {waited:?}, before the 300 ms call timeout"
            );
            let why = if service.ends_with("set_param") {
                assert_failure(&r);
                r["values"].as_str().unwrap_or_default().to_string()
            } else {
                let results = r["values"]["results"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                assert_eq!(results.len(), 1, "{r}");
                assert_eq!(results[0]["successful"], false, "{r}");
                results[0]["reason"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            };
            assert!(why.contains("timed out"), "{why}");
            assert_eq!(value_of(&mut other, &format!("{name}:gain")), json!(1));
            // The owner's late "yes" changes nothing and is refused.
            owner.answer(&call, true, "");
            let (e, _) = owner.until(|v| v["op"] == "status");
            assert_eq!(e["level"], "error", "{e}");
            assert_eq!(e["id"], call["id"], "{e}");
            assert_eq!(value_of(&mut other, &format!("{name}:gain")), json!(1));
            // Exactly one answer reached the requester.
            other.quiet();
        }
    }
    let s = gw.stats();
    assert_eq!(counter(&s, "param_validations"), 8, "{s}");
    assert_eq!(counter(&s, "param_validations_failed"), 8, "{s}");
    assert_eq!(counter(&s, "responses_stale"), 8, "{s}");
    assert_eq!(counter(&s, "calls_pending"), 0, "{s}");
}

#[test]
fn owner_leaving_during_a_validation_rejects_it_at_once() {
    let gw = Gateway::start(&["--call-timeout-ms", "20000"]);
    for (owner_via, other_via) in PAIRS {
        let mut owner = Peer::open(&gw, owner_via);
        let mut other = Peer::open(&gw, other_via);
        let mut watcher = Peer::open(&gw, other_via);
        watcher.watch();
        let name = fresh("leaving");
        let node = owner.node(&name, json!({}));
        owner.declare("gain", json!(1), json!({"validate":true}));
        assert_event(&watcher.event(), &node, "new", "gain", &integer(1));
        let id = format!("s{}", uniq());
        other.send(
            &json!({"op":"call_service","service":"/rosapi/set_param","id":id,
            "args":{"name":format!("{name}:gain"),"value":"2"}}),
        );
        owner.validation(&node);
        let t0 = Instant::now();
        drop(owner);
        let (r, _) = other.until(|v| v["id"] == json!(id));
        assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
        assert_failure(&r);
        let why = r["values"].as_str().unwrap_or_default();
        assert!(
            why.contains("gain") && why.contains("disconnected"),
            "{why}"
        );
        // Its parameters went with it.
        assert_event(&watcher.event(), &node, "deleted", "gain", &not_set());
        assert_eq!(value_of(&mut other, &format!("{name}:gain")), Value::Null);
        assert!(watcher.events().is_empty());
        other.quiet();
    }
    let s = gw.stats();
    assert_eq!(counter(&s, "param_validations_failed"), 4, "{s}");
    assert_eq!(counter(&s, "calls_pending"), 0, "{s}");
    assert_eq!(counter(&s, "parameters"), 0, "{s}");
}

#[test]
fn requester_leaving_during_a_validation_makes_the_answer_stale() {
    let gw = Gateway::start(&["--call-timeout-ms", "20000"]);
    for (owner_via, other_via) in PAIRS {
        let mut owner = Peer::open(&gw, owner_via);
        let mut other = Peer::open(&gw, other_via);
        let mut reader = Peer::tcp(&gw);
        let name = fresh("asked");
        let node = owner.node(&name, json!({}));
        owner.declare("gain", json!(1), json!({"validate":true}));
        other.send(
            &json!({"op":"call_service","service":format!("{node}/set_parameters"),"id":1,
            "args":{"parameters":[{"name":"gain","value":2}]}}),
        );
        let call = owner.validation(&node);
        drop(other);
        // The requester is gone once its calls are forgotten.
        gw.wait_for_stats("the requester's validation forgotten", |s| {
            counter(s, "calls_pending") == 0
        });
        owner.answer(&call, true, "");
        let (e, _) = owner.until(|v| v["op"] == "status");
        assert_eq!(e["level"], "error", "{e}");
        assert_eq!(value_of(&mut reader, &format!("{name}:gain")), json!(1));
        owner.quiet();
    }
}

#[test]
fn destroying_the_node_during_a_validation_refuses_the_change() {
    let gw = Gateway::start(&["--call-timeout-ms", "20000"]);
    for (owner_via, other_via) in PAIRS {
        let mut owner = Peer::open(&gw, owner_via);
        let mut other = Peer::open(&gw, other_via);
        let name = fresh("destroyed");
        let node = owner.node(&name, json!({}));
        owner.declare("gain", json!(1), json!({"validate":true}));
        let id = format!("s{}", uniq());
        other.send(
            &json!({"op":"call_service","service":"/rosapi/set_param","id":id,
            "args":{"name":format!("{name}:gain"),"value":"2"}}),
        );
        let call = owner.validation(&node);
        owner.ok(json!({"op":"destroy_node","name":name}));
        // A second connection declares the node again, with the parameter
        // but no validation: the first owner's "yes" must not apply to it.
        let mut heir = Peer::tcp(&gw);
        heir.node(&name, json!({}));
        heir.declare("gain", json!(5), json!({}));
        owner.answer(&call, true, "");
        let (r, _) = other.until(|v| v["id"] == json!(id));
        assert_failure(&r);
        assert_eq!(value_of(&mut other, &format!("{name}:gain")), json!(5));
        heir.quiet();
        // Without an heir: the answer resurrects nothing.
        let name = fresh("destroyed");
        let node = owner.node(&name, json!({}));
        owner.declare("gain", json!(1), json!({"validate":true,"node":name}));
        let id = format!("s{}", uniq());
        other.send(
            &json!({"op":"call_service","service":"/rosapi/set_param","id":id,
            "args":{"name":format!("{name}:gain"),"value":"2"}}),
        );
        let call = owner.validation(&node);
        owner.ok(json!({"op":"destroy_node","name":name}));
        owner.answer(&call, true, "");
        let (r, _) = other.until(|v| v["id"] == json!(id));
        assert_failure(&r);
        assert!(!has(&mut other, "/rosapi/", &format!("{name}:gain")));
        assert!(!names(&mut other, "/rosapi/")
            .iter()
            .any(|n| n.starts_with(&node)));
        owner.quiet();
        other.quiet();
    }
}

// =============================================================================================
// The owner leaves
// =============================================================================================

#[test]
fn owner_disconnect_or_destroy_node_removes_its_parameters_with_events() {
    let gw = Gateway::start(&[]);
    for (owner_via, other_via) in PAIRS {
        for destroy in [false, true] {
            let mut owner = Peer::open(&gw, owner_via);
            let mut watcher = Peer::open(&gw, other_via);
            watcher.watch();
            let name = fresh("gone");
            let node = owner.node(&name, json!({}));
            owner.declare("a", json!(1), json!({}));
            owner.declare("b", json!("s"), json!({}));
            assert_eq!(watcher.event()["new_parameters"][0]["name"], "a");
            assert_eq!(watcher.event()["new_parameters"][0]["name"], "b");
            assert!(names(&mut watcher, "/rosapi/").contains(&format!("{node}:a")));
            if destroy {
                owner.ok(json!({"op":"destroy_node","name":name}));
            } else {
                drop(owner);
            }
            let mut deleted: Vec<String> = (0..2)
                .map(|_| {
                    let ev = watcher.event();
                    assert_eq!(ev["node"], node, "{ev}");
                    assert_eq!(ev["new_parameters"], json!([]), "{ev}");
                    assert_eq!(ev["changed_parameters"], json!([]), "{ev}");
                    let d = &ev["deleted_parameters"];
                    assert_eq!(d.as_array().map(Vec::len), Some(1), "{ev}");
                    assert_eq!(d[0]["value"], not_set(), "{ev}");
                    d[0]["name"].as_str().unwrap_or_default().to_string()
                })
                .collect();
            deleted.sort();
            assert_eq!(deleted, ["a", "b"]);
            assert!(!names(&mut watcher, "/rosapi/")
                .iter()
                .any(|n| n.starts_with(&node)));
            // The node services are gone with them.
            watcher.fails(&format!("{node}/get_parameters"), json!({"names":["a"]}));
            assert!(watcher.events().is_empty());
        }
    }
    let s = gw.stats();
    assert_eq!(counter(&s, "parameters"), 0, "{s}");
    assert_eq!(counter(&s, "param_events"), 8 * 4, "{s}");
}

// =============================================================================================
// --params FILE
// =============================================================================================

#[test]
fn yaml_overrides_beat_declared_defaults() {
    let first = TempFile::new(
        "params.yaml",
        "# start-up overrides\n\
         ctl:\n\
        \x20 ros__parameters:\n\
        \x20   max_vel: 1.5\n\
        \x20   name: from_first\n\
        \x20   pid:\n\
        \x20     p: 2.0\n\
        \x20     gains: [1, 2.5]\n\
         /robot_1/cam:\n\
        \x20 ros__parameters:\n\
        \x20   fps: 30\n\
         robot_2:\n\
        \x20 cam:\n\
        \x20   ros__parameters:\n\
        \x20     fps: 15\n\
         /**:\n\
        \x20 ros__parameters:\n\
        \x20   use_sim_time: true\n",
    );
    let second = TempFile::new(
        "params.yaml",
        "/ctl:\n  ros__parameters:\n    name: from_second\n",
    );
    let gw = Gateway::start(&["--params", first.path(), "--params", second.path()]);
    for via in VIAS {
        let mut owner = match via {
            Via::Tcp => Peer::tcp(&gw),
            Via::Ws => Peer::ws_at(&gw, "/?node=ctl", ""),
        };
        let mut reader = Peer::open(&gw, via);
        if via == Via::Tcp {
            owner.node("ctl", json!({}));
        }
        let msg = owner.declare("max_vel", json!(0.5), json!({}));
        assert_eq!(msg, "declared parameter /ctl:max_vel = 1.5 (double)");
        owner.declare("pid.p", json!(0.0), json!({}));
        owner.declare("pid.gains", json!([0.0, 0.0]), json!({}));
        owner.declare("name", json!("default"), json!({}));
        owner.declare("use_sim_time", json!(false), json!({}));
        owner.declare("untouched", json!(7), json!({}));
        assert_eq!(
            get_parameters(
                &mut reader,
                "/ctl",
                &[
                    "max_vel",
                    "pid.p",
                    "pid.gains",
                    "name",
                    "use_sim_time",
                    "untouched"
                ]
            ),
            vec![
                double(1.5),
                double(2.0),
                pv(8, "double_array_value", json!([1.0, 2.5])),
                pv(4, "string_value", json!("from_second")),
                pv(1, "bool_value", json!(true)),
                integer(7),
            ]
        );
        // Namespaced nodes, absolute and nested in the file.
        let mut cam1 = Peer::open(&gw, via);
        cam1.node("cam", json!({"namespace":"/robot_1"}));
        let msg = cam1.declare("fps", json!(10), json!({}));
        assert!(msg.ends_with("/robot_1/cam:fps = 30 (integer)"), "{msg}");
        let mut cam2 = Peer::open(&gw, via);
        cam2.node("cam", json!({"namespace":"/robot_2"}));
        cam2.declare("fps", json!(10), json!({}));
        let mut cam3 = Peer::open(&gw, via);
        cam3.node("cam", json!({"namespace":"/robot_3"}));
        cam3.declare("fps", json!(10), json!({}));
        // /** reaches every node.
        cam3.declare("use_sim_time", json!(false), json!({}));
        assert_eq!(value_of(&mut reader, "/robot_1/cam:fps"), json!(30));
        assert_eq!(value_of(&mut reader, "/robot_2/cam:fps"), json!(15));
        assert_eq!(value_of(&mut reader, "/robot_3/cam:fps"), json!(10));
        assert_eq!(
            value_of(&mut reader, "/robot_3/cam:use_sim_time"),
            json!(true)
        );
        // The override is the start value: later sets change it as usual.
        let r = set_param(&mut reader, "/rosapi/", "ctl:max_vel", json!(0.25));
        assert_eq!(r["result"], true, "{r}");
        assert_eq!(value_of(&mut reader, "ctl:max_vel"), json!(0.25));
        drop((owner, cam1, cam2, cam3));
        gw.wait_for_stats("every node gone", |s| counter(s, "parameters") == 0);
    }
}

#[test]
fn a_malformed_params_file_stops_start_up_naming_the_line() {
    for (text, wants) in [
        // A mapping value where none may be: line 4.
        (
            "ctl:\n  ros__parameters:\n    a: 1\n  b: : x\n",
            &["line 4"][..],
        ),
        // An unterminated quoted string: reported where it starts.
        ("ctl:\n  ros__parameters:\n    a: \"x\n", &["line 3"][..]),
        // A list mixing kinds: the node and the parameter are named.
        (
            "ctl:\n  ros__parameters:\n    ok: 1\n    gains: [1, x]\n",
            &["/ctl", "parameter gains"][..],
        ),
        // ros__parameters without a node above it.
        ("ros__parameters:\n  a: 1\n", &["node name"][..]),
        // A top level that is not a mapping.
        ("- 1\n- 2\n", &["top level"][..]),
        // A parameter without a value.
        ("ctl:\n  ros__parameters:\n    a:\n", &["parameter a"][..]),
    ] {
        let file = TempFile::new("params.yaml", text);
        let out = run(&[
            "--listen",
            "127.0.0.1:0",
            "--ws-listen",
            "off",
            "--params",
            file.path(),
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{text:?} was accepted: {err}");
        assert!(!err.contains("listening on"), "{text:?}: {err}");
        assert!(err.contains(file.path()), "the file is named: {err}");
        for w in wants {
            assert!(err.contains(w), "{text:?}: {err:?} should contain {w:?}");
        }
    }
    // A file that does not exist.
    let out = run(&["--ws-listen", "off", "--params", "/nonexistent/params.yaml"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/params.yaml"));
}

// =============================================================================================
// Domains
// =============================================================================================

#[test]
fn domains_isolate_parameters_and_their_events() {
    let gw = Gateway::start(&[]);
    for via in VIAS {
        let name = fresh("isolated");
        let mut owner3 = Peer::tcp(&gw);
        let node = owner3.node(&name, json!({"domain":3}));
        // A reader and a watcher in each domain (a requester's own events
        // arrive before its answer, so watchers are apart).
        let in3 = || match via {
            Via::Tcp => {
                let mut p = Peer::tcp(&gw);
                p.node(&fresh("reader"), json!({"domain":3}));
                p
            }
            Via::Ws => Peer::ws_at(&gw, "/?domain=3", ""),
        };
        let (mut reader3, mut watch3) = (in3(), in3());
        let (mut reader0, mut watch0) = (Peer::open(&gw, via), Peer::open(&gw, via));
        watch3.watch();
        watch0.watch();
        owner3.declare("max_vel", json!(0.5), json!({}));
        assert_event(&watch3.event(), &node, "new", "max_vel", &double(0.5));
        // Domain 0 has no such node and no such parameter.
        let v = get_param(&mut reader0, "/rosapi/", &format!("{name}:max_vel"));
        assert_eq!(v, json!({"value":"null","successful":true,"reason":""}));
        assert!(!has(&mut reader0, "/rosapi/", &format!("{name}:max_vel")));
        assert!(!names(&mut reader0, "/rosapi/")
            .iter()
            .any(|n| n.starts_with(&node)));
        reader0.fails(
            &format!("{node}/get_parameters"),
            json!({"names":["max_vel"]}),
        );
        // Setting it there holds a parameter of domain 0 only.
        let r = set_param(
            &mut reader0,
            "/rosapi/",
            &format!("{name}:max_vel"),
            json!(9.0),
        );
        assert_eq!(r["result"], true, "{r}");
        assert_event(&watch0.event(), &node, "new", "max_vel", &double(9.0));
        assert_eq!(
            value_of(&mut reader3, &format!("{name}:max_vel")),
            json!(0.5)
        );
        // Domain 3 sets through its owner's rules, seen in domain 3 only.
        let r = set_param(
            &mut reader3,
            "rosapi/",
            &format!("{name}:max_vel"),
            json!(0.75),
        );
        assert_eq!(r["result"], true, "{r}");
        assert_event(&watch3.event(), &node, "changed", "max_vel", &double(0.75));
        assert_eq!(
            value_of(&mut reader0, &format!("{name}:max_vel")),
            json!(9.0)
        );
        assert_eq!(
            get_parameters(&mut reader0, &node, &["max_vel"]),
            vec![double(9.0)]
        );
        // Global names too.
        let global = fresh("global");
        set_param(&mut reader0, "/rosapi/", &global, json!("zero"));
        assert!(!has(&mut reader3, "/rosapi/", &global));
        assert!(watch3.events().is_empty(), "domain 0's changes stay there");
        let evs = watch0.events();
        assert_eq!(evs.len(), 1, "{evs:?}");
        assert_event(
            &evs[0],
            "",
            "new",
            &global,
            &pv(4, "string_value", json!("zero")),
        );
        // The owner leaving empties domain 3 only.
        drop(owner3);
        assert_event(&watch3.event(), &node, "deleted", "max_vel", &not_set());
        assert_eq!(
            value_of(&mut reader0, &format!("{name}:max_vel")),
            json!(9.0)
        );
        assert!(watch0.events().is_empty());
        for n in [format!("{name}:max_vel"), global] {
            reader0.values("/rosapi/delete_param", json!({ "name": n }));
        }
        assert_eq!(watch0.events().len(), 2);
    }
}

// =============================================================================================
// /parameter_events
// =============================================================================================

/// Every watcher receives this one event next.
fn expect(watchers: &mut [Peer; 2], node: &str, kind: &str, param: &str, v: Value) {
    for w in watchers.iter_mut() {
        assert_event(&w.event(), node, kind, param, &v);
    }
}

#[test]
fn parameter_events_for_declare_set_undeclare_delete_and_owner_gone() {
    let gw = Gateway::start(&[]);
    for (owner_via, other_via) in PAIRS {
        let mut owner = Peer::open(&gw, owner_via);
        let mut other = Peer::open(&gw, other_via);
        let mut watchers = [Peer::tcp(&gw), Peer::ws_at(&gw, "/", "")];
        for w in watchers.iter_mut() {
            w.watch();
        }
        let name = fresh("evented");
        let node = owner.node(&name, json!({}));
        owner.declare("speed", json!(1.5), json!({}));
        expect(&mut watchers, &node, "new", "speed", double(1.5));
        owner.declare("tags", json!(["a"]), json!({}));
        expect(
            &mut watchers,
            &node,
            "new",
            "tags",
            pv(9, "string_array_value", json!(["a"])),
        );
        // Set by someone else, by the owner, through each path.
        set_param(&mut other, "/rosapi/", &format!("{name}:speed"), json!(2.5));
        expect(&mut watchers, &node, "changed", "speed", double(2.5));
        set_parameters(
            &mut other,
            &node,
            json!([{"name":"tags","value":["b","c"]}]),
        );
        expect(
            &mut watchers,
            &node,
            "changed",
            "tags",
            pv(9, "string_array_value", json!(["b", "c"])),
        );
        owner.ok(json!({"op":"set_parameter","name":"speed","value":3.5}));
        expect(&mut watchers, &node, "changed", "speed", double(3.5));
        // A refused change is no event.
        let r = set_param(
            &mut other,
            "/rosapi/",
            &format!("{name}:speed"),
            json!("fast"),
        );
        assert_failure(&r);
        // Undeclared by the owner.
        owner.ok(json!({"op":"undeclare_parameter","name":"tags"}));
        expect(&mut watchers, &node, "deleted", "tags", not_set());
        // Global (node "") and held node parameters, set and deleted.
        let global = fresh("g");
        set_param(&mut other, "/rosapi/", &global, json!(true));
        expect(
            &mut watchers,
            "",
            "new",
            &global,
            pv(1, "bool_value", json!(true)),
        );
        set_param(&mut other, "rosapi/", &global, json!(false));
        expect(
            &mut watchers,
            "",
            "changed",
            &global,
            pv(1, "bool_value", json!(false)),
        );
        other.values("/rosapi/delete_param", json!({ "name": global }));
        expect(&mut watchers, "", "deleted", &global, not_set());
        let free = fresh("free");
        set_param(&mut other, "/rosapi/", &format!("{free}:x"), json!([1, 2]));
        expect(
            &mut watchers,
            &format!("/{free}"),
            "new",
            "x",
            pv(7, "integer_array_value", json!([1, 2])),
        );
        other.values("rosapi/delete_param", json!({"name": format!("{free}:x")}));
        expect(
            &mut watchers,
            &format!("/{free}"),
            "deleted",
            "x",
            not_set(),
        );
        // Deleting what does not exist is no event.
        other.values("/rosapi/delete_param", json!({"name": format!("{free}:x")}));
        // The owner leaves.
        drop(owner);
        expect(&mut watchers, &node, "deleted", "speed", not_set());
        for w in watchers.iter_mut() {
            assert!(w.events().is_empty(), "{}", w.name);
        }
    }
}

// =============================================================================================
// Held values meet their node
// =============================================================================================

#[test]
fn held_values_become_overrides_when_their_node_is_declared() {
    let gw = Gateway::start(&[]);
    for (owner_via, other_via) in PAIRS {
        let mut other = Peer::open(&gw, other_via);
        let mut watcher = Peer::tcp(&gw);
        watcher.watch();
        let name = fresh("late");
        let node = format!("/{name}");
        set_param(&mut other, "/rosapi/", &format!("{name}:gain"), json!(9));
        set_param(&mut other, "/rosapi/", &format!("{name}:stale"), json!("x"));
        assert_eq!(watcher.events().len(), 2);
        let mut owner = Peer::open(&gw, owner_via);
        assert_eq!(owner.node(&name, json!({})), node);
        // Declared but not yet declaring: the held values are still read,
        // but the live node's undeclared parameters cannot be set.
        assert_eq!(value_of(&mut other, &format!("{name}:gain")), json!(9));
        let r = set_param(&mut other, "/rosapi/", &format!("{name}:gain"), json!(10));
        assert_failure(&r);
        // Its declaration takes the held value; the undeclared one goes.
        let msg = owner.declare("gain", json!(1), json!({}));
        assert!(msg.ends_with(":gain = 9 (integer)"), "{msg}");
        let mut evs = watcher.events();
        evs.sort_by_key(|e| e["new_parameters"].as_array().map(Vec::len));
        assert_eq!(evs.len(), 2, "{evs:?}");
        assert_event(&evs[0], &node, "deleted", "stale", &not_set());
        assert_event(&evs[1], &node, "new", "gain", &integer(9));
        assert_eq!(
            names(&mut other, "/rosapi/")
                .into_iter()
                .filter(|n| n.starts_with(&node))
                .collect::<Vec<_>>(),
            [format!("{node}:gain")]
        );
        // Now owned: the type is fixed, delete_param refuses.
        let r = set_param(&mut other, "/rosapi/", &format!("{name}:gain"), json!("s"));
        assert_failure(&r);
        let why = other.fails(
            "/rosapi/delete_param",
            json!({"name": format!("{name}:gain")}),
        );
        assert!(why.contains("owner"), "{why}");
        drop(owner);
        assert_event(&watcher.event(), &node, "deleted", "gain", &not_set());
    }
}

// =============================================================================================
// Introspection
// =============================================================================================

#[test]
fn node_parameter_services_are_listed_and_a_client_provider_comes_first() {
    let gw = Gateway::start(&[]);
    for (owner_via, other_via) in PAIRS {
        let mut owner = Peer::open(&gw, owner_via);
        let mut other = Peer::open(&gw, other_via);
        let name = fresh("listed");
        let node = owner.node(&name, json!({}));
        let services = |p: &mut Peer| strs(&p.values("/rosapi/services", json!({}))["services"]);
        let mine = |list: &[String]| -> Vec<String> {
            list.iter()
                .filter(|s| s.starts_with(&format!("{node}/")))
                .cloned()
                .collect()
        };
        // No parameters, no parameter services.
        assert!(mine(&services(&mut other)).is_empty());
        other.fails(&format!("{node}/get_parameters"), json!({"names":[]}));
        owner.declare("a", json!(1), json!({}));
        let want: Vec<String> = NODE_SERVICES
            .iter()
            .map(|(s, _)| format!("{node}/{s}"))
            .collect();
        assert_eq!(mine(&services(&mut other)), want);
        let d = other.values("rosapi/node_details", json!({ "node": node }));
        assert_eq!(mine(&strs(&d["services"])), want, "{d}");
        for (s, ty) in NODE_SERVICES {
            let of = other.values("/rosapi/services_for_type", json!({ "type": ty }));
            assert!(
                strs(&of["services"]).contains(&format!("{node}/{s}")),
                "{ty}: {of}"
            );
        }
        // A client providing one of these names is called instead.
        let mut shadow = Peer::tcp(&gw);
        shadow.ok(json!({"op":"advertise_service","service":format!("{node}/get_parameters"),"type":"rcl_interfaces/srv/GetParameters"}));
        let id = format!("g{}", uniq());
        other.send(&json!({"op":"call_service","service":format!("{node}/get_parameters"),"id":id,"args":{"names":["a"]}}));
        let (fwd, _) = shadow.until(|v| v["op"] == "call_service");
        shadow.send(&json!({"op":"service_response","service":fwd["service"],"id":fwd["id"],"values":{"values":["shadowed"]},"result":true}));
        let (r, _) = other.until(|v| v["id"] == json!(id));
        assert_eq!(r["values"], json!({"values":["shadowed"]}), "{r}");
        shadow.ok(json!({"op":"unadvertise_service","service":format!("{node}/get_parameters")}));
        // Withdrawn with the parameters.
        owner.ok(json!({"op":"undeclare_parameter","name":"a"}));
        assert!(mine(&services(&mut other)).is_empty());
        let d = other.values("rosapi/node_details", json!({ "node": node }));
        assert!(mine(&strs(&d["services"])).is_empty(), "{d}");
        owner.declare("b", json!(1), json!({}));
        assert_eq!(mine(&services(&mut other)).len(), 6);
        drop(owner);
        let dl = deadline(REPLY);
        while !mine(&services(&mut other)).is_empty() {
            assert!(
                Instant::now() < dl,
                "services still listed after the owner left"
            );
            std::thread::sleep(ms(10));
        }
        other.quiet();
    }
}

// ---------------------------------------------------------------------------------------------
// Bounds: the memory budget, and the byte limits of parameters
// ---------------------------------------------------------------------------------------------

#[test]
fn a_connection_holding_big_parameters_is_the_one_the_memory_budget_closes() {
    let gw = Gateway::start(&["--max-memory-bytes", "1000000"]);
    // A bystander holding a few KiB in the gateway: a partial line.
    let mut small = gw.client();
    small
        .send_raw(format!(r#"{{"op":"nope","id":"small","pad":"{}"#, "s".repeat(5_000)).as_bytes());
    let base = gw.stats();
    // The owner reads everything; all it holds is its node's parameters,
    // each declared small, then set to 60 KB (a declaration's status would
    // echo the value).
    let mut owner = gw.client();
    owner.send_line(r#"{"op":"declare_node","name":"hog","id":"n"}"#);
    owner.expect_info("n");
    let big = "x".repeat(60_000);
    let mut closed = false;
    for i in 0..40 {
        // The close may come right after an answer: a write then fails.
        let lines = format!(
            "{{\"op\":\"declare_parameter\",\"name\":\"p{i}\",\"value\":\"\",\"id\":\"d{i}\"}}\n\
             {{\"op\":\"set_parameter\",\"name\":\"p{i}\",\"value\":\"{big}\",\"id\":\"s{i}\"}}\n"
        );
        if owner.try_send_raw(lines.as_bytes()).is_err() {
            closed = true;
            break;
        }
        let dl = deadline(REPLY);
        let mut answers = 0;
        while answers < 2 {
            match owner.try_recv_line(dl) {
                Recv::Line(_) => answers += 1,
                Recv::Eof(_) | Recv::Error(_) => {
                    closed = true;
                    break;
                }
                Recv::Timeout => panic!("no answer to parameter {i}"),
            }
        }
        if closed {
            break;
        }
    }
    assert!(closed, "the owner of 2.4 MB of parameters was never closed");
    let st = gw.wait_for_stats("the owner freed", |s| {
        counter(s, "memory_bytes") < 1_000_000
    });
    assert_eq!(
        counter(&st, "closes.memory_pressure"),
        counter(&base, "closes.memory_pressure") + 1,
        "only the owner was closed: {st}"
    );
    // The bystander is still there: its line completes and is answered.
    small.send_raw(b"\"}\n");
    small.expect_error("small");
    small.assert_quiet();
}

#[test]
fn one_request_of_many_changes_keeps_to_the_limits() {
    let gw = Gateway::start(&[]);
    let mut p = Peer::tcp(&gw);
    let node = format!("/{}", fresh("crowd"));
    // A node nobody owns, with one held parameter: its services exist.
    let r = set_param(&mut p, "/rosapi/", &format!("{node}:x"), json!(1));
    assert_eq!(r["result"], true, "{r}");
    let many: Vec<Value> = (0..1100)
        .map(|i| json!({"name": format!("p{i}"), "value": integer(i)}))
        .collect();
    let base = gw.stats();
    // Each change fits alone, not together: atomically, none is applied.
    let v = p.values(
        &format!("{node}/set_parameters_atomically"),
        json!({ "parameters": many }),
    );
    assert_refused_with(&v["result"], "do not fit together");
    let listed = |p: &mut Peer| {
        let v = p.values(&format!("{node}/list_parameters"), json!({}));
        strs(&v["result"]["names"]).len()
    };
    assert_eq!(listed(&mut p), 1);
    // One by one: up to 1024 in the node, the rest refused.
    let results = set_parameters(&mut p, &node, json!(many));
    let ok = results.iter().filter(|r| r["successful"] == true).count();
    assert_eq!(ok, 1023);
    assert_refused_with(&results[1023], "1024");
    assert_eq!(listed(&mut p), 1024);
    let st = gw.stats();
    assert_eq!(
        counter(&st, "param_sets_rejected") - counter(&base, "param_sets_rejected"),
        1100 + 77
    );
    p.quiet();
}

#[test]
fn a_connections_parameters_are_limited_in_bytes() {
    // A parameter of an 800-byte string counts 128 + 1 + 800 + 64 = 993
    // bytes: two fit under 2000, a third does not, on whichever node.
    let gw = Gateway::start(&["--max-param-bytes-per-conn", "2000"]);
    for (owner_via, other_via) in PAIRS {
        let mut owner = Peer::open(&gw, owner_via);
        let n1 = owner.node(&fresh("b1"), json!({}));
        let n2 = owner.node(&fresh("b2"), json!({}));
        let v800 = json!("x".repeat(800));
        owner.declare("a", v800.clone(), json!({ "node": n1 }));
        owner.declare("b", v800.clone(), json!({ "node": n2 }));
        let base = gw.stats();
        let msg =
            owner.refused(json!({"op":"declare_parameter","node":n2,"name":"c","value":v800}));
        assert!(
            msg.contains("2000 bytes") && msg.contains("--max-param-bytes-per-conn"),
            "{msg}"
        );
        owner.refused(json!({"op":"set_parameter","node":n1,"name":"a","value":"x".repeat(820)}));
        // Anyone else's change is the owner's bytes too.
        let mut other = Peer::open(&gw, other_via);
        let r = set_param(
            &mut other,
            "/rosapi/",
            &format!("{n2}:b"),
            json!("y".repeat(900)),
        );
        assert_failure(&r);
        assert!(
            r["values"]
                .as_str()
                .is_some_and(|m| m.contains("--max-param-bytes-per-conn")),
            "{r}"
        );
        let results = set_parameters(
            &mut other,
            &n1,
            json!([{"name":"a","value":pv(4, "string_value", json!("z".repeat(900)))}]),
        );
        assert_refused_with(&results[0], "--max-param-bytes-per-conn");
        // Shrinking is always allowed; then a smaller third one fits.
        owner.ok(json!({"op":"set_parameter","node":n1,"name":"a","value":"small"}));
        owner.declare("c", json!("x".repeat(100)), json!({ "node": n2 }));
        let st = gw.stats();
        let grew = |k: &str| counter(&st, k) - counter(&base, k);
        assert_eq!(grew("errors.bad_parameter"), 2, "{st}");
        assert_eq!(grew("param_sets_rejected"), 3, "{st}");
        owner.quiet();
        other.quiet();
    }
}

#[test]
fn held_parameters_are_limited_in_bytes_in_all_domains() {
    // 128 + 1 + 500 + 64 = 693 bytes per global parameter of a 500-byte
    // string: one fits under 1200, not two, in any domain.
    let gw = Gateway::start(&["--max-held-param-bytes", "1200"]);
    let mut p = Peer::tcp(&gw);
    let base = gw.stats();
    let r = set_param(&mut p, "/rosapi/", "x", json!("x".repeat(500)));
    assert_eq!(r["result"], true, "{r}");
    let r = set_param(&mut p, "rosapi/", "y", json!("y".repeat(500)));
    assert_failure(&r);
    assert!(
        r["values"]
            .as_str()
            .is_some_and(|m| m.contains("1200 bytes") && m.contains("--max-held-param-bytes")),
        "{r}"
    );
    assert!(!has(&mut p, "/rosapi/", "y"));
    // A client in domain 3 (whose store is empty) meets the same limit.
    let mut far = Peer::ws_at(&gw, "/?domain=3", "");
    let r = set_param(&mut far, "/rosapi/", "z", json!("z".repeat(500)));
    assert_failure(&r);
    // Held nodes' services: each change on its own.
    let node = format!("/{}", fresh("held"));
    let r = set_param(&mut far, "/rosapi/", &format!("{node}:small"), json!(1));
    assert_eq!(r["result"], true, "{r}");
    let results = set_parameters(
        &mut far,
        &node,
        json!([
            {"name":"big","value":pv(4, "string_value", json!("b".repeat(400)))},
            {"name":"tiny","value":integer(2)},
        ]),
    );
    assert_refused_with(&results[0], "--max-held-param-bytes");
    assert_eq!(results[1]["successful"], true, "{results:?}");
    // Deleting makes room again.
    let d = p.values("/rosapi/delete_param", json!({"name": "x"}));
    assert_eq!(d["successful"], true, "{d}");
    let r = set_param(&mut far, "/rosapi/", "z", json!("z".repeat(500)));
    assert_eq!(r["result"], true, "{r}");
    let st = gw.stats();
    assert_eq!(
        counter(&st, "param_sets_rejected") - counter(&base, "param_sets_rejected"),
        3,
        "{st}"
    );
    p.quiet();
    far.quiet();
}
