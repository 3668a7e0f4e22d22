//! The WebSocket test client: [`rosgate_wire::ws::client`] (the opening
//! request, the check of its `101`, masked frames, the strict parse of the
//! server's frames) over a blocking socket, every read with a deadline.
//! Raw bytes stay reachable (`Ws::s`, `Ws::handshake`, [`masked`]) for the
//! tests that break the protocol on purpose.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use rosgate_wire::ws::client::{self, Response};
use serde_json::Value;

use crate::support::*;

/// The key of every opening here (RFC 6455's example) and its accept.
pub const KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";
pub const ACCEPT: &str = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=";

/// The masking key of every frame here (RFC 6455 §5.7's example).
const MASK: [u8; 4] = [0x37, 0xfa, 0x21, 0x3d];

pub fn ws_addr(gw: &Gateway) -> SocketAddr {
    gw.logs()
        .iter()
        .find_map(|l| {
            l.split("websocket listening on ws://")
                .nth(1)?
                .trim()
                .parse()
                .ok()
        })
        .expect("websocket listening line")
}

/// The opening request for `target` with [`KEY`], and `headers` (raw
/// lines, each ending in CRLF) appended as they are.
pub fn upgrade_request(target: &str, headers: &str) -> String {
    let mut req = client::request("x", target, KEY, &[]);
    req.truncate(req.len() - 2); // the blank line, which now follows `headers`
    req.push_str(headers);
    req.push_str("\r\n");
    req
}

/// A server frame: (opcode, payload).
pub type Frame = (u8, Vec<u8>);

pub struct Ws {
    pub s: TcpStream,
    /// Bytes read and not yet taken as a response head or a frame.
    pub buf: Vec<u8>,
}

/// A client frame masked with [`MASK`].
pub fn masked(op: u8, fin: bool, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(client::MAX_FRAME_HEADER + payload.len());
    client::push_frame(&mut out, fin, op, payload, Some(MASK));
    out
}

/// The server frame at the start of `buf`, taken out of it. A frame no
/// server may send, or a fragment (the gateway never fragments), fails
/// the test.
pub fn take_frame(buf: &mut Vec<u8>) -> Option<Frame> {
    let (f, used) = match client::parse_frame(buf, usize::MAX) {
        Ok(Some(f)) => f,
        Ok(None) => return None,
        Err(e) => panic!("a server frame no server may send ({e}): {buf:?}"),
    };
    assert!(f.fin, "server frames are final");
    let frame = (f.opcode, f.payload.to_vec());
    buf.drain(..used);
    Some(frame)
}

/// The response head at the start of `buf` (through its blank line), if
/// complete.
pub fn response_head(buf: &[u8]) -> Option<Response> {
    Response::parse(buf).unwrap_or_else(|e| panic!("{e}: {:?}", String::from_utf8_lossy(buf)))
}

impl Ws {
    pub fn raw(gw: &Gateway) -> Ws {
        Ws::over(TcpStream::connect(ws_addr(gw)).expect("connect ws port"))
    }

    /// Wraps a connected socket (reads time out every 200 ms).
    pub fn over(s: TcpStream) -> Ws {
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .expect("timeout");
        Ws { s, buf: Vec::new() }
    }

    pub fn connect(gw: &Gateway) -> Ws {
        Ws::connect_at(gw, "/", "")
    }

    /// An opening at `target` with `headers` that must be admitted.
    pub fn connect_at(gw: &Gateway, target: &str, headers: &str) -> Ws {
        Ws::raw(gw).upgrade(target, headers)
    }

    /// A WebSocket whose socket has a tiny receive buffer (set before
    /// connecting): a slow reader.
    pub fn connect_small_rcvbuf(gw: &Gateway, rcvbuf: usize) -> Ws {
        use socket2::{Domain, Socket, Type};
        let s = Socket::new(Domain::IPV4, Type::STREAM, None).expect("socket");
        s.set_recv_buffer_size(rcvbuf).expect("SO_RCVBUF");
        s.connect_timeout(&ws_addr(gw).into(), Duration::from_secs(5))
            .expect("connect ws port");
        let s: TcpStream = s.into();
        s.set_nodelay(true).expect("nodelay");
        Ws::over(s).upgrade("/", "")
    }

    /// Sends the opening for `target`; the answer must be a `101` that
    /// accepts [`KEY`].
    pub fn upgrade(mut self, target: &str, headers: &str) -> Ws {
        let head = self.handshake(&upgrade_request(target, headers));
        let resp = response_head(head.as_bytes()).expect("a complete head");
        assert_eq!(
            resp.check_accept(KEY),
            Ok(()),
            "opening {target} with {headers:?}: {head}"
        );
        self
    }

    /// Sends a request head, returns the response head.
    pub fn handshake(&mut self, req: &str) -> String {
        self.s.write_all(req.as_bytes()).expect("send handshake");
        let dl = deadline(REPLY);
        loop {
            if let Some(resp) = response_head(&self.buf) {
                let head = String::from_utf8_lossy(&self.buf[..resp.len]).to_string();
                self.buf.drain(..resp.len);
                return head;
            }
            assert!(Instant::now() < dl, "no handshake response");
            self.fill();
        }
    }

    pub fn fill(&mut self) -> usize {
        let mut tmp = [0u8; 65536];
        match self.s.read(&mut tmp) {
            Ok(n) => {
                self.buf.extend_from_slice(&tmp[..n]);
                n
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) =>
            {
                0
            }
            Err(e) => panic!("read: {e}"),
        }
    }

    pub fn send_frame(&mut self, op: u8, fin: bool, payload: &[u8]) {
        self.s
            .write_all(&masked(op, fin, payload))
            .expect("send frame");
    }

    pub fn send_text(&mut self, text: &str) {
        self.send_frame(0x1, true, text.as_bytes());
    }

    /// The next server frame, or `None` at EOF / deadline.
    pub fn try_frame(&mut self, dl: Instant) -> Option<Frame> {
        loop {
            if let Some(f) = take_frame(&mut self.buf) {
                return Some(f);
            }
            if Instant::now() >= dl {
                return None;
            }
            let mut tmp = [0u8; 65536];
            match self.s.read(&mut tmp) {
                Ok(0) => return None,
                Ok(n) => self.buf.extend_from_slice(&tmp[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock
                            | std::io::ErrorKind::TimedOut
                            | std::io::ErrorKind::Interrupted
                    ) => {}
                Err(_) => return None,
            }
        }
    }

    pub fn frame(&mut self) -> Frame {
        self.try_frame(deadline(REPLY))
            .expect("a frame before the deadline")
    }

    /// The next text frame, parsed.
    pub fn json(&mut self) -> Value {
        let (op, payload) = self.frame();
        assert_eq!(op, 0x1, "text frame expected, got opcode {op}");
        assert!(
            !payload.ends_with(b"\n"),
            "one JSON object per frame, no newline"
        );
        serde_json::from_slice(&payload).expect("frame holds JSON")
    }

    /// Calls the stats service and returns every frame received before
    /// its answer: a barrier proving nothing else is pending.
    pub fn barrier(&mut self) -> Vec<Value> {
        self.send_text(
            r#"{"op":"call_service","service":"/rosgate/stats","id":"barrier","args":{}}"#,
        );
        let mut before = Vec::new();
        loop {
            let v = self.json();
            if v["id"] == "barrier" {
                return before;
            }
            before.push(v);
        }
    }

    pub fn expect_eof(&mut self) {
        let dl = deadline(REPLY);
        while let Some(f) = self.try_frame(dl) {
            assert_eq!(
                f.0, 0x8,
                "only a close frame may come before EOF, got {f:?}"
            );
        }
        assert!(Instant::now() < dl, "connection not closed");
    }
}
