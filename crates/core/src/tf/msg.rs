//! The JSON shapes TF travels in: `tf2_msgs/TFMessage` in (from clients
//! and the ROS 2 graph), `geometry_msgs/TransformStamped` arrays out, and
//! the republisher's requests (`tf2_web_republisher/RepublishTFs`'s
//! request, `TFSubscription`'s goal; field layouts as in
//! github.com/RobotWebTools/tf2_web_republisher, `srv/RepublishTFs.srv`,
//! `action/TFSubscription.action`).
//!
//! Invariants: parsing never panics on any input; a stamp is read in both
//! generations' spellings (`sec`/`nanosec`, ROS 1's `secs`/`nsecs`);
//! numbers out are finite (the math keeps them so).

use std::fmt::Write as _;

use serde_json::Value;

use super::buffer::{clean_id, MAX_TF_FRAME_ID_CHARS};
use super::math::{Quat, Transform, Vec3};

/// Transforms one `/tf` message may carry that are read; the rest are
/// ignored (a robot has tens, a big one a few hundred).
pub const MAX_TF_PER_MESSAGE: usize = 1_000;

/// Source frames one subscription may ask for.
pub const MAX_TF_FRAMES_PER_SUB: usize = 256;

/// The fastest rate a subscription may ask for, Hz.
pub const MAX_TF_RATE_HZ: f64 = 100.0;

/// A subscription's unsubscribe timeout (the service's `timeout`) is
/// clamped to this, seconds; 0 or none means [`DEFAULT_TF_TIMEOUT_SECS`].
pub const MAX_TF_TIMEOUT_SECS: f64 = 3_600.0;

/// The unsubscribe timeout when the request gives none (or 0).
pub const DEFAULT_TF_TIMEOUT_SECS: f64 = 10.0;

/// One transform of a `TFMessage`.
#[derive(Debug, Clone, PartialEq)]
pub struct Stamped {
    pub parent: String,
    pub child: String,
    pub stamp_ns: i64,
    pub tf: Transform,
}

fn num(v: &Value, k: &str) -> Option<f64> {
    v.get(k)?.as_f64()
}

/// A `builtin_interfaces/Time` (or ROS 1 `time`) in nanoseconds; missing
/// means 0.
pub fn stamp_ns(v: &Value) -> i64 {
    let sec = v
        .get("sec")
        .or_else(|| v.get("secs"))
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let nsec = v
        .get("nanosec")
        .or_else(|| v.get("nsecs"))
        .and_then(Value::as_i64)
        .unwrap_or(0);
    sec.saturating_mul(1_000_000_000).saturating_add(nsec)
}

fn transform(v: &Value) -> Option<Transform> {
    let t = v.get("translation")?;
    let r = v.get("rotation")?;
    Transform::new(
        Vec3 {
            x: num(t, "x")?,
            y: num(t, "y")?,
            z: num(t, "z")?,
        },
        Quat {
            x: num(r, "x")?,
            y: num(r, "y")?,
            z: num(r, "z")?,
            w: num(r, "w")?,
        },
    )
}

/// The transforms of a `tf2_msgs/TFMessage` (`{"transforms":[...]}`), at
/// most [`MAX_TF_PER_MESSAGE`], and how many were malformed (skipped).
pub fn parse_tf_message(text: &str) -> (Vec<Stamped>, usize) {
    let Ok(v) = serde_json::from_str::<Value>(text) else {
        return (Vec::new(), 1);
    };
    let Some(list) = v.get("transforms").and_then(Value::as_array) else {
        return (Vec::new(), 1);
    };
    let mut out = Vec::with_capacity(list.len().min(MAX_TF_PER_MESSAGE));
    let mut bad = 0;
    for item in list.iter().take(MAX_TF_PER_MESSAGE) {
        let header = item.get("header");
        let parent = header
            .and_then(|h| h.get("frame_id"))
            .and_then(Value::as_str);
        let child = item.get("child_frame_id").and_then(Value::as_str);
        let stamp = header.and_then(|h| h.get("stamp")).map_or(0, stamp_ns);
        match (parent, child, item.get("transform").and_then(transform)) {
            (Some(p), Some(c), Some(tf)) => out.push(Stamped {
                parent: p.to_string(),
                child: c.to_string(),
                stamp_ns: stamp,
                tf,
            }),
            _ => bad += 1,
        }
    }
    (out, bad)
}

/// Which generation's field names a stamp is written with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stamp {
    /// `sec`/`nanosec` (ROS 2).
    Ros2,
    /// `secs`/`nsecs` (ROS 1, as roslib's and roslibpy's TFClient sent).
    Ros1,
}

/// Appends a `geometry_msgs/TransformStamped` to `out`.
pub fn write_stamped(
    out: &mut String,
    target: &str,
    source: &str,
    tf: &Transform,
    wall: (u64, u32),
    stamp: Stamp,
) {
    let (s, ns) = match stamp {
        Stamp::Ros2 => ("sec", "nanosec"),
        Stamp::Ros1 => ("secs", "nsecs"),
    };
    let json = |s: &str| serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into());
    let _ = write!(
        out,
        "{{\"header\":{{\"stamp\":{{\"{s}\":{},\"{ns}\":{}}},\"frame_id\":{}}},\"child_frame_id\":{},\"transform\":{{\"translation\":{{\"x\":{:?},\"y\":{:?},\"z\":{:?}}},\"rotation\":{{\"x\":{:?},\"y\":{:?},\"z\":{:?},\"w\":{:?}}}}}}}",
        wall.0,
        wall.1,
        json(target),
        json(source),
        tf.t.x,
        tf.t.y,
        tf.t.z,
        tf.r.x,
        tf.r.y,
        tf.r.z,
        tf.r.w,
    );
}

/// A validated republisher request (the service's or a goal's fields).
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// Without leading `/`, deduplicated, in the order asked.
    pub sources: Vec<String>,
    pub target: String,
    pub angular_thres: f64,
    pub trans_thres: f64,
    pub rate_hz: f64,
    /// The service's `timeout` in seconds (goals have none).
    pub timeout_secs: f64,
}

/// Reads and checks a request; `Err` is the reason to refuse it.
pub fn parse_request(v: &Value) -> Result<Request, String> {
    let Some(obj) = v.as_object() else {
        return Err("the request must be an object".into());
    };
    let mut sources: Vec<String> = Vec::new();
    match obj.get("source_frames") {
        Some(Value::Array(list)) => {
            if list.len() > MAX_TF_FRAMES_PER_SUB {
                return Err(format!(
                    "source_frames has {} frames; one subscription may ask for {MAX_TF_FRAMES_PER_SUB}",
                    list.len()
                ));
            }
            for f in list {
                let Some(s) = f.as_str() else {
                    return Err("source_frames must be a list of strings".into());
                };
                let s = clean_id(s);
                if s.is_empty() || s.chars().count() > MAX_TF_FRAME_ID_CHARS {
                    return Err(format!(
                        "source frame {s:?} is empty or longer than {MAX_TF_FRAME_ID_CHARS} characters"
                    ));
                }
                if !sources.iter().any(|x| x == s) {
                    sources.push(s.to_string());
                }
            }
        }
        None => {}
        Some(_) => return Err("source_frames must be a list of strings".into()),
    }
    let target = match obj.get("target_frame") {
        Some(Value::String(s)) => clean_id(s).to_string(),
        _ => return Err("target_frame must be a string".into()),
    };
    if target.is_empty() || target.chars().count() > MAX_TF_FRAME_ID_CHARS {
        return Err(format!(
            "target_frame {target:?} is empty or longer than {MAX_TF_FRAME_ID_CHARS} characters"
        ));
    }
    let number = |k: &str| -> Result<f64, String> {
        match obj.get(k) {
            None => Ok(0.0),
            Some(n) => n
                .as_f64()
                .filter(|x| x.is_finite() && *x >= 0.0)
                .ok_or_else(|| format!("{k} must be a number >= 0 (got {n})")),
        }
    };
    let angular_thres = number("angular_thres")?;
    let trans_thres = number("trans_thres")?;
    let rate_hz = match obj.get("rate") {
        None => 10.0,
        Some(n) => n
            .as_f64()
            .filter(|x| x.is_finite() && *x > 0.0 && *x <= MAX_TF_RATE_HZ)
            .ok_or_else(|| {
                format!("rate must be a number of Hz in (0, {MAX_TF_RATE_HZ}] (got {n})")
            })?,
    };
    let timeout_secs = match obj.get("timeout") {
        None | Some(Value::Null) => DEFAULT_TF_TIMEOUT_SECS,
        Some(t @ Value::Object(_)) => stamp_ns(t) as f64 / 1e9,
        Some(n) => n.as_f64().unwrap_or(-1.0),
    };
    if !timeout_secs.is_finite() || timeout_secs < 0.0 {
        return Err("timeout must be a duration >= 0 ({\"secs\":..,\"nsecs\":..})".into());
    }
    let timeout_secs = if timeout_secs == 0.0 {
        DEFAULT_TF_TIMEOUT_SECS
    } else {
        timeout_secs.min(MAX_TF_TIMEOUT_SECS)
    };
    Ok(Request {
        sources,
        target,
        angular_thres,
        trans_thres,
        rate_hz,
        timeout_secs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tf_messages_are_read_in_both_stamp_spellings_and_bad_items_skipped() {
        let text = json!({"transforms": [
            {"header": {"stamp": {"sec": 2, "nanosec": 5}, "frame_id": "/world"}, "child_frame_id": "base",
             "transform": {"translation": {"x": 1, "y": 2, "z": 3}, "rotation": {"x": 0, "y": 0, "z": 0, "w": 2}}},
            {"header": {"stamp": {"secs": 1, "nsecs": 0}, "frame_id": "a"}, "child_frame_id": "b",
             "transform": {"translation": {"x": 0, "y": 0, "z": 0}, "rotation": {"x": 0, "y": 0, "z": 0, "w": 1}}},
            {"header": {"frame_id": "a"}, "child_frame_id": "c", "transform": {"translation": {}}},
        ]})
        .to_string();
        let (list, bad) = parse_tf_message(&text);
        assert_eq!(bad, 1);
        assert_eq!(list.len(), 2);
        assert_eq!(list[0].stamp_ns, 2_000_000_005);
        assert_eq!(list[0].parent, "/world");
        assert_eq!(list[0].tf.r.w, 1.0, "normalized");
        assert_eq!(list[1].stamp_ns, 1_000_000_000);
        assert_eq!(parse_tf_message("[1,2").1, 1);
    }

    #[test]
    fn requests_are_checked_with_reasons() {
        let ok = parse_request(&json!({"source_frames": ["/a", "a", "b"], "target_frame": "/world",
            "angular_thres": 0.1, "trans_thres": 0.01, "rate": 10.0, "timeout": {"secs": 2, "nsecs": 0}}))
        .unwrap();
        assert_eq!(ok.sources, vec!["a", "b"]);
        assert_eq!(ok.target, "world");
        assert_eq!(ok.timeout_secs, 2.0);
        for (bad, why) in [
            (
                json!({"source_frames": [], "target_frame": "w", "rate": 0}),
                "rate",
            ),
            (
                json!({"source_frames": [], "target_frame": "w", "rate": 1000}),
                "rate",
            ),
            (
                json!({"source_frames": [], "target_frame": "w", "trans_thres": -1}),
                "trans_thres",
            ),
            (
                json!({"source_frames": [], "target_frame": "w", "angular_thres": "x"}),
                "angular_thres",
            ),
            (
                json!({"source_frames": [1], "target_frame": "w"}),
                "source_frames",
            ),
            (json!({"source_frames": []}), "target_frame"),
            (json!({"target_frame": "w", "timeout": -3}), "timeout"),
        ] {
            let e = parse_request(&bad).unwrap_err();
            assert!(e.contains(why), "{e}");
        }
        let many: Vec<String> = (0..=MAX_TF_FRAMES_PER_SUB)
            .map(|i| format!("f{i}"))
            .collect();
        assert!(parse_request(&json!({"source_frames": many, "target_frame": "w"})).is_err());
    }

    #[test]
    fn stamped_transforms_are_valid_json() {
        let mut s = String::new();
        write_stamped(
            &mut s,
            "world",
            "base\"x",
            &Transform::IDENTITY,
            (3, 4),
            Stamp::Ros1,
        );
        let v: Value = serde_json::from_str(&s).unwrap();
        assert_eq!(v["header"]["stamp"]["secs"], 3);
        assert_eq!(v["child_frame_id"], "base\"x");
        assert_eq!(v["transform"]["rotation"]["w"], 1.0);
    }
}
