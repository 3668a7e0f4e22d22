//! JSON text into a [`serde_json::Value`] whose numbers are exactly what
//! the text names: a float is the double nearest to its digits (correctly
//! rounded, as `JSON.parse` and Python's `json.loads` read it), an integer
//! that fits `i64`/`u64` stays an integer.
//!
//! serde_json's default parser rounds some floats an ulp off (far from
//! 1.0, about a third of random doubles), so CDR -> JSON -> CDR would not
//! be bit for bit (docs/ros2.md, "Floats"). Its `float_roundtrip` feature
//! parses exactly, but cargo turns a feature on for every crate of a build,
//! and the wire crate's number rule is what a *default* serde_json reads
//! (crates/wire/src/scan.rs, `portable_number`): so the codec reads its
//! own numbers here instead, and the rest of the build is unchanged.
//!
//! Invariants: no input panics; nesting is bounded by the gateway's own
//! limit ([`MAX_JSON_DEPTH`], so a line it accepted always reads here); the
//! work is linear in the input.

use rosgate_wire::MAX_JSON_DEPTH;
use serde_json::{Map, Number, Value};

/// Reads `text` as one JSON value (whitespace around it allowed).
pub fn from_slice(text: &[u8]) -> Result<Value, String> {
    let mut r = Reader { b: text, i: 0 };
    let v = r.value(0)?;
    r.ws();
    if r.i != r.b.len() {
        return Err(format!("trailing characters at byte {}", r.i));
    }
    Ok(v)
}

/// As [`from_slice`], for text.
pub fn from_str(text: &str) -> Result<Value, String> {
    from_slice(text.as_bytes())
}

struct Reader<'a> {
    b: &'a [u8],
    i: usize,
}

impl Reader<'_> {
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.b.get(self.i) {
            self.i += 1;
        }
    }

    fn err<T>(&self, what: &str) -> Result<T, String> {
        Err(format!("{what} at byte {}", self.i))
    }

    fn value(&mut self, depth: usize) -> Result<Value, String> {
        if depth > MAX_JSON_DEPTH {
            return self.err("nesting too deep");
        }
        self.ws();
        match self.b.get(self.i) {
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => self.string().map(Value::String),
            Some(b't') => self.word(b"true", Value::Bool(true)),
            Some(b'f') => self.word(b"false", Value::Bool(false)),
            Some(b'n') => self.word(b"null", Value::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => self.err("expected a value"),
        }
    }

    fn word(&mut self, w: &[u8], v: Value) -> Result<Value, String> {
        if self.b[self.i..].starts_with(w) {
            self.i += w.len();
            Ok(v)
        } else {
            self.err("expected a value")
        }
    }

    fn object(&mut self, depth: usize) -> Result<Value, String> {
        self.i += 1;
        let mut m = Map::new();
        self.ws();
        if self.b.get(self.i) == Some(&b'}') {
            self.i += 1;
            return Ok(Value::Object(m));
        }
        loop {
            self.ws();
            if self.b.get(self.i) != Some(&b'"') {
                return self.err("expected a key");
            }
            let k = self.string()?;
            self.ws();
            if self.b.get(self.i) != Some(&b':') {
                return self.err("expected ':'");
            }
            self.i += 1;
            let v = self.value(depth + 1)?;
            // A repeated key: the last wins, as with serde_json.
            m.insert(k, v);
            self.ws();
            match self.b.get(self.i) {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    return Ok(Value::Object(m));
                }
                _ => return self.err("expected ',' or '}'"),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<Value, String> {
        self.i += 1;
        let mut a = Vec::new();
        self.ws();
        if self.b.get(self.i) == Some(&b']') {
            self.i += 1;
            return Ok(Value::Array(a));
        }
        loop {
            a.push(self.value(depth + 1)?);
            self.ws();
            match self.b.get(self.i) {
                Some(b',') => self.i += 1,
                Some(b']') => {
                    self.i += 1;
                    return Ok(Value::Array(a));
                }
                _ => return self.err("expected ',' or ']'"),
            }
        }
    }

    /// A string token, escapes and all, read by serde_json (strings have no
    /// rounding to get wrong).
    fn string(&mut self) -> Result<String, String> {
        let start = self.i;
        self.i += 1;
        loop {
            match self.b.get(self.i) {
                None => return self.err("unterminated string"),
                Some(b'"') => break,
                Some(b'\\') => self.i += 2,
                Some(_) => self.i += 1,
            }
        }
        self.i += 1;
        let token = self.b.get(start..self.i).unwrap_or_default();
        serde_json::from_slice(token).map_err(|e| format!("bad string at byte {start}: {e}"))
    }

    fn number(&mut self) -> Result<Value, String> {
        let start = self.i;
        let mut float = false;
        while let Some(c) = self.b.get(self.i) {
            match c {
                b'0'..=b'9' | b'-' | b'+' => {}
                b'.' | b'e' | b'E' => float = true,
                _ => break,
            }
            self.i += 1;
        }
        let text = std::str::from_utf8(&self.b[start..self.i]).unwrap_or_default();
        if !valid_number(text.as_bytes()) {
            return Err(format!("bad number at byte {start}"));
        }
        if !float {
            if let Ok(n) = text.parse::<i64>() {
                return Ok(Value::Number(n.into()));
            }
            if let Ok(n) = text.parse::<u64>() {
                return Ok(Value::Number(n.into()));
            }
        }
        // Correctly rounded (Rust's parser), unlike serde_json's default.
        let x: f64 = text
            .parse()
            .map_err(|_| format!("bad number at byte {start}"))?;
        Number::from_f64(x)
            .map(Value::Number)
            .ok_or_else(|| format!("number out of range at byte {start}"))
    }
}

/// JSON's number grammar (RFC 8259 section 6): `-? int frac? exp?`, no
/// leading zeros, at least one digit in each part.
fn valid_number(t: &[u8]) -> bool {
    let mut i = usize::from(t.first() == Some(&b'-'));
    let digits = |i: &mut usize| {
        let s = *i;
        while t.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i - s
    };
    match t.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => {
            digits(&mut i);
        }
        _ => return false,
    }
    if t.get(i) == Some(&b'.') {
        i += 1;
        if digits(&mut i) == 0 {
            return false;
        }
    }
    if matches!(t.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(t.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == t.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_serde_json_reads_with_exact_floats() {
        for text in [
            r#"{"a":[1,-2,3.5,"x\n\u00e9",true,false,null],"b":{"c":{}},"d":[]}"#,
            r#" [ 18446744073709551615 , -9223372036854775808, 0.0, -0.0, 1e-400 ] "#,
            r#""\ud83d\ude00""#,
        ] {
            let ours = from_str(text).unwrap();
            let theirs: Value = serde_json::from_str(text).unwrap();
            assert_eq!(ours, theirs, "{text}");
        }
        // A double serde_json's default parser reads an ulp off.
        let x = 1.1688478275298444e-236_f64;
        let v = from_str(&format!("[{x}]")).unwrap();
        assert_eq!(v[0].as_f64().unwrap().to_bits(), x.to_bits());
        assert_eq!(
            from_str("-0.0").unwrap().as_f64().unwrap().to_bits(),
            (-0.0f64).to_bits()
        );
    }

    #[test]
    fn every_double_written_shortest_reads_back_bit_for_bit() {
        let mut s: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..200_000 {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let x = f64::from_bits(s);
            if !x.is_finite() {
                continue;
            }
            let text = serde_json::to_string(&x).unwrap();
            let back = from_str(&text).unwrap().as_f64().unwrap();
            assert_eq!(back.to_bits(), x.to_bits(), "{text}");
        }
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        for text in [
            "",
            "{",
            "[1,",
            "{\"a\"}",
            "{\"a\":}",
            "01",
            "1.",
            ".5",
            "1e",
            "-",
            "--1",
            "1e999",
            "\"abc",
            "\"\\",
            "tru",
            "[1]x",
            "{\"a\":1,}",
            "[1,]",
            "+1",
            "\"\\ud800\"",
        ] {
            assert!(from_str(text).is_err(), "{text:?}");
        }
        let deep = "[".repeat(MAX_JSON_DEPTH + 2) + &"]".repeat(MAX_JSON_DEPTH + 2);
        assert!(from_str(&deep).is_err());
        let ok = "[".repeat(MAX_JSON_DEPTH + 1) + &"]".repeat(MAX_JSON_DEPTH + 1);
        assert!(from_str(&ok).is_ok());
    }
}
