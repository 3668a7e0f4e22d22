//! The client side of RFC 6455, sans-io: what the CLI, the integration
//! tests, the simulation and the hub's unit tests speak to the gateway
//! with. The opening request, the check of the server's `101` answer,
//! masked frames out, and the server's frames in (one at a time with
//! [`parse_frame`], or whole messages with [`Reader`]). Sockets, deadlines
//! and where masking keys come from stay with each caller.
//!
//! It shares nothing with the server side ([`super::frame`],
//! [`super::handshake`]) but the opcodes, the list of valid close codes and
//! the accept-key arithmetic (SHA-1 and base64, pinned to the RFC's
//! example), so a test written with it is not the server's frame code
//! agreeing with itself.
//!
//! Invariants:
//! - a frame is masked with the key the caller gives (RFC 6455 §5.3), so
//!   tests are deterministic; only [`push_frame`] with `None` writes an
//!   unmasked one, for tests that a server refuses it;
//! - a server frame is accepted only in a form RFC 6455 §5 lets a server
//!   send: unmasked, no reserved bit (we negotiate no extension), a known
//!   opcode, control frames final and at most 125 bytes, the length in its
//!   shortest form with the top bit clear; anything else is
//!   [`FrameError::Protocol`];
//! - a frame or message longer than the caller's `max` is refused from its
//!   header ([`FrameError::TooLong`], [`Event::TooLong`]) before any of its
//!   payload is buffered; [`Reader`] holds at most one incomplete frame
//!   (its header and at most `max` bytes, or 125 for a control frame) and
//!   one message of at most `max` bytes between calls, and accepts nothing
//!   after a close, a protocol error or a refusal;
//! - a response head is read up to [`MAX_RESPONSE_HEAD`] bytes.

use super::frame::{close_code_is_valid, OP_BINARY, OP_CLOSE, OP_CONT, OP_PING, OP_PONG, OP_TEXT};
use super::handshake::{accept_key, base64};

/// Longest response head (status line and headers) [`Response::parse`]
/// waits for.
pub const MAX_RESPONSE_HEAD: usize = 16 * 1024;

/// Headers kept from a response head; more make it [`HandshakeError::Malformed`].
const MAX_RESPONSE_HEADERS: usize = 64;

/// Longest header of a frame: 2 bytes, an 8-byte length, a 4-byte mask.
pub const MAX_FRAME_HEADER: usize = 14;

/// A `Sec-WebSocket-Key` (RFC 6455 §4.1: 16 bytes, base64) from `nonce`,
/// which the caller draws (at random, or fixed in a test).
pub fn key(nonce: [u8; 16]) -> String {
    base64(&nonce)
}

/// The opening request for `target` (path and query) on `host`, with
/// `key` and any `extra` headers (`Authorization`, `Origin`,
/// `Sec-WebSocket-Protocol`, `User-Agent`, ...).
pub fn request(host: &str, target: &str, key: &str, extra: &[(&str, &str)]) -> String {
    let mut out = format!(
        "GET {target} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
    );
    for (name, value) in extra {
        out.push_str(name);
        out.push_str(": ");
        out.push_str(value);
        out.push_str("\r\n");
    }
    out.push_str("\r\n");
    out
}

/// Why an opening failed on the client's side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HandshakeError {
    /// No end to the response head within [`MAX_RESPONSE_HEAD`] bytes.
    TooLong,
    /// Not an HTTP/1.x response head (or a header that is not UTF-8).
    Malformed,
    /// An answer other than `101`: the opening was refused.
    Refused { status: u16, reason: String },
    /// A `101` without `Upgrade: websocket` and `Connection: Upgrade`.
    NotUpgraded,
    /// A `101` whose `Sec-WebSocket-Accept` does not answer our key.
    WrongAccept,
}

impl std::fmt::Display for HandshakeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HandshakeError::TooLong => write!(f, "response head too long"),
            HandshakeError::Malformed => write!(f, "not an HTTP response"),
            HandshakeError::Refused { status, reason } => write!(f, "refused: {status} {reason}"),
            HandshakeError::NotUpgraded => write!(f, "101 without the upgrade headers"),
            HandshakeError::WrongAccept => write!(f, "wrong Sec-WebSocket-Accept"),
        }
    }
}

/// A complete response head, parsed by `httparse`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The minor HTTP version (`1` for HTTP/1.1).
    pub version: u8,
    pub status: u16,
    pub reason: String,
    /// (name, value) in order, names as sent, values trimmed.
    pub headers: Vec<(String, String)>,
    /// Bytes of the head, through its blank line; frames (or a refusal's
    /// body) follow.
    pub len: usize,
}

impl Response {
    /// The response head at the start of `buf`: `Ok(None)` while it is
    /// incomplete.
    pub fn parse(buf: &[u8]) -> Result<Option<Response>, HandshakeError> {
        let window = &buf[..buf.len().min(MAX_RESPONSE_HEAD)];
        let mut headers = [httparse::EMPTY_HEADER; MAX_RESPONSE_HEADERS];
        let mut resp = httparse::Response::new(&mut headers);
        let len = match resp.parse(window) {
            Ok(httparse::Status::Complete(len)) => len,
            Ok(httparse::Status::Partial) if buf.len() >= MAX_RESPONSE_HEAD => {
                return Err(HandshakeError::TooLong)
            }
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(_) => return Err(HandshakeError::Malformed),
        };
        let (Some(version), Some(status)) = (resp.version, resp.code) else {
            return Err(HandshakeError::Malformed);
        };
        let mut out = Vec::with_capacity(resp.headers.len());
        for h in resp.headers.iter() {
            let value = std::str::from_utf8(h.value).map_err(|_| HandshakeError::Malformed)?;
            out.push((h.name.to_string(), value.trim().to_string()));
        }
        Ok(Some(Response {
            version,
            status,
            reason: resp.reason.unwrap_or_default().to_string(),
            headers: out,
            len,
        }))
    }

    /// Every value of header `name` (matched case-insensitively), in order.
    pub fn all(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// The first value of header `name`.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body's length, when the head states one.
    pub fn content_length(&self) -> Option<usize> {
        self.header("content-length")?.parse().ok()
    }

    /// Whether this answers an opening sent with `key` (RFC 6455 §4.2.2):
    /// `101`, the upgrade headers, and `base64(sha1(key + GUID))`.
    pub fn check_accept(&self, key: &str) -> Result<(), HandshakeError> {
        self.check_accept_value(&accept_key(key))
    }

    /// As [`Response::check_accept`], against an accept value the caller
    /// computed itself.
    pub fn check_accept_value(&self, accept: &str) -> Result<(), HandshakeError> {
        if self.status != 101 {
            return Err(HandshakeError::Refused {
                status: self.status,
                reason: self.reason.clone(),
            });
        }
        let has = |name: &str, token: &str| {
            self.all(name)
                .iter()
                .any(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
        };
        if !has("upgrade", "websocket") || !has("connection", "upgrade") {
            return Err(HandshakeError::NotUpgraded);
        }
        if self.header("sec-websocket-accept") != Some(accept) {
            return Err(HandshakeError::WrongAccept);
        }
        Ok(())
    }
}

/// Appends one frame: `fin`, `opcode`, the length in its shortest form,
/// the payload masked with `mask` (RFC 6455 §5.3). `None` writes it
/// unmasked, as only a server may.
pub fn push_frame(out: &mut Vec<u8>, fin: bool, opcode: u8, payload: &[u8], mask: Option<[u8; 4]>) {
    out.push(if fin { 0x80 } else { 0 } | (opcode & 0x0F));
    let bit = if mask.is_some() { 0x80 } else { 0 };
    let len = payload.len();
    if len < 126 {
        out.push(bit | len as u8);
    } else if let Ok(short) = u16::try_from(len) {
        out.push(bit | 126);
        out.extend_from_slice(&short.to_be_bytes());
    } else {
        out.push(bit | 127);
        out.extend_from_slice(&(len as u64).to_be_bytes());
    }
    match mask {
        Some(m) => {
            out.extend_from_slice(&m);
            out.extend(payload.iter().enumerate().map(|(i, b)| b ^ m[i & 3]));
        }
        None => out.extend_from_slice(payload),
    }
}

/// A complete (final), masked frame.
pub fn frame(opcode: u8, payload: &[u8], mask: [u8; 4]) -> Vec<u8> {
    let mut out = Vec::with_capacity(MAX_FRAME_HEADER + payload.len());
    push_frame(&mut out, true, opcode, payload, Some(mask));
    out
}

/// The payload of a close frame: the status code, if any, then `reason`.
pub fn close_payload(code: Option<u16>, reason: &str) -> Vec<u8> {
    match code {
        Some(c) => {
            let mut p = c.to_be_bytes().to_vec();
            p.extend_from_slice(reason.as_bytes());
            p
        }
        None => Vec::new(),
    }
}

/// One server frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<'a> {
    pub fin: bool,
    pub opcode: u8,
    pub payload: &'a [u8],
}

/// A server frame the client must not accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameError {
    /// Longer than the caller's limit (the declared length).
    TooLong(u64),
    /// Breaks RFC 6455 §5 as a server's frame: fail the connection.
    Protocol(&'static str),
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::TooLong(n) => write!(f, "a {n}-byte frame over the limit"),
            FrameError::Protocol(why) => f.write_str(why),
        }
    }
}

/// The server frame at the start of `buf` and its length on the wire;
/// `Ok(None)` while it is incomplete. A data frame whose payload would
/// exceed `max` is refused from its header alone (control frames are at
/// most 125 bytes whatever `max` is).
pub fn parse_frame(buf: &[u8], max: usize) -> Result<Option<(Frame<'_>, usize)>, FrameError> {
    let [b0, b1, ..] = *buf else {
        return Ok(None);
    };
    let fin = b0 & 0x80 != 0;
    let opcode = b0 & 0x0F;
    if b0 & 0x70 != 0 {
        return Err(FrameError::Protocol(
            "reserved bits set without an extension",
        ));
    }
    if b1 & 0x80 != 0 {
        return Err(FrameError::Protocol("a masked server frame"));
    }
    if !matches!(
        opcode,
        OP_CONT | OP_TEXT | OP_BINARY | OP_CLOSE | OP_PING | OP_PONG
    ) {
        return Err(FrameError::Protocol("unknown opcode"));
    }
    let (len, header) = match b1 & 0x7F {
        126 => match buf.get(2..4) {
            None => return Ok(None),
            Some(b) => (u64::from(u16::from_be_bytes([b[0], b[1]])), 4),
        },
        127 => match buf.get(2..10) {
            None => return Ok(None),
            Some(b) => {
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                (u64::from_be_bytes(a), 10)
            }
        },
        n => (u64::from(n), 2),
    };
    let shortest = match len {
        0..=125 => 2,
        126..=65535 => 4,
        _ => 10,
    };
    if len >> 63 != 0 {
        return Err(FrameError::Protocol("frame length has its top bit set"));
    }
    if header != shortest {
        return Err(FrameError::Protocol("length not in its shortest form"));
    }
    if opcode & 0x8 != 0 && (!fin || len > 125) {
        return Err(FrameError::Protocol(
            "control frames must be final and at most 125 bytes",
        ));
    }
    let n = match usize::try_from(len) {
        Ok(n) if n <= max || opcode & 0x8 != 0 => n,
        _ => return Err(FrameError::TooLong(len)),
    };
    let Some(payload) = buf.get(header..header + n) else {
        return Ok(None);
    };
    Ok(Some((
        Frame {
            fin,
            opcode,
            payload,
        },
        header + n,
    )))
}

/// What the server sent, in order.
#[derive(Debug, PartialEq, Eq)]
pub enum Event<'a> {
    /// A complete text message (its bytes as sent: not checked for UTF-8).
    Text(&'a [u8]),
    /// A complete binary message.
    Binary(&'a [u8]),
    /// Answer with a pong carrying the same bytes.
    Ping(&'a [u8]),
    Pong(&'a [u8]),
    /// The server closes, with its status code if it sent one; nothing
    /// more is read.
    Close(Option<u16>),
    /// A message longer than the limit; nothing more is read.
    TooLong,
    /// The server broke the protocol; nothing more is read.
    Protocol(&'static str),
}

/// Server frames -> messages, resumable across reads. See the module docs.
#[derive(Debug, Default)]
pub struct Reader {
    buf: Vec<u8>,
    /// Fragments of the message being assembled.
    msg: Vec<u8>,
    /// Opcode of the message being assembled, if one is.
    msg_op: Option<u8>,
    done: bool,
}

impl Reader {
    pub fn new() -> Reader {
        Reader::default()
    }

    /// True after a close, a protocol error or a refusal.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Bytes held for an incomplete frame and message.
    pub fn buffered(&self) -> usize {
        self.buf.len() + self.msg.len()
    }

    /// Feeds bytes from the socket; `max` bounds a message.
    pub fn feed(&mut self, input: &[u8], max: usize, mut on: impl FnMut(Event<'_>)) {
        if self.done {
            return;
        }
        self.buf.extend_from_slice(input);
        let mut pos = 0;
        loop {
            let room = max.saturating_sub(self.msg.len());
            let (fin, opcode, start, end) = match parse_frame(&self.buf[pos..], room) {
                Ok(Some((f, used))) => (f.fin, f.opcode, pos + used - f.payload.len(), pos + used),
                Ok(None) => break,
                Err(FrameError::TooLong(_)) => return self.fail(Event::TooLong, on),
                Err(FrameError::Protocol(why)) => return self.fail(Event::Protocol(why), on),
            };
            pos = end;
            let payload = &self.buf[start..end];
            let kind = match (opcode, self.msg_op) {
                (OP_PING, _) => {
                    on(Event::Ping(payload));
                    continue;
                }
                (OP_PONG, _) => {
                    on(Event::Pong(payload));
                    continue;
                }
                (OP_CLOSE, _) => {
                    let event = close_event(payload);
                    return self.fail(event, on);
                }
                (OP_CONT, None) => {
                    return self.fail(Event::Protocol("continuation without a message"), on)
                }
                (OP_CONT, Some(kind)) => kind,
                (_, Some(_)) => {
                    return self.fail(
                        Event::Protocol("new message before the previous one ended"),
                        on,
                    )
                }
                (kind, None) => kind,
            };
            if fin && self.msg_op.is_none() {
                on(message(kind, payload));
            } else {
                self.msg.extend_from_slice(payload);
                if fin {
                    self.msg_op = None;
                    on(message(kind, &self.msg));
                    self.msg.clear();
                } else {
                    self.msg_op = Some(kind);
                }
            }
        }
        self.buf.drain(..pos);
    }

    /// Reports the last event and stops reading.
    fn fail(&mut self, event: Event<'_>, mut on: impl FnMut(Event<'_>)) {
        on(event);
        self.done = true;
        self.buf = Vec::new();
        self.msg = Vec::new();
        self.msg_op = None;
    }
}

fn message(kind: u8, body: &[u8]) -> Event<'_> {
    if kind == OP_TEXT {
        Event::Text(body)
    } else {
        Event::Binary(body)
    }
}

/// The event a close frame's payload makes (RFC 6455 §5.5.1, §7.4).
fn close_event(payload: &[u8]) -> Event<'static> {
    match payload {
        [] => Event::Close(None),
        [_] => Event::Protocol("a close frame with a one-byte body"),
        [hi, lo, reason @ ..] => {
            let code = u16::from_be_bytes([*hi, *lo]);
            if !close_code_is_valid(code) {
                Event::Protocol("invalid close code")
            } else if std::str::from_utf8(reason).is_err() {
                Event::Protocol("close reason is not UTF-8")
            } else {
                Event::Close(Some(code))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ws::frame as server;

    const MASK: [u8; 4] = [0x37, 0xfa, 0x21, 0x3d];

    /// Events as owned values, for comparing.
    #[derive(Debug, PartialEq, Eq)]
    enum E {
        Text(Vec<u8>),
        Binary(Vec<u8>),
        Ping(Vec<u8>),
        Pong(Vec<u8>),
        Close(Option<u16>),
        TooLong,
        Protocol(&'static str),
    }

    fn feed(chunks: &[&[u8]], max: usize) -> Vec<E> {
        let mut r = Reader::new();
        let mut out = Vec::new();
        for c in chunks {
            r.feed(c, max, |e| {
                out.push(match e {
                    Event::Text(t) => E::Text(t.to_vec()),
                    Event::Binary(b) => E::Binary(b.to_vec()),
                    Event::Ping(p) => E::Ping(p.to_vec()),
                    Event::Pong(p) => E::Pong(p.to_vec()),
                    Event::Close(c) => E::Close(c),
                    Event::TooLong => E::TooLong,
                    Event::Protocol(why) => E::Protocol(why),
                })
            });
            let bound = max + max.max(125) + MAX_FRAME_HEADER;
            assert!(r.buffered() <= bound, "{} bytes held", r.buffered());
        }
        out
    }

    /// The same events whole, byte by byte and in two halves.
    fn feed_every_way(bytes: &[u8], max: usize) -> Vec<E> {
        let whole = feed(&[bytes], max);
        let single: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(feed(&single, max), whole, "byte by byte");
        let (a, b) = bytes.split_at(bytes.len() / 2);
        assert_eq!(feed(&[a, b], max), whole, "in halves");
        whole
    }

    /// An unmasked (server) frame.
    fn sf(fin: bool, op: u8, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        push_frame(&mut out, fin, op, payload, None);
        out
    }

    #[test]
    fn the_opening_request_and_the_rfc_example_answer() {
        let req = request(
            "server.example.com",
            "/chat?x=1",
            "dGhlIHNhbXBsZSBub25jZQ==",
            &[("Origin", "http://example.com")],
        );
        assert!(req.starts_with("GET /chat?x=1 HTTP/1.1\r\nHost: server.example.com\r\n"));
        assert!(req.contains("\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"));
        assert!(req.contains("\r\nSec-WebSocket-Version: 13\r\n"));
        assert!(req.ends_with("\r\nOrigin: http://example.com\r\n\r\n"));
        // The gateway's own handshake accepts it.
        let (out, used) = crate::ws::handshake::parse(req.as_bytes()).expect("complete");
        assert_eq!(used, req.len());
        let crate::ws::handshake::Outcome::Accept { response, .. } = out else {
            panic!("refused: {out:?}")
        };
        let mut bytes = response.clone();
        bytes.extend_from_slice(b"\x81\x00");
        let resp = Response::parse(&bytes).expect("valid").expect("complete");
        assert_eq!(resp.len, response.len());
        assert_eq!((resp.version, resp.status), (1, 101));
        assert_eq!(resp.check_accept("dGhlIHNhbXBsZSBub25jZQ=="), Ok(()));
        // RFC 6455 §1.3's example answer.
        assert_eq!(
            resp.header("SEC-WEBSOCKET-ACCEPT"),
            Some("s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
        );
        assert_eq!(
            resp.check_accept("AAECAwQFBgcICQoLDA0ODw=="),
            Err(HandshakeError::WrongAccept)
        );
        assert_eq!(key([0; 16]), "AAAAAAAAAAAAAAAAAAAAAA==");
    }

    #[test]
    fn answers_other_than_an_upgrade_are_refusals() {
        let head = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n";
        for n in 0..head.len() {
            assert_eq!(Response::parse(&head[..n]), Ok(None), "{n} bytes");
        }
        let no_upgrade = b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n";
        let r = Response::parse(no_upgrade)
            .expect("valid")
            .expect("complete");
        assert_eq!(
            r.check_accept("dGhlIHNhbXBsZSBub25jZQ=="),
            Err(HandshakeError::NotUpgraded)
        );
        let refused =
            b"HTTP/1.1 403 Forbidden\r\nContent-Length: 7\r\nConnection: close\r\n\r\norigin!";
        let r = Response::parse(refused).expect("valid").expect("complete");
        assert_eq!(r.content_length(), Some(7));
        assert_eq!(&refused[r.len..], b"origin!");
        assert_eq!(
            r.check_accept("dGhlIHNhbXBsZSBub25jZQ=="),
            Err(HandshakeError::Refused {
                status: 403,
                reason: "Forbidden".into()
            })
        );
        assert_eq!(
            Response::parse(b"{\"op\":\"status\"}\n"),
            Err(HandshakeError::Malformed)
        );
        let mut long = b"HTTP/1.1 101 OK\r\nX: ".to_vec();
        long.resize(MAX_RESPONSE_HEAD, b'a');
        assert_eq!(Response::parse(&long), Err(HandshakeError::TooLong));
    }

    #[test]
    fn masking_follows_the_rfc_example() {
        // RFC 6455 §5.7: a single-frame masked text message, "Hello".
        assert_eq!(
            frame(OP_TEXT, b"Hello", MASK),
            [0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58]
        );
        // Unmasked, as the server sends it; lengths in their shortest form.
        assert_eq!(
            sf(true, OP_TEXT, b"Hello"),
            [0x81, 0x05, b'H', b'e', b'l', b'l', b'o']
        );
        for len in [0usize, 125, 126, 65535, 65536] {
            let payload = vec![b'x'; len];
            assert_eq!(
                sf(true, OP_TEXT, &payload),
                server::frame(OP_TEXT, &payload)
            );
            let bytes = sf(true, OP_TEXT, &payload);
            let (f, used) = parse_frame(&bytes, len).expect("valid").expect("complete");
            assert_eq!(
                (f.opcode, f.payload.len(), used),
                (OP_TEXT, len, server::frame(OP_TEXT, &payload).len())
            );
        }
    }

    #[test]
    fn the_gateway_reads_what_the_client_writes() {
        let hs = b"GET / HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
        let mut input = hs.to_vec();
        push_frame(&mut input, false, OP_TEXT, b"{\"op\":", Some(MASK));
        input.extend(frame(OP_PING, b"p", [9, 8, 7, 6]));
        push_frame(
            &mut input,
            true,
            OP_CONT,
            &[b' '; 70_000],
            Some([1, 2, 3, 4]),
        );
        input.extend(frame(OP_CLOSE, &close_payload(Some(1000), "bye"), MASK));
        let mut got = Vec::new();
        crate::ws::WsReader::new().feed(&input, 1 << 20, |e| {
            got.push(match e {
                crate::ws::WsEvent::Text(t) => format!("text {}", t.len()),
                crate::ws::WsEvent::Ping(p) => format!("ping {p:?}"),
                crate::ws::WsEvent::Close(c) => format!("close {c:?}"),
                crate::ws::WsEvent::Open { .. } => "open".into(),
                other => format!("{other:?}"),
            })
        });
        assert_eq!(
            got,
            ["open", "ping [112]", "text 70006", "close Some(1000)"]
        );
    }

    #[test]
    fn fragments_and_interleaved_control_frames() {
        let mut bytes = sf(true, OP_TEXT, b"{\"a\":1}");
        bytes.extend(sf(false, OP_TEXT, b"{\"b"));
        bytes.extend(sf(true, OP_PING, b"p"));
        bytes.extend(sf(false, OP_CONT, b"\":"));
        bytes.extend(sf(true, OP_PONG, b"q"));
        bytes.extend(sf(true, OP_CONT, b"2}"));
        bytes.extend(sf(false, OP_BINARY, &[1, 2]));
        bytes.extend(sf(true, OP_CONT, &[3]));
        bytes.extend(sf(true, OP_TEXT, &vec![b'x'; 70_000]));
        bytes.extend(server::close(1001));
        bytes.extend(sf(true, OP_TEXT, b"after the close"));
        assert_eq!(
            feed_every_way(&bytes, 1 << 20),
            [
                E::Text(b"{\"a\":1}".to_vec()),
                E::Ping(b"p".to_vec()),
                E::Pong(b"q".to_vec()),
                E::Text(b"{\"b\":2}".to_vec()),
                E::Binary(vec![1, 2, 3]),
                E::Text(vec![b'x'; 70_000]),
                E::Close(Some(1001)),
            ]
        );
        assert_eq!(feed(&[&server::close_empty()], 10), [E::Close(None)]);
    }

    #[test]
    fn what_a_server_must_not_send_stops_the_reader() {
        let bad: [(Vec<u8>, &str); 10] = [
            (frame(OP_TEXT, b"hi", MASK), "a masked server frame"),
            (
                [vec![0xC1, 0x00]].concat(),
                "reserved bits set without an extension",
            ),
            (sf(true, 0x3, b""), "unknown opcode"),
            (sf(true, 0xB, b""), "unknown opcode"),
            (
                sf(false, OP_PING, b""),
                "control frames must be final and at most 125 bytes",
            ),
            (
                sf(true, OP_PING, &[0; 126]),
                "control frames must be final and at most 125 bytes",
            ),
            (
                vec![0x81, 126, 0, 5, 1, 2, 3, 4, 5],
                "length not in its shortest form",
            ),
            (sf(true, OP_CONT, b"x"), "continuation without a message"),
            (
                [sf(false, OP_TEXT, b"a"), sf(true, OP_TEXT, b"b")].concat(),
                "new message before the previous one ended",
            ),
            (
                sf(true, OP_CLOSE, &[0x03]),
                "a close frame with a one-byte body",
            ),
        ];
        for (bytes, why) in bad {
            let mut all = sf(true, OP_TEXT, b"ok");
            all.extend_from_slice(&bytes);
            all.extend(sf(true, OP_TEXT, b"never"));
            assert_eq!(
                feed_every_way(&all, 1000),
                [E::Text(b"ok".to_vec()), E::Protocol(why)],
                "{bytes:?}"
            );
        }
        let mut top = vec![0x81, 127];
        top.extend_from_slice(&(1u64 << 63).to_be_bytes());
        assert_eq!(
            feed(&[&top], 1000),
            [E::Protocol("frame length has its top bit set")]
        );
        let code = sf(true, OP_CLOSE, &1005u16.to_be_bytes());
        assert_eq!(feed(&[&code], 1000), [E::Protocol("invalid close code")]);
        let reason = sf(true, OP_CLOSE, b"\x03\xe8\xff");
        assert_eq!(
            feed(&[&reason], 1000),
            [E::Protocol("close reason is not UTF-8")]
        );
    }

    #[test]
    fn oversize_messages_are_refused_from_their_header() {
        // One frame over the limit: refused before its payload arrives.
        let big = sf(true, OP_TEXT, &[b'x'; 300]);
        assert_eq!(feed(&[&big[..4]], 100), [E::TooLong]);
        assert_eq!(parse_frame(&big[..4], 299), Err(FrameError::TooLong(300)));
        assert_eq!(parse_frame(&big[..4], 300), Ok(None));
        // Fragments that add up to more than the limit.
        let mut parts = sf(false, OP_TEXT, &[b'a'; 60]);
        parts.extend(sf(true, OP_CONT, &[b'b'; 60]));
        assert_eq!(feed_every_way(&parts, 100), [E::TooLong]);
        assert_eq!(
            feed_every_way(&parts, 120),
            [E::Text([[b'a'; 60], [b'b'; 60]].concat())]
        );
        // Control frames are not held to a limit below 125.
        let ping = sf(true, OP_PING, &[b'p'; 125]);
        assert_eq!(feed(&[&ping], 10), [E::Ping(vec![b'p'; 125])]);
    }
}
