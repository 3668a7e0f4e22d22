//! The gateways peer: other rosgate gateways met in the same Zenoh session,
//! in rosgate's own key space (`keys.rs`) and tables of what they want and
//! provide (`remote.rs`). See docs/federation.md.

pub mod keys;
pub(crate) mod remote;
