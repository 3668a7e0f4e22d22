//! `Conn`: the sans-io state of one client connection (a slab entry of the
//! hub), and `ConnRef`, the generation-checked handle other tables keep.
//!
//! Invariants:
//! - slab keys are reused, generations are not (until u32 wraps): any
//!   reference kept across loop iterations is a `ConnRef` and is checked
//!   against the slab entry's `gen` before use;
//! - `subs`/`pubs`/`services` mirror exactly the router entries that name
//!   this connection, and `calls_made`/`calls_served` exactly the call-table
//!   entries that name it, so closing can withdraw everything without a scan;
//! - once `closing` is set, nothing new is queued for the connection.

use std::collections::HashSet;
use std::time::Instant;

use crate::calls::SeqBuild;
use crate::codec::decode::Dialect;
use crate::line::LineReader;
use crate::out::{Framing, OutQueue};
use crate::router::TopicId;
use crate::ws::WsReader;

/// rosbridge dialect: one registration per request id (`None` for a request
/// without id) on a topic.
pub type IdRegistrations = Vec<(TopicId, Option<Box<[u8]>>)>;

/// Which listener a connection came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// Newline-delimited JSON over TCP: the protocol file, strictly.
    Tcp,
    /// rosbridge v2 over WebSocket: one JSON object per text frame.
    WebSocket,
}

/// The framing state of a connection's input.
#[derive(Debug)]
pub enum Input {
    Lines(LineReader),
    WebSocket(WsReader),
}

/// Which status messages a connection receives (`--ws-status`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub enum StatusFilter {
    /// Every status (the TCP listener, always).
    #[default]
    All,
    /// Error statuses only: rosbridge sends none, and roslibpy logs each
    /// status frame as an error, so informational ones are noise there.
    Errors,
    /// No statuses at all.
    None,
}

impl std::str::FromStr for StatusFilter {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "all" => Ok(StatusFilter::All),
            "error" => Ok(StatusFilter::Errors),
            "none" => Ok(StatusFilter::None),
            _ => Err(format!("invalid status filter {s:?} (none|error|all)")),
        }
    }
}

/// Slab key plus generation: names one connection for its whole life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ConnRef {
    pub key: u32,
    pub gen: u32,
}

/// Why a connection was closed. Every close has one; each has a counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// The client closed its side (read returned 0, or a WebSocket close).
    PeerClosed,
    /// A WebSocket client broke the framing protocol or its handshake.
    ProtocolError,
    /// A read or write failed (reset, broken pipe, ...).
    Reset,
    /// Control data queued beyond `--max-control-bytes` (P6).
    ControlOverflow,
    /// Output pending without write progress for `--write-stall-ms` (P7).
    WriteStall,
    /// Refused at accept: `--max-connections` reached (P9).
    MaxConnections,
    /// The gateway is shutting down.
    Shutdown,
}

impl CloseReason {
    pub const ALL: [CloseReason; 7] = [
        CloseReason::PeerClosed,
        CloseReason::ProtocolError,
        CloseReason::Reset,
        CloseReason::ControlOverflow,
        CloseReason::WriteStall,
        CloseReason::MaxConnections,
        CloseReason::Shutdown,
    ];

    /// Stable label for counters and logs.
    pub fn label(self) -> &'static str {
        match self {
            CloseReason::PeerClosed => "peer_closed",
            CloseReason::ProtocolError => "protocol_error",
            CloseReason::Reset => "reset",
            CloseReason::ControlOverflow => "control_overflow",
            CloseReason::WriteStall => "write_stall",
            CloseReason::MaxConnections => "max_connections",
            CloseReason::Shutdown => "shutdown",
        }
    }

    /// Whether the close was the gateway's decision (logged as a warning).
    pub fn is_forced(self) -> bool {
        matches!(
            self,
            CloseReason::ControlOverflow
                | CloseReason::WriteStall
                | CloseReason::MaxConnections
                | CloseReason::ProtocolError
        )
    }
}

/// One connection's protocol state. The socket lives in the I/O shell.
#[derive(Debug)]
pub struct Conn {
    pub gen: u32,
    pub input: Input,
    pub out: OutQueue,
    pub dialect: Dialect,
    pub statuses: StatusFilter,
    /// Topics this connection subscribes to (each once).
    pub subs: Vec<TopicId>,
    /// Topics this connection advertises (each once).
    pub pubs: Vec<TopicId>,
    /// rosbridge dialect: the request ids behind each subscription (`None`
    /// for a request without id); the router entry goes when none is left.
    pub sub_ids: IdRegistrations,
    /// rosbridge dialect: the same for advertisements.
    pub pub_ids: IdRegistrations,
    /// Services this connection is the current provider of.
    pub services: Vec<Box<str>>,
    /// Calls this connection made that are still in flight.
    pub calls_made: HashSet<u64, SeqBuild>,
    /// Calls forwarded to this connection that it has not answered.
    pub calls_served: HashSet<u64, SeqBuild>,
    pub closing: Option<CloseReason>,
    /// Last write progress, or when output became pending (P7).
    pub out_since: Instant,
    /// Already listed in the hub's dirty list this iteration.
    pub dirty: bool,
}

impl Conn {
    pub fn new(gen: u32, now: Instant, transport: Transport, ws_status: StatusFilter) -> Self {
        let (input, framing, dialect, statuses) = match transport {
            Transport::Tcp => (
                Input::Lines(LineReader::new()),
                Framing::Lines,
                Dialect::Strict,
                StatusFilter::All,
            ),
            Transport::WebSocket => (
                Input::WebSocket(WsReader::new()),
                Framing::WebSocket,
                Dialect::Rosbridge,
                ws_status,
            ),
        };
        Conn {
            gen,
            input,
            out: OutQueue::with_framing(framing),
            dialect,
            statuses,
            subs: Vec::new(),
            pubs: Vec::new(),
            sub_ids: Vec::new(),
            pub_ids: Vec::new(),
            services: Vec::new(),
            calls_made: HashSet::default(),
            calls_served: HashSet::default(),
            closing: None,
            out_since: now,
            dirty: false,
        }
    }

    pub fn is_open(&self) -> bool {
        self.closing.is_none()
    }
}
