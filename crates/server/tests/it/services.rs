//! Services: advertise_service, unadvertise_service, call_service, service_response.

use crate::support::*;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::time::{Duration, Instant};

/// The provider-side id of a forwarded call, as raw JSON text.
fn fid(fwd: &Value) -> String {
    fwd["id"].to_string()
}

#[test]
fn advertise_service_replies_info_status() {
    let gw = Gateway::start(&[]);
    let mut p = gw.client();
    p.send_line(
        r#"{"op":"advertise_service","service":"/echo","type":"example/Echo","id":"as-1"}"#,
    );
    p.expect_info("as-1");
    p.send_line(r#"{"op":"advertise_service","service":"/echo2","type":"example/Echo"}"#);
    p.expect_status("info", None);
    p.assert_quiet();
    let s = gw.stats();
    assert_eq!(counter(&s, "services"), 2, "{s}");
}

#[test]
fn protocol_example_call_is_forwarded_and_answered() {
    let gw = Gateway::start(&[]);
    let mut p = gw.client();
    let mut c = gw.client();
    p.advertise_service("/echo");
    c.send_line(
        r#"{"op":"call_service","service":"/echo","id":"call-17","args":{"data":"hello"}}"#,
    );
    let fwd = p.expect_forwarded("/echo");
    assert_eq!(fwd["args"], json!({"data":"hello"}));
    assert_ne!(fwd["id"], "call-17", "provider must get a provider-side id");
    p.send_line(&format!(
        r#"{{"op":"service_response","service":"/echo","id":{},"values":{{"echo":"hello"}},"result":true,"status":""}}"#,
        fid(&fwd)
    ));
    let v = c.recv();
    assert_eq!(
        v,
        json!({"op":"service_response","service":"/echo","id":"call-17","values":{"echo":"hello"},"result":true,"status":""})
    );
    // A successful service_response sends nothing back to the provider.
    p.assert_quiet();
    c.assert_quiet();
    let s = gw.stats();
    assert_eq!(counter(&s, "calls_forwarded"), 1, "{s}");
    assert_eq!(counter(&s, "calls_answered"), 1, "{s}");
    assert_eq!(counter(&s, "calls_pending"), 0, "{s}");
}

#[test]
fn call_and_response_payloads_are_forwarded_byte_for_byte() {
    let gw = Gateway::start(&[]);
    let mut p = gw.client();
    let mut c = gw.client();
    p.advertise_service("/raw");
    let args = r#"{"n":12345678901234567890,"f":1e-300,"s":"\u00e9","a":[1, 2 ,{"x":null}]}"#;
    let id = r#"{"caller": [1, 2.50], "s":"\u00e9"}"#;
    c.send_line(&format!(
        r#"{{"op":"call_service","service":"/raw","id":{id},"args":{args}}}"#
    ));
    let raw_fwd = p.recv_raw(deadline(REPLY));
    assert!(raw_fwd.contains(args), "args altered: {raw_fwd}");
    let fwd = parse_line(&raw_fwd);
    assert_eq!(fwd["op"], "call_service");
    assert!(
        fwd["id"].as_str().is_some_and(|s| s.starts_with("rg-")),
        "{fwd}"
    );
    let values = r#"[ 1.000, "\u0041", {"deep" : {"z": -0}} ]"#;
    let result = r#"{"code": 7}"#;
    let status = r#""done \"ok\"""#;
    p.send_line(&format!(
        r#"{{"op":"service_response","service":"/raw","id":{},"values":{values},"result":{result},"status":{status}}}"#,
        fid(&fwd)
    ));
    let raw = c.recv_raw(deadline(REPLY));
    for (what, want) in [
        ("id", format!(r#""id":{id}"#)),
        ("values", format!(r#""values":{values}"#)),
        ("result", format!(r#""result":{result}"#)),
        ("status", format!(r#""status":{status}"#)),
    ] {
        assert!(
            raw.contains(&want),
            "{what} not byte-exact: want {want} in {raw}"
        );
    }
    let v = parse_line(&raw);
    assert_eq!(v["op"], "service_response");
    assert_eq!(v["service"], "/raw");
}

#[test]
fn args_may_be_any_json_value() {
    let gw = Gateway::start(&[]);
    let mut p = gw.client();
    let mut c = gw.client();
    p.advertise_service("/any");
    let all = [
        "null", "0", "-1.5e3", r#""s""#, "[]", "[1,[2]]", "{}", "true", "false",
    ];
    for (i, a) in all.iter().enumerate() {
        c.call("/any", &i.to_string(), a);
        let raw = p.recv_raw(deadline(REPLY));
        assert!(raw.contains(&format!(r#""args":{a}"#)), "args {a} in {raw}");
        let fwd = parse_line(&raw);
        p.respond("/any", &fid(&fwd), a, "true");
        let v = c.expect_response("/any", &json!(i));
        let want: Value = serde_json::from_str(a).unwrap();
        assert_eq!(v["values"], want);
        assert_eq!(v["result"], true);
    }
}

#[test]
fn response_without_status_has_no_status() {
    let gw = Gateway::start(&[]);
    let mut p = gw.client();
    let mut c = gw.client();
    p.advertise_service("/nostatus");
    c.call("/nostatus", r#""c1""#, "{}");
    let fwd = p.expect_forwarded("/nostatus");
    p.respond("/nostatus", &fid(&fwd), r#"{"a":1}"#, "false");
    let v = c.expect_response("/nostatus", &json!("c1"));
    assert_eq!(v["result"], false);
    assert_eq!(v["values"], json!({"a":1}));
    assert!(v.get("status").is_none(), "status must be absent: {v}");
}

#[test]
fn forwarded_ids_are_fresh_and_never_reused() {
    let gw = Gateway::start(&[]);
    let mut seen = HashSet::new();
    let mut c = gw.client();
    for round in 0..3 {
        // A new provider each round; the caller reuses the same ids.
        let mut p = gw.client();
        p.advertise_service("/fresh");
        for i in 0..5 {
            c.call("/fresh", &i.to_string(), "{}");
            let fwd = p.expect_forwarded("/fresh");
            let id = fwd["id"].as_str().unwrap().to_string();
            assert!(
                seen.insert(id.clone()),
                "provider id {id} reused (round {round})"
            );
            p.respond("/fresh", &fid(&fwd), "{}", "true");
            c.expect_response("/fresh", &json!(i));
        }
    }
    assert_eq!(seen.len(), 15);
}

#[test]
fn missing_provider_fails_immediately() {
    let gw = Gateway::start(&["--call-timeout-ms", "20000"]);
    let mut c = gw.client();
    let t0 = Instant::now();
    c.call("/nobody", r#""x1""#, "{}");
    let v = c.expect_failure("/nobody", &json!("x1"));
    assert!(
        t0.elapsed() < Duration::from_secs(2),
        "not immediate: {:?}",
        t0.elapsed()
    );
    assert!(v["values"].is_string());
    c.assert_quiet();
    let s = gw.stats();
    assert_eq!(counter(&s, "calls_failed_no_provider"), 1, "{s}");
    assert_eq!(counter(&s, "calls_pending"), 0, "{s}");
}

#[test]
fn provider_disconnect_fails_waiting_callers_at_once() {
    let gw = Gateway::start(&["--call-timeout-ms", "20000"]);
    let mut p = gw.client();
    p.advertise_service("/gone");
    let mut c1 = gw.client();
    let mut c2 = gw.client();
    c1.call("/gone", "1", "{}");
    c2.call("/gone", "1", "{}");
    c1.call("/gone", "2", "{}");
    for _ in 0..3 {
        p.expect_forwarded("/gone");
    }
    let t0 = Instant::now();
    drop(p);
    let a = c1.recv();
    let b = c1.recv();
    let mut ids = vec![a["id"].clone(), b["id"].clone()];
    ids.sort_by_key(|v| v.to_string());
    assert_eq!(ids, vec![json!(1), json!(2)]);
    assert_failure(&a);
    assert_failure(&b);
    c2.expect_failure("/gone", &json!(1));
    assert!(
        t0.elapsed() < Duration::from_secs(3),
        "not at once: {:?}",
        t0.elapsed()
    );
    let s = gw.stats();
    assert_eq!(counter(&s, "calls_failed_provider_gone"), 3, "{s}");
    assert_eq!(counter(&s, "calls_pending"), 0, "{s}");
    assert_eq!(counter(&s, "services"), 0, "{s}");
    // A future call is never routed to the departed provider.
    c1.call("/gone", "3", "{}");
    c1.expect_failure("/gone", &json!(3));
    c1.assert_quiet();
    c2.assert_quiet();
}

#[test]
fn call_times_out_and_late_response_is_dropped() {
    let gw = Gateway::start(&["--call-timeout-ms", "300"]);
    let mut p = gw.client();
    p.advertise_service("/slow");
    let mut c = gw.client();
    let t0 = Instant::now();
    c.call("/slow", r#""t1""#, "{}");
    let fwd = p.expect_forwarded("/slow");
    let v = c.expect_failure("/slow", &json!("t1"));
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_millis(250),
        "timed out too early: {took:?}"
    );
    assert!(
        took < Duration::from_secs(3),
        "timed out too late: {took:?}"
    );
    // The provider's late answer completes nothing and earns an error status.
    p.respond("/slow", &fid(&fwd), r#""late""#, "true");
    p.expect_error(fwd["id"].clone());
    c.assert_quiet();
    p.assert_quiet();
    let s = gw.stats();
    assert_eq!(counter(&s, "calls_timed_out"), 1, "{s}");
    assert_eq!(counter(&s, "calls_pending"), 0, "{s}");
    assert!(
        counter(&s, "responses_stale") + counter(&s, "errors.unknown_response") >= 1,
        "late response not counted: {s}"
    );
    assert!(v["values"].is_string());
}

#[test]
fn default_call_timeout_is_five_seconds() {
    let gw = Gateway::start(&[]);
    let mut p = gw.client();
    p.advertise_service("/s5");
    let mut c = gw.client();
    let t0 = Instant::now();
    c.call("/s5", "5", "{}");
    p.expect_forwarded("/s5");
    let v = c.recv_json(deadline(Duration::from_secs(9)));
    let took = t0.elapsed();
    assert_eq!(v["id"], 5);
    assert_failure(&v);
    assert!(
        took >= Duration::from_millis(4500) && took < Duration::from_millis(8000),
        "default timeout should be ~5 s, was {took:?}"
    );
}

#[test]
fn per_call_timeout_in_seconds_shortens_the_wait() {
    let gw = Gateway::start(&["--call-timeout-ms", "20000"]);
    let mut p = gw.client();
    p.advertise_service("/pt");
    let mut c = gw.client();
    let t0 = Instant::now();
    c.send_line(r#"{"op":"call_service","service":"/pt","id":"pt","args":{},"timeout":0.3}"#);
    p.expect_forwarded("/pt");
    c.expect_failure("/pt", &json!("pt"));
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_millis(250) && took < Duration::from_secs(3),
        "per-call timeout 0.3 s not honoured: {took:?}"
    );
}

#[test]
fn per_call_timeout_longer_than_default_is_honoured() {
    let gw = Gateway::start(&["--call-timeout-ms", "200"]);
    let mut p = gw.client();
    p.advertise_service("/long");
    let mut c = gw.client();
    c.send_line(r#"{"op":"call_service","service":"/long","id":"L","args":{},"timeout":2}"#);
    let fwd = p.expect_forwarded("/long");
    // Wait well past the 200 ms default: nothing may arrive for the caller.
    let dl = deadline(Duration::from_millis(700));
    match c.try_recv_line(dl) {
        Recv::Timeout => {}
        other => panic!("call with timeout 2 s ended early: {other:?}"),
    }
    p.respond("/long", &fid(&fwd), r#""slow but fine""#, "true");
    let v = c.expect_response("/long", &json!("L"));
    assert_eq!(v["result"], true);
    assert_eq!(v["values"], "slow but fine");
}

#[test]
fn per_call_timeout_is_capped_by_max_call_timeout() {
    let gw = Gateway::start(&["--call-timeout-ms", "100", "--max-call-timeout-ms", "400"]);
    let mut p = gw.client();
    p.advertise_service("/cap");
    let mut c = gw.client();
    let t0 = Instant::now();
    c.send_line(r#"{"op":"call_service","service":"/cap","id":"cap","args":{},"timeout":100}"#);
    p.expect_forwarded("/cap");
    c.expect_failure("/cap", &json!("cap"));
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_millis(350) && took < Duration::from_secs(3),
        "timeout should be capped at 400 ms, was {took:?}"
    );
}

#[test]
fn advertise_service_replaces_provider_and_keeps_forwarded_calls_valid() {
    let gw = Gateway::start(&["--call-timeout-ms", "20000"]);
    let mut p1 = gw.client();
    let mut p2 = gw.client();
    let mut c = gw.client();
    p1.advertise_service("/rep");
    c.call("/rep", r#""before""#, r#"{"n":1}"#);
    let fwd1 = p1.expect_forwarded("/rep");
    p2.send_line(r#"{"op":"advertise_service","service":"/rep","type":"t","id":"p2"}"#);
    p2.expect_info("p2");
    let note = p1.recv();
    assert_eq!(note["op"], "status", "{note}");
    assert_eq!(note["level"], "info", "{note}");
    assert_ne!(
        note.get("id"),
        Some(&json!("p2")),
        "p2's id leaked to p1: {note}"
    );
    // Free text: it must name the service and say another provider has it now.
    let msg = note["msg"].as_str().unwrap_or_default().to_lowercase();
    assert!(
        msg.contains("/rep")
            && ["replac", "taken over", "another provider", "new provider"]
                .iter()
                .any(|w| msg.contains(w)),
        "displaced provider's status should say /rep was replaced: {note}"
    );
    // New calls go to the new provider.
    c.call("/rep", r#""after""#, r#"{"n":2}"#);
    let fwd2 = p2.expect_forwarded("/rep");
    assert_eq!(fwd2["args"], json!({"n":2}));
    p1.assert_quiet();
    // The old provider's answer to the earlier call still reaches the caller.
    p1.respond("/rep", &fid(&fwd1), r#""from p1""#, "true");
    let v = c.expect_response("/rep", &json!("before"));
    assert_eq!(v["values"], "from p1");
    assert_eq!(v["result"], true);
    p1.assert_quiet();
    p2.respond("/rep", &fid(&fwd2), r#""from p2""#, "true");
    let v = c.expect_response("/rep", &json!("after"));
    assert_eq!(v["values"], "from p2");
    // The displaced provider can no longer withdraw the service.
    p1.send_line(r#"{"op":"unadvertise_service","service":"/rep","id":"u1"}"#);
    p1.expect_error("u1");
    c.call("/rep", r#""still p2""#, "{}");
    p2.expect_forwarded("/rep");
    let s = gw.stats();
    assert_eq!(counter(&s, "services"), 1, "{s}");
    assert_eq!(counter(&s, "errors.not_provider"), 1, "{s}");
}

#[test]
fn unadvertise_service_by_provider_fails_in_flight_calls_at_once() {
    let gw = Gateway::start(&["--call-timeout-ms", "20000"]);
    let mut p = gw.client();
    let mut c = gw.client();
    p.advertise_service("/un");
    c.call("/un", "1", "{}");
    let fwd = p.expect_forwarded("/un");
    let t0 = Instant::now();
    p.send_line(r#"{"op":"unadvertise_service","service":"/un","id":"ua"}"#);
    p.expect_info("ua");
    c.expect_failure("/un", &json!(1));
    assert!(
        t0.elapsed() < Duration::from_secs(2),
        "not at once: {:?}",
        t0.elapsed()
    );
    // The service is gone: next call fails for lack of a provider and is not forwarded.
    c.call("/un", "2", "{}");
    c.expect_failure("/un", &json!(2));
    // A late response for the failed call is dropped (error status to its sender).
    p.respond("/un", &fid(&fwd), "{}", "true");
    p.expect_error(fwd["id"].clone());
    p.assert_quiet();
    c.assert_quiet();
    let s = gw.stats();
    assert_eq!(counter(&s, "services"), 0, "{s}");
    assert_eq!(counter(&s, "calls_pending"), 0, "{s}");
    assert!(counter(&s, "calls_failed_no_provider") >= 1, "{s}");
}

#[test]
fn unadvertise_service_by_non_provider_changes_nothing() {
    let gw = Gateway::start(&[]);
    let mut p = gw.client();
    let mut other = gw.client();
    let mut c = gw.client();
    p.advertise_service("/keep");
    other.send_line(r#"{"op":"unadvertise_service","service":"/keep","id":"nope"}"#);
    other.expect_error("nope");
    other.send_line(r#"{"op":"unadvertise_service","service":"/never-existed","id":"nope2"}"#);
    other.expect_error("nope2");
    c.call("/keep", r#""k""#, "{}");
    let fwd = p.expect_forwarded("/keep");
    p.respond("/keep", &fid(&fwd), "1", "true");
    assert_eq!(c.expect_response("/keep", &json!("k"))["result"], true);
    other.assert_quiet();
    let s = gw.stats();
    assert_eq!(counter(&s, "errors.not_provider"), 2, "{s}");
    assert_eq!(counter(&s, "services"), 1, "{s}");
}

#[test]
fn unknown_response_id_gets_error_and_completes_nothing() {
    let gw = Gateway::start(&["--call-timeout-ms", "20000"]);
    let mut p = gw.client();
    let mut c = gw.client();
    p.advertise_service("/u");
    c.call("/u", r#""real""#, "{}");
    let fwd = p.expect_forwarded("/u");
    for bogus in [r#""rg-999999""#, r#""real""#, "1", r#""""#] {
        p.respond("/u", bogus, r#""bogus""#, "true");
        let e = p.recv();
        assert_status(&e, "error", Some(&serde_json::from_str(bogus).unwrap()));
    }
    c.assert_quiet();
    p.respond("/u", &fid(&fwd), r#""genuine""#, "true");
    assert_eq!(c.expect_response("/u", &json!("real"))["values"], "genuine");
    let s = gw.stats();
    assert!(counter(&s, "errors.unknown_response") >= 4, "{s}");
}

#[test]
fn forged_response_from_another_connection_completes_nothing() {
    let gw = Gateway::start(&["--call-timeout-ms", "20000"]);
    let mut p = gw.client();
    let mut c = gw.client();
    let mut forger = gw.client();
    p.advertise_service("/f");
    c.call("/f", r#""victim""#, "{}");
    let fwd = p.expect_forwarded("/f");
    forger.respond("/f", &fid(&fwd), r#""forged""#, "true");
    forger.expect_error(fwd["id"].clone());
    // Even a connection that is itself a provider of the service cannot answer it.
    let mut p2 = gw.client();
    p2.advertise_service("/other");
    p2.respond("/f", &fid(&fwd), r#""forged2""#, "true");
    p2.expect_error(fwd["id"].clone());
    c.assert_quiet();
    p.respond("/f", &fid(&fwd), r#""genuine""#, "true");
    assert_eq!(
        c.expect_response("/f", &json!("victim"))["values"],
        "genuine"
    );
    c.assert_quiet();
}

#[test]
fn response_after_caller_left_is_dropped() {
    let gw = Gateway::start(&["--call-timeout-ms", "20000"]);
    let mut p = gw.client();
    p.advertise_service("/left");
    let mut c = gw.client();
    c.call("/left", "1", "{}");
    let fwd = p.expect_forwarded("/left");
    drop(c);
    gw.wait_for_stats("caller's call removed", |s| {
        counter(s, "calls_pending") == 0
    });
    // A new caller using the same id must not receive the orphaned answer.
    let mut c2 = gw.client();
    c2.call("/left", "1", "{}");
    let fwd2 = p.expect_forwarded("/left");
    assert_ne!(fwd2["id"], fwd["id"]);
    p.respond("/left", &fid(&fwd), r#""orphan""#, "true");
    p.expect_error(fwd["id"].clone());
    c2.assert_quiet();
    p.respond("/left", &fid(&fwd2), r#""mine""#, "true");
    assert_eq!(c2.expect_response("/left", &json!(1))["values"], "mine");
    let s = gw.stats();
    assert!(
        counter(&s, "responses_stale") + counter(&s, "errors.unknown_response") >= 1,
        "{s}"
    );
}

#[test]
fn concurrent_callers_with_same_ids_never_cross() {
    let gw = Gateway::start(&["--call-timeout-ms", "20000"]);
    let mut p = gw.client();
    p.advertise_service("/x");
    const CALLERS: usize = 10;
    const IDS: usize = 3;
    let mut callers: Vec<Client> = (0..CALLERS).map(|_| gw.client()).collect();
    for (k, c) in callers.iter_mut().enumerate() {
        for id in 1..=IDS {
            c.call(
                "/x",
                &id.to_string(),
                &format!(r#"{{"caller":{k},"id":{id}}}"#),
            );
        }
    }
    let mut fwds: Vec<Value> = (0..CALLERS * IDS)
        .map(|_| p.expect_forwarded("/x"))
        .collect();
    let distinct: HashSet<String> = fwds.iter().map(fid).collect();
    assert_eq!(
        distinct.len(),
        CALLERS * IDS,
        "provider ids must be distinct"
    );
    fwds.reverse();
    for f in &fwds {
        p.respond("/x", &fid(f), &f["args"].to_string(), "true");
    }
    for (k, c) in callers.iter_mut().enumerate() {
        let mut got = Vec::new();
        for _ in 0..IDS {
            let v = c.recv();
            assert_eq!(v["op"], "service_response");
            assert_eq!(v["values"]["caller"], k, "crossed response: {v}");
            assert_eq!(v["values"]["id"], v["id"], "crossed response: {v}");
            got.push(v["id"].as_u64().unwrap());
        }
        got.sort();
        assert_eq!(got, vec![1, 2, 3]);
        c.assert_quiet();
    }
    p.assert_quiet();
}

#[test]
fn one_caller_out_of_order_responses_are_matched_by_id() {
    let gw = Gateway::start(&[]);
    let mut p = gw.client();
    let mut c = gw.client();
    p.advertise_service("/ooo");
    for i in 0..5 {
        c.call("/ooo", &format!(r#""q{i}""#), &i.to_string());
    }
    let fwds: Vec<Value> = (0..5).map(|_| p.expect_forwarded("/ooo")).collect();
    for i in [3usize, 0, 4, 2, 1] {
        let f = &fwds[i];
        assert_eq!(f["args"], i);
        p.respond("/ooo", &fid(f), &format!("{}", i * 10), "true");
        let v = c.expect_response("/ooo", &json!(format!("q{i}")));
        assert_eq!(v["values"], i * 10);
    }
}

#[test]
fn call_service_without_id_is_an_error_and_not_forwarded() {
    let gw = Gateway::start(&[]);
    let mut p = gw.client();
    let mut c = gw.client();
    p.advertise_service("/noid");
    c.send_line(r#"{"op":"call_service","service":"/noid","args":{}}"#);
    c.expect_error_no_id();
    p.assert_quiet();
    c.assert_quiet();
    let s = gw.stats();
    assert_eq!(counter(&s, "errors.missing_id"), 1, "{s}");
    assert_eq!(counter(&s, "calls_forwarded"), 0, "{s}");
}

#[test]
fn call_service_without_args_is_an_error_and_not_forwarded() {
    let gw = Gateway::start(&[]);
    let mut p = gw.client();
    let mut c = gw.client();
    p.advertise_service("/noargs");
    c.send_line(r#"{"op":"call_service","service":"/noargs","id":"na"}"#);
    c.expect_error("na");
    p.assert_quiet();
    c.assert_quiet();
}

#[test]
fn reserved_prefix_cannot_be_advertised() {
    let gw = Gateway::start(&[]);
    let mut p = gw.client();
    p.send_line(r#"{"op":"advertise_service","service":"/rosgate/stats","type":"t","id":"r1"}"#);
    p.expect_error("r1");
    p.send_line(r#"{"op":"advertise_service","service":"/rosgate/mine","type":"t","id":"r2"}"#);
    p.expect_error("r2");
    // Not reserved: a different first segment.
    p.send_line(r#"{"op":"advertise_service","service":"/rosgatex/ok","type":"t","id":"r3"}"#);
    p.expect_info("r3");
    // Stats still served by the gateway, not forwarded to p.
    let mut c = gw.client();
    let s = c.stats();
    assert_eq!(counter(&s, "services"), 1, "{s}");
    p.assert_quiet();
    c.call("/rosgate/mine", r#""m""#, "{}");
    c.expect_failure("/rosgate/mine", &json!("m"));
    p.assert_quiet();
}

#[test]
fn a_connection_can_call_its_own_service() {
    let gw = Gateway::start(&[]);
    let mut pc = gw.client();
    pc.advertise_service("/me");
    pc.call("/me", r#""self""#, r#"[1]"#);
    let fwd = pc.expect_forwarded("/me");
    assert_eq!(fwd["args"], json!([1]));
    pc.respond("/me", &fid(&fwd), r#""ok""#, "true");
    let v = pc.expect_response("/me", &json!("self"));
    assert_eq!(v["values"], "ok");
    pc.assert_quiet();
}

#[test]
fn provider_close_removes_its_services() {
    let gw = Gateway::start(&[]);
    let mut p = gw.client();
    p.advertise_service("/a");
    p.advertise_service("/b");
    let mut keep = gw.client();
    keep.advertise_service("/c");
    assert_eq!(counter(&gw.stats(), "services"), 3);
    drop(p);
    gw.wait_for_stats("p's services removed", |s| counter(s, "services") == 1);
    let mut c = gw.client();
    c.call("/a", "1", "{}");
    c.expect_failure("/a", &json!(1));
    c.call("/c", "2", "{}");
    let fwd = keep.expect_forwarded("/c");
    keep.respond("/c", &fid(&fwd), "0", "true");
    assert_eq!(c.expect_response("/c", &json!(2))["result"], true);
}

#[test]
fn service_response_missing_fields_is_an_error() {
    let gw = Gateway::start(&["--call-timeout-ms", "20000"]);
    let mut p = gw.client();
    let mut c = gw.client();
    p.advertise_service("/m");
    c.call("/m", r#""m1""#, "{}");
    let fwd = p.expect_forwarded("/m");
    let id = fid(&fwd);
    p.send_line(&format!(
        r#"{{"op":"service_response","service":"/m","id":{id},"result":true}}"#
    ));
    p.expect_error(fwd["id"].clone());
    p.send_line(&format!(
        r#"{{"op":"service_response","service":"/m","id":{id},"values":1}}"#
    ));
    p.expect_error(fwd["id"].clone());
    p.send_line(r#"{"op":"service_response","service":"/m","values":1,"result":true}"#);
    p.expect_error_no_id();
    c.assert_quiet();
    // The call is still outstanding and can be answered properly.
    p.respond("/m", &id, "1", "true");
    assert_eq!(c.expect_response("/m", &json!("m1"))["values"], 1);
}

#[test]
fn publications_interleave_with_a_pending_call() {
    let gw = Gateway::start(&["--call-timeout-ms", "20000"]);
    let mut p = gw.client();
    let mut c = gw.client();
    p.advertise_service("/mix");
    c.subscribe("/news");
    c.call("/mix", r#""pending""#, "{}");
    let fwd = p.expect_forwarded("/mix");
    p.publish("/news", "1");
    assert_eq!(c.recv(), json!({"op":"publish","topic":"/news","msg":1}));
    p.respond("/mix", &fid(&fwd), r#""done""#, "true");
    p.publish("/news", "2");
    let v = c.expect_response("/mix", &json!("pending"));
    assert_eq!(v["values"], "done");
    assert_eq!(c.recv(), json!({"op":"publish","topic":"/news","msg":2}));
}

#[test]
fn service_requests_ignore_key_order_and_unknown_fields() {
    let gw = Gateway::start(&[]);
    let mut p = gw.client();
    let mut c = gw.client();
    p.send_line(r#"{"id":"as","x-extra":[1],"type":"t","service":"/ko","op":"advertise_service"}"#);
    p.expect_info("as");
    c.send_line(r#"{ "args" : {"a":1} , "note":"ignored", "id" : "k", "service" : "/ko", "op" : "call_service" }"#);
    let fwd = p.expect_forwarded("/ko");
    assert_eq!(fwd["args"], json!({"a":1}));
    assert!(fwd.get("note").is_none(), "unknown field leaked: {fwd}");
    p.send_line(&format!(
        r#"{{"result":true,"values":"v","extra":{{"z":0}},"id":{},"service":"/ko","op":"service_response"}}"#,
        fid(&fwd)
    ));
    let v = c.expect_response("/ko", &json!("k"));
    assert_eq!(v["values"], "v");
    assert!(v.get("extra").is_none(), "unknown field leaked: {v}");
    p.send_line(r#"{"service":"/ko","id":"ua","op":"unadvertise_service","junk":null}"#);
    p.expect_info("ua");
}
