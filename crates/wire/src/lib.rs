//! rosgate's wire format, usable on its own (by the gateway's core, the CLI,
//! the load generator, bridges): nothing here depends on connections,
//! queues or the clock (what needs time, fragment reassembly, takes `now`
//! from its caller).
//!
//! | module | owns |
//! |---|---|
//! | [`line`](mod@line) | `LineReader`: resumable newline framing with a length limit |
//! | [`scan`] | the validating JSON scanner: exactly serde_json's language, member spans, bounded depth |
//! | [`decode`] | one line -> `Request` (op, unescaped names, raw payload spans), per [`decode::Dialect`] |
//! | [`encode`] | outgoing frames written into a caller's buffer; JSON string escaping |
//! | [`cbor`] | CBOR (RFC 8949) and RFC 8746 typed arrays as rosbridge's `cbor` compression writes them; JSON -> CBOR |
//! | [`png`] | rosbridge's `png` compression: the text as an RGB image, PNG, base64, the `png` frame |
//! | [`foxglove`] | the Foxglove WebSocket protocol: subprotocols, a client's JSON ops and binary frames in, the server's messages out |
//! | [`fragment`] | rosbridge's `fragment` op: splitting a frame, and bounded per-connection reassembly |
//! | [`names`] | ROS 2 names: validation, expansion (relative, `~/`), remaps, hidden names |
//! | [`qos`] | QoS as clients ask for it (`qos`, `latch`, `queue_length`) and the compatibility rule |
//! | [`query`] | a request target's query string, percent-decoded (WebSocket URL options) |
//! | [`mail`] | the binary records federated gateways mail each other (service calls and answers), batched |
//! | [`ids`] | the gateway's provider-side call ids (`"rg-<n>"`): writing and strict parsing |
//! | [`ws`] | WebSocket (RFC 6455) handshake and frames, sans-io |
//! | [`raw`] | [`Raw`], a span of valid JSON forwarded byte for byte |
//!
//! Payloads (`msg`, `args`, `values`, `result`, `status`, `id`) are carried
//! as borrowed raw JSON spans and written back byte for byte; they are
//! validated by the scanner but never re-serialized.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod base64;
pub mod cbor;
pub mod decode;
pub mod encode;
pub mod foxglove;
pub mod fragment;
pub mod ids;
pub mod line;
pub mod mail;
pub mod names;
pub mod png;
pub mod qos;
pub mod query;
pub mod raw;
pub mod scan;
pub mod ws;

pub use raw::Raw;

/// Maximum JSON nesting depth of a request (P3), counting the request object
/// as 1. We never recurse, but the clients we forward to do: serde_json's
/// `Value` refuses 128 levels, and a forwarded frame nests its payload as
/// deep as the request did, so 127 is the most every client can read.
pub const MAX_JSON_DEPTH: usize = 127;
