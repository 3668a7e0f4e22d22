//! ROS 2 clients' queries the link has been given, kept by the loop until
//! the link's one `Reply` for each ([`Replying`]), and that reply
//! executed: CDR of the request's response type, echoing its sequence
//! number and client GID (rmw_zenoh matches replies by them), or an error
//! reply.
//!
//! Invariant: a query is replied to at most once (the reply consumes it);
//! the link answers each query it is given exactly once.

use rosgate_peers::ros2::answer::answer_json;
use rosgate_ros2::cdr;
use rosgate_ros2::link::{self, Answer};
use rosgate_ros2::rmw::Attachment;
use zenoh::query::Query;
use zenoh::Wait;

use std::sync::Arc;

use rosgate_ros2::registry::Registry;

use super::{unix_ns, RosLink};

/// A ROS 2 client's query waiting for the link's one reply: what the
/// reply is encoded as and must echo.
pub(super) struct Replying {
    pub(super) query: Query,
    /// The types the request was decoded by (the link's when the service
    /// was offered), which the answer is encoded by.
    pub(super) types: Arc<Registry>,
    /// The response's ROS type (CDR), for a service's or goal service's
    /// answer.
    pub(super) response_type: String,
    pub(super) seq: i64,
    pub(super) gid: [u8; 16],
    /// When the request came (a goal's acceptance stamp).
    pub(super) stamp: link::Stamp,
}

impl Replying {
    /// Replies `v` as CDR of the response type, echoing the request's
    /// sequence number and client GID (an error reply when it does not
    /// encode).
    pub(super) fn reply_json(self, v: &serde_json::Value) {
        match cdr::encode(&*self.types, &self.response_type, v) {
            Ok(bytes) => {
                let att = Attachment {
                    seq: self.seq,
                    timestamp_ns: unix_ns(),
                    gid: self.gid,
                };
                let _ = self
                    .query
                    .reply(self.query.key_expr().clone(), bytes)
                    .attachment(att.encode().to_vec())
                    .wait();
            }
            Err(e) => {
                let why = format!("the answer is not {}: {e}", self.response_type);
                rosgate_core::log!(Warn, "ros2: {why}");
                self.error(why);
            }
        }
    }

    pub(super) fn error(self, why: String) {
        let _ = self.query.reply_err(why).wait();
    }
}

impl RosLink {
    /// The link's one answer to a ROS 2 client's request `query`.
    pub(super) fn exec_reply(&mut self, query: link::InQuery, answer: Answer) {
        let Some(to) = self.replying.remove(&query) else {
            return;
        };
        match answer_json(&to.types, &to.response_type, to.stamp, answer) {
            Ok(v) => to.reply_json(&v),
            Err(why) => to.error(why),
        }
    }
}
