//! What each accepted request line does to the model, applied around the
//! moment the driver feeds it to the hub: registrations change, statuses
//! become owed, calls are forwarded or fail, answers complete calls, and a
//! publish is checked against the subscribers' queues as it is queued.
//!
//! Where the dialects differ, the client's own decides: per-id
//! registrations and rosbridge-style reading of a provider's answer
//! ([`answer_as_read`]) for WebSocket clients.

use std::time::Duration;

use serde_json::Value;

use rosgate_core::counters::Counter;
use rosgate_core::hub::{RESERVED_PREFIX, STATS_SERVICE};
use rosgate_core::limits::TIMER_TICK_MS;
use rosgate_wire::encode;

use crate::checks::Violation;
use crate::driver::{Outgoing, Sim};
use crate::model::{CallModel, Id, Resp, TopicFrame};
use crate::requests::Effect;

/// What rosbridge answers a provider failing without `values` with.
const NO_VALUES_FAILURE: &str = "the provider reported a failure";

/// The `values` and `result` a caller receives for a provider's answer.
/// The strict dialect passes them through (its answers always have
/// `values`). A rosbridge-dialect provider is read as rosbridge reads it:
/// an object `values` is a success whatever `result` says; other `values`
/// keep their `result`; no `values` with `result: false` is a failure with
/// a reason text; no `values` otherwise is `{}`.
fn answer_as_read(rosbridge: bool, values: Option<Value>, result: &str) -> (Value, Value) {
    let parsed: Value = serde_json::from_str(result).expect("result JSON");
    match values {
        Some(v) if rosbridge && v.is_object() => (v, Value::Bool(true)),
        Some(v) => (v, parsed),
        None if result == "false" => (Value::String(NO_VALUES_FAILURE.into()), Value::Bool(false)),
        None => (Value::Object(Default::default()), parsed),
    }
}

impl Sim {
    /// Applies `effect` of `out` (which fits the line limit) to the model
    /// and feeds it to the hub.
    pub(crate) fn apply_effect(
        &mut self,
        slot: usize,
        effect: Effect,
        out: &Outgoing,
    ) -> Result<(), Violation> {
        match effect {
            Effect::Nothing => {}
            Effect::Error { id } => self.model.expect_status(slot, id.as_ref(), true),
            Effect::Topic { op, name, id } => self.apply_topic(slot, op, &name, id.as_ref()),
            Effect::Publish { name, msg } => return self.apply_publish(slot, &name, &msg, out),
            Effect::Service { adv, name, id } => self.apply_service(slot, adv, name, id.as_ref()),
            Effect::Call {
                name,
                args,
                timeout,
                id,
            } => self.apply_call(slot, name, args, timeout, id),
            Effect::Respond {
                id,
                values,
                result,
                status,
            } => {
                if values.is_none() && !self.model.client(slot).rosbridge() {
                    // The strict dialect requires `values`.
                    self.model.expect_status(slot, id.as_ref(), true);
                } else {
                    self.apply_answer(slot, id.as_ref(), values, result, status)?;
                }
            }
        }
        self.feed(slot, out);
        Ok(())
    }

    fn apply_topic(&mut self, slot: usize, op: &str, name: &str, id: Option<&Id>) {
        let c = self.model.client_mut(slot);
        let raw = id.map(|id| id.raw.as_str());
        match op {
            "subscribe" => c.register(true, name, raw),
            "unsubscribe" => c.unregister(true, name, raw),
            "advertise" => c.register(false, name, raw),
            _ => c.unregister(false, name, raw),
        }
        self.model.expect_status(slot, id, false);
    }

    /// Feeds a publish and checks, subscriber by subscriber, what the hub
    /// queued and shed: non-subscribers' queues are untouched, each
    /// subscriber's grew by the frame (in its own framing) less what was
    /// shed (never the newest frame), and `delivered`/`dropped_bytes` agree.
    fn apply_publish(
        &mut self,
        slot: usize,
        name: &str,
        msg: &str,
        out: &Outgoing,
    ) -> Result<(), Violation> {
        let mut line = encode::publish_prefix(name).into_vec();
        line.extend_from_slice(msg.as_bytes());
        line.push(b'}');
        let before: Vec<(usize, usize)> = self
            .model
            .clients
            .iter()
            .enumerate()
            .filter_map(|(s, c)| {
                let c = c.as_ref()?;
                Some((s, self.hub.out(c.conn.key).map_or(0, |q| q.topic_bytes())))
            })
            .collect();
        let (d0, db0) = (
            self.hub.counters().get(Counter::Delivered),
            self.hub.counters().get(Counter::DroppedBytes),
        );
        self.feed(slot, out);
        let mut subscribers = 0u64;
        let mut shed_total = 0u64;
        let cap = self.limits.max_queue_bytes;
        for (s, b) in before {
            let c = self.model.clients[s].as_ref().expect("live");
            let after = self.hub.out(c.conn.key).map_or(0, |q| q.topic_bytes());
            if !c.subs.contains_key(name) {
                if after != b {
                    return Err(self.violation(format!(
                        "publish on {name:?} changed the topic queue of non-subscriber slot {s} ({b} -> {after})"
                    )));
                }
                continue;
            }
            subscribers += 1;
            let len = c.wire_len(line.len());
            self.max_frame = self.max_frame.max(len);
            if after < len || b + len < after {
                return Err(self.violation(format!(
                    "slot {s}: topic bytes {b} -> {after} after queuing a {len}-byte frame (the newest frame must stay)"
                )));
            }
            if after > cap.max(len + self.max_frame) {
                return Err(
                    self.violation(format!("slot {s}: {after} topic bytes queued, limit {cap}"))
                );
            }
            let shed = (b + len - after) as u64;
            shed_total += shed;
            let c = self.model.client_mut(s);
            c.exp.owed_drop += shed;
            c.exp.topic.push_back(TopicFrame {
                line: line.clone(),
                wire_len: len,
            });
        }
        let st = self.hub.counters();
        let (delivered, dropped_bytes) =
            (st.get(Counter::Delivered), st.get(Counter::DroppedBytes));
        if delivered - d0 != subscribers {
            return Err(self.violation(format!(
                "publish delivered {} times, model has {subscribers} subscribers",
                delivered - d0
            )));
        }
        if dropped_bytes - db0 != shed_total {
            return Err(self.violation(format!(
                "dropped_bytes grew by {} but queues shrank by {shed_total}",
                dropped_bytes - db0
            )));
        }
        self.counts.topic_bytes_shed += shed_total;
        Ok(())
    }

    /// advertise_service (`adv`) or unadvertise_service.
    fn apply_service(&mut self, slot: usize, adv: bool, name: String, id: Option<&Id>) {
        let me = self.model.client(slot).conn;
        if adv {
            if name.starts_with(RESERVED_PREFIX) {
                return self.model.expect_status(slot, id, true);
            }
            let old = self.model.services.insert(name, me);
            if let Some(old) = old.filter(|&o| o != me) {
                let s = self.model.slot_of(old).expect("providers are live");
                self.model.expect_status(s, None, false);
            }
            self.model.expect_status(slot, id, false);
        } else if self.model.services.get(&name) == Some(&me) {
            self.model.services.remove(&name);
            self.model
                .fail_calls_where(|c| c.provider == me && c.service == name);
            self.model.expect_status(slot, id, false);
        } else {
            self.model.expect_status(slot, id, true);
        }
    }

    /// A call: answered at once (stats), failed at once (too many in
    /// flight, no provider) or forwarded with its deadline.
    fn apply_call(
        &mut self,
        slot: usize,
        name: String,
        args: Value,
        timeout: Option<&'static str>,
        id: Option<Id>,
    ) {
        let me = self.model.client(slot).conn;
        let in_flight = self.model.calls_made(me);
        let outcome = if name == STATS_SERVICE {
            Resp::Stats(self.model.gauges())
        } else if in_flight >= self.limits.max_calls_per_conn {
            Resp::Failure { service: name }
        } else if let Some(&provider) = self.model.services.get(&name) {
            let due_tick = self.due_tick(timeout);
            let k = self.model.calls.len();
            self.model.calls.push(CallModel {
                caller: me,
                caller_slot: slot,
                id_key: id.as_ref().map(|id| id.key.clone()),
                service: name,
                args,
                provider,
                due_tick,
                alive: true,
            });
            let ps = self.model.slot_of(provider).expect("providers are live");
            self.model.client_mut(ps).exp.forwards.push_back(k);
            self.counts.calls_forwarded += 1;
            Resp::Pending(k)
        } else {
            Resp::Failure { service: name }
        };
        let e = &mut self.model.client_mut(slot).exp;
        match id {
            Some(id) => {
                e.responses.insert(id.key, outcome);
            }
            None => e.anon_responses.push(outcome),
        }
    }

    /// The timer tick at which a call made now with `timeout` (the field's
    /// text) times out: the timer wheel rounds deadlines up to a tick.
    fn due_tick(&self, timeout: Option<&str>) -> u64 {
        let secs = timeout.and_then(|t| {
            if t == "null" {
                None
            } else {
                t.parse::<f64>().ok()
            }
        });
        let to = match secs {
            Some(secs) if secs.is_finite() && secs > 0.0 => {
                Duration::from_secs_f64(secs.min(self.limits.max_call_timeout.as_secs_f64()))
            }
            _ => self.limits.call_timeout,
        };
        let deadline = self.offset + to;
        let tick = Duration::from_millis(TIMER_TICK_MS).as_nanos();
        deadline.as_nanos().div_ceil(tick) as u64
    }

    /// A provider's answer: completes the call `id` names if it is in
    /// flight and was forwarded to this very client, else it is stale.
    fn apply_answer(
        &mut self,
        slot: usize,
        id: Option<&Id>,
        values: Option<Value>,
        result: &str,
        status: Option<Value>,
    ) -> Result<(), Violation> {
        let me = self.model.client(slot).conn;
        let rosbridge = self.model.client(slot).rosbridge();
        let call = id
            .and_then(|id| self.model.rg_map.get(&id.raw))
            .copied()
            .filter(|&k| self.model.calls[k].alive && self.model.calls[k].provider == me);
        let Some(k) = call else {
            self.counts.stale_responses += 1;
            self.model.expect_status(slot, id, true);
            return Ok(());
        };
        let c = &mut self.model.calls[k];
        c.alive = false;
        let (caller, cs, key, service) =
            (c.caller, c.caller_slot, c.id_key.clone(), c.service.clone());
        if rosbridge {
            self.counts.ws_provided_answers += 1;
        }
        if self.model.clients[cs]
            .as_ref()
            .is_some_and(|c| c.conn == caller)
        {
            let (values, result) = answer_as_read(rosbridge, values, result);
            let r = Resp::Success {
                service,
                values,
                result,
                status,
            };
            self.model
                .set_resp(cs, k, key.as_deref(), r)
                .map_err(|e| self.violation(e))?;
        }
        Ok(())
    }
}
