//! The types the link knows, and those it learns from nodes: an entity
//! whose type the gateway lacks makes the link ask its node's
//! `~/get_type_description` for it. The link owns the [`Registry`] the
//! shell encodes and decodes by (a snapshot: replaced whole, never edited
//! in place, so a snapshot a callback holds stays valid).
//!
//! Invariants:
//! - a type is asked once, ever (whatever the answer), and at most
//!   [`MAX_FETCHES`] types are asked, [`MAX_FETCHES_PER_NODE`] of one
//!   node, [`FETCHES_PER_TURN`] between two ticks (the rest wait, in
//!   order, for the next ticks);
//! - an answer is used only when the description adds its types without
//!   breaking the registry and the type then hashes to the RIHS01 the node
//!   advertised; after that the type is known ([`ToHub::LearnType`]) and
//!   never asked again;
//! - a node that does not answer within [`FETCH_TIMEOUT`] of the first
//!   tick after it was asked is given up on (a later answer is not used).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use super::{
    Action, Domain, Entity, EntityKind, Link, QueryId, Reply, ToHub, FETCHES_PER_TURN,
    FETCH_TIMEOUT, MAX_FETCHES, MAX_FETCHES_PER_NODE,
};
use crate::registry::Registry;

#[derive(Debug)]
struct Fetch {
    ty: String,
    hash: String,
    /// Set by the first tick after it was asked.
    deadline: Option<Instant>,
}

/// A fetch waiting for a later turn (past [`FETCHES_PER_TURN`]).
#[derive(Debug)]
struct Waiting {
    domain: Domain,
    node: String,
    ty: String,
    hash: String,
}

/// Known types, and types asked of nodes.
#[derive(Debug, Default)]
pub struct Types {
    registry: Arc<Registry>,
    /// Types known by name only (no definition here): a simulation's or
    /// a test's; the shell's types are all in `registry`.
    known: HashSet<String>,
    asked: HashSet<String>,
    /// Types asked per node (participant, node): at most
    /// [`MAX_FETCHES_PER_NODE`] each; at most [`MAX_FETCHES`] entries, as
    /// each ask adds at most one.
    of_node: HashMap<(String, String), usize>,
    fetching: HashMap<QueryId, Fetch>,
    /// Asked, not yet sent: at most [`MAX_FETCHES`] (each type once).
    waiting: VecDeque<Waiting>,
    /// Describes sent since the last tick.
    this_turn: usize,
    learned: u64,
    /// Descriptions not used (they did not hash as advertised).
    refused: u64,
}

impl Types {
    pub(super) fn new(registry: Registry) -> Types {
        Types {
            registry: Arc::new(registry),
            ..Types::default()
        }
    }

    pub(super) fn know(&mut self, ty: String) {
        self.known.insert(ty);
    }

    /// The registry now (the shell's codec reads it).
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// Whether `ty` (a full ROS name: `pkg/msg/X`, `pkg/srv/X`) is known.
    pub fn knows(&self, ty: &str) -> bool {
        self.known.contains(ty)
            || self.registry.msg(ty).is_some()
            || self.registry.srv(ty).is_some()
    }

    pub fn asked(&self) -> usize {
        self.asked.len()
    }

    pub fn learned(&self) -> u64 {
        self.learned
    }

    /// Descriptions refused: they did not hash as the node advertised.
    pub fn refused(&self) -> u64 {
        self.refused
    }

    /// Asks waiting for a later turn.
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }
}

/// An entity appeared: ask its node for its type if the gateway lacks it.
pub(super) fn entity(link: &mut Link, e: &Entity) {
    if e.kind == EntityKind::Node || e.ty.is_empty() || e.hash.is_empty() {
        return;
    }
    let t = &mut link.types;
    if t.knows(&e.ty) || t.asked.contains(&e.ty) {
        return;
    }
    let node = (e.participant.clone(), e.node.clone());
    let of_node = t.of_node.get(&node).copied().unwrap_or(0);
    if t.asked.len() >= MAX_FETCHES || of_node >= MAX_FETCHES_PER_NODE {
        link.ignored += 1;
        return;
    }
    t.asked.insert(e.ty.clone());
    t.of_node.insert(node, of_node + 1);
    t.waiting.push_back(Waiting {
        domain: e.domain,
        node: e.node.clone(),
        ty: e.ty.clone(),
        hash: e.hash.clone(),
    });
    send_waiting(link);
}

/// Sends the asks waiting, up to this turn's allowance.
fn send_waiting(link: &mut Link) {
    while link.types.this_turn < FETCHES_PER_TURN {
        let Some(w) = link.types.waiting.pop_front() else {
            return;
        };
        link.types.this_turn += 1;
        let query = link.next_query();
        link.types.fetching.insert(
            query,
            Fetch {
                ty: w.ty.clone(),
                hash: w.hash.clone(),
                deadline: None,
            },
        );
        link.push(Action::Describe {
            query,
            domain: w.domain,
            node: w.node,
            ty: w.ty,
            hash: w.hash,
        });
    }
}

/// A node's answer: its description's types are added to the registry
/// (a new snapshot) when the asked type then hashes as advertised.
pub(super) fn reply(link: &mut Link, query: QueryId, reply: &Reply) -> bool {
    let Some(f) = link.types.fetching.remove(&query) else {
        return false;
    };
    let Reply::Described(Some(description)) = reply else {
        return true;
    };
    let mut next = (*link.types.registry).clone();
    match next.add_description(description) {
        Ok(_) if next.hash(&f.ty).as_deref() == Some(f.hash.as_str()) => {
            link.types.registry = Arc::new(next);
            link.types.learned += 1;
            link.deliver(ToHub::LearnType { query, ty: f.ty });
        }
        // It does not hash as advertised, or does not describe at all:
        // never used (the type stays asked, so it is not asked again).
        _ => link.types.refused += 1,
    }
    true
}

pub(super) fn query_end(link: &mut Link, query: QueryId) {
    link.types.fetching.remove(&query);
}

pub(super) fn tick(link: &mut Link, now: Instant) {
    link.types.fetching.retain(|_, f| match f.deadline {
        None => {
            f.deadline = Some(now + FETCH_TIMEOUT);
            true
        }
        Some(d) => d > now,
    });
    link.types.this_turn = 0;
    send_waiting(link);
}
