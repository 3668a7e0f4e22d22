//! Actions for Foxglove sessions, as a ROS 2 client sees them (which
//! foxglove_bridge does not offer): every action of the domain is
//! advertised as its hidden `<action>/_action/send_goal`, `get_result` and
//! `cancel_goal` services (`pkg/action/A_SendGoal`, `A_GetResult`,
//! `action_msgs/srv/CancelGoal`), its `<action>/_action/feedback`
//! channel (`A_FeedbackMessage`) and its `<action>/_action/status` channel
//! (`action_msgs/msg/GoalStatusArray`), so a Foxglove panel can send goals
//! and watch their feedback and status. The goals are the hub's own
//! (`hub/actions.rs`):
//!
//! - `send_goal` sends the goal with feedback (`Hub::send_action_goal`,
//!   roles and limits included) under an id naming the goal's UUID, and is
//!   answered at once `accepted: true` with the time (the gateway's goals
//!   have no acceptance step: a refusal is the goal's end, which
//!   `get_result` reports with its status);
//! - the goal's feedback comes to this session only, as message data on the
//!   feedback channel when the session subscribed to it (CDR of
//!   `A_FeedbackMessage`, the goal's UUID in it);
//! - the status channel, when the session subscribed to it, carries the
//!   statuses of this session's goals of the action (those it keeps, as
//!   an action server's status lists the goals it keeps): a
//!   `GoalStatusArray` whenever one changes, EXECUTING when sent,
//!   CANCELING when a cancel is accepted, then its end's status;
//! - the goal's end is kept (`foxglove::Session::end_goal`) and answers
//!   the `get_result` calls waiting for it, or the next ones;
//! - `cancel_goal` of a goal of this session cancels it (`return_code` 0),
//!   of any other goal `return_code` 2 (unknown goal).
//!
//! Invariants: goals and waiting calls are bounded per session
//! (`foxglove::MAX_FOXGLOVE_GOALS`, `MAX_FOXGLOVE_RESULT_WAITERS`); every
//! `get_result` call is answered once (at once, at its goal's end, or with
//! `serviceCallFailure`); the feedback and status channels hold no
//! registration (what they carry is the session's own).

use std::time::Instant;

use serde_json::{json, Value};

use rosgate_ros2::action::{status, STATUS, STATUS_TYPE};
use rosgate_wire::decode::GoalRequest;
use rosgate_wire::foxglove::server;
use rosgate_wire::Raw;

use super::Hub;
use crate::conn::ConnRef;
use crate::counters::ErrorCode;
use crate::foxglove::Service;
use crate::nodes::Domain;
use crate::registry::Provided;
use crate::transport::Framing;

/// The hidden names of an action's parts, after the action's name.
const SEND_GOAL: &str = "/_action/send_goal";
const GET_RESULT: &str = "/_action/get_result";
const CANCEL_GOAL: &str = "/_action/cancel_goal";
const FEEDBACK: &str = "/_action/feedback";

/// The type of `cancel_goal`.
const CANCEL_TYPE: &str = "action_msgs/srv/CancelGoal";

/// How the id of a session's goal starts (then its UUID in hex).
const GOAL_ID: &str = "fxg:";

/// `action_msgs/srv/CancelGoal` return codes.
const CANCEL_ACCEPTED: i8 = 0;
const CANCEL_UNKNOWN_GOAL: i8 = 2;

/// Whether `topic` is an action's feedback or status channel, which
/// carry the session's own goals (no registration).
pub(super) fn is_goal_channel(topic: &str) -> bool {
    topic.ends_with(FEEDBACK) || topic.ends_with(STATUS)
}

/// Channels as `Session::sync` takes them: (topic, type, cdr).
pub(super) type ChannelWants = Vec<(String, String, bool)>;
/// Services as `Session::sync_services` takes them: (name, type).
pub(super) type ServiceWants = Vec<(String, String)>;

fn hex(u: &[u8; 16]) -> String {
    u.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<[u8; 16]> {
    let mut u = [0u8; 16];
    if s.len() != 32 {
        return None;
    }
    for (i, b) in u.iter_mut().enumerate() {
        *b = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(u)
}

/// A `unique_identifier_msgs/msg/UUID` as JSON (`{"uuid": [..]}`) read
/// back, base64 text or a list as the codec gives `uint8[16]`.
fn uuid_of(v: &Value) -> Option<[u8; 16]> {
    let bytes = rosgate_ros2::cdr::octets(v.get("uuid")?)?;
    bytes.try_into().ok()
}

impl Hub {
    /// The actions of `domain` (here and beyond) with their types.
    fn actions_of(&self, domain: Domain) -> Vec<(String, String)> {
        let reg = &self.registries[domain as usize];
        let mut v: Vec<(String, String)> = reg
            .provided_names(Provided::Action, false)
            .filter_map(|n| {
                reg.provided(Provided::Action, n)
                    .map(|s| (n.to_owned(), s.ty().to_owned()))
            })
            .collect();
        for (n, t) in self.remote_provided(Provided::Action, domain) {
            if !v.iter().any(|(m, _)| *m == n) {
                v.push((n, t));
            }
        }
        v
    }

    /// The feedback and status channels ((topic, type, cdr)) and the services ((name,
    /// type)) that expose `domain`'s actions of known types.
    pub(super) fn foxglove_action_parts(&self, domain: Domain) -> (ChannelWants, ServiceWants) {
        let types = self.types();
        let mut channels = Vec::new();
        let mut services = Vec::new();
        for (name, ty) in self.actions_of(domain) {
            let Some(def) = types.action(&ty) else {
                continue;
            };
            channels.push((
                format!("{name}{FEEDBACK}"),
                def.feedback_message.clone(),
                true,
            ));
            channels.push((format!("{name}{STATUS}"), STATUS_TYPE.to_owned(), true));
            services.push((format!("{name}{SEND_GOAL}"), def.send_goal.clone()));
            services.push((format!("{name}{GET_RESULT}"), def.get_result.clone()));
            services.push((format!("{name}{CANCEL_GOAL}"), CANCEL_TYPE.to_owned()));
        }
        (channels, services)
    }

    /// A call to one of an action's services (`args`: the request as
    /// JSON); false when `svc` is not one.
    pub(super) fn foxglove_action_call(
        &mut self,
        me: ConnRef,
        svc: &Service,
        ids: (u32, u32),
        encoding: &str,
        args: &str,
        now: Instant,
    ) -> bool {
        let (service, call) = ids;
        let (action, part) = if let Some(a) = svc.name.strip_suffix(SEND_GOAL) {
            (a, SEND_GOAL)
        } else if let Some(a) = svc.name.strip_suffix(GET_RESULT) {
            (a, GET_RESULT)
        } else if let Some(a) = svc.name.strip_suffix(CANCEL_GOAL) {
            (a, CANCEL_GOAL)
        } else {
            return false;
        };
        let action = action.to_owned();
        let req: Value = serde_json::from_str(args).unwrap_or(Value::Null);
        let uuid = match part {
            CANCEL_GOAL => req.get("goal_info").and_then(|g| g.get("goal_id")),
            _ => req.get("goal_id"),
        }
        .and_then(uuid_of);
        let Some(uuid) = uuid else {
            let why = format!(
                "{}: the request has no goal_id uuid of 16 bytes; not called",
                svc.name
            );
            self.foxglove_call_failed(me, service, call, &why, now);
            return true;
        };
        let reply_ty = self
            .types()
            .srv(&svc.ty)
            .map(|d| d.response.clone())
            .unwrap_or_default();
        match part {
            SEND_GOAL => {
                let action_ty = svc
                    .ty
                    .strip_suffix("_SendGoal")
                    .unwrap_or(&svc.ty)
                    .to_owned();
                let stamp = self.wall(now);
                let added = self
                    .live_mut(me)
                    .and_then(|c| c.foxglove_mut())
                    .map(|s| s.add_goal(uuid, &action, &action_ty, stamp));
                if let Some(Err(why)) = added {
                    let why = format!("{}: {why}; not sent", svc.name);
                    self.foxglove_call_failed(me, service, call, &why, now);
                    return true;
                }
                let goal = req.get("goal").cloned().unwrap_or(json!({})).to_string();
                let g = GoalRequest {
                    action: action.as_str().into(),
                    action_type: Some(action_ty.as_str().into()),
                    args: Some(Raw::from_valid_json(&goal)),
                    feedback: true,
                    timeout: None,
                    wait: false,
                };
                let (sec, nanosec) = stamp;
                let reply = json!({"accepted": true, "stamp": {"sec": sec, "nanosec": nanosec}});
                self.foxglove_reply(me, (service, call), encoding, &reply_ty, &reply, now);
                // Executing before it is sent: a goal refused at once ends
                // within `send_action_goal`, and its end's status comes after.
                self.foxglove_goal_status(me, &action, now);
                let id = format!("\"{GOAL_ID}{}\"", hex(&uuid));
                self.send_action_goal(me, &g, None, id.as_bytes(), now);
            }
            GET_RESULT => {
                let w = (service, call, encoding.to_owned());
                let got = self
                    .live_mut(me)
                    .and_then(|c| c.foxglove_mut())
                    .map(|s| s.wait_result(&uuid, w));
                match got {
                    Some(Ok(Some((status, result)))) => self.foxglove_result_reply(
                        me,
                        (service, call),
                        encoding,
                        &reply_ty,
                        status,
                        &result,
                        now,
                    ),
                    Some(Ok(None)) | None => {}
                    Some(Err(why)) => {
                        let why = format!("{}: {why}", svc.name);
                        self.foxglove_call_failed(me, service, call, &why, now);
                    }
                }
            }
            _ => {
                let mine = self
                    .conn(me.key)
                    .and_then(|c| c.foxglove())
                    .and_then(|s| s.goal(&uuid))
                    .is_some_and(|g| g.end.is_none());
                let info = req.get("goal_info").cloned().unwrap_or(Value::Null);
                let reply = if mine {
                    if let Some(s) = self.live_mut(me).and_then(|c| c.foxglove_mut()) {
                        s.canceling(&uuid);
                    }
                    self.foxglove_goal_status(me, &action, now);
                    let id = format!("\"{GOAL_ID}{}\"", hex(&uuid));
                    self.cancel_action_goal(me, &action, Raw::from_valid_json(&id), now);
                    json!({"return_code": CANCEL_ACCEPTED, "goals_canceling": [info]})
                } else {
                    json!({"return_code": CANCEL_UNKNOWN_GOAL, "goals_canceling": []})
                };
                self.foxglove_reply(me, (service, call), encoding, &reply_ty, &reply, now);
            }
        }
        true
    }

    /// A `get_result` answer: the goal's status and result (a failure's
    /// reason is not a result: the result's fields are then their zero
    /// values, as the codec fills missing fields).
    #[allow(clippy::too_many_arguments)]
    fn foxglove_result_reply(
        &mut self,
        to: ConnRef,
        ids: (u32, u32),
        encoding: &str,
        reply_ty: &str,
        status: i8,
        result: &str,
        now: Instant,
    ) {
        let result: Value = serde_json::from_str(result)
            .ok()
            .filter(Value::is_object)
            .unwrap_or(json!({}));
        let reply = json!({"status": status, "result": result});
        self.foxglove_reply(to, ids, encoding, reply_ty, &reply, now);
    }

    /// A service call response of `v` in `encoding` (CDR by `reply_ty`).
    fn foxglove_reply(
        &mut self,
        to: ConnRef,
        ids: (u32, u32),
        encoding: &str,
        reply_ty: &str,
        v: &Value,
        now: Instant,
    ) {
        let (service, call) = ids;
        let payload = if encoding == "cdr" {
            let types = std::sync::Arc::clone(self.types());
            let mut out = Vec::new();
            if let Err(e) = rosgate_ros2::cdr::encode_into(&*types, reply_ty, v, &mut out) {
                let why = format!("the answer is not {reply_ty}: {e:?}");
                return self.foxglove_call_failed(to, service, call, &why, now);
            }
            out
        } else {
            v.to_string().into_bytes()
        };
        let body = server::service_call_response(service, call, encoding, &payload);
        let mut frame = Vec::with_capacity(body.len() + 10);
        if Framing::WebSocket.push_binary(&mut frame, &body) {
            self.send_raw(to, &frame, now);
        }
    }

    /// The goal of `id` (as `foxglove_action_call` made it) of session
    /// `to`: its UUID and the goal.
    fn session_goal(&self, to: ConnRef, id: &[u8]) -> Option<([u8; 16], crate::foxglove::Goal)> {
        let s: String = serde_json::from_slice(id).ok()?;
        let uuid = unhex(s.strip_prefix(GOAL_ID)?)?;
        let g = self.conn(to.key)?.foxglove()?.goal(&uuid)?.clone();
        Some((uuid, g))
    }

    /// Feedback of a session's goal: message data on its action's
    /// feedback channel, when the session subscribed to it.
    pub(super) fn foxglove_goal_feedback(
        &mut self,
        to: ConnRef,
        id: &[u8],
        values: &[u8],
        now: Instant,
    ) {
        let Some((uuid, goal)) = self.session_goal(to, id) else {
            return;
        };
        let topic = format!("{}{FEEDBACK}", goal.action);
        let Some(sub) = self
            .conn(to.key)
            .and_then(|c| c.foxglove())
            .and_then(|s| s.subscription_on(&topic))
        else {
            return;
        };
        let types = std::sync::Arc::clone(self.types());
        let Some(def) = types.action(&goal.ty) else {
            return;
        };
        let feedback: Value = serde_json::from_slice(values).unwrap_or(json!({}));
        let msg = json!({"goal_id": {"uuid": uuid.to_vec()}, "feedback": feedback});
        let mut cdr = Vec::new();
        if rosgate_ros2::cdr::encode_into(&*types, &def.feedback_message, &msg, &mut cdr).is_err() {
            self.counters.error(ErrorCode::FoxgloveRequest);
            return;
        }
        self.foxglove_message(to, sub, &cdr, now);
    }

    /// Message data of subscription `sub` (CDR), logged now.
    fn foxglove_message(&mut self, to: ConnRef, sub: u32, cdr: &[u8], now: Instant) {
        let (sec, nanosec) = self.wall(now);
        let ns = sec
            .saturating_mul(1_000_000_000)
            .saturating_add(nanosec.into());
        let mut body = server::message_data_head(sub, ns).to_vec();
        body.extend_from_slice(cdr);
        let mut frame = Vec::with_capacity(body.len() + 10);
        if Framing::WebSocket.push_binary(&mut frame, &body) {
            self.send_raw(to, &frame, now);
        }
    }

    /// The statuses of session `to`'s goals of `action`, as a
    /// `GoalStatusArray` on the action's status channel, when the session
    /// subscribed to it.
    fn foxglove_goal_status(&mut self, to: ConnRef, action: &str, now: Instant) {
        let topic = format!("{action}{STATUS}");
        let Some(s) = self.conn(to.key).and_then(|c| c.foxglove()) else {
            return;
        };
        let Some(sub) = s.subscription_on(&topic) else {
            return;
        };
        let list: Vec<Value> = s
            .goals_of(action)
            .map(|(uuid, g)| {
                let st = match (&g.end, g.canceling) {
                    (Some((end, _)), _) => i64::from(*end),
                    (None, true) => status::CANCELING,
                    (None, false) => status::EXECUTING,
                };
                let (sec, nanosec) = g.stamp;
                json!({
                    "goal_info": {
                        "goal_id": {"uuid": uuid.to_vec()},
                        "stamp": {"sec": sec, "nanosec": nanosec},
                    },
                    "status": st,
                })
            })
            .collect();
        let msg = json!({ "status_list": list });
        let types = std::sync::Arc::clone(self.types());
        let mut cdr = Vec::new();
        if rosgate_ros2::cdr::encode_into(&*types, STATUS_TYPE, &msg, &mut cdr).is_err() {
            self.counters.error(ErrorCode::FoxgloveRequest);
            return;
        }
        self.foxglove_message(to, sub, &cdr, now);
    }

    /// A session's goal ended (`status` as `action_msgs/msg/GoalStatus`,
    /// `values` its result or the reason): kept, and the `get_result`
    /// calls waiting for it answered.
    pub(super) fn foxglove_goal_end(
        &mut self,
        to: ConnRef,
        id: &[u8],
        status: i8,
        values: &[u8],
        now: Instant,
    ) {
        let Some((uuid, goal)) = self.session_goal(to, id) else {
            return;
        };
        let result = String::from_utf8_lossy(values).into_owned();
        let waiting = self
            .live_mut(to)
            .and_then(|c| c.foxglove_mut())
            .map(|s| s.end_goal(&uuid, status, result.clone()))
            .unwrap_or_default();
        let reply_ty = self
            .types()
            .action(&goal.ty)
            .and_then(|d| self.types().srv(&d.get_result).map(|s| s.response.clone()))
            .unwrap_or_default();
        self.foxglove_goal_status(to, &goal.action, now);
        for (service, call, encoding) in waiting {
            self.foxglove_result_reply(
                to,
                (service, call),
                &encoding,
                &reply_ty,
                status,
                &result,
                now,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn goal_ids_round_trip() {
        let u: [u8; 16] = core::array::from_fn(|i| (i * 17) as u8);
        assert_eq!(unhex(&hex(&u)), Some(u));
        assert_eq!(unhex("zz"), None);
        assert_eq!(uuid_of(&json!({"uuid": u.to_vec()})), Some(u));
        assert_eq!(uuid_of(&json!({"uuid": [1, 2]})), None);
    }
}
