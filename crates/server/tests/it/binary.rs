//! rosbridge's outgoing encodings over the real binary: `subscribe` with
//! `compression` (`cbor`, `cbor-raw`, `png`) and `fragment_size` on the
//! WebSocket transport, and the refusals (an unknown compression, a
//! binary one on the NDJSON transport, `cbor-raw` of an unknown type).
//! The CBOR is read by a small decoder here (RFC 8949), not the
//! gateway's encoder.

use std::io::Read;

use base64::Engine as _;
use serde_json::{json, Value};

use crate::support::*;
use crate::wsclient::*;

/// One CBOR data item.
#[derive(Debug, Clone, PartialEq)]
enum Cbor {
    Uint(u64),
    Neg(u64),
    Bytes(Vec<u8>),
    Text(String),
    Array(Vec<Cbor>),
    Map(Vec<(Cbor, Cbor)>),
    Tag(u64, Box<Cbor>),
    Float(f64),
    Simple(u8),
}

impl Cbor {
    /// The value under text key `k` of a map.
    fn get(&self, k: &str) -> &Cbor {
        let Cbor::Map(m) = self else {
            panic!("not a map: {self:?}")
        };
        &m.iter()
            .find(|(key, _)| *key == Cbor::Text(k.into()))
            .unwrap_or_else(|| panic!("no key {k} in {self:?}"))
            .1
    }

    fn keys(&self) -> Vec<String> {
        let Cbor::Map(m) = self else {
            panic!("not a map: {self:?}")
        };
        m.iter()
            .map(|(k, _)| match k {
                Cbor::Text(s) => s.clone(),
                other => panic!("key {other:?}"),
            })
            .collect()
    }
}

/// Decodes exactly one item from `b`.
fn cbor(b: &[u8]) -> Cbor {
    let mut i = 0;
    let item = item(b, &mut i);
    assert_eq!(i, b.len(), "trailing bytes after the item");
    item
}

fn item(b: &[u8], i: &mut usize) -> Cbor {
    let first = b[*i];
    *i += 1;
    let (major, info) = (first >> 5, first & 0x1f);
    let arg = |i: &mut usize, n: usize| -> u64 {
        let v = b[*i..*i + n]
            .iter()
            .fold(0u64, |acc, &x| (acc << 8) | u64::from(x));
        *i += n;
        v
    };
    if major == 7 {
        return match info {
            25 => panic!("no half floats expected"),
            26 => Cbor::Float(f64::from(f32::from_bits(arg(i, 4) as u32))),
            27 => Cbor::Float(f64::from_bits(arg(i, 8))),
            n if n < 24 => Cbor::Simple(n),
            n => panic!("simple {n}"),
        };
    }
    let n = match info {
        n if n < 24 => u64::from(n),
        24 => arg(i, 1),
        25 => arg(i, 2),
        26 => arg(i, 4),
        27 => arg(i, 8),
        n => panic!("indefinite or reserved length {n}: the gateway never sends one"),
    };
    match major {
        0 => Cbor::Uint(n),
        1 => Cbor::Neg(n),
        2 | 3 => {
            let s = b[*i..*i + n as usize].to_vec();
            *i += n as usize;
            if major == 2 {
                Cbor::Bytes(s)
            } else {
                Cbor::Text(String::from_utf8(s).expect("text is UTF-8"))
            }
        }
        4 => Cbor::Array((0..n).map(|_| item(b, i)).collect()),
        5 => Cbor::Map((0..n).map(|_| (item(b, i), item(b, i))).collect()),
        6 => Cbor::Tag(n, Box::new(item(b, i))),
        _ => unreachable!(),
    }
}

/// The next binary frame, decoded.
fn binary(ws: &mut Ws) -> Cbor {
    let (op, payload) = ws.frame();
    assert_eq!(op, 0x2, "binary frame expected, got opcode {op}");
    cbor(&payload)
}

fn subscribe(ws: &mut Ws, fields: &str) {
    ws.send_text(&format!(r#"{{"op":"subscribe",{fields}}}"#));
    // Statuses of a subscribe are informational: none on WebSocket.
    assert!(ws.barrier().is_empty());
}

#[test]
fn cbor_follows_the_topics_type_and_is_encoded_once() {
    let gw = Gateway::start(&[]);
    let mut a = Ws::connect(&gw);
    let mut b = Ws::connect(&gw);
    let mut plain = Ws::connect(&gw);
    let sub = r#""topic":"/f","type":"std_msgs/msg/Float32MultiArray","compression":"cbor""#;
    subscribe(&mut a, sub);
    subscribe(&mut b, sub);
    subscribe(&mut plain, r#""topic":"/f""#);
    let mut tcp = gw.client();
    tcp.publish(
        "/f",
        r#"{"layout":{"dim":[],"data_offset":0},"data":[1.5,-2]}"#,
    );
    for ws in [&mut a, &mut b] {
        let f = binary(ws);
        assert_eq!(f.keys(), ["op", "topic", "msg"]);
        assert_eq!(f.get("op"), &Cbor::Text("publish".into()));
        assert_eq!(f.get("topic"), &Cbor::Text("/f".into()));
        let msg = f.get("msg");
        assert_eq!(msg.keys(), ["layout", "data"]);
        // float32[]: RFC 8746 tag 85, little-endian binary32.
        let mut le = Vec::new();
        for x in [1.5f32, -2.0] {
            le.extend_from_slice(&x.to_le_bytes());
        }
        assert_eq!(msg.get("data"), &Cbor::Tag(85, Box::new(Cbor::Bytes(le))));
        assert_eq!(msg.get("layout").get("data_offset"), &Cbor::Uint(0));
    }
    // The JSON subscriber is served as before.
    assert_eq!(plain.json()["msg"]["data"], json!([1.5, -2]));
    // One encoding for both cbor subscribers.
    let s = gw.wait_for_stats("cbor counted", |s| counter(s, "encoded_cbor_frames") == 1);
    assert!(counter(&s, "encoded_cbor_bytes") > 20, "{s}");
    assert_eq!(counter(&s, "cbor_untyped"), 0, "{s}");
    // topic_info shows each subscription's encoding.
    plain.send_text(
        r#"{"op":"call_service","service":"/rosgate/topic_info","id":"ti","args":{"topic":"/f"}}"#,
    );
    let info = plain.json();
    let mut shown: Vec<String> = info["values"]["subscribers"]
        .as_array()
        .unwrap_or_else(|| panic!("{info}"))
        .iter()
        .map(|s| s["compression"].as_str().unwrap_or("?").to_owned())
        .collect();
    shown.sort();
    assert_eq!(shown, ["cbor", "cbor", "none"], "{info}");
}

#[test]
fn cbor_byte_arrays_are_byte_strings_and_untyped_topics_map_their_json() {
    let gw = Gateway::start(&[]);
    let mut ws = Ws::connect(&gw);
    subscribe(
        &mut ws,
        r#""topic":"/u8","type":"std_msgs/UInt8MultiArray","compression":"cbor""#,
    );
    subscribe(&mut ws, r#""topic":"/any","compression":"cbor""#);
    let mut tcp = gw.client();
    tcp.publish("/u8", r#"{"data":"AQID"}"#);
    let f = binary(&mut ws);
    assert_eq!(f.get("msg").get("data"), &Cbor::Bytes(vec![1, 2, 3]));
    // Missing fields take their zero values, as rosbridge fills them.
    assert_eq!(f.get("msg").get("layout").get("dim"), &Cbor::Array(vec![]));
    // No type: the JSON as it is, integers as integers, in input order.
    tcp.publish("/any", r#"{"z":[1,-2],"a":"x","f":0.5}"#);
    let f = binary(&mut ws);
    let msg = f.get("msg");
    assert_eq!(msg.keys(), ["z", "a", "f"]);
    assert_eq!(
        msg.get("z"),
        &Cbor::Array(vec![Cbor::Uint(1), Cbor::Neg(1)])
    );
    assert_eq!(msg.get("f"), &Cbor::Float(0.5));
    // A message that does not fit the type goes untyped, counted.
    tcp.publish("/u8", r#"{"data":"AQID","extra":true}"#);
    let f = binary(&mut ws);
    assert_eq!(f.get("msg").get("extra"), &Cbor::Simple(21));
    let s = gw.wait_for_stats("untyped counted", |s| counter(s, "cbor_untyped") == 1);
    assert_eq!(counter(&s, "encoded_cbor_frames"), 3, "{s}");
}

#[test]
fn cbor_raw_carries_the_cdr_a_ros2_node_would_publish() {
    let gw = Gateway::start(&[]);
    let mut ws = Ws::connect(&gw);
    let mut other = Ws::connect(&gw);
    for w in [&mut ws, &mut other] {
        subscribe(
            w,
            r#""topic":"/raw","type":"std_msgs/msg/String","compression":"cbor-raw""#,
        );
    }
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    gw.client().publish("/raw", r#"{"data":"hi"}"#);
    let f = binary(&mut ws);
    assert_eq!(f.keys(), ["op", "topic", "msg"]);
    let msg = f.get("msg");
    assert_eq!(msg.keys(), ["secs", "nsecs", "bytes"]);
    let Cbor::Uint(secs) = msg.get("secs") else {
        panic!("secs: {msg:?}")
    };
    assert!(*secs >= before && *secs < before + 60, "{secs} vs {before}");
    // CDR little-endian: encapsulation 00 01 00 00, then the string: its
    // length counting the NUL, the bytes, the NUL.
    assert_eq!(
        msg.get("bytes"),
        &Cbor::Bytes(vec![0, 1, 0, 0, 3, 0, 0, 0, b'h', b'i', 0])
    );
    assert_eq!(binary(&mut other), f, "one encoding, shared");
    // A message that does not fit: nothing for either subscriber, counted
    // once (it is tried once per message).
    gw.client().publish("/raw", r#"{"data":5}"#);
    let s = gw.wait_for_stats("encode failure counted", |s| {
        counter(s, "encode_failed") == 1
    });
    assert_eq!(counter(&s, "encoded_cbor_raw_frames"), 1, "{s}");
    assert!(ws.barrier().is_empty());
    assert!(other.barrier().is_empty());
}

#[test]
fn refusals_carry_the_id_and_subscribe_nothing() {
    let gw = Gateway::start(&[]);
    let mut ws = Ws::connect(&gw);
    ws.send_text(r#"{"op":"subscribe","topic":"/z","compression":"zip","id":"s1"}"#);
    let st = ws.json();
    assert_eq!(
        (st["op"].as_str(), st["level"].as_str()),
        (Some("status"), Some("error"))
    );
    assert_eq!(st["id"], "s1");
    assert!(st["msg"].as_str().unwrap().contains("zip"), "{st}");
    ws.send_text(
        r#"{"op":"subscribe","topic":"/z","type":"nope_msgs/Nope","compression":"cbor-raw","id":"s2"}"#,
    );
    let st = ws.json();
    assert_eq!(st["id"], "s2");
    assert!(
        st["msg"].as_str().unwrap().contains("nope_msgs/Nope"),
        "{st}"
    );
    ws.send_text(r#"{"op":"subscribe","topic":"/z","compression":"cbor-raw","id":"s3"}"#);
    assert_eq!(ws.json()["id"], "s3");
    // NDJSON has no binary messages.
    let mut tcp = gw.client();
    tcp.send_line(r#"{"op":"subscribe","topic":"/z","type":"std_msgs/String","compression":"cbor","id":"t1"}"#);
    let st = tcp.recv();
    assert_eq!(
        (st["level"].as_str(), st["id"].as_str()),
        (Some("error"), Some("t1"))
    );
    assert!(st["msg"].as_str().unwrap().contains("WebSocket"), "{st}");
    // None of them subscribed: a publish reaches nobody.
    tcp.publish("/z", r#"{"data":"x"}"#);
    assert!(ws.barrier().is_empty());
    let s = gw.stats();
    assert_eq!(counter(&s, "errors.bad_compression"), 4, "{s}");
    assert_eq!(counter(&s, "delivered"), 0, "{s}");
}

/// The JSON text inside a `png` frame's image (rosbridge's pngcompression:
/// RGB, 8 bits, the text's bytes row by row, `\n` padding).
fn png_text(data: &str) -> String {
    let png = base64::engine::general_purpose::STANDARD
        .decode(data)
        .expect("base64");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let (mut i, mut idat, mut width) = (8, Vec::new(), 0usize);
    while i < png.len() {
        let len = u32::from_be_bytes(png[i..i + 4].try_into().unwrap()) as usize;
        let kind = &png[i + 4..i + 8];
        let body = &png[i + 8..i + 8 + len];
        if kind == b"IHDR" {
            width = u32::from_be_bytes(body[..4].try_into().unwrap()) as usize;
            assert_eq!((body[8], body[9]), (8, 2), "8-bit RGB");
        } else if kind == b"IDAT" {
            idat.extend_from_slice(body);
        }
        i += 12 + len;
    }
    // zlib with stored blocks (or any: inflate by hand only stored ones).
    let mut raw = Vec::new();
    let mut z = &idat[2..];
    loop {
        let last = z[0] & 1;
        assert_eq!(z[0] >> 1 & 3, 0, "stored block");
        let n = u16::from_le_bytes([z[1], z[2]]) as usize;
        raw.extend_from_slice(&z[5..5 + n]);
        z = &z[5 + n..];
        if last == 1 {
            break;
        }
    }
    let mut text = Vec::new();
    for row in raw.chunks(1 + 3 * width) {
        assert_eq!(row[0], 0, "filter none");
        text.extend_from_slice(&row[1..]);
    }
    let mut s = String::new();
    std::io::Cursor::new(text).read_to_string(&mut s).unwrap();
    s.trim_end_matches('\n').to_owned()
}

#[test]
fn png_is_a_text_frame_holding_the_publish_as_pixels() {
    let gw = Gateway::start(&[]);
    let mut ws = Ws::connect(&gw);
    subscribe(&mut ws, r#""topic":"/p","compression":"png""#);
    gw.client().publish("/p", r#"{"data":"pixels é"}"#);
    let f = ws.json();
    assert_eq!(f["op"], "png");
    assert_eq!(f.as_object().unwrap().len(), 2, "{f}");
    let inner: Value = serde_json::from_str(&png_text(f["data"].as_str().unwrap())).unwrap();
    assert_eq!(
        inner,
        json!({"op":"publish","topic":"/p","msg":{"data":"pixels é"}})
    );
    let s = gw.wait_for_stats("png counted", |s| counter(s, "encoded_png_frames") == 1);
    assert!(counter(&s, "encoded_png_bytes") > 50, "{s}");
}

#[test]
fn fragment_size_splits_long_messages_into_whole_sets() {
    let gw = Gateway::start(&[]);
    let mut ws = Ws::connect(&gw);
    subscribe(&mut ws, r#""topic":"/big","fragment_size":300"#);
    let long = "y".repeat(1000);
    let mut tcp = gw.client();
    tcp.publish("/big", &format!(r#"{{"data":"{long}"}}"#));
    tcp.publish("/big", r#"{"data":"short"}"#);
    let first = ws.json();
    assert_eq!(first["op"], "fragment");
    // A publish has no id: the gateway numbers fragmented messages from 1
    // (rosbridge's 0 is falsy to roslib, and the same for every message).
    assert_eq!(first["id"], 1);
    let total = first["total"].as_u64().unwrap();
    assert_eq!(total, 4);
    let mut text = first["data"].as_str().unwrap().to_owned();
    for n in 1..total {
        let f = ws.json();
        assert_eq!(
            (f["op"].as_str(), f["num"].as_u64()),
            (Some("fragment"), Some(n))
        );
        text.push_str(f["data"].as_str().unwrap());
    }
    let whole: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(whole["msg"]["data"], long.as_str());
    // Short messages go whole.
    assert_eq!(ws.json()["msg"]["data"], "short");
    // The next fragmented message has an id of its own.
    tcp.publish("/big", &format!(r#"{{"data":"{long}"}}"#));
    let next = ws.json();
    assert_eq!(
        (&next["op"], &next["id"], &next["num"]),
        (&json!("fragment"), &json!(2), &json!(0))
    );
    for _ in 1..total {
        assert_eq!(ws.json()["id"], 2);
    }
    let s = gw.wait_for_stats("fragments counted", |s| counter(s, "fragmented_out") == 2);
    assert_eq!(counter(&s, "fragment_frames"), 8, "{s}");
}

/// The next message sent as `fragment` frames under `id`, reassembled:
/// the frames must come back to back, numbered from 0.
fn reassemble(ws: &mut Ws, id: &str) -> String {
    let first = ws.json();
    assert_eq!(
        (first["op"].as_str(), first["id"].as_str()),
        (Some("fragment"), Some(id))
    );
    let total = first["total"].as_u64().unwrap();
    let mut text = first["data"].as_str().unwrap().to_owned();
    for n in 1..total {
        let f = ws.json();
        assert_eq!((f["id"].as_str(), f["num"].as_u64()), (Some(id), Some(n)));
        text.push_str(f["data"].as_str().unwrap());
    }
    text
}

#[test]
fn call_service_fragment_size_splits_the_answer_under_the_calls_id() {
    let gw = Gateway::start(&[]);
    let mut provider = gw.client();
    provider.advertise_service("/long");
    let mut ws = Ws::connect(&gw);
    ws.send_text(
        r#"{"op":"call_service","service":"/long","id":"c7","args":{},"fragment_size":256}"#,
    );
    let call = provider.expect_forwarded("/long");
    let big = "z".repeat(700);
    provider.respond(
        "/long",
        &call["id"].to_string(),
        &format!(r#"{{"s":"{big}"}}"#),
        "true",
    );
    let text = reassemble(&mut ws, "c7");
    let whole: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(whole["op"], "service_response");
    assert_eq!(whole["id"], "c7");
    assert_eq!(whole["values"]["s"], big.as_str());
    // A short answer goes whole.
    ws.send_text(
        r#"{"op":"call_service","service":"/long","id":"c8","args":{},"fragment_size":256}"#,
    );
    let call = provider.expect_forwarded("/long");
    provider.respond("/long", &call["id"].to_string(), r#"{"s":"x"}"#, "true");
    let v = ws.json();
    assert_eq!(
        (v["op"].as_str(), v["id"].as_str()),
        (Some("service_response"), Some("c8"))
    );
}

#[test]
fn call_service_compression_encodes_the_answer_and_tcp_refuses_it() {
    let gw = Gateway::start(&[]);
    let mut provider = gw.client();
    provider.advertise_service("/enc");
    let mut ws = Ws::connect(&gw);
    // cbor: the service_response object, one binary message.
    ws.send_text(
        r#"{"op":"call_service","service":"/enc","id":"b1","args":{},"compression":"cbor"}"#,
    );
    let call = provider.expect_forwarded("/enc");
    provider.respond(
        "/enc",
        &call["id"].to_string(),
        r#"{"sum":3,"s":"é"}"#,
        "true",
    );
    let f = binary(&mut ws);
    assert_eq!(f.get("op"), &Cbor::Text("service_response".into()));
    assert_eq!(f.get("id"), &Cbor::Text("b1".into()));
    assert_eq!(f.get("result"), &Cbor::Simple(21), "true");
    assert_eq!(f.get("values").get("sum"), &Cbor::Uint(3));
    assert_eq!(f.get("values").get("s"), &Cbor::Text("é".into()));
    // png with fragment_size: the png frame's text cut under the call's id.
    ws.send_text(
        r#"{"op":"call_service","service":"/enc","id":"p1","args":{},"compression":"png","fragment_size":256}"#,
    );
    let call = provider.expect_forwarded("/enc");
    let big = "q".repeat(600);
    provider.respond(
        "/enc",
        &call["id"].to_string(),
        &format!(r#"{{"s":"{big}"}}"#),
        "true",
    );
    let text = reassemble(&mut ws, "p1");
    let png: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(png["op"], "png");
    let inner: Value = serde_json::from_str(&png_text(png["data"].as_str().unwrap())).unwrap();
    assert_eq!(inner["op"], "service_response");
    assert_eq!(inner["values"]["s"], big.as_str());
    // An unknown compression: an error status with the id, a failed
    // answer at once, and no call.
    ws.send_text(
        r#"{"op":"call_service","service":"/enc","id":"z1","args":{},"compression":"zip"}"#,
    );
    let st = ws.json();
    assert_eq!(
        (st["op"].as_str(), st["level"].as_str(), st["id"].as_str()),
        (Some("status"), Some("error"), Some("z1"))
    );
    let r = ws.json();
    assert_eq!(
        (r["op"].as_str(), r["id"].as_str(), r["result"].as_bool()),
        (Some("service_response"), Some("z1"), Some(false))
    );
    // NDJSON has no binary messages: refused the same way.
    let mut tcp = gw.client();
    tcp.send_line(
        r#"{"op":"call_service","service":"/enc","id":"t1","args":{},"compression":"cbor"}"#,
    );
    let st = tcp.recv();
    assert_eq!(
        (st["level"].as_str(), st["id"].as_str()),
        (Some("error"), Some("t1"))
    );
    assert!(st["msg"].as_str().unwrap().contains("WebSocket"), "{st}");
    let r = tcp.recv();
    assert_eq!(
        (r["id"].as_str(), r["result"].as_bool()),
        (Some("t1"), Some(false))
    );
    // Neither refused call reached the provider.
    assert!(provider.barrier().is_empty());
    let s = gw.stats();
    assert_eq!(counter(&s, "errors.bad_compression"), 2, "{s}");
}
