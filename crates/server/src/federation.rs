//! `--zenoh-*` and `--ros-domain`: starts `rosgate-zenoh` (other gateways
//! and ROS 2 graphs over one Zenoh session) with the
//! loop's inbox as its way in; its peers are driven with the others
//! (`peers.rs`).

use std::io;
use std::sync::Arc;

use rosgate_core::log;
use rosgate_core::Hub;
use rosgate_ros2::registry::Registry;
use rosgate_zenoh::{Federation, Inbox, Peer, Settings};

use crate::config::ZenohFlags;

/// Checks the `--zenoh-*` flags and reads the files they name, before the
/// server binds anything: a bad flag or file is reported first, whatever
/// else would fail later, and Zenoh reaching beyond this machine without
/// authentication is refused unless `allow_unauthenticated` (docs/security.md).
/// `None` when no `--zenoh-*` flag was given.
pub fn prepare(
    flags: &ZenohFlags,
    allow_unauthenticated: bool,
    types: &Arc<Registry>,
) -> io::Result<Option<Prepared>> {
    if !flags.given() {
        return Ok(None);
    }
    let mut settings = settings(flags, types);
    settings.allow_unauthenticated_network = allow_unauthenticated;
    let prepared = settings.prepare().map_err(io::Error::other)?;
    Ok(Some(Prepared { settings, prepared }))
}

/// What [`prepare`] checked, for [`start`].
pub struct Prepared {
    settings: Settings,
    prepared: rosgate_zenoh::Prepared,
}

fn settings(flags: &ZenohFlags, types: &Arc<Registry>) -> Settings {
    Settings {
        connect: flags.connect.clone(),
        listen: flags.listen.clone(),
        mode: flags.mode.clone(),
        config_file: flags.config_file.clone(),
        scouting: flags.scouting,
        ros: rosgate_zenoh::RosSettings {
            domains: flags.ros_domains.clone(),
            types: types.clone(),
        },
        allow_unauthenticated_network: false,
    }
}

/// The session and its peers.
pub type Started = (Federation, Vec<Box<dyn Peer>>);

/// Opens the Zenoh session that [`prepare`] checked, with `inbox` (the
/// gateway's) as its peers' way into the loop: the session and its peers,
/// for the gateway's one driver (`peers.rs`).
pub fn start(
    prepared: Option<Prepared>,
    inbox: Arc<Inbox>,
    hub: &mut Hub,
) -> io::Result<Option<Started>> {
    let Some(Prepared { settings, prepared }) = prepared else {
        return Ok(None);
    };
    let (f, peers) = Federation::start(prepared, inbox).map_err(io::Error::other)?;
    hub.enable_federation();
    // Where it really listens: the session's locators, with the ports the
    // system chose.
    log!(
        Info,
        "federation: zenoh id {} ({}), connect {:?}, listening on {:?}, multicast scouting {}",
        f.zid(),
        settings.mode.as_deref().unwrap_or("peer"),
        settings.connect,
        f.locators(),
        if settings.scouting { "on" } else { "off" }
    );
    if !settings.ros.domains.is_empty() {
        log!(
            Info,
            "ros2: joined the ROS 2 graph (rmw_zenoh) of domain(s) {:?}",
            settings.ros.domains
        );
    }
    Ok(Some((f, peers)))
}
