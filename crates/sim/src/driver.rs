//! [`Sim`]: the hub on a fake clock, driven like the server's loop turn.
//! One [`Sim::step`] applies one [`Action`] (open, bytes, EOF or reset,
//! clock jump, read-mode change), then runs the rest of the turn:
//! `expire(now)`, flush the output of the clients that read (in
//! random-sized writes), `take_closing`/`free` until nothing is left, and
//! the end-of-step checks. [`run_seed`] runs a whole seeded schedule.

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
use crate::model::{Client, Model, ReadMode};
use crate::rng::Rng;

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
}

/// The simulation: a hub, a fake clock and the model. See the crate docs.
pub struct Sim {
    pub(crate) hub: Hub,
    pub(crate) limits: Limits,
    base: Instant,
    pub(crate) offset: Duration,
    /// Write sizes of reading clients.
    rng: Rng,
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
        Sim {
            hub: Hub::new(cfg.limits.clone(), base),
            limits: cfg.limits,
            base,
            offset: Duration::ZERO,
            rng: Rng::new(cfg.seed),
            model: Model::new(),
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
            Action::Connect => self.connect()?,
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

    fn connect(&mut self) -> Result<(), Violation> {
        let Some(slot) = self.model.clients.iter().position(Option::is_none) else {
            return Ok(());
        };
        let live = self.model.live().count();
        let now = self.now();
        let rejected_before = self.hub.counters().get(Counter::ConnectionsRejected);
        let Some(r) = self.hub.open(now) else {
            return self.check_refused_open(live, rejected_before);
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
        self.model.clients[slot] = Some(Client::new(r, now));
        Ok(())
    }

    /// `open` refused: only at the connection limit, counted, and the
    /// rejection frame is one error status line.
    fn check_refused_open(&mut self, live: usize, rejected_before: u64) -> Result<(), Violation> {
        if live < self.limits.max_connections {
            return Err(self.violation(format!(
                "open refused with {live} of {} connections open",
                self.limits.max_connections
            )));
        }
        if self.hub.counters().get(Counter::ConnectionsRejected) != rejected_before + 1 {
            return Err(self.violation("refused open not counted"));
        }
        let frame = self.hub.rejection_frame(Transport::Tcp);
        let v: Value = serde_json::from_slice(&frame)
            .map_err(|e| self.violation(format!("rejection frame is not JSON: {e}")))?;
        if v["op"] != "status" || v["level"] != "error" || !frame.ends_with(b"\n") {
            return Err(self.violation(format!("bad rejection frame {v}")));
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
        match how % 3 {
            0 => self.hub.on_eof(key, now),
            1 => self.hub.close(key, CloseReason::Reset, now),
            _ => {
                // A complete request without its newline: ignored at EOF.
                let partial = br#"{"op":"subscribe","topic":"/a","type":"t","id":"never"}"#;
                self.counts.lines_sent += 1;
                self.hub.on_bytes(key, partial, now);
                self.hub.on_eof(key, now);
            }
        }
    }

    /// Feeds `content` plus its terminator to the hub, whole, byte by byte
    /// or in two halves.
    pub(crate) fn feed(&mut self, slot: usize, content: &[u8], crlf: bool, split: u8) {
        let mut bytes = content.to_vec();
        if crlf {
            bytes.push(b'\r');
        }
        bytes.push(b'\n');
        let key = self.model.client(slot).conn.key;
        let now = self.now();
        self.counts.lines_sent += 1;
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

    /// Sends one request line from `slot`: builds it, then either expects
    /// the too-long error, feeds a blank line, or applies its effect.
    fn send(&mut self, slot: usize, style: u8, split: u8, req: &Req) -> Result<(), Violation> {
        let crlf = style & 1 != 0;
        // Build the line first; the model effect is applied only if the
        // line fits the limit.
        let (content, effect) = self.request(slot, style, req);
        let content_len = content.len() + usize::from(crlf);
        let visible = {
            let mut c = &content[..];
            if !crlf {
                if let Some(b'\r') = c.last() {
                    c = &c[..c.len() - 1];
                }
            }
            !c.is_empty()
        };
        if content_len > self.limits.max_line_bytes {
            self.counts.too_long += 1;
            self.model.expect_status(slot, None, true);
            self.feed(slot, &content, crlf, split);
            return Ok(());
        }
        if !visible {
            self.feed(slot, &content, crlf, split);
            return Ok(());
        }
        self.apply_effect(slot, effect, &content, crlf, split)
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
