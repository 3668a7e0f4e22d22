//! `rosgate bag play`: advertises a bag's topics and publishes its
//! messages at the recorded pace (log times, scaled by `--rate`). CDR
//! messages go as raw CDR publishes (`{"bytes":<base64>}`,
//! docs/protocol.md "Raw CDR publish"), so the gateway decodes each once
//! and ROS 2 peers get the bytes as recorded; `json` topics (recorded by
//! rosgate for types the gateway did not know) go as their JSON.
//!
//! - Pace: message i goes at start + (log_i - log_0) / rate, start being
//!   when the first message is ready (after its file is read); the wait is
//!   the connection's read (it answers pings and sees Ctrl-C within
//!   `POLL`).
//! - Memory: files are read one after another in start-time order, each
//!   a chunk at a time through its summary's indexes (`stream`): bounded by
//!   `stream::MAX_PLAY_OVERLAP_BYTES`, whatever the bag's size.

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use rosgate_wire::base64::encode_into as base64;

use super::super::client::{Client, Event, Req};
use super::super::{Ctx, Error};
use super::{info, stream};

pub struct Opts {
    pub rate: f64,
    pub looping: bool,
    pub topics: Vec<String>,
    pub offset_ns: u64,
    pub clock_hz: Option<f64>,
    /// `--qos-profile-overrides-path`: the publisher QoS of these topics.
    pub qos: BTreeMap<String, super::qos::Override>,
}

/// Waits until `t`, publishing `/clock` on the way; false on Ctrl-C.
fn wait_until(
    c: &mut Client,
    t: Instant,
    clock: &mut Option<(Duration, Instant)>,
    sim: impl Fn(Instant) -> u64,
) -> Result<bool, Error> {
    loop {
        let now = Instant::now();
        if let Some((period, next)) = clock.as_mut() {
            if now >= *next {
                let ns = sim(now);
                let msg = format!(
                    "{{\"op\":\"publish\",\"topic\":\"/clock\",\"msg\":{{\"clock\":{{\"sec\":{},\"nanosec\":{}}}}}}}",
                    ns / 1_000_000_000,
                    ns % 1_000_000_000
                );
                c.send(msg.as_bytes())?;
                *next += *period;
            }
        }
        let now = Instant::now();
        if now >= t {
            return Ok(true);
        }
        let until = clock.as_ref().map_or(t, |(_, n)| t.min(*n));
        match c.next(Some(until))? {
            Event::Stop => return Ok(false),
            Event::Timeout | Event::Frame(_) => {}
        }
    }
}

pub fn run(ctx: &Ctx, path: &str, o: Opts) -> Result<(), Error> {
    let (meta, mut files, warnings) = info::open(Path::new(path))?;
    // In start-time order, as rosbag2's sequential reader plays them
    // (a stable sort: files without times keep the listed order).
    if meta.files.len() == files.len() {
        let mut keyed: Vec<(u64, std::path::PathBuf)> = meta
            .files
            .iter()
            .map(|f| if f.count > 0 { f.start_ns } else { 0 })
            .zip(files)
            .collect();
        keyed.sort_by_key(|k| k.0);
        files = keyed.into_iter().map(|k| k.1).collect();
    }
    for w in &warnings {
        eprintln!("rosgate bag play: warning: {w}");
    }
    let latched: BTreeMap<&str, bool> = meta
        .topics
        .iter()
        .map(|t| (t.name.as_str(), t.latched))
        .collect();
    let mut c = ctx.connect()?;
    let mut advertised: BTreeSet<String> = BTreeSet::new();
    if o.clock_hz.is_some() {
        let id = c.next_id();
        c.send(
            &Req::new("advertise")
                .str("topic", "/clock")
                .str("type", "rosgraph_msgs/msg/Clock")
                .raw("id", &id)
                .finish(),
        )?;
        c.check(&[&id])?;
    }
    let start_ns = meta.start_ns.saturating_add(o.offset_ns);
    let mut sent = 0u64;
    loop {
        // The schedule starts at the first message, not before the file
        // is read: reading a 5 GB file took 4.5 s, which the player then
        // spent 12 s catching up on at full speed (scripts/bag-perf.sh).
        let wall0 = Cell::new(Instant::now());
        let mut clock = o
            .clock_hz
            .map(|hz| (Duration::from_secs_f64(1.0 / hz), wall0.get()));
        let rate = o.rate;
        let sim = |now: Instant| {
            start_ns + (now.duration_since(wall0.get()).as_secs_f64() * rate * 1e9) as u64
        };
        let mut first: Option<u64> = None;
        for f in &files {
            let filter = stream::Filter {
                topics: o.topics.iter().cloned().collect(),
                start_ns,
            };
            let (mut msgs, warnings) = match stream::FileMessages::open(f, filter) {
                Ok(x) => x,
                Err(e) => {
                    eprintln!("rosgate bag play: {e}; this file is not played");
                    continue;
                }
            };
            for w in warnings {
                eprintln!("rosgate bag play: warning: {w}");
            }
            while let Some(m) = msgs.next_msg() {
                let m = match m {
                    Ok(m) => m,
                    Err(e) => {
                        eprintln!("rosgate bag play: {e}");
                        break;
                    }
                };
                let topic = m.channel.topic.as_str();
                let ty = m
                    .channel
                    .schema
                    .as_ref()
                    .map(|s| s.name.clone())
                    .unwrap_or_default();
                if !advertised.contains(topic) {
                    let id = c.next_id();
                    let mut req = Req::new("advertise")
                        .str("topic", topic)
                        .str("type", &ty)
                        .raw("id", &id);
                    // An override states the publisher's QoS whole; without
                    // one, the recorded durability (latched) stands.
                    if let Some(q) = o.qos.get(topic) {
                        req = req.raw("qos", &q.json());
                    } else if latched.get(topic).copied().unwrap_or(false) {
                        req = req.raw("latch", "true");
                    }
                    c.send(&req.finish())?;
                    c.check(&[&id])?;
                    advertised.insert(topic.to_string());
                }
                if first.is_none() {
                    wall0.set(Instant::now());
                    if let Some((_, next)) = clock.as_mut() {
                        *next = wall0.get();
                    }
                }
                let t0 = *first.get_or_insert(m.log_time);
                let due = wall0.get()
                    + Duration::from_secs_f64(m.log_time.saturating_sub(t0) as f64 / 1e9 / o.rate);
                if !wait_until(&mut c, due, &mut clock, sim)? {
                    c.close();
                    eprintln!("rosgate bag play: stopped after {sent} messages");
                    return Ok(());
                }
                let mut out = Vec::with_capacity(m.data.len() * 4 / 3 + 64);
                out.extend_from_slice(br#"{"op":"publish","topic":"#);
                rosgate_wire::encode::json_string(&mut out, topic);
                if m.channel.message_encoding == "cdr" {
                    out.extend_from_slice(br#","msg":{"bytes":""#);
                    base64(&mut out, &m.data);
                    out.extend_from_slice(b"\"}}");
                } else {
                    out.extend_from_slice(b",\"msg\":");
                    out.extend_from_slice(&m.data);
                    out.push(b'}');
                }
                c.send(&out)?;
                sent += 1;
            }
        }
        if !o.looping {
            break;
        }
    }
    // Everything sent was handled before we leave (a latched message
    // stays with the gateway only while we are connected).
    c.check(&[])?;
    c.close();
    eprintln!("rosgate bag play: published {sent} messages");
    Ok(())
}
