//! The typed seam from the hub to the federation's peers: what the hub
//! sends through a bridge that is not topic data. Topic data for other
//! gateways and ROS 2 stays in the bridge's `OutQueue` (shed like a
//! client's, counted in the memory ledger); calls, goals, cancels and the
//! answers, feedback and results to calls and goals that came from a peer
//! are [`BridgeMsg`]s in one [`Outbox`], each naming the peer
//! ([`PeerId`]) the hub knows is on the other side: the provider it
//! recorded (`Bridges::remote_provider`) or the peer a call came from
//! (`Bridges::remote_call`; both in `hub/bridges.rs`). The shell hands each to that peer, with
//! nothing to decode and nothing to route by trial.
//!
//! Invariants:
//! - the outbox holds at most [`MAX_BRIDGE_OUTBOX_BYTES`] of calls, goals,
//!   cancels and feedback (one message always fits in an empty outbox);
//!   answers and results always enter: there is at most one of each per
//!   call or goal in the hub's table, which is bounded itself;
//! - what does not fit is never silent: a call or goal is failed at once
//!   (its caller gets its one answer), a cancel or feedback is dropped and
//!   counted (`federation_out_dropped`).

use std::collections::VecDeque;

use crate::nodes::Domain;

/// Bytes. Calls, goals, cancels and feedback waiting in the outbox for
/// the shell's next turn; past it a call or goal fails at once and a
/// cancel or feedback is dropped (both counted).
pub const MAX_BRIDGE_OUTBOX_BYTES: usize = 8 << 20;

/// Bytes counted per message beyond its strings.
const BRIDGE_MSG_OVERHEAD: usize = 64;

/// The kind of peer on the other side of a bridge: a ROS 2 graph over
/// rmw_zenoh (`Ros2`), a ROS 2 graph over DDS (`Dds`), or the other
/// rosgate gateways.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PeerId {
    Ros2,
    Dds,
    Gateways,
}

impl PeerId {
    /// Every peer kind, in the order the shell may index them (and the
    /// order of preference among providers: ROS 2 graphs first).
    pub const ALL: [PeerId; 3] = [PeerId::Ros2, PeerId::Dds, PeerId::Gateways];

    /// Its place in [`PeerId::ALL`].
    pub fn index(self) -> usize {
        match self {
            PeerId::Ros2 => 0,
            PeerId::Dds => 1,
            PeerId::Gateways => 2,
        }
    }

    /// Its bit in a set of peers (`u8`, one bit per [`PeerId::ALL`]).
    pub fn bit(self) -> u8 {
        1 << self.index()
    }

    /// Whether topic data that came from peer `self` crosses to peer `to`
    /// (and `to`'s interest in a topic makes `self` subscribe to it): only
    /// between two different ROS 2 sides (a DDS graph and an rmw_zenoh
    /// one, issue 26). Never back to the peer it came from (no echo), and
    /// never to or from the other gateways: each gateway joins its ROS 2
    /// graphs itself, so two gateways in one graph would otherwise deliver
    /// every sample twice, and the federation's rule stays "a remote
    /// sample reaches local clients only" (`hub/federation.rs`).
    pub fn forwards_to(self, to: PeerId) -> bool {
        self != to && self != PeerId::Gateways && to != PeerId::Gateways
    }
}

/// One message from the hub to a peer. Ids: `id: u64` is the provider-side
/// sequence the hub issued (`"rg-<id>"` on the wire, see
/// `rosgate_wire::ids`); `id: Box<str>` is the id the peer chose for its
/// own call or goal, as the JSON it sent. `args` and `values` are valid
/// JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BridgeMsg {
    /// A call to a service the peer provides.
    Call {
        domain: Domain,
        service: Box<str>,
        id: u64,
        args: Box<str>,
        to: PeerId,
    },
    /// A goal to an action the peer serves (feedback wanted or not).
    Goal {
        domain: Domain,
        action: Box<str>,
        id: u64,
        action_type: Box<str>,
        args: Box<str>,
        feedback: bool,
        to: PeerId,
    },
    /// The caller cancels goal `id` sent to the peer.
    Cancel {
        domain: Domain,
        action: Box<str>,
        id: u64,
        to: PeerId,
    },
    /// The answer to the peer's call `id` (`result` false: `values` is
    /// the reason, a JSON string).
    Response {
        id: Box<str>,
        values: Box<str>,
        result: bool,
        to: PeerId,
    },
    /// Feedback for the peer's goal `id`.
    Feedback {
        id: Box<str>,
        values: Box<str>,
        to: PeerId,
    },
    /// The end of the peer's goal `id`: its status (4 succeeded, 5
    /// canceled, 6 aborted, 0 never accepted) and result.
    Result {
        id: Box<str>,
        values: Box<str>,
        status: u8,
        result: bool,
        to: PeerId,
    },
}

impl BridgeMsg {
    /// The peer it is for.
    pub fn to(&self) -> PeerId {
        match self {
            BridgeMsg::Call { to, .. }
            | BridgeMsg::Goal { to, .. }
            | BridgeMsg::Cancel { to, .. }
            | BridgeMsg::Response { to, .. }
            | BridgeMsg::Feedback { to, .. }
            | BridgeMsg::Result { to, .. } => *to,
        }
    }

    /// Bytes the memory ledger counts for it.
    pub fn bytes(&self) -> usize {
        BRIDGE_MSG_OVERHEAD
            + match self {
                BridgeMsg::Call { service, args, .. } => service.len() + args.len(),
                BridgeMsg::Goal {
                    action,
                    action_type,
                    args,
                    ..
                } => action.len() + action_type.len() + args.len(),
                BridgeMsg::Cancel { action, .. } => action.len(),
                BridgeMsg::Response { id, values, .. }
                | BridgeMsg::Feedback { id, values, .. }
                | BridgeMsg::Result { id, values, .. } => id.len() + values.len(),
            }
    }

    /// Whether it must always enter the outbox (an answer or a result:
    /// one per call or goal, so bounded by the calls table).
    fn ends_a_call(&self) -> bool {
        matches!(self, BridgeMsg::Response { .. } | BridgeMsg::Result { .. })
    }
}

/// The messages waiting for the shell (see the module docs).
#[derive(Debug, Default)]
pub struct Outbox {
    msgs: VecDeque<BridgeMsg>,
    bytes: usize,
}

impl Outbox {
    /// Queues `m`, or gives it back when the outbox is full (never for an
    /// answer or a result).
    pub fn push(&mut self, m: BridgeMsg) -> Result<(), BridgeMsg> {
        let b = m.bytes();
        if !m.ends_a_call() && !self.msgs.is_empty() && self.bytes + b > MAX_BRIDGE_OUTBOX_BYTES {
            return Err(m);
        }
        self.bytes += b;
        self.msgs.push_back(m);
        Ok(())
    }

    /// Moves every waiting message into `into`, in order.
    pub fn take(&mut self, into: &mut Vec<BridgeMsg>) {
        into.extend(self.msgs.drain(..));
        self.bytes = 0;
    }

    pub fn is_empty(&self) -> bool {
        self.msgs.is_empty()
    }

    /// Bytes held (the memory ledger's view).
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(args: usize) -> BridgeMsg {
        BridgeMsg::Call {
            domain: 0,
            service: "/s".into(),
            id: 1,
            args: "0".repeat(args).into(),
            to: PeerId::Gateways,
        }
    }

    #[test]
    fn the_bound_refuses_calls_but_never_an_answer() {
        let mut o = Outbox::default();
        assert!(
            o.push(call(MAX_BRIDGE_OUTBOX_BYTES * 2)).is_ok(),
            "one always fits"
        );
        assert!(o.push(call(1)).is_err());
        let answer = BridgeMsg::Response {
            id: "\"x\"".into(),
            values: "{}".into(),
            result: true,
            to: PeerId::Ros2,
        };
        assert!(o.push(answer).is_ok());
        let mut v = Vec::new();
        o.take(&mut v);
        assert_eq!(v.len(), 2);
        assert!(o.is_empty() && o.bytes() == 0);
    }
}
