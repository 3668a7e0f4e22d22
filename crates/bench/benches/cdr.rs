//! The ROS 2 codec (`rosgate_ros2::cdr`, docs/ros2.md) on typical
//! messages: a ROS 2 sample into the JSON a client receives
//! (`decode_json`), and a client's JSON into CDR (parse + `encode`, what a
//! publish to a ROS 2 subscription costs, done twice: the hub's type check
//! and the put).
//!
//! ```text
//! cargo bench --bench cdr               # ~1 s per case
//! cargo bench --bench cdr -- --quick    # a tenth of it
//! cargo bench --bench cdr -- scan       # only cases whose name contains "scan"
//! ```

use std::hint::black_box;
use std::time::Duration;

use rosgate_ros2::cdr;
use rosgate_ros2::registry::Registry;
use serde_json::{json, Value};

mod harness;

use harness::{mb_per_s, Timer};

fn cases() -> Vec<(&'static str, &'static str, Value)> {
    vec![
        (
            "string",
            "std_msgs/msg/String",
            json!({"data": "hello world 123"}),
        ),
        (
            "twist",
            "geometry_msgs/msg/Twist",
            json!({"linear": {"x": 1.5, "y": 0.25, "z": 0.0}, "angular": {"z": 0.75}}),
        ),
        (
            "scan 1080",
            "sensor_msgs/msg/LaserScan",
            json!({"header": {"frame_id": "laser"}, "angle_min": -std::f64::consts::PI,
                   "ranges": (0..1080).map(|i| 1.0 + f64::from(i) * 0.001).collect::<Vec<_>>(),
                   "intensities": (0..1080).map(|i| f64::from(i % 100)).collect::<Vec<_>>()}),
        ),
        (
            "image 640x480 rgb8",
            "sensor_msgs/msg/Image",
            json!({"header": {"frame_id": "cam"}, "height": 480, "width": 640, "encoding": "rgb8",
                   "step": 1920, "data": (0..921_600u32).map(|i| (i % 251) as u8).collect::<Vec<u8>>()}),
        ),
    ]
}

fn main() {
    let (timer, filters) = Timer::from_args(Duration::from_millis(200));
    let types = Registry::bundled();
    println!(
        "{:<20} {:>9} {:>9} {:>12} {:>7} {:>9} {:>12} {:>7} {:>9}",
        "case", "cdr B", "json B", "decode ns", "spread", "MB/s", "encode ns", "spread", "MB/s"
    );
    for (name, ty, v) in cases() {
        if !filters.is_empty() && !filters.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        let bytes = cdr::encode(&types, ty, &v).expect("encode");
        let mut out = Vec::new();
        cdr::decode_json(&types, ty, &bytes, &mut out).expect("decode");
        let text = String::from_utf8(out.clone()).expect("utf-8");
        let dec = timer.measure(|| {
            out.clear();
            cdr::decode_json(&types, ty, black_box(&bytes), &mut out).expect("decode");
        });
        let enc = timer.measure(|| {
            let v: Value = serde_json::from_str(black_box(&text)).expect("json");
            black_box(cdr::encode(&types, ty, &v).expect("encode"));
        });
        println!(
            "{:<20} {:>9} {:>9} {:>12.0} {:>6.1}% {:>9.0} {:>12.0} {:>6.1}% {:>9.0}",
            name,
            bytes.len(),
            text.len(),
            dec.ns,
            dec.spread * 100.0,
            mb_per_s(bytes.len(), dec.ns),
            enc.ns,
            enc.spread * 100.0,
            mb_per_s(text.len(), enc.ns)
        );
    }
}
