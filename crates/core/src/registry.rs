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
//! - the counts (`subscription_count`, ...) always equal the list sizes.

use std::collections::{HashMap, HashSet};

use slab::Slab;

use rosgate_wire::encode;

use crate::conn_ref::ConnRef;

/// Slab key of a topic entry; valid while the entry exists.
pub type TopicId = u32;

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
    pub subscriptions: usize,
    pub advertisements: usize,
    pub services: usize,
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
    fn insert(&mut self, id: Option<&[u8]>) {
        match self {
            Ids::One(k) if k.as_deref() == id => {}
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

    /// Removes `id`; true when none is left.
    fn remove(&mut self, id: Option<&[u8]>) -> bool {
        match self {
            Ids::One(k) => k.as_deref() == id,
            Ids::Many(set) => {
                set.remove(&id.map(Box::from));
                set.is_empty()
            }
        }
    }
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

    fn topic_or_insert(&mut self, name: &str) -> TopicId {
        if let Some(&id) = self.by_name.get(name) {
            return id;
        }
        let id = self.topics.insert(Topic {
            name: name.into(),
            prefix: encode::publish_prefix(name),
            subscribers: Vec::new(),
            publishers: Vec::new(),
        }) as TopicId;
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
    /// With `per_id`, also records `id` (a repeated id is a no-op).
    pub fn register(
        &mut self,
        who: ConnRef,
        role: Role,
        name: &str,
        id: Option<&[u8]>,
        per_id: bool,
    ) -> TopicId {
        let t = self.topic_or_insert(name);
        let regs = self.conns.entry(who).or_default();
        match regs.members(role).get_mut(&t) {
            Some(m) => {
                if let Some(ids) = &mut m.ids {
                    ids.insert(id);
                }
            }
            None => {
                let list = self.topics[t as usize].members(role);
                list.push(who);
                let member = Member {
                    pos: list.len() - 1,
                    ids: per_id.then(|| Ids::One(id.map(Box::from))),
                };
                regs.members(role).insert(t, member);
                *self.count(role) += 1;
            }
        }
        t
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
        let withdraw = match (&mut m.ids, per_id, id) {
            (Some(ids), true, Some(id)) => ids.remove(Some(id)),
            _ => true,
        };
        if withdraw {
            self.leave(who, role, t);
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
            self.by_name.remove(&topic.name);
        }
    }

    /// Makes `who` the provider of `name`; returns the displaced provider.
    pub fn advertise_service(&mut self, who: ConnRef, name: &str, ty: &str) -> Option<ConnRef> {
        let mut name_json = Vec::with_capacity(name.len() + 2);
        encode::json_string(&mut name_json, name);
        let new = Service {
            provider: who,
            name_json: name_json.into_boxed_slice(),
            ty: ty.into(),
        };
        let regs = self.conns.entry(who).or_default();
        if !regs.services.contains(name) {
            regs.services.insert(name.into());
        }
        let old = self.services.insert(name.into(), new)?.provider;
        if old == who {
            return None;
        }
        if let Some(r) = self.conns.get_mut(&old) {
            r.services.remove(name);
            if r.is_empty() {
                self.conns.remove(&old);
            }
        }
        Some(old)
    }

    /// Removes `name` if `who` is its current provider.
    pub fn unadvertise_service(&mut self, who: ConnRef, name: &str) -> Unadvertised {
        match self.services.get(name) {
            None => Unadvertised::Unknown,
            Some(s) if s.provider != who => Unadvertised::NotProvider,
            Some(_) => {
                self.services.remove(name);
                if let Some(r) = self.conns.get_mut(&who) {
                    r.services.remove(name);
                    if r.is_empty() {
                        self.conns.remove(&who);
                    }
                }
                Unadvertised::Removed
            }
        }
    }

    /// Withdraws everything `who` registered: O(its registrations).
    pub fn withdraw(&mut self, who: ConnRef) {
        let Some(regs) = self.conns.get(&who) else {
            return;
        };
        let subs: Vec<TopicId> = regs.subs.keys().copied().collect();
        let pubs: Vec<TopicId> = regs.pubs.keys().copied().collect();
        for t in subs {
            self.leave(who, Role::Subscriber, t);
        }
        for t in pubs {
            self.leave(who, Role::Publisher, t);
        }
        if let Some(regs) = self.conns.remove(&who) {
            for name in regs.services {
                self.services.remove(&name);
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
            services: r.services.len(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: ConnRef = ConnRef { key: 0, gen: 1 };
    const B: ConnRef = ConnRef { key: 1, gen: 2 };
    const C: ConnRef = ConnRef { key: 2, gen: 3 };

    #[test]
    fn topics_vanish_when_empty() {
        let mut r = Registry::new();
        let t = r.register(A, Role::Subscriber, "/t", None, false);
        assert_eq!(r.register(A, Role::Subscriber, "/t", None, false), t);
        assert_eq!(r.subscription_count(), 1, "second subscribe is a no-op");
        r.register(B, Role::Publisher, "/t", None, false);
        r.unregister(A, Role::Subscriber, "/t", None, false);
        r.unregister(A, Role::Subscriber, "/t", None, false);
        assert_eq!(r.topic_count(), 1);
        r.unregister(B, Role::Publisher, "/t", None, false);
        assert_eq!(r.topic_count(), 0);
        assert_eq!(r.topic_id("/t"), None);
        assert!(!r.has_any(A) && !r.has_any(B));
    }

    #[test]
    fn removal_keeps_positions_consistent() {
        let mut r = Registry::new();
        for who in [A, B, C] {
            r.register(who, Role::Subscriber, "/t", None, false);
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
        r.register(A, Role::Subscriber, "/t", Some(b"1"), true);
        r.register(A, Role::Subscriber, "/t", Some(b"2"), true);
        r.register(A, Role::Subscriber, "/t", None, true);
        r.unregister(A, Role::Subscriber, "/t", Some(b"1"), true);
        r.unregister(A, Role::Subscriber, "/t", Some(b"9"), true);
        r.unregister(A, Role::Subscriber, "/t", Some(b"2"), true);
        assert_eq!(r.subscription_count(), 1, "the id-less one remains");
        r.register(A, Role::Subscriber, "/t", Some(b"3"), true);
        r.unregister(A, Role::Subscriber, "/t", None, true);
        assert_eq!(r.subscription_count(), 0, "no id removes them all");
    }

    #[test]
    fn services_have_one_provider() {
        let mut r = Registry::new();
        assert_eq!(r.advertise_service(A, "/s", "T"), None);
        assert_eq!(r.advertise_service(A, "/s", "T"), None);
        assert_eq!(r.advertise_service(B, "/s", "T"), Some(A));
        assert!(!r.has_any(A));
        assert_eq!(r.unadvertise_service(A, "/s"), Unadvertised::NotProvider);
        assert_eq!(r.unadvertise_service(B, "/s"), Unadvertised::Removed);
        assert_eq!(r.unadvertise_service(B, "/s"), Unadvertised::Unknown);
        r.advertise_service(C, "/x", "T");
        r.withdraw(C);
        assert_eq!(r.service_count(), 0);
    }
}
