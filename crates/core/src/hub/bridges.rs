//! [`Bridges`]: the network side's view of a [`Hub`] (`hub.bridges()`),
//! what the Zenoh crate (`rosgate-zenoh`: other gateways, ROS 2 graphs)
//! and the simulation's federation checks may do to the hub. It owns
//! nothing: each method hands its arguments to the owner of the table it
//! touches (`federation.rs` for the bridges, interest, providers, remote
//! graphs and calls; `bridge_out.rs` for the typed outbox; `topics.rs` for
//! the publish router and the type checks; `types.rs` for the types).
//!
//! Invariant: everything a peer network can make the hub do goes through
//! here. The methods behind it are crate-private, so a peer cannot reach
//! a client's connection, queue or registration: it names a domain (whose
//! bridge acts for it), a topic, a call or goal id the hub gave out, never
//! a connection. [`Hub`]'s own public methods stay the I/O shell's contract
//! (`mod.rs`); the server's one entry into the network side is its one
//! `rosgate_peers::Driver` (`Driver::turn`), which takes this view.
//!
//! The groups (each method says what it does):
//! - interest: [`Bridges::take_interest_changes`] (local interest and
//!   providers, for the peers to announce), [`Bridges::remote_interest`],
//!   [`Bridges::remote_provider`] (what the peers want and provide);
//! - topic data: [`Bridges::remote_publish`] in (never echoed to a
//!   bridge), [`Bridges::remote_publish_cdr`] for a ROS 2 sample with its
//!   CDR (and [`Bridges::needs_json`], whether to decode it at all), the bridges' queues out ([`Bridges::domains`],
//!   [`Bridges::queue`], [`Bridges::drained`]), [`Bridges::latched_depth`];
//!   samples one ROS 2 side sent that another wants
//!   ([`Bridges::forward_wanted`], [`Bridges::forward`],
//!   [`Bridges::take_forwards`]: to that side only, never back);
//! - calls, goals and answers: the peers' calls, goals and cancels
//!   ([`Bridges::remote_call`], [`Bridges::remote_goal`],
//!   [`Bridges::remote_cancel`]) and their answers ([`Bridges::remote_reply`]);
//!   the hub's own for the peers ([`Bridges::take_bridge_msgs`]) and a
//!   peer's refusal of one ([`Bridges::peer_refused`]);
//! - graphs: this gateway's ([`Bridges::graph_state`],
//!   [`Bridges::local_graph`], [`Bridges::nodes`]), the peers'
//!   ([`Bridges::install_remote_graph`], [`Bridges::forget_gateway`]);
//! - status: [`Bridges::count`], [`Bridges::set_held`] (the memory
//!   ledger), [`Bridges::set_due`] (the loop's next deadline),
//!   [`Bridges::set_status`] (`/rosgate/federation`);
//! - types: [`Bridges::set_types`], [`Bridges::set_type_checker`],
//!   [`Bridges::set_topic_check`], [`Bridges::topic_type`].

use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use rosgate_ros2::registry::Registry;
use rosgate_wire::Raw;

use super::{Forward, InterestChange, Origin, RemoteGoal, RemoteGraph, TypeCheck};
use crate::bridge::{BridgeMsg, PeerId};
use crate::counters::Counter;
use crate::nodes::{Domain, Nodes};
use crate::out::OutQueue;
use crate::registry::Provided;
use crate::Hub;

/// The network side's view of a [`Hub`] (see the module docs).
#[derive(Debug)]
pub struct Bridges<'a> {
    hub: &'a mut Hub,
}

impl Hub {
    /// The network side's view (see [`Bridges`]).
    pub fn bridges(&mut self) -> Bridges<'_> {
        Bridges { hub: self }
    }
}

/// Interest: what local clients want and provide, and what the peers do.
impl Bridges<'_> {
    /// The changes of local interest (topics subscribed, services and
    /// actions provided) since the last call, once per name per turn, for
    /// the peers to announce. Reopens a bridge the gateway closed (the
    /// memory budget) while peers still want topics of its domain.
    pub fn take_interest_changes(&mut self, into: &mut Vec<InterestChange>, now: Instant) {
        self.hub.take_interest_changes(into, now);
    }

    /// Peer `from` now wants `topic` of `domain` (or no longer does): the
    /// domain's bridge subscribes while some peer does, and another ROS 2
    /// side's interest is announced to the ROS 2 sides
    /// ([`PeerId::forwards_to`]).
    pub fn remote_interest(
        &mut self,
        from: PeerId,
        domain: Domain,
        topic: &str,
        wanted: bool,
        now: Instant,
    ) {
        self.hub.remote_interest(from, domain, topic, wanted, now);
    }

    /// The peer `from` provides the service or action `name` (`kind`) of
    /// `domain` with type `ty`, or (`None`) no longer does; the bridge's
    /// calls and goals for it go to that peer (ROS 2 first when both do).
    pub fn remote_provider(
        &mut self,
        kind: Provided,
        domain: Domain,
        name: &str,
        ty: Option<&str>,
        from: PeerId,
    ) {
        self.hub.remote_provider(kind, domain, name, ty, from);
    }
}

/// Topic data: in from the peers, out of the bridges' queues.
impl Bridges<'_> {
    /// A message a peer publishes on `topic` of `domain` (valid JSON, the
    /// shell checked), `latched` when it comes from a latched publisher
    /// keeping that many: delivered to local subscribers, never to a
    /// bridge (no echo into the network). Nothing with federation off.
    pub fn remote_publish(
        &mut self,
        domain: Domain,
        topic: &str,
        msg: Raw<'_>,
        latched: Option<u32>,
        now: Instant,
    ) {
        self.hub
            .route(Origin::Remote { latched }, domain, topic, msg, now);
    }

    /// Whether a ROS 2 sample on `topic` of `domain` must be decoded to
    /// JSON for [`Bridges::remote_publish_cdr`]: false when every local
    /// subscriber takes `cbor-raw` (the CDR as it came), or none
    /// subscribes (see `Hub::remote_needs_json` in `hub/encodings.rs`).
    pub fn needs_json(&self, domain: Domain, topic: &str, latched: Option<u32>) -> bool {
        self.hub.remote_needs_json(domain, topic, latched)
    }

    /// A ROS 2 sample on `topic` of `domain` as [`Bridges::remote_publish`]
    /// does, with its CDR bytes as the ROS 2 node put them (encapsulation
    /// header included): `cbor-raw` subscribers get `cdr` untouched.
    /// `json`: the sample decoded, or `None` when [`Bridges::needs_json`]
    /// said nobody needs it (then only `cbor-raw` subscribers get it;
    /// were another one there, it would get `null`).
    pub fn remote_publish_cdr(
        &mut self,
        domain: Domain,
        topic: &str,
        json: Option<Raw<'_>>,
        cdr: &[u8],
        latched: Option<u32>,
        now: Instant,
    ) {
        if !self.hub.federation_enabled() {
            return;
        }
        self.hub.counters.inc(Counter::CdrIn);
        if json.is_none() {
            self.hub.counters.inc(Counter::CdrPassedThrough);
        }
        let msg = json.unwrap_or(Raw::from_valid_json("null"));
        let cdr: Rc<[u8]> = Rc::from(cdr);
        self.hub.route_with_cdr(
            Origin::Remote { latched },
            domain,
            topic,
            msg,
            Some(&cdr),
            now,
        );
    }

    /// Whether a sample peer `from` sent on `topic` of `domain` crosses to
    /// another ROS 2 side that wants it ([`PeerId::forwards_to`]): then
    /// the shell hands it to [`Bridges::forward`] as JSON too.
    pub fn forward_wanted(&self, from: PeerId, domain: Domain, topic: &str) -> bool {
        self.hub.forward_wanted(from, domain, topic)
    }

    /// Keeps a sample of peer `from` (`msg`, and its CDR of type `ty`) for
    /// the shell to put to the other ROS 2 sides
    /// ([`Bridges::take_forwards`]); never back to `from`.
    #[allow(clippy::too_many_arguments)]
    pub fn forward(
        &mut self,
        from: PeerId,
        domain: Domain,
        topic: &str,
        msg: &str,
        cdr: Option<(&str, &[u8])>,
        latched: Option<u32>,
    ) {
        self.hub.forward(Forward {
            from,
            domain,
            topic: Rc::from(topic),
            msg: Box::from(msg),
            cdr: cdr.map(|(t, b)| (Box::from(t), Box::from(b))),
            latched,
        });
    }

    /// The samples kept by [`Bridges::forward`] since the last call.
    pub fn take_forwards(&mut self, into: &mut Vec<Forward>) {
        self.hub.take_forwards(into);
    }

    /// The domains with a live bridge, whose queues the shell drains.
    pub fn domains(&self) -> impl Iterator<Item = Domain> + '_ {
        self.hub.federation_links().map(|(d, _)| d)
    }

    /// The queue of the bridge of `domain`: topic data only (publish
    /// lines), for the peers.
    pub fn queue(&self, domain: Domain) -> Option<&OutQueue> {
        let key = self.bridge_key(domain)?;
        self.hub.out(key)
    }

    /// `n` bytes of the queue of the bridge of `domain` were handed to
    /// the peers (as a socket's write is acknowledged).
    pub fn drained(&mut self, domain: Domain, n: usize, now: Instant) {
        if let Some(key) = self.bridge_key(domain) {
            self.hub.wrote(key, n, now);
        }
    }

    fn bridge_key(&self, domain: Domain) -> Option<u32> {
        self.hub
            .federation_links()
            .find(|&(d, _)| d == domain)
            .map(|(_, key)| key)
    }

    /// The deepest latched cache of a local publisher of `topic`: its
    /// messages cross marked as latched with that depth.
    pub fn latched_depth(&self, domain: Domain, topic: &str) -> Option<u32> {
        self.hub.latched_depth(domain, topic)
    }
}

/// Calls, goals and answers, both ways.
impl Bridges<'_> {
    /// A caller in the peer `from` calls `service` of `domain`: the
    /// domain's bridge calls it here with `id` (a JSON string the shell
    /// chose) and `args` (valid JSON); the answer comes back from
    /// [`Bridges::take_bridge_msgs`] for `from` with that id.
    pub fn remote_call(
        &mut self,
        from: PeerId,
        domain: Domain,
        service: &str,
        id: &str,
        args: Raw<'_>,
        now: Instant,
    ) {
        self.hub
            .remote_call_from(from, domain, service, id, args, now);
    }

    /// A caller in the peer `from` sends a goal: the domain's bridge sends
    /// it here asking for feedback; feedback and the result come back for
    /// `from` under the goal's id.
    pub fn remote_goal(
        &mut self,
        from: PeerId,
        domain: Domain,
        goal: RemoteGoal<'_>,
        now: Instant,
    ) {
        self.hub.remote_goal_from(from, domain, goal, now);
    }

    /// The caller in the peer `from` cancels the goal the bridge sent as
    /// `id`.
    pub fn remote_cancel(
        &mut self,
        from: PeerId,
        domain: Domain,
        action: &str,
        id: &str,
        now: Instant,
    ) {
        self.hub.remote_cancel_from(from, domain, action, id, now);
    }

    /// A peer's answer to a call or goal the hub forwarded to the bridge
    /// of `domain`: a whole `service_response`, `action_feedback` or
    /// `action_result` line, as a provider sends it.
    pub fn remote_reply(&mut self, domain: Domain, line: &[u8], now: Instant) {
        self.hub.remote_reply(domain, line, now);
    }

    /// A peer's answer to the call the hub forwarded to the bridge of
    /// `domain` as `id` (the JSON id, `"rg-<n>"`), already taken apart:
    /// what [`Bridges::remote_reply`] does with a `service_response` line,
    /// without writing and decoding the line. `values` must be one valid
    /// JSON value.
    pub fn remote_answer(
        &mut self,
        domain: Domain,
        id: &str,
        values: Raw<'_>,
        result: bool,
        now: Instant,
    ) {
        self.hub.remote_answer(domain, id, values, result, now);
    }

    /// Moves the hub's calls, goals, cancels and answers for the peers
    /// into `into`, in order, each naming its peer.
    pub fn take_bridge_msgs(&mut self, into: &mut Vec<BridgeMsg>) {
        self.hub.take_bridge_msgs(into);
    }

    /// The peer a call or goal `id` was for could not take it: it fails at
    /// once, as when its provider leaves.
    pub fn peer_refused(&mut self, id: u64, now: Instant) {
        self.hub.peer_refused(id, now);
    }
}

/// Graphs: this gateway's for the peers, the peers' for introspection.
impl Bridges<'_> {
    /// Domains this gateway has anything in, and a number that changes
    /// whenever its registrations may have.
    pub fn graph_state(&self) -> (Vec<Domain>, u64) {
        self.hub.graph_state()
    }

    /// This gateway's own graph of `domain` (JSON), for the peers.
    pub fn local_graph(&self, domain: Domain) -> String {
        self.hub.local_graph(domain)
    }

    /// The nodes local clients declared (the ROS 2 peer mirrors them).
    pub fn nodes(&self) -> &Nodes {
        self.hub.nodes()
    }

    /// The graph of `domain` the peer `gw` announced, parsed already:
    /// replaces what it said before, within the remote graph limits.
    pub fn install_remote_graph(&mut self, gw: &str, domain: Domain, graph: RemoteGraph) {
        self.hub.install_remote_graph(gw, domain, graph);
    }

    /// The gateway `gw` left: its graphs go, and the latched messages kept
    /// for other gateways' publishers.
    pub fn forget_gateway(&mut self, gw: &str, now: Instant) {
        self.hub.forget_gateway(gw, now);
    }
}

/// Status: counters, the memory ledger, the loop's deadline,
/// `/rosgate/federation`.
impl Bridges<'_> {
    /// Counts `n` events of the network side.
    pub fn count(&mut self, c: Counter, n: u64) {
        self.hub.count_n(c, n);
    }

    /// What the network side holds now (its tables, samples waiting in
    /// the loop's inbox), in bytes, for the memory ledger.
    pub fn set_held(&mut self, bytes: usize) {
        self.hub.set_federation_held(bytes);
    }

    /// The network side wants a loop turn by `at` (or no particular time).
    pub fn set_due(&mut self, at: Option<Instant>) {
        self.hub.set_federation_due(at);
    }

    /// What `/rosgate/federation` answers about the network side (a JSON
    /// object the hub completes).
    pub fn set_status(&mut self, status: String) {
        self.hub.set_federation_status(status);
    }
}

/// Types: what ROS 2 taught the gateway, and the checks of client
/// messages on topics ROS 2 subscribes to.
impl Bridges<'_> {
    /// Replaces the interface types the hub describes and decodes by.
    pub fn set_types(&mut self, registry: Arc<Registry>) {
        self.hub.set_types(registry);
    }

    /// Installs the check of messages against ROS 2 types.
    pub fn set_type_checker(&mut self, c: Box<dyn TypeCheck>) {
        self.hub.set_type_checker(c);
    }

    /// Client messages on `topic` of `domain` must fit `ty` from now on
    /// (ROS 2 subscribes to it), or (`None`) need not any more.
    pub fn set_topic_check(&mut self, domain: Domain, topic: &str, ty: Option<&str>) {
        self.hub.set_topic_check(domain, topic, ty);
    }

    /// The type a topic of `domain` is registered with here, if known.
    pub fn topic_type(&self, domain: Domain, topic: &str) -> Option<&str> {
        self.hub.topic_type(domain, topic)
    }
}
