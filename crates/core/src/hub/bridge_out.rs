//! Where the hub's calls, goals, cancels and answers meet a bridge: each
//! site that sends one of them to a connection goes through these, which
//! send the line to a client, or, when the connection is a bridge, queue
//! the typed message for the peer beyond it (`crate::bridge`). Topic data
//! for a bridge does not come here: it stays in the bridge's queue.
//!
//! Invariants:
//! - with federation off, a client's answer pays one branch here;
//! - a call or goal to a bridge leaves with the peer that serves it
//!   recorded in its [`Call`], so its cancels follow it; one from a
//!   bridge records the peer it came from, so its answer, feedback and
//!   result go back there;
//! - a call or goal the outbox refuses ends at once, through the calls
//!   table (its caller gets its one answer): "every call ends exactly
//!   once" holds.

use std::time::Instant;

use rosgate_wire::encode;

use super::answer::{Answer, GoalEnd, GoalFailure};
use super::{CallFailure, Hub};
use crate::bridge::{BridgeMsg, PeerId};
use crate::conn::ConnRef;
use crate::counters::Counter;
use crate::encoding::{Compression, Encoding};
use crate::nodes::Domain;
use crate::registry::Provided;
use crate::transport::{Framing, Transport};

/// What a bridge's messages name as text.
fn text(bytes: &[u8]) -> Box<str> {
    String::from_utf8_lossy(bytes).into()
}

impl Hub {
    /// The peer beyond `to` when `to` is a bridge (`Some(None)`: a bridge,
    /// but no peer is known for this message), `None` for a client.
    fn beyond(&self, to: ConnRef, peer: Option<PeerId>) -> Option<Option<PeerId>> {
        if !self.fed.enabled || !self.is_bridge(to) {
            return None;
        }
        Some(peer.or(self.fed.speaking))
    }

    /// Queues `msg` for a peer, or says it does not fit.
    fn queue_for_peer(&mut self, msg: BridgeMsg) -> Result<(), BridgeMsg> {
        self.fed.outbox.push(msg)
    }

    /// An answer for a bridge: queued for its peer, or dropped and
    /// counted when no peer is known (the bridge asked nothing of this).
    /// False when `to` is a client.
    fn answer_bridge(
        &mut self,
        to: ConnRef,
        peer: Option<PeerId>,
        make: impl FnOnce(PeerId) -> BridgeMsg,
    ) -> bool {
        let Some(peer) = self.beyond(to, peer) else {
            return false;
        };
        let queued = peer.map(|p| self.queue_for_peer(make(p)));
        if !matches!(queued, Some(Ok(()))) {
            self.counters.inc(Counter::FederationOutDropped);
        }
        true
    }

    /// A service's answer (`values`, `result` raw JSON) to `to`: the
    /// caller's line, or a [`BridgeMsg::Response`] for the peer `peer`
    /// (the call's) beyond a bridge.
    pub(super) fn send_service_answer(
        &mut self,
        to: ConnRef,
        peer: Option<PeerId>,
        service_json: &[u8],
        id: Option<&[u8]>,
        answer: Answer<'_>,
        now: Instant,
    ) {
        let Answer {
            values,
            result,
            status,
        } = answer;
        let msg = |to| BridgeMsg::Response {
            id: text(id.unwrap_or(b"null")),
            values: text(values),
            result: result == b"true",
            to,
        };
        if self.answer_bridge(to, peer, msg) {
            return;
        }
        if self.is_foxglove(to) {
            return self.foxglove_answer(to, id, answer, now);
        }
        // The hub's reused buffer: an answer per call is the calls' hot path.
        let mut out = std::mem::take(&mut self.scratch);
        out.clear();
        encode::service_response(&mut out, service_json, id, values, result, status);
        self.send_control(to, &out, now);
        self.scratch = out;
    }

    /// A provider's answer to a caller (a client, not a bridge) that asked
    /// for it in `encoding` (rosbridge's `call_service` `compression` and
    /// `fragment_size`), queued as control data (never shed, so never a
    /// partial set of fragments):
    /// - `cbor` (and `cbor-raw`, which has no CDR for an answer, as
    ///   rosbridge's protocol.py `send` treats both): one binary message,
    ///   the `service_response` object mapped to CBOR type-unaware (the
    ///   answer's type is the provider's, not checked here);
    /// - `png`: the `{"op":"png","data":..}` frame of the line;
    /// - longer than `fragment_size` characters, a text frame goes as
    ///   `fragment` frames with the call's id (rosbridge's protocol.py uses
    ///   the message's `id`); binary messages are never cut.
    pub(super) fn send_answer_encoded(
        &mut self,
        to: ConnRef,
        service_json: &[u8],
        id: Option<&[u8]>,
        answer: Answer<'_>,
        encoding: Encoding,
        now: Instant,
    ) {
        let Answer {
            values,
            result,
            status,
        } = answer;
        let mut out = Vec::new();
        encode::service_response(&mut out, service_json, id, values, result, status);
        let text = std::str::from_utf8(out.strip_suffix(b"\n").unwrap_or(&out)).unwrap_or("");
        // Binary messages exist on the WebSocket transport only (the call
        // was refused on the others: `Hub::answer_encoding`).
        let websocket = self
            .conn(to.key)
            .is_some_and(|c| c.transport() != Transport::Tcp);
        let text = match encoding.compression {
            // A call never asks for a Foxglove encoding (it is no
            // `compression` a client can name).
            Compression::None | Compression::Foxglove { .. } => text.to_owned(),
            Compression::Png => {
                let mut framed = Vec::new();
                rosgate_wire::png::frame(&mut framed, text);
                self.counters.inc(Counter::EncodedPngFrames);
                self.counters
                    .add(Counter::EncodedPngBytes, framed.len() as u64);
                String::from_utf8_lossy(&framed)
                    .trim_end_matches('\n')
                    .to_owned()
            }
            Compression::Cbor | Compression::CborRaw => {
                let mut cbor = Vec::with_capacity(out.len());
                let mut frame = Vec::with_capacity(out.len() + 10);
                let sent = rosgate_wire::cbor::from_json(text, &mut cbor).is_ok()
                    && websocket
                    && Framing::WebSocket.push_binary(&mut frame, &cbor);
                if !sent {
                    // The provider's answer is valid JSON and the
                    // transport was checked at the call: not reached.
                    self.counters.inc(Counter::EncodeFailed);
                    return self.send_control(to, &out, now);
                }
                self.counters.inc(Counter::EncodedCborFrames);
                self.counters
                    .add(Counter::EncodedCborBytes, cbor.len() as u64);
                return self.send_raw(to, &frame, now);
            }
        };
        let pieces = encoding
            .fragment
            .and_then(|n| rosgate_wire::fragment::split(&text, n as usize));
        let Some(pieces) = pieces else {
            let mut line = text.into_bytes();
            line.push(b'\n');
            return self.send_control(to, &line, now);
        };
        let fid = id.and_then(|i| std::str::from_utf8(i).ok()).map_or(
            rosgate_wire::Raw::from_valid_json("0"),
            rosgate_wire::Raw::from_valid_json,
        );
        self.counters.inc(Counter::FragmentedOut);
        let mut line = Vec::new();
        for p in pieces {
            line.clear();
            p.write(&mut line, fid);
            self.counters.inc(Counter::FragmentFrames);
            self.send_control(to, &line, now);
        }
    }

    /// A service call's failure, `reason`, to `to` (see
    /// [`Hub::send_service_answer`]).
    pub(super) fn send_service_failure(
        &mut self,
        to: ConnRef,
        peer: Option<PeerId>,
        service_json: &[u8],
        id: Option<&[u8]>,
        reason: &str,
        now: Instant,
    ) {
        let mut values = Vec::with_capacity(reason.len() + 2);
        encode::json_string(&mut values, reason);
        let answer = Answer::failed(&values);
        self.send_service_answer(to, peer, service_json, id, answer, now);
    }

    /// A goal's end (`values`, `status`, `result` raw JSON) to `to`: the
    /// caller's line, or a [`BridgeMsg::Result`] for the peer.
    pub(super) fn send_goal_result(
        &mut self,
        to: ConnRef,
        peer: Option<PeerId>,
        action_json: &[u8],
        id: &[u8],
        end: GoalEnd<'_>,
        now: Instant,
    ) {
        let GoalEnd {
            values,
            status,
            result,
        } = end;
        let msg = |to| BridgeMsg::Result {
            id: text(id),
            values: text(values),
            // A status that is not a small number is an abort, as the
            // counters read it.
            status: std::str::from_utf8(status)
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(6),
            result: result == b"true",
            to,
        };
        if self.answer_bridge(to, peer, msg) {
            return;
        }
        if self.is_foxglove(to) {
            let status = std::str::from_utf8(status)
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(6);
            return self.foxglove_goal_end(to, id, status, values, now);
        }
        let mut out = Vec::new();
        encode::action_result(&mut out, action_json, id, values, status, result);
        self.send_control(to, &out, now);
    }

    /// A goal's failure, `reason`, with `status`, to `to`.
    pub(super) fn send_goal_failure(
        &mut self,
        to: ConnRef,
        peer: Option<PeerId>,
        action_json: &[u8],
        id: &[u8],
        failure: GoalFailure<'_>,
        now: Instant,
    ) {
        let GoalFailure { status, reason } = failure;
        let msg = |to| BridgeMsg::Result {
            id: text(id),
            values: {
                let mut v = Vec::with_capacity(reason.len() + 2);
                encode::json_string(&mut v, reason);
                text(&v)
            },
            status,
            result: false,
            to,
        };
        if self.answer_bridge(to, peer, msg) {
            return;
        }
        if self.is_foxglove(to) {
            let mut v = Vec::with_capacity(reason.len() + 2);
            encode::json_string(&mut v, reason);
            return self.foxglove_goal_end(to, id, status as i8, &v, now);
        }
        let mut out = Vec::new();
        encode::action_failure(&mut out, action_json, id, status, reason);
        self.send_control(to, &out, now);
    }

    /// Feedback for the goal `id` a bridge sent for the peer `peer`:
    /// queued for it (dropped and counted past the outbox's bound).
    pub(super) fn feedback_to_bridge(
        &mut self,
        id: Option<&[u8]>,
        peer: Option<PeerId>,
        values: &[u8],
    ) {
        let queued = peer.map(|to| {
            self.queue_for_peer(BridgeMsg::Feedback {
                id: text(id.unwrap_or(b"null")),
                values: text(values),
                to,
            })
        });
        if matches!(queued, Some(Ok(()))) {
            self.counters.inc(Counter::FeedbackForwarded);
        } else {
            self.counters.inc(Counter::FederationOutDropped);
        }
    }

    /// Records the peer a call or goal `seq` from a bridge came from (the
    /// one speaking now), so its answers go back there.
    pub(super) fn note_origin(&mut self, caller: ConnRef, seq: u64) {
        if let Some(Some(p)) = self.beyond(caller, None) {
            self.calls.set_caller_peer(seq, p);
        }
    }

    /// Sends call `seq` (`kind` `name` of `domain`) to its provider when
    /// that is a bridge: `msg` for the peer that serves it, recorded in
    /// the call. True when handled (queued, or failed at once: no peer
    /// serves it any more, or the outbox is full); false for a client.
    pub(super) fn call_to_bridge(
        &mut self,
        provider: ConnRef,
        seq: u64,
        (kind, domain, name): (Provided, Domain, &str),
        msg: impl FnOnce(PeerId) -> BridgeMsg,
        now: Instant,
    ) -> bool {
        if !self.fed.enabled || !self.is_bridge(provider) {
            return false;
        }
        let why = match self.serving_peer_for(kind, domain, name, self.fed.speaking) {
            Some((p, _)) => {
                self.calls.set_provider_peer(seq, p);
                match self.queue_for_peer(msg(p)) {
                    Ok(()) => return true,
                    Err(_) => {
                        self.counters.inc(Counter::FederationOutboxFull);
                        CallFailure::FederationBusy
                    }
                }
            }
            // Its provider went this turn; the bridge stops providing it
            // at the shell's next `take_interest_changes`.
            None => CallFailure::ProviderGone,
        };
        if let Some(call) = self.calls.take(seq) {
            self.fail_call(call, why, now);
        }
        true
    }

    /// A cancel of goal `seq` (of the action `action_json`, sent to the
    /// peer `peer`) to its server when that is a bridge: for that peer
    /// (dropped and counted past the outbox's bound). False for a client
    /// server.
    pub(super) fn cancel_to_bridge(
        &mut self,
        server: ConnRef,
        seq: u64,
        action_json: &[u8],
        peer: Option<PeerId>,
    ) -> bool {
        if !self.fed.enabled || !self.is_bridge(server) {
            return false;
        }
        let domain = self.conn(server.key).map_or(0, |b| b.domain());
        // The name as the goal recorded it, a JSON string the hub wrote.
        let action: String = serde_json::from_slice(action_json).unwrap_or_default();
        let queued = peer.map(|to| {
            self.queue_for_peer(BridgeMsg::Cancel {
                domain,
                action: action.into(),
                id: seq,
                to,
            })
        });
        if !matches!(queued, Some(Ok(()))) {
            self.counters.inc(Counter::FederationOutDropped);
        }
        true
    }
}

impl Hub {
    /// The peer a call or goal `id` ([`BridgeMsg::Call`],
    /// [`BridgeMsg::Goal`]) was for could not take it (it no longer knows
    /// the service or action): the call fails at once, as when its
    /// provider leaves. Nothing for a call that is not a bridge's.
    pub(super) fn peer_refused(&mut self, id: u64, now: Instant) {
        let bridged = self
            .calls
            .get(id)
            .is_some_and(|c| self.is_bridge(c.provider()));
        if !bridged {
            return;
        }
        if let Some(call) = self.calls.take(id) {
            self.fail_call(call, CallFailure::ProviderGone, now);
        }
    }
}
