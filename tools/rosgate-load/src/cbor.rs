//! A minimal CBOR (RFC 8949) reader: just enough to walk the `publish`
//! frames of rosbridge's `cbor` and `cbor-raw` compressions and pick the
//! few fields the `images` scenario checks, skipping the rest by length.
//!
//! What it owns: the decoding of item heads and the skipping of whole
//! items. It never allocates and never copies: byte and text strings are
//! borrowed from the input.
//!
//! Invariants:
//! - every length is checked against the bytes left before it is used, so
//!   a truncated or lying frame is an [`Error`], never a panic;
//! - indefinite lengths (RFC 8949 §3.2.2) are refused: rosbridge and the
//!   gateway (`crates/wire/src/cbor.rs`) only write definite ones;
//! - nesting is bounded by [`MAX_CBOR_DEPTH`], so [`Reader::skip`] on hostile
//!   input cannot recurse without end.

/// Deepest nesting [`Reader::skip`] follows. An `Image` is 4 levels deep
/// (frame, msg, header, stamp); anything far deeper is not a frame we sent.
pub const MAX_CBOR_DEPTH: usize = 32;

/// One item head, with string payloads borrowed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Item<'a> {
    Uint(u64),
    /// A negative integer: the value is `-1 - n`.
    Neg(u64),
    Bytes(&'a [u8]),
    Text(&'a [u8]),
    /// An array of this many items, which follow.
    Array(u64),
    /// A map of this many pairs, which follow.
    Map(u64),
    /// A tag; its item follows.
    Tag(u64),
    /// A float (its bits are not needed here) or a simple value.
    Simple,
}

/// Why a frame could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// The input ended inside an item.
    Truncated,
    /// An indefinite length or a reserved additional-information value.
    Unsupported,
    /// Nested deeper than [`MAX_CBOR_DEPTH`].
    TooDeep,
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Error::Truncated => "CBOR item truncated",
            Error::Unsupported => "CBOR indefinite length or reserved head",
            Error::TooDeep => "CBOR nested too deep",
        })
    }
}

/// A cursor over CBOR bytes.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    /// Bytes consumed so far.
    pub fn pos(&self) -> usize {
        self.pos
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], Error> {
        let end = self.pos.checked_add(n).ok_or(Error::Truncated)?;
        let s = self.buf.get(self.pos..end).ok_or(Error::Truncated)?;
        self.pos = end;
        Ok(s)
    }

    /// The next item's head (and a string's bytes).
    pub fn next(&mut self) -> Result<Item<'a>, Error> {
        let [b] = *self.take(1)? else {
            return Err(Error::Truncated);
        };
        let major = b >> 5;
        let info = b & 0x1F;
        let arg = match info {
            0..=23 => u64::from(info),
            24..=27 => {
                let n = 1usize << (info - 24);
                self.take(n)?
                    .iter()
                    .fold(0u64, |acc, &x| (acc << 8) | u64::from(x))
            }
            // Major 7 with 28..=30 is reserved, 31 is "break"; elsewhere 31
            // is an indefinite length.
            _ => return Err(Error::Unsupported),
        };
        Ok(match major {
            0 => Item::Uint(arg),
            1 => Item::Neg(arg),
            2 | 3 => {
                let n = usize::try_from(arg).map_err(|_| Error::Truncated)?;
                let s = self.take(n)?;
                if major == 2 {
                    Item::Bytes(s)
                } else {
                    Item::Text(s)
                }
            }
            4 => Item::Array(arg),
            5 => Item::Map(arg),
            6 => Item::Tag(arg),
            _ => Item::Simple,
        })
    }

    /// Skips one whole item (containers with everything in them).
    pub fn skip(&mut self) -> Result<(), Error> {
        // Items still to skip at each open level; iterative, bounded.
        let mut stack = [0u64; MAX_CBOR_DEPTH];
        let mut depth = 0usize;
        let mut left = 1u64;
        loop {
            while left == 0 {
                if depth == 0 {
                    return Ok(());
                }
                depth -= 1;
                left = stack[depth];
            }
            left -= 1;
            let inner = match self.next()? {
                Item::Array(n) => n,
                Item::Map(n) => n.checked_mul(2).ok_or(Error::Truncated)?,
                Item::Tag(_) => 1,
                _ => 0,
            };
            if inner > 0 {
                // More items than bytes left cannot be real.
                if inner > (self.buf.len() - self.pos) as u64 {
                    return Err(Error::Truncated);
                }
                if depth == MAX_CBOR_DEPTH {
                    return Err(Error::TooDeep);
                }
                stack[depth] = left;
                depth += 1;
                left = inner;
            }
        }
    }

    /// Walks the text keys of a map, handing each key and a reader on its
    /// value to `on`; `on` must consume the value (read or skip it). `Ok`
    /// false when the item is not a map.
    pub fn each_pair(
        &mut self,
        mut on: impl FnMut(&'a [u8], &mut Reader<'a>) -> Result<(), Error>,
    ) -> Result<bool, Error> {
        let n = match self.next()? {
            Item::Map(n) => n,
            _ => return Ok(false),
        };
        for _ in 0..n {
            match self.next()? {
                Item::Text(k) => on(k, self)?,
                Item::Array(_) | Item::Map(_) | Item::Tag(_) => return Err(Error::Unsupported),
                _ => self.skip()?,
            }
        }
        Ok(true)
    }

    /// An integer item as i64, `None` for anything else (or out of range).
    pub fn int(&mut self) -> Result<Option<i64>, Error> {
        Ok(match self.next()? {
            Item::Uint(n) => i64::try_from(n).ok(),
            Item::Neg(n) => i64::try_from(n).ok().map(|n| -1 - n),
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rosgate_wire::cbor as w;

    #[test]
    fn reads_what_the_gateway_writes() {
        let mut out = Vec::new();
        w::map(&mut out, 3);
        w::text(&mut out, "a");
        w::int(&mut out, -5);
        w::text(&mut out, "b");
        w::array(&mut out, 2);
        w::f64(&mut out, 1.5);
        w::typed_array(&mut out, &[1u32, 2, 3]);
        w::text(&mut out, "c");
        w::bytes(&mut out, &[9; 300]);
        let mut seen = Vec::new();
        let mut r = Reader::new(&out);
        let is_map = r
            .each_pair(|k, v| {
                match k {
                    b"a" => assert_eq!(v.int()?, Some(-5)),
                    b"c" => assert_eq!(v.next()?, Item::Bytes(&[9; 300][..])),
                    _ => v.skip()?,
                }
                seen.push(k.to_vec());
                Ok(())
            })
            .unwrap();
        assert!(is_map);
        assert_eq!(seen, [b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]);
        assert_eq!(r.pos(), out.len());
        let mut r = Reader::new(&out);
        r.skip().unwrap();
        assert_eq!(r.pos(), out.len());
        // Not a map: no pairs, the item is consumed.
        let mut r = Reader::new(&[0x01]);
        assert_eq!(r.each_pair(|_, v| v.skip()), Ok(false));
    }

    #[test]
    fn heads_of_every_width() {
        for n in [
            0u64,
            23,
            24,
            255,
            256,
            65_535,
            65_536,
            u32::MAX as u64 + 1,
            u64::MAX,
        ] {
            let mut out = Vec::new();
            w::uint(&mut out, n);
            assert_eq!(Reader::new(&out).next(), Ok(Item::Uint(n)), "{n}");
        }
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        // Truncated string, truncated head, indefinite length, a huge
        // declared array, deep nesting.
        assert_eq!(Reader::new(&[0x45, 1, 2]).next(), Err(Error::Truncated));
        assert_eq!(Reader::new(&[0x19, 1]).next(), Err(Error::Truncated));
        assert_eq!(Reader::new(&[0x5f]).next(), Err(Error::Unsupported));
        assert_eq!(
            Reader::new(&[0x9b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]).skip(),
            Err(Error::Truncated)
        );
        let deep = vec![0x81u8; 100];
        assert_eq!(Reader::new(&deep).skip(), Err(Error::TooDeep));
        let mut huge = vec![0x5bu8];
        huge.extend_from_slice(&u64::MAX.to_be_bytes());
        assert_eq!(Reader::new(&huge).next(), Err(Error::Truncated));
    }
}
