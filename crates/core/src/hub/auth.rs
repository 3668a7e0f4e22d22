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
//! - introspection shows a role only the names it may use.

use std::time::Instant;

use rosgate_wire::query;
use rosgate_wire::ws::handshake::{self, HttpRequest, Opening};

use super::Hub;
use crate::access::{Access, Class, Denied, RoleId};
use crate::codes::{CloseReason, ErrorCode};
use crate::conn::ConnRef;
use crate::counters::Counter;
use rosgate_wire::encode::Level;

/// The token a request carries: `Authorization: Bearer <token>`, else the
/// target's `?token=` (roslibjs cannot set headers).
fn presented_token(authorization: Option<&str>, target: &str) -> Option<String> {
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

impl Hub {
    /// Sets who may connect and what they may do (the server, at start).
    pub fn set_access(&mut self, access: Access) {
        self.access = access;
    }

    /// The access rules (read by the shell's start-up log).
    pub fn access(&self) -> &Access {
        &self.access
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
                    "auth: authentication failed; closing"
                };
                self.send_status(me, Level::Error, msg, id, now);
                self.close(me.key, CloseReason::AuthFailed, now);
            }
        }
    }

    /// A request from a connection that has not authenticated.
    pub(super) fn unauthenticated(&mut self, me: ConnRef, id: Option<&[u8]>, now: Instant) {
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

    /// Checks a WebSocket opening's origin and token. `Err` holds the HTTP
    /// refusal to send and the close reason.
    pub(super) fn check_opening(
        &mut self,
        me: ConnRef,
        opening: &Opening,
        now: Instant,
    ) -> Result<(), (Vec<u8>, CloseReason)> {
        if let Err(Denied::Origin(o)) = self.access.origin_allowed(opening.origin.as_deref()) {
            let msg = format!(
                "origin {o:?} may not open a WebSocket here (loopback pages and non-browser clients may; others are listed with --ws-allowed-origins)"
            );
            return Err((
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
                Err((
                    handshake::refusal(
                        401,
                        "Unauthorized",
                        "a WebSocket URL that declares a node or a domain must carry its token (?token=)",
                    ),
                    CloseReason::AuthFailed,
                ))
            }
            None => Ok(()),
            Some(t) => match self.access.authenticate(t.as_bytes()) {
                Ok(role) => {
                    if let Some(c) = self.live_mut(me) {
                        c.authorize(role);
                    }
                    self.counters.inc(Counter::Authenticated);
                    let _ = now;
                    Ok(())
                }
                Err(_) => Err((
                    handshake::refusal(401, "Unauthorized", "authentication failed"),
                    CloseReason::AuthFailed,
                )),
            },
        }
    }

    /// Whether a plain HTTP request may read `/metrics`: always with
    /// authentication off, else with a valid token (header or `?token=`).
    pub(super) fn http_authorized(&self, req: &HttpRequest) -> bool {
        if !self.access.required() {
            return true;
        }
        presented_token(req.authorization.as_deref(), &req.target)
            .is_some_and(|t| self.access.authenticate(t.as_bytes()).is_ok())
    }
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
