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
//! validation round trip are in `param_access.rs`.
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
use rosgate_core::limits::Limits;
use rosgate_core::params::{Holder, Param};
use rosgate_core::ConnRef;

use crate::actions::SIM_DOMAINS;
use crate::checks::Violation;
use crate::driver::Sim;
use crate::model::Id;
use crate::names::NodeModel;
use crate::param_access::ValidationM;
use crate::requests::{assemble, json_string, jstr, push_id, Effect, Form, Members};

/// Parameter names requests pick from: valid ones first (two share a
/// dotted prefix), then an empty one, one with a space, one with a `:`.
pub(crate) const PARAM_NAMES: [&str; 8] = [
    "max_vel", "mode", "gain.kp", "ro", "gain.ki", "", "a b", "x:y",
];

/// How many of [`PARAM_NAMES`] are valid.
pub(crate) const VALID_PARAM_NAMES: u64 = 5;

/// How many of the value texts ([`param_value`]) are valid values.
pub(crate) const VALID_VALUES: u64 = 17;

/// Value texts requests pick from (`k` modulo 21): valid values of every
/// type (some inside and some outside the descriptors' ranges), then
/// three a parameter cannot hold, then one that is not JSON at all (for
/// rosapi's `set_param`, which takes JSON text; elsewhere the last
/// invalid one).
pub(crate) fn param_value(k: u8) -> (&'static str, Option<PVal>) {
    use PVal::*;
    match k % 21 {
        0 => ("0.5", Some(Double(0.5))),
        1 => ("1.9", Some(Double(1.9))),
        2 => ("3.0", Some(Double(3.0))),
        3 => ("5", Some(Int(5))),
        4 => ("4", Some(Int(4))),
        5 => ("7", Some(Int(7))),
        6 => ("12", Some(Int(12))),
        7 => ("true", Some(Bool(true))),
        8 => ("\"fast\"", Some(Str("fast".into()))),
        9 => ("1e3", Some(Double(1000.0))),
        10 => ("[1,2]", Some(IntArr(vec![1, 2]))),
        11 => ("[1,2.5]", Some(DoubleArr(vec![1.0, 2.5]))),
        12 => ("[true,false]", Some(BoolArr(vec![true, false]))),
        13 => ("[\"x\",\"y\"]", Some(StrArr(vec!["x".into(), "y".into()]))),
        14 => (
            "{\"type\":5,\"byte_array_value\":[1,255]}",
            Some(Bytes(vec![1, 255])),
        ),
        15 => ("{\"type\":2,\"integer_value\":6}", Some(Int(6))),
        16 => ("-2", Some(Int(-2))),
        17 => ("{\"a\":1}", None),
        18 => ("[1,\"a\"]", None),
        19 => ("{\"type\":3,\"double_value\":\"x\"}", None),
        _ => ("not json", None),
    }
}

/// A descriptor as the model keeps it (`rcl_interfaces/msg/ParameterDescriptor`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(crate) struct DescM {
    pub description: &'static str,
    pub constraints: &'static str,
    pub read_only: bool,
    pub dynamic: bool,
    /// from, to, step (0: any).
    pub int_range: Option<(i64, i64, u64)>,
    pub float_range: Option<(f64, f64, f64)>,
}

const D0: DescM = DescM {
    description: "",
    constraints: "",
    read_only: false,
    dynamic: false,
    int_range: None,
    float_range: None,
};

/// `descriptor` texts of `declare_parameter` (`None`: left out) and what
/// they describe (`None`: refused): ranges as an object or a one-element
/// list, read-only, dynamic typing, then two that are no descriptor.
pub(crate) const DESCRIPTORS: [(Option<&str>, Option<DescM>); 8] = [
    (None, Some(D0)),
    (
        Some(
            r#"{"description":"m/s","floating_point_range":{"from_value":0.0,"to_value":2.0,"step":0.0}}"#,
        ),
        Some(DescM {
            description: "m/s",
            float_range: Some((0.0, 2.0, 0.0)),
            ..D0
        }),
    ),
    (
        Some(r#"{"integer_range":[{"from_value":0,"to_value":10,"step":2}]}"#),
        Some(DescM {
            int_range: Some((0, 10, 2)),
            ..D0
        }),
    ),
    (
        Some(r#"{"read_only":true}"#),
        Some(DescM {
            read_only: true,
            ..D0
        }),
    ),
    (
        Some(r#"{"dynamic_typing":true,"description":"any"}"#),
        Some(DescM {
            dynamic: true,
            description: "any",
            ..D0
        }),
    ),
    (
        Some(
            r#"{"additional_constraints":"small","integer_range":{"from_value":-4,"to_value":4}}"#,
        ),
        Some(DescM {
            constraints: "small",
            int_range: Some((-4, 4, 0)),
            ..D0
        }),
    ),
    (Some("5"), None),
    (
        Some(r#"{"integer_range":{"from_value":"a","to_value":1}}"#),
        None,
    ),
];

/// A node name no client ever declares.
const GHOST: &str = "ghost";

/// Bytes counted per parameter beyond its name, value and descriptor
/// (`docs/limits.md`).
const PARAM_BYTES: usize = 128;

/// Bytes counted per descriptor beyond its two texts.
const DESCRIPTOR_BYTES: usize = 64;

/// Longest parameter name, in characters.
const MAX_NAME_CHARS: usize = 256;

/// A parameter value, typed as ROS 2 types it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum PVal {
    Bool(bool),
    Int(i64),
    Double(f64),
    Str(String),
    Bytes(Vec<u8>),
    BoolArr(Vec<bool>),
    IntArr(Vec<i64>),
    DoubleArr(Vec<f64>),
    StrArr(Vec<String>),
}

/// `ParameterValue`'s value fields, by type code.
const FIELDS: [&str; 10] = [
    "",
    "bool_value",
    "integer_value",
    "double_value",
    "string_value",
    "byte_array_value",
    "bool_array_value",
    "integer_array_value",
    "double_array_value",
    "string_array_value",
];

/// Type names, by type code (as `ros2 param` spells them).
const TYPE_NAMES: [&str; 10] = [
    "not set",
    "bool",
    "integer",
    "double",
    "string",
    "byte_array",
    "bool_array",
    "integer_array",
    "double_array",
    "string_array",
];

fn double(d: f64) -> Value {
    serde_json::Number::from_f64(d).map_or(Value::Null, Value::Number)
}

impl PVal {
    /// Its `rcl_interfaces/msg/ParameterType`.
    pub fn type_code(&self) -> u8 {
        match self {
            PVal::Bool(_) => 1,
            PVal::Int(_) => 2,
            PVal::Double(_) => 3,
            PVal::Str(_) => 4,
            PVal::Bytes(_) => 5,
            PVal::BoolArr(_) => 6,
            PVal::IntArr(_) => 7,
            PVal::DoubleArr(_) => 8,
            PVal::StrArr(_) => 9,
        }
    }

    pub fn type_name(&self) -> &'static str {
        TYPE_NAMES[self.type_code() as usize]
    }

    /// As plain JSON (a byte array as a list of numbers).
    pub fn to_json(&self) -> Value {
        match self {
            PVal::Bool(b) => Value::Bool(*b),
            PVal::Int(i) => Value::from(*i),
            PVal::Double(d) => double(*d),
            PVal::Str(s) => Value::String(s.clone()),
            PVal::Bytes(b) => b.iter().map(|&x| Value::from(x)).collect(),
            PVal::BoolArr(a) => a.iter().map(|&x| Value::Bool(x)).collect(),
            PVal::IntArr(a) => a.iter().map(|&x| Value::from(x)).collect(),
            PVal::DoubleArr(a) => a.iter().map(|&x| double(x)).collect(),
            PVal::StrArr(a) => a.iter().map(|x| Value::String(x.clone())).collect(),
        }
    }

    /// From plain JSON as the protocol page types it (`true` bool, `5`
    /// integer, `5.0` and `1e3` double, a string, homogeneous lists of
    /// those, `[1, 2.5]` a double list), or from a `ParameterValue`
    /// object; `None` when no parameter can hold it.
    pub fn from_json(v: &Value) -> Option<PVal> {
        Some(match v {
            Value::Bool(b) => PVal::Bool(*b),
            Value::Number(n) => match n.as_i64() {
                Some(i) => PVal::Int(i),
                None => PVal::Double(n.as_f64()?),
            },
            Value::String(s) => PVal::Str(s.clone()),
            Value::Array(a) if a.is_empty() => return None,
            Value::Array(a) if a.iter().all(Value::is_boolean) => {
                PVal::BoolArr(a.iter().filter_map(Value::as_bool).collect())
            }
            Value::Array(a) if a.iter().all(Value::is_string) => PVal::StrArr(
                a.iter()
                    .filter_map(|x| x.as_str().map(str::to_string))
                    .collect(),
            ),
            Value::Array(a) if a.iter().all(Value::is_i64) => {
                PVal::IntArr(a.iter().filter_map(Value::as_i64).collect())
            }
            Value::Array(a) if a.iter().all(Value::is_number) => {
                PVal::DoubleArr(a.iter().filter_map(Value::as_f64).collect())
            }
            Value::Object(o) => {
                let code = o.get("type")?.as_u64()?;
                let field = o.get(*FIELDS.get(code as usize)?)?;
                let list =
                    |f: &dyn Fn(&Value) -> bool| field.as_array().filter(|a| a.iter().all(f));
                match code {
                    1 => PVal::Bool(field.as_bool()?),
                    2 => PVal::Int(field.as_i64()?),
                    3 => PVal::Double(field.as_f64()?),
                    4 => PVal::Str(field.as_str()?.to_string()),
                    5 => PVal::Bytes(
                        field
                            .as_array()?
                            .iter()
                            .map(|x| x.as_u64().and_then(|b| u8::try_from(b).ok()))
                            .collect::<Option<_>>()?,
                    ),
                    6 => PVal::BoolArr(
                        list(&Value::is_boolean)?
                            .iter()
                            .filter_map(Value::as_bool)
                            .collect(),
                    ),
                    7 => PVal::IntArr(
                        list(&Value::is_i64)?
                            .iter()
                            .filter_map(Value::as_i64)
                            .collect(),
                    ),
                    8 => PVal::DoubleArr(
                        list(&Value::is_number)?
                            .iter()
                            .filter_map(Value::as_f64)
                            .collect(),
                    ),
                    9 => PVal::StrArr(
                        list(&Value::is_string)?
                            .iter()
                            .filter_map(|x| x.as_str().map(str::to_string))
                            .collect(),
                    ),
                    _ => return None,
                }
            }
            _ => return None,
        })
    }

    /// Bytes its value counts for in the ledger (`docs/limits.md`): a
    /// string's or byte array's length, a byte per bool, 8 per number,
    /// each string of a list plus 24, 8 for a scalar.
    pub fn bytes(&self) -> usize {
        match self {
            PVal::Str(s) => s.len(),
            PVal::Bytes(b) => b.len(),
            PVal::BoolArr(a) => a.len(),
            PVal::IntArr(a) => 8 * a.len(),
            PVal::DoubleArr(a) => 8 * a.len(),
            PVal::StrArr(a) => a.iter().map(|s| s.len() + 24).sum(),
            PVal::Bool(_) | PVal::Int(_) | PVal::Double(_) => 8,
        }
    }
}

/// `v` (`None`: not set) as an `rcl_interfaces/msg/ParameterValue`, all ten
/// fields, the one of its type holding it.
pub(crate) fn parameter_value(v: Option<&PVal>) -> Value {
    let mut pv = json!({
        "type": v.map_or(0, PVal::type_code),
        "bool_value": false,
        "integer_value": 0,
        "double_value": 0.0,
        "string_value": "",
        "byte_array_value": [],
        "bool_array_value": [],
        "integer_array_value": [],
        "double_array_value": [],
        "string_array_value": [],
    });
    if let Some(v) = v {
        pv[FIELDS[v.type_code() as usize]] = v.to_json();
    }
    pv
}

/// `v` as the smallest `ParameterValue` that says it: its type and its
/// field.
pub(crate) fn short_parameter_value(v: &PVal) -> Value {
    let mut o = serde_json::Map::new();
    o.insert("type".into(), Value::from(v.type_code()));
    o.insert(FIELDS[v.type_code() as usize].into(), v.to_json());
    Value::Object(o)
}

impl DescM {
    fn bytes(&self) -> usize {
        self.description.len() + self.constraints.len() + DESCRIPTOR_BYTES
    }

    /// Whether `v` is inside its ranges: an integer range exactly (with
    /// its step, the bounds always in), a floating-point one with rclcpp's
    /// tolerance.
    pub fn in_range(&self, v: &PVal) -> bool {
        match (v, self.int_range, self.float_range) {
            (PVal::Int(x), Some((from, to, step)), _) => {
                *x >= from
                    && *x <= to
                    && (step == 0 || *x == to || (x.wrapping_sub(from) as u64) % step == 0)
            }
            (PVal::Double(x), _, Some((from, to, _))) => {
                let tol = |b: f64| 1e-6 * b.abs().max(1.0);
                *x >= from - tol(from) && *x <= to + tol(to)
            }
            _ => true,
        }
    }

    /// As `describe_parameters` answers it for parameter `name` of type
    /// `ty`.
    pub fn to_json(self, name: &str, ty: u8) -> Value {
        let ir: Vec<Value> = self
            .int_range
            .iter()
            .map(|&(f, t, s)| json!({"from_value": f, "to_value": t, "step": s}))
            .collect();
        let fr: Vec<Value> = self
            .float_range
            .iter()
            .map(|&(f, t, s)| json!({"from_value": double(f), "to_value": double(t), "step": double(s)}))
            .collect();
        json!({
            "name": name,
            "type": ty,
            "description": self.description,
            "additional_constraints": self.constraints,
            "read_only": self.read_only,
            "dynamic_typing": self.dynamic,
            "floating_point_range": fr,
            "integer_range": ir,
        })
    }
}

/// One parameter.
#[derive(Debug, Clone)]
pub(crate) struct ParamM {
    pub value: PVal,
    pub desc: DescM,
    /// Changes by others go to the owner first.
    pub validate: bool,
}

impl ParamM {
    fn bytes(&self, name: &str) -> usize {
        self.bytes_with(name, &self.value)
    }

    /// Its bytes if its value were `value`.
    fn bytes_with(&self, name: &str, value: &PVal) -> usize {
        PARAM_BYTES + name.len() + value.bytes() + self.desc.bytes()
    }
}

/// The bytes of parameter `name` with `value` and descriptor `desc`.
fn param_bytes(name: &str, value: &PVal, desc: &DescM) -> usize {
    PARAM_BYTES + name.len() + value.bytes() + desc.bytes()
}

/// Who holds a node's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HolderM {
    /// The connection and the node (model uid) that declared them.
    Owner(ConnRef, u64),
    Gateway,
}

/// The parameters of one node (or the global ones).
#[derive(Debug, Clone)]
pub(crate) struct NodeParamsM {
    pub holder: HolderM,
    pub params: BTreeMap<String, ParamM>,
}

/// Why a change by anyone but the owner is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The node is owned (or declared) and did not declare it.
    Undeclared,
    ReadOnly,
    Type,
    Range,
    /// Not a parameter name.
    BadName,
    /// Its owner cannot validate it now (gone, or the requester has too
    /// many calls in flight).
    Cannot,
    /// Another change of the same atomic request was refused.
    Atomic,
    /// The connection owning the node would hold more parameter bytes
    /// than `--max-param-bytes-per-conn`.
    ConnBytes,
    /// The gateway would hold more parameter bytes for nobody (all
    /// domains) than `--max-held-param-bytes`.
    HeldBytes,
    /// The owner said no, or did not answer in time.
    Rejected,
}

/// What an applied change did, for `/parameter_events`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change {
    New,
    Changed,
    Deleted,
}

/// The parameters of every domain, by (domain, node full name; `""`: the
/// global ones), and every validation sent to an owner.
#[derive(Debug, Default)]
pub(crate) struct ParamsModel {
    pub stores: BTreeMap<(u8, String), NodeParamsM>,
    pub validations: Vec<ValidationM>,
}

/// Whether `name` can name a parameter: 1 to 256 characters, no space,
/// control character or `:` (which separates a node from its parameter in
/// rosapi's names).
pub(crate) fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.chars().count() <= MAX_NAME_CHARS
        && !name
            .chars()
            .any(|c| c.is_control() || c.is_whitespace() || c == ':')
}

impl ParamsModel {
    /// Bytes every parameter counts for.
    pub fn bytes(&self) -> usize {
        self.stores
            .values()
            .flat_map(|n| n.params.iter().map(|(k, p)| p.bytes(k)))
            .sum()
    }

    /// Parameters held, all domains.
    pub fn count(&self) -> usize {
        self.stores.values().map(|n| n.params.len()).sum()
    }

    /// Bytes of the parameters the nodes of `c` (in `domain`) own: the
    /// budget counts them among what `c` holds (`docs/limits.md`).
    pub fn owned_bytes(&self, domain: u8, c: ConnRef) -> usize {
        self.stores
            .iter()
            .filter(|((d, _), n)| {
                *d == domain && matches!(n.holder, HolderM::Owner(o, _) if o == c)
            })
            .flat_map(|(_, n)| n.params.iter().map(|(k, p)| p.bytes(k)))
            .sum()
    }

    /// Parameters the gateway holds (nobody's) and their bytes.
    pub fn held(&self) -> (usize, usize) {
        let held = self
            .stores
            .values()
            .filter(|n| n.holder == HolderM::Gateway);
        let count = held.clone().map(|n| n.params.len()).sum();
        let bytes = held
            .flat_map(|n| n.params.iter().map(|(k, p)| p.bytes(k)))
            .sum();
        (count, bytes)
    }

    /// Validations in flight that `pred` selects.
    pub fn validations_where(&self, pred: impl Fn(&ValidationM) -> bool) -> usize {
        self.validations
            .iter()
            .filter(|v| v.alive && pred(v))
            .count()
    }

    /// Bytes the validations in flight count for (`Some`: those `caller`
    /// asked for).
    pub fn validation_bytes(&self, caller: Option<ConnRef>) -> usize {
        self.validations
            .iter()
            .filter(|v| v.alive && caller.is_none_or(|c| v.caller == c))
            .map(ValidationM::bytes)
            .sum()
    }

    pub fn node(&self, domain: u8, node: &str) -> Option<&NodeParamsM> {
        self.stores.get(&(domain, node.to_string()))
    }

    pub fn get(&self, domain: u8, node: &str, name: &str) -> Option<&ParamM> {
        self.node(domain, node)?.params.get(name)
    }

    /// The owner of `node`'s parameters, if a connection owns them.
    pub fn owner(&self, domain: u8, node: &str) -> Option<(ConnRef, u64)> {
        match self.node(domain, node)?.holder {
            HolderM::Owner(c, u) => Some((c, u)),
            HolderM::Gateway => None,
        }
    }

    /// The rules for a change of `name` of `node` to `value` by anyone but
    /// its owner: a node nobody owns takes anything; an owned one refuses
    /// what it did not declare, a read-only parameter, a change of type its
    /// descriptor does not allow, a value outside its range; then the room
    /// ([`ParamsModel::room_for`]).
    pub fn check(
        &self,
        domain: u8,
        node: &str,
        name: &str,
        value: &PVal,
        limits: &Limits,
    ) -> Result<(), Refusal> {
        if let Some(n) = self.node(domain, node) {
            match (n.holder, n.params.get(name)) {
                (HolderM::Owner(..), None) => return Err(Refusal::Undeclared),
                (HolderM::Owner(..), Some(p)) => {
                    if p.desc.read_only {
                        return Err(Refusal::ReadOnly);
                    }
                    if p.value.type_code() != value.type_code() && !p.desc.dynamic {
                        return Err(Refusal::Type);
                    }
                    if !p.desc.in_range(value) {
                        return Err(Refusal::Range);
                    }
                }
                (HolderM::Gateway, _) => {}
            }
        }
        self.room_for(domain, node, &[(name, value)], limits)
    }

    /// The byte limits (`docs/limits.md`) for `changes` of `node` applied
    /// together (a name may repeat, the last value wins): what its holder
    /// would hold after them, if more than before, must stay within
    /// `--max-param-bytes-per-conn` (the owning connection's nodes of that
    /// domain together) or `--max-held-param-bytes` (the gateway's, all
    /// domains). (The count limits, 1024 per node and 10 000 held, are out
    /// of the simulation's reach: it knows five names.)
    pub fn room_for(
        &self,
        domain: u8,
        node: &str,
        changes: &[(&str, &PVal)],
        limits: &Limits,
    ) -> Result<(), Refusal> {
        let n = self.node(domain, node);
        let mut last: BTreeMap<&str, &PVal> = BTreeMap::new();
        for &(name, value) in changes {
            last.insert(name, value);
        }
        let (mut before, mut after) = (0, 0);
        for (name, value) in last {
            match n.and_then(|n| n.params.get(name)) {
                Some(p) => {
                    before += p.bytes(name);
                    after += p.bytes_with(name, value);
                }
                None => after += param_bytes(name, value, &D0),
            }
        }
        if after <= before {
            return Ok(());
        }
        match n.map_or(HolderM::Gateway, |n| n.holder) {
            HolderM::Owner(c, _) => {
                if self.owned_bytes(domain, c) - before + after > limits.max_param_bytes_per_conn {
                    return Err(Refusal::ConnBytes);
                }
            }
            HolderM::Gateway => {
                if self.held().1 - before + after > limits.max_held_param_bytes {
                    return Err(Refusal::HeldBytes);
                }
            }
        }
        Ok(())
    }

    /// The owner a change of `name` of `node` must be validated by.
    pub fn validator(&self, domain: u8, node: &str, name: &str) -> Option<(ConnRef, u64)> {
        let n = self.node(domain, node)?;
        match (n.holder, n.params.get(name)) {
            (HolderM::Owner(c, u), Some(p)) if p.validate => Some((c, u)),
            _ => None,
        }
    }

    /// Sets a value that passed the rules: an existing parameter changes,
    /// a missing one is created, held by the gateway.
    pub fn set(&mut self, domain: u8, node: &str, name: &str, value: PVal) -> Change {
        let entry = self
            .stores
            .entry((domain, node.to_string()))
            .or_insert(NodeParamsM {
                holder: HolderM::Gateway,
                params: BTreeMap::new(),
            });
        match entry.params.get_mut(name) {
            Some(p) => {
                p.value = value;
                Change::Changed
            }
            None => {
                let p = ParamM {
                    value,
                    desc: D0,
                    validate: false,
                };
                entry.params.insert(name.to_string(), p);
                Change::New
            }
        }
    }

    /// Removes `name` of `node` (a node left without parameters goes);
    /// whether it existed.
    pub fn remove(&mut self, domain: u8, node: &str, name: &str) -> bool {
        let key = (domain, node.to_string());
        let Some(n) = self.stores.get_mut(&key) else {
            return false;
        };
        let existed = n.params.remove(name).is_some();
        if n.params.is_empty() {
            self.stores.remove(&key);
        }
        existed
    }
}

/// A parameter operation of a node's owner, as written.
#[derive(Debug)]
pub(crate) enum ParamOp {
    Declare {
        node: Option<String>,
        name: String,
        /// `None`: no parameter can hold the value sent.
        value: Option<PVal>,
        /// `None`: the descriptor sent is refused.
        desc: Option<DescM>,
        validate: bool,
        id: Option<Id>,
    },
    Set {
        node: Option<String>,
        name: String,
        value: Option<PVal>,
        id: Option<Id>,
    },
    Undeclare {
        node: Option<String>,
        name: String,
        id: Option<Id>,
    },
}

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
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn param_request(
        &mut self,
        slot: usize,
        f: Form,
        op: u8,
        target: u8,
        name: u8,
        value: u8,
        extra: u8,
        id: u8,
    ) -> (Vec<u8>, Effect) {
        let op = op % 16;
        if op > 2 {
            return self.access_request(slot, f, op, target, name, value, extra, id);
        }
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
            0 => ParamOp::Declare {
                node,
                name: pname,
                value: pval,
                desc,
                validate,
                id,
            },
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
            ParamOp::Declare {
                node,
                name,
                value,
                desc,
                validate,
                id,
            } => {
                if let Some(n) = self.param_owner(slot, node.as_deref(), id.as_ref()) {
                    self.declare_param(slot, n, &name, value, desc, validate, id.as_ref());
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
    #[allow(clippy::too_many_arguments)]
    fn declare_param(
        &mut self,
        slot: usize,
        node: NodeModel,
        name: &str,
        value: Option<PVal>,
        desc: Option<DescM>,
        validate: bool,
        id: Option<&Id>,
    ) {
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
            let store = self.hub.params_in(d);
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
            let store = self.hub.params_in(d);
            for (node, name, p) in store.all() {
                let holder = match store.node(node).map(|n| n.holder) {
                    Some(Holder::Owner(c, tag)) => {
                        let full = self
                            .hub
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
