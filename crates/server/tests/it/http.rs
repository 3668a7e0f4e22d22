//! The HTTP side of the WebSocket port: a request without `Upgrade` is plain
//! HTTP, answered once and closed (`/metrics`, `/healthz`, `/version`, the
//! dashboard), and a broken, oversized or stalled request head is refused
//! without ever slowing the loop that serves the TCP clients.
//!
//! `/metrics` is checked by a strict validator of the Prometheus text
//! exposition format (0.0.4) written here, and against the live
//! `/rosgate/stats` reply so a counter added later cannot be missing.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::*;
use crate::wsclient::ws_addr;

// ---------------------------------------------------------------------------------------------
// A one-request HTTP client
// ---------------------------------------------------------------------------------------------

/// What came back on one HTTP connection.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub reason: String,
    /// Header names lower-cased, values trimmed, in order.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Every byte received, head included.
    pub raw: Vec<u8>,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8(self.body.clone()).expect("body is UTF-8")
    }
}

/// How a connection ended.
#[derive(Debug, PartialEq, Eq)]
pub enum End {
    /// The gateway closed it (FIN, or a reset after its answer).
    Closed,
    /// Still open at the deadline.
    Open,
}

/// Reads everything until the peer closes or `dl` passes.
pub fn read_to_end(s: &mut TcpStream, dl: Instant) -> (Vec<u8>, End) {
    let mut out = Vec::new();
    let mut tmp = [0u8; 65536];
    loop {
        let now = Instant::now();
        if now >= dl {
            return (out, End::Open);
        }
        s.set_read_timeout(Some((dl - now).max(ms(1))))
            .expect("read timeout");
        match s.read(&mut tmp) {
            Ok(0) => return (out, End::Closed),
            Ok(n) => out.extend_from_slice(&tmp[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return (out, End::Closed),
        }
    }
}

/// Parses a complete HTTP/1.1 response (head and body).
pub fn parse_reply(raw: Vec<u8>) -> Reply {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| {
            panic!(
                "no complete response head: {:?}",
                String::from_utf8_lossy(&raw)
            )
        });
    let head = std::str::from_utf8(&raw[..end]).expect("response head is ASCII");
    let mut lines = head.split("\r\n");
    let status_line = lines.next().expect("status line");
    let mut parts = status_line.splitn(3, ' ');
    assert_eq!(parts.next(), Some("HTTP/1.1"), "{status_line}");
    let status: u16 = parts
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
    let reason = parts.next().unwrap_or_default().to_string();
    let headers = lines
        .map(|l| {
            let (k, v) = l
                .split_once(':')
                .unwrap_or_else(|| panic!("bad header line {l:?}"));
            (k.trim().to_ascii_lowercase(), v.trim().to_string())
        })
        .collect();
    let body = raw[end + 4..].to_vec();
    Reply {
        status,
        reason,
        headers,
        body,
        raw,
    }
}

/// Sends `req` on a fresh connection to `addr`; the gateway must answer and
/// close within the reply deadline.
pub fn exchange(addr: SocketAddr, req: &[u8]) -> Reply {
    let mut s = TcpStream::connect_timeout(&addr, REPLY).expect("connect the ws port");
    s.write_all(req).expect("send the request");
    let (raw, end) = read_to_end(&mut s, deadline(REPLY));
    assert_eq!(
        end,
        End::Closed,
        "one request per connection: the gateway must close after answering; got {:?}",
        String::from_utf8_lossy(&raw)
    );
    parse_reply(raw)
}

/// `METHOD path` with the usual headers, on the gateway's WebSocket port.
pub fn request(gw: &Gateway, method: &str, path: &str) -> Reply {
    let req = format!("{method} {path} HTTP/1.1\r\nHost: rosgate\r\nUser-Agent: it\r\n\r\n");
    let r = exchange(ws_addr(gw), req.as_bytes());
    if method != "HEAD" {
        let len: usize = r
            .header("content-length")
            .unwrap_or_else(|| panic!("{method} {path}: no Content-Length: {:?}", r.headers))
            .parse()
            .expect("numeric Content-Length");
        assert_eq!(len, r.body.len(), "{method} {path}: Content-Length vs body");
    }
    assert_eq!(
        r.header("connection"),
        Some("close"),
        "{method} {path}: {:?}",
        r.headers
    );
    r
}

pub fn get(gw: &Gateway, path: &str) -> Reply {
    request(gw, "GET", path)
}

/// `GET /metrics`: 200, the 0.0.4 content type, and a valid exposition.
pub fn metrics(gw: &Gateway) -> Exposition {
    let r = get(gw, "/metrics");
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.raw));
    let ct = r.header("content-type").expect("content type");
    assert!(
        ct.starts_with("text/plain; version=0.0.4"),
        "content type {ct:?}"
    );
    let text = r.text();
    Exposition::parse(&text).unwrap_or_else(|e| panic!("invalid exposition: {e}\n{text}"))
}

/// A stats round trip on the main port, which must come back promptly.
fn assert_timely(c: &mut Client, what: &str) -> Value {
    let t0 = Instant::now();
    let s = c.stats();
    let took = t0.elapsed();
    assert!(
        took < Duration::from_millis(1000),
        "{what}: a TCP stats round trip took {took:?}"
    );
    s
}

// ---------------------------------------------------------------------------------------------
// A strict validator of the Prometheus text exposition format (0.0.4)
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

#[derive(Debug, Clone)]
pub struct Family {
    pub name: String,
    pub help: String,
    pub kind: String,
    pub samples: Vec<Sample>,
}

#[derive(Debug)]
pub struct Exposition {
    pub families: Vec<Family>,
}

fn is_metric_name(s: &str) -> bool {
    let mut cs = s.chars();
    cs.next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && cs.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn is_label_name(s: &str) -> bool {
    let mut cs = s.chars();
    cs.next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && cs.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !s.starts_with("__")
}

/// A sample value as Go's ParseFloat reads it in the exposition: a decimal
/// number, `+Inf`, `-Inf` or `NaN`.
fn parse_value(s: &str) -> Result<f64, String> {
    match s {
        "+Inf" => return Ok(f64::INFINITY),
        "-Inf" => return Ok(f64::NEG_INFINITY),
        "NaN" => return Ok(f64::NAN),
        _ => {}
    }
    let b = s.as_bytes();
    let mut i = 0;
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
        i += 1;
    }
    let int_start = i;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    let mut digits = i - int_start;
    if i < b.len() && b[i] == b'.' {
        i += 1;
        let f = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        digits += i - f;
    }
    if digits == 0 {
        return Err(format!("bad value {s:?}"));
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
            i += 1;
        }
        let e = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == e {
            return Err(format!("bad exponent in {s:?}"));
        }
    }
    if i != b.len() {
        return Err(format!("bad value {s:?}"));
    }
    s.parse::<f64>()
        .map_err(|e| format!("bad value {s:?}: {e}"))
}

/// Parses `name{k="v",...} value`; label values unescaped.
fn parse_sample(line: &str) -> Result<Sample, String> {
    let name_end = line
        .find(['{', ' '])
        .ok_or_else(|| format!("no value: {line:?}"))?;
    let name = &line[..name_end];
    if !is_metric_name(name) {
        return Err(format!("bad metric name {name:?}: {line:?}"));
    }
    let mut rest = &line[name_end..];
    let mut labels: Vec<(String, String)> = Vec::new();
    if let Some(r) = rest.strip_prefix('{') {
        rest = r;
        loop {
            if let Some(r) = rest.strip_prefix('}') {
                rest = r;
                break;
            }
            let eq = rest
                .find('=')
                .ok_or_else(|| format!("label without '=': {line:?}"))?;
            let key = &rest[..eq];
            if !is_label_name(key) {
                return Err(format!("bad label name {key:?}: {line:?}"));
            }
            if labels.iter().any(|(k, _)| k == key) {
                return Err(format!("label {key:?} twice: {line:?}"));
            }
            rest = rest[eq + 1..]
                .strip_prefix('"')
                .ok_or_else(|| format!("unquoted label value: {line:?}"))?;
            let mut value = String::new();
            let mut chars = rest.char_indices();
            let close = loop {
                match chars.next() {
                    None => return Err(format!("unterminated label value: {line:?}")),
                    Some((i, '"')) => break i,
                    Some((_, '\\')) => match chars.next() {
                        Some((_, '\\')) => value.push('\\'),
                        Some((_, '"')) => value.push('"'),
                        Some((_, 'n')) => value.push('\n'),
                        other => {
                            return Err(format!("bad escape {other:?} in label value: {line:?}"))
                        }
                    },
                    Some((_, c)) => value.push(c),
                }
            };
            labels.push((key.to_string(), value));
            rest = &rest[close + 1..];
            if let Some(r) = rest.strip_prefix(',') {
                rest = r;
            } else if !rest.starts_with('}') {
                return Err(format!("expected ',' or '}}' after a label: {line:?}"));
            }
        }
    }
    let value = rest
        .strip_prefix(' ')
        .ok_or_else(|| format!("expected one space before the value: {line:?}"))?;
    if value.contains(' ') {
        return Err(format!("trailing fields after the value: {line:?}"));
    }
    Ok(Sample {
        name: name.to_string(),
        labels,
        value: parse_value(value)?,
    })
}

fn unescape_help(s: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut cs = s.chars();
    while let Some(c) = cs.next() {
        if c == '\\' {
            match cs.next() {
                Some('\\') => out.push('\\'),
                Some('n') => out.push('\n'),
                other => return Err(format!("bad escape {other:?} in help {s:?}")),
            }
        } else {
            out.push(c);
        }
    }
    Ok(out)
}

fn label(s: &Sample, key: &str) -> Option<String> {
    s.labels
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.clone())
}

impl Exposition {
    /// Parses and validates `text`; the first violation is the error.
    pub fn parse(text: &str) -> Result<Exposition, String> {
        if text.is_empty() || !text.ends_with('\n') {
            return Err("the exposition must end with a newline".into());
        }
        if text.contains('\r') {
            return Err("carriage return in the exposition".into());
        }
        let mut families: Vec<Family> = Vec::new();
        let mut names = HashSet::new();
        let mut series = HashSet::new();
        for (n, line) in text[..text.len() - 1].split('\n').enumerate() {
            let at = |e: String| format!("line {}: {e}", n + 1);
            if line.is_empty() {
                return Err(at("empty line".into()));
            }
            if let Some(rest) = line.strip_prefix("# HELP ") {
                let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
                if !is_metric_name(name) {
                    return Err(at(format!("bad name in HELP {name:?}")));
                }
                if help.is_empty() {
                    return Err(at(format!("empty HELP for {name}")));
                }
                if let Some(prev) = families.last() {
                    if prev.samples.is_empty() {
                        return Err(at(format!("family {} has no samples", prev.name)));
                    }
                }
                if !names.insert(name.to_string()) {
                    return Err(at(format!("family {name} described twice")));
                }
                families.push(Family {
                    name: name.to_string(),
                    help: unescape_help(help).map_err(at)?,
                    kind: String::new(),
                    samples: Vec::new(),
                });
                continue;
            }
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest
                    .split_once(' ')
                    .ok_or_else(|| at(format!("TYPE without a type: {line:?}")))?;
                let fam = families
                    .last_mut()
                    .filter(|f| f.name == name)
                    .ok_or_else(|| at(format!("TYPE {name} not right after its HELP")))?;
                if !fam.kind.is_empty() {
                    return Err(at(format!("second TYPE for {name}")));
                }
                if !matches!(kind, "counter" | "gauge" | "histogram") {
                    return Err(at(format!("type {kind:?} of {name}")));
                }
                if kind == "counter" && !name.ends_with("_total") {
                    return Err(at(format!("counter {name} does not end in _total")));
                }
                fam.kind = kind.to_string();
                continue;
            }
            if line.starts_with('#') {
                return Err(at(format!("unexpected comment {line:?}")));
            }
            let s = parse_sample(line).map_err(at)?;
            let fam = families
                .last_mut()
                .ok_or_else(|| at("sample before any HELP".into()))?;
            if fam.kind.is_empty() {
                return Err(at(format!("sample of {} before its TYPE", fam.name)));
            }
            let belongs = match fam.kind.as_str() {
                "histogram" => {
                    let suffix = s.name.strip_prefix(fam.name.as_str()).unwrap_or("?");
                    match suffix {
                        "_bucket" => label(&s, "le").is_some(),
                        "_sum" | "_count" => label(&s, "le").is_none(),
                        _ => false,
                    }
                }
                _ => s.name == fam.name && label(&s, "le").is_none(),
            };
            if !belongs {
                return Err(at(format!(
                    "sample {} does not belong to {} family {}",
                    s.name, fam.kind, fam.name
                )));
            }
            if fam.kind == "counter" && !(s.value.is_finite() && s.value >= 0.0) {
                return Err(at(format!("counter {} = {}", s.name, s.value)));
            }
            let mut key = s.labels.clone();
            key.sort();
            if !series.insert((s.name.clone(), key)) {
                return Err(at(format!("duplicate series {line:?}")));
            }
            fam.samples.push(s);
        }
        match families.last() {
            None => return Err("no families".into()),
            Some(f) if f.samples.is_empty() => {
                return Err(format!("family {} has no samples", f.name))
            }
            Some(_) => {}
        }
        for f in &families {
            if f.kind.is_empty() {
                return Err(format!("family {} has no TYPE", f.name));
            }
            if f.kind == "histogram" {
                check_histogram(f)?;
            }
        }
        Ok(Exposition { families })
    }

    pub fn family(&self, name: &str) -> Option<&Family> {
        self.families.iter().find(|f| f.name == name)
    }

    /// The value of the unlabelled sample `name`.
    pub fn value(&self, name: &str) -> f64 {
        self.families
            .iter()
            .flat_map(|f| &f.samples)
            .find(|s| s.name == name && s.labels.is_empty())
            .unwrap_or_else(|| panic!("no unlabelled sample {name}"))
            .value
    }

    /// (count, sum) of histogram `name`.
    pub fn histogram(&self, name: &str) -> (f64, f64) {
        let f = self
            .family(name)
            .unwrap_or_else(|| panic!("no histogram {name}"));
        assert_eq!(f.kind, "histogram", "{name}");
        (
            self.value(&format!("{name}_count")),
            self.value(&format!("{name}_sum")),
        )
    }
}

/// Buckets ascending with `+Inf` last, cumulative counts non-decreasing and
/// integral, `_count` equal to the `+Inf` bucket, one `_sum`, for every
/// label set of the family.
fn check_histogram(f: &Family) -> Result<(), String> {
    let without_le = |s: &Sample| -> Vec<(String, String)> {
        let mut l: Vec<_> = s
            .labels
            .iter()
            .filter(|(k, _)| k != "le")
            .cloned()
            .collect();
        l.sort();
        l
    };
    /// Per label set: (le, cumulative count) buckets, `_sum`, `_count`.
    type Group = (Vec<(f64, f64)>, Option<f64>, Option<f64>);
    let mut groups: BTreeMap<Vec<(String, String)>, Group> = BTreeMap::new();
    for s in &f.samples {
        let g = groups.entry(without_le(s)).or_default();
        match &s.name[f.name.len()..] {
            "_bucket" => {
                let le = label(s, "le").expect("bucket has le");
                let bound = parse_value(&le).map_err(|e| format!("{}: le {e}", f.name))?;
                g.0.push((bound, s.value));
            }
            "_sum" => g.1 = Some(s.value),
            "_count" => g.2 = Some(s.value),
            _ => unreachable!("checked when parsed"),
        }
    }
    for (labels, (buckets, sum, count)) in groups {
        let name = format!("{}{labels:?}", f.name);
        if buckets.is_empty() {
            return Err(format!("{name}: no buckets"));
        }
        for w in buckets.windows(2) {
            if w[0].0.is_nan() || w[0].0.partial_cmp(&w[1].0) != Some(std::cmp::Ordering::Less) {
                return Err(format!("{name}: le not strictly ascending: {buckets:?}"));
            }
            if w[1].1 < w[0].1 {
                return Err(format!("{name}: cumulative counts decrease: {buckets:?}"));
            }
        }
        let (last_le, inf) = *buckets.last().expect("non-empty");
        if last_le != f64::INFINITY {
            return Err(format!("{name}: the last bucket is not +Inf: {buckets:?}"));
        }
        if buckets.iter().any(|b| b.1 < 0.0 || b.1.fract() != 0.0) {
            return Err(format!("{name}: bucket counts not whole: {buckets:?}"));
        }
        let count = count.ok_or_else(|| format!("{name}: no _count"))?;
        let sum = sum.ok_or_else(|| format!("{name}: no _sum"))?;
        if count != inf {
            return Err(format!("{name}: _count {count} != +Inf bucket {inf}"));
        }
        if sum.is_nan() {
            return Err(format!("{name}: _sum is NaN"));
        }
    }
    Ok(())
}

#[test]
fn the_validator_refuses_broken_expositions() {
    let good = "# HELP a_total A.\n# TYPE a_total counter\na_total{k=\"x\\\"y\\\\z\\n\"} 3\n\
                # HELP g G.\n# TYPE g gauge\ng -1.5e3\n\
                # HELP h H.\n# TYPE h histogram\nh_bucket{le=\"0.5\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 1.25\nh_count 2\n";
    let e = Exposition::parse(good).expect("a valid exposition");
    assert_eq!(
        e.families[0].samples[0].labels,
        vec![("k".to_string(), "x\"y\\z\n".to_string())]
    );
    assert_eq!(e.histogram("h"), (2.0, 1.25));
    let broken: &[(&str, &str)] = &[
        ("no trailing newline", "# HELP g G.\n# TYPE g gauge\ng 1"),
        ("no HELP", "# TYPE g gauge\ng 1\n"),
        ("TYPE before HELP", "# TYPE g gauge\n# HELP g G.\ng 1\n"),
        ("no TYPE", "# HELP g G.\ng 1\n"),
        ("unknown type", "# HELP g G.\n# TYPE g summary\ng 1\n"),
        ("counter without _total", "# HELP c C.\n# TYPE c counter\nc 1\n"),
        ("negative counter", "# HELP c_total C.\n# TYPE c_total counter\nc_total -1\n"),
        ("foreign sample", "# HELP g G.\n# TYPE g gauge\nother 1\n"),
        ("duplicate series", "# HELP g G.\n# TYPE g gauge\ng{a=\"1\"} 1\ng{a=\"1\"} 2\n"),
        ("family twice", "# HELP g G.\n# TYPE g gauge\ng 1\n# HELP g G.\n# TYPE g gauge\ng 2\n"),
        ("bad escape", "# HELP g G.\n# TYPE g gauge\ng{a=\"\\t\"} 1\n"),
        ("unquoted label", "# HELP g G.\n# TYPE g gauge\ng{a=1} 1\n"),
        ("bad value", "# HELP g G.\n# TYPE g gauge\ng one\n"),
        ("timestamp", "# HELP g G.\n# TYPE g gauge\ng 1 1700000000\n"),
        ("empty line", "# HELP g G.\n# TYPE g gauge\n\ng 1\n"),
        ("no samples", "# HELP g G.\n# TYPE g gauge\n# HELP f F.\n# TYPE f gauge\nf 1\n"),
        (
            "buckets not ascending",
            "# HELP h H.\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"0.5\"} 1\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n",
        ),
        (
            "no +Inf bucket",
            "# HELP h H.\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n",
        ),
        (
            "not cumulative",
            "# HELP h H.\n# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n",
        ),
        (
            "count != +Inf",
            "# HELP h H.\n# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 3\n",
        ),
        (
            "no sum",
            "# HELP h H.\n# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_count 2\n",
        ),
    ];
    for (what, text) in broken {
        assert!(
            Exposition::parse(text).is_err(),
            "the validator accepted an exposition with {what}: {text:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// /metrics
// ---------------------------------------------------------------------------------------------

const HISTOGRAMS: [&str; 3] = [
    "rosgate_call_latency_seconds",
    "rosgate_goal_duration_seconds",
    "rosgate_connection_queued_bytes",
];

#[test]
fn metrics_is_strict_prometheus_and_carries_every_stats_counter() {
    let gw = Gateway::start(&[]);
    let mut watcher = gw.client();
    // Make some close and error counters non-zero so values are compared, not only names.
    {
        let mut c = gw.client();
        c.send_line("{not json");
        c.expect_error_no_id();
    }
    watcher.send_line(r#"{"op":"nope","id":"x"}"#);
    watcher.expect_error("x");
    let dl = deadline(REPLY);
    let stats = loop {
        let s = watcher.stats();
        if counter(&s, "closes.peer_closed") == 1 {
            break s;
        }
        assert!(Instant::now() < dl, "the client's close never counted: {s}");
        std::thread::sleep(ms(10));
    };
    // Nothing closes and nothing errs between the stats reply and the render.
    let m = metrics(&gw);

    for f in &m.families {
        assert!(
            f.name.starts_with("rosgate_"),
            "unprefixed family {}",
            f.name
        );
    }
    let obj = stats.as_object().expect("stats object");
    for (key, v) in obj {
        match v {
            Value::Number(n) => {
                let n = n.as_u64().unwrap_or_else(|| panic!("stats {key} = {n}")) as f64;
                // A gauge `rosgate_<key>`, a counter `rosgate_<key>_total`, or for
                // `closes_total`/`errors_total` the labelled family itself.
                let gauge = m
                    .family(&format!("rosgate_{key}"))
                    .filter(|f| f.kind == "gauge");
                let counter = m.family(&format!("rosgate_{key}_total")).or_else(|| {
                    m.family(&format!("rosgate_{key}"))
                        .filter(|f| f.kind == "counter")
                });
                let f = match (gauge, counter) {
                    (Some(g), None) => g,
                    (None, Some(c)) => {
                        assert_eq!(c.kind, "counter", "{}", c.name);
                        c
                    }
                    (Some(g), Some(c)) => {
                        panic!("stats {key}: both {} and {} exist", g.name, c.name)
                    }
                    (None, None) => panic!("stats counter {key} is missing from /metrics"),
                };
                if f.kind == "counter" && f.samples.iter().all(|s| s.labels.is_empty()) {
                    assert_eq!(f.samples.len(), 1, "{}", f.name);
                    assert!(
                        f.samples[0].value >= n,
                        "{}: {} < stats {n} read before",
                        f.name,
                        f.samples[0].value
                    );
                } else if f.kind == "counter" {
                    // `closes_total`, `errors_total`: the sum of the labelled family.
                    let sum: f64 = f.samples.iter().map(|s| s.value).sum();
                    assert_eq!(sum, n, "{}: sum of members vs stats {key}", f.name);
                }
            }
            Value::Object(members) => {
                let name = format!("rosgate_{key}_total");
                let f = m
                    .family(&name)
                    .unwrap_or_else(|| panic!("stats family {key} is missing from /metrics"));
                assert_eq!(f.kind, "counter", "{name}");
                let label_keys: BTreeSet<&str> = f
                    .samples
                    .iter()
                    .flat_map(|s| s.labels.iter().map(|(k, _)| k.as_str()))
                    .collect();
                assert_eq!(
                    label_keys.len(),
                    1,
                    "{name}: one label key, got {label_keys:?}"
                );
                let want_key = match key.as_str() {
                    "closes" => "reason",
                    "errors" => "code",
                    _ => label_keys.iter().next().copied().unwrap_or_default(),
                };
                assert!(label_keys.contains(want_key), "{name}: {label_keys:?}");
                let got: BTreeMap<String, f64> = f
                    .samples
                    .iter()
                    .map(|s| {
                        assert_eq!(s.labels.len(), 1, "{name}: {s:?}");
                        (s.labels[0].1.clone(), s.value)
                    })
                    .collect();
                let want: BTreeMap<String, f64> = members
                    .iter()
                    .map(|(k, v)| (k.clone(), v.as_u64().expect("member count") as f64))
                    .collect();
                assert_eq!(got, want, "{name} vs stats.{key}");
            }
            other => panic!("stats {key} is neither a number nor a family: {other}"),
        }
    }
    // And the other way: every family but the histograms is a stats member.
    for f in &m.families {
        if f.kind == "histogram" {
            assert!(
                HISTOGRAMS.contains(&f.name.as_str()),
                "unknown histogram {}",
                f.name
            );
            continue;
        }
        let stem = f.name.trim_start_matches("rosgate_");
        let key = match f.kind.as_str() {
            "counter" => stem.trim_end_matches("_total"),
            _ => stem,
        };
        assert!(
            obj.contains_key(key) || obj.contains_key(stem),
            "{} has no /rosgate/stats counterpart",
            f.name
        );
    }
    for h in HISTOGRAMS {
        let f = m
            .family(h)
            .unwrap_or_else(|| panic!("histogram {h} missing"));
        assert_eq!(f.kind, "histogram", "{h}");
        assert!(!f.help.is_empty());
    }
    assert_eq!(counter(&stats, "errors.bad_json"), 1, "{stats}");
    assert_eq!(counter(&stats, "errors.unknown_op"), 1, "{stats}");
    // The watcher and this request are open while /metrics is rendered, and it is
    // the first HTTP request; the queued-bytes histogram samples every open connection.
    assert_eq!(m.value("rosgate_connections_open"), 2.0);
    assert_eq!(m.value("rosgate_http_requests_total"), 1.0);
    assert_eq!(m.histogram("rosgate_connection_queued_bytes").0, 2.0);
    assert_eq!(m.histogram("rosgate_call_latency_seconds"), (0.0, 0.0));
    assert_eq!(m.histogram("rosgate_goal_duration_seconds"), (0.0, 0.0));
}

#[test]
fn a_service_round_trip_is_observed_in_the_call_latency_histogram() {
    let gw = Gateway::start(&[]);
    let mut provider = gw.client();
    provider.advertise_service("/lat_echo");
    let mut caller = gw.client();
    // Calls the gateway answers itself are not round trips through it.
    caller.stats();
    let before = metrics(&gw);
    let (c0, s0) = before.histogram("rosgate_call_latency_seconds");

    let t0 = Instant::now();
    caller.call("/lat_echo", "\"lat-1\"", r#"{"x":1}"#);
    let fwd = provider.expect_forwarded("/lat_echo");
    provider.respond("/lat_echo", &fwd["id"].to_string(), r#"{"x":1}"#, "true");
    let r = caller.expect_response("/lat_echo", &json!("lat-1"));
    let took = t0.elapsed().as_secs_f64();
    assert_eq!(r["result"], true, "{r}");

    let after = metrics(&gw);
    let (c1, s1) = after.histogram("rosgate_call_latency_seconds");
    assert_eq!(c1, c0 + 1.0, "one call answered, one observation");
    assert!(s1 > s0, "the latency sum grew: {s0} -> {s1}");
    assert!(
        s1 - s0 <= took,
        "the gateway measured {}s, more than the caller's whole round trip {took}s",
        s1 - s0
    );
    // The observation sits in a bucket whose bound covers it.
    let f = after
        .family("rosgate_call_latency_seconds")
        .expect("histogram");
    let first_hit = f
        .samples
        .iter()
        .find(|s| s.name.ends_with("_bucket") && s.value >= c1)
        .expect("the +Inf bucket at least");
    let le = parse_value(&label(first_hit, "le").expect("le")).expect("le value");
    assert!(le >= s1 - s0, "le {le} < observed {}", s1 - s0);
    assert_eq!(
        after.histogram("rosgate_goal_duration_seconds").0,
        before.histogram("rosgate_goal_duration_seconds").0,
        "no goal ran"
    );
    assert_eq!(after.value("rosgate_calls_answered_total"), 1.0);
}

#[test]
fn metrics_with_two_hundred_connections_answers_promptly_and_counts_them() {
    const N: usize = 200;
    let gw = Gateway::start(&[]);
    let mut clients: Vec<Client> = (0..N).map(|_| gw.client()).collect();
    // Half complete their opening with a first line; the other half stay pending.
    for c in clients.iter_mut().take(N / 2) {
        c.send_line(r#"{"op":"unsubscribe","topic":"/x","id":"hello"}"#);
    }
    for c in clients.iter_mut().take(N / 2) {
        c.expect_info("hello");
    }
    let dl = deadline(Duration::from_secs(10));
    let m = loop {
        let t0 = Instant::now();
        let m = metrics(&gw);
        let took = t0.elapsed();
        assert!(took < Duration::from_secs(2), "/metrics took {took:?}");
        let open = m.value("rosgate_connections_open");
        // N clients plus this request; never more.
        assert!(open <= (N + 1) as f64, "connections_open {open}");
        if open == (N + 1) as f64 {
            break m;
        }
        assert!(Instant::now() < dl, "connections_open stuck at {open}");
        std::thread::sleep(ms(20));
    };
    // The pending ones and the HTTP request itself have not completed an opening.
    assert_eq!(m.value("rosgate_connections_pending"), (N / 2 + 1) as f64);
    assert_eq!(
        m.histogram("rosgate_connection_queued_bytes").0,
        (N + 1) as f64
    );
    assert_eq!(
        m.value("rosgate_connections_accepted_total"),
        (N + 1) as f64
    );
    drop(clients);
}

// ---------------------------------------------------------------------------------------------
// The other endpoints
// ---------------------------------------------------------------------------------------------

#[test]
fn health_version_head_methods_unknown_paths_and_the_dashboard() {
    let gw = Gateway::start(&[]);
    let mut watcher = gw.client();
    let mut requests = 0u64;

    let r = get(&gw, "/healthz");
    requests += 1;
    assert_eq!((r.status, r.text().as_str()), (200, "ok\n"), "{r:?}");

    let r = get(&gw, "/version");
    requests += 1;
    assert_eq!(r.status, 200);
    assert!(r
        .header("content-type")
        .unwrap_or_default()
        .starts_with("application/json"));
    let v: Value = serde_json::from_slice(&r.body).expect("/version is JSON");
    for k in ["major", "minor", "patch"] {
        assert!(v["protocol"][k].is_u64(), "protocol.{k}: {v}");
    }
    assert_eq!(v["protocol"]["major"], 2, "rosbridge v2: {v}");
    assert_eq!(v["server"]["name"], "rosgate", "{v}");
    assert_eq!(v["server"]["version"], env!("CARGO_PKG_VERSION"), "{v}");

    // The query string does not change the path.
    let r = get(&gw, "/healthz?verbose=1");
    requests += 1;
    assert_eq!(r.status, 200);

    let page = get(&gw, "/");
    requests += 1;
    assert_eq!(page.status, 200);
    assert!(
        page.header("content-type")
            .unwrap_or_default()
            .starts_with("text/html"),
        "{:?}",
        page.headers
    );
    let html = page.text();
    assert!(html.contains("<html") && html.contains("rosgate"), "{html}");
    // Everything the page loads is served too, with a sensible type.
    let mut assets = 0;
    for attr in ["src=\"", "href=\""] {
        for part in html.split(attr).skip(1) {
            let path = part.split('"').next().expect("quoted");
            if !path.starts_with('/') {
                continue;
            }
            let a = get(&gw, path);
            requests += 1;
            assets += 1;
            assert_eq!(a.status, 200, "{path}");
            assert!(!a.body.is_empty(), "{path}");
            let ct = a.header("content-type").unwrap_or_default().to_string();
            if path.ends_with(".js") {
                assert!(ct.contains("javascript"), "{path}: {ct}");
            } else if path.ends_with(".css") {
                assert!(ct.starts_with("text/css"), "{path}: {ct}");
            }
        }
    }
    assert!(assets >= 1, "the dashboard loads its script: {html}");

    // HEAD: the same head as GET, no body.
    let head = request(&gw, "HEAD", "/");
    requests += 1;
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty(), "HEAD carried a body: {:?}", head.body);
    assert_eq!(head.header("content-type"), page.header("content-type"));
    assert_eq!(
        head.header("content-length"),
        Some(page.body.len().to_string().as_str())
    );
    let head = request(&gw, "HEAD", "/metrics");
    requests += 1;
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());

    for method in ["POST", "PUT", "DELETE", "OPTIONS"] {
        let req = format!("{method} /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
        let r = exchange(ws_addr(&gw), req.as_bytes());
        requests += 1;
        assert_eq!(
            (r.status, r.reason.as_str()),
            (405, "Method Not Allowed"),
            "{method}: {r:?}"
        );
        let allow = r.header("allow").unwrap_or_default().to_string();
        assert!(
            allow.contains("GET") && allow.contains("HEAD"),
            "{method}: Allow {allow:?}"
        );
    }

    for path in ["/nope", "/metrics/extra", "/index.htm", "/../etc/passwd"] {
        let r = get(&gw, path);
        requests += 1;
        assert_eq!(
            (r.status, r.reason.as_str()),
            (404, "Not Found"),
            "{path}: {r:?}"
        );
    }

    // Every one of them was answered once and closed, and counted as such.
    let dl = deadline(REPLY);
    loop {
        let s = assert_timely(&mut watcher, "after the HTTP requests");
        if counter(&s, "closes.http_served") == requests {
            assert_eq!(counter(&s, "http_requests"), requests, "{s}");
            assert_eq!(counter(&s, "closes.protocol_error"), 0, "{s}");
            assert_eq!(counter(&s, "connections_open"), 1, "{s}");
            break;
        }
        assert!(Instant::now() < dl, "http_served {s}");
        std::thread::sleep(ms(10));
    }
}

#[test]
fn one_request_per_connection_even_when_two_are_sent() {
    let gw = Gateway::start(&[]);
    let mut s = TcpStream::connect(ws_addr(&gw)).expect("connect");
    s.write_all(
        b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /version HTTP/1.1\r\nHost: x\r\n\r\n",
    )
    .expect("send");
    let (raw, end) = read_to_end(&mut s, deadline(REPLY));
    assert_eq!(end, End::Closed);
    let text = String::from_utf8_lossy(&raw).to_string();
    assert_eq!(text.matches("HTTP/1.1 ").count(), 1, "{text}");
    let r = parse_reply(raw);
    assert_eq!((r.status, r.text().as_str()), (200, "ok\n"));
    let s = gw.wait_for_stats("one request served", |s| {
        counter(s, "closes.http_served") == 1
    });
    assert_eq!(counter(&s, "http_requests"), 1, "{s}");
}

// ---------------------------------------------------------------------------------------------
// Broken, oversized and stalled request heads
// ---------------------------------------------------------------------------------------------

#[test]
fn malformed_request_heads_get_400_and_are_closed() {
    let gw = Gateway::start(&[]);
    let mut watcher = gw.client();
    let bad: &[&[u8]] = &[
        // A TLS ClientHello sent to the plain port.
        b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03\x00\x01\x02",
        b"\x00\x01\x02\x03\r\n\r\n",
        b"GET / HTTP/9.9\r\nHost: x\r\n\r\n",
        b"GET /\r\n\r\n",
        b"GET / HTTP/1.1\r\nBad Header Line\r\n\r\n",
        b"G\xc3\xa9T / HTTP/1.1\r\n\r\n",
    ];
    for (i, req) in bad.iter().enumerate() {
        let r = exchange(ws_addr(&gw), req);
        assert_eq!(
            r.status,
            400,
            "request {i} {:?}: {:?}",
            String::from_utf8_lossy(req),
            String::from_utf8_lossy(&r.raw)
        );
        assert_timely(&mut watcher, "after a malformed head");
    }
    let n = bad.len() as u64;
    let dl = deadline(REPLY);
    loop {
        let s = watcher.stats();
        if counter(&s, "closes.protocol_error") == n {
            assert_eq!(
                counter(&s, "http_requests"),
                0,
                "refused heads are not requests: {s}"
            );
            assert_eq!(counter(&s, "connections_open"), 1, "{s}");
            break;
        }
        assert!(Instant::now() < dl, "protocol_error closes: {s}");
        std::thread::sleep(ms(10));
    }
    // Still serving HTTP.
    assert_eq!(get(&gw, "/healthz").status, 200);
}

#[test]
fn oversized_request_heads_get_431_and_are_closed() {
    let gw = Gateway::start(&[]);
    let mut watcher = gw.client();
    // More than 8192 bytes and no blank line yet.
    let mut unfinished = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Pad: ".to_vec();
    unfinished.extend(vec![b'a'; 9000]);
    // A complete head that is too long.
    let mut complete = unfinished.clone();
    complete.extend_from_slice(b"\r\n\r\n");
    // Too many headers in a short head.
    let mut many = b"GET / HTTP/1.1\r\n".to_vec();
    for i in 0..100 {
        many.extend_from_slice(format!("X-{i}: y\r\n").as_bytes());
    }
    many.extend_from_slice(b"\r\n");
    for (what, req) in [
        ("unfinished", &unfinished),
        ("complete", &complete),
        ("many", &many),
    ] {
        let r = exchange(ws_addr(&gw), req);
        assert_eq!(
            r.status,
            431,
            "{what}: {:?}",
            String::from_utf8_lossy(&r.raw)
        );
        assert_timely(&mut watcher, "after an oversized head");
    }
    let s = gw.wait_for_stats("431s closed", |s| counter(s, "closes.protocol_error") == 3);
    assert_eq!(counter(&s, "http_requests"), 0, "{s}");
    assert_eq!(get(&gw, "/healthz").status, 200);
}

/// Opens a connection to the ws port and sends half a request head.
fn half_request(gw: &Gateway) -> TcpStream {
    let mut s = TcpStream::connect(ws_addr(gw)).expect("connect");
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nUser-Ag")
        .expect("send half a head");
    s
}

#[test]
fn a_stalled_half_request_is_closed_by_the_opening_deadline() {
    let gw = Gateway::start(&["--handshake-timeout-ms", "300"]);
    let mut watcher = gw.client();
    assert_timely(&mut watcher, "before");
    let t0 = Instant::now();
    let mut s = half_request(&gw);
    let (raw, end) = read_to_end(&mut s, deadline(Duration::from_secs(5)));
    let took = t0.elapsed();
    assert_eq!(end, End::Closed, "still open after {took:?}");
    assert!(
        took >= Duration::from_millis(250),
        "closed after {took:?}, before its 300 ms deadline"
    );
    assert!(
        !String::from_utf8_lossy(&raw).contains("HTTP/1.1 200"),
        "a half request was answered: {:?}",
        String::from_utf8_lossy(&raw)
    );
    let s = assert_timely(&mut watcher, "after the timeout");
    assert_eq!(counter(&s, "closes.handshake_timeout"), 1, "{s}");
    assert_eq!(counter(&s, "http_requests"), 0, "{s}");
    assert_eq!(counter(&s, "connections_open"), 1, "{s}");
}

#[test]
fn fifty_stalled_half_requests_do_not_stall_the_loop() {
    const N: usize = 50;
    let gw = Gateway::start(&["--handshake-timeout-ms", "1500"]);
    let mut watcher = gw.client();
    assert_timely(&mut watcher, "before");
    let t0 = Instant::now();
    let mut stalled: Vec<TcpStream> = (0..N).map(|_| half_request(&gw)).collect();
    // The loop answers the TCP client promptly while all of them are open and pending.
    let dl = deadline(REPLY);
    loop {
        let s = assert_timely(&mut watcher, "with 50 stalled half requests");
        assert_eq!(counter(&s, "closes.handshake_timeout"), 0, "{s}");
        if counter(&s, "connections_pending") == N as u64 {
            assert_eq!(counter(&s, "connections_open"), N as u64 + 1, "{s}");
            break;
        }
        assert!(Instant::now() < dl, "pending {s}");
        std::thread::sleep(ms(5));
    }
    // An HTTP request in the middle of them is answered too.
    assert_eq!(get(&gw, "/healthz").status, 200);
    for (i, s) in stalled.iter_mut().enumerate() {
        let (_, end) = read_to_end(s, deadline(Duration::from_secs(10)));
        assert_eq!(end, End::Closed, "stalled request {i}");
    }
    assert!(
        t0.elapsed() >= Duration::from_millis(1400),
        "{:?}",
        t0.elapsed()
    );
    let s = assert_timely(&mut watcher, "after");
    assert_eq!(counter(&s, "closes.handshake_timeout"), N as u64, "{s}");
    assert_eq!(counter(&s, "connections_pending"), 0, "{s}");
    assert_eq!(counter(&s, "connections_open"), 1, "{s}");
}
