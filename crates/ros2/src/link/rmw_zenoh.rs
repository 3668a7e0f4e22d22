//! The rmw_zenoh adapter, pure: a liveliness token ([`Token`]) as the
//! link's [`Entity`], a received sample (key, attachment) as the link's
//! [`Event::Sample`], and the keys the link's puts and queries go to. The
//! formats themselves are [`crate::rmw`]'s; the shell that owns the Zenoh
//! session calls these.
//!
//! Invariants: an entity's GID is the one rmw_zenoh computes for its token
//! (what its samples' attachments carry), so a sample finds its publisher;
//! a key or attachment that does not parse gives `None`, never a guess.

use super::{Domain, Entity, EntityKind, Event, Qos};
use crate::rmw::{self, Attachment, Token};

/// The link's view of a token. Service types are named as ROS names them
/// (`pkg/srv/X`), whichever of request or response the token spells.
pub fn entity(token: &Token) -> Entity {
    let (name, ty, hash, qos) = match &token.endpoint {
        Some(ep) => {
            let ty = if token.kind.is_service() {
                crate::rmw::dds_service_type(&ep.dds_type)
                    .map(|t| crate::rmw::demangle_if_ros_type(&t))
                    .unwrap_or_else(|| ep.ros_type())
            } else {
                ep.ros_type()
            };
            (ep.name.clone(), ty, ep.hash.clone(), ep.qos)
        }
        None => (
            String::new(),
            String::new(),
            String::new(),
            Qos::keep_last(0),
        ),
    };
    Entity {
        gid: token.gid(),
        kind: token.kind,
        domain: token.domain,
        participant: token.zid.clone(),
        node: token.node_fqn(),
        name,
        ty,
        hash,
        qos,
    }
}

/// Whether a token is a node's (nodes carry no endpoint).
pub fn is_node(token: &Token) -> bool {
    token.kind == EntityKind::Node
}

/// A sample received on a data key, with its attachment, as the link's
/// event: the topic, type and hash from the key, the publisher from the
/// attachment's GID (none without one).
pub fn sample(key: &str, attachment: Option<&[u8]>, payload: Vec<u8>) -> Option<Event> {
    let (domain, topic, dds, hash) = rmw::parse_data_key(key)?;
    let ty = rmw::ros_type_name(&dds)?;
    Some(Event::Sample {
        domain,
        topic,
        publisher: attachment.and_then(Attachment::decode).map(|a| a.gid),
        ty,
        hash,
        payload,
    })
}

/// The data key a put of `ty` (a ROS type name) with `hash` on `topic`
/// goes to: the ROS 2 subscription's own key.
pub fn put_key(domain: Domain, topic: &str, ty: &str, hash: &str) -> Option<String> {
    Some(rmw::data_key(domain, topic, &rmw::dds_type_name(ty)?, hash))
}

/// The key a query to a service of `ty` (`pkg/srv/X`) with `hash` goes to.
pub fn query_key(domain: Domain, service: &str, ty: &str, hash: &str) -> Option<String> {
    Some(rmw::service_key(
        domain,
        service,
        &rmw::dds_type_name(ty)?,
        hash,
    ))
}
