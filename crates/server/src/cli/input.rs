//! Messages, requests, goals and parameter values given on the command
//! line, as `ros2` takes them: JSON (`'{"data": "hello"}'`, sent byte for
//! byte) or YAML, flow or block (`"{data: hello}"`, `"data: hello"`),
//! converted to JSON. JSON is checked with the wire crate's scanner, so what
//! the gateway would refuse (numbers beyond f64, lone surrogates, nesting
//! deeper than 127) is refused here, with the reason.

use rosgate_wire::encode::json_string;
use rosgate_wire::scan::{self, ScanError};
use rosgate_wire::MAX_JSON_DEPTH;
use yaml_rust2::{Yaml, YamlLoader};

/// `text` as JSON text; an empty argument is `{}`.
pub fn to_json(text: &str) -> Result<String, String> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Ok("{}".to_string());
    }
    match scan::scan_object(trimmed, MAX_JSON_DEPTH, |_| {}) {
        Ok(()) | Err(ScanError::NotObject) => return Ok(trimmed.to_string()),
        Err(ScanError::NumberOutOfRange) => {
            return Err("a number is out of range (JSON numbers must fit a 64-bit float)".into())
        }
        Err(ScanError::LoneSurrogate) => {
            return Err("a string escapes an unpaired UTF-16 surrogate".into())
        }
        Err(ScanError::TooDeep) => {
            return Err(format!("nested deeper than {MAX_JSON_DEPTH} levels"))
        }
        Err(ScanError::Syntax) => {}
    }
    let yaml = parse_yaml(trimmed)?;
    let mut out = Vec::with_capacity(trimmed.len() + 16);
    yaml_to_json(&yaml, &mut out, 0)?;
    String::from_utf8(out).map_err(|e| e.to_string())
}

/// One YAML document (an empty one is `{}`).
pub fn parse_yaml(text: &str) -> Result<Yaml, String> {
    // Aliases are expanded by cloning: bounded first (`crate::files`).
    crate::files::yaml_fits(text)?;
    let mut docs = YamlLoader::load_from_str(text).map_err(|e| {
        let m = e.marker();
        format!(
            "neither JSON nor YAML: line {}, column {}: {}",
            m.line(),
            m.col() + 1,
            e.info()
        )
    })?;
    match docs.len() {
        0 => Ok(Yaml::Hash(Default::default())),
        1 => Ok(docs.remove(0)),
        n => Err(format!("expected one YAML document, got {n}")),
    }
}

/// Writes `y` as JSON.
pub fn yaml_to_json(y: &Yaml, out: &mut Vec<u8>, depth: usize) -> Result<(), String> {
    if depth >= MAX_JSON_DEPTH {
        return Err(format!("nested deeper than {MAX_JSON_DEPTH} levels"));
    }
    match y {
        Yaml::Null => out.extend_from_slice(b"null"),
        Yaml::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Yaml::Integer(i) => out.extend_from_slice(i.to_string().as_bytes()),
        Yaml::Real(text) => out.extend_from_slice(real(text)?.as_bytes()),
        Yaml::String(s) => json_string(out, s),
        Yaml::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                yaml_to_json(item, out, depth + 1)?;
            }
            out.push(b']');
        }
        Yaml::Hash(map) => {
            out.push(b'{');
            for (i, (k, v)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                json_string(out, &key(k)?);
                out.push(b':');
                yaml_to_json(v, out, depth + 1)?;
            }
            out.push(b'}');
        }
        Yaml::Alias(_) => return Err("YAML aliases are not supported".into()),
        Yaml::BadValue => return Err("invalid YAML value".into()),
    }
    Ok(())
}

/// A YAML real as a JSON number: as written when that is valid JSON
/// (`2.5`, `1e3`, `12345678901234567890`), else its value (`.5` -> `0.5`).
fn real(text: &str) -> Result<String, String> {
    if serde_json::from_str::<serde_json::Number>(text).is_ok() {
        return Ok(text.to_string());
    }
    let v = parse_f64(text).ok_or_else(|| format!("{text:?} is not a number"))?;
    if !v.is_finite() {
        return Err(format!(
            "{text} cannot be sent: JSON has no infinity or NaN"
        ));
    }
    Ok(format!("{v:?}"))
}

/// YAML's float spellings Rust's parser does not take (`+.5`, `.inf`).
fn parse_f64(text: &str) -> Option<f64> {
    let t = text.trim_start_matches('+');
    match t.to_ascii_lowercase().as_str() {
        ".inf" => Some(f64::INFINITY),
        "-.inf" => Some(f64::NEG_INFINITY),
        ".nan" => Some(f64::NAN),
        _ => t.parse().ok(),
    }
}

/// A mapping key as a string.
fn key(k: &Yaml) -> Result<String, String> {
    match k {
        Yaml::String(s) => Ok(s.clone()),
        Yaml::Integer(i) => Ok(i.to_string()),
        Yaml::Real(r) => Ok(r.clone()),
        Yaml::Boolean(b) => Ok(b.to_string()),
        Yaml::Null => Ok("null".into()),
        other => Err(format!("a mapping key must be a scalar, not {other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_passes_byte_for_byte() {
        for t in [
            r#"{"data": "hello"}"#,
            r#"{"n":12345678901234567890,"f":1e-300,"s":"\u00e9"}"#,
            "5",
            "[1, 2]",
            r#""text""#,
        ] {
            assert_eq!(to_json(t).unwrap(), t);
        }
        assert_eq!(to_json("  ").unwrap(), "{}");
        assert!(to_json(r#"{"n":1e400}"#)
            .unwrap_err()
            .contains("out of range"));
        assert!(to_json(r#"{"s":"\ud800"}"#)
            .unwrap_err()
            .contains("surrogate"));
    }

    #[test]
    fn yaml_aliases_are_bounded_before_they_expand() {
        let mut t = String::from("a0: &a0 lol\n");
        for i in 1..10 {
            let refs = vec![format!("*a{}", i - 1); 10].join(", ");
            t.push_str(&format!("a{i}: &a{i} [{refs}]\n"));
        }
        let e = to_json(&t).expect_err("a billion laughs");
        assert!(e.contains("MAX_YAML_NODES"), "{e}");
        assert_eq!(to_json("{a: &x 1, b: *x}").unwrap(), r#"{"a":1,"b":1}"#);
    }

    #[test]
    fn yaml_flow_and_block_become_json() {
        assert_eq!(to_json("{data: hello}").unwrap(), r#"{"data":"hello"}"#);
        assert_eq!(
            to_json("{a: 1, b: [1, 2.5, x], c: {d: true, e: ~}, f: '1', g: .5}").unwrap(),
            r#"{"a":1,"b":[1,2.5,"x"],"c":{"d":true,"e":null},"f":"1","g":0.5}"#
        );
        assert_eq!(to_json("data: 3\nx: -4").unwrap(), r#"{"data":3,"x":-4}"#);
        assert_eq!(
            to_json("{big: 12345678901234567890}").unwrap(),
            r#"{"big":12345678901234567890}"#
        );
        assert_eq!(
            to_json("{s: \"tab\\there\"}").unwrap(),
            r#"{"s":"tab\there"}"#
        );
        assert_eq!(to_json("hello").unwrap(), r#""hello""#);
        assert!(to_json("{a: .inf}").unwrap_err().contains("infinity"));
        assert!(to_json("{a: [1, 2}").is_err());
        // Anchors and aliases are resolved by the loader.
        assert_eq!(to_json("a: &x 1\nb: *x").unwrap(), r#"{"a":1,"b":1}"#);
    }
}
