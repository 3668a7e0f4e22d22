//! `--dds-domain`, `--dds-network`: starts `rosgate-dds` (ROS 2 graphs
//! over DDS) with the loop's inbox as its way in; the loop then calls its
//! peer is driven with the others (`peers.rs`). Opens no Zenoh session.

use std::io;
use std::sync::Arc;

use rosgate_core::log;
use rosgate_core::Hub;
use rosgate_dds::{Dds, Inbox, Peer, Settings};
use rosgate_ros2::registry::Registry;

use crate::config::DdsFlags;

/// Checks the `--dds-*` flags before the server binds anything (a
/// network beyond loopback is refused unless `allow_unauthenticated`).
/// `None` when no `--dds-domain` was given.
pub fn prepare(
    flags: &DdsFlags,
    allow_unauthenticated: bool,
    types: &Arc<Registry>,
) -> io::Result<Option<Settings>> {
    if flags.domains.is_empty() {
        return Ok(None);
    }
    let settings = Settings {
        domains: flags.domains.clone(),
        types: types.clone(),
        network: flags.network,
        allow_unauthenticated_network: allow_unauthenticated,
    };
    settings.check().map_err(io::Error::other)?;
    Ok(Some(settings))
}

/// Joins the DDS graphs [`prepare`] checked, with `inbox` (the
/// gateway's, shared with Zenoh's peers) as the way into the loop: DDS's
/// peer, for the gateway's one driver (`peers.rs`).
pub fn start(
    settings: Option<Settings>,
    inbox: Arc<Inbox>,
    hub: &mut Hub,
) -> io::Result<Option<(Dds, Box<dyn Peer>)>> {
    let Some(settings) = settings else {
        return Ok(None);
    };
    let started = Dds::start(&settings, inbox).map_err(io::Error::other)?;
    hub.enable_federation();
    log!(
        Info,
        "ros2: joined the ROS 2 graph (DDS, RustDDS) of domain(s) {:?} on {}",
        settings.domains,
        settings
            .network
            .map_or_else(|| "127.0.0.1".to_string(), |n| n.to_string())
    );
    Ok(Some(started))
}
