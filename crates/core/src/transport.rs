//! The transport seam: everything that differs between kinds of connection
//! (NDJSON over TCP, rosbridge over WebSocket; later TLS-wrapped streams and
//! in-process bridges) is decided here and nowhere else.
//!
//! A [`Link`] turns a connection's raw input into [`Inbound`] events (whole
//! messages, plus the transport's own replies and closes) and knows how its
//! output is framed ([`Framing`]) and which rules its requests follow
//! ([`Policy`]). The hub sees messages and a policy, never opcodes, frame
//! headers or line terminators.
//!
//! Invariants:
//! - a `Link` holds at most one partial message (bounded by the caller's
//!   `max`) plus, for WebSocket, one partial frame header and handshake
//!   head; `trim` gives back what an idle link does not need;
//! - events come out in input order; transport replies (handshake response,
//!   pong, close) are queued by the hub in that same order relative to
//!   responses to the messages around them.

use std::borrow::Cow;
use std::rc::Rc;

use rosgate_wire::decode::Dialect;
use rosgate_wire::encode::{self, Level};
use rosgate_wire::line::{Frame, LineReader};
use rosgate_wire::ws::handshake::{HttpRequest, Opening};
use rosgate_wire::ws::{self, WsEvent, WsReader};
use rosgate_wire::Raw;

use crate::codes::{CloseReason, ErrorCode};
use crate::encoding::{Encoding, Parsed};

/// Status code for a protocol violation (RFC 6455 §7.4.1).
const WS_CLOSE_PROTOCOL_ERROR: u16 = 1002;
/// Status code for an endpoint going away (server shutdown).
const WS_CLOSE_GOING_AWAY: u16 = 1001;

/// Which listener a connection came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// Newline-delimited JSON over TCP: the base protocol
    /// (`docs/protocol.md`), strictly.
    Tcp,
    /// rosbridge v2 over WebSocket: one JSON object per text frame (and
    /// the Foxglove WebSocket protocol for a client that offers its
    /// subprotocol; the Foxglove listener's connections are WebSocket ones
    /// that must, `Hub::open_foxglove_from`).
    WebSocket,
}

impl Transport {
    /// A short name (`tcp`, `ws`), for node names and logs.
    pub fn label(self) -> &'static str {
        match self {
            Transport::Tcp => "tcp",
            Transport::WebSocket => "ws",
        }
    }

    /// What a connection refused before admission is sent before it is
    /// closed: an error status, or for a WebSocket client (which has not
    /// even finished its handshake) an HTTP error.
    pub fn refusal(self, status: u16, reason: &str, msg: &str) -> Vec<u8> {
        match self {
            Transport::Tcp => {
                let mut out = Vec::new();
                encode::status(&mut out, Level::Error, msg, None);
                out
            }
            Transport::WebSocket => format!(
                "HTTP/1.1 {status} {reason}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{msg}",
                msg.len()
            )
            .into_bytes(),
        }
    }
}

/// Which status messages a connection receives (`--ws-status`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub enum StatusFilter {
    /// Every status (the TCP listener, always).
    #[default]
    All,
    /// Error statuses only: rosbridge sends none, and roslibpy logs each
    /// status frame as an error, so informational ones are noise there.
    Errors,
    /// Errors and warnings (a duplicate node name, an incompatible QoS):
    /// the WebSocket default, since a warning is news the client asked
    /// for by declaring a node or a QoS.
    Warnings,
    /// No statuses at all.
    None,
}

impl StatusFilter {
    pub fn wants(self, level: Level) -> bool {
        match self {
            StatusFilter::All => true,
            StatusFilter::Errors => level == Level::Error,
            StatusFilter::Warnings => level != Level::Info,
            StatusFilter::None => false,
        }
    }
}

impl std::str::FromStr for StatusFilter {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "all" => Ok(StatusFilter::All),
            "error" => Ok(StatusFilter::Errors),
            "warning" => Ok(StatusFilter::Warnings),
            "none" => Ok(StatusFilter::None),
            // rosbridge's set_level names the lowest level sent.
            "info" | "debug" => Ok(StatusFilter::All),
            _ => Err(format!(
                "invalid status level {s:?} (none|error|warning|all)"
            )),
        }
    }
}

/// The rules a connection's requests follow and how it is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    dialect: Dialect,
    statuses: StatusFilter,
}

impl Policy {
    /// The decoding rules.
    pub fn dialect(self) -> Dialect {
        self.dialect
    }

    /// Whether a status of `level` is sent to this connection.
    pub fn wants_status(self, level: Level) -> bool {
        self.statuses.wants(level)
    }

    /// Its status filter.
    pub fn statuses(self) -> StatusFilter {
        self.statuses
    }

    /// The same policy with another status filter (`set_level`).
    pub fn with_statuses(self, statuses: StatusFilter) -> Policy {
        Policy { statuses, ..self }
    }

    /// A Foxglove session's policy: its JSON is not rosbridge's (the hub
    /// reads it with `rosgate_wire::foxglove`), its registrations are the
    /// session's (one per channel, kept by the session), and it hears
    /// `statuses`.
    pub fn foxglove(statuses: StatusFilter) -> Policy {
        Policy {
            dialect: Dialect::Strict,
            statuses,
        }
    }

    /// rosbridge keys subscriptions and advertisements by request id within
    /// a connection (`unsubscribe` with an id removes only that one); the
    /// base protocol keys them by connection.
    pub fn registrations_per_id(self) -> bool {
        self.dialect == Dialect::Rosbridge
    }

    /// rosbridge reads a provider's answer from `values` and ignores
    /// `result` when `values` is an object (see `hub/services.rs`).
    pub fn rosbridge_answers(self) -> bool {
        self.dialect == Dialect::Rosbridge
    }
}

/// How queued JSON lines are put on the wire.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Framing {
    /// As they are: newline-delimited JSON.
    #[default]
    Lines,
    /// One WebSocket text frame per line, without the `\n`.
    WebSocket,
}

impl Framing {
    /// Number of framings, for per-framing caches.
    pub const COUNT: usize = 2;

    fn index(self) -> usize {
        self as usize
    }

    /// Appends `lines` (whole `\n`-terminated JSON lines) framed.
    pub fn push_lines(self, out: &mut Vec<u8>, lines: &[u8]) {
        match self {
            Framing::Lines => out.extend_from_slice(lines),
            Framing::WebSocket => ws::frame::push_text_lines(out, lines),
        }
    }

    /// One binary message of `parts` (joined) framed, in one fresh shared
    /// buffer (the payload copied once); `None` for a framing that has no
    /// binary messages (NDJSON).
    pub fn binary_shared(self, parts: [&[u8]; 2]) -> Option<Rc<[u8]>> {
        match self {
            Framing::Lines => None,
            Framing::WebSocket => {
                let len = parts[0].len() + parts[1].len();
                let (h, n) = ws::frame::header(ws::frame::OP_BINARY, len);
                Some(encode::concat_shared(&[&h[..n], parts[0], parts[1]]))
            }
        }
    }

    /// Appends one binary message framed; `false` (nothing appended) for
    /// a framing that has no binary messages (NDJSON).
    pub fn push_binary(self, out: &mut Vec<u8>, payload: &[u8]) -> bool {
        match self {
            Framing::Lines => false,
            Framing::WebSocket => {
                let (h, n) = ws::frame::header(ws::frame::OP_BINARY, payload.len());
                out.extend_from_slice(&h[..n]);
                out.extend_from_slice(payload);
                true
            }
        }
    }
}

/// Which copy of a message [`Framed`] keeps beside its lines: an encoding
/// for a framing.
type EncodedKey = (Encoding, Framing);

/// One shared buffer of JSON lines and its framed copies, each made once on
/// first need: a publish batch is framed once per framing, not once per
/// subscriber. A single message (the QoS path, `hub/qos.rs`) also keeps
/// its other encodings ([`Encoding`]: `compression`, `fragment_size`), one
/// per (encoding, framing), made on first need by the hub: a message
/// nobody wants in an encoding is never made in it.
///
/// The message is carried as its publish line and, when it arrived as CDR
/// (a ROS 2 sample), may carry those bytes beside it ([`Framed::set_cdr`]):
/// `cbor-raw` then sends them as they came instead of encoding the JSON.
///
/// A single publish may start as its pieces instead of its line
/// ([`Framed::from_parts`], the QoS path): each copy is then made from the
/// pieces on first need, the line itself included, so a megabyte image that
/// only WebSocket and binary subscribers want is never first joined into
/// a line that nobody sends.
#[derive(Debug)]
pub struct Framed<'a> {
    copies: [Option<Rc<[u8]>>; Framing::COUNT],
    /// The one publish's pieces (topic prefix, `msg`, the closing `}\n`),
    /// when it was given so, and its `msg` as text.
    parts: Option<[&'a [u8]; 3]>,
    msg: Option<&'a str>,
    /// Other encodings made, by (encoding, framing); a handful at most.
    encoded: Vec<(EncodedKey, Rc<[u8]>)>,
    /// The message's CDR as it arrived, encapsulation header included
    /// (or as made here, `keep_cdr`).
    cdr: Option<Rc<[u8]>>,
    /// `cdr` was made here: counted in `created` and in `finish`.
    cdr_made: bool,
    /// The one message's `msg` parsed once for all its encodings.
    parsed: Parsed,
    msgs: usize,
    /// Bytes of the copies made so far, the lines included.
    created: usize,
}

impl<'a> Framed<'a> {
    /// `lines` holds `msgs` JSON lines.
    pub fn new(lines: Rc<[u8]>, msgs: usize) -> Framed<'a> {
        Framed {
            created: lines.len(),
            copies: [Some(lines), None],
            parts: None,
            msg: None,
            encoded: Vec::new(),
            cdr: None,
            cdr_made: false,
            parsed: Parsed::default(),
            msgs,
        }
    }

    /// One publish given as its pieces (the topic's `prefix` and the raw
    /// `msg`, as `rosgate_wire::encode::publish_parts` joins them); no copy
    /// is made yet.
    pub fn from_parts(prefix: &'a [u8], msg: Raw<'a>) -> Framed<'a> {
        Framed {
            created: 0,
            copies: [None, None],
            parts: Some(encode::publish_parts(prefix, msg)),
            msg: Some(msg.get()),
            encoded: Vec::new(),
            cdr: None,
            cdr_made: false,
            parsed: Parsed::default(),
            msgs: 1,
        }
    }

    /// The raw `msg` of a publish given as its pieces.
    pub fn msg(&self) -> Option<&'a str> {
        self.msg
    }

    /// Drops this handle's references; returns (bytes of every copy made,
    /// bytes of those nobody else holds, freed now), for the memory ledger.
    pub fn finish(self) -> (usize, usize) {
        let unused = self
            .copies
            .iter()
            .flatten()
            .chain(self.encoded.iter().map(|(_, rc)| rc))
            .chain(self.cdr.iter().filter(|_| self.cdr_made))
            .filter(|rc| Rc::strong_count(rc) == 1)
            .map(|rc| rc.len())
            .sum();
        (self.created, unused)
    }

    /// Gives the one message's CDR as it arrived (a ROS 2 sample): what
    /// `cbor-raw` sends. Not counted as made here: its owner counts it.
    /// The seam for samples routed with their CDR, which nothing routes
    /// yet (the ROS 2 link decodes every sample to JSON first).
    #[allow(dead_code)]
    pub fn set_cdr(&mut self, cdr: Rc<[u8]>) {
        self.cdr = Some(cdr);
    }

    /// Keeps the one message's CDR made from its JSON (counted as made):
    /// every encoding that takes CDR shares it.
    pub fn keep_cdr(&mut self, cdr: Rc<[u8]>) {
        self.created += cdr.len();
        self.cdr = Some(cdr);
        self.cdr_made = true;
    }

    /// The one message's `msg` as a value, parsed on first need and
    /// shared by every encoding made of it (`encoding::encode`).
    pub fn parsed(&self) -> &Parsed {
        &self.parsed
    }

    /// The message's CDR, when it came as CDR.
    pub fn cdr(&self) -> Option<&[u8]> {
        self.cdr.as_deref()
    }

    /// The JSON lines (joined from the pieces on first need).
    pub fn lines(&mut self) -> Rc<[u8]> {
        self.get(Framing::Lines)
    }

    /// The copy in `enc` for `framing`, if made (empty: it could not be).
    pub fn encoded(&self, enc: Encoding, framing: Framing) -> Option<Rc<[u8]>> {
        self.encoded
            .iter()
            .find(|(k, _)| *k == (enc, framing))
            .map(|(_, rc)| Rc::clone(rc))
    }

    /// Keeps `bytes`, the copy in `enc` for `framing` (counted as made).
    pub fn keep_encoded(&mut self, enc: Encoding, framing: Framing, bytes: Vec<u8>) -> Rc<[u8]> {
        self.keep_shared(enc, framing, Rc::from(bytes))
    }

    /// Keeps `rc`, the copy in `enc` for `framing` (counted as made).
    pub fn keep_shared(&mut self, enc: Encoding, framing: Framing, rc: Rc<[u8]>) -> Rc<[u8]> {
        self.created += rc.len();
        self.encoded.push(((enc, framing), Rc::clone(&rc)));
        rc
    }

    /// The bytes for a queue with `framing`.
    #[inline]
    pub fn get(&mut self, framing: Framing) -> Rc<[u8]> {
        if let Some(rc) = &self.copies[framing.index()] {
            return Rc::clone(rc);
        }
        if let Some(parts) = self.parts {
            let rc = match framing {
                Framing::Lines => encode::concat_shared(&parts),
                Framing::WebSocket => {
                    // The line without its `\n`: the prefix, `msg`, `}`.
                    let close = parts[2].strip_suffix(b"\n").unwrap_or(parts[2]);
                    let len = parts[0].len() + parts[1].len() + close.len();
                    let (h, n) = ws::frame::header(ws::frame::OP_TEXT, len);
                    encode::concat_shared(&[&h[..n], parts[0], parts[1], close])
                }
            };
            self.created += rc.len();
            self.copies[framing.index()] = Some(Rc::clone(&rc));
            return rc;
        }
        let lines = self.copies[Framing::Lines.index()]
            .as_deref()
            .unwrap_or(&[]);
        let rc: Rc<[u8]> = match (framing, self.msgs) {
            // One line (an image, most publishes): header and body go
            // straight into the shared buffer, one allocation and one
            // copy, not a Vec copied again into an Rc.
            (Framing::WebSocket, 1) => {
                let body = lines.strip_suffix(b"\n").unwrap_or(lines);
                let (h, n) = ws::frame::header(ws::frame::OP_TEXT, body.len());
                encode::concat_shared(&[&h[..n], body])
            }
            _ => {
                // Each frame header is at most 10 bytes and replaces one `\n`.
                let mut framed = Vec::with_capacity(lines.len() + 9 * self.msgs);
                framing.push_lines(&mut framed, lines);
                Rc::from(framed)
            }
        };
        self.created += rc.len();
        self.copies[framing.index()] = Some(Rc::clone(&rc));
        rc
    }
}

/// One event from a connection's input, in input order.
#[derive(Debug)]
pub enum Inbound<'a> {
    /// A whole request (a line without its terminator, a text message).
    Message(&'a [u8]),
    /// A message exceeded the limit; the rest of it is skipped.
    TooLong,
    /// A message the transport delivers but we do not accept; answer with
    /// an error status.
    Refused { code: ErrorCode, msg: &'static str },
    /// The transport's opening completed (the WebSocket upgrade): unless
    /// the hub refuses what `opening` asks for, send `response` exactly as
    /// given, first.
    Opened { response: Vec<u8>, opening: Opening },
    /// A text message of a Foxglove session (a JSON op of that protocol).
    FoxgloveText(&'a [u8]),
    /// A binary message of a Foxglove session.
    FoxgloveBinary(&'a [u8]),
    /// A plain HTTP request on the WebSocket port: the hub answers it
    /// (metrics, health, the dashboard) and closes.
    Http(HttpRequest),
    /// Transport bytes to send exactly as given (a pong).
    Reply(Cow<'a, [u8]>),
    /// The connection ends: send `last` (if any) and close with `reason`.
    /// `detail` says why, for the debug log.
    Close {
        reason: CloseReason,
        last: Option<Vec<u8>>,
        detail: &'static str,
    },
}

#[derive(Debug)]
enum Input {
    Lines(LineReader),
    WebSocket(WsReader),
}

/// A connection's transport state. See the module docs.
#[derive(Debug)]
pub struct Link {
    input: Input,
    framing: Framing,
    policy: Policy,
    /// The opening agreed to a Foxglove subprotocol: messages are that
    /// protocol's, not rosbridge's.
    foxglove: bool,
}

impl Link {
    /// The link of a connection accepted on `transport`'s listener;
    /// `ws_status` is the status filter of WebSocket connections.
    pub fn new(transport: Transport, ws_status: StatusFilter) -> Link {
        match transport {
            Transport::Tcp => Link {
                input: Input::Lines(LineReader::new()),
                framing: Framing::Lines,
                policy: Policy {
                    dialect: Dialect::Strict,
                    statuses: StatusFilter::All,
                },
                foxglove: false,
            },
            Transport::WebSocket => Link {
                input: Input::WebSocket(WsReader::new()),
                framing: Framing::WebSocket,
                policy: Policy {
                    dialect: Dialect::Rosbridge,
                    statuses: ws_status,
                },
                foxglove: false,
            },
        }
    }

    pub fn policy(&self) -> Policy {
        self.policy
    }

    pub fn framing(&self) -> Framing {
        self.framing
    }

    /// Frames `bytes` (the next bytes of the stream) into events; `max`
    /// bounds one message.
    pub fn feed(&mut self, bytes: &[u8], max: usize, mut on: impl FnMut(Inbound<'_>)) {
        match &mut self.input {
            Input::Lines(reader) => reader.feed(bytes, max, |frame| match frame {
                Frame::Line(line) => on(Inbound::Message(line)),
                Frame::TooLong => on(Inbound::TooLong),
            }),
            Input::WebSocket(reader) => {
                let foxglove = &mut self.foxglove;
                reader.feed(bytes, max, |event| {
                    if *foxglove {
                        return on(foxglove_inbound(event));
                    }
                    if let WsEvent::Open { opening, .. } = &event {
                        *foxglove = opening.foxglove.is_some();
                    }
                    on(ws_inbound(event))
                })
            }
        }
    }

    /// Bytes held for a partial message (and, for WebSocket, a partial
    /// frame or handshake head).
    pub fn buffered(&self) -> usize {
        match &self.input {
            Input::Lines(r) => r.pending_len(),
            Input::WebSocket(r) => r.buffered(),
        }
    }

    /// What to send when the gateway goes away: a WebSocket close 1001;
    /// nothing for NDJSON (its end of stream says it).
    pub fn goodbye(&self) -> Option<Vec<u8>> {
        match self.input {
            Input::Lines(_) => None,
            Input::WebSocket(_) => Some(ws::frame::close(WS_CLOSE_GOING_AWAY)),
        }
    }

    /// Releases buffers an idle link does not need.
    pub fn trim(&mut self) {
        match &mut self.input {
            Input::Lines(r) => r.trim(),
            Input::WebSocket(r) => r.trim(),
        }
    }
}

fn ws_inbound(event: WsEvent<'_>) -> Inbound<'_> {
    match event {
        WsEvent::Open { response, opening } => Inbound::Opened { response, opening },
        WsEvent::Refuse(response) => Inbound::Close {
            reason: CloseReason::ProtocolError,
            last: Some(response),
            detail: "handshake refused",
        },
        WsEvent::Http(request) => Inbound::Http(request),
        WsEvent::Text(msg) => Inbound::Message(msg),
        // rosbridge's WebSocket handler reads a binary message as UTF-8
        // JSON text (rosbridge_server's websocket_handler.py `on_message`
        // decodes bytes before the protocol sees them): the same here. Its
        // BSON mode is a server option no client can ask for, and no
        // rosbridge reads CBOR from clients, so anything but a JSON object
        // is refused with a status saying so.
        WsEvent::Binary(msg) if looks_like_json_object(msg) => Inbound::Message(msg),
        WsEvent::Binary(_) => Inbound::Refused {
            code: ErrorCode::BinaryFrame,
            msg: "a binary frame must hold a JSON object as UTF-8 text, as a text frame does \
                  (rosbridge reads binary frames so); CBOR and BSON requests are not supported",
        },
        WsEvent::Ping(payload) => Inbound::Reply(Cow::Owned(ws::frame::pong(payload))),
        // Complete the close handshake, echoing the client's code.
        WsEvent::Close(code) => Inbound::Close {
            reason: CloseReason::PeerClosed,
            last: Some(match code {
                Some(code) => ws::frame::close(code),
                None => ws::frame::close_empty(),
            }),
            detail: "close frame",
        },
        WsEvent::TooLong => Inbound::TooLong,
        WsEvent::Protocol(why) => Inbound::Close {
            reason: CloseReason::ProtocolError,
            last: Some(ws::frame::close(WS_CLOSE_PROTOCOL_ERROR)),
            detail: why,
        },
    }
}

/// A Foxglove session's events: its text and binary messages are that
/// protocol's; the rest as on any WebSocket.
fn foxglove_inbound(event: WsEvent<'_>) -> Inbound<'_> {
    match event {
        WsEvent::Text(msg) => Inbound::FoxgloveText(msg),
        WsEvent::Binary(msg) => Inbound::FoxgloveBinary(msg),
        other => ws_inbound(other),
    }
}

/// Whether a binary message starts (after JSON whitespace) as a JSON
/// object: the decoder then judges it like a text frame, and a CBOR map or
/// BSON document (neither starts with `{` but in rare BSON lengths) gets
/// the binary frame's own error.
fn looks_like_json_object(msg: &[u8]) -> bool {
    msg.iter()
        .find(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
        .is_some_and(|&b| b == b'{')
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A one-line message framed in one piece and a batch framed line by
    /// line give the same frames as `push_text_lines`, short and long.
    #[test]
    fn one_line_and_batches_frame_alike() {
        let long = format!("{{\"data\":\"{}\"}}\n", "x".repeat(70_000));
        for (lines, msgs) in [
            (b"{\"a\":1}\n".to_vec(), 1),
            (long.clone().into_bytes(), 1),
            (format!("{{\"a\":1}}\n{long}").into_bytes(), 2),
        ] {
            let mut want = Vec::new();
            Framing::WebSocket.push_lines(&mut want, &lines);
            let mut f = Framed::new(Rc::from(&lines[..]), msgs);
            assert_eq!(&f.get(Framing::WebSocket)[..], &want[..]);
            assert_eq!(&f.get(Framing::Lines)[..], &lines[..]);
        }
    }

    /// A publish given as its pieces makes the same copies as its line,
    /// each on first need, and counts only those.
    #[test]
    fn pieces_frame_like_the_line() {
        let prefix = br#"{"op":"publish","topic":"/t","msg":"#;
        let msg = Raw::from_valid_json(r#"{"data":"x"}"#);
        let line = rosgate_wire::encode::publish_parts(prefix, msg).concat();
        let mut whole = Framed::new(Rc::from(&line[..]), 1);
        let mut pieces = Framed::from_parts(prefix, msg);
        assert_eq!(pieces.msg(), Some(r#"{"data":"x"}"#));
        assert_eq!(
            pieces.get(Framing::WebSocket),
            whole.get(Framing::WebSocket)
        );
        assert_eq!(pieces.finish().0, line.len() + 1);
        let mut pieces = Framed::from_parts(prefix, msg);
        assert_eq!(&pieces.lines()[..], &line[..]);
        assert_eq!(pieces.finish(), (line.len(), line.len()));
    }

    #[test]
    fn binary_frames_join_their_parts() {
        let payload = vec![7u8; 70_000];
        let rc = Framing::WebSocket
            .binary_shared([b"head", &payload])
            .unwrap();
        let mut want = Vec::new();
        let mut joined = b"head".to_vec();
        joined.extend_from_slice(&payload);
        assert!(Framing::WebSocket.push_binary(&mut want, &joined));
        assert_eq!(&rc[..], &want[..]);
        assert!(Framing::Lines.binary_shared([b"a", b"b"]).is_none());
    }
}
