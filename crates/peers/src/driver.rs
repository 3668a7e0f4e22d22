//! [`Driver`]: one loop turn of the peers, whatever network carries them.
//! One driver owns every peer of the gateway (other gateways, rmw_zenoh,
//! DDS), so the hub's interest changes and typed messages have one
//! consumer. Each turn it hands every peer what it learned into the hub
//! (`sync`), the samples one ROS 2 side sent that another wants to that
//! side (never back: `PeerId::forwards_to`), the hub's interest changes (topics wanted, services and actions
//! provided) to every peer, the peers' own periodic work (`turn`), the
//! bridges' topic data (their queues) to every peer, and each of the hub's
//! typed messages (calls, goals, cancels, answers) to the one peer it
//! names.
//!
//! Invariants:
//! - at most [`DRAIN_BYTES_PER_TURN`] of a bridge's queue is taken per
//!   turn (one busy topic cannot hold the loop);
//! - a call or goal for a peer that is not here, or that refuses it, fails
//!   at once through the hub (its caller gets its one answer);
//! - the driver reaches the hub only through its network facade
//!   ([`Bridges`]).

use std::io::IoSlice;
use std::time::Instant;

use rosgate_core::bridge::BridgeMsg;
use rosgate_core::counters::Counter;
use rosgate_core::hub::{Bridges, Forward, InterestChange, Offer};
use rosgate_core::nodes::Domain;
use rosgate_core::out::MAX_IOVECS;
use rosgate_wire::decode::{self, Op, Request};
use rosgate_wire::encode;

use crate::peer::{Cdr, Peer, Put};
use crate::Inbox;

/// Bytes. Taken from the bridges' queues per loop turn; the rest waits
/// for the next turn (so one busy topic cannot hold the loop).
pub const DRAIN_BYTES_PER_TURN: usize = 4 << 20;

/// The JSON id (`"rg-<n>"`) the hub gave call or goal `n`: the id a peer
/// answers with.
pub fn provider_id(n: u64) -> String {
    let mut v = Vec::with_capacity(24);
    rosgate_wire::ids::push_call_id(&mut v, n);
    String::from_utf8_lossy(&v).into_owned()
}

/// Every peer of the gateway and the buffers their turn reuses. See the
/// module docs.
#[derive(Default)]
pub struct Driver {
    peers: Vec<Box<dyn Peer>>,
    changes: Vec<InterestChange>,
    forwards: Vec<Forward>,
    msgs: Vec<BridgeMsg>,
    buf: Vec<u8>,
    last_status: Option<Instant>,
}

/// Milliseconds. The peers' status (`/rosgate/federation`) is rebuilt at
/// most this often.
pub const STATUS_INTERVAL_MS: u128 = 200;

impl Driver {
    /// A driver of `peers` (in the order they get each change).
    pub fn new(peers: Vec<Box<dyn Peer>>) -> Driver {
        Driver {
            peers,
            ..Driver::default()
        }
    }

    /// One loop turn's work (see the module docs): the peers' news into
    /// the hub, the hub's interest changes, topic data and typed messages
    /// to the peers. Sets the hub's next due turn to the earliest a peer
    /// asked for.
    pub fn turn(&mut self, hub: &mut Bridges<'_>, now: Instant) {
        for p in &mut self.peers {
            p.sync(hub, now);
        }
        self.forward(hub);
        hub.take_interest_changes(&mut self.changes, now);
        let changes = std::mem::take(&mut self.changes);
        for c in &changes {
            for p in &mut self.peers {
                if c.to.is_some_and(|to| to != p.id()) {
                    continue;
                }
                let (d, name) = (c.domain, c.name.clone());
                match (c.kind, c.wanted) {
                    (Offer::Topic, true) => p.want(hub, d, name),
                    (Offer::Topic, false) => p.unwant(d, &name),
                    (Offer::Service, true) => p.provide(d, name, &c.ty),
                    (Offer::Service, false) => p.unprovide(d, &name),
                    (Offer::Action, true) => p.serve(d, name, &c.ty),
                    (Offer::Action, false) => p.unserve(d, &name),
                }
            }
        }
        self.changes = changes;
        self.changes.clear();
        // When a peer wants the next turn at the latest (a change held
        // back for its interval), so the loop does not sleep past it.
        let mut due: Option<Instant> = None;
        for p in &mut self.peers {
            if let Some(t) = p.turn(hub, now) {
                due = Some(due.map_or(t, |d| d.min(t)));
            }
        }
        hub.set_due(due);
        let domains: Vec<Domain> = hub.domains().collect();
        for domain in domains {
            self.drain(hub, domain, now);
        }
        // After the topic data: a client's publishes before its call
        // leave before the call, as they did through the bridge's queue.
        self.send(hub, now);
        for p in &mut self.peers {
            p.flush(hub);
        }
    }

    /// After the turn, what the hub accounts for: samples the network's
    /// hand-off dropped (`federation_in_dropped`), the bytes held (the
    /// inbox's, the peers', and `held` more the network keeps beside
    /// them) in the memory ledger, and the peers' status (with `extra`
    /// added) at most every [`STATUS_INTERVAL_MS`].
    pub fn account(
        &mut self,
        hub: &mut Bridges<'_>,
        inbox: &Inbox,
        held: usize,
        now: Instant,
        extra: impl FnOnce(&mut serde_json::Value),
    ) {
        let dropped = inbox.take_dropped();
        if dropped > 0 {
            hub.count(Counter::FederationInDropped, dropped);
        }
        hub.set_held(held + inbox.pending_bytes() + self.held_bytes());
        if self
            .last_status
            .is_none_or(|t| now.saturating_duration_since(t).as_millis() >= STATUS_INTERVAL_MS)
        {
            self.last_status = Some(now);
            let mut status = self.status();
            extra(&mut status);
            hub.set_status(status.to_string());
        }
    }

    /// The gateway stops: every peer closes ([`Peer::close`]), then goes.
    pub fn close(mut self) {
        for p in &mut self.peers {
            p.close();
        }
    }

    /// Bytes the peers hold of what the network told them.
    pub fn held_bytes(&self) -> usize {
        self.peers.iter().map(|p| p.held_bytes()).sum()
    }

    /// Every peer's part of `/rosgate/federation`'s status object.
    pub fn status(&self) -> serde_json::Value {
        let mut status = serde_json::json!({});
        for p in &self.peers {
            p.status(&mut status);
        }
        status
    }

    /// Puts the samples one ROS 2 side sent this turn that another wants
    /// (`Bridges::forward`) to every peer they cross to
    /// (`PeerId::forwards_to`): never back to the peer they came from.
    fn forward(&mut self, hub: &mut Bridges<'_>) {
        let mut fwd = std::mem::take(&mut self.forwards);
        hub.take_forwards(&mut fwd);
        let (mut sent, mut dropped) = (0u64, 0u64);
        for f in fwd.drain(..) {
            for p in self.peers.iter_mut() {
                if !f.from.forwards_to(p.id()) {
                    continue;
                }
                let cdr = f.cdr.as_ref().map(|(ty, bytes)| Cdr { ty, bytes });
                match p.publish(f.domain, &f.topic, &f.msg, cdr, f.latched) {
                    Put::Sent => sent += 1,
                    Put::Dropped => dropped += 1,
                    Put::Skipped => {}
                }
            }
        }
        self.forwards = fwd;
        hub.count(Counter::FederationOut, sent);
        hub.count(Counter::FederationOutDropped, dropped);
    }

    /// Sends the topic data the bridge of `domain` has queued: one put
    /// per message, to every peer.
    fn drain(&mut self, hub: &mut Bridges<'_>, domain: Domain, now: Instant) {
        let Some(out) = hub.queue(domain) else {
            return;
        };
        if out.is_empty() {
            return;
        }
        let mut iov = [IoSlice::new(&[]); MAX_IOVECS];
        let n = out.fill(&mut iov, DRAIN_BYTES_PER_TURN);
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        for s in &iov[..n] {
            buf.extend_from_slice(s);
        }
        hub.drained(domain, buf.len(), now);
        let (mut sent, mut dropped) = (0u64, 0u64);
        // Whether the topic's messages cross marked as latched, asked once
        // per topic per drain.
        let mut latched: Option<(String, Option<u32>)> = None;
        for line in buf.split(|&b| b == b'\n') {
            // Only topic data is queued for a bridge: calls, goals and
            // answers come typed from the hub's outbox ([`Driver::send`]).
            let Ok(Request {
                op: Op::Publish { topic, msg },
                ..
            }) = decode::decode(line)
            else {
                continue;
            };
            let depth = match &latched {
                Some((t, d)) if *t == *topic => *d,
                _ => {
                    let d = hub.latched_depth(domain, &topic);
                    latched = Some((topic.to_string(), d));
                    d
                }
            };
            // A client's CDR the hub put on the line (`publish_with_cdr`):
            // the ROS 2 peers put it untouched when ROS 2 subscribes with
            // the topic's type; other gateways get `msg`.
            let own = encode::publish_cdr(line)
                .and_then(|b64| std::str::from_utf8(b64).ok())
                .and_then(|b64| rosgate_ros2::cdr::octets(&serde_json::Value::from(b64)));
            let ty = own.as_ref().and_then(|_| hub.topic_type(domain, &topic));
            let cdr = own.as_deref().zip(ty).map(|(bytes, ty)| Cdr { ty, bytes });
            for p in self.peers.iter_mut() {
                match p.publish(domain, &topic, msg.get(), cdr, depth) {
                    Put::Sent => sent += 1,
                    Put::Dropped => dropped += 1,
                    Put::Skipped => {}
                }
            }
        }
        self.buf = buf;
        hub.count(Counter::FederationOut, sent);
        hub.count(Counter::FederationOutDropped, dropped);
    }

    /// Hands the hub's calls, goals, cancels and answers each to the peer
    /// it names. A call or goal for a peer that is not joined, or that
    /// cannot take it, fails at once (the hub answers its caller).
    fn send(&mut self, hub: &mut Bridges<'_>, now: Instant) {
        let mut msgs = std::mem::take(&mut self.msgs);
        hub.take_bridge_msgs(&mut msgs);
        for m in msgs.drain(..) {
            let to = m.to();
            let Some(p) = self.peers.iter_mut().find(|p| p.id() == to) else {
                if let BridgeMsg::Call { id, .. } | BridgeMsg::Goal { id, .. } = m {
                    hub.peer_refused(id, now);
                }
                continue;
            };
            match m {
                BridgeMsg::Call {
                    domain,
                    service,
                    id,
                    args,
                    ..
                } => {
                    if !p.call(domain, &service, &provider_id(id), &args, now) {
                        hub.peer_refused(id, now);
                    }
                }
                BridgeMsg::Goal {
                    domain,
                    action,
                    id,
                    action_type,
                    args,
                    ..
                } => {
                    if !p.goal(domain, &action, &provider_id(id), &action_type, &args, now) {
                        hub.peer_refused(id, now);
                    }
                }
                BridgeMsg::Cancel {
                    domain, action, id, ..
                } => p.cancel(domain, &action, &provider_id(id)),
                BridgeMsg::Response {
                    id, values, result, ..
                } => p.answer(&id, &values, result),
                BridgeMsg::Feedback { id, values, .. } => p.goal_update(&id, &values, None),
                BridgeMsg::Result {
                    id,
                    values,
                    status,
                    result,
                    ..
                } => p.goal_update(&id, &values, Some((status, result))),
            }
        }
        self.msgs = msgs;
    }
}
