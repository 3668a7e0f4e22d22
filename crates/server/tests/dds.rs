//! rosgate in a ROS 2 graph over DDS (`--dds-domain`): the real gateway
//! binary, and a minimal ROS 2 node played in-process with RustDDS on
//! loopback, as rmw_fastrtps shapes one: its data writer on `rt/chatter`
//! typed `std_msgs::msg::dds_::String_`, and its node on
//! `ros_discovery_info` (`rmw_dds_common/msg/ParticipantEntitiesInfo`)
//! listing that writer. Each test uses a DDS domain of its own.
//!
//! Not circular: the samples' CDR is built by hand here, and the node list
//! by the adapter whose encoding the adapter's unit tests check byte for
//! byte against a sample rclpy put (`crates/ros2/src/link/rmw_dds.rs`).
//! Built only with the `dds` feature. `scripts/ros2-dds-check.py` runs the
//! same paths against real rclpy nodes.

#[allow(dead_code)]
#[path = "it/support.rs"]
mod support;

use std::time::{Duration, Instant};

use rosgate_dds::raw::Raw;
use rosgate_ros2::link::rmw_dds::{self, NodeInfo, ParticipantInfo};
use rustdds::no_key::DataWriter;
use rustdds::policy::{Durability, History, Reliability};
use rustdds::{DomainParticipant, QosPolicyBuilder, RTPSEntity, TopicKind};
use serde_json::json;
use support::*;

/// The longest anything may take to cross between the fake node and the
/// gateway (discovery included; a bound a test waits, not a sleep).
const CROSS: Duration = Duration::from_secs(20);

/// A DDS domain no other test of this process uses (and unlikely any
/// other process on the host).
fn domain() -> u16 {
    150 + (std::process::id() as u16 % 40) + uniq() as u16
}

/// A minimal ROS 2 node on DDS: a participant on loopback with a
/// `String` writer on `rt/chatter`, announced on `ros_discovery_info`.
struct FakeNode {
    dp: DomainParticipant,
    chatter: DataWriter<Vec<u8>, Raw>,
    _info: DataWriter<Vec<u8>, Raw>,
}

impl FakeNode {
    fn new(domain: u16) -> FakeNode {
        let dp = rustdds::DomainParticipantBuilder::new(domain)
            .with_only_networks(["127.0.0.1".parse::<std::net::IpAddr>().expect("ip")])
            .build()
            .expect("participant");
        let reliable = Reliability::Reliable {
            max_blocking_time: Duration::from_millis(100).into(),
        };
        let qos = QosPolicyBuilder::new()
            .reliability(reliable)
            .durability(Durability::Volatile)
            .history(History::KeepLast { depth: 10 })
            .build();
        let publisher = dp.create_publisher(&qos).expect("publisher");
        let topic = dp
            .create_topic(
                "rt/chatter".into(),
                "std_msgs::msg::dds_::String_".into(),
                &qos,
                TopicKind::NoKey,
            )
            .expect("topic");
        let chatter = publisher
            .create_datawriter_no_key::<Vec<u8>, Raw>(&topic, None)
            .expect("writer");
        let info_qos = QosPolicyBuilder::new()
            .reliability(reliable)
            .durability(Durability::TransientLocal)
            .history(History::KeepLast { depth: 1 })
            .build();
        let info_topic = dp
            .create_topic(
                rmw_dds::DISCOVERY_TOPIC.into(),
                rmw_dds::DISCOVERY_TYPE.into(),
                &info_qos,
                TopicKind::NoKey,
            )
            .expect("info topic");
        let info = publisher
            .create_datawriter_no_key::<Vec<u8>, Raw>(&info_topic, Some(info_qos))
            .expect("info writer");
        let node = ParticipantInfo {
            gid: dp.guid().to_bytes(),
            nodes: vec![NodeInfo {
                namespace: "/".into(),
                name: "fake_talker".into(),
                readers: vec![],
                writers: vec![chatter.guid().to_bytes()],
            }],
        };
        info.write(rmw_dds::encode_info(&node), None)
            .expect("node announced");
        FakeNode {
            dp,
            chatter,
            _info: info,
        }
    }

    /// Writes `std_msgs/String` `text` as CDR built by hand: the
    /// encapsulation header (CDR little endian), the length with its NUL,
    /// the bytes, the NUL.
    fn say(&self, text: &str) {
        let mut cdr = vec![0, 1, 0, 0];
        cdr.extend_from_slice(&(text.len() as u32 + 1).to_le_bytes());
        cdr.extend_from_slice(text.as_bytes());
        cdr.push(0);
        let _ = self.chatter.write(cdr, None);
    }
}

fn dds_gateway(domain: u16) -> Gateway {
    let d = domain.to_string();
    Gateway::start(&["--tcp-domain", &d, "--dds-domain", &d])
}

#[test]
fn a_ros2_node_on_dds_is_listed_and_its_samples_reach_a_subscriber() {
    let d = domain();
    let gw = dds_gateway(d);
    let node = FakeNode::new(d);
    let mut c = gw.client();
    // The node is listed once its writer and its node list are discovered.
    let dl = deadline(CROSS);
    loop {
        c.send_json(&json!({"op":"call_service","service":"/rosapi/nodes","args":{},"id":"n"}));
        let (v, _) = c.recv_until(|v| v["id"] == "n", deadline(Duration::from_secs(5)));
        let nodes = v["values"]["nodes"].as_array().cloned().unwrap_or_default();
        if nodes.iter().any(|n| n == "/fake_talker") {
            break;
        }
        if Instant::now() >= dl {
            c.send_json(
                &json!({"op":"call_service","service":"/rosgate/federation","args":{},"id":"f"}),
            );
            let (f, _) = c.recv_until(|v| v["id"] == "f", deadline(Duration::from_secs(5)));
            panic!(
                "/fake_talker never listed: {v}; the DDS side: {}",
                f["values"]["dds"]
            );
        }
        std::thread::sleep(ms(200));
    }
    c.send_json(&json!({"op":"subscribe","topic":"/chatter","type":"std_msgs/msg/String"}));
    let dl = deadline(CROSS);
    loop {
        node.say("hello over dds");
        match c.try_recv_line(deadline(ms(300))) {
            Recv::Line(l) if String::from_utf8_lossy(&l).contains("hello over dds") => {
                let v: serde_json::Value = serde_json::from_slice(&l).expect("json");
                assert_eq!(v["msg"], json!({"data": "hello over dds"}));
                break;
            }
            _ => assert!(Instant::now() < dl, "no sample crossed"),
        }
    }
    drop(node.dp);
}

#[test]
fn the_gateway_lists_its_node_on_ros_discovery_info() {
    let d = domain();
    let _gw = dds_gateway(d);
    let dp = rustdds::DomainParticipantBuilder::new(d)
        .with_only_networks(["127.0.0.1".parse::<std::net::IpAddr>().expect("ip")])
        .build()
        .expect("participant");
    let qos = QosPolicyBuilder::new()
        .reliability(Reliability::Reliable {
            max_blocking_time: Duration::ZERO.into(),
        })
        .durability(Durability::TransientLocal)
        .history(History::KeepLast { depth: 10 })
        .build();
    let topic = dp
        .create_topic(
            rmw_dds::DISCOVERY_TOPIC.into(),
            rmw_dds::DISCOVERY_TYPE.into(),
            &qos,
            TopicKind::NoKey,
        )
        .expect("topic");
    let sub = dp.create_subscriber(&qos).expect("subscriber");
    let reader = sub
        .create_simple_datareader_no_key::<Vec<u8>, Raw>(&topic, Some(qos))
        .expect("reader");
    let dl = deadline(CROSS);
    loop {
        if let Ok(Some(s)) = reader.try_take_one() {
            let info = rmw_dds::decode_info(&s.sample).expect("the gateway's info decodes");
            if info.nodes.iter().any(|n| n.name.starts_with("rosgate_")) {
                assert_eq!(info.nodes[0].namespace, "/");
                break;
            }
        }
        assert!(
            Instant::now() < dl,
            "no ros_discovery_info from the gateway"
        );
        std::thread::sleep(ms(50));
    }
}

#[test]
fn dds_beyond_loopback_without_authentication_is_refused() {
    let out = run(&[
        "--listen",
        "127.0.0.1:0",
        "--ws-listen",
        "127.0.0.1:0",
        "--dds-domain",
        "7",
        "--dds-network",
        "10.1.2.3",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--allow-unauthenticated-network"), "{err}");
}
