//! `Registry`: who subscribes to and publishes on each topic, who provides
//! each service, and the reverse index of what each connection registered.
//! It is the one owner of the rule "a connection's registrations are
//! withdrawn exactly when it leaves": [`Registry::withdraw`].
//!
//! Invariants:
//! - names match exactly (after JSON unescaping); distinct names never share
//!   an entry;
//! - a connection appears at most once in a topic's subscriber or publisher
//!   list, so it receives one copy of each message however often it
//!   subscribed; the list position is recorded in the connection's index,
//!   so every removal is O(1);
//! - with per-id registrations (rosbridge), the list entry lasts while any
//!   of the connection's ids for that topic remains;
//! - a topic entry exists only while it has a subscriber or a publisher, so
//!   the table returns to empty when everyone leaves;
//! - a service has exactly one current provider; a later registration
//!   replaces the earlier one, and only the current provider can remove it;
//! - the counts (`subscription_count`, ...) always equal the list sizes;
//! - `bytes()` is the memory the tables hold for clients, kept as entries
//!   come and go (an estimate per entry: its names and ids plus a fixed
//!   overhead), and each connection's share is in its index;
//! - a connection holds at most the per-connection number of registrations
//!   its caller passes (every per-id registration counts).

use std::collections::{HashMap, HashSet};

use slab::Slab;

use rosgate_wire::encode;

use crate::conn_ref::ConnRef;

/// Slab key of a topic entry; valid while the entry exists.
pub type TopicId = u32;

/// Bytes counted per topic entry beyond its names: the slab entry, the
/// name index, two member vectors.
const TOPIC_OVERHEAD: usize = 160;
/// Bytes counted per membership (connection x topic) and per id.
const MEMBER_OVERHEAD: usize = 64;
/// Bytes counted per service beyond its names.
const SERVICE_OVERHEAD: usize = 128;

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

/// One topic and its members.
#[derive(Debug)]
pub struct Topic {
    name: Box<str>,
    /// `{"op":"publish","topic":"<name>","msg":` for one-copy encoding.
    prefix: Box<[u8]>,
    subscribers: Vec<ConnRef>,
    publishers: Vec<ConnRef>,
}

impl Topic {
    pub fn name(&self) -> &str {
        &self.name
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

/// One service and its current provider.
#[derive(Debug)]
pub struct Service {
    provider: ConnRef,
    /// The name as a JSON string literal, for forwarded frames.
    name_json: Box<[u8]>,
    /// Informational type string from `advertise_service`.
    ty: Box<str>,
}

impl Service {
    pub fn provider(&self) -> ConnRef {
        self.provider
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
    /// Registrations by role (`Role as usize`), every per-id one counted.
    pub entries: [usize; 2],
    /// Bytes counted for them.
    pub bytes: usize,
}

/// A request id as registered: `None` for a request without one.
type IdKey = Option<Box<[u8]>>;

/// The ids behind one per-id registration; one is by far the common case.
#[derive(Debug)]
enum Ids {
    One(IdKey),
    Many(HashSet<IdKey>),
}

impl Ids {
    fn contains(&self, id: Option<&[u8]>) -> bool {
        match self {
            Ids::One(k) => k.as_deref() == id,
            Ids::Many(set) => set.contains(&id.map(Box::from)),
        }
    }

    /// Adds `id`, which is not in the set.
    fn insert(&mut self, id: Option<&[u8]>) {
        match self {
            Ids::One(k) => {
                let mut set = HashSet::with_capacity(2);
                set.insert(k.take());
                set.insert(id.map(Box::from));
                *self = Ids::Many(set);
            }
            Ids::Many(set) => {
                set.insert(id.map(Box::from));
            }
        }
    }

    /// Removes `id` if present; returns whether it was.
    fn remove(&mut self, id: Option<&[u8]>) -> bool {
        match self {
            // The last id is removed by removing the membership.
            Ids::One(k) => k.as_deref() == id,
            Ids::Many(set) => set.remove(&id.map(Box::from)),
        }
    }

    fn len(&self) -> usize {
        match self {
            Ids::One(_) => 1,
            Ids::Many(set) => set.len(),
        }
    }

    /// Bytes counted for these ids.
    fn bytes(&self) -> usize {
        match self {
            Ids::One(k) => id_bytes(k.as_deref()),
            Ids::Many(set) => set.iter().map(|k| id_bytes(k.as_deref())).sum(),
        }
    }
}

fn id_bytes(id: Option<&[u8]>) -> usize {
    MEMBER_OVERHEAD + id.map_or(0, <[u8]>::len)
}

/// One connection's membership of one topic list.
#[derive(Debug)]
struct Member {
    /// Index in the topic's subscriber or publisher list.
    pos: usize,
    /// Per-id registrations only.
    ids: Option<Ids>,
}

/// Everything one connection registered.
#[derive(Debug, Default)]
struct ConnRegs {
    subs: HashMap<TopicId, Member>,
    pubs: HashMap<TopicId, Member>,
    services: HashSet<Box<str>>,
    /// Registrations of each role, every per-id one counted.
    entries: [usize; 2],
    /// Bytes counted for this connection's memberships, ids and services.
    bytes: usize,
}

impl ConnRegs {
    fn members(&mut self, role: Role) -> &mut HashMap<TopicId, Member> {
        match role {
            Role::Subscriber => &mut self.subs,
            Role::Publisher => &mut self.pubs,
        }
    }

    fn is_empty(&self) -> bool {
        self.subs.is_empty() && self.pubs.is_empty() && self.services.is_empty()
    }
}

/// See the module docs.
#[derive(Debug, Default)]
pub struct Registry {
    by_name: HashMap<Box<str>, TopicId>,
    topics: Slab<Topic>,
    services: HashMap<Box<str>, Service>,
    /// By connection; an entry exists while the connection has registered
    /// anything (keys are unique among live connections).
    conns: HashMap<ConnRef, ConnRegs>,
    subscriptions: usize,
    publishers: usize,
    bytes: usize,
}

impl Registry {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn topic_id(&self, name: &str) -> Option<TopicId> {
        self.by_name.get(name).copied()
    }

    pub fn topic(&self, id: TopicId) -> Option<&Topic> {
        self.topics.get(id as usize)
    }

    pub fn topics(&self) -> impl Iterator<Item = &Topic> {
        self.topics.iter().map(|(_, t)| t)
    }

    pub fn topic_count(&self) -> usize {
        self.topics.len()
    }

    pub fn service_count(&self) -> usize {
        self.services.len()
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
        self.services.iter().map(|(k, v)| (&**k, v))
    }

    pub fn service(&self, name: &str) -> Option<&Service> {
        self.services.get(name)
    }

    /// Bytes the tables hold for clients (see the module docs).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    fn topic_or_insert(&mut self, name: &str) -> TopicId {
        if let Some(&id) = self.by_name.get(name) {
            return id;
        }
        let topic = Topic {
            name: name.into(),
            prefix: encode::publish_prefix(name),
            subscribers: Vec::new(),
            publishers: Vec::new(),
        };
        self.bytes += topic_bytes(&topic);
        let id = self.topics.insert(topic) as TopicId;
        self.by_name.insert(name.into(), id);
        id
    }

    fn count(&mut self, role: Role) -> &mut usize {
        match role {
            Role::Subscriber => &mut self.subscriptions,
            Role::Publisher => &mut self.publishers,
        }
    }

    /// `subscribe` or `advertise`: adds `who` to the topic's list (once).
    /// With `per_id`, also records `id` (a repeated id is a no-op). Refused
    /// when `who` already holds `max` registrations of this role.
    pub fn register(
        &mut self,
        who: ConnRef,
        role: Role,
        name: &str,
        id: Option<&[u8]>,
        per_id: bool,
        max: usize,
    ) -> Result<TopicId, TooMany> {
        let existing = self.topic_id(name);
        let regs = self.conns.get(&who);
        let member = existing.and_then(|t| regs.and_then(|r| r.member(role, t)));
        let adds_entry = match member {
            None => true,
            Some(m) => m.ids.as_ref().is_some_and(|ids| !ids.contains(id)),
        };
        if adds_entry && regs.map_or(0, |r| r.entries[role as usize]) >= max {
            return Err(TooMany { limit: max });
        }
        let t = self.topic_or_insert(name);
        let regs = self.conns.entry(who).or_default();
        let added_bytes = match regs.members(role).get_mut(&t) {
            Some(m) => match &mut m.ids {
                Some(ids) if !ids.contains(id) => {
                    ids.insert(id);
                    regs.entries[role as usize] += 1;
                    id_bytes(id)
                }
                _ => 0,
            },
            None => {
                let list = self.topics[t as usize].members(role);
                list.push(who);
                let member = Member {
                    pos: list.len() - 1,
                    ids: per_id.then(|| Ids::One(id.map(Box::from))),
                };
                let b = member.bytes();
                regs.members(role).insert(t, member);
                regs.entries[role as usize] += 1;
                *self.count(role) += 1;
                b
            }
        };
        if let Some(regs) = self.conns.get_mut(&who) {
            regs.bytes += added_bytes;
        }
        self.bytes += added_bytes;
        Ok(t)
    }

    /// `unsubscribe` or `unadvertise`; always safe to repeat. With
    /// `per_id`, an `id` removes only that registration and no id removes
    /// all of them; the list entry goes when none is left.
    pub fn unregister(
        &mut self,
        who: ConnRef,
        role: Role,
        name: &str,
        id: Option<&[u8]>,
        per_id: bool,
    ) {
        let Some(t) = self.topic_id(name) else {
            return;
        };
        let Some(regs) = self.conns.get_mut(&who) else {
            return;
        };
        let Some(m) = regs.members(role).get_mut(&t) else {
            return;
        };
        match (&mut m.ids, per_id, id) {
            // One of several ids goes; the membership stays.
            (Some(ids), true, Some(id)) if ids.len() > 1 => {
                if ids.remove(Some(id)) {
                    regs.entries[role as usize] -= 1;
                    regs.bytes -= id_bytes(Some(id));
                    self.bytes -= id_bytes(Some(id));
                }
            }
            (Some(ids), true, Some(id)) if !ids.contains(Some(id)) => {}
            _ => self.leave(who, role, t),
        }
    }

    /// Removes `who` from topic `t`'s `role` list: O(1).
    fn leave(&mut self, who: ConnRef, role: Role, t: TopicId) {
        let Some(regs) = self.conns.get_mut(&who) else {
            return;
        };
        let Some(m) = regs.members(role).remove(&t) else {
            return;
        };
        regs.entries[role as usize] -= m.ids.as_ref().map_or(1, Ids::len);
        regs.bytes -= m.bytes();
        self.bytes -= m.bytes();
        if regs.is_empty() {
            self.conns.remove(&who);
        }
        *self.count(role) -= 1;
        let Some(topic) = self.topics.get_mut(t as usize) else {
            return;
        };
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
        }
    }

    /// Makes `who` the provider of `name`; returns the displaced provider.
    /// Refused when `who` already provides `max` other services.
    pub fn advertise_service(
        &mut self,
        who: ConnRef,
        name: &str,
        ty: &str,
        max: usize,
    ) -> Result<Option<ConnRef>, TooMany> {
        let regs = self.conns.get(&who);
        let has = regs.is_some_and(|r| r.services.contains(name));
        if !has && regs.map_or(0, |r| r.services.len()) >= max {
            return Err(TooMany { limit: max });
        }
        let mut name_json = Vec::with_capacity(name.len() + 2);
        encode::json_string(&mut name_json, name);
        let new = Service {
            provider: who,
            name_json: name_json.into_boxed_slice(),
            ty: ty.into(),
        };
        let new_bytes = service_bytes(name, &new);
        let old = self.services.insert(name.into(), new);
        let old_bytes = old.as_ref().map_or(0, |o| service_bytes(name, o));
        self.bytes = self.bytes + new_bytes - old_bytes;
        let regs = self.conns.entry(who).or_default();
        if !has {
            regs.services.insert(name.into());
        }
        // The provider's share is the current entry's.
        match old {
            Some(o) if o.provider == who => {
                regs.bytes = regs.bytes + new_bytes - old_bytes;
                Ok(None)
            }
            Some(o) => {
                regs.bytes += new_bytes;
                if let Some(r) = self.conns.get_mut(&o.provider) {
                    r.services.remove(name);
                    r.bytes -= old_bytes;
                    if r.is_empty() {
                        self.conns.remove(&o.provider);
                    }
                }
                Ok(Some(o.provider))
            }
            None => {
                regs.bytes += new_bytes;
                Ok(None)
            }
        }
    }

    /// Removes `name` if `who` is its current provider.
    pub fn unadvertise_service(&mut self, who: ConnRef, name: &str) -> Unadvertised {
        match self.services.get(name) {
            None => Unadvertised::Unknown,
            Some(s) if s.provider != who => Unadvertised::NotProvider,
            Some(_) => {
                if let Some(old) = self.services.remove(name) {
                    let b = service_bytes(name, &old);
                    self.bytes -= b;
                    if let Some(r) = self.conns.get_mut(&who) {
                        r.services.remove(name);
                        r.bytes -= b;
                        if r.is_empty() {
                            self.conns.remove(&who);
                        }
                    }
                }
                Unadvertised::Removed
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
            work += regs.services.len();
            for name in regs.services {
                if let Some(old) = self.services.remove(&name) {
                    self.bytes -= service_bytes(&name, &old);
                }
            }
        }
        (true, work)
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
        if self.services.capacity() > 4 * self.services.len() + 64 {
            self.services.shrink_to_fit();
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
            services: r.services.len(),
            entries: r.entries,
            bytes: r.bytes,
        })
    }
}

fn topic_bytes(t: &Topic) -> usize {
    TOPIC_OVERHEAD + 2 * t.name.len() + t.prefix.len()
}

fn service_bytes(name: &str, s: &Service) -> usize {
    SERVICE_OVERHEAD + 2 * name.len() + s.name_json.len() + s.ty.len()
}

impl Member {
    fn bytes(&self) -> usize {
        self.ids.as_ref().map_or(MEMBER_OVERHEAD, Ids::bytes)
    }
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
    fn topics_vanish_when_empty() {
        let mut r = Registry::new();
        let t = r
            .register(A, Role::Subscriber, "/t", None, false, MAX)
            .expect("under the limit");
        let again = r.register(A, Role::Subscriber, "/t", None, false, MAX);
        assert_eq!(again, Ok(t));
        assert_eq!(r.subscription_count(), 1, "second subscribe is a no-op");
        r.register(B, Role::Publisher, "/t", None, false, MAX)
            .expect("under the limit");
        r.unregister(A, Role::Subscriber, "/t", None, false);
        r.unregister(A, Role::Subscriber, "/t", None, false);
        assert_eq!(r.topic_count(), 1);
        r.unregister(B, Role::Publisher, "/t", None, false);
        assert_eq!(r.topic_count(), 0);
        assert_eq!(r.topic_id("/t"), None);
        assert!(!r.has_any(A) && !r.has_any(B));
    }

    #[test]
    fn a_big_withdrawal_can_be_spread_over_calls() {
        let mut r = Registry::new();
        for i in 0..25 {
            r.register(A, Role::Subscriber, &format!("/s{i}"), None, false, MAX)
                .expect("under the limit");
        }
        r.register(A, Role::Publisher, "/p", None, false, MAX)
            .expect("under the limit");
        r.advertise_service(A, "/srv", "T", MAX)
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
            r.register(who, Role::Subscriber, "/t", None, false, MAX)
                .expect("under the limit");
        }
        r.unregister(A, Role::Subscriber, "/t", None, false);
        r.unregister(C, Role::Subscriber, "/t", None, false);
        let t = r.topic_id("/t").expect("topic");
        assert_eq!(r.topic(t).map(|t| t.subscribers().to_vec()), Some(vec![B]));
        r.withdraw(B);
        assert_eq!(r.topic_count(), 0);
        assert_eq!(r.subscription_count(), 0);
    }

    #[test]
    fn per_id_registrations_last_while_any_id_remains() {
        let mut r = Registry::new();
        r.register(A, Role::Subscriber, "/t", Some(b"1"), true, MAX)
            .expect("under the limit");
        r.register(A, Role::Subscriber, "/t", Some(b"2"), true, MAX)
            .expect("under the limit");
        r.register(A, Role::Subscriber, "/t", None, true, MAX)
            .expect("under the limit");
        r.unregister(A, Role::Subscriber, "/t", Some(b"1"), true);
        r.unregister(A, Role::Subscriber, "/t", Some(b"9"), true);
        r.unregister(A, Role::Subscriber, "/t", Some(b"2"), true);
        assert_eq!(r.subscription_count(), 1, "the id-less one remains");
        r.register(A, Role::Subscriber, "/t", Some(b"3"), true, MAX)
            .expect("under the limit");
        r.unregister(A, Role::Subscriber, "/t", None, true);
        assert_eq!(r.subscription_count(), 0, "no id removes them all");
    }

    #[test]
    fn services_have_one_provider() {
        let mut r = Registry::new();
        assert_eq!(
            r.advertise_service(A, "/s", "T", MAX)
                .expect("under the limit"),
            None
        );
        assert_eq!(
            r.advertise_service(A, "/s", "T", MAX)
                .expect("under the limit"),
            None
        );
        assert_eq!(
            r.advertise_service(B, "/s", "T", MAX)
                .expect("under the limit"),
            Some(A)
        );
        assert!(!r.has_any(A));
        assert_eq!(r.unadvertise_service(A, "/s"), Unadvertised::NotProvider);
        assert_eq!(r.unadvertise_service(B, "/s"), Unadvertised::Removed);
        assert_eq!(r.unadvertise_service(B, "/s"), Unadvertised::Unknown);
        r.advertise_service(C, "/x", "T", MAX)
            .expect("under the limit");
        r.withdraw(C);
        assert_eq!(r.service_count(), 0);
    }

    #[test]
    fn limits_count_every_id_and_bytes_return_to_zero() {
        let mut r = Registry::new();
        r.register(A, Role::Subscriber, "/t", Some(b"1"), true, 2)
            .expect("1");
        r.register(A, Role::Subscriber, "/t", Some(b"1"), true, 2)
            .expect("repeat is free");
        r.register(A, Role::Subscriber, "/u", Some(b"2"), true, 2)
            .expect("2");
        assert_eq!(
            r.register(A, Role::Subscriber, "/t", Some(b"3"), true, 2),
            Err(TooMany { limit: 2 })
        );
        r.register(A, Role::Publisher, "/t", None, true, 2)
            .expect("other role");
        assert_eq!(r.held_by(A).entries, [2, 1]);
        assert!(r.bytes() > 0 && r.held_by(A).bytes > 0);
        r.advertise_service(A, "/s", "T", 1).expect("first");
        assert_eq!(
            r.advertise_service(A, "/x", "T", 1),
            Err(TooMany { limit: 1 })
        );
        r.advertise_service(A, "/s", "T2", 1)
            .expect("re-advertising is free");
        r.advertise_service(B, "/s", "T", 1).expect("takes over");
        r.unregister(A, Role::Subscriber, "/t", Some(b"1"), true);
        assert_eq!(r.held_by(A).entries, [1, 1]);
        r.withdraw(A);
        r.withdraw(B);
        assert_eq!(r.bytes(), 0);
    }
}
