//! `rosgate bag info`: a bag's files, size, times and topics, laid out as
//! `ros2 bag info` prints them. Reads `metadata.yaml` when given a bag
//! directory; for a bare `.mcap` file (or a directory whose metadata is
//! missing) it reads the file's summary, and without a summary (a
//! recording that was killed) it scans the messages that can be read and
//! says the file was not finished.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use super::super::{print, Error};
use super::metadata::{Metadata, Topic};
use super::stream;

/// What one MCAP file holds.
pub struct Scan {
    pub topics: BTreeMap<String, Topic>,
    pub start_ns: u64,
    pub end_ns: u64,
    pub count: u64,
    /// Why the file could not be read to its end, when it could not.
    pub lost: Option<String>,
}

/// Reads `path`'s channels and message counts: from the summary when the
/// file has one, else by reading every message up to where it breaks.
pub fn scan(path: &Path) -> Result<Scan, Error> {
    let mut s = Scan {
        topics: BTreeMap::new(),
        start_ns: u64::MAX,
        end_ns: 0,
        count: 0,
        lost: None,
    };
    let shown = path.display();
    let mut f = fs::File::open(path).map_err(|e| Error::Failed(format!("{shown}: {e}")))?;
    // Only the summary section is read (stream::summary seeks to it).
    if let Ok(Some(sum)) = stream::summary(&mut f) {
        if let Some(st) = &sum.stats {
            for (id, ch) in &sum.channels {
                let t = s.topics.entry(ch.topic.clone()).or_default();
                t.name = ch.topic.clone();
                t.ty = ch
                    .schema
                    .as_ref()
                    .map(|x| x.name.clone())
                    .unwrap_or_default();
                t.format = ch.message_encoding.clone();
                t.latched = latched(&ch.metadata);
                t.count += st.channel_message_counts.get(id).copied().unwrap_or(0);
            }
            s.start_ns = st.message_start_time;
            s.end_ns = st.message_end_time;
            s.count = st.message_count;
            return Ok(s);
        }
    }
    drop(f);
    let (mut msgs, _) =
        stream::FileMessages::open(path, stream::Filter::default()).map_err(Error::Failed)?;
    let indexed = msgs.indexed();
    while let Some(m) = msgs.next_msg() {
        match m {
            Ok(m) => {
                let t = s.topics.entry(m.channel.topic.clone()).or_default();
                t.name = m.channel.topic.clone();
                t.ty = m
                    .channel
                    .schema
                    .as_ref()
                    .map(|x| x.name.clone())
                    .unwrap_or_default();
                t.format = m.channel.message_encoding.clone();
                t.latched = latched(&m.channel.metadata);
                t.count += 1;
                s.count += 1;
                s.start_ns = s.start_ns.min(m.log_time);
                s.end_ns = s.end_ns.max(m.log_time);
            }
            Err(e) => {
                s.lost = Some(format!("{e} (the file was not finished: the rest is lost)"));
                break;
            }
        }
    }
    if s.lost.is_none() && !indexed {
        s.lost = Some(format!(
            "{shown}: no summary (the file was not finished); {} messages read",
            s.count
        ));
    }
    Ok(s)
}

/// Whether a channel's QoS (rosbag2's `offered_qos_profiles` channel
/// metadata) offers transient local.
fn latched(md: &BTreeMap<String, String>) -> bool {
    md.get("offered_qos_profiles")
        .is_some_and(|q| q.contains("durability: transient_local") || q.contains("durability: 1\n"))
}

/// The bag at `path` (directory or `.mcap` file) as metadata plus the
/// files' paths; warnings for what could not be read.
pub fn open(path: &Path) -> Result<(Metadata, Vec<std::path::PathBuf>, Vec<String>), Error> {
    if !path.exists() {
        return Err(Error::Failed(format!(
            "{}: no such file or directory",
            path.display()
        )));
    }
    let mut warnings = Vec::new();
    if path.is_dir() {
        let yaml = path.join("metadata.yaml");
        match fs::read_to_string(&yaml) {
            Ok(text) => match Metadata::parse(&text) {
                Ok(m) => {
                    let files = m.files.iter().map(|f| path.join(&f.path)).collect();
                    return Ok((m, files, warnings));
                }
                // Another storage is refused; a damaged file is read around.
                Err(e) if e.contains("storage") => {
                    return Err(Error::Failed(format!("{}: {e}", yaml.display())))
                }
                Err(e) => warnings.push(format!(
                    "{}: {e}; reading the .mcap files instead",
                    yaml.display()
                )),
            },
            Err(e) => warnings.push(format!(
                "{}: {e}; reading the .mcap files instead",
                yaml.display()
            )),
        }
        let mut files: Vec<_> = fs::read_dir(path)
            .map_err(|e| Error::Failed(format!("{}: {e}", path.display())))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "mcap"))
            .collect();
        files.sort();
        if files.is_empty() {
            return Err(Error::Failed(format!(
                "{}: no metadata.yaml and no .mcap file",
                path.display()
            )));
        }
        let m = from_files(&files, &mut warnings)?;
        return Ok((m, files, warnings));
    }
    let files = vec![path.to_path_buf()];
    let m = from_files(&files, &mut warnings)?;
    Ok((m, files, warnings))
}

fn from_files(files: &[std::path::PathBuf], warnings: &mut Vec<String>) -> Result<Metadata, Error> {
    let mut m = Metadata::default();
    let mut topics: BTreeMap<String, Topic> = BTreeMap::new();
    let (mut start, mut end) = (u64::MAX, 0);
    for f in files {
        let s = scan(f)?;
        if let Some(l) = s.lost {
            warnings.push(l);
        }
        for (k, t) in s.topics {
            let e = topics.entry(k).or_insert_with(|| Topic {
                count: 0,
                ..t.clone()
            });
            e.count += t.count;
        }
        m.count += s.count;
        if s.count > 0 {
            start = start.min(s.start_ns);
            end = end.max(s.end_ns);
        }
        m.files.push(super::metadata::File {
            path: f.display().to_string(),
            start_ns: s.start_ns.min(s.end_ns),
            duration_ns: s.end_ns.saturating_sub(s.start_ns),
            count: s.count,
        });
    }
    if m.count > 0 {
        m.start_ns = start;
        m.duration_ns = end.saturating_sub(start);
    }
    m.topics = topics.into_values().collect();
    Ok(m)
}

/// `secs.nanos` and the UTC date, as `ros2 bag info` shows times.
fn time(ns: u64) -> String {
    format!(
        "{}.{:09} ({} UTC)",
        ns / 1_000_000_000,
        ns % 1_000_000_000,
        utc(ns)
    )
}

fn utc(ns: u64) -> String {
    let secs = ns / 1_000_000_000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = rosgate_core::log::civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

fn size(b: u64) -> String {
    let (v, u) = match b {
        b if b >= 1 << 30 => (b as f64 / (1u64 << 30) as f64, "GiB"),
        b if b >= 1 << 20 => (b as f64 / (1u64 << 20) as f64, "MiB"),
        b if b >= 1 << 10 => (b as f64 / 1024.0, "KiB"),
        b => (b as f64, "B"),
    };
    format!("{v:.1} {u}")
}

pub fn run(path: &str) -> Result<(), Error> {
    let (m, files, warnings) = open(Path::new(path))?;
    for w in &warnings {
        eprintln!("rosgate bag info: warning: {w}");
    }
    let bytes: u64 = files
        .iter()
        .map(|f| fs::metadata(f).map_or(0, |m| m.len()))
        .sum();
    let mut s = String::new();
    s.push_str(&format!(
        "Files:             {}\n",
        files
            .iter()
            .map(|f| f
                .file_name()
                .map_or(String::new(), |n| n.to_string_lossy().into_owned()))
            .collect::<Vec<_>>()
            .join("\n                   ")
    ));
    s.push_str(&format!("Bag size:          {}\n", size(bytes)));
    s.push_str("Storage id:        mcap\n");
    s.push_str(&format!(
        "Duration:          {:.9}s\n",
        m.duration_ns as f64 / 1e9
    ));
    s.push_str(&format!("Start:             {}\n", time(m.start_ns)));
    s.push_str(&format!(
        "End:               {}\n",
        time(m.start_ns + m.duration_ns)
    ));
    s.push_str(&format!("Messages:          {}\n", m.count));
    s.push_str("Topic information: ");
    for (i, t) in m.topics.iter().enumerate() {
        if i > 0 {
            s.push_str("                   ");
        }
        s.push_str(&format!(
            "Topic: {} | Type: {} | Count: {} | Serialization Format: {}{}\n",
            t.name,
            t.ty,
            t.count,
            t.format,
            if t.latched { " | Latched" } else { "" }
        ));
    }
    if m.topics.is_empty() {
        s.push('\n');
    }
    for (k, v) in &m.custom {
        s.push_str(&format!("Custom:            {k}: {v}\n"));
    }
    print(&s)
}
