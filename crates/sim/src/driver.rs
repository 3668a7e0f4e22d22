//! [`Sim`]: the hub on a fake clock, driven like the server's loop turn.
//! One [`Sim::step`] applies one [`Action`] (open, bytes, EOF or reset,
//! clock jump, read-mode change), then runs the rest of the turn:
//! `expire(now)`, flush the output of the clients that read (in
//! random-sized writes), `take_closing`/`free` until nothing is left, and
//! the end-of-step checks. [`run_seed`] runs a whole seeded schedule.
//!
//! TCP clients send lines (whole, byte by byte or in two reads).
//! WebSocket clients open with an HTTP upgrade and send each request as a
//! masked text message: one to four fragments, each with its own masking
//! key, sometimes with a ping between them, cut across reads in several
//! ways ([`Sim::feed_ws`]); they also send pings, pongs, binary messages,
//! close frames and protocol violations ([`Action::WsControl`]).

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::io::IoSlice;
use std::time::{Duration, Instant};

use serde_json::Value;

use rosgate_core::counters::Counter;
use rosgate_core::hub::Hub;
use rosgate_core::limits::{Limits, TIMER_TICK_MS};
use rosgate_core::log::LogLevel;
use rosgate_core::out::MAX_IOVECS;
use rosgate_core::{CloseReason, Transport};

use crate::actions::{Action, Req, SimConfig, MAX_CLIENTS};
use crate::checks::Violation;
use crate::model::{Client, Link, Model, ReadMode, WsSide};
use crate::rng::Rng;
use crate::ws::{self, Answer, HandshakeFeed, OP_CONT, OP_TEXT};

/// How the bytes of a WebSocket write are cut into reads, `split >> 2`:
/// 0 one read, [`BYTE_BY_BYTE`] one byte per read, up to [`LAST_CUT`] two
/// reads cut at that many 32nds, above it one read per frame.
const BYTE_BY_BYTE: u8 = 63;
const LAST_CUT: u8 = 31;

/// A request as it goes out: its text and the action's style and split.
pub(crate) struct Outgoing {
    pub content: Vec<u8>,
    pub style: u8,
    pub split: u8,
}

impl Outgoing {
    fn crlf(&self) -> bool {
        self.style & 1 != 0
    }

    /// The WebSocket message: the text, and CRLF whitespace if the style
    /// asks for a CRLF.
    fn message(&self) -> Vec<u8> {
        let mut m = self.content.clone();
        if self.crlf() {
            m.extend_from_slice(b"\r\n");
        }
        m
    }
}

/// What happened during a simulation (for tuning and reports).
#[derive(Debug, Default, Clone)]
pub struct Counts {
    pub steps: u64,
    pub lines_sent: u64,
    pub lines_received: u64,
    pub publishes_received: u64,
    pub topic_bytes_shed: u64,
    pub calls_forwarded: u64,
    pub responses_ok: u64,
    pub responses_failed: u64,
    pub stale_responses: u64,
    pub rejected_connections: u64,
    pub closes_overflow: u64,
    pub closes_stall: u64,
    pub closes_by_client: u64,
    pub too_long: u64,
    pub ws_connections: u64,
    pub ws_handshakes_refused: u64,
    /// Publish frames WebSocket subscribers received.
    pub ws_publishes_received: u64,
    /// Calls a WebSocket provider answered (read the rosbridge way).
    pub ws_provided_answers: u64,
    /// Responses WebSocket callers received.
    pub ws_responses_received: u64,
    pub ws_pongs: u64,
    /// Closes after a close frame (ours echoed) or a protocol error (1002).
    pub ws_close_frames: u64,
    pub ws_protocol_errors: u64,
}

/// The simulation: a hub, a fake clock and the model. See the crate docs.
pub struct Sim {
    pub(crate) hub: Hub,
    pub(crate) limits: Limits,
    base: Instant,
    pub(crate) offset: Duration,
    /// Write sizes of reading clients, masking keys, fragment boundaries.
    pub(crate) rng: Rng,
    pub(crate) model: Model,
    /// Makes every payload unique.
    pub(crate) counter: u64,
    pub(crate) step_no: u64,
    /// The longest publish frame queued so far.
    pub(crate) max_frame: usize,
    pub(crate) counts: Counts,
}

impl Sim {
    pub fn new(cfg: SimConfig) -> Sim {
        rosgate_core::log::set_level(LogLevel::Error);
        let base = Instant::now();
        let mut hub = Hub::new(cfg.limits.clone(), base);
        hub.set_ws_status(cfg.ws_status);
        Sim {
            hub,
            limits: cfg.limits,
            base,
            offset: Duration::ZERO,
            rng: Rng::new(cfg.seed),
            model: Model::new(cfg.ws_status),
            counter: 0,
            step_no: 0,
            max_frame: 0,
            counts: Counts::default(),
        }
    }

    pub fn hub(&self) -> &Hub {
        &self.hub
    }

    pub fn counts(&self) -> &Counts {
        &self.counts
    }

    pub fn now(&self) -> Instant {
        self.base + self.offset
    }

    pub(crate) fn violation(&self, what: impl Into<String>) -> Violation {
        Violation {
            step: self.step_no,
            what: what.into(),
        }
    }

    /// The timer tick `since_base` falls in (ticks count from the hub's
    /// creation).
    pub(crate) fn tick_of(since_base: Duration) -> u64 {
        (since_base.as_nanos() / Duration::from_millis(TIMER_TICK_MS).as_nanos()) as u64
    }

    /// Applies one action, then runs the rest of a loop turn (expire, flush,
    /// free) and checks every invariant.
    pub fn step(&mut self, action: &Action) -> Result<(), Violation> {
        self.step_no += 1;
        self.counts.steps += 1;
        for c in self.model.clients.iter_mut().flatten() {
            c.empty_at_start = self.hub.out(c.conn.key).is_none_or(|q| q.is_empty());
            c.wrote = false;
            c.closed_by_us = false;
        }
        match action {
            Action::Connect => self.connect(None)?,
            Action::ConnectWs { how } => self.connect(Some(*how))?,
            Action::WsControl { slot, kind, arg } => {
                if let Some(s) = self.model.resolve_ws(*slot) {
                    self.ws_control(s, *kind, *arg);
                }
            }
            Action::WsStatus { filter } => {
                let f = Action::filter(*filter);
                self.hub.set_ws_status(f);
                self.model.ws_status = f;
            }
            Action::Disconnect { slot, how } => self.disconnect(*slot, *how),
            Action::Read { slot, mode } => {
                if let Some(s) = self.model.resolve(*slot) {
                    self.model.client_mut(s).mode = match *mode {
                        0 => ReadMode::All,
                        1 => ReadMode::Stopped,
                        n => ReadMode::Slow(4 * n as usize),
                    };
                }
            }
            Action::Clock { v } => {
                self.offset += Duration::from_micros(Action::clock_micros(*v));
            }
            Action::Send {
                slot,
                style,
                split,
                req,
            } => {
                // A response with a live call id goes from a provider that
                // holds one, if any does.
                let target = match req {
                    Req::Respond { kind, .. } if kind % 8 < 3 => self
                        .model
                        .holder(*slot)
                        .or_else(|| self.model.resolve(*slot)),
                    _ => self.model.resolve(*slot),
                };
                if let Some(s) = target {
                    self.send(s, *style, *split, req)?;
                }
            }
        }
        self.expire_phase()?;
        self.flush_phase()?;
        self.free_phase()?;
        self.end_of_step()
    }

    /// Opens a TCP connection, or with `ws` (the handshake selector) a
    /// WebSocket one, and sends its handshake unless it is to go with the
    /// first frame.
    fn connect(&mut self, ws: Option<u8>) -> Result<(), Violation> {
        let Some(slot) = self.model.clients.iter().position(Option::is_none) else {
            return Ok(());
        };
        let live = self.model.live().count();
        let now = self.now();
        let rejected_before = self.hub.counters().get(Counter::ConnectionsRejected);
        let transport = match ws {
            None => Transport::Tcp,
            Some(_) => Transport::WebSocket,
        };
        let Some(r) = self.hub.open_as(transport, now) else {
            return self.check_refused_open(live, rejected_before, transport);
        };
        if live >= self.limits.max_connections {
            return Err(self.violation(format!(
                "open accepted with {live} of {} connections open",
                self.limits.max_connections
            )));
        }
        if self.model.live().any(|c| c.conn.key == r.key) {
            return Err(self.violation(format!("slab key {} handed out twice", r.key)));
        }
        if self.hub.conn_ref(r.key) != Some(r) {
            return Err(self.violation("conn_ref disagrees with open"));
        }
        let Some(how) = ws else {
            self.model.clients[slot] = Some(Client::new(r, Link::Tcp, now));
            return Ok(());
        };
        self.counts.ws_connections += 1;
        let (request, answer, feed) = ws::handshake(how);
        let refused = matches!(answer, Answer::Refuse { .. });
        let lazy = feed == HandshakeFeed::WithFirstFrame;
        let side = WsSide {
            status: self.model.ws_status,
            pending_handshake: lazy.then(|| request.clone()),
            answer: Some(answer),
            open: false,
            close: None,
            done: false,
            protocol_close: refused,
        };
        self.model.clients[slot] = Some(Client::new(r, Link::Ws(side), now));
        if refused {
            self.counts.ws_handshakes_refused += 1;
        }
        match feed {
            HandshakeFeed::WithFirstFrame => {}
            HandshakeFeed::Whole => self.hub.on_bytes(r.key, &request, now),
            HandshakeFeed::ByteByByte => {
                for b in request.chunks(1) {
                    self.hub.on_bytes(r.key, b, now);
                }
            }
            HandshakeFeed::Halves => {
                let (a, b) = request.split_at(request.len() / 2);
                self.hub.on_bytes(r.key, a, now);
                self.hub.on_bytes(r.key, b, now);
            }
        }
        Ok(())
    }

    /// `open` refused: only at the connection limit, counted, and the
    /// rejection is one error status line (TCP) or an HTTP 503 (WebSocket).
    fn check_refused_open(
        &mut self,
        live: usize,
        rejected_before: u64,
        transport: Transport,
    ) -> Result<(), Violation> {
        if live < self.limits.max_connections {
            return Err(self.violation(format!(
                "open refused with {live} of {} connections open",
                self.limits.max_connections
            )));
        }
        if self.hub.counters().get(Counter::ConnectionsRejected) != rejected_before + 1 {
            return Err(self.violation("refused open not counted"));
        }
        let frame = self.hub.rejection_frame(transport);
        match transport {
            Transport::Tcp => {
                let v: Value = serde_json::from_slice(&frame)
                    .map_err(|e| self.violation(format!("rejection frame is not JSON: {e}")))?;
                if v["op"] != "status" || v["level"] != "error" || !frame.ends_with(b"\n") {
                    return Err(self.violation(format!("bad rejection frame {v}")));
                }
            }
            Transport::WebSocket => {
                ws::check_rejection(&frame).map_err(|e| self.violation(e))?;
            }
        }
        self.counts.rejected_connections += 1;
        Ok(())
    }

    fn disconnect(&mut self, slot: u8, how: u8) {
        let Some(s) = self.model.resolve(slot) else {
            return;
        };
        let now = self.now();
        let key = self.model.client(s).conn.key;
        self.model.client_mut(s).closed_by_us = true;
        let partial = br#"{"op":"subscribe","topic":"/a","type":"t","id":"never"}"#;
        match how % 3 {
            0 => self.hub.on_eof(key, now),
            1 => self.hub.close(key, CloseReason::Reset, now),
            _ if self.model.client(s).rosbridge() => {
                // Half a text frame: ignored at EOF.
                let mut frame = Vec::new();
                ws::client_frame(&mut frame, true, OP_TEXT, partial, self.mask());
                frame.truncate(frame.len() / 2);
                self.counts.lines_sent += 1;
                self.feed_ws(s, vec![frame], 0);
                self.hub.on_eof(key, now);
            }
            _ => {
                // A complete request without its newline: ignored at EOF.
                self.counts.lines_sent += 1;
                self.hub.on_bytes(key, partial, now);
                self.hub.on_eof(key, now);
            }
        }
    }

    /// Feeds a request to the hub: a line on TCP, a message on WebSocket.
    pub(crate) fn feed(&mut self, slot: usize, out: &Outgoing) {
        self.counts.lines_sent += 1;
        if self.model.client(slot).rosbridge() {
            self.feed_message(slot, out);
        } else {
            self.feed_line(slot, &out.content, out.crlf(), out.split);
        }
    }

    /// Feeds `content` plus its terminator to the hub, whole, byte by byte
    /// or in two halves.
    fn feed_line(&mut self, slot: usize, content: &[u8], crlf: bool, split: u8) {
        let mut bytes = content.to_vec();
        if crlf {
            bytes.push(b'\r');
        }
        bytes.push(b'\n');
        let key = self.model.client(slot).conn.key;
        let now = self.now();
        match split {
            0 => self.hub.on_bytes(key, &bytes, now),
            255 => {
                for b in bytes.chunks(1) {
                    self.hub.on_bytes(key, b, now);
                }
            }
            s => {
                let cut = bytes.len() * s as usize / 255;
                let (a, b) = bytes.split_at(cut);
                self.hub.on_bytes(key, a, now);
                self.hub.on_bytes(key, b, now);
            }
        }
    }

    /// A WebSocket message as one to four text fragments (`split & 3`),
    /// each masked with its own key, with a ping between the first two
    /// when the style says so, read as `split >> 2` says.
    fn feed_message(&mut self, slot: usize, out: &Outgoing) {
        let message = out.message();
        let pieces = self.cut(&message, 1 + usize::from(out.split & 3));
        let n = pieces.len();
        let mut frames: Vec<Vec<u8>> = Vec::with_capacity(n + 1);
        for (i, p) in pieces.iter().enumerate() {
            let mut f = Vec::new();
            let op = if i == 0 { OP_TEXT } else { OP_CONT };
            ws::client_frame(&mut f, i + 1 == n, op, p, self.mask());
            frames.push(f);
        }
        if out.style & 64 != 0 {
            let ping = self.ping(slot, format!("mid {}", self.counter).as_bytes());
            frames.insert(usize::from(n > 1), ping);
        }
        self.feed_ws(slot, frames, out.split >> 2);
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
        ws::client_frame(&mut f, true, ws::OP_PING, payload, self.mask());
        self.model
            .client_mut(slot)
            .exp
            .pongs
            .push_back(payload.to_vec());
        f
    }

    /// Feeds WebSocket `frames` from `slot`, after its handshake if that was
    /// left for the first frame, cut into reads by `mode` (see
    /// [`BYTE_BY_BYTE`]).
    pub(crate) fn feed_ws(&mut self, slot: usize, frames: Vec<Vec<u8>>, mode: u8) {
        let key = self.model.client(slot).conn.key;
        let now = self.now();
        let mut units = frames;
        let side = self
            .model
            .client_mut(slot)
            .ws_mut()
            .expect("a WebSocket client");
        if let Some(h) = side.pending_handshake.take() {
            units.insert(0, h);
        }
        let all = units.concat();
        match mode {
            0 => self.hub.on_bytes(key, &all, now),
            BYTE_BY_BYTE => {
                for b in all.chunks(1) {
                    self.hub.on_bytes(key, b, now);
                }
            }
            1..=LAST_CUT => {
                let (a, b) = all.split_at(all.len() * usize::from(mode) / 32);
                self.hub.on_bytes(key, a, now);
                self.hub.on_bytes(key, b, now);
            }
            _ => {
                for u in &units {
                    self.hub.on_bytes(key, u, now);
                }
            }
        }
    }

    /// Sends one request from `slot`: builds it, then either expects the
    /// too-long error, feeds a blank line, or applies its effect.
    fn send(&mut self, slot: usize, style: u8, split: u8, req: &Req) -> Result<(), Violation> {
        // Build the line first; the model effect is applied only if the
        // line fits the limit.
        let (content, effect) = self.request(slot, style, req);
        let out = Outgoing {
            content,
            style,
            split,
        };
        let rosbridge = self.model.client(slot).rosbridge();
        // The limit counts a line's CR but not its LF, and a message's
        // every byte.
        let len = if rosbridge {
            out.message().len()
        } else {
            out.content.len() + usize::from(out.crlf())
        };
        if len > self.limits.max_line_bytes {
            self.counts.too_long += 1;
            self.model.expect_status(slot, None, true);
            self.feed(slot, &out);
            return Ok(());
        }
        // A line that is empty once its terminator is removed is skipped.
        let visible = {
            let mut c = &out.content[..];
            if !out.crlf() {
                if let Some(b'\r') = c.last() {
                    c = &c[..c.len() - 1];
                }
            }
            !c.is_empty()
        };
        if !visible && !rosbridge {
            self.feed(slot, &out);
            return Ok(());
        }
        self.apply_effect(slot, effect, &out)
    }

    // ----- the rest of the loop turn ---------------------------------------------------------

    fn expire_phase(&mut self) -> Result<(), Violation> {
        let now = self.now();
        self.hub.expire(now);
        let tick_now = Self::tick_of(self.offset);
        self.model.fail_calls_where(|c| c.due_tick <= tick_now);
        // Write stalls: required once pending for write_stall plus the
        // longest sweep interval (a quarter of it, 10 ms to 1 s).
        let stall = self.limits.write_stall;
        let sweep = (stall / 4).clamp(Duration::from_millis(10), Duration::from_secs(1));
        for (s, c) in self.model.clients.iter().enumerate() {
            let Some(c) = c else { continue };
            let closing = self.hub.conn(c.conn.key).is_some_and(|x| !x.is_open());
            let pending = now.saturating_duration_since(c.out_since);
            if !c.empty_at_start && !closing && pending >= stall + sweep {
                return Err(self.violation(format!(
                    "slot {s}: output pending without progress for {pending:?} (write_stall {stall:?}) but not closed"
                )));
            }
        }
        Ok(())
    }

    fn flush_phase(&mut self) -> Result<(), Violation> {
        for s in 0..MAX_CLIENTS {
            let Some(c) = self.model.clients[s].as_ref() else {
                continue;
            };
            if self.hub.conn(c.conn.key).is_some_and(|x| !x.is_open()) {
                continue;
            }
            let budget = match c.mode {
                ReadMode::All => usize::MAX,
                ReadMode::Slow(n) => n,
                ReadMode::Stopped => continue,
            };
            self.drain(s, budget)?;
            let c = self.model.client(s);
            if c.inbuf.is_empty() && self.hub.out(c.conn.key).is_none_or(|q| q.is_empty()) {
                self.check_quiescent(s)?;
            }
        }
        Ok(())
    }

    /// Writes up to `budget` bytes of `slot`'s output in random-sized pieces
    /// and checks everything received.
    pub(crate) fn drain(&mut self, slot: usize, mut budget: usize) -> Result<(), Violation> {
        let key = self.model.client(slot).conn.key;
        let now = self.now();
        let mut got = Vec::new();
        let mut wrote = false;
        while let Some(q) = self.hub.out(key) {
            if q.is_empty() || budget == 0 {
                break;
            }
            let mut iov = [IoSlice::new(&[]); MAX_IOVECS];
            let n = q.fill(&mut iov, budget);
            let total: usize = iov[..n].iter().map(|s| s.len()).sum();
            if total == 0 {
                return Err(self.violation("fill returned nothing for a non-empty queue"));
            }
            let mut want = total.min(budget);
            if self.rng.below(4) == 0 {
                want = 1 + self.rng.below(want as u64) as usize;
            }
            let mut left = want;
            for s in &iov[..n] {
                let t = s.len().min(left);
                got.extend_from_slice(&s[..t]);
                left -= t;
                if left == 0 {
                    break;
                }
            }
            self.hub.wrote(key, want, now);
            budget -= want;
            wrote = true;
        }
        self.model.client_mut(slot).wrote |= wrote;
        self.receive(slot, &got)
    }

    pub(crate) fn free_phase(&mut self) -> Result<(), Violation> {
        let now = self.now();
        let mut keys = Vec::new();
        loop {
            self.hub.take_closing(&mut keys);
            if keys.is_empty() {
                return Ok(());
            }
            for &key in &keys {
                let Some(slot) = self.model.slot_of_key(key) else {
                    return Err(self.violation(format!("hub closed unknown connection key {key}")));
                };
                self.check_close(slot, key)?;
                // Last words, like the server's final write attempt.
                let (gen, mode) = {
                    let c = self.model.client(slot);
                    (c.conn.gen, c.mode)
                };
                if mode != ReadMode::Stopped {
                    let budget = match mode {
                        ReadMode::Slow(n) => n,
                        _ => usize::MAX,
                    };
                    self.drain(slot, budget)?;
                }
                if mode == ReadMode::All {
                    self.check_last_words(slot)?;
                }
                self.hub.free(key, now);
                if self.hub.conn_ref(key).is_some_and(|r| r.gen == gen) {
                    return Err(self.violation("free left the connection in place"));
                }
                self.model.close(slot);
            }
        }
    }
}

/// Runs `steps` random actions from `seed`, then [`Sim::finish`]. The error
/// names the seed, the step and the last actions.
pub fn run_seed(seed: u64, steps: usize) -> Result<Counts, String> {
    let mut rng = Rng::new(seed);
    let sel = rng.next_u64();
    let cfg = SimConfig::from_selector(sel);
    let mut sim = Sim::new(cfg.clone());
    let mut recent: VecDeque<Action> = VecDeque::new();
    let report = |v: Violation, recent: &VecDeque<Action>| {
        let mut s = format!(
            "seed {seed}: {v}\nlimits: {:?}\nlast actions (oldest first):\n",
            cfg.limits
        );
        for a in recent {
            let _ = writeln!(s, "  {a:?}");
        }
        s
    };
    for _ in 0..steps {
        let a = Action::random(&mut rng);
        recent.push_back(a.clone());
        if recent.len() > 24 {
            recent.pop_front();
        }
        sim.step(&a).map_err(|v| report(v, &recent))?;
    }
    sim.finish().map_err(|v| report(v, &recent))?;
    Ok(sim.counts().clone())
}
