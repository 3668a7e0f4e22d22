//! rosgate inside a ROS 2 graph that runs rmw_zenoh (issue 17): the same
//! Zenoh session as the federation, speaking rmw_zenoh's format for the
//! domains given with `--ros-domain`.
//!
//! What crosses, in both directions, converted between rosbridge JSON and
//! CDR by the types of `rosgate-ros2`:
//! - topics: a ROS 2 subscription (an `MS` token) is interest like another
//!   gateway's, so the domain's bridge subscribes here and what it drains
//!   is also put, as CDR with rmw_zenoh's attachment, on the topic's data
//!   key; a local subscriber makes this gateway subscribe to the topic's
//!   data keys (any type), and samples are decoded on Zenoh's thread;
//! - services: a ROS 2 server (an `SS` token) is a provider like another
//!   gateway's, so local callers reach it through the bridge; a local
//!   provider of a known service type is offered to ROS 2 as a complete
//!   queryable with its `SS` token;
//! - the graph: ROS 2 nodes and topics are listed by introspection as the
//!   graph of a gateway named [`ROS_GRAPH`];
//! - types: one the gateway lacks is asked of the node that has it
//!   (`~/get_type_description`), once, and used when it hashes to what the
//!   node advertised; the registry is then replaced whole, so a reader's
//!   snapshot never changes under it.
//!
//! Calls and goals local clients send to ROS 2, and calls and goals ROS 2
//! clients send here (`calls_in.rs`, `goals_in.rs`), with the services
//! and actions offered to ROS 2, and the interest and providers ROS 2's
//! tokens make (every token remembered here is handed to the link), are
//! decided by the ROS 2 link's state machine (`rosgate_ros2::link`),
//! which `exec.rs` feeds and executes from the loop thread, and so is the
//! graph introspection lists (the link's, installed from the turn); types
//! and topics' data still use this shell's own tables below (moving them
//! into the link is issue 24's remaining work).
//!
//! Invariants:
//! - nothing ROS 2 publishes reaches clients unless it decodes against a
//!   known type, and what a client publishes reaches ROS 2 only as CDR of
//!   the type the ROS 2 subscription declared;
//! - a message that came from another rosgate gateway through ROS 2 is
//!   dropped here (it crosses the federation already): rosgate's own
//!   publishers are recognised by the GID in the attachment;
//! - every call from ROS 2 gets exactly one reply or error (the link
//!   answers each, and one not queued for it is refused at once); every
//!   call to ROS 2 ends in exactly one `service_response` (the reply, a refusal,
//!   the end of the query without one, the server leaving, or the link's
//!   timeout), handed to the hub from the loop's turn;
//! - the tables are bounded: [`MAX_ROS_ENTITIES`] tokens,
//!   [`MAX_ROS_NODES`] nodes, [`MAX_ROS_ENTITIES_PER_NODE`] tokens per
//!   node, `rosgate_ros2::link::MAX_CALLS_IN` calls from ROS 2 waiting
//!   ([`exec::MAX_QUEUED_REQUESTS`] queued for the loop's next turn),
//!   [`MAX_FETCHES`] types asked ([`MAX_FETCHES_PER_NODE`] of one node,
//!   [`FETCHES_PER_TURN`] per loop turn); what they hold is in the memory
//!   ledger;
//! - a token whose names break the ROS 2 name rules
//!   (`rosgate_ros2::names`) is counted and otherwise ignored: never
//!   listed, never bridged;
//! - the graph introspection lists is rebuilt at most every
//!   [`crate::GRAPH_INTERVAL_MS`], however fast tokens come.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::rc::Rc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rosgate_core::nodes::Domain;
use rosgate_core::Hub;
use rosgate_ros2::cdr;
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

mod calls_in;
mod exec;
mod goals_in;
mod goals_out;
mod peer;
mod replying;
pub(crate) use peer::start;

use crate::RosSettings;

/// The name introspection gives the ROS 2 graph's part of a domain (where
/// another gateway's id would be).
pub const ROS_GRAPH: &str = "ros2";

/// ROS 2 entities (liveliness tokens) remembered per gateway; more are
/// ignored (and counted).
pub const MAX_ROS_ENTITIES: usize = rosgate_ros2::link::MAX_ENTITIES;

/// ROS 2 nodes (by session and node id) remembered, all domains; tokens of
/// further nodes are ignored (and counted). The link's bound
/// (`rosgate_ros2::link::admit`), applied here to the tokens until they
/// reach the link whole.
pub const MAX_ROS_NODES: usize = rosgate_ros2::link::admit::MAX_NODES;

/// ROS 2 entities remembered of one node (its node token, publishers,
/// subscriptions, services, clients); further ones are ignored (and
/// counted). The link's bound, as [`MAX_ROS_NODES`].
pub const MAX_ROS_ENTITIES_PER_NODE: usize = rosgate_ros2::link::admit::MAX_ENTITIES_PER_NODE;

/// Types asked of one node (`~/get_type_description`).
pub const MAX_FETCHES_PER_NODE: usize = 64;

/// Types asked of nodes per loop turn; the rest wait for the next turn.
pub const FETCHES_PER_TURN: usize = 16;

/// Bytes the ledger counts per entity remembered beyond its key (held
/// twice: the map's key and the parsed token's names): the link's.
const ENTITY_COST: usize = rosgate_ros2::link::admit::ENTITY_COST;

/// A ROS 2 entity's data key and type, as its token gave them.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Typed {
    dds_type: String,
    hash: String,
}

#[derive(Debug, Default)]
struct Tables {
    /// ROS 2 entities seen, by token key.
    entities: HashMap<String, Token>,
    /// ROS 2 subscriptions per topic: token key -> type.
    subs: HashMap<(Domain, String), BTreeMap<String, Typed>>,
    /// ROS 2 service servers per service: token key -> type.
    servers: HashMap<(Domain, String), BTreeMap<String, Typed>>,
    /// ROS 2 publishers by GID: the Zenoh session they live in (a sample
    /// from another rosgate gateway's is dropped), and for a transient
    /// local one its depth (its samples are latched for late clients).
    publishers: HashMap<[u8; 16], (String, Option<u32>)>,
    ignored: u64,
    /// Entities remembered per node (session, node id): at most
    /// [`MAX_ROS_NODES`] nodes of [`MAX_ROS_ENTITIES_PER_NODE`] each.
    per_node: HashMap<(String, u64), usize>,
    /// Bytes of `entities` as the ledger counts them.
    bytes: usize,
    /// Tokens refused by the name rules, and by the bounds, since the loop
    /// last took the counts.
    names_rejected: u64,
    refused: u64,
    /// Types asked of a node (`~/get_type_description`), ever; at most
    /// [`MAX_FETCHES`], each once.
    fetching: HashSet<String>,
    /// Types asked per node (at most [`MAX_FETCHES_PER_NODE`] each).
    fetched_of: HashMap<(String, u64), usize>,
    /// Topics whose ROS 2 subscriptions, and services whose ROS 2 servers,
    /// changed since the loop last looked (it updates only those).
    subs_changed: HashSet<(Domain, String)>,
    servers_changed: HashSet<(Domain, String)>,
    /// Asks the loop has not sent yet.
    to_fetch: Vec<Fetch>,
    learned: u64,
}

impl Tables {
    /// Remembers `tok` (under `key`) if the bounds leave room: in all, for
    /// nodes, for its node.
    fn admit(&mut self, key: &str, tok: &Token) -> bool {
        let node = (tok.zid.clone(), tok.nid);
        let n = self.per_node.get(&node).copied().unwrap_or(0);
        if self.entities.len() >= MAX_ROS_ENTITIES
            || n >= MAX_ROS_ENTITIES_PER_NODE
            || (n == 0 && self.per_node.len() >= MAX_ROS_NODES)
        {
            self.ignored += 1;
            self.refused += 1;
            return false;
        }
        self.per_node.insert(node, n + 1);
        self.bytes += 2 * key.len() + ENTITY_COST;
        self.entities.insert(key.to_string(), tok.clone());
        true
    }

    /// Forgets the entity of `key`, if it was remembered.
    fn release(&mut self, key: &str) -> bool {
        let Some(tok) = self.entities.remove(key) else {
            return false;
        };
        self.bytes -= 2 * key.len() + ENTITY_COST;
        let node = (tok.zid, tok.nid);
        if let Some(n) = self.per_node.get_mut(&node) {
            *n -= 1;
            if *n == 0 {
                self.per_node.remove(&node);
            }
        }
        true
    }
}

/// Types asked of nodes, in all (each type once).
pub const MAX_FETCHES: usize = rosgate_ros2::link::MAX_FETCHES;

/// Seconds. The longest a node may take to describe a type.
pub const FETCH_TIMEOUT_SECS: u64 = rosgate_ros2::link::FETCH_TIMEOUT.as_secs();

/// A type to ask a node for: the node that has an entity of it, the type
/// and the hash the node advertised.
#[derive(Debug)]
struct Fetch {
    domain: Domain,
    node: String,
    ty: String,
    hash: String,
}

/// What Zenoh's threads share with the loop for the ROS 2 side.
pub(crate) struct RosShared {
    zid: String,
    fed: Arc<Shared>,
    /// The types known: replaced whole (never edited in place) when a
    /// node's description adds one, so a reader's snapshot stays valid.
    types: RwLock<Arc<Registry>>,
    tables: Mutex<Tables>,
    undecodable: AtomicU64,
    /// The session requests go out on (from the loop, and from Zenoh's
    /// threads when one answer leads to the next request).
    session: Session,
    /// The sequence number of this gateway's last rmw_zenoh request.
    call_seq: AtomicI64,
    /// Events for the ROS 2 link from Zenoh's threads (replies, query
    /// ends, feedback, action servers' tokens), for the loop's next turn.
    link_inbox: Mutex<exec::LinkInbox>,
    /// GIDs of this gateway's publishers to ROS 2: a history query reads
    /// this gateway's own caches too, and what it finds there is not news.
    own_gids: Mutex<HashSet<[u8; 16]>>,
}

fn unix_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

impl RosShared {
    /// The types known now (a snapshot).
    fn types(&self) -> Arc<Registry> {
        self.types.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn own_gids(&self) -> MutexGuard<'_, HashSet<[u8; 16]>> {
        self.own_gids.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn tables(&self) -> MutexGuard<'_, Tables> {
        self.tables.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A ROS 2 liveliness token came or went.
    fn on_token(&self, s: &Sample) {
        let key = s.key_expr().as_str();
        let Some(tok) = Token::parse(key) else {
            // Not a token rmw_zenoh would accept either.
            self.tables().ignored += 1;
            return;
        };
        if tok.zid == self.zid {
            return;
        }
        let Ok(domain) = Domain::try_from(tok.domain) else {
            return;
        };
        let put = s.kind() == SampleKind::Put;
        // Names no real node can announce (rmw refuses them).
        if !rosgate_ros2::names::valid_token_names(&tok) {
            if put {
                self.tables().names_rejected += 1;
            }
            return;
        }
        let mut t = self.tables();
        if put {
            if t.entities.contains_key(key) || !t.admit(key, &tok) {
                return;
            }
        } else if !t.release(key) {
            return;
        }
        // The link learns every token remembered here: interest, the
        // services and actions ROS 2 serves, and the calls and goals to
        // them are its to decide.
        self.to_link(if put {
            rosgate_ros2::link::Event::Appeared(rosgate_ros2::link::rmw_zenoh::entity(&tok))
        } else {
            rosgate_ros2::link::Event::Gone(tok.gid())
        });
        let Some(ep) = &tok.endpoint else {
            return;
        };
        if put {
            self.want_type(&mut t, domain, &tok, ep);
        }
        let typed = Typed {
            dds_type: ep.dds_type.clone(),
            hash: ep.hash.clone(),
        };
        if matches!(
            tok.kind,
            EntityKind::Subscription | EntityKind::ServiceServer
        ) {
            let k = (domain, ep.name.clone());
            let changed = if tok.kind == EntityKind::Subscription {
                &mut t.subs_changed
            } else {
                &mut t.servers_changed
            };
            changed.insert(k.clone());
            let table = if tok.kind == EntityKind::Subscription {
                &mut t.subs
            } else {
                &mut t.servers
            };
            if put {
                table.entry(k).or_default().insert(key.to_string(), typed);
            } else if let Some(m) = table.get_mut(&k) {
                m.remove(key);
                if m.is_empty() {
                    table.remove(&k);
                }
            }
        }
        if tok.kind == EntityKind::Publisher {
            let gid = rmw::gid(key);
            if put {
                let latched = (ep.qos.durability == rmw::Durability::TransientLocal)
                    .then_some(ep.qos.depth.max(1));
                t.publishers.insert(gid, (tok.zid.clone(), latched));
            } else {
                t.publishers.remove(&gid);
            }
        }
    }

    /// Queues asking the entity's node for its type when it is not known
    /// here (once per type).
    fn want_type(&self, t: &mut Tables, domain: Domain, tok: &Token, ep: &Endpoint) {
        let Some(ty) = rmw::ros_type_name(&ep.dds_type) else {
            return;
        };
        let types = self.types();
        let known = if tok.kind.is_service() {
            types.srv(&ty).is_some()
        } else {
            types.msg(&ty).is_some()
        };
        let node = (tok.zid.clone(), tok.nid);
        let asked = t.fetched_of.get(&node).copied().unwrap_or(0);
        if known
            || t.fetching.len() >= MAX_FETCHES
            || asked >= MAX_FETCHES_PER_NODE
            || !t.fetching.insert(ty.clone())
        {
            return;
        }
        t.fetched_of.insert(node, asked + 1);
        t.to_fetch.push(Fetch {
            domain,
            node: tok.node_fqn(),
            ty,
            hash: ep.hash.clone(),
        });
    }

    /// A node's answer to `~/get_type_description` for `ty`: its types are
    /// added when they hash to what the node advertised.
    fn on_description(&self, node: &str, ty: &str, hash: &str, response: &str, reply: &Reply) {
        let Ok(sample) = reply.result() else {
            rosgate_core::log!(Info, "ros2: {node} refused to describe {ty}");
            return;
        };
        let mut json = Vec::new();
        let payload = sample.payload().to_bytes();
        if cdr::decode_json(&*self.types(), response, &payload, &mut json).is_err() {
            rosgate_core::log!(Info, "ros2: {node}'s description of {ty} does not decode");
            return;
        }
        let v: serde_json::Value = serde_json::from_slice(&json).unwrap_or_default();
        if v["successful"] != true {
            rosgate_core::log!(
                Info,
                "ros2: {node} cannot describe {ty}: {}",
                v["failure_reason"].as_str().unwrap_or_default()
            );
            return;
        }
        let mut types = self.types.write().unwrap_or_else(|p| p.into_inner());
        let mut next = (**types).clone();
        match next.add_description(&v["type_description"]) {
            Ok(added) if next.hash(ty).as_deref() == Some(hash) => {
                *types = Arc::new(next);
                drop(types);
                self.tables().learned += added.len() as u64;
                rosgate_core::log!(
                    Info,
                    "ros2: learned {ty} from {node} ({} types)",
                    added.len()
                );
            }
            Ok(_) => rosgate_core::log!(
                Warn,
                "ros2: {node}'s description of {ty} does not hash to {hash}: not used"
            ),
            Err(e) => rosgate_core::log!(Warn, "ros2: {node}'s description of {ty}: {e}"),
        }
    }

    /// A sample of a topic local clients subscribe to, from ROS 2:
    /// decoded here, on Zenoh's thread, then handed to the loop.
    fn on_data(&self, domain: Domain, topic: &str, s: &Sample) {
        if self.fed.inbox_full() {
            self.fed.drop_one();
            return;
        }
        let mut latched = None;
        if let Some(a) = s.attachment() {
            if let Some(a) = Attachment::decode(&a.to_bytes()) {
                if self.own_gids().contains(&a.gid) {
                    return;
                }
                let publisher = self.tables().publishers.get(&a.gid).cloned();
                if let Some((zid, depth)) = publisher {
                    // Another gateway's publish: it crossed the federation.
                    if self.fed.is_gateway(&zid) {
                        return;
                    }
                    latched = depth;
                }
            }
        }
        let Some(json) = self.sample_json(s) else {
            return;
        };
        // A transient local publisher's samples are latched in the hub, so
        // clients that subscribe later get them as from a local one.
        self.fed.deliver(domain, topic, json, latched);
    }

    /// A ROS 2 sample as rosbridge JSON, decoded by the type its key
    /// names; `None` (counted as undecodable) when it does not decode.
    fn sample_json(&self, s: &Sample) -> Option<String> {
        let key = s.key_expr().as_str();
        let (_, _, dds, _) = rmw::parse_data_key(key)?;
        let Some(ty) = rmw::ros_type_name(&dds) else {
            self.undecodable();
            return None;
        };
        let mut json = Vec::new();
        let payload = s.payload().to_bytes();
        if let Err(e) = cdr::decode_json(&*self.types(), &ty, &payload, &mut json) {
            self.undecodable();
            rosgate_core::log!(Debug, "ros2: a sample of {key} ({ty}) dropped: {e}");
            return None;
        }
        let json = String::from_utf8(json).ok();
        if json.is_none() {
            self.undecodable();
        }
        json
    }

    fn undecodable(&self) {
        self.undecodable.fetch_add(1, Ordering::Relaxed);
        self.fed.drop_one();
    }

    /// The type of the ROS 2 subscriptions of `topic` (the first, by
    /// token), if any.
    fn subscribed(&self, domain: Domain, topic: &str) -> Option<Typed> {
        let t = self.tables();
        let m = t.subs.get(&(domain, topic.to_string()))?;
        m.values().next().cloned()
    }

    /// The type of a ROS 2 server of `service`, if any.
    fn served(&self, domain: Domain, service: &str) -> Option<Typed> {
        let t = self.tables();
        let m = t.servers.get(&(domain, service.to_string()))?;
        m.values().next().cloned()
    }

    /// What the tables hold, in bytes, as the memory ledger counts them.
    pub(crate) fn held_bytes(&self) -> usize {
        self.tables().bytes
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

    pub(crate) fn status_json(&self) -> serde_json::Value {
        let t = self.tables();
        serde_json::json!({
            "entities": t.entities.len(),
            "subscriptions": t.subs.len(),
            "servers": t.servers.len(),
            "ignored": t.ignored,
            "types_asked": t.fetching.len(),
            "types_learned": t.learned,
            "types_known": self.types().msgs().count(),
            "undecodable": self.undecodable.load(Ordering::Relaxed),
        })
    }
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

/// What this gateway publishes a topic to ROS 2 as.
struct Pub {
    typed: Typed,
    ros_type: String,
    key: String,
    gid: [u8; 16],
    seq: i64,
    /// For a topic a local client publishes latched (transient local):
    /// the depth, and the publisher whose cache late ROS 2 subscribers
    /// query (rmw_zenoh's transient local).
    latched: Option<(u32, Declared)>,
    /// The latched depth it was made for (whether or not the cache could
    /// be declared: it is not made again for every message).
    made_for: Option<u32>,
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
    /// The ROS 2 link's state machine: today it decides goals to ROS 2
    /// action servers (`goals_out.rs` executes it); the rest is still
    /// this shell's own tables.
    link: rosgate_ros2::link::Link,
    /// What executing the link's goals keeps beside it.
    goals_out: goals_out::GoalsOut,
    /// The link's lines for the hub, in order, until the turn hands them
    /// over (one per call or goal end, and one turn's feedback).
    link_out: Vec<(Domain, exec::ForHub)>,
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
    /// Topics the hub checks messages of (ROS 2 subscribes to them).
    checked: HashMap<(Domain, String), String>,
    checker_installed: bool,
    /// When the graph was last rebuilt for introspection.
    last_graph: Option<std::time::Instant>,
    /// The link's graph generation last installed (none yet: the first
    /// turn installs the empty graph).
    graph_installed: Option<u64>,
}

/// The hub's check of client messages against the ROS 2 type of a topic
/// that ROS 2 subscribes to: the message must encode.
struct Check(Arc<RosShared>);

impl rosgate_core::hub::TypeCheck for Check {
    fn check(&self, ty: &str, msg: &str) -> Result<(), String> {
        let v: serde_json::Value = rosgate_ros2::json::from_str(msg).map_err(|e| e.to_string())?;
        cdr::encode(&*self.0.types(), ty, &v)
            .map(drop)
            .map_err(|e| e.to_string())
    }
}

impl RosLink {
    /// Joins the ROS 2 graph of each domain: this gateway's node token,
    /// and a watcher of everyone's tokens.
    pub(crate) fn start(
        session: &Session,
        settings: &RosSettings,
        types: Registry,
        fed: Arc<Shared>,
        decls: Decls,
    ) -> Result<RosLink, String> {
        let types = Arc::new(types);
        let zid = session.zid().to_string();
        let shared = Arc::new(RosShared {
            zid: zid.clone(),
            fed,
            types: RwLock::new(types),
            tables: Mutex::new(Tables::default()),
            undecodable: AtomicU64::new(0),
            session: session.clone(),
            call_seq: AtomicI64::new(0),
            link_inbox: Mutex::new(exec::LinkInbox::default()),
            own_gids: Mutex::new(HashSet::new()),
        });
        let mut link = RosLink {
            zid,
            decls,
            shared,
            domains: settings.domains.clone(),
            nodes: HashMap::new(),
            next_id: 0,
            goal_seq: 0,
            link: rosgate_ros2::link::Link::new(),
            goals_out: goals_out::GoalsOut::default(),
            link_out: Vec::new(),
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
            checked: HashMap::new(),
            checker_installed: false,
            last_graph: None,
            graph_installed: None,
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
    pub(crate) fn sync_nodes(&mut self, _session: &Session, hub: &Hub) {
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

    /// The data-key type of a type local clients named (`std_msgs/String`
    /// or `std_msgs/msg/String`), if the type is known.
    fn typed_msg(&self, ty: &str) -> Option<Typed> {
        let types = self.shared.types();
        let full = types.msg(ty)?.name.clone();
        Some(Typed {
            dds_type: rmw::dds_type_name(&full)?,
            hash: types.hash(&full)?.to_string(),
        })
    }

    /// Local clients subscribe to `topic`: take it from ROS 2 publishers
    /// of any type (each sample is decoded by the type its key names).
    pub(crate) fn want(&mut self, session: &Session, hub: &Hub, domain: Domain, topic: Rc<str>) {
        if !self.bridged(domain) || self.subs.contains_key(&(domain, topic.clone())) {
            return;
        }
        let sh = self.shared.clone();
        let name: Arc<str> = Arc::from(&*topic);
        // As rmw_zenoh's transient local subscriptions do: ask the caches
        // of transient local publishers (now, and of those that come
        // later) for what they keep.
        let key = rmw::data_key_any_type(u32::from(domain), &topic);
        let data = self.decls.declare(
            format!("ros2: cannot subscribe to {topic}"),
            move |session: &Session| {
                session
                    .declare_subscriber(key)
                    .history(HistoryConfig::default().detect_late_publishers())
                    .allowed_origin(Locality::Remote)
                    .callback(move |s: Sample| sh.on_data(domain, &name, &s))
                    .wait()
            },
        );
        let typed = hub
            .topic_type(domain, &topic)
            .and_then(|t| self.typed_msg(t));
        let token = typed.and_then(|t| {
            self.declare(session, domain, EntityKind::Subscription, &topic, &t)
                .map(|(_, tok)| tok)
        });
        self.subs.insert(
            (domain, topic),
            Sub {
                _data: data,
                _token: token,
            },
        );
    }

    pub(crate) fn unwant(&mut self, domain: Domain, topic: &Rc<str>) {
        self.subs.remove(&(domain, topic.clone()));
    }

    /// A message the bridge of `domain` drained for `topic`: put to ROS 2
    /// as CDR when ROS 2 subscribes to it. Returns false when it had to be
    /// dropped (it does not fit the subscriptions' type).
    pub(crate) fn publish(
        &mut self,
        session: &Session,
        domain: Domain,
        topic: &str,
        msg: &str,
        latched: Option<u32>,
    ) -> bool {
        if !self.bridged(domain) {
            return true;
        }
        let Some(typed) = self.shared.subscribed(domain, topic) else {
            // Most drained topics never had ROS 2 subscribers: no work.
            if !self.pubs.is_empty() {
                self.drop_pub(domain, topic);
            }
            return true;
        };
        let k = (domain, Rc::<str>::from(topic));
        let stale = |p: &Pub| p.typed != typed || p.made_for != latched;
        if self.pubs.get(&k).is_none_or(stale) {
            self.drop_pub(domain, topic);
            let Some(ros_type) = rmw::ros_type_name(&typed.dds_type) else {
                return false;
            };
            // A latched topic is a transient local publisher in ROS 2, as
            // rmw_zenoh makes one: a cache of `depth` samples that late
            // subscribers' history queries read, and sample numbers so a
            // subscriber that gets one twice (live and from the cache)
            // keeps one.
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
                return false;
            };
            let key = rmw::data_key(u32::from(domain), topic, &typed.dds_type, &typed.hash);
            let cache = latched.map(|depth| {
                let k = key.clone();
                let declared = self.decls.declare(
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
                );
                (depth, declared)
            });
            let gid = rmw::gid(&token_key);
            self.shared.own_gids().insert(gid);
            let p = Pub {
                gid,
                key,
                typed,
                ros_type,
                seq: 0,
                latched: cache,
                made_for: latched,
                _token: token,
            };
            self.pubs.insert(k.clone(), p);
        }
        let Some(p) = self.pubs.get_mut(&k) else {
            return false;
        };
        let v: serde_json::Value = match rosgate_ros2::json::from_str(msg) {
            Ok(v) => v,
            Err(_) => return false,
        };
        let bytes = match cdr::encode(&*self.shared.types(), &p.ros_type, &v) {
            Ok(b) => b,
            Err(e) => {
                rosgate_core::log!(
                    Debug,
                    "ros2: a message on {topic} not sent to ROS 2: it is not {}: {e}",
                    p.ros_type
                );
                return false;
            }
        };
        p.seq += 1;
        let att = Attachment {
            seq: p.seq,
            timestamp_ns: unix_ns(),
            gid: p.gid,
        };
        match &p.latched {
            // The cache lives on the worker: the put follows its
            // declaration there (worker.rs).
            Some((_, cache)) => {
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
            self.shared.own_gids().remove(&p.gid);
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

    /// The ROS 2 graph into introspection, when it changed.
    /// One loop turn's work; returns when it wants the next turn at the
    /// latest (a graph change held back for its interval).
    pub(crate) fn turn(
        &mut self,
        session: &Session,
        hub: &mut Hub,
        now: std::time::Instant,
    ) -> Option<std::time::Instant> {
        let (fetches, more, rejected, refused) = {
            let mut t = self.shared.tables();
            let n = t.to_fetch.len().min(FETCHES_PER_TURN);
            let fetches: Vec<Fetch> = t.to_fetch.drain(..n).collect();
            let counts = (
                std::mem::take(&mut t.names_rejected),
                std::mem::take(&mut t.refused),
            );
            (fetches, !t.to_fetch.is_empty(), counts.0, counts.1)
        };
        for f in fetches {
            self.fetch(f);
        }
        if more {
            self.shared.fed.wake();
        }
        hub.count_n(rosgate_core::counters::Counter::Ros2NamesRejected, rejected);
        hub.count_n(
            rosgate_core::counters::Counter::Ros2EntitiesRefused,
            refused,
        );
        self.turn_link(session, hub, now);
        if !self.checker_installed {
            self.checker_installed = true;
            hub.set_type_checker(Box::new(Check(self.shared.clone())));
        }
        self.follow_subscriptions(hub);
        // Rebuilt at most every interval: a burst of tokens costs one
        // rebuild, not one per turn.
        let interval = std::time::Duration::from_millis(crate::GRAPH_INTERVAL_MS as u64);
        let dirty = self.graph_installed != Some(self.link.graph_generation());
        if let Some(due) = self.last_graph.map(|t| t + interval) {
            if now < due {
                return dirty.then_some(due);
            }
        }
        if !dirty {
            return None;
        }
        self.last_graph = Some(now);
        self.graph_installed = Some(self.link.graph_generation());
        for &d in &self.domains {
            let (nodes, topics) = self.link.graph(u32::from(d));
            let graph = rosgate_core::hub::RemoteGraph::of(nodes, topics);
            hub.install_remote_graph(ROS_GRAPH, d, graph);
        }
        None
    }

    /// For each topic whose ROS 2 subscriptions changed, and each service
    /// whose ROS 2 servers did: the hub's type check of client messages,
    /// this gateway's publisher to ROS 2 and its client of the service
    /// follow (O(what changed), every turn, not held back with the graph).
    fn follow_subscriptions(&mut self, hub: &mut Hub) {
        let (subs, servers) = {
            let mut t = self.shared.tables();
            if t.subs_changed.is_empty() && t.servers_changed.is_empty() {
                return;
            }
            (
                std::mem::take(&mut t.subs_changed),
                std::mem::take(&mut t.servers_changed),
            )
        };
        for k in subs {
            // Client messages on topics ROS 2 subscribes to must fit its type.
            let ty = self
                .shared
                .subscribed(k.0, &k.1)
                .and_then(|typed| rmw::ros_type_name(&typed.dds_type));
            if self.checked.get(&k) != ty.as_ref() {
                hub.set_topic_check(k.0, &k.1, ty.as_deref());
                match ty {
                    Some(ty) => self.checked.insert(k.clone(), ty),
                    None => self.checked.remove(&k),
                };
            }
            // A publisher to ROS 2 whose subscriptions all went.
            if !self.checked.contains_key(&k) && self.shared.subscribed(k.0, &k.1).is_none() {
                if let Some(p) = self.pubs.remove(&(k.0, Rc::from(k.1.as_str()))) {
                    self.shared.own_gids().remove(&p.gid);
                }
            }
        }
        // Clients of services whose servers all went.
        for k in servers {
            if self.shared.served(k.0, &k.1).is_none() {
                self.clients.remove(&(k.0, Rc::from(k.1.as_str())));
            }
        }
    }

    /// Asks a node for a type's description (`~/get_type_description`,
    /// rmw_zenoh's service of every Jazzy node); the answer is taken on
    /// Zenoh's thread ([`RosShared::on_description`]).
    fn fetch(&mut self, f: Fetch) {
        let types = self.shared.types();
        let service = rosgate_ros2::describe::SERVICE_TYPE;
        let (Some(def), Some(dds), Some(hash)) = (
            types.srv(service),
            rmw::dds_type_name(service),
            types.hash(service),
        ) else {
            return;
        };
        let request = rosgate_ros2::describe::request(&f.ty, &f.hash);
        let Ok(bytes) = cdr::encode(&*types, &def.request, &request) else {
            return;
        };
        let Some(node) = self.nodes.get(&f.domain) else {
            return;
        };
        let gid = rmw::gid(&node.key);
        let name = format!("{}/get_type_description", f.node.trim_end_matches('/'));
        let key = rmw::data_key(u32::from(f.domain), &name, &dds, &hash);
        let (sh, response) = (self.shared.clone(), def.response.clone());
        let timeout = Duration::from_secs(FETCH_TIMEOUT_SECS);
        self.shared.request(key, bytes, gid, timeout, move |r| {
            sh.on_description(&f.node, &f.ty, &f.hash, &response, r)
        });
    }

    /// This gateway's node names, per domain (for the status).
    pub(crate) fn status_json(&self) -> serde_json::Value {
        let mut v = self.shared.status_json();
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
        let link = self.link.stats();
        v["goals_in_flight"] = serde_json::Value::from(link.goals_out);
        v["calls_in_flight"] = serde_json::Value::from(link.calls_out);
        v["calls_from_ros2"] = serde_json::Value::from(link.calls_in);
        v["link_events_dropped"] = serde_json::Value::from(self.shared.link_events_dropped());
        v["goals_from_ros2"] = serde_json::Value::from(link.goals_in);
        v["results_waiting"] = serde_json::Value::from(self.link.results_waiting());
        v["actions_served"] = serde_json::Value::from(self.actions.len());
        v["client_nodes"] = serde_json::Value::from(self.client_nodes.len());
        v
    }
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
