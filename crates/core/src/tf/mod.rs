//! TF for web clients: the gateway as tf2_web_republisher
//! (github.com/RobotWebTools/tf2_web_republisher). Sans-io like the rest
//! of the core: samples and `now` come in, transforms to send go out; the
//! hub (`hub/tf.rs`) wires them to topics, services and actions.
//!
//! | module | owns |
//! |---|---|
//! | [`math`] | `Transform` (translation + unit quaternion): composition, inverse, interpolation (lerp + slerp) |
//! | [`buffer`] | `TfBuffer`: one domain's frames, their parents and bounded histories; lookups along the tree |
//! | [`msg`] | the JSON of `tf2_msgs/TFMessage`, `geometry_msgs/TransformStamped` and the republisher's requests |
//! | [`republisher`] | `Republisher`: the subscriptions (topic, ROS 1 goal, ROS 2 goal), their rates (a timer wheel), thresholds and warnings |
//!
//! See docs/tf.md.

pub mod buffer;
pub mod math;
pub mod msg;
pub mod republisher;

pub use buffer::{LookupError, TfBuffer};

// The names the gateway serves TF under (`hub/tf.rs`), here so that the
// hub's listings (`hub/rosapi.rs`) name them without depending on it.
/// The republisher's service (roslibpy's TFClient).
pub const REPUBLISH_TFS_SERVICE: &str = "/republish_tfs";
/// Its type.
pub const REPUBLISH_TFS_TYPE: &str = "tf2_web_republisher/RepublishTFs";
/// The republisher's action, ROS 1 (topics under it) and ROS 2.
pub const TF_ACTION: &str = "/tf2_web_republisher";
/// The ROS 2 action's type.
pub const TF_ACTION_TYPE: &str = "tf2_web_republisher_interfaces/action/TFSubscription";
/// The topics read.
pub const TF_TOPIC: &str = "/tf";
pub const TF_STATIC_TOPIC: &str = "/tf_static";
/// The gateway's own service listing a domain's frames (the CLI's `tf
/// frames`, the dashboard).
pub const TF_FRAMES_SERVICE: &str = "/rosgate/tf_frames";

pub use math::{Quat, Transform, Vec3};
