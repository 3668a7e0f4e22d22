//! The gateway as tf2_web_republisher (docs/tf.md): `/tf` and
//! `/tf_static` into one [`TfBuffer`] per domain, and the republisher's
//! three interfaces served by the gateway itself when no client provides
//! them: the service [`REPUBLISH_TFS_SERVICE`] (a `TFArray` topic per
//! request, roslibpy's TFClient), the ROS 1 actionlib action over
//! `/tf2_web_republisher/{goal,cancel,feedback}` topics (roslib's
//! TFClient) and the ROS 2 action [`TF_ACTION`] (roslib's ROS2TFClient).
//! The subscriptions and their ticks are [`Republisher`]'s
//! (`crate::tf::republisher`); this file wires them to topics, calls and
//! goals.
//!
//! Invariants:
//! - lazy: `/tf` is read (and asked of the ROS 2 graph) in a domain only
//!   while a TF subscription exists there; `/tf_static` from clients is
//!   always read (latched, rare, and a late first TF client could not get
//!   it back otherwise) and asked of the graph under the same rule as
//!   `/tf`; when a domain's last subscription ends, its dynamic frames are
//!   dropped and its static ones kept until their publishers go;
//! - the tap is one prefix test (`/tf`) on the publish path; everything
//!   else runs off it (`#[cold]`);
//! - a client that serves the service or the action (ROS 2:
//!   `advertise_service`/`advertise_action`; ROS 1: a subscriber of
//!   `/tf2_web_republisher/goal`) wins: requests go to it, not here;
//! - every subscription ends on cancel, on its client's close, and a
//!   topic's after its timeout without a subscriber; a ROS 2 goal ends
//!   with one `action_result` (status 5) when canceled;
//! - a frame that cannot be looked up gets one warning status to the
//!   subscription's client when it breaks, never one per tick.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::Value;

use rosgate_wire::encode::{self, Level};
use rosgate_wire::Raw;

use super::actions::FEEDBACK_BUCKET;
use super::answer::{Answer, GoalEnd, GoalFailure};
use super::topics::Origin;
use super::Hub;
use crate::conn::ConnRef;
use crate::nodes::Domain;
use crate::registry::Provided;
use crate::tf::buffer::FrameInfo;
use crate::tf::msg::{self, Stamp};
use crate::tf::republisher::{Delivery, Republisher, MAX_TF_LOOKUPS_PER_TURN};
use crate::tf::TfBuffer;
pub use crate::tf::{
    REPUBLISH_TFS_SERVICE, REPUBLISH_TFS_TYPE, TF_ACTION, TF_ACTION_TYPE, TF_FRAMES_SERVICE,
    TF_STATIC_TOPIC, TF_TOPIC,
};

/// Frames one `/rosgate/tf_frames` reply lists.
pub const MAX_TF_FRAMES_LISTED: usize = 10_000;

const ROS1_GOAL: &str = "/tf2_web_republisher/goal";
const ROS1_CANCEL: &str = "/tf2_web_republisher/cancel";
const ROS1_FEEDBACK: &str = "/tf2_web_republisher/feedback";
const ROS1_RESULT: &str = "/tf2_web_republisher/result";
/// tf2_web_republisher's topics are `~tf_repub_<n>` of its node.
const REPUB_TOPIC_PREFIX: &str = "/tf2_web_republisher/tf_repub_";

/// actionlib_msgs/GoalStatus values.
const ROS1_ACTIVE: u8 = 1;
const ROS1_PREEMPTED: u8 = 2;
const ROS1_REJECTED: u8 = 5;
/// action_msgs/GoalStatus CANCELED.
const ROS2_CANCELED: &[u8] = b"5";

/// What the hub keeps for TF.
#[derive(Debug)]
pub(super) struct TfState {
    buffers: HashMap<Domain, TfBuffer>,
    repub: Republisher,
    next_topic: u64,
    /// Transforms in `/tf` messages that could not be read or stored.
    bad_samples: u64,
}

impl TfState {
    pub(super) fn new(now: Instant) -> Self {
        TfState {
            buffers: HashMap::new(),
            repub: Republisher::new(now),
            next_topic: 0,
            bad_samples: 0,
        }
    }

    /// Bytes held, for the memory ledger.
    pub(super) fn bytes(&self) -> usize {
        self.buffers.values().map(TfBuffer::bytes).sum::<usize>() + self.repub.len() * 512
    }

    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.repub.next_deadline()
    }

    /// Ticks wait for the next turn (the turn's lookups ran out).
    pub(super) fn has_immediate(&self) -> bool {
        self.repub.has_ready()
    }
}

fn owner_key(c: ConnRef) -> u64 {
    (u64::from(c.key) << 32) | u64::from(c.gen)
}

fn json_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

impl Hub {
    /// Whether the gateway wants `topic` in `domain` for TF (the lazy
    /// rule, for the ROS 2 graph's interest).
    pub(super) fn tf_wants(&self, domain: Domain, topic: &str) -> bool {
        (topic == TF_TOPIC || topic == TF_STATIC_TOPIC) && self.tf.repub.in_domain(domain) > 0
    }

    /// A message on a topic under `/tf` (the publish path's tap).
    #[cold]
    #[inline(never)]
    pub(super) fn tf_tap(
        &mut self,
        from: Option<ConnRef>,
        domain: Domain,
        topic: &str,
        msg: Raw<'_>,
        now: Instant,
    ) {
        match topic {
            TF_TOPIC if self.tf.repub.in_domain(domain) > 0 => {
                self.tf_samples(from, domain, msg.get(), false)
            }
            TF_STATIC_TOPIC => self.tf_samples(from, domain, msg.get(), true),
            ROS1_GOAL | ROS1_CANCEL => {
                // A client's goal only: one coming through a bridge is
                // served by the gateway its client is on.
                let Some(me) = from.filter(|&c| self.live(c) && !self.is_bridge(c)) else {
                    return;
                };
                if self.tf_ros1_served_by_client(domain) {
                    return;
                }
                if topic == ROS1_GOAL {
                    self.tf_ros1_goal(me, domain, msg.get(), now);
                } else {
                    self.tf_ros1_cancel(me, domain, msg.get(), now);
                }
            }
            _ => {}
        }
    }

    fn tf_samples(&mut self, from: Option<ConnRef>, domain: Domain, text: &str, is_static: bool) {
        let (list, bad) = msg::parse_tf_message(text);
        self.tf.bad_samples += bad as u64;
        // A static frame lives as long as its publisher; the graph's (no
        // client connection) until replaced.
        let owner = from.filter(|&c| !self.is_bridge(c)).map(owner_key);
        let buf = self.tf.buffers.entry(domain).or_default();
        for s in list {
            if buf
                .insert(&s.child, &s.parent, s.stamp_ns, s.tf, is_static, owner)
                .is_err()
            {
                self.tf.bad_samples += 1;
            }
        }
    }

    /// Whether a client serves the ROS 1 action (subscribes to its goals).
    fn tf_ros1_served_by_client(&self, domain: Domain) -> bool {
        self.listens(domain, ROS1_GOAL)
    }

    fn tf_ros1_goal(&mut self, me: ConnRef, domain: Domain, text: &str, now: Instant) {
        let v: Value = serde_json::from_str(text).unwrap_or(Value::Null);
        let goal_id = v["goal_id"]["id"].as_str().unwrap_or("").to_string();
        let goal_id = if goal_id.is_empty() {
            self.tf.next_topic += 1;
            format!("rosgate-tf-{}", self.tf.next_topic)
        } else {
            goal_id
        };
        // A goal id sent again replaces the goal.
        let same = self.tf.repub.find(
            me,
            |s| matches!(&s.delivery, Delivery::Ros1Goal { goal_id: g, .. } if **g == *goal_id),
        );
        for id in same {
            self.tf_end(id, now);
        }
        let req = match msg::parse_request(&v["goal"]) {
            Ok(r) => r,
            Err(why) => {
                let text = format!("{ROS1_GOAL}: goal {goal_id} refused: {why}");
                self.send_status(me, Level::Error, &text, None, now);
                return self.tf_ros1_result(domain, &goal_id, ROS1_REJECTED, &text, now);
            }
        };
        let delivery = Delivery::Ros1Goal {
            server: TF_ACTION.into(),
            goal_id: goal_id.clone().into(),
        };
        if let Err(why) = self.tf_add(me, domain, delivery, req, now) {
            let text = format!("{ROS1_GOAL}: goal {goal_id} refused: {why}");
            self.send_status(me, Level::Error, &text, None, now);
            self.tf_ros1_result(domain, &goal_id, ROS1_REJECTED, &text, now);
        }
    }

    fn tf_ros1_cancel(&mut self, me: ConnRef, domain: Domain, text: &str, now: Instant) {
        let v: Value = serde_json::from_str(text).unwrap_or(Value::Null);
        let want = v["id"].as_str().unwrap_or("");
        // actionlib's empty id cancels all goals; here all of this
        // client's (another client's goals are not its to end).
        let ids = self.tf.repub.find(me, |s| {
            matches!(&s.delivery, Delivery::Ros1Goal { goal_id, .. } if want.is_empty() || **goal_id == *want)
        });
        for id in ids {
            let gid = match self.tf.repub.get(id).map(|s| &s.delivery) {
                Some(Delivery::Ros1Goal { goal_id, .. }) => goal_id.to_string(),
                _ => continue,
            };
            self.tf_end(id, now);
            self.tf_ros1_result(domain, &gid, ROS1_PREEMPTED, "canceled", now);
        }
    }

    /// `actionlib_msgs/GoalStatus` of a ROS 1 goal, as JSON.
    fn tf_ros1_status(&self, goal_id: &str, status: u8, text: &str, now: Instant) -> String {
        let (s, ns) = self.wall(now);
        format!(
            "{{\"header\":{{\"seq\":0,\"stamp\":{{\"secs\":{s},\"nsecs\":{ns}}},\"frame_id\":\"\"}},\"status\":{{\"goal_id\":{{\"stamp\":{{\"secs\":0,\"nsecs\":0}},\"id\":{}}},\"status\":{status},\"text\":{}}}",
            json_str(goal_id),
            json_str(text)
        )
    }

    fn tf_ros1_result(
        &mut self,
        domain: Domain,
        goal_id: &str,
        status: u8,
        text: &str,
        now: Instant,
    ) {
        if !self.listens(domain, ROS1_RESULT) {
            return;
        }
        let line = format!(
            "{},\"result\":{{}}}}",
            self.tf_ros1_status(goal_id, status, text, now)
        );
        self.route(
            Origin::Gateway,
            domain,
            ROS1_RESULT,
            Raw::from_valid_json(&line),
            now,
        );
    }

    /// A `call_service` of `name` (resolved, in `domain`) nobody provides:
    /// answered here if it is [`REPUBLISH_TFS_SERVICE`].
    pub(super) fn tf_service(
        &mut self,
        me: ConnRef,
        domain: Domain,
        name: &str,
        args: Option<Raw<'_>>,
        id: Option<&[u8]>,
        now: Instant,
    ) -> bool {
        // A ROS 2 node or another gateway (a bridge) or a Foxglove session
        // gets no TF from here: their answers take other paths.
        if name != REPUBLISH_TFS_SERVICE || self.is_bridge(me) || self.is_foxglove(me) {
            return false;
        }
        let name_json = json_str(name);
        let v: Value = args
            .and_then(|a| serde_json::from_str(a.get()).ok())
            .unwrap_or(Value::Null);
        let refuse = |hub: &mut Hub, why: &str| {
            let reason = json_str(&format!("{name}: {why}"));
            let answer = Answer::failed(reason.as_bytes());
            hub.send_service_answer(me, None, name_json.as_bytes(), id, answer, now);
            true
        };
        let req = match msg::parse_request(&v) {
            Ok(r) => r,
            Err(why) => return refuse(self, &why),
        };
        self.tf.next_topic += 1;
        let topic = format!("{REPUB_TOPIC_PREFIX}{}", self.tf.next_topic);
        let delivery = Delivery::Topic {
            topic: topic.clone().into(),
            timeout: Duration::from_secs_f64(req.timeout_secs),
            lonely_since: None,
        };
        if let Err(why) = self.tf_add(me, domain, delivery, req, now) {
            return refuse(self, &why);
        }
        let values = format!("{{\"topic_name\":{}}}", json_str(&topic));
        let answer = Answer::ok(values.as_bytes());
        self.send_service_answer(me, None, name_json.as_bytes(), id, answer, now);
        true
    }

    /// A goal for `action` (resolved) nobody serves: taken here if it is
    /// [`TF_ACTION`]. `id` is the caller's id (JSON bytes).
    pub(super) fn tf_goal(
        &mut self,
        me: ConnRef,
        domain: Domain,
        action: &str,
        args: Option<Raw<'_>>,
        id: &[u8],
        now: Instant,
    ) -> bool {
        if action != TF_ACTION || self.is_bridge(me) || self.is_foxglove(me) {
            return false;
        }
        let action_json = json_str(action);
        let fail = |hub: &mut Hub, why: &str| {
            let reason = format!("{action}: goal refused: {why}");
            let failure = GoalFailure {
                status: 0,
                reason: &reason,
            };
            hub.send_goal_failure(me, None, action_json.as_bytes(), id, failure, now);
            true
        };
        let dup = self.tf.repub.find(
            me,
            |s| matches!(&s.delivery, Delivery::Ros2Goal { id: g, .. } if **g == *id),
        );
        if !dup.is_empty() {
            return fail(
                self,
                "this connection already has a goal with this id in flight",
            );
        }
        let v: Value = args
            .and_then(|a| serde_json::from_str(a.get()).ok())
            .unwrap_or(Value::Null);
        let req = match msg::parse_request(&v) {
            Ok(r) => r,
            Err(why) => return fail(self, &why),
        };
        let delivery = Delivery::Ros2Goal {
            action: action.into(),
            id: id.into(),
        };
        if let Err(why) = self.tf_add(me, domain, delivery, req, now) {
            return fail(self, &why);
        }
        true
    }

    /// `cancel_action_goal` of a goal served here; false if `id` names
    /// none of `me`'s.
    pub(super) fn tf_cancel_goal(&mut self, me: ConnRef, id: &[u8], now: Instant) -> bool {
        let ids = self.tf.repub.find(
            me,
            |s| matches!(&s.delivery, Delivery::Ros2Goal { id: g, .. } if **g == *id),
        );
        let found = !ids.is_empty();
        for sub in ids {
            self.tf_cancel_ros2(sub, now);
        }
        found
    }

    /// `<action>/_action/cancel_goal` of [`TF_ACTION`]: all of `me`'s
    /// goals here; how many.
    pub(super) fn tf_cancel_all(&mut self, me: ConnRef, action: &str, now: Instant) -> usize {
        if action != TF_ACTION {
            return 0;
        }
        let ids = self
            .tf
            .repub
            .find(me, |s| matches!(s.delivery, Delivery::Ros2Goal { .. }));
        let n = ids.len();
        for sub in ids {
            self.tf_cancel_ros2(sub, now);
        }
        n
    }

    fn tf_cancel_ros2(&mut self, sub: u64, now: Instant) {
        let Some(s) = self.tf.repub.get(sub) else {
            return;
        };
        let (owner, end) = match &s.delivery {
            Delivery::Ros2Goal { action, id } => (s.owner, (json_str(action), id.to_vec())),
            _ => return,
        };
        self.tf_end(sub, now);
        let goal_end = GoalEnd {
            values: b"{}",
            status: ROS2_CANCELED,
            result: b"true",
        };
        self.send_goal_result(owner, None, end.0.as_bytes(), &end.1, goal_end, now);
    }

    fn tf_add(
        &mut self,
        me: ConnRef,
        domain: Domain,
        delivery: Delivery,
        req: msg::Request,
        now: Instant,
    ) -> Result<u64, String> {
        let first = self.tf.repub.in_domain(domain) == 0;
        let id = self
            .tf
            .repub
            .add(me, domain, delivery, req, now)
            .map_err(|e| e.to_string())?;
        if first {
            self.interest_changed(domain, TF_TOPIC);
            self.interest_changed(domain, TF_STATIC_TOPIC);
        }
        Ok(id)
    }

    /// Ends subscription `sub` (no message to its client).
    fn tf_end(&mut self, sub: u64, _now: Instant) {
        let Some(s) = self.tf.repub.remove(sub) else {
            return;
        };
        if self.tf.repub.in_domain(s.domain) == 0 {
            if let Some(b) = self.tf.buffers.get_mut(&s.domain) {
                b.drop_dynamic();
                if b.is_empty() {
                    self.tf.buffers.remove(&s.domain);
                }
            }
            self.interest_changed(s.domain, TF_TOPIC);
            self.interest_changed(s.domain, TF_STATIC_TOPIC);
        }
    }

    /// `me` is closing: its subscriptions end, its static frames go.
    pub(super) fn tf_conn_left(&mut self, domain: Domain, me: ConnRef, now: Instant) {
        for sub in self.tf.repub.find(me, |_| true) {
            self.tf_end(sub, now);
        }
        if let Some(b) = self.tf.buffers.get_mut(&domain) {
            b.forget_owner(owner_key(me));
            if b.is_empty() {
                self.tf.buffers.remove(&domain);
            }
        }
    }

    /// The subscriptions' ticks due at `now`.
    pub(super) fn tf_expire(&mut self, now: Instant) {
        if self.tf.repub.is_empty() {
            return;
        }
        for sub in self.tf.repub.due(now, MAX_TF_LOOKUPS_PER_TURN) {
            self.tf_tick(sub, now);
        }
    }

    fn tf_tick(&mut self, sub: u64, now: Instant) {
        let Some(s) = self.tf.repub.get(sub) else {
            return;
        };
        let (domain, owner) = (s.domain, s.owner);
        if !self.live(owner) {
            return self.tf_end(sub, now);
        }
        // A topic nobody reads: nothing is looked up (its first transforms
        // wait for the subscriber), and after the timeout it ends.
        if let Delivery::Topic { topic, timeout, .. } = &s.delivery {
            let (topic, timeout) = (topic.to_string(), *timeout);
            let listened = self.listens(domain, &topic);
            let Some(Delivery::Topic { lonely_since, .. }) =
                self.tf.repub.get_mut(sub).map(|s| &mut s.delivery)
            else {
                return;
            };
            if !listened {
                let since = *lonely_since.get_or_insert(now);
                if now.saturating_duration_since(since) >= timeout {
                    let msg = format!("{topic}: nobody subscribed for {} s; it ends (request {REPUBLISH_TFS_SERVICE} again)", timeout.as_secs_f64());
                    self.send_status(owner, Level::Info, &msg, None, now);
                    self.tf_end(sub, now);
                }
                return;
            }
            *lonely_since = None;
        }
        let Some(s) = self.tf.repub.get_mut(sub) else {
            return;
        };
        let tick = s.tick(self.tf.buffers.get(&domain));
        let target = s.target.clone();
        let delivery = s.delivery.clone();
        for (source, why) in &tick.broke {
            let msg = format!(
                "TF: no transform of {source:?} in {target:?} ({why}); it is left out until it can be looked up"
            );
            self.send_status(owner, Level::Warning, &msg, None, now);
        }
        if tick.transforms.is_empty() {
            return;
        }
        let wall = self.wall(now);
        let stamp = match delivery {
            Delivery::Ros2Goal { .. } => Stamp::Ros2,
            _ => Stamp::Ros1,
        };
        let mut list = String::from("{\"transforms\":[");
        for (i, (source, tf)) in tick.transforms.iter().enumerate() {
            if i > 0 {
                list.push(',');
            }
            msg::write_stamped(&mut list, &target, source, tf, wall, stamp);
        }
        list.push_str("]}");
        match delivery {
            Delivery::Topic { topic, .. } => {
                self.route(
                    Origin::Gateway,
                    domain,
                    &topic,
                    Raw::from_valid_json(&list),
                    now,
                );
            }
            Delivery::Ros1Goal { goal_id, .. } => {
                if !self.listens(domain, ROS1_FEEDBACK) {
                    return;
                }
                let line = format!(
                    "{},\"feedback\":{list}}}",
                    self.tf_ros1_status(&goal_id, ROS1_ACTIVE, "", now)
                );
                self.route(
                    Origin::Gateway,
                    domain,
                    ROS1_FEEDBACK,
                    Raw::from_valid_json(&line),
                    now,
                );
            }
            Delivery::Ros2Goal { action, id } => {
                let mut line = Vec::with_capacity(list.len() + 128);
                encode::action_feedback(
                    &mut line,
                    json_str(&action).as_bytes(),
                    &id,
                    list.as_bytes(),
                );
                self.deliver_sheddable(owner, &line, FEEDBACK_BUCKET, now);
            }
        }
    }

    /// Whether the ROS 2 action is served here (no client provides it).
    pub(super) fn tf_serves_action(&self, domain: Domain) -> bool {
        self.registries[domain as usize]
            .provided(Provided::Action, TF_ACTION)
            .is_none()
    }

    /// `/rosgate/tf_frames`: a domain's frames with their parents and
    /// rates, and the subscriptions (`{"target_frame":..}` to look up
    /// `"source_frame"` too: the CLI's `tf echo` without a subscription).
    pub(super) fn tf_frames_json(&self, domain: Domain, args: &Value) -> String {
        let buf = self.tf.buffers.get(&domain);
        let frames: Vec<FrameInfo> = buf.map_or_else(Vec::new, |b| b.frames(MAX_TF_FRAMES_LISTED));
        let list: Vec<Value> = frames
            .iter()
            .map(|f| {
                serde_json::json!({
                    "child": f.child, "parent": f.parent, "static": f.is_static,
                    "rate_hz": (f.rate_hz * 100.0).round() / 100.0,
                    "newest": {"sec": f.newest_ns.div_euclid(1_000_000_000), "nanosec": f.newest_ns.rem_euclid(1_000_000_000)},
                    "received": f.received,
                })
            })
            .collect();
        let subs = self.tf.repub.iter().filter(|s| s.domain == domain).count();
        let mut out = serde_json::json!({
            "frames": list,
            "truncated": buf.is_some_and(|b| b.len() > MAX_TF_FRAMES_LISTED),
            "subscriptions": subs,
            "listening": self.tf.repub.in_domain(domain) > 0,
            "bytes": buf.map_or(0, TfBuffer::bytes),
            "refused": self.tf.bad_samples,
        });
        if let (Some(t), Some(s)) = (
            args.get("target_frame").and_then(Value::as_str),
            args.get("source_frame").and_then(Value::as_str),
        ) {
            let empty = TfBuffer::new();
            out["lookup"] = match buf.unwrap_or(&empty).lookup(t, s) {
                Ok((tf, at)) => {
                    let mut text = String::new();
                    msg::write_stamped(
                        &mut text,
                        t,
                        s,
                        &tf,
                        (
                            (at.max(0) / 1_000_000_000) as u64,
                            (at.max(0) % 1_000_000_000) as u32,
                        ),
                        Stamp::Ros2,
                    );
                    serde_json::from_str(&text).unwrap_or(Value::Null)
                }
                Err(e) => serde_json::json!({"error": e.to_string()}),
            };
        }
        out.to_string()
    }
}
