//! ROS 2 actions as rmw_zenoh carries them (sans-io): an action `/a` of
//! type `pkg/action/A` is three services and two topics under
//! `/a/_action/`, each an ordinary rmw_zenoh entity of a type rosidl
//! generates from the `.action` file:
//!
//! | entity | name | type |
//! |---|---|---|
//! | service | `/a/_action/send_goal` | `pkg/action/A_SendGoal` (`{goal_id, goal}` -> `{accepted, stamp}`) |
//! | service | `/a/_action/get_result` | `pkg/action/A_GetResult` (`{goal_id}` -> `{status, result}`) |
//! | service | `/a/_action/cancel_goal` | `action_msgs/srv/CancelGoal` |
//! | topic | `/a/_action/feedback` | `pkg/action/A_FeedbackMessage` (`{goal_id, feedback}`) |
//! | topic | `/a/_action/status` | `action_msgs/msg/GoalStatusArray` |
//!
//! A goal is named by a 16-byte UUID (`unique_identifier_msgs/UUID`) its
//! client chooses. This module names the entities and builds and reads the
//! JSON of those requests (in rosbridge's shape, for [`crate::cdr`]).

use base64::Engine;
use serde_json::{json, Value};

/// What an action's entities are named under.
pub const INFIX: &str = "/_action/";

/// The services and topics of an action, by their suffix after the action
/// name.
pub const SEND_GOAL: &str = "/_action/send_goal";
pub const GET_RESULT: &str = "/_action/get_result";
pub const CANCEL_GOAL: &str = "/_action/cancel_goal";
pub const FEEDBACK: &str = "/_action/feedback";
pub const STATUS: &str = "/_action/status";

/// The cancel service's type, the same for every action.
pub const CANCEL_TYPE: &str = "action_msgs/srv/CancelGoal";
/// The status topic's type, the same for every action.
pub const STATUS_TYPE: &str = "action_msgs/msg/GoalStatusArray";

/// `action_msgs/msg/GoalStatus` values.
pub mod status {
    pub const UNKNOWN: i64 = 0;
    pub const ACCEPTED: i64 = 1;
    pub const EXECUTING: i64 = 2;
    pub const CANCELING: i64 = 3;
    pub const SUCCEEDED: i64 = 4;
    pub const CANCELED: i64 = 5;
    pub const ABORTED: i64 = 6;
}

/// `action_msgs/srv/CancelGoal` return codes.
pub mod cancel_code {
    pub const NONE: i64 = 0;
    pub const REJECTED: i64 = 1;
    pub const UNKNOWN_GOAL_ID: i64 = 2;
    pub const GOAL_TERMINATED: i64 = 3;
}

/// The action an entity belongs to and its part: (`/a`, `/_action/status`)
/// for `/a/_action/status`; `None` for a name that is none of the five.
pub fn action_part(name: &str) -> Option<(&str, &'static str)> {
    [SEND_GOAL, CANCEL_GOAL, GET_RESULT, FEEDBACK, STATUS]
        .into_iter()
        .find_map(|part| {
            let a = name.strip_suffix(part)?;
            (!a.is_empty() && !a.ends_with('/')).then_some((a, part))
        })
}

/// The action a service is the goal service of: `/a` for
/// `/a/_action/send_goal`.
pub fn action_of_send_goal(service: &str) -> Option<&str> {
    service
        .strip_suffix(SEND_GOAL)
        .filter(|a| !a.is_empty() && !a.ends_with('/'))
}

/// The action type a goal service's type belongs to:
/// `pkg/action/A` for `pkg/action/A_SendGoal`.
pub fn action_type_of_send_goal(ros_type: &str) -> Option<&str> {
    let t = ros_type.strip_suffix("_SendGoal")?;
    t.contains("/action/").then_some(t)
}

/// A goal id: 16 bytes from `seed`, which the caller makes unique (the
/// gateway's Zenoh id, a counter, the time). Marked as a random (version
/// 4, RFC 4122 variant) UUID, as rclcpp's and rclpy's are.
pub fn uuid(seed: &str) -> [u8; 16] {
    let mut u = xxhash_rust::xxh3::xxh3_128(seed.as_bytes()).to_le_bytes();
    u[6] = (u[6] & 0x0f) | 0x40;
    u[8] = (u[8] & 0x3f) | 0x80;
    u
}

fn uuid_json(uuid: &[u8; 16]) -> Value {
    json!({ "uuid": uuid.to_vec() })
}

/// A goal id as rosbridge's JSON of `unique_identifier_msgs/UUID` shows
/// it (`uint8[16]` is base64).
pub fn uuid_text(uuid: &[u8; 16]) -> String {
    base64::engine::general_purpose::STANDARD.encode(uuid)
}

/// `A_SendGoal` request: `{goal_id, goal}`.
pub fn send_goal_request(uuid: &[u8; 16], goal: Value) -> Value {
    json!({ "goal_id": uuid_json(uuid), "goal": goal })
}

/// `A_GetResult` request: `{goal_id}`.
pub fn get_result_request(uuid: &[u8; 16]) -> Value {
    json!({ "goal_id": uuid_json(uuid) })
}

/// `action_msgs/srv/CancelGoal` request for one goal (a zero stamp: not
/// "every goal accepted before").
pub fn cancel_request(uuid: &[u8; 16]) -> Value {
    json!({ "goal_info": { "goal_id": uuid_json(uuid), "stamp": {"sec": 0, "nanosec": 0} } })
}

/// The goal id in a decoded message's `goal_id` field (a base64 string,
/// as the codec writes it, or a list of 16 numbers).
pub fn goal_id_of(msg: &Value) -> Option<[u8; 16]> {
    let u = &msg.get("goal_id")?.get("uuid")?;
    let bytes = match u {
        Value::String(s) => base64::engine::general_purpose::STANDARD.decode(s).ok()?,
        Value::Array(a) => a
            .iter()
            .map(|x| x.as_u64().and_then(|x| u8::try_from(x).ok()))
            .collect::<Option<Vec<u8>>>()?,
        _ => return None,
    };
    bytes.try_into().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cdr;
    use crate::registry::Registry;

    #[test]
    fn names_of_an_actions_entities() {
        assert_eq!(
            action_of_send_goal("/fibonacci/_action/send_goal"),
            Some("/fibonacci")
        );
        assert_eq!(action_of_send_goal("/_action/send_goal"), None);
        assert_eq!(action_of_send_goal("/fibonacci/send_goal"), None);
        assert_eq!(
            action_type_of_send_goal("example_interfaces/action/Fibonacci_SendGoal"),
            Some("example_interfaces/action/Fibonacci")
        );
        assert_eq!(action_type_of_send_goal("pkg/srv/X_SendGoal"), None);
    }

    #[test]
    fn goal_ids_are_version_4_uuids_distinct_per_seed() {
        let (a, b) = (uuid("zid/1"), uuid("zid/2"));
        assert_ne!(a, b);
        assert_eq!(a[6] >> 4, 4);
        assert_eq!(a[8] >> 6, 2);
    }

    /// The requests encode as their rosidl types, and the goal id comes
    /// back out of what the codec decodes.
    #[test]
    fn requests_encode_and_goal_ids_decode() {
        let r = Registry::bundled();
        let u = uuid("x");
        let send = send_goal_request(&u, json!({"order": 5}));
        let b = cdr::encode(
            &r,
            "example_interfaces/action/Fibonacci_SendGoal_Request",
            &send,
        )
        .expect("encodes");
        // header, 16 bytes of goal id, int32 order
        assert_eq!(b.len(), 4 + 16 + 4);
        assert_eq!(&b[4..20], &u);
        assert_eq!(&b[20..], &5i32.to_le_bytes());
        let mut back = Vec::new();
        cdr::decode_json(
            &r,
            "example_interfaces/action/Fibonacci_SendGoal_Request",
            &b,
            &mut back,
        )
        .expect("decodes");
        let v: Value = serde_json::from_slice(&back).expect("JSON");
        assert_eq!(v["goal_id"]["uuid"], uuid_text(&u));
        assert_eq!(goal_id_of(&v), Some(u));
        assert_eq!(goal_id_of(&send), Some(u), "number lists too");
        let get = get_result_request(&u);
        let b = cdr::encode(
            &r,
            "example_interfaces/action/Fibonacci_GetResult_Request",
            &get,
        )
        .expect("encodes");
        assert_eq!(&b[4..], &u);
        let b = cdr::encode(
            &r,
            "action_msgs/srv/CancelGoal_Request",
            &cancel_request(&u),
        )
        .expect("encodes");
        assert_eq!(b.len(), 4 + 16 + 8);
        assert_eq!(goal_id_of(&json!({"goal_id": {"uuid": "AAAA"}})), None);
        assert_eq!(goal_id_of(&json!({"goal_id": {"uuid": [1, 2, 300]}})), None);
    }
}
