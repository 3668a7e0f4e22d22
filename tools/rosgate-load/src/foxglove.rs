//! [`Foxglove`]: subscribers speak the Foxglove WebSocket protocol
//! (`foxglove.websocket.v1`, docs/protocol.md "Foxglove WebSocket
//! protocol"); publishers, when the tool has any, speak rosbridge JSON lines
//! over TCP to `--source-addr` and publish `std_msgs/msg/String`, so the
//! gateway encodes each message to CDR for the Foxglove subscribers.
//! [`FoxgloveCdr`]: the same subscribers; the publishers are Foxglove
//! clients too (`clientPublish`), at `--addr`, each advertising a client
//! channel of the topic with encoding `cdr` and sending the String already
//! CDR-encoded, which the gateway passes to the Foxglove subscribers
//! untouched (docs/protocol.md, "Client publishing"): the like-for-like
//! input of foxglove-sdk's `Channel.log` of CDR.
//!
//! The payload check stays the runner's: a publisher sends the stamped
//! payload (`payload`) as the String's `data`, and a subscriber hands the
//! String's bytes, taken out of the CDR, back as the delivery. So every
//! Foxglove delivery is verified byte for byte like a rosbridge one.
//!
//! A subscriber: WebSocket opening offering the subprotocols, then waits for
//! the server's `advertise` of a channel named like the test topic,
//! subscribes to it with subscription id 0, and (gateway runs) sends a
//! `getParameters` with the token as its id: the server answers requests
//! in order, so its `parameterValues` says the subscription is in place,
//! which is the acknowledgement the runner waits for. [`FoxgloveSource`]
//! is the same client against a server that publishes by itself
//! (foxglove-sdk fed by `scripts/foxglove-sdk-pub.py`): no publishers, no
//! acknowledgement.
//!
//! Which side a connection is, is known from the first call: `subscribe`
//! (a subscriber) or `publisher_hello` (a publisher); the control
//! connection stays silent (there are no server counters on this
//! protocol).

use rosgate_wire::ws::client::{self as ws, parse_frame, FrameError, Response};
use rosgate_wire::ws::frame::{OP_BINARY, OP_CLOSE, OP_PING, OP_PONG, OP_TEXT};
use serde::Deserialize;

use crate::payload::push_u64;
use crate::rosgate::{json_str, Rosgate};
use crate::transport::{Codec, DecodeError, Event};

/// The subprotocols offered, in order: rosgate takes either, foxglove-sdk
/// (0.30) only the second; both frame message data alike.
const SUBPROTOCOLS: [&str; 2] = ["foxglove.websocket.v1", "foxglove.sdk.v1"];
/// The `Sec-WebSocket-Protocol` offer.
const OFFER: &str = "foxglove.websocket.v1, foxglove.sdk.v1";
/// The type publishers advertise: a known type, so the channel is `cdr`.
const STRING_TYPE: &str = "std_msgs/msg/String";
/// Message data: opcode, subscription id (u32), log time (u64).
const DATA_HEADER: usize = 1 + 4 + 8;
/// CDR encapsulation header, then the String's u32 length.
const CDR_HEADER: usize = 4 + 4;

/// Foxglove subscribers against a gateway fed by this tool's rosbridge
/// JSON publishers.
pub type Foxglove = Client<false, false, false>;
/// Foxglove subscribers against a server that publishes by itself.
pub type FoxgloveSource = Client<true, false, false>;
/// Foxglove subscribers and Foxglove CDR publishers (`clientPublish`).
pub type FoxgloveCdr = Client<false, true, false>;
/// [`FoxgloveCdr`] with every subscriber numbering its subscription
/// differently (its token), as independent Foxglove apps may: the gateway
/// then makes one frame per subscription id, not one for all.
pub type FoxgloveCdrIds = Client<false, true, true>;

/// The client channel id a CDR publisher advertises (one per connection).
const CLIENT_CHANNEL: u32 = 1;
/// Client message data: opcode, client channel id (u32).
const CLIENT_DATA_HEADER: usize = 1 + 4;

#[derive(Debug)]
enum Side {
    /// Nothing sent yet: the control connection stays here.
    Unknown,
    /// A rosbridge TCP publisher; its input is statuses.
    Publisher(Rosgate),
    /// A Foxglove CDR publisher: `open` once the server's `101` came;
    /// until then its frames wait in `held` (RFC 6455 4.1: a client sends
    /// nothing more before the opening's answer).
    CdrPublisher {
        key: String,
        open: bool,
        held: Vec<u8>,
    },
    /// WebSocket opening sent, `101` awaited.
    Opening { key: String },
    /// Open; `subscribed` once the channel was found and subscribed.
    Open { subscribed: bool },
}

#[derive(Debug)]
pub struct Client<const SOURCE: bool, const CDR: bool, const IDS: bool> {
    max_frame: usize,
    side: Side,
    /// The test topic, leaked once per connection: deliveries borrow it
    /// with the read buffer's lifetime (the frame does not carry it).
    topic: &'static [u8],
    token: u64,
    /// Frames owed to the server (subscribe, barrier, pong).
    pending: Vec<u8>,
    masks: u32,
}

impl<const SOURCE: bool, const CDR: bool, const IDS: bool> Client<SOURCE, CDR, IDS> {
    fn push_text(&mut self, text: &[u8]) {
        self.masks = self
            .masks
            .wrapping_mul(1_664_525)
            .wrapping_add(1_013_904_223);
        ws::push_frame(
            &mut self.pending,
            true,
            OP_TEXT,
            text,
            Some(self.masks.to_le_bytes()),
        );
    }

    /// A text frame from the server.
    fn text<'a>(&mut self, body: &'a [u8]) -> Result<Event<'a>, DecodeError> {
        #[derive(Deserialize)]
        struct Channel {
            id: u64,
            topic: String,
        }
        #[derive(Deserialize)]
        struct Msg {
            op: String,
            #[serde(default)]
            channels: Vec<Channel>,
            #[serde(default)]
            id: Option<String>,
            #[serde(default)]
            level: Option<u8>,
        }
        let m: Msg = serde_json::from_slice(body)
            .map_err(|e| DecodeError(format!("Foxglove text frame ({e})")))?;
        match m.op.as_str() {
            "advertise" => {
                let found = m
                    .channels
                    .iter()
                    .find(|c| c.topic.as_bytes() == self.topic)
                    .map(|c| c.id);
                if let (Some(ch), Side::Open { subscribed: false }) = (found, &self.side) {
                    self.side = Side::Open { subscribed: true };
                    let mut sub = b"{\"op\":\"subscribe\",\"subscriptions\":[{\"id\":".to_vec();
                    push_u64(&mut sub, if IDS { self.token & 0xffff_ffff } else { 0 });
                    sub.extend_from_slice(b",\"channelId\":");
                    push_u64(&mut sub, ch);
                    sub.extend_from_slice(b"}]}");
                    self.push_text(&sub);
                    if !SOURCE {
                        let mut get = b"{\"op\":\"getParameters\",\"parameterNames\":[\"/rosgate_load.barrier\"],\"id\":\"k".to_vec();
                        push_u64(&mut get, self.token);
                        get.extend_from_slice(b"\"}");
                        self.push_text(&get);
                    }
                }
                Ok(Event::Notice {
                    error: false,
                    text: body,
                })
            }
            "parameterValues" => match m.id.as_deref().and_then(|i| i.strip_prefix('k')) {
                Some(t) if t.parse() == Ok(self.token) => Ok(Event::Ack { token: self.token }),
                _ => Ok(Event::Notice {
                    error: false,
                    text: body,
                }),
            },
            "status" => Ok(Event::Notice {
                error: m.level == Some(2),
                text: body,
            }),
            _ => Ok(Event::Notice {
                error: false,
                text: body,
            }),
        }
    }
}

impl<const SOURCE: bool, const CDR: bool, const IDS: bool> Client<SOURCE, CDR, IDS> {
    /// Writes the WebSocket opening offering the Foxglove subprotocols;
    /// returns its key.
    fn opening(&mut self, out: &mut Vec<u8>, token: u64) -> String {
        self.masks ^= token as u32;
        let nonce: [u8; 16] = std::array::from_fn(|i| (token as u8).wrapping_mul(31) ^ i as u8);
        let key = ws::key(nonce);
        let req = ws::request(
            "127.0.0.1",
            "/",
            &key,
            &[
                ("Sec-WebSocket-Protocol", OFFER),
                ("User-Agent", "rosgate-load"),
            ],
        );
        out.extend_from_slice(req.as_bytes());
        key
    }
}

/// One final client frame of the concatenated `parts`, masked with the
/// all-zero key: a valid mask (RFC 6455 5.3) that leaves the bytes as
/// they are, so a 1 MiB publish costs the tool a copy, not a byte-wise
/// XOR. The server unmasks every frame alike, whatever the key; the key's
/// unpredictability guards proxies, and there is none on loopback.
fn push_masked(out: &mut Vec<u8>, opcode: u8, parts: &[&[u8]]) {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    out.push(0x80 | opcode);
    if len < 126 {
        out.push(0x80 | len as u8);
    } else if let Ok(short) = u16::try_from(len) {
        out.push(0x80 | 126);
        out.extend_from_slice(&short.to_be_bytes());
    } else {
        out.push(0x80 | 127);
        out.extend_from_slice(&(len as u64).to_be_bytes());
    }
    out.extend_from_slice(&[0; 4]);
    for p in parts {
        out.extend_from_slice(p);
    }
}

/// The String's bytes in the CDR of message data: `None` when the frame is
/// not one.
fn string_of_data(body: &[u8]) -> Option<&[u8]> {
    let cdr = body.get(DATA_HEADER..)?;
    let len = u32::from_le_bytes(cdr.get(4..8)?.try_into().ok()?) as usize;
    // Length counts the terminating NUL.
    let s = cdr.get(CDR_HEADER..CDR_HEADER + len.checked_sub(1)?)?;
    (cdr.get(CDR_HEADER + len - 1) == Some(&0)).then_some(s)
}

impl<const SOURCE: bool, const CDR: bool, const IDS: bool> Codec for Client<SOURCE, CDR, IDS> {
    const NAME: &'static str = match (SOURCE, CDR, IDS) {
        (true, _, _) => "foxglove-source",
        (false, true, true) => "foxglove-cdr-ids",
        (false, true, false) => "foxglove-cdr",
        (false, false, _) => "foxglove",
    };
    const REMOTE_SOURCE: bool = SOURCE;

    fn new(max_frame: usize) -> Self {
        Client {
            max_frame,
            side: Side::Unknown,
            topic: b"",
            token: 0,
            pending: Vec::new(),
            masks: 0x9e37_79b9,
        }
    }

    fn publisher_hello(&mut self, out: &mut Vec<u8>, topic: &str) {
        if CDR {
            let key = self.opening(out, 0x5eed);
            let mut adv = b"{\"op\":\"advertise\",\"channels\":[{\"id\":".to_vec();
            push_u64(&mut adv, u64::from(CLIENT_CHANNEL));
            adv.extend_from_slice(b",\"topic\":");
            json_str(&mut adv, topic);
            adv.extend_from_slice(b",\"encoding\":\"cdr\",\"schemaName\":");
            json_str(&mut adv, STRING_TYPE);
            adv.extend_from_slice(b"}]}");
            let mut held = Vec::new();
            push_masked(&mut held, OP_TEXT, &[&adv]);
            self.side = Side::CdrPublisher {
                key,
                open: false,
                held,
            };
            return;
        }
        let mut r = Rosgate::new(self.max_frame);
        r.hello(out);
        out.extend_from_slice(b"{\"op\":\"advertise\",\"topic\":");
        json_str(out, topic);
        out.extend_from_slice(b",\"type\":");
        json_str(out, STRING_TYPE);
        out.extend_from_slice(b"}\n");
        self.side = Side::Publisher(r);
    }

    fn subscribe(&mut self, out: &mut Vec<u8>, topic: &str, token: u64) {
        let key = self.opening(out, token);
        self.topic = Box::leak(topic.as_bytes().to_vec().into_boxed_slice());
        self.token = token;
        self.side = Side::Opening { key };
    }

    fn publish(&mut self, out: &mut Vec<u8>, topic: &str, payload: &[u8]) {
        if let Side::CdrPublisher { open, held, .. } = &mut self.side {
            // Client message data: opcode 1, channel id, then the CDR of a
            // String (encapsulation CDR_LE, length with the NUL, bytes, NUL).
            let mut head = [0u8; CLIENT_DATA_HEADER + CDR_HEADER];
            head[0] = 1;
            head[1..5].copy_from_slice(&CLIENT_CHANNEL.to_le_bytes());
            head[5..9].copy_from_slice(&[0, 1, 0, 0]);
            head[9..13].copy_from_slice(&(payload.len() as u32 + 1).to_le_bytes());
            let dst = if *open { out } else { held };
            push_masked(dst, OP_BINARY, &[&head, payload, &[0]]);
            return;
        }
        out.extend_from_slice(b"{\"op\":\"publish\",\"topic\":");
        json_str(out, topic);
        out.extend_from_slice(b",\"msg\":{\"data\":\"");
        // The payload is JSON of digits and the padding alphabet: only its
        // quotes need escaping.
        let mut rest = payload;
        while let Some(q) = memchr::memchr(b'"', rest) {
            out.extend_from_slice(&rest[..q]);
            out.extend_from_slice(b"\\\"");
            rest = &rest[q + 1..];
        }
        out.extend_from_slice(rest);
        out.extend_from_slice(b"\"}}\n");
    }

    fn advertise_service(&mut self, _out: &mut Vec<u8>, _service: &str, _token: u64) -> bool {
        false
    }

    fn call(&mut self, _out: &mut Vec<u8>, _service: &str, _id: u64, _args: &[u8]) {}

    fn respond(&mut self, _out: &mut Vec<u8>, _service: &str, _id: &[u8], _values: &[u8]) {}

    fn take_output(&mut self, out: &mut Vec<u8>) -> bool {
        if self.pending.is_empty() {
            return false;
        }
        out.append(&mut self.pending);
        true
    }

    fn decode<'a>(&mut self, buf: &'a [u8]) -> Result<Option<(Event<'a>, usize)>, DecodeError> {
        match &mut self.side {
            Side::Unknown => Err(DecodeError(
                "unexpected bytes on the control connection".into(),
            )),
            Side::Publisher(r) => r.decode(buf),
            Side::CdrPublisher { key, open, held } => {
                if *open {
                    // serverInfo, advertise, status: only an error status
                    // matters to the run.
                    let (f, used) = match parse_frame(buf, self.max_frame) {
                        Ok(Some(x)) => x,
                        Ok(None) => return Ok(None),
                        Err(FrameError::TooLong(n)) => {
                            return Err(DecodeError(format!("a {n}-byte frame")))
                        }
                        Err(FrameError::Protocol(why)) => return Err(DecodeError(why.to_string())),
                    };
                    let error = f.opcode == OP_TEXT
                        && serde_json::from_slice::<serde_json::Value>(f.payload)
                            .is_ok_and(|v| v["op"] == "status" && v["level"] == 2);
                    if f.opcode == OP_PING {
                        let mask = self.masks.to_le_bytes();
                        ws::push_frame(&mut self.pending, true, OP_PONG, f.payload, Some(mask));
                    }
                    return Ok(Some((
                        Event::Notice {
                            error,
                            text: if error { f.payload } else { b"" },
                        },
                        used,
                    )));
                }
                let resp = match Response::parse(buf) {
                    Ok(Some(r)) => r,
                    Ok(None) => return Ok(None),
                    Err(e) => return Err(DecodeError(format!("WebSocket opening: {e:?}"))),
                };
                resp.check_accept(key)
                    .map_err(|e| DecodeError(format!("WebSocket opening refused: {e:?}")))?;
                *open = true;
                self.pending.append(held);
                Ok(Some((
                    Event::Notice {
                        error: false,
                        text: b"",
                    },
                    resp.len,
                )))
            }
            Side::Opening { key } => {
                let resp = match Response::parse(buf) {
                    Ok(Some(r)) => r,
                    Ok(None) => return Ok(None),
                    Err(e) => return Err(DecodeError(format!("WebSocket opening: {e:?}"))),
                };
                resp.check_accept(key)
                    .map_err(|e| DecodeError(format!("WebSocket opening refused: {e:?}")))?;
                let taken = resp.header("Sec-WebSocket-Protocol");
                if !SUBPROTOCOLS.iter().any(|p| Some(*p) == taken) {
                    return Err(DecodeError(format!(
                        "the server took none of the subprotocols {OFFER}"
                    )));
                }
                self.side = Side::Open { subscribed: false };
                Ok(Some((
                    Event::Notice {
                        error: false,
                        text: b"",
                    },
                    resp.len,
                )))
            }
            Side::Open { .. } => {
                let (f, used) = match parse_frame(buf, self.max_frame) {
                    Ok(Some(x)) => x,
                    Ok(None) => return Ok(None),
                    Err(FrameError::TooLong(n)) => {
                        return Err(DecodeError(format!("a {n}-byte frame")))
                    }
                    Err(FrameError::Protocol(why)) => return Err(DecodeError(why.to_string())),
                };
                if !f.fin {
                    return Err(DecodeError("a fragmented WebSocket message".into()));
                }
                let body = f.payload;
                let ev = match f.opcode {
                    OP_BINARY if body.first() == Some(&1) => match string_of_data(body) {
                        Some(payload) => Event::Delivery {
                            topic: self.topic,
                            payload,
                        },
                        None => Event::Notice {
                            error: true,
                            text: b"message data that is not CDR of a String",
                        },
                    },
                    OP_TEXT => self.text(body)?,
                    OP_PING => {
                        let mask = self.masks.to_le_bytes();
                        ws::push_frame(&mut self.pending, true, OP_PONG, body, Some(mask));
                        Event::Notice {
                            error: false,
                            text: b"",
                        }
                    }
                    OP_CLOSE => return Err(DecodeError("the server closed the WebSocket".into())),
                    _ => Event::Notice {
                        error: false,
                        text: b"",
                    },
                };
                Ok(Some((ev, used)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(s: &[u8]) -> Vec<u8> {
        let mut b = vec![1, 0, 0, 0, 0];
        b.extend_from_slice(&7u64.to_le_bytes());
        b.extend_from_slice(&[0, 1, 0, 0]);
        b.extend_from_slice(&(s.len() as u32 + 1).to_le_bytes());
        b.extend_from_slice(s);
        b.push(0);
        b
    }

    #[test]
    fn string_comes_out_of_message_data() {
        assert_eq!(string_of_data(&data(b"{\"p\":0}")), Some(&b"{\"p\":0}"[..]));
        let mut bad = data(b"abc");
        *bad.last_mut().expect("nul") = b'x';
        assert_eq!(string_of_data(&bad), None);
        assert_eq!(string_of_data(&data(b"abc")[..15]), None);
        assert_eq!(string_of_data(&[1, 2]), None);
    }

    #[test]
    fn publish_is_a_string_message_carrying_the_payload() {
        let mut c = Foxglove::new(1 << 16);
        let mut out = Vec::new();
        c.publisher_hello(&mut out, "/b");
        c.publish(&mut out, "/b", b"{\"p\":0,\"d\":\"AB\"}");
        let lines: Vec<serde_json::Value> = out
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_slice(l).expect("JSON"))
            .collect();
        assert_eq!(lines[0]["type"], STRING_TYPE);
        assert_eq!(lines[1]["msg"]["data"], "{\"p\":0,\"d\":\"AB\"}");
    }

    /// A client frame of `push_masked` (zero key, short lengths): opcode,
    /// payload, bytes used.
    fn unframe(b: &[u8]) -> (u8, &[u8], usize) {
        assert_eq!(b[1] & 0x80, 0x80, "masked");
        let (len, at) = match b[1] & 0x7f {
            126 => (u16::from_be_bytes([b[2], b[3]]) as usize, 4),
            n => (n as usize, 2),
        };
        assert_eq!(&b[at..at + 4], &[0; 4]);
        (b[0] & 0x0f, &b[at + 4..at + 4 + len], at + 4 + len)
    }

    #[test]
    fn cdr_publisher_waits_for_the_opening_then_sends_cdr() {
        let mut c = FoxgloveCdr::new(1 << 16);
        let mut out = Vec::new();
        c.publisher_hello(&mut out, "/b");
        assert!(out.starts_with(b"GET / HTTP/1.1"));
        let opening = out.len();
        c.publish(&mut out, "/b", b"{\"p\":0}");
        assert_eq!(out.len(), opening, "nothing before the 101");
        let Side::CdrPublisher { key, .. } = &c.side else {
            panic!("not a CDR publisher");
        };
        let resp = format!(
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {}\r\nSec-WebSocket-Protocol: foxglove.websocket.v1\r\n\r\n",
            rosgate_wire::ws::handshake::accept_key(key)
        );
        let (_, used) = c.decode(resp.as_bytes()).expect("101").expect("whole");
        assert_eq!(used, resp.len());
        let mut held = Vec::new();
        assert!(c.take_output(&mut held));
        let (op, adv, n) = unframe(&held);
        assert_eq!(op, OP_TEXT);
        let v: serde_json::Value = serde_json::from_slice(adv).expect("JSON");
        assert_eq!(v["channels"][0]["encoding"], "cdr");
        assert_eq!(v["channels"][0]["schemaName"], STRING_TYPE);
        let (op, data, _) = unframe(&held[n..]);
        assert_eq!(op, OP_BINARY);
        let mut server_view = vec![1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        server_view.extend_from_slice(&data[CLIENT_DATA_HEADER..]);
        assert_eq!(&data[..5], &[1, 1, 0, 0, 0]);
        assert_eq!(string_of_data(&server_view), Some(&b"{\"p\":0}"[..]));
        // Once open, publishes go straight out.
        let mut after = Vec::new();
        c.publish(&mut after, "/b", b"x");
        assert!(!after.is_empty());
    }

    #[test]
    fn subscribes_on_advertise_and_acks_on_the_barrier() {
        let mut c = Foxglove::new(1 << 16);
        let mut out = Vec::new();
        c.subscribe(&mut out, "/b", 3);
        assert!(out.starts_with(b"GET / HTTP/1.1"));
        c.side = Side::Open { subscribed: false };
        let adv = br#"{"op":"advertise","channels":[{"id":9,"topic":"/b","encoding":"cdr"}]}"#;
        assert!(matches!(
            c.text(adv),
            Ok(Event::Notice { error: false, .. })
        ));
        assert!(c.take_output(&mut out));
        let done = br#"{"op":"parameterValues","parameters":[],"id":"k3"}"#;
        assert_eq!(c.text(done).ok(), Some(Event::Ack { token: 3 }));
        let err = br#"{"op":"status","level":2,"message":"no"}"#;
        assert!(matches!(c.text(err), Ok(Event::Notice { error: true, .. })));
    }
}
