//! A client's fragmented messages (rosbridge's `fragment` op,
//! ROSBRIDGE_PROTOCOL.md §3.1.1): each connection's pieces are
//! reassembled by its own [`Reassembly`] (`crates/wire/src/fragment.rs`,
//! which owns the bounds), and a whole message goes through the normal
//! path (`Hub::on_message`) as if it had been one line or frame.
//!
//! rosbridge does the same (rosbridge_library's
//! `capabilities/defragmentation.py` hands the joined text to
//! `protocol.incoming`), with one table for all clients, a timeout that
//! restarts at every piece, and no bound on size or count; here:
//! - the table is per connection: one client's pieces never complete,
//!   fail or expire another's message;
//! - a refused piece (see [`FragmentError`]) gets an error status with the
//!   piece's `id` and fails its whole message: nothing of it is delivered;
//! - a message incomplete at its deadline (`--fragment-timeout-ms` from
//!   its first piece) is dropped and its sender gets an error status with
//!   its `id`;
//! - a reassembled message that is itself a `fragment` is refused (one
//!   level: a message cannot multiply itself through nested pieces), and
//!   so is a piece on a federation bridge (its lines come whole, outside
//!   any read);
//! - the bytes held are partial input: the connection's `input_held`, in
//!   the memory ledger's `input` (`memory.rs`), recounted after every
//!   read (`Conn::after_input`) and every expiry here.
//!
//! Invariants:
//! - every connection with a fragment table is in [`Fragments::conns`]
//!   (with its generation), so the expiry finds every deadline; the list
//!   holds at most one entry per connection generation and loses an entry
//!   when its table empties or its connection goes;
//! - [`Fragments::due`] is at or before every table's next deadline, so the
//!   loop wakes for each; the expiry pass costs O(connections with
//!   fragments in flight) and runs only when one is due.

use std::time::Instant;

use rosgate_wire::fragment::{FragmentError, Reassembly};
use rosgate_wire::Raw;

use super::Hub;
use crate::conn::ConnRef;
use crate::counters::{Counter, ErrorCode};

/// The connections with a fragment table, and the earliest deadline.
#[derive(Debug, Default)]
pub(super) struct Fragments {
    conns: Vec<ConnRef>,
    due: Option<Instant>,
    /// A reassembled message is being handled (a `fragment` inside it is
    /// refused).
    reassembling: bool,
}

impl Fragments {
    /// When the expiry has work to do.
    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.due
    }

    fn note_deadline(&mut self, t: Option<Instant>) {
        if let Some(t) = t {
            self.due = Some(self.due.map_or(t, |d| d.min(t)));
        }
    }
}

/// One `fragment` request: its id (required by the decoder) and piece.
pub(super) struct Piece<'a> {
    pub id: Option<Raw<'a>>,
    pub data: &'a str,
    pub num: u64,
    pub total: u64,
}

impl Hub {
    /// Takes one piece from `me`; handles the message it completes.
    pub(super) fn on_fragment(&mut self, me: ConnRef, p: Piece<'_>, now: Instant) {
        let Some(id) = p.id else {
            return;
        };
        let id_bytes = Some(id.get().as_bytes());
        if self.fragments.reassembling {
            let msg = "fragment: a fragmented message may not itself be a fragment; refused";
            return self.error_with_id(me, ErrorCode::BadFragment, msg, id_bytes, now);
        }
        let (max, timeout) = (self.limits.max_line_bytes, self.limits.fragment_timeout);
        let Some(c) = self.live_mut(me) else {
            return;
        };
        if c.is_bridge() {
            // A peer's lines reach a bridge outside any read, where the
            // ledger is not recounted: whole messages only.
            let msg = "fragment: not taken from another gateway";
            return self.error_with_id(me, ErrorCode::BadFragment, msg, id_bytes, now);
        }
        let fresh = !c.has_fragment_table();
        let table = c.fragments_mut(|| Reassembly::new(max, timeout));
        let got = table.piece(id.get(), p.data, p.num, p.total, now);
        let deadline = table.next_deadline();
        if fresh {
            self.fragments.conns.push(me);
        }
        self.fragments.note_deadline(deadline);
        match got {
            Ok(None) => self.counters.inc(Counter::FragmentsIn),
            Ok(Some(text)) => {
                self.counters.inc(Counter::FragmentsIn);
                self.counters.inc(Counter::FragmentedIn);
                self.fragments.reassembling = true;
                self.on_message(me, text.as_bytes(), now);
                self.fragments.reassembling = false;
            }
            Err(e) => {
                let msg = refusal(e, p.num, p.total, max);
                self.error_with_id(me, ErrorCode::BadFragment, &msg, id_bytes, now);
            }
        }
    }

    /// Drops the fragmented messages past their deadline, telling their
    /// senders; called by `expire` once per turn.
    pub(super) fn expire_fragments(&mut self, now: Instant) {
        if self.fragments.due.is_none_or(|d| d > now) {
            return;
        }
        let listed = std::mem::take(&mut self.fragments.conns);
        self.fragments.due = None;
        let timeout_ms = self.limits.fragment_timeout.as_millis();
        let mut expired: Vec<(ConnRef, String)> = Vec::new();
        for r in listed {
            let Some(c) = self.conns.get_mut(r.key as usize) else {
                continue;
            };
            if c.gen() != r.gen {
                continue;
            }
            let Some(table) = c.fragments_in_flight() else {
                c.drop_empty_fragments();
                continue;
            };
            table.expire_each(now, |id| expired.push((r, id.to_owned())));
            let next = table.next_deadline();
            let delta = c.account_input();
            self.mem.add_input(delta);
            c.drop_empty_fragments();
            if next.is_some() {
                self.fragments.conns.push(r);
                self.fragments.note_deadline(next);
            }
        }
        for (r, id) in expired {
            self.counters.inc(Counter::FragmentsExpired);
            let msg = format!(
                "fragment: the fragmented message was not complete {timeout_ms} ms after its \
                 first piece; its pieces were dropped"
            );
            self.error_with_id(r, ErrorCode::BadFragment, &msg, Some(id.as_bytes()), now);
        }
    }
}

/// The error status's text for a refused piece.
fn refusal(e: FragmentError, num: u64, total: u64, max: usize) -> String {
    let tail = match e {
        FragmentError::TooManyInFlight => format!(
            " (at most {} per connection); piece refused",
            rosgate_wire::fragment::MAX_FRAGMENTED_IN_FLIGHT
        ),
        FragmentError::TooLarge => format!(" ({max} bytes); the message is dropped"),
        FragmentError::IdTooLong => "; piece refused".to_owned(),
        _ => "; the message is dropped".to_owned(),
    };
    format!("fragment {num} of {total}: {}{tail}", e.reason())
}
