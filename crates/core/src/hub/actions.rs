//! ROS 2 actions (design.ros2.org/articles/actions.html) with rosbridge
//! v2's ops: a client serves an action (`advertise_action`), others send
//! it goals, receive feedback and one result, and cancel. Goals live in the [`crate::calls::Calls`]
//! table beside service calls, so they share its guarantees.
//!
//! Invariants:
//! - every goal ends exactly once with one `action_result` to its caller,
//!   under the caller's id: the server's own result, or a failure from the
//!   gateway (no server: `status` 0; server gone, unadvertised, timed out,
//!   shutting down: `status` 6; always `result:false` with a reason);
//! - feedback, results and cancels about a goal are accepted only from the
//!   connection the goal was sent to; a goal id never names another
//!   caller's goal (server-side ids are fresh `rg-<n>`, never reused);
//! - feedback reaches only a caller that asked for it, never after the
//!   result, and is shed like topic data when the caller does not read;
//!   goals, cancels and results are control data and never dropped;
//! - when its caller can no longer hear the result (it left, or the goal
//!   timed out) the server is sent a cancel and the goal becomes an orphan:
//!   its late feedback and result are dropped and counted, not errors.

use std::time::{Duration, Instant};

use rosgate_wire::decode::GoalRequest;
use rosgate_wire::encode::{self, Level};
use rosgate_wire::ids::parse_call_id;
use rosgate_wire::Raw;

use super::answer::{Answer, GoalEnd, GoalFailure};
use super::graph::RosoutLevel;
use super::services::{CallArgs, CallFailure, GoalOptions};
use super::Hub;
use crate::access::Class;
use crate::bridge::BridgeMsg;
use crate::calls::{Call, CallKind, NotOutstanding, ORPHAN_TIMEOUT};
use crate::conn::ConnRef;
use crate::counters::{Counter, ErrorCode, Hist};
use crate::encoding::Encoding;
use crate::nodes::Domain;
use crate::registry::{Provided, TooMany, Unadvertised};

/// Sent as a goal's `args` when a rosbridge client sends none.
const EMPTY_ARGS: &str = "{}";

/// The queue bucket goal feedback is shed from: its own "topic" in each
/// caller's queue, so it is thinned fairly against real topics.
pub const FEEDBACK_BUCKET: u32 = u32::MAX - 1;

/// The suffix of ROS 2's cancel service for an action
/// (`<action>/_action/cancel_goal`): roslib's `cancelAllGoals` calls it.
pub const CANCEL_GOAL_SUFFIX: &str = "/_action/cancel_goal";

/// GoalStatus values (`action_msgs/msg/GoalStatus`).
const STATUS_UNKNOWN: u8 = 0;
const STATUS_ABORTED: u8 = 6;

impl Hub {
    pub(super) fn advertise_action(
        &mut self,
        me: ConnRef,
        name: &str,
        node: Option<&str>,
        ty: &str,
        id: Option<Raw<'_>>,
        now: Instant,
    ) {
        let id_bytes = id.map(|r| r.get().as_bytes());
        let Some((domain, tag, name)) = self.resolve_for(me, name, node, id_bytes, now) else {
            return;
        };
        if !self.permit(me, Class::ActionServe, &name, id_bytes, now) {
            return;
        }
        let max = self.limits.max_actions_per_conn;
        let displaced = match self.registries.update(domain, |r| {
            r.provide(Provided::Action, me, tag, &name, ty, max)
        }) {
            Ok(d) => d,
            Err(TooMany { limit }) => {
                let msg = format!(
                    "advertise_action {name}: this connection serves {limit} actions, the limit; nothing changed"
                );
                return self.protocol_error(me, ErrorCode::TooManyRegistrations, &msg, id, now);
            }
        };
        match displaced {
            Some((old, old_tag)) => {
                let (was, now_by) = (self.node_label(old, old_tag), self.node_label(me, tag));
                self.note_provider_replaced(Provided::Action, domain, &name, &now_by, &was);
                if old != me {
                    let msg = format!("action {name} was taken over by another server; goals already sent to you stay valid until they end");
                    self.send_status(old, Level::Info, &msg, None, now);
                    let log = format!("action {name}: server {was} replaced by {now_by}");
                    self.rosout(domain, RosoutLevel::Warn, &log, now);
                }
            }
            None => self.note_provided(Provided::Action, domain, me, tag, &name, Some(ty)),
        }
        let msg = format!("advertised action {name}");
        self.send_status(me, Level::Info, &msg, id_bytes, now);
        self.provided_changed(Provided::Action, domain, &name);
        self.release_waiting(domain, Provided::Action, &name, now);
    }

    pub(super) fn unadvertise_action(
        &mut self,
        me: ConnRef,
        name: &str,
        node: Option<&str>,
        id: Option<Raw<'_>>,
        now: Instant,
    ) {
        let id_bytes = id.map(|r| r.get().as_bytes());
        let Some((domain, _, name)) = self.resolve_for(me, name, node, id_bytes, now) else {
            return;
        };
        let tag = self.registries[domain as usize]
            .provided(Provided::Action, &name)
            .map(|s| s.node());
        match self
            .registries
            .update(domain, |r| r.withdraw_provided(Provided::Action, me, &name))
        {
            Unadvertised::Removed => {
                let mut name_json = Vec::new();
                encode::json_string(&mut name_json, &name);
                let goal = CallKind::Goal { feedback: false };
                let calls = self.calls.fail_provided(goal, me, &name_json);
                self.fail_soon(calls, CallFailure::Unadvertised, now);
                if let Some(tag) = tag {
                    self.note_provided(Provided::Action, domain, me, tag, &name, None);
                }
                let msg = format!("unadvertised action {name}");
                self.send_status(me, Level::Info, &msg, id_bytes, now);
                self.provided_changed(Provided::Action, domain, &name);
            }
            Unadvertised::NotProvider | Unadvertised::Unknown => {
                let msg = format!("not the current server of action {name}; nothing changed");
                self.protocol_error(me, ErrorCode::NotProvider, &msg, id, now);
            }
        }
    }

    /// A caller's goal: forwarded to the action's server with a fresh id,
    /// or failed at once (`status` 0).
    pub(super) fn send_action_goal(
        &mut self,
        me: ConnRef,
        g: &GoalRequest<'_>,
        node: Option<&str>,
        id: &[u8],
        now: Instant,
    ) {
        if !self.live(me) {
            return;
        }
        let Some((domain, _, action)) = self.resolve_for(me, &g.action, node, Some(id), now) else {
            return;
        };
        if !self.permit(me, Class::ActionSend, &action, Some(id), now) {
            // The caller also gets its goal's end, as for any refusal.
            let mut action_json = Vec::with_capacity(action.len() + 2);
            encode::json_string(&mut action_json, &action);
            let reason = format!("forbidden: may not send goals to {action}");
            let failure = GoalFailure {
                status: STATUS_UNKNOWN,
                reason: &reason,
            };
            return self.send_goal_failure(me, None, &action_json, id, failure, now);
        }
        let goal = CallArgs {
            args: g.args,
            timeout: g.timeout,
            wait: g.wait,
            encoding: Encoding::default(),
            goal: Some(GoalOptions {
                action_type: g.action_type.as_deref(),
                feedback: g.feedback,
            }),
        };
        self.send_goal_resolved(me, domain, &action, goal, id, now);
    }

    /// [`Hub::send_action_goal`] of `action` in `domain`, already resolved
    /// (a waiting goal being released is not resolved again, as for
    /// calls: see [`Hub::call_resolved`]). `goal` carries its
    /// [`GoalOptions`].
    pub(super) fn send_goal_resolved(
        &mut self,
        me: ConnRef,
        domain: Domain,
        action: &str,
        goal: CallArgs<'_>,
        id: &[u8],
        now: Instant,
    ) {
        let CallArgs {
            args,
            timeout,
            wait,
            goal: options,
            ..
        } = goal;
        let (action_type, feedback) =
            options.map_or((None, false), |o| (o.action_type, o.feedback));
        if !self.live(me) {
            return;
        }
        let mut action_json = Vec::with_capacity(action.len() + 2);
        encode::json_string(&mut action_json, action);
        let fail = |hub: &mut Hub, why: CallFailure| {
            hub.count_goal_failure(why);
            let reason = hub.goal_failure_text(why, action);
            let failure = GoalFailure {
                status: STATUS_UNKNOWN,
                reason: &reason,
            };
            hub.send_goal_failure(me, None, &action_json, id, failure, now);
        };
        if self.calls.goals_in_flight(me) >= self.limits.max_goals_per_conn {
            return fail(self, CallFailure::TooMany);
        }
        if self.calls.goal_of(me, id).is_some() {
            return fail(self, CallFailure::DuplicateId);
        }
        // tf2_web_republisher, served by the gateway when no client does
        // (`tf.rs`).
        if self.registries[domain as usize]
            .provided(Provided::Action, action)
            .is_none()
            && self.tf_goal(me, domain, action, args, id, now)
        {
            return;
        }
        let server = match self.registries[domain as usize].provided(Provided::Action, action) {
            Some(s)
                if self.live(s.provider())
                    && self.may_forward(me, s.provider(), (Provided::Action, domain, action)) =>
            {
                s.provider()
            }
            _ if wait => {
                if self.wait_for_provider(me, domain, action, goal, Some(id), now) {
                    return;
                }
                return fail(self, CallFailure::TooMany);
            }
            _ => return fail(self, CallFailure::NoProvider),
        };
        if self.calls.serving_goals(server) >= self.limits.max_goals_per_server {
            return fail(self, CallFailure::ServerBusy);
        }
        let deadline = match timeout {
            Some(secs) if secs.is_finite() && secs > 0.0 => Some(
                now + Duration::from_secs_f64(secs.min(self.limits.max_call_timeout.as_secs_f64())),
            ),
            _ => self.limits.goal_timeout.map(|d| now + d),
        };
        let seq = self
            .calls
            .insert_goal(me, server, &action_json, id, feedback, now, deadline);
        self.counters.inc(Counter::GoalsSent);
        self.note_origin(me, seq);
        let args = args.map_or(EMPTY_ARGS, Raw::get);
        let msg = |to| BridgeMsg::Goal {
            domain,
            action: action.into(),
            id: seq,
            action_type: action_type.unwrap_or("").into(),
            args: args.into(),
            feedback,
            to,
        };
        if self.call_to_bridge(server, seq, (Provided::Action, domain, action), msg, now) {
            return;
        }
        let mut type_json = Vec::new();
        encode::json_string(&mut type_json, action_type.unwrap_or(""));
        let mut out = std::mem::take(&mut self.scratch);
        out.clear();
        encode::send_action_goal(&mut out, &action_json, seq, &type_json, args, feedback);
        self.send_control(server, &out, now);
        self.scratch = out;
    }

    /// A caller cancels its goal `id`: forwarded to the server, which ends
    /// the goal with its result (normally `status` 5).
    pub(super) fn cancel_action_goal(
        &mut self,
        me: ConnRef,
        action: &str,
        id: Raw<'_>,
        now: Instant,
    ) {
        if self.tf_cancel_goal(me, id.get().as_bytes(), now) {
            return;
        }
        let goal = self.calls.goal_of(me, id.get().as_bytes()).map(|c| {
            (
                c.seq(),
                c.provider(),
                c.service_json().to_vec(),
                c.provider_peer(),
            )
        });
        match goal {
            Some((seq, server, action_json, peer)) => {
                self.counters.inc(Counter::GoalCancels);
                if self.cancel_to_bridge(server, seq, &action_json, peer) {
                    return;
                }
                let mut out = Vec::new();
                encode::cancel_action_goal(&mut out, &action_json, seq);
                self.send_control(server, &out, now);
            }
            None => {
                // Harmless (the goal may have just ended); said only where
                // statuses are expected: rosbridge sends nothing.
                let rosbridge = self
                    .conn(me.key)
                    .is_some_and(|c| c.policy().rosbridge_answers());
                if !rosbridge {
                    let msg = format!(
                        "cancel_action_goal {action}: no goal with id {} in flight on this connection",
                        id.get()
                    );
                    self.protocol_error(me, ErrorCode::UnknownGoal, &msg, Some(id), now);
                }
            }
        }
    }

    /// Feedback from a server: to the goal's caller, if it asked.
    pub(super) fn action_feedback(
        &mut self,
        me: ConnRef,
        id: Raw<'_>,
        values: Raw<'_>,
        now: Instant,
    ) {
        let Some(seq) = parse_call_id(id.get().as_bytes()) else {
            return self.stale_action_message(me, "action_feedback", id, now);
        };
        let (caller, wanted, line, fed, foxglove) = match self.calls.goal_from(seq, me) {
            Ok(call) => {
                let wanted =
                    !call.is_orphaned() && matches!(call.kind(), CallKind::Goal { feedback: true });
                // A Foxglove session's goal: its id names the goal's UUID.
                let foxglove = self
                    .is_foxglove(call.caller())
                    .then(|| call.caller_id().map(<[u8]>::to_vec))
                    .flatten();
                let mut line = Vec::new();
                // For a peer beyond a bridge: its id and the peer, no line.
                let fed = (wanted && self.fed.enabled && self.is_bridge(call.caller()))
                    .then(|| (call.caller_id().map(<[u8]>::to_vec), call.caller_peer()));
                if let (true, None, Some(cid)) = (wanted, &fed, call.caller_id()) {
                    encode::action_feedback(
                        &mut line,
                        call.service_json(),
                        cid,
                        values.get().as_bytes(),
                    );
                }
                (call.caller(), wanted, line, fed, foxglove)
            }
            // Late feedback of a goal that just ended: dropped.
            Err(NotOutstanding::Unknown) => {
                self.counters.inc(Counter::FeedbackStale);
                return;
            }
            Err(NotOutstanding::OtherProvider) => {
                return self.stale_action_message(me, "action_feedback", id, now)
            }
        };
        if !wanted {
            self.counters.inc(Counter::FeedbackStale);
            return;
        }
        if let Some((cid, peer)) = fed {
            return self.feedback_to_bridge(cid.as_deref(), peer, values.get().as_bytes());
        }
        self.counters.inc(Counter::FeedbackForwarded);
        if let Some(id) = foxglove {
            return self.foxglove_goal_feedback(caller, &id, values.get().as_bytes(), now);
        }
        self.deliver_sheddable(caller, &line, FEEDBACK_BUCKET, now);
    }

    /// A server's result: the goal ends, and its caller is told.
    pub(super) fn action_result(
        &mut self,
        me: ConnRef,
        id: Raw<'_>,
        values: Option<Raw<'_>>,
        status: Raw<'_>,
        result: Raw<'_>,
        now: Instant,
    ) {
        let goal = parse_call_id(id.get().as_bytes()).map(|seq| self.calls.finish_goal(seq, me));
        let call = match goal {
            Some(Ok(call)) => call,
            _ => return self.stale_action_message(me, "action_result", id, now),
        };
        if call.is_orphaned() {
            self.counters.inc(Counter::GoalResultsOrphaned);
            return;
        }
        let took = now.saturating_duration_since(call.started()).as_secs_f64();
        self.counters.observe(Hist::GoalDuration, took);
        let code: Option<u8> = status.get().parse().ok();
        self.counters.inc(match code {
            Some(4) => Counter::GoalsSucceeded,
            Some(5) => Counter::GoalsCanceled,
            _ => Counter::GoalsAborted,
        });
        let failed = result.get() == "false";
        let values = match values {
            Some(v) => v.get(),
            // A rosbridge server may fail a goal without values (roslib's
            // `setFailed`): the caller still gets a reason.
            None if failed => "\"the action server reported a failure\"",
            None => EMPTY_ARGS,
        };
        let Some(cid) = call.caller_id() else {
            return;
        };
        let end = GoalEnd {
            values: values.as_bytes(),
            status: status.get().as_bytes(),
            result: result.get().as_bytes(),
        };
        let json = call.service_json();
        self.send_goal_result(call.caller(), call.caller_peer(), json, cid, end, now);
    }

    /// Feedback, a result or a cancel naming no goal of this connection.
    fn stale_action_message(&mut self, me: ConnRef, op: &str, id: Raw<'_>, now: Instant) {
        self.counters.inc(Counter::ActionMessagesStale);
        let msg = format!(
            "{op}: no goal with id {} was sent to this connection (or it already ended); dropped",
            id.get()
        );
        self.protocol_error(me, ErrorCode::UnknownGoal, &msg, Some(id), now);
    }

    /// roslib's `cancelAllGoals` calls `<action>/_action/cancel_goal`; when
    /// no client provides that service, the gateway cancels every goal of
    /// that action the caller has in flight and answers it. Returns false
    /// when `name` is not such a service.
    pub(super) fn cancel_goal_service(
        &mut self,
        me: ConnRef,
        name: &str,
        id: Option<&[u8]>,
        now: Instant,
    ) -> bool {
        let Some(action) = name.strip_suffix(CANCEL_GOAL_SUFFIX) else {
            return false;
        };
        let mut action_json = Vec::with_capacity(action.len() + 2);
        encode::json_string(&mut action_json, action);
        let goals = self.calls.goals_for(me, &action_json);
        let canceled = goals.len() + self.tf_cancel_all(me, action, now);
        for seq in goals {
            if let Some((server, peer)) = self
                .calls
                .get(seq)
                .map(|c| (c.provider(), c.provider_peer()))
            {
                self.counters.inc(Counter::GoalCancels);
                if self.cancel_to_bridge(server, seq, &action_json, peer) {
                    continue;
                }
                let mut out = Vec::new();
                encode::cancel_action_goal(&mut out, &action_json, seq);
                self.send_control(server, &out, now);
            }
        }
        let mut name_json = Vec::with_capacity(name.len() + 2);
        encode::json_string(&mut name_json, name);
        // action_msgs/srv/CancelGoal's response: ERROR_NONE, and the goals
        // are reported by their results, not listed here.
        let values =
            format!("{{\"return_code\":0,\"goals_canceling\":[],\"canceled\":{canceled}}}");
        let answer = Answer::ok(values.as_bytes());
        self.send_service_answer(me, None, &name_json, id, answer, now);
        true
    }

    /// A goal that timed out: its caller gets `status` 6, its server a
    /// cancel, and the goal waits as an orphan for the server's result.
    pub(super) fn goal_timed_out(&mut self, call: Call, now: Instant) {
        self.fail_goal(&call, CallFailure::Timeout, now);
        let (server, seq) = (call.provider(), call.seq());
        if !self.cancel_to_bridge(server, seq, call.service_json(), call.provider_peer()) {
            let mut out = Vec::new();
            encode::cancel_action_goal(&mut out, call.service_json(), seq);
            self.send_control(server, &out, now);
        }
        self.counters.inc(Counter::GoalsOrphaned);
        self.calls.adopt_orphan(call, now + ORPHAN_TIMEOUT);
    }

    /// Goals whose caller left: their servers are told to cancel.
    pub(super) fn cancel_orphans(&mut self, seqs: Vec<u64>, now: Instant) {
        for seq in seqs {
            let Some((server, json, peer)) = self
                .calls
                .get(seq)
                .map(|c| (c.provider(), c.service_json().to_vec(), c.provider_peer()))
            else {
                continue;
            };
            self.counters.inc(Counter::GoalsOrphaned);
            if self.cancel_to_bridge(server, seq, &json, peer) {
                continue;
            }
            let mut out = Vec::new();
            encode::cancel_action_goal(&mut out, &json, seq);
            self.send_control(server, &out, now);
        }
    }

    /// Sends the caller of a goal that ended in the gateway its failure
    /// (nothing for an orphan: nobody hears it).
    pub(super) fn fail_goal(&mut self, call: &Call, why: CallFailure, now: Instant) {
        if call.is_orphaned() {
            return;
        }
        self.count_goal_failure(why);
        let name: String = serde_json::from_slice(call.service_json()).unwrap_or_default();
        let reason = self.goal_failure_text(why, &name);
        let status = match why {
            CallFailure::NoProvider
            | CallFailure::TooMany
            | CallFailure::DuplicateId
            | CallFailure::ServerBusy
            | CallFailure::FederationBusy => STATUS_UNKNOWN,
            _ => STATUS_ABORTED,
        };
        let Some(cid) = call.caller_id() else {
            return;
        };
        let failure = GoalFailure {
            status,
            reason: &reason,
        };
        let json = call.service_json();
        self.send_goal_failure(call.caller(), call.caller_peer(), json, cid, failure, now);
    }

    fn count_goal_failure(&mut self, why: CallFailure) {
        self.counters.inc(match why {
            CallFailure::NoProvider => Counter::GoalsFailedNoServer,
            CallFailure::ProviderGone | CallFailure::Unadvertised => Counter::GoalsFailedServerGone,
            CallFailure::Timeout => Counter::GoalsTimedOut,
            CallFailure::TooMany
            | CallFailure::ServerBusy
            | CallFailure::DuplicateId
            | CallFailure::FederationBusy => Counter::GoalsFailedRefused,
            CallFailure::Shutdown => Counter::GoalsFailedShutdown,
        });
    }

    pub(super) fn goal_failure_text(&self, why: CallFailure, name: &str) -> String {
        match why {
            CallFailure::NoProvider => format!("no server for action {name}"),
            CallFailure::ProviderGone => format!("the server of action {name} disconnected"),
            CallFailure::Unadvertised => {
                format!("action {name} was unadvertised by its server")
            }
            CallFailure::Timeout => {
                format!("goal of action {name} timed out; the server was told to cancel it")
            }
            CallFailure::TooMany => format!(
                "too many goals in flight on this connection (limit {})",
                self.limits.max_goals_per_conn
            ),
            CallFailure::ServerBusy => format!(
                "the server of action {name} has too many goals in flight (limit {})",
                self.limits.max_goals_per_server
            ),
            CallFailure::DuplicateId => {
                "a goal with this id is already in flight on this connection".to_string()
            }
            CallFailure::FederationBusy => format!(
                "goal of action {name} refused: the gateway's link to its server is too busy"
            ),
            CallFailure::Shutdown => {
                format!("gateway shutting down; goal of action {name} abandoned")
            }
        }
    }
}
