//! What the worker threads of one run share (`--threads N`): the
//! closed-loop progress table, the wake-ups between threads, the phase
//! gate, the common clock, and CPU pinning (`--pin-cpus`).
//!
//! Each worker is a `runner::Runner` with its own mio poll loop and its own
//! share of the connections; everything a worker counts (tallies,
//! histograms) stays private to it and is merged after the run. Only what
//! a *decision* on one thread needs from another lives here:
//!
//! - `next[sub * npubs + pub]`: the next sequence subscriber `sub` expects
//!   from publisher `pub`. Written only by the worker that owns `sub`, read
//!   by the worker that owns `pub` (its window against the slowest
//!   subscriber) and by every worker's drain check;
//! - `sent[pub]`: messages publisher `pub` has sent. Written only by its
//!   owner, read by every drain check;
//! - `producing`: workers still in the run phase. A drain is complete only
//!   when it is 0, so a worker that owns no publisher cannot stop reading
//!   while another worker may still send;
//! - `parked[w]` / `wakers[w]`: worker `w` has a publisher blocked on its
//!   window and asks to be woken when a subscriber elsewhere advances.
//!   The publisher side stores `parked` and then re-reads `next`; the
//!   subscriber side stores `next` and then reads `parked`, each with a
//!   sequentially consistent fence between, so at least one of them sees
//!   the other (no lost wake-up). Workers with N > 1 also never sleep in
//!   poll longer than [`MAX_PARK`], which bounds any wait on a condition
//!   no event announces (the drain's `producing`).
//!
//! With one worker (the default) nothing is shared in practice: the
//! atomics are uncontended relaxed loads and stores on the only thread,
//! no waker is ever woken, and poll timeouts are not capped.

use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use mio::Waker;

/// Longest a worker of a multi-threaded run sleeps in poll: the latency
/// of noticing that another worker stopped producing.
pub const MAX_PARK: Duration = Duration::from_millis(5);
/// Most worker threads a run may have: more than any loopback run needs
/// (each thread is one more poll loop competing for the same cores).
pub const MAX_THREADS: usize = 64;

/// One run's shared state; see the module docs.
#[derive(Debug)]
pub struct Shared {
    pub threads: usize,
    pub npubs: usize,
    /// Origin of every `*_ns` timestamp, the same for every worker so a
    /// stamp made on one thread can be read on another.
    pub clock: Instant,
    next: Vec<AtomicU64>,
    sent: Vec<AtomicU64>,
    producing: AtomicUsize,
    parked: Vec<AtomicBool>,
    /// Worker `w` has everything it waits for in the drain.
    drained: Vec<AtomicBool>,
    wakers: Mutex<Vec<Option<Arc<Waker>>>>,
    /// Set when a worker failed: the others leave gates and loops.
    abort: AtomicBool,
    gate: Mutex<GateState>,
    gate_cv: Condvar,
    /// Problems printed so far, by every worker (`runner`'s `MAX_LOGGED`).
    logged: AtomicU64,
    /// When the run phase starts, set by worker 0 at the last setup gate.
    start: Mutex<Option<Instant>>,
}

#[derive(Debug, Default)]
struct GateState {
    arrived: usize,
    generation: u64,
}

/// Another worker failed; this one stops too (its own result is moot).
#[derive(Debug)]
pub struct Aborted;

impl Shared {
    pub fn new(threads: usize, npubs: usize, nsubs: usize) -> Shared {
        let zeros = |n: usize| (0..n).map(|_| AtomicU64::new(0)).collect();
        Shared {
            threads,
            npubs,
            clock: Instant::now(),
            next: zeros(npubs * nsubs),
            sent: zeros(npubs),
            producing: AtomicUsize::new(threads),
            parked: (0..threads).map(|_| AtomicBool::new(false)).collect(),
            drained: (0..threads).map(|_| AtomicBool::new(false)).collect(),
            wakers: Mutex::new(vec![None; threads]),
            abort: AtomicBool::new(false),
            gate: Mutex::new(GateState::default()),
            gate_cv: Condvar::new(),
            start: Mutex::new(None),
            logged: AtomicU64::new(0),
        }
    }

    pub fn multi(&self) -> bool {
        self.threads > 1
    }

    /// Next sequence subscriber `sub` expects from publisher `src`.
    pub fn next(&self, sub: usize, src: usize) -> u64 {
        self.next[sub * self.npubs + src].load(Ordering::Relaxed)
    }

    /// Only the worker owning `sub` calls this.
    pub fn set_next(&self, sub: usize, src: usize, v: u64) {
        self.next[sub * self.npubs + src].store(v, Ordering::Relaxed);
    }

    /// Lowest next-expected sequence of publisher `i` over all subscribers.
    pub fn floor(&self, i: usize) -> u64 {
        self.next
            .iter()
            .skip(i)
            .step_by(self.npubs.max(1))
            .map(|a| a.load(Ordering::Relaxed))
            .min()
            .unwrap_or(0)
    }

    pub fn sent(&self, i: usize) -> u64 {
        self.sent[i].load(Ordering::Relaxed)
    }

    /// Only the worker owning publisher `i` calls this.
    pub fn set_sent(&self, i: usize, v: u64) {
        self.sent[i].store(v, Ordering::Relaxed);
    }

    /// Every publisher's messages reached every subscriber, and no worker
    /// will send more.
    pub fn all_delivered(&self) -> bool {
        self.producing.load(Ordering::Acquire) == 0
            && (0..self.npubs).all(|i| self.floor(i) >= self.sent(i))
    }

    /// Worker `w` stopped producing for good.
    pub fn done_producing(&self) {
        self.producing.fetch_sub(1, Ordering::AcqRel);
    }

    /// Worker `w`'s own drain condition; once every worker's holds, no
    /// worker waits for anything (a provider keeps answering until then).
    pub fn set_drained(&self, w: usize, done: bool) {
        self.drained[w].store(done, Ordering::Release);
    }

    pub fn all_drained(&self) -> bool {
        self.drained.iter().all(|d| d.load(Ordering::Acquire))
    }

    pub fn set_waker(&self, w: usize, waker: Arc<Waker>) {
        if let Ok(mut ws) = self.wakers.lock() {
            if let Some(slot) = ws.get_mut(w) {
                *slot = Some(waker);
            }
        }
    }

    /// Worker `w` has a publisher blocked on its window: after this, the
    /// caller must re-read the floor (see the module docs).
    pub fn park(&self, w: usize) {
        self.parked[w].store(true, Ordering::Relaxed);
        fence(Ordering::SeqCst);
    }

    /// A subscriber on worker `me` advanced: wake every other worker with
    /// a blocked publisher.
    pub fn wake_parked(&self, me: usize) {
        fence(Ordering::SeqCst);
        for (w, p) in self.parked.iter().enumerate() {
            if w != me && p.load(Ordering::Relaxed) && p.swap(false, Ordering::Relaxed) {
                let waker = self.wakers.lock().ok().and_then(|ws| ws[w].clone());
                if let Some(waker) = waker {
                    let _ = waker.wake();
                }
            }
        }
    }

    /// Counts one printed problem; returns the count including it.
    pub fn count_log(&self) -> u64 {
        self.logged.fetch_add(1, Ordering::Relaxed) + 1
    }

    pub fn abort(&self) {
        self.abort.store(true, Ordering::Relaxed);
        if let Ok(_g) = self.gate.lock() {
            self.gate_cv.notify_all();
        }
    }

    pub fn aborted(&self) -> bool {
        self.abort.load(Ordering::Relaxed)
    }

    /// Waits until every worker arrived here (a reusable barrier), or one
    /// of them failed.
    pub fn gate(&self) -> Result<(), Aborted> {
        let Ok(mut g) = self.gate.lock() else {
            return Err(Aborted);
        };
        let generation = g.generation;
        g.arrived += 1;
        if g.arrived == self.threads {
            g.arrived = 0;
            g.generation += 1;
            self.gate_cv.notify_all();
            return Ok(());
        }
        while g.generation == generation {
            if self.aborted() {
                return Err(Aborted);
            }
            g = match self.gate_cv.wait_timeout(g, Duration::from_millis(50)) {
                Ok((g, _)) => g,
                Err(_) => return Err(Aborted),
            };
        }
        Ok(())
    }

    pub fn set_start(&self, t: Instant) {
        if let Ok(mut s) = self.start.lock() {
            *s = Some(t);
        }
    }

    pub fn start(&self) -> Option<Instant> {
        self.start.lock().ok().and_then(|s| *s)
    }
}

/// Which worker owns role number `j` of the run's role list (subscribers,
/// then publishers, providers, callers): round robin, so fan-out spreads
/// its subscribers and fan-in its publishers over every worker.
pub fn owner(j: usize, threads: usize) -> usize {
    j % threads.max(1)
}

/// Parses `--pin-cpus`: `1`, `0,1`, `2-3`.
pub fn parse_cpus(s: &str) -> Result<Vec<usize>, String> {
    let mut cpus = Vec::new();
    for part in s.split(',').filter(|p| !p.is_empty()) {
        let bad = || format!("--pin-cpus {s:?}: expected a list like 1 or 0,1 or 2-3");
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) =
                    (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
                if a > b {
                    return Err(bad());
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(part.parse().map_err(|_| bad())?),
        }
    }
    if cpus.is_empty() || cpus.iter().any(|&c| c >= libc::CPU_SETSIZE as usize) {
        return Err(format!("--pin-cpus {s:?}: no usable CPU numbers"));
    }
    Ok(cpus)
}

/// Pins the calling thread to `cpu`.
pub fn pin_to(cpu: usize) -> std::io::Result<()> {
    // SAFETY: cpu_set_t is a plain bit array; zeroed is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` < CPU_SETSIZE (checked by `parse_cpus`).
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: pid 0 is the calling thread; valid pointer and size.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Cores this process may run on (its affinity mask), at least 1.
pub fn allowed_cpus() -> usize {
    // SAFETY: as in `pin_to`.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer and size; pid 0 is this thread.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return std::thread::available_parallelism().map_or(1, |n| n.get());
    }
    // SAFETY: reads the set filled above.
    (unsafe { libc::CPU_COUNT(&set) } as usize).max(1)
}

/// Cores the tool's workers can use at once: its thread count, limited by
/// the distinct CPUs they are pinned to (or the process's affinity mask).
/// The report calls a run tool-bound against this, not against one core.
pub fn tool_cores(threads: usize, pins: &[usize]) -> usize {
    let cores = if pins.is_empty() {
        allowed_cpus()
    } else {
        let mut p = pins.to_vec();
        p.sort_unstable();
        p.dedup();
        p.len()
    };
    threads.min(cores).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_parse() {
        assert_eq!(parse_cpus("1").expect("one"), vec![1]);
        assert_eq!(parse_cpus("0,1").expect("two"), vec![0, 1]);
        assert_eq!(parse_cpus("2-4").expect("range"), vec![2, 3, 4]);
        assert!(parse_cpus("").is_err());
        assert!(parse_cpus("x").is_err());
        assert!(parse_cpus("3-1").is_err());
        assert!(parse_cpus("100000").is_err());
    }

    #[test]
    fn tool_cores_counts_distinct_pins() {
        assert_eq!(tool_cores(2, &[1]), 1);
        assert_eq!(tool_cores(2, &[1, 1]), 1);
        assert_eq!(tool_cores(2, &[0, 1]), 2);
        assert_eq!(tool_cores(1, &[0, 1]), 1);
    }

    #[test]
    fn floor_and_drain_span_every_subscriber() {
        let s = Shared::new(2, 2, 3);
        s.set_sent(0, 5);
        for sub in 0..3 {
            s.set_next(sub, 0, 5);
        }
        s.set_next(1, 0, 4);
        assert_eq!(s.floor(0), 4);
        assert_eq!(s.floor(1), 0);
        s.set_next(1, 0, 5);
        // Both workers still producing: not complete yet.
        assert!(!s.all_delivered());
        s.done_producing();
        s.done_producing();
        assert!(s.all_delivered());
    }

    #[test]
    fn gate_releases_all_and_abort_frees_waiters() {
        let s = Arc::new(Shared::new(2, 0, 0));
        let s2 = Arc::clone(&s);
        let t = std::thread::spawn(move || s2.gate().is_ok());
        assert!(s.gate().is_ok());
        assert!(t.join().expect("joined"));
        // One worker waits; the other fails instead of arriving.
        let s3 = Arc::clone(&s);
        let t = std::thread::spawn(move || s3.gate().is_err());
        std::thread::sleep(Duration::from_millis(20));
        s.abort();
        assert!(t.join().expect("joined"));
    }
}
