//! Topics: advertise, unadvertise, publish, subscribe, unsubscribe.

use crate::support::*;
use serde_json::{json, Value};

#[test]
fn subscribe_replies_info_status_with_id() {
    let gw = Gateway::start(&[]);
    let mut c = gw.client();
    c.send_line(r#"{"op":"subscribe","topic":"/chatter","type":"example/Message","id":"sub-1"}"#);
    let v = c.expect_info("sub-1");
    assert!(v["msg"].is_string());
    c.assert_quiet();
}

#[test]
fn subscribe_without_id_replies_info_status_without_id() {
    let gw = Gateway::start(&[]);
    let mut c = gw.client();
    c.send_line(r#"{"op":"subscribe","topic":"/chatter","type":"example/Message"}"#);
    c.expect_status("info", None);
    c.assert_quiet();
}

#[test]
fn advertise_unadvertise_unsubscribe_reply_info_status() {
    let gw = Gateway::start(&[]);
    let mut c = gw.client();
    c.send_line(r#"{"op":"advertise","topic":"/chatter","type":"example/Message","id":"pub-1"}"#);
    c.expect_info("pub-1");
    c.send_line(r#"{"op":"unadvertise","topic":"/chatter","id":"pub-2"}"#);
    c.expect_info("pub-2");
    c.send_line(r#"{"op":"subscribe","topic":"/chatter","type":"example/Message","id":3}"#);
    c.expect_info(3);
    c.send_line(r#"{"op":"unsubscribe","topic":"/chatter","id":4}"#);
    c.expect_info(4);
    // Without ids: info statuses without an id field.
    c.send_line(r#"{"op":"advertise","topic":"/chatter","type":"example/Message"}"#);
    c.expect_status("info", None);
    c.send_line(r#"{"op":"unadvertise","topic":"/chatter"}"#);
    c.expect_status("info", None);
    c.send_line(r#"{"op":"unsubscribe","topic":"/chatter"}"#);
    c.expect_status("info", None);
    c.assert_quiet();
}

#[test]
fn protocol_example_publish_reaches_subscriber() {
    let gw = Gateway::start(&[]);
    let mut publisher = gw.client();
    let mut sub = gw.client();
    publisher.send_line(
        r#"{"op":"advertise","topic":"/chatter","type":"example/Message","id":"pub-1"}"#,
    );
    publisher.expect_info("pub-1");
    sub.send_line(r#"{"op":"subscribe","topic":"/chatter","type":"example/Message","id":"sub-1"}"#);
    sub.expect_info("sub-1");
    publisher.send_line(r#"{"op":"publish","topic":"/chatter","msg":{"data":"hello"}}"#);
    let v = sub.recv();
    assert_eq!(
        v,
        json!({"op":"publish","topic":"/chatter","msg":{"data":"hello"}})
    );
    // A successful publish sends nothing back to the publisher.
    publisher.assert_quiet();
    sub.assert_quiet();
}

#[test]
fn publish_payload_forwarded_byte_for_byte() {
    let gw = Gateway::start(&[]);
    let mut sub = gw.client();
    let mut publisher = gw.client();
    sub.subscribe("/t");
    let payload = r#"{"n":12345678901234567890,"f":1e-300,"s":"\u00e9","a":[1, 2 ,{"x":null}]}"#;
    publisher.send_line(&format!(
        r#"{{"op":"publish","topic":"/t","msg":{payload}}}"#
    ));
    let raw = sub.recv_raw(deadline(REPLY));
    assert!(
        raw.contains(payload),
        "payload not forwarded byte for byte:\n sent {payload}\n got  {raw}"
    );
    let v = parse_line(&raw);
    assert_eq!(v["op"], "publish");
    assert_eq!(v["topic"], "/t");
    assert!(!raw.contains('\n'));
}

#[test]
fn publish_any_json_value_as_msg() {
    let gw = Gateway::start(&[]);
    let mut sub = gw.client();
    let mut publisher = gw.client();
    sub.subscribe("/any");
    let payloads = [
        r#""a string with \"quotes\" and \\ and \n""#,
        "-0.0",
        "1.5E+10",
        "[]",
        "{}",
        "null",
        "true",
        "false",
        r#"[ {"k" : [ 1 , "two" ] } ]"#,
        r#""\ud83d\ude00 😀""#,
    ];
    for p in payloads {
        publisher.send_line(&format!(r#"{{"op":"publish","topic":"/any","msg":{p}}}"#));
    }
    for p in payloads {
        let raw = sub.recv_raw(deadline(REPLY));
        assert!(raw.contains(p), "payload {p} not preserved in {raw}");
        let v = parse_line(&raw);
        assert_eq!(v["topic"], "/any");
        let want: Value = serde_json::from_str(p).unwrap();
        assert_eq!(v["msg"], want);
    }
}

#[test]
fn no_latching_subscriber_gets_nothing_published_before() {
    let gw = Gateway::start(&[]);
    let mut publisher = gw.client();
    publisher.advertise("/latch");
    publisher.publish("/latch", r#"{"old":true}"#);
    publisher.assert_quiet(); // the publish has been processed
    let mut sub = gw.client();
    sub.subscribe("/latch");
    sub.assert_quiet();
    publisher.publish("/latch", r#"{"new":true}"#);
    let v = sub.recv();
    assert_eq!(v["msg"], json!({"new":true}));
    sub.assert_quiet();
}

#[test]
fn topics_are_isolated_by_exact_name() {
    let gw = Gateway::start(&[]);
    let mut a = gw.client();
    let mut b = gw.client();
    let mut publisher = gw.client();
    a.subscribe("/a");
    b.subscribe("/b");
    for t in ["/a/b", "/A", "/a ", "a", "/ab", "/", "//a", "/b/"] {
        publisher.publish(t, r#""wrong""#);
    }
    publisher.publish("/b", r#""for b""#);
    publisher.publish("/a", r#""for a""#);
    let va = a.recv();
    assert_eq!(va, json!({"op":"publish","topic":"/a","msg":"for a"}));
    let vb = b.recv();
    assert_eq!(vb, json!({"op":"publish","topic":"/b","msg":"for b"}));
    a.assert_quiet();
    b.assert_quiet();
}

#[test]
fn topic_names_are_compared_after_json_unescaping() {
    let gw = Gateway::start(&[]);
    let mut sub = gw.client();
    let mut publisher = gw.client();
    sub.send_line(r#"{"op":"subscribe","topic":"/a\u002fb","type":"x","id":"esc"}"#);
    sub.expect_info("esc");
    publisher.send_line(r#"{"op":"publish","topic":"/a/b","msg":1}"#);
    let v = sub.recv();
    assert_eq!(v["topic"], "/a/b");
    assert_eq!(v["msg"], 1);
    // And the other way round, with a non-ASCII name.
    sub.send_line(r#"{"op":"subscribe","topic":"/caf\u00e9","type":"x","id":"esc2"}"#);
    sub.expect_info("esc2");
    publisher.send_line(r#"{"op":"publish","topic":"/café","msg":2}"#);
    let v = sub.recv();
    assert_eq!(v["topic"], "/café");
    assert_eq!(v["msg"], 2);
    sub.assert_quiet();
}

#[test]
fn publish_without_advertise_is_delivered() {
    let gw = Gateway::start(&[]);
    let mut sub = gw.client();
    let mut publisher = gw.client();
    sub.subscribe("/noadv");
    publisher.publish("/noadv", "42");
    assert_eq!(sub.recv()["msg"], 42);
    publisher.assert_quiet();
}

#[test]
fn publish_to_topic_without_subscribers_is_silent() {
    let gw = Gateway::start(&[]);
    let mut publisher = gw.client();
    publisher.publish("/nobody", "1");
    publisher.advertise("/nobody2");
    publisher.publish("/nobody2", "1");
    publisher.assert_quiet();
}

#[test]
fn connection_receives_its_own_publications() {
    let gw = Gateway::start(&[]);
    let mut c = gw.client();
    c.subscribe("/self");
    c.advertise("/self");
    c.publish("/self", r#"{"me":1}"#);
    let v = c.recv();
    assert_eq!(v, json!({"op":"publish","topic":"/self","msg":{"me":1}}));
    c.assert_quiet();
}

#[test]
fn double_subscribe_delivers_one_copy() {
    let gw = Gateway::start(&[]);
    let mut sub = gw.client();
    let mut publisher = gw.client();
    sub.subscribe("/dup");
    sub.subscribe("/dup");
    for i in 0..3 {
        publisher.publish("/dup", &i.to_string());
    }
    for i in 0..3 {
        assert_eq!(sub.recv()["msg"], i);
    }
    sub.assert_quiet();
}

#[test]
fn unsubscribe_stops_delivery() {
    let gw = Gateway::start(&[]);
    let mut sub = gw.client();
    let mut publisher = gw.client();
    sub.subscribe("/u");
    publisher.publish("/u", "1");
    assert_eq!(sub.recv()["msg"], 1);
    sub.unsubscribe("/u");
    publisher.publish("/u", "2");
    publisher.assert_quiet();
    sub.assert_quiet();
}

#[test]
fn repeated_unsubscribe_and_unadvertise_are_safe() {
    let gw = Gateway::start(&[]);
    let mut c = gw.client();
    // Never subscribed / never advertised.
    c.unsubscribe("/never");
    c.send_line(r#"{"op":"unadvertise","topic":"/never","id":"ua0"}"#);
    c.expect_info("ua0");
    c.subscribe("/r");
    c.advertise("/r");
    for i in 0..3 {
        c.send_line(&format!(
            r#"{{"op":"unsubscribe","topic":"/r","id":"us{i}"}}"#
        ));
        c.expect_info(format!("us{i}"));
        c.send_line(&format!(
            r#"{{"op":"unadvertise","topic":"/r","id":"ua{i}"}}"#
        ));
        c.expect_info(format!("ua{i}"));
    }
    // Still usable, and really unsubscribed.
    c.publish("/r", "1");
    c.assert_quiet();
    c.subscribe("/r");
    c.publish("/r", "2");
    assert_eq!(c.recv()["msg"], 2);
    let s = gw.stats();
    assert_eq!(counter(&s, "errors.not_provider"), 0, "{s}");
    assert_eq!(total_errors(&s), 0, "no errors expected: {s}");
}

#[test]
fn redundant_advertise_still_replies_info() {
    let gw = Gateway::start(&[]);
    let mut c = gw.client();
    c.advertise("/twice");
    c.advertise("/twice");
    let mut sub = gw.client();
    sub.subscribe("/twice");
    c.publish("/twice", "7");
    assert_eq!(sub.recv()["msg"], 7);
    sub.assert_quiet();
}

#[test]
fn type_strings_are_informational_only() {
    let gw = Gateway::start(&[]);
    let mut sub = gw.client();
    let mut publisher = gw.client();
    publisher.send_line(r#"{"op":"advertise","topic":"/typed","type":"pkg/A","id":1}"#);
    publisher.expect_info(1);
    sub.send_line(r#"{"op":"subscribe","topic":"/typed","type":"other/B","id":2}"#);
    sub.expect_info(2);
    publisher.publish("/typed", r#""not an A at all""#);
    assert_eq!(sub.recv()["msg"], "not an A at all");
}

#[test]
fn key_order_unknown_fields_and_whitespace_are_not_semantic() {
    let gw = Gateway::start(&[]);
    let mut sub = gw.client();
    let mut publisher = gw.client();
    sub.send_line(
        r#"  { "id" : "k1" , "extra" : {"deep":[1,{"x":2}]}, "type":"t", "topic" : "/k", "op" : "subscribe" }  "#,
    );
    sub.expect_info("k1");
    publisher.send_line(r#"{"msg":{"v":1},"unknown":[null],"topic":"/k","op":"publish"}"#);
    let v = sub.recv();
    assert_eq!(v["op"], "publish");
    assert_eq!(v["topic"], "/k");
    assert_eq!(v["msg"], json!({"v":1}));
    assert!(v.get("unknown").is_none(), "unknown field leaked: {v}");
}

#[test]
fn status_id_is_returned_byte_for_byte() {
    let gw = Gateway::start(&[]);
    let mut c = gw.client();
    let ids = [
        r#"{"b": [1, 2.50]}"#,
        "12345678901234567890",
        "1.0e3",
        r#""\u00e9""#,
        "[ ]",
        "-7",
    ];
    for id in ids {
        c.send_line(&format!(
            r#"{{"op":"subscribe","topic":"/ids","type":"x","id":{id}}}"#
        ));
        let raw = c.recv_raw(deadline(REPLY));
        let v = parse_line(&raw);
        assert_eq!(v["op"], "status", "{raw}");
        assert_eq!(v["level"], "info", "{raw}");
        assert!(
            raw.contains(&format!(r#""id":{id}"#)),
            "id {id} not returned byte for byte: {raw}"
        );
    }
}

#[test]
fn per_publisher_order_is_preserved() {
    let gw = Gateway::start(&[]);
    let mut sub = gw.client();
    sub.subscribe("/seq");
    let mut p1 = gw.client();
    let mut p2 = gw.client();
    const N: u64 = 2000;
    let mut batch1 = String::new();
    let mut batch2 = String::new();
    for i in 0..N {
        batch1.push_str(&format!(
            "{{\"op\":\"publish\",\"topic\":\"/seq\",\"msg\":{{\"p\":1,\"i\":{i}}}}}\n"
        ));
        batch2.push_str(&format!(
            "{{\"op\":\"publish\",\"topic\":\"/seq\",\"msg\":{{\"p\":2,\"i\":{i}}}}}\n"
        ));
    }
    let h1 = spawn(move || {
        p1.send_raw(batch1.as_bytes());
        p1
    });
    let h2 = spawn(move || {
        p2.send_raw(batch2.as_bytes());
        p2
    });
    let mut next = [0u64; 3];
    for _ in 0..2 * N {
        let v = sub.recv();
        assert_eq!(v["topic"], "/seq");
        let p = v["msg"]["p"].as_u64().unwrap() as usize;
        let i = v["msg"]["i"].as_u64().unwrap();
        assert_eq!(i, next[p], "publisher {p} out of order");
        next[p] += 1;
    }
    assert_eq!(next, [0, N, N]);
    sub.assert_quiet();
    h1.join().unwrap();
    h2.join().unwrap();
}

#[test]
fn fan_out_to_many_concurrent_subscribers() {
    let gw = Gateway::start(&[]);
    let mut subs: Vec<Client> = (0..20).map(|_| gw.client()).collect();
    for s in &mut subs {
        s.subscribe("/fan");
    }
    let mut publisher = gw.client();
    for i in 0..10 {
        publisher.publish("/fan", &i.to_string());
    }
    for s in &mut subs {
        for i in 0..10 {
            assert_eq!(s.recv(), json!({"op":"publish","topic":"/fan","msg":i}));
        }
        s.assert_quiet();
    }
    let st = gw.stats();
    assert_eq!(counter(&st, "published"), 10, "{st}");
    assert_eq!(counter(&st, "delivered"), 200, "{st}");
}

#[test]
fn closing_connection_withdraws_only_its_registrations() {
    let gw = Gateway::start(&[]);
    let base = gw.stats();
    let mut a = gw.client();
    let mut b = gw.client();
    let mut p = gw.client();
    a.subscribe("/shared");
    a.subscribe("/only-a");
    a.advertise("/shared");
    b.subscribe("/shared");
    p.advertise("/shared");
    let s = gw.stats();
    assert_eq!(
        counter(&s, "subscriptions"),
        counter(&base, "subscriptions") + 3,
        "{s}"
    );
    assert_eq!(
        counter(&s, "publishers"),
        counter(&base, "publishers") + 2,
        "{s}"
    );
    assert_eq!(counter(&s, "topics"), counter(&base, "topics") + 2, "{s}");
    drop(a);
    let s = gw.wait_for_stats("a's registrations withdrawn", |s| {
        counter(s, "subscriptions") == counter(&base, "subscriptions") + 1
            && counter(s, "publishers") == counter(&base, "publishers") + 1
    });
    assert_eq!(counter(&s, "topics"), counter(&base, "topics") + 1, "{s}");
    p.publish("/shared", r#""still here""#);
    assert_eq!(
        b.recv(),
        json!({"op":"publish","topic":"/shared","msg":"still here"})
    );
    b.assert_quiet();
    p.assert_quiet();
    drop(b);
    drop(p);
    gw.wait_for_stats("back to baseline", |s| {
        counter(s, "subscriptions") == counter(&base, "subscriptions")
            && counter(s, "publishers") == counter(&base, "publishers")
            && counter(s, "topics") == counter(&base, "topics")
            && counter(s, "connections_open") == counter(&base, "connections_open")
    });
}

#[test]
fn large_message_within_limit_is_delivered_intact() {
    let gw = Gateway::start(&[]);
    let mut sub = gw.client();
    sub.subscribe("/big");
    let mut publisher = gw.client();
    let body = "x".repeat(2 * 1024 * 1024);
    let payload = format!(r#"{{"blob":"{body}"}}"#);
    let line = format!(r#"{{"op":"publish","topic":"/big","msg":{payload}}}"#);
    let h = spawn(move || {
        publisher.send_line(&line);
        publisher
    });
    let raw = sub.recv_raw(deadline(std::time::Duration::from_secs(10)));
    assert!(
        raw.contains(&payload),
        "big payload altered (len {})",
        raw.len()
    );
    let mut publisher = h.join().unwrap();
    publisher.assert_quiet();
}
