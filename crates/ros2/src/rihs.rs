//! RIHS01 type hashes (REP 2011), byte for byte as rosidl computes them, so
//! rosgate can announce types that real ROS 2 nodes accept as their own.
//!
//! Owns: the mapping from the model to rosidl's `FieldType` (type ids,
//! capacities), the synthetic service/action descriptions, and the
//! canonical JSON that is hashed.
//! Invariants:
//! - the JSON is Python's `json.dumps(..., ensure_ascii=True,
//!   separators=(", ", ": "))` of rosidl's description with the keys in
//!   rosidl's order and `default_value` removed; a single byte of difference
//!   changes the hash, so the tests compare with every hash rosidl published;
//! - referenced types are the transitive closure of nested references
//!   (without the type itself), sorted bytewise and deduplicated;
//! - a type whose closure is incomplete has no hash (`None`), never a wrong
//!   one; cycles terminate (the closure is a set).

use std::collections::BTreeSet;
use std::fmt::Write as _;

use sha2::{Digest, Sha256};

use crate::model::{ActionDef, Base, MsgDef, Prim, Shape, SrvDef};

/// The prefix of every hash string: `RIHS01_` + 64 lowercase hex digits.
pub const PREFIX: &str = "RIHS01_";

/// One member as rosidl's `type_description_interfaces/msg/Field` sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Member<'a> {
    pub name: &'a str,
    pub type_id: u8,
    pub capacity: u32,
    pub string_capacity: u32,
    /// Full name for nested types, `""` otherwise.
    pub nested_type_name: &'a str,
}

/// `type_description_interfaces/msg/FieldType` ids.
const NESTED_TYPE: u8 = 1;
const ARRAY_OFFSET: u8 = 48;
const BOUNDED_SEQUENCE_OFFSET: u8 = 96;
const UNBOUNDED_SEQUENCE_OFFSET: u8 = 144;

fn prim_id(prim: Prim) -> u8 {
    match prim {
        Prim::Int8 => 2,
        // `.msg` `char` is uint8 in rosidl's IDL mapping, not IDL char (13).
        Prim::UInt8 | Prim::Char => 3,
        Prim::Int16 => 4,
        Prim::UInt16 => 5,
        Prim::Int32 => 6,
        Prim::UInt32 => 7,
        Prim::Int64 => 8,
        Prim::UInt64 => 9,
        Prim::Float32 => 10,
        Prim::Float64 => 11,
        Prim::Bool => 15,
        // `.msg` `byte` is IDL octet.
        Prim::Byte => 16,
        Prim::String(None) => 17,
        Prim::WString(None) => 18,
        Prim::String(Some(_)) => 21,
        Prim::WString(Some(_)) => 22,
    }
}

/// rosidl's `type_id` of an element type in a shape.
pub fn type_id(base: &Base, shape: Shape) -> u8 {
    let element = match base {
        Base::Prim(p) => prim_id(*p),
        Base::Nested(_) => NESTED_TYPE,
    };
    element
        + match shape {
            Shape::Single => 0,
            Shape::Array(_) => ARRAY_OFFSET,
            Shape::Bounded(_) => BOUNDED_SEQUENCE_OFFSET,
            Shape::Sequence => UNBOUNDED_SEQUENCE_OFFSET,
        }
}

/// The members of a struct type.
pub fn members(def: &MsgDef) -> Vec<Member<'_>> {
    def.fields
        .iter()
        .map(|f| Member {
            name: &f.name,
            type_id: type_id(&f.base, f.shape),
            capacity: match f.shape {
                Shape::Array(n) | Shape::Bounded(n) => n,
                Shape::Single | Shape::Sequence => 0,
            },
            string_capacity: match f.base {
                Base::Prim(Prim::String(Some(n)) | Prim::WString(Some(n))) => n,
                _ => 0,
            },
            nested_type_name: match &f.base {
                Base::Nested(n) => n,
                Base::Prim(_) => "",
            },
        })
        .collect()
}

fn nested<'a>(name: &'static str, type_name: &'a str) -> Member<'a> {
    Member {
        name,
        type_id: NESTED_TYPE,
        capacity: 0,
        string_capacity: 0,
        nested_type_name: type_name,
    }
}

/// The description rosidl hashes for a service type (`pkg/srv/S`, or an
/// action's `_SendGoal`/`_GetResult`): its three structs as members.
pub fn service_members(srv: &SrvDef) -> Vec<Member<'_>> {
    vec![
        nested("request_message", &srv.request),
        nested("response_message", &srv.response),
        nested("event_message", &srv.event),
    ]
}

/// The description rosidl hashes for an action type (`pkg/action/A`).
pub fn action_members(action: &ActionDef) -> Vec<Member<'_>> {
    vec![
        nested("goal", &action.goal),
        nested("result", &action.result),
        nested("feedback", &action.feedback),
        nested("send_goal_service", &action.send_goal),
        nested("get_result_service", &action.get_result),
        nested("feedback_message", &action.feedback_message),
    ]
}

/// The canonical JSON of `root`'s full description, or `None` if `root` or
/// a type it refers to is unknown to `lookup`.
pub fn canonical_json<'a>(
    root: &str,
    lookup: impl Fn(&str) -> Option<Vec<Member<'a>>>,
) -> Option<String> {
    let root_members = lookup(root)?;
    let mut referenced: BTreeSet<&'a str> = BTreeSet::new();
    let mut stack: Vec<&'a str> = root_members
        .iter()
        .map(|m| m.nested_type_name)
        .filter(|n| !n.is_empty())
        .collect();
    let mut described: Vec<(&'a str, Vec<Member<'a>>)> = Vec::new();
    while let Some(name) = stack.pop() {
        if !referenced.insert(name) {
            continue;
        }
        let ms = lookup(name)?;
        stack.extend(
            ms.iter()
                .map(|m| m.nested_type_name)
                .filter(|n| !n.is_empty()),
        );
        described.push((name, ms));
    }
    // rosidl excludes the type itself even when a cycle leads back to it.
    described.retain(|(name, _)| *name != root);
    described.sort_by(|a, b| a.0.cmp(b.0));

    let mut out = String::with_capacity(256 * (1 + described.len()));
    out.push_str("{\"type_description\": ");
    write_type(&mut out, root, &root_members);
    out.push_str(", \"referenced_type_descriptions\": [");
    for (i, (name, ms)) in described.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        write_type(&mut out, name, ms);
    }
    out.push_str("]}");
    Some(out)
}

/// `RIHS01_<sha256 hex>` of a canonical JSON text.
pub fn hash_json(json: &str) -> String {
    let digest = Sha256::digest(json.as_bytes());
    let mut out = String::with_capacity(PREFIX.len() + 64);
    out.push_str(PREFIX);
    for b in digest {
        // Writing to a String cannot fail.
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// The RIHS01 hash of `root`, or `None` if its closure is incomplete.
pub fn rihs01<'a>(root: &str, lookup: impl Fn(&str) -> Option<Vec<Member<'a>>>) -> Option<String> {
    canonical_json(root, lookup).map(|json| hash_json(&json))
}

fn write_type(out: &mut String, name: &str, members: &[Member<'_>]) {
    out.push_str("{\"type_name\": ");
    write_str(out, name);
    out.push_str(", \"fields\": [");
    for (i, m) in members.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str("{\"name\": ");
        write_str(out, m.name);
        let _ = write!(
            out,
            ", \"type\": {{\"type_id\": {}, \"capacity\": {}, \"string_capacity\": {}, \"nested_type_name\": ",
            m.type_id, m.capacity, m.string_capacity
        );
        write_str(out, m.nested_type_name);
        out.push_str("}}");
    }
    out.push_str("]}");
}

/// A JSON string as Python writes it with `ensure_ascii=True`: everything
/// outside printable ASCII as `\uXXXX` (UTF-16 units), short escapes for
/// the usual control characters.
fn write_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            _ => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_ascii_escaping() {
        let mut s = String::new();
        write_str(&mut s, "a\"\\\n\u{7f}é😀");
        assert_eq!(s, r#""a\"\\\n\u007f\u00e9\ud83d\ude00""#);
    }

    #[test]
    fn type_ids_follow_rosidl() {
        let n = Base::Nested("p/msg/T".to_owned());
        assert_eq!(type_id(&Base::Prim(Prim::Int32), Shape::Sequence), 150);
        assert_eq!(type_id(&Base::Prim(Prim::Float64), Shape::Array(9)), 59);
        assert_eq!(type_id(&Base::Prim(Prim::UInt8), Shape::Sequence), 147);
        assert_eq!(type_id(&Base::Prim(Prim::Char), Shape::Array(16)), 51);
        assert_eq!(
            type_id(&Base::Prim(Prim::String(None)), Shape::Sequence),
            161
        );
        assert_eq!(type_id(&n, Shape::Sequence), 145);
        assert_eq!(type_id(&n, Shape::Bounded(1)), 97);
        assert_eq!(
            type_id(&Base::Prim(Prim::String(Some(22))), Shape::Single),
            21
        );
        assert_eq!(
            type_id(&Base::Prim(Prim::String(Some(5))), Shape::Bounded(10)),
            117
        );
        assert_eq!(type_id(&Base::Prim(Prim::Byte), Shape::Single), 16);
    }

    #[test]
    fn missing_reference_has_no_hash() {
        let def = crate::parse::parse_msg("p", "T", "Missing m\n").unwrap();
        let lookup = |n: &str| (n == def.name).then(|| members(&def));
        assert_eq!(rihs01("p/msg/T", lookup), None);
    }
}
