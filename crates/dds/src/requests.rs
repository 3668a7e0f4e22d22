//! The link's queue (`rosgate_peers::ros2::queue`) is typed by how a
//! request queued in it is answered. The DDS side queues none there: a
//! ROS 2 client's request comes with the discovery events (`pump.rs`),
//! is decoded on the loop thread and given to the link with its DDS
//! identity (`shell/calls.rs`). So that type has no value.

use rosgate_peers::ros2::queue::Refuse;

/// A request handle that cannot exist (see the module docs).
pub enum NoRequests {}

impl Refuse for NoRequests {
    fn refuse(self, _why: String) {
        match self {}
    }
}
