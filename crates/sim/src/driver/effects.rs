//! What each accepted request line does to the model, applied just before
//! the read that completes it: registrations change (or are refused at
//! the per-connection limits), statuses become owed, calls are forwarded
//! or fail, answers complete calls, and a publish is queued for its
//! subscribers (what the hub queued and shed is checked right after).
//!
//! Where the dialects differ, the client's own decides: per-id
//! registrations and rosbridge-style reading of a provider's answer
//! ([`answer_as_read`]) for WebSocket clients.
//!
//! Names are resolved as the client's own node would (`Client::resolve`):
//! as written by a client that resolves nothing, else expanded and
//! remapped for the node the request names or the default one, or refused
//! (`invalid_name`, `unknown_node`) with nothing changed. Everything then
//! happens in the client's domain: its topics, services, subscribers and
//! providers are that domain's. Declaring a node may move a client that
//! holds nothing to another domain; a name two nodes of a domain share
//! earns every owner a warning; destroying a node withdraws what it
//! registered and nothing else.

use std::time::Duration;

use serde_json::Value;

use rosgate_core::counters::ErrorCode;
use rosgate_core::hub::{MAX_NODES_PER_CONN, RESERVED_PREFIX, ROSAPI_PREFIX, STATS_SERVICE};

use super::Sim;
use crate::actions::MAX_CLIENTS;
use crate::model::goals::{timeout_secs, GoalSend, CANCEL_GOAL_SUFFIX};
use crate::model::qos::Asked;
use crate::model::requests::{CallSend, Effect};
use crate::model::{tick_ceil, CallModel, Fwd, Id, Lvl, Resp, ServiceModel};
use crate::names::NodeModel;
use crate::violation::Violation;

/// The highest domain id (ROS_DOMAIN_ID's range).
const MAX_DOMAIN: u64 = 232;

/// What rosbridge answers a provider failing without `values` with.
const NO_VALUES_FAILURE: &str = "the provider reported a failure";

/// The `values` and `result` a caller receives for a provider's answer.
/// The strict dialect passes them through (its answers always have
/// `values`). A rosbridge-dialect provider is read as rosbridge reads it:
/// an object `values` is a success whatever `result` says; other `values`
/// keep their `result`; no `values` with `result: false` is a failure with
/// a reason text; no `values` otherwise is `{}`.
pub(crate) fn answer_as_read(
    rosbridge: bool,
    values: Option<Value>,
    result: &str,
) -> (Value, Value) {
    let parsed: Value = serde_json::from_str(result).expect("result JSON");
    match values {
        Some(v) if rosbridge && v.is_object() => (v, Value::Bool(true)),
        Some(v) => (v, parsed),
        None if result == "false" => (Value::String(NO_VALUES_FAILURE.into()), Value::Bool(false)),
        None => (Value::Object(Default::default()), parsed),
    }
}

/// A call whose service name is resolved: its args text, its timeout in
/// seconds (`None`: the call timeout), the caller's id and whether it
/// waits for a provider.
#[derive(Debug)]
pub(crate) struct ResolvedCall {
    pub name: String,
    pub args_text: String,
    pub secs: Option<f64>,
    pub id: Option<Id>,
    pub wait: bool,
}

impl Sim {
    /// Applies `effect` of a request the hub is about to handle (its last
    /// byte goes next) to the model.
    pub(crate) fn apply_effect(&mut self, slot: usize, effect: Effect) -> Result<(), Violation> {
        self.apply_one(slot, effect)?;
        self.sync_topics();
        Ok(())
    }

    fn apply_one(&mut self, slot: usize, effect: Effect) -> Result<(), Violation> {
        match effect {
            Effect::Nothing => {}
            Effect::FxSubscribe { sub } => self.fx_subscribe(slot, sub),
            Effect::FxUnsubscribe { sub } => self.fx_unsubscribe(slot, sub),
            Effect::FxAdvertise { chan, cdr } => self.fx_advertise(slot, chan, cdr),
            Effect::FxUnadvertise => self.fx_unadvertise(slot),
            Effect::Error { id, code } => {
                self.model.expect_status(slot, id.as_ref(), true);
                if let Some(code) = code {
                    self.count_error(code);
                }
            }
            Effect::Topic {
                op,
                name,
                id,
                node,
                asked,
            } => {
                if let Some((uid, name)) = self.resolved(slot, &name, node, id.as_ref()) {
                    self.apply_topic(slot, op, &name, uid, id.as_ref(), asked);
                }
            }
            Effect::Publish {
                name,
                msg,
                id,
                node,
            } => {
                if let Some((_, name)) = self.resolved(slot, &name, node, id.as_ref()) {
                    let domain = self.model.client(slot).domain;
                    self.publish_to(domain, &name, &msg, Some(slot));
                }
            }
            Effect::Service {
                adv,
                name,
                ty,
                id,
                node,
            } => {
                if let Some((uid, name)) = self.resolved(slot, &name, node, id.as_ref()) {
                    self.apply_service(slot, adv, name, uid, ty, id.as_ref());
                }
            }
            Effect::Call(call) => self.apply_call(slot, call),
            Effect::DeclareNode {
                name,
                namespace,
                remap,
                domain,
                id,
            } => self.apply_declare(slot, name, namespace, remap, domain, id.as_ref()),
            Effect::DestroyNode { name, id } => self.apply_destroy(slot, &name, id.as_ref()),
            Effect::Opening { domain, node } => {
                if let Some(d) = domain {
                    self.model.client_mut(slot).domain = d;
                }
                if let Some(n) = node {
                    self.add_node(slot, n, None);
                }
            }
            Effect::Goal(op) => self.apply_goal(slot, op)?,
            Effect::Param(op) => self.apply_param(slot, op),
            Effect::Respond {
                id,
                values,
                result,
                status,
            } => {
                if values.is_none() && !self.model.client(slot).rosbridge() {
                    // The strict dialect requires `values`.
                    self.model.expect_status(slot, id.as_ref(), true);
                } else {
                    self.apply_answer(slot, id.as_ref(), values, result, status)?;
                }
            }
        }
        Ok(())
    }

    /// subscribe, unsubscribe, advertise or unadvertise. A registration
    /// beyond the per-connection limit (every rosbridge (topic, id) pair
    /// counts, a repeated one is free) is refused with the id, and nothing
    /// changes.
    pub(super) fn apply_topic(
        &mut self,
        slot: usize,
        op: &str,
        name: &str,
        node: Option<u64>,
        id: Option<&Id>,
        asked: Asked,
    ) {
        let raw = id.map(|id| id.raw.as_str());
        let (sub, max) = match op {
            "subscribe" => (true, self.limits.max_subscriptions_per_conn),
            "advertise" => (false, self.limits.max_advertisements_per_conn),
            _ => {
                let sub = op == "unsubscribe";
                let c = self.model.client_mut(slot);
                let was = if sub { &c.subs } else { &c.pubs }.contains_key(name);
                c.unregister(sub, name, node, raw);
                let is = if sub { &c.subs } else { &c.pubs }.contains_key(name);
                self.model.expect_status(slot, id, false);
                if was && !is {
                    self.after_leave(slot, sub, name);
                }
                return;
            }
        };
        let c = self.model.client(slot);
        let regs = if sub { &c.subs } else { &c.pubs };
        let key = c.key(node, raw);
        let adds = regs.get(name).is_none_or(|keys| !keys.contains(&key));
        if adds && c.entries(sub) >= max {
            self.counts.registrations_refused += 1;
            self.count_error(ErrorCode::TooManyRegistrations);
            return self.model.expect_status(slot, id, true);
        }
        if node.is_some() {
            self.counts.node_registrations += 1;
        }
        let new_member = !regs.contains_key(name);
        self.model.client_mut(slot).register(sub, name, node, raw);
        self.model.expect_status(slot, id, false);
        self.after_register(slot, sub, name, asked, new_member);
    }

    /// `raw` as `slot` resolves it for `node` (the node's uid and the name
    /// as registered), or `None` after expecting the error status the
    /// refusal earns.
    pub(crate) fn resolved(
        &mut self,
        slot: usize,
        raw: &str,
        node: Option<String>,
        id: Option<&Id>,
    ) -> Option<(Option<u64>, String)> {
        match self.model.client(slot).resolve(raw, node.as_deref()) {
            Ok((uid, name)) => {
                if name != raw {
                    self.counts.names_expanded += 1;
                }
                Some((uid, name))
            }
            Err(code) => {
                self.count_error(code);
                self.model.expect_status(slot, id, true);
                None
            }
        }
    }

    /// `declare_node`, refused (in the hub's order: names, domain, a
    /// domain change of a client holding anything, a full name it already
    /// declared, the node limit) or declared: the client may move to the
    /// domain, owes an info status, and every owner of a node of that
    /// domain with the same full name owes a warning.
    fn apply_declare(
        &mut self,
        slot: usize,
        name: &str,
        namespace: Option<&str>,
        remap: &[&str],
        domain: Option<&str>,
        id: Option<&Id>,
    ) {
        // The field must be a number (a u64); anything else is refused
        // before the op is.
        let domain = match domain.map(str::parse::<u64>) {
            None => None,
            Some(Ok(d)) => Some(d),
            Some(Err(_)) => return self.model.expect_status(slot, id, true),
        };
        let uid = self.model.node_uids + 1;
        let Some(node) = NodeModel::new(uid, name, namespace, remap) else {
            self.count_error(ErrorCode::InvalidName);
            return self.model.expect_status(slot, id, true);
        };
        let c = self.model.client(slot);
        let domain = match domain {
            None => c.domain,
            Some(d) if d > MAX_DOMAIN => {
                self.count_error(ErrorCode::InvalidDomain);
                return self.model.expect_status(slot, id, true);
            }
            Some(d) => d as u8,
        };
        if domain != c.domain && c.holds_anything(&self.model.services, &self.model.actions) {
            self.count_error(ErrorCode::InvalidDomain);
            self.counts.domain_changes_refused += 1;
            return self.model.expect_status(slot, id, true);
        }
        if c.nodes.iter().any(|n| n.full == node.full) {
            self.count_error(ErrorCode::DuplicateNode);
            return self.model.expect_status(slot, id, true);
        }
        if c.nodes.len() >= MAX_NODES_PER_CONN {
            self.count_error(ErrorCode::TooManyRegistrations);
            return self.model.expect_status(slot, id, true);
        }
        if domain != c.domain {
            self.counts.domain_changes += 1;
        }
        self.model.client_mut(slot).domain = domain;
        self.add_node(slot, node, id);
    }

    /// `slot` declares `node` (in its domain): it owes the info status
    /// (with `id`), and when another node of the domain has the same full
    /// name, every owner of one owes a warning (only `slot`'s with `id`).
    fn add_node(&mut self, slot: usize, node: NodeModel, id: Option<&Id>) {
        self.model.node_uids = self.model.node_uids.max(node.uid);
        self.counts.nodes_declared += 1;
        let full = node.full.clone();
        let c = self.model.client_mut(slot);
        let domain = c.domain;
        c.nodes.push(node);
        c.resolves = true;
        self.model.expect_status(slot, id, false);
        let owners: Vec<usize> = (0..MAX_CLIENTS)
            .filter(|&s| {
                self.model.clients[s]
                    .as_ref()
                    .is_some_and(|c| c.domain == domain && c.nodes.iter().any(|n| n.full == full))
            })
            .collect();
        if owners.len() > 1 {
            self.counts.duplicate_node_names += 1;
            for s in owners {
                let id = if s == slot { id } else { None };
                self.model.expect_level(s, id, Lvl::Warning);
            }
        }
    }

    /// `destroy_node`: the node `name` names (by name or full name, the
    /// first declared) goes with every registration it made; services it
    /// provided go too (calls already forwarded stay valid).
    fn apply_destroy(&mut self, slot: usize, name: &str, id: Option<&Id>) {
        let c = self.model.client_mut(slot);
        let Some(k) = c
            .nodes
            .iter()
            .position(|n| n.name == name || n.full == name)
        else {
            self.count_error(ErrorCode::UnknownNode);
            return self.model.expect_status(slot, id, true);
        };
        let node = c.nodes.remove(k);
        let before: Vec<(bool, String)> = c
            .subs
            .keys()
            .map(|t| (true, t.clone()))
            .chain(c.pubs.keys().map(|t| (false, t.clone())))
            .collect();
        c.withdraw_node(node.uid);
        for (sub, t) in before {
            let c = self.model.client(slot);
            if !if sub { &c.subs } else { &c.pubs }.contains_key(&t) {
                self.after_leave(slot, sub, &t);
            }
        }
        self.drop_node_params(slot, &node);
        let c = self.model.client_mut(slot);
        let me = c.conn;
        self.model
            .services
            .retain(|_, s| s.provider != me || s.node != Some(node.uid));
        self.model
            .actions
            .retain(|_, s| s.provider != me || s.node != Some(node.uid));
        self.counts.nodes_destroyed += 1;
        self.model.expect_status(slot, id, false);
    }

    /// advertise_service (`adv`, with type `ty`) or unadvertise_service.
    /// A service beyond the per-connection limit is refused with the id
    /// (re-advertising one the connection provides is free).
    fn apply_service(
        &mut self,
        slot: usize,
        adv: bool,
        name: String,
        node: Option<u64>,
        ty: &'static str,
        id: Option<&Id>,
    ) {
        let me = self.model.client(slot).conn;
        let key = (self.model.client(slot).domain, name);
        let provider = self.model.services.get(&key).map(|s| s.provider);
        if adv {
            // The gateway's own names, with or without their leading `/`
            // (it answers `rosapi/x` and `rosgate/stats` too).
            let reserved = [RESERVED_PREFIX, ROSAPI_PREFIX]
                .iter()
                .any(|p| key.1.starts_with(p) || key.1.starts_with(&p[1..]));
            if reserved {
                return self.model.expect_status(slot, id, true);
            }
            let provides = provider == Some(me);
            let count = self
                .model
                .services
                .values()
                .filter(|s| s.provider == me)
                .count();
            if !provides && count >= self.limits.max_services_per_conn {
                self.counts.registrations_refused += 1;
                self.count_error(ErrorCode::TooManyRegistrations);
                return self.model.expect_status(slot, id, true);
            }
            let new = ServiceModel {
                provider: me,
                node,
                ty,
            };
            if let Some(old) = provider.filter(|&o| o != me) {
                let s = self.model.slot_of(old).expect("providers are live");
                self.model.expect_status(s, None, false);
            }
            let (domain, name) = (key.0, key.1.clone());
            self.model.services.insert(key, new);
            self.model.expect_status(slot, id, false);
            self.release_waiting(domain, false, &name);
        } else if provider == Some(me) {
            self.model.services.remove(&key);
            let name = key.1;
            self.model
                .fail_calls_where(|c| c.provider == me && c.service == name);
            self.model.expect_status(slot, id, false);
        } else {
            self.model.expect_status(slot, id, true);
        }
    }

    /// A call: answered at once (stats), failed at once (too many in
    /// flight, no provider) or forwarded with its deadline.
    fn apply_call(&mut self, slot: usize, call: CallSend) {
        let CallSend {
            name,
            args,
            timeout,
            id,
            node,
            wait,
        } = call;
        // The gateway's own services are answered before any name is
        // resolved, whatever the `node` field says.
        if name == STATS_SERVICE {
            let outcome = Resp::Stats(self.model.gauges());
            return self.expect_response(slot, id, outcome);
        }
        if self.rosapi_param_call(slot, &name, &args, id.clone()) {
            return;
        }
        let Some((_, name)) = self.resolved(slot, &name, node, id.as_ref()) else {
            return;
        };
        let domain = self.model.client(slot).domain;
        let call = ResolvedCall {
            name,
            args_text: args,
            secs: timeout_secs(timeout),
            id,
            wait,
        };
        self.call_resolved(slot, domain, call);
    }

    /// A call of `name` (resolved) in `domain` from `slot`: failed at once
    /// (too many in flight with those waiting, no provider), answered by
    /// the gateway (an action's cancel service nobody provides), parked
    /// (`wait`), or forwarded with its deadline (`secs`, else the call
    /// timeout).
    pub(crate) fn call_resolved(&mut self, slot: usize, domain: u8, call: ResolvedCall) {
        let ResolvedCall {
            name,
            args_text,
            secs,
            id,
            wait,
        } = call;
        let args: Value = serde_json::from_str(&args_text).expect("sim args are JSON");
        let me = self.model.client(slot).conn;
        let in_flight = self.model.calls_in_flight(me) + self.model.waiting_of(me);
        let provider = self
            .model
            .services
            .get(&(domain, name.clone()))
            .map(|s| s.provider)
            .filter(|&p| {
                self.model
                    .slot_of(p)
                    .is_some_and(|s| self.model.client(s).is_open())
            });
        let failure = |name: String| Resp::Failure {
            service: name,
            why: None,
        };
        let outcome = if in_flight >= self.limits.max_calls_per_conn {
            failure(name)
        } else if let Some(provider) = provider {
            let due_tick = self.due_tick_secs(secs);
            let k = self.model.calls.len();
            self.model.calls.push(CallModel {
                caller: me,
                caller_slot: slot,
                id_key: id.as_ref().map(|id| id.key.clone()),
                service: name,
                args,
                provider,
                due_tick,
                alive: true,
                id_raw: id.as_ref().map(|id| id.raw.clone()),
            });
            let ps = self.model.slot_of(provider).expect("providers are live");
            self.model
                .client_mut(ps)
                .exp
                .forwards
                .push_back(Fwd::Call(k));
            self.counts.calls_forwarded += 1;
            Resp::Pending(k)
        } else if name.ends_with(CANCEL_GOAL_SUFFIX) {
            self.cancel_goal_service(slot, &name)
        } else if let Some(r) = self.node_param_call(slot, domain, &name, &args_text, id.clone()) {
            r
        } else if wait {
            let g = GoalSend {
                name,
                action_type: None,
                args_text,
                feedback: false,
                timeout: None,
                wait: true,
                id: id.clone(),
            };
            Resp::Waiting(self.park(slot, domain, false, g, secs))
        } else {
            // A provider of that name in another domain must not be called.
            let elsewhere = self
                .model
                .services
                .keys()
                .any(|(d, n)| *d != domain && *n == name);
            if elsewhere {
                self.counts.isolated_by_domain += 1;
            }
            failure(name)
        };
        self.expect_response(slot, id, outcome);
    }

    /// `slot` is owed `outcome` for its call `id` (or, without an id, among
    /// its id-less calls).
    fn expect_response(&mut self, slot: usize, id: Option<Id>, outcome: Resp) {
        let e = &mut self.model.client_mut(slot).exp;
        match id {
            Some(id) => {
                e.responses.insert(id.key, outcome);
            }
            None => e.anon_responses.push(outcome),
        }
    }

    /// The timer tick at which a call made now with a timeout of `secs`
    /// (else the call timeout) times out: the timer wheel rounds deadlines
    /// up to a tick.
    fn due_tick_secs(&self, secs: Option<f64>) -> u64 {
        let to = match secs {
            Some(secs) => {
                Duration::from_secs_f64(secs.min(self.limits.max_call_timeout.as_secs_f64()))
            }
            None => self.limits.call_timeout,
        };
        tick_ceil(self.offset + to)
    }

    /// A provider's answer: completes the call `id` names if it is in
    /// flight and was forwarded to this very client, else it is stale.
    fn apply_answer(
        &mut self,
        slot: usize,
        id: Option<&Id>,
        values: Option<Value>,
        result: &str,
        status: Option<Value>,
    ) -> Result<(), Violation> {
        let me = self.model.client(slot).conn;
        let rosbridge = self.model.client(slot).rosbridge();
        if let Some(&Fwd::Validation(v)) = id.and_then(|id| self.model.rg_map.get(&id.raw)) {
            if self.validating_at(v, me) {
                self.answer_validation(slot, v, values, result);
                return Ok(());
            }
        }
        let call = match id.and_then(|id| self.model.rg_map.get(&id.raw)) {
            Some(&Fwd::Call(k))
                if self.model.calls[k].alive && self.model.calls[k].provider == me =>
            {
                Some(k)
            }
            _ => None,
        };
        let Some(k) = call else {
            self.counts.stale_responses += 1;
            self.model.expect_status(slot, id, true);
            return Ok(());
        };
        let c = &mut self.model.calls[k];
        c.alive = false;
        let (caller, cs, key, service) =
            (c.caller, c.caller_slot, c.id_key.clone(), c.service.clone());
        if rosbridge {
            self.counts.ws_provided_answers += 1;
        }
        if self.model.clients[cs]
            .as_ref()
            .is_some_and(|c| c.conn == caller)
        {
            let (values, result) = answer_as_read(rosbridge, values, result);
            let r = Resp::Success {
                service,
                values,
                result,
                status,
            };
            self.model
                .set_resp(cs, k, key.as_deref(), r)
                .map_err(|e| self.violation(e))?;
        }
        Ok(())
    }
}
