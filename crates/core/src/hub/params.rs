//! Parameters as the hub serves them: the owner's ops (`declare_parameter`,
//! `undeclare_parameter`, `set_parameter`), everyone else's access through
//! rosapi (`get_param`, `set_param`, `has_param`, `delete_param`,
//! `get_param_names`) and the ROS 2 node services (`<node>/get_parameters`,
//! `set_parameters`, `set_parameters_atomically`, `list_parameters`,
//! `describe_parameters`, `get_parameter_types`), the owner's validation,
//! and `/parameter_events`. The store and its rules are
//! [`crate::params::ParamStore`].
//!
//! Invariants:
//! - a change by anyone but the owner passes the rules (declared, type,
//!   read-only, range, size) and, for a validating parameter, the owner's
//!   answer, before it is applied; a refused change leaves the old value;
//! - a validation is a call to the owner (`<node>/validate_parameters`,
//!   answered with an ordinary `service_response`) in the call table, so it
//!   is bounded by the call timeout and ends exactly once: the requester
//!   gets one reply, accepted or rejected with a reason;
//! - every applied change (declare, set, delete, owner gone) is published
//!   on `/parameter_events` of the node's domain, where anyone listens.

use std::collections::HashMap;
use std::time::Instant;

use serde_json::{json, Value};

use rosgate_wire::encode::{self, Level};
use rosgate_wire::Raw;

use super::answer::Answer;
use super::{Hub, Origin};
use crate::access::Class;
use crate::bridge::PeerId;
use crate::calls::Call;
use crate::conn::ConnRef;
use crate::counters::{Counter, ErrorCode};
use crate::nodes::{Domain, DOMAINS};
use crate::params::{
    override_for, Change, Descriptor, Overrides, Param, ParamLimits, ParamStore, ParamValue,
    Refusal, GLOBAL,
};
use crate::registry::NodeTag;

/// The gateway's parameter-change topic.
pub const PARAMETER_EVENTS: &str = "/parameter_events";

/// The service a validating owner is called on (`<node>/validate_parameters`).
pub const VALIDATE_SERVICE: &str = "validate_parameters";

/// The ROS 2 parameter services served for every node with parameters.
pub const NODE_PARAM_SERVICES: [(&str, &str); 6] = [
    (
        "describe_parameters",
        "rcl_interfaces/srv/DescribeParameters",
    ),
    (
        "get_parameter_types",
        "rcl_interfaces/srv/GetParameterTypes",
    ),
    ("get_parameters", "rcl_interfaces/srv/GetParameters"),
    ("list_parameters", "rcl_interfaces/srv/ListParameters"),
    ("set_parameters", "rcl_interfaces/srv/SetParameters"),
    (
        "set_parameters_atomically",
        "rcl_interfaces/srv/SetParametersAtomically",
    ),
];

/// Longest parameter name.
pub const MAX_PARAM_NAME_CHARS: usize = 256;

/// The parameter stores of every domain and the bytes they hold together.
#[derive(Debug)]
pub(super) struct Params {
    stores: Box<[ParamStore]>,
    bytes: usize,
    /// Bytes held for nobody, all domains (their limit is shared).
    held_bytes: usize,
    pub(super) overrides: Overrides,
    /// Sets waiting for an owner's validation, by call sequence.
    pending: HashMap<u64, PendingSet>,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            stores: (0..DOMAINS).map(|_| ParamStore::default()).collect(),
            bytes: 0,
            held_bytes: 0,
            overrides: Overrides::new(),
            pending: HashMap::new(),
        }
    }
}

impl Params {
    pub(super) fn store(&self, domain: Domain) -> &ParamStore {
        &self.stores[domain as usize]
    }

    fn update<R>(&mut self, domain: Domain, f: impl FnOnce(&mut ParamStore) -> R) -> R {
        let s = &mut self.stores[domain as usize];
        let (before, held_before) = (s.bytes(), s.held_bytes());
        let r = f(s);
        self.bytes = self.bytes + s.bytes() - before;
        self.held_bytes = self.held_bytes + s.held_bytes() - held_before;
        r
    }

    /// The byte limits for a change in `domain`'s store.
    fn limits(&self, domain: Domain, l: &crate::limits::Limits) -> ParamLimits {
        ParamLimits {
            per_conn: l.max_param_bytes_per_conn,
            held: l.max_held_param_bytes,
            held_elsewhere: self.held_bytes - self.stores[domain as usize].held_bytes(),
        }
    }

    /// Bytes held for clients, all domains.
    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Parameters held, all domains.
    pub(super) fn count(&self) -> usize {
        self.stores.iter().map(ParamStore::len).sum()
    }
}

/// How the requester of a set is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reply {
    /// rosapi `set_param`: `{}` or `result:false` with the reason.
    Rosapi,
    /// `set_parameters`: one result per parameter.
    PerParameter,
    /// `set_parameters_atomically`: one result for all.
    Atomic,
}

/// Where one requested change stands.
#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    /// Waits for the owner's validation.
    Waiting,
    /// Passed; to be applied.
    Ready,
    Applied,
    Refused(String),
}

/// One requested change.
#[derive(Debug)]
struct Requested {
    name: String,
    value: ParamValue,
    outcome: Outcome,
}

/// A set, possibly waiting for the owner's validation.
#[derive(Debug)]
struct PendingSet {
    domain: Domain,
    node: String,
    reply: Reply,
    /// The service the requester called, as JSON.
    service_json: Vec<u8>,
    changes: Vec<Requested>,
    /// The owner asked to validate (set when the call is sent): only its
    /// answer, while it still owns the node, can apply the changes.
    validator: Option<(ConnRef, NodeTag)>,
    /// The peer beyond the requester when that is a bridge (the one
    /// speaking when it asked): the answer, perhaps later, goes there.
    peer: Option<PeerId>,
}

/// `node:param` (ROS 2 rosapi) or a plain name (ROS 1, global).
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
        _ => (GLOBAL.to_string(), name),
    }
}

/// Whether `name` is an acceptable parameter name.
fn check_param_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.chars().count() > MAX_PARAM_NAME_CHARS {
        return Err(format!(
            "a parameter name has 1 to {MAX_PARAM_NAME_CHARS} characters"
        ));
    }
    if name
        .chars()
        .any(|c| c.is_control() || c.is_whitespace() || c == ':')
    {
        return Err(format!(
            "parameter name {name:?} holds a space, ':' or a control character"
        ));
    }
    Ok(())
}

/// What an allowlist matches for a parameter: `<node>:<name>`, or the
/// bare name of a global one.
pub(super) fn param_key(node: &str, name: &str) -> String {
    if node == GLOBAL {
        name.to_string()
    } else {
        format!("{node}:{name}")
    }
}

fn parse_json(raw: Raw<'_>) -> Value {
    serde_json::from_str(raw.get()).unwrap_or(Value::Null)
}

/// A `declare_parameter` request's fields, as decoded.
#[derive(Debug, Clone, Copy)]
pub(super) struct Declaration<'a> {
    pub(super) name: &'a str,
    pub(super) value: Raw<'a>,
    pub(super) descriptor: Option<Raw<'a>>,
    /// Changes by others go to the owner for validation first.
    pub(super) validate: bool,
}

/// A service call the hub answers itself (rosapi's parameter services, a
/// node's parameter services): who called, the service's name (its answer
/// names it) and the caller's id.
#[derive(Debug, Clone, Copy)]
pub(super) struct Answering<'a> {
    pub(super) me: ConnRef,
    pub(super) service: &'a str,
    pub(super) id: Option<&'a [u8]>,
}

impl Hub {
    /// Sets the start-up overrides (`--params FILE`).
    pub fn set_param_overrides(&mut self, overrides: Overrides) {
        self.params.overrides = overrides;
    }

    /// Whether some connection declared node `node` in `domain` (owned,
    /// whether or not it declared parameters yet).
    pub(super) fn node_declared(&self, domain: Domain, node: &str) -> bool {
        node != GLOBAL && self.nodes.named(domain, node).next().is_some()
    }

    /// The owning node of `me` for a parameter op: `node` or the default.
    fn param_owner(
        &mut self,
        me: ConnRef,
        node: Option<&str>,
        id: Option<&[u8]>,
        now: Instant,
    ) -> Option<(Domain, NodeTag, String)> {
        let tag = match node {
            Some(n) => self.nodes.find(me, n),
            None => self.nodes.default_of(me),
        };
        let Some((tag, full)) =
            tag.and_then(|t| self.nodes.get(t).map(|n| (t, n.full_name().to_string())))
        else {
            let msg = "parameters belong to a node: declare_node first (or name one of this connection's nodes)";
            self.error_with_id(me, ErrorCode::UnknownNode, msg, id, now);
            return None;
        };
        let domain = self.conn(me.key).map_or(0, |c| c.domain());
        Some((domain, tag, full))
    }

    /// `declare_parameter`: see docs/protocol.md, "Parameters".
    pub(super) fn declare_parameter(
        &mut self,
        me: ConnRef,
        node: Option<&str>,
        decl: Declaration<'_>,
        id: Option<&[u8]>,
        now: Instant,
    ) {
        let Declaration {
            name,
            value,
            descriptor,
            validate,
        } = decl;
        let Some((domain, tag, full)) = self.param_owner(me, node, id, now) else {
            return;
        };
        if !self.permit(me, Class::ParamWrite, &param_key(&full, name), id, now) {
            return;
        }
        let parsed = check_param_name(name)
            .and_then(|()| ParamValue::from_json(&parse_json(value)))
            .and_then(|v| {
                let d = match descriptor {
                    Some(d) => Descriptor::from_json(&parse_json(d))?,
                    None => Descriptor::default(),
                };
                Ok((v, d))
            });
        let (default, descriptor) = match parsed {
            Ok(x) => x,
            Err(e) => {
                return self.error_with_id(
                    me,
                    ErrorCode::BadParameter,
                    &format!("declare_parameter {name}: {e}"),
                    id,
                    now,
                )
            }
        };
        // A start-up override, or a value the gateway held for this node
        // before it had an owner, wins over the owner's default (ROS 2).
        let held = self
            .params
            .store(domain)
            .get(&full, name)
            .filter(|_| self.params.store(domain).owner(&full).is_none())
            .map(|p| p.value.clone());
        // Another connection's node of the same name owns these already:
        // two owners of one parameter table cannot both be obeyed.
        if let Some((other, _)) = self.params.store(domain).owner(&full) {
            if other != me {
                let msg = format!(
                    "declare_parameter {name}: the parameters of {full} belong to another connection's node of that name"
                );
                return self.error_with_id(me, ErrorCode::BadParameter, &msg, id, now);
            }
        }
        let default_type = default.type_code();
        let value = override_for(&self.params.overrides, &full, name)
            .cloned()
            .or(held)
            .unwrap_or(default);
        // As rclcpp: an override of another type than the default is
        // refused unless the descriptor allows dynamic typing.
        if value.type_code() != default_type
            && default_type != crate::params::ptype::NOT_SET
            && !descriptor.dynamic_typing
        {
            let msg = format!(
                "declare_parameter {name}: its override is of type {} and the default of type {} (set dynamic_typing to allow it)",
                value.type_name(),
                crate::params::type_name(default_type)
            );
            return self.error_with_id(me, ErrorCode::BadParameter, &msg, id, now);
        }
        if let Err(why) = descriptor.check_range(&value) {
            let msg = format!("declare_parameter {name}: {why}");
            return self.error_with_id(me, ErrorCode::BadParameter, &msg, id, now);
        }
        let shown = value.to_json().to_string();
        let ty = value.type_name();
        let param = Param {
            value,
            descriptor,
            validate,
        };
        let limits = self.params.limits(domain, &self.limits);
        let declared = self
            .params
            .update(domain, |s| s.declare((me, tag), &full, name, param, limits));
        match declared {
            Ok((change, dropped)) => {
                for d in dropped.iter().filter(|d| d.as_str() != name) {
                    self.param_event(domain, &full, d, Change::Deleted, now);
                }
                self.counters.inc(Counter::ParamsDeclared);
                self.param_event(domain, &full, name, change, now);
                let msg = format!("declared parameter {full}:{name} = {shown} ({ty})");
                self.send_status(me, Level::Info, &msg, id, now);
            }
            Err(r) => {
                let msg = format!("declare_parameter: {}", r.reason(name));
                self.error_with_id(me, ErrorCode::BadParameter, &msg, id, now)
            }
        }
    }

    /// `undeclare_parameter`, by the owner.
    pub(super) fn undeclare_parameter(
        &mut self,
        me: ConnRef,
        node: Option<&str>,
        name: &str,
        id: Option<&[u8]>,
        now: Instant,
    ) {
        let Some((domain, tag, full)) = self.param_owner(me, node, id, now) else {
            return;
        };
        if !self.permit(me, Class::ParamWrite, &param_key(&full, name), id, now) {
            return;
        }
        if self.params.store(domain).owner(&full) != Some((me, tag))
            || !self.params.update(domain, |s| s.remove(&full, name))
        {
            let msg = format!("node {full} has no parameter {name}");
            return self.error_with_id(me, ErrorCode::BadParameter, &msg, id, now);
        }
        self.param_event(domain, &full, name, Change::Deleted, now);
        let msg = format!("undeclared parameter {full}:{name}");
        self.send_status(me, Level::Info, &msg, id, now);
    }

    /// `set_parameter`, by the owner: its own change, checked by the rules
    /// but not validated (it is the validator).
    pub(super) fn set_own_parameter(
        &mut self,
        me: ConnRef,
        node: Option<&str>,
        name: &str,
        value: Raw<'_>,
        id: Option<&[u8]>,
        now: Instant,
    ) {
        let Some((domain, tag, full)) = self.param_owner(me, node, id, now) else {
            return;
        };
        if !self.permit(me, Class::ParamWrite, &param_key(&full, name), id, now) {
            return;
        }
        let value = match ParamValue::from_json(&parse_json(value)) {
            Ok(v) => v,
            Err(e) => {
                return self.error_with_id(
                    me,
                    ErrorCode::BadParameter,
                    &format!("set_parameter {name}: {e}"),
                    id,
                    now,
                )
            }
        };
        let store = self.params.store(domain);
        let limits = self.params.limits(domain, &self.limits);
        let checked = if store.owner(&full) == Some((me, tag)) {
            store.check(&full, name, &value, limits)
        } else {
            Err(Refusal::Undeclared)
        };
        match checked {
            Ok(()) => {
                let change = self.params.update(domain, |s| s.set(&full, name, value));
                self.counters.inc(Counter::ParamSetsAccepted);
                self.param_event(domain, &full, name, change, now);
                let msg = format!("set parameter {full}:{name}");
                self.send_status(me, Level::Info, &msg, id, now);
            }
            Err(r) => {
                self.counters.inc(Counter::ParamSetsRejected);
                self.error_with_id(me, ErrorCode::BadParameter, &r.reason(name), id, now)
            }
        }
    }

    /// The owner of `node`'s parameters left (or destroyed it): they go.
    pub(super) fn drop_node_params(
        &mut self,
        domain: Domain,
        node: &str,
        owner: (ConnRef, NodeTag),
        now: Instant,
    ) {
        let gone = self.params.update(domain, |s| s.drop_node(node, owner));
        for name in gone {
            self.param_event(domain, node, &name, Change::Deleted, now);
        }
    }

    // ----- requests from anyone --------------------------------------------------

    /// One parameter set as rosapi's `set_param` makes it (answered in
    /// rosapi's shape to `at`): through the node's `set_parameters` when
    /// another provider serves it (a ROS 2 node, another gateway's node;
    /// `hub/params_remote.rs`), else through this gateway's store and the
    /// owner's validation ([`Hub::request_set`]).
    pub(super) fn set_param_anywhere(
        &mut self,
        at: Answering<'_>,
        domain: Domain,
        node: &str,
        param: &str,
        value: ParamValue,
        now: Instant,
    ) {
        if !self.forward_set_param(at, domain, node, param, &value, now) {
            let changes = vec![(param.to_owned(), value)];
            self.request_set(at, domain, node, changes, Reply::Rosapi, now);
        }
    }

    /// Sets `changes` of `node` for `me`: applied at once where the rules
    /// allow and no validation is needed, sent to the owner for validation
    /// otherwise; `me` is answered (now or when the owner answers) in the
    /// `reply` shape. An atomic set is applied all or nothing.
    pub(super) fn request_set(
        &mut self,
        at: Answering<'_>,
        domain: Domain,
        node: &str,
        changes: Vec<(String, ParamValue)>,
        reply: Reply,
        now: Instant,
    ) {
        let Answering { me, service, id } = at;
        let store = self.params.store(domain);
        let limits = self.params.limits(domain, &self.limits);
        // A node a connection declared is owned even while the store knows
        // no owner for it (it declared no parameter yet, or undeclared its
        // last one): its undeclared parameters are refused, not created as
        // held ones behind its back.
        let live_unowned = store.owner(node).is_none() && self.node_declared(domain, node);
        let role = self.viewer(me);
        let mut validator = None;
        let mut forbidden = 0;
        let mut requested = Vec::with_capacity(changes.len());
        for (name, value) in changes {
            let key = param_key(node, &name);
            // rosapi's `set_param` checked the name already; the node
            // services did not, and a held table would take any name.
            let checked = if let Err(why) = check_param_name(&name) {
                Err(why)
            } else if !self.visible(role, &[Class::ParamWrite], &key) {
                forbidden += 1;
                Err(Refusal::Forbidden(key).reason(&name))
            } else if live_unowned {
                Err(Refusal::Undeclared.reason(&name))
            } else {
                store
                    .check(node, &name, &value, limits)
                    .map_err(|r| r.reason(&name))
            };
            let outcome = match checked {
                Err(why) => Outcome::Refused(why),
                Ok(()) => match store.validator(node, &name) {
                    Some(v) => {
                        validator = Some(v);
                        Outcome::Waiting
                    }
                    None => Outcome::Ready,
                },
            };
            requested.push(Requested {
                name,
                value,
                outcome,
            });
        }
        for _ in 0..forbidden {
            self.counters.error(ErrorCode::Forbidden);
        }
        let mut service_json = Vec::new();
        encode::json_string(&mut service_json, service);
        let mut p = PendingSet {
            domain,
            node: node.to_string(),
            reply,
            service_json,
            changes: requested,
            validator: None,
            peer: self.fed.speaking,
        };
        let atomic = reply == Reply::Atomic;
        let cause = p.changes.iter().find_map(|c| match &c.outcome {
            Outcome::Refused(why) => Some(why.clone()),
            _ => None,
        });
        if let Some(cause) = cause.filter(|_| atomic) {
            // All or nothing: one refusal refuses the others. The others
            // carry the cause, since the one result of an atomic set is
            // the first refusal in request order, which may be one of them
            // (without it, the requester would not learn why).
            refuse_rest(
                &mut p,
                &format!("not set: another change of the same atomic request was refused: {cause}"),
            );
            return self.finish_set(me, p, id, now);
        }
        let Some((owner, owner_tag)) = validator else {
            return self.finish_set(me, p, id, now);
        };
        // The validation is a call of the requester: it counts against
        // its limit with the requests it has waiting for a provider.
        let calls = self.calls.in_flight(me) + self.waiting.of(me);
        if !self.live(owner) || calls >= self.limits.max_calls_per_conn {
            refuse_rest(
                &mut p,
                "its node cannot validate it now (owner gone, or too many calls in flight)",
            );
            return self.finish_set(me, p, id, now);
        }
        if !atomic {
            self.apply_ready(&mut p, now);
        }
        // The owner sees the changes it validates (atomic: all of them).
        let asked: Vec<Value> = p
            .changes
            .iter()
            .filter(|c| c.outcome == Outcome::Waiting || (atomic && c.outcome == Outcome::Ready))
            .map(|c| json!({"name": c.name, "value": c.value.to_json(), "type": c.value.type_name()}))
            .collect();
        let args = json!({"node": node, "parameters": asked}).to_string();
        let mut validate_json = Vec::new();
        encode::json_string(&mut validate_json, &format!("{node}/{VALIDATE_SERVICE}"));
        let seq = self.calls.insert(
            me,
            owner,
            &validate_json,
            id,
            now,
            now + self.limits.call_timeout,
        );
        self.counters.inc(Counter::ParamValidations);
        let mut out = Vec::new();
        encode::call_service(&mut out, &validate_json, seq, &args);
        self.send_control(owner, &out, now);
        p.validator = Some((owner, owner_tag));
        self.params.pending.insert(seq, p);
    }

    /// Applies the changes of `p` that are ready. Each was checked alone
    /// against the store as it stood; the room they take together is
    /// checked here, where they are applied: one by one (each against what
    /// the earlier ones left), or, for an atomic set, all together or none.
    /// Without this, one request naming many new parameters would pass the
    /// count limits (and one of big values the byte limits) by as much as
    /// it names.
    fn apply_ready(&mut self, p: &mut PendingSet, now: Instant) {
        let (domain, node) = (p.domain, p.node.clone());
        let ready = |c: &&mut Requested| c.outcome == Outcome::Ready;
        if p.reply == Reply::Atomic {
            let all = p
                .changes
                .iter()
                .filter(|c| c.outcome == Outcome::Ready)
                .map(|c| (c.name.as_str(), &c.value));
            let limits = self.params.limits(domain, &self.limits);
            if let Err(r) = self.params.store(domain).room_for(&node, all, limits) {
                for c in p.changes.iter_mut().filter(ready) {
                    c.outcome = Outcome::Refused(format!(
                        "not set: the changes of this atomic request do not fit together: {}",
                        r.reason(&c.name)
                    ));
                }
                return;
            }
        }
        for c in p.changes.iter_mut() {
            if c.outcome != Outcome::Ready {
                continue;
            }
            if p.reply != Reply::Atomic {
                let limits = self.params.limits(domain, &self.limits);
                let room = self.params.store(domain).room_for(
                    &node,
                    [(c.name.as_str(), &c.value)],
                    limits,
                );
                if let Err(r) = room {
                    c.outcome = Outcome::Refused(r.reason(&c.name));
                    continue;
                }
            }
            let value = std::mem::replace(&mut c.value, ParamValue::NotSet);
            let change = self.params.update(domain, |s| s.set(&node, &c.name, value));
            c.outcome = Outcome::Applied;
            self.counters.inc(Counter::ParamSetsAccepted);
            self.param_event(domain, &node, &c.name, change, now);
        }
    }

    /// The owner answered a validation (`Ok((accepted, reason))`), or could
    /// not (`Err(why)`: timed out, gone): apply or refuse, then reply to
    /// the requester. False if `call` was not a validation.
    pub(super) fn finish_validation(
        &mut self,
        call: &Call,
        answer: Result<(bool, String), String>,
        now: Instant,
    ) -> bool {
        let Some(mut p) = self.params.pending.remove(&call.seq()) else {
            return false;
        };
        let atomic = p.reply == Reply::Atomic;
        let waiting = |o: &Outcome| *o == Outcome::Waiting || (atomic && *o == Outcome::Ready);
        let mut verdict: Result<(), String> = match answer {
            Ok((true, _)) => Ok(()),
            Ok((false, reason)) if reason.is_empty() => Err("no reason given".to_string()),
            Ok((false, reason)) => Err(reason),
            Err(why) => {
                self.counters.inc(Counter::ParamValidationsFailed);
                Err(why)
            }
        };
        // The rules may have changed while the owner thought (another set,
        // the node gone): checked again before anything is applied. An
        // owner that destroyed the node (or undeclared its last parameter)
        // before answering no longer speaks for it: without this, its
        // "accepted" would pass the held-parameter rules and resurrect the
        // parameter as a held one (or bypass a new owner's validation).
        let store = self.params.store(p.domain);
        let limits = self.params.limits(p.domain, &self.limits);
        if verdict.is_ok() && store.owner(&p.node) != p.validator {
            verdict = Err(format!(
                "node {} was destroyed or changed owner during the validation",
                p.node
            ));
        }
        if verdict.is_ok() {
            if let Some(r) = p
                .changes
                .iter()
                .filter(|c| waiting(&c.outcome))
                .find_map(|c| {
                    store
                        .check(&p.node, &c.name, &c.value, limits)
                        .err()
                        .map(|r| r.reason(&c.name))
                })
            {
                verdict = Err(r);
            }
        }
        for c in p.changes.iter_mut().filter(|c| waiting(&c.outcome)) {
            c.outcome = match &verdict {
                Ok(()) => Outcome::Ready,
                Err(why) => Outcome::Refused(Refusal::Rejected(why.clone()).reason(&c.name)),
            };
        }
        let id = call.caller_id().map(<[u8]>::to_vec);
        self.finish_set(call.caller(), p, id.as_deref(), now);
        true
    }

    /// Applies what is ready and answers the requester.
    fn finish_set(&mut self, me: ConnRef, mut p: PendingSet, id: Option<&[u8]>, now: Instant) {
        self.apply_ready(&mut p, now);
        let refused = p
            .changes
            .iter()
            .filter(|c| matches!(c.outcome, Outcome::Refused(_)))
            .count();
        self.counters
            .add(Counter::ParamSetsRejected, refused as u64);
        let results: Vec<Value> = p
            .changes
            .iter()
            .map(|c| match &c.outcome {
                Outcome::Refused(why) => json!({"successful": false, "reason": why}),
                _ => json!({"successful": true, "reason": ""}),
            })
            .collect();
        let first_err = p.changes.iter().find_map(|c| match &c.outcome {
            Outcome::Refused(why) => Some(why.clone()),
            _ => None,
        });
        // The answer's values and result (a failure's values are its
        // reason, a JSON string).
        let failure = |why: &str| {
            let mut v = Vec::with_capacity(why.len() + 2);
            encode::json_string(&mut v, why);
            (v, &b"false"[..])
        };
        let (values, result) = match p.reply {
            Reply::Rosapi => match first_err {
                None => (br#"{"successful":true,"reason":""}"#.to_vec(), &b"true"[..]),
                Some(why) => failure(&why),
            },
            Reply::PerParameter => (
                json!({ "results": results }).to_string().into_bytes(),
                &b"true"[..],
            ),
            Reply::Atomic => {
                let result = match first_err {
                    None => json!({"successful": true, "reason": ""}),
                    Some(why) => json!({"successful": false, "reason": why}),
                };
                (
                    json!({ "result": result }).to_string().into_bytes(),
                    &b"true"[..],
                )
            }
        };
        let peer = p.peer;
        let answer = Answer {
            values: &values,
            result,
            status: None,
        };
        self.send_service_answer(me, peer, &p.service_json, id, answer, now);
    }

    /// An owner's answer to a validation call (`values`:
    /// `{"successful":bool,"reason":".."}`; `result:false`, or `values`
    /// missing or not saying `successful: true`, is a rejection). False if
    /// `call` was not a validation.
    pub(super) fn params_validation_answer(
        &mut self,
        call: &Call,
        values: Option<Raw<'_>>,
        result: Raw<'_>,
        now: Instant,
    ) -> bool {
        if !self.params.pending.contains_key(&call.seq()) {
            return false;
        }
        let v = values.map(parse_json).unwrap_or(Value::Null);
        let accepted =
            result.get() == "true" && v.get("successful").and_then(Value::as_bool) == Some(true);
        let reason = v
            .get("reason")
            .and_then(Value::as_str)
            .map(str::to_string)
            .or_else(|| v.as_str().map(str::to_string))
            .unwrap_or_default();
        self.finish_validation(call, Ok((accepted, reason)), now)
    }

    /// Forgets the validations `me` asked for (it left).
    pub(super) fn forget_validations(&mut self, seqs: &[u64]) {
        for s in seqs {
            self.params.pending.remove(s);
        }
    }

    // ----- events -------------------------------------------------------------------

    /// Publishes a change on `/parameter_events` of `domain`, if anyone
    /// listens.
    fn param_event(
        &mut self,
        domain: Domain,
        node: &str,
        name: &str,
        change: Change,
        now: Instant,
    ) {
        self.counters.inc(Counter::ParamEvents);
        self.foxglove_param_changed(domain, node, name, now);
        if !self.listens(domain, PARAMETER_EVENTS) {
            return;
        }
        let value = match change {
            Change::Deleted => ParamValue::NotSet,
            _ => self
                .params
                .store(domain)
                .get(node, name)
                .map_or(ParamValue::NotSet, |p| p.value.clone()),
        };
        let p = json!([{"name": name, "value": value.to_parameter_value()}]);
        let none = json!([]);
        let (new, changed, deleted) = match change {
            Change::New => (&p, &none, &none),
            Change::Changed => (&none, &p, &none),
            Change::Deleted => (&none, &none, &p),
        };
        let (sec, nanosec) = self.wall(now);
        let node = if node == GLOBAL { "" } else { node };
        let msg = json!({
            "stamp": {"sec": sec, "nanosec": nanosec},
            "node": node,
            "new_parameters": new,
            "changed_parameters": changed,
            "deleted_parameters": deleted,
        })
        .to_string();
        let msg = Raw::from_valid_json(&msg);
        self.route(Origin::Gateway, domain, PARAMETER_EVENTS, msg, now);
    }

    /// If `name` is `<node>/<srv>`, a parameter service the gateway serves
    /// in `domain` (the node has parameters): the node and the type.
    pub(super) fn param_service<'n>(
        &self,
        domain: Domain,
        name: &'n str,
    ) -> Option<(&'n str, &'static str)> {
        let (node, short) = name.rsplit_once('/')?;
        let ty = NODE_PARAM_SERVICES.iter().find(|(s, _)| *s == short)?.1;
        if node == GLOBAL {
            return None;
        }
        self.params
            .store(domain)
            .node(node)
            .filter(|n| !n.params.is_empty())?;
        Some((node, ty))
    }

    // ----- rosapi ---------------------------------------------------------------------

    /// rosapi's parameter services; `None` if `short` is not one of them.
    pub(super) fn rosapi_params(
        &mut self,
        at: Answering<'_>,
        domain: Domain,
        short: &str,
        args: &Value,
        now: Instant,
    ) -> Option<Result<Value, String>> {
        let me = at.me;
        let name = args.get("name").and_then(Value::as_str).unwrap_or("");
        let (node, param) = split_name(name);
        let role = self.viewer(me);
        let key = param_key(&node, param);
        let may = |hub: &Hub, class: Class| hub.visible(role, &[class], &key);
        match short {
            "get_param" | "has_param" if !may(self, Class::ParamRead) => {
                self.counters.error(ErrorCode::Forbidden);
                return Some(if short == "has_param" {
                    Ok(json!({ "exists": false }))
                } else {
                    Err(format!("forbidden: may not read parameter {key}"))
                });
            }
            "set_param" | "delete_param" if !may(self, Class::ParamWrite) => {
                self.counters.error(ErrorCode::Forbidden);
                return Some(Err(format!("forbidden: may not set parameter {key}")));
            }
            _ => {}
        }
        let store = self.params.store(domain);
        Some(match short {
            "get_param" => {
                let default = args
                    .get("default_value")
                    .or_else(|| args.get("default"))
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let default_json = if default.is_empty() {
                    "null".to_string()
                } else if serde_json::from_str::<Value>(default).is_ok() {
                    default.to_string()
                } else {
                    json!(default).to_string()
                };
                if store.get(&node, param).is_none()
                    && self.forward_get_param(at, domain, &node, param, &default_json, now)
                {
                    return Some(Ok(Value::Null));
                }
                let store = self.params.store(domain);
                match store.get(&node, param) {
                    Some(p) => Ok(
                        json!({"value": p.value.to_json().to_string(), "successful": true, "reason": ""}),
                    ),
                    None => {
                        let value = default_json;
                        let owned =
                            store.owner(&node).is_some() || self.node_declared(domain, &node);
                        let reason = if owned {
                            format!("node {node} did not declare parameter {param}")
                        } else {
                            String::new()
                        };
                        Ok(json!({"value": value, "successful": !owned, "reason": reason}))
                    }
                }
            }
            "has_param" => Ok(json!({ "exists": store.get(&node, param).is_some() })),
            "get_param_names" => {
                // With the parameters other gateways' nodes own (their
                // graphs), so every gateway lists the same names.
                let remote = self.remote_params(domain).map(str::to_string);
                let mut names: Vec<String> = store
                    .all()
                    .map(|(n, p, _)| param_key(n, p))
                    .chain(remote)
                    .filter(|k| self.visible(role, &[Class::ParamRead], k))
                    .collect();
                names.sort();
                names.dedup();
                Ok(json!({ "names": names }))
            }
            "delete_param" => {
                if store.owner(&node).is_some() {
                    Err(format!(
                        "parameter {name} belongs to node {node}; only its owner can undeclare it"
                    ))
                } else if self.params.update(domain, |s| s.remove(&node, param)) {
                    self.param_event(domain, &node, param, Change::Deleted, now);
                    Ok(json!({"successful": true, "reason": ""}))
                } else {
                    Ok(json!({"successful": true, "reason": "no such parameter"}))
                }
            }
            "set_param" => {
                let text = args.get("value").and_then(Value::as_str).unwrap_or("");
                let value = serde_json::from_str::<Value>(text)
                    .map_err(|_| format!("set_param {name}: value must be JSON text (roslib and roslibpy send JSON.stringify(value))"))
                    .and_then(|v| ParamValue::from_json(&v).map_err(|e| format!("set_param {name}: {e}")));
                let checked = check_param_name(param).map_err(|e| format!("set_param: {e}"));
                match value.and_then(|v| checked.map(|()| v)) {
                    Err(e) => Err(e),
                    Ok(v) => {
                        self.set_param_anywhere(at, domain, &node, param, v, now);
                        return Some(Ok(Value::Null));
                    }
                }
            }
            _ => return None,
        })
    }

    // ----- the ROS 2 node services ----------------------------------------------------

    /// Serves `<node>/<service>` for a node with parameters in `domain`;
    /// false if `name` is not one (a client providing it comes first).
    pub(super) fn node_param_service(
        &mut self,
        me: ConnRef,
        domain: Domain,
        name: &str,
        args: Option<Raw<'_>>,
        id: Option<&[u8]>,
        now: Instant,
    ) -> bool {
        let Some((node, short)) = name.rsplit_once('/') else {
            return false;
        };
        // Global parameters belong to no node: `/get_parameters` is nobody's.
        if !NODE_PARAM_SERVICES.iter().any(|(s, _)| *s == short)
            || node == GLOBAL
            || self.params.store(domain).node(node).is_none()
        {
            return false;
        }
        self.counters.inc(Counter::BuiltinCalls);
        let args = args.map(parse_json).unwrap_or(Value::Null);
        let names: Vec<String> = args
            .get("names")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        let role = self.viewer(me);
        let readable =
            |hub: &Hub, n: &str| hub.visible(role, &[Class::ParamRead], &param_key(node, n));
        let store = self.params.store(domain);
        // A parameter its role may not read looks unset (ROS 2's answer for
        // a name that does not exist).
        let get = |n: &String| store.get(node, n).filter(|_| readable(self, n));
        let values = match short {
            "get_parameters" => {
                let values: Vec<Value> = names
                    .iter()
                    .map(|n| {
                        get(n)
                            .map_or(ParamValue::NotSet, |p| p.value.clone())
                            .to_parameter_value()
                    })
                    .collect();
                json!({ "values": values })
            }
            "get_parameter_types" => {
                let types: Vec<u8> = names
                    .iter()
                    .map(|n| get(n).map_or(0, |p| p.value.type_code()))
                    .collect();
                json!({ "types": types })
            }
            "describe_parameters" => {
                let d: Vec<Value> = names
                    .iter()
                    .map(|n| match get(n) {
                        Some(p) => p.descriptor.to_json(n, p.value.type_code()),
                        None => Descriptor::default().to_json(n, 0),
                    })
                    .collect();
                json!({ "descriptors": d })
            }
            "list_parameters" => {
                let prefixes: Vec<String> = args
                    .get("prefixes")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(|v| v.as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default();
                let depth = args.get("depth").and_then(Value::as_u64).unwrap_or(0);
                let mut out_names = Vec::new();
                let mut out_prefixes: Vec<String> = Vec::new();
                if let Some(n) = store.node(node) {
                    for pname in n.params.keys().filter(|p| readable(self, p)) {
                        let under = prefixes.is_empty()
                            || prefixes
                                .iter()
                                .any(|p| pname == p || pname.starts_with(&format!("{p}.")));
                        let base_depth = prefixes
                            .iter()
                            .filter(|p| pname.starts_with(&format!("{p}.")))
                            .map(|p| p.matches('.').count() + 1)
                            .max()
                            .unwrap_or(0);
                        let levels = pname.matches('.').count() + 1 - base_depth;
                        if under && (depth == 0 || levels as u64 <= depth) {
                            out_names.push(pname.clone());
                            if let Some((pre, _)) = pname.rsplit_once('.') {
                                if !out_prefixes.iter().any(|x| x == pre) {
                                    out_prefixes.push(pre.to_string());
                                }
                            }
                        }
                    }
                }
                json!({"result": {"names": out_names, "prefixes": out_prefixes}})
            }
            "set_parameters" | "set_parameters_atomically" => {
                let list = args
                    .get("parameters")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                let mut changes = Vec::new();
                let mut bad = None;
                for p in list {
                    let n = p
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string();
                    match p.get("value").map(ParamValue::from_json) {
                        Some(Ok(v)) => changes.push((n, v)),
                        Some(Err(e)) => bad = Some(format!("parameter {n}: {e}")),
                        None => bad = Some(format!("parameter {n}: no value")),
                    }
                }
                if let Some(why) = bad {
                    self.counters.error(ErrorCode::BadArgs);
                    let mut nj = Vec::new();
                    encode::json_string(&mut nj, name);
                    self.send_service_failure(me, None, &nj, id, &why, now);
                    return true;
                }
                let reply = if short == "set_parameters" {
                    Reply::PerParameter
                } else {
                    Reply::Atomic
                };
                let node = node.to_string();
                let at = Answering {
                    me,
                    service: name,
                    id,
                };
                self.request_set(at, domain, &node, changes, reply, now);
                return true;
            }
            _ => return false,
        };
        let mut nj = Vec::new();
        encode::json_string(&mut nj, name);
        let bytes = values.to_string();
        let answer = Answer::ok(bytes.as_bytes());
        self.send_service_answer(me, None, &nj, id, answer, now);
        true
    }
}

/// Refuses every change of `p` not refused yet, with `why`.
fn refuse_rest(p: &mut PendingSet, why: &str) {
    for c in p.changes.iter_mut() {
        if !matches!(c.outcome, Outcome::Refused(_)) {
            c.outcome = Outcome::Refused(format!("parameter {}: {why}", c.name));
        }
    }
}
