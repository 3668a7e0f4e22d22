//! The benchmark payload: how a message is stamped, padded and verified.
//!
//! Every published message (and every service call's `args`) is this JSON
//! object, written with no whitespace and keys in this order:
//!
//! ```text
//! {"p":<source>,"s":<seq>,"t":<ns>,"d":"<padding>"}
//! ```
//!
//! - `p`: publisher (or caller) index; sequence numbers are per source;
//! - `s`: sequence number, 0, 1, 2, ... per source;
//! - `t`: intended send time, nanoseconds since the run started;
//! - `d`: padding cut from a fixed 64-symbol pattern that starts at an offset
//!   derived from `p` and `s`, so a payload swapped with another message's,
//!   truncated, or with a flipped byte fails the check.
//!
//! The padding is sized so that the whole object is exactly `size` bytes
//! (the "payload size" of the CLI); when `size` is below the stamp itself the
//! padding is empty and the object is as long as the stamp.
//!
//! Verification is one strict left-to-right scan plus one `memcmp` of the
//! padding, because it runs for every delivery and must stay far cheaper
//! than the gateway's work for the same message. A peer that re-serialises
//! JSON (other key order, whitespace) falls back to serde_json, which is
//! slower but still correct.

use std::borrow::Cow;

use serde::Deserialize;

/// Padding symbols: JSON-safe (never escaped), so the padding is copied and
/// compared byte for byte.
const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Fixed framing of the stamp: `{"p":` `,"s":` `,"t":` `,"d":"` and `"}`.
const FRAMING_BYTES: usize = 5 + 5 + 5 + 6 + 2;

/// Identity and timing carried by one payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// Source (publisher or caller) index.
    pub src: u64,
    /// Per-source sequence number.
    pub seq: u64,
    /// Intended send time, ns since the run started.
    pub t_ns: u64,
}

/// Why a payload failed verification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Corrupt {
    /// Not a payload object at all (bad JSON or missing fields).
    Shape,
    /// Stamp parsed but the padding has the wrong length.
    Length,
    /// Stamp parsed but the padding bytes differ from the pattern.
    Padding,
}

/// Builds and checks payloads of one size.
#[derive(Debug)]
pub struct Payload {
    size: usize,
    /// `ALPHABET` repeated to `size + 64` bytes, so any offset in 0..64 has
    /// `size` bytes of pattern after it.
    pattern: Vec<u8>,
}

impl Payload {
    pub fn new(size: usize) -> Self {
        let len = size + ALPHABET.len();
        let pattern = ALPHABET.iter().copied().cycle().take(len).collect();
        Payload { size, pattern }
    }

    /// Appends the payload for `st` to `out`.
    pub fn encode(&self, out: &mut Vec<u8>, st: Stamp) {
        let start = out.len();
        out.extend_from_slice(b"{\"p\":");
        push_u64(out, st.src);
        out.extend_from_slice(b",\"s\":");
        push_u64(out, st.seq);
        out.extend_from_slice(b",\"t\":");
        push_u64(out, st.t_ns);
        out.extend_from_slice(b",\"d\":\"");
        out.extend_from_slice(self.padding(st));
        out.extend_from_slice(b"\"}");
        debug_assert_eq!(out.len() - start, self.encoded_len(st));
    }

    /// Verifies `msg` and returns its stamp.
    pub fn check(&self, msg: &[u8]) -> Result<Stamp, Corrupt> {
        let (st, pad) = match parse_strict(msg) {
            Some(v) => v,
            None => return self.check_loose(msg),
        };
        self.check_padding(st, pad)?;
        Ok(st)
    }

    fn check_loose(&self, msg: &[u8]) -> Result<Stamp, Corrupt> {
        #[derive(Deserialize)]
        struct Loose<'a> {
            p: u64,
            s: u64,
            t: u64,
            #[serde(borrow)]
            d: Cow<'a, str>,
        }
        let l: Loose<'_> = serde_json::from_slice(msg).map_err(|_| Corrupt::Shape)?;
        let st = Stamp {
            src: l.p,
            seq: l.s,
            t_ns: l.t,
        };
        self.check_padding(st, l.d.as_bytes())?;
        Ok(st)
    }

    fn check_padding(&self, st: Stamp, pad: &[u8]) -> Result<(), Corrupt> {
        let want = self.padding(st);
        if pad.len() != want.len() {
            return Err(Corrupt::Length);
        }
        if pad != want {
            return Err(Corrupt::Padding);
        }
        Ok(())
    }

    /// The padding `st` must carry.
    fn padding(&self, st: Stamp) -> &[u8] {
        let stamp = FRAMING_BYTES + digits(st.src) + digits(st.seq) + digits(st.t_ns);
        let len = self.size.saturating_sub(stamp);
        let off = (st.src.wrapping_mul(17).wrapping_add(st.seq) % ALPHABET.len() as u64) as usize;
        &self.pattern[off..off + len]
    }

    /// Length of the encoded payload for `st`: `size`, or the bare stamp when
    /// that is longer.
    pub fn encoded_len(&self, st: Stamp) -> usize {
        let stamp = FRAMING_BYTES + digits(st.src) + digits(st.seq) + digits(st.t_ns);
        stamp.max(self.size)
    }
}

/// Parses exactly the layout `encode` writes; `None` for anything else.
fn parse_strict(msg: &[u8]) -> Option<(Stamp, &[u8])> {
    let rest = msg.strip_prefix(b"{\"p\":")?;
    let (src, rest) = take_u64(rest)?;
    let rest = rest.strip_prefix(b",\"s\":")?;
    let (seq, rest) = take_u64(rest)?;
    let rest = rest.strip_prefix(b",\"t\":")?;
    let (t_ns, rest) = take_u64(rest)?;
    let rest = rest.strip_prefix(b",\"d\":\"")?;
    let pad = rest.strip_suffix(b"\"}")?;
    // A quote or backslash inside means escapes or trailing fields: let the
    // loose path judge it rather than misreading it here.
    if memchr::memchr2(b'"', b'\\', pad).is_some() {
        return None;
    }
    Some((Stamp { src, seq, t_ns }, pad))
}

/// Leading decimal digits of `b` (1 to 20 of them, no overflow).
fn take_u64(b: &[u8]) -> Option<(u64, &[u8])> {
    let n = b.iter().take_while(|c| c.is_ascii_digit()).count();
    if n == 0 || n > 20 {
        return None;
    }
    let mut v: u64 = 0;
    for &c in &b[..n] {
        v = v.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
    }
    Some((v, &b[n..]))
}

/// Decimal digits in `n`.
pub fn digits(mut n: u64) -> usize {
    let mut d = 1;
    while n >= 10 {
        n /= 10;
        d += 1;
    }
    d
}

/// Appends the decimal digits of `n` without going through `fmt` (the
/// gateway's own encoder).
pub use rosgate_wire::ids::push_u64;

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(p: &Payload, st: Stamp) -> Vec<u8> {
        let mut v = Vec::new();
        p.encode(&mut v, st);
        v
    }

    #[test]
    fn round_trip_at_exact_size() {
        for size in [0, 10, 64, 1024, 1 << 20] {
            let p = Payload::new(size);
            let st = Stamp {
                src: 3,
                seq: 123_456,
                t_ns: 9_876_543_210,
            };
            let v = enc(&p, st);
            assert_eq!(v.len(), p.encoded_len(st));
            if size >= 64 {
                assert_eq!(v.len(), size);
            }
            assert_eq!(p.check(&v), Ok(st));
            let _: serde_json::Value = serde_json::from_slice(&v).expect("valid JSON");
        }
    }

    #[test]
    fn detects_damage() {
        let p = Payload::new(256);
        let st = Stamp {
            src: 1,
            seq: 7,
            t_ns: 5,
        };
        let v = enc(&p, st);
        let mut flipped = v.clone();
        let i = v.len() - 10;
        flipped[i] = if flipped[i] == b'A' { b'B' } else { b'A' };
        assert_eq!(p.check(&flipped), Err(Corrupt::Padding));
        let mut short = v[..v.len() - 3].to_vec();
        short.extend_from_slice(b"\"}");
        assert_eq!(p.check(&short), Err(Corrupt::Length));
        // Another message's body under this stamp: offsets differ.
        let other = enc(&p, Stamp { seq: 8, ..st });
        let mut swapped = v[..v.len() - 2 - 100].to_vec();
        swapped.extend_from_slice(&other[other.len() - 2 - 100..]);
        assert!(p.check(&swapped).is_err());
        assert_eq!(p.check(b"{\"p\":1"), Err(Corrupt::Shape));
        assert_eq!(p.check(b""), Err(Corrupt::Shape));
    }

    #[test]
    fn reserialised_json_is_accepted() {
        let p = Payload::new(100);
        let st = Stamp {
            src: 2,
            seq: 3,
            t_ns: 4,
        };
        let v: serde_json::Value = serde_json::from_slice(&enc(&p, st)).expect("json");
        let pretty = serde_json::to_vec_pretty(&v).expect("serialise");
        assert_eq!(p.check(&pretty), Ok(st));
    }

    #[test]
    fn digits_and_push() {
        for n in [0, 9, 10, 99, 100, u64::MAX] {
            let mut v = Vec::new();
            push_u64(&mut v, n);
            assert_eq!(v, n.to_string().as_bytes());
            assert_eq!(digits(n), v.len());
        }
    }
}
