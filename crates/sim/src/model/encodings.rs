//! The model's data for outgoing encodings (`docs/protocol.md`, "Outgoing
//! encodings"): what a WebSocket subscription asks for ([`EncM`]:
//! `compression` and `fragment_size`) and the bytes its queue holds for
//! one publish ([`ws_wire`]), and the topic whose type the gateway knows
//! ([`TYPED_TOPIC`], typed `cbor`).
//!
//! The bytes are made with the wire crate's encoders (`rosgate_wire::cbor`,
//! `png`, `fragment`; typed CBOR with `rosgate_ros2::cbor_typed`), composed here as the protocol page states them
//! (the hub composes them in `crates/core/src/encoding.rs`): the
//! accounting (`driver/accounting.rs`) matches queue entries and counts
//! the ledger byte for byte, so it needs them exactly. That the bytes are
//! what the protocol says is checked apart, when a subscriber reads them:
//! `ws_decode.rs` decodes each one independently of those encoders and
//! `driver/reader.rs` compares the content with the JSON publish a plain
//! subscriber gets.
//!
//! `cbor-raw` is modelled and asked for on the typed topic (see [`CBOR_RAW`]),
//! and so is a Foxglove session's subscription to its channel
//! ([`Comp::Foxglove`], `model/foxglove.rs`): message data carrying its CDR.
//!
//! Invariants the model keeps with it:
//! - one message is made once per encoding for every subscriber that asked
//!   for the same (one shared frame in the ledger, [`EncM`] in its key);
//! - the hub numbers fragmented messages from 1, one id per message cut
//!   (each latched copy or throttle flush is a message of its own), in the
//!   order it makes them: the model makes them in slot order, so a run
//!   never has two encodings that cut on one topic at once (`fragment_size`
//!   goes with plain JSON only, never with a throttle; see
//!   `driver/qos.rs`).

use std::rc::Rc;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rosgate_ros2::cbor_typed;
use rosgate_ros2::registry::Registry;
use rosgate_wire::ws::client;
use rosgate_wire::{cbor, encode, fragment, png};

use crate::ws::{self, OP_BINARY};

/// The topic whose every registration names [`TYPED_TYPE`] (QoS requests
/// pick it, `driver/qos.rs`), so the gateway knows its type and its
/// `cbor` messages are typed: their `uint8[]` a byte string.
pub(crate) const TYPED_TOPIC: &str = "/u8";
/// Its type, a bundled one with a `uint8[]` field.
pub(crate) const TYPED_TYPE: &str = "std_msgs/msg/UInt8MultiArray";

/// The bundled types, as the hub has them without `--interfaces`.
pub(crate) fn bundled() -> &'static Arc<Registry> {
    static TYPES: OnceLock<Arc<Registry>> = OnceLock::new();
    TYPES.get_or_init(Registry::bundled_shared)
}

/// A subscription's `compression`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Comp {
    #[default]
    None,
    Cbor,
    /// Only on [`TYPED_TOPIC`], and only with [`CBOR_RAW`].
    CborRaw,
    Png,
    /// A Foxglove session's subscription with this id (never asked by
    /// name: `model/foxglove.rs`), on [`TYPED_TOPIC`] only: message data
    /// carrying the CDR of [`TYPED_TYPE`].
    Foxglove(u32),
}

/// Whether the schedule asks for `cbor-raw`. The hub stamps its
/// `secs`/`nsecs` by its own clock (`now` and its wall-clock base, the
/// epoch at the hub's creation here: `Hub::wall`), so [`ws_wire`] makes
/// the same bytes (`tests/cbor_raw_clock.rs` keeps that so) and
/// `driver/encoded.rs` decodes the CDR.
pub(crate) const CBOR_RAW: bool = true;

/// What a WebSocket subscription asks its messages to be made as.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct EncM {
    pub comp: Comp,
    /// `fragment_size`, characters.
    pub fragment: Option<u32>,
}

impl EncM {
    /// Plain JSON, whole (what the fast path sends).
    pub fn is_plain(self) -> bool {
        self.comp == Comp::None && self.fragment.is_none()
    }

    /// The `subscribe` members stating it.
    pub fn members(self) -> Vec<(&'static str, String)> {
        let mut m = Vec::new();
        match self.comp {
            Comp::None => {}
            Comp::Cbor => m.push(("compression", "\"cbor\"".to_string())),
            Comp::CborRaw => m.push(("compression", "\"cbor-raw\"".to_string())),
            Comp::Png => m.push(("compression", "\"png\"".to_string())),
            Comp::Foxglove(_) => {}
        }
        if let Some(n) = self.fragment {
            m.push(("fragment_size", n.to_string()));
        }
        m
    }
}

/// The bytes a WebSocket subscriber of `topic` in `enc` is queued for the
/// publish `line` (its JSON, without a newline, as
/// `encode::publish_prefix(topic)` + msg + `}`); `frag_ids`: the
/// fragmented messages the hub has made so far, one more when this one is
/// cut; `wall`: the hub's wall clock (`cbor-raw`'s stamp), time since the
/// epoch.
pub(crate) fn ws_wire(
    topic: &str,
    line: &[u8],
    enc: EncM,
    frag_ids: &mut u64,
    wall: Duration,
) -> Rc<[u8]> {
    if enc.is_plain() {
        return ws::server_text_frame(line).into();
    }
    let text = String::from_utf8_lossy(line);
    let mut out = Vec::new();
    match enc.comp {
        Comp::Cbor => {
            let prefix = encode::publish_prefix(topic).len();
            let msg = &text[prefix..text.len() - 1];
            let mut payload = Vec::new();
            // The typed topic's messages fit its type; the others go
            // type-unaware, as do messages that do not fit a known type.
            let typed = topic == TYPED_TOPIC
                && serde_json::from_str(msg).is_ok_and(|v| {
                    cbor_typed::publish(&**bundled(), TYPED_TYPE, topic, &v, &mut payload).is_ok()
                });
            if !typed {
                payload.clear();
            }
            // The simulation's payloads are valid JSON within the depth.
            if typed || cbor::publish(&mut payload, topic, msg).is_ok() {
                client::push_frame(&mut out, true, OP_BINARY, &payload, None);
            }
        }
        Comp::CborRaw => {
            let prefix = encode::publish_prefix(topic).len();
            let msg = &text[prefix..text.len() - 1];
            let cdr = serde_json::from_str(msg)
                .ok()
                .and_then(|v| rosgate_ros2::cdr::encode(&**bundled(), TYPED_TYPE, &v).ok());
            // Only the typed topic's messages, which fit, go in cbor-raw.
            if let Some(cdr) = cdr {
                let mut payload = Vec::new();
                let (secs, nsecs) = (wall.as_secs() as i64, wall.subsec_nanos());
                cbor::publish_raw(&mut payload, topic, secs, nsecs, &cdr);
                client::push_frame(&mut out, true, OP_BINARY, &payload, None);
            }
        }
        Comp::Foxglove(sub) => {
            // `rosgate_wire::foxglove::server::message_data_head`'s layout
            // written out here: opcode 1, subscription id and the log time
            // (the turn's wall clock, ns) little-endian, then the CDR.
            let prefix = encode::publish_prefix(topic).len();
            let msg = &text[prefix..text.len() - 1];
            let cdr = serde_json::from_str(msg)
                .ok()
                .and_then(|v| rosgate_ros2::cdr::encode(&**bundled(), TYPED_TYPE, &v).ok());
            if let Some(cdr) = cdr {
                let mut payload = vec![1u8];
                payload.extend_from_slice(&sub.to_le_bytes());
                payload.extend_from_slice(&(wall.as_nanos() as u64).to_le_bytes());
                payload.extend_from_slice(&cdr);
                client::push_frame(&mut out, true, OP_BINARY, &payload, None);
            }
        }
        Comp::None => text_frames(&mut out, &text, enc.fragment, frag_ids),
        Comp::Png => {
            let mut framed = Vec::new();
            png::frame(&mut framed, &text);
            let framed = String::from_utf8_lossy(&framed);
            text_frames(
                &mut out,
                framed.trim_end_matches('\n'),
                enc.fragment,
                frag_ids,
            );
        }
    }
    out.into()
}

/// `text` as one text frame, or as `fragment` frames when longer than
/// `size` characters.
fn text_frames(out: &mut Vec<u8>, text: &str, size: Option<u32>, frag_ids: &mut u64) {
    let Some(pieces) = size.and_then(|n| fragment::split(text, n as usize)) else {
        out.extend_from_slice(&ws::server_text_frame(text.as_bytes()));
        return;
    };
    *frag_ids += 1;
    let id = frag_ids.to_string();
    let id = rosgate_wire::raw::Raw::from_valid_json(&id);
    for p in pieces {
        let mut l = Vec::new();
        p.write(&mut l, id);
        l.pop();
        out.extend_from_slice(&ws::server_text_frame(&l));
    }
}
