//! `.msg`, `.srv` and `.action` text into the [`model`](crate::model), by
//! ROS 2's rules (rosidl_adapter), including the structs rosidl synthesizes:
//! a service's `_Event`, an action's `_SendGoal`/`_GetResult` services and
//! `_FeedbackMessage`, and the dummy member of an empty struct.
//!
//! Owns: the grammar of one definition file and its limits.
//! Invariants:
//! - every error names a line (1-based in the whole file; 0 means the file
//!   as a whole) and a reason; no input panics;
//! - nested references come out fully qualified (`pkg/msg/Name`); whether
//!   they exist is the registry's question, not the parser's;
//! - work is bounded: at most [`MAX_DEFINITION_BYTES`] of text and
//!   [`MAX_FIELDS`] fields (and as many constants) per struct.

use std::fmt;

use serde_json::{Number, Value};

use crate::model::{
    ActionDef, Base, Constant, Field, Kind, MsgDef, Prim, Shape, SrvDef, EMPTY_STRUCT_MEMBER,
};

/// Longest definition file accepted. The largest real one (sensor_msgs
/// BatteryState, with its comments) is about 5 KiB.
pub const MAX_DEFINITION_BYTES: usize = 64 * 1024;
/// Most fields (and, separately, constants) in one struct.
pub const MAX_FIELDS: usize = 1000;

/// Why a definition was rejected, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based line in the file; 0 for the file as a whole.
    pub line: usize,
    pub reason: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            f.write_str(&self.reason)
        } else {
            write!(f, "line {}: {}", self.line, self.reason)
        }
    }
}

impl std::error::Error for ParseError {}

fn err<T>(line: usize, reason: impl Into<String>) -> Result<T, ParseError> {
    Err(ParseError {
        line,
        reason: reason.into(),
    })
}

/// Everything one definition file defines. A `.msg` gives one struct; a
/// `.srv` three structs and a service; an `.action` ten structs, two
/// services and the action.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Parsed {
    pub msgs: Vec<MsgDef>,
    pub srvs: Vec<SrvDef>,
    pub actions: Vec<ActionDef>,
}

/// Parses one definition file: `pkg` is its package, `name` its file stem.
pub fn parse(pkg: &str, kind: Kind, name: &str, text: &str) -> Result<Parsed, ParseError> {
    if text.len() > MAX_DEFINITION_BYTES {
        return err(
            0,
            format!(
                "definition is {} bytes, more than the limit of {MAX_DEFINITION_BYTES}",
                text.len()
            ),
        );
    }
    if !valid_package_name(pkg) {
        return err(0, format!("invalid package name {pkg:?}"));
    }
    if !valid_type_name(name) {
        return err(0, format!("invalid type name {name:?}"));
    }
    let mut out = Parsed::default();
    match kind {
        Kind::Msg => {
            let full = format!("{pkg}/msg/{name}");
            out.msgs.push(parse_struct(&full, pkg, text, 0)?);
        }
        Kind::Srv => {
            let [(req, req_at), (resp, resp_at)] = split_sections::<2>(text)?;
            let base = format!("{pkg}/srv/{name}");
            let request = parse_struct(&format!("{base}_Request"), pkg, req, req_at)?;
            let response = parse_struct(&format!("{base}_Response"), pkg, resp, resp_at)?;
            push_service(&mut out, base, request, response);
        }
        Kind::Action => {
            let [(goal, goal_at), (result, result_at), (feedback, feedback_at)] =
                split_sections::<3>(text)?;
            let base = format!("{pkg}/action/{name}");
            let goal = parse_struct(&format!("{base}_Goal"), pkg, goal, goal_at)?;
            let result = parse_struct(&format!("{base}_Result"), pkg, result, result_at)?;
            let feedback = parse_struct(&format!("{base}_Feedback"), pkg, feedback, feedback_at)?;
            push_action(&mut out, base, goal, result, feedback);
        }
    }
    Ok(out)
}

/// Parses a `.msg` file into its one struct.
pub fn parse_msg(pkg: &str, name: &str, text: &str) -> Result<MsgDef, ParseError> {
    let mut parsed = parse(pkg, Kind::Msg, name, text)?;
    match parsed.msgs.pop() {
        Some(def) => Ok(def),
        None => err(0, "no struct parsed"),
    }
}

/// Splits a `.srv`/`.action` file on its `---` lines into `N` sections,
/// each with the number of lines before it (to report file line numbers).
fn split_sections<const N: usize>(text: &str) -> Result<[(&str, usize); N], ParseError> {
    let mut sections = [("", 0usize); N];
    let mut count = 0;
    let mut start = 0;
    let mut start_line = 0;
    let mut offset = 0;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        if line.trim_end() == "---" {
            if count + 1 == N {
                return err(
                    i + 1,
                    format!("more than {} '---' separators", N.saturating_sub(1)),
                );
            }
            sections[count] = (&text[start..offset], start_line);
            count += 1;
            start = offset + line.len();
            start_line = i + 1;
        }
        offset += line.len();
    }
    if count + 1 != N {
        return err(
            0,
            format!("expected {} '---' separators, found {count}", N - 1),
        );
    }
    sections[count] = (&text[start..], start_line);
    Ok(sections)
}

fn nested(name: &str, type_name: &str, shape: Shape) -> Field {
    Field {
        name: name.to_owned(),
        base: Base::Nested(type_name.to_owned()),
        shape,
        default: None,
    }
}

fn prim(name: &str, prim: Prim) -> Field {
    Field {
        name: name.to_owned(),
        base: Base::Prim(prim),
        shape: Shape::Single,
        default: None,
    }
}

fn synthesized(name: String, fields: Vec<Field>) -> MsgDef {
    MsgDef {
        name,
        fields,
        constants: Vec::new(),
    }
}

/// Adds a service `base` (full name) with its request, response and the
/// `_Event` struct rosidl generates for service introspection.
fn push_service(out: &mut Parsed, base: String, request: MsgDef, response: MsgDef) {
    let event = synthesized(
        format!("{base}_Event"),
        vec![
            nested("info", "service_msgs/msg/ServiceEventInfo", Shape::Single),
            nested("request", &request.name, Shape::Bounded(1)),
            nested("response", &response.name, Shape::Bounded(1)),
        ],
    );
    out.srvs.push(SrvDef {
        request: request.name.clone(),
        response: response.name.clone(),
        event: event.name.clone(),
        name: base,
    });
    out.msgs.extend([request, response, event]);
}

const UUID: &str = "unique_identifier_msgs/msg/UUID";

/// Adds an action `base` (full name) and everything rosidl derives from
/// its three sections (the `action_msgs` protocol types).
fn push_action(out: &mut Parsed, base: String, goal: MsgDef, result: MsgDef, feedback: MsgDef) {
    let send_goal = format!("{base}_SendGoal");
    let send_goal_request = synthesized(
        format!("{send_goal}_Request"),
        vec![
            nested("goal_id", UUID, Shape::Single),
            nested("goal", &goal.name, Shape::Single),
        ],
    );
    let send_goal_response = synthesized(
        format!("{send_goal}_Response"),
        vec![
            prim("accepted", Prim::Bool),
            nested("stamp", "builtin_interfaces/msg/Time", Shape::Single),
        ],
    );
    push_service(
        out,
        send_goal.clone(),
        send_goal_request,
        send_goal_response,
    );

    let get_result = format!("{base}_GetResult");
    let get_result_request = synthesized(
        format!("{get_result}_Request"),
        vec![nested("goal_id", UUID, Shape::Single)],
    );
    let get_result_response = synthesized(
        format!("{get_result}_Response"),
        vec![
            prim("status", Prim::Int8),
            nested("result", &result.name, Shape::Single),
        ],
    );
    push_service(
        out,
        get_result.clone(),
        get_result_request,
        get_result_response,
    );

    let feedback_message = synthesized(
        format!("{base}_FeedbackMessage"),
        vec![
            nested("goal_id", UUID, Shape::Single),
            nested("feedback", &feedback.name, Shape::Single),
        ],
    );
    out.actions.push(ActionDef {
        goal: goal.name.clone(),
        result: result.name.clone(),
        feedback: feedback.name.clone(),
        feedback_message: feedback_message.name.clone(),
        send_goal,
        get_result,
        name: base,
    });
    out.msgs.extend([goal, result, feedback, feedback_message]);
}

/// Parses one struct body. `line_offset` is the number of file lines before
/// `text`, so errors carry file line numbers.
fn parse_struct(
    full_name: &str,
    pkg: &str,
    text: &str,
    line_offset: usize,
) -> Result<MsgDef, ParseError> {
    let mut fields: Vec<Field> = Vec::new();
    let mut constants: Vec<Constant> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line_no = line_offset + i + 1;
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let member = parse_line(line, pkg).map_err(|reason| ParseError {
            line: line_no,
            reason,
        })?;
        let name = match &member {
            Member::Field(f) => &f.name,
            Member::Constant(c) => &c.name,
        };
        if fields.iter().any(|f| &f.name == name) || constants.iter().any(|c| &c.name == name) {
            return err(line_no, format!("duplicate name {name:?}"));
        }
        match member {
            Member::Field(f) if fields.len() < MAX_FIELDS => fields.push(f),
            Member::Constant(c) if constants.len() < MAX_FIELDS => constants.push(c),
            _ => {
                return err(
                    line_no,
                    format!("more than {MAX_FIELDS} fields or constants"),
                )
            }
        }
    }
    if fields.is_empty() {
        // rosidl's C and C++ generators cannot emit an empty struct; the
        // member it adds is part of the wire format and of the type hash.
        fields.push(prim(EMPTY_STRUCT_MEMBER, Prim::UInt8));
    }
    Ok(MsgDef {
        name: full_name.to_owned(),
        fields,
        constants,
    })
}

enum Member {
    Field(Field),
    Constant(Constant),
}

/// One non-empty, non-comment line, already trimmed.
fn parse_line(line: &str, pkg: &str) -> Result<Member, String> {
    let (type_token, rest) = match line.find(char::is_whitespace) {
        Some(i) => (&line[..i], line[i..].trim_start()),
        None => (line, ""),
    };
    let (base, shape) = parse_type(type_token, pkg)?;
    let name_end = rest
        .find(|c: char| c.is_whitespace() || c == '#' || c == '=')
        .unwrap_or(rest.len());
    let name = &rest[..name_end];
    if name.is_empty() {
        return Err(format!("missing a name after type {type_token:?}"));
    }
    let after = rest[name_end..].trim_start();
    let is_string = matches!(base, Base::Prim(Prim::String(_) | Prim::WString(_)));

    if let Some(value_text) = after.strip_prefix('=') {
        if !valid_constant_name(name) {
            return Err(format!(
                "invalid constant name {name:?} (upper case letters, digits and single underscores)"
            ));
        }
        let Base::Prim(prim) = base else {
            return Err(format!("constant {name} must have a primitive type"));
        };
        if shape != Shape::Single {
            return Err(format!("constant {name} cannot be an array"));
        }
        // A string constant's value is the rest of the line, `#` included
        // (the ROS 1 rule rosidl kept); other values end at a comment.
        let value_text = if is_string {
            value_text.trim()
        } else {
            strip_comment(value_text, false).trim()
        };
        if value_text.is_empty() && !is_string {
            return Err(format!("constant {name} has no value"));
        }
        let value = parse_scalar(prim, value_text).map_err(|e| format!("constant {name}: {e}"))?;
        return Ok(Member::Constant(Constant {
            name: name.to_owned(),
            prim,
            value,
        }));
    }

    if !valid_field_name(name) {
        return Err(format!(
            "invalid field name {name:?} (a lower case letter, then lower case letters, digits and single underscores)"
        ));
    }
    let default_text = strip_comment(after, is_string).trim();
    let default = if default_text.is_empty() {
        None
    } else {
        Some(parse_default(&base, shape, default_text).map_err(|e| format!("field {name}: {e}"))?)
    };
    Ok(Member::Field(Field {
        name: name.to_owned(),
        base,
        shape,
        default,
    }))
}

/// Cuts `text` at its comment. With `quotes`, a `#` inside a quoted string
/// (one opening a value or an array element) does not start a comment.
fn strip_comment(text: &str, quotes: bool) -> &str {
    if !quotes {
        return text.find('#').map_or(text, |i| &text[..i]);
    }
    let mut quote: Option<char> = None;
    let mut escaped = false;
    // Only a quote at the start of a value opens a string: `it's` is text.
    let mut at_value_start = true;
    for (i, c) in text.char_indices() {
        if let Some(q) = quote {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '#' => return &text[..i],
            '"' | '\'' if at_value_start => quote = Some(c),
            '[' | ',' => at_value_start = true,
            c if c.is_whitespace() => {}
            _ => at_value_start = false,
        }
        if c == '"' || c == '\'' {
            at_value_start = false;
        }
    }
    text
}

/// A type token: `int32`, `string<=8`, `geometry_msgs/Point[<=4]`, ...
pub fn parse_type(token: &str, pkg: &str) -> Result<(Base, Shape), String> {
    let (element, shape) = match token.strip_suffix(']') {
        Some(head) => {
            let Some(open) = head.rfind('[') else {
                return Err(format!("unbalanced ']' in type {token:?}"));
            };
            let inner = &head[open + 1..];
            let shape = if inner.is_empty() {
                Shape::Sequence
            } else if let Some(n) = inner.strip_prefix("<=") {
                Shape::Bounded(parse_bound(n, token)?)
            } else {
                Shape::Array(parse_bound(inner, token)?)
            };
            (&head[..open], shape)
        }
        None => (token, Shape::Single),
    };
    if element.contains(['[', ']']) {
        return Err(format!(
            "invalid type {token:?} (arrays of arrays do not exist)"
        ));
    }
    if let Some(prim) = parse_prim(element, token)? {
        return Ok((Base::Prim(prim), shape));
    }
    Ok((Base::Nested(resolve_nested(element, pkg)?), shape))
}

fn parse_bound(digits: &str, token: &str) -> Result<u32, String> {
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("invalid bound {digits:?} in type {token:?}"));
    }
    match digits.parse::<u32>() {
        Ok(0) => Err(format!("bound 0 in type {token:?}")),
        Ok(n) => Ok(n),
        Err(_) => Err(format!(
            "bound {digits} in type {token:?} is larger than {}",
            u32::MAX
        )),
    }
}

fn parse_prim(element: &str, token: &str) -> Result<Option<Prim>, String> {
    for (word, wide) in [("string", false), ("wstring", true)] {
        if let Some(rest) = element.strip_prefix(word) {
            let bound = if rest.is_empty() {
                None
            } else if let Some(n) = rest.strip_prefix("<=") {
                Some(parse_bound(n, token)?)
            } else {
                continue;
            };
            return Ok(Some(if wide {
                Prim::WString(bound)
            } else {
                Prim::String(bound)
            }));
        }
    }
    Ok(Some(match element {
        "bool" => Prim::Bool,
        "byte" => Prim::Byte,
        "char" => Prim::Char,
        "int8" => Prim::Int8,
        "uint8" => Prim::UInt8,
        "int16" => Prim::Int16,
        "uint16" => Prim::UInt16,
        "int32" => Prim::Int32,
        "uint32" => Prim::UInt32,
        "int64" => Prim::Int64,
        "uint64" => Prim::UInt64,
        "float32" => Prim::Float32,
        "float64" => Prim::Float64,
        _ => return Ok(None),
    }))
}

/// The full name of a nested type reference: `Name` is in `pkg` (except
/// `Header`, which is std_msgs'), `p/Name` and `p/msg/Name` are in `p`.
/// rosidl_adapter also maps ROS 1's `time` and `duration`.
fn resolve_nested(element: &str, pkg: &str) -> Result<String, String> {
    let parts: Vec<&str> = element.split('/').collect();
    let (p, n) = match parts.as_slice() {
        ["Header"] => ("std_msgs", "Header"),
        ["time"] => ("builtin_interfaces", "Time"),
        ["duration"] => ("builtin_interfaces", "Duration"),
        [n] => (pkg, *n),
        [p, n] | [p, "msg", n] => (*p, *n),
        _ => return Err(format!("invalid type {element:?}")),
    };
    if !valid_package_name(p) || !valid_type_name(n) {
        return Err(format!("invalid type {element:?}"));
    }
    Ok(format!("{p}/msg/{n}"))
}

/// A default value, as JSON of the field's shape.
fn parse_default(base: &Base, shape: Shape, text: &str) -> Result<Value, String> {
    let Base::Prim(prim) = *base else {
        return Err("a nested-type field cannot have a default value".to_owned());
    };
    if shape == Shape::Single {
        return parse_scalar(prim, text);
    }
    let inner = text
        .strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
        .ok_or_else(|| format!("array default {text:?} is not in [...]"))?;
    let items = split_array(inner)?;
    match shape {
        Shape::Array(n) if items.len() != n as usize => {
            return Err(format!(
                "array default has {} elements, not {n}",
                items.len()
            ))
        }
        Shape::Bounded(n) if items.len() > n as usize => {
            return Err(format!(
                "array default has {} elements, more than {n}",
                items.len()
            ))
        }
        _ => {}
    }
    items
        .into_iter()
        .map(|item| parse_scalar(prim, item))
        .collect::<Result<Vec<_>, _>>()
        .map(Value::Array)
}

/// Splits the inside of `[...]` on commas outside quotes. Elements keep
/// their quotes; `parse_scalar` removes them.
fn split_array(inner: &str) -> Result<Vec<&str>, String> {
    let mut items = Vec::new();
    if inner.trim().is_empty() {
        return Ok(items);
    }
    let mut quote: Option<char> = None;
    let mut escaped = false;
    let mut start = 0;
    for (i, c) in inner.char_indices() {
        if let Some(q) = quote {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == q {
                quote = None;
            }
        } else if c == ',' {
            items.push(inner[start..i].trim());
            start = i + 1;
        } else if (c == '"' || c == '\'') && inner[start..i].trim().is_empty() {
            quote = Some(c);
        }
    }
    if quote.is_some() {
        return Err(format!("unterminated string in [{inner}]"));
    }
    items.push(inner[start..].trim());
    Ok(items)
}

/// One primitive value from definition text.
fn parse_scalar(prim: Prim, text: &str) -> Result<Value, String> {
    let int = |min: i128, max: i128| -> Result<Value, String> {
        let digits = text.strip_prefix('+').unwrap_or(text);
        match digits.parse::<i128>() {
            Ok(v) if (min..=max).contains(&v) => Ok(if v < 0 {
                Value::from(v as i64)
            } else {
                Value::from(v as u64)
            }),
            Ok(_) => Err(format!("{text} is out of range [{min}, {max}]")),
            Err(_) => Err(format!("{text:?} is not an integer")),
        }
    };
    match prim {
        Prim::Bool => match text.to_ascii_lowercase().as_str() {
            "true" | "1" => Ok(Value::Bool(true)),
            "false" | "0" => Ok(Value::Bool(false)),
            _ => Err(format!("{text:?} is not a bool (true or false)")),
        },
        Prim::Byte | Prim::Char | Prim::UInt8 => int(0, u8::MAX.into()),
        Prim::Int8 => int(i8::MIN.into(), i8::MAX.into()),
        Prim::Int16 => int(i16::MIN.into(), i16::MAX.into()),
        Prim::UInt16 => int(0, u16::MAX.into()),
        Prim::Int32 => int(i32::MIN.into(), i32::MAX.into()),
        Prim::UInt32 => int(0, u32::MAX.into()),
        Prim::Int64 => int(i64::MIN.into(), i64::MAX.into()),
        Prim::UInt64 => int(0, u64::MAX.into()),
        Prim::Float32 | Prim::Float64 => {
            let v: f64 = text
                .parse()
                .map_err(|_| format!("{text:?} is not a number"))?;
            Number::from_f64(v)
                .map(Value::Number)
                .ok_or_else(|| format!("{text} is not a finite number"))
        }
        Prim::String(bound) | Prim::WString(bound) => {
            let s = unquote(text)?;
            let len = if matches!(prim, Prim::String(_)) {
                s.len()
            } else {
                s.chars().count()
            };
            match bound {
                Some(n) if len > n as usize => Err(format!("string longer than its bound {n}")),
                _ => Ok(Value::String(s)),
            }
        }
    }
}

/// A string value: quoted (`"..."` or `'...'`, with `\"`/`\'` for the quote
/// character) or, unquoted, the text itself.
fn unquote(text: &str) -> Result<String, String> {
    let Some(q) = text.chars().next().filter(|c| *c == '"' || *c == '\'') else {
        return Ok(text.to_owned());
    };
    let Some(inner) = text[1..].strip_suffix(q) else {
        return Err(format!("unterminated string {text}"));
    };
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' && chars.peek() == Some(&q) {
            out.push(q);
            chars.next();
        } else if c == q {
            return Err(format!("unescaped {q} inside string {text}"));
        } else {
            out.push(c);
        }
    }
    Ok(out)
}

/// rosidl's package name rule: lower case, digits, single underscores.
pub fn valid_package_name(s: &str) -> bool {
    snake(s, |b| b.is_ascii_lowercase())
}

/// rosidl's field name rule (same shape as a package name).
pub fn valid_field_name(s: &str) -> bool {
    snake(s, |b| b.is_ascii_lowercase())
}

/// rosidl's constant name rule: upper case, digits, single underscores.
pub fn valid_constant_name(s: &str) -> bool {
    snake(s, |b| b.is_ascii_uppercase())
}

/// rosidl's message/service/action name rule: `[A-Z][A-Za-z0-9]*`.
pub fn valid_type_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty() && b[0].is_ascii_uppercase() && b.iter().all(u8::is_ascii_alphanumeric)
}

/// `^[x][x0-9]*(_[x0-9]+)*$` for the letter class `x`: a letter first, no
/// double or trailing underscore.
fn snake(s: &str, letter: impl Fn(&u8) -> bool) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && letter(&b[0])
        && !s.contains("__")
        && !s.ends_with('_')
        && b.iter()
            .all(|c| letter(c) || c.is_ascii_digit() || *c == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn msg(text: &str) -> Result<MsgDef, ParseError> {
        parse_msg("pkg", "T", text)
    }

    fn reason(text: &str) -> (usize, String) {
        let e = msg(text).unwrap_err();
        (e.line, e.reason)
    }

    #[test]
    fn fields_types_and_shapes() {
        let def = msg("# header comment\n\
             int32 a\n\
             \n\
             string<=8[<=3] b  # trailing\n\
             Header h\n\
             geometry_msgs/Point[] p\n\
             geometry_msgs/msg/Pose[2] q\n\
             Other o\n\
             char c\n\
             byte[4] d\n\
             wstring<=5 w\n")
        .unwrap();
        assert_eq!(def.name, "pkg/msg/T");
        let got: Vec<(&str, &Base, Shape)> = def
            .fields
            .iter()
            .map(|f| (f.name.as_str(), &f.base, f.shape))
            .collect();
        let n = |s: &str| Base::Nested(s.to_owned());
        assert_eq!(
            got,
            vec![
                ("a", &Base::Prim(Prim::Int32), Shape::Single),
                ("b", &Base::Prim(Prim::String(Some(8))), Shape::Bounded(3)),
                ("h", &n("std_msgs/msg/Header"), Shape::Single),
                ("p", &n("geometry_msgs/msg/Point"), Shape::Sequence),
                ("q", &n("geometry_msgs/msg/Pose"), Shape::Array(2)),
                ("o", &n("pkg/msg/Other"), Shape::Single),
                ("c", &Base::Prim(Prim::Char), Shape::Single),
                ("d", &Base::Prim(Prim::Byte), Shape::Array(4)),
                ("w", &Base::Prim(Prim::WString(Some(5))), Shape::Single),
            ]
        );
    }

    #[test]
    fn defaults_and_constants() {
        let def = msg("float64 w 1\n\
             bool b true # on\n\
             int8[] xs [1, -2, 3]\n\
             string s \"a # not a comment\" # a comment\n\
             string u plain text # comment\n\
             string q 'it\\'s'\n\
             string[<=3] ss [\"x, y\", 'z', w]\n\
             uint64 big 18446744073709551615\n\
             int32 A = -5 # five\n\
             string S=hello # world\n\
             string E=\n\
             bool T=true\n")
        .unwrap();
        let defaults: Vec<_> = def.fields.iter().map(|f| f.default.clone()).collect();
        assert_eq!(
            defaults,
            vec![
                Some(json!(1.0)),
                Some(json!(true)),
                Some(json!([1, -2, 3])),
                Some(json!("a # not a comment")),
                Some(json!("plain text")),
                Some(json!("it's")),
                Some(json!(["x, y", "z", "w"])),
                Some(json!(18446744073709551615u64)),
            ]
        );
        let consts: Vec<_> = def
            .constants
            .iter()
            .map(|c| (c.name.as_str(), c.prim, c.value.clone()))
            .collect();
        assert_eq!(
            consts,
            vec![
                ("A", Prim::Int32, json!(-5)),
                ("S", Prim::String(None), json!("hello # world")),
                ("E", Prim::String(None), json!("")),
                ("T", Prim::Bool, json!(true)),
            ]
        );
    }

    #[test]
    fn empty_struct_gets_the_dummy_member() {
        let def = msg("# nothing\nint32 ONLY_A_CONSTANT=1\n").unwrap();
        assert_eq!(def.fields.len(), 1);
        assert_eq!(def.fields[0].name, EMPTY_STRUCT_MEMBER);
        assert_eq!(def.fields[0].base, Base::Prim(Prim::UInt8));
    }

    #[test]
    fn service_sections_and_event() {
        let p = parse(
            "example_interfaces",
            Kind::Srv,
            "AddTwoInts",
            "int64 a\nint64 b\n---\nint64 sum\n",
        )
        .unwrap();
        let names: Vec<_> = p.msgs.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "example_interfaces/srv/AddTwoInts_Request",
                "example_interfaces/srv/AddTwoInts_Response",
                "example_interfaces/srv/AddTwoInts_Event",
            ]
        );
        assert_eq!(p.srvs[0].name, "example_interfaces/srv/AddTwoInts");
        let event = &p.msgs[2];
        assert_eq!(event.fields[1].shape, Shape::Bounded(1));
        // An error in the response names its line in the whole file.
        let e = parse("p", Kind::Srv, "S", "int64 a\n---\nint64 Bad\n").unwrap_err();
        assert_eq!(e.line, 3);
        let e = parse("p", Kind::Srv, "S", "int64 a\n").unwrap_err();
        assert!(e.reason.contains("separator"), "{e}");
        let e = parse("p", Kind::Srv, "S", "---\n---\n").unwrap_err();
        assert_eq!(e.line, 2);
    }

    #[test]
    fn action_synthesizes_protocol_types() {
        let p = parse(
            "example_interfaces",
            Kind::Action,
            "Fibonacci",
            "int32 order\n---\nint32[] sequence\n---\nint32[] sequence\n",
        )
        .unwrap();
        assert_eq!(p.msgs.len(), 10);
        assert_eq!(p.srvs.len(), 2);
        let a = &p.actions[0];
        assert_eq!(a.send_goal, "example_interfaces/action/Fibonacci_SendGoal");
        assert_eq!(
            a.feedback_message,
            "example_interfaces/action/Fibonacci_FeedbackMessage"
        );
        assert!(p
            .msgs
            .iter()
            .any(|m| m.name == "example_interfaces/action/Fibonacci_GetResult_Event"));
    }

    #[test]
    fn errors_name_the_line_and_reason() {
        let cases: &[(&str, usize, &str)] = &[
            ("int32 a\nflaot32 b\n", 2, "invalid type"),
            ("int32 a\nint32 Bad\n", 2, "invalid field name"),
            ("int32 a__b\n", 1, "invalid field name"),
            ("int32 a_\n", 1, "invalid field name"),
            ("int32 9a\n", 1, "invalid field name"),
            ("int32[4294967296] a\n", 1, "larger than"),
            ("int32[<=x] a\n", 1, "invalid bound"),
            ("int32[0] a\n", 1, "bound 0"),
            ("string<=99999999999 a\n", 1, "larger than"),
            ("int32 A=\n", 1, "no value"),
            ("int32 A= # comment\n", 1, "no value"),
            ("int32 lower=1\n", 1, "invalid constant name"),
            ("int32[] A=1\n", 1, "cannot be an array"),
            ("Other A=1\n", 1, "primitive type"),
            ("int32\n", 1, "missing a name"),
            ("int8 a 200\n", 1, "out of range"),
            ("bool a yes\n", 1, "not a bool"),
            ("int32[2] a [1]\n", 1, "not 2"),
            ("int32[<=1] a [1, 2]\n", 1, "more than 1"),
            ("Other o 1\n", 1, "nested-type"),
            ("string<=2 s \"abc\"\n", 1, "bound 2"),
            ("int32 a\nint32 a\n", 2, "duplicate"),
            ("pkg/srv/X a\n", 1, "invalid type"),
            ("float64 f nan\n", 1, "finite"),
        ];
        for (text, line, needle) in cases {
            let (l, r) = reason(text);
            assert_eq!(l, *line, "{text:?}: {r}");
            assert!(r.contains(needle), "{text:?}: {r:?} lacks {needle:?}");
        }
    }

    #[test]
    fn limits() {
        let big = "int32 a\n".repeat(MAX_DEFINITION_BYTES / 8 + 1);
        assert_eq!(reason(&big).0, 0);
        let many: String = (0..=MAX_FIELDS).map(|i| format!("int8 f{i}\n")).collect();
        let (line, r) = reason(&many);
        assert_eq!(line, MAX_FIELDS + 1);
        assert!(r.contains("more than"), "{r}");
        assert!(parse_msg("Bad", "T", "").is_err());
        assert!(parse_msg("pkg", "bad", "").is_err());
        assert!(parse_msg("pkg", "Has_Underscore", "").is_err());
    }
}
