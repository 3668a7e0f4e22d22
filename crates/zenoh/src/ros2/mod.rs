//! rosgate inside a ROS 2 graph that runs rmw_zenoh (issue 17): the same
//! Zenoh session as the federation, speaking rmw_zenoh's format for the
//! domains given with `--ros-domain`. This is the shell of the ROS 2 link
//! (`rosgate_ros2::link`, the sans-io state machine that decides): it owns
//! the Zenoh declarations, turns what Zenoh's threads receive into the
//! link's events (`exec.rs`'s inbox, drained on the loop thread), and
//! executes the link's actions on the loop thread.
//!
//! What crosses, in both directions, converted between rosbridge JSON and
//! CDR at this edge by the types the link holds (`Link::types`):
//! - topics: a ROS 2 subscription (an `MS` token) is interest like another
//!   gateway's, so the domain's bridge subscribes here and what it drains
//!   goes to the link, which puts it, typed as the ROS 2 subscription
//!   declared, through this gateway's publisher; a local subscriber makes
//!   the link subscribe to the topic's data keys (any type), and each
//!   sample goes, raw, through the loop's inbox to the link, which decides
//!   (own, a gateway's, an unknown type's are dropped) and
//!   hands the CDR and its type back; it is decoded here, on the loop
//!   thread, for the hub when a subscriber needs JSON
//!   (`Bridges::needs_json`), and routed with its CDR, which `cbor-raw`
//!   subscribers get untouched;
//! - services and actions: calls and goals both ways (`calls_in.rs`,
//!   `goals_in.rs`, `goals_out.rs` execute the link's decisions);
//! - the graph: ROS 2 nodes and topics are listed by introspection as the
//!   graph of a gateway named [`ROS_GRAPH`] (the link's lists);
//! - types: one the gateway lacks is asked of the node that has it
//!   (`~/get_type_description`) when the link says so, and the link keeps
//!   it when it hashes to what the node advertised; the link's registry is
//!   replaced whole, so a snapshot a Zenoh callback holds never changes
//!   under it.
//!
//! Invariants:
//! - nothing ROS 2 publishes reaches clients unless its type is known and,
//!   when it is decoded (a subscriber needs JSON), it decodes (a
//!   `cbor-raw` subscriber alone gets the CDR as the node put it), and what a client publishes reaches ROS 2 only as CDR of
//!   the type the ROS 2 subscription declared (the link's rules);
//! - no lock is held here but the hand-offs: the link's inbox and each
//!   query's [`crate::first_reply::FirstReply`];
//! - a sample from ROS 2 costs the loop's inbox budget
//!   (`inbox.rs`: [`crate::MAX_PENDING_SAMPLES`], [`crate::INBOX_BYTES`]) from when it
//!   is received until the loop takes it: a flood is shed and counted,
//!   never queued without bound;
//! - every call from ROS 2 gets exactly one reply or error (the link
//!   answers each, and one not queued for it is refused at once); every
//!   call to ROS 2 ends in exactly one `service_response` (the reply, a refusal,
//!   the end of the query without one, the server leaving, or the link's
//!   timeout), handed to the hub from the loop's turn;
//! - the link's tables are bounded ([`MAX_ROS_ENTITIES`] tokens,
//!   [`MAX_ROS_NODES`] nodes, [`MAX_ROS_ENTITIES_PER_NODE`] per node,
//!   `rosgate_ros2::link::MAX_FETCHES` types asked, `MAX_FETCHES_PER_NODE`
//!   of one node, `FETCHES_PER_TURN` per loop turn (a turn is a tick),
//!   `rosgate_ros2::link::MAX_CALLS_IN`
//!   calls from ROS 2 waiting, `rosgate_peers::ros2::queue::MAX_QUEUED_REQUESTS` queued for the
//!   loop's next turn); what they hold is in the memory ledger;
//! - the graph introspection lists is rebuilt at most every
//!   [`crate::GRAPH_INTERVAL_MS`], however fast tokens come.

use std::collections::{HashMap, HashSet};
use std::rc::Rc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rosgate_core::hub::Bridges;
use rosgate_core::nodes::Domain;
use rosgate_ros2::cdr;
use rosgate_ros2::link::{Entity, Event};
use rosgate_ros2::registry::Registry;
use rosgate_ros2::rmw::{self, Attachment, Endpoint, EntityKind, Qos, Token};
use zenoh::liveliness::LivelinessToken;
use zenoh::pubsub::Subscriber;
use zenoh::qos::CongestionControl;
use zenoh::query::{ConsolidationMode, QueryTarget, Reply};
use zenoh::sample::{Locality, Sample, SampleKind};
use zenoh::{Session, Wait};
use zenoh_ext::{
    AdvancedPublisher, AdvancedPublisherBuilderExt, AdvancedSubscriberBuilderExt, CacheConfig,
    HistoryConfig, MissDetectionConfig,
};

use crate::remote::Shared;
use crate::worker::{Declared, Decls};
use rosgate_peers::ros2::edge::HubEdge;
use rosgate_peers::ros2::queue::LinkQueue;
use rosgate_peers::ros2::sync::LinkSync;
use rosgate_peers::Inbox;

mod calls_in;
mod exec;
mod goals_in;
mod goals_out;
mod peer;
mod replying;
pub(crate) use peer::start;

use crate::RosSettings;

pub use rosgate_peers::ros2::ROS_GRAPH;

/// ROS 2 entities (liveliness tokens) remembered per gateway; more are
/// ignored (and counted). The link's bound.
pub const MAX_ROS_ENTITIES: usize = rosgate_ros2::link::MAX_ENTITIES;

/// ROS 2 nodes (by session and node id) remembered, all domains; tokens of
/// further nodes are ignored (and counted). The link's bound
/// (`rosgate_ros2::link::admit`).
pub const MAX_ROS_NODES: usize = rosgate_ros2::link::admit::MAX_NODES;

/// ROS 2 entities remembered of one node (its node token, publishers,
/// subscriptions, services, clients); further ones are ignored (and
/// counted). The link's bound, as [`MAX_ROS_NODES`].
pub const MAX_ROS_ENTITIES_PER_NODE: usize = rosgate_ros2::link::admit::MAX_ENTITIES_PER_NODE;

/// Seconds. The longest a node may take to describe a type.
pub const FETCH_TIMEOUT_SECS: u64 = rosgate_ros2::link::FETCH_TIMEOUT.as_secs();

/// A ROS 2 entity's data key type and hash, as a token spells them.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Typed {
    dds_type: String,
    hash: String,
}

impl Typed {
    /// `ty` (a full ROS name) with `hash`, as a token spells them.
    fn of(ty: &str, hash: &str) -> Option<Typed> {
        Some(Typed {
            dds_type: rmw::dds_type_name(ty)?,
            hash: hash.to_string(),
        })
    }

    /// The type of a link's entity, as its token spelled it.
    fn of_entity(e: &Entity) -> Option<Typed> {
        Typed::of(&e.ty, &e.hash)
    }
}

/// What Zenoh's threads share with the loop for the ROS 2 side: the
/// hand-off to the link, and what a request needs. No table of the link's.
pub(crate) struct RosShared {
    zid: String,
    /// The gateways' tables, where ROS 2's interest and providers go too.
    fed: Arc<Shared>,
    /// The hand-off to the loop and its budget, shared with the gateways.
    inbox: Arc<Inbox>,
    /// Tokens and samples that do not parse as rmw_zenoh's (counted).
    ignored: AtomicU64,
    /// The session requests go out on (from the loop, and from Zenoh's
    /// threads when one answer leads to the next request).
    session: Session,
    /// The sequence number of this gateway's last rmw_zenoh request.
    call_seq: AtomicI64,
    /// Events for the ROS 2 link from Zenoh's threads (tokens, samples,
    /// replies, query ends, feedback, requests), for the loop's next turn.
    queue: LinkQueue<replying::Replying>,
}

fn unix_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

impl RosShared {
    /// An event for the link, for the loop's next turn (`LinkQueue::event`).
    fn to_link(&self, e: Event) {
        self.queue.event(e);
    }

    /// A ROS 2 sample for the link, within the loop's inbox budget.
    fn to_link_sample(&self, e: Event) {
        self.queue.sample(e);
    }

    /// A ROS 2 client's request for the link, with the query it answers.
    fn to_link_request(
        &self,
        to: replying::Replying,
        domain: Domain,
        name: &str,
        request: rosgate_ros2::link::Request,
    ) {
        self.queue.request(to, domain, name, request);
    }

    /// A reply to the link's query, or its end without one.
    fn reply_to_link(
        &self,
        query: rosgate_ros2::link::QueryId,
        r: Option<Result<rosgate_ros2::link::Reply, String>>,
    ) {
        self.queue.reply(query, r);
    }

    /// A ROS 2 liveliness token came or went: the link's event (the link
    /// admits it or not: names, bounds).
    fn on_token(&self, s: &Sample) {
        let Some(tok) = Token::parse(s.key_expr().as_str()) else {
            // Not a token rmw_zenoh would accept either.
            self.ignored.fetch_add(1, Ordering::Relaxed);
            return;
        };
        if tok.zid == self.zid || Domain::try_from(tok.domain).is_err() {
            return;
        }
        self.to_link(if s.kind() == SampleKind::Put {
            Event::Appeared(rosgate_ros2::link::rmw_zenoh::entity(&tok))
        } else {
            Event::Gone(tok.gid())
        });
    }

    /// A sample of a topic local clients subscribe to, from ROS 2, on
    /// Zenoh's thread: read by the adapter (topic, type, publisher) and
    /// queued raw for the link, within the loop's inbox budget.
    fn on_data(&self, s: &Sample) {
        if self.inbox.is_full() {
            self.inbox.drop_one();
            return;
        }
        let attachment = s.attachment().map(|a| a.to_bytes());
        let payload = s.payload().to_bytes().into_owned();
        let event = rosgate_ros2::link::rmw_zenoh::sample(
            s.key_expr().as_str(),
            attachment.as_deref(),
            payload,
        );
        let Some(event) = event else {
            // Not a data key of a type: not taken.
            self.ignored.fetch_add(1, Ordering::Relaxed);
            return;
        };
        self.to_link_sample(event);
    }

    /// Sends one rmw_zenoh service request: the next sequence number and
    /// `gid` in the attachment, to every complete queryable of `key`,
    /// replies as they come; `on_reply` sees each, and is dropped when
    /// the query ends.
    fn request(
        &self,
        key: String,
        payload: Vec<u8>,
        gid: [u8; 16],
        timeout: Duration,
        on_reply: impl Fn(&Reply) + Send + Sync + 'static,
    ) {
        let seq = self.call_seq.fetch_add(1, Ordering::Relaxed) + 1;
        let att = Attachment {
            seq,
            timestamp_ns: unix_ns(),
            gid,
        };
        let sent = self
            .session
            .get(key.as_str())
            .payload(payload)
            .attachment(att.encode().to_vec())
            .target(QueryTarget::AllComplete)
            .consolidation(ConsolidationMode::None)
            .allowed_destination(Locality::Remote)
            .timeout(timeout)
            .callback(move |r: Reply| on_reply(&r))
            .wait();
        if let Err(e) = sent {
            rosgate_core::log!(Debug, "ros2: request to {key} not sent: {e}");
        }
    }
}

/// A sample as rosbridge JSON, decoded by the type its key names (an
/// action's feedback, read on Zenoh's thread by a registry snapshot).
fn sample_json(types: &Registry, s: &Sample) -> Option<String> {
    use rosgate_peers::ros2::edge::decode_json;
    let (_, _, dds, _) = rmw::parse_data_key(s.key_expr().as_str())?;
    let ty = rmw::ros_type_name(&dds)?;
    decode_json(types, &ty, &s.payload().to_bytes())
}

/// This gateway's ROS 2 node in one domain.
struct Node {
    nid: u64,
    key: String,
    _token: LivelinessToken,
}

/// A node local clients declared, in the ROS 2 graph: its own node token,
/// under which its parameter services are declared.
struct ClientNode {
    nid: u64,
    namespace: String,
    name: String,
    _token: Declared,
}

/// What this gateway declared for a topic local clients subscribe to.
struct Sub {
    _data: Declared,
    _token: Option<Declared>,
}

/// This gateway's publisher of a topic to ROS 2, as the link declared it.
struct Pub {
    key: String,
    gid: [u8; 16],
    seq: i64,
    /// For a topic a local client publishes latched (transient local): the
    /// publisher whose cache late ROS 2 subscribers query (rmw_zenoh's
    /// transient local), declared on the worker.
    cache: Option<Declared>,
    _token: Declared,
}

/// A local provider offered to ROS 2.
struct Server {
    _queryable: Declared,
    _token: Declared,
}

/// The loop thread's side of the ROS 2 link. See the module docs.
pub(crate) struct RosLink {
    zid: String,
    /// Declarations are made and dropped on the Zenoh worker (`worker.rs`).
    decls: Decls,
    pub(crate) shared: Arc<RosShared>,
    domains: Vec<Domain>,
    nodes: HashMap<Domain, Node>,
    next_id: u64,
    goal_seq: u64,
    /// The ROS 2 link's state machine: it decides, this shell executes.
    link: rosgate_ros2::link::Link,
    /// What executing the link's goals keeps beside it.
    goals_out: goals_out::GoalsOut,
    /// The link's deliveries for the hub, in order, until the turn hands
    /// them over (one per call or goal end, and one turn's feedback).
    edge: HubEdge,
    /// The link's counts, types and graph last installed in the hub.
    sync: LinkSync,
    /// ROS 2 clients' queries the link has been given, until it answers
    /// each (once): at most what the link keeps waiting (calls and
    /// `get_result`s), as it answers the others in the same turn.
    replying: HashMap<rosgate_ros2::link::InQuery, replying::Replying>,
    /// The number the next ROS 2 client's query is given to the link by.
    next_in_query: u64,
    _watch: Vec<Subscriber<()>>,
    subs: HashMap<(Domain, Rc<str>), Sub>,
    pubs: HashMap<(Domain, Rc<str>), Pub>,
    servers: HashMap<(Domain, Rc<str>), Server>,
    /// This gateway as a client of ROS 2 services it called: the `SC`
    /// token, and its GID (what requests carry).
    clients: HashMap<(Domain, Rc<str>), (Declared, [u8; 16])>,
    /// Feedback topics of actions goals are in flight to.
    feedback: HashMap<(Domain, Rc<str>), goals_out::Feedback>,
    /// Actions local clients serve, offered to ROS 2: the queryables of
    /// the goal services, and the tokens of all five entities.
    actions: HashMap<(Domain, Rc<str>), goals_in::Offered>,
    /// Nodes local clients declared in bridged domains, by full name.
    client_nodes: HashMap<(Domain, String), ClientNode>,
    /// The hub's node generation `client_nodes` was last synced with.
    nodes_generation: Option<u64>,
    /// The other gateways the link was last told of (at most
    /// `remote::MAX_GATEWAYS`), and the federation's count they are of.
    gateways: HashSet<String>,
    gateways_seen: u64,
}

impl RosLink {
    /// Joins the ROS 2 graph of each domain: this gateway's node token,
    /// and a watcher of everyone's tokens.
    pub(crate) fn start(
        session: &Session,
        settings: &RosSettings,
        types: Registry,
        fed: Arc<Shared>,
        inbox: Arc<Inbox>,
        decls: Decls,
    ) -> Result<RosLink, String> {
        let zid = session.zid().to_string();
        let shared = Arc::new(RosShared {
            zid: zid.clone(),
            fed,
            inbox: inbox.clone(),
            ignored: AtomicU64::new(0),
            session: session.clone(),
            call_seq: AtomicI64::new(0),
            queue: LinkQueue::new(inbox.clone()),
        });
        let mut link = RosLink {
            zid,
            decls,
            shared,
            domains: settings.domains.clone(),
            nodes: HashMap::new(),
            next_id: 0,
            goal_seq: 0,
            link: rosgate_ros2::link::Link::with_types(types),
            goals_out: goals_out::GoalsOut::default(),
            edge: HubEdge::default(),
            sync: LinkSync::new(rosgate_peers::ros2::ROS_GRAPH),
            replying: HashMap::new(),
            next_in_query: 0,
            _watch: Vec::new(),
            subs: HashMap::new(),
            pubs: HashMap::new(),
            servers: HashMap::new(),
            clients: HashMap::new(),
            feedback: HashMap::new(),
            actions: HashMap::new(),
            client_nodes: HashMap::new(),
            nodes_generation: None,
            gateways: HashSet::new(),
            gateways_seen: 0,
        };
        for &d in &settings.domains {
            let nid = link.next_id();
            let tok = Token::node(u32::from(d), &link.zid, nid, "/", &node_name(&link.zid));
            let key = tok.to_key();
            let token = session
                .liveliness()
                .declare_token(key.clone())
                .wait()
                .map_err(|e| format!("ros2: cannot declare this gateway's node: {e}"))?;
            link.nodes.insert(
                d,
                Node {
                    nid,
                    key,
                    _token: token,
                },
            );
            let sh = link.shared.clone();
            let watch = session
                .liveliness()
                .declare_subscriber(rmw::liveliness_selector(u32::from(d)))
                .history(true)
                .callback(move |s: Sample| sh.on_token(&s))
                .wait()
                .map_err(|e| format!("ros2: cannot watch the ROS 2 graph: {e}"))?;
            link._watch.push(watch);
        }
        Ok(link)
    }

    fn next_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    fn bridged(&self, domain: Domain) -> bool {
        self.domains.contains(&domain)
    }

    /// The node an entity named `name` is declared under: a client node's
    /// own parameter services (`<node>/get_parameters` ...) under that
    /// node, everything else under the gateway's node. Only those: the
    /// hub withdraws them with their node, so no live token is left under
    /// a node token that went (rmw_zenoh drops a node's entities with
    /// it), while topics and services under a node's name may belong to
    /// other clients and outlive it. (nid, namespace, name)
    fn owner_of(&self, domain: Domain, name: &str) -> Option<(u64, String, String)> {
        let client = name.rsplit_once('/').and_then(|(fqn, service)| {
            let fqn = if fqn.is_empty() { "/" } else { fqn };
            let is_param_service = rosgate_core::hub::NODE_PARAM_SERVICES
                .iter()
                .any(|(s, _)| *s == service);
            is_param_service
                .then(|| self.client_nodes.get(&(domain, fqn.to_string())))
                .flatten()
        });
        match client {
            Some(n) => Some((n.nid, n.namespace.clone(), n.name.clone())),
            None => {
                let nid = self.nodes.get(&domain)?.nid;
                Some((nid, "/".into(), node_name(&self.zid)))
            }
        }
    }

    /// Mirrors the nodes local clients declared in bridged domains as
    /// ROS 2 nodes (node tokens), when the hub's nodes changed. Runs before
    /// the turn's offers, so a node's parameter services are declared
    /// under it.
    pub(crate) fn sync_nodes(&mut self, _session: &Session, hub: &Bridges<'_>) {
        let generation = hub.nodes().generation();
        if self.nodes_generation == Some(generation) {
            return;
        }
        self.nodes_generation = Some(generation);
        let mut now: Vec<(Domain, String, String, String)> = Vec::new();
        for &d in &self.domains {
            for (fqn, tag) in hub.nodes().in_domain(d) {
                if let Some(n) = hub.nodes().get(tag) {
                    now.push((
                        d,
                        fqn.to_string(),
                        n.namespace().to_string(),
                        n.name().to_string(),
                    ));
                }
            }
        }
        self.client_nodes
            .retain(|(d, fqn), _| now.iter().any(|(nd, nf, ..)| nd == d && nf == fqn));
        for (d, fqn, namespace, name) in now {
            if self.client_nodes.contains_key(&(d, fqn.clone())) {
                continue;
            }
            let nid = self.next_id();
            let tok = Token::node(u32::from(d), &self.zid, nid, &namespace, &name);
            let key = tok.to_key();
            let token = self.decls.declare(
                format!("ros2: cannot declare node {fqn}"),
                move |session: &Session| session.liveliness().declare_token(key).wait(),
            );
            self.client_nodes.insert(
                (d, fqn),
                ClientNode {
                    nid,
                    namespace,
                    name,
                    _token: token,
                },
            );
        }
    }

    /// Declares an endpoint token of this gateway's node in `domain`.
    fn declare(
        &mut self,
        session: &Session,
        domain: Domain,
        kind: EntityKind,
        name: &str,
        typed: &Typed,
    ) -> Option<(String, Declared)> {
        self.declare_qos(session, domain, kind, name, typed, Qos::keep_last(10))
    }

    /// [`RosLink::declare`] with the QoS the token states.
    fn declare_qos(
        &mut self,
        _session: &Session,
        domain: Domain,
        kind: EntityKind,
        name: &str,
        typed: &Typed,
        qos: Qos,
    ) -> Option<(String, Declared)> {
        let (nid, namespace, node) = self.owner_of(domain, name)?;
        let id = self.next_id();
        let tok = Token {
            domain: u32::from(domain),
            zid: self.zid.clone(),
            nid,
            id,
            kind,
            enclave: "/".into(),
            namespace,
            node,
            endpoint: Some(Endpoint {
                name: name.to_string(),
                dds_type: typed.dds_type.clone(),
                hash: typed.hash.clone(),
                qos,
            }),
        };
        let key = tok.to_key();
        let k = key.clone();
        let t = self.decls.declare(
            format!("ros2: cannot declare {name} in the ROS 2 graph"),
            move |session: &Session| session.liveliness().declare_token(k).wait(),
        );
        Some((key, t))
    }

    /// The types known now: the link's registry (a snapshot; a Zenoh
    /// callback keeps the one it was made with).
    fn types(&self) -> Arc<Registry> {
        self.link.types().clone()
    }

    /// The type of the ROS 2 server of `name` calls and goals go to (the
    /// link's choice), as its token spelled it.
    fn served(&self, domain: Domain, name: &str) -> Option<Typed> {
        Typed::of_entity(self.link.server_of(u32::from(domain), name)?)
    }

    /// The data-key type of a type local clients named (`std_msgs/String`
    /// or `std_msgs/msg/String`), if the type is known.
    fn typed_msg(&self, ty: &str) -> Option<Typed> {
        let types = self.link.types();
        let full = types.msg(ty)?.name.clone();
        Typed::of(&full, &types.hash(&full)?)
    }

    /// The link subscribes to `topic`'s samples from ROS 2 publishers of
    /// any type (`on`), announced as `ty` when local clients named one
    /// known here, or stops.
    fn exec_subscribe(
        &mut self,
        session: &Session,
        domain: Domain,
        topic: &str,
        ty: Option<(String, String)>,
        on: bool,
    ) {
        let k = (domain, Rc::<str>::from(topic));
        if !on {
            self.subs.remove(&k);
            return;
        }
        if self.subs.contains_key(&k) {
            return;
        }
        let sh = self.shared.clone();
        // As rmw_zenoh's transient local subscriptions do: ask the caches
        // of transient local publishers (now, and of those that come
        // later) for what they keep.
        let key = rmw::data_key_any_type(u32::from(domain), topic);
        let data = self.decls.declare(
            format!("ros2: cannot subscribe to {topic}"),
            move |session: &Session| {
                session
                    .declare_subscriber(key)
                    .history(HistoryConfig::default().detect_late_publishers())
                    .allowed_origin(Locality::Remote)
                    .callback(move |s: Sample| sh.on_data(&s))
                    .wait()
            },
        );
        let typed = ty.and_then(|(ty, hash)| Typed::of(&ty, &hash));
        let token = typed.and_then(|t| {
            self.declare(session, domain, EntityKind::Subscription, topic, &t)
                .map(|(_, tok)| tok)
        });
        self.subs.insert(
            k,
            Sub {
                _data: data,
                _token: token,
            },
        );
    }

    /// The link declares this gateway's publisher of `topic` to ROS 2,
    /// typed `ty`/`hash` as the ROS 2 subscription declared it (`on`), or
    /// withdraws it. Its GID goes back to the link: its samples, read back
    /// by a history query, are not news.
    fn exec_publisher(
        &mut self,
        session: &Session,
        domain: Domain,
        topic: &str,
        typed: Option<Typed>,
        latched: Option<u32>,
        on: bool,
    ) {
        self.drop_pub(domain, topic);
        let Some(typed) = typed.filter(|_| on) else {
            return;
        };
        // A latched topic is a transient local publisher in ROS 2, as
        // rmw_zenoh makes one: a cache of `depth` samples that late
        // subscribers' history queries read, and sample numbers so a
        // subscriber that gets one twice (live and from the cache) keeps
        // one.
        let qos = match latched {
            Some(depth) => Qos {
                durability: rmw::Durability::TransientLocal,
                ..Qos::keep_last(depth)
            },
            None => Qos::keep_last(10),
        };
        let Some((token_key, token)) =
            self.declare_qos(session, domain, EntityKind::Publisher, topic, &typed, qos)
        else {
            return;
        };
        let key = rmw::data_key(u32::from(domain), topic, &typed.dds_type, &typed.hash);
        let cache = latched.map(|depth| {
            let k = key.clone();
            self.decls.declare(
                format!("ros2: no transient local cache for {topic}"),
                move |session: &Session| {
                    session
                        .declare_publisher(k)
                        .congestion_control(CongestionControl::Drop)
                        .allowed_destination(Locality::Remote)
                        .cache(CacheConfig::default().max_samples(depth as usize))
                        .sample_miss_detection(MissDetectionConfig::default())
                        .publisher_detection()
                        .wait()
                },
            )
        });
        let gid = rmw::gid(&token_key);
        self.link.handle(Event::OwnPublisher { gid, on: true });
        let p = Pub {
            gid,
            key,
            seq: 0,
            cache,
            _token: token,
        };
        self.pubs.insert((domain, Rc::from(topic)), p);
    }

    /// The link puts a message on `topic` as CDR of `ty`, the ROS 2
    /// subscription's type, through this gateway's publisher of it: `own`
    /// (its own CDR of `ty`) as it is, else `msg` (JSON) encoded. False
    /// when it did not go out.
    fn exec_put(
        &mut self,
        session: &Session,
        domain: Domain,
        topic: &str,
        ty: &str,
        msg: &[u8],
        own: Option<&[u8]>,
    ) -> bool {
        let types = self.types();
        let Some(p) = self.pubs.get_mut(&(domain, Rc::from(topic))) else {
            return false;
        };
        let bytes = match own {
            Some(b) => b.to_vec(),
            None => {
                let Ok(v) = rosgate_ros2::json::from_slice(msg) else {
                    return false;
                };
                match cdr::encode(&*types, ty, &v) {
                    Ok(b) => b,
                    Err(e) => {
                        rosgate_core::log!(
                            Debug,
                            "ros2: a message on {topic} not sent to ROS 2: it is not {ty}: {e}"
                        );
                        return false;
                    }
                }
            }
        };
        p.seq += 1;
        let att = Attachment {
            seq: p.seq,
            timestamp_ns: unix_ns(),
            gid: p.gid,
        };
        match &p.cache {
            // The cache lives on the worker: the put follows its
            // declaration there (worker.rs).
            Some(cache) => {
                let att = att.encode().to_vec();
                self.decls
                    .with(cache, move |c: &AdvancedPublisher<'static>| {
                        let _ = c.put(bytes).attachment(att).wait();
                    })
            }
            None => session
                .put(p.key.as_str(), bytes)
                .attachment(att.encode().to_vec())
                .congestion_control(CongestionControl::Drop)
                .allowed_destination(Locality::Remote)
                .wait()
                .is_ok(),
        }
    }

    /// Withdraws this gateway's publisher of `topic` to ROS 2, if any.
    fn drop_pub(&mut self, domain: Domain, topic: &str) {
        if let Some(p) = self.pubs.remove(&(domain, Rc::from(topic))) {
            self.link.handle(Event::OwnPublisher {
                gid: p.gid,
                on: false,
            });
        }
    }

    /// The GID this gateway's requests to `service` carry: rmw_zenoh's
    /// requests name the client entity, so the first call of a service
    /// declares this gateway a client of it (an `SC` token).
    fn client_gid(
        &mut self,
        session: &Session,
        domain: Domain,
        service: &str,
        typed: &Typed,
    ) -> Option<[u8; 16]> {
        let k = (domain, Rc::<str>::from(service));
        if let Some((_, gid)) = self.clients.get(&k) {
            return Some(*gid);
        }
        let (key, token) =
            self.declare(session, domain, EntityKind::ServiceClient, service, typed)?;
        let gid = rmw::gid(&key);
        self.clients.insert(k, (token, gid));
        Some(gid)
    }

    /// Forgets this gateway as a client of `name` (a service, or an
    /// action's goal services), whose servers all went.
    fn forget_clients(&mut self, domain: Domain, name: &str, action: bool) {
        use rosgate_ros2::action as a;
        if !action {
            self.clients.remove(&(domain, Rc::from(name)));
            return;
        }
        for part in [a::SEND_GOAL, a::GET_RESULT, a::CANCEL_GOAL] {
            self.clients
                .remove(&(domain, Rc::from(format!("{name}{part}").as_str())));
        }
    }

    /// One loop turn's work: the link's events, tick and actions
    /// (`exec.rs`), the hub's type check and counters, and the graph into
    /// introspection when it changed. Returns when it wants the next turn
    /// at the latest (a graph change held back for its interval).
    pub(crate) fn turn(
        &mut self,
        session: &Session,
        hub: &mut Bridges<'_>,
        now: std::time::Instant,
    ) -> Option<std::time::Instant> {
        self.follow_gateways();
        self.turn_link(session, hub, now);
        if self.link.wants_turn() {
            // Types asked past this turn's allowance: the next turn sends them.
            self.shared.inbox.wake();
        }
        let interval = std::time::Duration::from_millis(crate::GRAPH_INTERVAL_MS as u64);
        self.sync
            .after_turn(&self.link, hub, &self.domains, interval, now)
    }

    /// Tells the link which participants are other rosgate gateways (their
    /// publishers' samples cross the federation already), when the
    /// federation's gateways changed.
    fn follow_gateways(&mut self) {
        let Some((seen, now)) = self.shared.fed.gateways_since(self.gateways_seen) else {
            return;
        };
        self.gateways_seen = seen;
        let now: HashSet<String> = now.into_iter().collect();
        for gone in self.gateways.difference(&now) {
            self.link.handle(Event::Rosgate {
                participant: gone.clone(),
                present: false,
            });
        }
        for new in now.difference(&self.gateways) {
            self.link.handle(Event::Rosgate {
                participant: new.clone(),
                present: true,
            });
        }
        self.gateways = now;
    }

    /// The link asks a node for a type's description
    /// (`~/get_type_description`, rmw_zenoh's service of every Jazzy
    /// node): the answer, decoded on Zenoh's thread by the registry of
    /// now, goes back to the link, which checks its hash.
    fn exec_describe(
        &mut self,
        domain: Domain,
        node: &str,
        ty: &str,
        hash: &str,
        query: rosgate_ros2::link::QueryId,
    ) -> Result<(), String> {
        let types = self.types();
        let service = rosgate_ros2::describe::SERVICE_TYPE;
        let (Some(def), Some(dds), Some(service_hash)) = (
            types.srv(service),
            rmw::dds_type_name(service),
            types.hash(service),
        ) else {
            return Err(format!("{service} is not known here"));
        };
        let request = rosgate_ros2::describe::request(ty, hash);
        let bytes = cdr::encode(&*types, &def.request, &request).map_err(|e| e.to_string())?;
        let Some(own) = self.nodes.get(&domain) else {
            return Err("no node of this gateway in the domain".into());
        };
        let gid = rmw::gid(&own.key);
        let name = format!("{}/get_type_description", node.trim_end_matches('/'));
        let key = rmw::data_key(u32::from(domain), &name, &dds, &service_hash);
        let (sh, response) = (self.shared.clone(), def.response.clone());
        let (node, ty) = (node.to_string(), ty.to_string());
        let first = crate::first_reply::FirstReply::new(move |r: Option<&Reply>| {
            let reply = r.map(|r| Ok(describe_reply(&types, &node, &ty, &response, r)));
            sh.reply_to_link(query, reply);
        });
        let timeout = Duration::from_secs(FETCH_TIMEOUT_SECS);
        self.shared
            .request(key, bytes, gid, timeout, move |r| first.on(r));
        Ok(())
    }

    /// This gateway's node names, per domain (for the status).
    pub(crate) fn status_json(&self) -> serde_json::Value {
        let link = self.link.stats();
        let ignored = self.shared.ignored.load(Ordering::Relaxed) + link.ignored;
        let mut v = serde_json::json!({
            "entities": link.entities,
            "subscriptions": link.topics_subscribed,
            "servers": link.services_served,
            "ignored": ignored,
            "types_asked": link.types_asked,
            "types_learned": link.types_learned,
            "types_refused": link.types_refused,
            "types_known": self.link.types().msgs().count(),
            "undecodable": self.edge.undecodable() + link.unknown_type,
            "own_samples": link.own,
            "echoes": link.echoes,
        });
        v["domains"] = serde_json::json!(self.domains);
        v["node"] = serde_json::Value::from(node_name(&self.zid));
        v["node_tokens"] = serde_json::json!(self
            .nodes
            .values()
            .map(|n| n.key.as_str())
            .collect::<Vec<_>>());
        v["publishing"] = serde_json::Value::from(self.pubs.len());
        v["subscribed"] = serde_json::Value::from(self.subs.len());
        v["serving"] = serde_json::Value::from(self.servers.len());
        v["goals_in_flight"] = serde_json::Value::from(link.goals_out);
        v["calls_in_flight"] = serde_json::Value::from(link.calls_out);
        v["calls_from_ros2"] = serde_json::Value::from(link.calls_in);
        v["link_events_dropped"] = serde_json::Value::from(self.shared.queue.dropped());
        v["goals_from_ros2"] = serde_json::Value::from(link.goals_in);
        v["results_waiting"] = serde_json::Value::from(self.link.results_waiting());
        v["actions_served"] = serde_json::Value::from(self.actions.len());
        v["client_nodes"] = serde_json::Value::from(self.client_nodes.len());
        v
    }
}

/// A node's answer to `~/get_type_description` for `ty`, for the link:
/// the description when the node gave one (the link checks its hash).
fn describe_reply(
    types: &Registry,
    node: &str,
    ty: &str,
    response: &str,
    reply: &Reply,
) -> rosgate_ros2::link::Reply {
    use rosgate_ros2::link::Reply as LinkReply;
    let Ok(sample) = reply.result() else {
        rosgate_core::log!(Info, "ros2: {node} refused to describe {ty}");
        return LinkReply::Described(None);
    };
    let mut json = Vec::new();
    let payload = sample.payload().to_bytes();
    if cdr::decode_json(types, response, &payload, &mut json).is_err() {
        rosgate_core::log!(Info, "ros2: {node}'s description of {ty} does not decode");
        return LinkReply::Described(None);
    }
    let v: serde_json::Value = serde_json::from_slice(&json).unwrap_or_default();
    rosgate_peers::ros2::answer::described(node, ty, v)
}

/// This gateway's node name in the ROS 2 graph: `rosgate_<first 8 hex
/// digits of its Zenoh id>`, so two gateways in one graph differ.
fn node_name(zid: &str) -> String {
    let short: String = zid.chars().take(8).collect();
    format!("rosgate_{short}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_names_are_short_and_distinct_per_gateway() {
        assert_eq!(
            node_name("8b20917502ee955ac4476e0266340d5c"),
            "rosgate_8b209175"
        );
        assert_ne!(node_name("aa"), node_name("ab"));
    }
}
