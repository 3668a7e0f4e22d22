//! Answers and clean-ups that walk a table, on the fake clock: each does
//! bounded work per call or per turn, and what is left goes on in the next
//! call (a page's cursor) or the next turns (a residual queue).

use super::*;
use crate::hub::rosapi::TOPIC_STATS_PAGE;

/// `caller` calls `/rosgate/topic_stats` with `args` and gets its values.
fn topic_stats(t: &mut T, caller: u32, args: &str) -> Value {
    t.send(
        caller,
        &format!(
            r#"{{"op":"call_service","service":"/rosgate/topic_stats","id":"ts","args":{args}}}"#
        ),
    );
    let r = t.one(caller);
    assert_eq!(r["result"], true, "{r}");
    r["values"].clone()
}

#[test]
fn topic_stats_is_paged_and_a_walk_sees_every_topic_once_in_order() {
    const N: usize = 2 * TOPIC_STATS_PAGE + 500;
    let mut t = T::new(Limits::default());
    let holder = t.open();
    let mut blob = String::new();
    for k in 0..N {
        blob.push_str(&format!(
            "{{\"op\":\"subscribe\",\"topic\":\"/t/{k:05}\",\"type\":\"T\"}}\n"
        ));
    }
    t.hub.on_bytes(holder, blob.as_bytes(), t.now);
    t.recv(holder);
    let caller = t.open();

    let mut seen: Vec<String> = Vec::new();
    let mut args = "{}".to_string();
    let mut pages = 0;
    loop {
        let before = t.hub.counters().get(Counter::IntrospectionItems);
        let v = topic_stats(&mut t, caller, &args);
        let spent = t.hub.counters().get(Counter::IntrospectionItems) - before;
        let page = v["topics"].as_array().expect("topics");
        assert!(
            page.len() <= TOPIC_STATS_PAGE,
            "a reply lists at most one page: {} topics",
            page.len()
        );
        assert!(
            spent <= MAX_LIST_SCAN as u64,
            "a page looks at {spent} names"
        );
        assert_eq!(page[0]["subscribers"], 1, "{}", page[0]);
        seen.extend(
            page.iter()
                .map(|e| e["topic"].as_str().expect("name").to_string()),
        );
        pages += 1;
        match v.get("next").and_then(Value::as_str) {
            Some(next) => {
                assert_eq!(Some(next), seen.last().map(String::as_str));
                args = serde_json::json!({ "after": next }).to_string();
            }
            None => break,
        }
        assert!(pages < 10, "the walk never ended");
    }
    assert_eq!(pages, 3);
    let want: Vec<String> = (0..N).map(|k| format!("/t/{k:05}")).collect();
    assert_eq!(seen, want, "every topic once, sorted");

    // A smaller page on request; a bigger one is capped.
    let v = topic_stats(&mut t, caller, r#"{"limit":10,"after":"/t/00100"}"#);
    let names: Vec<&str> = v["topics"]
        .as_array()
        .expect("topics")
        .iter()
        .filter_map(|e| e["topic"].as_str())
        .collect();
    assert_eq!(names.first(), Some(&"/t/00101"));
    assert_eq!(names.len(), 10);
    assert_eq!(v["next"], "/t/00110");
    let v = topic_stats(&mut t, caller, r#"{"limit":1000000}"#);
    assert_eq!(v["topics"].as_array().map(Vec::len), Some(TOPIC_STATS_PAGE));
}

#[test]
fn a_server_leaving_with_thousands_of_goals_fails_them_a_batch_per_turn() {
    const GOALS: usize = 4099;
    let mut t = T::new(Limits {
        max_goals_per_server: 2 * GOALS,
        max_goals_per_conn: 2 * GOALS,
        ..Limits::default()
    });
    let server = t.open();
    t.send(
        server,
        r#"{"op":"advertise_action","action":"/a","type":"x/action/T"}"#,
    );
    t.recv(server);
    let callers = [t.open(), t.open()];
    for k in 0..GOALS {
        let c = callers[k % 2];
        t.send(
            c,
            &format!(
                r#"{{"op":"send_action_goal","id":{k},"action":"/a","action_type":"x/action/T","args":{{}}}}"#
            ),
        );
    }
    assert_eq!(t.recv(server).len(), GOALS);
    assert!(t.hub.memory().calls > 0);

    t.hub.close(server, CloseReason::PeerClosed, t.now);
    t.free_closed();
    let mut ids: Vec<u64> = Vec::new();
    let mut turns = 0;
    loop {
        let mut got = 0;
        for &c in &callers {
            for r in t.recv(c) {
                assert_eq!(r["op"], "action_result", "{r}");
                assert_eq!(r["result"], false, "{r}");
                ids.push(r["id"].as_u64().expect("id"));
                got += 1;
            }
        }
        assert!(
            got <= GONE_FAILS_PER_TURN,
            "{got} failures in one turn (at most {GONE_FAILS_PER_TURN})"
        );
        if ids.len() == GOALS {
            break;
        }
        assert!(
            t.hub.inspect().has_expire_backlog(),
            "failures left, the loop must not sleep"
        );
        turns += 1;
        assert!(turns < 100, "failures stopped at {}", ids.len());
        t.advance(0);
    }
    assert!(
        turns > 1,
        "spread over turns, not sent at once ({turns} more turns)"
    );
    assert!(turns >= GOALS / GONE_FAILS_PER_TURN, "{turns} more turns");
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), GOALS, "each goal ended exactly once");
    assert_eq!(t.hub.inspect().failing(), 0);
    assert_eq!(
        t.hub.memory().calls,
        0,
        "the residual's bytes left the ledger"
    );
    assert_eq!(
        t.hub.counters().get(Counter::GoalsFailedServerGone),
        GOALS as u64
    );
    assert!(!t.hub.inspect().has_expire_backlog());
}

/// `GET /metrics` on a fresh WebSocket-port connection: the body.
fn scrape(t: &mut T) -> String {
    let key = t
        .hub
        .open_as(crate::transport::Transport::WebSocket, t.now)
        .expect("admitted")
        .key;
    t.hub
        .on_bytes(key, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", t.now);
    let mut bytes = Vec::new();
    while let Some(out) = t.hub.out(key).filter(|o| !o.is_empty()) {
        let mut iov = [IoSlice::new(&[]); MAX_IOVECS];
        let n = out.fill(&mut iov, usize::MAX);
        let mut w = 0;
        for s in &iov[..n] {
            bytes.extend_from_slice(s);
            w += s.len();
        }
        t.hub.wrote(key, w, t.now);
    }
    let text = String::from_utf8(bytes).expect("utf-8");
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    text
}

/// The value of the sample `name` in an exposition.
fn sample(text: &str, name: &str) -> String {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("{name} missing"))
        .to_string()
}

#[test]
fn the_scrapes_of_one_turn_share_one_metrics_rendering() {
    let mut t = T::new(Limits::default());
    let first = scrape(&mut t);
    let second = scrape(&mut t);
    assert_eq!(sample(&first, "rosgate_http_requests_total"), "1");
    assert_eq!(
        first, second,
        "the second scrape of the turn is answered with the turn's rendering"
    );
    assert_eq!(t.hub.counters().get(Counter::HttpRequests), 2);
    // The next turn renders afresh: nothing older than a turn is shown.
    t.advance(0);
    let third = scrape(&mut t);
    assert_eq!(sample(&third, "rosgate_http_requests_total"), "3");
}

/// `caller` calls rosapi `name` with `args` and gets its values.
fn rosapi(t: &mut T, caller: u32, name: &str, args: &str) -> Value {
    t.send(
        caller,
        &format!(r#"{{"op":"call_service","service":"/rosapi/{name}","id":"r","args":{args}}}"#),
    );
    let r = t.one(caller);
    assert_eq!(r["result"], true, "{r}");
    r["values"].clone()
}

#[test]
fn rosapi_topic_lists_are_sorted_capped_and_charged_per_name() {
    let mut t = T::new(Limits::default());
    let holder = t.open();
    let mut blob = String::new();
    for k in 0..MAX_LIST_ITEMS + 5 {
        let ty = if k % 2 == 0 { "even/T" } else { "odd/T" };
        blob.push_str(&format!(
            "{{\"op\":\"subscribe\",\"topic\":\"/l/{k:05}\",\"type\":\"{ty}\"}}\n"
        ));
    }
    // A client's type for a gateway topic does not replace the gateway's.
    blob.push_str("{\"op\":\"subscribe\",\"topic\":\"/rosout\",\"type\":\"other/Log\"}\n");
    blob.push_str("{\"op\":\"subscribe\",\"topic\":\"/_hidden\",\"type\":\"h/T\"}\n");
    // Two holders: one may subscribe 10 000 topics.
    let other = t.open();
    let (a, b) = blob.split_at(blob.len() / 2);
    let cut = b.find('\n').map_or(0, |i| i + 1);
    let (a, b) = (format!("{a}{}", &b[..cut]), &b[cut..]);
    t.hub.on_bytes(holder, a.as_bytes(), t.now);
    t.hub.on_bytes(other, b.as_bytes(), t.now);
    assert!(t
        .recv(holder)
        .iter()
        .chain(t.recv(other).iter())
        .all(|s| s["level"] != "error"));
    let caller = t.open();

    let before = t.hub.counters().get(Counter::IntrospectionItems);
    let v = rosapi(&mut t, caller, "topics", "{}");
    let topics: Vec<&str> = v["topics"]
        .as_array()
        .expect("topics")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let types = v["types"].as_array().expect("types");
    assert_eq!(topics.len(), types.len());
    assert!(topics.len() <= MAX_LIST_ITEMS + GATEWAY_TOPICS.len());
    assert_eq!(v["truncated"], true, "more topics than one list holds");
    assert!(topics.windows(2).all(|w| w[0] < w[1]), "sorted, no repeats");
    assert!(!topics.contains(&"/_hidden"));
    let rosout = topics
        .iter()
        .position(|n| *n == "/rosout")
        .expect("/rosout");
    assert_eq!(types[rosout], "rcl_interfaces/msg/Log");
    let first = topics
        .iter()
        .position(|n| *n == "/l/00000")
        .expect("/l/00000");
    assert_eq!(
        (types[first].as_str(), types[first + 1].as_str()),
        (Some("even/T"), Some("odd/T"))
    );
    let spent = t.hub.counters().get(Counter::IntrospectionItems) - before;
    assert_eq!(
        spent,
        topics.len() as u64,
        "each name listed is charged as work"
    );

    let v = rosapi(
        &mut t,
        caller,
        "topics_and_raw_types",
        r#"{"include_hidden":true}"#,
    );
    let n = v["topics"].as_array().map_or(0, Vec::len);
    assert_eq!(v["typedefs_full_text"].as_array().map(Vec::len), Some(n));
    assert!(v["topics"]
        .as_array()
        .is_some_and(|a| a.iter().any(|x| x == "/_hidden")));
    let v = rosapi(&mut t, caller, "topics_for_type", r#"{"type":"odd/T"}"#);
    let odd = v["topics"].as_array().expect("topics");
    assert!(!odd.is_empty() && odd.len() < n);
    assert_eq!(odd[0], "/l/00001");
    let v = rosapi(&mut t, caller, "interfaces", "{}");
    let all = v["interfaces"].as_array().expect("interfaces");
    assert!(all.iter().any(|x| x == "odd/T") && all.iter().any(|x| x == "h/T"));
}
