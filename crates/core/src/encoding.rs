//! The encodings a subscriber may ask for (rosbridge v2's `compression`
//! and `fragment_size` on `subscribe`), and the making of one message's
//! bytes in one of them, sans-io: the publish line, the types and the wall
//! time in, the body out.
//!
//! What it owns: which compressions exist and their rules
//! ([`Compression`]), what a message becomes in each ([`encode`]), and
//! where a text frame is cut into `fragment` frames. Where the bytes go
//! (one shared copy per encoding for every subscriber that asked for it,
//! shedding, the ledger) is the hub's (`hub/qos.rs`); framing for a queue is
//! the transport's (`transport.rs`).
//!
//! Rules (rosbridge_library/src/rosbridge_library/capabilities/
//! subscribe.py and protocol.py, ROSBRIDGE_PROTOCOL.md §3.1.4 and §3.4.2):
//! - `none` (or absent, or JSON `null`): the publish line as it is;
//! - `png`: `rosgate_wire::png::frame` of the publish line, a text frame;
//! - `cbor`: a binary frame, the publish message in CBOR, typed by the
//!   topic's ROS 2 type when the gateway knows it
//!   (`rosgate_ros2::cbor_typed`), else by `rosgate_wire::cbor::from_json`;
//!   a message that does not fit its type goes untyped (counted by the
//!   caller from `Encoded::Binary`'s `untyped`);
//! - `cbor-raw`: a binary frame `{"op":"publish","topic":..,"msg":{"secs",
//!   "nsecs","bytes"}}` whose bytes are the message's CDR as a ROS 2 node
//!   puts it on the wire (encapsulation header included,
//!   `rosgate_ros2::cdr::encode`), and the time when the gateway encoded
//!   it; it needs the type, checked at subscribe. A message that does not
//!   fit its type cannot be sent so: [`Encoded::Failed`];
//! - `fragment_size` N: a text frame longer than N characters (at least
//!   `rosgate_wire::fragment::MIN_FRAGMENT_CHARS`) goes as `fragment`
//!   frames under the message's [`Message::fragment_id`], all of them one
//!   unit. A publish has no id of its own: rosbridge then sends 0 for
//!   every message (its `Fragmentation` counter starts anew per message),
//!   which roslib 2.1 cannot reassemble (`handleRosbridgeFragmentMessage`
//!   ignores a falsy id) and which cannot tell two messages apart; the
//!   hub numbers fragmented messages from 1 instead, what any receiver
//!   keyed by `id` (rosbridge's own defragmentation.py included) expects. Binary frames are never fragmented: rosbridge's
//!   fragments carry text, and a WebSocket message has no size limit.
//!
//! Invariants: nothing here panics on any message; [`encode`] is called at
//! most once per (message, encoding, framing) by the hub's cache
//! (`transport::Framed`).

use std::time::SystemTime;

use serde_json::Value;

use rosgate_ros2::cdr::Types;
use rosgate_wire::{cbor, fragment, png, scan, Raw, MAX_JSON_DEPTH};

/// A subscriber's `compression`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Compression {
    /// JSON text (`none`, or nothing asked).
    #[default]
    None,
    Cbor,
    CborRaw,
    Png,
    /// A Foxglove session's subscription `sub` (never asked by name): a
    /// binary message data message (`rosgate_wire::foxglove::server`)
    /// with the message's CDR when `cdr` (a ROS 2 sample's as it came,
    /// else encoded by the topic's type like `cbor-raw`'s), or its `msg`
    /// JSON text (a topic of a type the gateway does not know).
    Foxglove {
        sub: u32,
        cdr: bool,
    },
}

impl Compression {
    /// Every compression, in counter order.
    pub const ALL: [Compression; 4] = [
        Compression::None,
        Compression::Cbor,
        Compression::CborRaw,
        Compression::Png,
    ];

    /// The compression named `s` as rosbridge spells it.
    pub fn parse(s: &str) -> Option<Compression> {
        Some(match s {
            "none" | "" => Compression::None,
            "cbor" => Compression::Cbor,
            "cbor-raw" => Compression::CborRaw,
            "png" => Compression::Png,
            _ => return None,
        })
    }

    /// rosbridge's name.
    pub fn label(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Cbor => "cbor",
            Compression::CborRaw => "cbor-raw",
            Compression::Png => "png",
            Compression::Foxglove { .. } => "foxglove",
        }
    }

    /// Whether frames of it are binary (WebSocket only).
    pub fn binary(self) -> bool {
        matches!(
            self,
            Compression::Cbor | Compression::CborRaw | Compression::Foxglove { .. }
        )
    }

    /// Whether it needs the topic's type to be known.
    pub fn needs_type(self) -> bool {
        matches!(
            self,
            Compression::CborRaw | Compression::Foxglove { cdr: true, .. }
        )
    }

    /// Whether a ROS 2 sample's CDR is all it needs (no JSON).
    pub fn takes_cdr(self) -> bool {
        self.needs_type()
    }
}

/// What one subscription receives its messages as.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Encoding {
    pub compression: Compression,
    /// `fragment_size`, characters (binary frames are not fragmented).
    pub fragment: Option<u32>,
}

impl Encoding {
    /// Plain JSON, whole: the fast path's encoding.
    pub fn is_plain(self) -> bool {
        self.compression == Compression::None && self.fragment.is_none()
    }

    /// A `subscribe`'s `compression` and `fragment_size`; `Err` says why
    /// the compression is refused.
    pub fn asked(compression: Option<&str>, fragment: Option<u32>) -> Result<Encoding, String> {
        let compression = match compression {
            None => Compression::None,
            Some(s) => Compression::parse(s).ok_or_else(|| {
                format!("unknown compression {s:?} (none, cbor, cbor-raw, png); not subscribed")
            })?,
        };
        Ok(Encoding {
            compression,
            fragment,
        })
    }
}

/// One message made in one encoding, before framing.
#[derive(Debug)]
pub enum Encoded<'a> {
    /// JSON lines (`\n`-terminated): the message, or its fragments, or its
    /// `png` frame; `untyped` is always false.
    Text(Vec<u8>),
    /// One binary message: `bytes` then `tail` (the caller's scratch
    /// buffer, or the CDR as it came), given in two pieces so that a
    /// multi-megabyte payload is copied once, into the frame, not first
    /// into `bytes`; `untyped`: a `cbor` message that did not fit its type
    /// and went type-unaware.
    Binary {
        bytes: Vec<u8>,
        tail: &'a [u8],
        untyped: bool,
    },
    /// It cannot be made (`cbor-raw` of a message that does not fit its
    /// type, or a publish line that is not one): the subscriber skips it.
    Failed(String),
}

/// The `topic` and `msg` of a publish line.
fn parts(line: &str) -> Option<(String, &str)> {
    let mut topic = None;
    let mut msg = None;
    scan::scan_object(line, MAX_JSON_DEPTH, |m| match m.key {
        "topic" => topic = Some(m.value),
        "msg" => msg = Some(m.value),
        _ => {}
    })
    .ok()?;
    let topic: String = serde_json::from_str(topic?).ok()?;
    Some((topic, msg?))
}

/// One message's `msg` parsed to a JSON value on first need, then shared
/// by every encoding made of it (`cbor` typed and `cbor-raw` both need the
/// value): a multi-megabyte message is parsed at most once, whatever the
/// mix of encodings its subscribers asked for. One per message (the hub's
/// `transport::Framed` holds it); the publish line it parses is the one
/// [`Message::line`] carries.
#[derive(Debug, Default)]
pub struct Parsed {
    value: std::cell::OnceCell<Option<Value>>,
    /// Times `msg` was parsed: 0 or 1 (the tests' witness).
    parses: std::cell::Cell<u32>,
}

impl Parsed {
    /// `msg` (the publish line's `msg` text) as a value, parsed the first
    /// time only; `None` when it is not JSON.
    fn get(&self, msg: &str) -> Option<&Value> {
        self.value
            .get_or_init(|| {
                self.parses.set(self.parses.get() + 1);
                serde_json::from_str::<Value>(msg).ok()
            })
            .as_ref()
    }

    /// Times the message was parsed so far (0 or 1).
    pub fn parses(&self) -> u32 {
        self.parses.get()
    }
}

/// One message to encode: its publish line (`\n`-terminated) and, when
/// it arrived as CDR, those bytes (`cbor-raw` sends them as they are).
#[derive(Debug, Clone, Copy)]
pub struct Message<'a> {
    /// Empty when `publish` is given and the encoding is binary (the
    /// line was never joined: `transport::Framed::from_parts`).
    pub line: &'a [u8],
    /// The topic's name and the raw `msg`, when the caller has them: the
    /// binary encodings take them instead of scanning the line.
    pub publish: Option<(&'a str, &'a str)>,
    pub cdr: Option<&'a [u8]>,
    /// The `id` its `fragment` frames carry, if it is cut (never 0).
    pub fragment_id: u64,
    /// The message's `msg` as a value, shared by its encodings.
    pub parsed: &'a Parsed,
}

/// `msg` (of a topic of type `ty`, empty when unknown) in `enc`; `types`
/// are the types known, `wall` the time `cbor-raw` stamps. `scratch` is
/// the caller's buffer, kept from message to message (its old content is
/// dropped): a binary encoding is made in it and returned as
/// [`Encoded::Binary`]'s `tail`, so a multi-megabyte message needs no
/// fresh buffer of its size (whose pages would fault in anew each time).
pub fn encode<'a, T: Types + ?Sized>(
    m: Message<'a>,
    enc: Encoding,
    types: &T,
    ty: &str,
    wall: SystemTime,
    scratch: &'a mut Vec<u8>,
) -> Encoded<'a> {
    let line = m.line;
    let text = || std::str::from_utf8(line.strip_suffix(b"\n").unwrap_or(line));
    // The topic and `msg` of a binary encoding.
    let publish = || match m.publish {
        Some((topic, msg)) => Some((topic.to_owned(), msg)),
        None => text().ok().and_then(parts),
    };
    if !enc.compression.binary() {
        let Ok(text) = text() else {
            return Encoded::Failed("not UTF-8".into());
        };
        return match enc.compression {
            Compression::Png => {
                let mut framed = Vec::new();
                png::frame(&mut framed, text);
                let framed = String::from_utf8_lossy(&framed);
                Encoded::Text(fragments(
                    framed.trim_end_matches('\n'),
                    enc.fragment,
                    m.fragment_id,
                ))
            }
            _ => Encoded::Text(fragments(text, enc.fragment, m.fragment_id)),
        };
    }
    match enc.compression {
        Compression::None | Compression::Png => Encoded::Failed("not binary".into()),
        Compression::Cbor => {
            let Some((topic, msg)) = publish() else {
                return Encoded::Failed("not a publish".into());
            };
            let out = scratch;
            out.clear();
            let typed = !ty.is_empty() && types.msg(ty).is_some();
            if typed {
                if let Some(v) = m.parsed.get(msg) {
                    if rosgate_ros2::cbor_typed::publish(types, ty, &topic, v, out).is_ok() {
                        return Encoded::Binary {
                            bytes: Vec::new(),
                            tail: out,
                            untyped: false,
                        };
                    }
                }
                out.clear();
            }
            // The type-unaware mapping: flagged `untyped` only when a
            // known type did not fit.
            match cbor::publish(out, &topic, msg) {
                Ok(()) => Encoded::Binary {
                    bytes: Vec::new(),
                    tail: out,
                    untyped: typed,
                },
                Err(e) => Encoded::Failed(format!("{e:?}")),
            }
        }
        Compression::Foxglove { sub, cdr } => {
            let Some((_, json)) = publish() else {
                return Encoded::Failed("not a publish".into());
            };
            let since = wall
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap_or_default();
            let ns = u64::try_from(since.as_nanos()).unwrap_or(u64::MAX);
            let head = rosgate_wire::foxglove::server::message_data_head(sub, ns).to_vec();
            let body: &[u8] = if cdr {
                match cdr_of(m, json, types, ty, scratch) {
                    Ok(c) => c,
                    Err(why) => return Encoded::Failed(why),
                }
            } else {
                json.as_bytes()
            };
            Encoded::Binary {
                bytes: head,
                tail: body,
                untyped: false,
            }
        }
        Compression::CborRaw => {
            let Some((topic, json)) = publish() else {
                return Encoded::Failed("not a publish".into());
            };
            let cdr = match cdr_of(m, json, types, ty, scratch) {
                Ok(c) => c,
                Err(why) => return Encoded::Failed(why),
            };
            let since = wall
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap_or_default();
            let mut head = Vec::with_capacity(topic.len() + 48);
            cbor::publish_raw_head(
                &mut head,
                &topic,
                since.as_secs() as i64,
                since.subsec_nanos(),
                cdr.len(),
            );
            Encoded::Binary {
                bytes: head,
                tail: cdr,
                untyped: false,
            }
        }
    }
}

/// The CDR of a message: as it came, or `json` (its `msg`) encoded by
/// type `ty` into `scratch`.
fn cdr_of<'a, T: Types + ?Sized>(
    m: Message<'a>,
    json: &str,
    types: &T,
    ty: &str,
    scratch: &'a mut Vec<u8>,
) -> Result<&'a [u8], String> {
    if let Some(c) = m.cdr {
        return Ok(c);
    }
    m.parsed
        .get(json)
        .ok_or_else(|| "not JSON".to_string())
        .and_then(|v| {
            rosgate_ros2::cdr::encode_into(types, ty, v, scratch).map_err(|e| format!("{e:?}"))
        })
        .map_err(|why| format!("not {ty}: {why}"))?;
    Ok(scratch)
}

/// A publish's CDR by type `ty`, for a message that has none yet (the
/// hub keeps it beside the message, `transport::Framed::keep_cdr`, so
/// every Foxglove subscription of it shares one encoding).
pub fn cdr_for<T: Types + ?Sized>(m: Message<'_>, types: &T, ty: &str) -> Result<Vec<u8>, String> {
    let line = m.line;
    let text = || std::str::from_utf8(line.strip_suffix(b"\n").unwrap_or(line));
    let json = match m.publish {
        Some((_, msg)) => msg,
        None => {
            let text = text().map_err(|_| "not UTF-8".to_string())?;
            return match parts(text) {
                Some((_, msg)) => {
                    let mut out = Vec::new();
                    cdr_of(Message { cdr: None, ..m }, msg, types, ty, &mut out)?;
                    Ok(out)
                }
                None => Err("not a publish".into()),
            };
        }
    };
    let mut out = Vec::new();
    cdr_of(Message { cdr: None, ..m }, json, types, ty, &mut out)?;
    Ok(out)
}

/// `text` as one JSON line, or as `fragment` lines with `id` when longer
/// than `size` characters.
fn fragments(text: &str, size: Option<u32>, id: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() + 1);
    match size.and_then(|n| fragment::split(text, n as usize)) {
        None => {
            out.extend_from_slice(text.as_bytes());
            out.push(b'\n');
        }
        Some(pieces) => {
            let id = id.to_string();
            let id = Raw::from_valid_json(&id);
            for p in pieces {
                p.write(&mut out, id);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rosgate_ros2::registry::Registry;

    const LINE: &[u8] = b"{\"op\":\"publish\",\"topic\":\"/t\",\"msg\":{\"data\":\"a\"}}\n";

    /// [`Encoded`] with its binary pieces joined.
    #[derive(Debug)]
    enum Owned {
        Text(Vec<u8>),
        Binary { bytes: Vec<u8>, untyped: bool },
        Failed(#[allow(dead_code)] String),
    }

    fn encode_t<T: Types + ?Sized>(
        m: Message<'_>,
        e: Encoding,
        types: &T,
        ty: &str,
        wall: SystemTime,
    ) -> Owned {
        let mut scratch = b"old content".to_vec();
        match encode(m, e, types, ty, wall, &mut scratch) {
            Encoded::Text(t) => Owned::Text(t),
            Encoded::Binary {
                mut bytes,
                tail,
                untyped,
            } => {
                bytes.extend_from_slice(tail);
                Owned::Binary { bytes, untyped }
            }
            Encoded::Failed(why) => Owned::Failed(why),
        }
    }

    fn m(line: &[u8]) -> Message<'_> {
        Message {
            line,
            cdr: None,
            publish: None,
            fragment_id: 1,
            // A parse of its own per call, as every test here encodes once.
            parsed: Box::leak(Box::default()),
        }
    }

    fn enc(c: Compression, fragment: Option<u32>) -> Encoding {
        Encoding {
            compression: c,
            fragment,
        }
    }

    #[test]
    fn names_parse_as_rosbridge_spells_them() {
        for c in Compression::ALL {
            assert_eq!(Compression::parse(c.label()), Some(c));
        }
        assert!(Encoding::asked(Some("zip"), None).is_err());
        assert!(Encoding::asked(None, None).unwrap().is_plain());
        assert!(!Encoding::asked(None, Some(300)).unwrap().is_plain());
    }

    #[test]
    fn cbor_is_typed_when_the_type_is_known_and_untyped_otherwise() {
        let reg = Registry::bundled();
        let now = SystemTime::UNIX_EPOCH;
        let Owned::Binary { bytes, untyped } = encode_t(
            m(LINE),
            enc(Compression::Cbor, None),
            &reg,
            "std_msgs/msg/String",
            now,
        ) else {
            panic!("binary")
        };
        assert!(!untyped);
        let mut want = Vec::new();
        cbor::publish(&mut want, "/t", r#"{"data":"a"}"#).unwrap();
        assert_eq!(bytes, want);
        // Not a String: the untyped mapping, flagged.
        let Owned::Binary { untyped, .. } = encode_t(
            m(LINE),
            enc(Compression::Cbor, None),
            &reg,
            "std_msgs/msg/Int8",
            now,
        ) else {
            panic!("binary")
        };
        assert!(untyped);
        let Owned::Binary { untyped, .. } =
            encode_t(m(LINE), enc(Compression::Cbor, None), &reg, "", now)
        else {
            panic!("binary")
        };
        assert!(!untyped);
    }

    #[test]
    fn cbor_raw_carries_cdr_with_its_header() {
        let reg = Registry::bundled();
        let wall = SystemTime::UNIX_EPOCH + std::time::Duration::new(5, 7);
        let Owned::Binary { bytes, .. } = encode_t(
            m(LINE),
            enc(Compression::CborRaw, None),
            &reg,
            "std_msgs/msg/String",
            wall,
        ) else {
            panic!("binary")
        };
        let mut want = Vec::new();
        let cdr = [0, 1, 0, 0, 2, 0, 0, 0, b'a', 0];
        cbor::publish_raw(&mut want, "/t", 5, 7, &cdr);
        assert_eq!(bytes, want);
        assert!(matches!(
            encode_t(
                m(LINE),
                enc(Compression::CborRaw, None),
                &reg,
                "std_msgs/msg/Int8",
                wall
            ),
            Owned::Failed(_)
        ));
    }

    #[test]
    fn one_parse_serves_cbor_and_cbor_raw() {
        let reg = Registry::bundled();
        let parsed = Parsed::default();
        let msg = Message {
            line: LINE,
            cdr: None,
            publish: None,
            fragment_id: 1,
            parsed: &parsed,
        };
        let ty = "std_msgs/msg/String";
        let wall = SystemTime::UNIX_EPOCH;
        assert_eq!(parsed.parses(), 0);
        // JSON and png never parse.
        encode_t(msg, enc(Compression::None, Some(256)), &reg, ty, wall);
        encode_t(msg, enc(Compression::Png, None), &reg, ty, wall);
        assert_eq!(parsed.parses(), 0);
        let Owned::Binary { untyped, .. } =
            encode_t(msg, enc(Compression::Cbor, None), &reg, ty, wall)
        else {
            panic!("binary")
        };
        assert!(!untyped);
        assert_eq!(parsed.parses(), 1);
        assert!(matches!(
            encode_t(msg, enc(Compression::CborRaw, None), &reg, ty, wall),
            Owned::Binary { .. }
        ));
        assert!(matches!(
            encode_t(msg, enc(Compression::Cbor, Some(300)), &reg, ty, wall),
            Owned::Binary { .. }
        ));
        assert_eq!(parsed.parses(), 1);
        // A message that is not JSON inside is tried once too.
        let bad = Parsed::default();
        let line = b"{\"op\":\"publish\",\"topic\":\"/t\",\"msg\":{\"data\":}}\n";
        let msg = Message {
            line,
            cdr: None,
            publish: None,
            fragment_id: 1,
            parsed: &bad,
        };
        for c in [
            Compression::Cbor,
            Compression::CborRaw,
            Compression::CborRaw,
        ] {
            encode_t(msg, enc(c, None), &reg, ty, wall);
        }
        assert!(bad.parses() <= 1);
    }

    #[test]
    fn long_text_goes_as_fragments_with_id_0() {
        let reg = Registry::bundled();
        let long = format!(
            "{{\"op\":\"publish\",\"topic\":\"/t\",\"msg\":{{\"data\":\"{}\"}}}}\n",
            "x".repeat(600)
        );
        let Owned::Text(lines) = encode_t(
            m(long.as_bytes()),
            enc(Compression::None, Some(256)),
            &reg,
            "",
            SystemTime::UNIX_EPOCH,
        ) else {
            panic!("text")
        };
        let lines = String::from_utf8(lines).unwrap();
        let frames: Vec<Value> = lines
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(frames.len(), 3);
        let mut joined = String::new();
        for (i, f) in frames.iter().enumerate() {
            assert_eq!(f["op"], "fragment");
            assert_eq!(f["id"], 1);
            assert_eq!(f["num"], i);
            assert_eq!(f["total"], 3);
            joined.push_str(f["data"].as_str().unwrap());
        }
        assert_eq!(joined, long.trim_end());
        // Short: whole.
        let Owned::Text(lines) = encode_t(
            m(LINE),
            enc(Compression::None, Some(256)),
            &reg,
            "",
            SystemTime::UNIX_EPOCH,
        ) else {
            panic!("text")
        };
        assert_eq!(lines, LINE);
    }

    #[test]
    fn png_is_one_text_line() {
        let reg = Registry::bundled();
        let Owned::Text(lines) = encode_t(
            m(LINE),
            enc(Compression::Png, None),
            &reg,
            "",
            SystemTime::UNIX_EPOCH,
        ) else {
            panic!("text")
        };
        assert!(lines.starts_with(br#"{"op":"png","data":""#));
        assert_eq!(lines.iter().filter(|&&b| b == b'\n').count(), 1);
    }
}
