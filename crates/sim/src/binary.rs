//! Checks of the binary data plane's building blocks in `rosgate_wire`,
//! behind the `cbor` and `fragment` fuzz targets (and `tests/replay.rs`).
//! Each takes arbitrary bytes and panics on a violated invariant.
//!
//! - [`cbor()`]: `cbor::from_json` never panics; it accepts exactly what
//!   serde_json accepts (nesting within `MAX_JSON_DEPTH`), and what it
//!   writes is well-formed CBOR in preferred form (shortest heads, definite
//!   lengths) that a strict reader decodes to the same value serde_json
//!   reads from the text: the same keys in the same order (duplicates
//!   kept), the same strings, the same numbers (integers exact, floats
//!   within 16 units in the last place: serde_json without
//!   `float_roundtrip` is not correctly rounded, and was seen 2 units off
//!   where Rust's `str::parse`, which the conversion uses, is exact).
//! - [`fragment()`]: `fragment::Reassembly`, driven by arbitrary pieces and
//!   clock steps, against a model: every refusal is the one the rules
//!   give, a delivered message is exactly its pieces in `num` order, a
//!   failed id delivers nothing until its deadline, and bytes held and
//!   messages in flight stay within their bounds and equal the model's
//!   count; and `fragment::split` pieces of the input's text reassemble,
//!   in any order, to that text.
//! - [`cbor_typed()`]: `rosgate_ros2::cbor_typed::encode` of a bundled
//!   type never panics; every type's default message is accepted; what it
//!   writes is one well-formed item (shortest heads, definite lengths), a
//!   map of the type's fields in declaration order, its typed arrays RFC
//!   8746 tags over whole elements; a refusal writes nothing.

use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, Instant};

use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use rosgate_ros2::model::EMPTY_STRUCT_MEMBER;
use rosgate_ros2::registry::Registry;
use rosgate_ros2::{cbor_typed, cdr};
use rosgate_wire::cbor::{self, JsonError};
use rosgate_wire::fragment::{
    self, FragmentError, Reassembly, MAX_FRAGMENTED_IN_FLIGHT, MESSAGE_OVERHEAD, PIECE_OVERHEAD,
};

/// A JSON or CBOR value, maps as ordered pairs (duplicates kept).
#[derive(Debug, Clone)]
enum V {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
    Arr(Vec<V>),
    Map(Vec<(String, V)>),
    /// A byte string (typed CBOR only).
    Bytes(Vec<u8>),
    /// A tagged item (typed CBOR only: RFC 8746 typed arrays).
    Tagged(u64, Box<V>),
}

fn same(a: &V, b: &V) -> bool {
    match (a, b) {
        (V::Null, V::Null) => true,
        (V::Bool(x), V::Bool(y)) => x == y,
        (V::Int(x), V::Int(y)) => x == y,
        (V::Int(_) | V::Float(_), V::Int(_) | V::Float(_)) => near(num(a), num(b)),
        (V::Str(x), V::Str(y)) => x == y,
        (V::Arr(x), V::Arr(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q)),
        (V::Map(x), V::Map(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|((k, p), (l, q))| k == l && same(p, q))
        }
        _ => false,
    }
}

fn num(v: &V) -> f64 {
    match v {
        V::Int(i) => *i as f64,
        V::Float(f) => *f,
        _ => f64::NAN,
    }
}

/// Equal, or at most 16 doubles apart (same sign).
fn near(a: f64, b: f64) -> bool {
    a == b
        || (a.is_sign_negative() == b.is_sign_negative() && a.to_bits().abs_diff(b.to_bits()) <= 16)
}

impl<'de> Deserialize<'de> for V {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<V, D::Error> {
        struct Vis;
        impl<'de> Visitor<'de> for Vis {
            type Value = V;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("JSON")
            }
            fn visit_unit<E>(self) -> Result<V, E> {
                Ok(V::Null)
            }
            fn visit_bool<E>(self, b: bool) -> Result<V, E> {
                Ok(V::Bool(b))
            }
            fn visit_u64<E>(self, n: u64) -> Result<V, E> {
                Ok(V::Int(i128::from(n)))
            }
            fn visit_i64<E>(self, n: i64) -> Result<V, E> {
                Ok(V::Int(i128::from(n)))
            }
            fn visit_f64<E>(self, f: f64) -> Result<V, E> {
                Ok(V::Float(f))
            }
            fn visit_str<E>(self, s: &str) -> Result<V, E> {
                Ok(V::Str(s.to_owned()))
            }
            fn visit_string<E>(self, s: String) -> Result<V, E> {
                Ok(V::Str(s))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<V, A::Error> {
                let mut v = Vec::new();
                while let Some(x) = a.next_element()? {
                    v.push(x);
                }
                Ok(V::Arr(v))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<V, A::Error> {
                let mut v = Vec::new();
                while let Some((k, x)) = a.next_entry::<String, V>()? {
                    v.push((k, x));
                }
                Ok(V::Map(v))
            }
        }
        d.deserialize_any(Vis)
    }
}

/// A strict reader of what `cbor` writes: definite lengths, shortest heads,
/// UTF-8 text, text map keys, no tags; `None` on anything else.
struct Reader<'a> {
    b: &'a [u8],
    i: usize,
}

/// [`Reader`] that also reads byte strings and tags (what the typed
/// encoder, `rosgate_ros2::cbor_typed`, adds).
struct TypedReader<'a>(Reader<'a>);

impl TypedReader<'_> {
    fn value(&mut self) -> Option<V> {
        let r = &mut self.0;
        let at = r.i;
        let ib = *r.b.get(at)?;
        match ib >> 5 {
            2 => {
                let (_, n) = r.head()?;
                Some(V::Bytes(r.take(usize::try_from(n).ok()?)?.to_vec()))
            }
            6 => {
                let (_, tag) = r.head()?;
                let inner = self.value()?;
                Some(V::Tagged(tag, Box::new(inner)))
            }
            4 => {
                let (_, n) = r.head()?;
                let mut v = Vec::new();
                for _ in 0..n {
                    v.push(self.value()?);
                }
                Some(V::Arr(v))
            }
            5 => {
                let (_, n) = r.head()?;
                let mut v = Vec::new();
                for _ in 0..n {
                    let V::Str(k) = self.0.value()? else {
                        return None;
                    };
                    v.push((k, self.value()?));
                }
                Some(V::Map(v))
            }
            _ => r.value(),
        }
    }
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let s = self.b.get(self.i..self.i.checked_add(n)?)?;
        self.i += n;
        Some(s)
    }

    /// A head: (major type, argument), checked to be in shortest form.
    fn head(&mut self) -> Option<(u8, u64)> {
        let ib = *self.take(1)?.first()?;
        let (major, info) = (ib >> 5, ib & 31);
        let arg = match info {
            0..=23 => u64::from(info),
            24 => u64::from(self.take(1)?[0]),
            25 => u64::from(u16::from_be_bytes(self.take(2)?.try_into().ok()?)),
            26 => u64::from(u32::from_be_bytes(self.take(4)?.try_into().ok()?)),
            27 => u64::from_be_bytes(self.take(8)?.try_into().ok()?),
            _ => return None,
        };
        if major != 7 {
            let shortest = match arg {
                0..=23 => u64::from(arg as u8),
                24..=0xff => 24,
                0x100..=0xffff => 25,
                0x1_0000..=0xffff_ffff => 26,
                _ => 27,
            };
            let used = if info < 24 { arg } else { u64::from(info) };
            assert_eq!(used, shortest, "head of {arg} not in shortest form");
        }
        Some((major, arg))
    }

    fn value(&mut self) -> Option<V> {
        let at = self.i;
        let (major, arg) = self.head()?;
        Some(match major {
            0 => V::Int(i128::from(arg)),
            1 => V::Int(-1 - i128::from(arg)),
            3 => {
                let s = self.take(usize::try_from(arg).ok()?)?;
                V::Str(std::str::from_utf8(s).ok()?.to_owned())
            }
            4 => {
                let mut v = Vec::new();
                for _ in 0..arg {
                    v.push(self.value()?);
                }
                V::Arr(v)
            }
            5 => {
                let mut v = Vec::new();
                for _ in 0..arg {
                    let V::Str(k) = self.value()? else {
                        return None;
                    };
                    v.push((k, self.value()?));
                }
                V::Map(v)
            }
            7 => match self.b[at] {
                0xf4 => V::Bool(false),
                0xf5 => V::Bool(true),
                0xf6 => V::Null,
                // The JSON conversion writes every float as a double.
                0xfb => V::Float(f64::from_bits(arg)),
                _ => return None,
            },
            _ => return None,
        })
    }
}

/// Nesting depth of a text's arrays/objects, strings skipped.
fn depth(b: &[u8]) -> usize {
    let (mut d, mut max, mut i) = (0usize, 0, 0);
    while i < b.len() {
        match b[i] {
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'[' | b'{' => {
                d += 1;
                max = max.max(d);
            }
            b']' | b'}' => d = d.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    max
}

/// Fuzz check `cbor`: see the module docs.
pub fn cbor(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut out = Vec::new();
    let got = cbor::from_json(text, &mut out);
    let deep = depth(data) > rosgate_wire::MAX_JSON_DEPTH;
    if deep {
        // serde_json cannot read it (its recursion limit); only the grammar
        // of the shallow part could be compared. The conversion refuses it.
        assert!(got.is_err(), "accepted nesting past the limit: {text:?}");
        return;
    }
    let reference = serde_json::from_str::<V>(text);
    match (got, reference) {
        (Ok(()), Ok(want)) => {
            let mut r = Reader { b: &out, i: 0 };
            let back = r
                .value()
                .unwrap_or_else(|| panic!("unreadable CBOR {out:02x?} for {text:?}"));
            assert_eq!(r.i, out.len(), "trailing bytes after the item for {text:?}");
            assert!(
                same(&back, &want),
                "{text:?}: CBOR reads {back:?}, serde_json {want:?}"
            );
        }
        (Err(e), Err(_)) => {
            assert_ne!(e, JsonError::TooDeep, "TooDeep within the limit: {text:?}")
        }
        (Ok(()), Err(e)) => panic!("converted what serde_json refuses ({e}): {text:?}"),
        (Err(e), Ok(v)) => panic!("refused ({e:?}) what serde_json reads as {v:?}: {text:?}"),
    }
}

/// The model's view of one id in the reassembly table.
struct Model {
    total: u64,
    start: Instant,
    /// `None` once failed.
    pieces: Option<BTreeMap<u64, String>>,
}

const IDS: [&str; 4] = ["0", "\"a\"", "1", "{\"n\":[1]}"];
const PIECES: [&str; 4] = ["x", "é水", "", "🤖\"\\"];

/// Fuzz check `fragment`: see the module docs.
pub fn fragment(data: &[u8]) {
    let Some((&sel, ops)) = data.split_first() else {
        return;
    };
    let max_bytes = 64 + usize::from(sel) * 8;
    let timeout = Duration::from_millis(1000);
    let mut r = Reassembly::new(max_bytes, timeout);
    let mut model: BTreeMap<&str, Model> = BTreeMap::new();
    let t0 = Instant::now();
    let mut now = t0;
    for op in ops.chunks_exact(4) {
        let (kind, a, b, c) = (op[0], op[1], op[2], op[3]);
        if kind & 3 == 3 {
            now += Duration::from_millis(u64::from(a) * 20);
            let partial = model
                .values()
                .filter(|m| m.start + timeout <= now && m.pieces.is_some())
                .count();
            model.retain(|_, m| m.start + timeout > now);
            assert_eq!(r.expire(now), partial, "partial messages expired");
        } else {
            let id = IDS[usize::from(kind >> 2) & 3];
            let num = if a & 0x80 != 0 {
                u64::MAX - u64::from(a & 1)
            } else {
                u64::from(a & 7)
            };
            let total = if b & 0x80 != 0 {
                u64::MAX
            } else {
                u64::from(b & 7)
            };
            let piece = PIECES[usize::from(c) & 3].repeat(usize::from(c >> 2));
            let res = r.piece(id, &piece, num, total, now);
            let expected_err = match model.get(id) {
                None if model.len() >= MAX_FRAGMENTED_IN_FLIGHT => {
                    Some(FragmentError::TooManyInFlight)
                }
                Some(Model { pieces: None, .. }) => Some(FragmentError::Failed),
                Some(m) if total != 0 && total != m.total => Some(FragmentError::TotalChanged),
                _ if total == 0 => Some(FragmentError::ZeroTotal),
                _ if num >= total => Some(FragmentError::NumOutOfRange),
                Some(Model {
                    pieces: Some(p), ..
                }) if p.contains_key(&num) => Some(FragmentError::Duplicate),
                // Otherwise only the byte budget can refuse it.
                _ => None,
            };
            match res {
                Err(e) => {
                    if let Some(want) = expected_err {
                        assert_eq!(e, want, "piece {id} {num}/{total}");
                    } else {
                        assert_eq!(e, FragmentError::TooLarge, "piece {id} {num}/{total}");
                    }
                    if e != FragmentError::TooManyInFlight {
                        let m = model.entry(id).or_insert(Model {
                            total,
                            start: now,
                            pieces: None,
                        });
                        m.pieces = None;
                    }
                }
                Ok(done) => {
                    assert_eq!(expected_err, None, "accepted piece {id} {num}/{total}");
                    let m = model.entry(id).or_insert(Model {
                        total,
                        start: now,
                        pieces: Some(BTreeMap::new()),
                    });
                    let p = m.pieces.get_or_insert_with(BTreeMap::new);
                    p.insert(num, piece);
                    let complete = p.len() as u64 == total;
                    match done {
                        Some(text) => {
                            assert!(complete, "delivered {id} with {} of {total}", p.len());
                            assert!(p.keys().copied().eq(0..total));
                            let want: String = p.values().map(String::as_str).collect();
                            assert_eq!(text, want, "message {id}");
                            model.remove(id);
                        }
                        None => assert!(!complete, "{id} complete but not delivered"),
                    }
                }
            }
        }
        // Bounds, and the bytes held as the model counts them.
        assert!(
            r.held_bytes() <= max_bytes,
            "held {} > {max_bytes}",
            r.held_bytes()
        );
        assert!(r.len() <= MAX_FRAGMENTED_IN_FLIGHT);
        assert_eq!(r.len(), model.len());
        let held: usize = model
            .iter()
            .filter_map(|(id, m)| {
                let p = m.pieces.as_ref()?;
                Some(
                    MESSAGE_OVERHEAD
                        + id.len()
                        + p.values().map(|s| s.len() + PIECE_OVERHEAD).sum::<usize>(),
                )
            })
            .sum();
        assert_eq!(r.held_bytes(), held, "bytes held");
    }

    // Splitting: the input's text, cut at 256 characters or more, comes
    // back whole from its pieces in an order the input picks.
    let text = String::from_utf8_lossy(data);
    let max = 256 + usize::from(sel);
    if let Some(split) = fragment::split(&text, max) {
        let mut pieces: Vec<_> = split.collect();
        assert!(pieces.iter().all(|p| p.data.chars().count() <= max));
        let turn = usize::from(sel) % pieces.len();
        pieces.rotate_left(turn);
        let mut r = Reassembly::new(text.len() + 4096, timeout);
        let mut done = None;
        for p in &pieces {
            assert!(done.is_none(), "delivered before the last piece");
            done = r
                .piece("0", p.data, p.num, p.total, t0)
                .unwrap_or_else(|e| panic!("{e:?}"));
        }
        assert_eq!(done.as_deref(), Some(&*text));
        assert_eq!(r.held_bytes(), 0);
    } else {
        assert!(text.chars().count() <= max);
    }
}

/// The bundled types' full names, once.
fn typed_names() -> &'static (std::sync::Arc<Registry>, Vec<String>) {
    static NAMES: std::sync::OnceLock<(std::sync::Arc<Registry>, Vec<String>)> =
        std::sync::OnceLock::new();
    NAMES.get_or_init(|| {
        let reg = Registry::bundled_shared();
        let names = reg.msgs().map(|d| d.name.clone()).collect();
        (reg, names)
    })
}

/// One typed encoding of `msg` as `ty`: on success a strict reader reads
/// exactly one map whose keys are the type's fields in declaration order
/// (rosidl's filler left out) and typed arrays are tags 69-86 over byte
/// strings whose length is a multiple of the element size; on failure
/// nothing was written. Returns whether it was accepted.
fn typed_once(reg: &Registry, ty: &str, msg: &serde_json::Value) -> bool {
    let mut out = vec![0xAB];
    match cbor_typed::encode(reg, ty, msg, &mut out) {
        Ok(()) => {
            let mut r = TypedReader(Reader { b: &out, i: 1 });
            let v = r
                .value()
                .unwrap_or_else(|| panic!("unreadable typed CBOR for {ty} {msg}: {out:02x?}"));
            assert_eq!(r.0.i, out.len(), "trailing bytes after {ty} {msg}");
            let V::Map(fields) = &v else {
                panic!("{ty}: not a map: {v:?}")
            };
            let def = reg
                .msg(ty)
                .unwrap_or_else(|| panic!("accepted unknown type {ty}"));
            let want: Vec<&str> = def
                .fields
                .iter()
                .map(|f| f.name.as_str())
                .filter(|n| *n != EMPTY_STRUCT_MEMBER)
                .collect();
            let got: Vec<&str> = fields.iter().map(|(k, _)| k.as_str()).collect();
            assert_eq!(got, want, "{ty}: keys");
            check_tags(&v);
            true
        }
        Err(_) => {
            assert_eq!(out, [0xAB], "{ty}: output left behind on error for {msg}");
            false
        }
    }
}

/// Every tag is an RFC 8746 typed array tag the encoder uses, over a
/// byte string of whole elements.
fn check_tags(v: &V) {
    match v {
        V::Tagged(tag, inner) => {
            let size = match tag {
                72 => 1,
                69 | 77 => 2,
                70 | 78 | 85 => 4,
                71 | 79 | 86 => 8,
                t => panic!("unexpected tag {t}"),
            };
            let V::Bytes(b) = &**inner else {
                panic!("tag {tag} over {inner:?}")
            };
            assert_eq!(b.len() % size, 0, "tag {tag}: {} bytes", b.len());
        }
        V::Arr(items) => items.iter().for_each(check_tags),
        V::Map(m) => m.iter().for_each(|(_, x)| check_tags(x)),
        _ => {}
    }
}

/// Fuzz check `cbor_typed`: `rosgate_ros2::cbor_typed::encode` of the
/// bundled type the first two bytes choose: its default message (what
/// `cdr::default_json` makes) is always accepted, and the JSON text of the
/// rest, when it is JSON, never panics; see `typed_once` for what either
/// result must be.
pub fn cbor_typed(data: &[u8]) {
    let (reg, names) = typed_names();
    if names.is_empty() || data.len() < 2 {
        return;
    }
    let ty = &names[usize::from(u16::from_le_bytes([data[0], data[1]])) % names.len()];
    if let Ok(default) = cdr::default_json(&**reg, ty) {
        assert!(
            typed_once(reg, ty, &default),
            "{ty}: its default message refused"
        );
    }
    let Ok(text) = std::str::from_utf8(&data[2..]) else {
        return;
    };
    if let Ok(msg) = serde_json::from_str::<serde_json::Value>(text) {
        typed_once(reg, ty, &msg);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cbor_check_passes_on_samples_and_catches_a_mismatch() {
        for t in [
            r#"{"op":"publish","topic":"/t","msg":{"a":[1,-2,3.5,"x",null,true],"b":{}}}"#,
            r#"{"k":1,"k":2}"#,
            "18446744073709551616",
            "-18446744073709551617",
            "-0",
            "1e-320",
            "-0.00000000000000001162605469608035200",
            "[\"\\ud83e\\udd16\\u00e9\\n\"]",
            "[1,]",
            "\"\\ud800\"",
            "1e400",
            "",
        ] {
            cbor(t.as_bytes());
        }
        let a = V::Map(vec![("a".into(), V::Int(1)), ("b".into(), V::Int(2))]);
        let b = V::Map(vec![("b".into(), V::Int(2)), ("a".into(), V::Int(1))]);
        assert!(!same(&a, &b), "order matters");
        assert!(same(&V::Int(1 << 60), &V::Float((1u64 << 60) as f64)));
        assert!(!same(&V::Float(0.5), &V::Float(0.25)));
    }

    #[test]
    fn fragment_check_runs_a_schedule() {
        // Pieces of "0" (1/2, 0/2), a duplicate, a changed total, a clock
        // step past the deadline, then a long text to split.
        let mut d = vec![40u8];
        d.extend_from_slice(&[
            0, 1, 2, 4, 0, 0, 2, 5, 0, 0, 2, 5, 4, 0, 2, 0, 4, 0, 3, 0, 3, 60, 0, 0,
        ]);
        d.extend(std::iter::repeat_n(b'z', 3000));
        fragment(&d);
    }

    /// A few thousand generated inputs, so that the checks run on more than
    /// the corpus without a fuzzer: JSON-like texts from a token alphabet,
    /// and random piece schedules.
    #[test]
    fn generated_inputs_hold() {
        const TOKENS: [&str; 24] = [
            "{",
            "}",
            "[",
            "]",
            ",",
            ":",
            "\"k\"",
            "\"\\u00e9\"",
            "\"\\ud83e\\udd16\"",
            "0",
            "-0",
            "1.5e3",
            "18446744073709551615",
            "-18446744073709551616",
            "1e400",
            "99999999999999999999",
            "true",
            "null",
            " ",
            "\"\\\"\"",
            "\"\\ud800\"",
            "-",
            "\"é\"",
            "0.1",
        ];
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..3000 {
            let n = (next() % 24) as usize;
            let text: String = (0..n).map(|_| TOKENS[(next() % 24) as usize]).collect();
            cbor(text.as_bytes());
            // Balanced ones are more often valid.
            cbor(format!("{{\"a\":[{text}]}}").as_bytes());
        }
        for _ in 0..300 {
            let n = (next() % 400) as usize;
            let d: Vec<u8> = (0..n).map(|_| next() as u8).collect();
            fragment(&d);
        }
    }
}

#[cfg(test)]
mod typed_tests {
    #[test]
    fn every_bundled_types_default_message_encodes_typed() {
        let (_, names) = super::typed_names();
        for i in 0..names.len() {
            let sel = (i as u16).to_le_bytes();
            super::cbor_typed(&[sel[0], sel[1], b'{', b'}']);
        }
    }
}
