//! WebSocket transport (RFC 6455), sans-io: the opening handshake and the
//! frame layer. The hub feeds it bytes and gets whole text messages, which
//! then go through the same decoder and routing as NDJSON lines.

pub mod frame;
pub mod handshake;

pub use frame::{header, WsEvent, WsReader};
