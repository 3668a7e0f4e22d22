//! [`Rosgate`]: the rosbridge-style newline-delimited JSON protocol.
//!
//! Requests are written by hand (the names are the tool's own and need no
//! escaping beyond what [`json_str`] does). Incoming lines take one of two
//! paths:
//! - the hot paths, a delivered publication and the three action frames
//!   (a goal at the server, feedback and a result at the caller: several
//!   per goal), are recognised by their fixed layout as rosgate writes them
//!   and split without parsing the payload, which the payload check scans
//!   anyway;
//! - everything else (statuses, calls, replies: a few per run or one per
//!   call), and any of the above written differently, goes through
//!   serde_json with `RawValue` fields, so key order and whitespace do not
//!   matter there.
//!
//! Tokens travel as ids `"k<token>"`; calls and goals use bare integer
//! ids, which is what the scenario's `id` is. The built-in
//! `/rosgate/stats` service is answered with the id `"stats"`.

use memchr::memchr;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::payload::push_u64;
use crate::transport::{Codec, DecodeError, Event, ServerCounters};

/// The gateway's statistics service.
const STATS_SERVICE: &str = "/rosgate/stats";

const PUBLISH_PREFIX: &[u8] = b"{\"op\":\"publish\",\"topic\":\"";
const MSG_KEY: &[u8] = b"\",\"msg\":";
/// Action frames as rosgate writes them (`rosgate_wire::encode`).
const GOAL_PREFIX: &[u8] = b"{\"op\":\"send_action_goal\",\"id\":";
const FEEDBACK_PREFIX: &[u8] = b"{\"op\":\"action_feedback\",\"id\":";
const RESULT_PREFIX: &[u8] = b"{\"op\":\"action_result\",\"id\":";
const ACTION_KEY: &[u8] = b",\"action\":\"";
/// The action type the tool's goals and server name.
const ACTION_TYPE: &str = "rosgate_load/Bench";

#[derive(Debug)]
pub struct Rosgate {
    max_frame: usize,
    /// Bytes of the unread buffer already searched for a newline, so a
    /// 1 MiB line arriving in 64 KiB reads is scanned once, not 16 times.
    scanned: usize,
}

impl Codec for Rosgate {
    const NAME: &'static str = "rosgate";

    fn new(max_frame: usize) -> Self {
        Rosgate {
            max_frame,
            scanned: 0,
        }
    }

    fn subscribe(&mut self, out: &mut Vec<u8>, topic: &str, token: u64) {
        out.extend_from_slice(b"{\"op\":\"subscribe\",\"topic\":");
        json_str(out, topic);
        out.extend_from_slice(b",\"type\":\"std_msgs/String\",\"id\":\"k");
        push_u64(out, token);
        out.extend_from_slice(b"\"}\n");
    }

    fn publish(&mut self, out: &mut Vec<u8>, topic: &str, payload: &[u8]) {
        out.extend_from_slice(b"{\"op\":\"publish\",\"topic\":");
        json_str(out, topic);
        out.extend_from_slice(b",\"msg\":");
        out.extend_from_slice(payload);
        out.extend_from_slice(b"}\n");
    }

    fn advertise_service(&mut self, out: &mut Vec<u8>, service: &str, token: u64) -> bool {
        out.extend_from_slice(b"{\"op\":\"advertise_service\",\"service\":");
        json_str(out, service);
        out.extend_from_slice(b",\"type\":\"rosgate_load/Echo\",\"id\":\"k");
        push_u64(out, token);
        out.extend_from_slice(b"\"}\n");
        true
    }

    fn call(&mut self, out: &mut Vec<u8>, service: &str, id: u64, args: &[u8]) {
        out.extend_from_slice(b"{\"op\":\"call_service\",\"service\":");
        json_str(out, service);
        out.extend_from_slice(b",\"id\":");
        push_u64(out, id);
        out.extend_from_slice(b",\"args\":");
        out.extend_from_slice(args);
        out.extend_from_slice(b"}\n");
    }

    fn respond(&mut self, out: &mut Vec<u8>, service: &str, id: &[u8], values: &[u8]) {
        out.extend_from_slice(b"{\"op\":\"service_response\",\"service\":");
        json_str(out, service);
        out.extend_from_slice(b",\"id\":");
        out.extend_from_slice(id);
        out.extend_from_slice(b",\"values\":");
        out.extend_from_slice(values);
        out.extend_from_slice(b",\"result\":true}\n");
    }

    fn advertise_action(&mut self, out: &mut Vec<u8>, action: &str, token: u64) -> bool {
        out.extend_from_slice(b"{\"op\":\"advertise_action\",\"action\":");
        json_str(out, action);
        out.extend_from_slice(b",\"type\":");
        json_str(out, ACTION_TYPE);
        out.extend_from_slice(b",\"id\":\"k");
        push_u64(out, token);
        out.extend_from_slice(b"\"}\n");
        true
    }

    fn send_goal(&mut self, out: &mut Vec<u8>, action: &str, id: u64, args: &[u8]) {
        out.extend_from_slice(b"{\"op\":\"send_action_goal\",\"id\":");
        push_u64(out, id);
        out.extend_from_slice(b",\"action\":");
        json_str(out, action);
        out.extend_from_slice(b",\"action_type\":");
        json_str(out, ACTION_TYPE);
        out.extend_from_slice(b",\"args\":");
        out.extend_from_slice(args);
        out.extend_from_slice(b",\"feedback\":true}\n");
    }

    fn feedback(&mut self, out: &mut Vec<u8>, action: &str, id: &[u8], values: &[u8]) {
        out.extend_from_slice(b"{\"op\":\"action_feedback\",\"id\":");
        out.extend_from_slice(id);
        out.extend_from_slice(b",\"action\":");
        json_str(out, action);
        out.extend_from_slice(b",\"values\":");
        out.extend_from_slice(values);
        out.extend_from_slice(b"}\n");
    }

    fn goal_result(&mut self, out: &mut Vec<u8>, action: &str, id: &[u8], values: &[u8]) {
        out.extend_from_slice(b"{\"op\":\"action_result\",\"id\":");
        out.extend_from_slice(id);
        out.extend_from_slice(b",\"action\":");
        json_str(out, action);
        out.extend_from_slice(b",\"values\":");
        out.extend_from_slice(values);
        out.extend_from_slice(b",\"status\":4,\"result\":true}\n");
    }

    fn stats_request(&mut self, out: &mut Vec<u8>) -> bool {
        out.extend_from_slice(b"{\"op\":\"call_service\",\"service\":");
        json_str(out, STATS_SERVICE);
        out.extend_from_slice(b",\"id\":\"stats\",\"args\":{}}\n");
        true
    }

    fn parse_stats(values: &[u8]) -> Option<ServerCounters> {
        #[derive(Deserialize)]
        struct S {
            connections_open: u64,
            published: u64,
            delivered: u64,
            dropped: u64,
        }
        let s: S = serde_json::from_slice(values).ok()?;
        Some(ServerCounters {
            connections_open: s.connections_open,
            published: s.published,
            delivered: s.delivered,
            dropped: s.dropped,
        })
    }

    fn decode<'a>(&mut self, buf: &'a [u8]) -> Result<Option<(Event<'a>, usize)>, DecodeError> {
        let from = self.scanned.min(buf.len());
        let Some(nl) = memchr(b'\n', &buf[from..]).map(|i| from + i) else {
            if buf.len() > self.max_frame {
                return Err(DecodeError(format!(
                    "line longer than {} bytes without a newline",
                    self.max_frame
                )));
            }
            self.scanned = buf.len();
            return Ok(None);
        };
        self.scanned = 0;
        let line = strip_cr(&buf[..nl]);
        let ev = match fast_publish(line).or_else(|| fast_action(line)) {
            Some(ev) => ev,
            None => slow(line)?,
        };
        Ok(Some((ev, nl + 1)))
    }
}

/// `{"op":"publish","topic":"<t>","msg":<m>}` exactly as rosgate writes it.
fn fast_publish(line: &[u8]) -> Option<Event<'_>> {
    let rest = line.strip_prefix(PUBLISH_PREFIX)?;
    let q = memchr(b'"', rest)?;
    let topic = &rest[..q];
    if topic.contains(&b'\\') {
        return None;
    }
    let payload = rest[q..].strip_prefix(MSG_KEY)?.strip_suffix(b"}")?;
    Some(Event::Delivery { topic, payload })
}

/// The action frames exactly as rosgate writes them:
/// `{"op":"send_action_goal","id":"rg-<n>","action":"<a>","action_type":"<t>","args":<a>,"feedback":<b>}`,
/// `{"op":"action_feedback","id":<id>,"action":"<a>","values":<v>}` and
/// `{"op":"action_result","id":<id>,"action":"<a>","values":<v>,"status":<s>,"result":<r>}`.
/// `None` for anything else, including a reply whose id is not ours (an
/// integer), which the slow path then reports.
fn fast_action(line: &[u8]) -> Option<Event<'_>> {
    if let Some(rest) = line.strip_prefix(GOAL_PREFIX) {
        // The gateway's own ids are `"rg-<n>"`: no escapes.
        let q = memchr(b'"', rest.strip_prefix(b"\"")?)? + 2;
        let (id, rest) = rest.split_at(q);
        if id.contains(&b'\\') {
            return None;
        }
        let rest = skip_name(rest.strip_prefix(ACTION_KEY)?)?;
        let rest = skip_name(rest.strip_prefix(b",\"action_type\":\"")?)?;
        let rest = rest.strip_prefix(b",\"args\":")?;
        let args = rest
            .strip_suffix(b",\"feedback\":true}")
            .or_else(|| rest.strip_suffix(b",\"feedback\":false}"))?;
        return Some(Event::Goal { id, args });
    }
    if let Some(rest) = line.strip_prefix(FEEDBACK_PREFIX) {
        let (id, rest) = take_id(rest)?;
        let rest = skip_name(rest.strip_prefix(ACTION_KEY)?)?;
        let values = rest.strip_prefix(b",\"values\":")?.strip_suffix(b"}")?;
        return Some(Event::Feedback { id, values });
    }
    let rest = line.strip_prefix(RESULT_PREFIX)?;
    let (id, rest) = take_id(rest)?;
    let rest = skip_name(rest.strip_prefix(ACTION_KEY)?)?;
    let rest = rest.strip_prefix(b",\"values\":")?;
    let (rest, result) = match rest.strip_suffix(b",\"result\":true}") {
        Some(r) => (r, true),
        None => (rest.strip_suffix(b",\"result\":false}")?, false),
    };
    // The status is the last field before `result`: digits only, so the
    // values (any JSON) end at the last `,"status":`.
    let digits = rest.iter().rev().take_while(|c| c.is_ascii_digit()).count();
    let (rest, status) = rest.split_at(rest.len() - digits);
    let values = rest.strip_suffix(b",\"status\":")?;
    Some(Event::GoalResult {
        id,
        values,
        ok: result && status == b"4",
    })
}

/// Leading integer id (ours) of a frame and what follows it.
fn take_id(b: &[u8]) -> Option<(u64, &[u8])> {
    let n = b.iter().take_while(|c| c.is_ascii_digit()).count();
    Some((parse_u64(&b[..n])?, &b[n..]))
}

/// Skips the rest of a string with no escapes whose opening quote was
/// consumed; `None` when it has any.
fn skip_name(b: &[u8]) -> Option<&[u8]> {
    let q = memchr(b'"', b)?;
    if b[..q].contains(&b'\\') {
        return None;
    }
    Some(&b[q + 1..])
}

/// Any line, key order and whitespace free.
fn slow(line: &[u8]) -> Result<Event<'_>, DecodeError> {
    #[derive(Deserialize)]
    struct Frame<'a> {
        #[serde(borrow)]
        op: &'a RawValue,
        #[serde(borrow, default)]
        topic: Option<&'a RawValue>,
        #[serde(borrow, default)]
        msg: Option<&'a RawValue>,
        #[serde(borrow, default)]
        id: Option<&'a RawValue>,
        #[serde(borrow, default)]
        level: Option<&'a RawValue>,
        #[serde(borrow, default)]
        service: Option<&'a RawValue>,
        #[serde(borrow, default)]
        args: Option<&'a RawValue>,
        #[serde(borrow, default)]
        values: Option<&'a RawValue>,
        #[serde(borrow, default)]
        result: Option<&'a RawValue>,
        #[serde(borrow, default)]
        status: Option<&'a RawValue>,
    }
    let f: Frame<'_> = serde_json::from_slice(line).map_err(|e| {
        DecodeError(format!(
            "unparseable line ({e}): {}",
            String::from_utf8_lossy(&line[..line.len().min(200)])
        ))
    })?;
    let missing = |what: &str| DecodeError(format!("{what} without required fields"));
    Ok(match f.op.get().as_bytes() {
        b"\"publish\"" => Event::Delivery {
            topic: unquote(raw(f.topic).ok_or_else(|| missing("publish"))?),
            payload: raw(f.msg).ok_or_else(|| missing("publish"))?,
        },
        b"\"status\"" => {
            let error = raw(f.level) == Some(b"\"error\"");
            let text = raw(f.msg).unwrap_or(b"");
            match raw(f.id).and_then(token_of) {
                Some(token) if error => Event::Refused {
                    token,
                    reason: text,
                },
                Some(token) => Event::Ack { token },
                None => Event::Notice { error, text },
            }
        }
        b"\"call_service\"" => Event::Call {
            id: raw(f.id).ok_or_else(|| missing("call_service"))?,
            args: raw(f.args).ok_or_else(|| missing("call_service"))?,
        },
        b"\"service_response\"" => {
            let values = raw(f.values).ok_or_else(|| missing("service_response"))?;
            let ok = raw(f.result) == Some(b"true");
            let stats = raw(f.service).map(unquote) == Some(STATS_SERVICE.as_bytes());
            match raw(f.id) {
                Some(b"\"stats\"") if stats => Event::Stats { values },
                Some(id) => match parse_u64(id) {
                    Some(id) => Event::Reply { id, values, ok },
                    None => Event::Notice {
                        error: true,
                        text: line,
                    },
                },
                // A response with no id cannot be correlated; say so.
                None => Event::Notice {
                    error: true,
                    text: line,
                },
            }
        }
        b"\"send_action_goal\"" => Event::Goal {
            id: raw(f.id).ok_or_else(|| missing("send_action_goal"))?,
            args: raw(f.args).ok_or_else(|| missing("send_action_goal"))?,
        },
        b"\"action_feedback\"" | b"\"action_result\"" => {
            let values = raw(f.values).ok_or_else(|| missing("action frame"))?;
            match raw(f.id).and_then(parse_u64) {
                Some(id) if f.op.get() == "\"action_feedback\"" => Event::Feedback { id, values },
                Some(id) => Event::GoalResult {
                    id,
                    values,
                    ok: raw(f.result) == Some(b"true") && raw(f.status) == Some(b"4"),
                },
                // Not one of our goals: cannot be correlated; say so.
                None => Event::Notice {
                    error: true,
                    text: line,
                },
            }
        }
        // The gateway cancels a goal whose caller left or timed out: not
        // expected in a run, so worth a line in the log.
        b"\"cancel_action_goal\"" => Event::Notice {
            error: true,
            text: line,
        },
        _ => Event::Notice {
            error: false,
            text: line,
        },
    })
}

/// The raw JSON text of an optional field.
fn raw(v: Option<&RawValue>) -> Option<&[u8]> {
    v.map(|r| r.get().as_bytes())
}

/// `"k<digits>"` -> token.
fn token_of(id: &[u8]) -> Option<u64> {
    parse_u64(id.strip_prefix(b"\"k")?.strip_suffix(b"\"")?)
}

fn parse_u64(b: &[u8]) -> Option<u64> {
    if b.is_empty() || b.len() > 20 || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(b).ok()?.parse().ok()
}

/// `"x"` -> `x`; anything else unchanged.
fn unquote(b: &[u8]) -> &[u8] {
    b.strip_prefix(b"\"")
        .and_then(|b| b.strip_suffix(b"\""))
        .unwrap_or(b)
}

fn strip_cr(b: &[u8]) -> &[u8] {
    b.strip_suffix(b"\r").unwrap_or(b)
}

/// Appends `s` as a JSON string literal.
pub(crate) fn json_str(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    for &c in s.as_bytes() {
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            c if c < 0x20 => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(b"\\u00");
                out.push(HEX[usize::from(c >> 4)]);
                out.push(HEX[usize::from(c & 15)]);
            }
            c => out.push(c),
        }
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(line: &[u8]) -> Event<'_> {
        let mut c = Rosgate::new(1 << 20);
        let (ev, used) = c.decode(line).expect("decodes").expect("complete");
        assert_eq!(used, line.len());
        ev
    }

    #[test]
    fn deliveries_fast_and_slow() {
        let ev = one(b"{\"op\":\"publish\",\"topic\":\"/bench/0\",\"msg\":{\"p\":1}}\n");
        assert_eq!(
            ev,
            Event::Delivery {
                topic: b"/bench/0",
                payload: b"{\"p\":1}"
            }
        );
        let ev = one(b"{ \"msg\" : {\"p\":1}, \"topic\":\"/bench/0\", \"op\":\"publish\" }\n");
        assert_eq!(
            ev,
            Event::Delivery {
                topic: b"/bench/0",
                payload: b"{\"p\":1}"
            }
        );
    }

    #[test]
    fn statuses_replies_calls() {
        let ack =
            b"{\"op\":\"status\",\"level\":\"info\",\"msg\":\"subscribed to /b\",\"id\":\"k7\"}\n";
        assert_eq!(one(ack), Event::Ack { token: 7 });
        let no = b"{\"op\":\"status\",\"level\":\"error\",\"msg\":\"nope\",\"id\":\"k8\"}\n";
        assert_eq!(
            one(no),
            Event::Refused {
                token: 8,
                reason: b"\"nope\""
            }
        );
        let call =
            b"{\"op\":\"call_service\",\"service\":\"/e\",\"id\":\"rg-3\",\"args\":{\"a\":1}}\n";
        assert_eq!(
            one(call),
            Event::Call {
                id: b"\"rg-3\"",
                args: b"{\"a\":1}"
            }
        );
        let rep = b"{\"op\":\"service_response\",\"service\":\"/e\",\"id\":42,\"values\":{\"a\":1},\"result\":true}\n";
        assert_eq!(
            one(rep),
            Event::Reply {
                id: 42,
                values: b"{\"a\":1}",
                ok: true
            }
        );
        let st = b"{\"op\":\"service_response\",\"service\":\"/rosgate/stats\",\"id\":\"stats\",\"values\":{\"connections_open\":3,\"published\":1,\"delivered\":2,\"dropped\":0},\"result\":true}\n";
        let Event::Stats { values } = one(st) else {
            panic!("not stats")
        };
        assert_eq!(
            Rosgate::parse_stats(values).map(|s| s.connections_open),
            Some(3)
        );
    }

    /// Every action frame decodes the same on the fast path (rosgate's
    /// layout) and the slow one (any layout).
    #[test]
    fn action_frames_fast_and_slow() {
        let cases: [(&[u8], &[u8], Event<'_>); 5] = [
            (
                b"{\"op\":\"send_action_goal\",\"id\":\"rg-3\",\"action\":\"/a\",\"action_type\":\"t/T\",\"args\":{\"p\":1},\"feedback\":true}\n",
                b"{\"args\":{\"p\":1},\"feedback\":true,\"op\":\"send_action_goal\",\"action\":\"/a\",\"id\":\"rg-3\"}\n",
                Event::Goal {
                    id: b"\"rg-3\"",
                    args: b"{\"p\":1}",
                },
            ),
            (
                b"{\"op\":\"action_feedback\",\"id\":12,\"action\":\"/a\",\"values\":{\"p\":2}}\n",
                b"{ \"values\": {\"p\":2}, \"id\": 12, \"op\": \"action_feedback\" }\n",
                Event::Feedback {
                    id: 12,
                    values: b"{\"p\":2}",
                },
            ),
            (
                b"{\"op\":\"action_result\",\"id\":7,\"action\":\"/a\",\"values\":{\"s\":\",\\\"status\\\":4\"},\"status\":4,\"result\":true}\n",
                b"{\"result\":true,\"status\":4,\"values\":{\"s\":\",\\\"status\\\":4\"},\"id\":7,\"op\":\"action_result\"}\n",
                Event::GoalResult {
                    id: 7,
                    values: b"{\"s\":\",\\\"status\\\":4\"}",
                    ok: true,
                },
            ),
            (
                b"{\"op\":\"action_result\",\"id\":8,\"action\":\"/a\",\"values\":\"no server\",\"status\":0,\"result\":false}\n",
                b"{\"op\":\"action_result\",\"id\":8,\"values\":\"no server\",\"status\":0,\"result\":false}\n",
                Event::GoalResult {
                    id: 8,
                    values: b"\"no server\"",
                    ok: false,
                },
            ),
            (
                // Canceled: a result, but not a success.
                b"{\"op\":\"action_result\",\"id\":9,\"action\":\"/a\",\"values\":{},\"status\":5,\"result\":true}\n",
                b"{\"op\":\"action_result\",\"status\":5,\"id\":9,\"values\":{},\"result\":true}\n",
                Event::GoalResult {
                    id: 9,
                    values: b"{}",
                    ok: false,
                },
            ),
        ];
        for (fast, loose, want) in cases {
            assert_eq!(fast_action(strip_nl(fast)), Some(want));
            assert_eq!(fast_action(strip_nl(loose)), None);
            assert_eq!(one(fast), want);
            assert_eq!(one(loose), want);
        }
        // Not our id: reported, not misread.
        let other = b"{\"op\":\"action_feedback\",\"id\":\"x\",\"action\":\"/a\",\"values\":{}}\n";
        assert!(matches!(one(other), Event::Notice { error: true, .. }));
    }

    fn strip_nl(b: &[u8]) -> &[u8] {
        b.strip_suffix(b"\n").unwrap_or(b)
    }

    #[test]
    fn framing_is_resumable_and_bounded() {
        let mut c = Rosgate::new(16);
        assert!(matches!(c.decode(b"{\"op\":"), Ok(None)));
        assert!(matches!(
            c.decode(b"{\"op\":\"x\"}\n"),
            Ok(Some((Event::Notice { .. }, 11)))
        ));
        assert!(c.decode(&[b'x'; 17]).is_err());
        assert!(Rosgate::new(64).decode(b"not json\n").is_err());
    }

    #[test]
    fn requests_are_single_json_lines() {
        let mut c = Rosgate::new(64);
        let mut out = Vec::new();
        c.subscribe(&mut out, "/a\"b", 1);
        c.publish(&mut out, "/a", b"{}");
        c.advertise_service(&mut out, "/s", 2);
        c.call(&mut out, "/s", 3, b"[1]");
        c.respond(&mut out, "/s", b"\"rg-1\"", b"[1]");
        assert!(c.stats_request(&mut out));
        assert!(c.advertise_action(&mut out, "/a\\", 4));
        c.send_goal(&mut out, "/a", 5, b"{}");
        c.feedback(&mut out, "/a", b"\"rg-2\"", b"[2]");
        c.goal_result(&mut out, "/a", b"\"rg-2\"", b"[3]");
        let lines: Vec<_> = out
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .collect();
        assert_eq!(lines.len(), 10);
        for l in lines {
            let _: serde_json::Value = serde_json::from_slice(l).expect("valid JSON");
        }
    }
}
