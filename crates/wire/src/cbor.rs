//! CBOR (RFC 8949) written into a caller's `Vec<u8>`, as rosbridge's `cbor`
//! compression sends it, and a type-unaware JSON -> CBOR conversion.
//!
//! What it owns: the byte layout of every CBOR item the gateway emits, and
//! the `publish` frames of the `cbor` and `cbor-raw` compressions
//! ([`publish`], [`publish_raw`]).
//!
//! - Heads are always in shortest form (RFC 8949 §4.2.1: the argument in
//!   the fewest bytes) and lengths are always definite: no indefinite-length
//!   items, no break byte.
//! - Floats: [`f64()`] always writes a double (`0xfb`), as rosbridge does for
//!   every scalar float, ROS `float32` and `float64` alike
//!   (rosbridge_library/src/rosbridge_library/internal/cbor_conversion.py
//!   turns both into a Python `float`, which its encoder,
//!   rosbridge_library/src/rosbridge_library/util/cbor.py `dumps_float`,
//!   writes as `!Bd`). [`f32()`] and [`f16()`] write the narrower forms as
//!   given, and [`float_preferred`] the shortest that keeps the value
//!   (RFC 8949 §4.2.2), for callers that want it.
//! - Numeric arrays are RFC 8746 typed arrays, little-endian, under the tags
//!   rosbridge uses (`TAGGED_ARRAY_FORMATS` in cbor_conversion.py) and
//!   roslibjs decodes (src/util/cborTypedArrayTags.js): uint16 69, uint32
//!   70, uint64 71, int8 72, int16 77, int32 78, int64 79, float32 85,
//!   float64 86. `uint8[]`/`char[]` are a plain byte string (major type 2),
//!   not tag 64, as rosbridge sends them (`BYTESTREAM_TYPES`).
//!
//! The JSON conversion ([`from_json`]) knows no message types, so it emits
//! no typed arrays: objects become maps with text keys in input order
//! (duplicates kept, as the text has them), arrays become arrays, strings
//! text strings (escapes decoded), `true`/`false`/`null` simple values.
//! Numbers: integer syntax (no `.`, `e`, `E`) within CBOR's integer range
//! (-2^64 .. 2^64-1) becomes a CBOR integer, which JavaScript's cbor-js (the
//! decoder roslibjs uses) reads as the nearest double and Python's cbor2 as
//! the exact int, the same values `JSON.parse` and `json.loads` give the
//! text; integers beyond that range, and every number with a fraction or
//! exponent, become a double, the nearest one, as `JSON.parse` reads it
//! (never a bignum: tags 2 and 3 reach roslibjs as a byte array, not a
//! number). `-0` becomes the double -0.0, which is what `JSON.parse` gives.
//! A negative integer below -2^53 may come out of cbor-js one unit in the
//! last place off `JSON.parse`'s value (cbor-js rounds `n` then computes
//! `-1 - n`); Python reads it exactly.
//!
//! The conversion never recurses (it keeps a stack of open containers),
//! never panics on any input, and refuses (with [`JsonError`]) anything that
//! is not exactly one JSON value in serde_json's grammar, a lone surrogate
//! escape, a number that is not a finite double, and nesting deeper than
//! [`crate::MAX_JSON_DEPTH`] (the depth the decoder admits).

/// CBOR major types (RFC 8949 §3.1), shifted into the initial byte.
pub mod major {
    pub const UNSIGNED: u8 = 0 << 5;
    pub const NEGATIVE: u8 = 1 << 5;
    pub const BYTES: u8 = 2 << 5;
    pub const TEXT: u8 = 3 << 5;
    pub const ARRAY: u8 = 4 << 5;
    pub const MAP: u8 = 5 << 5;
    pub const TAG: u8 = 6 << 5;
    pub const SIMPLE: u8 = 7 << 5;
}

/// `false`, `true`, `null`, `undefined` (RFC 8949 §3.3).
pub const FALSE: u8 = 0xf4;
pub const TRUE: u8 = 0xf5;
pub const NULL: u8 = 0xf6;
pub const UNDEFINED: u8 = 0xf7;

/// Writes a head: `major` (one of [`major`]) with argument `n`, in the
/// shortest form.
pub fn head(out: &mut Vec<u8>, major: u8, n: u64) {
    if n < 24 {
        out.push(major | n as u8);
    } else if n <= u64::from(u8::MAX) {
        out.extend_from_slice(&[major | 24, n as u8]);
    } else if n <= u64::from(u16::MAX) {
        out.push(major | 25);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else if n <= u64::from(u32::MAX) {
        out.push(major | 26);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    } else {
        out.push(major | 27);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// An unsigned integer (major type 0).
pub fn uint(out: &mut Vec<u8>, n: u64) {
    head(out, major::UNSIGNED, n);
}

/// A signed integer: major type 0 when `n >= 0`, else major type 1 with
/// argument `-1 - n`.
pub fn int(out: &mut Vec<u8>, n: i64) {
    if n >= 0 {
        head(out, major::UNSIGNED, n as u64);
    } else {
        // -1 - n never overflows for negative n.
        head(out, major::NEGATIVE, (-1 - n) as u64);
    }
}

/// A byte string (major type 2): ROS `uint8[]` and `char[]`.
pub fn bytes(out: &mut Vec<u8>, b: &[u8]) {
    head(out, major::BYTES, b.len() as u64);
    out.extend_from_slice(b);
}

/// A text string (major type 3).
pub fn text(out: &mut Vec<u8>, s: &str) {
    head(out, major::TEXT, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

/// The head of an array of `len` items; the caller writes the items.
pub fn array(out: &mut Vec<u8>, len: usize) {
    head(out, major::ARRAY, len as u64);
}

/// The head of a map of `len` pairs; the caller writes key, value, ...
pub fn map(out: &mut Vec<u8>, len: usize) {
    head(out, major::MAP, len as u64);
}

/// A tag (major type 6); the caller writes the tagged item.
pub fn tag(out: &mut Vec<u8>, tag: u64) {
    head(out, major::TAG, tag);
}

pub fn bool(out: &mut Vec<u8>, b: bool) {
    out.push(if b { TRUE } else { FALSE });
}

pub fn null(out: &mut Vec<u8>) {
    out.push(NULL);
}

/// A double (`0xfb` + 8 bytes), whatever the value: what rosbridge writes
/// for every scalar float.
pub fn f64(out: &mut Vec<u8>, v: f64) {
    out.push(0xfb);
    out.extend_from_slice(&v.to_be_bytes());
}

/// A single (`0xfa` + 4 bytes).
pub fn f32(out: &mut Vec<u8>, v: f32) {
    out.push(0xfa);
    out.extend_from_slice(&v.to_be_bytes());
}

/// A half (`0xf9` + 2 bytes), given as its IEEE 754 binary16 bits.
pub fn f16(out: &mut Vec<u8>, bits: u16) {
    out.push(0xf9);
    out.extend_from_slice(&bits.to_be_bytes());
}

/// The shortest of half, single and double that represents `v` exactly
/// (RFC 8949 §4.2.2's preferred serialization; NaN as the half `0x7e00`).
pub fn float_preferred(out: &mut Vec<u8>, v: f64) {
    if v.is_nan() {
        return f16(out, 0x7e00);
    }
    if let Some(h) = to_f16_exact(v) {
        return f16(out, h);
    }
    let s = v as f32;
    if f64::from(s) == v {
        f32(out, s);
    } else {
        f64(out, v);
    }
}

/// The binary16 bits of `v` if it converts exactly (NaN excluded).
fn to_f16_exact(v: f64) -> Option<u16> {
    let sign = if v.is_sign_negative() { 0x8000u16 } else { 0 };
    let a = v.abs();
    if a == 0.0 {
        return Some(sign);
    }
    if a.is_infinite() {
        return Some(sign | 0x7c00);
    }
    // Subnormal halves: multiples of 2^-24 below 2^-14.
    if a < 2f64.powi(-14) {
        let m = a * 2f64.powi(24);
        return (m.fract() == 0.0 && m < 1024.0).then_some(sign | m as u16);
    }
    let bits = a.to_bits();
    let exp = ((bits >> 52) & 0x7ff) as i32 - 1023;
    if exp > 15 || bits & ((1u64 << 42) - 1) != 0 {
        return None;
    }
    let mant = ((bits >> 42) & 0x3ff) as u16;
    Some(sign | (((exp + 15) as u16) << 10) | mant)
}

/// An element type of an RFC 8746 typed array, little-endian, with the tag
/// rosbridge and roslibjs use for it.
pub trait TypedElem: Copy {
    /// The RFC 8746 tag of a little-endian array of this type.
    const TAG: u64;
    /// Appends the element's little-endian bytes.
    fn put_le(self, out: &mut Vec<u8>);
}

macro_rules! typed_elem {
    ($t:ty, $tag:expr) => {
        impl TypedElem for $t {
            const TAG: u64 = $tag;
            fn put_le(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
        }
    };
}

typed_elem!(u16, 69);
typed_elem!(u32, 70);
typed_elem!(u64, 71);
typed_elem!(i8, 72);
typed_elem!(i16, 77);
typed_elem!(i32, 78);
typed_elem!(i64, 79);
typed_elem!(f32, 85);
typed_elem!(f64, 86);

/// A typed array (RFC 8746 §2): the element type's tag, then a byte string
/// of the elements, little-endian. For `u8` use [`bytes`] (see the module
/// docs).
pub fn typed_array<T: TypedElem>(out: &mut Vec<u8>, items: &[T]) {
    tag(out, T::TAG);
    head(out, major::BYTES, std::mem::size_of_val(items) as u64);
    out.reserve(std::mem::size_of_val(items));
    for &x in items {
        x.put_le(out);
    }
}

/// Appends a `publish` frame as rosbridge's `cbor` compression sends it:
/// the map `{"op":"publish","topic":<topic>,"msg":<msg>}` in that order
/// (rosbridge_library/src/rosbridge_library/capabilities/subscribe.py), the
/// message converted by [`from_json`]. On error `out` is left as it was.
pub fn publish(out: &mut Vec<u8>, topic: &str, msg_json: &str) -> Result<(), JsonError> {
    let start = out.len();
    map(out, 3);
    text(out, "op");
    text(out, "publish");
    text(out, "topic");
    text(out, topic);
    text(out, "msg");
    from_json(msg_json, out).inspect_err(|_| out.truncate(start))
}

/// Appends a `publish` frame as rosbridge's `cbor-raw` compression sends
/// it: `{"op":"publish","topic":<topic>,"msg":{"secs":..,"nsecs":..,
/// "bytes":<the serialized message>}}`, the time being when the gateway
/// received the message (subscribe.py, and ROSBRIDGE_PROTOCOL.md §3.1.4).
/// For a ROS 2 sample, `bytes` is its CDR, encapsulation header included,
/// as rclpy's raw subscription hands it to rosbridge.
pub fn publish_raw(out: &mut Vec<u8>, topic: &str, secs: i64, nsecs: u32, bytes_: &[u8]) {
    publish_raw_head(out, topic, secs, nsecs, bytes_.len());
    out.extend_from_slice(bytes_);
}

/// [`publish_raw`] up to its `bytes`' content: what precedes `len` bytes
/// of payload, for a caller that puts the payload after it without
/// copying it here first (a multi-megabyte image's CDR).
pub fn publish_raw_head(out: &mut Vec<u8>, topic: &str, secs: i64, nsecs: u32, len: usize) {
    map(out, 3);
    text(out, "op");
    text(out, "publish");
    text(out, "topic");
    text(out, topic);
    text(out, "msg");
    map(out, 3);
    text(out, "secs");
    int(out, secs);
    text(out, "nsecs");
    uint(out, u64::from(nsecs));
    text(out, "bytes");
    head(out, major::BYTES, len as u64);
}

/// Why [`from_json`] refused its input. On error, `out` may hold a partial
/// item: the caller truncates it back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonError {
    /// Not exactly one JSON value (serde_json's grammar).
    Syntax,
    /// A `\uXXXX` escape of an unpaired surrogate.
    LoneSurrogate,
    /// A number that is not a finite double (`1e400`).
    NumberOutOfRange,
    /// Arrays/objects nested deeper than [`crate::MAX_JSON_DEPTH`].
    TooDeep,
}

/// Appends the CBOR form of the JSON text `json` (one value, surrounding
/// whitespace allowed) to `out`, as described in the module docs.
///
/// Two passes over the text: the first counts each container's items (CBOR
/// heads carry them up front, and the shortest head's size depends on the
/// count), the second writes. Both are iterative.
pub fn from_json(json: &str, out: &mut Vec<u8>) -> Result<(), JsonError> {
    let counts = count_items(json.as_bytes())?;
    let mut w = Converter {
        b: json.as_bytes(),
        i: 0,
        out,
        counts: &counts,
        next_count: 0,
    };
    w.run()
}

/// Item counts of every array/object of `b`, in the order they open: a
/// lenient pass (strings skipped, commas counted at each level); the
/// writing pass checks the grammar and that each count matches.
fn count_items(b: &[u8]) -> Result<Vec<u32>, JsonError> {
    let mut counts: Vec<u32> = Vec::new();
    // Per open container: its index in `counts`, whether it has an item yet.
    let mut open: Vec<(usize, bool)> = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => {
                if let Some(top) = open.last_mut() {
                    top.1 = true;
                }
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'[' | b'{' => {
                if let Some(top) = open.last_mut() {
                    top.1 = true;
                }
                if open.len() >= crate::MAX_JSON_DEPTH {
                    return Err(JsonError::TooDeep);
                }
                open.push((counts.len(), false));
                counts.push(0);
            }
            b']' | b'}' => {
                let (k, any) = open.pop().ok_or(JsonError::Syntax)?;
                if any {
                    counts[k] += 1;
                }
            }
            b',' => {
                let (k, _) = *open.last().ok_or(JsonError::Syntax)?;
                counts[k] += 1;
            }
            b' ' | b'\t' | b'\n' | b'\r' | b':' => {}
            _ => {
                if let Some(top) = open.last_mut() {
                    top.1 = true;
                }
            }
        }
        i += 1;
    }
    Ok(counts)
}

/// The writing pass of [`from_json`].
struct Converter<'a, 'o> {
    b: &'a [u8],
    i: usize,
    out: &'o mut Vec<u8>,
    counts: &'a [u32],
    next_count: usize,
}

/// An open container in the writing pass: is it an object, how many items
/// it holds so far, how many the counting pass found.
struct Open {
    object: bool,
    items: u32,
    expected: u32,
}

impl Converter<'_, '_> {
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.b.get(self.i) {
            self.i += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn eat(&mut self, c: u8) -> Result<(), JsonError> {
        if self.peek() == Some(c) {
            self.i += 1;
            Ok(())
        } else {
            Err(JsonError::Syntax)
        }
    }

    fn open(&mut self, object: bool) -> Result<Open, JsonError> {
        let expected = *self.counts.get(self.next_count).ok_or(JsonError::Syntax)?;
        self.next_count += 1;
        if object {
            map(self.out, expected as usize);
        } else {
            array(self.out, expected as usize);
        }
        Ok(Open {
            object,
            items: 0,
            expected,
        })
    }

    fn run(&mut self) -> Result<(), JsonError> {
        let mut stack: Vec<Open> = Vec::new();
        self.ws();
        'value: loop {
            // A value is expected at `i`.
            match self.peek().ok_or(JsonError::Syntax)? {
                c @ (b'{' | b'[') => {
                    let object = c == b'{';
                    self.i += 1;
                    let o = self.open(object)?;
                    stack.push(o);
                    self.ws();
                    let close = if object { b'}' } else { b']' };
                    if self.peek() != Some(close) {
                        if object {
                            self.key()?;
                        }
                        continue 'value;
                    }
                    // Empty: closed below, with no item counted.
                }
                c => {
                    match c {
                        b'"' => {
                            self.i += 1;
                            self.string()?;
                        }
                        b't' => self.literal(b"true", TRUE)?,
                        b'f' => self.literal(b"false", FALSE)?,
                        b'n' => self.literal(b"null", NULL)?,
                        b'-' | b'0'..=b'9' => self.number()?,
                        _ => return Err(JsonError::Syntax),
                    }
                    if let Some(top) = stack.last_mut() {
                        top.items += 1;
                    }
                }
            }
            // Just after a value, or just inside an empty container: close
            // containers, or go on to the next item.
            loop {
                self.ws();
                let Some(top) = stack.last() else {
                    return if self.i == self.b.len() {
                        Ok(())
                    } else {
                        Err(JsonError::Syntax)
                    };
                };
                let (object, items) = (top.object, top.items);
                match self.peek() {
                    // `[,` is refused: a comma follows an item.
                    Some(b',') if items > 0 => {
                        self.i += 1;
                        self.ws();
                        if object {
                            self.key()?;
                        }
                        continue 'value;
                    }
                    Some(b'}') if object => {}
                    Some(b']') if !object => {}
                    _ => return Err(JsonError::Syntax),
                }
                self.i += 1;
                let o = stack.pop().ok_or(JsonError::Syntax)?;
                if o.items != o.expected {
                    // Only a text the counting pass misread gets here, and
                    // such a text is not JSON.
                    return Err(JsonError::Syntax);
                }
                if let Some(parent) = stack.last_mut() {
                    parent.items += 1;
                }
            }
        }
    }

    fn literal(&mut self, word: &[u8], byte: u8) -> Result<(), JsonError> {
        if self.b[self.i..].starts_with(word) {
            self.i += word.len();
            self.out.push(byte);
            Ok(())
        } else {
            Err(JsonError::Syntax)
        }
    }

    /// An object key and its colon; `i` is at the key's opening quote.
    fn key(&mut self) -> Result<(), JsonError> {
        self.eat(b'"')?;
        self.string()?;
        self.ws();
        self.eat(b':')?;
        self.ws();
        Ok(())
    }

    /// A string body from just after its opening quote, written as a text
    /// string with its escapes decoded.
    fn string(&mut self) -> Result<(), JsonError> {
        let start = self.i;
        // Fast path: no escape, the text is the UTF-8 as is (a `&str`, so
        // it is valid UTF-8 already).
        let mut j = start;
        loop {
            match self.b.get(j) {
                None => return Err(JsonError::Syntax),
                Some(b'"') => {
                    let s = &self.b[start..j];
                    head(self.out, major::TEXT, s.len() as u64);
                    self.out.extend_from_slice(s);
                    self.i = j + 1;
                    return Ok(());
                }
                Some(b'\\') => break,
                Some(&c) if c < 0x20 => return Err(JsonError::Syntax),
                Some(_) => j += 1,
            }
        }
        // Escapes: decode into a scratch buffer, then write its length.
        let mut s: Vec<u8> = Vec::with_capacity(j - start + 16);
        s.extend_from_slice(&self.b[start..j]);
        loop {
            match self.b.get(j) {
                None => return Err(JsonError::Syntax),
                Some(b'"') => break,
                Some(b'\\') => {
                    let e = *self.b.get(j + 1).ok_or(JsonError::Syntax)?;
                    j += 2;
                    let c = match e {
                        b'"' => b'"',
                        b'\\' => b'\\',
                        b'/' => b'/',
                        b'b' => 8,
                        b'f' => 12,
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'u' => {
                            let hi = self.hex4(j)?;
                            j += 4;
                            let cp = if (0xd800..0xdc00).contains(&hi) {
                                if self.b.get(j..j + 2) != Some(b"\\u") {
                                    return Err(JsonError::LoneSurrogate);
                                }
                                let lo = self.hex4(j + 2)?;
                                if !(0xdc00..0xe000).contains(&lo) {
                                    return Err(JsonError::LoneSurrogate);
                                }
                                j += 6;
                                0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00)
                            } else if (0xdc00..0xe000).contains(&hi) {
                                return Err(JsonError::LoneSurrogate);
                            } else {
                                hi
                            };
                            let ch = char::from_u32(cp).ok_or(JsonError::LoneSurrogate)?;
                            let mut buf = [0u8; 4];
                            s.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                            continue;
                        }
                        _ => return Err(JsonError::Syntax),
                    };
                    s.push(c);
                }
                Some(&c) if c < 0x20 => return Err(JsonError::Syntax),
                Some(&c) => {
                    s.push(c);
                    j += 1;
                }
            }
        }
        head(self.out, major::TEXT, s.len() as u64);
        self.out.extend_from_slice(&s);
        self.i = j + 1;
        Ok(())
    }

    fn hex4(&self, at: usize) -> Result<u32, JsonError> {
        let h = self.b.get(at..at + 4).ok_or(JsonError::Syntax)?;
        let mut v = 0u32;
        for &c in h {
            let d = (c as char).to_digit(16).ok_or(JsonError::Syntax)?;
            v = v * 16 + d;
        }
        Ok(v)
    }

    /// A number in JSON's grammar, written as described in the module docs.
    fn number(&mut self) -> Result<(), JsonError> {
        let b = self.b;
        let start = self.i;
        let mut j = start;
        let negative = b.get(j) == Some(&b'-');
        if negative {
            j += 1;
        }
        let digits = |mut k: usize| {
            while let Some(b'0'..=b'9') = b.get(k) {
                k += 1;
            }
            k
        };
        match b.get(j) {
            Some(b'0') => j += 1,
            Some(b'1'..=b'9') => j = digits(j),
            _ => return Err(JsonError::Syntax),
        }
        let int_end = j;
        let mut integer = true;
        if b.get(j) == Some(&b'.') {
            integer = false;
            let k = digits(j + 1);
            if k == j + 1 {
                return Err(JsonError::Syntax);
            }
            j = k;
        }
        if let Some(b'e' | b'E') = b.get(j) {
            integer = false;
            j += 1;
            if let Some(b'+' | b'-') = b.get(j) {
                j += 1;
            }
            let k = digits(j);
            if k == j {
                return Err(JsonError::Syntax);
            }
            j = k;
        }
        self.i = j;
        let text = &b[start..j];
        if integer {
            let mag = &b[start + usize::from(negative)..int_end];
            if let Some(m) = parse_u64(mag) {
                match (negative, m) {
                    (false, _) => uint(self.out, m),
                    (true, 0) => f64(self.out, -0.0),
                    (true, _) => head(self.out, major::NEGATIVE, m - 1),
                }
                return Ok(());
            }
            // -2^64 is the one integer past u64 CBOR still holds.
            if negative && mag == b"18446744073709551616" {
                head(self.out, major::NEGATIVE, u64::MAX);
                return Ok(());
            }
        }
        // The text is ASCII digits and signs: valid UTF-8.
        let t = std::str::from_utf8(text).map_err(|_| JsonError::Syntax)?;
        let v: f64 = t.parse().map_err(|_| JsonError::Syntax)?;
        if !v.is_finite() {
            return Err(JsonError::NumberOutOfRange);
        }
        f64(self.out, v);
        Ok(())
    }
}

/// Decimal digits as a u64, None on overflow.
fn parse_u64(d: &[u8]) -> Option<u64> {
    let mut v = 0u64;
    for &c in d {
        v = v.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
    }
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    fn conv(json: &str) -> String {
        let mut out = Vec::new();
        from_json(json, &mut out).unwrap_or_else(|e| panic!("{json}: {e:?}"));
        hex(&out)
    }

    /// RFC 8949 Appendix A, integers: the writer and the JSON conversion.
    #[test]
    fn rfc8949_integers() {
        let cases: &[(&str, &str)] = &[
            ("0", "00"),
            ("1", "01"),
            ("10", "0a"),
            ("23", "17"),
            ("24", "1818"),
            ("25", "1819"),
            ("100", "1864"),
            ("1000", "1903e8"),
            ("1000000", "1a000f4240"),
            ("1000000000000", "1b000000e8d4a51000"),
            ("18446744073709551615", "1bffffffffffffffff"),
            ("-18446744073709551616", "3bffffffffffffffff"),
            ("-1", "20"),
            ("-10", "29"),
            ("-100", "3863"),
            ("-1000", "3903e7"),
        ];
        for (json, want) in cases {
            assert_eq!(conv(json), *want, "{json}");
            if let Ok(n) = json.parse::<i64>() {
                let mut out = Vec::new();
                int(&mut out, n);
                assert_eq!(hex(&out), *want, "int({n})");
            }
        }
        let mut out = Vec::new();
        int(&mut out, i64::MIN);
        assert_eq!(hex(&out), "3b7fffffffffffffff");
    }

    /// RFC 8949 Appendix A, floats, in preferred serialization.
    #[test]
    fn rfc8949_floats() {
        let cases: &[(f64, &str)] = &[
            (0.0, "f90000"),
            (-0.0, "f98000"),
            (1.0, "f93c00"),
            (1.1, "fb3ff199999999999a"),
            (1.5, "f93e00"),
            (65504.0, "f97bff"),
            (100000.0, "fa47c35000"),
            (3.4028234663852886e38, "fa7f7fffff"),
            (1.0e300, "fb7e37e43c8800759c"),
            (5.960464477539063e-8, "f90001"),
            (0.00006103515625, "f90400"),
            (-4.0, "f9c400"),
            (-4.1, "fbc010666666666666"),
            (f64::INFINITY, "f97c00"),
            (f64::NAN, "f97e00"),
            (f64::NEG_INFINITY, "f9fc00"),
        ];
        for (v, want) in cases {
            let mut out = Vec::new();
            float_preferred(&mut out, *v);
            assert_eq!(hex(&out), *want, "{v}");
        }
        // Forms given explicitly, and what rosbridge writes for any float.
        let mut out = Vec::new();
        f64(&mut out, 1.5);
        f32(&mut out, 1.5);
        f16(&mut out, 0x3e00);
        assert_eq!(hex(&out), "fb3ff8000000000000fa3fc00000f93e00");
    }

    /// RFC 8949 Appendix A: simple values, strings, arrays, maps, tags.
    #[test]
    fn rfc8949_other_items() {
        let cases: &[(&str, &str)] = &[
            ("false", "f4"),
            ("true", "f5"),
            ("null", "f6"),
            (r#""""#, "60"),
            (r#""a""#, "6161"),
            (r#""IETF""#, "6449455446"),
            (r#""\"\\""#, "62225c"),
            (r#""\u00fc""#, "62c3bc"),
            (r#""\u6c34""#, "63e6b0b4"),
            (r#""\ud800\udd51""#, "64f0908591"),
            ("\"\u{fc}\"", "62c3bc"),
            ("[]", "80"),
            ("[1,2,3]", "83010203"),
            ("[1,[2,3],[4,5]]", "8301820203820405"),
            (
                "[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25]",
                "98190102030405060708090a0b0c0d0e0f101112131415161718181819",
            ),
            ("{}", "a0"),
            (r#"{"a":1,"b":[2,3]}"#, "a26161016162820203"),
            (r#"["a",{"b":"c"}]"#, "826161a161626163"),
            (
                r#"{"a": "A", "b": "B", "c": "C", "d": "D", "e": "E"}"#,
                "a56161614161626142616361436164614461656145",
            ),
        ];
        for (json, want) in cases {
            assert_eq!(conv(json), *want, "{json}");
        }
        let mut out = Vec::new();
        bytes(&mut out, b"");
        bytes(&mut out, &[1, 2, 3, 4]);
        tag(&mut out, 1);
        uint(&mut out, 1363896240);
        text(&mut out, "IETF");
        array(&mut out, 2);
        bool(&mut out, true);
        null(&mut out);
        map(&mut out, 0);
        assert_eq!(
            hex(&out),
            "404401020304c11a514b67b06449455446 82f5f6a0".replace(' ', "")
        );
    }

    /// RFC 8746 typed arrays, little-endian, under the tags roslibjs reads.
    #[test]
    fn rfc8746_typed_arrays() {
        let mut out = Vec::new();
        typed_array(&mut out, &[1u16, 0x0203]);
        assert_eq!(hex(&out), "d84544010003 02".replace(' ', ""));
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (ta(&[1u32]), "d8464401000000"),
            (ta(&[1u64]), "d847480100000000000000"),
            (ta(&[-1i8, 2]), "d84842ff02"),
            (ta(&[-2i16]), "d84d42feff"),
            (ta(&[-2i32]), "d84e44feffffff"),
            (ta(&[-2i64]), "d84f48feffffffffffffff"),
            (ta(&[1.0f32]), "d8554400 00803f".replace(' ', "").leak()),
            (ta(&[1.0f64]), "d85648000000000000f03f"),
            (ta::<f32>(&[]), "d85540"),
        ];
        for (got, want) in cases {
            assert_eq!(hex(&got), want);
        }
    }

    fn ta<T: TypedElem>(items: &[T]) -> Vec<u8> {
        let mut out = Vec::new();
        typed_array(&mut out, items);
        out
    }

    /// The two publish frames, byte for byte.
    #[test]
    fn publish_frames() {
        let mut out = Vec::new();
        publish(&mut out, "/t", r#"{"data":1.5}"#).unwrap();
        assert_eq!(
            hex(&out),
            concat!(
                "a3",
                "626f70",
                "677075626c697368",
                "65746f706963",
                "622f74",
                "636d7367",
                "a1",
                "6464617461",
                "fb3ff8000000000000"
            )
        );
        let before = out.clone();
        assert_eq!(publish(&mut out, "/t", "{"), Err(JsonError::Syntax));
        assert_eq!(out, before, "left as it was");
        let mut out = Vec::new();
        publish_raw(&mut out, "/t", 1_700_000_000, 5, &[0, 1, 0, 0]);
        assert_eq!(
            hex(&out),
            concat!(
                "a3",
                "626f70",
                "677075626c697368",
                "65746f706963",
                "622f74",
                "636d7367",
                "a3",
                "6473656373",
                "1a6553f100",
                "656e73656373",
                "05",
                "656279746573",
                "4400010000"
            )
        );
    }

    /// Numbers: integers in CBOR's range as integers, the rest as the
    /// nearest double; `-0` as -0.0.
    #[test]
    fn json_numbers() {
        assert_eq!(conv("-0"), "fb8000000000000000");
        assert_eq!(conv("0.0"), "fb0000000000000000");
        assert_eq!(conv("1.5"), "fb3ff8000000000000");
        assert_eq!(conv("1e0"), "fb3ff0000000000000");
        assert_eq!(conv("-1.5E+1"), "fbc02e000000000000");
        // 2^64 and -(2^64 + 1): past CBOR's integers, doubles.
        assert_eq!(conv("18446744073709551616"), "fb43f0000000000000");
        assert_eq!(conv("-18446744073709551617"), "fbc3f0000000000000");
        assert_eq!(conv("1.7976931348623157e308"), "fb7fefffffffffffff");
        assert_eq!(conv(" \n[ 1 , -2 ]\t"), "820121");
    }

    #[test]
    fn json_refusals() {
        let cases: &[(&str, JsonError)] = &[
            ("", JsonError::Syntax),
            ("[", JsonError::Syntax),
            ("[1,]", JsonError::Syntax),
            ("[,1]", JsonError::Syntax),
            ("[1 2]", JsonError::Syntax),
            (r#"{"a"}"#, JsonError::Syntax),
            (r#"{"a":1,}"#, JsonError::Syntax),
            (r#"{1:2}"#, JsonError::Syntax),
            ("[1]]", JsonError::Syntax),
            ("[1}", JsonError::Syntax),
            ("01", JsonError::Syntax),
            ("1.", JsonError::Syntax),
            ("-", JsonError::Syntax),
            ("1e", JsonError::Syntax),
            ("tru", JsonError::Syntax),
            ("nul", JsonError::Syntax),
            ("1 2", JsonError::Syntax),
            ("\"a\u{1}\"", JsonError::Syntax),
            (r#""\x""#, JsonError::Syntax),
            (r#""\u12""#, JsonError::Syntax),
            (r#""abc"#, JsonError::Syntax),
            (r#""\ud800""#, JsonError::LoneSurrogate),
            (r#""\udc00""#, JsonError::LoneSurrogate),
            (r#""\ud800\u0041""#, JsonError::LoneSurrogate),
            ("1e400", JsonError::NumberOutOfRange),
            ("-1e400", JsonError::NumberOutOfRange),
        ];
        for (json, want) in cases {
            let mut out = Vec::new();
            assert_eq!(from_json(json, &mut out), Err(*want), "{json:?}");
        }
        let ok = "[".repeat(crate::MAX_JSON_DEPTH) + &"]".repeat(crate::MAX_JSON_DEPTH);
        assert!(from_json(&ok, &mut Vec::new()).is_ok());
        let deep = format!("[{ok}]");
        assert_eq!(from_json(&deep, &mut Vec::new()), Err(JsonError::TooDeep));
    }

    /// Keys keep their input order, duplicates included; escapes in keys are
    /// decoded; long strings and containers get longer heads.
    #[test]
    fn json_objects_keep_order_and_heads_grow() {
        assert_eq!(
            conv(r#"{"b":1,"a":2,"b":3,"\u0063":null}"#),
            "a461620161610261620361 63f6".replace(' ', "")
        );
        let long = "x".repeat(300);
        let got = conv(&format!("\"{long}\""));
        assert_eq!(&got[..6], "79012c");
        let many = format!("[{}]", vec!["0"; 70000].join(","));
        assert_eq!(&conv(&many)[..10], "9a00011170");
        let escaped = format!("\"{}\\n\"", "é".repeat(20));
        assert_eq!(&conv(&escaped)[..4], "7829");
    }
}
