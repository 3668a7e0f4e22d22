//! Parameters (`docs/protocol.md`, "Parameters"), modelled from the
//! protocol page rather than from the core's `params.rs` and
//! `hub/params.rs`: the store of every domain, per node full name (owned by
//! the connection whose node declared them, with descriptors; held by the
//! gateway for a node nobody owns; global ones under node `""`), the rules
//! a change by anyone but the owner must pass (declared, read-only, type,
//! range), the owner's own operations (`declare_parameter`,
//! `set_parameter`, `undeclare_parameter`, for its default node or the one
//! `"node"` names), a node's parameters going with it (destroyed, owner
//! gone), and every applied change published on `/parameter_events` of
//! its domain as a `ParameterEvent` (a topic frame like any publish, so its
//! exact bytes are predicted).
//!
//! Everyone else's access (rosapi, the node services) and the owner's
//! validation round trip are in `param_access.rs`. The store, its rules and
//! the values and descriptors requests pick from are data, in
//! `model/params.rs`; this file is the behaviour.
//!
//! After every step the hub's store of every domain equals the model's
//! (each parameter's value, type, descriptor, validation flag and holder),
//! the `parameters` gauge counts them and the ledger's registrations hold
//! their bytes (`docs/limits.md`). Parameters held by the gateway outlive
//! every client, so they are all the ledger may hold once everyone left.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};

use rosgate_core::counters::{Counter, ErrorCode, Gauge, Gauges};
use rosgate_core::hub::PARAMETER_EVENTS;
use rosgate_core::params::{Holder, Param};

use super::requests::{assemble, json_string, jstr, push_id, Form, Members};
use super::Sim;
use crate::actions::{ParamReq, SIM_DOMAINS};
use crate::model::params::{
    param_bytes, param_value, parameter_value, valid_name, Change, DeclareM, HolderM, NodeParamsM,
    PVal, ParamM, ParamOp, Refusal, DESCRIPTORS, PARAM_NAMES,
};
use crate::model::requests::Effect;
use crate::model::Id;
use crate::names::NodeModel;
use crate::violation::Violation;

/// A node name no client ever declares.
const GHOST: &str = "ghost";

impl Sim {
    // ----- requests -------------------------------------------------------------------

    /// The line of [`crate::Req::Param`] and its effect, by `op % 16`: 0
    /// `declare_parameter` (`extra % 8` the descriptor, validated unless
    /// `extra & 48` is 0, of a name the gateway holds a value for if any
    /// unless `extra & 64`), 1 `set_parameter`, 2 `undeclare_parameter`
    /// (of one of its node's parameters unless `extra & 128`), each for the
    /// `"node"`
    /// `target` picks; a client without a node sends a `declare_node`
    /// instead (unless `target & 128`), which makes it an owner; 3-15
    /// everyone else's access (see `param_access.rs`).
    pub(crate) fn param_request(&mut self, slot: usize, f: Form, p: ParamReq) -> (Vec<u8>, Effect) {
        let op = p.op % 16;
        if op > 2 {
            return self.access_request(slot, f, ParamReq { op, ..p });
        }
        let ParamReq {
            target,
            name,
            value,
            extra,
            id,
            ..
        } = p;
        let esc = f.style & 4 != 0;
        let c = self.model.client(slot);
        if c.nodes.is_empty() && target & 0x80 == 0 {
            // Mostly in the root namespace, so that two connections'
            // nodes share a full name (and one owns the parameters).
            let t = target & 0x7f;
            let ns = [0, 0, 1, 2, 3, 0, 2, 0][(t / 4) as usize % 8];
            return self.declare_request(slot, f, [t % 4, ns, 0, 0], id);
        }
        let nodes = &c.nodes;
        let node = match target % 8 {
            0..=4 => None,
            5 => Some(nodes.first().map_or(GHOST.into(), |n| n.name.clone())),
            6 => Some(nodes.last().map_or(GHOST.into(), |n| n.full.clone())),
            _ => Some(GHOST.to_string()),
        };
        let table = match &node {
            Some(n) => c.find_node(n),
            None => nodes.first(),
        }
        .and_then(|n| self.model.params.node(c.domain, &n.full));
        let held = table.is_some_and(|t| t.holder == HolderM::Gateway);
        let mine = table
            .map(|t| t.params.keys().cloned().collect::<Vec<String>>())
            .unwrap_or_default();
        let pname = match (op, mine.is_empty()) {
            (1 | 2, false) if extra & 128 == 0 && !held => mine[name as usize % mine.len()].clone(),
            (0, false) if extra & 64 == 0 && held => mine[name as usize % mine.len()].clone(),
            _ => PARAM_NAMES[name as usize % PARAM_NAMES.len()].to_string(),
        };
        let id = self.fresh_id(slot, id);
        // The last value text is not JSON: a line needs JSON, so here it is
        // another value no parameter can hold.
        let (text, pval) = param_value(value % 20);
        let opname = ["declare_parameter", "set_parameter", "undeclare_parameter"][op as usize];
        let mut m: Members<'_> = vec![("op", json_string(opname)), ("name", jstr(&pname, esc))];
        if op < 2 {
            m.push(("value", text.to_string()));
        }
        let (desc_text, desc) = DESCRIPTORS[extra as usize % DESCRIPTORS.len()];
        let validate = extra & 48 != 0;
        if op == 0 {
            if let Some(d) = desc_text {
                m.push(("descriptor", d.to_string()));
            }
            if validate {
                m.push(("validate", "true".into()));
            } else if extra & 64 != 0 {
                m.push(("validate", "false".into()));
            }
        }
        if let Some(n) = &node {
            m.push(("node", jstr(n, esc)));
        }
        push_id(&mut m, id.as_ref());
        let effect = match op {
            0 => ParamOp::Declare(DeclareM {
                node,
                name: pname,
                value: pval,
                desc,
                validate,
                id,
            }),
            1 => ParamOp::Set {
                node,
                name: pname,
                value: pval,
                id,
            },
            _ => ParamOp::Undeclare {
                node,
                name: pname,
                id,
            },
        };
        (assemble(&m, f.style, f.spacing), Effect::Param(effect))
    }

    // ----- the owner's operations ---------------------------------------------------

    /// Applies an owner's operation the hub is about to handle.
    pub(crate) fn apply_param(&mut self, slot: usize, op: ParamOp) {
        match op {
            ParamOp::Declare(d) => {
                if let Some(n) = self.param_owner(slot, d.node.as_deref(), d.id.as_ref()) {
                    self.declare_param(slot, n, d);
                }
            }
            ParamOp::Set {
                node,
                name,
                value,
                id,
            } => {
                if let Some(n) = self.param_owner(slot, node.as_deref(), id.as_ref()) {
                    self.set_own_param(slot, n, &name, value, id.as_ref());
                }
            }
            ParamOp::Undeclare { node, name, id } => {
                if let Some(n) = self.param_owner(slot, node.as_deref(), id.as_ref()) {
                    self.undeclare_param(slot, n, &name, id.as_ref());
                }
            }
        }
    }

    /// The node an owner's operation is for: the one `node` names, else
    /// the client's default node; without one, `unknown_node` (parameters
    /// belong to a node).
    fn param_owner(
        &mut self,
        slot: usize,
        node: Option<&str>,
        id: Option<&Id>,
    ) -> Option<NodeModel> {
        let c = self.model.client(slot);
        let found = match node {
            Some(n) => c.find_node(n),
            None => c.nodes.first(),
        }
        .cloned();
        if found.is_none() {
            self.count_error(ErrorCode::UnknownNode);
            self.model.expect_status(slot, id, true);
        }
        found
    }

    /// An owner's operation refused: `bad_parameter`.
    fn bad_parameter(&mut self, slot: usize, id: Option<&Id>) {
        self.count_error(ErrorCode::BadParameter);
        self.model.expect_status(slot, id, true);
    }

    /// `declare_parameter` for `node`: refused for a bad name, value or
    /// descriptor, when another connection's node of that full name owns
    /// the table, or when the value it ends up with (a value the gateway
    /// held for the node wins over the default) has another type than the
    /// default (unless dynamically typed) or is out of range. Declared: a
    /// table the gateway held becomes the owner's (its other values go,
    /// each an event), and the parameter is new or replaced.
    fn declare_param(&mut self, slot: usize, node: NodeModel, d: DeclareM) {
        let DeclareM {
            name,
            value,
            desc,
            validate,
            id,
            ..
        } = d;
        let (name, id) = (name.as_str(), id.as_ref());
        let (Some(default), Some(desc), true) = (value, desc, valid_name(name)) else {
            return self.bad_parameter(slot, id);
        };
        let c = self.model.client(slot);
        let (me, domain) = (c.conn, c.domain);
        let full = node.full.clone();
        let table = self.model.params.node(domain, &full).cloned();
        let held = match &table {
            Some(t) if t.holder == HolderM::Gateway => t.params.get(name).map(|p| p.value.clone()),
            _ => None,
        };
        if let Some(HolderM::Owner(other, _)) = table.as_ref().map(|t| t.holder) {
            if other != me {
                self.counts.param_owner_refusals += 1;
                return self.bad_parameter(slot, id);
            }
        }
        if held.is_some() {
            self.counts.held_overrides += 1;
        }
        let value = held.unwrap_or(default.clone());
        if value.type_code() != default.type_code() && !desc.dynamic {
            self.counts.param_type_refusals += 1;
            return self.bad_parameter(slot, id);
        }
        if !desc.in_range(&value) {
            self.counts.param_range_refusals += 1;
            return self.bad_parameter(slot, id);
        }
        // The connection's nodes' parameters together, after this one
        // (replacing its own of that name), within the limit.
        let before = match &table {
            Some(t) if t.holder != HolderM::Gateway => {
                t.params.get(name).map_or(0, |p| p.bytes(name))
            }
            _ => 0,
        };
        let after = param_bytes(name, &value, &desc);
        let mine = self.model.params.owned_bytes(domain, me);
        if after > before && mine - before + after > self.limits.max_param_bytes_per_conn {
            self.counts.param_conn_byte_refusals += 1;
            return self.bad_parameter(slot, id);
        }
        let key = (domain, full.clone());
        let mut dropped = Vec::new();
        if table.as_ref().is_some_and(|t| t.holder == HolderM::Gateway) {
            if let Some(t) = self.model.params.stores.remove(&key) {
                dropped = t.params.into_keys().collect();
            }
        }
        let entry = self.model.params.stores.entry(key).or_insert(NodeParamsM {
            holder: HolderM::Owner(me, node.uid),
            params: BTreeMap::new(),
        });
        entry.holder = HolderM::Owner(me, node.uid);
        let old = entry.params.insert(
            name.to_string(),
            ParamM {
                value,
                desc,
                validate,
            },
        );
        for d in dropped.iter().filter(|d| d.as_str() != name) {
            self.param_event(domain, &full, d, Change::Deleted);
        }
        self.model.count(Counter::ParamsDeclared);
        self.counts.params_declared += 1;
        let change = if old.is_some() {
            Change::Changed
        } else {
            Change::New
        };
        self.param_event(domain, &full, name, change);
        self.model.expect_status(slot, id, false);
    }

    /// `set_parameter` by the owner: the rules apply (not the validation:
    /// the owner is the validator); a parameter its node did not declare
    /// (or whose table another connection owns) is refused.
    fn set_own_param(
        &mut self,
        slot: usize,
        node: NodeModel,
        name: &str,
        value: Option<PVal>,
        id: Option<&Id>,
    ) {
        let Some(value) = value else {
            return self.bad_parameter(slot, id);
        };
        let c = self.model.client(slot);
        let (me, domain) = (c.conn, c.domain);
        let full = node.full.clone();
        let checked = if self.model.params.owner(domain, &full) == Some((me, node.uid)) {
            self.model
                .params
                .check(domain, &full, name, &value, &self.limits)
        } else {
            Err(Refusal::Undeclared)
        };
        match checked {
            Ok(()) => {
                let change = self.model.params.set(domain, &full, name, value);
                self.model.count(Counter::ParamSetsAccepted);
                self.counts.params_set_by_owner += 1;
                self.param_event(domain, &full, name, change);
                self.model.expect_status(slot, id, false);
            }
            Err(r) => {
                self.model.count(Counter::ParamSetsRejected);
                self.count_refusal(r);
                self.bad_parameter(slot, id);
            }
        }
    }

    /// `undeclare_parameter` by the owner of a parameter it declared.
    fn undeclare_param(&mut self, slot: usize, node: NodeModel, name: &str, id: Option<&Id>) {
        let c = self.model.client(slot);
        let (me, domain) = (c.conn, c.domain);
        let full = node.full.clone();
        let owns = self.model.params.owner(domain, &full) == Some((me, node.uid));
        if !owns || !self.model.params.remove(domain, &full, name) {
            return self.bad_parameter(slot, id);
        }
        self.counts.params_undeclared += 1;
        self.param_event(domain, &full, name, Change::Deleted);
        self.model.expect_status(slot, id, false);
    }

    /// Counts a refused change by its reason.
    pub(crate) fn count_refusal(&mut self, r: Refusal) {
        let c = &mut self.counts;
        match r {
            Refusal::Undeclared => c.param_undeclared_refusals += 1,
            Refusal::ReadOnly => c.param_read_only_refusals += 1,
            Refusal::Type => c.param_type_refusals += 1,
            Refusal::Range => c.param_range_refusals += 1,
            Refusal::ConnBytes => c.param_conn_byte_refusals += 1,
            Refusal::HeldBytes => c.param_held_byte_refusals += 1,
            _ => {}
        }
    }

    /// `slot`'s node `node` is going (destroyed, or its connection freed):
    /// the parameters it owns go with it, each an event.
    pub(crate) fn drop_node_params(&mut self, slot: usize, node: &NodeModel) {
        let c = self.model.client(slot);
        let (me, domain) = (c.conn, c.domain);
        let key = (domain, node.full.clone());
        if self.model.params.owner(domain, &node.full) != Some((me, node.uid)) {
            return;
        }
        let Some(t) = self.model.params.stores.remove(&key) else {
            return;
        };
        for name in t.params.keys() {
            self.counts.params_dropped += 1;
            self.param_event(domain, &node.full, name, Change::Deleted);
        }
    }

    // ----- /parameter_events ----------------------------------------------------------

    /// Publishes an applied change on `/parameter_events` of `domain` (to
    /// whoever subscribes there): a `ParameterEvent` stamped with the
    /// gateway's clock, naming the node (`""` for global parameters) and
    /// the parameter with its value now (not set, when deleted).
    pub(crate) fn param_event(&mut self, domain: u8, node: &str, name: &str, change: Change) {
        self.model.count(Counter::ParamEvents);
        self.counts.param_events += 1;
        let value = match change {
            Change::Deleted => None,
            _ => self
                .model
                .params
                .get(domain, node, name)
                .map(|p| p.value.clone()),
        };
        let entry = json!([{"name": name, "value": parameter_value(value.as_ref())}]);
        let none = json!([]);
        let (new, changed, deleted) = match change {
            Change::New => (&entry, &none, &none),
            Change::Changed => (&none, &entry, &none),
            Change::Deleted => (&none, &none, &entry),
        };
        let t = self.offset;
        let msg = json!({
            "stamp": {"sec": t.as_secs(), "nanosec": t.subsec_nanos()},
            "node": node,
            "new_parameters": new,
            "changed_parameters": changed,
            "deleted_parameters": deleted,
        })
        .to_string();
        self.publish_to(domain, PARAMETER_EVENTS, &msg, None);
    }

    // ----- checks ---------------------------------------------------------------------

    /// The hub's parameter store of every domain the simulation uses equals
    /// the model's: every parameter with its value, type, descriptor and
    /// validation flag, and who holds its node's table (the owning
    /// connection and node, or the gateway); the `parameters` gauge counts
    /// them all. (Compared field by field; the whole tables are written out
    /// only when they differ.)
    pub(crate) fn check_params(&self, g: &Gauges) -> Result<(), Violation> {
        let mut count = 0;
        let mut same = true;
        for d in SIM_DOMAINS {
            let store = self.hub.inspect().params_in(d);
            count += store.len();
            for (node, name, p) in store.all() {
                let Some(t) = self.model.params.node(d, node) else {
                    same = false;
                    break;
                };
                let holder = store.node(node).map(|n| n.holder);
                let m = t.params.get(name);
                same &= m.is_some_and(|m| same_param(p, m) && self.same_holder(holder, t.holder));
            }
        }
        if !same || count != self.model.params.count() {
            return Err(self.params_differ());
        }
        let gauge = g.get(Gauge::Parameters);
        if gauge != count as u64 {
            return Err(self.violation(format!(
                "the parameters gauge is {gauge}, the stores hold {count}"
            )));
        }
        Ok(())
    }

    /// Whether the hub's holder of a table is the model's.
    fn same_holder(&self, hub: Option<Holder>, model: HolderM) -> bool {
        match (hub, model) {
            (Some(Holder::Gateway), HolderM::Gateway) => true,
            (Some(Holder::Owner(c, tag)), HolderM::Owner(mc, uid)) => {
                let hub_full = self
                    .hub
                    .inspect()
                    .nodes()
                    .get(tag)
                    .filter(|n| n.owner() == c)
                    .map(|n| n.full_name());
                let model_full = self
                    .model
                    .slot_of(mc)
                    .and_then(|s| self.model.client(s).nodes.iter().find(|n| n.uid == uid))
                    .map(|n| n.full.as_str());
                c == mc && hub_full.is_some() && hub_full == model_full
            }
            _ => false,
        }
    }

    /// The violation of stores that differ, with the first rows that do.
    fn params_differ(&self) -> Violation {
        type Row = (String, Value, bool, Value);
        let mut hub: BTreeMap<(u8, String, String), Row> = BTreeMap::new();
        for d in SIM_DOMAINS {
            let store = self.hub.inspect().params_in(d);
            for (node, name, p) in store.all() {
                let holder = match store.node(node).map(|n| n.holder) {
                    Some(Holder::Owner(c, tag)) => {
                        let full = self
                            .hub
                            .inspect()
                            .nodes()
                            .get(tag)
                            .filter(|n| n.owner() == c)
                            .map_or("(no such node)".to_string(), |n| n.full_name().to_string());
                        format!("owner {:?} {full}", (c.key, c.gen))
                    }
                    _ => "gateway".to_string(),
                };
                let d_json = p.descriptor.to_json(name, p.value.type_code());
                hub.insert(
                    (d, node.to_string(), name.to_string()),
                    (holder, p.value.to_json(), p.validate, d_json),
                );
            }
        }
        let mut model: BTreeMap<(u8, String, String), Row> = BTreeMap::new();
        for ((d, node), t) in &self.model.params.stores {
            let holder = match t.holder {
                HolderM::Owner(c, uid) => {
                    let full = self
                        .model
                        .slot_of(c)
                        .map_or("(owner gone)".to_string(), |s| {
                            self.model.client(s).node_label(Some(uid))
                        });
                    format!("owner {:?} {full}", (c.key, c.gen))
                }
                HolderM::Gateway => "gateway".to_string(),
            };
            for (name, p) in &t.params {
                let d_json = p.desc.to_json(name, p.value.type_code());
                model.insert(
                    (*d, node.clone(), name.clone()),
                    (holder.clone(), p.value.to_json(), p.validate, d_json),
                );
            }
        }
        let keys: BTreeSet<&(u8, String, String)> = hub.keys().chain(model.keys()).collect();
        let differ: Vec<_> = keys
            .into_iter()
            .filter(|k| hub.get(*k) != model.get(*k))
            .map(|k| (k.clone(), hub.get(k).cloned(), model.get(k).cloned()))
            .take(4)
            .collect();
        self.violation(format!(
            "parameters (domain, node, name) -> (holder, value, validate, descriptor) differ, (key, hub, model): {differ:?}"
        ))
    }
}

/// Whether the hub's parameter is the model's: value (and so type),
/// validation flag, descriptor.
fn same_param(p: &Param, m: &ParamM) -> bool {
    use rosgate_core::params::ParamValue as H;
    let value = match (&p.value, &m.value) {
        (H::Bool(a), PVal::Bool(b)) => a == b,
        (H::Integer(a), PVal::Int(b)) => a == b,
        (H::Double(a), PVal::Double(b)) => a == b,
        (H::String(a), PVal::Str(b)) => a == b,
        (H::Bytes(a), PVal::Bytes(b)) => a == b,
        (H::BoolArray(a), PVal::BoolArr(b)) => a == b,
        (H::IntegerArray(a), PVal::IntArr(b)) => a == b,
        (H::DoubleArray(a), PVal::DoubleArr(b)) => a == b,
        (H::StringArray(a), PVal::StrArr(b)) => a == b,
        _ => false,
    };
    let (d, md) = (&p.descriptor, &m.desc);
    let ranges = d.integer_range.as_ref().map(|r| (r.from, r.to, r.step)) == md.int_range
        && d.float_range.as_ref().map(|r| (r.from, r.to, r.step)) == md.float_range;
    value
        && p.validate == m.validate
        && ranges
        && d.description == md.description
        && d.additional_constraints == md.constraints
        && d.read_only == md.read_only
        && d.dynamic_typing == md.dynamic
}
