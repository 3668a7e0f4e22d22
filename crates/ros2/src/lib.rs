//! ROS 2 interfaces without a ROS installation (issue 17), sans-io:
//! everything here takes bytes or text and returns values; nothing touches
//! a socket, a clock or Zenoh.
//!
//! - [`action`]: an action's services and topics under `/_action/`, and
//!   the JSON of their requests and goal ids;
//! - [`model`]: what a message type is (fields, arrays, bounds, defaults);
//! - [`names`]: the names a ROS 2 graph announces, checked as rmw does;
//! - [`parse`]: `.msg`, `.srv` and `.action` text into that model;
//! - [`registry`]: the types known to a gateway (bundled plus
//!   `--interfaces DIR`), looked up by any of the names clients use;
//! - [`rihs`]: RIHS01 type hashes (REP 2011), as real nodes advertise them;
//! - [`cdr`]: JSON (rosbridge's shape) <-> CDR, checked against the type;
//! - [`json`]: JSON text into values with exact floats, for [`cdr`]'s encoder;
//! - [`describe`]: types learned from a node's `~/get_type_description`;
//! - [`fuzzing`]: the fuzz target `ros2`'s check (CDR, tokens, keys, attachments);
//! - [`link`]: the ROS 2 link as a state machine (graph, calls, goals,
//!   types learned), events in and actions out, whatever the transport;
//! - [`rmw`]: rmw_zenoh's key expressions, liveliness tokens, QoS text,
//!   attachments and GIDs.
//!
//! Invariants:
//! - no input panics: bad definitions, bad JSON and bad CDR are errors that
//!   name the file, field or offset;
//! - decoding is bounded by the input: a length prefix larger than the
//!   bytes left is an error before anything is allocated for it.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod action;
pub mod cbor_typed;
pub mod cdr;
pub mod describe;
pub mod fuzzing;
pub mod json;
pub mod link;
pub mod model;
pub mod names;
pub mod parse;
pub mod registry;
pub mod rihs;
pub mod rmw;
