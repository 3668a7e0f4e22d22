//! `rosgate param list|get|set|dump`, through the node parameter services
//! (`<node>/list_parameters`, `<node>/get_parameters`) and rosapi
//! (`get_param_names`, `get_param`, `set_param`).

use rosgate_core::params::ParamValue;
use serde_json::value::RawValue;

use super::args::{absolute, Args};
use super::client::{json_quote, Client, Frame};
use super::topic::{string, strings};
use super::{input, output, print, Ctx, Error};

pub const COMMANDS: &[(&str, &str)] = &[
    ("list", "list the parameters of a node, or of every node"),
    ("get", "print a parameter's value and type"),
    ("set", "set a parameter"),
    ("dump", "print a node's parameters as a --params file"),
];

pub fn help(cmd: &str) -> Option<&'static str> {
    Some(match cmd {
        "list" => {
            "\
rosgate param list - list parameter names

USAGE:
    rosgate param list [NODE]

With NODE, its parameters (<node>/list_parameters); without, every node's
(rosapi get_param_names), each under its node, and the global parameters
(held by the gateway, attached to no node) under `(global):`.
"
        }
        "get" => {
            "\
rosgate param get - print a parameter's value and type

USAGE:
    rosgate param get NODE NAME [--hide-type]

Prints e.g. `Double value is: 0.5`. A parameter that is not set exits 1.

OPTIONS:
    --hide-type         print only the value (JSON)
"
        }
        "set" => {
            "\
rosgate param set - set a parameter (<node>/set_parameters)

USAGE:
    rosgate param set NODE NAME VALUE

VALUE is YAML or JSON, typed as ROS 2 types it: `1` integer, `1.0` double,
`true` bool, `hello` string, `[1, 2]` integer array, `'[1.5, 2]'` double
array. As `ros2 param set`, it calls the node's own set_parameters service,
wherever the node is (a client of this gateway, another gateway's node, a
ROS 2 node): the owner's rules (read-only, type, range) and validation
apply; a refusal prints the node's reason and exits 1. A node without
parameter services (nobody owns it) gets the value held by the gateway
(rosapi set_param).
"
        }
        "dump" => {
            "\
rosgate param dump - print a node's parameters as YAML

USAGE:
    rosgate param dump NODE

The ROS 2 layout (`node: ros__parameters: ...`, dotted names nested), which
`rosgate --params FILE` loads: `rosgate param dump /ctl > ctl.yaml`.
"
        }
        _ => return None,
    })
}

pub fn run(cmd: &str, mut a: Args, ctx: &Ctx) -> Result<(), Error> {
    match cmd {
        "list" => {
            let p = a.finish(&[], 1)?;
            list(ctx, p.first().map(|n| absolute(n)))
        }
        "get" => {
            let hide = a.flag("--hide-type");
            let p = a.finish(&["NODE", "NAME"], 0)?;
            get(ctx, &absolute(&p[0]), &p[1], hide)
        }
        "set" => {
            let p = a.finish(&["NODE", "NAME", "VALUE"], 0)?;
            let value = input::to_json(&p[2]).map_err(|e| Error::Usage(format!("VALUE: {e}")))?;
            set(ctx, &absolute(&p[0]), &p[1], &value)
        }
        "dump" => {
            let p = a.finish(&["NODE"], 0)?;
            dump(ctx, &absolute(&p[0]))
        }
        _ => Err(Error::Usage(format!("unknown command {cmd:?}"))),
    }
}

/// The node's parameter names, sorted; none when it has no parameter
/// services (no parameters) but exists; an unknown node is a failure.
fn names(c: &mut Client, node: &str) -> Result<Vec<String>, Error> {
    match c.call(&format!("{node}/list_parameters"), "{}") {
        Ok(v) => {
            let result = Frame::parse(v.as_bytes())
                .and_then(|f| f.raw("result").map(str::to_string))
                .unwrap_or_default();
            let mut names = strings(&result, "names");
            names.sort();
            Ok(names)
        }
        Err(Error::Failed(_)) => {
            // No parameter services: a node without parameters, or none.
            let nodes = strings(
                &c.call("/rosapi/nodes", "{\"include_hidden\":true}")?,
                "nodes",
            );
            if nodes.iter().any(|n| n == node) {
                Ok(Vec::new())
            } else {
                Err(Error::Failed(format!("node {node} not found")))
            }
        }
        Err(e) => Err(e),
    }
}

fn list(ctx: &Ctx, node: Option<String>) -> Result<(), Error> {
    let mut c = ctx.connect()?;
    let mut out = String::new();
    match node {
        Some(node) => {
            for n in names(&mut c, &node)? {
                out.push_str(&format!("  {n}\n"));
            }
        }
        None => {
            let all = strings(&c.call("/rosapi/get_param_names", "{}")?, "names");
            let mut global = Vec::new();
            let mut current: Option<&str> = None;
            for full in &all {
                match full.rsplit_once(':') {
                    Some((node, name)) => {
                        if current != Some(node) {
                            out.push_str(&format!("{node}:\n"));
                            current = Some(node);
                        }
                        out.push_str(&format!("  {name}\n"));
                    }
                    None => global.push(full),
                }
            }
            if !global.is_empty() {
                out.push_str("(global):\n");
                for g in global {
                    out.push_str(&format!("  {g}\n"));
                }
            }
        }
    }
    c.close();
    print(&out)
}

/// The `rcl_interfaces/msg/ParameterValue`s of `names` (raw JSON each).
fn values(c: &mut Client, node: &str, names: &[String]) -> Result<Vec<String>, Error> {
    let list: Vec<String> = names.iter().map(|n| json_quote(n)).collect();
    let v = c.call(
        &format!("{node}/get_parameters"),
        &format!("{{\"names\":[{}]}}", list.join(",")),
    )?;
    let raw = Frame::parse(v.as_bytes())
        .and_then(|f| f.raw("values").map(str::to_string))
        .unwrap_or_else(|| "[]".into());
    let items: Vec<&RawValue> = serde_json::from_str(&raw).unwrap_or_default();
    Ok(items.iter().map(|r| r.get().to_string()).collect())
}

/// A ParameterValue as (type code, plain JSON value).
fn typed(pv: &str) -> (u8, String) {
    let Some(f) = Frame::parse(pv.as_bytes()) else {
        return (0, "null".into());
    };
    let ty = f
        .raw("type")
        .and_then(|t| t.parse::<u8>().ok())
        .unwrap_or(0);
    let field = match ty {
        1 => "bool_value",
        2 => "integer_value",
        3 => "double_value",
        4 => "string_value",
        5 => "byte_array_value",
        6 => "bool_array_value",
        7 => "integer_array_value",
        8 => "double_array_value",
        9 => "string_array_value",
        _ => return (0, "null".into()),
    };
    let raw = f.raw(field).unwrap_or("null");
    let value = match ty {
        3 => double(raw),
        8 => {
            let items: Vec<&RawValue> = serde_json::from_str(raw).unwrap_or_default();
            let items: Vec<String> = items.iter().map(|r| double(r.get())).collect();
            format!("[{}]", items.join(","))
        }
        _ => raw.to_string(),
    };
    (ty, value)
}

/// A double's JSON with a fraction (`2` -> `2.0`), so it reads back as one.
fn double(raw: &str) -> String {
    if raw.contains(['.', 'e', 'E']) || raw == "null" {
        raw.to_string()
    } else {
        format!("{raw}.0")
    }
}

fn get(ctx: &Ctx, node: &str, name: &str, hide: bool) -> Result<(), Error> {
    let mut c = ctx.connect()?;
    let answer = match values(&mut c, node, &[name.to_string()]) {
        Ok(v) => v.into_iter().next(),
        Err(Error::Failed(_)) => {
            // No parameter services for that node: rosapi says why.
            let v = c.call(
                "/rosapi/get_param",
                &format!("{{\"name\":{}}}", json_quote(&format!("{node}:{name}"))),
            )?;
            let why = string(&v, "reason");
            if !why.is_empty() {
                c.close();
                return Err(Error::Failed(why));
            }
            None
        }
        Err(e) => return Err(e),
    };
    c.close();
    let (ty, value) = answer.as_deref().map(typed).unwrap_or((0, String::new()));
    let kind = match ty {
        1 => "Boolean value is",
        2 => "Integer value is",
        3 => "Double value is",
        4 => "String value is",
        5 => "Byte values are",
        6 => "Boolean values are",
        7 => "Integer values are",
        8 => "Double values are",
        9 => "String values are",
        _ => return Err(Error::Failed(format!("parameter {node}:{name} is not set"))),
    };
    let shown = if ty == 4 {
        string(&format!("{{\"v\":{value}}}"), "v")
    } else {
        value
    };
    if hide {
        print(&format!("{shown}\n"))
    } else {
        print(&format!("{kind}: {shown}\n"))
    }
}

/// As `ros2 param set` does: the node's own `set_parameters` service,
/// wherever the node is (a client of this gateway, another gateway's, a
/// ROS 2 node), so its owner's rules and validation decide; the node's
/// answer is printed and a refusal exits 1. A node without parameter
/// services (nobody owns it) gets the value held by the gateway, through
/// rosapi `set_param`.
fn set(ctx: &Ctx, node: &str, name: &str, value: &str) -> Result<(), Error> {
    let pv = serde_json::from_str::<serde_json::Value>(value)
        .map_err(|e| e.to_string())
        .and_then(|v| ParamValue::from_json(&v))
        .map_err(|e| Error::Usage(format!("VALUE: {e}")))?;
    let mut c = ctx.connect()?;
    let args = format!(
        "{{\"parameters\":[{{\"name\":{},\"value\":{}}}]}}",
        json_quote(name),
        pv.to_parameter_value()
    );
    let answer = match c.call(&format!("{node}/set_parameters"), &args) {
        Err(Error::Failed(why)) if why.starts_with("no provider for service") => {
            return set_held(c, node, name, value);
        }
        other => other,
    };
    c.close();
    let v = answer.map_err(|e| match e {
        Error::Failed(why) => Error::Failed(format!("Setting parameter failed: {why}")),
        other => other,
    })?;
    let results: serde_json::Value = serde_json::from_str(&v).unwrap_or_default();
    let first = &results["results"][0];
    match first["successful"].as_bool() {
        Some(true) => print("Set parameter successful\n"),
        Some(false) => Err(Error::Failed(format!(
            "Setting parameter failed: {}",
            first["reason"].as_str().unwrap_or("")
        ))),
        None => Err(Error::Failed(format!(
            "Setting parameter failed: the node answered without a result: {v}"
        ))),
    }
}

/// rosapi `set_param`: the gateway's own rules (a parameter of a node
/// nobody owns is held by the gateway).
fn set_held(mut c: Client, node: &str, name: &str, value: &str) -> Result<(), Error> {
    let args = format!(
        "{{\"name\":{},\"value\":{}}}",
        json_quote(&format!("{node}:{name}")),
        json_quote(value)
    );
    let answer = c.call("/rosapi/set_param", &args);
    c.close();
    let v = answer.map_err(|e| match e {
        Error::Failed(why) => Error::Failed(format!("Setting parameter failed: {why}")),
        other => other,
    })?;
    let ok = Frame::parse(v.as_bytes()).and_then(|f| f.raw("successful").map(str::to_string));
    if ok.as_deref() == Some("false") {
        return Err(Error::Failed(format!(
            "Setting parameter failed: {}",
            string(&v, "reason")
        )));
    }
    print("Set parameter successful\n")
}

/// Dotted names nested as `--params` reads them back: `pid.p` under `pid:`.
#[derive(Debug, Default)]
struct Tree(Vec<(String, Entry)>);

#[derive(Debug)]
enum Entry {
    Leaf(String),
    Branch(Tree),
}

impl Tree {
    /// Inserts `name` (sorted order: `a` before `a.b`). Where a prefix is
    /// already a parameter itself, the rest stays one dotted key.
    fn insert(&mut self, name: &str, value: String) {
        if let Some((head, rest)) = name.split_once('.') {
            match self.0.iter_mut().find(|(k, _)| k == head) {
                Some((_, Entry::Branch(t))) => return t.insert(rest, value),
                Some((_, Entry::Leaf(_))) => {}
                None => {
                    let mut t = Tree::default();
                    t.insert(rest, value);
                    self.0.push((head.to_string(), Entry::Branch(t)));
                    return;
                }
            }
        }
        self.0.push((name.to_string(), Entry::Leaf(value)));
    }

    fn json(&self) -> String {
        let members: Vec<String> = self
            .0
            .iter()
            .map(|(k, e)| {
                let v = match e {
                    Entry::Leaf(v) => v.clone(),
                    Entry::Branch(t) => t.json(),
                };
                format!("{}:{v}", json_quote(k))
            })
            .collect();
        format!("{{{}}}", members.join(","))
    }
}

fn dump(ctx: &Ctx, node: &str) -> Result<(), Error> {
    let mut c = ctx.connect()?;
    let names = names(&mut c, node)?;
    let vals = if names.is_empty() {
        Vec::new()
    } else {
        values(&mut c, node, &names)?
    };
    c.close();
    let mut tree = Tree::default();
    for (name, pv) in names.iter().zip(vals) {
        let (ty, value) = typed(&pv);
        if ty == 0 || value == "null" {
            eprintln!("rosgate param dump: skipping {name}: no value a parameter file can hold");
            continue;
        }
        tree.insert(name, value);
    }
    let doc = format!(
        "{{{}:{{\"ros__parameters\":{}}}}}",
        json_quote(node),
        tree.json()
    );
    print(&output::yaml(&doc, 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dotted_names_nest_and_read_back() {
        let mut t = Tree::default();
        for (n, v) in [
            ("a", "1"),
            ("a.b", "2"),
            ("pid.d", "0.5"),
            ("pid.i.max", "3.0"),
            ("pid.p", "[1,2]"),
            ("s", "\"yes\""),
        ] {
            t.insert(n, v.to_string());
        }
        let doc = format!("{{\"/ctl\":{{\"ros__parameters\":{}}}}}", t.json());
        let text = output::yaml(&doc, 0);
        assert_eq!(
            text,
            "/ctl:\n  ros__parameters:\n    a: 1\n    a.b: 2\n    pid:\n      d: 0.5\n      i:\n        max: 3.0\n      p:\n      - 1\n      - 2\n    s: 'yes'\n"
        );
        let loaded = crate::params_file::parse(&text).unwrap();
        let p = &loaded["/ctl"];
        let names: Vec<&String> = p.keys().collect();
        assert_eq!(names, ["a", "a.b", "pid.d", "pid.i.max", "pid.p", "s"]);
        assert_eq!(p["pid.i.max"].type_name(), "double");
        assert_eq!(p["s"].type_name(), "string");
    }

    #[test]
    fn parameter_values() {
        let pv = r#"{"type":3,"double_value":2,"integer_value":0}"#;
        assert_eq!(typed(pv), (3, "2.0".into()));
        let pv = r#"{"type":8,"double_array_value":[1,2.5]}"#;
        assert_eq!(typed(pv), (8, "[1.0,2.5]".into()));
        assert_eq!(typed(r#"{"type":0}"#).0, 0);
    }
}
