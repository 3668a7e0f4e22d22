//! Output formatting: JSON values printed as block YAML in the layout of
//! `ros2 topic echo` (PyYAML's block style: nested mappings indented by
//! two, sequence items `- ` at their key's indentation, `[]`/`{}` when
//! empty, strings quoted only when they would read back as something
//! else), plus the small formats of `hz`, `bw` and goal statuses.
//!
//! The printer walks the JSON text without building a tree: objects are
//! split into members by the wire crate's scanner (so member order is the
//! sender's, and numbers are printed exactly as sent), arrays into elements
//! by serde_json's `RawValue`.

use std::borrow::Cow;

use rosgate_wire::decode::json_str;
use rosgate_wire::encode::json_string;
use rosgate_wire::scan;
use rosgate_wire::Raw;
use serde_json::value::RawValue;

/// One JSON value, one level deep.
enum Node<'a> {
    Map(Vec<(Cow<'a, str>, &'a str)>),
    Seq(Vec<&'a str>),
    Str(Cow<'a, str>),
    /// A number, `true`, `false` or `null`, as written.
    Atom(&'a str),
}

fn node(raw: &str) -> Node<'_> {
    let t = raw.trim();
    match t.as_bytes().first() {
        Some(b'{') => {
            let mut members = Vec::new();
            let ok = scan::scan_object(t, usize::MAX, |m| {
                let key = if m.key_escaped {
                    serde_json::from_str::<String>(&format!("\"{}\"", m.key))
                        .map(Cow::Owned)
                        .unwrap_or(Cow::Borrowed(m.key))
                } else {
                    Cow::Borrowed(m.key)
                };
                members.push((key, m.value));
            })
            .is_ok();
            if ok {
                Node::Map(members)
            } else {
                Node::Atom(t)
            }
        }
        Some(b'[') => match serde_json::from_str::<Vec<&RawValue>>(t) {
            Ok(items) => Node::Seq(items.into_iter().map(RawValue::get).collect()),
            Err(_) => Node::Atom(t),
        },
        Some(b'"') => match json_str(Raw::from_valid_json(t)) {
            Some(s) => Node::Str(s),
            None => Node::Atom(t),
        },
        _ => Node::Atom(t),
    }
}

/// `json` (one valid JSON value) as block YAML, every line indented by
/// `indent` spaces and ending with `\n`.
pub fn yaml(json: &str, indent: usize) -> String {
    let mut out = String::new();
    let pad = " ".repeat(indent);
    match node(json) {
        Node::Map(m) if !m.is_empty() => map(&mut out, &m, indent, false),
        Node::Seq(s) if !s.is_empty() => seq(&mut out, &s, indent, false),
        other => {
            out.push_str(&pad);
            out.push_str(&inline(&other));
            out.push('\n');
        }
    }
    out
}

/// A mapping's entries; with `hanging`, the first one continues the current
/// line (after a `- `).
fn map(out: &mut String, entries: &[(Cow<'_, str>, &str)], indent: usize, hanging: bool) {
    for (i, (k, v)) in entries.iter().enumerate() {
        if !(hanging && i == 0) {
            push_pad(out, indent);
        }
        out.push_str(&scalar_text(k));
        out.push(':');
        match node(v) {
            Node::Map(m) if !m.is_empty() => {
                out.push('\n');
                map(out, &m, indent + 2, false);
            }
            Node::Seq(s) if !s.is_empty() => {
                out.push('\n');
                seq(out, &s, indent, false);
            }
            other => {
                out.push(' ');
                out.push_str(&inline(&other));
                out.push('\n');
            }
        }
    }
}

/// A sequence's items (`- x`); with `hanging`, the first continues the line.
fn seq(out: &mut String, items: &[&str], indent: usize, hanging: bool) {
    for (i, item) in items.iter().enumerate() {
        if !(hanging && i == 0) {
            push_pad(out, indent);
        }
        out.push_str("- ");
        match node(item) {
            Node::Map(m) if !m.is_empty() => map(out, &m, indent + 2, true),
            Node::Seq(s) if !s.is_empty() => seq(out, &s, indent + 2, true),
            other => {
                out.push_str(&inline(&other));
                out.push('\n');
            }
        }
    }
}

fn push_pad(out: &mut String, n: usize) {
    out.extend(std::iter::repeat_n(' ', n));
}

/// An empty collection or a scalar, on one line.
fn inline(n: &Node<'_>) -> String {
    match n {
        Node::Map(_) => "{}".into(),
        Node::Seq(_) => "[]".into(),
        Node::Str(s) => scalar_text(s).into_owned(),
        Node::Atom(a) => (*a).to_string(),
    }
}

/// A string as a YAML scalar: plain when it reads back as the same string
/// (in YAML 1.1 and 1.2), single-quoted when printable, else double-quoted
/// with JSON's escapes (which YAML's double-quoted style shares).
pub fn scalar_text(s: &str) -> Cow<'_, str> {
    if plain_ok(s) {
        return Cow::Borrowed(s);
    }
    if s.chars().all(|c| !c.is_control()) {
        return Cow::Owned(format!("'{}'", s.replace('\'', "''")));
    }
    let mut out = Vec::with_capacity(s.len() + 2);
    json_string(&mut out, s);
    Cow::Owned(String::from_utf8_lossy(&out).into_owned())
}

fn plain_ok(s: &str) -> bool {
    let Some(first) = s.chars().next() else {
        return false;
    };
    if s.starts_with(' ') || s.ends_with(' ') || s.ends_with(':') {
        return false;
    }
    if "-?:,[]{}#&*!|>'\"%@`".contains(first) {
        return false;
    }
    if s.chars().any(|c| c.is_control() || c == '\u{feff}') || s.contains(": ") || s.contains(" #")
    {
        return false;
    }
    // Would read back as null, a bool or a number (YAML 1.2, or PyYAML's
    // YAML 1.1, which leaves `y` and `n` alone: `x`, `y`, `z` stay plain).
    let lower = s.to_ascii_lowercase();
    if matches!(
        lower.as_str(),
        "~" | "null" | "true" | "false" | "yes" | "no" | "on" | "off"
    ) {
        return false;
    }
    if first.is_ascii_digit() || first == '.' || first == '+' {
        return false;
    }
    !(lower.parse::<f64>().is_ok() || lower == "inf" || lower == "nan")
}

/// Bytes as `ros2 topic bw` shows them (B, KB, MB; powers of 1000).
pub fn bytes(n: f64) -> String {
    if n < 1000.0 {
        format!("{n:.0} B")
    } else if n < 1_000_000.0 {
        format!("{:.2} KB", n / 1000.0)
    } else {
        format!("{:.2} MB", n / 1_000_000.0)
    }
}

/// An action goal's final status (`action_msgs/msg/GoalStatus`).
pub fn goal_status(code: &str) -> &'static str {
    match code {
        "1" => "ACCEPTED",
        "2" => "EXECUTING",
        "3" => "CANCELING",
        "4" => "SUCCEEDED",
        "5" => "CANCELED",
        "6" => "ABORTED",
        _ => "UNKNOWN",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ros2_echo_layout() {
        let msg = r#"{"header":{"stamp":{"sec":1,"nanosec":5},"frame_id":""},"data":[1,2],"empty":[],"o":{},"pts":[{"x":1.0,"y":-2},{"x":3e-5}],"nested":[[1,2],[]],"s":"hello world","t":"yes","n":"12","q":"it's: here","e":"\u00e9\n","z":null}"#;
        let expected = "\
header:
  stamp:
    sec: 1
    nanosec: 5
  frame_id: ''
data:
- 1
- 2
empty: []
o: {}
pts:
- x: 1.0
  y: -2
- x: 3e-5
nested:
- - 1
  - 2
- []
s: hello world
t: 'yes'
n: '12'
q: 'it''s: here'
e: \"é\\n\"
z: null
";
        assert_eq!(yaml(msg, 0), expected);
        assert_eq!(yaml("5", 0), "5\n");
        assert_eq!(yaml(r#""/chatter""#, 2), "  /chatter\n");
        assert_eq!(yaml("{\"a\":{\"b\":1}}", 4), "    a:\n      b: 1\n");
        assert_eq!(yaml("[]", 0), "[]\n");
    }

    #[test]
    fn quoted_strings_read_back_as_the_same_strings() {
        for s in [
            "",
            " x",
            "x ",
            "true",
            "No",
            "~",
            "1",
            "1.5",
            "-1",
            ".5",
            "1e3",
            "0x1F",
            "inf",
            "-x",
            "a: b",
            "a #b",
            "[x]",
            "{x}",
            "*x",
            "'",
            "line\nbreak",
            "tab\t",
            "é",
            "/a/b",
            "plain text",
            "a:b",
            "x:",
        ] {
            let text = format!("k: {}", scalar_text(s));
            let docs = yaml_rust2::YamlLoader::load_from_str(&text).unwrap();
            assert_eq!(docs[0]["k"].as_str(), Some(s), "{s:?} printed as {text:?}");
        }
    }

    #[test]
    fn formats() {
        assert_eq!(bytes(12.0), "12 B");
        assert_eq!(bytes(1234.0), "1.23 KB");
        assert_eq!(bytes(2_500_000.0), "2.50 MB");
        assert_eq!(goal_status("4"), "SUCCEEDED");
        assert_eq!(goal_status("9"), "UNKNOWN");
    }
}
