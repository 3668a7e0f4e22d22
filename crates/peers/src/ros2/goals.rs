//! Goals as every ROS 2 shell maps them, whatever carries the action's
//! services and topics: a ROS 2 client's request to a goal service (JSON
//! of its request type) as the link's [`Request`], a local action
//! server's feedback or end as the link's [`GoalUpdate`], and the JSON of
//! the feedback and status messages the link asks to put.

use rosgate_ros2::action::{self, status};
use rosgate_ros2::cdr;
use rosgate_ros2::link::{GoalUpdate, Request, Stamp};
use rosgate_ros2::registry::Registry;
use serde_json::{json, Value};

use super::answer::stamp_json;

/// Now, as a ROS 2 time stamp (the shell's clock, not the link's).
pub fn stamp_now() -> Stamp {
    let ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
    (
        ns.div_euclid(1_000_000_000),
        u32::try_from(ns.rem_euclid(1_000_000_000)).unwrap_or(0),
    )
}

/// A ROS 2 client's request `v` to goal service `part` (`action::SEND_GOAL`,
/// `GET_RESULT`, else `cancel_goal`), received at `stamp`.
pub fn goal_request(part: &str, v: &Value, stamp: Stamp) -> Result<Request, String> {
    Ok(match part {
        action::SEND_GOAL => {
            let uuid = action::goal_id_of(v).ok_or("a goal without a goal id")?;
            Request::SendGoal {
                uuid,
                stamp,
                payload: v["goal"].to_string().into_bytes(),
            }
        }
        action::GET_RESULT => Request::GetResult {
            uuid: action::goal_id_of(v).unwrap_or_default(),
        },
        _ => {
            let info = &v["goal_info"];
            Request::CancelGoal {
                uuid: action::goal_id_of(info).unwrap_or_default(),
                before: (
                    info["stamp"]["sec"].as_i64().unwrap_or(0),
                    u32::try_from(info["stamp"]["nanosec"].as_u64().unwrap_or(0)).unwrap_or(0),
                ),
            }
        }
    })
}

/// A local action server's feedback (`end` `None`) or end (status, ok)
/// with `values`, for the link; a result that does not fit `result_type`
/// (the get_result response type) ends the goal aborted with the type's
/// defaults.
pub fn goal_update(
    types: &Registry,
    result_type: Option<&str>,
    values: &str,
    end: Option<(i64, bool)>,
) -> GoalUpdate {
    let values: Value = rosgate_ros2::json::from_str(values).unwrap_or_default();
    let Some((st, ok)) = end else {
        return GoalUpdate::Feedback(values.to_string().into_bytes());
    };
    let mut st = st;
    if !ok || !(status::SUCCEEDED..=status::ABORTED).contains(&st) {
        st = status::ABORTED;
    }
    // A result that does not fit the type: aborted, with the type's
    // defaults (the link's reply fills them in).
    let fits = result_type
        .is_none_or(|ty| cdr::encode(types, ty, &json!({"status": st, "result": values})).is_ok());
    let payload = if fits {
        values.to_string().into_bytes()
    } else {
        if st == status::SUCCEEDED {
            st = status::ABORTED;
        }
        Vec::new()
    };
    GoalUpdate::End {
        status: i8::try_from(st).unwrap_or(status::ABORTED as i8),
        payload,
    }
}

/// The feedback message of goal `uuid` (`payload`: the feedback's JSON).
pub fn feedback_json(uuid: [u8; 16], payload: &[u8]) -> Value {
    let feedback: Value = rosgate_ros2::json::from_slice(payload).unwrap_or_default();
    json!({"goal_id": {"uuid": uuid.to_vec()}, "feedback": feedback})
}

/// An action's status array (what rclcpp's status topic carries).
pub fn status_json(goals: &[([u8; 16], Stamp, i8)]) -> Value {
    let list: Vec<Value> = goals
        .iter()
        .map(|(u, s, st)| {
            json!({
                "goal_info": {"goal_id": {"uuid": u.to_vec()}, "stamp": stamp_json(*s)},
                "status": st,
            })
        })
        .collect();
    json!({ "status_list": list })
}
