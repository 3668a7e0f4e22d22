//! The `images` scenario's message: a `sensor_msgs/msg/Image` (rgb8) as
//! the publisher writes it, and the three ways a WebSocket subscriber can
//! receive it back, decoded just far enough to check it.
//!
//! What it owns: the image's layout (the publisher's JSON line, the pixel
//! pattern) and the decoders that find the publish stamp, the sequence
//! number and the pixel data in
//! - a text frame: rosbridge JSON, `data` (uint8[]) as a base64 string;
//! - a binary frame, `compression: "cbor"`: the publish map in CBOR, `data`
//!   a byte string when the gateway knows the type (rosbridge's
//!   `BYTESTREAM_TYPES`), else the base64 text or an array;
//! - a binary frame, `compression: "cbor-raw"`: `{"op":"publish",
//!   "topic":..,"msg":{"secs":..,"nsecs":..,"bytes":<CDR>}}`, the CDR being
//!   the serialized Image: the 4-byte encapsulation header, then
//!   `Header{stamp{sec:int32,nanosec:uint32},frame_id:string}`, `height`,
//!   `width` (uint32), `encoding` (string), `is_bigendian` (uint8), `step`
//!   (uint32), `data` (`sequence<uint8>`), each aligned to its size from the
//!   end of the encapsulation header (OMG DDS-XTypes 1.3 §7.4.1, CDR as
//!   rmw uses it: a string is a uint32 length counting its NUL, then the
//!   bytes and the NUL).
//!
//! Invariants:
//! - the stamp is the message's intended send time (ns on the run's clock)
//!   and `frame_id` its sequence number in decimal: the latency and the
//!   loss accounting need nothing else from the message;
//! - the pixel data is checked by length and by its first and last
//!   [`SAMPLE`] bytes (the pattern is the same for every message; the
//!   sequence number is what tells messages apart), so checking a frame
//!   costs the same whatever the image size;
//! - a decoder never panics on what the gateway sends: anything off is a
//!   [`Bad`] with the reason.

use std::fmt;
use std::str::FromStr;

use memchr::memmem;
use serde::Deserialize;

use crate::cbor::{self, Item, Reader};
use crate::payload::push_u64;

/// Bytes compared at each end of the pixel data (and of its base64 form).
pub const SAMPLE: usize = 64;

/// The ROS type the publisher advertises and subscribers name.
pub const IMAGE_TYPE: &str = "sensor_msgs/msg/Image";

/// An rgb8 image size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageSize {
    pub width: u32,
    pub height: u32,
}

impl ImageSize {
    /// Bytes per row (rgb8: 3 per pixel).
    pub fn step(self) -> u32 {
        self.width * 3
    }

    /// Bytes of pixel data.
    pub fn data_len(self) -> usize {
        self.step() as usize * self.height as usize
    }
}

impl FromStr for ImageSize {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "640x480" => Ok(ImageSize {
                width: 640,
                height: 480,
            }),
            "1280x720" => Ok(ImageSize {
                width: 1280,
                height: 720,
            }),
            _ => Err(format!("image size {s:?}: 640x480 or 1280x720")),
        }
    }
}

impl fmt::Display for ImageSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}", self.width, self.height)
    }
}

/// How a subscriber asks for its messages (rosbridge's `compression`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Encoding {
    Json,
    Cbor,
    CborRaw,
}

impl Encoding {
    pub const ALL: [Encoding; 3] = [Encoding::Json, Encoding::Cbor, Encoding::CborRaw];

    pub fn name(self) -> &'static str {
        match self {
            Encoding::Json => "json",
            Encoding::Cbor => "cbor",
            Encoding::CborRaw => "cbor-raw",
        }
    }

    /// The subscribe request's `compression`, if any.
    pub fn compression(self) -> Option<&'static str> {
        match self {
            Encoding::Json => None,
            Encoding::Cbor => Some("cbor"),
            Encoding::CborRaw => Some("cbor-raw"),
        }
    }
}

impl FromStr for Encoding {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Encoding::ALL
            .into_iter()
            .find(|e| e.name() == s)
            .ok_or_else(|| format!("unknown encoding {s:?} (json|cbor|cbor-raw)"))
    }
}

/// Parses `--encodings`: a comma-separated list, `mix` meaning all three;
/// subscribers take them in turn.
pub fn parse_encodings(s: &str) -> Result<Vec<Encoding>, String> {
    let mut out = Vec::new();
    for part in s.split(',') {
        match part.trim() {
            "mix" => out.extend(Encoding::ALL),
            p => out.push(p.parse()?),
        }
    }
    if out.is_empty() {
        return Err("--encodings is empty".into());
    }
    Ok(out)
}

/// What a subscriber learned from one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    pub seq: u64,
    /// Intended send time, ns on the run's clock.
    pub stamp_ns: u64,
    /// The encoding the frame turned out to be in.
    pub encoding: Encoding,
}

/// A frame that is not the image we sent, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bad(pub String);

impl fmt::Display for Bad {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn bad<T>(why: impl Into<String>) -> Result<T, Bad> {
    Err(Bad(why.into()))
}

impl From<cbor::Error> for Bad {
    fn from(e: cbor::Error) -> Self {
        Bad(e.to_string())
    }
}

/// The image every message carries, in both forms, and the topic.
#[derive(Debug, Clone)]
pub struct Image {
    pub size: ImageSize,
    pub topic: String,
    /// The pixel bytes.
    data: Vec<u8>,
    /// Their base64 text, as the JSON line carries them.
    b64: String,
}

impl Image {
    pub fn new(size: ImageSize, topic: &str) -> Self {
        // A pattern whose period (251, prime) is not a multiple of the row
        // length, so a shifted or truncated copy fails the end samples.
        let data: Vec<u8> = (0..size.data_len()).map(|i| (i % 251) as u8).collect();
        let b64 = rosgate_wire::ws::handshake::base64(&data);
        Image {
            size,
            topic: topic.to_string(),
            data,
            b64,
        }
    }

    /// Appends the publisher's TCP line: a rosbridge `publish` of the image
    /// stamped `stamp_ns` with `frame_id` `seq`. The header comes first and
    /// `data` last, so a JSON subscriber finds the stamp in the first bytes
    /// and the data's length from the end.
    pub fn publish_line(&self, out: &mut Vec<u8>, seq: u64, stamp_ns: u64) {
        out.extend_from_slice(b"{\"op\":\"publish\",\"topic\":\"");
        out.extend_from_slice(self.topic.as_bytes());
        out.extend_from_slice(b"\",\"msg\":");
        self.push_msg(out, seq, stamp_ns);
        out.extend_from_slice(b"}\n");
    }

    fn push_msg(&self, out: &mut Vec<u8>, seq: u64, stamp_ns: u64) {
        let s = self.size;
        out.extend_from_slice(b"{\"header\":{\"stamp\":{\"sec\":");
        push_u64(out, stamp_ns / 1_000_000_000);
        out.extend_from_slice(b",\"nanosec\":");
        push_u64(out, stamp_ns % 1_000_000_000);
        out.extend_from_slice(b"},\"frame_id\":\"");
        push_u64(out, seq);
        out.extend_from_slice(b"\"},\"height\":");
        push_u64(out, u64::from(s.height));
        out.extend_from_slice(b",\"width\":");
        push_u64(out, u64::from(s.width));
        out.extend_from_slice(b",\"encoding\":\"rgb8\",\"is_bigendian\":0,\"step\":");
        push_u64(out, u64::from(s.step()));
        out.extend_from_slice(b",\"data\":\"");
        out.extend_from_slice(self.b64.as_bytes());
        out.extend_from_slice(b"\"}");
    }

    /// Bytes of one publish line.
    pub fn line_len_hint(&self) -> usize {
        self.b64.len() + 256 + self.topic.len()
    }

    /// Decodes a text frame (rosbridge JSON).
    pub fn decode_text(&self, frame: &[u8]) -> Result<Seen, Bad> {
        let (seq, stamp_ns, data) = match self.fast_json(frame) {
            Some(v) => v,
            None => slow_json(frame, &self.topic)?,
        };
        self.check_b64(data)?;
        Ok(Seen {
            seq,
            stamp_ns,
            encoding: Encoding::Json,
        })
    }

    /// The JSON frame laid out as the publisher wrote the message and the
    /// gateway frames it (`{"op":"publish","topic":..,"msg":<verbatim>}`,
    /// crates/wire/src/encode.rs): fields found by position, not parsed.
    /// `None` sends the frame to [`slow_json`].
    fn fast_json<'a>(&self, f: &'a [u8]) -> Option<(u64, u64, &'a [u8])> {
        let rest = f.strip_prefix(b"{\"op\":\"publish\",\"topic\":\"")?;
        let rest = rest.strip_prefix(self.topic.as_bytes())?;
        let rest = rest.strip_prefix(b"\",\"msg\":{\"header\":{\"stamp\":{\"sec\":")?;
        let (sec, rest) = leading_u64(rest)?;
        let rest = rest.strip_prefix(b",\"nanosec\":")?;
        let (nsec, rest) = leading_u64(rest)?;
        let rest = rest.strip_prefix(b"},\"frame_id\":\"")?;
        let (seq, rest) = leading_u64(rest)?;
        let rest = rest.strip_prefix(b"\"},")?;
        // The scalar fields between header and data are short.
        let head = &rest[..rest.len().min(256)];
        let at = memmem::find(head, b"\"data\":\"")? + 8;
        let data = rest.get(at..)?.strip_suffix(b"\"}}")?;
        if nsec >= 1_000_000_000 {
            return None;
        }
        Some((seq, sec.checked_mul(1_000_000_000)? + nsec, data))
    }

    /// Decodes a binary frame (`cbor` or `cbor-raw`).
    pub fn decode_binary(&self, frame: &[u8]) -> Result<Seen, Bad> {
        let mut r = Reader::new(frame);
        let mut op_ok = false;
        let mut topic_ok = false;
        let mut found: Option<Seen> = None;
        let mut err: Option<Bad> = None;
        let is_map = r.each_pair(|k, v| {
            match k {
                b"op" => op_ok = v.next()? == Item::Text(b"publish"),
                b"topic" => topic_ok = v.next()? == Item::Text(self.topic.as_bytes()),
                b"msg" => match self.cbor_msg(v) {
                    Ok(s) => found = Some(s),
                    Err(e) => err = Some(e),
                },
                _ => v.skip()?,
            }
            Ok(())
        })?;
        if !is_map {
            return bad("binary frame is not a CBOR map");
        }
        if r.pos() != frame.len() {
            return bad("bytes after the CBOR map");
        }
        if let Some(e) = err {
            return Err(e);
        }
        if !op_ok || !topic_ok {
            return bad("not a publish on our topic");
        }
        found.ok_or_else(|| Bad("publish without msg".into()))
    }

    /// The `msg` value of a CBOR publish: `{"secs","nsecs","bytes"}`
    /// (cbor-raw) or the Image's fields (cbor).
    fn cbor_msg(&self, r: &mut Reader<'_>) -> Result<Seen, Bad> {
        let mut raw: Option<Result<(u64, u64), Bad>> = None;
        let mut sec: Option<i64> = None;
        let mut nsec: Option<i64> = None;
        let mut frame_id: Option<&[u8]> = None;
        let mut data: Option<Result<(), Bad>> = None;
        let mut walk_err: Option<cbor::Error> = None;
        let is_map = r.each_pair(|k, v| {
            match k {
                b"bytes" => {
                    raw = Some(match v.next()? {
                        Item::Bytes(b) => self.check_cdr(b),
                        _ => bad("cbor-raw bytes is not a byte string"),
                    })
                }
                b"header" => {
                    v.each_pair(|k, v| {
                        match k {
                            b"stamp" => {
                                v.each_pair(|k, v| {
                                    match k {
                                        b"sec" | b"secs" => sec = v.int()?,
                                        b"nanosec" | b"nsecs" => nsec = v.int()?,
                                        _ => v.skip()?,
                                    }
                                    Ok(())
                                })?;
                            }
                            b"frame_id" => match v.next()? {
                                Item::Text(t) => frame_id = Some(t),
                                _ => frame_id = None,
                            },
                            _ => v.skip()?,
                        }
                        Ok(())
                    })?;
                }
                b"data" => {
                    data = Some(match v.next()? {
                        Item::Bytes(b) => self.check_raw(b),
                        // Without the message type: the JSON string as text.
                        Item::Text(t) => self.check_b64(t),
                        Item::Array(n) => {
                            for _ in 0..n {
                                if let Err(e) = v.skip() {
                                    walk_err = Some(e);
                                    break;
                                }
                            }
                            if n as usize == self.size.data_len() {
                                Ok(())
                            } else {
                                bad(format!("data array of {n} items"))
                            }
                        }
                        _ => bad("data is neither bytes, text nor an array"),
                    });
                    if let Some(e) = walk_err {
                        return Err(e);
                    }
                }
                _ => v.skip()?,
            }
            Ok(())
        })?;
        if !is_map {
            return bad("msg is not a map");
        }
        if let Some(r) = raw {
            let (seq, stamp_ns) = r?;
            return Ok(Seen {
                seq,
                stamp_ns,
                encoding: Encoding::CborRaw,
            });
        }
        match data {
            Some(d) => d?,
            None => return bad("cbor msg without data"),
        }
        let (Some(sec), Some(nsec), Some(fid)) = (sec, nsec, frame_id) else {
            return bad("cbor msg without header stamp or frame_id");
        };
        let stamp_ns = stamp_ns(sec, nsec)?;
        let seq = parse_seq(fid)?;
        Ok(Seen {
            seq,
            stamp_ns,
            encoding: Encoding::Cbor,
        })
    }

    /// Checks a serialized Image; returns (seq, stamp_ns).
    fn check_cdr(&self, b: &[u8]) -> Result<(u64, u64), Bad> {
        let img = parse_cdr(b)?;
        let s = self.size;
        if img.height != s.height || img.width != s.width || img.step != s.step() {
            return bad(format!(
                "CDR image {}x{} step {}",
                img.width, img.height, img.step
            ));
        }
        if img.encoding != b"rgb8" {
            return bad("CDR image encoding is not rgb8");
        }
        self.check_raw(img.data)?;
        Ok((
            parse_seq(img.frame_id)?,
            stamp_ns(i64::from(img.sec), i64::from(img.nanosec))?,
        ))
    }

    fn check_raw(&self, d: &[u8]) -> Result<(), Bad> {
        check_ends(d, &self.data, "pixel data")
    }

    fn check_b64(&self, d: &[u8]) -> Result<(), Bad> {
        check_ends(d, self.b64.as_bytes(), "base64 data")
    }

    /// The CDR of this image stamped `stamp_ns`, sequence `seq`, as a ROS 2
    /// publisher serializes it (little-endian): what the gateway forwards
    /// in a cbor-raw frame.
    #[cfg(test)]
    pub fn cdr(&self, seq: u64, stamp_ns: u64) -> Vec<u8> {
        let mut o = vec![0, 1, 0, 0];
        let align = |o: &mut Vec<u8>, n: usize| {
            while (o.len() - 4) % n != 0 {
                o.push(0);
            }
        };
        let string = |o: &mut Vec<u8>, s: &[u8]| {
            o.extend_from_slice(&(s.len() as u32 + 1).to_le_bytes());
            o.extend_from_slice(s);
            o.push(0);
        };
        o.extend_from_slice(&((stamp_ns / 1_000_000_000) as i32).to_le_bytes());
        o.extend_from_slice(&((stamp_ns % 1_000_000_000) as u32).to_le_bytes());
        string(&mut o, seq.to_string().as_bytes());
        align(&mut o, 4);
        o.extend_from_slice(&self.size.height.to_le_bytes());
        o.extend_from_slice(&self.size.width.to_le_bytes());
        string(&mut o, b"rgb8");
        o.push(0);
        align(&mut o, 4);
        o.extend_from_slice(&self.size.step().to_le_bytes());
        o.extend_from_slice(&(self.data.len() as u32).to_le_bytes());
        o.extend_from_slice(&self.data);
        o
    }

    /// The message as the JSON text the publisher sends in `msg`.
    #[cfg(test)]
    pub fn msg_json(&self, seq: u64, stamp_ns: u64) -> String {
        let mut out = Vec::new();
        self.push_msg(&mut out, seq, stamp_ns);
        String::from_utf8(out).unwrap()
    }
}

/// `d` has the length of `want` and the same first and last [`SAMPLE`]
/// bytes.
fn check_ends(d: &[u8], want: &[u8], what: &str) -> Result<(), Bad> {
    if d.len() != want.len() {
        return bad(format!(
            "{what}: {} bytes, expected {}",
            d.len(),
            want.len()
        ));
    }
    let n = SAMPLE.min(d.len());
    if d[..n] != want[..n] || d[d.len() - n..] != want[want.len() - n..] {
        return bad(format!("{what}: content differs"));
    }
    Ok(())
}

fn stamp_ns(sec: i64, nsec: i64) -> Result<u64, Bad> {
    match (u64::try_from(sec), u64::try_from(nsec)) {
        (Ok(s), Ok(n)) if n < 1_000_000_000 => s
            .checked_mul(1_000_000_000)
            .map(|s| s + n)
            .ok_or_else(|| Bad("stamp out of range".into())),
        _ => bad(format!("stamp {sec}.{nsec} is not one we sent")),
    }
}

fn parse_seq(fid: &[u8]) -> Result<u64, Bad> {
    match leading_u64(fid) {
        Some((n, [])) => Ok(n),
        _ => bad(format!(
            "frame_id {:?} is not a sequence number",
            String::from_utf8_lossy(fid)
        )),
    }
}

/// A decimal number at the start of `b` (at least one digit, no overflow)
/// and what follows it.
pub(crate) fn leading_u64(b: &[u8]) -> Option<(u64, &[u8])> {
    let n = b.iter().take_while(|c| c.is_ascii_digit()).count();
    if n == 0 || n > 19 {
        return None;
    }
    let mut v = 0u64;
    for &c in &b[..n] {
        v = v.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
    }
    Some((v, &b[n..]))
}

/// The JSON frame parsed properly: any key order or whitespace. Slow (the
/// whole frame is validated), so only for frames [`Image::fast_json`] did
/// not recognise.
fn slow_json<'a>(frame: &'a [u8], topic: &str) -> Result<(u64, u64, &'a [u8]), Bad> {
    #[derive(Deserialize)]
    struct Frame<'a> {
        op: &'a str,
        topic: &'a str,
        #[serde(borrow)]
        msg: Msg<'a>,
    }
    #[derive(Deserialize)]
    struct Msg<'a> {
        #[serde(borrow)]
        header: Header<'a>,
        data: &'a str,
    }
    #[derive(Deserialize)]
    struct Header<'a> {
        stamp: Stamp,
        frame_id: &'a str,
    }
    #[derive(Deserialize)]
    struct Stamp {
        sec: i64,
        nanosec: i64,
    }
    let f: Frame<'a> = serde_json::from_slice(frame)
        .map_err(|e| Bad(format!("text frame is not an image publish: {e}")))?;
    if f.op != "publish" || f.topic != topic {
        return bad(format!("text frame: op {} on {}", f.op, f.topic));
    }
    let stamp = stamp_ns(f.msg.header.stamp.sec, f.msg.header.stamp.nanosec)?;
    let seq = parse_seq(f.msg.header.frame_id.as_bytes())?;
    Ok((seq, stamp, f.msg.data.as_bytes()))
}

/// The fields of a serialized Image the check reads.
#[derive(Debug, PartialEq, Eq)]
pub struct CdrImage<'a> {
    pub sec: i32,
    pub nanosec: u32,
    pub frame_id: &'a [u8],
    pub height: u32,
    pub width: u32,
    pub encoding: &'a [u8],
    pub step: u32,
    pub data: &'a [u8],
}

/// Reads a CDR-serialized `sensor_msgs/msg/Image` (see the module docs).
pub fn parse_cdr(b: &[u8]) -> Result<CdrImage<'_>, Bad> {
    let little = match b.get(..2) {
        Some([0, 1]) => true,
        Some([0, 0]) => false,
        _ => return bad("CDR: not a plain CDR encapsulation header"),
    };
    let mut c = Cdr {
        b: b.get(4..).unwrap_or_default(),
        pos: 0,
        little,
    };
    let sec = c.u32()? as i32;
    let nanosec = c.u32()?;
    let frame_id = c.string()?;
    let height = c.u32()?;
    let width = c.u32()?;
    let encoding = c.string()?;
    let _is_bigendian = c.take(1)?;
    let step = c.u32()?;
    let n = c.u32()? as usize;
    let data = c.take(n)?;
    Ok(CdrImage {
        sec,
        nanosec,
        frame_id,
        height,
        width,
        encoding,
        step,
        data,
    })
}

/// A cursor over a CDR body (after the encapsulation header, which is
/// where alignment counts from).
struct Cdr<'a> {
    b: &'a [u8],
    pos: usize,
    little: bool,
}

impl<'a> Cdr<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], Bad> {
        let end = self.pos.checked_add(n);
        match end.and_then(|e| self.b.get(self.pos..e)) {
            Some(s) => {
                self.pos += n;
                Ok(s)
            }
            None => bad("CDR: truncated"),
        }
    }

    fn u32(&mut self) -> Result<u32, Bad> {
        self.pos = self.pos.next_multiple_of(4);
        let s = self.take(4)?;
        let a = [s[0], s[1], s[2], s[3]];
        Ok(if self.little {
            u32::from_le_bytes(a)
        } else {
            u32::from_be_bytes(a)
        })
    }

    /// A string without its NUL.
    fn string(&mut self) -> Result<&'a [u8], Bad> {
        let n = self.u32()? as usize;
        let s = self.take(n)?;
        match s.split_last() {
            Some((0, body)) => Ok(body),
            _ => bad("CDR: string without its NUL"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rosgate_wire::cbor as w;

    const TOPIC: &str = "/bench/image";

    fn img() -> Image {
        Image::new(ImageSize::from_str("640x480").unwrap(), TOPIC)
    }

    /// The gateway's JSON frame: the envelope around the verbatim `msg`.
    fn json_frame(i: &Image, seq: u64, stamp: u64) -> Vec<u8> {
        format!(
            "{{\"op\":\"publish\",\"topic\":\"{TOPIC}\",\"msg\":{}}}",
            i.msg_json(seq, stamp)
        )
        .into_bytes()
    }

    /// A `cbor` frame as the gateway writes it when it knows the type:
    /// `data` a byte string (hand-built with the gateway's own writer).
    fn typed_cbor_frame(i: &Image, seq: u64, stamp: u64) -> Vec<u8> {
        let mut o = Vec::new();
        w::map(&mut o, 3);
        w::text(&mut o, "op");
        w::text(&mut o, "publish");
        w::text(&mut o, "topic");
        w::text(&mut o, TOPIC);
        w::text(&mut o, "msg");
        w::map(&mut o, 7);
        w::text(&mut o, "header");
        w::map(&mut o, 2);
        w::text(&mut o, "stamp");
        w::map(&mut o, 2);
        w::text(&mut o, "sec");
        w::int(&mut o, (stamp / 1_000_000_000) as i64);
        w::text(&mut o, "nanosec");
        w::uint(&mut o, stamp % 1_000_000_000);
        w::text(&mut o, "frame_id");
        w::text(&mut o, &seq.to_string());
        w::text(&mut o, "height");
        w::uint(&mut o, 480);
        w::text(&mut o, "width");
        w::uint(&mut o, 640);
        w::text(&mut o, "encoding");
        w::text(&mut o, "rgb8");
        w::text(&mut o, "is_bigendian");
        w::uint(&mut o, 0);
        w::text(&mut o, "step");
        w::uint(&mut o, 1920);
        w::text(&mut o, "data");
        w::bytes(&mut o, &i.data);
        o
    }

    #[test]
    fn json_line_round_trips_through_both_json_paths() {
        let i = img();
        let mut line = Vec::new();
        i.publish_line(&mut line, 42, 3_123_456_789);
        assert_eq!(line.last(), Some(&b'\n'));
        assert!(line.len() <= i.line_len_hint());
        let v: serde_json::Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(v["msg"]["header"]["stamp"]["sec"], 3);
        assert_eq!(v["msg"]["width"], 640);
        let f = json_frame(&i, 42, 3_123_456_789);
        let want = Seen {
            seq: 42,
            stamp_ns: 3_123_456_789,
            encoding: Encoding::Json,
        };
        assert!(i.fast_json(&f).is_some());
        assert_eq!(i.decode_text(&f), Ok(want));
        // Reformatted (key order, spaces): the slow path still reads it.
        let v: serde_json::Value = serde_json::from_slice(&f).unwrap();
        let pretty = serde_json::to_vec_pretty(&v).unwrap();
        assert!(i.fast_json(&pretty).is_none());
        assert_eq!(i.decode_text(&pretty), Ok(want));
    }

    #[test]
    fn json_damage_is_caught() {
        let i = img();
        let f = json_frame(&i, 1, 5);
        // Truncated data, a changed pixel, another topic, garbage.
        let mut cut = f.clone();
        cut.drain(f.len() - 10..f.len() - 6);
        assert!(i.decode_text(&cut).is_err());
        let mut flip = f.clone();
        let n = flip.len();
        flip[n - 5] = if flip[n - 5] == b'A' { b'B' } else { b'A' };
        assert!(i.decode_text(&flip).is_err());
        let other = String::from_utf8(f.clone())
            .unwrap()
            .replace(TOPIC, "/other/topic");
        assert!(i.decode_text(other.as_bytes()).is_err());
        assert!(i.decode_text(b"{\"op\":\"status\"}").is_err());
        assert!(i.decode_text(b"\xff\x00").is_err());
        for n in [0, 1, 40, 100, f.len() - 1] {
            assert!(i.decode_text(&f[..n]).is_err(), "{n}");
        }
    }

    #[test]
    fn typed_cbor_frame_decodes() {
        let i = img();
        let f = typed_cbor_frame(&i, 7, 9_000_000_001);
        assert_eq!(
            i.decode_binary(&f),
            Ok(Seen {
                seq: 7,
                stamp_ns: 9_000_000_001,
                encoding: Encoding::Cbor
            })
        );
        // Every truncation is an error, never a panic.
        for n in (0..f.len()).step_by(997).chain(f.len() - 70..f.len()) {
            assert!(i.decode_binary(&f[..n]).is_err(), "{n}");
        }
        let mut flip = f.clone();
        let n = flip.len();
        flip[n - 1] ^= 1;
        assert!(i.decode_binary(&flip).is_err());
    }

    #[test]
    fn untyped_cbor_frame_from_the_json_conversion() {
        // What `cbor` gives without the message type: the gateway's
        // type-unaware conversion, `data` left as the base64 text.
        let i = img();
        let mut f = Vec::new();
        w::publish(&mut f, TOPIC, &i.msg_json(3, 77)).unwrap();
        assert_eq!(
            i.decode_binary(&f),
            Ok(Seen {
                seq: 3,
                stamp_ns: 77,
                encoding: Encoding::Cbor
            })
        );
    }

    #[test]
    fn cbor_raw_frame() {
        let i = img();
        let cdr = i.cdr(1234, 1_500_000_000);
        let p = parse_cdr(&cdr).unwrap();
        assert_eq!(
            (p.sec, p.nanosec, p.frame_id),
            (1, 500_000_000, &b"1234"[..])
        );
        assert_eq!((p.width, p.height, p.step), (640, 480, 1920));
        assert_eq!(p.data.len(), 921_600);
        let mut f = Vec::new();
        w::publish_raw(&mut f, TOPIC, 1_700_000_000, 5, &cdr);
        assert_eq!(
            i.decode_binary(&f),
            Ok(Seen {
                seq: 1234,
                stamp_ns: 1_500_000_000,
                encoding: Encoding::CborRaw
            })
        );
        // Damaged CDR inside a well-formed frame: each field checked.
        for (at, v) in [(0usize, 7u8), (12, 9), (16, b'x'), (28, 0xff)] {
            let mut bad_cdr = cdr.clone();
            bad_cdr[at] = v;
            let mut f = Vec::new();
            w::publish_raw(&mut f, TOPIC, 0, 0, &bad_cdr);
            assert!(i.decode_binary(&f).is_err(), "byte {at}");
        }
        for n in [0, 3, 4, 10, 40, cdr.len() - 1] {
            assert!(parse_cdr(&cdr[..n]).is_err(), "{n}");
        }
        // Big-endian CDR reads the same.
        let mut be = vec![0, 0, 0, 0];
        be.extend_from_slice(&1u32.to_be_bytes());
        be.extend_from_slice(&2u32.to_be_bytes());
        be.extend_from_slice(&2u32.to_be_bytes());
        be.extend_from_slice(b"9\0\0\0");
        be.extend_from_slice(&1u32.to_be_bytes());
        be.extend_from_slice(&1u32.to_be_bytes());
        be.extend_from_slice(&5u32.to_be_bytes());
        be.extend_from_slice(b"rgb8\0");
        be.extend_from_slice(&[0, 0, 0]);
        be.extend_from_slice(&3u32.to_be_bytes());
        be.extend_from_slice(&3u32.to_be_bytes());
        be.extend_from_slice(&[1, 2, 3]);
        let p = parse_cdr(&be).unwrap();
        assert_eq!((p.sec, p.nanosec, p.frame_id), (1, 2, &b"9"[..]));
        assert_eq!(p.data, &[1, 2, 3]);
    }

    #[test]
    fn encodings_and_sizes_parse() {
        assert_eq!(
            parse_encodings("mix").unwrap(),
            vec![Encoding::Json, Encoding::Cbor, Encoding::CborRaw]
        );
        assert_eq!(
            parse_encodings("cbor-raw,json").unwrap(),
            vec![Encoding::CborRaw, Encoding::Json]
        );
        assert!(parse_encodings("png").is_err());
        assert_eq!(
            ImageSize::from_str("1280x720").unwrap().data_len(),
            2_764_800
        );
        assert_eq!(img().size.data_len(), 921_600);
        assert!(ImageSize::from_str("1x1").is_err());
    }
}
