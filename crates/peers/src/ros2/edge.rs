//! The hub's edge of a ROS 2 shell: the link's deliveries ([`ToHub`])
//! turned into what the hub takes, kept in the order the link said them
//! ([`HubEdge`]) and handed to the hub from the loop's turn
//! ([`HubEdge::hand_over`]); CDR decoded to rosbridge JSON here, on the
//! loop thread, by the link's registry, only when a subscriber needs JSON
//! (`cbor-raw` subscribers get the CDR as the node put it); the hub's
//! check of client messages against a ROS 2 type ([`Check`]); the ids the
//! bridge knows calls and goals from ROS 2 by (`rq<n>`, `ra<n>`).
//!
//! What a delivery asks of the transport itself (a goal ended, interest,
//! a provider, a goal's action type) comes back as a [`Side`] for the
//! shell to execute.
//!
//! Invariant: the one `service_response` of each call and the one
//! `action_result` of each goal go to the hub from the loop's turn, never
//! through the loop's inbox, which may drop.

use std::sync::Arc;
use std::time::Instant;

use rosgate_core::bridge::PeerId;
use rosgate_core::hub::{Bridges, RemoteGoal};
use rosgate_core::nodes::Domain;
use rosgate_core::registry::Provided;
use rosgate_ros2::action::status;
use rosgate_ros2::cdr;
use rosgate_ros2::link::{Event, Link, ToHub};
use rosgate_ros2::registry::Registry;
use rosgate_wire::Raw;
use serde_json::Value;

use crate::lines::{aborted_line, failure_line};
use crate::Inbox;

/// The id a call from ROS 2 goes to the bridge with (`rq<n>`).
pub fn call_id(n: u64) -> String {
    format!("rq{n}")
}

/// The call number in a bridge id (`"rq<n>"`, as the JSON the answer
/// carries), if it is one of ours.
pub fn parse_call_id(raw_id: &str) -> Option<u64> {
    raw_id.strip_prefix("\"rq")?.strip_suffix('"')?.parse().ok()
}

/// A local provider's answer (`values`, `ok`) to the bridge call `id`, as
/// the link's event, when `id` is a call from ROS 2 (`rq<n>`); a failed
/// answer's values are its reason.
pub fn answer_event(id: &str, values: &str, ok: bool) -> Option<Event> {
    let call = parse_call_id(id)?;
    let result = if ok {
        Ok(values.as_bytes().to_vec())
    } else {
        Err(serde_json::from_str::<Value>(values)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_else(|| values.to_string()))
    };
    Some(Event::Answer { call, result })
}

/// The bridge's goal id for goal `n` from ROS 2 (`ra<n>`).
pub fn goal_id(n: u64) -> String {
    format!("ra{n}")
}

/// The goal number in a bridge id (`"ra<n>"`), if it is one of ours.
pub fn parse_goal_id(raw: &str) -> Option<u64> {
    raw.strip_prefix("\"ra")?.strip_suffix('"')?.parse().ok()
}

/// A ROS 2 sample's CDR as rosbridge JSON, decoded as `ty`; `None` when it
/// does not decode.
pub fn decode_json(types: &Registry, ty: &str, payload: &[u8]) -> Option<String> {
    let mut json = Vec::new();
    if let Err(e) = cdr::decode_json(types, ty, payload, &mut json) {
        rosgate_core::log!(Debug, "ros2: a sample of {ty} dropped: {e}");
        return None;
    }
    String::from_utf8(json).ok()
}

/// The hub's check of client messages against the ROS 2 type of a topic
/// that ROS 2 subscribes to: the message must encode (by a snapshot of
/// the link's registry, installed again when the link learns a type).
pub struct Check(pub Arc<Registry>);

impl rosgate_core::hub::TypeCheck for Check {
    fn check(&self, ty: &str, msg: &str) -> Result<(), String> {
        let v: Value = rosgate_ros2::json::from_str(msg).map_err(|e| e.to_string())?;
        cdr::encode(&*self.0, ty, &v)
            .map(drop)
            .map_err(|e| e.to_string())
    }
}

/// The bridge's `action_result` line for a goal the link ended.
pub fn end_line(action_name: &str, id: &str, st: i64, result: Result<Vec<u8>, String>) -> String {
    match result {
        Ok(values) if (status::SUCCEEDED..=status::ABORTED).contains(&st) => format!(
            "{{\"op\":\"action_result\",\"action\":{},\"values\":{},\"status\":{st},\"result\":true,\"id\":{id}}}",
            Value::from(action_name),
            String::from_utf8_lossy(&values)
        ),
        Ok(_) => aborted_line(
            action_name,
            id,
            &format!("the ROS 2 action server ended the goal in status {st}"),
        ),
        Err(why) if st == status::UNKNOWN => format!(
            "{{\"op\":\"action_result\",\"action\":{},\"values\":{},\"status\":{},\"result\":false,\"id\":{id}}}",
            Value::from(action_name),
            Value::from(why),
            status::UNKNOWN
        ),
        Err(why) => aborted_line(action_name, id, &why),
    }
}

/// What the link asked of the hub, kept in order for the turn.
pub enum ForHub {
    /// A line as the bridge's (a service response, a goal's feedback or end).
    Line(String),
    /// A ROS 2 client's call for the local provider (`rq<call>`).
    Call {
        call: u64,
        service: String,
        args: String,
    },
    /// A ROS 2 client's goal for the local action server (`ra<goal>`).
    Goal {
        goal: u64,
        action: String,
        ty: String,
        args: String,
    },
    /// A ROS 2 client cancels goal `ra<goal>`.
    Cancel { goal: u64, action: String },
    /// A ROS 2 sample of type `ty` for local subscribers, its CDR as the
    /// node put it (decoded to JSON only when a subscriber needs JSON);
    /// `latched` is its transient local publisher's depth.
    Sample {
        topic: String,
        ty: String,
        payload: Vec<u8>,
        latched: Option<u32>,
    },
    /// The hub's check of client messages on `topic` (ROS 2 subscribes to
    /// it as `ty`), or no check (`None`).
    Check { topic: String, ty: Option<String> },
}

/// What a delivery asks of the shell besides what [`HubEdge`] keeps.
#[derive(Debug, PartialEq, Eq)]
pub enum Side {
    /// Nothing (a sample, kept for the turn that is running).
    Nothing,
    /// A line was kept: the loop must turn to hand it over (outside a
    /// turn, e.g. a call refused as it is sent).
    Wake,
    /// A local client's goal ended (its line was kept; wake the loop): the
    /// shell forgets what it kept for the goal.
    GoalEnded { domain: Domain, id: String },
    /// ROS 2 subscribes to `topic` (its first subscription) or no longer
    /// (its last): the shell tells the hub (directly, or through its
    /// network's interest table); the check was kept, wake the loop.
    Interest {
        domain: Domain,
        topic: String,
        on: bool,
    },
    /// ROS 2 serves a service or action (`ty`), or no longer (`None`).
    Provider {
        kind: Provided,
        domain: Domain,
        name: String,
        ty: Option<String>,
    },
}

/// The link's deliveries for the hub, in order, until the turn hands them
/// over. See the module docs.
#[derive(Default)]
pub struct HubEdge {
    out: Vec<(Domain, ForHub)>,
    /// Samples the link handed over that did not decode (counted).
    undecodable: u64,
}

impl HubEdge {
    /// Samples that did not decode, ever.
    pub fn undecodable(&self) -> u64 {
        self.undecodable
    }

    /// Keeps one delivery of the link for the turn, and says what else it
    /// asks of the shell. `offered` is the type of an action the shell
    /// offers to ROS 2 (a ROS 2 client's goal names none: the offer does).
    pub fn deliver(
        &mut self,
        link: &mut Link,
        t: ToHub,
        offered: impl FnOnce(Domain, &str) -> Option<String>,
    ) -> Side {
        let (domain, line, side) = match t {
            ToHub::ServiceResponse {
                domain,
                service,
                id,
                result,
            } => (
                domain,
                match result {
                    Ok(values) => format!(
                        "{{\"op\":\"service_response\",\"service\":{},\"values\":{},\"result\":true,\"id\":{id}}}",
                        Value::from(service),
                        String::from_utf8_lossy(&values)
                    ),
                    Err(why) => failure_line(&service, &id, &why),
                },
                Side::Wake,
            ),
            ToHub::GoalFeedback {
                domain,
                action,
                id,
                payload,
            } => (
                domain,
                format!(
                    "{{\"op\":\"action_feedback\",\"action\":{},\"values\":{},\"id\":{id}}}",
                    Value::from(action),
                    String::from_utf8_lossy(&payload)
                ),
                Side::Wake,
            ),
            ToHub::GoalEnd {
                domain,
                action,
                id,
                status,
                result,
            } => {
                let line = end_line(&action, &id, i64::from(status), result);
                let Ok(d) = Domain::try_from(domain) else {
                    return Side::Nothing;
                };
                (domain, line, Side::GoalEnded { domain: d, id })
            }
            ToHub::Call {
                call,
                domain,
                service,
                payload,
            } => {
                // The request was decoded to JSON by the shell, so it is
                // valid UTF-8 JSON; anything else is not handed over.
                let Ok(args) = String::from_utf8(payload) else {
                    link.handle(Event::Answer {
                        call,
                        result: Err("a request that is not JSON".into()),
                    });
                    return Side::Nothing;
                };
                let Ok(d) = Domain::try_from(domain) else {
                    return Side::Nothing;
                };
                self.out.push((
                    d,
                    ForHub::Call {
                        call,
                        service,
                        args,
                    },
                ));
                return Side::Wake;
            }
            ToHub::Goal {
                goal,
                domain,
                action,
                payload,
            } => {
                let (Ok(domain), Ok(args)) = (Domain::try_from(domain), String::from_utf8(payload))
                else {
                    return Side::Nothing;
                };
                let ty = offered(domain, &action).unwrap_or_default();
                self.out.push((
                    domain,
                    ForHub::Goal {
                        goal,
                        action,
                        ty,
                        args,
                    },
                ));
                return Side::Wake;
            }
            ToHub::Interest { domain, topic, ty } => {
                // One interest per topic ROS 2 subscribes to (the link
                // says when its first subscription comes and its last goes),
                // and client messages on it must then fit its type.
                let Ok(d) = Domain::try_from(domain) else {
                    return Side::Nothing;
                };
                let on = ty.is_some();
                self.out.push((
                    d,
                    ForHub::Check {
                        topic: topic.clone(),
                        ty,
                    },
                ));
                return Side::Interest {
                    domain: d,
                    topic,
                    on,
                };
            }
            ToHub::Sample {
                domain,
                topic,
                ty,
                latched,
                payload,
                ..
            } => {
                if let Ok(d) = Domain::try_from(domain) {
                    // Decoded (or not) when the hub takes it: only then is
                    // it known whether a subscriber needs JSON.
                    self.out.push((
                        d,
                        ForHub::Sample {
                            topic,
                            ty,
                            payload,
                            latched,
                        },
                    ));
                }
                return Side::Nothing;
            }
            ToHub::LearnType { ty, .. } => {
                rosgate_core::log!(Info, "ros2: learned {ty} from a node's description");
                return Side::Nothing;
            }
            ToHub::Provider {
                domain,
                name,
                action,
                ty,
            } => {
                let Ok(domain) = Domain::try_from(domain) else {
                    return Side::Nothing;
                };
                let kind = if action {
                    Provided::Action
                } else {
                    Provided::Service
                };
                return Side::Provider {
                    kind,
                    domain,
                    name,
                    ty,
                };
            }
            ToHub::CancelGoal { goal } => {
                let Some((domain, action)) = link.goal_in(goal) else {
                    return Side::Nothing;
                };
                let Ok(d) = Domain::try_from(domain) else {
                    return Side::Nothing;
                };
                let action = action.to_string();
                self.out.push((d, ForHub::Cancel { goal, action }));
                return Side::Wake;
            }
        };
        let Ok(d) = Domain::try_from(domain) else {
            return Side::Nothing;
        };
        self.out.push((d, ForHub::Line(line)));
        side
    }

    /// Hands what the link said this turn to the hub, in order, as peer
    /// `peer`'s: samples decoded by `types` when a subscriber needs JSON
    /// (one that does not decode is dropped and counted in `inbox`).
    pub fn hand_over(
        &mut self,
        hub: &mut Bridges<'_>,
        types: &Registry,
        inbox: &Inbox,
        peer: PeerId,
        now: Instant,
    ) {
        for (domain, h) in std::mem::take(&mut self.out) {
            match h {
                ForHub::Line(line) => hub.remote_reply(domain, line.as_bytes(), now),
                ForHub::Call {
                    call,
                    service,
                    args,
                } => hub.remote_call(
                    peer,
                    domain,
                    &service,
                    &call_id(call),
                    Raw::from_valid_json(&args),
                    now,
                ),
                ForHub::Goal {
                    goal,
                    action,
                    ty,
                    args,
                } => {
                    let id = goal_id(goal);
                    let goal = RemoteGoal {
                        action: &action,
                        id: &id,
                        ty: &ty,
                        args: Raw::from_valid_json(&args),
                    };
                    hub.remote_goal(peer, domain, goal, now)
                }
                ForHub::Cancel { goal, action } => {
                    hub.remote_cancel(peer, domain, &action, &goal_id(goal), now)
                }
                ForHub::Sample {
                    topic,
                    ty,
                    payload,
                    latched,
                } => {
                    // Decoded here, on the loop thread, by the link's types
                    // (the link checked the type is known), once, and only
                    // when a subscriber needs JSON: `cbor-raw` ones get the
                    // CDR as the node put it. A transient local publisher's
                    // samples are latched in the hub, so clients that
                    // subscribe later get them as from a local one.
                    // Another ROS 2 side wants it too: it crosses as JSON
                    // with its CDR, put untouched there when that side
                    // subscribes with its type (`PeerId::forwards_to`;
                    // never back to `peer`).
                    let forward = hub.forward_wanted(peer, domain, &topic);
                    let json = if forward || hub.needs_json(domain, &topic, latched) {
                        match decode_json(types, &ty, &payload) {
                            Some(json) => Some(json),
                            None => {
                                self.undecodable += 1;
                                inbox.drop_one();
                                continue;
                            }
                        }
                    } else {
                        None
                    };
                    if let (true, Some(j)) = (forward, json.as_deref()) {
                        hub.forward(peer, domain, &topic, j, Some((&ty, &payload)), latched);
                    }
                    let msg = json.as_deref().map(Raw::from_valid_json);
                    hub.remote_publish_cdr(domain, &topic, msg, &payload, latched, now);
                }
                ForHub::Check { topic, ty } => hub.set_topic_check(domain, &topic, ty.as_deref()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_ids_round_trip_and_foreign_ids_are_not_ours() {
        assert_eq!(parse_call_id(&format!("\"{}\"", call_id(42))), Some(42));
        assert_eq!(parse_call_id("\"fq42\""), None);
        assert_eq!(parse_call_id("42"), None);
    }

    #[test]
    fn goal_ids_round_trip_and_others_are_not_ours() {
        assert_eq!(parse_goal_id(&format!("\"{}\"", goal_id(7))), Some(7));
        assert_eq!(parse_goal_id("\"fg7\""), None);
        assert_eq!(parse_goal_id("\"rq7\""), None);
    }
}
