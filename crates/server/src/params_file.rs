//! `--params FILE`: start-up parameter overrides in the ROS 2 YAML layout
//! (`node: ros__parameters: {name: value}`), as `--params-file` takes it.
//!
//! - A node is named relative (`talker`, the root namespace) or absolute
//!   (`/robot_1/camera`), or through nested namespaces
//!   (`robot_1: camera: ros__parameters:`); `/**` applies to every node.
//! - Nested keys under `ros__parameters` are joined with `.`
//!   (`pid: {p: 1.0}` is parameter `pid.p`).
//! - Values: bool, integer, double (`1.0`, `1e3`, `.inf`), string, and
//!   homogeneous lists of those; an integer list with a double in it is a
//!   double list.
//! - A malformed file is an error naming the line (syntax) or the node and
//!   parameter (a value of no parameter type); the gateway does not start.
//! - The file is read and loaded within the bounds of [`crate::files`]
//!   (size, aliases, expansion, depth).

use std::collections::BTreeMap;

use rosgate_core::params::{Overrides, ParamValue};
use yaml_rust2::Yaml;

/// The key under which a node's parameters sit.
const PARAMS_KEY: &str = "ros__parameters";

/// Reads `path` into overrides; an error names the file and the line or
/// the parameter.
pub fn load(path: &str) -> Result<Overrides, String> {
    let text = crate::files::read("--params", path)?;
    parse(&text).map_err(|e| format!("--params {path}: {e}"))
}

/// Parses the YAML text of a parameter file.
pub fn parse(text: &str) -> Result<Overrides, String> {
    let docs = crate::files::yaml(text)?;
    let mut out = Overrides::new();
    for doc in &docs {
        match doc {
            Yaml::Hash(_) => walk_nodes(doc, &mut Vec::new(), &mut out)?,
            Yaml::Null => {}
            _ => return Err("the top level must map node names to `ros__parameters`".into()),
        }
    }
    Ok(out)
}

/// Walks node names (possibly nested namespaces) down to `ros__parameters`.
fn walk_nodes(y: &Yaml, path: &mut Vec<String>, out: &mut Overrides) -> Result<(), String> {
    let Yaml::Hash(map) = y else {
        return Err(format!(
            "{}: expected a mapping with `{PARAMS_KEY}`",
            node_name(path)
        ));
    };
    for (k, v) in map {
        let key = scalar_key(k)?;
        if key == PARAMS_KEY {
            if path.is_empty() {
                return Err(format!("`{PARAMS_KEY}` needs a node name above it"));
            }
            let node = node_name(path);
            let params = out.entry(node.clone()).or_default();
            walk_params(v, &node, &mut String::new(), params)?;
        } else {
            path.push(key);
            walk_nodes(v, path, out)?;
            path.pop();
        }
    }
    Ok(())
}

/// `/a/b` from the path components (each may hold `/` already).
fn node_name(path: &[String]) -> String {
    let joined: Vec<&str> = path
        .iter()
        .flat_map(|p| p.split('/'))
        .filter(|t| !t.is_empty())
        .collect();
    if joined == ["**"] {
        return "/**".to_string();
    }
    format!("/{}", joined.join("/"))
}

fn scalar_key(k: &Yaml) -> Result<String, String> {
    match k {
        Yaml::String(s) => Ok(s.clone()),
        Yaml::Integer(i) => Ok(i.to_string()),
        Yaml::Boolean(b) => Ok(b.to_string()),
        Yaml::Real(r) => Ok(r.clone()),
        other => Err(format!("a key must be a scalar, not {other:?}")),
    }
}

/// Parameters under `ros__parameters`, nested mappings joined with `.`.
fn walk_params(
    y: &Yaml,
    node: &str,
    prefix: &mut String,
    out: &mut BTreeMap<String, ParamValue>,
) -> Result<(), String> {
    let Yaml::Hash(map) = y else {
        return Err(format!("{node}: `{PARAMS_KEY}` must be a mapping"));
    };
    for (k, v) in map {
        let key = scalar_key(k)?;
        let name = if prefix.is_empty() {
            key
        } else {
            format!("{prefix}.{key}")
        };
        if let Yaml::Hash(_) = v {
            let mut p = name;
            walk_params(v, node, &mut p, out)?;
            continue;
        }
        let value = value(v).map_err(|e| format!("{node}: parameter {name}: {e}"))?;
        out.insert(name, value);
    }
    Ok(())
}

fn value(y: &Yaml) -> Result<ParamValue, String> {
    Ok(match y {
        Yaml::Boolean(b) => ParamValue::Bool(*b),
        Yaml::Integer(i) => ParamValue::Integer(*i),
        Yaml::Real(_) => ParamValue::Double(y.as_f64().ok_or("not a number")?),
        Yaml::String(s) => ParamValue::String(s.clone()),
        Yaml::Array(items) => {
            let values = items.iter().map(value).collect::<Result<Vec<_>, _>>()?;
            array(values)?
        }
        Yaml::Null => return Err("no value (null)".into()),
        other => return Err(format!("not a parameter value: {other:?}")),
    })
}

/// A homogeneous list; integers with doubles make a double list.
fn array(values: Vec<ParamValue>) -> Result<ParamValue, String> {
    let all = |f: fn(&ParamValue) -> bool| values.iter().all(f);
    if values.is_empty() {
        return Ok(ParamValue::StringArray(Vec::new()));
    }
    if all(|v| matches!(v, ParamValue::Bool(_))) {
        return Ok(ParamValue::BoolArray(
            values
                .into_iter()
                .filter_map(|v| match v {
                    ParamValue::Bool(b) => Some(b),
                    _ => None,
                })
                .collect(),
        ));
    }
    if all(|v| matches!(v, ParamValue::Integer(_))) {
        return Ok(ParamValue::IntegerArray(
            values
                .into_iter()
                .filter_map(|v| match v {
                    ParamValue::Integer(i) => Some(i),
                    _ => None,
                })
                .collect(),
        ));
    }
    if all(|v| matches!(v, ParamValue::Integer(_) | ParamValue::Double(_))) {
        return Ok(ParamValue::DoubleArray(
            values
                .into_iter()
                .filter_map(|v| match v {
                    ParamValue::Integer(i) => Some(i as f64),
                    ParamValue::Double(d) => Some(d),
                    _ => None,
                })
                .collect(),
        ));
    }
    if all(|v| matches!(v, ParamValue::String(_))) {
        return Ok(ParamValue::StringArray(
            values
                .into_iter()
                .filter_map(|v| match v {
                    ParamValue::String(s) => Some(s),
                    _ => None,
                })
                .collect(),
        ));
    }
    Err("a list must hold bools, numbers or strings, all of one kind".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ros2_layout() {
        let o = parse(
            "talker:\n  ros__parameters:\n    max_vel: 1.2\n    rate: 10\n    name: t\n    on: true\n    pid:\n      p: 1.0\n      gains: [1, 2.5]\n/robot_1/camera:\n  ros__parameters:\n    fps: 30\nrobot_2:\n  camera:\n    ros__parameters:\n      fps: 15\n/**:\n  ros__parameters:\n    use_sim_time: false\n",
        )
        .expect("valid");
        let t = &o["/talker"];
        assert_eq!(t["max_vel"], ParamValue::Double(1.2));
        assert_eq!(t["rate"], ParamValue::Integer(10));
        assert_eq!(t["name"], ParamValue::String("t".into()));
        assert_eq!(t["on"], ParamValue::Bool(true));
        assert_eq!(t["pid.p"], ParamValue::Double(1.0));
        assert_eq!(t["pid.gains"], ParamValue::DoubleArray(vec![1.0, 2.5]));
        assert_eq!(o["/robot_1/camera"]["fps"], ParamValue::Integer(30));
        assert_eq!(o["/robot_2/camera"]["fps"], ParamValue::Integer(15));
        assert_eq!(o["/**"]["use_sim_time"], ParamValue::Bool(false));
    }

    #[test]
    fn errors_name_the_line_or_the_parameter() {
        let e = parse("talker:\n  ros__parameters:\n    a: [1, 2\n").expect_err("syntax");
        assert!(e.contains("line "), "{e}");
        let e = parse("talker:\n  ros__parameters:\n    a: [1, x]\n").expect_err("mixed");
        assert!(e.contains("/talker") && e.contains("parameter a"), "{e}");
        let e = parse("ros__parameters:\n  a: 1\n").expect_err("no node");
        assert!(e.contains("node name"), "{e}");
        let e = parse("- 1\n").expect_err("not a map");
        assert!(e.contains("top level"), "{e}");
    }
}
