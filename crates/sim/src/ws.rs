//! The WebSocket client the simulation plays (RFC 6455), written from the
//! RFC rather than from `rosgate_wire::ws`, so the two can disagree:
//! opening-handshake requests (valid in several spellings, or refused) with
//! the `Sec-WebSocket-Accept` each valid key must get, masked client frames
//! (any key, any fragmentation), and a strict parser for what a server may
//! send (FIN set, no mask, no reserved bits, shortest length form, text,
//! pong or close only).

/// Client frame opcodes (RFC 6455 §5.2).
pub(crate) const OP_CONT: u8 = 0x0;
pub(crate) const OP_TEXT: u8 = 0x1;
pub(crate) const OP_BINARY: u8 = 0x2;
pub(crate) const OP_CLOSE: u8 = 0x8;
pub(crate) const OP_PING: u8 = 0x9;
pub(crate) const OP_PONG: u8 = 0xA;

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

/// Appends one client frame: `fin`, `opcode`, the payload masked with
/// `mask` (RFC 6455 §5.3), the length in its shortest form.
pub(crate) fn client_frame(
    out: &mut Vec<u8>,
    fin: bool,
    opcode: u8,
    payload: &[u8],
    mask: [u8; 4],
) {
    out.push(if fin { 0x80 } else { 0 } | opcode);
    push_len(out, 0x80, payload.len() as u64);
    out.extend_from_slice(&mask);
    out.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
}

/// The second header byte (`mask_bit` | 7-bit length) and any extended
/// length, shortest form.
pub(crate) fn push_len(out: &mut Vec<u8>, mask_bit: u8, len: u64) {
    if len < 126 {
        out.push(mask_bit | len as u8);
    } else if len <= u64::from(u16::MAX) {
        out.push(mask_bit | 126);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(mask_bit | 127);
        out.extend_from_slice(&len.to_be_bytes());
    }
}

/// The bytes a server text frame carrying `len` payload bytes takes on the
/// wire.
#[cfg(test)]
fn server_frame_len(len: usize) -> usize {
    let header = match len {
        0..=125 => 2,
        126..=65535 => 4,
        _ => 10,
    };
    header + len
}

/// The server text frame carrying `line`: what a WebSocket subscriber's
/// queue holds for one publish.
pub(crate) fn server_text_frame(line: &[u8]) -> Vec<u8> {
    let mut f = vec![0x80 | OP_TEXT];
    push_len(&mut f, 0, line.len() as u64);
    f.extend_from_slice(line);
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
/// send is an error.
pub(crate) fn parse_server_frame(buf: &[u8]) -> Result<Option<(ServerFrame, usize)>, String> {
    let [b0, b1, ..] = *buf else {
        return Ok(None);
    };
    if b0 & 0x80 == 0 {
        return Err("a server frame without FIN (we never fragment)".into());
    }
    if b0 & 0x70 != 0 {
        return Err("a server frame with reserved bits set".into());
    }
    if b1 & 0x80 != 0 {
        return Err("a masked server frame".into());
    }
    let opcode = b0 & 0x0F;
    if !matches!(opcode, OP_TEXT | OP_CLOSE | OP_PONG) {
        return Err(format!("a server frame with opcode {opcode:#x}"));
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
    if header != shortest {
        return Err(format!("length {len} not in its shortest form"));
    }
    if opcode != OP_TEXT && len > 125 {
        return Err(format!("a {len}-byte control frame"));
    }
    let end = header + usize::try_from(len).map_err(|_| "frame too long".to_string())?;
    if buf.len() < end {
        return Ok(None);
    }
    let frame = ServerFrame {
        opcode,
        payload: buf[header..end].to_vec(),
    };
    Ok(Some((frame, end)))
}

/// Checks a complete HTTP response head (through its blank line) against
/// `answer`.
pub(crate) fn check_response_head(head: &[u8], answer: &Answer) -> Result<(), String> {
    let text = std::str::from_utf8(head).map_err(|_| "response head is not UTF-8".to_string())?;
    let text = text
        .strip_suffix("\r\n\r\n")
        .ok_or_else(|| format!("response head does not end with a blank line: {text:?}"))?;
    let mut lines = text.split("\r\n");
    let status = lines.next().unwrap_or("");
    let headers: Vec<(String, &str)> = lines
        .map(|l| match l.split_once(':') {
            Some((n, v)) => Ok((n.to_ascii_lowercase(), v.trim())),
            None => Err(format!("malformed header line {l:?}")),
        })
        .collect::<Result<_, _>>()?;
    let header = |name: &str| {
        headers
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| *v)
            .collect::<Vec<_>>()
    };
    match answer {
        Answer::Accept(accept) => {
            if status != "HTTP/1.1 101 Switching Protocols" {
                return Err(format!("expected 101, got {status:?}"));
            }
            let upgrade = header("upgrade");
            let connection = header("connection");
            let ok = upgrade.len() == 1
                && upgrade[0].eq_ignore_ascii_case("websocket")
                && connection.len() == 1
                && connection[0]
                    .split(',')
                    .any(|t| t.trim().eq_ignore_ascii_case("upgrade"))
                && header("sec-websocket-accept") == [*accept]
                && header("sec-websocket-extensions").is_empty()
                && header("sec-websocket-protocol").is_empty();
            if !ok {
                return Err(format!(
                    "101 response should upgrade with accept {accept} and no extension or subprotocol: {text:?}"
                ));
            }
        }
        Answer::Refuse { code, version_hint } => {
            let want = format!("HTTP/1.1 {code} ");
            if !status.starts_with(&want) {
                return Err(format!("expected {code}, got {status:?}"));
            }
            if header("content-length") != ["0"] || header("connection") != ["close"] {
                return Err(format!("refusal must be empty and close: {text:?}"));
            }
            if *version_hint && header("sec-websocket-version") != ["13"] {
                return Err(format!("426 must name version 13: {text:?}"));
            }
        }
        Answer::Forbidden => {
            if status != "HTTP/1.1 403 Forbidden" || header("connection") != ["close"] {
                return Err(format!("expected a 403 that closes: {text:?}"));
            }
            if body_len(head).is_none_or(|n| n == 0) {
                return Err(format!("a 403 must say why in its body: {text:?}"));
            }
        }
        Answer::BadQuery => {
            if status != "HTTP/1.1 400 Bad Request" || header("connection") != ["close"] {
                return Err(format!("expected a 400 that closes: {text:?}"));
            }
            if body_len(head).is_none_or(|n| n == 0) {
                return Err(format!("a 400 must say why in its body: {text:?}"));
            }
        }
    }
    Ok(())
}

/// The `Content-Length` of a complete response head, if it has one.
pub(crate) fn body_len(head: &[u8]) -> Option<usize> {
    let text = std::str::from_utf8(head).ok()?;
    text.split("\r\n").find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.eq_ignore_ascii_case("content-length")
            .then(|| v.trim().parse().ok())?
    })
}

/// Checks the HTTP error a WebSocket client refused at the connection
/// limit is sent: `503`, its body the reason, then close.
pub(crate) fn check_rejection(frame: &[u8]) -> Result<(), String> {
    let text = std::str::from_utf8(frame).map_err(|_| "rejection is not UTF-8".to_string())?;
    let bad = || format!("bad WebSocket rejection {text:?}");
    let (head, body) = text.split_once("\r\n\r\n").ok_or_else(bad)?;
    let mut lines = head.split("\r\n");
    let ok = lines.next() == Some("HTTP/1.1 503 Service Unavailable")
        && !body.is_empty()
        && lines
            .clone()
            .any(|l| l == format!("Content-Length: {}", body.len()))
        && lines.any(|l| l == "Connection: close");
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
    fn frames_round_trip_through_the_parser_when_unmasked() {
        for len in [0usize, 1, 125, 126, 65535, 65536] {
            let payload = vec![b'x'; len];
            let mut out = vec![0x81];
            push_len(&mut out, 0, len as u64);
            out.extend_from_slice(&payload);
            assert_eq!(out.len(), server_frame_len(len));
            assert_eq!(out, server_text_frame(&payload));
            let (f, used) = parse_server_frame(&out).expect("valid").expect("complete");
            assert_eq!((f.opcode, f.payload.len(), used), (OP_TEXT, len, out.len()));
            assert_eq!(parse_server_frame(&out[..out.len() - 1]), Ok(None));
        }
        assert!(parse_server_frame(&[0x81, 126, 0, 5, 1, 2, 3, 4, 5]).is_err());
        assert!(parse_server_frame(&[0x01, 0]).is_err());
        assert!(parse_server_frame(&[0x82, 0]).is_err());
    }

    #[test]
    fn masking_follows_the_rfc_example() {
        // RFC 6455 §5.7: a masked "Hello".
        let mut out = Vec::new();
        client_frame(&mut out, true, OP_TEXT, b"Hello", [0x37, 0xfa, 0x21, 0x3d]);
        assert_eq!(
            out,
            [0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58]
        );
    }
}
