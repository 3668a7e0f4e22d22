//! Token guessing on a fake clock: the per-address budget of wrong tokens
//! as the hub applies it (held connections, their refusal when the delay
//! ends, other addresses untouched).

use std::net::SocketAddr;

use super::*;
use crate::access::{Access, TokenLine};
use crate::limits::DEFAULT_AUTH_FAILURE_BUDGET;

const TOKEN: &str = "0123456789abcdef-right";
const WRONG: &str = "0123456789abcdef-wrong";

fn guarded() -> T {
    let mut t = T::new(Limits::default());
    let line = TokenLine {
        token: TOKEN.into(),
        role: "admin".into(),
        line: 1,
    };
    t.hub
        .set_access(Access::new(vec![line], vec![], vec![]).expect("access"));
    t
}

fn open_from(t: &mut T, last: u8) -> u32 {
    let peer = SocketAddr::from(([127, 0, 0, last], 40_000));
    t.hub
        .open_from(Transport::Tcp, Some(peer), t.now)
        .expect("admitted")
        .key
}

fn auth(t: &mut T, key: u32, token: &str) {
    t.send(
        key,
        &format!(r#"{{"op":"auth","token":"{token}","id":"a"}}"#),
    );
}

#[test]
fn past_the_budget_an_address_is_held_then_refused_and_others_are_not_affected() {
    let mut t = guarded();
    for i in 0..DEFAULT_AUTH_FAILURE_BUDGET {
        let k = open_from(&mut t, 1);
        auth(&mut t, k, WRONG);
        let got = t.recv(k);
        assert_eq!(got.len(), 1, "attempt {i}: {got:?}");
        assert_eq!(got[0]["msg"], "auth: authentication failed; closing");
        assert_eq!(
            t.hub.conn(k).and_then(Conn::closing),
            Some(CloseReason::AuthFailed)
        );
        t.free_closed();
    }
    // The next attempt, right token or wrong, is not checked: held 250 ms,
    // its input ignored, nothing sent.
    let k = open_from(&mut t, 1);
    auth(&mut t, k, TOKEN);
    t.send(k, r#"{"op":"subscribe","topic":"/x","id":"s"}"#);
    assert!(t.recv(k).is_empty());
    assert!(t.hub.conn(k).is_some_and(|c| c.is_held() && c.is_open()));
    assert_eq!(t.hub.counters().get(Counter::AuthHeld), 1);
    assert!(t.hub.next_deadline() <= t.now + Duration::from_millis(250));
    // Another address authenticates at once meanwhile.
    let other = open_from(&mut t, 2);
    auth(&mut t, other, TOKEN);
    assert_eq!(t.one(other)["msg"], "authenticated as role admin");
    t.advance(249);
    assert!(
        t.hub.conn(k).is_some_and(|c| c.is_open()),
        "held until 250 ms"
    );
    t.now += Duration::from_millis(1);
    t.hub.expire(t.now);
    let got = t.recv(k);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["msg"], "auth: authentication failed; closing");
    assert_eq!(got[0]["id"], "a");
    assert_eq!(
        t.hub.conn(k).and_then(Conn::closing),
        Some(CloseReason::AuthFailed)
    );
    t.free_closed();
    // The next one is held twice as long.
    let k = open_from(&mut t, 1);
    auth(&mut t, k, WRONG);
    t.advance(499);
    assert!(t.hub.conn(k).is_some_and(|c| c.is_open()));
    t.advance(1);
    assert!(t.hub.conn(k).is_none(), "refused and freed at 500 ms");
    let c = t.hub.counters();
    assert_eq!(c.get(Counter::AuthHeld), 2);
    assert_eq!(
        c.closes_of(CloseReason::AuthFailed),
        DEFAULT_AUTH_FAILURE_BUDGET as u64 + 2
    );
    assert_eq!(c.get(Counter::Authenticated), 1);
    // A quiet minute later, the address is checked again.
    t.advance(60_000);
    let k = open_from(&mut t, 1);
    auth(&mut t, k, TOKEN);
    assert_eq!(t.one(k)["msg"], "authenticated as role admin");
}

#[test]
fn a_held_connection_that_leaves_is_forgotten_when_its_time_comes() {
    let mut t = guarded();
    for _ in 0..DEFAULT_AUTH_FAILURE_BUDGET {
        let k = open_from(&mut t, 1);
        auth(&mut t, k, WRONG);
        t.free_closed();
    }
    let k = open_from(&mut t, 1);
    auth(&mut t, k, WRONG);
    t.hub.on_eof(k, t.now);
    t.free_closed();
    // Its slot is reused by someone else, who must not get the refusal.
    let other = open_from(&mut t, 2);
    assert_eq!(other, k, "the slab key is reused");
    t.advance(300);
    assert!(t.recv(other).is_empty());
    assert!(t.hub.conn(other).is_some_and(|c| c.is_open()));
}
