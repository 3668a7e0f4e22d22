//! WebSocket transport (RFC 6455), sans-io: the opening handshake and the
//! frame layer. The hub feeds it bytes and gets whole text messages, which
//! then go through the same decoder and routing as NDJSON lines.
//!
//! [`client`] is the other side, for everything that talks to a gateway
//! over WebSocket (the CLI, the tests, the simulation).

pub mod client;
pub mod frame;
pub mod handshake;

pub use frame::{header, WsEvent, WsReader};
