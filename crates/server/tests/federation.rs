//! Gateways federated over Zenoh (docs/federation.md): three real gateway
//! processes on loopback, joined by explicit Zenoh endpoints (no scouting),
//! talked to with raw bytes. Built only with the `zenoh` feature,
//! which `cargo test --workspace` turns on (rosgate-zenoh's
//! dev-dependency).

#[allow(dead_code)]
#[path = "it/fxclient.rs"]
mod fxclient;
#[allow(dead_code)]
#[path = "it/support.rs"]
mod support;
#[allow(dead_code)]
#[path = "it/wsclient.rs"]
mod wsclient;

use std::thread;
use std::time::{Duration, Instant};

use fxclient::*;
use serde_json::Value;
use support::*;

/// How long a change takes to cross at most (interest, presence): Zenoh
/// declarations travel in milliseconds on loopback; this is the bound a
/// test waits before it fails, not a sleep.
const CROSS: Duration = Duration::from_secs(10);

/// A free loopback port for a Zenoh listener (bound, then released).
fn free_port() -> u16 {
    free_zenoh_port()
}

fn endpoint(port: u16) -> String {
    format!("tcp/127.0.0.1:{port}")
}

/// A gateway listening for Zenoh on `port` and connecting to `peers`.
fn gateway(port: u16, peers: &[u16], extra: &[&str]) -> Gateway {
    let listen = endpoint(port);
    let mut args: Vec<String> = vec!["--zenoh-listen".into(), listen];
    for p in peers {
        args.push("--zenoh-connect".into());
        args.push(endpoint(*p));
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    Gateway::start(&refs)
}

/// `/rosgate/federation` of `gw` (as a client of its default domain).
fn federation(gw: &Gateway) -> Value {
    let mut c = gw.client();
    let id = format!("fed-{}", uniq());
    c.call("/rosgate/federation", &format!("{id:?}"), "{}");
    let (v, _) = c.recv_until(|v| v["id"] == id.as_str(), deadline(REPLY));
    assert_eq!(v["result"], true, "{v}");
    v["values"].clone()
}

/// Polls `gw`'s federation state until `pred` holds.
fn wait_federation(gw: &Gateway, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let dl = deadline(CROSS);
    loop {
        let v = federation(gw);
        if pred(&v) {
            return v;
        }
        assert!(Instant::now() < dl, "never `{what}` within {CROSS:?}: {v}");
        thread::sleep(ms(20));
    }
}

fn lists(v: &Value, field: &str, topic: &str) -> bool {
    v[field]
        .as_array()
        .is_some_and(|a| a.iter().any(|t| t == topic))
}

fn gateways(v: &Value) -> usize {
    v["gateways"].as_array().map_or(0, Vec::len)
}

/// Three gateways: A listens, B and C connect to A (and find each other
/// through Zenoh's gossip over those links).
fn trio(extra: &[&str]) -> (Gateway, Gateway, Gateway) {
    let (pa, pb, pc) = (free_port(), free_port(), free_port());
    let a = gateway(pa, &[], extra);
    let b = gateway(pb, &[pa], extra);
    let c = gateway(pc, &[pa], extra);
    for g in [&a, &b, &c] {
        wait_federation(g, "sees both others", |v| gateways(v) == 2);
    }
    (a, b, c)
}

fn subscribe(c: &mut Client, topic: &str) {
    let id = format!("s{}", uniq());
    c.send_line(&format!(
        r#"{{"op":"subscribe","topic":"{topic}","type":"std_msgs/msg/String","id":"{id}"}}"#
    ));
    c.expect_info(id.as_str());
}

fn publish_line(topic: &str, msg: &str) -> String {
    format!(r#"{{"op":"publish","topic":"{topic}","msg":{msg}}}"#)
}

/// The `msg` span of a delivered line, byte for byte.
fn msg_span(line: &str) -> &str {
    let at = line.find(r#""msg":"#).expect("a msg field") + 6;
    &line[at..line.len() - 1]
}

#[test]
fn topics_cross_byte_exact_in_order_to_every_interested_gateway() {
    let (a, b, c) = trio(&[]);
    let mut sub_b = b.client();
    let mut sub_c = c.client();
    subscribe(&mut sub_b, "/fed/chat");
    subscribe(&mut sub_c, "/fed/chat");
    wait_federation(&a, "B and C want /fed/chat", |v| {
        lists(v, "wanted_remotely", "/fed/chat")
    });
    // Both gateways' interest must be in before A publishes: wait until A
    // has told both (its bridge subscribed once; Zenoh matched twice) by
    // probing until each side hears a probe.
    let mut pubr = a.client();
    for sub in [&mut sub_b, &mut sub_c] {
        let dl = deadline(CROSS);
        loop {
            pubr.send_line(&publish_line("/fed/chat", r#"{"probe":true}"#));
            if let Recv::Line(_) = sub.try_recv_line(deadline(ms(100))) {
                break;
            }
            assert!(Instant::now() < dl, "no probe crossed within {CROSS:?}");
        }
    }
    // Drain probes still in flight: a barrier on each subscriber.
    thread::sleep(ms(300));
    for sub in [&mut sub_b, &mut sub_c] {
        while let Recv::Line(_) = sub.try_recv_line(deadline(ms(50))) {}
    }
    let msgs: Vec<String> = (0..200)
        .map(|i| format!(r#"{{ "n" : {i}, "s":"\u00e9\t\"x\"", "f": 1.50e3 , "a":[ ] }}"#))
        .collect();
    for m in &msgs {
        pubr.send_line(&publish_line("/fed/chat", m));
    }
    for sub in [&mut sub_b, &mut sub_c] {
        for m in &msgs {
            let line = sub.recv_raw(deadline(REPLY));
            assert_eq!(msg_span(&line), m, "byte for byte, in order");
        }
        sub.assert_quiet();
    }
}

#[test]
fn nothing_crosses_unless_another_gateway_listens_and_interest_follows_the_last_subscriber() {
    let (a, b, _c) = trio(&[]);
    let mut pubr = a.client();
    // Nobody anywhere listens: A publishes, nothing goes into Zenoh.
    for i in 0..50 {
        pubr.send_line(&publish_line("/fed/lazy", &format!(r#"{{"n":{i}}}"#)));
    }
    pubr.barrier();
    let before = counter(&a.stats(), "federation_out");
    assert_eq!(before, 0, "no samples without remote interest");
    // A local subscriber on A alone does not make A send anything either.
    let mut local = a.client();
    subscribe(&mut local, "/fed/lazy");
    pubr.send_line(&publish_line("/fed/lazy", r#"{"n":1}"#));
    local.recv_until(|v| v["op"] == "publish", deadline(REPLY));
    assert_eq!(counter(&a.stats(), "federation_out"), 0);
    // Two subscribers on B: one interest, one sample per publish.
    let mut s1 = b.client();
    let mut s2 = b.client();
    subscribe(&mut s1, "/fed/lazy");
    subscribe(&mut s2, "/fed/lazy");
    wait_federation(&a, "B wants /fed/lazy", |v| {
        lists(v, "wanted_remotely", "/fed/lazy")
    });
    wait_federation(&b, "B announced /fed/lazy", |v| {
        lists(v, "wanted_here", "/fed/lazy")
    });
    let dl = deadline(CROSS);
    loop {
        pubr.send_line(&publish_line("/fed/lazy", r#"{"probe":1}"#));
        if let Recv::Line(_) = s1.try_recv_line(deadline(ms(100))) {
            break;
        }
        assert!(Instant::now() < dl, "nothing crossed within {CROSS:?}");
    }
    thread::sleep(ms(300));
    for s in [&mut s1, &mut s2] {
        while let Recv::Line(_) = s.try_recv_line(deadline(ms(50))) {}
    }
    let out0 = counter(&a.stats(), "federation_out");
    let in0 = counter(&b.stats(), "federation_in");
    for i in 0..100 {
        pubr.send_line(&publish_line("/fed/lazy", &format!(r#"{{"n":{i}}}"#)));
    }
    for s in [&mut s1, &mut s2] {
        for i in 0..100 {
            let (v, _) = s.recv_until(|v| v["op"] == "publish", deadline(REPLY));
            assert_eq!(v["msg"]["n"], i);
        }
    }
    a.wait_for_stats("100 samples out, one per publish", |s| {
        counter(s, "federation_out") == out0 + 100
    });
    b.wait_for_stats("100 samples in", |s| {
        counter(s, "federation_in") == in0 + 100
    });
    // The last subscriber on B leaves: B withdraws, A stops sending.
    s1.send_line(r#"{"op":"unsubscribe","topic":"/fed/lazy","id":"u1"}"#);
    s1.expect_info("u1");
    wait_federation(&b, "still wanted while s2 listens", |v| {
        lists(v, "wanted_here", "/fed/lazy")
    });
    drop(s2);
    wait_federation(&b, "B withdrew /fed/lazy", |v| {
        !lists(v, "wanted_here", "/fed/lazy")
    });
    wait_federation(&a, "A saw the withdrawal", |v| {
        !lists(v, "wanted_remotely", "/fed/lazy")
    });
    let out1 = counter(&a.stats(), "federation_out");
    for i in 0..50 {
        pubr.send_line(&publish_line("/fed/lazy", &format!(r#"{{"n":{i}}}"#)));
    }
    local.recv_until(|v| v["msg"]["n"] == 49, deadline(REPLY));
    assert_eq!(
        counter(&a.stats(), "federation_out"),
        out1,
        "withdrawn: nothing sent"
    );
}

#[test]
fn a_message_reaches_each_subscriber_once_with_publishers_and_subscribers_everywhere() {
    let (a, b, c) = trio(&[]);
    let gws = [&a, &b, &c];
    let mut subs: Vec<Client> = gws.iter().map(|g| g.client()).collect();
    for s in subs.iter_mut() {
        subscribe(s, "/fed/mesh");
    }
    for g in gws {
        wait_federation(g, "both others want /fed/mesh", |v| {
            lists(v, "wanted_remotely", "/fed/mesh") && v["remote_interest_entries"] == 2
        });
    }
    let mut pubs: Vec<Client> = gws.iter().map(|g| g.client()).collect();
    // Warm up until every subscriber hears every gateway.
    let dl = deadline(CROSS);
    'warm: loop {
        for (i, p) in pubs.iter_mut().enumerate() {
            p.send_line(&publish_line("/fed/mesh", &format!(r#"{{"warm":{i}}}"#)));
        }
        thread::sleep(ms(100));
        let mut heard = [[false; 3]; 3];
        for (si, s) in subs.iter_mut().enumerate() {
            while let Recv::Line(l) = s.try_recv_line(deadline(ms(50))) {
                let v: Value = serde_json::from_slice(&l).expect("JSON");
                if let Some(w) = v["msg"]["warm"].as_u64() {
                    heard[si][w as usize] = true;
                }
            }
        }
        if heard.iter().all(|h| h.iter().all(|&x| x)) {
            break 'warm;
        }
        assert!(Instant::now() < dl, "the mesh never formed: {heard:?}");
    }
    thread::sleep(ms(300));
    for s in subs.iter_mut() {
        while let Recv::Line(_) = s.try_recv_line(deadline(ms(50))) {}
    }
    for (i, p) in pubs.iter_mut().enumerate() {
        for n in 0..20 {
            p.send_line(&publish_line(
                "/fed/mesh",
                &format!(r#"{{"from":{i},"n":{n}}}"#),
            ));
        }
    }
    for s in subs.iter_mut() {
        let mut next = [0u64; 3];
        for _ in 0..60 {
            let (v, _) = s.recv_until(|v| v["op"] == "publish", deadline(REPLY));
            let from = v["msg"]["from"].as_u64().expect("from") as usize;
            assert_eq!(
                v["msg"]["n"], next[from],
                "per-publisher order, no duplicate"
            );
            next[from] += 1;
        }
        assert_eq!(next, [20, 20, 20]);
        s.assert_quiet();
    }
}

#[test]
fn websocket_clients_and_domains_cross_as_tcp_ones_do() {
    let (pa, pb) = (free_port(), free_port());
    let a = gateway(pa, &[], &[]);
    let b = gateway(pb, &[pa], &["--tcp-domain", "3"]);
    wait_federation(&a, "sees B", |v| gateways(v) == 1);
    // A WebSocket subscriber on A (domain 0); a TCP publisher on B in
    // domain 3: different key spaces, nothing crosses.
    let mut ws = wsclient::Ws::connect(&a);
    ws.send_text(r#"{"op":"subscribe","topic":"/fed/ws","type":"std_msgs/msg/String"}"#);
    wait_federation(&a, "A announced /fed/ws", |v| {
        lists(v, "wanted_here", "/fed/ws")
    });
    let mut p3 = b.client();
    for i in 0..20 {
        p3.send_line(&publish_line("/fed/ws", &format!(r#"{{"d3":{i}}}"#)));
    }
    p3.barrier();
    assert_eq!(
        counter(&b.stats(), "federation_out"),
        0,
        "domain 3 is not domain 0"
    );
    // A WebSocket publisher on B in domain 0 (the URL's domain) reaches it.
    let mut ws_pub = wsclient::Ws::connect_at(&b, "/?domain=0", "");
    let dl = deadline(CROSS);
    loop {
        ws_pub.send_text(&publish_line("/fed/ws", r#"{"data":"over"}"#));
        if let Some((0x1, payload)) = ws.try_frame(deadline(ms(100))) {
            let v: Value = serde_json::from_slice(&payload).expect("JSON");
            assert_eq!(v["msg"]["data"], "over", "{v}");
            assert_eq!(v["topic"], "/fed/ws");
            break;
        }
        assert!(Instant::now() < dl, "nothing crossed within {CROSS:?}");
    }
}

#[test]
fn latched_messages_reach_a_late_subscriber_on_another_gateway() {
    let (pa, pb) = (free_port(), free_port());
    let a = gateway(pa, &[], &[]);
    let b = gateway(pb, &[pa], &[]);
    wait_federation(&a, "sees B", |v| gateways(v) == 1);
    let mut p = a.client();
    p.send_line(r#"{"op":"advertise","topic":"/fed/map","type":"std_msgs/msg/String","latch":true,"id":"adv"}"#);
    p.expect_info("adv");
    p.send_line(&publish_line("/fed/map", r#"{"data":"the map"}"#));
    p.barrier();
    let mut late = b.client();
    subscribe(&mut late, "/fed/map");
    let (v, _) = late.recv_until(|v| v["op"] == "publish", deadline(CROSS));
    assert_eq!(v["msg"]["data"], "the map");
    // A later subscriber on the same gateway gets it too (B keeps it), and
    // the first one gets no second copy.
    let mut later = b.client();
    subscribe(&mut later, "/fed/map");
    let (v, _) = later.recv_until(|v| v["op"] == "publish", deadline(REPLY));
    assert_eq!(v["msg"]["data"], "the map");
    late.assert_quiet();
    // A new latched message replaces it for everyone who comes next.
    p.send_line(&publish_line("/fed/map", r#"{"data":"map v2"}"#));
    for s in [&mut late, &mut later] {
        let (v, _) = s.recv_until(|v| v["op"] == "publish", deadline(REPLY));
        assert_eq!(v["msg"]["data"], "map v2");
    }
    let mut last = b.client();
    subscribe(&mut last, "/fed/map");
    let (v, _) = last.recv_until(|v| v["op"] == "publish", deadline(REPLY));
    assert_eq!(v["msg"]["data"], "map v2", "depth 1: only the newest");
    last.assert_quiet();
}

#[test]
fn a_killed_gateway_is_noticed_and_its_restart_resumes_the_flow() {
    let (pa, pb) = (free_port(), free_port());
    let a = gateway(pa, &[], &[]);
    let mut b = gateway(pb, &[pa], &[]);
    wait_federation(&a, "sees B", |v| gateways(v) == 1);
    let mut sub = b.client();
    subscribe(&mut sub, "/fed/alive");
    wait_federation(&a, "B wants /fed/alive", |v| {
        lists(v, "wanted_remotely", "/fed/alive")
    });
    b.signal(9);
    assert!(b.wait_exit(Duration::from_secs(5)).is_some(), "B died");
    let killed = Instant::now();
    wait_federation(&a, "B is gone, and so is its interest", |v| {
        gateways(v) == 0 && !lists(v, "wanted_remotely", "/fed/alive")
    });
    let noticed = killed.elapsed();
    assert!(
        noticed < Duration::from_millis(u64::from(3000u32) + 2000),
        "lost within the lease: {noticed:?}"
    );
    // B comes back on the same Zenoh port; A is not restarted.
    let b2 = gateway(pb, &[pa], &[]);
    wait_federation(&a, "sees B again", |v| gateways(v) == 1);
    let mut sub = b2.client();
    subscribe(&mut sub, "/fed/alive");
    let mut p = a.client();
    let dl = deadline(CROSS);
    loop {
        p.send_line(&publish_line("/fed/alive", r#"{"data":"again"}"#));
        if let Recv::Line(l) = sub.try_recv_line(deadline(ms(100))) {
            let v: Value = serde_json::from_slice(&l).expect("JSON");
            assert_eq!(v["msg"]["data"], "again");
            break;
        }
        assert!(
            Instant::now() < dl,
            "the flow never resumed within {CROSS:?}"
        );
    }
}

#[test]
fn bad_flags_stop_start_up_with_a_message() {
    let out = run(&[
        "--zenoh-mode",
        "mesh",
        "--listen",
        "127.0.0.1:0",
        "--ws-listen",
        "127.0.0.1:0",
    ]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--zenoh-mode") && err.contains("mesh"),
        "{err}"
    );
    let out = run(&[
        "--zenoh-config",
        "/nonexistent/zenoh.json5",
        "--listen",
        "127.0.0.1:0",
        "--ws-listen",
        "127.0.0.1:0",
    ]);
    assert_ne!(out.status.code(), Some(0), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/zenoh.json5"), "{err}");
}

/// Flags and files are checked before anything is bound: with both
/// listening ports taken, a bad `--zenoh-config` or `--interfaces` is
/// still what start-up reports, not the busy port.
#[test]
fn bad_flags_are_reported_before_a_busy_port() {
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let ws = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let (tcp, ws) = (
        tcp.local_addr().expect("addr").to_string(),
        ws.local_addr().expect("addr").to_string(),
    );
    for bad in [
        &["--zenoh-config", "/nonexistent/zenoh.json5"][..],
        &["--zenoh-mode", "mesh"],
        &[
            "--ros-domain",
            "0",
            "--interfaces",
            "/nonexistent/interfaces",
        ],
    ] {
        let mut args = bad.to_vec();
        args.extend(["--listen", &tcp, "--ws-listen", &ws]);
        let out = run(&args);
        // 2 for a file the flags name that cannot be read (a usage error),
        // 1 for one Zenoh refuses.
        assert!(
            matches!(out.status.code(), Some(1 | 2)),
            "{args:?}: {out:?}"
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(bad[bad.len() - 1]), "{args:?}: {err}");
        assert!(!err.contains("in use"), "{args:?}: {err}");
    }
}

/// The addresses `pid` listens on (TCP, v4 and v6), read from /proc: its
/// socket inodes matched against the kernel's tables of listening sockets.
fn listening(pid: u32) -> Vec<String> {
    let inodes: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .filter_map(|l| {
                    let l = l.to_string_lossy().into_owned();
                    Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_string())
                })
                .collect()
        })
        .unwrap_or_default();
    let mut out = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = std::fs::read_to_string(table).unwrap_or_default();
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            // local_address, st (0A = LISTEN), inode
            if f.len() > 9 && f[3] == "0A" && inodes.iter().any(|i| i == f[9]) {
                out.push(f[1].to_string());
            }
        }
    }
    out
}

/// A gateway given only `--zenoh-connect` listens for Zenoh on loopback
/// alone (Zenoh's own default for a peer is every interface), and its log
/// says where.
#[test]
fn zenoh_listens_on_loopback_only_unless_asked() {
    let gw = Gateway::start(&["--zenoh-connect", &endpoint(free_port())]);
    wait_federation(&gw, "is federated", |v| v["enabled"] == true);
    let addrs = listening(gw.pid());
    // The TCP and WebSocket listeners, and Zenoh's.
    assert!(addrs.len() >= 3, "{addrs:?}");
    // /proc writes IPv4 127.0.0.1 as 0100007F, IPv6 ::1 as 0...01000000.
    let loopback = |a: &str| {
        let host = a.split(':').next().unwrap_or_default();
        host == "0100007F" || host == "00000000000000000000000001000000"
    };
    assert!(addrs.iter().all(|a| loopback(a)), "{addrs:?}");
    // The log names the session's real locators: the port the system
    // chose, not the `:0` asked for.
    let logs = gw.logs().join("\n");
    let line = logs
        .lines()
        .find(|l| l.contains("listening on [\"tcp/127.0.0.1:"))
        .unwrap_or_else(|| panic!("no locator in the log: {logs}"));
    assert!(!line.contains("127.0.0.1:0\""), "{line}");
}

fn advertise_service(c: &mut Client, service: &str) {
    let id = format!("as{}", uniq());
    c.send_line(&format!(
        r#"{{"op":"advertise_service","service":"{service}","type":"example_interfaces/srv/AddTwoInts","id":"{id}"}}"#
    ));
    c.expect_info(id.as_str());
}

/// Waits until `gw` sees `service` provided (by a gateway of the
/// federation or locally): it is in rosapi's service list.
fn wait_service(gw: &Gateway, service: &str) {
    let dl = deadline(CROSS);
    let mut c = gw.client();
    loop {
        let id = format!("sv{}", uniq());
        c.call("/rosapi/services", &format!("{id:?}"), "{}");
        let (v, _) = c.recv_until(|v| v["id"] == id.as_str(), deadline(REPLY));
        if v["values"]["services"]
            .as_array()
            .is_some_and(|a| a.iter().any(|s| s == service))
        {
            return;
        }
        assert!(Instant::now() < dl, "{service} never provided: {v}");
        thread::sleep(ms(20));
    }
}

/// Answers every forwarded call of `provider` with `{"sum":a+b,"by":tag}`
/// until `n` were answered.
fn answer_calls(provider: &mut Client, n: usize, tag: &str) {
    for _ in 0..n {
        let (req, _) = provider.recv_until(|v| v["op"] == "call_service", deadline(REPLY));
        let sum = req["args"]["a"].as_i64().unwrap_or(0) + req["args"]["b"].as_i64().unwrap_or(0);
        provider.send_line(&format!(
            r#"{{"op":"service_response","service":{},"id":{},"values":{{"sum":{sum},"by":"{tag}"}},"result":true}}"#,
            req["service"], req["id"]
        ));
    }
}

#[test]
fn services_cross_each_call_answered_once_with_the_callers_own_id() {
    let (a, b, c) = trio(&[]);
    let mut provider = a.client();
    advertise_service(&mut provider, "/fed/add");
    wait_service(&b, "/fed/add");
    wait_service(&c, "/fed/add");
    let mut on_b = b.client();
    let mut on_c = c.client();
    // Ids of any JSON shape come back byte for byte.
    let ids_b: Vec<String> = (0..25).map(|i| format!(r#"{{"k":[{i},"b"]}}"#)).collect();
    let ids_c: Vec<String> = (0..25).map(|i| format!(r#""c-{i}""#)).collect();
    for (i, id) in ids_b.iter().enumerate() {
        on_b.call("/fed/add", id, &format!(r#"{{"a":{i},"b":1}}"#));
    }
    for (i, id) in ids_c.iter().enumerate() {
        on_c.call("/fed/add", id, &format!(r#"{{"a":{i},"b":2}}"#));
    }
    answer_calls(&mut provider, 50, "a");
    for (caller, ids, plus) in [(&mut on_b, &ids_b, 1), (&mut on_c, &ids_c, 2)] {
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..25 {
            let line = caller.recv_raw(deadline(REPLY));
            let v: Value = serde_json::from_str(&line).expect("JSON");
            assert_eq!(v["op"], "service_response", "{v}");
            assert_eq!(v["result"], true, "{v}");
            let i = ids
                .iter()
                .position(|id| line.contains(&format!(r#""id":{id}"#)));
            let i = i.unwrap_or_else(|| panic!("an id of this caller, byte for byte: {line}"));
            assert_eq!(v["values"]["sum"], i as i64 + plus, "{v}");
            assert!(seen.insert(i), "one answer per call: {line}");
        }
        caller.assert_quiet();
    }
    // Over WebSocket too.
    let mut ws = wsclient::Ws::connect(&b);
    ws.send_text(r#"{"op":"call_service","service":"/fed/add","id":"w1","args":{"a":40,"b":2}}"#);
    answer_calls(&mut provider, 1, "a");
    let v = ws.json();
    assert_eq!(v["id"], "w1", "{v}");
    assert_eq!(v["values"]["sum"], 42, "{v}");
}

#[test]
fn calls_fail_at_once_when_the_provider_or_its_whole_gateway_goes() {
    let (pa, pb) = (free_port(), free_port());
    let a = gateway(pa, &[], &[]);
    // A long call timeout on B: a failure within the test's bound is the
    // loss noticed, not the deadline.
    let b = gateway(pb, &[pa], &["--call-timeout-ms", "60000"]);
    wait_federation(&b, "sees A", |v| gateways(v) == 1);
    let mut provider = a.client();
    advertise_service(&mut provider, "/fed/slow");
    wait_service(&b, "/fed/slow");
    let mut caller = b.client();
    // The provider disconnects while holding the call.
    caller.call("/fed/slow", r#""p1""#, "{}");
    provider.recv_until(|v| v["op"] == "call_service", deadline(REPLY));
    let t = Instant::now();
    drop(provider);
    let (v, _) = caller.recv_until(|v| v["id"] == "p1", deadline(REPLY));
    assert_eq!(v["result"], false, "{v}");
    assert!(
        t.elapsed() < Duration::from_secs(3),
        "at once: {:?}",
        t.elapsed()
    );
    // A new provider; then its whole gateway is killed mid-call.
    let mut provider = a.client();
    advertise_service(&mut provider, "/fed/slow");
    wait_service(&b, "/fed/slow");
    caller.call("/fed/slow", r#""p2""#, "{}");
    provider.recv_until(|v| v["op"] == "call_service", deadline(REPLY));
    let t = Instant::now();
    a.signal(9);
    let (v, _) = caller.recv_until(|v| v["id"] == "p2", deadline(REPLY));
    assert_eq!(v["result"], false, "{v}");
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "at once: {:?}",
        t.elapsed()
    );
    // And the service is gone from B's graph: a new call fails at once.
    caller.call("/fed/slow", r#""p3""#, "{}");
    let (v, _) = caller.recv_until(|v| v["id"] == "p3", deadline(REPLY));
    assert_eq!(v["result"], false, "{v}");
}

#[test]
fn a_local_provider_wins_and_another_gateways_takes_over_when_it_leaves() {
    let (pa, pb) = (free_port(), free_port());
    let a = gateway(pa, &[], &[]);
    let b = gateway(pb, &[pa], &[]);
    wait_federation(&b, "sees A", |v| gateways(v) == 1);
    let mut remote = a.client();
    advertise_service(&mut remote, "/fed/both");
    wait_service(&b, "/fed/both");
    let mut local = b.client();
    advertise_service(&mut local, "/fed/both");
    let mut caller = b.client();
    caller.call("/fed/both", r#""l1""#, r#"{"a":1,"b":1}"#);
    answer_calls(&mut local, 1, "b");
    let (v, _) = caller.recv_until(|v| v["id"] == "l1", deadline(REPLY));
    assert_eq!(v["values"]["by"], "b", "the local provider: {v}");
    // A's gateway does not send B's callers elsewhere, and B's provider
    // is offered to A too: A's callers reach their own provider.
    let mut caller_a = a.client();
    caller_a.call("/fed/both", r#""r1""#, r#"{"a":1,"b":1}"#);
    answer_calls(&mut remote, 1, "a");
    let (v, _) = caller_a.recv_until(|v| v["id"] == "r1", deadline(REPLY));
    assert_eq!(v["values"]["by"], "a", "{v}");
    // B's provider leaves: B's callers go to A's.
    drop(local);
    let dl = deadline(CROSS);
    loop {
        let tok = format!("t{}", uniq());
        let id = format!("{tok:?}");
        caller.call("/fed/both", &id, r#"{"a":2,"b":2}"#);
        // Answered by A's provider once the call reaches it.
        if let Recv::Line(l) = remote.try_recv_line(deadline(ms(500))) {
            let req: Value = serde_json::from_slice(&l).expect("JSON");
            assert_eq!(req["op"], "call_service", "{req}");
            remote.send_line(&format!(
                r#"{{"op":"service_response","service":"/fed/both","id":{},"values":{{"sum":4,"by":"a"}},"result":true}}"#,
                req["id"]
            ));
        }
        let (v, _) = caller.recv_until(|v| v["id"] == tok.as_str(), deadline(REPLY));
        if v["result"] == true {
            assert_eq!(v["values"]["by"], "a", "{v}");
            break;
        }
        assert!(Instant::now() < dl, "A's provider never took over: {v}");
        thread::sleep(ms(20));
    }
}

/// Calls `service` on `c` with `args` and returns the answer.
fn call_values(c: &mut Client, service: &str, args: &str) -> Value {
    let tok = format!("pc{}", uniq());
    c.call(service, &format!("{tok:?}"), args);
    let (v, _) = c.recv_until(|v| v["id"] == tok.as_str(), deadline(REPLY));
    v
}

#[test]
fn parameters_of_a_node_on_another_gateway_are_read_and_set_with_its_owners_validation() {
    let (pa, pb) = (free_port(), free_port());
    let a = gateway(pa, &[], &[]);
    let b = gateway(pb, &[pa], &[]);
    wait_federation(&b, "sees A", |v| gateways(v) == 1);
    let mut owner = a.client();
    owner.send_line(r#"{"op":"declare_node","name":"controller","id":"n"}"#);
    owner.recv_until(|v| v["id"] == "n", deadline(REPLY));
    owner.send_line(
        r#"{"op":"declare_parameter","name":"max_vel","value":0.5,"validate":true,"id":"p1"}"#,
    );
    owner.expect_info("p1");
    wait_service(&b, "/controller/get_parameters");
    wait_service(&b, "/controller/set_parameters");
    let mut remote = b.client();
    let v = call_values(
        &mut remote,
        "/controller/get_parameters",
        r#"{"names":["max_vel"]}"#,
    );
    assert_eq!(v["result"], true, "{v}");
    assert_eq!(v["values"]["values"][0]["double_value"], 0.5, "{v}");
    // A change from B goes to the owner on A for validation: rejected.
    let tok = format!("ps{}", uniq());
    remote.call(
        "/controller/set_parameters",
        &format!("{tok:?}"),
        r#"{"parameters":[{"name":"max_vel","value":{"type":3,"double_value":1.9}}]}"#,
    );
    let (req, _) = owner.recv_until(|v| v["op"] == "call_service", deadline(REPLY));
    assert_eq!(req["service"], "/controller/validate_parameters", "{req}");
    owner.send_line(&format!(
        r#"{{"op":"service_response","service":"/controller/validate_parameters","id":{},"values":{{"successful":false,"reason":"too fast"}},"result":true}}"#,
        req["id"]
    ));
    let (v, _) = remote.recv_until(|v| v["id"] == tok.as_str(), deadline(REPLY));
    assert_eq!(v["values"]["results"][0]["successful"], false, "{v}");
    assert!(
        v["values"]["results"][0]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("too fast")),
        "{v}"
    );
    // Accepted: the value changes on A.
    let tok = format!("ps{}", uniq());
    remote.call(
        "/controller/set_parameters",
        &format!("{tok:?}"),
        r#"{"parameters":[{"name":"max_vel","value":{"type":3,"double_value":1.2}}]}"#,
    );
    let (req, _) = owner.recv_until(|v| v["op"] == "call_service", deadline(REPLY));
    owner.send_line(&format!(
        r#"{{"op":"service_response","service":"/controller/validate_parameters","id":{},"values":{{"successful":true,"reason":""}},"result":true}}"#,
        req["id"]
    ));
    let (v, _) = remote.recv_until(|v| v["id"] == tok.as_str(), deadline(REPLY));
    assert_eq!(v["values"]["results"][0]["successful"], true, "{v}");
    let mut local = a.client();
    let v = call_values(
        &mut local,
        "/controller/get_parameters",
        r#"{"names":["max_vel"]}"#,
    );
    assert_eq!(v["values"]["values"][0]["double_value"], 1.2, "{v}");
    // The node goes: its services leave B's graph and calls fail at once.
    drop(owner);
    let dl = deadline(CROSS);
    loop {
        let v = call_values(&mut remote, "/controller/get_parameters", r#"{"names":[]}"#);
        if v["result"] == false {
            break;
        }
        assert!(Instant::now() < dl, "the node's services never left B: {v}");
        thread::sleep(ms(20));
    }
}

/// rosapi `get_param`/`set_param` and `rosgate param set` on gateway B,
/// for a node whose parameters a client of gateway A owns: every request
/// reaches the owner and its rules (B keeps no copy of its own), a refusal
/// is a failure with the owner's reason (the CLI exits 1), and both
/// gateways read the same value afterwards.
#[test]
fn rosapi_and_the_cli_reach_the_owner_of_a_node_on_another_gateway() {
    let (pa, pb) = (free_port(), free_port());
    let a = gateway(pa, &[], &[]);
    let b = gateway(pb, &[pa], &[]);
    wait_federation(&b, "sees A", |v| gateways(v) == 1);
    let mut owner = a.client();
    owner.send_line(r#"{"op":"declare_node","name":"arm","id":"n"}"#);
    owner.recv_until(|v| v["id"] == "n", deadline(REPLY));
    owner.send_line(r#"{"op":"declare_parameter","name":"gain","value":1.5,"id":"p1"}"#);
    owner.expect_info("p1");
    wait_service(&b, "/arm/set_parameters");
    wait_service(&b, "/arm/get_parameters");
    let get = |gw: &Gateway| {
        let mut c = gw.client();
        call_values(&mut c, "/rosapi/get_param", r#"{"name":"/arm:gain"}"#)
    };
    let v = get(&b);
    assert_eq!(v["result"], true, "{v}");
    assert_eq!(v["values"]["value"], "1.5", "{v}");
    // A set through B reaches A.
    let mut remote = b.client();
    let v = call_values(
        &mut remote,
        "/rosapi/set_param",
        r#"{"name":"/arm:gain","value":"2.5"}"#,
    );
    assert_eq!(v["result"], true, "{v}");
    assert_eq!(get(&a)["values"]["value"], "2.5");
    assert_eq!(get(&b)["values"]["value"], "2.5");
    // A value of the wrong type is refused by A's rules, with the reason,
    // and changes nothing on either gateway.
    let v = call_values(
        &mut remote,
        "/rosapi/set_param",
        r#"{"name":"/arm:gain","value":"\"fast\""}"#,
    );
    assert_eq!(v["result"], false, "{v}");
    assert!(v["values"].as_str().is_some_and(|r| !r.is_empty()), "{v}");
    assert_eq!(get(&a)["values"]["value"], "2.5");
    assert_eq!(get(&b)["values"]["value"], "2.5");
    // The CLI through B: the owner's answer, exit 0 or 1.
    let url = format!("tcp://{}", b.addr);
    let out = run(&["param", "set", "/arm", "gain", "3.0", "--url", &url]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("Set parameter successful"));
    assert_eq!(get(&a)["values"]["value"], "3.0");
    let out = run(&["param", "set", "/arm", "gain", "fast", "--url", &url]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Setting parameter failed"),
        "{out:?}"
    );
    assert_eq!(get(&a)["values"]["value"], "3.0");
    let out = run(&["param", "get", "/arm", "gain", "--url", &url]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("Double value is: 3.0"),
        "{out:?}"
    );
    // get_param_names on B lists A's node's parameter (from A's graph),
    // once, beside B's own held one.
    let v = call_values(
        &mut remote,
        "/rosapi/set_param",
        r#"{"name":"/loose:x","value":"1"}"#,
    );
    assert_eq!(v["result"], true, "{v}");
    let dl = deadline(CROSS);
    loop {
        let v = call_values(&mut remote, "/rosapi/get_param_names", "{}");
        let names: Vec<&str> = v["values"]["names"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        if names.contains(&"/arm:gain") {
            assert_eq!(
                names.iter().filter(|n| **n == "/arm:gain").count(),
                1,
                "{v}"
            );
            assert!(names.contains(&"/loose:x"), "{v}");
            break;
        }
        assert!(Instant::now() < dl, "B never listed A's parameter: {v}");
        thread::sleep(ms(50));
    }
}

/// Waits until `gw` lists `action` among its action servers.
fn wait_action(gw: &Gateway, action: &str) {
    let dl = deadline(CROSS);
    let mut c = gw.client();
    loop {
        let v = call_values(&mut c, "/rosapi/action_servers", "{}");
        if v["values"]["action_servers"]
            .as_array()
            .is_some_and(|a| a.iter().any(|s| s == action))
        {
            return;
        }
        assert!(Instant::now() < dl, "{action} never served: {v}");
        thread::sleep(ms(20));
    }
}

#[test]
fn action_goals_feedback_results_and_cancels_cross_gateways() {
    let (pa, pb) = (free_port(), free_port());
    let a = gateway(pa, &[], &[]);
    let b = gateway(pb, &[pa], &[]);
    wait_federation(&b, "sees A", |v| gateways(v) == 1);
    let mut server = a.client();
    server.send_line(r#"{"op":"advertise_action","action":"/fed/fib","type":"example_interfaces/action/Fibonacci","id":"aa"}"#);
    server.expect_info("aa");
    wait_action(&b, "/fed/fib");
    let mut caller = b.client();
    // A goal with feedback, then its result, under the caller's id.
    caller.send_line(r#"{"op":"send_action_goal","id":"g1","action":"/fed/fib","action_type":"example_interfaces/action/Fibonacci","args":{"order":3},"feedback":true}"#);
    let (goal, _) = server.recv_until(|v| v["op"] == "send_action_goal", deadline(REPLY));
    assert_eq!(goal["args"], serde_json::json!({"order":3}), "{goal}");
    let gid = goal["id"].clone();
    for fb in [r#"{"sequence":[0, 1]}"#, r#"{"sequence":[0, 1, 1]}"#] {
        server.send_line(&format!(
            r#"{{"op":"action_feedback","id":{gid},"action":"/fed/fib","values":{fb}}}"#
        ));
        let line = caller.recv_raw(deadline(REPLY));
        let v: Value = serde_json::from_str(&line).expect("JSON");
        assert_eq!(v["op"], "action_feedback", "{v}");
        assert_eq!(v["id"], "g1", "{v}");
        assert!(
            line.contains(&format!(r#""values":{fb}"#)),
            "byte for byte: {line}"
        );
    }
    server.send_line(&format!(
        r#"{{"op":"action_result","id":{gid},"action":"/fed/fib","values":{{"sequence":[0,1,1,2]}},"status":4,"result":true}}"#
    ));
    let (v, _) = caller.recv_until(|v| v["op"] == "action_result", deadline(REPLY));
    assert_eq!(v["id"], "g1", "{v}");
    assert_eq!(v["status"], 4, "{v}");
    assert_eq!(v["result"], true, "{v}");
    assert_eq!(v["values"]["sequence"], serde_json::json!([0, 1, 1, 2]));
    caller.assert_quiet();
    // A cancel from the caller reaches the server; its answer ends the goal.
    caller.send_line(r#"{"op":"send_action_goal","id":"g2","action":"/fed/fib","action_type":"example_interfaces/action/Fibonacci","args":{"order":9},"feedback":true}"#);
    let (goal, _) = server.recv_until(|v| v["op"] == "send_action_goal", deadline(REPLY));
    let gid = goal["id"].clone();
    caller.send_line(r#"{"op":"cancel_action_goal","id":"g2","action":"/fed/fib"}"#);
    let (cancel, _) = server.recv_until(|v| v["op"] == "cancel_action_goal", deadline(REPLY));
    assert_eq!(cancel["id"], gid, "{cancel}");
    server.send_line(&format!(
        r#"{{"op":"action_result","id":{gid},"action":"/fed/fib","values":{{"sequence":[]}},"status":5,"result":true}}"#
    ));
    let (v, _) = caller.recv_until(|v| v["op"] == "action_result", deadline(REPLY));
    assert_eq!(
        (v["id"].clone(), v["status"].clone()),
        (serde_json::json!("g2"), serde_json::json!(5)),
        "{v}"
    );
    // The server leaves mid-goal: the goal ends at once, aborted.
    caller.send_line(r#"{"op":"send_action_goal","id":"g3","action":"/fed/fib","action_type":"example_interfaces/action/Fibonacci","args":{"order":9},"feedback":true}"#);
    server.recv_until(|v| v["op"] == "send_action_goal", deadline(REPLY));
    let t = Instant::now();
    drop(server);
    let (v, _) = caller.recv_until(|v| v["op"] == "action_result", deadline(REPLY));
    assert_eq!(v["id"], "g3", "{v}");
    assert_eq!(v["status"], 6, "{v}");
    assert_eq!(v["result"], false, "{v}");
    assert!(
        t.elapsed() < Duration::from_secs(3),
        "at once: {:?}",
        t.elapsed()
    );
}

fn rosapi_list(gw: &Gateway, service: &str, field: &str) -> Vec<String> {
    let mut c = gw.client();
    let v = call_values(&mut c, &format!("/rosapi/{service}"), "{}");
    v["values"][field]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn introspection_on_any_gateway_shows_the_federations_graph_marked_by_gateway() {
    let (a, b, c) = trio(&[]);
    let mut talker = a.client();
    talker.send_line(r#"{"op":"declare_node","name":"talker","namespace":"/robot_a","id":"n"}"#);
    talker.recv_until(|v| v["id"] == "n", deadline(REPLY));
    talker
        .send_line(r#"{"op":"advertise","topic":"odom","type":"nav_msgs/msg/Odometry","id":"ad"}"#);
    talker.expect_info("ad");
    let zid_a = federation(&a)["gateway"]
        .as_str()
        .expect("A's id")
        .to_string();
    // Both other gateways list A's node and topic, with its type.
    for g in [&b, &c] {
        let dl = deadline(CROSS);
        loop {
            let topics = rosapi_list(g, "topics", "topics");
            let nodes = rosapi_list(g, "nodes", "nodes");
            if topics.iter().any(|t| t == "/robot_a/odom")
                && nodes.iter().any(|n| n == "/robot_a/talker")
            {
                break;
            }
            assert!(
                Instant::now() < dl,
                "A's graph never reached: {topics:?} {nodes:?}"
            );
            thread::sleep(ms(20));
        }
        let mut cl = g.client();
        let v = call_values(
            &mut cl,
            "/rosapi/topic_type",
            r#"{"topic":"/robot_a/odom"}"#,
        );
        assert_eq!(v["values"]["type"], "nav_msgs/msg/Odometry", "{v}");
        let f = federation(g);
        let graph = f["graphs"]
            .as_array()
            .and_then(|gs| gs.iter().find(|x| x["gateway"] == zid_a.as_str()))
            .unwrap_or_else(|| panic!("A's graph, marked with A's id: {f}"));
        assert!(
            graph["nodes"]
                .as_array()
                .is_some_and(|n| n.iter().any(|x| x == "/robot_a/talker")),
            "{graph}"
        );
    }
    // The node goes: it leaves the others' graphs.
    drop(talker);
    let dl = deadline(CROSS);
    while rosapi_list(&c, "nodes", "nodes")
        .iter()
        .any(|n| n == "/robot_a/talker")
    {
        assert!(Instant::now() < dl, "A's node never left C's graph");
        thread::sleep(ms(20));
    }
    // A gateway that dies takes its whole graph with it.
    let mut again = a.client();
    again.send_line(r#"{"op":"declare_node","name":"talker2","namespace":"/robot_a","id":"n2"}"#);
    again.recv_until(|v| v["id"] == "n2", deadline(REPLY));
    let dl = deadline(CROSS);
    while !rosapi_list(&c, "nodes", "nodes")
        .iter()
        .any(|n| n == "/robot_a/talker2")
    {
        assert!(Instant::now() < dl, "talker2 never reached C");
        thread::sleep(ms(20));
    }
    a.signal(9);
    let dl = deadline(CROSS);
    while rosapi_list(&c, "nodes", "nodes")
        .iter()
        .any(|n| n == "/robot_a/talker2")
    {
        assert!(
            Instant::now() < dl,
            "a dead gateway's nodes never left C's graph"
        );
        thread::sleep(ms(20));
    }
    let _ = b;
}

/// Two hosts: a network namespace joined to this one by a veth pair,
/// removed (with the pair) when dropped.
struct Netns {
    name: String,
    host_if: String,
}

impl Netns {
    /// `None` (with the reason) where namespaces cannot be made: not root,
    /// no `ip`, or a sandbox that forbids them.
    fn create(tag: u32) -> Result<Netns, String> {
        let name = format!("rgfed{tag}");
        let (host_if, ns_if) = (format!("rga{tag}"), format!("rgb{tag}"));
        let net = format!("10.{}.{}", 100 + tag / 250 % 100, tag % 250);
        let run = |args: &[&str]| -> Result<(), String> {
            let out = std::process::Command::new("ip")
                .args(args)
                .output()
                .map_err(|e| format!("ip {args:?}: {e}"))?;
            if out.status.success() {
                Ok(())
            } else {
                Err(format!(
                    "ip {args:?}: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ))
            }
        };
        run(&["netns", "add", &name])?;
        let ns = Netns {
            name: name.clone(),
            host_if: host_if.clone(),
        };
        run(&[
            "link", "add", &host_if, "type", "veth", "peer", "name", &ns_if,
        ])?;
        run(&["link", "set", &ns_if, "netns", &name])?;
        run(&["addr", "add", &format!("{net}.1/24"), "dev", &host_if])?;
        run(&["link", "set", &host_if, "up"])?;
        let exec = |args: &[&str]| {
            let mut all = vec!["netns", "exec", &name, "ip"];
            all.extend_from_slice(args);
            run(&all)
        };
        exec(&["addr", "add", &format!("{net}.2/24"), "dev", &ns_if])?;
        exec(&["link", "set", &ns_if, "up"])?;
        exec(&["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    fn host_ip(&self, tag: u32) -> String {
        format!("10.{}.{}.1", 100 + tag / 250 % 100, tag % 250)
    }

    fn ns_ip(&self, tag: u32) -> String {
        format!("10.{}.{}.2", 100 + tag / 250 % 100, tag % 250)
    }

    /// Cuts (`false`) or restores the link between the two hosts.
    fn link(&self, up: bool) {
        let state = if up { "up" } else { "down" };
        let ok = std::process::Command::new("ip")
            .args(["link", "set", &self.host_if, state])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "ip link set {} {state}", self.host_if);
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Deleting the namespace deletes the pair's end in it, and so the pair.
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
        let _ = std::process::Command::new("ip")
            .args(["link", "del", &self.host_if])
            .status();
    }
}

#[test]
fn gateways_on_two_hosts_survive_a_partition_and_heal_by_themselves() {
    let tag = std::process::id() % 20_000;
    let net = match Netns::create(tag) {
        Ok(n) => n,
        Err(why) => {
            eprintln!("skipped: network namespaces are not available here ({why})");
            return;
        }
    };
    let (zport, port_b) = (free_port(), free_port());
    // A private link between two namespaces of this machine: beyond
    // loopback, so it is allowed by name.
    let a = Gateway::start(&[
        "--zenoh-listen",
        &format!("tcp/{}:{zport}", net.host_ip(tag)),
        "--allow-unauthenticated-network",
    ]);
    let b = Gateway::spawn_in_netns(
        &net.name,
        &[
            "--listen",
            &format!("{}:{port_b}", net.ns_ip(tag)),
            "--ws-listen",
            "off",
            "--allow-unauthenticated-network",
            "--zenoh-connect",
            &format!("tcp/{}:{zport}", net.host_ip(tag)),
        ],
    )
    .unwrap_or_else(|e| panic!("gateway B in {}: {e}", net.name));
    wait_federation(&a, "sees B across the link", |v| gateways(v) == 1);
    let mut sub = Client::connect_addr(b.addr);
    subscribe(&mut sub, "/part/x");
    let mut p = a.client();
    let flows = |p: &mut Client, sub: &mut Client| {
        let dl = deadline(CROSS);
        loop {
            p.send_line(&publish_line("/part/x", r#"{"data":1}"#));
            if let Recv::Line(_) = sub.try_recv_line(deadline(ms(100))) {
                return;
            }
            assert!(Instant::now() < dl, "nothing crossed within {CROSS:?}");
        }
    };
    flows(&mut p, &mut sub);
    // Partition: A loses B within the lease (3 s), and with it B's
    // interest: A stops sending.
    net.link(false);
    let cut = Instant::now();
    wait_federation(&a, "lost B", |v| {
        gateways(v) == 0 && !lists(v, "wanted_remotely", "/part/x")
    });
    let lost_after = cut.elapsed();
    assert!(
        lost_after < Duration::from_millis(3000 + 3000),
        "lost within the lease: {lost_after:?}"
    );
    eprintln!("partition noticed after {lost_after:?}");
    let out = counter(&a.stats(), "federation_out");
    for _ in 0..20 {
        p.send_line(&publish_line("/part/x", r#"{"data":2}"#));
    }
    p.barrier();
    assert_eq!(
        counter(&a.stats(), "federation_out"),
        out,
        "nothing sent into a cut link"
    );
    // Heal: B reconnects by itself, its interest comes back, the flow resumes.
    net.link(true);
    let healed = Instant::now();
    wait_federation(&a, "sees B again", |v| {
        gateways(v) == 1 && lists(v, "wanted_remotely", "/part/x")
    });
    eprintln!("heal noticed after {:?}", healed.elapsed());
    while let Recv::Line(_) = sub.try_recv_line(deadline(ms(50))) {}
    flows(&mut p, &mut sub);
}

#[test]
fn a_publishers_peer_count_counts_every_remote_subscriber() {
    let (a, b, c) = trio(&[]);
    let mut cam = a.client();
    cam.send_line(r#"{"op":"advertise","topic":"/fed/cam","type":"sensor_msgs/msg/Image","peers":true,"id":"adv"}"#);
    // Waits until the publisher is told `n`.
    let told = |cam: &mut Client, n: u64| {
        let dl = deadline(CROSS);
        loop {
            let (v, _) = cam.recv_until(|v| v["op"] == "peers", dl);
            if v["subscribers"] == n {
                return;
            }
        }
    };
    told(&mut cam, 0);
    let mut on_b: Vec<Client> = (0..2).map(|_| b.client()).collect();
    let mut on_c = c.client();
    for s in on_b.iter_mut() {
        subscribe(s, "/fed/cam");
    }
    subscribe(&mut on_c, "/fed/cam");
    let mut local = a.client();
    subscribe(&mut local, "/fed/cam");
    told(&mut cam, 4);
    drop(on_b.pop());
    told(&mut cam, 3);
    drop(on_b);
    drop(on_c);
    told(&mut cam, 1);
    drop(local);
    told(&mut cam, 0);
}

#[test]
fn the_cli_lists_the_gateways_of_a_federation() {
    let (pa, pb) = (free_port(), free_port());
    let a = gateway(pa, &[], &[]);
    let b = gateway(pb, &[pa], &[]);
    wait_federation(&a, "sees B", |v| gateways(v) == 1);
    let mut talker = b.client();
    talker.send_line(r#"{"op":"declare_node","name":"cam","id":"n"}"#);
    talker.recv_until(|v| v["id"] == "n", deadline(REPLY));
    let zid_a = federation(&a)["gateway"].as_str().expect("id").to_string();
    let zid_b = federation(&b)["gateway"].as_str().expect("id").to_string();
    let url = format!("tcp://{}", a.addr);
    let dl = deadline(CROSS);
    loop {
        let out = run(&["gateway", "list", "-v", "--url", &url]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_eq!(out.status.code(), Some(0), "{text} {out:?}");
        let first = text.lines().next().unwrap_or_default();
        assert!(
            first.starts_with(&zid_a) && first.contains("this gateway"),
            "{text}"
        );
        if text.contains(&zid_b) && text.contains("node  /cam") {
            break;
        }
        assert!(Instant::now() < dl, "B and its node never listed: {text}");
        thread::sleep(ms(50));
    }
    // Without federation: says so, exit 1.
    let plain = Gateway::start(&[]);
    let out = run(&["gateway", "list", "--url", &format!("tcp://{}", plain.addr)]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not federated"),
        "{out:?}"
    );
}

/// A self-signed certificate for `localhost` (it is its own CA), as PEM
/// files in a fresh temp dir: (dir, cert, key).
fn localhost_cert(tag: &str) -> (std::path::PathBuf, String, String) {
    let dir = std::env::temp_dir().join(format!("rosgate-fed-tls-{tag}-{}", uniq()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let made = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("rcgen");
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert, made.cert.pem()).expect("write cert");
    std::fs::write(&key, made.key_pair.serialize_pem()).expect("write key");
    (dir, cert.display().to_string(), key.display().to_string())
}

/// A Zenoh config file in `dir` with this TLS section.
fn zenoh_tls_config(dir: &std::path::Path, name: &str, tls: &str) -> String {
    let path = dir.join(name);
    std::fs::write(
        &path,
        format!("{{ transport: {{ link: {{ tls: {{ {tls} }} }} }} }}"),
    )
    .expect("write config");
    path.display().to_string()
}

#[test]
fn gateways_link_over_zenoh_tls_and_refuse_an_untrusted_certificate() {
    let (dir, cert, key) = localhost_cert("server");
    let listen_cfg = zenoh_tls_config(
        &dir,
        "a.json5",
        &format!("listen_certificate: {cert:?}, listen_private_key: {key:?}"),
    );
    let trust_cfg = zenoh_tls_config(&dir, "b.json5", &format!("root_ca_certificate: {cert:?}"));
    let zport = free_port();
    let endpoint = format!("tls/localhost:{zport}");
    let a = Gateway::start(&["--zenoh-config", &listen_cfg, "--zenoh-listen", &endpoint]);
    let b = Gateway::start(&["--zenoh-config", &trust_cfg, "--zenoh-connect", &endpoint]);
    wait_federation(&a, "B joined over TLS", |v| gateways(v) == 1);
    let mut sub = b.client();
    subscribe(&mut sub, "/fed/tls");
    let mut p = a.client();
    let dl = deadline(CROSS);
    loop {
        p.send_line(&publish_line("/fed/tls", r#"{"data":"sealed"}"#));
        if let Recv::Line(l) = sub.try_recv_line(deadline(ms(100))) {
            let v: Value = serde_json::from_slice(&l).expect("JSON");
            assert_eq!(v["msg"]["data"], "sealed");
            break;
        }
        assert!(
            Instant::now() < dl,
            "nothing crossed the TLS link within {CROSS:?}"
        );
    }
    // A gateway that trusts another CA is refused by its own TLS check:
    // it never joins (A keeps seeing only B).
    let (other_dir, other_cert, _) = localhost_cert("other");
    let wrong_cfg = zenoh_tls_config(
        &other_dir,
        "c.json5",
        &format!("root_ca_certificate: {other_cert:?}"),
    );
    let c = Gateway::start(&["--zenoh-config", &wrong_cfg, "--zenoh-connect", &endpoint]);
    let dl = deadline(Duration::from_secs(3));
    while Instant::now() < dl {
        assert_eq!(gateways(&federation(&a)), 1, "an untrusted gateway joined");
        assert_eq!(
            gateways(&federation(&c)),
            0,
            "C saw a gateway it cannot trust"
        );
        thread::sleep(ms(200));
    }
    let _ = std::fs::remove_dir_all(dir);
    let _ = std::fs::remove_dir_all(other_dir);
}

/// A Zenoh endpoint the exposure check counts as beyond this machine that
/// reaches nothing outside it: Linux connects 0.0.0.0 to the host itself,
/// where nothing listens on port 1 (Zenoh keeps retrying).
const UNREACHABLE: &str = "tcp/0.0.0.0:1";

/// Zenoh reaching beyond this machine without authentication is refused at
/// start-up, before anything is bound, unless asked for by name; mutual TLS
/// or user/password authentication in `--zenoh-config` is enough.
#[test]
fn zenoh_beyond_loopback_without_authentication_is_refused_unless_allowed() {
    let plain = ["--listen", "127.0.0.1:0", "--ws-listen", "127.0.0.1:0"];
    for exposed in [
        &["--zenoh-listen", "tcp/0.0.0.0:0"][..],
        &["--zenoh-connect", UNREACHABLE],
        &["--zenoh-connect", "tcp/127.0.0.1:7447", "--zenoh-scouting"],
    ] {
        let mut args = exposed.to_vec();
        args.extend(plain);
        let out = run(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("refusing") && err.contains("--allow-unauthenticated-network"),
            "{args:?}: {err}"
        );
    }
    // Allowed by name: it starts (and sends nothing out: see UNREACHABLE).
    let gw = Gateway::start(&[
        "--zenoh-connect",
        UNREACHABLE,
        "--allow-unauthenticated-network",
    ]);
    wait_federation(&gw, "is federated", |v| v["enabled"] == true);
    drop(gw);
    // With credentials to show, a connection beyond loopback is allowed.
    let dir = std::env::temp_dir().join(format!("rosgate-fed-usr-{}", uniq()));
    std::fs::create_dir_all(&dir).expect("dir");
    let cfg = dir.join("usr.json5");
    std::fs::write(
        &cfg,
        r#"{ transport: { auth: { usrpwd: { user: "gw", password: "a-long-secret" } } } }"#,
    )
    .expect("write");
    let cfg = cfg.display().to_string();
    let gw = Gateway::start(&["--zenoh-config", &cfg, "--zenoh-connect", UNREACHABLE]);
    wait_federation(&gw, "is federated", |v| v["enabled"] == true);
    let _ = std::fs::remove_dir_all(dir);
}

/// Zenoh's user/password authentication works in this build: a gateway
/// that listens with a dictionary admits the gateway with the right
/// password and refuses one with a wrong one.
#[test]
fn gateways_join_with_the_right_zenoh_password_only() {
    let dir = std::env::temp_dir().join(format!("rosgate-fed-usrpwd-{}", uniq()));
    std::fs::create_dir_all(&dir).expect("dir");
    let users = dir.join("users.txt");
    std::fs::write(&users, "gw-b:right-password\n").expect("write");
    let cfg = |name: &str, body: String| {
        let p = dir.join(name);
        std::fs::write(&p, body).expect("write");
        p.display().to_string()
    };
    let a_cfg = cfg(
        "a.json5",
        format!(
            "{{ transport: {{ auth: {{ usrpwd: {{ user: \"gw-a\", password: \"a-password\", dictionary_file: {:?} }} }} }} }}",
            users.display().to_string()
        ),
    );
    let creds = |user: &str, pw: &str| {
        format!("{{ transport: {{ auth: {{ usrpwd: {{ user: {user:?}, password: {pw:?} }} }} }} }}")
    };
    let b_cfg = cfg("b.json5", creds("gw-b", "right-password"));
    let c_cfg = cfg("c.json5", creds("gw-b", "wrong-password"));
    let zport = free_port();
    let a = Gateway::start(&["--zenoh-config", &a_cfg, "--zenoh-listen", &endpoint(zport)]);
    let b = Gateway::start(&[
        "--zenoh-config",
        &b_cfg,
        "--zenoh-connect",
        &endpoint(zport),
    ]);
    wait_federation(&a, "B joined with its password", |v| gateways(v) == 1);
    wait_federation(&b, "B sees A", |v| gateways(v) == 1);
    let c = Gateway::start(&[
        "--zenoh-config",
        &c_cfg,
        "--zenoh-connect",
        &endpoint(zport),
    ]);
    let dl = deadline(Duration::from_secs(3));
    while Instant::now() < dl {
        assert_eq!(gateways(&federation(&a)), 1, "a wrong password joined");
        assert_eq!(
            gateways(&federation(&c)),
            0,
            "C joined with a wrong password"
        );
        thread::sleep(ms(200));
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// A Zenoh session that is no gateway, joined to the one listening on
/// `port`: what an attacker on the network has.
fn raw_peer(port: u16) -> zenoh::Session {
    use zenoh::Wait;
    let mut c = zenoh::Config::default();
    for (k, v) in [
        ("mode", r#""peer""#.to_string()),
        ("connect/endpoints", format!("[{:?}]", endpoint(port))),
        ("listen/endpoints", "[]".to_string()),
        ("scouting/multicast/enabled", "false".to_string()),
    ] {
        c.insert_json5(k, &v)
            .unwrap_or_else(|e| panic!("zenoh config {k}: {e}"));
    }
    zenoh::open(c).wait().expect("open a zenoh session")
}

fn graph_of<'a>(v: &'a Value, gw: &str) -> Option<&'a Value> {
    v["graphs"].as_array()?.iter().find(|g| g["gateway"] == gw)
}

/// A Zenoh peer announcing graphs under invented gateway ids, without a
/// presence token, makes the gateway hold nothing (ignored and counted);
/// with a token, what it announces is bounded per gateway (the rest
/// refused and counted), in the memory ledger, and dropped when the token
/// goes.
#[test]
fn graphs_come_only_from_present_gateways_within_their_bound_and_go_with_them() {
    use zenoh::Wait;
    let zport = free_port();
    let a = gateway(zport, &[], &[]);
    let peer = raw_peer(zport);
    let small = r#"{"nodes":["/ghost"],"topics":[["/ghost_topic","std_msgs/msg/String",1]]}"#;
    for i in 0..200u32 {
        peer.put(format!("rosgate/g/0/{:x}", 0xdead_0000u32 + i), small)
            .wait()
            .expect("put");
    }
    // An id that is no Zenoh id at all, with a token: ignored too.
    let _fake = peer
        .liveliness()
        .declare_token("rosgate/gw/ros2")
        .wait()
        .expect("token");
    let s = a.wait_for_stats("the invented graphs were ignored", |s| {
        counter(s, "federation_announcements_ignored") >= 201
    });
    assert_eq!(counter(&s, "memory_federation_bytes"), 0, "{s}");
    let v = federation(&a);
    assert!(
        v["graphs"].as_array().is_some_and(Vec::is_empty),
        "graphs held from peers without presence: {v}"
    );
    // With a presence token: kept, up to the per-gateway bound.
    let gw = "abcdef0123456789";
    let token = peer
        .liveliness()
        .declare_token(format!("rosgate/gw/{gw}"))
        .wait()
        .expect("token");
    wait_federation(&a, "the posing peer is seen as a gateway", |v| {
        gateways(v) == 1
    });
    let per_domain = rosgate_core::hub::MAX_REMOTE_GRAPH_ITEMS;
    let bound = rosgate_core::hub::MAX_REMOTE_GRAPH_ITEMS_PER_GATEWAY;
    let domains = (bound / per_domain + 1) as u8;
    for d in 0..domains {
        let nodes: Vec<String> = (0..per_domain).map(|i| format!("/d{d}/n{i}")).collect();
        let json = serde_json::json!({ "nodes": nodes }).to_string();
        peer.put(format!("rosgate/g/{d}/{gw}"), json)
            .wait()
            .expect("put");
    }
    let s = a.wait_for_stats("the graphs past the bound were refused", |s| {
        counter(s, "federation_graph_items_refused")
            >= (usize::from(domains) * per_domain - bound) as u64
    });
    assert_eq!(
        counter(&s, "federation_graph_items_refused"),
        (usize::from(domains) * per_domain - bound) as u64,
        "{s}"
    );
    let held = counter(&s, "memory_federation_bytes");
    assert!(held > (bound * 64) as u64, "{s}");
    let v = wait_federation(&a, "domain 0's graph listed", |v| graph_of(v, gw).is_some());
    assert!(graph_of(&v, gw).is_some_and(|g| g["nodes"].as_array().is_some_and(|n| !n.is_empty())));
    // The token goes: so does everything it announced.
    drop(token);
    wait_federation(&a, "its graphs dropped", |v| {
        gateways(v) == 0 && graph_of(v, gw).is_none()
    });
    let s = a.wait_for_stats("nothing held for it", |s| {
        counter(s, "memory_federation_bytes") < 64 * 1024
    });
    assert!(counter(&s, "memory_federation_bytes") < held, "{s}");
    // A graph put after it left is ignored.
    let before = counter(&s, "federation_announcements_ignored");
    peer.put(format!("rosgate/g/0/{gw}"), small)
        .wait()
        .expect("put");
    a.wait_for_stats("the late graph was ignored", |s| {
        counter(s, "federation_announcements_ignored") > before
    });
    assert!(graph_of(&federation(&a), gw).is_none());
}

/// The Foxglove protocol through a federation (docs/protocol.md,
/// "Foxglove WebSocket protocol"; docs/federation.md): a publisher on one
/// gateway is a channel of a Foxglove session on another, with its
/// `ros2msg` schema, and its messages arrive as CDR; the session's own
/// client channel (`clientPublish`) reaches a subscriber on the first
/// gateway.
#[test]
fn a_foxglove_session_sees_and_feeds_another_gateways_topics() {
    let (pa, pb) = (free_port(), free_port());
    let a = gateway(pa, &[], &[]);
    let b = gateway(pb, &[pa], &["--foxglove-listen", "127.0.0.1:0"]);
    wait_federation(&b, "sees A", |v| gateways(v) == 1);
    let mut fx = foxglove(&b);

    // A rosbridge publisher on A: B's session gets the channel from A's graph.
    let mut pubr = a.client();
    pubr.send_line(
        r#"{"op":"advertise","topic":"/fed/fx","type":"std_msgs/msg/String","id":"adv"}"#,
    );
    let ch = foxglove_channel(&mut fx, "/fed/fx", CROSS);
    assert_string_cdr_channel(&ch);
    let chan = ch["id"].as_u64().expect("channel id");
    fx.send_text(&format!(
        r#"{{"op":"subscribe","subscriptions":[{{"id":7,"channelId":{chan}}}]}}"#
    ));
    // Until B's interest has reached A: publish until a message comes.
    let dl = deadline(CROSS);
    let data = loop {
        pubr.send_line(&publish_line("/fed/fx", r#"{"data":"hi"}"#));
        if let Some((0x2, data)) = fx.try_frame(deadline(ms(100))) {
            break data;
        }
        assert!(Instant::now() < dl, "no message crossed within {CROSS:?}");
    };
    // opcode 0x01, subscription id, log time, then CDR: "hi".
    assert_eq!(data[0], 0x01);
    assert_eq!(&data[1..5], &7u32.to_le_bytes());
    assert_eq!(&data[13..], &[0, 1, 0, 0, 3, 0, 0, 0, b'h', b'i', 0]);

    // clientPublish on B (CDR) reaches a rosbridge subscriber on A.
    let mut sub = a.client();
    subscribe(&mut sub, "/fed/fx_back");
    wait_federation(&b, "A wants /fed/fx_back", |v| {
        lists(v, "wanted_remotely", "/fed/fx_back")
    });
    fx.send_text(
        r#"{"op":"advertise","channels":[{"id":1,"topic":"/fed/fx_back","encoding":"cdr","schemaName":"std_msgs/msg/String"}]}"#,
    );
    let mut frame = vec![0x01];
    frame.extend_from_slice(&1u32.to_le_bytes());
    frame.extend_from_slice(&[0, 1, 0, 0, 5, 0, 0, 0, b'b', b'a', b'c', b'k', 0]);
    let dl = deadline(CROSS);
    loop {
        fx.send_frame(0x2, true, &frame);
        if let Recv::Line(l) = sub.try_recv_line(deadline(ms(100))) {
            let v: Value = serde_json::from_slice(&l).expect("json");
            assert_eq!(v["topic"], "/fed/fx_back", "{v}");
            assert_eq!(v["msg"]["data"], "back", "{v}");
            break;
        }
        assert!(
            Instant::now() < dl,
            "clientPublish did not cross within {CROSS:?}"
        );
    }

    // A's publisher leaves: B's session hears the channel go.
    drop(pubr);
    let dl = deadline(CROSS);
    loop {
        let f = fx
            .try_frame(dl)
            .unwrap_or_else(|| panic!("channel {chan} not unadvertised within {CROSS:?}"));
        if f.0 == 0x1 {
            let v: Value = serde_json::from_slice(&f.1).expect("json");
            if v["op"] == "unadvertise"
                && v["channelIds"]
                    .as_array()
                    .is_some_and(|a| a.iter().any(|i| i == chan))
            {
                break;
            }
        }
    }
}

/// What a Zenoh peer that is no gateway can put where gateways listen
/// (docs/federation.md, "Services" and "Key expressions"): mail that is
/// garbage, of another version or answering a call never made is dropped
/// and counted; a call in valid mail is answered by mail, exactly once,
/// and one with bad arguments refused with a reason; a topic's run of
/// messages delivers its valid pieces in order and drops the others.
#[test]
fn mail_and_topic_runs_from_a_raw_peer_are_checked_piece_by_piece() {
    use rosgate_zenoh::keys::{mail_key, topic_key};
    use rosgate_zenoh::mail::{Mail, Record, Status, Writer};
    use zenoh::Wait;
    let zport = free_port();
    let a = gateway(zport, &[], &[]);
    let peer = raw_peer(zport);
    let me = "abcdef0123456789";
    let target = federation(&a)["gateway"]
        .as_str()
        .expect("the gateway's id")
        .to_string();
    let (tx, rx) = std::sync::mpsc::channel::<Vec<u8>>();
    let _inbox = peer
        .declare_subscriber(mail_key(me))
        .callback(move |s| {
            let _ = tx.send(s.payload().to_bytes().into_owned());
        })
        .wait()
        .expect("subscribe to the posing peer's mail");
    let mut provider = a.client();
    advertise_service(&mut provider, "/add");
    let put = |bytes: Vec<u8>| {
        peer.put(mail_key(&target), bytes).wait().expect("put mail");
    };
    let dropped = |a: &Gateway| counter(&a.stats(), "federation_in_dropped");
    // Without a presence token the peer is no gateway: its mail, even a
    // valid call, is dropped.
    let mut early = Writer::default();
    early.call(me, 0, 6, "/add", br#"{"a":1,"b":1}"#);
    let before = dropped(&a);
    put(early.take());
    a.wait_for_stats("mail from no gateway was dropped", |s| {
        counter(s, "federation_in_dropped") > before
    });
    let _presence = peer
        .liveliness()
        .declare_token(format!("rosgate/gw/{me}"))
        .wait()
        .expect("presence token");
    wait_federation(&a, "the posing peer is seen as a gateway", |v| {
        gateways(v) == 1
    });
    let before = dropped(&a);
    put(b"\x01".to_vec());
    put(b"garbage".to_vec());
    put(b"\x02\x00".to_vec());
    a.wait_for_stats("the bad mail was dropped", |s| {
        counter(s, "federation_in_dropped") >= before + 3
    });
    let mut forged = Writer::default();
    forged.answer(me, 1, Status::Ok, b"{}");
    put(forged.take());
    let mut w = Writer::default();
    w.call(me, 0, 7, "/add", br#"{"a":1,"b":2}"#);
    w.call(me, 0, 8, "/add", br#"{"a":"#);
    put(w.take());
    answer_calls(&mut provider, 1, "a");
    let mut got: Vec<(u64, Status, String)> = Vec::new();
    let dl = deadline(CROSS);
    while got.len() < 2 {
        let left = dl.saturating_duration_since(Instant::now());
        let bytes = rx
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("mail for the peer: got {got:?}"));
        let mail = Mail::decode(&bytes, 100).expect("mail this version reads");
        assert_eq!(mail.sender, target);
        for r in mail.records {
            match r {
                Record::Answer { n, status, body } => {
                    got.push((n, status, String::from_utf8_lossy(body).into_owned()))
                }
                other => panic!("only answers come back: {other:?}"),
            }
        }
    }
    got.sort_by_key(|g| g.0);
    assert_eq!((got[0].0, got[0].1), (7, Status::Ok), "{got:?}");
    let values: Value = serde_json::from_str(&got[0].2).expect("values are JSON");
    assert_eq!(values["sum"], 3, "{got:?}");
    assert_eq!((got[1].0, got[1].1), (8, Status::Refused), "{got:?}");
    assert!(got[1].2.contains("JSON"), "{got:?}");
    assert!(
        rx.recv_timeout(ms(300)).is_err(),
        "each call is answered once"
    );

    // A run of a topic's messages: the valid pieces, in order.
    let mut sub = a.client();
    subscribe(&mut sub, "/run");
    // The gateway subscribes in Zenoh on its worker: wait for its interest
    // token (declared right after the subscriber) before putting.
    let dl = deadline(CROSS);
    loop {
        let seen = peer
            .liveliness()
            .get(format!("rosgate/i/0/{target}/**"))
            .wait()
            .expect("liveliness get");
        if seen.recv_timeout(ms(500)).ok().flatten().is_some() {
            break;
        }
        assert!(Instant::now() < dl, "the gateway never wanted /run");
        thread::sleep(ms(20));
    }
    let before = dropped(&a);
    peer.put(
        topic_key(0, "/run"),
        "{\"data\":\"a\"}\n{\"data\":\n{\"data\":\"b\"}\n\n[1,2]",
    )
    .wait()
    .expect("put a run");
    let mut seen = Vec::new();
    for _ in 0..3 {
        let line = sub.recv_raw_until(|v| v["op"] == "publish", deadline(REPLY));
        seen.push(msg_span(&line).to_string());
    }
    assert_eq!(seen, [r#"{"data":"a"}"#, r#"{"data":"b"}"#, "[1,2]"]);
    a.wait_for_stats("the two bad pieces were counted", |s| {
        counter(s, "federation_in_dropped") >= before + 2
    });
    // The gateway still answers its own clients.
    let v = call_values(&mut a.client(), "/rosapi/topics", "{}");
    assert!(
        v["values"]["topics"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t == "/run")),
        "{v}"
    );
}
