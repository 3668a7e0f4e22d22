//! Service operations and the life of a call: forward, answer, fail, time
//! out. Every call leaves the call table exactly once, and its caller gets
//! exactly one response then, under its original id.

use std::time::{Duration, Instant};

use rosgate_wire::encode::{self, Level};
use rosgate_wire::ids::parse_call_id;
use rosgate_wire::Raw;

use super::answer::Answer;
use super::graph::RosoutLevel;
use super::rosapi::ROSAPI_PREFIX;
use super::{Hub, RESERVED_PREFIX};
use crate::access::Class;
use crate::bridge::BridgeMsg;
use crate::calls::{Call, CallKind};
use crate::conn::ConnRef;
use crate::counters::{Counter, ErrorCode, Hist};
use crate::encoding::{Compression, Encoding};
use crate::nodes::Domain;
use crate::registry::{Provided, TooMany, Unadvertised};
use crate::transport::Transport;

/// Whether `name` (resolved) is one the gateway answers itself: nobody
/// may provide it. Without its leading `/` too: `builtin_call` answers
/// `rosapi/<x>` and `rosgate/stats` (roslib omits the slash), so an opaque
/// provider of those names would be listed but never called.
fn is_reserved_service(name: &str) -> bool {
    let under =
        |prefix: &str| name.starts_with(prefix) || name.starts_with(prefix.trim_start_matches('/'));
    under(RESERVED_PREFIX) || under(ROSAPI_PREFIX)
}

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

/// The absolute name of a built-in service the gateway answers itself
/// (`rosapi/topics` is `/rosapi/topics` whatever the caller's namespace).
fn builtin_name(name: &str) -> Option<String> {
    let plain = name.strip_prefix('/').unwrap_or(name);
    (plain.starts_with("rosapi/") || plain.starts_with("rosgate/")).then(|| format!("/{plain}"))
}

/// What a caller asks of a provider beside the name: a service call's or
/// a goal's arguments and options, as decoded (and kept by a request
/// waiting for its provider).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct CallArgs<'a> {
    pub(super) args: Option<Raw<'a>>,
    /// Seconds, as the caller gave them (the limits apply).
    pub(super) timeout: Option<f64>,
    /// Wait for a provider that is not there yet (within `timeout`).
    pub(super) wait: bool,
    /// A goal's (a call has none): its `action_type` and whether the
    /// caller wants feedback.
    pub(super) goal: Option<GoalOptions<'a>>,
    /// How the caller asked for the answer (`compression`,
    /// `fragment_size`; rosbridge).
    pub(super) encoding: Encoding,
}

/// What a goal asks beside a call's arguments.
#[derive(Debug, Clone, Copy)]
pub(super) struct GoalOptions<'a> {
    pub(super) action_type: Option<&'a str>,
    pub(super) feedback: bool,
}

/// Why a call failed; each has a reason text and a counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallFailure {
    NoProvider,
    ProviderGone,
    Unadvertised,
    Timeout,
    TooMany,
    Shutdown,
    /// A goal whose caller already has one with that id in flight.
    DuplicateId,
    /// A goal for a server at its limit of goals in flight.
    ServerBusy,
    /// A call or goal for a peer beyond a bridge found the federation's
    /// outbox full (`crate::bridge::MAX_BRIDGE_OUTBOX_BYTES`).
    FederationBusy,
}

impl Hub {
    pub(super) fn advertise_service(
        &mut self,
        me: ConnRef,
        name: &str,
        node: Option<&str>,
        ty: &str,
        id: Option<Raw<'_>>,
        now: Instant,
    ) {
        if !self.live(me) {
            return;
        }
        let id_bytes = id.map(|r| r.get().as_bytes());
        let Some((domain, tag, name)) = self.resolve_for(me, name, node, id_bytes, now) else {
            return;
        };
        if !self.permit(me, Class::Provide, &name, id_bytes, now) {
            return;
        }
        if is_reserved_service(&name) {
            let msg = format!(
                "{name}: service names under {RESERVED_PREFIX} and {ROSAPI_PREFIX} are the gateway's own (it answers them itself)"
            );
            return self.protocol_error(me, ErrorCode::ReservedName, &msg, id, now);
        }
        let max = self.limits.max_services_per_conn;
        let displaced = match self
            .registries
            .update(domain, |r| r.advertise_service(me, tag, &name, ty, max))
        {
            Ok(d) => d,
            Err(TooMany { limit }) => {
                let msg = format!(
                    "advertise_service {name}: this connection provides {limit} services, the limit; nothing changed"
                );
                return self.protocol_error(me, ErrorCode::TooManyRegistrations, &msg, id, now);
            }
        };
        match displaced {
            Some((old, old_tag)) => {
                let (was, now_by) = (self.node_label(old, old_tag), self.node_label(me, tag));
                self.note_service_replaced(domain, &name, &now_by, &was);
                if old != me {
                    let msg = format!("service {name} was taken over by another provider; calls already forwarded to you stay valid");
                    self.send_status(old, Level::Info, &msg, None, now);
                    let log = format!("service {name}: provider {was} replaced by {now_by}");
                    self.rosout(domain, RosoutLevel::Warn, &log, now);
                }
            }
            None => self.note_service(domain, me, tag, &name, ty, true),
        }
        let msg = format!("advertised service {name}");
        self.send_status(me, Level::Info, &msg, id_bytes, now);
        self.service_changed(domain, &name);
        self.release_waiting(domain, Provided::Service, &name, now);
    }

    pub(super) fn unadvertise_service(
        &mut self,
        me: ConnRef,
        name: &str,
        node: Option<&str>,
        id: Option<Raw<'_>>,
        now: Instant,
    ) {
        if !self.live(me) {
            return;
        }
        let id_bytes = id.map(|r| r.get().as_bytes());
        let Some((domain, _, name)) = self.resolve_for(me, name, node, id_bytes, now) else {
            return;
        };
        let tag = self.registries[domain as usize]
            .service(&name)
            .map(|s| s.node());
        match self
            .registries
            .update(domain, |r| r.unadvertise_service(me, &name))
        {
            Unadvertised::Removed => {
                let mut name_json = Vec::new();
                encode::json_string(&mut name_json, &name);
                let calls = self.calls.fail_service(me, &name_json);
                self.fail_soon(calls, CallFailure::Unadvertised, now);
                if let Some(tag) = tag {
                    self.note_service(domain, me, tag, &name, "", false);
                }
                let msg = format!("unadvertised service {name}");
                self.send_status(me, Level::Info, &msg, id_bytes, now);
                self.service_changed(domain, &name);
            }
            Unadvertised::NotProvider | Unadvertised::Unknown => {
                let msg = format!("not the current provider of service {name}; nothing changed");
                self.protocol_error(me, ErrorCode::NotProvider, &msg, id, now);
            }
        }
    }

    /// How a `call_service` of `name` asks for its answer (`compression`,
    /// `fragment_size`); `None` when refused: an unknown compression, or a
    /// compression on the NDJSON transport (JSON lines only), gets an
    /// error status with the request's id and a failed `service_response`
    /// at once (so the caller does not wait for a timeout), and no call.
    pub(super) fn answer_encoding(
        &mut self,
        me: ConnRef,
        name: &str,
        compression: Option<&str>,
        fragment: Option<u32>,
        id: Option<&[u8]>,
        now: Instant,
    ) -> Option<Encoding> {
        let why = match Encoding::asked(compression, fragment) {
            Ok(e) if e.compression == Compression::None => return Some(e),
            Ok(e) => {
                let tcp = self
                    .conn(me.key)
                    .is_some_and(|c| c.transport() == Transport::Tcp);
                if !tcp {
                    return Some(e);
                }
                format!(
                    "{name}: compression {:?} is for the WebSocket transport (rosbridge v2); this transport sends JSON lines only (compression none); not called",
                    e.compression.label()
                )
            }
            Err(why) => format!("{name}: {}", why.replace("not subscribed", "not called")),
        };
        self.error_with_id(me, ErrorCode::BadCompression, &why, id, now);
        let mut name_json = Vec::with_capacity(name.len() + 2);
        encode::json_string(&mut name_json, name);
        self.send_service_failure(me, None, &name_json, id, &why, now);
        None
    }

    /// A client's `call_service` of `name` (as it wrote it, for `node`).
    pub(super) fn call_service(
        &mut self,
        me: ConnRef,
        name: &str,
        node: Option<&str>,
        call: CallArgs<'_>,
        id: Option<&[u8]>,
        now: Instant,
    ) {
        let args = call.args;
        if !self.live(me) {
            return;
        }
        if let Some(builtin) = builtin_name(name) {
            if !self.permit(me, Class::Call, &builtin, id, now) {
                return self.fail_forbidden(me, name, id, now);
            }
        }
        if self.builtin_call(me, name, args, id, now) {
            return;
        }
        let Some((domain, _, name)) = self.resolve_for(me, name, node, id, now) else {
            return;
        };
        if !self.permit(me, Class::Call, &name, id, now) {
            return self.fail_forbidden(me, &name, id, now);
        }
        self.call_resolved(me, domain, &name, call, id, now);
    }

    /// [`Hub::call_service`] of `name` in `domain`, already resolved (a
    /// waiting call being released is not resolved again: its caller may
    /// have declared a node since, whose namespace or remap rules would
    /// send it elsewhere than to the provider that just appeared).
    pub(super) fn call_resolved(
        &mut self,
        me: ConnRef,
        domain: Domain,
        name: &str,
        call: CallArgs<'_>,
        id: Option<&[u8]>,
        now: Instant,
    ) {
        let CallArgs {
            args,
            timeout,
            wait,
            encoding,
            ..
        } = call;
        if !self.live(me) {
            return;
        }
        // Requests waiting for a provider count against the limit too.
        if self.calls.in_flight(me) + self.waiting.of(me) >= self.limits.max_calls_per_conn {
            return self.fail_now(me, name, id, CallFailure::TooMany, now);
        }
        let to = match timeout {
            Some(secs) if secs.is_finite() && secs > 0.0 => {
                Duration::from_secs_f64(secs.min(self.limits.max_call_timeout.as_secs_f64()))
            }
            _ => self.limits.call_timeout,
        };
        // One look-up of the name: the provider, and the call recorded
        // with the service's name as JSON.
        let forwarded = match self.registries[domain as usize].service(name) {
            Some(s)
                if self.live(s.provider())
                    && self.may_forward(me, s.provider(), (Provided::Service, domain, name)) =>
            {
                let provider = s.provider();
                let seq = self
                    .calls
                    .insert(me, provider, s.name_json(), id, now, now + to);
                if !encoding.is_plain() {
                    self.calls.set_encoding(seq, encoding);
                }
                Some((provider, seq))
            }
            _ => None,
        };
        let Some((provider, seq)) = forwarded else {
            if self.cancel_goal_service(me, name, id, now)
                || self.node_param_service(me, domain, name, args, id, now)
                || self.tf_service(me, domain, name, args, id, now)
            {
                return;
            }
            if wait {
                if self.wait_for_provider(me, domain, name, call, id, now) {
                    return;
                }
                return self.fail_now(me, name, id, CallFailure::TooMany, now);
            }
            return self.fail_now(me, name, id, CallFailure::NoProvider, now);
        };
        self.counters.inc(Counter::CallsForwarded);
        let args = args.map_or(EMPTY_ARGS, Raw::get);
        self.note_origin(me, seq);
        let msg = |to| BridgeMsg::Call {
            domain,
            service: name.into(),
            id: seq,
            args: args.into(),
            to,
        };
        if self.call_to_bridge(provider, seq, (Provided::Service, domain, name), msg, now) {
            return;
        }
        let mut out = std::mem::take(&mut self.scratch);
        out.clear();
        let name_json = self
            .calls
            .get(seq)
            .map(|c| c.service_json())
            .unwrap_or(b"\"\"");
        encode::call_service(&mut out, name_json, seq, args);
        self.send_control(provider, &out, now);
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
            .conn(me.key)
            .is_some_and(|c| c.policy().rosbridge_answers());
        let answered = id
            .and_then(|r| parse_call_id(r.get().as_bytes()))
            .and_then(|seq| self.calls.answer(seq, me).ok());
        let Some(call) = answered else {
            self.counters.inc(Counter::ResponsesStale);
            let shown = id.map_or("(none)", |r| r.get());
            let msg =
                format!("no outstanding call with id {shown} on this connection; response dropped");
            return self.protocol_error(me, ErrorCode::UnknownResponse, &msg, id, now);
        };
        self.counters.inc(Counter::CallsAnswered);
        let latency = now.saturating_duration_since(call.started()).as_secs_f64();
        self.counters.observe(Hist::CallLatency, latency);
        let (values, result) = if rosbridge {
            rosbridge_outcome(values, result)
        } else {
            // The strict dialect always has `values`.
            (values.map_or(EMPTY_ARGS, Raw::get), result.get())
        };
        // A validation is read like any answer of the owner's dialect (a
        // rosbridge `values` object is a success whatever `result` says).
        let read = (Raw::from_valid_json(values), Raw::from_valid_json(result));
        if self.params_validation_answer(&call, Some(read.0), read.1, now)
            || self.finish_remote_param(&call, Ok((Some(read.0), read.1)), now)
        {
            return;
        }
        let answer = Answer {
            values: values.as_bytes(),
            result: result.as_bytes(),
            status: status.map(|s| s.get().as_bytes()),
        };
        let (json, cid) = (call.service_json(), call.caller_id());
        let encoding = call.encoding();
        if !encoding.is_plain() && call.caller_peer().is_none() {
            return self.send_answer_encoded(call.caller(), json, cid, answer, encoding, now);
        }
        self.send_service_answer(call.caller(), call.caller_peer(), json, cid, answer, now);
    }

    /// The failure a caller gets beside its `forbidden` status, so it does
    /// not wait for a timeout.
    fn fail_forbidden(&mut self, me: ConnRef, name: &str, id: Option<&[u8]>, now: Instant) {
        let mut name_json = Vec::with_capacity(name.len() + 2);
        encode::json_string(&mut name_json, name);
        let reason = format!("forbidden: may not call {name}");
        self.send_service_failure(me, None, &name_json, id, &reason, now);
    }

    /// Fails a call that was never forwarded.
    pub(super) fn fail_now(
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
        self.send_service_failure(me, None, &name_json, id, &reason, now);
    }

    /// Sends the caller of a call (or goal) that left the table its failure.
    pub(super) fn fail_call(&mut self, call: Call, why: CallFailure, now: Instant) {
        if matches!(call.kind(), CallKind::Goal { .. }) {
            return self.fail_goal(&call, why, now);
        }
        let name: String = serde_json::from_slice(call.service_json()).unwrap_or_default();
        let reason = self.failure_text(why, &name);
        if self.finish_validation(&call, Err(reason.clone()), now)
            || self.finish_remote_param(&call, Err(reason.clone()), now)
        {
            return;
        }
        self.count_failure(why);
        self.send_service_failure(
            call.caller(),
            call.caller_peer(),
            call.service_json(),
            call.caller_id(),
            &reason,
            now,
        );
    }

    fn count_failure(&mut self, why: CallFailure) {
        self.counters.inc(match why {
            CallFailure::NoProvider => Counter::CallsFailedNoProvider,
            CallFailure::ProviderGone | CallFailure::Unadvertised => {
                Counter::CallsFailedProviderGone
            }
            CallFailure::Timeout => Counter::CallsTimedOut,
            CallFailure::TooMany
            | CallFailure::DuplicateId
            | CallFailure::ServerBusy
            | CallFailure::FederationBusy => Counter::CallsFailedTooMany,
            CallFailure::Shutdown => Counter::CallsFailedShutdown,
        });
    }

    pub(super) fn failure_text(&self, why: CallFailure, name: &str) -> String {
        match why {
            CallFailure::NoProvider => format!("no provider for service {name}"),
            CallFailure::ProviderGone => format!("provider of service {name} disconnected"),
            CallFailure::Unadvertised => format!("service {name} was unadvertised by its provider"),
            CallFailure::Timeout => format!("service call to {name} timed out"),
            CallFailure::TooMany => format!(
                "too many calls in flight on this connection (limit {})",
                self.limits.max_calls_per_conn
            ),
            CallFailure::Shutdown => format!("gateway shutting down; call to {name} abandoned"),
            CallFailure::DuplicateId | CallFailure::ServerBusy => {
                format!("call to {name} refused")
            }
            CallFailure::FederationBusy => {
                format!("call to {name} refused: the gateway's link to its provider is too busy")
            }
        }
    }
}
