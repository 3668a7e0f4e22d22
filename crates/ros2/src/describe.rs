//! Types learned from a running node: a `type_description_interfaces`
//! `TypeDescription` (what `~/get_type_description` answers, decoded to
//! JSON by the codec) into [`MsgDef`]s, and the request that asks
//! for one.
//!
//! The description carries every field's type id, capacities and nested
//! type names (REP 2011), which is all the codec needs; default values
//! and constants are not used (a missing field is then zero or empty).
//! Invariant: what is accepted hashes to the type's RIHS01 only if the
//! description is the node's real one; the caller compares the hash with
//! the one the node advertised before trusting it.

use serde_json::Value;

use crate::model::{Base, Field, MsgDef, Prim, Shape, SrvDef, EMPTY_STRUCT_MEMBER};
use crate::parse::{valid_field_name, MAX_FIELDS};

/// The service type a node's `~/get_type_description` has.
pub const SERVICE_TYPE: &str = "type_description_interfaces/srv/GetTypeDescription";

/// Types (the described one and the ones it refers to) taken from one
/// description at most.
pub const MAX_TYPES: usize = 256;

/// The request asking a node for `ty`'s description (`hash` as the node
/// advertised it), without sources: the field list is what is used.
pub fn request(ty: &str, hash: &str) -> Value {
    serde_json::json!({"type_name": ty, "type_hash": hash, "include_type_sources": false})
}

fn prim(id: u64, string_capacity: u32) -> Option<Prim> {
    let bound = (string_capacity > 0).then_some(string_capacity);
    Some(match id {
        2 => Prim::Int8,
        3 => Prim::UInt8,
        4 => Prim::Int16,
        5 => Prim::UInt16,
        6 => Prim::Int32,
        7 => Prim::UInt32,
        8 => Prim::Int64,
        9 => Prim::UInt64,
        10 => Prim::Float32,
        11 => Prim::Float64,
        // IDL char (13) is one byte on the wire, as .msg char.
        13 => Prim::Char,
        15 => Prim::Bool,
        16 => Prim::Byte,
        17 | 21 => Prim::String(bound),
        18 | 22 => Prim::WString(bound),
        _ => return None,
    })
}

fn field(v: &Value) -> Result<Field, String> {
    let name = v["name"].as_str().ok_or("a field without a name")?;
    if !valid_field_name(name) && name != EMPTY_STRUCT_MEMBER {
        return Err(format!("field name {name:?}"));
    }
    let t = &v["type"];
    let id = t["type_id"].as_u64().ok_or("a field without a type id")?;
    let capacity = u32::try_from(t["capacity"].as_u64().unwrap_or(0)).map_err(|_| "capacity")?;
    let string_capacity =
        u32::try_from(t["string_capacity"].as_u64().unwrap_or(0)).map_err(|_| "string capacity")?;
    let (element, shape) = match id {
        0..=47 => (id, Shape::Single),
        48..=95 => (id - 48, Shape::Array(capacity)),
        96..=143 => (id - 96, Shape::Bounded(capacity)),
        144..=191 => (id - 144, Shape::Sequence),
        _ => return Err(format!("field {name}: type id {id}")),
    };
    let base = if element == 1 {
        let nested = t["nested_type_name"].as_str().unwrap_or_default();
        if nested.split('/').count() != 3 {
            return Err(format!("field {name}: nested type {nested:?}"));
        }
        Base::Nested(nested.to_string())
    } else {
        Base::Prim(prim(element, string_capacity).ok_or(format!("field {name}: type id {id}"))?)
    };
    Ok(Field {
        name: name.to_string(),
        base,
        shape,
        default: None,
    })
}

fn individual(v: &Value) -> Result<MsgDef, String> {
    let name = v["type_name"].as_str().ok_or("a type without a name")?;
    let parts: Vec<&str> = name.split('/').collect();
    if parts.len() != 3 || parts.iter().any(|p| p.is_empty()) {
        return Err(format!("type name {name:?}"));
    }
    let fields = v["fields"].as_array().ok_or("a type without fields")?;
    if fields.len() > MAX_FIELDS {
        return Err(format!("{name}: more than {MAX_FIELDS} fields"));
    }
    let fields = fields
        .iter()
        .map(field)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{name}: {e}"))?;
    Ok(MsgDef {
        name: name.to_string(),
        fields,
        constants: Vec::new(),
    })
}

/// The struct types of a `TypeDescription` (the described type first),
/// and, when it describes a service (`pkg/srv/S`), the service.
pub fn types(description: &Value) -> Result<(Vec<MsgDef>, Option<SrvDef>), String> {
    let main = individual(&description["type_description"])?;
    let refs = description["referenced_type_descriptions"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    if refs.len() + 1 > MAX_TYPES {
        return Err(format!("more than {MAX_TYPES} types"));
    }
    let srv = main.name.contains("/srv/").then(|| {
        let n = main.name.clone();
        SrvDef {
            request: format!("{n}_Request"),
            response: format!("{n}_Response"),
            event: format!("{n}_Event"),
            name: n,
        }
    });
    let mut all = vec![main];
    for r in refs {
        all.push(individual(r)?);
    }
    // A service's own description is not a struct anyone sends.
    if srv.is_some() {
        all.remove(0);
    }
    Ok((all, srv))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A description as rosidl writes it, for a type not bundled.
    pub(crate) fn blip() -> Value {
        serde_json::json!({
            "type_description": {"type_name": "custom_msgs/msg/Blip", "fields": [
                {"name": "a", "type": {"type_id": 6, "capacity": 0, "string_capacity": 0, "nested_type_name": ""}, "default_value": ""},
                {"name": "tag", "type": {"type_id": 21, "capacity": 0, "string_capacity": 8, "nested_type_name": ""}, "default_value": ""},
                {"name": "pts", "type": {"type_id": 145, "capacity": 0, "string_capacity": 0, "nested_type_name": "geometry_msgs/msg/Point"}, "default_value": ""},
                {"name": "m", "type": {"type_id": 59, "capacity": 9, "string_capacity": 0, "nested_type_name": ""}, "default_value": ""}
            ]},
            "referenced_type_descriptions": [
                {"type_name": "geometry_msgs/msg/Point", "fields": [
                    {"name": "x", "type": {"type_id": 11, "capacity": 0, "string_capacity": 0, "nested_type_name": ""}, "default_value": ""},
                    {"name": "y", "type": {"type_id": 11, "capacity": 0, "string_capacity": 0, "nested_type_name": ""}, "default_value": ""},
                    {"name": "z", "type": {"type_id": 11, "capacity": 0, "string_capacity": 0, "nested_type_name": ""}, "default_value": ""}
                ]}
            ]
        })
    }

    #[test]
    fn bad_descriptions_are_refused_by_name() {
        let mut bad = blip();
        bad["type_description"]["fields"][0]["type"]["type_id"] = 200.into();
        assert!(types(&bad).unwrap_err().contains("type id 200"));
        let mut bad = blip();
        bad["type_description"]["type_name"] = "nope".into();
        assert!(types(&bad).is_err());
        let mut bad = blip();
        bad["type_description"]["fields"][2]["type"]["nested_type_name"] = "".into();
        assert!(types(&bad).unwrap_err().contains("pts"));
        assert!(types(&Value::Null).is_err());
    }
}
