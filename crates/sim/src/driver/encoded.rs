//! The subscribers' side of outgoing encodings (`docs/protocol.md`,
//! "Outgoing encodings"): what `driver/reader.rs` hands over when a
//! WebSocket client receives a binary frame, a `png` frame or a
//! `fragment` frame, and the check of every plain publish against the
//! encoding its subscription asked for.
//!
//! Each message is the next topic frame the model queued for the client
//! (so the loss rules, shedding, queue limits, depth, throttling and
//! latching, are the plain JSON subscriber's), and must be in the
//! encoding that frame was made in, exactly its bytes (fragment ids
//! included); its content, decoded by `ws_decode.rs`
//! apart from the gateway's encoders, must be the JSON publish a plain
//! subscriber gets (numbers by value):
//! - a `cbor` binary frame: the CBOR map `{"op","topic","msg"}`;
//! - a `cbor-raw` binary frame: `msg` is `{"secs","nsecs","bytes"}`, the
//!   bytes CDR of the topic's type that decodes to the JSON `msg`;
//! - a `png` frame: the image's text, read as JSON;
//! - `fragment` frames: back to back, numbered as the protocol page says,
//!   joined to exactly the text the subscription's encoding makes (a plain
//!   publish or a `png` frame), and only when that text is longer than its
//!   `fragment_size` (at least 256 characters); a text that long never
//!   arrives whole.

use serde_json::Value;

use rosgate_wire::ws::client;

use super::Sim;
use crate::model::encodings::{bundled, Comp, EncM, TYPED_TOPIC, TYPED_TYPE};
use crate::model::TopicFrame;
use crate::violation::Violation;
use crate::ws::{self, OP_BINARY};
use crate::ws_decode::{cbor_value, png_text, raw_msg_matches, same_json, Reassembler};

/// At most this much of a received message is quoted in a violation.
const SHOW_CHARS: usize = 200;

fn show(v: &Value) -> String {
    v.to_string().chars().take(SHOW_CHARS).collect()
}

/// Whether `text` is longer than `enc`'s `fragment_size` (and so is cut).
fn cut(enc: EncM, text: &str) -> bool {
    enc.fragment.is_some_and(|n| {
        text.chars().count() > (n as usize).max(rosgate_wire::fragment::MIN_FRAGMENT_CHARS)
    })
}

impl Sim {
    /// The next topic frame queued for `slot`, which `what` (a message in
    /// `comp`) must be.
    pub(super) fn next_encoded(
        &self,
        slot: usize,
        comp: Comp,
        what: &str,
    ) -> Result<TopicFrame, Violation> {
        let c = self.model.client(slot);
        match c.exp.topic.front() {
            Some(f) if f.enc.comp == comp => Ok(f.clone()),
            Some(f) => Err(self.violation(format!(
                "slot {slot} got {what}, the next message queued for it is in {:?}: {}",
                f.enc,
                String::from_utf8_lossy(&f.line[..f.line.len().min(SHOW_CHARS)])
            ))),
            None => {
                Err(self.violation(format!("slot {slot} got {what}, nothing is queued for it")))
            }
        }
    }

    /// The bytes `slot` received for its next topic frame `f` (`wire`,
    /// framed again) must be those the model made.
    pub(super) fn check_wire(
        &self,
        slot: usize,
        f: &TopicFrame,
        wire: &[u8],
    ) -> Result<(), Violation> {
        if *f.wire == *wire {
            return Ok(());
        }
        Err(self.violation(format!(
            "slot {slot} got {} bytes for a message in {:?}, the model made {} other bytes",
            wire.len(),
            f.enc,
            f.wire.len()
        )))
    }

    /// The next topic frame of `slot` arrived, checked: it leaves the
    /// model's queue.
    pub(super) fn took_encoded(&mut self, slot: usize) {
        self.counts.publishes_received += 1;
        self.counts.ws_publishes_received += 1;
        if let Some(f) = self.model.client_mut(slot).exp.topic.pop_front() {
            self.model.release_frame(f.key());
        }
    }

    /// A plain publish `line` that `slot` received (`reassembled`: from
    /// `fragment` frames): its subscription asked for plain JSON, and the
    /// text is cut exactly when it is longer than its `fragment_size`.
    pub(super) fn check_plain(
        &self,
        slot: usize,
        line: &[u8],
        reassembled: bool,
    ) -> Result<(), Violation> {
        let Some(f) = self.model.client(slot).exp.topic.front() else {
            return Ok(());
        };
        if f.enc.comp != Comp::None {
            return Err(self.violation(format!(
                "slot {slot} got a JSON publish, the next message queued for it is in {:?}",
                f.enc
            )));
        }
        let text = String::from_utf8_lossy(line);
        if cut(f.enc, &text) != reassembled {
            return Err(self.violation(format!(
                "slot {slot} got a publish of {} characters {} fragments, its fragment_size is {:?}",
                text.chars().count(),
                if reassembled { "in" } else { "without" },
                f.enc.fragment
            )));
        }
        Ok(())
    }

    /// A binary frame to `slot`: a `cbor` or `cbor-raw` message.
    pub(super) fn on_binary(&mut self, slot: usize, payload: &[u8]) -> Result<(), Violation> {
        self.counts.ws_cbor_received += 1;
        let raw = self
            .model
            .client(slot)
            .exp
            .topic
            .front()
            .map(|f| f.enc.comp)
            == Some(Comp::CborRaw);
        let comp = if raw { Comp::CborRaw } else { Comp::Cbor };
        let f = self.next_encoded(slot, comp, "a binary frame")?;
        let mut wire = Vec::new();
        client::push_frame(&mut wire, true, OP_BINARY, payload, None);
        self.check_wire(slot, &f, &wire)?;
        let got = cbor_value(payload)
            .map_err(|e| self.violation(format!("slot {slot}: a binary frame: {e}")))?;
        let want: Value = serde_json::from_slice(&f.line)
            .map_err(|e| self.violation(format!("the model's publish is not JSON: {e}")))?;
        if raw {
            let head = got["op"] == want["op"] && got["topic"] == want["topic"];
            let members = got.as_object().map_or(0, |m| m.len());
            raw_msg_matches(bundled(), TYPED_TYPE, &got["msg"], &want["msg"])
                .map_err(|e| e.to_string())
                .and_then(|_| {
                    (head && members == 3)
                        .then_some(())
                        .ok_or_else(|| format!("a cbor-raw message {}", show(&got)))
                })
                .map_err(|e| self.violation(format!("slot {slot}: {e}")))?;
            self.counts.ws_cbor_raw_received += 1;
        } else if !same_json(&got, &want) {
            return Err(self.violation(format!(
                "slot {slot}: a cbor message reads {}, the publish is {}",
                show(&got),
                show(&want)
            )));
        }
        if got["topic"] == TYPED_TOPIC {
            self.counts.ws_cbor_typed_received += 1;
        }
        self.took_encoded(slot);
        Ok(())
    }

    /// A `{"op":"png"}` frame `v` (text `line`) to `slot` (`reassembled`:
    /// from `fragment` frames).
    pub(super) fn on_png(
        &mut self,
        slot: usize,
        line: &[u8],
        v: &Value,
        reassembled: bool,
    ) -> Result<(), Violation> {
        self.counts.ws_png_received += 1;
        let f = self.next_encoded(slot, Comp::Png, "a png frame")?;
        let text = String::from_utf8_lossy(line);
        if cut(f.enc, &text) != reassembled {
            return Err(self.violation(format!(
                "slot {slot} got a png frame of {} characters {} fragments, its fragment_size is {:?}",
                text.chars().count(),
                if reassembled { "in" } else { "without" },
                f.enc.fragment
            )));
        }
        if !reassembled {
            self.check_wire(slot, &f, &ws::server_text_frame(line))?;
        }
        let members = v.as_object().map_or(0, |m| m.len());
        let data = v
            .get("data")
            .and_then(Value::as_str)
            .filter(|_| members == 2);
        let Some(data) = data else {
            return Err(self.violation(format!("slot {slot}: a malformed png frame {}", show(v))));
        };
        let inner =
            png_text(data).map_err(|e| self.violation(format!("slot {slot}: a png frame: {e}")))?;
        let got: Value = serde_json::from_str(&inner).map_err(|e| {
            self.violation(format!("slot {slot}: a png frame's text is not JSON ({e})"))
        })?;
        let want: Value = serde_json::from_slice(&f.line)
            .map_err(|e| self.violation(format!("the model's publish is not JSON: {e}")))?;
        if got != want {
            return Err(self.violation(format!(
                "slot {slot}: a png frame reads {}, the publish is {}",
                show(&got),
                show(&want)
            )));
        }
        self.took_encoded(slot);
        Ok(())
    }

    /// A `{"op":"fragment"}` frame `v` to `slot`: the first starts a
    /// message, the last hands its text to the reader as one frame's.
    pub(super) fn on_fragment(
        &mut self,
        slot: usize,
        line: &[u8],
        v: &Value,
    ) -> Result<(), Violation> {
        self.counts.ws_fragments_received += 1;
        let next = self.model.client(slot).exp.topic.front().cloned();
        let Some(f) = next.filter(|f| f.enc.fragment.is_some()) else {
            return Err(self.violation(format!(
                "slot {slot} got a fragment, but no message queued for it next is cut: {}",
                show(v)
            )));
        };
        let enc = f.enc;
        let size = enc.fragment.unwrap_or_default() as usize;
        let side = self
            .model
            .client_mut(slot)
            .ws_mut()
            .expect("a WebSocket client");
        let mut r = match side.fragments.take() {
            Some(r) => r,
            None => Reassembler::start(v, size, side.last_fragment_id)
                .map_err(|e| self.violation(format!("slot {slot}: {e}")))?,
        };
        let done = r
            .push(v)
            .map_err(|e| self.violation(format!("slot {slot}: {e}")))?;
        let side = self
            .model
            .client_mut(slot)
            .ws_mut()
            .expect("a WebSocket client");
        side.last_fragment_id = r.id();
        side.fragment_wire
            .extend_from_slice(&ws::server_text_frame(line));
        let Some(text) = done else {
            side.fragments = Some(r);
            return Ok(());
        };
        let wire = std::mem::take(&mut side.fragment_wire);
        self.check_wire(slot, &f, &wire)?;
        self.counts.ws_fragmented_received += 1;
        self.on_reassembled(slot, text.as_bytes())
    }

    /// Whether `slot` is in the middle of a fragmented message (nothing
    /// else may come until its last piece).
    pub(super) fn mid_fragments(&self, slot: usize) -> bool {
        self.model
            .client(slot)
            .ws()
            .is_some_and(|w| w.fragments.is_some())
    }
}
