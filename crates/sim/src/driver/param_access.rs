//! Everyone's access to parameters (`docs/protocol.md`, "Parameters":
//! "Access", "Validation by the owner", "Held by the gateway"), modelled
//! from the protocol page: rosapi's `get_param`, `set_param`, `has_param`,
//! `delete_param` and `get_param_names` (under `/rosapi/` and `rosapi/`,
//! answered before any name is resolved; `node:param` names, or plain
//! global ones), the ROS 2 services of every node with parameters
//! (`<node>/get_parameters`, `get_parameter_types`, `describe_parameters`,
//! `list_parameters`, `set_parameters`, `set_parameters_atomically`; a
//! name a client provides itself, or one of a node without parameters,
//! is an ordinary call), subscribers of `/parameter_events`, and the
//! owner's validation round trip.
//!
//! A change by anyone but the owner passes the rules (`model/params.rs`); a
//! node that was declared but owns no parameters refuses it; a node nobody
//! declared takes it, held by the gateway. A change of a parameter
//! declared with `"validate": true` is first sent to its owner as a call
//! of `<node>/validate_parameters` ([`ValidationM`], in `model/params.rs`,
//! forwarded in order with the calls to the owner, counted among the
//! requester's calls): the
//! owner's answer, read as its dialect reads any answer, applies it if it
//! says `"successful": true` and the rules still hold (the node still the
//! same owner's), and refuses it otherwise; a silent owner (past
//! `--call-timeout-ms`), an owner leaving and the shutdown refuse it too.
//! A requester that leaves is forgotten, and the owner's late answer is
//! stale, as for any call.
//!
//! What the model predicts: the one answer each request gets (exactly the
//! `values` the page promises, one result per change, all or nothing for
//! an atomic set, `result:false` with a reason for rosapi's refusals), the
//! validation call each owner receives (service and args), which changes
//! are applied (each an event on `/parameter_events`), and the counters of
//! sets, refusals and validations.

use std::collections::BTreeSet;

use serde_json::{json, Value};

use rosgate_core::counters::{Counter, ErrorCode};
use rosgate_core::hub::PARAMETER_EVENTS;
use rosgate_core::ConnRef;

use super::effects::answer_as_read;
use super::requests::{assemble, blank_cr_lf, json_string, jstr, parse_id, push_id, Form, Members};
use super::Sim;
use crate::actions::{ParamReq, VALID_VALUES};
use crate::model::params::{
    param_value, parameter_value, short_parameter_value, valid_name, Change, ChangeM, DescM,
    HolderM, Outcome, PVal, Refusal, Reply, ValidationM, PARAM_NAMES,
};
use crate::model::requests::{CallSend, Effect};
use crate::model::{tick_ceil, Fwd, Id, Resp, ANY};
use crate::violation::Violation;

/// rosapi's parameter services.
const ROSAPI_PARAMS: [&str; 5] = [
    "get_param",
    "set_param",
    "has_param",
    "delete_param",
    "get_param_names",
];

/// The ROS 2 parameter services of a node.
const NODE_SERVICES: [&str; 6] = [
    "get_parameters",
    "get_parameter_types",
    "describe_parameters",
    "list_parameters",
    "set_parameters",
    "set_parameters_atomically",
];

/// The service a validating owner is called on, under its node.
const VALIDATE: &str = "validate_parameters";

/// `<node>/<srv>` (`/<srv>` for no node).
fn node_service(node: &str, srv: &str) -> String {
    if node.is_empty() {
        format!("/{srv}")
    } else {
        format!("{node}/{srv}")
    }
}

/// `node:param` (ROS 2 rosapi's form; `/` prefixed when missing) or a
/// plain name (a global parameter, node `""`).
fn split_name(name: &str) -> (String, &str) {
    match name.split_once(':') {
        Some((node, param)) if !node.is_empty() => {
            let node = if node.starts_with('/') {
                node.to_string()
            } else {
                format!("/{node}")
            };
            (node, param)
        }
        _ => (String::new(), name),
    }
}

/// A set of parameters as requested (rosapi's `set_param`, a node's
/// `set_parameters` or `set_parameters_atomically`): the node's name, the
/// changes, how the requester is answered, the service its answer names
/// and its id.
#[derive(Debug)]
pub(crate) struct SetRequest<'a> {
    pub node: &'a str,
    pub changes: Vec<(String, PVal)>,
    pub reply: Reply,
    pub service: String,
    pub id: Option<Id>,
}

impl Sim {
    // ----- requests -------------------------------------------------------------------

    /// Everyone's parameter requests ([`crate::Req::Param`] `op` 3 to 15):
    /// 3 rosapi `set_param`, 4 `get_param` (`extra % 3`: no default,
    /// `default_value`, `default`), 5 `has_param`, `delete_param` or
    /// `get_param_names` (`extra % 3`), 6 `set_parameters` and 7
    /// `set_parameters_atomically` (a second change when `extra` is odd;
    /// values as full `ParameterValue`s when `extra & 2`), 8
    /// `get_parameters`, `get_parameter_types`, `describe_parameters` or
    /// `list_parameters` (`extra % 4`), 9 an owner's answer to a
    /// validation, 10-15 a subscribe (`extra % 4 < 3`) or unsubscribe of
    /// `/parameter_events`. rosapi is called as `rosapi/..` when
    /// `extra & 64`, else `/rosapi/..`. Unless `extra & 128`, a request
    /// naming a node with parameters names one of them (`name` picks; a
    /// validated one if there are any), and unless `extra & 16` a change of
    /// an existing parameter has a value of its type.
    pub(crate) fn access_request(
        &mut self,
        slot: usize,
        f: Form,
        p: ParamReq,
    ) -> (Vec<u8>, Effect) {
        let ParamReq {
            op,
            target,
            name,
            value,
            extra,
            id,
        } = p;
        let node = self.param_target(slot, target);
        let domain = self.model.client(slot).domain;
        let names: Vec<String> = self
            .model
            .params
            .node(domain, &node)
            .map(|t| t.params.keys().cloned().collect())
            .unwrap_or_default();
        // Validated parameters first: their changes go to the owner.
        let validated: Vec<&String> = names
            .iter()
            .filter(|n| {
                self.model
                    .params
                    .get(domain, &node, n)
                    .is_some_and(|p| p.validate)
            })
            .collect();
        let (pname, other) = if extra & 128 == 0 && !names.is_empty() {
            let k = name as usize;
            let first = match validated.len() {
                0 => &names[k % names.len()],
                n => validated[k % n],
            };
            (first.clone(), names[(k + 1) % names.len()].clone())
        } else {
            let at = |k: usize| PARAM_NAMES[k % PARAM_NAMES.len()].to_string();
            (at(name as usize), at(name as usize + 1))
        };
        // A value of the type the parameter has, unless `extra & 16`.
        let value = match self.model.params.get(domain, &node, &pname) {
            Some(p) if extra & 16 == 0 => {
                let ty = p.value.type_code();
                let same: Vec<u8> = (0..VALID_VALUES as u8)
                    .filter(|&k| param_value(k).1.is_some_and(|v| v.type_code() == ty))
                    .collect();
                same.get(value as usize % same.len().max(1))
                    .copied()
                    .unwrap_or(value)
            }
            _ => value,
        };
        let rosapi = |short: &str| {
            if extra & 64 != 0 {
                format!("rosapi/{short}")
            } else {
                format!("/rosapi/{short}")
            }
        };
        match op {
            3..=5 => {
                let key = if node.is_empty() {
                    pname.to_string()
                } else {
                    format!("{node}:{pname}")
                };
                let (service, args) = match op {
                    3 => {
                        let (text, _) = param_value(value);
                        (rosapi("set_param"), json!({"name": key, "value": text}))
                    }
                    4 => {
                        let args = match extra % 3 {
                            0 => json!({ "name": key }),
                            1 => json!({"name": key, "default_value": "42"}),
                            _ => json!({"name": key, "default": "\"d\""}),
                        };
                        (rosapi("get_param"), args)
                    }
                    _ => match extra % 3 {
                        0 => (rosapi("has_param"), json!({ "name": key })),
                        1 => (rosapi("delete_param"), json!({ "name": key })),
                        _ => (rosapi("get_param_names"), json!({})),
                    },
                };
                self.param_call(slot, f, &service, &args, id)
            }
            6 | 7 => {
                let pv = |k: u8| -> Value {
                    let (text, v) = param_value(k % 20);
                    match v {
                        Some(v) if extra & 2 != 0 => parameter_value(Some(&v)),
                        Some(v) => short_parameter_value(&v),
                        None => serde_json::from_str(text).expect("sim JSON"),
                    }
                };
                let mut list = vec![json!({"name": pname, "value": pv(value)})];
                if extra & 1 != 0 {
                    list.push(json!({"name": other, "value": pv(value.wrapping_add(3))}));
                }
                let srv = if op == 6 {
                    "set_parameters"
                } else {
                    "set_parameters_atomically"
                };
                let service = node_service(&node, srv);
                self.param_call(slot, f, &service, &json!({ "parameters": list }), id)
            }
            8 => {
                let srv = [
                    "get_parameters",
                    "get_parameter_types",
                    "describe_parameters",
                    "list_parameters",
                ][extra as usize % 4];
                let args = if extra % 4 == 3 {
                    json!({})
                } else {
                    json!({ "names": [pname, other] })
                };
                let service = node_service(&node, srv);
                self.param_call(slot, f, &service, &args, id)
            }
            9 => self.validation_answer_request(slot, f, target, extra),
            _ => {
                let op = if extra % 4 < 3 {
                    "subscribe"
                } else {
                    "unsubscribe"
                };
                self.topic_request(slot, f, op, PARAMETER_EVENTS, None, id)
            }
        }
    }

    /// The node whose parameters a request of `slot` names, by `target %
    /// 8` (`target / 8` picks among several): 0-2 a node of its domain
    /// owning parameters (else as 3), 3 one of the nodes of its domain
    /// declared by anyone or holding parameters, 4 its own default node,
    /// 5 a node nobody declares, 6 `talker` without its `/`, 7 none (`""`:
    /// global parameters for rosapi, `/<service>` for the node services).
    fn param_target(&self, slot: usize, target: u8) -> String {
        let c = self.model.client(slot);
        let domain = c.domain;
        let k = (target / 8) as usize;
        let owned: Vec<&String> = self
            .model
            .params
            .stores
            .iter()
            .filter(|((d, _), t)| *d == domain && t.holder != HolderM::Gateway)
            .map(|((_, n), _)| n)
            .collect();
        match target % 8 {
            0..=2 if !owned.is_empty() => owned[k % owned.len()].clone(),
            0..=3 => {
                let mut nodes: BTreeSet<String> = self
                    .model
                    .live()
                    .filter(|x| x.domain == domain)
                    .flat_map(|x| x.nodes.iter().map(|n| n.full.clone()))
                    .collect();
                nodes.extend(
                    self.model
                        .params
                        .stores
                        .keys()
                        .filter(|(d, n)| *d == domain && !n.is_empty())
                        .map(|(_, n)| n.clone()),
                );
                nodes
                    .iter()
                    .nth(k % nodes.len().max(1))
                    .cloned()
                    .unwrap_or_else(|| "/talker".to_string())
            }
            4 => c
                .nodes
                .first()
                .map_or_else(|| "/talker".to_string(), |n| n.full.clone()),
            5 => "/ghost".to_string(),
            6 => "talker".to_string(),
            _ => String::new(),
        }
    }

    /// A call of `service` with `args` (always with an id on TCP).
    fn param_call(
        &mut self,
        slot: usize,
        f: Form,
        service: &str,
        args: &Value,
        id: u8,
    ) -> (Vec<u8>, Effect) {
        let esc = f.style & 4 != 0;
        let id = match self.fresh_id(slot, id) {
            None if !f.rosbridge => self.fresh_id(slot, 1),
            id => id,
        };
        let args = args.to_string();
        let mut m: Members<'_> = vec![
            ("op", json_string("call_service")),
            ("service", jstr(service, esc)),
            ("args", args.clone()),
        ];
        push_id(&mut m, id.as_ref());
        let effect = Effect::Call(CallSend {
            name: service.to_string(),
            args: blank_cr_lf(&args),
            timeout: None,
            id,
            node: None,
            wait: false,
        });
        (assemble(&m, f.style, f.spacing), effect)
    }

    /// An owner's `service_response` to a validation (`pick % 4 < 3`: one
    /// in flight it was sent, if any; else any it was sent, or a forged
    /// id), by `how % 8`: 0-3 accepted, 4 refused with a reason, 5
    /// `successful: true` with `result: false`, 6 a string `values` with
    /// `result: false`, 7 `successful: false` without a reason, or no
    /// `values` at all when `how & 8` (valid on WebSocket only).
    fn validation_answer_request(
        &mut self,
        slot: usize,
        f: Form,
        pick: u8,
        how: u8,
    ) -> (Vec<u8>, Effect) {
        let esc = f.style & 4 != 0;
        let c = self.model.client(slot);
        let me = c.conn;
        let learned = &c.learned_validations;
        let validation = |raw: &String| match self.model.rg_map.get(raw) {
            Some(&Fwd::Validation(v)) => Some(v),
            _ => None,
        };
        let live: Vec<&String> = learned
            .iter()
            .filter(|r| {
                validation(r).is_some_and(|v| {
                    let x = &self.model.params.validations[v];
                    x.alive && x.owner == me
                })
            })
            .collect();
        let k = pick as usize;
        let raw = if pick % 4 != 3 && !live.is_empty() {
            live[k % live.len()].clone()
        } else if !learned.is_empty() {
            learned[k % learned.len()].clone()
        } else {
            "\"rg-999999999999\"".to_string()
        };
        let service = validation(&raw).map_or("/x/validate_parameters".to_string(), |v| {
            self.model.params.validations[v].service.clone()
        });
        let (values, result) = match how % 8 {
            0..=3 => (Some(r#"{"successful":true,"reason":""}"#), "true"),
            4 => (Some(r#"{"successful":false,"reason":"too fast"}"#), "true"),
            5 => (Some(r#"{"successful":true}"#), "false"),
            6 => (Some("\"no\""), "false"),
            _ if how & 8 == 0 => (Some(r#"{"successful":false}"#), "true"),
            _ => (None, "true"),
        };
        let mut m: Members<'_> = vec![
            ("op", json_string("service_response")),
            ("service", jstr(&service, esc)),
            ("id", raw.clone()),
        ];
        if let Some(v) = values {
            m.push(("values", v.to_string()));
        }
        m.push(("result", result.to_string()));
        let effect = Effect::Respond {
            id: Some(parse_id(raw)),
            values: values.map(|v| serde_json::from_str(v).expect("sim JSON")),
            result,
            status: None,
        };
        (assemble(&m, f.style, f.spacing), effect)
    }

    // ----- rosapi ---------------------------------------------------------------------

    /// A call of one of rosapi's parameter services (`service` as written,
    /// answered before any name is resolved): the answer `slot` is owed.
    /// False if `service` is not one of them.
    pub(crate) fn rosapi_param_call(
        &mut self,
        slot: usize,
        service: &str,
        args: &str,
        id: Option<Id>,
    ) -> bool {
        let plain = service.strip_prefix('/').unwrap_or(service);
        let Some(short) = plain.strip_prefix("rosapi/") else {
            return false;
        };
        if !ROSAPI_PARAMS.contains(&short) {
            return false;
        }
        let args: Value = serde_json::from_str(args).unwrap_or(Value::Null);
        let key = args.get("name").and_then(Value::as_str).unwrap_or("");
        let (node, param) = split_name(key);
        let domain = self.model.client(slot).domain;
        self.note_isolation(domain, &node);
        let svc = service.to_string();
        let shape = |values: Value| Resp::Shape {
            service: svc.clone(),
            values,
        };
        let failure = Resp::Failure {
            service: svc.clone(),
            why: None,
        };
        let p = &self.model.params;
        let r = match short {
            "get_param" => {
                self.counts.param_reads += 1;
                match p.get(domain, &node, param) {
                    Some(x) => {
                        shape(json!({"value": x.value.to_json().to_string(), "successful": true}))
                    }
                    None if p.owner(domain, &node).is_some()
                        || self.node_declared(domain, &node) =>
                    {
                        self.counts.param_unset_reads += 1;
                        shape(json!({"successful": false, "reason": ANY}))
                    }
                    None => {
                        let default = args
                            .get("default_value")
                            .or_else(|| args.get("default"))
                            .and_then(Value::as_str)
                            .unwrap_or("");
                        let text = if default.is_empty() { "null" } else { default };
                        shape(json!({"value": text, "successful": true}))
                    }
                }
            }
            "has_param" => shape(json!({ "exists": p.get(domain, &node, param).is_some() })),
            "get_param_names" => {
                let mut names: Vec<String> = p
                    .stores
                    .iter()
                    .filter(|((d, _), _)| *d == domain)
                    .flat_map(|((_, n), t)| {
                        t.params.keys().map(move |k| {
                            if n.is_empty() {
                                k.clone()
                            } else {
                                format!("{n}:{k}")
                            }
                        })
                    })
                    .collect();
                names.sort();
                shape(json!({ "names": names }))
            }
            "delete_param" => {
                if p.owner(domain, &node).is_some() {
                    failure
                } else {
                    if self.model.params.remove(domain, &node, param) {
                        self.counts.held_params_deleted += 1;
                        self.param_event(domain, &node, param, Change::Deleted);
                    }
                    shape(json!({"successful": true}))
                }
            }
            _ => {
                let text = args.get("value").and_then(Value::as_str).unwrap_or("");
                let value = serde_json::from_str::<Value>(text)
                    .ok()
                    .and_then(|v| PVal::from_json(&v));
                match value {
                    Some(v) if valid_name(param) => {
                        let set = SetRequest {
                            node: &node,
                            changes: vec![(param.to_string(), v)],
                            reply: Reply::Rosapi,
                            service: svc,
                            id: id.clone(),
                        };
                        self.request_set(slot, domain, set)
                    }
                    _ => failure,
                }
            }
        };
        self.expect_reply(slot, id, r);
        true
    }

    /// Whether some connection of `domain` declared node `node` (whether
    /// or not it owns parameters).
    fn node_declared(&self, domain: u8, node: &str) -> bool {
        !node.is_empty()
            && self
                .model
                .live()
                .any(|c| c.domain == domain && c.nodes.iter().any(|n| n.full == node))
    }

    /// A request naming `node` in `domain`, which holds parameters only in
    /// another domain: it must not reach them.
    fn note_isolation(&mut self, domain: u8, node: &str) {
        let p = &self.model.params;
        let elsewhere = p
            .stores
            .keys()
            .any(|(d, n)| *d != domain && n == node && !n.is_empty());
        if elsewhere && p.node(domain, node).is_none() {
            self.counts.params_isolated += 1;
        }
    }

    /// `slot` is owed `r` for its call `id` (or among its calls without
    /// one).
    fn expect_reply(&mut self, slot: usize, id: Option<Id>, r: Resp) {
        let e = &mut self.model.client_mut(slot).exp;
        match id {
            Some(id) => {
                e.responses.insert(id.key, r);
            }
            None => e.anon_responses.push(r),
        }
    }

    // ----- the node services ----------------------------------------------------------

    /// A call of `name` (resolved) in `domain` that no client provides: if
    /// it is one of the parameter services of a node with parameters
    /// there, the answer `slot` is owed (a set may wait for validation).
    pub(crate) fn node_param_call(
        &mut self,
        slot: usize,
        domain: u8,
        name: &str,
        args: &str,
        id: Option<Id>,
    ) -> Option<Resp> {
        let (node, short) = name.rsplit_once('/')?;
        if !NODE_SERVICES.contains(&short) {
            return None;
        }
        if node.is_empty() {
            // Global parameters belong to no node: nobody serves `/x`.
            if self.model.params.node(domain, "").is_some() {
                self.counts.global_not_a_node += 1;
            }
            return None;
        }
        self.note_isolation(domain, node);
        let t = self.model.params.node(domain, node)?.clone();
        self.counts.param_node_service_calls += 1;
        let args: Value = serde_json::from_str(args).unwrap_or(Value::Null);
        let names: Vec<&str> = args
            .get("names")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let shape = |values: Value| Resp::Shape {
            service: name.to_string(),
            values,
        };
        Some(match short {
            "get_parameters" => {
                self.counts.param_reads += 1;
                let values: Vec<Value> = names
                    .iter()
                    .map(|n| parameter_value(t.params.get(*n).map(|p| &p.value)))
                    .collect();
                shape(json!({ "values": values }))
            }
            "get_parameter_types" => {
                let types: Vec<u8> = names
                    .iter()
                    .map(|n| t.params.get(*n).map_or(0, |p| p.value.type_code()))
                    .collect();
                shape(json!({ "types": types }))
            }
            "describe_parameters" => {
                let d: Vec<Value> = names
                    .iter()
                    .map(|n| match t.params.get(*n) {
                        Some(p) => p.desc.to_json(n, p.value.type_code()),
                        None => DescM::default().to_json(n, 0),
                    })
                    .collect();
                shape(json!({ "descriptors": d }))
            }
            "list_parameters" => {
                let names: Vec<&String> = t.params.keys().collect();
                let mut prefixes: Vec<&str> = Vec::new();
                for n in &names {
                    if let Some((pre, _)) = n.rsplit_once('.') {
                        if !prefixes.contains(&pre) {
                            prefixes.push(pre);
                        }
                    }
                }
                shape(json!({"result": {"names": names, "prefixes": prefixes}}))
            }
            _ => {
                let list = args
                    .get("parameters")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                let mut changes = Vec::new();
                for p in &list {
                    let n = p.get("name").and_then(Value::as_str).unwrap_or("");
                    match p.get("value").and_then(PVal::from_json) {
                        Some(v) => changes.push((n.to_string(), v)),
                        None => {
                            self.count_error(ErrorCode::BadArgs);
                            return Some(Resp::Failure {
                                service: name.to_string(),
                                why: None,
                            });
                        }
                    }
                }
                let reply = if short == "set_parameters" {
                    Reply::PerParameter
                } else {
                    self.counts.atomic_sets += 1;
                    Reply::Atomic
                };
                let node = node.to_string();
                let set = SetRequest {
                    node: &node,
                    changes,
                    reply,
                    service: name.to_string(),
                    id,
                };
                self.request_set(slot, domain, set)
            }
        })
    }

    // ----- sets -----------------------------------------------------------------------

    /// A set of `changes` of `node` in `domain` by `slot`: each checked
    /// by the rules (refused if the node was declared but owns no
    /// parameters, or the name is none); an atomic set with a refusal is
    /// refused whole; changes to validate go to their owner (if it is
    /// open and the requester may have one more call in flight, else they
    /// are refused), the others applied now (an atomic set waits whole).
    /// The answer owed, or [`Resp::Validating`].
    pub(crate) fn request_set(&mut self, slot: usize, domain: u8, set: SetRequest<'_>) -> Resp {
        let SetRequest {
            node,
            changes,
            reply,
            service,
            id,
        } = set;
        let p = &self.model.params;
        let unowned = p.owner(domain, node).is_none() && self.node_declared(domain, node);
        let mut validator = None;
        let mut list: Vec<ChangeM> = Vec::new();
        for (name, value) in changes {
            let checked = if !valid_name(&name) {
                Err(Refusal::BadName)
            } else if unowned {
                Err(Refusal::Undeclared)
            } else {
                p.check(domain, node, &name, &value, &self.limits)
            };
            let outcome = match checked {
                Err(r) => Outcome::Refused(r),
                Ok(()) => match p.validator(domain, node, &name) {
                    Some(v) => {
                        validator = Some(v);
                        Outcome::Waiting
                    }
                    None => Outcome::Ready,
                },
            };
            list.push(ChangeM {
                name,
                value,
                outcome,
            });
        }
        let refused = list
            .iter()
            .any(|c| matches!(c.outcome, Outcome::Refused(_)));
        let refuse_rest = |list: &mut Vec<ChangeM>, why: Refusal| {
            for c in list.iter_mut() {
                if !matches!(c.outcome, Outcome::Refused(_)) {
                    c.outcome = Outcome::Refused(why);
                }
            }
        };
        if reply == Reply::Atomic && refused {
            refuse_rest(&mut list, Refusal::Atomic);
            return self.finish_set(domain, node, reply, &service, &mut list, None);
        }
        let Some((owner, owner_uid)) = validator else {
            return self.finish_set(domain, node, reply, &service, &mut list, None);
        };
        let me = self.model.client(slot).conn;
        let owner_slot = self
            .model
            .slot_of(owner)
            .filter(|&s| self.model.client(s).is_open());
        let busy = self.model.calls_in_flight(me) + self.model.waiting_of(me)
            >= self.limits.max_calls_per_conn;
        let Some(owner_slot) = owner_slot.filter(|_| !busy) else {
            self.counts.param_cannot_validate += 1;
            refuse_rest(&mut list, Refusal::Cannot);
            return self.finish_set(domain, node, reply, &service, &mut list, None);
        };
        if reply != Reply::Atomic {
            self.apply_ready(domain, node, reply, &mut list);
        }
        let v = self.model.params.validations.len();
        let mut x = ValidationM {
            caller: me,
            caller_slot: slot,
            id,
            owner,
            owner_uid,
            domain,
            node: node.to_string(),
            service: format!("{node}/{VALIDATE}"),
            reply,
            reply_service: service,
            changes: list,
            args: Value::Null,
            due_tick: tick_ceil(self.offset + self.limits.call_timeout),
            alive: true,
        };
        let asked: Vec<Value> = x
            .changes
            .iter()
            .filter(|c| x.asked(c))
            .map(|c| json!({"name": c.name, "value": c.value.to_json(), "type": c.value.type_name()}))
            .collect();
        x.args = json!({"node": node, "parameters": asked});
        self.model.params.validations.push(x);
        self.model.count(Counter::ParamValidations);
        self.counts.param_validations += 1;
        self.model
            .client_mut(owner_slot)
            .exp
            .forwards
            .push_back(Fwd::Validation(v));
        Resp::Validating(v)
    }

    /// Applies the changes of `list` that are ready: each set (held by
    /// the gateway if the node has no owner), counted, an event. Where they
    /// are applied they count together against the byte limits: one by
    /// one, each against what the earlier ones left (refused if it does
    /// not fit), or for an atomic set all together, else none.
    fn apply_ready(&mut self, domain: u8, node: &str, reply: Reply, list: &mut [ChangeM]) {
        if reply == Reply::Atomic {
            let all: Vec<(&str, &PVal)> = list
                .iter()
                .filter(|c| c.outcome == Outcome::Ready)
                .map(|c| (c.name.as_str(), &c.value))
                .collect();
            let room = self.model.params.room_for(domain, node, &all, &self.limits);
            if let Err(r) = room {
                for c in list.iter_mut().filter(|c| c.outcome == Outcome::Ready) {
                    c.outcome = Outcome::Refused(r);
                }
                return;
            }
        }
        for c in list.iter_mut().filter(|c| c.outcome == Outcome::Ready) {
            if reply != Reply::Atomic {
                let room = self.model.params.room_for(
                    domain,
                    node,
                    &[(c.name.as_str(), &c.value)],
                    &self.limits,
                );
                if let Err(r) = room {
                    c.outcome = Outcome::Refused(r);
                    continue;
                }
            }
            if self.model.params.owner(domain, node).is_none() {
                self.counts.held_params_set += 1;
            } else {
                self.counts.param_sets_by_others += 1;
            }
            let change = self
                .model
                .params
                .set(domain, node, &c.name, c.value.clone());
            self.model.count(Counter::ParamSetsAccepted);
            self.param_event(domain, node, &c.name, change);
            c.outcome = Outcome::Applied;
        }
    }

    /// Applies what is ready of `list` and builds the requester's answer
    /// (`why`: text a rosapi refusal must contain).
    fn finish_set(
        &mut self,
        domain: u8,
        node: &str,
        reply: Reply,
        service: &str,
        list: &mut [ChangeM],
        why: Option<&'static str>,
    ) -> Resp {
        self.apply_ready(domain, node, reply, list);
        let mut first = None;
        for c in list.iter() {
            if let Outcome::Refused(r) = c.outcome {
                self.model.count(Counter::ParamSetsRejected);
                self.counts.param_sets_rejected += 1;
                self.count_refusal(r);
                first.get_or_insert(r);
            }
        }
        let service = service.to_string();
        let result = |ok: bool| json!({"successful": ok, "reason": ANY});
        match reply {
            Reply::Rosapi if first.is_some() => Resp::Failure { service, why },
            Reply::Rosapi => Resp::Shape {
                service,
                values: json!({"successful": true}),
            },
            Reply::PerParameter => {
                let results: Vec<Value> = list
                    .iter()
                    .map(|c| result(!matches!(c.outcome, Outcome::Refused(_))))
                    .collect();
                Resp::Shape {
                    service,
                    values: json!({ "results": results }),
                }
            }
            Reply::Atomic => Resp::Shape {
                service,
                values: json!({ "result": result(first.is_none()) }),
            },
        }
    }

    // ----- validation -----------------------------------------------------------------

    /// Validation `v` ends: accepted (`ok`, if the node is still its
    /// owner's and the rules still hold for every change it decided on),
    /// or refused; its requester, if still there, gets its answer.
    fn finish_validation(&mut self, v: usize, ok: bool, why: Option<&'static str>) {
        let x = &mut self.model.params.validations[v];
        x.alive = false;
        let (domain, node) = (x.domain, x.node.clone());
        let mut list = std::mem::take(&mut x.changes);
        let asking = |c: &ChangeM| {
            c.outcome == Outcome::Waiting
                || (self.model.params.validations[v].reply == Reply::Atomic
                    && c.outcome == Outcome::Ready)
        };
        let x = &self.model.params.validations[v];
        let p = &self.model.params;
        let mut ok = ok && p.owner(domain, &node) == Some((x.owner, x.owner_uid));
        if ok {
            ok = list.iter().filter(|c| asking(c)).all(|c| {
                p.check(domain, &node, &c.name, &c.value, &self.limits)
                    .is_ok()
            });
        }
        let decided: Vec<bool> = list.iter().map(&asking).collect();
        for (c, d) in list.iter_mut().zip(decided) {
            if d {
                c.outcome = if ok {
                    Outcome::Ready
                } else {
                    Outcome::Refused(Refusal::Rejected)
                };
            }
        }
        let x = &self.model.params.validations[v];
        let (reply, service, caller, cs, id) = (
            x.reply,
            x.reply_service.clone(),
            x.caller,
            x.caller_slot,
            x.id.clone(),
        );
        let r = self.finish_set(domain, &node, reply, &service, &mut list, why);
        let here = self.model.clients[cs]
            .as_ref()
            .is_some_and(|c| c.conn == caller);
        if here {
            let e = &mut self.model.client_mut(cs).exp;
            let validating = |x: &Resp| matches!(x, Resp::Validating(w) if *w == v);
            match id {
                Some(id) => {
                    if e.responses.get(&id.key).is_some_and(validating) {
                        e.responses.insert(id.key, r);
                    }
                }
                None => {
                    if let Some(x) = e.anon_responses.iter_mut().find(|x| validating(x)) {
                        *x = r;
                    }
                }
            }
        }
    }

    /// Whether validation `v` is in flight and was sent to `me`.
    pub(crate) fn validating_at(&self, v: usize, me: ConnRef) -> bool {
        let x = &self.model.params.validations[v];
        x.alive && x.owner == me
    }

    /// The owner `slot` answers validation `v` (in flight, sent to it):
    /// accepted when its answer, read as its dialect reads any answer (a
    /// rosbridge `values` object is a success whatever `result` says),
    /// succeeds and says `"successful": true`.
    pub(crate) fn answer_validation(
        &mut self,
        slot: usize,
        v: usize,
        values: Option<Value>,
        result: &str,
    ) {
        let rosbridge = self.model.client(slot).rosbridge();
        let (values, result) = answer_as_read(rosbridge, values, result);
        let ok =
            result == Value::Bool(true) && values.get("successful") == Some(&Value::Bool(true));
        if ok {
            self.counts.param_validations_accepted += 1;
        } else {
            self.counts.param_validations_rejected += 1;
        }
        self.finish_validation(v, ok, None);
    }

    /// Validations whose owner stayed silent past the call timeout (at
    /// `tick_now`): refused.
    pub(crate) fn expire_validations(&mut self, tick_now: u64) {
        for v in 0..self.model.params.validations.len() {
            let x = &self.model.params.validations[v];
            if x.alive && x.due_tick <= tick_now {
                self.model.count(Counter::ParamValidationsFailed);
                self.counts.param_validation_timeouts += 1;
                self.finish_validation(v, false, None);
            }
        }
    }

    /// The shutdown: every validation in flight fails, its requester
    /// refused with the shutdown's reason.
    pub(crate) fn shutdown_params(&mut self) {
        for v in 0..self.model.params.validations.len() {
            if self.model.params.validations[v].alive {
                self.model.count(Counter::ParamValidationsFailed);
                self.finish_validation(v, false, Some(super::SHUTDOWN_REASON));
            }
        }
    }

    /// `slot` is being freed: its nodes' parameters go (each an event), the
    /// validations it asked for are forgotten, and those sent to it fail
    /// (their requesters refused).
    pub(crate) fn params_leave(&mut self, slot: usize) {
        let nodes = self.model.client(slot).nodes.clone();
        for n in &nodes {
            self.drop_node_params(slot, n);
        }
        let me = self.model.client(slot).conn;
        for x in self.model.params.validations.iter_mut() {
            if x.alive && x.caller == me {
                x.alive = false;
            }
        }
        for v in 0..self.model.params.validations.len() {
            if self.validating_at(v, me) {
                self.model.count(Counter::ParamValidationsFailed);
                self.counts.param_validations_owner_gone += 1;
                self.finish_validation(v, false, None);
            }
        }
    }

    /// From `slot` on, the first client that was sent a validation still
    /// in flight.
    pub(crate) fn validation_holder(&self, slot: u8) -> Option<usize> {
        let s = slot as usize % crate::actions::MAX_CLIENTS;
        (0..crate::actions::MAX_CLIENTS)
            .map(|i| (s + i) % crate::actions::MAX_CLIENTS)
            .find(|&i| {
                self.model.clients[i].as_ref().is_some_and(|c| {
                    c.learned_validations.iter().any(|raw| {
                        matches!(self.model.rg_map.get(raw), Some(&Fwd::Validation(v))
                            if self.validating_at(v, c.conn))
                    })
                })
            })
    }

    // ----- the clients' side ---------------------------------------------------------

    /// A validation call to `slot` as owner: the next thing owed, with
    /// its service, the changes to decide on, and a provider-side id never
    /// seen before.
    pub(crate) fn on_forwarded_validation(
        &mut self,
        slot: usize,
        v: usize,
        line: &[u8],
        msg: &Value,
    ) -> Result<(), Violation> {
        let show = String::from_utf8_lossy(line);
        let x = &self.model.params.validations[v];
        let id_raw = match msg.get("id") {
            Some(Value::String(s)) => json_string(s),
            _ => return Err(self.violation(format!("validation without string id: {show}"))),
        };
        if msg.get("service").and_then(Value::as_str) != Some(x.service.as_str())
            || msg.get("args") != Some(&x.args)
        {
            return Err(self.violation(format!(
                "slot {slot} got validation {show} but expected service {:?} args {}",
                x.service, x.args
            )));
        }
        if self
            .model
            .rg_map
            .insert(id_raw.clone(), Fwd::Validation(v))
            .is_some()
        {
            return Err(self.violation(format!("provider-side id {id_raw} issued twice")));
        }
        self.counts.param_validations_received += 1;
        self.model.client_mut(slot).learned_validations.push(id_raw);
        Ok(())
    }
}
