//! `Hub`: the sans-io core. Bytes and `now` in, queued frames and close
//! decisions out. It owns the connection slab, the router, the call table
//! and the timer wheel; it never touches a socket or reads the clock.
//!
//! The I/O shell (`server.rs`) drives it:
//! 1. `open` for each accepted socket, `on_bytes` for what was read,
//!    `on_eof`/`close` when the peer goes away or I/O fails;
//! 2. `expire(now)` once per loop turn (call deadlines, write stalls);
//! 3. `take_dirty` then `out`/`wrote` to flush queued output;
//! 4. `take_closing` then `free` for connections marked closed.
//!
//! Invariants:
//! - closes are deferred: `close` only marks; `free` withdraws the
//!   connection's registrations, fails the calls waiting on it, forgets the
//!   calls it made and releases the slab slot (P13, P14, cleanup);
//! - every call gets exactly one response: answered, or failed by missing
//!   provider, provider gone, unadvertise, timeout or the in-flight limit;
//!   the caller's original id bytes are used, and a response completes a call
//!   only when it comes from the very connection the call was forwarded to;
//! - a publish is encoded once and its bytes shared by all subscribers;
//! - a slow subscriber never blocks anyone: topic frames are shed (P5),
//!   control overflow closes only that connection (P6).

mod batch;
mod services;
mod topics;
mod websocket;

use std::time::{Duration, Instant};

use crate::codec::Raw;
use slab::Slab;

pub use services::CallFailure;

use crate::calls::CallTable;
use crate::codec::decode::{self, DecodeError, Op, Request};
use crate::codec::encode::{self, Level};
use crate::config::{Limits, CLOSE_LOGS_PER_SEC, TIMER_TICK_MS};
use crate::conn::{CloseReason, Conn, ConnRef, Input, StatusFilter, Transport};
use crate::line::Frame;
use crate::log;
use crate::router::Router;
use crate::stats::{Gauges, ProtocolError, Stats};
use topics::Role;

/// Names under this prefix are the gateway's own services.
pub const RESERVED_PREFIX: &str = "/rosgate/";
/// The built-in statistics service.
pub const STATS_SERVICE: &str = "/rosgate/stats";

/// See the module docs.
#[derive(Debug)]
pub struct Hub {
    limits: Limits,
    conns: Slab<Conn>,
    next_gen: u32,
    router: Router,
    calls: CallTable,
    timers: crate::timer::TimerWheel,
    stats: Stats,
    /// Connections with output queued since the last `take_dirty`.
    dirty: Vec<u32>,
    /// Connections marked closed since the last `take_closing`.
    closing: Vec<u32>,
    /// Reused frame-building buffer.
    scratch: Vec<u8>,
    next_sweep: Instant,
    close_log: RateLimit,
    /// Statuses sent to WebSocket clients (`--ws-status`).
    ws_status: StatusFilter,
    /// Publishes read but not yet queued to subscribers (same turn).
    batch: batch::PublishBatch,
}

impl Hub {
    pub fn new(limits: Limits, now: Instant) -> Self {
        Hub {
            timers: crate::timer::TimerWheel::new(now, Duration::from_millis(TIMER_TICK_MS), 512),
            next_sweep: now + sweep_interval(&limits),
            limits,
            conns: Slab::new(),
            next_gen: 0,
            router: Router::new(),
            calls: CallTable::new(),
            stats: Stats::default(),
            dirty: Vec::new(),
            closing: Vec::new(),
            scratch: Vec::with_capacity(4096),
            close_log: RateLimit::default(),
            ws_status: StatusFilter::Errors,
            batch: batch::PublishBatch::default(),
        }
    }

    /// Which statuses WebSocket connections opened from now on receive.
    pub fn set_ws_status(&mut self, filter: StatusFilter) {
        self.ws_status = filter;
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    pub fn stats_mut(&mut self) -> &mut Stats {
        &mut self.stats
    }

    pub fn router(&self) -> &Router {
        &self.router
    }

    pub fn calls(&self) -> &CallTable {
        &self.calls
    }

    pub fn conn(&self, key: u32) -> Option<&Conn> {
        self.conns.get(key as usize)
    }

    pub fn conn_count(&self) -> usize {
        self.conns.len()
    }

    pub fn conn_keys(&self) -> impl Iterator<Item = u32> + '_ {
        self.conns.iter().map(|(k, _)| k as u32)
    }

    /// The handle of a live connection.
    pub fn conn_ref(&self, key: u32) -> Option<ConnRef> {
        self.conns
            .get(key as usize)
            .map(|c| ConnRef { key, gen: c.gen })
    }

    /// Gauges read from the tables.
    pub fn gauges(&self) -> Gauges {
        let (mut subscriptions, mut publishers) = (0, 0);
        for t in self.router.topics() {
            subscriptions += t.subscribers.len();
            publishers += t.publishers.len();
        }
        Gauges {
            connections_open: self.conns.len(),
            topics: self.router.topic_count(),
            subscriptions,
            publishers,
            services: self.router.service_count(),
            calls_pending: self.calls.len(),
            queued_bytes: self
                .conns
                .iter()
                .map(|(_, c)| c.out.topic_bytes() + c.out.control_bytes())
                .sum(),
        }
    }

    /// Counters and gauges as one JSON object.
    pub fn stats_json(&self) -> String {
        self.stats.to_json(&self.gauges())
    }

    // ----- connection life cycle -------------------------------------------------

    /// Admits a new connection, or refuses it when `max_connections` are open
    /// (the caller then writes [`Hub::rejection_frame`] and drops the socket).
    pub fn open(&mut self, now: Instant) -> Option<ConnRef> {
        self.open_as(Transport::Tcp, now)
    }

    /// `open` for a connection from the given listener.
    pub fn open_as(&mut self, transport: Transport, now: Instant) -> Option<ConnRef> {
        if self.conns.len() >= self.limits.max_connections {
            self.stats.connections_rejected += 1;
            self.stats.close(CloseReason::MaxConnections);
            self.log_close(None, CloseReason::MaxConnections, now);
            return None;
        }
        self.next_gen = self.next_gen.wrapping_add(1);
        let gen = self.next_gen;
        let conn = Conn::new(gen, now, transport, self.ws_status);
        let key = self.conns.insert(conn) as u32;
        self.stats.connections_accepted += 1;
        Some(ConnRef { key, gen })
    }

    /// What a connection refused by `open` is sent before it is closed: an
    /// error status, or for a WebSocket client (which has not even finished
    /// its handshake) an HTTP 503.
    pub fn rejection_frame(&self, transport: Transport) -> Vec<u8> {
        let msg = format!(
            "too many connections (limit {}); try again later",
            self.limits.max_connections
        );
        match transport {
            Transport::Tcp => {
                let mut out = Vec::new();
                encode::status(&mut out, Level::Error, &msg, None);
                out
            }
            Transport::WebSocket => format!(
                "HTTP/1.1 503 Service Unavailable\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{msg}",
                msg.len()
            )
            .into_bytes(),
        }
    }

    /// Marks a connection closed; it is freed by `free` after this loop turn.
    pub fn close(&mut self, key: u32, reason: CloseReason, now: Instant) {
        let Some(c) = self.conns.get_mut(key as usize) else {
            return;
        };
        if c.closing.is_some() {
            return;
        }
        c.closing = Some(reason);
        self.closing.push(key);
        self.stats.close(reason);
        self.log_close(Some(key), reason, now);
    }

    fn log_close(&mut self, key: Option<u32>, reason: CloseReason, now: Instant) {
        let level = if reason.is_forced() {
            crate::config::LogLevel::Warn
        } else {
            crate::config::LogLevel::Debug
        };
        if !log::enabled(level) {
            return;
        }
        match self.close_log.admit(now) {
            Admit::Yes { suppressed } => {
                let conn = key.map_or("-".to_string(), |k| k.to_string());
                let extra = if suppressed > 0 {
                    format!(" ({suppressed} close lines suppressed)")
                } else {
                    String::new()
                };
                log::write(
                    level,
                    format_args!("close conn={conn} reason={}{extra}", reason.label()),
                );
            }
            Admit::No => {}
        }
    }

    /// The peer closed its sending side. A final line without `\n` is
    /// ignored, as the protocol frames requests by newline.
    pub fn on_eof(&mut self, key: u32, now: Instant) {
        self.close(key, CloseReason::PeerClosed, now);
    }

    /// Connections marked closed since the last call.
    pub fn take_closing(&mut self, into: &mut Vec<u32>) {
        into.clear();
        std::mem::swap(into, &mut self.closing);
    }

    /// Withdraws everything `key` owned and frees its slot.
    pub fn free(&mut self, key: u32, now: Instant) {
        let Some(conn) = self.conns.get_mut(key as usize) else {
            return;
        };
        let me = ConnRef { key, gen: conn.gen };
        if conn.closing.is_none() {
            conn.closing = Some(CloseReason::Shutdown);
        }
        let subs = std::mem::take(&mut conn.subs);
        let pubs = std::mem::take(&mut conn.pubs);
        let services = std::mem::take(&mut conn.services);
        let made = std::mem::take(&mut conn.calls_made);
        let served = std::mem::take(&mut conn.calls_served);
        for t in subs {
            self.router.unsubscribe(t, me);
        }
        for t in pubs {
            self.router.unadvertise(t, me);
        }
        for s in services.iter() {
            self.router.unadvertise_service(s, me);
        }
        // Calls it made: forget them; the providers' late answers are stale.
        for seq in made {
            self.take_call(seq);
        }
        // Calls waiting on it: fail them now (P13).
        for seq in served {
            self.fail_call(seq, CallFailure::ProviderGone, now);
        }
        self.conns.remove(key as usize);
    }

    // ----- input ---------------------------------------------------------------

    /// Feeds bytes read from `key`'s socket: frames them into messages and
    /// handles each.
    pub fn on_bytes(&mut self, key: u32, bytes: &[u8], now: Instant) {
        self.stats.bytes_in += bytes.len() as u64;
        let Some(conn) = self.conns.get_mut(key as usize) else {
            return;
        };
        if conn.closing.is_some() {
            return;
        }
        let me = ConnRef { key, gen: conn.gen };
        // Taken out for the duration so handlers can borrow the hub; an
        // empty `LineReader` in its place allocates nothing.
        let input = std::mem::replace(&mut conn.input, Input::Lines(Default::default()));
        let input = match input {
            Input::Lines(mut reader) => {
                let max = self.limits.max_line_bytes;
                reader.feed(bytes, max, |frame| match frame {
                    Frame::Line(line) => self.on_message(me, line, now),
                    Frame::TooLong => self.too_long(me, now),
                });
                Input::Lines(reader)
            }
            Input::WebSocket(mut reader) => {
                self.on_ws_bytes(me, &mut reader, bytes, now);
                Input::WebSocket(reader)
            }
        };
        if let Some(conn) = self.conns.get_mut(key as usize) {
            if conn.gen == me.gen {
                conn.input = input;
            }
        }
        self.flush_publishes(now);
    }

    fn too_long(&mut self, me: ConnRef, now: Instant) {
        self.flush_publishes(now);
        self.stats.protocol_error(ProtocolError::TooLong);
        let msg = format!(
            "message longer than {} bytes; discarded",
            self.limits.max_line_bytes
        );
        self.send_status(me, Level::Error, &msg, None, now);
    }

    /// Handles one complete message (a line without its terminator).
    pub(crate) fn on_message(&mut self, me: ConnRef, line: &[u8], now: Instant) {
        if self.live_mut(me).is_none() {
            return;
        }
        self.stats.lines_in += 1;
        let dialect = match self.conns.get(me.key as usize) {
            Some(c) => c.dialect,
            None => return,
        };
        // A raw CR or LF can only be JSON whitespace here (raw control
        // characters are invalid inside strings), but forwarded inside a
        // payload span it would split the frame for NDJSON readers and let
        // one client forge lines for another. Blank them out first; lines
        // without either (nearly all) are not copied.
        let mut blanked = Vec::new();
        let line = if memchr::memchr2(b'\n', b'\r', line).is_some() {
            blanked.extend(
                line.iter()
                    .map(|&b| if b == b'\n' || b == b'\r' { b' ' } else { b }),
            );
            &blanked[..]
        } else {
            line
        };
        match decode::decode_as(line, dialect) {
            Ok(req) => {
                if !matches!(req.op, Op::Publish { .. }) {
                    // Anything else may be observed after the publishes
                    // before it: deliver them first.
                    self.flush_publishes(now);
                }
                self.apply(me, req, now)
            }
            Err(e) => {
                self.flush_publishes(now);
                self.reject(me, &e, now)
            }
        }
    }

    /// Sends the error status for a refused line.
    fn reject(&mut self, me: ConnRef, e: &DecodeError<'_>, now: Instant) {
        self.stats.decode_error(e.kind);
        let msg = e.to_string();
        self.send_status(
            me,
            Level::Error,
            &msg,
            e.id.map(|r| r.get().as_bytes()),
            now,
        );
    }

    /// Sends a protocol error status and counts it.
    pub fn protocol_error(
        &mut self,
        me: ConnRef,
        e: ProtocolError,
        msg: &str,
        id: Option<Raw<'_>>,
        now: Instant,
    ) {
        self.stats.protocol_error(e);
        self.send_status(me, Level::Error, msg, id.map(|r| r.get().as_bytes()), now);
    }

    fn apply(&mut self, me: ConnRef, req: Request<'_>, now: Instant) {
        let id = req.id.map(|r| r.get().as_bytes());
        match req.op {
            Op::Publish { topic, msg } => self.publish(&topic, msg, now),
            Op::Subscribe { topic, .. } => self.register(me, Role::Subscriber, &topic, id, now),
            Op::Unsubscribe { topic } => self.unregister(me, Role::Subscriber, &topic, id, now),
            Op::Advertise { topic, .. } => self.register(me, Role::Publisher, &topic, id, now),
            Op::Unadvertise { topic } => self.unregister(me, Role::Publisher, &topic, id, now),
            Op::AdvertiseService { service, ty } => {
                self.advertise_service(me, &service, ty.as_deref().unwrap_or(""), req.id, now)
            }
            Op::UnadvertiseService { service } => {
                self.unadvertise_service(me, &service, req.id, now)
            }
            Op::CallService {
                service,
                args,
                timeout,
            } => self.call_service(me, &service, args, id, timeout, now),
            Op::ServiceResponse {
                values,
                result,
                status,
                ..
            } => self.service_response(me, req.id, values, result, status, now),
            Op::Ignored(_) => {}
        }
    }

    // ----- output ----------------------------------------------------------------

    pub(crate) fn live(&self, r: ConnRef) -> bool {
        self.conns
            .get(r.key as usize)
            .is_some_and(|c| c.gen == r.gen && c.closing.is_none())
    }

    pub(crate) fn live_mut(&mut self, r: ConnRef) -> Option<&mut Conn> {
        self.conns
            .get_mut(r.key as usize)
            .filter(|c| c.gen == r.gen && c.closing.is_none())
    }

    pub(crate) fn send_status(
        &mut self,
        to: ConnRef,
        level: Level,
        msg: &str,
        id: Option<&[u8]>,
        now: Instant,
    ) {
        let wanted = match self.conns.get(to.key as usize).map(|c| c.statuses) {
            Some(StatusFilter::All) => true,
            Some(StatusFilter::Errors) => level == Level::Error,
            Some(StatusFilter::None) | None => false,
        };
        if !wanted {
            return;
        }
        let mut out = Vec::with_capacity(64 + msg.len());
        encode::status(&mut out, level, msg, id);
        self.send_control(to, &out, now);
    }

    /// Queues control bytes (whole JSON lines); closes the connection past
    /// its control limit (P6).
    pub(crate) fn send_control(&mut self, to: ConnRef, bytes: &[u8], now: Instant) {
        self.enqueue_control(to, bytes, false, now);
    }

    /// Queues bytes to go out exactly as given (WebSocket handshake and
    /// control frames).
    pub(crate) fn send_raw(&mut self, to: ConnRef, bytes: &[u8], now: Instant) {
        self.enqueue_control(to, bytes, true, now);
    }

    fn enqueue_control(&mut self, to: ConnRef, bytes: &[u8], raw: bool, now: Instant) {
        let cap = self.limits.max_control_bytes;
        let Some(c) = self.live_mut(to) else { return };
        if c.out.is_empty() {
            c.out_since = now;
        }
        let queued = if raw {
            c.out.push_raw(bytes)
        } else {
            c.out.push_control(bytes)
        };
        let newly_dirty = !c.dirty;
        c.dirty = true;
        if newly_dirty {
            self.dirty.push(to.key);
        }
        if queued > cap {
            self.close(to.key, CloseReason::ControlOverflow, now);
        }
    }

    /// Connections with output queued since the last call.
    pub fn take_dirty(&mut self, into: &mut Vec<u32>) {
        into.clear();
        std::mem::swap(into, &mut self.dirty);
        for &k in into.iter() {
            if let Some(c) = self.conns.get_mut(k as usize) {
                c.dirty = false;
            }
        }
    }

    /// True when some connection has output waiting for a flush.
    pub fn has_dirty(&self) -> bool {
        !self.dirty.is_empty()
    }

    /// Marks `key` as having output to flush (the shell uses this for
    /// connections whose previous flush stopped on its budget).
    pub fn mark_dirty(&mut self, key: u32) {
        if let Some(c) = self.conns.get_mut(key as usize) {
            if !c.dirty {
                c.dirty = true;
                self.dirty.push(key);
            }
        }
    }

    /// The output queue of `key`, for the shell to write from.
    pub fn out(&self, key: u32) -> Option<&crate::out::OutQueue> {
        self.conns.get(key as usize).map(|c| &c.out)
    }

    /// Records that `n` bytes of `key`'s output were written.
    pub fn wrote(&mut self, key: u32, n: usize, now: Instant) {
        self.stats.bytes_out += n as u64;
        if let Some(c) = self.conns.get_mut(key as usize) {
            c.out.consume(n);
            if n > 0 {
                c.out_since = now;
            }
        }
    }

    // ----- time ------------------------------------------------------------------

    /// Expires due calls and closes connections whose writes stalled.
    pub fn expire(&mut self, now: Instant) {
        let mut due = Vec::new();
        self.timers.expire(now, |seq| due.push(seq));
        for seq in due {
            if self.calls.get(seq).is_some_and(|c| c.deadline <= now) {
                self.fail_call(seq, CallFailure::Timeout, now);
            }
        }
        if now >= self.next_sweep {
            self.next_sweep = now + sweep_interval(&self.limits);
            // Answered calls leave their (lazily cancelled) timer entries
            // behind until their deadline; with long per-call timeouts and
            // a high call rate they would pile up. Compact when stale
            // entries dominate: amortised O(1) per call.
            if self.timers.len() > 2 * self.calls.len() + TIMER_COMPACT_SLACK {
                let calls = &self.calls;
                self.timers.retain(|seq| calls.get(seq).is_some());
            }
            let stall = self.limits.write_stall;
            let mut stalled = Vec::new();
            for (k, c) in self.conns.iter_mut() {
                match &mut c.input {
                    Input::Lines(r) => r.trim(),
                    Input::WebSocket(r) => r.trim(),
                }
                if c.out.is_empty() {
                    // Idle since the last sweep or not, its ring can go;
                    // a busy one regrows it only once per sweep at most.
                    c.out.trim();
                } else if c.closing.is_none() && now.saturating_duration_since(c.out_since) >= stall
                {
                    stalled.push(k as u32);
                }
            }
            for k in stalled {
                self.close(k, CloseReason::WriteStall, now);
            }
        }
    }

    /// The earliest instant at which `expire` has work to do.
    pub fn next_deadline(&self) -> Instant {
        match self.timers.next_deadline() {
            Some(t) => t.min(self.next_sweep),
            None => self.next_sweep,
        }
    }
}

/// Stale timer entries tolerated beyond twice the live calls before the
/// sweep compacts the wheel.
const TIMER_COMPACT_SLACK: usize = 1024;

/// How often write stalls are checked: often enough to close a stalled
/// connection within a quarter of `write_stall` late, at most once a second.
fn sweep_interval(limits: &Limits) -> Duration {
    (limits.write_stall / 4).clamp(Duration::from_millis(10), Duration::from_secs(1))
}

#[derive(Debug, Default)]
struct RateLimit {
    window_start: Option<Instant>,
    in_window: u32,
    suppressed: u64,
}

enum Admit {
    Yes { suppressed: u64 },
    No,
}

impl RateLimit {
    fn admit(&mut self, now: Instant) -> Admit {
        let fresh = self
            .window_start
            .is_none_or(|s| now.saturating_duration_since(s) >= Duration::from_secs(1));
        if fresh {
            self.window_start = Some(now);
            self.in_window = 0;
        }
        if self.in_window < CLOSE_LOGS_PER_SEC {
            self.in_window += 1;
            let suppressed = std::mem::take(&mut self.suppressed);
            Admit::Yes { suppressed }
        } else {
            self.suppressed += 1;
            Admit::No
        }
    }
}

#[cfg(test)]
mod tests;
