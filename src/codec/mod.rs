//! The wire format: one line of JSON in ([`decode`]), frames out ([`encode`]).
//!
//! Payloads (`msg`, `args`, `values`, `result`, `status`, `id`) are carried as
//! borrowed raw JSON spans and written back byte for byte; they are validated
//! by the parser but never re-serialized.

pub mod decode;
pub mod encode;
