//! `rosgate bag record`: a `cbor-raw` subscriber that writes what it gets
//! to a rosbag2 bag (MCAP files plus `metadata.yaml`).
//!
//! - One WebSocket connection; each recorded topic is subscribed with
//!   `cbor-raw` (the CDR as the ROS 2 node put it) and a reliable QoS
//!   with no depth (keep all; docs/protocol.md, "QoS"), so the gateway
//!   never sheds this recorder's messages: past its reliable budget (twice
//!   `--max-queue-bytes`) it closes the connection instead, which ends the
//!   recording with exit 1. A depth, even the deepest the gateway takes
//!   (1000), is keep-last: 20000 small messages/s fill it in a 50 ms
//!   stall and the gateway dropped the oldest (scripts/bag-perf.sh saw
//!   114 dropped in 5 s), while bytes, not messages, are what the
//!   gateway's memory bound is about. Topics whose type the gateway does not know are
//!   subscribed as JSON and recorded with a `json` schema and encoding.
//! - With `-a`/`-e` (and for named topics not there yet), the topic list
//!   (`/rosapi/topics_and_raw_types`) is read again every
//!   [`DISCOVERY_PERIOD`]; at most [`MAX_BAG_TOPICS`] topics are recorded.
//! - Memory: a message is written when it is read; the MCAP writer holds
//!   one chunk ([`CHUNK_SIZE`]) and the connection's queue holds what
//!   arrives during one topic-list call.
//! - SIGINT/SIGTERM: the current file is finished (chunk, index, summary
//!   with statistics), `metadata.yaml` written, exit 0. A write error
//!   stops the recording the same way and exits 1. A disk about to fill
//!   (less than [`MIN_FREE_BYTES`] left, looked at every
//!   [`SPACE_CHECK_BYTES`] written) stops it while there is still room to
//!   finish the file and the metadata; exit 1.
//! - `metadata.yaml` is written when each file opens and at the end, each
//!   time to a temporary file renamed over it, so a recording that dies
//!   (or a disk that fills anyway) leaves the last complete one.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io::{BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mcap::records::MessageHeader;
use mcap::{Compression, WriteOptions, Writer};
use regex::Regex;

use super::super::client::{json_quote, Client, Event, Frame, Req};
use super::super::url::Url;
use super::super::{Ctx, Error};
use super::frame;
use super::metadata::{self, Metadata};

/// How often the topic list is read for `-a`, `-e` and named topics that
/// have not appeared yet.
pub const DISCOVERY_PERIOD: Duration = Duration::from_secs(1);
/// Most topics one recording subscribes to.
pub const MAX_BAG_TOPICS: usize = 4096;
/// MCAP chunk size (rosbag2's MCAP plugin default is 768 KiB too).
pub const CHUNK_SIZE: u64 = 768 * 1024;
/// Free space under which the recorder stops, finishing the open file
/// (one chunk, its indexes and the summary) and the metadata in what is
/// left.
pub const MIN_FREE_BYTES: u64 = 8 * 1024 * 1024;
/// Bytes written between two looks at the free space.
pub const SPACE_CHECK_BYTES: u64 = 1024 * 1024;

pub struct Opts {
    pub out: Option<String>,
    pub topics: Vec<String>,
    pub all: bool,
    pub regex: Option<Regex>,
    pub exclude: Option<Regex>,
    pub hidden: bool,
    pub max_size: Option<u64>,
    pub max_duration: Option<Duration>,
    pub compression: Option<Compression>,
    /// `--qos-profile-overrides-path`: the subscription QoS of these topics.
    pub qos: BTreeMap<String, super::qos::Override>,
}

/// A topic being recorded.
struct Rec {
    ty: String,
    /// `cdr`, or `json` when the gateway did not know the type.
    format: String,
    latched: bool,
    /// Has a `std_msgs/Header` first: publish time from `header.stamp`.
    header: bool,
    definition: String,
    count: u64,
    /// Channel id in the current file.
    channel: Option<u16>,
}

/// The open MCAP file.
struct Out {
    writer: Writer<BufWriter<fs::File>>,
    meta: metadata::File,
    opened: Instant,
    bytes: u64,
}

struct Recorder {
    dir: PathBuf,
    name: String,
    compression: Option<Compression>,
    topics: BTreeMap<String, Rec>,
    out: Option<Out>,
    files: Vec<metadata::File>,
    seq: u32,
    first_ns: Option<u64>,
    last_ns: u64,
    count: u64,
    bytes: u64,
    unreadable: u64,
    /// Bytes written since the free space was last looked at.
    since_space_check: u64,
    /// What the gateway dropped from this connection, as last asked.
    drops: Option<Drops>,
}

/// Messages the gateway dropped from the recorder's connection: all of
/// them, and by topic (`dropped_topics` of `/rosgate/connections`).
#[derive(Clone, Default)]
struct Drops {
    total: u64,
    by_topic: BTreeMap<String, u64>,
}

/// An MCAP error with its cause (the crate's `Display` leaves the I/O
/// error out).
fn mcap_err(e: mcap::McapError) -> String {
    match std::error::Error::source(&e) {
        Some(cause) => format!("{e}: {cause}"),
        None => e.to_string(),
    }
}

/// Bytes free for an unprivileged writer on `dir`'s file system; `None`
/// when it cannot be told.
fn free_bytes(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: `c` is a NUL-terminated path that outlives the call, and
    // `st` is a plain C struct statvfs fills (zeroed is a valid value).
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    // u64 on 64-bit Linux; narrower on some 32-bit targets.
    #[allow(clippy::useless_conversion)]
    let (avail, frsize) = (u64::from(st.f_bavail), u64::from(st.f_frsize));
    Some(avail.saturating_mul(frsize))
}

fn wall_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// `rosbag2_YYYY_MM_DD-HH_MM_SS` in UTC, `ros2 bag record`'s default name
/// (which uses local time).
fn default_name() -> String {
    let secs = wall_ns() / 1_000_000_000;
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (y, m, d) = rosgate_core::log::civil_from_days(days as i64);
    format!(
        "rosbag2_{y:04}_{m:02}_{d:02}-{:02}_{:02}_{:02}",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

fn hidden(name: &str) -> bool {
    name.split('/').any(|t| t.starts_with('_'))
}

impl Recorder {
    fn file_path(&self, i: usize) -> (String, PathBuf) {
        let rel = format!("{}_{i}.mcap", self.name);
        let full = self.dir.join(&rel);
        (rel, full)
    }

    /// Opens the next file and declares every topic in it.
    fn open(&mut self) -> Result<(), String> {
        self.check_space()?;
        let (rel, full) = self.file_path(self.files.len());
        let f = fs::File::create(&full).map_err(|e| format!("{}: {e}", full.display()))?;
        let opts = WriteOptions::new()
            .profile("ros2")
            .library(format!("rosgate {}", env!("CARGO_PKG_VERSION")))
            .compression(self.compression)
            .chunk_size(Some(CHUNK_SIZE));
        let writer = opts
            .create(BufWriter::new(f))
            .map_err(|e| format!("{}: {}", full.display(), mcap_err(e)))?;
        self.out = Some(Out {
            writer,
            meta: metadata::File {
                path: rel,
                ..metadata::File::default()
            },
            opened: Instant::now(),
            bytes: 0,
        });
        let names: Vec<String> = self.topics.keys().cloned().collect();
        for t in names {
            self.declare(&t)?;
        }
        self.write_metadata()
    }

    /// Fails when the disk is about to fill (see the module docs).
    fn check_space(&mut self) -> Result<(), String> {
        self.since_space_check = 0;
        match free_bytes(&self.dir) {
            Some(free) if free < MIN_FREE_BYTES => Err(format!(
                "{}: the disk is nearly full ({free} bytes left, the recorder keeps {MIN_FREE_BYTES} to finish the file)",
                self.dir.display()
            )),
            _ => Ok(()),
        }
    }

    /// Adds the schema and channel of topic `t` to the open file.
    fn declare(&mut self, t: &str) -> Result<(), String> {
        let (Some(out), Some(rec)) = (self.out.as_mut(), self.topics.get_mut(t)) else {
            return Ok(());
        };
        let (schema_enc, def) = if rec.format == "cdr" {
            ("ros2msg", rec.definition.as_bytes())
        } else {
            ("jsonschema", &b"{}"[..])
        };
        let schema = out
            .writer
            .add_schema(&rec.ty, schema_enc, def)
            .map_err(mcap_err)?;
        let mut md = BTreeMap::new();
        // rosbag2's MCAP plugin keeps each topic's QoS in its channel.
        md.insert(
            "offered_qos_profiles".to_string(),
            metadata::qos(rec.latched, 0),
        );
        let ch = out
            .writer
            .add_channel(schema, t, &rec.format, &md)
            .map_err(mcap_err)?;
        rec.channel = Some(ch);
        Ok(())
    }

    /// Finishes the open file (chunk, indexes, summary).
    fn close(&mut self) -> Result<(), String> {
        let Some(mut out) = self.out.take() else {
            return Ok(());
        };
        for r in self.topics.values_mut() {
            r.channel = None;
        }
        let res = out.writer.finish().map(|_| ()).map_err(mcap_err);
        let flush = out
            .writer
            .into_inner()
            .into_inner()
            .map_err(|e| e.to_string())
            .and_then(|f| f.sync_all().map_err(|e| e.to_string()));
        self.files.push(out.meta);
        res.and(flush)
            .map_err(|e| format!("{}: {e}", self.dir.display()))
    }

    fn write(
        &mut self,
        topic: &str,
        log_ns: u64,
        data: &[u8],
        limits: (Option<u64>, Option<Duration>),
    ) -> Result<(), String> {
        let split = self.out.as_ref().is_some_and(|o| {
            o.meta.count > 0
                && (limits.0.is_some_and(|m| o.bytes >= m)
                    || limits.1.is_some_and(|d| o.opened.elapsed() >= d))
        });
        if split {
            self.close()?;
        }
        if self.out.is_none() {
            self.open()?;
        }
        let Some(rec) = self.topics.get_mut(topic) else {
            return Ok(());
        };
        let publish = if rec.header {
            frame::header_stamp(data).unwrap_or(log_ns)
        } else {
            log_ns
        };
        let (Some(out), Some(ch)) = (self.out.as_mut(), rec.channel) else {
            return Ok(());
        };
        self.seq = self.seq.wrapping_add(1);
        out.writer
            .write_to_known_channel(
                &MessageHeader {
                    channel_id: ch,
                    sequence: self.seq,
                    log_time: log_ns,
                    publish_time: publish,
                },
                data,
            )
            .map_err(mcap_err)?;
        rec.count += 1;
        let m = &mut out.meta;
        if m.count == 0 || log_ns < m.start_ns {
            m.start_ns = log_ns;
        }
        m.duration_ns = m.duration_ns.max(log_ns.saturating_sub(m.start_ns));
        m.count += 1;
        out.bytes += data.len() as u64;
        self.bytes += data.len() as u64;
        self.since_space_check += data.len() as u64;
        self.count += 1;
        self.first_ns = Some(self.first_ns.map_or(log_ns, |f| f.min(log_ns)));
        self.last_ns = self.last_ns.max(log_ns);
        if self.since_space_check >= SPACE_CHECK_BYTES {
            self.check_space()?;
        }
        Ok(())
    }

    fn metadata(&self) -> Metadata {
        let start = self.first_ns.unwrap_or(0);
        let json: Vec<&str> = self
            .topics
            .iter()
            .filter(|(_, r)| r.format == "json")
            .map(|(t, _)| t.as_str())
            .collect();
        let mut custom = vec![(
            "rosgate.dropped".to_string(),
            self.drops
                .as_ref()
                .map_or("unknown".to_string(), |d| d.total.to_string()),
        )];
        // One key per topic that lost messages: rosbag2's custom_data is
        // a flat string-to-string map (rosbags reads it as one).
        for (t, n) in self.drops.iter().flat_map(|d| &d.by_topic) {
            if *n > 0 {
                custom.push((format!("rosgate.dropped.{t}"), n.to_string()));
            }
        }
        custom.push(("rosgate.unreadable".into(), self.unreadable.to_string()));
        if !json.is_empty() {
            custom.push(("rosgate.json_topics".into(), json.join(",")));
        }
        Metadata {
            start_ns: start,
            duration_ns: self.last_ns.saturating_sub(start),
            count: self.count,
            topics: self
                .topics
                .iter()
                .map(|(t, r)| metadata::Topic {
                    name: t.clone(),
                    ty: r.ty.clone(),
                    format: r.format.clone(),
                    latched: r.latched,
                    count: r.count,
                })
                .collect(),
            files: self.files.clone(),
            custom,
        }
    }

    /// Writes `metadata.yaml` through a temporary file renamed over it:
    /// a failed write leaves the previous one whole.
    fn write_metadata(&self) -> Result<(), String> {
        let p = self.dir.join("metadata.yaml");
        let tmp = self.dir.join(".metadata.yaml.tmp");
        let mut files = self.files.clone();
        if let Some(o) = &self.out {
            files.push(o.meta.clone());
        }
        let mut m = self.metadata();
        m.files = files;
        fs::write(&tmp, m.to_yaml())
            .and_then(|()| fs::rename(&tmp, &p))
            .map_err(|e| {
                let _ = fs::remove_file(&tmp);
                format!("{}: {e}", p.display())
            })
    }
}

/// The topic list: (name, type, definition).
fn topic_list(c: &mut Client) -> Result<Vec<(String, String, String)>, Error> {
    let v = c.call("/rosapi/topics_and_raw_types", "{}")?;
    let val: serde_json::Value = serde_json::from_str(&v)
        .map_err(|e| Error::Failed(format!("topics_and_raw_types: {e}")))?;
    let arr = |k: &str| -> Vec<String> {
        val.get(k)
            .and_then(|a| a.as_array())
            .map(|a| {
                a.iter()
                    .map(|s| s.as_str().unwrap_or("").to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    let (names, types, defs) = (arr("topics"), arr("types"), arr("typedefs_full_text"));
    Ok(names
        .into_iter()
        .enumerate()
        .map(|(i, n)| {
            (
                n,
                types.get(i).cloned().unwrap_or_default(),
                defs.get(i).cloned().unwrap_or_default(),
            )
        })
        .collect())
}

/// Whether any publisher of `topic` offers transient local.
fn latched(c: &mut Client, topic: &str) -> Result<bool, Error> {
    let v = c.call(
        "/rosgate/topic_info",
        &format!("{{\"topic\":{}}}", json_quote(topic)),
    )?;
    let val: serde_json::Value = serde_json::from_str(&v).unwrap_or_default();
    Ok(val
        .get("publishers")
        .and_then(|p| p.as_array())
        .is_some_and(|p| {
            p.iter().any(|x| {
                x.pointer("/qos/durability").and_then(|d| d.as_str()) == Some("transient_local")
            })
        }))
}

/// Messages the gateway dropped on this connection, in all and by topic
/// (`/rosgate/connections`, found by the node name this recorder
/// declared); `None` when it cannot be told.
fn dropped(c: &mut Client, node: &str) -> Option<Drops> {
    let v = c.call("/rosgate/connections", "{}").ok()?;
    let val: serde_json::Value = serde_json::from_str(&v).ok()?;
    let me = val
        .get("connections")?
        .as_array()?
        .iter()
        .find(|x| x.get("client").and_then(|n| n.as_str()) == Some(node))?;
    let by_topic = me
        .get("dropped_topics")
        .and_then(|d| d.as_object())
        .map(|m| {
            m.iter()
                .filter_map(|(t, n)| Some((t.clone(), n.as_u64()?)))
                .collect()
        })
        .unwrap_or_default();
    Some(Drops {
        total: me.get("dropped")?.as_u64()?,
        by_topic,
    })
}

pub fn run(ctx: &Ctx, o: Opts) -> Result<(), Error> {
    if !matches!(ctx.common.url, Url::Ws { .. }) {
        return Err(Error::Usage(
            "bag record needs a WebSocket URL (--url ws://...): cbor-raw messages are binary frames".into(),
        ));
    }
    if o.topics.is_empty() && !o.all && o.regex.is_none() {
        return Err(Error::Usage("no topics: name some, or use -a or -e".into()));
    }
    let name = o.out.clone().unwrap_or_else(default_name);
    let dir = PathBuf::from(&name);
    if dir.exists() {
        return Err(Error::Failed(format!(
            "{}: already exists (ros2 bag record refuses too)",
            dir.display()
        )));
    }
    fs::create_dir_all(&dir).map_err(|e| Error::Failed(format!("{}: {e}", dir.display())))?;
    let base = Path::new(&name)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("rosbag2")
        .to_string();
    let mut c = ctx.connect()?;
    c.keep_binary = true;
    let node = format!("/_rosgate_bag_record_{}", std::process::id());
    let id = c.next_id();
    c.send(
        &Req::new("declare_node")
            .str("name", &node[1..])
            .raw("id", &id)
            .finish(),
    )?;
    c.check(&[&id])?;
    let mut r = Recorder {
        dir,
        name: base,
        compression: o.compression,
        topics: BTreeMap::new(),
        out: None,
        files: Vec::new(),
        seq: 0,
        first_ns: None,
        last_ns: 0,
        count: 0,
        bytes: 0,
        unreadable: 0,
        since_space_check: 0,
        drops: None,
    };
    let named: Vec<String> = o
        .topics
        .iter()
        .map(|t| super::super::args::absolute(t))
        .collect();
    let wanted = |t: &str| -> bool {
        if o.exclude.as_ref().is_some_and(|x| x.is_match(t)) {
            return false;
        }
        if named.iter().any(|n| n == t) {
            return true;
        }
        if hidden(t) && !o.hidden {
            return false;
        }
        o.all || o.regex.as_ref().is_some_and(|x| x.is_match(t))
    };
    let tty = std::io::stderr().is_terminal();
    let started = Instant::now();
    let mut next_discovery = Instant::now();
    let mut next_progress = Instant::now() + Duration::from_secs(1);
    let mut window = (Instant::now(), 0u64, 0u64);
    // SIDs of subscriptions by topic (a refused one names the topic).
    let mut sub_ids: HashMap<String, String> = HashMap::new();
    let limits = (o.max_size, o.max_duration);
    let mut failure: Option<String> = None;
    r.open().map_err(Error::Failed)?;
    eprintln!("[rosgate bag] recording to {}", r.dir.display());
    loop {
        let now = Instant::now();
        if now >= next_discovery {
            next_discovery = now + DISCOVERY_PERIOD;
            let list = match topic_list(&mut c) {
                Ok(l) => l,
                Err(Error::Interrupted) => break,
                Err(e) => {
                    failure = Some(format!("{e:?}"));
                    break;
                }
            };
            // Drops are asked as often as the topic list, for the
            // progress line (and kept if the gateway closes on us).
            if let Some(d) = dropped(&mut c, &node) {
                r.drops = Some(d);
            }
            for (t, ty, def) in list {
                if r.topics.contains_key(&t) || !wanted(&t) || ty.is_empty() {
                    continue;
                }
                if r.topics.len() >= MAX_BAG_TOPICS {
                    eprintln!("[rosgate bag] {t}: not recorded, {MAX_BAG_TOPICS} topics already (MAX_BAG_TOPICS)");
                    continue;
                }
                let known = !def.is_empty();
                let latched = match latched(&mut c, &t) {
                    Ok(l) => l,
                    Err(Error::Interrupted) => false,
                    Err(e) => return Err(e),
                };
                let id = c.next_id();
                // An override states the subscription's QoS; what it
                // leaves unstated keeps the recorder's (reliable, keep all).
                let qos = o.qos.get(&t).map_or_else(
                    || r#"{"reliability":"reliable"}"#.to_string(),
                    |q| {
                        let mut q = q.clone();
                        q.reliability = q.reliability.or(Some("reliable"));
                        q.json()
                    },
                );
                let mut req = Req::new("subscribe")
                    .str("topic", &t)
                    .str("type", &ty)
                    .raw("id", &id)
                    .raw("qos", &qos);
                if known {
                    req = req.str("compression", "cbor-raw");
                } else {
                    eprintln!(
                        "[rosgate bag] {t}: type {ty} unknown to the gateway, recorded as JSON"
                    );
                }
                c.send(&req.finish())?;
                sub_ids.insert(id, t.clone());
                eprintln!("[rosgate bag] subscribed to {t} [{ty}]");
                r.topics.insert(
                    t.clone(),
                    Rec {
                        header: known && frame::starts_with_header(&def),
                        ty,
                        format: if known { "cdr" } else { "json" }.into(),
                        latched,
                        definition: frame::msg_definition(&def),
                        count: 0,
                        channel: None,
                    },
                );
                if let Err(e) = r.declare(&t) {
                    failure = Some(e);
                    break;
                }
            }
            if failure.is_some() {
                break;
            }
        }
        if now >= next_progress {
            next_progress = now + Duration::from_secs(1);
            let secs = window.0.elapsed().as_secs_f64().max(1e-3);
            let drops = match &r.drops {
                None => "?".to_string(),
                Some(d) if d.total == 0 => "0".to_string(),
                Some(d) => {
                    let worst: Vec<String> = d
                        .by_topic
                        .iter()
                        .filter(|x| *x.1 > 0)
                        .take(3)
                        .map(|(t, n)| format!("{t} {n}"))
                        .collect();
                    format!("{} ({})", d.total, worst.join(", "))
                }
            };
            let line = format!(
                "[rosgate bag] {:.0} s  topics {}  msgs {}  {:.1} msg/s  {:.2} MB/s  drops {drops}",
                started.elapsed().as_secs_f64(),
                r.topics.len(),
                r.count,
                (r.count - window.1) as f64 / secs,
                (r.bytes - window.2) as f64 / secs / 1e6,
            );
            window = (now, r.count, r.bytes);
            if tty {
                eprint!("\r{line}   ");
            } else if started.elapsed().as_secs() % 10 == 0 {
                eprintln!("{line}");
            }
        }
        let until = next_discovery.min(next_progress);
        let f: Frame = match c.next(Some(until)) {
            Ok(Event::Frame(f)) => f,
            Ok(Event::Timeout) => continue,
            Ok(Event::Stop) | Err(Error::Interrupted) => break,
            Err(e) => {
                failure = Some(match e {
                    Error::Failed(m) | Error::Unreachable(m) => m,
                    other => format!("{other:?}"),
                });
                break;
            }
        };
        match f.op().as_ref() {
            "publish" => {}
            "status" => {
                let t = f.raw("id").and_then(|i| sub_ids.get(i)).cloned();
                let msg = f.str("msg").unwrap_or_default().into_owned();
                eprintln!(
                    "[rosgate bag] {}: refused: {msg}",
                    t.as_deref().unwrap_or("request")
                );
                continue;
            }
            _ => continue,
        }
        let res = match &f.binary {
            Some(b) => match frame::parse(b) {
                Some(m) if r.topics.contains_key(m.topic) => {
                    let (t, ns, cdr) = (m.topic.to_string(), m.stamp_ns, m.cdr);
                    r.write(&t, ns, cdr, limits)
                }
                _ => {
                    r.unreadable += 1;
                    Ok(())
                }
            },
            None => {
                let t = f.str("topic").unwrap_or_default().into_owned();
                let msg = f.raw("msg").unwrap_or("null").as_bytes().to_vec();
                if r.topics.get(&t).is_some_and(|x| x.format == "json") {
                    r.write(&t, wall_ns(), &msg, limits)
                } else {
                    Ok(())
                }
            }
        };
        if let Err(e) = res {
            failure = Some(e);
            break;
        }
    }
    if tty {
        eprintln!();
    }
    // Asked even after a failure: a closed connection answers nothing
    // at once (`None`), a full disk does not stop the gateway answering.
    c.clear_stop();
    // The last answer stands when the connection is gone (the gateway
    // closed it): what it had dropped until then.
    if let Some(d) = dropped(&mut c, &node) {
        r.drops = Some(d);
    }
    c.close();
    let closed = r.close();
    let meta = r.write_metadata();
    let drops = r.drops.as_ref().map(|d| d.total);
    eprintln!(
        "[rosgate bag] recorded {} messages on {} topics in {} file(s), {:.1} s, {:.2} MB; gateway drops: {}",
        r.count,
        r.topics.len(),
        r.files.len(),
        r.last_ns.saturating_sub(r.first_ns.unwrap_or(r.last_ns)) as f64 / 1e9,
        r.bytes as f64 / 1e6,
        drops.map_or("unknown".to_string(), |d| d.to_string())
    );
    for (t, rec) in &r.topics {
        let lost = r
            .drops
            .as_ref()
            .and_then(|d| d.by_topic.get(t))
            .map_or(String::new(), |n| format!(", {n} dropped"));
        eprintln!(
            "[rosgate bag]   {t} [{}]: {} ({}){lost}",
            rec.ty, rec.count, rec.format
        );
    }
    if let Some(e) = failure {
        return Err(Error::Failed(format!("recording stopped: {e}")));
    }
    closed.map_err(Error::Failed)?;
    meta.map_err(Error::Failed)?;
    let _ = std::io::stdout().flush();
    Ok(())
}
