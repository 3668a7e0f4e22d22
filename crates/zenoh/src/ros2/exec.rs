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
use rosgate_peers::ros2::asks::Shell;
use rosgate_peers::ros2::edge::Side;
use rosgate_peers::ros2::exec::{run_link, Exec};
use rosgate_peers::ros2::queue::Refuse;
use rosgate_ros2::cdr;
use rosgate_ros2::link::{self, Answer, Link, Reply as LinkReply, Stamp, ToHub};
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
    /// Executes what the link asks (see the module docs), with this
    /// session: `rosgate_peers::ros2::exec::run_link` dispatches each
    /// action to [`ZenohExec`].
    pub(super) fn run_link(&mut self, session: &Session) {
        run_link(&mut self.exec(session));
    }

    /// This shell with the session it executes the link's actions in: what
    /// the hub asks goes through it (`rosgate_peers::ros2::asks`).
    pub(crate) fn exec<'a>(&'a mut self, session: &'a Session) -> ZenohExec<'a> {
        ZenohExec {
            shell: self,
            session,
        }
    }

    /// A delivery of the link, kept by the hub's edge for the turn; what
    /// it asks of this shell besides, done.
    fn deliver(&mut self, t: ToHub) {
        let actions = &self.actions;
        let side = self.edge.deliver(&mut self.link, t, |domain, action| {
            actions
                .get(&(domain, Rc::from(action)))
                .map(|o| o.ty.clone())
        });
        match side {
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

/// The rmw_zenoh shell with the session it executes the link's actions in.
pub(crate) struct ZenohExec<'a> {
    pub(super) shell: &'a mut RosLink,
    session: &'a Session,
}

impl Shell for ZenohExec<'_> {
    fn bridged(&self, domain: Domain) -> bool {
        self.shell.bridged(domain)
    }
}

impl Exec for ZenohExec<'_> {
    fn link(&mut self) -> &mut Link {
        &mut self.shell.link
    }

    fn subscribe(&mut self, domain: Domain, topic: &str, ty: Option<(String, String)>, on: bool) {
        self.shell
            .exec_subscribe(self.session, domain, topic, ty, on);
    }

    fn publisher(
        &mut self,
        domain: Domain,
        topic: &str,
        ty: &str,
        hash: &str,
        latched: Option<u32>,
        on: bool,
    ) {
        let typed = Typed::of(ty, hash);
        self.shell
            .exec_publisher(self.session, domain, topic, typed, latched, on);
    }

    fn put(
        &mut self,
        domain: Domain,
        topic: &str,
        ty: &str,
        payload: &[u8],
        cdr: Option<&[u8]>,
    ) -> bool {
        self.shell
            .exec_put(self.session, domain, topic, ty, payload, cdr)
    }

    fn call(
        &mut self,
        domain: Domain,
        service: &str,
        ty: &str,
        hash: &str,
        query: link::QueryId,
        payload: &[u8],
    ) -> Result<(), String> {
        let typed = Typed::of(ty, hash)
            .ok_or_else(|| format!("the ROS 2 service's type {ty} has no key"))?;
        self.shell
            .exec_call(self.session, domain, service, typed, query, payload)
    }

    fn send_goal(
        &mut self,
        domain: Domain,
        action: &str,
        uuid: [u8; 16],
        query: link::QueryId,
        goal: &[u8],
    ) -> Result<(), String> {
        let args = String::from_utf8_lossy(goal).into_owned();
        self.shell
            .exec_send_goal(self.session, domain, action, uuid, query, &args)
    }

    fn get_result(
        &mut self,
        _domain: Domain,
        _action: &str,
        uuid: [u8; 16],
        query: link::QueryId,
    ) -> Result<(), String> {
        self.shell.exec_get_result(uuid, query)
    }

    fn cancel_goal(&mut self, domain: Domain, action: &str, uuid: [u8; 16], _query: link::QueryId) {
        self.shell.send_cancel(self.session, domain, action, uuid);
    }

    fn watch_feedback(&mut self, domain: Domain, action: &str, on: bool) {
        if on {
            let typed = self.shell.feedback_type(domain, action);
            self.shell
                .watch_feedback(self.session, domain, action, typed);
        } else {
            self.shell.feedback.remove(&(domain, Rc::from(action)));
        }
    }

    fn describe(
        &mut self,
        domain: Domain,
        node: &str,
        ty: &str,
        hash: &str,
        query: link::QueryId,
    ) -> Result<(), String> {
        self.shell.exec_describe(domain, node, ty, hash, query)
    }

    fn offer(&mut self, domain: Domain, name: &str, ty: &str, action: bool, on: bool) {
        if action {
            self.shell
                .exec_offer_action_change(self.session, domain, name, ty, on);
        } else {
            self.shell
                .exec_offer_service(self.session, domain, name, ty, on);
        }
    }

    fn put_feedback(&mut self, domain: Domain, action: &str, uuid: [u8; 16], payload: &[u8]) {
        self.shell.exec_put_feedback(domain, action, uuid, payload);
    }

    fn put_status(&mut self, domain: Domain, action: &str, goals: &[([u8; 16], Stamp, i8)]) {
        self.shell.exec_put_status(domain, action, goals);
    }

    fn reply(&mut self, query: link::InQuery, answer: Answer) {
        self.shell.exec_reply(query, answer);
    }

    fn deliver(&mut self, t: ToHub) {
        self.shell.deliver(t);
    }
}
