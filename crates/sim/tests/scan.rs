//! The scanner against serde_json: hand-picked cases, the depth boundary and a
//! seeded differential run (moved out of the wire crate with the parity
//! check, so the production crate carries no test machinery).

use rosgate_sim::scan_parity::check;
use rosgate_wire::scan::*;

fn members(text: &str) -> Result<Vec<(&str, bool, &str)>, ScanError> {
    let mut out = Vec::new();
    scan_object(text, usize::MAX, |m| {
        out.push((m.key, m.key_escaped, m.value))
    })?;
    Ok(out)
}

fn verdict(text: &str) -> Result<(), ScanError> {
    check(text);
    scan_object(text, usize::MAX, |_| {})
}

const OK: Result<(), ScanError> = Ok(());
const SYNTAX: Result<(), ScanError> = Err(ScanError::Syntax);
const NOT_OBJECT: Result<(), ScanError> = Err(ScanError::NotObject);

#[test]
fn publish_line_members() {
    let line = r#"{"op":"publish","topic":"/bench/0","msg":{"p":0,"s":123,"t":1733,"d":"xxxx"}}"#;
    check(line);
    assert_eq!(
        members(line),
        Ok(vec![
            ("op", false, r#""publish""#),
            ("topic", false, r#""/bench/0""#),
            ("msg", false, r#"{"p":0,"s":123,"t":1733,"d":"xxxx"}"#),
        ])
    );
}

#[test]
fn spans_exclude_whitespace_and_keep_escapes() {
    let line = " \t{ \"a\\u0062\" :\r\n [ 1 , {} ] ,\"\\\"\":\"x\\ny\" , \"a\":null\n} \r\n";
    check(line);
    assert_eq!(
        members(line),
        Ok(vec![
            ("a\\u0062", true, "[ 1 , {} ]"),
            ("\\\"", true, "\"x\\ny\""),
            ("a", false, "null"),
        ])
    );
    assert_eq!(members("{}"), Ok(vec![]));
    assert_eq!(members("{\"\":\"\"}"), Ok(vec![("", false, "\"\"")]));
}

#[test]
fn non_objects() {
    for text in [
        "[]", "[1,2]", "\"s\"", "0", "-0", "1e5", "true", "false", "null", " [ ] ",
    ] {
        assert_eq!(verdict(text), NOT_OBJECT, "{text}");
        assert_eq!(members(text), Err(ScanError::NotObject), "{text}");
    }
}

#[test]
fn numbers() {
    for n in [
        "0",
        "-0",
        "1",
        "-1",
        "10",
        "0.5",
        "-0.0",
        "1e5",
        "1E5",
        "1e+5",
        "1e-5",
        "1.5e10",
        "0e0",
        "12345678901234567890123456789012345678901234567890",
        "1.79769313486231e308",
        "-1.7976931348623e308",
        // f64::MAX in several spellings, as Python's json.dumps and
        // JavaScript's JSON.stringify write it and otherwise.
        "1.7976931348623157e308",
        "1.7976931348623157e+308",
        "1.7976931348623157E+308",
        "-1.7976931348623157e308",
        "1.79769313486231580e308",
        "179.76931348623157e306",
        "0.00017976931348623157e312",
        // The smallest subnormal, and values that underflow to 0.
        "5e-324",
        "4.9406564584124654e-324",
        "-5e-324",
        "1e-400",
        "-1e-99999999999999999999",
        "0e99999999999999999999",
        "0e99999",
        "0.0000001e314",
        "1000e-10000",
    ] {
        assert_eq!(verdict(&format!("{{\"n\":{n}}}")), OK, "{n}");
        assert_eq!(verdict(&format!("[{n}]")), NOT_OBJECT, "{n}");
    }
    let big_int = format!("9{}", "0".repeat(308));
    let huge_int = format!("1{}", "0".repeat(4400));
    // Up to 308 digits an integer is in range; past f64, serde_json (and,
    // past 4300 digits, Python) refuses it.
    let fine_int = "9".repeat(308);
    assert_eq!(verdict(&format!("{{\"n\":{fine_int}}}")), OK);
    // f64::MAX written as a 309-digit integer: Python and JavaScript read
    // it, serde_json's default parser computes an infinity.
    let max_int = format!("17976931348623157{}", "0".repeat(292));
    for n in [
        "1e400",
        "1e309",
        "-1e309",
        "1.8e308",
        "1.7976931348623159e308",
        "123.4e307",
        "1e99999999999999999999",
        big_int.as_str(),
        huge_int.as_str(),
        // Below f64::MAX plus half an ulp (so f64::MAX in Python and
        // JavaScript), but infinite for serde_json's default parser ...
        "1.7976931348623158e308",
        "1.797693134862315807e308",
        max_int.as_str(),
        // ... and above it (infinite in Python and JavaScript), but
        // f64::MAX for serde_json.
        "1.79769313486231589e308",
    ] {
        assert_eq!(
            verdict(&format!("{{\"n\":{n}}}")),
            Err(ScanError::NumberOutOfRange),
            "{}",
            &n[..n.len().min(30)]
        );
        assert_eq!(
            verdict(&format!("[1,{n}]")),
            Err(ScanError::NumberOutOfRange)
        );
    }
    for n in [
        "01", "-01", "00", "+1", ".5", "1.", "-", "-a", "1e", "1e+", "1E-", "1.e5", "1.5.3",
        "0x10", "1e5.0", "- 1", "--1", "Infinity", "NaN", "1 2",
    ] {
        assert_eq!(verdict(&format!("{{\"n\":{n}}}")), SYNTAX, "{n}");
        assert_eq!(verdict(n), SYNTAX, "{n}");
    }
}

#[test]
fn strings() {
    for s in [
        r#""""#,
        r#""\"\\\/\b\f\n\r\t""#,
        r#""\u00e9\uABCD\uabcd""#,
        "\"\u{7f}\"",
        "\"é€😀\"",
        r#""\ud83d\ude00""#,
        r#""\uDBFF\uDFFFx\uD800\uDC00""#,
    ] {
        assert_eq!(verdict(s), NOT_OBJECT, "{s}");
        assert_eq!(verdict(&format!("{{{s}:{s}}}")), OK, "{s}");
    }
    // Grammatical, but serde_json's Value refuses unpaired surrogates.
    for s in [
        r#""\ud800""#,
        r#""\udc00\ud800x""#,
        r#""\ud800\u0041""#,
        r#""\ud800\n""#,
        r#""x\uDFFF""#,
    ] {
        assert_eq!(verdict(s), Err(ScanError::LoneSurrogate), "{s}");
        assert_eq!(
            verdict(&format!("{{\"k\":{s}}}")),
            Err(ScanError::LoneSurrogate),
            "{s}"
        );
        assert_eq!(
            verdict(&format!("{{{s}:1}}")),
            Err(ScanError::LoneSurrogate),
            "{s} as a key"
        );
    }
    for s in [
        "\"",
        "\"abc",
        "\"\\\"",
        "\"\\x\"",
        "\"\\u12\"",
        "\"\\u12g4\"",
        "\"\\U0041\"",
        "\"\u{0}\"",
        "\"\u{1f}\"",
        "\"a\nb\"",
        "\"\t\"",
        "'a'",
    ] {
        assert_eq!(verdict(s), SYNTAX, "{s:?}");
        assert_eq!(verdict(&format!("{{\"k\":{s}}}")), SYNTAX, "{s:?}");
        assert_eq!(verdict(&format!("{{{s}:1}}")), SYNTAX, "{s:?}");
    }
    // Long strings go through the block and word loops; put the special
    // byte at every offset.
    for len in 0..100 {
        let body = "x".repeat(len);
        assert_eq!(verdict(&format!("{{\"k\":\"{body}\"}}")), OK);
        assert_eq!(verdict(&format!("{{\"k\":\"{body}\\n{body}\"}}")), OK);
        assert_eq!(verdict(&format!("{{\"k\":\"{body}\u{1}{body}\"}}")), SYNTAX);
        assert_eq!(verdict(&format!("{{\"k\":\"{body}")), SYNTAX);
        assert_eq!(verdict(&format!("{{\"k\":\"{body}é\"}}")), OK);
    }
}

#[test]
fn literals_and_whitespace() {
    for t in ["true", "false", "null", " \t\r\nnull\n\r\t "] {
        assert_eq!(verdict(t), NOT_OBJECT, "{t:?}");
    }
    for t in [
        "tru",
        "nul",
        "fals",
        "True",
        "nulll",
        "truefalse",
        "",
        " ",
        "\u{c}{}",
        "{}\u{c}",
        "\u{a0}{}",
        "{}\u{a0}",
        "{}{}",
        "{} x",
        "\u{feff}{}",
    ] {
        assert_eq!(verdict(t), SYNTAX, "{t:?}");
    }
    assert_eq!(
        verdict(" \n\t\r{ \n\"a\" \t: \r1 \n, \"b\"\n:\n[ ] }\r\n "),
        OK
    );
}

#[test]
fn structure() {
    for t in [
        "{\"a\":1,\"a\":2}",
        "{\"a\":{}}",
        "{\"a\":[]}",
        "{\"a\":[[],[{}],{\"b\":[1,\"]\"]}]}",
    ] {
        assert_eq!(verdict(t), OK, "{t}");
    }
    for t in [
        "{",
        "}",
        "[",
        "]",
        "{\"a\"}",
        "{\"a\":}",
        "{\"a\" 1}",
        "{\"a\":1,}",
        "{,}",
        "{1:2}",
        "{a:1}",
        "{\"a\":1 \"b\":2}",
        "[1,]",
        "[,1]",
        "[1 2]",
        "{\"a\":[1}",
        "{\"a\":{]}",
        "[}",
        "{]",
        "{\"a\":1}}",
        "[[]",
        "{\"a\":1]",
    ] {
        assert_eq!(verdict(t), SYNTAX, "{t}");
    }
}

fn nested(n: usize) -> String {
    format!("{{\"a\":{}{},\"id\":7}}", "[".repeat(n), "]".repeat(n))
}

#[test]
fn depth_boundary() {
    let count = |text: &str, max| {
        let mut ids = 0;
        let r = scan_object(text, max, |m| ids += usize::from(m.key == "id"));
        (r, ids)
    };
    assert_eq!(count(&nested(127), 128), (Ok(()), 1));
    // Too deep, but still validated to the end with every member reported.
    assert_eq!(count(&nested(128), 128), (Err(ScanError::TooDeep), 1));
    assert_eq!(count("{}", 1), (Ok(()), 0));
    assert_eq!(count("{}", 0), (Err(ScanError::TooDeep), 0));
    // Syntax and NotObject rank above TooDeep.
    let bad = format!("{{\"a\":{}{}}}", "[".repeat(200), "]".repeat(199));
    assert_eq!(count(&bad, 128).0, Err(ScanError::Syntax));
    let array = format!("{}{}", "[".repeat(200), "]".repeat(200));
    assert_eq!(count(&array, 128).0, Err(ScanError::NotObject));
    // Deep nesting beyond the inline levels, with mixed kinds.
    for n in [255, 256, 257, 300, 100_000] {
        let mixed = format!(
            "{{\"a\":{}1{},\"id\":7}}",
            "[{\"k\":".repeat(n),
            "}]".repeat(n)
        );
        assert_eq!(count(&mixed, usize::MAX), (Ok(()), 1), "{n}");
        assert_eq!(count(&mixed, 2 * n + 1), (Ok(()), 1), "{n}");
        assert_eq!(count(&mixed, 2 * n), (Err(ScanError::TooDeep), 1), "{n}");
        let wrong = format!("{{\"a\":{}1{}]}}", "[{\"k\":".repeat(n), "}]".repeat(n - 1));
        assert_eq!(count(&wrong, usize::MAX).0, Err(ScanError::Syntax), "{n}");
        check(&nested(n));
        check(&mixed);
    }
    // serde_json's recursion limit does not apply to skipped values.
    assert!(serde_json::from_str::<&serde_json::value::RawValue>(&nested(100_000)).is_ok());
}

/// splitmix64: deterministic and dependency-free.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

const WS: &[&str] = &["", "", "", " ", "\t", "\n", "\r", "  ", " \r\n\t "];

fn ws(rng: &mut Rng, out: &mut String) {
    if rng.chance(30) {
        out.push_str(rng.pick(WS));
    }
}

fn digits(rng: &mut Rng, out: &mut String, first_nonzero: bool) {
    let n = if rng.chance(5) {
        20 + rng.below(40)
    } else {
        1 + rng.below(4)
    };
    for k in 0..n {
        let lo = if k == 0 && first_nonzero { 1 } else { 0 };
        out.push(char::from(b'0' + (lo + rng.below(10 - lo as usize) as u8)));
    }
}

fn number(rng: &mut Rng, out: &mut String) {
    if rng.chance(20) {
        out.push('-');
    }
    if rng.chance(25) {
        out.push('0');
    } else {
        digits(rng, out, true);
    }
    if rng.chance(25) {
        out.push('.');
        digits(rng, out, false);
    }
    if rng.chance(20) {
        out.push_str(rng.pick(&["e", "E"]));
        out.push_str(rng.pick(&["", "+", "-"]));
        if rng.chance(20) {
            // Near and past the top of the f64 range.
            out.push_str(rng.pick(&["306", "307", "308", "309", "400", "0308"]));
        } else {
            digits(rng, out, false);
        }
    }
}

const PIECES: &[&str] = &[
    "a",
    "b",
    "op",
    "msg",
    "xyz",
    " ",
    "/",
    "é",
    "€",
    "😀",
    "\u{7f}",
    "[",
    "{",
    ":",
    ",",
    "\\\"",
    "\\\\",
    "\\/",
    "\\b",
    "\\f",
    "\\n",
    "\\r",
    "\\t",
    "\\u0041",
    "\\u00e9",
    "\\uD83D\\uDE00",
    "\\ud800",
    "\\uDFFF",
    "\\uabcd",
];

fn string(rng: &mut Rng, out: &mut String) {
    out.push('"');
    if rng.chance(5) {
        // Long enough for the block loop.
        for _ in 0..rng.below(200) {
            out.push(char::from(b'A' + rng.below(26) as u8));
        }
    }
    for _ in 0..rng.below(6) {
        out.push_str(rng.pick(PIECES));
    }
    out.push('"');
}

fn value(rng: &mut Rng, out: &mut String, depth: usize) {
    let kind = if depth > 5 {
        2 + rng.below(5)
    } else {
        rng.below(7)
    };
    match kind {
        0 => object(rng, out, depth + 1),
        1 => {
            out.push('[');
            ws(rng, out);
            for k in 0..rng.below(5) {
                if k > 0 {
                    out.push(',');
                    ws(rng, out);
                }
                value(rng, out, depth + 1);
                ws(rng, out);
            }
            out.push(']');
        }
        2 | 3 => string(rng, out),
        4 | 5 => number(rng, out),
        _ => out.push_str(rng.pick(&["true", "false", "null"])),
    }
}

fn object(rng: &mut Rng, out: &mut String, depth: usize) {
    out.push('{');
    ws(rng, out);
    for k in 0..rng.below(5) {
        if k > 0 {
            out.push(',');
            ws(rng, out);
        }
        string(rng, out);
        ws(rng, out);
        out.push(':');
        ws(rng, out);
        value(rng, out, depth);
        ws(rng, out);
    }
    out.push('}');
}

const INSERTS: &[&str] = &[
    "{", "}", "[", "]", "\"", ":", ",", "\\", "0", "1", "9", "-", "+", ".", "e", "E", "t", "f",
    "n", "u", "a", "x", "\u{0}", "\u{1f}", "\u{7f}", "é", " ", "\t", "\n", "\r", "\u{c}", "\u{a0}",
    "true", "null", "\\u", "\\ud800", "01", "1.", "1e", "/",
];

/// Breaks `text` in one to three places, keeping it valid UTF-8.
fn mutate(rng: &mut Rng, text: &mut String) {
    for _ in 0..1 + rng.below(3) {
        let mut at = rng.below(text.len() + 1);
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        match rng.below(5) {
            0 => text.truncate(at),
            1 => text.insert_str(at, rng.pick(INSERTS)),
            2 | 3 => {
                if let Some(c) = text[at..].chars().next() {
                    text.replace_range(at..at + c.len_utf8(), "");
                    if rng.chance(70) {
                        text.insert_str(at, rng.pick(INSERTS));
                    }
                }
            }
            _ => {
                let mut end = (at + rng.below(8)).min(text.len());
                while !text.is_char_boundary(end) {
                    end -= 1;
                }
                let copy = text[at..end].to_string();
                text.insert_str(at, &copy);
            }
        }
    }
}

/// Numbers within a few ulps of `f64::MAX` in many spellings, where
/// serde_json's default parser and correct rounding disagree both ways: the
/// parity check holds for each, and both kinds of disagreement are met.
#[test]
fn numbers_at_the_top_of_the_range_against_serde_json() {
    let mut rng = Rng(0x7f7f_ffff);
    let (mut serde_only_inf, mut exact_only_inf, mut accepted) = (0, 0, 0);
    for _ in 0..20_000 {
        let mut digits = String::from("1797693134862315");
        for _ in 0..1 + rng.below(8) {
            digits.push(char::from(b'0' + rng.below(10) as u8));
        }
        let n = match rng.below(3) {
            // As an integer: 309 digits.
            0 => format!("{digits}{}", "0".repeat(309 - digits.len())),
            // d.ddd...e308, or the point moved with the exponent to match.
            _ => {
                let point = 1 + rng.below(digits.len() - 1);
                let e = rng.pick(&["e", "E", "e+"]);
                format!(
                    "{}.{}{e}{}",
                    &digits[..point],
                    &digits[point..],
                    309 - point
                )
            }
        };
        let exact_inf = n.parse::<f64>().is_ok_and(f64::is_infinite);
        let serde_inf = serde_json::from_str::<f64>(&n).is_err();
        serde_only_inf += usize::from(serde_inf && !exact_inf);
        exact_only_inf += usize::from(exact_inf && !serde_inf);
        let line = format!(r#"{{"msg":{{"v":[{n}]}},"id":1}}"#);
        check(&line);
        let verdict = scan_object(&line, usize::MAX, |_| {});
        if exact_inf || serde_inf {
            assert_eq!(verdict, Err(ScanError::NumberOutOfRange), "{n}");
            // The id after the refused number is still reported.
            assert_eq!(members(&line).err(), Some(ScanError::NumberOutOfRange));
            let mut ids = Vec::new();
            let _ = scan_object(&line, usize::MAX, |m| ids.push(m.key));
            assert_eq!(ids, ["id"], "{n}");
        } else {
            assert_eq!(verdict, OK, "{n}");
            accepted += 1;
        }
    }
    eprintln!("top of range: {accepted} accepted, {serde_only_inf} infinite for serde_json only, {exact_only_inf} infinite when rounded correctly only");
    assert!(accepted > 1000 && serde_only_inf > 100 && exact_only_inf > 100);
}

#[test]
fn differential_against_serde_json() {
    let mut rng = Rng(0x5eed_da7a);
    let (mut ok, mut not_object, mut syntax) = (0usize, 0usize, 0usize);
    let mut text = String::new();
    for _ in 0..200_000 {
        text.clear();
        ws(&mut rng, &mut text);
        if rng.chance(75) {
            object(&mut rng, &mut text, 1);
        } else {
            value(&mut rng, &mut text, 1);
        }
        ws(&mut rng, &mut text);
        if rng.chance(50) {
            mutate(&mut rng, &mut text);
        }
        check(&text);
        match scan_object(&text, usize::MAX, |_| {}) {
            Ok(()) => ok += 1,
            Err(ScanError::NotObject) => not_object += 1,
            Err(_) => syntax += 1,
        }
    }
    eprintln!("differential: {ok} objects, {not_object} other values, {syntax} invalid");
    // Every class is well represented.
    assert!(ok > 50_000 && not_object > 20_000 && syntax > 40_000);
}
