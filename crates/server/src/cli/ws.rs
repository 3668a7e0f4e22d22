//! The CLI's WebSocket transport (RFC 6455, client side), blocking and
//! minimal: the opening handshake, masked frames out, the server's frames
//! in. The wire crate supplies the key arithmetic
//! ([`handshake::accept_key`], [`handshake::base64`]) and frame headers
//! ([`rosgate_wire::ws::header`]); its `WsReader` reads *client* frames
//! (masked), so the server-frame reader is here.

use std::io::{ErrorKind, Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use rosgate_wire::ws::handshake;

use rosgate_wire::ws::frame::{OP_BINARY, OP_CONT, OP_PING};
pub use rosgate_wire::ws::frame::{OP_CLOSE, OP_PONG, OP_TEXT};

use super::stream::Stream;
use super::{Error, POLL};

/// Longest handshake response head read.
const MAX_HEAD: usize = 16 * 1024;

/// Four (or more) unpredictable bytes, without a random-number crate: std's
/// `RandomState` is seeded from the OS per process and varies per call.
fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.finish()
}

/// A complete, masked client frame (FIN set).
pub fn client_frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let (mut head, n) = rosgate_wire::ws::header(opcode, payload.len());
    head[1] |= 0x80; // MASK
    let mask = (random_u64() as u32).to_ne_bytes();
    let mut out = Vec::with_capacity(n + 4 + payload.len());
    out.extend_from_slice(&head[..n]);
    out.extend_from_slice(&mask);
    out.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    out
}

/// Sends the upgrade request for `target` and reads the answer until
/// `deadline`; returns the bytes read past the response head (the first
/// frames). A refusal (`400` with the gateway's reason, `503`) is
/// [`Error::Failed`]; no answer is [`Error::Unreachable`].
pub fn handshake(
    stream: &mut Stream,
    authority: &str,
    target: &str,
    deadline: Instant,
    stop: &AtomicBool,
) -> Result<Vec<u8>, Error> {
    let mut nonce = random_u64().to_ne_bytes().to_vec();
    nonce.extend_from_slice(&random_u64().to_ne_bytes());
    let key = handshake::base64(&nonce);
    let req = format!(
        "GET {target} HTTP/1.1\r\nHost: {authority}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nUser-Agent: rosgate-cli\r\n\r\n"
    );
    stream
        .write_all(req.as_bytes())
        .map_err(|e| Error::Unreachable(format!("WebSocket upgrade: {e}")))?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let mut eof = false;
    let end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if buf.first() == Some(&b'{') {
            return Err(Error::Unreachable(format!(
                "{authority} answers NDJSON, not WebSocket: use tcp://{authority}"
            )));
        }
        if eof {
            return Err(Error::Unreachable(
                "the gateway closed the connection during the WebSocket upgrade".into(),
            ));
        }
        if buf.len() > MAX_HEAD {
            return Err(Error::Unreachable(
                "WebSocket upgrade: response head too long".into(),
            ));
        }
        eof = read_until(stream, &mut buf, &mut chunk, deadline, stop)?;
    };
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap_or_default();
    if status.split_whitespace().nth(1) != Some("101") {
        // The body (the gateway's plain-text reason) follows; the gateway
        // closes after it.
        let mut rest = buf[end..].to_vec();
        let short = Instant::now() + POLL * 5;
        while !eof && Instant::now() < short.min(deadline) && rest.len() < MAX_HEAD {
            eof = read_until(stream, &mut rest, &mut chunk, short.min(deadline), stop)?;
        }
        let body = String::from_utf8_lossy(&rest);
        let body = body.trim();
        return Err(Error::Failed(if body.is_empty() {
            format!("WebSocket upgrade refused: {status}")
        } else {
            format!("WebSocket upgrade refused: {status}: {body}")
        }));
    }
    let accept = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("sec-websocket-accept"))
        .map(|(_, v)| v.trim().to_string());
    if accept.as_deref() != Some(handshake::accept_key(&key).as_str()) {
        return Err(Error::Unreachable(
            "WebSocket upgrade: wrong Sec-WebSocket-Accept".into(),
        ));
    }
    Ok(buf[end..].to_vec())
}

/// One read into `buf` with a deadline; true at end of stream.
fn read_until(
    stream: &mut Stream,
    buf: &mut Vec<u8>,
    chunk: &mut [u8],
    deadline: Instant,
    stop: &AtomicBool,
) -> Result<bool, Error> {
    if stop.load(Ordering::Relaxed) {
        return Err(Error::Interrupted);
    }
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(Error::Unreachable(
            "no answer to the WebSocket upgrade in time".into(),
        ));
    }
    stream
        .set_read_timeout(Some(left.min(POLL)))
        .map_err(|e| Error::Unreachable(format!("socket: {e}")))?;
    match stream.read(chunk) {
        Ok(0) => Ok(true),
        Ok(n) => {
            buf.extend_from_slice(&chunk[..n]);
            Ok(false)
        }
        Err(e)
            if matches!(
                e.kind(),
                ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
            ) =>
        {
            Ok(false)
        }
        Err(e) => Err(Error::Unreachable(format!("WebSocket upgrade: {e}"))),
    }
}

/// What the server sent, in order.
#[derive(Debug, PartialEq, Eq)]
pub enum WsIn<'a> {
    /// A complete text (or binary) message.
    Text(&'a [u8]),
    /// Answer with a pong carrying the same bytes.
    Ping(&'a [u8]),
    /// The server closes (with its code, if any).
    Close(Option<u16>),
    /// The server broke the protocol; nothing more is read.
    Protocol(&'static str),
}

/// Server frames -> messages, resumable across reads.
#[derive(Debug, Default)]
pub struct WsReader {
    buf: Vec<u8>,
    msg: Vec<u8>,
    in_msg: bool,
    done: bool,
}

impl WsReader {
    pub fn new() -> WsReader {
        WsReader::default()
    }

    /// Feeds bytes; `max` bounds a message.
    pub fn feed(&mut self, input: &[u8], max: usize, mut on: impl FnMut(WsIn<'_>)) {
        if self.done {
            return;
        }
        self.buf.extend_from_slice(input);
        let mut pos = 0;
        while let Some((fin, op, start, len)) = parse_header(&self.buf[pos..]) {
            let (start, len) = (pos + start, len as usize);
            if self.buf[pos + 1] & 0x80 != 0 {
                on(WsIn::Protocol("masked server frame"));
                self.done = true;
                return;
            }
            if len > max || self.msg.len() + len > max {
                on(WsIn::Protocol("message too long"));
                self.done = true;
                return;
            }
            if self.buf.len() < start + len {
                break;
            }
            let payload = &self.buf[start..start + len];
            pos = start + len;
            match op {
                OP_TEXT | OP_BINARY | OP_CONT => {
                    if (op == OP_CONT) != self.in_msg {
                        on(WsIn::Protocol("unexpected continuation"));
                        self.done = true;
                        return;
                    }
                    if fin && !self.in_msg {
                        on(WsIn::Text(payload));
                    } else {
                        self.msg.extend_from_slice(payload);
                        self.in_msg = !fin;
                        if fin {
                            on(WsIn::Text(&self.msg));
                            self.msg.clear();
                        }
                    }
                }
                OP_PING => on(WsIn::Ping(payload)),
                OP_PONG => {}
                OP_CLOSE => {
                    let code =
                        (payload.len() >= 2).then(|| u16::from_be_bytes([payload[0], payload[1]]));
                    on(WsIn::Close(code));
                    self.done = true;
                    return;
                }
                _ => {
                    on(WsIn::Protocol("unknown opcode"));
                    self.done = true;
                    return;
                }
            }
        }
        self.buf.drain(..pos);
    }
}

/// (fin, opcode, payload offset, payload length) of a complete header.
fn parse_header(b: &[u8]) -> Option<(bool, u8, usize, u64)> {
    let (&b0, &b1) = (b.first()?, b.get(1)?);
    let mask = if b1 & 0x80 != 0 { 4 } else { 0 };
    let (len, at) = match b1 & 0x7F {
        126 => (u64::from(u16::from_be_bytes([*b.get(2)?, *b.get(3)?])), 4),
        127 => {
            let mut l = [0u8; 8];
            l.copy_from_slice(b.get(2..10)?);
            (u64::from_be_bytes(l), 10)
        }
        n => (u64::from(n), 2),
    };
    if b.len() < at + mask {
        return None;
    }
    Some((b0 & 0x80 != 0, b0 & 0x0F, at + mask, len))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rosgate_wire::ws::frame;

    #[test]
    fn server_frames_in_pieces_and_fragments() {
        let mut bytes = frame::frame(OP_TEXT, b"{\"a\":1}");
        bytes.extend_from_slice(&[0x01, 3]);
        bytes.extend_from_slice(b"{\"b");
        bytes.extend(frame::frame(OP_PING, b"p"));
        bytes.extend_from_slice(&[0x80, 4]);
        bytes.extend_from_slice(b"\":2}");
        bytes.extend(frame::frame(OP_TEXT, &vec![b'x'; 70_000]));
        bytes.extend(frame::close(1001));
        let mut r = WsReader::new();
        let mut got = Vec::new();
        for piece in bytes.chunks(7) {
            r.feed(piece, 1 << 20, |e| {
                got.push(match e {
                    WsIn::Text(t) => format!("text {}", t.len()),
                    other => format!("{other:?}"),
                })
            });
        }
        assert_eq!(
            got,
            [
                "text 7",
                "Ping([112])",
                "text 7",
                "text 70000",
                "Close(Some(1001))"
            ]
        );
    }

    #[test]
    fn client_frames_are_masked_and_unmask_to_the_payload() {
        let f = client_frame(OP_TEXT, b"hello");
        assert_eq!(f[0], 0x81);
        assert_eq!(f[1], 0x80 | 5);
        let mask = &f[2..6];
        let plain: Vec<u8> = f[6..]
            .iter()
            .enumerate()
            .map(|(i, b)| b ^ mask[i % 4])
            .collect();
        assert_eq!(plain, b"hello");
        // The gateway's own reader accepts it.
        let mut r = rosgate_wire::ws::WsReader::new();
        let mut text = Vec::new();
        let hs = b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
        let mut input = hs.to_vec();
        input.extend_from_slice(&f);
        r.feed(&input, 1024, |e| {
            if let rosgate_wire::ws::WsEvent::Text(t) = e {
                text = t.to_vec();
            }
        });
        assert_eq!(text, b"hello");
    }
}
