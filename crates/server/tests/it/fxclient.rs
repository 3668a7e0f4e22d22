//! The Foxglove WebSocket test client (docs/protocol.md, "Foxglove
//! WebSocket protocol"), shared by `it/foxglove.rs`, `federation.rs` and
//! `ros2.rs`: the Foxglove port found in a gateway's log, a session opened
//! on it, the channel advertised for a topic. Every read has a deadline.

use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use serde_json::Value;

use crate::support::*;
use crate::wsclient::*;

/// The subprotocol header of a Foxglove client.
pub const FOXGLOVE: &str = "Sec-WebSocket-Protocol: foxglove.websocket.v1\r\n";

/// The Foxglove listener's address in `gw`'s log.
pub fn foxglove_addr(gw: &Gateway) -> SocketAddr {
    gw.logs()
        .iter()
        .find_map(|l| {
            l.split("foxglove listening on ws://")
                .nth(1)?
                .trim()
                .parse()
                .ok()
        })
        .expect("foxglove listening line")
}

/// A Foxglove client on `gw`'s Foxglove port offering `headers`: the
/// opening's answer head (a `101`), the session, its first message read
/// (`serverInfo`, unchecked: the caller asserts on it).
pub fn foxglove_session(gw: &Gateway, headers: &str) -> (String, Ws, Value) {
    let s = TcpStream::connect(foxglove_addr(gw)).expect("connect foxglove port");
    let mut ws = Ws::over(s);
    let head = ws.handshake(&upgrade_request("/", headers));
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    let info = ws.json();
    (head, ws, info)
}

/// A Foxglove session on `gw` offering [`FOXGLOVE`], its `serverInfo` read
/// and checked.
pub fn foxglove(gw: &Gateway) -> Ws {
    let (_, ws, info) = foxglove_session(gw, FOXGLOVE);
    assert_eq!(info["op"], "serverInfo", "{info}");
    ws
}

/// The channel advertised to `fx` for `topic`, waiting up to `within`
/// (other messages skipped).
pub fn foxglove_channel(fx: &mut Ws, topic: &str, within: Duration) -> Value {
    let dl = deadline(within);
    loop {
        let f = fx
            .try_frame(dl)
            .unwrap_or_else(|| panic!("no channel for {topic} within {within:?}"));
        if f.0 != 0x1 {
            continue;
        }
        let v: Value = serde_json::from_slice(&f.1).expect("json");
        if v["op"] != "advertise" {
            continue;
        }
        if let Some(c) = v["channels"]
            .as_array()
            .and_then(|a| a.iter().find(|c| c["topic"] == topic))
        {
            return c.clone();
        }
    }
}

/// `ch` is the channel of a `std_msgs/msg/String` topic as the gateway
/// advertises a known type: CDR, with its `ros2msg` schema.
pub fn assert_string_cdr_channel(ch: &Value) {
    assert_eq!(ch["encoding"], "cdr", "{ch}");
    assert_eq!(ch["schemaName"], "std_msgs/msg/String", "{ch}");
    assert_eq!(ch["schemaEncoding"], "ros2msg", "{ch}");
    assert_eq!(ch["schema"], "string data\n", "{ch}");
}

/// Subscribes `fx` to channel `chan` as subscription `id`, and gives the
/// gateway a moment: the subscription is made within the turn that reads
/// it, and the tests publish from another connection.
pub fn foxglove_subscribe(fx: &mut Ws, id: u32, chan: impl std::fmt::Display) {
    fx.send_text(&format!(
        r#"{{"op":"subscribe","subscriptions":[{{"id":{id},"channelId":{chan}}}]}}"#
    ));
    std::thread::sleep(ms(50));
}

/// `info` (a `serverInfo`) lists `cap` among its capabilities.
pub fn assert_capability(info: &Value, cap: &str) {
    assert!(
        info["capabilities"]
            .as_array()
            .is_some_and(|a| a.iter().any(|c| c == cap)),
        "no {cap} in {info}"
    );
}
