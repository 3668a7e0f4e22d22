//! rosgate in a ROS 2 graph that runs rmw_zenoh (`--ros-domain`): the real
//! gateway binary listens for Zenoh on a loopback port, and each test plays
//! a minimal rmw_zenoh node in-process with the `zenoh` crate (peer mode,
//! connecting to that endpoint, no scouting), as a Jazzy node connects to
//! its router: the node's own liveliness tokens, CDR payloads with the
//! 33-byte attachment, complete queryables. Clients talk raw bytes to the
//! gateway's TCP (NDJSON) and WebSocket ports.
//!
//! Not circular: token keys, attachments and CDR are checked against the
//! literals of `docs/rmw_zenoh.md` (from rmw_zenoh's design document,
//! docs/design.md in github.com/ros2/rmw_zenoh, and its sources), and the
//! attachments and CDR the fake node sends are built by hand here.
//! Built only with the `ros2` feature.

#[allow(dead_code)]
#[path = "it/fxclient.rs"]
mod fxclient;
#[allow(dead_code)]
#[path = "it/support.rs"]
mod support;
#[allow(dead_code)]
#[path = "it/wsclient.rs"]
mod wsclient;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rosgate_ros2::rmw::{self, Attachment, Endpoint, EntityKind, Qos, Token};
use serde_json::Value;
use support::*;
use wsclient::Ws;
use zenoh::liveliness::LivelinessToken;
use zenoh::query::{ConsolidationMode, Query, QueryTarget};
use zenoh::{Session, Wait};

/// The longest anything may take to cross between the fake node and the
/// gateway (a bound a test waits before failing, not a sleep).
const CROSS: Duration = Duration::from_secs(10);

const STRING_DDS: &str = "std_msgs::msg::dds_::String_";
const STRING_HASH: &str = "RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18";
const TWIST_DDS: &str = "geometry_msgs::msg::dds_::Twist_";
const TWIST_HASH: &str = "RIHS01_9c45bf16fe0983d80e3cfe750d6835843d265a9a6c46bd2e609fcddde6fb8d2a";
const ADD_DDS: &str = "example_interfaces::srv::dds_::AddTwoInts_";
const ADD_HASH: &str = "RIHS01_e118de6bf5eeb66a2491b5bda11202e7b68f198d6f67922cf30364858239c81a";

/// Data keys, written out as rmw_zenoh's design.md writes them.
const CHATTER_KEY: &str = "0/chatter/std_msgs::msg::dds_::String_/RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18";
const CMD_VEL_KEY: &str = "0/cmd_vel/geometry_msgs::msg::dds_::Twist_/RIHS01_9c45bf16fe0983d80e3cfe750d6835843d265a9a6c46bd2e609fcddde6fb8d2a";
const ADD_KEY: &str = "0/add_two_ints/example_interfaces::srv::dds_::AddTwoInts_/RIHS01_e118de6bf5eeb66a2491b5bda11202e7b68f198d6f67922cf30364858239c81a";
const MUL_KEY: &str = "0/mul/example_interfaces::srv::dds_::AddTwoInts_/RIHS01_e118de6bf5eeb66a2491b5bda11202e7b68f198d6f67922cf30364858239c81a";

fn free_port() -> u16 {
    free_zenoh_port()
}

/// A gateway in ROS domain 0, listening for Zenoh on a fresh loopback
/// port: (gateway, its Zenoh endpoint). The port is found free, then
/// released: another process may take it first, so a start that fails
/// is tried again on another port.
fn ros_gateway(extra: &[&str]) -> (Gateway, String) {
    let mut errors = Vec::new();
    for _ in 0..3 {
        let ep = format!("tcp/127.0.0.1:{}", free_port());
        let mut args = vec![
            "--listen",
            "127.0.0.1:0",
            "--ws-listen",
            "127.0.0.1:0",
            "--zenoh-listen",
            ep.as_str(),
            "--ros-domain",
            "0",
        ];
        args.extend_from_slice(extra);
        match Gateway::spawn_args(&args) {
            Ok(gw) => return (gw, ep),
            Err(e) => errors.push(e),
        }
    }
    panic!("the gateway did not start: {errors:#?}");
}

fn unix_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .expect("clock after 1970")
}

/// rmw_zenoh's attachment, built by hand (`docs/rmw_zenoh.md`,
/// "Attachment"): i64 LE sequence
/// number, i64 LE timestamp, varint 16, the GID.
fn attachment(seq: i64, ts: i64, gid: &[u8; 16]) -> Vec<u8> {
    let mut a = Vec::with_capacity(33);
    a.extend_from_slice(&seq.to_le_bytes());
    a.extend_from_slice(&ts.to_le_bytes());
    a.push(0x10);
    a.extend_from_slice(gid);
    a
}

/// Checks an attachment the gateway sent and returns (seq, gid).
fn check_attachment(a: &[u8]) -> (i64, [u8; 16]) {
    assert_eq!(a.len(), 33, "rmw_zenoh's attachment is 33 bytes: {a:02x?}");
    assert_eq!(a[16], 0x10, "varint(16) before the GID: {a:02x?}");
    let seq = i64::from_le_bytes(a[..8].try_into().expect("8 bytes"));
    let ts = i64::from_le_bytes(a[8..16].try_into().expect("8 bytes"));
    let skew = (unix_ns() - ts).abs();
    assert!(
        skew < 60_000_000_000,
        "the source timestamp is ns since the epoch, now: {ts}"
    );
    (seq, a[17..].try_into().expect("16 bytes"))
}

/// CDR of `std_msgs/msg/String`, by hand (`docs/rmw_zenoh.md`, "CDR
/// payloads").
/// A query a fake server received: its payload, and the sequence number
/// and GID of its attachment (checked as rmw_zenoh writes it).
fn served_request(q: &Query) -> (Vec<u8>, i64, [u8; 16]) {
    let att = q
        .attachment()
        .map(|a| a.to_bytes().to_vec())
        .unwrap_or_default();
    let req = q
        .payload()
        .map(|p| p.to_bytes().to_vec())
        .unwrap_or_default();
    let (seq, gid) = check_attachment(&att);
    (req, seq, gid)
}

fn cdr_string(s: &str) -> Vec<u8> {
    let mut b = vec![0x00, 0x01, 0x00, 0x00];
    b.extend_from_slice(&(s.len() as u32 + 1).to_le_bytes());
    b.extend_from_slice(s.as_bytes());
    b.push(0);
    b
}

/// CDR of a struct of int64s (AddTwoInts request `{a,b}`, response `{sum}`).
fn cdr_i64s(v: &[i64]) -> Vec<u8> {
    let mut b = vec![0x00, 0x01, 0x00, 0x00];
    for x in v {
        b.extend_from_slice(&x.to_le_bytes());
    }
    b
}

/// CDR of `geometry_msgs/msg/Twist`: header, then linear and angular
/// Vector3s (six float64, no padding).
fn cdr_twist(linear: [f64; 3], angular: [f64; 3]) -> Vec<u8> {
    let mut b = vec![0x00, 0x01, 0x00, 0x00];
    for x in linear.iter().chain(angular.iter()) {
        b.extend_from_slice(&x.to_le_bytes());
    }
    b
}

/// A minimal rmw_zenoh node: a peer session connected to the gateway,
/// its node token (id 0), entity ids from one counter.
struct RosNode {
    session: Session,
    zid: String,
    name: String,
    next_id: u64,
    _node_token: LivelinessToken,
}

impl RosNode {
    /// Joins the gateway at `endpoint` and waits until the gateway's own
    /// node token is seen (the link is up both ways).
    fn join(endpoint: &str, name: &str) -> RosNode {
        let mut c = zenoh::Config::default();
        for (k, v) in [
            ("mode", r#""peer""#.to_string()),
            ("connect/endpoints", format!("[{endpoint:?}]")),
            ("listen/endpoints", r#"["tcp/127.0.0.1:0"]"#.to_string()),
            ("scouting/multicast/enabled", "false".to_string()),
            ("timestamping/enabled", "true".to_string()),
        ] {
            c.insert_json5(k, &v)
                .unwrap_or_else(|e| panic!("zenoh config {k}: {e}"));
        }
        let session = zenoh::open(c).wait().expect("open a zenoh session");
        let zid = session.zid().to_string();
        let tok = Token {
            domain: 0,
            zid: zid.clone(),
            nid: 0,
            id: 0,
            kind: EntityKind::Node,
            enclave: "/".into(),
            namespace: "/".into(),
            node: name.into(),
            endpoint: None,
        };
        let key = tok.to_key();
        assert_eq!(key, format!("@ros2_lv/0/{zid}/0/0/NN/%/%/{name}"));
        let node_token = session
            .liveliness()
            .declare_token(key)
            .wait()
            .expect("node token");
        let node = RosNode {
            session,
            zid,
            name: name.into(),
            next_id: 1,
            _node_token: node_token,
        };
        node.wait_graph("the gateway's node token", |t| t.kind == EntityKind::Node);
        node
    }

    /// Declares this node's `/chatter` publisher (std_msgs/msg/String,
    /// depth 7); returns its token key, its GID (for the samples'
    /// attachments) and the token.
    fn declare_chatter(&mut self) -> (String, [u8; 16], LivelinessToken) {
        let (key, token) = self.declare(
            EntityKind::Publisher,
            "/chatter",
            STRING_DDS,
            STRING_HASH,
            7,
        );
        let gid = rmw::gid(&key);
        (key, gid, token)
    }

    /// Puts `cdr` on `/chatter` as sample `seq` of the publisher `gid`.
    fn put_chatter(&self, seq: i64, gid: &[u8; 16], cdr: Vec<u8>) {
        self.session
            .put(CHATTER_KEY, cdr)
            .attachment(attachment(seq, unix_ns(), gid))
            .wait()
            .expect("put");
    }

    /// Declares an entity token of this node, as rmw_zenoh does; returns
    /// the token and its key (whose hash is the entity's GID).
    fn declare(
        &mut self,
        kind: EntityKind,
        name: &str,
        dds_type: &str,
        hash: &str,
        depth: u32,
    ) -> (String, LivelinessToken) {
        let id = self.next_id;
        self.next_id += 1;
        let key = Token {
            domain: 0,
            zid: self.zid.clone(),
            nid: 0,
            id,
            kind,
            enclave: "/".into(),
            namespace: "/".into(),
            node: self.name.clone(),
            endpoint: Some(Endpoint {
                name: name.into(),
                dds_type: dds_type.into(),
                hash: hash.into(),
                qos: Qos::keep_last(depth),
            }),
        }
        .to_key();
        let token = self
            .session
            .liveliness()
            .declare_token(key.clone())
            .wait()
            .expect("entity token");
        (key, token)
    }

    /// Every token of domain 0, by a liveliness get (as rmw_zenoh builds
    /// its graph at start).
    fn graph(&self) -> Vec<String> {
        let replies = self
            .session
            .liveliness()
            .get("@ros2_lv/0/**")
            .timeout(Duration::from_secs(2))
            .wait()
            .expect("liveliness get");
        let mut keys = Vec::new();
        while let Ok(r) = replies.recv() {
            if let Ok(s) = r.result() {
                keys.push(s.key_expr().as_str().to_string());
            }
        }
        keys
    }

    /// Polls the graph until another session's token satisfies `pred`:
    /// (its key, parsed).
    fn wait_graph(&self, what: &str, pred: impl Fn(&Token) -> bool) -> (String, Token) {
        let dl = deadline(CROSS);
        loop {
            let keys = self.graph();
            let found = keys.iter().find_map(|k| {
                let t = Token::parse(k)?;
                (t.zid != self.zid && pred(&t)).then(|| (k.clone(), t))
            });
            if let Some(f) = found {
                return f;
            }
            assert!(
                Instant::now() < dl,
                "never saw {what} within {CROSS:?}: {keys:?}"
            );
            thread::sleep(ms(20));
        }
    }
}

/// Reads WebSocket frames until a JSON one satisfies `pred`.
/// Calls `put` until a TCP and a WebSocket subscriber have each received
/// a message (the gateway's data subscription is in), each checked by
/// `check`.
fn probe_until_both_hear(
    tcp: &mut Client,
    ws: &mut Ws,
    mut put: impl FnMut(),
    check: impl Fn(&Value),
) {
    let (mut tcp_heard, mut ws_heard) = (false, false);
    let dl = deadline(CROSS);
    while !(tcp_heard && ws_heard) {
        assert!(
            Instant::now() < dl,
            "no probe crossed within {CROSS:?} (tcp {tcp_heard}, ws {ws_heard})"
        );
        put();
        if !tcp_heard {
            if let Recv::Line(l) = tcp.try_recv_line(deadline(ms(50))) {
                check(&parse_line(&String::from_utf8_lossy(&l)));
                tcp_heard = true;
            }
        }
        if !ws_heard {
            if let Some((0x1, p)) = ws.try_frame(deadline(ms(50))) {
                check(&serde_json::from_slice(&p).expect("JSON"));
                ws_heard = true;
            }
        }
    }
}

fn ws_until(ws: &mut Ws, pred: impl Fn(&Value) -> bool, dl: Instant) -> Value {
    loop {
        let Some((op, payload)) = ws.try_frame(dl) else {
            panic!("no matching WebSocket frame before the deadline");
        };
        assert_eq!(op, 0x1, "text frames only");
        let v: Value = serde_json::from_slice(&payload).expect("JSON frame");
        if pred(&v) {
            return v;
        }
    }
}

fn call_values(c: &mut Client, service: &str, args: &str) -> Value {
    let id = format!("call-{}", uniq());
    c.call(service, &format!("{id:?}"), args);
    let (v, _) = c.recv_until(|v| v["id"] == id.as_str(), deadline(REPLY));
    v
}

#[test]
fn the_documented_literals_are_what_the_node_here_declares_and_sends() {
    // design.md's talker: a token rendered from its parts, byte for byte.
    let talker = Token {
        domain: 0,
        zid: "8b20917502ee955ac4476e0266340d5c".into(),
        nid: 0,
        id: 10,
        kind: EntityKind::Publisher,
        enclave: "/".into(),
        namespace: "/".into(),
        node: "talker".into(),
        endpoint: Some(Endpoint {
            name: "/chatter".into(),
            dds_type: STRING_DDS.into(),
            hash: STRING_HASH.into(),
            qos: Qos::keep_last(7),
        }),
    };
    let key = "@ros2_lv/0/8b20917502ee955ac4476e0266340d5c/0/10/MP/%/%/talker/%chatter/std_msgs::msg::dds_::String_/RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18/::,7:,:,:,,";
    assert_eq!(talker.to_key(), key);
    assert_eq!(
        talker.node_token().to_key(),
        "@ros2_lv/0/8b20917502ee955ac4476e0266340d5c/0/0/NN/%/%/talker"
    );
    let gid: [u8; 16] = [
        0xeb, 0x85, 0xfa, 0x88, 0x3b, 0x78, 0x46, 0xdc, 0x44, 0x8a, 0x45, 0x01, 0x89, 0x0a, 0xd0,
        0x62,
    ];
    assert_eq!(rmw::gid(key), gid, "docs/rmw_zenoh.md's GID");
    assert_eq!(
        talker.data_key().as_deref(),
        Some(CHATTER_KEY),
        "design.md's data key"
    );
    // docs/rmw_zenoh.md's attachment example, and the hand-built one here.
    let spec: [u8; 33] = [
        0x01, 0, 0, 0, 0, 0, 0, 0, 0x15, 0xcd, 0x85, 0x3d, 0xfe, 0x9c, 0x97, 0x17, 0x10, 0xeb,
        0x85, 0xfa, 0x88, 0x3b, 0x78, 0x46, 0xdc, 0x44, 0x8a, 0x45, 0x01, 0x89, 0x0a, 0xd0, 0x62,
    ];
    assert_eq!(attachment(1, 1_700_000_000_123_456_789, &gid), spec);
    let a = Attachment {
        seq: 1,
        timestamp_ns: 1_700_000_000_123_456_789,
        gid,
    };
    assert_eq!(a.encode(), spec);
    // docs/rmw_zenoh.md's CDR examples.
    assert_eq!(
        cdr_string("Hello World: 1"),
        [
            0x00, 0x01, 0x00, 0x00, 0x0f, 0x00, 0x00, 0x00, b'H', b'e', b'l', b'l', b'o', b' ',
            b'W', b'o', b'r', b'l', b'd', b':', b' ', b'1', 0x00
        ]
    );
    assert_eq!(cdr_i64s(&[2, 3]).len(), 20);
}

#[test]
fn ros2_messages_reach_tcp_and_websocket_subscribers_in_order() {
    let (gw, ep) = ros_gateway(&[]);
    let mut node = RosNode::join(&ep, "talker");
    let (mp_key, gid, _mp) = node.declare_chatter();
    assert_eq!(
        mp_key,
        format!(
            "@ros2_lv/0/{}/0/1/MP/%/%/talker/%chatter/std_msgs::msg::dds_::String_/RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18/::,7:,:,:,,",
            node.zid
        )
    );

    let mut tcp = gw.client();
    tcp.send_line(
        r#"{"op":"subscribe","topic":"/chatter","type":"std_msgs/msg/String","id":"tsub"}"#,
    );
    tcp.expect_info("tsub");
    let mut ws = Ws::connect(&gw);
    ws.send_text(
        r#"{"op":"subscribe","topic":"/chatter","type":"std_msgs/msg/String","id":"wsub"}"#,
    );
    // rosbridge's dialect sends no info status: a barrier instead.
    assert!(ws.barrier().is_empty(), "no error for the subscribe");

    let mut seq = 0i64;
    let mut put = |text: &str| {
        seq += 1;
        node.put_chatter(seq, &gid, cdr_string(text));
    };
    // Probes until both subscribers hear one: the gateway's data
    // subscription is in.
    probe_until_both_hear(
        &mut tcp,
        &mut ws,
        || put("probe"),
        |v| {
            assert_eq!(v["msg"], serde_json::json!({"data":"probe"}), "{v}");
        },
    );
    let texts: Vec<String> = (0..20)
        .map(|i| format!("hello {i}: na\u{ef}ve \"quoted\"\t\\ {}", "x".repeat(i * 7)))
        .collect();
    for t in &texts {
        put(t);
    }
    for t in &texts {
        let v = loop {
            let l = tcp.recv_raw(deadline(REPLY));
            let v = parse_line(&l);
            if v["msg"]["data"] != "probe" {
                break v;
            }
        };
        assert_eq!(v["op"], "publish", "{v}");
        assert_eq!(v["topic"], "/chatter", "{v}");
        assert_eq!(v["msg"], serde_json::json!({ "data": t }), "in order");
        let w = ws_until(&mut ws, |v| v["msg"]["data"] != "probe", deadline(REPLY));
        assert_eq!(w["op"], "publish", "{w}");
        assert_eq!(w["topic"], "/chatter", "{w}");
        assert_eq!(w["msg"], serde_json::json!({ "data": t }), "in order");
    }
    tcp.assert_quiet();
    assert!(ws.barrier().is_empty(), "nothing more on the WebSocket");
}

#[test]
fn client_messages_reach_a_ros2_subscription_as_cdr_with_rmw_attachments() {
    let (gw, ep) = ros_gateway(&[]);
    let mut node = RosNode::join(&ep, "listener");
    let sub = node
        .session
        .declare_subscriber(CMD_VEL_KEY)
        .wait()
        .expect("subscriber");
    let (ms_key, _ms) = node.declare(
        EntityKind::Subscription,
        "/cmd_vel",
        TWIST_DDS,
        TWIST_HASH,
        10,
    );
    assert!(ms_key.ends_with(
        "/MS/%/%/listener/%cmd_vel/geometry_msgs::msg::dds_::Twist_/RIHS01_9c45bf16fe0983d80e3cfe750d6835843d265a9a6c46bd2e609fcddde6fb8d2a/::,10:,:,:,,"
    ));
    let mut c = gw.client();
    c.send_line(
        r#"{"op":"advertise","topic":"/cmd_vel","type":"geometry_msgs/msg/Twist","id":"adv"}"#,
    );
    c.expect_info("adv");
    let probe = r#"{"linear":{"x":1.5}}"#;
    let dl = deadline(CROSS);
    let first = loop {
        assert!(
            Instant::now() < dl,
            "nothing reached ROS 2 within {CROSS:?}"
        );
        c.publish("/cmd_vel", probe);
        if let Ok(Some(s)) = sub.recv_timeout(ms(100)) {
            break s;
        }
    };
    // One more, told apart by its value: everything before it is a probe.
    c.publish("/cmd_vel", r#"{"linear":{"x":2.5},"angular":{"z":-0.25}}"#);
    let mut samples = vec![first];
    let dl = deadline(REPLY);
    loop {
        let s = sub
            .recv_deadline(dl)
            .expect("subscriber open")
            .expect("the last message reached ROS 2");
        let last = s.payload().to_bytes().get(4..12) == Some(&2.5f64.to_le_bytes()[..]);
        samples.push(s);
        if last {
            break;
        }
    }
    let probe_cdr = cdr_twist([1.5, 0.0, 0.0], [0.0; 3]);
    let last_cdr = cdr_twist([2.5, 0.0, 0.0], [0.0, 0.0, -0.25]);
    assert_eq!(probe_cdr.len(), 52);
    assert_eq!(&probe_cdr[..4], &[0x00, 0x01, 0x00, 0x00]);
    let mut gids = Vec::new();
    for (i, s) in samples.iter().enumerate() {
        assert_eq!(s.key_expr().as_str(), CMD_VEL_KEY);
        let want = if i + 1 == samples.len() {
            &last_cdr
        } else {
            &probe_cdr
        };
        assert_eq!(&*s.payload().to_bytes(), &want[..], "CDR of sample {i}");
        let a = s.attachment().expect("every sample has an attachment");
        let (seq, gid) = check_attachment(&a.to_bytes());
        assert_eq!(seq, i as i64 + 1, "sequence numbers count from 1");
        gids.push(gid);
    }
    assert!(gids.windows(2).all(|w| w[0] == w[1]), "one publisher GID");
    // The gateway declared a publisher of /cmd_vel with the subscription's
    // type, and its GID is the one in the attachments.
    let (mp_key, mp) = node.wait_graph("the gateway's MP token for /cmd_vel", |t| {
        t.kind == EntityKind::Publisher && t.endpoint.as_ref().is_some_and(|e| e.name == "/cmd_vel")
    });
    let e = mp.endpoint.as_ref().expect("endpoint");
    assert_eq!(e.dds_type, TWIST_DDS, "{mp_key}");
    assert_eq!(e.hash, TWIST_HASH, "{mp_key}");
    assert_eq!(
        rmw::gid(&mp_key),
        gids[0],
        "the attachment's GID is {mp_key}'s"
    );
    assert_eq!(mp.to_key(), mp_key, "a token rmw_zenoh re-renders as is");
    // A field of the wrong type: an error naming it, with the id; nothing
    // reaches ROS 2.
    let id = "bad-twist";
    c.send_line(&format!(
        r#"{{"op":"publish","topic":"/cmd_vel","msg":{{"linear":{{"x":"fast"}}}},"id":"{id}"}}"#
    ));
    let v = c.recv();
    assert_eq!(v["op"], "status", "{v}");
    assert_eq!(v["level"], "error", "{v}");
    assert_eq!(v["id"], id, "{v}");
    assert!(
        v["msg"].as_str().is_some_and(|m| m.contains("linear.x")),
        "names the field: {v}"
    );
    c.assert_quiet();
    assert!(
        matches!(sub.recv_timeout(ms(300)), Ok(None)),
        "a message that does not fit reached ROS 2"
    );
}

/// A client's raw CDR publish (`{"bytes":..}`, docs/protocol.md "Raw CDR")
/// reaches a ROS 2 subscription of its type as the client's bytes: a
/// trailing padding byte 0xab no encoder of ours would write included
/// (nothing decoded and encoded again); its JSON form still reaches a
/// TCP subscriber.
#[test]
fn a_clients_raw_cdr_reaches_a_ros2_subscription_byte_for_byte() {
    let (gw, ep) = ros_gateway(&[]);
    let mut node = RosNode::join(&ep, "raw_listener");
    let sub = node
        .session
        .declare_subscriber(CHATTER_KEY)
        .wait()
        .expect("subscriber");
    let _ms = node.declare(
        EntityKind::Subscription,
        "/chatter",
        STRING_DDS,
        STRING_HASH,
        10,
    );
    let mut listener = gw.client();
    listener.subscribe("/chatter");
    let mut c = gw.client();
    c.send_line(r#"{"op":"advertise","topic":"/chatter","type":"std_msgs/msg/String","id":"adv"}"#);
    c.expect_info("adv");
    let mut own = cdr_string("raw");
    own.push(0xab);
    let ints: Vec<String> = own.iter().map(|b| b.to_string()).collect();
    let msg = format!(r#"{{"bytes":[{}]}}"#, ints.join(","));
    let dl = deadline(CROSS);
    let got = loop {
        assert!(
            Instant::now() < dl,
            "nothing reached ROS 2 within {CROSS:?}"
        );
        c.publish("/chatter", &msg);
        if let Ok(Some(s)) = sub.recv_timeout(ms(100)) {
            break s.payload().to_bytes().to_vec();
        }
    };
    assert_eq!(got, own, "the client's CDR, byte for byte");
    let v = listener.recv();
    assert_eq!(v["msg"]["data"], "raw", "{v}");
}

const POINT32_DDS: &str = "geometry_msgs::msg::dds_::Point32_";
/// From rosidl's `geometry_msgs/msg/Point32.json` (Jazzy).
const POINT32_HASH: &str =
    "RIHS01_2fc4db7cae16a4582c79a56b66173a8d48d52c7dc520ddc55a0d4bcf2a4bfdbc";

/// CDR of `geometry_msgs/msg/Point32` (three float32) from bit patterns.
fn cdr_point32(bits: [u32; 3]) -> Vec<u8> {
    let mut b = vec![0x00, 0x01, 0x00, 0x00];
    for x in bits {
        b.extend_from_slice(&x.to_le_bytes());
    }
    b
}

/// float32 edges from ROS 2 reach TCP and WebSocket subscribers as the
/// JSON docs/ros2.md ("Floats") gives, and each client's publish of the
/// message it received reaches ROS 2 as the same bits: f32::MAX written
/// shortest (`3.4028235e+38`, above f32::MAX as a double) was refused as
/// out of range, and the infinities arrived as `null`, then as NaN.
#[test]
fn float32_edges_cross_from_ros2_to_clients_and_back_bit_for_bit() {
    let (gw, ep) = ros_gateway(&[]);
    let mut node = RosNode::join(&ep, "floats");
    let out_key = format!("0/floats_out/{POINT32_DDS}/{POINT32_HASH}");
    let back_key = format!("0/floats_back/{POINT32_DDS}/{POINT32_HASH}");
    let (mp_key, _mp) = node.declare(
        EntityKind::Publisher,
        "/floats_out",
        POINT32_DDS,
        POINT32_HASH,
        10,
    );
    let gid = rmw::gid(&mp_key);
    let back = node
        .session
        .declare_subscriber(back_key.as_str())
        .wait()
        .expect("subscriber");
    let _ms = node.declare(
        EntityKind::Subscription,
        "/floats_back",
        POINT32_DDS,
        POINT32_HASH,
        10,
    );

    let sub = |id: &str| {
        format!(
            r#"{{"op":"subscribe","topic":"/floats_out","type":"geometry_msgs/msg/Point32","id":"{id}"}}"#
        )
    };
    let adv = |id: &str| {
        format!(
            r#"{{"op":"advertise","topic":"/floats_back","type":"geometry_msgs/msg/Point32","id":"{id}"}}"#
        )
    };
    let mut tcp = gw.client();
    tcp.send_line(&sub("tsub"));
    tcp.expect_info("tsub");
    tcp.send_line(&adv("tadv"));
    tcp.expect_info("tadv");
    let mut ws = Ws::connect(&gw);
    ws.send_text(&sub("wsub"));
    ws.send_text(&adv("wadv"));
    assert!(ws.barrier().is_empty(), "no error for the subscribe");

    let mut seq = 0i64;
    let mut put = |bits: [u32; 3]| {
        seq += 1;
        node.session
            .put(out_key.as_str(), cdr_point32(bits))
            .attachment(attachment(seq, unix_ns(), &gid))
            .wait()
            .expect("put");
    };
    // Probes (all zeros) until both subscribers hear one.
    probe_until_both_hear(&mut tcp, &mut ws, || put([0; 3]), |_| {});
    // And the other way: probes until ROS 2 hears one.
    let zeros = cdr_point32([0; 3]);
    let dl = deadline(CROSS);
    loop {
        assert!(
            Instant::now() < dl,
            "nothing reached ROS 2 within {CROSS:?}"
        );
        tcp.publish("/floats_back", r#"{"x":0,"y":0,"z":0}"#);
        if let Ok(Some(s)) = back.recv_timeout(ms(100)) {
            assert_eq!(&*s.payload().to_bytes(), &zeros[..]);
            break;
        }
    }
    let cases: [([u32; 3], &str); 3] = [
        (
            [
                f32::MAX.to_bits(),
                f32::NAN.to_bits(),
                f32::NEG_INFINITY.to_bits(),
            ],
            r#"{"x":3.4028235e+38,"y":null,"z":"-Infinity"}"#,
        ),
        (
            [f32::INFINITY.to_bits(), (-0.0f32).to_bits(), 1],
            r#"{"x":"Infinity","y":-0.0,"z":1e-45}"#,
        ),
        (
            [
                f32::MIN.to_bits(),
                f32::MIN_POSITIVE.to_bits(),
                0.1f32.to_bits(),
            ],
            r#"{"x":-3.4028235e+38,"y":1.1754944e-38,"z":0.1}"#,
        ),
    ];
    let not_probe = |v: &Value| v["msg"] != serde_json::json!({"x": 0.0, "y": 0.0, "z": 0.0});
    for (bits, want) in cases {
        put(bits);
        let line = tcp.recv_raw_until(not_probe, deadline(REPLY));
        let msg_at = line.find(r#""msg":"#).expect("a msg") + 6;
        assert!(line[msg_at..].starts_with(want), "TCP: {line}, want {want}");
        let w = ws_until(&mut ws, not_probe, deadline(REPLY));
        let want_v: Value = serde_json::from_str(want).expect("JSON");
        assert_eq!(w["msg"], want_v, "WebSocket");
        // Each client sends back what it received; ROS 2 gets the bits.
        tcp.publish("/floats_back", want);
        ws.send_text(&format!(
            r#"{{"op":"publish","topic":"/floats_back","msg":{}}}"#,
            w["msg"]
        ));
        // Both clients' messages, in either order, after any late probe.
        let mut heard = 0;
        while heard < 2 {
            let s = back
                .recv_deadline(deadline(REPLY))
                .expect("subscriber open")
                .unwrap_or_else(|| panic!("{want}: {heard} of 2 reached ROS 2"));
            let got = s.payload().to_bytes();
            if *got != zeros[..] {
                assert_eq!(&*got, &cdr_point32(bits)[..], "{want}");
                heard += 1;
            }
        }
    }
    tcp.assert_quiet();
    assert!(ws.barrier().is_empty(), "no error on the WebSocket");
}

/// Queries a server holds unanswered.
type Held = Arc<Mutex<Vec<Query>>>;
/// The attachments of the requests a server received.
type Seen = Arc<Mutex<Vec<Vec<u8>>>>;

/// `/add_two_ints` served by the fake node: a complete queryable that
/// answers `{sum}` with the request's seq and GID echoed, except for
/// `a == 99`, which it holds unanswered. Returns the requests' attachments
/// and the held queries.
fn serve_add_two_ints(node: &RosNode) -> (zenoh::query::Queryable<()>, Seen, Held) {
    let seen: Seen = Arc::default();
    let held: Held = Arc::default();
    let (seen2, held2) = (seen.clone(), held.clone());
    let q = node
        .session
        .declare_queryable(ADD_KEY)
        .complete(true)
        .callback(move |q: Query| {
            let att = q
                .attachment()
                .map(|a| a.to_bytes().to_vec())
                .unwrap_or_default();
            let req = q
                .payload()
                .map(|p| p.to_bytes().to_vec())
                .unwrap_or_default();
            seen2.lock().unwrap().push(att.clone());
            if req.len() != 20 || req[..4] != [0, 1, 0, 0] || att.len() != 33 {
                let _ = q.reply_err("not an AddTwoInts request").wait();
                return;
            }
            let a = i64::from_le_bytes(req[4..12].try_into().unwrap());
            let b = i64::from_le_bytes(req[12..20].try_into().unwrap());
            if a == 99 {
                held2.lock().unwrap().push(q);
                return;
            }
            let seq = i64::from_le_bytes(att[..8].try_into().unwrap());
            let gid: [u8; 16] = att[17..].try_into().unwrap();
            let _ = q
                .reply(q.key_expr().clone(), cdr_i64s(&[a + b]))
                .attachment(attachment(seq, unix_ns(), &gid))
                .wait();
        })
        .wait()
        .expect("queryable");
    (q, seen, held)
}

fn ws_call(ws: &mut Ws, id: &str, args: &str) -> Value {
    ws.send_text(&format!(
        r#"{{"op":"call_service","service":"/add_two_ints","id":{id},"args":{args}}}"#
    ));
    let want: Value = serde_json::from_str(id).expect("id JSON");
    ws_until(
        ws,
        |v| v["op"] == "service_response" && v["id"] == want,
        deadline(REPLY),
    )
}

#[test]
fn websocket_calls_reach_a_ros2_server_and_fail_at_once_when_it_goes() {
    // A long call timeout: a failure within a few seconds is not it.
    let (gw, ep) = ros_gateway(&["--call-timeout-ms", "30000"]);
    let mut node = RosNode::join(&ep, "add_two_ints_server");
    let (_queryable, seen, held) = serve_add_two_ints(&node);
    let (_ss_key, _ss) = node.declare(
        EntityKind::ServiceServer,
        "/add_two_ints",
        ADD_DDS,
        ADD_HASH,
        10,
    );
    let mut ws = Ws::connect(&gw);
    // Until the gateway knows the server, calls fail; then they pass.
    let dl = deadline(CROSS);
    loop {
        let v = ws_call(
            &mut ws,
            &format!("\"probe-{}\"", uniq()),
            r#"{"a":1,"b":2}"#,
        );
        if v["result"] == true {
            assert_eq!(v["values"], serde_json::json!({"sum":3}), "{v}");
            break;
        }
        assert!(Instant::now() < dl, "the ROS 2 server never answered: {v}");
        thread::sleep(ms(50));
    }
    for (i, (a, b)) in [(40i64, 2i64), (-7, 1 << 40), (i64::MAX - 1, 1)]
        .into_iter()
        .enumerate()
    {
        let id = format!(r#"{{"caller":"ws","n":[{i},"x"]}}"#);
        let v = ws_call(&mut ws, &id, &format!(r#"{{"a":{a},"b":{b}}}"#));
        assert_eq!(v["result"], true, "{v}");
        assert_eq!(v["service"], "/add_two_ints", "{v}");
        assert_eq!(v["values"], serde_json::json!({ "sum": a + b }), "{v}");
    }
    // Requests carry rmw_zenoh's attachment: one sequence number each,
    // counted from 1, and one client GID.
    let (seqs, gids): (Vec<i64>, Vec<[u8; 16]>) = seen
        .lock()
        .unwrap()
        .iter()
        .map(|a| check_attachment(a))
        .unzip();
    assert_eq!(seqs.first(), Some(&1), "{seqs:?}");
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
    assert!(gids.windows(2).all(|w| w[0] == w[1]), "one client GID");
    // As rmw_zenoh's clients do: the GID of the gateway's client (SC)
    // entity of this service, whose token the graph shows.
    let client_gids: Vec<[u8; 16]> = node
        .graph()
        .iter()
        .filter(|k| {
            Token::parse(k).is_some_and(|t| {
                t.zid != node.zid
                    && t.kind == rmw::EntityKind::ServiceClient
                    && t.endpoint
                        .as_ref()
                        .is_some_and(|e| e.name == "/add_two_ints")
            })
        })
        .map(|k| rmw::gid(k))
        .collect();
    assert_eq!(
        client_gids,
        vec![gids[0]],
        "the requests' GID is not the gateway's SC token's"
    );
    // A call in flight when the server's session closes fails at once,
    // and so does the next one.
    ws.send_text(
        r#"{"op":"call_service","service":"/add_two_ints","id":"held","args":{"a":99,"b":0}}"#,
    );
    let dl = deadline(REPLY);
    while held.lock().unwrap().is_empty() {
        assert!(
            Instant::now() < dl,
            "the held call never reached the server"
        );
        thread::sleep(ms(10));
    }
    let t = Instant::now();
    node.session.close().wait().expect("close");
    let v = ws_until(&mut ws, |v| v["id"] == "held", deadline(REPLY));
    assert_failure(&v);
    assert!(
        t.elapsed() < Duration::from_secs(4),
        "at once, not at the call timeout: {:?}",
        t.elapsed()
    );
    let t = Instant::now();
    let v = ws_call(&mut ws, r#""after""#, r#"{"a":1,"b":1}"#);
    assert_failure(&v);
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "at once: {:?}",
        t.elapsed()
    );
    assert!(ws.barrier().is_empty(), "one response per call");
    drop(held);
}

#[test]
fn a_ros2_client_calls_a_service_a_tcp_client_provides() {
    let (gw, ep) = ros_gateway(&[]);
    let mut node = RosNode::join(&ep, "add_two_ints_client");
    let mut provider = gw.client();
    provider.send_line(
        r#"{"op":"advertise_service","service":"/mul","type":"example_interfaces/srv/AddTwoInts","id":"adv"}"#,
    );
    provider.expect_info("adv");
    let (sc_key, _sc) = node.declare(EntityKind::ServiceClient, "/mul", ADD_DDS, ADD_HASH, 10);
    let gid = rmw::gid(&sc_key);
    let (ss_key, ss) = node.wait_graph("the gateway's SS token for /mul", |t| {
        t.kind == EntityKind::ServiceServer && t.endpoint.as_ref().is_some_and(|e| e.name == "/mul")
    });
    assert_eq!(ss.data_key().as_deref(), Some(MUL_KEY), "{ss_key}");
    let replies = node
        .session
        .get(MUL_KEY)
        .payload(cdr_i64s(&[6, 7]))
        .attachment(attachment(7, unix_ns(), &gid))
        .target(QueryTarget::AllComplete)
        .consolidation(ConsolidationMode::None)
        .timeout(CROSS)
        .wait()
        .expect("get");
    let (call, _) = provider.recv_until(|v| v["op"] == "call_service", deadline(REPLY));
    assert_eq!(call["service"], "/mul", "{call}");
    assert_eq!(call["args"], serde_json::json!({"a":6,"b":7}), "{call}");
    provider.respond("/mul", &call["id"].to_string(), r#"{"sum":42}"#, "true");
    let reply = replies
        .recv_timeout(REPLY)
        .expect("replies open")
        .expect("a reply");
    let sample = reply.result().expect("an OK reply");
    assert_eq!(sample.key_expr().as_str(), MUL_KEY);
    assert_eq!(&*sample.payload().to_bytes(), &cdr_i64s(&[42])[..]);
    let a = sample.attachment().expect("the reply has an attachment");
    let (seq, echoed) = check_attachment(&a.to_bytes());
    assert_eq!(seq, 7, "the request's sequence number");
    assert_eq!(echoed, gid, "the client's GID");
    // Exactly one reply: the query ends after it.
    match replies.recv_deadline(deadline(REPLY)) {
        Err(_) => {}
        Ok(None) => panic!("the query never ended"),
        Ok(Some(r)) => panic!("a second reply: {:?}", r.result().map(|s| s.key_expr())),
    }
    provider.assert_quiet();
}

#[test]
fn a_ros2_clients_call_gets_one_error_reply_when_the_provider_leaves() {
    let (gw, ep) = ros_gateway(&[]);
    let mut node = RosNode::join(&ep, "add_two_ints_client");
    let mut provider = gw.client();
    provider.send_line(
        r#"{"op":"advertise_service","service":"/mul","type":"example_interfaces/srv/AddTwoInts","id":"adv"}"#,
    );
    provider.expect_info("adv");
    let (sc_key, _sc) = node.declare(EntityKind::ServiceClient, "/mul", ADD_DDS, ADD_HASH, 10);
    let gid = rmw::gid(&sc_key);
    node.wait_graph("the gateway's SS token for /mul", |t| {
        t.kind == EntityKind::ServiceServer && t.endpoint.as_ref().is_some_and(|e| e.name == "/mul")
    });
    let replies = node
        .session
        .get(MUL_KEY)
        .payload(cdr_i64s(&[6, 7]))
        .attachment(attachment(8, unix_ns(), &gid))
        .target(QueryTarget::AllComplete)
        .consolidation(ConsolidationMode::None)
        .timeout(CROSS)
        .wait()
        .expect("get");
    provider.recv_until(|v| v["op"] == "call_service", deadline(REPLY));
    // The provider withdraws the service instead of answering.
    provider.send_line(r#"{"op":"unadvertise_service","service":"/mul"}"#);
    let reply = replies
        .recv_timeout(REPLY)
        .expect("replies open")
        .expect("a reply");
    let err = match reply.result() {
        Ok(s) => panic!("an OK reply from a provider that left: {:?}", s.payload()),
        Err(e) => String::from_utf8_lossy(&e.payload().to_bytes()).into_owned(),
    };
    assert!(err.contains("left"), "{err}");
    match replies.recv_deadline(deadline(REPLY)) {
        Err(_) => {}
        Ok(None) => panic!("the query never ended"),
        Ok(Some(r)) => panic!("a second reply: {:?}", r.result().map(|s| s.key_expr())),
    }
}

fn rosapi_topics(gw: &Gateway) -> Vec<(String, String)> {
    let mut c = gw.client();
    let v = call_values(&mut c, "/rosapi/topics", "{}");
    assert_eq!(v["result"], true, "{v}");
    let names = v["values"]["topics"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let types = v["values"]["types"].as_array().cloned().unwrap_or_default();
    assert_eq!(names.len(), types.len(), "{v}");
    names
        .iter()
        .zip(types.iter())
        .map(|(n, t)| {
            (
                n.as_str().unwrap_or_default().to_string(),
                t.as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

#[test]
fn rosapi_lists_a_ros2_topic_while_its_publisher_token_lives() {
    let (gw, ep) = ros_gateway(&[]);
    let mut node = RosNode::join(&ep, "talker");
    let (_, _, mp) = node.declare_chatter();
    let chatter = ("/chatter".to_string(), "std_msgs/msg/String".to_string());
    let dl = deadline(CROSS);
    loop {
        let topics = rosapi_topics(&gw);
        if topics.contains(&chatter) {
            break;
        }
        assert!(Instant::now() < dl, "/chatter never listed: {topics:?}");
        thread::sleep(ms(20));
    }
    let mut c = gw.client();
    let v = call_values(&mut c, "/rosapi/nodes", "{}");
    assert!(
        v["values"]["nodes"]
            .as_array()
            .is_some_and(|n| n.iter().any(|x| x == "/talker")),
        "{v}"
    );
    mp.undeclare().wait().expect("undeclare");
    let dl = deadline(Duration::from_secs(5));
    loop {
        let topics = rosapi_topics(&gw);
        if !topics.iter().any(|(n, _)| n == "/chatter") {
            break;
        }
        assert!(Instant::now() < dl, "/chatter still listed: {topics:?}");
        thread::sleep(ms(20));
    }
}

#[test]
fn bad_ros_flags_stop_start_up_with_a_message() {
    let base = ["--listen", "127.0.0.1:0", "--ws-listen", "127.0.0.1:0"];
    let ep = format!("tcp/127.0.0.1:{}", free_port());
    let cases: [(&[&str], &str); 3] = [
        (&["--ros-domain", "300"], "--ros-domain"),
        (&["--ros-domain", "233"], "--ros-domain"),
        (
            &["--ros-domain", "0", "--interfaces", "/nonexistent"],
            "/nonexistent",
        ),
    ];
    for (flags, says) in cases {
        let mut args: Vec<&str> = base.to_vec();
        args.extend_from_slice(&["--zenoh-listen", &ep]);
        args.extend_from_slice(flags);
        let out = run(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{flags:?} started: {err}");
        assert!(!err.contains("listening on"), "{flags:?}: {err}");
        assert!(
            err.contains(says),
            "{flags:?}: the message names {says}: {err}"
        );
    }
}

/// `custom_msgs/msg/Blip`, which the gateway does not bundle: the text a
/// node was built from, which only the test's own registry sees.
const BLIP: &str = "int32 a\nstring<=8 tag\ngeometry_msgs/Point[] pts\n";

#[test]
fn a_type_the_gateway_lacks_is_learned_from_the_nodes_type_description_service() {
    use rosgate_ros2::registry::Registry;
    let mut types = Registry::bundled();
    types
        .add("custom_msgs", rosgate_ros2::model::Kind::Msg, "Blip", BLIP)
        .expect("Blip parses");
    let blip_hash = types.hash("custom_msgs/msg/Blip").expect("hash");
    let blip_dds = "custom_msgs::msg::dds_::Blip_";
    let (gw, ep) = ros_gateway(&[]);
    let mut node = RosNode::join(&ep, "blipper");

    // The node's ~/get_type_description, as rclcpp serves it: the
    // description of the asked type with its references (sources empty).
    let describe = "type_description_interfaces/srv/GetTypeDescription";
    let srv = types.srv(describe).expect("bundled").clone();
    let desc_key = rmw::data_key(
        0,
        "/blipper/get_type_description",
        &rmw::dds_type_name(describe).unwrap(),
        &types.hash(describe).unwrap(),
    );
    let asked: Seen = Arc::default();
    let asked2 = asked.clone();
    let (reg, hash2) = (Arc::new(types), blip_hash.clone());
    let reg2 = reg.clone();
    let _describer = node
        .session
        .declare_queryable(desc_key)
        .complete(true)
        .callback(move |q: Query| {
            let req = q.payload().map(|p| p.to_bytes().to_vec()).unwrap_or_default();
            let mut json = Vec::new();
            rosgate_ros2::cdr::decode_json(&*reg2, &srv.request, &req, &mut json).expect("request");
            let r: Value = serde_json::from_slice(&json).unwrap();
            asked2.lock().unwrap().push(json.clone());
            let point = |n: &str| serde_json::json!({"name": n, "type": {"type_id": 11, "capacity": 0, "string_capacity": 0, "nested_type_name": ""}, "default_value": ""});
            let description = serde_json::json!({
                "type_description": {"type_name": "custom_msgs/msg/Blip", "fields": [
                    {"name": "a", "type": {"type_id": 6, "capacity": 0, "string_capacity": 0, "nested_type_name": ""}, "default_value": ""},
                    {"name": "tag", "type": {"type_id": 21, "capacity": 0, "string_capacity": 8, "nested_type_name": ""}, "default_value": ""},
                    {"name": "pts", "type": {"type_id": 145, "capacity": 0, "string_capacity": 0, "nested_type_name": "geometry_msgs/msg/Point"}, "default_value": ""}
                ]},
                "referenced_type_descriptions": [
                    {"type_name": "geometry_msgs/msg/Point", "fields": [point("x"), point("y"), point("z")]}
                ]
            });
            let ok = r["type_name"] == "custom_msgs/msg/Blip" && r["type_hash"] == hash2.as_str();
            let resp = serde_json::json!({
                "successful": ok,
                "failure_reason": if ok { "" } else { "unknown type" },
                "type_description": description,
            });
            let bytes = rosgate_ros2::cdr::encode(&*reg2, &srv.response, &resp).expect("response");
            let att = q.attachment().map(|a| a.to_bytes().to_vec()).unwrap_or_default();
            let (seq, gid) = check_attachment(&att);
            let _ = q
                .reply(q.key_expr().clone(), bytes)
                .attachment(attachment(seq, unix_ns(), &gid))
                .wait();
        })
        .wait()
        .expect("describer");
    let (mp_key, _mp) = node.declare(EntityKind::Publisher, "/blips", blip_dds, &blip_hash, 10);
    let gid = rmw::gid(&mp_key);

    let mut tcp = gw.client();
    tcp.send_line(r#"{"op":"subscribe","topic":"/blips","type":"custom_msgs/msg/Blip","id":"s"}"#);
    tcp.expect_info("s");
    let msg =
        serde_json::json!({"a": -5, "tag": "bl\u{e9}p", "pts": [{"x": 1.5, "y": 2.0, "z": -3.0}]});
    let cdr = reg
        .msg("custom_msgs/msg/Blip")
        .map(|_| rosgate_ros2::cdr::encode(&*reg, "custom_msgs/msg/Blip", &msg).expect("encode"));
    let cdr = cdr.expect("Blip");
    let key = rmw::data_key(0, "/blips", blip_dds, &blip_hash);
    let dl = deadline(CROSS);
    let mut seq = 0;
    let got = loop {
        assert!(Instant::now() < dl, "no Blip crossed within {CROSS:?}");
        seq += 1;
        node.session
            .put(key.as_str(), cdr.clone())
            .attachment(attachment(seq, unix_ns(), &gid))
            .wait()
            .expect("put");
        if let Recv::Line(l) = tcp.try_recv_line(deadline(ms(100))) {
            break parse_line(&String::from_utf8_lossy(&l));
        }
    };
    assert_eq!(got["msg"], msg, "{got}");
    // Asked once, for the type and hash the node advertised.
    let asked = asked.lock().unwrap();
    assert_eq!(asked.len(), 1, "asked {} times", asked.len());
    let r: Value = serde_json::from_slice(&asked[0]).unwrap();
    assert_eq!(r["type_name"], "custom_msgs/msg/Blip");
    assert_eq!(r["type_hash"], blip_hash.as_str());
}

// ------------------------------------------------------------- actions

const FIB: &str = "example_interfaces/action/Fibonacci";

/// An action entity's data-key type and hash: the DDS name by rmw_zenoh's
/// rule, the hash as rosidl computes it (checked against rosidl's own in
/// rosgate-ros2's tests).
fn action_entity(ros_type: &str) -> (String, String) {
    let r = rosgate_ros2::registry::Registry::bundled();
    (
        rmw::dds_type_name(ros_type).expect("a DDS name"),
        r.hash(ros_type).expect("a bundled type"),
    )
}

/// The goal id in a request's CDR (right after the header).
fn goal_uuid(req: &[u8]) -> [u8; 16] {
    req[4..20].try_into().expect("16 bytes of goal id")
}

/// CDR of `Fibonacci_FeedbackMessage` / the tail of `_GetResult_Response`:
/// an int32 sequence.
fn cdr_i32_seq(out: &mut Vec<u8>, v: &[i32]) {
    out.extend_from_slice(&(v.len() as u32).to_le_bytes());
    for x in v {
        out.extend_from_slice(&x.to_le_bytes());
    }
}

/// What the fake action server was asked.
#[derive(Default)]
struct FibLog {
    goals: Vec<([u8; 16], i32)>,
    cancels: Vec<[u8; 16]>,
    /// `get_result` queries of goals not yet ended (order 99 runs until
    /// cancelled).
    held: Vec<(Query, [u8; 16])>,
    /// The request attachments' GIDs, by service.
    gids: Vec<(String, [u8; 16])>,
    /// `send_goal` queries not answered yet (order 77: the test answers
    /// them), with the request's seq and GID.
    unanswered: Vec<(Query, i64, [u8; 16])>,
}

/// `/fibonacci` served as an rclcpp action server is on rmw_zenoh: three
/// complete queryables with `SS` tokens and feedback and status
/// publishers (`MP`), declared in rcl_action's order (goal, cancel and
/// result services, then the two publishers).
/// A goal of order `n` is accepted when `n >= 0` and gets one feedback
/// message, `[0, 1]`; its result is the first `n` Fibonacci numbers,
/// except order 99, which runs until cancelled (then status 5), and order
/// 77, which is the same but whose acceptance the test sends.
fn serve_fibonacci(
    node: &mut RosNode,
) -> (
    Vec<zenoh::query::Queryable<()>>,
    Vec<LivelinessToken>,
    Arc<Mutex<FibLog>>,
) {
    serve_fibonacci_declaring(node, Duration::ZERO)
}

/// [`serve_fibonacci`], with `pause` between one entity's token and the
/// next (rclpy's declarations are that far apart on a loaded machine).
fn serve_fibonacci_declaring(
    node: &mut RosNode,
    pause: Duration,
) -> (
    Vec<zenoh::query::Queryable<()>>,
    Vec<LivelinessToken>,
    Arc<Mutex<FibLog>>,
) {
    let log: Arc<Mutex<FibLog>> = Arc::default();
    let mut tokens = Vec::new();
    let mut queryables = Vec::new();
    let (fb_dds, fb_hash) = action_entity(&format!("{FIB}_FeedbackMessage"));
    // The feedback publisher's token is declared last; its key (its GID)
    // is needed by the goal service's callback first.
    let fb_id = node.next_id;
    node.next_id += 1;
    let fb_key = Token {
        domain: 0,
        zid: node.zid.clone(),
        nid: 0,
        id: fb_id,
        kind: EntityKind::Publisher,
        enclave: "/".into(),
        namespace: "/".into(),
        node: node.name.clone(),
        endpoint: Some(Endpoint {
            name: "/fibonacci/_action/feedback".into(),
            dds_type: fb_dds.clone(),
            hash: fb_hash.clone(),
            qos: Qos::keep_last(10),
        }),
    }
    .to_key();
    let fb_data = rmw::data_key(0, "/fibonacci/_action/feedback", &fb_dds, &fb_hash);
    let fb_gid = rmw::gid(&fb_key);
    let publisher = Arc::new(
        node.session
            .declare_publisher(fb_data)
            .wait()
            .expect("publisher"),
    );
    for (service, ros_type) in [
        ("send_goal", format!("{FIB}_SendGoal")),
        ("cancel_goal", "action_msgs/srv/CancelGoal".to_string()),
        ("get_result", format!("{FIB}_GetResult")),
    ] {
        let name = format!("/fibonacci/_action/{service}");
        let (dds, hash) = action_entity(&ros_type);
        let (log, publisher) = (log.clone(), publisher.clone());
        let q = node
            .session
            .declare_queryable(rmw::data_key(0, &name, &dds, &hash))
            .complete(true)
            .callback(move |q: Query| {
                let (req, seq, gid) = served_request(&q);
                let mut log = log.lock().unwrap();
                log.gids.push((service.to_string(), gid));
                let reply = |q: &Query, body: Vec<u8>| {
                    let _ = q
                        .reply(q.key_expr().clone(), body)
                        .attachment(attachment(seq, unix_ns(), &gid))
                        .wait();
                };
                match service {
                    "send_goal" => {
                        let (uuid, order) = (
                            goal_uuid(&req),
                            i32::from_le_bytes(req[20..24].try_into().unwrap()),
                        );
                        log.goals.push((uuid, order));
                        if order == 77 {
                            log.unanswered.push((q, seq, gid));
                            return;
                        }
                        // {bool accepted, Time stamp}: 1 byte, 3 of padding, sec, nanosec.
                        let mut body = vec![0, 1, 0, 0, u8::from(order >= 0), 0, 0, 0];
                        body.extend_from_slice(&7i32.to_le_bytes());
                        body.extend_from_slice(&0u32.to_le_bytes());
                        reply(&q, body);
                        if order >= 0 {
                            let mut fb = vec![0, 1, 0, 0];
                            fb.extend_from_slice(&uuid);
                            cdr_i32_seq(&mut fb, &[0, 1]);
                            publisher
                                .put(fb)
                                .attachment(attachment(1, unix_ns(), &fb_gid))
                                .wait()
                                .expect("feedback put");
                        }
                    }
                    "get_result" => {
                        let uuid = goal_uuid(&req);
                        let order = log.goals.iter().find(|g| g.0 == uuid).map(|g| g.1);
                        match order {
                            Some(99 | 77) => log.held.push((q, uuid)),
                            Some(n) => {
                                let mut fib = vec![0i32, 1];
                                while fib.len() < n as usize {
                                    fib.push(fib[fib.len() - 1] + fib[fib.len() - 2]);
                                }
                                fib.truncate(n as usize);
                                // {int8 status, Result {int32[] sequence}}
                                let mut body = vec![0, 1, 0, 0, 4, 0, 0, 0];
                                cdr_i32_seq(&mut body, &fib);
                                reply(&q, body);
                            }
                            None => {
                                reply(&q, vec![0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
                            }
                        }
                    }
                    _ => {
                        // CancelGoal: {GoalInfo goal_info}: the goal id, then a stamp.
                        let uuid = goal_uuid(&req);
                        log.cancels.push(uuid);
                        let held = std::mem::take(&mut log.held);
                        let mut code = 2; // UNKNOWN_GOAL_ID
                        for (hq, hu) in held {
                            if hu == uuid {
                                code = 0;
                                let mut body = vec![0, 1, 0, 0, 5, 0, 0, 0];
                                cdr_i32_seq(&mut body, &[0, 1, 1]);
                                let _ = hq.reply(hq.key_expr().clone(), body).wait();
                            } else {
                                log.held.push((hq, hu));
                            }
                        }
                        // {int8 return_code, GoalInfo[] goals_canceling}
                        let mut body = vec![0, 1, 0, 0, code, 0, 0, 0];
                        body.extend_from_slice(&u32::from(code == 0).to_le_bytes());
                        if code == 0 {
                            body.extend_from_slice(&uuid);
                            body.extend_from_slice(&[0; 8]);
                        }
                        reply(&q, body);
                    }
                }
            })
            .wait()
            .expect("queryable");
        queryables.push(q);
        let (_, token) = node.declare(EntityKind::ServiceServer, &name, &dds, &hash, 10);
        tokens.push(token);
        thread::sleep(pause);
    }
    let fb_token = node
        .session
        .liveliness()
        .declare_token(fb_key.clone())
        .wait()
        .expect("feedback token");
    tokens.push(fb_token);
    thread::sleep(pause);
    let (st_dds, st_hash) = action_entity("action_msgs/msg/GoalStatusArray");
    let (_, st_token) = node.declare(
        EntityKind::Publisher,
        "/fibonacci/_action/status",
        &st_dds,
        &st_hash,
        1,
    );
    tokens.push(st_token);
    (queryables, tokens, log)
}

/// A goal sent with `"wait": true` before the server exists, and one sent
/// as soon as its goal service is seen, reach the server once all its
/// entities are declared (rclpy declares them one after another; a goal
/// acted on at the first would find no `get_result` and be aborted).
#[test]
fn goals_wait_until_a_ros2_action_server_has_declared_all_its_entities() {
    let (gw, ep) = ros_gateway(&["--goal-timeout-ms", "30000"]);
    let mut ws = Ws::connect(&gw);
    ws.send_text(&format!(
        r#"{{"op":"send_action_goal","id":"early","action":"/fibonacci","action_type":"{FIB}","args":{{"order":4}},"wait":true,"timeout":20}}"#
    ));
    let mut node = RosNode::join(&ep, "fibonacci_server");
    let server = thread::spawn(move || {
        let served = serve_fibonacci_declaring(&mut node, ms(400));
        (node, served)
    });
    let result = ws_until(
        &mut ws,
        |v| v["id"] == "early" && v["op"] == "action_result",
        deadline(CROSS),
    );
    assert_eq!(result["status"], 4, "{result}");
    assert_eq!(
        result["values"],
        serde_json::json!({"sequence": [0, 1, 1, 2]}),
        "{result}"
    );
    let (_node, (_q, _t, log)) = server.join().expect("server thread");
    assert_eq!(log.lock().unwrap().goals.len(), 1);
}

/// Sends `send_action_goal` for `/fibonacci` until the gateway routes it
/// to the ROS 2 server (before it knows the server, a goal fails at once
/// with status 0, "no server"): the routed goal's id and the first message
/// for it.
fn first_routed_goal(ws: &mut Ws, order: i32) -> (String, Value) {
    let dl = deadline(CROSS);
    loop {
        let id = format!("g-{}", uniq());
        ws.send_text(&format!(
            r#"{{"op":"send_action_goal","id":"{id}","action":"/fibonacci","action_type":"{FIB}","args":{{"order":{order}}},"feedback":true}}"#
        ));
        let v = ws_until(ws, |v| v["id"] == id.as_str(), deadline(REPLY));
        let no_server = v["op"] == "action_result"
            && v["status"] == 0
            && v["values"].as_str().is_some_and(|s| s.starts_with("no "));
        if !no_server {
            return (id, v);
        }
        assert!(
            Instant::now() < dl,
            "the gateway never routed a goal to the ROS 2 server: {v}"
        );
        thread::sleep(ms(50));
    }
}

#[test]
fn websocket_and_tcp_goals_reach_a_ros2_action_server_with_feedback_results_and_cancels() {
    let (gw, ep) = ros_gateway(&["--goal-timeout-ms", "30000"]);
    let mut node = RosNode::join(&ep, "fibonacci_server");
    let (_queryables, _tokens, log) = serve_fibonacci(&mut node);
    let mut ws = Ws::connect(&gw);

    // A goal over WebSocket: one feedback, then the result, status 4.
    let (id, first) = first_routed_goal(&mut ws, 6);
    assert_eq!(
        first["op"], "action_feedback",
        "feedback before the result: {first}"
    );
    assert_eq!(first["action"], "/fibonacci", "{first}");
    assert_eq!(
        first["values"],
        serde_json::json!({"sequence": [0, 1]}),
        "{first}"
    );
    let result = ws_until(&mut ws, |v| v["id"] == id.as_str(), deadline(REPLY));
    assert_eq!(result["op"], "action_result", "{result}");
    assert_eq!(result["status"], 4, "{result}");
    assert_eq!(result["result"], true, "{result}");
    assert_eq!(
        result["values"],
        serde_json::json!({"sequence": [0, 1, 1, 2, 3, 5]}),
        "{result}"
    );

    // rosapi lists the ROS 2 action server, with its type.
    let mut tcp = gw.client();
    let v = call_values(&mut tcp, "/rosapi/action_servers", "{}");
    assert!(
        v["values"]["action_servers"]
            .as_array()
            .is_some_and(|a| a.iter().any(|x| x == "/fibonacci")),
        "{v}"
    );
    let v = call_values(
        &mut tcp,
        "/rosapi/action_type",
        r#"{"action":"/fibonacci"}"#,
    );
    assert_eq!(v["values"]["type"], FIB, "{v}");

    // The server saw the goal with a version 4 UUID, and the requests
    // named the gateway's client entities (SC tokens), one per service.
    {
        let log = log.lock().unwrap();
        let (uuid, order) = *log.goals.last().expect("a goal");
        assert_eq!(order, 6);
        assert_eq!(uuid[6] >> 4, 4, "a version 4 UUID: {uuid:02x?}");
        let sc: Vec<(String, [u8; 16])> = node
            .graph()
            .iter()
            .filter_map(|k| {
                let t = Token::parse(k)?;
                let name = t.endpoint.as_ref()?.name.clone();
                (t.zid != node.zid && t.kind == EntityKind::ServiceClient)
                    .then(|| (name, rmw::gid(k)))
            })
            .collect();
        for (service, gid) in &log.gids {
            let name = format!("/fibonacci/_action/{service}");
            assert!(
                sc.iter().any(|(n, g)| *n == name && g == gid),
                "{service}'s request GID is not the gateway's SC token's: {sc:?}"
            );
        }
    }

    // A goal over TCP that runs until cancelled: the cancel reaches the
    // server with the goal's UUID and the result says canceled (5).
    tcp.send_line(&format!(
        r#"{{"op":"send_action_goal","id":"long","action":"/fibonacci","action_type":"{FIB}","args":{{"order":99}},"feedback":true}}"#
    ));
    let (fb, _) = tcp.recv_until(|v| v["id"] == "long", deadline(REPLY));
    assert_eq!(fb["op"], "action_feedback", "{fb}");
    let dl = deadline(REPLY);
    while log.lock().unwrap().held.is_empty() {
        assert!(Instant::now() < dl, "get_result never reached the server");
        thread::sleep(ms(10));
    }
    tcp.send_line(r#"{"op":"cancel_action_goal","id":"long","action":"/fibonacci"}"#);
    let (end, _) = tcp.recv_until(
        |v| v["op"] == "action_result" && v["id"] == "long",
        deadline(REPLY),
    );
    assert_eq!(end["status"], 5, "{end}");
    assert_eq!(end["result"], true, "{end}");
    assert_eq!(
        end["values"],
        serde_json::json!({"sequence": [0, 1, 1]}),
        "{end}"
    );
    {
        let log = log.lock().unwrap();
        let long = log
            .goals
            .iter()
            .find(|g| g.1 == 99)
            .expect("the long goal")
            .0;
        assert_eq!(log.cancels, vec![long], "one cancel, for the long goal");
    }

    // A cancel before the server accepted the goal is sent once it does
    // (sent earlier, the server would not know the goal).
    tcp.send_line(&format!(
        r#"{{"op":"send_action_goal","id":"early","action":"/fibonacci","action_type":"{FIB}","args":{{"order":77}}}}"#
    ));
    let dl = deadline(REPLY);
    while log.lock().unwrap().unanswered.is_empty() {
        assert!(Instant::now() < dl, "the goal never reached the server");
        thread::sleep(ms(10));
    }
    tcp.send_line(r#"{"op":"cancel_action_goal","id":"early","action":"/fibonacci"}"#);
    // The cancel is taken before the acceptance is sent: a round trip on
    // the same connection.
    let _ = call_values(&mut tcp, "/rosgate/federation", "{}");
    let early = log
        .lock()
        .unwrap()
        .goals
        .iter()
        .find(|g| g.1 == 77)
        .expect("the early goal")
        .0;
    assert!(
        !log.lock().unwrap().cancels.contains(&early),
        "cancelled before acceptance"
    );
    let (q, seq, gid) = log
        .lock()
        .unwrap()
        .unanswered
        .pop()
        .expect("held send_goal");
    let mut body = vec![0, 1, 0, 0, 1, 0, 0, 0];
    body.extend_from_slice(&[0; 8]);
    q.reply(q.key_expr().clone(), body)
        .attachment(attachment(seq, unix_ns(), &gid))
        .wait()
        .expect("accept");
    drop(q);
    let (end, _) = tcp.recv_until(
        |v| v["op"] == "action_result" && v["id"] == "early",
        deadline(REPLY),
    );
    assert_eq!(end["status"], 5, "{end}");
    assert!(
        log.lock().unwrap().cancels.contains(&early),
        "the cancel reached the server"
    );

    // A goal the server rejects ends at once: status 0, result false.
    tcp.send_line(&format!(
        r#"{{"op":"send_action_goal","id":"neg","action":"/fibonacci","action_type":"{FIB}","args":{{"order":-1}}}}"#
    ));
    let (rej, _) = tcp.recv_until(|v| v["id"] == "neg", deadline(REPLY));
    assert_eq!(rej["op"], "action_result", "{rej}");
    assert_eq!(rej["status"], 0, "{rej}");
    assert_eq!(rej["result"], false, "{rej}");
    assert!(
        rej["values"]
            .as_str()
            .is_some_and(|s| s.contains("rejected")),
        "{rej}"
    );

    // A goal that does not fit the type is refused by field, never sent.
    let sent = log.lock().unwrap().goals.len();
    tcp.send_line(&format!(
        r#"{{"op":"send_action_goal","id":"bad","action":"/fibonacci","action_type":"{FIB}","args":{{"order":"six"}}}}"#
    ));
    let (bad, _) = tcp.recv_until(|v| v["id"] == "bad", deadline(REPLY));
    assert_eq!(bad["op"], "action_result", "{bad}");
    assert_eq!(bad["result"], false, "{bad}");
    assert!(
        bad["values"].as_str().is_some_and(|s| s.contains("order")),
        "{bad}"
    );
    assert_eq!(
        log.lock().unwrap().goals.len(),
        sent,
        "the bad goal reached the server"
    );

    // A goal in flight when the server's session closes ends at once,
    // aborted.
    tcp.send_line(&format!(
        r#"{{"op":"send_action_goal","id":"orphan","action":"/fibonacci","action_type":"{FIB}","args":{{"order":99}}}}"#
    ));
    let dl = deadline(REPLY);
    while log.lock().unwrap().held.is_empty() {
        assert!(Instant::now() < dl, "get_result never reached the server");
        thread::sleep(ms(10));
    }
    let t = Instant::now();
    node.session.close().wait().expect("close");
    let (end, _) = tcp.recv_until(
        |v| v["id"] == "orphan" && v["op"] == "action_result",
        deadline(REPLY),
    );
    assert_eq!(end["status"], 6, "{end}");
    assert_eq!(end["result"], false, "{end}");
    assert!(
        t.elapsed() < Duration::from_secs(4),
        "at once: {:?}",
        t.elapsed()
    );
    // The hub may end the goal first (its server's tokens went); the
    // gateway forgets it when the query ends.
    let dl = deadline(CROSS);
    loop {
        let v = call_values(&mut tcp, "/rosgate/federation", "{}");
        if v["values"]["ros2"]["goals_in_flight"] == 0 {
            break;
        }
        assert!(Instant::now() < dl, "a goal stayed in flight: {v}");
        thread::sleep(ms(20));
    }
}

/// Samples a subscriber heard: (topic, payload).
type Heard = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

/// One rmw_zenoh request from the fake node: the first reply's payload
/// (None when the query ends without one, or with an error).
fn ros_request(
    node: &RosNode,
    key: &str,
    payload: Vec<u8>,
    seq: i64,
    gid: &[u8; 16],
) -> Option<Vec<u8>> {
    let replies = node
        .session
        .get(key)
        .payload(payload)
        .attachment(attachment(seq, unix_ns(), gid))
        .target(QueryTarget::AllComplete)
        .consolidation(ConsolidationMode::None)
        .timeout(CROSS)
        .wait()
        .expect("get");
    let reply = replies.recv_timeout(CROSS).ok().flatten()?;
    let sample = match reply.result() {
        Ok(s) => s,
        Err(e) => {
            eprintln!(
                "{key}: an error reply: {}",
                String::from_utf8_lossy(&e.payload().to_bytes())
            );
            return None;
        }
    };
    let a = sample.attachment().expect("replies carry the attachment");
    let (echo, echoed_gid) = check_attachment(&a.to_bytes());
    assert_eq!(
        (echo, echoed_gid),
        (seq, *gid),
        "the request's seq and GID echoed"
    );
    Some(sample.payload().to_bytes().to_vec())
}

/// A request body: the CDR header, then `parts`.
fn cdr(parts: &[&[u8]]) -> Vec<u8> {
    let mut b = vec![0, 1, 0, 0];
    for p in parts {
        b.extend_from_slice(p);
    }
    b
}

/// The int32 sequence after `skip` bytes of a body.
fn i32_seq_at(body: &[u8], skip: usize) -> Vec<i32> {
    let n = u32::from_le_bytes(body[skip..skip + 4].try_into().unwrap()) as usize;
    (0..n)
        .map(|i| {
            let at = skip + 4 + 4 * i;
            i32::from_le_bytes(body[at..at + 4].try_into().unwrap())
        })
        .collect()
}

#[test]
fn a_ros2_action_client_sends_goals_to_an_action_a_tcp_client_serves() {
    let (gw, ep) = ros_gateway(&[]);
    let mut node = RosNode::join(&ep, "fibonacci_client");
    let mut server = gw.client();
    server.send_line(&format!(
        r#"{{"op":"advertise_action","action":"/fib2","type":"{FIB}","id":"adv"}}"#
    ));
    server.expect_info("adv");
    // The gateway appears as an rclcpp action server: three SS tokens and
    // two MP tokens under /fib2/_action/, with rosidl's types and hashes.
    let mut keys = HashMap::new();
    for (entity, kind, ros_type) in [
        (
            "send_goal",
            EntityKind::ServiceServer,
            format!("{FIB}_SendGoal"),
        ),
        (
            "get_result",
            EntityKind::ServiceServer,
            format!("{FIB}_GetResult"),
        ),
        (
            "cancel_goal",
            EntityKind::ServiceServer,
            "action_msgs/srv/CancelGoal".to_string(),
        ),
        (
            "feedback",
            EntityKind::Publisher,
            format!("{FIB}_FeedbackMessage"),
        ),
        (
            "status",
            EntityKind::Publisher,
            "action_msgs/msg/GoalStatusArray".to_string(),
        ),
    ] {
        let name = format!("/fib2/_action/{entity}");
        let (_, tok) = node.wait_graph(&name, |t| {
            t.kind == kind && t.endpoint.as_ref().is_some_and(|e| e.name == name)
        });
        let (dds, hash) = action_entity(&ros_type);
        let ep = tok.endpoint.expect("an endpoint token");
        assert_eq!(
            (ep.dds_type.as_str(), ep.hash.as_str()),
            (dds.as_str(), hash.as_str()),
            "{name}"
        );
        if entity == "status" {
            // As rcl declares it: transient local, depth 1.
            let q = (ep.qos.durability, ep.qos.depth);
            assert_eq!(q, (rmw::Durability::TransientLocal, 1), "{name}");
        }
        keys.insert(entity, rmw::data_key(0, &name, &dds, &hash));
    }
    // The node listens to feedback and status as an rclcpp client does.
    let heard: Heard = Arc::default();
    let mut subs = Vec::new();
    for topic in ["feedback", "status"] {
        let h = heard.clone();
        subs.push(
            node.session
                .declare_subscriber(keys[topic].as_str())
                .callback(move |s: zenoh::sample::Sample| {
                    h.lock()
                        .unwrap()
                        .push((topic.to_string(), s.payload().to_bytes().to_vec()))
                })
                .wait()
                .expect("subscriber"),
        );
    }
    let (sc_key, _sc) = node.declare(
        EntityKind::ServiceClient,
        "/fib2/_action/send_goal",
        &action_entity(&format!("{FIB}_SendGoal")).0,
        &action_entity(&format!("{FIB}_SendGoal")).1,
        10,
    );
    let gid = rmw::gid(&sc_key);
    let u: [u8; 16] = *b"goal-one-uuid-16";

    // send_goal: accepted at once; the TCP server gets the goal.
    let body = ros_request(
        &node,
        &keys["send_goal"],
        cdr(&[&u, &5i32.to_le_bytes()]),
        1,
        &gid,
    )
    .expect("a send_goal reply");
    assert_eq!(body.len(), 4 + 4 + 8, "{{accepted, stamp}}: {body:02x?}");
    assert_eq!(body[4], 1, "accepted");
    let (goal, _) = server.recv_until(|v| v["op"] == "send_action_goal", deadline(REPLY));
    assert_eq!(goal["action"], "/fib2", "{goal}");
    assert_eq!(goal["action_type"], FIB, "{goal}");
    assert_eq!(goal["args"], serde_json::json!({"order": 5}), "{goal}");
    let gid_json = goal["id"].to_string();

    // Feedback reaches the feedback topic with the goal's id.
    server.send_line(&format!(
        r#"{{"op":"action_feedback","id":{gid_json},"action":"/fib2","values":{{"sequence":[0,1]}}}}"#
    ));
    let dl = deadline(CROSS);
    let fb = loop {
        let got = heard
            .lock()
            .unwrap()
            .iter()
            .find(|(t, _)| t == "feedback")
            .cloned();
        if let Some((_, b)) = got {
            break b;
        }
        assert!(Instant::now() < dl, "no feedback reached ROS 2");
        thread::sleep(ms(10));
    };
    assert_eq!(&fb[4..20], &u, "the feedback names the goal");
    assert_eq!(i32_seq_at(&fb, 20), vec![0, 1]);

    // get_result waits for the result, then answers status 4 with it.
    let node = Arc::new(node);
    let (n2, k2) = (node.clone(), keys["get_result"].clone());
    let waiter = thread::spawn(move || ros_request(&n2, &k2, cdr(&[&u]), 2, &gid));
    let dl = deadline(REPLY);
    while !waiter.is_finished() && Instant::now() < dl {
        thread::sleep(ms(20));
        if Instant::now() + Duration::from_secs(4) > dl {
            break;
        }
    }
    assert!(
        !waiter.is_finished(),
        "get_result answered before the goal ended"
    );
    server.send_line(&format!(
        r#"{{"op":"action_result","id":{gid_json},"action":"/fib2","values":{{"sequence":[0,1,1,2,3]}},"status":4,"result":true}}"#
    ));
    let body = waiter.join().unwrap().expect("a get_result reply");
    assert_eq!(body[4], 4, "SUCCEEDED: {body:02x?}");
    assert_eq!(i32_seq_at(&body, 8), vec![0, 1, 1, 2, 3]);
    // ... and the status topic said so: the goal, status 4.
    let dl = deadline(CROSS);
    loop {
        let last = heard
            .lock()
            .unwrap()
            .iter()
            .rev()
            .find(|(t, _)| t == "status")
            .cloned();
        // GoalStatusArray: count, then {uuid, sec, nanosec, int8 status}.
        if let Some((_, b)) = last {
            if b.len() > 32 && b[8..24] == u && b[32] == 4 {
                break;
            }
        }
        assert!(Instant::now() < dl, "the status topic never said SUCCEEDED");
        thread::sleep(ms(10));
    }
    // A late get_result gets the kept result; an unknown goal, status 0.
    let body = ros_request(&node, &keys["get_result"], cdr(&[&u]), 3, &gid).expect("reply");
    assert_eq!(body[4], 4);
    let body = ros_request(
        &node,
        &keys["get_result"],
        cdr(&[b"no-such-goal-id!"]),
        4,
        &gid,
    )
    .expect("reply");
    assert_eq!(body[4], 0, "UNKNOWN for an unknown goal");

    // A cancel reaches the TCP server; its result (5) ends the goal.
    let v: [u8; 16] = *b"goal-two-uuid-16";
    let body = ros_request(
        &node,
        &keys["send_goal"],
        cdr(&[&v, &99i32.to_le_bytes()]),
        5,
        &gid,
    )
    .expect("a send_goal reply");
    assert_eq!(body[4], 1, "accepted");
    let (goal2, _) = server.recv_until(|x| x["op"] == "send_action_goal", deadline(REPLY));
    let body = ros_request(&node, &keys["cancel_goal"], cdr(&[&v, &[0; 8]]), 6, &gid)
        .expect("a cancel reply");
    assert_eq!(body[4], 0, "ERROR_NONE: {body:02x?}");
    assert_eq!(
        u32::from_le_bytes(body[8..12].try_into().unwrap()),
        1,
        "one goal canceling"
    );
    assert_eq!(&body[12..28], &v);
    let (cancel, _) = server.recv_until(|x| x["op"] == "cancel_action_goal", deadline(REPLY));
    assert_eq!(cancel["id"], goal2["id"], "{cancel}");
    server.send_line(&format!(
        r#"{{"op":"action_result","id":{},"action":"/fib2","values":{{"sequence":[0]}},"status":5,"result":true}}"#,
        goal2["id"]
    ));
    let body = ros_request(&node, &keys["get_result"], cdr(&[&v]), 7, &gid).expect("reply");
    assert_eq!(body[4], 5, "CANCELED");

    // The server's connection closes with a goal in flight: the goal
    // ends aborted (6), at once. The status is a snapshot refreshed every
    // 200 ms: it must first say that nothing waits (the first goal's
    // get_result waited), so that its 1 below is this goal's get_result.
    let mut probe = gw.client();
    let dl = deadline(CROSS);
    while call_values(&mut probe, "/rosgate/federation", "{}")["values"]["ros2"]["results_waiting"]
        != 0
    {
        assert!(Instant::now() < dl, "a get_result still waits");
        thread::sleep(ms(20));
    }
    let w: [u8; 16] = *b"goal-three-uuid!";
    let body = ros_request(
        &node,
        &keys["send_goal"],
        cdr(&[&w, &1i32.to_le_bytes()]),
        8,
        &gid,
    )
    .expect("a send_goal reply");
    assert_eq!(body[4], 1);
    server.recv_until(|x| x["op"] == "send_action_goal", deadline(REPLY));
    let (n3, k3) = (node.clone(), keys["get_result"].clone());
    let waiter = thread::spawn(move || ros_request(&n3, &k3, cdr(&[&w]), 9, &gid));
    let dl = deadline(CROSS);
    while call_values(&mut probe, "/rosgate/federation", "{}")["values"]["ros2"]["results_waiting"]
        != 1
    {
        assert!(
            Instant::now() < dl,
            "the get_result never waited at the gateway"
        );
        thread::sleep(ms(20));
    }
    let t = Instant::now();
    drop(server);
    let body = waiter.join().unwrap().expect("a get_result reply");
    assert_eq!(body[4], 6, "ABORTED: {body:02x?}");
    assert_eq!(
        i32_seq_at(&body, 8),
        Vec::<i32>::new(),
        "the result type's defaults"
    );
    assert!(
        t.elapsed() < Duration::from_secs(4),
        "at once: {:?}",
        t.elapsed()
    );
    // ROS 2 sees the action server go.
    let dl = deadline(CROSS);
    let gateway_entity = |k: &String| {
        Token::parse(k).is_some_and(|t| {
            t.zid != node.zid
                && t.endpoint
                    .is_some_and(|e| e.name.starts_with("/fib2/_action/"))
        })
    };
    while node.graph().iter().any(gateway_entity) {
        assert!(
            Instant::now() < dl,
            "the action's tokens outlived its server"
        );
        thread::sleep(ms(20));
    }
    drop(subs);
}

// ---------------------------------------------------------- parameters

/// Decodes `bytes` as `ty` with the bundled types (the codec is checked
/// byte for byte in rosgate-ros2's own tests).
fn decode_as(ty: &str, bytes: &[u8]) -> Value {
    let r = rosgate_ros2::registry::Registry::bundled();
    let mut out = Vec::new();
    rosgate_ros2::cdr::decode_json(&r, ty, bytes, &mut out).expect("decodes");
    serde_json::from_slice(&out).expect("JSON")
}

fn encode_as(ty: &str, v: Value) -> Vec<u8> {
    let r = rosgate_ros2::registry::Registry::bundled();
    rosgate_ros2::cdr::encode(&r, ty, &v).expect("encodes")
}

#[test]
fn ros2_reads_and_sets_a_client_nodes_parameters_with_its_owners_validation() {
    let (gw, ep) = ros_gateway(&[]);
    let mut node = RosNode::join(&ep, "param_client");
    let mut owner = gw.client();
    owner.send_line(r#"{"op":"declare_node","name":"controller","id":"n"}"#);
    owner.recv_until(|v| v["id"] == "n", deadline(REPLY));
    owner.send_line(
        r#"{"op":"declare_parameter","name":"max_vel","value":0.5,"validate":true,"id":"p1"}"#,
    );
    owner.expect_info("p1");
    // The node is in the ROS 2 graph, with its parameter services.
    node.wait_graph("the node /controller", |t| {
        t.kind == EntityKind::Node && t.node == "controller" && t.namespace == "/"
    });
    let mut keys = HashMap::new();
    for (service, ty) in [
        ("get_parameters", "rcl_interfaces/srv/GetParameters"),
        ("set_parameters", "rcl_interfaces/srv/SetParameters"),
        ("list_parameters", "rcl_interfaces/srv/ListParameters"),
    ] {
        let name = format!("/controller/{service}");
        let (_, tok) = node.wait_graph(&name, |t| {
            t.kind == EntityKind::ServiceServer
                && t.endpoint.as_ref().is_some_and(|e| e.name == name)
        });
        assert_eq!(tok.node, "controller", "served by the node itself: {tok:?}");
        let (dds, hash) = action_entity(ty);
        keys.insert(service, rmw::data_key(0, &name, &dds, &hash));
    }
    let (sc_key, _sc) = node.declare(
        EntityKind::ServiceClient,
        "/controller/get_parameters",
        &action_entity("rcl_interfaces/srv/GetParameters").0,
        &action_entity("rcl_interfaces/srv/GetParameters").1,
        10,
    );
    let gid = rmw::gid(&sc_key);
    // ros2 param get /controller max_vel
    let req = encode_as(
        "rcl_interfaces/srv/GetParameters_Request",
        serde_json::json!({"names": ["max_vel"]}),
    );
    let body = ros_request(&node, &keys["get_parameters"], req, 1, &gid).expect("a reply");
    let v = decode_as("rcl_interfaces/srv/GetParameters_Response", &body);
    assert_eq!(v["values"][0]["type"], 3, "{v}");
    assert_eq!(v["values"][0]["double_value"], 0.5, "{v}");
    // ros2 param list /controller
    let req = encode_as(
        "rcl_interfaces/srv/ListParameters_Request",
        serde_json::json!({}),
    );
    let body = ros_request(&node, &keys["list_parameters"], req, 2, &gid).expect("a reply");
    let v = decode_as("rcl_interfaces/srv/ListParameters_Response", &body);
    assert!(
        v["result"]["names"]
            .as_array()
            .is_some_and(|n| n.iter().any(|x| x == "max_vel")),
        "{v}"
    );
    // ros2 param set /controller max_vel 1.9: the owner refuses it.
    let set = |value: f64| {
        encode_as(
            "rcl_interfaces/srv/SetParameters_Request",
            serde_json::json!({"parameters": [{"name": "max_vel", "value": {"type": 3, "double_value": value}}]}),
        )
    };
    let node = Arc::new(node);
    let (n2, k2, r2) = (node.clone(), keys["set_parameters"].clone(), set(1.9));
    let setter = thread::spawn(move || ros_request(&n2, &k2, r2, 3, &gid));
    let (req, _) = owner.recv_until(|v| v["op"] == "call_service", deadline(REPLY));
    assert_eq!(req["service"], "/controller/validate_parameters", "{req}");
    owner.send_line(&format!(
        r#"{{"op":"service_response","service":"/controller/validate_parameters","id":{},"values":{{"successful":false,"reason":"too fast"}},"result":true}}"#,
        req["id"]
    ));
    let body = setter.join().unwrap().expect("a reply");
    let v = decode_as("rcl_interfaces/srv/SetParameters_Response", &body);
    assert_eq!(v["results"][0]["successful"], false, "{v}");
    assert!(
        v["results"][0]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("too fast")),
        "{v}"
    );
    // Accepted: the value changes for the gateway's clients too.
    let (n2, k2, r2) = (node.clone(), keys["set_parameters"].clone(), set(1.2));
    let setter = thread::spawn(move || ros_request(&n2, &k2, r2, 4, &gid));
    let (req, _) = owner.recv_until(|v| v["op"] == "call_service", deadline(REPLY));
    owner.send_line(&format!(
        r#"{{"op":"service_response","service":"/controller/validate_parameters","id":{},"values":{{"successful":true,"reason":""}},"result":true}}"#,
        req["id"]
    ));
    let body = setter.join().unwrap().expect("a reply");
    let v = decode_as("rcl_interfaces/srv/SetParameters_Response", &body);
    assert_eq!(v["results"][0]["successful"], true, "{v}");
    let mut local = gw.client();
    let v = call_values(
        &mut local,
        "/controller/get_parameters",
        r#"{"names":["max_vel"]}"#,
    );
    assert_eq!(v["values"]["values"][0]["double_value"], 1.2, "{v}");
    // The node goes: so do its node token and services.
    drop(owner);
    let dl = deadline(CROSS);
    while node
        .graph()
        .iter()
        .any(|k| Token::parse(k).is_some_and(|t| t.zid != node.zid && t.node == "controller"))
    {
        assert!(Instant::now() < dl, "the node outlived its owner");
        thread::sleep(ms(20));
    }
}

// ----------------------------------------------------- transient local

/// A token of the fake node's with the QoS given (rmw_zenoh's text).
fn declare_qos(
    node: &mut RosNode,
    kind: EntityKind,
    name: &str,
    dds: &str,
    hash: &str,
    qos: Qos,
) -> (String, LivelinessToken) {
    let id = node.next_id;
    node.next_id += 1;
    let key = Token {
        domain: 0,
        zid: node.zid.clone(),
        nid: 0,
        id,
        kind,
        enclave: "/".into(),
        namespace: "/".into(),
        node: node.name.clone(),
        endpoint: Some(Endpoint {
            name: name.into(),
            dds_type: dds.into(),
            hash: hash.into(),
            qos,
        }),
    }
    .to_key();
    let token = node
        .session
        .liveliness()
        .declare_token(key.clone())
        .wait()
        .expect("token");
    (key, token)
}

/// A sample's payload and attachment.
type Sampled = (Vec<u8>, Vec<u8>);

fn transient_local(depth: u32) -> Qos {
    Qos {
        durability: rmw::Durability::TransientLocal,
        ..Qos::keep_last(depth)
    }
}

const DESCRIPTION_KEY: &str = "0/robot_description/std_msgs::msg::dds_::String_/RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18";

#[test]
fn a_ros2_transient_local_publishers_message_reaches_clients_that_subscribe_later() {
    use zenoh_ext::{AdvancedPublisherBuilderExt, CacheConfig};
    let (gw, ep) = ros_gateway(&[]);
    let mut node = RosNode::join(&ep, "robot_state_publisher");
    // As rmw_zenoh declares a transient local publisher: its token says
    // so, and an advanced publisher keeps `depth` samples for late
    // subscribers.
    let (key, _tok) = declare_qos(
        &mut node,
        EntityKind::Publisher,
        "/robot_description",
        STRING_DDS,
        STRING_HASH,
        transient_local(1),
    );
    let gid = rmw::gid(&key);
    let publisher = node
        .session
        .declare_publisher(DESCRIPTION_KEY)
        .cache(CacheConfig::default().max_samples(1))
        .publisher_detection()
        .wait()
        .expect("advanced publisher");
    // Published before anyone on the gateway listens.
    for (seq, text) in [(1, "<robot name='old'/>"), (2, "<robot name='r1'/>")] {
        publisher
            .put(cdr_string(text))
            .attachment(attachment(seq, unix_ns(), &gid))
            .wait()
            .expect("put");
    }
    // The gateway must know the publisher (its token) to know it latches.
    let mut tcp = gw.client();
    let dl = deadline(CROSS);
    loop {
        let v = call_values(&mut tcp, "/rosapi/topics", "{}");
        if v["values"]["topics"]
            .as_array()
            .is_some_and(|t| t.iter().any(|x| x == "/robot_description"))
        {
            break;
        }
        assert!(
            Instant::now() < dl,
            "the gateway never saw the publisher: {v}"
        );
        thread::sleep(ms(20));
    }
    // A late TCP subscriber gets the cached sample (the last one: depth 1).
    tcp.send_line(
        r#"{"op":"subscribe","topic":"/robot_description","type":"std_msgs/msg/String","id":"s1"}"#,
    );
    let (m, _) = tcp.recv_until(|v| v["op"] == "publish", deadline(CROSS));
    assert_eq!(
        m["msg"],
        serde_json::json!({"data": "<robot name='r1'/>"}),
        "{m}"
    );
    // A later WebSocket subscriber gets it from the gateway's latch.
    let mut ws = Ws::connect(&gw);
    ws.send_text(r#"{"op":"subscribe","topic":"/robot_description"}"#);
    let m = ws_until(&mut ws, |v| v["op"] == "publish", deadline(REPLY));
    assert_eq!(
        m["msg"],
        serde_json::json!({"data": "<robot name='r1'/>"}),
        "{m}"
    );
    // Live samples still arrive once each.
    publisher
        .put(cdr_string("<robot name='r2'/>"))
        .attachment(attachment(3, unix_ns(), &gid))
        .wait()
        .expect("put");
    let (m, _) = tcp.recv_until(|v| v["op"] == "publish", deadline(REPLY));
    assert_eq!(m["msg"]["data"], "<robot name='r2'/>", "{m}");
    let m = ws_until(&mut ws, |v| v["op"] == "publish", deadline(REPLY));
    assert_eq!(m["msg"]["data"], "<robot name='r2'/>", "{m}");
    assert!(tcp.barrier().is_empty(), "one copy of each sample");
    assert!(ws.barrier().is_empty(), "one copy of each sample");
}

#[test]
fn a_latched_client_publish_reaches_ros2_subscribers_that_come_later() {
    use zenoh_ext::{AdvancedSubscriberBuilderExt, HistoryConfig};
    let (gw, ep) = ros_gateway(&[]);
    let mut node = RosNode::join(&ep, "late_listener");
    let mut tcp = gw.client();
    tcp.send_line(r#"{"op":"advertise","topic":"/map_name","type":"std_msgs/msg/String","latch":true,"id":"a"}"#);
    tcp.expect_info("a");
    tcp.send_line(r#"{"op":"publish","topic":"/map_name","msg":{"data":"floor-1"}}"#);
    let _ = tcp.barrier();
    // A transient local ROS 2 subscription appears after the publish, as
    // rmw_zenoh makes one: history from late-detected publishers.
    // (payload, attachment) of each sample.
    let got: Arc<Mutex<Vec<Sampled>>> = Arc::default();
    let g = got.clone();
    let key = "0/map_name/std_msgs::msg::dds_::String_/RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18";
    let _sub = node
        .session
        .declare_subscriber(key)
        .history(HistoryConfig::default().detect_late_publishers())
        .callback(move |s: zenoh::sample::Sample| {
            let att = s
                .attachment()
                .map(|a| a.to_bytes().to_vec())
                .unwrap_or_default();
            g.lock()
                .unwrap()
                .push((s.payload().to_bytes().to_vec(), att));
        })
        .wait()
        .expect("advanced subscriber");
    let _ms = declare_qos(
        &mut node,
        EntityKind::Subscription,
        "/map_name",
        STRING_DDS,
        STRING_HASH,
        transient_local(1),
    );
    let dl = deadline(CROSS);
    while got.lock().unwrap().is_empty() {
        assert!(
            Instant::now() < dl,
            "the latched message never reached the late ROS 2 subscriber"
        );
        thread::sleep(ms(20));
    }
    // The gateway's publisher token says transient local, depth 1.
    let (_, tok) = node.wait_graph("the gateway's MP token for /map_name", |t| {
        t.kind == EntityKind::Publisher
            && t.endpoint.as_ref().is_some_and(|e| e.name == "/map_name")
    });
    let qos = tok.endpoint.expect("endpoint").qos;
    assert_eq!(
        (qos.durability, qos.depth),
        (rmw::Durability::TransientLocal, 1),
        "{qos:?}"
    );
    // Exactly once, as CDR with the gateway's attachment: a live message
    // after it comes next (a second copy from the cache would come first).
    tcp.send_line(r#"{"op":"publish","topic":"/map_name","msg":{"data":"floor-2"}}"#);
    let dl = deadline(CROSS);
    while got.lock().unwrap().len() < 2 {
        assert!(Instant::now() < dl, "the live message never arrived");
        thread::sleep(ms(20));
    }
    let got = got.lock().unwrap();
    let payloads: Vec<&Vec<u8>> = got.iter().map(|(p, _)| p).collect();
    assert_eq!(
        payloads,
        vec![&cdr_string("floor-1"), &cdr_string("floor-2")],
        "one copy each"
    );
    let (s1, g1) = check_attachment(&got[0].1);
    let (s2, g2) = check_attachment(&got[1].1);
    assert_eq!((s2, g2), (s1 + 1, g1), "one publisher, numbered in order");
}

/// A ROS 2 node's parameter services as rclpy serves them: `gain`, a
/// double, whose set callback refuses anything else (with rclpy's reason
/// text); the value lives in the returned cell.
fn serve_node_parameters(
    node: &mut RosNode,
) -> (
    Vec<zenoh::query::Queryable<()>>,
    Vec<LivelinessToken>,
    Arc<Mutex<f64>>,
) {
    let gain = Arc::new(Mutex::new(1.5));
    let (mut queryables, mut tokens) = (Vec::new(), Vec::new());
    let fqn = format!("/{}", node.name);
    for short in ["get_parameters", "set_parameters"] {
        let ty = match short {
            "get_parameters" => "rcl_interfaces/srv/GetParameters",
            _ => "rcl_interfaces/srv/SetParameters",
        };
        let name = format!("{fqn}/{short}");
        let (dds, hash) = action_entity(ty);
        let gain = gain.clone();
        let q = node
            .session
            .declare_queryable(rmw::data_key(0, &name, &dds, &hash))
            .complete(true)
            .callback(move |q: Query| {
                let (req, seq, gid) = served_request(&q);
                let req = decode_as(&format!("{ty}_Request"), &req);
                let mut gain = gain.lock().unwrap();
                let response = if short == "get_parameters" {
                    let values: Vec<Value> = req["names"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|n| {
                            if n == "gain" {
                                serde_json::json!({"type": 3, "double_value": *gain})
                            } else {
                                serde_json::json!({"type": 0})
                            }
                        })
                        .collect();
                    serde_json::json!({ "values": values })
                } else {
                    let p = &req["parameters"][0];
                    let result = if p["name"] == "gain" && p["value"]["type"] == 3 {
                        *gain = p["value"]["double_value"].as_f64().unwrap_or(f64::NAN);
                        serde_json::json!({"successful": true, "reason": ""})
                    } else {
                        serde_json::json!({"successful": false, "reason": "Wrong parameter type, expected 'Type.DOUBLE'"})
                    };
                    serde_json::json!({ "results": [result] })
                };
                let body = encode_as(&format!("{ty}_Response"), response);
                let _ = q
                    .reply(q.key_expr().clone(), body)
                    .attachment(attachment(seq, unix_ns(), &gid))
                    .wait();
            })
            .wait()
            .expect("queryable");
        queryables.push(q);
        let (_, token) = node.declare(EntityKind::ServiceServer, &name, &dds, &hash, 10);
        tokens.push(token);
    }
    (queryables, tokens, gain)
}

/// rosapi `get_param`/`set_param` and `rosgate param set` of a ROS 2
/// node's parameter reach the node's own services, as `ros2 param` does:
/// the node's value is read, a set changes it, and the node's refusal is
/// a failure with its reason (the CLI exits 1), the value unchanged.
#[test]
fn rosapi_and_the_cli_read_and_set_a_ros2_nodes_parameters_through_its_services() {
    let (gw, ep) = ros_gateway(&[]);
    let mut node = RosNode::join(&ep, "rclpy_node");
    let (_q, _t, gain) = serve_node_parameters(&mut node);
    let mut c = gw.client();
    let dl = deadline(CROSS);
    let v = loop {
        let v = call_values(
            &mut c,
            "/rosapi/get_param",
            r#"{"name":"/rclpy_node:gain"}"#,
        );
        if v["values"]["value"] == "1.5" {
            break v;
        }
        assert!(Instant::now() < dl, "the node's parameter never read: {v}");
        thread::sleep(ms(50));
    };
    assert_eq!(v["values"]["successful"], true, "{v}");
    let v = call_values(
        &mut c,
        "/rosapi/set_param",
        r#"{"name":"/rclpy_node:gain","value":"2.5"}"#,
    );
    assert_eq!(v["result"], true, "{v}");
    assert_eq!(*gain.lock().unwrap(), 2.5);
    let v = call_values(
        &mut c,
        "/rosapi/set_param",
        r#"{"name":"/rclpy_node:gain","value":"\"fast\""}"#,
    );
    assert_eq!(v["result"], false, "{v}");
    assert!(
        v["values"]
            .as_str()
            .is_some_and(|r| r.contains("Type.DOUBLE")),
        "{v}"
    );
    assert_eq!(*gain.lock().unwrap(), 2.5);
    let url = format!("tcp://{}", gw.addr);
    let out = run(&["param", "set", "/rclpy_node", "gain", "3.0", "--url", &url]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(*gain.lock().unwrap(), 3.0);
    let out = run(&["param", "set", "/rclpy_node", "gain", "fast", "--url", &url]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("Setting parameter failed") && err.contains("Type.DOUBLE"),
        "{err}"
    );
    assert_eq!(*gain.lock().unwrap(), 3.0);
    let out = run(&["param", "get", "/rclpy_node", "gain", "--url", &url]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("Double value is: 3.0"),
        "{out:?}"
    );
}

/// Names no real node can announce (rmw refuses them) are counted and
/// never listed; the entities of one node are bounded, the rest refused
/// and counted; what the gateway holds for them is in the memory ledger.
#[test]
fn ros2_graph_names_are_checked_and_nodes_bounded() {
    let (gw, ep) = ros_gateway(&[]);
    let node = RosNode::join(&ep, "honest");
    let lv = node.session.liveliness();
    let zid = node.zid.clone();
    let token = |nid: u64, id: u64, kind: &str, name: &str, topic: Option<&str>| {
        let mut k = format!("@ros2_lv/0/{zid}/{nid}/{id}/{kind}/%/%/{name}");
        if let Some(t) = topic {
            k.push_str(&format!("/{t}/{STRING_DDS}/{STRING_HASH}/::,7:,:,:,,"));
        }
        lv.declare_token(k).wait().expect("token")
    };
    let mut held = Vec::new();
    // Invalid names: a node named "..", one with a space, one with a
    // zero-width character, a topic with a space.
    for (i, (name, topic)) in [
        ("..", "%ok_topic"),
        ("sp ace", "%ok_topic"),
        ("zero\u{200b}width", "%ok_topic"),
        ("fine_node", "%sp ace"),
    ]
    .iter()
    .enumerate()
    {
        let nid = 100 + 2 * i as u64;
        held.push(token(nid, nid, "NN", name, None));
        held.push(token(nid, nid + 1, "MP", name, Some(topic)));
    }
    // One node with more entities than it may have.
    let per_node = rosgate_zenoh::MAX_ROS_ENTITIES_PER_NODE;
    held.push(token(500, 500, "NN", "greedy", None));
    for i in 0..per_node + 10 {
        let t = format!("%greedy%t{i}");
        held.push(token(500, 501 + i as u64, "MP", "greedy", Some(&t)));
    }
    // Both tokens of each bad node, the publisher of the fine one.
    let s = gw.wait_for_stats("the invalid names and the excess were counted", |s| {
        counter(s, "ros2_names_rejected") >= 7 && counter(s, "ros2_entities_refused") >= 11
    });
    assert_eq!(counter(&s, "ros2_names_rejected"), 7, "{s}");
    assert_eq!(counter(&s, "ros2_entities_refused"), 11, "{s}");
    assert!(
        counter(&s, "memory_federation_bytes") > (per_node * 256) as u64,
        "{s}"
    );
    let mut c = gw.client();
    let dl = deadline(CROSS);
    let nodes = loop {
        let v = call_values(&mut c, "/rosapi/nodes", "{}");
        let nodes: Vec<String> = v["values"]["nodes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|n| n.as_str().map(str::to_string))
            .collect();
        if nodes.iter().any(|n| n == "/greedy") {
            break nodes;
        }
        assert!(Instant::now() < dl, "/greedy never listed: {nodes:?}");
        thread::sleep(ms(50));
    };
    assert!(nodes.iter().any(|n| n == "/honest"), "{nodes:?}");
    assert!(nodes.iter().any(|n| n == "/fine_node"), "{nodes:?}");
    for bad in ["/..", "/sp ace", "/zero\u{200b}width"] {
        assert!(!nodes.iter().any(|n| n == bad), "{bad:?} listed: {nodes:?}");
    }
    let topics = rosapi_topics(&gw);
    assert!(
        !topics
            .iter()
            .any(|(n, _)| n.contains(' ') || n == "/ok_topic"),
        "{topics:?}"
    );
    drop(held);
    gw.wait_for_stats("nothing held for them once they went", |s| {
        counter(s, "memory_federation_bytes") < (per_node * 256) as u64
    });
}

/// A flood of ROS 2 samples costs the loop's inbox budget: each is either
/// taken (`samples_received`) or shed and counted (`samples_dropped`),
/// none is lost unaccounted, and the loop keeps answering while it comes.
#[test]
fn a_flood_of_ros2_samples_is_shed_and_counted_and_never_stalls_the_loop() {
    const N: i64 = 20_000;
    let (gw, ep) = ros_gateway(&[]);
    let mut node = RosNode::join(&ep, "flooder");
    let (_, gid, _mp) = node.declare_chatter();
    let mut sub = gw.client();
    sub.send_line(r#"{"op":"subscribe","topic":"/chatter","type":"std_msgs/msg/String","id":"s"}"#);
    sub.expect_info("s");
    // Probes (outside the count) until the subscription is in.
    let dl = deadline(CROSS);
    loop {
        assert!(Instant::now() < dl, "no probe crossed within {CROSS:?}");
        node.put_chatter(0, &gid, cdr_string("probe"));
        if let Recv::Line(_) = sub.try_recv_line(deadline(ms(50))) {
            break;
        }
    }
    let mut probe = gw.client();
    let counts = |probe: &mut Client| {
        let v = call_values(probe, "/rosgate/federation", "{}");
        let n = |k: &str| {
            v["values"][k]
                .as_i64()
                .unwrap_or_else(|| panic!("no {k} in {v}"))
        };
        (n("samples_received"), n("samples_dropped"))
    };
    // The probes may still be arriving: settle, then take the baseline.
    thread::sleep(ms(300));
    let (r0, d0) = counts(&mut probe);
    let session = node.session.clone();
    let text = "x".repeat(1024);
    let flood = thread::spawn(move || {
        for seq in 1..=N {
            session
                .put(CHATTER_KEY, cdr_string(&text))
                .attachment(attachment(seq, unix_ns(), &gid))
                // Zenoh itself never drops one: whatever is shed, the
                // gateway shed (and counted).
                .congestion_control(zenoh::qos::CongestionControl::Block)
                .wait()
                .expect("put");
        }
    });
    // The loop answers all along (each call within the support's REPLY).
    let mut answered = 0;
    while !flood.is_finished() {
        let _ = counts(&mut probe);
        answered += 1;
    }
    flood.join().expect("flood");
    assert!(answered > 0);
    let dl = deadline(CROSS);
    let (r, d) = loop {
        let (r, d) = counts(&mut probe);
        if (r - r0) + (d - d0) >= N || Instant::now() > dl {
            break (r, d);
        }
        thread::sleep(ms(50));
    };
    assert_eq!(
        (r - r0) + (d - d0),
        N,
        "every sample taken or shed and counted (taken {}, shed {})",
        r - r0,
        d - d0
    );
    eprintln!("flood of {N}: taken {}, shed {}", r - r0, d - d0);
    // Every taken sample gave its room back: the budget is whole again.
    let dl = deadline(CROSS);
    loop {
        let v = call_values(&mut probe, "/rosgate/federation", "{}");
        if v["values"]["inbox_bytes"] == 0 {
            break;
        }
        assert!(Instant::now() < dl, "the inbox budget leaks: {v}");
        thread::sleep(ms(50));
    }
    // The subscriber still hears the topic afterwards.
    let dl = deadline(CROSS);
    let mut heard = false;
    while !heard && Instant::now() < dl {
        if let Recv::Line(l) = sub.try_recv_line(deadline(ms(200))) {
            heard = parse_line(&String::from_utf8_lossy(&l))["op"] == "publish";
        }
    }
    assert!(heard, "nothing reached the subscriber");
}

/// Two gateways in one ROS 2 graph, federated: what a client publishes on
/// one reaches ROS 2 (a ROS 2 subscription wants it) and the other
/// gateway's subscriber through the federation. The other gateway also
/// receives that ROS 2 sample, from the first gateway's publisher, and
/// drops it (the first gateway is a rosgate gateway): its client gets the
/// message once.
#[test]
fn a_message_another_gateway_put_into_ros2_reaches_a_subscriber_here_once() {
    let (a, ep_a) = ros_gateway(&[]);
    let (b, _) = ros_gateway(&["--zenoh-connect", ep_a.as_str()]);
    let mut node = RosNode::join(&ep_a, "listener");
    let (_ms_key, _ms) = node.declare(
        EntityKind::Subscription,
        "/chatter",
        STRING_DDS,
        STRING_HASH,
        10,
    );
    let mut on_b = b.client();
    on_b.send_line(
        r#"{"op":"subscribe","topic":"/chatter","type":"std_msgs/msg/String","id":"s"}"#,
    );
    on_b.expect_info("s");
    let mut on_a = a.client();
    // Probes until one crosses from A to B (federated; A's ROS 2
    // publisher declared, ROS 2 wanting it).
    let dl = deadline(CROSS);
    loop {
        assert!(
            Instant::now() < dl,
            "nothing crossed from A to B within {CROSS:?}"
        );
        on_a.send_line(r#"{"op":"publish","topic":"/chatter","msg":{"data":"probe"}}"#);
        if let Recv::Line(_) = on_b.try_recv_line(deadline(ms(100))) {
            break;
        }
    }
    // B's link sees A's publisher token and knows A is a gateway: A's
    // ROS 2 samples are dropped there as echoes (the probes made some).
    let echoes = |gw: &Gateway| {
        let mut c = gw.client();
        call_values(&mut c, "/rosgate/federation", "{}")["values"]["ros2"]["echoes"]
            .as_u64()
            .unwrap_or(0)
    };
    let dl = deadline(CROSS);
    while echoes(&b) == 0 {
        assert!(Instant::now() < dl, "B never dropped A's ROS 2 sample");
        on_a.send_line(r#"{"op":"publish","topic":"/chatter","msg":{"data":"probe"}}"#);
        thread::sleep(ms(50));
    }
    // Drain the probes, then one message: heard once.
    while let Recv::Line(_) = on_b.try_recv_line(deadline(ms(300))) {}
    on_a.send_line(r#"{"op":"publish","topic":"/chatter","msg":{"data":"once"}}"#);
    let mut heard = 0;
    let dl = deadline(ms(1500));
    while let Recv::Line(l) = on_b.try_recv_line(dl) {
        let v = parse_line(&String::from_utf8_lossy(&l));
        if v["msg"]["data"] == "once" {
            heard += 1;
        }
    }
    assert_eq!(heard, 1, "the message reached B's subscriber {heard} times");
}

/// The `msg.bytes` of a `cbor-raw` publish frame, read by hand (RFC 8949:
/// definite lengths, text keys, unsigned seconds): not the gateway's
/// encoder.
fn cbor_raw_bytes(b: &[u8]) -> Vec<u8> {
    // (major type, argument) at `i`, advancing past the head.
    fn head(b: &[u8], i: &mut usize) -> (u8, usize) {
        let first = b[*i];
        *i += 1;
        let n = match first & 0x1f {
            n if n < 24 => 0,
            24 => 1,
            25 => 2,
            26 => 4,
            27 => 8,
            n => panic!("length {n}: never sent"),
        };
        let arg = if n == 0 {
            usize::from(first & 0x1f)
        } else {
            let v = b[*i..*i + n]
                .iter()
                .fold(0usize, |a, &x| (a << 8) | usize::from(x));
            *i += n;
            v
        };
        (first >> 5, arg)
    }
    fn text(b: &[u8], i: &mut usize) -> String {
        let (major, n) = head(b, i);
        assert_eq!(major, 3, "a text key");
        let s = String::from_utf8(b[*i..*i + n].to_vec()).expect("UTF-8");
        *i += n;
        s
    }
    let mut i = 0;
    assert_eq!(head(b, &mut i), (5, 3), "a map of op, topic, msg");
    assert_eq!(
        (text(b, &mut i), text(b, &mut i)),
        ("op".into(), "publish".into())
    );
    assert_eq!(text(b, &mut i), "topic");
    assert_eq!(text(b, &mut i), "/chatter");
    assert_eq!(text(b, &mut i), "msg");
    assert_eq!(head(b, &mut i), (5, 3), "msg: secs, nsecs, bytes");
    assert_eq!(text(b, &mut i), "secs");
    assert_eq!(head(b, &mut i).0, 0);
    assert_eq!(text(b, &mut i), "nsecs");
    assert_eq!(head(b, &mut i).0, 0);
    assert_eq!(text(b, &mut i), "bytes");
    let (major, n) = head(b, &mut i);
    assert_eq!(major, 2, "a byte string");
    assert_eq!(i + n, b.len(), "nothing after the bytes");
    b[i..].to_vec()
}

#[test]
fn ros2_cdr_reaches_cbor_raw_subscribers_byte_for_byte_undecoded() {
    let (gw, ep) = ros_gateway(&[]);
    let mut node = RosNode::join(&ep, "talker");
    let (_, gid, _mp) = node.declare_chatter();
    let mut ws = Ws::connect(&gw);
    ws.send_text(
        r#"{"op":"subscribe","topic":"/chatter","type":"std_msgs/msg/String","compression":"cbor-raw","id":"raw"}"#,
    );
    assert!(ws.barrier().is_empty(), "no error for the subscribe");
    // CDR as a node may put it: trailing bytes past the string (a
    // decoder ignores them, a re-encoding would not make them), so only
    // the bytes as they came match.
    let payload = |n: u32| {
        let mut b = cdr_string(&format!("raw {n}"));
        b.extend_from_slice(&[0xAA, 0xBB, 0xCC]);
        b
    };
    let mut sent = Vec::new();
    let mut seq = 0i64;
    let got = loop {
        assert!(
            seq < (CROSS.as_millis() / 100) as i64,
            "no sample reached the cbor-raw subscriber within {CROSS:?}"
        );
        seq += 1;
        let p = payload(seq as u32);
        node.put_chatter(seq, &gid, p.clone());
        sent.push(p);
        if let Some((op, frame)) = ws.try_frame(deadline(ms(100))) {
            assert_eq!(op, 0x2, "a binary frame: {frame:?}");
            break cbor_raw_bytes(&frame);
        }
    };
    assert!(
        sent.contains(&got),
        "the CDR the node put, byte for byte: got {got:02x?}"
    );
    // In order, each exactly as put.
    let next = sent.iter().position(|p| *p == got).expect("sent") + 1;
    for p in &sent[next..] {
        let (op, frame) = ws.frame();
        assert_eq!(op, 0x2);
        assert_eq!(&cbor_raw_bytes(&frame), p, "in order, byte for byte");
    }
    // Only a cbor-raw subscriber: never decoded.
    // The frames read: the first one heard, and those after it.
    let heard = (sent.len() - next + 1) as u64;
    let s = gw.wait_for_stats("samples passed through", |s| {
        counter(s, "cdr_passed_through") >= heard
    });
    assert_eq!(
        counter(&s, "cdr_in"),
        counter(&s, "cdr_passed_through"),
        "{s}"
    );
    // A JSON subscriber joins: the sample is decoded for it, once, and
    // the cbor-raw one still gets the bytes as they came.
    let mut tcp = gw.client();
    tcp.send_line(
        r#"{"op":"subscribe","topic":"/chatter","type":"std_msgs/msg/String","id":"tsub"}"#,
    );
    tcp.expect_info("tsub");
    let clean = cdr_string("decoded too");
    seq += 1;
    node.put_chatter(seq, &gid, clean.clone());
    let v = parse_line(&tcp.recv_raw(deadline(CROSS)));
    assert_eq!(v["msg"], serde_json::json!({"data": "decoded too"}), "{v}");
    let (op, frame) = ws.frame();
    assert_eq!(op, 0x2);
    assert_eq!(cbor_raw_bytes(&frame), clean);
    let after = gw.stats();
    assert_eq!(
        counter(&after, "cdr_in"),
        counter(&after, "cdr_passed_through") + 1,
        "decoded once for the JSON subscriber: {after}"
    );
}

/// The Foxglove WebSocket protocol with a ROS 2 node's topic
/// (docs/protocol.md, "Foxglove WebSocket protocol"): the node's publisher
/// makes a `cdr` channel with the `ros2msg` schema, and its samples reach
/// the session byte for byte as the node put them (a padding byte no
/// encoder of ours would write included: nothing decoded or re-encoded).
#[test]
fn a_ros2_publishers_topic_is_a_foxglove_channel_with_its_cdr_untouched() {
    let (gw, ep) = ros_gateway(&["--foxglove-listen", "127.0.0.1:0"]);
    let mut node = RosNode::join(&ep, "fx_talker");
    let (_, gid, _mp) = node.declare_chatter();
    let mut fx = fxclient::foxglove(&gw);
    let ch = fxclient::foxglove_channel(&mut fx, "/chatter", CROSS);
    fxclient::assert_string_cdr_channel(&ch);
    fx.send_text(&format!(
        r#"{{"op":"subscribe","subscriptions":[{{"id":5,"channelId":{}}}]}}"#,
        ch["id"]
    ));
    // "hi" and a trailing padding byte 0xab (CDR ends may be padded; our
    // encoder pads with nothing).
    let mut sample = cdr_string("hi");
    sample.push(0xab);
    let mut seq = 0i64;
    let dl = deadline(CROSS);
    let data = loop {
        seq += 1;
        node.put_chatter(seq, &gid, sample.clone());
        if let Some((0x2, data)) = fx.try_frame(deadline(ms(100))) {
            break data;
        }
        assert!(Instant::now() < dl, "no sample crossed within {CROSS:?}");
    };
    assert_eq!(&data[..5], &[0x01, 5, 0, 0, 0]);
    assert_eq!(&data[13..], &sample[..], "the node's CDR, byte for byte");
}

/// `rosgate bag record` of a ROS 2 node's topic (issue 28): the recorder,
/// a client of the gateway in `cbor-raw`, writes the node's CDR exactly
/// as the node put it (trailing padding included), in order, with the
/// `ros2msg` schema; nothing is decoded and encoded again on the way.
#[test]
fn a_ros2_topic_is_recorded_with_the_nodes_cdr_untouched() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let (gw, ep) = ros_gateway(&[]);
    let mut node = RosNode::join(&ep, "talker");
    let (_, gid, _mp) = node.declare_chatter();
    let ws = gw
        .logs()
        .iter()
        .find_map(|l| {
            l.split("websocket listening on ws://")
                .nth(1)
                .map(|a| a.trim().to_string())
        })
        .expect("websocket listening line");
    let dir = std::env::temp_dir().join(format!("rosgate_ros2_bag_{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut rec = Command::new(env!("CARGO_BIN_EXE_rosgate"))
        .args(["bag", "record", "/chatter", "-o"])
        .arg(&dir)
        .args(["--url", &format!("ws://{ws}/")])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the recorder");
    let err = rec.stderr.take().expect("stderr");
    let (tx, lines) = std::sync::mpsc::channel::<String>();
    thread::spawn(move || {
        for l in BufReader::new(err).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    let dl = deadline(CROSS);
    while !seen
        .iter()
        .any(|l: &String| l.contains("subscribed to /chatter"))
    {
        match lines.recv_timeout(dl.saturating_duration_since(Instant::now())) {
            Ok(l) => seen.push(l),
            Err(_) => panic!("the recorder did not subscribe: {seen:?}"),
        }
    }
    // A String's CDR with two padding bytes after it (0xab, not zeros): a
    // recorder that decoded and encoded again would write it without them.
    let padded = |text: &str| {
        let mut b = cdr_string(text);
        b.extend_from_slice(&[0xab, 0xab]);
        b
    };
    // Probes until the gateway's data subscription is in (the recorder's
    // interest crossed), watched through a TCP subscriber of its own.
    let mut tcp = gw.client();
    tcp.send_line(r#"{"op":"subscribe","topic":"/chatter","type":"std_msgs/msg/String","id":"s"}"#);
    tcp.expect_info("s");
    let mut seq = 0i64;
    let dl = deadline(CROSS);
    loop {
        seq += 1;
        node.put_chatter(seq, &gid, padded("probe"));
        if let Recv::Line(l) = tcp.try_recv_line(deadline(Duration::from_millis(200))) {
            if parse_line(&String::from_utf8_lossy(&l))["msg"]["data"] == "probe" {
                break;
            }
        }
        assert!(Instant::now() < dl, "no sample crossed");
    }
    let texts: Vec<String> = (0..30)
        .map(|i| format!("rec {i} {}", "y".repeat(i)))
        .collect();
    for t in &texts {
        seq += 1;
        node.put_chatter(seq, &gid, padded(t));
    }
    // The TCP subscriber saw the last one: so did the recorder's queue.
    let last = texts.last().cloned().unwrap_or_default();
    let dl = deadline(CROSS);
    loop {
        let l = tcp.recv_raw(dl);
        if parse_line(&l)["msg"]["data"] == last.as_str() {
            break;
        }
    }
    thread::sleep(Duration::from_millis(500));
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(
        unsafe { libc::kill(rec.id() as libc::pid_t, libc::SIGINT) },
        0
    );
    let dl = deadline(Duration::from_secs(15));
    let status = loop {
        if let Some(st) = rec.try_wait().expect("wait") {
            break st;
        }
        assert!(Instant::now() < dl, "the recorder did not stop on SIGINT");
        thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(0), "{seen:?}");
    let base = dir
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_string();
    let buf = std::fs::read(dir.join(format!("{base}_0.mcap"))).expect("the bag's file");
    let recorded: Vec<Vec<u8>> = mcap::MessageStream::new(&buf)
        .expect("an MCAP file")
        .map(|m| m.expect("a message"))
        .inspect(|m| {
            assert_eq!(m.channel.topic, "/chatter");
            assert_eq!(m.channel.message_encoding, "cdr");
            let s = m.channel.schema.as_ref().expect("a schema");
            assert_eq!(
                (s.name.as_str(), s.encoding.as_str()),
                ("std_msgs/msg/String", "ros2msg")
            );
        })
        .map(|m| m.data.to_vec())
        .filter(|d| *d != padded("probe"))
        .collect();
    let want: Vec<Vec<u8>> = texts.iter().map(|t| padded(t)).collect();
    assert_eq!(recorded, want, "every sample, in order, byte for byte");
    let _ = std::fs::remove_dir_all(&dir);
}

/// CDR of a `tf2_msgs/msg/TFMessage` with one `TransformStamped`
/// (`parent` -> `child`, translation `x`, identity rotation), by hand:
/// alignment counts from after the 4-byte encapsulation header.
fn cdr_tf_message(sec: i32, parent: &str, child: &str, x: f64) -> Vec<u8> {
    let mut b = vec![0x00, 0x01, 0x00, 0x00];
    let align = |b: &mut Vec<u8>, n: usize| {
        while (b.len() - 4) % n != 0 {
            b.push(0);
        }
    };
    let string = |b: &mut Vec<u8>, s: &str| {
        while (b.len() - 4) % 4 != 0 {
            b.push(0);
        }
        b.extend_from_slice(&(s.len() as u32 + 1).to_le_bytes());
        b.extend_from_slice(s.as_bytes());
        b.push(0);
    };
    b.extend_from_slice(&1u32.to_le_bytes()); // one transform
    b.extend_from_slice(&sec.to_le_bytes()); // header.stamp.sec
    b.extend_from_slice(&0u32.to_le_bytes()); // header.stamp.nanosec
    string(&mut b, parent);
    string(&mut b, child);
    align(&mut b, 8);
    for v in [x, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0] {
        b.extend_from_slice(&f64::to_le_bytes(v));
    }
    b
}

/// The issue's "the same with /tf coming from a ROS 2 peer": a node
/// publishes `/tf` on the graph; the gateway asks for it only once a TF
/// client exists, and that client's ROS 2 TF goal gets the node's
/// transform, and follows it.
#[test]
fn tf_from_a_ros2_node_reaches_a_tf_client_of_the_gateway() {
    let (gw, ep) = ros_gateway(&[]);
    let mut node = RosNode::join(&ep, "state_publisher");
    // The type's hash as the gateway computes it (rosgate-ros2's tests
    // check its hashes against rosidl's).
    let hash = rosgate_ros2::registry::Registry::bundled()
        .hash("tf2_msgs/msg/TFMessage")
        .expect("TFMessage is bundled");
    let dds = "tf2_msgs::msg::dds_::TFMessage_";
    let (key, _token) = node.declare(EntityKind::Publisher, "/tf", dds, &hash, 100);
    let gid = rmw::gid(&key);
    let data_key = format!("0/tf/{dds}/{hash}");
    let mut c = gw.client();
    c.send_line(
        r#"{"op":"send_action_goal","id":"tf","action":"/tf2_web_republisher","action_type":"tf2_web_republisher_interfaces/action/TFSubscription","feedback":true,"args":{"source_frames":["base"],"target_frame":"odom","angular_thres":0.01,"trans_thres":0.01,"rate":20}}"#,
    );
    let mut seq = 0;
    let mut x_at = |x: f64| {
        let dl = deadline(CROSS);
        loop {
            seq += 1;
            node.session
                .put(&data_key, cdr_tf_message(seq as i32, "odom", "base", x))
                .attachment(attachment(seq, unix_ns(), &gid))
                .wait()
                .expect("put");
            if let Recv::Line(l) = c.try_recv_line(deadline(ms(100))) {
                let v = parse_line(&String::from_utf8_lossy(&l));
                if v["op"] == "action_feedback"
                    && v["values"]["transforms"][0]["transform"]["translation"]["x"] == x
                {
                    return v;
                }
            }
            assert!(
                Instant::now() < dl,
                "no feedback with x {x} within {CROSS:?}"
            );
        }
    };
    let v = x_at(1.25);
    assert_eq!(
        v["values"]["transforms"][0]["child_frame_id"], "base",
        "{v}"
    );
    assert_eq!(
        v["values"]["transforms"][0]["header"]["frame_id"], "odom",
        "{v}"
    );
    x_at(2.5);
}
