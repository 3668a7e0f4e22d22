//! The clients' side of the wire: bytes a client received are cut into
//! lines and each line is crossed off against what the model says the
//! client is owed. Anything unexpected (an unknown line, a response for a
//! call still in flight, a publish out of order or never sent) is a
//! violation.

use serde_json::Value;

use rosgate_core::hub::STATS_SERVICE;

use crate::checks::Violation;
use crate::driver::Sim;
use crate::model::{Resp, TopicFrame};
use crate::requests::{canon, json_string};

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
    /// Takes bytes written to `slot` and checks every complete line.
    pub(crate) fn receive(&mut self, slot: usize, got: &[u8]) -> Result<(), Violation> {
        let c = self.model.client_mut(slot);
        c.inbuf.extend_from_slice(got);
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
        match op {
            "publish" => self.on_publish(slot, line, &v),
            "status" => self.on_status(slot, line, &v),
            "call_service" => self.on_forwarded_call(slot, line, &v),
            "service_response" => self.on_response(slot, line, &v),
            _ => Err(self.violation(format!("slot {slot} got unknown op: {}", show(line)))),
        }
    }

    /// A publish frame: the next one owed, or a later one if every frame
    /// skipped was counted as shed.
    fn on_publish(&mut self, slot: usize, line: &[u8], v: &Value) -> Result<(), Violation> {
        self.counts.publishes_received += 1;
        let step = self.step_no;
        let c = self.model.client_mut(slot);
        let pos = c
            .exp
            .topic
            .iter()
            .position(|f| &f.bytes[..f.bytes.len() - 1] == line);
        let Some(pos) = pos else {
            return Err(self.violation(format!(
                "slot {slot} got an unexpected publish: {}",
                show(line)
            )));
        };
        let missed: Vec<TopicFrame> = c.exp.topic.drain(..pos).collect();
        for f in missed {
            let n = f.bytes.len() as u64;
            if n > c.exp.owed_drop {
                let owed = c.exp.owed_drop;
                return Err(Violation {
                    step,
                    what: format!(
                        "slot {slot} missed a {n}-byte publish frame but only {owed} shed bytes were counted for it"
                    ),
                });
            }
            c.exp.owed_drop -= n;
        }
        c.exp.topic.pop_front();
        if v.get("topic").and_then(Value::as_str).is_none() || v.get("msg").is_none() {
            return Err(self.violation(format!("malformed publish frame {}", show(line))));
        }
        Ok(())
    }

    /// A status: owed under its id and level, or anonymously.
    fn on_status(&mut self, slot: usize, line: &[u8], v: &Value) -> Result<(), Violation> {
        let error = match v.get("level").and_then(Value::as_str) {
            Some("error") => true,
            Some("info") => false,
            _ => return Err(self.violation(format!("bad status level: {}", show(line)))),
        };
        if !v.get("msg").is_some_and(Value::is_string) {
            return Err(self.violation(format!("status without msg: {}", show(line))));
        }
        let e = &mut self.model.client_mut(slot).exp;
        let ok = match v.get("id") {
            Some(id) => {
                let key = (canon(id), error);
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
            None if error && e.anon_error > 0 => {
                e.anon_error -= 1;
                true
            }
            None if !error && e.anon_info > 0 => {
                e.anon_info -= 1;
                true
            }
            None => false,
        };
        if !ok {
            return Err(self.violation(format!(
                "slot {slot} got an unexpected status: {}",
                show(line)
            )));
        }
        Ok(())
    }

    /// A call forwarded to `slot` as provider: the next one owed, with the
    /// caller's service and args and a provider-side id never seen before.
    fn on_forwarded_call(&mut self, slot: usize, line: &[u8], v: &Value) -> Result<(), Violation> {
        let Some(k) = self.model.client_mut(slot).exp.forwards.pop_front() else {
            return Err(self.violation(format!(
                "slot {slot} got a call it was not the provider for: {}",
                show(line)
            )));
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
        if self.model.rg_map.insert(id_raw.clone(), k).is_some() {
            return Err(self.violation(format!("provider-side id {id_raw} issued twice")));
        }
        self.model.all_learned.push(id_raw.clone());
        self.model.client_mut(slot).learned.push(id_raw);
        Ok(())
    }

    /// A response to `slot` as caller: exactly the outcome the model
    /// settled for that id, never while the call is still in flight.
    fn on_response(&mut self, slot: usize, line: &[u8], v: &Value) -> Result<(), Violation> {
        let Some(id) = v.get("id") else {
            return Err(self.violation(format!("response without id: {}", show(line))));
        };
        let expected = self.model.client_mut(slot).exp.responses.remove(&canon(id));
        let service = v.get("service").and_then(Value::as_str);
        let result = v.get("result");
        let bad = |why: &str| format!("slot {slot}: {why}: {}", show(line));
        match expected {
            None => Err(self.violation(bad(
                "response for an id with no call (wrong caller or duplicate)",
            ))),
            Some(Resp::Pending(k)) => {
                let msg = bad(&format!("response while model call {k} is still in flight"));
                Err(self.violation(msg))
            }
            Some(Resp::Failure { service: s }) => {
                self.counts.responses_failed += 1;
                if service != Some(s.as_str())
                    || result != Some(&Value::Bool(false))
                    || !v.get("values").is_some_and(Value::is_string)
                {
                    return Err(
                        self.violation(bad(&format!("expected a failure for service {s:?}")))
                    );
                }
                Ok(())
            }
            Some(Resp::Success {
                service: s,
                values,
                result: r,
                status,
            }) => {
                self.counts.responses_ok += 1;
                if service != Some(s.as_str())
                    || v.get("values") != Some(&values)
                    || result != Some(&r)
                    || v.get("status") != status.as_ref()
                {
                    let msg = bad(&format!(
                        "expected service {s:?} values {values} result {r} status {status:?}"
                    ));
                    return Err(self.violation(msg));
                }
                Ok(())
            }
            Some(Resp::Stats(g)) => {
                let vals = &v["values"];
                let got: Vec<Option<u64>> = STATS_GAUGES.iter().map(|n| vals[n].as_u64()).collect();
                let want: Vec<Option<u64>> = g.iter().map(|&x| Some(x)).collect();
                if service != Some(STATS_SERVICE)
                    || result != Some(&Value::Bool(true))
                    || got != want
                {
                    return Err(self.violation(bad(&format!(
                        "stats gauges {STATS_GAUGES:?} should be {g:?}"
                    ))));
                }
                Ok(())
            }
        }
    }
}
