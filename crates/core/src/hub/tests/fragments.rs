//! Client fragments (`hub/fragments.rs`) on the fake clock: reassembly on
//! both transports, each refusal, the deadline, and the memory ledger.

use rosgate_wire::fragment::{self, MESSAGE_OVERHEAD, PIECE_OVERHEAD};
use rosgate_wire::Raw;

use super::*;

/// The `fragment` lines of `text` cut into pieces of `size` characters.
fn pieces(text: &str, size: usize, id: &str) -> Vec<String> {
    fragment::split(text, size)
        .expect("long enough to split")
        .map(|p| {
            let mut f = Vec::new();
            p.write(&mut f, Raw::from_valid_json(id));
            String::from_utf8(f).expect("UTF-8").trim_end().to_owned()
        })
        .collect()
}

fn piece(id: &str, data: &str, num: u64, total: u64) -> String {
    let data = serde_json::to_string(data).expect("a string");
    format!(r#"{{"op":"fragment","id":{id},"data":{data},"num":{num},"total":{total}}}"#)
}

/// A subscriber of `/f`, its queue read.
fn subscriber(t: &mut T) -> u32 {
    let s = t.open();
    t.send(s, r#"{"op":"subscribe","topic":"/f","type":"T"}"#);
    t.recv(s);
    s
}

fn big_publish() -> String {
    format!(
        r#"{{"op":"publish","topic":"/f","msg":{{"data":"{}\"é水"}}}}"#,
        "x".repeat(700)
    )
}

fn errors(t: &T) -> u64 {
    t.hub.counters().errors_of(ErrorCode::BadFragment)
}

#[test]
fn pieces_in_any_order_make_one_request_on_both_transports() {
    let mut t = T::new(Limits::default());
    let s = subscriber(&mut t);
    let text = big_publish();
    let mut f = pieces(&text, 256, "\"m1\"");
    assert_eq!(f.len(), 3);
    f.swap(0, 2);
    let p = t.open();
    for line in &f {
        t.send(p, line);
    }
    assert!(t.recv(p).is_empty(), "no status for pieces taken");
    let got = t.one(s);
    assert_eq!(got["msg"]["data"], format!("{}\"é水", "x".repeat(700)));
    // The same over WebSocket, one piece per frame.
    let w = t.open_ws();
    for line in pieces(&text, 300, "7") {
        t.ws_send(w, &line);
    }
    assert!(t.ws_recv(w).is_empty());
    assert_eq!(t.one(s)["msg"], got["msg"]);
    let c = t.hub.counters();
    assert_eq!(c.get(Counter::FragmentsIn), 6);
    assert_eq!(c.get(Counter::FragmentedIn), 2);
    assert_eq!(t.hub.memory().input, 0, "nothing held once complete");
}

#[test]
fn each_refusal_names_the_id_and_delivers_nothing() {
    let cases: &[(&[(u64, u64)], &str)] = &[
        (&[(0, 3), (3, 3)], "not below total"),
        (&[(0, 3), (1, 4)], "total differs"),
        (&[(0, 3), (0, 3)], "arrived twice"),
        (&[(0, 0)], "total is 0"),
    ];
    for (sent, why) in cases {
        let mut t = T::new(Limits::default());
        let s = subscriber(&mut t);
        let other = t.open();
        let text = big_publish();
        let whole = pieces(&text, 256, "\"a\"");
        let p = t.open();
        let (last, first) = sent.split_last().expect("one piece at least");
        for &(num, total) in first {
            t.send(p, &piece("\"a\"", "{", num, total));
        }
        t.send(p, &piece("\"a\"", "x", last.0, last.1));
        let e = t.one(p);
        assert_eq!((&e["level"], &e["id"]), (&"error".into(), &"a".into()));
        let msg = e["msg"].as_str().expect("text");
        assert!(msg.contains(why), "{why}: {msg}");
        assert_eq!(errors(&t), 1);
        // The message is failed: a complete valid set under its id is
        // refused until the deadline, each piece with an error.
        for line in &whole {
            t.send(p, line);
        }
        assert_eq!(t.recv(p).len(), whole.len());
        assert!(t.recv(s).is_empty(), "{why}: nothing delivered");
        // Another client's fragments under the same id are its own.
        for line in &whole {
            t.send(other, line);
        }
        assert!(t.recv(other).is_empty());
        assert_eq!(t.recv(s).len(), 1, "{why}: the other client's message");
        // The deadline frees the failed id.
        t.advance(fragment::FRAGMENT_TIMEOUT_MS);
        assert!(
            t.recv(p).is_empty(),
            "a failed message is not reported again"
        );
        for line in &whole {
            t.send(p, line);
        }
        assert_eq!(t.recv(s).len(), 1, "{why}: the id is free again");
        assert_eq!(t.hub.memory().input, 0);
    }
}

#[test]
fn too_large_and_too_many_are_refused_within_their_bounds() {
    let mut t = T::new(Limits {
        max_line_bytes: 4_096,
        ..Limits::default()
    });
    let p = t.open();
    // Too large: the pieces together pass the line limit.
    t.send(p, &piece("1", &"x".repeat(3_000), 0, 2));
    assert!(t.recv(p).is_empty());
    t.send(p, &piece("1", &"x".repeat(1_000), 1, 2));
    let e = t.one(p);
    assert_eq!(e["id"], 1);
    assert!(e["msg"].as_str().is_some_and(|m| m.contains("line limit")));
    assert_eq!(
        t.hub.memory().input,
        0,
        "a failed message's pieces are freed"
    );
    // Too many: MAX_FRAGMENTED_IN_FLIGHT messages at once, the next refused.
    let q = t.open();
    for i in 0..fragment::MAX_FRAGMENTED_IN_FLIGHT {
        t.send(q, &piece(&i.to_string(), "{", 0, 2));
    }
    assert!(t.recv(q).is_empty());
    t.send(q, &piece("\"more\"", "{", 0, 2));
    let e = t.one(q);
    assert_eq!(e["id"], "more");
    assert!(e["msg"].as_str().is_some_and(|m| m.contains("in flight")));
    assert_eq!(errors(&t), 2);
    // A fragment inside a fragmented message is refused.
    let inner = piece("\"in\"", "{}", 0, 1);
    t.send(p, &piece("\"out\"", &inner, 0, 1));
    let e = t.one(p);
    assert_eq!(e["id"], "in");
    assert!(e["msg"].as_str().is_some_and(|m| m.contains("may not")));
}

#[test]
fn the_deadline_drops_a_partial_message_and_tells_its_sender() {
    let mut t = T::new(Limits {
        fragment_timeout: Duration::from_millis(500),
        ..Limits::default()
    });
    let s = subscriber(&mut t);
    let f = pieces(&big_publish(), 256, "\"slow\"");
    let p = t.open();
    t.send(p, &f[0]);
    t.send(p, &f[1]);
    let held = t.hub.memory().input;
    let data: usize = f[..2]
        .iter()
        .map(|l| {
            serde_json::from_str::<Value>(l).expect("JSON")["data"]
                .as_str()
                .expect("data")
                .len()
        })
        .sum();
    assert_eq!(
        held,
        MESSAGE_OVERHEAD + "\"slow\"".len() + data + 2 * PIECE_OVERHEAD
    );
    assert_eq!(
        t.hub.conn(p).expect("open").input_held(),
        held,
        "charged to its sender"
    );
    assert!(t.hub.next_deadline() <= t.now + Duration::from_millis(500));
    t.advance(499);
    assert!(t.recv(p).is_empty());
    t.advance(1);
    let e = t.one(p);
    assert_eq!((&e["level"], &e["id"]), (&"error".into(), &"slow".into()));
    assert!(e["msg"].as_str().is_some_and(|m| m.contains("500 ms")));
    assert_eq!(t.hub.counters().get(Counter::FragmentsExpired), 1);
    assert_eq!(t.hub.memory().input, 0);
    // The last piece, late, starts a new message that never completes.
    t.send(p, &f[2]);
    assert!(t.recv(s).is_empty());
    // A connection that leaves with pieces held leaves the ledger clean.
    t.send(p, &piece("9", "abc", 0, 5));
    assert!(t.hub.memory().input > 0);
    t.hub.close(p, CloseReason::PeerClosed, t.now);
    t.free_closed();
    t.advance(1_000);
    assert_eq!(t.hub.memory().input, 0);
}

#[test]
fn partial_fragments_count_for_the_memory_budget_of_their_sender() {
    let mut t = T::new(Limits {
        max_memory_bytes: 64 * 1024,
        ..Limits::default()
    });
    let quiet = t.open();
    t.send(quiet, r#"{"op":"subscribe","topic":"/q","type":"T"}"#);
    t.recv(quiet);
    let hog = t.open();
    for num in 0..3 {
        t.send(hog, &piece("\"h\"", &"x".repeat(20_000), num, 10));
    }
    assert!(t.hub.memory().input >= 60_000);
    assert!(t.hub.conn(hog).is_some(), "within the budget so far");
    t.send(hog, &piece("\"h\"", &"x".repeat(20_000), 3, 10));
    t.free_closed();
    assert!(t.hub.conn(hog).is_none(), "the biggest holder is closed");
    assert_eq!(t.hub.counters().closes_of(CloseReason::MemoryPressure), 1);
    assert!(t.hub.conn(quiet).is_some());
    assert_eq!(t.hub.memory().input, 0, "its pieces left the ledger");
}
