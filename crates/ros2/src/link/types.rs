//! Types learned from nodes: an entity whose type the gateway does not
//! know makes the link ask its node's `~/get_type_description` for it.
//!
//! Invariants:
//! - a type is asked once, ever (whatever the answer), and at most
//!   [`MAX_FETCHES`] types are asked;
//! - an answer is used ([`ToHub::LearnType`]) only when the description
//!   hashes to the RIHS01 the node advertised; after that the type is
//!   known and never asked again;
//! - a node that does not answer within [`FETCH_TIMEOUT`] is given up on.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use super::{
    Action, Domain, Entity, EntityKind, Link, QueryId, Reply, ToHub, FETCH_TIMEOUT, MAX_FETCHES,
};

#[derive(Debug)]
struct Fetch {
    ty: String,
    hash: String,
    /// Set by the first tick after it was asked.
    deadline: Option<Instant>,
}

/// Known types, and types asked of nodes.
#[derive(Debug, Default)]
pub struct Types {
    known: HashSet<String>,
    asked: HashSet<String>,
    fetching: HashMap<QueryId, Fetch>,
    learned: u64,
}

impl Types {
    pub(super) fn know(&mut self, ty: String) {
        self.known.insert(ty);
    }

    pub fn asked(&self) -> usize {
        self.asked.len()
    }

    pub fn learned(&self) -> u64 {
        self.learned
    }
}

/// An entity appeared: ask its node for its type if the gateway lacks it.
pub(super) fn entity(link: &mut Link, e: &Entity) {
    if e.kind == EntityKind::Node || e.ty.is_empty() || e.hash.is_empty() {
        return;
    }
    let t = &mut link.types;
    if t.known.contains(&e.ty) || t.asked.contains(&e.ty) {
        return;
    }
    if t.asked.len() >= MAX_FETCHES {
        link.ignored += 1;
        return;
    }
    t.asked.insert(e.ty.clone());
    let query = link.next_query();
    link.types.fetching.insert(
        query,
        Fetch {
            ty: e.ty.clone(),
            hash: e.hash.clone(),
            deadline: None,
        },
    );
    link.push(Action::Describe {
        query,
        domain: e.domain as Domain,
        node: e.node.clone(),
        ty: e.ty.clone(),
        hash: e.hash.clone(),
    });
}

pub(super) fn reply(link: &mut Link, query: QueryId, reply: &Reply) -> bool {
    let Some(f) = link.types.fetching.remove(&query) else {
        return false;
    };
    if let Reply::Described(Some(hash)) = reply {
        if *hash == f.hash {
            link.types.learned += 1;
            link.types.known.insert(f.ty.clone());
            link.deliver(ToHub::LearnType { query, ty: f.ty });
        }
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
}
