//! The link's one answer to a ROS 2 client's request as the JSON of the
//! request's response type, for the shell to encode as CDR and send the
//! way its transport replies (rmw_zenoh: a query's reply; DDS: a sample on
//! the `rr/` topic with the request's identity); and a node's answer to
//! the link's `~/get_type_description`, as the link's reply.

use rosgate_ros2::cdr;
use rosgate_ros2::link::{Answer, Reply, Stamp};
use rosgate_ros2::registry::Registry;
use serde_json::{json, Value};

/// A ROS 2 stamp as its JSON (`builtin_interfaces/Time`).
pub fn stamp_json(s: Stamp) -> Value {
    json!({"sec": s.0, "nanosec": s.1})
}

/// The answer as the JSON of `response_type` (`stamp`: when the request
/// came, a goal's acceptance), or the error to reply with.
pub fn answer_json(
    types: &Registry,
    response_type: &str,
    stamp: Stamp,
    answer: Answer,
) -> Result<Value, String> {
    Ok(match answer {
        Answer::Service(json) => {
            rosgate_ros2::json::from_str(std::str::from_utf8(&json).unwrap_or("null"))
                .unwrap_or_default()
        }
        Answer::Error(why) => return Err(why),
        Answer::Accepted(accepted) => json!({"accepted": accepted, "stamp": stamp_json(stamp)}),
        Answer::Result { status, payload } => {
            // No result (an unknown goal, an abort): the type's defaults.
            let result = match rosgate_ros2::json::from_slice(&payload) {
                Ok(v) if !payload.is_empty() => v,
                _ => cdr::default_json(types, response_type)
                    .map(|d| d["result"].clone())
                    .unwrap_or_default(),
            };
            json!({"status": status, "result": result})
        }
        Answer::Cancel { code, goals } => {
            let infos: Vec<Value> = goals
                .iter()
                .map(|(u, s)| json!({"goal_id": {"uuid": u.to_vec()}, "stamp": stamp_json(*s)}))
                .collect();
            json!({"return_code": code, "goals_canceling": infos})
        }
    })
}

/// A node's `~/get_type_description` response `v` (JSON of the response
/// type) for `ty`, as the link's reply: the description when the node gave
/// one (the link checks its hash).
pub fn described(node: &str, ty: &str, mut v: Value) -> Reply {
    if v["successful"] != true {
        rosgate_core::log!(
            Info,
            "ros2: {node} cannot describe {ty}: {}",
            v["failure_reason"].as_str().unwrap_or_default()
        );
        return Reply::Described(None);
    }
    Reply::Described(Some(v["type_description"].take()))
}
