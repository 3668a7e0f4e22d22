//! A bag file's messages read with bounded memory, for `bag play` (and
//! the summary `bag info` reads): the whole file is never in memory.
//!
//! - A file with a summary is read through its chunk indexes (the mcap
//!   crate's sans-io `IndexedReader`), one chunk at a time in log-time
//!   order; chunks whose times overlap are held together, so when the
//!   chunks overlapping one instant would hold more than
//!   [`MAX_PLAY_OVERLAP_BYTES`] decompressed, the file is read in file
//!   order instead (one chunk at a time) and a warning says so.
//! - A file without a summary (a recording that was killed) is read
//!   linearly (`mcap::io::MessageReader` over a buffered file: one record
//!   at a time) up to where it breaks; what could not be read is said.
//! - No record (a chunk, compressed or not, or a summary record) larger
//!   than [`MAX_PLAY_RECORD_BYTES`] is read: the file stops there, said.
//!
//! So a reader holds at most [`MAX_PLAY_OVERLAP_BYTES`] of decompressed
//! chunks plus one compressed chunk and the summary's indexes (about 100
//! bytes per chunk), whatever the file's size. Files of a bag are read one
//! after another (as rosbag2's sequential reader does), never together.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use mcap::sans_io::indexed_reader::{
    IndexedReadEvent, IndexedReader, IndexedReaderOptions, ReadOrder,
};
use mcap::sans_io::summary_reader::{SummaryReadEvent, SummaryReader, SummaryReaderOptions};
use mcap::sans_io::LinearReaderOptions;
use mcap::{Channel, McapError, Summary};

/// Largest record (a chunk, compressed or decompressed, or any other
/// record) read from a bag file. rosbag2's MCAP plugin writes 768 KiB
/// chunks; a bigger record is taken as damage, not read.
pub const MAX_PLAY_RECORD_BYTES: usize = 64 * 1024 * 1024;
/// Most bytes of decompressed chunks held at once while reading one file
/// in log-time order; past it the file is read in file order.
pub const MAX_PLAY_OVERLAP_BYTES: u64 = 32 * 1024 * 1024;

/// One message, owning its bytes.
pub struct Msg {
    pub channel: Arc<Channel<'static>>,
    pub log_time: u64,
    pub data: Vec<u8>,
}

/// Which messages to yield.
#[derive(Clone, Default)]
pub struct Filter {
    /// Only these topics; all when empty.
    pub topics: BTreeSet<String>,
    /// Only messages logged at or after this time (ns).
    pub start_ns: u64,
}

impl Filter {
    fn wants(&self, topic: &str, log_time: u64) -> bool {
        log_time >= self.start_ns && (self.topics.is_empty() || self.topics.contains(topic))
    }
}

/// An MCAP error with its cause (the crate's `Display` leaves the I/O
/// error out).
pub fn mcap_err(e: &McapError) -> String {
    match std::error::Error::source(e) {
        Some(cause) => format!("{e}: {cause}"),
        None => e.to_string(),
    }
}

/// The file's summary section, read by seeking to it (the data section is
/// not read); `Ok(None)` when the file has none, `Err` when its end is
/// not a finished MCAP file (truncated: no footer or end magic).
pub fn summary(f: &mut File) -> Result<Option<Summary>, McapError> {
    let size = f.metadata()?.len();
    let mut r = SummaryReader::new_with_options(
        SummaryReaderOptions::default()
            .with_file_size(size)
            .with_record_length_limit(MAX_PLAY_RECORD_BYTES),
    );
    while let Some(ev) = r.next_event() {
        match ev? {
            SummaryReadEvent::ReadRequest(n) => {
                let k = f.read(r.insert(n))?;
                r.notify_read(k);
            }
            SummaryReadEvent::SeekRequest(to) => {
                let pos = f.seek(to)?;
                r.notify_seeked(pos);
            }
        }
    }
    Ok(r.finish())
}

/// Largest total uncompressed size of the chunks whose time ranges
/// overlap at one instant (what a log-time read holds at once).
fn peak_overlap(summary: &Summary) -> u64 {
    let mut edges: Vec<(u64, bool, u64)> = Vec::with_capacity(summary.chunk_indexes.len() * 2);
    for c in &summary.chunk_indexes {
        // Starts sort before ends at the same time: touching ranges overlap.
        edges.push((c.message_start_time, false, c.uncompressed_size));
        edges.push((c.message_end_time, true, c.uncompressed_size));
    }
    edges.sort_unstable();
    let (mut cur, mut peak) = (0u64, 0u64);
    for (_, end, size) in edges {
        if end {
            cur = cur.saturating_sub(size);
        } else {
            cur = cur.saturating_add(size);
            peak = peak.max(cur);
        }
    }
    peak
}

enum Kind {
    Indexed {
        file: File,
        summary: Box<Summary>,
        reader: Box<IndexedReader>,
        buf: Vec<u8>,
    },
    Linear {
        reader: Box<mcap::io::MessageReader<BufReader<File>>>,
    },
    Done,
}

/// The messages of one file, read as the module docs say.
pub struct FileMessages {
    path: PathBuf,
    kind: Kind,
    filter: Filter,
    /// Messages yielded (for the loss message of a broken file).
    pub read: u64,
}

impl FileMessages {
    /// Opens `path`; the strings are warnings (no summary, file order).
    pub fn open(path: &Path, filter: Filter) -> Result<(FileMessages, Vec<String>), String> {
        let shown = path.display();
        let mut file = File::open(path).map_err(|e| format!("{shown}: {e}"))?;
        let mut magic = [0u8; 8];
        // The MCAP magic (https://mcap.dev/spec#magic).
        if file.read_exact(&mut magic).is_err() || &magic != b"\x89MCAP0\r\n" {
            return Err(format!(
                "{shown}: not an MCAP file (no MCAP magic at its start)"
            ));
        }
        let mut warnings = Vec::new();
        let sum = match summary(&mut file) {
            Ok(Some(s)) if !s.chunk_indexes.is_empty() => Some(s),
            Ok(_) => None,
            Err(e) => {
                warnings.push(format!(
                    "{shown}: no summary ({}: the file was not finished); reading it from the start, up to where it breaks",
                    mcap_err(&e)
                ));
                None
            }
        };
        let kind = match sum {
            Some(s) => {
                let peak = peak_overlap(&s);
                let order = if peak > MAX_PLAY_OVERLAP_BYTES {
                    warnings.push(format!(
                        "{shown}: chunks overlapping in time hold {peak} bytes (more than MAX_PLAY_OVERLAP_BYTES, {MAX_PLAY_OVERLAP_BYTES}); played in file order, not log-time order"
                    ));
                    ReadOrder::File
                } else {
                    ReadOrder::LogTime
                };
                let mut opts = IndexedReaderOptions::new()
                    .with_order(order)
                    .with_record_length_limit(MAX_PLAY_RECORD_BYTES)
                    .starting_at(filter.start_ns);
                if !filter.topics.is_empty() {
                    opts = opts.include_topics(filter.topics.iter().cloned());
                }
                let reader = IndexedReader::new_with_options(&s, opts)
                    .map_err(|e| format!("{shown}: {}", mcap_err(&e)))?;
                Kind::Indexed {
                    file,
                    summary: Box::new(s),
                    reader: Box::new(reader),
                    buf: Vec::new(),
                }
            }
            None => {
                file.seek(SeekFrom::Start(0))
                    .map_err(|e| format!("{shown}: {e}"))?;
                let opts =
                    LinearReaderOptions::default().with_record_length_limit(MAX_PLAY_RECORD_BYTES);
                Kind::Linear {
                    reader: Box::new(mcap::io::MessageReader::new_with_options(
                        BufReader::new(file),
                        opts,
                    )),
                }
            }
        };
        Ok((
            FileMessages {
                path: path.to_path_buf(),
                kind,
                filter,
                read: 0,
            },
            warnings,
        ))
    }

    /// Whether the file is read through its summary's indexes.
    pub fn indexed(&self) -> bool {
        matches!(self.kind, Kind::Indexed { .. })
    }

    /// The next message the filter wants; `Some(Err)` once when the file
    /// breaks (the message says what was lost), then `None`.
    pub fn next_msg(&mut self) -> Option<Result<Msg, String>> {
        let r = self.next_inner();
        match &r {
            Some(Ok(_)) => self.read += 1,
            Some(Err(_)) => self.kind = Kind::Done,
            None => {}
        }
        r
    }

    fn next_inner(&mut self) -> Option<Result<Msg, String>> {
        let shown = self.path.display();
        let lost = |read: u64, e: String| {
            format!("{shown}: {e} after {read} messages; the rest of this file is not read")
        };
        match &mut self.kind {
            Kind::Done => None,
            Kind::Indexed {
                file,
                summary,
                reader,
                buf,
            } => loop {
                match reader.next_event()? {
                    Err(e) => return Some(Err(lost(self.read, mcap_err(&e)))),
                    Ok(IndexedReadEvent::ReadChunkRequest { offset, length }) => {
                        buf.resize(length, 0);
                        let res = file
                            .seek(SeekFrom::Start(offset))
                            .and_then(|_| file.read_exact(buf));
                        if let Err(e) = res {
                            return Some(Err(lost(self.read, e.to_string())));
                        }
                        if let Err(e) = reader.insert_chunk_record_data(offset, buf) {
                            return Some(Err(lost(self.read, mcap_err(&e))));
                        }
                        // Not kept between chunks: a chunk's compressed
                        // bytes are needed only while it is inserted.
                        buf.clear();
                        buf.shrink_to(1 << 20);
                    }
                    Ok(IndexedReadEvent::Message { header, data }) => {
                        let Some(ch) = summary.channels.get(&header.channel_id) else {
                            return Some(Err(lost(
                                self.read,
                                format!(
                                    "a message on channel {} that the summary does not declare",
                                    header.channel_id
                                ),
                            )));
                        };
                        // The reader's own topic filter lets everything
                        // through when no channel has the topics asked for.
                        if !self.filter.wants(&ch.topic, header.log_time) {
                            continue;
                        }
                        return Some(Ok(Msg {
                            channel: ch.clone(),
                            log_time: header.log_time,
                            data: data.to_vec(),
                        }));
                    }
                }
            },
            Kind::Linear { reader } => loop {
                match reader.next()? {
                    Err(e) => {
                        return Some(Err(lost(
                            self.read,
                            format!("{} (the file was not finished)", mcap_err(&e)),
                        )))
                    }
                    Ok(m) => {
                        if !self.filter.wants(&m.channel.topic, m.log_time) {
                            continue;
                        }
                        return Some(Ok(Msg {
                            channel: m.channel,
                            log_time: m.log_time,
                            data: m.data.into_owned(),
                        }));
                    }
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcap::records::MessageHeader;
    use std::collections::BTreeMap;

    fn write(path: &Path, n: u32, chunk: u64) {
        let f = std::fs::File::create(path).unwrap();
        let mut w = mcap::WriteOptions::new()
            .chunk_size(Some(chunk))
            .compression(None)
            .create(std::io::BufWriter::new(f))
            .unwrap();
        let s = w.add_schema("t/msg/T", "ros2msg", b"int32 x").unwrap();
        let a = w.add_channel(s, "/a", "cdr", &BTreeMap::new()).unwrap();
        let b = w.add_channel(s, "/b", "cdr", &BTreeMap::new()).unwrap();
        for i in 0..n {
            w.write_to_known_channel(
                &MessageHeader {
                    channel_id: if i % 2 == 0 { a } else { b },
                    sequence: i,
                    log_time: u64::from(i) * 10,
                    publish_time: 0,
                },
                &i.to_le_bytes(),
            )
            .unwrap();
        }
        w.finish().unwrap();
    }

    fn all(path: &Path, filter: Filter) -> (Vec<(String, u64)>, Vec<String>) {
        let (mut m, w) = FileMessages::open(path, filter).unwrap();
        let mut out = Vec::new();
        while let Some(x) = m.next_msg() {
            match x {
                Ok(x) => out.push((x.channel.topic.clone(), x.log_time)),
                Err(e) => {
                    out.push((e, 0));
                    break;
                }
            }
        }
        (out, w)
    }

    #[test]
    fn indexed_filtered_and_truncated() {
        let dir = std::env::temp_dir().join(format!("rosgate_stream_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("a.mcap");
        write(&p, 1000, 256);
        let (v, w) = all(&p, Filter::default());
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(v.len(), 1000);
        assert!(v.windows(2).all(|x| x[0].1 < x[1].1));
        let f = Filter {
            topics: ["/b".to_string()].into(),
            start_ns: 5000,
        };
        let (v, _) = all(&p, f);
        assert_eq!(v.len(), 250);
        let none = Filter {
            topics: ["/none".to_string()].into(),
            start_ns: 0,
        };
        assert!(all(&p, none).0.is_empty(), "a topic no channel has");
        assert!(v.iter().all(|(t, l)| t == "/b" && *l >= 5000));
        // Cut in half: no summary; read linearly up to the cut, then said.
        let bytes = std::fs::read(&p).unwrap();
        let cut = dir.join("cut.mcap");
        std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
        let (v, w) = all(&cut, Filter::default());
        assert!(w[0].contains("no summary"), "{w:?}");
        let last = &v.last().unwrap().0;
        assert!(last.contains("the rest of this file is not read"), "{last}");
        assert!(v.len() > 100 && v.len() < 1000, "{}", v.len());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
