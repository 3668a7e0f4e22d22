//! What a WebSocket subscriber in an outgoing encoding decodes
//! (`docs/protocol.md`, "Outgoing encodings"), written apart from the
//! gateway's encoders (`rosgate_wire::cbor`, `png`, `fragment`;
//! `rosgate_ros2::cbor_typed`), so that the simulation checks content, not
//! just the bytes those encoders made:
//!
//! - [`cbor_value`]: one binary message, a CBOR item (RFC 8949, definite
//!   lengths), read as JSON: integers as integers, floats as doubles, byte
//!   strings and RFC 8746 typed arrays (tags 64-87, little-endian ones
//!   only, as rosbridge's `cbor_conversion.py` writes them) as arrays of
//!   numbers, so a typed message compares with the JSON it came from;
//! - [`raw_msg_matches`]: a `cbor-raw` message's CDR, read with the ros2
//!   crate's decoder of ROS 2 samples, against the JSON publish;
//! - [`png_text`]: the JSON text a `{"op":"png","data":..}` frame carries
//!   (base64, RFC 4648; PNG with IHDR/IDAT/IEND, 8-bit RGB, filter type 0
//!   rows; zlib, RFC 1950, with stored deflate blocks, RFC 1951 §3.2.4),
//!   the `\n` padding taken off;
//! - [`Reassembler`]: `{"op":"fragment"}` frames of one message, back to
//!   back, `num` from 0 to `total - 1`, one `id` (an integer from 1, new
//!   per message) and `total` (at least 2), every piece but the last
//!   exactly the subscriber's `fragment_size` characters.
//!
//! Everything here returns `Err` with a description on what a subscriber
//! could not read; nothing panics on the bytes.

use serde_json::{Map, Number, Value};

/// A CBOR item read as JSON (see the module docs).
pub(crate) fn cbor_value(b: &[u8]) -> Result<Value, String> {
    let mut r = Cbor { b, i: 0 };
    let v = r.item(0)?;
    if r.i != b.len() {
        return Err(format!("{} bytes after the CBOR item", b.len() - r.i));
    }
    Ok(v)
}

struct Cbor<'a> {
    b: &'a [u8],
    i: usize,
}

impl Cbor<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], String> {
        let end = self.i.checked_add(n).ok_or("length overflow")?;
        let s = self
            .b
            .get(self.i..end)
            .ok_or_else(|| format!("CBOR cut short at byte {}", self.i))?;
        self.i = end;
        Ok(s)
    }

    /// A head: major type, its 5-bit info, argument.
    fn head(&mut self) -> Result<(u8, u8, u64), String> {
        let ib = self.take(1)?[0];
        let (major, info) = (ib >> 5, ib & 31);
        let arg = match info {
            0..=23 => u64::from(info),
            24 => u64::from(self.take(1)?[0]),
            25 => u64::from(u16::from_be_bytes([self.take(1)?[0], self.take(1)?[0]])),
            26 => {
                let s = self.take(4)?;
                u64::from(u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
            }
            27 => {
                let s = self.take(8)?;
                let mut a = [0u8; 8];
                a.copy_from_slice(s);
                u64::from_be_bytes(a)
            }
            _ => return Err(format!("CBOR head {ib:#x}: indefinite or reserved")),
        };
        Ok((major, info, arg))
    }

    fn len(&mut self, arg: u64) -> Result<usize, String> {
        usize::try_from(arg).map_err(|_| "CBOR length too big".to_string())
    }

    fn item(&mut self, depth: usize) -> Result<Value, String> {
        // The gateway's own bound on JSON nesting: a deeper item is an
        // error here, not a stack overflow.
        if depth > rosgate_wire::MAX_JSON_DEPTH {
            return Err("CBOR nested too deep".into());
        }
        let (major, info, arg) = self.head()?;
        Ok(match major {
            0 => Value::from(arg),
            1 => match i64::try_from(arg) {
                Ok(n) => Value::from(-1 - n),
                Err(_) => num(-1.0 - arg as f64)?,
            },
            2 => {
                let n = self.len(arg)?;
                Value::Array(self.take(n)?.iter().map(|&x| Value::from(x)).collect())
            }
            3 => {
                let n = self.len(arg)?;
                let s =
                    std::str::from_utf8(self.take(n)?).map_err(|e| format!("CBOR text: {e}"))?;
                Value::String(s.to_owned())
            }
            4 => {
                let n = self.len(arg)?;
                let mut v = Vec::with_capacity(n.min(1024));
                for _ in 0..n {
                    v.push(self.item(depth + 1)?);
                }
                Value::Array(v)
            }
            5 => {
                let n = self.len(arg)?;
                let mut m = Map::new();
                for _ in 0..n {
                    let Value::String(k) = self.item(depth + 1)? else {
                        return Err("a CBOR map key that is not text".into());
                    };
                    let v = self.item(depth + 1)?;
                    if m.insert(k.clone(), v).is_some() {
                        return Err(format!("CBOR map key {k:?} twice"));
                    }
                }
                Value::Object(m)
            }
            6 => self.typed_array(arg)?,
            _ => match (info, arg) {
                (20, _) => Value::Bool(false),
                (21, _) => Value::Bool(true),
                (22, _) => Value::Null,
                (25, h) => num(half(h as u16))?,
                (26, f) => num(f64::from(f32::from_bits(f as u32)))?,
                (27, d) => num(f64::from_bits(d))?,
                _ => return Err(format!("CBOR simple value {info}/{arg}")),
            },
        })
    }

    /// An RFC 8746 typed array (tag `tag` over a byte string) as numbers.
    fn typed_array(&mut self, tag: u64) -> Result<Value, String> {
        let (major, _, arg) = self.head()?;
        if major != 2 {
            return Err(format!("CBOR tag {tag} over major type {major}, not bytes"));
        }
        let n = self.len(arg)?;
        let b = self.take(n)?;
        // RFC 8746 §2.1: tags 64-87 are typed arrays; bit 2 of the tag is
        // little-endian, bits 0-1 the size, bit 4 float, bit 3 signed.
        let (size, float, signed, le) = match tag {
            64..=87 => {
                let t = tag - 64;
                let float = t & 0b1_0000 != 0;
                let ll = t & 0b11;
                let size = if float { 2usize << ll } else { 1usize << ll };
                (size, float, t & 0b1000 != 0, t & 0b100 != 0 || ll == 0)
            }
            _ => return Err(format!("CBOR tag {tag}: not a typed array")),
        };
        if !le || size > 8 {
            return Err(format!(
                "CBOR tag {tag}: a big-endian or 128-bit typed array"
            ));
        }
        if b.len() % size != 0 {
            return Err(format!(
                "typed array of {} bytes, elements of {size}",
                b.len()
            ));
        }
        let mut out = Vec::with_capacity(b.len() / size);
        for e in b.chunks(size) {
            let mut a = [0u8; 8];
            a[..size].copy_from_slice(e);
            let raw = u64::from_le_bytes(a);
            out.push(match (float, signed, size) {
                (true, _, 2) => num(half(raw as u16))?,
                (true, _, 4) => num(f64::from(f32::from_bits(raw as u32)))?,
                (true, _, _) => num(f64::from_bits(raw))?,
                (false, false, _) => Value::from(raw),
                (false, true, _) => {
                    let shift = 64 - 8 * size as u32;
                    Value::from(((raw << shift) as i64) >> shift)
                }
            });
        }
        Ok(Value::Array(out))
    }
}

/// A float as JSON (non-finite ones have no JSON number: an error here,
/// the simulation's messages have none).
fn num(f: f64) -> Result<Value, String> {
    Number::from_f64(f)
        .map(Value::Number)
        .ok_or_else(|| format!("non-finite float {f} in CBOR"))
}

/// An IEEE 754 half-precision float.
fn half(h: u16) -> f64 {
    let exp = (h >> 10) & 0x1f;
    let mant = f64::from(h & 0x3ff);
    let v = match exp {
        0 => mant * 2f64.powi(-24),
        31 if mant == 0.0 => f64::INFINITY,
        31 => f64::NAN,
        e => (1.0 + mant / 1024.0) * 2f64.powi(i32::from(e) - 15),
    };
    if h & 0x8000 != 0 {
        -v
    } else {
        v
    }
}

/// Whether two JSON values are the same message: numbers by value
/// (an integer and a float of the same value are the same, as after a
/// CBOR double), objects by their members whatever the order.
pub(crate) fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            if let (Some(p), Some(q)) = (x.as_i64(), y.as_i64()) {
                return p == q;
            }
            if let (Some(p), Some(q)) = (x.as_u64(), y.as_u64()) {
                return p == q;
            }
            x.as_f64() == y.as_f64()
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same_json(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w)))
        }
        _ => a == b,
    }
}

/// Whether the `msg` of a `cbor-raw` message (`{"secs","nsecs","bytes"}`,
/// already read as JSON by [`cbor_value`], so `bytes` is a list of
/// numbers) carries `want` as CDR of `ty`: the 4-byte encapsulation
/// header, then the fields, decoded with the ros2 crate's CDR decoder
/// (`rosgate_ros2::cdr::decode_json`, the reader of ROS 2 samples, not the
/// encoder the gateway used); a `uint8[]` it writes as base64 text compares
/// with a list of numbers. Returns `(secs, nsecs)`.
pub(crate) fn raw_msg_matches(
    types: &rosgate_ros2::registry::Registry,
    ty: &str,
    msg: &Value,
    want: &Value,
) -> Result<(i64, u64), String> {
    let members = msg.as_object().map_or(0, |m| m.len());
    let secs = msg.get("secs").and_then(Value::as_i64);
    let nsecs = msg.get("nsecs").and_then(Value::as_u64);
    let bytes = msg.get("bytes").and_then(rosgate_ros2::cdr::octets);
    let (Some(secs), Some(nsecs), Some(bytes), 3) = (secs, nsecs, bytes, members) else {
        return Err(format!(
            "a cbor-raw msg that is not {{secs, nsecs, bytes}}: {msg}"
        ));
    };
    if nsecs >= 1_000_000_000 {
        return Err(format!("cbor-raw nsecs {nsecs}"));
    }
    cdr_matches(types, ty, &bytes, want)?;
    Ok((secs, nsecs))
}

/// Whether `bytes` are CDR of `ty` (the 4-byte little-endian encapsulation
/// header, then the fields) that decodes to `want`, decoded as
/// [`raw_msg_matches`] does.
pub(crate) fn cdr_matches(
    types: &rosgate_ros2::registry::Registry,
    ty: &str,
    bytes: &[u8],
    want: &Value,
) -> Result<(), String> {
    if !bytes.starts_with(&[0, 1, 0, 0]) {
        return Err(format!(
            "CDR without the little-endian header: {bytes:02x?}"
        ));
    }
    let mut json = Vec::new();
    rosgate_ros2::cdr::decode_json(types, ty, bytes, &mut json)
        .map_err(|e| format!("CDR of {ty}: {e:?}"))?;
    let got: Value =
        serde_json::from_slice(&json).map_err(|e| format!("decoded CDR is not JSON: {e}"))?;
    if same_octets(&got, want) {
        Ok(())
    } else {
        Err(format!("its CDR reads {got}, the message is {want}"))
    }
}

/// A Foxglove server's message data message (`docs/protocol.md`, "Foxglove
/// WebSocket protocol"; the protocol's binary layout, read here apart
/// from `rosgate_wire::foxglove::server`): opcode 1, the subscription id
/// (u32), the log time (u64 ns), both little-endian, then the payload.
pub(crate) fn fx_message_data(b: &[u8]) -> Result<(u32, u64, &[u8]), String> {
    if b.len() < 13 || b[0] != 1 {
        return Err(format!(
            "not a message data message: {:02x?}",
            &b[..b.len().min(16)]
        ));
    }
    let mut sub = [0u8; 4];
    sub.copy_from_slice(&b[1..5]);
    let mut ns = [0u8; 8];
    ns.copy_from_slice(&b[5..13]);
    Ok((u32::from_le_bytes(sub), u64::from_le_bytes(ns), &b[13..]))
}

/// [`same_json`], but a `uint8[]` may be base64 text on one side and a
/// list of numbers on the other.
pub(crate) fn same_octets(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::String(_), Value::Array(_)) | (Value::Array(_), Value::String(_)) => {
            let (x, y) = (rosgate_ros2::cdr::octets(a), rosgate_ros2::cdr::octets(b));
            x.is_some() && x == y
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same_octets(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_octets(v, w)))
        }
        _ => same_json(a, b),
    }
}

/// Standard base64 with padding, decoded.
fn unbase64(s: &str) -> Result<Vec<u8>, String> {
    let b = s.as_bytes();
    if b.len() % 4 != 0 {
        return Err(format!("base64 of {} characters", b.len()));
    }
    let val = |c: u8| -> Result<u32, String> {
        Ok(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return Err(format!("base64 character {:?}", c as char)),
        } as u32)
    };
    let mut out = Vec::with_capacity(b.len() / 4 * 3);
    for (k, q) in b.chunks(4).enumerate() {
        let last = k + 1 == b.len() / 4;
        let pad = q.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && !last) {
            return Err("misplaced base64 padding".into());
        }
        let mut n = 0u32;
        for &c in &q[..4 - pad] {
            n = n << 6 | val(c)?;
        }
        n <<= 6 * pad as u32;
        let bytes = n.to_be_bytes();
        out.extend_from_slice(&bytes[1..4 - pad]);
    }
    Ok(out)
}

/// The JSON text a `png` frame's `data` carries (see the module docs).
pub(crate) fn png_text(data: &str) -> Result<String, String> {
    let png = unbase64(data)?;
    let sig = [0x89, b'P', b'N', b'G', b'\r', b'\n', 0x1a, b'\n'];
    if !png.starts_with(&sig) {
        return Err("not a PNG (signature)".into());
    }
    let mut i = sig.len();
    let (mut w, mut h) = (0usize, 0usize);
    let mut z = Vec::new();
    let mut ended = false;
    while i < png.len() {
        let head = png.get(i..i + 8).ok_or("PNG chunk head cut short")?;
        let n = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) as usize;
        let kind = &head[4..8];
        let body = png
            .get(i + 8..i + 8 + n)
            .ok_or("PNG chunk body cut short")?;
        png.get(i + 8 + n..i + 12 + n)
            .ok_or("PNG chunk CRC missing")?;
        match kind {
            b"IHDR" => {
                if body.len() != 13 || body[8..13] != [8, 2, 0, 0, 0] {
                    return Err(format!("PNG IHDR {body:?}: not 8-bit RGB, plain"));
                }
                w = u32::from_be_bytes([body[0], body[1], body[2], body[3]]) as usize;
                h = u32::from_be_bytes([body[4], body[5], body[6], body[7]]) as usize;
            }
            b"IDAT" => z.extend_from_slice(body),
            b"IEND" => ended = true,
            other => return Err(format!("PNG chunk {:?}", String::from_utf8_lossy(other))),
        }
        i += 12 + n;
    }
    if !ended || w == 0 || h == 0 {
        return Err("PNG without IEND or IHDR".into());
    }
    let raw = inflate_stored(&z)?;
    let row = 3 * w;
    if raw.len() != h * (row + 1) {
        return Err(format!("PNG data of {} bytes for {w}x{h}", raw.len()));
    }
    let mut text = Vec::with_capacity(h * row);
    for r in raw.chunks(row + 1) {
        if r[0] != 0 {
            return Err(format!("PNG row filter {}", r[0]));
        }
        text.extend_from_slice(&r[1..]);
    }
    while text.last() == Some(&b'\n') {
        text.pop();
    }
    String::from_utf8(text).map_err(|e| format!("PNG pixels not UTF-8: {e}"))
}

/// A zlib stream of stored deflate blocks, inflated.
fn inflate_stored(z: &[u8]) -> Result<Vec<u8>, String> {
    if z.len() < 6 || z[0] & 0x0f != 8 || (u16::from(z[0]) << 8 | u16::from(z[1])) % 31 != 0 {
        return Err("not a zlib stream".into());
    }
    let mut i = 2;
    let mut out = Vec::new();
    loop {
        let hdr = *z.get(i).ok_or("deflate cut short")?;
        if hdr >> 1 != 0 {
            return Err(format!("deflate block type {}: not stored", hdr >> 1 & 3));
        }
        let b = z.get(i + 1..i + 5).ok_or("stored block head cut short")?;
        let len = u16::from_le_bytes([b[0], b[1]]);
        if len != !u16::from_le_bytes([b[2], b[3]]) {
            return Err("stored block LEN/NLEN mismatch".into());
        }
        let data = z
            .get(i + 5..i + 5 + len as usize)
            .ok_or("stored block cut short")?;
        out.extend_from_slice(data);
        i += 5 + len as usize;
        if hdr & 1 == 1 {
            break;
        }
    }
    let adler = z.get(i..i + 4).ok_or("zlib Adler-32 missing")?;
    let (mut a, mut b) = (1u32, 0u32);
    for &x in &out {
        a = (a + u32::from(x)) % 65521;
        b = (b + a) % 65521;
    }
    if u32::from_be_bytes([adler[0], adler[1], adler[2], adler[3]]) != b << 16 | a {
        return Err("zlib Adler-32 mismatch".into());
    }
    if i + 4 != z.len() {
        return Err("bytes after the zlib stream".into());
    }
    Ok(out)
}

/// The `fragment` frames of one outgoing message, as a subscriber
/// receives them: back to back, in order.
#[derive(Debug)]
pub(crate) struct Reassembler {
    id: u64,
    total: u64,
    next: u64,
    size: usize,
    text: String,
}

impl Reassembler {
    /// Starts with the first frame `v` of a message for a subscription of
    /// `fragment_size` `size` (taken as at least 256); `last_id`: the id of
    /// the previous fragmented message this subscriber received (ids grow).
    pub(crate) fn start(v: &Value, size: usize, last_id: u64) -> Result<Reassembler, String> {
        let mut r = Reassembler {
            id: 0,
            total: 0,
            next: 0,
            size: size.max(rosgate_wire::fragment::MIN_FRAGMENT_CHARS),
            text: String::new(),
        };
        let (id, num, total, _) = piece(v)?;
        if id <= last_id || num != 0 || total < 2 {
            return Err(format!(
                "a first fragment with id {id} (after {last_id}), num {num}, total {total}"
            ));
        }
        r.id = id;
        r.total = total;
        Ok(r)
    }

    /// The message's id.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// Takes frame `v`; the whole text once the last piece is in.
    pub(crate) fn push(&mut self, v: &Value) -> Result<Option<String>, String> {
        let (id, num, total, data) = piece(v)?;
        if (id, num, total) != (self.id, self.next, self.total) {
            return Err(format!(
                "fragment id {id} num {num} total {total}, expected id {} num {} total {}",
                self.id, self.next, self.total
            ));
        }
        let chars = data.chars().count();
        let last = num + 1 == total;
        if chars > self.size || (!last && chars != self.size) || chars == 0 {
            return Err(format!(
                "fragment {num}/{total} of {chars} characters, fragment_size {}",
                self.size
            ));
        }
        self.text.push_str(data);
        self.next += 1;
        Ok(last.then(|| std::mem::take(&mut self.text)))
    }
}

/// A fragment frame's id, num, total and data.
fn piece(v: &Value) -> Result<(u64, u64, u64, &str), String> {
    let keys: Vec<&str> = v
        .as_object()
        .map(|m| m.keys().map(String::as_str).collect())
        .unwrap_or_default();
    let get = |k: &str| v.get(k).and_then(Value::as_u64);
    match (
        get("id"),
        get("num"),
        get("total"),
        v.get("data").and_then(Value::as_str),
    ) {
        (Some(id), Some(num), Some(total), Some(data)) if keys.len() == 5 => {
            Ok((id, num, total, data))
        }
        _ => Err(format!("a malformed fragment frame {v}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rosgate_wire::{cbor, fragment, png};

    #[test]
    fn cbor_reads_back_what_the_wire_writes() {
        let msg =
            r#"{"n":12345678901234567890,"f":-1.5e3,"s":"é","a":[1,null,true,{"x":[]}],"m":-7}"#;
        let mut out = Vec::new();
        cbor::publish(&mut out, "/t", msg).expect("valid");
        let v = cbor_value(&out).expect("decodes");
        let want: Value =
            serde_json::from_str(&format!(r#"{{"op":"publish","topic":"/t","msg":{msg}}}"#))
                .expect("json");
        assert!(same_json(&v, &want), "{v} vs {want}");
        assert!(!same_json(&v, &serde_json::json!({"op":"publish"})));
        // Typed arrays: uint16 LE (tag 69) and int8 (tag 72), a byte string.
        let mut t = Vec::new();
        cbor::array(&mut t, 3);
        cbor::tag(&mut t, 69);
        cbor::bytes(&mut t, &[1, 0, 0xff, 0xff]);
        cbor::tag(&mut t, 72);
        cbor::bytes(&mut t, &[0xff, 2]);
        cbor::bytes(&mut t, &[7, 8]);
        let v = cbor_value(&t).expect("decodes");
        assert_eq!(v, serde_json::json!([[1, 65535], [-1, 2], [7, 8]]));
        assert!(cbor_value(&out[..out.len() - 1]).is_err());
        assert!(cbor_value(&[0x9f]).is_err());
    }

    #[test]
    fn cbor_raw_reads_back_through_cdr() {
        let types = rosgate_ros2::registry::Registry::bundled_shared();
        let ty = "std_msgs/msg/UInt8MultiArray";
        let msg = serde_json::json!({"layout":{"dim":[],"data_offset":7},"data":[1,2,255]});
        let cdr = rosgate_ros2::cdr::encode(&*types, ty, &msg).expect("fits");
        let mut out = Vec::new();
        cbor::publish_raw(&mut out, "/u8", 5, 7, &cdr);
        let v = cbor_value(&out).expect("decodes");
        assert_eq!(v["topic"], "/u8");
        assert_eq!(raw_msg_matches(&types, ty, &v["msg"], &msg), Ok((5, 7)));
        let other = serde_json::json!({"layout":{"dim":[],"data_offset":7},"data":[1,2]});
        assert!(raw_msg_matches(&types, ty, &v["msg"], &other).is_err());
    }

    #[test]
    fn png_reads_back_the_text() {
        for text in ["{}", r#"{"op":"publish","topic":"/é","msg":{"data":"x"}}"#] {
            let mut f = Vec::new();
            png::frame(&mut f, text);
            let v: Value = serde_json::from_slice(&f).expect("json");
            let back = png_text(v["data"].as_str().expect("data")).expect("decodes");
            let a: Value = serde_json::from_str(&back).expect("json");
            let b: Value = serde_json::from_str(text).expect("json");
            assert_eq!(a, b);
        }
        assert!(png_text("AAAA").is_err());
    }

    #[test]
    fn fragments_reassemble_in_order_only() {
        let text = "ab".repeat(300);
        let frames: Vec<Value> = {
            let mut out = Vec::new();
            for p in fragment::split(&text, 256).expect("cut") {
                p.write(&mut out, rosgate_wire::raw::Raw::from_valid_json("3"));
            }
            out.split(|&b| b == b'\n')
                .filter(|l| !l.is_empty())
                .map(|l| serde_json::from_slice(l).expect("json"))
                .collect()
        };
        assert_eq!(frames.len(), 3);
        let mut r = Reassembler::start(&frames[0], 256, 2).expect("first");
        assert_eq!(r.push(&frames[0]), Ok(None));
        assert_eq!(r.push(&frames[1]), Ok(None));
        assert_eq!(r.push(&frames[2]), Ok(Some(text.clone())));
        assert!(Reassembler::start(&frames[0], 256, 3).is_err());
        assert!(Reassembler::start(&frames[1], 256, 0).is_err());
        let mut r = Reassembler::start(&frames[0], 256, 0).expect("first");
        assert!(r.push(&frames[1]).is_err());
        let mut r = Reassembler::start(&frames[0], 300, 0).expect("first");
        assert!(r.push(&frames[0]).is_err());
    }
}
