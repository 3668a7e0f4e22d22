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
pub use math::{Quat, Transform, Vec3};
