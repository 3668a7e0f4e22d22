//! Actions (`docs/protocol.md`, "Actions"), modelled from the protocol
//! page rather than from `hub/actions.rs`: servers advertise and
//! unadvertise actions, callers send goals (with or without feedback, with
//! a `timeout`, waiting for a server with `"wait": true`, with an id still
//! in flight), cancel them (by op, or by calling
//! `<action>/_action/cancel_goal`), servers send feedback and results
//! (some naming goals that ended, belong to someone else, or never were),
//! and goals end by the gateway: no server, server gone or unadvertised,
//! a deadline (`--goal-timeout-ms` or the goal's own), a limit, the
//! shutdown.
//!
//! What the model predicts, per goal ([`GoalModel`]): the goal line its
//! server receives (action, type, args, feedback, a fresh `rg-<n>` id), in
//! order with the calls forwarded to it; every feedback line its caller
//! receives (topic-like data in the caller's queue: shed, if at all, as the
//! accounting identifies, so it is a [`TopicFrame`]); the one
//! `action_result` its caller receives under its own id (the server's, or a
//! failure with `status` 0 or 6); the cancel its server receives (its
//! caller's cancel, a timeout, the caller leaving); and what becomes of an
//! orphan (a goal whose caller left or timed out): its feedback and result
//! are dropped and counted, and it is forgotten after `ORPHAN_TIMEOUT`.
//!
//! Requests that wait for a provider (`"wait": true`, calls and goals) are
//! here too ([`WaitModel`]): released in arrival order to the provider that
//! appears, failed at their deadline, forgotten with their caller.
//!
//! This file is the behaviour (drawing goal requests, applying them,
//! reading what callers and servers receive); the data it keeps in the
//! model ([`GoalModel`], [`WaitModel`], [`GoalResp`], [`GoalOp`]) is in
//! `model/goals.rs`.

use std::rc::Rc;
use std::time::Duration;

use serde_json::Value;

use rosgate_core::calls::ORPHAN_TIMEOUT;
use rosgate_core::counters::{Counter, ErrorCode};
use rosgate_core::ConnRef;

use super::effects::ResolvedCall;
use super::requests::{
    assemble, blank_cr_lf, canon, json_string, jstr, parse_id, push_id, CallLine, Form, Members,
    FORGED_IDS, TIMEOUTS,
};
use super::Sim;
use crate::actions::{GoalReq, ACTIONS};
use crate::model::encodings::EncM;
use crate::model::goals::{
    timeout_secs, Fate, GoalModel, GoalOp, GoalResp, GoalSend, WaitModel, CANCEL_GOAL_SUFFIX,
};
use crate::model::requests::Effect;
use crate::model::{json_name, tick_ceil, Fwd, Id, Resp, ServiceModel, TopicFrame};
use crate::violation::Violation;
use crate::ws;

/// The `type` of an action advertisement, and a goal's `action_type`.
const ACTION_TYPE: &str = "example_interfaces/action/Fibonacci";

/// `status` field texts of a server's result.
const GOAL_STATUSES: [&str; 6] = ["4", "5", "6", "2", "\"done\"", "null"];

/// `result` field texts of a server's result.
const GOAL_RESULTS: [&str; 3] = ["true", "false", "1"];

/// Whether `raw` is exactly the spelling of a gateway id, `"rg-<n>"`
/// (no sign, no leading zero, fits 64 bits): the protocol's provider-side
/// ids; anything else can never name a goal.
fn is_gateway_id(raw: &str) -> bool {
    let Some(digits) = raw.strip_prefix("\"rg-").and_then(|r| r.strip_suffix('"')) else {
        return false;
    };
    !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits.len() == 1 || !digits.starts_with('0'))
        && digits.parse::<u64>().is_ok()
}

impl Sim {
    // ----- requests -------------------------------------------------------------------

    /// The line of [`crate::Req::Goal`] `g` and its effect.
    pub(crate) fn goal_request(&mut self, slot: usize, f: Form, g: GoalReq) -> (Vec<u8>, Effect) {
        let GoalReq {
            op,
            action,
            pick,
            payload,
            id,
        } = g;
        let esc = f.style & 4 != 0;
        let name = ACTIONS[action as usize % ACTIONS.len()];
        match op % 8 {
            0 | 1 => {
                let adv = op % 8 == 0;
                let id = self.fresh_id(slot, id);
                let op = if adv {
                    "advertise_action"
                } else {
                    "unadvertise_action"
                };
                let mut m: Members<'_> = vec![("op", json_string(op)), ("action", jstr(name, esc))];
                let ty = if adv && !f.lean { ACTION_TYPE } else { "" };
                if !ty.is_empty() {
                    m.push(("type", jstr(ty, esc)));
                }
                push_id(&mut m, id.as_ref());
                let effect = if adv {
                    GoalOp::Advertise {
                        name: name.into(),
                        ty,
                        id,
                    }
                } else {
                    GoalOp::Unadvertise {
                        name: name.into(),
                        id,
                    }
                };
                (assemble(&m, f.style, f.spacing), Effect::Goal(effect))
            }
            2 | 7 => self.send_goal_request(slot, f, name, g),
            3 => {
                let id = self.cancel_id(slot, pick, id);
                let Some(id) = id else {
                    return missing_id("cancel_action_goal", name, f);
                };
                let m: Members<'_> = vec![
                    ("op", json_string("cancel_action_goal")),
                    ("action", jstr(name, esc)),
                    ("id", id.raw.clone()),
                ];
                (
                    assemble(&m, f.style, f.spacing),
                    Effect::Goal(GoalOp::Cancel { id }),
                )
            }
            4 | 5 => {
                let feedback = op % 8 == 4;
                let raw = self.goal_reply_id(slot, pick);
                let id = parse_id(raw);
                let values = self.payload(payload >> 2, f.spacing);
                let mut m: Members<'_> = vec![
                    (
                        "op",
                        json_string(if feedback {
                            "action_feedback"
                        } else {
                            "action_result"
                        }),
                    ),
                    ("action", jstr(name, esc)),
                    ("id", id.raw.clone()),
                ];
                if feedback {
                    m.push(("values", values.clone()));
                    let effect = GoalOp::Feedback {
                        id,
                        values: blank_cr_lf(&values),
                    };
                    return (assemble(&m, f.style, f.spacing), Effect::Goal(effect));
                }
                let status = GOAL_STATUSES[(pick as usize / 8) % GOAL_STATUSES.len()];
                let result = GOAL_RESULTS[payload as usize % GOAL_RESULTS.len()];
                let with_values = payload & 3 != 1;
                if with_values {
                    m.push(("values", values.clone()));
                }
                m.push(("status", status.to_string()));
                m.push(("result", result.to_string()));
                let effect = GoalOp::Result {
                    id,
                    values: with_values.then(|| blank_cr_lf(&values)),
                    status,
                    result,
                };
                (assemble(&m, f.style, f.spacing), Effect::Goal(effect))
            }
            _ => {
                // ROS 2's cancel service of the action (args ignored).
                let service = format!("{name}{CANCEL_GOAL_SUFFIX}");
                let call = CallLine {
                    name: &service,
                    node: None,
                    timeout: 0,
                    args: payload,
                    id,
                    wait: false,
                };
                self.call_request(slot, f, call)
            }
        }
    }

    /// `send_action_goal` of `name` (`g.op % 8` 2); with `g.op % 8` 7,
    /// under the id of a goal of this caller still in flight (when it has
    /// one).
    fn send_goal_request(
        &mut self,
        slot: usize,
        f: Form,
        name: &'static str,
        g: GoalReq,
    ) -> (Vec<u8>, Effect) {
        let GoalReq {
            pick, payload, id, ..
        } = g;
        let dup = g.op % 8 == 7;
        let esc = f.style & 4 != 0;
        let me = self.model.client(slot).conn;
        let alive: Vec<Id> = self
            .model
            .goals
            .iter()
            .filter(|g| g.caller == me && g.fate == Fate::Alive)
            .map(|g| g.id.clone())
            .collect();
        let id = match alive.get(pick as usize % alive.len().max(1)) {
            Some(i) if dup => Some(i.clone()),
            _ => self.fresh_id(slot, id),
        };
        let Some(id) = id else {
            return missing_id("send_action_goal", name, f);
        };
        let feedback = payload & 1 != 0;
        // Some runs wait for nothing (see `Sim::no_waiting`).
        let wait = payload & 6 == 6 && !self.no_waiting();
        let timeout = TIMEOUTS[(payload >> 3) as usize % TIMEOUTS.len()];
        let args_raw = self.payload(payload >> 7, f.spacing);
        let mut m: Members<'_> = vec![
            ("op", json_string("send_action_goal")),
            ("id", id.raw.clone()),
            ("action", jstr(name, esc)),
        ];
        let (action_type, args_text) = if f.lean {
            (None, "{}".to_string())
        } else {
            m.push(("action_type", jstr(ACTION_TYPE, esc)));
            m.push(("args", args_raw.clone()));
            (Some(ACTION_TYPE), blank_cr_lf(&args_raw))
        };
        if feedback || payload & 2 != 0 {
            m.push(("feedback", feedback.to_string()));
        }
        if let Some(t) = timeout {
            m.push(("timeout", t.to_string()));
        }
        if wait {
            m.push(("wait", "true".into()));
        }
        let effect = GoalOp::Send {
            name: name.into(),
            action_type,
            args_text,
            feedback,
            timeout,
            wait,
            id,
        };
        (assemble(&m, f.style, f.spacing), Effect::Goal(effect))
    }

    /// The id a `cancel_action_goal` names, by `pick % 4`: 0-1 a goal of
    /// this caller in flight (else any it sent), 2 any goal it ever sent,
    /// 3 a fresh one; `None` when `id` asks for none.
    fn cancel_id(&mut self, slot: usize, pick: u8, id: u8) -> Option<Id> {
        if id == 0 {
            return None;
        }
        let me = self.model.client(slot).conn;
        let mine: Vec<&GoalModel> = self.model.goals.iter().filter(|g| g.caller == me).collect();
        let alive: Vec<&&GoalModel> = mine.iter().filter(|g| g.fate == Fate::Alive).collect();
        let k = pick as usize;
        let chosen = match pick % 4 {
            0 | 1 if !alive.is_empty() => Some(alive[k % alive.len()].id.clone()),
            0..=2 if !mine.is_empty() => Some(mine[k % mine.len()].id.clone()),
            _ => None,
        };
        chosen.or_else(|| self.fresh_id(slot, id))
    }

    /// The gateway id a server's feedback or result names, by `pick % 8`:
    /// 0-4 a goal it was sent (one in flight if it has any), 5 any goal it
    /// was sent, 6 a goal sent to another server, 7 a forged id or a call's.
    fn goal_reply_id(&self, slot: usize, pick: u8) -> String {
        let c = self.model.client(slot);
        let me = c.conn;
        let own = &c.learned_goals;
        let k = pick as usize;
        let forged = || FORGED_IDS[k % FORGED_IDS.len()].to_string();
        let live = |raw: &String| {
            matches!(self.model.rg_map.get(raw), Some(Fwd::Goal(g))
                if self.model.goals[*g].in_table() && self.model.goals[*g].server == me)
        };
        match pick % 8 {
            0..=4 => {
                let pool: Vec<&String> = own.iter().filter(|r| live(r)).collect();
                match (pool.is_empty(), own.is_empty()) {
                    (false, _) => pool[k % pool.len()].clone(),
                    (true, false) => own[k % own.len()].clone(),
                    _ => forged(),
                }
            }
            5 if !own.is_empty() => own[k % own.len()].clone(),
            6 => {
                let others: Vec<&String> = self
                    .model
                    .all_learned_goals
                    .iter()
                    .filter(|r| !own.contains(r))
                    .collect();
                if others.is_empty() {
                    forged()
                } else {
                    others[k % others.len()].clone()
                }
            }
            _ if pick % 16 == 7 && !c.learned.is_empty() => c.learned[k % c.learned.len()].clone(),
            _ => forged(),
        }
    }

    // ----- effects --------------------------------------------------------------------

    /// Applies a goal request the hub is about to handle.
    pub(crate) fn apply_goal(&mut self, slot: usize, op: GoalOp) -> Result<(), Violation> {
        match op {
            GoalOp::Advertise { name, ty, id } => {
                if let Some((uid, name)) = self.resolved(slot, &name, None, id.as_ref()) {
                    self.advertise_action(slot, name, uid, ty, id.as_ref());
                }
            }
            GoalOp::Unadvertise { name, id } => {
                if let Some((_, name)) = self.resolved(slot, &name, None, id.as_ref()) {
                    self.unadvertise_action(slot, name, id.as_ref());
                }
            }
            GoalOp::Send {
                name,
                action_type,
                args_text,
                feedback,
                timeout,
                wait,
                id,
            } => {
                if let Some((_, name)) = self.resolved(slot, &name, None, Some(&id)) {
                    let domain = self.model.client(slot).domain;
                    let g = GoalSend {
                        name,
                        action_type,
                        args_text,
                        feedback,
                        timeout,
                        wait,
                        id: Some(id),
                    };
                    self.send_goal(slot, domain, g);
                }
            }
            GoalOp::Cancel { id } => self.cancel_goal(slot, id),
            GoalOp::Feedback { id, values } => self.goal_feedback(slot, id, &values),
            GoalOp::Result {
                id,
                values,
                status,
                result,
            } => self.goal_result(slot, id, values, status, result),
        }
        Ok(())
    }

    /// `advertise_action` of `name` (resolved) for node `uid`: refused past
    /// the per-connection limit; a displaced server is told; waiting goals
    /// are released to it.
    fn advertise_action(
        &mut self,
        slot: usize,
        name: String,
        uid: Option<u64>,
        ty: &'static str,
        id: Option<&Id>,
    ) {
        let me = self.model.client(slot).conn;
        let domain = self.model.client(slot).domain;
        let key = (domain, name);
        let provider = self.model.actions.get(&key).map(|s| s.provider);
        let count = self
            .model
            .actions
            .values()
            .filter(|s| s.provider == me)
            .count();
        if provider != Some(me) && count >= self.limits.max_actions_per_conn {
            self.counts.registrations_refused += 1;
            self.count_error(ErrorCode::TooManyRegistrations);
            return self.model.expect_status(slot, id, true);
        }
        if let Some(old) = provider.filter(|&o| o != me) {
            let s = self.model.slot_of(old).expect("servers are live");
            self.model.expect_status(s, None, false);
            self.counts.actions_replaced += 1;
        }
        let name = key.1.clone();
        self.model.actions.insert(
            key,
            ServiceModel {
                provider: me,
                node: uid,
                ty,
            },
        );
        self.model.expect_status(slot, id, false);
        self.release_waiting(domain, true, &name);
    }

    /// `unadvertise_action`: only from its current server, whose goals of
    /// that action then fail (`status` 6) and whose orphans of it go.
    fn unadvertise_action(&mut self, slot: usize, name: String, id: Option<&Id>) {
        let me = self.model.client(slot).conn;
        let key = (self.model.client(slot).domain, name);
        if self.model.actions.get(&key).map(|s| s.provider) != Some(me) {
            return self.model.expect_status(slot, id, true);
        }
        self.model.actions.remove(&key);
        let name = key.1;
        let served: Vec<usize> = (0..self.model.goals.len())
            .filter(|&g| {
                let x = &self.model.goals[g];
                x.in_table() && x.server == me && x.action == name
            })
            .collect();
        for g in served {
            self.end_goal_by_gateway(g, 6, Counter::GoalsFailedServerGone, None);
        }
        self.model.expect_status(slot, id, false);
    }

    /// A goal sent (or released) from `slot` for `g.name` (resolved) in
    /// `domain`: refused at once (`status` 0: the caller's limit, an id in
    /// flight, no server, the server's limit), parked (waiting for a
    /// server), or forwarded with its deadline.
    pub(crate) fn send_goal(&mut self, slot: usize, domain: u8, g: GoalSend) {
        let me = self.model.client(slot).conn;
        let mine: Vec<&GoalModel> = self
            .model
            .goals
            .iter()
            .filter(|x| x.caller == me && x.fate == Fate::Alive)
            .collect();
        let gid = g.id.clone().expect("goals have ids");
        let dup = mine.iter().any(|x| x.id.raw == gid.raw);
        if mine.len() >= self.limits.max_goals_per_conn || dup {
            self.counts.goals_refused += 1;
            self.model.count(Counter::GoalsFailedRefused);
            return self.goal_fails_now(slot, &g, None);
        }
        let server = self
            .model
            .actions
            .get(&(domain, g.name.clone()))
            .map(|s| s.provider)
            .filter(|&p| {
                self.model
                    .slot_of(p)
                    .is_some_and(|s| self.model.client(s).is_open())
            });
        let Some(server) = server else {
            if g.wait {
                let waiting = self.model.waiting_of(me) + self.model.calls_in_flight(me);
                if waiting >= self.limits.max_calls_per_conn {
                    self.model.count(Counter::GoalsFailedRefused);
                    return self.goal_fails_now(slot, &g, None);
                }
                let secs = timeout_secs(g.timeout);
                self.park(slot, domain, true, g, secs);
                return;
            }
            self.model.count(Counter::GoalsFailedNoServer);
            self.counts.goals_no_server += 1;
            return self.goal_fails_now(slot, &g, None);
        };
        let serving = self
            .model
            .goals
            .iter()
            .filter(|x| x.server == server && x.in_table())
            .count();
        if serving >= self.limits.max_goals_per_server {
            self.counts.goals_refused += 1;
            self.model.count(Counter::GoalsFailedRefused);
            return self.goal_fails_now(slot, &g, None);
        }
        let due_tick = match timeout_secs(g.timeout) {
            Some(secs) => {
                let secs = secs.min(self.limits.max_call_timeout.as_secs_f64());
                Some(tick_ceil(self.offset + Duration::from_secs_f64(secs)))
            }
            None => self.limits.goal_timeout.map(|d| tick_ceil(self.offset + d)),
        };
        let k = self.model.goals.len();
        self.model.goals.push(GoalModel {
            caller: me,
            caller_slot: slot,
            id: gid.clone(),
            action: g.name,
            action_type: g.action_type.unwrap_or(""),
            args: serde_json::from_str(&g.args_text).expect("sim args are JSON"),
            feedback: g.feedback,
            server,
            due_tick,
            fate: Fate::Alive,
        });
        self.model.count(Counter::GoalsSent);
        self.counts.goals_sent += 1;
        let ss = self.model.slot_of(server).expect("servers are live");
        self.model
            .client_mut(ss)
            .exp
            .forwards
            .push_back(Fwd::Goal(k));
        self.set_goal_resp(slot, &gid.key, None, GoalResp::Pending(k));
    }

    /// The caller of a goal refused before it reached a server gets its
    /// `status` 0 failure at once.
    fn goal_fails_now(&mut self, slot: usize, g: &GoalSend, why: Option<&'static str>) {
        let r = GoalResp::Failure {
            action: g.name.clone(),
            status: 0,
            why,
        };
        let key = g.id.as_ref().map_or(String::new(), |i| i.key.clone());
        self.set_goal_resp(slot, &key, None, r);
    }

    /// Records what `slot` expects under goal id `key`: replaces the entry
    /// `was` (a pending or waiting goal) or adds one.
    pub(crate) fn set_goal_resp(
        &mut self,
        slot: usize,
        key: &str,
        was: Option<&GoalResp>,
        r: GoalResp,
    ) {
        let e = &mut self.model.client_mut(slot).exp.goal_results;
        let same = |x: &GoalResp| match (x, was) {
            (GoalResp::Pending(a), Some(GoalResp::Pending(b))) => a == b,
            (GoalResp::Waiting(a), Some(GoalResp::Waiting(b))) => a == b,
            _ => false,
        };
        match e.iter_mut().find(|(k, x)| k == key && same(x)) {
            Some(entry) => entry.1 = r,
            None => e.push((key.to_string(), r)),
        }
    }

    /// Ends goal `g` in the gateway (its server left or unadvertised, a
    /// deadline, the shutdown): an alive goal's caller gets a failure with
    /// `status` (counted under `counter`); an orphan just goes.
    pub(crate) fn end_goal_by_gateway(
        &mut self,
        g: usize,
        status: u64,
        counter: Counter,
        why: Option<&'static str>,
    ) {
        let fate = self.model.goals[g].fate;
        self.model.goals[g].fate = Fate::Ended;
        if fate != Fate::Alive {
            return;
        }
        self.model.count(counter);
        let goal = &self.model.goals[g];
        let (caller, cs, key, action) = (
            goal.caller,
            goal.caller_slot,
            goal.id.key.clone(),
            goal.action.clone(),
        );
        if self.model.clients[cs]
            .as_ref()
            .is_some_and(|c| c.conn == caller)
        {
            let r = GoalResp::Failure {
                action,
                status,
                why,
            };
            self.set_goal_resp(cs, &key, Some(&GoalResp::Pending(g)), r);
        }
    }

    /// `cancel_action_goal` of the caller's goal `id`: forwarded to its
    /// server; naming no goal of this caller in flight, an error status on
    /// TCP and nothing on WebSocket.
    fn cancel_goal(&mut self, slot: usize, id: Id) {
        let me = self.model.client(slot).conn;
        let goal = self
            .model
            .goals
            .iter()
            .position(|g| g.caller == me && g.fate == Fate::Alive && g.id.raw == id.raw);
        match goal {
            Some(g) => self.cancel_at_server(g),
            None if self.model.client(slot).rosbridge() => {}
            None => self.model.expect_status(slot, Some(&id), true),
        }
    }

    /// Goal `g`'s server, if open, is sent a cancel (counted as a cancel).
    fn cancel_at_server(&mut self, g: usize) {
        self.model.count(Counter::GoalCancels);
        self.cancel_to_server(g);
    }

    /// Goal `g`'s server, if open, receives a cancel.
    pub(crate) fn cancel_to_server(&mut self, g: usize) {
        let server = self.model.goals[g].server;
        if let Some(s) = self.model.slot_of(server) {
            if self.model.client(s).is_open() {
                self.model.client_mut(s).exp.cancels.push(g);
                self.counts.goal_cancels += 1;
            }
        }
    }

    /// The goal a server's feedback or result names: `Ok(goal)` when it is
    /// in the table and was sent to `me`; `Err(true)` when it names none
    /// (an id of no goal, or of an ended one); `Err(false)` when it names
    /// nothing a gateway id can name, or another server's goal.
    fn goal_named(&self, me: ConnRef, id: &Id) -> Result<usize, bool> {
        if !is_gateway_id(&id.raw) {
            return Err(false);
        }
        match self.model.rg_map.get(&id.raw) {
            Some(Fwd::Goal(g)) if self.model.goals[*g].in_table() => {
                if self.model.goals[*g].server == me {
                    Ok(*g)
                } else {
                    Err(false)
                }
            }
            _ => Err(true),
        }
    }

    /// A stale feedback, result or cancel: an error status with the id.
    fn stale_goal_message(&mut self, slot: usize, id: &Id) {
        self.model.count(Counter::ActionMessagesStale);
        self.counts.stale_goal_messages += 1;
        self.model.expect_status(slot, Some(id), true);
    }

    /// A server's feedback: to the goal's caller if it asked and still
    /// hears; late feedback is dropped silently, feedback naming another
    /// server's goal (or no gateway id) is an error.
    fn goal_feedback(&mut self, slot: usize, id: Id, values: &str) {
        let me = self.model.client(slot).conn;
        let g = match self.goal_named(me, &id) {
            Ok(g) => g,
            Err(true) => return self.model.count(Counter::FeedbackStale),
            Err(false) => return self.stale_goal_message(slot, &id),
        };
        let goal = &self.model.goals[g];
        if goal.fate != Fate::Alive || !goal.feedback {
            return self.model.count(Counter::FeedbackStale);
        }
        let (caller, cs) = (goal.caller, goal.caller_slot);
        self.model.count(Counter::FeedbackForwarded);
        let open = self.model.clients[cs]
            .as_ref()
            .is_some_and(|c| c.conn == caller && c.is_open());
        if !open {
            return;
        }
        let goal = &self.model.goals[g];
        let mut line = br#"{"op":"action_feedback","id":"#.to_vec();
        line.extend_from_slice(goal.id.raw.as_bytes());
        line.extend_from_slice(br#","action":"#);
        line.extend_from_slice(&json_name(&goal.action));
        line.extend_from_slice(br#","values":"#);
        line.extend_from_slice(values.as_bytes());
        line.push(b'}');
        self.counts.feedback_sent += 1;
        self.queue_line(cs, line, None);
    }

    /// Queues one topic-like line (a publish, goal feedback) to `slot` as
    /// its own shared frame, in its framing.
    pub(crate) fn queue_line(
        &mut self,
        slot: usize,
        line: Vec<u8>,
        topic: Option<crate::model::Bucket>,
    ) {
        self.publishes += 1;
        let n = self.publishes;
        let ws = self.model.client(slot).rosbridge();
        let wire: Rc<[u8]> = if ws {
            ws::server_text_frame(&line).into()
        } else {
            let mut tcp = line.clone();
            tcp.push(b'\n');
            tcp.into()
        };
        let f = TopicFrame {
            msg: n,
            line: line.into(),
            wire,
            ws,
            enc: EncM::default(),
            topic,
        };
        self.queue_topic(slot, f, true);
    }

    /// A server's result: the goal ends and its caller gets it as sent
    /// (an orphan's is dropped and counted); naming no goal of this server
    /// in the table, an error status.
    fn goal_result(
        &mut self,
        slot: usize,
        id: Id,
        values: Option<String>,
        status: &'static str,
        result: &'static str,
    ) {
        let me = self.model.client(slot).conn;
        let Ok(g) = self.goal_named(me, &id) else {
            return self.stale_goal_message(slot, &id);
        };
        let fate = self.model.goals[g].fate;
        self.model.goals[g].fate = Fate::Ended;
        if fate == Fate::Orphan {
            self.counts.orphan_results += 1;
            return self.model.count(Counter::GoalResultsOrphaned);
        }
        self.model.count(match status {
            "4" => Counter::GoalsSucceeded,
            "5" => Counter::GoalsCanceled,
            _ => Counter::GoalsAborted,
        });
        let goal = &self.model.goals[g];
        let (caller, cs, key, action) = (
            goal.caller,
            goal.caller_slot,
            goal.id.key.clone(),
            goal.action.clone(),
        );
        let parse = |t: &str| serde_json::from_str::<Value>(t).expect("sim JSON");
        let values = match values {
            Some(v) => Some(parse(&v)),
            None if result == "false" => None,
            None => Some(Value::Object(Default::default())),
        };
        if self.model.clients[cs]
            .as_ref()
            .is_some_and(|c| c.conn == caller)
        {
            let r = GoalResp::Result {
                action,
                values,
                status: parse(status),
                result: parse(result),
            };
            self.set_goal_resp(cs, &key, Some(&GoalResp::Pending(g)), r);
        }
    }

    /// A call to `<action>/_action/cancel_goal` that nobody provides: every
    /// goal of that action the caller has in flight is cancelled at its
    /// server, and the caller is answered with how many.
    pub(crate) fn cancel_goal_service(&mut self, slot: usize, name: &str) -> Resp {
        let action = name.strip_suffix(CANCEL_GOAL_SUFFIX).unwrap_or(name);
        let me = self.model.client(slot).conn;
        let goals: Vec<usize> = (0..self.model.goals.len())
            .filter(|&g| {
                let x = &self.model.goals[g];
                x.caller == me && x.fate == Fate::Alive && x.action == action
            })
            .collect();
        for &g in &goals {
            self.cancel_at_server(g);
        }
        self.counts.cancel_services += 1;
        let values = serde_json::json!({
            "return_code": 0,
            "goals_canceling": [],
            "canceled": goals.len(),
        });
        Resp::Builtin {
            service: name.to_string(),
            values,
        }
    }

    // ----- waiting for a provider ----------------------------------------------------

    /// Parks a call or goal of `slot` for `g.name` in `domain` until a
    /// provider appears or its timeout (the request's, else the call
    /// timeout) passes.
    pub(crate) fn park(
        &mut self,
        slot: usize,
        domain: u8,
        goal: bool,
        g: GoalSend,
        secs: Option<f64>,
    ) -> usize {
        let me = self.model.client(slot).conn;
        let wait = match secs {
            Some(secs) => {
                Duration::from_secs_f64(secs.min(self.limits.max_call_timeout.as_secs_f64()))
            }
            None => self.limits.call_timeout,
        };
        let deadline = self.offset + wait;
        let w = self.model.waiting.len();
        let key = g.id.as_ref().map(|i| i.key.clone());
        self.model.waiting.push(WaitModel {
            caller: me,
            caller_slot: slot,
            domain,
            goal,
            name: g.name,
            id: g.id,
            args_text: g.args_text,
            action_type: g.action_type,
            feedback: g.feedback,
            timeout: g.timeout,
            deadline,
            due_tick: tick_ceil(deadline),
            alive: true,
        });
        self.model.count(Counter::CallsWaited);
        self.counts.waited += 1;
        if let (true, Some(key)) = (goal, key) {
            self.set_goal_resp(slot, &key, None, GoalResp::Waiting(w));
        }
        w
    }

    /// A provider of `name` (an action server with `action`) appeared in
    /// `domain`: its waiting requests go to it in the order they came, a
    /// call with what is left of its timeout, a goal with its own.
    pub(crate) fn release_waiting(&mut self, domain: u8, action: bool, name: &str) {
        let due: Vec<usize> = (0..self.model.waiting.len())
            .filter(|&w| {
                let x = &self.model.waiting[w];
                x.alive && x.domain == domain && x.goal == action && x.name == name
            })
            .collect();
        for w in due {
            self.model.waiting[w].alive = false;
            let x = &self.model.waiting[w];
            let (caller, cs) = (x.caller, x.caller_slot);
            let open = self.model.clients[cs]
                .as_ref()
                .is_some_and(|c| c.conn == caller && c.is_open());
            if !open {
                continue;
            }
            self.counts.released += 1;
            let id = x.id.clone();
            if action {
                let key = id.as_ref().map_or(String::new(), |i| i.key.clone());
                let g = GoalSend {
                    name: x.name.clone(),
                    action_type: x.action_type,
                    args_text: x.args_text.clone(),
                    feedback: x.feedback,
                    timeout: x.timeout,
                    wait: false,
                    id,
                };
                // Its entry becomes whatever the goal becomes.
                let e = &mut self.model.client_mut(cs).exp.goal_results;
                e.retain(|(k, r)| !(k == &key && matches!(r, GoalResp::Waiting(v) if *v == w)));
                self.send_goal(cs, domain, g);
            } else {
                let left = x
                    .deadline
                    .saturating_sub(self.offset)
                    .as_secs_f64()
                    .max(0.001);
                let call = ResolvedCall {
                    name: x.name.clone(),
                    args_text: x.args_text.clone(),
                    secs: Some(left),
                    id,
                    wait: false,
                };
                self.take_waiting_resp(cs, w, call.id.as_ref());
                self.call_resolved(cs, domain, call);
            }
        }
    }

    /// Removes `slot`'s expectation for waiting call `w` (it is settled
    /// anew).
    fn take_waiting_resp(&mut self, slot: usize, w: usize, id: Option<&Id>) {
        let e = &mut self.model.client_mut(slot).exp;
        match id {
            Some(id) => {
                if matches!(e.responses.get(&id.key), Some(Resp::Waiting(v)) if *v == w) {
                    e.responses.remove(&id.key);
                }
            }
            None => {
                if let Some(i) = e
                    .anon_responses
                    .iter()
                    .position(|r| matches!(r, Resp::Waiting(v) if *v == w))
                {
                    e.anon_responses.remove(i);
                }
            }
        }
    }

    /// Fails the waiting requests whose deadline passed (at `tick_now`).
    pub(crate) fn expire_waiting(&mut self, tick_now: u64) {
        let due: Vec<usize> = (0..self.model.waiting.len())
            .filter(|&w| self.model.waiting[w].alive && self.model.waiting[w].due_tick <= tick_now)
            .collect();
        for w in due {
            self.model.waiting[w].alive = false;
            let x = &self.model.waiting[w];
            let (caller, cs, goal) = (x.caller, x.caller_slot, x.goal);
            let (name, id) = (x.name.clone(), x.id.clone());
            self.model.count(if goal {
                Counter::GoalsFailedNoServer
            } else {
                Counter::CallsFailedNoProvider
            });
            self.counts.wait_timeouts += 1;
            let x = (w, caller, cs, goal, name, id);
            self.waiting_failed(x, 0, Some("appeared in time"));
        }
    }

    /// Waiting request `w` (of `caller` in slot `cs`, a goal or a call,
    /// named `name` with request `id`) failed: its caller, if still open,
    /// is owed the failure (a goal's with `status`) in place of its wait.
    fn waiting_failed(
        &mut self,
        (w, caller, cs, goal, name, id): (usize, ConnRef, usize, bool, String, Option<Id>),
        status: u64,
        why: Option<&'static str>,
    ) {
        let open = self.model.clients[cs]
            .as_ref()
            .is_some_and(|c| c.conn == caller && c.is_open());
        if !open {
            return;
        }
        if goal {
            let id = id.expect("goals have ids");
            let r = GoalResp::Failure {
                action: name,
                status,
                why,
            };
            self.set_goal_resp(cs, &id.key, Some(&GoalResp::Waiting(w)), r);
        } else {
            let r = Resp::Failure { service: name, why };
            self.model.settle_waiting(cs, w, id.as_ref(), r);
        }
    }

    // ----- time and leaving -----------------------------------------------------------

    /// A shutdown: every goal in flight fails with `status` 6 and the
    /// shutdown's reason, orphans go, and every request still waiting for
    /// a provider fails too (as a call in flight would: its caller must
    /// not be left without an answer when the gateway goes).
    pub(crate) fn shutdown_goals(&mut self) {
        let why = Some(super::SHUTDOWN_REASON);
        for g in 0..self.model.goals.len() {
            if self.model.goals[g].in_table() {
                self.end_goal_by_gateway(g, 6, Counter::GoalsFailedShutdown, why);
            }
        }
        for w in 0..self.model.waiting.len() {
            let x = &mut self.model.waiting[w];
            if !x.alive {
                continue;
            }
            x.alive = false;
            let (caller, cs, goal, name, id) = (
                x.caller,
                x.caller_slot,
                x.goal,
                x.name.clone(),
                x.id.clone(),
            );
            if goal {
                self.model.count(Counter::GoalsFailedShutdown);
            } else {
                self.failed_shutdown += 1;
            }
            self.waiting_failed((w, caller, cs, goal, name, id), 6, why);
        }
    }

    /// Goals whose deadline passed at `tick_now`: an alive one fails with
    /// `status` 6, its server is told to cancel and it becomes an orphan
    /// until `ORPHAN_TIMEOUT`; an orphan is forgotten.
    pub(crate) fn expire_goals(&mut self, tick_now: u64) {
        let orphan_due = tick_ceil(self.offset + ORPHAN_TIMEOUT);
        for g in 0..self.model.goals.len() {
            let x = &self.model.goals[g];
            if !x.in_table() || x.due_tick.is_none_or(|t| t > tick_now) {
                continue;
            }
            if x.fate == Fate::Orphan {
                self.model.goals[g].fate = Fate::Ended;
                continue;
            }
            self.counts.goal_timeouts += 1;
            self.end_goal_by_gateway(g, 6, Counter::GoalsTimedOut, Some("timed out"));
            self.cancel_to_server(g);
            self.model.count(Counter::GoalsOrphaned);
            let x = &mut self.model.goals[g];
            x.fate = Fate::Orphan;
            x.due_tick = Some(orphan_due);
        }
    }

    /// What becomes of the goals and waiting requests of `slot`, which is
    /// being freed now: its goals become orphans (their servers are told
    /// to cancel; one it serves itself just goes), its waiting requests are
    /// forgotten, and the goals sent to it end (`status` 6).
    pub(crate) fn goals_leave(&mut self, slot: usize) {
        let me = self.model.client(slot).conn;
        for w in self.model.waiting.iter_mut() {
            if w.caller == me {
                w.alive = false;
            }
        }
        let orphan_due = tick_ceil(self.offset + ORPHAN_TIMEOUT);
        let mut orphaned = Vec::new();
        for g in 0..self.model.goals.len() {
            let x = &mut self.model.goals[g];
            if x.caller != me || x.fate != Fate::Alive {
                continue;
            }
            if x.server == me {
                x.fate = Fate::Ended;
            } else {
                x.fate = Fate::Orphan;
                x.due_tick = Some(orphan_due);
                orphaned.push(g);
            }
        }
        for g in 0..self.model.goals.len() {
            let x = &self.model.goals[g];
            if x.server == me && x.in_table() {
                self.end_goal_by_gateway(g, 6, Counter::GoalsFailedServerGone, None);
            }
        }
        for g in orphaned {
            self.counts.goals_orphaned += 1;
            self.model.count(Counter::GoalsOrphaned);
            self.cancel_to_server(g);
        }
    }

    // ----- the clients' side ---------------------------------------------------------

    /// A goal sent to `slot` as server: the next thing owed, with the
    /// caller's action, type, args and feedback flag and a gateway id
    /// never seen before.
    pub(crate) fn on_forwarded_goal(
        &mut self,
        slot: usize,
        line: &[u8],
        v: &Value,
    ) -> Result<(), Violation> {
        let show = String::from_utf8_lossy(line);
        let Some(Fwd::Goal(g)) = self.model.client_mut(slot).exp.forwards.pop_front() else {
            return Err(self.violation(format!(
                "slot {slot} got a goal it was not owed next: {show}"
            )));
        };
        let goal = &self.model.goals[g];
        let id_raw = match v.get("id") {
            Some(Value::String(s)) => json_string(s),
            _ => return Err(self.violation(format!("goal without string id: {show}"))),
        };
        let ok = v.get("action").and_then(Value::as_str) == Some(goal.action.as_str())
            && v.get("action_type").and_then(Value::as_str) == Some(goal.action_type)
            && v.get("args") == Some(&goal.args)
            && v.get("feedback") == Some(&Value::Bool(goal.feedback));
        if !ok {
            return Err(self.violation(format!(
                "slot {slot} got goal {show} but expected action {:?} type {:?} args {} feedback {}",
                goal.action, goal.action_type, goal.args, goal.feedback
            )));
        }
        if self
            .model
            .rg_map
            .insert(id_raw.clone(), Fwd::Goal(g))
            .is_some()
        {
            return Err(self.violation(format!("gateway id {id_raw} issued twice")));
        }
        self.counts.goals_received += 1;
        self.model.all_learned_goals.push(id_raw.clone());
        self.model.client_mut(slot).learned_goals.push(id_raw);
        Ok(())
    }

    /// A cancel to `slot` as server: for a goal it was sent (and read), one
    /// the model owes it.
    pub(crate) fn on_cancel(
        &mut self,
        slot: usize,
        line: &[u8],
        v: &Value,
    ) -> Result<(), Violation> {
        let show = String::from_utf8_lossy(line);
        let id_raw = match v.get("id") {
            Some(Value::String(s)) => json_string(s),
            _ => return Err(self.violation(format!("cancel without string id: {show}"))),
        };
        let Some(&Fwd::Goal(g)) = self.model.rg_map.get(&id_raw) else {
            return Err(self.violation(format!(
                "slot {slot} got a cancel for no goal it read: {show}"
            )));
        };
        let c = self.model.client_mut(slot);
        let Some(i) = c.exp.cancels.iter().position(|&x| x == g) else {
            return Err(self.violation(format!(
                "slot {slot} got a cancel it is not owed: {show} (owed goals {:?})",
                self.model.client(slot).exp.cancels
            )));
        };
        c.exp.cancels.swap_remove(i);
        if v.get("action").and_then(Value::as_str) != Some(self.model.goals[g].action.as_str()) {
            return Err(self.violation(format!("cancel names another action: {show}")));
        }
        self.counts.cancels_received += 1;
        Ok(())
    }

    /// A result to `slot` as caller: exactly one outcome the model settled
    /// for that id (never for a goal still in flight or waiting).
    pub(crate) fn on_goal_result(
        &mut self,
        slot: usize,
        line: &[u8],
        v: &Value,
    ) -> Result<(), Violation> {
        let show = String::from_utf8_lossy(line).into_owned();
        let Some(id) = v.get("id") else {
            return Err(self.violation(format!("slot {slot} got a result without id: {show}")));
        };
        let key = canon(id);
        let e = &mut self.model.client_mut(slot).exp.goal_results;
        let found = e
            .iter()
            .position(|(k, r)| *k == key && goal_mismatch(r, v).is_none());
        let Some(i) = found else {
            let owed: Vec<GoalResp> = e
                .iter()
                .filter(|(k, _)| *k == key)
                .map(|(_, r)| r.clone())
                .collect();
            return Err(self.violation(format!(
                "slot {slot} got a result it is not owed: {show} (owed under that id: {owed:?})"
            )));
        };
        let (_, r) = e.remove(i);
        match r {
            GoalResp::Failure { status: 0, .. } => self.counts.goal_refusals_received += 1,
            GoalResp::Failure { .. } => self.counts.goal_aborts_received += 1,
            _ => self.counts.goal_results_received += 1,
        }
        Ok(())
    }
}

/// Why result `v` is not the outcome `r` (`None`: it is).
fn goal_mismatch(r: &GoalResp, v: &Value) -> Option<String> {
    let action = v.get("action").and_then(Value::as_str);
    match r {
        GoalResp::Pending(g) => Some(format!("goal {g} is still in flight")),
        GoalResp::Waiting(w) => Some(format!("goal (waiting {w}) is still waiting")),
        GoalResp::Failure {
            action: a,
            status,
            why,
        } => {
            let text = v.get("values").and_then(Value::as_str);
            let ok = action == Some(a.as_str())
                && v.get("status") == Some(&Value::from(*status))
                && v.get("result") == Some(&Value::Bool(false))
                && text.is_some_and(|t| why.is_none_or(|w| t.contains(w)));
            (!ok).then(|| format!("a failure of {a:?} with status {status}"))
        }
        GoalResp::Result {
            action: a,
            values,
            status,
            result,
        } => {
            let values_ok = match values {
                Some(x) => v.get("values") == Some(x),
                None => v.get("values").is_some_and(Value::is_string),
            };
            let ok = action == Some(a.as_str())
                && values_ok
                && v.get("status") == Some(status)
                && v.get("result") == Some(result);
            (!ok).then(|| format!("the result of {a:?}"))
        }
    }
}

/// A goal op sent without the id it needs: refused (no id to echo).
fn missing_id(op: &str, name: &str, f: Form) -> (Vec<u8>, Effect) {
    let m: Members<'_> = vec![
        ("op", json_string(op)),
        ("action", json_string(name)),
        ("action_type", json_string(ACTION_TYPE)),
        ("args", "{}".into()),
    ];
    (
        assemble(&m, f.style & !32, f.spacing),
        Effect::Error {
            id: None,
            code: None,
        },
    )
}
