//! rosapi `get_param`/`set_param` of a node whose parameters this hub does
//! not hold: another gateway's client node, a ROS 2 node, or a client that
//! serves its node's parameter services itself. The owner of a node's
//! parameters is whoever serves `<node>/get_parameters` and
//! `<node>/set_parameters` (the ROS 2 parameter services, see the
//! rcl_interfaces definitions), so rosapi asks it there, as `ros2 param`
//! does, instead of keeping a copy of its own that the owner never sees.
//!
//! Invariants:
//! - a forwarded request is an ordinary call of the requester in the call
//!   table (bounded by its calls-in-flight limit and the call timeout), so
//!   it ends exactly once: the owner's answer, read back in rosapi's shape,
//!   or the call's failure (timeout, owner gone) as a rosapi failure;
//! - the table [`RemoteParams`] holds one entry per such call and loses it
//!   when the call leaves the table (answered, failed, or its caller gone).

use std::collections::HashMap;
use std::time::Instant;

use serde_json::{json, Value};

use rosgate_wire::encode;
use rosgate_wire::Raw;

use super::params::Answering;
use super::services::CallFailure;
use super::Hub;
use crate::bridge::BridgeMsg;
use crate::calls::Call;
use crate::conn::ConnRef;
use crate::counters::Counter;
use crate::nodes::Domain;
use crate::params::ParamValue;
use crate::registry::Provided;

/// rosapi requests forwarded to a node's parameter services, by call
/// sequence number.
#[derive(Debug, Default)]
pub(super) struct RemoteParams(HashMap<u64, Forwarded>);

/// What a forwarded rosapi request needs to answer its requester.
#[derive(Debug)]
struct Forwarded {
    /// The rosapi service the requester called, as JSON.
    rosapi_json: Vec<u8>,
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    /// `get_param`: `default` (JSON text) answers a parameter the node
    /// does not have.
    Get {
        node: String,
        param: String,
        default: String,
    },
    Set,
}

impl Hub {
    /// The provider of `<node>/<short>` in `domain` when it is not this
    /// hub's own (the hub answers those for the nodes it holds) and a call
    /// from `me` may go to it.
    fn param_owner_elsewhere(
        &self,
        me: ConnRef,
        domain: Domain,
        node: &str,
        short: &str,
    ) -> Option<ConnRef> {
        let store = self.params.store(domain);
        if store.owner(node).is_some() || self.node_declared(domain, node) {
            return None;
        }
        let name = format!("{node}/{short}");
        let service = self.registries[domain as usize].service(&name)?;
        let provider = service.provider();
        let key = (Provided::Service, domain, name.as_str());
        (self.live(provider) && self.may_forward(me, provider, key)).then_some(provider)
    }

    /// Forwards rosapi `get_param` of `node:param` to the node's
    /// `get_parameters` when another provider serves it; false when the
    /// hub answers it itself.
    pub(super) fn forward_get_param(
        &mut self,
        at: Answering<'_>,
        domain: Domain,
        node: &str,
        param: &str,
        default: &str,
        now: Instant,
    ) -> bool {
        let me = at.me;
        let Some(owner) = self.param_owner_elsewhere(me, domain, node, "get_parameters") else {
            return false;
        };
        let args = json!({ "names": [param] }).to_string();
        let kind = Kind::Get {
            node: node.to_string(),
            param: param.to_string(),
            default: default.to_string(),
        };
        let service = format!("{node}/get_parameters");
        self.forward_param(at, owner, &service, &args, kind, now);
        true
    }

    /// Forwards rosapi `set_param` of `node:param` to the node's
    /// `set_parameters` when another provider serves it; false when the
    /// hub answers it itself.
    pub(super) fn forward_set_param(
        &mut self,
        at: Answering<'_>,
        domain: Domain,
        node: &str,
        param: &str,
        value: &ParamValue,
        now: Instant,
    ) -> bool {
        let me = at.me;
        let Some(owner) = self.param_owner_elsewhere(me, domain, node, "set_parameters") else {
            return false;
        };
        let args = json!({
            "parameters": [{ "name": param, "value": value.to_parameter_value() }]
        })
        .to_string();
        let service = format!("{node}/set_parameters");
        self.forward_param(at, owner, &service, &args, Kind::Set, now);
        true
    }

    /// Calls `service` (the node's parameter service) of `owner` with
    /// `args` for the rosapi request `at`, answered when the call ends.
    fn forward_param(
        &mut self,
        at: Answering<'_>,
        owner: ConnRef,
        service: &str,
        args: &str,
        kind: Kind,
        now: Instant,
    ) {
        let Answering {
            me,
            service: rosapi,
            id,
        } = at;
        let mut rosapi_json = Vec::new();
        encode::json_string(&mut rosapi_json, rosapi);
        if self.calls.in_flight(me) + self.waiting.of(me) >= self.limits.max_calls_per_conn {
            let reason = self.failure_text(CallFailure::TooMany, rosapi);
            let mut out = Vec::new();
            encode::service_failure(&mut out, &rosapi_json, id, &reason);
            return self.send_control(me, &out, now);
        }
        let mut service_json = Vec::new();
        encode::json_string(&mut service_json, service);
        let deadline = now + self.limits.call_timeout;
        let seq = self
            .calls
            .insert(me, owner, &service_json, id, now, deadline);
        self.counters.inc(Counter::CallsForwarded);
        self.remote_params
            .0
            .insert(seq, Forwarded { rosapi_json, kind });
        // The node's parameter service may be a peer's, beyond a bridge.
        let domain = self.conn(owner.key).map_or(0, |c| c.domain());
        let msg = |to| BridgeMsg::Call {
            domain,
            service: service.into(),
            id: seq,
            args: args.into(),
            to,
        };
        if self.call_to_bridge(owner, seq, (Provided::Service, domain, service), msg, now) {
            return;
        }
        let mut out = Vec::new();
        encode::call_service(&mut out, &service_json, seq, args);
        self.send_control(owner, &out, now);
    }

    /// The owner answered a forwarded rosapi request (`values`, `result`),
    /// or could not (`Err(why)`): the requester gets rosapi's answer.
    /// False if `call` was not one.
    pub(super) fn finish_remote_param(
        &mut self,
        call: &Call,
        answer: Result<(Option<Raw<'_>>, Raw<'_>), String>,
        now: Instant,
    ) -> bool {
        // Every answered call asks: no hashing while none is in flight
        // (scripts/callgrind.sh measured that at ~1% of a call).
        if self.remote_params.0.is_empty() {
            return false;
        }
        let Some(f) = self.remote_params.0.remove(&call.seq()) else {
            return false;
        };
        let id = call.caller_id();
        let parsed = answer.and_then(|(values, result)| {
            let v: Value = values
                .and_then(|r| serde_json::from_str(r.get()).ok())
                .unwrap_or(Value::Null);
            if result.get() == "true" && v.is_object() {
                Ok(v)
            } else {
                Err(v.as_str().map_or_else(
                    || "the node's parameter service failed".into(),
                    str::to_string,
                ))
            }
        });
        let mut out = Vec::new();
        match (parsed, &f.kind) {
            (Err(why), _) => encode::service_failure(&mut out, &f.rosapi_json, id, &why),
            (Ok(v), Kind::Set) => {
                let first = &v["results"][0];
                match first["successful"].as_bool() {
                    Some(true) => encode::service_response(
                        &mut out,
                        &f.rosapi_json,
                        id,
                        br#"{"successful":true,"reason":""}"#,
                        b"true",
                        None,
                    ),
                    _ => {
                        let why = first["reason"].as_str().filter(|r| !r.is_empty());
                        let why = why.unwrap_or("the node refused the value without a reason");
                        encode::service_failure(&mut out, &f.rosapi_json, id, why)
                    }
                }
            }
            (
                Ok(v),
                Kind::Get {
                    node,
                    param,
                    default,
                },
            ) => {
                let value = v["values"]
                    .get(0)
                    .and_then(|pv| ParamValue::from_json(pv).ok())
                    .unwrap_or(ParamValue::NotSet);
                let values = match value {
                    ParamValue::NotSet => json!({
                        "value": default,
                        "successful": false,
                        "reason": format!("node {node} did not declare parameter {param}"),
                    }),
                    v => {
                        json!({"value": v.to_json().to_string(), "successful": true, "reason": ""})
                    }
                };
                let values = values.to_string();
                encode::service_response(
                    &mut out,
                    &f.rosapi_json,
                    id,
                    values.as_bytes(),
                    b"true",
                    None,
                );
            }
        }
        self.send_control(call.caller(), &out, now);
        true
    }

    /// Forgets the forwarded requests `me` made (it left).
    pub(super) fn forget_remote_params(&mut self, seqs: &[u64]) {
        for s in seqs {
            self.remote_params.0.remove(s);
        }
    }
}
