//! Actions: advertise_action, unadvertise_action, send_action_goal,
//! cancel_action_goal, action_feedback, action_result.
//!
//! Every rule runs on both transports: each scenario is a function of the
//! transport its clients use, and [`on_both_transports!`] makes a `tcp` and
//! a `ws` test of it (`actions::<scenario>::tcp`, `actions::<scenario>::ws`).
//! WebSocket clients get the gateway's default status filter (errors only)
//! unless a scenario asks for info statuses with rosbridge's `set_level`.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::*;
use crate::wsclient::*;

const FIB: &str = "example_interfaces/action/Fibonacci";

/// The transport a peer speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tr {
    Tcp,
    Ws,
}

enum Io {
    Tcp(Client),
    Ws(Ws),
}

/// One client of the gateway on either transport, with the action ops.
struct Peer {
    io: Io,
    tr: Tr,
    /// Whether info statuses reach it (TCP always; WebSocket after
    /// `set_level info`).
    infos: bool,
    name: String,
}

impl Peer {
    fn new(gw: &Gateway, tr: Tr) -> Peer {
        let io = match tr {
            Tr::Tcp => Io::Tcp(gw.client()),
            Tr::Ws => Io::Ws(Ws::connect(gw)),
        };
        Peer::wrap(io, tr)
    }

    fn wrap(io: Io, tr: Tr) -> Peer {
        Peer {
            io,
            tr,
            infos: tr == Tr::Tcp,
            name: format!("{tr:?}-{}", uniq()),
        }
    }

    /// A peer whose socket has a tiny receive buffer: a slow reader.
    fn slow(gw: &Gateway, tr: Tr) -> Peer {
        match tr {
            Tr::Tcp => Peer::wrap(Io::Tcp(Client::connect_small_rcvbuf(gw, 4096)), tr),
            Tr::Ws => Peer::wrap(Io::Ws(Ws::connect_small_rcvbuf(gw, 4096)), tr),
        }
    }

    /// Asks for info statuses too (a no-op on TCP, which gets them all).
    fn with_infos(mut self) -> Peer {
        if self.tr == Tr::Ws {
            self.send(r#"{"op":"set_level","level":"info"}"#);
            self.assert_quiet();
            self.infos = true;
        }
        self
    }

    fn send(&mut self, line: &str) {
        match &mut self.io {
            Io::Tcp(c) => c.send_line(line),
            Io::Ws(w) => w.send_text(line),
        }
    }

    /// The next frame as text, or `None` at the deadline; panics if the
    /// connection closes.
    fn try_recv_text(&mut self, dl: Instant) -> Option<String> {
        match &mut self.io {
            Io::Tcp(c) => match c.try_recv_line(dl) {
                Recv::Line(l) => Some(String::from_utf8(l).expect("UTF-8 output")),
                Recv::Timeout => None,
                other => panic!("{}: connection ended: {other:?}", self.name),
            },
            Io::Ws(w) => match w.try_frame(dl) {
                Some((0x1, payload)) => {
                    assert!(
                        !payload.ends_with(b"\n"),
                        "one JSON object per frame, no newline"
                    );
                    Some(String::from_utf8(payload).expect("UTF-8 output"))
                }
                Some(other) => panic!("{}: unexpected frame {other:?}", self.name),
                None if Instant::now() >= dl => None,
                None => panic!("{}: connection ended", self.name),
            },
        }
    }

    fn try_recv(&mut self, dl: Instant) -> Option<Value> {
        self.try_recv_text(dl).map(|t| parse_line(&t))
    }

    fn recv_text(&mut self) -> String {
        self.try_recv_text(deadline(REPLY))
            .unwrap_or_else(|| panic!("{}: nothing within {REPLY:?}", self.name))
    }

    fn recv(&mut self) -> Value {
        parse_line(&self.recv_text())
    }

    /// Calls the stats service and returns every frame that came before
    /// its answer: what the gateway had queued for this peer so far.
    fn barrier(&mut self) -> Vec<Value> {
        let id = format!("barrier-{}", uniq());
        self.send(&format!(
            r#"{{"op":"call_service","service":"/rosgate/stats","id":"{id}","args":{{}}}}"#
        ));
        let mut before = Vec::new();
        loop {
            let v = self.recv();
            if v["op"] == "service_response" && v["id"] == id.as_str() {
                return before;
            }
            before.push(v);
        }
    }

    fn assert_quiet(&mut self) {
        let extra = self.barrier();
        assert!(
            extra.is_empty(),
            "{}: unexpected frames: {extra:?}",
            self.name
        );
    }

    /// Sends a request with the unique id `id` that answers with an info
    /// status: checks it where info statuses are delivered, else that
    /// nothing (no error) came back.
    fn expect_ok(&mut self, id: &str) {
        if self.infos {
            let v = self.recv();
            assert_status(&v, "info", Some(&json!(id)));
        } else {
            self.assert_quiet();
        }
    }

    fn expect_error(&mut self, id: &Value) -> Value {
        let v = self.recv();
        assert_status(&v, "error", Some(id));
        v
    }

    // ----- the action ops -----

    fn subscribe(&mut self, topic: &str) {
        let id = format!("sub-{}", uniq());
        self.send(&format!(
            r#"{{"op":"subscribe","topic":"{topic}","type":"x/T","id":"{id}"}}"#
        ));
        self.expect_ok(&id);
    }

    fn advertise_action(&mut self, action: &str, ty: &str) {
        let id = format!("adv-{}", uniq());
        self.send(&format!(
            r#"{{"op":"advertise_action","action":"{action}","type":"{ty}","id":"{id}"}}"#
        ));
        self.expect_ok(&id);
    }

    fn unadvertise_action(&mut self, action: &str) {
        let id = format!("unadv-{}", uniq());
        self.send(&format!(
            r#"{{"op":"unadvertise_action","action":"{action}","id":"{id}"}}"#
        ));
        self.expect_ok(&id);
    }

    /// Moves this (fresh) connection to `domain` by declaring a node there.
    /// Declares a node in `domain`; returns its full name.
    fn join_domain(&mut self, domain: u32) -> String {
        let id = format!("node-{}", uniq());
        let name = format!("n{}", uniq());
        self.send(&format!(
            r#"{{"op":"declare_node","name":"{name}","domain":{domain},"id":"{id}"}}"#
        ));
        self.expect_ok(&id);
        format!("/{name}")
    }

    /// Sends a goal; `id`, `args` and `extra` (`,"feedback":true`, ...) are
    /// raw JSON text.
    fn goal_with(&mut self, action: &str, id: &str, args: &str, extra: &str) {
        self.send(&format!(
            r#"{{"op":"send_action_goal","id":{id},"action":"{action}","action_type":"{FIB}","args":{args}{extra}}}"#
        ));
    }

    fn goal(&mut self, action: &str, id: &str, feedback: bool) {
        self.goal_with(
            action,
            id,
            r#"{"order":5}"#,
            &format!(r#","feedback":{feedback}"#),
        );
    }

    fn cancel(&mut self, action: &str, id: &str) {
        self.send(&format!(
            r#"{{"op":"cancel_action_goal","id":{id},"action":"{action}"}}"#
        ));
    }

    /// As a server: feedback for the goal `gid` (the gateway's id).
    fn feedback(&mut self, action: &str, gid: &Value, values: &str) {
        self.send(&format!(
            r#"{{"op":"action_feedback","id":{gid},"action":"{action}","values":{values}}}"#
        ));
    }

    /// As a server: the result of the goal `gid`.
    fn result(&mut self, action: &str, gid: &Value, values: &str, status: u8, result: bool) {
        self.send(&format!(
            r#"{{"op":"action_result","id":{gid},"action":"{action}","values":{values},"status":{status},"result":{result}}}"#
        ));
    }

    /// As a server: the next frame is a goal for `action`, with a gateway id.
    fn expect_goal(&mut self, action: &str) -> Value {
        let v = self.recv();
        assert_eq!(
            v["op"], "send_action_goal",
            "{}: expected a goal, got {v}",
            self.name
        );
        assert_eq!(v["action"], action, "{v}");
        assert!(
            v["id"].as_str().is_some_and(|s| s.starts_with("rg-")),
            "goal id is not the gateway's rg-<n>: {v}"
        );
        v
    }

    /// As a server: the next frame is exactly a cancel of goal `gid`.
    fn expect_cancel(&mut self, action: &str, gid: &Value) {
        let v = self.recv();
        assert_eq!(
            v,
            json!({"op":"cancel_action_goal","id":gid,"action":action}),
            "{}: expected a cancel of {gid}",
            self.name
        );
    }

    /// As a caller: the next frame is feedback for its goal `id`.
    fn expect_feedback(&mut self, action: &str, id: &Value) -> Value {
        let v = self.recv();
        assert_eq!(v["op"], "action_feedback", "{}: {v}", self.name);
        assert_eq!((&v["id"], &v["action"]), (id, &json!(action)), "{v}");
        v
    }

    /// As a caller: the next frame is the result of its goal `id`.
    fn expect_result(&mut self, action: &str, id: &Value) -> Value {
        let v = self.recv();
        assert_eq!(v["op"], "action_result", "{}: {v}", self.name);
        assert_eq!((&v["id"], &v["action"]), (id, &json!(action)), "{v}");
        v
    }

    /// As a caller: the next frame ends goal `id` with a gateway failure.
    fn expect_goal_failure(&mut self, action: &str, id: &Value, status: u64) -> Value {
        let v = self.expect_result(action, id);
        assert_goal_failure(&v, status);
        v
    }

    fn call(&mut self, service: &str, id: &str, args: &str) {
        self.send(&format!(
            r#"{{"op":"call_service","service":"{service}","id":{id},"args":{args}}}"#
        ));
    }

    /// The values of a rosapi (or other built-in) service's answer.
    fn rosapi(&mut self, service: &str, args: &str) -> Value {
        let id = format!("api-{}", uniq());
        self.call(service, &format!("\"{id}\""), args);
        let v = self.recv();
        assert_eq!(
            (&v["op"], &v["id"], &v["result"]),
            (&json!("service_response"), &json!(id), &json!(true)),
            "{v}"
        );
        v["values"].clone()
    }
}

fn assert_goal_failure(v: &Value, status: u64) {
    assert_eq!(v["op"], "action_result", "{v}");
    assert_eq!(v["status"], status, "failure status: {v}");
    assert_eq!(v["result"], false, "failure must have result:false: {v}");
    assert!(
        v["values"].as_str().is_some_and(|s| !s.is_empty()),
        "failure values must be a reason string: {v}"
    );
}

/// Makes a `tcp` and a `ws` test of each scenario `fn name(tr: Tr)`.
macro_rules! on_both_transports {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[test]
                fn tcp() {
                    super::$name(super::Tr::Tcp)
                }
                #[test]
                fn ws() {
                    super::$name(super::Tr::Ws)
                }
            }
        )*
    };
}

on_both_transports!(
    goal_round_trip_with_feedback_and_result,
    goal_without_server_fails_at_once,
    gateway_goal_ids_are_fresh_and_never_reused,
    callers_with_the_same_goal_ids_never_cross,
    duplicate_goal_id_from_one_caller_is_refused,
    cancel_before_the_first_feedback,
    cancelling_an_unknown_goal_is_harmless,
    server_gone_mid_goal_aborts_its_goals_at_once,
    server_gone_with_thousands_of_goals_fails_each_once,
    unadvertise_mid_goal_aborts_only_that_actions_goals,
    caller_gone_mid_goal_cancels_at_the_server_and_drops_the_rest,
    goal_timeout_flag_aborts_and_drops_the_late_result,
    per_goal_timeout_overrides_the_flag_and_is_capped,
    goals_have_no_deadline_by_default,
    forged_goal_messages_from_a_third_connection_change_nothing,
    feedback_only_when_the_goal_asked_for_it,
    per_caller_goal_limit,
    per_server_goal_limit_counts_orphans,
    goal_and_call_limits_are_separate,
    displaced_server_keeps_its_goals,
    rosapi_lists_actions_per_domain,
    cancel_goal_service_cancels_all_of_the_callers_goals,
    slow_caller_loses_feedback_never_results,
    actions_per_connection_limit,
    counters_account_for_every_goal,
);

fn goal_round_trip_with_feedback_and_result(tr: Tr) {
    let gw = Gateway::start(&[]);
    let mut srv = Peer::new(&gw, tr);
    let mut cli = Peer::new(&gw, tr);
    srv.advertise_action("/fib", FIB);
    // Ids and payloads travel byte for byte, whatever their JSON type.
    let id = r#"{"goal": [1, "x"]}"#;
    let args = r#"{"order": 5, "n":12345678901234567890}"#;
    cli.goal_with("/fib", id, args, r#","feedback":true"#);
    let raw = srv.recv_text();
    assert!(raw.contains(&format!(r#""args":{args}"#)), "args: {raw}");
    let fwd = parse_line(&raw);
    assert_eq!(fwd["op"], "send_action_goal", "{fwd}");
    assert_eq!(
        (&fwd["action"], &fwd["action_type"], &fwd["feedback"]),
        (&json!("/fib"), &json!(FIB), &json!(true)),
        "{fwd}"
    );
    let gid = fwd["id"].clone();
    assert!(
        gid.as_str().is_some_and(|s| s.starts_with("rg-")),
        "the server sees the gateway's id, not the caller's: {fwd}"
    );
    let want_id: Value = serde_json::from_str(id).unwrap();
    srv.feedback("/fib", &gid, r#"{"sequence":[0,1,1]}"#);
    assert_eq!(
        cli.recv(),
        json!({"op":"action_feedback","id":want_id,"action":"/fib","values":{"sequence":[0,1,1]}})
    );
    let values = r#"{"sequence": [0,1,1,2,3,5], "f": 1.000}"#;
    srv.result("/fib", &gid, values, 4, true);
    let raw = cli.recv_text();
    for want in [
        format!(r#""id":{id}"#),
        format!(r#""values":{values}"#),
        r#""status":4"#.to_string(),
        r#""result":true"#.to_string(),
    ] {
        assert!(raw.contains(&want), "not byte-exact: {want} in {raw}");
    }
    let r = parse_line(&raw);
    assert_eq!(
        (&r["op"], &r["action"]),
        (&json!("action_result"), &json!("/fib"))
    );
    // Feedback after the result is dropped silently; a second result is an
    // error to the server. The caller hears nothing more.
    srv.feedback("/fib", &gid, r#"{"sequence":[9]}"#);
    srv.assert_quiet();
    srv.result("/fib", &gid, "{}", 4, true);
    srv.expect_error(&gid);
    cli.assert_quiet();
    srv.assert_quiet();
    let s = gw.stats();
    for (k, n) in [
        ("goals_sent", 1),
        ("goals_succeeded", 1),
        ("feedback_forwarded", 1),
        ("feedback_stale", 1),
        ("action_messages_stale", 1),
        ("errors.unknown_goal", 1),
        ("calls_pending", 0),
        ("actions", 1),
    ] {
        assert_eq!(counter(&s, k), n, "{k}: {s}");
    }
}

fn goal_without_server_fails_at_once(tr: Tr) {
    let gw = Gateway::start(&["--goal-timeout-ms", "20000"]);
    let mut cli = Peer::new(&gw, tr);
    let t0 = Instant::now();
    cli.goal("/nobody", r#""n1""#, true);
    cli.expect_goal_failure("/nobody", &json!("n1"), 0);
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    // A server that came and went leaves nothing behind.
    let mut srv = Peer::new(&gw, tr);
    srv.advertise_action("/gone", FIB);
    srv.unadvertise_action("/gone");
    cli.goal("/gone", r#""n2""#, false);
    cli.expect_goal_failure("/gone", &json!("n2"), 0);
    // A service of the same name does not serve the action.
    let mut svc = gw.client();
    svc.advertise_service("/svc_only");
    cli.goal("/svc_only", r#""n3""#, false);
    cli.expect_goal_failure("/svc_only", &json!("n3"), 0);
    svc.assert_quiet();
    srv.assert_quiet();
    cli.assert_quiet();
    let s = gw.stats();
    assert_eq!(counter(&s, "goals_failed_no_server"), 3, "{s}");
    assert_eq!(counter(&s, "goals_sent"), 0, "{s}");
    assert_eq!(counter(&s, "calls_pending"), 0, "{s}");
}

fn gateway_goal_ids_are_fresh_and_never_reused(tr: Tr) {
    let gw = Gateway::start(&[]);
    let mut cli = Peer::new(&gw, tr);
    let mut seen = HashSet::new();
    for round in 0..3 {
        // A new server each round; the caller reuses the same goal ids.
        let mut srv = Peer::new(&gw, tr);
        srv.advertise_action("/fresh", FIB);
        let mut prov = gw.client();
        prov.advertise_service("/fresh_svc");
        for i in 0..3 {
            cli.goal("/fresh", &format!("\"g{i}\""), false);
            let gid = srv.expect_goal("/fresh")["id"].clone();
            assert!(seen.insert(gid.to_string()), "{gid} reused (round {round})");
            // Service calls draw from the same sequence.
            cli.call("/fresh_svc", r#""c""#, "{}");
            let fwd = prov.expect_forwarded("/fresh_svc");
            assert!(
                seen.insert(fwd["id"].to_string()),
                "call id {} reused",
                fwd["id"]
            );
            prov.respond("/fresh_svc", &fwd["id"].to_string(), "{}", "true");
            assert_eq!(cli.recv()["op"], "service_response");
            srv.result("/fresh", &gid, "{}", 4, true);
            let r = cli.expect_result("/fresh", &json!(format!("g{i}")));
            assert_eq!(r["status"], 4, "{r}");
        }
    }
    assert_eq!(seen.len(), 18);
}

fn callers_with_the_same_goal_ids_never_cross(tr: Tr) {
    const CALLERS: usize = 3;
    let gw = Gateway::start(&[]);
    let mut srv = Peer::new(&gw, tr);
    srv.advertise_action("/x", FIB);
    let mut callers: Vec<Peer> = (0..CALLERS).map(|_| Peer::new(&gw, tr)).collect();
    for (k, c) in callers.iter_mut().enumerate() {
        for g in 1..=2 {
            c.goal_with(
                "/x",
                &format!("\"g{g}\""),
                &format!(r#"{{"caller":{k},"goal":"g{g}"}}"#),
                r#","feedback":true"#,
            );
        }
    }
    // gid -> (caller, goal)
    let mut goals: Vec<(Value, Value)> = Vec::new();
    for _ in 0..CALLERS * 2 {
        let fwd = srv.expect_goal("/x");
        goals.push((fwd["id"].clone(), fwd["args"].clone()));
    }
    let distinct: HashSet<String> = goals.iter().map(|(g, _)| g.to_string()).collect();
    assert_eq!(distinct.len(), CALLERS * 2, "gateway ids must be distinct");
    // Feedback in reverse order, tagged with the goal it is for.
    for (gid, args) in goals.iter().rev() {
        srv.feedback("/x", gid, &args.to_string());
    }
    for (k, c) in callers.iter_mut().enumerate() {
        let mut got = Vec::new();
        for _ in 0..2 {
            let v = c.recv();
            assert_eq!(v["op"], "action_feedback", "{v}");
            assert_eq!(v["values"]["caller"], k, "crossed feedback: {v}");
            assert_eq!(v["values"]["goal"], v["id"], "crossed feedback: {v}");
            got.push(v["id"].as_str().unwrap().to_string());
        }
        got.sort();
        assert_eq!(got, ["g1", "g2"]);
    }
    // Caller 0 cancels its g1: exactly that goal is cancelled at the server.
    callers[0].cancel("/x", r#""g1""#);
    let target = goals
        .iter()
        .find(|(_, a)| a == &json!({"caller":0,"goal":"g1"}))
        .map(|(g, _)| g.clone())
        .unwrap();
    srv.expect_cancel("/x", &target);
    srv.assert_quiet();
    for (gid, args) in goals.iter().rev() {
        let status = if gid == &target { 5 } else { 4 };
        srv.result("/x", gid, &args.to_string(), status, true);
    }
    for (k, c) in callers.iter_mut().enumerate() {
        let mut got = Vec::new();
        for _ in 0..2 {
            let v = c.recv();
            assert_eq!(v["op"], "action_result", "{v}");
            assert_eq!(v["values"]["caller"], k, "crossed result: {v}");
            assert_eq!(v["values"]["goal"], v["id"], "crossed result: {v}");
            let cancelled = k == 0 && v["id"] == "g1";
            assert_eq!(v["status"], if cancelled { 5 } else { 4 }, "{v}");
            got.push(v["id"].as_str().unwrap().to_string());
        }
        got.sort();
        assert_eq!(got, ["g1", "g2"]);
        c.assert_quiet();
    }
    srv.assert_quiet();
}

fn duplicate_goal_id_from_one_caller_is_refused(tr: Tr) {
    let gw = Gateway::start(&[]);
    let mut srv = Peer::new(&gw, tr);
    let mut cli = Peer::new(&gw, tr);
    let mut other = Peer::new(&gw, tr);
    srv.advertise_action("/d", FIB);
    cli.goal_with("/d", r#""d""#, r#"{"first":true}"#, "");
    let gid = srv.expect_goal("/d")["id"].clone();
    cli.goal_with("/d", r#""d""#, r#"{"first":false}"#, "");
    cli.expect_goal_failure("/d", &json!("d"), 0);
    srv.assert_quiet();
    // Another caller may use the same id.
    other.goal("/d", r#""d""#, false);
    let ogid = srv.expect_goal("/d")["id"].clone();
    // The first goal is untouched and ends normally.
    srv.result("/d", &gid, r#"{"r":1}"#, 4, true);
    let r = cli.expect_result("/d", &json!("d"));
    assert_eq!((&r["status"], &r["values"]), (&json!(4), &json!({"r":1})));
    // Once it ended, the id is free again.
    cli.goal_with("/d", r#""d""#, r#"{"again":true}"#, "");
    let again = srv.expect_goal("/d");
    assert_eq!(again["args"], json!({"again":true}));
    assert_ne!(again["id"], gid);
    srv.result("/d", &ogid, "{}", 4, true);
    other.expect_result("/d", &json!("d"));
    cli.assert_quiet();
    let s = gw.stats();
    assert_eq!(counter(&s, "goals_failed_refused"), 1, "{s}");
    assert_eq!(counter(&s, "goals_sent"), 3, "{s}");
}

fn cancel_before_the_first_feedback(tr: Tr) {
    let gw = Gateway::start(&[]);
    let mut srv = Peer::new(&gw, tr);
    let mut cli = Peer::new(&gw, tr);
    srv.advertise_action("/c", FIB);
    cli.goal("/c", r#""c1""#, true);
    let gid = srv.expect_goal("/c")["id"].clone();
    cli.cancel("/c", r#""c1""#);
    srv.expect_cancel("/c", &gid);
    // The goal ends only when the server answers.
    cli.assert_quiet();
    srv.result("/c", &gid, r#"{"sequence":[]}"#, 5, true);
    assert_eq!(
        cli.recv(),
        json!({"op":"action_result","id":"c1","action":"/c","values":{"sequence":[]},"status":5,"result":true})
    );
    // Feedback racing the result is dropped, not an error.
    srv.feedback("/c", &gid, r#"{"sequence":[0]}"#);
    srv.assert_quiet();
    cli.assert_quiet();
    // Cancelling the ended goal is harmless and reaches nobody.
    cli.cancel("/c", r#""c1""#);
    if tr == Tr::Tcp {
        cli.expect_error(&json!("c1"));
    }
    cli.assert_quiet();
    srv.assert_quiet();
    let s = gw.stats();
    assert_eq!(counter(&s, "goal_cancels"), 1, "{s}");
    assert_eq!(counter(&s, "goals_canceled"), 1, "{s}");
    assert_eq!(counter(&s, "feedback_forwarded"), 0, "{s}");
    assert_eq!(counter(&s, "feedback_stale"), 1, "{s}");
}

fn cancelling_an_unknown_goal_is_harmless(tr: Tr) {
    let gw = Gateway::start(&[]);
    let mut srv = Peer::new(&gw, tr);
    let mut cli = Peer::new(&gw, tr);
    srv.advertise_action("/u", FIB);
    cli.goal("/u", r#""real""#, false);
    let gid = srv.expect_goal("/u")["id"].clone();
    cli.cancel("/u", r#""nope""#);
    cli.cancel("/u", r#"{"n":1}"#);
    if tr == Tr::Tcp {
        cli.expect_error(&json!("nope"));
        cli.expect_error(&json!({"n":1}));
    }
    cli.assert_quiet();
    srv.assert_quiet();
    srv.result("/u", &gid, "{}", 4, true);
    assert_eq!(cli.expect_result("/u", &json!("real"))["status"], 4);
    let s = gw.stats();
    let errors = if tr == Tr::Tcp { 2 } else { 0 };
    assert_eq!(counter(&s, "errors.unknown_goal"), errors, "{s}");
    assert_eq!(counter(&s, "goal_cancels"), 0, "{s}");
    assert_eq!(counter(&s, "goals_succeeded"), 1, "{s}");
}

fn server_gone_mid_goal_aborts_its_goals_at_once(tr: Tr) {
    let gw = Gateway::start(&[]);
    let mut srv = Peer::new(&gw, tr);
    let mut cli = Peer::new(&gw, tr);
    srv.advertise_action("/g", FIB);
    cli.goal("/g", r#""a""#, true);
    cli.goal("/g", r#""b""#, false);
    let ga = srv.expect_goal("/g")["id"].clone();
    srv.expect_goal("/g");
    srv.feedback("/g", &ga, r#"{"p":1}"#);
    assert_eq!(cli.expect_feedback("/g", &json!("a"))["values"]["p"], 1);
    let t0 = Instant::now();
    drop(srv);
    let mut ids = Vec::new();
    for _ in 0..2 {
        let v = cli.recv();
        assert_goal_failure(&v, 6);
        ids.push(v["id"].as_str().unwrap().to_string());
    }
    ids.sort();
    assert_eq!(ids, ["a", "b"]);
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
    // Closing withdrew the action: the next goal finds no server.
    cli.goal("/g", r#""c""#, false);
    cli.expect_goal_failure("/g", &json!("c"), 0);
    cli.assert_quiet();
    let s = gw.stats();
    assert_eq!(counter(&s, "goals_failed_server_gone"), 2, "{s}");
    assert_eq!(counter(&s, "goals_failed_no_server"), 1, "{s}");
    assert_eq!(counter(&s, "actions"), 0, "{s}");
    assert_eq!(counter(&s, "calls_pending"), 0, "{s}");
}

/// More goals than the gateway fails in one loop turn
/// (`GONE_FAILS_PER_TURN`, 512): the rest follow in the next turns, each
/// goal still ends exactly once.
fn server_gone_with_thousands_of_goals_fails_each_once(tr: Tr) {
    const PER_CALLER: usize = 1000; // under the 1024 per caller
    let gw = Gateway::start(&[]);
    let mut srv = Peer::new(&gw, tr);
    srv.advertise_action("/many", FIB);
    let mut callers = [Peer::new(&gw, tr), Peer::new(&gw, tr)];
    for (c, cli) in callers.iter_mut().enumerate() {
        for k in 0..PER_CALLER {
            cli.goal("/many", &format!(r#""g{c}-{k}""#), false);
        }
    }
    for _ in 0..2 * PER_CALLER {
        srv.expect_goal("/many");
    }
    drop(srv);
    for (c, cli) in callers.iter_mut().enumerate() {
        let mut ids = std::collections::BTreeSet::new();
        for _ in 0..PER_CALLER {
            let v = cli.recv();
            assert_goal_failure(&v, 6);
            ids.insert(v["id"].as_str().unwrap_or_default().to_string());
        }
        let want: std::collections::BTreeSet<String> =
            (0..PER_CALLER).map(|k| format!("g{c}-{k}")).collect();
        assert_eq!(ids, want, "each goal ended once, under its own id");
        cli.assert_quiet();
    }
    let s = gw.stats();
    assert_eq!(
        counter(&s, "goals_failed_server_gone"),
        2 * PER_CALLER as u64,
        "{s}"
    );
    assert_eq!(counter(&s, "calls_pending"), 0, "{s}");
    assert_eq!(counter(&s, "memory_calls_bytes"), 0, "{s}");
}

fn unadvertise_mid_goal_aborts_only_that_actions_goals(tr: Tr) {
    let gw = Gateway::start(&[]);
    let mut srv = Peer::new(&gw, tr);
    let mut cli = Peer::new(&gw, tr);
    let mut other = Peer::new(&gw, tr);
    srv.advertise_action("/un", FIB);
    srv.advertise_action("/keep", FIB);
    cli.goal("/un", r#""u""#, false);
    let gu = srv.expect_goal("/un")["id"].clone();
    cli.goal("/keep", r#""k""#, false);
    let gk = srv.expect_goal("/keep")["id"].clone();
    // Only the current server may unadvertise.
    other.send(r#"{"op":"unadvertise_action","action":"/un","id":"nope"}"#);
    other.expect_error(&json!("nope"));
    other.send(r#"{"op":"unadvertise_action","action":"/never","id":"nope2"}"#);
    other.expect_error(&json!("nope2"));
    cli.assert_quiet();
    let t0 = Instant::now();
    srv.unadvertise_action("/un");
    cli.expect_goal_failure("/un", &json!("u"), 6);
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    // The goal ended: the server's late result is an error to it.
    srv.result("/un", &gu, "{}", 4, true);
    srv.expect_error(&gu);
    cli.assert_quiet();
    // The other action is untouched.
    srv.result("/keep", &gk, r#"{"ok":1}"#, 4, true);
    assert_eq!(cli.expect_result("/keep", &json!("k"))["values"]["ok"], 1);
    cli.goal("/un", r#""u2""#, false);
    cli.expect_goal_failure("/un", &json!("u2"), 0);
    srv.assert_quiet();
    let s = gw.stats();
    assert_eq!(counter(&s, "goals_failed_server_gone"), 1, "{s}");
    assert_eq!(counter(&s, "errors.not_provider"), 2, "{s}");
    assert_eq!(counter(&s, "actions"), 1, "{s}");
}

fn caller_gone_mid_goal_cancels_at_the_server_and_drops_the_rest(tr: Tr) {
    let gw = Gateway::start(&[]);
    let mut srv = Peer::new(&gw, tr);
    srv.advertise_action("/l", FIB);
    let mut cli = Peer::new(&gw, tr);
    cli.goal("/l", r#""x""#, true);
    cli.goal("/l", r#""y""#, false);
    let gx = srv.expect_goal("/l")["id"].clone();
    let gy = srv.expect_goal("/l")["id"].clone();
    srv.feedback("/l", &gx, "1");
    cli.expect_feedback("/l", &json!("x"));
    drop(cli);
    // The server is told to cancel each goal, under its own ids.
    let mut cancels = HashSet::new();
    for _ in 0..2 {
        let v = srv.recv();
        assert_eq!(v["op"], "cancel_action_goal", "{v}");
        assert_eq!(v["action"], "/l", "{v}");
        cancels.insert(v["id"].to_string());
    }
    assert_eq!(cancels, HashSet::from([gx.to_string(), gy.to_string()]));
    let s = gw.stats();
    assert_eq!(
        counter(&s, "goals_pending"),
        2,
        "orphans wait for the server: {s}"
    );
    // A new caller with the same ids gets its own goal and nothing else.
    let mut c2 = Peer::new(&gw, tr);
    c2.goal("/l", r#""x""#, true);
    let g2 = srv.expect_goal("/l")["id"].clone();
    assert!(g2 != gx && g2 != gy);
    // The orphans' feedback and results are dropped, not errors.
    srv.feedback("/l", &gx, "2");
    srv.result("/l", &gx, "{}", 5, true);
    srv.result("/l", &gy, "{}", 4, true);
    srv.assert_quiet();
    c2.assert_quiet();
    srv.feedback("/l", &g2, "3");
    assert_eq!(c2.expect_feedback("/l", &json!("x"))["values"], 3);
    srv.result("/l", &g2, r#""mine""#, 4, true);
    assert_eq!(c2.expect_result("/l", &json!("x"))["values"], "mine");
    c2.assert_quiet();
    let s = gw.stats();
    for (k, n) in [
        ("goals_orphaned", 2),
        ("goal_results_orphaned", 2),
        ("feedback_stale", 1),
        ("feedback_forwarded", 2),
        ("goals_succeeded", 1),
        ("action_messages_stale", 0),
        ("errors.unknown_goal", 0),
        ("calls_pending", 0),
        ("goals_pending", 0),
    ] {
        assert_eq!(counter(&s, k), n, "{k}: {s}");
    }
}

fn goal_timeout_flag_aborts_and_drops_the_late_result(tr: Tr) {
    let gw = Gateway::start(&["--goal-timeout-ms", "300"]);
    let mut srv = Peer::new(&gw, tr);
    let mut cli = Peer::new(&gw, tr);
    srv.advertise_action("/t", FIB);
    let t0 = Instant::now();
    cli.goal("/t", r#""t1""#, true);
    let gid = srv.expect_goal("/t")["id"].clone();
    let v = cli.expect_goal_failure("/t", &json!("t1"), 6);
    let took = t0.elapsed();
    assert!(
        took >= ms(250) && took < Duration::from_secs(3),
        "goal timeout 300 ms not honoured: {took:?}"
    );
    assert!(
        v["values"].as_str().unwrap().contains("timed out"),
        "reason: {v}"
    );
    srv.expect_cancel("/t", &gid);
    assert_eq!(counter(&gw.stats(), "goals_pending"), 1, "the orphan waits");
    // The server's late feedback and result are dropped quietly.
    srv.feedback("/t", &gid, "1");
    srv.result("/t", &gid, r#""late""#, 5, true);
    srv.assert_quiet();
    cli.assert_quiet();
    // The id is free again once the goal timed out.
    cli.goal("/t", r#""t1""#, false);
    let g2 = srv.expect_goal("/t")["id"].clone();
    srv.result("/t", &g2, "{}", 4, true);
    assert_eq!(cli.expect_result("/t", &json!("t1"))["status"], 4);
    let s = gw.stats();
    for (k, n) in [
        ("goals_timed_out", 1),
        ("goals_orphaned", 1),
        ("goal_results_orphaned", 1),
        ("feedback_stale", 1),
        ("goals_succeeded", 1),
        ("action_messages_stale", 0),
        ("errors.unknown_goal", 0),
        ("calls_pending", 0),
        ("goals_pending", 0),
    ] {
        assert_eq!(counter(&s, k), n, "{k}: {s}");
    }
}

fn per_goal_timeout_overrides_the_flag_and_is_capped(tr: Tr) {
    let gw = Gateway::start(&["--goal-timeout-ms", "150", "--max-call-timeout-ms", "700"]);
    let mut srv = Peer::new(&gw, tr);
    let mut cli = Peer::new(&gw, tr);
    srv.advertise_action("/p", FIB);
    let t0 = Instant::now();
    // 0.5 s of its own, 100 s capped at 0.7 s, none: the flag's 150 ms.
    cli.goal_with("/p", r#""own""#, "{}", r#","timeout":0.5"#);
    cli.goal_with("/p", r#""capped""#, "{}", r#","timeout":100"#);
    cli.goal_with("/p", r#""dflt""#, "{}", r#","timeout":null"#);
    let mut gids = HashMap::new();
    for _ in 0..3 {
        let g = srv.expect_goal("/p");
        gids.insert(g["id"].to_string(), g["id"].clone());
    }
    // They end in that order, each not before its deadline.
    for (id, lo) in [("dflt", 140), ("own", 490), ("capped", 690)] {
        cli.expect_goal_failure("/p", &json!(id), 6);
        let took = t0.elapsed();
        assert!(
            took >= ms(lo) && took < Duration::from_secs(4),
            "{id}: aborted after {took:?}, wanted {lo} ms"
        );
    }
    for _ in 0..3 {
        let v = srv.recv();
        assert_eq!(v["op"], "cancel_action_goal", "{v}");
        assert!(gids.remove(&v["id"].to_string()).is_some(), "{v}");
    }
    cli.assert_quiet();
    srv.assert_quiet();
    assert_eq!(counter(&gw.stats(), "goals_timed_out"), 3);
}

fn goals_have_no_deadline_by_default(tr: Tr) {
    let gw = Gateway::start(&["--call-timeout-ms", "100", "--goal-timeout-ms", "0"]);
    let mut srv = Peer::new(&gw, tr);
    let mut cli = Peer::new(&gw, tr);
    srv.advertise_action("/n", FIB);
    cli.goal("/n", r#""slow""#, false);
    cli.goal_with("/n", r#""short""#, "{}", r#","timeout":0.2"#);
    let gslow = srv.expect_goal("/n")["id"].clone();
    srv.expect_goal("/n");
    cli.expect_goal_failure("/n", &json!("short"), 6);
    // Well past both the call timeout and the other goal's deadline.
    assert!(
        cli.try_recv(deadline(ms(600))).is_none(),
        "a goal without a timeout must not expire"
    );
    srv.result("/n", &gslow, r#""done""#, 4, true);
    assert_eq!(cli.expect_result("/n", &json!("slow"))["values"], "done");
}

fn forged_goal_messages_from_a_third_connection_change_nothing(tr: Tr) {
    let gw = Gateway::start(&[]);
    let mut srv = Peer::new(&gw, tr);
    let mut cli = Peer::new(&gw, tr);
    let mut evil = Peer::new(&gw, tr);
    srv.advertise_action("/v", FIB);
    // Even a connection serving an action of its own cannot touch the goal.
    evil.advertise_action("/evil", FIB);
    cli.goal("/v", r#""v""#, true);
    let gid = srv.expect_goal("/v")["id"].clone();
    evil.feedback("/v", &gid, r#""forged""#);
    evil.expect_error(&gid);
    evil.result("/v", &gid, r#""forged""#, 4, true);
    evil.expect_error(&gid);
    // Cancels name the sender's own goals: neither the caller's id nor the
    // gateway's reaches the server.
    evil.cancel("/v", r#""v""#);
    evil.cancel("/v", &gid.to_string());
    if tr == Tr::Tcp {
        evil.expect_error(&json!("v"));
        evil.expect_error(&gid);
    }
    // The caller is not the server of its own goal either.
    cli.result("/v", &gid, r#""self""#, 4, true);
    cli.expect_error(&gid);
    cli.assert_quiet();
    srv.assert_quiet();
    evil.assert_quiet();
    // The genuine server still completes the goal.
    srv.feedback("/v", &gid, r#""real""#);
    assert_eq!(cli.expect_feedback("/v", &json!("v"))["values"], "real");
    srv.result("/v", &gid, r#""real""#, 4, true);
    assert_eq!(cli.expect_result("/v", &json!("v"))["values"], "real");
    cli.assert_quiet();
    let s = gw.stats();
    let tcp_cancels = if tr == Tr::Tcp { 2 } else { 0 };
    assert_eq!(counter(&s, "action_messages_stale"), 3, "{s}");
    assert_eq!(counter(&s, "errors.unknown_goal"), 3 + tcp_cancels, "{s}");
    assert_eq!(counter(&s, "goal_cancels"), 0, "{s}");
    assert_eq!(counter(&s, "goals_succeeded"), 1, "{s}");
}

fn feedback_only_when_the_goal_asked_for_it(tr: Tr) {
    let gw = Gateway::start(&[]);
    let mut srv = Peer::new(&gw, tr);
    let mut cli = Peer::new(&gw, tr);
    srv.advertise_action("/f", FIB);
    cli.goal("/f", r#""no""#, false);
    cli.goal_with("/f", r#""omitted""#, "{}", "");
    cli.goal("/f", r#""yes""#, true);
    let mut gids = Vec::new();
    for want in [false, false, true] {
        let g = srv.expect_goal("/f");
        assert_eq!(g["feedback"], want, "the flag is forwarded: {g}");
        gids.push(g["id"].clone());
    }
    for gid in &gids {
        srv.feedback("/f", gid, r#"{"p":0.5}"#);
    }
    // Feedback nobody asked for is dropped quietly.
    srv.assert_quiet();
    assert_eq!(cli.expect_feedback("/f", &json!("yes"))["values"]["p"], 0.5);
    cli.assert_quiet();
    for gid in &gids {
        srv.result("/f", gid, "{}", 4, true);
    }
    for id in ["no", "omitted", "yes"] {
        assert_eq!(cli.expect_result("/f", &json!(id))["status"], 4);
    }
    cli.assert_quiet();
    let s = gw.stats();
    assert_eq!(counter(&s, "feedback_forwarded"), 1, "{s}");
    assert_eq!(counter(&s, "feedback_stale"), 2, "{s}");
    assert_eq!(counter(&s, "errors_total"), 0, "{s}");
}

fn per_caller_goal_limit(tr: Tr) {
    let gw = Gateway::start(&["--max-goals-per-conn", "2"]);
    let mut srv = Peer::new(&gw, tr);
    let mut cli = Peer::new(&gw, tr);
    let mut other = Peer::new(&gw, tr);
    srv.advertise_action("/lim", FIB);
    cli.goal("/lim", r#""a""#, false);
    cli.goal("/lim", r#""b""#, false);
    let ga = srv.expect_goal("/lim")["id"].clone();
    srv.expect_goal("/lim");
    let t0 = Instant::now();
    cli.goal("/lim", r#""c""#, false);
    let v = cli.expect_goal_failure("/lim", &json!("c"), 0);
    assert!(t0.elapsed() < Duration::from_secs(2));
    assert!(v["values"].as_str().unwrap().contains("limit"), "{v}");
    srv.assert_quiet();
    // The limit is per caller.
    other.goal("/lim", r#""o""#, false);
    srv.expect_goal("/lim");
    // A goal ending frees a slot.
    srv.result("/lim", &ga, "{}", 4, true);
    cli.expect_result("/lim", &json!("a"));
    cli.goal("/lim", r#""d""#, false);
    srv.expect_goal("/lim");
    let s = gw.stats();
    assert_eq!(counter(&s, "goals_failed_refused"), 1, "{s}");
    assert_eq!(counter(&s, "goals_sent"), 4, "{s}");
}

fn per_server_goal_limit_counts_orphans(tr: Tr) {
    let gw = Gateway::start(&["--max-goals-per-server", "2"]);
    let mut srv = Peer::new(&gw, tr);
    let mut srv2 = Peer::new(&gw, tr);
    srv.advertise_action("/busy", FIB);
    srv2.advertise_action("/free", FIB);
    let mut c1 = Peer::new(&gw, tr);
    let mut c2 = Peer::new(&gw, tr);
    c1.goal("/busy", r#""1""#, false);
    let g1 = srv.expect_goal("/busy")["id"].clone();
    c2.goal("/busy", r#""2""#, false);
    let g2 = srv.expect_goal("/busy")["id"].clone();
    c1.goal("/busy", r#""3""#, false);
    let v = c1.expect_goal_failure("/busy", &json!("3"), 0);
    assert!(v["values"].as_str().unwrap().contains("limit"), "{v}");
    srv.assert_quiet();
    // Another server is not affected.
    c1.goal("/free", r#""f""#, false);
    srv2.expect_goal("/free");
    // c1 leaves: its goal is cancelled but still held by the server.
    drop(c1);
    srv.expect_cancel("/busy", &g1);
    c2.goal("/busy", r#""4""#, false);
    c2.expect_goal_failure("/busy", &json!("4"), 0);
    srv.assert_quiet();
    // The server ends the orphan: room again.
    srv.result("/busy", &g1, "{}", 5, true);
    c2.goal("/busy", r#""5""#, false);
    srv.expect_goal("/busy");
    srv.result("/busy", &g2, "{}", 4, true);
    c2.expect_result("/busy", &json!("2"));
    c2.assert_quiet();
    let s = gw.stats();
    assert_eq!(counter(&s, "goals_failed_refused"), 2, "{s}");
    assert_eq!(counter(&s, "goal_results_orphaned"), 1, "{s}");
}

fn goal_and_call_limits_are_separate(tr: Tr) {
    let gw = Gateway::start(&["--max-calls-per-conn", "1", "--max-goals-per-conn", "3"]);
    let mut srv = Peer::new(&gw, tr);
    let mut prov = gw.client();
    let mut cli = Peer::new(&gw, tr);
    srv.advertise_action("/sep", FIB);
    prov.advertise_service("/svc");
    cli.goal("/sep", r#""g1""#, false);
    cli.goal("/sep", r#""g2""#, false);
    let g1 = srv.expect_goal("/sep")["id"].clone();
    let g2 = srv.expect_goal("/sep")["id"].clone();
    // Goals in flight take none of the caller's call slots: the ROS 2
    // cancel service (a call) still cancels them ...
    cli.call("/sep/_action/cancel_goal", r#""all""#, "{}");
    let r = cli.recv();
    assert_eq!(
        (&r["id"], &r["result"]),
        (&json!("all"), &json!(true)),
        "{r}"
    );
    assert_eq!(r["values"]["canceled"], 2, "{r}");
    srv.expect_cancel("/sep", &g1);
    srv.expect_cancel("/sep", &g2);
    // ... and a service call is forwarded.
    cli.call("/svc", r#""c1""#, "{}");
    let fwd = prov.expect_forwarded("/svc");
    // The call limit still holds for calls ...
    cli.call("/svc", r#""c2""#, "{}");
    let r = cli.recv();
    assert_eq!(
        (&r["id"], &r["result"]),
        (&json!("c2"), &json!(false)),
        "{r}"
    );
    // ... and a call in flight takes no goal slot.
    cli.goal("/sep", r#""g3""#, false);
    let g3 = srv.expect_goal("/sep")["id"].clone();
    cli.goal("/sep", r#""g4""#, false);
    cli.expect_goal_failure("/sep", &json!("g4"), 0);
    prov.respond("/svc", &fwd["id"].to_string(), "1", "true");
    assert_eq!(cli.recv()["id"], "c1");
    for g in [&g1, &g2, &g3] {
        srv.result("/sep", g, "{}", 5, true);
    }
    for id in ["g1", "g2", "g3"] {
        assert_eq!(cli.expect_result("/sep", &json!(id))["status"], 5);
    }
    cli.assert_quiet();
    let s = gw.stats();
    assert_eq!(counter(&s, "calls_failed_too_many"), 1, "{s}");
    assert_eq!(counter(&s, "goals_failed_refused"), 1, "{s}");
    assert_eq!(counter(&s, "goals_pending"), 0, "{s}");
}

fn displaced_server_keeps_its_goals(tr: Tr) {
    let gw = Gateway::start(&[]);
    let mut a = Peer::new(&gw, tr).with_infos();
    let mut b = Peer::new(&gw, tr);
    let mut cli = Peer::new(&gw, tr);
    a.advertise_action("/rep", FIB);
    cli.goal("/rep", r#""old1""#, true);
    let g1 = a.expect_goal("/rep")["id"].clone();
    cli.goal("/rep", r#""old2""#, false);
    let g2 = a.expect_goal("/rep")["id"].clone();
    let adv = r#"{"op":"advertise_action","action":"/rep","type":"other/action/T","id":"b"}"#;
    b.send(adv);
    b.expect_ok("b");
    // The displaced server is told, without the newcomer's id.
    let note = a.recv();
    assert_status(&note, "info", None);
    let msg = note["msg"].as_str().unwrap().to_lowercase();
    assert!(
        msg.contains("/rep") && msg.contains("taken over"),
        "displaced server's status should say /rep was taken over: {note}"
    );
    // New goals go to the new server.
    cli.goal("/rep", r#""new""#, false);
    let gn = b.expect_goal("/rep")["id"].clone();
    a.assert_quiet();
    // Goals already sent to the old server stay valid.
    a.feedback("/rep", &g1, r#""from a""#);
    assert_eq!(
        cli.expect_feedback("/rep", &json!("old1"))["values"],
        "from a"
    );
    a.result("/rep", &g1, r#""from a""#, 4, true);
    assert_eq!(
        cli.expect_result("/rep", &json!("old1"))["values"],
        "from a"
    );
    // ... but it cannot speak for the new server's goals, nor withdraw the action.
    a.result("/rep", &gn, r#""forged""#, 4, true);
    a.expect_error(&gn);
    a.send(r#"{"op":"unadvertise_action","action":"/rep","id":"ua"}"#);
    a.expect_error(&json!("ua"));
    // A cancel goes to the server the goal was sent to.
    cli.cancel("/rep", r#""old2""#);
    a.expect_cancel("/rep", &g2);
    b.assert_quiet();
    // The old server leaving fails only its own goal and withdraws nothing.
    drop(a);
    cli.expect_goal_failure("/rep", &json!("old2"), 6);
    let s = gw.stats();
    assert_eq!(counter(&s, "actions"), 1, "{s}");
    b.result("/rep", &gn, r#""from b""#, 4, true);
    assert_eq!(cli.expect_result("/rep", &json!("new"))["values"], "from b");
    cli.goal("/rep", r#""later""#, false);
    b.expect_goal("/rep");
    assert_eq!(
        cli.rosapi("/rosapi/action_type", r#"{"action":"/rep"}"#)["type"],
        "other/action/T"
    );
    cli.assert_quiet();
    b.assert_quiet();
    let s = gw.stats();
    assert_eq!(counter(&s, "goals_failed_server_gone"), 1, "{s}");
    assert_eq!(counter(&s, "errors.not_provider"), 1, "{s}");
}

fn rosapi_lists_actions_per_domain(tr: Tr) {
    let gw = Gateway::start(&[]);
    let mut srv0 = Peer::new(&gw, tr);
    let mut cli0 = Peer::new(&gw, tr);
    let mut srv3 = Peer::new(&gw, tr);
    let srv3_node = srv3.join_domain(3);
    let mut cli3 = Peer::new(&gw, tr);
    cli3.join_domain(3);
    srv0.advertise_action("/fib", FIB);
    srv0.advertise_action("/nav", "nav2_msgs/action/NavigateToPose");
    srv3.advertise_action("/fib", "other/action/Fib");
    srv0.advertise_action("/_hidden", "h/action/H");
    let servers = |p: &mut Peer| p.rosapi("/rosapi/action_servers", "{}");
    let ty = |p: &mut Peer, a: &str| {
        p.rosapi("rosapi/action_type", &format!(r#"{{"action":"{a}"}}"#))["type"].clone()
    };
    let v = servers(&mut cli0);
    // The gateway's own TF action (docs/tf.md) is listed too, by its node.
    assert_eq!(
        v["action_servers"],
        json!(["/fib", "/nav", "/tf2_web_republisher"]),
        "{v}"
    );
    assert_eq!(v["nodes"][2], "/rosgate", "{v}");
    assert!(v.get("truncated").is_none(), "only a cut list says so: {v}");
    // Each server's node, in the same order: srv0 declared none, so its
    // connection's own name, which rosapi `nodes` lists.
    let srv0_name = v["nodes"][0].as_str().unwrap_or_default().to_string();
    assert!(
        srv0_name.starts_with(match tr {
            Tr::Tcp => "/rosgate_tcp_",
            Tr::Ws => "/rosgate_ws_",
        }),
        "{v}"
    );
    assert_eq!(v["nodes"], json!([srv0_name, srv0_name, "/rosgate"]), "{v}");
    let nodes = cli0.rosapi("/rosapi/nodes", "{}");
    assert!(
        nodes["nodes"]
            .as_array()
            .is_some_and(|n| n.contains(&json!(srv0_name))),
        "{nodes}"
    );
    let v3 = servers(&mut cli3);
    assert_eq!(
        v3["action_servers"],
        json!(["/fib", "/tf2_web_republisher"])
    );
    // srv3 declared a node (to join domain 3): that node serves it.
    assert_eq!(v3["nodes"], json!([srv3_node, "/rosgate"]), "{v3}");
    let all = cli0.rosapi("/rosapi/action_servers", r#"{"include_hidden":true}"#);
    assert_eq!(
        all["action_servers"],
        json!(["/_hidden", "/fib", "/nav", "/tf2_web_republisher"]),
        "{all}"
    );
    assert_eq!(
        all["nodes"],
        json!([srv0_name, srv0_name, srv0_name, "/rosgate"]),
        "{all}"
    );
    assert_eq!(ty(&mut cli0, "/fib"), FIB);
    assert_eq!(ty(&mut cli0, "/nav"), "nav2_msgs/action/NavigateToPose");
    assert_eq!(ty(&mut cli3, "/fib"), "other/action/Fib");
    assert_eq!(ty(&mut cli3, "/nav"), "");
    assert_eq!(ty(&mut cli0, "/none"), "");
    // Goals route within the caller's domain only.
    cli3.goal("/nav", r#""n""#, false);
    cli3.expect_goal_failure("/nav", &json!("n"), 0);
    cli3.goal("/fib", r#""f3""#, false);
    srv3.expect_goal("/fib");
    cli0.goal("/fib", r#""f0""#, false);
    srv0.expect_goal("/fib");
    srv0.assert_quiet();
    srv3.assert_quiet();
    // Lists follow unadvertise and disconnect.
    srv0.unadvertise_action("/nav");
    assert_eq!(
        servers(&mut cli0)["action_servers"],
        json!(["/fib", "/tf2_web_republisher"])
    );
    drop(srv3);
    cli3.expect_goal_failure("/fib", &json!("f3"), 6);
    assert_eq!(
        servers(&mut cli3),
        json!({"action_servers": ["/tf2_web_republisher"], "nodes": ["/rosgate"]})
    );
    assert_eq!(
        servers(&mut cli0)["action_servers"],
        json!(["/fib", "/tf2_web_republisher"])
    );
}

fn cancel_goal_service_cancels_all_of_the_callers_goals(tr: Tr) {
    let gw = Gateway::start(&[]);
    let mut srv = Peer::new(&gw, tr);
    let mut cli = Peer::new(&gw, tr);
    let mut other = Peer::new(&gw, tr);
    srv.advertise_action("/all", FIB);
    srv.advertise_action("/else", FIB);
    cli.goal("/all", r#""a""#, false);
    cli.goal("/all", r#""b""#, false);
    cli.goal("/else", r#""c""#, false);
    let ga = srv.expect_goal("/all")["id"].clone();
    let gb = srv.expect_goal("/all")["id"].clone();
    srv.expect_goal("/else");
    other.goal("/all", r#""a""#, false);
    let go = srv.expect_goal("/all")["id"].clone();
    cli.call("/all/_action/cancel_goal", r#""ca""#, "{}");
    let r = cli.recv();
    assert_eq!(
        r,
        json!({"op":"service_response","service":"/all/_action/cancel_goal","id":"ca",
               "values":{"return_code":0,"goals_canceling":[],"canceled":2},"result":true})
    );
    let mut cancels = HashSet::new();
    for _ in 0..2 {
        let v = srv.recv();
        assert_eq!(v["op"], "cancel_action_goal", "{v}");
        assert_eq!(v["action"], "/all", "{v}");
        cancels.insert(v["id"].to_string());
    }
    assert_eq!(cancels, HashSet::from([ga.to_string(), gb.to_string()]));
    srv.assert_quiet();
    for g in [&ga, &gb] {
        srv.result("/all", g, "{}", 5, true);
    }
    for id in ["a", "b"] {
        assert_eq!(cli.expect_result("/all", &json!(id))["status"], 5);
    }
    // Nothing left to cancel.
    cli.call("/all/_action/cancel_goal", r#""cb""#, "{}");
    assert_eq!(cli.recv()["values"]["canceled"], 0);
    // A client providing that service gets the call instead.
    let mut prov = gw.client();
    prov.advertise_service("/all/_action/cancel_goal");
    other.call("/all/_action/cancel_goal", r#""cc""#, "{}");
    let fwd = prov.expect_forwarded("/all/_action/cancel_goal");
    prov.respond(
        "/all/_action/cancel_goal",
        &fwd["id"].to_string(),
        r#"{"return_code":1}"#,
        "true",
    );
    assert_eq!(other.recv()["values"]["return_code"], 1);
    srv.assert_quiet();
    srv.result("/all", &go, "{}", 4, true);
    assert_eq!(other.expect_result("/all", &json!("a"))["status"], 4);
    other.assert_quiet();
    let s = gw.stats();
    assert_eq!(counter(&s, "goal_cancels"), 2, "{s}");
    assert_eq!(counter(&s, "goals_canceled"), 2, "{s}");
}

fn slow_caller_loses_feedback_never_results(tr: Tr) {
    const N: u64 = 1000;
    let gw = Gateway::start(&["--max-queue-bytes", "262144"]);
    let mut srv = Peer::new(&gw, tr);
    srv.advertise_action("/slow", FIB);
    let mut cli = Peer::slow(&gw, tr);
    // A small topic beside the feedback: feedback is thinned fairly against
    // it, so none of its few bytes is shed.
    cli.subscribe("/state");
    cli.goal("/slow", r#""s1""#, true);
    cli.goal("/slow", r#""s2""#, true);
    let g1 = srv.expect_goal("/slow")["id"].clone();
    let g2 = srv.expect_goal("/slow")["id"].clone();
    let pad = "f".repeat(8 * 1024);
    for i in 0..N {
        srv.feedback("/slow", &g1, &format!(r#"{{"seq":{i},"pad":"{pad}"}}"#));
        if i == N / 2 {
            srv.result("/slow", &g2, r#""mid""#, 4, true);
        }
        if i % 100 == 50 {
            srv.send(&format!(
                r#"{{"op":"publish","topic":"/state","msg":{{"s":{}}}}}"#,
                i / 100
            ));
        }
    }
    srv.result("/slow", &g1, r#""end""#, 4, true);
    // Everything the server sent is queued for the caller now.
    srv.assert_quiet();
    let s = gw.stats();
    assert!(counter(&s, "dropped") > 0, "no feedback shed: {s}");
    assert_eq!(counter(&s, "feedback_forwarded"), N, "{s}");
    assert_eq!(counter(&s, "closes_total"), 0, "nobody closed: {s}");
    // Drain: feedback in order with gaps, both results, the last feedback kept.
    let mut last: Option<u64> = None;
    let mut n = 0;
    let mut results = Vec::new();
    let mut states = Vec::new();
    let dl = deadline(Duration::from_secs(20));
    while results.len() < 2 {
        let v = cli
            .try_recv(dl)
            .unwrap_or_else(|| panic!("caller stopped after {n} feedback, results {results:?}"));
        match v["op"].as_str() {
            Some("action_feedback") => {
                let seq = v["values"]["seq"].as_u64().unwrap();
                assert!(
                    last.is_none_or(|l| seq > l),
                    "out of order: {seq} after {last:?}"
                );
                last = Some(seq);
                n += 1;
            }
            Some("action_result") => results.push((v["id"].clone(), v["values"].clone())),
            Some("publish") => states.push(v["msg"]["s"].as_u64().unwrap()),
            _ => panic!("unexpected {v}"),
        }
    }
    assert!(n < N, "nothing was shed ({n} of {N})");
    assert_eq!(
        states,
        (0..N / 100).collect::<Vec<_>>(),
        "small topic starved"
    );
    assert_eq!(last, Some(N - 1), "the newest feedback survives");
    assert_eq!(
        results,
        [(json!("s2"), json!("mid")), (json!("s1"), json!("end"))]
    );
    cli.assert_quiet();
}

fn actions_per_connection_limit(tr: Tr) {
    let gw = Gateway::start(&["--max-actions-per-conn", "2"]);
    let mut srv = Peer::new(&gw, tr);
    srv.advertise_action("/a1", FIB);
    srv.advertise_action("/a2", FIB);
    // Advertising one it serves again is not a new one.
    srv.advertise_action("/a1", FIB);
    srv.send(r#"{"op":"advertise_action","action":"/a3","type":"t/T","id":"third"}"#);
    srv.expect_error(&json!("third"));
    let mut cli = Peer::new(&gw, tr);
    cli.goal("/a3", r#""g""#, false);
    cli.expect_goal_failure("/a3", &json!("g"), 0);
    let s = gw.stats();
    assert_eq!(counter(&s, "actions"), 2, "{s}");
    assert_eq!(counter(&s, "errors.too_many_registrations"), 1, "{s}");
}

fn counters_account_for_every_goal(tr: Tr) {
    let gw = Gateway::start(&[]);
    let base = gw.stats();
    let mut srv = Peer::new(&gw, tr);
    let mut srv2 = Peer::new(&gw, tr);
    let mut cli = Peer::new(&gw, tr);
    srv.advertise_action("/k", FIB);
    srv2.advertise_action("/k2", FIB);
    assert_eq!(counter(&gw.stats(), "actions"), 2);
    // Succeeded, with two feedback.
    cli.goal("/k", r#""ok""#, true);
    let g = srv.expect_goal("/k")["id"].clone();
    srv.feedback("/k", &g, "1");
    srv.feedback("/k", &g, "2");
    srv.result("/k", &g, "{}", 4, true);
    // Cancelled.
    cli.goal("/k", r#""cancel""#, false);
    let g = srv.expect_goal("/k")["id"].clone();
    cli.cancel("/k", r#""cancel""#);
    srv.expect_cancel("/k", &g);
    srv.result("/k", &g, "{}", 5, true);
    // Aborted by the server itself.
    cli.goal("/k", r#""abort""#, false);
    let g = srv.expect_goal("/k")["id"].clone();
    srv.result("/k", &g, r#""boom""#, 6, false);
    // No server.
    cli.goal("/none", r#""none""#, false);
    // Refused: a duplicate id ("dup" stays in flight).
    cli.goal("/k", r#""dup""#, true);
    let gdup = srv.expect_goal("/k")["id"].clone();
    cli.goal("/k", r#""dup""#, false);
    // Timed out, then its result orphaned.
    cli.goal_with("/k", r#""late""#, "{}", r#","timeout":0.1"#);
    let g = srv.expect_goal("/k")["id"].clone();
    srv.expect_cancel("/k", &g);
    srv.result("/k", &g, "{}", 4, true);
    // Feedback not asked for.
    cli.goal("/k", r#""quiet""#, false);
    let g = srv.expect_goal("/k")["id"].clone();
    srv.feedback("/k", &g, "0");
    srv.result("/k", &g, "{}", 4, true);
    // A result naming no goal.
    srv.result("/k", &json!("rg-999999"), "{}", 4, true);
    srv.expect_error(&json!("rg-999999"));
    // Server gone.
    cli.goal("/k2", r#""gone""#, false);
    srv2.expect_goal("/k2");
    drop(srv2);
    let mut ends = HashMap::new();
    let mut feedback = 0;
    while ends.len() < 8 {
        let v = cli.recv();
        match v["op"].as_str() {
            Some("action_feedback") => feedback += 1,
            Some("action_result") => {
                let id = v["id"].as_str().unwrap().to_string();
                assert!(
                    ends.insert(id, v["status"].clone()).is_none(),
                    "ended twice: {v}"
                );
            }
            _ => panic!("unexpected {v}"),
        }
    }
    assert_eq!(feedback, 2);
    cli.assert_quiet();
    let want: HashMap<String, Value> = [
        ("ok", 4),
        ("cancel", 5),
        ("abort", 6),
        ("none", 0),
        ("dup", 0),
        ("late", 6),
        ("quiet", 4),
        ("gone", 6),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), json!(v)))
    .collect();
    assert_eq!(ends, want, "every goal ended once, the right way");
    // The caller leaves with "dup" in flight: orphaned, its feedback and
    // result dropped.
    drop(cli);
    srv.expect_cancel("/k", &gdup);
    srv.feedback("/k", &gdup, "3");
    srv.result("/k", &gdup, "{}", 4, true);
    srv.assert_quiet();
    let s = gw.stats();
    let d = |k: &str| counter(&s, k) - counter(&base, k);
    for (k, n) in [
        ("goals_sent", 7),
        ("goals_succeeded", 2),
        ("goals_canceled", 1),
        ("goals_aborted", 1),
        ("goals_failed_no_server", 1),
        ("goals_failed_server_gone", 1),
        ("goals_failed_refused", 1),
        ("goals_timed_out", 1),
        ("goals_failed_shutdown", 0),
        ("goals_orphaned", 2),
        ("goal_results_orphaned", 2),
        ("goal_cancels", 1),
        ("feedback_forwarded", 2),
        ("feedback_stale", 2),
        ("action_messages_stale", 1),
        ("errors.unknown_goal", 1),
    ] {
        assert_eq!(d(k), n, "{k}: {s}");
    }
    assert_eq!(counter(&s, "actions"), 1, "{s}");
    for k in ["calls_pending", "goals_pending", "memory_calls_bytes"] {
        assert_eq!(counter(&s, k), 0, "{k}: {s}");
    }
}

/// Callers and servers on different transports reach each other.
#[test]
fn goals_cross_transports() {
    let gw = Gateway::start(&[]);
    for (caller, server) in [(Tr::Ws, Tr::Tcp), (Tr::Tcp, Tr::Ws)] {
        let action = format!("/cross{}", uniq());
        let mut srv = Peer::new(&gw, server);
        let mut cli = Peer::new(&gw, caller);
        srv.advertise_action(&action, FIB);
        cli.goal(&action, r#""x""#, true);
        let gid = srv.expect_goal(&action)["id"].clone();
        srv.feedback(&action, &gid, r#"{"f":1}"#);
        assert_eq!(cli.expect_feedback(&action, &json!("x"))["values"]["f"], 1);
        cli.cancel(&action, r#""x""#);
        srv.expect_cancel(&action, &gid);
        srv.result(&action, &gid, r#"{"r":2}"#, 5, true);
        let r = cli.expect_result(&action, &json!("x"));
        assert_eq!((&r["status"], &r["values"]["r"]), (&json!(5), &json!(2)));
        cli.assert_quiet();
        srv.assert_quiet();
    }
}

/// rosbridge's leniencies on the WebSocket: a goal without `action_type`
/// or `args`, a failed result without `values` (roslib's `setFailed`).
#[test]
fn websocket_goals_and_results_take_rosbridge_shortcuts() {
    let gw = Gateway::start(&[]);
    let mut srv = Peer::new(&gw, Tr::Ws);
    let mut cli = Peer::new(&gw, Tr::Ws);
    srv.advertise_action("/rb", FIB);
    cli.send(r#"{"op":"send_action_goal","id":"bare","action":"/rb"}"#);
    let g = srv.expect_goal("/rb");
    assert_eq!(
        (&g["args"], &g["feedback"]),
        (&json!({}), &json!(false)),
        "{g}"
    );
    srv.send(&format!(
        r#"{{"op":"action_result","id":{},"action":"/rb","status":6,"result":false}}"#,
        g["id"]
    ));
    let r = cli.expect_result("/rb", &json!("bare"));
    assert_goal_failure(&r, 6);
    // The strict dialect on TCP wants them.
    let mut tcp = gw.client();
    tcp.send_line(r#"{"op":"send_action_goal","id":"t","action":"/rb","args":{}}"#);
    tcp.expect_error("t");
    tcp.send_line(r#"{"op":"send_action_goal","action":"/rb","action_type":"x","args":{}}"#);
    tcp.expect_error_no_id();
    srv.assert_quiet();
    cli.assert_quiet();
}

/// A gateway shutting down ends every goal in flight (`status` 6) before
/// it closes.
#[test]
fn shutdown_aborts_goals_in_flight() {
    let gw = Gateway::start(&[]);
    let mut srv = Peer::new(&gw, Tr::Tcp);
    srv.advertise_action("/sd", FIB);
    let mut tcp = Peer::new(&gw, Tr::Tcp);
    let mut ws = Peer::new(&gw, Tr::Ws);
    tcp.goal("/sd", r#""t""#, false);
    ws.goal("/sd", r#""w""#, false);
    srv.expect_goal("/sd");
    srv.expect_goal("/sd");
    gw.signal(libc::SIGTERM);
    for (p, id) in [(&mut tcp, "t"), (&mut ws, "w")] {
        let v = p.expect_goal_failure("/sd", &json!(id), 6);
        assert!(
            v["values"].as_str().unwrap().contains("shutting down"),
            "{v}"
        );
    }
}
