//! Goals local clients send to ROS 2 action servers over rmw_zenoh: a
//! `send_action_goal` the hub routed to the bridge becomes a request to
//! the server's `<action>/_action/send_goal` with a fresh goal id; once
//! the server accepts, a `get_result` request waits for the end; feedback
//! for the goal id, on `<action>/_action/feedback`, reaches the caller as
//! `action_feedback`; a cancel becomes a `cancel_goal` request, and the
//! server ends the goal (usually canceled) through `get_result`.
//!
//! Invariants:
//! - every goal sent ends in exactly one `action_result` to the bridge:
//!   the server's result, a rejection (status 0), or an abort (status 6)
//!   when the server refuses, leaves or never answers; that line goes to
//!   the hub from the loop's turn, never through the inbox, which may drop;
//! - a cancel the hub sends before the server accepted the goal is sent
//!   when it does;
//! - at most [`MAX_ROS_GOALS`] goals are in flight to ROS 2; past that a
//!   goal is aborted at once;
//! - the feedback topic of an action is subscribed only while goals to it
//!   are in flight.

use std::collections::HashMap;
use std::rc::Rc;
use std::sync::{Arc, MutexGuard};
use std::time::{Duration, Instant};

use rosgate_core::nodes::Domain;
use rosgate_core::Hub;
use rosgate_ros2::action::{self, status};
use rosgate_ros2::cdr;
use rosgate_ros2::rmw::{self, EntityKind};
use serde_json::Value;
use zenoh::liveliness::LivelinessToken;
use zenoh::pubsub::Subscriber;
use zenoh::query::Reply;
use zenoh::sample::{Locality, Sample};
use zenoh::{Session, Wait};

use super::{unix_ns, RosLink, RosShared, Typed};
use crate::first_reply::FirstReply;
use crate::remote::aborted_line;
use crate::{GOAL_QUERY_TIMEOUT_HOURS, QUERY_TIMEOUT_SECS};

/// Goals in flight to ROS 2 action servers, in all.
pub const MAX_ROS_GOALS: usize = rosgate_ros2::link::MAX_GOALS_OUT;

/// A request to one service of an action server.
#[derive(Clone)]
struct Route {
    key: String,
    gid: [u8; 16],
    request: String,
    response: String,
}

/// A goal in flight to a ROS 2 action server.
struct GoalOut {
    domain: Domain,
    action: String,
    /// The bridge's goal id (raw JSON): what the hub knows the goal by.
    id: String,
    send_response: String,
    get_result: Route,
    /// The server accepted it (a cancel can be sent).
    accepted: bool,
    /// The hub cancelled it before the server accepted it: the cancel is
    /// sent on acceptance (sent earlier, the server would not know the id).
    cancel_requested: bool,
}

/// Goals in flight, by goal id, with the bridge's ids and a count per
/// action (whose feedback topic is watched while it is above zero).
#[derive(Default)]
pub(super) struct GoalsOut {
    by_uuid: HashMap<[u8; 16], GoalOut>,
    by_id: HashMap<(Domain, String), [u8; 16]>,
    per_action: HashMap<(Domain, String), usize>,
    /// Accepted goals whose `get_result` the loop has not sent yet.
    to_ask: Vec<[u8; 16]>,
    /// Accepted goals the hub cancelled before: their cancels, not sent yet.
    to_cancel: Vec<[u8; 16]>,
    /// Goals' last lines (`action_result`) for the loop to hand to the
    /// hub itself: never dropped like feedback when the inbox is full, so
    /// every goal ends. At most one per goal.
    ended: Vec<(Domain, String)>,
}

impl GoalsOut {
    fn insert(&mut self, uuid: [u8; 16], g: GoalOut) -> bool {
        if self.by_uuid.len() >= MAX_ROS_GOALS || self.by_uuid.contains_key(&uuid) {
            return false;
        }
        self.by_id.insert((g.domain, g.id.clone()), uuid);
        *self
            .per_action
            .entry((g.domain, g.action.clone()))
            .or_default() += 1;
        self.by_uuid.insert(uuid, g);
        true
    }

    fn remove(&mut self, uuid: &[u8; 16]) -> Option<GoalOut> {
        let g = self.by_uuid.remove(uuid)?;
        self.by_id.remove(&(g.domain, g.id.clone()));
        let k = (g.domain, g.action.clone());
        if let Some(n) = self.per_action.get_mut(&k) {
            *n -= 1;
            if *n == 0 {
                self.per_action.remove(&k);
            }
        }
        Some(g)
    }

    pub(super) fn len(&self) -> usize {
        self.by_uuid.len()
    }
}

/// The feedback topic of an action goals are in flight to.
pub(super) struct Feedback {
    _data: Subscriber<()>,
    _token: Option<LivelinessToken>,
}

/// Decodes a reply's CDR as `ty`, or says why not.
fn decode(shared: &RosShared, ty: &str, reply: Option<&Reply>) -> Result<Value, String> {
    let sample = match reply.map(Reply::result) {
        None => return Err("the ROS 2 action server did not answer".into()),
        Some(Err(e)) => {
            return Err(format!(
                "the ROS 2 action server refused: {}",
                String::from_utf8_lossy(&e.payload().to_bytes())
            ))
        }
        Some(Ok(s)) => s,
    };
    let mut json = Vec::new();
    cdr::decode_json(
        &*shared.types(),
        ty,
        &sample.payload().to_bytes(),
        &mut json,
    )
    .map_err(|e| format!("the ROS 2 action server's answer is not {ty}: {e}"))?;
    serde_json::from_slice(&json).map_err(|e| e.to_string())
}

impl RosShared {
    fn goals(&self) -> MutexGuard<'_, GoalsOut> {
        self.goals.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Ends goal `uuid` with `line(action, id)` to the bridge, if it is
    /// still in flight.
    fn end_goal(&self, uuid: &[u8; 16], line: impl FnOnce(&str, &str) -> String) {
        let mut goals = self.goals();
        let Some(g) = goals.remove(uuid) else {
            return;
        };
        goals.ended.push((g.domain, line(&g.action, &g.id)));
        drop(goals);
        self.fed.wake();
    }

    /// The server's answer to `send_goal`: accepted goals wait for their
    /// result (asked by the loop), others end here.
    fn on_goal_response(&self, uuid: [u8; 16], reply: Option<&Reply>) {
        let ty = match self.goals().by_uuid.get(&uuid) {
            Some(g) => g.send_response.clone(),
            None => return,
        };
        match decode(self, &ty, reply) {
            Ok(v) if v["accepted"] == true => {
                let mut goals = self.goals();
                let cancel = match goals.by_uuid.get_mut(&uuid) {
                    Some(g) => {
                        g.accepted = true;
                        g.cancel_requested
                    }
                    None => false,
                };
                goals.to_ask.push(uuid);
                if cancel {
                    goals.to_cancel.push(uuid);
                }
                drop(goals);
                self.fed.wake();
            }
            Ok(_) => self.end_goal(&uuid, |action, id| {
                format!(
                    "{{\"op\":\"action_result\",\"action\":{},\"values\":\"the ROS 2 action server rejected the goal\",\"status\":{},\"result\":false,\"id\":{id}}}",
                    Value::from(action),
                    status::UNKNOWN
                )
            }),
            Err(why) => self.end_goal(&uuid, |action, id| aborted_line(action, id, &why)),
        }
    }

    /// The server's answer to `get_result`: the goal's end.
    fn on_result(&self, uuid: [u8; 16], reply: Option<&Reply>) {
        let ty = match self.goals().by_uuid.get(&uuid) {
            Some(g) => g.get_result.response.clone(),
            None => return,
        };
        match decode(self, &ty, reply) {
            Ok(v) => {
                let st = v["status"].as_i64().unwrap_or(status::UNKNOWN);
                if (status::SUCCEEDED..=status::ABORTED).contains(&st) {
                    self.end_goal(&uuid, |action, id| {
                        format!(
                            "{{\"op\":\"action_result\",\"action\":{},\"values\":{},\"status\":{st},\"result\":true,\"id\":{id}}}",
                            Value::from(action),
                            v["result"]
                        )
                    });
                } else {
                    let why = format!("the ROS 2 action server ended the goal in status {st}");
                    self.end_goal(&uuid, |action, id| aborted_line(action, id, &why));
                }
            }
            Err(why) => self.end_goal(&uuid, |action, id| aborted_line(action, id, &why)),
        }
    }

    /// A sample of an action's feedback topic: the caller of the goal it
    /// names gets its `feedback` (others' goals are not ours).
    fn on_feedback(&self, domain: Domain, action: &str, s: &Sample) {
        let Some(json) = self.sample_json(s) else {
            return;
        };
        let Ok(v) = serde_json::from_str::<Value>(&json) else {
            return;
        };
        let Some(uuid) = action::goal_id_of(&v) else {
            return;
        };
        let id = {
            let g = self.goals();
            match g.by_uuid.get(&uuid) {
                Some(g) if g.domain == domain && g.action == action => g.id.clone(),
                _ => return,
            }
        };
        let line = format!(
            "{{\"op\":\"action_feedback\",\"action\":{},\"values\":{},\"id\":{id}}}",
            Value::from(action),
            v["feedback"]
        );
        self.fed.reply_line(domain, line);
    }
}

impl RosLink {
    /// A goal the bridge of `domain` received for `action`: sent to a
    /// ROS 2 action server if one serves it (false otherwise: not ours).
    pub(crate) fn send_goal(
        &mut self,
        session: &Session,
        domain: Domain,
        action_name: &str,
        id: &str,
        args: &str,
    ) -> bool {
        if !self.bridged(domain) {
            return false;
        }
        let send_name = format!("{action_name}{}", action::SEND_GOAL);
        let Some(send) = self.shared.served(domain, &send_name) else {
            return false;
        };
        let shared = self.shared.clone();
        let fail = |why: String| {
            shared
                .fed
                .reply_line(domain, aborted_line(action_name, id, &why));
            true
        };
        let types = self.shared.types();
        let action_type = rmw::ros_type_name(&send.dds_type)
            .and_then(|t| action::action_type_of_send_goal(&t).map(str::to_string));
        let Some(def) = action_type.as_deref().and_then(|t| types.action(t)) else {
            return fail(format!(
                "the ROS 2 action's type ({}) is unknown here (--interfaces)",
                send.dds_type
            ));
        };
        let (Some(sg), Some(gr)) = (types.srv(&def.send_goal), types.srv(&def.get_result)) else {
            return fail(format!("{} has no goal services here", def.name));
        };
        let get_name = format!("{action_name}{}", action::GET_RESULT);
        let Some(get) = self.shared.served(domain, &get_name) else {
            return fail("the ROS 2 action server has no get_result service".into());
        };
        self.goal_seq += 1;
        let uuid = action::uuid(&format!("{}/{}/{}", self.zid, self.goal_seq, unix_ns()));
        let goal: Value = rosgate_ros2::json::from_str(args).unwrap_or_default();
        let request = action::send_goal_request(&uuid, goal);
        let bytes = match cdr::encode(&*types, &sg.request, &request) {
            Ok(b) => b,
            Err(e) => return fail(format!("the goal is not {}: {e}", def.goal)),
        };
        let (Some(send_gid), Some(get_gid)) = (
            self.client_gid(session, domain, &send_name, &send),
            self.client_gid(session, domain, &get_name, &get),
        ) else {
            return fail("the gateway could not join the action as a client".into());
        };
        let goal = GoalOut {
            domain,
            action: action_name.to_string(),
            id: id.to_string(),
            send_response: sg.response.clone(),
            get_result: Route {
                key: rmw::data_key(u32::from(domain), &get_name, &get.dds_type, &get.hash),
                gid: get_gid,
                request: gr.request.clone(),
                response: gr.response.clone(),
            },
            accepted: false,
            cancel_requested: false,
        };
        if !self.shared.goals().insert(uuid, goal) {
            return fail(format!(
                "the gateway has {MAX_ROS_GOALS} goals to ROS 2 in flight"
            ));
        }
        let feedback_type = self.typed_msg(&def.feedback_message);
        self.watch_feedback(session, domain, action_name, feedback_type);
        let sh = self.shared.clone();
        let first = FirstReply::new(move |r: Option<&Reply>| sh.on_goal_response(uuid, r));
        let key = rmw::data_key(u32::from(domain), &send_name, &send.dds_type, &send.hash);
        let timeout = Duration::from_secs(QUERY_TIMEOUT_SECS);
        self.shared
            .request(key, bytes, send_gid, timeout, move |r| first.on(r));
        true
    }

    /// A cancel the bridge of `domain` received for goal `id`: sent to
    /// the ROS 2 action server if the goal went to one (false otherwise),
    /// now if the server accepted the goal, else once it does. The goal
    /// ends when the server says so, through its result.
    pub(crate) fn cancel_goal(
        &mut self,
        session: &Session,
        domain: Domain,
        action_name: &str,
        id: &str,
    ) -> bool {
        let uuid = {
            let mut goals = self.shared.goals();
            let Some(uuid) = goals.by_id.get(&(domain, id.to_string())).copied() else {
                return false;
            };
            match goals.by_uuid.get_mut(&uuid) {
                Some(g) if !g.accepted => {
                    g.cancel_requested = true;
                    return true;
                }
                _ => uuid,
            }
        };
        self.send_cancel(session, domain, action_name, uuid);
        true
    }

    /// Sends `cancel_goal` for goal `uuid` of `action_name`.
    fn send_cancel(
        &mut self,
        session: &Session,
        domain: Domain,
        action_name: &str,
        uuid: [u8; 16],
    ) {
        let cancel_name = format!("{action_name}{}", action::CANCEL_GOAL);
        let types = self.shared.types();
        let (Some(typed), Some(srv)) = (
            self.shared.served(domain, &cancel_name),
            types.srv(action::CANCEL_TYPE),
        ) else {
            rosgate_core::log!(
                Info,
                "ros2: cannot cancel a goal of {action_name}: its server has no cancel_goal service"
            );
            return;
        };
        let Ok(bytes) = cdr::encode(&*types, &srv.request, &action::cancel_request(&uuid)) else {
            return;
        };
        let Some(gid) = self.client_gid(session, domain, &cancel_name, &typed) else {
            return;
        };
        let key = rmw::data_key(
            u32::from(domain),
            &cancel_name,
            &typed.dds_type,
            &typed.hash,
        );
        let (sh, response, name) = (
            self.shared.clone(),
            srv.response.clone(),
            action_name.to_string(),
        );
        let first = FirstReply::new(move |r: Option<&Reply>| match decode(&sh, &response, r) {
            Ok(v) if v["return_code"] == action::cancel_code::NONE => {}
            Ok(v) => rosgate_core::log!(
                Info,
                "ros2: {name}'s server did not cancel a goal (return code {})",
                v["return_code"]
            ),
            Err(why) => rosgate_core::log!(Info, "ros2: cancel of a goal of {name}: {why}"),
        });
        let timeout = Duration::from_secs(QUERY_TIMEOUT_SECS);
        self.shared
            .request(key, bytes, gid, timeout, move |r| first.on(r));
    }

    /// Subscribes to `action`'s feedback topic (any type: each sample is
    /// decoded by the type its key names), as an rclcpp action client
    /// does, with its `MS` token when the type is known.
    fn watch_feedback(
        &mut self,
        session: &Session,
        domain: Domain,
        action_name: &str,
        typed: Option<Typed>,
    ) {
        let k = (domain, Rc::<str>::from(action_name));
        if self.feedback.contains_key(&k) {
            return;
        }
        let name = format!("{action_name}{}", action::FEEDBACK);
        let (sh, a) = (self.shared.clone(), action_name.to_string());
        let data = session
            .declare_subscriber(rmw::data_key_any_type(u32::from(domain), &name))
            .allowed_origin(Locality::Remote)
            .callback(move |s: Sample| sh.on_feedback(domain, &a, &s))
            .wait();
        let data = match data {
            Ok(d) => d,
            Err(e) => {
                rosgate_core::log!(Warn, "ros2: cannot subscribe to {name}: {e}");
                return;
            }
        };
        let token = typed.and_then(|t| {
            self.declare(session, domain, EntityKind::Subscription, &name, &t)
                .map(|(_, tok)| tok)
        });
        self.feedback.insert(
            k,
            Feedback {
                _data: data,
                _token: token,
            },
        );
    }

    /// Hands ended goals' results to the hub, sends the `get_result` of
    /// each goal a server accepted (and the cancels that waited for it),
    /// and stops watching the feedback of actions no goal is in flight to.
    pub(super) fn turn_goals(&mut self, session: &Session, hub: &mut Hub, now: Instant) {
        let (ended, asks, cancels) = {
            let mut g = self.shared.goals();
            let ended = std::mem::take(&mut g.ended);
            let asks: Vec<([u8; 16], Route)> = std::mem::take(&mut g.to_ask)
                .into_iter()
                .filter_map(|u| Some((u, g.by_uuid.get(&u)?.get_result.clone())))
                .collect();
            let cancels: Vec<([u8; 16], Domain, String)> = std::mem::take(&mut g.to_cancel)
                .into_iter()
                .filter_map(|u| {
                    let x = g.by_uuid.get(&u)?;
                    Some((u, x.domain, x.action.clone()))
                })
                .collect();
            (ended, asks, cancels)
        };
        for (domain, line) in ended {
            hub.remote_reply(domain, line.as_bytes(), now);
        }
        for (uuid, route) in asks {
            let types = self.shared.types();
            let request = action::get_result_request(&uuid);
            let Ok(bytes) = cdr::encode(&*types, &route.request, &request) else {
                let why = format!("cannot ask for the result as {}", route.request);
                self.shared
                    .end_goal(&uuid, |action, id| aborted_line(action, id, &why));
                continue;
            };
            let sh = self.shared.clone();
            let first = FirstReply::new(move |r: Option<&Reply>| sh.on_result(uuid, r));
            // Goals may run for long; the caller's own timeout (and
            // --goal-timeout-ms) apply on this gateway as for a local server.
            let timeout = Duration::from_secs(GOAL_QUERY_TIMEOUT_HOURS * 3600);
            self.shared
                .request(route.key, bytes, route.gid, timeout, move |r| first.on(r));
        }
        for (uuid, domain, action_name) in cancels {
            self.send_cancel(session, domain, &action_name, uuid);
        }
        if !self.feedback.is_empty() {
            let g = self.shared.goals();
            self.feedback
                .retain(|(d, a), _| g.per_action.contains_key(&(*d, a.to_string())));
        }
    }
}

/// How many goals are in flight to ROS 2 (for the status).
pub(super) fn in_flight(shared: &Arc<RosShared>) -> usize {
    shared.goals().len()
}
