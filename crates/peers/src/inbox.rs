//! The hand-off from a network's threads (Zenoh's, RustDDS's) to the loop,
//! shared by the peers that network carries (Zenoh: `gateways/`, `ros2/`;
//! DDS: its ROS 2 peer): jobs queued through the loop's bounded inbox
//! ([`ToLoop`], the `rosgate` crate's `inbox.rs`), and the budget of the
//! samples waiting there. It owns the counts of samples and bytes
//! waiting, and of samples dropped and received; the peers' own tables
//! stay with them.
//!
//! Invariants:
//! - nothing here blocks: a job is offered to the loop without waiting,
//!   and a refused one is dropped (counted, or answered by its sender);
//! - samples handed to the loop and not yet taken are bounded, at most
//!   [`MAX_PENDING_SAMPLES`] and [`INBOX_BYTES`] together, whether they
//!   wait as jobs ([`Inbox::deliver`]) or in the ROS 2 link's queue
//!   ([`Inbox::reserve_sample`]); past either a sample is dropped and
//!   counted (`federation_in_dropped`) before it costs anything more;
//! - a sample's room is taken once and given back once: when its job
//!   runs, when its job is refused, or when the loop takes a reserved one
//!   ([`Inbox::release_sample`]);
//! - a job reaches the hub only through its network facade
//!   (`rosgate_core::hub::Bridges`): [`Inbox::send`] wraps it so.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use rosgate_core::hub::Bridges;
use rosgate_core::nodes::Domain;
use rosgate_core::Hub;
use rosgate_wire::Raw;

/// Work for the loop thread.
pub type Job = Box<dyn FnOnce(&mut Hub, Instant) + Send>;

/// Queues a job for the loop thread without blocking; false when refused
/// (the inbox is full or the loop has stopped).
pub type ToLoop = Arc<dyn Fn(Job) -> bool + Send + Sync>;

/// Bytes. Samples from other gateways waiting in the loop's inbox; past
/// it, further samples are dropped and counted (`federation_in_dropped`).
pub const INBOX_BYTES: usize = 64 << 20;

/// Samples (from other gateways and ROS 2) handed to the loop and not yet
/// run; beyond, a sample is dropped (counted in `federation_in_dropped`)
/// before it is decoded or checked. The loop's inbox holds 4096 jobs.
pub const MAX_PENDING_SAMPLES: usize = 4096;

/// See the module docs.
pub struct Inbox {
    to_loop: ToLoop,
    /// Bytes of the samples handed to the loop and not yet taken.
    pending_bytes: AtomicUsize,
    /// Samples handed to the loop and not yet taken: past
    /// [`MAX_PENDING_SAMPLES`] a sample is dropped before it is even
    /// checked, so a flood costs the network's threads (and the CPU the loop
    /// shares with them) next to nothing.
    pending_samples: AtomicUsize,
    /// Dropped since the loop last took the count (for `/metrics`).
    dropped: AtomicU64,
    received: AtomicU64,
    dropped_total: AtomicU64,
}

impl Inbox {
    pub fn new(to_loop: ToLoop) -> Inbox {
        Inbox {
            to_loop,
            pending_bytes: AtomicUsize::new(0),
            pending_samples: AtomicUsize::new(0),
            dropped: AtomicU64::new(0),
            received: AtomicU64::new(0),
            dropped_total: AtomicU64::new(0),
        }
    }

    /// Queues `job` for the loop thread, where it gets the hub's network
    /// facade; false when the inbox refused it (the job is dropped unrun).
    pub fn send(&self, job: impl FnOnce(&mut Bridges<'_>, Instant) + Send + 'static) -> bool {
        (self.to_loop)(Box::new(move |hub: &mut Hub, now| {
            job(&mut hub.bridges(), now)
        }))
    }

    /// Wakes the loop for work it takes in its next turn; a refused wake
    /// means the loop is busy (a full inbox) and will turn anyway.
    pub fn wake(&self) {
        let _ = (self.to_loop)(Box::new(|_, _| {}));
    }

    /// Hands a message for `topic` (one valid JSON value) to the loop as
    /// a remote publish, or drops it (counted) when the budget is spent or
    /// the inbox refuses it.
    pub fn deliver(
        self: &Arc<Self>,
        domain: Domain,
        topic: &str,
        msg: String,
        latched: Option<u32>,
    ) {
        self.deliver_many(domain, topic, vec![msg], latched);
    }

    /// Hands messages for `topic` (each one valid JSON value, in order) to
    /// the loop in one job, as remote publishes: each takes its room in
    /// the budget, and those past it are dropped (counted), as is the lot
    /// when the inbox refuses the job.
    pub fn deliver_many(
        self: &Arc<Self>,
        domain: Domain,
        topic: &str,
        mut msgs: Vec<String>,
        latched: Option<u32>,
    ) {
        msgs.retain(|m| self.take_room(m.len()));
        if msgs.is_empty() {
            return;
        }
        let n = msgs.len();
        let bytes: usize = msgs.iter().map(String::len).sum();
        let me = self.clone();
        let topic = topic.to_string();
        let sent = self.send(move |hub, now| {
            for msg in msgs {
                me.release_sample(msg.len());
                hub.remote_publish(domain, &topic, Raw::from_valid_json(&msg), latched, now);
            }
        });
        if sent {
            self.received.fetch_add(n as u64, Ordering::Relaxed);
        } else {
            // The refused job was dropped unrun: its room comes back here.
            self.release(n, bytes);
            self.drop_n(n as u64);
        }
    }

    /// Takes room for one sample of `n` bytes for a sample that reaches
    /// the loop another way (the ROS 2 link's queue); false, and counted
    /// as dropped, when the budget is spent. The loop gives the room back
    /// with [`Inbox::release_sample`] when it takes the sample.
    pub fn reserve_sample(&self, n: usize) -> bool {
        if !self.take_room(n) {
            return false;
        }
        self.received.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Room for one more sample of `n` bytes, taken; or, when the budget
    /// is spent, the sample counted as dropped.
    fn take_room(&self, n: usize) -> bool {
        if self.is_full() {
            self.drop_one();
            return false;
        }
        if self.pending_bytes.fetch_add(n, Ordering::AcqRel) + n > INBOX_BYTES {
            self.pending_bytes.fetch_sub(n, Ordering::AcqRel);
            self.drop_one();
            return false;
        }
        self.pending_samples.fetch_add(1, Ordering::AcqRel);
        true
    }

    /// Gives back the room a sample of `n` bytes took.
    pub fn release_sample(&self, n: usize) {
        self.release(1, n);
    }

    /// Gives back the room `samples` samples of `bytes` bytes together took.
    fn release(&self, samples: usize, bytes: usize) {
        self.pending_bytes.fetch_sub(bytes, Ordering::AcqRel);
        self.pending_samples.fetch_sub(samples, Ordering::AcqRel);
    }

    /// Whether samples already fill the loop's inbox: a further one would
    /// be refused anyway, so it is dropped before it costs anything.
    pub fn is_full(&self) -> bool {
        self.pending_samples.load(Ordering::Acquire) >= MAX_PENDING_SAMPLES
    }

    /// Hands a finished `service_response` or action line to the loop (as
    /// the bridge's answer to the call or goal it names).
    pub fn reply_line(&self, domain: Domain, line: String) {
        if !self.send(move |hub, now| hub.remote_reply(domain, line.as_bytes(), now)) {
            // The caller's own deadline on its gateway still fails it.
            self.drop_one();
        }
    }

    /// Counts one sample (or answer) dropped.
    pub fn drop_one(&self) {
        self.drop_n(1);
    }

    /// Counts `n` samples (or answers) dropped.
    pub fn drop_n(&self, n: u64) {
        self.dropped.fetch_add(n, Ordering::Relaxed);
        self.dropped_total.fetch_add(n, Ordering::Relaxed);
    }

    /// Samples dropped since the last call.
    pub fn take_dropped(&self) -> u64 {
        self.dropped.swap(0, Ordering::Relaxed)
    }

    /// Bytes of the samples waiting for the loop (in the memory ledger).
    pub fn pending_bytes(&self) -> usize {
        self.pending_bytes.load(Ordering::Relaxed)
    }

    /// Samples handed to the loop, ever.
    pub fn received(&self) -> u64 {
        self.received.load(Ordering::Relaxed)
    }

    /// Samples dropped, ever.
    pub fn dropped_total(&self) -> u64 {
        self.dropped_total.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Instant;

    use rosgate_core::{Hub, Limits};

    use super::{Inbox, Job, INBOX_BYTES, MAX_PENDING_SAMPLES};

    /// An inbox whose loop keeps the jobs it accepts (while `open`).
    fn inbox(open: bool) -> (Arc<Inbox>, Arc<Mutex<Vec<Job>>>) {
        let jobs: Arc<Mutex<Vec<Job>>> = Arc::default();
        let kept = jobs.clone();
        let to_loop = Arc::new(move |j: Job| {
            if open {
                kept.lock().unwrap_or_else(|p| p.into_inner()).push(j);
            }
            open
        });
        (Arc::new(Inbox::new(to_loop)), jobs)
    }

    #[test]
    fn a_sample_holds_its_room_until_its_job_runs() {
        let (inbox, jobs) = inbox(true);
        inbox.deliver(0, "/x", r#"{"a":1}"#.to_string(), None);
        assert_eq!(inbox.pending_bytes(), 7);
        assert_eq!(inbox.received(), 1);
        let now = Instant::now();
        let mut hub = Hub::new(Limits::default(), now);
        for job in jobs.lock().unwrap_or_else(|p| p.into_inner()).drain(..) {
            job(&mut hub, now);
        }
        assert_eq!(inbox.pending_bytes(), 0);
        assert!(!inbox.is_full());
        assert_eq!(inbox.take_dropped(), 0);
    }

    #[test]
    fn a_refused_job_gives_its_room_back_and_is_counted() {
        let (inbox, _) = inbox(false);
        inbox.deliver(0, "/x", "{}".to_string(), None);
        assert_eq!(inbox.pending_bytes(), 0);
        assert_eq!((inbox.received(), inbox.take_dropped()), (0, 1));
        assert_eq!(inbox.take_dropped(), 0, "taken once");
        assert_eq!(inbox.dropped_total(), 1);
    }

    #[test]
    fn samples_and_bytes_are_bounded_together_for_both_peers() {
        let (inbox, _) = inbox(true);
        assert!(!inbox.reserve_sample(INBOX_BYTES + 1), "too big");
        for _ in 0..MAX_PENDING_SAMPLES - 1 {
            assert!(inbox.reserve_sample(1));
        }
        inbox.deliver(0, "/x", "{}".to_string(), None);
        assert!(inbox.is_full());
        assert!(!inbox.reserve_sample(1), "full");
        inbox.deliver(0, "/x", "{}".to_string(), None);
        assert_eq!(inbox.take_dropped(), 3);
        inbox.release_sample(1);
        assert!(inbox.reserve_sample(1), "room given back");
    }
}
