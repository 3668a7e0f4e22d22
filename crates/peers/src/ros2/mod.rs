//! The transport-neutral half of a ROS 2 shell: what every shell of the
//! ROS 2 link (`rosgate_ros2::link`) does the same way whether rmw_zenoh
//! over Zenoh (`rosgate-zenoh`'s `ros2/`) or DDS (`rosgate-dds`) carries
//! it. The link decides; a shell executes its actions with its transport
//! and uses these for the rest:
//! - [`queue`]: the events the network's threads hand the link (graph,
//!   samples within the loop's inbox budget, replies, ROS 2 clients'
//!   requests), bounded, drained in order each turn;
//! - [`edge`]: the link's deliveries turned into what the hub takes (lines,
//!   calls, goals, samples with their CDR, type checks), kept in order and
//!   handed over from the turn; CDR <-> JSON at the hub's edge;
//! - [`sync`]: after each turn, the link's registry, counters and graph
//!   into the hub;
//! - [`asks`]: what the hub asks a shell (subscriptions, publishes, calls
//!   and goals to ROS 2, what local clients provide and serve) as the
//!   link's events, only in the domains the shell bridges;
//! - [`exec`]: the link's actions dispatched to the shell's methods;
//! - [`answer`]: the link's answer to a ROS 2 client's request as the JSON
//!   of the response type.

pub mod answer;
pub mod asks;
pub mod edge;
pub mod exec;
pub mod goals;
pub mod queue;
pub mod sync;

/// The name introspection gives the rmw_zenoh ROS 2 graph's part of a
/// domain (where another gateway's id would be).
pub const ROS_GRAPH: &str = "ros2";

/// The name introspection gives the DDS ROS 2 graph's part of a domain,
/// beside [`ROS_GRAPH`] when a gateway joins both.
pub const DDS_GRAPH: &str = "dds";
