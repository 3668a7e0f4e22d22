//! The loop's door for other threads: a `mio::Waker` on its own token plus
//! a bounded queue of jobs. A job runs on the loop thread with the hub and
//! `now`, between the socket phases, so nothing in the core needs a lock.
//!
//! Invariants:
//! - a job queued is run: [`Handle::send`] wakes the loop unless a wake it
//!   has not taken yet is outstanding, and the loop clears that mark
//!   before it takes jobs, so no job waits behind a sleeping poll;
//! - [`Handle::send`] never blocks: a full inbox refuses the job (and
//!   counts it), because the threads that call it (Zenoh's, for one) must
//!   not stall on a busy loop;
//! - at most [`INBOX_BUDGET`] jobs, and jobs worth at most
//!   [`INBOX_TURN_WORK`] of the hub's work (deliveries, lines), run per
//!   loop turn, as the read phase is bounded for sockets; the rest keep the
//!   next poll from sleeping, and a flood that outruns the loop fills the
//!   inbox and is refused (counted by the sender), never a stall.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::Instant;

use mio::Waker;
use rosgate_core::Hub;

/// Jobs. Work other threads may queue for the loop before [`Handle::send`]
/// refuses more; it never blocks the sender.
pub const INBOX_CAPACITY: usize = 4096;

/// Jobs. Taken from the inbox per loop turn, so another thread cannot
/// starve the sockets; the rest waits for the next turn.
pub const INBOX_BUDGET: usize = 1024;

/// Work units ([`Hub::work`]: messages delivered, lines handled) the jobs
/// of one loop turn may spend: a sample from another gateway delivered to
/// 1000 subscribers is 1000 deliveries, so counting jobs alone does not
/// bound a turn (1024 such jobs were a million deliveries, 60-100 ms).
/// The same as the read phase's `READ_TURN_WORK`: about 1 ms. At least one
/// job runs per turn.
pub const INBOX_TURN_WORK: u64 = 10_000;

/// Work for the loop thread.
pub type Job = Box<dyn FnOnce(&mut Hub, Instant) + Send>;

/// Why [`Handle::send`] refused a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendError {
    /// The inbox holds its capacity; the job was dropped.
    Full,
    /// The loop has stopped.
    Closed,
}

#[derive(Debug, Default)]
struct Shared {
    stop: AtomicBool,
    refused: AtomicU64,
    /// A wake was written and the loop has not taken it yet: jobs queued
    /// meanwhile need no wake of their own (one `eventfd` write per burst,
    /// not per job; Zenoh's threads hand over samples one at a time).
    armed: AtomicBool,
}

/// A cloneable, `Send` handle other threads use to reach the loop.
#[derive(Clone)]
pub struct Handle {
    tx: SyncSender<Job>,
    waker: Arc<Waker>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle").finish_non_exhaustive()
    }
}

impl Handle {
    /// Queues `job` for the loop thread and wakes it.
    pub fn send(&self, job: Job) -> Result<(), SendError> {
        match self.tx.try_send(job) {
            Ok(()) => {
                // The loop disarms before it takes jobs (`Inbox::run`),
                // so a job queued after that finds the flag clear and
                // wakes it again; one queued before is taken in that run.
                if self.shared.armed.swap(true, Ordering::AcqRel) {
                    return Ok(());
                }
                // A failed wake means the poll is gone: the loop has ended.
                self.waker.wake().map_err(|_| SendError::Closed)
            }
            Err(TrySendError::Full(_)) => {
                self.shared.refused.fetch_add(1, Ordering::Relaxed);
                Err(SendError::Full)
            }
            Err(TrySendError::Disconnected(_)) => Err(SendError::Closed),
        }
    }

    /// Asks the loop to shut down as on SIGTERM.
    pub fn stop(&self) {
        self.shared.stop.store(true, Ordering::Release);
        let _ = self.waker.wake();
    }

    /// Jobs refused because the inbox was full.
    pub fn refused(&self) -> u64 {
        self.shared.refused.load(Ordering::Relaxed)
    }
}

/// The loop's end of the inbox.
#[derive(Debug)]
pub struct Inbox {
    rx: Receiver<Job>,
    shared: Arc<Shared>,
}

impl Inbox {
    /// An inbox of `capacity` jobs whose handles wake `waker`.
    pub fn new(waker: Waker, capacity: usize) -> (Inbox, Handle) {
        let (tx, rx) = sync_channel(capacity);
        let shared = Arc::new(Shared::default());
        let handle = Handle {
            tx,
            waker: Arc::new(waker),
            shared: Arc::clone(&shared),
        };
        (Inbox { rx, shared }, handle)
    }

    /// Runs up to `budget` queued jobs, stopping once they spent `work`
    /// units of the hub's work; returns whether jobs may be left.
    pub fn run(&self, hub: &mut Hub, now: Instant, budget: usize, work: u64) -> bool {
        // Before taking jobs: a sender that queues one from here on wakes
        // the loop again (see `Handle::send`). Acquire pairs with the
        // senders' release, so every job queued before their swap shows.
        self.shared.armed.swap(false, Ordering::AcqRel);
        let start = hub.work();
        let mut n = 0;
        while n < budget {
            if n > 0 && hub.work().saturating_sub(start) >= work {
                return true;
            }
            match self.rx.try_recv() {
                Ok(job) => {
                    job(hub, now);
                    n += 1;
                }
                Err(_) => return false,
            }
        }
        true
    }

    /// Whether a handle asked the loop to stop.
    pub fn stop_requested(&self) -> bool {
        self.shared.stop.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rosgate_core::limits::Limits;
    use rosgate_wire::Raw;

    /// A burst of jobs costs one wake; once the loop has taken it (run),
    /// the next job wakes it again, so none waits behind a sleeping poll.
    #[test]
    fn a_burst_wakes_the_loop_once_and_a_job_after_the_run_wakes_it_again() {
        let mut poll = mio::Poll::new().expect("poll");
        let waker = Waker::new(poll.registry(), mio::Token(7)).expect("waker");
        let (inbox, handle) = Inbox::new(waker, 64);
        let now = Instant::now();
        let mut hub = Hub::new(Limits::default(), now);
        let mut events = mio::Events::with_capacity(16);
        let mut wakes = |poll: &mut mio::Poll| {
            poll.poll(&mut events, Some(std::time::Duration::from_millis(50)))
                .expect("poll");
            events.iter().filter(|e| e.token() == mio::Token(7)).count()
        };
        let ran = Arc::new(AtomicU64::new(0));
        let job = |ran: &Arc<AtomicU64>| -> Job {
            let ran = ran.clone();
            Box::new(move |_, _| {
                ran.fetch_add(1, Ordering::Relaxed);
            })
        };
        for _ in 0..10 {
            handle.send(job(&ran)).expect("queued");
        }
        assert_eq!(wakes(&mut poll), 1);
        assert_eq!(wakes(&mut poll), 0, "no second wake for the same burst");
        assert!(!inbox.run(&mut hub, now, INBOX_BUDGET, INBOX_TURN_WORK));
        assert_eq!(ran.load(Ordering::Relaxed), 10);
        handle.send(job(&ran)).expect("queued");
        assert_eq!(wakes(&mut poll), 1, "a job after the run wakes the loop");
        assert!(!inbox.run(&mut hub, now, INBOX_BUDGET, INBOX_TURN_WORK));
        assert_eq!(ran.load(Ordering::Relaxed), 11);
    }

    /// Jobs that fan out to many subscribers run a turn's work at a time,
    /// however many are queued; the rest wait, and every one runs in the
    /// end.
    #[test]
    fn a_turn_runs_jobs_worth_its_work_budget_and_leaves_the_rest() {
        let poll = mio::Poll::new().expect("poll");
        let waker = Waker::new(poll.registry(), mio::Token(0)).expect("waker");
        let (inbox, handle) = Inbox::new(waker, 64);
        let now = Instant::now();
        let mut hub = Hub::new(Limits::default(), now);
        // The jobs deliver what a peer network sends (as Zenoh's do),
        // which the hub routes only with federation on.
        hub.enable_federation();
        for _ in 0..1000 {
            let c = hub.open(now).expect("open");
            hub.on_bytes(
                c.key,
                b"{\"op\":\"subscribe\",\"topic\":\"/f\",\"type\":\"t\"}\n",
                now,
            );
        }
        for n in 0..50 {
            handle
                .send(Box::new(move |hub, now| {
                    let msg = format!("{{\"n\":{n}}}");
                    hub.bridges()
                        .remote_publish(0, "/f", Raw::from_valid_json(&msg), None, now)
                }))
                .expect("queued");
        }
        let delivered = |hub: &Hub| {
            hub.counters()
                .get(rosgate_core::counters::Counter::Delivered)
        };
        let mut turns = 0;
        loop {
            let before = delivered(&hub);
            let more = inbox.run(&mut hub, now, INBOX_BUDGET, INBOX_TURN_WORK);
            turns += 1;
            // One job past the budget at most: 1000 deliveries.
            assert!(delivered(&hub) - before <= INBOX_TURN_WORK + 1000);
            if !more {
                break;
            }
        }
        assert_eq!(delivered(&hub), 50 * 1000);
        assert!(turns >= 5, "{turns} turns");
    }
}
