//! Bounded memory and work on the fake clock: the memory ledger and budget,
//! per-connection deadlines, admission at the connection limit, per-item
//! and per-connection limits, and the graceful shutdown.

use super::*;

fn limits() -> Limits {
    Limits::default()
}

impl T {
    fn closes(&self, r: CloseReason) -> u64 {
        self.hub.counters().closes_of(r)
    }

    fn gone(&self, key: u32) -> bool {
        self.hub.conn(key).is_none()
    }
}

#[test]
fn the_ledger_counts_a_shared_frame_once_and_returns_to_zero() {
    let mut t = T::new(limits());
    let subs: Vec<u32> = (0..50).map(|_| t.open()).collect();
    for &s in &subs {
        t.send(s, r#"{"op":"subscribe","topic":"/img","type":"T"}"#);
        t.recv(s);
    }
    let ws = t.open_ws();
    t.hub.on_bytes(
        ws,
        &ws_text(br#"{"op":"subscribe","topic":"/img","type":"T"}"#),
        t.now,
    );
    let p = t.open();
    let big = "x".repeat(100_000);
    t.send(
        p,
        &format!(r#"{{"op":"publish","topic":"/img","msg":"{big}"}}"#),
    );
    let m = t.hub.memory();
    // One line copy and one WebSocket copy, not 51 copies.
    assert!(
        m.frames > 200_000 && m.frames < 201_000,
        "frames counted once per framing: {m:?}"
    );
    assert!(t.hub.inspect().gauges().get(Gauge::QueuedBytes) > 50 * 100_000);
    for &s in &subs {
        t.recv(s);
    }
    assert!(
        t.hub.memory().frames > 100_000,
        "the WebSocket copy is still queued"
    );
    t.raw(ws);
    assert_eq!(t.hub.memory().frames, 0, "every frame written");
    assert_eq!(t.hub.inspect().gauges().get(Gauge::QueuedBytes), 0);
    for k in subs.into_iter().chain([ws, p]) {
        t.hub.close(k, CloseReason::PeerClosed, t.now);
    }
    t.free_closed();
    assert_eq!(t.hub.memory(), crate::memory::MemoryUse::default());
}

#[test]
fn over_budget_topic_data_is_shed_before_anyone_is_closed() {
    let mut t = T::new(Limits {
        max_memory_bytes: 1_000_000,
        ..limits()
    });
    // Two subscribers that never read, each on its own topic.
    let slow: Vec<u32> = (0..2).map(|_| t.open()).collect();
    for (i, &s) in slow.iter().enumerate() {
        t.send(
            s,
            &format!(r#"{{"op":"subscribe","topic":"/t{i}","type":"T"}}"#),
        );
    }
    let p = t.open();
    let msg = "y".repeat(50_000);
    for n in 0..40 {
        t.send(
            p,
            &format!(r#"{{"op":"publish","topic":"/t{}","msg":"{msg}"}}"#, n % 2),
        );
    }
    let m = t.hub.memory();
    assert!(
        m.total() <= 1_000_000,
        "within budget after every read: {m:?}"
    );
    assert!(t.hub.counters().get(Counter::DroppedForMemory) > 0);
    assert_eq!(
        t.closes(CloseReason::MemoryPressure),
        0,
        "shedding sufficed"
    );
    assert!(slow.iter().all(|&s| t.hub.conn(s).is_some()));
}

#[test]
fn over_budget_control_data_closes_the_biggest_holder() {
    let mut t = T::new(Limits {
        max_memory_bytes: 300_000,
        ..limits()
    });
    let small = t.open();
    let hog = t.open();
    // The hog pipelines requests whose error statuses it never reads.
    let bad = format!(r#"{{"op":"nope","id":"{}"}}"#, "i".repeat(1000));
    for _ in 0..400 {
        t.send(hog, &bad);
    }
    t.send(small, r#"{"op":"nope"}"#);
    t.free_closed();
    assert_eq!(t.closes(CloseReason::MemoryPressure), 1);
    assert!(t.gone(hog), "the biggest holder went");
    assert!(t.hub.conn(small).is_some(), "the small one stays");
    assert!(t.hub.memory().total() < 300_000);
}

#[test]
fn over_budget_declared_nodes_count_for_their_owner() {
    // A connection that reads everything and holds nothing but nodes with
    // big remap rules is the biggest holder, not the small one beside it.
    let mut t = T::new(Limits {
        max_memory_bytes: 300_000,
        ..limits()
    });
    let small = t.open();
    t.send(small, r#"{"op":"nope"}"#);
    let hog = t.open();
    let rules: Vec<String> = (0..64)
        .map(|i| format!("/f{i}_{}:=/t{i}_{}", "x".repeat(240), "y".repeat(240)))
        .collect();
    let remap = serde_json::to_string(&rules).expect("JSON");
    for n in 0..12 {
        if t.gone(hog) {
            break;
        }
        t.send(
            hog,
            &format!(r#"{{"op":"declare_node","name":"n{n}","remap":{remap}}}"#),
        );
        t.recv(hog);
        t.free_closed();
    }
    assert_eq!(t.closes(CloseReason::MemoryPressure), 1);
    assert!(t.gone(hog), "the holder of the nodes went");
    assert!(t.hub.conn(small).is_some(), "the small one stays");
    assert_eq!(t.hub.nodes().len(), 0);
    assert!(t.hub.memory().total() < 300_000);
}

#[test]
fn over_budget_parameters_count_for_their_owner() {
    // A connection that reads everything and holds nothing but its node's
    // big parameters is the biggest holder: before its parameters were
    // charged to it, the small one beside it (a few unread statuses) was
    // closed first, then the owner too.
    let mut t = T::new(Limits {
        max_memory_bytes: 300_000,
        ..limits()
    });
    let small = t.open();
    for _ in 0..5 {
        t.send(small, r#"{"op":"nope"}"#);
    }
    let hog = t.open();
    t.send(hog, r#"{"op":"declare_node","name":"big"}"#);
    t.recv(hog);
    let value = "x".repeat(60_000);
    for i in 0..8 {
        if t.gone(hog) {
            break;
        }
        // Declared small, then set big: a declaration's status echoes the
        // value, which would make the owner a big holder of control data.
        t.send(
            hog,
            &format!(r#"{{"op":"declare_parameter","name":"p{i}","value":""}}"#),
        );
        t.recv(hog);
        t.send(
            hog,
            &format!(r#"{{"op":"set_parameter","name":"p{i}","value":"{value}"}}"#),
        );
        if !t.gone(hog) {
            t.recv(hog);
        }
        t.free_closed();
    }
    assert_eq!(t.closes(CloseReason::MemoryPressure), 1);
    assert!(t.gone(hog), "the owner of the parameters went");
    assert!(t.hub.conn(small).is_some(), "the small one stays");
    assert_eq!(
        t.hub.inspect().params_in(0).len(),
        0,
        "its parameters went with it"
    );
    assert!(t.hub.memory().total() < 300_000);
}

#[test]
fn a_connections_parameters_are_charged_to_it_and_held_ones_to_nobody() {
    let mut t = T::new(limits());
    let owner = t.open();
    t.send(owner, r#"{"op":"declare_node","name":"n"}"#);
    let me = t.hub.inspect().conn_ref(owner).expect("open");
    let store = |t: &T| {
        let s = t.hub.inspect().params_in(0);
        (s.owned_bytes(me), s.held_bytes(), s.bytes())
    };
    assert_eq!(store(&t), (0, 0, 0));
    t.send(
        owner,
        r#"{"op":"declare_parameter","name":"a","value":"12345678"}"#,
    );
    let (mine, held, all) = store(&t);
    assert!(mine > 8 && held == 0 && all == mine, "{:?}", store(&t));
    // Others' changes of an owned parameter are the owner's bytes too.
    let other = t.open();
    t.send(
        other,
        r#"{"op":"call_service","service":"/rosapi/set_param","id":"s1","args":{"name":"n:a","value":"\"1234567890123456\""}}"#,
    );
    assert_eq!(store(&t).0, mine + 8, "{:?}", t.recv(other));
    // A value nobody owns is the gateway's, in the ledger all the same.
    let before = t.hub.memory().registrations;
    t.send(
        other,
        r#"{"op":"call_service","service":"/rosapi/set_param","id":"s2","args":{"name":"free","value":"\"abcd\""}}"#,
    );
    let (mine, held, all) = store(&t);
    assert!(held > 4 && all == mine + held, "{:?}", store(&t));
    assert_eq!(t.hub.memory().registrations, before + held);
    t.send(owner, r#"{"op":"undeclare_parameter","name":"a"}"#);
    assert_eq!(store(&t), (0, held, held));
    t.hub.close(other, CloseReason::PeerClosed, t.now);
    t.hub.close(owner, CloseReason::PeerClosed, t.now);
    t.free_closed();
    assert_eq!(
        t.hub.inspect().params_in(0).held_bytes(),
        held,
        "held ones stay"
    );
    assert_eq!(t.hub.memory().total(), held);
}

#[test]
fn an_opening_that_never_completes_is_closed_at_the_deadline() {
    let mut t = T::new(Limits {
        handshake_timeout: Duration::from_millis(1_000),
        ..limits()
    });
    let idle_tcp = t.open();
    let trickle_ws = t.hub.open_as(Transport::WebSocket, t.now).expect("in").key;
    let ok_tcp = t.open();
    t.send(ok_tcp, r#"{"op":"subscribe","topic":"/a","type":"T"}"#);
    let ok_ws = t.open_ws();
    for _ in 0..8 {
        t.hub.on_bytes(trickle_ws, b"G", t.now);
        t.advance(100);
    }
    assert!(t.hub.conn(idle_tcp).is_some());
    t.advance(400);
    assert!(t.gone(idle_tcp) && t.gone(trickle_ws));
    assert_eq!(t.closes(CloseReason::HandshakeTimeout), 2);
    assert!(t.hub.conn(ok_tcp).is_some() && t.hub.conn(ok_ws).is_some());
    assert_eq!(t.hub.inspect().gauges().get(Gauge::ConnectionsPending), 0);
}

#[test]
fn a_partial_line_that_sits_is_closed_and_its_bytes_leave_the_ledger() {
    let mut t = T::new(Limits {
        partial_timeout: Duration::from_millis(2_000),
        ..limits()
    });
    let c = t.open();
    t.send(c, r#"{"op":"subscribe","topic":"/a","type":"T"}"#);
    t.recv(c);
    t.hub.on_bytes(c, &[b' '; 10_000], t.now);
    assert_eq!(t.hub.memory().input, 10_000);
    for _ in 0..15 {
        t.hub.on_bytes(c, b" ", t.now);
        t.advance(100);
    }
    assert!(t.hub.conn(c).is_some(), "1.5 s: still within the limit");
    t.advance(600);
    assert!(t.gone(c));
    assert_eq!(t.closes(CloseReason::PartialTimeout), 1);
    assert_eq!(t.hub.memory().input, 0);
}

#[test]
fn the_idle_timeout_is_off_by_default_and_closes_when_set() {
    let mut t = T::new(limits());
    let c = t.open();
    t.send(c, r#"{"op":"subscribe","topic":"/a","type":"T"}"#);
    t.recv(c);
    t.advance(3_600_000);
    assert!(t.hub.conn(c).is_some(), "off by default");
    let mut t = T::new(Limits {
        idle_timeout: Some(Duration::from_millis(500)),
        ..limits()
    });
    let c = t.open();
    t.send(c, r#"{"op":"subscribe","topic":"/a","type":"T"}"#);
    t.recv(c);
    t.advance(300);
    t.send(c, r#"{"op":"subscribe","topic":"/b","type":"T"}"#);
    t.advance(300);
    assert!(t.hub.conn(c).is_some(), "input resets the clock");
    t.advance(300);
    assert!(t.gone(c));
    assert_eq!(t.closes(CloseReason::IdleTimeout), 1);
}

#[test]
fn control_data_above_the_soft_limit_for_too_long_closes() {
    let mut t = T::new(Limits {
        control_soft_bytes: 10_000,
        control_soft_time: Duration::from_millis(1_000),
        ..limits()
    });
    let slow = t.open();
    for _ in 0..200 {
        t.send(slow, r#"{"op":"nope"}"#);
    }
    assert!(t.hub.out(slow).is_some_and(|o| o.control_bytes() > 10_000));
    // It drains a little every now and then: progress, but not enough.
    for _ in 0..12 {
        t.hub.wrote(slow, 10, t.now);
        t.advance(100);
    }
    assert!(t.gone(slow));
    assert_eq!(t.closes(CloseReason::SlowConsumer), 1);
    assert_eq!(t.closes(CloseReason::WriteStall), 0);
}

#[test]
fn at_the_limit_the_oldest_unfinished_opening_gives_way() {
    let mut t = T::new(Limits {
        max_connections: 3,
        ..limits()
    });
    let a = t.open(); // never says anything
    let b = t.open();
    t.send(b, r#"{"op":"subscribe","topic":"/a","type":"T"}"#);
    let c = t.open(); // never says anything
    let d = t.open(); // evicts a
    t.free_closed();
    assert!(t.gone(a) && t.hub.conn(c).is_some() && t.hub.conn(d).is_some());
    assert_eq!(t.closes(CloseReason::Evicted), 1);
    t.send(c, r#"{"op":"subscribe","topic":"/a","type":"T"}"#);
    t.send(d, r#"{"op":"subscribe","topic":"/a","type":"T"}"#);
    // Everyone has opened: the next newcomer is refused.
    assert!(t.hub.open(t.now).is_none());
    assert_eq!(t.hub.counters().get(Counter::ConnectionsRejected), 1);
}

#[test]
fn non_loopback_peers_are_limited_per_address() {
    let mut t = T::new(Limits {
        max_connections_per_ip: 2,
        ..limits()
    });
    let far: std::net::SocketAddr = "192.0.2.7:40000".parse().expect("addr");
    let local: std::net::SocketAddr = "127.0.0.1:40001".parse().expect("addr");
    let a = t
        .hub
        .open_from(Transport::Tcp, Some(far), t.now)
        .expect("1");
    t.hub
        .open_from(Transport::Tcp, Some(far), t.now)
        .expect("2");
    let refused = t
        .hub
        .open_from(Transport::Tcp, Some(far), t.now)
        .expect_err("3");
    assert_eq!(refused.reason, CloseReason::PerIpLimit);
    assert!(
        String::from_utf8_lossy(&refused.frame).contains("too many connections from your address")
    );
    for _ in 0..5 {
        t.hub
            .open_from(Transport::Tcp, Some(local), t.now)
            .expect("loopback is not limited");
    }
    t.hub.close(a.key, CloseReason::PeerClosed, t.now);
    t.free_closed();
    t.hub
        .open_from(Transport::Tcp, Some(far), t.now)
        .expect("a slot came back");
}

#[test]
fn registrations_are_limited_per_connection() {
    let mut t = T::new(Limits {
        max_subscriptions_per_conn: 2,
        max_services_per_conn: 1,
        ..limits()
    });
    let c = t.open();
    for topic in ["/a", "/b", "/a"] {
        t.send(
            c,
            &format!(r#"{{"op":"subscribe","topic":"{topic}","type":"T"}}"#),
        );
    }
    assert!(t.recv(c).iter().all(|v| v["level"] == "info"));
    t.send(c, r#"{"op":"subscribe","topic":"/c","type":"T","id":"s3"}"#);
    let e = t.one(c);
    assert_eq!(
        (e["level"].as_str(), e["id"].as_str()),
        (Some("error"), Some("s3"))
    );
    assert_eq!(
        t.hub.counters().errors_of(ErrorCode::TooManyRegistrations),
        1
    );
    t.send(c, r#"{"op":"advertise_service","service":"/s","type":"T"}"#);
    t.send(c, r#"{"op":"advertise_service","service":"/s","type":"T"}"#);
    t.send(
        c,
        r#"{"op":"advertise_service","service":"/x","type":"T","id":9}"#,
    );
    let v = t.recv(c);
    assert_eq!(v[2]["id"], 9);
    assert_eq!(v[2]["level"], "error");
    assert_eq!(t.hub.inspect().registry().service_count(), 1);
}

#[test]
fn a_mass_time_out_is_spread_over_turns() {
    let mut t = T::new(Limits {
        max_calls_per_conn: 20_000,
        ..limits()
    });
    let p = t.provider("/s");
    let c = t.open();
    for i in 0..(crate::limits::EXPIRE_BUDGET + 5) {
        t.call(c, "/s", &i.to_string());
    }
    t.recv(p);
    t.now += Duration::from_secs(6);
    t.hub.expire(t.now);
    assert_eq!(t.recv(c).len(), crate::limits::EXPIRE_BUDGET);
    assert!(t.hub.has_backlog());
    t.hub.expire(t.now);
    assert_eq!(t.recv(c).len(), 5);
    assert!(!t.hub.has_backlog());
}

#[test]
fn shutdown_fails_calls_and_says_goodbye_after_queued_data() {
    let mut t = T::new(limits());
    let p = t.provider("/s");
    let c = t.open();
    t.call(c, "/s", "\"c1\"");
    t.recv(p);
    let ws = t.open_ws();
    t.hub.on_bytes(
        ws,
        &ws_text(br#"{"op":"subscribe","topic":"/t","type":"T"}"#),
        t.now,
    );
    t.send(p, r#"{"op":"publish","topic":"/t","msg":1}"#);
    t.hub.begin_shutdown(t.now);
    let r = t.one(c);
    assert_eq!(
        (r["id"].as_str(), r["result"].as_bool()),
        (Some("c1"), Some(false))
    );
    assert!(r["values"]
        .as_str()
        .is_some_and(|v| v.contains("shutting down")));
    assert_eq!(t.hub.counters().get(Counter::CallsFailedShutdown), 1);
    let raw = t.raw(ws);
    // The publish frame, then close 1001.
    assert!(raw.starts_with(&[0x81]), "{raw:?}");
    assert!(raw.ends_with(&[0x88, 2, 0x03, 0xE9]), "{raw:?}");
    // Input is ignored while draining.
    t.send(
        c,
        r#"{"op":"call_service","service":"/s","id":2,"args":{}}"#,
    );
    assert!(t.recv(c).is_empty() && t.recv(p).is_empty());
    assert!(t.hub.inspect().is_drained());
    t.hub.close_drained(t.now);
    t.free_closed();
    assert_eq!(t.hub.conn_count(), 0);
}

#[test]
fn a_connection_with_many_registrations_is_freed_over_several_calls() {
    let mut t = T::new(limits());
    let big = t.open();
    for i in 0..30 {
        t.send(
            big,
            &format!(r#"{{"op":"subscribe","topic":"/t{i}","type":"T"}}"#),
        );
    }
    t.recv(big);
    let p = t.open();
    t.hub.close(big, CloseReason::PeerClosed, t.now);
    let mut keys = Vec::new();
    t.hub.take_closing(&mut keys);
    assert_eq!(keys, vec![big]);
    assert_eq!(t.hub.free_some(big, t.now, 10), Freed::Partly(10));
    assert_eq!(t.hub.inspect().registry().subscription_count(), 20);
    // Half-freed, it gets nothing.
    t.send(p, r#"{"op":"publish","topic":"/t0","msg":1}"#);
    t.send(p, r#"{"op":"publish","topic":"/t29","msg":1}"#);
    assert!(t.hub.out(big).is_none_or(|o| o.is_empty()));
    assert_eq!(t.hub.free_some(big, t.now, 10), Freed::Partly(10));
    assert!(matches!(t.hub.free_some(big, t.now, 10), Freed::Done(_)));
    assert_eq!(t.hub.inspect().registry().subscription_count(), 0);
    assert_eq!(t.hub.conn_count(), 1);
    assert_eq!(t.hub.memory().registrations, 0);
}
