//! Runtime configuration and every default limit of the gateway.
//!
//! Each `DEFAULT_*` constant carries its unit and the reason for its value;
//! `docs/limits.md` mirrors this file and a test keeps the two in sync.
//! Nothing here reads argv or the environment: that is `main.rs`'s job.

use std::net::SocketAddr;
use std::time::Duration;

/// Default TCP listen address: the protocol fixes 127.0.0.1:9095.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9095";

/// Default WebSocket listen address: rosbridge's port, so existing
/// roslibjs/roslibpy/roslibrust clients connect unchanged.
pub const DEFAULT_WS_LISTEN: &str = "127.0.0.1:9090";

/// Bytes. Longest accepted line, enforced before its newline arrives (P1).
/// 16 MiB holds a 4K RGBA frame as base64 with room to spare.
pub const DEFAULT_MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// Bytes. Topic data queued for one connection before the oldest frames are
/// dropped, fairly across its subscriptions (P5). Topic data is best-effort, so
/// a consumer that falls 8 MiB behind loses old samples rather than memory.
pub const DEFAULT_MAX_QUEUE_BYTES: usize = 8 * 1024 * 1024;

/// Bytes. Control data (statuses, forwarded calls, responses) queued for one
/// connection; beyond it the connection is closed because it is not reading
/// (P6). Control data cannot be dropped without breaking correlation.
pub const DEFAULT_MAX_CONTROL_BYTES: usize = 64 * 1024 * 1024;

/// Milliseconds. Output pending with no write progress for this long closes
/// the connection (P7). NATS uses 10 s; robots on Wi-Fi stall longer.
pub const DEFAULT_WRITE_STALL_MS: u64 = 30_000;

/// Connections. Beyond this an accepted socket gets an error status and is
/// closed (P9). Clamped at start-up to the file-descriptor limit minus
/// [`RESERVED_FDS`].
pub const DEFAULT_MAX_CONNECTIONS: usize = 10_000;

/// Connections. Listen backlog: a fleet reconnecting after a restart arrives
/// in one burst, and mio's default of 128 overflows (the kernel caps this at
/// `net.core.somaxconn`).
pub const LISTEN_BACKLOG: i32 = 4096;

/// How often at most the heap is trimmed after heavy traffic, so memory
/// freed after big messages goes back to the OS (see `server::trim_heap`).
pub const TRIM_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

/// File descriptors kept free for the listener, poll, signals and logs.
pub const RESERVED_FDS: usize = 32;

/// Milliseconds. Service call timeout when the call names none (P12);
/// rosbridge's `default_call_service_timeout` is 5 s.
pub const DEFAULT_CALL_TIMEOUT_MS: u64 = 5_000;

/// Milliseconds. Upper bound for a per-call `timeout` field (P12): a call must
/// never wait indefinitely, whatever the client asks for.
pub const DEFAULT_MAX_CALL_TIMEOUT_MS: u64 = 300_000;

/// Calls. In-flight calls one caller connection may have (P11); the excess
/// call fails at once instead of growing the call table without bound.
pub const DEFAULT_MAX_CALLS_PER_CONN: usize = 4096;

/// Bytes. Read from one connection per loop wakeup before moving on (P8), so
/// one flooding client cannot starve the others. Redis uses 16 KiB reads and
/// 64 KiB write bursts.
pub const READ_BUDGET_BYTES: usize = 64 * 1024;

/// Bytes. Written to one connection per loop wakeup (P8).
pub const WRITE_BUDGET_BYTES: usize = 256 * 1024;

/// Maximum JSON nesting depth of a request (P3); serde_json's own default.
pub const MAX_JSON_DEPTH: usize = 128;

/// Milliseconds. Resolution of the timer wheel that expires calls.
pub const TIMER_TICK_MS: u64 = 10;

/// Accept back-off after EMFILE/ENFILE (P10): first and last delay.
pub const ACCEPT_BACKOFF_MIN_MS: u64 = 10;
/// See [`ACCEPT_BACKOFF_MIN_MS`].
pub const ACCEPT_BACKOFF_MAX_MS: u64 = 1_000;

/// Forced-close log lines per second before they are summarised (P15).
pub const CLOSE_LOGS_PER_SEC: u32 = 20;

/// Log verbosity, most to least severe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    Error,
    Warn,
    Info,
    Debug,
}

impl std::str::FromStr for LogLevel {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "error" => Ok(LogLevel::Error),
            "warn" => Ok(LogLevel::Warn),
            "info" => Ok(LogLevel::Info),
            "debug" => Ok(LogLevel::Debug),
            _ => Err(format!("invalid log level {s:?} (error|warn|info|debug)")),
        }
    }
}

/// Everything the gateway needs to run; built by `main.rs` from flags.
#[derive(Debug, Clone)]
pub struct Config {
    pub listen: SocketAddr,
    /// `None` when the WebSocket listener is off.
    pub ws_listen: Option<SocketAddr>,
    /// Statuses WebSocket clients receive.
    pub ws_status: crate::conn::StatusFilter,
    pub limits: Limits,
    pub log_level: LogLevel,
}

/// The limits the sans-io core enforces. Separate from [`Config`] so unit
/// tests and fuzz targets can build a core without an address.
#[derive(Debug, Clone)]
pub struct Limits {
    pub max_line_bytes: usize,
    pub max_queue_bytes: usize,
    pub max_control_bytes: usize,
    pub write_stall: Duration,
    pub max_connections: usize,
    pub call_timeout: Duration,
    pub max_call_timeout: Duration,
    pub max_calls_per_conn: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            max_queue_bytes: DEFAULT_MAX_QUEUE_BYTES,
            max_control_bytes: DEFAULT_MAX_CONTROL_BYTES,
            write_stall: Duration::from_millis(DEFAULT_WRITE_STALL_MS),
            max_connections: DEFAULT_MAX_CONNECTIONS,
            call_timeout: Duration::from_millis(DEFAULT_CALL_TIMEOUT_MS),
            max_call_timeout: Duration::from_millis(DEFAULT_MAX_CALL_TIMEOUT_MS),
            max_calls_per_conn: DEFAULT_MAX_CALLS_PER_CONN,
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: DEFAULT_LISTEN
                .parse()
                .expect("DEFAULT_LISTEN is a valid address"),
            ws_listen: Some(
                DEFAULT_WS_LISTEN
                    .parse()
                    .expect("DEFAULT_WS_LISTEN is a valid address"),
            ),
            ws_status: crate::conn::StatusFilter::Errors,
            limits: Limits::default(),
            log_level: LogLevel::Info,
        }
    }
}
