//! The clients' side of the wire: bytes a client received are cut into
//! lines (TCP) or parsed as an HTTP response head and then server frames
//! (WebSocket), and each JSON line, each pong and each close frame is
//! crossed off against what the model says the client is owed. Anything
//! unexpected (an unknown line, a response for a call still in flight, a
//! publish out of order or never sent, a status the client's filter
//! withholds, a frame a server must not send, bytes after a close) is a
//! violation. Binary, `png` and `fragment` frames (outgoing encodings)
//! are decoded and checked in `driver/encoded.rs`.

use serde_json::Value;

use rosgate_core::hub::{PARAMETER_EVENTS, STATS_SERVICE};

use super::requests::{canon, json_string};
use super::Sim;
use crate::model::{matches, Fwd, Link, Lvl, Resp};
use crate::violation::Violation;
use crate::ws::{self, Answer, ServerFrame, OP_BINARY, OP_CLOSE, OP_PONG, OP_TEXT};
use rosgate_wire::ws::client::Response;

/// The stats gauges the model predicts, in [`crate::model::Model::gauges`]
/// order.
const STATS_GAUGES: [&str; 6] = [
    "connections_open",
    "calls_pending",
    "topics",
    "subscriptions",
    "publishers",
    "services",
];

/// At most this much of a received line is quoted in a violation.
const SHOW_CHARS: usize = 300;

fn show(line: &[u8]) -> String {
    String::from_utf8_lossy(line)
        .chars()
        .take(SHOW_CHARS)
        .collect()
}

impl Sim {
    /// Takes bytes written to `slot` and checks every complete line or
    /// frame.
    pub(crate) fn receive(&mut self, slot: usize, got: &[u8]) -> Result<(), Violation> {
        let c = self.model.client_mut(slot);
        c.inbuf.extend_from_slice(got);
        if let Link::Ws(_) = c.link {
            return self.receive_ws(slot);
        }
        let Some(end) = c.inbuf.iter().rposition(|&b| b == b'\n') else {
            return Ok(());
        };
        let rest = c.inbuf.split_off(end + 1);
        let lines = std::mem::replace(&mut c.inbuf, rest);
        for line in lines.split(|&b| b == b'\n') {
            if line.is_empty() {
                continue;
            }
            self.on_line(slot, line)?;
        }
        Ok(())
    }

    /// A WebSocket client's input: the handshake answer first, then
    /// frames, then nothing after a close frame.
    fn receive_ws(&mut self, slot: usize) -> Result<(), Violation> {
        loop {
            let c = self.model.client_mut(slot);
            if c.inbuf.is_empty() {
                return Ok(());
            }
            let side = c.ws_mut().expect("a WebSocket client");
            if side.done {
                let n = c.inbuf.len();
                return Err(self.violation(format!(
                    "slot {slot} got {n} bytes after the server's close frame or refusal"
                )));
            }
            if side.pending_handshake.is_some() {
                return Err(self.violation(format!(
                    "slot {slot} got bytes before it sent its handshake"
                )));
            }
            if let Some(answer) = side.answer.clone() {
                let resp = match Response::parse(&c.inbuf) {
                    Ok(Some(resp)) => resp,
                    Ok(None) => return Ok(()),
                    Err(e) => {
                        let n = c.inbuf.len();
                        return Err(self.violation(format!(
                            "slot {slot}: a bad response head ({e}) in {n} bytes"
                        )));
                    }
                };
                // A 400 for a bad query says why in its body: wait for it.
                let body = match answer {
                    Answer::BadQuery | Answer::Forbidden => resp.content_length().unwrap_or(0),
                    _ => 0,
                };
                if c.inbuf.len() < resp.len + body {
                    return Ok(());
                }
                c.inbuf.drain(..resp.len);
                let text: Vec<u8> = c.inbuf.drain(..body).collect();
                let side = c.ws_mut().expect("a WebSocket client");
                side.answer = None;
                match answer {
                    Answer::Accept(_) | Answer::AcceptFoxglove(_) => side.open = true,
                    Answer::Refuse { .. } | Answer::BadQuery | Answer::Forbidden => {
                        side.done = true
                    }
                }
                ws::check_response(&resp, &answer)
                    .map_err(|e| self.violation(format!("slot {slot}: {e}")))?;
                if std::str::from_utf8(&text).is_err() {
                    return Err(self.violation(format!("slot {slot}: a 400 body that is not text")));
                }
                continue;
            }
            let (frame, used) = match ws::parse_server_frame(&c.inbuf) {
                Ok(Some(f)) => f,
                Ok(None) => return Ok(()),
                Err(e) => return Err(self.violation(format!("slot {slot}: {e}"))),
            };
            c.inbuf.drain(..used);
            self.on_frame(slot, frame)?;
        }
    }

    /// One complete server frame to WebSocket client `slot`.
    fn on_frame(&mut self, slot: usize, frame: ServerFrame) -> Result<(), Violation> {
        if frame.opcode != OP_TEXT && self.mid_fragments(slot) {
            return Err(self.violation(format!(
                "slot {slot} got opcode {:#x} amid a fragmented message",
                frame.opcode
            )));
        }
        let fx = self.is_fx(slot);
        match frame.opcode {
            OP_BINARY if fx => self.on_fx_binary(slot, &frame.payload),
            OP_TEXT if fx => self.on_fx_text(slot, &frame.payload),
            OP_BINARY => self.on_binary(slot, &frame.payload),
            OP_TEXT => {
                // Exactly one JSON line, without its newline.
                if frame.payload.contains(&b'\n') {
                    return Err(self.violation(format!(
                        "slot {slot} got a text frame holding a newline: {}",
                        show(&frame.payload)
                    )));
                }
                self.on_line(slot, &frame.payload)
            }
            OP_PONG => {
                self.counts.ws_pongs += 1;
                let owed = self.model.client_mut(slot).exp.pongs.pop_front();
                if owed.as_deref() != Some(&frame.payload[..]) {
                    return Err(self.violation(format!(
                        "slot {slot} got a pong {:?}, owed {owed:?}",
                        frame.payload
                    )));
                }
                Ok(())
            }
            OP_CLOSE => {
                self.counts.ws_close_frames += 1;
                let side = self
                    .model
                    .client_mut(slot)
                    .ws_mut()
                    .expect("a WebSocket client");
                side.done = true;
                let owed = side.close.clone();
                if frame.payload == super::GOING_AWAY && self.model.draining {
                    self.counts.goodbyes_received += 1;
                }
                if owed.as_deref() != Some(&frame.payload[..]) {
                    return Err(self.violation(format!(
                        "slot {slot} got a close frame {:?}, owed {owed:?}",
                        frame.payload
                    )));
                }
                Ok(())
            }
            op => Err(self.violation(format!("slot {slot} got opcode {op:#x}"))),
        }
    }

    /// Checks one line `slot` received against the model.
    fn on_line(&mut self, slot: usize, line: &[u8]) -> Result<(), Violation> {
        self.counts.lines_received += 1;
        let v: Value = serde_json::from_slice(line).map_err(|e| {
            self.violation(format!(
                "slot {slot} got a non-JSON line ({e}): {}",
                show(line)
            ))
        })?;
        let Some(op) = v.get("op").and_then(Value::as_str) else {
            return Err(
                self.violation(format!("slot {slot} got a line without op: {}", show(line)))
            );
        };
        if op != "fragment" && self.mid_fragments(slot) {
            return Err(self.violation(format!(
                "slot {slot} got {} amid a fragmented message",
                show(line)
            )));
        }
        match op {
            "publish" => {
                self.check_plain(slot, line, false)?;
                self.on_publish(slot, line, &v)
            }
            "action_feedback" => self.on_publish(slot, line, &v),
            "fragment" => self.on_fragment(slot, line, &v),
            "png" => self.on_png(slot, line, &v, false),
            "status" => self.on_status(slot, line, &v),
            "call_service" => self.on_forwarded_call(slot, line, &v),
            "service_response" => self.on_response(slot, line, &v),
            "send_action_goal" => self.on_forwarded_goal(slot, line, &v),
            "cancel_action_goal" => self.on_cancel(slot, line, &v),
            "action_result" => self.on_goal_result(slot, line, &v),
            "peers" => self.on_peers(slot, line, &v),
            _ => Err(self.violation(format!("slot {slot} got unknown op: {}", show(line)))),
        }
    }

    /// The text `fragment` frames to `slot` joined to: a publish or a
    /// `png` frame, as if it had come whole (`driver/encoded.rs`).
    pub(super) fn on_reassembled(&mut self, slot: usize, text: &[u8]) -> Result<(), Violation> {
        let v: Value = serde_json::from_slice(text).map_err(|e| {
            self.violation(format!(
                "slot {slot}: fragments joined to a non-JSON text ({e}): {}",
                show(text)
            ))
        })?;
        match v.get("op").and_then(Value::as_str) {
            Some("publish") => {
                self.check_plain(slot, text, true)?;
                self.counts.lines_received += 1;
                self.on_publish(slot, text, &v)
            }
            Some("png") => self.on_png(slot, text, &v, true),
            _ => Err(self.violation(format!("slot {slot}: fragments joined to {}", show(text)))),
        }
    }

    /// A publish frame (or goal feedback, topic-like data): exactly the
    /// next one queued (frames shed were taken out of the model's queue as
    /// they went).
    fn on_publish(&mut self, slot: usize, line: &[u8], v: &Value) -> Result<(), Violation> {
        let publish = v["op"] == "publish";
        if publish {
            self.counts.publishes_received += 1;
            if v["topic"] == PARAMETER_EVENTS {
                self.counts.param_events_received += 1;
            }
        }
        if self.model.client(slot).rosbridge() {
            self.counts.ws_publishes_received += 1;
        }
        let c = self.model.client_mut(slot);
        let next = c.exp.topic.front().map(|f| f.line.clone());
        if next.as_deref() != Some(line) {
            let want = next.map_or("nothing".to_string(), |l| show(&l));
            return Err(self.violation(format!(
                "slot {slot} got an unexpected publish: {} (next queued: {want})",
                show(line)
            )));
        }
        if let Some(f) = c.exp.topic.pop_front() {
            self.model.release_frame(f.key());
        }
        let topic = v.get("topic").and_then(Value::as_str).is_some() && v.get("msg").is_some();
        let feedback =
            v.get("action").and_then(Value::as_str).is_some() && v.get("values").is_some();
        if (publish && !topic) || (!publish && !feedback) {
            return Err(self.violation(format!("malformed publish frame {}", show(line))));
        }
        Ok(())
    }

    /// A status: owed under its id and level, or anonymously.
    fn on_status(&mut self, slot: usize, line: &[u8], v: &Value) -> Result<(), Violation> {
        let level = match v.get("level").and_then(Value::as_str) {
            Some("error") => Lvl::Error,
            Some("warning") => Lvl::Warning,
            Some("info") => Lvl::Info,
            _ => return Err(self.violation(format!("bad status level: {}", show(line)))),
        };
        if !v.get("msg").is_some_and(Value::is_string) {
            return Err(self.violation(format!("status without msg: {}", show(line))));
        }
        if level == Lvl::Warning {
            self.counts.warnings_received += 1;
        }
        // Only statuses the filter let through when they were sent are
        // owed (a `set_level` does not recall those already queued).
        let c = self.model.client_mut(slot);
        let filter = c.ws().map(|w| w.status);
        let e = &mut c.exp;
        let ok = match v.get("id") {
            Some(id) => {
                let key = (canon(id), level);
                match e.statuses.get_mut(&key) {
                    Some(n) if *n > 0 => {
                        *n -= 1;
                        if *n == 0 {
                            e.statuses.remove(&key);
                        }
                        true
                    }
                    _ => false,
                }
            }
            None => {
                let n = match level {
                    Lvl::Error => &mut e.anon_error,
                    Lvl::Warning => &mut e.anon_warning,
                    Lvl::Info => &mut e.anon_info,
                };
                let owed = *n > 0;
                *n = n.saturating_sub(1);
                owed
            }
        };
        if !ok {
            return Err(self.violation(format!(
                "slot {slot} (status filter {filter:?}) got an unexpected status: {}",
                show(line)
            )));
        }
        Ok(())
    }

    /// A call forwarded to `slot` as provider: the next one owed, with the
    /// caller's service and args and a provider-side id never seen before.
    fn on_forwarded_call(&mut self, slot: usize, line: &[u8], v: &Value) -> Result<(), Violation> {
        let k = match self.model.client_mut(slot).exp.forwards.pop_front() {
            Some(Fwd::Call(k)) => k,
            Some(Fwd::Validation(x)) => return self.on_forwarded_validation(slot, x, line, v),
            _ => {
                return Err(self.violation(format!(
                    "slot {slot} got a call it was not the provider for: {}",
                    show(line)
                )))
            }
        };
        let call = &self.model.calls[k];
        let id_raw = match v.get("id") {
            Some(Value::String(s)) => json_string(s),
            _ => {
                return Err(
                    self.violation(format!("forwarded call without string id: {}", show(line)))
                )
            }
        };
        if v.get("service").and_then(Value::as_str) != Some(call.service.as_str())
            || v.get("args") != Some(&call.args)
        {
            return Err(self.violation(format!(
                "slot {slot} got forwarded call {} but expected service {:?} args {}",
                show(line),
                call.service,
                call.args
            )));
        }
        if self
            .model
            .rg_map
            .insert(id_raw.clone(), Fwd::Call(k))
            .is_some()
        {
            return Err(self.violation(format!("provider-side id {id_raw} issued twice")));
        }
        self.model.all_learned.push(id_raw.clone());
        self.model.client_mut(slot).learned.push(id_raw);
        Ok(())
    }

    /// A response to `slot` as caller: exactly the outcome the model
    /// settled for its id (or, without an id, for one of the calls made
    /// without one), never while the call is still in flight.
    fn on_response(&mut self, slot: usize, line: &[u8], v: &Value) -> Result<(), Violation> {
        if self.model.client(slot).rosbridge() {
            self.counts.ws_responses_received += 1;
        }
        let e = &mut self.model.client_mut(slot).exp;
        let bad = |why: &str| format!("slot {slot}: {why}: {}", show(line));
        let expected = match v.get("id") {
            Some(id) => e.responses.remove(&canon(id)),
            None => {
                let settled = |r: &Resp| !r.unsettled();
                let found = e
                    .anon_responses
                    .iter()
                    .position(|r| settled(r) && mismatch(r, v).is_none());
                match found {
                    Some(i) => Some(e.anon_responses.remove(i)),
                    None => {
                        let owed = format!("{:?}", e.anon_responses);
                        return Err(self.violation(bad(&format!(
                            "response without id matching no settled call made without one (owed {owed})"
                        ))));
                    }
                }
            }
        };
        let Some(expected) = expected else {
            return Err(self.violation(bad(
                "response for an id with no call (wrong caller or duplicate)",
            )));
        };
        if let Some(why) = mismatch(&expected, v) {
            return Err(self.violation(bad(&why)));
        }
        match expected {
            Resp::Failure { why: Some(_), .. } => {
                self.counts.responses_failed += 1;
                self.counts.shutdown_failures_received += 1;
            }
            Resp::Failure { .. } => self.counts.responses_failed += 1,
            Resp::Success { .. } => self.counts.responses_ok += 1,
            Resp::Pending(_)
            | Resp::Stats(_)
            | Resp::Waiting(_)
            | Resp::Builtin { .. }
            | Resp::Shape { .. }
            | Resp::Validating(_) => {}
        }
        Ok(())
    }
}

/// Why response `v` is not the outcome `r` the model expects (`None`: it
/// is).
fn mismatch(r: &Resp, v: &Value) -> Option<String> {
    let service = v.get("service").and_then(Value::as_str);
    let result = v.get("result");
    match r {
        Resp::Pending(k) => Some(format!("response while model call {k} is still in flight")),
        Resp::Waiting(w) => Some(format!(
            "response while request {w} still waits for a provider"
        )),
        Resp::Validating(x) => Some(format!(
            "response while validation {x} still waits for the parameters' owner"
        )),
        Resp::Shape { service: s, values } => {
            let ok = service == Some(s.as_str())
                && result == Some(&Value::Bool(true))
                && v.get("values").is_some_and(|x| matches(values, x));
            (!ok)
                .then(|| format!("expected service {s:?} result true and values matching {values}"))
        }
        Resp::Builtin { service: s, values } => {
            let ok = service == Some(s.as_str())
                && result == Some(&Value::Bool(true))
                && v.get("values") == Some(values);
            (!ok).then(|| format!("expected service {s:?} values {values} result true"))
        }
        Resp::Failure { service: s, why } => {
            let text = v.get("values").and_then(Value::as_str);
            let ok = service == Some(s.as_str())
                && result == Some(&Value::Bool(false))
                && text.is_some_and(|t| why.is_none_or(|w| t.contains(w)));
            (!ok).then(|| {
                format!("expected a failure for service {s:?} (reason containing {why:?})")
            })
        }
        Resp::Success {
            service: s,
            values,
            result: r,
            status,
        } => {
            let ok = service == Some(s.as_str())
                && v.get("values") == Some(values)
                && result == Some(r)
                && v.get("status") == status.as_ref();
            (!ok).then(|| {
                format!("expected service {s:?} values {values} result {r} status {status:?}")
            })
        }
        Resp::Stats(g) => {
            let vals = &v["values"];
            let got: Vec<Option<u64>> = STATS_GAUGES.iter().map(|n| vals[n].as_u64()).collect();
            let want: Vec<Option<u64>> = g.iter().map(|&x| Some(x)).collect();
            let ok =
                service == Some(STATS_SERVICE) && result == Some(&Value::Bool(true)) && got == want;
            (!ok).then(|| format!("stats gauges {STATS_GAUGES:?} should be {g:?}"))
        }
    }
}
