//! The rmw_zenoh shell of the ROS 2 link (`rosgate_ros2::link`): what
//! Zenoh's threads learn reaches the link as events through [`LinkInbox`],
//! drained at the start of each of the loop's turns (the link itself is
//! the loop thread's, with no lock), and what the link asks is executed
//! here ([`RosLink::run_link`]): requests and subscriptions with Zenoh,
//! and lines for the hub, handed over in the order the link said them.
//!
//! The link decides everything ROS 2: the graph from every token (the
//! interest and providers the hub is told of, the introspection lists
//! `mod.rs` installs), topics' data both ways (`mod.rs` executes its
//! subscriptions, publishers and puts, and decodes the samples it hands
//! over, on the loop thread, by the link's registry, when a subscriber
//! needs JSON: `cbor-raw` ones get the CDR as it came), the types it asks
//! nodes for, calls and goals both ways (`goals_out.rs`, `calls_in.rs`,
//! `goals_in.rs`: a ROS 2 client's query is queued here with its request,
//! and kept by the loop until the link's one `Reply`).
//!
//! Invariants:
//! - a reply or a query's end is never dropped from [`LinkInbox`] (at most
//!   one per query the link made, and the link bounds those); feedback past
//!   [`MAX_QUEUED_FEEDBACK`] and graph events past [`MAX_LINK_EVENTS`] are
//!   dropped and counted: a call or goal to a server whose token was missed
//!   fails once;
//! - a sample from ROS 2 waits here holding its room in the loop's inbox
//!   budget (`inbox::Inbox::reserve_sample`), given back when the turn
//!   takes it: past the budget it is dropped and counted on Zenoh's
//!   thread, so a flood never stalls the loop nor grows this queue;
//! - a ROS 2 client's query past [`MAX_QUEUED_REQUESTS`] waiting for the
//!   turn gets its error reply at once, on Zenoh's thread: none is dropped
//!   unanswered;
//! - the one `service_response` of each call and the one `action_result`
//!   of each goal go to the hub from the loop's turn, never through the
//!   loop's inbox, which may drop.

use std::rc::Rc;
use std::sync::MutexGuard;
use std::time::{Duration, Instant};

use rosgate_core::bridge::PeerId;
use rosgate_core::hub::{Bridges, RemoteGoal};
use rosgate_core::nodes::Domain;
use rosgate_core::registry::Provided;
use rosgate_ros2::cdr;
use rosgate_ros2::link::{self, Event, Reply as LinkReply, ToHub};
use rosgate_ros2::rmw;
use rosgate_wire::Raw;
use serde_json::Value;
use zenoh::query::Reply;
use zenoh::Session;

use super::calls_in::call_id;
use super::goals_in::goal_id;
use super::goals_out::end_line;
use super::replying::Replying;
use super::{RosLink, RosShared, Typed};
use crate::first_reply::FirstReply;
use crate::remote::failure_line;
use crate::QUERY_TIMEOUT_SECS;

/// Events for the link waiting for the loop's next turn, in all.
pub const MAX_LINK_EVENTS: usize = 4 * link::MAX_ENTITIES;

/// Feedback samples waiting for the loop's next turn; more are dropped
/// (feedback is sheddable, as on a client's queue).
pub const MAX_QUEUED_FEEDBACK: usize = 4096;

/// Samples from ROS 2 the link takes per loop turn (P20: a flood cannot
/// make one turn long); the rest, and the events after them, wait in
/// order for the next turn, holding their room in the loop's inbox
/// budget.
pub const SAMPLES_PER_TURN: usize = 1024;

/// ROS 2 clients' requests waiting for the loop's next turn; more get an
/// error reply at once.
pub const MAX_QUEUED_REQUESTS: usize = 4096;

/// What Zenoh's threads hand the loop for the link.
enum Inbound {
    Event(Event),
    /// A sample (an `Event::Sample`) holding `bytes` of the loop's inbox
    /// budget.
    Sample {
        event: Event,
        bytes: usize,
    },
    /// A ROS 2 client's request, with the query the link's reply answers.
    Request {
        to: Replying,
        domain: Domain,
        name: String,
        request: link::Request,
    },
}

/// Events from Zenoh's threads for the link, in arrival order.
#[derive(Default)]
pub(super) struct LinkInbox {
    events: Vec<Inbound>,
    feedback: usize,
    requests: usize,
    dropped: u64,
}

impl LinkInbox {
    /// The events waiting, in arrival order, up to (not including) the
    /// sample past [`SAMPLES_PER_TURN`]: the rest stay, in order, for the
    /// next turn (and whether some stay).
    fn take(&mut self) -> (Vec<Inbound>, bool) {
        let q = self;
        let mut samples = 0;
        let cut = q
            .events
            .iter()
            .position(|e| {
                samples += usize::from(matches!(e, Inbound::Sample { .. }));
                samples > SAMPLES_PER_TURN
            })
            .unwrap_or(q.events.len());
        let rest = q.events.split_off(cut);
        let taken = std::mem::replace(&mut q.events, rest);
        q.feedback = q
            .events
            .iter()
            .filter(|e| matches!(e, Inbound::Event(Event::Feedback { .. })))
            .count();
        q.requests = q
            .events
            .iter()
            .filter(|e| matches!(e, Inbound::Request { .. }))
            .count();
        let more = !q.events.is_empty();
        (taken, more)
    }
}

/// What the link asked of the hub, kept in order for the turn.
pub(super) enum ForHub {
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

impl RosShared {
    fn link_inbox(&self) -> MutexGuard<'_, LinkInbox> {
        self.link_inbox.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An event for the link from Zenoh's threads: queued for the loop's
    /// next turn, which is woken.
    pub(super) fn to_link(&self, e: Event) {
        let mut q = self.link_inbox();
        let feedback = matches!(e, Event::Feedback { .. });
        let keep = match &e {
            Event::Reply { .. } | Event::QueryEnd { .. } => true,
            Event::Feedback { .. } => q.feedback < MAX_QUEUED_FEEDBACK,
            _ => q.events.len() < MAX_LINK_EVENTS,
        };
        if !keep {
            q.dropped += 1;
            return;
        }
        q.feedback += usize::from(feedback);
        q.events.push(Inbound::Event(e));
        drop(q);
        self.inbox.wake();
    }

    /// A ROS 2 sample, from Zenoh's threads: queued for the link within
    /// the loop's inbox budget (or dropped, counted, past it).
    pub(super) fn to_link_sample(&self, event: Event) {
        let bytes = match &event {
            Event::Sample { payload, .. } => payload.len(),
            _ => 0,
        };
        if !self.inbox.reserve_sample(bytes) {
            return;
        }
        self.link_inbox()
            .events
            .push(Inbound::Sample { event, bytes });
        self.inbox.wake();
    }

    /// A ROS 2 client's request, from Zenoh's threads: queued with its
    /// query for the link, or (the queue full) refused at once.
    pub(super) fn to_link_request(
        &self,
        to: Replying,
        domain: Domain,
        name: &str,
        request: link::Request,
    ) {
        let mut q = self.link_inbox();
        if q.requests >= MAX_QUEUED_REQUESTS {
            q.dropped += 1;
            drop(q);
            to.error("the gateway has too many requests from ROS 2 waiting".into());
            return;
        }
        q.requests += 1;
        q.events.push(Inbound::Request {
            to,
            domain,
            name: name.to_string(),
            request,
        });
        drop(q);
        self.inbox.wake();
    }

    /// The events waiting, in arrival order, up to (not including) the
    /// sample past [`SAMPLES_PER_TURN`]: the rest stay, in order, for the
    /// next turn (and whether some stay).
    fn take_link_events(&self) -> (Vec<Inbound>, bool) {
        self.link_inbox().take()
    }

    /// Events dropped before the link saw them (for the status).
    pub(super) fn link_events_dropped(&self) -> u64 {
        self.link_inbox().dropped
    }

    /// A reply to the link's query `query`, or its end without one.
    pub(super) fn reply_to_link(&self, query: link::QueryId, r: Option<Result<LinkReply, String>>) {
        let e = match r {
            None => Event::QueryEnd { query },
            Some(Ok(reply)) => Event::Reply { query, reply },
            Some(Err(why)) => Event::Reply {
                query,
                reply: LinkReply::Refused(why),
            },
        };
        self.to_link(e);
    }
}

impl RosLink {
    /// A call the bridge of `domain` received for `service`: the link's if
    /// a ROS 2 server serves it (false otherwise: not ours).
    pub(crate) fn call(
        &mut self,
        session: &Session,
        domain: Domain,
        service: &str,
        id: &str,
        args: &str,
        now: Instant,
    ) -> bool {
        if !self.bridged(domain) || !self.link.serves_service(u32::from(domain), service) {
            return false;
        }
        self.link.handle(Event::Call {
            now,
            id: id.to_string(),
            domain: u32::from(domain),
            service: service.to_string(),
            payload: args.as_bytes().to_vec(),
        });
        self.run_link(session);
        true
    }

    /// Executes what the link asks (see the module docs).
    pub(super) fn run_link(&mut self, session: &Session) {
        while let Some(a) = self.link.poll() {
            let refused = match a {
                link::Action::Query {
                    query,
                    domain,
                    service,
                    ty,
                    hash,
                    payload,
                    ..
                } => Domain::try_from(domain)
                    .map_err(|e| e.to_string())
                    .and_then(|d| {
                        let typed = Typed::of(&ty, &hash)
                            .ok_or_else(|| format!("the ROS 2 service's type {ty} has no key"))?;
                        self.exec_call(session, d, &service, typed, query, &payload)
                    })
                    .err()
                    .map(|why| (query, why)),
                link::Action::SendGoal {
                    query,
                    domain,
                    action,
                    uuid,
                    payload,
                } => {
                    let args = String::from_utf8_lossy(&payload).into_owned();
                    Domain::try_from(domain)
                        .map_err(|e| e.to_string())
                        .and_then(|d| self.exec_send_goal(session, d, &action, uuid, query, &args))
                        .err()
                        .map(|why| (query, why))
                }
                link::Action::GetResult { query, uuid, .. } => self
                    .exec_get_result(uuid, query)
                    .err()
                    .map(|why| (query, why)),
                link::Action::CancelGoal {
                    domain,
                    action,
                    uuid,
                    ..
                } => {
                    if let Ok(d) = Domain::try_from(domain) {
                        self.send_cancel(session, d, &action, uuid);
                    }
                    None
                }
                link::Action::WatchFeedback { domain, action, on } => {
                    if let Ok(d) = Domain::try_from(domain) {
                        if on {
                            let typed = self.feedback_type(d, &action);
                            self.watch_feedback(session, d, &action, typed);
                        } else {
                            self.feedback.remove(&(d, Rc::from(action.as_str())));
                        }
                    }
                    None
                }
                link::Action::Deliver(t) => {
                    self.deliver(t);
                    None
                }
                link::Action::Subscribe {
                    domain,
                    topic,
                    ty,
                    on,
                } => {
                    if let Ok(d) = Domain::try_from(domain) {
                        self.exec_subscribe(session, d, &topic, ty, on);
                    }
                    None
                }
                link::Action::Publisher {
                    domain,
                    topic,
                    ty,
                    hash,
                    latched,
                    on,
                } => {
                    if let Ok(d) = Domain::try_from(domain) {
                        let typed = Typed::of(&ty, &hash);
                        self.exec_publisher(session, d, &topic, typed, latched, on);
                    }
                    None
                }
                link::Action::Put {
                    domain,
                    topic,
                    ty,
                    payload,
                    ..
                } => {
                    if let Ok(d) = Domain::try_from(domain) {
                        self.exec_put(session, d, &topic, &ty, &payload);
                    }
                    None
                }
                link::Action::Describe {
                    query,
                    domain,
                    node,
                    ty,
                    hash,
                } => Domain::try_from(domain)
                    .map_err(|e| e.to_string())
                    .and_then(|d| self.exec_describe(d, &node, &ty, &hash, query))
                    .err()
                    .map(|why| (query, why)),
                link::Action::Reply { query, reply } => {
                    self.exec_reply(query, reply);
                    None
                }
                link::Action::Offer {
                    domain,
                    name,
                    ty,
                    action,
                    on,
                } => {
                    if let Ok(d) = Domain::try_from(domain) {
                        if action {
                            self.exec_offer_action_change(session, d, &name, &ty, on);
                        } else {
                            self.exec_offer_service(session, d, &name, &ty, on);
                        }
                    }
                    None
                }
                link::Action::PutFeedback {
                    domain,
                    action,
                    uuid,
                    payload,
                } => {
                    if let Ok(d) = Domain::try_from(domain) {
                        self.exec_put_feedback(d, &action, uuid, &payload);
                    }
                    None
                }
                link::Action::PutStatus {
                    domain,
                    action,
                    goals,
                } => {
                    if let Ok(d) = Domain::try_from(domain) {
                        self.exec_put_status(d, &action, &goals);
                    }
                    None
                }
            };
            // What could not be sent is the peer's refusal, to the link.
            if let Some((query, why)) = refused {
                self.link.handle(Event::Reply {
                    query,
                    reply: LinkReply::Refused(why),
                });
            }
        }
    }

    /// A delivery of the link as the bridge's line, kept for the turn.
    fn deliver(&mut self, t: ToHub) {
        let (domain, line) = match t {
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
            ),
            ToHub::GoalEnd {
                domain,
                action,
                id,
                status,
                result,
            } => {
                if let Ok(d) = Domain::try_from(domain) {
                    self.goal_ended(d, &id);
                }
                (domain, end_line(&action, &id, i64::from(status), result))
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
                    return self.link.handle(Event::Answer {
                        call,
                        result: Err("a request that is not JSON".into()),
                    });
                };
                let Ok(d) = Domain::try_from(domain) else {
                    return;
                };
                self.link_out.push((
                    d,
                    ForHub::Call {
                        call,
                        service,
                        args,
                    },
                ));
                self.shared.inbox.wake();
                return;
            }
            ToHub::Goal {
                goal,
                domain,
                action,
                payload,
            } => {
                let Ok(d) = Domain::try_from(domain) else {
                    return;
                };
                // Decoded to JSON by the shell; the action offered to ROS 2
                // names the type.
                let ty = self.offered_type(d, &action).unwrap_or_default().to_string();
                let Ok(args) = String::from_utf8(payload) else {
                    return;
                };
                self.link_out.push((
                    d,
                    ForHub::Goal {
                        goal,
                        action,
                        ty,
                        args,
                    },
                ));
                self.shared.inbox.wake();
                return;
            }
            ToHub::Interest { domain, topic, ty } => {
                // One interest per topic ROS 2 subscribes to (the link
                // says when its first subscription comes and its last goes),
                // and client messages on it must then fit its type.
                if let Ok(d) = Domain::try_from(domain) {
                    let who = format!("{}:link", super::ROS_GRAPH);
                    self.shared.fed.interest(d, topic.clone(), who, ty.is_some());
                    self.link_out.push((d, ForHub::Check { topic, ty }));
                    self.shared.inbox.wake();
                }
                return;
            }
            ToHub::Sample {
                domain,
                topic,
                ty,
                latched,
                payload,
                ..
            } => {
                let Ok(d) = Domain::try_from(domain) else {
                    return;
                };
                // Decoded (or not) when the hub takes it: only then is
                // it known whether a subscriber needs JSON.
                self.link_out.push((
                    d,
                    ForHub::Sample {
                        topic,
                        ty,
                        payload,
                        latched,
                    },
                ));
                return;
            }
            ToHub::LearnType { ty, .. } => {
                rosgate_core::log!(Info, "ros2: learned {ty} from a node's description");
                return;
            }
            ToHub::Provider {
                domain,
                name,
                action,
                ty,
            } => {
                let Ok(d) = Domain::try_from(domain) else {
                    return;
                };
                if ty.is_none() {
                    // This gateway as a client of what no longer has a
                    // server: its `SC` tokens go.
                    self.forget_clients(d, &name, action);
                }
                // One provider entry per service or action, whichever
                // nodes serve it: calls and goals go to the link, which
                // picks a server.
                let (kind, who) = if action {
                    (Provided::Action, format!("{}:action", super::ROS_GRAPH))
                } else {
                    (Provided::Service, format!("{}:link", super::ROS_GRAPH))
                };
                self.shared.fed.provider(kind, d, name, who, ty);
                return;
            }
            ToHub::CancelGoal { goal } => {
                let Some((domain, action)) = self.link.goal_in(goal) else {
                    return;
                };
                let Ok(d) = Domain::try_from(domain) else {
                    return;
                };
                let action = action.to_string();
                self.link_out.push((d, ForHub::Cancel { goal, action }));
                self.shared.inbox.wake();
                return;
            }
        };
        let Ok(d) = Domain::try_from(domain) else {
            return;
        };
        self.link_out.push((d, ForHub::Line(line)));
        // Outside a turn (a call or goal refused as it is sent): the loop
        // turns again to hand it over.
        self.shared.inbox.wake();
    }

    /// A call of `service` (the link's query `query`): the request typed
    /// as the server declared it, its reply decoded for the link.
    fn exec_call(
        &mut self,
        session: &Session,
        domain: Domain,
        service: &str,
        typed: Typed,
        query: link::QueryId,
        args: &[u8],
    ) -> Result<(), String> {
        let types = self.types();
        let srv = rmw::ros_type_name(&typed.dds_type).and_then(|t| types.srv(&t));
        let Some(srv) = srv else {
            return Err(format!(
                "the ROS 2 service's type {} is unknown here (--interfaces)",
                typed.dds_type
            ));
        };
        let v: Value =
            rosgate_ros2::json::from_str(&String::from_utf8_lossy(args)).unwrap_or_default();
        let bytes = cdr::encode(&*types, &srv.request, &v)
            .map_err(|e| format!("the arguments are not {}: {e}", srv.request))?;
        let Some(gid) = self.client_gid(session, domain, service, &typed) else {
            return Err("the gateway could not join the service as a client".into());
        };
        let (sh, response) = (self.shared.clone(), srv.response.clone());
        let first = FirstReply::new(move |r: Option<&Reply>| {
            let reply = r.map(|r| match r.result() {
                Ok(sample) => {
                    let mut json = Vec::new();
                    let payload = sample.payload().to_bytes();
                    match cdr::decode_json(&*types, &response, &payload, &mut json) {
                        Ok(()) => Ok(LinkReply::Service(json)),
                        Err(e) => Err(format!("the ROS 2 server's reply is not {response}: {e}")),
                    }
                }
                Err(e) => Err(format!(
                    "the ROS 2 server refused the call: {}",
                    String::from_utf8_lossy(&e.payload().to_bytes())
                )),
            });
            sh.reply_to_link(query, reply);
        });
        let key = rmw::data_key(u32::from(domain), service, &typed.dds_type, &typed.hash);
        let timeout = Duration::from_secs(QUERY_TIMEOUT_SECS);
        self.shared
            .request(key, bytes, gid, timeout, move |r| first.on(r));
        Ok(())
    }

    /// Feeds the link what Zenoh's threads learned and the time, executes
    /// what it asks, and hands its lines to the hub in order.
    pub(super) fn turn_link(&mut self, session: &Session, hub: &mut Bridges<'_>, now: Instant) {
        let (events, more) = self.shared.take_link_events();
        if more {
            self.shared.inbox.wake();
        }
        for e in events {
            match e {
                Inbound::Event(e) => self.link.handle(e),
                Inbound::Sample { event, bytes } => {
                    // Taken: its room in the loop's inbox budget is free.
                    self.shared.inbox.release_sample(bytes);
                    self.link.handle(event);
                }
                Inbound::Request {
                    to,
                    domain,
                    name,
                    request,
                } => {
                    self.next_in_query += 1;
                    let query = link::InQuery(self.next_in_query);
                    self.replying.insert(query, to);
                    self.link.handle(Event::Request {
                        now,
                        query,
                        domain: u32::from(domain),
                        name,
                        request,
                    });
                }
            }
        }
        self.link.handle(Event::Tick(now));
        self.run_link(session);
        for (domain, h) in std::mem::take(&mut self.link_out) {
            match h {
                ForHub::Line(line) => hub.remote_reply(domain, line.as_bytes(), now),
                ForHub::Call {
                    call,
                    service,
                    args,
                } => hub.remote_call(
                    PeerId::Ros2,
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
                    hub.remote_goal(PeerId::Ros2, domain, goal, now)
                }
                ForHub::Cancel { goal, action } => {
                    hub.remote_cancel(PeerId::Ros2, domain, &action, &goal_id(goal), now)
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
                    let json = if hub.needs_json(domain, &topic, latched) {
                        match super::decode_json(self.link.types(), &ty, &payload) {
                            Some(json) => Some(json),
                            None => {
                                self.undecodable += 1;
                                self.shared.inbox.drop_one();
                                continue;
                            }
                        }
                    } else {
                        None
                    };
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

    fn sample(n: u8) -> Inbound {
        Inbound::Sample {
            event: Event::Sample {
                domain: 0,
                topic: "/t".into(),
                publisher: Some([n; 16]),
                ty: "std_msgs/msg/String".into(),
                hash: String::new(),
                payload: vec![n],
            },
            bytes: 1,
        }
    }

    fn gone(n: u8) -> Inbound {
        Inbound::Event(Event::Gone([n; 16]))
    }

    fn feedback() -> Inbound {
        Inbound::Event(Event::Feedback {
            domain: 0,
            action: "/a".into(),
            uuid: [0; 16],
            payload: Vec::new(),
        })
    }

    #[test]
    fn a_turn_takes_samples_per_turn_samples_and_leaves_the_rest_in_order() {
        let mut q = LinkInbox::default();
        q.events.push(gone(1));
        for _ in 0..SAMPLES_PER_TURN {
            q.events.push(sample(2));
        }
        // Past the allowance: this sample, and what came after it, wait.
        q.events.push(sample(3));
        q.events.push(gone(4));
        q.events.push(feedback());
        q.feedback = 1;
        let (taken, more) = q.take();
        assert!(more);
        assert_eq!(taken.len(), 1 + SAMPLES_PER_TURN);
        assert!(matches!(taken[0], Inbound::Event(Event::Gone(g)) if g == [1; 16]));
        assert_eq!(q.events.len(), 3);
        assert!(
            matches!(&q.events[0], Inbound::Sample { event: Event::Sample { publisher, .. }, .. } if *publisher == Some([3; 16]))
        );
        assert!(matches!(q.events[1], Inbound::Event(Event::Gone(g)) if g == [4; 16]));
        assert_eq!(q.feedback, 1, "the feedback still waiting is still counted");
        let (taken, more) = q.take();
        assert!(!more);
        assert_eq!(taken.len(), 3);
        assert_eq!(q.feedback, 0);
        assert!(q.events.is_empty());
    }
}
