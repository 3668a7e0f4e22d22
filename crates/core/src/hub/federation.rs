//! The federation seam: how another gateway's traffic (Zenoh, in the
//! `rosgate-zenoh` crate) joins the hub without the core knowing the
//! network it came over.
//!
//! Owns, per domain, one *bridge*: a connection without a socket that
//! subscribes on behalf of the remote gateways interested in a topic and
//! whose queued output the shell drains into the network instead of a
//! socket, so a bridge gets fan-out, latched greetings, shedding and the
//! memory ledger exactly as a client does. That queue carries topic data
//! only: calls, goals, cancels and answers for the peers beyond a bridge
//! go typed into the outbox (`crate::bridge`, filled by `hub/bridge_out.rs`)
//! with the peer named, from the record kept here of which peer (ROS 2 or
//! the other gateways) provides each remote service and action, and from
//! the peer a bridge's call came from. Owns too the record of which
//! topics have local subscribers, announced to the shell as changes (it
//! declares interest upstream only while somebody here listens:
//! `docs/federation.md`, "What crosses, and how").
//!
//! Invariants:
//! - with federation off nothing here runs: one branch where a subscriber
//!   comes or goes, none on the publish path;
//! - a sample from a remote gateway reaches local clients only, never a
//!   bridge: nothing is echoed back and nothing loops between gateways
//!   (the publish router's rule, `Origin::Remote` in `hub/topics.rs`);
//! - a bridge's subscriptions are never local interest (else two gateways
//!   would keep each other interested forever);
//! - a call or goal the bridge makes on behalf of a peer goes to a bridge
//!   only when the peer serving it is another ROS 2 side
//!   ([`PeerId::forwards_to`], [`Hub::may_forward`]): never back to its
//!   own side, never from one gateway to a third;
//! - interest changes are reported at most once per topic per turn, as
//!   the state after the turn;
//! - the tables hold one entry per topic that remote gateways want or
//!   local clients subscribe to: bounded by the registries' limits.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::rc::Rc;
use std::time::Instant;

use rosgate_wire::Raw;

use super::params::NODE_PARAM_SERVICES;
use super::qos::{Asked, Registering};
use super::Hub;
use crate::access::Class;
use crate::bridge::{BridgeMsg, Outbox, PeerId};
use crate::conn::{Conn, ConnRef};
use crate::counters::Counter;
use crate::nodes::{Domain, DOMAINS};
use crate::registry::{Provided, Role};
use crate::transport::{StatusFilter, Transport};

/// A goal a peer's caller sends ([`Bridges::remote_goal`](super::Bridges::remote_goal)): the action,
/// the id the shell chose (a JSON string's content), its type and `args`.
#[derive(Debug, Clone, Copy)]
pub struct RemoteGoal<'a> {
    pub action: &'a str,
    pub id: &'a str,
    pub ty: &'a str,
    pub args: Raw<'a>,
}

/// What an [`InterestChange`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Offer {
    /// Local clients subscribe to the topic (or none does any more).
    Topic,
    /// A local client provides the service (or none does any more), or,
    /// to the peers it crosses to, another ROS 2 side does
    /// ([`PeerId::forwards_to`]).
    Service,
    /// A local client serves the action (or none does any more), or, as
    /// for a service, another ROS 2 side does.
    Action,
}

impl From<Provided> for Offer {
    fn from(kind: Provided) -> Offer {
        match kind {
            Provided::Service => Offer::Service,
            Provided::Action => Offer::Action,
        }
    }
}

/// A change for the shell to announce to other gateways.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterestChange {
    pub domain: Domain,
    pub kind: Offer,
    /// The topic or service name.
    pub name: Rc<str>,
    /// The service's type (empty for topics).
    pub ty: Rc<str>,
    /// On (a local subscriber or provider now exists) or off.
    pub wanted: bool,
    /// The one peer the change is for (a topic another ROS 2 side wants:
    /// [`PeerId::forwards_to`]), or every peer (`None`).
    pub to: Option<PeerId>,
}

/// A sample one ROS 2 side sent that another ROS 2 side wants
/// ([`PeerId::forwards_to`]): the shell puts it to every peer it crosses
/// to, never back to `from`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forward {
    pub from: PeerId,
    pub domain: Domain,
    pub topic: Rc<str>,
    /// The sample as JSON (valid).
    pub msg: Box<str>,
    /// The sample's CDR as the node put it, and its full type name: the
    /// other side puts it untouched when it subscribes with that type.
    pub cdr: Option<(Box<str>, Box<[u8]>)>,
    /// From a latched publisher keeping that many.
    pub latched: Option<u32>,
}

/// Bytes. Samples waiting for the shell to forward them from one ROS 2
/// side to another ([`Forward`]); the shell takes them every turn, so
/// this holds one turn's worth at most; past it a sample is not forwarded
/// (counted in `federation_out_dropped`).
pub const MAX_FORWARD_BYTES: usize = 8 << 20;

type TopicKey = (Domain, Rc<str>);
/// A service or an action of a domain.
type ProvKey = (Provided, Domain, Rc<str>);

/// See the module docs.
#[derive(Debug, Default)]
pub(super) struct Federation {
    pub(super) enabled: bool,
    bridges: HashMap<Domain, ConnRef>,
    /// Topics peers want, with which peers ([`PeerId::bit`]): the
    /// domain's bridge subscribes to each.
    remote: HashMap<TopicKey, u8>,
    /// Topics announced to the shell as wanted here (local subscribers).
    announced: HashSet<TopicKey>,
    /// Topics announced to some peers only, because another ROS 2 side
    /// wants them ([`PeerId::forwards_to`]): the peers told, as bits.
    cross: HashMap<TopicKey, u8>,
    /// Samples to forward between ROS 2 sides, and their bytes.
    pub(super) forwards: Vec<Forward>,
    pub(super) forward_bytes: usize,
    /// Topics whose local subscribers changed this turn.
    dirty: HashSet<TopicKey>,
    /// Services and actions other gateways or ROS 2 provide, with their
    /// type, per peer ([`PeerId::index`]): the domain's bridge provides
    /// them here while no local client does, and its calls and goals go to
    /// the first peer listed ([`Hub::serving_peer`]).
    pub(super) remote_services: HashMap<ProvKey, [Option<Rc<str>>; PeerId::ALL.len()]>,
    /// Calls, goals and answers for the peers (`crate::bridge`).
    pub(super) outbox: Outbox,
    /// The peer whose call, goal or cancel the bridge is making now
    /// ([`Hub::remote_call_from`]): answers the hub gives at once go back
    /// to it.
    pub(super) speaking: Option<PeerId>,
    /// Services and actions announced to the shell as provided here.
    provided: HashSet<ProvKey>,
    /// Services and actions announced to some peers only, because another
    /// ROS 2 side provides them ([`PeerId::forwards_to`]): the peers told,
    /// as bits. The bridge serves their calls and goals from that side.
    cross_provided: HashMap<ProvKey, u8>,
    /// Services and actions whose provider changed this turn.
    dirty_services: HashSet<ProvKey>,
    /// Services the hub answers itself for local nodes (their parameter
    /// services), with how many local nodes of that name there are.
    builtin: HashMap<TopicKey, u32>,
    /// What other gateways said their graph is, per domain and gateway.
    pub(super) graphs: BTreeMap<(Domain, String), RemoteGraph>,
    /// Changes of `graphs` so far: a reader that kept the count (a
    /// Foxglove session's channels, `hub/foxglove.rs`) knows whether to
    /// look again.
    pub(super) graphs_changes: u64,
    /// Items in `graphs`, all together (at most
    /// [`MAX_REMOTE_GRAPH_ITEMS_TOTAL`]).
    pub(super) graph_items: usize,
    /// Bytes of `graphs` as the memory ledger counts them (at most
    /// [`MAX_REMOTE_GRAPH_BYTES_TOTAL`]).
    pub(super) graph_bytes: usize,
    /// Items and bytes of `graphs` per gateway, all its domains together
    /// (items at most [`MAX_REMOTE_GRAPH_ITEMS_PER_GATEWAY`]).
    per_gateway: HashMap<String, (usize, usize)>,
    /// When the shell wants its next turn at the latest (work it held back
    /// for its interval: a graph to rebuild or put).
    due: Option<Instant>,
    /// Bytes the shell holds for what other gateways and ROS 2 nodes
    /// announced (its tables, samples waiting in the inbox): reported each
    /// turn, counted in the memory ledger.
    pub(super) shell_bytes: usize,
    /// Connections that left (their registrations went with them): part
    /// of the graph's epoch.
    left: u64,
    /// Topics whose latched messages from other gateways the bridge keeps
    /// here (it publishes them as a latched publisher), so local
    /// subscribers that come later receive them too.
    latched_here: HashSet<TopicKey>,
    /// What the shell last said of the network side (JSON object).
    status: Option<String>,
}

/// Items. Nodes, topics, and parameters, kept of one other gateway's
/// graph per domain, each list (beyond: ignored, and its graph is marked
/// truncated).
pub const MAX_REMOTE_GRAPH_ITEMS: usize = 10_000;

/// Items. Nodes, topics and parameters kept of one other gateway's graphs,
/// all its domains together: what one peer (however many domains it
/// announces) makes this gateway hold (beyond: its graph is cut,
/// parameters first, and marked truncated; the items cut are counted).
pub const MAX_REMOTE_GRAPH_ITEMS_PER_GATEWAY: usize = 30_000;

/// Bytes. Other gateways' graphs together, as the memory ledger counts
/// them (`REMOTE_ITEM_COST` per item plus its names): long names cannot
/// make the item bound a big one (beyond: cut as above).
pub const MAX_REMOTE_GRAPH_BYTES_TOTAL: usize = 16 << 20;

/// Bytes the ledger counts per item of another gateway's graph beyond its
/// names (the `String`s and their slots in the lists).
pub const REMOTE_ITEM_COST: usize = 64;

/// Items. Nodes, topics and parameters kept of all other gateways' graphs
/// together: however many gateways (or peers posing as gateways) announce
/// one, what they make this gateway hold is bounded (beyond: the graph
/// that would pass it is cut, parameters first, and marked truncated).
pub const MAX_REMOTE_GRAPH_ITEMS_TOTAL: usize = 100_000;

/// Another gateway's nodes and topics (with types) in one domain: what it
/// last announced. [`RemoteGraph::parse`] is pure, so the shell parses an
/// announcement on the thread that received it and the loop only installs
/// it ([`Bridges::install_remote_graph`](super::Bridges::install_remote_graph)).
#[derive(Debug, Default, Clone)]
pub struct RemoteGraph {
    pub(super) nodes: Vec<String>,
    /// Name, type, and how many subscribers the topic has there.
    pub(super) topics: Vec<(String, String, u32)>,
    /// The parameters its nodes own, as rosapi names them (`/node:name`),
    /// so `get_param_names` lists them on every gateway.
    pub(super) params: Vec<String>,
    pub(super) truncated: bool,
    /// Items the announcement named that were not kept (too long, past
    /// [`MAX_REMOTE_GRAPH_ITEMS`]).
    refused: usize,
}

impl RemoteGraph {
    /// An announcement `{"nodes":[..],"topics":[[name,type,subscribers],
    /// ..],"params":["/node:name",..]}` (anything else is ignored), each
    /// list cut at [`MAX_REMOTE_GRAPH_ITEMS`], names longer than
    /// `MAX_NAME_BYTES` left out.
    pub fn parse(json: &str) -> RemoteGraph {
        let v: serde_json::Value = serde_json::from_str(json).unwrap_or_default();
        let mut g = RemoteGraph::default();
        let short = |s: &str| s.len() <= rosgate_wire::decode::MAX_NAME_BYTES;
        // A list of names: each kept while short enough and room is left.
        let names = |field: &str, into: &mut Vec<String>, refused: &mut usize| {
            for n in v[field].as_array().into_iter().flatten() {
                match n.as_str() {
                    Some(n) if short(n) && into.len() < MAX_REMOTE_GRAPH_ITEMS => {
                        into.push(n.to_string())
                    }
                    Some(_) => *refused += 1,
                    None => {}
                }
            }
        };
        names("nodes", &mut g.nodes, &mut g.refused);
        names("params", &mut g.params, &mut g.refused);
        for t in v["topics"].as_array().into_iter().flatten() {
            let (Some(n), Some(ty)) = (t[0].as_str(), t[1].as_str()) else {
                continue;
            };
            let subs = t[2]
                .as_u64()
                .map_or(0, |s| s.min(u64::from(u32::MAX)) as u32);
            if short(n) && short(ty) && g.topics.len() < MAX_REMOTE_GRAPH_ITEMS {
                g.topics.push((n.to_string(), ty.to_string(), subs));
            } else {
                g.refused += 1;
            }
        }
        g.truncated = g.refused > 0;
        g
    }

    /// A graph of these lists (the ROS 2 side builds its own).
    pub fn of(nodes: Vec<String>, topics: Vec<(String, String, u32)>) -> RemoteGraph {
        let mut g = RemoteGraph {
            nodes,
            topics,
            ..RemoteGraph::default()
        };
        for list in [g.nodes.len(), g.topics.len()] {
            g.refused += list.saturating_sub(MAX_REMOTE_GRAPH_ITEMS);
        }
        g.nodes.truncate(MAX_REMOTE_GRAPH_ITEMS);
        g.topics.truncate(MAX_REMOTE_GRAPH_ITEMS);
        g.truncated = g.refused > 0;
        g
    }

    /// Nodes, topics and parameters.
    pub fn items(&self) -> usize {
        self.nodes.len() + self.topics.len() + self.params.len()
    }

    /// What the memory ledger counts for it.
    pub fn bytes(&self) -> usize {
        let names: usize = self.nodes.iter().map(String::len).sum::<usize>()
            + self
                .topics
                .iter()
                .map(|(n, t, _)| n.len() + t.len())
                .sum::<usize>()
            + self.params.iter().map(String::len).sum::<usize>();
        names + REMOTE_ITEM_COST * self.items()
    }

    /// Cuts it to at most `room` items and `room_bytes` bytes: parameters
    /// first, then topics, then nodes (the last of each). Returns how many
    /// items went.
    fn cut_to(&mut self, room: usize, room_bytes: usize) -> usize {
        let (mut items, mut bytes) = (self.items(), self.bytes());
        let mut cut = 0;
        while items > room || bytes > room_bytes {
            let freed = if let Some(p) = self.params.pop() {
                p.len()
            } else if let Some((n, t, _)) = self.topics.pop() {
                n.len() + t.len()
            } else if let Some(n) = self.nodes.pop() {
                n.len()
            } else {
                break;
            };
            items -= 1;
            bytes -= freed + REMOTE_ITEM_COST;
            cut += 1;
        }
        if cut > 0 {
            self.truncated = true;
        }
        cut
    }
}

impl Federation {
    /// Interest changes wait to be taken: the shell must not sleep.
    pub(super) fn has_changes(&self) -> bool {
        !self.dirty.is_empty() || !self.dirty_services.is_empty() || !self.outbox.is_empty()
    }
}

impl Hub {
    /// Turns the federation seam on (the shell, at start, when Zenoh is
    /// configured).
    pub fn enable_federation(&mut self) {
        self.fed.enabled = true;
    }

    /// Whether federation is on.
    pub fn federation_enabled(&self) -> bool {
        self.fed.enabled
    }

    /// What the shell holds now for other gateways and ROS 2 nodes (its
    /// tables, samples waiting in the inbox), in bytes: counted in the
    /// memory ledger (`memory_federation_bytes`) with the graphs kept here.
    pub(super) fn set_federation_held(&mut self, bytes: usize) {
        self.fed.shell_bytes = bytes;
    }

    /// The shell wants a loop turn by `at` (or no particular time): the
    /// loop's next deadline comes no later ([`Hub::next_deadline`]).
    pub(super) fn set_federation_due(&mut self, at: Option<Instant>) {
        self.fed.due = at;
    }

    pub(super) fn federation_due(&self) -> Option<Instant> {
        self.fed.due
    }

    /// Bytes held for federation: other gateways' graphs here plus what
    /// the shell reported ([`Hub::set_federation_held`]).
    pub(super) fn federation_bytes(&self) -> usize {
        self.fed.graph_bytes + self.fed.shell_bytes + self.fed.outbox.bytes()
    }

    /// Sets what `/rosgate/federation` answers about the network side: a
    /// JSON object (gateways, counters), which the hub completes with the
    /// topics it holds for other gateways.
    pub(super) fn set_federation_status(&mut self, status: String) {
        self.fed.status = Some(status);
    }

    /// The `/rosgate/federation` reply: the shell's status plus, for
    /// `me`'s domain and what its role may see, the topics wanted here and
    /// by other gateways.
    pub(super) fn federation_json(&self, me: ConnRef) -> String {
        let Some(status) = &self.fed.status else {
            return r#"{"enabled":false}"#.to_string();
        };
        let domain = self.conn(me.key).map_or(0, |c| c.domain());
        let role = self.viewer(me);
        let list = |set: &HashSet<TopicKey>| {
            let mut v: Vec<String> = set
                .iter()
                .filter(|(d, t)| {
                    *d == domain && self.visible(role, &[Class::Publish, Class::Subscribe], t)
                })
                .map(|(_, t)| t.to_string())
                .collect();
            v.sort_unstable();
            v
        };
        let mut v: serde_json::Value =
            serde_json::from_str(status).unwrap_or_else(|_| serde_json::json!({}));
        v["enabled"] = true.into();
        v["domain"] = domain.into();
        v["wanted_here"] = serde_json::json!(list(&self.fed.announced));
        let remote: HashSet<TopicKey> = self.fed.remote.keys().cloned().collect();
        v["wanted_remotely"] = serde_json::json!(list(&remote));
        // The other gateways' graphs of this domain, each marked with its
        // gateway (what the role may see of them).
        let graphs: Vec<serde_json::Value> = self
            .fed
            .graphs
            .range((domain, String::new())..)
            .take_while(|((d, _), _)| *d == domain)
            .map(|((_, gw), g)| {
                let topics: Vec<&(String, String, u32)> = g
                    .topics
                    .iter()
                    .filter(|(n, _, _)| self.visible(role, &[Class::Publish, Class::Subscribe], n))
                    .collect();
                serde_json::json!({
                    "gateway": gw,
                    "nodes": g.nodes,
                    "topics": topics,
                    "truncated": g.truncated,
                })
            })
            .collect();
        v["graphs"] = serde_json::json!(graphs);
        v.to_string()
    }

    /// Another gateway's graph of `domain` as it announced it (JSON, see
    /// [`RemoteGraph::parse`]). Replaces what it said before;
    /// introspection lists these beside the local graph.
    #[cfg(test)]
    pub(super) fn set_remote_graph(&mut self, gw: &str, domain: Domain, json: &str) {
        if !self.fed.enabled || (domain as usize) >= DOMAINS {
            return;
        }
        self.install_remote_graph(gw, domain, RemoteGraph::parse(json));
    }

    /// Another gateway's graph of `domain`, parsed already: kept within
    /// [`MAX_REMOTE_GRAPH_ITEMS_PER_GATEWAY`] for `gw`, and within
    /// [`MAX_REMOTE_GRAPH_ITEMS_TOTAL`] and [`MAX_REMOTE_GRAPH_BYTES_TOTAL`]
    /// for all gateways together (what does not fit is cut and counted in
    /// `federation_graph_items_refused`). O(items) moves: the parsing is
    /// the caller's.
    pub(super) fn install_remote_graph(&mut self, gw: &str, domain: Domain, mut g: RemoteGraph) {
        if !self.fed.enabled || (domain as usize) >= DOMAINS {
            return;
        }
        let key = (domain, gw.to_string());
        let (before, before_bytes) = self
            .fed
            .graphs
            .get(&key)
            .map_or((0, 0), |o| (o.items(), o.bytes()));
        let (gw_items, gw_bytes) = self.fed.per_gateway.get(gw).copied().unwrap_or((0, 0));
        let room = MAX_REMOTE_GRAPH_ITEMS_PER_GATEWAY
            .saturating_sub(gw_items - before)
            .min(MAX_REMOTE_GRAPH_ITEMS_TOTAL.saturating_sub(self.fed.graph_items - before));
        let room_bytes =
            MAX_REMOTE_GRAPH_BYTES_TOTAL.saturating_sub(self.fed.graph_bytes - before_bytes);
        let cut = g.cut_to(room, room_bytes);
        let refused = (g.refused + cut) as u64;
        if refused > 0 {
            self.counters
                .add(Counter::FederationGraphItemsRefused, refused);
        }
        let (items, bytes) = (g.items(), g.bytes());
        self.fed.graph_items = self.fed.graph_items - before + items;
        self.fed.graph_bytes = self.fed.graph_bytes - before_bytes + bytes;
        let mine = (gw_items - before + items, gw_bytes - before_bytes + bytes);
        if mine.0 == 0 {
            self.fed.per_gateway.remove(gw);
        } else {
            self.fed.per_gateway.insert(gw.to_string(), mine);
        }
        // Publishers that want peer counts learn the new remote counts:
        // the topics of the old graph and of the new one.
        let touched: Vec<String> = g.topics.iter().map(|(n, _, _)| n.clone()).collect();
        self.fed.graphs_changes += 1;
        let old = if items == 0 {
            self.fed.graphs.remove(&key)
        } else {
            self.fed.graphs.insert(key, g)
        };
        let touched = old
            .into_iter()
            .flat_map(|o| o.topics.into_iter().map(|(n, _, _)| n))
            .chain(touched);
        let ids: Vec<_> = touched
            .filter_map(|n| self.registries[domain as usize].topic_id(&n))
            .collect();
        for t in ids {
            self.peers_changed(domain, t);
        }
    }

    /// Another gateway left: its graphs go, and (as the bridge does not
    /// know whose they were) the latched messages kept for other gateways'
    /// publishers: their caches belonged to their publishers.
    pub(super) fn forget_gateway(&mut self, gw: &str, now: Instant) {
        self.fed.graphs.retain(|(_, g), _| g != gw);
        self.fed.graphs_changes += 1;
        if let Some((items, bytes)) = self.fed.per_gateway.remove(gw) {
            self.fed.graph_items -= items;
            self.fed.graph_bytes -= bytes;
        }
        let kept: Vec<TopicKey> = self.fed.latched_here.iter().cloned().collect();
        for (d, t) in kept {
            self.bridge_unlatches(d, &t, now);
        }
    }

    /// This gateway's own graph of `domain`, for the others: its nodes and
    /// its topics with a local (not bridge) endpoint, at most
    /// [`MAX_REMOTE_GRAPH_ITEMS`] of each.
    pub(super) fn local_graph(&self, domain: Domain) -> String {
        let reg = &self.registries[domain as usize];
        let mut nodes: Vec<String> = self
            .nodes
            .in_domain(domain)
            .map(|(n, _)| n.to_string())
            .take(MAX_REMOTE_GRAPH_ITEMS)
            .collect();
        for who in reg.members().take(MAX_REMOTE_GRAPH_ITEMS) {
            if !self.is_bridge(who) && self.nodes.of(who).is_empty() && reg.has_any(who) {
                nodes.push(self.conn_node_name(who));
            }
        }
        nodes.sort();
        nodes.dedup();
        nodes.truncate(MAX_REMOTE_GRAPH_ITEMS);
        let mut topics: Vec<(String, String, u32)> = Vec::new();
        for name in reg.topic_names(true) {
            if topics.len() >= MAX_REMOTE_GRAPH_ITEMS {
                break;
            }
            let Some(t) = reg.topic_id(name) else {
                continue;
            };
            let local = [Role::Publisher, Role::Subscriber].into_iter().any(|role| {
                reg.topic_nodes(t, role)
                    .into_iter()
                    .any(|(who, _)| !self.is_bridge(who))
            });
            if local {
                let e = reg.topic(t);
                let ty = e.map_or("", |e| e.ty());
                let subs = e.map_or(0, |e| {
                    e.subscribers()
                        .iter()
                        .filter(|&&s| self.live(s) && !self.is_bridge(s))
                        .count()
                });
                topics.push((name.to_string(), ty.to_string(), subs as u32));
            }
        }
        // Owned parameters only: held ones (a node nobody owns) are each
        // gateway's own.
        let store = self.params.store(domain);
        let params: Vec<String> = store
            .all()
            .filter(|(n, _, _)| store.owner(n).is_some())
            .map(|(n, p, _)| super::params::param_key(n, p))
            .take(MAX_REMOTE_GRAPH_ITEMS)
            .collect();
        serde_json::json!({"nodes": nodes, "topics": topics, "params": params}).to_string()
    }

    /// Other gateways' nodes' parameters of `domain`, as rosapi names them.
    pub(super) fn remote_params(&self, domain: Domain) -> impl Iterator<Item = &str> {
        self.fed
            .graphs
            .range((domain, String::new())..)
            .take_while(move |((d, _), _)| *d == domain)
            .flat_map(|(_, g)| g.params.iter().map(String::as_str))
    }

    /// The type a topic of `domain` is registered with here (as its
    /// clients named it), if it is known.
    pub(super) fn topic_type(&self, domain: Domain, topic: &str) -> Option<&str> {
        if (domain as usize) >= DOMAINS {
            return None;
        }
        let reg = &self.registries[domain as usize];
        let t = reg.topic_id(topic)?;
        reg.topic(t).map(|e| e.ty()).filter(|ty| !ty.is_empty())
    }

    /// Domains this gateway has anything in, and a number that changes
    /// whenever its registrations may have (for the shell to re-announce
    /// its graph only then).
    pub(super) fn graph_state(&self) -> (Vec<Domain>, u64) {
        let domains = (0..DOMAINS)
            // Every loop turn: two O(1) checks per domain.
            .filter(|&d| self.registries[d].has_members() || self.nodes.has_domain(d as Domain))
            .map(|d| d as Domain)
            .collect();
        (domains, self.registration_work + self.fed.left)
    }

    /// Other gateways' nodes of `domain` (for introspection).
    pub(super) fn remote_nodes(&self, domain: Domain) -> impl Iterator<Item = &str> {
        self.fed
            .graphs
            .range((domain, String::new())..)
            .take_while(move |((d, _), _)| *d == domain)
            .flat_map(|(_, g)| g.nodes.iter().map(String::as_str))
    }

    /// Other gateways' topics of `domain` with their types.
    pub(super) fn remote_topics(&self, domain: Domain) -> impl Iterator<Item = (&str, &str)> {
        self.fed
            .graphs
            .range((domain, String::new())..)
            .take_while(move |((d, _), _)| *d == domain)
            .flat_map(|(_, g)| g.topics.iter().map(|(n, t, _)| (n.as_str(), t.as_str())))
    }

    /// How many subscribers `sub` stands for in a peer count of `topic`:
    /// a bridge, the subscribers the other gateways said they have (at
    /// least one: it subscribes because one of them wants the topic).
    pub(super) fn peer_weight(&self, domain: Domain, sub: ConnRef, topic: &str) -> u32 {
        if !self.fed.enabled || !self.is_bridge(sub) {
            return 1;
        }
        let remote: u32 = self
            .fed
            .graphs
            .range((domain, String::new())..)
            .take_while(|((d, _), _)| *d == domain)
            .flat_map(|(_, g)| g.topics.iter())
            .filter(|(n, _, _)| n == topic)
            .map(|(_, _, s)| *s)
            .sum();
        remote.max(1)
    }

    /// Peer `from` now wants `topic` of `domain` (or no longer does):
    /// the domain's bridge subscribes while some peer wants it, and a
    /// ROS 2 side's interest is announced to the other ROS 2 sides
    /// ([`PeerId::forwards_to`]).
    pub(super) fn remote_interest(
        &mut self,
        from: PeerId,
        domain: Domain,
        topic: &str,
        wanted: bool,
        now: Instant,
    ) {
        if !self.fed.enabled || (domain as usize) >= DOMAINS {
            return;
        }
        let key = (domain, Rc::<str>::from(topic));
        let before = self.fed.remote.get(&key).copied().unwrap_or(0);
        let after = if wanted {
            before | from.bit()
        } else {
            before & !from.bit()
        };
        if before == after {
            return;
        }
        if PeerId::ALL.iter().any(|&p| from.forwards_to(p)) {
            self.fed.dirty.insert(key.clone());
        }
        if (before == 0) == (after == 0) {
            self.fed.remote.insert(key, after);
            return;
        }
        let Some(bridge) = self.bridge(domain, now) else {
            return;
        };
        if wanted {
            self.fed.remote.insert(key, after);
            self.register(bridge, Registering::subscriber(topic), None, None, now);
        } else {
            self.fed.remote.remove(&key);
            self.unregister(bridge, Role::Subscriber, topic, None, None, now);
        }
    }

    /// Whether another ROS 2 side's interest in `topic` of `domain` makes
    /// peer `to` want it ([`PeerId::forwards_to`]).
    fn cross_wanted(&self, domain: Domain, topic: &Rc<str>, to: PeerId) -> bool {
        let mask = self
            .fed
            .remote
            .get(&(domain, topic.clone()))
            .copied()
            .unwrap_or(0);
        PeerId::ALL
            .iter()
            .any(|&p| mask & p.bit() != 0 && p.forwards_to(to))
    }

    /// Whether a sample peer `from` sent on `topic` of `domain` is wanted
    /// by another ROS 2 side ([`PeerId::forwards_to`]).
    pub(super) fn forward_wanted(&self, from: PeerId, domain: Domain, topic: &str) -> bool {
        if !self.fed.enabled || self.fed.remote.is_empty() {
            return false;
        }
        let mask = self
            .fed
            .remote
            .get(&(domain, Rc::<str>::from(topic)))
            .copied()
            .unwrap_or(0);
        PeerId::ALL
            .iter()
            .any(|&p| mask & p.bit() != 0 && from.forwards_to(p))
    }

    /// Keeps a sample for the shell to forward ([`Forward`]); past
    /// [`MAX_FORWARD_BYTES`] it is dropped (counted).
    pub(super) fn forward(&mut self, f: Forward) {
        let cdr = f.cdr.as_ref().map_or(0, |(t, b)| t.len() + b.len());
        let bytes = f.msg.len() + f.topic.len() + cdr + 64;
        if self.fed.forward_bytes + bytes > MAX_FORWARD_BYTES {
            self.counters.inc(Counter::FederationOutDropped);
            return;
        }
        self.fed.forward_bytes += bytes;
        self.fed.forwards.push(f);
    }

    /// The samples kept for forwarding since the last call.
    pub(super) fn take_forwards(&mut self, into: &mut Vec<Forward>) {
        into.append(&mut self.fed.forwards);
        self.fed.forward_bytes = 0;
    }

    /// The deepest latched (transient local) cache of a local, non-bridge
    /// publisher of `topic`: its messages cross marked as latched.
    pub(super) fn latched_depth(&self, domain: Domain, topic: &str) -> Option<u32> {
        if (domain as usize) >= DOMAINS {
            return None;
        }
        let reg = self.registries.get(domain);
        let t = reg.topic_id(topic)?;
        let e = reg.topic(t)?;
        if e.latched() == 0 {
            return None;
        }
        e.publishers()
            .iter()
            .filter(|&&p| self.live(p) && !self.is_bridge(p))
            .filter_map(|&p| reg.member_qos(p, Role::Publisher, t))
            .filter(|q| q.latched())
            .map(|q| q.qos.depth.unwrap_or(1))
            .max()
    }

    /// Makes the domain's bridge a latched publisher of `topic` keeping
    /// `depth` messages (once); returns it.
    pub(super) fn bridge_latches(
        &mut self,
        domain: Domain,
        topic: &str,
        depth: u32,
        now: Instant,
    ) -> Option<ConnRef> {
        let bridge = self.bridge(domain, now)?;
        let reg = &self.registries[domain as usize];
        let kept = reg
            .topic_id(topic)
            .and_then(|t| reg.member_qos(bridge, Role::Publisher, t))
            .is_some_and(|q| q.latched() && q.qos.depth == Some(depth));
        if !kept {
            let qos = rosgate_wire::qos::Qos {
                durability: Some(rosgate_wire::qos::Durability::TransientLocal),
                depth: Some(depth.clamp(1, rosgate_wire::qos::MAX_QOS_DEPTH)),
                reliability: None,
            };
            let asked = Asked {
                qos,
                ..Asked::default()
            };
            let r = Registering {
                role: Role::Publisher,
                topic,
                ty: None,
                asked,
            };
            self.register(bridge, r, None, None, now);
            self.fed.latched_here.insert((domain, Rc::from(topic)));
        }
        Some(bridge)
    }

    /// Drops what the bridge keeps of `topic`'s latched messages (nobody
    /// here listens any more, or the gateways changed).
    fn bridge_unlatches(&mut self, domain: Domain, topic: &str, now: Instant) {
        if !self.fed.latched_here.remove(&(domain, Rc::from(topic))) {
            return;
        }
        if let Some(&b) = self.fed.bridges.get(&domain) {
            self.unregister(b, Role::Publisher, topic, None, None, now);
        }
    }

    /// The bridges, by domain, whose output the shell drains into the
    /// network.
    /// (A bridge that was closed is not listed: its slot may be a
    /// client's by now.)
    pub(super) fn federation_links(&self) -> impl Iterator<Item = (Domain, u32)> + '_ {
        self.fed
            .bridges
            .iter()
            .filter(|(_, &r)| self.is_bridge(r) && self.live(r))
            .map(|(&d, r)| (d, r.key))
    }

    /// The changes of local interest since the last call. Reopens a bridge
    /// the gateway closed (the memory budget) while other gateways still
    /// want topics of its domain.
    pub(super) fn take_interest_changes(&mut self, into: &mut Vec<InterestChange>, now: Instant) {
        if !self.fed.enabled {
            return;
        }
        let gone: Vec<Domain> = self
            .fed
            .bridges
            .iter()
            .filter(|(_, &r)| !self.live(r))
            .map(|(&d, _)| d)
            .collect();
        for d in gone {
            if self.fed.remote.keys().any(|(x, _)| *x == d) {
                self.bridge(d, now);
            } else {
                self.fed.bridges.remove(&d);
            }
        }
        self.reconcile_services(into, now);
        if self.fed.dirty.is_empty() {
            return;
        }
        let dirty: Vec<TopicKey> = self.fed.dirty.drain().collect();
        for (domain, topic) in dirty {
            let local = self.locally_wanted(domain, &topic);
            // What each peer was told, and is to be told now: local
            // interest goes to every peer; a ROS 2 side's only to the
            // other ROS 2 sides.
            let mut cross_now = 0u8;
            for p in PeerId::ALL {
                if self.cross_wanted(domain, &topic, p) {
                    cross_now |= p.bit();
                }
            }
            let key = (domain, topic);
            let was_local = self.fed.announced.contains(&key);
            let cross_was = self.fed.cross.get(&key).copied().unwrap_or(0);
            if local != was_local {
                if local {
                    self.fed.announced.insert(key.clone());
                } else {
                    self.fed.announced.remove(&key);
                    self.bridge_unlatches(key.0, &key.1.clone(), now);
                }
            }
            if cross_now == 0 {
                self.fed.cross.remove(&key);
            } else {
                self.fed.cross.insert(key.clone(), cross_now);
            }
            let change = |wanted, to| InterestChange {
                domain: key.0,
                kind: Offer::Topic,
                name: key.1.clone(),
                ty: Rc::from(""),
                wanted,
                to,
            };
            if cross_now == 0 && cross_was == 0 {
                if local != was_local {
                    into.push(change(local, None));
                }
                continue;
            }
            for p in PeerId::ALL {
                let was = was_local || cross_was & p.bit() != 0;
                let is = local || cross_now & p.bit() != 0;
                if was != is {
                    into.push(change(is, Some(p)));
                }
            }
        }
    }

    /// The peer `from` (another gateway, or a ROS 2 graph) provides the
    /// service or action `name` (`kind`) of `domain` with type `ty`, or
    /// (`None`) no longer does. The bridge's calls and goals for it go to
    /// the peer that provides it (ROS 2 first when both do).
    pub(super) fn remote_provider(
        &mut self,
        kind: Provided,
        domain: Domain,
        name: &str,
        ty: Option<&str>,
        from: PeerId,
    ) {
        if !self.fed.enabled || (domain as usize) >= DOMAINS {
            return;
        }
        let key = (kind, domain, Rc::<str>::from(name));
        let slot = self.fed.remote_services.entry(key.clone()).or_default();
        let before = std::mem::replace(&mut slot[from.index()], ty.map(Rc::from));
        if slot.iter().all(Option::is_none) {
            self.fed.remote_services.remove(&key);
        }
        if before.is_none() && ty.is_none() {
            return;
        }
        self.fed.graphs_changes += 1;
        // Settled by the shell's next `take_interest_changes`, this turn.
        self.fed.dirty_services.insert(key);
    }

    /// The services (or actions) of `domain` that peers provide, with
    /// their types (ROS 2's first), sorted by name.
    pub(super) fn remote_provided(&self, kind: Provided, domain: Domain) -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = self
            .fed
            .remote_services
            .iter()
            .filter(|((k, d, _), _)| *k == kind && *d == domain)
            .filter_map(|((_, _, name), slot)| {
                let ty = PeerId::ALL
                    .into_iter()
                    .find_map(|p| slot[p.index()].clone())?;
                Some((name.to_string(), ty.to_string()))
            })
            .collect();
        v.sort();
        v
    }

    /// The peer that provides `kind name` of `domain` for the bridge, and
    /// its type (ROS 2 first when both do).
    pub(super) fn serving_peer(
        &self,
        kind: Provided,
        domain: Domain,
        name: &str,
    ) -> Option<(PeerId, Rc<str>)> {
        self.serving_peer_for(kind, domain, name, None)
    }

    /// [`Hub::serving_peer`] for a call or goal the bridge makes on behalf
    /// of peer `from` (`None`: a local client's): only a peer `from`'s
    /// calls cross to ([`PeerId::forwards_to`]: one ROS 2 side to another,
    /// never back, never between gateways), so no call travels in circles.
    pub(super) fn serving_peer_for(
        &self,
        kind: Provided,
        domain: Domain,
        name: &str,
        from: Option<PeerId>,
    ) -> Option<(PeerId, Rc<str>)> {
        let slot = self
            .fed
            .remote_services
            .get(&(kind, domain, Rc::<str>::from(name)))?;
        PeerId::ALL
            .into_iter()
            .filter(|&p| from.is_none_or(|f| f.forwards_to(p)))
            .find_map(|p| slot[p.index()].clone().map(|t| (p, t)))
    }

    /// A caller in the peer `from` calls `service` of `domain`: the
    /// domain's bridge calls it here, with `id` (a JSON string the shell
    /// chose) and `args` (valid JSON, the shell checked); the answer comes
    /// back in the outbox as a [`BridgeMsg::Response`] for `from` with
    /// that id.
    pub(super) fn remote_call_from(
        &mut self,
        from: PeerId,
        domain: Domain,
        service: &str,
        id: &str,
        args: Raw<'_>,
        now: Instant,
    ) {
        if !self.fed.enabled || (domain as usize) >= DOMAINS {
            return;
        }
        let mut line = Vec::with_capacity(64 + service.len() + args.get().len());
        line.extend_from_slice(br#"{"op":"call_service","service":"#);
        rosgate_wire::encode::json_string(&mut line, service);
        line.extend_from_slice(br#","id":"#);
        rosgate_wire::encode::json_string(&mut line, id);
        line.extend_from_slice(br#","args":"#);
        line.extend_from_slice(args.get().as_bytes());
        line.push(b'}');
        self.bridge_says(from, domain, &line, now);
    }

    /// A caller in the peer `from` sends a goal to `action` of `domain`:
    /// the domain's bridge sends it here as a client asking for feedback,
    /// with `id` (a JSON string the shell chose); feedback and the result
    /// come back in the outbox for `from` under that id.
    pub(super) fn remote_goal_from(
        &mut self,
        from: PeerId,
        domain: Domain,
        goal: RemoteGoal<'_>,
        now: Instant,
    ) {
        let RemoteGoal {
            action,
            id,
            ty,
            args,
        } = goal;
        if !self.fed.enabled || (domain as usize) >= DOMAINS {
            return;
        }
        let mut line = Vec::with_capacity(96 + action.len() + ty.len() + args.get().len());
        line.extend_from_slice(br#"{"op":"send_action_goal","action":"#);
        rosgate_wire::encode::json_string(&mut line, action);
        line.extend_from_slice(br#","action_type":"#);
        rosgate_wire::encode::json_string(&mut line, ty);
        line.extend_from_slice(br#","id":"#);
        rosgate_wire::encode::json_string(&mut line, id);
        line.extend_from_slice(br#","args":"#);
        line.extend_from_slice(args.get().as_bytes());
        line.extend_from_slice(br#","feedback":true}"#);
        self.bridge_says(from, domain, &line, now);
    }

    /// The caller in the peer `from` cancels the goal the bridge sent as
    /// `id` ([`Hub::remote_goal_from`]).
    pub(super) fn remote_cancel_from(
        &mut self,
        from: PeerId,
        domain: Domain,
        action: &str,
        id: &str,
        now: Instant,
    ) {
        if !self.fed.enabled || (domain as usize) >= DOMAINS {
            return;
        }
        let mut line = Vec::with_capacity(64 + action.len());
        line.extend_from_slice(br#"{"op":"cancel_action_goal","action":"#);
        rosgate_wire::encode::json_string(&mut line, action);
        line.extend_from_slice(br#","id":"#);
        rosgate_wire::encode::json_string(&mut line, id);
        line.push(b'}');
        self.bridge_says(from, domain, &line, now);
    }

    /// `line` as a request of the domain's bridge (opened if need be) on
    /// behalf of the peer `from`: what the hub answers at once goes back
    /// to it, what it answers later to the peer its call records.
    fn bridge_says(&mut self, from: PeerId, domain: Domain, line: &[u8], now: Instant) {
        if let Some(bridge) = self.bridge(domain, now) {
            self.fed.speaking = Some(from);
            self.on_message(bridge, line, now);
            self.fed.speaking = None;
        }
    }

    /// Moves the calls, goals and answers waiting for the peers into
    /// `into`, in order (the shell, each turn).
    pub(super) fn take_bridge_msgs(&mut self, into: &mut Vec<BridgeMsg>) {
        self.fed.outbox.take(into);
    }

    /// What another gateway answers to a call or goal forwarded to the
    /// bridge of `domain` (which provides that gateway's service or action
    /// here): a whole `service_response`, `action_feedback` or
    /// `action_result` line, as a provider sends it.
    pub(super) fn remote_reply(&mut self, domain: Domain, line: &[u8], now: Instant) {
        if !self.fed.enabled || (domain as usize) >= DOMAINS {
            return;
        }
        if let Some(&b) = self.fed.bridges.get(&domain) {
            if self.live(b) {
                self.on_message(b, line, now);
            }
        }
    }

    /// See `Bridges::remote_answer`: the bridge's `service_response`, typed.
    pub(super) fn remote_answer(
        &mut self,
        domain: Domain,
        id: &str,
        values: Raw<'_>,
        result: bool,
        now: Instant,
    ) {
        if !self.fed.enabled || (domain as usize) >= DOMAINS {
            return;
        }
        let Some(&b) = self.fed.bridges.get(&domain) else {
            return;
        };
        if !self.live(b) {
            return;
        }
        // Counted as the line it stands for (the loop's turn budget).
        self.counters.inc(Counter::LinesIn);
        let result = Raw::from_valid_json(if result { "true" } else { "false" });
        self.service_response(
            b,
            Some(Raw::from_valid_json(id)),
            Some(values),
            result,
            None,
            now,
        );
    }

    /// A provider of `service` in `domain` came, went or was replaced.
    pub(super) fn service_changed(&mut self, domain: Domain, service: &str) {
        self.provided_changed(Provided::Service, domain, service);
    }

    /// A provider of the service or action `name` came, went or was
    /// replaced.
    pub(super) fn provided_changed(&mut self, kind: Provided, domain: Domain, name: &str) {
        if self.fed.enabled {
            self.fed
                .dirty_services
                .insert((kind, domain, Rc::from(name)));
        }
    }

    /// A local node of `full_name` was declared or went: its parameter
    /// services, which the hub answers itself, are offered to other
    /// gateways while one exists.
    pub(super) fn node_services_changed(&mut self, domain: Domain, full_name: &str, added: bool) {
        if !self.fed.enabled {
            return;
        }
        for (short, _) in NODE_PARAM_SERVICES {
            let name: Rc<str> = Rc::from(format!("{full_name}/{short}"));
            let key = (domain, name.clone());
            if added {
                *self.fed.builtin.entry(key.clone()).or_default() += 1;
            } else if let Some(n) = self.fed.builtin.get_mut(&key) {
                *n -= 1;
                if *n == 0 {
                    self.fed.builtin.remove(&key);
                }
            }
            self.fed
                .dirty_services
                .insert((Provided::Service, key.0, key.1));
        }
    }

    /// `who` is leaving: each service it provides may change hands.
    pub(super) fn services_leaving(&mut self, domain: Domain, who: ConnRef) {
        if !self.fed.enabled {
            return;
        }
        for kind in [Provided::Service, Provided::Action] {
            let names: Vec<String> = self.registries[domain as usize]
                .provided_of(kind, who, None)
                .into_iter()
                .map(str::to_string)
                .collect();
            for n in names {
                self.provided_changed(kind, domain, &n);
            }
        }
    }

    /// Whether a call from `caller` to `kind name` of `domain` may go to
    /// `provider`: a bridge calls a bridge only for a peer whose calls
    /// cross to the peer serving it (one ROS 2 side calling the other's
    /// service, [`Hub::serving_peer_for`]); a call from another gateway is
    /// for a provider here, not for a third gateway: no call travels in
    /// circles.
    pub(super) fn may_forward(
        &self,
        caller: ConnRef,
        provider: ConnRef,
        (kind, domain, name): (Provided, Domain, &str),
    ) -> bool {
        if !(self.fed.enabled && self.is_bridge(caller) && self.is_bridge(provider)) {
            return true;
        }
        self.fed.speaking.is_some_and(|from| {
            self.serving_peer_for(kind, domain, name, Some(from))
                .is_some()
        })
    }

    /// For each service whose provider changed: announce a local provider
    /// (or its end), and let the bridge provide another gateway's service
    /// exactly while no local client does (a local provider always wins).
    fn reconcile_services(&mut self, into: &mut Vec<InterestChange>, now: Instant) {
        if self.fed.dirty_services.is_empty() {
            return;
        }
        let dirty: Vec<ProvKey> = self.fed.dirty_services.drain().collect();
        for (kind, domain, name) in dirty {
            let current = self.registries[domain as usize]
                .provided(kind, &name)
                .filter(|s| self.live(s.provider()))
                .map(|s| (s.provider(), Rc::<str>::from(s.ty())));
            let key = (kind, domain, name.clone());
            // The type a local provider offers it with: a client's, or the
            // hub's own for a local node's parameter services.
            let local: Option<Rc<str>> = current
                .as_ref()
                .filter(|(p, _)| !self.is_bridge(*p))
                .map(|(_, t)| t.clone())
                .or_else(|| {
                    let builtin = kind == Provided::Service
                        && self.fed.builtin.contains_key(&(domain, name.clone()));
                    builtin.then(|| {
                        let short = name.rsplit_once('/').map_or("", |(_, s)| s);
                        let ty = NODE_PARAM_SERVICES
                            .iter()
                            .find(|(s, _)| *s == short)
                            .map_or("", |(_, t)| *t);
                        Rc::from(ty)
                    })
                });
            let was = self.fed.provided.contains(&key);
            if local.is_some() != was {
                if local.is_some() {
                    self.fed.provided.insert(key.clone());
                } else {
                    self.fed.provided.remove(&key);
                }
            }
            // Which peers another ROS 2 side's provider is offered to (a
            // side that lacks it), and with its type: the bridge serves
            // their calls from that side.
            let (mut cross_now, mut cross_ty) = (0u8, None::<Rc<str>>);
            if local.is_none() {
                for p in PeerId::ALL {
                    let served = self.fed.remote_services.get(&key);
                    if served.is_some_and(|slot| slot[p.index()].is_some()) {
                        continue;
                    }
                    if let Some((_, ty)) = self.serving_peer_for(kind, domain, &name, Some(p)) {
                        cross_now |= p.bit();
                        cross_ty = Some(ty);
                    }
                }
            }
            let cross_was = self.fed.cross_provided.get(&key).copied().unwrap_or(0);
            if cross_now == 0 {
                self.fed.cross_provided.remove(&key);
            } else {
                self.fed.cross_provided.insert(key.clone(), cross_now);
            }
            let change = |wanted: bool, to| InterestChange {
                domain,
                kind: kind.into(),
                name: name.clone(),
                ty: match (wanted, &local, &cross_ty) {
                    (false, _, _) => Rc::from(""),
                    (true, Some(t), _) | (true, None, Some(t)) => t.clone(),
                    (true, None, None) => Rc::from(""),
                },
                wanted,
                to,
            };
            if cross_now == 0 && cross_was == 0 {
                if local.is_some() != was {
                    into.push(change(local.is_some(), None));
                }
            } else {
                for p in PeerId::ALL {
                    let told = was || cross_was & p.bit() != 0;
                    let tell = local.is_some() || cross_now & p.bit() != 0;
                    if told != tell {
                        into.push(change(tell, Some(p)));
                    }
                }
            }
            let by_bridge = current.as_ref().is_some_and(|(p, _)| self.is_bridge(*p));
            let remote = self.serving_peer(kind, domain, &name).map(|(_, t)| t);
            match (local.is_some(), by_bridge, remote) {
                (false, false, Some(ty)) => {
                    if let Some(b) = self.bridge(domain, now) {
                        match kind {
                            Provided::Service => {
                                self.advertise_service(b, &name, None, &ty, None, now)
                            }
                            Provided::Action => {
                                self.advertise_action(b, &name, None, &ty, None, now)
                            }
                        }
                    }
                }
                (true, true, _) | (false, true, None) => {
                    if let Some(b) = self.fed.bridges.get(&domain).copied() {
                        match kind {
                            Provided::Service => {
                                self.unadvertise_service(b, &name, None, None, now)
                            }
                            Provided::Action => self.unadvertise_action(b, &name, None, None, now),
                        }
                    }
                }
                _ => {}
            }
        }
    }

    /// `topic` of `domain` may have gained its first or lost its last
    /// local subscriber (by name: it may have left the registry).
    pub(super) fn interest_changed(&mut self, domain: Domain, topic: &str) {
        if self.fed.enabled {
            self.fed.dirty.insert((domain, Rc::from(topic)));
        }
    }

    /// `who` is leaving: each topic it subscribes to may lose its interest.
    pub(super) fn interest_leaving(&mut self, domain: Domain, who: ConnRef) {
        if !self.fed.enabled {
            return;
        }
        self.fed.left += 1;
        let reg = &self.registries[domain as usize];
        let names: Vec<Rc<str>> = reg
            .subscriptions(who)
            .into_iter()
            .filter_map(|t| reg.topic(t).map(|e| Rc::from(e.name())))
            .collect();
        for n in names {
            self.fed.dirty.insert((domain, n));
        }
    }

    /// Whether `who` is a federation link (its requests are the gateway's
    /// own: access rules are for clients).
    pub(super) fn is_bridge(&self, who: ConnRef) -> bool {
        self.conns
            .get(who.key as usize)
            .is_some_and(|c| c.gen() == who.gen && c.is_bridge())
    }

    fn locally_wanted(&self, domain: Domain, topic: &str) -> bool {
        if self.tf_wants(domain, topic) {
            return true;
        }
        let reg = &self.registries[domain as usize];
        let Some(e) = reg.topic_id(topic).and_then(|t| reg.topic(t)) else {
            return false;
        };
        e.subscribers().iter().any(|s| {
            self.conns
                .get(s.key as usize)
                .is_some_and(|c| c.gen() == s.gen && c.is_open() && !c.is_bridge())
        })
    }

    /// The bridge of `domain`, opened on first use or again after the
    /// memory budget closed it (then it subscribes to every topic remote
    /// gateways want there again).
    fn bridge(&mut self, domain: Domain, now: Instant) -> Option<ConnRef> {
        if let Some(&b) = self.fed.bridges.get(&domain) {
            if self.live(b) {
                return Some(b);
            }
        }
        self.next_gen = self.next_gen.wrapping_add(1);
        let gen = self.next_gen;
        let mut conn = Conn::new(gen, now, Transport::Tcp, StatusFilter::None, None, None);
        conn.set_domain(domain);
        conn.make_bridge(self.access.open_role());
        let key = self.conns.insert(conn) as u32;
        let me = ConnRef { key, gen };
        self.fed.bridges.insert(domain, me);
        let again: Vec<Rc<str>> = self
            .fed
            .remote
            .keys()
            .filter(|(d, _)| *d == domain)
            .map(|(_, t)| t.clone())
            .collect();
        for topic in again {
            self.register(me, Registering::subscriber(&topic), None, None, now);
        }
        Some(me)
    }
}
