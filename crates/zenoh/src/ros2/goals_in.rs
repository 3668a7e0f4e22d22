//! Actions local clients serve, offered to ROS 2 over rmw_zenoh as an
//! rclcpp action server is, as the ROS 2 link (`rosgate_ros2::link::goals_in`)
//! decides them. This file only executes:
//! - the link's `Offer` of an action: complete queryables for
//!   `send_goal`, `get_result` and `cancel_goal` (with `SS` tokens), and
//!   publishers of `feedback` and `status` (with `MP` tokens), under
//!   `<action>/_action/`, or their withdrawal;
//! - each query to a goal service, on Zenoh's thread: decoded (CDR ->
//!   JSON), stamped (a goal's acceptance time) and queued for the link with
//!   the query (`RosShared::to_link_request`); one that does not decode is
//!   refused there;
//! - the link's deliveries: a goal to the hub as the bridge's goal
//!   `ra<n>`, a cancel as its `cancel_action_goal`;
//! - the local server's feedback and end of `ra<n>` as the link's goal
//!   updates (an end that does not fit the result type ends aborted, with
//!   the type's defaults, so ROS 2 clients get a result they can decode);
//! - the link's replies (accepted, result, cancel codes) and its puts of
//!   feedback and status arrays, as CDR.
//!
//! The link owns the goals, their bounds (`MAX_GOALS_IN`,
//! `MAX_ENDED_GOALS`, `MAX_RESULT_WAITERS`) and the invariants: every
//! `get_result` answered once, every goal ended once.

use std::rc::Rc;
use std::sync::Arc;

use rosgate_core::nodes::Domain;
use rosgate_ros2::action::{self, status};
use rosgate_ros2::cdr;
use rosgate_ros2::link::{Event, Stamp};
use rosgate_ros2::registry::Registry;
use rosgate_ros2::rmw::{self, Attachment, EntityKind, Qos};
use serde_json::Value;
use zenoh::qos::CongestionControl;
use zenoh::query::Query;
use zenoh::sample::Locality;
use zenoh::{Session, Wait};
use zenoh_ext::{AdvancedPublisher, AdvancedPublisherBuilderExt, CacheConfig, MissDetectionConfig};

use super::replying::Replying;
use super::{unix_ns, RosLink, RosShared, Typed};
use crate::worker::Declared;
use rosgate_peers::ros2::goals::{
    feedback_json, goal_request, goal_update, stamp_now, status_json,
};

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
    cache: Option<Declared>,
}

/// What this gateway declared for an action it offers to ROS 2: what its
/// puts and the hub's goals need, the goal services' queryables and the
/// five entities' tokens.
pub(super) struct Offered {
    /// The action's type (`pkg/action/A`).
    pub(super) ty: String,
    /// `get_result`'s response type (an end's result must fit it).
    result_type: String,
    feedback_type: String,
    feedback: Put,
    status: Put,
    _queryables: Vec<Declared>,
    _tokens: Vec<Declared>,
}

/// What a goal service's queryable decodes its requests and encodes its
/// answers by: the link's registry when the action was offered (a
/// snapshot), and the service's request and response types.
struct PartTypes {
    types: Arc<Registry>,
    request: String,
    response: String,
}

use rosgate_peers::ros2::edge::parse_goal_id;

/// What a query carries: its attachment and its payload decoded as `ty`.
fn decode(types: &Registry, ty: &str, q: &Query) -> Result<(Attachment, Value), String> {
    let att = q
        .attachment()
        .and_then(|a| Attachment::decode(&a.to_bytes()))
        .ok_or("a request without rmw_zenoh's attachment")?;
    let payload = q
        .payload()
        .map(|p| p.to_bytes().into_owned())
        .unwrap_or_default();
    let mut json = Vec::new();
    cdr::decode_json(types, ty, &payload, &mut json)
        .map_err(|e| format!("a request that is not {ty}: {e}"))?;
    let v = rosgate_ros2::json::from_slice(&json).map_err(|e| e.to_string())?;
    Ok((att, v))
}

impl RosShared {
    /// A ROS 2 client's request to goal service `part` of action `name`,
    /// on Zenoh's thread: decoded as `req_ty` and queued for the link with
    /// its query (answered as `resp_ty`), or refused.
    fn on_goal_service(&self, domain: Domain, name: &str, part: &str, t: &PartTypes, q: Query) {
        let (types, req_ty, resp_ty) = (&t.types, t.request.as_str(), t.response.as_str());
        let (att, v) = match decode(types, req_ty, &q) {
            Ok(x) => x,
            Err(why) => {
                let _ = q.reply_err(why).wait();
                return;
            }
        };
        let stamp = stamp_now();
        let request = match goal_request(part, &v, stamp) {
            Ok(r) => r,
            Err(why) => {
                let _ = q.reply_err(why).wait();
                return;
            }
        };
        let to = Replying {
            query: q,
            types: types.clone(),
            response_type: resp_ty.to_string(),
            seq: att.seq,
            gid: att.gid,
            stamp,
        };
        self.to_link_request(to, domain, name, request);
    }
}

impl RosLink {
    /// The link offers action `name` (`on`), or withdraws it.
    pub(super) fn exec_offer_action_change(
        &mut self,
        session: &Session,
        domain: Domain,
        name: &str,
        ty: &str,
        on: bool,
    ) {
        let k = (domain, Rc::<str>::from(name));
        if let Some(old) = self.actions.remove(&k) {
            for gid in [old.feedback.gid, old.status.gid] {
                self.link.handle(Event::OwnPublisher { gid, on: false });
            }
        }
        if on {
            self.exec_offer_action(session, domain, k.1, ty);
        }
    }

    /// Feedback (`end` None) or the end of bridge goal `id` from a local
    /// server, if the goal came from ROS 2 (false otherwise: not ours).
    pub(crate) fn goal_update(
        &mut self,
        session: &Session,
        id: &str,
        values: &str,
        end: Option<(&str, &str)>,
    ) -> bool {
        let Some(n) = parse_goal_id(id) else {
            return false;
        };
        let Some((domain, name)) = self.link.goal_in(n) else {
            return true;
        };
        let offered = Domain::try_from(domain)
            .ok()
            .and_then(|d| self.actions.get(&(d, Rc::from(name))));
        let result_type = offered.map(|o| o.result_type.clone());
        let end = end.map(|(st, ok)| (st.parse::<i64>().unwrap_or(status::ABORTED), ok == "true"));
        let update = goal_update(&self.types(), result_type.as_deref(), values, end);
        self.link.handle(Event::GoalUpdate { goal: n, update });
        self.run_link(session);
        true
    }

    /// The link's put of feedback for a goal from ROS 2.
    pub(super) fn exec_put_feedback(
        &mut self,
        domain: Domain,
        name: &str,
        uuid: [u8; 16],
        payload: &[u8],
    ) {
        let msg = feedback_json(uuid, payload);
        self.put(domain, name, false, &msg);
    }

    /// The link's put of an action's status array (what rclcpp's status
    /// topic carries).
    pub(super) fn exec_put_status(
        &mut self,
        domain: Domain,
        name: &str,
        goals: &[([u8; 16], Stamp, i8)],
    ) {
        self.put(domain, name, true, &status_json(goals));
    }

    /// Puts `msg` on the feedback or (`status`) the status topic of an
    /// action this gateway offers.
    fn put(&mut self, domain: Domain, name: &str, status: bool, msg: &Value) {
        let types = self.types();
        let Some(o) = self.actions.get_mut(&(domain, Rc::from(name))) else {
            return;
        };
        let (p, ty) = if status {
            (&mut o.status, action::STATUS_TYPE)
        } else {
            (&mut o.feedback, o.feedback_type.as_str())
        };
        let Ok(bytes) = cdr::encode(&*types, ty, msg) else {
            return;
        };
        p.seq += 1;
        let att = Attachment {
            seq: p.seq,
            timestamp_ns: unix_ns(),
            gid: p.gid,
        };
        let _ = match &p.cache {
            // The cache lives on the worker: the put follows its
            // declaration there (worker.rs).
            Some(cache) => {
                let att = att.encode().to_vec();
                self.decls
                    .with(cache, move |c: &AdvancedPublisher<'static>| {
                        let _ = c.put(bytes).attachment(att).wait();
                    });
                Ok(())
            }
            None => self
                .shared
                .session
                .put(p.key.as_str(), bytes)
                .attachment(att.encode().to_vec())
                .congestion_control(CongestionControl::Drop)
                .allowed_destination(Locality::Remote)
                .wait(),
        };
    }

    /// The link offers a local action to ROS 2: the goal services'
    /// queryables, the feedback and status publishers, and the five
    /// entities' tokens, when the action's type is known.
    fn exec_offer_action(&mut self, session: &Session, domain: Domain, name: Rc<str>, ty: &str) {
        let types = self.types();
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
        let mut queryables: Vec<Declared> = Vec::new();
        let mut tokens: Vec<Declared> = Vec::new();
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
                    let k = key.clone();
                    Some(self.decls.declare(
                        format!("ros2: cannot offer {entity} to ROS 2"),
                        move |session: &Session| {
                            session
                                .declare_publisher(k)
                                .allowed_destination(Locality::Remote)
                                .cache(CacheConfig::default().max_samples(1))
                                // Sequence numbers: a cache needs them or
                                // timestamping, which the session may not have.
                                .sample_miss_detection(MissDetectionConfig::default())
                                .publisher_detection()
                                .wait()
                        },
                    ))
                } else {
                    None
                };
                let gid = rmw::gid(&token_key);
                self.link.handle(Event::OwnPublisher { gid, on: true });
                puts.push(Put {
                    key,
                    gid,
                    seq: 0,
                    cache,
                });
                continue;
            }
            let (req, resp) = match *suffix {
                action::SEND_GOAL => (&sg.request, &sg.response),
                action::GET_RESULT => (&gr.request, &gr.response),
                _ => (&cancel.request, &cancel.response),
            };
            let (sh, a, sfx) = (self.shared.clone(), name.to_string(), *suffix);
            let t = PartTypes {
                types: types.clone(),
                request: req.clone(),
                response: resp.clone(),
            };
            queryables.push(self.decls.declare(
                format!("ros2: cannot offer {entity} to ROS 2"),
                move |session: &Session| {
                    session
                        .declare_queryable(key)
                        .complete(true)
                        .allowed_origin(Locality::Remote)
                        .callback(move |q: Query| sh.on_goal_service(domain, &a, sfx, &t, q))
                        .wait()
                },
            ));
        }
        let (Some(status_put), Some(feedback_put)) = (puts.pop(), puts.pop()) else {
            return;
        };
        self.actions.insert(
            (domain, name),
            Offered {
                ty: def.name.clone(),
                result_type: gr.response.clone(),
                feedback_type: def.feedback_message.clone(),
                feedback: feedback_put,
                status: status_put,
                _queryables: queryables,
                _tokens: tokens,
            },
        );
    }
}
