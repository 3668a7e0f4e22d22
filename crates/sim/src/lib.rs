//! Deterministic simulation of rosgate's sans-io core, the
//! [`rosgate_core::Hub`]: a driver feeds it client [`Action`]s on a fake
//! clock, an independent model predicts every line each client must
//! receive and every table the hub must hold, and the invariants are
//! checked after every step.
//!
//! Used by `tests/sim.rs` (actions drawn from a seeded RNG, [`run_seed`]),
//! by the `core` fuzz target (actions decoded from bytes,
//! [`actions_from_bytes`]) and, through [`fuzzing`], by every fuzz target
//! and the `tests/replay.rs` corpus replay.
//!
//! | module | owns |
//! |---|---|
//! | `rng` | [`Rng`] (seeded schedules) and [`Bytes`] (fuzzer input fields) |
//! | `actions` | [`SimConfig`], [`Action`], [`Req`]; drawing them, decoding them from bytes and back |
//! | `requests` | the JSON text of each request in its style, and its model effect |
//! | `model` | the expected state: clients, owed lines, services, calls |
//! | `driver` | [`Sim`]: one loop turn per action (feed, expire, flush, free), [`run_seed`] |
//! | `effects` | what each accepted request does to the model as it is fed |
//! | `reader` | the clients' side: received lines crossed off against the model |
//! | `checks` | the invariants: tables, quiescence, closes, [`Sim::finish`] |
//! | [`fuzzing`], [`scan_parity`] | the fuzz targets' checks |
//!
//! The model predicts, independently of the hub's tables:
//! - who subscribes/advertises what, who provides each service, which calls
//!   are in flight and when each times out (the timer wheel rounds deadlines
//!   up to the next tick, counted from the hub's creation);
//! - every line each client must receive: statuses (matched by id), forwarded
//!   calls (in order, with their args), responses (matched by the caller's
//!   id, which is unique per caller: exactly one per call, success with the
//!   provider's payload or a `result:false` failure) and publish frames (in
//!   order, exact bytes; frames missing from a slow reader must be exactly
//!   the bytes the hub counted in `dropped_bytes` for it).
//!
//! Closes the hub decides (control overflow, write stall) are learned from
//! `take_closing` and validated: an overflow close needs more control bytes
//! queued than `max_control_bytes`; a stall close needs output pending
//! without progress for `write_stall`, and one is required once it has been
//! pending for `write_stall` plus the sweep interval.
//!
//! After every step the hub's tables (router topics and services, per
//! connection indexes, gauges) must equal the model's.

mod actions;
mod checks;
mod driver;
mod effects;
mod model;
mod reader;
mod requests;
mod rng;

pub mod fuzzing;
pub mod scan_parity;

pub use actions::{
    actions_from_bytes, actions_to_bytes, Action, Req, SimConfig, MAX_CLIENTS, SERVICES, TOPICS,
};
pub use checks::Violation;
pub use driver::{run_seed, Counts, Sim};
pub use rng::{Bytes, Rng};
