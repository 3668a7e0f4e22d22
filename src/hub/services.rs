//! Service operations and the life of a call: forward, answer, fail, time
//! out. Every call leaves the call table exactly once, and its caller gets
//! exactly one response then, under its original id.

use std::time::{Duration, Instant};

use crate::codec::Raw;

use super::{Hub, RESERVED_PREFIX, STATS_SERVICE};
use crate::calls::{parse_call_id, Call};
use crate::codec::decode::Dialect;
use crate::codec::encode::{self, Level};
use crate::conn::ConnRef;
use crate::router::Unadvertised;
use crate::stats::ProtocolError;

/// Sent as `args` when a rosbridge client calls without any.
const EMPTY_ARGS: &str = "{}";

/// What a rosbridge-dialect provider's answer means, as rosbridge reads it:
/// rosbridge builds the ROS response from `values` and ignores `result`, so
/// an object `values` is a success even with `result: false` (roslibpy's
/// own tests rely on it); anything else with `result: false`, or no
/// `values` at all (roslib's handler returning false), is a failure the
/// caller learns at once instead of by timeout.
fn rosbridge_outcome<'a>(values: Option<Raw<'a>>, result: Raw<'a>) -> (&'a str, &'a str) {
    let failed = result.get() == "false";
    match values {
        Some(v) if v.get().starts_with('{') => (v.get(), "true"),
        Some(v) => (v.get(), result.get()),
        None if failed => ("\"the provider reported a failure\"", "false"),
        None => (EMPTY_ARGS, result.get()),
    }
}

/// Why a call failed; each has a reason text and a counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallFailure {
    NoProvider,
    ProviderGone,
    Unadvertised,
    Timeout,
    TooMany,
}

impl Hub {
    pub(super) fn advertise_service(
        &mut self,
        me: ConnRef,
        name: &str,
        ty: &str,
        id: Option<Raw<'_>>,
        now: Instant,
    ) {
        if name.starts_with(RESERVED_PREFIX) {
            let msg = format!("service names under {RESERVED_PREFIX} are reserved for the gateway");
            return self.protocol_error(me, ProtocolError::ReservedName, &msg, id, now);
        }
        let displaced = self.router.advertise_service(name, ty, me);
        if let Some(c) = self.live_mut(me) {
            if !c.services.iter().any(|s| &**s == name) {
                c.services.push(name.into());
            }
        }
        if let Some(old) = displaced {
            if let Some(c) = self.live_mut(old) {
                c.services.retain(|s| &**s != name);
            }
            let msg = format!("service {name} was taken over by another provider; calls already forwarded to you stay valid");
            self.send_status(old, Level::Info, &msg, None, now);
        }
        let msg = format!("advertised service {name}");
        self.send_status(me, Level::Info, &msg, id.map(|r| r.get().as_bytes()), now);
    }

    pub(super) fn unadvertise_service(
        &mut self,
        me: ConnRef,
        name: &str,
        id: Option<Raw<'_>>,
        now: Instant,
    ) {
        match self.router.unadvertise_service(name, me) {
            Unadvertised::Removed => {
                let mut name_json = Vec::new();
                encode::json_string(&mut name_json, name);
                let mut failing = Vec::new();
                if let Some(c) = self.live_mut(me) {
                    c.services.retain(|s| &**s != name);
                    failing.extend(c.calls_served.iter().copied());
                }
                failing.sort_unstable();
                for seq in failing {
                    let same = self
                        .calls
                        .get(seq)
                        .is_some_and(|call| call.service_json() == &name_json[..]);
                    if same {
                        self.fail_call(seq, CallFailure::Unadvertised, now);
                    }
                }
                let msg = format!("unadvertised service {name}");
                self.send_status(me, Level::Info, &msg, id.map(|r| r.get().as_bytes()), now);
            }
            Unadvertised::NotProvider | Unadvertised::Unknown => {
                let msg = format!("not the current provider of service {name}; nothing changed");
                self.protocol_error(me, ProtocolError::NotProvider, &msg, id, now);
            }
        }
    }

    pub(super) fn call_service(
        &mut self,
        me: ConnRef,
        name: &str,
        args: Option<Raw<'_>>,
        id: Option<&[u8]>,
        timeout: Option<f64>,
        now: Instant,
    ) {
        if name == STATS_SERVICE {
            let values = self.stats_json();
            let mut out = std::mem::take(&mut self.scratch);
            out.clear();
            encode::service_response(
                &mut out,
                b"\"/rosgate/stats\"",
                id,
                values.as_bytes(),
                b"true",
                None,
            );
            self.send_control(me, &out, now);
            self.scratch = out;
            return;
        }
        let Some(in_flight) = self.live_mut(me).map(|c| c.calls_made.len()) else {
            return;
        };
        if in_flight >= self.limits.max_calls_per_conn {
            return self.fail_now(me, name, id, CallFailure::TooMany, now);
        }
        let provider = match self.router.service(name) {
            Some(s) if self.live(s.provider) => s,
            _ => return self.fail_now(me, name, id, CallFailure::NoProvider, now),
        };
        let to = match timeout {
            Some(secs) if secs.is_finite() && secs > 0.0 => {
                Duration::from_secs_f64(secs.min(self.limits.max_call_timeout.as_secs_f64()))
            }
            _ => self.limits.call_timeout,
        };
        let deadline = now + to;
        let p = provider.provider;
        let seq = self.calls.insert(me, p, &provider.name_json, id, deadline);
        self.timers.insert(seq, deadline);
        if let Some(c) = self.live_mut(me) {
            c.calls_made.insert(seq);
        }
        if let Some(c) = self.live_mut(p) {
            c.calls_served.insert(seq);
        }
        self.stats.calls_forwarded += 1;
        let mut out = std::mem::take(&mut self.scratch);
        out.clear();
        let name_json = self
            .calls
            .get(seq)
            .map(|c| c.service_json())
            .unwrap_or(b"\"\"");
        let args = args.map_or(EMPTY_ARGS, Raw::get);
        encode::call_service(&mut out, name_json, seq, args);
        self.send_control(p, &out, now);
        self.scratch = out;
    }

    pub(super) fn service_response(
        &mut self,
        me: ConnRef,
        id: Option<Raw<'_>>,
        values: Option<Raw<'_>>,
        result: Raw<'_>,
        status: Option<Raw<'_>>,
        now: Instant,
    ) {
        let rosbridge = self
            .conns
            .get(me.key as usize)
            .is_some_and(|c| c.dialect == Dialect::Rosbridge);
        let seq = id.and_then(|r| parse_call_id(r.get().as_bytes()));
        let mine = seq
            .and_then(|s| self.calls.get(s))
            .is_some_and(|c| c.provider == me);
        let (Some(seq), true) = (seq, mine) else {
            self.stats.responses_stale += 1;
            let shown = id.map_or("(none)", |r| r.get());
            let msg =
                format!("no outstanding call with id {shown} on this connection; response dropped");
            return self.protocol_error(me, ProtocolError::UnknownResponse, &msg, id, now);
        };
        let Some(call) = self.take_call(seq) else {
            return;
        };
        self.stats.calls_answered += 1;
        let (values, result) = if rosbridge {
            rosbridge_outcome(values, result)
        } else {
            // The strict dialect always has `values`.
            (values.map_or(EMPTY_ARGS, Raw::get), result.get())
        };
        let mut out = std::mem::take(&mut self.scratch);
        out.clear();
        encode::service_response(
            &mut out,
            call.service_json(),
            call.caller_id(),
            values.as_bytes(),
            result.as_bytes(),
            status.map(|s| s.get().as_bytes()),
        );
        self.send_control(call.caller, &out, now);
        self.scratch = out;
    }

    /// Fails a call that was never forwarded.
    fn fail_now(
        &mut self,
        me: ConnRef,
        name: &str,
        id: Option<&[u8]>,
        why: CallFailure,
        now: Instant,
    ) {
        self.count_failure(why);
        let mut name_json = Vec::with_capacity(name.len() + 2);
        encode::json_string(&mut name_json, name);
        let reason = self.failure_text(why, name);
        let mut out = Vec::new();
        encode::service_failure(&mut out, &name_json, id, &reason);
        self.send_control(me, &out, now);
    }

    /// Removes a call from the table and from its caller's and provider's
    /// indexes: the one way a call leaves (see `calls.rs` invariants).
    pub(super) fn take_call(&mut self, seq: u64) -> Option<Call> {
        let call = self.calls.remove(seq)?;
        if let Some(c) = self.live_mut(call.provider) {
            c.calls_served.remove(&seq);
        }
        if let Some(c) = self.live_mut(call.caller) {
            c.calls_made.remove(&seq);
        }
        Some(call)
    }

    /// Removes an in-flight call and sends its caller a failure.
    pub(super) fn fail_call(&mut self, seq: u64, why: CallFailure, now: Instant) {
        let Some(call) = self.take_call(seq) else {
            return;
        };
        self.count_failure(why);
        let name: String = serde_json::from_slice(call.service_json()).unwrap_or_default();
        let reason = self.failure_text(why, &name);
        let mut out = Vec::new();
        encode::service_failure(&mut out, call.service_json(), call.caller_id(), &reason);
        self.send_control(call.caller, &out, now);
    }

    fn count_failure(&mut self, why: CallFailure) {
        let s = &mut self.stats;
        match why {
            CallFailure::NoProvider => s.calls_failed_no_provider += 1,
            CallFailure::ProviderGone | CallFailure::Unadvertised => {
                s.calls_failed_provider_gone += 1
            }
            CallFailure::Timeout => s.calls_timed_out += 1,
            CallFailure::TooMany => s.calls_failed_too_many += 1,
        }
    }

    fn failure_text(&self, why: CallFailure, name: &str) -> String {
        match why {
            CallFailure::NoProvider => format!("no provider for service {name}"),
            CallFailure::ProviderGone => format!("provider of service {name} disconnected"),
            CallFailure::Unadvertised => format!("service {name} was unadvertised by its provider"),
            CallFailure::Timeout => format!("service call to {name} timed out"),
            CallFailure::TooMany => format!(
                "too many calls in flight on this connection (limit {})",
                self.limits.max_calls_per_conn
            ),
        }
    }
}
