//! rosapi's message definitions from the hub's types (`hub/types.rs`):
//! types set whole with `set_types` (as the ROS 2 link hands over what it
//! learned) are described at once, a replacement is never answered from a
//! stale cache, and one `topics_and_raw_types` reply is bounded.

use std::sync::Arc;

use rosgate_ros2::model::Kind;
use rosgate_ros2::registry::Registry;
use rosgate_ros2::typedefs::{MAX_FULL_TEXT_BYTES, SEPARATOR};
use serde_json::json;

use super::*;
use crate::hub::rosapi::MAX_TYPEDEFS_REPLY_BYTES;

/// The `values` of rosapi `short` called by `key` (the call must succeed).
fn rosapi(t: &mut T, key: u32, short: &str, args: Value) -> Value {
    let line =
        json!({"op":"call_service","service":format!("/rosapi/{short}"),"id":short,"args":args});
    t.send(key, &line.to_string());
    let v = t.one(key);
    assert_eq!(v["result"], true, "{short}: {v}");
    assert_eq!(v["id"], short, "{v}");
    v["values"].clone()
}

fn with_type(text: &str) -> Arc<Registry> {
    let mut r = Registry::bundled();
    r.add("learned_msgs", Kind::Msg, "Blob", text)
        .expect("parses");
    r.check().expect("checks");
    Arc::new(r)
}

#[test]
fn learned_types_are_described_and_a_replacement_is_seen_at_once() {
    let mut t = T::new(Limits::default());
    let c = t.open();
    t.send(
        c,
        r#"{"op":"advertise","topic":"/blob","type":"learned_msgs/msg/Blob"}"#,
    );
    t.send(
        c,
        r#"{"op":"advertise","topic":"/blob2","type":"learned_msgs/Blob"}"#,
    );
    t.send(
        c,
        r#"{"op":"advertise","topic":"/img","type":"sensor_msgs/msg/Image"}"#,
    );
    t.recv(c);

    // Not known yet: no text, and details say why.
    let v = rosapi(&mut t, c, "topics_and_raw_types", json!({}));
    let at = |v: &Value, topic: &str| {
        let i = v["topics"]
            .as_array()
            .and_then(|a| a.iter().position(|x| x == topic))
            .unwrap_or_else(|| panic!("{topic} in {v}"));
        v["typedefs_full_text"][i]
            .as_str()
            .expect("a text")
            .to_string()
    };
    assert_eq!(at(&v, "/blob"), "");
    assert!(
        at(&v, "/img").starts_with("std_msgs/msg/Header header\n"),
        "{v}"
    );
    assert!(v.get("typedefs_truncated").is_none(), "{v}");
    t.send(
        c,
        r#"{"op":"call_service","service":"/rosapi/message_details","id":7,"args":{"type":"learned_msgs/msg/Blob"}}"#,
    );
    let v = t.one(c);
    assert_eq!(v["result"], false, "{v}");
    assert_eq!(v["id"], 7, "{v}");
    assert!(
        v["values"]
            .as_str()
            .is_some_and(|s| s.contains("unknown message type \"learned_msgs/msg/Blob\"")),
        "{v}"
    );

    // Learned: described, as a message and in both name forms.
    t.hub
        .set_types(with_type("int32 A=1\nstd_msgs/Header header\nfloat64 x\n"));
    let v = rosapi(&mut t, c, "topics_and_raw_types", json!({}));
    let want = format!(
        "int32 A=1\nstd_msgs/msg/Header header\nfloat64 x\n\n{SEPARATOR}\nMSG: std_msgs/msg/Header\n\
         builtin_interfaces/msg/Time stamp\nstring frame_id\n\n{SEPARATOR}\nMSG: builtin_interfaces/msg/Time\n\
         int32 sec\nuint32 nanosec\n"
    );
    assert_eq!(at(&v, "/blob"), want);
    assert_eq!(at(&v, "/blob2"), want);
    let d = rosapi(
        &mut t,
        c,
        "message_details",
        json!({"type":"learned_msgs/Blob"}),
    );
    assert_eq!(
        d["typedefs"][0],
        json!({"type":"learned_msgs/Blob","fieldnames":["header","x"],
               "fieldtypes":["std_msgs/Header","double"],"fieldarraylen":[-1,-1],
               "examples":["{}","0.0"],"constnames":["A"],"constvalues":["1"]})
    );
    assert_eq!(d["typedefs"].as_array().map(Vec::len), Some(3), "{d}");
    let i = rosapi(&mut t, c, "interfaces", json!({}));
    let names: Vec<&str> = i["interfaces"]
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for want in [
        "learned_msgs/msg/Blob",
        "example_interfaces/srv/AddTwoInts",
        "example_interfaces/action/Fibonacci",
        "sensor_msgs/msg/Image",
    ] {
        assert!(names.contains(&want), "{want}");
    }
    // Neither the structs rosidl derives nor a short name in use twice.
    assert!(!names
        .iter()
        .any(|n| n.ends_with("_Request") || n.ends_with("_Goal")));
    assert!(!names.contains(&"learned_msgs/Blob"));
    assert!(
        names.windows(2).all(|w| w[0] < w[1]),
        "sorted, no duplicates"
    );

    // Replaced: the new definition at once, not the cached one.
    let before = t.hub.types_generation();
    t.hub.set_types(with_type("string note\n"));
    assert_eq!(t.hub.types_generation(), before + 1);
    let v = rosapi(&mut t, c, "topics_and_raw_types", json!({}));
    assert_eq!(at(&v, "/blob"), "string note\n");
    let d = rosapi(
        &mut t,
        c,
        "message_details",
        json!({"type":"learned_msgs/msg/Blob"}),
    );
    assert_eq!(d["typedefs"][0]["fieldnames"], json!(["note"]));
}

#[test]
fn details_of_each_part_and_errors_name_the_type() {
    let mut t = T::new(Limits::default());
    let c = t.open();
    for (short, ty, first, fields) in [
        (
            "service_request_details",
            "example_interfaces/srv/AddTwoInts",
            "example_interfaces/AddTwoInts_Request",
            json!(["a", "b"]),
        ),
        (
            "service_response_details",
            "example_interfaces/AddTwoInts",
            "example_interfaces/AddTwoInts_Response",
            json!(["sum"]),
        ),
        (
            "action_goal_details",
            "example_interfaces/action/Fibonacci",
            "example_interfaces/Fibonacci_Goal",
            json!(["order"]),
        ),
        (
            "action_result_details",
            "example_interfaces/Fibonacci",
            "example_interfaces/Fibonacci_Result",
            json!(["sequence"]),
        ),
        (
            "action_feedback_details",
            "example_interfaces/Fibonacci",
            "example_interfaces/Fibonacci_Feedback",
            json!(["sequence"]),
        ),
        (
            "message_details",
            "std_msgs/msg/String",
            "std_msgs/String",
            json!(["data"]),
        ),
    ] {
        let d = rosapi(&mut t, c, short, json!({ "type": ty }));
        assert_eq!(d["typedefs"][0]["type"], first, "{short}: {d}");
        assert_eq!(d["typedefs"][0]["fieldnames"], fields, "{short}: {d}");
    }
    for (short, ty, kind) in [
        (
            "message_details",
            "example_interfaces/srv/AddTwoInts",
            "message",
        ),
        ("service_request_details", "std_msgs/msg/String", "service"),
        ("action_goal_details", "", "action"),
    ] {
        t.send(
            c,
            &json!({"op":"call_service","service":format!("rosapi/{short}"),"id":"e","args":{"type":ty}}).to_string(),
        );
        let v = t.one(c);
        assert_eq!(v["result"], false, "{v}");
        assert_eq!(v["id"], "e", "{v}");
        assert_eq!(v["service"], format!("rosapi/{short}"), "{v}");
        let reason = v["values"].as_str().unwrap_or_default();
        assert!(
            reason.contains(&format!("unknown {kind} type {ty:?}")),
            "{reason}"
        );
    }
}

#[test]
fn one_reply_carries_a_bounded_amount_of_text() {
    // Four 30 KiB types every topic type nests, so each topic's text is
    // about 120 KiB (under MAX_FULL_TEXT_BYTES) and 40 of them are more
    // than one reply carries.
    let mut r = Registry::bundled();
    let long = "x".repeat(190);
    for k in 0..4 {
        let text: String = (0..150).map(|j| format!("int32 f{j}_{long}\n")).collect();
        r.add("big_msgs", Kind::Msg, &format!("Part{k}"), &text)
            .expect("part");
    }
    for i in 0..40 {
        r.add(
            "big_msgs",
            Kind::Msg,
            &format!("Top{i}"),
            "Part0 a\nPart1 b\nPart2 c\nPart3 d\n",
        )
        .expect("top");
    }
    r.check().expect("checks");
    let mut t = T::new(Limits::default());
    t.hub.set_types(Arc::new(r));
    let c = t.open();
    for i in 0..40 {
        t.send(
            c,
            &format!(r#"{{"op":"advertise","topic":"/t{i:02}","type":"big_msgs/msg/Top{i}"}}"#),
        );
    }
    t.send(
        c,
        r#"{"op":"advertise","topic":"/z","type":"std_msgs/msg/String"}"#,
    );
    t.recv(c);
    let v = rosapi(&mut t, c, "topics_and_raw_types", json!({}));
    let texts: Vec<&str> = v["typedefs_full_text"]
        .as_array()
        .expect("texts")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(texts.len(), v["topics"].as_array().map_or(0, Vec::len));
    let total: usize = texts.iter().map(|s| s.len()).sum();
    let full = texts.iter().filter(|s| s.len() > 100_000).count();
    assert!(full > 5 && full < 40, "{full} whole texts");
    assert!(texts.iter().all(|s| s.len() < MAX_FULL_TEXT_BYTES));
    assert!(total <= MAX_TYPEDEFS_REPLY_BYTES, "{total}");
    assert_eq!(v["typedefs_truncated"], true);
    // From the cache, the same cut; replaced types render again.
    let again = rosapi(&mut t, c, "topics_and_raw_types", json!({}));
    assert_eq!(again, v);
    t.hub.set_types(Arc::new(t.hub.types().as_ref().clone()));
    assert_eq!(rosapi(&mut t, c, "topics_and_raw_types", json!({})), v);
    // What comes after the cut still gets its (empty) place, in order.
    let z = v["topics"]
        .as_array()
        .and_then(|a| a.iter().position(|x| x == "/z"))
        .expect("/z");
    assert_eq!(texts[z], "");
}
