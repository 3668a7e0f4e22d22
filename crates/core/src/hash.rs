//! `SeqHasher`: a cheap multiplicative hasher for small integer keys (call
//! sequence numbers, topic ids). The keys are chosen by the gateway, never
//! by a client, so hash flooding is not a concern here; names from clients
//! keep std's keyed SipHash.

use std::hash::{BuildHasherDefault, Hasher};

/// Multiplicative hashing for sequential `u64` keys: cheap, and it spreads
/// the high bits that SwissTable uses for its control bytes.
#[derive(Debug, Default)]
pub struct SeqHasher(u64);

impl Hasher for SeqHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }
}

/// A `HashMap`/`HashSet` hasher for gateway-chosen integer keys.
pub type SeqBuild = BuildHasherDefault<SeqHasher>;

/// A `HashMap` keyed by gateway-chosen integers.
pub type SeqMap<K, V> = std::collections::HashMap<K, V, SeqBuild>;
