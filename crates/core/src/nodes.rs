//! `Nodes`: the ROS 2 nodes connections declared (`docs/protocol.md`,
//! "Declaring a node"): each a
//! name and namespace with its remap rules, in one domain, owned by one
//! connection. Registrations made for a node carry its [`NodeTag`] (the
//! registry attributes them); the hub withdraws them before a node goes.
//!
//! Invariants:
//! - a node belongs to exactly one live connection, and all of a
//!   connection's nodes are in the connection's domain;
//! - one connection never declares the same full name twice (its
//!   registrations could not be told apart); two connections may, as two
//!   ROS 2 processes may, and both are listed;
//! - `by_conn` lists each connection's nodes in declaration order (the
//!   first is the connection's default node); `sorted` holds every node
//!   once, by domain and full name, so a domain's listing is in order and
//!   costs O(its nodes);
//! - at most `max_per_conn` nodes per connection (the caller's limit);
//! - `bytes()` is what the table holds for clients, kept as nodes come and
//!   go.

use std::collections::{BTreeSet, HashMap};
use std::ops::Bound;
use std::rc::Rc;

use slab::Slab;

use rosgate_wire::names::{NameError, Resolver};

use crate::conn_ref::ConnRef;

/// Which node a registration is made for: the slab key of one of the
/// connection's declared nodes ([`Nodes`]), or
/// [`NodeTag::CONN`], the connection itself (a connection that declared
/// no node, or a registration that named none). A declared node's
/// registrations are withdrawn before its key can be reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeTag(pub u32);

impl NodeTag {
    /// The connection itself.
    pub const CONN: NodeTag = NodeTag(u32::MAX);
}

/// A ROS domain id, 0-232 as `ROS_DOMAIN_ID` (docs.ros.org, "The
/// ROS_DOMAIN_ID").
pub type Domain = u8;

/// The highest domain id (ROS_DOMAIN_ID's range is 0-232).
pub const MAX_DOMAIN: Domain = 232;

/// Domains, for per-domain tables.
pub const DOMAINS: usize = MAX_DOMAIN as usize + 1;

/// Bytes counted per node beyond its names and rules.
const NODE_OVERHEAD: usize = 192;

/// One declared node.
#[derive(Debug)]
pub struct Node {
    resolver: Resolver,
    full_name: Rc<str>,
    owner: ConnRef,
    domain: Domain,
    bytes: usize,
}

impl Node {
    /// `<namespace>/<name>`.
    pub fn full_name(&self) -> &str {
        &self.full_name
    }

    /// The node's name (one token).
    pub fn name(&self) -> &str {
        self.resolver.node().name()
    }

    pub fn namespace(&self) -> &str {
        self.resolver.node().namespace()
    }

    /// Resolves names the node uses (expansion, then remaps).
    pub fn resolver(&self) -> &Resolver {
        &self.resolver
    }

    pub fn owner(&self) -> ConnRef {
        self.owner
    }

    pub fn domain(&self) -> Domain {
        self.domain
    }
}

/// Why a node could not be declared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeclareError {
    /// Its name, namespace or a remap rule is invalid.
    Name(NameError),
    /// This connection already declared a node with that full name.
    Duplicate(String),
    /// The connection holds the most nodes it may.
    TooMany(usize),
}

/// See the module docs.
#[derive(Debug, Default)]
pub struct Nodes {
    slab: Slab<Node>,
    by_conn: HashMap<ConnRef, Vec<u32>>,
    sorted: BTreeSet<(Domain, Rc<str>, u32)>,
    /// Nodes per domain (empty until the first declaration), so whether a
    /// domain has any is O(1): the federation asks every loop turn.
    per_domain: Vec<u32>,
    bytes: usize,
    /// Counts declarations and removals: a reader that saw the same
    /// generation saw the same nodes.
    generation: u64,
}

impl Nodes {
    pub fn new() -> Self {
        Self::default()
    }

    /// Declares a node for `owner` in `domain`; returns its tag and how many
    /// nodes of the domain (this one included) now share its full name.
    pub fn declare(
        &mut self,
        owner: ConnRef,
        domain: Domain,
        resolver: Resolver,
        max_per_conn: usize,
    ) -> Result<(NodeTag, usize), DeclareError> {
        let full_name: Rc<str> = Rc::from(resolver.node().full_name());
        let mine = self.by_conn.get(&owner).map_or(&[][..], |v| &v[..]);
        if mine.iter().any(|&k| {
            self.slab
                .get(k as usize)
                .is_some_and(|n| n.full_name == full_name)
        }) {
            return Err(DeclareError::Duplicate(full_name.to_string()));
        }
        if mine.len() >= max_per_conn {
            return Err(DeclareError::TooMany(max_per_conn));
        }
        let bytes = NODE_OVERHEAD + 2 * full_name.len() + resolver.bytes();
        let key = self.slab.insert(Node {
            resolver,
            full_name: Rc::clone(&full_name),
            owner,
            domain,
            bytes,
        }) as u32;
        self.bytes += bytes;
        self.by_conn.entry(owner).or_default().push(key);
        self.sorted.insert((domain, Rc::clone(&full_name), key));
        if self.per_domain.is_empty() {
            self.per_domain = vec![0; DOMAINS];
        }
        self.per_domain[domain as usize] += 1;
        self.generation += 1;
        let same = self.named(domain, &full_name).count();
        Ok((NodeTag(key), same))
    }

    /// The node behind `tag`, if it is a live declared node.
    pub fn get(&self, tag: NodeTag) -> Option<&Node> {
        self.slab.get(tag.0 as usize)
    }

    /// The nodes `owner` declared, first (its default node) first.
    pub fn of(&self, owner: ConnRef) -> &[u32] {
        self.by_conn.get(&owner).map_or(&[], |v| &v[..])
    }

    /// `owner`'s default node: the first it declared.
    pub fn default_of(&self, owner: ConnRef) -> Option<NodeTag> {
        self.of(owner).first().map(|&k| NodeTag(k))
    }

    /// `owner`'s node called `name` (its name, or its full name).
    pub fn find(&self, owner: ConnRef, name: &str) -> Option<NodeTag> {
        self.of(owner)
            .iter()
            .copied()
            .find(|&k| {
                self.slab
                    .get(k as usize)
                    .is_some_and(|n| n.name() == name || &*n.full_name == name)
            })
            .map(NodeTag)
    }

    /// The nodes of `domain` whose full name is `full_name`.
    pub fn named<'a>(
        &'a self,
        domain: Domain,
        full_name: &'a str,
    ) -> impl Iterator<Item = NodeTag> + 'a {
        let from: Rc<str> = Rc::from(full_name);
        self.sorted
            .range((Bound::Included((domain, from, 0)), Bound::Unbounded))
            .take_while(move |(d, n, _)| *d == domain && &**n == full_name)
            .map(|&(_, _, k)| NodeTag(k))
    }

    /// Whether `domain` has any node, in O(1).
    pub fn has_domain(&self, domain: Domain) -> bool {
        self.per_domain.get(domain as usize).is_some_and(|&n| n > 0)
    }

    /// Every node of `domain`, in order of full name.
    pub fn in_domain(&self, domain: Domain) -> impl Iterator<Item = (&str, NodeTag)> {
        let from: Rc<str> = Rc::from("");
        self.sorted
            .range((Bound::Included((domain, from, 0)), Bound::Unbounded))
            .take_while(move |(d, _, _)| *d == domain)
            .map(|(_, n, k)| (&**n, NodeTag(*k)))
    }

    /// Removes one node (its registrations must be withdrawn first).
    pub fn remove(&mut self, tag: NodeTag) -> Option<Node> {
        let node = self.slab.try_remove(tag.0 as usize)?;
        self.generation += 1;
        self.bytes -= node.bytes;
        self.per_domain[node.domain as usize] -= 1;
        self.sorted
            .remove(&(node.domain, Rc::clone(&node.full_name), tag.0));
        if let Some(list) = self.by_conn.get_mut(&node.owner) {
            list.retain(|&k| k != tag.0);
            if list.is_empty() {
                self.by_conn.remove(&node.owner);
            }
        }
        Some(node)
    }

    /// Removes every node of `owner` (it left); returns them with their
    /// tags.
    pub fn drop_conn(&mut self, owner: ConnRef) -> Vec<(NodeTag, Node)> {
        let keys = self.by_conn.remove(&owner).unwrap_or_default();
        keys.into_iter()
            .filter_map(|k| {
                let node = self.slab.try_remove(k as usize)?;
                self.generation += 1;
                self.bytes -= node.bytes;
                self.per_domain[node.domain as usize] -= 1;
                self.sorted
                    .remove(&(node.domain, Rc::clone(&node.full_name), k));
                Some((NodeTag(k), node))
            })
            .collect()
    }

    /// Changes so far (declarations and removals): equal generations mean
    /// the same nodes.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Declared nodes, all domains.
    pub fn len(&self) -> usize {
        self.slab.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slab.is_empty()
    }

    /// Bytes held for clients.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Bytes `owner`'s nodes hold (they go when it is freed): O(its
    /// nodes), at most the per-connection limit.
    pub fn bytes_of(&self, owner: ConnRef) -> usize {
        self.of(owner)
            .iter()
            .filter_map(|&k| self.slab.get(k as usize))
            .map(|n| n.bytes)
            .sum()
    }

    /// Gives back capacity of tables that emptied out.
    pub fn shrink(&mut self) {
        if self.slab.capacity() > 4 * self.slab.len() + 64 {
            self.slab.shrink_to_fit();
        }
        if self.by_conn.capacity() > 4 * self.by_conn.len() + 64 {
            self.by_conn.shrink_to_fit();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: ConnRef = ConnRef { key: 0, gen: 1 };
    const B: ConnRef = ConnRef { key: 1, gen: 2 };
    const C: ConnRef = ConnRef { key: 2, gen: 3 };

    fn res(name: &str, ns: &str) -> Resolver {
        Resolver::new(name, ns, &[]).expect("valid")
    }

    #[test]
    fn declare_find_list_and_remove() {
        let mut n = Nodes::new();
        let (t1, same) = n.declare(A, 0, res("talker", "/r1"), 8).expect("ok");
        assert_eq!(same, 1);
        let (t2, _) = n.declare(A, 0, res("listener", "/"), 8).expect("ok");
        assert_eq!(n.default_of(A), Some(t1));
        assert_eq!(n.find(A, "listener"), Some(t2));
        assert_eq!(n.find(A, "/r1/talker"), Some(t1));
        assert_eq!(n.find(B, "talker"), None);
        assert_eq!(
            n.declare(A, 0, res("talker", "/r1"), 8),
            Err(DeclareError::Duplicate("/r1/talker".into()))
        );
        let (t3, same) = n
            .declare(B, 0, res("talker", "/r1"), 8)
            .expect("other conn");
        assert_eq!(same, 2, "two connections may share a full name");
        n.declare(C, 7, res("talker", "/r1"), 8)
            .expect("other domain");
        let listed: Vec<&str> = n.in_domain(0).map(|(name, _)| name).collect();
        assert_eq!(listed, vec!["/listener", "/r1/talker", "/r1/talker"]);
        assert_eq!(n.named(0, "/r1/talker").count(), 2);
        assert_eq!(n.in_domain(7).count(), 1);
        assert!(n.remove(t3).is_some());
        assert_eq!(n.named(0, "/r1/talker").collect::<Vec<_>>(), vec![t1]);
        assert_eq!(n.drop_conn(A).len(), 2);
        assert_eq!(n.drop_conn(B).len(), 0);
        assert_eq!(n.drop_conn(C).len(), 1);
        assert!(n.is_empty());
        assert_eq!(n.bytes(), 0);
    }

    #[test]
    fn per_connection_limit() {
        let mut n = Nodes::new();
        n.declare(A, 0, res("a", "/"), 1).expect("first");
        assert_eq!(
            n.declare(A, 0, res("b", "/"), 1),
            Err(DeclareError::TooMany(1))
        );
    }

    /// `has_domain` follows declarations, removals and departures.
    #[test]
    fn has_domain_counts_the_nodes_of_each_domain() {
        let mut n = Nodes::new();
        assert!(!n.has_domain(3));
        let (t, _) = n.declare(A, 3, res("a", "/"), 8).expect("ok");
        n.declare(B, 3, res("b", "/"), 8).expect("ok");
        n.declare(B, MAX_DOMAIN, res("c", "/"), 8).expect("ok");
        assert!(n.has_domain(3) && n.has_domain(MAX_DOMAIN) && !n.has_domain(0));
        n.remove(t);
        assert!(n.has_domain(3));
        n.drop_conn(B);
        assert!(!n.has_domain(3) && !n.has_domain(MAX_DOMAIN));
    }
}
