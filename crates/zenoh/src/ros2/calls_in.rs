//! Calls ROS 2 clients make of services local clients provide, as the
//! ROS 2 link (`rosgate_ros2::link::calls`) decides them. This file only
//! executes:
//! - the link's `Offer` of a service: a complete queryable of the
//!   service's data key with its `SS` token, or their withdrawal;
//! - each query, on Zenoh's thread: its request decoded (CDR -> JSON) and
//!   queued for the link with the query itself ([`RosShared::to_link_request`]);
//!   a request that does not decode is refused there;
//! - the link's `ToHub::Call`: the bridge's `call_service` (`rq<n>`);
//! - the local provider's `service_response` to `rq<n>`: the link's
//!   `Event::Answer` (`rosgate_peers::ros2::asks::answer`);
//! - the link's `Reply` to a query: `replying.rs`.
//!
//! Invariant: the link answers each query it is given exactly once, so
//! each Zenoh query kept here ([`Replying`]) is replied to once and then
//! dropped; one that never reaches the link (the queue is full) has its
//! error reply on Zenoh's thread at once.

use std::rc::Rc;
use std::sync::Arc;

use rosgate_core::nodes::Domain;
use rosgate_ros2::cdr;
use rosgate_ros2::link::Request;
use rosgate_ros2::registry::Registry;
use rosgate_ros2::rmw::{self, Attachment, EntityKind};
use zenoh::query::Query;
use zenoh::sample::Locality;
use zenoh::{Session, Wait};

use super::replying::Replying;
use super::{RosLink, RosShared, Server, Typed};

impl RosShared {
    /// A call from a ROS 2 client of a service a local client provides,
    /// on Zenoh's thread: decoded and queued for the link, or refused.
    pub(super) fn on_query(
        &self,
        types: &Arc<Registry>,
        domain: Domain,
        service: &str,
        srv: &str,
        q: Query,
    ) {
        let Some(att) = q
            .attachment()
            .and_then(|a| Attachment::decode(&a.to_bytes()))
        else {
            let _ = q
                .reply_err("a request without rmw_zenoh's attachment")
                .wait();
            return;
        };
        let Some(def) = types.srv(srv) else {
            let _ = q.reply_err(format!("unknown service type {srv}")).wait();
            return;
        };
        let (request, response) = (def.request.clone(), def.response.clone());
        let payload = q
            .payload()
            .map(|p| p.to_bytes().into_owned())
            .unwrap_or_default();
        let mut args = Vec::new();
        if let Err(e) = cdr::decode_json(&**types, &request, &payload, &mut args) {
            let _ = q
                .reply_err(format!("a request that is not {request}: {e}"))
                .wait();
            return;
        }
        let to = Replying {
            query: q,
            types: types.clone(),
            response_type: response,
            seq: att.seq,
            gid: att.gid,
            stamp: (0, 0),
        };
        self.to_link_request(to, domain, service, Request::Service(args));
    }
}

impl RosLink {
    /// The link offers a local service to ROS 2 (`on`), or withdraws it:
    /// a complete queryable of its data key and its `SS` token, when its
    /// type is known.
    pub(super) fn exec_offer_service(
        &mut self,
        session: &Session,
        domain: Domain,
        name: &str,
        ty: &str,
        on: bool,
    ) {
        let k = (domain, Rc::<str>::from(name));
        self.servers.remove(&k);
        if !on {
            return;
        }
        let types = self.types();
        let Some(def) = types.srv(ty) else {
            rosgate_core::log!(
                Info,
                "ros2: service {name} not offered to ROS 2: its type {ty:?} is unknown (--interfaces)"
            );
            return;
        };
        let srv = def.name.clone();
        let (Some(dds_type), Some(hash)) = (rmw::dds_type_name(&srv), types.hash(&srv)) else {
            return;
        };
        let typed = Typed {
            dds_type,
            hash: hash.to_string(),
        };
        let key = rmw::data_key(u32::from(domain), name, &typed.dds_type, &typed.hash);
        let (sh, service, s) = (self.shared.clone(), name.to_string(), srv.clone());
        let snapshot = types.clone();
        let queryable = self.decls.declare(
            format!("ros2: cannot offer {name} to ROS 2"),
            move |session: &Session| {
                session
                    .declare_queryable(key)
                    // rmw_zenoh's clients ask complete queryables only.
                    .complete(true)
                    .allowed_origin(Locality::Remote)
                    .callback(move |q: Query| sh.on_query(&snapshot, domain, &service, &s, q))
                    .wait()
            },
        );
        if let Some((_, token)) =
            self.declare(session, domain, EntityKind::ServiceServer, name, &typed)
        {
            self.servers.insert(
                k,
                Server {
                    _queryable: queryable,
                    _token: token,
                },
            );
        }
    }
}
