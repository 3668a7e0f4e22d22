//! A raw WebSocket client for the wire tests: masked client frames out,
//! server frames parsed by hand, every read with a deadline.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::*;

pub const KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";
pub const ACCEPT: &str = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=";

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

/// A server frame: (opcode, payload).
pub type Frame = (u8, Vec<u8>);

pub struct Ws {
    pub s: TcpStream,
    pub buf: Vec<u8>,
}

pub fn masked(op: u8, fin: bool, payload: &[u8]) -> Vec<u8> {
    let mask = [0x37u8, 0xfa, 0x21, 0x3d];
    let mut out = vec![(if fin { 0x80 } else { 0 }) | op];
    let n = payload.len();
    if n < 126 {
        out.push(0x80 | n as u8);
    } else if n < 65536 {
        out.push(0x80 | 126);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(0x80 | 127);
        out.extend_from_slice(&(n as u64).to_be_bytes());
    }
    out.extend_from_slice(&mask);
    out.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    out
}

impl Ws {
    pub fn raw(gw: &Gateway) -> Ws {
        let s = TcpStream::connect(ws_addr(gw)).expect("connect ws port");
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .expect("timeout");
        Ws { s, buf: Vec::new() }
    }

    pub fn connect(gw: &Gateway) -> Ws {
        let mut ws = Ws::raw(gw);
        let head = ws.handshake(&format!(
            "GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {KEY}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        ));
        assert!(head.starts_with("HTTP/1.1 101"), "{head}");
        ws
    }

    /// Sends a request head, returns the response head.
    pub fn handshake(&mut self, req: &str) -> String {
        self.s.write_all(req.as_bytes()).expect("send handshake");
        let dl = deadline(REPLY);
        loop {
            if let Some(end) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&self.buf[..end + 4]).to_string();
                self.buf.drain(..end + 4);
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
            if self.buf.len() >= 2 {
                assert_eq!(self.buf[1] & 0x80, 0, "server frames are unmasked");
                let (len, hdr) = match self.buf[1] & 0x7f {
                    126 if self.buf.len() >= 4 => {
                        (u16::from_be_bytes([self.buf[2], self.buf[3]]) as usize, 4)
                    }
                    127 if self.buf.len() >= 10 => {
                        let mut b = [0u8; 8];
                        b.copy_from_slice(&self.buf[2..10]);
                        (u64::from_be_bytes(b) as usize, 10)
                    }
                    126 | 127 => (usize::MAX, 0),
                    n => (n as usize, 2),
                };
                if len != usize::MAX && self.buf.len() >= hdr + len {
                    assert_eq!(self.buf[0] & 0x80, 0x80, "server frames are final");
                    let f = (self.buf[0] & 0x0f, self.buf[hdr..hdr + len].to_vec());
                    self.buf.drain(..hdr + len);
                    return Some(f);
                }
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
