//! A validating, allocation-free JSON scanner for one request line: it checks
//! that the text is exactly one JSON value and, when that value is an object,
//! reports each top-level member as a borrowed key and value span.
//!
//! Why it exists: the decoder only needs the top-level member spans, yet with
//! serde_json every payload byte goes through its generic skipping code
//! (`ignore_str`, `ignore_value`, ...) at ~25-30 instructions per byte. This
//! scanner accepts exactly the same texts (checked against serde_json by the
//! differential test, crates/sim/tests/scan.rs, and by the `scan` fuzz
//! target) with less work: string bodies are scanned 32 and 8 bytes at a
//! time (~1 instruction per byte), digits 8 at a time, arrays of numbers in
//! their own loop; the object's members are read by one loop (key, value,
//! separator, report), and only a nested array or object enters the
//! iterative machine (`container`), so that the per-member state stays out
//! of the per-token work and a scalar member costs no set-up of it. Per
//! token it still costs some 40-80 instructions, so short, token-dense
//! lines gain least (callgrind, `scan_object` alone: 11.7 instructions per
//! byte on a 117-byte publish line, 15.7 on an array of 100 integers, 18.7
//! of 100 decimals, 1.25 on a 4 KiB string; 13.2, 18.0, 21.0 and 1.24
//! before the member loop; serde_json with `&RawValue` members measured
//! 23 on a 100-byte publish line, 19 on a numeric array, 2.4 on a long
//! string).
//!
//! Invariants:
//! - what it accepts, every standard parser accepts: `scan_object(t,
//!   usize::MAX, _)` is `Ok` only if `serde_json::from_str::<Value>(t)`
//!   accepts an object (and then Python's `json.loads` and JavaScript's
//!   `JSON.parse` do too), so nothing the gateway forwards can break a
//!   client. It is `Syntax` iff serde_json's grammar (`&RawValue`) rejects
//!   the text; two kinds of grammatical JSON are refused on top, because
//!   some of those parsers refuse them: a `\uXXXX` escape of a lone
//!   surrogate (`"\ud800"`: serde_json) and a number that one of them does
//!   not read as a finite f64 (see [`portable_number`]);
//! - never panics and never recurses, whatever the input;
//! - allocates nothing unless the nesting is deeper than 256 levels (the
//!   container kinds of deeper levels go to a bit vector on the heap, so that
//!   validation and member reporting go on past `max_depth`);
//! - member spans borrow from `text`: keys without their quotes and with
//!   escapes left as written, values exactly as written (no surrounding
//!   whitespace), in document order, duplicates included.
//!
//! Errors rank `Syntax` > the first `NumberOutOfRange` or `LoneSurrogate` >
//! `NotObject` > `TooDeep`. Only `Syntax` stops the scan where it is found:
//! after a refused number or escape, or past `max_depth`, the text is still
//! validated to the end, so that a caller can still read e.g. the request's
//! `id` wherever it lies in the line (the protocol asks for the id on every
//! error status the request supplied one for). Members are reported as they
//! are found, so on `Syntax` the caller has already seen the members before
//! the error and must discard them; on the other errors the text is
//! grammatical and every member is reported except those whose key or value
//! holds the refused number or escape (so a refused `id` is never echoed).

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
    /// Grammatical JSON with a number that is not a finite f64 for every
    /// standard parser (see [`portable_number`]). Every member that does not
    /// hold such a number or escape has been reported.
    NumberOutOfRange,
    /// Grammatical JSON with a `\uXXXX` escape of an unpaired surrogate.
    /// Every member that does not hold such an escape or number has been
    /// reported.
    LoneSurrogate,
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
    member: impl FnMut(Member<'a>),
) -> Result<(), ScanError> {
    scan_object_escapes(text, max_depth, member).map(|_| ())
}

/// [`scan_object`], also telling whether the text has an escape (a
/// backslash) in any string, keys included: when it has none, a string
/// value's contents are its span without the quotes, so a caller need not
/// look for escapes again (the decoder's `op` and `topic`).
pub fn scan_object_escapes<'a>(
    text: &'a str,
    max_depth: usize,
    mut member: impl FnMut(Member<'a>),
) -> Result<bool, ScanError> {
    use ScanError::Syntax;

    let b = text.as_bytes();
    let mut st = State::default();
    let start = skip_ws(b, 0);
    if b.get(start) != Some(&b'{') {
        // Not an object: still exactly one valid value, for the verdict.
        let end = value(b, start, 0, &mut st)?;
        if skip_ws(b, end) != b.len() {
            return Err(Syntax);
        }
        return Err(st.refused.first.unwrap_or(ScanError::NotObject));
    }
    // The object's members, one loop turn each: the key here, the value by
    // `value` (which knows nothing of members), so that the per-member state
    // stays out of the per-token machine.
    st.deepest = 1;
    let mut i = skip_ws(b, start + 1);
    if b.get(i) == Some(&b'}') {
        i = skip_ws(b, i + 1);
    } else {
        loop {
            let (key, value_start) = member_key(b, i, &mut st.refused)?;
            st.escapes |= key.escaped;
            let end = value(b, value_start, 1, &mut st)?;
            i = skip_ws(b, end);
            let last = match b.get(i) {
                Some(b',') => false,
                Some(b'}') => true,
                _ => return Err(Syntax),
            };
            if st.refused.member_done() {
                member(key.member(text, value_start, end)?);
            }
            i = skip_ws(b, i + 1);
            if last {
                break;
            }
        }
    }
    if i != b.len() {
        return Err(Syntax);
    }
    if let Some(e) = st.refused.first {
        Err(e)
    } else if st.deepest > max_depth {
        Err(ScanError::TooDeep)
    } else {
        Ok(st.escapes)
    }
}

/// What a scan learns beside the members.
#[derive(Default)]
struct State {
    refused: Refusals,
    /// Some string (or key) has an escape.
    escapes: bool,
    /// The deepest nesting seen (the outer container is 1).
    deepest: usize,
}

/// Reads one value at `i` (no whitespace before it) nested in `base` open
/// containers; returns the index after it. Scalars are read at once;
/// containers by an iterative machine whose own depth starts at 0.
#[inline(always)]
fn value(b: &[u8], i: usize, base: usize, st: &mut State) -> Result<usize, ScanError> {
    use ScanError::Syntax;

    match b.get(i) {
        Some(b'"') => {
            let (next, escaped) = string(b, i + 1, &mut st.refused)?;
            st.escapes |= escaped;
            return Ok(next);
        }
        Some(b'-' | b'0'..=b'9') => return number(b, i, &mut st.refused),
        Some(b'{' | b'[') => {}
        Some(b't') => return literal(b, i, b"true"),
        Some(b'f') => return literal(b, i, b"false"),
        Some(b'n') => return literal(b, i, b"null"),
        _ => return Err(Syntax),
    }
    container(b, i, base, st)
}

/// [`value`] of an array or object at `i`: out of line, so that a scalar
/// member costs no set-up of the machine.
#[inline(never)]
fn container(b: &[u8], mut i: usize, base: usize, st: &mut State) -> Result<usize, ScanError> {
    use ScanError::Syntax;

    let mut kinds = Kinds::new();
    // Open containers (of this value); the innermost one is an object iff
    // `in_obj`.
    let mut depth = 0usize;
    let mut in_obj = false;

    'value: loop {
        // `i` is where a value is expected, possibly after whitespace.
        let c = *b.get(i).ok_or(Syntax)?;
        match c {
            b'"' => {
                let (next, escaped) = string(b, i + 1, &mut st.refused)?;
                i = next;
                st.escapes |= escaped;
            }
            b'-' | b'0'..=b'9' => {
                i = number(b, i, &mut st.refused)?;
                // Arrays of numbers (common in messages) stay in this loop.
                if !in_obj {
                    while b.get(i) == Some(&b',') {
                        match b.get(i + 1) {
                            Some(b'-' | b'0'..=b'9') => i = number(b, i + 1, &mut st.refused)?,
                            _ => break,
                        }
                    }
                }
            }
            b'{' => {
                kinds.set(depth, true);
                depth += 1;
                st.deepest = st.deepest.max(base + depth);
                in_obj = true;
                i = skip_ws(b, i + 1);
                if b.get(i) != Some(&b'}') {
                    let (k, next) = member_key(b, i, &mut st.refused)?;
                    st.escapes |= k.escaped;
                    i = next;
                    continue 'value;
                }
                i += 1;
                depth -= 1;
                if depth == 0 {
                    return Ok(i);
                }
                in_obj = kinds.get(depth - 1);
            }
            b'[' => {
                kinds.set(depth, false);
                depth += 1;
                st.deepest = st.deepest.max(base + depth);
                in_obj = false;
                i = skip_ws(b, i + 1);
                if b.get(i) != Some(&b']') {
                    continue 'value;
                }
                i += 1;
                depth -= 1;
                if depth == 0 {
                    return Ok(i);
                }
                in_obj = kinds.get(depth - 1);
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
        // A value ends at `i` inside a container (`depth > 0`): go on to
        // the next element, or close containers; back at depth 0 the
        // value is whole.
        loop {
            let mut c = b.get(i).copied();
            if let Some(b' ' | b'\t' | b'\n' | b'\r') = c {
                i = skip_ws(b, i + 1);
                c = b.get(i).copied();
            }
            match c {
                Some(b',') => {
                    i += 1;
                    if in_obj {
                        let (k, next) = member_key(b, skip_ws(b, i), &mut st.refused)?;
                        st.escapes |= k.escaped;
                        i = next;
                    }
                    continue 'value;
                }
                Some(b']') if !in_obj => {}
                Some(b'}') if in_obj => {}
                _ => return Err(Syntax),
            }
            i += 1;
            depth -= 1;
            if depth == 0 {
                return Ok(i);
            }
            in_obj = kinds.get(depth - 1);
        }
    }
}

/// The grammatical JSON refused so far: the first refusal (the scan's
/// verdict if the text turns out grammatical), and whether the top-level
/// member being read holds one (then it is not reported).
#[derive(Default)]
struct Refusals {
    first: Option<ScanError>,
    in_member: bool,
}

impl Refusals {
    #[cold]
    fn record(&mut self, e: ScanError) {
        self.first.get_or_insert(e);
        self.in_member = true;
    }

    /// Ends a top-level member: whether it is clean and may be reported.
    #[inline(always)]
    fn member_done(&mut self) -> bool {
        !std::mem::take(&mut self.in_member)
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
        // Every bound is next to an ASCII byte, so `span` never fails.
        Ok(Member {
            key: span(text, self.start, self.end).ok_or(ScanError::Syntax)?,
            key_escaped: self.escaped,
            value: span(text, start, end).ok_or(ScanError::Syntax)?,
        })
    }
}

/// `text[start..end]`, checked. Two `split_at_checked` inline where
/// `str::get` is an out-of-line call: ~25 instructions less per member
/// (scripts/callgrind.sh).
#[inline(always)]
fn span(text: &str, start: usize, end: usize) -> Option<&str> {
    let (head, _) = text.split_at_checked(end)?;
    let (_, span) = head.split_at_checked(start)?;
    Some(span)
}

/// Reads `"key" :` at `i`; returns the key and the index of the value
/// (the first byte after the colon that is not whitespace).
#[inline(always)]
fn member_key(b: &[u8], i: usize, refused: &mut Refusals) -> Result<(Key, usize), ScanError> {
    if b.get(i) != Some(&b'"') {
        return Err(ScanError::Syntax);
    }
    let (after, escaped) = string(b, i + 1, refused)?;
    let key = Key {
        start: i + 1,
        end: after - 1,
        escaped,
    };
    // The colon is tested once on the common path (no whitespace before it).
    let colon = if b.get(after) == Some(&b':') {
        after
    } else {
        let colon = skip_ws(b, after);
        if b.get(colon) != Some(&b':') {
            return Err(ScanError::Syntax);
        }
        colon
    };
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
fn number(b: &[u8], i: usize, refused: &mut Refusals) -> Result<usize, ScanError> {
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
        Some(b'.' | b'e' | b'E') => fraction_exponent(b, i, end - int, end, refused),
        // Up to 308 digits an integer is below 1e308: always in range.
        _ if end - int > 308 => Ok(in_range(b, i, end, refused)),
        _ => Ok(end),
    }
}

/// Checks the number `b[start..end]`, which may be near or past the top of
/// the f64 range (the slow path), recording a refusal if it is not
/// [`portable_number`]; returns `end`.
#[cold]
fn in_range(b: &[u8], start: usize, end: usize, refused: &mut Refusals) -> usize {
    // A number's bytes are ASCII, so the conversion cannot fail.
    let text = b.get(start..end).and_then(|t| std::str::from_utf8(t).ok());
    if !text.is_some_and(portable_number) {
        refused.record(ScanError::NumberOutOfRange);
    }
    end
}

/// Whether every standard parser reads the JSON number `text` as a finite
/// f64. Python's `float`, JavaScript's `Number` and Rust's `str::parse` round
/// correctly: finite iff the exact value is below `f64::MAX` plus half an
/// ulp (2^1024 - 2^970). serde_json by default (without its
/// `float_roundtrip` feature) does not: it rounds the first 19 or 20 digits
/// to an f64 and multiplies by a power of ten, so within an ulp of
/// `f64::MAX` it can refuse what rounds to `f64::MAX`
/// (`1.7976931348623158e308`) or accept what rounds to infinity
/// (`1.79769313486231589e308`). The number must be finite for both.
///
/// An integer of more than 309 digits is infinite for all, which also keeps
/// out what Python refuses outright (integers past 4300 digits).
///
/// The rule is the serde_json we link, asked directly: the gateway's own
/// parses and Rust clients (roslibrust) use the same parser with the same
/// defaults (serde_json's `f64_from_parts`, src/de.rs).
pub fn portable_number(text: &str) -> bool {
    text.parse::<f64>().is_ok_and(f64::is_finite) && serde_json::from_str::<f64>(text).is_ok()
}

/// The rest of a number that starts at `start` with `int_digits` integer
/// digits, from `i`, at its `.`, `e` or `E`.
#[inline(never)]
fn fraction_exponent(
    b: &[u8],
    start: usize,
    int_digits: usize,
    mut i: usize,
    refused: &mut Refusals,
) -> Result<usize, ScanError> {
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
        // The magnitude is below 10^(int_digits + exponent): check exactly
        // only when that may reach the top of the f64 range.
        let positive = b.get(exp - 1) != Some(&b'-');
        let small = i - exp <= 3
            && b.get(exp..i).map_or(0, |d| {
                d.iter()
                    .fold(0usize, |n, &c| n * 10 + usize::from(c - b'0'))
            }) + int_digits
                < 308;
        if positive && !small {
            return Ok(in_range(b, start, i, refused));
        }
    }
    if int_digits > 308 {
        return Ok(in_range(b, start, i, refused));
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
fn string(b: &[u8], mut i: usize, refused: &mut Refusals) -> Result<(usize, bool), ScanError> {
    let mut escaped = false;
    loop {
        i = find_special(b, i);
        match b.get(i) {
            Some(b'"') => return Ok((i + 1, escaped)),
            Some(b'\\') => {
                escaped = true;
                i = escape(b, i + 1, refused)?;
            }
            // A control character or the end of the text.
            _ => return Err(ScanError::Syntax),
        }
    }
}

/// Checks the escape whose `\` is just before `i`; returns the index after
/// it. `\uXXXX` needs four hex digits; a high surrogate must be followed by
/// an escaped low one, and a low one must follow a high one: otherwise the
/// surrogate is recorded as refused and the scan goes on after its escape.
#[cold]
fn escape(b: &[u8], i: usize, refused: &mut Refusals) -> Result<usize, ScanError> {
    match b.get(i) {
        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => Ok(i + 1),
        Some(b'u') => {
            match hex4(b, i + 1)? {
                0xD800..=0xDBFF => {
                    // A pair only if an escaped low surrogate follows; what
                    // follows otherwise is read on its own.
                    if b.get(i + 5..i + 7) == Some(b"\\u")
                        && matches!(hex4(b, i + 7), Ok(0xDC00..=0xDFFF))
                    {
                        return Ok(i + 11);
                    }
                    refused.record(ScanError::LoneSurrogate);
                }
                0xDC00..=0xDFFF => refused.record(ScanError::LoneSurrogate),
                _ => {}
            }
            Ok(i + 5)
        }
        _ => Err(ScanError::Syntax),
    }
}

/// The value of the four hex digits at `i`.
#[inline(always)]
fn hex4(b: &[u8], i: usize) -> Result<u32, ScanError> {
    let hex = b.get(i..i + 4).ok_or(ScanError::Syntax)?;
    hex.iter().try_fold(0u32, |n, &c| {
        let d = (c as char).to_digit(16).ok_or(ScanError::Syntax)?;
        Ok(n * 16 + d)
    })
}

// Word-at-a-time (SWAR) byte classes. Each mask is non-zero iff some byte of
// the little-endian word is in the class, and its lowest set bit lies in the
// first such byte: borrows and carries only run upwards from a byte that is
// in the class, so bytes below it are never flagged.

const LO: u64 = 0x0101_0101_0101_0101;
const HI: u64 = 0x8080_8080_8080_8080;

/// The 8 bytes at `i`, if there are as many (`b.get(i..)?.first_chunk()`
/// costs a subtraction and two checks more per word).
#[inline(always)]
fn word_at(b: &[u8], i: usize) -> Option<u64> {
    let w = b.get(i..i.wrapping_add(8))?.first_chunk::<8>()?;
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
