//! `CallTable`: service calls in flight, keyed by our provider-side id.
//!
//! Invariants:
//! - a provider-side id (`rg-<seq>`) is issued once for the life of the
//!   process, so a stale or forged response can never match a newer call;
//! - a response completes a call only if it comes from the connection the
//!   call was forwarded to (same slab key *and* generation);
//! - every call is in exactly one caller index and one provider index (the
//!   per-connection sets in `Conn`), and leaves all three together.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::time::Instant;

use crate::conn::ConnRef;

/// Prefix of the ids we give forwarded calls.
pub const CALL_ID_PREFIX: &str = "rg-";

/// A call forwarded to a provider and not yet answered.
#[derive(Debug)]
pub struct Call {
    pub caller: ConnRef,
    pub provider: ConnRef,
    /// Escaped service name followed by the caller's raw id bytes (one
    /// allocation per call); `split` separates them.
    names: Box<[u8]>,
    split: usize,
    /// `false` when the caller sent no id (allowed for internal callers).
    has_id: bool,
    pub deadline: Instant,
}

impl Call {
    /// The service name as a JSON string literal.
    pub fn service_json(&self) -> &[u8] {
        &self.names[..self.split]
    }

    /// The caller's id exactly as it sent it.
    pub fn caller_id(&self) -> Option<&[u8]> {
        self.has_id.then(|| &self.names[self.split..])
    }
}

/// Multiplicative hashing for sequential `u64` keys: cheap, and it spreads
/// the high bits that SwissTable uses for its control bytes.
#[derive(Default)]
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
}

/// A `HashMap`/`HashSet` hasher for call sequence numbers.
pub type SeqBuild = BuildHasherDefault<SeqHasher>;

/// See the module docs.
#[derive(Debug, Default)]
pub struct CallTable {
    next_seq: u64,
    calls: HashMap<u64, Call, SeqBuild>,
}

impl CallTable {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.calls.len()
    }

    pub fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }

    /// Registers a call and returns its provider-side sequence number.
    pub fn insert(
        &mut self,
        caller: ConnRef,
        provider: ConnRef,
        service_json: &[u8],
        caller_id: Option<&[u8]>,
        deadline: Instant,
    ) -> u64 {
        self.next_seq += 1;
        let seq = self.next_seq;
        let id = caller_id.unwrap_or(b"");
        let mut names = Vec::with_capacity(service_json.len() + id.len());
        names.extend_from_slice(service_json);
        names.extend_from_slice(id);
        self.calls.insert(
            seq,
            Call {
                caller,
                provider,
                names: names.into_boxed_slice(),
                split: service_json.len(),
                has_id: caller_id.is_some(),
                deadline,
            },
        );
        seq
    }

    pub fn get(&self, seq: u64) -> Option<&Call> {
        self.calls.get(&seq)
    }

    pub fn remove(&mut self, seq: u64) -> Option<Call> {
        self.calls.remove(&seq)
    }
}

/// Parses a provider's response id (raw JSON) back into our sequence number.
/// Anything that is not exactly a string `"rg-<digits>"` is `None`.
pub fn parse_call_id(raw: &[u8]) -> Option<u64> {
    let inner = raw.strip_prefix(b"\"")?.strip_suffix(b"\"")?;
    let digits = inner.strip_prefix(CALL_ID_PREFIX.as_bytes())?;
    // Exactly the digits we wrote: no sign, no leading zero, so one call
    // has exactly one spelling.
    if digits.is_empty()
        || digits.len() > 19
        || (digits.len() > 1 && digits[0] == b'0')
        || !digits.iter().all(u8::is_ascii_digit)
    {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_parse_strictly() {
        assert_eq!(parse_call_id(br#""rg-42""#), Some(42));
        for bad in [
            &br#"rg-42"#[..],
            br#""rg-""#,
            br#""rg-4x""#,
            br#""rg-+1""#,
            b"42",
            br#""RG-1""#,
            br#""rg-99999999999999999999""#,
        ] {
            assert_eq!(parse_call_id(bad), None, "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn sequence_numbers_are_never_reused() {
        let mut t = CallTable::new();
        let r = ConnRef { key: 1, gen: 1 };
        let now = Instant::now();
        let a = t.insert(r, r, b"\"/s\"", Some(b"1"), now);
        assert!(t.remove(a).is_some());
        let b = t.insert(r, r, b"\"/s\"", Some(b"1"), now);
        assert_ne!(a, b);
        let c = t.get(b).expect("present");
        assert_eq!(c.service_json(), b"\"/s\"");
        assert_eq!(c.caller_id(), Some(&b"1"[..]));
    }
}
