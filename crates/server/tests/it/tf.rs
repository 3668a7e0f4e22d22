//! TF (docs/tf.md): the gateway as tf2_web_republisher, through its three
//! interfaces (`/republish_tfs`, the ROS 1 actionlib action over topics,
//! the ROS 2 action), with `/tf_static` + `/tf` published by another
//! client; the real binary, JSON lines over TCP.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::*;

fn tf_item(parent: &str, child: &str, sec: i64, x: f64, y: f64) -> Value {
    json!({
        "header": {"stamp": {"sec": sec, "nanosec": 0}, "frame_id": parent},
        "child_frame_id": child,
        "transform": {"translation": {"x": x, "y": y, "z": 0.0},
                      "rotation": {"x": 0.0, "y": 0.0, "z": 0.0, "w": 1.0}}
    })
}

/// A client publishing `/tf_static` (world -> odom, 1 m along x) and
/// able to move odom -> base on `/tf`.
fn tf_publisher(gw: &Gateway) -> Client {
    let mut p = gw.client();
    p.advertise("/tf_static");
    p.advertise("/tf");
    p
}

fn publish_static(p: &mut Client) {
    let msg = json!({"transforms": [tf_item("world", "odom", 0, 1.0, 0.0)]});
    p.publish("/tf_static", &msg.to_string());
}

fn move_base(p: &mut Client, sec: i64, x: f64) {
    let msg = json!({"transforms": [tf_item("odom", "base", sec, x, 0.0)]});
    p.publish("/tf", &msg.to_string());
}

fn x_of(transform: &Value) -> f64 {
    transform["transform"]["translation"]["x"]
        .as_f64()
        .unwrap_or_else(|| panic!("no translation.x in {transform}"))
}

fn is_publish_on(v: &Value, topic: &str) -> bool {
    v["op"] == "publish" && v["topic"] == topic
}

/// Calls `/republish_tfs`; returns the topic it names.
fn republish(c: &mut Client, args: Value) -> String {
    let id = format!("rep-{}", uniq());
    c.call("/republish_tfs", &json!(id).to_string(), &args.to_string());
    let (v, _) = c.recv_until(
        |v| v["op"] == "service_response" && v["id"] == json!(id),
        deadline(REPLY),
    );
    assert_eq!(v["result"], true, "{v}");
    v["values"]["topic_name"]
        .as_str()
        .unwrap_or_else(|| panic!("no topic_name: {v}"))
        .to_string()
}

#[test]
fn republish_tfs_sends_the_composed_transform_and_again_when_it_moves() {
    let gw = Gateway::start(&[]);
    let mut p = tf_publisher(&gw);
    publish_static(&mut p);
    let mut c = gw.client();
    let topic = republish(
        &mut c,
        json!({"source_frames": ["/base"], "target_frame": "world", "angular_thres": 0.01,
               "trans_thres": 0.01, "rate": 20.0, "timeout": {"secs": 2, "nsecs": 0}}),
    );
    assert!(
        topic.starts_with("/tf2_web_republisher/tf_repub_"),
        "{topic}"
    );
    c.subscribe(&topic);
    move_base(&mut p, 1, 2.0);
    let (v, _) = c.recv_until(|v| is_publish_on(v, &topic), deadline(REPLY));
    let list = v["msg"]["transforms"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(list.len(), 1, "{v}");
    assert_eq!(list[0]["header"]["frame_id"], "world");
    assert_eq!(list[0]["child_frame_id"], "base");
    assert!(
        (x_of(&list[0]) - 3.0).abs() < 1e-9,
        "static 1 + dynamic 2: {v}"
    );
    // Below the threshold: nothing; past it: the new pose.
    move_base(&mut p, 2, 2.005);
    move_base(&mut p, 3, 2.5);
    let (v, _) = c.recv_until(|v| is_publish_on(v, &topic), deadline(REPLY));
    assert!((x_of(&v["msg"]["transforms"][0]) - 3.5).abs() < 1e-9, "{v}");
    // Still: no more messages.
    let quiet = deadline(ms(300));
    while let Recv::Line(l) = c.try_recv_line(quiet) {
        let v = parse_line(&String::from_utf8_lossy(&l));
        assert!(!is_publish_on(&v, &topic), "sent without a move: {v}");
    }
}

#[test]
fn the_ros2_action_sends_feedback_warns_once_about_unknown_frames_and_ends_on_cancel() {
    let gw = Gateway::start(&[]);
    let mut p = tf_publisher(&gw);
    publish_static(&mut p);
    let mut c = gw.client();
    let args = json!({"source_frames": ["base", "ghost"], "target_frame": "/world",
                      "angular_thres": 0.01, "trans_thres": 0.01, "rate": 20.0});
    c.send_json(
        &json!({"op": "send_action_goal", "id": "g1", "action": "/tf2_web_republisher",
        "action_type": "tf2_web_republisher_interfaces/action/TFSubscription",
        "args": args, "feedback": true}),
    );
    let ghost = |v: &Value| {
        v["op"] == "status"
            && v["level"] == "warning"
            && v["msg"].as_str().is_some_and(|m| m.contains("ghost"))
    };
    // The goal is in before /tf moves (it is read only while a TF client exists).
    let mut warnings = c.barrier().iter().filter(|v| ghost(v)).count();
    move_base(&mut p, 1, 0.5);
    let (v, skipped) = c.recv_until(|v| v["op"] == "action_feedback", deadline(REPLY));
    assert_eq!(v["id"], "g1", "{v}");
    assert_eq!(v["action"], "/tf2_web_republisher", "{v}");
    let list = v["values"]["transforms"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(list.len(), 1, "ghost left out: {v}");
    assert!((x_of(&list[0]) - 1.5).abs() < 1e-9, "{v}");
    assert!(
        list[0]["header"]["stamp"]["sec"].is_u64(),
        "ROS 2 stamps: {v}"
    );
    warnings += skipped.iter().filter(|v| ghost(v)).count();
    move_base(&mut p, 2, 0.7);
    let (_, skipped) = c.recv_until(|v| v["op"] == "action_feedback", deadline(REPLY));
    warnings += skipped.iter().filter(|v| ghost(v)).count();
    // A few more ticks pass: still the one warning.
    std::thread::sleep(ms(200));
    c.send_json(&json!({"op": "cancel_action_goal", "id": "g1", "action": "/tf2_web_republisher"}));
    let (end, skipped) = c.recv_until(|v| v["op"] == "action_result", deadline(REPLY));
    warnings += skipped.iter().filter(|v| ghost(v)).count();
    assert_eq!(warnings, 1, "one warning naming ghost");
    assert_eq!(end["id"], "g1");
    assert_eq!(end["status"], 5, "{end}");
    // Over: no feedback after the result.
    move_base(&mut p, 3, 5.0);
    let quiet = deadline(ms(300));
    while let Recv::Line(l) = c.try_recv_line(quiet) {
        let v = parse_line(&String::from_utf8_lossy(&l));
        assert_ne!(v["op"], "action_feedback", "after cancel: {v}");
    }
}

#[test]
fn the_ros1_actionlib_action_works_over_its_topics() {
    let gw = Gateway::start(&[]);
    let mut p = tf_publisher(&gw);
    publish_static(&mut p);
    let mut c = gw.client();
    c.advertise("/tf2_web_republisher/goal");
    c.advertise("/tf2_web_republisher/cancel");
    c.subscribe("/tf2_web_republisher/feedback");
    c.subscribe("/tf2_web_republisher/result");
    let goal = json!({"goal_id": {"stamp": {"secs": 0, "nsecs": 0}, "id": "goal_42"},
        "goal": {"source_frames": ["base"], "target_frame": "world", "angular_thres": 2.0,
                 "trans_thres": 0.01, "rate": 20.0}});
    c.publish("/tf2_web_republisher/goal", &goal.to_string());
    c.barrier();
    move_base(&mut p, 1, 1.0);
    let (v, _) = c.recv_until(
        |v| is_publish_on(v, "/tf2_web_republisher/feedback"),
        deadline(REPLY),
    );
    assert_eq!(v["msg"]["status"]["goal_id"]["id"], "goal_42", "{v}");
    let t = &v["msg"]["feedback"]["transforms"][0];
    assert!((x_of(t) - 2.0).abs() < 1e-9, "{v}");
    assert!(t["header"]["stamp"]["secs"].is_u64(), "ROS 1 stamps: {v}");
    // Canceled: no more feedback even when it moves.
    c.publish("/tf2_web_republisher/cancel", r#"{"id":"goal_42"}"#);
    let (v, _) = c.recv_until(
        |v| is_publish_on(v, "/tf2_web_republisher/result"),
        deadline(REPLY),
    );
    assert_eq!(v["msg"]["status"]["goal_id"]["id"], "goal_42", "{v}");
    assert_eq!(v["msg"]["status"]["status"], 2, "PREEMPTED: {v}");
    move_base(&mut p, 2, 3.0);
    let quiet = deadline(ms(300));
    while let Recv::Line(l) = c.try_recv_line(quiet) {
        let v = parse_line(&String::from_utf8_lossy(&l));
        assert!(
            !is_publish_on(&v, "/tf2_web_republisher/feedback"),
            "after cancel: {v}"
        );
    }
}

#[test]
fn bad_requests_are_refused_with_the_reason_and_subscriptions_are_limited() {
    let gw = Gateway::start(&[]);
    let mut c = gw.client();
    for (args, why) in [
        (
            json!({"source_frames": ["a"], "target_frame": "w", "rate": 0}),
            "rate",
        ),
        (
            json!({"source_frames": ["a"], "target_frame": "w", "trans_thres": -1}),
            "trans_thres",
        ),
        (
            json!({"source_frames": "a", "target_frame": "w"}),
            "source_frames",
        ),
    ] {
        let id = format!("bad-{}", uniq());
        c.call("/republish_tfs", &json!(id).to_string(), &args.to_string());
        let v = c.expect_failure("/republish_tfs", &json!(id));
        assert!(v["values"].as_str().is_some_and(|m| m.contains(why)), "{v}");
    }
    c.send_json(&json!({"op": "send_action_goal", "id": "g-bad", "action": "/tf2_web_republisher",
        "action_type": "tf2_web_republisher_interfaces/action/TFSubscription", "args": {"source_frames": [], "target_frame": "w", "rate": 1e9}, "feedback": true}));
    let (v, _) = c.recv_until(|v| v["op"] == "action_result", deadline(REPLY));
    assert_eq!(v["result"], false, "{v}");
    assert!(v["values"].to_string().contains("rate"), "{v}");
    // 16 subscriptions per connection, the 17th refused.
    for _ in 0..16 {
        republish(&mut c, json!({"source_frames": ["a"], "target_frame": "w"}));
    }
    c.call(
        "/republish_tfs",
        "\"one-more\"",
        r#"{"source_frames":["a"],"target_frame":"w"}"#,
    );
    let v = c.expect_failure("/republish_tfs", &json!("one-more"));
    assert!(
        v["values"].as_str().is_some_and(|m| m.contains("16")),
        "{v}"
    );
}

#[test]
fn a_client_that_provides_the_service_wins() {
    let gw = Gateway::start(&[]);
    let mut server = gw.client();
    server.advertise_service("/republish_tfs");
    let mut c = gw.client();
    c.call(
        "/republish_tfs",
        "\"r1\"",
        r#"{"source_frames":["a"],"target_frame":"w"}"#,
    );
    let fwd = server.expect_forwarded("/republish_tfs");
    server.respond(
        "/republish_tfs",
        &fwd["id"].to_string(),
        r#"{"topic_name":"/mine"}"#,
        "true",
    );
    let v = c.expect_response("/republish_tfs", &json!("r1"));
    assert_eq!(v["values"]["topic_name"], "/mine");
}

#[test]
fn static_frames_go_with_their_publisher_and_the_topic_ends_without_a_subscriber() {
    let gw = Gateway::start(&[]);
    let mut p = tf_publisher(&gw);
    publish_static(&mut p);
    p.barrier();
    let mut c = gw.client();
    let topic = republish(
        &mut c,
        json!({"source_frames": ["odom"], "target_frame": "world", "rate": 20.0,
               "angular_thres": 0.1, "trans_thres": 0.1, "timeout": {"secs": 0, "nsecs": 500000000}}),
    );
    c.subscribe(&topic);
    let (v, _) = c.recv_until(|v| is_publish_on(v, &topic), deadline(REPLY));
    assert!((x_of(&v["msg"]["transforms"][0]) - 1.0).abs() < 1e-9, "{v}");
    drop(p);
    let warned = |v: &Value| {
        v["op"] == "status"
            && v["level"] == "warning"
            && v["msg"].as_str().is_some_and(|m| m.contains("odom"))
    };
    c.recv_until(warned, deadline(REPLY));
    // Nobody reads the topic any more: it ends after its timeout.
    c.unsubscribe(&topic);
    let ended = |v: &Value| {
        v["op"] == "status"
            && v["msg"]
                .as_str()
                .is_some_and(|m| m.contains("nobody subscribed"))
    };
    c.recv_until(ended, deadline(Duration::from_secs(3)));
}

#[test]
fn rosapi_lists_the_service_and_the_action_and_tf_frames_shows_the_tree() {
    let gw = Gateway::start(&[]);
    let mut c = gw.client();
    c.call("/rosapi/services", "\"s\"", "{}");
    let v = c.expect_response("/rosapi/services", &json!("s"));
    let services = v["values"]["services"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(services.contains(&json!("/republish_tfs")), "{v}");
    c.call("/rosapi/action_servers", "\"a\"", "{}");
    let v = c.expect_response("/rosapi/action_servers", &json!("a"));
    let actions = v["values"]["action_servers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(actions.contains(&json!("/tf2_web_republisher")), "{v}");
    c.call(
        "/rosapi/service_type",
        "\"t\"",
        r#"{"service":"/republish_tfs"}"#,
    );
    let v = c.expect_response("/rosapi/service_type", &json!("t"));
    assert_eq!(v["values"]["type"], "tf2_web_republisher/RepublishTFs");
    // /tf is read only while a TF client exists; /tf_static always.
    let mut p = tf_publisher(&gw);
    publish_static(&mut p);
    move_base(&mut p, 1, 2.0);
    p.barrier();
    c.call("/rosgate/tf_frames", "\"f\"", "{}");
    let v = c.expect_response("/rosgate/tf_frames", &json!("f"));
    let frames = v["values"]["frames"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(frames.len(), 1, "only the static one: {v}");
    assert_eq!(frames[0]["child"], "odom");
    assert_eq!(v["values"]["listening"], false);
    republish(
        &mut c,
        json!({"source_frames": ["base"], "target_frame": "world"}),
    );
    move_base(&mut p, 2, 2.0);
    p.barrier();
    c.call(
        "/rosgate/tf_frames",
        "\"g\"",
        r#"{"target_frame":"world","source_frame":"base"}"#,
    );
    let v = c.expect_response("/rosgate/tf_frames", &json!("g"));
    assert_eq!(
        v["values"]["frames"].as_array().map(Vec::len),
        Some(2),
        "{v}"
    );
    assert!((x_of(&v["values"]["lookup"]) - 3.0).abs() < 1e-9, "{v}");
    let s = c.stats();
    assert!(counter(&s, "memory_tf_bytes") > 0, "{s}");
}

#[test]
fn the_cli_echoes_a_transform_and_prints_the_tree() {
    let gw = Gateway::start(&[]);
    let mut p = tf_publisher(&gw);
    publish_static(&mut p);
    p.barrier();
    // A robot's state publisher: /tf at 20 Hz while the test runs.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let running = stop.clone();
    let robot = std::thread::spawn(move || {
        let mut sec = 1;
        while !running.load(std::sync::atomic::Ordering::Relaxed) && sec < 400 {
            move_base(&mut p, sec, 2.0);
            sec += 1;
            std::thread::sleep(ms(50));
        }
    });
    let url = format!("tcp://{}", gw.addr);
    let out = run_to_exit(
        &[
            "tf", "echo", "world", "/base", "--once", "--rate", "20", "--url", &url,
        ],
        &[],
        Duration::from_secs(10),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(
        text.contains("- Translation: [3.000, 0.000, 0.000]"),
        "{text}"
    );
    assert!(
        text.contains("in Quaternion [0.000, 0.000, 0.000, 1.000]"),
        "{text}"
    );
    let out = run_to_exit(
        &["tf", "frames", "--wait", "0.5", "--url", &url],
        &[],
        Duration::from_secs(10),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(
        text.starts_with("world\n  odom  (static)\n    base  ("),
        "{text}"
    );
    assert!(text.contains(" Hz)"), "{text}");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    robot.join().expect("robot thread");
}

#[test]
fn the_ros2_cancel_goal_service_ends_all_of_the_callers_tf_goals() {
    let gw = Gateway::start(&[]);
    let mut c = gw.client();
    let mut other = gw.client();
    let goal = |id: &str| {
        json!({"op": "send_action_goal", "id": id, "action": "/tf2_web_republisher",
            "action_type": "tf2_web_republisher_interfaces/action/TFSubscription",
            "args": {"source_frames": ["x"], "target_frame": "y", "rate": 10.0}, "feedback": true})
    };
    c.send_json(&goal("a"));
    c.send_json(&goal("b"));
    other.send_json(&goal("o"));
    other.barrier();
    c.call("/tf2_web_republisher/_action/cancel_goal", "\"cg\"", "{}");
    let (v, skipped) = c.recv_until(
        |v| v["op"] == "service_response" && v["id"] == "cg",
        deadline(REPLY),
    );
    assert_eq!(v["values"]["canceled"], 2, "{v}");
    let mut ended: Vec<String> = skipped
        .iter()
        .filter(|v| v["op"] == "action_result")
        .map(|v| v["id"].as_str().unwrap_or("").to_string())
        .collect();
    ended.sort();
    assert_eq!(ended, ["a", "b"], "both ended, each once: {skipped:?}");
    // The other connection's goal runs on.
    c.call("/rosgate/tf_frames", "\"f\"", "{}");
    let v = c.expect_response("/rosgate/tf_frames", &json!("f"));
    assert_eq!(v["values"]["subscriptions"], 1, "{v}");
}
