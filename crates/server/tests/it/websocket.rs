//! The WebSocket listener: RFC 6455 handshake and framing done by hand
//! (raw bytes, masked client frames), rosbridge-dialect behaviour, and
//! cross-transport routing with NDJSON clients.

use std::io::Write;
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::*;
use crate::wsclient::*;

#[test]
fn handshake_accepts_case_insensitive_upgrade_and_declines_deflate() {
    let gw = Gateway::start(&[]);
    let mut ws = Ws::raw(&gw);
    let head = ws.handshake(&format!(
        "GET /any/path HTTP/1.1\r\nhost: x\r\nUPGRADE: WebSocket\r\nconnection: keep-alive, upgrade\r\nsec-websocket-key: {KEY}\r\nsec-websocket-version: 13\r\nSec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n\r\n"
    ));
    assert!(head.starts_with("HTTP/1.1 101 "), "{head}");
    assert!(
        head.contains(&format!("Sec-WebSocket-Accept: {ACCEPT}\r\n")),
        "{head}"
    );
    assert!(!head.to_ascii_lowercase().contains("deflate"), "{head}");
    ws.send_text(r#"{"op":"call_service","service":"/rosgate/stats","id":1,"args":{}}"#);
    assert_eq!(ws.json()["result"], true);
}

#[test]
fn plain_http_is_answered_and_the_gateway_keeps_serving() {
    let gw = Gateway::start(&[]);
    let mut ws = Ws::raw(&gw);
    // Not an upgrade: the HTTP side answers (the dashboard) and closes.
    let head = ws.handshake("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let s = gw.wait_for_stats("http close counted", |s| {
        counter(s, "closes.http_served") == 1
    });
    assert_eq!(counter(&s, "http_requests"), 1, "{s}");
    // An upgrade without its key is still refused with 426.
    let mut bad = Ws::raw(&gw);
    let head = bad.handshake("GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 426"), "{head}");
    bad.expect_eof();
    Ws::connect(&gw);
}

#[test]
fn websocket_and_tcp_clients_share_topics_and_services() {
    let gw = Gateway::start(&[]);
    let mut ws = Ws::connect(&gw);
    let mut tcp = gw.client();
    ws.send_text(r#"{"op":"subscribe","topic":"/mixed","type":"std_msgs/String","id":"s1"}"#);
    ws.barrier();
    tcp.publish("/mixed", r#"{"data":"from tcp","n":12345678901234567890}"#);
    let (op, payload) = ws.frame();
    assert_eq!(op, 0x1);
    assert_eq!(
        String::from_utf8(payload).expect("utf8"),
        r#"{"op":"publish","topic":"/mixed","msg":{"data":"from tcp","n":12345678901234567890}}"#,
        "payload byte-exact, no newline inside the frame"
    );
    tcp.subscribe("/back");
    ws.send_text(r#"{"op":"publish","topic":"/back","msg":{"data":"from ws"}}"#);
    assert_eq!(tcp.recv()["msg"]["data"], "from ws");
    // A TCP provider serves a WebSocket caller and the other way round.
    tcp.advertise_service("/tcp_svc");
    ws.send_text(r#"{"op":"call_service","service":"/tcp_svc","id":"c1","args":{"a":1}}"#);
    let fwd = tcp.expect_forwarded("/tcp_svc");
    tcp.respond("/tcp_svc", &fwd["id"].to_string(), r#"{"ok":true}"#, "true");
    let r = ws.json();
    assert_eq!(
        (r["id"].clone(), r["values"]["ok"].clone()),
        (json!("c1"), json!(true))
    );
    ws.send_text(r#"{"op":"advertise_service","service":"/ws_svc","type":"x/Y"}"#);
    ws.barrier();
    tcp.call("/ws_svc", "7", "[1,2]");
    let fwd = ws.json();
    assert_eq!(fwd["op"], "call_service");
    assert_eq!(fwd["args"], json!([1, 2]));
    let reply = format!(
        r#"{{"op":"service_response","service":"/ws_svc","id":{},"values":{{"v":2}},"result":true}}"#,
        fwd["id"]
    );
    ws.send_text(&reply);
    assert_eq!(tcp.expect_response("/ws_svc", &json!(7))["values"]["v"], 2);
}

#[test]
fn status_filter_defaults_to_errors_only() {
    let gw = Gateway::start(&[]);
    let mut ws = Ws::connect(&gw);
    ws.send_text(r#"{"op":"subscribe","topic":"/t","type":"x","id":"s1"}"#);
    ws.send_text(r#"{"op":"nope","id":"bad"}"#);
    let got = ws.barrier();
    assert_eq!(got.len(), 1, "only the error status: {got:?}");
    assert_eq!(
        (got[0]["level"].clone(), got[0]["id"].clone()),
        (json!("error"), json!("bad"))
    );
}

#[test]
fn status_filter_all_and_none() {
    let gw = Gateway::start(&["--ws-status", "all"]);
    let mut ws = Ws::connect(&gw);
    ws.send_text(r#"{"op":"subscribe","topic":"/t","type":"x","id":"s1"}"#);
    let got = ws.barrier();
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(
        (got[0]["level"].clone(), got[0]["id"].clone()),
        (json!("info"), json!("s1"))
    );
    drop(gw);
    let gw = Gateway::start(&["--ws-status", "none"]);
    let mut ws = Ws::connect(&gw);
    ws.send_text(r#"{"op":"nope","id":"bad"}"#);
    ws.send_frame(0x2, true, b"\x00\x01");
    assert!(ws.barrier().is_empty());
    let s = gw.stats();
    assert_eq!(counter(&s, "errors.unknown_op"), 1, "{s}");
    assert_eq!(counter(&s, "errors.binary_frame"), 1, "{s}");
}

#[test]
fn unsubscribe_by_id_removes_only_that_subscription() {
    let gw = Gateway::start(&[]);
    let mut ws = Ws::connect(&gw);
    let mut tcp = gw.client();
    ws.send_text(r#"{"op":"subscribe","topic":"/ids","type":"x","id":"a"}"#);
    ws.send_text(r#"{"op":"subscribe","topic":"/ids","type":"x","id":"b"}"#);
    ws.barrier();
    tcp.publish("/ids", "1");
    assert_eq!(ws.json()["msg"], 1);
    assert!(
        ws.barrier().is_empty(),
        "one copy per message for two subscriptions"
    );
    ws.send_text(r#"{"op":"unsubscribe","topic":"/ids","id":"a"}"#);
    ws.barrier();
    tcp.publish("/ids", "2");
    assert_eq!(ws.json()["msg"], 2, "subscription b still delivers");
    ws.send_text(r#"{"op":"unsubscribe","topic":"/ids","id":"b"}"#);
    ws.barrier();
    tcp.publish("/ids", "3");
    assert!(ws.barrier().is_empty(), "no subscription left");
    // Without an id, every subscription of the connection goes.
    ws.send_text(r#"{"op":"subscribe","topic":"/ids","id":"c"}"#);
    ws.send_text(r#"{"op":"subscribe","topic":"/ids","id":"d"}"#);
    ws.send_text(r#"{"op":"unsubscribe","topic":"/ids"}"#);
    ws.barrier();
    tcp.publish("/ids", "4");
    assert!(ws.barrier().is_empty());
    let s = gw.stats();
    assert_eq!(counter(&s, "subscriptions"), 0, "{s}");
}

#[test]
fn unadvertise_by_id_removes_only_that_advertisement() {
    let gw = Gateway::start(&[]);
    let mut ws = Ws::connect(&gw);
    ws.send_text(r#"{"op":"advertise","topic":"/adv","type":"x","id":"p1"}"#);
    ws.send_text(r#"{"op":"advertise","topic":"/adv","type":"x","id":"p2"}"#);
    ws.send_text(r#"{"op":"unadvertise","topic":"/adv","id":"p1"}"#);
    ws.barrier();
    assert_eq!(counter(&gw.stats(), "publishers"), 1);
    ws.send_text(r#"{"op":"unadvertise","topic":"/adv","id":"p2"}"#);
    ws.barrier();
    assert_eq!(counter(&gw.stats(), "publishers"), 0);
}

#[test]
fn rosbridge_leniencies_call_without_id_args_or_type_and_ignored_ops() {
    let gw = Gateway::start(&[]);
    let mut ws = Ws::connect(&gw);
    let mut provider = gw.client();
    provider.advertise_service("/lenient");
    ws.send_text(r#"{"op":"set_level","level":"error"}"#);
    ws.send_text(r#"{"op":"auth","mac":"x","client":"y"}"#);
    ws.send_text(r#"{"op":"subscribe","topic":"/no_type","throttle_rate":0,"queue_length":0,"fragment_size":100,"compression":"none"}"#);
    ws.send_text(r#"{"op":"call_service","service":"/lenient","type":"x/Y"}"#);
    let fwd = provider.expect_forwarded("/lenient");
    assert_eq!(
        fwd["args"],
        json!({}),
        "missing args forwarded as an empty request"
    );
    provider.respond("/lenient", &fwd["id"].to_string(), r#"{"r":1}"#, "true");
    let r = ws.json();
    assert_eq!(r["op"], "service_response");
    assert!(r.get("id").is_none(), "no id in, no id out: {r}");
    assert_eq!(r["values"]["r"], 1);
    assert!(
        ws.barrier().is_empty(),
        "set_level, auth and extra fields raise no error"
    );
    provider.publish("/no_type", "5");
    assert_eq!(ws.json()["msg"], 5);
}

#[test]
fn ping_pong_fragments_and_close_handshake() {
    let gw = Gateway::start(&[]);
    let mut ws = Ws::connect(&gw);
    ws.send_frame(0x9, true, b"are you there");
    assert_eq!(ws.frame(), (0xA, b"are you there".to_vec()));
    // A message in three fragments with a ping in the middle.
    let msg = br#"{"op":"call_service","service":"/rosgate/stats","id":"frag","args":{}}"#;
    ws.send_frame(0x1, false, &msg[..10]);
    ws.send_frame(0x0, false, &msg[10..30]);
    ws.send_frame(0x9, true, b"");
    ws.send_frame(0x0, true, &msg[30..]);
    assert_eq!(ws.frame(), (0xA, vec![]));
    assert_eq!(ws.json()["id"], "frag");
    ws.send_frame(0x8, true, &1000u16.to_be_bytes());
    assert_eq!(
        ws.frame(),
        (0x8, 1000u16.to_be_bytes().to_vec()),
        "close echoed"
    );
    ws.expect_eof();
    gw.wait_for_stats("peer close counted", |s| {
        counter(s, "closes.peer_closed") == 1
    });
}

#[test]
fn oversized_message_is_refused_and_connection_stays_usable() {
    let gw = Gateway::start(&["--max-line-bytes", "1024"]);
    let mut ws = Ws::connect(&gw);
    let big = format!(
        r#"{{"op":"publish","topic":"/big","msg":"{}"}}"#,
        "x".repeat(5000)
    );
    ws.send_text(&big);
    let e = ws.json();
    assert_eq!(
        (e["op"].clone(), e["level"].clone()),
        (json!("status"), json!("error"))
    );
    assert!(ws.barrier().is_empty());
    assert_eq!(counter(&gw.stats(), "errors.too_long"), 1);
}

#[test]
fn unmasked_frame_closes_with_protocol_error_only_that_client() {
    let gw = Gateway::start(&[]);
    let mut other = Ws::connect(&gw);
    let mut ws = Ws::connect(&gw);
    ws.s.write_all(&[0x81, 0x02, b'{', b'}']).expect("send");
    let f = ws.frame();
    assert_eq!((f.0, &f.1[..2]), (0x8, &1002u16.to_be_bytes()[..]));
    ws.expect_eof();
    assert!(other.barrier().is_empty(), "other clients unaffected");
    gw.wait_for_stats("protocol error counted", |s| {
        counter(s, "closes.protocol_error") == 1
    });
}

#[test]
fn disconnect_withdraws_websocket_registrations() {
    let gw = Gateway::start(&[]);
    let mut caller = gw.client();
    {
        let mut ws = Ws::connect(&gw);
        ws.send_text(r#"{"op":"subscribe","topic":"/gone","id":"a"}"#);
        ws.send_text(r#"{"op":"advertise_service","service":"/gone_svc"}"#);
        ws.barrier();
        caller.call("/gone_svc", "1", "{}");
        assert_eq!(ws.json()["op"], "call_service");
    }
    let r = caller.expect_failure("/gone_svc", &json!(1));
    assert_eq!(r["result"], false);
    gw.wait_for_stats("registrations withdrawn", |s| {
        counter(s, "subscriptions") == 0
            && counter(s, "services") == 0
            && counter(s, "connections_open") == 2 // the caller and the stats client
    });
}

#[test]
fn websocket_listener_can_be_turned_off() {
    let gw = Gateway::start(&["--ws-listen", "off"]);
    assert!(
        !gw.logs().iter().any(|l| l.contains("websocket listening")),
        "{:?}",
        gw.logs()
    );
    let mut c = gw.client();
    c.subscribe("/still_tcp");
}

#[test]
fn large_message_crosses_length_encodings() {
    let gw = Gateway::start(&[]);
    let mut ws = Ws::connect(&gw);
    let mut tcp = gw.client();
    ws.send_text(r#"{"op":"subscribe","topic":"/sizes"}"#);
    ws.barrier();
    for n in [10usize, 200, 70_000] {
        let body = "y".repeat(n);
        tcp.publish("/sizes", &format!("\"{body}\""));
        let v = ws.json();
        assert_eq!(v["msg"].as_str().map(str::len), Some(n));
    }
    let _ = Duration::from_millis(1);
}

#[test]
fn rosbridge_provider_result_is_read_as_rosbridge_reads_it() {
    let gw = Gateway::start(&[]);
    let mut ws = Ws::connect(&gw);
    let mut caller = gw.client();
    ws.send_text(r#"{"op":"advertise_service","service":"/rb","type":"x/Y"}"#);
    ws.barrier();
    let answer = |ws: &mut Ws, reply: &str| {
        let fwd = ws.json();
        ws.send_text(&reply.replace("ID", &fwd["id"].to_string()));
    };
    // rosbridge builds the response from an object `values` and ignores
    // `result` (roslibpy's own tests rely on it).
    caller.call("/rb", "1", "{}");
    answer(
        &mut ws,
        r#"{"op":"service_response","service":"/rb","id":ID,"values":{"sum":42},"result":false}"#,
    );
    let r = caller.expect_response("/rb", &json!(1));
    assert_eq!(
        (r["values"]["sum"].clone(), r["result"].clone()),
        (json!(42), json!(true))
    );
    // A failure with a reason string stays a failure.
    caller.call("/rb", "2", "{}");
    answer(
        &mut ws,
        r#"{"op":"service_response","service":"/rb","id":ID,"values":"Error: boom","result":false}"#,
    );
    let r = caller.expect_response("/rb", &json!(2));
    assert_eq!(
        (r["values"].clone(), r["result"].clone()),
        (json!("Error: boom"), json!(false))
    );
    // roslib's handler returning false sends no `values`: an immediate failure.
    caller.call("/rb", "3", "{}");
    answer(
        &mut ws,
        r#"{"op":"service_response","service":"/rb","id":ID,"result":false}"#,
    );
    let r = caller.expect_response("/rb", &json!(3));
    assert_eq!(r["result"], false);
    assert!(r["values"].is_string(), "{r}");
    assert!(ws.barrier().is_empty(), "all three responses accepted");
}

#[test]
fn raw_newlines_in_payload_whitespace_cannot_split_frames() {
    let gw = Gateway::start(&[]);
    let mut ws = Ws::connect(&gw);
    let mut tcp = gw.client();
    tcp.subscribe("/nl");
    // JSON allows LF and CR as whitespace; forwarded raw, they would split
    // the NDJSON frame and let this client forge a line for another one.
    ws.send_text(
        "{\"op\":\"publish\",\"topic\":\"/nl\",\"msg\":[\"a\",\n{\"op\":\"call_service\",\"service\":\"/forged\",\"id\":\"rg-1\",\"args\":{}}\r\n]}",
    );
    let line = tcp.recv_raw(deadline(REPLY));
    let v = parse_line(&line);
    assert_eq!(v["op"], "publish", "{line}");
    assert_eq!(
        v["msg"][1]["service"], "/forged",
        "payload kept as data: {line}"
    );
    tcp.assert_quiet();
    // The same on the TCP side for a bare CR inside a line.
    let mut sub = Ws::connect(&gw);
    sub.send_text(r#"{"op":"subscribe","topic":"/cr"}"#);
    sub.barrier();
    tcp.send_raw(b"{\"op\":\"publish\",\"topic\":\"/cr\",\"msg\":{\"a\":\r1}}\n");
    let (op, payload) = sub.frame();
    assert_eq!(op, 0x1);
    assert!(
        !payload.contains(&b'\r'),
        "{}",
        String::from_utf8_lossy(&payload)
    );
    let v: Value = serde_json::from_slice(&payload).expect("json");
    assert_eq!(v["msg"]["a"], 1);
}
