//! The graph as introspection lists it: per domain, the nodes that have
//! entities remembered, and each (topic, type)'s publishers and
//! subscriptions. Kept as entities come and go, so a listing copies it
//! rather than walking every entity, and numbered by a generation that
//! changes with it (the shell rebuilds its listing only then).
//!
//! Invariant: the counts are those of the entities the link remembers
//! (each admitted entity counted once in, once out), so the lists are
//! bounded as the entities are (`MAX_ENTITIES`).

use std::collections::btree_map::Entry;
use std::collections::BTreeMap;

use super::{Domain, Entity, EntityKind};

#[derive(Debug, Default)]
pub(super) struct Graph {
    nodes: BTreeMap<(Domain, String), usize>,
    topics: BTreeMap<(Domain, String, String), (u32, u32)>,
    generation: u64,
}

fn step<K: Ord>(map: &mut BTreeMap<K, usize>, k: K, on: bool) {
    if on {
        *map.entry(k).or_default() += 1;
    } else if let Entry::Occupied(mut e) = map.entry(k) {
        *e.get_mut() -= 1;
        if *e.get() == 0 {
            e.remove();
        }
    }
}

impl Graph {
    /// Counts an entity the link now remembers (`on`), or no longer.
    pub(super) fn count(&mut self, e: &Entity, on: bool) {
        self.generation += 1;
        step(&mut self.nodes, (e.domain, e.node.clone()), on);
        let (publisher, subscription) = match e.kind {
            EntityKind::Publisher => (1, 0),
            EntityKind::Subscription => (0, 1),
            _ => return,
        };
        let k = (e.domain, e.name.clone(), e.ty.clone());
        let c = self.topics.entry(k.clone()).or_default();
        if on {
            c.0 += publisher;
            c.1 += subscription;
        } else {
            c.0 = c.0.saturating_sub(publisher);
            c.1 = c.1.saturating_sub(subscription);
        }
        if *c == (0, 0) {
            self.topics.remove(&k);
        }
    }

    pub(super) fn generation(&self) -> u64 {
        self.generation
    }

    /// The nodes of `domain`, and its topics with their type and
    /// subscription count, in name order.
    pub(super) fn lists(&self, domain: Domain) -> (Vec<String>, Vec<(String, String, u32)>) {
        let nodes = self
            .nodes
            .range((domain, String::new())..)
            .take_while(|((d, _), _)| *d == domain)
            .map(|((_, n), _)| n.clone())
            .collect();
        let topics = self
            .topics
            .range((domain, String::new(), String::new())..)
            .take_while(|((d, _, _), _)| *d == domain)
            .map(|((_, n, ty), (_, subs))| (n.clone(), ty.clone(), *subs))
            .collect();
        (nodes, topics)
    }
}
