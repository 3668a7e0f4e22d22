//! What every peer network of rosgate shares, whatever carries it (Zenoh
//! in `rosgate-zenoh`: other gateways and ROS 2 over rmw_zenoh; DDS in
//! `rosgate-dds`: ROS 2 over RustDDS), so that only the transport differs
//! between them:
//! - [`Peer`] (`peer.rs`): what the loop asks of each kind of peer;
//! - [`Driver`] (`driver.rs`): one loop turn of a network's peers (the
//!   hub's interest changes, the bridges' topic data, the hub's typed
//!   messages, each to the peer it names);
//! - [`Inbox`] (`inbox.rs`): the hand-off from a network's threads to the
//!   loop and the budget of the samples waiting there;
//! - `lines.rs`: the bridge's failure and abort lines;
//! - [`ros2`]: the transport-neutral half of the ROS 2 shell (the link's
//!   event queue, the hub's edge with CDR <-> JSON, the graph and types
//!   into the hub, answers to ROS 2 clients).
//!
//! Nothing here opens a socket or a session: a gateway with no Zenoh flag
//! opens no Zenoh session, whatever else it joins.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod driver;
mod inbox;
pub mod lines;
mod peer;
pub mod ros2;

pub use driver::{provider_id, Driver, DRAIN_BYTES_PER_TURN, STATUS_INTERVAL_MS};
pub use inbox::{Inbox, Job, ToLoop, INBOX_BYTES, MAX_PENDING_SAMPLES};
pub use peer::{Cdr, Peer, Put};
