//! rosgate in a DDS ROS 2 graph (issue 26): `--dds-domain N` joins the
//! graph of `ROS_DOMAIN_ID` N that runs rmw_fastrtps (Fast DDS, the
//! default middleware of every ROS 2 distribution) or another DDS rmw,
//! through RustDDS, and bridges it with rosgate domain N, as
//! `--ros-domain` does for rmw_zenoh. Only the transport differs: the
//! ROS 2 logic is the sans-io link (`rosgate_ros2::link`, with its DDS
//! adapter `link/rmw_dds.rs`), and everything a shell does that is not DDS
//! is `rosgate_peers`'s, shared with the rmw_zenoh side.
//!
//! - `shell/`: the link's actions executed with RustDDS on the loop
//!   thread, behind `rosgate_peers::Peer`; this gateway's nodes on
//!   `ros_discovery_info`;
//! - `pump.rs`: the one thread of ours, which drains RustDDS's readers and
//!   discovery (mio 1 sources) into the loop's bounded hand-off;
//! - `qos.rs`, `raw.rs`: QoS both ways, raw CDR in and out of RustDDS.
//!
//! What crosses in this slice: the graph (ROS 2 nodes, topics, services
//! in rosapi and the dashboard; this gateway's node and its client nodes
//! in `ros2 node list`), topics both ways (typed, checked; CDR untouched
//! for `cbor-raw` subscribers), transient local both ways, services both
//! ways (with rmw_fastrtps's request identity), and so node parameters
//! both ways, actions both ways (their goal services and topics), and
//! types learned from the nodes that publish them.
//!
//! Security and bounds (docs/security.md, docs/limits.md): discovery and
//! data stay on loopback unless `--dds-network ADDR` names an interface,
//! which is refused without `--allow-unauthenticated-network` (RustDDS
//! here is built without DDS Security); every table is bounded and shed
//! past its bound, counted.
//!
//! Invariant: a gateway started with `--dds-domain` alone opens no Zenoh
//! session (this crate does not depend on Zenoh).

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod pump;
mod qos;
pub mod raw;
mod requests;
mod shell;

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use mio::Token;
use rosgate_core::nodes::Domain;
use rosgate_peers::ros2::queue::LinkQueue;
pub use rosgate_peers::{Inbox, Peer};
use rosgate_ros2::registry::Registry;

pub use pump::{DDS_SAMPLES_PER_READER_WAKE, MAX_DDS_COMMANDS, MAX_DDS_DISCOVERY_EVENTS};
pub use shell::{DDS_GRAPH_INTERVAL_MS, MAX_DDS_CLIENTS, MAX_DDS_WAITING_CALLS};

/// The largest DDS domain id (the RTPS port mapping of the default port
/// parameters leaves no valid port above it; rmw refuses more too).
pub const MAX_DDS_DOMAIN_ID: Domain = 232;

/// How the gateway joins DDS (`--dds-domain`, `--dds-network`).
#[derive(Debug, Clone)]
pub struct Settings {
    /// The domains joined (each bridged with the rosgate domain of its id).
    pub domains: Vec<Domain>,
    /// The types known at start-up (bundled and `--interfaces`).
    pub types: Arc<Registry>,
    /// The interface discovery and data use: loopback unless given.
    pub network: Option<IpAddr>,
    /// `--allow-unauthenticated-network`.
    pub allow_unauthenticated_network: bool,
}

impl Settings {
    /// Checks the flags before anything opens.
    pub fn check(&self) -> Result<(), String> {
        let mut seen = Vec::new();
        for &d in &self.domains {
            if d > MAX_DDS_DOMAIN_ID {
                return Err(format!(
                    "--dds-domain {d}: a DDS domain id is 0 to {MAX_DDS_DOMAIN_ID}"
                ));
            }
            if seen.contains(&d) {
                return Err(format!("--dds-domain {d} given twice"));
            }
            seen.push(d);
        }
        let network = self.network();
        if !network.is_loopback() && !self.allow_unauthenticated_network {
            return Err(format!(
                "--dds-network {network}: DDS beyond this machine has no authentication \
                 here (no DDS Security); add --allow-unauthenticated-network to accept that \
                 (docs/security.md)"
            ));
        }
        Ok(())
    }

    fn network(&self) -> IpAddr {
        self.network.unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST))
    }
}

/// The loop thread's side of DDS: the graphs joined. Its peer is driven
/// by the gateway's one `rosgate_peers::Driver`, beside the Zenoh side's.
pub struct Dds {
    names: Vec<String>,
}

impl std::fmt::Debug for Dds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dds")
            .field("nodes", &self.names)
            .finish_non_exhaustive()
    }
}

impl Dds {
    /// Joins the DDS graph of each domain `settings` names (checked by
    /// [`Settings::check`]), with `inbox` (the gateway's) as the way into
    /// the loop. Returns its peer, for the gateway's driver (closing the
    /// peer stops the pump, then the participants close as they drop).
    pub fn start(settings: &Settings, inbox: Arc<Inbox>) -> Result<(Dds, Box<dyn Peer>), String> {
        settings.check()?;
        let mut doms = HashMap::new();
        let mut listeners = Vec::new();
        let mut own = Vec::new();
        let mut info_readers = Vec::new();
        for &d in &settings.domains {
            let (dom, info_reader) = shell::Dom::open(d, settings.network())?;
            listeners.push((d, dom.dp.status_listener()));
            let mut p = [0; 12];
            p.copy_from_slice(&dom.dp.guid_bytes()[..12]);
            own.push(p);
            info_readers.push((d, info_reader));
            doms.insert(d, dom);
        }
        let pump = pump::Pump::start(listeners, own, LinkQueue::new(inbox))?;
        for (i, (d, r)) in info_readers.into_iter().enumerate() {
            pump.shared
                .add(Token(pump::FIRST_READER_TOKEN + i), r, pump::Kind::Info(d));
        }
        let names = doms
            .values()
            .map(|d| format!("domain {}", d.dp.domain_id()))
            .collect();
        let peer = shell::DdsPeer::new(
            settings.domains.clone(),
            doms,
            pump,
            settings.types.as_ref().clone(),
        );
        Ok((Dds { names }, Box::new(peer)))
    }
}

/// The GUID of a participant as bytes.
trait GuidBytes {
    fn guid_bytes(&self) -> [u8; 16];
}

impl GuidBytes for rustdds::DomainParticipant {
    fn guid_bytes(&self) -> [u8; 16] {
        use rustdds::RTPSEntity;
        self.guid().to_bytes()
    }
}
