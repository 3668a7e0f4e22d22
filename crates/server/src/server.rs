//! The I/O shell: one mio `Poll` on one thread drives the listener, every
//! connection and the signal pipe. The only module that touches sockets or
//! reads the clock; everything it learns goes into the [`Hub`].
//!
//! Loop phases, in this order every turn (Redis `aeProcessEvents` +
//! `beforeSleep`, sozu `Server::run`):
//! 1. poll, with timeout 0 if work is left over, else until the next deadline;
//! 2. dispatch events: set our own sticky readable/writable flags;
//! 3. accept new connections (unless paused after EMFILE, P10);
//! 4. read from connections with readable set, at most `READ_BUDGET_BYTES`
//!    each (P8); one that still has data stays queued for the next turn;
//! 5. run jobs other threads queued in the inbox (at most `INBOX_BUDGET`);
//! 6. expire call deadlines and write stalls;
//! 7. flush connections with queued output, at most `WRITE_BUDGET_BYTES`
//!    each, with `write_vectored`;
//! 8. free connections marked closed (after one last best-effort flush).
//!
//! Invariants:
//! - edge-triggered readiness is sticky: a flag is cleared only on
//!   `WouldBlock`, so a connection with data left after its budget is
//!   revisited without a new event;
//! - a socket is dropped only in phase 8, so a slab key is never reused
//!   within one turn;
//! - no error from a socket or from accept ends the loop; only a signal (or
//!   [`crate::inbox::Handle::stop`]) does.

use std::collections::VecDeque;
use std::io::{self, ErrorKind, IoSlice, Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};
use signal_hook::consts::{SIGINT, SIGTERM, SIGUSR1};
use signal_hook_mio::v1_0::Signals;

use rosgate_core::counters::Counter;
use rosgate_core::log;
use rosgate_core::out::MAX_IOVECS;
use rosgate_core::{CloseReason, Hub, Transport};

use crate::config::{
    Config, ACCEPT_BACKOFF_MAX_MS, ACCEPT_BACKOFF_MIN_MS, INBOX_BUDGET, INBOX_CAPACITY,
    LISTEN_BACKLOG, READ_BUDGET_BYTES, RESERVED_FDS, TRIM_INTERVAL, WRITE_BUDGET_BYTES,
};
use crate::inbox::{Handle, Inbox};

const LISTENER: Token = Token(usize::MAX - 1);
const SIGNALS: Token = Token(usize::MAX - 2);
const WS_LISTENER: Token = Token(usize::MAX - 3);
const WAKER: Token = Token(usize::MAX - 4);

/// Bytes of traffic after which an idle moment is used to trim the heap.
const TRIM_AFTER_BYTES: u64 = 16 * 1024 * 1024;

/// Socket-side state of one connection; indexed by the hub's slab key.
struct Io {
    stream: TcpStream,
    readable: bool,
    writable: bool,
    /// Listed in `read_queue`.
    queued: bool,
}

/// The gateway process: listener, poll, hub.
pub struct Server {
    poll: Poll,
    listener: TcpListener,
    ws_listener: Option<TcpListener>,
    signals: Signals,
    inbox: Inbox,
    handle: Handle,
    /// The inbox may hold jobs beyond the last turn's budget.
    inbox_pending: bool,
    hub: Hub,
    io: Vec<Option<Io>>,
    read_queue: VecDeque<u32>,
    read_buf: Vec<u8>,
    accept_paused_until: Option<Instant>,
    accept_backoff: Duration,
    accept_pending: bool,
    ws_accept_pending: bool,
    shutdown: bool,
    next_trim: Instant,
    trimmed_at_bytes: u64,
}

impl Server {
    /// Binds the listener and prepares the loop; nothing is served until
    /// [`Server::run`].
    pub fn bind(config: &Config) -> io::Result<Server> {
        let mut limits = config.limits.clone();
        let fd_limit = raise_fd_limit();
        let cap = fd_limit.saturating_sub(RESERVED_FDS).max(1);
        if limits.max_connections > cap {
            log!(
                Warn,
                "max connections lowered from {} to {cap} (file descriptor limit {fd_limit})",
                limits.max_connections
            );
            limits.max_connections = cap;
        }
        let poll = Poll::new()?;
        let mut listener =
            bind(config.listen).map_err(|e| in_context(e, "listen", config.listen))?;
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        let ws_listener = match config.ws_listen {
            Some(addr) => {
                let mut l = bind(addr).map_err(|e| in_context(e, "ws-listen", addr))?;
                poll.registry()
                    .register(&mut l, WS_LISTENER, Interest::READABLE)?;
                Some(l)
            }
            None => None,
        };
        let mut signals = Signals::new([SIGINT, SIGTERM, SIGUSR1])?;
        poll.registry()
            .register(&mut signals, SIGNALS, Interest::READABLE)?;
        let waker = mio::Waker::new(poll.registry(), WAKER)?;
        let (inbox, handle) = Inbox::new(waker, INBOX_CAPACITY);
        let now = Instant::now();
        let mut hub = Hub::new(limits, now);
        hub.set_ws_status(config.ws_status);
        Ok(Server {
            poll,
            listener,
            ws_listener,
            signals,
            inbox,
            handle,
            inbox_pending: false,
            hub,
            io: Vec::new(),
            read_queue: VecDeque::new(),
            read_buf: vec![0; READ_BUDGET_BYTES],
            accept_paused_until: None,
            accept_backoff: Duration::from_millis(ACCEPT_BACKOFF_MIN_MS),
            accept_pending: true,
            ws_accept_pending: true,
            shutdown: false,
            next_trim: now + TRIM_INTERVAL,
            trimmed_at_bytes: 0,
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// A handle other threads use to queue work for the loop or stop it.
    pub fn handle(&self) -> Handle {
        self.handle.clone()
    }

    /// The WebSocket listener's address, if it is on.
    pub fn ws_local_addr(&self) -> Option<io::Result<SocketAddr>> {
        self.ws_listener.as_ref().map(|l| l.local_addr())
    }

    /// Runs until SIGINT or SIGTERM.
    pub fn run(&mut self) -> io::Result<()> {
        let mut events = Events::with_capacity(1024);
        let mut keys = Vec::new();
        while !self.shutdown && !self.inbox.stop_requested() {
            let timeout = self.poll_timeout(Instant::now());
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                if e.kind() == ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            let now = Instant::now();
            for ev in events.iter() {
                match ev.token() {
                    LISTENER => self.accept_pending = true,
                    WS_LISTENER => self.ws_accept_pending = true,
                    SIGNALS => self.on_signals(),
                    WAKER => self.inbox_pending = true,
                    Token(k) => self.on_event(k as u32, ev),
                }
            }
            self.accept(now);
            self.read_ready(now);
            self.run_inbox(now);
            self.hub.expire(now);
            self.flush(now, &mut keys);
            self.free_closed(now, &mut keys);
            self.maybe_trim_heap(now);
        }
        self.shut_down();
        Ok(())
    }

    fn run_inbox(&mut self, now: Instant) {
        if self.inbox_pending {
            let ran = self.inbox.run(&mut self.hub, now, INBOX_BUDGET);
            // A full budget may have left jobs behind: come back next turn.
            self.inbox_pending = ran == INBOX_BUDGET;
        }
    }

    /// Trims the heap once traffic of at least [`TRIM_AFTER_BYTES`] passed
    /// since the last trim, at most once per [`TRIM_INTERVAL`].
    fn maybe_trim_heap(&mut self, now: Instant) {
        let c = self.hub.counters();
        let moved = c.get(Counter::BytesIn) + c.get(Counter::BytesOut);
        if now < self.next_trim || moved < self.trimmed_at_bytes + TRIM_AFTER_BYTES {
            return;
        }
        trim_heap();
        self.trimmed_at_bytes = moved;
        self.next_trim = now + TRIM_INTERVAL;
    }

    fn poll_timeout(&self, now: Instant) -> Duration {
        // Frees and budget-limited flushes leave output for the next turn.
        if !self.read_queue.is_empty() || self.hub.has_dirty() || self.inbox_pending {
            return Duration::ZERO;
        }
        let mut deadline = self.hub.next_deadline();
        if let Some(t) = self.accept_paused_until {
            deadline = deadline.min(t);
        }
        // Round up so we never wake a hair before a deadline and spin.
        deadline.saturating_duration_since(now) + Duration::from_micros(500)
    }

    fn on_event(&mut self, key: u32, ev: &mio::event::Event) {
        let Some(Some(io)) = self.io.get_mut(key as usize) else {
            return;
        };
        if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
            io.readable = true;
            if !io.queued {
                io.queued = true;
                self.read_queue.push_back(key);
            }
        }
        if ev.is_writable() || ev.is_write_closed() {
            io.writable = true;
            if self.hub.out(key).is_some_and(|o| !o.is_empty()) {
                self.hub.mark_dirty(key);
            }
        }
    }

    fn on_signals(&mut self) {
        for sig in self.signals.pending() {
            match sig {
                SIGUSR1 => log::always("STATS", format_args!("{}", self.hub.stats_json())),
                _ => {
                    log!(Info, "signal {sig}: shutting down");
                    self.shutdown = true;
                }
            }
        }
    }

    fn accept(&mut self, now: Instant) {
        if let Some(t) = self.accept_paused_until {
            if now < t {
                return;
            }
            self.accept_paused_until = None;
            self.accept_pending = true;
            self.ws_accept_pending = self.ws_listener.is_some();
        }
        if self.accept_pending {
            self.accept_pending = self.accept_from(Transport::Tcp, now);
        }
        if self.ws_accept_pending && self.accept_paused_until.is_none() {
            self.ws_accept_pending = self.accept_from(Transport::WebSocket, now);
        }
    }

    /// Accepts until the backlog is empty; returns whether accepting must
    /// resume later (after an EMFILE pause).
    fn accept_from(&mut self, transport: Transport, now: Instant) -> bool {
        loop {
            let listener = match transport {
                Transport::Tcp => Some(&self.listener),
                Transport::WebSocket => self.ws_listener.as_ref(),
            };
            let Some(listener) = listener else {
                return false;
            };
            match listener.accept() {
                Ok((stream, addr)) => {
                    self.accept_backoff = Duration::from_millis(ACCEPT_BACKOFF_MIN_MS);
                    self.admit(stream, addr, transport, now);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return false,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) if is_resource_exhaustion(&e) => {
                    // P10: never exit, never spin. Connections wait in the
                    // backlog until descriptors free up.
                    self.hub.count(Counter::AcceptErrors);
                    log!(
                        Warn,
                        "accept: {e}; pausing accepts for {:?}",
                        self.accept_backoff
                    );
                    self.accept_paused_until = Some(now + self.accept_backoff);
                    self.accept_backoff =
                        (self.accept_backoff * 2).min(Duration::from_millis(ACCEPT_BACKOFF_MAX_MS));
                    return true;
                }
                Err(e) => {
                    // ECONNABORTED and friends concern one connection only.
                    self.hub.count(Counter::AcceptErrors);
                    log!(Debug, "accept: {e}");
                }
            }
        }
    }

    fn admit(
        &mut self,
        mut stream: TcpStream,
        addr: SocketAddr,
        transport: Transport,
        now: Instant,
    ) {
        let Some(r) = self.hub.open_as(transport, now) else {
            // Best effort: the socket is fresh, so the line fits its buffer.
            let _ = stream.write(&self.hub.rejection_frame(transport));
            return;
        };
        let _ = stream.set_nodelay(true);
        let token = Token(r.key as usize);
        if let Err(e) = self.poll.registry().register(
            &mut stream,
            token,
            Interest::READABLE | Interest::WRITABLE,
        ) {
            log!(Warn, "register {addr}: {e}");
            self.hub.close(r.key, CloseReason::Reset, now);
        }
        let idx = r.key as usize;
        if self.io.len() <= idx {
            self.io.resize_with(idx + 1, || None);
        }
        self.io[idx] = Some(Io {
            stream,
            readable: false,
            writable: true,
            queued: false,
        });
        log!(Debug, "open conn={} peer={addr}", r.key);
    }

    fn read_ready(&mut self, now: Instant) {
        for _ in 0..self.read_queue.len() {
            let Some(key) = self.read_queue.pop_front() else {
                break;
            };
            let Some(Some(io)) = self.io.get_mut(key as usize) else {
                continue;
            };
            io.queued = false;
            if !io.readable || self.hub.conn(key).is_none_or(|c| !c.is_open()) {
                continue;
            }
            let mut budget = READ_BUDGET_BYTES;
            let mut outcome = ReadOutcome::Budget;
            while budget > 0 {
                let n = budget.min(self.read_buf.len());
                match io.stream.read(&mut self.read_buf[..n]) {
                    Ok(0) => {
                        outcome = ReadOutcome::Eof;
                        break;
                    }
                    Ok(n) => {
                        budget -= n;
                        self.hub.on_bytes(key, &self.read_buf[..n], now);
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {
                        outcome = ReadOutcome::Drained;
                        break;
                    }
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(e) => {
                        log!(Debug, "read conn={key}: {e}");
                        outcome = ReadOutcome::Failed;
                        break;
                    }
                }
            }
            match outcome {
                ReadOutcome::Budget => {
                    // Data may remain: revisit next turn without an event.
                    io.queued = true;
                    self.read_queue.push_back(key);
                }
                ReadOutcome::Drained => io.readable = false,
                ReadOutcome::Eof => {
                    io.readable = false;
                    self.hub.on_eof(key, now);
                }
                ReadOutcome::Failed => {
                    io.readable = false;
                    self.hub.close(key, CloseReason::Reset, now);
                }
            }
        }
    }

    fn flush(&mut self, now: Instant, keys: &mut Vec<u32>) {
        self.hub.take_dirty(keys);
        let mut again = Vec::new();
        for &key in keys.iter() {
            if self.write_some(key, WRITE_BUDGET_BYTES, now) == WriteOutcome::Budget {
                again.push(key);
            }
        }
        for key in again {
            self.hub.mark_dirty(key);
        }
    }

    /// Writes queued output of `key` until it is empty, the socket is full
    /// or `budget` bytes went out.
    fn write_some(&mut self, key: u32, mut budget: usize, now: Instant) -> WriteOutcome {
        let Some(Some(io)) = self.io.get_mut(key as usize) else {
            return WriteOutcome::Done;
        };
        if !io.writable {
            return WriteOutcome::Done;
        }
        loop {
            let Some(out) = self.hub.out(key) else {
                return WriteOutcome::Done;
            };
            if out.is_empty() {
                return WriteOutcome::Done;
            }
            if budget == 0 {
                return WriteOutcome::Budget;
            }
            let mut iov = [IoSlice::new(&[]); MAX_IOVECS];
            let n = out.fill(&mut iov, budget);
            match io.stream.write_vectored(&iov[..n]) {
                Ok(0) => {
                    self.hub.close(key, CloseReason::Reset, now);
                    return WriteOutcome::Done;
                }
                Ok(w) => {
                    budget = budget.saturating_sub(w);
                    self.hub.wrote(key, w, now);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    io.writable = false;
                    return WriteOutcome::Done;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    log!(Debug, "write conn={key}: {e}");
                    io.writable = false;
                    self.hub.close(key, CloseReason::Reset, now);
                    return WriteOutcome::Done;
                }
            }
        }
    }

    fn free_closed(&mut self, now: Instant, keys: &mut Vec<u32>) {
        loop {
            self.hub.take_closing(keys);
            if keys.is_empty() {
                return;
            }
            for &key in keys.iter() {
                // Last words (an error status, a rejection) go out if the
                // socket takes them right now; nobody waits for them.
                self.write_some(key, WRITE_BUDGET_BYTES, now);
                if let Some(slot) = self.io.get_mut(key as usize) {
                    if let Some(mut io) = slot.take() {
                        let _ = self.poll.registry().deregister(&mut io.stream);
                    }
                }
                // Freeing may fail calls and queue output for others, or
                // close more connections: the outer loop picks those up.
                self.hub.free(key, now);
                log!(Debug, "free conn={key}");
            }
        }
    }

    fn shut_down(&mut self) {
        let now = Instant::now();
        let keys: Vec<u32> = self.hub.conn_keys().collect();
        for key in keys {
            self.hub.close(key, CloseReason::Shutdown, now);
        }
        let mut scratch = Vec::new();
        self.free_closed(now, &mut scratch);
        log!(Info, "stopped: {}", self.hub.stats_json());
    }
}

#[derive(Debug, PartialEq, Eq)]
enum ReadOutcome {
    Budget,
    Drained,
    Eof,
    Failed,
}

#[derive(Debug, PartialEq, Eq)]
enum WriteOutcome {
    Done,
    Budget,
}

/// Binds a listener with our backlog instead of mio's 128: listening again
/// on a listening socket only updates its backlog.
fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    use std::os::fd::AsRawFd;
    let listener = TcpListener::bind(addr)?;
    // SAFETY: plain syscall on a descriptor we own.
    if unsafe { libc::listen(listener.as_raw_fd(), LISTEN_BACKLOG) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(listener)
}

/// Names the address in a bind error, since there are two listeners.
fn in_context(e: io::Error, what: &str, addr: SocketAddr) -> io::Error {
    io::Error::new(e.kind(), format!("--{what} {addr}: {e}"))
}

fn is_resource_exhaustion(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    )
}

/// Returns freed heap memory to the OS (glibc only).
///
/// glibc raises its mmap threshold after the first big free, so later big
/// buffers (a 16 MiB line, 1 MiB images) come from the heap: good while they
/// stream, since pages are reused instead of faulted in for every message,
/// but the memory stays in RSS afterwards (the stress test's long-line
/// scenario kept +16 MiB). Trimming after traffic, at most once per
/// [`TRIM_INTERVAL`], gives it back without costing the hot path.
fn trim_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory; no pointer is involved.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Raises the soft RLIMIT_NOFILE to the hard limit (P9) and returns the
/// resulting soft limit.
fn raise_fd_limit() -> usize {
    // SAFETY: getrlimit/setrlimit only read/write the struct we pass.
    unsafe {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 1024;
        }
        if lim.rlim_cur < lim.rlim_max {
            let want = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &want) == 0 {
                lim.rlim_cur = lim.rlim_max;
            }
        }
        usize::try_from(lim.rlim_cur).unwrap_or(usize::MAX)
    }
}
