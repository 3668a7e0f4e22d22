//! Parameters on the fake clock: the owner's validation is a call bounded
//! by the call timeout (one rejection at the deadline, the late answer
//! stale), and cleanup when the requester or the owner leaves with
//! validations pending, down to empty tables once everyone has left.

use super::*;
use crate::params::ParamValue;

/// Node `/ctl` owned by a fresh connection, with `gain` = 1 validated by
/// the owner and `plain` = 1 not validated.
fn owner(t: &mut T) -> u32 {
    let o = t.open();
    t.send(o, r#"{"op":"declare_node","name":"ctl"}"#);
    t.send(
        o,
        r#"{"op":"declare_parameter","name":"gain","value":1,"validate":true}"#,
    );
    t.send(o, r#"{"op":"declare_parameter","name":"plain","value":1}"#);
    let got = t.recv(o);
    assert_eq!(got.len(), 3, "{got:?}");
    assert!(got.iter().all(|v| v["level"] == "info"), "{got:?}");
    o
}

/// `node`'s `name` as the store holds it (domain 0).
fn value(t: &T, node: &str, name: &str) -> Option<ParamValue> {
    t.hub
        .params
        .store(0)
        .get(node, name)
        .map(|p| p.value.clone())
}

/// Asks, through rosapi, to set `/ctl:gain` to `v` (call id `id`).
fn set_gain(t: &mut T, who: u32, id: u32, v: i64) {
    t.send(
        who,
        &format!(
            r#"{{"op":"call_service","service":"/rosapi/set_param","id":{id},"args":{{"name":"ctl:gain","value":"{v}"}}}}"#
        ),
    );
}

/// Answers validation call `call` (as received by the owner).
fn answer(t: &mut T, owner: u32, call: &Value, ok: bool) {
    let id = call["id"].as_str().expect("validation id");
    t.send(
        owner,
        &format!(
            r#"{{"op":"service_response","service":"/ctl/validate_parameters","id":"{id}","values":{{"successful":{ok},"reason":"r"}},"result":true}}"#
        ),
    );
}

/// The one validation call waiting in `owner`'s output.
fn validation(t: &mut T, owner: u32) -> Value {
    let v = t.one(owner);
    assert_eq!(v["op"], "call_service", "{v}");
    assert_eq!(v["service"], "/ctl/validate_parameters", "{v}");
    v
}

/// No set waits for a validation (the table is private to the params
/// module; its debug form shows it).
fn no_pending(t: &T) -> bool {
    format!("{:?}", t.hub.params).contains("pending: {}")
}

#[test]
fn a_validation_times_out_once_at_the_deadline_and_the_late_answer_is_stale() {
    let mut t = T::new(Limits::default());
    let o = owner(&mut t);
    let r = t.open();
    set_gain(&mut t, r, 1, 2);
    let call = validation(&mut t, o);
    assert_eq!(
        call["args"]["parameters"],
        serde_json::json!([{"name":"gain","value":2,"type":"integer"}])
    );
    assert!(!no_pending(&t), "the set waits for its validation");
    t.advance(4_900);
    assert!(t.recv(r).is_empty(), "no answer before the deadline");
    assert_eq!(value(&t, "/ctl", "gain"), Some(ParamValue::Integer(1)));
    t.advance(200);
    let got = t.recv(r);
    assert_eq!(got.len(), 1, "exactly one answer at the deadline: {got:?}");
    let v = &got[0];
    assert_eq!(
        (v["id"].clone(), v["result"].clone()),
        (1.into(), false.into())
    );
    assert!(
        v["values"]
            .as_str()
            .is_some_and(|s| s.contains("gain") && s.contains("timed out")),
        "{v}"
    );
    assert_eq!(value(&t, "/ctl", "gain"), Some(ParamValue::Integer(1)));
    assert_eq!(t.hub.inspect().calls().len(), 0);
    assert!(no_pending(&t));
    let c = t.hub.counters();
    assert_eq!(c.get(Counter::ParamValidations), 1);
    assert_eq!(c.get(Counter::ParamValidationsFailed), 1);
    assert_eq!(c.get(Counter::ParamSetsRejected), 1);
    // Nothing more, however long one waits.
    t.advance(60_000);
    assert!(t.recv(r).is_empty());
    // The owner's late "yes" is stale: refused to it, unseen by the
    // requester, and the value stays.
    answer(&mut t, o, &call, true);
    assert_eq!(t.one(o)["level"], "error");
    assert!(t.recv(r).is_empty());
    assert_eq!(value(&t, "/ctl", "gain"), Some(ParamValue::Integer(1)));
    assert_eq!(t.hub.counters().get(Counter::ResponsesStale), 1);
    assert_eq!(t.hub.counters().get(Counter::ParamSetsAccepted), 0);
}

#[test]
fn an_answer_in_time_is_applied_once_and_nothing_follows_at_the_deadline() {
    let mut t = T::new(Limits {
        call_timeout: Duration::from_millis(1_000),
        ..Limits::default()
    });
    let o = owner(&mut t);
    let r = t.open();
    set_gain(&mut t, r, 1, 2);
    set_gain(&mut t, r, 2, 3);
    let calls = t.recv(o);
    assert_eq!(calls.len(), 2, "{calls:?}");
    t.advance(990);
    answer(&mut t, o, &calls[1], true);
    answer(&mut t, o, &calls[0], false);
    let got = t.recv(r);
    let ids: Vec<Value> = got.iter().map(|v| v["id"].clone()).collect();
    assert_eq!(ids, vec![Value::from(2), Value::from(1)], "{got:?}");
    assert_eq!(got[0]["result"], true, "{got:?}");
    assert_eq!(got[1]["result"], false, "{got:?}");
    assert_eq!(value(&t, "/ctl", "gain"), Some(ParamValue::Integer(3)));
    t.advance(5_000);
    assert!(t.recv(r).is_empty(), "answered calls never time out");
    assert!(t.recv(o).is_empty());
    assert_eq!(t.hub.counters().get(Counter::ParamValidationsFailed), 0);
    assert_eq!(t.hub.inspect().calls().len(), 0);
    assert!(no_pending(&t));
}

#[test]
fn a_requester_leaving_forgets_its_validations() {
    let mut t = T::new(Limits::default());
    let o = owner(&mut t);
    let r = t.open();
    let stays = t.open();
    set_gain(&mut t, r, 1, 2);
    t.send(
        r,
        r#"{"op":"call_service","service":"/ctl/set_parameters","id":2,"args":{"parameters":[{"name":"gain","value":3},{"name":"plain","value":5}]}}"#,
    );
    set_gain(&mut t, stays, 3, 4);
    let calls = t.recv(o);
    assert_eq!(calls.len(), 3, "{calls:?}");
    // The plain parameter was applied at once; gain waits.
    assert_eq!(value(&t, "/ctl", "plain"), Some(ParamValue::Integer(5)));
    t.hub.close(r, CloseReason::PeerClosed, t.now);
    t.free_closed();
    assert_eq!(
        t.hub.inspect().calls().len(),
        1,
        "only the other requester's call is left"
    );
    // The owner's answers to the gone requester are stale, and apply
    // nothing.
    answer(&mut t, o, &calls[0], true);
    answer(&mut t, o, &calls[1], true);
    let errs = t.recv(o);
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert!(errs.iter().all(|v| v["level"] == "error"), "{errs:?}");
    assert_eq!(value(&t, "/ctl", "gain"), Some(ParamValue::Integer(1)));
    assert_eq!(t.hub.counters().get(Counter::ResponsesStale), 2);
    // The other requester's validation is untouched.
    answer(&mut t, o, &calls[2], true);
    let v = t.one(stays);
    assert_eq!(
        (v["id"].clone(), v["result"].clone()),
        (3.into(), true.into())
    );
    assert_eq!(value(&t, "/ctl", "gain"), Some(ParamValue::Integer(4)));
    // A newcomer on the gone requester's slot gets nothing.
    let n = t.open();
    assert_eq!(n, r, "slab key reused");
    t.advance(10_000);
    assert!(t.recv(n).is_empty());
    assert_eq!(t.hub.inspect().calls().len(), 0);
    assert!(no_pending(&t));
}

#[test]
fn an_owner_leaving_rejects_every_pending_validation_at_once() {
    let mut t = T::new(Limits::default());
    let o = owner(&mut t);
    let watcher = t.open();
    t.send(
        watcher,
        r#"{"op":"subscribe","topic":"/parameter_events","type":"rcl_interfaces/msg/ParameterEvent"}"#,
    );
    t.recv(watcher);
    let (a, b) = (t.open(), t.open());
    set_gain(&mut t, a, 1, 2);
    set_gain(&mut t, b, 1, 3);
    t.send(
        b,
        r#"{"op":"call_service","service":"/ctl/set_parameters_atomically","id":2,"args":{"parameters":[{"name":"plain","value":7},{"name":"gain","value":4}]}}"#,
    );
    assert_eq!(t.recv(o).len(), 3);
    assert!(t.recv(a).is_empty() && t.recv(b).is_empty());
    assert!(!no_pending(&t));
    t.hub.close(o, CloseReason::Reset, t.now);
    t.free_closed();
    // Each requester has exactly one answer per request, at once.
    let ra = t.recv(a);
    assert_eq!(ra.len(), 1, "{ra:?}");
    assert_eq!(ra[0]["result"], false, "{ra:?}");
    assert!(
        ra[0]["values"]
            .as_str()
            .is_some_and(|s| s.contains("disconnected")),
        "{ra:?}"
    );
    let rb = t.recv(b);
    assert_eq!(rb.len(), 2, "{rb:?}");
    let atomic = rb.iter().find(|v| v["id"] == 2).expect("atomic answer");
    assert_eq!(atomic["values"]["result"]["successful"], false, "{atomic}");
    // The node's parameters went with it, each a deleted event; the
    // atomic set applied nothing.
    let events = t.recv(watcher);
    assert_eq!(events.len(), 2, "{events:?}");
    assert!(
        events
            .iter()
            .all(|e| e["msg"]["deleted_parameters"].as_array().map(Vec::len) == Some(1)),
        "{events:?}"
    );
    assert!(t.hub.params.store(0).node("/ctl").is_none());
    assert_eq!(t.hub.params.count(), 0);
    assert_eq!(t.hub.inspect().calls().len(), 0);
    assert!(no_pending(&t));
    assert_eq!(t.hub.counters().get(Counter::ParamValidationsFailed), 3);
    // Nothing more at the old deadline.
    t.advance(6_000);
    assert!(t.recv(a).is_empty() && t.recv(b).is_empty());
}

#[test]
fn every_table_is_empty_once_everyone_has_left() {
    let mut t = T::new(Limits::default());
    let o = owner(&mut t);
    // A second node on the owner, and a validation the owner asked of
    // itself (it may call its own node's services).
    t.send(o, r#"{"op":"declare_node","name":"other"}"#);
    t.send(
        o,
        r#"{"op":"declare_parameter","name":"x","value":[1,2],"node":"other"}"#,
    );
    set_gain(&mut t, o, 9, 5);
    let got = t.recv(o);
    assert_eq!(got.len(), 3, "{got:?}");
    assert_eq!(got[2]["op"], "call_service", "{got:?}");
    let r = t.open();
    set_gain(&mut t, r, 1, 2);
    // Held parameters: global and of an ownerless node.
    t.send(
        r,
        r#"{"op":"call_service","service":"/rosapi/set_param","id":2,"args":{"name":"global","value":"\"g\""}}"#,
    );
    t.send(
        r,
        r#"{"op":"call_service","service":"/rosapi/set_param","id":3,"args":{"name":"free:y","value":"1.5"}}"#,
    );
    assert_eq!(t.recv(r).len(), 2);
    assert_eq!(t.recv(o).len(), 1);
    assert_eq!(t.hub.params.count(), 5);
    assert!(t.hub.params.bytes() > 0);
    t.hub.close(o, CloseReason::PeerClosed, t.now);
    t.hub.close(r, CloseReason::PeerClosed, t.now);
    t.free_closed();
    // Held parameters outlive their setter (the gateway holds them).
    assert_eq!(t.hub.params.count(), 2);
    assert_eq!(t.hub.inspect().calls().len(), 0);
    assert!(no_pending(&t));
    // A last client deletes them and leaves.
    let last = t.open();
    for name in ["global", "free:y"] {
        t.send(
            last,
            &format!(
                r#"{{"op":"call_service","service":"/rosapi/delete_param","id":1,"args":{{"name":"{name}"}}}}"#
            ),
        );
    }
    assert_eq!(t.recv(last).len(), 2);
    t.hub.close(last, CloseReason::PeerClosed, t.now);
    t.free_closed();
    t.advance(10_000);
    assert_eq!((t.hub.params.count(), t.hub.params.bytes()), (0, 0));
    assert!(t.hub.params.store(0).is_empty());
    assert!(no_pending(&t));
    assert_eq!(t.hub.inspect().calls().len(), 0);
    assert_eq!(t.hub.inspect().gauges().get(Gauge::Parameters), 0);
    assert_eq!(t.hub.memory().registrations, 0);
    assert_eq!(t.hub.conn_count(), 0);
}

#[test]
fn global_parameters_are_no_node_and_the_node_services_check_names() {
    let mut t = T::new(Limits::default());
    let c = t.open();
    // A global parameter and one held for node /free (nobody declared it).
    t.send(
        c,
        r#"{"op":"call_service","service":"/rosapi/set_param","id":1,"args":{"name":"g","value":"1"}}"#,
    );
    t.send(
        c,
        r#"{"op":"call_service","service":"/rosapi/set_param","id":2,"args":{"name":"free:x","value":"1"}}"#,
    );
    let got = t.recv(c);
    assert!(got.iter().all(|v| v["result"] == true), "{got:?}");
    // `/get_parameters` is no node's service: nobody provides it.
    t.send(
        c,
        r#"{"op":"call_service","service":"/get_parameters","id":3,"args":{"names":["g"]}}"#,
    );
    t.send(
        c,
        r#"{"op":"call_service","service":"/set_parameters","id":4,"args":{"parameters":[{"name":"g","value":{"type":2,"integer_value":5}}]}}"#,
    );
    for v in t.recv(c) {
        assert_eq!(v["result"], false, "{v}");
        assert!(
            v["values"]
                .as_str()
                .is_some_and(|s| s.contains("no provider")),
            "{v}"
        );
    }
    assert_eq!(value(&t, "", "g"), Some(ParamValue::Integer(1)));
    // A held node's services refuse names no parameter may have, as
    // rosapi's set_param does, and apply the rest.
    t.send(
        c,
        r#"{"op":"call_service","service":"/free/set_parameters","id":5,"args":{"parameters":[{"name":"","value":{"type":2,"integer_value":5}},{"name":"a b","value":{"type":2,"integer_value":5}},{"name":"x:y","value":{"type":2,"integer_value":5}},{"name":"x","value":{"type":2,"integer_value":6}}]}}"#,
    );
    let v = t.one(c);
    let ok: Vec<Option<bool>> = v["values"]["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| r["successful"].as_bool())
        .collect();
    assert_eq!(
        ok,
        [Some(false), Some(false), Some(false), Some(true)],
        "{v}"
    );
    assert_eq!(value(&t, "/free", "x"), Some(ParamValue::Integer(6)));
    let names: Vec<&str> = t.hub.params.store(0).all().map(|(_, p, _)| p).collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert_eq!(t.hub.counters().get(Counter::ParamSetsRejected), 3);
}

#[test]
fn a_validation_counts_against_the_call_limit_with_waiting_requests() {
    let mut t = T::new(Limits {
        max_calls_per_conn: 2,
        ..Limits::default()
    });
    let o = owner(&mut t);
    let r = t.open();
    // Two calls waiting for a provider fill the requester's limit.
    for id in 1..=2 {
        t.send(
            r,
            &format!(
                r#"{{"op":"call_service","service":"/nobody","id":{id},"args":{{}},"wait":true,"timeout":30}}"#
            ),
        );
    }
    assert!(t.recv(r).is_empty(), "both calls wait");
    set_gain(&mut t, r, 3, 2);
    let v = t.one(r);
    assert_eq!(
        (v["id"].clone(), v["result"].clone()),
        (3.into(), false.into()),
        "{v}"
    );
    assert!(t.recv(o).is_empty(), "no validation was sent");
    assert_eq!(t.hub.inspect().calls().len(), 0);
    assert_eq!(t.hub.counters().get(Counter::ParamValidations), 0);
    assert_eq!(value(&t, "/ctl", "gain"), Some(ParamValue::Integer(1)));
    assert!(no_pending(&t));
}

#[test]
fn a_rosbridge_owner_validates_as_rosbridge_answers_read() {
    let mut t = T::new(Limits::default());
    let o = t.open_ws();
    t.ws_send(o, r#"{"op":"set_level","level":"info"}"#);
    t.ws_send(o, r#"{"op":"declare_node","name":"ctl"}"#);
    t.ws_send(
        o,
        r#"{"op":"declare_parameter","name":"gain","value":1,"validate":true}"#,
    );
    assert_eq!(t.ws_recv(o).len(), 2, "node and parameter declared");
    let r = t.open();
    for (id, v) in [(1, 2), (2, 3)] {
        set_gain(&mut t, r, id, v);
    }
    let calls = t.ws_recv(o);
    assert_eq!(calls.len(), 2, "{calls:?}");
    // An object `values` is a success whatever `result` says (roslib's
    // service handlers answer so); `successful` decides.
    let answer = |call: &Value, ok: bool| {
        format!(
            r#"{{"op":"service_response","service":"/ctl/validate_parameters","id":{},"values":{{"successful":{ok}}},"result":false}}"#,
            call["id"]
        )
    };
    t.ws_send(o, &answer(&calls[0], true));
    let v = t.one(r);
    assert_eq!(
        (v["id"].clone(), v["result"].clone()),
        (1.into(), true.into()),
        "{v}"
    );
    assert_eq!(value(&t, "/ctl", "gain"), Some(ParamValue::Integer(2)));
    t.ws_send(o, &answer(&calls[1], false));
    let v = t.one(r);
    assert_eq!(
        (v["id"].clone(), v["result"].clone()),
        (2.into(), false.into()),
        "{v}"
    );
    assert_eq!(value(&t, "/ctl", "gain"), Some(ParamValue::Integer(2)));
    assert!(no_pending(&t));
}

#[test]
fn one_request_naming_many_new_parameters_keeps_to_the_count_limits() {
    use crate::params::MAX_PARAMS_PER_NODE;
    let mut t = T::new(Limits::default());
    let r = t.open();
    // A node nobody owns, with one held parameter: its services exist.
    t.send(
        r,
        r#"{"op":"call_service","service":"/rosapi/set_param","id":1,"args":{"name":"h:x","value":"1"}}"#,
    );
    assert_eq!(t.one(r)["result"], true);
    let many: Vec<Value> = (0..MAX_PARAMS_PER_NODE + 76)
        .map(|i| serde_json::json!({"name": format!("p{i}"), "value": i}))
        .collect();
    let call = |srv: &str, id: u32| {
        serde_json::json!({"op":"call_service","service":format!("/h/{srv}"),"id":id,"args":{"parameters":many}})
            .to_string()
    };
    let len = |t: &T| {
        t.hub
            .inspect()
            .params_in(0)
            .node("/h")
            .map_or(0, |n| n.params.len())
    };
    // Each change alone fits; together they do not: an atomic set is
    // refused whole.
    t.send(r, &call("set_parameters_atomically", 2));
    let v = t.one(r);
    let result = &v["values"]["result"];
    assert_eq!(result["successful"], false, "{v}");
    assert!(
        result["reason"]
            .as_str()
            .is_some_and(|s| s.contains("do not fit together") && s.contains("1024")),
        "{v}"
    );
    assert_eq!(len(&t), 1, "nothing applied");
    // One by one, up to the limit; the rest refused with the reason.
    t.send(r, &call("set_parameters", 3));
    let v = t.one(r);
    let results = v["values"]["results"].as_array().expect("results").clone();
    assert_eq!(results.len(), MAX_PARAMS_PER_NODE + 76);
    let ok = results.iter().filter(|x| x["successful"] == true).count();
    assert_eq!(ok, MAX_PARAMS_PER_NODE - 1, "{:?}", &results[1020..1026]);
    assert!(results[MAX_PARAMS_PER_NODE - 1]["reason"]
        .as_str()
        .is_some_and(|s| s.contains("limit")));
    assert_eq!(len(&t), MAX_PARAMS_PER_NODE);
    let c = t.hub.counters();
    assert_eq!(
        c.get(Counter::ParamSetsRejected),
        (MAX_PARAMS_PER_NODE + 76 + 77) as u64
    );
}

/// rosapi `set_param` of `name` to the JSON text `text` by `who`, call `id`;
/// the answer.
fn rosapi_set(t: &mut T, who: u32, id: u32, name: &str, text: &str) -> Value {
    let args = serde_json::json!({"name": name, "value": text});
    t.send(
        who,
        &serde_json::json!({"op":"call_service","service":"/rosapi/set_param","id":id,"args":args})
            .to_string(),
    );
    t.one(who)
}

/// A JSON string of `n` bytes, as text.
fn text_of(n: usize) -> String {
    format!("\"{}\"", "x".repeat(n))
}

#[test]
fn a_connections_parameters_are_limited_in_bytes_together() {
    // 128 + 1 + 800 + 64 = 993 bytes per parameter: two fit, not three,
    // though each of the connection's two nodes holds only one or two.
    let mut t = T::new(Limits {
        max_param_bytes_per_conn: 2_000,
        ..Limits::default()
    });
    let o = t.open();
    t.send(o, r#"{"op":"declare_node","name":"n1"}"#);
    t.send(o, r#"{"op":"declare_node","name":"n2"}"#);
    let v800 = text_of(800);
    t.send(
        o,
        &format!(r#"{{"op":"declare_parameter","name":"a","value":{v800}}}"#),
    );
    t.send(
        o,
        &format!(r#"{{"op":"declare_parameter","node":"n2","name":"b","value":{v800}}}"#),
    );
    let got = t.recv(o);
    assert!(got.iter().all(|v| v["level"] == "info"), "{got:?}");
    t.send(
        o,
        &format!(r#"{{"op":"declare_parameter","node":"n2","name":"c","value":{v800},"id":"d"}}"#),
    );
    let v = t.one(o);
    assert_eq!(
        (v["level"].as_str(), v["id"].as_str()),
        (Some("error"), Some("d")),
        "{v}"
    );
    assert!(
        v["msg"]
            .as_str()
            .is_some_and(|m| m.contains("2000 bytes") && m.contains("--max-param-bytes-per-conn")),
        "{v}"
    );
    // The owner's own growth is refused too; shrinking is not.
    let v820 = text_of(820);
    t.send(
        o,
        &format!(r#"{{"op":"set_parameter","name":"a","value":{v820},"id":"s"}}"#),
    );
    let v = t.one(o);
    assert_eq!(
        (v["level"].as_str(), v["id"].as_str()),
        (Some("error"), Some("s")),
        "{v}"
    );
    t.send(
        o,
        r#"{"op":"set_parameter","name":"a","value":"short","id":"s2"}"#,
    );
    assert_eq!(t.one(o)["level"], "info");
    // Others' changes are the owner's bytes: refused past the limit.
    let r = t.open();
    let v = rosapi_set(&mut t, r, 1, "n2:b", &text_of(1_900));
    assert_eq!(v["result"], false, "{v}");
    assert!(
        v["values"]
            .as_str()
            .is_some_and(|m| m.contains("--max-param-bytes-per-conn")),
        "{v}"
    );
    let v = rosapi_set(&mut t, r, 2, "n2:b", &text_of(1_000));
    assert_eq!(v["result"], true, "{v}");
    let me = t.hub.inspect().conn_ref(o).expect("open");
    assert!(t.hub.inspect().params_in(0).owned_bytes(me) <= 2_000);
    let c = t.hub.counters();
    assert_eq!(c.errors_of(ErrorCode::BadParameter), 2);
    assert_eq!(c.get(Counter::ParamSetsRejected), 2);
}

#[test]
fn parameters_nobody_owns_are_limited_in_bytes_in_all_domains() {
    // 128 + 1 + 500 + 64 = 693 bytes: one fits, not two.
    let mut t = T::new(Limits {
        max_held_param_bytes: 1_200,
        ..Limits::default()
    });
    let r = t.open();
    let v = rosapi_set(&mut t, r, 1, "x", &text_of(500));
    assert_eq!(v["result"], true, "{v}");
    let v = rosapi_set(&mut t, r, 2, "y", &text_of(500));
    assert_eq!(v["result"], false, "{v}");
    assert!(
        v["values"]
            .as_str()
            .is_some_and(|m| m.contains("1200 bytes") && m.contains("--max-held-param-bytes")),
        "{v}"
    );
    assert!(t.hub.inspect().params_in(0).get("", "y").is_none());
    // Through a held node's services too, each change on its own.
    let v = rosapi_set(&mut t, r, 3, "h:p", "1");
    assert_eq!(v["result"], true, "{v}");
    let big = "y".repeat(200);
    t.send(
        r,
        &format!(
            r#"{{"op":"call_service","service":"/h/set_parameters","id":4,"args":{{"parameters":[{{"name":"q","value":"s"}},{{"name":"r","value":"{big}"}}]}}}}"#
        ),
    );
    let v = t.one(r);
    let results = &v["values"]["results"];
    assert_eq!(results[0]["successful"], true, "{v}");
    assert_eq!(results[1]["successful"], false, "{v}");
    // Another domain shares the limit: 343 bytes more do not fit there,
    // though its own store is empty.
    let d = t.open();
    t.send(d, r#"{"op":"declare_node","name":"w","domain":3}"#);
    t.recv(d);
    let v = rosapi_set(&mut t, d, 5, "z", &text_of(150));
    assert_eq!(v["result"], false, "{v}");
    assert!(t.hub.inspect().params_in(3).is_empty());
    let held = t.hub.inspect().params_in(0).held_bytes();
    assert!(held <= 1_200, "{held}");
    assert_eq!(t.hub.memory().registrations - t.hub.nodes().bytes(), held);
    assert_eq!(t.hub.counters().get(Counter::ParamSetsRejected), 3);
}
