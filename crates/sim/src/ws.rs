//! The WebSocket client the simulation plays (RFC 6455): opening-handshake
//! requests (valid in several spellings, or refused) with the
//! `Sec-WebSocket-Accept` each valid key must get, and the checks of what
//! rosgate answers. Frames both ways are [`rosgate_wire::ws::client`]'s,
//! which shares no code with the server side it tests but the opcodes and
//! the accept computation; the accepts here are computed outside this
//! code, so the two can still disagree. On top of the client's checks
//! (what any server may send), this module holds rosgate to what it does
//! send: final frames only, text, pong or close, a single upgrade with no
//! extension or subprotocol (but the Foxglove one, agreed to when a
//! Foxglove client offers it: [`handshake_foxglove`]).

use rosgate_wire::ws::client::{self, Response};
pub(crate) use rosgate_wire::ws::frame::{OP_BINARY, OP_CLOSE, OP_CONT, OP_PING, OP_PONG, OP_TEXT};

/// Status code of a close for a protocol error (RFC 6455 §7.4.1).
pub(crate) const CLOSE_PROTOCOL_ERROR: u16 = 1002;

/// Client keys and the accept value each must be answered with
/// (`base64(sha1(key + 258EAFA5-E914-47DA-95CA-C5AB0DC85B11))`, computed
/// outside this code; the first pair is the RFC's own example).
const KEYS: [(&str, &str); 4] = [
    ("dGhlIHNhbXBsZSBub25jZQ==", "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="),
    ("AAECAwQFBgcICQoLDA0ODw==", "Bz3qJYTGdOe8gUSpLosEdiLKDrk="),
    ("cm9zZ2F0ZS1zaW0ta2V5Mw==", "znPoUtPPGwRKBZYK9gmPbv4JV2I="),
    ("//79/Pv6+fj39vX08/Lx8A==", "KK6gXrxy1jl+SqT4+Dk+Xlb9/D4="),
];

/// What the server must answer a handshake request with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Answer {
    /// `101 Switching Protocols` with this `Sec-WebSocket-Accept`.
    Accept(&'static str),
    /// The same, agreeing to the Foxglove subprotocol
    /// ([`FOXGLOVE_SUBPROTOCOL`]) the request offered.
    AcceptFoxglove(&'static str),
    /// An HTTP error with this status, then the connection closes;
    /// `version_hint`: it must name the supported version (426 for a wrong
    /// `Sec-WebSocket-Version`).
    Refuse { code: u16, version_hint: bool },
    /// `403 Forbidden` for a browser origin that is not allowed (neither a
    /// loopback page nor listed with `--ws-allowed-origins`), the reason as
    /// a plain-text body; the connection closes as `origin_refused`.
    Forbidden,
    /// `400 Bad Request` for a URL whose query the gateway refuses (a bad
    /// domain or node), with the reason as a plain-text body, then the
    /// connection closes.
    BadQuery,
}

/// How a handshake request is fed to the hub.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HandshakeFeed {
    Whole,
    ByteByByte,
    /// In two reads.
    Halves,
    /// Not at connect time: prepended to the client's first bytes, so it
    /// arrives in one read with the first frame.
    WithFirstFrame,
}

/// The handshake request `how` selects: bits 0-1 the spelling (3: a request
/// the server must refuse), bits 2-3 how it is fed, bits 4-5 the key (or,
/// for a refused one, bits 4-7 the kind of mistake); with `query`
/// (`?a=1&b=2`) in its URL, if given (then a handshake left for the first
/// frame is fed whole instead).
pub(crate) fn handshake(how: u8, query: Option<&str>) -> (Vec<u8>, Answer, HandshakeFeed) {
    let feed = match (how >> 2) & 3 {
        0 => HandshakeFeed::Whole,
        1 => HandshakeFeed::ByteByByte,
        2 => HandshakeFeed::Halves,
        _ if query.is_some() => HandshakeFeed::Whole,
        _ => HandshakeFeed::WithFirstFrame,
    };
    let (key, accept) = KEYS[((how >> 4) & 3) as usize];
    let q = query.unwrap_or("");
    let request = match how & 3 {
        0 => format!(
            "GET /{q} HTTP/1.1\r\nHost: 127.0.0.1:9090\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        ),
        // What browsers and roslibpy send: other header case, a connection
        // token list, an extension and a subprotocol we must not agree to.
        1 => {
            let target = match query {
                Some(q) => format!("/ros{q}&client=sim"),
                None => "/ros?client=sim".to_string(),
            };
            format!(
                "GET {target} HTTP/1.1\r\nhost: localhost\r\nUser-Agent: sim\r\nsec-websocket-version: 13\r\nSEC-WEBSOCKET-KEY: {key}\r\nConnection: keep-alive, Upgrade\r\nPragma: no-cache\r\nUPGRADE: WebSocket\r\nSec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\nSec-WebSocket-Protocol: rosbridge\r\n\r\n"
            )
        }
        // Optional whitespace around values, none after a colon.
        2 => format!(
            "GET /a/b{q} HTTP/1.1\r\nUpgrade:websocket\r\nConnection:   upgrade  \r\nSec-WebSocket-Key:\t{key} \r\nSec-WebSocket-Version:13\r\nOrigin: http://localhost:8080\r\n\r\n"
        ),
        _ => return refused(how >> 4),
    };
    (request.into_bytes(), Answer::Accept(accept), feed)
}

/// The subprotocol a Foxglove client offers (`docs/protocol.md`, "Foxglove
/// WebSocket protocol").
pub(crate) const FOXGLOVE_SUBPROTOCOL: &str = "foxglove.websocket.v1";

/// A Foxglove client's opening on the rosbridge port (the hub starts a
/// session when the request offers the subprotocol): key `(how >> 4) & 3`,
/// fed whole, byte by byte or in halves by `(how >> 2) & 3`.
pub(crate) fn handshake_foxglove(how: u8) -> (Vec<u8>, Answer, HandshakeFeed) {
    let feed = match (how >> 2) & 3 {
        1 => HandshakeFeed::ByteByByte,
        2 => HandshakeFeed::Halves,
        _ => HandshakeFeed::Whole,
    };
    let (key, accept) = KEYS[((how >> 4) & 3) as usize];
    let request = format!(
        "GET / HTTP/1.1\r\nHost: 127.0.0.1:9090\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: {FOXGLOVE_SUBPROTOCOL}\r\n\r\n"
    );
    (request.into_bytes(), Answer::AcceptFoxglove(accept), feed)
}

/// A request the server must refuse, always fed whole.
fn refused(kind: u8) -> (Vec<u8>, Answer, HandshakeFeed) {
    let key = KEYS[0].0;
    if kind % 6 == 5 {
        // A page of another site (cross-site WebSocket hijacking).
        let r = format!("GET / HTTP/1.1\r\nHost: 127.0.0.1:9090\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nOrigin: http://example.invalid\r\n\r\n");
        return (r.into_bytes(), Answer::Forbidden, HandshakeFeed::Whole);
    }
    let (request, code, version_hint) = match kind % 6 {
        // An upgrade without `Connection: Upgrade` (a request with no
        // `Upgrade` at all is plain HTTP, answered by the hub's HTTP side).
        0 => (
            format!("GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").into_bytes(),
            426,
            false,
        ),
        1 => (
            format!("GET / HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 8\r\n\r\n").into_bytes(),
            426,
            true,
        ),
        2 => (
            format!("POST / HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").into_bytes(),
            400,
            false,
        ),
        3 => {
            let pad = "p".repeat(9000);
            (
                format!("GET / HTTP/1.1\r\nX-Pad: {pad}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").into_bytes(),
                431,
                false,
            )
        }
        _ => {
            let mut r = b"GET /\xff HTTP/1.1\r\nUpgrade: websocket\r\n".to_vec();
            r.extend_from_slice(
                format!("Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").as_bytes(),
            );
            (r, 400, false)
        }
    };
    let answer = Answer::Refuse { code, version_hint };
    (request, answer, HandshakeFeed::Whole)
}

/// The server text frame carrying `line`: what a WebSocket subscriber's
/// queue holds for one publish.
pub(crate) fn server_text_frame(line: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(client::MAX_FRAME_HEADER + line.len());
    client::push_frame(&mut f, true, OP_TEXT, line, None);
    f
}

/// One server frame (always final).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct ServerFrame {
    pub opcode: u8,
    pub payload: Vec<u8>,
}

/// Parses the server frame at the start of `buf`: `Ok(None)` if it is not
/// complete yet, else the frame and its length. Anything a server must not
/// send ([`client::parse_frame`]) is an error, and so is what rosgate in
/// particular never sends: a fragment, or an opcode but text, pong and
/// close.
pub(crate) fn parse_server_frame(buf: &[u8]) -> Result<Option<(ServerFrame, usize)>, String> {
    let (frame, used) = match client::parse_frame(buf, usize::MAX) {
        Ok(Some(f)) => f,
        Ok(None) => return Ok(None),
        Err(e) => return Err(format!("a server frame the RFC forbids: {e}")),
    };
    if !frame.fin {
        return Err("a server frame without FIN (we never fragment)".into());
    }
    if !matches!(frame.opcode, OP_TEXT | OP_BINARY | OP_CLOSE | OP_PONG) {
        return Err(format!("a server frame with opcode {:#x}", frame.opcode));
    }
    let frame = ServerFrame {
        opcode: frame.opcode,
        payload: frame.payload.to_vec(),
    };
    Ok(Some((frame, used)))
}

/// Checks a complete HTTP response head against `answer`.
pub(crate) fn check_response(resp: &Response, answer: &Answer) -> Result<(), String> {
    let header = |name: &str| resp.all(name);
    let status = (resp.version, resp.status, resp.reason.as_str());
    match answer {
        Answer::AcceptFoxglove(accept) => {
            if status != (1, 101, "Switching Protocols") {
                return Err(format!("expected 101, got {status:?}"));
            }
            resp.check_accept_value(accept)
                .map_err(|e| format!("101 response: {e}: {resp:?}"))?;
            let ok = header("upgrade").len() == 1
                && header("sec-websocket-accept").len() == 1
                && header("sec-websocket-extensions").is_empty()
                && header("sec-websocket-protocol") == [FOXGLOVE_SUBPROTOCOL];
            if !ok {
                return Err(format!(
                    "101 response to a Foxglove opening should agree to {FOXGLOVE_SUBPROTOCOL} once: {resp:?}"
                ));
            }
        }
        Answer::Accept(accept) => {
            if status != (1, 101, "Switching Protocols") {
                return Err(format!("expected 101, got {status:?}"));
            }
            // The client's check, with the accept value computed outside
            // this code, then what a client may not agree to.
            resp.check_accept_value(accept)
                .map_err(|e| format!("101 response: {e}: {resp:?}"))?;
            let ok = header("upgrade").len() == 1
                && header("connection").len() == 1
                && header("sec-websocket-accept").len() == 1
                && header("sec-websocket-extensions").is_empty()
                && header("sec-websocket-protocol").is_empty();
            if !ok {
                return Err(format!(
                    "101 response should upgrade once, with no extension or subprotocol: {resp:?}"
                ));
            }
        }
        Answer::Refuse { code, version_hint } => {
            if (status.0, status.1) != (1, *code) {
                return Err(format!("expected {code}, got {status:?}"));
            }
            if header("content-length") != ["0"] || header("connection") != ["close"] {
                return Err(format!("refusal must be empty and close: {resp:?}"));
            }
            if *version_hint && header("sec-websocket-version") != ["13"] {
                return Err(format!("426 must name version 13: {resp:?}"));
            }
        }
        Answer::Forbidden => {
            if status != (1, 403, "Forbidden") || header("connection") != ["close"] {
                return Err(format!("expected a 403 that closes: {resp:?}"));
            }
            if resp.content_length().is_none_or(|n| n == 0) {
                return Err(format!("a 403 must say why in its body: {resp:?}"));
            }
        }
        Answer::BadQuery => {
            if status != (1, 400, "Bad Request") || header("connection") != ["close"] {
                return Err(format!("expected a 400 that closes: {resp:?}"));
            }
            if resp.content_length().is_none_or(|n| n == 0) {
                return Err(format!("a 400 must say why in its body: {resp:?}"));
            }
        }
    }
    Ok(())
}

/// Checks the HTTP error a WebSocket client refused at the connection
/// limit is sent: `503`, its body the reason, then close.
pub(crate) fn check_rejection(frame: &[u8]) -> Result<(), String> {
    let bad = || {
        format!(
            "bad WebSocket rejection {:?}",
            String::from_utf8_lossy(frame)
        )
    };
    let resp = Response::parse(frame).map_err(|_| bad())?.ok_or_else(bad)?;
    let body = &frame[resp.len..];
    let ok = (resp.version, resp.status, resp.reason.as_str()) == (1, 503, "Service Unavailable")
        && !body.is_empty()
        && std::str::from_utf8(body).is_ok()
        && resp.content_length() == Some(body.len())
        && resp.all("connection") == ["close"];
    if ok {
        Ok(())
    } else {
        Err(bad())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_frames_are_held_to_what_rosgate_sends() {
        for len in [0usize, 1, 125, 126, 65535, 65536] {
            let payload = vec![b'x'; len];
            let out = server_text_frame(&payload);
            let (f, used) = parse_server_frame(&out).expect("valid").expect("complete");
            assert_eq!((f.opcode, f.payload.len(), used), (OP_TEXT, len, out.len()));
            assert_eq!(parse_server_frame(&out[..out.len() - 1]), Ok(None));
        }
        assert!(parse_server_frame(&[0x81, 126, 0, 5, 1, 2, 3, 4, 5]).is_err());
        assert!(parse_server_frame(&[0x01, 0]).is_err());
        assert!(parse_server_frame(&[0x02, 0]).is_err());
        assert!(parse_server_frame(&[0x83, 0]).is_err());
        let (f, _) = parse_server_frame(&[0x82, 1, 0xf6])
            .expect("valid")
            .expect("whole");
        assert_eq!((f.opcode, f.payload), (OP_BINARY, vec![0xf6]));
    }

    #[test]
    fn the_accepts_here_are_the_rfc_computation() {
        for (key, accept) in KEYS {
            assert_eq!(rosgate_wire::ws::handshake::accept_key(key), accept);
        }
    }
}
