//! [`TinyMap`]: a map from gateway-chosen integer ids to values that holds
//! its first entry inline and becomes a hash map from the second on.
//!
//! Why: most connections register one topic in a role (one subscription,
//! one advertisement), and an idle subscribed connection's memory is the
//! number `docs/performance.md` tracks. A `HashMap` allocates four buckets
//! for its first entry; this holds it in place, so the common case costs
//! no allocation, and the rest keeps O(1) look-ups.
//!
//! Invariant: `Many` is never empty (its last removal goes back to
//! `Empty`); it may hold a single entry after removals, which look-ups do
//! not mind.

use std::collections::HashMap;

use crate::hash::SeqMap;

/// See the module docs. Keys are `u32` ids the gateway chose (never a
/// client's bytes), so the cheap [`crate::hash::SeqHasher`] hashes them.
#[derive(Debug, Default)]
pub enum TinyMap<V> {
    #[default]
    Empty,
    One(u32, V),
    Many(Box<SeqMap<u32, V>>),
}

impl<V> TinyMap<V> {
    pub fn len(&self) -> usize {
        match self {
            TinyMap::Empty => 0,
            TinyMap::One(..) => 1,
            TinyMap::Many(m) => m.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn get(&self, k: &u32) -> Option<&V> {
        match self {
            TinyMap::One(key, v) if key == k => Some(v),
            TinyMap::Many(m) => m.get(k),
            _ => None,
        }
    }

    pub fn get_mut(&mut self, k: &u32) -> Option<&mut V> {
        match self {
            TinyMap::One(key, v) if key == k => Some(v),
            TinyMap::Many(m) => m.get_mut(k),
            _ => None,
        }
    }

    /// Inserts, returning the value `k` had.
    pub fn insert(&mut self, k: u32, v: V) -> Option<V> {
        match self {
            TinyMap::Empty => {
                *self = TinyMap::One(k, v);
                None
            }
            TinyMap::One(key, old) if *key == k => Some(std::mem::replace(old, v)),
            TinyMap::One(..) => {
                let TinyMap::One(k0, v0) = std::mem::take(self) else {
                    return None;
                };
                let mut m: SeqMap<u32, V> = HashMap::default();
                m.insert(k0, v0);
                m.insert(k, v);
                *self = TinyMap::Many(Box::new(m));
                None
            }
            TinyMap::Many(m) => m.insert(k, v),
        }
    }

    pub fn remove(&mut self, k: &u32) -> Option<V> {
        match self {
            TinyMap::One(key, _) if key == k => match std::mem::take(self) {
                TinyMap::One(_, v) => Some(v),
                _ => None,
            },
            TinyMap::Many(m) => {
                let v = m.remove(k);
                if m.is_empty() {
                    *self = TinyMap::Empty;
                }
                v
            }
            _ => None,
        }
    }

    pub fn iter(&self) -> Box<dyn Iterator<Item = (&u32, &V)> + '_> {
        match self {
            TinyMap::Empty => Box::new(std::iter::empty()),
            TinyMap::One(k, v) => Box::new(std::iter::once((k, v))),
            TinyMap::Many(m) => Box::new(m.iter()),
        }
    }

    pub fn keys(&self) -> impl Iterator<Item = &u32> + '_ {
        self.iter().map(|(k, _)| k)
    }
}

#[cfg(test)]
mod tests {
    use super::TinyMap;

    #[test]
    fn one_inline_then_a_map_and_back() {
        let mut m: TinyMap<&str> = TinyMap::default();
        assert!(m.is_empty() && m.get(&1).is_none() && m.remove(&1).is_none());
        assert_eq!(m.insert(1, "a"), None);
        assert!(matches!(m, TinyMap::One(1, "a")));
        assert_eq!(m.insert(1, "b"), Some("a"));
        assert_eq!(m.insert(2, "c"), None);
        assert_eq!(m.len(), 2);
        assert_eq!(
            (m.get(&1), m.get(&2), m.get(&3)),
            (Some(&"b"), Some(&"c"), None)
        );
        if let Some(v) = m.get_mut(&2) {
            *v = "d";
        }
        let mut keys: Vec<u32> = m.keys().copied().collect();
        keys.sort();
        assert_eq!(keys, vec![1, 2]);
        assert_eq!(m.remove(&1), Some("b"));
        assert_eq!((m.len(), m.get(&2)), (1, Some(&"d")));
        assert_eq!(m.remove(&2), Some("d"));
        assert!(m.is_empty() && matches!(m, TinyMap::Empty));
        assert_eq!(m.insert(7, "e"), None);
        assert_eq!(m.iter().collect::<Vec<_>>(), vec![(&7, &"e")]);
    }
}
