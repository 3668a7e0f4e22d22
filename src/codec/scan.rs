//! A validating, allocation-free JSON scanner for one request line: it checks
//! that the text is exactly one JSON value and, when that value is an object,
//! reports each top-level member as a borrowed key and value span.
//!
//! Why it exists: the decoder only needs the top-level member spans, yet with
//! serde_json every payload byte goes through its generic skipping code
//! (`ignore_str`, `ignore_value`, ...) at ~25-30 instructions per byte. This
//! scanner accepts exactly the same texts (checked against serde_json by the
//! differential test below and by the `scan` fuzz target) with less work:
//! string bodies are scanned 32 and 8 bytes at a time (~1 instruction per
//! byte), digits 8 at a time, arrays of numbers in their own loop, and
//! nesting is iterative. Per token it still costs some 50-100 instructions,
//! so short, token-dense lines gain least (callgrind, vs serde_json with
//! `&RawValue` members: 16 vs 23 instructions per byte on a 100-byte publish
//! line, 11 vs 19 on a numeric array, 1.0 vs 2.4 on a long string).
//!
//! Invariants:
//! - acceptance is serde_json's, exactly: `scan_object(t, usize::MAX, _)`
//!   is `Ok` iff `serde_json::from_str::<&RawValue>(t)` accepts an object,
//!   `NotObject` iff it accepts any other value, `Syntax` iff it rejects.
//!   Like serde_json when it skips a value, `\uXXXX` escapes are checked for
//!   four hex digits but not decoded, so lone surrogates (`"\ud800"`) pass;
//! - never panics and never recurses, whatever the input;
//! - allocates nothing unless the nesting is deeper than 256 levels (the
//!   container kinds of deeper levels go to a bit vector on the heap, so that
//!   validation and member reporting go on past `max_depth`);
//! - member spans borrow from `text`: keys without their quotes and with
//!   escapes left as written, values exactly as written (no surrounding
//!   whitespace), in document order, duplicates included.
//!
//! Errors rank `Syntax` > `NotObject` > `TooDeep`: a too-deep object is still
//! validated to the end and all its members are reported before `TooDeep` is
//! returned, so a caller can still read e.g. the request's `id`. Members are
//! reported as they are found, so on `Syntax` the caller has already seen the
//! members before the error and must discard them.

/// One top-level member of an object: the key's raw contents between its
/// quotes (escapes NOT decoded) and the exact span of its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Member<'a> {
    pub key: &'a str,
    /// True when `key` contains a backslash escape.
    pub key_escaped: bool,
    pub value: &'a str,
}

/// Why a text was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScanError {
    /// Not exactly one valid JSON value.
    Syntax,
    /// Valid JSON, but not an object.
    NotObject,
    /// A valid object nesting arrays/objects deeper than `max_depth`.
    TooDeep,
}

/// Validates that `text` is exactly one JSON value (leading/trailing JSON
/// whitespace allowed) and, if it is an object, reports each top-level member
/// in order. Returns NotObject for any other valid value (array, string,
/// number, true/false/null), Syntax for invalid JSON, TooDeep when arrays/
/// objects nest deeper than `max_depth` (the outer object is depth 1; with
/// max_depth = 128, `{"a":` + 127 `[` is fine and 128 `[` is TooDeep).
///
/// See the module docs for the ranking of errors and what has been reported
/// when one is returned.
pub fn scan_object<'a>(
    text: &'a str,
    max_depth: usize,
    mut member: impl FnMut(Member<'a>),
) -> Result<(), ScanError> {
    use ScanError::Syntax;

    let b = text.as_bytes();
    let is_object = b.get(skip_ws(b, 0)) == Some(&b'{');
    let mut i = 0;
    let mut kinds = Kinds::new();
    // Open containers; the innermost one is an object iff `in_obj`.
    let mut depth = 0usize;
    let mut deepest = 0usize;
    let mut in_obj = false;
    // The top-level member being read (meaningful while `depth == 1`).
    let mut key = Key::default();
    let mut value_start = 0usize;

    'value: loop {
        // `i` is where a value is expected, possibly after whitespace.
        let c = *b.get(i).ok_or(Syntax)?;
        match c {
            b'"' => i = string(b, i + 1)?.0,
            b'-' | b'0'..=b'9' => {
                i = number(b, i)?;
                // Arrays of numbers (common in messages) stay in this loop.
                if !in_obj && depth > 0 {
                    while b.get(i) == Some(&b',') {
                        match b.get(i + 1) {
                            Some(b'-' | b'0'..=b'9') => i = number(b, i + 1)?,
                            _ => break,
                        }
                    }
                }
            }
            b'{' => {
                kinds.set(depth, true);
                depth += 1;
                deepest = deepest.max(depth);
                in_obj = true;
                i = skip_ws(b, i + 1);
                if b.get(i) != Some(&b'}') {
                    let (k, next) = member_key(b, i)?;
                    if depth == 1 {
                        (key, value_start) = (k, next);
                    }
                    i = next;
                    continue 'value;
                }
                i += 1;
                depth -= 1;
                in_obj = depth > 0 && kinds.get(depth - 1);
            }
            b'[' => {
                kinds.set(depth, false);
                depth += 1;
                deepest = deepest.max(depth);
                in_obj = false;
                i = skip_ws(b, i + 1);
                if b.get(i) != Some(&b']') {
                    continue 'value;
                }
                i += 1;
                depth -= 1;
                in_obj = depth > 0 && kinds.get(depth - 1);
            }
            b't' => i = literal(b, i, b"true")?,
            b'f' => i = literal(b, i, b"false")?,
            b'n' => i = literal(b, i, b"null")?,
            b' ' | b'\t' | b'\n' | b'\r' => {
                i += 1;
                continue 'value;
            }
            _ => return Err(Syntax),
        }
        // A value ends at `i`: go on to the next element, or close
        // containers, reporting top-level members as they end.
        loop {
            let end = i;
            let mut c = b.get(i).copied();
            if let Some(b' ' | b'\t' | b'\n' | b'\r') = c {
                i = skip_ws(b, i + 1);
                c = b.get(i).copied();
            }
            match c {
                Some(b',') if depth > 0 => {
                    i += 1;
                    if in_obj {
                        if depth == 1 {
                            member(key.member(text, value_start, end)?);
                        }
                        let (k, next) = member_key(b, skip_ws(b, i))?;
                        if depth == 1 {
                            (key, value_start) = (k, next);
                        }
                        i = next;
                    }
                    continue 'value;
                }
                Some(b']') if depth > 0 && !in_obj => {}
                Some(b'}') if depth > 0 && in_obj => {
                    if depth == 1 {
                        member(key.member(text, value_start, end)?);
                    }
                }
                None if depth == 0 => {
                    return if !is_object {
                        Err(ScanError::NotObject)
                    } else if deepest > max_depth {
                        Err(ScanError::TooDeep)
                    } else {
                        Ok(())
                    };
                }
                _ => return Err(Syntax),
            }
            i += 1;
            depth -= 1;
            in_obj = depth > 0 && kinds.get(depth - 1);
        }
    }
}

/// Where a member's key lies in the text.
#[derive(Default, Clone, Copy)]
struct Key {
    start: usize,
    end: usize,
    escaped: bool,
}

impl Key {
    /// The member with this key and the value at `start..end`.
    #[inline(always)]
    fn member(self, text: &str, start: usize, end: usize) -> Result<Member<'_>, ScanError> {
        // Every bound is next to an ASCII byte, so `get` never fails.
        Ok(Member {
            key: text.get(self.start..self.end).ok_or(ScanError::Syntax)?,
            key_escaped: self.escaped,
            value: text.get(start..end).ok_or(ScanError::Syntax)?,
        })
    }
}

/// Reads `"key" :` at `i`; returns the key and the index of the value
/// (the first byte after the colon that is not whitespace).
#[inline(always)]
fn member_key(b: &[u8], i: usize) -> Result<(Key, usize), ScanError> {
    if b.get(i) != Some(&b'"') {
        return Err(ScanError::Syntax);
    }
    let (after, escaped) = string(b, i + 1)?;
    let key = Key {
        start: i + 1,
        end: after - 1,
        escaped,
    };
    let colon = match b.get(after) {
        Some(b':') => after,
        _ => skip_ws(b, after),
    };
    if b.get(colon) != Some(&b':') {
        return Err(ScanError::Syntax);
    }
    Ok((key, skip_ws(b, colon + 1)))
}

/// Skips JSON whitespace (space, tab, LF, CR only) from `i`.
#[inline(always)]
fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while let Some(b' ' | b'\t' | b'\n' | b'\r') = b.get(i) {
        i += 1;
    }
    i
}

/// Reads `word` (`true`, `false` or `null`) at `i`; returns the index after it.
#[inline(always)]
fn literal(b: &[u8], i: usize, word: &[u8]) -> Result<usize, ScanError> {
    if b.get(i..i + word.len()) != Some(word) {
        return Err(ScanError::Syntax);
    }
    Ok(i + word.len())
}

/// Reads a number at `i` (its first byte is `-` or a digit); returns the
/// index after it. RFC 8259: `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`.
#[inline(always)]
fn number(b: &[u8], i: usize) -> Result<usize, ScanError> {
    let int = i + usize::from(b.get(i) == Some(&b'-'));
    let end = digits(b, int);
    // At least one digit, and no leading zero unless it is the only one.
    match end - int {
        0 => return Err(ScanError::Syntax),
        1 => {}
        _ if b.get(int) == Some(&b'0') => return Err(ScanError::Syntax),
        _ => {}
    }
    match b.get(end) {
        Some(b'.' | b'e' | b'E') => fraction_exponent(b, end),
        _ => Ok(end),
    }
}

/// The rest of a number from `i`, at its `.`, `e` or `E`.
#[inline(never)]
fn fraction_exponent(b: &[u8], mut i: usize) -> Result<usize, ScanError> {
    if b.get(i) == Some(&b'.') {
        let frac = i + 1;
        i = digits(b, frac);
        if i == frac {
            return Err(ScanError::Syntax);
        }
    }
    if let Some(b'e' | b'E') = b.get(i) {
        i += 1;
        if let Some(b'+' | b'-') = b.get(i) {
            i += 1;
        }
        let exp = i;
        i = digits(b, exp);
        if i == exp {
            return Err(ScanError::Syntax);
        }
    }
    Ok(i)
}

/// Index of the first non-digit at or after `i`, or `b.len()`.
#[inline(always)]
fn digits(b: &[u8], mut i: usize) -> usize {
    while let Some(w) = word_at(b, i) {
        let m = non_digit_mask(w);
        if m != 0 {
            return i + (m.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while let Some(b'0'..=b'9') = b.get(i) {
        i += 1;
    }
    i
}

/// Reads a string body from `i` (just after the opening quote); returns the
/// index after the closing quote and whether the body has an escape.
#[inline(always)]
fn string(b: &[u8], mut i: usize) -> Result<(usize, bool), ScanError> {
    let mut escaped = false;
    loop {
        i = find_special(b, i);
        match b.get(i) {
            Some(b'"') => return Ok((i + 1, escaped)),
            Some(b'\\') => {
                escaped = true;
                i = escape(b, i + 1)?;
            }
            // A control character or the end of the text.
            _ => return Err(ScanError::Syntax),
        }
    }
}

/// Checks the escape whose `\` is just before `i`; returns the index after
/// it. `\uXXXX` needs four hex digits and is not decoded (serde_json does not
/// decode when skipping, so lone surrogates are accepted).
#[cold]
fn escape(b: &[u8], i: usize) -> Result<usize, ScanError> {
    match b.get(i) {
        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => Ok(i + 1),
        Some(b'u') => match b.get(i + 1..i + 5) {
            Some(hex) if hex.iter().all(u8::is_ascii_hexdigit) => Ok(i + 5),
            _ => Err(ScanError::Syntax),
        },
        _ => Err(ScanError::Syntax),
    }
}

// Word-at-a-time (SWAR) byte classes. Each mask is non-zero iff some byte of
// the little-endian word is in the class, and its lowest set bit lies in the
// first such byte: borrows and carries only run upwards from a byte that is
// in the class, so bytes below it are never flagged.

const LO: u64 = 0x0101_0101_0101_0101;
const HI: u64 = 0x8080_8080_8080_8080;

#[inline(always)]
fn word_at(b: &[u8], i: usize) -> Option<u64> {
    let w = b.get(i..)?.first_chunk::<8>()?;
    Some(u64::from_le_bytes(*w))
}

/// Bytes that end a run of string body: `"`, `\` and controls (< 0x20).
/// For an ASCII byte `x`, the high bit of `x ^ '"' - 1`, `x ^ '\\' - 1` or
/// `x - 0x20` is set iff it matches; non-ASCII bytes are masked by `!w`
/// (xor with an ASCII byte keeps the high bit).
#[inline(always)]
fn special_mask(w: u64) -> u64 {
    let quote = w ^ (LO * u64::from(b'"'));
    let backslash = w ^ (LO * u64::from(b'\\'));
    (quote.wrapping_sub(LO) | backslash.wrapping_sub(LO) | w.wrapping_sub(LO * 0x20)) & !w & HI
}

/// Bytes that are not ASCII digits: a digit has high nibble 3, and keeps it
/// when 6 is added (low nibble at most 9). Flags whole bytes, not high bits.
#[inline(always)]
fn non_digit_mask(w: u64) -> u64 {
    const NIBBLE: u64 = 0xf0f0_f0f0_f0f0_f0f0;
    const THREE: u64 = 0x3030_3030_3030_3030;
    ((w & NIBBLE) ^ THREE) | ((w.wrapping_add(LO * 6) & NIBBLE) ^ THREE)
}

#[inline(always)]
fn is_special(c: u8) -> bool {
    (c == b'"') | (c == b'\\') | (c < 0x20)
}

/// Whether a block holds a special byte; written as a map then an OR so that
/// LLVM vectorizes it with the baseline SIMD of the target (SSE2 on x86-64).
#[inline(always)]
fn block_has_special(block: &[u8; 32]) -> bool {
    let mut flags = [0u8; 32];
    for (f, &c) in flags.iter_mut().zip(block) {
        *f = u8::from(is_special(c));
    }
    flags.iter().fold(0, |acc, &f| acc | f) != 0
}

/// Index of the first `"`, `\` or control byte at or after `i`, or `b.len()`.
#[inline(always)]
fn find_special(b: &[u8], mut i: usize) -> usize {
    if let Some(w) = word_at(b, i) {
        let m = special_mask(w);
        if m != 0 {
            return i + (m.trailing_zeros() / 8) as usize;
        }
        i += 8;
        // A long string: skip clean 32-byte blocks, then locate by words.
        while let Some(block) = b.get(i..).and_then(|rest| rest.first_chunk::<32>()) {
            if block_has_special(block) {
                break;
            }
            i += 32;
        }
        while let Some(w) = word_at(b, i) {
            let m = special_mask(w);
            if m != 0 {
                return i + (m.trailing_zeros() / 8) as usize;
            }
            i += 8;
        }
    }
    while let Some(&c) = b.get(i) {
        if is_special(c) {
            return i;
        }
        i += 1;
    }
    b.len()
}

/// The kinds (object or array) of the open containers, one bit per level:
/// inline for the first 256 levels, then on the heap.
struct Kinds {
    inline: [u64; 4],
    spill: Vec<u64>,
}

impl Kinds {
    const INLINE: usize = 256;

    fn new() -> Self {
        Kinds {
            inline: [0; 4],
            spill: Vec::new(),
        }
    }

    #[inline(always)]
    fn set(&mut self, level: usize, obj: bool) {
        let bit = 1u64 << (level % 64);
        let word = if level < Self::INLINE {
            match self.inline.get_mut(level / 64) {
                Some(w) => w,
                None => return,
            }
        } else {
            let at = (level - Self::INLINE) / 64;
            if at >= self.spill.len() {
                self.spill.resize(at + 1, 0);
            }
            match self.spill.get_mut(at) {
                Some(w) => w,
                None => return,
            }
        };
        if obj {
            *word |= bit;
        } else {
            *word &= !bit;
        }
    }

    #[inline(always)]
    fn get(&self, level: usize) -> bool {
        let word = if level < Self::INLINE {
            self.inline.get(level / 64)
        } else {
            self.spill.get((level - Self::INLINE) / 64)
        };
        word.is_some_and(|w| w & (1 << (level % 64)) != 0)
    }
}

/// The check behind the `scan` fuzz target and the differential test:
/// parity with serde_json. Panics on a violation.
#[doc(hidden)]
pub mod fuzzing {
    use std::fmt;

    use serde::de::{Deserializer, MapAccess, Visitor};
    use serde::Deserialize;
    use serde_json::value::RawValue;

    use super::{scan_object, Member, ScanError};

    /// Fuzz entry point: checks `data` if it is UTF-8.
    pub fn scan(data: &[u8]) {
        if let Ok(text) = std::str::from_utf8(data) {
            check(text);
        }
    }

    /// Checks `scan_object(text, ..)` against serde_json: the verdict, every
    /// member span, and the depth limit on both sides of the text's depth.
    pub fn check(text: &str) {
        let mut got = Vec::new();
        let verdict = scan_object(text, usize::MAX, |m| got.push(m));
        let expected = match serde_json::from_str::<&RawValue>(text) {
            Err(_) => Err(ScanError::Syntax),
            Ok(raw) if raw.get().starts_with('{') => Ok(()),
            Ok(_) => Err(ScanError::NotObject),
        };
        assert_eq!(verdict, expected, "verdict for {text:?}");
        if verdict.is_err() {
            if verdict == Err(ScanError::NotObject) {
                assert!(got.is_empty(), "members of a non-object {text:?}");
            }
            return;
        }
        let members = match serde_json::from_str::<Members<'_>>(text) {
            Ok(m) => m.0,
            Err(e) => panic!("serde_json refused the object {text:?}: {e}"),
        };
        assert_eq!(got.len(), members.len(), "member count in {text:?}");
        for (m, (key, value)) in got.iter().zip(&members) {
            check_member(text, m, key.get(), value.get());
        }
        let depth = reference_depth(text.as_bytes());
        for max in [depth.saturating_sub(1), depth] {
            let mut again = 0usize;
            let verdict = scan_object(text, max, |_| again += 1);
            let expected = if depth > max {
                Err(ScanError::TooDeep)
            } else {
                Ok(())
            };
            assert_eq!(verdict, expected, "depth {depth}, max {max}, {text:?}");
            assert_eq!(again, got.len(), "members with max {max} in {text:?}");
        }
    }

    fn check_member(text: &str, m: &Member<'_>, raw_key: &str, raw_value: &str) {
        // Same spans: keys without their quotes, values exactly.
        let inner = raw_key
            .strip_prefix('"')
            .and_then(|k| k.strip_suffix('"'))
            .unwrap_or_else(|| panic!("raw key {raw_key:?}"));
        assert_eq!(m.key.as_ptr(), inner.as_ptr(), "key start in {text:?}");
        assert_eq!(m.key, inner, "key in {text:?}");
        assert_eq!(
            m.value.as_ptr(),
            raw_value.as_ptr(),
            "value start in {text:?}"
        );
        assert_eq!(m.value, raw_value, "value in {text:?}");
        assert_eq!(
            m.key_escaped,
            m.key.contains('\\'),
            "key_escaped in {text:?}"
        );
        // Decoded keys agree whenever serde_json can decode them (it cannot
        // when the key holds a lone surrogate escape).
        let ours = serde_json::from_str::<String>(&format!("\"{}\"", m.key));
        let theirs = serde_json::from_str::<String>(raw_key);
        match (ours, theirs) {
            (Ok(a), Ok(b)) => assert_eq!(a, b, "decoded key in {text:?}"),
            (Err(_), Err(_)) => {}
            (a, b) => panic!("key decoding differs in {text:?}: {a:?} vs {b:?}"),
        }
    }

    /// Nesting depth of valid JSON, counted bracket by bracket.
    fn reference_depth(json: &[u8]) -> usize {
        let (mut depth, mut deepest) = (0usize, 0usize);
        let (mut in_str, mut escaped) = (false, false);
        for &c in json {
            if in_str {
                if escaped {
                    escaped = false;
                } else if c == b'\\' {
                    escaped = true;
                } else if c == b'"' {
                    in_str = false;
                }
                continue;
            }
            match c {
                b'"' => in_str = true,
                b'[' | b'{' => {
                    depth += 1;
                    deepest = deepest.max(depth);
                }
                b']' | b'}' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
        deepest
    }

    /// Top-level members as serde_json sees them: raw key and value spans.
    struct Members<'a>(Vec<(&'a RawValue, &'a RawValue)>);

    impl<'de> Deserialize<'de> for Members<'de> {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            d.deserialize_map(MembersVisitor)
        }
    }

    struct MembersVisitor;

    impl<'de> Visitor<'de> for MembersVisitor {
        type Value = Members<'de>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a JSON object")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members<'de>, A::Error> {
            let mut out = Vec::new();
            while let Some(entry) = map.next_entry::<&'de RawValue, &'de RawValue>()? {
                out.push(entry);
            }
            Ok(Members(out))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fuzzing::check;
    use super::*;

    fn members(text: &str) -> Result<Vec<(&str, bool, &str)>, ScanError> {
        let mut out = Vec::new();
        scan_object(text, usize::MAX, |m| {
            out.push((m.key, m.key_escaped, m.value))
        })?;
        Ok(out)
    }

    fn verdict(text: &str) -> Result<(), ScanError> {
        check(text);
        scan_object(text, usize::MAX, |_| {})
    }

    const OK: Result<(), ScanError> = Ok(());
    const SYNTAX: Result<(), ScanError> = Err(ScanError::Syntax);
    const NOT_OBJECT: Result<(), ScanError> = Err(ScanError::NotObject);

    #[test]
    fn publish_line_members() {
        let line =
            r#"{"op":"publish","topic":"/bench/0","msg":{"p":0,"s":123,"t":1733,"d":"xxxx"}}"#;
        check(line);
        assert_eq!(
            members(line),
            Ok(vec![
                ("op", false, r#""publish""#),
                ("topic", false, r#""/bench/0""#),
                ("msg", false, r#"{"p":0,"s":123,"t":1733,"d":"xxxx"}"#),
            ])
        );
    }

    #[test]
    fn spans_exclude_whitespace_and_keep_escapes() {
        let line = " \t{ \"a\\u0062\" :\r\n [ 1 , {} ] ,\"\\\"\":\"x\\ny\" , \"a\":null\n} \r\n";
        check(line);
        assert_eq!(
            members(line),
            Ok(vec![
                ("a\\u0062", true, "[ 1 , {} ]"),
                ("\\\"", true, "\"x\\ny\""),
                ("a", false, "null"),
            ])
        );
        assert_eq!(members("{}"), Ok(vec![]));
        assert_eq!(members("{\"\":\"\"}"), Ok(vec![("", false, "\"\"")]));
    }

    #[test]
    fn non_objects() {
        for text in [
            "[]", "[1,2]", "\"s\"", "0", "-0", "1e5", "true", "false", "null", " [ ] ",
        ] {
            assert_eq!(verdict(text), NOT_OBJECT, "{text}");
            assert_eq!(members(text), Err(ScanError::NotObject), "{text}");
        }
    }

    #[test]
    fn numbers() {
        for n in [
            "0",
            "-0",
            "1",
            "-1",
            "10",
            "0.5",
            "-0.0",
            "1e5",
            "1E5",
            "1e+5",
            "1e-5",
            "1.5e10",
            "0e0",
            "12345678901234567890123456789012345678901234567890",
        ] {
            assert_eq!(verdict(&format!("{{\"n\":{n}}}")), OK, "{n}");
            assert_eq!(verdict(&format!("[{n}]")), NOT_OBJECT, "{n}");
        }
        for n in [
            "01", "-01", "00", "+1", ".5", "1.", "-", "-a", "1e", "1e+", "1E-", "1.e5", "1.5.3",
            "0x10", "1e5.0", "- 1", "--1", "Infinity", "NaN", "1 2",
        ] {
            assert_eq!(verdict(&format!("{{\"n\":{n}}}")), SYNTAX, "{n}");
            assert_eq!(verdict(n), SYNTAX, "{n}");
        }
    }

    #[test]
    fn strings() {
        for s in [
            r#""""#,
            r#""\"\\\/\b\f\n\r\t""#,
            r#""\u00e9\uABCD\uabcd""#,
            "\"\u{7f}\"",
            "\"é€😀\"",
            // Not decoded when skipped, as in serde_json: lone surrogates pass.
            r#""\ud800""#,
            r#""\udc00\ud800x""#,
        ] {
            assert_eq!(verdict(s), NOT_OBJECT, "{s}");
            assert_eq!(verdict(&format!("{{{s}:{s}}}")), OK, "{s}");
        }
        for s in [
            "\"",
            "\"abc",
            "\"\\\"",
            "\"\\x\"",
            "\"\\u12\"",
            "\"\\u12g4\"",
            "\"\\U0041\"",
            "\"\u{0}\"",
            "\"\u{1f}\"",
            "\"a\nb\"",
            "\"\t\"",
            "'a'",
        ] {
            assert_eq!(verdict(s), SYNTAX, "{s:?}");
            assert_eq!(verdict(&format!("{{\"k\":{s}}}")), SYNTAX, "{s:?}");
            assert_eq!(verdict(&format!("{{{s}:1}}")), SYNTAX, "{s:?}");
        }
        // Long strings go through the block and word loops; put the special
        // byte at every offset.
        for len in 0..100 {
            let body = "x".repeat(len);
            assert_eq!(verdict(&format!("{{\"k\":\"{body}\"}}")), OK);
            assert_eq!(verdict(&format!("{{\"k\":\"{body}\\n{body}\"}}")), OK);
            assert_eq!(verdict(&format!("{{\"k\":\"{body}\u{1}{body}\"}}")), SYNTAX);
            assert_eq!(verdict(&format!("{{\"k\":\"{body}")), SYNTAX);
            assert_eq!(verdict(&format!("{{\"k\":\"{body}é\"}}")), OK);
        }
    }

    #[test]
    fn literals_and_whitespace() {
        for t in ["true", "false", "null", " \t\r\nnull\n\r\t "] {
            assert_eq!(verdict(t), NOT_OBJECT, "{t:?}");
        }
        for t in [
            "tru",
            "nul",
            "fals",
            "True",
            "nulll",
            "truefalse",
            "",
            " ",
            "\u{c}{}",
            "{}\u{c}",
            "\u{a0}{}",
            "{}\u{a0}",
            "{}{}",
            "{} x",
            "\u{feff}{}",
        ] {
            assert_eq!(verdict(t), SYNTAX, "{t:?}");
        }
        assert_eq!(
            verdict(" \n\t\r{ \n\"a\" \t: \r1 \n, \"b\"\n:\n[ ] }\r\n "),
            OK
        );
    }

    #[test]
    fn structure() {
        for t in [
            "{\"a\":1,\"a\":2}",
            "{\"a\":{}}",
            "{\"a\":[]}",
            "{\"a\":[[],[{}],{\"b\":[1,\"]\"]}]}",
        ] {
            assert_eq!(verdict(t), OK, "{t}");
        }
        for t in [
            "{",
            "}",
            "[",
            "]",
            "{\"a\"}",
            "{\"a\":}",
            "{\"a\" 1}",
            "{\"a\":1,}",
            "{,}",
            "{1:2}",
            "{a:1}",
            "{\"a\":1 \"b\":2}",
            "[1,]",
            "[,1]",
            "[1 2]",
            "{\"a\":[1}",
            "{\"a\":{]}",
            "[}",
            "{]",
            "{\"a\":1}}",
            "[[]",
            "{\"a\":1]",
        ] {
            assert_eq!(verdict(t), SYNTAX, "{t}");
        }
    }

    fn nested(n: usize) -> String {
        format!("{{\"a\":{}{},\"id\":7}}", "[".repeat(n), "]".repeat(n))
    }

    #[test]
    fn depth_boundary() {
        let count = |text: &str, max| {
            let mut ids = 0;
            let r = scan_object(text, max, |m| ids += usize::from(m.key == "id"));
            (r, ids)
        };
        assert_eq!(count(&nested(127), 128), (Ok(()), 1));
        // Too deep, but still validated to the end with every member reported.
        assert_eq!(count(&nested(128), 128), (Err(ScanError::TooDeep), 1));
        assert_eq!(count("{}", 1), (Ok(()), 0));
        assert_eq!(count("{}", 0), (Err(ScanError::TooDeep), 0));
        // Syntax and NotObject rank above TooDeep.
        let bad = format!("{{\"a\":{}{}}}", "[".repeat(200), "]".repeat(199));
        assert_eq!(count(&bad, 128).0, Err(ScanError::Syntax));
        let array = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert_eq!(count(&array, 128).0, Err(ScanError::NotObject));
        // Deep nesting beyond the inline levels, with mixed kinds.
        for n in [255, 256, 257, 300, 100_000] {
            let mixed = format!(
                "{{\"a\":{}1{},\"id\":7}}",
                "[{\"k\":".repeat(n),
                "}]".repeat(n)
            );
            assert_eq!(count(&mixed, usize::MAX), (Ok(()), 1), "{n}");
            assert_eq!(count(&mixed, 2 * n + 1), (Ok(()), 1), "{n}");
            assert_eq!(count(&mixed, 2 * n), (Err(ScanError::TooDeep), 1), "{n}");
            let wrong = format!("{{\"a\":{}1{}]}}", "[{\"k\":".repeat(n), "}]".repeat(n - 1));
            assert_eq!(count(&wrong, usize::MAX).0, Err(ScanError::Syntax), "{n}");
            check(&nested(n));
            check(&mixed);
        }
        // serde_json's recursion limit does not apply to skipped values.
        assert!(serde_json::from_str::<&serde_json::value::RawValue>(&nested(100_000)).is_ok());
    }

    /// splitmix64: deterministic and dependency-free.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }

        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }

        fn chance(&mut self, percent: usize) -> bool {
            self.below(100) < percent
        }

        fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
            items[self.below(items.len())]
        }
    }

    const WS: &[&str] = &["", "", "", " ", "\t", "\n", "\r", "  ", " \r\n\t "];

    fn ws(rng: &mut Rng, out: &mut String) {
        if rng.chance(30) {
            out.push_str(rng.pick(WS));
        }
    }

    fn digits(rng: &mut Rng, out: &mut String, first_nonzero: bool) {
        let n = if rng.chance(5) {
            20 + rng.below(40)
        } else {
            1 + rng.below(4)
        };
        for k in 0..n {
            let lo = if k == 0 && first_nonzero { 1 } else { 0 };
            out.push(char::from(b'0' + (lo + rng.below(10 - lo as usize) as u8)));
        }
    }

    fn number(rng: &mut Rng, out: &mut String) {
        if rng.chance(20) {
            out.push('-');
        }
        if rng.chance(25) {
            out.push('0');
        } else {
            digits(rng, out, true);
        }
        if rng.chance(25) {
            out.push('.');
            digits(rng, out, false);
        }
        if rng.chance(20) {
            out.push_str(rng.pick(&["e", "E"]));
            out.push_str(rng.pick(&["", "+", "-"]));
            digits(rng, out, false);
        }
    }

    const PIECES: &[&str] = &[
        "a",
        "b",
        "op",
        "msg",
        "xyz",
        " ",
        "/",
        "é",
        "€",
        "😀",
        "\u{7f}",
        "[",
        "{",
        ":",
        ",",
        "\\\"",
        "\\\\",
        "\\/",
        "\\b",
        "\\f",
        "\\n",
        "\\r",
        "\\t",
        "\\u0041",
        "\\u00e9",
        "\\uD83D\\uDE00",
        "\\ud800",
        "\\uDFFF",
        "\\uabcd",
    ];

    fn string(rng: &mut Rng, out: &mut String) {
        out.push('"');
        if rng.chance(5) {
            // Long enough for the block loop.
            for _ in 0..rng.below(200) {
                out.push(char::from(b'A' + rng.below(26) as u8));
            }
        }
        for _ in 0..rng.below(6) {
            out.push_str(rng.pick(PIECES));
        }
        out.push('"');
    }

    fn value(rng: &mut Rng, out: &mut String, depth: usize) {
        let kind = if depth > 5 {
            2 + rng.below(5)
        } else {
            rng.below(7)
        };
        match kind {
            0 => object(rng, out, depth + 1),
            1 => {
                out.push('[');
                ws(rng, out);
                for k in 0..rng.below(5) {
                    if k > 0 {
                        out.push(',');
                        ws(rng, out);
                    }
                    value(rng, out, depth + 1);
                    ws(rng, out);
                }
                out.push(']');
            }
            2 | 3 => string(rng, out),
            4 | 5 => number(rng, out),
            _ => out.push_str(rng.pick(&["true", "false", "null"])),
        }
    }

    fn object(rng: &mut Rng, out: &mut String, depth: usize) {
        out.push('{');
        ws(rng, out);
        for k in 0..rng.below(5) {
            if k > 0 {
                out.push(',');
                ws(rng, out);
            }
            string(rng, out);
            ws(rng, out);
            out.push(':');
            ws(rng, out);
            value(rng, out, depth);
            ws(rng, out);
        }
        out.push('}');
    }

    const INSERTS: &[&str] = &[
        "{", "}", "[", "]", "\"", ":", ",", "\\", "0", "1", "9", "-", "+", ".", "e", "E", "t", "f",
        "n", "u", "a", "x", "\u{0}", "\u{1f}", "\u{7f}", "é", " ", "\t", "\n", "\r", "\u{c}",
        "\u{a0}", "true", "null", "\\u", "\\ud800", "01", "1.", "1e", "/",
    ];

    /// Breaks `text` in one to three places, keeping it valid UTF-8.
    fn mutate(rng: &mut Rng, text: &mut String) {
        for _ in 0..1 + rng.below(3) {
            let mut at = rng.below(text.len() + 1);
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            match rng.below(5) {
                0 => text.truncate(at),
                1 => text.insert_str(at, rng.pick(INSERTS)),
                2 | 3 => {
                    if let Some(c) = text[at..].chars().next() {
                        text.replace_range(at..at + c.len_utf8(), "");
                        if rng.chance(70) {
                            text.insert_str(at, rng.pick(INSERTS));
                        }
                    }
                }
                _ => {
                    let mut end = (at + rng.below(8)).min(text.len());
                    while !text.is_char_boundary(end) {
                        end -= 1;
                    }
                    let copy = text[at..end].to_string();
                    text.insert_str(at, &copy);
                }
            }
        }
    }

    #[test]
    fn differential_against_serde_json() {
        let mut rng = Rng(0x5eed_da7a);
        let (mut ok, mut not_object, mut syntax) = (0usize, 0usize, 0usize);
        let mut text = String::new();
        for _ in 0..200_000 {
            text.clear();
            ws(&mut rng, &mut text);
            if rng.chance(75) {
                object(&mut rng, &mut text, 1);
            } else {
                value(&mut rng, &mut text, 1);
            }
            ws(&mut rng, &mut text);
            if rng.chance(50) {
                mutate(&mut rng, &mut text);
            }
            check(&text);
            match scan_object(&text, usize::MAX, |_| {}) {
                Ok(()) => ok += 1,
                Err(ScanError::NotObject) => not_object += 1,
                Err(_) => syntax += 1,
            }
        }
        eprintln!("differential: {ok} objects, {not_object} other values, {syntax} invalid");
        // Every class is well represented.
        assert!(ok > 50_000 && not_object > 20_000 && syntax > 40_000);
    }
}
