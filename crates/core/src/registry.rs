//! `Registry`: who subscribes to and publishes on each topic, who provides
//! each service, and the reverse index of what each connection registered,
//! for one domain (the hub keeps one per domain, so domains never meet).
//! It is the one owner of the rule "a connection's registrations are
//! withdrawn exactly when it leaves": [`Registry::withdraw`].
//!
//! Every registration is made for a node ([`NodeTag`]): one of the
//! connection's declared nodes, or the connection itself. Delivery is per
//! connection (one copy of a message however many of its nodes or ids
//! subscribed); attribution is per node, for introspection.
//!
//! Invariants:
//! - names match exactly (after JSON unescaping); distinct names never share
//!   an entry;
//! - a connection appears at most once in a topic's subscriber or publisher
//!   list, so it receives one copy of each message however often it
//!   subscribed; the list position is recorded in the connection's index,
//!   so every removal is O(1);
//! - a membership is a set of registration keys (node, id); with per-id
//!   registrations (rosbridge) each id is a key, otherwise each node has
//!   one; the list entry lasts while any key remains;
//! - a topic entry exists only while it has a subscriber or a publisher, so
//!   the table returns to empty when everyone leaves;
//! - a service has exactly one current provider; a later registration
//!   replaces the earlier one, and only the current provider can remove it;
//! - the counts (`subscription_count`, ...) always equal the list sizes;
//! - `bytes()` is the memory the tables hold for clients, kept as entries
//!   come and go (an estimate per entry: its names and ids plus a fixed
//!   overhead), and each connection's share is in its index;
//! - a connection holds at most the per-connection number of registrations
//!   its caller passes (every key counts);
//! - topic and service names are also kept sorted, hidden ones apart
//!   (`names::is_hidden`), so a listing of the first N names costs O(N),
//!   whatever the table size.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::ops::Bound;
use std::rc::Rc;
use std::time::{Duration, Instant};

use slab::Slab;

use rosgate_wire::encode;
use rosgate_wire::names::is_hidden;
use rosgate_wire::qos::{Durability, Qos};

use crate::conn_ref::ConnRef;
use crate::encoding::Encoding;
pub use crate::nodes::NodeTag;
use crate::tiny_map::TinyMap;

/// Slab key of a topic entry; valid while the entry exists.
pub type TopicId = u32;

/// Longest topic type kept for introspection; a longer one is not kept
/// (the topic's type reads as unknown). ROS type names are ~30 bytes.
pub const MAX_TOPIC_TYPE_BYTES: usize = 256;

/// Bytes counted per topic entry beyond its names: the slab entry, the
/// name index and sorted index, two member vectors, and room for its type
/// (up to [`MAX_TOPIC_TYPE_BYTES`]).
const TOPIC_OVERHEAD: usize = 224 + MAX_TOPIC_TYPE_BYTES;
/// Bytes counted per membership (connection x topic) and per id.
const MEMBER_OVERHEAD: usize = 64;
/// Bytes counted per service beyond its names (entry and sorted index).
const SERVICE_OVERHEAD: usize = 192;

/// A registration refused by a per-connection limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooMany {
    /// The limit that was reached.
    pub limit: usize,
}

/// Subscriptions or advertisements: the two are handled alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Subscriber,
    Publisher,
}

/// What a provider registration provides: a service or an action. Each
/// kind has its own names (a service and an action may share a name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Provided {
    Service = 0,
    Action = 1,
}

impl Provided {
    /// `service` or `action`, for messages.
    pub fn label(self) -> &'static str {
        match self {
            Provided::Service => "service",
            Provided::Action => "action",
        }
    }
}

/// One topic and its members.
#[derive(Debug)]
pub struct Topic {
    name: Rc<str>,
    /// The type named by the first publisher, else the first subscriber
    /// ("" when none named one); informational.
    ty: Box<str>,
    ty_from_publisher: bool,
    /// `{"op":"publish","topic":"<name>","msg":` for one-copy encoding.
    prefix: Box<[u8]>,
    subscribers: Vec<ConnRef>,
    publishers: Vec<ConnRef>,
    /// Memberships with QoS state ([`MemberQos`]); 0 keeps publishing on
    /// the fast path.
    qos_members: u32,
    /// Publishers that want peer notifications.
    peer_watchers: u32,
    /// Publishers keeping messages for late subscribers.
    latched: u32,
    /// Messages and payload bytes published on it since it appeared (for
    /// rates in `/rosgate/topic_stats` and the dashboard).
    published: u64,
    published_bytes: u64,
    /// Which appearance of this name it is in its registry.
    epoch: u64,
}

/// The QoS state of one membership that stated something (see
/// `hub/qos.rs`): what it offers or requests, and what it keeps.
#[derive(Debug, Default)]
pub struct MemberQos {
    pub qos: Qos,
    /// Subscriber: at most one message per interval (rosbridge's
    /// `throttle_rate`).
    pub throttle: Option<Throttle>,
    /// Publisher: wants `peers` notifications; the count it was last told.
    pub peers: Option<Option<u32>>,
    /// Publisher, transient local: its last `depth` messages, with their
    /// publish sequence numbers (for ordering across publishers).
    pub cache: VecDeque<(u64, Rc<[u8]>)>,
    /// Bytes of `cache`.
    pub cache_bytes: usize,
    /// Subscriber: what its messages are sent as (`compression`,
    /// `fragment_size`; see `encoding.rs`).
    pub encoding: Encoding,
}

impl MemberQos {
    /// Whether this membership keeps messages for late subscribers.
    pub fn latched(&self) -> bool {
        self.qos.durability == Some(Durability::TransientLocal)
    }

    /// Bytes this membership holds for its client (latched cache and a
    /// throttled message waiting), counted in the registry's bytes.
    fn held_bytes(&self) -> usize {
        self.cache_bytes
            + self
                .throttle
                .as_ref()
                .and_then(|th| th.pending.as_ref())
                .map_or(0, |f| f.len())
    }
}

/// A throttled subscription's state.
#[derive(Debug, Clone)]
pub struct Throttle {
    pub interval: Duration,
    /// When it was last sent a message.
    pub last: Option<Instant>,
    /// The newest message of the current interval, not yet sent: the
    /// throttle's own copy (never shared with a queue, whose release
    /// accounting counts on holding the last reference), counted in the
    /// registry's bytes; set and taken through [`Registry::throttle_hold`]
    /// and [`Registry::throttle_take`].
    pub pending: Option<Rc<[u8]>>,
    /// A flush is scheduled for the end of the interval.
    pub scheduled: bool,
}

impl Topic {
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The topic's type ("" when nobody named one).
    pub fn ty(&self) -> &str {
        &self.ty
    }

    /// Whether some membership stated QoS (the publish slow path).
    pub fn has_qos(&self) -> bool {
        self.qos_members > 0
    }

    /// Publishers that want peer notifications.
    pub fn peer_watchers(&self) -> u32 {
        self.peer_watchers
    }

    /// Publishers keeping messages for late subscribers.
    pub fn latched(&self) -> u32 {
        self.latched
    }

    /// Messages and payload bytes published on it since it appeared.
    pub fn published(&self) -> (u64, u64) {
        (self.published, self.published_bytes)
    }

    /// Which appearance of its name this is: a topic that disappears and
    /// comes back has a greater epoch (its counters restarted).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The start of every publish frame of this topic.
    pub fn prefix(&self) -> &[u8] {
        &self.prefix
    }

    pub fn subscribers(&self) -> &[ConnRef] {
        &self.subscribers
    }

    pub fn publishers(&self) -> &[ConnRef] {
        &self.publishers
    }

    fn members(&mut self, role: Role) -> &mut Vec<ConnRef> {
        match role {
            Role::Subscriber => &mut self.subscribers,
            Role::Publisher => &mut self.publishers,
        }
    }
}

/// One service (or action) and its current provider.
#[derive(Debug)]
pub struct Service {
    provider: ConnRef,
    node: NodeTag,
    /// The name as a JSON string literal, for forwarded frames.
    name_json: Box<[u8]>,
    /// Informational type string from `advertise_service`.
    ty: Box<str>,
}

impl Service {
    pub fn provider(&self) -> ConnRef {
        self.provider
    }

    /// The provider's node.
    pub fn node(&self) -> NodeTag {
        self.node
    }

    pub fn name_json(&self) -> &[u8] {
        &self.name_json
    }

    pub fn ty(&self) -> &str {
        &self.ty
    }
}

/// Outcome of [`Registry::unadvertise_service`].
#[derive(Debug, PartialEq, Eq)]
pub enum Unadvertised {
    Removed,
    NotProvider,
    Unknown,
}

/// Registrations one connection holds (topics count once however many ids).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Held {
    /// Topics subscribed to.
    pub subscriptions: usize,
    /// Topics advertised.
    pub advertisements: usize,
    pub services: usize,
    /// Actions provided.
    pub actions: usize,
    /// Registrations by role (`Role as usize`), every per-id one counted.
    pub entries: [usize; 2],
    /// Bytes counted for them.
    pub bytes: usize,
}

/// One registration: the node it was made for and, with per-id
/// registrations, the request id (`None` for a request without one, and
/// always `None` otherwise).
type RegKey = (NodeTag, Option<Box<[u8]>>);

/// The registrations behind one membership; one is by far the common case.
#[derive(Debug)]
enum Keys {
    One(RegKey),
    /// Boxed: the rare case should not size every membership (the box
    /// halves `Keys`, and so every `Member`).
    #[allow(clippy::box_collection)]
    Many(Box<HashSet<RegKey>>),
}

impl Keys {
    fn contains(&self, key: &RegKey) -> bool {
        match self {
            Keys::One(k) => k == key,
            Keys::Many(set) => set.contains(key),
        }
    }

    /// Adds `key`, which is not in the set.
    fn insert(&mut self, key: RegKey) {
        match self {
            Keys::One(k) => {
                let mut set = HashSet::with_capacity(2);
                set.insert((k.0, k.1.take()));
                set.insert(key);
                *self = Keys::Many(Box::new(set));
            }
            Keys::Many(set) => {
                set.insert(key);
            }
        }
    }

    /// Removes the keys `gone` selects; returns (keys removed, their
    /// bytes, whether none is left).
    fn remove_where(&mut self, gone: impl Fn(&RegKey) -> bool) -> (usize, usize, bool) {
        match self {
            Keys::One(k) if gone(k) => (1, key_bytes(k), true),
            Keys::One(_) => (0, 0, false),
            Keys::Many(set) => {
                let (mut n, mut b) = (0, 0);
                set.retain(|k| {
                    let g = gone(k);
                    if g {
                        n += 1;
                        b += key_bytes(k);
                    }
                    !g
                });
                (n, b, set.is_empty())
            }
        }
    }

    fn len(&self) -> usize {
        match self {
            Keys::One(_) => 1,
            Keys::Many(set) => set.len(),
        }
    }

    /// Bytes counted for these keys.
    fn bytes(&self) -> usize {
        match self {
            Keys::One(k) => key_bytes(k),
            Keys::Many(set) => set.iter().map(key_bytes).sum(),
        }
    }

    /// Whether some key is `node`'s.
    fn has_node(&self, node: NodeTag) -> bool {
        match self {
            Keys::One(k) => k.0 == node,
            Keys::Many(set) => set.iter().any(|k| k.0 == node),
        }
    }

    /// The distinct nodes of these keys, appended to `into`.
    fn nodes(&self, into: &mut Vec<NodeTag>) {
        let start = into.len();
        match self {
            Keys::One(k) => into.push(k.0),
            Keys::Many(set) => {
                for k in set.iter() {
                    if !into[start..].contains(&k.0) {
                        into.push(k.0);
                    }
                }
            }
        }
    }
}

fn key_bytes(k: &RegKey) -> usize {
    MEMBER_OVERHEAD + k.1.as_ref().map_or(0, |id| id.len())
}

/// One connection's membership of one topic list.
#[derive(Debug)]
struct Member {
    /// Index in the topic's subscriber or publisher list.
    pos: usize,
    keys: Keys,
    /// QoS state, when the registration stated any.
    qos: Option<Box<MemberQos>>,
}

/// The services and actions one connection provides, by [`Provided`]:
/// nothing allocated until it provides one.
#[derive(Debug, Default)]
struct Provides(Option<Box<[HashSet<Rc<str>>; 2]>>);

impl Provides {
    fn of(&self, k: usize) -> Option<&HashSet<Rc<str>>> {
        self.0.as_ref().map(|p| &p[k])
    }

    fn contains(&self, k: usize, name: &str) -> bool {
        self.of(k).is_some_and(|s| s.contains(name))
    }

    fn len(&self, k: usize) -> usize {
        self.of(k).map_or(0, HashSet::len)
    }

    fn insert(&mut self, k: usize, name: Rc<str>) -> bool {
        self.0.get_or_insert_with(Box::default)[k].insert(name)
    }

    fn remove(&mut self, k: usize, name: &str) -> bool {
        let Some(p) = self.0.as_mut() else {
            return false;
        };
        let removed = p[k].remove(name);
        if p.iter().all(HashSet::is_empty) {
            self.0 = None;
        }
        removed
    }

    fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    fn iter(&self, k: usize) -> impl Iterator<Item = &Rc<str>> + '_ {
        self.of(k).into_iter().flatten()
    }

    fn into_sets(self) -> [HashSet<Rc<str>>; 2] {
        self.0.map_or_else(Default::default, |p| *p)
    }
}

/// Everything one connection registered. Sized for the common connection
/// (one subscription or advertisement, no service): its first membership
/// in each role is inline ([`TinyMap`]) and the services it provides are
/// allocated only when it provides one (`docs/performance.md`, memory per
/// connection).
#[derive(Debug, Default)]
struct ConnRegs {
    subs: TinyMap<Member>,
    pubs: TinyMap<Member>,
    /// Services and actions provided, by [`Provided`].
    provides: Provides,
    /// Registrations of each role, every key counted.
    entries: [usize; 2],
    /// Bytes counted for this connection's memberships, ids and services.
    bytes: usize,
}

impl ConnRegs {
    fn members(&mut self, role: Role) -> &mut TinyMap<Member> {
        match role {
            Role::Subscriber => &mut self.subs,
            Role::Publisher => &mut self.pubs,
        }
    }

    fn is_empty(&self) -> bool {
        self.subs.is_empty() && self.pubs.is_empty() && self.provides.is_empty()
    }
}

/// What [`Registry::register`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Registered {
    pub topic: TopicId,
    /// A new registration key (not a repeat).
    pub new_key: bool,
    /// The connection joined the topic's list (it was not a member).
    pub new_member: bool,
    /// The node had no registration on this topic in this role before.
    pub new_node: bool,
}

/// What [`Registry::unregister`] removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Unregistered {
    /// Registration keys removed.
    pub keys: usize,
    /// The connection left the topic's list.
    pub left: bool,
    /// The topic entry went (no member was left).
    pub topic_gone: bool,
    /// The node has no registration left on this topic in this role.
    pub node_left: bool,
}

/// Sorted names, visible and hidden apart, each with the id of its entry
/// (a topic's [`TopicId`]; 0 for services and actions, found by name):
/// see the module docs.
#[derive(Debug, Default)]
struct SortedNames {
    visible: BTreeMap<Rc<str>, TopicId>,
    hidden: BTreeMap<Rc<str>, TopicId>,
}

impl SortedNames {
    fn set(&mut self, name: &str) -> &mut BTreeMap<Rc<str>, TopicId> {
        if is_hidden(name) {
            &mut self.hidden
        } else {
            &mut self.visible
        }
    }

    fn insert(&mut self, name: Rc<str>, id: TopicId) {
        self.set(&name.clone()).insert(name, id);
    }

    fn remove(&mut self, name: &str) {
        self.set(name).remove(name);
    }

    /// Names in order, hidden ones too when asked.
    fn iter(&self, include_hidden: bool) -> impl Iterator<Item = &str> {
        self.entries(include_hidden).map(|(n, _)| n)
    }

    /// Names with their ids in order, hidden ones too when asked.
    fn entries(&self, include_hidden: bool) -> impl Iterator<Item = (&str, TopicId)> {
        let hidden = include_hidden.then_some(&self.hidden);
        Merged {
            a: self.visible.iter().peekable(),
            b: hidden.into_iter().flatten().peekable(),
        }
    }

    /// Names with their ids after `after` (exclusive) in order, hidden
    /// ones too when asked: O(log n) to start, O(1) per name (a page's
    /// cursor).
    fn entries_after(
        &self,
        include_hidden: bool,
        after: &str,
    ) -> impl Iterator<Item = (&str, TopicId)> {
        let from = (Bound::Excluded(after), Bound::Unbounded);
        let hidden = include_hidden.then(|| self.hidden.range::<str, _>(from));
        Merged {
            a: self.visible.range::<str, _>(from).peekable(),
            b: hidden.into_iter().flatten().peekable(),
        }
    }
}

/// Two sorted iterators merged in order.
struct Merged<A: Iterator, B: Iterator> {
    a: std::iter::Peekable<A>,
    b: std::iter::Peekable<B>,
}

impl<'a, A, B> Iterator for Merged<A, B>
where
    A: Iterator<Item = (&'a Rc<str>, &'a TopicId)>,
    B: Iterator<Item = (&'a Rc<str>, &'a TopicId)>,
{
    type Item = (&'a str, TopicId);
    fn next(&mut self) -> Option<(&'a str, TopicId)> {
        let take_a = match (self.a.peek(), self.b.peek()) {
            (Some(x), Some(y)) => x.0 <= y.0,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => return None,
        };
        let next = if take_a { self.a.next() } else { self.b.next() };
        next.map(|(n, id)| (&**n, *id))
    }
}

/// The services (or actions) of a registry: by name, and sorted.
#[derive(Debug, Default)]
struct ProviderTable {
    by_name: HashMap<Rc<str>, Service>,
    names: SortedNames,
}

/// See the module docs.
#[derive(Debug, Default)]
pub struct Registry {
    by_name: HashMap<Rc<str>, TopicId>,
    topics: Slab<Topic>,
    /// Services and actions by name, by [`Provided`].
    providers: [ProviderTable; 2],
    topic_names: SortedNames,
    /// By connection; an entry exists while the connection has registered
    /// anything (keys are unique among live connections).
    /// Boxed: a map of 200-byte values would cost that per empty bucket.
    conns: HashMap<ConnRef, Box<ConnRegs>>,
    subscriptions: usize,
    publishers: usize,
    /// Publishers that want peer counts, over every topic: while 0, a
    /// leaving subscriber owes nobody a count and its topics are not
    /// looked at.
    peer_watchers: usize,
    bytes: usize,
    /// Topics created so far: each topic's `epoch` (a topic that goes and
    /// comes back gets a new one, so a reader of its counters sees it).
    topics_created: u64,
    /// Bytes of latched caches (also in `bytes`).
    cache_bytes: usize,
    /// Changes of topics' membership or type, and of services' and
    /// actions' providers, so far: a reader that kept
    /// the count (a Foxglove session's channels, `hub/foxglove.rs`) knows
    /// whether to look again.
    changes: u64,
    /// The topic [`Registries::publish_on`] found last: a hint, checked
    /// against the entry's own name before use (see there).
    last_published: Option<TopicId>,
}

impl Registry {
    pub fn new() -> Self {
        Self::default()
    }

    /// See the `changes` field: moves whenever a topic gains or loses a
    /// member, appears, goes or gets its type, and whenever a service or
    /// action gets or loses its provider.
    pub fn changes(&self) -> u64 {
        self.changes
    }

    pub fn topic_id(&self, name: &str) -> Option<TopicId> {
        self.by_name.get(name).copied()
    }

    pub fn topic(&self, id: TopicId) -> Option<&Topic> {
        self.topics.get(id as usize)
    }

    /// The topic named `name`.
    pub fn topic_named(&self, name: &str) -> Option<&Topic> {
        self.topic_id(name).and_then(|t| self.topic(t))
    }

    pub fn topics(&self) -> impl Iterator<Item = &Topic> {
        self.topics.iter().map(|(_, t)| t)
    }

    /// Topic names in order (hidden ones only when asked): O(1) per name.
    pub fn topic_names(&self, include_hidden: bool) -> impl Iterator<Item = &str> {
        self.topic_names.iter(include_hidden)
    }

    /// Topics in name order with their entries (hidden ones only when
    /// asked): O(1) per topic, no lookup by name.
    pub fn topics_sorted(&self, include_hidden: bool) -> impl Iterator<Item = (&str, &Topic)> {
        self.topic_names
            .entries(include_hidden)
            .filter_map(|(n, id)| Some((n, self.topics.get(id as usize)?)))
    }

    /// Topics after the name `after` (exclusive) in name order with their
    /// entries: where a page that ended at `after` goes on.
    pub fn topics_sorted_after(
        &self,
        include_hidden: bool,
        after: &str,
    ) -> impl Iterator<Item = (&str, &Topic)> {
        self.topic_names
            .entries_after(include_hidden, after)
            .filter_map(|(n, id)| Some((n, self.topics.get(id as usize)?)))
    }

    /// Service names in order (hidden ones only when asked).
    pub fn service_names(&self, include_hidden: bool) -> impl Iterator<Item = &str> {
        self.provided_names(Provided::Service, include_hidden)
    }

    /// Names of `kind` in order (hidden ones only when asked).
    pub fn provided_names(
        &self,
        kind: Provided,
        include_hidden: bool,
    ) -> impl Iterator<Item = &str> {
        self.providers[kind as usize].names.iter(include_hidden)
    }

    pub fn topic_count(&self) -> usize {
        self.topics.len()
    }

    pub fn service_count(&self) -> usize {
        self.providers[Provided::Service as usize].by_name.len()
    }

    pub fn action_count(&self) -> usize {
        self.providers[Provided::Action as usize].by_name.len()
    }

    /// Subscriptions, one per connection and topic.
    pub fn subscription_count(&self) -> usize {
        self.subscriptions
    }

    /// Advertisements, one per connection and topic.
    pub fn publisher_count(&self) -> usize {
        self.publishers
    }

    pub fn services(&self) -> impl Iterator<Item = (&str, &Service)> {
        self.providers[Provided::Service as usize]
            .by_name
            .iter()
            .map(|(k, v)| (&**k, v))
    }

    pub fn service(&self, name: &str) -> Option<&Service> {
        self.provided(Provided::Service, name)
    }

    /// The service or action `name` of `kind`.
    pub fn provided(&self, kind: Provided, name: &str) -> Option<&Service> {
        self.providers[kind as usize].by_name.get(name)
    }

    /// Bytes the tables hold for clients (see the module docs).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Bytes of latched caches.
    pub fn cache_bytes(&self) -> usize {
        self.cache_bytes
    }

    /// Sets (or, with `None`, clears) the QoS state of `who`'s membership
    /// of topic `t` as `role`; a previous state (and its cache) goes.
    pub fn set_member_qos(&mut self, who: ConnRef, role: Role, t: TopicId, qos: Option<MemberQos>) {
        let Some(regs) = self.conns.get_mut(&who) else {
            return;
        };
        let members = match role {
            Role::Subscriber => &mut regs.subs,
            Role::Publisher => &mut regs.pubs,
        };
        let Some(m) = members.get_mut(&t) else {
            return;
        };
        let Some(topic) = self.topics.get_mut(t as usize) else {
            return;
        };
        if let Some(old) = m.qos.take() {
            topic.qos_members -= 1;
            topic.peer_watchers -= u32::from(old.peers.is_some());
            self.peer_watchers -= usize::from(old.peers.is_some());
            topic.latched -= u32::from(old.latched());
            regs.bytes -= old.held_bytes();
            self.bytes -= old.held_bytes();
            self.cache_bytes -= old.cache_bytes;
        }
        if let Some(q) = qos {
            topic.qos_members += 1;
            topic.peer_watchers += u32::from(q.peers.is_some());
            self.peer_watchers += usize::from(q.peers.is_some());
            topic.latched += u32::from(q.latched());
            m.qos = Some(Box::new(q));
        }
    }

    /// Whether `who` is a member of topic `t` as `role`.
    pub fn is_member(&self, who: ConnRef, role: Role, t: TopicId) -> bool {
        self.conns
            .get(&who)
            .is_some_and(|r| r.member(role, t).is_some())
    }

    /// The QoS state of `who`'s membership of topic `t` as `role`.
    pub fn member_qos(&self, who: ConnRef, role: Role, t: TopicId) -> Option<&MemberQos> {
        self.conns.get(&who)?.member(role, t)?.qos.as_deref()
    }

    /// The QoS state, to change its throttle or peers note (not its cache:
    /// see [`Registry::cache_push`]).
    pub fn member_qos_mut(
        &mut self,
        who: ConnRef,
        role: Role,
        t: TopicId,
    ) -> Option<&mut MemberQos> {
        self.conns
            .get_mut(&who)?
            .members(role)
            .get_mut(&t)?
            .qos
            .as_deref_mut()
    }

    /// Keeps `frame` (publish sequence `seq`) in `who`'s latched cache of
    /// topic `t`: its last `depth` messages, at most `max_bytes` in all
    /// (oldest first out; a message bigger than that is not kept). Returns
    /// the messages evicted or not kept.
    pub fn cache_push(
        &mut self,
        who: ConnRef,
        t: TopicId,
        seq: u64,
        frame: Rc<[u8]>,
        depth: usize,
        max_bytes: usize,
    ) -> u64 {
        let Some(regs) = self.conns.get_mut(&who) else {
            return 0;
        };
        let Some(q) = regs.pubs.get_mut(&t).and_then(|m| m.qos.as_deref_mut()) else {
            return 0;
        };
        if frame.len() > max_bytes {
            return 1;
        }
        let mut evicted = 0;
        let before = q.cache_bytes;
        q.cache_bytes += frame.len();
        q.cache.push_back((seq, frame));
        while q.cache.len() > depth.max(1) || q.cache_bytes > max_bytes {
            match q.cache.pop_front() {
                Some((_, f)) => {
                    q.cache_bytes -= f.len();
                    evicted += 1;
                }
                None => break,
            }
        }
        let after = q.cache_bytes;
        regs.bytes = regs.bytes + after - before;
        self.bytes = self.bytes + after - before;
        self.cache_bytes = self.cache_bytes + after - before;
        evicted
    }

    /// Holds `frame` as the newest message of `who`'s throttled
    /// subscription to `t`, counted in this registry's bytes until taken;
    /// returns whether it replaced an older one (skipped).
    pub fn throttle_hold(&mut self, who: ConnRef, t: TopicId, frame: Rc<[u8]>) -> bool {
        let Some(regs) = self.conns.get_mut(&who) else {
            return false;
        };
        let Some(th) = regs
            .subs
            .get_mut(&t)
            .and_then(|m| m.qos.as_deref_mut())
            .and_then(|q| q.throttle.as_mut())
        else {
            return false;
        };
        let add = frame.len();
        let old = th.pending.replace(frame).map(|f| f.len());
        let sub = old.unwrap_or(0);
        regs.bytes = regs.bytes + add - sub;
        self.bytes = self.bytes + add - sub;
        old.is_some()
    }

    /// Takes the message `who`'s throttled subscription to `t` holds.
    pub fn throttle_take(&mut self, who: ConnRef, t: TopicId) -> Option<Rc<[u8]>> {
        let regs = self.conns.get_mut(&who)?;
        let th = regs
            .subs
            .get_mut(&t)?
            .qos
            .as_deref_mut()?
            .throttle
            .as_mut()?;
        let f = th.pending.take()?;
        regs.bytes -= f.len();
        self.bytes -= f.len();
        Some(f)
    }

    /// Connections holding any registration here.
    pub fn members(&self) -> impl Iterator<Item = ConnRef> + '_ {
        self.conns.keys().copied()
    }

    /// Whether any connection registered anything here, in O(1).
    pub fn has_members(&self) -> bool {
        !self.conns.is_empty()
    }

    fn topic_or_insert(&mut self, name: &str) -> TopicId {
        if let Some(&id) = self.by_name.get(name) {
            return id;
        }
        let name: Rc<str> = Rc::from(name);
        let topic = Topic {
            prefix: encode::publish_prefix(&name),
            name: Rc::clone(&name),
            ty: Box::from(""),
            ty_from_publisher: false,
            subscribers: Vec::new(),
            publishers: Vec::new(),
            qos_members: 0,
            peer_watchers: 0,
            latched: 0,
            published: 0,
            published_bytes: 0,
            epoch: self.topics_created,
        };
        self.topics_created += 1;
        self.bytes += topic_bytes(&topic);
        let id = self.topics.insert(topic) as TopicId;
        self.topic_names.insert(Rc::clone(&name), id);
        self.by_name.insert(name, id);
        id
    }

    fn count(&mut self, role: Role) -> &mut usize {
        match role {
            Role::Subscriber => &mut self.subscriptions,
            Role::Publisher => &mut self.publishers,
        }
    }

    /// `subscribe` or `advertise` by `who` for `node`: adds `who` to the
    /// topic's list (once) and records the registration key (a repeated key
    /// is a no-op). With `per_id`, the key includes `id`. Refused when `who`
    /// already holds `max` registrations of this role. `ty` (if any) names
    /// the topic's type when it has none yet, or had only a subscriber's.
    #[allow(clippy::too_many_arguments)]
    pub fn register(
        &mut self,
        who: ConnRef,
        role: Role,
        name: &str,
        node: NodeTag,
        id: Option<&[u8]>,
        per_id: bool,
        max: usize,
        ty: Option<&str>,
    ) -> Result<Registered, TooMany> {
        let key: RegKey = (node, if per_id { id.map(Box::from) } else { None });
        let existing = self.topic_id(name);
        let regs = self.conns.get(&who);
        let member = existing.and_then(|t| regs.and_then(|r| r.member(role, t)));
        let new_key = member.is_none_or(|m| !m.keys.contains(&key));
        let new_node = member.is_none_or(|m| !m.keys.has_node(node));
        if new_key && regs.map_or(0, |r| r.entries[role as usize]) >= max {
            return Err(TooMany { limit: max });
        }
        let t = self.topic_or_insert(name);
        let ty = ty.filter(|t| !t.is_empty() && t.len() <= MAX_TOPIC_TYPE_BYTES);
        if let (Some(ty), Some(topic)) = (ty, self.topics.get_mut(t as usize)) {
            let publisher = role == Role::Publisher;
            if topic.ty.is_empty() || (publisher && !topic.ty_from_publisher) {
                self.changes += u64::from(*topic.ty != *ty);
                topic.ty = ty.into();
                topic.ty_from_publisher = publisher;
            }
        }
        if !new_key {
            return Ok(Registered {
                topic: t,
                new_key: false,
                new_member: false,
                new_node: false,
            });
        }
        let regs = self.conns.entry(who).or_default();
        let b = key_bytes(&key);
        let new_member = match regs.members(role).get_mut(&t) {
            Some(m) => {
                m.keys.insert(key);
                false
            }
            None => {
                let list = self.topics[t as usize].members(role);
                list.push(who);
                let member = Member {
                    pos: list.len() - 1,
                    keys: Keys::One(key),
                    qos: None,
                };
                regs.members(role).insert(t, member);
                self.changes += 1;
                *match role {
                    Role::Subscriber => &mut self.subscriptions,
                    Role::Publisher => &mut self.publishers,
                } += 1;
                true
            }
        };
        regs.entries[role as usize] += 1;
        regs.bytes += b;
        self.bytes += b;
        Ok(Registered {
            topic: t,
            new_key: true,
            new_member,
            new_node,
        })
    }

    /// `unsubscribe` or `unadvertise` by `who` for `node`; always safe to
    /// repeat. With `per_id` and an `id`, only that registration goes;
    /// otherwise every registration of `node` on the topic. The list entry
    /// goes when no key is left.
    pub fn unregister(
        &mut self,
        who: ConnRef,
        role: Role,
        name: &str,
        node: NodeTag,
        id: Option<&[u8]>,
        per_id: bool,
    ) -> Unregistered {
        let Some(t) = self.topic_id(name) else {
            return Unregistered::default();
        };
        self.remove_keys(who, role, t, node, |k| {
            k.0 == node && (!per_id || id.is_none() || k.1.as_deref() == id)
        })
    }

    /// Removes the keys `gone` selects (keys of `node`) from `who`'s
    /// membership of topic `t`.
    fn remove_keys(
        &mut self,
        who: ConnRef,
        role: Role,
        t: TopicId,
        node: NodeTag,
        gone: impl Fn(&RegKey) -> bool,
    ) -> Unregistered {
        let Some(regs) = self.conns.get_mut(&who) else {
            return Unregistered::default();
        };
        let Some(m) = regs.members(role).get_mut(&t) else {
            return Unregistered::default();
        };
        let (n, b, empty) = m.keys.remove_where(gone);
        if n == 0 {
            return Unregistered::default();
        }
        let node_left = empty || !m.keys.has_node(node);
        regs.entries[role as usize] -= n;
        regs.bytes -= b;
        self.bytes -= b;
        let topic_gone = empty && self.unlink(who, role, t);
        Unregistered {
            keys: n,
            left: empty,
            topic_gone,
            node_left,
        }
    }

    /// Removes `who` from topic `t`'s `role` list with all its keys: O(1)
    /// plus its keys. Returns whether the topic entry went.
    fn leave(&mut self, who: ConnRef, role: Role, t: TopicId) -> bool {
        let Some(regs) = self.conns.get_mut(&who) else {
            return false;
        };
        let Some(m) = regs.members(role).get(&t) else {
            return false;
        };
        let (n, b) = (m.keys.len(), m.keys.bytes());
        regs.entries[role as usize] -= n;
        regs.bytes -= b;
        self.bytes -= b;
        self.unlink(who, role, t)
    }

    /// Removes `who`'s membership of topic `t` (its keys already
    /// accounted for) from the list, in O(1); the topic entry goes when it
    /// has no member left, which the result says.
    fn unlink(&mut self, who: ConnRef, role: Role, t: TopicId) -> bool {
        let Some(regs) = self.conns.get_mut(&who) else {
            return false;
        };
        let Some(m) = regs.members(role).remove(&t) else {
            return false;
        };
        if let Some(q) = &m.qos {
            regs.bytes -= q.held_bytes();
            self.bytes -= q.held_bytes();
            self.cache_bytes -= q.cache_bytes;
        }
        if regs.is_empty() {
            self.conns.remove(&who);
        }
        self.changes += 1;
        *self.count(role) -= 1;
        let Some(topic) = self.topics.get_mut(t as usize) else {
            return false;
        };
        if let Some(q) = &m.qos {
            topic.qos_members -= 1;
            topic.peer_watchers -= u32::from(q.peers.is_some());
            self.peer_watchers -= usize::from(q.peers.is_some());
            topic.latched -= u32::from(q.latched());
        }
        let list = topic.members(role);
        list.swap_remove(m.pos);
        if let Some(&moved) = list.get(m.pos) {
            if let Some(mm) = self
                .conns
                .get_mut(&moved)
                .and_then(|r| r.members(role).get_mut(&t))
            {
                mm.pos = m.pos;
            }
        }
        if topic.subscribers.is_empty() && topic.publishers.is_empty() {
            let topic = self.topics.remove(t as usize);
            self.bytes -= topic_bytes(&topic);
            self.by_name.remove(&topic.name);
            self.topic_names.remove(&topic.name);
            return true;
        }
        false
    }

    /// Makes `who` (for `node`) the provider of service `name`; see
    /// [`Registry::provide`].
    pub fn advertise_service(
        &mut self,
        who: ConnRef,
        node: NodeTag,
        name: &str,
        ty: &str,
        max: usize,
    ) -> Result<Option<(ConnRef, NodeTag)>, TooMany> {
        self.provide(Provided::Service, who, node, name, ty, max)
    }

    /// Removes service `name` if `who` is its current provider.
    pub fn unadvertise_service(&mut self, who: ConnRef, name: &str) -> Unadvertised {
        self.withdraw_provided(Provided::Service, who, name)
    }

    /// Makes `who` (for `node`) the provider of `name` of `kind`; returns
    /// the displaced provider and its node. Refused when `who` already
    /// provides `max` others of that kind.
    pub fn provide(
        &mut self,
        kind: Provided,
        who: ConnRef,
        node: NodeTag,
        name: &str,
        ty: &str,
        max: usize,
    ) -> Result<Option<(ConnRef, NodeTag)>, TooMany> {
        let k = kind as usize;
        let regs = self.conns.get(&who);
        let has = regs.is_some_and(|r| r.provides.contains(k, name));
        if !has && regs.map_or(0, |r| r.provides.len(k)) >= max {
            return Err(TooMany { limit: max });
        }
        let mut name_json = Vec::with_capacity(name.len() + 2);
        encode::json_string(&mut name_json, name);
        let new = Service {
            provider: who,
            node,
            name_json: name_json.into_boxed_slice(),
            ty: ty.into(),
        };
        let new_bytes = service_bytes(name, &new);
        let table = &mut self.providers[k];
        let key: Rc<str> = match table.by_name.get_key_value(name) {
            Some((key, _)) => Rc::clone(key),
            None => {
                let key: Rc<str> = Rc::from(name);
                table.names.insert(Rc::clone(&key), 0);
                key
            }
        };
        let old = table.by_name.insert(Rc::clone(&key), new);
        self.changes += 1;
        let old_bytes = old.as_ref().map_or(0, |o| service_bytes(name, o));
        self.bytes = self.bytes + new_bytes - old_bytes;
        let regs = self.conns.entry(who).or_default();
        if !has {
            regs.provides.insert(k, key);
        }
        // The provider's share is the current entry's.
        match old {
            Some(o) if o.provider == who => {
                regs.bytes = regs.bytes + new_bytes - old_bytes;
                Ok((o.node != node).then_some((who, o.node)))
            }
            Some(o) => {
                regs.bytes += new_bytes;
                if let Some(r) = self.conns.get_mut(&o.provider) {
                    r.provides.remove(k, name);
                    r.bytes -= old_bytes;
                    if r.is_empty() {
                        self.conns.remove(&o.provider);
                    }
                }
                Ok(Some((o.provider, o.node)))
            }
            None => {
                regs.bytes += new_bytes;
                Ok(None)
            }
        }
    }

    /// Removes `name` of `kind` if `who` is its current provider.
    pub fn withdraw_provided(&mut self, kind: Provided, who: ConnRef, name: &str) -> Unadvertised {
        match self.provided(kind, name) {
            None => Unadvertised::Unknown,
            Some(s) if s.provider != who => Unadvertised::NotProvider,
            Some(_) => {
                self.remove_provided(kind, who, name);
                Unadvertised::Removed
            }
        }
    }

    /// Removes `name` of `kind` (provided by `who`) from every index.
    fn remove_provided(&mut self, kind: Provided, who: ConnRef, name: &str) {
        let k = kind as usize;
        if let Some(old) = self.providers[k].by_name.remove(name) {
            self.changes += 1;
            let b = service_bytes(name, &old);
            self.bytes -= b;
            self.providers[k].names.remove(name);
            if let Some(r) = self.conns.get_mut(&who) {
                r.provides.remove(k, name);
                r.bytes -= b;
                if r.is_empty() {
                    self.conns.remove(&who);
                }
            }
        }
    }

    /// Withdraws everything `who` registered: O(its registrations).
    pub fn withdraw(&mut self, who: ConnRef) {
        self.withdraw_some(who, usize::MAX);
    }

    /// Withdraws up to `budget` of `who`'s topic registrations and, once
    /// none is left, its services. Returns whether everything is gone and
    /// the registrations withdrawn, so a crowd leaving at once can be
    /// withdrawn over several loop turns.
    pub fn withdraw_some(&mut self, who: ConnRef, budget: usize) -> (bool, usize) {
        let Some(regs) = self.conns.get(&who) else {
            return (true, 0);
        };
        let subs: Vec<TopicId> = regs.subs.keys().take(budget).copied().collect();
        let left = budget - subs.len();
        let pubs: Vec<TopicId> = regs.pubs.keys().take(left).copied().collect();
        let mut work = subs.len() + pubs.len();
        for t in subs {
            self.leave(who, Role::Subscriber, t);
        }
        for t in pubs {
            self.leave(who, Role::Publisher, t);
        }
        match self.conns.get(&who) {
            None => return (true, work),
            Some(regs) if !regs.subs.is_empty() || !regs.pubs.is_empty() => return (false, work),
            Some(_) => {}
        }
        if let Some(regs) = self.conns.remove(&who) {
            for (k, names) in regs.provides.into_sets().into_iter().enumerate() {
                work += names.len();
                for name in names {
                    if let Some(old) = self.providers[k].by_name.remove(&name) {
                        self.changes += 1;
                        self.bytes -= service_bytes(&name, &old);
                        self.providers[k].names.remove(&name);
                    }
                }
            }
        }
        (true, work)
    }

    /// Withdraws every registration `who` made for `node` (a node being
    /// destroyed): O(`who`'s registrations).
    pub fn withdraw_node(&mut self, who: ConnRef, node: NodeTag) {
        let Some(regs) = self.conns.get(&who) else {
            return;
        };
        let pick = |m: &TinyMap<Member>| -> Vec<TopicId> {
            m.iter()
                .filter(|(_, m)| m.keys.has_node(node))
                .map(|(&t, _)| t)
                .collect()
        };
        let (subs, pubs) = (pick(&regs.subs), pick(&regs.pubs));
        let mut provided: Vec<(Provided, Rc<str>)> = Vec::new();
        for kind in [Provided::Service, Provided::Action] {
            let table = &self.providers[kind as usize].by_name;
            provided.extend(
                regs.provides
                    .iter(kind as usize)
                    .filter(|n| table.get(&***n).is_some_and(|s| s.node == node))
                    .map(|n| (kind, Rc::clone(n))),
            );
        }
        for (role, list) in [(Role::Subscriber, subs), (Role::Publisher, pubs)] {
            for t in list {
                self.remove_keys(who, role, t, node, |k| k.0 == node);
            }
        }
        for (kind, name) in provided {
            self.remove_provided(kind, who, &name);
        }
    }

    /// The (connection, node) pairs registered on topic `t` as `role`.
    pub fn topic_nodes(&self, t: TopicId, role: Role) -> Vec<(ConnRef, NodeTag)> {
        let Some(topic) = self.topics.get(t as usize) else {
            return Vec::new();
        };
        let list = match role {
            Role::Subscriber => &topic.subscribers,
            Role::Publisher => &topic.publishers,
        };
        let mut out = Vec::new();
        let mut nodes = Vec::new();
        for &who in list {
            nodes.clear();
            if let Some(m) = self.conns.get(&who).and_then(|r| r.member(role, t)) {
                m.keys.nodes(&mut nodes);
            }
            out.extend(nodes.iter().map(|&n| (who, n)));
        }
        out
    }

    /// The topics `who` registered as `role` for `node` (every node when
    /// `None`), unsorted.
    pub fn topics_of(&self, who: ConnRef, node: Option<NodeTag>, role: Role) -> Vec<&str> {
        let Some(regs) = self.conns.get(&who) else {
            return Vec::new();
        };
        let members = match role {
            Role::Subscriber => &regs.subs,
            Role::Publisher => &regs.pubs,
        };
        members
            .iter()
            .filter(|(_, m)| node.is_none_or(|n| m.keys.has_node(n)))
            .filter_map(|(&t, _)| self.topics.get(t as usize).map(|t| &*t.name))
            .collect()
    }

    /// The nodes of `who` registered on topic `t` as `role`.
    pub fn nodes_on(&self, who: ConnRef, t: TopicId, role: Role) -> Vec<NodeTag> {
        let mut out = Vec::new();
        if let Some(m) = self.conns.get(&who).and_then(|r| r.member(role, t)) {
            m.keys.nodes(&mut out);
        }
        out
    }

    /// The services `who` provides for `node` (every node when `None`).
    pub fn services_of(&self, who: ConnRef, node: Option<NodeTag>) -> Vec<&str> {
        self.provided_of(Provided::Service, who, node)
    }

    /// The names of `kind` `who` provides for `node` (every node when
    /// `None`).
    pub fn provided_of(&self, kind: Provided, who: ConnRef, node: Option<NodeTag>) -> Vec<&str> {
        let Some(regs) = self.conns.get(&who) else {
            return Vec::new();
        };
        let table = &self.providers[kind as usize].by_name;
        regs.provides
            .iter(kind as usize)
            .filter(|n| {
                table
                    .get(&***n)
                    .is_some_and(|s| node.is_none_or(|x| s.node == x))
            })
            .map(|n| &**n)
            .collect()
    }

    /// The topics `who` subscribes to whose publishers want peer counts:
    /// nothing looked at while no publisher anywhere wants them, else one
    /// pass over `who`'s subscriptions (at most its subscription limit).
    pub fn watched_subscriptions(&self, who: ConnRef) -> Vec<TopicId> {
        if self.peer_watchers == 0 {
            return Vec::new();
        }
        self.conns.get(&who).map_or_else(Vec::new, |r| {
            r.subs
                .keys()
                .copied()
                .filter(|&t| {
                    self.topics
                        .get(t as usize)
                        .is_some_and(|e| e.peer_watchers > 0)
                })
                .collect()
        })
    }

    /// Every topic `who` subscribes to (at most its subscription limit):
    /// what a federated gateway looks at when a subscriber leaves.
    pub fn subscriptions(&self, who: ConnRef) -> Vec<TopicId> {
        self.conns
            .get(&who)
            .map_or_else(Vec::new, |r| r.subs.keys().copied().collect())
    }

    /// Gives back capacity of tables that emptied out.
    pub fn shrink(&mut self) {
        if self.conns.capacity() > 4 * self.conns.len() + 64 {
            self.conns.shrink_to_fit();
        }
        if self.by_name.capacity() > 4 * self.by_name.len() + 64 {
            self.by_name.shrink_to_fit();
        }
        if self.topics.capacity() > 4 * self.topics.len() + 64 {
            self.topics.shrink_to_fit();
        }
        for t in self.providers.iter_mut() {
            if t.by_name.capacity() > 4 * t.by_name.len() + 64 {
                t.by_name.shrink_to_fit();
            }
        }
    }

    /// Whether `who` holds any registration (tests and checks).
    pub fn has_any(&self, who: ConnRef) -> bool {
        self.conns.contains_key(&who)
    }

    /// How many registrations of each kind `who` holds.
    pub fn held_by(&self, who: ConnRef) -> Held {
        self.conns.get(&who).map_or(Held::default(), |r| Held {
            subscriptions: r.subs.len(),
            advertisements: r.pubs.len(),
            services: r.provides.len(Provided::Service as usize),
            actions: r.provides.len(Provided::Action as usize),
            entries: r.entries,
            bytes: r.bytes,
        })
    }
}

/// One [`Registry`] per domain (so domains never meet), and the bytes they
/// hold together, kept exact by routing every change through
/// [`Registries::update`].
#[derive(Debug)]
pub struct Registries {
    regs: Box<[Registry]>,
    bytes: usize,
}

impl Registries {
    /// An empty registry for each of `domains` domains.
    pub fn new(domains: usize) -> Self {
        Registries {
            regs: (0..domains).map(|_| Registry::new()).collect(),
            bytes: 0,
        }
    }

    /// The registry of `domain` (domain 0 when out of range).
    pub fn get(&self, domain: u8) -> &Registry {
        self.regs.get(domain as usize).unwrap_or(&self.regs[0])
    }

    /// Changes the registry of `domain` through `f`, keeping the total.
    pub fn update<R>(&mut self, domain: u8, f: impl FnOnce(&mut Registry) -> R) -> R {
        let i = if (domain as usize) < self.regs.len() {
            domain as usize
        } else {
            0
        };
        let reg = &mut self.regs[i];
        let before = reg.bytes();
        let r = f(reg);
        self.bytes = self.bytes + reg.bytes() - before;
        r
    }

    /// Bytes all registries hold for clients.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Topic `name` of `domain` with one message of `bytes` counted as
    /// published on it (no size change: the total is left alone); `None`
    /// when nobody registered it. One look-up for the publish path.
    #[inline]
    pub fn publish_on(
        &mut self,
        domain: u8,
        name: &str,
        bytes: usize,
    ) -> Option<(TopicId, &Topic)> {
        let reg = self.regs.get_mut(domain as usize)?;
        // Publishers stream to one topic: the last one found is tried
        // first, by comparing its entry's name with `name` (a slot freed
        // and reused by another topic holds that topic's name, so a stale
        // hint is only a miss). This spares the keyed SipHash of the name,
        // some 150 instructions of a publish (scripts/callgrind.sh); the
        // map and its hasher stay as they are for every miss, so a client
        // choosing names gains nothing against the table.
        let hit = reg
            .last_published
            .filter(|&t| reg.topics.get(t as usize).is_some_and(|e| *e.name == *name));
        let t = match hit {
            Some(t) => t,
            None => {
                let t = *reg.by_name.get(name)?;
                reg.last_published = Some(t);
                t
            }
        };
        let e = reg.topics.get_mut(t as usize)?;
        e.published += 1;
        e.published_bytes += bytes as u64;
        Some((t, e))
    }

    /// Every domain's registry, in domain order.
    pub fn iter(&self) -> impl Iterator<Item = &Registry> {
        self.regs.iter()
    }

    /// Gives back capacity of tables that emptied out.
    pub fn shrink(&mut self) {
        for r in self.regs.iter_mut() {
            r.shrink();
        }
    }
}

impl std::ops::Index<usize> for Registries {
    type Output = Registry;
    fn index(&self, domain: usize) -> &Registry {
        self.regs.get(domain).unwrap_or(&self.regs[0])
    }
}

fn topic_bytes(t: &Topic) -> usize {
    TOPIC_OVERHEAD + 2 * t.name.len() + t.prefix.len()
}

fn service_bytes(name: &str, s: &Service) -> usize {
    SERVICE_OVERHEAD + 2 * name.len() + s.name_json.len() + s.ty.len()
}

impl ConnRegs {
    fn member(&self, role: Role, t: TopicId) -> Option<&Member> {
        match role {
            Role::Subscriber => self.subs.get(&t),
            Role::Publisher => self.pubs.get(&t),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: ConnRef = ConnRef { key: 0, gen: 1 };
    const B: ConnRef = ConnRef { key: 1, gen: 2 };
    const C: ConnRef = ConnRef { key: 2, gen: 3 };
    const MAX: usize = 100;

    #[test]
    fn only_topics_with_peer_watchers_are_looked_at_when_a_subscriber_leaves() {
        let mut r = Registry::new();
        let reg = |r: &mut Registry, who, role, name: &str| {
            r.register(who, role, name, NodeTag::CONN, None, false, MAX, None)
                .expect("under the limit")
                .topic
        };
        let t1 = reg(&mut r, A, Role::Subscriber, "/a");
        reg(&mut r, A, Role::Subscriber, "/b");
        assert!(r.watched_subscriptions(A).is_empty(), "nobody watches");
        let p = reg(&mut r, B, Role::Publisher, "/a");
        assert_eq!(p, t1);
        let watching = MemberQos {
            peers: Some(None),
            ..MemberQos::default()
        };
        r.set_member_qos(B, Role::Publisher, t1, Some(watching));
        assert_eq!(r.watched_subscriptions(A), vec![t1]);
        // The watcher leaving takes the count back to 0.
        r.unregister(B, Role::Publisher, "/a", NodeTag::CONN, None, false);
        assert!(r.watched_subscriptions(A).is_empty());
        assert_eq!(r.peer_watchers, 0);
    }

    #[test]
    fn publish_on_never_trusts_a_stale_last_topic() {
        let mut rs = Registries::new(1);
        let reg = |rs: &mut Registries, who, name: &str| {
            rs.update(0, |r| {
                r.register(
                    who,
                    Role::Subscriber,
                    name,
                    NodeTag::CONN,
                    None,
                    false,
                    MAX,
                    None,
                )
                .expect("under the limit")
                .topic
            })
        };
        let unreg = |rs: &mut Registries, who, name: &str| {
            rs.update(0, |r| {
                r.unregister(who, Role::Subscriber, name, NodeTag::CONN, None, false)
            })
        };
        let a = reg(&mut rs, A, "/a");
        assert_eq!(rs.publish_on(0, "/a", 1).map(|(t, _)| t), Some(a));
        assert_eq!(rs.publish_on(0, "/a", 1).map(|(t, _)| t), Some(a));
        // Another topic, the hint moves; back again.
        let b = reg(&mut rs, B, "/b");
        assert_eq!(rs.publish_on(0, "/b", 1).map(|(t, _)| t), Some(b));
        assert_eq!(rs.publish_on(0, "/a", 1).map(|(t, _)| t), Some(a));
        // The hinted topic goes: not found, though its slot is the hint.
        unreg(&mut rs, A, "/a");
        assert!(rs.publish_on(0, "/a", 1).is_none());
        // Its slot is reused by another name: that name is not "/a".
        let c = reg(&mut rs, C, "/c");
        assert_eq!(c, a, "the slab reuses the slot");
        assert!(rs.publish_on(0, "/a", 1).is_none());
        assert_eq!(
            rs.publish_on(0, "/c", 1).map(|(t, e)| (t, e.published)),
            Some((c, 1))
        );
        assert_eq!(
            rs.publish_on(0, "/b", 1).map(|(t, e)| (t, e.published)),
            Some((b, 2))
        );
    }

    #[test]
    fn topics_vanish_when_empty() {
        let mut r = Registry::new();
        let t = r
            .register(
                A,
                Role::Subscriber,
                "/t",
                NodeTag::CONN,
                None,
                false,
                MAX,
                None,
            )
            .expect("under the limit");
        let again = r
            .register(
                A,
                Role::Subscriber,
                "/t",
                NodeTag::CONN,
                None,
                false,
                MAX,
                None,
            )
            .expect("a repeat");
        assert_eq!(again.topic, t.topic);
        assert!(!again.new_key && !again.new_member && t.new_member && t.new_node);
        assert_eq!(r.subscription_count(), 1, "second subscribe is a no-op");
        r.register(
            B,
            Role::Publisher,
            "/t",
            NodeTag::CONN,
            None,
            false,
            MAX,
            None,
        )
        .expect("under the limit");
        r.unregister(A, Role::Subscriber, "/t", NodeTag::CONN, None, false);
        r.unregister(A, Role::Subscriber, "/t", NodeTag::CONN, None, false);
        assert_eq!(r.topic_count(), 1);
        r.unregister(B, Role::Publisher, "/t", NodeTag::CONN, None, false);
        assert_eq!(r.topic_count(), 0);
        assert_eq!(r.topic_id("/t"), None);
        assert!(!r.has_any(A) && !r.has_any(B));
    }

    #[test]
    fn a_big_withdrawal_can_be_spread_over_calls() {
        let mut r = Registry::new();
        for i in 0..25 {
            r.register(
                A,
                Role::Subscriber,
                &format!("/s{i}"),
                NodeTag::CONN,
                None,
                false,
                MAX,
                None,
            )
            .expect("under the limit");
        }
        r.register(
            A,
            Role::Publisher,
            "/p",
            NodeTag::CONN,
            None,
            false,
            MAX,
            None,
        )
        .expect("under the limit");
        r.advertise_service(A, NodeTag::CONN, "/srv", "T", MAX)
            .expect("under the limit");
        assert_eq!(r.withdraw_some(A, 10), (false, 10));
        assert_eq!(r.subscription_count(), 15);
        assert!(r.service("/srv").is_some(), "services go last");
        assert_eq!(r.withdraw_some(A, 10), (false, 10));
        assert_eq!(
            r.withdraw_some(A, 10),
            (true, 7),
            "5 subscriptions, 1 advertisement, 1 service"
        );
        assert_eq!((r.topic_count(), r.service_count(), r.bytes()), (0, 0, 0));
        assert_eq!(r.withdraw_some(A, 10), (true, 0));
    }

    #[test]
    fn removal_keeps_positions_consistent() {
        let mut r = Registry::new();
        for who in [A, B, C] {
            r.register(
                who,
                Role::Subscriber,
                "/t",
                NodeTag::CONN,
                None,
                false,
                MAX,
                None,
            )
            .expect("under the limit");
        }
        r.unregister(A, Role::Subscriber, "/t", NodeTag::CONN, None, false);
        r.unregister(C, Role::Subscriber, "/t", NodeTag::CONN, None, false);
        let t = r.topic_id("/t").expect("topic");
        assert_eq!(r.topic(t).map(|t| t.subscribers().to_vec()), Some(vec![B]));
        r.withdraw(B);
        assert_eq!(r.topic_count(), 0);
        assert_eq!(r.subscription_count(), 0);
    }

    #[test]
    fn per_id_registrations_last_while_any_id_remains() {
        let mut r = Registry::new();
        r.register(
            A,
            Role::Subscriber,
            "/t",
            NodeTag::CONN,
            Some(b"1"),
            true,
            MAX,
            None,
        )
        .expect("under the limit");
        r.register(
            A,
            Role::Subscriber,
            "/t",
            NodeTag::CONN,
            Some(b"2"),
            true,
            MAX,
            None,
        )
        .expect("under the limit");
        r.register(
            A,
            Role::Subscriber,
            "/t",
            NodeTag::CONN,
            None,
            true,
            MAX,
            None,
        )
        .expect("under the limit");
        r.unregister(A, Role::Subscriber, "/t", NodeTag::CONN, Some(b"1"), true);
        r.unregister(A, Role::Subscriber, "/t", NodeTag::CONN, Some(b"9"), true);
        r.unregister(A, Role::Subscriber, "/t", NodeTag::CONN, Some(b"2"), true);
        assert_eq!(r.subscription_count(), 1, "the id-less one remains");
        r.register(
            A,
            Role::Subscriber,
            "/t",
            NodeTag::CONN,
            Some(b"3"),
            true,
            MAX,
            None,
        )
        .expect("under the limit");
        r.unregister(A, Role::Subscriber, "/t", NodeTag::CONN, None, true);
        assert_eq!(r.subscription_count(), 0, "no id removes them all");
    }

    #[test]
    fn services_have_one_provider() {
        let mut r = Registry::new();
        assert_eq!(
            r.advertise_service(A, NodeTag::CONN, "/s", "T", MAX)
                .expect("under the limit"),
            None
        );
        assert_eq!(
            r.advertise_service(A, NodeTag::CONN, "/s", "T", MAX)
                .expect("under the limit"),
            None
        );
        assert_eq!(
            r.advertise_service(B, NodeTag::CONN, "/s", "T", MAX)
                .expect("under the limit"),
            Some((A, NodeTag::CONN))
        );
        assert!(!r.has_any(A));
        assert_eq!(r.unadvertise_service(A, "/s"), Unadvertised::NotProvider);
        assert_eq!(r.unadvertise_service(B, "/s"), Unadvertised::Removed);
        assert_eq!(r.unadvertise_service(B, "/s"), Unadvertised::Unknown);
        r.advertise_service(C, NodeTag::CONN, "/x", "T", MAX)
            .expect("under the limit");
        r.withdraw(C);
        assert_eq!(r.service_count(), 0);
    }

    #[test]
    fn limits_count_every_id_and_bytes_return_to_zero() {
        let mut r = Registry::new();
        r.register(
            A,
            Role::Subscriber,
            "/t",
            NodeTag::CONN,
            Some(b"1"),
            true,
            2,
            None,
        )
        .expect("1");
        r.register(
            A,
            Role::Subscriber,
            "/t",
            NodeTag::CONN,
            Some(b"1"),
            true,
            2,
            None,
        )
        .expect("repeat is free");
        r.register(
            A,
            Role::Subscriber,
            "/u",
            NodeTag::CONN,
            Some(b"2"),
            true,
            2,
            None,
        )
        .expect("2");
        assert_eq!(
            r.register(
                A,
                Role::Subscriber,
                "/t",
                NodeTag::CONN,
                Some(b"3"),
                true,
                2,
                None
            ),
            Err(TooMany { limit: 2 })
        );
        r.register(A, Role::Publisher, "/t", NodeTag::CONN, None, true, 2, None)
            .expect("other role");
        assert_eq!(r.held_by(A).entries, [2, 1]);
        assert!(r.bytes() > 0 && r.held_by(A).bytes > 0);
        r.advertise_service(A, NodeTag::CONN, "/s", "T", 1)
            .expect("first");
        assert_eq!(
            r.advertise_service(A, NodeTag::CONN, "/x", "T", 1),
            Err(TooMany { limit: 1 })
        );
        r.advertise_service(A, NodeTag::CONN, "/s", "T2", 1)
            .expect("re-advertising is free");
        r.advertise_service(B, NodeTag::CONN, "/s", "T", 1)
            .expect("takes over");
        r.unregister(A, Role::Subscriber, "/t", NodeTag::CONN, Some(b"1"), true);
        assert_eq!(r.held_by(A).entries, [1, 1]);
        r.withdraw(A);
        r.withdraw(B);
        assert_eq!(r.bytes(), 0);
    }
}
