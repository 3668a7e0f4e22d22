//! The rmw_zenoh shell of the ROS 2 link (`rosgate_ros2::link`): what
//! Zenoh's threads learn reaches the link as events through the shared
//! link queue (`rosgate_peers::ros2::queue`), drained at the start of each
//! of the loop's turns (the link itself is the loop thread's, with no
//! lock), and what the link asks is executed here ([`RosLink::run_link`]):
//! requests and subscriptions with Zenoh, and lines for the hub kept by
//! the hub's edge (`rosgate_peers::ros2::edge`), handed over in the order
//! the link said them.
//!
//! The link decides everything ROS 2: the graph from every token (the
//! interest and providers the hub is told of, the introspection lists
//! `mod.rs` installs), topics' data both ways (`mod.rs` executes its
//! subscriptions, publishers and puts; the edge decodes the samples it
//! hands over, on the loop thread, by the link's registry, when a
//! subscriber needs JSON: `cbor-raw` ones get the CDR as it came), the
//! types it asks nodes for, calls and goals both ways (`goals_out.rs`,
//! `calls_in.rs`, `goals_in.rs`: a ROS 2 client's query is queued with its
//! request, and kept by the loop until the link's one `Reply`).
//!
//! Invariants: the link queue's (bounded, replies never dropped, samples
//! within the loop's inbox budget, requests past the bound refused at
//! once) and the edge's (each call's and goal's one answer handed over
//! from the loop's turn, never through the loop's inbox, which may drop).

use std::rc::Rc;
use std::time::{Duration, Instant};

use rosgate_core::bridge::PeerId;
use rosgate_core::hub::Bridges;
use rosgate_core::nodes::Domain;
use rosgate_core::registry::Provided;
use rosgate_peers::ros2::edge::Side;
use rosgate_peers::ros2::queue::Refuse;
use rosgate_ros2::cdr;
use rosgate_ros2::link::{self, Event, Reply as LinkReply, ToHub};
use rosgate_ros2::rmw;
use serde_json::Value;
use zenoh::query::Reply;
use zenoh::Session;

use super::replying::Replying;
use super::{RosLink, Typed};
use crate::first_reply::FirstReply;
use crate::QUERY_TIMEOUT_SECS;

impl Refuse for Replying {
    fn refuse(self, why: String) {
        self.error(why);
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

    /// A delivery of the link, kept by the hub's edge for the turn; what
    /// it asks of this shell besides, done.
    fn deliver(&mut self, t: ToHub) {
        match self.edge.deliver(&mut self.link, t) {
            Side::Nothing => return,
            Side::Wake => {}
            Side::GoalEnded { domain, id } => self.goal_ended(domain, &id),
            Side::Interest { domain, topic, on } => {
                let who = format!("{}:link", super::ROS_GRAPH);
                self.shared.fed.interest(domain, topic, who, on);
            }
            Side::Provider {
                kind,
                domain,
                name,
                ty,
            } => {
                let action = kind == Provided::Action;
                if ty.is_none() {
                    // This gateway as a client of what no longer has a
                    // server: its `SC` tokens go.
                    self.forget_clients(domain, &name, action);
                }
                // One provider entry per service or action, whichever
                // nodes serve it: calls and goals go to the link, which
                // picks a server.
                let who = if action {
                    format!("{}:action", super::ROS_GRAPH)
                } else {
                    format!("{}:link", super::ROS_GRAPH)
                };
                self.shared.fed.provider(kind, domain, name, who, ty);
                return;
            }
            Side::Goal {
                goal,
                domain,
                action,
                args,
            } => {
                // The action offered to ROS 2 names the type.
                let ty = self
                    .offered_type(domain, &action)
                    .unwrap_or_default()
                    .to_string();
                self.edge.goal(goal, domain, action, ty, args);
            }
        }
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
        let sh = self.shared.clone();
        sh.queue.feed(
            &mut self.link,
            &mut self.replying,
            &mut self.next_in_query,
            now,
        );
        self.run_link(session);
        let types = self.link.types().clone();
        self.edge
            .hand_over(hub, &types, &self.shared.inbox, PeerId::Ros2, now);
    }
}
