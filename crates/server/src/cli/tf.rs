//! `rosgate tf echo|frames`: TF through the gateway's own
//! tf2_web_republisher (docs/tf.md). `echo` holds a goal of the ROS 2
//! action `/tf2_web_republisher` (every tick, thresholds 0) and prints each
//! transform as `ros2 run tf2_ros tf2_echo` does; `frames` holds a goal
//! without frames for a moment (the gateway reads `/tf` only while a TF
//! client exists) and prints the tree `/rosgate/tf_frames` lists.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::args::Args;
use super::client::{Client, Event, Req};
use super::{print, Ctx, Error};

pub const COMMANDS: &[(&str, &str)] = &[
    (
        "echo",
        "print SOURCE's pose in TARGET as it changes (tf2_echo)",
    ),
    ("frames", "print the frame tree with each frame's rate"),
];

const ACTION: &str = "/tf2_web_republisher";
const ACTION_TYPE: &str = "tf2_web_republisher_interfaces/action/TFSubscription";

pub fn help(cmd: &str) -> Option<&'static str> {
    Some(match cmd {
        "echo" => {
            "\
rosgate tf echo - print a frame's pose in another frame, like tf2_echo

USAGE:
    rosgate tf echo TARGET SOURCE [--rate HZ] [--once]

Asks the gateway's TF republisher (the ROS 2 action /tf2_web_republisher)
for SOURCE in TARGET and prints it at each tick: translation, rotation as a
quaternion and as roll/pitch/yaw. A frame that cannot be looked up yet is
said once on stderr; the command waits for it. Ctrl-C cancels and exits 0.

OPTIONS:
    -r, --rate HZ   ticks per second (default 1, at most 100)
    -1, --once      exit after the first transform
"
        }
        "frames" => {
            "\
rosgate tf frames - print the TF tree of the gateway's domain

USAGE:
    rosgate tf frames [--wait SECS]

Each frame under its parent, with `static` or its rate (Hz, over the
history the gateway keeps). The gateway reads /tf only while a TF client
exists, so this holds one (a goal without frames) for --wait seconds
before asking (/rosgate/tf_frames).

OPTIONS:
    -w, --wait SECS   how long to listen first (default 1)
"
        }
        _ => return None,
    })
}

pub fn run(cmd: &str, mut a: Args, ctx: &Ctx) -> Result<(), Error> {
    match cmd {
        "echo" => {
            let rate: f64 = a.opt(&["-r", "--rate"])?.unwrap_or(1.0);
            let once = a.flag(["-1", "--once"]);
            let p = a.finish(&["TARGET", "SOURCE"], 0)?;
            if !(rate > 0.0 && rate <= 100.0) {
                return Err(Error::Usage("--rate must be in (0, 100]".into()));
            }
            echo(ctx, &p[0], &p[1], rate, once)
        }
        "frames" => {
            let wait: f64 = a.opt(&["-w", "--wait"])?.unwrap_or(1.0);
            a.finish(&[], 0)?;
            if !(0.0..=60.0).contains(&wait) {
                return Err(Error::Usage("--wait must be in [0, 60] seconds".into()));
            }
            frames(ctx, Duration::from_secs_f64(wait))
        }
        _ => Err(Error::Usage(format!("unknown command {cmd:?}"))),
    }
}

/// Sends the goal; returns its id.
fn send_goal(c: &mut Client, sources: &[&str], target: &str, rate: f64) -> Result<String, Error> {
    let id = c.next_id();
    let args = serde_json::json!({
        "source_frames": sources, "target_frame": target,
        "angular_thres": 0.0, "trans_thres": 0.0, "rate": rate,
    });
    let req = Req::new("send_action_goal")
        .raw("id", &id)
        .str("action", ACTION)
        .str("action_type", ACTION_TYPE)
        .raw("args", &args.to_string())
        .raw("feedback", "true")
        .finish();
    c.send(&req)?;
    Ok(id)
}

fn cancel(c: &mut Client, id: &str) -> Result<(), Error> {
    let req = Req::new("cancel_action_goal")
        .raw("id", id)
        .str("action", ACTION)
        .finish();
    c.send(&req)
}

fn num(v: &Value, path: &[&str]) -> f64 {
    let mut v = v;
    for p in path {
        v = &v[*p];
    }
    v.as_f64().unwrap_or(0.0)
}

/// tf2_echo's text of one `TransformStamped`.
fn describe(t: &Value) -> String {
    let tr = |k| num(t, &["transform", "translation", k]);
    let q = |k| num(t, &["transform", "rotation", k]);
    let (x, y, z, w) = (q("x"), q("y"), q("z"), q("w"));
    let roll = (2.0 * (w * x + y * z)).atan2(1.0 - 2.0 * (x * x + y * y));
    let pitch = (2.0 * (w * y - z * x)).clamp(-1.0, 1.0).asin();
    let yaw = (2.0 * (w * z + x * y)).atan2(1.0 - 2.0 * (y * y + z * z));
    let sec = num(t, &["header", "stamp", "sec"]);
    let nsec = num(t, &["header", "stamp", "nanosec"]);
    format!(
        "At time {sec:.0}.{nsec:09.0}\n- Translation: [{:.3}, {:.3}, {:.3}]\n- Rotation: in Quaternion [{x:.3}, {y:.3}, {z:.3}, {w:.3}]\n- Rotation: in RPY (radian) [{roll:.3}, {pitch:.3}, {yaw:.3}]\n- Rotation: in RPY (degree) [{:.3}, {:.3}, {:.3}]\n",
        tr("x"),
        tr("y"),
        tr("z"),
        roll.to_degrees(),
        pitch.to_degrees(),
        yaw.to_degrees(),
    )
}

fn echo(ctx: &Ctx, target: &str, source: &str, rate: f64, once: bool) -> Result<(), Error> {
    let mut c = ctx.connect()?;
    let id = send_goal(&mut c, &[source], target, rate)?;
    loop {
        let f = match c.next(None)? {
            Event::Stop => {
                cancel(&mut c, &id)?;
                c.close();
                return Ok(());
            }
            Event::Timeout => continue,
            Event::Frame(f) => f,
        };
        match f.op().as_ref() {
            "action_feedback" if f.has_id(&id) => {
                let values: Value =
                    serde_json::from_str(f.raw("values").unwrap_or("null")).unwrap_or(Value::Null);
                if let Some(list) = values["transforms"].as_array() {
                    for t in list {
                        print(&describe(t))?;
                    }
                    if once && !list.is_empty() {
                        cancel(&mut c, &id)?;
                        c.close();
                        return Ok(());
                    }
                }
            }
            "action_result" if f.has_id(&id) => {
                c.close();
                let why = f.raw("values").unwrap_or("").to_string();
                return Err(Error::Failed(format!("the TF goal ended: {why}")));
            }
            "status" => {
                if let Some(msg) = f.str("msg") {
                    eprintln!("{msg}");
                }
                if f.str("level").as_deref() == Some("error") && f.has_id(&id) {
                    c.close();
                    return Err(Error::Failed(f.str("msg").unwrap_or_default().into_owned()));
                }
            }
            _ => {}
        }
    }
}

fn frames(ctx: &Ctx, wait: Duration) -> Result<(), Error> {
    let mut c = ctx.connect()?;
    let id = send_goal(&mut c, &[], "_", 1.0)?;
    let until = Instant::now() + wait;
    while Instant::now() < until {
        if let Event::Stop = c.next(Some(until))? {
            return Err(Error::Interrupted);
        }
    }
    let v = c.call("/rosgate/tf_frames", "{}")?;
    cancel(&mut c, &id)?;
    c.close();
    let v: Value = serde_json::from_str(&v).unwrap_or(Value::Null);
    print(&tree(&v))
}

/// The frames as an indented tree, roots first, each level sorted.
fn tree(v: &Value) -> String {
    let list = v["frames"].as_array().cloned().unwrap_or_default();
    let mut children: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
    let mut is_child = std::collections::HashSet::new();
    for f in &list {
        let parent = f["parent"].as_str().unwrap_or("").to_string();
        children.entry(parent).or_default().push(f);
        is_child.insert(f["child"].as_str().unwrap_or("").to_string());
    }
    let mut out = String::new();
    if list.is_empty() {
        out.push_str("(no frames)\n");
        return out;
    }
    let roots: Vec<String> = children
        .keys()
        .filter(|p| !is_child.contains(*p))
        .cloned()
        .collect();
    fn walk(
        out: &mut String,
        children: &BTreeMap<String, Vec<&Value>>,
        name: &str,
        depth: usize,
        seen: &mut std::collections::HashSet<String>,
    ) {
        if !seen.insert(name.to_string()) || depth > 1_000 {
            return;
        }
        for f in children.get(name).map(Vec::as_slice).unwrap_or(&[]) {
            let child = f["child"].as_str().unwrap_or("");
            let how = if f["static"] == Value::Bool(true) {
                "static".to_string()
            } else {
                format!("{} Hz", f["rate_hz"].as_f64().unwrap_or(0.0))
            };
            out.push_str(&format!("{}{child}  ({how})\n", "  ".repeat(depth + 1)));
            walk(out, children, child, depth + 1, seen);
        }
    }
    let mut seen = std::collections::HashSet::new();
    for r in roots {
        out.push_str(&format!("{r}\n"));
        walk(&mut out, &children, &r, 0, &mut seen);
    }
    // Frames in a loop have no root: listed flat.
    for f in &list {
        let child = f["child"].as_str().unwrap_or("");
        if !seen.contains(child) {
            out.push_str(&format!("{child}  (parent {}, in a loop)\n", f["parent"]));
        }
    }
    if v["truncated"] == Value::Bool(true) {
        out.push_str("(truncated)\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tree_nests_children_under_their_parents() {
        let v = serde_json::json!({"frames": [
            {"child": "odom", "parent": "world", "static": true, "rate_hz": 0.0},
            {"child": "base", "parent": "odom", "static": false, "rate_hz": 50.0},
            {"child": "laser", "parent": "base", "static": true, "rate_hz": 0.0},
        ]});
        assert_eq!(
            tree(&v),
            "world\n  odom  (static)\n    base  (50 Hz)\n      laser  (static)\n"
        );
    }

    #[test]
    fn echo_prints_rpy_like_tf2_echo() {
        let half = std::f64::consts::FRAC_PI_4;
        let t = serde_json::json!({"header": {"stamp": {"sec": 3, "nanosec": 5}},
            "transform": {"translation": {"x": 1, "y": 2, "z": 3},
                          "rotation": {"x": 0, "y": 0, "z": half.sin(), "w": half.cos()}}});
        let s = describe(&t);
        assert!(
            s.starts_with("At time 3.000000005\n- Translation: [1.000, 2.000, 3.000]"),
            "{s}"
        );
        assert!(s.contains("in RPY (degree) [0.000, 0.000, 90.000]"), "{s}");
    }
}
