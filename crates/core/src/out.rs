//! `OutQueue`: the frames waiting to be written to one connection.
//!
//! Topic frames are shared (`Rc<[u8]>`): a publish is encoded once and the
//! same bytes are queued to every subscriber. Control frames (statuses,
//! forwarded calls, responses) are owned and coalesced into the tail buffer.
//!
//! Invariants:
//! - `topic_bytes` and `control_bytes` always equal the unwritten bytes of the
//!   queued frames of each kind;
//! - a frame is written whole or not at all from the peer's point of view:
//!   the partially written head frame is never dropped;
//! - each topic entry costs [`ENTRY_COST`] beyond its bytes (its ring slot,
//!   with the ring's growth slack): the topic limit and the memory ledger
//!   count it, so a queue of many small messages is bounded by what it
//!   really holds, not only by its payload;
//! - topic frames beyond `max_queue_bytes` are dropped oldest first, fairly
//!   across topics (P5): the topic holding the most bytes loses first, a
//!   small state topic keeps its samples while an image stream is thinned;
//! - the frame just queued is never dropped, so a message larger than the
//!   limit still reaches a consumer that keeps up;
//! - control frames are never dropped: the caller closes the connection when
//!   `control_bytes` passes its limit (P6);
//! - every operation that drops a shared frame reports the bytes it freed
//!   (`released`) when this queue held the last reference, so the hub's
//!   memory ledger counts each shared frame once, however many queues
//!   hold it.
//!
//! A topic entry may hold several messages (a batch of publishes from one
//! read, see `hub/batch.rs`): one queue entry per batch instead of per
//! message is what makes fan-out cheap. Drops remove whole entries, so they
//! never cut a message, and are counted in messages.
//!
//! Control data is queued as JSON lines (`...\n`). A WebSocket queue
//! (`Framing::WebSocket`) turns each control line into one text frame as it
//! is appended; topic entries arrive already framed for the queue's framing.

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::IoSlice;
use std::rc::Rc;

use crate::hash::SeqBuild;
use crate::transport::Framing;

/// Marks a control frame in [`Entry::topic`].
const CONTROL: u32 = u32::MAX;

/// Owned control buffers are appended to until they reach this size, then a
/// new one starts; keeps a burst of statuses in few allocations and iovecs.
const COALESCE_BYTES: usize = 16 * 1024;

/// Bytes one topic entry costs beyond its frames: the `Entry` in the ring
/// (40 bytes) with the slack of a ring that doubles as it grows.
pub const ENTRY_COST: usize = 64;

/// Topics whose drops one queue counts apart (`/rosgate/connections`'
/// `dropped_topics`); drops on further topics count only in the total.
pub const MAX_DROPPED_TOPICS: usize = 1024;

/// Ring capacity (entries) an idle queue may keep; see [`OutQueue::trim`].
pub const KEEP_ENTRIES: usize = 64;

/// Largest number of slices handed to one `write_vectored` call. IOV_MAX is
/// 1024 on Linux; 256 slices (4 KiB of stack) carry ~25 KiB of 100-byte
/// frames per syscall, so small-message fan-out is not syscall-bound.
pub const MAX_IOVECS: usize = 256;

#[derive(Debug)]
enum Data {
    Shared(Rc<[u8]>),
    Owned(Vec<u8>),
}

impl Data {
    fn bytes(&self) -> &[u8] {
        match self {
            Data::Shared(b) => b,
            Data::Owned(b) => b,
        }
    }
}

#[derive(Debug)]
struct Entry {
    data: Data,
    /// Topic id for topic frames, [`CONTROL`] otherwise.
    topic: u32,
    /// Messages in a topic entry (a batch), for drop accounting.
    msgs: u32,
}

impl Entry {
    fn len(&self) -> usize {
        self.data.bytes().len()
    }
}

/// Per-subscription QoS of a queue's topics (only for connections that
/// asked): a depth (keep last N messages waiting) and reliability (never
/// shed: the hub warns and closes instead).
#[derive(Debug, Default)]
struct TopicLimits {
    /// Topic -> (depth, messages queued).
    depth: HashMap<u32, (u32, u32), SeqBuild>,
    reliable: HashSet<u32, SeqBuild>,
    /// Bytes of reliable topics queued.
    reliable_bytes: usize,
}

/// What one enforcement of the topic limit dropped.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Dropped {
    /// Messages dropped (depth drops included).
    pub frames: u64,
    /// Of them, dropped by a subscription's depth.
    pub by_depth: u64,
    /// Bytes dropped from this queue.
    pub bytes: u64,
    /// Bytes of shared frames freed: this queue held their last reference.
    pub released: u64,
}

/// The bytes `data` frees when dropped now: a shared frame's if this is its
/// last reference, nothing for owned control bytes (counted separately).
fn released_by(data: &Data) -> usize {
    match data {
        Data::Shared(rc) if Rc::strong_count(rc) == 1 => rc.len(),
        _ => 0,
    }
}

/// Entries. A queue this small that has just sent its last control reply
/// gives its buffer back (see [`OutQueue::consume`]): the first allocation
/// a `VecDeque` makes holds four entries.
const IDLE_QUEUE_CAPACITY: usize = 4;

/// The output queue of one connection. See the module docs.
#[derive(Debug, Default)]
pub struct OutQueue {
    framing: Framing,
    q: VecDeque<Entry>,
    /// Bytes of the head frame already written.
    head_off: usize,
    topic_bytes: usize,
    /// Topic entries queued (each costs [`ENTRY_COST`]).
    topic_entries: usize,
    control_bytes: usize,
    /// QoS of some topics, when the connection asked for any.
    limits: Option<Box<TopicLimits>>,
    /// Topic messages ever queued here, and dropped from here (for the
    /// connection list of introspection and the dashboard).
    queued_msgs: u64,
    dropped_msgs: u64,
    /// Of `dropped_msgs`, per topic id (at most [`MAX_DROPPED_TOPICS`]).
    dropped_by_topic: HashMap<u32, u64, SeqBuild>,
}

impl OutQueue {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with_framing(framing: Framing) -> Self {
        OutQueue {
            framing,
            ..Self::default()
        }
    }

    pub fn framing(&self) -> Framing {
        self.framing
    }

    /// Topic messages ever queued to this connection.
    pub fn queued_msgs(&self) -> u64 {
        self.queued_msgs
    }

    /// Topic messages ever dropped from this queue (depth and shedding).
    pub fn dropped_msgs(&self) -> u64 {
        self.dropped_msgs
    }

    pub fn is_empty(&self) -> bool {
        self.q.is_empty()
    }

    /// Unwritten topic bytes.
    pub fn topic_bytes(&self) -> usize {
        self.topic_bytes
    }

    /// What the topic entries cost beyond their bytes ([`ENTRY_COST`] each).
    pub fn entry_bytes(&self) -> usize {
        self.topic_entries * ENTRY_COST
    }

    /// Topic bytes plus their entries' cost: what the topic limit bounds.
    pub fn topic_cost(&self) -> usize {
        self.topic_bytes + self.entry_bytes()
    }

    /// Unwritten control bytes.
    pub fn control_bytes(&self) -> usize {
        self.control_bytes
    }

    /// Queued frames (coalesced control frames count once).
    pub fn frames(&self) -> usize {
        self.q.len()
    }

    /// Queues `msgs` whole messages of `topic`, already framed for this
    /// queue's `Framing`, and enforces `max_topic_bytes`.
    pub fn push_topic(
        &mut self,
        frames: Rc<[u8]>,
        topic: u32,
        msgs: u32,
        max_topic_bytes: usize,
    ) -> Dropped {
        self.topic_bytes += frames.len();
        self.topic_entries += 1;
        self.queued_msgs += u64::from(msgs);
        let len = frames.len();
        self.q.push_back(Entry {
            data: Data::Shared(frames),
            topic,
            msgs,
        });
        let mut dropped = Dropped::default();
        if let Some(l) = self.limits.as_deref_mut() {
            if l.reliable.contains(&topic) {
                l.reliable_bytes += len;
            }
            if let Some((depth, queued)) = l.depth.get_mut(&topic) {
                *queued += msgs;
                if *queued > *depth {
                    dropped = self.keep_last(topic);
                }
            }
        }
        if self.topic_cost() > max_topic_bytes {
            let d = self.shed(max_topic_bytes - max_topic_bytes / 4);
            dropped.frames += d.frames;
            dropped.bytes += d.bytes;
            dropped.released += d.released;
        }
        dropped
    }

    /// Sets the depth (messages that may wait, oldest dropped first) and
    /// reliability (never shed) of `topic` in this queue; `None` and false
    /// clear them.
    pub fn set_topic_qos(&mut self, topic: u32, depth: Option<u32>, reliable: bool) {
        if depth.is_none() && !reliable && self.limits.is_none() {
            return;
        }
        let queued: Vec<(u32, usize)> = self
            .q
            .iter()
            .filter(|e| e.topic == topic)
            .map(|e| (e.msgs, e.len()))
            .collect();
        let l = self.limits.get_or_insert_with(Box::default);
        match depth {
            Some(d) => {
                let n = queued.iter().map(|q| q.0).sum();
                l.depth.insert(topic, (d.max(1), n));
            }
            None => {
                l.depth.remove(&topic);
            }
        }
        let was = l.reliable.contains(&topic);
        let bytes: usize = queued.iter().map(|q| q.1).sum();
        if reliable && !was {
            l.reliable.insert(topic);
            l.reliable_bytes += bytes;
        } else if !reliable && was {
            l.reliable.remove(&topic);
            l.reliable_bytes -= bytes.min(l.reliable_bytes);
        }
        if l.depth.is_empty() && l.reliable.is_empty() {
            self.limits = None;
        }
    }

    /// Bytes of reliable topics queued (never shed).
    pub fn reliable_bytes(&self) -> usize {
        self.limits.as_ref().map_or(0, |l| l.reliable_bytes)
    }

    /// Drops the oldest entries of `topic` until its depth holds. The
    /// partly written head is being delivered, not waiting: it is never
    /// dropped and does not count against the depth (counting it made a
    /// depth of 1 drop the newest message, the only one left to drop).
    fn keep_last(&mut self, topic: u32) -> Dropped {
        let Some((depth, queued)) = self
            .limits
            .as_ref()
            .and_then(|l| l.depth.get(&topic).copied())
        else {
            return Dropped::default();
        };
        let head_off = self.head_off;
        let in_flight = match self.q.front() {
            Some(e) if head_off > 0 && e.topic == topic => e.msgs,
            _ => 0,
        };
        let mut excess = queued.saturating_sub(in_flight).saturating_sub(depth);
        let mut d = self.drop_where(
            |t, _| {
                if t == topic && excess > 0 {
                    excess -= 1;
                    true
                } else {
                    false
                }
            },
            |i, _| i == 0 && head_off > 0,
        );
        d.by_depth = d.frames;
        d
    }

    /// Bookkeeping of the QoS counts when an entry leaves the queue.
    fn left(&mut self, topic: u32, msgs: u32, len: usize) {
        if let Some(l) = self.limits.as_deref_mut() {
            if let Some((_, queued)) = l.depth.get_mut(&topic) {
                *queued = queued.saturating_sub(msgs);
            }
            if l.reliable.contains(&topic) {
                l.reliable_bytes = l.reliable_bytes.saturating_sub(len);
            }
        }
    }

    /// Queues control bytes: exactly one JSON line ending in `\n`. A
    /// WebSocket queue sends it as one text frame without the `\n`. Returns
    /// the control bytes now queued, for the caller's limit check.
    pub fn push_control(&mut self, line: &[u8]) -> usize {
        let framing = self.framing;
        self.push_owned(|v| framing.push_lines(v, line));
        self.control_bytes
    }

    /// Queues bytes exactly as given (WebSocket handshake, pong and close
    /// frames).
    pub fn push_raw(&mut self, bytes: &[u8]) -> usize {
        self.push_owned(|v| v.extend_from_slice(bytes));
        self.control_bytes
    }

    /// Appends owned control bytes written by `write`, to the tail buffer
    /// while it is under [`COALESCE_BYTES`], else to a new one.
    fn push_owned(&mut self, write: impl FnOnce(&mut Vec<u8>)) {
        let coalesce = matches!(
            self.q.back(),
            Some(Entry { data: Data::Owned(tail), .. }) if tail.len() < COALESCE_BYTES
        );
        if !coalesce {
            self.q.push_back(Entry {
                data: Data::Owned(Vec::new()),
                topic: CONTROL,
                msgs: 0,
            });
        }
        if let Some(Entry {
            data: Data::Owned(tail),
            ..
        }) = self.q.back_mut()
        {
            let before = tail.len();
            write(tail);
            self.control_bytes += tail.len() - before;
        }
    }

    /// Fills `iov` with the unwritten bytes, at most `budget` bytes worth
    /// (always at least the head frame). Returns the slices used.
    pub fn fill<'a>(&'a self, iov: &mut [IoSlice<'a>], budget: usize) -> usize {
        let mut n = 0;
        let mut total = 0;
        let mut entries = self.q.iter();
        if let Some(head) = entries.next() {
            let b = &head.data.bytes()[self.head_off..];
            if let Some(slot) = iov.first_mut() {
                *slot = IoSlice::new(b);
                n = 1;
                total = b.len();
            }
        }
        for (slot, e) in iov.iter_mut().skip(1).zip(entries) {
            if total >= budget {
                break;
            }
            let b = e.data.bytes();
            *slot = IoSlice::new(b);
            total += b.len();
            n += 1;
        }
        n
    }

    /// Records that `n` bytes from the front were written; returns the
    /// bytes of shared frames freed (see the module docs).
    pub fn consume(&mut self, mut n: usize) -> usize {
        let mut released = 0;
        while n > 0 {
            let Some(head) = self.q.front() else {
                return released;
            };
            let left = head.len() - self.head_off;
            let take = left.min(n);
            if head.topic == CONTROL {
                self.control_bytes -= take;
            } else {
                self.topic_bytes -= take;
            }
            n -= take;
            if take == left {
                if let Some(e) = self.q.pop_front() {
                    released += released_by(&e.data);
                    if e.topic != CONTROL {
                        self.topic_entries -= 1;
                        self.left(e.topic, e.msgs, e.len());
                    } else if self.q.is_empty() && self.q.capacity() <= IDLE_QUEUE_CAPACITY {
                        // A reply to a control request, and nothing more to
                        // send: most such connections then stay idle, and
                        // the queue's first allocation would be kept per
                        // connection (`docs/performance.md`, memory per
                        // connection). A topic subscriber keeps its buffer.
                        self.q = VecDeque::new();
                    }
                }
                self.head_off = 0;
            } else {
                self.head_off += take;
            }
        }
        released
    }

    /// Drops everything queued (the connection is gone); returns the bytes
    /// of shared frames freed.
    pub fn clear(&mut self) -> usize {
        let released = self.q.iter().map(|e| released_by(&e.data)).sum();
        self.q = VecDeque::new();
        self.limits = None;
        self.head_off = 0;
        self.topic_bytes = 0;
        self.topic_entries = 0;
        self.control_bytes = 0;
        released
    }

    /// Drops every topic frame that may be dropped (all but the partially
    /// written head and the newest), for the global memory budget.
    pub fn shed_all(&mut self) -> Dropped {
        self.shed(0)
    }

    /// Releases the ring of an empty queue that grew past
    /// [`KEEP_ENTRIES`]. Called from the periodic sweep, not from `consume`:
    /// freeing on every drain made a busy subscriber regrow its ring from
    /// zero on every burst (12% of the fan-out profile).
    pub fn trim(&mut self) {
        if self.q.is_empty() && self.q.capacity() > KEEP_ENTRIES {
            self.q = VecDeque::new();
        }
    }

    /// Drops topic frames until their cost ([`OutQueue::topic_cost`]) is at
    /// most `target` (or only
    /// protected frames are left), taking from the topics holding the most
    /// bytes first ("water-filling"), oldest frames first within a topic.
    /// The hysteresis (target below the limit) makes the scan amortised O(1)
    /// per queued frame.
    fn shed(&mut self, target: usize) -> Dropped {
        // The newest topic entry stays even when control data was queued
        // after it (the newest message always reaches a reader that keeps up).
        let newest = self.q.iter().rposition(|e| e.topic != CONTROL);
        // Reliable topics are never shed (the hub warns, then closes).
        let reliable: Vec<usize> = match self.limits.as_deref() {
            Some(l) if !l.reliable.is_empty() => self
                .q
                .iter()
                .enumerate()
                .filter(|(_, e)| l.reliable.contains(&e.topic))
                .map(|(i, _)| i)
                .collect(),
            _ => Vec::new(),
        };
        let protected = move |i: usize, head_off: usize| {
            Some(i) == newest || (i == 0 && head_off > 0) || reliable.binary_search(&i).is_ok()
        };
        if target == 0 {
            // Everything droppable goes (the memory budget): no per-topic
            // accounting needed, one pass without hashing.
            return self.drop_where(|_, _| true, protected);
        }
        let mut per_topic: HashMap<u32, usize, SeqBuild> = HashMap::default();
        let mut droppable = 0usize;
        for (i, e) in self.q.iter().enumerate() {
            if e.topic != CONTROL && !protected(i, self.head_off) {
                *per_topic.entry(e.topic).or_default() += e.len() + ENTRY_COST;
                droppable += e.len() + ENTRY_COST;
            }
        }
        let need = self.topic_cost().saturating_sub(target).min(droppable);
        if need == 0 {
            return Dropped::default();
        }
        let mut sizes: Vec<usize> = per_topic.values().copied().collect();
        sizes.sort_unstable_by(|a, b| b.cmp(a));
        let level = water_level(&sizes, need);
        let mut excess: HashMap<u32, usize, SeqBuild> = per_topic
            .into_iter()
            .filter(|&(_, b)| b > level)
            .map(|(t, b)| (t, b - level))
            .collect();
        self.drop_where(
            |topic, len| match excess.get_mut(&topic) {
                Some(left) if *left > 0 => {
                    *left = left.saturating_sub(len + ENTRY_COST);
                    true
                }
                _ => false,
            },
            protected,
        )
    }

    /// Topic messages dropped from this queue, by topic id (for the
    /// topics counted apart, see [`MAX_DROPPED_TOPICS`]).
    pub fn dropped_by_topic(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        self.dropped_by_topic.iter().map(|(&t, &n)| (t, n))
    }

    fn count_dropped(&mut self, topic: u32, msgs: u32) {
        let len = self.dropped_by_topic.len();
        match self.dropped_by_topic.get_mut(&topic) {
            Some(n) => *n += u64::from(msgs),
            None if len < MAX_DROPPED_TOPICS => {
                self.dropped_by_topic.insert(topic, u64::from(msgs));
            }
            None => {}
        }
    }

    /// Drops, oldest first, the topic entries that are not `protected` and
    /// for which `drop(topic, len)` says so; keeps the byte and entry
    /// counts exact.
    fn drop_where(
        &mut self,
        mut drop: impl FnMut(u32, usize) -> bool,
        protected: impl Fn(usize, usize) -> bool,
    ) -> Dropped {
        let mut dropped = Dropped::default();
        let mut entries = 0;
        let head_off = self.head_off;
        let mut i = 0;
        let mut gone: Vec<(u32, u32, usize)> = Vec::new();
        self.q.retain(|e| {
            let idx = i;
            i += 1;
            if e.topic == CONTROL || protected(idx, head_off) || !drop(e.topic, e.len()) {
                return true;
            }
            entries += 1;
            dropped.frames += u64::from(e.msgs);
            dropped.bytes += e.len() as u64;
            dropped.released += released_by(&e.data) as u64;
            gone.push((e.topic, e.msgs, e.len()));
            false
        });
        let track = self.limits.is_some();
        for (t, m, len) in gone {
            self.count_dropped(t, m);
            if track {
                self.left(t, m, len);
            }
        }
        self.topic_bytes -= dropped.bytes as usize;
        self.topic_entries -= entries;
        self.dropped_msgs += dropped.frames;
        dropped
    }
}

/// The largest level `L` with `sum(max(0, s - L)) >= need`, for `sizes`
/// sorted in descending order and `need <= sum(sizes)`.
fn water_level(sizes: &[usize], need: usize) -> usize {
    let mut sum = 0usize;
    for k in 0..sizes.len() {
        sum += sizes[k];
        let next = sizes.get(k + 1).copied().unwrap_or(0);
        // Cutting the k+1 biggest topics down to `next` frees this much:
        let freed_at_next = sum - (k + 1) * next;
        if freed_at_next >= need {
            return (sum - need) / (k + 1);
        }
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(len: usize) -> Rc<[u8]> {
        vec![b'x'; len].into()
    }

    fn drain(q: &mut OutQueue) -> Vec<u8> {
        let mut out = Vec::new();
        while !q.is_empty() {
            let mut iov = [IoSlice::new(&[]); MAX_IOVECS];
            let n = q.fill(&mut iov, usize::MAX);
            let mut written = 0;
            for s in &iov[..n] {
                out.extend_from_slice(s);
                written += s.len();
            }
            q.consume(written);
        }
        out
    }

    #[test]
    fn control_frames_coalesce_and_drain_in_order() {
        let mut q = OutQueue::new();
        q.push_control(b"a\n");
        q.push_topic(Rc::from(&b"t\n"[..]), 1, 1, 100);
        q.push_control(b"b\n");
        q.push_control(b"c\n");
        assert_eq!(q.frames(), 3);
        assert_eq!(q.control_bytes(), 6);
        assert_eq!(drain(&mut q), b"a\nt\nb\nc\n");
        assert_eq!((q.topic_bytes(), q.control_bytes()), (0, 0));
    }

    #[test]
    fn partial_writes_keep_accounting() {
        let mut q = OutQueue::new();
        q.push_topic(frame(10), 1, 1, 100);
        q.push_control(b"0123456789");
        q.consume(3);
        assert_eq!(q.topic_bytes(), 7);
        q.consume(10);
        assert_eq!((q.topic_bytes(), q.control_bytes()), (0, 7));
    }

    #[test]
    fn shedding_keeps_the_newest_message_even_behind_control_data() {
        let mut q = OutQueue::new();
        q.push_topic(frame(10), 1, 1, 1 << 20);
        q.push_topic(frame(20), 1, 1, 1 << 20);
        q.push_control(b"status\n");
        let d = q.shed_all();
        assert_eq!((d.frames, d.bytes), (1, 10));
        assert_eq!(q.topic_bytes(), 20, "the newest message stays");
    }

    #[test]
    fn drops_are_counted_per_topic_up_to_the_limit() {
        let mut q = OutQueue::new();
        let cap = 10_000;
        for i in 0..200 {
            q.push_topic(frame(1000), 1, 1, cap);
            if i % 10 == 0 {
                q.push_topic(frame(10), 2, 1, cap);
            }
        }
        let by: HashMap<u32, u64> = q.dropped_by_topic().collect();
        assert!(by[&1] > 0);
        assert_eq!(by.values().sum::<u64>(), q.dropped_msgs());
        // Past MAX_DROPPED_TOPICS topics, drops count in the total only.
        let mut q = OutQueue::new();
        for t in 0..(MAX_DROPPED_TOPICS as u32 + 10) {
            q.push_topic(frame(10), t, 1, 1 << 20);
        }
        q.shed_all();
        assert_eq!(q.dropped_by_topic().count(), MAX_DROPPED_TOPICS);
        assert_eq!(q.dropped_msgs(), MAX_DROPPED_TOPICS as u64 + 9);
    }

    #[test]
    fn tiny_frames_are_bounded_by_what_their_entries_cost() {
        let mut q = OutQueue::new();
        let cap = 64 * 1024;
        for _ in 0..100_000 {
            q.push_topic(frame(1), 1, 1, cap);
        }
        assert!(q.topic_cost() <= cap, "{}", q.topic_cost());
        assert!(q.frames() <= cap / ENTRY_COST, "{} entries", q.frames());
        assert_eq!(q.entry_bytes(), q.frames() * ENTRY_COST);
        let n = q.topic_bytes();
        q.consume(n);
        assert_eq!((q.entry_bytes(), q.topic_bytes()), (0, 0));
    }

    #[test]
    fn big_topic_is_thinned_before_small_one() {
        let mut q = OutQueue::new();
        let cap = 10_000;
        let mut dropped = Dropped::default();
        for i in 0..200 {
            let d = q.push_topic(frame(1000), 1, 1, cap);
            dropped.frames += d.frames;
            if i % 10 == 0 {
                let d = q.push_topic(frame(10), 2, 1, cap);
                dropped.frames += d.frames;
            }
        }
        assert!(dropped.frames > 0);
        assert!(q.topic_bytes() <= cap);
        let small = q.q.iter().filter(|e| e.topic == 2).count();
        assert_eq!(small, 20, "the small topic lost nothing");
    }

    #[test]
    fn newest_and_partially_written_frames_survive() {
        let mut q = OutQueue::new();
        q.push_topic(frame(100), 1, 1, 1000);
        q.consume(1);
        let d = q.push_topic(frame(5000), 1, 1, 1000);
        assert_eq!(d, Dropped::default(), "head is partial, tail is newest");
        assert_eq!(q.topic_bytes(), 99 + 5000);
        let d = q.push_topic(frame(10), 1, 1, 1000);
        assert_eq!(d.frames, 1, "the 5000-byte frame goes");
        assert_eq!(q.topic_bytes(), 99 + 10);
    }

    #[test]
    fn a_partly_written_message_does_not_count_against_the_depth() {
        let mut q = OutQueue::new();
        q.set_topic_qos(1, Some(1), false);
        q.push_topic(frame(100), 1, 1, 10_000);
        q.consume(1);
        let d = q.push_topic(frame(50), 1, 1, 10_000);
        assert_eq!(d, Dropped::default(), "the head is being written: 50 waits");
        let d = q.push_topic(frame(60), 1, 1, 10_000);
        assert_eq!(
            (d.frames, d.by_depth, d.bytes),
            (1, 1, 50),
            "the older waiting one goes"
        );
        assert_eq!(q.topic_bytes(), 99 + 60);
        q.consume(99);
        let d = q.push_topic(frame(70), 1, 1, 10_000);
        assert_eq!(
            (d.by_depth, d.bytes),
            (1, 60),
            "depth 1 once the head is written"
        );
        assert_eq!(q.topic_bytes(), 70);
    }

    #[test]
    fn websocket_framing_wraps_each_control_line() {
        let mut q = OutQueue::with_framing(Framing::WebSocket);
        q.push_control(b"{\"a\":1}\n");
        q.push_control(b"{\"b\":2}\n");
        q.push_topic(Rc::from(&b"\x81\x07{\"t\":3}"[..]), 1, 1, 1000);
        q.push_raw(&[0x8A, 0]);
        let mut out = drain(&mut q);
        let mut msgs = Vec::new();
        while !out.is_empty() {
            let (op, len) = (out[0], out[1] as usize);
            msgs.push((op, out[2..2 + len].to_vec()));
            out.drain(..2 + len);
        }
        assert_eq!(
            msgs,
            vec![
                (0x81, b"{\"a\":1}".to_vec()),
                (0x81, b"{\"b\":2}".to_vec()),
                (0x81, b"{\"t\":3}".to_vec()),
                (0x8A, vec![]),
            ]
        );
        assert_eq!((q.topic_bytes(), q.control_bytes()), (0, 0));
    }

    #[test]
    fn water_level_examples() {
        assert_eq!(water_level(&[100, 10], 50), 50);
        assert_eq!(water_level(&[100, 10], 95), 7);
        assert_eq!(water_level(&[50, 50], 20), 40);
    }
}
