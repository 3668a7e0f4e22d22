//! The `/rosgate/stats` service and its accounting.

use crate::support::*;
use serde_json::json;
use std::time::Duration;

const COUNTERS: &[&str] = &[
    "connections_open",
    "connections_accepted",
    "connections_rejected",
    "lines_in",
    "bytes_in",
    "bytes_out",
    "published",
    "delivered",
    "dropped",
    "topics",
    "subscriptions",
    "publishers",
    "services",
    "calls_pending",
    "calls_forwarded",
    "calls_answered",
    "calls_timed_out",
    "calls_failed_no_provider",
    "calls_failed_provider_gone",
    "calls_failed_too_many",
    "responses_stale",
];

const CLOSES: &[&str] = &[
    "peer_closed",
    "reset",
    "control_overflow",
    "write_stall",
    "max_connections",
    "shutdown",
];

const ERRORS: &[&str] = &[
    "bad_json",
    "bad_utf8",
    "not_object",
    "missing_op",
    "unknown_op",
    "missing_field",
    "wrong_type",
    "too_long",
    "too_deep",
    "unknown_response",
    "not_provider",
    "missing_id",
];

#[test]
fn stats_response_shape_and_counters() {
    let gw = Gateway::start(&[]);
    let mut c = gw.client();
    let req = r#"{"op":"call_service","service":"/rosgate/stats","id":{"s": 1},"args":{}}"#;
    c.send_line(req);
    let raw = c.recv_raw(deadline(REPLY));
    assert!(
        raw.contains(r#""id":{"s": 1}"#),
        "caller id not byte-exact: {raw}"
    );
    let v = parse_line(&raw);
    assert_eq!(v["op"], "service_response", "{v}");
    assert_eq!(v["service"], "/rosgate/stats", "{v}");
    assert_eq!(v["result"], true, "{v}");
    let s = &v["values"];
    assert!(s.is_object(), "{v}");
    for k in COUNTERS {
        counter(s, k);
    }
    for k in CLOSES {
        counter(s, &format!("closes.{k}"));
    }
    for k in ERRORS {
        counter(s, &format!("errors.{k}"));
    }
    // A fresh gateway: the asking connection is the only one.
    assert_eq!(counter(s, "connections_open"), 1, "{s}");
    assert_eq!(counter(s, "connections_accepted"), 1, "{s}");
    assert_eq!(counter(s, "calls_pending"), 0, "{s}");
    assert_eq!(total_errors(s), 0, "{s}");
    for k in CLOSES {
        assert_eq!(counter(s, &format!("closes.{k}")), 0, "{s}");
    }
    assert!(counter(s, "lines_in") >= 1, "{s}");
    assert!(counter(s, "bytes_in") >= req.len() as u64, "{s}");
    c.assert_quiet();
}

#[test]
fn stats_count_connections_lines_bytes_and_deliveries() {
    let gw = Gateway::start(&[]);
    let mut obs = gw.client();
    let s0 = obs.stats();
    let mut a = gw.client();
    let mut b = gw.client();
    a.subscribe("/c");
    b.subscribe("/c");
    let line = r#"{"op":"publish","topic":"/c","msg":"0123456789"}"#;
    for _ in 0..5 {
        b.send_line(line);
    }
    for _ in 0..5 {
        a.recv();
        b.recv();
    }
    let s1 = obs.stats();
    assert_eq!(counter(&s1, "connections_open"), 3, "{s1}");
    assert_eq!(
        counter(&s1, "connections_accepted"),
        counter(&s0, "connections_accepted") + 2,
        "{s1}"
    );
    assert_eq!(
        counter(&s1, "published"),
        counter(&s0, "published") + 5,
        "{s1}"
    );
    assert_eq!(
        counter(&s1, "delivered"),
        counter(&s0, "delivered") + 10,
        "{s1}"
    );
    assert_eq!(counter(&s1, "subscriptions"), 2, "{s1}");
    assert_eq!(counter(&s1, "topics"), 1, "{s1}");
    // 2 subscribes + 5 publishes + this stats request (+ maybe not yet counted).
    let lines = counter(&s1, "lines_in") - counter(&s0, "lines_in");
    assert!((7..=9).contains(&lines), "lines_in grew by {lines}: {s1}");
    let bytes_in = counter(&s1, "bytes_in") - counter(&s0, "bytes_in");
    assert!(
        bytes_in >= 5 * (line.len() as u64 + 1),
        "bytes_in grew by {bytes_in}"
    );
    let bytes_out = counter(&s1, "bytes_out") - counter(&s0, "bytes_out");
    assert!(bytes_out >= 10 * 40, "bytes_out grew by {bytes_out}");
    assert_eq!(counter(&s1, "dropped"), 0, "{s1}");
}

#[test]
fn close_reasons_peer_closed_and_reset_are_counted() {
    let gw = Gateway::start(&[]);
    let mut obs = gw.client();
    let s0 = obs.stats();
    let mut a = gw.client();
    a.subscribe("/pc");
    drop(a);
    let wait = |what: &str, f: &dyn Fn(&serde_json::Value) -> bool, obs: &mut Client| {
        let dl = deadline(Duration::from_secs(10));
        loop {
            let s = obs.stats();
            if f(&s) {
                return s;
            }
            assert!(std::time::Instant::now() < dl, "{what}: {s}");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let s1 = wait(
        "peer_closed",
        &|s| {
            counter(s, "closes.peer_closed") == counter(&s0, "closes.peer_closed") + 1
                && counter(s, "connections_open") == 1
        },
        &mut obs,
    );
    assert_eq!(counter(&s1, "subscriptions"), 0, "{s1}");
    assert_eq!(
        counter(&s1, "closes.reset"),
        counter(&s0, "closes.reset"),
        "{s1}"
    );
    // An abortive close (RST).
    let b = gw.client();
    let mut b = {
        let sock = socket2::Socket::from(b.stream);
        sock.set_linger(Some(Duration::ZERO)).unwrap();
        Client::from_stream(sock.into())
    };
    b.subscribe("/rst");
    drop(b);
    let s2 = wait(
        "reset",
        // Teardown may trail the close counter within one loop turn: wait for all of it.
        &|s| {
            counter(s, "closes.reset") == counter(&s0, "closes.reset") + 1
                && counter(s, "connections_open") == 1
        },
        &mut obs,
    );
    assert_eq!(
        counter(&s2, "closes.peer_closed"),
        counter(&s1, "closes.peer_closed"),
        "{s2}"
    );
    assert_eq!(counter(&s2, "subscriptions"), 0, "{s2}");
    obs.assert_quiet();
}

#[test]
fn stats_service_ignores_args_and_answers_every_id() {
    let gw = Gateway::start(&[]);
    let mut c = gw.client();
    for (i, args) in ["{}", "null", "[1,2]", r#"{"x":1}"#].iter().enumerate() {
        c.call("/rosgate/stats", &i.to_string(), args);
        let v = c.expect_response("/rosgate/stats", &json!(i));
        assert_eq!(v["result"], true);
        assert!(v["values"].is_object());
    }
}
