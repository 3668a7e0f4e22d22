//! rosgate: a low-latency gateway for robot software.
//!
//! Clients speak newline-delimited JSON over TCP (the rosbridge-style
//! protocol in `docs/protocol.md`): they publish and subscribe to topics and
//! call services that other clients provide. One mio poll loop on one thread
//! drives every socket.
//!
//! # Layout
//! Bytes flow down this list on the way in and up it on the way out:
//!
//! | module | owns |
//! |---|---|
//! | [`server`] | the mio loop: sockets, readiness, budgets, the clock, signals |
//! | [`hub`] | the sans-io core: connections, dispatch, publish batches, calls, cleanup, time-outs |
//! | [`line`] | `LineReader`: resumable newline framing with a length limit |
//! | [`codec`] | `scan` + `decode` one line into a `Request`; `encode` outgoing frames |
//! | [`ws`] | WebSocket handshake and frames (sans-io), for the rosbridge listener |
//! | [`router`] | topic subscribers/publishers and service providers |
//! | [`calls`] | `CallTable`: calls in flight, keyed by provider-side id |
//! | [`timer`] | `TimerWheel`: hashed wheel for call deadlines |
//! | [`out`] | `OutQueue`: shared frames, byte accounting, drop policy |
//! | [`conn`] | `Conn`, `ConnRef` (key + generation), `CloseReason` |
//! | [`stats`] | counters and their JSON rendering |
//! | [`config`] | `Config`, `Limits` and every `DEFAULT_*` limit |
//! | [`log`] | one-line stderr logging |
//! | [`sim`] | seeded simulation and fuzz checks of the core (tests and `fuzz/`) |
//!
//! Everything but `server` takes `now: Instant` as an argument and never
//! touches a socket, so it is tested and fuzzed without I/O or sleeping.

pub mod calls;
pub mod codec;
pub mod config;
pub mod conn;
pub mod hub;
pub mod line;
pub mod log;
pub mod out;
pub mod router;
pub mod server;
pub mod sim;
pub mod stats;
pub mod timer;
pub mod ws;
