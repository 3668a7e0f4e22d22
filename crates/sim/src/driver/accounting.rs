//! The accounting of every hub call ([`Sim::after_call`]), right after it:
//!
//! - topic data: each queue changed by exactly the frames the model
//!   delivered in the call less the frames shed; a queue that shrank is
//!   read back (the frames left in it, matched by their exact bytes, since
//!   every publish is unique), so the model knows *which* frames were shed
//!   and the client must then receive exactly the others, in order;
//!   `delivered`, `dropped`, `dropped_bytes` and `dropped_for_memory` grew
//!   by what the model counts, and `memory().frames` equals the bytes of
//!   the distinct shared frames still queued anywhere (one per publish and
//!   framing);
//! - who dropped what: a frame shed by a queue's own limit (P5) was shed
//!   while the newest frame of that very call was queued, and the newest
//!   stays; a frame shed for memory (P17) is predicted exactly by
//!   re-running the budget's rule on the model ([`Sim::predict_memory`]):
//!   when the ledger, less what closing connections hold, is over the
//!   budget, the open queues holding the most topic bytes lose every frame
//!   but the partially written head and the last entry, biggest first,
//!   until the total is at most 7/8 of the budget; then the open
//!   connections holding the most are closed (`memory_pressure`), biggest
//!   first, until it is;
//! - closes: every connection the call closed has a reason the model
//!   predicted or allows at that moment (see [`Sim::detect_closes`]), and
//!   every close the model predicted happened. The periodic sweep's closes
//!   (write stall, slow consumer, opening, partial request, idle, in that
//!   order of precedence) are predicted exactly from the model's clocks
//!   ([`Sim::predict_sweep`]), as are evictions at the connection limit
//!   and the closes of drained connections at a shutdown.

use std::collections::{BTreeSet, HashMap};
use std::io::IoSlice;

use rosgate_core::counters::Counter;
use rosgate_core::CloseReason;

use super::Sim;
use crate::actions::MAX_CLIENTS;
use crate::model::{FrameKey, TopicFrame, ENTRY_BYTES};
use crate::violation::Violation;

/// Which hub call is being accounted for.
pub(crate) enum Cause {
    /// `open_as`; the connection the model predicts is evicted for it.
    Open { victim: Option<usize> },
    /// `on_bytes` from `slot`; `enforce`: the hub took the bytes (open, not
    /// shutting down), and then enforced the memory budget.
    Bytes { slot: usize, enforce: bool },
    /// `on_eof` or `close(Reset)` for `slot`.
    Gone { slot: usize },
    /// `expire`; with the sweep's predicted close per slot when it ran.
    Expire {
        sweep: Option<Vec<Option<CloseReason>>>,
    },
    /// `begin_shutdown`.
    Shutdown,
    /// `close_drained`.
    Drained,
    /// `free` (the freed client already left the model).
    Free,
}

/// What the accounting needs from before a hub call.
pub(crate) struct Pre {
    delivered: u64,
    dropped: u64,
    dropped_bytes: u64,
    for_memory: u64,
    by_depth: u64,
    /// Topic bytes queued per slot.
    topic: [usize; MAX_CLIENTS],
}

/// One queue read back: which of the model's frames are still in it.
struct Peek {
    present: Vec<u64>,
    /// The head entry, partly written, is this topic frame.
    head: Option<u64>,
    /// The newest topic frame in the queue.
    last: Option<u64>,
}

/// What the memory budget's rule does in one enforcement.
#[derive(Default)]
struct Verdict {
    /// Queues shed (in order) and the frames each must have lost.
    shed: Vec<(usize, BTreeSet<u64>)>,
    /// Connections closed, biggest holder first.
    close: Vec<usize>,
}

impl Sim {
    pub(crate) fn pre(&self) -> Pre {
        let st = self.hub.counters();
        let mut topic = [0; MAX_CLIENTS];
        for (s, c) in self.model.clients.iter().enumerate() {
            if let Some(c) = c {
                topic[s] = self.hub.out(c.conn.key).map_or(0, |q| q.topic_bytes());
            }
        }
        Pre {
            delivered: st.get(Counter::Delivered),
            dropped: st.get(Counter::Dropped),
            dropped_bytes: st.get(Counter::DroppedBytes),
            for_memory: st.get(Counter::DroppedForMemory),
            by_depth: st.get(Counter::DepthDropped),
            topic,
        }
    }

    /// Checks what one hub call did (see the module docs) and brings the
    /// model up to date: frames shed leave it, closes are recorded.
    pub(crate) fn after_call(&mut self, cause: Cause, pre: Pre) -> Result<(), Violation> {
        let deliveries = std::mem::take(&mut self.deliveries);
        let uncounted = std::mem::take(&mut self.uncounted);
        let depth_drops = std::mem::take(&mut self.depth_drops);
        let reliable_closes = std::mem::take(&mut self.reliable_closes);
        let st = self.hub.counters();
        let delivered = st.get(Counter::Delivered) - pre.delivered;
        let dropped = st.get(Counter::Dropped) - pre.dropped;
        let dropped_bytes = st.get(Counter::DroppedBytes) - pre.dropped_bytes;
        let for_memory = st.get(Counter::DroppedForMemory) - pre.for_memory;
        let by_depth = st.get(Counter::DepthDropped) - pre.by_depth;
        if delivered + uncounted != deliveries.len() as u64 {
            return Err(self.violation(format!(
                "delivered grew by {delivered}, the model queued {} frames, {uncounted} of them latched (counted apart)",
                deliveries.len()
            )));
        }
        // Which frames left which queue (nothing is written in a call; a
        // freed queue went whole, with its client, which has left the
        // model: the others may have been queued the events of its
        // parameters going).
        let mut removed: Vec<Vec<TopicFrame>> = vec![Vec::new(); MAX_CLIENTS];
        for (s, gone) in removed.iter_mut().enumerate() {
            let Some(c) = &self.model.clients[s] else {
                continue;
            };
            let now = self.hub.out(c.conn.key).map_or(0, |q| q.topic_bytes());
            let new: usize = deliveries.iter().filter(|d| d.0 == s).map(|d| d.2).sum();
            let expect = pre.topic[s] + new;
            if now > expect {
                return Err(self.violation(format!(
                    "slot {s}: topic bytes {} -> {now} with {new} delivered",
                    pre.topic[s]
                )));
            }
            if now < expect {
                *gone = self.shed_frames(s);
                let n: usize = gone.iter().map(|f| f.wire.len()).sum();
                if n != expect - now {
                    return Err(self.violation(format!(
                        "slot {s}: topic bytes {} -> {now} with {new} delivered, but the frames gone from its queue hold {n} bytes",
                        pre.topic[s]
                    )));
                }
            }
        }
        let n_removed: usize = removed.iter().map(Vec::len).sum();
        let bytes_removed: usize = removed.iter().flatten().map(|f| f.wire.len()).sum();
        if dropped != n_removed as u64 || dropped_bytes != bytes_removed as u64 {
            let lost: Vec<(usize, String)> = removed
                .iter()
                .enumerate()
                .flat_map(|(s, g)| {
                    g.iter().map(move |f| {
                        (
                            s,
                            String::from_utf8_lossy(&f.line[..f.line.len().min(60)]).into_owned(),
                        )
                    })
                })
                .collect();
            return Err(self.violation(format!(
                "dropped grew by {dropped} ({dropped_bytes} bytes), {n_removed} frames ({bytes_removed} bytes) left the queues: {lost:?}"
            )));
        }
        // The ledger counts each shared frame once, while any queue holds it.
        let released = self.released_by(&removed);
        let frames = self.model.frames_bytes - released;
        let mem = self.hub.memory();
        if mem.frames != frames {
            return Err(self.violation(format!(
                "memory().frames is {}, the distinct frames queued hold {frames} bytes",
                mem.frames
            )));
        }
        // Frames dropped by their subscription's depth, as predicted when
        // they were queued; the rest by the queue limit or the budget. When
        // a slot got several frames in the call and also shed by its
        // limit, the limit may have made some predicted drops unneeded.
        let mut not_depth: Vec<Vec<TopicFrame>> = vec![Vec::new(); MAX_CLIENTS];
        let (mut depth_min, mut depth_max) = (0, 0);
        for (s, gone) in removed.iter().enumerate() {
            let want: BTreeSet<u64> = depth_drops
                .iter()
                .filter(|d| d.0 == s)
                .map(|d| d.1)
                .collect();
            let got: BTreeSet<u64> = gone.iter().map(|f| f.msg).collect();
            not_depth[s] = gone
                .iter()
                .filter(|f| !want.contains(&f.msg))
                .cloned()
                .collect();
            let several = deliveries.iter().filter(|d| d.0 == s).count() > 1;
            let relaxed = several && !not_depth[s].is_empty();
            if !relaxed && !want.is_subset(&got) {
                return Err(self.violation(format!(
                    "slot {s}: its subscriptions' depth drops frames {want:?}, it lost {got:?}"
                )));
            }
            depth_max += want.len();
            depth_min += if relaxed { 0 } else { want.len() };
        }
        if (by_depth as usize) < depth_min || by_depth as usize > depth_max {
            return Err(self.violation(format!(
                "depth_dropped grew by {by_depth}, the model's depths drop {depth_min} to {depth_max}"
            )));
        }
        self.counts.depth_dropped += by_depth;
        let enforced = matches!(
            cause,
            Cause::Bytes { enforce: true, .. } | Cause::Expire { .. }
        );
        let verdict = if enforced {
            let released = self.released_at_enforce(&not_depth, &removed);
            self.predict_memory(&not_depth, released)
        } else {
            Verdict::default()
        };
        // Each frame shed by the policy that may shed it.
        let mut shed_for_memory = 0;
        for (s, gone) in not_depth.iter().enumerate() {
            match verdict.shed.iter().find(|(x, _)| *x == s) {
                Some((_, want)) => {
                    let got: BTreeSet<u64> = gone.iter().map(|f| f.msg).collect();
                    if &got != want {
                        return Err(self.violation(format!(
                            "slot {s}: over the memory budget it lost frames {got:?}, the budget's rule sheds {want:?}"
                        )));
                    }
                    shed_for_memory += gone.len();
                }
                None if gone.is_empty() => {}
                None => self.check_queue_shed(s, gone, &deliveries, &verdict)?,
            }
        }
        // Every queue a frame was delivered to keeps within its limit
        // (bytes and entries), but for the newest frame and a partly
        // written head.
        for &(s, _, len) in &deliveries {
            let c = self.model.client(s);
            let entries = c.exp.topic.len() - removed[s].len();
            let bytes = self.hub.out(c.conn.key).map_or(0, |q| q.topic_bytes());
            let cost =
                (bytes + ENTRY_BYTES * entries).saturating_sub(self.protected_cost(s, &removed[s]));
            let cap = self.limits.max_queue_bytes;
            if cost > cap.max(len + self.max_frame + 2 * ENTRY_BYTES) {
                return Err(self.violation(format!(
                    "slot {s}: {bytes} topic bytes in {entries} entries queued after a delivery, limit {cap}"
                )));
            }
        }
        if for_memory != shed_for_memory as u64 {
            return Err(self.violation(format!(
                "dropped_for_memory grew by {for_memory}, {shed_for_memory} frames were shed for memory"
            )));
        }
        for (s, gone) in removed.into_iter().enumerate() {
            self.fx_shed(s, gone.len() as u64);
            for f in gone {
                self.counts.topic_bytes_shed += f.wire.len() as u64;
                let q = &mut self.model.client_mut(s).exp.topic;
                q.retain(|x| x.msg != f.msg);
                self.model.release_frame(f.key());
            }
        }
        self.counts.memory_shed_frames += shed_for_memory as u64;
        self.detect_closes(&cause, &verdict.close, &reliable_closes)
    }

    /// What reliable frames still queued to `slot` cost (bytes and
    /// entries): never shed, they may hold it past its limit.
    fn protected_cost(&self, slot: usize, gone: &[TopicFrame]) -> usize {
        let c = self.model.client(slot);
        c.exp
            .topic
            .iter()
            .filter(|f| f.topic.as_ref().is_some_and(|b| c.reliable.contains(b)))
            .filter(|f| !gone.iter().any(|g| g.msg == f.msg))
            .map(|f| f.wire.len() + ENTRY_BYTES)
            .sum()
    }

    /// Bytes of the shared frames the budget's enforcement freed: those
    /// whose every holder at that moment (after the depth drops, made as
    /// they were queued) lost them in `shed`.
    fn released_at_enforce(&self, shed: &[Vec<TopicFrame>], removed: &[Vec<TopicFrame>]) -> usize {
        let mut by_depth: HashMap<FrameKey, u32> = HashMap::new();
        for (s, gone) in removed.iter().enumerate() {
            for f in gone {
                if !shed[s].iter().any(|x| x.msg == f.msg) {
                    *by_depth.entry(f.key()).or_default() += 1;
                }
            }
        }
        let mut lost: HashMap<FrameKey, u32> = HashMap::new();
        for f in shed.iter().flatten() {
            *lost.entry(f.key()).or_default() += 1;
        }
        lost.iter()
            .filter_map(|(k, &n)| {
                let &(len, holders) = self.model.frames.get(k)?;
                let left = holders - by_depth.get(k).copied().unwrap_or(0);
                (left == n).then_some(len)
            })
            .sum()
    }

    /// The partly written head of `slot`'s hub queue, if it is one of the
    /// model's topic frames.
    pub(crate) fn peek_head_msg(&self, slot: usize) -> Option<u64> {
        self.peek(slot).head
    }

    /// Frames that left `slot`'s queue without being written: the model's
    /// queued frames that are not in the hub's queue any more.
    fn shed_frames(&self, slot: usize) -> Vec<TopicFrame> {
        let present = self.peek(slot).present;
        self.model
            .client(slot)
            .exp
            .topic
            .iter()
            .filter(|f| !present.contains(&f.msg))
            .cloned()
            .collect()
    }

    /// Reads `slot`'s hub queue back (without writing it): one slice per
    /// entry, the head's from its first unwritten byte. A topic entry is
    /// exactly one of the model's frames; anything else is control data.
    fn peek(&self, slot: usize) -> Peek {
        let c = self.model.client(slot);
        let mut p = Peek {
            present: Vec::new(),
            head: None,
            last: None,
        };
        let Some(q) = self.hub.out(c.conn.key) else {
            return p;
        };
        let mut iov = vec![IoSlice::new(&[]); q.frames().max(1)];
        let n = q.fill(&mut iov, usize::MAX);
        let model = &c.exp.topic;
        let part = c.head_part();
        let mut next = 0;
        for (j, s) in iov[..n].iter().enumerate() {
            let s: &[u8] = s;
            let found = if j == 0 && !part.is_empty() {
                // A partly written head: the client holds its first bytes.
                let f = model.front().filter(|f| {
                    f.wire.len() == part.len() + s.len()
                        && f.wire.starts_with(&part)
                        && f.wire.ends_with(s)
                });
                if let Some(f) = f {
                    p.head = Some(f.msg);
                }
                f.map(|_| 0)
            } else {
                (next..model.len()).find(|&k| *model[k].wire == *s)
            };
            if let Some(k) = found {
                p.present.push(model[k].msg);
                next = k + 1;
                // The newest topic frame, wherever control data follows it.
                p.last = Some(model[k].msg);
            }
        }
        p
    }

    /// Bytes of the shared frames whose every holder lost them in `removed`.
    fn released_by(&self, removed: &[Vec<TopicFrame>]) -> usize {
        let mut gone: HashMap<FrameKey, u32> = HashMap::new();
        for f in removed.iter().flatten() {
            *gone.entry(f.key()).or_default() += 1;
        }
        gone.iter()
            .filter_map(|(k, &n)| {
                let &(len, holders) = self.model.frames.get(k)?;
                (holders == n).then_some(len)
            })
            .sum()
    }

    /// Frames `slot` lost to its own queue limit: only while a frame of
    /// this very call was queued to it, never that newest frame, and what
    /// is left (bytes and entries) fits the limit, or is the newest frame
    /// and a partly written head.
    fn check_queue_shed(
        &self,
        slot: usize,
        gone: &[TopicFrame],
        deliveries: &[(usize, u64, usize)],
        verdict: &Verdict,
    ) -> Result<(), Violation> {
        let Some(&(_, newest, len)) = deliveries.iter().rev().find(|d| d.0 == slot) else {
            let shed: Vec<usize> = verdict.shed.iter().map(|(s, _)| *s).collect();
            return Err(self.violation(format!(
                "slot {slot} lost {} topic frames, but nothing was queued to it (its own limit) and the memory budget's rule sheds slots {shed:?} only",
                gone.len()
            )));
        };
        if gone.iter().any(|f| f.msg == newest) {
            return Err(self.violation(format!(
                "slot {slot}: the frame just queued was shed (the newest frame must stay)"
            )));
        }
        let cap = self.limits.max_queue_bytes;
        let after = self
            .hub
            .out(self.model.client(slot).conn.key)
            .map_or(0, |q| q.topic_bytes());
        let entries = self.model.client(slot).exp.topic.len() - gone.len();
        let cost = (after + ENTRY_BYTES * entries).saturating_sub(self.protected_cost(slot, gone));
        if cost > cap.max(len + self.max_frame + 2 * ENTRY_BYTES) {
            return Err(self.violation(format!(
                "slot {slot}: {after} topic bytes in {entries} entries queued after shedding, limit {cap}"
            )));
        }
        Ok(())
    }

    /// What `slot` counts for against the budget and gives back when freed:
    /// its queue (a shared frame counted whole, and each entry's cost), its
    /// partial input, the calls it made, its registrations (in its
    /// domain's registry), the nodes it declared and the parameters they
    /// own.
    fn held_by(&self, slot: usize) -> usize {
        let c = self.model.client(slot);
        let Some(conn) = self.hub.conn(c.conn.key) else {
            return 0;
        };
        conn.out().control_bytes()
            + conn.out().topic_bytes()
            + ENTRY_BYTES * c.exp.topic.len()
            + conn.input_held()
            + self.hub.inspect().calls().bytes_of(c.conn)
            + self
                .hub
                .inspect()
                .registry_in(c.domain)
                .held_by(c.conn)
                .bytes
            + c.node_bytes()
            + self.model.params.owned_bytes(c.domain, c.conn)
    }

    /// The budget's rule (P17) re-run on the state before this call's
    /// enforcement: the queues as the model had them (the frames `removed`
    /// put back, which `released` bytes of the ledger held), the rest as
    /// the hub holds it (shedding changes nothing else, closing nothing at
    /// all until the free).
    fn predict_memory(&self, removed: &[Vec<TopicFrame>], released: usize) -> Verdict {
        let mut v = Verdict::default();
        let budget = self.limits.max_memory_bytes;
        let target = budget / 8 * 7;
        // Every frame shed freed its entry's cost too.
        let entries: usize = removed.iter().map(Vec::len).sum();
        let late: usize = self.fx_after_enforce.iter().sum();
        let total =
            (self.hub.memory().total() + released + ENTRY_BYTES * entries).saturating_sub(late);
        if total <= budget {
            return v;
        }
        // Connections already closing give theirs back at the free; those
        // this very enforcement closed were open when it ran.
        let mut open = [false; MAX_CLIENTS];
        let mut releasing = 0;
        for (s, c) in self.model.clients.iter().enumerate() {
            let Some(c) = c else { continue };
            let hc = self.hub.conn(c.conn.key);
            let reason = hc.and_then(|x| x.closing());
            let closed_now = c.is_open() && reason == Some(CloseReason::MemoryPressure);
            if reason.is_none() || closed_now {
                open[s] = true;
            } else {
                releasing += self.held_by(s);
            }
        }
        let mut total = total.saturating_sub(releasing);
        if total <= budget {
            return v;
        }
        // 1. Topic data, the queues costing the most (bytes and entries)
        // first (ties: the higher slab key), each losing every frame it may
        // drop.
        let mut queues: Vec<(usize, u32, usize)> = (0..MAX_CLIENTS)
            .filter(|&s| open[s])
            .filter_map(|s| {
                let c = self.model.client(s);
                let now = self.hub.out(c.conn.key).map_or(0, |q| q.topic_bytes());
                let back: usize = removed[s].iter().map(|f| f.wire.len()).sum();
                let bytes = now + back;
                let cost = bytes + ENTRY_BYTES * c.exp.topic.len();
                (bytes > 0).then_some((cost, c.conn.key, s))
            })
            .collect();
        queues.sort_unstable_by(|a, b| b.cmp(a));
        let mut holders: HashMap<FrameKey, (usize, u32)> = self.model.frames.clone();
        for (_, _, s) in queues {
            if total <= target {
                break;
            }
            let peek = self.peek(s);
            let keep = [peek.head, peek.last];
            let mut lose = BTreeSet::new();
            let c = self.model.client(s);
            for f in &c.exp.topic {
                // Reliable frames are never shed.
                let reliable = f.topic.as_ref().is_some_and(|b| c.reliable.contains(b));
                if keep.contains(&Some(f.msg)) || reliable {
                    continue;
                }
                lose.insert(f.msg);
                total = total.saturating_sub(ENTRY_BYTES);
                if let Some(h) = holders.get_mut(&f.key()) {
                    h.1 -= 1;
                    if h.1 == 0 {
                        total = total.saturating_sub(h.0);
                    }
                }
            }
            v.shed.push((s, lose));
        }
        if total <= target {
            return v;
        }
        // 2. The biggest holders of the rest.
        // What each holds now, after the shedding (the frames `removed` are
        // out of its queue already, entries included).
        let mut big: Vec<(usize, u32, usize)> = (0..MAX_CLIENTS)
            .filter(|&s| open[s])
            .map(|s| {
                let held =
                    self.held_by(s) - ENTRY_BYTES * removed[s].len() - self.fx_after_enforce[s];
                (held, self.model.client(s).conn.key, s)
            })
            .filter(|&(held, _, _)| held > 0)
            .collect();
        big.sort_unstable_by(|a, b| b.cmp(a));
        for (held, _, s) in big {
            if total <= target {
                break;
            }
            v.close.push(s);
            total = total.saturating_sub(held);
        }
        v
    }

    /// The sweep's close for each open client, from the model's clocks as
    /// they stand after this turn's call expiry (whose failures may have
    /// given an empty queue output, or pushed control data above the soft
    /// limit, both at this very instant). Precedence: write stall, slow
    /// consumer, opening, partial request, idle.
    pub(crate) fn predict_sweep(&self) -> Vec<Option<CloseReason>> {
        let l = &self.limits;
        let at = self.offset;
        let since = |t: std::time::Duration| at.saturating_sub(t);
        (0..MAX_CLIENTS)
            .map(|s| {
                let c = self.model.clients[s].as_ref().filter(|c| c.is_open())?;
                let q = self.hub.out(c.conn.key)?;
                let out_since = if c.empty_at_start && !q.is_empty() {
                    at
                } else {
                    c.out_since
                };
                let soft = c
                    .soft_since
                    .or((q.control_bytes() > l.control_soft_bytes).then_some(at));
                if !q.is_empty() && since(out_since) >= l.write_stall {
                    Some(CloseReason::WriteStall)
                } else if soft.is_some_and(|t| since(t) >= l.control_soft_time) {
                    Some(CloseReason::SlowConsumer)
                } else if !c.established && since(c.opened_at) >= l.handshake_timeout {
                    Some(CloseReason::HandshakeTimeout)
                } else if c
                    .partial_since
                    .is_some_and(|t| since(t) >= l.partial_timeout)
                {
                    Some(CloseReason::PartialTimeout)
                } else if l.idle_timeout.is_some_and(|d| since(c.last_active) >= d) {
                    Some(CloseReason::IdleTimeout)
                } else {
                    None
                }
            })
            .collect()
    }

    /// Learns the closes the call made and checks each against what the
    /// model allows, and that every close it predicted happened:
    /// - `peer_closed`/`reset`: the client closed it (EOF, reset, close
    ///   frame) in this call, and owes no protocol error;
    /// - `protocol_error`: a refused handshake or a violation in this call;
    /// - `control_overflow`: more control bytes queued than the limit;
    /// - the sweep's reasons: exactly as predicted (a control overflow in
    ///   the call expiry before the sweep may come first);
    /// - `memory_pressure`: exactly the connections the budget's rule
    ///   closes (`mp`);
    /// - `evicted`: exactly the oldest unfinished opening, for a newcomer
    ///   at the limit;
    /// - `shutdown`: during a shutdown, exactly the connections whose
    ///   output is all written.
    fn detect_closes(
        &mut self,
        cause: &Cause,
        mp: &[usize],
        reliable: &[usize],
    ) -> Result<(), Violation> {
        let max_control = self.limits.max_control_bytes;
        for s in 0..MAX_CLIENTS {
            let Some(c) = self.model.clients[s].as_ref().filter(|c| c.is_open()) else {
                continue;
            };
            let Some(hc) = self.hub.conn(c.conn.key) else {
                return Err(self.violation(format!("slot {s}: live client has no hub connection")));
            };
            if hc.gen() != c.conn.gen {
                return Err(
                    self.violation(format!("slot {s}: the hub's entry has another generation"))
                );
            }
            let control = hc.out().control_bytes();
            let empty = hc.out().is_empty();
            let Some(r) = hc.closing() else {
                if control > max_control {
                    return Err(self.violation(format!(
                        "slot {s}: {control} control bytes queued (limit {max_control}) and still open"
                    )));
                }
                continue;
            };
            let protocol = c.ws().is_some_and(|w| w.protocol_close);
            let here = match cause {
                Cause::Bytes { slot, .. } | Cause::Gone { slot } => *slot == s,
                _ => false,
            };
            let ok = match r {
                CloseReason::PeerClosed | CloseReason::Reset => here && c.closed_by_us && !protocol,
                CloseReason::ProtocolError => {
                    here && protocol && matches!(cause, Cause::Bytes { .. })
                }
                CloseReason::OriginRefused => {
                    here && c.ws().is_some_and(|w| w.origin_refused)
                        && matches!(cause, Cause::Bytes { .. })
                }
                CloseReason::ControlOverflow => control > max_control,
                CloseReason::WriteStall
                | CloseReason::SlowConsumer
                | CloseReason::HandshakeTimeout
                | CloseReason::PartialTimeout
                | CloseReason::IdleTimeout => {
                    matches!(cause, Cause::Expire { sweep: Some(p) } if p[s] == Some(r))
                }
                CloseReason::MemoryPressure => mp.contains(&s),
                CloseReason::ReliableOverflow => reliable.contains(&s),
                CloseReason::Evicted => matches!(cause, Cause::Open { victim: Some(v) } if *v == s),
                CloseReason::Shutdown => matches!(cause, Cause::Drained) && empty,
                _ => false,
            };
            if !ok {
                return Err(self.violation(format!(
                    "slot {s} closed with {r:?} (closed by us: {}, protocol error due: {protocol}, control bytes {control}, established: {}, memory-pressure closes due: {mp:?})",
                    c.closed_by_us, c.established
                )));
            }
            self.record_close(s, r);
        }
        // Every predicted close happened.
        let closing = |sim: &Sim, s: usize| sim.model.clients[s].as_ref().and_then(|c| c.closing);
        match cause {
            Cause::Open { victim: Some(v) } if closing(self, *v) != Some(CloseReason::Evicted) => {
                return Err(self.violation(format!(
                    "slot {v}, the oldest unfinished opening, was not evicted for a newcomer at the limit (closing: {:?})",
                    closing(self, *v)
                )));
            }
            Cause::Expire { sweep: Some(p) } => {
                for (s, want) in p.iter().enumerate() {
                    let Some(want) = want else { continue };
                    let got = closing(self, s);
                    if got != Some(*want) && got != Some(CloseReason::ControlOverflow) {
                        return Err(self.violation(format!(
                            "slot {s}: the sweep must close it with {want:?}, it is closing with {got:?}"
                        )));
                    }
                }
            }
            Cause::Drained => {
                for (s, c) in self.model.clients.iter().enumerate() {
                    let Some(c) = c.as_ref().filter(|c| c.is_open()) else {
                        continue;
                    };
                    if self.hub.out(c.conn.key).is_none_or(|q| q.is_empty()) {
                        return Err(self.violation(format!(
                            "slot {s}: all its output is written during a shutdown, yet it stays open"
                        )));
                    }
                }
            }
            _ => {}
        }
        for &s in reliable {
            let got = closing(self, s);
            if got.is_none() {
                return Err(self.violation(format!(
                    "slot {s}: its reliable backlog is past twice the queue limit, yet it stays open"
                )));
            }
        }
        for &s in mp {
            if closing(self, s) != Some(CloseReason::MemoryPressure) {
                return Err(self.violation(format!(
                    "slot {s}: the memory budget's rule closes it, it is closing with {:?}",
                    closing(self, s)
                )));
            }
        }
        Ok(())
    }

    fn record_close(&mut self, slot: usize, r: CloseReason) {
        self.model.client_mut(slot).closing = Some(r);
        self.closes[r.index()] += 1;
        let c = &mut self.counts;
        match r {
            CloseReason::PeerClosed | CloseReason::Reset => c.closes_by_client += 1,
            CloseReason::ProtocolError => c.ws_protocol_errors += 1,
            CloseReason::ControlOverflow => c.closes_overflow += 1,
            CloseReason::WriteStall => c.closes_stall += 1,
            CloseReason::SlowConsumer => c.closes_slow_consumer += 1,
            CloseReason::HandshakeTimeout => c.closes_handshake += 1,
            CloseReason::PartialTimeout => c.closes_partial += 1,
            CloseReason::IdleTimeout => c.closes_idle += 1,
            CloseReason::MemoryPressure => c.closes_memory += 1,
            CloseReason::Evicted => c.evictions += 1,
            CloseReason::Shutdown => c.closes_drained += 1,
            CloseReason::ReliableOverflow => c.reliable_overflows += 1,
            _ => {}
        }
    }
}
