//! The ROS 2 peer as [`crate::Federation`] sees it: [`RosLink`] with the
//! session it declares in, behind the [`Peer`] trait. It takes a call,
//! goal, cancel or answer only when it is the ROS 2 graph's (a service a
//! ROS 2 server serves, a goal id or call id it made).

use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use rosgate_core::bridge::PeerId;
use rosgate_core::hub::Bridges;
use rosgate_core::nodes::Domain;
use rosgate_ros2::registry::Registry;
use zenoh::Session;

use rosgate_peers::ros2::asks;

use super::exec::ZenohExec;
use super::RosLink;
use crate::remote::Shared;
use crate::worker::Decls;
use crate::RosSettings;
use rosgate_peers::Inbox;
use rosgate_peers::{Cdr, Peer, Put};

struct RosPeer {
    link: RosLink,
    session: Session,
}

/// Joins the ROS 2 graphs `settings` names, as a peer of the session.
pub(crate) fn start(
    session: &Session,
    settings: &RosSettings,
    types: Registry,
    fed: Arc<Shared>,
    inbox: Arc<Inbox>,
    decls: Decls,
) -> Result<Box<dyn Peer>, String> {
    let link = RosLink::start(session, settings, types, fed, inbox, decls)?;
    Ok(Box::new(RosPeer {
        link,
        session: session.clone(),
    }))
}

impl Peer for RosPeer {
    fn sync(&mut self, hub: &mut Bridges<'_>, _now: Instant) {
        self.link.sync_nodes(&self.session, hub);
    }

    fn want(&mut self, hub: &Bridges<'_>, domain: Domain, topic: Rc<str>) {
        let ty = hub.topic_type(domain, &topic);
        asks::want(&mut self.link.exec(&self.session), domain, &topic, ty, true);
    }

    fn unwant(&mut self, domain: Domain, topic: &Rc<str>) {
        asks::want(
            &mut self.link.exec(&self.session),
            domain,
            topic,
            None,
            false,
        );
    }

    fn provide(&mut self, domain: Domain, name: Rc<str>, ty: &str) {
        asks::provide(&mut self.link.exec(&self.session), domain, &name, Some(ty));
    }

    fn unprovide(&mut self, domain: Domain, name: &Rc<str>) {
        asks::provide(&mut self.link.exec(&self.session), domain, name, None);
    }

    fn serve(&mut self, domain: Domain, name: Rc<str>, ty: &str) {
        asks::serve(&mut self.link.exec(&self.session), domain, &name, Some(ty));
    }

    fn unserve(&mut self, domain: Domain, name: &Rc<str>) {
        asks::serve(&mut self.link.exec(&self.session), domain, name, None);
    }

    fn publish(
        &mut self,
        domain: Domain,
        topic: &str,
        msg: &str,
        cdr: Option<Cdr<'_>>,
        depth: Option<u32>,
    ) -> Put {
        let mut x = self.link.exec(&self.session);
        asks::publish(&mut x, domain, topic, msg, cdr, depth)
    }

    fn id(&self) -> PeerId {
        PeerId::Ros2
    }

    fn call(&mut self, domain: Domain, service: &str, id: &str, args: &str, now: Instant) -> bool {
        asks::call(
            &mut self.link.exec(&self.session),
            domain,
            service,
            id,
            args,
            now,
        )
    }

    fn answer(&mut self, id: &str, values: &str, result: bool) {
        asks::answer(&mut self.link.exec(&self.session), id, values, result);
    }

    fn goal(
        &mut self,
        domain: Domain,
        action: &str,
        id: &str,
        _ty: &str,
        args: &str,
        now: Instant,
    ) -> bool {
        let uuid = |x: &mut ZenohExec<'_>| x.shell.goal_uuid(domain, id);
        asks::send_goal(
            &mut self.link.exec(&self.session),
            domain,
            action,
            id,
            args,
            now,
            uuid,
        )
    }

    fn cancel(&mut self, domain: Domain, _action: &str, id: &str) {
        asks::cancel_goal(&mut self.link.exec(&self.session), domain, id);
    }

    fn goal_update(&mut self, id: &str, values: &str, end: Option<(u8, bool)>) {
        let status = end.map(|(s, _)| s.to_string());
        let end = status
            .as_deref()
            .zip(end.map(|(_, ok)| if ok { "true" } else { "false" }));
        self.link.goal_update(&self.session, id, values, end);
    }

    fn turn(&mut self, hub: &mut Bridges<'_>, now: Instant) -> Option<Instant> {
        self.link.turn(&self.session, hub, now)
    }

    /// The link's entities (what ROS 2 announced; the shell keeps no
    /// table of them).
    fn held_bytes(&self) -> usize {
        self.link.link.stats().bytes
    }

    fn status(&self, status: &mut serde_json::Value) {
        status["ros2"] = self.link.status_json();
    }
}
