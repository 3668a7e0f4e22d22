//! The rmw_zenoh adapter's graph half: a liveliness token ([`Token`]) as
//! the link's [`Entity`]. Keys, attachments and payload framing stay in
//! [`crate::rmw`]; the shell that owns the Zenoh session uses both.
//!
//! Invariant: an entity's GID is the one rmw_zenoh computes for its token
//! (what its samples' attachments carry), so a sample finds its publisher.

use super::{Entity, EntityKind, Qos};
use crate::rmw::Token;

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
