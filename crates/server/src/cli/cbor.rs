//! CBOR (RFC 8949) frames from the gateway -> JSON text, for the CLI's
//! `topic echo --compression cbor|cbor-raw`: what roslib's decoder makes
//! of them, written as JSON.
//!
//! Mapping: maps (text keys) objects, arrays arrays, text strings, integers
//! and doubles numbers (a non-finite double `null`), `true`/`false`/`null`,
//! byte strings arrays of numbers (the `uint8[]` of `cbor`, the CDR of
//! `cbor-raw`), RFC 8746 typed arrays (tags 64-87, little-endian ones
//! only: the gateway sends no other) arrays of numbers. Anything else
//! (indefinite lengths, other tags, half floats it never sends, nesting
//! past [`MAX_DEPTH`]) makes the frame unreadable: `None`.

use rosgate_wire::encode::json_string;

/// Deepest nesting read (the gateway's own request limit).
const MAX_DEPTH: usize = rosgate_wire::MAX_JSON_DEPTH;

/// The JSON text of the one CBOR item `b` holds, or `None`.
pub fn to_json(b: &[u8]) -> Option<String> {
    let mut r = Reader { b, i: 0 };
    let mut out = Vec::with_capacity(b.len() * 2);
    r.item(&mut out, 0)?;
    if r.i != b.len() {
        return None;
    }
    String::from_utf8(out).ok()
}

struct Reader<'a> {
    b: &'a [u8],
    i: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let s = self.b.get(self.i..self.i.checked_add(n)?)?;
        self.i += n;
        Some(s)
    }

    fn head(&mut self) -> Option<(u8, u8, u64)> {
        let ib = *self.take(1)?.first()?;
        let (major, info) = (ib >> 5, ib & 31);
        let arg = match info {
            0..=23 => u64::from(info),
            24 => u64::from(*self.take(1)?.first()?),
            25 => u64::from(u16::from_be_bytes(self.take(2)?.try_into().ok()?)),
            26 => u64::from(u32::from_be_bytes(self.take(4)?.try_into().ok()?)),
            27 => u64::from_be_bytes(self.take(8)?.try_into().ok()?),
            _ => return None,
        };
        Some((major, info, arg))
    }

    fn item(&mut self, out: &mut Vec<u8>, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        let (major, info, arg) = self.head()?;
        match major {
            0 => out.extend_from_slice(arg.to_string().as_bytes()),
            1 => out.extend_from_slice((-1 - i128::from(arg)).to_string().as_bytes()),
            2 => {
                let bytes = self.take(usize::try_from(arg).ok()?)?;
                numbers(out, bytes.iter().map(|&x| f64::from(x)));
            }
            3 => {
                let s = self.take(usize::try_from(arg).ok()?)?;
                json_string(out, std::str::from_utf8(s).ok()?);
            }
            4 => {
                out.push(b'[');
                for k in 0..arg {
                    if k > 0 {
                        out.push(b',');
                    }
                    self.item(out, depth + 1)?;
                }
                out.push(b']');
            }
            5 => {
                out.push(b'{');
                for k in 0..arg {
                    if k > 0 {
                        out.push(b',');
                    }
                    let (m, _, n) = self.head()?;
                    if m != 3 {
                        return None;
                    }
                    let key = self.take(usize::try_from(n).ok()?)?;
                    json_string(out, std::str::from_utf8(key).ok()?);
                    out.push(b':');
                    self.item(out, depth + 1)?;
                }
                out.push(b'}');
            }
            6 => {
                let (m, _, n) = self.head()?;
                if m != 2 {
                    return None;
                }
                let data = self.take(usize::try_from(n).ok()?)?;
                typed(out, arg, data)?;
            }
            _ => match (info, arg) {
                (20, _) => out.extend_from_slice(b"false"),
                (21, _) => out.extend_from_slice(b"true"),
                (22 | 23, _) => out.extend_from_slice(b"null"),
                (26, bits) => number(out, f64::from(f32::from_bits(bits as u32))),
                (27, bits) => number(out, f64::from_bits(bits)),
                _ => return None,
            },
        }
        Some(())
    }
}

fn number(out: &mut Vec<u8>, x: f64) {
    if x.is_finite() {
        out.extend_from_slice(x.to_string().as_bytes());
    } else {
        out.extend_from_slice(b"null");
    }
}

fn numbers(out: &mut Vec<u8>, xs: impl Iterator<Item = f64>) {
    out.push(b'[');
    for (k, x) in xs.enumerate() {
        if k > 0 {
            out.push(b',');
        }
        number(out, x);
    }
    out.push(b']');
}

/// An RFC 8746 typed array, little-endian (tag 64-87, bit 2 set for LE
/// or the 1-byte kinds): its elements as numbers.
fn typed(out: &mut Vec<u8>, tag: u64, data: &[u8]) -> Option<()> {
    macro_rules! each {
        ($t:ty, $n:expr) => {{
            let chunks = data.chunks_exact($n);
            if !chunks.remainder().is_empty() {
                return None;
            }
            let xs = chunks.map(|c| {
                let mut a = [0u8; $n];
                a.copy_from_slice(c);
                <$t>::from_le_bytes(a) as f64
            });
            numbers(out, xs);
        }};
    }
    match tag {
        64 | 68 => each!(u8, 1),
        69 => each!(u16, 2),
        70 => each!(u32, 4),
        71 => each!(u64, 8),
        72 => each!(i8, 1),
        77 => each!(i16, 2),
        78 => each!(i32, 4),
        79 => each!(i64, 8),
        85 => each!(f32, 4),
        86 => each!(f64, 8),
        _ => return None,
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rosgate_wire::cbor;

    #[test]
    fn frames_read_back_as_json() {
        let mut b = Vec::new();
        cbor::publish(&mut b, "/t", r#"{"a":[1,-2,0.5,"x",null,true],"b":{}}"#).unwrap();
        let j = to_json(&b).unwrap();
        let v: serde_json::Value = serde_json::from_str(&j).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"op":"publish","topic":"/t","msg":{"a":[1,-2,0.5,"x",null,true],"b":{}}})
        );
        let mut b = Vec::new();
        cbor::typed_array(&mut b, &[1.5f32, -2.0]);
        assert_eq!(to_json(&b).unwrap(), "[1.5,-2]");
        let mut b = Vec::new();
        cbor::bytes(&mut b, &[0, 1, 255]);
        assert_eq!(to_json(&b).unwrap(), "[0,1,255]");
        assert_eq!(
            to_json(&[0x9f, 0xff]),
            None,
            "indefinite lengths are refused"
        );
        assert_eq!(to_json(&[0x01, 0x02]), None, "one item only");
    }
}
