//! `WsReader`: handshake, then client frames -> whole messages, resumable.
//!
//! Invariants:
//! - at most one frame (header + payload, payload at most `max`) plus one
//!   message of fragments (at most `max`) is buffered; a message that would
//!   exceed `max` is reported once as [`WsEvent::TooLong`] and its bytes are
//!   skipped without being buffered, the connection stays usable (as P1 for
//!   lines);
//! - client frames must be masked and use no reserved bits (we negotiate no
//!   extension); control frames must be final and at most 125 bytes;
//!   anything else is a [`WsEvent::Protocol`] error after which the reader
//!   accepts nothing more;
//! - control frames may arrive between the fragments of a message and are
//!   reported at once;
//! - after a close frame, further input is ignored.

use super::handshake::{self, Outcome};

/// Frame opcodes (RFC 6455 §5.2).
pub const OP_CONT: u8 = 0x0;
/// See [`OP_CONT`].
pub const OP_TEXT: u8 = 0x1;
/// See [`OP_CONT`].
pub const OP_BINARY: u8 = 0x2;
/// See [`OP_CONT`].
pub const OP_CLOSE: u8 = 0x8;
/// See [`OP_CONT`].
pub const OP_PING: u8 = 0x9;
/// See [`OP_CONT`].
pub const OP_PONG: u8 = 0xA;

/// One event from the client, in input order.
#[derive(Debug, PartialEq, Eq)]
pub enum WsEvent<'a> {
    /// Handshake accepted: send `response` first (unless the opening is
    /// refused after all, by what `opening` says).
    Open {
        response: Vec<u8>,
        opening: handshake::Opening,
    },
    /// Handshake refused: send these bytes, then close.
    Refuse(Vec<u8>),
    /// Not a WebSocket: a plain HTTP request, to answer and close.
    Http(handshake::HttpRequest),
    /// A complete text message.
    Text(&'a [u8]),
    /// A complete binary message.
    Binary(&'a [u8]),
    /// A ping; answer with a pong carrying the same payload.
    Ping(&'a [u8]),
    /// The client started the close handshake.
    Close(Option<u16>),
    /// A message exceeded the limit; the rest of it is skipped.
    TooLong,
    /// The client broke the protocol; close with status 1002.
    Protocol(&'static str),
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum State {
    #[default]
    Handshake,
    Frames,
    Closed,
}

/// See the module docs.
#[derive(Debug, Default)]
pub struct WsReader {
    state: State,
    buf: Vec<u8>,
    /// Fragments of the message being assembled.
    msg: Vec<u8>,
    /// Opcode of the message being assembled (text/binary), if any.
    msg_op: Option<u8>,
    /// The current message exceeded the limit: drop its fragments.
    skipping_msg: bool,
    /// Payload bytes of the current frame still to skip.
    skip: u64,
}

impl WsReader {
    pub fn new() -> Self {
        Self::default()
    }

    /// True once the handshake completed and before a close.
    pub fn is_open(&self) -> bool {
        self.state == State::Frames
    }

    /// Bytes held for incomplete frames and messages.
    pub fn buffered(&self) -> usize {
        self.buf.len() + self.msg.len()
    }

    /// Feeds bytes from the socket; `max` bounds a message's size.
    pub fn feed(&mut self, input: &[u8], max: usize, mut on: impl FnMut(WsEvent<'_>)) {
        if self.state == State::Closed {
            return;
        }
        self.buf.extend_from_slice(input);
        let mut pos = 0;
        if self.state == State::Handshake {
            match handshake::parse(&self.buf) {
                None => return,
                Some((Outcome::Accept { response, opening }, used)) => {
                    self.state = State::Frames;
                    pos = used;
                    on(WsEvent::Open { response, opening });
                }
                Some((Outcome::Http(req), _)) => {
                    // One request per connection: answered, then closed.
                    self.close_down();
                    on(WsEvent::Http(req));
                    return;
                }
                Some((Outcome::Reject(resp), _)) => {
                    self.close_down();
                    on(WsEvent::Refuse(resp));
                    return;
                }
            }
        }
        while self.state == State::Frames {
            if self.skip > 0 {
                let n =
                    (self.buf.len() - pos).min(usize::try_from(self.skip).unwrap_or(usize::MAX));
                pos += n;
                self.skip -= n as u64;
                if self.skip > 0 {
                    break;
                }
                continue;
            }
            match self.frame(pos, max, &mut on) {
                Step::NeedMore => break,
                Step::Consumed(next) => pos = next,
                Step::Stop => {
                    self.close_down();
                    return;
                }
            }
        }
        self.buf.drain(..pos.min(self.buf.len()));
        if self.buf.is_empty() && self.buf.capacity() > crate::line::KEEP_CAPACITY {
            self.buf = Vec::new();
        }
    }

    /// Frees buffers over [`crate::line::KEEP_CAPACITY`] that hold nothing
    /// (called by the hub's sweep).
    pub fn trim(&mut self) {
        let keep = crate::line::KEEP_CAPACITY;
        if self.buf.is_empty() && self.buf.capacity() > keep {
            self.buf = Vec::new();
        }
        if self.msg.is_empty() && self.msg.capacity() > keep {
            self.msg = Vec::new();
        }
    }

    fn close_down(&mut self) {
        self.state = State::Closed;
        self.buf = Vec::new();
        self.msg = Vec::new();
    }

    /// Parses one frame starting at `pos`.
    fn frame(&mut self, pos: usize, max: usize, on: &mut impl FnMut(WsEvent<'_>)) -> Step {
        let avail = &self.buf[pos..];
        if avail.len() < 2 {
            return Step::NeedMore;
        }
        let (b0, b1) = (avail[0], avail[1]);
        let fin = b0 & 0x80 != 0;
        let op = b0 & 0x0F;
        if b0 & 0x70 != 0 {
            return protocol(on, "reserved bits set without an extension");
        }
        if b1 & 0x80 == 0 {
            return protocol(on, "client frames must be masked");
        }
        let (len, hdr) = match b1 & 0x7F {
            126 if avail.len() >= 4 => (u64::from(u16::from_be_bytes([avail[2], avail[3]])), 4),
            127 if avail.len() >= 10 => {
                let mut b = [0u8; 8];
                b.copy_from_slice(&avail[2..10]);
                (u64::from_be_bytes(b), 10)
            }
            126 | 127 => return Step::NeedMore,
            n => (u64::from(n), 2),
        };
        if len >> 63 != 0 {
            return protocol(on, "frame length has its top bit set");
        }
        if avail.len() < hdr + 4 {
            return Step::NeedMore;
        }
        let mask = [avail[hdr], avail[hdr + 1], avail[hdr + 2], avail[hdr + 3]];
        let start = pos + hdr + 4;
        let is_control = op & 0x8 != 0;
        if is_control && !matches!(op, OP_CLOSE | OP_PING | OP_PONG) {
            // 0xB-0xF are reserved; treating them as data once let a frame
            // bypass the size limit (found by the ws_reader fuzz target).
            return protocol(on, "unknown opcode");
        }
        if is_control && (!fin || len > 125) {
            return protocol(on, "control frames must be final and at most 125 bytes");
        }
        if !is_control {
            match (op, self.msg_op) {
                (OP_CONT, None) => return protocol(on, "continuation without a message"),
                (OP_TEXT | OP_BINARY, Some(_)) => {
                    return protocol(on, "new message before the previous one ended")
                }
                (OP_CONT | OP_TEXT | OP_BINARY, _) => {}
                _ => return protocol(on, "unknown opcode"),
            }
            let total = self.msg.len() as u64 + len;
            if self.skipping_msg || total > max as u64 {
                // Skip this frame's payload without buffering it.
                if !self.skipping_msg {
                    on(WsEvent::TooLong);
                }
                self.msg = Vec::new();
                self.skipping_msg = !fin;
                self.msg_op = if fin {
                    None
                } else {
                    Some(op_or(self.msg_op, op))
                };
                self.skip = len;
                return Step::Consumed(start);
            }
        }
        let Ok(len) = usize::try_from(len) else {
            return protocol(on, "frame too large for this platform");
        };
        if self.buf.len() - start < len {
            return Step::NeedMore;
        }
        let end = start + len;
        unmask(&mut self.buf[start..end], mask);
        let payload = &self.buf[start..end];
        match op {
            OP_PING => on(WsEvent::Ping(payload)),
            OP_PONG => {}
            OP_CLOSE => {
                return match payload {
                    [] => {
                        on(WsEvent::Close(None));
                        Step::Stop
                    }
                    [_] => protocol(on, "a close frame with a one-byte body"),
                    [hi, lo, reason @ ..] => {
                        let code = u16::from_be_bytes([*hi, *lo]);
                        if !close_code_is_valid(code) {
                            protocol(on, "invalid close code")
                        } else if std::str::from_utf8(reason).is_err() {
                            protocol(on, "close reason is not UTF-8")
                        } else {
                            on(WsEvent::Close(Some(code)));
                            Step::Stop
                        }
                    }
                };
            }
            _ => {
                let kind = op_or(self.msg_op, op);
                if fin && self.msg.is_empty() {
                    self.msg_op = None;
                    emit(kind, payload, on);
                } else {
                    self.msg.extend_from_slice(payload);
                    if fin {
                        self.msg_op = None;
                        let msg = std::mem::take(&mut self.msg);
                        emit(kind, &msg, on);
                        if msg.capacity() <= crate::line::KEEP_CAPACITY {
                            self.msg = msg;
                            self.msg.clear();
                        }
                    } else {
                        self.msg_op = Some(kind);
                    }
                }
            }
        }
        Step::Consumed(end)
    }
}

/// XORs `payload` with `mask` repeated from its first byte (RFC 6455
/// §5.3), 8 bytes at a time: byte by byte (LLVM does not vectorize the
/// `i & 3` index) it cost ~3.3 instructions per byte of every client
/// message, some 360 of a 110-byte publish (callgrind).
#[inline]
fn unmask(payload: &mut [u8], mask: [u8; 4]) {
    let [a, b, c, d] = mask;
    let wide = u64::from_ne_bytes([a, b, c, d, a, b, c, d]);
    let mut words = payload.chunks_exact_mut(8);
    for w in &mut words {
        if let Some(w) = w.first_chunk_mut::<8>() {
            *w = (u64::from_ne_bytes(*w) ^ wide).to_ne_bytes();
        }
    }
    // The rest starts at a multiple of 8, so the mask starts over there.
    for (i, b) in words.into_remainder().iter_mut().enumerate() {
        *b ^= mask[i & 3];
    }
}

enum Step {
    NeedMore,
    Consumed(usize),
    Stop,
}

fn op_or(current: Option<u8>, op: u8) -> u8 {
    current.unwrap_or(op)
}

fn emit(kind: u8, payload: &[u8], on: &mut impl FnMut(WsEvent<'_>)) {
    if kind == OP_TEXT {
        on(WsEvent::Text(payload));
    } else {
        on(WsEvent::Binary(payload));
    }
}

fn protocol(on: &mut impl FnMut(WsEvent<'_>), why: &'static str) -> Step {
    on(WsEvent::Protocol(why));
    Step::Stop
}

/// Whether a peer may send `code` in a close frame (RFC 6455 §7.4): the
/// defined codes except those reserved for "no code" (1005), "closed
/// abnormally" (1006) and TLS failure (1015); 1012-1014 registered later by
/// IANA; 3000-4999 for libraries and applications.
pub fn close_code_is_valid(code: u16) -> bool {
    matches!(code, 1000..=1003 | 1007..=1014 | 3000..=4999)
}

/// A server frame header (FIN set, unmasked) for `len` payload bytes of
/// `opcode`; returns the buffer and how many of its bytes are used.
pub fn header(opcode: u8, len: usize) -> ([u8; 10], usize) {
    let mut h = [0u8; 10];
    h[0] = 0x80 | (opcode & 0x0F);
    if len < 126 {
        h[1] = len as u8;
        (h, 2)
    } else if len <= u16::MAX as usize {
        h[1] = 126;
        h[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        (h, 4)
    } else {
        h[1] = 127;
        h[2..10].copy_from_slice(&(len as u64).to_be_bytes());
        (h, 10)
    }
}

/// Appends each `\n`-terminated JSON line of `lines` as one text frame
/// without its newline. Our lines never hold a raw newline inside (the hub
/// blanks raw CR/LF before decoding, and JSON strings cannot contain one),
/// so splitting on `\n` finds exactly the message boundaries.
pub fn push_text_lines(out: &mut Vec<u8>, lines: &[u8]) {
    let lines = lines.strip_suffix(b"\n").unwrap_or(lines);
    for body in lines.split(|&b| b == b'\n') {
        let (h, n) = header(OP_TEXT, body.len());
        out.extend_from_slice(&h[..n]);
        out.extend_from_slice(body);
    }
}

/// A complete server frame.
pub fn frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let (h, n) = header(opcode, payload.len());
    let mut out = Vec::with_capacity(n + payload.len());
    out.extend_from_slice(&h[..n]);
    out.extend_from_slice(payload);
    out
}

/// A pong answering a ping.
pub fn pong(payload: &[u8]) -> Vec<u8> {
    frame(OP_PONG, payload)
}

/// A close frame with a status code.
pub fn close(code: u16) -> Vec<u8> {
    frame(OP_CLOSE, &code.to_be_bytes())
}

/// A close frame without a status code (the answer to a client's close
/// that carried none).
pub fn close_empty() -> Vec<u8> {
    frame(OP_CLOSE, &[])
}

#[cfg(test)]
mod tests {
    use super::*;

    const HS: &[u8] = b"GET / HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";

    /// A masked client frame.
    fn cf(fin: bool, op: u8, payload: &[u8]) -> Vec<u8> {
        let mask = [1u8, 2, 3, 4];
        let mut out = vec![if fin { 0x80 } else { 0 } | op];
        let n = payload.len();
        if n < 126 {
            out.push(0x80 | n as u8);
        } else if n <= 65535 {
            out.push(0x80 | 126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        } else {
            out.push(0x80 | 127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
        out.extend_from_slice(&mask);
        out.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i & 3]));
        out
    }

    #[derive(Debug, PartialEq)]
    enum E {
        Open,
        Refuse,
        Text(Vec<u8>),
        Binary(Vec<u8>),
        Ping(Vec<u8>),
        Close(Option<u16>),
        TooLong,
        Protocol,
    }

    #[test]
    fn unmask_is_the_bytewise_xor() {
        let mask = [0x12, 0x34, 0x56, 0x78];
        for len in 0..40 {
            let data: Vec<u8> = (0..len).map(|i| (i * 37 + 5) as u8).collect();
            let mut got = data.clone();
            unmask(&mut got, mask);
            let want: Vec<u8> = data
                .iter()
                .enumerate()
                .map(|(i, b)| b ^ mask[i % 4])
                .collect();
            assert_eq!(got, want, "len {len}");
        }
    }

    fn run(chunks: &[&[u8]], max: usize) -> Vec<E> {
        let mut r = WsReader::new();
        let mut out = Vec::new();
        for c in chunks {
            r.feed(c, max, |e| {
                out.push(match e {
                    WsEvent::Open { .. } => E::Open,
                    WsEvent::Refuse(_) | WsEvent::Http(_) => E::Refuse,
                    WsEvent::Text(t) => E::Text(t.to_vec()),
                    WsEvent::Binary(b) => E::Binary(b.to_vec()),
                    WsEvent::Ping(p) => E::Ping(p.to_vec()),
                    WsEvent::Close(c) => E::Close(c),
                    WsEvent::TooLong => E::TooLong,
                    WsEvent::Protocol(_) => E::Protocol,
                })
            });
        }
        out
    }

    fn all_splits(input: &[u8], max: usize) -> Vec<E> {
        let whole = run(&[input], max);
        let bytes: Vec<&[u8]> = input.chunks(1).collect();
        assert_eq!(run(&bytes, max), whole, "byte by byte");
        for cut in (0..=input.len()).step_by(7) {
            let (a, b) = input.split_at(cut);
            assert_eq!(run(&[a, b], max), whole, "split at {cut}");
        }
        whole
    }

    #[test]
    fn close_codes_are_validated() {
        let close = |payload: &[u8]| {
            let mut s = HS.to_vec();
            s.extend(cf(true, OP_CLOSE, payload));
            let mut events = all_splits(&s, 1000);
            assert_eq!(events.remove(0), E::Open);
            events
        };
        for code in [1000u16, 1001, 1003, 1007, 1011, 1012, 1014, 3000, 4999] {
            assert_eq!(
                close(&code.to_be_bytes()),
                vec![E::Close(Some(code))],
                "{code}"
            );
        }
        let mut with_reason = 1000u16.to_be_bytes().to_vec();
        with_reason.extend_from_slice("bye é".as_bytes());
        assert_eq!(close(&with_reason), vec![E::Close(Some(1000))]);
        assert_eq!(close(&[]), vec![E::Close(None)]);
        for code in [0u16, 999, 1004, 1005, 1006, 1015, 1016, 2999, 5000, 65535] {
            assert_eq!(close(&code.to_be_bytes()), vec![E::Protocol], "{code}");
        }
        assert_eq!(close(&[0x03]), vec![E::Protocol], "one-byte body");
        assert_eq!(
            close(&[0x03, 0xE8, 0xFF]),
            vec![E::Protocol],
            "bad UTF-8 reason"
        );
    }

    #[test]
    fn messages_fragments_and_interleaved_control() {
        let mut s = HS.to_vec();
        s.extend(cf(true, OP_TEXT, b"{\"a\":1}"));
        s.extend(cf(false, OP_TEXT, b"{\"b\""));
        s.extend(cf(true, OP_PING, b"hi"));
        s.extend(cf(true, OP_CONT, b":2}"));
        s.extend(cf(true, OP_BINARY, b"\x00\x01"));
        s.extend(cf(true, OP_TEXT, &vec![b'x'; 300]));
        s.extend(cf(true, OP_CLOSE, &1000u16.to_be_bytes()));
        s.extend(cf(true, OP_TEXT, b"after close"));
        assert_eq!(
            all_splits(&s, 1000),
            vec![
                E::Open,
                E::Text(b"{\"a\":1}".to_vec()),
                E::Ping(b"hi".to_vec()),
                E::Text(b"{\"b\":2}".to_vec()),
                E::Binary(b"\x00\x01".to_vec()),
                E::Text(vec![b'x'; 300]),
                E::Close(Some(1000)),
            ]
        );
    }

    #[test]
    fn too_long_messages_are_skipped_and_reading_goes_on() {
        let mut s = HS.to_vec();
        s.extend(cf(true, OP_TEXT, &vec![b'a'; 70_000]));
        s.extend(cf(false, OP_TEXT, &[b'b'; 60]));
        s.extend(cf(true, OP_CONT, &[b'b'; 60]));
        s.extend(cf(true, OP_TEXT, b"ok"));
        assert_eq!(
            all_splits(&s, 100),
            vec![E::Open, E::TooLong, E::TooLong, E::Text(b"ok".to_vec())]
        );
    }

    #[test]
    fn protocol_errors_stop_the_reader() {
        let mut unmasked = HS.to_vec();
        unmasked.extend([0x81, 0x02, b'h', b'i']);
        assert_eq!(run(&[&unmasked], 100), vec![E::Open, E::Protocol]);
        let mut cont = HS.to_vec();
        cont.extend(cf(true, OP_CONT, b"x"));
        cont.extend(cf(true, OP_TEXT, b"y"));
        assert_eq!(run(&[&cont], 100), vec![E::Open, E::Protocol]);
        let mut reserved = HS.to_vec();
        reserved.extend(cf(true, 0xE, b"0123456789"));
        assert_eq!(run(&[&reserved], 5), vec![E::Open, E::Protocol]);
        let mut big_ping = HS.to_vec();
        big_ping.extend(cf(true, OP_PING, &[0; 126]));
        assert_eq!(run(&[&big_ping], 1000), vec![E::Open, E::Protocol]);
        assert_eq!(run(&[b"GET / HTTP/1.1\r\n\r\n"], 100), vec![E::Refuse]);
    }

    #[test]
    fn lines_become_one_text_frame_each() {
        let mut out = Vec::new();
        push_text_lines(&mut out, b"{\"a\":1}\n{}\n");
        assert_eq!(out, b"\x81\x07{\"a\":1}\x81\x02{}");
    }

    #[test]
    fn headers_use_the_shortest_length_form() {
        assert_eq!(header(OP_TEXT, 5).1, 2);
        assert_eq!(header(OP_TEXT, 126).1, 4);
        assert_eq!(header(OP_TEXT, 65_536).1, 10);
        assert_eq!(&frame(OP_TEXT, b"hi")[..], &[0x81, 2, b'h', b'i']);
    }
}
