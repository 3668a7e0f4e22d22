//! The Foxglove WebSocket protocol on the wire (`docs/protocol.md`,
//! "Foxglove WebSocket protocol"): the listener and the rosbridge port's
//! subprotocol, `serverInfo`, channels from the graph, subscriptions and
//! binary message data (byte layouts as the spec and foxglove-sdk's
//! snapshots give them), bad input. The real binary on ephemeral ports;
//! every read has a deadline.

use std::time::Instant;

use serde_json::{json, Value};

use crate::fxclient::*;
use crate::support::*;
use crate::wsclient::*;

fn gateway() -> Gateway {
    Gateway::start(&["--foxglove-listen", "127.0.0.1:0"])
}

/// The next text message that is not a status, parsed.
fn next_op(ws: &mut Ws, op: &str) -> Value {
    let dl = deadline(REPLY);
    loop {
        let f = ws
            .try_frame(dl)
            .unwrap_or_else(|| panic!("no {op} before the deadline"));
        if f.0 == 0x1 {
            let v: Value = serde_json::from_slice(&f.1).expect("json");
            if v["op"] == op {
                return v;
            }
        }
    }
}

/// The next binary message.
fn next_binary(ws: &mut Ws) -> Vec<u8> {
    let dl = deadline(REPLY);
    loop {
        let f = ws
            .try_frame(dl)
            .expect("a binary message before the deadline");
        if f.0 == 0x2 {
            return f.1;
        }
    }
}

/// The channel advertised for `topic`, waiting for it.
fn channel_of(ws: &mut Ws, topic: &str) -> Value {
    foxglove_channel(ws, topic, REPLY)
}

#[test]
fn server_info_channels_and_cdr_message_data() {
    let gw = gateway();
    let (head, mut fx, info) = foxglove_session(&gw, FOXGLOVE);
    assert!(
        head.contains("\r\nSec-WebSocket-Protocol: foxglove.websocket.v1\r\n"),
        "{head}"
    );
    assert_eq!(info["op"], "serverInfo");
    assert_eq!(info["name"], "rosgate");
    assert_eq!(info["supportedEncodings"], json!(["cdr", "json"]));
    assert_eq!(info["metadata"]["ROS_DISTRO"], "jazzy");
    assert!(info["metadata"]["rosgate_version"].is_string());
    assert!(info["sessionId"].is_string());

    // A rosbridge client publishes JSON on a topic of a known type.
    let mut pubr = Ws::connect(&gw);
    pubr.send_text(r#"{"op":"advertise","topic":"/fx_chatter","type":"std_msgs/msg/String"}"#);
    let ch = channel_of(&mut fx, "/fx_chatter");
    assert_string_cdr_channel(&ch);
    let chan = ch["id"].as_u64().unwrap();

    foxglove_subscribe(&mut fx, 42, chan);
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    pubr.send_text(r#"{"op":"publish","topic":"/fx_chatter","msg":{"data":"hi"}}"#);
    let data = next_binary(&mut fx);
    // opcode 0x01, subscription id (u32 LE), log time (u64 LE ns), CDR.
    assert_eq!(data[0], 0x01);
    assert_eq!(&data[1..5], &42u32.to_le_bytes());
    let log_time = u64::from_le_bytes(data[5..13].try_into().unwrap());
    assert!(log_time >= before - 5_000_000_000 && log_time <= before + 60_000_000_000);
    // CDR little-endian encapsulation, then the string: length 3, "hi\0".
    assert_eq!(&data[13..24], &[0, 1, 0, 0, 3, 0, 0, 0, b'h', b'i', 0]);

    // Unsubscribed: nothing more comes.
    fx.send_text(r#"{"op":"unsubscribe","subscriptionIds":[42]}"#);
    fx.send_text(r#"{"op":"unsubscribe","subscriptionIds":[42]}"#);
    let st = next_op(&mut fx, "status");
    assert_eq!(st["level"], 2);
    assert!(
        st["message"]
            .as_str()
            .unwrap()
            .contains("no subscription 42"),
        "{st}"
    );
    pubr.send_text(r#"{"op":"publish","topic":"/fx_chatter","msg":{"data":"again"}}"#);
    let dl = deadline(ms(300));
    while let Some(f) = fx.try_frame(dl) {
        assert_ne!(f.0, 0x2, "message data after unsubscribe");
    }

    // The publisher leaves: its channel is unadvertised.
    drop(pubr);
    let un = next_op(&mut fx, "unadvertise");
    assert_eq!(un["channelIds"], json!([chan]));
}

#[test]
fn a_topic_of_unknown_type_is_a_json_channel() {
    let gw = gateway();
    let (_, mut fx, _) = foxglove_session(&gw, "Sec-WebSocket-Protocol: foxglove.sdk.v1\r\n");
    let mut pubr = Ws::connect(&gw);
    pubr.send_text(r#"{"op":"advertise","topic":"/fx_unknown","type":"nobody_msgs/msg/Nope"}"#);
    let ch = channel_of(&mut fx, "/fx_unknown");
    assert_eq!(ch["encoding"], "json");
    assert_eq!(ch["schemaEncoding"], "jsonschema");
    assert_eq!(ch["schemaName"], "nobody_msgs/msg/Nope");
    let chan = ch["id"].as_u64().unwrap();
    foxglove_subscribe(&mut fx, 1, chan);
    pubr.send_text(r#"{"op":"publish","topic":"/fx_unknown","msg":{"x":[1,2]}}"#);
    let data = next_binary(&mut fx);
    assert_eq!(&data[..5], &[0x01, 1, 0, 0, 0]);
    assert_eq!(&data[13..], br#"{"x":[1,2]}"#);
}

#[test]
fn the_foxglove_port_needs_the_subprotocol_and_the_rosbridge_port_offers_it() {
    let gw = gateway();
    // No subprotocol on the Foxglove port: 400 naming them.
    let s = std::net::TcpStream::connect(foxglove_addr(&gw)).expect("connect");
    let mut ws = Ws::over(s);
    let head = ws.handshake(&upgrade_request("/", ""));
    assert!(head.starts_with("HTTP/1.1 400"), "{head}");
    ws.fill();
    let body = String::from_utf8_lossy(&ws.buf).to_string();
    assert!(body.contains("foxglove.sdk.v1"), "{body}");

    // The rosbridge port speaks Foxglove to a client that offers it.
    let mut ws = Ws::raw(&gw);
    let head = ws.handshake(&upgrade_request("/", FOXGLOVE));
    assert!(
        head.contains("Sec-WebSocket-Protocol: foxglove.websocket.v1"),
        "{head}"
    );
    assert_eq!(ws.json()["op"], "serverInfo");
    // ... and rosbridge to one that does not.
    let mut rb = Ws::connect(&gw);
    rb.send_text(r#"{"op":"call_service","service":"/rosgate/stats","id":"s","args":{}}"#);
    assert_eq!(rb.json()["op"], "service_response");
}

#[test]
fn bad_input_is_an_error_status_and_nothing_else() {
    let gw = gateway();
    let (_, mut fx, _) = foxglove_session(&gw, FOXGLOVE);
    let expect_error = |fx: &mut Ws, send: &dyn Fn(&mut Ws), says: &str| {
        send(fx);
        let st = next_op(fx, "status");
        assert_eq!(st["level"], 2, "{st}");
        let msg = st["message"].as_str().unwrap();
        assert!(msg.contains(says), "{says:?} not in {msg:?}");
    };
    expect_error(&mut fx, &|w| w.send_text("{nope"), "not a JSON message");
    expect_error(
        &mut fx,
        &|w| w.send_text(r#"{"op":"dance"}"#),
        "unknown op \"dance\"",
    );
    expect_error(
        &mut fx,
        &|w| w.send_text(r#"{"op":"subscribe","subscriptions":[{"id":1,"channelId":999}]}"#),
        "no channel 999",
    );
    expect_error(
        &mut fx,
        &|w| w.send_text(r#"{"op":"subscribe","subscriptions":[{"id":"x","channelId":1}]}"#),
        "\"id\"",
    );
    expect_error(
        &mut fx,
        &|w| w.send_frame(0x2, true, &[0x09, 1]),
        "opcode 0x09",
    );
    expect_error(&mut fx, &|w| w.send_frame(0x2, true, &[0x01, 1]), "shorter");
    // Still a working session.
    let mut pubr = Ws::connect(&gw);
    pubr.send_text(r#"{"op":"advertise","topic":"/fx_after","type":"std_msgs/msg/Int32"}"#);
    let ch = channel_of(&mut fx, "/fx_after");
    assert_eq!(ch["encoding"], "cdr");
    // Operators see the session: its transport, subprotocol and tables.
    pubr.send_text(r#"{"op":"call_service","service":"/rosgate/connections","id":"c","args":{}}"#);
    let conns = next_json(&mut pubr, "service_response");
    let me = conns["values"]["connections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["transport"] == "foxglove")
        .cloned()
        .unwrap_or_else(|| panic!("{conns}"));
    assert_eq!(me["foxglove"]["subprotocol"], "foxglove.websocket.v1");
    assert!(me["foxglove"]["channels"].as_u64().unwrap() >= 1, "{me}");
    let mut gw = gw;
    gw.assert_alive();
    let s = gw.stats();
    assert_eq!(s["foxglove_sessions"], 1, "{s}");
    assert!(
        s["errors"]["foxglove_request"].as_u64().unwrap_or(0) >= 6,
        "{s}"
    );
}

/// Tokens as on the rosbridge port (`hub/auth.rs`): in the opening only,
/// since the protocol has no `auth` op.
#[test]
fn tokens_are_checked_in_the_opening() {
    use crate::security::{token_file, ADMIN, BUILTIN_TOKENS};
    let tf = token_file(BUILTIN_TOKENS);
    let gw = Gateway::start(&[
        "--foxglove-listen",
        "127.0.0.1:0",
        "--auth-tokens",
        tf.path(),
    ]);
    let open = |target: &str, headers: &str| {
        let s = std::net::TcpStream::connect(foxglove_addr(&gw)).expect("connect");
        let mut ws = Ws::over(s);
        let head = ws.handshake(&upgrade_request(target, &format!("{FOXGLOVE}{headers}")));
        (head, ws)
    };
    let (head, mut ws) = open("/", "");
    assert!(head.starts_with("HTTP/1.1 401"), "{head}");
    ws.fill();
    assert!(
        String::from_utf8_lossy(&ws.buf).contains("must present its token"),
        "{:?}",
        String::from_utf8_lossy(&ws.buf)
    );
    let (head, _) = open("/?token=wrong", "");
    assert!(head.starts_with("HTTP/1.1 401"), "{head}");
    let (head, mut ws) = open(&format!("/?token={ADMIN}"), "");
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    assert_eq!(ws.json()["op"], "serverInfo");
    let (head, mut ws) = open("/", &format!("Authorization: Bearer {ADMIN}\r\n"));
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    assert_eq!(ws.json()["op"], "serverInfo");
}

/// Beyond loopback without tokens the gateway refuses to start, naming
/// the Foxglove listener (README, docs/security.md).
#[test]
fn the_foxglove_listener_beyond_loopback_needs_tokens() {
    let out = run(&[
        "--listen",
        "127.0.0.1:0",
        "--ws-listen",
        "127.0.0.1:0",
        "--foxglove-listen",
        "0.0.0.0:0",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("foxglove 0.0.0.0:0"), "{err}");
    let out = run(&["--foxglove-listen", "nowhere"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--foxglove-listen: invalid address"),
        "{out:?}"
    );
}

/// A session that reads slower than its subscription publishes is shed
/// like a rosbridge subscriber (fairly, counted) and told so in a warning
/// status; the gateway and other clients go on.
#[test]
fn a_slow_session_is_shed_and_told() {
    use socket2::{Domain, Socket, Type};
    let gw = Gateway::start(&[
        "--foxglove-listen",
        "127.0.0.1:0",
        "--max-queue-bytes",
        "65536",
    ]);
    let s = Socket::new(Domain::IPV4, Type::STREAM, None).expect("socket");
    s.set_recv_buffer_size(4096).expect("SO_RCVBUF");
    s.connect_timeout(
        &foxglove_addr(&gw).into(),
        std::time::Duration::from_secs(5),
    )
    .expect("connect");
    let mut fx = Ws::over(s.into());
    let head = fx.handshake(&upgrade_request("/", FOXGLOVE));
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    assert_eq!(fx.json()["op"], "serverInfo");
    let mut pubr = Ws::connect(&gw);
    pubr.send_text(r#"{"op":"advertise","topic":"/fx_flood","type":"std_msgs/msg/String"}"#);
    let chan = channel_of(&mut fx, "/fx_flood")["id"].as_u64().unwrap();
    foxglove_subscribe(&mut fx, 5, chan);
    let big = "x".repeat(20_000);
    for _ in 0..300 {
        pubr.send_text(&format!(
            r#"{{"op":"publish","topic":"/fx_flood","msg":{{"data":"{big}"}}}}"#
        ));
    }
    // The rosbridge side is unaffected: it is answered at once.
    pubr.send_text(r#"{"op":"call_service","service":"/rosgate/stats","id":"s","args":{}}"#);
    let dl = deadline(REPLY);
    let stats = loop {
        let v = pubr.json();
        if v["id"] == "s" {
            break v;
        }
        assert!(Instant::now() < dl);
    };
    assert!(stats["values"]["dropped"].as_u64().unwrap() > 0, "{stats}");
    // The slow session reads on: message data, then a warning with the count.
    let dl = deadline(ms(10_000));
    let mut data = 0;
    let warning = loop {
        let f = fx
            .try_frame(dl)
            .expect("a warning status before the deadline");
        match f.0 {
            0x2 => {
                assert_eq!(&f.1[..5], &[0x01, 5, 0, 0, 0]);
                data += 1;
            }
            0x1 => {
                let v: Value = serde_json::from_slice(&f.1).unwrap();
                if v["op"] == "status" && v["level"] == 1 {
                    break v;
                }
            }
            _ => {}
        }
    };
    assert!(
        warning["message"]
            .as_str()
            .unwrap()
            .contains("messages dropped"),
        "{warning}"
    );
    assert!(data < 300, "{data} of 300 delivered: nothing was shed");
}

/// `clientPublish`: a client channel makes the session a publisher; its
/// JSON goes out as it came, its CDR decoded by the channel's type; bad
/// payloads and unknown channels are error statuses.
#[test]
fn client_channels_publish_json_and_cdr() {
    let gw = gateway();
    let (_, mut fx, info) = foxglove_session(&gw, FOXGLOVE);
    assert_capability(&info, "clientPublish");
    let mut sub = Ws::connect(&gw);
    sub.send_text(r#"{"op":"subscribe","topic":"/fx_cp","type":"std_msgs/msg/String"}"#);
    fx.send_text(
        r#"{"op":"advertise","channels":[
            {"id":1,"topic":"/fx_cp","encoding":"json","schemaName":"std_msgs/msg/String"},
            {"id":2,"topic":"/fx_cp","encoding":"cdr","schemaName":"std_msgs/msg/String"},
            {"id":3,"topic":"/fx_cp","encoding":"protobuf","schemaName":"x"},
            {"id":4,"topic":"/fx_cp2","encoding":"cdr","schemaName":"nobody_msgs/msg/Nope"}]}"#,
    );
    for says in [
        "\"protobuf\" is not one of",
        "does not know \"nobody_msgs/msg/Nope\"",
    ] {
        let st = next_op(&mut fx, "status");
        assert_eq!(st["level"], 2, "{st}");
        assert!(st["message"].as_str().unwrap().contains(says), "{st}");
    }
    let mut data = vec![0x01];
    data.extend_from_slice(&1u32.to_le_bytes());
    data.extend_from_slice(br#"{"data":"from json"}"#);
    fx.send_frame(0x2, true, &data);
    let m = sub.json();
    assert_eq!(m["op"], "publish");
    assert_eq!(m["msg"], json!({"data": "from json"}));
    let mut data = vec![0x01];
    data.extend_from_slice(&2u32.to_le_bytes());
    data.extend_from_slice(&[0, 1, 0, 0, 4, 0, 0, 0, b'c', b'd', b'r', 0]);
    fx.send_frame(0x2, true, &data);
    assert_eq!(sub.json()["msg"], json!({"data": "cdr"}));

    // Bad CDR, bad JSON, no such channel: error statuses, nothing sent.
    let bad: [(&[u8], u32, &str); 3] = [
        (&[9, 9], 2, "not CDR of std_msgs/msg/String"),
        (b"[1]", 1, "not a JSON object"),
        (b"{}", 7, "no such client channel"),
    ];
    for (payload, chan, says) in bad {
        let mut data = vec![0x01];
        data.extend_from_slice(&chan.to_le_bytes());
        data.extend_from_slice(payload);
        fx.send_frame(0x2, true, &data);
        let st = next_op(&mut fx, "status");
        assert!(
            st["message"].as_str().unwrap().contains(says),
            "{says}: {st}"
        );
    }
    // Unadvertised (both channels): the topic loses its publisher.
    fx.send_text(r#"{"op":"unadvertise","channelIds":[1,2]}"#);
    fx.send_text(r#"{"op":"unadvertise","channelIds":[1]}"#);
    let st = next_op(&mut fx, "status");
    assert!(
        st["message"]
            .as_str()
            .unwrap()
            .contains("no client channel 1"),
        "{st}"
    );
    let dl = deadline(ms(300));
    if let Some(f) = sub.try_frame(dl) {
        panic!("nothing more for the subscriber: {f:?}");
    }
}

/// A client channel's CDR reaches another Foxglove session byte for byte
/// (a trailing padding byte our encoder never writes included: it was not
/// encoded again), and a rosbridge subscriber as the JSON decoded from it.
#[test]
fn client_cdr_reaches_foxglove_subscribers_untouched() {
    let gw = gateway();
    let (_, mut publ, _) = foxglove_session(&gw, FOXGLOVE);
    let (_, mut watcher, _) = foxglove_session(&gw, FOXGLOVE);
    let mut json_sub = Ws::connect(&gw);
    json_sub.send_text(r#"{"op":"subscribe","topic":"/fx_raw","type":"std_msgs/msg/String"}"#);
    publ.send_text(
        r#"{"op":"advertise","channels":[{"id":1,"topic":"/fx_raw","encoding":"cdr","schemaName":"std_msgs/msg/String"}]}"#,
    );
    let ch = channel_of(&mut watcher, "/fx_raw");
    foxglove_subscribe(&mut watcher, 9, &ch["id"]);
    let cdr = [0u8, 1, 0, 0, 3, 0, 0, 0, b'h', b'i', 0, 0xab];
    let mut frame = vec![0x01];
    frame.extend_from_slice(&1u32.to_le_bytes());
    frame.extend_from_slice(&cdr);
    publ.send_frame(0x2, true, &frame);
    let data = next_binary(&mut watcher);
    assert_eq!(&data[..5], &[0x01, 9, 0, 0, 0]);
    assert_eq!(&data[13..], &cdr[..], "the client's CDR, byte for byte");
    let m = json_sub.json();
    assert_eq!(m["msg"], json!({"data": "hi"}), "{m}");
}

/// Services: advertised with their schemas; a call request (CDR or JSON)
/// reaches the provider as `call_service`, and its answer comes back as a
/// binary service call response in the request's encoding; failures as
/// `serviceCallFailure` with the call id.
#[test]
fn services_are_advertised_and_called() {
    let gw = gateway();
    let (_, mut fx, info) = foxglove_session(&gw, FOXGLOVE);
    assert_capability(&info, "services");
    let mut prov = Ws::connect(&gw);
    prov.send_text(
        r#"{"op":"advertise_service","service":"/fx_add","type":"example_interfaces/srv/AddTwoInts"}"#,
    );
    let adv = next_op(&mut fx, "advertiseServices");
    let svc = adv["services"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "/fx_add")
        .cloned()
        .unwrap_or_else(|| panic!("{adv}"));
    assert_eq!(svc["type"], "example_interfaces/srv/AddTwoInts");
    assert_eq!(svc["request"]["encoding"], "cdr");
    assert_eq!(
        svc["request"]["schemaName"],
        "example_interfaces/srv/AddTwoInts_Request"
    );
    assert_eq!(svc["request"]["schema"], "int64 a\nint64 b\n");
    assert_eq!(svc["response"]["schema"], "int64 sum\n");
    let sid = svc["id"].as_u64().unwrap() as u32;

    let request = |call: u32, enc: &str, payload: &[u8]| {
        let mut b = vec![0x02];
        b.extend_from_slice(&sid.to_le_bytes());
        b.extend_from_slice(&call.to_le_bytes());
        b.extend_from_slice(&(enc.len() as u32).to_le_bytes());
        b.extend_from_slice(enc.as_bytes());
        b.extend_from_slice(payload);
        b
    };
    // CDR: a = 2, b = 3.
    let mut cdr = vec![0, 1, 0, 0];
    cdr.extend_from_slice(&2i64.to_le_bytes());
    cdr.extend_from_slice(&3i64.to_le_bytes());
    fx.send_frame(0x2, true, &request(7, "cdr", &cdr));
    let c = next_json(&mut prov, "call_service");
    assert_eq!(c["args"], json!({"a": 2, "b": 3}));
    prov.send_text(&format!(
        r#"{{"op":"service_response","service":"/fx_add","id":{},"values":{{"sum":5}},"result":true}}"#,
        c["id"]
    ));
    let r = next_binary(&mut fx);
    let mut want = vec![0x03];
    want.extend_from_slice(&sid.to_le_bytes());
    want.extend_from_slice(&7u32.to_le_bytes());
    want.extend_from_slice(&3u32.to_le_bytes());
    want.extend_from_slice(b"cdr");
    want.extend_from_slice(&[0, 1, 0, 0]);
    want.extend_from_slice(&5i64.to_le_bytes());
    assert_eq!(r, want);

    // JSON, answered as JSON.
    fx.send_frame(0x2, true, &request(8, "json", br#"{"a":1,"b":1}"#));
    let c = next_json(&mut prov, "call_service");
    prov.send_text(&format!(
        r#"{{"op":"service_response","service":"/fx_add","id":{},"values":{{"sum":2}},"result":true}}"#,
        c["id"]
    ));
    let r = next_binary(&mut fx);
    assert_eq!(&r[5..9], &8u32.to_le_bytes());
    assert_eq!(&r[13..17], b"json");
    assert_eq!(&r[17..], br#"{"sum":2}"#);

    // The provider refuses: serviceCallFailure with the call id.
    fx.send_frame(0x2, true, &request(9, "json", br#"{"a":1,"b":1}"#));
    let c = next_json(&mut prov, "call_service");
    prov.send_text(&format!(
        r#"{{"op":"service_response","service":"/fx_add","id":{},"values":"busy","result":false}}"#,
        c["id"]
    ));
    let f = next_op(&mut fx, "serviceCallFailure");
    assert_eq!(f["callId"], 9);
    assert_eq!(f["serviceId"], sid);
    assert!(f["message"].as_str().unwrap().contains("busy"), "{f}");

    // Bad CDR, an unknown service: failures, nothing called.
    fx.send_frame(0x2, true, &request(10, "cdr", &[0, 1, 0, 0, 1]));
    let f = next_op(&mut fx, "serviceCallFailure");
    assert_eq!(f["callId"], 10);
    assert!(f["message"].as_str().unwrap().contains("not CDR"), "{f}");
    let mut b = request(11, "json", b"{}");
    b[1..5].copy_from_slice(&999u32.to_le_bytes());
    fx.send_frame(0x2, true, &b);
    let f = next_op(&mut fx, "serviceCallFailure");
    assert_eq!(f["callId"], 11);
    assert!(
        f["message"].as_str().unwrap().contains("no service 999"),
        "{f}"
    );

    // The provider leaves: its service is unadvertised.
    drop(prov);
    let un = next_op(&mut fx, "unadvertiseServices");
    assert_eq!(un["serviceIds"], json!([sid]));
}

/// The next text message of `ws` with `op`, skipping others.
fn next_json(ws: &mut Ws, op: &str) -> Value {
    let dl = deadline(REPLY);
    loop {
        assert!(Instant::now() < dl, "no {op}");
        let v = ws.json();
        if v["op"] == op {
            return v;
        }
    }
}

/// The connection graph: all at once on subscribing, then only changes.
#[test]
fn the_connection_graph_is_told_incrementally() {
    let gw = gateway();
    let (_, mut fx, info) = foxglove_session(&gw, FOXGLOVE);
    assert_capability(&info, "connectionGraph");
    let mut a = Ws::connect_at(&gw, "/?node=fx_talker", "");
    a.send_text(r#"{"op":"advertise","topic":"/fx_g","type":"std_msgs/msg/String"}"#);
    let _ = channel_of(&mut fx, "/fx_g");
    fx.send_text(r#"{"op":"subscribeConnectionGraph"}"#);
    let u = next_op(&mut fx, "connectionGraphUpdate");
    let published = u["publishedTopics"].as_array().unwrap();
    assert!(
        published
            .iter()
            .any(|t| t["name"] == "/fx_g" && t["publisherIds"] == json!(["/fx_talker"])),
        "{u}"
    );
    // A subscriber comes: only that changes.
    let mut b = Ws::connect_at(&gw, "/?node=fx_listener", "");
    b.send_text(r#"{"op":"subscribe","topic":"/fx_g"}"#);
    let u = next_op(&mut fx, "connectionGraphUpdate");
    assert_eq!(
        u["subscribedTopics"],
        json!([{"name": "/fx_g", "subscriberIds": ["/fx_listener"]}]),
        "{u}"
    );
    assert_eq!(u["publishedTopics"], json!([]), "{u}");
    // Both go: the topic is removed.
    drop(a);
    drop(b);
    let dl = deadline(REPLY);
    loop {
        let u = next_op(&mut fx, "connectionGraphUpdate");
        if u["removedTopics"]
            .as_array()
            .unwrap()
            .contains(&json!("/fx_g"))
        {
            break;
        }
        assert!(Instant::now() < dl, "{u}");
    }
    fx.send_text(r#"{"op":"unsubscribeConnectionGraph"}"#);
}

/// Under --use-sim-time a session hears `/clock` as binary time messages.
#[test]
fn sim_time_is_sent_as_time_messages() {
    let gw = Gateway::start(&["--foxglove-listen", "127.0.0.1:0", "--use-sim-time"]);
    let (_, mut fx, info) = foxglove_session(&gw, FOXGLOVE);
    assert_capability(&info, "time");
    let mut clock = Ws::connect(&gw);
    clock.send_text(r#"{"op":"advertise","topic":"/clock","type":"rosgraph_msgs/msg/Clock"}"#);
    clock.send_text(r#"{"op":"publish","topic":"/clock","msg":{"clock":{"sec":12,"nanosec":5}}}"#);
    let t = next_binary(&mut fx);
    assert_eq!(t[0], 0x02);
    assert_eq!(
        u64::from_le_bytes(t[1..9].try_into().unwrap()),
        12_000_000_005
    );
}

/// Parameters: `/node.param` names, get (all or by name), set through the
/// owner's rules, updates to watchers; float64 and byte_array typed as
/// foxglove_bridge types them.
#[test]
fn parameters_are_read_set_and_watched() {
    let gw = gateway();
    let (_, mut fx, info) = foxglove_session(&gw, FOXGLOVE);
    for cap in ["parameters", "parametersSubscribe"] {
        assert_capability(&info, cap);
    }
    let mut owner = Ws::connect_at(&gw, "/?node=fx_owner", "");
    owner.send_text(
        r#"{"op":"declare_parameter","name":"speed","value":1.0,"descriptor":{"floating_point_range":{"from_value":0.0,"to_value":2.0,"step":0.0}},"id":"d1"}"#,
    );
    owner.send_text(
        r#"{"op":"declare_parameter","name":"blob","value":{"type":5,"byte_array_value":[1,2,3]},"id":"d2"}"#,
    );
    // The declarations are made once the owner's connection was read.
    std::thread::sleep(ms(100));
    fx.send_text(r#"{"op":"getParameters","parameterNames":[],"id":"all"}"#);
    let v = next_op(&mut fx, "parameterValues");
    assert_eq!(v["id"], "all");
    let ps = v["parameters"].as_array().unwrap();
    assert!(
        ps.contains(&json!({"name":"/fx_owner.speed","value":1.0,"type":"float64"})),
        "{v}"
    );
    assert!(
        ps.contains(&json!({"name":"/fx_owner.blob","value":"AQID","type":"byte_array"})),
        "{v}"
    );
    fx.send_text(r#"{"op":"subscribeParameterUpdates","parameterNames":["/fx_owner.speed"]}"#);
    fx.send_text(
        r#"{"op":"setParameters","parameters":[{"name":"/fx_owner.speed","value":1.5}],"id":"s1"}"#,
    );
    // The watcher's update and the reply with the id, in either order.
    let mut got_reply = false;
    let mut got_update = false;
    while !(got_reply && got_update) {
        let v = next_op(&mut fx, "parameterValues");
        assert_eq!(v["parameters"][0]["value"], 1.5, "{v}");
        match v["id"].as_str() {
            Some("s1") => got_reply = true,
            None => got_update = true,
            Some(other) => panic!("id {other}"),
        }
    }
    // Out of the descriptor's range: refused, the value stays.
    fx.send_text(
        r#"{"op":"setParameters","parameters":[{"name":"/fx_owner.speed","value":9.0}],"id":"s2"}"#,
    );
    let st = next_op(&mut fx, "status");
    assert_eq!(st["level"], 2, "{st}");
    assert!(
        st["message"].as_str().unwrap().contains("/fx_owner.speed"),
        "{st}"
    );
    fx.send_text(r#"{"op":"getParameters","parameterNames":["/fx_owner.speed"],"id":"g"}"#);
    let v = next_op(&mut fx, "parameterValues");
    assert_eq!(
        v["parameters"],
        json!([{"name":"/fx_owner.speed","value":1.5,"type":"float64"}])
    );
}

/// Actions as a ROS 2 client sees them: the hidden `_action/*` services
/// and feedback channel; a goal sent through `send_goal` reaches the
/// rosbridge action server, its feedback comes on the channel (CDR of
/// `Fibonacci_FeedbackMessage`), `get_result` waits for its end;
/// `cancel_goal` of an unknown goal says so.
#[test]
fn actions_are_services_and_feedback_and_status_channels() {
    let gw = gateway();
    let (_, mut fx, _) = foxglove_session(&gw, FOXGLOVE);
    let mut server = Ws::connect(&gw);
    server.send_text(
        r#"{"op":"advertise_action","action":"/fx_fib","type":"example_interfaces/action/Fibonacci"}"#,
    );
    // The feedback and status channels come in one advertise.
    let dl = deadline(REPLY);
    let (ch, st_ch) = loop {
        assert!(Instant::now() < dl, "no channels for /fx_fib");
        let adv = next_op(&mut fx, "advertise");
        let find = |t: &str| {
            adv["channels"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["topic"] == t)
                .cloned()
        };
        if let Some(f) = find("/fx_fib/_action/feedback") {
            break (f, find("/fx_fib/_action/status").expect("status channel"));
        }
    };
    assert_eq!(
        ch["schemaName"],
        "example_interfaces/action/Fibonacci_FeedbackMessage"
    );
    assert_eq!(st_ch["schemaName"], "action_msgs/msg/GoalStatusArray");
    assert_eq!(st_ch["encoding"], "cdr");
    assert!(
        st_ch["schema"]
            .as_str()
            .unwrap()
            .starts_with("action_msgs/msg/GoalStatus[] status_list\n"),
        "{st_ch}"
    );
    let dl = deadline(REPLY);
    let mut ids = std::collections::HashMap::new();
    while ids.len() < 3 {
        assert!(Instant::now() < dl, "{ids:?}");
        let adv = next_op(&mut fx, "advertiseServices");
        for s in adv["services"].as_array().unwrap() {
            ids.insert(
                s["name"].as_str().unwrap().to_string(),
                s["id"].as_u64().unwrap() as u32,
            );
        }
        ids.retain(|k, _| k.starts_with("/fx_fib/_action/"));
    }
    fx.send_text(&format!(
        r#"{{"op":"subscribe","subscriptions":[{{"id":3,"channelId":{}}},{{"id":4,"channelId":{}}}]}}"#,
        ch["id"], st_ch["id"]
    ));
    // A GoalStatusArray of one goal (after the message data head and the
    // CDR header): its length 1, the UUID, the stamp (sec, nanosec), the
    // status.
    let one_status = |m: &[u8], uuid: &[u8], status: u8| {
        assert_eq!(&m[..5], &[0x01, 4, 0, 0, 0], "status channel message");
        assert_eq!(&m[13..17], &[0, 1, 0, 0]);
        assert_eq!(&m[17..21], &1u32.to_le_bytes());
        assert_eq!(&m[21..37], uuid);
        let sec = u32::from_le_bytes(m[37..41].try_into().unwrap());
        assert!(sec > 1_600_000_000, "stamp {sec}");
        assert_eq!(m[45], status, "GoalStatus");
        assert_eq!(m.len(), 46);
    };
    let request = |sid: u32, call: u32, body: &str| {
        let mut b = vec![0x02];
        b.extend_from_slice(&sid.to_le_bytes());
        b.extend_from_slice(&call.to_le_bytes());
        b.extend_from_slice(&4u32.to_le_bytes());
        b.extend_from_slice(b"json");
        b.extend_from_slice(body.as_bytes());
        b
    };
    let uuid: Vec<u8> = (1..=16).collect();
    let goal_id = json!({"uuid": uuid}).to_string();
    fx.send_frame(
        0x2,
        true,
        &request(
            ids["/fx_fib/_action/send_goal"],
            1,
            &format!(r#"{{"goal_id":{goal_id},"goal":{{"order":3}}}}"#),
        ),
    );
    let r = next_binary(&mut fx);
    assert_eq!(r[0], 0x03);
    let v: Value = serde_json::from_slice(&r[17..]).unwrap();
    assert_eq!(v["accepted"], true, "{v}");
    // EXECUTING (2): the gateway's goals have no acceptance step.
    one_status(&next_binary(&mut fx), &uuid, 2);
    let g = next_json(&mut server, "send_action_goal");
    assert_eq!(g["args"], json!({"order": 3}));
    // get_result before the end: it waits.
    fx.send_frame(
        0x2,
        true,
        &request(
            ids["/fx_fib/_action/get_result"],
            2,
            &format!(r#"{{"goal_id":{goal_id}}}"#),
        ),
    );
    server.send_text(&format!(
        r#"{{"op":"action_feedback","id":{},"action":"/fx_fib","values":{{"sequence":[0,1]}}}}"#,
        g["id"]
    ));
    let fb = next_binary(&mut fx);
    assert_eq!(&fb[..5], &[0x01, 3, 0, 0, 0]);
    // FeedbackMessage: CDR header, the 16-byte UUID, then the sequence
    // (int32[]: length 2, 0, 1).
    assert_eq!(&fb[13..17], &[0, 1, 0, 0]);
    assert_eq!(&fb[17..33], &uuid[..]);
    assert_eq!(&fb[33..], &[2, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0]);
    server.send_text(&format!(
        r#"{{"op":"action_result","id":{},"action":"/fx_fib","values":{{"sequence":[0,1,1]}},"status":4,"result":true}}"#,
        g["id"]
    ));
    // SUCCEEDED (4) on the status channel, then the waiting get_result.
    one_status(&next_binary(&mut fx), &uuid, 4);
    let r = next_binary(&mut fx);
    assert_eq!(&r[5..9], &2u32.to_le_bytes());
    let v: Value = serde_json::from_slice(&r[17..]).unwrap();
    assert_eq!(v, json!({"status": 4, "result": {"sequence": [0, 1, 1]}}));
    // Cancelling a goal this session does not have.
    let other = json!({"goal_info": {"goal_id": {"uuid": vec![9u8; 16]}, "stamp": {"sec": 0, "nanosec": 0}}});
    fx.send_frame(
        0x2,
        true,
        &request(ids["/fx_fib/_action/cancel_goal"], 3, &other.to_string()),
    );
    let r = next_binary(&mut fx);
    let v: Value = serde_json::from_slice(&r[17..]).unwrap();
    assert_eq!(v["return_code"], 2, "{v}");

    // A second goal, canceled: the status lists both goals (the ended one
    // kept), the second EXECUTING, then CANCELING, then CANCELED.
    let uuid2: Vec<u8> = (101..=116).collect();
    let goal_id2 = json!({"uuid": uuid2}).to_string();
    fx.send_frame(
        0x2,
        true,
        &request(
            ids["/fx_fib/_action/send_goal"],
            4,
            &format!(r#"{{"goal_id":{goal_id2},"goal":{{"order":5}}}}"#),
        ),
    );
    assert_eq!(next_binary(&mut fx)[0], 0x03);
    let both = statuses(&next_binary(&mut fx));
    assert_eq!(both, vec![(uuid.clone(), 4), (uuid2.clone(), 2)]);
    let g2 = next_json(&mut server, "send_action_goal");
    let cancel =
        json!({"goal_info": {"goal_id": {"uuid": uuid2}, "stamp": {"sec": 0, "nanosec": 0}}});
    fx.send_frame(
        0x2,
        true,
        &request(ids["/fx_fib/_action/cancel_goal"], 5, &cancel.to_string()),
    );
    assert_eq!(
        statuses(&next_binary(&mut fx)),
        vec![(uuid.clone(), 4), (uuid2.clone(), 3)]
    );
    let r = next_binary(&mut fx);
    let v: Value = serde_json::from_slice(&r[17..]).unwrap();
    assert_eq!(v["return_code"], 0, "{v}");
    let c = next_json(&mut server, "cancel_action_goal");
    assert_eq!(c["id"], g2["id"]);
    server.send_text(&format!(
        r#"{{"op":"action_result","id":{},"action":"/fx_fib","values":{{"sequence":[]}},"status":5,"result":false}}"#,
        g2["id"]
    ));
    assert_eq!(statuses(&next_binary(&mut fx)), vec![(uuid, 4), (uuid2, 5)]);
}

/// The (UUID, status) list of a `GoalStatusArray` message on subscription
/// 4 (message data head, then CDR: the count, and per `GoalStatus` the
/// UUID, the stamp's sec and nanosec aligned to 4, the status).
fn statuses(m: &[u8]) -> Vec<(Vec<u8>, u8)> {
    assert_eq!(&m[..5], &[0x01, 4, 0, 0, 0], "status channel message");
    assert_eq!(&m[13..17], &[0, 1, 0, 0]);
    let cdr = &m[17..];
    let n = u32::from_le_bytes(cdr[..4].try_into().unwrap()) as usize;
    let mut at = 4;
    let mut out = Vec::new();
    for _ in 0..n {
        let uuid = cdr[at..at + 16].to_vec();
        at = (at + 16).next_multiple_of(4) + 8;
        out.push((uuid, cdr[at]));
        at += 1;
    }
    assert_eq!(at, cdr.len(), "nothing after the list");
    out
}

/// Parameters of a node this gateway does not hold (a ROS 2 node, played
/// here by a TCP client serving `/fx_remote/{list,get,set}_parameters`
/// itself, as rclpy would): `getParameters` of everything asks the node's
/// `list_parameters`, then its `get_parameters`; a named get asks
/// `get_parameters` only; `setParameters` goes to its `set_parameters` and
/// the reply lists the value set. A node that fails is left out.
#[test]
fn parameters_of_a_node_served_elsewhere_are_read_and_set_through_its_services() {
    let gw = gateway();
    let (_, mut fx, _) = foxglove_session(&gw, FOXGLOVE);
    let mut node = gw.client();
    for (short, ty) in [
        ("list_parameters", "rcl_interfaces/srv/ListParameters"),
        ("get_parameters", "rcl_interfaces/srv/GetParameters"),
        ("set_parameters", "rcl_interfaces/srv/SetParameters"),
    ] {
        let id = format!("a_{short}");
        node.send_line(&format!(
            r#"{{"op":"advertise_service","service":"/fx_remote/{short}","type":"{ty}","id":"{id}"}}"#
        ));
        node.expect_info(id.as_str());
    }
    // The node's side: answers each call as rclpy would.
    let serve = |node: &mut Client, want: &str, values: Value| -> Value {
        let (call, _) = node.recv_until(|v| v["op"] == "call_service", deadline(REPLY));
        assert_eq!(call["service"], want, "{call}");
        node.send_line(
            &json!({"op":"service_response","service":want,"id":call["id"],
                    "values":values,"result":true})
            .to_string(),
        );
        call["args"].clone()
    };
    fx.send_text(r#"{"op":"getParameters","parameterNames":[],"id":"all"}"#);
    let args = serve(
        &mut node,
        "/fx_remote/list_parameters",
        json!({"result":{"names":["gain","mode"],"prefixes":[]}}),
    );
    assert_eq!(args["prefixes"], json!([]), "{args}");
    let args = serve(
        &mut node,
        "/fx_remote/get_parameters",
        json!({"values":[{"type":3,"double_value":2.5},{"type":4,"string_value":"auto"}]}),
    );
    assert_eq!(args["names"], json!(["gain", "mode"]), "{args}");
    let v = next_op(&mut fx, "parameterValues");
    assert_eq!(v["id"], "all", "{v}");
    let ps = v["parameters"].as_array().unwrap();
    assert!(
        ps.contains(&json!({"name":"/fx_remote.gain","value":2.5,"type":"float64"})),
        "{v}"
    );
    assert!(
        ps.contains(&json!({"name":"/fx_remote.mode","value":"auto"})),
        "{v}"
    );
    // A named get: get_parameters only, with the names asked.
    fx.send_text(r#"{"op":"getParameters","parameterNames":["/fx_remote.gain"],"id":"g"}"#);
    let args = serve(
        &mut node,
        "/fx_remote/get_parameters",
        json!({"values":[{"type":3,"double_value":2.5}]}),
    );
    assert_eq!(args["names"], json!(["gain"]), "{args}");
    let v = next_op(&mut fx, "parameterValues");
    assert_eq!(
        (v["id"].clone(), v["parameters"].clone()),
        (
            json!("g"),
            json!([{"name":"/fx_remote.gain","value":2.5,"type":"float64"}])
        )
    );
    // A set goes to the node's set_parameters; the reply lists the value.
    fx.send_text(
        r#"{"op":"setParameters","parameters":[{"name":"/fx_remote.gain","value":3.5}],"id":"s"}"#,
    );
    let args = serve(
        &mut node,
        "/fx_remote/set_parameters",
        json!({"results":[{"successful":true,"reason":""}]}),
    );
    assert_eq!(args["parameters"][0]["name"], "gain", "{args}");
    assert_eq!(
        args["parameters"][0]["value"]["double_value"], 3.5,
        "{args}"
    );
    let v = next_op(&mut fx, "parameterValues");
    assert_eq!(
        (v["id"].clone(), v["parameters"].clone()),
        (
            json!("s"),
            json!([{"name":"/fx_remote.gain","value":3.5,"type":"float64"}])
        )
    );
    // The node fails its get: the answer comes, without its values.
    fx.send_text(r#"{"op":"getParameters","parameterNames":["/fx_remote.gain"],"id":"f"}"#);
    let (call, _) = node.recv_until(|v| v["op"] == "call_service", deadline(REPLY));
    node.send_line(
        &json!({"op":"service_response","service":"/fx_remote/get_parameters",
                "id":call["id"],"values":"busy","result":false})
        .to_string(),
    );
    let v = next_op(&mut fx, "parameterValues");
    assert_eq!(
        (v["id"].clone(), v["parameters"].clone()),
        (json!("f"), json!([]))
    );
}

/// A fetch asset response: (request id, status, error text, data).
fn asset_response(m: &[u8]) -> (u32, u8, String, Vec<u8>) {
    assert_eq!(m[0], 0x04, "{m:?}");
    let id = u32::from_le_bytes(m[1..5].try_into().unwrap());
    let status = m[5];
    let n = u32::from_le_bytes(m[6..10].try_into().unwrap()) as usize;
    let text = String::from_utf8(m[10..10 + n].to_vec()).unwrap();
    (id, status, text, m[10 + n..].to_vec())
}

/// `--foxglove-assets DIR`: the `assets` capability; `package://` and
/// `file://` inside DIR answered with the file's bytes, everything else
/// (traversal, a link out of DIR, another scheme, a missing file) with
/// status 1 and a reason, each with its request id.
#[test]
fn assets_are_served_from_the_directory_only() {
    let top = std::env::temp_dir().join(format!("rosgate-it-assets-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&top);
    let root = top.join("share");
    std::fs::create_dir_all(root.join("robot/meshes")).unwrap();
    std::fs::write(root.join("robot/meshes/base.stl"), b"solid base").unwrap();
    std::fs::write(top.join("secret"), b"key").unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(top.join("secret"), root.join("robot/out")).unwrap();
    let root_arg = root.display().to_string();
    let gw = Gateway::start(&[
        "--foxglove-listen",
        "127.0.0.1:0",
        "--foxglove-assets",
        &root_arg,
    ]);
    let (_, mut fx, info) = foxglove_session(&gw, FOXGLOVE);
    assert_capability(&info, "assets");
    let real = std::fs::canonicalize(root.join("robot/meshes/base.stl")).unwrap();
    let ok = [
        (1, "package://robot/meshes/base.stl".to_owned()),
        (2, format!("file://{}", real.display())),
    ];
    for (id, uri) in &ok {
        fx.send_text(&json!({"op": "fetchAsset", "uri": uri, "requestId": id}).to_string());
        let (got, status, text, data) = asset_response(&next_binary(&mut fx));
        assert_eq!((got, status, text.as_str()), (*id, 0, ""), "{uri}");
        assert_eq!(data, b"solid base");
    }
    let secret = std::fs::canonicalize(top.join("secret")).unwrap();
    let refused = [
        (3, "package://robot/../../secret".to_owned(), ".."),
        (4, format!("file://{}", secret.display()), "outside"),
        (5, "package://robot/out".to_owned(), "outside"),
        (6, "https://example.com/a.stl".to_owned(), "only package://"),
        (
            7,
            "package://robot/none.stl".to_owned(),
            "package://robot/none.stl",
        ),
    ];
    for (id, uri, why) in &refused {
        if !cfg!(unix) && *id == 5 {
            continue;
        }
        fx.send_text(&json!({"op": "fetchAsset", "uri": uri, "requestId": id}).to_string());
        let (got, status, text, data) = asset_response(&next_binary(&mut fx));
        assert_eq!((got, status), (*id, 1), "{uri}: {text}");
        assert!(text.contains(why), "{uri}: {text}");
        assert!(data.is_empty());
    }
    std::fs::remove_dir_all(&top).unwrap();
}

/// Without `--foxglove-assets` there is no capability, and a `fetchAsset`
/// is an error status.
#[test]
fn no_assets_without_the_flag() {
    let gw = gateway();
    let (_, mut fx, info) = foxglove_session(&gw, FOXGLOVE);
    assert!(
        !info["capabilities"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c == "assets"),
        "{info}"
    );
    fx.send_text(r#"{"op":"fetchAsset","uri":"package://a/b","requestId":1}"#);
    let s = next_op(&mut fx, "status");
    assert_eq!(s["level"], 2);
    assert!(s["message"].as_str().unwrap().contains("assets"), "{s}");
}

/// The `throttleMs` extension: a throttled subscription gets the first
/// message at once and the newest of the interval at its end, an
/// unthrottled one on the same channel everything; a bad value is an
/// error status.
#[test]
fn a_subscription_may_be_throttled() {
    let gw = gateway();
    let (_, mut slow, _) = foxglove_session(&gw, FOXGLOVE);
    let (_, mut all, _) = foxglove_session(&gw, FOXGLOVE);
    let mut publ = Ws::connect(&gw);
    publ.send_text(r#"{"op":"advertise","topic":"/fx_thr","type":"std_msgs/msg/String"}"#);
    let ch = channel_of(&mut slow, "/fx_thr");
    slow.send_text(&format!(
        r#"{{"op":"subscribe","subscriptions":[{{"id":1,"channelId":{},"throttleMs":1000}}]}}"#,
        ch["id"]
    ));
    let ch_all = channel_of(&mut all, "/fx_thr");
    foxglove_subscribe(&mut all, 2, &ch_all["id"]);
    let started = Instant::now();
    for s in ["a", "b", "c"] {
        publ.send_text(&format!(
            r#"{{"op":"publish","topic":"/fx_thr","msg":{{"data":"{s}"}}}}"#
        ));
    }
    for s in [b'a', b'b', b'c'] {
        assert_eq!(next_binary(&mut all)[21], s);
    }
    assert_eq!(next_binary(&mut slow)[21], b'a', "the first at once");
    let newest = next_binary(&mut slow);
    assert_eq!(newest[21], b'c', "the interval's newest");
    assert!(
        started.elapsed() >= std::time::Duration::from_millis(900),
        "held for the interval"
    );
    slow.send_text(&format!(
        r#"{{"op":"subscribe","subscriptions":[{{"id":3,"channelId":{},"throttleMs":"x"}}]}}"#,
        ch["id"]
    ));
    let s = next_op(&mut slow, "status");
    assert_eq!(s["level"], 2);
    assert!(s["message"].as_str().unwrap().contains("throttleMs"), "{s}");
}
