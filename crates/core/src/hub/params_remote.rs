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

use super::answer::Answer;
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
/// sequence number, and the Foxglove `getParameters` requests they serve.
#[derive(Debug, Default)]
pub(super) struct RemoteParams {
    calls: HashMap<u64, Forwarded>,
    /// Foxglove `getParameters` requests waiting for nodes' answers, by
    /// request number; each ends when its last forwarded call does.
    foxglove: HashMap<u64, FoxgloveGet>,
    next_foxglove: u64,
}

/// Parameters one Foxglove `getParameters` or `setParameters` lists or
/// takes at most (the rest are left out), of this gateway's store or of one
/// node beyond it.
pub const MAX_FOXGLOVE_PARAMS_LISTED: usize = 10_000;

/// Nodes a Foxglove `getParameters` of every parameter asks beyond this
/// gateway (those serving `list_parameters`); the rest are left out (a
/// warning says so).
pub const MAX_FOXGLOVE_PARAM_NODES: usize = 64;

/// One Foxglove `getParameters` answered from nodes' parameter services:
/// the values gathered so far and the calls still out.
#[derive(Debug)]
struct FoxgloveGet {
    me: ConnRef,
    id: Option<String>,
    pending: usize,
    listed: Vec<Value>,
}

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
    /// A Foxglove `getParameters` (request `req`) asked `node`'s
    /// `list_parameters` (it asked for every parameter).
    FoxgloveList {
        req: u64,
        node: String,
    },
    /// A Foxglove `getParameters` (request `req`) asked `node`'s
    /// `get_parameters` for `names`.
    FoxgloveGet {
        req: u64,
        node: String,
        names: Vec<String>,
    },
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

    /// Foxglove `getParameters` beyond this gateway's store: `asks` are
    /// nodes whose parameter services another provider serves (a ROS 2
    /// node, another gateway's node), with the parameter names wanted
    /// (empty: every parameter, through its `list_parameters`). `listed`
    /// holds what the store answered already; the one `parameterValues`
    /// with `id` goes when every node answered or failed. `Err` gives
    /// `listed` and `id` back when no node could be asked: the caller
    /// answers alone.
    pub(super) fn foxglove_get_remote(
        &mut self,
        me: ConnRef,
        domain: Domain,
        asks: Vec<(String, Vec<String>)>,
        (listed, id): (Vec<Value>, Option<&str>),
        now: Instant,
    ) -> Result<(), (Vec<Value>, Option<String>)> {
        let req = self.remote_params.next_foxglove;
        let mut pending = 0;
        for (node, names) in asks {
            let (short, args, kind) = if names.is_empty() {
                let args = json!({ "prefixes": [], "depth": 0 }).to_string();
                let kind = Kind::FoxgloveList {
                    req,
                    node: node.clone(),
                };
                ("list_parameters", args, kind)
            } else {
                let args = json!({ "names": names }).to_string();
                let kind = Kind::FoxgloveGet {
                    req,
                    node: node.clone(),
                    names,
                };
                ("get_parameters", args, kind)
            };
            let Some(owner) = self.param_owner_elsewhere(me, domain, &node, short) else {
                continue;
            };
            if self.foxglove_forward(me, owner, &format!("{node}/{short}"), &args, kind, now) {
                pending += 1;
            }
        }
        let id = id.map(str::to_owned);
        if pending == 0 {
            return Err((listed, id));
        }
        self.remote_params.next_foxglove += 1;
        let get = FoxgloveGet {
            me,
            id,
            pending,
            listed,
        };
        self.remote_params.foxglove.insert(req, get);
        Ok(())
    }

    /// One call of a Foxglove request to a node's parameter service, an
    /// ordinary call of the session (its limit, the call timeout). False
    /// when the session's calls are at their limit.
    fn foxglove_forward(
        &mut self,
        me: ConnRef,
        owner: ConnRef,
        service: &str,
        args: &str,
        kind: Kind,
        now: Instant,
    ) -> bool {
        let f = Forwarded {
            rosapi_json: Vec::new(),
            kind,
        };
        self.forward_call((me, None), owner, service, args, f, now)
            .is_ok()
    }

    /// Call `service` of `owner` with `args` for `me` (its request `id`),
    /// recorded with `f` for its answer: an ordinary call of `me` (its
    /// calls-in-flight limit, the call timeout). `Err` gives `f` back when
    /// `me`'s calls are at their limit (nothing sent).
    fn forward_call(
        &mut self,
        (me, id): (ConnRef, Option<&[u8]>),
        owner: ConnRef,
        service: &str,
        args: &str,
        f: Forwarded,
        now: Instant,
    ) -> Result<(), Forwarded> {
        if self.calls.in_flight(me) + self.waiting.of(me) >= self.limits.max_calls_per_conn {
            return Err(f);
        }
        let mut service_json = Vec::new();
        encode::json_string(&mut service_json, service);
        let deadline = now + self.limits.call_timeout;
        let seq = self
            .calls
            .insert(me, owner, &service_json, id, now, deadline);
        self.counters.inc(Counter::CallsForwarded);
        self.remote_params.calls.insert(seq, f);
        // The node's parameter service may be a peer's, beyond a bridge.
        self.send_param_call(owner, seq, service, &service_json, args, now);
        Ok(())
    }

    /// Sends call `seq` of `service` to `owner`: a client, or a peer
    /// beyond a bridge.
    fn send_param_call(
        &mut self,
        owner: ConnRef,
        seq: u64,
        service: &str,
        service_json: &[u8],
        args: &str,
        now: Instant,
    ) {
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
        encode::call_service(&mut out, service_json, seq, args);
        self.send_control(owner, &out, now);
    }

    /// A node answered (or failed) one call of Foxglove request `req`:
    /// its values gathered, a listing followed by the node's values, the
    /// request answered when nothing is out any more.
    fn foxglove_answered(&mut self, req: u64, kind: Kind, answer: Option<Value>, now: Instant) {
        let Some(me) = self.remote_params.foxglove.get(&req).map(|g| g.me) else {
            return;
        };
        match kind {
            Kind::FoxgloveList { node, .. } => {
                let names: Vec<String> = answer
                    .as_ref()
                    .and_then(|v| v["result"]["names"].as_array())
                    .map(|a| {
                        a.iter()
                            .filter_map(Value::as_str)
                            .take(MAX_FOXGLOVE_PARAMS_LISTED)
                            .map(str::to_owned)
                            .collect()
                    })
                    .unwrap_or_default();
                let owner = self
                    .conn(me.key)
                    .map(|c| c.domain())
                    .and_then(|d| self.param_owner_elsewhere(me, d, &node, "get_parameters"));
                if let (false, Some(owner)) = (names.is_empty(), owner) {
                    let args = json!({ "names": names }).to_string();
                    let service = format!("{node}/get_parameters");
                    let kind = Kind::FoxgloveGet { req, node, names };
                    if self.foxglove_forward(me, owner, &service, &args, kind, now) {
                        return;
                    }
                }
            }
            Kind::FoxgloveGet { node, names, .. } => {
                let values = answer.as_ref().and_then(|v| v["values"].as_array());
                let got: Vec<Value> = names
                    .iter()
                    .zip(values.into_iter().flatten())
                    .filter_map(|(name, pv)| {
                        let v = ParamValue::from_json(pv).ok()?;
                        (!matches!(v, ParamValue::NotSet))
                            .then(|| self.foxglove_param_entry(&node, name, &v))
                    })
                    .collect();
                let visible: Vec<Value> = got
                    .into_iter()
                    .filter(|p| self.foxglove_may_read(me, p))
                    .collect();
                if let Some(g) = self.remote_params.foxglove.get_mut(&req) {
                    g.listed.extend(visible);
                }
            }
            _ => {}
        }
        let done = self.remote_params.foxglove.get_mut(&req).is_some_and(|g| {
            g.pending -= 1;
            g.pending == 0
        });
        if done {
            if let Some(g) = self.remote_params.foxglove.remove(&req) {
                self.foxglove_send_values(g.me, &g.listed, g.id.as_deref(), now);
            }
        }
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
        let f = Forwarded { rosapi_json, kind };
        if let Err(f) = self.forward_call((me, id), owner, service, args, f, now) {
            let reason = self.failure_text(CallFailure::TooMany, rosapi);
            let mut out = Vec::new();
            encode::service_failure(&mut out, &f.rosapi_json, id, &reason);
            self.send_control(me, &out, now);
        }
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
        if self.remote_params.calls.is_empty() {
            return false;
        }
        let Some(f) = self.remote_params.calls.remove(&call.seq()) else {
            return false;
        };
        if let Kind::FoxgloveList { req, .. } | Kind::FoxgloveGet { req, .. } = f.kind {
            let v = answer.ok().and_then(|(values, result)| {
                let v: Value = serde_json::from_str(values?.get()).ok()?;
                (result.get() == "true" && v.is_object()).then_some(v)
            });
            self.foxglove_answered(req, f.kind, v, now);
            return true;
        }
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
        // The answer in rosapi's shape (values, success), sent as any
        // answer is (a Foxglove session's set reads it there).
        let (values, ok): (Vec<u8>, bool) = match (parsed, &f.kind) {
            (Err(why), _) => (Value::from(why).to_string().into_bytes(), false),
            (Ok(v), Kind::Set) => {
                let first = &v["results"][0];
                match first["successful"].as_bool() {
                    Some(true) => (br#"{"successful":true,"reason":""}"#.to_vec(), true),
                    _ => {
                        let why = first["reason"].as_str().filter(|r| !r.is_empty());
                        let why = why.unwrap_or("the node refused the value without a reason");
                        (Value::from(why).to_string().into_bytes(), false)
                    }
                }
            }
            (Ok(_), Kind::FoxgloveList { .. } | Kind::FoxgloveGet { .. }) => return true,
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
                (values.to_string().into_bytes(), true)
            }
        };
        let answer = if ok {
            Answer::ok(&values)
        } else {
            Answer::failed(&values)
        };
        self.send_service_answer(
            call.caller(),
            call.caller_peer(),
            &f.rosapi_json,
            id,
            answer,
            now,
        );
        true
    }

    /// Forgets the forwarded requests `me` made (it left), and the
    /// Foxglove requests they served.
    pub(super) fn forget_remote_params(&mut self, seqs: &[u64]) {
        for s in seqs {
            let Some(f) = self.remote_params.calls.remove(s) else {
                continue;
            };
            if let Kind::FoxgloveList { req, .. } | Kind::FoxgloveGet { req, .. } = f.kind {
                self.remote_params.foxglove.remove(&req);
            }
        }
    }
}
