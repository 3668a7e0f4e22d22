//! Fuzz-target checks shared by `fuzz/fuzz_targets/*` and `tests/replay.rs`:
//! each takes arbitrary bytes and panics on a violated invariant.

use serde::de::IgnoredAny;
use serde_json::Value;

use super::{actions_from_bytes, Sim};
use rosgate_wire::decode::{self, Dialect, ErrorKind, Op};
use rosgate_wire::line::{Frame, LineReader};
use rosgate_wire::ws::client;
use rosgate_wire::ws::{WsEvent, WsReader};

/// A fuzz target's check: panics on a violation.
pub type Check = fn(&[u8]);

/// Target names and their check functions.
pub const TARGETS: [(&str, Check); 12] = [
    ("line_reader", line_reader),
    ("decode", decode),
    ("core", core),
    ("ws_reader", ws_reader),
    ("ws_client", ws_client),
    ("scan", crate::scan_parity::scan),
    ("link", link),
    ("cbor", crate::binary::cbor),
    ("fragment", crate::binary::fragment),
    ("cbor_typed", crate::binary::cbor_typed),
    ("foxglove", crate::foxglove::foxglove),
    ("mail", mail),
];

/// The mail federated gateways send each other (`rosgate_wire::mail`):
/// whatever the bytes, decoding never panics, and what it decodes, written
/// again, decodes to the same records (nothing is read past a record's
/// own bounds).
pub fn mail(data: &[u8]) {
    use rosgate_wire::mail::{Mail, Record, Writer};
    let Some(m) = Mail::decode(data, 64) else {
        return;
    };
    let mut w = Writer::default();
    for r in &m.records {
        match *r {
            Record::Call {
                domain,
                n,
                service,
                args,
            } => w.call(m.sender, domain, n, service, args),
            Record::Answer { n, status, body } => w.answer(m.sender, n, status, body),
        }
    }
    if m.records.is_empty() {
        return;
    }
    let again = w.take();
    let back = Mail::decode(&again, 64).expect("written mail decodes");
    assert_eq!(back.sender, m.sender);
    assert_eq!(back.records, m.records);
}

/// The ROS 2 link on a schedule the bytes choose (`src/link.rs`): nothing
/// answered twice, everything answered once in the end.
pub fn link(data: &[u8]) {
    if let Err(v) = crate::run_link_bytes(data) {
        panic!("link: {v}");
    }
}

/// Runs the check of `target` on `data`; false if there is no such target.
pub fn run(target: &str, data: &[u8]) -> bool {
    match TARGETS.iter().find(|(n, _)| *n == target) {
        Some((_, f)) => {
            f(data);
            true
        }
        None => false,
    }
}

type Frames = Vec<Option<Vec<u8>>>;

fn feed_all(chunks: &[&[u8]], max: usize) -> (Frames, usize, bool) {
    let mut r = LineReader::new();
    let mut out = Vec::new();
    for c in chunks {
        r.feed(c, max, |f| {
            out.push(match f {
                Frame::Line(l) => Some(l.to_vec()),
                Frame::TooLong => None,
            })
        });
        assert!(
            r.pending_len() <= max,
            "pending {} > max {max}",
            r.pending_len()
        );
    }
    (out, r.pending_len(), r.is_discarding())
}

/// The framing rules, stated directly: lines end at `\n`; longer than
/// `max` (terminator excluded, `\r` included) is one `TooLong`, reported
/// before the newline arrives; one trailing `\r` is removed; empty lines
/// are skipped.
fn reference(input: &[u8], max: usize) -> (Frames, usize, bool) {
    let mut out = Vec::new();
    let mut segs: Vec<&[u8]> = input.split(|&b| b == b'\n').collect();
    let tail = segs.pop().unwrap_or(&[]);
    for s in segs {
        if s.len() > max {
            out.push(None);
            continue;
        }
        let s = s.strip_suffix(b"\r").unwrap_or(s);
        if !s.is_empty() {
            out.push(Some(s.to_vec()));
        }
    }
    if tail.len() > max {
        out.push(None);
        (out, 0, true)
    } else {
        (out, tail.len(), false)
    }
}

/// `LineReader`: whole, byte by byte, two halves and uneven chunks agree
/// with each other and with the reference; lines respect the limit.
pub fn line_reader(data: &[u8]) {
    if data.len() < 3 {
        return;
    }
    let max = if data[0] >= 224 {
        4096
    } else {
        1 + data[0] as usize % 48
    };
    let cut_sel = u16::from_le_bytes([data[1], data[2]]) as usize;
    let input = &data[3..];
    let want = reference(input, max);
    let whole = feed_all(&[input], max);
    assert_eq!(whole, want, "whole input vs reference (max {max})");
    for f in whole.0.iter().flatten() {
        assert!(f.len() <= max && !f.is_empty() && !f.contains(&b'\n'));
    }
    let bytes: Vec<&[u8]> = input.chunks(1).collect();
    assert_eq!(feed_all(&bytes, max), want, "byte by byte (max {max})");
    let cut = cut_sel % (input.len() + 1);
    let (a, b) = input.split_at(cut);
    assert_eq!(feed_all(&[a, b], max), want, "split at {cut} (max {max})");
    // Uneven chunks sized by the input itself.
    let mut chunks = Vec::new();
    let mut rest = input;
    let mut i = cut_sel;
    while !rest.is_empty() {
        let n = (1 + (i % 7) * (i % 13)).min(rest.len());
        let (a, b) = rest.split_at(n);
        chunks.push(a);
        rest = b;
        i = i.wrapping_mul(31).wrapping_add(n + 1);
    }
    assert_eq!(feed_all(&chunks, max), want, "uneven chunks (max {max})");
}

/// serde_json `Value` refuses some JSON that is grammatically valid and
/// that the decoder (rightly) forwards: numbers out of f64 range,
/// nesting past its recursion limit, lone surrogate escapes (`"\ud800"`
/// gives "lone leading surrogate" or "unexpected end of hex escape").
fn value_limit(e: &serde_json::Error) -> bool {
    let s = e.to_string();
    s.contains("recursion limit")
        || s.contains("number out of range")
        || s.contains("surrogate")
        || s.contains("hex escape")
}

fn same_span(line: &Value, key: &str, raw: &str) {
    let member = line
        .get(key)
        .unwrap_or_else(|| panic!("span {key} not in the line"));
    match serde_json::from_str::<Value>(raw) {
        Ok(v) => assert_eq!(
            &v, member,
            "span {key} = {raw:?} differs from the line's member"
        ),
        Err(e) => panic!("span {key} = {raw:?} does not parse: {e}"),
    }
}

fn same_name(line: &Value, key: &str, name: &str) {
    assert_eq!(
        line.get(key).and_then(Value::as_str),
        Some(name),
        "name {key}"
    );
}

fn same_opt_name(line: &Value, key: &str, name: Option<&str>, strict: bool) {
    match name {
        Some(n) => same_name(line, key, n),
        None => assert!(
            !strict && line.get(key).is_none(),
            "{key} missing from the request but present in the line (or strict)"
        ),
    }
}

/// `decode`: in both dialects, never panics; accepted lines are JSON
/// objects whose members (the last of duplicates) equal the decoded
/// names and raw spans; refused lines that are JSON objects carry their
/// `id`.
pub fn decode(data: &[u8]) {
    let whole = serde_json::from_slice::<Value>(data);
    // The decoder skips unknown members with serde's `IgnoredAny`, which
    // does not check their strings' UTF-8 (known members are checked, so
    // forwarded spans are always UTF-8). An accepted line is then
    // compared with its U+FFFD-replaced form.
    let lossy = match &whole {
        Err(_) if std::str::from_utf8(data).is_err() => Some(serde_json::from_str::<Value>(
            &String::from_utf8_lossy(data),
        )),
        _ => None,
    };
    let accepted = lossy.as_ref().unwrap_or(&whole);
    check_decode(data, &whole, accepted, Dialect::Strict);
    check_decode(data, &whole, accepted, Dialect::Rosbridge);
}

fn check_decode(
    data: &[u8],
    whole: &Result<Value, serde_json::Error>,
    accepted: &Result<Value, serde_json::Error>,
    dialect: Dialect,
) {
    let strict = dialect == Dialect::Strict;
    match decode::decode_as(data, dialect) {
        Ok(req) => {
            if let Err(e) = serde_json::from_slice::<IgnoredAny>(data) {
                panic!("accepted a line that is not JSON: {e}");
            }
            let v = match accepted {
                Ok(v) => v,
                Err(e) if value_limit(e) => {
                    let spans = [
                        req.id.map(|r| r.get()),
                        match &req.op {
                            Op::Publish { msg, .. } => Some(msg.get()),
                            Op::CallService { args, .. } => args.map(|a| a.get()),
                            Op::ServiceResponse { values, .. } => values.map(|v| v.get()),
                            _ => None,
                        },
                    ];
                    for s in spans.into_iter().flatten() {
                        assert!(
                            serde_json::from_str::<IgnoredAny>(s).is_ok(),
                            "span {s:?} is not JSON"
                        );
                    }
                    return;
                }
                Err(e) => panic!("accepted a line serde_json refuses: {e}"),
            };
            let obj = v
                .as_object()
                .expect("accepted a line that is not an object");
            assert_eq!(
                obj.get("op").and_then(Value::as_str),
                Some(req.op.name()),
                "op"
            );
            match (req.id, obj.get("id")) {
                (Some(raw), Some(_)) => same_span(v, "id", raw.get()),
                (None, None) => {}
                (a, b) => panic!("id: decoded {a:?}, line has {b:?}"),
            }
            match &req.op {
                Op::Advertise { topic, ty, .. } | Op::Subscribe { topic, ty, .. } => {
                    same_name(v, "topic", topic);
                    same_opt_name(v, "type", ty.as_deref(), strict);
                }
                Op::Unadvertise { topic } | Op::Unsubscribe { topic } => {
                    same_name(v, "topic", topic)
                }
                Op::Publish { topic, msg } => {
                    same_name(v, "topic", topic);
                    same_span(v, "msg", msg.get());
                }
                Op::AdvertiseService { service, ty } => {
                    same_name(v, "service", service);
                    same_opt_name(v, "type", ty.as_deref(), strict);
                }
                Op::UnadvertiseService { service } => same_name(v, "service", service),
                Op::CallService {
                    service,
                    args,
                    timeout,
                    ..
                } => {
                    same_name(v, "service", service);
                    match args {
                        Some(a) => same_span(v, "args", a.get()),
                        None => assert!(!strict && obj.get("args").is_none(), "args dropped"),
                    }
                    assert!(
                        req.id.is_some() || !strict,
                        "call_service accepted without id"
                    );
                    match (timeout, obj.get("timeout")) {
                        (None, None | Some(Value::Null)) => {}
                        (Some(t), Some(Value::Number(n))) => {
                            let f = n.as_f64().expect("number");
                            assert!(
                                *t == f || (t - f).abs() <= f64::EPSILON * t.abs().max(f.abs()),
                                "timeout {t} vs {f}"
                            );
                        }
                        (a, b) => panic!("timeout: decoded {a:?}, line has {b:?}"),
                    }
                }
                Op::ServiceResponse {
                    service,
                    values,
                    result,
                    status,
                } => {
                    same_name(v, "service", service);
                    match values {
                        Some(x) => same_span(v, "values", x.get()),
                        None => {
                            assert!(!strict, "service_response without values accepted");
                            assert!(obj.get("values").is_none(), "values dropped");
                        }
                    }
                    same_span(v, "result", result.get());
                    assert!(req.id.is_some(), "service_response accepted without id");
                    match status {
                        Some(s) => same_span(v, "status", s.get()),
                        None => assert!(obj.get("status").is_none(), "status dropped"),
                    }
                }
                Op::DeclareNode(d) => {
                    let rosgate_wire::decode::NodeDeclaration {
                        name,
                        namespace,
                        remap,
                        domain,
                    } = &**d;
                    same_name(v, "name", name);
                    same_opt_name(v, "namespace", namespace.as_deref(), false);
                    let rules: Vec<String> = obj
                        .get("remap")
                        .map(|r| serde_json::from_value(r.clone()).expect("remap rules"))
                        .unwrap_or_default();
                    assert_eq!(&rules, remap, "remap");
                    assert_eq!(*domain, obj.get("domain").and_then(Value::as_u64), "domain");
                }
                Op::DestroyNode { name } | Op::UndeclareParameter { name } => {
                    same_name(v, "name", name)
                }
                Op::DeclareParameter {
                    name,
                    value,
                    descriptor,
                    validate,
                } => {
                    same_name(v, "name", name);
                    same_span(v, "value", value.get());
                    if let Some(d) = descriptor {
                        same_span(v, "descriptor", d.get());
                    }
                    assert_eq!(
                        *validate,
                        obj.get("validate")
                            .and_then(Value::as_bool)
                            .unwrap_or(false),
                        "validate"
                    );
                }
                Op::SetParameter { name, value } => {
                    same_name(v, "name", name);
                    same_span(v, "value", value.get());
                }
                Op::AdvertiseAction { action, ty } => {
                    same_name(v, "action", action);
                    same_opt_name(v, "type", ty.as_deref(), strict);
                }
                Op::UnadvertiseAction { action } | Op::CancelActionGoal { action } => {
                    same_name(v, "action", action)
                }
                Op::SendActionGoal(g) => {
                    let rosgate_wire::decode::GoalRequest {
                        action,
                        action_type,
                        args,
                        feedback,
                        ..
                    } = &**g;
                    same_name(v, "action", action);
                    same_opt_name(v, "action_type", action_type.as_deref(), strict);
                    match args {
                        Some(a) => same_span(v, "args", a.get()),
                        None => assert!(!strict && obj.get("args").is_none(), "args dropped"),
                    }
                    assert_eq!(
                        *feedback,
                        obj.get("feedback")
                            .and_then(Value::as_bool)
                            .unwrap_or(false),
                        "feedback"
                    );
                    assert!(req.id.is_some(), "send_action_goal accepted without id");
                }
                Op::ActionFeedback { action, values } => {
                    same_name(v, "action", action);
                    same_span(v, "values", values.get());
                }
                Op::ActionResult {
                    action,
                    values,
                    status,
                    result,
                } => {
                    same_name(v, "action", action);
                    match values {
                        Some(x) => same_span(v, "values", x.get()),
                        None => assert!(obj.get("values").is_none(), "values dropped"),
                    }
                    same_span(v, "status", status.get());
                    same_span(v, "result", result.get());
                }
                Op::SetLevel { level } => same_name(v, "level", level),
                Op::Auth { token } => {
                    // `token`, else rosbridge's `mac`, carries the secret.
                    let key = if obj.get("token").is_some() {
                        "token"
                    } else {
                        "mac"
                    };
                    match token {
                        Some(t) => same_name(v, key, t),
                        None => assert!(
                            obj.get("token").is_none() && obj.get("mac").is_none(),
                            "token dropped"
                        ),
                    }
                }
                Op::Fragment { data, num, total } => {
                    same_name(v, "data", data);
                    assert_eq!(obj.get("num").and_then(|n| n.as_u64()), Some(*num));
                    assert_eq!(obj.get("total").and_then(|n| n.as_u64()), Some(*total));
                }
                Op::Ignored(name) => {
                    assert!(!strict, "{name} accepted in the strict dialect");
                }
            }
            if let Some(node) = &req.node {
                same_name(v, "node", node);
            }
        }
        Err(e) => {
            // Building the message must not panic either.
            let _ = e.to_string();
            let Ok(v) = whole else { return };
            let Some(obj) = v.as_object() else {
                assert_eq!(
                    e.kind,
                    ErrorKind::NotObject,
                    "non-object JSON line refused as {:?}",
                    e.kind
                );
                return;
            };
            assert!(
                !matches!(
                    e.kind,
                    ErrorKind::BadJson | ErrorKind::BadUtf8 | ErrorKind::NotObject
                ),
                "a valid JSON object refused as {:?}",
                e.kind
            );
            match (e.id, obj.get("id")) {
                (Some(raw), Some(_)) => same_span(v, "id", raw.get()),
                (None, None) => {}
                // The gateway never echoes an id it refuses: one too long, or
                // holding a number that serde_json reads as f64::MAX and a
                // correctly rounding parser as infinity.
                (None, Some(_)) if e.kind == ErrorKind::IdTooLong => {}
                (None, Some(id)) if e.kind == ErrorKind::NumberOutOfRange && holds_f64_max(id) => {}
                (a, b) => panic!("error id: decoded {a:?}, line has {b:?}"),
            }
        }
    }
}

/// Whether `v` holds a number serde_json read as `f64::MAX` or `-f64::MAX`.
fn holds_f64_max(v: &Value) -> bool {
    match v {
        Value::Number(n) => n.as_f64().is_some_and(|x| x.abs() == f64::MAX),
        Value::Array(a) => a.iter().any(holds_f64_max),
        Value::Object(o) => o.values().any(holds_f64_max),
        _ => false,
    }
}

/// `core`: actions from the bytes, through the simulation; every step's
/// invariants and the final cleanup must hold.
pub fn core(data: &[u8]) {
    let (cfg, actions) = actions_from_bytes(data);
    let mut sim = Sim::new(cfg);
    for a in &actions {
        if let Err(v) = sim.step(a) {
            panic!("{v}\naction: {a:?}\nall actions: {actions:?}");
        }
    }
    if let Err(v) = sim.finish() {
        panic!("{v} (in finish)\nall actions: {actions:?}");
    }
}

/// A WebSocket event reduced to comparable data.
#[derive(Debug, PartialEq, Eq)]
enum Ws {
    Open(Vec<u8>),
    Refuse(Vec<u8>),
    Text(Vec<u8>),
    Binary(Vec<u8>),
    Ping(Vec<u8>),
    Close(Option<u16>),
    TooLong,
    Protocol,
}

fn ws_feed(chunks: &[&[u8]], max: usize) -> (Vec<Ws>, usize) {
    let mut r = WsReader::new();
    let mut out = Vec::new();
    let mut peak = 0;
    for c in chunks {
        r.feed(c, max, |e| {
            out.push(match e {
                WsEvent::Open { response, .. } => Ws::Open(response),
                WsEvent::Refuse(b) => Ws::Refuse(b),
                WsEvent::Http(r) => Ws::Refuse(r.target.into_bytes()),
                WsEvent::Text(t) => Ws::Text(t.to_vec()),
                WsEvent::Binary(b) => Ws::Binary(b.to_vec()),
                WsEvent::Ping(p) => Ws::Ping(p.to_vec()),
                WsEvent::Close(c) => Ws::Close(c),
                WsEvent::TooLong => Ws::TooLong,
                WsEvent::Protocol(_) => Ws::Protocol,
            })
        });
        peak = peak.max(r.buffered());
    }
    (out, peak)
}

/// `ws_reader`: the first byte picks the message limit and the split point;
/// a valid handshake is prepended half of the time so frames get exercised.
/// Whole, byte-by-byte and two-halves feeding must give the same events;
/// no text message exceeds the limit; buffered bytes stay bounded.
pub fn ws_reader(data: &[u8]) {
    const HANDSHAKE: &[u8] = b"GET / HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let max = 1 + (sel as usize & 0x3f) * 4;
    let mut input = Vec::with_capacity(HANDSHAKE.len() + rest.len());
    if sel & 0x80 != 0 {
        input.extend_from_slice(HANDSHAKE);
    }
    input.extend_from_slice(rest);
    let (whole, peak) = ws_feed(&[&input], max);
    let bytes: Vec<&[u8]> = input.chunks(1).collect();
    let (bytewise, _) = ws_feed(&bytes, max);
    assert_eq!(whole, bytewise, "byte-by-byte feeding changed the events");
    let cut = rest.len() / 2 + if sel & 0x80 != 0 { HANDSHAKE.len() } else { 0 };
    let (a, b) = input.split_at(cut.min(input.len()));
    let (halves, _) = ws_feed(&[a, b], max);
    assert_eq!(whole, halves, "split at {cut} changed the events");
    for e in &whole {
        if let Ws::Text(t) | Ws::Binary(t) = e {
            assert!(
                t.len() <= max,
                "message of {} bytes over the limit {max}",
                t.len()
            );
        }
    }
    // One frame header + payload, one message and a handshake head at most.
    let bound = input
        .len()
        .min(rosgate_wire::ws::handshake::MAX_REQUEST_BYTES + 2 * max + 14);
    assert!(
        peak <= bound.max(
            input
                .len()
                .min(rosgate_wire::ws::handshake::MAX_REQUEST_BYTES + 1)
        ),
        "buffered {peak} > {bound}"
    );
}

/// What the client's reader reported, owned.
#[derive(Debug, PartialEq, Eq)]
enum WsIn {
    Text(Vec<u8>),
    Binary(Vec<u8>),
    Ping(Vec<u8>),
    Pong(Vec<u8>),
    Close(Option<u16>),
    TooLong,
    Protocol(&'static str),
}

fn ws_client_feed(chunks: &[&[u8]], max: usize) -> (Vec<WsIn>, usize) {
    let mut r = client::Reader::new();
    let mut out = Vec::new();
    let mut peak = 0;
    for c in chunks {
        r.feed(c, max, |e| {
            out.push(match e {
                client::Event::Text(t) => WsIn::Text(t.to_vec()),
                client::Event::Binary(b) => WsIn::Binary(b.to_vec()),
                client::Event::Ping(p) => WsIn::Ping(p.to_vec()),
                client::Event::Pong(p) => WsIn::Pong(p.to_vec()),
                client::Event::Close(c) => WsIn::Close(c),
                client::Event::TooLong => WsIn::TooLong,
                client::Event::Protocol(why) => WsIn::Protocol(why),
            })
        });
        peak = peak.max(r.buffered());
    }
    (out, peak)
}

/// `ws_client`: server frames into the client's reader
/// (`rosgate_wire::ws::client::Reader`); the first byte picks the message
/// limit and the split point. Whole, byte-by-byte and two-halves feeding
/// must give the same events; nothing follows a close, a refusal or a
/// protocol error; no message exceeds the limit; a control frame is at
/// most 125 bytes; buffered bytes stay within one frame and one message.
pub fn ws_client(data: &[u8]) {
    let Some((&sel, input)) = data.split_first() else {
        return;
    };
    let max = 1 + (sel as usize & 0x7f) * 4;
    let (whole, peak) = ws_client_feed(&[input], max);
    let bytes: Vec<&[u8]> = input.chunks(1).collect();
    let (bytewise, _) = ws_client_feed(&bytes, max);
    assert_eq!(whole, bytewise, "byte-by-byte feeding changed the events");
    let cut = input.len() * (1 + usize::from(sel >> 7)) / 3;
    let (a, b) = input.split_at(cut.min(input.len()));
    let (halves, _) = ws_client_feed(&[a, b], max);
    assert_eq!(whole, halves, "split at {cut} changed the events");
    for (i, e) in whole.iter().enumerate() {
        match e {
            WsIn::Text(m) | WsIn::Binary(m) => {
                assert!(m.len() <= max, "a {}-byte message over {max}", m.len())
            }
            WsIn::Ping(p) | WsIn::Pong(p) => {
                assert!(p.len() <= 125, "a {}-byte control frame", p.len())
            }
            WsIn::Close(_) | WsIn::TooLong | WsIn::Protocol(_) => {
                assert_eq!(i + 1, whole.len(), "events after the last: {whole:?}")
            }
        }
    }
    // One frame (header and payload) and one message at most, beyond the
    // chunk being fed.
    let bound = input
        .len()
        .min(client::MAX_FRAME_HEADER + max.max(125) + max);
    assert!(peak <= bound, "buffered {peak} > {bound}");
}
