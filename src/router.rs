//! `Router`: who subscribes to and publishes on each topic, and who provides
//! each service.
//!
//! Invariants:
//! - names match exactly (after JSON unescaping); distinct names never share
//!   an entry;
//! - a connection appears at most once in a topic's subscriber or publisher
//!   list, so it receives one copy of each message however often it
//!   subscribed;
//! - a topic entry exists only while it has a subscriber or a publisher, so
//!   the table returns to empty when everyone leaves;
//! - a service has exactly one current provider; a later registration
//!   replaces the earlier one, and only the current provider can remove it.

use std::collections::HashMap;

use slab::Slab;

use crate::codec::encode;
use crate::conn::ConnRef;

/// Slab key of a topic entry; valid while the entry exists.
pub type TopicId = u32;

#[derive(Debug)]
pub struct Topic {
    pub name: Box<str>,
    /// `{"op":"publish","topic":"<name>","msg":` for one-copy encoding.
    pub prefix: Box<[u8]>,
    pub subscribers: Vec<ConnRef>,
    pub publishers: Vec<ConnRef>,
}

#[derive(Debug)]
pub struct Service {
    pub provider: ConnRef,
    /// The name as a JSON string literal, for forwarded frames.
    pub name_json: Box<[u8]>,
    /// Informational type string from `advertise_service`.
    pub ty: Box<str>,
}

/// Outcome of `unadvertise_service`.
#[derive(Debug, PartialEq, Eq)]
pub enum Unadvertised {
    Removed,
    NotProvider,
    Unknown,
}

#[derive(Debug, Default)]
pub struct Router {
    by_name: HashMap<Box<str>, TopicId>,
    topics: Slab<Topic>,
    services: HashMap<Box<str>, Service>,
}

impl Router {
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

    pub fn services(&self) -> impl Iterator<Item = (&str, &Service)> {
        self.services.iter().map(|(k, v)| (&**k, v))
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

    /// Adds `who` as a subscriber; returns the topic and whether it is new.
    pub fn subscribe(&mut self, name: &str, who: ConnRef) -> (TopicId, bool) {
        let id = self.topic_or_insert(name);
        let subs = &mut self.topics[id as usize].subscribers;
        let added = !subs.contains(&who);
        if added {
            subs.push(who);
        }
        (id, added)
    }

    /// Adds `who` as a publisher; returns the topic and whether it is new.
    pub fn advertise(&mut self, name: &str, who: ConnRef) -> (TopicId, bool) {
        let id = self.topic_or_insert(name);
        let pubs = &mut self.topics[id as usize].publishers;
        let added = !pubs.contains(&who);
        if added {
            pubs.push(who);
        }
        (id, added)
    }

    /// Removes `who`'s subscription; returns the topic if there was one.
    pub fn unsubscribe(&mut self, id: TopicId, who: ConnRef) -> bool {
        self.remove_member(id, who, |t| &mut t.subscribers)
    }

    /// Removes `who`'s advertisement; returns whether there was one.
    pub fn unadvertise(&mut self, id: TopicId, who: ConnRef) -> bool {
        self.remove_member(id, who, |t| &mut t.publishers)
    }

    fn remove_member(
        &mut self,
        id: TopicId,
        who: ConnRef,
        list: impl Fn(&mut Topic) -> &mut Vec<ConnRef>,
    ) -> bool {
        let Some(t) = self.topics.get_mut(id as usize) else {
            return false;
        };
        let l = list(t);
        let Some(pos) = l.iter().position(|&c| c == who) else {
            return false;
        };
        // Order matters only for nothing: delivery order is per publisher.
        l.swap_remove(pos);
        if t.subscribers.is_empty() && t.publishers.is_empty() {
            let t = self.topics.remove(id as usize);
            self.by_name.remove(&t.name);
        }
        true
    }

    pub fn service(&self, name: &str) -> Option<&Service> {
        self.services.get(name)
    }

    /// Makes `who` the provider of `name`; returns the displaced provider.
    pub fn advertise_service(&mut self, name: &str, ty: &str, who: ConnRef) -> Option<ConnRef> {
        let mut name_json = Vec::with_capacity(name.len() + 2);
        encode::json_string(&mut name_json, name);
        let new = Service {
            provider: who,
            name_json: name_json.into_boxed_slice(),
            ty: ty.into(),
        };
        self.services
            .insert(name.into(), new)
            .map(|old| old.provider)
            .filter(|&old| old != who)
    }

    /// Removes `name` if `who` is its current provider.
    pub fn unadvertise_service(&mut self, name: &str, who: ConnRef) -> Unadvertised {
        match self.services.get(name) {
            None => Unadvertised::Unknown,
            Some(s) if s.provider != who => Unadvertised::NotProvider,
            Some(_) => {
                self.services.remove(name);
                Unadvertised::Removed
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: ConnRef = ConnRef { key: 0, gen: 1 };
    const B: ConnRef = ConnRef { key: 1, gen: 2 };

    #[test]
    fn topics_vanish_when_empty() {
        let mut r = Router::new();
        let (t, added) = r.subscribe("/t", A);
        assert!(added);
        assert!(!r.subscribe("/t", A).1, "second subscribe is a no-op");
        r.advertise("/t", B);
        assert!(r.unsubscribe(t, A));
        assert!(!r.unsubscribe(t, A));
        assert_eq!(r.topic_count(), 1);
        assert!(r.unadvertise(t, B));
        assert_eq!(r.topic_count(), 0);
        assert_eq!(r.topic_id("/t"), None);
    }

    #[test]
    fn services_have_one_provider() {
        let mut r = Router::new();
        assert_eq!(r.advertise_service("/s", "T", A), None);
        assert_eq!(r.advertise_service("/s", "T", A), None);
        assert_eq!(r.advertise_service("/s", "T", B), Some(A));
        assert_eq!(r.unadvertise_service("/s", A), Unadvertised::NotProvider);
        assert_eq!(r.unadvertise_service("/s", B), Unadvertised::Removed);
        assert_eq!(r.unadvertise_service("/s", B), Unadvertised::Unknown);
    }
}
