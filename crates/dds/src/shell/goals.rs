//! Actions both ways over DDS: an action is three services and two topics
//! (`<action>/_action/send_goal`, `get_result`, `cancel_goal`; `feedback`,
//! `status`), so this executes the link's goal decisions with the
//! services of `calls.rs` and the topics of the shell:
//! - goals to a ROS 2 action server: this gateway joins its goal services
//!   as a client when the server is discovered; `send_goal`, `get_result`
//!   and `cancel_goal` are requests whose replies go to the link as it
//!   expects them; the feedback topic is read while goals are in flight;
//! - a local action server offered to ROS 2: the three goal services
//!   offered (requests mapped to the link's goal requests by
//!   `rosgate_peers::ros2::goals`), and feedback and status writers (the
//!   status transient local, as rclcpp's) whose messages the link asks.
//!
//! Invariant: every goal ends once both ways (the link's); what cannot be
//! sent is the peer's refusal to the link, at once.

use std::rc::Rc;

use rosgate_core::nodes::Domain;
use rosgate_peers::ros2::asks::Shell;
use rosgate_ros2::action;
use rosgate_ros2::cdr;
use rosgate_ros2::link::rmw_dds::{self, Role};
use rosgate_ros2::link::{self, Event, Gid, Stamp};
use rosgate_ros2::rmw;

use super::calls::Expect;
use super::{DdsPeer, Writer};
use crate::pump::Kind;
use crate::qos;

/// A local action offered to ROS 2: its feedback and status writers (its
/// goal services are `calls.rs`'s servers).
pub(super) struct OfferedAction {
    feedback: (Writer, Gid),
    status: (Writer, Gid),
    feedback_type: String,
    /// The action's type, as the hub's server named it.
    pub(super) ty: String,
    /// `get_result`'s response type (a result must fit it).
    pub(super) result_type: String,
}

impl OfferedAction {
    pub(super) fn gids(&self) -> [Gid; 2] {
        [self.feedback.1, self.status.1]
    }
}

impl DdsPeer {
    /// ROS 2 serves action `name` of type `ty` (or no longer, `None`):
    /// this gateway joins (or leaves) its goal services as a client.
    pub(super) fn action_client_of(&mut self, domain: Domain, name: &str, ty: Option<&str>) {
        let key = (domain, Rc::<str>::from(name));
        let def = ty.and_then(|t| self.link.types().action(t).cloned());
        match (&def, ty) {
            (Some(_), Some(t)) => {
                self.action_types.insert(key, t.to_string());
            }
            _ => {
                self.action_types.remove(&key);
            }
        }
        let parts = [
            (action::SEND_GOAL, def.as_ref().map(|d| d.send_goal.clone())),
            (
                action::GET_RESULT,
                def.as_ref().map(|d| d.get_result.clone()),
            ),
            (
                action::CANCEL_GOAL,
                def.as_ref().map(|_| action::CANCEL_TYPE.to_string()),
            ),
        ];
        for (part, srv) in parts {
            self.client_of(domain, &format!("{name}{part}"), srv.as_deref());
        }
    }

    /// The goal service `part` of ROS 2 action `name`, and its service type.
    fn goal_service(
        &self,
        domain: Domain,
        name: &str,
        part: &str,
    ) -> Result<(String, String), String> {
        let ty = self
            .action_types
            .get(&(domain, Rc::from(name)))
            .ok_or_else(|| {
                format!("the ROS 2 action {name}'s type is unknown here (--interfaces)")
            })?;
        let types = self.link.types();
        let def = types
            .action(ty)
            .ok_or_else(|| format!("{ty} is unknown here (--interfaces)"))?;
        let srv = match part {
            action::SEND_GOAL => def.send_goal.clone(),
            action::GET_RESULT => def.get_result.clone(),
            _ => action::CANCEL_TYPE.to_string(),
        };
        Ok((format!("{name}{part}"), srv))
    }

    /// `send_goal` of goal `uuid` with the client's goal (JSON).
    pub(super) fn exec_send_goal(
        &mut self,
        domain: Domain,
        name: &str,
        uuid: [u8; 16],
        query: link::QueryId,
        goal: &[u8],
    ) -> Result<(), String> {
        let (service, srv) = self.goal_service(domain, name, action::SEND_GOAL)?;
        let goal = rosgate_ros2::json::from_slice(goal).unwrap_or_default();
        let v = action::send_goal_request(&uuid, goal);
        self.send_request(domain, &service, &srv, &v, query, Expect::Accepted)
    }

    /// `get_result` of accepted goal `uuid`.
    pub(super) fn exec_get_result(
        &mut self,
        domain: Domain,
        name: &str,
        uuid: [u8; 16],
        query: link::QueryId,
    ) -> Result<(), String> {
        let (service, srv) = self.goal_service(domain, name, action::GET_RESULT)?;
        let v = action::get_result_request(&uuid);
        self.send_request(domain, &service, &srv, &v, query, Expect::Result)
    }

    /// `cancel_goal` of goal `uuid` (the goal ends through its result).
    pub(super) fn exec_cancel(
        &mut self,
        domain: Domain,
        name: &str,
        uuid: [u8; 16],
        query: link::QueryId,
    ) {
        let sent = self
            .goal_service(domain, name, action::CANCEL_GOAL)
            .and_then(|(service, srv)| {
                let v = action::cancel_request(&uuid);
                self.send_request(domain, &service, &srv, &v, query, Expect::Nothing)
            });
        if let Err(why) = sent {
            rosgate_core::log!(Info, "dds: cannot cancel a goal of {name}: {why}");
        }
    }

    /// Reads action `name`'s feedback topic (`on`), or stops.
    pub(super) fn exec_watch_feedback(&mut self, domain: Domain, name: &str, on: bool) {
        let key = (domain, Rc::<str>::from(name));
        if let Some(s) = self.feedback.remove(&key) {
            if let Some(sh) = self.shared() {
                sh.remove(s.token);
            }
            self.info_changed(domain);
        }
        if !on {
            return;
        }
        let ty = self.action_types.get(&key).cloned();
        let types = self.link.types().clone();
        let Some(def) = ty.as_deref().and_then(|t| types.action(t)) else {
            return;
        };
        let Some(dds_type) = rmw::dds_type_name(&def.feedback_message) else {
            return;
        };
        let q = qos::reader(&[]);
        let topic = rmw_dds::dds_name(&format!("{name}{}", action::FEEDBACK), Role::Topic);
        let kind = Kind::Feedback {
            domain,
            action: name.to_string(),
        };
        let what = format!("cannot read {name}'s feedback");
        if let Some(sub) = self.reader_to_pump(domain, topic, dds_type, &q, kind, &what) {
            self.feedback.insert(key, sub);
            self.info_changed(domain);
        }
    }

    /// A feedback message of action `name`: its goal's UUID and feedback
    /// for the link (which matches the goal).
    pub(super) fn on_feedback(&mut self, domain: Domain, name: &str, payload: &[u8]) {
        let types = self.link.types().clone();
        let ty = self.action_types.get(&(domain, Rc::from(name))).cloned();
        let Some(def) = ty.as_deref().and_then(|t| types.action(t)) else {
            return;
        };
        let mut json = Vec::new();
        if cdr::decode_json(&*types, &def.feedback_message, payload, &mut json).is_err() {
            self.stray += 1;
            return;
        }
        let Ok(v) = serde_json::from_slice::<serde_json::Value>(&json) else {
            return;
        };
        let Some(uuid) = action::goal_id_of(&v) else {
            return;
        };
        self.link.handle(Event::Feedback {
            domain: u32::from(domain),
            action: name.to_string(),
            uuid,
            payload: v["feedback"].to_string().into_bytes(),
        });
    }

    /// The link offers a local action server to ROS 2 (`on`), or withdraws
    /// it: its three goal services and its feedback and status writers.
    pub(super) fn exec_offer_action(&mut self, domain: Domain, name: &str, ty: &str, on: bool) {
        let key = (domain, Rc::<str>::from(name));
        for part in [action::SEND_GOAL, action::GET_RESULT, action::CANCEL_GOAL] {
            self.drop_server(domain, &format!("{name}{part}"));
        }
        if let Some(old) = self.offered_actions.remove(&key) {
            for gid in old.gids() {
                self.link.handle(Event::OwnPublisher { gid, on: false });
            }
            self.info_changed(domain);
        }
        if !on {
            return;
        }
        let types = self.link.types().clone();
        let Some(def) = types.action(ty).cloned() else {
            rosgate_core::log!(
                Info,
                "dds: action {name} not offered to ROS 2: its type {ty:?} is unknown (--interfaces)"
            );
            return;
        };
        let Some(result_type) = types.srv(&def.get_result).map(|s| s.response.clone()) else {
            return;
        };
        let owner = Rc::<str>::from(name);
        for (part, srv) in [
            (action::SEND_GOAL, def.send_goal.as_str()),
            (action::GET_RESULT, def.get_result.as_str()),
            (action::CANCEL_GOAL, action::CANCEL_TYPE),
        ] {
            self.make_server(
                domain,
                &format!("{name}{part}"),
                srv,
                Some((part, owner.clone())),
            );
        }
        let feedback =
            self.action_writer(domain, name, action::FEEDBACK, &def.feedback_message, None);
        // rclcpp's status publisher is transient local, keep last 1.
        let status = self.action_writer(domain, name, action::STATUS, action::STATUS_TYPE, Some(1));
        let (Some(feedback), Some(status)) = (feedback, status) else {
            return;
        };
        for gid in [feedback.1, status.1] {
            self.link.handle(Event::OwnPublisher { gid, on: true });
        }
        self.offered_actions.insert(
            key,
            OfferedAction {
                feedback,
                status,
                feedback_type: def.feedback_message.clone(),
                ty: def.name.clone(),
                result_type,
            },
        );
        self.info_changed(domain);
    }

    fn action_writer(
        &self,
        domain: Domain,
        name: &str,
        part: &str,
        ty: &str,
        latched: Option<u32>,
    ) -> Option<(Writer, Gid)> {
        let topic = rmw_dds::dds_name(&format!("{name}{part}"), Role::Topic);
        let what = format!("cannot offer {name}{part}");
        self.writer(
            domain,
            topic,
            rmw::dds_type_name(ty)?,
            &qos::writer(latched),
            &what,
        )
    }

    /// The link's feedback for a goal from ROS 2, or (`goals`) the
    /// action's status array.
    pub(super) fn exec_put_action(
        &mut self,
        domain: Domain,
        name: &str,
        feedback: Option<([u8; 16], &[u8])>,
        goals: &[([u8; 16], Stamp, i8)],
    ) {
        let types = self.link.types().clone();
        let Some(o) = self.offered_actions.get(&(domain, Rc::from(name))) else {
            return;
        };
        let (writer, ty, msg) = match feedback {
            Some((uuid, payload)) => (
                &o.feedback.0,
                o.feedback_type.as_str(),
                rosgate_peers::ros2::goals::feedback_json(uuid, payload),
            ),
            None => (
                &o.status.0,
                action::STATUS_TYPE,
                rosgate_peers::ros2::goals::status_json(goals),
            ),
        };
        let Ok(bytes) = cdr::encode(&*types, ty, &msg) else {
            return;
        };
        if writer.write(bytes, None).is_err() {
            self.shed += 1;
        }
    }

    /// A local action server's feedback or end for goal `id` from ROS 2.
    pub(super) fn goal_from_local(&mut self, id: &str, values: &str, end: Option<(u8, bool)>) {
        let Some(n) = rosgate_peers::ros2::edge::parse_goal_id(id) else {
            return;
        };
        let Some((domain, name)) = self.link.goal_in(n) else {
            return;
        };
        let result_type = Domain::try_from(domain)
            .ok()
            .and_then(|d| self.offered_actions.get(&(d, Rc::from(name))))
            .map(|o| o.result_type.clone());
        let end = end.map(|(st, ok)| (i64::from(st), ok));
        let update = rosgate_peers::ros2::goals::goal_update(
            self.link.types(),
            result_type.as_deref(),
            values,
            end,
        );
        self.link.handle(Event::GoalUpdate { goal: n, update });
        self.run();
    }

    /// A fresh goal UUID for the bridge's goal `id`.
    pub(super) fn goal_uuid(&mut self, id: &str) -> [u8; 16] {
        self.goal_seq += 1;
        let (sec, nsec) = rosgate_peers::ros2::goals::stamp_now();
        let me = self
            .doms
            .values()
            .next()
            .map(|d| rmw_dds::participant_of(&d.gid))
            .unwrap_or_default();
        action::uuid(&format!("{me}/{}/{id}/{sec}.{nsec}", self.goal_seq))
    }
}
