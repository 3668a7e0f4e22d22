//! The Foxglove WebSocket protocol, sans-io: the subprotocols we speak,
//! a client's messages in ([`client`]) and the server's messages out
//! ([`server`]).
//!
//! The reference is the protocol's specification
//! (<https://github.com/foxglove/ws-protocol/blob/main/docs/spec.md>) and
//! foxglove-sdk's `rust/foxglove/src/protocol/` (its snapshot tests give
//! the byte layouts our tests check). Only version 1 of the layouts is
//! spoken (`foxglove.sdk.v1`, and `foxglove.websocket.v1`, its older name,
//! which the Foxglove app and `@foxglove/ws-protocol` offer).
//!
//! Invariants: nothing here panics on any input; a client message that
//! cannot be read gives an `Err` naming the problem (the hub sends it as a
//! `status` of level error), never a partial operation.

pub mod client;
pub mod server;

/// The subprotocols accepted, in our order of preference.
pub const SUBPROTOCOLS: [&str; 2] = ["foxglove.sdk.v1", "foxglove.websocket.v1"];

/// The subprotocol to echo for a `Sec-WebSocket-Protocol` header value
/// (a comma-separated list in the client's order of preference): the first
/// offered that we speak.
pub fn choose(offered: &str) -> Option<&'static str> {
    offered
        .split(',')
        .map(str::trim)
        .find_map(|p| SUBPROTOCOLS.iter().copied().find(|&s| s == p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_offered_that_we_speak_is_chosen() {
        assert_eq!(
            choose("foxglove.websocket.v1"),
            Some("foxglove.websocket.v1")
        );
        assert_eq!(
            choose("x, foxglove.sdk.v1 ,foxglove.websocket.v1"),
            Some("foxglove.sdk.v1")
        );
        assert_eq!(choose("foxglove.sdk.v2"), None);
        assert_eq!(choose(""), None);
    }
}
