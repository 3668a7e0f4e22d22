//! QoS on the wire (docs/protocol.md, "QoS: latching, depth, throttling,
//! reliability, peers"), against the real binary on both transports:
//! latched caches for late subscribers, depth and reliability for
//! subscribers that do not read, throttling, the compatibility rule and its
//! warnings, peer counts, and calls that wait for a provider.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::*;
use crate::wsclient::*;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tr {
    Tcp,
    Ws,
}

const BOTH: [Tr; 2] = [Tr::Tcp, Tr::Ws];

impl Tr {
    fn other(self) -> Tr {
        match self {
            Tr::Tcp => Tr::Ws,
            Tr::Ws => Tr::Tcp,
        }
    }
}

/// One client on either transport. WebSocket clients keep the gateway's
/// default status level (`warning`), as roslib's and roslibpy's do.
enum Peer {
    Tcp(Client),
    Ws(Ws),
}

impl Peer {
    fn open(gw: &Gateway, tr: Tr) -> Peer {
        match tr {
            Tr::Tcp => Peer::Tcp(gw.client()),
            Tr::Ws => Peer::Ws(Ws::connect(gw)),
        }
    }

    /// A client whose receive buffer is tiny (set before connecting): one
    /// that does not read stops the gateway's writes almost at once.
    fn slow(gw: &Gateway, tr: Tr) -> Peer {
        match tr {
            Tr::Tcp => Peer::Tcp(Client::connect_small_rcvbuf(gw, 4096)),
            Tr::Ws => Peer::Ws(Ws::connect_small_rcvbuf(gw, 4096)),
        }
    }

    fn send(&mut self, v: &Value) {
        match self {
            Peer::Tcp(c) => c.send_json(v),
            Peer::Ws(w) => w.send_text(&v.to_string()),
        }
    }

    /// The next message, or `None` at the deadline or the end of the
    /// connection.
    fn try_next(&mut self, dl: Instant) -> Option<Value> {
        match self {
            Peer::Tcp(c) => match c.try_recv_line(dl) {
                Recv::Line(l) => Some(parse_line(&String::from_utf8_lossy(&l))),
                _ => None,
            },
            Peer::Ws(w) => loop {
                match w.try_frame(dl) {
                    Some((0x1, p)) => {
                        return Some(serde_json::from_slice(&p).expect("a text frame holds JSON"))
                    }
                    Some((0x8, _)) | None => return None,
                    Some(_) => continue,
                }
            },
        }
    }

    fn next(&mut self) -> Value {
        self.try_next(deadline(REPLY))
            .expect("a message before the deadline")
    }

    /// The next message that is a publish; fails on anything else.
    fn next_publish(&mut self) -> Value {
        let v = self.next();
        assert_eq!(v["op"], "publish", "expected a publish, got {v}");
        v["msg"].clone()
    }

    /// Asks the gateway's stats with a fresh id and returns everything
    /// that arrived before the answer: the gateway handled all this
    /// connection sent before, and queued to it whatever that caused.
    fn barrier(&mut self) -> Vec<Value> {
        let id = format!("barrier-{}", uniq());
        self.send(&json!({"op":"call_service","service":"/rosgate/stats","id":id,"args":{}}));
        let mut before = Vec::new();
        loop {
            let v = self.next();
            if v["op"] == "service_response" && v["id"] == id.as_str() {
                return before;
            }
            before.push(v);
        }
    }

    /// The messages published to this client up to a barrier.
    fn msgs(&mut self) -> Vec<Value> {
        publishes(&self.barrier())
    }

    /// The warning statuses up to a barrier.
    fn warnings(&mut self) -> Vec<Value> {
        warnings(&self.barrier())
    }

    /// Registers (`subscribe` or `advertise`) with `extra` fields; returns
    /// what arrived up to a barrier (TCP: the info status first).
    fn register(&mut self, op: &str, topic: &str, extra: Value) -> Vec<Value> {
        let mut req = json!({"op":op,"topic":topic,"type":"test/T","id":format!("reg-{}", uniq())});
        if let (Some(r), Some(e)) = (req.as_object_mut(), extra.as_object()) {
            for (k, v) in e {
                r.insert(k.clone(), v.clone());
            }
        }
        self.send(&req);
        // Two barriers: peer counts are sent at the end of the loop turn
        // that handled the registration, which may be the first barrier's.
        let mut got = self.barrier();
        got.extend(self.barrier());
        got
    }

    fn subscribe(&mut self, topic: &str, extra: Value) -> Vec<Value> {
        self.register("subscribe", topic, extra)
    }

    fn advertise(&mut self, topic: &str, extra: Value) -> Vec<Value> {
        self.register("advertise", topic, extra)
    }

    fn publish(&mut self, topic: &str, msg: Value) {
        self.send(&json!({"op":"publish","topic":topic,"msg":msg}));
    }

    /// Reads until the gateway closes the connection; returns what came.
    fn until_closed(&mut self, within: Duration) -> Vec<Value> {
        let dl = deadline(within);
        let mut got = Vec::new();
        while let Some(v) = self.try_next(dl) {
            got.push(v);
        }
        assert!(Instant::now() < dl, "not closed within {within:?}");
        got
    }
}

fn publishes(frames: &[Value]) -> Vec<Value> {
    frames
        .iter()
        .filter(|v| v["op"] == "publish")
        .map(|v| v["msg"].clone())
        .collect()
}

fn warnings(frames: &[Value]) -> Vec<Value> {
    frames
        .iter()
        .filter(|v| v["op"] == "status" && v["level"] == "warning")
        .cloned()
        .collect()
}

fn ints(msgs: &[Value]) -> Vec<i64> {
    msgs.iter()
        .map(|m| {
            m.as_i64()
                .or_else(|| m["seq"].as_i64())
                .unwrap_or_else(|| panic!("not a numbered message: {m}"))
        })
        .collect()
}

fn topic(what: &str) -> String {
    format!("/qos/{what}_{}", uniq())
}

/// `/rosgate/topic_info` for `topic`.
fn topic_info(gw: &Gateway, topic: &str) -> Value {
    let mut c = gw.client();
    c.send_json(&json!({"op":"call_service","service":"/rosgate/topic_info","id":"ti","args":{"topic":topic}}));
    let v = c.expect_response("/rosgate/topic_info", &json!("ti"));
    assert_eq!(v["result"], true, "{v}");
    v["values"].clone()
}

/// Publishes `n` numbered messages of about `pad` bytes in one write.
fn flood(p: &mut Client, topic: &str, from: u64, n: u64, pad: usize) {
    let pad = "p".repeat(pad);
    let mut batch = String::new();
    for i in from..from + n {
        batch.push_str(&format!(
            "{{\"op\":\"publish\",\"topic\":\"{topic}\",\"msg\":{{\"seq\":{i},\"pad\":\"{pad}\"}}}}\n"
        ));
    }
    p.send_raw(batch.as_bytes());
}

// ---------------------------------------------------------------------------------------------
// Latching
// ---------------------------------------------------------------------------------------------

#[test]
fn a_late_subscriber_gets_exactly_the_last_n_latched_then_live_ones_in_order() {
    let gw = Gateway::start(&[]);
    for tr in BOTH {
        let t = topic("late");
        let mut p = Peer::open(&gw, tr);
        p.advertise(
            &t,
            json!({"qos":{"durability":"transient_local","depth":3}}),
        );
        for i in 0..10 {
            p.publish(&t, json!(i));
        }
        p.barrier();
        let before = gw.stats();
        let mut late = Peer::open(&gw, tr);
        let got = late.subscribe(&t, json!({}));
        assert_eq!(
            ints(&publishes(&got)),
            [7, 8, 9],
            "{tr:?}: the last 3, at once"
        );
        if tr == Tr::Tcp {
            assert_eq!(
                got[0]["op"], "status",
                "the subscription's status comes first"
            );
        }
        for i in 10..13 {
            p.publish(&t, json!(i));
        }
        p.barrier();
        for want in 10..13 {
            assert_eq!(late.next_publish(), want, "{tr:?}: then the live ones");
        }
        assert!(late.msgs().is_empty(), "{tr:?}: nothing else");
        let after = gw.stats();
        assert_eq!(
            counter(&after, "latched_delivered") - counter(&before, "latched_delivered"),
            3
        );
        // rosbridge's `latch: true`: the last message only.
        let t = topic("latch");
        let mut p = Peer::open(&gw, tr);
        p.advertise(&t, json!({"latch":true}));
        for i in 0..5 {
            p.publish(&t, json!(i));
        }
        p.barrier();
        let mut late = Peer::open(&gw, tr.other());
        assert_eq!(ints(&publishes(&late.subscribe(&t, json!({})))), [4]);
        p.publish(&t, json!(5));
        p.barrier();
        assert_eq!(late.next_publish(), 5);
    }
}

#[test]
fn two_latched_publishers_are_replayed_interleaved_in_publish_order() {
    let gw = Gateway::start(&[]);
    let t = topic("two");
    let mut a = Peer::open(&gw, Tr::Tcp);
    let mut b = Peer::open(&gw, Tr::Ws);
    a.advertise(
        &t,
        json!({"qos":{"durability":"transient_local","depth":3}}),
    );
    b.advertise(&t, json!({"latch":true,"qos":{"depth":2}}));
    // Each publish is handled before the next is sent (the barrier), so
    // the publish order across the two connections is this one.
    for (who, i) in [
        (0, 0),
        (1, 1),
        (0, 2),
        (0, 3),
        (1, 4),
        (0, 5),
        (1, 6),
        (0, 7),
    ] {
        let p = if who == 0 { &mut a } else { &mut b };
        p.publish(&t, json!(i));
        p.barrier();
    }
    // a keeps 3, 5, 7; b keeps 4, 6, then 6, 8.
    for (tr, want) in [(Tr::Tcp, [3, 4, 5, 6, 7]), (Tr::Ws, [3, 5, 6, 7, 8])] {
        let mut late = Peer::open(&gw, tr);
        assert_eq!(
            ints(&publishes(&late.subscribe(&t, json!({})))),
            want,
            "{tr:?}"
        );
        if tr == Tr::Tcp {
            b.publish(&t, json!(8));
            b.barrier();
            assert_eq!(late.next_publish(), 8);
        }
        assert!(late.msgs().is_empty());
    }
    let info = topic_info(&gw, &t);
    let kept: Vec<u64> = info["publishers"]
        .as_array()
        .expect("publishers")
        .iter()
        .map(|p| p["latched_messages"].as_u64().expect("count"))
        .collect();
    assert_eq!(kept.iter().sum::<u64>(), 5, "{info}");
}

#[test]
fn the_cache_goes_with_its_publisher() {
    let gw = Gateway::start(&[]);
    for tr in BOTH {
        let t = topic("gone");
        // Unadvertise.
        let mut p = Peer::open(&gw, tr);
        p.advertise(&t, json!({"latch":true}));
        p.publish(&t, json!(1));
        p.send(&json!({"op":"unadvertise","topic":t}));
        p.barrier();
        let mut late = Peer::open(&gw, tr);
        assert!(
            publishes(&late.subscribe(&t, json!({}))).is_empty(),
            "{tr:?}: unadvertised, nothing kept"
        );
        // Disconnect.
        let base = gw.stats();
        let mut p = Peer::open(&gw, tr);
        p.advertise(&t, json!({"latch":true}));
        p.publish(&t, json!(2));
        p.barrier();
        assert_eq!(late.next_publish(), 2, "live");
        let mut check = Peer::open(&gw, tr.other());
        assert_eq!(ints(&publishes(&check.subscribe(&t, json!({})))), [2]);
        drop(p);
        gw.wait_for_stats("the publisher left", |s| {
            counter(s, "publishers") == counter(&base, "publishers")
        });
        let mut later = Peer::open(&gw, tr);
        assert!(
            publishes(&later.subscribe(&t, json!({}))).is_empty(),
            "{tr:?}: disconnected, nothing kept"
        );
        assert!(late.msgs().is_empty() && check.msgs().is_empty());
    }
}

#[test]
fn a_volatile_subscriber_gets_no_cache_but_live_messages() {
    let gw = Gateway::start(&[]);
    for tr in BOTH {
        let t = topic("vol");
        let mut p = Peer::open(&gw, tr.other());
        p.advertise(
            &t,
            json!({"qos":{"durability":"transient_local","depth":5}}),
        );
        for i in 0..5 {
            p.publish(&t, json!(i));
        }
        p.barrier();
        let mut v = Peer::open(&gw, tr);
        let got = v.subscribe(&t, json!({"qos":{"durability":"volatile"}}));
        assert!(publishes(&got).is_empty(), "{tr:?}: {got:?}");
        assert!(warnings(&got).is_empty(), "volatile meets transient local");
        p.publish(&t, json!(5));
        p.barrier();
        assert_eq!(v.next_publish(), 5);
    }
}

// ---------------------------------------------------------------------------------------------
// Depth and reliability for subscribers that do not read
// ---------------------------------------------------------------------------------------------

#[test]
fn depth_drops_exactly_the_oldest_messages_of_a_subscriber_that_does_not_read() {
    const M: u64 = 2000; // 2000 x 4 KB = 8 MB: far more than the socket buffers
    const N: usize = 5;
    let gw = Gateway::start(&[]);
    for tr in BOTH {
        let t = topic("depth");
        let before = gw.stats();
        let mut slow = Peer::slow(&gw, tr);
        slow.subscribe(&t, json!({"queue_length":N}));
        let mut reader = Peer::open(&gw, tr);
        reader.subscribe(&t, json!({}));
        // The reading subscriber gets everything, in order.
        let reading = spawn(move || {
            for i in 0..M {
                let m = reader.next_publish();
                assert_eq!(m["seq"], i, "{tr:?}: the reader misses nothing");
            }
        });
        let mut p = gw.client();
        flood(&mut p, &t, 0, M, 4000);
        p.barrier();
        reading.join().expect("the reader got everything");
        // Now read what reached the slow one: what the socket buffers took
        // while they had room, then what waited in its queue at the end.
        let mut got = Vec::new();
        let dl = deadline(Duration::from_secs(30));
        while got.last() != Some(&(M as i64 - 1)) {
            let v = slow
                .try_next(dl)
                .unwrap_or_else(|| panic!("{tr:?}: the newest never came; got {got:?}"));
            assert_eq!(v["op"], "publish", "{v}");
            got.push(v["msg"]["seq"].as_i64().expect("seq"));
        }
        assert!(slow.msgs().is_empty(), "nothing after the newest");
        assert!(
            got.windows(2).all(|w| w[0] < w[1]),
            "{tr:?}: in order, each once: {got:?}"
        );
        // Each turn queues what it read, and only the newest N of that may
        // wait; once the socket buffers were full, nothing was written: the
        // end is the newest N, or the newest N - 1 behind a message the
        // gateway had partly written when the socket filled (an old one).
        let newest: Vec<i64> = got.iter().copied().filter(|&s| s >= M as i64 / 2).collect();
        let n = N as i64;
        let m = M as i64;
        assert!(
            newest == (m - n..m).collect::<Vec<_>>()
                || newest == (m - n + 1..m).collect::<Vec<_>>(),
            "{tr:?}: the newest {N} (or {}) kept: {got:?}",
            N - 1
        );
        let after = gw.stats();
        let depth_dropped = counter(&after, "depth_dropped") - counter(&before, "depth_dropped");
        let dropped = counter(&after, "dropped") - counter(&before, "dropped");
        assert_eq!(
            depth_dropped,
            M - got.len() as u64,
            "{tr:?}: every drop counted"
        );
        assert_eq!(
            dropped, depth_dropped,
            "{tr:?}: depth drops are drops, and the only ones"
        );
    }
}

#[test]
fn a_reliable_subscriber_is_never_shed_but_warned_then_closed() {
    let gw = Gateway::start(&["--max-queue-bytes", "65536"]);
    let mut stats = gw.client();
    for tr in BOTH {
        let t = topic("reliable");
        let base = stats.stats();
        let mut slow = Peer::slow(&gw, tr);
        slow.subscribe(&t, json!({"qos":{"reliability":"reliable"}}));
        let mut p = gw.client();
        // Publish until the gateway warns (past 64 KB waiting).
        let mut sent = 0;
        loop {
            flood(&mut p, &t, sent, 2, 4000);
            sent += 2;
            let s = stats.stats();
            if counter(&s, "reliable_warnings") > counter(&base, "reliable_warnings") {
                assert_eq!(
                    counter(&s, "closes.reliable_overflow"),
                    counter(&base, "closes.reliable_overflow")
                );
                break;
            }
            assert!(sent < 4000, "{tr:?}: never warned");
        }
        // It reads now: every message, none shed, and the warning.
        let mut seqs = Vec::new();
        let mut warned = Vec::new();
        let dl = deadline(Duration::from_secs(20));
        while seqs.len() < sent as usize {
            let v = slow.try_next(dl).expect("every message comes");
            match v["op"].as_str() {
                Some("publish") => seqs.push(v["msg"]["seq"].as_u64().expect("seq")),
                Some("status") => warned.push(v),
                _ => panic!("{v}"),
            }
        }
        warned.extend(slow.barrier());
        assert_eq!(seqs, (0..sent).collect::<Vec<_>>(), "{tr:?}: nothing shed");
        assert_eq!(warned.len(), 1, "{warned:?}");
        assert_eq!(warned[0]["level"], "warning");
        assert!(
            warned[0]["msg"]
                .as_str()
                .is_some_and(|m| m.contains("reliable")),
            "{warned:?}"
        );
        // It stops reading again: closed past twice the limit.
        let from = sent;
        loop {
            flood(&mut p, &t, sent, 4, 4000);
            sent += 4;
            let s = stats.stats();
            if counter(&s, "closes.reliable_overflow") > counter(&base, "closes.reliable_overflow")
            {
                break;
            }
            assert!(sent < from + 4000, "{tr:?}: never closed");
        }
        let rest: Vec<u64> = slow
            .until_closed(Duration::from_secs(20))
            .iter()
            .filter(|v| v["op"] == "publish")
            .map(|v| v["msg"]["seq"].as_u64().expect("seq"))
            .collect();
        assert!(
            rest.iter().enumerate().all(|(i, &s)| s == from + i as u64),
            "{tr:?}: what came before the close has no gap: {rest:?}"
        );
        let s = stats.stats();
        assert_eq!(
            counter(&s, "dropped"),
            counter(&base, "dropped"),
            "{tr:?}: never shed"
        );
        assert_eq!(
            counter(&s, "closes.reliable_overflow") - counter(&base, "closes.reliable_overflow"),
            1
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Throttling
// ---------------------------------------------------------------------------------------------

#[test]
fn throttle_sends_the_first_at_once_and_the_newest_by_the_intervals_end() {
    let gw = Gateway::start(&[]);
    for tr in BOTH {
        let t = topic("throttle");
        let before = gw.stats();
        let mut sub = Peer::open(&gw, tr);
        sub.subscribe(&t, json!({"throttle_rate":1000}));
        let mut p = Peer::open(&gw, Tr::Tcp);
        let t0 = Instant::now();
        p.publish(&t, json!(0));
        assert_eq!(sub.next_publish(), 0);
        let first = t0.elapsed();
        assert!(
            first < ms(800),
            "{tr:?}: the first at once, not after {first:?}"
        );
        for i in 1..10 {
            p.publish(&t, json!(i));
        }
        p.barrier();
        assert_eq!(sub.next_publish(), 9, "{tr:?}: the interval's newest");
        let second = t0.elapsed();
        assert!(
            second >= ms(990) && second < ms(3_000),
            "{tr:?}: by the interval's end (1 s after the first), not {second:?}"
        );
        assert!(sub.msgs().is_empty(), "{tr:?}: one per interval");
        let after = gw.stats();
        assert_eq!(
            counter(&after, "throttle_dropped") - counter(&before, "throttle_dropped"),
            8,
            "{tr:?}: 1..=8 were skipped"
        );
        let info = topic_info(&gw, &t);
        assert_eq!(info["subscribers"][0]["throttle_ms"], 1000, "{info}");
    }
}

// ---------------------------------------------------------------------------------------------
// Compatibility
// ---------------------------------------------------------------------------------------------

/// The pair (publisher offer, subscriber request) is incompatible: both get
/// a warning naming the topic and both QoS; nothing flows; it is counted
/// and listed.
fn check_mismatch(gw: &Gateway, tr: Tr, offer: Value, request: Value, why: &str, sub_first: bool) {
    let t = topic("mismatch");
    let before = gw.stats();
    let mut p = Peer::open(gw, tr.other());
    let mut s = Peer::open(gw, tr);
    let (pw, sw) = if sub_first {
        let sw = warnings(&s.subscribe(&t, json!({ "qos": request })));
        assert!(sw.is_empty(), "alone, no warning: {sw:?}");
        let pw = warnings(&p.advertise(&t, json!({ "qos": offer })));
        (pw, s.warnings())
    } else {
        let pw = warnings(&p.advertise(&t, json!({ "qos": offer })));
        assert!(pw.is_empty(), "alone, no warning: {pw:?}");
        let sw = warnings(&s.subscribe(&t, json!({ "qos": request })));
        (p.warnings(), sw)
    };
    assert_eq!(pw.len(), 1, "{tr:?} publisher: {pw:?}");
    assert_eq!(sw.len(), 1, "{tr:?} subscriber: {sw:?}");
    assert_eq!(pw[0]["msg"], sw[0]["msg"], "both told the same");
    let msg = pw[0]["msg"].as_str().expect("text");
    assert!(msg.contains(&t) && msg.contains(why), "{msg}");
    for i in 0..3 {
        p.publish(&t, json!(i));
    }
    p.barrier();
    assert!(s.msgs().is_empty(), "{tr:?}: nothing flows between them");
    let after = gw.stats();
    assert_eq!(
        counter(&after, "qos_incompatible") - counter(&before, "qos_incompatible"),
        1
    );
    assert_eq!(
        counter(&after, "qos_skipped") - counter(&before, "qos_skipped"),
        3
    );
    let info = topic_info(gw, &t);
    let bad = info["incompatible"].as_array().expect("incompatible");
    assert_eq!(bad.len(), 1, "{info}");
    assert!(
        bad[0]["why"].as_str().is_some_and(|w| w.contains(why)),
        "{info}"
    );
    // A subscriber that states nothing still gets everything.
    let mut plain = Peer::open(gw, tr);
    assert!(warnings(&plain.subscribe(&t, json!({}))).is_empty());
    p.publish(&t, json!(3));
    p.barrier();
    assert_eq!(plain.next_publish(), 3);
    assert!(s.msgs().is_empty());
}

#[test]
fn reliable_request_and_best_effort_offer_warn_both_sides_and_exchange_nothing() {
    let gw = Gateway::start(&[]);
    for tr in BOTH {
        for sub_first in [true, false] {
            check_mismatch(
                &gw,
                tr,
                json!({"reliability":"best_effort"}),
                json!({"reliability":"reliable"}),
                "reliability",
                sub_first,
            );
        }
    }
}

#[test]
fn transient_local_request_and_volatile_offer_warn_both_sides_and_exchange_nothing() {
    let gw = Gateway::start(&[]);
    for tr in BOTH {
        for sub_first in [true, false] {
            check_mismatch(
                &gw,
                tr,
                json!({"durability":"volatile"}),
                json!({"durability":"transient_local"}),
                "durability",
                sub_first,
            );
        }
    }
}

#[test]
fn registrations_that_state_nothing_get_everything() {
    let gw = Gateway::start(&[]);
    let t = topic("plain");
    let mut latched = Peer::open(&gw, Tr::Tcp);
    latched.advertise(
        &t,
        json!({"qos":{"reliability":"reliable","durability":"transient_local","depth":2}}),
    );
    for i in 0..3 {
        latched.publish(&t, json!(i));
    }
    latched.barrier();
    // Plain subscribers on both transports, and a demanding one.
    let mut subs = Vec::new();
    for (tr, qos) in [
        (Tr::Tcp, json!({})),
        (Tr::Ws, json!({})),
        (
            Tr::Ws,
            json!({"qos":{"reliability":"reliable","durability":"transient_local"}}),
        ),
    ] {
        let mut s = Peer::open(&gw, tr);
        let got = s.subscribe(&t, qos);
        assert_eq!(ints(&publishes(&got)), [1, 2], "{tr:?}: the cache");
        assert!(warnings(&got).is_empty(), "{got:?}");
        subs.push(s);
    }
    // A publisher that states nothing, and one that never advertised.
    let mut plain = Peer::open(&gw, Tr::Ws);
    assert!(warnings(&plain.advertise(&t, json!({}))).is_empty());
    let mut anon = Peer::open(&gw, Tr::Tcp);
    plain.publish(&t, json!(3));
    plain.barrier();
    anon.publish(&t, json!(4));
    anon.barrier();
    latched.publish(&t, json!(5));
    latched.barrier();
    for s in &mut subs {
        assert_eq!(ints(&s.msgs()), [3, 4, 5]);
        assert!(s.warnings().is_empty());
    }
    assert_eq!(counter(&gw.stats(), "qos_incompatible"), 0);
}

// ---------------------------------------------------------------------------------------------
// Peers
// ---------------------------------------------------------------------------------------------

/// The subscriber counts among `frames`.
fn peer_counts(frames: &[Value], t: &str) -> Vec<u64> {
    frames
        .iter()
        .filter(|v| v["op"] == "peers")
        .map(|v| {
            assert_eq!(v["topic"], t, "{v}");
            v["subscribers"].as_u64().expect("count")
        })
        .collect()
}

#[test]
fn a_publisher_that_asks_is_told_its_subscriber_count() {
    let gw = Gateway::start(&[]);
    for tr in BOTH {
        let t = topic("peers");
        let mut p = Peer::open(&gw, tr);
        let got = p.advertise(&t, json!({"peers":true}));
        assert_eq!(peer_counts(&got, &t), [0], "{tr:?}: told once at advertise");
        let mut a = Peer::open(&gw, Tr::Tcp);
        a.subscribe(&t, json!({}));
        assert_eq!(peer_counts(&p.barrier(), &t), [1]);
        let mut b = Peer::open(&gw, Tr::Ws);
        b.subscribe(&t, json!({}));
        assert_eq!(peer_counts(&p.barrier(), &t), [2]);
        a.subscribe(&t, json!({}));
        assert!(
            peer_counts(&p.barrier(), &t).is_empty(),
            "no change, no message"
        );
        a.send(&json!({"op":"unsubscribe","topic":t}));
        a.barrier();
        assert_eq!(peer_counts(&p.barrier(), &t), [1]);
        drop(b);
        let v = p.next();
        assert_eq!(peer_counts(&[v], &t), [0], "{tr:?}: a disconnect counts");
        // A plain advertiser is not told anything.
        let mut quiet = Peer::open(&gw, tr);
        assert!(peer_counts(&quiet.advertise(&t, json!({})), &t).is_empty());
        a.subscribe(&t, json!({}));
        assert_eq!(peer_counts(&p.barrier(), &t), [1]);
        assert!(peer_counts(&quiet.barrier(), &t).is_empty());
        a.send(&json!({"op":"unsubscribe","topic":t}));
        a.barrier();
        assert_eq!(peer_counts(&p.barrier(), &t), [0]);
    }
    let s = gw.stats();
    assert_eq!(counter(&s, "peer_notifications"), 2 * 7, "each one counted");
}

#[test]
fn a_subscriber_the_publisher_cannot_serve_is_not_counted() {
    let gw = Gateway::start(&[]);
    for tr in BOTH {
        let t = topic("peers_bad");
        let mut p = Peer::open(&gw, tr);
        let got = p.advertise(
            &t,
            json!({"peers":true,"qos":{"reliability":"best_effort"}}),
        );
        assert_eq!(peer_counts(&got, &t), [0]);
        let mut picky = Peer::open(&gw, tr.other());
        let w = warnings(&picky.subscribe(&t, json!({"qos":{"reliability":"reliable"}})));
        assert_eq!(w.len(), 1);
        let got = p.barrier();
        assert_eq!(warnings(&got).len(), 1, "{got:?}");
        assert!(peer_counts(&got, &t).is_empty(), "{tr:?}: still 0: {got:?}");
        let mut fine = Peer::open(&gw, tr.other());
        fine.subscribe(&t, json!({"qos":{"reliability":"best_effort"}}));
        assert_eq!(peer_counts(&p.barrier(), &t), [1]);
        // The picky one changes its mind: it counts now.
        picky.subscribe(&t, json!({}));
        assert_eq!(peer_counts(&p.barrier(), &t), [2]);
    }
}

/// Whether process `pid` is stopped (SIGSTOP took effect).
fn stopped(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('T'))
        })
        .unwrap_or(false)
}

/// Runs `f` while the gateway is stopped, so that everything `f` sends
/// reaches it at once when it resumes: a crowd arriving in one loop turn.
fn while_stopped(gw: &Gateway, f: impl FnOnce()) {
    gw.signal(libc::SIGSTOP);
    let dl = deadline(REPLY);
    while !stopped(gw.pid()) {
        assert!(Instant::now() < dl, "the gateway did not stop");
        std::thread::sleep(ms(1));
    }
    f();
    gw.signal(libc::SIGCONT);
}

#[test]
fn a_crowd_arriving_at_once_makes_far_fewer_notifications_than_subscribers() {
    const CROWD: usize = 300;
    // One notification per loop turn at most: the crowd's 300 changes are
    // read in a few turns (each turn's reads are bounded, and on a loaded
    // machine the kernel hands the closes over in more batches), never one
    // per subscriber.
    const MAX_NOTES: usize = 10;
    let gw = Gateway::start(&[]);
    let t = topic("crowd");
    let mut p = Peer::open(&gw, Tr::Tcp);
    assert_eq!(
        peer_counts(&p.advertise(&t, json!({"peers":true})), &t),
        [0]
    );
    let mut crowd: Vec<Client> = (0..CROWD)
        .map(|_| {
            let mut c = gw.client();
            c.barrier(); // its opening is complete
            c
        })
        .collect();
    let line = format!(r#"{{"op":"subscribe","topic":"{t}","type":"test/T"}}"#);
    while_stopped(&gw, || {
        for c in &mut crowd {
            c.send_line(&line);
        }
    });
    let count_until = |p: &mut Peer, want: u64| -> usize {
        let mut notes = 0;
        let dl = deadline(Duration::from_secs(10));
        loop {
            let v = p.try_next(dl).expect("the final count comes");
            let n = peer_counts(&[v], &t);
            notes += n.len();
            if n.last() == Some(&want) {
                return notes;
            }
        }
    };
    let notes = count_until(&mut p, CROWD as u64);
    assert!(
        notes <= MAX_NOTES,
        "{notes} notifications for {CROWD} subscribers"
    );
    assert!(
        peer_counts(&p.barrier(), &t).is_empty(),
        "the count is final"
    );
    // The crowd leaves at once.
    while_stopped(&gw, || crowd.clear());
    let notes = count_until(&mut p, 0);
    assert!(
        notes <= MAX_NOTES,
        "{notes} notifications for {CROWD} leaving"
    );
    assert!(peer_counts(&p.barrier(), &t).is_empty());
}

// ---------------------------------------------------------------------------------------------
// Calls that wait for a provider
// ---------------------------------------------------------------------------------------------

#[test]
fn waiting_calls_are_released_in_order_when_a_provider_appears() {
    let gw = Gateway::start(&[]);
    for tr in BOTH {
        let srv = format!("/qos/late_{}", uniq());
        let mut c1 = Peer::open(&gw, Tr::Tcp);
        let mut c2 = Peer::open(&gw, Tr::Ws);
        for (c, id, n) in [(0, "a", 1), (1, "b", 2), (0, "c", 3)] {
            let c = if c == 0 { &mut c1 } else { &mut c2 };
            c.send(&json!({"op":"call_service","service":srv,"id":id,"args":{"n":n},"wait":true,"timeout":30}));
            assert!(c.barrier().is_empty(), "it waits");
        }
        assert_eq!(counter(&gw.stats(), "calls_waiting"), 3);
        let mut prov = Peer::open(&gw, tr);
        prov.send(&json!({"op":"advertise_service","service":srv,"type":"test/S"}));
        let mut fwd = Vec::new();
        for _ in 0..3 {
            let v = loop {
                let v = prov.next();
                if v["op"] == "call_service" {
                    break v;
                }
            };
            fwd.push(v);
        }
        let ns: Vec<Value> = fwd.iter().map(|f| f["args"]["n"].clone()).collect();
        assert_eq!(
            ns,
            [json!(1), json!(2), json!(3)],
            "{tr:?}: in the order they came"
        );
        for f in &fwd {
            prov.send(&json!({"op":"service_response","service":srv,"id":f["id"],"values":{"n":f["args"]["n"]},"result":true}));
        }
        for (c, id, n) in [(0, "a", 1), (0, "c", 3), (1, "b", 2)] {
            let c = if c == 0 { &mut c1 } else { &mut c2 };
            let r = c.next();
            assert_eq!(r["op"], "service_response", "{r}");
            assert_eq!(
                (r["id"].clone(), r["values"]["n"].clone()),
                (json!(id), json!(n))
            );
            assert_eq!(r["result"], true);
        }
        let s = gw.stats();
        assert_eq!(counter(&s, "calls_waiting"), 0);
    }
    assert_eq!(counter(&gw.stats(), "calls_waited"), 6);
}

#[test]
fn a_waiting_call_fails_at_its_deadline_with_the_reason() {
    let gw = Gateway::start(&[]);
    for tr in BOTH {
        let srv = format!("/qos/never_{}", uniq());
        let mut c = Peer::open(&gw, tr);
        let t0 = Instant::now();
        c.send(&json!({"op":"call_service","service":srv,"id":"w","args":{},"wait":true,"timeout":0.5}));
        let r = c.next();
        let waited = t0.elapsed();
        assert_eq!(r["op"], "service_response", "{r}");
        assert_eq!(
            (r["id"].clone(), r["result"].clone()),
            (json!("w"), json!(false))
        );
        assert_eq!(
            r["values"],
            format!("no provider for service {srv} appeared in time")
        );
        assert!(
            waited >= ms(490) && waited < ms(3_000),
            "{tr:?}: at its 0.5 s deadline, not after {waited:?}"
        );
        // Without "wait" it fails at once.
        c.send(&json!({"op":"call_service","service":srv,"id":"x","args":{}}));
        assert_eq!(c.next()["result"], false);
    }
    let s = gw.stats();
    assert_eq!(counter(&s, "calls_waiting"), 0);
    assert_eq!(counter(&s, "calls_waited"), 2);
}

#[test]
fn a_waiting_goal_is_released_when_an_action_server_appears() {
    let gw = Gateway::start(&[]);
    for tr in BOTH {
        let action = format!("/qos/fib_{}", uniq());
        let mut caller = Peer::open(&gw, tr);
        caller.send(&json!({"op":"send_action_goal","action":action,"action_type":"test/Fib","id":"g1","args":{"order":3},"wait":true}));
        assert!(caller.barrier().is_empty(), "it waits");
        let mut server = Peer::open(&gw, tr.other());
        server.send(&json!({"op":"advertise_action","action":action,"type":"test/Fib"}));
        let goal = loop {
            let v = server.next();
            if v["op"] == "send_action_goal" {
                break v;
            }
        };
        assert_eq!(goal["args"], json!({"order":3}));
        assert_eq!(goal["action_type"], "test/Fib");
        server.send(&json!({"op":"action_result","action":action,"id":goal["id"],"values":{"sequence":[0,1,1,2]},"status":4,"result":true}));
        let r = caller.next();
        assert_eq!(r["op"], "action_result", "{r}");
        assert_eq!(
            (r["id"].clone(), r["status"].clone()),
            (json!("g1"), json!(4))
        );
        assert_eq!(r["values"]["sequence"], json!([0, 1, 1, 2]));
        // And one that nobody serves fails at its deadline, status 0.
        let other = format!("/qos/none_{}", uniq());
        caller.send(&json!({"op":"send_action_goal","action":other,"action_type":"test/Fib","id":"g2","args":{},"wait":true,"timeout":0.3}));
        let r = caller.next();
        assert_eq!(
            (r["id"].clone(), r["status"].clone()),
            (json!("g2"), json!(0))
        );
        assert_eq!(
            r["values"],
            format!("no server for action {other} appeared in time")
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Nothing is left behind
// ---------------------------------------------------------------------------------------------

#[test]
fn everything_held_for_qos_is_released_when_everyone_leaves() {
    let gw = Gateway::start(&[]);
    let base = gw.stats();
    let t = topic("ledger");
    {
        let mut latched = Peer::open(&gw, Tr::Tcp);
        latched.advertise(
            &t,
            json!({"peers":true,"qos":{"durability":"transient_local","depth":4}}),
        );
        let mut subs: Vec<Peer> = Vec::new();
        for (tr, extra) in [
            (Tr::Tcp, json!({})),
            (Tr::Ws, json!({})),
            (Tr::Tcp, json!({"throttle_rate":50})),
            (Tr::Ws, json!({"throttle_rate":50,"queue_length":2})),
            (Tr::Tcp, json!({"qos":{"reliability":"reliable"}})),
        ] {
            let mut s = Peer::open(&gw, tr);
            s.subscribe(&t, extra);
            subs.push(s);
        }
        let mut caller = Peer::open(&gw, Tr::Ws);
        caller.send(&json!({"op":"call_service","service":"/qos/nobody","id":1,"args":{},"wait":true,"timeout":60}));
        caller.barrier();
        let big = "m".repeat(20_000);
        for i in 0..30 {
            latched.publish(&t, json!({"seq":i,"pad":big}));
        }
        latched.barrier();
        // The unthrottled ones read everything; the others leave unread.
        for s in subs.iter_mut().take(2) {
            for i in 0..30 {
                assert_eq!(s.next_publish()["seq"], i);
            }
        }
        let s = gw.stats();
        assert!(
            counter(&s, "memory_registrations_bytes") > 80_000,
            "the cache is counted: {s}"
        );
        assert_eq!(counter(&s, "calls_waiting"), 1);
    }
    let s = gw.wait_for_stats("everyone left", |s| {
        counter(s, "connections_open") == counter(&base, "connections_open")
    });
    for k in [
        "memory_bytes",
        "memory_frames_bytes",
        "memory_entries_bytes",
        "memory_registrations_bytes",
        "memory_calls_bytes",
        "queued_bytes",
        "calls_waiting",
        "topics",
        "subscriptions",
        "publishers",
    ] {
        assert_eq!(counter(&s, k), counter(&base, k), "{k}: {s}");
    }
}
