//! Request lines as a client writes them: the JSON text of each [`Req`] in
//! the action's `style` (escapes, spacing, member order, unknown and decoy
//! members), the ids and payloads the model can recognise later, and the
//! model [`Effect`] the line has if the hub accepts it (the type is in
//! `model/requests.rs`). The text helpers here (`assemble`, `json_string`,
//! `jstr`, `canon`, ...) serve the other request writers (`goals.rs`,
//! `qos.rs`, `params.rs`, `param_access.rs`) and the reader: this file
//! imports no sibling module.
//!
//! A WebSocket client writes the same requests in the rosbridge dialect:
//! optional fields may be left out (`type`, a call's `id` and `args`, a
//! response's `values`), its whitespace may be raw CR/LF (which the hub
//! blanks to spaces before anything is forwarded), and its topic requests
//! draw ids from [`WS_TOPIC_IDS`].
//!
//! A client with nodes declares and destroys them (names, namespaces,
//! remap rules and domains from small tables, so that full names collide
//! and some are refused) and writes ROS names (relative, private,
//! absolute, invalid) with or without the `node` field naming one of its
//! nodes. Which node and which expanded name a request ends up with is
//! the model's business when the effect is applied (`effects.rs`): the
//! effect carries the names as written.
//!
//! Some refused requests probe the per-item caps (P18, P22): an `id` over
//! 1024 bytes (refused without its id), a name over 1024 bytes, a number
//! beyond f64 and a lone surrogate escape (with the id, before or after
//! the refused value), nesting one level past 127; and two accepted
//! ones sit exactly at them (127 levels, a 1024-byte id and name).

use std::fmt::Write as _;

use serde_json::Value;

use rosgate_core::counters::ErrorCode;
use rosgate_wire::decode::{MAX_ID_BYTES, MAX_NAME_BYTES};
use rosgate_wire::MAX_JSON_DEPTH;

use super::Sim;
use crate::actions::{
    NamedReq, Req, DOMAIN_FIELDS, NAMES, NAMESPACES, NODE_NAMES, REMAPS, SERVICES, TOPICS,
};
use crate::model::encodings::{TYPED_TOPIC, TYPED_TYPE};
use crate::model::qos::Asked;
use crate::model::requests::{CallSend, Effect};
use crate::model::Id;

/// Per-call `timeout` field texts (`None`: field absent).
pub(crate) const TIMEOUTS: [Option<&str>; 9] = [
    None,
    Some("0.05"),
    Some("0.3"),
    Some("1"),
    Some("2.5"),
    Some("0"),
    Some("-1"),
    Some("null"),
    Some("1e9"),
];

/// `result` field texts of provider responses.
const RESULTS: [&str; 6] = ["true", "false", "1", "\"ok\"", "null", "{\"a\":[1]}"];

/// `status` field texts of provider responses (`None`: absent).
const STATUSES: [Option<&str>; 5] = [
    None,
    Some("\"\""),
    Some("\"done\""),
    Some("7"),
    Some("null"),
];

/// Provider-side ids no call ever had (or, for the numeric and structured
/// ones, could have had).
pub(crate) const FORGED_IDS: [&str; 10] = [
    "\"rg-999999999999\"",
    "\"rg-18446744073709551616\"",
    "\"rg-\"",
    "\"RG-1\"",
    "\"x-1\"",
    "17",
    "null",
    "{\"rg\":1}",
    "\"rg-1 \"",
    "[\"rg-1\"]",
];

/// The ids a WebSocket client's topic requests use (`id` byte 1 and up,
/// modulo the table): few enough to repeat, all different as JSON values
/// and as bytes. No two spell one value differently (`"sub-a"` and
/// `"\u0073ub-a"`): the hub keys registrations by the id's bytes,
/// rosbridge by its value, and which is right is not settled, so the
/// simulation pins neither.
const WS_TOPIC_IDS: [&str; 4] = ["\"sub-a\"", "\"sub-b\"", "7", "[\"r\",1]"];

/// The `type` of a service advertisement (the hub keeps it, and counts
/// its bytes).
const SERVICE_TYPE: &str = "std_srvs/Trigger";

/// How many of [`TOPICS`] a WebSocket client's topic requests prefer.
const WS_CROWDED_TOPICS: usize = 2;

/// A node name no client ever declares.
const GHOST_NODE: &str = "ghost";

/// Whitespace a request uses between and inside its members.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Spacing {
    Compact,
    Spaces,
    /// Raw CR and LF (WebSocket only; a TCP line cannot hold a LF).
    Newlines,
}

/// `s` with every raw CR and LF replaced by a space, as the hub does
/// before decoding.
pub(crate) fn blank_cr_lf(s: &str) -> String {
    s.replace(['\r', '\n'], " ")
}

/// The `type` registrations of `name` state: the typed topic's own, a
/// bundled type with a `uint8[]`, else `std_msgs/String` (which none of
/// the other payloads fit).
fn topic_type(name: &str) -> &'static str {
    if name == TYPED_TOPIC {
        TYPED_TYPE
    } else {
        "std_msgs/String"
    }
}

pub(crate) fn json_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// `s` as a JSON string; with `escape`, every ASCII character as `\u00XX`.
pub(crate) fn jstr(s: &str, escape: bool) -> String {
    if !escape {
        return json_string(s);
    }
    let mut o = String::from("\"");
    for ch in s.chars() {
        if ch.is_ascii() {
            let _ = write!(o, "\\u{:04x}", ch as u32);
        } else {
            o.push(ch);
        }
    }
    o.push('"');
    o
}

/// The canonical text of a JSON value (the model's map key for ids).
pub(crate) fn canon(v: &Value) -> String {
    v.to_string()
}

/// An [`Id`] from its raw JSON text.
pub(crate) fn parse_id(raw: String) -> Id {
    let v: Value = serde_json::from_str(&raw).expect("sim id is JSON");
    Id {
        key: canon(&v),
        raw,
    }
}

/// The members of a request line, in order, as (key, raw JSON value).
pub(crate) type Members<'a> = Vec<(&'a str, String)>;

/// The `node` field, when the request names a node.
pub(crate) fn push_node(m: &mut Members<'_>, node: Option<&str>, esc: bool) {
    if let Some(n) = node {
        m.push(("node", jstr(n, esc)));
    }
}

pub(crate) fn push_id(m: &mut Members<'_>, id: Option<&Id>) {
    if let Some(id) = id {
        m.push(("id", id.raw.clone()));
    }
}

/// Builds the line for `members` in `style`, with `spacing`.
pub(crate) fn assemble(members: &[(&str, String)], style: u8, spacing: Spacing) -> Vec<u8> {
    let esc = style & 4 != 0;
    let mut m: Vec<(String, String)> = members
        .iter()
        .map(|(k, v)| (jstr(k, esc), v.clone()))
        .collect();
    if style & 16 != 0 {
        m.reverse();
    }
    if style & 8 != 0 {
        let at = m.len() / 2;
        m.insert(
            at,
            (
                "\"x_extra\"".into(),
                r#"{"op":"subscribe","id":[1,{"topic":"/zz"}]}"#.into(),
            ),
        );
    }
    if style & 32 != 0 {
        for (k, decoy) in [
            ("op", "\"unadvertise\""),
            ("topic", "\"/decoy\""),
            ("service", "\"/decoy\""),
            ("id", "\"decoy\""),
            ("msg", "{\"decoy\":1}"),
            ("values", "\"decoy\""),
        ] {
            if members.iter().any(|(mk, _)| *mk == k) {
                m.insert(0, (json_string(k), decoy.into()));
            }
        }
    }
    let (open, colon, comma, close) = match spacing {
        Spacing::Compact => ("{", ":", ",", "}"),
        Spacing::Spaces => ("{ ", " : ", " , ", " }"),
        Spacing::Newlines => ("{\r\n", "\n:\t", "\r\n, ", "\n}"),
    };
    let mut s = String::from(open);
    for (i, (k, v)) in m.iter().enumerate() {
        if i > 0 {
            s.push_str(comma);
        }
        s.push_str(k);
        s.push_str(colon);
        s.push_str(v);
    }
    s.push_str(close);
    s.into_bytes()
}

/// `n` characters of `c`.
fn fill(c: char, n: usize) -> String {
    std::iter::repeat_n(c, n).collect()
}

/// The line of `Req::Malformed` kind `kind % 16` and its effect: a refusal
/// (with or without the id) or, at the caps, an accepted request. Kinds:
/// 0 unknown op, 1 missing field, 2 wrong type, 3 call without id, 4 op
/// not a string, 5 no op, 6 not an object, 7 nesting one past 127, 8 bad
/// timeout, 9 invalid UTF-8, 10 id over 1024 bytes (not echoed), 11 topic
/// over 1024 bytes, 12 a number beyond f64 and 13 a lone surrogate (the id
/// echoed if it comes first: `kind & 16` puts it after), 14 nesting at
/// exactly 127 (a publish), 15 an advertise with a 1024-byte id and topic.
/// `n` makes an accepted publish unique.
fn malformed(kind: u8, id: Option<Id>, style: u8, spacing: Spacing, n: u64) -> (Vec<u8>, Effect) {
    let mut m: Members<'_> = Vec::new();
    let refused = |id: Option<Id>, code: Option<ErrorCode>| Effect::Error { id, code };
    // The kinds whose id depends on member order keep theirs as written.
    let ordered = style & !(16 | 32);
    match kind % 16 {
        0 => {
            m.push(("op", "\"nope\"".into()));
            push_id(&mut m, id.as_ref());
        }
        1 => {
            m.push(("op", "\"subscribe\"".into()));
            push_id(&mut m, id.as_ref());
        }
        2 => {
            m.push(("op", "\"publish\"".into()));
            m.push(("topic", "5".into()));
            m.push(("msg", "1".into()));
            push_id(&mut m, id.as_ref());
        }
        3 => {
            // call_service without an id: refused, and nothing to echo.
            m.push(("op", "\"call_service\"".into()));
            m.push(("service", "\"/s1\"".into()));
            m.push(("args", "{}".into()));
            return (assemble(&m, style & !32, spacing), refused(None, None));
        }
        4 => {
            m.push(("op", "5".into()));
            push_id(&mut m, id.as_ref());
        }
        5 => push_id(&mut m, id.as_ref()),
        6 => return (b"[1,2]".to_vec(), refused(None, None)),
        7 => {
            // One level past the limit, the request object counting as one;
            // the scan still reads every member, so the id is echoed.
            let deep = format!("{}{}", fill('[', MAX_JSON_DEPTH), fill(']', MAX_JSON_DEPTH));
            m.push(("op", "\"publish\"".into()));
            m.push(("topic", "\"/a\"".into()));
            m.push(("msg", deep));
            push_id(&mut m, id.as_ref());
            return (
                assemble(&m, style, spacing),
                refused(id, Some(ErrorCode::TooDeep)),
            );
        }
        8 => {
            m.push(("op", "\"call_service\"".into()));
            m.push(("service", "\"/s1\"".into()));
            m.push(("args", "[]".into()));
            m.push(("timeout", "\"soon\"".into()));
            push_id(&mut m, id.as_ref());
        }
        9 => {
            // Invalid UTF-8 inside a string: the id cannot be read.
            let mut l = br#"{"op":"subscribe","type":"t","topic":"/"#.to_vec();
            l.push(0xff);
            l.extend_from_slice(b"\"");
            if let Some(id) = &id {
                l.extend_from_slice(b",\"id\":");
                l.extend_from_slice(id.raw.as_bytes());
            }
            l.push(b'}');
            return (l, refused(None, None));
        }
        10 => {
            // An id one byte over the cap: refused, and never echoed.
            let long = format!("\"{}\"", fill('i', MAX_ID_BYTES - 1));
            m.push(("op", "\"subscribe\"".into()));
            m.push(("topic", "\"/a\"".into()));
            m.push(("type", "\"t\"".into()));
            m.push(("id", long));
            return (
                assemble(&m, style, spacing),
                refused(None, Some(ErrorCode::IdTooLong)),
            );
        }
        11 => {
            // A topic one byte over the cap: refused with the id.
            m.push(("op", "\"subscribe\"".into()));
            m.push(("topic", json_string(&fill('n', MAX_NAME_BYTES + 1))));
            m.push(("type", "\"t\"".into()));
            push_id(&mut m, id.as_ref());
            return (
                assemble(&m, style, spacing),
                refused(id, Some(ErrorCode::NameTooLong)),
            );
        }
        12 | 13 => {
            // Grammatical JSON a standard parser refuses; the id is echoed
            // whether it comes before or after the refused value.
            let (bad, code) = if kind % 16 == 12 {
                ("[1,-1e400]", ErrorCode::NumberOutOfRange)
            } else {
                ("{\"s\":\"a\\ud800b\"}", ErrorCode::LoneSurrogate)
            };
            let id_first = kind & 16 == 0;
            m.push(("op", "\"publish\"".into()));
            m.push(("topic", "\"/a\"".into()));
            if id_first {
                push_id(&mut m, id.as_ref());
            }
            m.push(("msg", bad.into()));
            if !id_first {
                push_id(&mut m, id.as_ref());
            }
            return (assemble(&m, ordered, spacing), refused(id, Some(code)));
        }
        14 => {
            // Nesting exactly at the limit: an ordinary publish.
            let deep = format!(
                "{}{n}{}",
                fill('[', MAX_JSON_DEPTH - 1),
                fill(']', MAX_JSON_DEPTH - 1)
            );
            m.push(("op", "\"publish\"".into()));
            m.push(("topic", "\"/a\"".into()));
            m.push(("msg", deep.clone()));
            push_id(&mut m, id.as_ref());
            let effect = Effect::Publish {
                name: "/a".into(),
                msg: deep,
                id,
                node: None,
            };
            return (assemble(&m, style, spacing), effect);
        }
        _ => {
            // An id and a topic exactly at the caps: an ordinary advertise
            // (the name is never escaped here: escapes count on the wire).
            let name = fill('L', MAX_NAME_BYTES);
            let long = parse_id(format!("\"{}\"", fill('i', MAX_ID_BYTES - 2)));
            m.push(("op", "\"advertise\"".into()));
            m.push(("topic", json_string(&name)));
            m.push(("type", "\"t\"".into()));
            push_id(&mut m, Some(&long));
            let effect = Effect::Topic {
                op: "advertise",
                name,
                id: Some(long),
                node: None,
                asked: Asked::default(),
            };
            return (assemble(&m, style & !4, spacing), effect);
        }
    }
    let effect = refused(id, None);
    (assemble(&m, style, spacing), effect)
}

impl Sim {
    /// A fresh id for `slot` in one of seven spellings (`style % 7`, 0: no
    /// id); unique among the client's ids.
    pub(crate) fn fresh_id(&mut self, slot: usize, style: u8) -> Option<Id> {
        let c = self.model.client_mut(slot);
        c.next_id += 1;
        let n = c.next_id;
        let raw = match style % 7 {
            0 => return None,
            1 => format!("\"c{n}\""),
            2 => format!("{n}"),
            3 => format!("{{\"n\":{n}}}"),
            4 => format!("[{n},\"c\"]"),
            5 => format!("\"\\u0062{n}\""),
            _ => format!("{n}.5"),
        };
        Some(parse_id(raw))
    }

    /// A JSON payload with a unique counter, with insignificant
    /// whitespace per `spacing` (kept byte for byte by the gateway, raw
    /// CR/LF turned into spaces).
    pub(crate) fn payload(&mut self, shape: u16, spacing: Spacing) -> String {
        self.counter += 1;
        let n = self.counter;
        let fill = "x".repeat(((shape >> 2) % 700) as usize);
        let sp = match spacing {
            Spacing::Compact => "",
            Spacing::Spaces => " ",
            Spacing::Newlines => "\r\n",
        };
        match shape % 4 {
            0 => format!("{{{sp}\"seq\"{sp}:{sp}{n},{sp}\"d\":{sp}\"{fill}\"{sp}}}"),
            1 => format!("[{sp}{n},{sp}\"{fill}\",null,true,-1.5e3,{sp}{{\"\\u00e9\":[]}}{sp}]"),
            2 => format!("\"s{n} {fill} \\\" \\\\ é\""),
            _ => format!("{{\"n\":{n},\"nested\":{{\"a\":[1,{{\"b\":\"{fill}\"}}]}},\"u\":12345678901234567890}}"),
        }
    }

    /// A message of [`TYPED_TYPE`] (a `std_msgs/msg/UInt8MultiArray`), unique
    /// by its `data_offset`, its `data` up to 383 bytes by `shape`.
    pub(crate) fn typed_payload(&mut self, shape: u16) -> String {
        self.counter += 1;
        let n = self.counter;
        let data: Vec<String> = (0..(shape >> 7) % 384)
            .map(|k| ((n + k as u64) % 256).to_string())
            .collect();
        format!(
            r#"{{"layout":{{"dim":[],"data_offset":{n}}},"data":[{}]}}"#,
            data.join(",")
        )
    }

    /// The line `slot` sends for `req` in `style` (without its terminator)
    /// and its effect on the model if the hub accepts it.
    pub(crate) fn request(&mut self, slot: usize, style: u8, req: &Req) -> (Vec<u8>, Effect) {
        let rosbridge = self.model.client(slot).rosbridge();
        let spacing = match (style & 2 != 0, rosbridge) {
            (false, _) => Spacing::Compact,
            (true, false) => Spacing::Spaces,
            (true, true) => Spacing::Newlines,
        };
        // Optional fields left out: the rosbridge dialect only.
        let lean = rosbridge && style & 128 != 0;
        let f = Form {
            style,
            spacing,
            lean,
            rosbridge,
        };
        match req {
            Req::Subscribe { topic, id }
            | Req::Unsubscribe { topic, id }
            | Req::Advertise { topic, id }
            | Req::Unadvertise { topic, id } => {
                let op = match req {
                    Req::Subscribe { .. } => "subscribe",
                    Req::Unsubscribe { .. } => "unsubscribe",
                    Req::Advertise { .. } => "advertise",
                    _ => "unadvertise",
                };
                // A WebSocket client's registrations crowd onto the first
                // topics half of the time, so that one topic collects
                // several ids.
                let topics = if f.rosbridge && topic & 0x80 == 0 {
                    &TOPICS[..WS_CROWDED_TOPICS]
                } else {
                    &TOPICS[..]
                };
                let name = topics[*topic as usize % topics.len()];
                self.topic_request(slot, f, op, name, None, *id)
            }
            Req::Publish { topic, payload, id } => {
                let name = TOPICS[*topic as usize % TOPICS.len()];
                self.publish_request(slot, f, name, None, *payload, *id)
            }
            Req::AdvertiseService { service, id } => {
                let name = SERVICES[*service as usize % SERVICES.len()];
                self.service_request(slot, f, true, name, None, *id)
            }
            Req::UnadvertiseService { service, id } => {
                let name = SERVICES[*service as usize % SERVICES.len()];
                self.service_request(slot, f, false, name, None, *id)
            }
            Req::Call {
                service,
                timeout,
                args,
                id,
            } => {
                let call = CallLine {
                    name: SERVICES[*service as usize % SERVICES.len()],
                    node: None,
                    timeout: *timeout,
                    args: *args,
                    id: *id,
                    wait: false,
                };
                self.call_request(slot, f, call)
            }
            Req::DeclareNode {
                name,
                ns,
                remap,
                domain,
                id,
            } => self.declare_request(slot, f, [*name, *ns, *remap, *domain], *id),
            Req::DestroyNode { pick, id } => self.destroy_request(slot, f, *pick, *id),
            Req::Named(n) => self.named_request(slot, f, *n),
            Req::Respond {
                pick,
                kind,
                result,
                status,
            } => self.respond_request(slot, f, *pick, *kind, *result, *status),
            Req::Goal(g) => self.goal_request(slot, f, *g),
            Req::Qos(q) => self.qos_request(slot, f, *q),
            Req::Param(p) => self.param_request(slot, f, *p),
            Req::Malformed { kind, id } => {
                let id = self.fresh_id(slot, *id);
                if rosbridge && kind % 16 == 3 {
                    // rosbridge calls need no id: a call to /s1 with `{}`.
                    let (line, _) = malformed(*kind, None, style, spacing, 0);
                    let effect = Effect::Call(CallSend {
                        name: "/s1".into(),
                        args: "{}".into(),
                        timeout: None,
                        id: None,
                        node: None,
                        wait: false,
                    });
                    return (line, effect);
                }
                self.counter += 1;
                malformed(*kind, id, style, spacing, self.counter)
            }
            Req::Garbage { bytes } => {
                let mut g = vec![b'#'];
                g.extend(bytes.iter().copied().filter(|&b| b != b'\n'));
                (
                    g,
                    Effect::Error {
                        id: None,
                        code: None,
                    },
                )
            }
            // No line on TCP; on WebSocket an empty message, not JSON.
            Req::Blank if rosbridge => (
                Vec::new(),
                Effect::Error {
                    id: None,
                    code: None,
                },
            ),
            Req::Blank => (Vec::new(), Effect::Nothing),
        }
    }

    /// subscribe, unsubscribe, advertise or unadvertise of `name` (as
    /// written), for `node` if given.
    pub(crate) fn topic_request(
        &mut self,
        slot: usize,
        f: Form,
        op: &'static str,
        name: &str,
        node: Option<String>,
        id: u8,
    ) -> (Vec<u8>, Effect) {
        let esc = f.style & 4 != 0;
        let id = if f.rosbridge {
            let pooled = (id > 0).then(|| WS_TOPIC_IDS[(id as usize - 1) % WS_TOPIC_IDS.len()]);
            pooled.map(|raw| parse_id(raw.to_string()))
        } else {
            self.fresh_id(slot, id)
        };
        let mut m: Members<'_> = vec![("op", json_string(op)), ("topic", jstr(name, esc))];
        if matches!(op, "subscribe" | "advertise") && (!f.lean || name == TYPED_TOPIC) {
            m.push(("type", jstr(topic_type(name), esc)));
        }
        push_node(&mut m, node.as_deref(), esc);
        push_id(&mut m, id.as_ref());
        let effect = Effect::Topic {
            op,
            name: name.to_string(),
            id,
            node,
            asked: Asked::default(),
        };
        (assemble(&m, f.style, f.spacing), effect)
    }

    /// A subscribe or advertise (`op`) of `name` with the QoS members
    /// `extra` of `spec`, which state its `asked` (`None`: the decoder
    /// refuses them), with the outgoing encoding it asks for (a subscribe
    /// on WebSocket).
    pub(crate) fn qos_topic_request(
        &mut self,
        slot: usize,
        f: Form,
        op: &'static str,
        name: &str,
        (extra, asked): Spec,
        id: u8,
    ) -> (Vec<u8>, Effect) {
        let (line, effect) = self.topic_request(slot, f, op, name, None, id);
        let Effect::Topic { id, node, .. } = effect else {
            return (line, effect);
        };
        let esc = f.style & 4 != 0;
        let mut m: Members<'_> = vec![("op", json_string(op)), ("topic", jstr(name, esc))];
        if !f.lean || name == TYPED_TOPIC {
            m.push(("type", jstr(topic_type(name), esc)));
        }
        for (k, v) in extra {
            m.push((k, v.to_string()));
        }
        if let Some(a) = asked {
            m.extend(a.enc.members());
        }
        push_id(&mut m, id.as_ref());
        let effect = match asked {
            Some(asked) => Effect::Topic {
                op,
                name: name.to_string(),
                id,
                node,
                asked,
            },
            None => Effect::Error { id, code: None },
        };
        (assemble(&m, f.style, f.spacing), effect)
    }

    pub(crate) fn publish_request(
        &mut self,
        slot: usize,
        f: Form,
        name: &str,
        node: Option<String>,
        payload: u16,
        id: u8,
    ) -> (Vec<u8>, Effect) {
        let esc = f.style & 4 != 0;
        let id = self.fresh_id(slot, id);
        let msg = if name == TYPED_TOPIC {
            self.typed_payload(payload)
        } else {
            self.payload(payload, f.spacing)
        };
        let mut m: Members<'_> = vec![
            ("op", json_string("publish")),
            ("topic", jstr(name, esc)),
            ("msg", msg.clone()),
        ];
        push_node(&mut m, node.as_deref(), esc);
        push_id(&mut m, id.as_ref());
        let effect = Effect::Publish {
            name: name.to_string(),
            msg: blank_cr_lf(&msg),
            id,
            node,
        };
        (assemble(&m, f.style, f.spacing), effect)
    }

    /// advertise_service (`adv`) or unadvertise_service.
    fn service_request(
        &mut self,
        slot: usize,
        f: Form,
        adv: bool,
        name: &str,
        node: Option<String>,
        id: u8,
    ) -> (Vec<u8>, Effect) {
        let esc = f.style & 4 != 0;
        let id = self.fresh_id(slot, id);
        let op = if adv {
            "advertise_service"
        } else {
            "unadvertise_service"
        };
        let mut m: Members<'_> = vec![("op", json_string(op)), ("service", jstr(name, esc))];
        let ty = if adv && !f.lean { SERVICE_TYPE } else { "" };
        if !ty.is_empty() {
            m.push(("type", jstr(ty, esc)));
        }
        push_node(&mut m, node.as_deref(), esc);
        push_id(&mut m, id.as_ref());
        let effect = Effect::Service {
            adv,
            name: name.to_string(),
            ty,
            id,
            node,
        };
        (assemble(&m, f.style, f.spacing), effect)
    }

    /// `call_service` as `call` describes it.
    pub(crate) fn call_request(
        &mut self,
        slot: usize,
        f: Form,
        call: CallLine<'_>,
    ) -> (Vec<u8>, Effect) {
        let CallLine {
            name,
            node,
            timeout,
            args,
            id,
            wait,
        } = call;
        let esc = f.style & 4 != 0;
        let id = match self.fresh_id(slot, id) {
            None if !f.rosbridge => self.fresh_id(slot, 1),
            id => id,
        };
        let args_raw = self.payload(args, f.spacing);
        let to = TIMEOUTS[timeout as usize % TIMEOUTS.len()];
        let mut m: Members<'_> = vec![
            ("op", json_string("call_service")),
            ("service", jstr(name, esc)),
        ];
        // Without `args` a rosbridge provider is sent `{}`.
        let args = if f.lean {
            "{}"
        } else {
            m.push(("args", args_raw.clone()));
            &args_raw
        };
        push_node(&mut m, node.as_deref(), esc);
        push_id(&mut m, id.as_ref());
        if let Some(t) = to {
            m.push(("timeout", t.to_string()));
        }
        if wait {
            m.push(("wait", "true".into()));
        }
        let effect = Effect::Call(CallSend {
            name: name.to_string(),
            args: blank_cr_lf(args),
            timeout: to,
            id,
            node,
            wait,
        });
        (assemble(&m, f.style, f.spacing), effect)
    }

    /// `declare_node` with the table entries `picks` selects (name,
    /// namespace, remap rules, domain field).
    pub(crate) fn declare_request(
        &mut self,
        slot: usize,
        f: Form,
        picks: [u8; 4],
        id: u8,
    ) -> (Vec<u8>, Effect) {
        let esc = f.style & 4 != 0;
        let pick = |table_len: usize, k: usize| picks[k] as usize % table_len;
        let name = NODE_NAMES[pick(NODE_NAMES.len(), 0)];
        let namespace = NAMESPACES[pick(NAMESPACES.len(), 1)];
        let remap = REMAPS[pick(REMAPS.len(), 2)];
        let domain = DOMAIN_FIELDS[pick(DOMAIN_FIELDS.len(), 3)];
        let id = self.fresh_id(slot, id);
        let mut m: Members<'_> = vec![
            ("op", json_string("declare_node")),
            ("name", jstr(name, esc)),
        ];
        if let Some(ns) = namespace {
            m.push(("namespace", jstr(ns, esc)));
        }
        if !remap.is_empty() {
            let rules: Vec<String> = remap.iter().map(|r| jstr(r, esc)).collect();
            m.push(("remap", format!("[{}]", rules.join(","))));
        }
        if let Some(d) = domain {
            m.push(("domain", d.to_string()));
        }
        push_id(&mut m, id.as_ref());
        let effect = Effect::DeclareNode {
            name,
            namespace,
            remap,
            domain,
            id,
        };
        (assemble(&m, f.style, f.spacing), effect)
    }

    /// `destroy_node` of the client's node `pick` picks (by name or full
    /// name), or of one it never declared.
    fn destroy_request(&mut self, slot: usize, f: Form, pick: u8, id: u8) -> (Vec<u8>, Effect) {
        let esc = f.style & 4 != 0;
        let nodes = &self.model.client(slot).nodes;
        let k = pick as usize % (nodes.len() + 1);
        let name = match nodes.get(k) {
            Some(n) if pick % 2 == 0 => n.name.clone(),
            Some(n) => n.full.clone(),
            None => GHOST_NODE.to_string(),
        };
        let id = self.fresh_id(slot, id);
        let mut m: Members<'_> = vec![
            ("op", json_string("destroy_node")),
            ("name", jstr(&name, esc)),
        ];
        push_id(&mut m, id.as_ref());
        (
            assemble(&m, f.style, f.spacing),
            Effect::DestroyNode { name, id },
        )
    }

    /// A registration, publish or call of one of [`NAMES`], with the
    /// `node` field `node` picks (see [`NamedReq`]).
    fn named_request(&mut self, slot: usize, f: Form, n: NamedReq) -> (Vec<u8>, Effect) {
        let NamedReq {
            op,
            name,
            node,
            payload,
            id,
        } = n;
        let name = NAMES[name as usize % NAMES.len()];
        let nodes = &self.model.client(slot).nodes;
        let node = match node % 8 {
            0..=3 => None,
            4 => Some(nodes.first().map_or(GHOST_NODE.into(), |n| n.name.clone())),
            5 => Some(nodes.last().map_or(GHOST_NODE.into(), |n| n.full.clone())),
            6 => Some(nodes.get(1).map_or(GHOST_NODE.into(), |n| n.name.clone())),
            _ => Some(GHOST_NODE.into()),
        };
        match op % 8 {
            0 => self.topic_request(slot, f, "subscribe", name, node, id),
            1 => self.topic_request(slot, f, "unsubscribe", name, node, id),
            2 => self.topic_request(slot, f, "advertise", name, node, id),
            3 => self.topic_request(slot, f, "unadvertise", name, node, id),
            4 => self.publish_request(slot, f, name, node, payload, id),
            5 => self.service_request(slot, f, true, name, node, id),
            6 => self.service_request(slot, f, false, name, node, id),
            _ => {
                let call = CallLine {
                    name,
                    node,
                    timeout: (payload >> 13) as u8,
                    args: payload,
                    id,
                    wait: false,
                };
                self.call_request(slot, f, call)
            }
        }
    }

    /// The id a provider answers with, by `kind % 8` (see [`Req::Respond`]).
    fn response_id(&self, slot: usize, f: Form, pick: u8, kind: u8) -> Option<String> {
        let me = self.model.client(slot).conn;
        let own = &self.model.client(slot).learned;
        let pick = pick as usize;
        let forged = |n: usize| FORGED_IDS[n % FORGED_IDS.len()].to_string();
        // Without `values` a rosbridge answer is still valid: answer a call.
        let k = match kind % 8 {
            7 if f.rosbridge => 0,
            k => k,
        };
        match k {
            0..=3 => {
                let prefer_alive = k < 3;
                let pool: Vec<&String> = own
                    .iter()
                    .filter(|r| self.model.serving(r, me) == prefer_alive)
                    .collect();
                if !pool.is_empty() {
                    Some(pool[pick % pool.len()].clone())
                } else if !own.is_empty() {
                    Some(own[pick % own.len()].clone())
                } else {
                    Some(forged(pick))
                }
            }
            4 => {
                let others: Vec<&String> = self
                    .model
                    .all_learned
                    .iter()
                    .filter(|r| !own.contains(r))
                    .collect();
                if others.is_empty() {
                    Some(forged(pick))
                } else {
                    Some(others[pick % others.len()].clone())
                }
            }
            5 | 7 => Some(forged(pick)),
            _ => None,
        }
    }

    fn respond_request(
        &mut self,
        slot: usize,
        f: Form,
        pick: u8,
        kind: u8,
        result: u8,
        status: u8,
    ) -> (Vec<u8>, Effect) {
        let esc = f.style & 4 != 0;
        let id_raw = self.response_id(slot, f, pick, kind);
        self.counter += 1;
        let (n, for_id) = (self.counter, id_raw.as_deref().unwrap_or("null"));
        let values_raw = match (result as usize / RESULTS.len()) % 4 {
            0 | 1 => format!("{{\"by\":{slot},\"k\":{n},\"for\":{for_id}}}"),
            2 => format!("[{slot},{n},{for_id}]"),
            _ => format!("\"by {slot} k {n}\""),
        };
        let result_raw = RESULTS[result as usize % RESULTS.len()];
        let status_raw = STATUSES[status as usize % STATUSES.len()];
        let service_name = match id_raw.as_ref().and_then(|r| self.model.rg_map.get(r)) {
            Some(&crate::model::Fwd::Call(k)) => self.model.calls[k].service.clone(),
            _ => "/s1".to_string(),
        };
        let mut m: Members<'_> = vec![
            ("op", json_string("service_response")),
            ("service", jstr(&service_name, esc)),
        ];
        if let Some(r) = &id_raw {
            m.push(("id", r.clone()));
        }
        let missing_values = kind % 8 == 7;
        if !missing_values {
            m.push(("values", values_raw.clone()));
        }
        m.push(("result", result_raw.to_string()));
        if let Some(s) = status_raw {
            m.push(("status", s.to_string()));
        }
        let values = serde_json::from_str(&values_raw).expect("values JSON");
        let effect = Effect::Respond {
            id: id_raw.map(parse_id),
            values: (!missing_values).then_some(values),
            result: result_raw,
            status: status_raw.map(|s| serde_json::from_str(s).expect("status JSON")),
        };
        (assemble(&m, f.style, f.spacing), effect)
    }
}

/// One spec: the members a request adds and what they state (`None`: the
/// decoder refuses the request).
pub(super) type Spec = (
    &'static [(&'static str, &'static str)],
    Option<crate::model::qos::Asked>,
);

/// A `call_service` line to write: the service as written, the `node`
/// field, the picks of the `timeout` text ([`TIMEOUTS`]), the args
/// ([`Sim::payload`]) and the id, and whether it sends `"wait": true`.
#[derive(Debug)]
pub(crate) struct CallLine<'a> {
    pub name: &'a str,
    pub node: Option<String>,
    pub timeout: u8,
    pub args: u16,
    pub id: u8,
    pub wait: bool,
}

/// How one request is written: the action's style bits, the whitespace,
/// whether optional fields are left out, and the dialect.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Form {
    pub style: u8,
    pub spacing: Spacing,
    pub lean: bool,
    pub rosbridge: bool,
}
