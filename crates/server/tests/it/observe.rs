//! What an operator sees: the `/rosgate/connections` service (open
//! connections with their nodes, peers, queues and drops; the ring of recent
//! closes) and the connection log lines (`open`/`close` with the peer and the
//! reason, text or JSON, rate-limited with a count of what was suppressed).

use std::collections::{BTreeMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::*;
use crate::wsclient::*;

/// `RECENT_CLOSES` in crates/core/src/limits.rs.
const RECENT_CLOSES: usize = 64;
/// `CONN_LOGS_PER_SEC` in crates/core/src/limits.rs.
const CONN_LOGS_PER_SEC: usize = 20;

// ---------------------------------------------------------------------------------------------
// /rosgate/connections
// ---------------------------------------------------------------------------------------------

const CONNECTIONS: &str = "/rosgate/connections";

/// The `/rosgate/connections` reply over a TCP client.
fn connections(c: &mut Client) -> Value {
    let id = format!("conns-{}", uniq());
    c.send_json(&json!({"op":"call_service","service":CONNECTIONS,"id":id,"args":{}}));
    let want = Value::String(id);
    let (v, _) = c.recv_until(
        |v| v["op"] == "service_response" && v["id"] == want,
        deadline(REPLY),
    );
    assert_eq!(v["service"], CONNECTIONS, "{v}");
    assert_eq!(v["result"], true, "{v}");
    check_shape(&v["values"]);
    v["values"].clone()
}

/// The same over WebSocket.
fn connections_ws(ws: &mut Ws) -> Value {
    let id = format!("conns-{}", uniq());
    ws.send_text(&json!({"op":"call_service","service":CONNECTIONS,"id":id,"args":{}}).to_string());
    loop {
        let v = ws.json();
        if v["id"] == id.as_str() {
            assert_eq!(v["op"], "service_response", "{v}");
            assert_eq!(v["result"], true, "{v}");
            check_shape(&v["values"]);
            return v["values"].clone();
        }
    }
}

/// Every entry has the documented fields with the documented types.
fn check_shape(v: &Value) {
    let list = v["connections"]
        .as_array()
        .unwrap_or_else(|| panic!("connections is not a list: {v}"));
    let mut ids = HashSet::new();
    for e in list {
        assert!(ids.insert(e["id"].as_u64().expect("id")), "ids unique: {v}");
        assert!(e["client"].as_str().is_some_and(|s| !s.is_empty()), "{e}");
        assert!(e["nodes"].is_array(), "{e}");
        let peer: SocketAddr = e["peer"]
            .as_str()
            .and_then(|p| p.parse().ok())
            .expect("peer");
        assert!(peer.ip().is_loopback(), "{e}");
        assert!(matches!(e["transport"].as_str(), Some("tcp" | "ws")), "{e}");
        for k in ["queued_bytes", "delivered", "dropped", "domain"] {
            assert!(e[k].is_u64(), "{k}: {e}");
        }
        assert!(e["age_s"].as_f64().is_some_and(|a| a >= 0.0), "{e}");
        assert!(
            e["opened"]["sec"].is_u64() && e["opened"]["nanosec"].is_u64(),
            "{e}"
        );
    }
    let recent = v["recent_closes"]
        .as_array()
        .unwrap_or_else(|| panic!("recent_closes is not a list: {v}"));
    assert!(recent.len() <= RECENT_CLOSES, "{v}");
    for r in recent {
        assert!(r["id"].is_u64(), "{r}");
        assert!(r["client"].as_str().is_some_and(|s| !s.is_empty()), "{r}");
        assert!(
            r["peer"]
                .as_str()
                .and_then(|p| p.parse::<SocketAddr>().ok())
                .is_some(),
            "{r}"
        );
        assert!(matches!(r["transport"].as_str(), Some("tcp" | "ws")), "{r}");
        assert!(r["reason"].as_str().is_some_and(|s| !s.is_empty()), "{r}");
        assert!(r["forced"].is_boolean(), "{r}");
        assert!(
            r["closed"]["sec"].is_u64() && r["closed"]["nanosec"].is_u64(),
            "{r}"
        );
        assert!(r["lived_s"].as_f64().is_some_and(|a| a >= 0.0), "{r}");
        assert!(r["delivered"].is_u64() && r["dropped"].is_u64(), "{r}");
    }
}

/// The entry of the connection whose client socket is `peer`.
fn entry(list: &Value, peer: SocketAddr) -> &Value {
    let peer = peer.to_string();
    let found: Vec<&Value> = list["connections"]
        .as_array()
        .expect("list")
        .iter()
        .filter(|e| e["peer"] == peer.as_str())
        .collect();
    assert_eq!(found.len(), 1, "one entry for {peer}: {list}");
    found[0]
}

fn local(c: &Client) -> SocketAddr {
    c.stream.local_addr().expect("local addr")
}

fn ws_local(ws: &Ws) -> SocketAddr {
    ws.s.local_addr().expect("local addr")
}

/// Sends an unmasked frame: the gateway closes with 1002 (`protocol_error`).
fn break_ws(ws: &mut Ws) {
    ws.s.write_all(&[0x81, 0x02, b'{', b'}']).expect("send");
    let f = ws.frame();
    assert_eq!((f.0, &f.1[..2]), (0x8, &1002u16.to_be_bytes()[..]));
    ws.expect_eof();
}

/// Polls the list over `c` until `pred` holds.
fn wait_connections(c: &mut Client, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let dl = deadline(Duration::from_secs(10));
    loop {
        let v = connections(c);
        if pred(&v) {
            return v;
        }
        assert!(Instant::now() < dl, "connections never showed {what}: {v}");
        thread::sleep(ms(10));
    }
}

#[test]
fn connections_lists_every_open_connection_over_tcp_and_websocket() {
    let gw = Gateway::start(&[]);
    let mut talker = gw.client();
    talker.send_json(&json!({"op":"declare_node","name":"talker","namespace":"/demo","id":"d1"}));
    talker.expect_info("d1");
    let mut sub = gw.client();
    sub.subscribe("/obs");
    let mut publisher = gw.client();
    for i in 0..3 {
        publisher.publish("/obs", &format!("{{\"i\":{i}}}"));
    }
    for i in 0..3 {
        let v = sub.recv();
        assert_eq!(
            (v["topic"].clone(), v["msg"]["i"].clone()),
            (json!("/obs"), json!(i))
        );
    }
    let mut ws = Ws::connect(&gw);
    let mut watcher = gw.client();

    let over_tcp = connections(&mut watcher);
    let over_ws = connections_ws(&mut ws);
    for list in [&over_tcp, &over_ws] {
        assert_eq!(
            list["connections"].as_array().map(Vec::len),
            Some(5),
            "{list}"
        );
        assert_eq!(
            list["recent_closes"],
            json!([]),
            "nothing closed yet: {list}"
        );
        assert!(list.get("truncated").is_none(), "{list}");

        let t = entry(list, local(&talker));
        assert_eq!(t["transport"], "tcp", "{t}");
        assert_eq!(t["nodes"], json!(["/demo/talker"]), "{t}");
        assert_eq!(t["client"], "/demo/talker", "{t}");
        assert_eq!(t["established"], true, "{t}");

        let s = entry(list, local(&sub));
        assert_eq!(s["transport"], "tcp", "{s}");
        assert_eq!(s["nodes"], json!([]), "{s}");
        assert!(
            s["client"]
                .as_str()
                .is_some_and(|c| c.starts_with("/rosgate_tcp_")),
            "a connection without a node is named after itself: {s}"
        );
        assert_eq!(s["delivered"], 3, "{s}");
        assert_eq!(s["dropped"], 0, "{s}");
        assert_eq!(s["queued_bytes"], 0, "it read everything: {s}");

        let p = entry(list, local(&publisher));
        assert_eq!(
            (p["delivered"].clone(), p["dropped"].clone()),
            (json!(0), json!(0))
        );

        let w = entry(list, ws_local(&ws));
        assert_eq!(w["transport"], "ws", "{w}");
        assert!(
            w["client"]
                .as_str()
                .is_some_and(|c| c.starts_with("/rosgate_ws_")),
            "{w}"
        );
        assert_eq!(w["established"], true, "{w}");
        assert_eq!(entry(list, local(&watcher))["transport"], "tcp");
    }
    let ids = |l: &Value| -> BTreeMap<String, u64> {
        l["connections"]
            .as_array()
            .expect("list")
            .iter()
            .map(|e| {
                (
                    e["peer"].as_str().expect("peer").to_string(),
                    e["id"].as_u64().expect("id"),
                )
            })
            .collect()
    };
    assert_eq!(
        ids(&over_tcp),
        ids(&over_ws),
        "the same connections either way"
    );
    // The listed work is counted.
    let s = watcher.stats();
    assert!(counter(&s, "introspection_items") >= 10, "{s}");
}

#[test]
fn a_subscriber_that_does_not_read_shows_its_drops() {
    const QUEUE: u64 = 65536;
    let gw = Gateway::start(&["--max-queue-bytes", &QUEUE.to_string()]);
    let mut slow = Client::connect_small_rcvbuf(&gw, 4096);
    slow.subscribe("/flood");
    let slow_peer = local(&slow);
    let mut publisher = gw.client();
    let mut watcher = gw.client();
    let pad = "d".repeat(2048);
    let dl = deadline(Duration::from_secs(20));
    let mut sent = 0u64;
    let e = loop {
        let mut batch = String::new();
        for _ in 0..200 {
            batch.push_str(&format!(
                "{{\"op\":\"publish\",\"topic\":\"/flood\",\"msg\":{{\"seq\":{sent},\"pad\":\"{pad}\"}}}}\n"
            ));
            sent += 1;
        }
        publisher.send_raw(batch.as_bytes());
        publisher.barrier();
        let list = connections(&mut watcher);
        let e = entry(&list, slow_peer).clone();
        if e["dropped"].as_u64().unwrap_or(0) > 0 {
            break e;
        }
        assert!(Instant::now() < dl, "no drops after {sent} messages: {e}");
    };
    let dropped = e["dropped"].as_u64().expect("dropped");
    let delivered = e["delivered"].as_u64().expect("delivered");
    let queued = e["queued_bytes"].as_u64().expect("queued");
    assert!(
        delivered >= dropped && delivered <= sent,
        "{e}, sent {sent}"
    );
    assert!(queued > 0, "it does not read: {e}");
    // By topic: all of them on /flood.
    assert_eq!(
        e["dropped_topics"],
        serde_json::json!({ "/flood": dropped }),
        "{e}"
    );
    // The newest entry is always kept, and publishes read in one wakeup (at
    // most ~64 KiB, P8) are queued as one entry.
    assert!(
        queued <= QUEUE + 65536 + 4096,
        "topic data beyond --max-queue-bytes is dropped: {e}"
    );
    let s = watcher.stats();
    assert!(counter(&s, "dropped") >= dropped, "{s} vs {e}");
    // Nobody else dropped anything.
    let list = connections(&mut watcher);
    for c in list["connections"].as_array().expect("list") {
        if c["peer"] != slow_peer.to_string().as_str() {
            assert_eq!(c["dropped"], 0, "{c}");
            assert!(c.get("dropped_topics").is_none(), "{c}");
        }
    }
}

#[test]
fn recent_closes_are_newest_first_with_reason_peer_and_forced() {
    let gw = Gateway::start(&[]);
    let mut watcher = gw.client();

    let mut a = gw.client();
    a.barrier();
    let a_peer = local(&a);
    drop(a);
    let v = wait_connections(&mut watcher, "a's close", |v| {
        !v["recent_closes"].as_array().expect("list").is_empty()
    });
    let r = &v["recent_closes"][0];
    assert_eq!(r["peer"], a_peer.to_string(), "{v}");
    assert_eq!(r["reason"], "peer_closed", "{r}");
    assert_eq!(r["forced"], false, "{r}");
    assert_eq!(r["transport"], "tcp", "{r}");
    assert!(
        v["connections"]
            .as_array()
            .expect("list")
            .iter()
            .all(|e| e["peer"] != a_peer.to_string().as_str()),
        "a closed connection is not listed as open: {v}"
    );

    let mut b = Ws::connect(&gw);
    let b_peer = ws_local(&b);
    b.barrier();
    break_ws(&mut b);
    let v = wait_connections(&mut watcher, "b's close", |v| {
        v["recent_closes"].as_array().expect("list").len() == 2
    });
    let recent = v["recent_closes"].as_array().expect("list");
    assert_eq!(recent[0]["peer"], b_peer.to_string(), "newest first: {v}");
    assert_eq!(recent[0]["reason"], "protocol_error", "{v}");
    assert_eq!(recent[0]["forced"], true, "{v}");
    assert_eq!(recent[0]["transport"], "ws", "{v}");
    assert_eq!(recent[1]["peer"], a_peer.to_string(), "{v}");

    // A WebSocket client that says goodbye is not forced out.
    let mut c = Ws::connect(&gw);
    let c_peer = ws_local(&c);
    c.send_frame(0x8, true, &1000u16.to_be_bytes());
    c.expect_eof();
    let v = wait_connections(&mut watcher, "c's close", |v| {
        v["recent_closes"].as_array().expect("list").len() == 3
    });
    let r = &v["recent_closes"][0];
    assert_eq!(
        (r["peer"].clone(), r["reason"].clone(), r["forced"].clone()),
        (
            json!(c_peer.to_string()),
            json!("peer_closed"),
            json!(false)
        ),
        "{v}"
    );
    let s = watcher.stats();
    assert_eq!(counter(&s, "closes.peer_closed"), 2, "{s}");
    assert_eq!(counter(&s, "closes.protocol_error"), 1, "{s}");
}

#[test]
fn recent_closes_keep_only_the_last_sixty_four() {
    const N: usize = 70;
    let gw = Gateway::start(&[]);
    let mut watcher = gw.client();
    let clients: Vec<Client> = (0..N).map(|_| gw.client()).collect();
    let peers: Vec<String> = clients.iter().map(|c| local(c).to_string()).collect();
    // One at a time, each close counted before the next, so their order is known.
    for (i, c) in clients.into_iter().enumerate() {
        drop(c);
        let dl = deadline(REPLY);
        loop {
            let s = watcher.stats();
            if counter(&s, "closes.peer_closed") == i as u64 + 1 {
                break;
            }
            assert!(Instant::now() < dl, "close {i} never counted: {s}");
            thread::sleep(ms(2));
        }
    }
    let v = connections(&mut watcher);
    let recent: Vec<String> = v["recent_closes"]
        .as_array()
        .expect("list")
        .iter()
        .map(|r| r["peer"].as_str().expect("peer").to_string())
        .collect();
    assert_eq!(recent.len(), RECENT_CLOSES, "{v}");
    let want: Vec<String> = peers.iter().rev().take(RECENT_CLOSES).cloned().collect();
    assert_eq!(recent, want, "the last {RECENT_CLOSES}, newest first");
    let times: Vec<(u64, u64)> = v["recent_closes"]
        .as_array()
        .expect("list")
        .iter()
        .map(|r| {
            (
                r["closed"]["sec"].as_u64().expect("sec"),
                r["closed"]["nanosec"].as_u64().expect("nanosec"),
            )
        })
        .collect();
    assert!(
        times.windows(2).all(|w| w[0] >= w[1]),
        "newest first: {times:?}"
    );
    assert_eq!(v["connections"].as_array().map(Vec::len), Some(1), "{v}");
}

// ---------------------------------------------------------------------------------------------
// Log lines
// ---------------------------------------------------------------------------------------------

/// One connection log line, text or JSON, as fields.
#[derive(Debug, Clone)]
struct Line {
    /// Milliseconds since the epoch.
    ts_ms: u64,
    level: String,
    msg: String,
    fields: BTreeMap<String, Value>,
}

impl Line {
    fn str(&self, k: &str) -> &str {
        self.fields
            .get(k)
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("{k} missing or not a string: {self:?}"))
    }

    fn num(&self, k: &str) -> u64 {
        self.fields
            .get(k)
            .and_then(Value::as_u64)
            .unwrap_or_else(|| panic!("{k} missing or not a number: {self:?}"))
    }

    fn suppressed(&self) -> u64 {
        self.fields.get("suppressed").map_or(0, |v| {
            v.as_u64()
                .unwrap_or_else(|| panic!("suppressed is not a number: {self:?}"))
        })
    }
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` to milliseconds since the epoch.
fn parse_ts(ts: &str) -> Option<u64> {
    let b = ts.as_bytes();
    if b.len() != 24
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
        || b[19] != b'.'
        || b[23] != b'Z'
    {
        return None;
    }
    let n = |r: std::ops::Range<usize>| -> Option<u64> { ts.get(r)?.parse().ok() };
    let (y, m, d) = (n(0..4)? as i64, n(5..7)? as i64, n(8..10)? as i64);
    let (hh, mm, ss, ms) = (n(11..13)?, n(14..16)?, n(17..19)?, n(20..23)?);
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || hh > 23 || mm > 59 || ss > 60 {
        return None;
    }
    // Days from civil (Howard Hinnant).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = (era * 146_097 + doe - 719_468) as u64;
    Some(((days * 86_400 + hh * 3600 + mm * 60 + ss) * 1000) + ms)
}

/// A text line: `ts LEVEL msg k=v k=v ...` (values without spaces here).
fn parse_text(line: &str) -> Option<Line> {
    let mut it = line.split(' ');
    let ts_ms = parse_ts(it.next()?)?;
    let level = it.next()?.to_string();
    let msg = it.next()?.to_string();
    let mut fields = BTreeMap::new();
    for kv in it {
        let (k, v) = kv.split_once('=')?;
        let v = match v.parse::<u64>() {
            Ok(n) => json!(n),
            Err(_) => json!(v.trim_matches('"')),
        };
        fields.insert(k.to_string(), v);
    }
    Some(Line {
        ts_ms,
        level,
        msg,
        fields,
    })
}

/// A JSON line: one object with ts, level, msg and the fields.
fn parse_json(line: &str) -> Option<Line> {
    let v: Value = serde_json::from_str(line).ok()?;
    let mut o = v.as_object()?.clone();
    let ts_ms = parse_ts(o.remove("ts")?.as_str()?)?;
    let level = o.remove("level")?.as_str()?.to_string();
    let msg = o.remove("msg")?.as_str()?.to_string();
    Some(Line {
        ts_ms,
        level,
        msg,
        fields: o.into_iter().collect(),
    })
}

/// The connection lines among `lines` (`open`, `close`, `refused`).
fn conn_lines(lines: &[String], parse: fn(&str) -> Option<Line>) -> Vec<Line> {
    lines
        .iter()
        .filter_map(|l| parse(l))
        .filter(|l| matches!(l.msg.as_str(), "open" | "close" | "refused"))
        .collect()
}

/// Polls `logs` until a connection line matches `pred`.
fn wait_line(
    logs: &dyn Fn() -> Vec<String>,
    parse: fn(&str) -> Option<Line>,
    what: &str,
    pred: impl Fn(&Line) -> bool,
) -> Line {
    let dl = deadline(Duration::from_secs(10));
    loop {
        let lines = logs();
        if let Some(l) = conn_lines(&lines, parse).into_iter().find(|l| pred(l)) {
            return l;
        }
        assert!(
            Instant::now() < dl,
            "no log line {what}; stderr: {lines:#?}"
        );
        thread::sleep(ms(10));
    }
}

/// A gateway started with `--log-format json`, whose listening lines the
/// shared harness (which waits for the text announcement) cannot read.
struct JsonGateway {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    reader: Option<thread::JoinHandle<()>>,
    tcp: SocketAddr,
    ws: SocketAddr,
}

impl JsonGateway {
    fn start(extra: &[&str]) -> JsonGateway {
        let mut child = Command::new(BIN)
            .args([
                "--listen",
                "127.0.0.1:0",
                "--ws-listen",
                "127.0.0.1:0",
                "--log-format",
                "json",
            ])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn rosgate");
        let stderr = child.stderr.take().expect("piped");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        let reader = thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                match line {
                    Ok(l) => sink.lock().unwrap().push(l),
                    Err(_) => break,
                }
            }
        });
        let mut gw = JsonGateway {
            child,
            lines,
            reader: Some(reader),
            tcp: "127.0.0.1:1".parse().unwrap(),
            ws: "127.0.0.1:1".parse().unwrap(),
        };
        let dl = deadline(Duration::from_secs(10));
        loop {
            let mut tcp = None;
            let mut ws = None;
            for l in gw.logs() {
                let Ok(v) = serde_json::from_str::<Value>(&l) else {
                    continue;
                };
                if v["msg"] != "listening" {
                    continue;
                }
                let addr = v["addr"].as_str().unwrap_or_default();
                match v["transport"].as_str() {
                    Some("tcp") => tcp = addr.parse().ok(),
                    Some("ws") => ws = addr.trim_start_matches("ws://").parse().ok(),
                    _ => {}
                }
            }
            if let (Some(t), Some(w)) = (tcp, ws) {
                gw.tcp = t;
                gw.ws = w;
                return gw;
            }
            assert!(
                Instant::now() < dl && matches!(gw.child.try_wait(), Ok(None)),
                "no JSON listening lines; stderr: {:?}",
                gw.logs()
            );
            thread::sleep(ms(10));
        }
    }

    fn logs(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    /// SIGTERM, then every line it wrote, once it exited 0.
    fn stop(mut self) -> Vec<String> {
        let rc = unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        assert_eq!(rc, 0);
        let dl = deadline(Duration::from_secs(10));
        let status = loop {
            if let Ok(Some(st)) = self.child.try_wait() {
                break st;
            }
            assert!(Instant::now() < dl, "no exit after SIGTERM");
            thread::sleep(ms(10));
        };
        assert!(status.success(), "exit status {status:?}");
        if let Some(r) = self.reader.take() {
            r.join().expect("reader");
        }
        self.logs()
    }
}

impl Drop for JsonGateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn open_and_close_lines_name_the_peer_and_the_reason() {
    let gw = Gateway::start(&[]);
    let logs = || gw.logs();
    let mut c = gw.client();
    c.barrier();
    let peer = local(&c).to_string();
    let open = wait_line(&logs, parse_text, "open", |l| {
        l.msg == "open" && l.str("peer") == peer
    });
    assert_eq!(open.level, "INFO", "{open:?}");
    assert_eq!(open.str("transport"), "tcp", "{open:?}");
    assert_eq!(open.num("domain"), 0, "{open:?}");
    let conn = open.num("conn");
    drop(c);
    let close = wait_line(&logs, parse_text, "close", |l| {
        l.msg == "close" && l.str("peer") == peer
    });
    assert_eq!(close.level, "INFO", "{close:?}");
    assert_eq!(close.str("reason"), "peer_closed", "{close:?}");
    assert_eq!(close.str("transport"), "tcp", "{close:?}");
    assert_eq!(
        close.num("conn"),
        conn,
        "the same connection number: {close:?}"
    );
    // The number is the one in the client's implicit name (never reused,
    // unlike a slab slot).
    assert_eq!(
        close.str("client"),
        format!("/rosgate_tcp_{conn}"),
        "{close:?}"
    );
    assert_eq!((close.num("delivered"), close.num("dropped")), (0, 0));
    // The raw text, as an operator greps it.
    let raw = gw
        .logs()
        .into_iter()
        .find(|l| l.contains(" INFO open ") && l.contains(&format!(" peer={peer} ")))
        .expect("raw open line");
    assert!(
        raw.contains(&format!("INFO open conn={conn} peer={peer} transport=tcp")),
        "{raw}"
    );

    // A forced close is a warning.
    let mut ws = Ws::connect(&gw);
    let ws_peer = ws_local(&ws).to_string();
    break_ws(&mut ws);
    let close = wait_line(&logs, parse_text, "forced close", |l| {
        l.msg == "close" && l.str("peer") == ws_peer
    });
    assert_eq!(close.level, "WARN", "{close:?}");
    assert_eq!(close.str("reason"), "protocol_error", "{close:?}");
    assert_eq!(close.str("transport"), "ws", "{close:?}");
    // One line each, no repeats.
    let lines = conn_lines(&gw.logs(), parse_text);
    for p in [&peer, &ws_peer] {
        let n = lines
            .iter()
            .filter(|l| l.fields.get("peer") == Some(&json!(p)))
            .count();
        assert_eq!(n, 2, "one open and one close line for {p}: {lines:#?}");
    }
}

#[test]
fn json_logs_are_one_object_per_line_from_listening_to_stopped() {
    let gw = JsonGateway::start(&[]);
    let logs = || gw.logs();
    let mut c = Client::connect_addr(gw.tcp);
    c.barrier();
    let peer = local(&c).to_string();
    drop(c);
    let close = wait_line(&logs, parse_json, "json close", |l| {
        l.msg == "close" && l.str("peer") == peer
    });
    assert_eq!(close.level, "info", "{close:?}");
    assert_eq!(close.str("reason"), "peer_closed", "{close:?}");
    assert!(close.fields["lived_s"].is_number(), "{close:?}");
    let open = wait_line(&logs, parse_json, "json open", |l| {
        l.msg == "open" && l.str("peer") == peer
    });
    assert_eq!(
        (open.level.as_str(), open.str("transport")),
        ("info", "tcp")
    );
    assert_eq!(open.num("conn"), close.num("conn"), "{open:?} {close:?}");

    // A WebSocket client forced out: a warning, still one object.
    let s = std::net::TcpStream::connect(gw.ws).expect("connect ws");
    let mut ws = Ws::over(s).upgrade("/", "");
    let ws_peer = ws_local(&ws).to_string();
    break_ws(&mut ws);
    let forced = wait_line(&logs, parse_json, "json forced close", |l| {
        l.msg == "close" && l.str("peer") == ws_peer
    });
    assert_eq!(
        (forced.level.as_str(), forced.str("reason")),
        ("warn", "protocol_error")
    );

    let lines = gw.stop();
    let mut listening = Vec::new();
    for l in &lines {
        let v: Value = serde_json::from_str(l)
            .unwrap_or_else(|e| panic!("stderr line is not JSON ({e}): {l:?}"));
        let o = v
            .as_object()
            .unwrap_or_else(|| panic!("not an object: {l}"));
        assert!(
            o.get("ts")
                .and_then(Value::as_str)
                .and_then(parse_ts)
                .is_some(),
            "ts: {l}"
        );
        assert!(
            matches!(
                o.get("level").and_then(Value::as_str),
                Some("error" | "warn" | "info" | "debug")
            ),
            "level: {l}"
        );
        assert!(
            o.get("msg")
                .and_then(Value::as_str)
                .is_some_and(|m| !m.is_empty()),
            "msg: {l}"
        );
        if v["msg"] == "listening" {
            listening.push(v);
        }
    }
    assert_eq!(listening.len(), 2, "{lines:#?}");
    let tcp = listening
        .iter()
        .find(|v| v["transport"] == "tcp")
        .expect("tcp listening");
    assert_eq!(tcp["addr"], gw_addr_string(&lines, "tcp"), "{tcp}");
    assert_eq!(tcp["version"], env!("CARGO_PKG_VERSION"), "{tcp}");
    let stopped: Value = serde_json::from_str(lines.last().expect("a last line")).expect("json");
    assert_eq!(stopped["msg"], "stopped", "the last line: {stopped}");
    let counters = &stopped["counters"];
    assert!(counters.is_object(), "{stopped}");
    assert_eq!(counter(counters, "connections_accepted"), 2, "{stopped}");
    assert_eq!(counter(counters, "closes.peer_closed"), 1, "{stopped}");
    assert_eq!(counter(counters, "closes.protocol_error"), 1, "{stopped}");
    assert_eq!(counter(counters, "connections_open"), 0, "{stopped}");
}

/// The address a JSON listening line announced for `transport`.
fn gw_addr_string(lines: &[String], transport: &str) -> String {
    lines
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["msg"] == "listening" && v["transport"] == transport)
        .and_then(|v| v["addr"].as_str().map(str::to_string))
        .expect("listening line")
}

/// Opens `N` connections at once and checks the rate limit: at most
/// [`CONN_LOGS_PER_SEC`] lines in the first second, and every suppressed
/// line accounted for by the `suppressed` counts of later lines.
fn rate_limit(tcp: SocketAddr, logs: &dyn Fn() -> Vec<String>, parse: fn(&str) -> Option<Line>) {
    const N: usize = 200;
    let mut watcher = Client::connect_addr(tcp);
    watcher.barrier();
    let watcher_peer = local(&watcher).to_string();
    let first = wait_line(logs, parse, "the watcher's open", |l| {
        l.msg == "open" && l.str("peer") == watcher_peer
    });
    let crowd: Vec<Client> = (0..N).map(|_| Client::connect_addr(tcp)).collect();
    let peers: HashSet<String> = crowd.iter().map(|c| local(c).to_string()).collect();
    let dl = deadline(Duration::from_secs(10));
    loop {
        let s = watcher.stats();
        if counter(&s, "connections_accepted") == N as u64 + 1 {
            break;
        }
        assert!(Instant::now() < dl, "the crowd was not accepted: {s}");
        thread::sleep(ms(10));
    }
    // The limiter's window started no later than now: after a second more
    // the next line is admitted and reports what was suppressed.
    let accepted_at = Instant::now();
    let during = conn_lines(&logs(), parse);
    let crowd_lines: Vec<&Line> = during
        .iter()
        .filter(|l| l.msg == "open" && peers.contains(l.str("peer")))
        .collect();
    assert!(
        crowd_lines.len() < N,
        "{} open lines for {N} connections: no rate limit",
        crowd_lines.len()
    );
    let first_window = during
        .iter()
        .filter(|l| l.ts_ms >= first.ts_ms && l.ts_ms < first.ts_ms + 1000)
        .count();
    assert!(
        first_window <= CONN_LOGS_PER_SEC + 1,
        "{first_window} connection lines within a second: {during:#?}"
    );
    let spent = accepted_at.elapsed();
    thread::sleep(Duration::from_millis(1100).saturating_sub(spent));

    let mut late = Client::connect_addr(tcp);
    late.barrier();
    let late_peer = local(&late).to_string();
    let last = wait_line(logs, parse, "the late open", |l| {
        l.msg == "open" && l.str("peer") == late_peer
    });
    let all = conn_lines(&logs(), parse);
    let earlier: u64 = all
        .iter()
        .filter(|l| l.str("peer") != late_peer)
        .map(Line::suppressed)
        .sum();
    let missing = (N - crowd_lines.len()) as u64;
    assert!(missing > 0);
    assert_eq!(
        earlier + last.suppressed(),
        missing,
        "every suppressed open is counted once: {all:#?}"
    );
    if earlier == 0 {
        assert!(last.suppressed() > 0, "{last:?}");
    }
    drop(crowd);
}

#[test]
fn connection_lines_are_rate_limited_and_count_what_they_suppressed() {
    let gw = Gateway::start(&[]);
    rate_limit(gw.addr, &|| gw.logs(), parse_text);
    // In text the count is a `suppressed=N` field.
    assert!(
        gw.logs().iter().any(|l| l.contains(" suppressed=")),
        "{:#?}",
        gw.logs()
    );
}

#[test]
fn json_connection_lines_are_rate_limited_too() {
    let gw = JsonGateway::start(&[]);
    rate_limit(gw.tcp, &|| gw.logs(), parse_json);
    assert!(
        gw.logs().iter().any(|l| l.contains("\"suppressed\":")),
        "{:#?}",
        gw.logs()
    );
    for l in gw.logs() {
        serde_json::from_str::<Value>(&l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"));
    }
}

#[test]
fn http_requests_stay_out_of_the_ring_and_the_info_log() {
    let gw = Gateway::start(&[]);
    let mut c = gw.client();
    c.barrier();
    // A real close first, then a burst of probes.
    let mut gone = gw.client();
    gone.barrier();
    let gone_peer = local(&gone).to_string();
    drop(gone);
    wait_connections(&mut c, "the real close", |v| {
        v["recent_closes"]
            .as_array()
            .is_some_and(|l| l.iter().any(|e| e["peer"] == gone_peer.as_str()))
    });
    for _ in 0..5 {
        let r = crate::http::get(&gw, "/healthz");
        assert_eq!(r.status, 200);
    }
    let v = connections(&mut c);
    let recent = v["recent_closes"].as_array().cloned().unwrap_or_default();
    assert!(
        recent.iter().all(|e| e["reason"] != "http_served"),
        "health checks must not fill the ring: {v}"
    );
    assert_eq!(recent[0]["peer"], gone_peer.as_str(), "{v}");
    // Nor the info log: no open or close line for them.
    let lines = conn_lines(&gw.logs(), parse_text);
    assert!(
        lines
            .iter()
            .all(|l| l.fields.get("transport") != Some(&json!("ws"))),
        "{lines:#?}"
    );
}

#[test]
fn a_websocket_client_is_logged_when_its_upgrade_completes_with_its_number() {
    let gw = Gateway::start(&[]);
    let logs = || gw.logs();
    let mut ws = Ws::connect(&gw);
    let peer = ws_local(&ws).to_string();
    let open = wait_line(&logs, parse_text, "ws open", |l| {
        l.msg == "open" && l.str("peer") == peer
    });
    assert_eq!(open.str("transport"), "ws", "{open:?}");
    let v = connections_ws(&mut ws);
    let me = v["connections"]
        .as_array()
        .and_then(|l| l.iter().find(|e| e["peer"] == peer.as_str()).cloned())
        .unwrap_or_else(|| panic!("{v}"));
    assert_eq!(me["id"], open.num("conn"), "{me} vs {open:?}");
    assert_eq!(
        me["name"],
        format!("/rosgate_ws_{}", open.num("conn")),
        "{me}"
    );
    assert_eq!(
        me["client"],
        format!("/rosgate_ws_{}", open.num("conn")),
        "{me}"
    );
}
