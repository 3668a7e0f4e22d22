//! Hub unit tests on a fake clock: time-outs, stalls, cleanup and
//! correlation rules, without sockets or sleeping.

use std::io::IoSlice;
use std::time::{Duration, Instant};

use rosgate_wire::ws::client;
use rosgate_wire::ws::frame::OP_TEXT;
use serde_json::Value;

use super::*;
use crate::out::MAX_IOVECS;

mod actions;
mod auth;
mod bounds;
mod cdr_pass;
mod federation;
mod foxglove;
mod fragments;
mod params;
mod qos;
mod raw_publish;
mod stalls;
mod tf;
mod typedefs;

/// A hub on a fake clock with perfect (or absent) readers.
struct T {
    hub: Hub,
    t0: Instant,
    now: Instant,
}

impl T {
    fn new(limits: Limits) -> T {
        let t0 = Instant::now();
        T {
            hub: Hub::new(limits, t0),
            t0,
            now: t0,
        }
    }

    fn open(&mut self) -> u32 {
        self.hub.open(self.now).expect("admitted").key
    }

    fn send(&mut self, key: u32, line: &str) {
        let mut bytes = line.as_bytes().to_vec();
        bytes.push(b'\n');
        self.hub.on_bytes(key, &bytes, self.now);
    }

    fn advance(&mut self, ms: u64) {
        self.now += Duration::from_millis(ms);
        self.hub.expire(self.now);
        self.free_closed();
    }

    fn free_closed(&mut self) {
        let mut keys = Vec::new();
        loop {
            self.hub.take_closing(&mut keys);
            if keys.is_empty() {
                return;
            }
            for &k in &keys {
                self.hub.free(k, self.now);
            }
        }
    }

    /// Everything queued for `key`, as raw bytes (a perfect writer).
    fn raw(&mut self, key: u32) -> Vec<u8> {
        let mut bytes = Vec::new();
        while let Some(out) = self.hub.out(key).filter(|o| !o.is_empty()) {
            let mut iov = [IoSlice::new(&[]); MAX_IOVECS];
            let n = out.fill(&mut iov, usize::MAX);
            let mut w = 0;
            for s in &iov[..n] {
                bytes.extend_from_slice(s);
                w += s.len();
            }
            self.hub.wrote(key, w, self.now);
        }
        bytes
    }

    /// Everything queued for `key`, as parsed lines (a perfect writer).
    fn recv(&mut self, key: u32) -> Vec<Value> {
        let bytes = self.raw(key);
        let mut dirty = Vec::new();
        self.hub.take_dirty(&mut dirty);
        bytes
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_slice(l).expect("gateway output is JSON"))
            .collect()
    }

    /// A WebSocket connection with its upgrade done and the `101` read.
    fn open_ws(&mut self) -> u32 {
        let key = self
            .hub
            .open_as(Transport::WebSocket, self.now)
            .expect("admitted")
            .key;
        let hs = client::request("x", "/", WS_KEY, &[]);
        self.hub.on_bytes(key, hs.as_bytes(), self.now);
        let raw = self.raw(key);
        let head = client::Response::parse(&raw)
            .expect("an HTTP response")
            .expect("a complete head");
        assert_eq!(head.check_accept(WS_KEY), Ok(()), "{head:?}");
        key
    }

    /// Sends `text` from WebSocket client `key` as one masked text frame.
    fn ws_send(&mut self, key: u32, text: &str) {
        self.hub.on_bytes(key, &ws_text(text.as_bytes()), self.now);
    }

    /// The JSON messages of the server text frames queued for `key`.
    fn ws_recv(&mut self, key: u32) -> Vec<Value> {
        let bytes = self.raw(key);
        let mut out = Vec::new();
        client::Reader::new().feed(&bytes, usize::MAX, |e| match e {
            client::Event::Text(t) => out.push(serde_json::from_slice(t).expect("JSON")),
            other => panic!("a text frame expected, got {other:?}"),
        });
        out
    }

    fn one(&mut self, key: u32) -> Value {
        let mut v = self.recv(key);
        assert_eq!(v.len(), 1, "expected exactly one line, got {v:?}");
        v.remove(0)
    }

    fn provider(&mut self, name: &str) -> u32 {
        let p = self.open();
        self.send(
            p,
            &format!(r#"{{"op":"advertise_service","service":"{name}","type":"T"}}"#),
        );
        assert_eq!(self.one(p)["level"], "info");
        p
    }

    fn call(&mut self, caller: u32, name: &str, id: &str) {
        self.send(
            caller,
            &format!(r#"{{"op":"call_service","service":"{name}","id":{id},"args":{{}}}}"#),
        );
    }
}

/// The key of the WebSocket openings here (RFC 6455's example).
const WS_KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";

/// A masked client text frame.
fn ws_text(payload: &[u8]) -> Vec<u8> {
    client::frame(OP_TEXT, payload, [3, 5, 7, 11])
}

#[test]
fn call_times_out_once_and_late_answer_is_stale() {
    let mut t = T::new(Limits::default());
    let p = t.provider("/s");
    let c = t.open();
    t.call(c, "/s", "\"c1\"");
    let fwd = t.one(p);
    t.advance(4_900);
    assert!(t.recv(c).is_empty(), "no answer before the deadline");
    t.advance(200);
    let r = t.one(c);
    assert_eq!(r["id"], "c1");
    assert_eq!(r["result"], false);
    assert!(r["values"]
        .as_str()
        .is_some_and(|s| s.contains("timed out")));
    assert_eq!(t.hub.counters().get(Counter::CallsTimedOut), 1);
    assert_eq!(t.hub.inspect().calls().len(), 0);
    let id = fwd["id"].as_str().expect("string id");
    t.send(
        p,
        &format!(
            r#"{{"op":"service_response","service":"/s","id":"{id}","values":1,"result":true}}"#
        ),
    );
    assert_eq!(t.one(p)["level"], "error");
    assert!(t.recv(c).is_empty(), "late answer never reaches the caller");
    assert_eq!(t.hub.counters().get(Counter::ResponsesStale), 1);
    let _ = t.t0;
}

#[test]
fn per_call_timeout_is_honoured_and_capped() {
    let mut t = T::new(Limits {
        max_call_timeout: Duration::from_secs(2),
        ..Limits::default()
    });
    let p = t.provider("/s");
    let c = t.open();
    t.send(
        c,
        r#"{"op":"call_service","service":"/s","id":1,"args":{},"timeout":0.5}"#,
    );
    t.send(
        c,
        r#"{"op":"call_service","service":"/s","id":2,"args":{},"timeout":3600}"#,
    );
    assert_eq!(t.recv(p).len(), 2);
    t.advance(600);
    assert_eq!(t.one(c)["id"], 1);
    t.advance(1_300);
    assert!(t.recv(c).is_empty());
    t.advance(200);
    assert_eq!(t.one(c)["id"], 2, "capped at max_call_timeout");
}

#[test]
fn provider_disconnect_fails_calls_at_once() {
    let mut t = T::new(Limits::default());
    let p = t.provider("/s");
    let c = t.open();
    t.call(c, "/s", "1");
    t.call(c, "/s", "2");
    t.recv(p);
    t.hub.close(p, CloseReason::PeerClosed, t.now);
    t.free_closed();
    let got = t.recv(c);
    let ids: Vec<_> = got.iter().map(|v| v["id"].clone()).collect();
    assert_eq!(ids, vec![Value::from(1), Value::from(2)]);
    assert!(got.iter().all(|v| v["result"] == false));
    assert_eq!(t.hub.counters().get(Counter::CallsFailedProviderGone), 2);
    // A later call finds no provider.
    t.call(c, "/s", "3");
    let r = t.one(c);
    assert_eq!(
        (r["id"].clone(), r["result"].clone()),
        (Value::from(3), Value::from(false))
    );
    assert_eq!(t.hub.inspect().registry().service_count(), 0);
}

#[test]
fn caller_disconnect_forgets_its_calls() {
    let mut t = T::new(Limits::default());
    let p = t.provider("/s");
    let c = t.open();
    t.call(c, "/s", "1");
    let fwd = t.one(p);
    t.hub.close(c, CloseReason::Reset, t.now);
    t.free_closed();
    assert_eq!(t.hub.inspect().calls().len(), 0);
    let id = fwd["id"].as_str().expect("id");
    t.send(
        p,
        &format!(
            r#"{{"op":"service_response","service":"/s","id":"{id}","values":1,"result":true}}"#
        ),
    );
    assert_eq!(t.one(p)["level"], "error");
    assert_eq!(t.hub.counters().get(Counter::ResponsesStale), 1);
    // The caller's slot is reused by a newcomer, who must get nothing.
    let n = t.open();
    assert_eq!(n, c, "slab key reused");
    assert!(t.recv(n).is_empty());
}

#[test]
fn displaced_provider_still_answers_forwarded_calls() {
    let mut t = T::new(Limits::default());
    let a = t.provider("/s");
    let c = t.open();
    t.call(c, "/s", "\"x\"");
    let fwd = t.one(a);
    let b = t.provider("/s");
    let note = t.one(a);
    assert_eq!(note["level"], "info");
    t.call(c, "/s", "\"y\"");
    assert_eq!(
        t.one(b)["op"],
        "call_service",
        "new calls go to the new provider"
    );
    let id = fwd["id"].as_str().expect("id");
    t.send(a, &format!(r#"{{"op":"service_response","service":"/s","id":"{id}","values":{{"v":1}},"result":true}}"#));
    let r = t.one(c);
    assert_eq!(
        (r["id"].clone(), r["values"]["v"].clone()),
        (Value::from("x"), Value::from(1))
    );
    // The old provider cannot remove the service any more.
    t.send(a, r#"{"op":"unadvertise_service","service":"/s","id":9}"#);
    let e = t.one(a);
    assert_eq!(
        (e["level"].clone(), e["id"].clone()),
        (Value::from("error"), Value::from(9))
    );
    assert_eq!(t.hub.inspect().registry().service_count(), 1);
}

#[test]
fn forged_response_from_another_connection_is_refused() {
    let mut t = T::new(Limits::default());
    let p = t.provider("/s");
    let c = t.open();
    let evil = t.open();
    t.call(c, "/s", "1");
    let fwd = t.one(p);
    let id = fwd["id"].as_str().expect("id");
    t.send(
        evil,
        &format!(
            r#"{{"op":"service_response","service":"/s","id":"{id}","values":666,"result":true}}"#
        ),
    );
    assert_eq!(t.one(evil)["level"], "error");
    assert!(t.recv(c).is_empty());
    t.send(
        p,
        &format!(
            r#"{{"op":"service_response","service":"/s","id":"{id}","values":1,"result":true}}"#
        ),
    );
    assert_eq!(t.one(c)["values"], 1);
}

#[test]
fn unadvertise_fails_in_flight_calls_of_that_service_only() {
    let mut t = T::new(Limits::default());
    let p = t.provider("/a");
    t.send(p, r#"{"op":"advertise_service","service":"/b","type":"T"}"#);
    t.recv(p);
    let c = t.open();
    t.call(c, "/a", "1");
    t.call(c, "/b", "2");
    t.recv(p);
    t.send(p, r#"{"op":"unadvertise_service","service":"/a"}"#);
    let r = t.one(c);
    assert_eq!(
        (r["id"].clone(), r["result"].clone()),
        (Value::from(1), Value::from(false))
    );
    assert_eq!(
        t.hub.inspect().calls().len(),
        1,
        "the /b call is still in flight"
    );
}

#[test]
fn in_flight_limit_fails_the_excess_call() {
    let mut t = T::new(Limits {
        max_calls_per_conn: 2,
        ..Limits::default()
    });
    let p = t.provider("/s");
    let c = t.open();
    for i in 1..=3 {
        t.call(c, "/s", &i.to_string());
    }
    assert_eq!(t.recv(p).len(), 2);
    let r = t.one(c);
    assert_eq!(
        (r["id"].clone(), r["result"].clone()),
        (Value::from(3), Value::from(false))
    );
    assert_eq!(t.hub.counters().get(Counter::CallsFailedTooMany), 1);
}

#[test]
fn write_stall_closes_only_the_stalled_connection() {
    let mut t = T::new(Limits {
        write_stall: Duration::from_millis(1_000),
        ..Limits::default()
    });
    let stuck = t.open();
    let ok = t.open();
    t.send(stuck, r#"{"op":"subscribe","topic":"/t","type":"T"}"#);
    t.send(ok, r#"{"op":"subscribe","topic":"/t","type":"T"}"#);
    t.recv(ok);
    t.advance(900);
    assert_eq!(t.hub.conn_count(), 2);
    t.recv(ok);
    t.advance(400);
    assert_eq!(t.hub.conn_count(), 1, "stuck had output pending for 1.3 s");
    assert!(t.hub.conn(ok).is_some());
    assert_eq!(t.hub.counters().closes_of(CloseReason::WriteStall), 1);
    assert_eq!(t.hub.inspect().gauges().get(Gauge::Subscriptions), 1);
}

#[test]
fn control_overflow_closes_the_connection() {
    let mut t = T::new(Limits {
        max_control_bytes: 1_000,
        ..Limits::default()
    });
    let c = t.open();
    for i in 0..100 {
        t.send(
            c,
            &format!(r#"{{"op":"subscribe","topic":"/t{i}","type":"T","id":{i}}}"#),
        );
    }
    t.free_closed();
    assert_eq!(t.hub.conn_count(), 0);
    assert_eq!(t.hub.counters().closes_of(CloseReason::ControlOverflow), 1);
    assert_eq!(
        t.hub.inspect().gauges().get(Gauge::Subscriptions),
        0,
        "cleanup withdrew everything"
    );
    assert_eq!(t.hub.inspect().registry().topic_count(), 0);
}

#[test]
fn slow_subscriber_drops_topic_data_but_keeps_the_connection() {
    let mut t = T::new(Limits {
        max_queue_bytes: 10_000,
        ..Limits::default()
    });
    let slow = t.open();
    let fast = t.open();
    let publisher = t.open();
    for s in [slow, fast] {
        t.send(s, r#"{"op":"subscribe","topic":"/t","type":"T"}"#);
    }
    t.recv(fast);
    for i in 0..1_000 {
        t.send(
            publisher,
            &format!(r#"{{"op":"publish","topic":"/t","msg":{{"i":{i}}}}}"#),
        );
        let got = t.one(fast);
        assert_eq!(got["msg"]["i"], i);
    }
    assert!(t.hub.counters().get(Counter::Dropped) > 0);
    assert!(t.hub.out(slow).is_some_and(|o| o.topic_bytes() <= 10_000));
    let got = t.recv(slow);
    let seq: Vec<i64> = got.iter().filter_map(|v| v["msg"]["i"].as_i64()).collect();
    assert!(
        seq.windows(2).all(|w| w[0] < w[1]),
        "order kept after drops"
    );
    assert_eq!(seq.last(), Some(&999), "newest data survives");
    assert_eq!(t.hub.conn_count(), 3);
}

#[test]
fn same_ids_from_many_callers_never_cross() {
    let mut t = T::new(Limits::default());
    let p = t.provider("/s");
    let callers: Vec<u32> = (0..8).map(|_| t.open()).collect();
    for &c in &callers {
        for id in 1..=3 {
            t.send(c, &format!(r#"{{"op":"call_service","service":"/s","id":{id},"args":{{"c":{c},"i":{id}}}}}"#));
        }
    }
    let mut fwd = t.recv(p);
    fwd.reverse(); // answer in a different order than asked
    for f in fwd {
        let id = f["id"].as_str().expect("id");
        let args = f["args"].to_string();
        t.send(p, &format!(r#"{{"op":"service_response","service":"/s","id":"{id}","values":{args},"result":true}}"#));
    }
    for &c in &callers {
        let got = t.recv(c);
        assert_eq!(got.len(), 3);
        for r in got {
            assert_eq!(r["values"]["c"], c);
            assert_eq!(r["values"]["i"], r["id"]);
        }
    }
}

#[test]
fn closing_twice_counts_once_and_frees_everything() {
    let mut t = T::new(Limits::default());
    let c = t.open();
    t.send(c, r#"{"op":"advertise","topic":"/t","type":"T"}"#);
    t.send(c, r#"{"op":"subscribe","topic":"/u","type":"T"}"#);
    t.send(c, r#"{"op":"advertise_service","service":"/s","type":"T"}"#);
    t.hub.close(c, CloseReason::PeerClosed, t.now);
    t.hub.close(c, CloseReason::Reset, t.now);
    t.free_closed();
    let g = t.hub.inspect().gauges();
    assert_eq!(
        (
            g.get(Gauge::ConnectionsOpen),
            g.get(Gauge::Topics),
            g.get(Gauge::Subscriptions),
            g.get(Gauge::Publishers),
            g.get(Gauge::Services)
        ),
        (0, 0, 0, 0, 0)
    );
    assert_eq!(t.hub.counters().closes_total(), 1);
}
