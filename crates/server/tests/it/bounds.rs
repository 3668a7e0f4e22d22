//! Bounded memory and work, against the real binary on both transports:
//! per-item caps, input a standard parser would refuse, WebSocket close
//! codes, opening/partial/soft-limit deadlines, admission at the limit,
//! registration limits, the global memory budget and graceful shutdown.

use std::io::Write;
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::*;
use crate::wsclient::*;

#[test]
fn ids_over_the_cap_are_refused_and_never_echoed() {
    let gw = Gateway::start(&[]);
    let mut c = gw.client();
    let ok_id = "i".repeat(1022);
    c.send_line(&format!(
        r#"{{"op":"subscribe","topic":"/a","type":"T","id":"{ok_id}"}}"#
    ));
    c.expect_info(ok_id.as_str());
    let long = "i".repeat(1023);
    c.send_line(&format!(
        r#"{{"op":"call_service","service":"/s","id":"{long}","args":{{}}}}"#
    ));
    let e = c.expect_error_no_id();
    assert!(
        e["msg"]
            .as_str()
            .is_some_and(|m| m.contains("longer than 1024")),
        "{e}"
    );
    let mut ws = Ws::connect(&gw);
    ws.send_text(&format!(
        r#"{{"op":"subscribe","topic":"/a","id":"{long}"}}"#
    ));
    let e = ws.json();
    assert_eq!(
        (e["level"].as_str(), e.get("id")),
        (Some("error"), None),
        "{e}"
    );
    let st = gw.stats();
    assert_eq!(counter(&st, "errors.id_too_long"), 2);
    assert_eq!(counter(&st, "calls_pending"), 0, "nothing was stored");
}

#[test]
fn names_over_the_cap_are_refused() {
    let gw = Gateway::start(&[]);
    let mut c = gw.client();
    let long = format!("/{}", "n".repeat(1024));
    c.send_line(&format!(
        r#"{{"op":"subscribe","topic":"{long}","type":"T","id":1}}"#
    ));
    c.expect_error(1);
    assert_eq!(counter(&gw.stats(), "errors.name_too_long"), 1);
    assert_eq!(counter(&gw.stats(), "topics"), 0);
}

/// A publisher cannot make the gateway send a line that Python's
/// `json.loads` or serde_json refuses: the request is refused at the door,
/// with its id, and subscribers see nothing of it.
#[test]
fn payloads_a_standard_parser_refuses_are_refused_at_the_door() {
    let gw = Gateway::start(&[]);
    let mut sub = gw.client();
    sub.subscribe("/p");
    let mut ws_sub = Ws::connect(&gw);
    ws_sub.send_text(r#"{"op":"subscribe","topic":"/p","type":"T"}"#);
    ws_sub.barrier();
    let mut p = gw.client();
    let huge_int = format!("1{}", "0".repeat(4400));
    let cases = [
        ("number_out_of_range", huge_int.as_str()),
        ("number_out_of_range", "1e400"),
        ("number_out_of_range", "[-1.8e308]"),
        ("lone_surrogate", r#""\ud800""#),
        ("lone_surrogate", r#"{"\udc00":1}"#),
    ];
    for (i, (code, msg)) in cases.iter().enumerate() {
        let before = counter(&gw.stats(), &format!("errors.{code}"));
        p.send_line(&format!(
            r#"{{"op":"publish","id":{i},"topic":"/p","msg":{msg}}}"#
        ));
        let e = p.expect_error(i);
        assert!(e["msg"].is_string());
        assert_eq!(
            counter(&gw.stats(), &format!("errors.{code}")),
            before + 1,
            "{msg:.40}"
        );
    }
    // What is within range goes through, byte for byte.
    p.publish("/p", r#"[1.79769313486231e308,"\ud83d\ude00",1e-400]"#);
    let raw = sub.recv_raw(deadline(REPLY));
    assert!(
        raw.contains(r#"[1.79769313486231e308,"\ud83d\ude00",1e-400]"#),
        "{raw}"
    );
    assert_eq!(ws_sub.json()["topic"], "/p");
    sub.assert_quiet();
    assert!(ws_sub.barrier().is_empty());
}

/// f64::MAX as Python's `json.dumps(sys.float_info.max)` and JavaScript's
/// `JSON.stringify(Number.MAX_VALUE)` write it, and other numbers that
/// Python, JavaScript and serde_json all read as finite f64s (the largest,
/// the smallest subnormal, underflows to 0), published on both transports:
/// forwarded byte for byte to subscribers on both transports.
#[test]
fn numbers_every_standard_parser_reads_as_finite_are_forwarded_byte_for_byte() {
    let gw = Gateway::start(&[]);
    let mut sub = gw.client();
    sub.subscribe("/f");
    let mut ws_sub = Ws::connect(&gw);
    ws_sub.send_text(r#"{"op":"subscribe","topic":"/f","type":"T"}"#);
    ws_sub.barrier();
    let mut p = gw.client();
    let mut ws_p = Ws::connect(&gw);
    let numbers = [
        "1.7976931348623157e+308",
        "1.7976931348623157e308",
        "1.7976931348623157E+308",
        "-1.7976931348623157e308",
        "1.79769313486231580e308",
        "179.76931348623157e306",
        "5e-324",
        "4.9406564584124654e-324",
        "1e-400",
    ];
    for n in numbers {
        let msg = format!(r#"{{"v":{n}}}"#);
        for on_ws in [false, true] {
            let line = format!(r#"{{"op":"publish","topic":"/f","msg":{msg}}}"#);
            if on_ws {
                ws_p.send_text(&line);
            } else {
                p.send_line(&line);
            }
            let raw = sub.recv_raw(deadline(REPLY));
            assert!(raw.contains(&format!(r#""msg":{msg}"#)), "{raw}");
            let (_, frame) = ws_sub.frame();
            let frame = String::from_utf8_lossy(&frame);
            assert!(frame.contains(&format!(r#""msg":{msg}"#)), "{frame}");
        }
    }
    p.assert_quiet();
    assert!(ws_p.barrier().is_empty(), "no error status");
    assert_eq!(counter(&gw.stats(), "errors.number_out_of_range"), 0);
}

/// The first numbers past the top of the range are refused with the
/// existing error, on both transports, and nothing is delivered.
#[test]
fn numbers_past_the_largest_finite_f64_are_refused() {
    let gw = Gateway::start(&[]);
    let mut sub = gw.client();
    sub.subscribe("/f");
    let mut p = gw.client();
    let mut ws_p = Ws::connect(&gw);
    let max_as_integer = format!("17976931348623157{}", "0".repeat(292));
    let numbers = [
        "1.7976931348623159e308",
        "1e309",
        "-1e309",
        // Rounds to f64::MAX, but serde_json's default parser (roslibrust,
        // any Rust client) computes infinity: it would refuse the frame.
        "1.7976931348623158e308",
        max_as_integer.as_str(),
    ];
    let mut refused = 0;
    for (i, n) in numbers.iter().enumerate() {
        let line = format!(r#"{{"op":"publish","id":{i},"topic":"/f","msg":{{"v":{n}}}}}"#);
        p.send_line(&line);
        let e = p.expect_error(i);
        assert!(
            e["msg"]
                .as_str()
                .is_some_and(|m| m.contains("out of range")),
            "{e}"
        );
        ws_p.send_text(&line);
        let e = ws_p.json();
        assert_eq!(
            (e["level"].as_str(), &e["id"]),
            (Some("error"), &json!(i)),
            "{e}"
        );
        refused += 2;
    }
    assert_eq!(counter(&gw.stats(), "errors.number_out_of_range"), refused);
    sub.assert_quiet();
}

/// A request refused at the door for a value in it keeps its `id` even when
/// the id comes after that value (the protocol: "Include the ID when the
/// triggering request supplied one"), on both transports; a line that is not
/// grammatical JSON has no id to give.
#[test]
fn a_refused_request_keeps_an_id_that_comes_after_the_refused_value() {
    let gw = Gateway::start(&[]);
    let mut sub = gw.client();
    sub.subscribe("/r");
    let mut c = gw.client();
    let mut ws = Ws::connect(&gw);
    let deep = nested(127);
    let cases = [
        ("number_out_of_range", "[1,1e400]"),
        ("number_out_of_range", r#"{"v":1.7976931348623159e308}"#),
        ("lone_surrogate", r#""\ud800""#),
        ("lone_surrogate", r#"{"\udc00":1}"#),
        ("too_deep", deep.as_str()),
    ];
    for (n, (code, msg)) in cases.iter().enumerate() {
        let id = format!("after-{n}");
        // Even the op comes after the refused value.
        let line = format!(r#"{{"topic":"/r","msg":{msg},"op":"publish","id":"{id}"}}"#);
        let before = counter(&gw.stats(), &format!("errors.{code}"));
        c.send_line(&line);
        c.expect_error(id.as_str());
        ws.send_text(&line);
        let e = ws.json();
        assert_eq!(
            (e["level"].as_str(), e["id"].as_str()),
            (Some("error"), Some(id.as_str())),
            "{code}: {e}"
        );
        assert_eq!(
            counter(&gw.stats(), &format!("errors.{code}")),
            before + 2,
            "{code}"
        );
        // Not grammatical: no id.
        let broken = format!(r#"{{"topic":"/r","msg":{msg},"op":"publish","id":"{id}",}}"#);
        c.send_line(&broken);
        c.expect_error_no_id();
    }
    // An id that is itself refused is never echoed, before or after.
    c.send_line(r#"{"op":"publish","topic":"/r","msg":1,"id":"\ud800"}"#);
    c.expect_error_no_id();
    ws.send_text(r#"{"op":"publish","topic":"/r","msg":1,"id":[1e400]}"#);
    let e = ws.json();
    assert_eq!(
        (e["level"].as_str(), e.get("id")),
        (Some("error"), None),
        "{e}"
    );
    sub.assert_quiet();
    assert!(ws.barrier().is_empty());
}

#[test]
fn invalid_websocket_close_codes_are_answered_with_1002() {
    let gw = Gateway::start(&[]);
    for code in [0u16, 999, 1004, 1005, 1006, 1015, 2999, 5000] {
        let mut ws = Ws::connect(&gw);
        ws.send_frame(0x8, true, &code.to_be_bytes());
        let (op, payload) = ws.frame();
        assert_eq!(
            (op, payload.as_slice()),
            (0x8, &1002u16.to_be_bytes()[..]),
            "{code}"
        );
        ws.expect_eof();
    }
    for code in [1000u16, 1001, 3000, 4999] {
        let mut ws = Ws::connect(&gw);
        ws.send_frame(0x8, true, &code.to_be_bytes());
        let (op, payload) = ws.frame();
        assert_eq!(
            (op, payload.as_slice()),
            (0x8, &code.to_be_bytes()[..]),
            "{code}"
        );
        ws.expect_eof();
    }
    gw.client().assert_quiet();
}

#[test]
fn openings_that_never_complete_are_closed_at_the_deadline() {
    let gw = Gateway::start(&["--handshake-timeout-ms", "300"]);
    let mut silent = gw.client();
    let mut trickle = Ws::raw(&gw);
    trickle.s.write_all(b"GET / HTTP/1.1\r\n").expect("send");
    let mut fine = gw.client();
    fine.subscribe("/a");
    let mut ws_fine = Ws::connect(&gw);
    silent.expect_closed(Duration::from_secs(3));
    trickle.expect_eof();
    assert_eq!(counter(&gw.stats(), "closes.handshake_timeout"), 2);
    fine.assert_quiet();
    assert!(ws_fine.barrier().is_empty());
}

#[test]
fn idle_connections_at_the_limit_give_way_to_a_newcomer() {
    let gw = Gateway::start(&["--max-connections", "20"]);
    // One established client, then silent ones up to the limit.
    let mut old = gw.client();
    old.subscribe("/a");
    let silent: Vec<Client> = (0..19).map(|_| gw.client()).collect();
    let mut newcomer = gw.client();
    newcomer.subscribe("/a");
    // (The stats connections themselves evict silent ones too.)
    let st = gw.wait_for_stats("an eviction", |s| counter(s, "closes.evicted") >= 1);
    assert_eq!(counter(&st, "connections_rejected"), 0);
    let mut ws = Ws::connect(&gw);
    assert!(ws.barrier().is_empty(), "a WebSocket newcomer gets in too");
    old.assert_quiet();
    drop(silent);
}

#[test]
fn a_partial_line_cannot_sit_forever() {
    let gw = Gateway::start(&["--partial-timeout-ms", "300"]);
    let mut c = gw.client();
    c.subscribe("/a");
    c.send_raw(br#"{"op":"publish","topic":"/a","msg":"#);
    c.expect_closed(Duration::from_secs(3));
    assert_eq!(counter(&gw.stats(), "closes.partial_timeout"), 1);
    assert_eq!(counter(&gw.stats(), "memory_input_bytes"), 0);
}

#[test]
fn registrations_are_limited_per_connection_on_both_transports() {
    let gw = Gateway::start(&["--max-subscriptions-per-conn", "3"]);
    let mut c = gw.client();
    for t in ["/a", "/b", "/c", "/a"] {
        c.subscribe(t);
    }
    c.send_line(r#"{"op":"subscribe","topic":"/d","type":"T","id":"x"}"#);
    c.expect_error("x");
    let mut ws = Ws::connect(&gw);
    for id in ["1", "2", "3", "4"] {
        ws.send_text(&format!(r#"{{"op":"subscribe","topic":"/a","id":"{id}"}}"#));
    }
    let frames = ws.barrier();
    assert_eq!(frames.len(), 1, "only the fourth id is refused: {frames:?}");
    assert_eq!(frames[0]["id"], "4");
    assert_eq!(counter(&gw.stats(), "errors.too_many_registrations"), 2);
}

#[test]
fn trickle_reading_does_not_pin_control_data() {
    let gw = Gateway::start(&["--control-soft-bytes", "100000", "--control-soft-ms", "500"]);
    let mut slow = Client::connect_small_rcvbuf(&gw, 4096);
    // Error statuses echo the (1000-byte) id: ~1.1 KB each, never read.
    let id = "q".repeat(1000);
    let line = format!("{{\"op\":\"nope\",\"id\":\"{id}\"}}\n");
    let burst = line.repeat(100);
    for _ in 0..100 {
        if slow.try_send_raw(burst.as_bytes()).is_err() {
            break;
        }
    }
    gw.wait_for_stats("a slow-consumer close", |s| {
        counter(s, "closes.slow_consumer") == 1
    });
    gw.client().assert_quiet();
}

#[test]
fn the_memory_budget_sheds_topic_data_then_closes_the_biggest_holder() {
    let gw = Gateway::start(&["--max-memory-bytes", "4000000"]);
    let mut slow = Client::connect_small_rcvbuf(&gw, 4096);
    slow.subscribe("/big");
    let mut fast = gw.client();
    fast.subscribe("/small");
    let mut p = gw.client();
    let big = "b".repeat(60_000);
    for _ in 0..400 {
        p.publish("/big", &format!("\"{big}\""));
    }
    p.publish("/small", "1");
    assert_eq!(fast.recv()["msg"], 1);
    let st = gw.wait_for_stats("topic data shed for memory", |s| {
        counter(s, "dropped_for_memory") > 0
    });
    assert!(counter(&st, "memory_bytes") <= 4_000_000, "{st}");
    assert_eq!(
        counter(&st, "closes.memory_pressure"),
        0,
        "shedding sufficed"
    );
    // Control data cannot be shed: a client that never reads its error
    // statuses is closed once it holds the most.
    let mut hog = Client::connect_small_rcvbuf(&gw, 4096);
    let line = format!("{{\"op\":\"nope\",\"id\":\"{}\"}}\n", "h".repeat(1000)).repeat(200);
    for _ in 0..100 {
        if hog.try_send_raw(line.as_bytes()).is_err() {
            break;
        }
    }
    gw.wait_for_stats("a memory-pressure close", |s| {
        counter(s, "closes.memory_pressure") >= 1
    });
    fast.assert_quiet();
    gw.client().assert_quiet();
}

#[test]
fn sigterm_fails_calls_flushes_and_says_goodbye() {
    let mut gw = Gateway::start(&[]);
    let mut provider = gw.client();
    provider.advertise_service("/never");
    let mut caller = gw.client();
    caller.call("/never", "\"c1\"", "{}");
    provider.expect_forwarded("/never");
    let mut sub = gw.client();
    sub.subscribe("/t");
    let mut ws = Ws::connect(&gw);
    ws.send_text(r#"{"op":"subscribe","topic":"/t","type":"T"}"#);
    ws.barrier();
    let mut p = gw.client();
    for i in 0..1000 {
        p.publish("/t", &i.to_string());
    }
    p.assert_quiet();
    gw.signal(libc::SIGTERM);
    let failure = caller.expect_failure("/never", &json!("c1"));
    assert!(
        failure["values"]
            .as_str()
            .is_some_and(|v| v.contains("shutting down")),
        "{failure}"
    );
    // Every queued message arrives, then the end of the stream.
    let lines = sub.expect_closed(Duration::from_secs(5));
    assert_eq!(lines.len(), 1000);
    let last: Value = serde_json::from_slice(&lines[999]).expect("JSON");
    assert_eq!(last["msg"], 999);
    let mut got = 0;
    loop {
        let (op, payload) = ws.frame();
        if op == 0x8 {
            assert_eq!(payload, 1001u16.to_be_bytes(), "going away");
            break;
        }
        got += 1;
    }
    assert_eq!(got, 1000);
    let st = gw.wait_exit(Duration::from_secs(5)).expect("exits");
    assert_eq!(st.code(), Some(0));
}
