//! Outgoing frames, written straight into a caller-owned `Vec<u8>`.
//!
//! Every function appends exactly one line (JSON object + `\n`). Raw payloads
//! are copied byte for byte; only names and our own texts are escaped here.
//! No intermediate `String` or `serde_json::Value` is built.

use std::rc::Rc;

use crate::Raw;

/// Appends `s` as a JSON string literal (quotes included).
pub fn json_string(out: &mut Vec<u8>, s: &str) {
    out.reserve(s.len() + 2);
    out.push(b'"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let esc: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0..=0x1f => b"",
            _ => continue,
        };
        out.extend_from_slice(&bytes[start..i]);
        if esc.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.extend_from_slice(b"\\u00");
            out.push(HEX[(b >> 4) as usize]);
            out.push(HEX[(b & 15) as usize]);
        } else {
            out.extend_from_slice(esc);
        }
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// The part of a publish frame that depends only on the topic:
/// `{"op":"publish","topic":"<name>","msg":`. Kept per topic by the router so
/// a publish costs one copy of the payload and nothing else.
pub fn publish_prefix(topic: &str) -> Box<[u8]> {
    let mut out = Vec::with_capacity(topic.len() + 32);
    out.extend_from_slice(br#"{"op":"publish","topic":"#);
    json_string(&mut out, topic);
    out.extend_from_slice(br#","msg":"#);
    out.into_boxed_slice()
}

/// A publish frame from a topic's prefix and the raw message, built in its
/// final shared allocation: one allocation and one copy of the payload, which
/// matters for megabyte images (half the time of encoding into a buffer and
/// copying that into an `Rc`).
pub fn publish_shared(prefix: &[u8], msg: Raw<'_>) -> Rc<[u8]> {
    concat_shared(&publish_parts(prefix, msg))
}

/// The pieces of a publish frame, in order: the topic's prefix, the raw
/// message, the closing `}\n`.
pub fn publish_parts<'a>(prefix: &'a [u8], msg: Raw<'a>) -> [&'a [u8]; 3] {
    [prefix, msg.as_bytes(), b"}\n"]
}

/// A publish line that carries the message's own CDR beside `msg`, as
/// base64 in a last member `cdr` (for a gateway's bridge: its ROS 2 peers
/// put those bytes untouched; `crates/peers/src/driver.rs` reads it back
/// with [`publish_cdr`]).
pub fn publish_with_cdr(prefix: &[u8], msg: Raw<'_>, cdr: &[u8]) -> Rc<[u8]> {
    let mut b64 = Vec::with_capacity(cdr.len().div_ceil(3) * 4);
    crate::base64::encode_into(&mut b64, cdr);
    concat_shared(&[prefix, msg.as_bytes(), br#","cdr":""#, &b64, b"\"}\n"])
}

/// The base64 CDR of a line made by [`publish_with_cdr`] (without its
/// newline), if it has one: its last member, the only way such a line
/// ends with `"}` (a plain publish line ends with its object's `}}`).
pub fn publish_cdr(line: &[u8]) -> Option<&[u8]> {
    let body = line.strip_suffix(b"\"}")?;
    const KEY: &[u8] = br#","cdr":""#;
    let at = body.windows(KEY.len()).rposition(|w| w == KEY)?;
    let b64 = &body[at + KEY.len()..];
    b64.iter()
        .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'='))
        .then_some(b64)
}

/// The concatenation of `parts` in a fresh `Rc<[u8]>`.
pub fn concat_shared(parts: &[&[u8]]) -> Rc<[u8]> {
    let len = parts.iter().map(|p| p.len()).sum();
    let mut rc = Rc::<[u8]>::new_uninit_slice(len);
    let mut filled = 0;
    if let Some(buf) = Rc::get_mut(&mut rc) {
        for p in parts {
            let dst = &mut buf[filled..filled + p.len()];
            // SAFETY: `dst` is `p.len()` bytes of our own fresh buffer (the
            // slicing above checked the bounds) and cannot overlap `p`;
            // `MaybeUninit<u8>` has `u8`'s layout. (A memcpy: the
            // byte-by-byte loop before it cost a megabyte image more.)
            unsafe {
                std::ptr::copy_nonoverlapping(p.as_ptr(), dst.as_mut_ptr().cast::<u8>(), p.len());
            }
            filled += p.len();
        }
    }
    if filled != len {
        // Unreachable: a fresh Rc is unique. Stay safe regardless.
        return parts.concat().into();
    }
    // SAFETY: all `len` bytes were written just above.
    unsafe { rc.assume_init() }
}

/// A publish frame from a topic's prefix and the raw message.
pub fn publish(out: &mut Vec<u8>, prefix: &[u8], msg: Raw<'_>) {
    for part in publish_parts(prefix, msg) {
        out.extend_from_slice(part);
    }
}

/// Status severity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Info,
    /// Something the client should know about that did not fail its
    /// request (a duplicate node name, an incompatible QoS pairing).
    Warning,
    Error,
}

/// `{"op":"status","level":..,"msg":..,"id":..}`; `id` is the raw id bytes.
pub fn status(out: &mut Vec<u8>, level: Level, msg: &str, id: Option<&[u8]>) {
    out.extend_from_slice(br#"{"op":"status","level":"#);
    out.extend_from_slice(match level {
        Level::Info => br#""info""#,
        Level::Warning => br#""warning""#,
        Level::Error => br#""error""#,
    });
    out.extend_from_slice(br#","msg":"#);
    json_string(out, msg);
    if let Some(id) = id {
        out.extend_from_slice(br#","id":"#);
        out.extend_from_slice(id);
    }
    out.extend_from_slice(b"}\n");
}

/// A call forwarded to a provider: `service_json` is the escaped name,
/// `call_id` our provider-side id.
pub fn call_service(out: &mut Vec<u8>, service_json: &[u8], call_id: u64, args: &str) {
    out.extend_from_slice(br#"{"op":"call_service","service":"#);
    out.extend_from_slice(service_json);
    out.extend_from_slice(br#","id":"#);
    crate::ids::push_call_id(out, call_id);
    out.extend_from_slice(br#","args":"#);
    out.extend_from_slice(args.as_bytes());
    out.extend_from_slice(b"}\n");
}

/// A response to a caller, carrying the provider's raw `values`, `result`
/// and optional `status`.
pub fn service_response(
    out: &mut Vec<u8>,
    service_json: &[u8],
    id: Option<&[u8]>,
    values: &[u8],
    result: &[u8],
    status: Option<&[u8]>,
) {
    out.extend_from_slice(br#"{"op":"service_response","service":"#);
    out.extend_from_slice(service_json);
    if let Some(id) = id {
        out.extend_from_slice(br#","id":"#);
        out.extend_from_slice(id);
    }
    out.extend_from_slice(br#","values":"#);
    out.extend_from_slice(values);
    out.extend_from_slice(br#","result":"#);
    out.extend_from_slice(result);
    if let Some(status) = status {
        out.extend_from_slice(br#","status":"#);
        out.extend_from_slice(status);
    }
    out.extend_from_slice(b"}\n");
}

/// The failure shape every rosbridge client handles:
/// `{"op":"service_response","service":S,"id":ID,"values":"<reason>","result":false}`.
pub fn service_failure(out: &mut Vec<u8>, service_json: &[u8], id: Option<&[u8]>, reason: &str) {
    let mut values = Vec::with_capacity(reason.len() + 2);
    json_string(&mut values, reason);
    service_response(out, service_json, id, &values, b"false", None);
}

/// A goal sent to an action server: `action_json` is the escaped name,
/// `goal_id` our server-side id, `action_type` the caller's (escaped),
/// `args` raw, `feedback` whether the caller asked for feedback.
pub fn send_action_goal(
    out: &mut Vec<u8>,
    action_json: &[u8],
    goal_id: u64,
    action_type_json: &[u8],
    args: &str,
    feedback: bool,
) {
    out.extend_from_slice(br#"{"op":"send_action_goal","id":"#);
    crate::ids::push_call_id(out, goal_id);
    out.extend_from_slice(br#","action":"#);
    out.extend_from_slice(action_json);
    out.extend_from_slice(br#","action_type":"#);
    out.extend_from_slice(action_type_json);
    out.extend_from_slice(br#","args":"#);
    out.extend_from_slice(args.as_bytes());
    out.extend_from_slice(if feedback {
        &br#","feedback":true}"#[..]
    } else {
        &br#","feedback":false}"#[..]
    });
    out.push(b'\n');
}

/// A cancel sent to an action server for its goal `goal_id`.
pub fn cancel_action_goal(out: &mut Vec<u8>, action_json: &[u8], goal_id: u64) {
    out.extend_from_slice(br#"{"op":"cancel_action_goal","id":"#);
    crate::ids::push_call_id(out, goal_id);
    out.extend_from_slice(br#","action":"#);
    out.extend_from_slice(action_json);
    out.extend_from_slice(b"}\n");
}

/// Feedback for a caller's goal `id`, carrying the server's raw `values`.
pub fn action_feedback(out: &mut Vec<u8>, action_json: &[u8], id: &[u8], values: &[u8]) {
    out.extend_from_slice(br#"{"op":"action_feedback","id":"#);
    out.extend_from_slice(id);
    out.extend_from_slice(br#","action":"#);
    out.extend_from_slice(action_json);
    out.extend_from_slice(br#","values":"#);
    out.extend_from_slice(values);
    out.extend_from_slice(b"}\n");
}

/// The result of a caller's goal `id`: raw `values`, `status`, `result`.
pub fn action_result(
    out: &mut Vec<u8>,
    action_json: &[u8],
    id: &[u8],
    values: &[u8],
    status: &[u8],
    result: &[u8],
) {
    out.extend_from_slice(br#"{"op":"action_result","id":"#);
    out.extend_from_slice(id);
    out.extend_from_slice(br#","action":"#);
    out.extend_from_slice(action_json);
    out.extend_from_slice(br#","values":"#);
    out.extend_from_slice(values);
    out.extend_from_slice(br#","status":"#);
    out.extend_from_slice(status);
    out.extend_from_slice(br#","result":"#);
    out.extend_from_slice(result);
    out.extend_from_slice(b"}\n");
}

/// A goal that failed in the gateway: `values` a reason string, `status`
/// 0 (never reached a server) or 6 (aborted), `result:false`, which is how
/// rosbridge fails a goal and what fires roslib's and roslibpy's error
/// callbacks.
pub fn action_failure(out: &mut Vec<u8>, action_json: &[u8], id: &[u8], status: u8, reason: &str) {
    let mut values = Vec::with_capacity(reason.len() + 2);
    json_string(&mut values, reason);
    let mut st = Vec::with_capacity(1);
    push_u64(&mut st, u64::from(status));
    action_result(out, action_json, id, &values, &st, b"false");
}

pub use crate::ids::push_u64;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_escape_and_round_trip() {
        for s in ["", "/a", "q\"b\\s\n\t\r\u{1}é/🤖"] {
            let mut out = Vec::new();
            json_string(&mut out, s);
            let back: String = serde_json::from_slice(&out).expect("valid JSON string");
            assert_eq!(back, s);
        }
    }

    #[test]
    fn frames_are_single_json_lines() {
        let raw = Raw::from_valid_json("{\"a\": 1}");
        let mut out = Vec::new();
        publish(&mut out, &publish_prefix("/t\""), raw);
        status(&mut out, Level::Error, "bad \"x\"", Some(b"7"));
        call_service(&mut out, b"\"/s\"", 42, raw.get());
        service_failure(&mut out, b"\"/s\"", Some(b"\"c1\""), "gone");
        send_action_goal(&mut out, b"\"/f\"", 7, b"\"a/T\"", "{}", true);
        cancel_action_goal(&mut out, b"\"/f\"", 7);
        action_feedback(&mut out, b"\"/f\"", b"\"g\"", b"[1]");
        action_result(&mut out, b"\"/f\"", b"\"g\"", b"{}", b"4", b"true");
        action_failure(&mut out, b"\"/f\"", b"\"g\"", 6, "server \"gone\"");
        let text = String::from_utf8(out).expect("utf8");
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("json line"))
            .collect();
        assert_eq!(lines.len(), 9);
        assert_eq!(lines[4]["id"], "rg-7");
        assert_eq!(lines[4]["feedback"], true);
        assert_eq!(lines[5]["op"], "cancel_action_goal");
        assert_eq!(lines[6]["values"][0], 1);
        assert_eq!(lines[7]["status"], 4);
        assert_eq!(lines[8]["status"], 6);
        assert_eq!(lines[8]["values"], "server \"gone\"");
        assert_eq!(lines[0]["topic"], "/t\"");
        assert!(text.contains("\"msg\":{\"a\": 1}"));
        assert_eq!(lines[1]["id"], 7);
        assert_eq!(lines[2]["id"], "rg-42");
        assert_eq!(lines[3]["values"], "gone");
        assert_eq!(lines[3]["result"], false);
    }

    #[test]
    fn shared_frames_equal_buffered_ones() {
        let raw = Raw::from_valid_json("[1, 2]");
        let prefix = publish_prefix("/t");
        let mut out = Vec::new();
        publish(&mut out, &prefix, raw);
        assert_eq!(&*publish_shared(&prefix, raw), &out[..]);
        assert_eq!(&*concat_shared(&[]), b"");
    }

    #[test]
    fn a_bridges_line_carries_the_cdr_and_a_plain_line_none() {
        let prefix = publish_prefix("/t");
        let msg = Raw::from_valid_json(r#"{"data":"x\"}","cdr":"AAAA"}"#);
        let line = publish_with_cdr(&prefix, msg, &[0, 1, 0, 0, 0xab]);
        let line = line.strip_suffix(b"\n").expect("one line");
        assert_eq!(publish_cdr(line), Some(&b"AAEAAKs="[..]));
        let v: serde_json::Value = serde_json::from_slice(line).expect("JSON");
        assert_eq!(v["msg"]["cdr"], "AAAA", "{v}");
        assert_eq!(v["cdr"], "AAEAAKs=", "{v}");
        // A plain line (even with a member `cdr` in its message) has none.
        let plain = publish_shared(&prefix, msg);
        let plain = plain.strip_suffix(b"\n").expect("one line");
        assert_eq!(publish_cdr(plain), None);
    }
}
