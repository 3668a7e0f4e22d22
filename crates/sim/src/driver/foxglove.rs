//! Foxglove WebSocket sessions (`docs/protocol.md`, "Foxglove WebSocket
//! protocol"; the data is `model/foxglove.rs`): a WebSocket client that
//! opens with the Foxglove subprotocol, learns the channels the hub
//! advertises, subscribes to the typed topic's channel and unsubscribes.
//!
//! A subscription is the connection's registration on the topic in the
//! encoding `Comp::Foxglove(sub)` (`model/encodings.rs` makes its message
//! data), so it is owed exactly the messages a plain subscriber of the
//! topic is owed, under the same rules (queue limit, memory budget,
//! latching); each one is checked byte for byte (subscription id, the
//! turn's wall clock, the CDR) and decoded back: its CDR must read as the
//! JSON published (`ws_decode::fx_message_data`, `ws_decode::cdr_matches`).
//!
//! The hub's channel list is re-made once per turn after its registry
//! changed (the end of `Hub::expire`); the model re-makes the typed
//! topic's channel there too ([`Sim::fx_sync_all`]), and a channel that
//! goes takes its subscription with it. The client reads: `serverInfo`
//! first; every `advertise` and `unadvertise` of the typed topic's channel
//! in the order the model made them (ids never reused, `cdr` with the
//! topic's type); other channels, services, learnt and not predicted;
//! statuses as owed (a refused subscription's error, a successful one's
//! info through the status filter) and the debounced drop warning, which
//! may tell no more messages than the model shed for the session.
//! A session also publishes (`clientPublish`): it advertises a `json` or
//! `cdr` client channel on the typed topic (the connection's advertisement
//! of it, so the hub's channel of the topic follows it like any
//! publisher's), sends message data on it and unadvertises it. A message
//! is a typed message's JSON, or its CDR: the connection's publish, owed
//! to every subscriber exactly as a rosbridge publish is; the JSON
//! subscribers get is, for CDR, what the hub decodes it to (which must
//! read as the message), and CDR subscribers get the client's bytes. Over
//! the line limit a message is discarded with an error status.
//!
//! Requests a rosbridge client would send are not sent by a session: a
//! `subscribe`, QoS or `publish` request drawn for it becomes a Foxglove
//! `subscribe` to the typed topic's channel (when the client knows it as
//! current and holds no subscription to it); once subscribed, a
//! `subscribe`, `unsubscribe` or `unadvertise` becomes a Foxglove
//! `unsubscribe`, and a QoS or `publish` request a publish on the typed
//! topic by a client of its domain that advertised it stating QoS. An
//! `advertise` becomes its client channel's `advertise` (with a `cdr`
//! channel, and once advertised, a plain subscribe to the topic by the
//! next rosbridge client of its domain follows), then an `unadvertise` its `unadvertise` and a `publish` (even
//! payloads, or any before it subscribed) a message on it. The other requests drawn for a
//! session go to the next rosbridge client, as if it were not there.

use serde_json::Value;

use rosgate_wire::ws::client;

use super::feed::Write;
use super::Sim;
use crate::actions::{QosReq, Req, MAX_CLIENTS};
use crate::model::encodings::{bundled, Comp, EncM, TYPED_TOPIC, TYPED_TYPE};
use crate::model::foxglove::{ChanEvent, FxSide};
use crate::model::qos::Asked;
use crate::model::requests::Effect;
use crate::model::{Lvl, Unit};
use crate::violation::Violation;
use crate::ws::OP_TEXT;
use crate::ws_decode::{cdr_matches, fx_message_data, same_octets};

/// At most this much of a received message is quoted in a violation.
const SHOW_CHARS: usize = 200;

fn show(b: &[u8]) -> String {
    String::from_utf8_lossy(b)
        .chars()
        .take(SHOW_CHARS)
        .collect()
}

impl Sim {
    fn fx(&self, slot: usize) -> Option<&FxSide> {
        self.model.clients[slot]
            .as_ref()?
            .ws()
            .and_then(|w| w.fx.as_deref())
    }

    fn fx_mut(&mut self, slot: usize) -> &mut FxSide {
        self.model
            .client_mut(slot)
            .ws_mut()
            .and_then(|w| w.fx.as_deref_mut())
            .expect("a Foxglove session")
    }

    /// Whether `slot` is a Foxglove session.
    pub(crate) fn is_fx(&self, slot: usize) -> bool {
        self.fx(slot).is_some()
    }

    /// Whether a Foxglove session sends something for `req` (see the
    /// module docs).
    pub(crate) fn fx_takes(req: &Req) -> bool {
        matches!(
            req,
            Req::Subscribe { .. }
                | Req::Advertise { .. }
                | Req::Unsubscribe { .. }
                | Req::Unadvertise { .. }
                | Req::Qos(_)
                | Req::Publish { .. }
        )
    }

    /// From `slot` on, the first client that is not a Foxglove session
    /// (`ws`: a WebSocket one).
    pub(crate) fn next_rosbridge(&self, slot: usize, ws: bool) -> Option<usize> {
        (0..MAX_CLIENTS)
            .map(|i| (slot + i) % MAX_CLIENTS)
            .find(|&i| {
                self.model.clients[i]
                    .as_ref()
                    .is_some_and(|c| !self.is_fx(i) && (!ws || c.rosbridge()))
            })
    }

    /// The session's opening was answered (`foxglove_start`): its channels
    /// are made at once.
    pub(crate) fn fx_started(&mut self, slot: usize) {
        self.counts.fx_sessions += 1;
        self.fx_mut(slot).started = true;
        self.fx_sync(slot);
    }

    /// The end of a turn's `expire`: every open session's channels re-made
    /// (`gone`: closed in this expire, skipped as the hub skips them).
    pub(crate) fn fx_sync_all(&mut self, gone: [bool; MAX_CLIENTS]) {
        for (s, &g) in gone.iter().enumerate() {
            let live = self.model.clients[s].as_ref().is_some_and(|c| {
                c.is_open()
                    && c.ws()
                        .and_then(|w| w.fx.as_deref())
                        .is_some_and(|f| f.started)
            });
            if live && !g {
                self.fx_sync(s);
            }
        }
    }

    /// The typed topic's channel of session `slot` as the hub makes it
    /// now: present while a connection of its domain advertises the topic
    /// (one closing keeps its registrations until it is freed).
    fn fx_sync(&mut self, slot: usize) {
        let domain = self.model.client(slot).domain;
        let want = self
            .model
            .clients
            .iter()
            .flatten()
            .any(|c| c.domain == domain && c.pubs.contains_key(TYPED_TOPIC));
        let fx = self.fx_mut(slot);
        match (want, fx.chan) {
            (true, None) => {
                fx.made += 1;
                fx.chan = Some(fx.made);
                fx.owed.push_back(ChanEvent::Advertised);
            }
            (false, Some(_)) => {
                fx.chan = None;
                fx.owed.push_back(ChanEvent::Unadvertised);
                let subs: Vec<u32> = fx
                    .subs
                    .iter()
                    .filter(|(_, t)| *t == TYPED_TOPIC)
                    .map(|(&id, _)| id)
                    .collect();
                for id in subs {
                    self.fx_mut(slot).subs.remove(&id);
                    self.counts.fx_channels_gone += 1;
                    self.fx_withdraw(slot);
                }
            }
            _ => {}
        }
    }

    /// The hub withdraws the session's registration on the typed topic
    /// (an ordinary unregistration: its info status, through the filter).
    fn fx_withdraw(&mut self, slot: usize) {
        self.model.expect_status(slot, None, false);
        let c = self.model.client_mut(slot);
        let was = c.subs.contains_key(TYPED_TOPIC);
        c.unregister(true, TYPED_TOPIC, None, None);
        if was {
            self.after_leave(slot, true, TYPED_TOPIC);
        }
        self.sync_topics();
    }

    /// A request drawn for session `slot`, as the session sends it (see
    /// the module docs).
    pub(crate) fn fx_request(
        &mut self,
        slot: usize,
        style: u8,
        split: u8,
        req: &Req,
    ) -> Result<(), Violation> {
        let Some(fx) = self.fx(slot).filter(|f| f.info) else {
            return Ok(());
        };
        let subscribed = fx.subs.values().any(|t| t == TYPED_TOPIC);
        // Client publishing: advertise a `json` channel on the typed topic,
        // publish on it (JSON bytes as the message data), unadvertise it.
        let client = match (req, fx.client_chan) {
            (Req::Advertise { topic, .. }, None) => {
                let chan = fx.next_client_chan;
                let cdr = topic & 1 == 1;
                let encoding = if cdr { "cdr" } else { "json" };
                let text = format!(
                    r#"{{"op":"advertise","channels":[{{"id":{chan},"topic":"{TYPED_TOPIC}","encoding":"{encoding}","schemaName":"{TYPED_TYPE}"}}]}}"#
                );
                Some((
                    OP_TEXT,
                    text.into_bytes(),
                    Effect::FxAdvertise { chan, cdr },
                ))
            }
            (Req::Unadvertise { .. }, Some((chan, _))) => {
                let text = format!(r#"{{"op":"unadvertise","channelIds":[{chan}]}}"#);
                Some((OP_TEXT, text.into_bytes(), Effect::FxUnadvertise))
            }
            (Req::Publish { payload, .. }, Some((chan, cdr)))
                if payload & 1 == 0 || !subscribed =>
            {
                let mut msg = self.typed_payload(*payload);
                let mut data = vec![1u8];
                data.extend_from_slice(&chan.to_le_bytes());
                if cdr {
                    // The message as CDR (the encoder both sides use), and
                    // the JSON the hub decodes it to for its subscribers
                    // (`rosgate_ros2::cdr::decode_json`), which must read
                    // as the message.
                    let v: Value = serde_json::from_str(&msg)
                        .map_err(|e| self.violation(format!("a typed payload: {e}")))?;
                    let bytes = rosgate_ros2::cdr::encode(&**bundled(), TYPED_TYPE, &v)
                        .map_err(|e| self.violation(format!("a typed payload: {e:?}")))?;
                    let mut json = Vec::new();
                    rosgate_ros2::cdr::decode_json(&**bundled(), TYPED_TYPE, &bytes, &mut json)
                        .map_err(|e| self.violation(format!("its CDR: {e:?}")))?;
                    let text = String::from_utf8_lossy(&json).into_owned();
                    let back: Value = serde_json::from_str(&text)
                        .map_err(|e| self.violation(format!("its CDR decoded: {e}")))?;
                    if !same_octets(&back, &v) {
                        return Err(self.violation(format!("the CDR of {msg} decodes to {text}")));
                    }
                    data.extend_from_slice(&bytes);
                    msg = text;
                    if data.len() <= self.limits.max_line_bytes {
                        self.counts.fx_client_cdr_publishes += 1;
                        // Whether a subscriber reads the decoded JSON.
                        let domain = self.model.client(slot).domain;
                        let json = self.model.clients.iter().flatten().any(|c| {
                            c.domain == domain
                                && c.is_open()
                                && c.subs.contains_key(TYPED_TOPIC)
                                && !matches!(
                                    c.sub_qos.get(TYPED_TOPIC).map(|q| q.enc.comp),
                                    Some(Comp::Foxglove(_) | Comp::CborRaw)
                                )
                        });
                        if json {
                            self.counts.fx_client_cdr_read_as_json += 1;
                        }
                    }
                } else {
                    data.extend_from_slice(msg.as_bytes());
                }
                let effect = Effect::Publish {
                    name: TYPED_TOPIC.to_string(),
                    msg,
                    id: None,
                    node: None,
                };
                Some((crate::ws::OP_BINARY, data, effect))
            }
            (Req::Advertise { .. }, Some(_)) => return self.plain_reader(slot, style, split),
            _ => None,
        };
        if let Some((op, payload, effect)) = client {
            if let Effect::FxAdvertise { cdr, .. } = effect {
                self.fx_mut(slot).next_client_chan += 1;
                self.fx_write(slot, op, &payload, effect)?;
                if cdr
                    && self.model.clients[slot]
                        .as_ref()
                        .is_some_and(|c| c.is_open())
                {
                    return self.plain_reader(slot, style, split);
                }
                return Ok(());
            }
            if let Effect::Publish { .. } = effect {
                if payload.len() <= self.limits.max_line_bytes {
                    self.counts.fx_client_publishes += 1;
                }
            }
            return self.fx_write(slot, op, &payload, effect);
        }
        let fx = self.fx(slot).expect("a Foxglove session");
        let payload = match req {
            Req::Publish { payload, .. } => Some(*payload),
            Req::Qos(q) => Some(q.payload),
            _ => None,
        };
        if let (true, Some(payload)) = (subscribed, payload) {
            // Subscribed: a publisher of the typed topic publishes.
            let q = QosReq {
                op: 3,
                topic: 0xff,
                spec: 0,
                payload,
                id: 0,
            };
            let Some(p) = self.qos_publisher(slot as u8, &q) else {
                return Ok(());
            };
            if self.model.client(p).domain != self.model.client(slot).domain {
                return Ok(());
            }
            self.complete_pending(p)?;
            if self.model.client(p).is_open() {
                self.send(p, style, split, &Req::Qos(q))?;
            }
            return Ok(());
        }
        let toggle = subscribed && matches!(req, Req::Subscribe { .. });
        let (text, effect) = match req {
            _ if toggle => {
                let Some(&sub) = fx.subs.keys().next() else {
                    return Ok(());
                };
                (
                    format!(r#"{{"op":"unsubscribe","subscriptionIds":[{sub}]}}"#),
                    Effect::FxUnsubscribe { sub },
                )
            }
            Req::Unsubscribe { .. } | Req::Unadvertise { .. } => {
                let Some(&sub) = fx.subs.keys().next() else {
                    return Ok(());
                };
                (
                    format!(r#"{{"op":"unsubscribe","subscriptionIds":[{sub}]}}"#),
                    Effect::FxUnsubscribe { sub },
                )
            }
            _ => {
                let Some(chan) = fx.typed_channel() else {
                    return Ok(());
                };
                if fx.subs.values().any(|t| t == TYPED_TOPIC) {
                    return Ok(());
                }
                let sub = fx.next_sub;
                (
                    format!(
                        r#"{{"op":"subscribe","subscriptions":[{{"id":{sub},"channelId":{chan}}}]}}"#
                    ),
                    Effect::FxSubscribe { sub },
                )
            }
        };
        if let Effect::FxSubscribe { .. } = effect {
            self.fx_mut(slot).next_sub += 1;
        }
        self.fx_write(slot, OP_TEXT, text.as_bytes(), effect)
    }

    /// The next rosbridge client of session `slot`'s domain subscribes to
    /// the typed topic in plain JSON: a reader of what the hub decodes
    /// from the session's CDR.
    fn plain_reader(&mut self, slot: usize, style: u8, split: u8) -> Result<(), Violation> {
        let domain = self.model.client(slot).domain;
        let Some(r) = self
            .next_rosbridge(slot, false)
            .filter(|&r| self.model.client(r).domain == domain)
        else {
            return Ok(());
        };
        let q = QosReq {
            op: 0,
            topic: 0xff,
            spec: 0,
            payload: 0,
            id: 0,
        };
        self.complete_pending(r)?;
        if self.model.client(r).is_open() {
            self.send(r, style, split, &Req::Qos(q))?;
        }
        Ok(())
    }

    /// Session `slot` sends one message (`op`: text or binary), whole in
    /// one read; `effect` applies as the hub handles it.
    fn fx_write(
        &mut self,
        slot: usize,
        op: u8,
        payload: &[u8],
        effect: Effect,
    ) -> Result<(), Violation> {
        // A message over the line limit is discarded with an error status,
        // as a rosbridge client's (`feed.rs`).
        let effect = if payload.len() > self.limits.max_line_bytes {
            self.counts.too_long += 1;
            Effect::Error {
                id: None,
                code: None,
            }
        } else {
            effect
        };
        let frame = client::frame(op, payload, [7, 1, 5, 3]);
        let n = frame.len();
        let w = Write {
            bytes: frame,
            units: vec![Unit::Data {
                len: n,
                payload: payload.len(),
                fin: true,
            }],
            cuts: vec![n],
            handshake: None,
        };
        self.deliver(slot, w, Some(effect), false, false)
    }

    /// Client `advertise` of `json` channel `chan` on the typed topic: the
    /// connection's advertisement of it with the channel's type (refused
    /// past the per-connection limit, with an error status).
    pub(crate) fn fx_advertise(&mut self, slot: usize, chan: u32, cdr: bool) {
        let before = self.counts.registrations_refused;
        self.apply_topic(slot, "advertise", TYPED_TOPIC, None, None, Asked::default());
        if self.counts.registrations_refused == before {
            self.counts.fx_client_channels += 1;
            self.fx_mut(slot).client_chan = Some((chan, cdr));
        }
    }

    /// Client `unadvertise` of its channel: the advertisement withdrawn.
    pub(crate) fn fx_unadvertise(&mut self, slot: usize) {
        if self.fx_mut(slot).client_chan.take().is_none() {
            return;
        }
        self.model.expect_status(slot, None, false);
        let c = self.model.client_mut(slot);
        let was = c.pubs.contains_key(TYPED_TOPIC);
        c.unregister(false, TYPED_TOPIC, None, None);
        if was {
            self.after_leave(slot, false, TYPED_TOPIC);
        }
        self.sync_topics();
    }

    /// `subscribe` of the typed topic's channel with id `sub`: the
    /// connection's registration (refused past the per-connection limit,
    /// with an error status), recorded in the session when made.
    pub(crate) fn fx_subscribe(&mut self, slot: usize, sub: u32) {
        let asked = Asked {
            enc: EncM {
                comp: Comp::Foxglove(sub),
                fragment: None,
            },
            ..Asked::default()
        };
        let before = self.counts.registrations_refused;
        self.apply_topic(slot, "subscribe", TYPED_TOPIC, None, None, asked);
        if self.counts.registrations_refused == before {
            self.counts.fx_subscribes += 1;
            self.fx_mut(slot).subs.insert(sub, TYPED_TOPIC.to_string());
        }
    }

    /// `unsubscribe` of the session's subscription `sub`.
    pub(crate) fn fx_unsubscribe(&mut self, slot: usize, sub: u32) {
        if self.fx_mut(slot).subs.remove(&sub).is_some() {
            self.counts.fx_unsubscribes += 1;
            self.fx_withdraw(slot);
        }
    }

    /// Frames shed from session `slot`'s queue (the drop warning may tell
    /// of them).
    pub(crate) fn fx_shed(&mut self, slot: usize, n: u64) {
        if n > 0 && self.is_fx(slot) {
            self.fx_mut(slot).shed += n;
        }
    }

    /// A text message to session `slot`.
    pub(crate) fn on_fx_text(&mut self, slot: usize, text: &[u8]) -> Result<(), Violation> {
        let v: Value = serde_json::from_slice(text).map_err(|e| {
            self.violation(format!(
                "session {slot} got a non-JSON text ({e}): {}",
                show(text)
            ))
        })?;
        let op = v.get("op").and_then(Value::as_str).unwrap_or("");
        let info = self.fx(slot).is_some_and(|f| f.info);
        if info == (op == "serverInfo") {
            return Err(self.violation(format!(
                "session {slot}: serverInfo must come first and once, got {}",
                show(text)
            )));
        }
        match op {
            "serverInfo" => {
                self.fx_mut(slot).info = true;
                Ok(())
            }
            "advertise" => self.on_fx_advertise(slot, &v),
            "unadvertise" => self.on_fx_unadvertise(slot, &v),
            "advertiseServices" | "unadvertiseServices" => Ok(()),
            "status" => self.on_fx_status(slot, &v),
            _ => Err(self.violation(format!(
                "session {slot} got an op it never asked for: {}",
                show(text)
            ))),
        }
    }

    fn on_fx_advertise(&mut self, slot: usize, v: &Value) -> Result<(), Violation> {
        let Some(chans) = v.get("channels").and_then(Value::as_array) else {
            return Err(self.violation(format!("session {slot}: advertise without channels")));
        };
        for ch in chans {
            let id = ch.get("id").and_then(Value::as_u64).map(|i| i as u32);
            let topic = ch.get("topic").and_then(Value::as_str);
            let (Some(id), Some(topic)) = (id, topic) else {
                return Err(self.violation(format!("session {slot}: a malformed channel {ch}")));
            };
            let fx = self.fx_mut(slot);
            if !fx.ids.insert(id) {
                return Err(self.violation(format!("session {slot}: channel id {id} reused")));
            }
            if topic != TYPED_TOPIC {
                fx.learnt.insert(id, (topic.to_string(), 0));
                continue;
            }
            let owed = fx.owed.pop_front();
            fx.seen += 1;
            let n = fx.seen;
            fx.learnt.insert(id, (topic.to_string(), n));
            let typed = ch["encoding"] == "cdr" && ch["schemaName"] == TYPED_TYPE;
            if owed != Some(ChanEvent::Advertised) || !typed {
                return Err(self.violation(format!(
                    "session {slot} got the channel {ch}, the model owes {owed:?} (a cdr channel of {TYPED_TYPE})"
                )));
            }
            self.counts.fx_channels_learnt += 1;
        }
        Ok(())
    }

    fn on_fx_unadvertise(&mut self, slot: usize, v: &Value) -> Result<(), Violation> {
        let Some(ids) = v.get("channelIds").and_then(Value::as_array) else {
            return Err(self.violation(format!("session {slot}: unadvertise without ids")));
        };
        for id in ids {
            let id = id.as_u64().unwrap_or(u64::MAX) as u32;
            let fx = self.fx_mut(slot);
            let Some((topic, _)) = fx.learnt.remove(&id) else {
                return Err(self.violation(format!(
                    "session {slot}: unadvertise of channel {id}, never advertised to it"
                )));
            };
            if topic == TYPED_TOPIC {
                let owed = fx.owed.pop_front();
                if owed != Some(ChanEvent::Unadvertised) {
                    return Err(self.violation(format!(
                        "session {slot}: unadvertise of {topic}'s channel, the model owes {owed:?}"
                    )));
                }
            }
        }
        Ok(())
    }

    /// A Foxglove `status` (level 0 info, 1 warning, 2 error): the drop
    /// warning, or one the model owes (id-less, through the filter).
    fn on_fx_status(&mut self, slot: usize, v: &Value) -> Result<(), Violation> {
        let msg = v.get("message").and_then(Value::as_str).unwrap_or("");
        let level = match v.get("level").and_then(Value::as_u64) {
            Some(0) => Lvl::Info,
            Some(1) => Lvl::Warning,
            Some(2) => Lvl::Error,
            _ => return Err(self.violation(format!("session {slot}: a bad status {v}"))),
        };
        if level == Lvl::Warning {
            self.counts.warnings_received += 1;
        }
        let dropped = msg
            .split_once(" messages dropped: ")
            .and_then(|(n, _)| n.parse::<u64>().ok());
        if let (Lvl::Warning, Some(n)) = (level, dropped) {
            let fx = self.fx_mut(slot);
            if n == 0 || fx.warned + n > fx.shed {
                let (shed, warned) = (fx.shed, fx.warned);
                return Err(self.violation(format!(
                    "session {slot}: told {n} messages dropped, the model shed {shed} of which {warned} were told"
                )));
            }
            fx.warned += n;
            self.counts.fx_drop_warnings += 1;
            return Ok(());
        }
        let e = &mut self.model.client_mut(slot).exp;
        let n = match level {
            Lvl::Error => &mut e.anon_error,
            Lvl::Warning => &mut e.anon_warning,
            Lvl::Info => &mut e.anon_info,
        };
        if *n == 0 {
            return Err(self.violation(format!("session {slot} got an unexpected status {v}")));
        }
        *n -= 1;
        Ok(())
    }

    /// A binary message to session `slot`: the message data of the next
    /// topic frame queued for it.
    pub(crate) fn on_fx_binary(&mut self, slot: usize, payload: &[u8]) -> Result<(), Violation> {
        let (sub, ns, cdr) =
            fx_message_data(payload).map_err(|e| self.violation(format!("session {slot}: {e}")))?;
        let f = self.next_encoded(slot, Comp::Foxglove(sub), "message data")?;
        let mut wire = Vec::new();
        client::push_frame(&mut wire, true, crate::ws::OP_BINARY, payload, None);
        self.check_wire(slot, &f, &wire)?;
        let want: Value = serde_json::from_slice(&f.line)
            .map_err(|e| self.violation(format!("the model's publish is not JSON: {e}")))?;
        let wall = self.offset.as_nanos() as u64;
        if ns > wall || want["topic"] != TYPED_TOPIC {
            return Err(self.violation(format!(
                "session {slot}: message data at {ns} ns (now {wall}) of {}",
                want["topic"]
            )));
        }
        cdr_matches(bundled(), TYPED_TYPE, cdr, &want["msg"])
            .map_err(|e| self.violation(format!("session {slot}: message data: {e}")))?;
        self.counts.fx_received += 1;
        self.took_encoded(slot);
        Ok(())
    }
}
