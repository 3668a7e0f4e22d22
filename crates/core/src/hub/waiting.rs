//! Calls and goals that wait for a provider (ROS 2's `wait_for_service`):
//! a `call_service` or `send_action_goal` with `"wait": true` and no
//! provider waits, within its timeout, instead of failing at once; a
//! provider appearing releases the waiting requests of its name, in the
//! order they came.
//!
//! Invariants:
//! - a waiting request ends exactly once: released to a provider (then it
//!   is an ordinary call or goal), failed at its deadline, or forgotten
//!   with its caller;
//! - at most `--max-calls-per-conn` requests wait per caller; their ids and
//!   arguments count in the memory budget (`calls`).

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use slab::Slab;

use rosgate_wire::encode;
use rosgate_wire::Raw;

use super::answer::GoalFailure;
use super::services::{CallArgs, GoalOptions};
use super::Hub;
use crate::conn::ConnRef;
use crate::encoding::Encoding;
use crate::limits::{TIMER_SLOTS, TIMER_TICK_MS};
use crate::nodes::Domain;
use crate::registry::Provided;
use crate::timer::TimerWheel;

/// Bytes counted per waiting request beyond its id, name and arguments.
const WAITING_OVERHEAD: usize = 160;

/// A request waiting for a provider.
#[derive(Debug)]
struct WaitingCall {
    caller: ConnRef,
    domain: Domain,
    kind: Provided,
    name: Box<str>,
    id: Option<Box<[u8]>>,
    args: Box<str>,
    deadline: Instant,
    /// Goals: the caller's `action_type` and `feedback`.
    action_type: Option<Box<str>>,
    feedback: bool,
    /// Goals: the deadline the goal keeps once sent (its own `timeout`).
    goal_timeout: Option<f64>,
    /// Calls: how the caller asked for the answer.
    encoding: Encoding,
    /// Arrival order (slab keys are reused).
    seq: u64,
}

impl WaitingCall {
    fn bytes(&self) -> usize {
        WAITING_OVERHEAD
            + self.name.len()
            + self.args.len()
            + self.id.as_ref().map_or(0, |i| i.len())
            + self.action_type.as_ref().map_or(0, |t| t.len())
    }
}

/// See the module docs.
#[derive(Debug)]
pub(super) struct Waiting {
    entries: Slab<WaitingCall>,
    by_name: HashMap<(Domain, Provided, Box<str>), VecDeque<usize>>,
    by_caller: HashMap<ConnRef, Vec<usize>>,
    wheel: TimerWheel,
    bytes: usize,
    /// Requests parked so far (orders them).
    parked: u64,
}

impl Waiting {
    pub(super) fn new(now: Instant) -> Self {
        Waiting {
            entries: Slab::new(),
            by_name: HashMap::new(),
            by_caller: HashMap::new(),
            wheel: TimerWheel::new(now, Duration::from_millis(TIMER_TICK_MS), TIMER_SLOTS),
            bytes: 0,
            parked: 0,
        }
    }

    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }

    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(super) fn of(&self, caller: ConnRef) -> usize {
        self.by_caller.get(&caller).map_or(0, Vec::len)
    }

    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.wheel.next_deadline()
    }

    fn add(&mut self, mut w: WaitingCall) {
        self.parked += 1;
        w.seq = self.parked;
        let key = (w.domain, w.kind, w.name.clone());
        let (caller, deadline) = (w.caller, w.deadline);
        self.bytes += w.bytes();
        let k = self.entries.insert(w);
        self.by_name.entry(key).or_default().push_back(k);
        self.by_caller.entry(caller).or_default().push(k);
        self.wheel.insert(k as u64, deadline);
    }

    /// Takes entry `k` out of every index.
    fn take(&mut self, k: usize) -> Option<WaitingCall> {
        let w = self.entries.try_remove(k)?;
        self.bytes -= w.bytes();
        let key = (w.domain, w.kind, w.name.clone());
        if let Some(q) = self.by_name.get_mut(&key) {
            q.retain(|&x| x != k);
            if q.is_empty() {
                self.by_name.remove(&key);
            }
        }
        if let Some(v) = self.by_caller.get_mut(&w.caller) {
            v.retain(|&x| x != k);
            if v.is_empty() {
                self.by_caller.remove(&w.caller);
            }
        }
        Some(w)
    }
}

impl Hub {
    /// Parks a call (or goal) for `name` until a provider appears or its
    /// deadline; false (the caller fails it at once) when the caller has
    /// too many requests waiting.
    pub(super) fn wait_for_provider(
        &mut self,
        me: ConnRef,
        domain: Domain,
        name: &str,
        call: CallArgs<'_>,
        id: Option<&[u8]>,
        now: Instant,
    ) -> bool {
        let CallArgs {
            args,
            timeout,
            goal,
            encoding,
            ..
        } = call;
        let kind = match goal {
            Some(_) => Provided::Action,
            None => Provided::Service,
        };
        // Waiting requests count against the caller's call limit together
        // with its calls in flight (a waiting call becomes one of them).
        if self.waiting.of(me) + self.calls.in_flight(me) >= self.limits.max_calls_per_conn {
            return false;
        }
        let wait = match timeout {
            Some(secs) if secs.is_finite() && secs > 0.0 => {
                Duration::from_secs_f64(secs.min(self.limits.max_call_timeout.as_secs_f64()))
            }
            _ => self.limits.call_timeout,
        };
        self.waiting.add(WaitingCall {
            caller: me,
            domain,
            kind,
            name: name.into(),
            id: id.map(Box::from),
            args: args.map_or("{}", |a| a.get()).into(),
            deadline: now + wait,
            action_type: goal.and_then(|g| g.action_type).map(Box::from),
            feedback: goal.is_some_and(|g| g.feedback),
            goal_timeout: timeout,
            encoding,
            seq: 0,
        });
        self.counters.inc(crate::counters::Counter::CallsWaited);
        true
    }

    /// A provider of `name` appeared: its waiting requests go to it, in
    /// order, with what is left of their timeout (a goal keeps its own),
    /// under the name they waited for (not resolved again).
    pub(super) fn release_waiting(
        &mut self,
        domain: Domain,
        kind: Provided,
        name: &str,
        now: Instant,
    ) {
        let key = (domain, kind, Box::<str>::from(name));
        let Some(queue) = self.waiting.by_name.get(&key).cloned() else {
            return;
        };
        for k in queue {
            let Some(w) = self.waiting.take(k) else {
                continue;
            };
            if !self.live(w.caller) {
                continue;
            }
            let left = w
                .deadline
                .saturating_duration_since(now)
                .as_secs_f64()
                .max(0.001);
            let args = Some(Raw::from_valid_json(&w.args));
            match kind {
                Provided::Service => {
                    let call = CallArgs {
                        args,
                        timeout: Some(left),
                        encoding: w.encoding,
                        ..CallArgs::default()
                    };
                    self.call_resolved(w.caller, w.domain, &w.name, call, w.id.as_deref(), now)
                }
                Provided::Action => {
                    if let Some(id) = w.id.as_deref() {
                        let goal = CallArgs {
                            args,
                            timeout: w.goal_timeout,
                            wait: false,
                            encoding: Encoding::default(),
                            goal: Some(GoalOptions {
                                action_type: w.action_type.as_deref(),
                                feedback: w.feedback,
                            }),
                        };
                        self.send_goal_resolved(w.caller, w.domain, &w.name, goal, id, now)
                    }
                }
            }
        }
    }

    /// Fails the waiting requests whose deadline passed.
    pub(super) fn expire_waiting(&mut self, now: Instant) {
        let mut due = Vec::new();
        self.waiting.wheel.expire(now, |k| due.push(k));
        for k in due {
            // Slab keys are reused and a released or forgotten request
            // leaves its wheel entry behind: an entry whose deadline is
            // not yet due belongs to a newer request, which has its own.
            if self
                .waiting
                .entries
                .get(k as usize)
                .is_none_or(|w| w.deadline > now)
            {
                continue;
            }
            let Some(w) = self.waiting.take(k as usize) else {
                continue;
            };
            let mut name_json = Vec::with_capacity(w.name.len() + 2);
            encode::json_string(&mut name_json, &w.name);
            match w.kind {
                Provided::Service => {
                    self.counters
                        .inc(crate::counters::Counter::CallsFailedNoProvider);
                    let reason = format!("no provider for service {} appeared in time", w.name);
                    let id = w.id.as_deref();
                    self.send_service_failure(w.caller, None, &name_json, id, &reason, now);
                }
                Provided::Action => {
                    self.counters
                        .inc(crate::counters::Counter::GoalsFailedNoServer);
                    let reason = format!("no server for action {} appeared in time", w.name);
                    let id = w.id.as_deref().unwrap_or(b"null");
                    let failure = GoalFailure {
                        status: 0,
                        reason: &reason,
                    };
                    self.send_goal_failure(w.caller, None, &name_json, id, failure, now);
                }
            }
        }
    }

    /// Fails every waiting request, in the order they came (the gateway
    /// is shutting down: like a call in flight, a request waiting for a
    /// provider gets its one answer before its connection drains and
    /// closes).
    pub(super) fn fail_all_waiting(&mut self, now: Instant) {
        let mut keys: Vec<usize> = self.waiting.entries.iter().map(|(k, _)| k).collect();
        keys.sort_unstable_by_key(|&k| self.waiting.entries.get(k).map(|w| w.seq));
        for k in keys {
            let Some(w) = self.waiting.take(k) else {
                continue;
            };
            let mut name_json = Vec::with_capacity(w.name.len() + 2);
            encode::json_string(&mut name_json, &w.name);
            let why = super::CallFailure::Shutdown;
            match w.kind {
                Provided::Service => {
                    self.counters
                        .inc(crate::counters::Counter::CallsFailedShutdown);
                    let reason = self.failure_text(why, &w.name);
                    let id = w.id.as_deref();
                    self.send_service_failure(w.caller, None, &name_json, id, &reason, now);
                }
                Provided::Action => {
                    self.counters
                        .inc(crate::counters::Counter::GoalsFailedShutdown);
                    let reason = self.goal_failure_text(why, &w.name);
                    let id = w.id.as_deref().unwrap_or(b"null");
                    let failure = GoalFailure {
                        status: 6,
                        reason: &reason,
                    };
                    self.send_goal_failure(w.caller, None, &name_json, id, failure, now);
                }
            }
        }
    }

    /// Forgets the waiting requests of `who` (it left).
    pub(super) fn drop_waiting(&mut self, who: ConnRef) {
        for k in self
            .waiting
            .by_caller
            .get(&who)
            .cloned()
            .unwrap_or_default()
        {
            self.waiting.take(k);
        }
    }
}
