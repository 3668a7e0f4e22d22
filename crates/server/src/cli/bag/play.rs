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
//! - Controls (`control`): space on a terminal, `--start-paused`, and the
//!   services `/rosbag2_player/pause|resume|toggle_paused|is_paused`,
//!   offered on the player's connection like any client's services.
//! - Memory: files are read one after another in start-time order, each
//!   a chunk at a time through its summary's indexes (`stream`): bounded by
//!   `stream::MAX_PLAY_OVERLAP_BYTES`, whatever the bag's size.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use rosgate_wire::base64::encode_into as base64;

use super::super::client::{Client, Event, Req};
use super::super::{Ctx, Error, POLL};
use super::control::{self, Keys, Pace};
use super::{info, stream};

pub struct Opts {
    pub rate: f64,
    pub looping: bool,
    pub topics: Vec<String>,
    pub offset_ns: u64,
    pub clock_hz: Option<f64>,
    /// `--qos-profile-overrides-path`: the publisher QoS of these topics.
    pub qos: BTreeMap<String, super::qos::Override>,
    /// `--start-paused`.
    pub start_paused: bool,
}

/// How often the keyboard is looked at while waiting (stdin a terminal).
const KEY_POLL: Duration = Duration::from_millis(50);

/// What the wait loop drives besides the connection.
struct Player {
    pace: Pace,
    /// `/clock`: (period, next tick).
    clock: Option<(Duration, Instant)>,
    start_ns: u64,
    keys: Option<Keys>,
}

impl Player {
    fn toggled(&mut self, now: Instant, said: &str) {
        if let Some((_, next)) = self.clock.as_mut() {
            *next = (*next).max(now);
        }
        eprintln!("rosgate bag play: {said}");
    }

    /// Waits until the message logged at `log` is due (paused: until
    /// resumed and then due), publishing `/clock`, answering the player
    /// services and reading space on the way; false on Ctrl-C.
    fn wait(&mut self, c: &mut Client, log: u64) -> Result<bool, Error> {
        loop {
            let now = Instant::now();
            if let Some((period, next)) = self.clock.as_mut() {
                if now >= *next {
                    let ns = self.start_ns + self.pace.elapsed_ns(now);
                    let msg = format!(
                        "{{\"op\":\"publish\",\"topic\":\"/clock\",\"msg\":{{\"clock\":{{\"sec\":{},\"nanosec\":{}}}}}}}",
                        ns / 1_000_000_000,
                        ns % 1_000_000_000
                    );
                    c.send(msg.as_bytes())?;
                    *next += *period;
                }
            }
            let presses = self.keys.as_ref().map_or(0, Keys::spaces);
            for _ in 0..presses {
                let now = Instant::now();
                let paused = !self.pace.paused();
                self.pace.set_paused(paused, now);
                self.toggled(
                    now,
                    if paused {
                        "paused (space resumes)"
                    } else {
                        "resumed"
                    },
                );
            }
            let now = Instant::now();
            let due = self.pace.due(log);
            if due.is_some_and(|d| now >= d) {
                return Ok(true);
            }
            let mut until = due.unwrap_or(now + POLL);
            if let Some((_, next)) = &self.clock {
                until = until.min(*next);
            }
            if self.keys.is_some() {
                until = until.min(now + KEY_POLL);
            }
            match c.next(Some(until))? {
                Event::Stop => return Ok(false),
                Event::Timeout => {}
                Event::Frame(f) => {
                    let now = Instant::now();
                    if let Some((mut out, said)) = control::answer(&f, &mut self.pace, now) {
                        while out.last() == Some(&b'\n') {
                            out.pop();
                        }
                        c.send(&out)?;
                        if let Some(said) = said {
                            self.toggled(now, said);
                        }
                    }
                }
            }
        }
    }
}

/// Offers the player services ([`control::SERVICES`]); a refusal (another
/// player has them) is said, and playback goes on without them.
fn advertise_services(c: &mut Client) -> Result<(), Error> {
    let mut ids = Vec::new();
    for (name, ty) in control::SERVICES {
        let id = c.next_id();
        c.send(
            &Req::new("advertise_service")
                .str("service", name)
                .str("type", ty)
                .raw("id", &id)
                .finish(),
        )?;
        ids.push((id, *name));
    }
    c.check(&[])?;
    for (id, name) in ids {
        if let Some(why) = c.take_error(&id) {
            eprintln!("rosgate bag play: warning: {name} not offered: {why}");
        }
    }
    Ok(())
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
    advertise_services(&mut c)?;
    let start_ns = meta.start_ns.saturating_add(o.offset_ns);
    let mut sent = 0u64;
    let now = Instant::now();
    let mut pl = Player {
        pace: Pace::new(o.rate, now, o.start_paused),
        clock: o
            .clock_hz
            .map(|hz| (Duration::from_secs_f64(1.0 / hz), now)),
        start_ns,
        keys: Keys::open(),
    };
    if pl.keys.is_some() {
        eprintln!("rosgate bag play: press space to pause and resume");
    }
    if o.start_paused {
        eprintln!(
            "rosgate bag play: paused (--start-paused; /rosbag2_player/resume or space resumes)"
        );
    }
    loop {
        // The schedule starts at the first message, not before the file
        // is read: reading a 5 GB file took 4.5 s, which the player then
        // spent 12 s catching up on at full speed (scripts/bag-perf.sh).
        pl.pace.restart(Instant::now());
        let mut first = true;
        let before = sent;
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
                if first {
                    first = false;
                    let now = Instant::now();
                    pl.pace.first(m.log_time, now);
                    if let Some((_, next)) = pl.clock.as_mut() {
                        *next = now;
                    }
                }
                if !pl.wait(&mut c, m.log_time)? {
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
        // A round that played nothing would spin: --loop over a bag with
        // nothing playable (filtered out, or unreadable) ends.
        if sent == before {
            eprintln!("rosgate bag play: nothing to play; --loop stops");
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
