//! Message definitions as rosbridge clients read them: the `ros2msg` full
//! text rosapi's `topics_and_raw_types` gives per topic (what Foxglove's
//! `@foxglove/rosmsg` `parse(text, {ros2: true})` reads), and the
//! `rosapi_msgs/TypeDef` lists of `message_details` and its siblings.
//!
//! Both are rendered from the [`model`](crate::model), so bundled,
//! `--interfaces` and learned types come out the same way. What the model
//! does not keep is not rendered: comments and blank lines of the
//! original file (rosapi copies the `.msg` file), and, for a type learned
//! from `~/get_type_description`, constants and default values (the
//! description is read for its fields only, see `describe.rs`).
//!
//! Invariants:
//! - a full text names its nested types as `pkg/msg/Type` both in field
//!   lines and in `MSG:` lines, so a reader matching names exactly
//!   (rosmsg's `fixupTypes`) resolves every reference; each nested type
//!   appears once, after the type's own definition;
//! - work is bounded: a full text stops at the caller's byte limit (at
//!   most [`MAX_FULL_TEXT_BYTES`]) and a typedef list at
//!   [`MAX_TYPEDEFS`] types, each an error naming the type, never a cut
//!   text a client would misread.

use std::collections::BTreeSet;
use std::fmt::{self, Write as _};

use serde_json::{json, Value};

use crate::model::{Base, Field, MsgDef, Prim, Shape, EMPTY_STRUCT_MEMBER};
use crate::registry::Registry;

/// Longest full text rendered for one type. The bundled types' longest
/// (type_description_interfaces/srv/GetTypeDescription_Event, with
/// everything it nests) is about 6 KiB; all 243 bundled structs render in
/// about 0.4 ms together (release build).
pub const MAX_FULL_TEXT_BYTES: usize = 256 * 1024;

/// Most types one typedef list holds (the type and all it nests).
pub const MAX_TYPEDEFS: usize = 1_000;

/// The line between definitions in a full text (rosapi's
/// `stringify_field_types`, as `gendeps --cat` in ROS 1).
pub const SEPARATOR: &str =
    "================================================================================";

/// Why no text or list was rendered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RenderError {
    /// No struct of this name is known.
    Unknown(String),
    /// The type's full text is longer than the limit the caller gave.
    TooLarge { type_name: String, limit: usize },
    /// The type nests more than [`MAX_TYPEDEFS`] types.
    TooMany { type_name: String },
}

impl fmt::Display for RenderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RenderError::Unknown(t) => write!(f, "unknown type {t:?}"),
            RenderError::TooLarge { type_name, limit } => {
                write!(
                    f,
                    "the definition of {type_name} is longer than {limit} bytes"
                )
            }
            RenderError::TooMany { type_name } => {
                write!(f, "{type_name} nests more than {MAX_TYPEDEFS} types")
            }
        }
    }
}

impl std::error::Error for RenderError {}

/// Which struct of an interface a rosapi `*_details` call asks about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// `message_details`: a message type.
    Message,
    /// `service_request_details`.
    Request,
    /// `service_response_details`.
    Response,
    /// `action_goal_details`.
    Goal,
    /// `action_result_details`.
    Result,
    /// `action_feedback_details`.
    Feedback,
}

impl Part {
    /// The part rosapi service `short` (`message_details`, ...) describes.
    pub fn of_rosapi(short: &str) -> Option<Part> {
        Some(match short {
            "message_details" => Part::Message,
            "service_request_details" => Part::Request,
            "service_response_details" => Part::Response,
            "action_goal_details" => Part::Goal,
            "action_result_details" => Part::Result,
            "action_feedback_details" => Part::Feedback,
            _ => return None,
        })
    }

    /// What kind of interface the part belongs to, for error messages.
    pub fn kind(self) -> &'static str {
        match self {
            Part::Message => "message",
            Part::Request | Part::Response => "service",
            Part::Goal | Part::Result | Part::Feedback => "action",
        }
    }

    /// The full name of the struct this part of interface `name` (any
    /// name form) is, if the interface is known.
    pub fn struct_name<'r>(self, types: &'r Registry, name: &str) -> Option<&'r str> {
        match self {
            Part::Message => types.canonical_msg(name),
            Part::Request => types.srv(name).map(|s| s.request.as_str()),
            Part::Response => types.srv(name).map(|s| s.response.as_str()),
            Part::Goal => types.action(name).map(|a| a.goal.as_str()),
            Part::Result => types.action(name).map(|a| a.result.as_str()),
            Part::Feedback => types.action(name).map(|a| a.feedback.as_str()),
        }
    }
}

/// The fields that are rendered: rosidl's member for an empty struct is
/// not in the definition (rosidl_generator_py leaves it out too).
fn data_fields(def: &MsgDef) -> impl Iterator<Item = &Field> {
    let empty = def.fields.len() == 1 && def.fields[0].name == EMPTY_STRUCT_MEMBER;
    def.fields.iter().filter(move |_| !empty)
}

/// `.msg` spelling of a primitive.
fn msg_prim(p: Prim) -> String {
    match p {
        Prim::Bool => "bool".into(),
        Prim::Byte => "byte".into(),
        Prim::Char => "char".into(),
        Prim::Int8 => "int8".into(),
        Prim::UInt8 => "uint8".into(),
        Prim::Int16 => "int16".into(),
        Prim::UInt16 => "uint16".into(),
        Prim::Int32 => "int32".into(),
        Prim::UInt32 => "uint32".into(),
        Prim::Int64 => "int64".into(),
        Prim::UInt64 => "uint64".into(),
        Prim::Float32 => "float32".into(),
        Prim::Float64 => "float64".into(),
        Prim::String(None) => "string".into(),
        Prim::String(Some(n)) => format!("string<={n}"),
        Prim::WString(None) => "wstring".into(),
        Prim::WString(Some(n)) => format!("wstring<={n}"),
    }
}

/// A string value as definition text: double quotes (single ones when
/// the value holds a double quote and no single one), the quote character
/// escaped, as rosidl_adapter and rosmsg read it back.
fn quoted(s: &str) -> String {
    let q = if s.contains('"') && !s.contains('\'') {
        '\''
    } else {
        '"'
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(q);
    for c in s.chars() {
        if c == q {
            out.push('\\');
        }
        out.push(c);
    }
    out.push(q);
    out
}

/// One value as definition text.
fn msg_value(v: &Value) -> String {
    match v {
        Value::String(s) => quoted(s),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(msg_value).collect();
            format!("[{}]", items.join(", "))
        }
        other => other.to_string(),
    }
}

fn shape_suffix(shape: Shape) -> String {
    match shape {
        Shape::Single => String::new(),
        Shape::Array(n) => format!("[{n}]"),
        Shape::Bounded(n) => format!("[<={n}]"),
        Shape::Sequence => "[]".into(),
    }
}

/// One struct's definition text: its fields and constants, one a line,
/// each line ending in a newline (nothing for an empty struct).
pub fn definition(def: &MsgDef) -> String {
    let mut out = String::new();
    for c in &def.constants {
        let _ = writeln!(
            out,
            "{} {}={}",
            msg_prim(c.prim),
            c.name,
            msg_value(&c.value)
        );
    }
    for f in data_fields(def) {
        let ty = match &f.base {
            Base::Prim(p) => msg_prim(*p),
            Base::Nested(n) => n.clone(),
        };
        let _ = write!(out, "{ty}{} {}", shape_suffix(f.shape), f.name);
        if let Some(d) = &f.default {
            let _ = write!(out, " {}", msg_value(d));
        }
        out.push('\n');
    }
    out
}

/// The nested types a struct's fields name, in field order.
fn nested(def: &MsgDef) -> impl Iterator<Item = &str> {
    data_fields(def).filter_map(|f| match &f.base {
        Base::Nested(n) => Some(n.as_str()),
        Base::Prim(_) => None,
    })
}

/// `root`'s full text (any name form): its definition, then each type it
/// nests, directly or not, once: a blank line, [`SEPARATOR`], `MSG:
/// pkg/msg/Type` and its definition. The nested types come in the order
/// rosapi's `stringify_field_types` gives them (a stack: the last field's
/// type first, depth first). At most `limit` bytes (capped at
/// [`MAX_FULL_TEXT_BYTES`]), else [`RenderError::TooLarge`].
pub fn full_text(types: &Registry, root: &str, limit: usize) -> Result<String, RenderError> {
    let limit = limit.min(MAX_FULL_TEXT_BYTES);
    let def = types
        .msg(root)
        .ok_or_else(|| RenderError::Unknown(root.to_owned()))?;
    let too_large = || RenderError::TooLarge {
        type_name: def.name.clone(),
        limit,
    };
    let mut out = definition(def);
    let mut seen: BTreeSet<&str> = BTreeSet::from([def.name.as_str()]);
    let mut stack: Vec<&str> = Vec::new();
    for n in nested(def) {
        if seen.insert(n) {
            stack.push(n);
        }
    }
    while let Some(name) = stack.pop() {
        if out.len() > limit {
            return Err(too_large());
        }
        let dep = types
            .msg(name)
            .ok_or_else(|| RenderError::Unknown(name.to_owned()))?;
        let _ = write!(out, "\n{SEPARATOR}\nMSG: {}\n", dep.name);
        out.push_str(&definition(dep));
        for n in nested(dep) {
            if seen.insert(n) {
                stack.push(n);
            }
        }
    }
    if out.len() > limit {
        return Err(too_large());
    }
    Ok(out)
}

/// One `rosapi_msgs/TypeDef`: a struct's field names, types, array
/// lengths, example values and constants, as rosapi fills them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeDef {
    /// `pkg/Type` (rosapi names a ROS 2 type by its Python module's
    /// package and class: `std_msgs/Header`, `example_interfaces/AddTwoInts_Request`).
    pub type_name: String,
    pub fieldnames: Vec<String>,
    /// A primitive as rosidl's Python `_fields_and_field_types` spells it
    /// (`double`, `boolean`, `octet`, `string<=8`), a nested type as
    /// [`TypeDef::type_name`] (an array's element type; see `fieldarraylen`).
    pub fieldtypes: Vec<String>,
    /// -1: one value; 0: a sequence (bounded or not); n: a fixed array of n.
    pub fieldarraylen: Vec<i64>,
    /// Python's `str()` of the field's default: `[]` for arrays, `{}` for
    /// nested types, else the default value (`0`, `0.0`, `False`, ``).
    pub examples: Vec<String>,
    pub constnames: Vec<String>,
    /// Python's `str()` of each constant's value.
    pub constvalues: Vec<String>,
}

impl TypeDef {
    /// As rosapi's JSON (the `TypeDef` message's fields).
    pub fn to_json(&self) -> Value {
        json!({
            "type": self.type_name,
            "fieldnames": self.fieldnames,
            "fieldtypes": self.fieldtypes,
            "fieldarraylen": self.fieldarraylen,
            "examples": self.examples,
            "constnames": self.constnames,
            "constvalues": self.constvalues,
        })
    }
}

/// `pkg/<kind>/Name` as `pkg/Name`.
pub fn short_name(full: &str) -> String {
    match full.split('/').collect::<Vec<_>>().as_slice() {
        [pkg, _, name] => format!("{pkg}/{name}"),
        _ => full.to_owned(),
    }
}

/// rosidl_generator_py's name of a primitive (`_fields_and_field_types`).
fn idl_prim(p: Prim) -> String {
    match p {
        Prim::Bool => "boolean".into(),
        Prim::Byte => "octet".into(),
        // rosidl_adapter maps .msg char to uint8.
        Prim::Char | Prim::UInt8 => "uint8".into(),
        Prim::Int8 => "int8".into(),
        Prim::Int16 => "int16".into(),
        Prim::UInt16 => "uint16".into(),
        Prim::Int32 => "int32".into(),
        Prim::UInt32 => "uint32".into(),
        Prim::Int64 => "int64".into(),
        Prim::UInt64 => "uint64".into(),
        Prim::Float32 => "float".into(),
        Prim::Float64 => "double".into(),
        Prim::String(None) => "string".into(),
        Prim::String(Some(n)) => format!("string<={n}"),
        Prim::WString(None) => "wstring".into(),
        Prim::WString(Some(n)) => format!("wstring<={n}"),
    }
}

/// Python's `repr`/`str` of a float: shortest round trip, `.0` on whole
/// numbers, exponent form below 1e-4 and from 1e16 (`1e-05`, `1e+16`).
pub fn py_float(f: f64) -> String {
    if !f.is_finite() {
        return if f.is_nan() {
            "nan".into()
        } else if f > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        };
    }
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if f != 0.0 && !(-4..16).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{mantissa}e{sign}{:02}", exp.unsigned_abs());
    }
    let plain = format!("{f}");
    if plain.contains('.') {
        plain
    } else {
        format!("{plain}.0")
    }
}

/// Python's `str()` of a primitive value.
fn py_str(prim: Prim, v: &Value) -> String {
    match (prim, v) {
        (_, Value::Bool(true)) => "True".into(),
        (_, Value::Bool(false)) => "False".into(),
        (Prim::Float32 | Prim::Float64, Value::Number(n)) => py_float(n.as_f64().unwrap_or(0.0)),
        (_, Value::String(s)) => s.clone(),
        (_, other) => other.to_string(),
    }
}

/// The zero value rosidl's Python class starts a primitive field with.
fn py_zero(prim: Prim) -> String {
    match prim {
        Prim::Bool => "False".into(),
        Prim::Float32 | Prim::Float64 => "0.0".into(),
        Prim::String(_) | Prim::WString(_) => String::new(),
        // rosidl_generator_py's octet is a bytes value.
        Prim::Byte => "b'\\x00'".into(),
        _ => "0".into(),
    }
}

/// One struct's [`TypeDef`].
pub fn typedef(def: &MsgDef) -> TypeDef {
    let mut t = TypeDef {
        type_name: short_name(&def.name),
        fieldnames: Vec::new(),
        fieldtypes: Vec::new(),
        fieldarraylen: Vec::new(),
        examples: Vec::new(),
        constnames: Vec::new(),
        constvalues: Vec::new(),
    };
    for f in data_fields(def) {
        t.fieldnames.push(f.name.clone());
        t.fieldtypes.push(match &f.base {
            Base::Prim(p) => idl_prim(*p),
            Base::Nested(n) => short_name(n),
        });
        t.fieldarraylen.push(match f.shape {
            Shape::Single => -1,
            Shape::Array(n) => i64::from(n),
            Shape::Bounded(_) | Shape::Sequence => 0,
        });
        t.examples.push(match (&f.base, f.shape, &f.default) {
            (_, Shape::Array(_) | Shape::Bounded(_) | Shape::Sequence, _) => "[]".into(),
            (Base::Nested(_), _, _) => "{}".into(),
            (Base::Prim(p), Shape::Single, Some(d)) => py_str(*p, d),
            (Base::Prim(p), Shape::Single, None) => py_zero(*p),
        });
    }
    for c in &def.constants {
        t.constnames.push(c.name.clone());
        t.constvalues.push(py_str(c.prim, &c.value));
    }
    t
}

/// The typedefs of struct `root` (any name form) and of every type it
/// nests, each once: depth first in field order, the type itself first,
/// as rosapi's `get_typedef_recursive`.
pub fn typedefs(types: &Registry, root: &str) -> Result<Vec<TypeDef>, RenderError> {
    let def = types
        .msg(root)
        .ok_or_else(|| RenderError::Unknown(root.to_owned()))?;
    let mut out = Vec::new();
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    // rosapi's recursion without recursion: a type is marked when it is
    // listed, and a type's children go on the stack in reverse so its
    // first field's type is listed next (pre-order, field order).
    let mut stack: Vec<&str> = vec![def.name.as_str()];
    while let Some(name) = stack.pop() {
        if !seen.insert(name) {
            continue;
        }
        if out.len() == MAX_TYPEDEFS {
            return Err(RenderError::TooMany {
                type_name: def.name.clone(),
            });
        }
        let d = types
            .msg(name)
            .ok_or_else(|| RenderError::Unknown(name.to_owned()))?;
        out.push(typedef(d));
        let first = stack.len();
        stack.extend(nested(d).filter(|n| !seen.contains(n)));
        stack[first..].reverse();
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Kind;
    use crate::parse;

    fn sep(name: &str) -> String {
        format!("\n{SEPARATOR}\nMSG: {name}\n")
    }

    #[test]
    fn image_is_its_fields_then_header_then_time() {
        let r = Registry::bundled();
        let text = full_text(&r, "sensor_msgs/msg/Image", MAX_FULL_TEXT_BYTES).unwrap();
        let want = format!(
            "std_msgs/msg/Header header\nuint32 height\nuint32 width\nstring encoding\n\
             uint8 is_bigendian\nuint32 step\nuint8[] data\n{}builtin_interfaces/msg/Time stamp\n\
             string frame_id\n{}int32 sec\nuint32 nanosec\n",
            sep("std_msgs/msg/Header"),
            sep("builtin_interfaces/msg/Time")
        );
        assert_eq!(text, want);
        // Every name form finds it.
        assert_eq!(
            full_text(&r, "sensor_msgs/Image", MAX_FULL_TEXT_BYTES).unwrap(),
            want
        );
        assert_eq!(SEPARATOR.len(), 80);
    }

    #[test]
    fn nested_types_come_once_in_rosapis_stack_order() {
        let r = Registry::bundled();
        let text = full_text(&r, "geometry_msgs/msg/PoseStamped", MAX_FULL_TEXT_BYTES).unwrap();
        let msgs: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("MSG: "))
            .collect();
        assert_eq!(
            msgs,
            [
                "geometry_msgs/msg/Pose",
                "geometry_msgs/msg/Quaternion",
                "geometry_msgs/msg/Point",
                "std_msgs/msg/Header",
                "builtin_interfaces/msg/Time"
            ]
        );
        assert!(text.starts_with("std_msgs/msg/Header header\ngeometry_msgs/msg/Pose pose\n\n"));
        // Quaternion keeps its defaults.
        assert!(text.contains("MSG: geometry_msgs/msg/Quaternion\nfloat64 x 0.0\nfloat64 y 0.0\nfloat64 z 0.0\nfloat64 w 1.0\n"), "{text}");
        // A type nested twice (MarkerArray: Header, Time, Duration, ...) once.
        let text = full_text(
            &r,
            "visualization_msgs/msg/MarkerArray",
            MAX_FULL_TEXT_BYTES,
        )
        .unwrap();
        let mut msgs: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("MSG: "))
            .collect();
        let n = msgs.len();
        msgs.sort_unstable();
        msgs.dedup();
        assert_eq!(msgs.len(), n, "{text}");
        assert!(msgs.contains(&"builtin_interfaces/msg/Duration"));
    }

    #[test]
    fn constants_and_defaults_are_kept() {
        let mut r = Registry::bundled();
        r.add(
            "demo_msgs",
            Kind::Msg,
            "Knobs",
            "# a comment\nint32 FOO=-3\nstring GREETING=it's # here\nfloat64 PI=3.14159\nbool YES=true\n\
             float64 x 1.5\nint32[] y [1, 2]\nstring s \"say \\\"hi\\\"\"\nstring<=4[<=2] t ['a', 'b']\n\
             bool b true\nfloat32[3] v\nstd_msgs/Empty e\n",
        )
        .unwrap();
        r.check().unwrap();
        let text = full_text(&r, "demo_msgs/msg/Knobs", MAX_FULL_TEXT_BYTES).unwrap();
        assert_eq!(
            text,
            format!(
                "int32 FOO=-3\nstring GREETING=\"it's # here\"\nfloat64 PI=3.14159\nbool YES=true\n\
                 float64 x 1.5\nint32[] y [1, 2]\nstring s 'say \"hi\"'\nstring<=4[<=2] t [\"a\", \"b\"]\n\
                 bool b true\nfloat32[3] v\nstd_msgs/msg/Empty e\n{}",
                sep("std_msgs/msg/Empty")
            )
        );
        // Read back, the text is the same type.
        let again = parse::parse_msg(
            "demo_msgs",
            "Knobs",
            &definition(r.msg("demo_msgs/Knobs").unwrap()),
        )
        .unwrap();
        assert_eq!(Some(&again), r.msg("demo_msgs/msg/Knobs"));

        let t = typedefs(&r, "demo_msgs/Knobs").unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(
            t[0].to_json(),
            json!({
                "type": "demo_msgs/Knobs",
                "fieldnames": ["x", "y", "s", "t", "b", "v", "e"],
                "fieldtypes": ["double", "int32", "string", "string<=4", "boolean", "float", "std_msgs/Empty"],
                "fieldarraylen": [-1, 0, -1, 0, -1, 3, -1],
                "examples": ["1.5", "[]", "say \"hi\"", "[]", "True", "[]", "{}"],
                "constnames": ["FOO", "GREETING", "PI", "YES"],
                "constvalues": ["-3", "it's # here", "3.14159", "True"],
            })
        );
        // An empty struct has no fields (rosidl's placeholder is not one).
        assert_eq!(t[1].type_name, "std_msgs/Empty");
        assert!(t[1].fieldnames.is_empty());
    }

    #[test]
    fn every_bundled_message_reads_back_as_itself() {
        let r = Registry::bundled();
        let mut n = 0;
        for def in r.msgs() {
            // Only `msg` structs are .msg text (a synthesized struct names
            // `pkg/srv/...` types, which .msg cannot).
            let [pkg, "msg", name] = def.name.split('/').collect::<Vec<_>>()[..] else {
                continue;
            };
            let back = parse::parse_msg(pkg, name, &definition(def))
                .unwrap_or_else(|e| panic!("{}: {e}", def.name));
            assert_eq!(&back, def);
            let text = full_text(&r, &def.name, MAX_FULL_TEXT_BYTES).unwrap();
            assert!(text.len() < 8 * 1024, "{}: {}", def.name, text.len());
            n += 1;
        }
        assert!(n > 150, "{n}");
    }

    #[test]
    fn typedefs_list_the_type_then_what_it_nests_depth_first() {
        let r = Registry::bundled();
        let t = typedefs(&r, "geometry_msgs/msg/PoseStamped").unwrap();
        let names: Vec<&str> = t.iter().map(|t| t.type_name.as_str()).collect();
        assert_eq!(
            names,
            [
                "geometry_msgs/PoseStamped",
                "std_msgs/Header",
                "builtin_interfaces/Time",
                "geometry_msgs/Pose",
                "geometry_msgs/Point",
                "geometry_msgs/Quaternion"
            ]
        );
        assert_eq!(
            t[1].to_json(),
            json!({"type": "std_msgs/Header", "fieldnames": ["stamp", "frame_id"],
                   "fieldtypes": ["builtin_interfaces/Time", "string"], "fieldarraylen": [-1, -1],
                   "examples": ["{}", ""], "constnames": [], "constvalues": []})
        );
        assert_eq!(t[5].examples, ["0.0", "0.0", "0.0", "1.0"]);
        let image = typedefs(&r, "sensor_msgs/Image").unwrap();
        assert_eq!(
            image[0].fieldtypes,
            [
                "std_msgs/Header",
                "uint32",
                "uint32",
                "string",
                "uint8",
                "uint32",
                "uint8"
            ]
        );
        assert_eq!(image[0].fieldarraylen, [-1, -1, -1, -1, -1, -1, 0]);
        assert_eq!(image.len(), 3);
        assert_eq!(
            typedefs(&r, "nope_msgs/msg/Nope"),
            Err(RenderError::Unknown("nope_msgs/msg/Nope".into()))
        );
    }

    #[test]
    fn services_and_actions_by_part() {
        let r = Registry::bundled();
        let part = |p: Part, n: &str| p.struct_name(&r, n).map(str::to_owned);
        assert_eq!(
            part(Part::Request, "example_interfaces/AddTwoInts").as_deref(),
            Some("example_interfaces/srv/AddTwoInts_Request")
        );
        assert_eq!(
            part(Part::Response, "example_interfaces/srv/AddTwoInts").as_deref(),
            Some("example_interfaces/srv/AddTwoInts_Response")
        );
        assert_eq!(
            part(Part::Goal, "example_interfaces/action/Fibonacci").as_deref(),
            Some("example_interfaces/action/Fibonacci_Goal")
        );
        assert_eq!(
            part(Part::Result, "example_interfaces/Fibonacci").as_deref(),
            Some("example_interfaces/action/Fibonacci_Result")
        );
        assert_eq!(
            part(Part::Feedback, "example_interfaces/Fibonacci").as_deref(),
            Some("example_interfaces/action/Fibonacci_Feedback")
        );
        assert_eq!(part(Part::Message, "example_interfaces/Fibonacci"), None);
        assert_eq!(part(Part::Goal, "example_interfaces/AddTwoInts"), None);
        assert_eq!(
            Part::of_rosapi("action_feedback_details"),
            Some(Part::Feedback)
        );

        let req = typedefs(&r, "example_interfaces/srv/AddTwoInts_Request").unwrap();
        assert_eq!(
            req[0].to_json(),
            json!({"type": "example_interfaces/AddTwoInts_Request", "fieldnames": ["a", "b"],
                   "fieldtypes": ["int64", "int64"], "fieldarraylen": [-1, -1], "examples": ["0", "0"],
                   "constnames": [], "constvalues": []})
        );
        let goal = typedefs(&r, "example_interfaces/action/Fibonacci_Goal").unwrap();
        assert_eq!(goal[0].fieldnames, ["order"]);
        // The feedback topic's type names `action` structs in full.
        let text = full_text(
            &r,
            "example_interfaces/action/Fibonacci_FeedbackMessage",
            MAX_FULL_TEXT_BYTES,
        )
        .unwrap();
        assert_eq!(
            text,
            format!(
                "unique_identifier_msgs/msg/UUID goal_id\nexample_interfaces/action/Fibonacci_Feedback feedback\n{}int32[] sequence\n{}uint8[16] uuid\n",
                sep("example_interfaces/action/Fibonacci_Feedback"),
                sep("unique_identifier_msgs/msg/UUID")
            )
        );
        // Constants of a bundled type (action_msgs/GoalStatus).
        let status = typedefs(&r, "action_msgs/msg/GoalStatus").unwrap();
        assert_eq!(status[0].constnames[0], "STATUS_UNKNOWN");
        assert_eq!(status[0].constvalues[0], "0");
        let text = full_text(&r, "action_msgs/msg/GoalStatus", MAX_FULL_TEXT_BYTES).unwrap();
        assert!(text.starts_with("int8 STATUS_UNKNOWN=0\n"), "{text}");
    }

    #[test]
    fn a_learned_type_renders_like_a_defined_one_without_defaults() {
        let mut learned = Registry::bundled();
        learned
            .add_description(&crate::describe::tests::blip())
            .unwrap();
        let text = full_text(&learned, "custom_msgs/msg/Blip", MAX_FULL_TEXT_BYTES).unwrap();
        assert_eq!(
            text,
            format!(
                "int32 a\nstring<=8 tag\ngeometry_msgs/msg/Point[] pts\nfloat64[9] m\n{}float64 x\nfloat64 y\nfloat64 z\n",
                sep("geometry_msgs/msg/Point")
            )
        );
    }

    #[test]
    fn limits_hold() {
        let r = Registry::bundled();
        let e = full_text(&r, "visualization_msgs/msg/MarkerArray", 100).unwrap_err();
        assert_eq!(
            e,
            RenderError::TooLarge {
                type_name: "visualization_msgs/msg/MarkerArray".into(),
                limit: 100
            }
        );
        assert!(e.to_string().contains("100 bytes"));
        assert!(full_text(&r, "std_msgs/msg/String", 11).is_err());
        assert_eq!(
            full_text(&r, "std_msgs/msg/String", 12).unwrap(),
            "string data\n"
        );
        // A chain longer than MAX_TYPEDEFS.
        let mut r = Registry::empty();
        r.add("p", Kind::Msg, "T0", "int32 x\n").unwrap();
        for i in 1..=MAX_TYPEDEFS {
            r.add("p", Kind::Msg, &format!("T{i}"), &format!("T{} a\n", i - 1))
                .unwrap();
        }
        r.check().unwrap();
        let top = format!("p/msg/T{MAX_TYPEDEFS}");
        assert_eq!(
            typedefs(&r, &top).unwrap_err(),
            RenderError::TooMany {
                type_name: top.clone()
            }
        );
        assert_eq!(
            typedefs(&r, &format!("p/msg/T{}", MAX_TYPEDEFS - 1))
                .unwrap()
                .len(),
            MAX_TYPEDEFS
        );
    }

    #[test]
    fn floats_print_as_python_does() {
        for (f, s) in [
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (1.0, "1.0"),
            (1.5, "1.5"),
            (0.1, "0.1"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1.5e-7, "1.5e-07"),
            (123456789.0, "123456789.0"),
            (1e16, "1e+16"),
            (1.2345e300, "1.2345e+300"),
            (123.456, "123.456"),
        ] {
            assert_eq!(py_float(f), s, "{f}");
        }
    }
}
