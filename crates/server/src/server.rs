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
//!    each (P8) and `READ_TURN_BUDGET_BYTES` or `READ_TURN_WORK` (lines +
//!    deliveries) in all (P20), each read sized by its connection's recent
//!    work per byte; one that still has data, or was not reached, stays
//!    queued for the next turn;
//! 5. run jobs other threads queued in the inbox (at most `INBOX_BUDGET`,
//!    and `INBOX_TURN_WORK` of deliveries and lines: a remote sample fans
//!    out like a publish read from a socket);
//! 6. expire call deadlines and write stalls;
//! 7. flush connections with queued output, at most `WRITE_BUDGET_BYTES`
//!    each and `WRITE_TURN_BUDGET_BYTES` or `WRITE_TURN_CALLS` in all, with
//!    `write_vectored`: fresh output first with half the turn, then the
//!    carry round-robin (see `Server::flush`);
//! 8. free connections marked closed (after one last best-effort flush), at
//!    most `FREE_TURN_BUDGET` work per turn; the rest wait in
//!    `free_backlog`, deregistered;
//! 9. trim the heap when due.
//!
//! Invariants:
//! - edge-triggered readiness is sticky: a flag is cleared only on
//!   `WouldBlock`, so a connection with data left after its budget is
//!   revisited without a new event;
//! - a socket is dropped only in phase 8, so a slab key is never reused
//!   within one turn (and a slot is reused only once the hub freed it);
//! - no error from a socket or from accept ends the loop; only a signal (or
//!   [`crate::inbox::Handle::stop`]) does.
//! - under `--tls-cert` (`tls.rs`) the hub sees plaintext only: phase 4
//!   decrypts each read before `Hub::on_bytes`, phase 7 writes what rustls
//!   holds before moving the next `TLS_WRITE_CHUNK_BYTES` of the hub's
//!   queue into it, phase 8 adds `close_notify` to the last words. A
//!   connection without TLS pays one branch per read and per write.

use std::collections::VecDeque;
use std::io::{self, ErrorKind, IoSlice, Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime};

use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};
use signal_hook::consts::{SIGINT, SIGTERM, SIGUSR1};
use signal_hook_mio::v1_0::Signals;

use rosgate_core::counters::Counter;
use rosgate_core::hub::Freed;
use rosgate_core::hub::GraphSettings;
use rosgate_core::log;
use rosgate_core::log::LogLevel;
use rosgate_core::out::MAX_IOVECS;
use rosgate_core::{CloseReason, Hub, Transport};
use rosgate_ros2::registry::Registry;

use crate::config::{
    Config, ACCEPT_BACKOFF_MAX_MS, ACCEPT_BACKOFF_MIN_MS, FREE_TURN_BUDGET, INBOX_BUDGET,
    INBOX_CAPACITY, INBOX_TURN_WORK, LISTEN_BACKLOG, MMAP_THRESHOLD, READ_BUDGET_BYTES,
    READ_CHUNK_BYTES, READ_MIN_QUANTUM, READ_TURN_BUDGET_BYTES, READ_TURN_WORK, READ_TURN_WORK_MAX,
    RESERVED_FDS, TRIM_INTERVAL, UNSENT_LOWAT_BYTES, WRITE_BUDGET_BYTES, WRITE_TURN_BUDGET_BYTES,
    WRITE_TURN_CALLS,
};
use crate::inbox::{Handle, Inbox};
use crate::tls::{
    Input, Received, Session, TlsConfig, TLS_HANDSHAKES_PER_TURN, TLS_WRITE_CHUNK_BYTES,
};

const LISTENER: Token = Token(usize::MAX - 1);
const SIGNALS: Token = Token(usize::MAX - 2);
const WS_LISTENER: Token = Token(usize::MAX - 3);
const WAKER: Token = Token(usize::MAX - 4);
const FOXGLOVE_LISTENER: Token = Token(usize::MAX - 5);

/// Which listener a connection was accepted on: the hub's `Transport`, or
/// the Foxglove listener (a WebSocket whose opening must offer a Foxglove
/// subprotocol, `Hub::open_foxglove_from`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Listener {
    Plain(Transport),
    Foxglove,
}

/// Bytes of traffic after which an idle moment is used to trim the heap.
const TRIM_AFTER_BYTES: u64 = 16 * 1024 * 1024;

/// Bytes. A fall of the memory ledger from its high-water mark by this much
/// also trims: small attacks that end should not leave RSS up.
const TRIM_AFTER_FALL: usize = 2 * 1024 * 1024;

/// Socket-side state of one connection; indexed by the hub's slab key.
struct Io {
    stream: TcpStream,
    /// On a TLS listener: the session between the socket's ciphertext and
    /// the hub's plaintext (`tls.rs`). The plain path branches once on it
    /// per read and per write.
    tls: Option<Box<Session>>,
    readable: bool,
    writable: bool,
    /// Listed in `read_queue`.
    queued: bool,
    /// Listed in `write_carry`.
    carried: bool,
    /// Work (lines, deliveries) per KiB this connection's input caused
    /// lately: sizes its reads.
    work_per_kib: Option<u64>,
    /// The loop turn in which it last sent us something.
    read_at: u64,
    /// Work it may still spend reading (deficit round robin).
    deficit: u64,
}

/// The gateway process: listener, poll, hub.
pub struct Server {
    poll: Poll,
    listener: TcpListener,
    ws_listener: Option<TcpListener>,
    /// `--foxglove-listen`: WebSocket openings that must offer a Foxglove
    /// subprotocol (the same handshake, TLS and tokens as `ws_listener`).
    foxglove_listener: Option<TcpListener>,
    signals: Signals,
    inbox: Inbox,
    handle: Handle,
    /// Zenoh (`--zenoh-*`, `--ros-domain`) and DDS (`--dds-domain`): every
    /// peer network joined, behind one driver.
    #[cfg(any(feature = "zenoh", feature = "dds"))]
    peers: Option<crate::peers::Peers>,
    /// The inbox may hold jobs beyond the last turn's budget.
    inbox_pending: bool,
    hub: Hub,
    io: Vec<Option<Io>>,
    /// `--tls-cert`/`--tls-key`: both listeners speak TLS.
    tls: Option<TlsConfig>,
    read_queue: VecDeque<u32>,
    read_buf: Vec<u8>,
    accept_paused_until: Option<Instant>,
    accept_backoff: Duration,
    accept_pending: bool,
    ws_accept_pending: bool,
    foxglove_accept_pending: bool,
    shutdown: bool,
    /// When a graceful shutdown stops flushing, once one started.
    drain_until: Option<Instant>,
    shutdown_grace: Duration,
    /// Connections with output left when the last turn's write budget ran
    /// out: written first next turn, so none starves behind newer ones.
    write_carry: VecDeque<u32>,
    /// Loop turns so far.
    turn: u64,
    /// Connections closed and deregistered but not yet freed: the turn's
    /// free budget ran out.
    free_backlog: VecDeque<u32>,
    next_trim: Instant,
    trimmed_at_bytes: u64,
    /// Highest memory ledger total since the last trim.
    memory_high: usize,
}

impl Server {
    /// Binds the listener and prepares the loop; nothing is served until
    /// [`Server::run`].
    pub fn bind(config: &Config) -> io::Result<Server> {
        let mut limits = config.limits.clone();
        let fd_limit = raise_fd_limit();
        set_mmap_threshold();
        let cap = fd_limit.saturating_sub(RESERVED_FDS).max(1);
        if limits.max_connections > cap {
            log!(
                Warn,
                "max connections lowered from {} to {cap} (file descriptor limit {fd_limit})",
                limits.max_connections
            );
            limits.max_connections = cap;
        }
        // Every flag and file is checked before anything is bound, so a
        // bad one is reported whatever else would fail (a busy port).
        let types = interface_types(&config.interfaces)?;
        #[cfg(any(feature = "zenoh", feature = "dds"))]
        #[allow(unused_mut)]
        let mut prepared = crate::peers::Prepared::default();
        #[cfg(feature = "zenoh")]
        {
            prepared.zenoh = crate::federation::prepare(
                &config.zenoh,
                config.allow_unauthenticated_network,
                &types,
            )?;
        }
        #[cfg(feature = "dds")]
        {
            prepared.dds =
                crate::dds::prepare(&config.dds, config.allow_unauthenticated_network, &types)?;
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
        let foxglove_listener = match config.foxglove_listen {
            Some(addr) => match bind(addr) {
                Ok(mut l) => {
                    poll.registry()
                        .register(&mut l, FOXGLOVE_LISTENER, Interest::READABLE)?;
                    Some(l)
                }
                // The default address, not asked for: the rosbridge port
                // answers Foxglove clients too, so a second gateway (or a
                // test's) starts without it.
                Err(e) if config.foxglove_listen_default => {
                    log!(
                        Warn,
                        "foxglove-listen {addr}: {e}; the Foxglove listener is off (Foxglove clients may use the WebSocket port; --foxglove-listen ADDR|off chooses)"
                    );
                    None
                }
                Err(e) => return Err(in_context(e, "foxglove-listen", addr)),
            },
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
        hub.set_types(types);
        let mut graph = GraphSettings::new(now, SystemTime::now());
        graph.tcp_domain = config.tcp_domain;
        graph.ws_domain = config.ws_domain;
        graph.strict_names = config.strict_names;
        graph.use_sim_time = config.use_sim_time;
        if let Ok(distro) = std::env::var("ROS_DISTRO") {
            if !distro.is_empty() {
                graph.distro = distro;
            }
        }
        hub.set_graph_settings(graph);
        // The encode time counters' clock (the core reads none itself).
        hub.set_cost_clock(Instant::now);
        hub.set_param_overrides(config.param_overrides.clone());
        hub.set_access(config.access.clone());
        hub.set_http_settings(crate::assets::http_settings());
        if let Some(dir) = &config.foxglove_assets {
            let assets = crate::foxglove_assets::DirAssets::new(dir).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("--foxglove-assets {}: {e}", dir.display()),
                )
            })?;
            hub.set_foxglove_assets(Box::new(assets));
        }
        #[cfg(any(feature = "zenoh", feature = "dds"))]
        let peers = crate::peers::Peers::start(prepared, &handle, &mut hub)?;
        Ok(Server {
            #[cfg(any(feature = "zenoh", feature = "dds"))]
            peers,
            poll,
            listener,
            ws_listener,
            foxglove_listener,
            signals,
            inbox,
            handle,
            inbox_pending: false,
            hub,
            io: Vec::new(),
            tls: config.tls.clone(),
            read_queue: VecDeque::new(),
            read_buf: vec![0; READ_BUDGET_BYTES],
            accept_paused_until: None,
            accept_backoff: Duration::from_millis(ACCEPT_BACKOFF_MIN_MS),
            accept_pending: true,
            ws_accept_pending: true,
            foxglove_accept_pending: true,
            shutdown: false,
            drain_until: None,
            shutdown_grace: config.shutdown_grace,
            write_carry: VecDeque::new(),
            turn: 0,
            free_backlog: VecDeque::new(),
            next_trim: now + TRIM_INTERVAL,
            trimmed_at_bytes: 0,
            memory_high: 0,
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// A handle other threads use to queue work for the loop or stop it.
    pub fn handle(&self) -> Handle {
        self.handle.clone()
    }

    /// Whether the listeners speak TLS (`--tls-cert`).
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// The WebSocket listener's address, if it is on.
    pub fn ws_local_addr(&self) -> Option<io::Result<SocketAddr>> {
        self.ws_listener.as_ref().map(|l| l.local_addr())
    }

    /// The Foxglove listener's address, if it is on.
    pub fn foxglove_local_addr(&self) -> Option<io::Result<SocketAddr>> {
        self.foxglove_listener.as_ref().map(|l| l.local_addr())
    }

    /// Runs until SIGINT or SIGTERM (or [`Handle::stop`]), then shuts down
    /// gracefully: stops accepting, fails calls in flight, flushes queued
    /// output for up to the grace period, says goodbye (WebSocket close
    /// 1001) and returns.
    pub fn run(&mut self) -> io::Result<()> {
        let mut events = Events::with_capacity(1024);
        let mut keys = Vec::new();
        loop {
            if (self.shutdown || self.inbox.stop_requested()) && self.drain_until.is_none() {
                self.begin_drain(Instant::now());
            }
            if let Some(until) = self.drain_until {
                if self.hub.conn_count() == 0 || Instant::now() >= until {
                    break;
                }
            }
            let timeout = self.poll_timeout(Instant::now());
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                if e.kind() == ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            let now = Instant::now();
            self.turn += 1;
            for ev in events.iter() {
                match ev.token() {
                    LISTENER => self.accept_pending = true,
                    WS_LISTENER => self.ws_accept_pending = true,
                    FOXGLOVE_LISTENER => self.foxglove_accept_pending = true,
                    SIGNALS => self.on_signals(),
                    WAKER => self.inbox_pending = true,
                    Token(k) => self.on_event(k as u32, ev),
                }
            }
            if self.drain_until.is_none() {
                self.accept(now);
            }
            self.read_ready(now);
            self.run_inbox(now);
            #[cfg(any(feature = "zenoh", feature = "dds"))]
            if let Some(p) = self.peers.as_mut() {
                p.turn(&mut self.hub, now);
            }
            self.hub.expire(now);
            self.flush(now, &mut keys);
            if self.drain_until.is_some() {
                self.hub.close_drained(now);
            }
            self.free_closed(now, &mut keys, FREE_TURN_BUDGET);
            self.maybe_trim_heap(now);
        }
        self.shut_down();
        Ok(())
    }

    /// Stops accepting and starts the hub's shutdown (P23).
    fn begin_drain(&mut self, now: Instant) {
        let _ = self.poll.registry().deregister(&mut self.listener);
        if let Some(l) = self.ws_listener.as_mut() {
            let _ = self.poll.registry().deregister(l);
        }
        if let Some(l) = self.foxglove_listener.as_mut() {
            let _ = self.poll.registry().deregister(l);
        }
        self.accept_pending = false;
        self.ws_accept_pending = false;
        self.foxglove_accept_pending = false;
        self.hub.begin_shutdown(now);
        self.drain_until = Some(now + self.shutdown_grace);
        // Write what is queued now; who has nothing left goes at once.
        let mut keys = Vec::new();
        self.flush(now, &mut keys);
        self.hub.close_drained(now);
        self.free_closed(now, &mut keys, FREE_TURN_BUDGET);
        log!(
            Info,
            "shutting down: flushing {} connections for up to {:?}",
            self.hub.conn_count(),
            self.shutdown_grace
        );
    }

    fn run_inbox(&mut self, now: Instant) {
        if self.inbox_pending {
            // A spent budget may have left jobs behind: come back next turn.
            self.inbox_pending = self
                .inbox
                .run(&mut self.hub, now, INBOX_BUDGET, INBOX_TURN_WORK);
        }
    }

    /// Trims the heap, at most once per [`TRIM_INTERVAL`], once traffic of
    /// at least [`TRIM_AFTER_BYTES`] passed since the last trim or the
    /// memory held for clients fell by [`TRIM_AFTER_FALL`] from its high-water mark,
    /// so RSS returns near its baseline after load ends even when no new
    /// traffic arrives.
    fn maybe_trim_heap(&mut self, now: Instant) {
        let held = self.hub.memory().total();
        self.memory_high = self.memory_high.max(held);
        if now < self.next_trim {
            return;
        }
        let c = self.hub.counters();
        let moved = c.get(Counter::BytesIn) + c.get(Counter::BytesOut);
        let traffic = moved >= self.trimmed_at_bytes + TRIM_AFTER_BYTES;
        let fell = self.memory_high >= held + TRIM_AFTER_FALL;
        if !traffic && !fell {
            return;
        }
        self.hub.shrink_tables();
        shrink_io(&mut self.io);
        trim_heap();
        self.trimmed_at_bytes = moved;
        self.memory_high = held;
        self.next_trim = now + TRIM_INTERVAL;
    }

    fn poll_timeout(&self, now: Instant) -> Duration {
        // Frees and budget-limited flushes leave output for the next turn.
        if !self.read_queue.is_empty()
            || self.hub.has_dirty()
            || !self.write_carry.is_empty()
            || !self.free_backlog.is_empty()
            || self.inbox_pending
            || self.hub.has_backlog()
        {
            return Duration::ZERO;
        }
        let mut deadline = self.hub.next_deadline();
        if let Some(t) = self.drain_until {
            deadline = deadline.min(t);
        }
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
            if self.hub.out(key).is_some_and(|o| !o.is_empty())
                || io.tls.as_ref().is_some_and(|t| t.wants_write())
            {
                self.hub.mark_dirty(key);
            }
        }
    }

    fn on_signals(&mut self) {
        for sig in self.signals.pending() {
            match sig {
                SIGUSR1 => log::counters("stats", &self.hub.stats_json()),
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
            self.foxglove_accept_pending = self.foxglove_listener.is_some();
        }
        if self.accept_pending {
            self.accept_pending = self.accept_from(Listener::Plain(Transport::Tcp), now);
        }
        if self.ws_accept_pending && self.accept_paused_until.is_none() {
            self.ws_accept_pending = self.accept_from(Listener::Plain(Transport::WebSocket), now);
        }
        if self.foxglove_accept_pending && self.accept_paused_until.is_none() {
            self.foxglove_accept_pending = self.accept_from(Listener::Foxglove, now);
        }
    }

    /// Accepts until the backlog is empty; returns whether accepting must
    /// resume later (after an EMFILE pause).
    fn accept_from(&mut self, kind: Listener, now: Instant) -> bool {
        loop {
            let listener = match kind {
                Listener::Plain(Transport::Tcp) => Some(&self.listener),
                Listener::Plain(Transport::WebSocket) => self.ws_listener.as_ref(),
                Listener::Foxglove => self.foxglove_listener.as_ref(),
            };
            let Some(listener) = listener else {
                return false;
            };
            match listener.accept() {
                Ok((stream, addr)) => {
                    self.accept_backoff = Duration::from_millis(ACCEPT_BACKOFF_MIN_MS);
                    self.admit(stream, addr, kind, now);
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

    fn admit(&mut self, mut stream: TcpStream, addr: SocketAddr, kind: Listener, now: Instant) {
        let opened = match kind {
            Listener::Plain(transport) => self.hub.open_from(transport, Some(addr), now),
            Listener::Foxglove => self.hub.open_foxglove_from(Some(addr), now),
        };
        let r = match opened {
            Ok(r) => r,
            Err(refusal) => {
                // Best effort: the socket is fresh, so the line fits its
                // buffer. A TLS client could not read it before a
                // handshake: it is closed without.
                if self.tls.is_none() {
                    let _ = stream.write(&refusal.frame);
                }
                return;
            }
        };
        let tls = match self.tls.as_ref().map(TlsConfig::session) {
            None => None,
            Some(Ok(session)) => Some(Box::new(session)),
            Some(Err(e)) => {
                // Not expected (the configuration was checked at start-up);
                // the socket is dropped unregistered, the slot freed.
                log!(Warn, "tls session for {addr}: {e}");
                self.hub.close(r.key, CloseReason::TlsError, now);
                return;
            }
        };
        let _ = stream.set_nodelay(true);
        limit_unsent(&stream);
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
            tls,
            readable: false,
            writable: true,
            queued: false,
            carried: false,
            work_per_kib: None,
            read_at: u64::MAX,
            deficit: 0,
        });
    }

    fn read_ready(&mut self, now: Instant) {
        // Bounded in bytes and in work (lines handled and messages
        // delivered: a 90-byte publish to 1500 subscribers is 1500
        // deliveries), and fair in work: each connection visited gets an
        // equal quantum of the turn's work added to its deficit and reads
        // only what that covers (deficit round robin), so a client whose
        // publishes fan out to thousands cannot make a cheap client's
        // request wait behind it for turns.
        let mut turn = READ_TURN_BUDGET_BYTES;
        let queued = self.read_queue.len().max(1) as u64;
        let quantum = (READ_TURN_WORK / queued).max(READ_MIN_QUANTUM);
        let ceiling = hub_work(&self.hub) + READ_TURN_WORK_MAX;
        // TLS server handshake flights this turn (`TLS_HANDSHAKES_PER_TURN`).
        let mut handshakes = 0;
        for _ in 0..self.read_queue.len() {
            if turn == 0 || hub_work(&self.hub) >= ceiling {
                break;
            }
            let Some(key) = self.read_queue.pop_front() else {
                break;
            };
            let Some(Some(io)) = self.io.get_mut(key as usize) else {
                continue;
            };
            io.queued = false;
            if !io.readable || self.hub.conn(key).is_none_or(|c| !c.is_open()) {
                io.deficit = 0;
                continue;
            }
            if handshakes >= TLS_HANDSHAKES_PER_TURN
                && io.tls.as_ref().is_some_and(|t| t.is_handshaking())
            {
                // Enough key exchanges this turn: next turn, first.
                io.queued = true;
                self.read_queue.push_back(key);
                continue;
            }
            io.deficit = (io.deficit + quantum).min(READ_TURN_WORK);
            let mut budget = READ_BUDGET_BYTES;
            let mut outcome = ReadOutcome::Budget;
            while budget > 0 {
                // Sized by what this connection's input cost so far, so one
                // read stays within its deficit.
                let Some(n) = chunk_for(io.work_per_kib, io.deficit) else {
                    break; // not enough saved up: next turn
                };
                let n = n.min(budget).min(self.read_buf.len());
                let before = hub_work(&self.hub);
                match io.stream.read(&mut self.read_buf[..n]) {
                    Ok(0) => {
                        outcome = ReadOutcome::Eof;
                        break;
                    }
                    Ok(n) => {
                        io.read_at = self.turn;
                        budget -= n;
                        turn = turn.saturating_sub(n);
                        match io.tls.as_mut() {
                            None => self.hub.on_bytes(key, &self.read_buf[..n], now),
                            Some(tls) => {
                                let was_handshaking = tls.is_handshaking();
                                let hub = &mut self.hub;
                                let got = tls.receive(&self.read_buf[..n], |input| match input {
                                    Input::HandshakeDone => hub.count(Counter::TlsHandshakes),
                                    Input::Plain(plain) => hub.on_bytes(key, plain, now),
                                });
                                if tls.wants_write() {
                                    hub.mark_dirty(key);
                                    // A server flight was made: a key
                                    // exchange and a signature (P20).
                                    if was_handshaking && tls.is_handshaking() {
                                        handshakes += 1;
                                    }
                                }
                                match got {
                                    Ok(Received::Open) => {}
                                    Ok(Received::PeerClosed) => {
                                        outcome = ReadOutcome::Eof;
                                        break;
                                    }
                                    Err(failure) => {
                                        if failure.in_handshake {
                                            hub.count(Counter::TlsHandshakeFailures);
                                        }
                                        log!(Debug, "tls conn={key}: {}", failure.reason);
                                        outcome = ReadOutcome::TlsFailed;
                                        break;
                                    }
                                }
                            }
                        }
                        let spent = hub_work(&self.hub) - before;
                        io.deficit = io.deficit.saturating_sub(spent);
                        // Per KiB of at least 256 bytes read: a 1-byte read
                        // that completes a line says little about the next.
                        let cost = spent * 1024 / n.max(256) as u64;
                        // Rises at once, falls by halves: a burst of
                        // cheap lines does not open the gate for a costly one.
                        io.work_per_kib = Some(io.work_per_kib.map_or(cost, |w| cost.max(w / 2)));
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {
                        outcome = ReadOutcome::Drained;
                        io.deficit = 0;
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
                ReadOutcome::TlsFailed => {
                    io.readable = false;
                    self.hub.close(key, CloseReason::TlsError, now);
                }
            }
        }
    }

    /// Writes connections with output, up to `WRITE_BUDGET_BYTES` each and
    /// the turn's budget (bytes and `write` calls) in all, so a huge fan-out
    /// cannot stall the loop (P20). First, with at most half the turn:
    /// connections that sent something this turn (a request waits for its
    /// reply: they are the interactive ones, and a crowd of subscribers that
    /// never send cannot push them back), then connections that just got
    /// output. The carry (connections a budget stopped) gets the rest,
    /// round-robin: who was not reached leads next turn, who was written and
    /// still has output goes last.
    fn flush(&mut self, now: Instant, keys: &mut Vec<u32>) {
        self.hub.take_dirty(keys);
        let this_turn = self.turn;
        let sent_now = |io: &Io| io.read_at == this_turn;
        let mut first: Vec<u32> = Vec::new();
        let mut fresh: Vec<u32> = Vec::new();
        for &key in keys.iter() {
            match self.io.get(key as usize) {
                Some(Some(io)) if !io.carried => {
                    if sent_now(io) {
                        first.push(key);
                    } else {
                        fresh.push(key);
                    }
                }
                _ => {} // gone, or in the carry
            }
        }
        let mut carried = Vec::with_capacity(self.write_carry.len());
        for key in self.write_carry.drain(..) {
            match self.io.get(key as usize) {
                Some(Some(io)) if sent_now(io) => first.push(key),
                Some(Some(_)) => carried.push(key),
                _ => {}
            }
        }
        let mut turn = Budget::turn();
        let mut share = turn.half();
        let (mut skipped_first, mut again) = (Vec::new(), Vec::new());
        for key in first.into_iter().chain(fresh) {
            if share.spent() {
                skipped_first.push(key);
                continue;
            }
            let before = share;
            if self.write_some(key, &mut share, now) == WriteOutcome::Budget {
                again.push(key);
            }
            turn.charge(before, share);
        }
        let mut skipped = Vec::new();
        for key in carried {
            if turn.spent() {
                skipped.push(key);
                continue;
            }
            if self.write_some(key, &mut turn, now) == WriteOutcome::Budget {
                again.push(key);
            }
        }
        for key in skipped.into_iter().chain(skipped_first).chain(again) {
            if let Some(Some(io)) = self.io.get_mut(key as usize) {
                io.carried = true;
                self.write_carry.push_back(key);
            }
        }
    }

    /// Writes queued output of `key` until it is empty, the socket is full,
    /// `WRITE_BUDGET_BYTES` went out or `budget` is spent (which it is
    /// charged); returns how it stopped.
    fn write_some(&mut self, key: u32, budget: &mut Budget, now: Instant) -> WriteOutcome {
        let Some(Some(io)) = self.io.get_mut(key as usize) else {
            return WriteOutcome::Done;
        };
        io.carried = false;
        if !io.writable {
            return WriteOutcome::Done;
        }
        if io.tls.is_some() {
            return self.write_some_tls(key, budget, now);
        }
        let mut written = 0;
        loop {
            let Some(out) = self.hub.out(key) else {
                return WriteOutcome::Done;
            };
            if out.is_empty() {
                return WriteOutcome::Done;
            }
            if written >= WRITE_BUDGET_BYTES || budget.spent() {
                return WriteOutcome::Budget;
            }
            let mut iov = [IoSlice::new(&[]); MAX_IOVECS];
            let n = out.fill(&mut iov, (WRITE_BUDGET_BYTES - written).min(budget.bytes));
            budget.writes -= 1;
            match io.stream.write_vectored(&iov[..n]) {
                Ok(0) => {
                    self.hub.close(key, CloseReason::Reset, now);
                    return WriteOutcome::Done;
                }
                Ok(w) => {
                    written += w;
                    budget.bytes = budget.bytes.saturating_sub(w);
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

    /// [`Server::write_some`] on a TLS connection: ciphertext rustls holds
    /// goes first; plaintext moves from the hub's queue into rustls, at
    /// most [`TLS_WRITE_CHUNK_BYTES`] at a time, only once that is all
    /// written, and counts as written (`Hub::wrote`) as it moves (see
    /// `tls.rs`). Budgets count ciphertext and `write` calls.
    fn write_some_tls(&mut self, key: u32, budget: &mut Budget, now: Instant) -> WriteOutcome {
        let Some(Some(io)) = self.io.get_mut(key as usize) else {
            return WriteOutcome::Done;
        };
        let Some(tls) = io.tls.as_mut() else {
            return WriteOutcome::Done;
        };
        let mut written = 0;
        loop {
            if tls.wants_write() {
                if written >= WRITE_BUDGET_BYTES || budget.spent() {
                    return WriteOutcome::Budget;
                }
                budget.writes -= 1;
                match tls.write_to(&mut io.stream) {
                    Ok(0) => {
                        self.hub.close(key, CloseReason::Reset, now);
                        return WriteOutcome::Done;
                    }
                    Ok(w) => {
                        written += w;
                        budget.bytes = budget.bytes.saturating_sub(w);
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
                continue;
            }
            // Nothing of the hub's is sent before the handshake completes,
            // nor after a TLS error (its alert is the last thing sent).
            if !tls.can_send() {
                return WriteOutcome::Done;
            }
            let Some(out) = self.hub.out(key) else {
                return WriteOutcome::Done;
            };
            if out.is_empty() {
                return WriteOutcome::Done;
            }
            if written >= WRITE_BUDGET_BYTES || budget.spent() {
                return WriteOutcome::Budget;
            }
            let mut iov = [IoSlice::new(&[]); MAX_IOVECS];
            let n = out.fill(&mut iov, TLS_WRITE_CHUNK_BYTES);
            let moved = tls.encrypt(&iov[..n]);
            if moved == 0 {
                return WriteOutcome::Done;
            }
            self.hub.wrote(key, moved, now);
        }
    }

    /// A closing TLS connection's last words: what the hub queued (up to
    /// `WRITE_BUDGET_BYTES`, once the handshake completed), then
    /// `close_notify`, after any ciphertext rustls already holds (an
    /// alert), with one `write` call if the socket takes it now. As on a
    /// plain connection, what the socket does not take is dropped with it:
    /// for a reader that fell behind, up to one chunk more than plain.
    fn tls_last_words(&mut self, key: u32, now: Instant) {
        let Some(Some(io)) = self.io.get_mut(key as usize) else {
            return;
        };
        let Some(tls) = io.tls.as_mut() else {
            return;
        };
        if !io.writable {
            return;
        }
        if tls.can_send() {
            if let Some(out) = self.hub.out(key).filter(|o| !o.is_empty()) {
                tls.raise_limit(WRITE_BUDGET_BYTES + TLS_WRITE_CHUNK_BYTES);
                let mut iov = [IoSlice::new(&[]); MAX_IOVECS];
                let n = out.fill(&mut iov, WRITE_BUDGET_BYTES);
                let moved = tls.encrypt(&iov[..n]);
                if moved > 0 {
                    self.hub.wrote(key, moved, now);
                }
            }
        }
        tls.close();
        let _ = tls.write_to(&mut io.stream);
    }

    /// Frees connections marked closed, oldest first, until `budget` work
    /// ([`Hub::free`]'s measure) is done; the rest wait in `free_backlog`
    /// for the next turn (their sockets are already deregistered, and the
    /// hub ignores them).
    fn free_closed(&mut self, now: Instant, keys: &mut Vec<u32>, budget: usize) {
        let mut work = 0;
        loop {
            self.hub.take_closing(keys);
            for &key in keys.iter() {
                // Last words (an error status, a rejection) go out if the
                // socket takes them right now; nobody waits for them.
                if self
                    .io
                    .get(key as usize)
                    .is_some_and(|s| s.as_ref().is_some_and(|io| io.tls.is_some()))
                {
                    self.tls_last_words(key, now);
                } else {
                    let _ = self.write_some(key, &mut Budget::last_words(), now);
                }
                if let Some(slot) = self.io.get_mut(key as usize) {
                    if let Some(mut io) = slot.take() {
                        let _ = self.poll.registry().deregister(&mut io.stream);
                    }
                }
                self.free_backlog.push_back(key);
            }
            if self.free_backlog.is_empty() {
                return;
            }
            while work < budget {
                let Some(key) = self.free_backlog.pop_front() else {
                    break;
                };
                // Freeing may fail calls and queue output for others, or
                // close more connections: the outer loop picks those up.
                match self.hub.free_some(key, now, budget - work) {
                    Freed::Done(w) => {
                        work += w;
                        log!(Debug, "free conn={key}");
                    }
                    Freed::Partly(w) => {
                        work += w;
                        self.free_backlog.push_front(key);
                    }
                }
            }
            if work >= budget {
                return;
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
        self.free_closed(now, &mut scratch, usize::MAX);
        #[cfg(any(feature = "zenoh", feature = "dds"))]
        if let Some(p) = self.peers.take() {
            p.close();
        }
        if log::enabled(LogLevel::Info) {
            log::counters("stopped", &self.hub.stats_json());
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
enum ReadOutcome {
    Budget,
    Drained,
    Eof,
    Failed,
    /// A TLS error (the alert is queued).
    TlsFailed,
}

/// What is left of a write budget: bytes and `write` calls.
#[derive(Debug, Clone, Copy)]
struct Budget {
    bytes: usize,
    writes: usize,
}

impl Budget {
    /// One loop turn's.
    fn turn() -> Budget {
        Budget {
            bytes: WRITE_TURN_BUDGET_BYTES,
            writes: WRITE_TURN_CALLS,
        }
    }

    /// A closing connection's last words: whatever one call takes.
    fn last_words() -> Budget {
        Budget {
            bytes: WRITE_BUDGET_BYTES,
            writes: 1,
        }
    }

    fn half(&self) -> Budget {
        Budget {
            bytes: self.bytes / 2,
            writes: self.writes / 2,
        }
    }

    fn spent(&self) -> bool {
        self.bytes == 0 || self.writes == 0
    }

    /// Charges this budget with what a share of it spent going from
    /// `before` to `after`.
    fn charge(&mut self, before: Budget, after: Budget) {
        self.bytes = self.bytes.saturating_sub(before.bytes - after.bytes);
        self.writes = self.writes.saturating_sub(before.writes - after.writes);
    }
}

#[derive(Debug, PartialEq, Eq)]
enum WriteOutcome {
    Done,
    Budget,
}

/// Drops the trailing empty slots of the socket table (slab keys are
/// reused from the lowest, so a crowd that left leaves them at the end).
fn shrink_io(io: &mut Vec<Option<Io>>) {
    while io.last().is_some_and(Option::is_none) {
        io.pop();
    }
    if io.capacity() > 2 * io.len() + 64 {
        io.shrink_to_fit();
    }
}

/// Binds a listener with our backlog instead of mio's 128: listening again
/// on a listening socket only updates its backlog.
/// The types the gateway knows: the bundled packages plus every
/// `--interfaces` directory (bounded where they are read, in
/// `rosgate_ros2::registry`), checked whole before anything is bound.
fn interface_types(dirs: &[std::path::PathBuf]) -> io::Result<std::sync::Arc<Registry>> {
    if dirs.is_empty() {
        return Ok(Registry::bundled_shared());
    }
    let mut r = Registry::bundled();
    for dir in dirs {
        r.load_dir(dir)
            .map_err(|e| io::Error::other(format!("--interfaces {}: {e}", dir.display())))?;
    }
    r.check()
        .map_err(|e| io::Error::other(format!("--interfaces: {e}")))?;
    Ok(std::sync::Arc::new(r))
}

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
/// Frames and buffers below [`MMAP_THRESHOLD`] come from the heap: good
/// while they stream, since pages are reused instead of faulted in for
/// every message, but the memory stays in RSS afterwards. Trimming after
/// traffic, at most once per [`TRIM_INTERVAL`], gives it back without
/// costing the hot path.
fn trim_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory; no pointer is involved.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Bytes. A new connection's first read, before its cost is known.
const FIRST_READ_BYTES: usize = 512;

/// Bytes to read from a connection whose input costs `work_per_kib`, with
/// `deficit` work it may spend: a whole [`READ_CHUNK_BYTES`] for cheap
/// input, down to 256 bytes (a few lines); `None` when even that would
/// cost more than the deficit, unless the deficit is full.
fn chunk_for(work_per_kib: Option<u64>, deficit: u64) -> Option<usize> {
    const MIN: u64 = 256;
    // Unknown (a new connection): a first read small enough that even a
    // publish to thousands of subscribers costs little, to learn from.
    let Some(work_per_kib) = work_per_kib else {
        return Some(FIRST_READ_BYTES);
    };
    if work_per_kib == 0 {
        return Some(READ_CHUNK_BYTES);
    }
    // A full deficit always reads something: however costly the estimate,
    // a connection is never starved.
    if deficit < READ_TURN_WORK && work_per_kib * MIN / 1024 > deficit {
        return None;
    }
    let n = deficit.saturating_mul(1024) / work_per_kib;
    Some((n as usize).clamp(MIN as usize, READ_CHUNK_BYTES))
}

/// Work the hub did so far (see `Hub::work`).
fn hub_work(hub: &Hub) -> u64 {
    hub.work()
}

/// Caps the bytes the kernel holds unsent for one socket
/// (`TCP_NOTSENT_LOWAT`, [`UNSENT_LOWAT_BYTES`]): the socket reports
/// writable, and takes more, only below it. Without it the kernel accepts up
/// to `tcp_wmem`'s 4 MiB per socket from a client that never reads, and
/// 10 000 of them drove the kernel's TCP memory into pressure, where every
/// socket, a healthy client's too, stalled for seconds (stress
/// `fanoutstart`). Data in flight is not "unsent", so a fast consumer's
/// window, and throughput, are unaffected; the backlog stays in the
/// gateway's own queue, where the per-connection limit and the memory
/// budget govern it.
fn limit_unsent(stream: &TcpStream) {
    use std::os::fd::AsRawFd;
    let v = UNSENT_LOWAT_BYTES as libc::c_int;
    // SAFETY: setsockopt reads `v` for the given length; the fd is ours.
    unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_NOTSENT_LOWAT,
            std::ptr::addr_of!(v).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

/// See [`MMAP_THRESHOLD`] (glibc only).
/// Bytes. glibc's `M_TRIM_THRESHOLD`: see [`set_mmap_threshold`].
const TRIM_THRESHOLD: usize = 8 * 1024 * 1024;

fn set_mmap_threshold() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes an allocator tunable.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD as libc::c_int);
        // A fixed mmap threshold also fixes the trim threshold at 128 KiB,
        // and then every free of a streamed 1 MiB frame at the top of the
        // heap gave its pages back, to be faulted in again for the next
        // (large-message throughput halved). The periodic `trim_heap`
        // returns memory instead.
        libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD as libc::c_int);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_sized_by_cost_and_never_starve() {
        assert_eq!(
            chunk_for(None, 0),
            Some(FIRST_READ_BYTES),
            "unknown: a small first read"
        );
        assert_eq!(chunk_for(Some(0), 0), Some(READ_CHUNK_BYTES), "free input");
        // 1000 work per KiB with 500 to spend: half a KiB.
        assert_eq!(chunk_for(Some(1000), 500), Some(512));
        // 256 bytes would cost 25 000: wait for more deficit...
        assert_eq!(chunk_for(Some(100_000), 1_000), None);
        // ...but a full deficit always reads the minimum, whatever the estimate.
        assert_eq!(chunk_for(Some(u64::MAX / 2048), READ_TURN_WORK), Some(256));
    }
}
