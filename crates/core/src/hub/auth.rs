//! Authentication and permissions as the hub applies them: the `auth` op,
//! the WebSocket opening's origin and token, `/metrics` behind a token, and
//! the per-operation check against the connection's role
//! ([`crate::access::Access`] owns the tokens, roles and globs).
//!
//! Invariants:
//! - with authentication on, a connection that has not presented a valid
//!   token is not established: every request but `auth` gets an
//!   `unauthenticated` error, and the opening deadline closes it;
//! - a wrong or missing token closes the connection (`auth_failed`) after
//!   one error status that does not contain the token;
//! - a refused operation gets an error status `forbidden` with its id, and
//!   a refused call or goal also its failure, so no caller waits for a
//!   timeout;
//! - introspection shows a role only the names it may use;
//! - an address past its budget of wrong tokens (`crate::auth_budget`) has
//!   its tokens left unchecked: the connection is held (its input ignored,
//!   nothing sent) for the address's delay, then refused and closed. The
//!   loop never sleeps for it: held attempts wait in [`HeldAttempts`], a
//!   heap ordered by their time, released by `expire`, at most
//!   [`AUTH_RELEASES_PER_TURN`] per turn and [`MAX_AUTH_HELD`] at once.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use rosgate_wire::query;
use rosgate_wire::ws::handshake::{self, HttpRequest, Opening};

use super::Hub;
use crate::access::{Access, Class, Denied, RoleId};
use crate::auth_budget::Gate;
use crate::codes::{CloseReason, ErrorCode};
use crate::conn::ConnRef;
use crate::counters::Counter;
use rosgate_wire::encode::Level;

/// The token a request carries: `Authorization: Bearer <token>`, else the
/// target's `?token=` (roslibjs cannot set headers).
pub(super) fn presented_token(authorization: Option<&str>, target: &str) -> Option<String> {
    if let Some(a) = authorization {
        let a = a.trim();
        if a.len() > 7 && a[..7].eq_ignore_ascii_case("bearer ") {
            return Some(a[7..].trim().to_string());
        }
    }
    query::params(target)
        .into_iter()
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v)
}

/// Connections held at once for the token-guessing delay. Past it, a
/// locked address's attempt is refused at once (its token is not checked
/// either way, so an early refusal tells a guesser nothing). An entry keeps
/// its request's id (at most `MAX_ID_BYTES`) or a `401` of ~150 bytes:
/// about 4 MiB at most, outside the memory ledger.
pub const MAX_AUTH_HELD: usize = 4096;

/// Held attempts refused per loop turn (P20); the rest next turn, which
/// then does not sleep.
pub const AUTH_RELEASES_PER_TURN: usize = 256;

/// What a held connection is sent when its delay ends, before it is closed.
#[derive(Debug, PartialEq, Eq)]
enum Answer {
    /// An error status (the `auth` op's refusal) with the request's id.
    Status {
        msg: &'static str,
        id: Option<Box<[u8]>>,
    },
    /// Bytes as they are (the WebSocket opening's `401`).
    Raw(Vec<u8>),
}

#[derive(Debug, PartialEq, Eq)]
struct Held {
    at: Instant,
    /// Order among attempts of the same instant.
    seq: u64,
    who: ConnRef,
    answer: Answer,
}

impl Ord for Held {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

impl PartialOrd for Held {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// Attempts from locked addresses waiting for their refusal, earliest
/// first. An entry whose connection left meanwhile is dropped when due.
#[derive(Debug, Default)]
pub(super) struct HeldAttempts {
    heap: BinaryHeap<Reverse<Held>>,
    seq: u64,
    /// Due entries were left for the next turn.
    overdue: bool,
}

impl HeldAttempts {
    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse(h)| h.at)
    }

    pub(super) fn has_overdue(&self) -> bool {
        self.overdue
    }
}

impl Hub {
    /// Sets who may connect and what they may do (the server, at start).
    pub fn set_access(&mut self, access: Access) {
        self.access = access;
    }

    /// A new connection: with authentication off it may do everything its
    /// (open) role allows at once.
    pub(super) fn admit_role(&mut self, key: u32) {
        if !self.access.required() {
            let role = self.access.open_role();
            if let Some(c) = self.conns.get_mut(key as usize) {
                c.authorize(role);
            }
        }
    }

    fn role_of(&self, me: ConnRef) -> Option<RoleId> {
        self.conns
            .get(me.key as usize)
            .filter(|c| c.gen() == me.gen && c.is_authed())
            .map(|c| c.role())
    }

    /// Whether `me` has authenticated (always, with authentication off).
    pub(super) fn authed(&self, me: ConnRef) -> bool {
        self.role_of(me).is_some()
    }

    /// Whether `me` may do `class` on `name`; if not, sends it a
    /// `forbidden` error status with `id`.
    pub(super) fn permit(
        &mut self,
        me: ConnRef,
        class: Class,
        name: &str,
        id: Option<&[u8]>,
        now: Instant,
    ) -> bool {
        if !self.access.required() || self.is_bridge(me) {
            return true;
        }
        let role = self.role_of(me);
        if role.is_some_and(|r| self.access.allows(r, class, name)) {
            return true;
        }
        let role = role.map_or("unauthenticated", |r| self.access.role_name(r));
        let msg = format!("forbidden: role {role} may not {} {name}", class.verb());
        self.counters.error(ErrorCode::Forbidden);
        self.send_status(me, Level::Error, &msg, id, now);
        false
    }

    /// Whether names of a kind are visible to `me` in introspection: those
    /// its role may use in either of `classes`.
    pub(super) fn visible(&self, role: Option<RoleId>, classes: &[Class], name: &str) -> bool {
        if !self.access.required() {
            return true;
        }
        role.is_some_and(|r| classes.iter().any(|&c| self.access.allows(r, c, name)))
    }

    /// The role introspection answers `me` for.
    pub(super) fn viewer(&self, me: ConnRef) -> Option<RoleId> {
        self.role_of(me)
    }

    /// The `auth` op.
    pub(super) fn on_auth(
        &mut self,
        me: ConnRef,
        token: Option<&str>,
        id: Option<&[u8]>,
        now: Instant,
    ) {
        if !self.access.required() {
            let msg = "auth: authentication is not enabled on this gateway; ignored";
            return self.send_status(me, Level::Info, msg, id, now);
        }
        if self.authed(me) {
            let msg = "auth: already authenticated; ignored";
            return self.send_status(me, Level::Info, msg, id, now);
        }
        if self.is_held(me) {
            return;
        }
        if token.is_some() {
            if let Gate::Hold(delay) = self.auth_gate(me, now) {
                let answer = Answer::Status {
                    msg: "auth: authentication failed; closing",
                    id: id.map(Box::from),
                };
                return self.hold(me, delay, answer, now);
            }
        }
        match token.map(|t| self.access.authenticate(t.as_bytes())) {
            Some(Ok(role)) => {
                self.authorize(me, role, now);
                let msg = format!("authenticated as role {}", self.access.role_name(role));
                self.send_status(me, Level::Info, &msg, id, now);
            }
            Some(Err(_)) | None => {
                let msg = if token.is_none() {
                    "auth: no token (send {\"op\":\"auth\",\"token\":\"...\"}); closing"
                } else {
                    self.auth_failed(me, now);
                    "auth: authentication failed; closing"
                };
                self.send_status(me, Level::Error, msg, id, now);
                self.close(me.key, CloseReason::AuthFailed, now);
            }
        }
    }

    /// A request from a connection that has not authenticated.
    pub(super) fn unauthenticated(&mut self, me: ConnRef, id: Option<&[u8]>, now: Instant) {
        // Requests read with a held `auth` (same read) get nothing either.
        if self.is_held(me) {
            return;
        }
        self.counters.error(ErrorCode::Unauthenticated);
        let msg = "authenticate first: {\"op\":\"auth\",\"token\":\"...\"} (or the WebSocket URL's ?token=)";
        self.send_status(me, Level::Error, msg, id, now);
    }

    fn authorize(&mut self, me: ConnRef, role: RoleId, now: Instant) {
        if let Some(c) = self.live_mut(me) {
            c.authorize(role);
        }
        self.counters.inc(Counter::Authenticated);
        self.establish(me, now);
    }

    /// Checks a WebSocket opening's origin and token: `Err` holds the HTTP
    /// refusal to send and the close reason, or says that the connection is
    /// held (a locked address: the refusal is sent when its delay ends).
    pub(super) fn check_opening(
        &mut self,
        me: ConnRef,
        opening: &Opening,
        now: Instant,
    ) -> Result<(), OpeningRefused> {
        if let Err(Denied::Origin(o)) = self.access.origin_allowed(opening.origin.as_deref()) {
            let msg = format!(
                "origin {o:?} may not open a WebSocket here (loopback pages and non-browser clients may; others are listed with --ws-allowed-origins)"
            );
            return Err(OpeningRefused::Now(
                handshake::refusal(403, "Forbidden", &msg),
                CloseReason::OriginRefused,
            ));
        }
        if !self.access.required() {
            return Ok(());
        }
        match presented_token(opening.authorization.as_deref(), &opening.target) {
            // No token yet: the client may still send an `auth` op, but a
            // URL that declares a node or picks a domain would act before
            // it (holding a node name while unauthenticated).
            None if query::params(&opening.target)
                .iter()
                .any(|(k, _)| matches!(k.as_str(), "node" | "namespace" | "ns" | "remap" | "domain")) =>
            {
                Err(OpeningRefused::Now(
                    handshake::refusal(
                        401,
                        "Unauthorized",
                        "a WebSocket URL that declares a node or a domain must carry its token (?token=)",
                    ),
                    CloseReason::AuthFailed,
                ))
            }
            None => Ok(()),
            Some(t) => {
                let refusal = || handshake::refusal(401, "Unauthorized", "authentication failed");
                if let Gate::Hold(delay) = self.auth_gate(me, now) {
                    self.hold(me, delay, Answer::Raw(refusal()), now);
                    return Err(OpeningRefused::Held);
                }
                match self.access.authenticate(t.as_bytes()) {
                    Ok(role) => {
                        if let Some(c) = self.live_mut(me) {
                            c.authorize(role);
                        }
                        self.counters.inc(Counter::Authenticated);
                        Ok(())
                    }
                    Err(_) => {
                        self.auth_failed(me, now);
                        Err(OpeningRefused::Now(refusal(), CloseReason::AuthFailed))
                    }
                }
            }
        }
    }

    /// Whether a plain HTTP request may read `/metrics`: always with
    /// authentication off, else with a valid token (header or `?token=`).
    /// A wrong token counts against the address's budget; a locked
    /// address's token is not checked (refused at once: a scrape is one
    /// request, there is no connection worth holding).
    pub(super) fn http_authorized(&mut self, me: ConnRef, req: &HttpRequest, now: Instant) -> bool {
        if !self.access.required() {
            return true;
        }
        let Some(t) = presented_token(req.authorization.as_deref(), &req.target) else {
            return false;
        };
        if self.auth_gate(me, now) != Gate::Check {
            return false;
        }
        let ok = self.access.authenticate(t.as_bytes()).is_ok();
        if !ok {
            self.auth_failed(me, now);
        }
        ok
    }

    fn peer_ip(&self, me: ConnRef) -> Option<IpAddr> {
        self.conns
            .get(me.key as usize)
            .filter(|c| c.gen() == me.gen)
            .and_then(|c| c.peer())
            .map(|p| p.ip())
    }

    /// Whether `me`'s address may have its token checked now (see
    /// `crate::auth_budget`); a connection without a known address always
    /// may (in-process links, tests).
    fn auth_gate(&mut self, me: ConnRef, now: Instant) -> Gate {
        match self.peer_ip(me) {
            Some(ip) => self.auth_budget.gate(ip, now),
            None => Gate::Check,
        }
    }

    /// `me` presented a wrong token.
    fn auth_failed(&mut self, me: ConnRef, now: Instant) {
        if let Some(ip) = self.peer_ip(me) {
            self.auth_budget.failed(ip, now);
        }
    }

    fn is_held(&self, me: ConnRef) -> bool {
        self.conns
            .get(me.key as usize)
            .is_some_and(|c| c.gen() == me.gen && c.is_held())
    }

    /// Holds `me` for `delay`: its input is ignored, then it is sent
    /// `answer` and closed (at once past [`MAX_AUTH_HELD`]).
    fn hold(&mut self, me: ConnRef, delay: Duration, answer: Answer, now: Instant) {
        self.counters.inc(Counter::AuthHeld);
        if self.held.heap.len() >= MAX_AUTH_HELD {
            return self.refuse_held(me, answer, now);
        }
        let Some(c) = self.live_mut(me) else {
            return;
        };
        c.hold();
        self.held.seq += 1;
        let seq = self.held.seq;
        self.held.heap.push(Reverse(Held {
            at: now + delay,
            seq,
            who: me,
            answer,
        }));
    }

    fn refuse_held(&mut self, me: ConnRef, answer: Answer, now: Instant) {
        if !self.live(me) {
            return;
        }
        match answer {
            Answer::Status { msg, id } => {
                self.send_status(me, Level::Error, msg, id.as_deref(), now)
            }
            Answer::Raw(bytes) => self.send_raw(me, &bytes, now),
        }
        self.close(me.key, CloseReason::AuthFailed, now);
    }

    /// Refuses the held attempts whose delay has passed (part of `expire`).
    pub(super) fn release_held(&mut self, now: Instant) {
        self.held.overdue = false;
        for _ in 0..AUTH_RELEASES_PER_TURN {
            match self.held.heap.peek() {
                Some(Reverse(h)) if h.at <= now => {}
                _ => return,
            }
            if let Some(Reverse(h)) = self.held.heap.pop() {
                self.refuse_held(h.who, h.answer, now);
            }
        }
        self.held.overdue = self.held.heap.peek().is_some_and(|Reverse(h)| h.at <= now);
    }
}

/// Why a WebSocket opening is not upgraded.
#[derive(Debug)]
pub(super) enum OpeningRefused {
    /// Send this refusal now and close for this reason.
    Now(Vec<u8>, CloseReason),
    /// Held: the refusal is sent when the address's delay ends.
    Held,
}

#[cfg(test)]
mod tests {
    use super::presented_token;

    #[test]
    fn tokens_come_from_the_header_or_the_query() {
        assert_eq!(
            presented_token(Some("Bearer abc"), "/"),
            Some("abc".to_string())
        );
        assert_eq!(
            presented_token(Some("bearer  abc "), "/?token=q"),
            Some("abc".to_string())
        );
        assert_eq!(
            presented_token(None, "/?x=1&token=a%2Bb"),
            Some("a+b".into())
        );
        assert_eq!(presented_token(Some("Basic xyz"), "/"), None);
        assert_eq!(presented_token(None, "/"), None);
    }
}
