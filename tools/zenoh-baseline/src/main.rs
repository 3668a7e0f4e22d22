//! zenoh-baseline: plain Zenoh with the federation's payloads, to say how
//! much a rosgate federation adds on top of Zenoh (issue 30, item 1;
//! figures in docs/performance.md).
//!
//! Modes (one process each, on one machine):
//! - `router`: a zenohd-equivalent, a Zenoh session in router mode
//!   listening on `--listen`, until killed or `--duration` (0: forever);
//! - `pub`: one publisher putting `--size` byte payloads on `--key`, at
//!   `--rate` per second (open loop, each stamped with its intended send
//!   time) or, with `--rate 0`, as fast as Zenoh takes them
//!   (`CongestionControl::Block`, reliable: Zenoh's own back-pressure
//!   closes the loop);
//! - `sub`: `--subs` subscribers on `--key`, each in its own session (the
//!   router sends each a copy) or sharing `--sessions` (one copy crosses
//!   per session and Zenoh fans out in the process, as a gateway does); counts deliveries in
//!   the measured interval and the latency from the payload's stamp;
//! - `queryable`: answers every query on `--key` with its own payload;
//! - `query`: `--callers` threads, each with one `get` in flight at a time
//!   on one shared session (as rosgate does one `get` per call): calls/s,
//!   p50, p99.
//!
//! Payload: bytes 0..8 the send time (wall-clock ns, little endian), 8..16
//! the sequence number, then padding to `--size`. Stamps are wall clock so
//! a `sub` process can read a `pub` process's (same machine).
//!
//! Every session is a client of `--connect` (or a peer with `--mode peer`),
//! with multicast scouting off, so nothing leaves loopback.

mod hist;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hist::Hist;
use zenoh::qos::CongestionControl;
use zenoh::query::{ConsolidationMode, QueryTarget};
use zenoh::{Config, Session, Wait};

const USAGE: &str = "\
zenoh-baseline - plain Zenoh with rosgate's federation payloads

USAGE:
    zenoh-baseline router    --listen tcp/127.0.0.1:7449 [--duration S]
    zenoh-baseline pub       --connect E [--key K] [--size B] [--rate R] [--duration S]
    zenoh-baseline sub       --connect E [--key K] [--subs N] [--sessions N] [--warmup S] [--duration S]
    zenoh-baseline queryable --connect E [--key K] [--duration S]
    zenoh-baseline query     --connect E [--key K] [--size B] [--callers C] [--warmup S] [--duration S]

OPTIONS:
    --connect E     the router's endpoint [default: tcp/127.0.0.1:7449]
    --listen E      router: where to listen [default: tcp/127.0.0.1:7449]
    --mode M        client|peer: how pub/sub/query/queryable sessions join
                    [default: client]
    --key K         key expression [default: bench/0]
    --size B        payload bytes (at least 16) [default: 64]
    --rate R        pub: puts/s, open loop; 0: as fast as Zenoh takes them
                    [default: 0]
    --subs N        sub: subscriber sessions [default: 16]
    --sessions N    sub: Zenoh sessions the subscribers share, 1: one copy
                    crosses and Zenoh fans out in the process (as a gateway
                    does) [default: one per subscriber]
    --callers C     query: concurrent callers [default: 32]
    --warmup S      sub, query: unmeasured lead-in [default: 2]
    --duration S    measured time (pub: publishing time; router, queryable:
                    run time, 0 forever) [default: 5]

OUTPUT: one `RESULT {json}` line (pub, sub, query).
";

struct Args {
    mode: String,
    connect: String,
    listen: String,
    session_mode: String,
    key: String,
    size: usize,
    rate: f64,
    subs: usize,
    sessions: usize,
    callers: usize,
    warmup: f64,
    duration: f64,
}

fn parse() -> Result<Args, String> {
    let mut p = pico_args::Arguments::from_env();
    if p.contains(["-h", "--help"]) {
        print!("{USAGE}");
        std::process::exit(0);
    }
    let e = |e: pico_args::Error| e.to_string();
    let a = Args {
        connect: p
            .opt_value_from_str("--connect")
            .map_err(e)?
            .unwrap_or_else(|| "tcp/127.0.0.1:7449".into()),
        listen: p
            .opt_value_from_str("--listen")
            .map_err(e)?
            .unwrap_or_else(|| "tcp/127.0.0.1:7449".into()),
        session_mode: p
            .opt_value_from_str("--mode")
            .map_err(e)?
            .unwrap_or_else(|| "client".into()),
        key: p
            .opt_value_from_str("--key")
            .map_err(e)?
            .unwrap_or_else(|| "bench/0".into()),
        size: p.opt_value_from_str("--size").map_err(e)?.unwrap_or(64),
        rate: p.opt_value_from_str("--rate").map_err(e)?.unwrap_or(0.0),
        subs: p.opt_value_from_str("--subs").map_err(e)?.unwrap_or(16),
        sessions: p.opt_value_from_str("--sessions").map_err(e)?.unwrap_or(0),
        callers: p.opt_value_from_str("--callers").map_err(e)?.unwrap_or(32),
        warmup: p.opt_value_from_str("--warmup").map_err(e)?.unwrap_or(2.0),
        duration: p
            .opt_value_from_str("--duration")
            .map_err(e)?
            .unwrap_or(5.0),
        mode: p
            .free_from_str()
            .map_err(|_| "a mode: router|pub|sub|queryable|query".to_string())?,
    };
    let rest = p.finish();
    if !rest.is_empty() {
        return Err(format!("unknown arguments {rest:?}"));
    }
    if a.size < 16 {
        return Err("--size must be at least 16 (stamp and sequence)".into());
    }
    if !matches!(a.session_mode.as_str(), "client" | "peer") {
        return Err("--mode must be client or peer".into());
    }
    Ok(a)
}

fn main() {
    let a = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("zenoh-baseline: {e}\n\n{USAGE}");
            std::process::exit(2);
        }
    };
    let r = match a.mode.as_str() {
        "router" => router(&a),
        "pub" => publish(&a),
        "sub" => subscribe(&a),
        "queryable" => queryable(&a),
        "query" => query(&a),
        m => Err(format!("unknown mode {m:?}")),
    };
    if let Err(e) = r {
        eprintln!("zenoh-baseline: {e}");
        std::process::exit(3);
    }
}

fn wall_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

fn open(mode: &str, listen: Option<&str>, connect: Option<&str>) -> Result<Session, String> {
    let mut c = Config::default();
    let mut set = |k: &str, v: String| {
        c.insert_json5(k, &v)
            .map_err(|e| format!("zenoh setting {k} = {v}: {e}"))
    };
    set("mode", format!("{mode:?}"))?;
    set("scouting/multicast/enabled", "false".into())?;
    set(
        "listen/endpoints",
        match listen {
            Some(l) => format!("[{l:?}]"),
            None => "[]".into(),
        },
    )?;
    if let Some(e) = connect {
        set("connect/endpoints", format!("[{e:?}]"))?;
    }
    zenoh::open(c)
        .wait()
        .map_err(|e| format!("zenoh open: {e}"))
}

fn client(a: &Args) -> Result<Session, String> {
    open(&a.session_mode, None, Some(&a.connect))
}

/// Sleeps `secs`, or forever when 0.
fn run_for(secs: f64) {
    if secs <= 0.0 {
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
    std::thread::sleep(Duration::from_secs_f64(secs));
}

fn router(a: &Args) -> Result<(), String> {
    let s = open("router", Some(&a.listen), None)?;
    eprintln!(
        "zenoh-baseline: router {} listening on {}",
        s.zid(),
        a.listen
    );
    run_for(a.duration);
    Ok(())
}

fn payload(size: usize, stamp: u64, seq: u64) -> Vec<u8> {
    let mut p = Vec::with_capacity(size);
    p.extend_from_slice(&stamp.to_le_bytes());
    p.extend_from_slice(&seq.to_le_bytes());
    p.resize(size, b'x');
    p
}

fn stamp_of(p: &[u8]) -> Option<(u64, u64)> {
    let s = u64::from_le_bytes(p.get(0..8)?.try_into().ok()?);
    let q = u64::from_le_bytes(p.get(8..16)?.try_into().ok()?);
    Some((s, q))
}

fn publish(a: &Args) -> Result<(), String> {
    let s = client(a)?;
    let publisher = s
        .declare_publisher(a.key.clone())
        .congestion_control(CongestionControl::Block)
        .wait()
        .map_err(|e| format!("declare_publisher: {e}"))?;
    // Subscribers and the router's routes settle before the first put.
    std::thread::sleep(Duration::from_millis(500));
    let start = Instant::now();
    let start_ns = wall_ns();
    let end = start + Duration::from_secs_f64(a.duration);
    let mut seq = 0u64;
    while Instant::now() < end {
        let stamp = if a.rate > 0.0 {
            let due = start + Duration::from_secs_f64(seq as f64 / a.rate);
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
            start_ns + (seq as f64 * 1e9 / a.rate) as u64
        } else {
            wall_ns()
        };
        publisher
            .put(payload(a.size, stamp, seq))
            .wait()
            .map_err(|e| format!("put: {e}"))?;
        seq += 1;
    }
    let secs = start.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_millis(500));
    println!(
        "RESULT {{\"mode\":\"pub\",\"sent\":{seq},\"puts_per_s\":{:.0},\"size\":{}}}",
        seq as f64 / secs,
        a.size
    );
    Ok(())
}

/// One subscriber's tally.
#[derive(Default)]
struct Tally {
    hist: Hist,
    measured: u64,
    next_seq: Option<u64>,
    lost: u64,
    reordered: u64,
}

fn subscribe(a: &Args) -> Result<(), String> {
    let measuring = Arc::new(AtomicBool::new(false));
    let mut keep = Vec::new();
    let mut tallies = Vec::new();
    let n_sessions = if a.sessions == 0 { a.subs } else { a.sessions };
    let mut sessions = Vec::new();
    for _ in 0..n_sessions.max(1) {
        sessions.push(client(a)?);
    }
    for i in 0..a.subs {
        let s = &sessions[i % sessions.len()];
        let t = Arc::new(Mutex::new(Tally::default()));
        let (t2, m2) = (t.clone(), measuring.clone());
        let sub = s
            .declare_subscriber(a.key.clone())
            .callback(move |sample| {
                let now = wall_ns();
                let bytes = sample.payload().to_bytes();
                let Some((stamp, seq)) = stamp_of(&bytes) else {
                    return;
                };
                let Ok(mut t) = t2.lock() else { return };
                match t.next_seq {
                    Some(n) if seq > n => t.lost += seq - n,
                    Some(n) if seq < n => t.reordered += 1,
                    _ => {}
                }
                t.next_seq = Some(seq + 1);
                if m2.load(Ordering::Relaxed) {
                    t.measured += 1;
                    t.hist.add(now.saturating_sub(stamp) / 1000);
                }
            })
            .wait()
            .map_err(|e| format!("declare_subscriber: {e}"))?;
        keep.push(sub);
        tallies.push(t);
    }
    eprintln!("zenoh-baseline: {} subscribers ready", a.subs);
    std::thread::sleep(Duration::from_secs_f64(a.warmup));
    measuring.store(true, Ordering::Relaxed);
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(a.duration));
    measuring.store(false, Ordering::Relaxed);
    let secs = t0.elapsed().as_secs_f64();
    let (mut all, mut n, mut lost, mut reordered) = (Hist::default(), 0, 0, 0);
    for t in &tallies {
        let Ok(t) = t.lock() else { continue };
        all.merge(&t.hist);
        n += t.measured;
        lost += t.lost;
        reordered += t.reordered;
    }
    println!(
        "RESULT {{\"mode\":\"sub\",\"subs\":{},\"deliveries\":{n},\"deliveries_per_s\":{:.0},\"per_sub_per_s\":{:.0},\"lost\":{lost},\"reordered\":{reordered},\"p50_us\":{},\"p99_us\":{},\"max_us\":{}}}",
        a.subs,
        n as f64 / secs,
        n as f64 / secs / a.subs.max(1) as f64,
        all.quantile(0.5),
        all.quantile(0.99),
        all.quantile(1.0),
    );
    drop(keep);
    drop(sessions);
    Ok(())
}

fn queryable(a: &Args) -> Result<(), String> {
    let s = client(a)?;
    let _q = s
        .declare_queryable(a.key.clone())
        .callback(|q| {
            let payload = q.payload().map(|p| p.to_bytes().into_owned());
            let _ = q
                .reply(q.key_expr().clone(), payload.unwrap_or_default())
                .wait();
        })
        .wait()
        .map_err(|e| format!("declare_queryable: {e}"))?;
    eprintln!("zenoh-baseline: queryable on {}", a.key);
    run_for(a.duration);
    Ok(())
}

fn query(a: &Args) -> Result<(), String> {
    let s = client(a)?;
    std::thread::sleep(Duration::from_millis(500));
    let measuring = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let failed = Arc::new(AtomicU64::new(0));
    let mut threads = Vec::new();
    for c in 0..a.callers {
        let (s, key, size) = (s.clone(), a.key.clone(), a.size);
        let (m, stop, failed) = (measuring.clone(), stop.clone(), failed.clone());
        threads.push(std::thread::spawn(move || {
            let mut h = Hist::default();
            let mut seq = (c as u64) << 32;
            while !stop.load(Ordering::Relaxed) {
                let t = Instant::now();
                let sent = payload(size, wall_ns(), seq);
                let ok = s
                    .get(key.as_str())
                    .payload(sent.clone())
                    .target(QueryTarget::BestMatching)
                    .consolidation(ConsolidationMode::None)
                    .wait()
                    .ok()
                    .and_then(|r| r.recv().ok())
                    .and_then(|r| r.into_result().ok())
                    .is_some_and(|r| r.payload().to_bytes() == sent);
                if !ok {
                    failed.fetch_add(1, Ordering::Relaxed);
                }
                if m.load(Ordering::Relaxed) {
                    h.add(t.elapsed().as_micros() as u64);
                }
                seq += 1;
            }
            h
        }));
    }
    std::thread::sleep(Duration::from_secs_f64(a.warmup));
    measuring.store(true, Ordering::Relaxed);
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(a.duration));
    measuring.store(false, Ordering::Relaxed);
    let secs = t0.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let mut all = Hist::default();
    for t in threads {
        if let Ok(h) = t.join() {
            all.merge(&h);
        }
    }
    println!(
        "RESULT {{\"mode\":\"query\",\"callers\":{},\"calls\":{},\"calls_per_s\":{:.0},\"failed\":{},\"p50_us\":{},\"p99_us\":{}}}",
        a.callers,
        all.count(),
        all.count() as f64 / secs,
        failed.load(Ordering::Relaxed),
        all.quantile(0.5),
        all.quantile(0.99),
    );
    Ok(())
}
