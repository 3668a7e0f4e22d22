//! The bridge's answer lines a peer hands the hub when a call or goal it
//! carries ends without the provider's own answer (a failure, an abort):
//! rosbridge's `service_response` and `action_result` ops, with the call's
//! or goal's id as the JSON it was sent with.

/// A failed `service_response` for call `id` with `why`.
pub fn failure_line(service: &str, id: &str, why: &str) -> String {
    format!(
        "{{\"op\":\"service_response\",\"service\":{},\"values\":{},\"result\":false,\"id\":{id}}}",
        serde_json::Value::from(service),
        serde_json::Value::from(why)
    )
}

/// An aborted `action_result` (status 6) for goal `id` with `why`.
pub fn aborted_line(action: &str, id: &str, why: &str) -> String {
    // Whoever aborts a goal says why where an operator looks (`--log-level
    // debug`), not only in the result the client may not print.
    rosgate_core::log!(Debug, "goal {id} of {action} aborted: {why}");
    format!(
        "{{\"op\":\"action_result\",\"action\":{},\"values\":{},\"status\":6,\"result\":false,\"id\":{id}}}",
        serde_json::Value::from(action),
        serde_json::Value::from(why)
    )
}
