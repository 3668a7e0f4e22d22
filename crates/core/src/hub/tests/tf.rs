//! The gateway's tf2_web_republisher (`hub/tf.rs`) on a fake clock: the
//! lazy `/tf` tap and the ROS 2 graph's interest, ticks at the rate, and
//! the end of everything a closing connection held.

use super::*;

fn tf_msg(parent: &str, child: &str, sec: i64, x: f64) -> String {
    serde_json::json!({"transforms": [{
        "header": {"stamp": {"sec": sec, "nanosec": 0}, "frame_id": parent},
        "child_frame_id": child,
        "transform": {"translation": {"x": x, "y": 0.0, "z": 0.0},
                      "rotation": {"x": 0.0, "y": 0.0, "z": 0.0, "w": 1.0}}}]})
    .to_string()
}

fn goal(t: &mut T, c: u32, id: &str, sources: &[&str], target: &str, rate: f64) {
    let line = serde_json::json!({"op": "send_action_goal", "id": id, "action": "/tf2_web_republisher",
        "action_type": "tf2_web_republisher_interfaces/action/TFSubscription", "feedback": true,
        "args": {"source_frames": sources, "target_frame": target, "rate": rate,
                 "angular_thres": 0.01, "trans_thres": 0.01}});
    t.send(c, &line.to_string());
}

fn feedback(lines: &[Value]) -> Vec<Value> {
    lines
        .iter()
        .filter(|v| v["op"] == "action_feedback")
        .map(|v| v["values"]["transforms"].clone())
        .collect()
}

fn topic_changes(t: &mut T) -> Vec<(String, bool)> {
    let mut v = Vec::new();
    let now = t.now;
    t.hub.take_interest_changes(&mut v, now);
    let mut out: Vec<(String, bool)> = v
        .into_iter()
        .filter(|c| c.kind == Offer::Topic)
        .map(|c| (c.name.to_string(), c.wanted))
        .collect();
    out.sort();
    out
}

#[test]
fn tf_from_the_ros2_graph_is_asked_for_only_while_a_tf_client_exists() {
    let mut t = T::new(Limits::default());
    t.hub.enable_federation();
    let c = t.open();
    assert!(topic_changes(&mut t).is_empty());
    assert!(!t.hub.remote_needs_json(0, "/tf", None));
    goal(&mut t, c, "\"g\"", &["base"], "odom", 10.0);
    // A ROS 2 sample on /tf is decoded though no client subscribes.
    assert!(t.hub.remote_needs_json(0, "/tf", None));
    assert_eq!(
        topic_changes(&mut t),
        vec![("/tf".to_string(), true), ("/tf_static".to_string(), true)]
    );
    // A sample from the graph (no client publishes it) is looked up.
    let remote = Origin::Remote { latched: None };
    let msg = tf_msg("odom", "base", 5, 2.0);
    t.hub.route(
        remote,
        0,
        "/tf",
        rosgate_wire::Raw::from_valid_json(&msg),
        t.now,
    );
    t.advance(100);
    let fb = feedback(&t.recv(c));
    assert_eq!(fb.len(), 1, "{fb:?}");
    assert_eq!(fb[0][0]["transform"]["translation"]["x"], 2.0);
    // The last TF client goes: the graph's /tf is no longer wanted.
    t.hub.close(c, CloseReason::PeerClosed, t.now);
    t.free_closed();
    assert_eq!(
        topic_changes(&mut t),
        vec![
            ("/tf".to_string(), false),
            ("/tf_static".to_string(), false)
        ]
    );
}

#[test]
fn tf_is_read_only_while_a_client_exists_and_ticks_follow_the_rate() {
    let mut t = T::new(Limits::default());
    let (p, c) = (t.open(), t.open());
    let publish = |t: &mut T, sec: i64, x: f64| {
        let line = format!(
            r#"{{"op":"publish","topic":"/tf","msg":{}}}"#,
            tf_msg("odom", "base", sec, x)
        );
        t.send(p, &line);
    };
    publish(&mut t, 1, 1.0);
    assert_eq!(t.hub.memory().tf, 0, "nobody asked: /tf not read");
    goal(&mut t, c, "\"g\"", &["base"], "odom", 10.0);
    t.recv(c);
    publish(&mut t, 2, 1.0);
    // 10 Hz: the first tick 100 ms after the goal, none before.
    t.advance(99);
    assert!(feedback(&t.recv(c)).is_empty());
    t.advance(1);
    assert_eq!(feedback(&t.recv(c)).len(), 1);
    assert!(t.hub.memory().tf > 0);
    // Unchanged: ticks send nothing; moved past the threshold: sent.
    t.advance(100);
    assert!(feedback(&t.recv(c)).is_empty());
    publish(&mut t, 3, 1.5);
    t.advance(100);
    let fb = feedback(&t.recv(c));
    assert_eq!(fb.len(), 1);
    assert_eq!(fb[0][0]["transform"]["translation"]["x"], 1.5);
    // Its client goes: the subscription and the dynamic frames go.
    t.hub.close(c, CloseReason::PeerClosed, t.now);
    t.free_closed();
    t.advance(500);
    assert_eq!(t.hub.memory().tf, 0);
    assert!(t.hub.next_deadline() > t.now, "no TF tick pending");
}

#[test]
fn a_client_serving_the_action_gets_the_goals() {
    let mut t = T::new(Limits::default());
    let (s, c) = (t.open(), t.open());
    t.send(
        s,
        r#"{"op":"advertise_action","action":"/tf2_web_republisher","type":"tf2_web_republisher_interfaces/action/TFSubscription"}"#,
    );
    t.recv(s);
    goal(&mut t, c, "\"g\"", &["base"], "odom", 10.0);
    let got = t.recv(s);
    assert!(
        got.iter().any(|v| v["op"] == "send_action_goal"),
        "the client's server gets it: {got:?}"
    );
}
