//! QoS on the fake clock (docs/protocol.md, "QoS"): throttle intervals to
//! the millisecond, exactly which messages a depth drops, the peer-count
//! invariant after every turn, waiting-call deadlines, and every table,
//! gauge and ledger back to zero once everyone left.

use serde_json::json;

use super::*;

impl T {
    /// The `msg` of every publish queued for `key` (other lines skipped).
    fn msgs(&mut self, key: u32) -> Vec<Value> {
        self.recv(key)
            .into_iter()
            .filter(|v| v["op"] == "publish")
            .map(|v| v["msg"].clone())
            .collect()
    }

    /// The integer messages queued for `key`.
    fn ints(&mut self, key: u32) -> Vec<i64> {
        self.msgs(key)
            .iter()
            .map(|m| m.as_i64().expect("integer message"))
            .collect()
    }

    fn publish(&mut self, key: u32, topic: &str, msg: i64) {
        self.send(
            key,
            &format!(r#"{{"op":"publish","topic":"{topic}","msg":{msg}}}"#),
        );
    }

    fn counter(&self, c: Counter) -> u64 {
        self.hub.counters().get(c)
    }

    fn close_now(&mut self, key: u32) {
        self.hub.close(key, CloseReason::PeerClosed, self.now);
        self.free_closed();
    }

    /// Everything the hub holds for clients is gone.
    fn assert_empty(&self) {
        let g = self.hub.inspect().gauges();
        for gauge in [
            Gauge::ConnectionsOpen,
            Gauge::Topics,
            Gauge::Subscriptions,
            Gauge::Publishers,
            Gauge::Services,
            Gauge::Actions,
            Gauge::CallsPending,
            Gauge::CallsWaiting,
            Gauge::GoalsPending,
            Gauge::QueuedBytes,
        ] {
            assert_eq!(g.get(gauge), 0, "{gauge:?} after everyone left");
        }
        assert_eq!(
            self.hub.memory(),
            crate::memory::MemoryUse::default(),
            "the memory ledger after everyone left"
        );
        assert_eq!(self.hub.memory().total(), 0);
        assert_eq!(self.hub.inspect().registry().cache_bytes(), 0);
    }
}

#[test]
fn throttle_sends_the_first_at_once_and_the_newest_at_the_interval_end() {
    let mut t = T::new(Limits::default());
    let sub = t.open();
    let all = t.open();
    let p = t.open();
    t.send(
        sub,
        r#"{"op":"subscribe","topic":"/f","type":"T","throttle_rate":100}"#,
    );
    t.send(all, r#"{"op":"subscribe","topic":"/f","type":"T"}"#);
    t.recv(sub);
    t.recv(all);
    // t = 0: the first goes at once.
    t.publish(p, "/f", 0);
    assert_eq!(t.ints(sub), [0]);
    // 10 and 50 ms: held; the newer replaces the older.
    t.advance(10);
    t.publish(p, "/f", 1);
    t.advance(40);
    t.publish(p, "/f", 2);
    assert!(t.ints(sub).is_empty(), "within the interval nothing goes");
    t.advance(49);
    assert!(t.ints(sub).is_empty(), "99 ms: still within the interval");
    t.advance(1);
    assert_eq!(t.ints(sub), [2], "100 ms: the interval's newest");
    assert_eq!(t.counter(Counter::ThrottleDropped), 1, "1 was skipped");
    // 150 ms: within the interval that began with the flush at 100.
    t.advance(50);
    t.publish(p, "/f", 3);
    assert!(t.ints(sub).is_empty());
    t.advance(49);
    assert!(t.ints(sub).is_empty(), "199 ms");
    t.advance(1);
    assert_eq!(t.ints(sub), [3], "200 ms");
    // A quiet interval: nothing is sent for nothing.
    t.advance(300);
    assert!(t.ints(sub).is_empty());
    // 500 ms: the last send was at 200, so this one goes at once...
    t.publish(p, "/f", 4);
    assert_eq!(t.ints(sub), [4]);
    // ...and one exactly an interval later goes at once too.
    t.advance(100);
    t.publish(p, "/f", 5);
    assert_eq!(t.ints(sub), [5]);
    // A burst of 20 within one interval: one at its end, 19 skipped.
    for i in 6..26 {
        t.advance(2);
        t.publish(p, "/f", i);
    }
    assert!(t.ints(sub).is_empty());
    t.advance(59);
    assert!(t.ints(sub).is_empty(), "99 ms after 5");
    t.advance(1);
    assert_eq!(t.ints(sub), [25]);
    assert_eq!(t.counter(Counter::ThrottleDropped), 1 + 19);
    // The unthrottled subscriber got everything, in order.
    assert_eq!(t.ints(all), (0..26).collect::<Vec<_>>());
    // A throttle_rate under the minimum is the minimum (10 ms).
    let fast = t.open();
    t.send(
        fast,
        r#"{"op":"subscribe","topic":"/g","type":"T","throttle_rate":1}"#,
    );
    t.recv(fast);
    t.publish(p, "/g", 0);
    t.advance(1);
    t.publish(p, "/g", 1);
    assert_eq!(t.ints(fast), [0]);
    t.advance(8);
    assert!(t.ints(fast).is_empty(), "9 ms");
    t.advance(1);
    assert_eq!(t.ints(fast), [1], "10 ms");
}

#[test]
fn throttle_state_does_not_outlive_its_subscription() {
    let mut t = T::new(Limits::default());
    let sub = t.open();
    let p = t.open();
    let throttled = r#"{"op":"subscribe","topic":"/f","type":"T","throttle_rate":100}"#;
    t.send(sub, throttled);
    t.recv(sub);
    t.publish(p, "/f", 0);
    t.advance(10);
    t.publish(p, "/f", 1); // held, flush due at 100 ms
    t.send(sub, r#"{"op":"unsubscribe","topic":"/f"}"#);
    t.advance(20);
    t.send(sub, throttled); // a new subscription at 30 ms
    t.recv(sub);
    t.publish(p, "/f", 2);
    assert_eq!(
        t.ints(sub),
        [2],
        "the new subscription's first goes at once"
    );
    t.advance(10);
    t.publish(p, "/f", 3); // held, due at 130 ms
    t.advance(60);
    assert!(
        t.ints(sub).is_empty(),
        "100 ms: the old subscription's timer must not flush the new one early"
    );
    t.advance(30);
    assert_eq!(t.ints(sub), [3], "130 ms: the new interval's end");
}

#[test]
fn depth_drops_exactly_the_oldest_waiting_messages() {
    let mut t = T::new(Limits::default());
    let slow = t.open();
    let reader = t.open();
    let p = t.open();
    t.send(
        slow,
        r#"{"op":"subscribe","topic":"/d","type":"T","queue_length":3}"#,
    );
    t.send(reader, r#"{"op":"subscribe","topic":"/d","type":"T"}"#);
    t.recv(slow);
    t.recv(reader);
    for i in 0..10 {
        t.publish(p, "/d", i);
    }
    assert_eq!(
        t.ints(slow),
        [7, 8, 9],
        "the last 3 wait, the 7 oldest went"
    );
    assert_eq!(t.ints(reader), (0..10).collect::<Vec<_>>());
    assert_eq!(t.counter(Counter::DepthDropped), 7);
    assert_eq!(t.counter(Counter::Dropped), 7, "depth drops count as drops");
    // A partly written message is never cut: it stays, and the depth
    // drops the oldest whole ones behind it.
    for i in 10..12 {
        t.publish(p, "/d", i);
    }
    t.hub.wrote(slow, 5, t.now);
    for i in 12..20 {
        t.publish(p, "/d", i);
    }
    let mut bytes = Vec::new();
    while let Some(out) = t.hub.out(slow).filter(|o| !o.is_empty()) {
        let mut iov = [IoSlice::new(&[]); MAX_IOVECS];
        let n = out.fill(&mut iov, usize::MAX);
        let w: usize = iov[..n].iter().map(|s| s.len()).sum();
        for s in &iov[..n] {
            bytes.extend_from_slice(s);
        }
        t.hub.wrote(slow, w, t.now);
    }
    let text = String::from_utf8(bytes).expect("UTF-8");
    let tail: Vec<i64> = text
        .lines()
        .skip(1) // the head, whose first 5 bytes were written before
        .map(|l| {
            serde_json::from_str::<Value>(l).expect("JSON")["msg"]
                .as_i64()
                .expect("int")
        })
        .collect();
    assert!(
        text.starts_with(r#":"publish","topic":"/d","msg":10}"#),
        "{text}"
    );
    assert_eq!(
        tail,
        [17, 18, 19],
        "the head is being delivered: it does not count among the 3 waiting"
    );
    assert_eq!(t.counter(Counter::DepthDropped), 7 + 6, "11..=16 dropped");
    // The qos object's depth wins over queue_length.
    let q = t.open();
    t.send(
        q,
        r#"{"op":"subscribe","topic":"/e","type":"T","queue_length":5,"qos":{"depth":2}}"#,
    );
    t.recv(q);
    for i in 0..6 {
        t.publish(p, "/e", i);
    }
    assert_eq!(t.ints(q), [4, 5]);
    // queue_length 0 (roslib's default) is no depth.
    let z = t.open();
    t.send(
        z,
        r#"{"op":"subscribe","topic":"/z","type":"T","queue_length":0}"#,
    );
    t.recv(z);
    for i in 0..50 {
        t.publish(p, "/z", i);
    }
    assert_eq!(t.ints(z).len(), 50);
}

#[test]
fn latched_messages_come_first_in_publish_order_and_go_with_their_publisher() {
    let mut t = T::new(Limits::default());
    let a = t.open();
    let b = t.open();
    t.send(
        a,
        r#"{"op":"advertise","topic":"/l","type":"T","qos":{"durability":"transient_local","depth":3}}"#,
    );
    t.send(
        b,
        r#"{"op":"advertise","topic":"/l","type":"T","latch":true}"#,
    );
    for (who, i) in [(a, 1), (b, 2), (a, 3), (a, 4), (b, 5), (a, 6)] {
        t.publish(who, "/l", i);
    }
    t.recv(a);
    t.recv(b);
    // a keeps 3, 4, 6; b keeps 5: interleaved by publish order.
    let late = t.open();
    t.send(late, r#"{"op":"subscribe","topic":"/l","type":"T"}"#);
    t.publish(a, "/l", 7);
    let got = t.recv(late);
    assert_eq!(got[0]["op"], "status");
    let ints: Vec<i64> = got[1..]
        .iter()
        .map(|v| v["msg"].as_i64().unwrap())
        .collect();
    assert_eq!(ints, [3, 4, 5, 6, 7]);
    assert_eq!(t.counter(Counter::LatchedDelivered), 4);
    assert_eq!(
        t.counter(Counter::LatchEvicted),
        3,
        "1, 2, then 3 were evicted"
    );
    // A volatile request gets no history; a second subscribe of the same
    // connection is no new member and gets none either.
    let vol = t.open();
    t.send(
        vol,
        r#"{"op":"subscribe","topic":"/l","type":"T","qos":{"durability":"volatile"}}"#,
    );
    assert!(t.ints(vol).is_empty());
    t.send(late, r#"{"op":"subscribe","topic":"/l","type":"T"}"#);
    assert!(t.ints(late).is_empty());
    // b unadvertises: its cache goes; a disconnects: all is gone.
    t.send(b, r#"{"op":"unadvertise","topic":"/l"}"#);
    let late2 = t.open();
    t.send(late2, r#"{"op":"subscribe","topic":"/l","type":"T"}"#);
    assert_eq!(t.ints(late2), [4, 6, 7]);
    t.close_now(a);
    let late3 = t.open();
    t.send(late3, r#"{"op":"subscribe","topic":"/l","type":"T"}"#);
    assert!(t.ints(late3).is_empty());
    assert_eq!(t.hub.inspect().registry().cache_bytes(), 0);
    for k in [b, late, vol, late2, late3] {
        t.close_now(k);
    }
    t.assert_empty();
}

/// The publisher's last notified count, from the lines it received.
fn last_peers(lines: &[Value], seen: &mut Option<u64>) -> usize {
    let mut n = 0;
    for v in lines.iter().filter(|v| v["op"] == "peers") {
        let c = v["subscribers"].as_u64().expect("count");
        assert_ne!(Some(c), *seen, "a notification without a change: {v}");
        *seen = Some(c);
        n += 1;
    }
    n
}

#[test]
fn a_publishers_last_notified_count_is_the_real_count_after_every_turn() {
    let mut t = T::new(Limits::default());
    // Two watching publishers: one reliable (meets everyone), one best
    // effort (does not meet reliable requests).
    let rel = t.open();
    let be = t.open();
    t.send(
        rel,
        r#"{"op":"advertise","topic":"/p","type":"T","peers":true,"qos":{"reliability":"reliable"}}"#,
    );
    t.send(
        be,
        r#"{"op":"advertise","topic":"/p","type":"T","peers":true,"qos":{"reliability":"best_effort"}}"#,
    );
    t.advance(0);
    let (mut seen_rel, mut seen_be) = (None, None);
    last_peers(&t.recv(rel), &mut seen_rel);
    last_peers(&t.recv(be), &mut seen_be);
    assert_eq!(
        (seen_rel, seen_be),
        (Some(0), Some(0)),
        "told once at advertise"
    );
    // Model: connection -> Some(reliable?) while subscribed.
    let mut subs: Vec<(u32, Option<bool>)> = Vec::new();
    let mut rng: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut notes = 0;
    for turn in 0..400 {
        // A few operations per turn, then the turn ends.
        for _ in 0..(next() % 4) {
            let r = next();
            match r % 7 {
                0 | 1 if subs.len() < 12 => {
                    let c = t.open();
                    subs.push((c, None));
                }
                2 | 3 if !subs.is_empty() => {
                    let i = (next() as usize) % subs.len();
                    let reliable = next() % 3 == 0;
                    let q = if reliable {
                        r#","qos":{"reliability":"reliable"}"#
                    } else if next() % 2 == 0 {
                        r#","qos":{"reliability":"best_effort"}"#
                    } else {
                        ""
                    };
                    let c = subs[i].0;
                    t.send(
                        c,
                        &format!(r#"{{"op":"subscribe","topic":"/p","type":"T"{q}}}"#),
                    );
                    subs[i].1 = Some(reliable);
                }
                4 if !subs.is_empty() => {
                    let i = (next() as usize) % subs.len();
                    let c = subs[i].0;
                    t.send(c, r#"{"op":"unsubscribe","topic":"/p"}"#);
                    subs[i].1 = None;
                }
                5 if !subs.is_empty() => {
                    let i = (next() as usize) % subs.len();
                    let (c, _) = subs.swap_remove(i);
                    t.hub.close(c, CloseReason::PeerClosed, t.now);
                }
                _ => {}
            }
        }
        t.advance(1);
        for &(c, _) in &subs {
            t.recv(c);
        }
        notes += last_peers(&t.recv(rel), &mut seen_rel);
        notes += last_peers(&t.recv(be), &mut seen_be);
        let all = subs.iter().filter(|s| s.1.is_some()).count() as u64;
        let best_effort_ok = subs.iter().filter(|s| s.1 == Some(false)).count() as u64;
        assert_eq!(seen_rel, Some(all), "turn {turn}: reliable publisher");
        assert_eq!(
            seen_be,
            Some(best_effort_ok),
            "turn {turn}: best-effort one"
        );
    }
    assert!(notes > 50, "the sequence exercised changes: {notes}");
    assert_eq!(
        t.counter(Counter::PeerNotifications),
        2 + notes as u64,
        "every notification counted"
    );
    for (c, _) in subs {
        t.close_now(c);
    }
    t.advance(1);
    last_peers(&t.recv(rel), &mut seen_rel);
    assert_eq!(seen_rel, Some(0));
    t.close_now(rel);
    t.close_now(be);
    t.advance(1);
    t.assert_empty();
}

#[test]
fn a_crowd_arriving_in_one_turn_makes_one_notification() {
    let mut t = T::new(Limits::default());
    let p = t.open();
    t.send(
        p,
        r#"{"op":"advertise","topic":"/c","type":"T","peers":true}"#,
    );
    t.advance(0);
    t.recv(p);
    let crowd: Vec<u32> = (0..500).map(|_| t.open()).collect();
    for &c in &crowd {
        t.send(c, r#"{"op":"subscribe","topic":"/c","type":"T"}"#);
    }
    t.advance(1);
    let got: Vec<Value> = t
        .recv(p)
        .into_iter()
        .filter(|v| v["op"] == "peers")
        .collect();
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["subscribers"], 500);
    // Leaving and rejoining within one turn changes nothing: no message.
    t.send(crowd[0], r#"{"op":"unsubscribe","topic":"/c"}"#);
    t.send(crowd[0], r#"{"op":"subscribe","topic":"/c","type":"T"}"#);
    t.advance(1);
    assert!(t.recv(p).is_empty());
    for &c in &crowd {
        t.hub.close(c, CloseReason::PeerClosed, t.now);
    }
    t.advance(1);
    let got: Vec<Value> = t
        .recv(p)
        .into_iter()
        .filter(|v| v["op"] == "peers")
        .collect();
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["subscribers"], 0);
}

/// Pads `key`'s unread control queue with error replies so that exactly
/// `room` bytes are left below `max_control_bytes` (`cap`).
fn fill_control(t: &mut T, key: u32, cap: usize, room: usize) {
    let queued = |t: &T| t.hub.conn(key).map_or(0, |c| c.out().control_bytes());
    // An error reply echoes the id; ids longer than 1 KiB are refused.
    let pad = |t: &mut T, n: usize| {
        let id = "x".repeat(n);
        t.send(key, &format!(r#"{{"op":"no_such_op","id":"{id}"}}"#));
    };
    let before = queued(t);
    pad(t, 1);
    let reply = queued(t) - before;
    loop {
        let left = cap - room - queued(t);
        if left == 0 {
            return;
        }
        assert!(left >= reply, "cap {cap} leaves room for whole replies");
        // A reply of `left` bytes, or one leaving at least a whole reply.
        let n = if left - reply < 1024 {
            left - reply + 1
        } else {
            (left - 2 * reply).min(1024)
        };
        pad(t, n);
    }
}

/// A `peers` line that overflows its publisher's control queue closes it
/// (P6) in `expire`'s own flush; the topics it subscribed to change count
/// by that close. Their other watchers are told in the same turn, and
/// `expire` leaves nothing for later (the shell would otherwise poll again
/// for work it was promised done): once for a topic whose only watcher is
/// the closed publisher itself, once for another publisher's topic. The
/// line that overflowed is not counted as sent: it went with p1's queue.
#[test]
fn a_peers_line_that_overflows_its_publisher_leaves_expire_no_backlog() {
    const CAP: usize = 2_000;
    let mut t = T::new(Limits {
        max_control_bytes: CAP,
        ..Limits::default()
    });
    // `p1` watches /a and subscribes to /a itself and to /b; `p2` watches /b.
    let p1 = t.open();
    let p2 = t.open();
    t.send(
        p1,
        r#"{"op":"advertise","topic":"/a","type":"T","peers":true}"#,
    );
    t.send(p1, r#"{"op":"subscribe","topic":"/a","type":"T"}"#);
    t.send(p1, r#"{"op":"subscribe","topic":"/b","type":"T"}"#);
    t.send(
        p2,
        r#"{"op":"advertise","topic":"/b","type":"T","peers":true}"#,
    );
    t.advance(0);
    let mut seen_a = None;
    let mut seen_b = None;
    last_peers(&t.recv(p1), &mut seen_a);
    last_peers(&t.recv(p2), &mut seen_b);
    assert_eq!((seen_a, seen_b), (Some(1), Some(1)));
    // The next /a count (2) no longer fits in p1's control queue.
    let line = br#"{"op":"peers","topic":"/a","subscribers":2}"#.len() + 1;
    fill_control(&mut t, p1, CAP, line - 1);
    let s = t.open();
    t.send(s, r#"{"op":"subscribe","topic":"/a","type":"T"}"#);
    let told = t.hub.counters().get(Counter::PeerNotifications);
    t.now += Duration::from_millis(1);
    t.hub.expire(t.now);
    assert_eq!(t.hub.counters().closes_of(CloseReason::ControlOverflow), 1);
    assert_eq!(
        t.hub.counters().get(Counter::PeerNotifications) - told,
        1,
        "p2's line counted, not the line p1's closed queue dropped"
    );
    assert!(t.hub.conn(p1).is_some_and(|c| !c.is_open()), "p1 closing");
    assert!(
        !t.hub.inspect().has_expire_backlog(),
        "expire left the counts p1's close changed for a later turn"
    );
    let got: Vec<Value> = t
        .recv(p2)
        .into_iter()
        .filter(|v| v["op"] == "peers")
        .collect();
    assert_eq!(got.len(), 1, "p2 told once, this turn: {got:?}");
    assert_eq!(got[0]["topic"], "/b");
    assert_eq!(got[0]["subscribers"], 0, "p1 is gone");
    t.free_closed();
    t.advance(1);
    assert!(t.recv(p2).is_empty(), "nothing more once p1 is freed");
}

#[test]
fn waiting_calls_fail_at_their_deadline_with_the_reason() {
    let mut t = T::new(Limits::default());
    let c = t.open();
    t.send(
        c,
        r#"{"op":"call_service","service":"/late","id":1,"args":{},"wait":true,"timeout":0.5}"#,
    );
    t.send(
        c,
        r#"{"op":"call_service","service":"/late","id":2,"args":{},"wait":true}"#,
    );
    assert_eq!(t.hub.inspect().gauges().get(Gauge::CallsWaiting), 2);
    assert!(t.hub.memory().calls > 0, "waiting calls are in the ledger");
    t.advance(490);
    assert!(t.recv(c).is_empty(), "490 ms: still waiting");
    t.advance(10);
    let r = t.one(c);
    assert_eq!(
        (r["id"].clone(), r["result"].clone()),
        (json!(1), json!(false))
    );
    assert_eq!(
        r["values"],
        "no provider for service /late appeared in time"
    );
    t.advance(4_490);
    assert!(t.recv(c).is_empty(), "4.99 s: the default 5 s is not over");
    t.advance(10);
    let r = t.one(c);
    assert_eq!(
        (r["id"].clone(), r["result"].clone()),
        (json!(2), json!(false))
    );
    assert_eq!(t.hub.inspect().gauges().get(Gauge::CallsWaiting), 0);
    assert_eq!(t.counter(Counter::CallsWaited), 2);
    // Without "wait" a call fails at once.
    t.call(c, "/late", "3");
    assert_eq!(t.one(c)["result"], false);
    // A waiting goal fails at its deadline with status 0.
    t.send(
        c,
        r#"{"op":"send_action_goal","action":"/fib","action_type":"T","id":"g","args":{},"wait":true,"timeout":0.2}"#,
    );
    t.advance(190);
    assert!(t.recv(c).is_empty());
    t.advance(10);
    let r = t.one(c);
    assert_eq!(r["op"], "action_result");
    assert_eq!(
        (r["id"].clone(), r["status"].clone()),
        (json!("g"), json!(0))
    );
    assert_eq!(r["values"], "no server for action /fib appeared in time");
    t.close_now(c);
    t.assert_empty();
}

#[test]
fn waiting_calls_are_released_in_order_with_what_is_left_of_their_timeout() {
    let mut t = T::new(Limits::default());
    let c = t.open();
    let d = t.open();
    t.send(
        c,
        r#"{"op":"call_service","service":"/s","id":"a","args":{"n":1},"wait":true,"timeout":1}"#,
    );
    t.advance(100);
    t.send(
        d,
        r#"{"op":"call_service","service":"/s","id":"b","args":{"n":2},"wait":true,"timeout":1}"#,
    );
    t.send(
        c,
        r#"{"op":"call_service","service":"/s","id":"c","args":{"n":3},"wait":true}"#,
    );
    t.advance(200);
    let p = t.open();
    t.send(p, r#"{"op":"advertise_service","service":"/s","type":"T"}"#);
    let got = t.recv(p);
    assert_eq!(got[0]["level"], "info");
    let args: Vec<Value> = got[1..].iter().map(|v| v["args"]["n"].clone()).collect();
    assert_eq!(
        args,
        [json!(1), json!(2), json!(3)],
        "in the order they came"
    );
    assert_eq!(t.hub.inspect().gauges().get(Gauge::CallsWaiting), 0);
    assert_eq!(t.hub.inspect().calls().len(), 3);
    // "a" waited 300 of its 1000 ms: it times out at 1000, not 1300.
    t.advance(699);
    assert!(t.recv(c).is_empty() && t.recv(d).is_empty());
    t.advance(1);
    let r = t.one(c);
    assert_eq!(
        (r["id"].clone(), r["result"].clone()),
        (json!("a"), json!(false))
    );
    t.advance(100);
    assert_eq!(t.one(d)["id"], "b", "b at 1100 ms");
    // "c" (default 5 s from 100 ms) is answered in time.
    let fwd_c = got[3]["id"].as_str().expect("id").to_string();
    t.send(
        p,
        &format!(r#"{{"op":"service_response","service":"/s","id":"{fwd_c}","values":{{"ok":1}},"result":true}}"#),
    );
    let r = t.one(c);
    assert_eq!(
        (r["id"].clone(), r["values"]["ok"].clone()),
        (json!("c"), json!(1))
    );
}

#[test]
fn a_released_waiting_slot_reused_by_a_new_call_keeps_the_new_deadline() {
    let mut t = T::new(Limits::default());
    let c = t.open();
    t.send(
        c,
        r#"{"op":"call_service","service":"/s","id":1,"args":{},"wait":true,"timeout":1}"#,
    );
    t.advance(100);
    let p = t.open();
    t.send(p, r#"{"op":"advertise_service","service":"/s","type":"T"}"#);
    let fwd = t.recv(p);
    assert_eq!(fwd.len(), 2, "{fwd:?}");
    let id = fwd[1]["id"].as_str().expect("id").to_string();
    t.send(
        p,
        &format!(
            r#"{{"op":"service_response","service":"/s","id":"{id}","values":{{}},"result":true}}"#
        ),
    );
    assert_eq!(t.one(c)["result"], true);
    t.send(p, r#"{"op":"unadvertise_service","service":"/s"}"#);
    t.recv(p);
    // A new waiting call (it may take the first one's slot) with 5 s.
    t.send(
        c,
        r#"{"op":"call_service","service":"/s","id":2,"args":{},"wait":true,"timeout":5}"#,
    );
    t.advance(1_000);
    assert!(
        t.recv(c).is_empty(),
        "1.1 s: the first call's old deadline must not fail the second"
    );
    assert_eq!(t.hub.inspect().gauges().get(Gauge::CallsWaiting), 1);
    t.advance(4_000);
    assert_eq!(t.one(c)["id"], 2, "5.1 s: the second call's own deadline");
    // The same when the first caller left while waiting.
    let gone = t.open();
    t.send(
        gone,
        r#"{"op":"call_service","service":"/s","id":3,"args":{},"wait":true,"timeout":1}"#,
    );
    t.close_now(gone);
    t.send(
        c,
        r#"{"op":"call_service","service":"/s","id":4,"args":{},"wait":true,"timeout":5}"#,
    );
    t.advance(1_100);
    assert!(t.recv(c).is_empty(), "the leaver's deadline is not ours");
    t.advance(4_000);
    assert_eq!(t.one(c)["id"], 4);
}

#[test]
fn waiting_calls_count_against_the_per_connection_call_limit() {
    let mut t = T::new(Limits {
        max_calls_per_conn: 2,
        ..Limits::default()
    });
    let p = t.provider("/busy");
    let c = t.open();
    t.call(c, "/busy", "1"); // in flight
    t.recv(p);
    t.send(
        c,
        r#"{"op":"call_service","service":"/late","id":2,"args":{},"wait":true}"#,
    );
    t.send(
        c,
        r#"{"op":"call_service","service":"/late","id":3,"args":{},"wait":true}"#,
    );
    let r = t.one(c);
    assert_eq!(
        (r["id"].clone(), r["result"].clone()),
        (json!(3), json!(false))
    );
    assert_eq!(t.hub.inspect().gauges().get(Gauge::CallsWaiting), 1);
    t.call(c, "/busy", "4");
    assert_eq!(t.one(c)["id"], 4, "one in flight and one waiting: full");
    assert!(t.recv(p).is_empty());
}

#[test]
fn reliable_subscriber_is_warned_then_closed_never_shed() {
    let mut t = T::new(Limits {
        max_queue_bytes: 10_000,
        ..Limits::default()
    });
    let rel = t.open();
    let be = t.open();
    let p = t.open();
    t.send(
        rel,
        r#"{"op":"subscribe","topic":"/r","type":"T","qos":{"reliability":"reliable"}}"#,
    );
    t.send(be, r#"{"op":"subscribe","topic":"/r","type":"T"}"#);
    t.recv(rel);
    t.recv(be);
    let pad = "x".repeat(1_000);
    let mut warned_at = None;
    let mut be_got = 0;
    let mut closed_at = None;
    for i in 0..30 {
        t.send(
            p,
            &format!(r#"{{"op":"publish","topic":"/r","msg":{{"i":{i},"p":"{pad}"}}}}"#),
        );
        be_got += t.msgs(be).len();
        if warned_at.is_none() && t.counter(Counter::ReliableWarnings) == 1 {
            warned_at = Some(i);
        }
        if t.hub.conn(rel).is_some_and(|c| !c.is_open()) {
            closed_at = Some(i);
            break;
        }
    }
    let w = warned_at.expect("warned");
    assert!((9..=11).contains(&w), "warned past 10 000 bytes, at {w}");
    let c = closed_at.expect("closed");
    assert!((19..=21).contains(&c), "closed past 20 000 bytes, at {c}");
    assert_eq!(
        t.hub.counters().closes_of(CloseReason::ReliableOverflow),
        1,
        "closed past 20 000"
    );
    assert_eq!(t.counter(Counter::Dropped), 0, "nothing reliable was shed");
    let warning = t
        .recv(rel)
        .into_iter()
        .find(|v| v["op"] == "status" && v["level"] == "warning")
        .expect("the warning was queued");
    assert!(warning["msg"]
        .as_str()
        .is_some_and(|m| m.contains("reliable")));
    t.free_closed();
    assert!(t.hub.conn(rel).is_none());
    assert_eq!(be_got, c + 1, "the reader got every message meanwhile");
    assert!(t.hub.conn(be).is_some());
}

#[test]
fn incompatible_pairs_exchange_nothing_and_both_are_warned() {
    let mut t = T::new(Limits::default());
    let sub = t.open();
    let p = t.open();
    t.send(
        sub,
        r#"{"op":"subscribe","topic":"/i","type":"T","qos":{"reliability":"reliable","durability":"transient_local"}}"#,
    );
    t.recv(sub);
    t.send(
        p,
        r#"{"op":"advertise","topic":"/i","type":"T","qos":{"reliability":"best_effort"}}"#,
    );
    let mine = t.recv(p);
    assert_eq!(mine.len(), 2, "{mine:?}");
    assert_eq!(mine[1]["level"], "warning");
    let theirs = t.one(sub);
    assert_eq!(theirs["level"], "warning");
    assert_eq!(theirs["msg"], mine[1]["msg"], "both told the same");
    let msg = theirs["msg"].as_str().unwrap();
    assert!(msg.contains("/i") && msg.contains("best_effort") && msg.contains("reliable"));
    assert_eq!(t.counter(Counter::QosIncompatible), 1, "reliability first");
    t.publish(p, "/i", 1);
    assert!(t.recv(sub).is_empty());
    assert_eq!(t.counter(Counter::QosSkipped), 1);
    // Publishing without advertising offers nothing stated: it matches.
    let anon = t.open();
    t.publish(anon, "/i", 2);
    assert_eq!(t.ints(sub), [2]);
}

#[test]
fn everything_is_released_when_everyone_leaves() {
    let mut t = T::new(Limits::default());
    let latched = t.open();
    let watcher = t.open();
    let slow = t.open();
    let throttled = t.open();
    let reliable = t.open();
    let caller = t.open();
    let ws = t.open_ws();
    t.send(
        latched,
        r#"{"op":"advertise","topic":"/a","type":"T","qos":{"durability":"transient_local","depth":5}}"#,
    );
    t.send(
        watcher,
        r#"{"op":"advertise","topic":"/a","type":"T","peers":true}"#,
    );
    t.send(
        slow,
        r#"{"op":"subscribe","topic":"/a","type":"T","queue_length":2}"#,
    );
    t.send(
        throttled,
        r#"{"op":"subscribe","topic":"/a","type":"T","throttle_rate":1000}"#,
    );
    t.send(
        reliable,
        r#"{"op":"subscribe","topic":"/a","type":"T","qos":{"reliability":"reliable"}}"#,
    );
    t.hub.on_bytes(
        ws,
        &ws_text(br#"{"op":"subscribe","topic":"/a","throttle_rate":500}"#),
        t.now,
    );
    t.send(
        caller,
        r#"{"op":"call_service","service":"/none","id":1,"args":{},"wait":true}"#,
    );
    for i in 0..20 {
        t.publish(latched, "/a", i);
        t.publish(watcher, "/a", 100 + i);
    }
    t.advance(1);
    assert!(t.hub.memory().total() > 0);
    assert_eq!(t.hub.inspect().gauges().get(Gauge::CallsWaiting), 1);
    // Some read what they got, some never read.
    t.recv(reliable);
    t.recv(watcher);
    for k in [latched, watcher, slow, throttled, reliable, caller, ws] {
        t.close_now(k);
        t.advance(1);
    }
    t.advance(2_000);
    t.assert_empty();
}

#[test]
fn latched_and_throttled_frames_leave_the_ledger_when_written() {
    let mut t = T::new(Limits::default());
    let p = t.open();
    let a = t.open();
    let b = t.open();
    let th = t.open();
    t.send(
        p,
        r#"{"op":"advertise","topic":"/m","type":"T","latch":true}"#,
    );
    t.send(a, r#"{"op":"subscribe","topic":"/m","type":"T"}"#);
    t.send(b, r#"{"op":"subscribe","topic":"/m","type":"T"}"#);
    t.send(
        th,
        r#"{"op":"subscribe","topic":"/m","type":"T","throttle_rate":100}"#,
    );
    let big = "z".repeat(10_000);
    for _ in 0..50 {
        t.send(
            p,
            &format!(r#"{{"op":"publish","topic":"/m","msg":"{big}"}}"#),
        );
        t.advance(30);
        for k in [p, a, b, th] {
            t.recv(k);
        }
    }
    t.advance(200);
    for k in [p, a, b, th] {
        t.recv(k);
    }
    let m = t.hub.memory();
    assert_eq!(
        t.hub.inspect().gauges().get(Gauge::QueuedBytes),
        0,
        "all written"
    );
    assert!(
        m.frames < 20_000,
        "after every queue was written, at most the latched message is held: {m:?}"
    );
    for k in [p, a, b, th] {
        t.close_now(k);
    }
    t.assert_empty();
}

#[test]
fn destroying_a_node_withdraws_its_subscriptions_qos_and_peer_counts() {
    let mut t = T::new(Limits {
        max_queue_bytes: 10_000,
        ..Limits::default()
    });
    let p = t.open();
    t.send(
        p,
        r#"{"op":"advertise","topic":"/n","type":"T","peers":true}"#,
    );
    t.advance(1);
    let mut seen = None;
    last_peers(&t.recv(p), &mut seen);
    assert_eq!(seen, Some(0));
    let s = t.open();
    t.send(s, r#"{"op":"declare_node","name":"viewer"}"#);
    t.send(s, r#"{"op":"subscribe","topic":"/n","type":"T"}"#);
    // Alone on its topic, so the topic (and its id) goes with the node.
    t.send(
        s,
        r#"{"op":"subscribe","topic":"/q","type":"T","qos":{"reliability":"reliable"}}"#,
    );
    t.advance(1);
    last_peers(&t.recv(p), &mut seen);
    assert_eq!(seen, Some(1));
    t.send(s, r#"{"op":"destroy_node","name":"viewer"}"#);
    t.advance(1);
    last_peers(&t.recv(p), &mut seen);
    assert_eq!(seen, Some(0), "the node's subscriber left");
    t.recv(s);
    // A new topic of this connection (maybe with the old one's id) stated
    // no QoS: it is shed as usual, never treated as reliable.
    t.send(s, r#"{"op":"subscribe","topic":"/fresh","type":"T"}"#);
    t.recv(s);
    let pad = "x".repeat(1_000);
    for i in 0..40 {
        t.send(
            p,
            &format!(r#"{{"op":"publish","topic":"/fresh","msg":{{"i":{i},"p":"{pad}"}}}}"#),
        );
    }
    assert!(t.hub.conn(s).is_some_and(|c| c.is_open()));
    assert_eq!(t.counter(Counter::ReliableWarnings), 0);
    assert!(
        t.counter(Counter::Dropped) > 0,
        "shed like any best-effort data"
    );
}

#[test]
fn a_message_after_the_interval_never_overtakes_a_held_older_one() {
    let mut t = T::new(Limits::default());
    let sub = t.open();
    let p = t.open();
    t.send(
        sub,
        r#"{"op":"subscribe","topic":"/f","type":"T","throttle_rate":100}"#,
    );
    t.recv(sub);
    t.publish(p, "/f", 0);
    assert_eq!(t.ints(sub), [0]);
    t.advance(50);
    t.publish(p, "/f", 1); // held, its flush due at 100 ms
                           // At 100 ms a newer message is read before the loop runs its timers
                           // (the shell reads, then expires): the newest goes at once, and the
                           // older held one is not sent after it.
    t.now += Duration::from_millis(50);
    t.publish(p, "/f", 2);
    assert_eq!(t.ints(sub), [2]);
    t.advance(0);
    assert!(t.ints(sub).is_empty(), "1 must not follow 2");
    assert_eq!(t.counter(Counter::ThrottleDropped), 1);
    // The interval restarted at 100 ms: a message at 150 waits for 200.
    t.advance(50);
    t.publish(p, "/f", 3);
    t.advance(49);
    assert!(t.ints(sub).is_empty(), "199 ms");
    t.advance(1);
    assert_eq!(t.ints(sub), [3], "200 ms");
}

/// A waiting call or goal is answered when the gateway shuts down, as a
/// call in flight is: its connection must not drain and close without it.
#[test]
fn waiting_requests_fail_at_a_shutdown() {
    let mut t = T::new(Limits::default());
    let c = t.open();
    t.send(
        c,
        r#"{"op":"call_service","service":"/s","id":1,"args":{},"wait":true}"#,
    );
    t.send(
        c,
        r#"{"op":"send_action_goal","action":"/fib","action_type":"T","id":"g","args":{},"wait":true}"#,
    );
    assert!(t.recv(c).is_empty());
    t.hub.begin_shutdown(t.now);
    let got = t.recv(c);
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(
        (&got[0]["id"], &got[0]["result"]),
        (&json!(1), &json!(false))
    );
    assert!(got[0]["values"]
        .as_str()
        .is_some_and(|v| v.contains("shutting down")));
    assert_eq!(
        (&got[1]["op"], &got[1]["id"], &got[1]["status"]),
        (&json!("action_result"), &json!("g"), &json!(6))
    );
    assert_eq!(t.hub.inspect().gauges().get(Gauge::CallsWaiting), 0);
    assert_eq!(t.counter(Counter::CallsFailedShutdown), 1);
    assert_eq!(t.counter(Counter::GoalsFailedShutdown), 1);
    assert_eq!(t.hub.memory().calls, 0);
}

/// A waiting request goes to the provider of the name it waited for, even
/// if its caller declared a node since (whose namespace would resolve the
/// name elsewhere).
#[test]
fn a_released_request_is_not_resolved_again() {
    let mut t = T::new(Limits::default());
    let c = t.open();
    t.send(
        c,
        r#"{"op":"call_service","service":"s","id":1,"args":{},"wait":true}"#,
    );
    t.send(
        c,
        r#"{"op":"send_action_goal","action":"fib","action_type":"T","id":"g","args":{},"wait":true}"#,
    );
    t.send(c, r#"{"op":"declare_node","name":"n","namespace":"/r2"}"#);
    assert_eq!(t.one(c)["level"], "info");
    let p = t.open();
    t.send(p, r#"{"op":"advertise_service","service":"s","type":"T"}"#);
    t.send(p, r#"{"op":"advertise_action","action":"fib","type":"T"}"#);
    let got = t.recv(p);
    let ops: Vec<&Value> = got.iter().map(|v| &v["op"]).collect();
    assert_eq!(
        ops,
        [
            &json!("status"),
            &json!("call_service"),
            &json!("status"),
            &json!("send_action_goal")
        ],
        "{got:?}"
    );
    assert_eq!(
        (&got[1]["service"], &got[3]["action"]),
        (&json!("s"), &json!("fib"))
    );
    assert!(t.recv(c).is_empty(), "nothing failed");
}

/// The frames queued for WebSocket client `key`: (binary, payload).
fn ws_frames(t: &mut T, key: u32) -> Vec<(bool, Vec<u8>)> {
    let bytes = t.raw(key);
    let mut out = Vec::new();
    client::Reader::new().feed(&bytes, usize::MAX, |e| match e {
        client::Event::Text(b) => out.push((false, b.to_vec())),
        client::Event::Binary(b) => out.push((true, b.to_vec())),
        other => panic!("a data frame expected, got {other:?}"),
    });
    out
}

#[test]
fn encodings_are_made_once_per_message_and_leave_the_ledger() {
    let mut t = T::new(Limits::default());
    let p = t.open();
    t.send(
        p,
        r#"{"op":"advertise","topic":"/e","type":"std_msgs/msg/Int64","latch":true}"#,
    );
    let subs: Vec<u32> = (0..6).map(|_| t.open_ws()).collect();
    let asks = [
        r#""compression":"cbor""#,
        r#""compression":"cbor""#,
        r#""compression":"cbor-raw""#,
        r#""compression":"png""#,
        r#""compression":"png","throttle_rate":1000"#,
        r#""fragment_size":10"#,
    ];
    for (&s, ask) in subs.iter().zip(asks) {
        t.ws_send(s, &format!(r#"{{"op":"subscribe","topic":"/e",{ask}}}"#));
    }
    for i in 0..10 {
        t.send(
            p,
            &format!(r#"{{"op":"publish","topic":"/e","msg":{{"data":{i}}}}}"#),
        );
        t.advance(1);
    }
    // One encoding per message and compression, however many asked.
    assert_eq!(t.counter(Counter::EncodedCborFrames), 10);
    assert_eq!(t.counter(Counter::EncodedCborRawFrames), 10);
    // png: every message once (for the unthrottled subscriber); the
    // throttled one shares it or, later, gets its held copy encoded.
    assert!(t.counter(Counter::EncodedPngFrames) >= 10);
    let a = ws_frames(&mut t, subs[0]);
    let b = ws_frames(&mut t, subs[1]);
    assert_eq!(a.len(), 10);
    assert_eq!(a, b);
    assert!(a.iter().all(|(binary, _)| *binary));
    assert!(ws_frames(&mut t, subs[2]).iter().all(|(binary, _)| *binary));
    // A late subscriber gets the latched message in its encoding.
    let late = t.open_ws();
    t.ws_send(
        late,
        r#"{"op":"subscribe","topic":"/e","compression":"cbor"}"#,
    );
    let got = ws_frames(&mut t, late);
    assert_eq!(got.len(), 1);
    assert!(got[0].0, "binary");
    // Some read, some never do; then everyone leaves.
    t.advance(2_000);
    for k in subs.into_iter().chain([late, p]) {
        t.close_now(k);
        t.advance(1);
    }
    t.advance(2_000);
    t.assert_empty();
}

#[test]
fn a_fragmented_message_is_shed_whole() {
    let mut t = T::new(Limits {
        max_queue_bytes: 10_000,
        ..Limits::default()
    });
    let p = t.open();
    let s = t.open_ws();
    t.ws_send(
        s,
        r#"{"op":"subscribe","topic":"/big","fragment_size":300}"#,
    );
    let pad = "x".repeat(1_000);
    for i in 0..40 {
        t.send(
            p,
            &format!(r#"{{"op":"publish","topic":"/big","msg":{{"n":{i},"pad":"{pad}"}}}}"#),
        );
    }
    assert!(t.counter(Counter::Dropped) > 0, "the queue shed");
    let frames = t.ws_recv(s);
    // Whole sets only: each a run of num 0..total, joining to a publish.
    let mut i = 0;
    let mut ns = Vec::new();
    while i < frames.len() {
        let total = frames[i]["total"].as_u64().expect("a fragment") as usize;
        let mut text = String::new();
        for (n, f) in frames[i..i + total].iter().enumerate() {
            assert_eq!(f["num"], n as u64, "{f}");
            text.push_str(f["data"].as_str().expect("data"));
        }
        let whole: Value = serde_json::from_str(&text).expect("a whole message");
        ns.push(whole["msg"]["n"].as_u64().expect("n"));
        i += total;
    }
    assert!(ns.len() < 40 && ns.contains(&39), "{ns:?}");
}
