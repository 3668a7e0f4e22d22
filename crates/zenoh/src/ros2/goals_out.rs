//! Goals local clients send to ROS 2 action servers over rmw_zenoh, as
//! the ROS 2 link's state machine (`rosgate_ros2::link`, its `goals_out`)
//! decides them: this module only carries its events in and executes its
//! actions. A `send_action_goal` the hub routed to the bridge becomes
//! the link's `SendGoal` with a fresh goal UUID; the link asks for
//! `send_goal`, then `get_result` once accepted, `cancel_goal` (held until
//! acceptance), and to watch the action's feedback topic while goals are
//! in flight; this module makes those requests and subscriptions, and
//! hands their replies, ends and feedback back to the link as events.
//!
//! Replies, feedback and the action servers' tokens reach the link
//! through the shell's event queue (`exec.rs`), and the goals' feedback
//! and ends reach the hub from the loop's turn, in order.
//!
//! Invariant (the link's; see its module docs): every goal sent ends in
//! exactly one `action_result` to the bridge: the server's result, a
//! rejection (status 0), or an abort (status 6) when the server refuses,
//! leaves or never answers.

use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

use rosgate_core::nodes::Domain;
use rosgate_ros2::action::{self, status};
use rosgate_ros2::cdr;
use rosgate_ros2::link::{self, Event, Reply as LinkReply};
use rosgate_ros2::registry::Registry;
use rosgate_ros2::rmw::{self, EntityKind};
use serde_json::Value;
use zenoh::query::Reply;
use zenoh::sample::{Locality, Sample};
use zenoh::{Session, Wait};

use super::{unix_ns, RosLink, RosShared, Typed};
use crate::first_reply::FirstReply;
use crate::worker::Declared;
use crate::{GOAL_QUERY_TIMEOUT_HOURS, QUERY_TIMEOUT_SECS};

/// A request to `get_result` of an accepted goal: where, as whom, typed.
struct ResultRoute {
    key: String,
    gid: [u8; 16],
    request: String,
    response: String,
}

/// What the loop keeps beside the link for goals to ROS 2.
#[derive(Default)]
pub(super) struct GoalsOut {
    /// Per goal UUID: where its result is asked (until it is).
    routes: HashMap<[u8; 16], ResultRoute>,
    /// The UUID of each goal in flight, by the bridge's goal id: the
    /// route goes with the goal's end. At most one per goal the link
    /// holds (`rosgate_ros2::link::MAX_GOALS_OUT`).
    uuids: HashMap<(Domain, String), [u8; 16]>,
}

/// The feedback topic of an action goals are in flight to.
pub(super) struct Feedback {
    _data: Declared,
    _token: Option<Declared>,
}

/// Decodes a reply's CDR as `ty`: the link's reply, or `None` when the
/// query ended without one.
fn decode(types: &Registry, ty: &str, reply: Option<&Reply>) -> Option<Result<Value, String>> {
    let sample = match reply.map(Reply::result) {
        None => return None,
        Some(Err(e)) => {
            return Some(Err(format!(
                "the ROS 2 action server refused: {}",
                String::from_utf8_lossy(&e.payload().to_bytes())
            )))
        }
        Some(Ok(s)) => s,
    };
    let mut json = Vec::new();
    if let Err(e) = cdr::decode_json(types, ty, &sample.payload().to_bytes(), &mut json) {
        return Some(Err(format!(
            "the ROS 2 action server's answer is not {ty}: {e}"
        )));
    }
    Some(serde_json::from_slice(&json).map_err(|e| e.to_string()))
}

impl RosShared {
    /// A sample of an action's feedback topic: the link matches its goal.
    fn on_feedback(&self, types: &Registry, domain: Domain, action: &str, s: &Sample) {
        let Some(json) = super::sample_json(types, s) else {
            return;
        };
        let Ok(v) = serde_json::from_str::<Value>(&json) else {
            return;
        };
        let Some(uuid) = action::goal_id_of(&v) else {
            return;
        };
        self.to_link(Event::Feedback {
            domain: u32::from(domain),
            action: action.to_string(),
            uuid,
            payload: v["feedback"].to_string().into_bytes(),
        });
    }
}

impl RosLink {
    /// A fresh UUID for the bridge's goal `id` to ROS 2, kept so the
    /// goal's replies find it.
    pub(super) fn goal_uuid(&mut self, domain: Domain, id: &str) -> [u8; 16] {
        self.goal_seq += 1;
        let uuid = action::uuid(&format!("{}/{}/{}", self.zid, self.goal_seq, unix_ns()));
        self.goals_out.uuids.insert((domain, id.to_string()), uuid);
        uuid
    }

    /// The link ended the bridge's goal `id`: what was kept for it goes.
    pub(super) fn goal_ended(&mut self, domain: Domain, id: &str) {
        if let Some(u) = self.goals_out.uuids.remove(&(domain, id.to_string())) {
            self.goals_out.routes.remove(&u);
        }
    }

    /// `send_goal` of goal `uuid` (the link's query `query`): the request
    /// typed as the action's server declared it; the route of its
    /// `get_result` is kept for when the server accepts.
    pub(super) fn exec_send_goal(
        &mut self,
        session: &Session,
        domain: Domain,
        action_name: &str,
        uuid: [u8; 16],
        query: link::QueryId,
        args: &str,
    ) -> Result<(), String> {
        let send_name = format!("{action_name}{}", action::SEND_GOAL);
        let get_name = format!("{action_name}{}", action::GET_RESULT);
        let (Some(send), Some(get)) = (
            self.served(domain, &send_name),
            self.served(domain, &get_name),
        ) else {
            return Err("the ROS 2 action server has no goal services".into());
        };
        let types = self.types();
        let action_type = rmw::ros_type_name(&send.dds_type)
            .and_then(|t| action::action_type_of_send_goal(&t).map(str::to_string));
        let Some(def) = action_type.as_deref().and_then(|t| types.action(t)) else {
            return Err(format!(
                "the ROS 2 action's type ({}) is unknown here (--interfaces)",
                send.dds_type
            ));
        };
        let (Some(sg), Some(gr)) = (types.srv(&def.send_goal), types.srv(&def.get_result)) else {
            return Err(format!("{} has no goal services here", def.name));
        };
        let goal: Value = rosgate_ros2::json::from_str(args).unwrap_or_default();
        let request = action::send_goal_request(&uuid, goal);
        let bytes = cdr::encode(&*types, &sg.request, &request)
            .map_err(|e| format!("the goal is not {}: {e}", def.goal))?;
        let (Some(send_gid), Some(get_gid)) = (
            self.client_gid(session, domain, &send_name, &send),
            self.client_gid(session, domain, &get_name, &get),
        ) else {
            return Err("the gateway could not join the action as a client".into());
        };
        let route = ResultRoute {
            key: rmw::data_key(u32::from(domain), &get_name, &get.dds_type, &get.hash),
            gid: get_gid,
            request: gr.request.clone(),
            response: gr.response.clone(),
        };
        self.goals_out.routes.insert(uuid, route);
        let (sh, response) = (self.shared.clone(), sg.response.clone());
        let first = FirstReply::new(move |r: Option<&Reply>| {
            let reply = decode(&types, &response, r)
                .map(|v| v.map(|v| LinkReply::Accepted(v["accepted"] == true)));
            sh.reply_to_link(query, reply);
        });
        let key = rmw::data_key(u32::from(domain), &send_name, &send.dds_type, &send.hash);
        let timeout = Duration::from_secs(QUERY_TIMEOUT_SECS);
        // After the feedback subscriber the link may just have asked for
        // (worker.rs), or the goal's first feedback could be lost.
        let sh = self.shared.clone();
        self.decls.after(move || {
            sh.request(key, bytes, send_gid, timeout, move |r| first.on(r));
        });
        Ok(())
    }

    /// `get_result` of accepted goal `uuid` (the link's query `query`).
    pub(super) fn exec_get_result(
        &mut self,
        uuid: [u8; 16],
        query: link::QueryId,
    ) -> Result<(), String> {
        let Some(route) = self.goals_out.routes.remove(&uuid) else {
            return Err("the goal's result cannot be asked".into());
        };
        let types = self.types();
        let request = action::get_result_request(&uuid);
        let bytes = cdr::encode(&*types, &route.request, &request)
            .map_err(|_| format!("cannot ask for the result as {}", route.request))?;
        let (sh, response) = (self.shared.clone(), route.response);
        let first = FirstReply::new(move |r: Option<&Reply>| {
            let reply = decode(&types, &response, r).map(|v| {
                v.map(|v| LinkReply::Result {
                    status: i8::try_from(v["status"].as_i64().unwrap_or(status::UNKNOWN))
                        .unwrap_or(0),
                    payload: v["result"].to_string().into_bytes(),
                })
            });
            sh.reply_to_link(query, reply);
        });
        // Goals may run for long; the caller's own timeout (and
        // --goal-timeout-ms) apply on this gateway as for a local server.
        let timeout = Duration::from_secs(GOAL_QUERY_TIMEOUT_HOURS * 3600);
        self.shared
            .request(route.key, bytes, route.gid, timeout, move |r| first.on(r));
        Ok(())
    }

    /// The feedback message type of `action` as its server declared it,
    /// for this gateway's `MS` token of the feedback topic.
    pub(super) fn feedback_type(&self, domain: Domain, action_name: &str) -> Option<Typed> {
        let send = self.served(domain, &format!("{action_name}{}", action::SEND_GOAL))?;
        let types = self.types();
        let action_type = rmw::ros_type_name(&send.dds_type)
            .and_then(|t| action::action_type_of_send_goal(&t).map(str::to_string))?;
        let def = types.action(&action_type)?;
        self.typed_msg(&def.feedback_message)
    }

    /// Sends `cancel_goal` for goal `uuid` of `action_name`.
    pub(super) fn send_cancel(
        &mut self,
        session: &Session,
        domain: Domain,
        action_name: &str,
        uuid: [u8; 16],
    ) {
        let cancel_name = format!("{action_name}{}", action::CANCEL_GOAL);
        let types = self.types();
        let (Some(typed), Some(srv)) = (
            self.served(domain, &cancel_name),
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
        let (response, name) = (srv.response.clone(), action_name.to_string());
        let snapshot = types.clone();
        let first =
            FirstReply::new(
                move |r: Option<&Reply>| match decode(&snapshot, &response, r) {
                    Some(Ok(v)) if v["return_code"] == action::cancel_code::NONE => {}
                    Some(Ok(v)) => rosgate_core::log!(
                        Info,
                        "ros2: {name}'s server did not cancel a goal (return code {})",
                        v["return_code"]
                    ),
                    Some(Err(why)) => {
                        rosgate_core::log!(Info, "ros2: cancel of a goal of {name}: {why}")
                    }
                    None => rosgate_core::log!(Info, "ros2: cancel of a goal of {name}: no answer"),
                },
            );
        let timeout = Duration::from_secs(QUERY_TIMEOUT_SECS);
        // Not before the goal it cancels, if that went after a declaration.
        let sh = self.shared.clone();
        self.decls.after(move || {
            sh.request(key, bytes, gid, timeout, move |r| first.on(r));
        });
    }

    /// Subscribes to `action`'s feedback topic (any type: each sample is
    /// decoded by the type its key names), as an rclcpp action client
    /// does, with its `MS` token when the type is known.
    pub(super) fn watch_feedback(
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
        let (sh, a, types) = (self.shared.clone(), action_name.to_string(), self.types());
        let key = rmw::data_key_any_type(u32::from(domain), &name);
        let data = self.decls.declare(
            format!("ros2: cannot subscribe to {name}"),
            move |session: &Session| {
                session
                    .declare_subscriber(key)
                    .allowed_origin(Locality::Remote)
                    .callback(move |s: Sample| sh.on_feedback(&types, domain, &a, &s))
                    .wait()
            },
        );
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
}
