//! One gateway in a DDS ROS 2 graph and an rmw_zenoh one at once
//! (issue 26, item 5), with the same rosgate domain: a talker played on
//! DDS (RustDDS, as `tests/dds.rs`), a listener played on rmw_zenoh (a
//! Zenoh session with rmw_zenoh's tokens, as `tests/ros2.rs`), a DDS
//! listener beside the talker and a local TCP client. A DDS sample reaches
//! the rmw_zenoh listener and the client, and is never sent back to DDS
//! (the DDS listener hears each sample once: from the talker itself).
//! Built only with the `dds` and `ros2` features.

#[allow(dead_code)]
#[path = "it/support.rs"]
mod support;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use rosgate_dds::raw::Raw;
use rosgate_ros2::link::rmw_dds::{self, NodeInfo, ParticipantInfo};
use rosgate_ros2::rmw::{Endpoint, EntityKind, Qos, Token};
use rustdds::no_key::DataWriter;
use rustdds::policy::{Durability, History, Reliability};
use rustdds::{QosPolicyBuilder, RTPSEntity, TopicKind};
use support::*;
use zenoh::Wait;

const CROSS: Duration = Duration::from_secs(20);
const STRING_DDS: &str = "std_msgs::msg::dds_::String_";
const STRING_HASH: &str = "RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18";

fn loopback() -> std::net::IpAddr {
    "127.0.0.1".parse().expect("ip")
}

fn cdr_string(text: &str) -> Vec<u8> {
    let mut cdr = vec![0, 1, 0, 0];
    cdr.extend_from_slice(&(text.len() as u32 + 1).to_le_bytes());
    cdr.extend_from_slice(text.as_bytes());
    cdr.push(0);
    cdr
}

/// A String's CDR with trailing padding bytes 0xab to a multiple of 4
/// (CDR ends may be padded; our encoder pads with nothing; RustDDS pads a
/// shorter payload with zeros): what crosses must be these bytes, not the
/// sample decoded and encoded again.
fn padded_string(text: &str) -> Vec<u8> {
    let mut cdr = cdr_string(text);
    cdr.push(0xab);
    while cdr.len() % 4 != 0 {
        cdr.push(0xab);
    }
    cdr
}

/// The text of a String's CDR (by its length, so padding is not text).
fn text_of(cdr: &[u8]) -> String {
    let len = cdr
        .get(4..8)
        .and_then(|b| <[u8; 4]>::try_from(b).ok())
        .map_or(0, |b| u32::from_le_bytes(b) as usize);
    cdr.get(8..(8 + len).saturating_sub(1))
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .unwrap_or_default()
}

/// An rmw_zenoh token of node `node` of session `zid` in `domain`.
fn token(domain: u32, zid: &str, id: u64, kind: EntityKind, endpoint: Option<Endpoint>) -> String {
    Token {
        domain,
        zid: zid.into(),
        nid: 0,
        id,
        kind,
        enclave: "/".into(),
        namespace: "/".into(),
        node: "zenoh_listener".into(),
        endpoint,
    }
    .to_key()
}

/// Announces `participant`'s node `dds_listener` with its one reader on
/// `ros_discovery_info`, as rmw_fastrtps does (reliable, transient local,
/// keep last 1), so the gateway counts the reader as a ROS 2 node's; the
/// writer returned must live as long as the node.
fn announce_listener(
    participant: &rustdds::DomainParticipant,
    reader: [u8; 16],
) -> DataWriter<Vec<u8>, Raw> {
    let info_qos = QosPolicyBuilder::new()
        .reliability(Reliability::Reliable {
            max_blocking_time: Duration::from_millis(100).into(),
        })
        .durability(Durability::TransientLocal)
        .history(History::KeepLast { depth: 1 })
        .build();
    let info_topic = participant
        .create_topic(
            rmw_dds::DISCOVERY_TOPIC.into(),
            rmw_dds::DISCOVERY_TYPE.into(),
            &info_qos,
            TopicKind::NoKey,
        )
        .expect("info topic");
    let info: DataWriter<Vec<u8>, Raw> = participant
        .create_publisher(&info_qos)
        .expect("publisher")
        .create_datawriter_no_key::<Vec<u8>, Raw>(&info_topic, Some(info_qos))
        .expect("info writer");
    let node = ParticipantInfo {
        gid: participant.guid().to_bytes(),
        nodes: vec![NodeInfo {
            namespace: "/".into(),
            name: "dds_listener".into(),
            readers: vec![reader],
            writers: vec![],
        }],
    };
    info.write(rmw_dds::encode_info(&node), None)
        .expect("node announced");
    info
}

#[test]
fn a_dds_sample_reaches_rmw_zenoh_and_a_client_and_never_comes_back_to_dds() {
    let d: u16 = 110 + (std::process::id() as u16 % 40);
    let ds = d.to_string();
    let ep = format!("tcp/127.0.0.1:{}", free_zenoh_port());
    let gw = Gateway::start(&[
        "--tcp-domain",
        &ds,
        "--dds-domain",
        &ds,
        "--ros-domain",
        &ds,
        "--zenoh-listen",
        &ep,
    ]);
    // The rmw_zenoh listener: its node and subscription tokens, and a
    // subscriber on the topic's key.
    let mut c = zenoh::Config::default();
    for (k, v) in [
        ("mode", r#""peer""#.to_string()),
        ("connect/endpoints", format!("[{ep:?}]")),
        ("listen/endpoints", r#"["tcp/127.0.0.1:0"]"#.to_string()),
        ("scouting/multicast/enabled", "false".to_string()),
        ("timestamping/enabled", "true".to_string()),
    ] {
        c.insert_json5(k, &v).expect("zenoh config");
    }
    let z = zenoh::open(c).wait().expect("zenoh session");
    let zid = z.zid().to_string();
    let dom = u32::from(d);
    let _node = z
        .liveliness()
        .declare_token(token(dom, &zid, 0, EntityKind::Node, None))
        .wait()
        .expect("node token");
    let zsub = z
        .declare_subscriber(format!("{d}/chatter/{STRING_DDS}/{STRING_HASH}"))
        .wait()
        .expect("subscriber");
    let endpoint = Endpoint {
        name: "/chatter".into(),
        dds_type: STRING_DDS.into(),
        hash: STRING_HASH.into(),
        qos: Qos::keep_last(10),
    };
    let _ms = z
        .liveliness()
        .declare_token(token(
            dom,
            &zid,
            1,
            EntityKind::Subscription,
            Some(endpoint),
        ))
        .wait()
        .expect("subscription token");
    // The DDS talker and a DDS listener (another participant).
    let reliable = Reliability::Reliable {
        max_blocking_time: Duration::from_millis(100).into(),
    };
    let qos = QosPolicyBuilder::new()
        .reliability(reliable)
        .durability(Durability::Volatile)
        .history(History::KeepLast { depth: 100 })
        .build();
    let talker = rustdds::DomainParticipantBuilder::new(d)
        .with_only_networks([loopback()])
        .build()
        .expect("participant");
    let topic = talker
        .create_topic(
            "rt/chatter".into(),
            STRING_DDS.into(),
            &qos,
            TopicKind::NoKey,
        )
        .expect("topic");
    let writer: DataWriter<Vec<u8>, Raw> = talker
        .create_publisher(&qos)
        .expect("publisher")
        .create_datawriter_no_key::<Vec<u8>, Raw>(&topic, None)
        .expect("writer");
    let listener = rustdds::DomainParticipantBuilder::new(d)
        .with_only_networks([loopback()])
        .build()
        .expect("participant");
    let ltopic = listener
        .create_topic(
            "rt/chatter".into(),
            STRING_DDS.into(),
            &qos,
            TopicKind::NoKey,
        )
        .expect("topic");
    let reader = listener
        .create_subscriber(&qos)
        .expect("subscriber")
        .create_simple_datareader_no_key::<Vec<u8>, Raw>(&ltopic, None)
        .expect("reader");
    // The listener is a ROS 2 node's (on `ros_discovery_info`), so the
    // gateway counts it as a DDS subscriber of /chatter: were samples
    // echoed, they would be written to it.
    let _info = announce_listener(&listener, reader.guid().to_bytes());
    // A local client.
    let mut client = gw.client();
    client.subscribe("/chatter");
    // Talk until the rmw_zenoh listener and the client have heard.
    let (mut zenoh_heard, mut client_heard): (Option<Vec<u8>>, _) = (None, None);
    let dl = deadline(CROSS);
    let mut n = 0;
    while zenoh_heard.is_none() || client_heard.is_none() {
        assert!(
            Instant::now() < dl,
            "within {CROSS:?}: rmw_zenoh heard {zenoh_heard:?}, the client {client_heard:?}"
        );
        n += 1;
        let _ = writer.write(padded_string(&format!("hello {n}")), None);
        if let Ok(Some(s)) = zsub.recv_timeout(ms(100)) {
            zenoh_heard = Some(s.payload().to_bytes().to_vec());
        }
        if let Recv::Line(l) = client.try_recv_line(deadline(ms(50))) {
            if String::from_utf8_lossy(&l).contains("hello ") {
                client_heard = Some(String::from_utf8_lossy(&l).into_owned());
            }
        }
    }
    let heard = zenoh_heard.unwrap_or_default();
    let text = text_of(&heard);
    assert!(text.starts_with("hello "), "{heard:?}");
    assert_eq!(
        heard,
        padded_string(&text),
        "the DDS talker's CDR, byte for byte (not decoded and encoded again)"
    );
    // A few more, then the DDS listener's count of each text: once, from
    // the talker; a copy from the gateway would be an echo.
    for _ in 0..10 {
        n += 1;
        let _ = writer.write(padded_string(&format!("hello {n}")), None);
        std::thread::sleep(ms(50));
    }
    std::thread::sleep(ms(500));
    let mut seen: HashMap<String, u32> = HashMap::new();
    let mut writers = Vec::new();
    while let Ok(Some(s)) = reader.try_take_one() {
        let g = s.writer_guid;
        if !writers.contains(&g) {
            writers.push(g);
        }
        *seen.entry(text_of(&s.sample)).or_default() += 1;
    }
    assert!(!seen.is_empty(), "the DDS listener heard the talker");
    assert_eq!(writers, vec![writer.guid()], "only the talker wrote to DDS");
    assert!(seen.values().all(|&c| c == 1), "{seen:?}");
}

/// rmw_zenoh's attachment, built by hand (`docs/rmw_zenoh.md`,
/// "Attachment"): i64 LE sequence number, i64 LE timestamp, varint 16,
/// the GID.
fn attachment(seq: i64, gid: &[u8; 16]) -> Vec<u8> {
    let ts = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0);
    let mut a = Vec::with_capacity(33);
    a.extend_from_slice(&seq.to_le_bytes());
    a.extend_from_slice(&ts.to_le_bytes());
    a.push(0x10);
    a.extend_from_slice(gid);
    a
}

#[test]
fn an_rmw_zenoh_sample_reaches_dds_and_never_comes_back_to_rmw_zenoh() {
    let d: u16 = 190 + (std::process::id() as u16 % 40);
    let ds = d.to_string();
    let ep = format!("tcp/127.0.0.1:{}", free_zenoh_port());
    let gw = Gateway::start(&[
        "--tcp-domain",
        &ds,
        "--dds-domain",
        &ds,
        "--ros-domain",
        &ds,
        "--zenoh-listen",
        &ep,
    ]);
    // A DDS listener of rt/back, a ROS 2 node's.
    let reliable = Reliability::Reliable {
        max_blocking_time: Duration::from_millis(100).into(),
    };
    let qos = QosPolicyBuilder::new()
        .reliability(reliable)
        .durability(Durability::Volatile)
        .history(History::KeepLast { depth: 100 })
        .build();
    let listener = rustdds::DomainParticipantBuilder::new(d)
        .with_only_networks([loopback()])
        .build()
        .expect("participant");
    let topic = listener
        .create_topic("rt/back".into(), STRING_DDS.into(), &qos, TopicKind::NoKey)
        .expect("topic");
    let reader = listener
        .create_subscriber(&qos)
        .expect("subscriber")
        .create_simple_datareader_no_key::<Vec<u8>, Raw>(&topic, None)
        .expect("reader");
    let _info = announce_listener(&listener, reader.guid().to_bytes());
    // An rmw_zenoh node that publishes and subscribes /back; its own puts
    // stay off its own subscriber (remote destinations only), so anything
    // that subscriber hears would be the gateway's echo.
    let mut c = zenoh::Config::default();
    for (k, v) in [
        ("mode", r#""peer""#.to_string()),
        ("connect/endpoints", format!("[{ep:?}]")),
        ("listen/endpoints", r#"["tcp/127.0.0.1:0"]"#.to_string()),
        ("scouting/multicast/enabled", "false".to_string()),
        ("timestamping/enabled", "true".to_string()),
    ] {
        c.insert_json5(k, &v).expect("zenoh config");
    }
    let z = zenoh::open(c).wait().expect("zenoh session");
    let zid = z.zid().to_string();
    let dom = u32::from(d);
    let key = format!("{d}/back/{STRING_DDS}/{STRING_HASH}");
    let endpoint = Endpoint {
        name: "/back".into(),
        dds_type: STRING_DDS.into(),
        hash: STRING_HASH.into(),
        qos: Qos::keep_last(10),
    };
    let _node = z
        .liveliness()
        .declare_token(token(dom, &zid, 0, EntityKind::Node, None))
        .wait()
        .expect("node token");
    let zsub = z.declare_subscriber(&key).wait().expect("subscriber");
    let _ms = z
        .liveliness()
        .declare_token(token(
            dom,
            &zid,
            1,
            EntityKind::Subscription,
            Some(endpoint.clone()),
        ))
        .wait()
        .expect("subscription token");
    let _mp = z
        .liveliness()
        .declare_token(token(dom, &zid, 2, EntityKind::Publisher, Some(endpoint)))
        .wait()
        .expect("publisher token");
    let gid = [7u8; 16];
    let dl = deadline(CROSS);
    let mut n = 0i64;
    let heard = loop {
        assert!(Instant::now() < dl, "nothing reached DDS within {CROSS:?}");
        n += 1;
        z.put(&key, padded_string(&format!("back {n}")))
            .attachment(attachment(n, &gid))
            .allowed_destination(zenoh::sample::Locality::Remote)
            .wait()
            .expect("put");
        std::thread::sleep(ms(100));
        if let Ok(Some(s)) = reader.try_take_one() {
            break s.sample;
        }
    };
    let text = text_of(&heard);
    assert!(text.starts_with("back "), "{heard:?}");
    assert_eq!(
        heard,
        padded_string(&text),
        "the rmw_zenoh node's CDR, byte for byte (not decoded and encoded again)"
    );
    std::thread::sleep(ms(500));
    let mut echoes = Vec::new();
    while let Ok(Some(s)) = zsub.try_recv() {
        echoes.push(text_of(&s.payload().to_bytes()));
    }
    assert!(echoes.is_empty(), "sent back to rmw_zenoh: {echoes:?}");
    // A client's raw CDR publish on /back reaches both ROS 2 sides as the
    // client's bytes (its padding included), not encoded again.
    let mut c = gw.client();
    c.send_line(r#"{"op":"advertise","topic":"/back","type":"std_msgs/msg/String","id":"adv"}"#);
    c.expect_info("adv");
    let own = padded_string("from a client");
    let ints: Vec<String> = own.iter().map(|b| b.to_string()).collect();
    let msg = format!(r#"{{"bytes":[{}]}}"#, ints.join(","));
    let (mut to_dds, mut to_zenoh) = (None, None);
    let dl = deadline(CROSS);
    while to_dds.is_none() || to_zenoh.is_none() {
        assert!(
            Instant::now() < dl,
            "within {CROSS:?}: DDS got {to_dds:?}, rmw_zenoh {to_zenoh:?}"
        );
        c.publish("/back", &msg);
        std::thread::sleep(ms(100));
        while let Ok(Some(s)) = reader.try_take_one() {
            if text_of(&s.sample) == "from a client" {
                to_dds = Some(s.sample);
            }
        }
        while let Ok(Some(s)) = zsub.try_recv() {
            let b = s.payload().to_bytes().to_vec();
            if text_of(&b) == "from a client" {
                to_zenoh = Some(b);
            }
        }
    }
    assert_eq!(
        to_dds,
        Some(own.clone()),
        "DDS: the client's CDR, byte for byte"
    );
    assert_eq!(
        to_zenoh,
        Some(own),
        "rmw_zenoh: the client's CDR, byte for byte"
    );
}
