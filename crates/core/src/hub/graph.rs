//! Nodes, names and domains as the hub applies them (seed 001 §1, §2,
//! §8), and what the gateway publishes about its own graph: `/rosout`,
//! `/client_count`, `/connected_clients` and graph events on
//! `/rosgate/graph`.
//!
//! Invariants:
//! - a connection that neither declared a node nor runs under `--names
//!   strict` uses names exactly as written (the protocol file's opaque
//!   names); nothing here runs for it on the publish path;
//! - a refused name changes nothing and earns an `invalid_name` error
//!   status with the request's id;
//! - a connection's domain changes only while it holds no registration and
//!   no node, so a registry never holds a connection of another domain;
//! - what the gateway publishes about the graph is coalesced: graph events
//!   and client counts go out at most once per loop turn (the hub's
//!   `expire`), the client list at most every
//!   [`CONNECTED_CLIENTS_INTERVAL`], and nothing is built for a domain
//!   where nobody subscribes to it;
//! - pending graph events are bounded ([`MAX_GRAPH_EVENTS`] per domain
//!   and turn); past that the message says `resync` and the rest are not
//!   kept, so a crowd leaving cannot grow a buffer.

use std::borrow::Cow;
use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use rosgate_wire::encode::{self, Level};
use rosgate_wire::names::{NodeName, Remap, Resolver};
use rosgate_wire::query;
use rosgate_wire::ws::handshake::{self, Opening};
use rosgate_wire::Raw;

use super::{Hub, Origin};
use crate::conn::ConnRef;
use crate::counters::{Counter, ErrorCode};
use crate::nodes::{DeclareError, Domain, DOMAINS, MAX_DOMAIN};
use crate::ratelimit::Admit;
use crate::registry::{NodeTag, Provided, Role};
use crate::transport::StatusFilter;

/// The gateway's log topic (`rcl_interfaces/msg/Log`).
pub const ROSOUT: &str = "/rosout";
/// Clients connected to this domain (`std_msgs/msg/Int32`), as rosbridge.
pub const CLIENT_COUNT: &str = "/client_count";
/// Their addresses and connection times, as rosbridge's
/// `rosbridge_msgs/msg/ConnectedClients`.
pub const CONNECTED_CLIENTS: &str = "/connected_clients";
/// Changes of the graph, for dashboards that must not poll.
pub const GRAPH_TOPIC: &str = "/rosgate/graph";
/// The simulated clock (`rosgraph_msgs/msg/Clock`), read under
/// `--use-sim-time`.
pub const CLOCK: &str = "/clock";
/// The node the gateway's own topics and services belong to.
pub const GATEWAY_NODE: &str = "/rosgate";

/// The topics the gateway publishes in every domain, with their types.
pub const GATEWAY_TOPICS: [(&str, &str); 5] = [
    (CLIENT_COUNT, "std_msgs/msg/Int32"),
    (CONNECTED_CLIENTS, "rosbridge_msgs/msg/ConnectedClients"),
    (
        super::params::PARAMETER_EVENTS,
        "rcl_interfaces/msg/ParameterEvent",
    ),
    (ROSOUT, "rcl_interfaces/msg/Log"),
    (GRAPH_TOPIC, "rosgate_msgs/msg/GraphEvents"),
];

/// Graph events kept per domain per loop turn; the rest are dropped and
/// the message says `"resync":true` (re-read the graph).
pub const MAX_GRAPH_EVENTS: usize = 1_000;

/// The client list (`/connected_clients`) is rebuilt at most this often.
pub const CONNECTED_CLIENTS_INTERVAL: Duration = Duration::from_millis(100);

/// `/rosout` messages the gateway publishes per second, all domains; the
/// rest are counted and summarised in the next one.
pub const ROSOUT_PER_SEC: u32 = 100;

/// Nodes one connection may declare.
pub const MAX_NODES_PER_CONN: usize = 64;

/// The biggest `/clock` message kept for `get_time` (a `Clock` is ~50
/// bytes; anything bigger is not a clock).
const MAX_CLOCK_BYTES: usize = 1024;

/// Severity of a `/rosout` line (`rcl_interfaces/msg/Log` levels).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RosoutLevel {
    Info = 20,
    Warn = 30,
}

/// How the graph behaves; the shell sets it from flags.
#[derive(Debug, Clone)]
pub struct GraphSettings {
    /// Domain of TCP connections that do not choose one.
    pub tcp_domain: Domain,
    /// Domain of WebSocket connections whose URL does not choose one.
    pub ws_domain: Domain,
    /// Resolve every connection's names by the ROS 2 rules (`--names
    /// strict`), not only those of connections that declared a node.
    pub strict_names: bool,
    /// `get_time` answers with the latest `/clock` (`--use-sim-time`).
    pub use_sim_time: bool,
    /// What `get_ros_version` reports as the distribution.
    pub distro: String,
    /// The wall-clock time at an instant, for message stamps.
    pub wall_base: (Instant, SystemTime),
}

impl GraphSettings {
    /// Defaults with the wall clock anchored at `now` = `wall`.
    pub fn new(now: Instant, wall: SystemTime) -> GraphSettings {
        GraphSettings {
            tcp_domain: 0,
            ws_domain: 0,
            strict_names: false,
            use_sim_time: false,
            distro: "jazzy".to_string(),
            wall_base: (now, wall),
        }
    }
}

/// Graph events of one domain waiting for the end of the turn.
#[derive(Debug, Default)]
struct Events {
    list: Vec<Value>,
    overflow: bool,
}

/// What waits for the end of the turn. See the module docs.
#[derive(Debug)]
pub(super) struct GraphPending {
    events: HashMap<Domain, Events>,
    /// Domains whose client count changed this turn.
    clients_changed: Vec<Domain>,
    /// Domains whose client list is to be republished.
    list_due: Vec<Domain>,
    /// When the client list may next be rebuilt.
    next_list: Option<Instant>,
    /// An instant in the past (for "due now" without a clock).
    next_list_floor: Instant,
    /// Clients (completed openings) per domain.
    clients: Vec<u32>,
    /// The latest `/clock` message per domain (`--use-sim-time`).
    clock: HashMap<Domain, Box<str>>,
}

impl GraphPending {
    pub(super) fn new(now: Instant) -> Self {
        GraphPending {
            events: HashMap::new(),
            clients_changed: Vec::new(),
            list_due: Vec::new(),
            next_list: None,
            next_list_floor: now,
            clients: vec![0; DOMAINS],
            clock: HashMap::new(),
        }
    }
}

impl GraphPending {
    /// Whether something waits to be published at the next turn's end.
    pub(super) fn has_immediate(&self) -> bool {
        !self.events.is_empty() || !self.clients_changed.is_empty()
    }

    /// When a client list waits to be republished, if one does.
    pub(super) fn list_due_at(&self) -> Option<Instant> {
        if self.list_due.is_empty() {
            return None;
        }
        Some(self.next_list.unwrap_or(self.next_list_floor))
    }

    /// Clients of `domain`.
    pub(super) fn clients(&self, domain: Domain) -> u32 {
        self.clients[domain as usize]
    }
}

/// Why a name, node or opening was refused: the error code and the text.
type Refused = (ErrorCode, String);

/// A node a WebSocket URL declares, checked, waiting for the upgrade
/// response to be queued.
#[derive(Debug)]
pub(super) struct OpeningNode {
    name: String,
    namespace: Option<String>,
    remap: Vec<String>,
}

/// The resolver of node `name` in `namespace` with rules `remap`, or why
/// one of them is invalid.
fn node_resolver(
    name: &str,
    namespace: Option<&str>,
    remap: &[String],
) -> Result<Resolver, Refused> {
    let rules = remap
        .iter()
        .map(|r| Remap::parse(r))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| (ErrorCode::InvalidName, format!("remap rule: {e}")))?;
    Resolver::new(name, namespace.unwrap_or("/"), &rules).map_err(|e| {
        (
            ErrorCode::InvalidName,
            format!(
                "node {name:?} in namespace {:?}: {e}",
                namespace.unwrap_or("/")
            ),
        )
    })
}

impl Hub {
    // ----- names -------------------------------------------------------------

    /// The domain, node and resolved name of `raw` used by `me` for `node`
    /// (or its default node). On a refusal, sends the error status (with
    /// `id`) and returns `None`.
    pub(super) fn resolve_for<'n>(
        &mut self,
        me: ConnRef,
        raw: &'n str,
        node: Option<&str>,
        id: Option<&[u8]>,
        now: Instant,
    ) -> Option<(Domain, NodeTag, Cow<'n, str>)> {
        match self.resolve(me, raw, node) {
            Ok(r) => Some(r),
            Err((code, msg)) => {
                if code == ErrorCode::InvalidName {
                    self.counters.inc(Counter::NamesRejected);
                }
                self.error_with_id(me, code, &msg, id, now);
                None
            }
        }
    }

    fn resolve<'n>(
        &self,
        me: ConnRef,
        raw: &'n str,
        node: Option<&str>,
    ) -> Result<(Domain, NodeTag, Cow<'n, str>), Refused> {
        let Some(conn) = self.conns.get(me.key as usize) else {
            return Err((ErrorCode::UnknownNode, "connection gone".into()));
        };
        let domain = conn.domain();
        let tag = match node {
            Some(n) => self.nodes.find(me, n).ok_or_else(|| {
                (
                    ErrorCode::UnknownNode,
                    format!("this connection declared no node {n:?} (declare_node first)"),
                )
            })?,
            None => self.nodes.default_of(me).unwrap_or(NodeTag::CONN),
        };
        if let Some(n) = self.nodes.get(tag) {
            let name = n.resolver().resolve(raw).map_err(|e| {
                (
                    ErrorCode::InvalidName,
                    format!("invalid name {raw:?} for node {}: {e}", n.full_name()),
                )
            })?;
            return Ok((domain, tag, Cow::Owned(name)));
        }
        if !conn.resolves() {
            return Ok((domain, tag, Cow::Borrowed(raw)));
        }
        // `--names strict` without a node: the connection's own node name,
        // in the root namespace.
        let own = self.conn_node_name(me);
        let node = NodeName::new(own.trim_start_matches('/'), "/")
            .map_err(|e| (ErrorCode::InvalidName, e.to_string()))?;
        let name = node
            .expand(raw)
            .map_err(|e| (ErrorCode::InvalidName, format!("invalid name {raw:?}: {e}")))?;
        Ok((domain, tag, Cow::Owned(name)))
    }

    /// The node name that stands for a connection itself:
    /// `/rosgate_<transport>_<connection id>` (`/rosgate_federation_<id>`
    /// for the link that subscribes on behalf of other gateways).
    pub(crate) fn conn_node_name(&self, who: ConnRef) -> String {
        let transport = self.conns.get(who.key as usize).map_or("gone", |c| {
            if c.is_bridge() {
                "federation"
            } else {
                c.transport().label()
            }
        });
        format!("/rosgate_{transport}_{}", who.gen)
    }

    /// The full name of `who`'s node `tag`.
    pub(crate) fn node_label(&self, who: ConnRef, tag: NodeTag) -> String {
        match self.nodes.get(tag) {
            Some(n) => n.full_name().to_string(),
            None => self.conn_node_name(who),
        }
    }

    // ----- nodes -------------------------------------------------------------

    /// `declare_node`: see docs/protocol.md, "Nodes, names and domains".
    #[allow(clippy::too_many_arguments)]
    pub(super) fn declare_node(
        &mut self,
        me: ConnRef,
        name: &str,
        namespace: Option<&str>,
        remap: &[String],
        domain: Option<u64>,
        id: Option<&[u8]>,
        now: Instant,
    ) {
        if let Err((code, msg)) = self.try_declare(me, name, namespace, remap, domain, id, now) {
            if code == ErrorCode::InvalidName {
                self.counters.inc(Counter::NamesRejected);
            }
            self.error_with_id(me, code, &msg, id, now);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn try_declare(
        &mut self,
        me: ConnRef,
        name: &str,
        namespace: Option<&str>,
        remap: &[String],
        domain: Option<u64>,
        id: Option<&[u8]>,
        now: Instant,
    ) -> Result<(), Refused> {
        let resolver = node_resolver(name, namespace, remap)?;
        let Some(conn) = self.conns.get(me.key as usize) else {
            return Ok(());
        };
        let current = conn.domain();
        let domain = match domain {
            None => current,
            Some(d) if d > u64::from(MAX_DOMAIN) => {
                return Err((
                    ErrorCode::InvalidDomain,
                    format!("domain {d} is out of range (0-{MAX_DOMAIN}, as ROS_DOMAIN_ID)"),
                ))
            }
            Some(d) => d as Domain,
        };
        if domain != current {
            let busy =
                self.registries[current as usize].has_any(me) || !self.nodes.of(me).is_empty();
            if busy {
                return Err((
                    ErrorCode::InvalidDomain,
                    format!(
                        "this connection is in domain {current} and holds registrations or nodes there; a connection's domain can change only before it registers anything"
                    ),
                ));
            }
            self.move_domain(me, domain, now);
        }
        let (tag, same) = self
            .nodes
            .declare(me, domain, resolver, MAX_NODES_PER_CONN)
            .map_err(|e| match e {
                DeclareError::Name(e) => (ErrorCode::InvalidName, e.to_string()),
                DeclareError::Duplicate(n) => (
                    ErrorCode::DuplicateNode,
                    format!("this connection already declared node {n}"),
                ),
                DeclareError::TooMany(limit) => (
                    ErrorCode::TooManyRegistrations,
                    format!("this connection declared {limit} nodes, the limit"),
                ),
            })?;
        if let Some(c) = self.conns.get_mut(me.key as usize) {
            c.set_resolves();
        }
        let full = self.node_label(me, tag);
        self.note_node(domain, me, &full, true);
        let msg = format!("declared node {full} in domain {domain}");
        self.send_status(me, Level::Info, &msg, id, now);
        self.rosout(domain, RosoutLevel::Info, &msg, now);
        if same > 1 {
            let warning = format!(
                "node name {full} is used by {same} nodes in domain {domain}: tools that address a node by name (node_details, parameters) cannot tell them apart"
            );
            let owners: Vec<ConnRef> = self
                .nodes
                .named(domain, &full)
                .filter_map(|t| self.nodes.get(t).map(|n| n.owner()))
                .collect();
            for owner in owners {
                let id = if owner == me { id } else { None };
                self.send_status(owner, Level::Warning, &warning, id, now);
            }
            self.rosout(domain, RosoutLevel::Warn, &warning, now);
        }
        Ok(())
    }

    /// `destroy_node`: withdraws everything the node registered, then the
    /// node.
    pub(super) fn destroy_node(
        &mut self,
        me: ConnRef,
        name: &str,
        id: Option<&[u8]>,
        now: Instant,
    ) {
        let Some(tag) = self.nodes.find(me, name) else {
            let msg = format!("this connection declared no node {name:?}");
            return self.error_with_id(me, ErrorCode::UnknownNode, &msg, id, now);
        };
        let domain = self.conns.get(me.key as usize).map_or(0, |c| c.domain());
        self.note_withdrawal(domain, me, Some(tag));
        let subs: Vec<(crate::registry::TopicId, String)> = {
            let reg = &self.registries[domain as usize];
            reg.topics_of(me, Some(tag), Role::Subscriber)
                .into_iter()
                .filter_map(|n| Some((reg.topic_id(n)?, n.to_string())))
                .collect()
        };
        let provided: Vec<(Provided, String)> = [Provided::Service, Provided::Action]
            .into_iter()
            .flat_map(|kind| {
                self.registries[domain as usize]
                    .provided_of(kind, me, Some(tag))
                    .into_iter()
                    .map(move |s| (kind, s.to_string()))
            })
            .collect();
        self.registries.update(domain, |r| r.withdraw_node(me, tag));
        for (kind, name) in provided {
            self.provided_changed(kind, domain, &name);
        }
        // As after an unsubscribe: a subscription the connection no longer
        // holds leaves its queue's QoS (depth, reliable) and the peer
        // counts of its topic.
        for (t, name) in subs {
            if !self.registries[domain as usize].is_member(me, Role::Subscriber, t) {
                self.after_unsubscribe(domain, me, t);
                self.interest_changed(domain, &name);
            }
        }
        if let Some(full) = self.nodes.get(tag).map(|n| n.full_name().to_string()) {
            self.drop_node_params(domain, &full, (me, tag), now);
        }
        if let Some(node) = self.nodes.remove(tag) {
            self.note_node(domain, me, node.full_name(), false);
            let msg = format!("destroyed node {}", node.full_name());
            self.send_status(me, Level::Info, &msg, id, now);
            self.rosout(domain, RosoutLevel::Info, &msg, now);
        }
    }

    /// `set_level`: which statuses this connection receives from now on.
    pub(super) fn set_level(&mut self, me: ConnRef, level: &str, id: Option<&[u8]>, now: Instant) {
        match level.parse::<StatusFilter>() {
            Ok(f) => {
                if let Some(c) = self.live_mut(me) {
                    c.set_statuses(f);
                }
            }
            Err(e) => self.error_with_id(me, ErrorCode::WrongType, &e, id, now),
        }
    }

    /// Applies what a WebSocket URL asks for (`?domain=3&node=viewer&
    /// namespace=/r1&remap=a:=b`): moves the connection to its domain and
    /// returns the node to declare, checked. The node is declared by
    /// [`Hub::declare_opened`] once the upgrade response is queued, since
    /// its statuses are WebSocket frames and must follow that response. On
    /// a refusal, the HTTP error to send instead of the upgrade.
    pub(super) fn apply_opening(
        &mut self,
        me: ConnRef,
        opening: &Opening,
        now: Instant,
    ) -> Result<Option<OpeningNode>, Vec<u8>> {
        let params = query::params(&opening.target);
        let bad = |msg: String| handshake::refusal(400, "Bad Request", &msg);
        if params.len() > query::MAX_PARAMS {
            return Err(bad(format!(
                "more than {} query parameters",
                query::MAX_PARAMS
            )));
        }
        let (mut domain, mut node, mut namespace, mut remap) = (None, None, None, Vec::new());
        for (k, v) in params {
            match k.as_str() {
                "domain" => {
                    domain = Some(v.parse::<u64>().map_err(|_| {
                        bad(format!("domain {v:?} is not a number (0-{MAX_DOMAIN})"))
                    })?)
                }
                "node" => node = Some(v),
                "namespace" | "ns" => namespace = Some(v),
                "remap" => remap.push(v),
                _ => {} // other parameters (tokens, cache busters) are not ours
            }
        }
        if let Some(d) = domain {
            if d > u64::from(MAX_DOMAIN) {
                return Err(bad(format!("domain {d} is out of range (0-{MAX_DOMAIN})")));
            }
        }
        let node = match node {
            Some(name) => {
                // Checked now so a bad name refuses the upgrade; a fresh
                // connection can meet no other refusal (duplicate, limit).
                node_resolver(&name, namespace.as_deref(), &remap).map_err(|(_, msg)| bad(msg))?;
                Some(OpeningNode {
                    name,
                    namespace,
                    remap,
                })
            }
            None if namespace.is_some() || !remap.is_empty() => {
                return Err(bad(
                    "namespace and remap need a node (?node=NAME)".to_string()
                ))
            }
            None => None,
        };
        if let Some(d) = domain {
            self.move_domain(me, d as Domain, now);
        }
        Ok(node)
    }

    /// Declares the node a WebSocket URL asked for (see
    /// [`Hub::apply_opening`]), after the upgrade response.
    pub(super) fn declare_opened(&mut self, me: ConnRef, node: OpeningNode, now: Instant) {
        let namespace = node.namespace.as_deref();
        self.declare_node(me, &node.name, namespace, &node.remap, None, None, now);
    }

    /// Puts `me` (holding nothing yet) in `domain`, moving its client count
    /// and, once it is established, its announcement.
    fn move_domain(&mut self, me: ConnRef, domain: Domain, now: Instant) {
        let Some(c) = self.conns.get(me.key as usize) else {
            return;
        };
        let (old, established) = (c.domain(), c.is_established());
        if old == domain {
            return;
        }
        // An established connection was announced in its old domain (a TCP
        // client is announced on its first line, before that line can choose
        // a domain). It leaves that graph, so every `client_connected` there
        // has its `client_disconnected`, and joins the new one, whose graph
        // and /rosout then know the client before its node.
        if established {
            self.client_left(me, "domain_changed", false, now);
        }
        if let Some(c) = self.conns.get_mut(me.key as usize) {
            c.set_domain(domain);
        }
        if established {
            self.client_joined(me, now);
        }
    }

    // ----- clients -----------------------------------------------------------

    /// A connection completed its opening.
    pub(super) fn client_joined(&mut self, me: ConnRef, now: Instant) {
        let Some(c) = self.conns.get(me.key as usize) else {
            return;
        };
        let (domain, transport, peer) = (c.domain(), c.transport(), c.peer());
        self.graph.clients[domain as usize] += 1;
        self.clients_changed(domain);
        let client = self.conn_node_name(me);
        let address = peer.map(|p| p.to_string()).unwrap_or_default();
        self.note(
            domain,
            json!({"event":"client_connected","client":client,"address":address,"transport":transport.label()}),
        );
        let msg = format!(
            "client {client} connected from {address} ({})",
            transport.label()
        );
        self.rosout(domain, RosoutLevel::Info, &msg, now);
    }

    /// A connection that had completed its opening is being freed.
    pub(super) fn client_left(&mut self, me: ConnRef, reason: &str, forced: bool, now: Instant) {
        let Some(c) = self.conns.get(me.key as usize) else {
            return;
        };
        let domain = c.domain();
        self.graph.clients[domain as usize] -= 1;
        self.clients_changed(domain);
        let client = self.conn_node_name(me);
        self.note(
            domain,
            json!({"event":"client_disconnected","client":client,"reason":reason}),
        );
        let level = if forced {
            RosoutLevel::Warn
        } else {
            RosoutLevel::Info
        };
        let msg = format!("client {client} disconnected ({reason})");
        self.rosout(domain, level, &msg, now);
    }

    /// Marks `domain`'s client count and list for republishing, where
    /// anyone listens (a later subscriber gets the current value at once).
    fn clients_changed(&mut self, domain: Domain) {
        if self.listens(domain, CLIENT_COUNT) && !self.graph.clients_changed.contains(&domain) {
            self.graph.clients_changed.push(domain);
        }
        if self.listens(domain, CONNECTED_CLIENTS) && !self.graph.list_due.contains(&domain) {
            self.graph.list_due.push(domain);
        }
    }

    // ----- graph events -------------------------------------------------------

    /// Whether anyone in `domain` subscribes to `topic`.
    pub(super) fn listens(&self, domain: Domain, topic: &str) -> bool {
        self.registries[domain as usize]
            .topic_named(topic)
            .is_some_and(|t| !t.subscribers().is_empty())
    }

    /// Records a graph event for `domain`, if anyone listens there.
    fn note(&mut self, domain: Domain, event: Value) {
        if !self.listens(domain, GRAPH_TOPIC) {
            return;
        }
        let e = self.graph.events.entry(domain).or_default();
        if e.list.len() < MAX_GRAPH_EVENTS {
            e.list.push(event);
        } else {
            e.overflow = true;
        }
    }

    /// A node of connection `who` appeared or went; `client` names the
    /// connection as `client_connected` did, so a viewer links the two.
    pub(super) fn note_node(&mut self, domain: Domain, who: ConnRef, full_name: &str, added: bool) {
        self.node_services_changed(domain, full_name, added);
        if !self.listens(domain, GRAPH_TOPIC) {
            return;
        }
        let event = if added { "node_added" } else { "node_removed" };
        let client = self.conn_node_name(who);
        self.note(
            domain,
            json!({"event":event,"node":full_name,"client":client}),
        );
    }

    /// A node started or stopped publishing or subscribing `topic`.
    pub(super) fn note_endpoint(
        &mut self,
        domain: Domain,
        who: ConnRef,
        tag: NodeTag,
        role: Role,
        topic: &str,
        added: bool,
    ) {
        if !self.listens(domain, GRAPH_TOPIC) {
            return;
        }
        let event = match (role, added) {
            (Role::Publisher, true) => "publisher_added",
            (Role::Publisher, false) => "publisher_removed",
            (Role::Subscriber, true) => "subscriber_added",
            (Role::Subscriber, false) => "subscriber_removed",
        };
        let ty = self.registries[domain as usize]
            .topic_named(topic)
            .map_or("", |t| t.ty())
            .to_string();
        let node = self.node_label(who, tag);
        self.note(
            domain,
            json!({"event":event,"topic":topic,"node":node,"type":ty}),
        );
    }

    /// A node started or stopped providing `service`.
    pub(super) fn note_service(
        &mut self,
        domain: Domain,
        who: ConnRef,
        tag: NodeTag,
        service: &str,
        ty: &str,
        added: bool,
    ) {
        self.note_provided(Provided::Service, domain, who, tag, service, ty, added);
    }

    /// A node started or stopped providing `name` (a service or action).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn note_provided(
        &mut self,
        kind: Provided,
        domain: Domain,
        who: ConnRef,
        tag: NodeTag,
        name: &str,
        ty: &str,
        added: bool,
    ) {
        if !self.listens(domain, GRAPH_TOPIC) {
            return;
        }
        let node = self.node_label(who, tag);
        let what = kind.label();
        let event = if added {
            json!({"event":format!("{what}_added"),what:name,"node":node,"type":ty})
        } else {
            json!({"event":format!("{what}_removed"),what:name,"node":node})
        };
        self.note(domain, event);
    }

    /// Another provider took `service` over.
    pub(super) fn note_service_replaced(
        &mut self,
        domain: Domain,
        service: &str,
        node: &str,
        previous: &str,
    ) {
        self.note_provider_replaced(Provided::Service, domain, service, node, previous);
    }

    /// Another provider took `name` (a service or action) over.
    pub(super) fn note_provider_replaced(
        &mut self,
        kind: Provided,
        domain: Domain,
        name: &str,
        node: &str,
        previous: &str,
    ) {
        let what = kind.label();
        self.note(
            domain,
            json!({"event":format!("{what}_replaced"),what:name,"node":node,"previous":previous}),
        );
    }

    /// Events for everything `who` (or only its node `only`) registered,
    /// before it is withdrawn; stops early once the turn's events are full.
    pub(super) fn note_withdrawal(&mut self, domain: Domain, who: ConnRef, only: Option<NodeTag>) {
        if !self.listens(domain, GRAPH_TOPIC) {
            return;
        }
        let registry = &self.registries[domain as usize];
        let mut events = Vec::new();
        'roles: for role in [Role::Publisher, Role::Subscriber] {
            for topic in registry.topics_of(who, only, role) {
                let Some(t) = registry.topic_id(topic) else {
                    continue;
                };
                for tag in registry.nodes_on(who, t, role) {
                    if only.is_some_and(|o| o != tag) {
                        continue;
                    }
                    if events.len() > MAX_GRAPH_EVENTS {
                        break 'roles;
                    }
                    events.push((role, topic.to_string(), tag));
                }
            }
        }
        let mut provided: Vec<(Provided, String, NodeTag)> = Vec::new();
        for kind in [Provided::Service, Provided::Action] {
            provided.extend(
                registry
                    .provided_of(kind, who, only)
                    .into_iter()
                    .take(MAX_GRAPH_EVENTS)
                    .filter_map(|s| {
                        registry
                            .provided(kind, s)
                            .map(|x| (kind, s.to_string(), x.node()))
                    }),
            );
        }
        for (role, topic, tag) in events {
            self.note_endpoint(domain, who, tag, role, &topic, false);
        }
        for (kind, name, tag) in provided {
            self.note_provided(kind, domain, who, tag, &name, "", false);
        }
    }

    // ----- what the gateway publishes ------------------------------------------

    /// The wall-clock time at `now`, as (seconds, nanoseconds) since the
    /// Unix epoch.
    pub(super) fn wall(&self, now: Instant) -> (u64, u32) {
        let (at, wall) = self.settings.wall_base;
        let t = if now >= at {
            wall + (now - at)
        } else {
            wall - (at - now)
        };
        let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
        (d.as_secs(), d.subsec_nanos())
    }

    /// Publishes a gateway log line on `/rosout` in `domain`, if anyone
    /// listens there and the rate allows it (see [`ROSOUT_PER_SEC`]).
    pub(super) fn rosout(&mut self, domain: Domain, level: RosoutLevel, msg: &str, now: Instant) {
        if !self.listens(domain, ROSOUT) {
            return;
        }
        let suppressed = match self.rosout_limit.admit(now) {
            Admit::Yes { suppressed } => suppressed,
            Admit::No => return,
        };
        let text = if suppressed > 0 {
            format!("{msg} ({suppressed} earlier gateway log lines suppressed)")
        } else {
            msg.to_string()
        };
        let (sec, nanosec) = self.wall(now);
        let line = json!({
            "stamp": {"sec": sec, "nanosec": nanosec},
            "level": level as u8,
            "name": "rosgate",
            "msg": text,
            "file": "",
            "function": "",
            "line": 0,
        })
        .to_string();
        self.route(
            Origin::Gateway,
            domain,
            ROSOUT,
            Raw::from_valid_json(&line),
            now,
        );
    }

    /// What a new subscriber of one of the gateway's latched topics
    /// receives at once: the current value.
    pub(super) fn greet_subscriber(
        &mut self,
        domain: Domain,
        me: ConnRef,
        topic: &str,
        now: Instant,
    ) {
        let msg = match topic {
            CLIENT_COUNT => self.client_count_msg(domain),
            CONNECTED_CLIENTS => self.client_list_msg(domain, now),
            _ => return,
        };
        let mut out = Vec::with_capacity(msg.len() + 64);
        encode::publish(
            &mut out,
            &encode::publish_prefix(topic),
            Raw::from_valid_json(&msg),
        );
        self.send_control(me, &out, now);
    }

    fn client_count_msg(&self, domain: Domain) -> String {
        format!("{{\"data\":{}}}", self.graph.clients(domain))
    }

    fn client_list_msg(&mut self, domain: Domain, _now: Instant) -> String {
        let mut clients = Vec::new();
        for (_, c) in self.conns.iter() {
            if c.domain() != domain || !c.is_established() || !c.is_open() || c.is_bridge() {
                continue;
            }
            let (sec, nanosec) = self.wall(c.opened_at());
            clients.push(json!({
                "ip_address": c.peer().map(|p| p.ip().to_string()).unwrap_or_default(),
                "connection_time": {"sec": sec, "nanosec": nanosec},
            }));
        }
        self.counters
            .add(Counter::IntrospectionItems, clients.len() as u64);
        json!({ "clients": clients }).to_string()
    }

    /// Publishes what waited for the end of the turn: graph events, client
    /// counts, and (at most every [`CONNECTED_CLIENTS_INTERVAL`]) client
    /// lists.
    pub(super) fn flush_graph(&mut self, now: Instant) {
        let events: Vec<(Domain, Events)> = self.graph.events.drain().collect();
        for (domain, e) in events {
            let msg = json!({"events": e.list, "resync": e.overflow}).to_string();
            self.route(
                Origin::Gateway,
                domain,
                GRAPH_TOPIC,
                Raw::from_valid_json(&msg),
                now,
            );
        }
        for domain in std::mem::take(&mut self.graph.clients_changed) {
            if self.listens(domain, CLIENT_COUNT) {
                let msg = self.client_count_msg(domain);
                self.route(
                    Origin::Gateway,
                    domain,
                    CLIENT_COUNT,
                    Raw::from_valid_json(&msg),
                    now,
                );
            }
        }
        if self.graph.next_list.is_some_and(|t| now < t) {
            return;
        }
        for domain in std::mem::take(&mut self.graph.list_due) {
            if self.listens(domain, CONNECTED_CLIENTS) {
                let msg = self.client_list_msg(domain, now);
                self.route(
                    Origin::Gateway,
                    domain,
                    CONNECTED_CLIENTS,
                    Raw::from_valid_json(&msg),
                    now,
                );
                self.graph.next_list = Some(now + CONNECTED_CLIENTS_INTERVAL);
            }
        }
    }

    // ----- sim time -------------------------------------------------------------

    /// Whether a publish on `topic` is a clock the gateway keeps.
    #[inline]
    pub(super) fn sim_time_watch(&self, _domain: Domain, topic: &str) -> bool {
        self.settings.use_sim_time && topic == CLOCK
    }

    /// Keeps the latest `/clock` message of `domain`.
    pub(super) fn note_clock(&mut self, domain: Domain, msg: Raw<'_>) {
        if msg.get().len() <= MAX_CLOCK_BYTES {
            self.graph.clock.insert(domain, msg.get().into());
        }
    }

    /// The time `get_time` answers: wall clock, or under `--use-sim-time`
    /// the latest `/clock` (an error when nobody published one).
    pub(super) fn graph_time(&self, domain: Domain, now: Instant) -> Result<(u64, u32), String> {
        if !self.settings.use_sim_time {
            return Ok(self.wall(now));
        }
        let Some(clock) = self.graph.clock.get(&domain) else {
            return Err(format!(
                "the gateway runs with --use-sim-time and nobody has published {CLOCK} in domain {domain}: simulated time would be frozen at 0"
            ));
        };
        let v: Value = serde_json::from_str(clock).unwrap_or(Value::Null);
        let t = &v["clock"];
        let sec = t["sec"].as_u64().or_else(|| t["secs"].as_u64());
        let nsec = t["nanosec"].as_u64().or_else(|| t["nsecs"].as_u64());
        match (sec, nsec) {
            (Some(s), Some(n)) => Ok((s, n.min(999_999_999) as u32)),
            _ => Err(format!(
                "the latest {CLOCK} message is not a rosgraph_msgs/msg/Clock ({{\"clock\":{{\"sec\":..,\"nanosec\":..}}}})"
            )),
        }
    }
}
