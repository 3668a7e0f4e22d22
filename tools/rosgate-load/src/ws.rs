//! [`Ws`]: any [`Codec`] carried over a WebSocket (RFC 6455), so the same
//! scenarios and checks run against a server's WebSocket port:
//! `--transport ws` is rosbridge v2 JSON (the [`Rosgate`] codec) over the
//! gateway's `--ws-listen` port, one JSON message per text frame;
//! `--transport nats-ws` is the NATS text protocol (the [`Nats`] codec)
//! over nats-server's `websocket` listener, which carries the protocol's
//! byte stream in binary frames, cut wherever the server likes.
//!
//! What it owns: the opening handshake, client framing on the way out, and
//! unframing on the way in; the protocol inside is the inner codec's.
//! The frame code itself is `rosgate_wire::ws::client` (shared with the
//! `foxglove` and `images` clients of this tool and with the gateway's
//! tests), not a copy.
//!
//! Invariants:
//! - nothing but the opening request goes out before the server's `101`:
//!   everything the inner codec writes meanwhile is held and released when
//!   the answer arrives (nats-server refuses a client that sends data
//!   before the handshake completes);
//! - every inner message goes out as one final frame, masked with the
//!   all-zero key (a valid mask, RFC 6455 §5.3, that leaves the bytes as
//!   they are: a copy per message, not a byte-wise XOR; the masking key's
//!   unpredictability guards proxies, and there is none on loopback). The
//!   rosbridge side sends one frame per JSON line, without its newline;
//!   NATS, one binary frame per call of the inner codec;
//! - on the way in, the runner hands every read's bytes to
//!   [`Codec::unframe`], which gives the inner codec the messages' bytes
//!   as one stream: a text message gets a newline after it (the rosbridge
//!   codec reads lines), a binary message is passed as it is (NATS frames
//!   cut the stream anywhere). A ping is answered with a pong; a close, a
//!   protocol error or a message over the limit ends the connection's run
//!   with a decode error.

use rosgate_wire::ws::client::{self as ws, Reader, Response};
use rosgate_wire::ws::frame::{OP_BINARY, OP_PONG, OP_TEXT};

use crate::nats::Nats;
use crate::rosgate::Rosgate;
use crate::transport::{Codec, DecodeError, Event, ServerCounters};

/// Rosbridge v2 JSON over the gateway's WebSocket port.
pub type RosgateWs = Ws<Rosgate, false>;
/// The NATS protocol over nats-server's WebSocket listener.
pub type NatsWs = Ws<Nats, true>;

/// Longest message accepted on top of the inner codec's frame limit:
/// nats-server packs whatever it has queued for a connection into one
/// frame, so a binary message can hold many protocol messages.
const MAX_WS_MESSAGE_SLACK: usize = 8 << 20;

/// First message on a rosbridge WebSocket: acknowledge requests.
const SET_LEVEL_INFO: &[u8] = b"{\"op\":\"set_level\",\"level\":\"info\"}\n";

/// See the module docs. `BINARY`: the inner protocol is a byte stream in
/// binary frames (NATS), rather than one text frame per line.
#[derive(Debug)]
pub struct Ws<C, const BINARY: bool> {
    inner: C,
    max_message: usize,
    /// The opening's `Sec-WebSocket-Key`, until the `101` arrived.
    key: Option<String>,
    /// Response head bytes received so far.
    head: Vec<u8>,
    open: bool,
    /// Framed output written before the `101`.
    held: Vec<u8>,
    /// Output owed to the server (released output, pongs).
    pending: Vec<u8>,
    reader: Reader,
    /// Scratch for one inner call's unframed output.
    plain: Vec<u8>,
}

impl<C: Codec, const BINARY: bool> Ws<C, BINARY> {
    /// Writes the opening request once.
    fn opening(&mut self, out: &mut Vec<u8>) {
        if self.key.is_some() || self.open {
            return;
        }
        let nonce: [u8; 16] = std::array::from_fn(|i| (i as u8).wrapping_mul(37) ^ 0x5a);
        let key = ws::key(nonce);
        let req = ws::request("127.0.0.1", "/", &key, &[("User-Agent", "rosgate-load")]);
        out.extend_from_slice(req.as_bytes());
        self.key = Some(key);
        if !BINARY {
            // The rosbridge WebSocket answers requests with statuses only
            // from level `info` (rosbridge v2 `set_level`); the TCP port
            // acknowledges by default, and setup waits for those.
            frame_into(&mut self.held, SET_LEVEL_INFO, false);
        }
    }

    /// Runs `f` on the inner codec and frames what it wrote into `out`
    /// (or into the held output before the `101`).
    fn wrap<R>(&mut self, out: &mut Vec<u8>, f: impl FnOnce(&mut C, &mut Vec<u8>) -> R) -> R {
        self.plain.clear();
        let r = f(&mut self.inner, &mut self.plain);
        let to = if self.open { out } else { &mut self.held };
        frame_into(to, &self.plain, BINARY);
        r
    }
}

/// Frames `plain` into `out`: one binary frame, or one text frame per line.
fn frame_into(out: &mut Vec<u8>, plain: &[u8], binary: bool) {
    if plain.is_empty() {
        return;
    }
    if binary {
        ws::push_frame(out, true, OP_BINARY, plain, Some([0; 4]));
        return;
    }
    let lines = plain.strip_suffix(b"\n").unwrap_or(plain);
    for line in lines.split(|&b| b == b'\n') {
        ws::push_frame(out, true, OP_TEXT, line, Some([0; 4]));
    }
}

impl<C: Codec, const BINARY: bool> Codec for Ws<C, BINARY> {
    const NAME: &'static str = if BINARY { "nats-ws" } else { "ws" };
    const FRAMED: bool = true;

    fn new(max_frame: usize) -> Self {
        Ws {
            inner: C::new(max_frame),
            max_message: max_frame + MAX_WS_MESSAGE_SLACK,
            key: None,
            head: Vec::new(),
            open: false,
            held: Vec::new(),
            pending: Vec::new(),
            reader: Reader::new(),
            plain: Vec::new(),
        }
    }

    fn hello(&mut self, out: &mut Vec<u8>) {
        self.opening(out);
        self.wrap(out, |c, o| c.hello(o));
    }

    fn publisher_hello(&mut self, out: &mut Vec<u8>, topic: &str) {
        self.opening(out);
        self.wrap(out, |c, o| c.publisher_hello(o, topic));
    }

    fn subscribe(&mut self, out: &mut Vec<u8>, topic: &str, token: u64) {
        self.wrap(out, |c, o| c.subscribe(o, topic, token));
    }

    fn publish(&mut self, out: &mut Vec<u8>, topic: &str, payload: &[u8]) {
        self.wrap(out, |c, o| c.publish(o, topic, payload));
    }

    fn advertise_service(&mut self, out: &mut Vec<u8>, service: &str, token: u64) -> bool {
        self.wrap(out, |c, o| c.advertise_service(o, service, token))
    }

    fn call(&mut self, out: &mut Vec<u8>, service: &str, id: u64, args: &[u8]) {
        self.wrap(out, |c, o| c.call(o, service, id, args));
    }

    fn respond(&mut self, out: &mut Vec<u8>, service: &str, id: &[u8], values: &[u8]) {
        self.wrap(out, |c, o| c.respond(o, service, id, values));
    }

    fn advertise_action(&mut self, out: &mut Vec<u8>, action: &str, token: u64) -> bool {
        self.wrap(out, |c, o| c.advertise_action(o, action, token))
    }

    fn send_goal(&mut self, out: &mut Vec<u8>, action: &str, id: u64, args: &[u8]) {
        self.wrap(out, |c, o| c.send_goal(o, action, id, args));
    }

    fn feedback(&mut self, out: &mut Vec<u8>, action: &str, id: &[u8], values: &[u8]) {
        self.wrap(out, |c, o| c.feedback(o, action, id, values));
    }

    fn goal_result(&mut self, out: &mut Vec<u8>, action: &str, id: &[u8], values: &[u8]) {
        self.wrap(out, |c, o| c.goal_result(o, action, id, values));
    }

    fn stats_request(&mut self, out: &mut Vec<u8>) -> bool {
        self.wrap(out, |c, o| c.stats_request(o))
    }

    fn barrier(&mut self, out: &mut Vec<u8>, token: u64) -> bool {
        self.wrap(out, |c, o| c.barrier(o, token))
    }

    fn take_output(&mut self, out: &mut Vec<u8>) -> bool {
        let inner = self.wrap(out, |c, o| c.take_output(o));
        if self.pending.is_empty() {
            return inner;
        }
        out.append(&mut self.pending);
        true
    }

    fn parse_stats(values: &[u8]) -> Option<ServerCounters> {
        C::parse_stats(values)
    }

    fn unframe(&mut self, raw: &[u8], out: &mut dyn FnMut(&[u8])) -> Result<(), DecodeError> {
        let mut raw = raw;
        if !self.open {
            self.head.extend_from_slice(raw);
            let resp = match Response::parse(&self.head) {
                Ok(Some(r)) => r,
                Ok(None) => return Ok(()),
                Err(e) => return Err(DecodeError(format!("WebSocket opening: {e:?}"))),
            };
            let key = self.key.take().unwrap_or_default();
            resp.check_accept(&key)
                .map_err(|e| DecodeError(format!("WebSocket opening refused: {e:?}")))?;
            self.open = true;
            self.pending.append(&mut self.held);
            let head = std::mem::take(&mut self.head);
            // What followed the head is the first frames.
            let rest = head.len() - resp.len;
            let tail = raw.len().saturating_sub(rest);
            raw = &raw[tail..];
        }
        let mut err = None;
        let pending = &mut self.pending;
        self.reader.feed(raw, self.max_message, |ev| match ev {
            ws::Event::Text(m) => {
                out(m);
                if !BINARY && m.last() != Some(&b'\n') {
                    out(b"\n");
                }
            }
            ws::Event::Binary(m) => out(m),
            ws::Event::Ping(p) => ws::push_frame(pending, true, OP_PONG, p, Some([0; 4])),
            ws::Event::Pong(_) => {}
            ws::Event::Close(code) => {
                err = Some(format!("the server closed the WebSocket ({code:?})"));
            }
            ws::Event::TooLong => err = Some("a WebSocket message over the limit".into()),
            ws::Event::Protocol(why) => err = Some(format!("WebSocket: {why}")),
        });
        match err {
            Some(e) => Err(DecodeError(e)),
            None => Ok(()),
        }
    }

    fn decode<'a>(&mut self, buf: &'a [u8]) -> Result<Option<(Event<'a>, usize)>, DecodeError> {
        self.inner.decode(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The server's side of the opening for `req`.
    fn answer(req: &[u8]) -> Vec<u8> {
        let text = String::from_utf8_lossy(req);
        let key = text
            .lines()
            .find_map(|l| l.strip_prefix("Sec-WebSocket-Key: "))
            .expect("a key");
        format!(
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Accept: {}\r\n\r\n",
            rosgate_wire::ws::handshake::accept_key(key.trim())
        )
        .into_bytes()
    }

    fn unframe<C: Codec, const B: bool>(w: &mut Ws<C, B>, raw: &[u8]) -> Vec<u8> {
        let mut got = Vec::new();
        w.unframe(raw, &mut |b| got.extend_from_slice(b))
            .expect("unframes");
        got
    }

    #[test]
    fn output_waits_for_the_opening_then_goes_out_framed() {
        let mut w = RosgateWs::new(1 << 16);
        let mut out = Vec::new();
        w.hello(&mut out);
        w.subscribe(&mut out, "/t", 7);
        // Only the request so far.
        assert!(
            out.ends_with(b"\r\n\r\n"),
            "{}",
            String::from_utf8_lossy(&out)
        );
        let mut raw = answer(&out);
        // A frame right behind the head, in the same read.
        raw.extend_from_slice(&ws_server_frame(
            OP_TEXT,
            br#"{"op":"status","level":"info","msg":"ok"}"#,
        ));
        let got = unframe(&mut w, &raw);
        assert_eq!(
            got,
            b"{\"op\":\"status\",\"level\":\"info\",\"msg\":\"ok\"}\n"
        );
        let mut rel = Vec::new();
        assert!(w.take_output(&mut rel));
        let (f, used) = parse_client_frame(&rel);
        assert_eq!(f.0, OP_TEXT);
        assert_eq!(f.1, &SET_LEVEL_INFO[..SET_LEVEL_INFO.len() - 1]);
        let (g, used2) = parse_client_frame(&rel[used..]);
        assert_eq!(used + used2, rel.len());
        assert!(
            g.1.starts_with(b"{\"op\":\"subscribe\""),
            "{}",
            String::from_utf8_lossy(g.1)
        );
        assert!(!g.1.ends_with(b"\n"));
        // After the opening, output goes straight out.
        let mut out = Vec::new();
        w.publish(&mut out, "/t", b"{\"a\":1}");
        assert_eq!(parse_client_frame(&out).1, out.len());
    }

    #[test]
    fn nats_stream_is_reassembled_across_frames_and_reads() {
        let mut w = NatsWs::new(1 << 16);
        let mut out = Vec::new();
        w.hello(&mut out);
        let head = answer(&out);
        assert!(unframe(&mut w, &head).is_empty());
        let stream = b"INFO {}\r\nMSG /t 1 5\r\nhello\r\nPING\r\n";
        let mut raw = ws_server_frame(OP_BINARY, &stream[..12]);
        raw.extend_from_slice(&ws_server_frame(OP_BINARY, &stream[12..]));
        raw.extend_from_slice(&ws_server_frame(0x9, b"hb"));
        let mut got = Vec::new();
        // Fed in 3-byte reads.
        for chunk in raw.chunks(3) {
            got.extend(unframe(&mut w, chunk));
        }
        assert_eq!(got, stream);
        let mut pong = Vec::new();
        assert!(w.take_output(&mut pong));
        assert!(pong.ends_with(b"hb"));
        // A close ends the run.
        let close = ws_server_frame(0x8, &1000u16.to_be_bytes());
        assert!(w.unframe(&close, &mut |_| {}).is_err());
    }

    fn ws_server_frame(op: u8, payload: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        ws::push_frame(&mut v, true, op, payload, None);
        v
    }

    /// (opcode, payload) of the masked client frame at the start of `b`,
    /// and its length.
    fn parse_client_frame(b: &[u8]) -> ((u8, &[u8]), usize) {
        let op = b[0] & 0x0f;
        assert_eq!(b[1] & 0x80, 0x80, "masked");
        let (len, at) = match b[1] & 0x7f {
            126 => (u16::from_be_bytes([b[2], b[3]]) as usize, 4),
            127 => (
                u64::from_be_bytes(b[2..10].try_into().expect("8")) as usize,
                10,
            ),
            n => (n as usize, 2),
        };
        assert_eq!(&b[at..at + 4], &[0; 4]);
        ((op, &b[at + 4..at + 4 + len]), at + 4 + len)
    }
}
