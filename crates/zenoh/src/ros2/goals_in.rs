//! Actions local clients serve, offered to ROS 2 over rmw_zenoh as an
//! rclcpp action server is: complete queryables for `send_goal`,
//! `get_result` and `cancel_goal` (with `SS` tokens), and publishers of
//! `feedback` and `status` (with `MP` tokens), under `<action>/_action/`.
//!
//! A ROS 2 client's goal is accepted at once (a rosbridge action server
//! has no accept step: it gets the goal and ends it) and handed to the hub
//! as the bridge's goal `ra<n>`; the server's feedback is put on the
//! feedback topic, its result answers `get_result` (now or when it
//! comes), and every change of a goal's status is put on the status
//! topic. A cancel from ROS 2 reaches the server as the bridge's
//! `cancel_action_goal`.
//!
//! Invariants:
//! - every `get_result` is answered once: with the goal's result, at once
//!   for an unknown goal (status 0, as rclcpp answers), or with an abort
//!   when the local server goes or the gateway cannot keep it;
//! - at most [`MAX_GOALS_FROM_ROS`] goals are kept: past that a goal is
//!   rejected; ended goals are forgotten oldest first beyond
//!   [`MAX_ENDED_GOALS`] (rclcpp forgets them after its result timeout);
//! - each goal keeps at most [`MAX_RESULT_WAITERS`] `get_result` queries.

use std::collections::{HashMap, VecDeque};
use std::rc::Rc;
use std::sync::MutexGuard;

use rosgate_core::nodes::Domain;
use rosgate_ros2::action::{self, cancel_code, status};
use rosgate_ros2::cdr;
use rosgate_ros2::rmw::{self, Attachment, EntityKind, Qos};
use rosgate_wire::Raw;
use serde_json::{json, Value};
use zenoh::liveliness::LivelinessToken;
use zenoh::qos::CongestionControl;
use zenoh::query::{Query, Queryable};
use zenoh::sample::Locality;
use zenoh::{Session, Wait};
use zenoh_ext::{AdvancedPublisher, AdvancedPublisherBuilderExt, CacheConfig, MissDetectionConfig};

use super::{unix_ns, RosLink, RosShared, Typed};
use crate::Job;

/// Goals from ROS 2 clients kept (running and ended), in all.
pub const MAX_GOALS_FROM_ROS: usize = rosgate_ros2::link::MAX_GOALS_IN;
/// Ended goals whose results are kept for late `get_result` requests.
pub const MAX_ENDED_GOALS: usize = rosgate_ros2::link::MAX_ENDED_GOALS;
/// `get_result` queries one goal keeps waiting.
pub const MAX_RESULT_WAITERS: usize = rosgate_ros2::link::MAX_RESULT_WAITERS;

/// A topic this gateway puts for an action: its data key and its
/// publisher's GID.
struct Put {
    key: String,
    gid: [u8; 16],
    /// The sequence number of its last put.
    seq: i64,
    /// The status topic's publisher: transient local, depth 1, as rcl
    /// declares it (`rcl_action_qos_profile_status_default`), so a late
    /// client gets the goals' statuses and rmw_zenoh counts this
    /// publisher as matching its transient local subscription.
    cache: Option<AdvancedPublisher<'static>>,
}

/// An action a local client serves, as the Zenoh side needs it.
struct Served {
    ty: String,
    send_goal: (String, String),
    get_result: (String, String),
    cancel: (String, String),
    feedback: Put,
    feedback_type: String,
    status: Put,
}

/// What this gateway declared for an action it offers to ROS 2: the
/// goal services' queryables and the five entities' tokens.
pub(super) struct Offered {
    _queryables: Vec<Queryable<()>>,
    _tokens: Vec<LivelinessToken>,
}

/// A goal from a ROS 2 client.
struct GoalIn {
    domain: Domain,
    action: String,
    uuid: [u8; 16],
    stamp: (i64, u32),
    status: i64,
    /// The result's JSON, once ended.
    result: Option<Value>,
    waiting: Vec<(Query, i64, [u8; 16])>,
}

/// What the Zenoh side keeps of actions served to ROS 2.
#[derive(Default)]
pub(super) struct GoalsIn {
    served: HashMap<(Domain, String), Served>,
    goals: HashMap<u64, GoalIn>,
    by_uuid: HashMap<[u8; 16], u64>,
    ended: VecDeque<u64>,
    next: u64,
}

/// The bridge's goal id for goal `n` from ROS 2 (`ra<n>`, as raw JSON).
fn goal_id(n: u64) -> String {
    format!("ra{n}")
}

fn parse_goal_id(raw: &str) -> Option<u64> {
    raw.strip_prefix("\"ra")?.strip_suffix('"')?.parse().ok()
}

/// What a query carries: its attachment and its payload decoded as `ty`.
fn request(shared: &RosShared, ty: &str, q: &Query) -> Result<(Attachment, Value), String> {
    let att = q
        .attachment()
        .and_then(|a| Attachment::decode(&a.to_bytes()))
        .ok_or("a request without rmw_zenoh's attachment")?;
    let payload = q
        .payload()
        .map(|p| p.to_bytes().into_owned())
        .unwrap_or_default();
    let mut json = Vec::new();
    cdr::decode_json(&*shared.types(), ty, &payload, &mut json)
        .map_err(|e| format!("a request that is not {ty}: {e}"))?;
    let v = rosgate_ros2::json::from_slice(&json).map_err(|e| e.to_string())?;
    Ok((att, v))
}

/// Replies `v` as CDR of `ty`, echoing the request's sequence number and
/// client GID.
fn reply(shared: &RosShared, q: &Query, ty: &str, v: &Value, seq: i64, gid: [u8; 16]) {
    match cdr::encode(&*shared.types(), ty, v) {
        Ok(bytes) => {
            let att = Attachment {
                seq,
                timestamp_ns: unix_ns(),
                gid,
            };
            let _ = q
                .reply(q.key_expr().clone(), bytes)
                .attachment(att.encode().to_vec())
                .wait();
        }
        Err(e) => {
            let _ = q.reply_err(format!("cannot answer as {ty}: {e}")).wait();
        }
    }
}

fn stamp_now() -> (i64, u32) {
    let ns = unix_ns();
    (
        ns.div_euclid(1_000_000_000),
        ns.rem_euclid(1_000_000_000) as u32,
    )
}

impl RosShared {
    fn goals_in(&self) -> MutexGuard<'_, GoalsIn> {
        self.goals_in.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Puts `msg` on the feedback or (`status`) the status topic of an
    /// action this gateway serves.
    fn put(&self, g: &mut GoalsIn, k: &(Domain, String), status: bool, msg: &Value) {
        let Some(s) = g.served.get_mut(k) else {
            return;
        };
        let (p, ty) = if status {
            (&mut s.status, action::STATUS_TYPE)
        } else {
            (&mut s.feedback, s.feedback_type.as_str())
        };
        let Ok(bytes) = cdr::encode(&*self.types(), ty, msg) else {
            return;
        };
        p.seq += 1;
        let att = Attachment {
            seq: p.seq,
            timestamp_ns: unix_ns(),
            gid: p.gid,
        };
        let _ = match &p.cache {
            Some(cache) => cache.put(bytes).attachment(att.encode().to_vec()).wait(),
            None => self
                .session
                .put(p.key.as_str(), bytes)
                .attachment(att.encode().to_vec())
                .congestion_control(CongestionControl::Drop)
                .allowed_destination(Locality::Remote)
                .wait(),
        };
    }

    /// Puts the status of every goal of an action (what rclcpp's status
    /// topic carries).
    fn put_status(&self, g: &mut GoalsIn, k: &(Domain, String)) {
        let list: Vec<Value> = g
            .goals
            .values()
            .filter(|x| x.domain == k.0 && x.action == k.1)
            .map(|x| {
                json!({
                    "goal_info": {
                        "goal_id": {"uuid": x.uuid.to_vec()},
                        "stamp": {"sec": x.stamp.0, "nanosec": x.stamp.1},
                    },
                    "status": x.status,
                })
            })
            .collect();
        let msg = json!({ "status_list": list });
        self.put(g, k, true, &msg);
    }

    /// A query to one of the goal services of action `k` this gateway
    /// serves: `pick` gives the request's type and what the handler needs
    /// of the action; with the request's attachment and decoded payload.
    /// `None` when the action is no longer served or the request does not
    /// decode: the query then has its error reply.
    fn served_request<T>(
        &self,
        k: &(Domain, String),
        q: &Query,
        pick: impl FnOnce(&Served) -> (String, T),
    ) -> Option<(T, Attachment, Value)> {
        let Some((req_ty, picked)) = self.goals_in().served.get(k).map(pick) else {
            let _ = q.reply_err("the action is no longer served here").wait();
            return None;
        };
        match request(self, &req_ty, q) {
            Ok((att, v)) => Some((picked, att, v)),
            Err(why) => {
                let _ = q.reply_err(why).wait();
                None
            }
        }
    }

    /// A ROS 2 client's `send_goal`: accepted, and handed to the local
    /// server through the bridge.
    fn on_send_goal(&self, domain: Domain, name: &str, q: Query) {
        let k = (domain, name.to_string());
        let Some(((ty, resp_ty), att, v)) = self.served_request(&k, &q, |s| {
            (s.send_goal.0.clone(), (s.ty.clone(), s.send_goal.1.clone()))
        }) else {
            return;
        };
        let Some(uuid) = action::goal_id_of(&v) else {
            let _ = q.reply_err("a goal without a goal id").wait();
            return;
        };
        let stamp = stamp_now();
        let mut g = self.goals_in();
        let full = g.goals.len() >= MAX_GOALS_FROM_ROS;
        if full || g.by_uuid.contains_key(&uuid) {
            drop(g);
            let no = json!({"accepted": false, "stamp": {"sec": stamp.0, "nanosec": stamp.1}});
            reply(self, &q, &resp_ty, &no, att.seq, att.gid);
            return;
        }
        g.next += 1;
        let n = g.next;
        let args = v["goal"].to_string();
        let (action_name, action_ty) = (name.to_string(), ty.clone());
        let job: Job = Box::new(move |hub, now| {
            hub.remote_goal(
                domain,
                &action_name,
                &goal_id(n),
                &action_ty,
                Raw::from_valid_json(&args),
                now,
            );
        });
        if !self.fed.send(job) {
            drop(g);
            let _ = q.reply_err("the gateway is too busy").wait();
            return;
        }
        g.by_uuid.insert(uuid, n);
        g.goals.insert(
            n,
            GoalIn {
                domain,
                action: name.to_string(),
                uuid,
                stamp,
                status: status::EXECUTING,
                result: None,
                waiting: Vec::new(),
            },
        );
        let yes = json!({"accepted": true, "stamp": {"sec": stamp.0, "nanosec": stamp.1}});
        reply(self, &q, &resp_ty, &yes, att.seq, att.gid);
        self.put_status(&mut g, &k);
    }

    /// A ROS 2 client's `get_result`: answered now if the goal ended (or
    /// is unknown), else when it ends.
    fn on_get_result(&self, domain: Domain, name: &str, q: Query) {
        let k = (domain, name.to_string());
        let Some((resp_ty, att, v)) = self.served_request(&k, &q, |s| s.get_result.clone()) else {
            return;
        };
        let mut g = self.goals_in();
        let n = action::goal_id_of(&v).and_then(|u| g.by_uuid.get(&u).copied());
        let goal = n
            .and_then(|n| g.goals.get_mut(&n))
            .filter(|x| x.domain == domain && x.action == name);
        let Some(goal) = goal else {
            drop(g);
            let result = cdr::default_json(&*self.types(), &resp_ty)
                .map(|d| d["result"].clone())
                .unwrap_or_default();
            let unknown = json!({"status": status::UNKNOWN, "result": result});
            reply(self, &q, &resp_ty, &unknown, att.seq, att.gid);
            return;
        };
        match &goal.result {
            Some(result) => {
                let v = json!({"status": goal.status, "result": result});
                drop(g);
                reply(self, &q, &resp_ty, &v, att.seq, att.gid);
            }
            None if goal.waiting.len() >= MAX_RESULT_WAITERS => {
                drop(g);
                let _ = q
                    .reply_err("too many requests for this goal's result")
                    .wait();
            }
            None => goal.waiting.push((q, att.seq, att.gid)),
        }
    }

    /// A ROS 2 client's `cancel_goal`: one goal by id, or (a zero id)
    /// every goal of the action accepted up to the stamp (all, for a zero
    /// stamp), as rclcpp does.
    fn on_cancel_goal(&self, domain: Domain, name: &str, q: Query) {
        let k = (domain, name.to_string());
        let Some((resp_ty, att, v)) = self.served_request(&k, &q, |s| s.cancel.clone()) else {
            return;
        };
        let info = &v["goal_info"];
        let uuid = action::goal_id_of(info).unwrap_or_default();
        let before = (
            info["stamp"]["sec"].as_i64().unwrap_or(0),
            info["stamp"]["nanosec"].as_u64().unwrap_or(0) as u32,
        );
        let mut g = self.goals_in();
        let mut canceling = Vec::new();
        let mut terminated = false;
        for (&n, x) in g.goals.iter_mut() {
            let picked = if uuid != [0; 16] {
                x.uuid == uuid
            } else {
                before == (0, 0) || x.stamp <= before
            };
            if !picked || x.domain != domain || x.action != name {
                continue;
            }
            if x.result.is_some() {
                terminated = true;
                continue;
            }
            canceling.push((n, x.uuid, x.stamp));
        }
        let code = match (canceling.is_empty(), terminated) {
            (false, _) => cancel_code::NONE,
            (true, true) => cancel_code::GOAL_TERMINATED,
            (true, false) if uuid == [0; 16] => cancel_code::NONE,
            (true, false) => cancel_code::UNKNOWN_GOAL_ID,
        };
        // Only the cancels handed to the loop are canceling.
        canceling.retain(|(n, ..)| {
            let (action_name, id) = (name.to_string(), goal_id(*n));
            let job: Job =
                Box::new(move |hub, now| hub.remote_cancel(domain, &action_name, &id, now));
            self.fed.send(job)
        });
        for (n, ..) in &canceling {
            if let Some(x) = g.goals.get_mut(n) {
                x.status = status::CANCELING;
            }
        }
        if !canceling.is_empty() {
            self.put_status(&mut g, &k);
        }
        drop(g);
        let infos: Vec<Value> = canceling
            .iter()
            .map(|(_, u, s)| json!({"goal_id": {"uuid": u.to_vec()}, "stamp": {"sec": s.0, "nanosec": s.1}}))
            .collect();
        let v = json!({"return_code": code, "goals_canceling": infos});
        reply(self, &q, &resp_ty, &v, att.seq, att.gid);
    }

    /// Feedback (`end` None) or the end of goal `id` from the local server,
    /// if the goal came from ROS 2 (false otherwise: not ours).
    pub(super) fn goal_in_update(&self, id: &str, values: &str, end: Option<(&str, &str)>) -> bool {
        let Some(n) = parse_goal_id(id) else {
            return false;
        };
        let mut g = self.goals_in();
        let Some(goal) = g.goals.get(&n) else {
            return true;
        };
        let k = (goal.domain, goal.action.clone());
        let uuid = goal.uuid;
        let values: Value = rosgate_ros2::json::from_str(values).unwrap_or_default();
        let Some((st, ok)) = end else {
            let msg = json!({"goal_id": {"uuid": uuid.to_vec()}, "feedback": values});
            self.put(&mut g, &k, false, &msg);
            return true;
        };
        let result_ty = g.served.get(&k).map(|s| s.get_result.1.clone());
        let mut status = st.parse::<i64>().unwrap_or(status::ABORTED);
        if ok != "true" || !(status::SUCCEEDED..=status::ABORTED).contains(&status) {
            status = status::ABORTED;
        }
        // A result that does not fit the type ends the goal aborted with
        // the type's defaults: ROS 2 clients get a result they can decode.
        let types = self.types();
        let result = match &result_ty {
            Some(ty)
                if cdr::encode(&*types, ty, &json!({"status": status, "result": values}))
                    .is_ok() =>
            {
                values
            }
            Some(ty) => {
                if status == status::SUCCEEDED {
                    status = status::ABORTED;
                }
                cdr::default_json(&*types, ty)
                    .map(|d| d["result"].clone())
                    .unwrap_or_default()
            }
            None => values,
        };
        let answers = self.end(&mut g, n, status, result);
        self.put_status(&mut g, &k);
        drop(g);
        if let (Some(a), Some(ty)) = (answers, result_ty) {
            self.answer_results(vec![a], &ty);
        }
        true
    }

    /// Ends goal `n`: its result answers the `get_result`s waiting, and
    /// the oldest ended goals past [`MAX_ENDED_GOALS`] are forgotten.
    fn end(&self, g: &mut GoalsIn, n: u64, status: i64, result: Value) -> Option<Answers> {
        let goal = g.goals.get_mut(&n)?;
        if goal.result.is_some() {
            return None;
        }
        goal.status = status;
        let answer = json!({"status": status, "result": result});
        goal.result = Some(result);
        let waiting = std::mem::take(&mut goal.waiting);
        g.ended.push_back(n);
        while g.ended.len() > MAX_ENDED_GOALS {
            if let Some(old) = g.ended.pop_front() {
                if let Some(x) = g.goals.remove(&old) {
                    g.by_uuid.remove(&x.uuid);
                }
            }
        }
        Some(Answers { waiting, answer })
    }

    /// Answers the `get_result`s a goal's end released, as CDR of `ty`:
    /// called with no lock held (a reply may wait on the network).
    fn answer_results(&self, answers: Vec<Answers>, ty: &str) {
        for a in answers {
            for (q, seq, gid) in a.waiting {
                reply(self, &q, ty, &a.answer, seq, gid);
            }
        }
    }
}

/// The `get_result` queries a goal's end released, and their answer.
struct Answers {
    waiting: Vec<(Query, i64, [u8; 16])>,
    answer: Value,
}

impl RosLink {
    /// A local client serves `name` of type `ty`: offered to ROS 2 when
    /// the type is known.
    pub(crate) fn serve_action(
        &mut self,
        session: &Session,
        domain: Domain,
        name: Rc<str>,
        ty: &str,
    ) {
        if !self.bridged(domain) {
            return;
        }
        let types = self.shared.types();
        let Some(def) = types.action(ty) else {
            rosgate_core::log!(
                Info,
                "ros2: action {name} not offered to ROS 2: its type {ty:?} is unknown (--interfaces)"
            );
            return;
        };
        let (Some(sg), Some(gr), Some(cancel)) = (
            types.srv(&def.send_goal),
            types.srv(&def.get_result),
            types.srv(action::CANCEL_TYPE),
        ) else {
            return;
        };
        let typed = |t: &str| -> Option<Typed> {
            Some(Typed {
                dds_type: rmw::dds_type_name(t)?,
                hash: types.hash(t)?,
            })
        };
        let entities = [
            (action::SEND_GOAL, def.send_goal.as_str()),
            (action::GET_RESULT, def.get_result.as_str()),
            (action::CANCEL_GOAL, action::CANCEL_TYPE),
            (action::FEEDBACK, def.feedback_message.as_str()),
            (action::STATUS, action::STATUS_TYPE),
        ];
        let Some(typeds) = entities
            .iter()
            .map(|(_, t)| typed(t))
            .collect::<Option<Vec<Typed>>>()
        else {
            return;
        };
        let mut queryables: Vec<Queryable<()>> = Vec::new();
        let mut tokens: Vec<LivelinessToken> = Vec::new();
        let mut puts = Vec::new();
        for ((suffix, _), t) in entities.iter().zip(&typeds) {
            let entity = format!("{name}{suffix}");
            let key = rmw::data_key(u32::from(domain), &entity, &t.dds_type, &t.hash);
            let is_topic = *suffix == action::FEEDBACK || *suffix == action::STATUS;
            let kind = if is_topic {
                EntityKind::Publisher
            } else {
                EntityKind::ServiceServer
            };
            let status = *suffix == action::STATUS;
            let qos = if status {
                Qos {
                    durability: rmw::Durability::TransientLocal,
                    ..Qos::keep_last(1)
                }
            } else {
                Qos::keep_last(10)
            };
            let Some((token_key, token)) = self.declare_qos(session, domain, kind, &entity, t, qos)
            else {
                return;
            };
            tokens.push(token);
            if is_topic {
                let cache = if status {
                    let declared = session
                        .declare_publisher(key.clone())
                        .allowed_destination(Locality::Remote)
                        .cache(CacheConfig::default().max_samples(1))
                        // Sequence numbers: a cache needs them or
                        // timestamping, which the session may not have.
                        .sample_miss_detection(MissDetectionConfig::default())
                        .publisher_detection()
                        .wait();
                    match declared {
                        Ok(p) => Some(p),
                        Err(e) => {
                            rosgate_core::log!(Warn, "ros2: cannot offer {entity} to ROS 2: {e}");
                            return;
                        }
                    }
                } else {
                    None
                };
                let gid = rmw::gid(&token_key);
                self.shared.own_gids().insert(gid);
                puts.push(Put {
                    key,
                    gid,
                    seq: 0,
                    cache,
                });
                continue;
            }
            let (sh, a, sfx) = (self.shared.clone(), name.to_string(), *suffix);
            let q = session
                .declare_queryable(key)
                .complete(true)
                .allowed_origin(Locality::Remote)
                .callback(move |q: Query| match sfx {
                    action::SEND_GOAL => sh.on_send_goal(domain, &a, q),
                    action::GET_RESULT => sh.on_get_result(domain, &a, q),
                    _ => sh.on_cancel_goal(domain, &a, q),
                })
                .wait();
            match q {
                Ok(q) => queryables.push(q),
                Err(e) => {
                    rosgate_core::log!(Warn, "ros2: cannot offer {entity} to ROS 2: {e}");
                    return;
                }
            }
        }
        let (Some(status_put), Some(feedback_put)) = (puts.pop(), puts.pop()) else {
            return;
        };
        self.shared.goals_in().served.insert(
            (domain, name.to_string()),
            Served {
                ty: def.name.clone(),
                send_goal: (sg.request.clone(), sg.response.clone()),
                get_result: (gr.request.clone(), gr.response.clone()),
                cancel: (cancel.request.clone(), cancel.response.clone()),
                feedback: feedback_put,
                feedback_type: def.feedback_message.clone(),
                status: status_put,
            },
        );
        self.actions.insert(
            (domain, name),
            Offered {
                _queryables: queryables,
                _tokens: tokens,
            },
        );
    }

    /// The local server of `name` went: ROS 2 sees the action go, and
    /// its goals still running end aborted (the `get_result`s waiting are
    /// answered so, with the result type's defaults).
    pub(crate) fn unserve_action(&mut self, domain: Domain, name: &Rc<str>) {
        self.actions.remove(&(domain, name.clone()));
        let k = (domain, name.to_string());
        let mut g = self.shared.goals_in();
        let ty = g.served.get(&k).map(|s| s.get_result.1.clone());
        let result = ty
            .as_deref()
            .and_then(|t| cdr::default_json(&*self.shared.types(), t).ok())
            .map(|d| d["result"].clone())
            .unwrap_or_default();
        let open: Vec<u64> = g
            .goals
            .iter()
            .filter(|(_, x)| x.domain == domain && *x.action == **name && x.result.is_none())
            .map(|(&n, _)| n)
            .collect();
        let answers: Vec<Answers> = open
            .into_iter()
            .filter_map(|n| self.shared.end(&mut g, n, status::ABORTED, result.clone()))
            .collect();
        self.shared.put_status(&mut g, &k);
        if let Some(served) = g.served.remove(&k) {
            let mut own = self.shared.own_gids();
            own.remove(&served.feedback.gid);
            own.remove(&served.status.gid);
        }
        drop(g);
        if let Some(ty) = ty {
            self.shared.answer_results(answers, &ty);
        }
    }
}

/// Goals from ROS 2 kept, and `get_result`s waiting (for the status).
pub(super) fn counts(shared: &RosShared) -> (usize, usize) {
    let g = shared.goals_in();
    (
        g.goals.len(),
        g.goals.values().map(|x| x.waiting.len()).sum(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn goal_ids_round_trip_and_others_are_not_ours() {
        assert_eq!(parse_goal_id(&format!("\"{}\"", goal_id(7))), Some(7));
        assert_eq!(parse_goal_id("\"fg7\""), None);
        assert_eq!(parse_goal_id("\"rq7\""), None);
    }
}
