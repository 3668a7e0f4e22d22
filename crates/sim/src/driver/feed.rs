//! How a client's bytes reach the hub: a [`Write`] (a TCP line, or a
//! WebSocket handshake and masked frames) cut into reads, each read one
//! `on_bytes` followed by the accounting of `accounting.rs`.
//!
//! A request's model effect is applied just before the read that
//! completes it (the hub handles a message when its last byte arrives),
//! and only if the client is still open then: a connection the hub closed
//! between two reads of a request (memory pressure) never has it handled,
//! and a request of someone else handled after that close sees it closing.
//! A refusal the hub may send before the last read (a line over the limit)
//! is expected from the first read on.
//!
//! TCP clients send lines whole, byte by byte or in two reads. WebSocket
//! clients send each request as a masked text message: one to four
//! fragments, each with its own masking key, sometimes with a ping
//! between them, cut across reads in several ways. A trickling client
//! ([`crate::Action::Trickle`]) sends a request in part and the rest
//! later; the model then knows how many bytes the hub holds for it
//! (`model::held_after`) and since when. Some requests go as rosbridge
//! `fragment` pieces (2-4, in order or reversed, one line or message each,
//! all in one write): reassembled by the hub, they must have exactly the
//! effect of the request sent whole.

use rosgate_core::counters::ErrorCode;
use rosgate_wire::ws::client;

use super::accounting::Cause;
use super::{Outgoing, Sim};
use crate::model::requests::Effect;
use crate::model::{held_after, Pending, Unit};
use crate::violation::Violation;
use crate::ws::{self, Answer, OP_CONT, OP_TEXT};

/// How the bytes of a WebSocket write are cut into reads, `split >> 2`:
/// 0 one read, [`BYTE_BY_BYTE`] one byte per read, up to [`LAST_CUT`] two
/// reads cut at that many 32nds, above it one read per frame.
const BYTE_BY_BYTE: u8 = 63;
const LAST_CUT: u8 = 31;

/// The bytes of one write, its units and where it is cut into reads.
pub(crate) struct Write {
    pub bytes: Vec<u8>,
    /// What the bytes are, in order (for what a part of them leaves
    /// buffered).
    pub units: Vec<Unit>,
    /// The end of each read, ascending, the last one `bytes.len()`.
    pub cuts: Vec<usize>,
    /// The handshake request it starts with: (length, accepted).
    pub handshake: Option<(usize, bool)>,
}

impl Sim {
    /// Feeds one read from `slot` and accounts for it. `held`: the bytes
    /// the hub then holds for the client, when the model knows it (after
    /// the last read of a write, and after each part a trickling client
    /// sends); the partial-request clock starts when a read leaves bytes
    /// held and stops when one leaves none.
    pub(crate) fn bytes_in(
        &mut self,
        slot: usize,
        bytes: &[u8],
        held: Option<usize>,
    ) -> Result<(), Violation> {
        let key = self.model.client(slot).conn.key;
        let now = self.now();
        let taken = !self.model.draining && self.hub.conn(key).is_some_and(|c| c.is_open());
        let pre = self.pre();
        self.hub.on_bytes(key, bytes, now);
        if taken {
            let at = self.offset;
            let c = self.model.client_mut(slot);
            c.last_active = at;
            if let Some(h) = held {
                c.held = h;
                if h == 0 {
                    c.partial_since = None;
                } else if c.partial_since.is_none() {
                    c.partial_since = Some(at);
                }
            }
        }
        self.after_call(
            Cause::Bytes {
                slot,
                enforce: taken,
            },
            pre,
        )
    }

    /// Feeds `w` read by read. `effect` is applied before the last read
    /// (before the first with `at_first`), if the client is open and the
    /// gateway not shutting down; `establishes`: the write is a whole line,
    /// which completes a TCP client's opening.
    pub(crate) fn deliver(
        &mut self,
        slot: usize,
        w: Write,
        effect: Option<Effect>,
        at_first: bool,
        establishes: bool,
    ) -> Result<(), Violation> {
        let mut effect = effect;
        let n = w.cuts.len();
        let mut from = 0;
        for (i, &to) in w.cuts.iter().enumerate() {
            let last = i + 1 == n;
            let now = if at_first { i == 0 } else { last };
            if now && self.model.client(slot).is_open() && !self.model.draining {
                if let Some(e) = effect.take() {
                    self.apply_effect(slot, e)?;
                }
                if establishes {
                    self.model.client_mut(slot).established = true;
                }
            }
            self.bytes_in(slot, &w.bytes[from..to], last.then_some(0))?;
            from = to;
        }
        if let Some((_, ok)) = w.handshake {
            self.handshake_sent(slot, ok);
        }
        Ok(())
    }

    /// The handshake request of `slot` went out whole; an accepted one
    /// completes its opening.
    pub(crate) fn handshake_sent(&mut self, slot: usize, accepted: bool) {
        let draining = self.model.draining;
        let c = self.model.client_mut(slot);
        let open = c.is_open();
        if let Some(w) = c.ws_mut() {
            w.hs_done = true;
        }
        if accepted && open && !draining {
            c.established = true;
        }
    }

    /// Sends a request `slot` built: whole, with the too-long error when
    /// it does not fit the limit, without any effect when it is an empty
    /// line, else with its effect.
    pub(crate) fn send_out(
        &mut self,
        slot: usize,
        out: &Outgoing,
        effect: Effect,
    ) -> Result<(), Violation> {
        let rosbridge = self.model.client(slot).rosbridge();
        let whole = fits(out, rosbridge, self.limits.max_line_bytes);
        if whole && (visible(out) || rosbridge) {
            // Decided before the whole write is built: that may expect a
            // pong for a ping between its frames.
            let publish = matches!(effect, Effect::Publish { .. });
            if let Some((w, refused)) = self.fragmented_write(slot, out, publish) {
                self.counts.lines_sent += 1;
                self.counts.fragmented_sent += 1;
                let effect = match refused {
                    Some(id) => {
                        self.counts.fragmented_refused += 1;
                        Effect::Error {
                            id: Some(id),
                            code: None,
                        }
                    }
                    None => effect,
                };
                return self.deliver(slot, w, Some(effect), false, !rosbridge);
            }
        }
        let w = if rosbridge {
            let frames = self.message_frames(slot, out, 1 + usize::from(out.split & 3));
            self.ws_write(slot, frames, out.split >> 2)
        } else {
            line_write(out)
        };
        self.counts.lines_sent += 1;
        if !whole {
            self.counts.too_long += 1;
            let refused = Effect::Error {
                id: None,
                code: None,
            };
            return self.deliver(slot, w, Some(refused), true, false);
        }
        if !visible(out) && !rosbridge {
            return self.deliver(slot, w, None, false, false);
        }
        self.deliver(slot, w, Some(effect), false, !rosbridge)
    }

    /// A WebSocket message as `fragments` text frames (cut at random
    /// places), each masked with its own key, with a ping between the first
    /// two (or before the only one) when the style says so.
    fn message_frames(
        &mut self,
        slot: usize,
        out: &Outgoing,
        fragments: usize,
    ) -> Vec<(Vec<u8>, Unit)> {
        let message = out.message();
        let pieces = self.cut(&message, fragments);
        let n = pieces.len();
        let mut frames = Vec::with_capacity(n + 1);
        for (i, p) in pieces.iter().enumerate() {
            let mut f = Vec::new();
            let op = if i == 0 { OP_TEXT } else { OP_CONT };
            let fin = i + 1 == n;
            client::push_frame(&mut f, fin, op, p, Some(self.mask()));
            let unit = Unit::Data {
                len: f.len(),
                payload: p.len(),
                fin,
            };
            frames.push((f, unit));
        }
        if out.style & 64 != 0 {
            let ping = self.ping(slot, format!("mid {}", self.counter).as_bytes());
            let unit = Unit::Control(ping.len());
            frames.insert(usize::from(n > 1), (ping, unit));
        }
        frames
    }

    /// The write of WebSocket `frames` from `slot`, after its handshake if
    /// that was left for the first frame, cut into reads by `mode` (see
    /// [`BYTE_BY_BYTE`]).
    pub(crate) fn ws_write(
        &mut self,
        slot: usize,
        frames: Vec<(Vec<u8>, Unit)>,
        mode: u8,
    ) -> Write {
        let side = self
            .model
            .client_mut(slot)
            .ws_mut()
            .expect("a WebSocket client");
        let mut bytes = Vec::new();
        let mut units = Vec::new();
        let mut ends = Vec::new();
        let mut handshake = None;
        if let Some(h) = side.pending_handshake.take() {
            let accepted = matches!(
                side.answer,
                Some(Answer::Accept(_) | Answer::AcceptFoxglove(_))
            );
            handshake = Some((h.len(), accepted));
            units.push(Unit::Handshake(h.len()));
            bytes.extend_from_slice(&h);
            ends.push(bytes.len());
        }
        for (f, u) in frames {
            units.push(u);
            bytes.extend_from_slice(&f);
            ends.push(bytes.len());
        }
        let total = bytes.len();
        let cuts = match mode {
            0 => vec![total],
            BYTE_BY_BYTE => (1..=total).collect(),
            1..=LAST_CUT => vec![total * usize::from(mode) / 32, total],
            _ => ends,
        };
        Write {
            bytes,
            units,
            cuts,
            handshake,
        }
    }

    /// Cuts `bytes` into `n` pieces at random places (some may be empty).
    fn cut<'a>(&mut self, bytes: &'a [u8], n: usize) -> Vec<&'a [u8]> {
        let mut cuts: Vec<usize> = (1..n)
            .map(|_| self.rng.below(bytes.len() as u64 + 1) as usize)
            .collect();
        cuts.sort_unstable();
        let mut pieces = Vec::with_capacity(n);
        let mut from = 0;
        for c in cuts {
            pieces.push(&bytes[from..c]);
            from = c;
        }
        pieces.push(&bytes[from..]);
        pieces
    }

    /// A masking key: all zeros one time in eight (still a masked frame).
    pub(crate) fn mask(&mut self) -> [u8; 4] {
        if self.rng.below(8) == 0 {
            [0; 4]
        } else {
            (self.rng.next_u64() as u32).to_be_bytes()
        }
    }

    /// A ping frame from `slot`; the model then owes it the pong.
    pub(crate) fn ping(&mut self, slot: usize, payload: &[u8]) -> Vec<u8> {
        let mut f = Vec::new();
        client::push_frame(&mut f, true, ws::OP_PING, payload, Some(self.mask()));
        self.model
            .client_mut(slot)
            .exp
            .pongs
            .push_back(payload.to_vec());
        f
    }

    /// [`crate::Action::Trickle`] for `slot`: goes on with its half-sent
    /// request, or starts one.
    pub(crate) fn trickle(
        &mut self,
        slot: usize,
        style: u8,
        cut: u8,
        req: &crate::actions::Req,
    ) -> Result<(), Violation> {
        if let Some(p) = self.model.client_mut(slot).pending.as_mut() {
            let left = p.rest.len();
            let n = (left * usize::from(cut) / 256).max(1);
            if n >= left {
                return self.complete_pending(slot);
            }
            let chunk: Vec<u8> = p.rest.drain(..n).collect();
            let before = p.fed;
            p.fed += n;
            let held = held_after(&p.units, p.fed);
            let hs = p.handshake.filter(|&(len, _)| before < len && p.fed >= len);
            self.bytes_in(slot, &chunk, Some(held))?;
            if let Some((_, ok)) = hs {
                self.handshake_sent(slot, ok);
            }
            return Ok(());
        }
        let (content, effect) = self.request(slot, style, req);
        // No ping inside a half-sent message: its pong would be owed
        // before the ping is.
        let out = Outgoing {
            content,
            style: style & !64,
            split: 0,
        };
        let rosbridge = self.model.client(slot).rosbridge();
        if !fits(&out, rosbridge, self.limits.max_line_bytes) || (!visible(&out) && !rosbridge) {
            return self.send_out(slot, &out, effect);
        }
        let w = if rosbridge {
            let frames = self.message_frames(slot, &out, 1 + usize::from(cut) % 3);
            self.ws_write(slot, frames, 0)
        } else {
            line_write(&out)
        };
        let total = w.bytes.len();
        let k = 1 + (total - 1) * usize::from(cut) / 256;
        let held = held_after(&w.units, k);
        let hs = w.handshake.filter(|&(len, _)| k >= len);
        self.counts.trickles += 1;
        let head = w.bytes[..k].to_vec();
        self.model.client_mut(slot).pending = Some(Pending {
            rest: w.bytes[k..].to_vec(),
            units: w.units,
            fed: k,
            handshake: w.handshake,
            effect,
        });
        self.bytes_in(slot, &head, Some(held))?;
        if let Some((_, ok)) = hs {
            self.handshake_sent(slot, ok);
        }
        Ok(())
    }

    /// Sends the rest of `slot`'s half-sent request, if any, and applies
    /// its effect.
    pub(crate) fn complete_pending(&mut self, slot: usize) -> Result<(), Violation> {
        let Some(p) = self.model.client_mut(slot).pending.take() else {
            return Ok(());
        };
        let line = matches!(p.units.first(), Some(Unit::Line(_)));
        let n = p.rest.len();
        let w = Write {
            bytes: p.rest,
            units: Vec::new(),
            cuts: vec![n],
            handshake: p.handshake.filter(|&(len, _)| p.fed < len),
        };
        self.counts.lines_sent += 1;
        self.deliver(slot, w, Some(p.effect), false, line)
    }

    /// A request sent while the gateway shuts down: the hub must ignore it
    /// (nothing is owed for it, and nothing changes).
    pub(crate) fn ignored_input(&mut self, slot: usize) -> Result<(), Violation> {
        let text = br#"{"op":"call_service","service":"/s1","id":"late","args":{}}"#;
        let bytes = if self.model.client(slot).rosbridge() {
            let mut f = Vec::new();
            client::push_frame(&mut f, true, OP_TEXT, text, Some(self.mask()));
            f
        } else {
            let mut l = text.to_vec();
            l.push(b'\n');
            l
        };
        self.counts.lines_sent += 1;
        self.bytes_in(slot, &bytes, None)
    }

    /// Counts a request refused under `code`, if the model keeps that
    /// count.
    pub(crate) fn count_error(&mut self, code: ErrorCode) {
        self.errors[code.index()] += 1;
        if matches!(
            code,
            ErrorCode::IdTooLong
                | ErrorCode::NameTooLong
                | ErrorCode::NumberOutOfRange
                | ErrorCode::LoneSurrogate
        ) {
            self.counts.cap_errors += 1;
        }
    }
}

/// A TCP line: `out`'s content and terminator, whole, byte by byte or in
/// two reads cut at `split/255`.
fn line_write(out: &Outgoing) -> Write {
    let mut bytes = out.content.clone();
    if out.crlf() {
        bytes.push(b'\r');
    }
    bytes.push(b'\n');
    let n = bytes.len();
    let cuts = match out.split {
        0 => vec![n],
        255 => (1..=n).collect(),
        s => vec![n * usize::from(s) / 255, n],
    };
    Write {
        bytes,
        units: vec![Unit::Line(n)],
        cuts,
        handshake: None,
    }
}

/// Whether `out` fits the line limit: it counts a line's CR but not its
/// LF, and a message's every byte.
fn fits(out: &Outgoing, rosbridge: bool, max: usize) -> bool {
    let len = if rosbridge {
        out.message().len()
    } else {
        out.content.len() + usize::from(out.crlf())
    };
    len <= max
}

/// Whether a TCP line is not empty once its terminator is removed (empty
/// lines are skipped).
fn visible(out: &Outgoing) -> bool {
    let mut c = &out.content[..];
    if !out.crlf() {
        if let Some(b'\r') = c.last() {
            c = &c[..c.len() - 1];
        }
    }
    !c.is_empty()
}
