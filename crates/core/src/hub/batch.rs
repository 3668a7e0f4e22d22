//! `PublishBatch`: consecutive publishes to one topic, read from one
//! connection in one loop turn, encoded back to back into one buffer and
//! queued to each subscriber as one shared entry.
//!
//! Why: with one queue entry per message, fan-out cost grows with messages ×
//! subscribers (queue push, iovec, pop, refcount per delivery). A publisher
//! that streams small messages sends hundreds per read; batching turns that
//! into one entry per subscriber per read.
//!
//! Invariants:
//! - a batch only ever holds publishes of one topic from one connection,
//!   with nothing else processed in between, so delivering it later in the
//!   same turn preserves every ordering a client can observe: the hub
//!   flushes it before handling any other request, at the end of every
//!   `on_bytes`, and when the topic changes;
//! - the batch holds whole frames only, each one `\n`-terminated line.

use crate::nodes::Domain;
use crate::registry::TopicId;

/// A topic: its domain and its id in that domain's registry.
pub type TopicKey = (Domain, TopicId);

/// Bytes after which a batch is delivered without waiting for the read to
/// end; also the size from which a lone message skips the batch buffer (it
/// is encoded straight into its shared allocation).
pub const BATCH_MAX_BYTES: usize = 64 * 1024;

#[derive(Debug, Default)]
pub struct PublishBatch {
    topic: Option<TopicKey>,
    lines: Vec<u8>,
    messages: u32,
}

impl PublishBatch {
    pub fn topic(&self) -> Option<TopicKey> {
        self.topic
    }

    pub fn is_empty(&self) -> bool {
        self.messages == 0
    }

    pub fn len_bytes(&self) -> usize {
        self.lines.len()
    }

    pub fn messages(&self) -> u32 {
        self.messages
    }

    /// Appends one publish frame of `topic` (the caller flushed any batch
    /// of another topic first).
    #[inline]
    pub fn push(&mut self, topic: TopicKey, parts: &[&[u8]]) {
        self.topic = Some(topic);
        for p in parts {
            self.lines.extend_from_slice(p);
        }
        self.messages += 1;
    }

    /// The frames as JSON lines.
    pub fn lines(&self) -> &[u8] {
        &self.lines
    }

    pub fn clear(&mut self) {
        self.topic = None;
        self.messages = 0;
        if self.lines.capacity() > 4 * BATCH_MAX_BYTES {
            self.lines = Vec::new();
        } else {
            self.lines.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_append_back_to_back() {
        let mut b = PublishBatch::default();
        b.push((0, 3), &[b"{\"a\":", b"1}\n"]);
        b.push((0, 3), &[b"{}\n"]);
        assert_eq!((b.messages(), b.topic()), (2, Some((0, 3))));
        assert_eq!(b.lines(), b"{\"a\":1}\n{}\n");
        b.clear();
        assert!(b.is_empty());
        assert_eq!(b.topic(), None);
    }
}
