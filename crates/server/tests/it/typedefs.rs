//! Message definitions over the wire (docs/protocol.md, "rosapi, served
//! natively"): rosapi `topics_and_raw_types` gives each topic's `ros2msg`
//! text, `message_details` and its siblings give rosapi's typedef lists,
//! and `interfaces` lists every type known, for the bundled types and for
//! those of `--interfaces`, over TCP and WebSocket alike.

use std::time::Instant;

use serde_json::{json, Value};

use crate::support::*;
use crate::wsclient::*;

/// The line between definitions.
const SEP: &str =
    "================================================================================";

/// One client connection, either transport.
enum Conn {
    Tcp(Client),
    Ws(Ws),
}

impl Conn {
    fn both(gw: &Gateway) -> [Conn; 2] {
        [Conn::Tcp(gw.client()), Conn::Ws(Ws::connect(gw))]
    }

    fn name(&self) -> &'static str {
        match self {
            Conn::Tcp(_) => "tcp",
            Conn::Ws(_) => "websocket",
        }
    }

    /// Sends `req` with a fresh id; the first message carrying it back.
    fn request(&mut self, mut req: Value) -> Value {
        let id = format!("td{}", uniq());
        req["id"] = json!(id);
        let want = json!(id);
        let dl: Instant = deadline(REPLY);
        match self {
            Conn::Tcp(c) => {
                c.send_json(&req);
                c.recv_until(|v| v["id"] == want, dl).0
            }
            Conn::Ws(ws) => {
                ws.send_text(&req.to_string());
                loop {
                    let (op, payload) = ws.try_frame(dl).expect("a reply before the deadline");
                    assert_eq!(op, 0x1, "text frame expected");
                    let v: Value = serde_json::from_slice(&payload).expect("JSON");
                    if v["id"] == want {
                        return v;
                    }
                }
            }
        }
    }

    /// The whole `service_response` of `/rosapi/<short>`.
    fn rosapi(&mut self, short: &str, args: Value) -> Value {
        let service = format!("/rosapi/{short}");
        let v = self.request(json!({"op":"call_service","service":service,"args":args}));
        assert_eq!(v["op"], "service_response", "{v}");
        assert_eq!(v["service"], service, "{v}");
        v
    }

    /// Advertises `topic`: TCP confirms it with a status; WebSocket (the
    /// rosbridge dialect) does not, and the next request, answered in
    /// order, comes after it.
    fn advertise(&mut self, topic: &str, ty: &str) {
        let req = json!({"op":"advertise","topic":topic,"type":ty});
        match self {
            Conn::Tcp(_) => {
                let v = self.request(req);
                assert_eq!(v["level"], "info", "{v}");
            }
            Conn::Ws(ws) => ws.send_text(&req.to_string()),
        }
    }
}

/// `topics_and_raw_types`'s text for `topic`.
fn text_of(v: &Value, topic: &str) -> String {
    let topics = v["topics"].as_array().expect("topics");
    let i = topics
        .iter()
        .position(|t| t == topic)
        .unwrap_or_else(|| panic!("{topic} not listed: {v}"));
    assert_eq!(
        v["typedefs_full_text"].as_array().map(Vec::len),
        Some(topics.len()),
        "one text per topic: {v}"
    );
    v["typedefs_full_text"][i]
        .as_str()
        .expect("a string")
        .to_string()
}

/// A `share/` tree with one package of our own, removed when dropped.
struct Share(std::path::PathBuf);

impl Share {
    fn new() -> Share {
        let root = std::env::temp_dir().join(format!(
            "rosgate_typedefs_{}_{}",
            std::process::id(),
            uniq()
        ));
        let write = |rel: &str, text: &str| {
            let path = root.join(rel);
            std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
            std::fs::write(path, text).expect("write");
        };
        write(
            "share/demo_msgs/msg/Knob.msg",
            "# A knob.\nuint8 MODE_A=1\nstring LABEL=\"big # knob\"\nstd_msgs/Header header\nfloat32 gain 0.5\nint16[<=3] steps [1, 2]\n",
        );
        write(
            "share/demo_msgs/srv/Turn.srv",
            "Knob knob\nbool dry_run false\n---\nbool ok\nstring why\n",
        );
        write(
            "share/demo_msgs/action/Sweep.action",
            "float64 to\n---\nfloat64 reached\n---\nfloat64 at\n",
        );
        Share(root)
    }

    fn path(&self) -> &str {
        self.0.to_str().expect("UTF-8 path")
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn topics_and_raw_types_gives_each_known_topics_definition() {
    let share = Share::new();
    let gw = Gateway::start(&["--interfaces", share.path()]);
    for mut c in Conn::both(&gw) {
        let who = c.name();
        let n = uniq();
        c.advertise(&format!("/cam{n}"), "sensor_msgs/msg/Image");
        c.advertise(&format!("/pose{n}"), "geometry_msgs/PoseStamped");
        c.advertise(&format!("/knob{n}"), "demo_msgs/msg/Knob");
        c.advertise(&format!("/mystery{n}"), "mystery_msgs/msg/Thing");
        let v = c.rosapi("topics_and_raw_types", json!({}));
        assert_eq!(v["result"], true, "{who}: {v}");
        let v = &v["values"];
        assert!(v.get("typedefs_truncated").is_none(), "{who}: {v}");

        let image = text_of(v, &format!("/cam{n}"));
        assert_eq!(
            image,
            format!(
                "std_msgs/msg/Header header\nuint32 height\nuint32 width\nstring encoding\nuint8 is_bigendian\n\
                 uint32 step\nuint8[] data\n\n{SEP}\nMSG: std_msgs/msg/Header\nbuiltin_interfaces/msg/Time stamp\n\
                 string frame_id\n\n{SEP}\nMSG: builtin_interfaces/msg/Time\nint32 sec\nuint32 nanosec\n"
            ),
            "{who}"
        );
        let pose = text_of(v, &format!("/pose{n}"));
        let blocks: Vec<&str> = pose
            .lines()
            .filter_map(|l| l.strip_prefix("MSG: "))
            .collect();
        assert_eq!(
            blocks,
            [
                "geometry_msgs/msg/Pose",
                "geometry_msgs/msg/Quaternion",
                "geometry_msgs/msg/Point",
                "std_msgs/msg/Header",
                "builtin_interfaces/msg/Time"
            ],
            "{who}"
        );
        // --interfaces: constants and defaults kept, comments not.
        let knob = text_of(v, &format!("/knob{n}"));
        assert!(
            knob.starts_with(
                "uint8 MODE_A=1\nstring LABEL=\"big # knob\"\nstd_msgs/msg/Header header\nfloat32 gain 0.5\nint16[<=3] steps [1, 2]\n\n"
            ),
            "{who}: {knob}"
        );
        assert!(!knob.contains("A knob."), "{who}: {knob}");
        assert_eq!(text_of(v, &format!("/mystery{n}")), "", "{who}");
        // The gateway's own topics of bundled types too.
        assert!(
            text_of(v, "/rosout").contains("\nMSG: builtin_interfaces/msg/Time\n"),
            "{who}"
        );
    }
}

#[test]
fn details_give_rosapis_typedefs_for_messages_services_and_actions() {
    let share = Share::new();
    let gw = Gateway::start(&["--interfaces", share.path()]);
    for mut c in Conn::both(&gw) {
        let who = c.name();
        let v = c.rosapi(
            "message_details",
            json!({"type":"geometry_msgs/msg/PoseStamped"}),
        );
        assert_eq!(v["result"], true, "{who}: {v}");
        let defs = v["values"]["typedefs"]
            .as_array()
            .expect("typedefs")
            .clone();
        let types: Vec<&str> = defs.iter().filter_map(|d| d["type"].as_str()).collect();
        assert_eq!(
            types,
            [
                "geometry_msgs/PoseStamped",
                "std_msgs/Header",
                "builtin_interfaces/Time",
                "geometry_msgs/Pose",
                "geometry_msgs/Point",
                "geometry_msgs/Quaternion"
            ],
            "{who}"
        );
        assert_eq!(
            defs[5],
            json!({"type":"geometry_msgs/Quaternion","fieldnames":["x","y","z","w"],
                   "fieldtypes":["double","double","double","double"],"fieldarraylen":[-1,-1,-1,-1],
                   "examples":["0.0","0.0","0.0","1.0"],"constnames":[],"constvalues":[]}),
            "{who}"
        );

        let v = c.rosapi("message_details", json!({"type":"demo_msgs/Knob"}));
        assert_eq!(
            v["values"]["typedefs"][0],
            json!({"type":"demo_msgs/Knob","fieldnames":["header","gain","steps"],
                   "fieldtypes":["std_msgs/Header","float","int16"],"fieldarraylen":[-1,-1,0],
                   "examples":["{}","0.5","[]"],"constnames":["MODE_A","LABEL"],
                   "constvalues":["1","big # knob"]}),
            "{who}"
        );
        for (short, ty, first, names) in [
            (
                "service_request_details",
                "demo_msgs/srv/Turn",
                "demo_msgs/Turn_Request",
                json!(["knob", "dry_run"]),
            ),
            (
                "service_response_details",
                "demo_msgs/Turn",
                "demo_msgs/Turn_Response",
                json!(["ok", "why"]),
            ),
            (
                "action_goal_details",
                "demo_msgs/action/Sweep",
                "demo_msgs/Sweep_Goal",
                json!(["to"]),
            ),
            (
                "action_result_details",
                "demo_msgs/Sweep",
                "demo_msgs/Sweep_Result",
                json!(["reached"]),
            ),
            (
                "action_feedback_details",
                "demo_msgs/Sweep",
                "demo_msgs/Sweep_Feedback",
                json!(["at"]),
            ),
            (
                "service_request_details",
                "example_interfaces/srv/AddTwoInts",
                "example_interfaces/AddTwoInts_Request",
                json!(["a", "b"]),
            ),
        ] {
            let v = c.rosapi(short, json!({ "type": ty }));
            assert_eq!(v["result"], true, "{who} {short}: {v}");
            assert_eq!(
                v["values"]["typedefs"][0]["type"], first,
                "{who} {short}: {v}"
            );
            assert_eq!(
                v["values"]["typedefs"][0]["fieldnames"], names,
                "{who} {short}: {v}"
            );
        }
        // The request nests Knob, which nests Header and Time.
        let v = c.rosapi("service_request_details", json!({"type":"demo_msgs/Turn"}));
        assert_eq!(
            v["values"]["typedefs"].as_array().map(Vec::len),
            Some(4),
            "{who}: {v}"
        );

        // Unknown: a failure naming the type, with the caller's id.
        let v = c.request(json!({"op":"call_service","service":"rosapi/message_details","args":{"type":"nope_msgs/msg/Nope"}}));
        assert_failure(&v);
        assert_eq!(v["service"], "rosapi/message_details", "{who}: {v}");
        let why = v["values"].as_str().unwrap_or_default();
        assert!(
            why.contains("unknown message type \"nope_msgs/msg/Nope\""),
            "{who}: {why}"
        );
        let v = c.rosapi("action_goal_details", json!({"type":"demo_msgs/srv/Turn"}));
        assert_eq!(v["result"], false, "{who}: {v}");
    }
}

#[test]
fn interfaces_lists_every_type_known() {
    let share = Share::new();
    let gw = Gateway::start(&["--interfaces", share.path()]);
    for mut c in Conn::both(&gw) {
        let who = c.name();
        c.advertise(&format!("/own{}", uniq()), "own_msgs/Thing");
        let v = c.rosapi("interfaces", json!({}));
        assert_eq!(v["result"], true, "{who}: {v}");
        let list: Vec<String> = v["values"]["interfaces"]
            .as_array()
            .expect("a list")
            .iter()
            .map(|s| s.as_str().expect("a name").to_string())
            .collect();
        let mut sorted = list.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(list, sorted, "{who}: sorted, each once");
        for want in [
            "demo_msgs/msg/Knob",
            "demo_msgs/srv/Turn",
            "demo_msgs/action/Sweep",
            "sensor_msgs/msg/Image",
            "std_srvs/srv/Trigger",
            "example_interfaces/action/Fibonacci",
            // A type in use that the gateway does not know.
            "own_msgs/Thing",
        ] {
            assert!(list.iter().any(|i| i == want), "{who}: {want}");
        }
        assert!(list.len() > 150, "{who}: {}", list.len());
        assert!(
            !list
                .iter()
                .any(|i| i.ends_with("_Request") || i.ends_with("_FeedbackMessage")),
            "{who}"
        );
    }
}
