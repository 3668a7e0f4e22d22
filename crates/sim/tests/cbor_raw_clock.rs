//! A `cbor-raw` message's `secs`/`nsecs` must come from the hub's own
//! clock (`now` and the wall-clock base of its `GraphSettings`), as every
//! other time the sans-io core writes does (`Hub::wall`,
//! `crates/core/src/hub/graph.rs`): then the bytes one message becomes
//! are a function of the hub's inputs, and the simulation can predict
//! them (`crates/sim/src/model/encodings.rs` models `cbor-raw` byte for
//! byte). `crates/core/src/hub/encodings.rs` once stamped them with
//! `SystemTime::now()`; this test keeps it from coming back.

use std::io::IoSlice;
use std::time::{Duration, Instant};

use rosgate_core::{Hub, Limits, Transport};
use rosgate_wire::ws::client;

const WS_KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";

/// The bytes queued for `key`.
fn queued(hub: &Hub, key: u32) -> Vec<u8> {
    let Some(q) = hub.out(key) else {
        return Vec::new();
    };
    let mut iov = vec![IoSlice::new(&[]); q.frames().max(1)];
    let n = q.fill(&mut iov, usize::MAX);
    iov[..n].iter().flat_map(|s| s.iter().copied()).collect()
}

#[test]
fn cbor_raw_is_stamped_by_the_hubs_clock() {
    let base = Instant::now();
    // Its wall-clock base is the epoch at `base` (`GraphSettings::new`).
    let mut hub = Hub::new(Limits::default(), base);
    let now = base + Duration::from_secs(7);
    let sub = hub
        .open_as(Transport::WebSocket, base)
        .expect("admitted")
        .key;
    hub.on_bytes(sub, client::request("x", "/", WS_KEY, &[]).as_bytes(), base);
    let publisher = hub.open(base).expect("admitted").key;
    let mut f = Vec::new();
    let text =
        br#"{"op":"subscribe","topic":"/t","type":"std_msgs/msg/String","compression":"cbor-raw"}"#;
    client::push_frame(&mut f, true, 1, text, Some([1, 2, 3, 4]));
    hub.on_bytes(sub, &f, base);
    hub.on_bytes(
        publisher,
        b"{\"op\":\"publish\",\"topic\":\"/t\",\"msg\":{\"data\":\"x\"}}\n",
        now,
    );
    let bytes = queued(&hub, sub);
    let mut binary = Vec::new();
    let head = client::Response::parse(&bytes).ok().flatten().expect("101");
    client::Reader::new().feed(&bytes[head.len..], usize::MAX, |e| {
        if let client::Event::Binary(b) = e {
            binary.push(b.to_vec());
        }
    });
    assert_eq!(binary.len(), 1, "one cbor-raw message");
    // `"secs"` then its value: 7 (one byte, 0x07) at the hub's `now`,
    // the wall base being the epoch; `"nsecs"` 0.
    let m = &binary[0];
    let at = |key: &[u8]| m.windows(key.len()).position(|w| w == key).expect("key");
    let secs = at(b"\x64secs") + 5;
    let nsecs = at(b"\x65nsecs") + 6;
    assert_eq!((m[secs], m[nsecs]), (0x07, 0x00), "{m:02x?}");
}
