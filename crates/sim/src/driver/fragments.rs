//! Requests a client sends as rosbridge `fragment` pieces
//! (`docs/protocol.md`, "Fragments from clients"; the hub's side is
//! `crates/core/src/hub/fragments.rs`), valid or malformed:
//!
//! - valid: 2-4 pieces cut at character boundaries, in order or reversed,
//!   under an id of their own, all in one write: the request has exactly
//!   the effect it has when sent whole, once its last byte is read;
//! - malformed (a third of the publishes sent in pieces): the first piece,
//!   then one the gateway must refuse, a `num` out of range, a `total`
//!   unlike the first piece's, or the first piece again: one error status
//!   with the pieces' id, nothing delivered (the publish has no effect),
//!   nothing held once the write is read, and nothing for any other
//!   client (the model owes them nothing).
//!
//! A refused message stays in its connection's table, failed, until its
//! deadline (`--fragment-timeout-ms` from its first piece), and counts
//! among the 16 messages in flight there: the model keeps those deadlines
//! (`Client::failed_fragments` in `model/mod.rs`) and sends no pieces while 8 may still be
//! there, so that no piece meets that bound (which the model does not
//! predict).

use rosgate_wire::fragment::{Piece, MAX_FRAGMENTED_IN_FLIGHT, MESSAGE_OVERHEAD, PIECE_OVERHEAD};
use rosgate_wire::ws::client;

use super::feed::Write;
use super::requests::parse_id;
use super::{Outgoing, Sim};
use crate::model::{Id, Unit};
use crate::ws::OP_TEXT;

impl Sim {
    /// The request as `fragment` pieces, when `out.split % 8 == 3` picks
    /// it and it fits (see the module docs): the write and, for a
    /// malformed one (`publish` only), the id its error status carries.
    /// On TCP one line each (from an established client, whose first
    /// piece would otherwise complete its opening early), on WebSocket one
    /// text message each.
    pub(super) fn fragmented_write(
        &mut self,
        slot: usize,
        out: &Outgoing,
        publish: bool,
    ) -> Option<(Write, Option<Id>)> {
        let c = self.model.client(slot);
        let rosbridge = c.rosbridge();
        if out.split % 8 != 3 || (!rosbridge && !c.established) {
            return None;
        }
        // The failed messages it may still hold: their deadline not
        // passed by a second's margin (the hub drops them at its first
        // expiry after it).
        let timeout = self.limits.fragment_timeout;
        let now = self.offset;
        let margin = std::time::Duration::from_secs(1);
        let failed = &mut self.model.client_mut(slot).failed_fragments;
        failed.retain(|&d| d + margin > now);
        // At most half the gateway's bound on messages in flight.
        if failed.len() >= MAX_FRAGMENTED_IN_FLIGHT / 2 {
            return None;
        }
        let text = std::str::from_utf8(&out.content).ok()?;
        let n = 2 + usize::from(out.split / 8) % 3;
        let chars: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
        if chars.len() < n {
            return None;
        }
        let mut bounds: Vec<usize> = (0..n).map(|k| chars[k * chars.len() / n]).collect();
        bounds.push(text.len());
        // Unique in the run: a failed id stays in its table a while.
        let id = format!("\"frag-{}\"", self.counts.fragmented_sent);
        let max = self.limits.max_line_bytes;
        let cost = MESSAGE_OVERHEAD + id.len() + text.len() + n * PIECE_OVERHEAD;
        if cost > max {
            return None;
        }
        let piece = |k: usize| Piece {
            data: &text[bounds[k]..bounds[k + 1]],
            num: k as u64,
            total: n as u64,
        };
        let malformed = publish && self.rng.below(3) == 0;
        let pieces: Vec<Piece<'_>> = if malformed {
            let first = piece(0);
            let bad = match self.rng.below(3) {
                0 => Piece {
                    num: n as u64,
                    ..piece(1)
                },
                1 => Piece {
                    total: n as u64 + 1,
                    ..piece(1)
                },
                _ => first,
            };
            vec![first, bad]
        } else {
            let mut order: Vec<usize> = (0..n).collect();
            if out.split & 64 != 0 {
                order.reverse();
            }
            order.into_iter().map(piece).collect()
        };
        let mut frames = Vec::with_capacity(pieces.len());
        for p in pieces {
            let mut line = Vec::new();
            p.write(&mut line, rosgate_wire::Raw::from_valid_json(&id));
            if line.len() > max {
                return None;
            }
            if rosbridge {
                line.pop();
                let mut f = Vec::new();
                client::push_frame(&mut f, true, OP_TEXT, &line, Some(self.mask()));
                let unit = Unit::Data {
                    len: f.len(),
                    payload: line.len(),
                    fin: true,
                };
                frames.push((f, unit));
            } else {
                let unit = Unit::Line(line.len());
                frames.push((line, unit));
            }
        }
        let refused = malformed.then(|| {
            let deadline = self.offset + timeout;
            self.model.client_mut(slot).failed_fragments.push(deadline);
            parse_id(id.clone())
        });
        if rosbridge {
            return Some((self.ws_write(slot, frames, out.split >> 2), refused));
        }
        let mut bytes = Vec::new();
        let mut units = Vec::new();
        for (l, u) in frames {
            bytes.extend_from_slice(&l);
            units.push(u);
        }
        let total = bytes.len();
        let cuts = match out.split >> 6 {
            0 => vec![total],
            k => vec![total * usize::from(k) / 4, total],
        };
        let w = Write {
            bytes,
            units,
            cuts,
            handshake: None,
        };
        Some((w, refused))
    }
}
