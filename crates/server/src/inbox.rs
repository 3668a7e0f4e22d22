//! The loop's door for other threads: a `mio::Waker` on its own token plus
//! a bounded queue of jobs. A job runs on the loop thread with the hub and
//! `now`, between the socket phases, so nothing in the core needs a lock.
//!
//! Invariants:
//! - [`Handle::send`] never blocks: a full inbox refuses the job (and
//!   counts it), because the threads that call it (Zenoh's, for one) must
//!   not stall on a busy loop;
//! - at most [`INBOX_BUDGET`] jobs run per loop turn; the rest keep the
//!   next poll from sleeping.

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

    /// Runs up to `budget` queued jobs; returns how many ran.
    pub fn run(&self, hub: &mut Hub, now: Instant, budget: usize) -> usize {
        let mut n = 0;
        while n < budget {
            match self.rx.try_recv() {
                Ok(job) => {
                    job(hub, now);
                    n += 1;
                }
                Err(_) => break,
            }
        }
        n
    }

    /// Whether a handle asked the loop to stop.
    pub fn stop_requested(&self) -> bool {
        self.shared.stop.load(Ordering::Acquire)
    }
}
