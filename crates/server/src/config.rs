//! Runtime configuration of the server, and the server's own constants
//! (addresses, socket budgets, back-offs). The limits the core enforces,
//! and their defaults, are in `rosgate_core::limits` (re-exported here so
//! one `use rosgate::config::*` sees every default).
//!
//! Each constant carries its unit and the reason for its value;
//! `docs/limits.md` mirrors them and a test keeps the two in sync. Nothing
//! here reads argv or the environment: that is `args.rs`'s job.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::Duration;

pub use rosgate_core::limits::*;
pub use rosgate_core::log::LogLevel;
pub use rosgate_core::StatusFilter;
pub use rosgate_wire::MAX_JSON_DEPTH;

pub use crate::inbox::{INBOX_BUDGET, INBOX_CAPACITY};

/// Default TCP listen address: the protocol fixes 127.0.0.1:9095.
pub const DEFAULT_LISTEN: SocketAddr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 9095));

/// Default WebSocket listen address: rosbridge's port, so existing
/// roslibjs/roslibpy/roslibrust clients connect unchanged.
pub const DEFAULT_WS_LISTEN: SocketAddr =
    SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 9090));

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
    pub limits: Limits,
    pub log_level: LogLevel,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: DEFAULT_LISTEN,
            ws_listen: Some(DEFAULT_WS_LISTEN),
            ws_status: StatusFilter::Errors,
            limits: Limits::default(),
            log_level: LogLevel::Info,
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
    }
}
