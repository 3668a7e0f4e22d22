//! What each accepted request line does to the model, applied just before
//! the read that completes it: registrations change (or are refused at
//! the per-connection limits), statuses become owed, calls are forwarded
//! or fail, answers complete calls, and a publish is queued for its
//! subscribers (what the hub queued and shed is checked right after).
//!
//! Where the dialects differ, the client's own decides: per-id
//! registrations and rosbridge-style reading of a provider's answer
//! ([`answer_as_read`]) for WebSocket clients.

use std::rc::Rc;
use std::time::Duration;

use serde_json::Value;

use rosgate_core::counters::ErrorCode;
use rosgate_core::hub::{RESERVED_PREFIX, STATS_SERVICE};
use rosgate_core::limits::TIMER_TICK_MS;
use rosgate_wire::encode;

use crate::actions::MAX_CLIENTS;
use crate::checks::Violation;
use crate::driver::Sim;
use crate::model::{CallModel, Id, Resp, TopicFrame};
use crate::requests::Effect;
use crate::ws;

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
    /// Applies `effect` of a request the hub is about to handle (its last
    /// byte goes next) to the model.
    pub(crate) fn apply_effect(&mut self, slot: usize, effect: Effect) -> Result<(), Violation> {
        match effect {
            Effect::Nothing => {}
            Effect::Error { id, code } => {
                self.model.expect_status(slot, id.as_ref(), true);
                if let Some(code) = code {
                    self.count_error(code);
                }
            }
            Effect::Topic { op, name, id } => self.apply_topic(slot, op, &name, id.as_ref()),
            Effect::Publish { name, msg } => self.apply_publish(&name, &msg),
            Effect::Service { adv, name, ty, id } => {
                self.apply_service(slot, adv, name, ty, id.as_ref())
            }
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
        Ok(())
    }

    /// subscribe, unsubscribe, advertise or unadvertise. A registration
    /// beyond the per-connection limit (every rosbridge (topic, id) pair
    /// counts, a repeated one is free) is refused with the id, and nothing
    /// changes.
    fn apply_topic(&mut self, slot: usize, op: &str, name: &str, id: Option<&Id>) {
        let raw = id.map(|id| id.raw.as_str());
        let (sub, max) = match op {
            "subscribe" => (true, self.limits.max_subscriptions_per_conn),
            "advertise" => (false, self.limits.max_advertisements_per_conn),
            _ => {
                let c = self.model.client_mut(slot);
                c.unregister(op == "unsubscribe", name, raw);
                return self.model.expect_status(slot, id, false);
            }
        };
        let c = self.model.client(slot);
        let regs = if sub { &c.subs } else { &c.pubs };
        let key = raw.filter(|_| c.rosbridge()).map(str::to_string);
        let adds = regs
            .get(name)
            .is_none_or(|ids| c.rosbridge() && !ids.contains(&key));
        if adds && c.entries(sub) >= max {
            self.counts.registrations_refused += 1;
            self.count_error(ErrorCode::TooManyRegistrations);
            return self.model.expect_status(slot, id, true);
        }
        self.model.client_mut(slot).register(sub, name, raw);
        self.model.expect_status(slot, id, false);
    }

    /// A publish the hub is about to handle: its frame is queued, in each
    /// subscriber's framing, for every open subscriber. What the hub then
    /// queued, shed and counted is checked by the accounting of that read.
    fn apply_publish(&mut self, name: &str, msg: &str) {
        let mut line = encode::publish_prefix(name).into_vec();
        line.extend_from_slice(msg.as_bytes());
        line.push(b'}');
        self.publishes += 1;
        let n = self.publishes;
        let mut tcp = line.clone();
        tcp.push(b'\n');
        let wires: [Rc<[u8]>; 2] = [tcp.into(), ws::server_text_frame(&line).into()];
        let line: Rc<[u8]> = line.into();
        for s in 0..MAX_CLIENTS {
            let Some(c) = self.model.clients[s].as_ref() else {
                continue;
            };
            if !c.is_open() || !c.subs.contains_key(name) {
                continue;
            }
            let ws = c.rosbridge();
            let wire = Rc::clone(&wires[usize::from(ws)]);
            self.max_frame = self.max_frame.max(wire.len());
            self.deliveries.push((s, n, wire.len()));
            let f = TopicFrame {
                msg: n,
                line: Rc::clone(&line),
                wire,
                ws,
            };
            self.model.queue_frame(s, f);
        }
    }

    /// advertise_service (`adv`, with type `ty`) or unadvertise_service.
    /// A service beyond the per-connection limit is refused with the id
    /// (re-advertising one the connection provides is free).
    fn apply_service(
        &mut self,
        slot: usize,
        adv: bool,
        name: String,
        ty: &'static str,
        id: Option<&Id>,
    ) {
        let me = self.model.client(slot).conn;
        if adv {
            if name.starts_with(RESERVED_PREFIX) {
                return self.model.expect_status(slot, id, true);
            }
            let provides = self.model.services.get(&name) == Some(&me);
            let count = self.model.services.values().filter(|&&p| p == me).count();
            if !provides && count >= self.limits.max_services_per_conn {
                self.counts.registrations_refused += 1;
                self.count_error(ErrorCode::TooManyRegistrations);
                return self.model.expect_status(slot, id, true);
            }
            self.model.service_types.insert(name.clone(), ty);
            let old = self.model.services.insert(name, me);
            if let Some(old) = old.filter(|&o| o != me) {
                let s = self.model.slot_of(old).expect("providers are live");
                self.model.expect_status(s, None, false);
            }
            self.model.expect_status(slot, id, false);
        } else if self.model.services.get(&name) == Some(&me) {
            self.model.services.remove(&name);
            self.model.service_types.remove(&name);
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
        let provider = self.model.services.get(&name).copied().filter(|&p| {
            self.model
                .slot_of(p)
                .is_some_and(|s| self.model.client(s).is_open())
        });
        let outcome = if name == STATS_SERVICE {
            Resp::Stats(self.model.gauges())
        } else if in_flight >= self.limits.max_calls_per_conn {
            Resp::Failure {
                service: name,
                why: None,
            }
        } else if let Some(provider) = provider {
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
                id_raw: id.as_ref().map(|id| id.raw.clone()),
            });
            let ps = self.model.slot_of(provider).expect("providers are live");
            self.model.client_mut(ps).exp.forwards.push_back(k);
            self.counts.calls_forwarded += 1;
            Resp::Pending(k)
        } else {
            Resp::Failure {
                service: name,
                why: None,
            }
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
