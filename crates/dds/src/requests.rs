//! ROS 2 clients' requests to what this gateway offers over DDS: not
//! carried yet (this slice bridges the graph and topics; services and
//! actions over DDS are issue 26's next step, docs/ros2.md). The link's
//! queue is typed by how a request is answered; with no request ever
//! queued, that type has no value.

use rosgate_peers::ros2::queue::Refuse;

/// A request handle that cannot exist (see the module docs).
pub enum NoRequests {}

impl Refuse for NoRequests {
    fn refuse(self, _why: String) {
        match self {}
    }
}
