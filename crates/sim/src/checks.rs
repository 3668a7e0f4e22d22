//! The invariants, checked against the hub's own tables and decisions:
//! - after every step ([`Sim::end_of_step`]): the gauges, the service and
//!   topic tables and every connection's indexes equal the model's, and no
//!   open connection holds more control bytes than its limit;
//! - whenever a client has read everything ([`Sim::check_quiescent`]):
//!   every line the model owes it arrived, and every publish frame that did
//!   not was counted as shed;
//! - for every close the hub decides ([`Sim::check_close`]): the reason is
//!   one the model allows at that moment, and a client that reads
//!   everything got its last words ([`Sim::check_last_words`]: the
//!   handshake refusal, the close frame echoed or the 1002);
//! - at the end ([`Sim::finish`]): every call got its one response, and
//!   every table is empty once everyone has left.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

use rosgate_core::counters::Gauge;
use rosgate_core::limits::TIMER_TICK_MS;
use rosgate_core::{CloseReason, ConnRef};

use crate::actions::{Action, MAX_CLIENTS};
use crate::driver::Sim;
use crate::model::{ReadMode, Resp};

/// An invariant broken at some step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub step: u64,
    pub what: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "step {}: {}", self.step, self.what)
    }
}

impl std::error::Error for Violation {}

fn conn_tuple(c: ConnRef) -> (u32, u32) {
    (c.key, c.gen)
}

/// Subscribers and publishers of one topic.
type Members = (BTreeSet<(u32, u32)>, BTreeSet<(u32, u32)>);

impl Sim {
    /// Updates the model's stall clocks and checks the tables.
    pub(crate) fn end_of_step(&mut self) -> Result<(), Violation> {
        let now = self.now();
        let max_control = self.limits.max_control_bytes;
        for s in 0..MAX_CLIENTS {
            let Some(c) = self.model.clients[s].as_mut() else {
                continue;
            };
            let Some(q) = self.hub.out(c.conn.key) else {
                return Err(self.violation(format!("slot {s}: live client has no hub connection")));
            };
            let empty = q.is_empty();
            if c.wrote || (c.empty_at_start && !empty) {
                c.out_since = now;
            }
            if q.control_bytes() > max_control {
                let n = q.control_bytes();
                return Err(self.violation(format!(
                    "slot {s}: {n} control bytes queued (limit {max_control}) and still open"
                )));
            }
        }
        self.check_tables()
    }

    /// The hub's tables equal the model's.
    pub(crate) fn check_tables(&self) -> Result<(), Violation> {
        self.check_gauges()?;
        self.check_services()?;
        self.check_topics()?;
        self.check_conn_indexes()
    }

    fn check_gauges(&self) -> Result<(), Violation> {
        let g = self.hub.gauges();
        let m = self.model.gauges();
        let h = [
            Gauge::ConnectionsOpen,
            Gauge::CallsPending,
            Gauge::Topics,
            Gauge::Subscriptions,
            Gauge::Publishers,
            Gauge::Services,
        ]
        .map(|x| g.get(x));
        if h != m || self.hub.conn_count() as u64 != m[0] || self.hub.calls().len() as u64 != m[1] {
            return Err(self.violation(format!(
                "gauges [conns, calls, topics, subs, pubs, services]: hub {h:?}, model {m:?}"
            )));
        }
        Ok(())
    }

    /// Services and their providers.
    fn check_services(&self) -> Result<(), Violation> {
        let hub: BTreeMap<String, (u32, u32)> = self
            .hub
            .registry()
            .services()
            .map(|(n, s)| (n.to_string(), conn_tuple(s.provider())))
            .collect();
        let model: BTreeMap<String, (u32, u32)> = self
            .model
            .services
            .iter()
            .map(|(n, &p)| (n.clone(), conn_tuple(p)))
            .collect();
        if hub != model {
            return Err(self.violation(format!("services: hub {hub:?}, model {model:?}")));
        }
        Ok(())
    }

    /// Topics, subscribers and publishers.
    fn check_topics(&self) -> Result<(), Violation> {
        let mut model: BTreeMap<String, Members> = BTreeMap::new();
        for c in self.model.live() {
            for t in c.subs.keys() {
                model
                    .entry(t.clone())
                    .or_default()
                    .0
                    .insert(conn_tuple(c.conn));
            }
            for t in c.pubs.keys() {
                model
                    .entry(t.clone())
                    .or_default()
                    .1
                    .insert(conn_tuple(c.conn));
            }
        }
        let hub: BTreeMap<String, Members> = self
            .hub
            .registry()
            .topics()
            .map(|t| {
                (
                    t.name().to_string(),
                    (
                        t.subscribers().iter().copied().map(conn_tuple).collect(),
                        t.publishers().iter().copied().map(conn_tuple).collect(),
                    ),
                )
            })
            .collect();
        if hub != model {
            return Err(self.violation(format!("topics: hub {hub:?}, model {model:?}")));
        }
        Ok(())
    }

    /// What each connection holds and the calls naming it.
    fn check_conn_indexes(&self) -> Result<(), Violation> {
        for (s, c) in self.model.clients.iter().enumerate() {
            let Some(c) = c else { continue };
            let Some(hc) = self.hub.conn(c.conn.key) else {
                return Err(self.violation(format!("slot {s} missing from the hub")));
            };
            let owned = self
                .model
                .services
                .values()
                .filter(|&&p| p == c.conn)
                .count();
            let held = self.hub.registry().held_by(c.conn);
            let hub = (
                held.subscriptions,
                held.advertisements,
                held.services,
                self.hub.calls().in_flight(c.conn),
                self.hub.calls().serving(c.conn),
            );
            let model = (
                c.subs.len(),
                c.pubs.len(),
                owned,
                self.model.calls_made(c.conn),
                self.model.calls_served(c.conn),
            );
            if hc.gen() != c.conn.gen || !hc.is_open() || hub != model {
                return Err(self.violation(format!(
                    "slot {s} indexes (subs, pubs, services, calls made, calls served): hub {hub:?}, model {model:?}"
                )));
            }
        }
        Ok(())
    }

    /// The hub has no output for `slot`: every expected line arrived.
    pub(crate) fn check_quiescent(&mut self, slot: usize) -> Result<(), Violation> {
        let step = self.step_no;
        let c = self.model.client_mut(slot);
        let v = |what: String| Violation { step, what };
        while let Some(f) = c.exp.topic.pop_front() {
            let n = f.wire_len as u64;
            if n > c.exp.owed_drop {
                return Err(v(format!(
                    "slot {slot} never got publish {} and it was not counted as shed",
                    String::from_utf8_lossy(&f.line)
                )));
            }
            c.exp.owed_drop -= n;
        }
        if c.exp.owed_drop != 0 {
            return Err(v(format!(
                "slot {slot}: {} bytes counted as shed but every frame arrived",
                c.exp.owed_drop
            )));
        }
        if let Some(((id, error), n)) = c.exp.statuses.iter().next() {
            return Err(v(format!(
                "slot {slot} is missing {n} status(es) id={id} error={error}"
            )));
        }
        if c.exp.anon_error + c.exp.anon_info > 0 {
            return Err(v(format!(
                "slot {slot} is missing {} error and {} info statuses without id",
                c.exp.anon_error, c.exp.anon_info
            )));
        }
        if let Some(k) = c.exp.forwards.front() {
            return Err(v(format!("slot {slot} never got forwarded call {k}")));
        }
        if let Some((id, r)) = c
            .exp
            .responses
            .iter()
            .find(|(_, r)| !matches!(r, Resp::Pending(_)))
        {
            return Err(v(format!("slot {slot} never got response id={id}: {r:?}")));
        }
        if let Some(r) = c
            .exp
            .anon_responses
            .iter()
            .find(|r| !matches!(r, Resp::Pending(_)))
        {
            return Err(v(format!(
                "slot {slot} never got response without id: {r:?}"
            )));
        }
        if let Some(p) = c.exp.pongs.front() {
            return Err(v(format!("slot {slot} never got the pong for {p:?}")));
        }
        if let Some(w) = c.ws() {
            if w.pending_handshake.is_none() && w.answer.is_some() {
                return Err(v(format!(
                    "slot {slot} never got an answer to its handshake ({:?})",
                    w.answer
                )));
            }
        }
        Ok(())
    }

    /// A client that reads everything and was just closed by the hub after
    /// a handshake refusal, a close frame or a protocol error got that
    /// answer in full, and nothing after it.
    pub(crate) fn check_last_words(&self, slot: usize) -> Result<(), Violation> {
        let c = self.model.client(slot);
        let Some(w) = c.ws() else { return Ok(()) };
        let owed = w.close.is_some() || w.protocol_close;
        if owed && (!w.done || !c.inbuf.is_empty()) {
            return Err(self.violation(format!(
                "slot {slot} closed without its last words (close frame {:?}, refusal {:?}, {} bytes left over)",
                w.close,
                w.answer,
                c.inbuf.len()
            )));
        }
        Ok(())
    }

    /// The hub is closing `slot` (slab key `key`): the reason must be one
    /// the model allows. The client closed it this step, or it overflowed
    /// its control limit, or its output was pending without progress for
    /// `write_stall`.
    pub(crate) fn check_close(&mut self, slot: usize, key: u32) -> Result<(), Violation> {
        let now = self.now();
        let c = self.model.client(slot);
        let (gen, closed_by_us, empty_at_start) = (c.conn.gen, c.closed_by_us, c.empty_at_start);
        let protocol = c.ws().is_some_and(|w| w.protocol_close);
        let pending = now.saturating_duration_since(c.out_since);
        let Some(conn) = self.hub.conn(key) else {
            return Err(self.violation(format!("closing key {key} has no connection")));
        };
        if conn.gen() != gen {
            return Err(self.violation(format!("closing key {key} has another generation")));
        }
        let control = conn.out().control_bytes();
        match conn.closing() {
            Some(CloseReason::PeerClosed | CloseReason::Reset) if closed_by_us && !protocol => {
                self.counts.closes_by_client += 1;
            }
            Some(CloseReason::ProtocolError) if protocol => {
                self.counts.ws_protocol_errors += 1;
            }
            Some(CloseReason::ControlOverflow) if control > self.limits.max_control_bytes => {
                self.counts.closes_overflow += 1;
            }
            Some(CloseReason::WriteStall)
                if !empty_at_start && pending >= self.limits.write_stall =>
            {
                self.counts.closes_stall += 1;
            }
            other => {
                return Err(self.violation(format!(
                    "slot {slot} closed with {other:?} (closed by us: {closed_by_us}, protocol error due: {protocol}, control bytes {control}, output pending {pending:?}, empty at step start: {empty_at_start})"
                )));
            }
        }
        Ok(())
    }

    /// Lets everyone read, runs the clock past every deadline, checks that
    /// every call got its one response, then disconnects everyone and checks
    /// that every table is empty.
    pub fn finish(&mut self) -> Result<(), Violation> {
        for c in self.model.clients.iter_mut().flatten() {
            c.mode = ReadMode::All;
        }
        self.settle()?;
        let jump = self.limits.max_call_timeout.max(self.limits.call_timeout)
            + Duration::from_millis(3 * TIMER_TICK_MS);
        self.offset += jump;
        self.step(&Action::Clock { v: 0 })?;
        self.step(&Action::Clock { v: 0 })?;
        self.check_all_answered()?;
        let now = self.now();
        for c in self.model.clients.iter_mut().flatten() {
            c.closed_by_us = true;
            self.hub.on_eof(c.conn.key, now);
        }
        self.free_phase()?;
        self.check_tables()?;
        self.check_empty()
    }

    /// Output queued by frees is flushed on the next turn: a few empty
    /// turns until no queue holds anything.
    fn settle(&mut self) -> Result<(), Violation> {
        for _ in 0..8 {
            self.step(&Action::Clock { v: 0 })?;
            let busy = self
                .model
                .live()
                .any(|c| self.hub.out(c.conn.key).is_some_and(|q| !q.is_empty()));
            if !busy {
                break;
            }
        }
        Ok(())
    }

    /// After every deadline: no call in flight, no response owed, nothing
    /// half received.
    fn check_all_answered(&self) -> Result<(), Violation> {
        if let Some(k) = self.model.calls.iter().position(|c| c.alive) {
            return Err(self.violation(format!(
                "model call {k} still in flight after every deadline"
            )));
        }
        for (s, c) in self.model.clients.iter().enumerate() {
            let Some(c) = c else { continue };
            if let Some((id, r)) = c.exp.responses.iter().next() {
                return Err(
                    self.violation(format!("slot {s}: call id={id} never answered ({r:?})"))
                );
            }
            if let Some(r) = c.exp.anon_responses.first() {
                return Err(self.violation(format!(
                    "slot {s}: a call without id never answered ({r:?})"
                )));
            }
            if !c.inbuf.is_empty() {
                return Err(self.violation(format!("slot {s}: a partial line or frame is left")));
            }
        }
        Ok(())
    }

    /// Every gauge and table is zero once everyone left.
    fn check_empty(&self) -> Result<(), Violation> {
        let g = self.hub.gauges();
        let mut all: Vec<u64> = Gauge::ALL.iter().map(|&x| g.get(x)).collect();
        all.extend(
            [
                self.hub.conn_count(),
                self.hub.calls().len(),
                self.hub.registry().topic_count(),
                self.hub.registry().service_count(),
            ]
            .map(|x| x as u64),
        );
        if all.iter().any(|&x| x != 0) {
            return Err(self.violation(format!("tables not empty after everyone left: {all:?}")));
        }
        Ok(())
    }
}
