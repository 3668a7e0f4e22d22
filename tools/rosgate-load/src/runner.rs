//! `Runner`: one mio event loop that drives its connections of a run
//! through their phases, and `Book`: the per-message accounting that
//! decides whether the run was clean. [`run`] starts one `Runner` per
//! worker thread (`--threads`, default 1): the run's roles are dealt round
//! robin, worker 0 also owns the control connection and the server
//! samples, gates keep the phases in step, and what the workers counted is
//! merged at the end; what a decision on one worker needs from another
//! (sequence progress, publishers' counts, wake-ups) is in `workers`.
//!
//! Phases, in order:
//! 1. setup: connect (at most `MAX_CONNECTING` handshakes in flight, so the
//!    server's accept backlog never overflows into SYN retransmits),
//!    subscribe / advertise, wait for every acknowledgement, read server
//!    counters. Nothing is timed yet.
//! 2. warm-up, then measure: publishers and callers produce; rates, CPU and
//!    latencies cover only the measured interval, verification covers all.
//! 3. drain: production stops; wait for stragglers up to `--drain`, then
//!    whatever is missing is lost. With several workers, each waits until
//!    every worker has what it waits for (a provider keeps answering
//!    callers on other workers).
//!
//! Flow control:
//! - closed loop (fanout, fanin, large): a publisher may be at most
//!   `window` messages ahead of its slowest subscriber, so the run measures
//!   sustained delivery, not how much a queue can absorb;
//! - open loop (latency): message `k` is due at `start + k / rate` and is
//!   stamped with that intended time even if the tool sends it late, so a
//!   server stall shows up in every message it delayed (no coordinated
//!   omission). A periodic timerfd with 1 ns timer slack wakes the loop,
//!   because poll timeouts have millisecond resolution; the tool's own lag
//!   behind the schedule is reported separately;
//! - calls, goals: each caller keeps `inflight` calls (goals) outstanding.
//!
//! Goals: the action server answers each goal at once with `feedback`
//! messages (the goal's own stamp, its `t` replaced by the feedback's index
//! 0, 1, ...) and then a result echoing the goal's arguments. The caller
//! checks that every feedback names one of its goals in flight, carries
//! that goal's stamp and the next index, and that the result carries the
//! goal's own arguments and comes after exactly `feedback` feedbacks.
//!
//! Readiness is edge-triggered: `readable`/`writable` are sticky and cleared
//! only on `WouldBlock`. A peer that used its read budget is revisited next
//! turn with a zero poll timeout, so one busy subscriber cannot starve the
//! others (or the producers) of loop turns.

use std::collections::VecDeque;
use std::fmt;
use std::io::{self, ErrorKind};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token, Waker};
use slab::Slab;

use crate::histogram::Histogram;
use crate::net::{connect_done, Filled, RxBuf, TxBuf};
use crate::payload::{Payload, Stamp};
use crate::procfs::{proc_rss, CpuSample, CpuUse};
use crate::scenario::{Params, Scenario};
use crate::ticker::Ticker;
use crate::transport::{Codec, Event, ServerCounters};
use crate::workers::{owner, pin_to, tool_cores, Shared, MAX_PARK};

/// Non-blocking connects in flight at once: below the 128-entry listen
/// backlog that std and mio use by default, so the load connections of a
/// scenario do not overflow the server's accept queue in one burst.
const MAX_CONNECTING: usize = 64;
/// Idle connections opened between two checks that the server accepted
/// them; see `Runner::open_idle`.
const IDLE_BATCH: usize = 100;
/// Bytes read from one peer per loop turn before others get a turn.
const READ_BUDGET: usize = 4 << 20;
/// A producer stops encoding while this much output is unsent: enough to
/// keep the socket busy, little enough not to hide latency in our buffer.
const TX_HIGH: usize = 256 << 10;
/// Bytes one producer may encode per loop turn.
const PRODUCE_BUDGET: usize = 4 << 20;
/// Connection failures worth printing before we only count them.
const MAX_LOGGED: u64 = 5;
/// Longest frame accepted, on top of the payload size (envelope, names).
const FRAME_SLACK: usize = 64 << 10;

const TICKER: Token = Token(usize::MAX);
/// Another worker woke this one (a subscriber there advanced).
const WAKE: Token = Token(usize::MAX - 1);

/// Why a run could not produce a result at all (as opposed to a result
/// that shows loss).
#[derive(Debug)]
pub enum RunError {
    Io(String, io::Error),
    Timeout(String),
    Protocol(String),
    /// Another worker thread failed (it reports why).
    Aborted,
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunError::Io(what, e) => write!(f, "{what}: {e}"),
            RunError::Timeout(what) => write!(f, "timed out {what}"),
            RunError::Protocol(what) => f.write_str(what),
            RunError::Aborted => f.write_str("another worker thread failed"),
        }
    }
}

/// What a connection is for. Indices are into the `Book` tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// Asks the server for its counters; carries no load.
    Control,
    Pub(usize),
    Sub(usize),
    Provider,
    /// Serves the action of the goals scenario.
    ActionServer,
    Caller(usize),
    Idle,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Connecting,
    Open,
    Closed,
}

#[derive(Debug)]
struct Peer<C> {
    stream: TcpStream,
    rx: RxBuf,
    tx: TxBuf,
    codec: C,
    role: Role,
    state: State,
    readable: bool,
    writable: bool,
    /// Listed in `Runner::ready` / `Runner::dirty`.
    in_ready: bool,
    in_dirty: bool,
    /// Waiting for the acknowledgement of its subscribe / advertise.
    awaiting_ack: bool,
}

/// Counters that decide the verdict. Everything counts from the first
/// message, warm-up included; only rates and latencies are windowed.
#[derive(Debug, Default, Clone)]
pub struct Tally {
    /// Frames that reached a subscriber or a caller.
    pub delivered: u64,
    /// Verified, in sequence (topics) or matched to their call (calls).
    pub good: u64,
    pub good_bytes: u64,
    /// A sequence number other than the next expected one arrived.
    pub out_of_order: u64,
    /// Payload failed verification.
    pub corrupt: u64,
    /// Wrong topic, unknown publisher, a reply (feedback, result) for a
    /// call (goal) we did not make or carrying another one's arguments,
    /// traffic on the wrong role.
    pub misrouted: u64,
    pub calls_sent: u64,
    /// Goals count as calls. Answered with `result: false` (goals: or any
    /// status but succeeded).
    pub calls_failed: u64,
    /// Calls answered at all (any result).
    pub calls_answered: u64,
    /// Forwarded calls (goals) our provider (action server) answered.
    pub served: u64,
    /// Goal feedback frames that reached a caller.
    pub feedback_delivered: u64,
    /// Verified feedback: intact, of a goal in flight, the next index.
    pub feedback_good: u64,
    /// Feedback a succeeded goal was short of when its result came.
    pub feedback_lost: u64,
    /// Connections the server closed or reset under us.
    pub disconnects: u64,
    /// Unsolicited error statuses.
    pub error_notices: u64,
    /// Delivery (or call round trip) latency, ns, from the intended send time.
    pub latency: Histogram,
    /// How late the tool itself sent each open-loop message, ns.
    pub send_lag: Histogram,
}

impl Tally {
    /// Adds another worker's counts (`--threads`).
    fn merge(&mut self, o: &Tally) {
        self.delivered += o.delivered;
        self.good += o.good;
        self.good_bytes += o.good_bytes;
        self.out_of_order += o.out_of_order;
        self.corrupt += o.corrupt;
        self.misrouted += o.misrouted;
        self.calls_sent += o.calls_sent;
        self.calls_failed += o.calls_failed;
        self.calls_answered += o.calls_answered;
        self.served += o.served;
        self.feedback_delivered += o.feedback_delivered;
        self.feedback_good += o.feedback_good;
        self.feedback_lost += o.feedback_lost;
        self.disconnects += o.disconnects;
        self.error_notices += o.error_notices;
        self.latency.merge(&o.latency);
        self.send_lag.merge(&o.send_lag);
    }
}

#[derive(Debug, Default)]
struct PubState {
    key: usize,
    sent: u64,
    /// Lowest next-expected sequence over all subscribers, as last computed.
    floor: u64,
}

#[derive(Debug)]
struct CallerState {
    key: usize,
    next_id: u64,
    /// Calls (goals) in flight, oldest first.
    outstanding: VecDeque<Pending>,
}

impl Default for CallerState {
    fn default() -> Self {
        CallerState {
            // Not a connection of this worker until `start_connects`.
            key: usize::MAX,
            next_id: 0,
            outstanding: VecDeque::new(),
        }
    }
}

/// One call or goal in flight.
#[derive(Debug, Clone, Copy)]
struct Pending {
    id: u64,
    sent_ns: u64,
    /// Goals: index of the next feedback expected (0 before the first).
    next_feedback: u64,
    /// Goals: verified feedbacks received.
    feedback: u64,
}

/// The parts of the peer a frame arrived on that handling it may touch.
struct From<'p, C> {
    key: usize,
    role: Role,
    codec: &'p mut C,
    tx: &'p mut Vec<u8>,
    awaiting_ack: &'p mut bool,
}

/// Per-message bookkeeping; separate from the sockets so a read handler can
/// borrow one peer and the book at the same time.
#[derive(Debug)]
struct Book {
    payload: Payload,
    topic: String,
    service: String,
    action: String,
    /// Callers send goals, not calls.
    goals: bool,
    /// Goals: feedback messages per goal.
    feedback: u64,
    /// The action server's feedback being encoded.
    scratch: Vec<u8>,
    npubs: usize,
    /// The next expected sequences and publishers' counts every worker
    /// thread sees (`workers`).
    shared: Arc<Shared>,
    /// A subscriber of this worker advanced since the last wake-up check.
    progressed: bool,
    pubs: Vec<PubState>,
    callers: Vec<CallerState>,
    t: Tally,
    acks_pending: usize,
    refused: Option<String>,
    stats: Option<ServerCounters>,
    /// Latencies are recorded for messages intended at or after this (ns).
    measure_from_ns: u64,
}

impl Book {
    fn new(p: &Params, shared: Arc<Shared>) -> Book {
        Book {
            payload: Payload::new(p.size),
            topic: p.topic.clone(),
            service: p.service.clone(),
            action: p.action.clone(),
            goals: p.scenario == Scenario::Goals,
            feedback: p.feedback as u64,
            scratch: Vec::with_capacity(p.size + 128),
            npubs: p.pubs,
            shared,
            progressed: false,
            pubs: (0..p.pubs)
                .map(|_| PubState {
                    // A connection of this worker once `start_connects`
                    // opens it; a remote source's publishers never are.
                    key: usize::MAX,
                    ..PubState::default()
                })
                .collect(),
            callers: (0..p.callers).map(|_| CallerState::default()).collect(),
            t: Tally::default(),
            acks_pending: 0,
            refused: None,
            stats: None,
            measure_from_ns: u64::MAX,
        }
    }

    /// Handles one decoded frame that arrived on `from`; returns whether it
    /// queued output there.
    fn on_event<C: Codec>(&mut self, from: From<'_, C>, ev: Event<'_>, now_ns: u64) -> bool {
        let From {
            key,
            role,
            codec,
            tx,
            awaiting_ack,
        } = from;
        match (ev, role) {
            (Event::Delivery { topic, payload }, Role::Sub(j)) => {
                self.on_delivery(j, topic, payload, now_ns);
            }
            (Event::Call { id, args }, Role::Provider) => {
                // Echo: the caller checks that its own arguments come back.
                codec.respond(tx, &self.service, id, args);
                self.t.served += 1;
                return true;
            }
            (Event::Reply { id, values, ok }, Role::Caller(c)) => {
                self.on_reply(c, id, values, ok, now_ns);
            }
            (Event::Goal { id, args }, Role::ActionServer) => {
                self.serve_goal(codec, tx, id, args);
                return true;
            }
            (Event::Feedback { id, values }, Role::Caller(c)) => self.on_feedback(c, id, values),
            (Event::GoalResult { id, values, ok }, Role::Caller(c)) => {
                self.on_reply(c, id, values, ok, now_ns);
            }
            (Event::Stats { values }, _) => self.stats = C::parse_stats(values),
            (Event::Ack { token }, _) if token == key as u64 && *awaiting_ack => {
                *awaiting_ack = false;
                self.acks_pending -= 1;
            }
            (Event::Refused { token, reason }, _) if token == key as u64 => {
                self.refused = Some(String::from_utf8_lossy(reason).into_owned());
            }
            (Event::Notice { error: true, text }, _) => {
                self.t.error_notices += 1;
                self.log(format_args!(
                    "server error status: {}",
                    String::from_utf8_lossy(&text[..text.len().min(300)])
                ));
            }
            (Event::Notice { error: false, .. }, _) => {}
            _ => self.t.misrouted += 1,
        }
        false
    }

    fn on_delivery(&mut self, sub: usize, topic: &[u8], msg: &[u8], now_ns: u64) {
        let t = &mut self.t;
        t.delivered += 1;
        if topic != self.topic.as_bytes() {
            t.misrouted += 1;
            return;
        }
        let st = match self.payload.check(msg) {
            Ok(st) => st,
            Err(_) => {
                t.corrupt += 1;
                return;
            }
        };
        let src = st.src as usize;
        if src >= self.npubs {
            t.misrouted += 1;
            return;
        }
        let next = self.shared.next(sub, src);
        if st.seq < next {
            // Duplicate or late: not progress, and never counted twice.
            t.out_of_order += 1;
            return;
        }
        if st.seq > next {
            // The skipped ones are lost unless they turn up late (which is
            // out of order again); either way the run fails.
            t.out_of_order += 1;
        }
        self.shared.set_next(sub, src, st.seq + 1);
        self.progressed = true;
        t.good += 1;
        t.good_bytes += msg.len() as u64;
        if st.t_ns >= self.measure_from_ns {
            t.latency.record(now_ns.saturating_sub(st.t_ns));
        }
    }

    /// A call's reply or a goal's result: the call (goal) ends.
    fn on_reply(&mut self, c: usize, id: u64, values: &[u8], ok: bool, now_ns: u64) {
        let t = &mut self.t;
        t.delivered += 1;
        let Some(caller) = self.callers.get_mut(c) else {
            t.misrouted += 1;
            return;
        };
        let Some(pos) = caller.outstanding.iter().position(|p| p.id == id) else {
            t.misrouted += 1;
            return;
        };
        let Some(pending) = caller.outstanding.remove(pos) else {
            return;
        };
        t.calls_answered += 1;
        if !ok {
            t.calls_failed += 1;
            let what = if self.goals { "goal" } else { "call" };
            self.log(format_args!(
                "{what} {id} of caller {c} failed: {}",
                String::from_utf8_lossy(&values[..values.len().min(300)])
            ));
            return;
        }
        match self.payload.check(values) {
            Ok(st) if st.src == c as u64 && st.seq == id => {
                t.good += 1;
                t.good_bytes += values.len() as u64;
                if pending.sent_ns >= self.measure_from_ns {
                    t.latency.record(now_ns.saturating_sub(pending.sent_ns));
                }
                // Feedback never follows its goal's result: whatever is
                // missing now is lost (0 outside goals).
                let (got, want) = (pending.feedback, self.feedback);
                if got < want {
                    t.feedback_lost += want - got;
                    self.log(format_args!(
                        "goal {id} of caller {c} ended after {got} of its {want} feedback messages"
                    ));
                }
            }
            // Intact, but another call's arguments: cross-correlation.
            Ok(_) => t.misrouted += 1,
            Err(_) => t.corrupt += 1,
        }
    }

    /// Feedback on goal `id` of caller `c`: the goal's stamp with the next
    /// feedback index as its `t`.
    fn on_feedback(&mut self, c: usize, id: u64, values: &[u8]) {
        let t = &mut self.t;
        t.feedback_delivered += 1;
        let Some(pending) = self
            .callers
            .get_mut(c)
            .and_then(|caller| caller.outstanding.iter_mut().find(|p| p.id == id))
        else {
            // Not in flight: another caller's goal, or after the result.
            t.misrouted += 1;
            return;
        };
        let st = match self.payload.check(values) {
            Ok(st) if st.src == c as u64 && st.seq == id => st,
            // Intact, but another goal's feedback: cross-correlation.
            Ok(_) => {
                t.misrouted += 1;
                return;
            }
            Err(_) => {
                t.corrupt += 1;
                return;
            }
        };
        let index = st.t_ns;
        if index < pending.next_feedback || index >= self.feedback {
            // Repeated, late, or beyond the count: never counted twice.
            t.out_of_order += 1;
            return;
        }
        if index > pending.next_feedback {
            // Skipped ones are short at the result, and reported there too.
            t.out_of_order += 1;
        }
        pending.next_feedback = index + 1;
        pending.feedback += 1;
        t.feedback_good += 1;
    }

    /// The action server's answer to a goal: `feedback` feedbacks carrying
    /// the goal's stamp with their index as `t`, then a result echoing the
    /// goal's arguments.
    fn serve_goal<C: Codec>(&mut self, codec: &mut C, tx: &mut Vec<u8>, id: &[u8], args: &[u8]) {
        self.t.served += 1;
        match self.payload.check(args) {
            Ok(st) => {
                for index in 0..self.feedback {
                    self.scratch.clear();
                    let st = Stamp { t_ns: index, ..st };
                    self.payload.encode(&mut self.scratch, st);
                    codec.feedback(tx, &self.action, id, &self.scratch);
                }
            }
            // Still answered: the caller sees the damage (and no feedback).
            Err(_) => self.t.corrupt += 1,
        }
        codec.goal_result(tx, &self.action, id, args);
    }

    /// Lowest next-expected sequence of publisher `i` over all subscribers
    /// (of every worker).
    fn floor(&self, i: usize) -> u64 {
        self.shared.floor(i)
    }

    /// Prints a problem; at most `MAX_LOGGED` of them per run, over every
    /// worker.
    fn log(&mut self, args: fmt::Arguments<'_>) {
        let logged = self.shared.count_log();
        if logged <= MAX_LOGGED {
            eprintln!("rosgate-load: {args}");
        } else if logged == MAX_LOGGED + 1 {
            eprintln!("rosgate-load: (further messages suppressed)");
        }
    }
}

/// Counters and clocks at one instant, to difference into rates.
#[derive(Debug, Clone, Copy)]
struct Snapshot {
    at: Instant,
    cpu: CpuSample,
    good: u64,
    good_bytes: u64,
    feedback_good: u64,
}

/// Everything a finished run measured; `report` turns it into text.
#[derive(Debug)]
pub struct Outcome {
    pub params: Params,
    pub transport: &'static str,
    pub tally: Tally,
    /// Topic messages expected at subscribers, or calls made.
    pub expected: u64,
    pub measured: Duration,
    pub measured_good: u64,
    pub measured_bytes: u64,
    /// Goals: verified feedback in the measured interval.
    pub measured_feedback: u64,
    /// Tool CPU counts every worker thread (`getrusage` of the process).
    pub cpu: CpuUse,
    /// Cores the tool's workers could use at once (`workers::tool_cores`):
    /// the tool is saturated near `100 % x tool_cores`, not at 100 %.
    pub tool_cores: usize,
    pub server_rss: Option<u64>,
    /// Idle: server RSS before the idle connections were opened.
    pub server_rss_before: Option<u64>,
    pub stats_before: Option<ServerCounters>,
    pub stats_after: Option<ServerCounters>,
    pub setup: Duration,
    /// Idle: one stats round trip with every idle connection open.
    pub stats_rtt: Option<Duration>,
    pub drained: bool,
}

impl Outcome {
    /// Messages (or calls) that never arrived.
    pub fn lost(&self) -> u64 {
        match self.params.scenario {
            Scenario::Calls | Scenario::Goals => {
                self.expected.saturating_sub(self.tally.calls_answered)
            }
            Scenario::Idle => 0,
            _ => self.expected.saturating_sub(self.tally.good),
        }
    }

    /// A clean run: everything arrived once, in order, intact.
    pub fn clean(&self) -> bool {
        let t = &self.tally;
        self.lost() == 0
            && t.out_of_order == 0
            && t.corrupt == 0
            && t.misrouted == 0
            && t.calls_failed == 0
            && t.feedback_lost == 0
            && t.disconnects == 0
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Setup,
    Run,
    Drain,
}

pub struct Runner<C: Codec> {
    p: Params,
    /// This worker's index (`--threads`); worker 0 owns the control
    /// connection, the server samples and the run's start time.
    w: usize,
    shared: Arc<Shared>,
    poll: Poll,
    events: Events,
    peers: Slab<Peer<C>>,
    book: Book,
    /// Origin of every `*_ns` timestamp (the same for every worker).
    clock: Instant,
    phase: Phase,
    run_start_ns: u64,
    /// Peers with unread input left after their budget.
    ready: Vec<usize>,
    /// Peers with output queued this turn.
    dirty: Vec<usize>,
    /// Producers that stopped on their budget, not on flow control.
    produce_again: bool,
    to_connect: VecDeque<Role>,
    connecting: usize,
    control: Option<usize>,
    ticker: Option<Ticker>,
    scratch: Vec<u8>,
    /// Raw bytes of one read of a framed transport, before `Codec::unframe`.
    framed: Vec<u8>,
}

/// What one worker measured; [`run`] merges them into an [`Outcome`].
struct Part {
    tally: Tally,
    /// This worker's counters at the start and the end of the measured
    /// interval (worker 0's clocks and CPU samples are the run's).
    a: Snapshot,
    b: Snapshot,
    drained: bool,
    /// Worker 0 only.
    head: Option<Head>,
}

/// What only worker 0 reads: the server's state and the run's timings.
struct Head {
    stats_before: Option<ServerCounters>,
    stats_after: Option<ServerCounters>,
    rss_before: Option<u64>,
    server_rss: Option<u64>,
    setup: Duration,
    stats_rtt: Option<Duration>,
}

/// Runs `p` on `p.threads` workers, each a [`Runner`] with its own share
/// of the connections and its own poll loop (see `workers`), and merges
/// what they measured. One worker runs on the calling thread.
pub fn run<C: Codec + Send + 'static>(p: Params) -> Result<Outcome, RunError> {
    let threads = p.threads.max(1);
    let shared = Arc::new(Shared::new(threads, p.pubs, p.subs));
    let parts: Vec<Result<Part, RunError>> = if threads == 1 {
        vec![worker::<C>(p.clone(), 0, Arc::clone(&shared))]
    } else {
        let handles: Vec<_> = (0..threads)
            .map(|w| {
                let (p, shared) = (p.clone(), Arc::clone(&shared));
                std::thread::Builder::new()
                    .name(format!("load-{w}"))
                    .spawn(move || {
                        let _guard = AbortOnPanic(Arc::clone(&shared));
                        worker::<C>(p, w, shared)
                    })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| match h {
                Ok(h) => h
                    .join()
                    .unwrap_or_else(|_| Err(RunError::Protocol("a worker thread panicked".into()))),
                Err(e) => {
                    shared.abort();
                    Err(RunError::Io("spawning a worker thread".into(), e))
                }
            })
            .collect()
    };
    let mut ok = Vec::with_capacity(parts.len());
    let mut first_err = None;
    for part in parts {
        match part {
            Ok(part) => ok.push(part),
            // The worker that failed says why; the others only followed.
            Err(RunError::Aborted) => {}
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    if ok.len() != threads {
        return Err(RunError::Aborted);
    }
    let mut tally = Tally::default();
    let (mut good, mut bytes, mut feedback) = (0, 0, 0);
    let mut drained = true;
    for part in &ok {
        tally.merge(&part.tally);
        good += part.b.good - part.a.good;
        bytes += part.b.good_bytes - part.a.good_bytes;
        feedback += part.b.feedback_good - part.a.feedback_good;
        drained &= part.drained;
    }
    let first = ok.swap_remove(0);
    let Some(head) = first.head else {
        return Err(RunError::Aborted);
    };
    let expected = match p.scenario {
        Scenario::Calls | Scenario::Goals => tally.calls_sent,
        Scenario::Idle => 0,
        _ => (0..p.pubs).map(|i| shared.sent(i)).sum::<u64>() * p.subs as u64,
    };
    Ok(Outcome {
        transport: C::NAME,
        tally,
        expected,
        measured: first.b.at.saturating_duration_since(first.a.at),
        measured_good: good,
        measured_bytes: bytes,
        measured_feedback: feedback,
        cpu: first.a.cpu.until(&first.b.cpu),
        tool_cores: tool_cores(threads, &p.pin_cpus),
        server_rss: head.server_rss,
        server_rss_before: head.rss_before,
        stats_before: head.stats_before,
        stats_after: head.stats_after,
        setup: head.setup,
        stats_rtt: head.stats_rtt,
        drained,
        params: p,
    })
}

/// Stops the other workers when a worker thread panics, so that none of
/// them waits at a gate for it.
struct AbortOnPanic(Arc<Shared>);

impl Drop for AbortOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.abort();
        }
    }
}

/// One worker's whole run, on the calling thread; a failure stops the
/// others (they return [`RunError::Aborted`]).
fn worker<C: Codec>(p: Params, w: usize, shared: Arc<Shared>) -> Result<Part, RunError> {
    if let Some(&cpu) = p.pin_cpus.get(w % p.pin_cpus.len().max(1)) {
        if let Err(e) = pin_to(cpu) {
            shared.abort();
            return Err(RunError::Io(format!("pinning worker {w} to CPU {cpu}"), e));
        }
    }
    let r = Runner::<C>::new(p, w, Arc::clone(&shared)).and_then(Runner::run_worker);
    if r.is_err() {
        shared.abort();
    }
    r
}

impl<C: Codec> Runner<C> {
    fn new(p: Params, w: usize, shared: Arc<Shared>) -> Result<Self, RunError> {
        let poll = Poll::new().map_err(|e| RunError::Io("creating poll".into(), e))?;
        let waker = Waker::new(poll.registry(), WAKE)
            .map_err(|e| RunError::Io("creating the waker".into(), e))?;
        shared.set_waker(w, Arc::new(waker));
        let book = Book::new(&p, Arc::clone(&shared));
        Ok(Runner {
            poll,
            events: Events::with_capacity(1024),
            peers: Slab::new(),
            book,
            clock: shared.clock,
            w,
            shared,
            phase: Phase::Setup,
            run_start_ns: 0,
            ready: Vec::new(),
            dirty: Vec::new(),
            produce_again: false,
            to_connect: VecDeque::new(),
            connecting: 0,
            control: None,
            ticker: None,
            scratch: Vec::with_capacity(p.size + 128),
            framed: Vec::new(),
            p,
        })
    }

    fn gate(&self) -> Result<(), RunError> {
        self.shared.gate().map_err(|_| RunError::Aborted)
    }

    /// Runs every phase and returns what this worker measured.
    fn run_worker(mut self) -> Result<Part, RunError> {
        let setup_start = Instant::now();
        let setup_deadline = setup_start + self.p.setup_timeout;
        let server_pid = self.p.server_pid;
        let lead = self.w == 0;

        // Control connection first, so "before" counters and RSS exclude
        // the load connections. A raw source has nothing to ask.
        let mut stats_before = None;
        let mut rss_before = None;
        if lead {
            if !C::REMOTE_SOURCE {
                self.to_connect.push_back(Role::Control);
            }
            self.wait(setup_deadline, "connecting the control connection", |r| {
                r.connecting == 0 && r.to_connect.is_empty()
            })?;
            stats_before = self.server_stats(setup_deadline)?;
            rss_before = server_pid.and_then(|pid| proc_rss(pid).ok());
        }
        self.gate()?;

        let p = &self.p;
        let (w, threads) = (self.w, self.shared.threads);
        let roles = (0..p.subs)
            .map(Role::Sub)
            .chain((0..p.pubs).map(Role::Pub).filter(|_| !C::REMOTE_SOURCE))
            .chain((p.scenario == Scenario::Calls).then_some(Role::Provider))
            .chain((p.scenario == Scenario::Goals).then_some(Role::ActionServer))
            .chain((0..p.callers).map(Role::Caller))
            .enumerate()
            .filter(|&(j, _)| owner(j, threads) == w)
            .map(|(_, role)| role);
        self.to_connect.extend(roles);
        self.wait(setup_deadline, "connecting and subscribing", |r| {
            r.connecting == 0 && r.to_connect.is_empty() && r.book.acks_pending == 0
        })?;
        if lead && self.p.conns > 0 {
            let base = stats_before.map_or(1, |s| s.connections_open);
            self.open_idle(base, setup_deadline)?;
        }
        self.gate()?;
        let mut setup = Duration::ZERO;
        if lead {
            setup = setup_start.elapsed();
            // A federation carries interest and providers across in its
            // own time; nothing on this side can see when it is done.
            std::thread::sleep(self.p.settle);
            self.shared.set_start(Instant::now());
        }
        self.gate()?;

        // Measure, from the one start every worker shares.
        let now = self.shared.start().ok_or(RunError::Aborted)?;
        self.phase = Phase::Run;
        self.run_start_ns = self.ns(now);
        let warm_end = now + self.p.warmup;
        let end = warm_end + self.p.duration;
        self.book.measure_from_ns = self.ns(warm_end);
        // Nothing on the wire wakes the first producer turn.
        self.produce_again = true;
        let owns_pubs = self.book.pubs.iter().any(|s| s.key != usize::MAX);
        if self.p.scenario == Scenario::Latency && owns_pubs {
            self.start_ticker();
        }
        while Instant::now() < warm_end {
            self.turn(warm_end)?;
        }
        let a = self.snapshot();
        while Instant::now() < end {
            self.turn(end)?;
        }
        let b = self.snapshot();
        let server_rss = if lead {
            server_pid.and_then(|pid| proc_rss(pid).ok())
        } else {
            None
        };

        // Drain: until every worker has all it waits for.
        self.phase = Phase::Drain;
        self.shared.done_producing();
        if let Some(t) = self.ticker.take() {
            let _ = self.poll.registry().deregister(&mut SourceFd(&t.raw_fd()));
        }
        let drain_deadline = Instant::now() + self.p.drain;
        loop {
            let mine = self.complete();
            self.shared.set_drained(self.w, mine);
            if (mine && self.shared.all_drained()) || Instant::now() >= drain_deadline {
                break;
            }
            self.turn(drain_deadline)?;
        }
        let drained = self.complete();
        self.gate()?;
        let mut head = None;
        if lead {
            let mut stats_rtt = None;
            if self.p.scenario == Scenario::Idle && self.control.is_some() {
                let t0 = Instant::now();
                if self.server_stats(t0 + Duration::from_secs(5))?.is_some() {
                    stats_rtt = Some(t0.elapsed());
                }
            }
            let stats_after = self.server_stats(Instant::now() + Duration::from_secs(5))?;
            head = Some(Head {
                stats_before,
                stats_after,
                rss_before,
                server_rss,
                setup,
                stats_rtt,
            });
        }
        self.abort_all();
        Ok(Part {
            tally: std::mem::take(&mut self.book.t),
            a,
            b,
            drained,
            head,
        })
    }

    /// Opens the idle connections in batches smaller than a default listen
    /// backlog (128), waiting after each batch until the server reports
    /// them open. A connect completes in the kernel before the server
    /// accepts it, so without this pacing a burst overflows the accept
    /// queue; with SYN cookies the overflowed connections then look
    /// established to us but stay unknown to the server until they send
    /// something, which idle connections never do. Without server
    /// counters, connects are only limited to `MAX_CONNECTING` in flight.
    fn open_idle(&mut self, base_open: u64, deadline: Instant) -> Result<(), RunError> {
        let mut opened = 0;
        while opened < self.p.conns {
            let n = IDLE_BATCH.min(self.p.conns - opened);
            self.to_connect.extend((0..n).map(|_| Role::Idle));
            opened += n;
            // Codecs with a barrier (NATS) have each idle connection
            // acknowledged, which proves the server accepted it.
            self.wait(deadline, "opening idle connections", |r| {
                r.connecting == 0 && r.to_connect.is_empty() && r.book.acks_pending == 0
            })?;
            if self.control.is_none() {
                continue;
            }
            let want = base_open + opened as u64;
            loop {
                let s = self.server_stats(deadline)?;
                match s {
                    Some(s) if s.connections_open >= want => break,
                    // No counters (or no answer): the next batch.
                    None => break,
                    Some(_) if Instant::now() >= deadline => {
                        return Err(RunError::Timeout(format!(
                            "waiting for the server to accept {want} connections (it reports {})",
                            s.map_or(0, |s| s.connections_open)
                        )));
                    }
                    Some(_) => self.sleep(Duration::from_millis(2))?,
                }
            }
        }
        Ok(())
    }

    /// Closes every socket with an RST (`SO_LINGER` 0) instead of a FIN.
    /// Loopback runs open tens of thousands of connections; closing them
    /// normally leaves each local port in TIME_WAIT for a minute, and with
    /// enough of those the kernel's search for a free ephemeral port makes
    /// later connects take milliseconds each.
    fn abort_all(&mut self) {
        let off = libc::linger {
            l_onoff: 1,
            l_linger: 0,
        };
        for (_, peer) in self.peers.iter_mut() {
            // SAFETY: valid socket and a correctly sized option value;
            // failure only means a normal close.
            unsafe {
                libc::setsockopt(
                    peer.stream.as_raw_fd(),
                    libc::SOL_SOCKET,
                    libc::SO_LINGER,
                    (&off as *const libc::linger).cast(),
                    std::mem::size_of::<libc::linger>() as libc::socklen_t,
                );
            }
        }
    }

    fn ns(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.clock).as_nanos() as u64
    }

    fn snapshot(&self) -> Snapshot {
        Snapshot {
            at: Instant::now(),
            cpu: CpuSample::take(self.p.server_pid),
            good: self.book.t.good,
            good_bytes: self.book.t.good_bytes,
            feedback_good: self.book.t.feedback_good,
        }
    }

    fn start_ticker(&mut self) {
        let period = Duration::from_nanos((1_000_000_000 / self.p.rate).max(1));
        match Ticker::new(period) {
            Ok(t) => {
                let fd = t.raw_fd();
                match self
                    .poll
                    .registry()
                    .register(&mut SourceFd(&fd), TICKER, Interest::READABLE)
                {
                    Ok(()) => self.ticker = Some(t),
                    Err(e) => eprintln!("rosgate-load: timerfd register: {e}; using poll timeouts"),
                }
            }
            Err(e) => eprintln!("rosgate-load: timerfd: {e}; using poll timeouts (1 ms)"),
        }
    }

    /// Bytes peer `k` has queued and not written (0 for no such peer).
    fn unsent(&self, k: usize) -> usize {
        self.peers.get(k).map_or(0, |p| p.tx.pending())
    }

    /// Everything sent has been accounted for: every publisher's messages
    /// (of any worker) reached every subscriber, nothing of this worker's
    /// is left unsent, and its callers have all their answers.
    fn complete(&self) -> bool {
        let b = &self.book;
        self.shared.all_delivered()
            && b.pubs.iter().all(|s| self.unsent(s.key) == 0)
            && b.callers.iter().all(|c| c.outstanding.is_empty())
    }

    /// Turns the loop until `done` or `deadline`; setup failures end it.
    fn wait(
        &mut self,
        deadline: Instant,
        what: &str,
        done: impl Fn(&Self) -> bool,
    ) -> Result<(), RunError> {
        loop {
            if let Some(r) = self.book.refused.take() {
                return Err(RunError::Protocol(format!("server refused a request: {r}")));
            }
            if self.book.t.disconnects > 0 {
                return Err(RunError::Protocol(format!(
                    "server closed a connection while {what}"
                )));
            }
            if done(self) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(RunError::Timeout(what.to_string()));
            }
            self.turn(deadline)?;
        }
    }

    fn sleep(&mut self, d: Duration) -> Result<(), RunError> {
        let until = Instant::now() + d;
        while Instant::now() < until {
            self.turn(until)?;
        }
        Ok(())
    }

    /// Asks the server for its counters; `None` when the transport has
    /// none or the server did not answer by `deadline` (counters are
    /// informative, so that is not an error).
    fn server_stats(&mut self, deadline: Instant) -> Result<Option<ServerCounters>, RunError> {
        let Some(k) = self.control else {
            return Ok(None);
        };
        let Some(peer) = self.peers.get_mut(k) else {
            return Ok(None);
        };
        if peer.state != State::Open || !peer.codec.stats_request(peer.tx.buf()) {
            return Ok(None);
        }
        self.mark_dirty(k);
        self.book.stats = None;
        // Not `wait`: a load connection lost earlier must not stop us from
        // reading the counters that may explain it.
        while self.book.stats.is_none() {
            if Instant::now() >= deadline || self.peers.get(k).map(|p| p.state) != Some(State::Open)
            {
                return Ok(None);
            }
            self.turn(deadline)?;
        }
        Ok(self.book.stats.take())
    }

    /// One loop turn: connect, poll, read, produce, write.
    fn turn(&mut self, deadline: Instant) -> Result<(), RunError> {
        self.start_connects()?;
        // Output queued outside a turn (a stats request) goes out before we
        // sleep in poll, not after.
        self.flush_dirty()?;
        let now = Instant::now();
        let mut timeout = if !self.ready.is_empty() || !self.dirty.is_empty() || self.produce_again
        {
            Duration::ZERO
        } else {
            deadline.saturating_duration_since(now)
        };
        if self.shared.multi() {
            if self.shared.aborted() {
                return Err(RunError::Aborted);
            }
            timeout = timeout.min(MAX_PARK);
        }
        if let Err(e) = self.poll.poll(&mut self.events, Some(timeout)) {
            if e.kind() == ErrorKind::Interrupted {
                return Ok(());
            }
            return Err(RunError::Io("poll".into(), e));
        }
        for ev in self.events.iter() {
            if ev.token() == TICKER {
                if let Some(t) = &self.ticker {
                    t.drain();
                }
                continue;
            }
            if ev.token() == WAKE {
                // `produce` runs every turn and re-reads the floors.
                continue;
            }
            let k = ev.token().0;
            let Some(peer) = self.peers.get_mut(k) else {
                continue;
            };
            if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                peer.readable = true;
                if !peer.in_ready {
                    peer.in_ready = true;
                    self.ready.push(k);
                }
            }
            if ev.is_writable() || ev.is_write_closed() || ev.is_error() {
                peer.writable = true;
                if !peer.in_dirty {
                    peer.in_dirty = true;
                    self.dirty.push(k);
                }
            }
        }
        self.read_ready()?;
        if self.book.progressed && self.shared.multi() {
            self.book.progressed = false;
            self.shared.wake_parked(self.w);
        }
        self.produce();
        self.flush_dirty()?;
        Ok(())
    }

    /// Opens queued connections up to `MAX_CONNECTING` at a time.
    fn start_connects(&mut self) -> Result<(), RunError> {
        while self.connecting < MAX_CONNECTING {
            let Some(role) = self.to_connect.pop_front() else {
                break;
            };
            let addr = match role {
                Role::Pub(_) | Role::Provider | Role::ActionServer => {
                    self.p.source_addr.unwrap_or(self.p.addr)
                }
                _ => self.p.addr,
            };
            let mut stream =
                TcpStream::connect(addr).map_err(|e| RunError::Io(format!("connect {addr}"), e))?;
            let entry = self.peers.vacant_entry();
            let k = entry.key();
            self.poll
                .registry()
                .register(
                    &mut stream,
                    Token(k),
                    Interest::READABLE | Interest::WRITABLE,
                )
                .map_err(|e| RunError::Io("register".into(), e))?;
            entry.insert(Peer {
                stream,
                rx: RxBuf::default(),
                tx: TxBuf::default(),
                codec: C::new(self.p.size + FRAME_SLACK),
                role,
                state: State::Connecting,
                readable: false,
                writable: false,
                in_ready: false,
                in_dirty: false,
                awaiting_ack: false,
            });
            match role {
                Role::Pub(i) => self.book.pubs[i].key = k,
                Role::Caller(c) => self.book.callers[c].key = k,
                Role::Control => self.control = Some(k),
                _ => {}
            }
            self.connecting += 1;
        }
        Ok(())
    }

    /// A connect finished: send the handshake and the role's request.
    fn on_connected(&mut self, k: usize) -> Result<(), RunError> {
        let Some(peer) = self.peers.get_mut(k) else {
            return Ok(());
        };
        self.connecting -= 1;
        peer.state = State::Open;
        // Input that arrived with the connect completion (a server that
        // speaks first: NATS `INFO`, a raw source) was skipped while the
        // peer was connecting, and its edge will not come again.
        if peer.readable && !peer.in_ready {
            peer.in_ready = true;
            self.ready.push(k);
        }
        // Latency matters more than segment count for every role here.
        let _ = peer.stream.set_nodelay(true);
        match peer.role {
            Role::Pub(_) => peer.codec.publisher_hello(peer.tx.buf(), &self.book.topic),
            _ => peer.codec.hello(peer.tx.buf()),
        }
        match peer.role {
            Role::Sub(_) => {
                peer.codec
                    .subscribe(peer.tx.buf(), &self.book.topic, k as u64);
                if !C::REMOTE_SOURCE {
                    peer.awaiting_ack = true;
                    self.book.acks_pending += 1;
                }
            }
            Role::Idle if self.p.idle_subscribed => {
                peer.codec
                    .subscribe(peer.tx.buf(), &self.book.topic, k as u64);
                if !C::REMOTE_SOURCE {
                    peer.awaiting_ack = true;
                    self.book.acks_pending += 1;
                }
            }
            Role::Idle if peer.codec.barrier(peer.tx.buf(), k as u64) => {
                peer.awaiting_ack = true;
                self.book.acks_pending += 1;
            }
            Role::Provider => {
                if !peer
                    .codec
                    .advertise_service(peer.tx.buf(), &self.book.service, k as u64)
                {
                    return Err(RunError::Protocol(format!(
                        "transport {} has no services",
                        C::NAME
                    )));
                }
                peer.awaiting_ack = true;
                self.book.acks_pending += 1;
            }
            Role::ActionServer => {
                if !peer
                    .codec
                    .advertise_action(peer.tx.buf(), &self.book.action, k as u64)
                {
                    return Err(RunError::Protocol(format!(
                        "transport {} has no actions",
                        C::NAME
                    )));
                }
                peer.awaiting_ack = true;
                self.book.acks_pending += 1;
            }
            _ => {}
        }
        Ok(())
    }

    fn read_ready(&mut self) -> Result<(), RunError> {
        let mut ready = std::mem::take(&mut self.ready);
        let mut keep = 0;
        for i in 0..ready.len() {
            let k = ready[i];
            match self.read_peer(k)? {
                true => {
                    ready[keep] = k;
                    keep += 1;
                }
                false => {
                    if let Some(p) = self.peers.get_mut(k) {
                        p.in_ready = false;
                    }
                }
            }
        }
        ready.truncate(keep);
        // Anything queued meanwhile (none today) goes after the leftovers.
        ready.append(&mut self.ready);
        self.ready = ready;
        Ok(())
    }

    /// Reads peer `k` until `WouldBlock` or its budget; `true` when input
    /// may be left for the next turn.
    fn read_peer(&mut self, k: usize) -> Result<bool, RunError> {
        let Some(peer) = self.peers.get_mut(k) else {
            return Ok(false);
        };
        if peer.state != State::Open || !peer.readable {
            return Ok(false);
        }
        let mut budget = READ_BUDGET;
        let mut wrote = false;
        loop {
            let filled = match peer.rx.fill(&mut peer.stream) {
                Ok(f) => f,
                Err(e) => {
                    self.lost_peer(k, &format!("read: {e}"));
                    return Ok(false);
                }
            };
            let n = match filled {
                Filled::Bytes(n) => n,
                Filled::WouldBlock => {
                    peer.readable = false;
                    break;
                }
                Filled::Eof => {
                    self.lost_peer(k, "closed by the server");
                    return Ok(false);
                }
            };
            // One clock read per `read`: every frame in it arrived together.
            let now_ns = self.clock.elapsed().as_nanos() as u64;
            let Peer {
                rx,
                tx,
                codec,
                role,
                awaiting_ack,
                ..
            } = &mut *peer;
            if C::FRAMED {
                rx.take_tail(n, &mut self.framed);
                if let Err(e) = codec.unframe(&self.framed, &mut |b| rx.push(b)) {
                    return Err(RunError::Protocol(format!(
                        "connection {k} ({role:?}): {e}"
                    )));
                }
            }
            loop {
                let (ev, used) = match codec.decode(rx.unread()) {
                    Ok(Some(x)) => x,
                    Ok(None) => break,
                    Err(e) => {
                        return Err(RunError::Protocol(format!(
                            "connection {k} ({role:?}): {e}"
                        )))
                    }
                };
                let from = From {
                    key: k,
                    role: *role,
                    codec: &mut *codec,
                    tx: tx.buf(),
                    awaiting_ack: &mut *awaiting_ack,
                };
                wrote |= self.book.on_event(from, ev, now_ns);
                rx.consume(used);
            }
            wrote |= codec.take_output(tx.buf());
            budget = budget.saturating_sub(n);
            if budget == 0 {
                break;
            }
        }
        let more = peer.readable;
        if wrote {
            self.mark_dirty(k);
        }
        Ok(more)
    }

    /// The server dropped peer `k`: count it, stop polling it.
    fn lost_peer(&mut self, k: usize, why: &str) {
        let Some(peer) = self.peers.get_mut(k) else {
            return;
        };
        if peer.state == State::Closed {
            return;
        }
        if peer.state == State::Connecting {
            self.connecting -= 1;
        }
        if peer.awaiting_ack {
            peer.awaiting_ack = false;
            self.book.acks_pending -= 1;
        }
        peer.state = State::Closed;
        peer.readable = false;
        peer.writable = false;
        let role = peer.role;
        let _ = self.poll.registry().deregister(&mut peer.stream);
        self.book.t.disconnects += 1;
        self.book
            .log(format_args!("connection {k} ({role:?}): {why}"));
    }

    fn mark_dirty(&mut self, k: usize) {
        if let Some(p) = self.peers.get_mut(k) {
            if !p.in_dirty {
                p.in_dirty = true;
                self.dirty.push(k);
            }
        }
    }

    /// Completes connects and writes queued output of dirty peers.
    fn flush_dirty(&mut self) -> Result<(), RunError> {
        let dirty = std::mem::take(&mut self.dirty);
        for &k in &dirty {
            let Some(peer) = self.peers.get_mut(k) else {
                continue;
            };
            peer.in_dirty = false;
            if peer.state == State::Connecting && peer.writable {
                match connect_done(&peer.stream) {
                    Ok(true) => self.on_connected(k)?,
                    Ok(false) => {
                        peer.writable = false;
                        continue;
                    }
                    Err(e) => {
                        return Err(RunError::Io(format!("connect {}", self.p.addr), e));
                    }
                }
            }
            self.flush_peer(k);
        }
        // Keep the allocation; entries pushed meanwhile stay queued.
        let mut dirty = dirty;
        dirty.clear();
        dirty.append(&mut self.dirty);
        self.dirty = dirty;
        Ok(())
    }

    /// Writes what peer `k` has queued; `true` when its buffer emptied.
    fn flush_peer(&mut self, k: usize) -> bool {
        let Some(peer) = self.peers.get_mut(k) else {
            return false;
        };
        if peer.state != State::Open || !peer.writable || peer.tx.pending() == 0 {
            return peer.tx.pending() == 0;
        }
        match peer.tx.flush(&mut peer.stream) {
            Ok(true) => true,
            Ok(false) => {
                peer.writable = false;
                false
            }
            Err(e) => {
                self.lost_peer(k, &format!("write: {e}"));
                false
            }
        }
    }

    /// Lets every producer encode what flow control allows.
    fn produce(&mut self) {
        self.produce_again = false;
        if self.phase != Phase::Run {
            return;
        }
        let now_ns = self.clock.elapsed().as_nanos() as u64;
        match self.p.scenario {
            Scenario::Fanout | Scenario::Fanin | Scenario::Large => {
                for i in 0..self.book.pubs.len() {
                    self.publish_closed(i, now_ns);
                }
            }
            Scenario::Latency => {
                for i in 0..self.book.pubs.len() {
                    self.publish_open(i, now_ns);
                }
            }
            Scenario::Calls | Scenario::Goals => {
                for c in 0..self.book.callers.len() {
                    self.call(c, now_ns);
                }
            }
            Scenario::Idle => {}
        }
    }

    /// Closed loop: stay within `window` of the slowest subscriber.
    fn publish_closed(&mut self, i: usize, now_ns: u64) {
        let k = self.book.pubs[i].key;
        let window = self.p.window as u64;
        let mut budget = PRODUCE_BUDGET;
        loop {
            let Some(peer) = self.peers.get_mut(k) else {
                return;
            };
            if peer.state != State::Open {
                return;
            }
            if peer.tx.pending() >= TX_HIGH && !self.flush_peer(k) {
                // Resumed by the writable event.
                return;
            }
            let st = &mut self.book.pubs[i];
            if st.sent - st.floor >= window {
                let floor = self.book.floor(i);
                let st = &mut self.book.pubs[i];
                st.floor = floor;
                if st.sent - floor >= window {
                    if !self.shared.multi() {
                        // Resumed by a delivery.
                        break;
                    }
                    // Resumed by a delivery here, or a wake-up from the
                    // worker whose subscriber advanced: ask for it, then
                    // look again (see `workers` on lost wake-ups).
                    self.shared.park(self.w);
                    let floor = self.book.floor(i);
                    let st = &mut self.book.pubs[i];
                    st.floor = floor;
                    if st.sent - floor >= window {
                        break;
                    }
                }
            }
            let seq = self.book.pubs[i].sent;
            budget = budget.saturating_sub(self.encode_publish(k, i, seq, now_ns));
            self.book.pubs[i].sent += 1;
            self.shared.set_sent(i, seq + 1);
            if budget == 0 {
                self.produce_again = true;
                break;
            }
        }
        self.flush_peer(k);
    }

    /// Open loop: send every message whose intended time has come, stamped
    /// with that time.
    fn publish_open(&mut self, i: usize, now_ns: u64) {
        let k = self.book.pubs[i].key;
        let rate = u128::from(self.p.rate);
        let elapsed = u128::from(now_ns.saturating_sub(self.run_start_ns));
        // Message n is due at run_start + n / rate.
        let due = (elapsed * rate / 1_000_000_000) as u64 + 1;
        let mut budget = PRODUCE_BUDGET;
        loop {
            let seq = self.book.pubs[i].sent;
            if seq >= due {
                break;
            }
            let Some(peer) = self.peers.get_mut(k) else {
                return;
            };
            if peer.state != State::Open {
                return;
            }
            if peer.tx.pending() >= TX_HIGH && !self.flush_peer(k) {
                // Behind schedule because the socket is full: the backlog
                // keeps its intended times and goes out when writable.
                return;
            }
            let intended = self.run_start_ns + (u128::from(seq) * 1_000_000_000 / rate) as u64;
            if intended >= self.book.measure_from_ns {
                self.book.t.send_lag.record(now_ns.saturating_sub(intended));
            }
            budget = budget.saturating_sub(self.encode_publish(k, i, seq, intended));
            self.book.pubs[i].sent += 1;
            self.shared.set_sent(i, seq + 1);
            if budget == 0 {
                self.produce_again = true;
                break;
            }
        }
        self.flush_peer(k);
    }

    /// Queues publication `seq` of publisher `i` on peer `k`; returns bytes.
    fn encode_publish(&mut self, k: usize, i: usize, seq: u64, t_ns: u64) -> usize {
        let Some(peer) = self.peers.get_mut(k) else {
            return 0;
        };
        self.scratch.clear();
        self.book.payload.encode(
            &mut self.scratch,
            Stamp {
                src: i as u64,
                seq,
                t_ns,
            },
        );
        let before = peer.tx.pending();
        peer.codec
            .publish(peer.tx.buf(), &self.book.topic, &self.scratch);
        peer.tx.pending() - before
    }

    /// Keeps `inflight` calls (goals) outstanding for caller `c`.
    fn call(&mut self, c: usize, now_ns: u64) {
        let k = self.book.callers[c].key;
        let Some(peer) = self.peers.get_mut(k) else {
            return;
        };
        if peer.state != State::Open {
            return;
        }
        let goals = self.p.scenario == Scenario::Goals;
        let caller = &mut self.book.callers[c];
        while caller.outstanding.len() < self.p.inflight && peer.tx.pending() < TX_HIGH {
            let id = caller.next_id;
            caller.next_id += 1;
            self.scratch.clear();
            self.book.payload.encode(
                &mut self.scratch,
                Stamp {
                    src: c as u64,
                    seq: id,
                    t_ns: now_ns,
                },
            );
            if goals {
                peer.codec
                    .send_goal(peer.tx.buf(), &self.book.action, id, &self.scratch);
            } else {
                peer.codec
                    .call(peer.tx.buf(), &self.book.service, id, &self.scratch);
            }
            caller.outstanding.push_back(Pending {
                id,
                sent_ns: now_ns,
                next_feedback: 0,
                feedback: 0,
            });
            self.book.t.calls_sent += 1;
        }
        self.flush_peer(k);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rosgate::Rosgate;
    use crate::scenario::{Overrides, RunSettings};

    const F: u64 = 3;

    fn goals_book() -> Book {
        let o = Overrides {
            callers: Some(2),
            feedback: Some(F as usize),
            ..Overrides::default()
        };
        let s = Duration::from_secs(1);
        let p = Params::resolve(
            Scenario::Goals,
            ([127, 0, 0, 1], 9).into(),
            o,
            RunSettings {
                duration: s,
                warmup: s,
                drain: s,
                setup_timeout: s,
                server_pid: None,
                topic: "/t".into(),
                service: "/s".into(),
                action: "/a".into(),
            },
        )
        .expect("valid params");
        let mut book = Book::new(&p, Arc::new(Shared::new(1, p.pubs, p.subs)));
        book.measure_from_ns = 0;
        book
    }

    /// Decodes `line` as received on a peer in `role`; returns its output.
    fn receive(book: &mut Book, role: Role, line: &[u8]) -> Vec<u8> {
        let mut codec = Rosgate::new(1 << 20);
        let mut tx = Vec::new();
        let mut awaiting_ack = false;
        let (ev, used) = codec
            .decode(line)
            .expect("decodes")
            .expect("one whole line");
        assert_eq!(used, line.len());
        let from = From {
            key: 1,
            role,
            codec: &mut codec,
            tx: &mut tx,
            awaiting_ack: &mut awaiting_ack,
        };
        book.on_event(from, ev, 5_000);
        tx
    }

    /// Caller `c` sends goal `id`; returns what the action server answers
    /// (F feedback lines, then the result), with the gateway's id mapping
    /// undone, one line each.
    fn goal(book: &mut Book, c: usize, id: u64) -> Vec<Vec<u8>> {
        let mut args = Vec::new();
        let st = Stamp {
            src: c as u64,
            seq: id,
            t_ns: 1_000,
        };
        book.payload.encode(&mut args, st);
        book.callers[c].outstanding.push_back(Pending {
            id,
            sent_ns: 1_000,
            next_feedback: 0,
            feedback: 0,
        });
        book.t.calls_sent += 1;
        let mut line = br#"{"op":"send_action_goal","id":"rg-9","action":"/a","action_type":"rosgate_load/Bench","args":"#.to_vec();
        line.extend_from_slice(&args);
        line.extend_from_slice(b",\"feedback\":true}\n");
        let out = receive(book, Role::ActionServer, &line);
        let out = String::from_utf8(out).expect("utf-8");
        out.lines()
            .map(|l| format!("{}\n", l.replacen("\"rg-9\"", &id.to_string(), 1)).into_bytes())
            .collect()
    }

    fn clean(t: &Tally) -> bool {
        t.out_of_order == 0
            && t.corrupt == 0
            && t.misrouted == 0
            && t.calls_failed == 0
            && t.feedback_lost == 0
    }

    #[test]
    fn a_goal_gets_its_feedback_then_its_result() {
        let mut book = goals_book();
        let lines = goal(&mut book, 1, 7);
        assert_eq!(lines.len(), F as usize + 1);
        for l in &lines {
            receive(&mut book, Role::Caller(1), l);
        }
        let t = &book.t;
        assert!(clean(t), "{t:?}");
        assert_eq!((t.served, t.good, t.calls_answered), (1, 1, 1));
        assert_eq!((t.feedback_delivered, t.feedback_good), (F, F));
        assert_eq!(t.latency.count(), 1);
        assert!(book.callers[1].outstanding.is_empty());
    }

    #[test]
    fn lost_repeated_and_misrouted_feedback_fail_the_run() {
        // One feedback missing: skipped (out of order) and short.
        let mut book = goals_book();
        let lines = goal(&mut book, 0, 1);
        for (i, l) in lines.iter().enumerate() {
            if i != 1 {
                receive(&mut book, Role::Caller(0), l);
            }
        }
        assert_eq!((book.t.out_of_order, book.t.feedback_lost), (1, 1));

        // One feedback twice.
        let mut book = goals_book();
        let lines = goal(&mut book, 0, 1);
        receive(&mut book, Role::Caller(0), &lines[0]);
        for l in &lines {
            receive(&mut book, Role::Caller(0), l);
        }
        assert_eq!((book.t.out_of_order, book.t.feedback_lost), (1, 0));
        assert_eq!(book.t.feedback_good, F);

        // Feedback of caller 0's goal at caller 1, which has a goal with
        // the same id: the stamp gives it away.
        let mut book = goals_book();
        let lines = goal(&mut book, 0, 4);
        let _ = goal(&mut book, 1, 4);
        receive(&mut book, Role::Caller(1), &lines[0]);
        assert_eq!(book.t.misrouted, 1);

        // Feedback after the result: the goal is no longer in flight.
        let mut book = goals_book();
        let lines = goal(&mut book, 0, 2);
        for l in lines.iter().skip(1) {
            receive(&mut book, Role::Caller(0), l);
        }
        receive(&mut book, Role::Caller(0), &lines[0]);
        assert_eq!(book.t.misrouted, 1);
        assert_eq!(book.t.feedback_lost, 1);

        // A second result for the same goal.
        let mut book = goals_book();
        let lines = goal(&mut book, 0, 3);
        for l in &lines {
            receive(&mut book, Role::Caller(0), l);
        }
        receive(&mut book, Role::Caller(0), &lines[F as usize]);
        assert_eq!(book.t.misrouted, 1);
    }

    #[test]
    fn failed_and_damaged_goals_fail_the_run() {
        let mut book = goals_book();
        let _ = goal(&mut book, 0, 5);
        let fail = br#"{"op":"action_result","id":5,"action":"/a","values":"no server for action /a","status":0,"result":false}
"#;
        receive(&mut book, Role::Caller(0), fail);
        assert_eq!((book.t.calls_failed, book.t.calls_answered), (1, 1));

        let mut book = goals_book();
        let lines = goal(&mut book, 0, 6);
        let mut bad = lines[0].clone();
        let i = bad.len() - 5;
        bad[i] = if bad[i] == b'A' { b'B' } else { b'A' };
        receive(&mut book, Role::Caller(0), &bad);
        assert_eq!(book.t.corrupt, 1);
    }

    /// A minimal rosbridge-style line broker for the multi-threaded runs
    /// below: acknowledges subscribes, answers the stats call, and writes
    /// every publish line to every subscriber. Blocking, one thread per
    /// connection; it lives until the test process ends.
    fn line_broker() -> std::net::SocketAddr {
        use std::io::{BufRead, BufReader, Write};
        use std::net::{TcpListener, TcpStream};
        use std::sync::Mutex;
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let subs: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { return };
                let subs = Arc::clone(&subs);
                std::thread::spawn(move || {
                    let mut out = conn.try_clone().expect("clone");
                    for line in BufReader::new(conn).lines() {
                        let Ok(line) = line else { return };
                        if line.contains("\"op\":\"subscribe\"") {
                            let id = line
                                .split("\"id\":\"")
                                .nth(1)
                                .and_then(|r| r.split('"').next());
                            let ack = format!(
                                "{{\"op\":\"status\",\"level\":\"info\",\"msg\":\"ok\",\"id\":\"{}\"}}\n",
                                id.unwrap_or("")
                            );
                            let mut list = subs.lock().expect("lock");
                            let _ = out.write_all(ack.as_bytes());
                            list.push(out.try_clone().expect("clone"));
                        } else if line.contains("/rosgate/stats") {
                            let _ = out.write_all(
                                b"{\"op\":\"service_response\",\"service\":\"/rosgate/stats\",\"id\":\"stats\",\
                                  \"values\":{\"connections_open\":0,\"published\":0,\"delivered\":0,\"dropped\":0},\
                                  \"result\":true}\n",
                            );
                        } else if line.contains("\"op\":\"publish\"") {
                            let mut list = subs.lock().expect("lock");
                            for s in list.iter_mut() {
                                let _ = s.write_all(line.as_bytes());
                                let _ = s.write_all(b"\n");
                            }
                        }
                    }
                });
            }
        });
        addr
    }

    fn threaded(
        scenario: Scenario,
        pubs: usize,
        subs: usize,
        addr: std::net::SocketAddr,
    ) -> Outcome {
        let o = Overrides {
            pubs: Some(pubs),
            subs: Some(subs),
            window: Some(50),
            ..Overrides::default()
        };
        let mut p = Params::resolve(
            scenario,
            addr,
            o,
            RunSettings {
                duration: Duration::from_millis(300),
                warmup: Duration::from_millis(50),
                drain: Duration::from_secs(5),
                setup_timeout: Duration::from_secs(5),
                server_pid: None,
                topic: "/t".into(),
                service: "/s".into(),
                action: "/a".into(),
            },
        )
        .expect("valid params");
        p.threads = 2;
        run::<Rosgate>(p).expect("the run completes")
    }

    #[test]
    fn two_workers_keep_every_check_across_threads() {
        let addr = line_broker();
        // Fan-out: subscribers on both workers, the window against the
        // slowest of them; fan-in: publishers on both, woken across.
        for (scenario, pubs, subs) in [(Scenario::Fanout, 1, 4), (Scenario::Fanin, 4, 1)] {
            let o = threaded(scenario, pubs, subs, addr);
            let t = &o.tally;
            assert!(o.clean(), "{scenario:?}: {t:?} expected {}", o.expected);
            assert!(o.drained, "{scenario:?}");
            assert!(
                o.expected > 0 && t.good == o.expected,
                "{scenario:?}: {} of {}",
                t.good,
                o.expected
            );
            assert!(o.measured_good > 0 && t.latency.count() > 0, "{scenario:?}");
            assert_eq!(o.tool_cores, tool_cores(2, &[]));
        }
    }
}
