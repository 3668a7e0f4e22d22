//! rosgate over Zenoh: one session and its two kinds of peer, other
//! gateways (`gateways/`, issue 16) and ROS 2 graphs over rmw_zenoh
//! (`ros2/`, feature `ros2`, issue 17), behind one trait
//! (`rosgate_peers::Peer`); the peers are driven each turn by the
//! gateway's one `rosgate_peers::Driver` (the server's `peers.rs`), beside
//! the DDS side's. The network side of the federation seam in
//! `rosgate_core::hub` (`hub/federation.rs`), which it reaches only
//! through the hub's network facade, `rosgate_core::hub::Bridges`
//! (`hub.bridges()`): every peer and every job gets the facade. This
//! module owns the session's settings and opening ([`Federation::start`],
//! which hands back the peers), and what the session counts after each
//! turn ([`Federation::after_turn`]); the driver hands the hub's interest
//! changes to every peer, the bridges' topic data (their queues) to every
//! peer, and the hub's calls, goals and answers (its typed outbox,
//! `rosgate_core::bridge`) each to the one peer it names.
//!
//! Zenoh runs its own threads. What they receive reaches the mio loop only
//! as jobs through the loop's bounded inbox ([`ToLoop`]), handed over by
//! `rosgate_peers::Inbox` (shared by both peers, owner of the samples' budget); a full
//! inbox drops topic samples (counted) and never blocks Zenoh. What the loop
//! sends goes out from the loop thread itself in the driver's turn:
//! puts with congestion control `Drop`, so a slow network sheds rather
//! than stalling the loop. What the loop declares (subscribers,
//! queryables, tokens) and undeclares goes through the Zenoh worker
//! (`worker.rs`), a thread of its own behind a bounded queue: a
//! declaration waits for Zenoh's declaration locks, which Zenoh's
//! receiving thread may hold for seconds, and the loop must not. So does
//! this gateway's graph announcement, a put that waits for the routing
//! tables Zenoh holds as long (`worker.rs` says why only it).
//!
//! The rules (docs/federation.md: subscribe upstream only while somebody
//! downstream listens, once per topic however many listen):
//! - a gateway declares a Zenoh subscriber and an *interest* liveliness
//!   token for a topic only while it has local subscribers of it;
//! - a gateway puts a topic's messages into Zenoh only while some other
//!   gateway's interest token for it is alive: its bridge subscribes then,
//!   and the bridge's queue is what the driver's turn drains;
//! - one sample per publish, whatever the number of interested gateways
//!   or of their subscribers: fan-out stays local.
//!
//! Invariants:
//! - no Zenoh callback blocks or takes a lock the loop holds for long: the
//!   shared tables (`remote::Shared`) are locked for a few map operations,
//!   and the hand-off to the loop (`inbox.rs`) never waits;
//! - the samples waiting for the loop are bounded by [`INBOX_BYTES`] and
//!   [`MAX_PENDING_SAMPLES`] (`rosgate_peers::Inbox`); the remote tables by
//!   [`remote::MAX_GATEWAYS`] and [`remote::MAX_REMOTE_INTEREST`];
//! - a payload from the network is delivered only if it is one JSON value
//!   the wire decoder accepts, with raw line breaks blanked (it is framed
//!   into NDJSON lines for clients).

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod exposure;
#[cfg(feature = "ros2")]
mod first_reply;
mod gateways;
#[cfg(feature = "ros2")]
mod ros2;
mod ros_settings;
mod worker;

pub use gateways::calls::{CALL_TIMEOUT_SECS, MAX_CALLS_TO_GATEWAYS, MAX_REMOTE_CALLS};
pub use gateways::keys;
pub use gateways::mail;
use gateways::{remote, Gateways};
pub use rosgate_peers::{Inbox, Peer};

use std::path::PathBuf;
use std::sync::Arc;

use rosgate_core::counters::Counter;
use rosgate_core::hub::Bridges;
use rosgate_ros2::registry::Registry;
use zenoh::{Session, Wait};

use remote::Shared;
pub use remote::{
    GRAPH_ITEMS_PER_TURN, MAX_GATEWAYS, MAX_GRAPH_BYTES, MAX_PENDING_GRAPH_BYTES,
    MAX_REMOTE_INTEREST,
};
#[cfg(feature = "ros2")]
pub use ros2::{MAX_ROS_ENTITIES, MAX_ROS_ENTITIES_PER_NODE, MAX_ROS_NODES, ROS_GRAPH};
pub use ros_settings::RosSettings;
pub use rosgate_peers::{Job, ToLoop, DRAIN_BYTES_PER_TURN, INBOX_BYTES, MAX_PENDING_SAMPLES};
pub use worker::{MAX_ZENOH_COMMANDS, WORKER_STOP_MS};

/// Milliseconds. Zenoh's link lease when no `--zenoh-config` says
/// otherwise: a gateway cut off (not closed) is lost by the others
/// within it (Zenoh's own default is 10 s).
pub const DEFAULT_LEASE_MS: u64 = 3000;

/// Milliseconds. The longest wait between attempts to reach a
/// `--zenoh-connect` endpoint that is down (Zenoh's default is 4 s).
pub const DEFAULT_RETRY_MAX_MS: u64 = 1000;

/// How the gateway joins Zenoh (the `--zenoh-*` flags).
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// Endpoints to connect to (`tcp/host:port`).
    pub connect: Vec<String>,
    /// Endpoints to listen on.
    pub listen: Vec<String>,
    /// `peer` (default), `client` or `router`.
    pub mode: Option<String>,
    /// A Zenoh configuration file (JSON5) for everything else: TLS, access
    /// control, routing. The flags above override its fields.
    pub config_file: Option<PathBuf>,
    /// Multicast scouting on (off unless asked for).
    pub scouting: bool,
    /// The ROS 2 graphs (rmw_zenoh) joined, and the types known.
    pub ros: RosSettings,
    /// `--allow-unauthenticated-network`: Zenoh may reach beyond this
    /// machine without authentication (refused otherwise).
    pub allow_unauthenticated_network: bool,
}

/// Where the gateway listens for Zenoh when neither `--zenoh-listen` nor
/// `--zenoh-config` says: loopback, a port of the system's choosing (other
/// gateways on this host can still reach it through Zenoh's gossip).
pub const DEFAULT_LISTEN: &str = "tcp/127.0.0.1:0";

/// Bytes. The largest message Zenoh reassembles from a link when no
/// `--zenoh-config` says otherwise (Zenoh's own default is 1 GiB per
/// message, per link): a sample bigger than the loop's inbox could never
/// be delivered anyway.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = INBOX_BYTES;

/// Where a gateway that joins a ROS 2 graph connects when no endpoint is
/// given: where rmw_zenoh's nodes look for their router.
pub const ROS_DEFAULT_ROUTER: &str = "tcp/localhost:7447";

impl Settings {
    /// The Zenoh configuration these settings make.
    pub fn zenoh_config(&self) -> Result<zenoh::Config, String> {
        let mut c = match &self.config_file {
            Some(p) => zenoh::Config::from_file(p)
                .map_err(|e| format!("--zenoh-config {}: {e}", p.display()))?,
            None => zenoh::Config::default(),
        };
        let mut set = |key: &str, value: String| {
            c.insert_json5(key, &value)
                .map_err(|e| format!("zenoh setting {key} = {value}: {e}"))
        };
        if let Some(m) = &self.mode {
            if !matches!(m.as_str(), "peer" | "client" | "router") {
                return Err(format!(
                    "--zenoh-mode {m:?}: expected peer, client or router"
                ));
            }
            set("mode", format!("{m:?}"))?;
        }
        if !self.connect.is_empty() {
            set("connect/endpoints", json_list(&self.connect))?;
        } else if !self.ros.domains.is_empty()
            && self.listen.is_empty()
            && self.config_file.is_none()
        {
            set("connect/endpoints", json_list(&[ROS_DEFAULT_ROUTER.into()]))?;
        }
        // Zenoh's own default for a peer is every interface, without
        // authentication: nothing listens beyond loopback unless asked (a
        // `--zenoh-config` that leaves the endpoints at Zenoh's default
        // does not ask).
        let default = zenoh::Config::default();
        let unchanged =
            |c: &zenoh::Config, key: &str| c.get_json(key).ok() == default.get_json(key).ok();
        let listen_default = unchanged(&c, "listen/endpoints");
        let message_default = unchanged(&c, "transport/link/rx/max_message_size");
        let mut set = |key: &str, value: String| {
            c.insert_json5(key, &value)
                .map_err(|e| format!("zenoh setting {key} = {value}: {e}"))
        };
        if !self.listen.is_empty() {
            set("listen/endpoints", json_list(&self.listen))?;
        } else if listen_default {
            set("listen/endpoints", json_list(&[DEFAULT_LISTEN.into()]))?;
        }
        if message_default {
            set(
                "transport/link/rx/max_message_size",
                DEFAULT_MAX_MESSAGE_BYTES.to_string(),
            )?;
        }
        // Off unless the flag: a gateway talks only to what it is given.
        set("scouting/multicast/enabled", self.scouting.to_string())?;
        if self.config_file.is_none() {
            set("transport/link/tx/lease", DEFAULT_LEASE_MS.to_string())?;
            set(
                "connect/retry",
                format!(
                    "{{period_init_ms: 250, period_max_ms: {DEFAULT_RETRY_MAX_MS}, period_increase_factor: 2}}"
                ),
            )?;
        }
        Ok(c)
    }
}

fn json_list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| format!("{s:?}")).collect();
    format!("[{}]", quoted.join(","))
}

/// Seconds. The longest a call forwarded to another gateway waits for its
/// reply in Zenoh (the default `--max-call-timeout-ms`); the caller's own
/// deadline on its gateway is usually shorter and fails it first.
pub const QUERY_TIMEOUT_SECS: u64 = 300;

/// Milliseconds. This gateway's graph is put at most this often (when it
/// changed), so other gateways' introspection lags by at most about this.
pub const GRAPH_INTERVAL_MS: u128 = 250;

/// A sample's attachment saying it comes from a latched (transient local)
/// publisher keeping that many messages: `latched=<depth>`.
pub const LATCHED_ATTACHMENT: &str = "latched=";

/// Hours. The longest a goal sent to another gateway waits in Zenoh for
/// its result: goals may run for long; the caller's own `timeout` (and
/// `--goal-timeout-ms`) on its gateway apply as for a local server.
pub const GOAL_QUERY_TIMEOUT_HOURS: u64 = 24;

/// The loop thread's side of the Zenoh session: the session, its peers
/// (ROS 2 graphs first, if joined, then other gateways) and the bridges'
/// output handed to them. See the module docs.
pub struct Federation {
    session: Session,
    /// The thread every declaration of the peers is made and dropped on.
    worker: worker::Worker,
    zid: String,
    /// The gateways' tables, shared with the ROS 2 peer.
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Federation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Federation")
            .field("zid", &self.zid)
            .finish_non_exhaustive()
    }
}

/// Settings checked and every file they name read (`--zenoh-config`), before anything is bound or opened: start-up reports a
/// bad flag or file first, whatever else would fail later (a busy port).
pub struct Prepared {
    config: zenoh::Config,
    ros: Option<(RosSettings, Registry)>,
}

impl Settings {
    /// Checks every flag and reads every file: what [`Federation::start`]
    /// needs, with nothing opened yet.
    pub fn prepare(&self) -> Result<Prepared, String> {
        let config = self.zenoh_config()?;
        exposure::check(&config, self.allow_unauthenticated_network)?;
        let ros = if self.ros.domains.is_empty() {
            None
        } else {
            self.ros.check()?;
            Some((self.ros.clone(), self.ros.types.as_ref().clone()))
        };
        Ok(Prepared { config, ros })
    }
}

impl Federation {
    /// Opens the Zenoh session, announces this gateway and starts
    /// watching the others and their interest. Returns its peers (ROS 2
    /// over rmw_zenoh when joined, then the gateways), for the gateway's
    /// one `rosgate_peers::Driver`, with `inbox` (the gateway's) as their
    /// way into the loop.
    pub fn start(
        prepared: Prepared,
        inbox: Arc<Inbox>,
    ) -> Result<(Federation, Vec<Box<dyn Peer>>), String> {
        let Prepared { config, ros } = prepared;
        let session = zenoh::open(config)
            .wait()
            .map_err(|e| format!("zenoh: cannot open a session: {e}"))?;
        let zid = session.zid().to_string();
        let shared = Arc::new(Shared::new(zid.clone(), inbox.clone()));
        let worker = worker::Worker::start(&session)?;
        let gateways = Gateways::start(&session, shared.clone(), inbox.clone(), worker.decls())?;
        let mut peers: Vec<Box<dyn Peer>> = Vec::new();
        // Without the `ros2` feature `prepare` refused any `--ros-domain`.
        #[cfg(feature = "ros2")]
        if let Some((settings, types)) = ros {
            peers.push(ros2::start(
                &session,
                &settings,
                types,
                shared.clone(),
                inbox.clone(),
                worker.decls(),
            )?);
        }
        #[cfg(not(feature = "ros2"))]
        let _ = ros;
        peers.push(Box::new(gateways));
        Ok((
            Federation {
                session,
                worker,
                zid,
                shared,
            },
            peers,
        ))
    }

    /// This gateway's Zenoh id.
    pub fn zid(&self) -> &str {
        &self.zid
    }

    /// Where Zenoh listens now: the session's own locators (the ports the
    /// system chose, every address of a `0.0.0.0` listener).
    pub fn locators(&self) -> Vec<String> {
        self.session
            .info()
            .locators()
            .wait()
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    /// After the peers' turn (`rosgate_peers::Driver::turn`): what this
    /// session counts into the hub (announcements ignored).
    pub fn after_turn(&self, hub: &mut Bridges<'_>) {
        let ignored = self.shared.take_ignored();
        if ignored > 0 {
            hub.count(Counter::FederationAnnouncementsIgnored, ignored);
        }
    }

    /// Bytes the gateways' tables hold (for the memory ledger).
    pub fn held_bytes(&self) -> usize {
        self.shared.held_bytes()
    }

    /// The Zenoh worker's part of the status.
    pub fn worker_status(&self) -> serde_json::Value {
        self.worker.decls().status()
    }

    /// Withdraws this gateway from the federation (its tokens go at once,
    /// so the others need not wait for the lease): the worker drops every
    /// declaration first (waiting at most [`WORKER_STOP_MS`]), then
    /// `peers_gone` closes the peers (the gateway's driver), then the
    /// session closes.
    pub fn close(self, peers_gone: impl FnOnce()) {
        let Federation {
            session, worker, ..
        } = self;
        worker.stop();
        // Their declarations went with the worker: dropping their ids now
        // queues nothing.
        peers_gone();
        let _ = session.close().wait();
    }
}
