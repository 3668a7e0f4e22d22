//! rosgate's sans-io core: connections, registrations, calls, timers,
//! output queues and counters. It takes bytes and `now: Instant` and queues
//! frames; it never touches a socket or reads the clock, so time-outs,
//! stalls, drops and cleanup are tested on a fake clock, simulated and
//! fuzzed.
//!
//! | module | owns |
//! |---|---|
//! | [`auth_budget`] | `AuthBudget`: wrong tokens per address, the lock past the budget and its growing hold |
//! | [`access`] | `Access`: tokens and their roles, each role's allowlists (globs per class of operation), allowed browser origins |
//! | [`hub`] | `Hub`: the connection slab, dispatch of each op, publish batches, the life of a call, deferred close and cleanup, the stall sweep |
//! | [`registry`] | `Registry`: topics (subscribers, publishers), services (provider), and each connection's reverse index; `withdraw(conn)` |
//! | [`calls`] | `Calls`: calls in flight, their deadlines (timer wheel) and the per-connection indexes; `drop_conn(conn)` |
//! | `transport` | the seam between kinds of connection: input framing, output framing, dialect policy |
//! | [`foxglove`] | `Session`: one Foxglove WebSocket connection's channels and subscriptions by the client's ids |
//! | `conn` | `Conn`: one connection's transport and output state (a slab entry) |
//! | `conn_ref` | `ConnRef` (key + generation): the handle other tables keep |
//! | [`codes`] | `CloseReason` and `ErrorCode`: why connections close and requests are refused |
//! | `family` | the `family!` macro behind every counted enum |
//! | [`out`] | `OutQueue`: shared frames, byte accounting, the fair drop policy |
//! | `timer` | `TimerWheel`: hashed wheel of `u64` keys |
//! | [`tf`] | `TfBuffer` (one domain's transform tree, bounded histories, lookups) and `Republisher` (tf2_web_republisher's subscriptions, rates, thresholds) |
//! | [`counters`] | typed counters, gauges, and the one visitor every rendering uses |
//! | [`limits`] | `Limits` and every `DEFAULT_*` the core enforces |
//! | `memory` | the memory ledger and the arithmetic of the global budget |
//! | `ratelimit` | `RateLimit`: N events per second |
//! | [`log`](mod@log) | one-line stderr logging with a process-wide level |
//!
//! The modules in plain type are the core's own (crate-private): what the
//! shell needs of them is re-exported here (`ConnRef`, `CloseReason`,
//! `Transport`, `StatusFilter`). The shell's contract is [`Hub`]'s public
//! methods (listed in `hub/mod.rs`); the Zenoh side's is the federation
//! seam's methods (`hub/federation.rs`) and the public modules above; the
//! simulation's and tests' is `Hub::inspect`, a read-only view of the
//! tables behind the cargo feature `inspect` (`hub/inspect.rs`).
//!
//! Dependencies point down: `rosgate-wire` (the wire format) below, the
//! `rosgate` server (the mio shell) above.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod access;
pub mod auth_budget;
pub mod bridge;
pub mod calls;
pub mod codes;
pub(crate) mod conn;
pub(crate) mod conn_ref;
pub mod counters;
pub mod encoding;
pub(crate) mod family;
pub mod foxglove;
pub mod hash;
pub mod hub;
pub mod limits;
pub mod log;
pub(crate) mod memory;
pub mod nodes;
pub mod out;
pub mod params;
pub(crate) mod ratelimit;
pub mod registry;
pub mod tf;
pub(crate) mod timer;
pub(crate) mod tiny_map;
pub(crate) mod transport;

pub use conn::{CloseReason, ConnRef};
pub use hub::Hub;
pub use limits::Limits;
pub use transport::{StatusFilter, Transport};
