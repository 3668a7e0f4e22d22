//! Runtime configuration of the server, and the server's own constants
//! (addresses, socket budgets, back-offs). The limits the core enforces,
//! and their defaults, are in `rosgate_core::limits` (re-exported here so
//! one `use rosgate::config::*` sees every default).
//!
//! Each constant carries its unit and the reason for its value;
//! `docs/limits.md` mirrors them and a test keeps the two in sync (labels
//! such as `(P20)` are its "Policy labels"). Nothing here reads argv or the
//! environment: that is `args.rs`'s job.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::Duration;

pub use rosgate_core::limits::*;
pub use rosgate_core::log::{LogFormat, LogLevel};
pub use rosgate_core::StatusFilter;
pub use rosgate_wire::MAX_JSON_DEPTH;

pub use crate::inbox::{INBOX_BUDGET, INBOX_CAPACITY, INBOX_TURN_WORK};
pub use crate::tls::{TLS_HANDSHAKES_PER_TURN, TLS_WRITE_CHUNK_BYTES};

/// Default TCP listen address: the protocol fixes 127.0.0.1:9095.
pub const DEFAULT_LISTEN: SocketAddr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 9095));

/// Default WebSocket listen address: rosbridge's port, so existing
/// roslibjs/roslibpy/roslibrust clients connect unchanged.
pub const DEFAULT_WS_LISTEN: SocketAddr =
    SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 9090));

/// Default Foxglove WebSocket protocol address: the Foxglove app's
/// default URL (`ws://localhost:8765`), as foxglove_bridge serves it.
pub const DEFAULT_FOXGLOVE_LISTEN: SocketAddr =
    SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 8765));

/// Connections. Listen backlog: a fleet reconnecting after a restart arrives
/// in one burst, and mio's default of 128 overflows (the kernel caps this at
/// `net.core.somaxconn`).
pub const LISTEN_BACKLOG: i32 = 4096;

/// How often at most the heap is trimmed after heavy traffic, so memory
/// freed after big messages goes back to the OS (see `server::trim_heap`).
pub const TRIM_INTERVAL: Duration = Duration::from_secs(1);

/// File descriptors kept free for the listener, poll, signals and logs.
pub const RESERVED_FDS: usize = 32;

/// Bytes. Read from one connection per loop wakeup before moving on (P8), so
/// one flooding client cannot starve the others. Redis uses 16 KiB reads and
/// 64 KiB write bursts.
pub const READ_BUDGET_BYTES: usize = 64 * 1024;

/// Bytes. Written to one connection per loop wakeup (P8).
pub const WRITE_BUDGET_BYTES: usize = 256 * 1024;

/// Bytes. Read from all connections together in one loop turn (P20): with
/// 10 000 busy clients the read phase still ends in milliseconds; who was
/// not reached is read first next turn.
pub const READ_TURN_BUDGET_BYTES: usize = 4 * 1024 * 1024;

/// Bytes. Written to all connections together in one loop turn (P20): the
/// start of a big fan-out to thousands of subscribers is spread over turns
/// instead of stalling the loop; the rest is written first next turn.
pub const WRITE_TURN_BUDGET_BYTES: usize = 8 * 1024 * 1024;

/// `write` calls to all connections together in one loop turn (P20). Spread
/// over thousands of sockets, small writes cost 7-10 µs each: 128 of them
/// keep a turn near 1 ms, where 8 MiB of 1 KiB frames took 60 ms (stress
/// `fanoutstart`: 1024 gave a p99 of 37 ms, 256 of 11 ms, 128 of 5 ms). A
/// single busy subscriber still gets 256 KiB per call.
pub const WRITE_TURN_CALLS: usize = 128;

/// Work units (a connection, each registration it held, each call dropped)
/// freed in one loop turn (P20): freeing costs 1-2 µs per registration
/// (the topic's entry, its sorted name), so a crowd leaving with a million
/// of them is spread over ~500 turns of 2-4 ms instead of stalling
/// everyone for seconds (stress `statsburst`: 5 000 gave a 14 ms turn when
/// 10 connections left with 100 000 topics).
pub const FREE_TURN_BUDGET: usize = 2_000;

/// Work units (lines handled, messages delivered) the read phase of one
/// loop turn shares among the readable connections (P20): with 1500
/// subscribers a 64 KiB read of small publishes is a million deliveries,
/// so bytes alone do not bound a turn. 60-100 ns per delivery: about
/// 1 ms (stress `nonreaders`: 25 000 gave an unrelated client a p99 round
/// trip of 14-17 ms beside 300 subscribers that never read).
pub const READ_TURN_WORK: u64 = 10_000;

/// Work units a connection is granted per visit at least, however many
/// are readable (deficit round robin quantum floor).
pub const READ_MIN_QUANTUM: u64 = 2048;

/// Work units after which the read phase stops whatever the quanta: with
/// 10 000 readable connections each granted `READ_MIN_QUANTUM`, a turn
/// still ends.
pub const READ_TURN_WORK_MAX: u64 = 4 * READ_TURN_WORK;

/// Bytes. The largest `read` call, for input that costs next to nothing
/// per byte; costlier input is read in pieces its connection's deficit
/// covers (`server::chunk_for`), a new connection's first read is 512 bytes.
pub const READ_CHUNK_BYTES: usize = 64 * 1024;

/// Bytes. Allocations this large or larger get their own mapping, returned
/// to the OS when freed (glibc's `M_MMAP_THRESHOLD`; setting it turns off
/// glibc's dynamic threshold, which after one big free moved every 16 MiB
/// line buffer onto the heap and let RSS reach twice the memory budget under
/// churn, stress `partial`). Below it, streamed frames (1 MiB images, just
/// under it with their JSON envelope) reuse
/// heap pages instead of faulting fresh ones in per message.
pub const MMAP_THRESHOLD: usize = 1024 * 1024 + 64 * 1024;

/// Bytes. The most the kernel holds unsent per client socket
/// (`TCP_NOTSENT_LOWAT`, set on every accepted socket): see
/// `server::limit_unsent`.
pub const UNSENT_LOWAT_BYTES: usize = 16 * 1024;

/// Milliseconds. On SIGTERM/SIGINT, queued output is flushed for at most
/// this long before the gateway exits (P23).
pub const DEFAULT_SHUTDOWN_GRACE_MS: u64 = 2_000;

/// Accept back-off after EMFILE/ENFILE (P10): first and last delay.
pub const ACCEPT_BACKOFF_MIN_MS: u64 = 10;
/// See [`ACCEPT_BACKOFF_MIN_MS`].
pub const ACCEPT_BACKOFF_MAX_MS: u64 = 1_000;

/// Everything the gateway needs to run; built by `args.rs` from flags.
#[derive(Debug, Clone)]
pub struct Config {
    pub listen: SocketAddr,
    /// `None` when the WebSocket listener is off.
    pub ws_listen: Option<SocketAddr>,
    /// Statuses WebSocket clients receive.
    pub ws_status: StatusFilter,
    /// The Foxglove WebSocket protocol's listener (`--foxglove-listen`);
    /// `None` when off.
    pub foxglove_listen: Option<SocketAddr>,
    /// `foxglove_listen` is the default, not asked for: a busy port is
    /// then a warning, not a failure (the rosbridge port answers
    /// Foxglove clients too), so a second gateway on one machine, or a
    /// test's, still starts.
    pub foxglove_listen_default: bool,
    pub limits: Limits,
    pub log_level: LogLevel,
    /// `--log-format`: text for people, JSON lines for log shippers.
    pub log_format: LogFormat,
    /// How long a shutdown flushes queued output.
    pub shutdown_grace: Duration,
    /// Domain of TCP connections that do not choose one (`--tcp-domain`).
    pub tcp_domain: u8,
    /// Domain of WebSocket connections whose URL does not choose one.
    pub ws_domain: u8,
    /// Resolve every connection's names by the ROS 2 rules (`--names strict`).
    pub strict_names: bool,
    /// `get_time` answers with the latest `/clock` (`--use-sim-time`).
    pub use_sim_time: bool,
    /// Start-up parameter overrides (`--params FILE`).
    pub param_overrides: rosgate_core::params::Overrides,
    /// The directory Foxglove `fetchAsset` serves (`--foxglove-assets`);
    /// none, no `assets` capability.
    pub foxglove_assets: Option<std::path::PathBuf>,
    /// Tokens, roles, allowed origins (`--auth-tokens`, `--auth-roles`,
    /// `--ws-allowed-origins`).
    pub access: rosgate_core::access::Access,
    /// Listening beyond loopback without authentication was asked for
    /// (`--allow-unauthenticated-network`).
    pub allow_unauthenticated_network: bool,
    /// `--tls-cert`/`--tls-key`: both listeners speak TLS (`None`: plain).
    pub tls: Option<crate::tls::TlsConfig>,
    /// `--zenoh-*`: federation with other gateways (docs/federation.md).
    pub zenoh: ZenohFlags,
    /// `--dds-domain`, `--dds-network`: ROS 2 graphs joined over DDS.
    pub dds: DdsFlags,
    /// `--interfaces`: more `.msg`/`.srv`/`.action` directories, beside
    /// the bundled packages.
    pub interfaces: Vec<std::path::PathBuf>,
}

/// The `--zenoh-*` flags. Federation is on when any is given (and the
/// gateway was built with the `zenoh` feature).
#[derive(Debug, Clone, Default)]
pub struct ZenohFlags {
    pub connect: Vec<String>,
    pub listen: Vec<String>,
    pub mode: Option<String>,
    pub config_file: Option<std::path::PathBuf>,
    pub scouting: bool,
    /// `--ros-domain`: ROS 2 graphs (rmw_zenoh) joined (docs/ros2.md).
    pub ros_domains: Vec<u8>,
}

/// The `--dds-*` flags (docs/ros2.md): ROS 2 graphs over DDS, joined when
/// a domain is given (and the gateway was built with the `dds` feature).
#[derive(Debug, Clone, Default)]
pub struct DdsFlags {
    /// `--dds-domain`: the DDS domains joined, each bridged with the
    /// rosgate domain of its id.
    pub domains: Vec<u8>,
    /// `--dds-network`: the interface DDS uses (loopback otherwise).
    pub network: Option<std::net::IpAddr>,
}

impl ZenohFlags {
    /// Whether any flag asked for federation.
    pub fn given(&self) -> bool {
        !self.connect.is_empty()
            || !self.listen.is_empty()
            || self.mode.is_some()
            || self.config_file.is_some()
            || self.scouting
            || !self.ros_domains.is_empty()
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: DEFAULT_LISTEN,
            ws_listen: Some(DEFAULT_WS_LISTEN),
            ws_status: StatusFilter::Warnings,
            foxglove_listen: Some(DEFAULT_FOXGLOVE_LISTEN),
            foxglove_listen_default: true,
            limits: Limits::default(),
            log_level: LogLevel::Info,
            log_format: LogFormat::Text,
            shutdown_grace: Duration::from_millis(DEFAULT_SHUTDOWN_GRACE_MS),
            tcp_domain: 0,
            ws_domain: 0,
            strict_names: false,
            use_sim_time: false,
            param_overrides: Default::default(),
            foxglove_assets: None,
            access: Default::default(),
            allow_unauthenticated_network: false,
            tls: None,
            interfaces: Vec::new(),
            zenoh: ZenohFlags::default(),
            dds: DdsFlags::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_protocol_and_rosbridge_ports_on_loopback() {
        let c = Config::default();
        assert_eq!(c.listen.to_string(), "127.0.0.1:9095");
        assert_eq!(
            c.ws_listen.map(|a| a.to_string()),
            Some("127.0.0.1:9090".into())
        );
        assert_eq!(
            c.foxglove_listen.map(|a| a.to_string()),
            Some("127.0.0.1:8765".into())
        );
    }
}
