//! `Hub`: the sans-io core. Bytes and `now` in, queued frames and close
//! decisions out. It owns the connection slab and the owners of every
//! other table: the [`Registry`] (topics, services), the [`Calls`] (calls in
//! flight and their deadlines) and the [`Counters`]; it never touches a
//! socket or reads the clock.
//!
//! The I/O shell (the `rosgate` crate's `server.rs`) drives it:
//! 1. `open_as` for each accepted socket, `on_bytes` for what was read,
//!    `on_eof`/`close` when the peer goes away or I/O fails;
//! 2. `expire(now)` once per loop turn (call deadlines, write stalls);
//! 3. `take_dirty` then `out`/`wrote` to flush queued output;
//! 4. `take_closing` then `free` for connections marked closed.
//!
//! Invariants:
//! - closes are deferred: `close` only marks; `free` asks each owner to
//!   drop the connection (`Registry::withdraw`, `Calls::drop_conn`), fails
//!   the calls waiting on it and releases the slab slot (P13, P14, cleanup);
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

use std::time::{Duration, Instant};

use slab::Slab;

use rosgate_wire::decode::{self, DecodeError, Op, Request};
use rosgate_wire::encode::Level;
use rosgate_wire::Raw;

pub use services::CallFailure;

use crate::calls::Calls;
use crate::conn::{CloseReason, Conn, ConnRef};
use crate::counters::{Counter, Counters, ErrorCode, Gauge, Gauges};
use crate::limits::{Limits, CLOSE_LOGS_PER_SEC};
use crate::log::{self, LogLevel};
use crate::out::OutQueue;
use crate::ratelimit::{Admit, RateLimit};
use crate::registry::{Registry, Role};
use crate::transport::{Inbound, StatusFilter, Transport};

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
    registry: Registry,
    calls: Calls,
    counters: Counters,
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
            calls: Calls::new(now),
            next_sweep: now + sweep_interval(&limits),
            limits,
            conns: Slab::new(),
            next_gen: 0,
            registry: Registry::new(),
            counters: Counters::default(),
            dirty: Vec::new(),
            closing: Vec::new(),
            scratch: Vec::with_capacity(4096),
            close_log: RateLimit::new(CLOSE_LOGS_PER_SEC),
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

    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Counts an event the shell observed (accept errors).
    pub fn count(&mut self, c: Counter) {
        self.counters.inc(c);
    }

    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    pub fn calls(&self) -> &Calls {
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
            .map(|c| ConnRef { key, gen: c.gen() })
    }

    /// Gauges read from the tables.
    pub fn gauges(&self) -> Gauges {
        let mut g = Gauges::default();
        g.set(Gauge::ConnectionsOpen, self.conns.len() as u64);
        g.set(Gauge::Topics, self.registry.topic_count() as u64);
        g.set(
            Gauge::Subscriptions,
            self.registry.subscription_count() as u64,
        );
        g.set(Gauge::Publishers, self.registry.publisher_count() as u64);
        g.set(Gauge::Services, self.registry.service_count() as u64);
        g.set(Gauge::CallsPending, self.calls.len() as u64);
        let queued: usize = self
            .conns
            .iter()
            .map(|(_, c)| c.out().topic_bytes() + c.out().control_bytes())
            .sum();
        g.set(Gauge::QueuedBytes, queued as u64);
        g
    }

    /// Counters and gauges as one JSON object.
    pub fn stats_json(&self) -> String {
        self.counters.to_json(&self.gauges())
    }

    // ----- connection life cycle -------------------------------------------------

    /// Admits a new TCP connection (see [`Hub::open_as`]).
    pub fn open(&mut self, now: Instant) -> Option<ConnRef> {
        self.open_as(Transport::Tcp, now)
    }

    /// Admits a connection from the given listener, or refuses it when
    /// `max_connections` are open (the caller then writes
    /// [`Hub::rejection_frame`] and drops the socket).
    pub fn open_as(&mut self, transport: Transport, now: Instant) -> Option<ConnRef> {
        if self.conns.len() >= self.limits.max_connections {
            self.counters.inc(Counter::ConnectionsRejected);
            self.counters.close(CloseReason::MaxConnections);
            self.log_close(None, CloseReason::MaxConnections, now);
            return None;
        }
        self.next_gen = self.next_gen.wrapping_add(1);
        let gen = self.next_gen;
        let conn = Conn::new(gen, now, transport, self.ws_status);
        let key = self.conns.insert(conn) as u32;
        self.counters.inc(Counter::ConnectionsAccepted);
        Some(ConnRef { key, gen })
    }

    /// What a connection refused by `open_as` is sent before it is closed.
    pub fn rejection_frame(&self, transport: Transport) -> Vec<u8> {
        let msg = format!(
            "too many connections (limit {}); try again later",
            self.limits.max_connections
        );
        transport.refusal(503, "Service Unavailable", &msg)
    }

    /// Marks a connection closed; it is freed by `free` after this loop turn.
    pub fn close(&mut self, key: u32, reason: CloseReason, now: Instant) {
        let Some(c) = self.conns.get_mut(key as usize) else {
            return;
        };
        if !c.mark_closing(reason) {
            return;
        }
        self.closing.push(key);
        self.counters.close(reason);
        self.log_close(Some(key), reason, now);
    }

    fn log_close(&mut self, key: Option<u32>, reason: CloseReason, now: Instant) {
        let level = if reason.is_forced() {
            LogLevel::Warn
        } else {
            LogLevel::Debug
        };
        if !log::enabled(level) {
            return;
        }
        if let Admit::Yes { suppressed } = self.close_log.admit(now) {
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
        let me = ConnRef {
            key,
            gen: conn.gen(),
        };
        conn.mark_closing(CloseReason::Shutdown);
        self.registry.withdraw(me);
        // Calls it made are forgotten (the providers' late answers are
        // stale); calls waiting on it fail now (P13).
        for call in self.calls.drop_conn(me) {
            self.fail_call(call, CallFailure::ProviderGone, now);
        }
        self.conns.remove(key as usize);
    }

    // ----- input ---------------------------------------------------------------

    /// Feeds bytes read from `key`'s socket: its transport frames them into
    /// messages, and each is handled in order.
    pub fn on_bytes(&mut self, key: u32, bytes: &[u8], now: Instant) {
        self.counters.add(Counter::BytesIn, bytes.len() as u64);
        let Some(conn) = self.conns.get_mut(key as usize) else {
            return;
        };
        if !conn.is_open() {
            return;
        }
        let me = ConnRef {
            key,
            gen: conn.gen(),
        };
        // Taken out for the duration so handlers can borrow the hub.
        let mut link = conn.take_link();
        let max = self.limits.max_line_bytes;
        link.feed(bytes, max, |event| self.on_inbound(me, event, now));
        if let Some(conn) = self.conns.get_mut(key as usize) {
            if conn.gen() == me.gen {
                conn.restore_link(link);
            }
        }
        self.flush_publishes(now);
    }

    fn on_inbound(&mut self, me: ConnRef, event: Inbound<'_>, now: Instant) {
        if !matches!(event, Inbound::Message(_)) {
            // Keep transport replies in order with publishes read before.
            self.flush_publishes(now);
        }
        match event {
            Inbound::Message(msg) => self.on_message(me, msg, now),
            Inbound::TooLong => self.too_long(me, now),
            Inbound::Refused { code, msg } => {
                self.counters.inc(Counter::LinesIn);
                self.protocol_error(me, code, msg, None, now);
            }
            Inbound::Reply(bytes) => self.send_raw(me, &bytes, now),
            Inbound::Close {
                reason,
                last,
                detail,
            } => {
                if reason == CloseReason::ProtocolError {
                    log::write(LogLevel::Debug, format_args!("conn={}: {detail}", me.key));
                }
                if let Some(last) = last {
                    self.send_raw(me, &last, now);
                }
                self.close(me.key, reason, now);
            }
        }
    }

    /// Publishes `msg` (valid JSON, the caller vouches) on `topic` on behalf
    /// of the gateway itself or a bridge fed by another thread: delivered
    /// to every subscriber exactly as a client's publish would be.
    pub fn inject_publish(&mut self, topic: &str, msg: Raw<'_>, now: Instant) {
        self.flush_publishes(now);
        self.publish(topic, msg, now);
        self.flush_publishes(now);
    }

    fn too_long(&mut self, me: ConnRef, now: Instant) {
        self.flush_publishes(now);
        let msg = format!(
            "message longer than {} bytes; discarded",
            self.limits.max_line_bytes
        );
        self.protocol_error(me, ErrorCode::TooLong, &msg, None, now);
    }

    /// Handles one complete message (a line without its terminator).
    fn on_message(&mut self, me: ConnRef, line: &[u8], now: Instant) {
        let Some(dialect) = self.live_mut(me).map(|c| c.policy().dialect()) else {
            return;
        };
        self.counters.inc(Counter::LinesIn);
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
        let msg = e.to_string();
        self.protocol_error(me, e.kind.into(), &msg, e.id, now);
    }

    /// Sends an error status and counts it under `code`.
    pub(crate) fn protocol_error(
        &mut self,
        me: ConnRef,
        code: ErrorCode,
        msg: &str,
        id: Option<Raw<'_>>,
        now: Instant,
    ) {
        self.counters.error(code);
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
            .is_some_and(|c| c.gen() == r.gen && c.is_open())
    }

    pub(crate) fn live_mut(&mut self, r: ConnRef) -> Option<&mut Conn> {
        self.conns
            .get_mut(r.key as usize)
            .filter(|c| c.gen() == r.gen && c.is_open())
    }

    pub(crate) fn send_status(
        &mut self,
        to: ConnRef,
        level: Level,
        msg: &str,
        id: Option<&[u8]>,
        now: Instant,
    ) {
        let wanted = self
            .conns
            .get(to.key as usize)
            .is_some_and(|c| c.policy().wants_status(level));
        if !wanted {
            return;
        }
        let mut out = Vec::with_capacity(64 + msg.len());
        rosgate_wire::encode::status(&mut out, level, msg, id);
        self.send_control(to, &out, now);
    }

    /// Queues control bytes (whole JSON lines); closes the connection past
    /// its control limit (P6).
    pub(crate) fn send_control(&mut self, to: ConnRef, bytes: &[u8], now: Instant) {
        self.enqueue_control(to, bytes, false, now);
    }

    /// Queues bytes to go out exactly as given (transport replies).
    fn send_raw(&mut self, to: ConnRef, bytes: &[u8], now: Instant) {
        self.enqueue_control(to, bytes, true, now);
    }

    fn enqueue_control(&mut self, to: ConnRef, bytes: &[u8], raw: bool, now: Instant) {
        let cap = self.limits.max_control_bytes;
        let Some(c) = self.live_mut(to) else { return };
        let out = c.out_mut(now);
        let queued = if raw {
            out.push_raw(bytes)
        } else {
            out.push_control(bytes)
        };
        if c.set_dirty() {
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
                c.clear_dirty();
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
            if c.set_dirty() {
                self.dirty.push(key);
            }
        }
    }

    /// The output queue of `key`, for the shell to write from.
    pub fn out(&self, key: u32) -> Option<&OutQueue> {
        self.conns.get(key as usize).map(Conn::out)
    }

    /// Records that `n` bytes of `key`'s output were written.
    pub fn wrote(&mut self, key: u32, n: usize, now: Instant) {
        self.counters.add(Counter::BytesOut, n as u64);
        if let Some(c) = self.conns.get_mut(key as usize) {
            c.wrote(n, now);
        }
    }

    // ----- time ------------------------------------------------------------------

    /// Expires due calls and closes connections whose writes stalled.
    pub fn expire(&mut self, now: Instant) {
        for call in self.calls.expire(now) {
            self.fail_call(call, CallFailure::Timeout, now);
        }
        if now >= self.next_sweep {
            self.next_sweep = now + sweep_interval(&self.limits);
            self.calls.compact();
            let stall = self.limits.write_stall;
            let mut stalled = Vec::new();
            for (k, c) in self.conns.iter_mut() {
                c.link_mut().trim();
                if c.out().is_empty() {
                    // Idle since the last sweep or not, its ring can go;
                    // a busy one regrows it only once per sweep at most.
                    c.out_mut(now).trim();
                } else if c.is_open() && now.saturating_duration_since(c.out_since()) >= stall {
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
        match self.calls.next_deadline() {
            Some(t) => t.min(self.next_sweep),
            None => self.next_sweep,
        }
    }
}

/// How often write stalls are checked: often enough to close a stalled
/// connection within a quarter of `write_stall` late, at most once a second.
fn sweep_interval(limits: &Limits) -> Duration {
    (limits.write_stall / 4).clamp(Duration::from_millis(10), Duration::from_secs(1))
}

#[cfg(test)]
mod tests;
