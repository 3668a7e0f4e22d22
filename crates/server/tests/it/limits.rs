//! Limits. Every test checks: the error (if any), whether the connection closed, the counter,
//! and liveness afterwards (a fresh client is still served).

use crate::support::*;
use serde_json::{json, Value};
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn assert_fresh_client_served(gw: &Gateway) {
    let mut f = gw.client();
    f.subscribe("/liveness");
    f.assert_quiet();
}

#[test]
fn long_line_is_refused_before_its_newline_arrives() {
    let gw = Gateway::start(&["--max-line-bytes", "1024"]);
    let mut sub = gw.client();
    sub.subscribe("/t");
    let base = gw.stats();
    let mut c = gw.client();
    let mut head = br#"{"op":"publish","topic":"/t","msg":""#.to_vec();
    head.extend_from_slice(&vec![b'a'; 1 << 20]);
    c.send_raw(&head);
    // The error must arrive while the newline has not been sent yet.
    let e = c.recv_json(deadline(REPLY));
    assert_status(&e, "error", None);
    // Finish the line; its tail is discarded, with no second error.
    c.send_raw(b"aaaa\"}\n");
    c.subscribe("/after"); // next line is exactly the info reply: the connection is open
    c.assert_quiet();
    sub.assert_quiet(); // nothing of the long line was published
    let s = gw.stats();
    assert_eq!(
        counter(&s, "errors.too_long"),
        counter(&base, "errors.too_long") + 1,
        "{s}"
    );
    assert_eq!(total_errors(&s), total_errors(&base) + 1, "{s}");
    assert_eq!(
        counter(&s, "connections_open"),
        counter(&base, "connections_open") + 1,
        "{s}"
    );
    assert_fresh_client_served(&gw);
}

#[test]
fn long_line_in_two_halves_and_followed_by_requests_in_same_write() {
    let gw = Gateway::start(&["--max-line-bytes", "1024"]);
    let mut c = gw.client();
    // Two halves, each under the limit, together over it: refused before the newline.
    let body = format!(
        r#"{{"op":"subscribe","topic":"/{}","type":"x","id":"big"}}"#,
        "x".repeat(1200)
    );
    let (a, b) = body.as_bytes().split_at(600);
    c.send_raw(a);
    match c.try_recv_line(deadline(Duration::from_millis(200))) {
        Recv::Timeout => {}
        other => panic!("600 bytes are under the limit, nothing may come yet: {other:?}"),
    }
    c.send_raw(b);
    c.expect_error_no_id();
    c.send_raw(b"\n");
    c.assert_quiet();
    // Whole: an oversized line, then a normal one, in one write.
    let mut batch = body.clone().into_bytes();
    batch.extend_from_slice(b"\n");
    batch.extend_from_slice(br#"{"op":"subscribe","topic":"/ok","type":"x","id":"ok"}"#);
    batch.extend_from_slice(b"\n");
    c.send_raw(&batch);
    c.expect_error_no_id();
    c.expect_info("ok");
    c.assert_quiet();
    // A line comfortably under the limit is accepted.
    let fine = format!(
        r#"{{"op":"subscribe","topic":"/{}","type":"x","id":"fine"}}"#,
        "y".repeat(900)
    );
    assert!(fine.len() < 1000);
    c.send_line(&fine);
    c.expect_info("fine");
    let s = gw.stats();
    assert_eq!(counter(&s, "errors.too_long"), 2, "{s}");
    assert_fresh_client_served(&gw);
}

fn frame(topic: &str, seq: u64, pad: &str) -> String {
    format!("{{\"op\":\"publish\",\"topic\":\"{topic}\",\"msg\":{{\"seq\":{seq},\"pad\":\"{pad}\"}}}}\n")
}

#[test]
fn slow_consumer_gets_topic_data_dropped_not_closed() {
    const IMG: u64 = 2000; // 2000 x 10 KB = 20 MB of images
    const EVERY: u64 = 100; // one small /state frame per 100 images
    const TAIL: u64 = 100; // the last 100 images (1 MB > the 256 KB queue) follow the last state
    const WINDOW: u64 = 12; // frames the reading subscriber may lag: ~120 KB < its 256 KB queue
    let gw = Gateway::start(&["--max-queue-bytes", "262144"]);
    let base = gw.stats();

    let mut slow = Client::connect_small_rcvbuf(&gw, 4096);
    slow.subscribe("/img");
    slow.subscribe("/state");
    let mut fast = gw.client();
    fast.subscribe("/img");
    fast.subscribe("/state");
    let is_state_slot = |i: u64| i % EVERY == EVERY / 2 && i < IMG - TAIL;
    let states = (0..IMG).filter(|&i| is_state_slot(i)).count() as u64;

    // The reading subscriber counts what it has parsed; the publisher never gets more than
    // WINDOW frames ahead of it, so this subscriber is never "slow" even on a loaded machine.
    let seen = Arc::new(AtomicU64::new(0));
    let seen_r = seen.clone();
    let reader = spawn(move || {
        let mut img = 0u64;
        let mut st = 0u64;
        let dl = deadline(Duration::from_secs(40));
        while img < IMG || st < states {
            let v = fast.recv_json(dl);
            let seq = v["msg"]["seq"].as_u64().expect("seq");
            match v["topic"].as_str() {
                Some("/img") => {
                    assert_eq!(seq, img, "reading subscriber: /img out of order or missing");
                    img += 1;
                }
                Some("/state") => {
                    assert_eq!(
                        seq, st,
                        "reading subscriber: /state out of order or missing"
                    );
                    st += 1;
                }
                _ => panic!("unexpected frame {v}"),
            }
            seen_r.fetch_add(1, Ordering::Release);
        }
        fast
    });

    let mut publisher = gw.client();
    let pad = "p".repeat(10 * 1024);
    let mut s = 0u64;
    let mut sent = 0u64;
    let mut batch = String::new();
    let pace_dl = deadline(Duration::from_secs(40));
    for i in 0..IMG {
        batch.push_str(&frame("/img", i, &pad));
        sent += 1;
        if is_state_slot(i) {
            batch.push_str(&frame("/state", s, "s"));
            s += 1;
            sent += 1;
        }
        if batch.len() >= 60 * 1024 {
            publisher.send_raw(batch.as_bytes());
            batch.clear();
            while seen.load(Ordering::Acquire) + WINDOW < sent {
                assert!(
                    !reader.is_finished() && Instant::now() < pace_dl,
                    "reading subscriber stalled at {} of {sent}",
                    seen.load(Ordering::Acquire)
                );
                std::thread::sleep(Duration::from_micros(200));
            }
        }
    }
    publisher.send_raw(batch.as_bytes());
    // The publisher is answered promptly even while a subscriber is stuck.
    let t0 = Instant::now();
    publisher.subscribe("/prompt");
    assert!(
        t0.elapsed() < Duration::from_secs(2),
        "publisher reply took {:?}",
        t0.elapsed()
    );

    let mut fast = reader
        .join()
        .expect("reading subscriber got every message in order");
    fast.assert_quiet();

    let st = gw.stats();
    assert!(
        counter(&st, "dropped") > 0,
        "nothing dropped for the stuck subscriber: {st}"
    );
    assert_eq!(counter(&st, "closes.control_overflow"), 0, "{st}");
    assert_eq!(counter(&st, "closes.write_stall"), 0, "{st}");
    assert_eq!(
        counter(&st, "connections_open"),
        counter(&base, "connections_open") + 3,
        "slow consumer must not be closed: {st}"
    );

    // Drain the slow consumer: whole frames, in order, newest images kept, and the small
    // /state topic not starved by the image stream (its few bytes are far below a fair share,
    // so none of its frames may be shed).
    let mut last_img: Option<u64> = None;
    let mut states_got = Vec::new();
    let mut n_img = 0u64;
    let dl = deadline(Duration::from_secs(10));
    while last_img != Some(IMG - 1) {
        let l = match slow.try_recv_line(dl) {
            Recv::Line(l) => l,
            other => panic!(
                "slow consumer stopped at img {last_img:?} ({n_img} frames), states {states_got:?}: {other:?}"
            ),
        };
        let v = parse_line(&String::from_utf8_lossy(&l));
        let seq = v["msg"]["seq"].as_u64().expect("seq");
        match v["topic"].as_str() {
            Some("/img") => {
                if let Some(p) = last_img {
                    assert!(seq > p, "/img out of order: {seq} after {p}");
                }
                last_img = Some(seq);
                n_img += 1;
            }
            Some("/state") => states_got.push(seq),
            _ => panic!("unexpected frame {v}"),
        }
    }
    assert!(n_img < IMG, "nothing was dropped for the slow consumer");
    slow.assert_quiet();
    assert_eq!(
        states_got,
        (0..states).collect::<Vec<_>>(),
        "small topic starved by the big one (kept {n_img} of {IMG} images)"
    );
    slow.subscribe("/still-open");

    drop(slow);
    drop(fast);
    drop(publisher);
    gw.wait_for_stats("back to baseline", |s| {
        [
            "connections_open",
            "subscriptions",
            "topics",
            "calls_pending",
        ]
        .iter()
        .all(|k| counter(s, k) == counter(&base, k))
    });
}

#[test]
fn control_overflow_closes_only_that_connection() {
    let gw = Gateway::start(&["--max-control-bytes", "65536"]);
    let mut other = gw.client();
    other.subscribe("/other");
    let base = gw.stats();
    let mut slow = Client::connect_small_rcvbuf(&gw, 4096);
    slow.barrier();
    let mut w = slow.stream.try_clone().unwrap();
    w.set_write_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let writer = spawn(move || {
        // Each request earns a ~2 KB status reply that the client never reads.
        let id = "i".repeat(2000);
        let line = format!(r#"{{"op":"unsubscribe","topic":"/x","id":"{id}"}}"#) + "\n";
        let batch = line.repeat(32).into_bytes();
        let mut sent = 0usize;
        let mut off = 0usize;
        while !stop2.load(Ordering::Relaxed) && sent < 256 << 20 {
            match w.write(&batch[off..]) {
                Ok(0) => break,
                Ok(n) => {
                    sent += n;
                    off = (off + n) % batch.len();
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(_) => break,
            }
        }
        sent
    });
    let s = gw.wait_for_stats_within("control_overflow close", Duration::from_secs(20), |s| {
        counter(s, "closes.control_overflow") >= 1
    });
    stop.store(true, Ordering::Relaxed);
    let sent = writer.join().unwrap();
    assert_eq!(counter(&s, "closes.control_overflow"), 1, "{s}");
    assert_eq!(counter(&s, "closes.write_stall"), 0, "{s}");
    assert!(sent > 0);
    // The connection really is closed.
    slow.expect_closed(Duration::from_secs(10));
    // Others unaffected, fresh clients served, nothing leaked.
    let mut p = gw.client();
    p.publish("/other", "1");
    assert_eq!(other.recv()["msg"], 1);
    assert_fresh_client_served(&gw);
    gw.wait_for_stats("back to baseline", |s| {
        counter(s, "connections_open") == counter(&base, "connections_open") + 1
    });
}

#[test]
fn write_stall_closes_a_stuck_connection() {
    let gw = Gateway::start(&["--write-stall-ms", "500", "--max-queue-bytes", "1048576"]);
    let base = gw.stats();
    let mut slow = Client::connect_small_rcvbuf(&gw, 4096);
    slow.subscribe("/flood");
    let mut publisher = gw.client();
    let pad = "w".repeat(16 * 1024);
    let mut batch = String::new();
    for i in 0..300 {
        batch.push_str(&frame("/flood", i, &pad));
    }
    publisher.send_raw(batch.as_bytes());
    let t0 = Instant::now();
    let s = gw.wait_for_stats("write_stall close", |s| {
        counter(s, "closes.write_stall") >= 1
    });
    assert!(t0.elapsed() < Duration::from_secs(8));
    assert_eq!(counter(&s, "closes.write_stall"), 1, "{s}");
    assert_eq!(counter(&s, "closes.control_overflow"), 0, "{s}");
    slow.expect_closed(Duration::from_secs(10));
    publisher.subscribe("/pub-still-served");
    publisher.assert_quiet();
    assert_fresh_client_served(&gw);
    drop(publisher);
    gw.wait_for_stats("back to baseline", |s| {
        counter(s, "connections_open") == counter(&base, "connections_open")
            && counter(s, "subscriptions") == counter(&base, "subscriptions")
    });
}

#[test]
fn idle_connection_is_not_closed_by_write_stall() {
    let gw = Gateway::start(&["--write-stall-ms", "200"]);
    let mut c = gw.client();
    c.subscribe("/idle");
    // Time must pass for this test to mean anything: nothing is pending, so no close.
    std::thread::sleep(Duration::from_millis(700));
    c.assert_quiet();
    let mut p = gw.client();
    p.publish("/idle", "1");
    assert_eq!(c.recv()["msg"], 1);
    let s = gw.stats();
    assert_eq!(counter(&s, "closes.write_stall"), 0, "{s}");
}

#[test]
fn connections_beyond_max_get_error_and_close() {
    let gw = Gateway::start(&["--max-connections", "3"]);
    let mut c1 = gw.client();
    let mut c2 = gw.client();
    let mut c3 = gw.client();
    for c in [&mut c1, &mut c2, &mut c3] {
        c.barrier();
    }
    let mut extra = gw.client();
    let line = match extra.try_recv_line(deadline(REPLY)) {
        Recv::Line(l) => l,
        other => panic!("rejected connection got no error line: {other:?}"),
    };
    let v = parse_line(&String::from_utf8_lossy(&line));
    assert_status(&v, "error", None);
    let rest = extra.expect_closed(Duration::from_secs(5));
    assert!(
        rest.is_empty(),
        "more than one line to a rejected connection: {rest:?}"
    );
    // Counters, asked on an admitted connection.
    let s = c1.stats();
    assert_eq!(counter(&s, "connections_rejected"), 1, "{s}");
    assert_eq!(counter(&s, "closes.max_connections"), 1, "{s}");
    assert_eq!(counter(&s, "connections_open"), 3, "{s}");
    // Admitted connections unaffected.
    c2.barrier();
    c3.barrier();
    // Liveness: once a slot frees, a fresh client is served.
    drop(c3);
    let dl = deadline(Duration::from_secs(10));
    loop {
        let s = c1.stats();
        if counter(&s, "connections_open") == 2 {
            break;
        }
        assert!(Instant::now() < dl, "closed slot never freed: {s}");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_fresh_client_served(&gw);
}

#[test]
fn too_many_calls_in_flight_fail_immediately() {
    let gw = Gateway::start(&["--max-calls-per-conn", "3", "--call-timeout-ms", "20000"]);
    let mut p = gw.client();
    p.advertise_service("/busy");
    let mut c = gw.client();
    for i in 1..=4 {
        c.call("/busy", &i.to_string(), &format!("{{\"i\":{i}}}"));
    }
    let t0 = Instant::now();
    c.expect_failure("/busy", &json!(4));
    assert!(t0.elapsed() < Duration::from_secs(2));
    let fwds: Vec<Value> = (0..3).map(|_| p.expect_forwarded("/busy")).collect();
    let args: Vec<Value> = fwds.iter().map(|f| f["args"]["i"].clone()).collect();
    assert_eq!(args, vec![json!(1), json!(2), json!(3)]);
    p.assert_quiet();
    c.assert_quiet(); // the connection stays open
    let s = gw.stats();
    assert_eq!(counter(&s, "calls_failed_too_many"), 1, "{s}");
    assert_eq!(counter(&s, "calls_pending"), 3, "{s}");
    // The limit is per connection: another caller is served.
    let mut c2 = gw.client();
    c2.call("/busy", r#""other""#, "{}");
    let f = p.expect_forwarded("/busy");
    p.respond("/busy", &f["id"].to_string(), "0", "true");
    c2.expect_response("/busy", &json!("other"));
    // Answering one frees a slot.
    p.respond("/busy", &fwds[0]["id"].to_string(), r#""one""#, "true");
    assert_eq!(c.expect_response("/busy", &json!(1))["values"], "one");
    c.call("/busy", "5", "{}");
    let f5 = p.expect_forwarded("/busy");
    p.respond("/busy", &f5["id"].to_string(), r#""five""#, "true");
    assert_eq!(c.expect_response("/busy", &json!(5))["values"], "five");
    assert_fresh_client_served(&gw);
}

#[test]
fn a_client_stalled_mid_line_does_not_block_others() {
    let gw = Gateway::start(&[]);
    let mut stalled = gw.client();
    stalled.send_raw(br#"{"op":"subscribe","topic":"/half","#);
    let mut sub = gw.client();
    let mut publisher = gw.client();
    sub.subscribe("/live");
    for i in 0..50 {
        publisher.publish("/live", &i.to_string());
    }
    for i in 0..50 {
        assert_eq!(sub.recv()["msg"], i);
    }
    let s = gw.stats();
    assert_eq!(counter(&s, "connections_open"), 4, "{s}");
    // The stalled client finishes its line and is served.
    stalled.send_raw(b"\"type\":\"x\",\"id\":\"h\"}\n");
    stalled.expect_info("h");
}
