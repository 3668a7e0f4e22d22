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

use std::rc::Rc;
use std::time::{Duration, Instant};

use serde_json::value::RawValue;
use slab::Slab;

use crate::calls::{parse_call_id, CallTable};
use crate::codec::decode::{self, DecodeError, Op, Request};
use crate::codec::encode::{self, Level};
use crate::config::{Limits, CLOSE_LOGS_PER_SEC, TIMER_TICK_MS};
use crate::conn::{CloseReason, Conn, ConnRef};
use crate::line::Frame;
use crate::log;
use crate::router::{Router, Unadvertised};
use crate::stats::{Gauges, ProtocolError, Stats};

/// Names under this prefix are the gateway's own services.
pub const RESERVED_PREFIX: &str = "/rosgate/";
/// The built-in statistics service.
pub const STATS_SERVICE: &str = "/rosgate/stats";

/// Why a call failed; each has a reason text and a counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallFailure {
    NoProvider,
    ProviderGone,
    Unadvertised,
    Timeout,
    TooMany,
}

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
        }
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
        if self.conns.len() >= self.limits.max_connections {
            self.stats.connections_rejected += 1;
            self.stats.close(CloseReason::MaxConnections);
            self.log_close(None, CloseReason::MaxConnections, now);
            return None;
        }
        self.next_gen = self.next_gen.wrapping_add(1);
        let gen = self.next_gen;
        let key = self.conns.insert(Conn::new(gen, now)) as u32;
        self.stats.connections_accepted += 1;
        Some(ConnRef { key, gen })
    }

    /// The error status sent to a connection refused by `open`.
    pub fn rejection_frame(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let msg = format!(
            "too many connections (limit {}); try again later",
            self.limits.max_connections
        );
        encode::status(&mut out, Level::Error, &msg, None);
        out
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
            if let Some(call) = self.calls.remove(seq) {
                if let Some(p) = self.live_mut(call.provider) {
                    p.calls_served.remove(&seq);
                }
            }
        }
        // Calls waiting on it: fail them now (P13).
        for seq in served {
            self.fail_call(seq, CallFailure::ProviderGone, now);
        }
        self.conns.remove(key as usize);
    }

    // ----- input ---------------------------------------------------------------

    /// Feeds bytes read from `key`'s socket: frames lines and handles each.
    pub fn on_bytes(&mut self, key: u32, bytes: &[u8], now: Instant) {
        self.stats.bytes_in += bytes.len() as u64;
        let Some(conn) = self.conns.get_mut(key as usize) else {
            return;
        };
        if conn.closing.is_some() {
            return;
        }
        let me = ConnRef { key, gen: conn.gen };
        let mut reader = std::mem::take(&mut conn.reader);
        let max = self.limits.max_line_bytes;
        reader.feed(bytes, max, |frame| match frame {
            Frame::Line(line) => self.on_message(me, line, now),
            Frame::TooLong => {
                self.stats.protocol_error(ProtocolError::TooLong);
                let msg =
                    format!("line longer than {max} bytes; discarded through the next newline");
                self.send_status(me, Level::Error, &msg, None, now);
            }
        });
        if let Some(conn) = self.conns.get_mut(key as usize) {
            conn.reader = reader;
        }
    }

    /// Handles one complete message (a line without its terminator).
    pub fn on_message(&mut self, me: ConnRef, line: &[u8], now: Instant) {
        if self.live_mut(me).is_none() {
            return;
        }
        self.stats.lines_in += 1;
        match decode::decode(line) {
            Ok(req) => self.apply(me, req, now),
            Err(e) => self.reject(me, &e, now),
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
        id: Option<&RawValue>,
        now: Instant,
    ) {
        self.stats.protocol_error(e);
        self.send_status(me, Level::Error, msg, id.map(|r| r.get().as_bytes()), now);
    }

    fn apply(&mut self, me: ConnRef, req: Request<'_>, now: Instant) {
        let id = req.id.map(|r| r.get().as_bytes());
        match req.op {
            Op::Publish { topic, msg } => self.publish(&topic, msg, now),
            Op::Subscribe { topic, .. } => {
                let (t, added) = self.router.subscribe(&topic, me);
                if added {
                    if let Some(c) = self.live_mut(me) {
                        c.subs.push(t);
                    }
                }
                self.send_status(me, Level::Info, &format!("subscribed to {topic}"), id, now);
            }
            Op::Unsubscribe { topic } => {
                if let Some(t) = self.router.topic_id(&topic) {
                    if self.router.unsubscribe(t, me) {
                        if let Some(c) = self.live_mut(me) {
                            c.subs.retain(|&x| x != t);
                        }
                    }
                }
                self.send_status(
                    me,
                    Level::Info,
                    &format!("unsubscribed from {topic}"),
                    id,
                    now,
                );
            }
            Op::Advertise { topic, .. } => {
                let (t, added) = self.router.advertise(&topic, me);
                if added {
                    if let Some(c) = self.live_mut(me) {
                        c.pubs.push(t);
                    }
                }
                self.send_status(me, Level::Info, &format!("advertised {topic}"), id, now);
            }
            Op::Unadvertise { topic } => {
                if let Some(t) = self.router.topic_id(&topic) {
                    if self.router.unadvertise(t, me) {
                        if let Some(c) = self.live_mut(me) {
                            c.pubs.retain(|&x| x != t);
                        }
                    }
                }
                self.send_status(me, Level::Info, &format!("unadvertised {topic}"), id, now);
            }
            Op::AdvertiseService { service, ty } => {
                self.advertise_service(me, &service, &ty, req.id, now)
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
        }
    }

    // ----- topics ----------------------------------------------------------------

    fn publish(&mut self, topic: &str, msg: &RawValue, now: Instant) {
        self.stats.published += 1;
        let Some(t) = self.router.topic_id(topic) else {
            return;
        };
        let Some(topic) = self.router.topic(t) else {
            return;
        };
        if topic.subscribers.is_empty() {
            return;
        }
        self.scratch.clear();
        encode::publish(&mut self.scratch, &topic.prefix, msg);
        let frame: Rc<[u8]> = Rc::from(&self.scratch[..]);
        let cap = self.limits.max_queue_bytes;
        for &sub in &topic.subscribers {
            let Some(c) = self.conns.get_mut(sub.key as usize) else {
                continue;
            };
            if c.gen != sub.gen || c.closing.is_some() {
                continue;
            }
            if c.out.is_empty() {
                c.out_since = now;
            }
            let d = c.out.push_topic(Rc::clone(&frame), t, cap);
            self.stats.delivered += 1;
            self.stats.dropped += d.frames;
            self.stats.dropped_bytes += d.bytes;
            if !c.dirty {
                c.dirty = true;
                self.dirty.push(sub.key);
            }
        }
        if self.scratch.capacity() > 1 << 20 {
            self.scratch = Vec::with_capacity(4096);
        }
    }

    // ----- services --------------------------------------------------------------

    fn advertise_service(
        &mut self,
        me: ConnRef,
        name: &str,
        ty: &str,
        id: Option<&RawValue>,
        now: Instant,
    ) {
        if name.starts_with(RESERVED_PREFIX) {
            let msg = format!("service names under {RESERVED_PREFIX} are reserved for the gateway");
            return self.protocol_error(me, ProtocolError::ReservedName, &msg, id, now);
        }
        let displaced = self.router.advertise_service(name, ty, me);
        if let Some(c) = self.live_mut(me) {
            if !c.services.iter().any(|s| &**s == name) {
                c.services.push(name.into());
            }
        }
        if let Some(old) = displaced {
            if let Some(c) = self.live_mut(old) {
                c.services.retain(|s| &**s != name);
            }
            let msg = format!("service {name} was taken over by another provider; calls already forwarded to you stay valid");
            self.send_status(old, Level::Info, &msg, None, now);
        }
        let msg = format!("advertised service {name}");
        self.send_status(me, Level::Info, &msg, id.map(|r| r.get().as_bytes()), now);
    }

    fn unadvertise_service(
        &mut self,
        me: ConnRef,
        name: &str,
        id: Option<&RawValue>,
        now: Instant,
    ) {
        match self.router.unadvertise_service(name, me) {
            Unadvertised::Removed => {
                let mut name_json = Vec::new();
                encode::json_string(&mut name_json, name);
                let mut failing = Vec::new();
                if let Some(c) = self.live_mut(me) {
                    c.services.retain(|s| &**s != name);
                    failing.extend(c.calls_served.iter().copied());
                }
                failing.sort_unstable();
                for seq in failing {
                    let same = self
                        .calls
                        .get(seq)
                        .is_some_and(|call| call.service_json() == &name_json[..]);
                    if same {
                        self.fail_call(seq, CallFailure::Unadvertised, now);
                    }
                }
                let msg = format!("unadvertised service {name}");
                self.send_status(me, Level::Info, &msg, id.map(|r| r.get().as_bytes()), now);
            }
            Unadvertised::NotProvider | Unadvertised::Unknown => {
                let msg = format!("not the current provider of service {name}; nothing changed");
                self.protocol_error(me, ProtocolError::NotProvider, &msg, id, now);
            }
        }
    }

    fn call_service(
        &mut self,
        me: ConnRef,
        name: &str,
        args: &RawValue,
        id: Option<&[u8]>,
        timeout: Option<f64>,
        now: Instant,
    ) {
        if name == STATS_SERVICE {
            let values = self.stats_json();
            let mut out = std::mem::take(&mut self.scratch);
            out.clear();
            encode::service_response(
                &mut out,
                b"\"/rosgate/stats\"",
                id,
                values.as_bytes(),
                b"true",
                None,
            );
            self.send_control(me, &out, now);
            self.scratch = out;
            return;
        }
        let Some(in_flight) = self.live_mut(me).map(|c| c.calls_made.len()) else {
            return;
        };
        if in_flight >= self.limits.max_calls_per_conn {
            return self.fail_now(me, name, id, CallFailure::TooMany, now);
        }
        let provider = match self.router.service(name) {
            Some(s) if self.live(s.provider) => s,
            _ => return self.fail_now(me, name, id, CallFailure::NoProvider, now),
        };
        let to = match timeout {
            Some(secs) if secs.is_finite() && secs > 0.0 => {
                Duration::from_secs_f64(secs.min(self.limits.max_call_timeout.as_secs_f64()))
            }
            _ => self.limits.call_timeout,
        };
        let deadline = now + to;
        let p = provider.provider;
        let seq = self.calls.insert(me, p, &provider.name_json, id, deadline);
        self.timers.insert(seq, deadline);
        if let Some(c) = self.live_mut(me) {
            c.calls_made.insert(seq);
        }
        if let Some(c) = self.live_mut(p) {
            c.calls_served.insert(seq);
        }
        self.stats.calls_forwarded += 1;
        let mut out = std::mem::take(&mut self.scratch);
        out.clear();
        let name_json = self
            .calls
            .get(seq)
            .map(|c| c.service_json())
            .unwrap_or(b"\"\"");
        encode::call_service(&mut out, name_json, seq, args);
        self.send_control(p, &out, now);
        self.scratch = out;
    }

    fn service_response(
        &mut self,
        me: ConnRef,
        id: Option<&RawValue>,
        values: &RawValue,
        result: &RawValue,
        status: Option<&RawValue>,
        now: Instant,
    ) {
        let seq = id.and_then(|r| parse_call_id(r.get().as_bytes()));
        let mine = seq
            .and_then(|s| self.calls.get(s))
            .is_some_and(|c| c.provider == me);
        let (Some(seq), true) = (seq, mine) else {
            self.stats.responses_stale += 1;
            let shown = id.map_or("(none)", |r| r.get());
            let msg =
                format!("no outstanding call with id {shown} on this connection; response dropped");
            return self.protocol_error(me, ProtocolError::UnknownResponse, &msg, id, now);
        };
        let Some(call) = self.calls.remove(seq) else {
            return;
        };
        if let Some(c) = self.live_mut(me) {
            c.calls_served.remove(&seq);
        }
        if let Some(c) = self.live_mut(call.caller) {
            c.calls_made.remove(&seq);
        }
        self.stats.calls_answered += 1;
        let mut out = std::mem::take(&mut self.scratch);
        out.clear();
        encode::service_response(
            &mut out,
            call.service_json(),
            call.caller_id(),
            values.get().as_bytes(),
            result.get().as_bytes(),
            status.map(|s| s.get().as_bytes()),
        );
        self.send_control(call.caller, &out, now);
        self.scratch = out;
    }

    /// Fails a call that was never forwarded.
    fn fail_now(
        &mut self,
        me: ConnRef,
        name: &str,
        id: Option<&[u8]>,
        why: CallFailure,
        now: Instant,
    ) {
        self.count_failure(why);
        let mut name_json = Vec::with_capacity(name.len() + 2);
        encode::json_string(&mut name_json, name);
        let reason = self.failure_text(why, name);
        let mut out = Vec::new();
        encode::service_failure(&mut out, &name_json, id, &reason);
        self.send_control(me, &out, now);
    }

    /// Removes an in-flight call and sends its caller a failure.
    fn fail_call(&mut self, seq: u64, why: CallFailure, now: Instant) {
        let Some(call) = self.calls.remove(seq) else {
            return;
        };
        if let Some(c) = self.live_mut(call.provider) {
            c.calls_served.remove(&seq);
        }
        if let Some(c) = self.live_mut(call.caller) {
            c.calls_made.remove(&seq);
        }
        self.count_failure(why);
        let name: String = serde_json::from_slice(call.service_json()).unwrap_or_default();
        let reason = self.failure_text(why, &name);
        let mut out = Vec::new();
        encode::service_failure(&mut out, call.service_json(), call.caller_id(), &reason);
        self.send_control(call.caller, &out, now);
    }

    fn count_failure(&mut self, why: CallFailure) {
        let s = &mut self.stats;
        match why {
            CallFailure::NoProvider => s.calls_failed_no_provider += 1,
            CallFailure::ProviderGone | CallFailure::Unadvertised => {
                s.calls_failed_provider_gone += 1
            }
            CallFailure::Timeout => s.calls_timed_out += 1,
            CallFailure::TooMany => s.calls_failed_too_many += 1,
        }
    }

    fn failure_text(&self, why: CallFailure, name: &str) -> String {
        match why {
            CallFailure::NoProvider => format!("no provider for service {name}"),
            CallFailure::ProviderGone => format!("provider of service {name} disconnected"),
            CallFailure::Unadvertised => format!("service {name} was unadvertised by its provider"),
            CallFailure::Timeout => format!("service call to {name} timed out"),
            CallFailure::TooMany => format!(
                "too many calls in flight on this connection (limit {})",
                self.limits.max_calls_per_conn
            ),
        }
    }

    // ----- output ----------------------------------------------------------------

    fn live(&self, r: ConnRef) -> bool {
        self.conns
            .get(r.key as usize)
            .is_some_and(|c| c.gen == r.gen && c.closing.is_none())
    }

    fn live_mut(&mut self, r: ConnRef) -> Option<&mut Conn> {
        self.conns
            .get_mut(r.key as usize)
            .filter(|c| c.gen == r.gen && c.closing.is_none())
    }

    fn send_status(
        &mut self,
        to: ConnRef,
        level: Level,
        msg: &str,
        id: Option<&[u8]>,
        now: Instant,
    ) {
        let mut out = Vec::with_capacity(64 + msg.len());
        encode::status(&mut out, level, msg, id);
        self.send_control(to, &out, now);
    }

    /// Queues control bytes; closes the connection past its control limit.
    fn send_control(&mut self, to: ConnRef, bytes: &[u8], now: Instant) {
        let cap = self.limits.max_control_bytes;
        let Some(c) = self.live_mut(to) else { return };
        if c.out.is_empty() {
            c.out_since = now;
        }
        let queued = c.out.push_control(bytes);
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
            let stall = self.limits.write_stall;
            let stalled: Vec<u32> = self
                .conns
                .iter()
                .filter(|(_, c)| {
                    c.closing.is_none()
                        && !c.out.is_empty()
                        && now.saturating_duration_since(c.out_since) >= stall
                })
                .map(|(k, _)| k as u32)
                .collect();
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
