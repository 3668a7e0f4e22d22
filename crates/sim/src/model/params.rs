//! The model's data for parameters (the behaviour is in
//! `driver/params.rs` and `driver/param_access.rs`): the names, value
//! texts and descriptors requests pick from, a parameter's value
//! ([`PVal`]) and its JSON forms, the store of every domain per node full
//! name ([`ParamsModel`]) with the rules a change by anyone but the owner
//! must pass ([`ParamsModel::check`]), an owner's operation as written
//! ([`ParamOp`]), and a set waiting for its owner's validation
//! ([`ValidationM`]); the bytes each counts for (`docs/limits.md`).

use std::collections::BTreeMap;

use serde_json::{json, Value};

use rosgate_core::limits::Limits;
use rosgate_core::ConnRef;

use super::{json_name, Id};

/// Parameter names requests pick from: valid ones first (two share a
/// dotted prefix), then an empty one, one with a space, one with a `:`.
pub(crate) const PARAM_NAMES: [&str; 8] = [
    "max_vel", "mode", "gain.kp", "ro", "gain.ki", "", "a b", "x:y",
];

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
    pub fn bytes(&self) -> usize {
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
    pub fn bytes(&self, name: &str) -> usize {
        self.bytes_with(name, &self.value)
    }

    /// Its bytes if its value were `value`.
    pub fn bytes_with(&self, name: &str, value: &PVal) -> usize {
        PARAM_BYTES + name.len() + value.bytes() + self.desc.bytes()
    }
}

/// The bytes of parameter `name` with `value` and descriptor `desc`.
pub(crate) fn param_bytes(name: &str, value: &PVal, desc: &DescM) -> usize {
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

/// `declare_parameter` as written: the `node` field, the name, the value
/// and descriptor (as the model reads them) and `validate`.
#[derive(Debug)]
pub(crate) struct DeclareM {
    pub node: Option<String>,
    pub name: String,
    /// `None`: no parameter can hold the value sent.
    pub value: Option<PVal>,
    /// `None`: the descriptor sent is refused.
    pub desc: Option<DescM>,
    pub validate: bool,
    pub id: Option<Id>,
}

/// A parameter operation of a node's owner, as written.
#[derive(Debug)]
pub(crate) enum ParamOp {
    Declare(DeclareM),
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
/// Bytes counted per validation in flight beyond its service name and the
/// requester's id (`docs/limits.md`, calls).
const CALL_BYTES: usize = 160;

/// How a set's requester is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reply {
    /// rosapi `set_param`: `{"successful":true}`, or `result:false` with
    /// the reason.
    Rosapi,
    /// `set_parameters`: one result per change.
    PerParameter,
    /// `set_parameters_atomically`: one result for all.
    Atomic,
}

/// Where one requested change stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Waiting,
    Ready,
    Applied,
    Refused(Refusal),
}

#[derive(Debug, Clone)]
pub(crate) struct ChangeM {
    pub name: String,
    pub value: PVal,
    pub outcome: Outcome,
}

/// A set waiting for its owner's validation, from the moment the call is
/// sent.
#[derive(Debug)]
pub(crate) struct ValidationM {
    pub caller: ConnRef,
    pub caller_slot: usize,
    pub id: Option<Id>,
    /// The owner asked, and its node (model uid).
    pub owner: ConnRef,
    pub owner_uid: u64,
    pub domain: u8,
    pub node: String,
    /// `<node>/validate_parameters`.
    pub service: String,
    pub reply: Reply,
    /// The service the requester called (its answer names it).
    pub reply_service: String,
    pub changes: Vec<ChangeM>,
    /// The `args` the owner must receive.
    pub args: Value,
    pub due_tick: u64,
    pub alive: bool,
}

impl ValidationM {
    /// Bytes it counts for in flight, as a call of the requester.
    pub fn bytes(&self) -> usize {
        CALL_BYTES + json_name(&self.service).len() + self.id.as_ref().map_or(0, |i| i.raw.len())
    }

    /// The changes the owner decides on: those waiting for it (for an
    /// atomic set, every change not refused).
    pub fn asked(&self, c: &ChangeM) -> bool {
        c.outcome == Outcome::Waiting
            || (self.reply == Reply::Atomic && c.outcome == Outcome::Ready)
    }
}
