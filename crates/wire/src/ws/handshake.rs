//! The WebSocket opening handshake (RFC 6455 §4.2), server side, sans-io.
//!
//! Invariants:
//! - at most [`MAX_REQUEST_BYTES`] of request head are buffered;
//! - request heads are parsed by `httparse` (sans-io, well kept), never by
//!   hand; header names and the `Upgrade`/`Connection` values match
//!   case-insensitively; any request path is accepted (rosbridge serves `/`
//!   and clients differ in what they send);
//! - a request that does not ask for an upgrade is an ordinary HTTP request
//!   ([`Outcome::Http`]), answered by the hub and then closed;
//! - we never agree to an extension: permessage-deflate is declined by not
//!   echoing it, which RFC 6455 permits; the only subprotocols agreed to
//!   are the Foxglove WebSocket protocol's (`crate::foxglove::SUBPROTOCOLS`),
//!   echoed when offered (the hub then speaks that protocol on the
//!   connection); any other offer is declined by not echoing it.

/// Longest accepted request head (request line + headers).
pub const MAX_REQUEST_BYTES: usize = 8 * 1024;

const GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// What the gateway keeps of an accepted opening request: what the core
/// decides on (the URL's query selects a domain and a node; later the
/// `Origin` and `Authorization` headers admit or refuse the client).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Opening {
    /// The request target as sent: path and query (`/?domain=3`).
    pub target: String,
    /// The `Origin` header, when the client (a browser) sent one.
    pub origin: Option<String>,
    /// The `Authorization` header's value.
    pub authorization: Option<String>,
    /// The Foxglove subprotocol the client offered and the response
    /// echoes (`Sec-WebSocket-Protocol`), if any.
    pub foxglove: Option<&'static str>,
}

/// A plain HTTP request (no upgrade) on the WebSocket port: `/metrics`,
/// `/healthz`, `/version`, the dashboard. Answered once, then closed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HttpRequest {
    /// `GET`, `HEAD`, ...
    pub method: String,
    /// Path and query as sent.
    pub target: String,
    /// The `Origin` header, when sent.
    pub origin: Option<String>,
    /// The `Authorization` header's value.
    pub authorization: Option<String>,
}

/// What a complete request head led to.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Send `response` (101 Switching Protocols) unless the opening is
    /// refused; frames follow.
    Accept { response: Vec<u8>, opening: Opening },
    /// A plain HTTP request, for the hub to answer.
    Http(HttpRequest),
    /// Send these bytes (an HTTP error) and close.
    Reject(Vec<u8>),
}

/// Headers. Kept from one request head; more are refused with 431 (a
/// browser sends about 15; the array lives on the stack while parsing).
pub const MAX_HEADERS: usize = 64;

/// Looks for a complete request head in `buf` (parsed by `httparse`).
/// Returns the outcome and the head's length, `None` if more bytes are
/// needed. A head that grows past [`MAX_REQUEST_BYTES`] is refused at once.
pub fn parse(buf: &[u8]) -> Option<(Outcome, usize)> {
    let window = &buf[..buf.len().min(MAX_REQUEST_BYTES + 4)];
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    match req.parse(window) {
        Ok(httparse::Status::Complete(len)) if len <= MAX_REQUEST_BYTES => {
            Some((respond(&req), len))
        }
        Ok(httparse::Status::Complete(len)) => {
            Some((reject(431, "Request Header Fields Too Large"), len))
        }
        Ok(httparse::Status::Partial) if buf.len() > MAX_REQUEST_BYTES => {
            Some((reject(431, "Request Header Fields Too Large"), buf.len()))
        }
        Ok(httparse::Status::Partial) => None,
        Err(httparse::Error::TooManyHeaders) => {
            Some((reject(431, "Request Header Fields Too Large"), buf.len()))
        }
        Err(_) => Some((reject(400, "Bad Request"), buf.len())),
    }
}

fn respond(req: &httparse::Request<'_, '_>) -> Outcome {
    let (Some(method), Some(target)) = (req.method, req.path) else {
        return reject(400, "Bad Request");
    };
    let header = |name: &str| -> Option<&str> {
        req.headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .and_then(|h| std::str::from_utf8(h.value).ok())
            .map(str::trim)
    };
    let origin = header("origin").map(str::to_string);
    let authorization = header("authorization").map(str::to_string);
    let upgrade = header("upgrade").is_some_and(|v| {
        v.split(',')
            .any(|t| t.trim().eq_ignore_ascii_case("websocket"))
    });
    let connection = req.headers.iter().any(|h| {
        h.name.eq_ignore_ascii_case("connection")
            && std::str::from_utf8(h.value).is_ok_and(|v| {
                v.split(',')
                    .any(|t| t.trim().eq_ignore_ascii_case("upgrade"))
            })
    });
    if !upgrade {
        // Not a WebSocket: an ordinary HTTP request for the hub.
        return Outcome::Http(HttpRequest {
            method: method.to_string(),
            target: target.to_string(),
            origin,
            authorization,
        });
    }
    if method != "GET" {
        return reject(400, "Bad Request");
    }
    let Some(key) = header("sec-websocket-key").filter(|_| connection) else {
        return reject(426, "Upgrade Required");
    };
    if header("sec-websocket-version") != Some("13") {
        return Outcome::Reject(
            b"HTTP/1.1 426 Upgrade Required\r\nSec-WebSocket-Version: 13\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                .to_vec(),
        );
    }
    let accept = accept_key(key);
    // Several headers may each list protocols (RFC 6455 §4.1): any of
    // them may offer Foxglove's.
    let foxglove = req
        .headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("sec-websocket-protocol"))
        .filter_map(|h| std::str::from_utf8(h.value).ok())
        .find_map(crate::foxglove::choose);
    let protocol = foxglove
        .map(|p| format!("Sec-WebSocket-Protocol: {p}\r\n"))
        .unwrap_or_default();
    Outcome::Accept {
        response: format!(
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n{protocol}\r\n"
        )
        .into_bytes(),
        opening: Opening {
            target: target.to_string(),
            origin,
            authorization,
            foxglove,
        },
    }
}

/// An HTTP error response with a plain-text body, for a refused opening.
pub fn refusal(code: u16, reason: &str, body: &str) -> Vec<u8> {
    response(
        code,
        reason,
        "text/plain; charset=utf-8",
        body.as_bytes(),
        &[],
    )
}

/// A complete HTTP/1.1 response that closes the connection.
pub fn response(
    code: u16,
    reason: &str,
    content_type: &str,
    body: &[u8],
    extra: &[(&str, &str)],
) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\nCache-Control: no-store\r\n",
        body.len()
    )
    .into_bytes();
    for (k, v) in extra {
        out.extend_from_slice(format!("{k}: {v}\r\n").as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
    out
}

fn reject(code: u16, reason: &str) -> Outcome {
    Outcome::Reject(
        format!("HTTP/1.1 {code} {reason}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            .into_bytes(),
    )
}

/// `base64(sha1(key + GUID))`.
pub fn accept_key(key: &str) -> String {
    let mut input = Vec::with_capacity(key.len() + GUID.len());
    input.extend_from_slice(key.as_bytes());
    input.extend_from_slice(GUID.as_bytes());
    base64(&sha1(&input))
}

/// SHA-1 (FIPS 180-4). Used only for the handshake key, where RFC 6455
/// mandates it; not for anything that needs collision resistance.
pub fn sha1(data: &[u8]) -> [u8; 20] {
    let mut h: [u32; 5] = [
        0x6745_2301,
        0xEFCD_AB89,
        0x98BA_DCFE,
        0x1032_5476,
        0xC3D2_E1F0,
    ];
    let mut msg = data.to_vec();
    let bit_len = (data.len() as u64).wrapping_mul(8);
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&bit_len.to_be_bytes());
    for block in msg.chunks_exact(64) {
        let mut w = [0u32; 80];
        for (i, word) in block.chunks_exact(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..80 {
            w[i] = (w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]).rotate_left(1);
        }
        let [mut a, mut b, mut c, mut d, mut e] = h;
        for (i, &wi) in w.iter().enumerate() {
            let (f, k) = match i {
                0..=19 => ((b & c) | (!b & d), 0x5A82_7999),
                20..=39 => (b ^ c ^ d, 0x6ED9_EBA1),
                40..=59 => ((b & c) | (b & d) | (c & d), 0x8F1B_BCDC),
                _ => (b ^ c ^ d, 0xCA62_C1D6),
            };
            let t = a
                .rotate_left(5)
                .wrapping_add(f)
                .wrapping_add(e)
                .wrapping_add(k)
                .wrapping_add(wi);
            e = d;
            d = c;
            c = b.rotate_left(30);
            b = a;
            a = t;
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d, e]) {
            *x = x.wrapping_add(y);
        }
    }
    let mut out = [0u8; 20];
    for (i, x) in h.iter().enumerate() {
        out[i * 4..i * 4 + 4].copy_from_slice(&x.to_be_bytes());
    }
    out
}

/// Standard base64 with padding ([`crate::base64`]).
pub fn base64(data: &[u8]) -> String {
    crate::base64::encode(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc6455_example_key() {
        assert_eq!(
            accept_key("dGhlIHNhbXBsZSBub25jZQ=="),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
    }

    #[test]
    fn sha1_and_base64_vectors() {
        assert_eq!(base64(&sha1(b"abc")), "qZk+NkcGgWq6PiVxeFDCbJzQ2J0=");
        assert_eq!(base64(&sha1(b"")), "2jmj7l5rSw0yVb/vlWAYkK/YBwk=");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
    }

    #[test]
    fn upgrade_is_case_insensitive_and_rest_is_left() {
        let req = b"GET / HTTP/1.1\r\nHost: x\r\nUPGRADE: WebSocket\r\nconnection: keep-alive, Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Extensions: permessage-deflate\r\n\r\nFRAME";
        let (out, used) = parse(req).expect("complete");
        assert_eq!(&req[used..], b"FRAME");
        let Outcome::Accept {
            response: resp,
            opening,
        } = out
        else {
            panic!("rejected")
        };
        assert_eq!(opening.target, "/");
        assert_eq!(opening.origin, None);
        let resp = String::from_utf8(resp).expect("ascii");
        assert!(resp.starts_with("HTTP/1.1 101 "));
        assert!(resp.contains("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"));
        assert!(!resp.contains("deflate"));
        assert!(!resp.contains("Sec-WebSocket-Protocol"));
        assert_eq!(opening.foxglove, None);
    }

    /// A Foxglove subprotocol offered is echoed and kept; another is not.
    #[test]
    fn foxglove_subprotocols_are_echoed() {
        for (offer, want) in [
            ("foxglove.websocket.v1", Some("foxglove.websocket.v1")),
            ("chat, foxglove.sdk.v1", Some("foxglove.sdk.v1")),
            ("chat", None),
        ] {
            let req = format!("GET / HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: {offer}\r\n\r\n");
            let Some((Outcome::Accept { response, opening }, _)) = parse(req.as_bytes()) else {
                panic!("rejected")
            };
            assert_eq!(opening.foxglove, want);
            let resp = String::from_utf8(response).unwrap();
            match want {
                Some(p) => {
                    assert!(resp.contains(&format!("\r\nSec-WebSocket-Protocol: {p}\r\n\r\n")))
                }
                None => assert!(!resp.contains("Sec-WebSocket-Protocol")),
            }
        }
    }

    #[test]
    fn plain_http_is_a_request_and_garbage_is_rejected() {
        let (out, _) = parse(b"GET /metrics?x=1 HTTP/1.1\r\nHost: x\r\nOrigin: http://a\r\n\r\n")
            .expect("complete");
        assert_eq!(
            out,
            Outcome::Http(HttpRequest {
                method: "GET".into(),
                target: "/metrics?x=1".into(),
                origin: Some("http://a".into()),
                authorization: None,
            })
        );
        let (out, _) = parse(b"GET / HTTP/1.1\r\nUpgrade: websocket\r\n\r\n").expect("complete");
        assert!(
            matches!(out, Outcome::Reject(r) if r.starts_with(b"HTTP/1.1 426")),
            "upgrade without key"
        );
        let (out, _) = parse(b"\x16\x03\x01\r\n\r\n").expect("complete");
        assert!(matches!(out, Outcome::Reject(_)));
        assert_eq!(parse(b"GET / HTTP/1.1\r\n"), None);
        let too_big = parse(&vec![b'a'; MAX_REQUEST_BYTES + 1]);
        assert!(matches!(too_big, Some((Outcome::Reject(_), _))));
        let mut whole = b"GET / HTTP/1.1\r\nX: ".to_vec();
        whole.extend(vec![b'a'; MAX_REQUEST_BYTES]);
        whole.extend_from_slice(b"\r\n\r\n");
        let (out, _) = parse(&whole).expect("complete");
        assert!(matches!(out, Outcome::Reject(r) if r.starts_with(b"HTTP/1.1 431")));
    }

    #[test]
    fn header_count_is_bounded() {
        let head = |n: usize| {
            let mut h = b"GET /healthz HTTP/1.1\r\n".to_vec();
            for i in 0..n {
                h.extend_from_slice(format!("X-{i}: y\r\n").as_bytes());
            }
            h.extend_from_slice(b"\r\n");
            h
        };
        let (out, _) = parse(&head(MAX_HEADERS)).expect("complete");
        assert!(matches!(out, Outcome::Http(_)), "{MAX_HEADERS} headers");
        for n in [MAX_HEADERS + 1, 1500] {
            let (out, _) = parse(&head(n)).expect("complete");
            assert!(
                matches!(out, Outcome::Reject(r) if r.starts_with(b"HTTP/1.1 431")),
                "{n} headers"
            );
        }
    }
}
