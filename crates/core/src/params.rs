//! Parameters (design.ros2.org/articles/ros_parameters.html;
//! `docs/protocol.md`, "Parameters"): typed values held per node full
//! name, per domain. A node's parameters are either **owned** (declared by
//! the connection that declared the node, with descriptors, optionally
//! validated by the owner) or **held** by the gateway for a node nobody
//! owns (the ROS 1 parameter-server behaviour rosapi clients expect).
//! Plain names (no `node:` part) are held in a global table.
//!
//! This module is the store and the rules; the hub (`hub/params.rs`)
//! routes requests, runs the owner's validation and publishes events.
//!
//! Invariants:
//! - a value always has one of the ten `rcl_interfaces/msg/ParameterValue`
//!   types; an owned parameter's value keeps its declared type unless its
//!   descriptor allows dynamic typing, stays inside its range, and a
//!   read-only one never changes after declaration;
//! - an owned node's parameters exist only while its owner does;
//! - at most [`MAX_PARAMS_PER_NODE`] per node and [`MAX_HELD_PARAMS`] held
//!   in all (per domain), each value at most [`MAX_PARAM_VALUE_BYTES`];
//!   a change that would grow a connection's parameters past
//!   [`ParamLimits::per_conn`] bytes, or the gateway's held ones past
//!   [`ParamLimits::held`] (all domains together), is refused;
//! - `bytes()` is the sum of every parameter's bytes, split exactly into
//!   `held_bytes()` (nodes nobody owns) and `owned_bytes(c)` for each
//!   owning connection, each kept as entries change (O(1) per change), so
//!   the memory budget can charge a connection for its parameters.

use std::collections::{BTreeMap, HashMap};

use serde_json::{json, Map, Value};

use crate::conn_ref::ConnRef;
use crate::registry::NodeTag;

/// Parameters one node may hold.
pub const MAX_PARAMS_PER_NODE: usize = 1024;

/// Parameters the gateway holds for nodes nobody owns, and global ones,
/// per domain.
pub const MAX_HELD_PARAMS: usize = 10_000;

/// Bytes. Largest value (as JSON) one parameter may hold.
pub const MAX_PARAM_VALUE_BYTES: usize = 64 * 1024;

/// Bytes counted per parameter beyond its name and value.
const PARAM_OVERHEAD: usize = 128;

/// The byte limits a store enforces (the hub fills them from its
/// `Limits`); bytes as the memory ledger counts them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParamLimits {
    /// The parameters of one connection's nodes, together.
    pub per_conn: usize,
    /// The parameters the gateway holds for nobody, all domains together.
    pub held: usize,
    /// What the other domains' stores hold of [`ParamLimits::held`].
    pub held_elsewhere: usize,
}

impl ParamLimits {
    /// No byte limit (unit tests of the rules).
    pub const NONE: ParamLimits = ParamLimits {
        per_conn: usize::MAX,
        held: usize::MAX,
        held_elsewhere: 0,
    };
}

/// `rcl_interfaces/msg/ParameterType` values.
pub mod ptype {
    pub const NOT_SET: u8 = 0;
    pub const BOOL: u8 = 1;
    pub const INTEGER: u8 = 2;
    pub const DOUBLE: u8 = 3;
    pub const STRING: u8 = 4;
    pub const BYTE_ARRAY: u8 = 5;
    pub const BOOL_ARRAY: u8 = 6;
    pub const INTEGER_ARRAY: u8 = 7;
    pub const DOUBLE_ARRAY: u8 = 8;
    pub const STRING_ARRAY: u8 = 9;
}

/// A parameter value, as `rcl_interfaces/msg/ParameterValue` holds it.
#[derive(Debug, Clone, PartialEq)]
pub enum ParamValue {
    NotSet,
    Bool(bool),
    Integer(i64),
    Double(f64),
    String(String),
    Bytes(Vec<u8>),
    BoolArray(Vec<bool>),
    IntegerArray(Vec<i64>),
    DoubleArray(Vec<f64>),
    StringArray(Vec<String>),
}

impl ParamValue {
    /// Its `ParameterType`.
    pub fn type_code(&self) -> u8 {
        match self {
            ParamValue::NotSet => ptype::NOT_SET,
            ParamValue::Bool(_) => ptype::BOOL,
            ParamValue::Integer(_) => ptype::INTEGER,
            ParamValue::Double(_) => ptype::DOUBLE,
            ParamValue::String(_) => ptype::STRING,
            ParamValue::Bytes(_) => ptype::BYTE_ARRAY,
            ParamValue::BoolArray(_) => ptype::BOOL_ARRAY,
            ParamValue::IntegerArray(_) => ptype::INTEGER_ARRAY,
            ParamValue::DoubleArray(_) => ptype::DOUBLE_ARRAY,
            ParamValue::StringArray(_) => ptype::STRING_ARRAY,
        }
    }

    /// A short type name for messages (`ros2 param` spells them so).
    pub fn type_name(&self) -> &'static str {
        type_name(self.type_code())
    }

    /// From plain JSON: `true`, `5` (integer), `5.0` or `1e3` (double),
    /// `"s"`, homogeneous arrays of those (an integer array with one double
    /// becomes a double array); an `rcl_interfaces/msg/ParameterValue`
    /// object (with `"type"`) is read as such, which is the only way to
    /// give a byte array. `null` is "not set".
    pub fn from_json(v: &Value) -> Result<ParamValue, String> {
        Ok(match v {
            Value::Null => ParamValue::NotSet,
            Value::Bool(b) => ParamValue::Bool(*b),
            Value::Number(n) => match n.as_i64() {
                Some(i) => ParamValue::Integer(i),
                None => ParamValue::Double(n.as_f64().ok_or("number out of range")?),
            },
            Value::String(s) => ParamValue::String(s.clone()),
            Value::Array(items) => array_from_json(items)?,
            Value::Object(o) if o.contains_key("type") => from_parameter_value(o)?,
            Value::Object(_) => {
                return Err(
                    "an object is not a parameter value (use a ParameterValue with \"type\")"
                        .into(),
                )
            }
        })
    }

    /// As plain JSON (a byte array as a list of numbers).
    pub fn to_json(&self) -> Value {
        match self {
            ParamValue::NotSet => Value::Null,
            ParamValue::Bool(b) => json!(b),
            ParamValue::Integer(i) => json!(i),
            ParamValue::Double(d) => double(*d),
            ParamValue::String(s) => json!(s),
            ParamValue::Bytes(b) => json!(b),
            ParamValue::BoolArray(a) => json!(a),
            ParamValue::IntegerArray(a) => json!(a),
            ParamValue::DoubleArray(a) => Value::Array(a.iter().map(|d| double(*d)).collect()),
            ParamValue::StringArray(a) => json!(a),
        }
    }

    /// As an `rcl_interfaces/msg/ParameterValue`, all ten fields, as
    /// rosbridge emits it.
    pub fn to_parameter_value(&self) -> Value {
        let mut v = json!({
            "type": self.type_code(),
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
        let field = match self {
            ParamValue::NotSet => return v,
            ParamValue::Bool(_) => "bool_value",
            ParamValue::Integer(_) => "integer_value",
            ParamValue::Double(_) => "double_value",
            ParamValue::String(_) => "string_value",
            ParamValue::Bytes(_) => "byte_array_value",
            ParamValue::BoolArray(_) => "bool_array_value",
            ParamValue::IntegerArray(_) => "integer_array_value",
            ParamValue::DoubleArray(_) => "double_array_value",
            ParamValue::StringArray(_) => "string_array_value",
        };
        v[field] = self.to_json();
        v
    }

    /// Bytes it holds (for the memory ledger and the size cap).
    pub fn bytes(&self) -> usize {
        match self {
            ParamValue::String(s) => s.len(),
            ParamValue::Bytes(b) => b.len(),
            ParamValue::BoolArray(a) => a.len(),
            ParamValue::IntegerArray(a) => 8 * a.len(),
            ParamValue::DoubleArray(a) => 8 * a.len(),
            ParamValue::StringArray(a) => a.iter().map(|s| s.len() + 24).sum(),
            _ => 8,
        }
    }
}

/// A finite double as JSON, always with a fraction or exponent so it reads
/// back as a double; a non-finite one (from YAML's `.inf`) as null.
fn double(d: f64) -> Value {
    match serde_json::Number::from_f64(d) {
        Some(n) => Value::Number(n),
        None => Value::Null,
    }
}

/// The type name of a `ParameterType`.
pub fn type_name(code: u8) -> &'static str {
    match code {
        ptype::BOOL => "bool",
        ptype::INTEGER => "integer",
        ptype::DOUBLE => "double",
        ptype::STRING => "string",
        ptype::BYTE_ARRAY => "byte_array",
        ptype::BOOL_ARRAY => "bool_array",
        ptype::INTEGER_ARRAY => "integer_array",
        ptype::DOUBLE_ARRAY => "double_array",
        ptype::STRING_ARRAY => "string_array",
        _ => "not set",
    }
}

fn array_from_json(items: &[Value]) -> Result<ParamValue, String> {
    if items.iter().all(Value::is_boolean) && !items.is_empty() {
        return Ok(ParamValue::BoolArray(
            items.iter().filter_map(Value::as_bool).collect(),
        ));
    }
    if items.iter().all(Value::is_string) && !items.is_empty() {
        return Ok(ParamValue::StringArray(
            items
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect(),
        ));
    }
    if items.iter().all(|v| v.is_i64()) {
        return Ok(ParamValue::IntegerArray(
            items.iter().filter_map(Value::as_i64).collect(),
        ));
    }
    if items.iter().all(Value::is_number) {
        return Ok(ParamValue::DoubleArray(
            items.iter().filter_map(Value::as_f64).collect(),
        ));
    }
    Err("an array parameter holds bools, integers, doubles or strings, all of one kind".into())
}

/// Reads an `rcl_interfaces/msg/ParameterValue` object.
fn from_parameter_value(o: &Map<String, Value>) -> Result<ParamValue, String> {
    let ty = o
        .get("type")
        .and_then(Value::as_u64)
        .ok_or("ParameterValue: \"type\" must be 0-9")?;
    let field = |name: &str| o.get(name).cloned().unwrap_or(Value::Null);
    let list = |name: &str| -> Vec<Value> {
        match field(name) {
            Value::Array(a) => a,
            _ => Vec::new(),
        }
    };
    let bad = |what: &str| format!("ParameterValue of type {ty}: {what} has the wrong type");
    Ok(match ty as u8 {
        ptype::NOT_SET => ParamValue::NotSet,
        ptype::BOOL => ParamValue::Bool(
            field("bool_value")
                .as_bool()
                .ok_or_else(|| bad("bool_value"))?,
        ),
        ptype::INTEGER => ParamValue::Integer(
            field("integer_value")
                .as_i64()
                .ok_or_else(|| bad("integer_value"))?,
        ),
        ptype::DOUBLE => ParamValue::Double(
            field("double_value")
                .as_f64()
                .ok_or_else(|| bad("double_value"))?,
        ),
        ptype::STRING => ParamValue::String(
            field("string_value")
                .as_str()
                .ok_or_else(|| bad("string_value"))?
                .to_string(),
        ),
        ptype::BYTE_ARRAY => ParamValue::Bytes(
            list("byte_array_value")
                .iter()
                .map(|v| v.as_u64().and_then(|b| u8::try_from(b).ok()))
                .collect::<Option<Vec<u8>>>()
                .ok_or_else(|| bad("byte_array_value"))?,
        ),
        ptype::BOOL_ARRAY => ParamValue::BoolArray(
            list("bool_array_value")
                .iter()
                .map(Value::as_bool)
                .collect::<Option<_>>()
                .ok_or_else(|| bad("bool_array_value"))?,
        ),
        ptype::INTEGER_ARRAY => ParamValue::IntegerArray(
            list("integer_array_value")
                .iter()
                .map(Value::as_i64)
                .collect::<Option<_>>()
                .ok_or_else(|| bad("integer_array_value"))?,
        ),
        ptype::DOUBLE_ARRAY => ParamValue::DoubleArray(
            list("double_array_value")
                .iter()
                .map(Value::as_f64)
                .collect::<Option<_>>()
                .ok_or_else(|| bad("double_array_value"))?,
        ),
        ptype::STRING_ARRAY => ParamValue::StringArray(
            list("string_array_value")
                .iter()
                .map(|v| v.as_str().map(str::to_string))
                .collect::<Option<_>>()
                .ok_or_else(|| bad("string_array_value"))?,
        ),
        _ => return Err("ParameterValue: \"type\" must be 0-9".into()),
    })
}

/// An integer range (`rcl_interfaces/msg/IntegerRange`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntegerRange {
    pub from: i64,
    pub to: i64,
    /// 0: any value in the range.
    pub step: u64,
}

/// A floating-point range (`rcl_interfaces/msg/FloatingPointRange`).
#[derive(Debug, Clone, PartialEq)]
pub struct FloatRange {
    pub from: f64,
    pub to: f64,
    /// 0: any value in the range.
    pub step: f64,
}

/// `rcl_interfaces/msg/ParameterDescriptor`, what rosgate keeps of it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Descriptor {
    pub description: String,
    pub additional_constraints: String,
    pub read_only: bool,
    pub dynamic_typing: bool,
    pub integer_range: Option<IntegerRange>,
    pub float_range: Option<FloatRange>,
}

impl Descriptor {
    /// From the `descriptor` object of `declare_parameter` (rcl field
    /// names; the ranges as objects or one-element lists, as in the msg).
    pub fn from_json(v: &Value) -> Result<Descriptor, String> {
        let o = match v {
            Value::Null => return Ok(Descriptor::default()),
            Value::Object(o) => o,
            _ => return Err("descriptor must be an object".into()),
        };
        let text = |k: &str| o.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let flag = |k: &str| o.get(k).and_then(Value::as_bool).unwrap_or(false);
        let range = |k: &str| -> Option<&Map<String, Value>> {
            match o.get(k)? {
                Value::Object(r) => Some(r),
                Value::Array(a) => a.first().and_then(Value::as_object),
                _ => None,
            }
        };
        let integer_range = match range("integer_range") {
            None => None,
            Some(r) => Some(IntegerRange {
                from: r
                    .get("from_value")
                    .and_then(Value::as_i64)
                    .ok_or("integer_range.from_value must be an integer")?,
                to: r
                    .get("to_value")
                    .and_then(Value::as_i64)
                    .ok_or("integer_range.to_value must be an integer")?,
                step: r.get("step").and_then(Value::as_u64).unwrap_or(0),
            }),
        };
        let float_range = match range("floating_point_range") {
            None => None,
            Some(r) => Some(FloatRange {
                from: r
                    .get("from_value")
                    .and_then(Value::as_f64)
                    .ok_or("floating_point_range.from_value must be a number")?,
                to: r
                    .get("to_value")
                    .and_then(Value::as_f64)
                    .ok_or("floating_point_range.to_value must be a number")?,
                step: r.get("step").and_then(Value::as_f64).unwrap_or(0.0),
            }),
        };
        Ok(Descriptor {
            description: text("description"),
            additional_constraints: text("additional_constraints"),
            read_only: flag("read_only"),
            dynamic_typing: flag("dynamic_typing"),
            integer_range,
            float_range,
        })
    }

    /// As an `rcl_interfaces/msg/ParameterDescriptor` for parameter `name`
    /// of type `ty`.
    pub fn to_json(&self, name: &str, ty: u8) -> Value {
        let ir: Vec<Value> = self
            .integer_range
            .iter()
            .map(|r| json!({"from_value": r.from, "to_value": r.to, "step": r.step}))
            .collect();
        let fr: Vec<Value> = self
            .float_range
            .iter()
            .map(|r| json!({"from_value": double(r.from), "to_value": double(r.to), "step": double(r.step)}))
            .collect();
        json!({
            "name": name,
            "type": ty,
            "description": self.description,
            "additional_constraints": self.additional_constraints,
            "read_only": self.read_only,
            "dynamic_typing": self.dynamic_typing,
            "floating_point_range": fr,
            "integer_range": ir,
        })
    }

    /// Whether `value` is inside the ranges; the reason when it is not.
    pub fn check_range(&self, value: &ParamValue) -> Result<(), String> {
        match (value, &self.integer_range, &self.float_range) {
            (ParamValue::Integer(v), Some(r), _) => {
                let on_step =
                    r.step == 0 || *v == r.to || (v.wrapping_sub(r.from) as u64) % r.step == 0;
                if *v < r.from || *v > r.to || !on_step {
                    return Err(format!(
                        "{v} is outside the integer range [{}, {}] step {}",
                        r.from, r.to, r.step
                    ));
                }
            }
            (ParamValue::Double(v), _, Some(r)) => {
                // rclcpp's tolerance: within 1e-6 relative of a bound or step.
                let tol = |x: f64| 1e-6 * x.abs().max(1.0);
                let inside = *v >= r.from - tol(r.from) && *v <= r.to + tol(r.to);
                let on_step = r.step == 0.0 || {
                    let k = ((v - r.from) / r.step).round();
                    (r.from + k * r.step - v).abs() <= tol(*v) || (v - r.to).abs() <= tol(r.to)
                };
                if !inside || !on_step {
                    return Err(format!(
                        "{v} is outside the floating-point range [{}, {}] step {}",
                        r.from, r.to, r.step
                    ));
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn bytes(&self) -> usize {
        self.description.len() + self.additional_constraints.len() + 64
    }
}

/// One parameter.
#[derive(Debug, Clone)]
pub struct Param {
    pub value: ParamValue,
    pub descriptor: Descriptor,
    /// Changes by others are validated by the owner first.
    pub validate: bool,
}

impl Param {
    fn bytes(&self, name: &str) -> usize {
        self.bytes_with(name, &self.value)
    }

    /// Its bytes if its value were `value`.
    fn bytes_with(&self, name: &str, value: &ParamValue) -> usize {
        PARAM_OVERHEAD + name.len() + value.bytes() + self.descriptor.bytes()
    }
}

/// The bytes of a parameter a set creates (no descriptor).
fn new_param_bytes(name: &str, value: &ParamValue) -> usize {
    PARAM_OVERHEAD + name.len() + value.bytes() + Descriptor::default().bytes()
}

/// Who holds a node's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holder {
    /// The connection that declared the node, and the node.
    Owner(ConnRef, NodeTag),
    /// The gateway (nobody owns the node).
    Gateway,
}

/// The parameters of one node.
#[derive(Debug)]
pub struct NodeParams {
    pub holder: Holder,
    pub params: BTreeMap<String, Param>,
}

/// Why a change was refused.
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    /// The node is owned and did not declare this parameter.
    Undeclared,
    ReadOnly,
    /// The new value's type differs and the descriptor does not allow it.
    TypeChange {
        from: u8,
        to: u8,
    },
    OutOfRange(String),
    TooBig,
    TooMany,
    /// The connection owning the node would hold more than this many
    /// bytes of parameters.
    ConnBytes(usize),
    /// The gateway would hold more than this many bytes of parameters for
    /// nobody (all domains).
    HeldBytes(usize),
    /// Another connection's node of the same full name owns the table.
    OwnedElsewhere,
    /// The owner (validating) said no, or did not answer in time.
    Rejected(String),
    /// The requester's role may not set it (the allowlist key).
    Forbidden(String),
}

impl Refusal {
    /// The reason text for `name`.
    pub fn reason(&self, name: &str) -> String {
        match self {
            Refusal::Undeclared => format!("parameter {name} is not declared by its node"),
            Refusal::ReadOnly => format!("parameter {name} is read-only"),
            Refusal::TypeChange { from, to } => format!(
                "parameter {name} is of type {} and cannot become {} (its descriptor does not allow dynamic typing)",
                type_name(*from),
                type_name(*to)
            ),
            Refusal::OutOfRange(why) => format!("parameter {name}: {why}"),
            Refusal::TooBig => format!(
                "parameter {name}: value larger than {MAX_PARAM_VALUE_BYTES} bytes"
            ),
            Refusal::TooMany => format!(
                "parameter {name}: the node holds {MAX_PARAMS_PER_NODE} parameters, or the gateway {MAX_HELD_PARAMS}, the limit"
            ),
            Refusal::ConnBytes(limit) => format!(
                "parameter {name}: the parameters of the connection that owns its node would take more than {limit} bytes (--max-param-bytes-per-conn)"
            ),
            Refusal::HeldBytes(limit) => format!(
                "parameter {name}: the parameters the gateway holds for nodes nobody owns would take more than {limit} bytes (--max-held-param-bytes)"
            ),
            Refusal::OwnedElsewhere => format!(
                "parameter {name}: the parameters of its node belong to another connection's node of that name"
            ),
            Refusal::Rejected(why) => format!("parameter {name}: rejected by its node: {why}"),
            Refusal::Forbidden(key) => format!("forbidden: may not set parameter {key}"),
        }
    }

    /// The counter label of the refusal.
    pub fn kind(&self) -> &'static str {
        match self {
            Refusal::Undeclared => "undeclared",
            Refusal::ReadOnly => "read_only",
            Refusal::TypeChange { .. } => "type",
            Refusal::OutOfRange(_) => "range",
            Refusal::TooBig | Refusal::TooMany | Refusal::ConnBytes(_) | Refusal::HeldBytes(_) => {
                "limit"
            }
            Refusal::OwnedElsewhere => "owned",
            Refusal::Rejected(_) => "rejected",
            Refusal::Forbidden(_) => "forbidden",
        }
    }
}

/// What a change did, for `/parameter_events`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    New,
    Changed,
    Deleted,
}

/// The key of the global (node-less, ROS 1 style) table.
pub const GLOBAL: &str = "";

/// The parameters of one domain. See the module docs.
#[derive(Debug, Default)]
pub struct ParamStore {
    nodes: HashMap<String, NodeParams>,
    /// Parameters held by the gateway (nodes nobody owns).
    held: usize,
    bytes: usize,
    /// Bytes of the parameters held by the gateway.
    held_bytes: usize,
    /// Bytes of the parameters each connection owns (all its nodes); no
    /// entry at zero, so the map is as big as the set of owners.
    owned: HashMap<ConnRef, usize>,
}

impl ParamStore {
    /// The parameters of node `full_name` (or [`GLOBAL`]).
    pub fn node(&self, full_name: &str) -> Option<&NodeParams> {
        self.nodes.get(full_name)
    }

    /// Node full names with parameters (not [`GLOBAL`]), unsorted.
    pub fn node_names(&self) -> impl Iterator<Item = &str> {
        self.nodes
            .iter()
            .filter(|(n, p)| n.as_str() != GLOBAL && !p.params.is_empty())
            .map(|(n, _)| n.as_str())
    }

    /// Every (node, parameter) pair, unsorted.
    pub fn all(&self) -> impl Iterator<Item = (&str, &str, &Param)> {
        self.nodes.iter().flat_map(|(n, p)| {
            p.params
                .iter()
                .map(move |(k, v)| (n.as_str(), k.as_str(), v))
        })
    }

    pub fn get(&self, node: &str, name: &str) -> Option<&Param> {
        self.nodes.get(node)?.params.get(name)
    }

    /// Bytes held for clients.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Bytes of the parameters the gateway holds (nodes nobody owns).
    pub fn held_bytes(&self) -> usize {
        self.held_bytes
    }

    /// Bytes of the parameters of the nodes `c` owns: they go when it
    /// does, so the memory budget counts them among what it holds.
    pub fn owned_bytes(&self, c: ConnRef) -> usize {
        self.owned.get(&c).copied().unwrap_or(0)
    }

    /// A parameter of a table `holder` holds went from `before` to `after`
    /// bytes (0: absent): the total and the holder's share follow.
    fn account(&mut self, holder: Holder, before: usize, after: usize) {
        self.bytes = self.bytes + after - before;
        match holder {
            Holder::Gateway => self.held_bytes = self.held_bytes + after - before,
            Holder::Owner(c, _) => {
                let mine = self.owned.entry(c).or_insert(0);
                *mine = *mine + after - before;
                if *mine == 0 {
                    self.owned.remove(&c);
                }
            }
        }
    }

    /// Parameters held in all (owned and held).
    pub fn len(&self) -> usize {
        self.nodes.values().map(|n| n.params.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.values().all(|n| n.params.is_empty())
    }

    /// The owner of `node`'s parameters, if a connection owns them.
    pub fn owner(&self, node: &str) -> Option<(ConnRef, NodeTag)> {
        match self.nodes.get(node)?.holder {
            Holder::Owner(c, t) => Some((c, t)),
            Holder::Gateway => None,
        }
    }

    /// Declares parameter `name` of `node` for its owner, with `value`
    /// (the caller has applied overrides). A node held by the gateway
    /// becomes owned: its held values are dropped (returned as deleted),
    /// except that the caller may use them as overrides first. Everything
    /// is checked before anything changes, so a refusal leaves the store
    /// as it was.
    pub fn declare(
        &mut self,
        owner: (ConnRef, NodeTag),
        node: &str,
        name: &str,
        param: Param,
        limits: ParamLimits,
    ) -> Result<(Change, Vec<String>), Refusal> {
        if param.value.bytes() > MAX_PARAM_VALUE_BYTES {
            return Err(Refusal::TooBig);
        }
        let table = self.nodes.get(node);
        let (held, mine) = match table.map(|n| n.holder) {
            None => (false, None),
            Some(Holder::Gateway) => (true, None),
            // The hub refuses this first (with the other node named);
            // taking the table over would also misplace its bytes.
            Some(Holder::Owner(c, _)) if c != owner.0 => return Err(Refusal::OwnedElsewhere),
            Some(Holder::Owner(..)) => (false, table),
        };
        let old = mine.and_then(|n| n.params.get(name));
        if old.is_none() && mine.is_some_and(|n| n.params.len() >= MAX_PARAMS_PER_NODE) {
            return Err(Refusal::TooMany);
        }
        let (before, after) = (old.map_or(0, |o| o.bytes(name)), param.bytes(name));
        if after > before && self.owned_bytes(owner.0) - before + after > limits.per_conn {
            return Err(Refusal::ConnBytes(limits.per_conn));
        }
        let mut dropped = Vec::new();
        if held {
            dropped = table.map_or_else(Vec::new, |n| n.params.keys().cloned().collect());
            for k in &dropped {
                self.remove(node, k);
            }
        }
        let holder = Holder::Owner(owner.0, owner.1);
        let entry = self.nodes.entry(node.to_string()).or_insert(NodeParams {
            holder,
            params: BTreeMap::new(),
        });
        entry.holder = holder;
        let existed = entry.params.insert(name.to_string(), param).is_some();
        self.account(holder, before, after);
        Ok((
            if existed {
                Change::Changed
            } else {
                Change::New
            },
            dropped,
        ))
    }

    /// Checks a change of `name` of `node` to `value` against the rules:
    /// declared (owned nodes), read-only, type, range, size, and the room
    /// left ([`ParamStore::room_for`]) as the store stands.
    pub fn check(
        &self,
        node: &str,
        name: &str,
        value: &ParamValue,
        limits: ParamLimits,
    ) -> Result<(), Refusal> {
        if value.bytes() > MAX_PARAM_VALUE_BYTES {
            return Err(Refusal::TooBig);
        }
        if let Some(n) = self.nodes.get(node) {
            match (n.holder, n.params.get(name)) {
                (Holder::Owner(..), None) => return Err(Refusal::Undeclared),
                (Holder::Owner(..), Some(p)) => {
                    if p.descriptor.read_only {
                        return Err(Refusal::ReadOnly);
                    }
                    let (from, to) = (p.value.type_code(), value.type_code());
                    if from != to && !p.descriptor.dynamic_typing && from != ptype::NOT_SET {
                        return Err(Refusal::TypeChange { from, to });
                    }
                    p.descriptor
                        .check_range(value)
                        .map_err(Refusal::OutOfRange)?;
                }
                // Held by the gateway: anything goes, room permitting.
                (Holder::Gateway, _) => {}
            }
        }
        self.room_for(node, [(name, value)], limits)
    }

    /// Whether `node` has room for `changes` applied together (in order; a
    /// name may repeat, the last value wins): the parameters it would hold
    /// against [`MAX_PARAMS_PER_NODE`], those the gateway would hold
    /// against [`MAX_HELD_PARAMS`], and the bytes its holder (the owning
    /// connection, or the gateway) would hold against `limits`. The result
    /// is what counts, so a request of many changes cannot pass a limit
    /// that each of them, checked alone against the store as it was, would
    /// keep; a change that shrinks is never refused for room.
    pub fn room_for<'a>(
        &self,
        node: &str,
        changes: impl IntoIterator<Item = (&'a str, &'a ParamValue)>,
        limits: ParamLimits,
    ) -> Result<(), Refusal> {
        let n = self.nodes.get(node);
        let holder = n.map_or(Holder::Gateway, |n| n.holder);
        let mut last: HashMap<&str, &ParamValue> = HashMap::new();
        for (name, value) in changes {
            last.insert(name, value);
        }
        let (mut new, mut before, mut after) = (0, 0, 0);
        for (name, value) in last {
            match n.and_then(|n| n.params.get(name)) {
                Some(p) => {
                    before += p.bytes(name);
                    after += p.bytes_with(name, value);
                }
                None => {
                    new += 1;
                    after += new_param_bytes(name, value);
                }
            }
        }
        if new > 0 {
            let count = n.map_or(0, |n| n.params.len());
            let held_full = holder == Holder::Gateway && self.held + new > MAX_HELD_PARAMS;
            if count + new > MAX_PARAMS_PER_NODE || held_full {
                return Err(Refusal::TooMany);
            }
        }
        if after <= before {
            return Ok(());
        }
        match holder {
            Holder::Owner(c, _) if self.owned_bytes(c) - before + after > limits.per_conn => {
                Err(Refusal::ConnBytes(limits.per_conn))
            }
            Holder::Gateway
                if (self.held_bytes + limits.held_elsewhere) - before + after > limits.held =>
            {
                Err(Refusal::HeldBytes(limits.held))
            }
            _ => Ok(()),
        }
    }

    /// Whether a change of `name` of `node` must be validated by its owner
    /// first (and by whom).
    pub fn validator(&self, node: &str, name: &str) -> Option<(ConnRef, NodeTag)> {
        let n = self.nodes.get(node)?;
        match (n.holder, n.params.get(name)) {
            (Holder::Owner(c, t), Some(p)) if p.validate => Some((c, t)),
            _ => None,
        }
    }

    /// Applies a change that passed [`ParamStore::check`] (and the owner's
    /// validation): sets an owned or held value, creating a held one.
    pub fn set(&mut self, node: &str, name: &str, value: ParamValue) -> Change {
        let entry = self.nodes.entry(node.to_string()).or_insert(NodeParams {
            holder: Holder::Gateway,
            params: BTreeMap::new(),
        });
        let holder = entry.holder;
        match entry.params.get_mut(name) {
            Some(p) => {
                let before = p.bytes(name);
                p.value = value;
                let after = p.bytes(name);
                self.account(holder, before, after);
                Change::Changed
            }
            None => {
                let p = Param {
                    value,
                    descriptor: Descriptor::default(),
                    validate: false,
                };
                let b = p.bytes(name);
                entry.params.insert(name.to_string(), p);
                if holder == Holder::Gateway {
                    self.held += 1;
                }
                self.account(holder, 0, b);
                Change::New
            }
        }
    }

    /// Removes `name` of `node`; true if it existed.
    pub fn remove(&mut self, node: &str, name: &str) -> bool {
        let Some(n) = self.nodes.get_mut(node) else {
            return false;
        };
        let Some(p) = n.params.remove(name) else {
            return false;
        };
        let holder = n.holder;
        if holder == Holder::Gateway {
            self.held -= 1;
        }
        if n.params.is_empty() {
            self.nodes.remove(node);
        }
        self.account(holder, p.bytes(name), 0);
        true
    }

    /// Removes every parameter of `node` (its owner left or destroyed it);
    /// returns their names.
    pub fn drop_node(&mut self, node: &str, owner: (ConnRef, NodeTag)) -> Vec<String> {
        match self.nodes.get(node) {
            Some(n) if n.holder == Holder::Owner(owner.0, owner.1) => {}
            _ => return Vec::new(),
        }
        let Some(n) = self.nodes.remove(node) else {
            return Vec::new();
        };
        for (k, p) in &n.params {
            self.account(n.holder, p.bytes(k), 0);
        }
        n.params.into_keys().collect()
    }
}

/// Start-up overrides (`--params FILE`): node full name (or `/**` for
/// every node) -> parameter -> value.
pub type Overrides = HashMap<String, BTreeMap<String, ParamValue>>;

/// The override of `name` for `node`, if any (exact node first, then `/**`).
pub fn override_for<'a>(o: &'a Overrides, node: &str, name: &str) -> Option<&'a ParamValue> {
    o.get(node)
        .and_then(|m| m.get(name))
        .or_else(|| o.get("/**").and_then(|m| m.get(name)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: ConnRef = ConnRef { key: 0, gen: 1 };
    const B: ConnRef = ConnRef { key: 1, gen: 1 };
    const T: NodeTag = NodeTag(0);
    const L: ParamLimits = ParamLimits::NONE;

    fn owned(v: ParamValue, d: Descriptor) -> Param {
        Param {
            value: v,
            descriptor: d,
            validate: false,
        }
    }

    #[test]
    fn json_values_keep_their_types() {
        for (text, ty) in [
            ("true", ptype::BOOL),
            ("5", ptype::INTEGER),
            ("5.0", ptype::DOUBLE),
            ("1e3", ptype::DOUBLE),
            ("\"s\"", ptype::STRING),
            ("[1,2]", ptype::INTEGER_ARRAY),
            ("[1,2.5]", ptype::DOUBLE_ARRAY),
            ("[true]", ptype::BOOL_ARRAY),
            ("[\"a\"]", ptype::STRING_ARRAY),
            (
                "{\"type\":5,\"byte_array_value\":[1,255]}",
                ptype::BYTE_ARRAY,
            ),
            ("null", ptype::NOT_SET),
        ] {
            let v: Value = serde_json::from_str(text).expect("json");
            let p = ParamValue::from_json(&v).expect(text);
            assert_eq!(p.type_code(), ty, "{text}");
            let back = ParamValue::from_json(&p.to_json());
            if ty != ptype::BYTE_ARRAY {
                assert_eq!(back.as_ref(), Ok(&p), "{text} round trip");
            }
            assert_eq!(
                ParamValue::from_json(&p.to_parameter_value()).as_ref(),
                Ok(&p),
                "{text} as ParameterValue"
            );
        }
        assert!(ParamValue::from_json(&json!([1, "a"])).is_err());
        assert!(ParamValue::from_json(&json!({"a": 1})).is_err());
    }

    #[test]
    fn the_rules_of_ros_2() {
        let mut s = ParamStore::default();
        let range = Descriptor {
            integer_range: Some(IntegerRange {
                from: 0,
                to: 10,
                step: 2,
            }),
            ..Descriptor::default()
        };
        s.declare((A, T), "/n", "i", owned(ParamValue::Integer(2), range), L)
            .expect("declared");
        s.declare(
            (A, T),
            "/n",
            "ro",
            owned(
                ParamValue::Bool(true),
                Descriptor {
                    read_only: true,
                    ..Descriptor::default()
                },
            ),
            L,
        )
        .expect("declared");
        assert_eq!(s.check("/n", "i", &ParamValue::Integer(4), L), Ok(()));
        assert!(matches!(
            s.check("/n", "i", &ParamValue::Integer(5), L),
            Err(Refusal::OutOfRange(_))
        ));
        assert!(matches!(
            s.check("/n", "i", &ParamValue::Integer(12), L),
            Err(Refusal::OutOfRange(_))
        ));
        assert_eq!(
            s.check("/n", "i", &ParamValue::Double(4.0), L),
            Err(Refusal::TypeChange {
                from: ptype::INTEGER,
                to: ptype::DOUBLE
            })
        );
        assert_eq!(
            s.check("/n", "ro", &ParamValue::Bool(false), L),
            Err(Refusal::ReadOnly)
        );
        assert_eq!(
            s.check("/n", "nope", &ParamValue::Bool(false), L),
            Err(Refusal::Undeclared)
        );
        // Held (nobody owns the node): anything goes, and it can be deleted.
        assert_eq!(s.check("/free", "x", &ParamValue::Bool(true), L), Ok(()));
        assert_eq!(s.set("/free", "x", ParamValue::Bool(true)), Change::New);
        assert_eq!(
            s.set("/free", "x", ParamValue::String("s".into())),
            Change::Changed
        );
        assert!(s.remove("/free", "x"));
        assert!(s.node("/free").is_none());
        assert_eq!(s.drop_node("/n", (A, T)).len(), 2);
        assert_eq!((s.bytes(), s.len()), (0, 0));
    }

    #[test]
    fn bytes_are_split_by_holder_and_limited_per_connection_and_for_the_gateway() {
        let text = |n: usize| ParamValue::String("x".repeat(n));
        // "a" with a 100-byte string and no description: 128 + 1 + 100 + 64.
        let one = 293;
        let lim = ParamLimits {
            per_conn: 2 * one,
            held: 2 * one + 10,
            held_elsewhere: 10,
        };
        let mut s = ParamStore::default();
        let p = |v| owned(v, Descriptor::default());
        s.declare((A, T), "/n", "a", p(text(100)), lim)
            .expect("fits");
        s.declare((A, T), "/m", "b", p(text(100)), lim)
            .expect("fits");
        assert_eq!(
            (s.owned_bytes(A), s.held_bytes(), s.bytes()),
            (2 * one, 0, 2 * one)
        );
        // The connection's nodes together are full: neither a new parameter
        // nor a bigger value fits, whoever asks; a smaller one does.
        assert_eq!(
            s.declare((A, T), "/n", "c", p(text(0)), lim).map(|_| ()),
            Err(Refusal::ConnBytes(2 * one))
        );
        assert_eq!(
            s.check("/n", "a", &text(101), lim),
            Err(Refusal::ConnBytes(2 * one))
        );
        assert_eq!(s.check("/n", "a", &text(99), lim), Ok(()));
        s.set("/n", "a", text(99));
        assert_eq!(s.check("/n", "a", &text(100), lim), Ok(()));
        // Another connection has its own room.
        s.declare((B, T), "/o", "a", p(text(100)), lim)
            .expect("fits");
        assert_eq!(s.owned_bytes(B), one);
        // Held: the other domains' bytes count too; the changes of one
        // request count together, the last value of a name winning.
        assert_eq!(s.check("/free", "a", &text(100), lim), Ok(()));
        s.set("/free", "a", text(100));
        assert_eq!(s.held_bytes(), one);
        let (big, small, fits) = (text(101), text(0), text(99));
        assert_eq!(
            s.room_for("/free", [("a", &big), ("b", &big)], lim),
            Err(Refusal::HeldBytes(2 * one + 10))
        );
        assert_eq!(
            s.room_for("/free", [("a", &big), ("a", &small), ("b", &big)], lim),
            Ok(())
        );
        assert_eq!(s.room_for("/free", [("b", &fits)], lim), Ok(()));
        let crowded = ParamLimits {
            held_elsewhere: 12,
            ..lim
        };
        assert_eq!(
            s.room_for("/free", [("b", &fits)], crowded),
            Err(Refusal::HeldBytes(2 * one + 10))
        );
        // Declaring a held node's parameter makes the table its owner's:
        // refused when the owner has no room, nothing is dropped.
        assert_eq!(
            s.declare((A, T), "/free", "a", p(text(100)), lim)
                .map(|_| ()),
            Err(Refusal::ConnBytes(2 * one))
        );
        assert_eq!(s.held_bytes(), one);
        let (_, dropped) = s
            .declare((B, T), "/free", "a", p(text(100)), lim)
            .expect("fits");
        assert_eq!(dropped, vec!["a".to_string()]);
        assert_eq!((s.owned_bytes(B), s.held_bytes()), (2 * one, 0));
        assert_eq!(s.drop_node("/o", (B, T)).len(), 1);
        assert_eq!(s.drop_node("/free", (B, T)).len(), 1);
        assert!(s.remove("/n", "a") && s.remove("/m", "b"));
        assert_eq!((s.owned_bytes(A), s.owned_bytes(B), s.bytes()), (0, 0, 0));
    }

    #[test]
    fn float_ranges_have_a_tolerance() {
        let d = Descriptor {
            float_range: Some(FloatRange {
                from: 0.0,
                to: 1.0,
                step: 0.1,
            }),
            ..Descriptor::default()
        };
        assert!(d.check_range(&ParamValue::Double(0.3)).is_ok());
        assert!(d.check_range(&ParamValue::Double(1.0)).is_ok());
        assert!(d.check_range(&ParamValue::Double(0.35)).is_err());
        assert!(d.check_range(&ParamValue::Double(1.2)).is_err());
    }
}
