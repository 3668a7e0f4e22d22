//! Action goals on the fake clock: deadlines (exactly once, at the
//! deadline, with a cancel to the server), orphans (dropped results,
//! forgotten after [`ORPHAN_TIMEOUT`]) and cleanup (every table empty once
//! everyone leaves).

use super::*;
use crate::calls::ORPHAN_TIMEOUT;

const ORPHAN_MS: u64 = ORPHAN_TIMEOUT.as_millis() as u64;

impl T {
    /// Opens a connection serving `actions`.
    fn action_server(&mut self, actions: &[&str]) -> u32 {
        let s = self.open();
        for a in actions {
            self.send(
                s,
                &format!(r#"{{"op":"advertise_action","action":"{a}","type":"x/action/T"}}"#),
            );
            assert_eq!(self.one(s)["level"], "info");
        }
        s
    }

    /// `caller` sends goal `id` (raw JSON) for `action`; `extra` is added
    /// to the request (`,"timeout":0.5`).
    fn goal(&mut self, caller: u32, action: &str, id: &str, extra: &str) {
        self.send(
            caller,
            &format!(
                r#"{{"op":"send_action_goal","id":{id},"action":"{action}","action_type":"x/action/T","args":{{}}{extra}}}"#
            ),
        );
    }

    /// The gateway id of the goal `server` was just sent.
    fn goal_id(&mut self, server: u32) -> String {
        let g = self.one(server);
        assert_eq!(g["op"], "send_action_goal", "{g}");
        g["id"].as_str().expect("string id").to_string()
    }

    fn result(&mut self, server: u32, action: &str, gid: &str, status: u8) {
        self.send(
            server,
            &format!(
                r#"{{"op":"action_result","id":"{gid}","action":"{action}","values":{{}},"status":{status},"result":true}}"#
            ),
        );
    }

    fn feedback(&mut self, server: u32, action: &str, gid: &str) {
        self.send(
            server,
            &format!(r#"{{"op":"action_feedback","id":"{gid}","action":"{action}","values":1}}"#),
        );
    }

    fn leave(&mut self, key: u32) {
        self.hub.close(key, CloseReason::PeerClosed, self.now);
        self.free_closed();
    }

    fn count(&self, c: Counter) -> u64 {
        self.hub.counters().get(c)
    }

    fn me(&self, key: u32) -> ConnRef {
        self.hub.inspect().conn_ref(key).expect("open")
    }
}

/// The next line for `caller` ends goal `id` as a gateway failure.
fn assert_failure(v: &Value, id: impl Into<Value>, status: u64) {
    assert_eq!(
        (&v["op"], &v["id"], &v["status"], &v["result"]),
        (
            &Value::from("action_result"),
            &id.into(),
            &Value::from(status),
            &Value::from(false)
        ),
        "{v}"
    );
    assert!(v["values"].as_str().is_some_and(|s| !s.is_empty()), "{v}");
}

fn assert_cancel(v: &Value, gid: &str) {
    assert_eq!(
        (&v["op"], &v["id"]),
        (&Value::from("cancel_action_goal"), &Value::from(gid)),
        "{v}"
    );
}

#[test]
fn goal_with_timeout_expires_exactly_once_at_its_deadline() {
    let mut t = T::new(Limits::default());
    let s = t.action_server(&["/a"]);
    let c = t.open();
    t.goal(c, "/a", "\"g\"", r#","timeout":0.5,"feedback":true"#);
    let gid = t.goal_id(s);
    t.advance(499);
    assert!(t.recv(c).is_empty() && t.recv(s).is_empty(), "not yet");
    assert_eq!(t.hub.inspect().calls().len(), 1);
    t.advance(1);
    let r = t.one(c);
    assert_failure(&r, "g", 6);
    assert!(r["values"]
        .as_str()
        .is_some_and(|m| m.contains("timed out")));
    assert_cancel(&t.one(s), &gid);
    assert_eq!(
        (
            t.count(Counter::GoalsTimedOut),
            t.count(Counter::GoalsOrphaned)
        ),
        (1, 1)
    );
    // An orphan now: out of the caller's books, still in the server's.
    let (cr, sr) = (t.me(c), t.me(s));
    assert_eq!(t.hub.inspect().calls().goals_in_flight(cr), 0);
    assert_eq!(t.hub.inspect().calls().serving_goals(sr), 1);
    assert_eq!(t.hub.inspect().gauges().get(Gauge::GoalsPending), 1);
    // Never again, however long we wait.
    for _ in 0..10 {
        t.advance(1_000);
        assert!(t.recv(c).is_empty() && t.recv(s).is_empty());
    }
    assert_eq!(t.count(Counter::GoalsTimedOut), 1);
    // The server's late feedback and result are dropped, not errors.
    t.feedback(s, "/a", &gid);
    t.result(s, "/a", &gid, 5);
    assert!(t.recv(s).is_empty() && t.recv(c).is_empty());
    assert_eq!(
        (
            t.count(Counter::FeedbackStale),
            t.count(Counter::GoalResultsOrphaned),
            t.count(Counter::ActionMessagesStale),
            t.count(Counter::GoalsCanceled),
        ),
        (1, 1, 0, 0)
    );
    assert!(t.hub.inspect().calls().is_empty());
    assert_eq!(t.hub.inspect().calls().bytes(), 0);
}

#[test]
fn answered_goal_never_times_out() {
    let mut t = T::new(Limits::default());
    let s = t.action_server(&["/a"]);
    let c = t.open();
    t.goal(c, "/a", "1", r#","timeout":0.2"#);
    let gid = t.goal_id(s);
    t.advance(100);
    t.result(s, "/a", &gid, 4);
    assert_eq!(t.one(c)["status"], 4);
    t.advance(500);
    assert!(t.recv(c).is_empty() && t.recv(s).is_empty());
    assert_eq!(t.count(Counter::GoalsTimedOut), 0);
    assert!(t.hub.inspect().calls().is_empty());
}

#[test]
fn goal_deadlines_default_per_goal_and_capped() {
    let mut t = T::new(Limits {
        goal_timeout: Some(Duration::from_millis(200)),
        max_call_timeout: Duration::from_millis(1_000),
        ..Limits::default()
    });
    let s = t.action_server(&["/a"]);
    let c = t.open();
    t.goal(c, "/a", "\"dflt\"", "");
    t.goal(c, "/a", "\"capped\"", r#","timeout":5"#);
    t.goal(c, "/a", "\"own\"", r#","timeout":0.3"#);
    t.goal(c, "/a", "\"zero\"", r#","timeout":0"#);
    assert_eq!(t.recv(s).len(), 4);
    // (ms from the last step, goals due then)
    let mut ends = Vec::new();
    for (step, due) in [
        (199, &[][..]),
        (1, &["dflt", "zero"][..]),
        (99, &[]),
        (1, &["own"]),
        (699, &[]),
        (1, &["capped"]),
        (5_000, &[]),
    ] {
        t.advance(step);
        let got: Vec<String> = t
            .recv(c)
            .iter()
            .map(|v| {
                assert_eq!(
                    (&v["status"], &v["result"]),
                    (&Value::from(6), &Value::from(false))
                );
                v["id"].as_str().expect("id").to_string()
            })
            .collect();
        assert_eq!(got, due, "at +{step} ms");
        assert_eq!(t.recv(s).len(), due.len(), "one cancel per goal");
        ends.extend(got);
    }
    assert_eq!(ends.len(), 4);
    assert_eq!(t.count(Counter::GoalsTimedOut), 4);
}

#[test]
fn goals_have_no_deadline_unless_asked() {
    let mut t = T::new(Limits::default());
    let s = t.action_server(&["/a"]);
    let c = t.open();
    t.goal(c, "/a", "1", "");
    let gid = t.goal_id(s);
    for _ in 0..24 {
        t.advance(3_600_000);
    }
    assert!(t.recv(c).is_empty());
    t.result(s, "/a", &gid, 4);
    assert_eq!(t.one(c)["status"], 4);
}

#[test]
fn orphan_of_a_caller_that_left_is_forgotten_after_orphan_timeout() {
    let mut t = T::new(Limits {
        max_goals_per_server: 1,
        ..Limits::default()
    });
    let s = t.action_server(&["/a"]);
    let c = t.open();
    t.goal(c, "/a", "\"g\"", r#","feedback":true"#);
    let gid = t.goal_id(s);
    t.leave(c);
    assert_cancel(&t.one(s), &gid);
    assert_eq!(t.count(Counter::GoalsOrphaned), 1);
    assert_eq!(
        t.hub.inspect().calls().len(),
        1,
        "waiting for the server's result"
    );
    // The orphan still holds the server's only slot.
    let c2 = t.open();
    t.goal(c2, "/a", "\"h\"", "");
    assert_failure(&t.one(c2), "h", 0);
    t.advance(ORPHAN_MS - 1);
    assert_eq!(t.hub.inspect().calls().len(), 1);
    t.feedback(s, "/a", &gid);
    assert!(t.recv(s).is_empty(), "late feedback of an orphan: no error");
    t.advance(1);
    assert!(
        t.hub.inspect().calls().is_empty(),
        "forgotten at ORPHAN_TIMEOUT"
    );
    assert!(t.recv(s).is_empty() && t.recv(c2).is_empty(), "silently");
    // Its result is now just unknown; the slot is free.
    t.result(s, "/a", &gid, 5);
    let e = t.one(s);
    assert_eq!(
        (&e["level"], &e["id"]),
        (&Value::from("error"), &Value::from(gid.as_str()))
    );
    assert_eq!(
        (
            t.count(Counter::GoalResultsOrphaned),
            t.count(Counter::ActionMessagesStale),
            t.count(Counter::FeedbackStale),
        ),
        (0, 1, 1)
    );
    t.goal(c2, "/a", "\"h\"", "");
    t.goal_id(s);
}

#[test]
fn orphan_of_a_timed_out_goal_is_forgotten_after_orphan_timeout() {
    let mut t = T::new(Limits::default());
    let s = t.action_server(&["/a"]);
    let c = t.open();
    t.goal(c, "/a", "1", r#","timeout":1"#);
    let gid = t.goal_id(s);
    t.advance(1_000);
    assert_failure(&t.one(c), 1, 6);
    assert_cancel(&t.one(s), &gid);
    t.advance(ORPHAN_MS - 1);
    assert_eq!(t.hub.inspect().calls().len(), 1);
    t.advance(1);
    assert!(t.hub.inspect().calls().is_empty());
    assert!(t.recv(c).is_empty() && t.recv(s).is_empty());
    assert_eq!(t.count(Counter::GoalsTimedOut), 1);
}

#[test]
fn server_leaving_after_a_time_out_tells_the_caller_nothing_more() {
    let mut t = T::new(Limits::default());
    let s = t.action_server(&["/a"]);
    let c = t.open();
    t.goal(c, "/a", "1", r#","timeout":0.1"#);
    t.goal(c, "/a", "2", "");
    t.recv(s);
    t.advance(100);
    assert_failure(&t.one(c), 1, 6);
    t.leave(s);
    // Only goal 2 ends now: goal 1 already ended once.
    assert_failure(&t.one(c), 2, 6);
    assert!(t.recv(c).is_empty());
    assert_eq!(t.count(Counter::GoalsFailedServerGone), 1);
    assert!(t.hub.inspect().calls().is_empty());
    assert_eq!(t.hub.inspect().gauges().get(Gauge::Actions), 0);
}

#[test]
fn unadvertise_ends_live_goals_once_and_orphans_quietly() {
    let mut t = T::new(Limits::default());
    let s = t.action_server(&["/a", "/b"]);
    let c = t.open();
    let gone = t.open();
    t.goal(gone, "/a", "1", "");
    t.goal(c, "/a", "2", "");
    t.goal(c, "/b", "3", "");
    assert_eq!(t.recv(s).len(), 3);
    t.leave(gone);
    assert_eq!(t.recv(s).len(), 1, "the orphan's cancel");
    t.send(s, r#"{"op":"unadvertise_action","action":"/a"}"#);
    assert_eq!(t.one(s)["level"], "info");
    assert_failure(&t.one(c), 2, 6);
    assert_eq!(t.hub.inspect().calls().len(), 1, "only /b's goal is left");
    assert_eq!(t.count(Counter::GoalsFailedServerGone), 1);
}

#[test]
fn shutdown_ends_every_live_goal_and_drops_orphans() {
    let mut t = T::new(Limits::default());
    let s = t.action_server(&["/a"]);
    let c = t.open();
    let gone = t.open();
    t.goal(c, "/a", "\"live\"", "");
    t.goal(gone, "/a", "\"orphan\"", "");
    t.recv(s);
    t.leave(gone);
    t.recv(s);
    t.hub.begin_shutdown(t.now);
    let r = t.one(c);
    assert_failure(&r, "live", 6);
    assert!(r["values"]
        .as_str()
        .is_some_and(|m| m.contains("shutting down")));
    assert_eq!(t.count(Counter::GoalsFailedShutdown), 1);
    assert!(t.hub.inspect().calls().is_empty());
}

/// Builds a busy graph: goals in flight, timed out, orphaned, forwarded to
/// a displaced server and to the caller itself, service calls, feedback
/// queued; then everyone leaves in `order` (all in one turn when
/// `one_turn`).
fn everyone_leaves(one_turn: bool, reverse: bool) {
    let mut t = T::new(Limits::default());
    let old = t.action_server(&["/a", "/b"]);
    let c1 = t.open();
    let c2 = t.open();
    t.goal(c1, "/a", "1", r#","feedback":true"#);
    t.goal(c2, "/a", "1", r#","timeout":0.1"#);
    t.goal(c2, "/b", "2", r#","feedback":true"#);
    let g = t.recv(old);
    let new = t.action_server(&["/a"]);
    assert_eq!(t.one(old)["level"], "info", "told it was displaced");
    t.goal(c1, "/a", "2", r#","timeout":30"#);
    t.recv(new);
    // A connection serving and calling its own action and service.
    let me = t.action_server(&["/self"]);
    t.send(
        me,
        r#"{"op":"advertise_service","service":"/s","type":"T"}"#,
    );
    t.goal(me, "/self", "\"mine\"", "");
    t.call(me, "/s", "1");
    t.call(c1, "/s", "2");
    t.recv(me);
    // Feedback queued for a caller that never reads.
    let gid = g[0]["id"].as_str().expect("id").to_string();
    t.feedback(old, "/a", &gid);
    t.advance(100); // c2's first goal times out: an orphan.
    t.leave(c2); // c2's second goal: an orphan too.
                 // c1: one to each server; c2: two orphans; me: its own.
    assert_eq!(t.hub.inspect().gauges().get(Gauge::GoalsPending), 5);
    let mut all = vec![old, c1, new, me];
    if reverse {
        all.reverse();
    }
    for k in all {
        t.hub.close(k, CloseReason::Reset, t.now);
        if !one_turn {
            t.free_closed();
        }
    }
    t.free_closed();
    assert_eq!(t.hub.conn_count(), 0);
    assert!(
        t.hub.inspect().calls().is_empty(),
        "{:?}",
        t.hub.inspect().calls()
    );
    assert_eq!(t.hub.inspect().calls().bytes(), 0);
    let g = t.hub.inspect().gauges();
    for gauge in [
        Gauge::ConnectionsOpen,
        Gauge::Actions,
        Gauge::Services,
        Gauge::CallsPending,
        Gauge::GoalsPending,
        Gauge::QueuedBytes,
        Gauge::MemoryCallsBytes,
        Gauge::MemoryRegistrationsBytes,
        Gauge::MemoryBytes,
    ] {
        assert_eq!(g.get(gauge), 0, "{gauge:?}");
    }
    assert_eq!(t.hub.memory().total(), 0);
    // Lazily cancelled timer entries go by their deadlines.
    t.advance(ORPHAN_MS + 1_000);
    assert_eq!(t.hub.inspect().calls().timer_entries(), 0);
    // Whatever arrives for the old goals now finds nothing (the slots are
    // reused by newcomers, who hear nothing).
    let n = t.action_server(&["/a"]);
    t.feedback(n, "/a", &gid);
    t.result(n, "/a", &gid, 4);
    let e = t.one(n);
    assert_eq!(e["level"], "error", "{e}");
    assert!(t.hub.inspect().calls().is_empty());
}

#[test]
fn every_table_is_empty_once_everyone_leaves() {
    for one_turn in [false, true] {
        for reverse in [false, true] {
            everyone_leaves(one_turn, reverse);
        }
    }
}

#[test]
fn goal_and_call_limits_are_counted_apart() {
    let mut t = T::new(Limits {
        max_calls_per_conn: 1,
        max_goals_per_conn: 2,
        ..Limits::default()
    });
    let s = t.action_server(&["/a"]);
    t.send(s, r#"{"op":"advertise_service","service":"/s","type":"T"}"#);
    t.recv(s);
    let c = t.open();
    t.goal(c, "/a", "1", "");
    t.goal(c, "/a", "2", "");
    t.call(c, "/s", "3");
    assert_eq!(t.recv(s).len(), 3, "two goals and a call forwarded");
    assert!(t.recv(c).is_empty());
    let cr = t.me(c);
    assert_eq!(
        (
            t.hub.inspect().calls().in_flight(cr),
            t.hub.inspect().calls().goals_in_flight(cr)
        ),
        (1, 2)
    );
    t.call(c, "/s", "4");
    t.goal(c, "/a", "5", "");
    let refused = t.recv(c);
    assert_eq!(refused.len(), 2, "{refused:?}");
    assert!(refused.iter().all(|v| v["result"] == false));
}
