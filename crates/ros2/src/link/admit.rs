//! The trust boundary of the link's graph: which announced entities it
//! remembers. Anyone on the network can announce entities, so:
//! - an entity whose names break rmw's name rules (`crate::names`: its
//!   node's name and namespace, its topic or service name) is refused and
//!   counted: a real node never announces one, so it comes from a peer
//!   posing as a node, and it is never listed nor bridged;
//! - at most [`MAX_ENTITIES`] entities in all, [`MAX_NODES`] nodes (by
//!   participant and node name), [`MAX_ENTITIES_PER_NODE`] of one node:
//!   further ones are refused and counted, so one flooding node cannot
//!   crowd out the others' entities;
//! - what is remembered is counted in bytes ([`ENTITY_COST`] each beyond
//!   its strings), for the memory ledger.
//!
//! Invariant: the counts follow exactly the entities admitted and not yet
//! released (a release of an entity never admitted changes nothing).

use std::collections::HashMap;

use super::{Entity, MAX_ENTITIES};
use crate::names;

/// ROS 2 nodes (by participant and node name) whose entities are
/// remembered, all domains; entities of further nodes are refused.
pub const MAX_NODES: usize = 10_000;

/// Entities remembered of one node (its node entity, publishers,
/// subscriptions, servers, clients); further ones are refused.
pub const MAX_ENTITIES_PER_NODE: usize = 1024;

/// Bytes the ledger counts per entity remembered beyond its strings (the
/// tables' keys and entries that refer to it).
pub const ENTITY_COST: usize = 256;

/// Why an entity was not remembered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refused {
    /// Its names break rmw's rules.
    Names,
    /// A bound: in all, of nodes, or of its node.
    Bound,
}

/// What the link's admission keeps.
#[derive(Debug, Default)]
pub(super) struct Admission {
    per_node: HashMap<(String, String), usize>,
    bytes: usize,
    pub(super) names_rejected: u64,
    pub(super) refused: u64,
}

/// Whether every name an entity carries passes rmw's rules: its node's
/// name and namespace (split from its full name), and its topic or
/// service name (none for a node).
pub fn valid_names(e: &Entity) -> bool {
    let (ns, node) = match e.node.rsplit_once('/') {
        Some(("", node)) => ("/", node),
        Some((ns, node)) => (ns, node),
        None => return false,
    };
    names::valid_node_name(node)
        && names::valid_namespace(ns)
        && (e.name.is_empty() || names::valid_topic_name(&e.name))
}

fn cost(e: &Entity) -> usize {
    ENTITY_COST + e.participant.len() + e.node.len() + e.name.len() + e.ty.len() + e.hash.len()
}

impl Admission {
    /// Admits `e` (counted) when its names pass and the bounds leave room,
    /// `total` being the entities remembered now.
    pub(super) fn admit(&mut self, e: &Entity, total: usize) -> Result<(), Refused> {
        if !valid_names(e) {
            self.names_rejected += 1;
            return Err(Refused::Names);
        }
        let node = (e.participant.clone(), e.node.clone());
        let n = self.per_node.get(&node).copied().unwrap_or(0);
        if total >= MAX_ENTITIES
            || n >= MAX_ENTITIES_PER_NODE
            || (n == 0 && self.per_node.len() >= MAX_NODES)
        {
            self.refused += 1;
            return Err(Refused::Bound);
        }
        self.per_node.insert(node, n + 1);
        self.bytes += cost(e);
        Ok(())
    }

    /// Forgets an admitted entity's counts.
    pub(super) fn release(&mut self, e: &Entity) {
        let node = (e.participant.clone(), e.node.clone());
        let Some(n) = self.per_node.get_mut(&node) else {
            return;
        };
        *n -= 1;
        if *n == 0 {
            self.per_node.remove(&node);
        }
        self.bytes = self.bytes.saturating_sub(cost(e));
    }

    pub(super) fn nodes(&self) -> usize {
        self.per_node.len()
    }

    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }
}
