//! The ROS 2 link as a sans-io state machine (issue 24): what rosgate
//! keeps of a ROS 2 graph and of the work crossing it, with events in and
//! actions out, as quinn-proto and rustls are shaped. It owns:
//! - the graph: ROS 2 entities by GID ([`Entity`]: node, publisher,
//!   subscription, service server or client, with type, type hash and
//!   QoS), which services and actions ROS 2 serves, which topics it
//!   subscribes to, and which participants are rosgate gateways;
//! - the types: the [`Registry`] the shell's codec reads (a snapshot,
//!   [`Link::types`]), with those learned from nodes
//!   (`~/get_type_description`, [`types`]);
//! - topics' data: which topics local clients want, ROS 2 publishers by
//!   GID (so a sample finds its type, its transient local depth, and
//!   whether a rosgate gateway or this gateway itself published it), and
//!   this gateway's publishers to ROS 2, typed as the ROS 2 subscriptions
//!   declared ([`Action::Publisher`], [`Action::Put`]);
//! - calls both ways ([`calls`]) and goals both ways ([`goals_out`],
//!   [`goals_in`]).
//!
//! It knows no transport: rmw_zenoh's keys, tokens and attachments are
//! mapped to and from these terms by an adapter ([`rmw_zenoh`]), and a DDS
//! adapter can do the same with topics and discovery. Payloads are opaque
//! bytes the link never reads (CDR on the ROS 2 side; the shell converts at
//! the hub's edge, on the loop thread, by the type an action names and the
//! registry the link holds). Time is only what
//! [`Event::Tick`] and the hub's commands pass in: there is no clock, lock,
//! thread or socket here.
//!
//! Use: feed [`Link::handle`] events (the graph, the network, the hub's
//! commands, ticks) and drain [`Link::poll`] until `None`, executing each
//! [`Action`] (declare, undeclare, put, query, reply, deliver to the hub).
//!
//! Invariants (docs/ros2.md):
//! - every call from ROS 2 gets exactly one reply or error, and every call
//!   to ROS 2 ends in exactly one service response to the hub;
//! - every goal ends exactly once, both ways;
//! - a sample from a rosgate gateway's publisher (recognised by its
//!   participant) or from this gateway's own (by GID,
//!   [`Event::OwnPublisher`]) is dropped: it crosses the federation
//!   already, or it is not news; so is one of a publisher not known, or of
//!   a type not known (counted);
//! - a type is asked of a node once, and used only when its description
//!   hashes to what the node advertised;
//! - an entity is remembered only when its names pass rmw's rules and
//!   the bounds on entities and nodes leave room ([`admit`]);
//! - every table is bounded by a named constant below.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::registry::Registry;

pub use crate::rmw::{EntityKind, Qos};

pub mod admit;
pub mod calls;
pub mod goals_in;
pub mod goals_out;
mod graph;
pub mod rmw_dds;
pub mod rmw_zenoh;
pub mod types;

#[cfg(test)]
mod tests;

/// A ROS 2 entity's GID (rmw_zenoh: XXH3-128 of its token; DDS: its GUID).
pub type Gid = [u8; 16];

/// A ROS 2 domain id.
pub type Domain = u32;

/// A wall-clock time as ROS 2 messages carry it (seconds, nanoseconds),
/// stamped by the shell: a goal's acceptance, a cancel's "accepted at or
/// before". The link only compares and returns these; it reads no clock.
pub type Stamp = (i64, u32);

/// ROS 2 entities remembered; more are ignored (and counted).
pub const MAX_ENTITIES: usize = 65536;
/// Calls from ROS 2 clients waiting for a local provider.
pub const MAX_CALLS_IN: usize = 4096;
/// Calls from local clients waiting for a ROS 2 server.
pub const MAX_CALLS_OUT: usize = 4096;
/// The longest a call waits for its answer, either way.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(300);
/// Goals in flight to ROS 2 action servers.
pub const MAX_GOALS_OUT: usize = 4096;
/// The longest a goal to ROS 2 stays in flight.
pub const GOAL_TIMEOUT: Duration = Duration::from_secs(24 * 3600);
/// Goals from ROS 2 clients kept (running and ended).
pub const MAX_GOALS_IN: usize = 4096;
/// Ended goals from ROS 2 whose results are kept for late `get_result`s.
pub const MAX_ENDED_GOALS: usize = 1024;
/// `get_result` requests one goal from ROS 2 keeps waiting.
pub const MAX_RESULT_WAITERS: usize = 16;
/// Types asked of nodes, ever (each once).
pub const MAX_FETCHES: usize = 1024;
/// Types asked of one node.
pub const MAX_FETCHES_PER_NODE: usize = 64;
/// Types asked of nodes between two ticks (a loop turn); the rest wait.
pub const FETCHES_PER_TURN: usize = 16;
/// The longest a node may take to describe a type.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// Participants known to be rosgate gateways.
pub const MAX_ROSGATE_PARTICIPANTS: usize = 1024;

/// One ROS 2 graph entity, whatever the transport that announced it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entity {
    pub gid: Gid,
    pub kind: EntityKind,
    pub domain: Domain,
    /// The session or participant it lives in (rmw_zenoh: the Zenoh id).
    pub participant: String,
    /// The node's fully qualified name (`/robot1/talker`).
    pub node: String,
    /// Topic or service name (empty for a node).
    pub name: String,
    /// ROS type name (`std_msgs/msg/String`; a service's `.../srv/X`).
    pub ty: String,
    /// RIHS01 hash the entity advertised.
    pub hash: String,
    pub qos: Qos,
}

/// A query the link asked the shell to send (its replies come back with it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QueryId(pub u64);

/// A request a ROS 2 client sent here, numbered by the shell; answered by
/// exactly one [`Action::Reply`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct InQuery(pub u64);

/// An answer to one of the link's queries, as the adapter decoded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// A service's response (CDR).
    Service(Vec<u8>),
    /// `send_goal`'s response: accepted or not.
    Accepted(bool),
    /// `get_result`'s response: the goal's status and result (CDR).
    Result { status: i8, payload: Vec<u8> },
    /// `cancel_goal`'s response code.
    Cancel(i8),
    /// `get_type_description`'s: the `type_description` (JSON, as the
    /// codec decodes it), or `None` when the node did not describe the
    /// type.
    Described(Option<serde_json::Value>),
    /// The peer answered with an error.
    Refused(String),
}

/// What a ROS 2 client asked of a service or action this gateway offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// A plain service call (request CDR).
    Service(Vec<u8>),
    /// `send_goal`: the goal's UUID, the time it is accepted at (if it
    /// is), and the goal (CDR).
    SendGoal {
        uuid: [u8; 16],
        stamp: Stamp,
        payload: Vec<u8>,
    },
    /// `get_result` for a goal.
    GetResult { uuid: [u8; 16] },
    /// `cancel_goal`: the goal `uuid`, or (a zero UUID) every goal of the
    /// action accepted at or before `before` (all, for a zero stamp), as
    /// rclcpp picks them.
    CancelGoal { uuid: [u8; 16], before: Stamp },
}

/// What the link is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Time passed: deadlines up to `now` fire.
    Tick(Instant),
    /// A ROS 2 entity appeared.
    Appeared(Entity),
    /// A ROS 2 entity went.
    Gone(Gid),
    /// A participant is (or is no longer) a rosgate gateway: samples from
    /// its publishers are not delivered (they cross the federation).
    Rosgate { participant: String, present: bool },
    /// A sample from a ROS 2 publisher: its type (a ROS name) and hash as
    /// the transport said them (rmw_zenoh: the key), its publisher's GID
    /// when the sample names one (rmw_zenoh: the attachment), its CDR.
    Sample {
        domain: Domain,
        topic: String,
        publisher: Option<Gid>,
        ty: String,
        hash: String,
        payload: Vec<u8>,
    },
    /// The shell declared (or withdrew) one of this gateway's own
    /// publishers to ROS 2: its samples, read back (a history query reads
    /// this gateway's caches too), are not news.
    OwnPublisher { gid: Gid, on: bool },
    /// An answer to one of the link's queries.
    Reply { query: QueryId, reply: Reply },
    /// One of the link's queries ended (after its reply, or without one).
    QueryEnd { query: QueryId },
    /// A ROS 2 client's request to something this gateway offers.
    Request {
        now: Instant,
        query: InQuery,
        domain: Domain,
        name: String,
        request: Request,
    },
    /// A goal's feedback from a ROS 2 action server.
    Feedback {
        domain: Domain,
        action: String,
        uuid: [u8; 16],
        payload: Vec<u8>,
    },
    /// A type is known by name, without a definition (simulations and
    /// tests; the shell's types are the registry the link is made with).
    KnownType(String),
    /// The hub has local subscribers of a topic (or no longer); `ty` is
    /// the type they named, if any.
    Want {
        domain: Domain,
        topic: String,
        ty: Option<String>,
        on: bool,
    },
    /// The hub publishes on a topic (payload in the hub's form); `latched`
    /// is the depth the hub keeps when the topic is latched (transient
    /// local); `cdr`, the message's own CDR with its full type name when
    /// it came as CDR (a client's, or a sample of the other ROS 2 side).
    Publish {
        domain: Domain,
        topic: String,
        latched: Option<u32>,
        payload: Vec<u8>,
        cdr: Option<(String, Vec<u8>)>,
    },
    /// The hub offers a service (`ty`), or stops (`None`).
    Provide {
        domain: Domain,
        name: String,
        ty: Option<String>,
    },
    /// The hub serves an action (`ty`), or stops (`None`).
    Serve {
        domain: Domain,
        name: String,
        ty: Option<String>,
    },
    /// A local client calls a ROS 2 service; `id` is the hub's call id.
    Call {
        now: Instant,
        id: String,
        domain: Domain,
        service: String,
        payload: Vec<u8>,
    },
    /// The local provider answered a ROS 2 client's call.
    Answer {
        call: u64,
        result: Result<Vec<u8>, String>,
    },
    /// A local client sends a goal to a ROS 2 action server.
    SendGoal {
        now: Instant,
        id: String,
        domain: Domain,
        action: String,
        uuid: [u8; 16],
        payload: Vec<u8>,
    },
    /// A local client cancels its goal.
    CancelGoal { domain: Domain, id: String },
    /// A local action server's feedback or end for a goal from ROS 2.
    GoalUpdate { goal: u64, update: GoalUpdate },
}

/// What a local action server said of a goal from ROS 2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GoalUpdate {
    Feedback(Vec<u8>),
    End { status: i8, payload: Vec<u8> },
}

/// What the hub is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToHub {
    /// A ROS 2 sample (CDR of `ty`, a known type, with the hash its
    /// publisher gave); `latched` is the depth when its publisher is
    /// transient local (the hub keeps that many for late subscribers).
    Sample {
        domain: Domain,
        topic: String,
        ty: String,
        hash: String,
        latched: Option<u32>,
        payload: Vec<u8>,
    },
    /// ROS 2 subscribes to a topic (`ty`), or no longer (`None`): the
    /// hub's bridge subscribes for it.
    Interest {
        domain: Domain,
        topic: String,
        ty: Option<String>,
    },
    /// ROS 2 serves a service or action (`ty`), or no longer (`None`).
    Provider {
        domain: Domain,
        name: String,
        action: bool,
        ty: Option<String>,
    },
    /// The one answer to a local client's call of `service`.
    ServiceResponse {
        domain: Domain,
        service: String,
        id: String,
        result: Result<Vec<u8>, String>,
    },
    /// A ROS 2 client's call for the local provider; answered by
    /// [`Event::Answer`] with the same `call`.
    Call {
        call: u64,
        domain: Domain,
        service: String,
        payload: Vec<u8>,
    },
    /// Feedback for a local client's goal.
    GoalFeedback {
        domain: Domain,
        action: String,
        id: String,
        payload: Vec<u8>,
    },
    /// The one end of a local client's goal: status 0 rejected, 6 aborted
    /// (with the reason), else the server's.
    GoalEnd {
        domain: Domain,
        action: String,
        id: String,
        status: i8,
        result: Result<Vec<u8>, String>,
    },
    /// A ROS 2 client's goal for the local action server (`ra<goal>`).
    Goal {
        goal: u64,
        domain: Domain,
        action: String,
        payload: Vec<u8>,
    },
    /// A ROS 2 client cancels a goal the local server runs.
    CancelGoal { goal: u64 },
    /// A type the link learned from a node (query `query`): the
    /// registry ([`Link::types`]) has it now.
    LearnType { query: QueryId, ty: String },
}

/// What the link asks the shell to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Subscribe to a topic's samples (any type), or stop; `ty` is the
    /// type (full name) and hash local clients named, when known (the
    /// subscription may be announced as of that type).
    Subscribe {
        domain: Domain,
        topic: String,
        ty: Option<(String, String)>,
        on: bool,
    },
    /// Watch an action's feedback topic, or stop.
    WatchFeedback {
        domain: Domain,
        action: String,
        on: bool,
    },
    /// Declare this gateway's publisher of a topic, typed as the ROS 2
    /// subscription declared it (for ROS 2 to match), or undeclare it
    /// (`on` false). With `latched`, a transient local publisher keeping
    /// that many samples for late subscriptions (as rmw_zenoh makes one).
    Publisher {
        domain: Domain,
        topic: String,
        ty: String,
        hash: String,
        latched: Option<u32>,
        on: bool,
    },
    /// Put a sample on a topic, typed as the ROS 2 subscription declared:
    /// `cdr` as it is when the message came as CDR of that very type
    /// (ROS 2 gets the publisher's bytes untouched), else `payload`
    /// encoded.
    Put {
        domain: Domain,
        topic: String,
        ty: String,
        hash: String,
        payload: Vec<u8>,
        cdr: Option<Vec<u8>>,
    },
    /// Offer a local service (or action) to ROS 2, or withdraw it.
    Offer {
        domain: Domain,
        name: String,
        ty: String,
        action: bool,
        on: bool,
    },
    /// Call a ROS 2 service of server `server`.
    Query {
        query: QueryId,
        domain: Domain,
        service: String,
        ty: String,
        hash: String,
        server: Gid,
        payload: Vec<u8>,
    },
    /// `send_goal` to a ROS 2 action server.
    SendGoal {
        query: QueryId,
        domain: Domain,
        action: String,
        uuid: [u8; 16],
        payload: Vec<u8>,
    },
    /// `get_result` of an accepted goal.
    GetResult {
        query: QueryId,
        domain: Domain,
        action: String,
        uuid: [u8; 16],
    },
    /// `cancel_goal` of an accepted goal.
    CancelGoal {
        query: QueryId,
        domain: Domain,
        action: String,
        uuid: [u8; 16],
    },
    /// Ask a node to describe a type (`~/get_type_description`).
    Describe {
        query: QueryId,
        domain: Domain,
        node: String,
        ty: String,
        hash: String,
    },
    /// The one answer to a ROS 2 client's request.
    Reply { query: InQuery, reply: Answer },
    /// Put an action's feedback for a goal from ROS 2.
    PutFeedback {
        domain: Domain,
        action: String,
        uuid: [u8; 16],
        payload: Vec<u8>,
    },
    /// Put an action's status array (every goal kept: uuid, acceptance
    /// stamp and status).
    PutStatus {
        domain: Domain,
        action: String,
        goals: Vec<([u8; 16], Stamp, i8)>,
    },
    /// Tell the hub.
    Deliver(ToHub),
}

/// The answer to a ROS 2 client's request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Service(Vec<u8>),
    Accepted(bool),
    Result {
        status: i8,
        payload: Vec<u8>,
    },
    /// `cancel_goal`'s return code and the goals now canceling (uuid and
    /// acceptance stamp).
    Cancel {
        code: i8,
        goals: Vec<([u8; 16], Stamp)>,
    },
    Error(String),
}

/// Counters for `/rosgate/federation`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    pub entities: usize,
    /// Nodes whose entities are remembered.
    pub nodes: usize,
    /// Bytes the entities remembered hold, as the memory ledger counts them.
    pub bytes: usize,
    /// Entities refused by the name rules ([`admit`]), ever.
    pub names_rejected: u64,
    /// Entities refused by the bounds on entities and nodes ([`admit`]), ever.
    pub refused: u64,
    /// Entities, participants or requests ignored past a bound.
    pub ignored: u64,
    /// Samples dropped because a rosgate gateway published them.
    pub echoes: u64,
    /// Samples dropped because this gateway published them.
    pub own: u64,
    /// Samples dropped because their type is not known.
    pub unknown_type: u64,
    /// Topics ROS 2 subscribes to, and services (and action parts) it
    /// serves.
    pub topics_subscribed: usize,
    pub services_served: usize,
    pub types_asked: usize,
    pub types_learned: u64,
    /// Descriptions not used (they did not hash as advertised).
    pub types_refused: u64,
    /// Types asked, waiting for a later turn.
    pub types_waiting: usize,
    pub calls_in: usize,
    pub calls_out: usize,
    pub goals_out: usize,
    pub goals_in: usize,
}

/// The link: see the module's header.
#[derive(Debug, Default)]
pub struct Link {
    entities: HashMap<Gid, Entity>,
    /// Per (domain, name): the GIDs of ROS 2 publishers, subscriptions and
    /// servers of it.
    publishers: HashMap<(Domain, String), BTreeSet<Gid>>,
    subscriptions: HashMap<(Domain, String), BTreeSet<Gid>>,
    servers: HashMap<(Domain, String), BTreeSet<Gid>>,
    /// Actions offered to the hub: all five entities known.
    actions: HashSet<(Domain, String)>,
    rosgate: HashSet<String>,
    /// GIDs of this gateway's own publishers to ROS 2 (at most
    /// [`MAX_ENTITIES`]).
    own: HashSet<Gid>,
    /// Topics the hub has local subscribers of.
    wanted: HashSet<(Domain, String)>,
    /// Services and actions the hub offers: name -> type.
    provided: HashMap<(Domain, String), String>,
    served: HashMap<(Domain, String), String>,
    /// This gateway's publishers to ROS 2: the type, hash and latched
    /// depth each was declared with. At most one per topic ROS 2
    /// subscribes to (so bounded by [`MAX_ENTITIES`]).
    publishing: HashMap<(Domain, String), (String, String, Option<u32>)>,
    admission: admit::Admission,
    graph: graph::Graph,
    types: types::Types,
    calls: calls::Calls,
    goals_out: goals_out::GoalsOut,
    goals_in: goals_in::GoalsIn,
    next_query: u64,
    ignored: u64,
    echoes: u64,
    own_samples: u64,
    unknown_type: u64,
    out: VecDeque<Action>,
}

impl Link {
    /// A link that knows no type (until it learns them).
    pub fn new() -> Link {
        Link::default()
    }

    /// A link whose codec types are `types` (bundled and `--interfaces`).
    pub fn with_types(types: Registry) -> Link {
        Link {
            types: types::Types::new(types),
            ..Link::default()
        }
    }

    /// The types known now: a snapshot, replaced whole when a type is
    /// learned (compare with [`Arc::ptr_eq`] to see a change).
    pub fn types(&self) -> &Arc<Registry> {
        self.types.registry()
    }

    /// The ROS 2 server of `name` calls and goals go to (the lowest GID),
    /// with its type and hash.
    pub fn server_of(&self, domain: Domain, name: &str) -> Option<&Entity> {
        self.server(domain, name)
    }

    /// Whether the link has asks waiting for a later turn (the shell then
    /// turns again soon).
    pub fn wants_turn(&self) -> bool {
        self.types.waiting() > 0
    }

    /// The next thing to do, in order; `None` when there is nothing more.
    pub fn poll(&mut self) -> Option<Action> {
        self.out.pop_front()
    }

    /// Whether a ROS 2 server of `service` is known: then a call of it is
    /// the link's to send.
    pub fn serves_service(&self, domain: Domain, service: &str) -> bool {
        self.server(domain, service).is_some()
    }

    /// Whether ROS 2 serves `action` (all five of its entities are known):
    /// then a goal for it is the link's to send.
    pub fn serves_action(&self, domain: Domain, action: &str) -> bool {
        self.actions.contains(&(domain, action.to_string()))
    }

    /// The action goal `n` from ROS 2 is for (domain and name), while the
    /// link keeps it.
    pub fn goal_in(&self, n: u64) -> Option<(Domain, &str)> {
        self.goals_in.action_of(n)
    }

    /// The graph of `domain` as introspection lists it: its nodes, and its
    /// topics with their type and subscription count.
    pub fn graph(&self, domain: Domain) -> (Vec<String>, Vec<(String, String, u32)>) {
        self.graph.lists(domain)
    }

    /// A number that changes whenever [`Link::graph`] may have.
    pub fn graph_generation(&self) -> u64 {
        self.graph.generation()
    }

    /// `get_result` requests from ROS 2 clients waiting for goals to end.
    pub fn results_waiting(&self) -> usize {
        self.goals_in.waiting()
    }

    /// Whether the hub's goal `id` is in flight to ROS 2 through the link.
    pub fn has_goal_out(&self, domain: Domain, id: &str) -> bool {
        self.goals_out.has(domain, id)
    }

    /// Counters.
    pub fn stats(&self) -> Stats {
        Stats {
            entities: self.entities.len(),
            nodes: self.admission.nodes(),
            bytes: self.admission.bytes(),
            names_rejected: self.admission.names_rejected,
            refused: self.admission.refused,
            ignored: self.ignored,
            echoes: self.echoes,
            own: self.own_samples,
            unknown_type: self.unknown_type,
            topics_subscribed: self.subscriptions.len(),
            services_served: self.servers.len(),
            types_asked: self.types.asked(),
            types_learned: self.types.learned(),
            types_refused: self.types.refused(),
            types_waiting: self.types.waiting(),
            calls_in: self.calls.inbound(),
            calls_out: self.calls.outbound(),
            goals_out: self.goals_out.len(),
            goals_in: self.goals_in.len(),
        }
    }

    /// Takes one event.
    pub fn handle(&mut self, event: Event) {
        match event {
            Event::Tick(now) => {
                calls::tick(self, now);
                goals_out::tick(self, now);
                types::tick(self, now);
            }
            Event::Appeared(e) => self.appeared(e),
            Event::Gone(gid) => self.gone(gid),
            Event::Rosgate {
                participant,
                present,
            } => {
                if !present {
                    self.rosgate.remove(&participant);
                } else if self.rosgate.len() < MAX_ROSGATE_PARTICIPANTS {
                    self.rosgate.insert(participant);
                } else {
                    self.ignored += 1;
                }
            }
            Event::Sample {
                domain,
                topic,
                publisher,
                ty,
                hash,
                payload,
            } => self.sample(domain, topic, publisher, (ty, hash), payload),
            Event::OwnPublisher { gid, on } => {
                if !on {
                    self.own.remove(&gid);
                } else if self.own.len() < MAX_ENTITIES {
                    self.own.insert(gid);
                } else {
                    self.ignored += 1;
                }
            }
            Event::Reply { query, reply } => self.reply(query, reply),
            Event::QueryEnd { query } => {
                calls::query_end(self, query);
                goals_out::query_end(self, query);
                types::query_end(self, query);
            }
            Event::Request {
                now,
                query,
                domain,
                name,
                request,
            } => match request {
                Request::Service(payload) => {
                    calls::request(self, now, query, domain, name, payload)
                }
                r => goals_in::request(self, query, domain, name, r),
            },
            Event::Feedback {
                domain,
                action,
                uuid,
                payload,
            } => goals_out::feedback(self, domain, &action, uuid, payload),
            Event::KnownType(ty) => self.types.know(ty),
            Event::Want {
                domain,
                topic,
                ty,
                on,
            } => self.want(domain, topic, ty, on),
            Event::Publish {
                domain,
                topic,
                latched,
                payload,
                cdr,
            } => self.publish(domain, topic, latched, payload, cdr),
            Event::Provide { domain, name, ty } => self.provide(domain, name, ty, false),
            Event::Serve { domain, name, ty } => self.provide(domain, name, ty, true),
            Event::Call {
                now,
                id,
                domain,
                service,
                payload,
            } => calls::call(self, now, id, domain, service, payload),
            Event::Answer { call, result } => calls::answer(self, call, result),
            Event::SendGoal {
                now,
                id,
                domain,
                action,
                uuid,
                payload,
            } => goals_out::send(self, now, id, domain, action, uuid, payload),
            Event::CancelGoal { domain, id } => goals_out::cancel(self, domain, &id),
            Event::GoalUpdate { goal, update } => goals_in::update(self, goal, update),
        }
    }

    fn push(&mut self, a: Action) {
        self.out.push_back(a);
    }

    fn deliver(&mut self, t: ToHub) {
        self.out.push_back(Action::Deliver(t));
    }

    fn next_query(&mut self) -> QueryId {
        self.next_query += 1;
        QueryId(self.next_query)
    }

    /// The entity serving `(domain, name)`, if ROS 2 serves it: the lowest
    /// GID, so the choice is stable.
    fn server(&self, domain: Domain, name: &str) -> Option<&Entity> {
        let gid = self
            .servers
            .get(&(domain, name.to_string()))?
            .iter()
            .next()?;
        self.entities.get(gid)
    }

    /// The type a topic's ROS 2 subscriptions are taken as: the lowest
    /// GID's (what [`Link::publish`] puts and the hub checks).
    fn topic_type(&self, domain: Domain, topic: &str) -> Option<String> {
        let gid = self
            .subscriptions
            .get(&(domain, topic.to_string()))?
            .iter()
            .next()?;
        Some(self.entities.get(gid)?.ty.clone())
    }

    /// The lowest GID of a topic's ROS 2 subscriptions (all ones if none).
    fn lowest_sub(&self, key: &(Domain, String)) -> Gid {
        self.subscriptions
            .get(key)
            .and_then(|s| s.iter().next().copied())
            .unwrap_or([0xff; 16])
    }

    fn appeared(&mut self, e: Entity) {
        if self.entities.contains_key(&e.gid) {
            return;
        }
        match self.admission.admit(&e, self.entities.len()) {
            Ok(()) => {}
            Err(admit::Refused::Names) => return,
            Err(admit::Refused::Bound) => {
                self.ignored += 1;
                return;
            }
        }
        let key = (e.domain, e.name.clone());
        types::entity(self, &e);
        match e.kind {
            EntityKind::Node | EntityKind::ServiceClient => {}
            EntityKind::Publisher => {
                self.publishers.entry(key).or_default().insert(e.gid);
            }
            EntityKind::Subscription => {
                let before = self.topic_type(e.domain, &e.name);
                let set = self.subscriptions.entry(key.clone()).or_default();
                set.insert(e.gid);
                // The first subscription is interest; a later one that
                // takes the lowest GID with another type changes the type
                // the topic is checked and put as (told again).
                let lowest = set.iter().next() == Some(&e.gid);
                if set.len() == 1 || (lowest && before.as_deref() != Some(e.ty.as_str())) {
                    self.deliver(ToHub::Interest {
                        domain: e.domain,
                        topic: e.name.clone(),
                        ty: Some(e.ty.clone()),
                    });
                }
            }
            EntityKind::ServiceServer => {
                let set = self.servers.entry(key).or_default();
                set.insert(e.gid);
                if set.len() == 1 && crate::action::action_part(&e.name).is_none() {
                    self.deliver(ToHub::Provider {
                        domain: e.domain,
                        name: e.name.clone(),
                        action: false,
                        ty: Some(e.ty.clone()),
                    });
                }
            }
        }
        let (domain, name) = (e.domain, e.name.clone());
        self.graph.count(&e, true);
        self.entities.insert(e.gid, e);
        self.action_changed(domain, &name);
    }

    fn gone(&mut self, gid: Gid) {
        let Some(e) = self.entities.remove(&gid) else {
            return;
        };
        self.admission.release(&e);
        self.graph.count(&e, false);
        let key = (e.domain, e.name.clone());
        let map = match e.kind {
            EntityKind::Publisher => &mut self.publishers,
            EntityKind::Subscription => &mut self.subscriptions,
            EntityKind::ServiceServer => &mut self.servers,
            EntityKind::Node | EntityKind::ServiceClient => return,
        };
        let Some(set) = map.get_mut(&key) else {
            return;
        };
        set.remove(&gid);
        if !set.is_empty() {
            if e.kind == EntityKind::Subscription {
                // The one that typed the topic went: the next one's type
                // is the topic's now.
                let next = self.topic_type(e.domain, &e.name);
                if next.as_deref() != Some(e.ty.as_str()) && gid < self.lowest_sub(&key) {
                    self.deliver(ToHub::Interest {
                        domain: e.domain,
                        topic: e.name.clone(),
                        ty: next,
                    });
                }
            }
            return;
        }
        map.remove(&key);
        match e.kind {
            EntityKind::Subscription => {
                self.unpublish(e.domain, &e.name);
                self.deliver(ToHub::Interest {
                    domain: e.domain,
                    topic: e.name.clone(),
                    ty: None,
                })
            }
            EntityKind::ServiceServer => {
                calls::server_gone(self, e.domain, &e.name);
                if crate::action::action_part(&e.name).is_none() {
                    self.deliver(ToHub::Provider {
                        domain: e.domain,
                        name: e.name.clone(),
                        action: false,
                        ty: None,
                    });
                }
            }
            _ => {}
        }
        self.action_changed(e.domain, &e.name);
    }

    /// Offers an action to the hub once its five entities are known
    /// (rclpy declares them one after another, and a goal sent when only
    /// `send_goal` is known would find no `get_result`), and withdraws it
    /// (ending its goals) when one of them goes.
    fn action_changed(&mut self, domain: Domain, name: &str) {
        use crate::action::{self as a};
        let Some((action, _)) = a::action_part(name) else {
            return;
        };
        let action = action.to_string();
        let has = |m: &HashMap<(Domain, String), BTreeSet<Gid>>, part: &str| {
            m.contains_key(&(domain, format!("{action}{part}")))
        };
        let ty = self
            .server(domain, &format!("{action}{}", a::SEND_GOAL))
            .and_then(|e| a::action_type_of_send_goal(&e.ty).map(str::to_string));
        let complete = ty.is_some()
            && has(&self.servers, a::CANCEL_GOAL)
            && has(&self.servers, a::GET_RESULT)
            && has(&self.publishers, a::FEEDBACK)
            && has(&self.publishers, a::STATUS);
        let key = (domain, action.clone());
        if complete == self.actions.contains(&key) {
            return;
        }
        if complete {
            self.actions.insert(key);
            self.deliver(ToHub::Provider {
                domain,
                name: action,
                action: true,
                ty,
            });
        } else {
            self.actions.remove(&key);
            goals_out::server_gone(self, domain, &action);
            self.deliver(ToHub::Provider {
                domain,
                name: action,
                action: true,
                ty: None,
            });
        }
    }

    fn sample(
        &mut self,
        domain: Domain,
        topic: String,
        publisher: Option<Gid>,
        (ty, hash): (String, String),
        payload: Vec<u8>,
    ) {
        if publisher.is_some_and(|g| self.own.contains(&g)) {
            self.own_samples += 1;
            return;
        }
        // A publisher known by its token: not another rosgate's (its
        // samples crossed the federation already), and one of this topic.
        // One not known (its token not seen yet, or a sample without an
        // attachment) is taken, volatile, as an rmw_zenoh subscription
        // takes any sample on its key.
        let known = publisher.and_then(|g| self.entities.get(&g));
        if let Some(p) = known {
            if self.rosgate.contains(&p.participant) {
                self.echoes += 1;
                return;
            }
            if p.kind != EntityKind::Publisher || p.domain != domain || p.name != topic {
                self.ignored += 1;
                return;
            }
        }
        if !self.wanted.contains(&(domain, topic.clone())) {
            return;
        }
        // A transient local publisher's samples are latched in the hub
        // (its depth of them), so clients that subscribe later get them as
        // from a local one.
        let latched = known
            .filter(|p| p.qos.durability == crate::rmw::Durability::TransientLocal)
            .map(|p| p.qos.depth.max(1));
        // Decoded by the type the sample names (what its CDR is), which
        // must be known here.
        if !self.types.knows(&ty) {
            self.unknown_type += 1;
            return;
        }
        self.deliver(ToHub::Sample {
            domain,
            topic,
            ty,
            hash,
            latched,
            payload,
        });
    }

    fn want(&mut self, domain: Domain, topic: String, ty: Option<String>, on: bool) {
        let key = (domain, topic.clone());
        let changed = if on {
            self.wanted.insert(key)
        } else {
            self.wanted.remove(&key)
        };
        if changed {
            // The type local clients named, by its full name and hash,
            // when the registry has it.
            let types = self.types.registry();
            let ty = ty.filter(|_| on).and_then(|t| {
                let full = types.msg(&t)?.name.clone();
                let hash = types.hash(&full)?;
                Some((full, hash))
            });
            self.push(Action::Subscribe {
                domain,
                topic,
                ty,
                on,
            });
        }
    }

    /// A local publish reaches ROS 2 only while a ROS 2 subscription of the
    /// topic exists, typed as the first one declared it, through this
    /// gateway's publisher of it: declared on the first publish, declared
    /// again when the type or the latched depth changes, withdrawn with the
    /// topic's last ROS 2 subscription.
    fn publish(
        &mut self,
        domain: Domain,
        topic: String,
        latched: Option<u32>,
        payload: Vec<u8>,
        cdr: Option<(String, Vec<u8>)>,
    ) {
        let key = (domain, topic.clone());
        let Some(gid) = self.subscriptions.get(&key).and_then(|s| s.iter().next()) else {
            return;
        };
        let Some(sub) = self.entities.get(gid) else {
            return;
        };
        let (ty, hash) = (sub.ty.clone(), sub.hash.clone());
        let made = (ty.clone(), hash.clone(), latched);
        if self.publishing.get(&key) != Some(&made) {
            self.unpublish(domain, &topic);
            self.publishing.insert(key, made);
            self.push(Action::Publisher {
                domain,
                topic: topic.clone(),
                ty: ty.clone(),
                hash: hash.clone(),
                latched,
                on: true,
            });
        }
        // The CDR goes as it is only when it is of the subscription's
        // type (named in full or short: `std_msgs/String`); any other (a
        // subscription of another type, or no CDR) is the shell's to
        // encode from the JSON.
        let types = self.types();
        let cdr = cdr
            .filter(|(t, _)| *t == ty || types.msg(t).is_some_and(|m| m.name == ty))
            .map(|(_, b)| b);
        self.push(Action::Put {
            domain,
            topic,
            ty,
            hash,
            payload,
            cdr,
        });
    }

    /// Withdraws this gateway's publisher of `topic`, if declared.
    fn unpublish(&mut self, domain: Domain, topic: &str) {
        if let Some((ty, hash, latched)) = self.publishing.remove(&(domain, topic.to_string())) {
            self.push(Action::Publisher {
                domain,
                topic: topic.to_string(),
                ty,
                hash,
                latched,
                on: false,
            });
        }
    }

    fn provide(&mut self, domain: Domain, name: String, ty: Option<String>, action: bool) {
        let key = (domain, name.clone());
        let table = if action {
            &mut self.served
        } else {
            &mut self.provided
        };
        match ty {
            Some(ty) => {
                if table.insert(key, ty.clone()).as_ref() == Some(&ty) {
                    return;
                }
                self.push(Action::Offer {
                    domain,
                    name,
                    ty,
                    action,
                    on: true,
                });
            }
            None => {
                let Some(ty) = table.remove(&key) else {
                    return;
                };
                if action {
                    goals_in::unserve(self, domain, &name);
                } else {
                    calls::unprovide(self, domain, &name);
                }
                self.push(Action::Offer {
                    domain,
                    name,
                    ty,
                    action,
                    on: false,
                });
            }
        }
    }

    fn reply(&mut self, query: QueryId, reply: Reply) {
        if calls::reply(self, query, &reply) {
            return;
        }
        if goals_out::reply(self, query, &reply) {
            return;
        }
        types::reply(self, query, &reply);
    }
}
