//! WebSocket control traffic ([`crate::Action::WsControl`]): pings,
//! unsolicited pongs, binary and oversized messages, ignored rosbridge ops,
//! close frames and protocol violations, each with what the model then
//! owes the client (a pong, an error status, the close frame echoed, or a
//! 1002 close and a protocol-error close).

use rosgate_core::StatusFilter;
use rosgate_wire::ws::client;

use super::Sim;
use crate::model::Unit;
use crate::violation::Violation;
use crate::ws::{self, OP_BINARY, OP_CLOSE, OP_CONT, OP_PING, OP_PONG, OP_TEXT};

/// Close codes a client may send (RFC 6455 §7.4), echoed by the hub.
const VALID_CLOSE_CODES: [u16; 10] = [1000, 1001, 1002, 1003, 1007, 1008, 1011, 1014, 3000, 4999];

/// Close codes no endpoint may send: a protocol error.
const INVALID_CLOSE_CODES: [u16; 6] = [0, 999, 1005, 1006, 1015, 5000];

/// A text message longer than any line limit the simulation uses, and
/// than 65535 bytes (the 64-bit length form).
const HUGE_MESSAGE: usize = 70_000;

/// The reads a control write is cut into, by the top two bits of `arg`
/// (see `driver::BYTE_BY_BYTE`).
const MODES: [u8; 4] = [0, 0, 16, 40];

impl Sim {
    /// Sends the control traffic `kind % 8` selects (see
    /// [`crate::Action::WsControl`]) from WebSocket client `slot`.
    pub(crate) fn ws_control(&mut self, slot: usize, kind: u8, arg: u8) -> Result<(), Violation> {
        let mode = MODES[usize::from(arg >> 6)];
        let mut frames = Vec::new();
        match kind % 8 {
            0 => {
                let payload = pattern(usize::from(arg) % 126, arg);
                frames.push(self.ping(slot, &payload));
            }
            1 => {
                let payload = pattern(usize::from(arg) % 126, arg);
                frames.push(self.frame(true, OP_PONG, &payload));
            }
            2 => {
                // binary_frame, or too_long past the limit: an error either way.
                let payload = pattern(usize::from(arg) * 3, arg);
                if arg % 2 == 1 {
                    let (a, b) = payload.split_at(payload.len() / 2);
                    frames.push(self.frame(false, OP_BINARY, a));
                    frames.push(self.frame(true, OP_CONT, b));
                } else {
                    frames.push(self.frame(true, OP_BINARY, &payload));
                }
                self.counts.lines_sent += 1;
                self.model.expect_status(slot, None, true);
            }
            3 | 4 => {
                let mut payload = Vec::new();
                if kind % 8 == 3 {
                    let code = VALID_CLOSE_CODES[usize::from(arg / 2) % VALID_CLOSE_CODES.len()];
                    payload.extend_from_slice(&code.to_be_bytes());
                    self.expect_close(slot, payload.clone(), false);
                    if arg % 2 == 1 {
                        payload.extend_from_slice("bye é".as_bytes());
                    }
                } else {
                    self.expect_close(slot, Vec::new(), false);
                }
                frames.push(self.frame(true, OP_CLOSE, &payload));
            }
            5 => {
                frames.extend(self.violation_frames(arg));
                let code = ws::CLOSE_PROTOCOL_ERROR.to_be_bytes().to_vec();
                self.expect_close(slot, code, true);
            }
            6 => {
                let text = vec![b' '; HUGE_MESSAGE];
                if arg % 2 == 1 {
                    let (a, b) = text.split_at(HUGE_MESSAGE / 3);
                    frames.push(self.frame(false, OP_TEXT, a));
                    frames.push(self.frame(true, OP_CONT, b));
                } else {
                    frames.push(self.frame(true, OP_TEXT, &text));
                }
                self.counts.lines_sent += 1;
                self.counts.too_long += 1;
                self.model.expect_status(slot, None, true);
            }
            _ => {
                // `set_level` changes which statuses this client receives
                // from now on (no reply); `auth` is ignored with an info
                // status.
                let text: &[u8] = if arg % 2 == 0 {
                    let (text, filter): (&[u8], StatusFilter) = match (arg / 2) % 4 {
                        0 => (
                            br#"{"op":"set_level","level":"info","id":"lvl"}"#,
                            StatusFilter::All,
                        ),
                        1 => (
                            br#"{"op":"set_level","level":"warning"}"#,
                            StatusFilter::Warnings,
                        ),
                        2 => (
                            br#"{"op":"set_level","level":"error"}"#,
                            StatusFilter::Errors,
                        ),
                        _ => (br#"{"op":"set_level","level":"none"}"#, StatusFilter::None),
                    };
                    if let Some(ws) = self.model.client_mut(slot).ws_mut() {
                        ws.status = filter;
                    }
                    text
                } else {
                    // Without --auth-tokens the gateway says it ignored it.
                    self.model.expect_status(slot, None, false);
                    br#"{"op":"auth","mac":"00","client":"sim","dest":"gw","rand":"r","t":0,"level":"user","end":0}"#
                };
                self.counts.lines_sent += 1;
                frames.push(self.frame(true, OP_TEXT, text));
            }
        }
        // What they owe is expected before the first read (a too-long
        // message is refused at its first frame header); whole frames
        // leave nothing buffered.
        let frames = frames
            .into_iter()
            .map(|f| {
                let unit = Unit::Control(f.len());
                (f, unit)
            })
            .collect();
        let w = self.ws_write(slot, frames, mode);
        self.deliver(slot, w, None, false, false)
    }

    /// A masked client frame.
    fn frame(&mut self, fin: bool, opcode: u8, payload: &[u8]) -> Vec<u8> {
        let mut f = Vec::new();
        client::push_frame(&mut f, fin, opcode, payload, Some(self.mask()));
        f
    }

    /// The hub must answer with a close frame carrying `payload` and then
    /// close: as the client asked, or (`protocol`) for a protocol error.
    fn expect_close(&mut self, slot: usize, payload: Vec<u8>, protocol: bool) {
        let c = self.model.client_mut(slot);
        c.closed_by_us |= !protocol;
        let side = c.ws_mut().expect("a WebSocket client");
        side.close = Some(payload);
        side.protocol_close = protocol;
    }

    /// Frames breaking RFC 6455 in the way `arg % 12` picks; the hub must
    /// close with 1002 at the bad frame.
    fn violation_frames(&mut self, arg: u8) -> Vec<Vec<u8>> {
        let text = br#"{"op":"publish","topic":"/a","msg":1}"#;
        match arg % 12 {
            0 => {
                // Unmasked.
                let mut f = Vec::new();
                client::push_frame(&mut f, true, OP_TEXT, text, None);
                vec![f]
            }
            1 => {
                // RSV1 without a negotiated extension.
                let mut f = self.frame(true, OP_TEXT, text);
                f[0] |= 0x40;
                vec![f]
            }
            2 => vec![self.frame(true, 0x3, text)],
            3 => vec![self.frame(true, 0xB, b"")],
            4 => vec![self.frame(true, OP_PING, &[b'p'; 126])],
            5 => vec![self.frame(false, OP_PING, b"p")],
            6 => vec![self.frame(true, OP_CONT, text)],
            7 => {
                let (a, b) = text.split_at(10);
                vec![self.frame(false, OP_TEXT, a), self.frame(true, OP_TEXT, b)]
            }
            8 => {
                let code = INVALID_CLOSE_CODES[usize::from(arg / 12) % INVALID_CLOSE_CODES.len()];
                vec![self.frame(true, OP_CLOSE, &code.to_be_bytes())]
            }
            9 => vec![self.frame(true, OP_CLOSE, &[0x03])],
            10 => {
                let mut payload = 1000u16.to_be_bytes().to_vec();
                payload.extend_from_slice(b"\xff\xfe");
                vec![self.frame(true, OP_CLOSE, &payload)]
            }
            _ => {
                // A 64-bit length with its top bit set.
                let mut f = vec![0x80 | OP_TEXT, 0x80 | 127];
                f.extend_from_slice(&(1u64 << 63).to_be_bytes());
                f.extend_from_slice(&self.mask());
                vec![f]
            }
        }
    }
}

/// `n` bytes of a pattern seeded by `seed` (any byte values).
fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}
