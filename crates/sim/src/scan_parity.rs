//! Parity of rosgate's JSON scanner with serde_json: the check behind the
//! `scan` fuzz target and the differential test (`tests/scan.rs`). Panics on
//! a violation.

use std::fmt;

use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use rosgate_wire::scan::{scan_object, scan_object_escapes, Member, ScanError};

/// Fuzz entry point: checks `data` if it is UTF-8.
pub fn scan(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        check(text);
    }
}

/// Nesting serde_json's `Value` accepts (its recursion limit): deeper texts
/// are only checked against the grammar.
const VALUE_MAX_DEPTH: usize = 127;

/// Checks `scan_object(text, ..)` against serde_json: the verdict (against
/// its grammar, `&RawValue`, and against what its `Value` accepts), every
/// member span, and the depth limit on both sides of the text's depth.
pub fn check(text: &str) {
    let mut got = Vec::new();
    let verdict = scan_object(text, usize::MAX, |m| got.push(m));
    let grammar = serde_json::from_str::<&RawValue>(text);
    let depth = reference_depth(text.as_bytes());
    // What every client parser accepts; `None` when too deep to tell.
    let portable = (depth <= VALUE_MAX_DEPTH).then(|| serde_json::from_str::<Value>(text));
    match verdict {
        Err(ScanError::Syntax) => assert!(grammar.is_err(), "Syntax for grammatical {text:?}"),
        Err(ScanError::NumberOutOfRange | ScanError::LoneSurrogate) => {
            // Only a grammatical text gets a refusal other than Syntax.
            if let Err(e) = &grammar {
                panic!("{verdict:?} for ungrammatical {text:?}: {e}");
            }
            // serde_json refuses it, or a correctly rounding parser (Python,
            // JavaScript) reads an infinity in it.
            if let Some(Ok(v)) = &portable {
                assert!(
                    has_infinite_number(text),
                    "{verdict:?} for {text:?}, which serde_json reads as {v}"
                );
            }
        }
        Ok(()) | Err(ScanError::NotObject) => {
            let is_object = grammar
                .as_ref()
                .map(|raw| raw.get().starts_with('{'))
                .unwrap_or_else(|e| panic!("{verdict:?} for {text:?}, ungrammatical: {e}"));
            assert_eq!(verdict.is_ok(), is_object, "object or not: {text:?}");
            if let Some(Err(e)) = &portable {
                panic!("accepted {text:?}, which serde_json's Value refuses: {e}");
            }
        }
        Err(ScanError::TooDeep) => panic!("TooDeep without a depth limit for {text:?}"),
    }
    // The converse: what serde_json reads must be accepted, unless a
    // correctly rounding parser reads an infinity in it.
    match (&portable, &grammar) {
        (Some(Ok(v)), _) if !has_infinite_number(text) => {
            assert!(
                matches!(verdict, Ok(()) | Err(ScanError::NotObject)),
                "refused {text:?} ({verdict:?}), which serde_json reads as {v}"
            );
        }
        (_, Err(_)) => assert!(
            !matches!(verdict, Ok(()) | Err(ScanError::NotObject)),
            "accepted ungrammatical {text:?}"
        ),
        _ => {}
    }
    match verdict {
        Ok(()) => {}
        Err(ScanError::NumberOutOfRange | ScanError::LoneSurrogate) => {
            // Grammatical: every member is reported but those holding a
            // refused value (so that e.g. an `id` after it can be echoed).
            if let Some(Ok(serde_json::Value::Object(_))) | Some(Err(_)) = &portable {
                let members = match serde_json::from_str::<Members<'_>>(text) {
                    Ok(m) => m.0,
                    Err(_) => return, // not an object
                };
                let clean: Vec<_> = members
                    .iter()
                    .filter(|(k, v)| portable_member(k.get(), v.get()))
                    .collect();
                assert_eq!(got.len(), clean.len(), "clean member count in {text:?}");
                for (m, (key, value)) in got.iter().zip(clean) {
                    check_member(text, m, key.get(), value.get());
                }
            }
            return;
        }
        Err(_) => {
            if verdict == Err(ScanError::NotObject) {
                assert!(got.is_empty(), "members of a non-object {text:?}");
            }
            return;
        }
    }
    let members = match serde_json::from_str::<Members<'_>>(text) {
        Ok(m) => m.0,
        Err(e) => panic!("serde_json refused the object {text:?}: {e}"),
    };
    assert_eq!(got.len(), members.len(), "member count in {text:?}");
    for (m, (key, value)) in got.iter().zip(&members) {
        check_member(text, m, key.get(), value.get());
    }
    for max in [depth.saturating_sub(1), depth] {
        let mut again = 0usize;
        let verdict = scan_object(text, max, |_| again += 1);
        let expected = if depth > max {
            Err(ScanError::TooDeep)
        } else {
            Ok(())
        };
        assert_eq!(verdict, expected, "depth {depth}, max {max}, {text:?}");
        assert_eq!(again, got.len(), "members with max {max} in {text:?}");
    }
    // The escape flag the decoder trusts to skip its own look for `\`: a
    // backslash can only be part of an escape in valid JSON.
    assert_eq!(
        scan_object_escapes(text, usize::MAX, |_| {}),
        Ok(text.contains('\\')),
        "escapes in {text:?}"
    );
}

fn check_member(text: &str, m: &Member<'_>, raw_key: &str, raw_value: &str) {
    // Same spans: keys without their quotes, values exactly.
    let inner = raw_key
        .strip_prefix('"')
        .and_then(|k| k.strip_suffix('"'))
        .unwrap_or_else(|| panic!("raw key {raw_key:?}"));
    assert_eq!(m.key.as_ptr(), inner.as_ptr(), "key start in {text:?}");
    assert_eq!(m.key, inner, "key in {text:?}");
    assert_eq!(
        m.value.as_ptr(),
        raw_value.as_ptr(),
        "value start in {text:?}"
    );
    assert_eq!(m.value, raw_value, "value in {text:?}");
    assert_eq!(
        m.key_escaped,
        m.key.contains('\\'),
        "key_escaped in {text:?}"
    );
    // Decoded keys agree whenever serde_json can decode them (it cannot
    // when the key holds a lone surrogate escape).
    let ours = serde_json::from_str::<String>(&format!("\"{}\"", m.key));
    let theirs = serde_json::from_str::<String>(raw_key);
    match (ours, theirs) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "decoded key in {text:?}"),
        (Err(_), Err(_)) => {}
        (a, b) => panic!("key decoding differs in {text:?}: {a:?} vs {b:?}"),
    }
}

/// Whether a member (raw key and value, within serde_json's recursion
/// limit) is read by every standard parser.
fn portable_member(key: &str, value: &str) -> bool {
    serde_json::from_str::<String>(key).is_ok()
        && serde_json::from_str::<Value>(value).is_ok()
        && !has_infinite_number(value)
}

/// Whether grammatical JSON `text` holds a number that a correctly rounding
/// parser (Python's `float`, JavaScript's `Number`, Rust's `str::parse`)
/// reads as an infinity. Read token by token, independently of the scanner.
fn has_infinite_number(text: &str) -> bool {
    let b = text.as_bytes();
    let (mut i, mut in_str) = (0, false);
    while let Some(&c) = b.get(i) {
        if in_str {
            match c {
                b'\\' => i += 1,
                b'"' => in_str = false,
                _ => {}
            }
            i += 1;
            continue;
        }
        match c {
            b'"' => in_str = true,
            b'-' | b'0'..=b'9' => {
                let start = i;
                while let Some(b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9') = b.get(i) {
                    i += 1;
                }
                if text[start..i].parse::<f64>().is_ok_and(f64::is_infinite) {
                    return true;
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    false
}

/// Nesting depth of valid JSON, counted bracket by bracket.
fn reference_depth(json: &[u8]) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let (mut in_str, mut escaped) = (false, false);
    for &c in json {
        if in_str {
            if escaped {
                escaped = false;
            } else if c == b'\\' {
                escaped = true;
            } else if c == b'"' {
                in_str = false;
            }
            continue;
        }
        match c {
            b'"' => in_str = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// Top-level members as serde_json sees them: raw key and value spans.
struct Members<'a>(Vec<(&'a RawValue, &'a RawValue)>);

impl<'de> Deserialize<'de> for Members<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(MembersVisitor)
    }
}

struct MembersVisitor;

impl<'de> Visitor<'de> for MembersVisitor {
    type Value = Members<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members<'de>, A::Error> {
        let mut out = Vec::new();
        while let Some(entry) = map.next_entry::<&'de RawValue, &'de RawValue>()? {
            out.push(entry);
        }
        Ok(Members(out))
    }
}
