//! The memory ledger: every byte clients make the gateway hold, kept as it
//! changes, against one global budget (P17, Redis `maxmemory-clients`).
//!
//! ```text
//! total = frames         shared topic frames alive, each counted once
//!                        however many queues hold it (OutQueue reports the
//!                        bytes it frees when it drops a last reference)
//!       + entries        what queue entries cost beyond their frames
//!                        (`out::ENTRY_COST` per topic entry per queue)
//!       + control        control bytes queued (statuses, calls, responses;
//!                        owned per connection)
//!       + input          partial lines / WebSocket messages buffered
//!       + calls          calls in flight: ids, names, table entries
//!                        (`Calls::bytes`)
//!       + registrations  topics, memberships, ids, services
//!                        (`Registry::bytes`), declared nodes
//!                        (`Nodes::bytes`), parameters owned and held
//!                        (`ParamStore::bytes`)
//!       + federation     what other gateways and ROS 2 nodes announced:
//!                        their graphs kept here (`RemoteGraph::bytes`),
//!                        and what the federation shell reports it holds
//!                        (its tables, samples waiting in the inbox)
//!       + tf             TF buffers and subscriptions (`hub/tf.rs`)
//! ```
//!
//! Above the budget the hub sheds topic data first (queued frames of the
//! connections holding the most topic bytes), then closes the connections
//! holding the most of the rest (control, input, their calls,
//! registrations, nodes and the parameters they own), down to [`TARGET_NUM`]/[`TARGET_DEN`] of the budget so
//! that enforcement does not run again at once.
//!
//! Invariants:
//! - each field equals the sum it names at every point between two hub
//!   operations (the simulation checks `frames` against the distinct frames
//!   in all queues);
//! - enforcement costs O(connections holding data) and runs only when the
//!   total is over the budget.

/// After enforcement the total is at most this fraction of the budget.
pub const TARGET_NUM: usize = 7;
/// See [`TARGET_NUM`].
pub const TARGET_DEN: usize = 8;

/// The bytes the hub accounts itself; calls and registrations are counted
/// by their owners.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Ledger {
    pub frames: usize,
    /// Queue entries' cost beyond their frames, summed over queues.
    pub entries: usize,
    pub control: usize,
    pub input: usize,
    /// Topic and control bytes queued, summed over connections (a shared
    /// frame counts once per queue): the `queued_bytes` gauge.
    pub queued: usize,
}

impl Ledger {
    pub(crate) fn add_input(&mut self, delta: isize) {
        self.input = self.input.saturating_add_signed(delta);
    }

    /// A queue's entry cost went from `before` to `after`.
    pub(crate) fn entries_changed(&mut self, before: usize, after: usize) {
        self.entries = self.entries + after - before;
    }
}

/// One reading of everything the budget covers.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct MemoryUse {
    pub frames: usize,
    pub entries: usize,
    pub control: usize,
    pub input: usize,
    pub calls: usize,
    pub registrations: usize,
    /// Held for other gateways and ROS 2 nodes: bounded by the federation's
    /// own limits (docs/limits.md), as no connection holds it.
    pub federation: usize,
    /// TF buffers and subscriptions (`hub/tf.rs`): bounded per domain by
    /// `MAX_TF_BUFFER_BYTES`, as no connection holds them.
    pub tf: usize,
}

impl MemoryUse {
    pub fn total(&self) -> usize {
        self.frames
            + self.entries
            + self.control
            + self.input
            + self.calls
            + self.registrations
            + self.federation
            + self.tf
    }
}
