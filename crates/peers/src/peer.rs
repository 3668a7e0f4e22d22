//! [`Peer`]: what the loop asks of each kind of peer network it carries
//! (other gateways over Zenoh, ROS 2 graphs over rmw_zenoh or DDS), so the
//! [`crate::Driver`] hands the hub's changes and the bridges' topic data to
//! each in turn,
//! and each of the hub's typed messages to the peer whose [`Peer::id`] it
//! names, with no knowledge of which peers exist. A peer reaches the hub
//! only through its network facade ([`Bridges`]), handed to it each turn.
//!
//! Invariant: a call, goal, cancel, answer or goal update goes to the one
//! peer the hub named in its [`rosgate_core::bridge::BridgeMsg`] (the
//! provider it recorded, or the peer the call came from): no peer is
//! offered another's.

use std::rc::Rc;
use std::time::Instant;

use rosgate_core::bridge::PeerId;
use rosgate_core::hub::Bridges;
use rosgate_core::nodes::Domain;

/// What became of a message put to a peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Put {
    /// Put (counted as sent).
    Sent,
    /// Not put: shed or refused (counted as dropped).
    Dropped,
    /// Nothing for this peer, or not counted (only the ROS 2 peers say so).
    Skipped,
}

/// A message's own CDR beside its JSON, as a client or a ROS 2 node put it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cdr<'a> {
    /// Its full type name (`pkg/msg/Type`).
    pub ty: &'a str,
    pub bytes: &'a [u8],
}

/// One kind of peer. All run on the loop thread.
pub trait Peer {
    /// Start of a turn, before the hub's changes: what the peer learned
    /// (from Zenoh's threads) into the hub.
    fn sync(&mut self, hub: &mut Bridges<'_>, now: Instant);
    /// Local clients subscribe to a topic (the first) or no longer (the last).
    fn want(&mut self, hub: &Bridges<'_>, domain: Domain, topic: Rc<str>);
    fn unwant(&mut self, domain: Domain, topic: &Rc<str>);
    /// A local client provides a service of type `ty`, or no longer.
    fn provide(&mut self, domain: Domain, name: Rc<str>, ty: &str);
    fn unprovide(&mut self, domain: Domain, name: &Rc<str>);
    /// A local client serves an action of type `ty`, or no longer.
    fn serve(&mut self, domain: Domain, name: Rc<str>, ty: &str);
    fn unserve(&mut self, domain: Domain, name: &Rc<str>);
    /// A message the bridge of `domain` publishes (every peer gets it);
    /// `cdr`, its own CDR when it came as CDR (the ROS 2 peers put it
    /// untouched when ROS 2 subscribes with its type; other gateways get
    /// `msg`); `depth` when the topic is latched.
    fn publish(
        &mut self,
        domain: Domain,
        topic: &str,
        msg: &str,
        cdr: Option<Cdr<'_>>,
        depth: Option<u32>,
    ) -> Put;
    /// Which peer this is (the hub's messages name it).
    fn id(&self) -> PeerId;
    /// The bridge calls a service this peer provides, as call `id` (the
    /// JSON the answer must carry). False when the peer cannot take it
    /// (the hub then fails the call at once).
    fn call(&mut self, domain: Domain, service: &str, id: &str, args: &str, now: Instant) -> bool;
    /// The local provider answered the peer's call `id`.
    fn answer(&mut self, id: &str, values: &str, result: bool);
    /// The bridge sends a goal (`id` as for a call) to an action this
    /// peer serves; false when it cannot take it.
    fn goal(
        &mut self,
        domain: Domain,
        action: &str,
        id: &str,
        ty: &str,
        args: &str,
        now: Instant,
    ) -> bool;
    /// The bridge cancels goal `id` it sent to this peer.
    fn cancel(&mut self, domain: Domain, action: &str, id: &str);
    /// The local server's feedback (`end` `None`) or result (`status`,
    /// `result`) for the peer's goal `id`.
    fn goal_update(&mut self, id: &str, values: &str, end: Option<(u8, bool)>);
    /// After the hub's changes: the peer's own periodic work. Returns
    /// when it wants the next turn at the latest (work held back for an
    /// interval), if it does.
    fn turn(&mut self, hub: &mut Bridges<'_>, now: Instant) -> Option<Instant>;
    /// End of the turn, after the topic data and the typed messages: a
    /// peer that gathers a turn's messages (to put many as one) sends
    /// them now.
    fn flush(&mut self, _hub: &mut Bridges<'_>) {}
    /// Bytes the peer holds of what the network told it (its own tables;
    /// the shared ones are counted by the session), for the memory ledger.
    fn held_bytes(&self) -> usize {
        0
    }
    /// Adds the peer's part to `/rosgate/federation`'s status object.
    fn status(&self, status: &mut serde_json::Value);
    /// The gateway stops: the peer withdraws what it declared and stops
    /// its threads, if it has any of its own.
    fn close(&mut self) {}
}
