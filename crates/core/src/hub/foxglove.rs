//! The Foxglove WebSocket protocol at the hub (`docs/protocol.md`,
//! "Foxglove WebSocket protocol"): a session starts when a WebSocket
//! opening agreed to a Foxglove subprotocol (`rosgate_wire::ws::handshake`)
//! on either WebSocket listener; its JSON ops and binary messages
//! (`rosgate_wire::foxglove::client`) become the hub's ordinary operations,
//! and the hub's news becomes the protocol's messages
//! (`rosgate_wire::foxglove::server`). The session's tables are
//! `crate::foxglove::Session`'s, kept in the connection.
//!
//! - Opening: on the Foxglove listener an opening without a Foxglove
//!   subprotocol is refused (400, naming the subprotocols); with
//!   `--auth-tokens` a Foxglove client must present its token in the
//!   opening (`Authorization: Bearer` or `?token=`: the protocol has no
//!   `auth` op); the origin check, token check and roles are the
//!   rosbridge port's own (`hub/auth.rs`), run before anything here.
//! - Channels: one per topic of the session's domain that has a type and
//!   a publisher here, or that another gateway or the ROS 2 graph
//!   announced (`hub/federation.rs` `remote_topics`), hidden topics left
//!   out (`names::is_hidden`), advertised at the start and re-made once
//!   per turn when the domain's registry or the remote graphs changed
//!   (`Registry::changes`, `graphs_changes`); `cdr` with the type's `ros2msg` text
//!   (`hub/types.rs`, the text rosapi's `typedefs_full_text` gives) when
//!   the gateway knows the type, else `json` with a permissive JSON
//!   schema.
//! - Subscriptions: the connection's registration on the topic in
//!   `Compression::Foxglove { sub, cdr }` (`encoding.rs`): the qos path's
//!   queueing, shedding and ledger apply, the message data made once per
//!   message and subscription id, its CDR once per message
//!   (`hub/encodings.rs`), a ROS 2 sample's CDR sent as it came.
//! - Shedding: a session's messages are shed like any subscriber's
//!   (`out.rs`, counted in `dropped`); the session hears a warning `status`
//!   with the count, debounced (`foxglove::DROP_WARNING_INTERVAL`).
//! - Client publishing (`clientPublish`): a client channel is the
//!   connection's `advertise` of the topic with the channel's
//!   `schemaName` as its type; a message on it is the connection's
//!   publish (roles, the ROS 2 type check, the batch, bridges): JSON as
//!   it came (checked to be an object), CDR decoded once by the type
//!   (`rosgate_ros2::cdr::decode_json`) and kept beside the JSON, so
//!   Foxglove and `cbor-raw` subscribers get the client's bytes untouched
//!   (the bridges, and so ROS 2 peers, take the JSON and encode it again);
//!   when nothing would read the JSON (`Hub::client_cdr_needs_json`: only
//!   subscribers that take CDR), none is made, the CDR only checked
//!   (`rosgate_ros2::cdr::validate`).
//! - Services (`services`): every service of the domain with a provider
//!   (a client's, another gateway's, the ROS 2 graph's; hidden ones left
//!   out) is advertised with its request and response schemas (`cdr` and
//!   `ros2msg` when the type is known, else `json`), re-made with the
//!   channels; a call request is decoded (CDR by the request type, or
//!   JSON) and made as `call_service` with an id naming the session's
//!   service and call ids, and its one answer or failure comes back as a
//!   binary service call response (CDR encoded by the response type) or a
//!   `serviceCallFailure` with the call id.
//! - Actions: as a ROS 2 client sees them, their hidden `_action/*`
//!   services and feedback and status channels (`hub/foxglove_actions.rs`).
//! - Connection graph (`connectionGraph`): a watching session is told
//!   the topics' publishers and subscribers and the services' providers
//!   by node name, at once and then incrementally (only what changed,
//!   `foxglove::Graph::diff`), when the domain's registry changed.
//! - Assets (`assets`, with `--foxglove-assets DIR`): `fetchAsset`
//!   answered from the shell's source (`hub/foxglove_assets.rs`).
//! - Time (`time`, under `--use-sim-time`): the latest `/clock` as a
//!   binary time message when it moved, at most every
//!   `foxglove::TIME_INTERVAL`.
//! - Bad input gets a `status` of level error naming the problem, and
//!   changes nothing else.
//!
//! Invariants: every Foxglove output to a session goes through the
//! connection's control queue (JSON) or its topic queue (message data);
//! a subscription the hub refused (roles, limits) is not recorded in the
//! session; the list of sessions is pruned of dead connections as it is
//! walked.

use std::time::Instant;

use rosgate_wire::encode::Level;
use rosgate_wire::foxglove::client::{self, ClientBinary, ClientOp};
use rosgate_wire::foxglove::server::{self, Channel, MessageSchema, ServerInfo, StatusLevel};
use rosgate_wire::names::is_hidden;
use rosgate_wire::qos::Qos;
use rosgate_wire::ws::handshake::{self, Opening};

use rosgate_wire::Raw;

use super::answer::Answer;
use super::foxglove_actions::is_goal_channel;
use super::params::Answering;
use super::qos::{Asked, Registering};
use super::services::CallArgs;
use super::{Hub, Origin};
use crate::access::Class;
use crate::conn::ConnRef;
use crate::counters::{Counter, ErrorCode};
use crate::encoding::{Compression, Encoding};
use crate::foxglove::{
    ClientChannel, Graph, Session, SubscribeCheck, MAX_FOXGLOVE_CHANNELS, MAX_FOXGLOVE_SERVICES,
    TIME_INTERVAL,
};
use crate::nodes::Domain;
use crate::params::ParamValue;
use crate::registry::Role;
use crate::transport::Framing;

/// The schema of a channel whose type the gateway does not know: any
/// JSON value.
const PERMISSIVE_SCHEMA: &str = "{}";

pub use super::params_remote::{MAX_FOXGLOVE_PARAMS_LISTED, MAX_FOXGLOVE_PARAM_NODES};

/// How the id of a session's parameter set starts (then a JSON array: the
/// parameter's Foxglove name, the client's id or `null`, and the value set
/// as `parameterValues` lists it).
const SET_ID: &str = "fxs";

/// A Foxglove parameter name (`/node.param`, as foxglove_bridge names
/// them; node names have no `.`) as (node, parameter); a name without a
/// node part is a global (held) parameter.
fn split_param(name: &str) -> (String, &str) {
    match name.split_once('.') {
        Some((node, param)) if node.starts_with('/') && !param.is_empty() => {
            (node.to_owned(), param)
        }
        _ => (crate::params::GLOBAL.to_owned(), name),
    }
}

/// The Foxglove name of `param` of `node`.
fn param_name(node: &str, param: &str) -> String {
    if node == crate::params::GLOBAL {
        param.to_owned()
    } else {
        format!("{node}.{param}")
    }
}

/// A parameter as `parameterValues` lists it: byte arrays as base64 with
/// `type` `byte_array`, doubles (and double arrays) with `type` `float64`
/// (`float64_array`) so an integral double stays one (as foxglove_bridge
/// sends them); `null` for one not set.
fn param_json(name: &str, v: &ParamValue) -> serde_json::Value {
    use ParamValue as P;
    match v {
        P::Bytes(b) => {
            serde_json::json!({"name": name, "value": handshake::base64(b), "type": "byte_array"})
        }
        P::Double(_) => serde_json::json!({"name": name, "value": v.to_json(), "type": "float64"}),
        P::DoubleArray(_) => {
            serde_json::json!({"name": name, "value": v.to_json(), "type": "float64_array"})
        }
        _ => serde_json::json!({"name": name, "value": v.to_json()}),
    }
}

/// A `setParameters` entry's value as the store takes it, by its `type`
/// hint when given.
fn param_value(p: &serde_json::Value) -> Result<ParamValue, String> {
    use ParamValue as P;
    let v = p.get("value").unwrap_or(&serde_json::Value::Null);
    match p.get("type").and_then(serde_json::Value::as_str) {
        Some("byte_array") => rosgate_ros2::cdr::octets(v)
            .map(P::Bytes)
            .ok_or_else(|| "a byte_array value is base64 text".to_string()),
        Some("float64") => v
            .as_f64()
            .map(P::Double)
            .ok_or_else(|| "a float64 value is a number".to_string()),
        Some("float64_array") => v
            .as_array()
            .and_then(|a| {
                a.iter()
                    .map(serde_json::Value::as_f64)
                    .collect::<Option<Vec<_>>>()
            })
            .map(P::DoubleArray)
            .ok_or_else(|| "a float64_array value is an array of numbers".to_string()),
        Some(other) => Err(format!(
            "unknown parameter type {other:?} (byte_array, float64, float64_array)"
        )),
        None if v.is_null() => Err("deleting a parameter (value null) is not supported".into()),
        None => P::from_json(v),
    }
}

/// A hub status as a Foxglove `status` line.
pub(super) fn status(out: &mut Vec<u8>, level: Level, msg: &str) {
    let level = match level {
        Level::Info => StatusLevel::Info,
        Level::Warning => StatusLevel::Warning,
        Level::Error => StatusLevel::Error,
    };
    server::status(out, level, msg, None);
}

impl Hub {
    /// Admits a connection from the Foxglove listener (`--foxglove-listen`)
    /// as [`Hub::open_from`] admits a WebSocket one; its opening must then
    /// offer a Foxglove subprotocol (`Hub::foxglove_refusal`).
    pub fn open_foxglove_from(
        &mut self,
        peer: Option<std::net::SocketAddr>,
        now: Instant,
    ) -> Result<ConnRef, super::Refusal> {
        let r = self.open_from(crate::transport::Transport::WebSocket, peer, now)?;
        if let Some(c) = self.live_mut(r) {
            c.set_foxglove_port();
        }
        Ok(r)
    }

    /// Foxglove sessions open now (the list may hold some gone since the
    /// last turn's pruning: they are not counted).
    pub(super) fn foxglove_session_count(&self) -> usize {
        self.foxglove_conns
            .iter()
            .filter(|r| {
                self.conn(r.key)
                    .is_some_and(|c| c.gen() == r.gen && c.is_open())
            })
            .count()
    }

    /// Whether `me` speaks the Foxglove protocol.
    pub(super) fn is_foxglove(&self, me: ConnRef) -> bool {
        self.conn(me.key)
            .is_some_and(|c| c.gen() == me.gen && c.foxglove().is_some())
    }

    /// The HTTP refusal of an opening the Foxglove rules refuse, checked
    /// before the origin and token: a Foxglove listener's opening without
    /// the subprotocol, or a Foxglove opening without a token when tokens
    /// are required.
    pub(super) fn foxglove_refusal(&self, me: ConnRef, opening: &Opening) -> Option<Vec<u8>> {
        let on_foxglove_port = self.conn(me.key).is_some_and(|c| c.on_foxglove_port());
        if on_foxglove_port && opening.foxglove.is_none() {
            let why = format!(
                "this port speaks the Foxglove WebSocket protocol: offer the subprotocol {} (Sec-WebSocket-Protocol); rosbridge clients use the rosbridge port (--ws-listen)",
                rosgate_wire::foxglove::SUBPROTOCOLS.join(" or ")
            );
            return Some(handshake::refusal(400, "Bad Request", &why));
        }
        let tokenless = opening.foxglove.is_some()
            && self.access.required()
            && super::auth::presented_token(opening.authorization.as_deref(), &opening.target)
                .is_none();
        tokenless.then(|| {
            handshake::refusal(
                401,
                "Unauthorized",
                "a Foxglove client must present its token in the opening (Authorization: Bearer TOKEN, or ?token=TOKEN in the URL)",
            )
        })
    }

    /// Starts the session of `me`, whose opening agreed to `protocol`:
    /// `serverInfo`, then the channels.
    pub(super) fn foxglove_start(&mut self, me: ConnRef, protocol: &'static str, now: Instant) {
        let Some(c) = self.live_mut(me) else { return };
        c.start_foxglove(Session::new(protocol));
        self.foxglove_conns.push(me);
        let version = env!("CARGO_PKG_VERSION");
        let session_id = format!("{}-{}-{}", self.wall(self.started).0, me.key, me.gen);
        let distro = self.settings.distro.clone();
        let mut caps = vec![
            "clientPublish",
            "services",
            "connectionGraph",
            "parameters",
            "parametersSubscribe",
        ];
        if self.settings.use_sim_time {
            caps.push("time");
        }
        if self.foxglove_serves_assets() {
            caps.push("assets");
        }
        let mut out = Vec::new();
        server::server_info(
            &mut out,
            &ServerInfo {
                name: "rosgate",
                capabilities: &caps,
                supported_encodings: &["cdr", "json"],
                metadata: &[("rosgate_version", version), ("ROS_DISTRO", &distro)],
                session_id: &session_id,
            },
        );
        self.send_control(me, &out, now);
        self.foxglove_sync(me, now);
    }

    /// A session's JSON op.
    pub(super) fn foxglove_text(&mut self, me: ConnRef, msg: &[u8], now: Instant) {
        self.counters.inc(Counter::LinesIn);
        self.establish(me, now);
        self.flush_publishes(now);
        match client::decode_text(msg) {
            Err(why) => self.protocol_error(me, ErrorCode::FoxgloveRequest, &why, None, now),
            Ok(ClientOp::Subscribe(subs)) => {
                for s in subs {
                    self.foxglove_subscribe(me, s, now);
                }
            }
            Ok(ClientOp::Unsubscribe(ids)) => {
                for sub in ids {
                    self.foxglove_unsubscribe(me, sub, now);
                }
            }
            Ok(ClientOp::Advertise(chans)) => {
                for ch in chans {
                    self.foxglove_client_advertise(me, ch, now);
                }
            }
            Ok(ClientOp::Unadvertise(ids)) => {
                for id in ids {
                    self.foxglove_client_unadvertise(me, id, now);
                }
            }
            Ok(ClientOp::GetParameters { names, id }) => {
                self.foxglove_get_params(me, &names, id.as_deref(), now)
            }
            Ok(ClientOp::SetParameters { parameters, id }) => {
                self.foxglove_set_params(me, &parameters, id.as_deref(), now)
            }
            Ok(ClientOp::SubscribeParameterUpdates(names)) => {
                let mut full = 0;
                if let Some(s) = self.live_mut(me).and_then(|c| c.foxglove_mut()) {
                    full = names.iter().filter(|n| !s.watch_param(n)).count();
                }
                if full > 0 {
                    let why = format!(
                        "{full} parameters not watched: a session watches {} at most",
                        crate::foxglove::MAX_FOXGLOVE_PARAM_WATCHES
                    );
                    self.protocol_error(me, ErrorCode::FoxgloveRequest, &why, None, now);
                }
            }
            Ok(ClientOp::UnsubscribeParameterUpdates(names)) => {
                if let Some(s) = self.live_mut(me).and_then(|c| c.foxglove_mut()) {
                    for n in &names {
                        s.unwatch_param(n);
                    }
                }
            }
            Ok(ClientOp::SubscribeConnectionGraph) => {
                if let Some(s) = self.live_mut(me).and_then(|c| c.foxglove_mut()) {
                    s.watch_graph(true);
                }
                self.foxglove_graph(me, now);
            }
            Ok(ClientOp::UnsubscribeConnectionGraph) => {
                if let Some(s) = self.live_mut(me).and_then(|c| c.foxglove_mut()) {
                    s.watch_graph(false);
                }
            }
            Ok(ClientOp::FetchAsset { uri, request_id }) if self.foxglove_serves_assets() => {
                self.foxglove_fetch_asset(me, &uri, request_id, now)
            }
            Ok(op) => {
                let what = match op {
                    ClientOp::Advertise(_) | ClientOp::Unadvertise(_) => "clientPublish",
                    ClientOp::GetParameters { .. }
                    | ClientOp::SetParameters { .. }
                    | ClientOp::SubscribeParameterUpdates(_)
                    | ClientOp::UnsubscribeParameterUpdates(_) => "",
                    ClientOp::SubscribeConnectionGraph | ClientOp::UnsubscribeConnectionGraph => "",
                    ClientOp::FetchAsset { .. } => "assets",
                    ClientOp::Subscribe(_) | ClientOp::Unsubscribe(_) => "",
                };
                let why = format!(
                    "this server does not have the {what} capability (see serverInfo); nothing done"
                );
                self.protocol_error(me, ErrorCode::FoxgloveRequest, &why, None, now)
            }
        }
    }

    /// A session's binary message.
    pub(super) fn foxglove_binary(&mut self, me: ConnRef, msg: &[u8], now: Instant) {
        self.counters.inc(Counter::LinesIn);
        self.establish(me, now);
        self.flush_publishes(now);
        let why = match client::decode_binary(msg) {
            Err(why) => why,
            Ok(ClientBinary::MessageData { channel, payload }) => {
                return self.foxglove_client_publish(me, channel, payload, now)
            }
            Ok(ClientBinary::ServiceCallRequest {
                service,
                call,
                encoding,
                payload,
            }) => return self.foxglove_call(me, service, call, encoding, payload, now),
        };
        self.protocol_error(me, ErrorCode::FoxgloveRequest, &why, None, now);
    }

    /// A client channel: the connection becomes a publisher of its topic
    /// (an ordinary `advertise`, roles and limits included).
    /// Registers `r` for the session `me` as for a rosbridge client, and
    /// tells whether `me` is then a member of the topic (a refusal was told
    /// to `me` by [`Hub::register`]; a connection gone is no member).
    fn foxglove_register(&mut self, me: ConnRef, r: Registering<'_>, now: Instant) -> bool {
        let (role, topic) = (r.role, r.topic);
        self.register(me, r, None, None, now);
        let Some(domain) = self.conn(me.key).map(|c| c.domain()) else {
            return false;
        };
        let reg = &self.registries[domain as usize];
        reg.topic_id(topic)
            .is_some_and(|t| reg.is_member(me, role, t))
    }

    fn foxglove_client_advertise(&mut self, me: ConnRef, ch: client::ClientChannel, now: Instant) {
        let refused = |why: String| Some(why);
        let why = match self.conn(me.key).and_then(|c| c.foxglove()) {
            None => return,
            Some(s) => s.check_client_channel(ch.id),
        }
        .or_else(|| match ch.encoding.as_str() {
            "json" => None,
            "cdr" if self.types().msg(&ch.schema_name).is_some() => None,
            "cdr" => refused(format!(
                "client channel {} ({}): cdr needs a type this gateway knows, and it does not know {:?} (--interfaces adds definitions; json needs none); not advertised",
                ch.id, ch.topic, ch.schema_name
            )),
            other => refused(format!(
                "client channel {} ({}): encoding {other:?} is not one of supportedEncodings (cdr, json); not advertised",
                ch.id, ch.topic
            )),
        });
        if let Some(why) = why {
            return self.protocol_error(me, ErrorCode::FoxgloveRequest, &why, None, now);
        }
        let ty = (!ch.schema_name.is_empty()).then_some(ch.schema_name.as_str());
        let asked = Asked {
            qos: Qos::default(),
            peers: false,
            throttle_ms: 0,
            encoding: Encoding::default(),
        };
        let r = Registering {
            role: Role::Publisher,
            topic: &ch.topic,
            ty,
            asked,
        };
        if self.foxglove_register(me, r, now) {
            let cdr = ch.encoding == "cdr";
            let entry = ClientChannel {
                topic: ch.topic,
                ty: ch.schema_name,
                cdr,
            };
            if let Some(s) = self.live_mut(me).and_then(|c| c.foxglove_mut()) {
                s.add_client_channel(ch.id, entry);
            }
        }
    }

    fn foxglove_client_unadvertise(&mut self, me: ConnRef, id: u32, now: Instant) {
        let gone = self
            .live_mut(me)
            .and_then(|c| c.foxglove_mut())
            .and_then(|s| s.remove_client_channel(id));
        match gone {
            Some((ch, false)) => self.unregister(me, Role::Publisher, &ch.topic, None, None, now),
            Some((_, true)) => {}
            None => {
                let why = format!("no client channel {id}; nothing to unadvertise");
                self.protocol_error(me, ErrorCode::FoxgloveRequest, &why, None, now)
            }
        }
    }

    /// A message on a client channel: routed as the connection's publish
    /// (the type check, the batch, bridges), JSON as it came, CDR decoded
    /// once by the channel's type for JSON subscribers and the bridges, and
    /// kept beside it for the subscribers that take CDR.
    fn foxglove_client_publish(&mut self, me: ConnRef, id: u32, payload: &[u8], now: Instant) {
        let Some(ch) = self
            .conn(me.key)
            .and_then(|c| c.foxglove())
            .and_then(|s| s.client_channel(id))
            .cloned()
        else {
            let why = format!("client message data on channel {id}: no such client channel (advertise it first); dropped");
            return self.protocol_error(me, ErrorCode::FoxgloveRequest, &why, None, now);
        };
        let Some(domain) = self.conn(me.key).map(|c| c.domain()) else {
            return;
        };
        if !self.permit(me, Class::Publish, &ch.topic, None, now) {
            return;
        }
        if ch.cdr && !self.client_cdr_needs_json(me, domain, &ch.topic) {
            // Only subscribers that take CDR read it: it goes as it came,
            // with no JSON made (`null` in its place, as for a ROS 2
            // sample, `Bridges::remote_publish_cdr`), once its framing is
            // checked against the channel's type.
            let types = std::sync::Arc::clone(self.types());
            if let Err(e) = rosgate_ros2::cdr::validate(&*types, &ch.ty, payload) {
                let why = format!(
                    "client message data on channel {id} ({}): not CDR of {}: {e:?}; dropped",
                    ch.topic, ch.ty
                );
                return self.protocol_error(me, ErrorCode::FoxgloveRequest, &why, None, now);
            }
            self.counters.inc(Counter::CdrPublishedUntouched);
            let cdr: std::rc::Rc<[u8]> = std::rc::Rc::from(payload);
            let origin = Origin::Client { conn: me, id: None };
            let msg = Raw::from_valid_json("null");
            return self.route_with_cdr(origin, domain, &ch.topic, msg, Some(&cdr), now);
        }
        let json = if ch.cdr {
            let mut out = Vec::with_capacity(payload.len() * 2 + 16);
            let types = std::sync::Arc::clone(self.types());
            match rosgate_ros2::cdr::decode_json(&*types, &ch.ty, payload, &mut out) {
                Ok(()) => {
                    self.counters.inc(Counter::CdrPublished);
                    String::from_utf8(out).ok()
                }
                Err(e) => {
                    let why = format!(
                        "client message data on channel {id} ({}): not CDR of {}: {e:?}; dropped",
                        ch.topic, ch.ty
                    );
                    return self.protocol_error(me, ErrorCode::FoxgloveRequest, &why, None, now);
                }
            }
        } else {
            std::str::from_utf8(payload)
                .ok()
                .filter(|t| {
                    rosgate_wire::scan::scan_object(t, rosgate_wire::MAX_JSON_DEPTH, |_| {}).is_ok()
                })
                .map(str::to_owned)
        };
        let Some(json) = json else {
            let why = format!(
                "client message data on channel {id} ({}): not a JSON object; dropped",
                ch.topic
            );
            return self.protocol_error(me, ErrorCode::FoxgloveRequest, &why, None, now);
        };
        let origin = Origin::Client { conn: me, id: None };
        let msg = Raw::from_valid_json(&json);
        if ch.cdr {
            // The client's CDR goes with its JSON: Foxglove and `cbor-raw`
            // subscribers get it untouched, not encoded again.
            let cdr: std::rc::Rc<[u8]> = std::rc::Rc::from(payload);
            self.route_with_cdr(origin, domain, &ch.topic, msg, Some(&cdr), now);
        } else {
            self.route(origin, domain, &ch.topic, msg, now);
        }
    }

    /// A session's subscription `s`: the connection's registration on the
    /// channel's topic, throttled when it asked (`throttleMs`, the QoS
    /// path's throttle, `hub/qos.rs`, as rosbridge's `throttle_rate`).
    fn foxglove_subscribe(&mut self, me: ConnRef, s: client::Subscription, now: Instant) {
        let (sub, chan) = (s.id, s.channel);
        let Some(session) = self.conn(me.key).and_then(|c| c.foxglove()) else {
            return;
        };
        let (topic, ty, cdr) = match session.check_subscribe(sub, chan) {
            SubscribeCheck::Refused(why) => {
                return self.protocol_error(me, ErrorCode::FoxgloveRequest, &why, None, now)
            }
            SubscribeCheck::Register(c) => (c.topic.clone(), c.ty.clone(), c.cdr),
        };
        if is_goal_channel(&topic) {
            // The session's goals' feedback or status comes through it,
            // unregistered.
            if let Some(s) = self.live_mut(me).and_then(|c| c.foxglove_mut()) {
                s.subscribed(sub, chan);
            }
            return;
        }
        let asked = Asked {
            qos: Qos::default(),
            peers: false,
            throttle_ms: u64::from(s.throttle_ms),
            encoding: Encoding {
                compression: Compression::Foxglove { sub, cdr },
                fragment: None,
            },
        };
        let r = Registering {
            role: Role::Subscriber,
            topic: &topic,
            ty: Some(&ty),
            asked,
        };
        if self.foxglove_register(me, r, now) {
            if let Some(s) = self.live_mut(me).and_then(|c| c.foxglove_mut()) {
                s.subscribed(sub, chan);
            }
        }
    }

    fn foxglove_unsubscribe(&mut self, me: ConnRef, sub: u32, now: Instant) {
        let gone = self
            .live_mut(me)
            .and_then(|c| c.foxglove_mut())
            .and_then(|s| s.unsubscribe(sub).map(|c| c.topic.clone()));
        match gone {
            Some(topic) if is_goal_channel(&topic) => {}
            Some(topic) => self.unregister(me, Role::Subscriber, &topic, None, None, now),
            None => {
                let why = format!("no subscription {sub}; nothing to unsubscribe");
                self.protocol_error(me, ErrorCode::FoxgloveRequest, &why, None, now)
            }
        }
    }

    /// Re-makes the channels of every session whose domain changed since
    /// its last look (once per turn, from `Hub::expire`).
    pub(super) fn foxglove_sync_all(&mut self, now: Instant) {
        if self.foxglove_conns.is_empty() {
            return;
        }
        let conns = &self.conns;
        self.foxglove_conns.retain(|r| {
            conns
                .get(r.key as usize)
                .is_some_and(|c| c.gen() == r.gen && c.is_open())
        });
        // Under sim time, the time each session hears, per domain.
        let mut clock: Vec<(Domain, Option<u64>)> = Vec::new();
        for i in 0..self.foxglove_conns.len() {
            let me = self.foxglove_conns[i];
            self.foxglove_sync(me, now);
            if self.settings.use_sim_time {
                let domain = self.conn(me.key).map_or(0, |c| c.domain());
                let ns = match clock.iter().find(|(d, _)| *d == domain) {
                    Some((_, ns)) => *ns,
                    None => {
                        let ns = self
                            .graph_time(domain, now)
                            .ok()
                            .map(|(s, n)| s.saturating_mul(1_000_000_000).saturating_add(n.into()));
                        clock.push((domain, ns));
                        ns
                    }
                };
                let due = ns.is_some_and(|ns| {
                    self.live_mut(me)
                        .and_then(|c| c.foxglove_mut())
                        .is_some_and(|s| s.time_due(ns, now, TIME_INTERVAL))
                });
                if let (true, Some(ns)) = (due, ns) {
                    let mut frame = Vec::with_capacity(11);
                    if Framing::WebSocket.push_binary(&mut frame, &server::time(ns)) {
                        self.send_raw(me, &frame, now);
                    }
                }
            }
            let shed = self
                .live_mut(me)
                .and_then(|c| c.foxglove_mut())
                .and_then(|s| s.take_drop_warning(now));
            if let Some(n) = shed {
                let why = format!(
                    "{n} messages dropped: this connection reads slower than its subscriptions publish (queue limit {} bytes, shed fairly across topics)",
                    self.limits.max_queue_bytes
                );
                self.send_status(me, Level::Warning, &why, None, now);
            }
        }
    }

    /// Makes `me`'s channels those of its domain now, if the domain's
    /// registry changed since: `unadvertise` of the channels gone (their
    /// subscriptions withdrawn), `advertise` of the new ones.
    fn foxglove_sync(&mut self, me: ConnRef, now: Instant) {
        let Some(c) = self.conn(me.key).filter(|c| c.gen() == me.gen) else {
            return;
        };
        let domain = c.domain();
        let reg = &self.registries[domain as usize];
        let epoch = (reg.changes(), self.fed.graphs_changes);
        if c.foxglove().is_none_or(|s| s.synced_at(epoch)) {
            return;
        }
        let types = std::sync::Arc::clone(self.types());
        // Local topics with a publisher, then other gateways' and the ROS 2
        // graph's topics not already listed; by name.
        let mut named: std::collections::BTreeMap<&str, &str> = reg
            .topics_sorted(false)
            .filter(|(_, e)| !e.ty().is_empty() && !e.publishers().is_empty())
            .map(|(name, e)| (name, e.ty()))
            .take(MAX_FOXGLOVE_CHANNELS + 1)
            .collect();
        for (name, ty) in self.remote_topics(domain) {
            if named.len() > MAX_FOXGLOVE_CHANNELS {
                break;
            }
            if !ty.is_empty() && !is_hidden(name) {
                named.entry(name).or_insert(ty);
            }
        }
        let mut want: Vec<(String, String, bool)> = named
            .into_iter()
            .filter(|(name, _)| !is_hidden(name))
            .take(MAX_FOXGLOVE_CHANNELS + 1)
            .map(|(name, ty)| (name.to_owned(), ty.to_owned(), types.msg(ty).is_some()))
            .collect();
        // Actions' feedback and status channels (hidden names, listed on
        // purpose).
        want.extend(self.foxglove_action_parts(domain).0);
        let Some(synced) = self.live_mut(me).and_then(|c| c.foxglove_mut()).map(|s| {
            s.set_synced(epoch);
            s.sync(&want)
        }) else {
            return;
        };
        for (_, gone) in &synced.gone {
            if gone.sub.is_some() && !is_goal_channel(&gone.topic) {
                self.unregister(me, Role::Subscriber, &gone.topic, None, None, now);
            }
        }
        let mut out = Vec::new();
        if !synced.gone.is_empty() {
            let ids: Vec<u32> = synced.gone.iter().map(|(id, _)| *id).collect();
            server::unadvertise(&mut out, &ids);
        }
        if !synced.added.is_empty() {
            // The texts first (rendering borrows the hub), then the lines.
            let mut texts = Vec::with_capacity(synced.added.len());
            if let Some(s) = self.conn(me.key).and_then(|c| c.foxglove()) {
                for &id in &synced.added {
                    if let Some(ch) = s.channel(id) {
                        texts.push((id, ch.clone()));
                    }
                }
            }
            let mut rendered = Vec::with_capacity(texts.len());
            for (id, ch) in texts {
                let schema = if ch.cdr {
                    self.typedef_json(&ch.ty)
                        .ok()
                        .and_then(|(json, _)| serde_json::from_str::<String>(&json).ok())
                } else {
                    None
                };
                let name = if ch.cdr {
                    types.msg(&ch.ty).map_or(ch.ty.clone(), |d| d.name.clone())
                } else {
                    ch.ty.clone()
                };
                rendered.push((id, ch, name, schema));
            }
            let channels: Vec<Channel<'_>> = rendered
                .iter()
                .map(|(id, ch, name, schema)| match schema {
                    Some(text) => Channel {
                        id: *id,
                        topic: &ch.topic,
                        encoding: "cdr",
                        schema_name: name,
                        schema: text,
                        schema_encoding: "ros2msg",
                    },
                    None => Channel {
                        id: *id,
                        topic: &ch.topic,
                        encoding: "json",
                        schema_name: name,
                        schema: PERMISSIVE_SCHEMA,
                        schema_encoding: "jsonschema",
                    },
                })
                .collect();
            server::advertise(&mut out, &channels);
        }
        let services_cut = self.foxglove_sync_services(me, domain, &mut out);
        self.foxglove_graph_into(me, domain, &mut out);
        if !out.is_empty() {
            self.send_control(me, &out, now);
        }
        if services_cut {
            let why = format!(
                "more than {MAX_FOXGLOVE_SERVICES} services: only the first {MAX_FOXGLOVE_SERVICES} by name are advertised"
            );
            self.send_status(me, Level::Warning, &why, None, now);
        }
        if synced.cut {
            let why = format!(
                "more than {MAX_FOXGLOVE_CHANNELS} topics: only the first {MAX_FOXGLOVE_CHANNELS} by name are advertised"
            );
            self.send_status(me, Level::Warning, &why, None, now);
        }
    }

    /// Appends to `out` the `unadvertiseServices`/`advertiseServices` that
    /// make `me`'s services those of `domain` now; true when the list was
    /// cut (first time only).
    fn foxglove_sync_services(&mut self, me: ConnRef, domain: Domain, out: &mut Vec<u8>) -> bool {
        let reg = &self.registries[domain as usize];
        let mut want: Vec<(String, String)> = reg
            .service_names(false)
            .take(MAX_FOXGLOVE_SERVICES + 1)
            .filter_map(|n| reg.service(n).map(|s| (n.to_owned(), s.ty().to_owned())))
            .collect();
        // Other gateways' and ROS 2 servers' services, then the actions'.
        for (n, t) in self.remote_provided(crate::registry::Provided::Service, domain) {
            if !is_hidden(&n) && !want.iter().any(|(m, _)| *m == n) {
                want.push((n, t));
            }
        }
        want.extend(self.foxglove_action_parts(domain).1);
        let Some((gone, added, cut)) = self
            .live_mut(me)
            .and_then(|c| c.foxglove_mut())
            .map(|s| s.sync_services(&want))
        else {
            return false;
        };
        if !gone.is_empty() {
            server::unadvertise_services(out, &gone);
        }
        if added.is_empty() {
            return cut;
        }
        let listed: Vec<(u32, String, String)> = match self.conn(me.key).and_then(|c| c.foxglove())
        {
            Some(s) => added
                .iter()
                .filter_map(|&id| s.service(id).map(|x| (id, x.name.clone(), x.ty.clone())))
                .collect(),
            None => return cut,
        };
        let types = std::sync::Arc::clone(self.types());
        // (id, name, type, [(encoding, schema name, schema encoding, text)]).
        let mut sides = Vec::with_capacity(listed.len());
        for (id, name, ty) in listed {
            let (full, halves) = match types.srv(&ty) {
                Some(def) => (
                    def.name.clone(),
                    Some((def.request.clone(), def.response.clone())),
                ),
                None => (ty.clone(), None),
            };
            let side = |hub: &Hub, half: Option<String>, suffix: &str| match half
                .as_deref()
                .and_then(|h| {
                    hub.typedef_json(h)
                        .ok()
                        .and_then(|(j, _)| serde_json::from_str::<String>(&j).ok())
                        .map(|text| (h.to_owned(), text))
                }) {
                Some((schema_name, text)) => ("cdr", schema_name, "ros2msg", text),
                None => (
                    "json",
                    format!("{full}{suffix}"),
                    "jsonschema",
                    PERMISSIVE_SCHEMA.to_owned(),
                ),
            };
            let req = side(self, halves.as_ref().map(|h| h.0.clone()), "_Request");
            let resp = side(self, halves.as_ref().map(|h| h.1.clone()), "_Response");
            sides.push((id, name, full.clone(), req, resp));
        }
        let services: Vec<server::Service<'_>> = sides
            .iter()
            .map(|(id, name, ty, req, resp)| server::Service {
                id: *id,
                name,
                ty,
                request: MessageSchema {
                    encoding: req.0,
                    schema_name: &req.1,
                    schema_encoding: req.2,
                    schema: &req.3,
                },
                response: MessageSchema {
                    encoding: resp.0,
                    schema_name: &resp.1,
                    schema_encoding: resp.2,
                    schema: &resp.3,
                },
            })
            .collect();
        server::advertise_services(out, &services);
        cut
    }

    /// A session's service call request: decoded by the service's request
    /// type (CDR) or read as JSON, then called like `call_service`, its
    /// id naming the session's service id, call id and encoding, so its
    /// one answer (or failure) comes back to [`Hub::foxglove_answer`].
    fn foxglove_call(
        &mut self,
        me: ConnRef,
        service: u32,
        call: u32,
        encoding: &str,
        payload: &[u8],
        now: Instant,
    ) {
        let Some(svc) = self
            .conn(me.key)
            .and_then(|c| c.foxglove())
            .and_then(|s| s.service(service))
            .cloned()
        else {
            let why = format!("no service {service} is advertised; not called");
            return self.foxglove_call_failed(me, service, call, &why, now);
        };
        let args = match encoding {
            "json" => std::str::from_utf8(payload)
                .ok()
                .filter(|t| {
                    rosgate_wire::scan::scan_object(t, rosgate_wire::MAX_JSON_DEPTH, |_| {}).is_ok()
                })
                .map(str::to_owned)
                .ok_or_else(|| {
                    format!("{}: the request is not a JSON object; not called", svc.name)
                }),
            "cdr" => {
                let types = std::sync::Arc::clone(self.types());
                match types.srv(&svc.ty) {
                    None => Err(format!(
                        "{}: cdr needs the definition of {}, which this gateway does not know (json needs none); not called",
                        svc.name, svc.ty
                    )),
                    Some(def) => {
                        let mut out = Vec::with_capacity(payload.len() * 2 + 16);
                        match rosgate_ros2::cdr::decode_json(&*types, &def.request, payload, &mut out) {
                            Ok(()) => String::from_utf8(out).map_err(|_| String::new()),
                            Err(e) => Err(format!(
                                "{}: the request is not CDR of {}: {e:?}; not called",
                                svc.name, def.request
                            )),
                        }
                    }
                }
            }
            other => Err(format!(
                "{}: encoding {other:?} is not one of supportedEncodings (cdr, json); not called",
                svc.name
            )),
        };
        let args = match args {
            Ok(a) => a,
            Err(why) => return self.foxglove_call_failed(me, service, call, &why, now),
        };
        if self.foxglove_action_call(me, &svc, (service, call), encoding, &args, now) {
            return;
        }
        // The call's id is a JSON string the answer is read back from.
        let id = format!("\"fx:{service}:{call}:{encoding}\"");
        let call_args = CallArgs {
            args: Some(Raw::from_valid_json(&args)),
            timeout: None,
            wait: false,
            goal: None,
            encoding: Encoding::default(),
        };
        self.call_service(me, &svc.name, None, call_args, Some(id.as_bytes()), now);
    }

    pub(super) fn foxglove_call_failed(
        &mut self,
        me: ConnRef,
        service: u32,
        call: u32,
        why: &str,
        now: Instant,
    ) {
        self.counters.error(ErrorCode::FoxgloveRequest);
        let mut out = Vec::new();
        server::service_call_failure(&mut out, service, call, why);
        self.send_control(me, &out, now);
    }

    /// The answer to a session's call (`id` as [`Hub::foxglove_call`] made
    /// it): a binary service call response in the request's encoding (CDR
    /// encoded by the response type), or `serviceCallFailure` with the
    /// reason.
    pub(super) fn foxglove_answer(
        &mut self,
        to: ConnRef,
        id: Option<&[u8]>,
        answer: Answer<'_>,
        now: Instant,
    ) {
        if let Some(set) = id
            .and_then(|b| serde_json::from_slice::<String>(b).ok())
            .and_then(|s| s.strip_prefix(SET_ID).map(str::to_owned))
        {
            return self.foxglove_set_answered(to, &set, answer, now);
        }
        let parsed = id
            .and_then(|b| std::str::from_utf8(b).ok())
            .and_then(|s| s.strip_prefix("\"fx:"))
            .and_then(|s| s.strip_suffix('"'))
            .and_then(|s| {
                let mut it = s.splitn(3, ':');
                let service: u32 = it.next()?.parse().ok()?;
                let call: u32 = it.next()?.parse().ok()?;
                Some((service, call, it.next()?.to_owned()))
            });
        let Some((service, call, encoding)) = parsed else {
            // Not a call of this protocol (none other is made on a session).
            return;
        };
        if answer.result != b"true" {
            let why = serde_json::from_slice::<String>(answer.values)
                .unwrap_or_else(|_| String::from_utf8_lossy(answer.values).into_owned());
            let mut out = Vec::new();
            server::service_call_failure(&mut out, service, call, &why);
            return self.send_control(to, &out, now);
        }
        let payload = if encoding == "cdr" {
            let ty = self
                .conn(to.key)
                .and_then(|c| c.foxglove())
                .and_then(|s| s.service(service))
                .map(|s| s.ty.clone())
                .unwrap_or_default();
            let types = std::sync::Arc::clone(self.types());
            let made = types
                .srv(&ty)
                .ok_or_else(|| format!("the service's type {ty:?} is not known"))
                .and_then(|def| {
                    let v: serde_json::Value =
                        serde_json::from_slice(answer.values).map_err(|e| e.to_string())?;
                    let mut out = Vec::new();
                    rosgate_ros2::cdr::encode_into(&*types, &def.response, &v, &mut out)
                        .map_err(|e| format!("the answer is not {}: {e:?}", def.response))?;
                    Ok(out)
                });
            match made {
                Ok(b) => b,
                Err(why) => {
                    let mut out = Vec::new();
                    server::service_call_failure(&mut out, service, call, &why);
                    return self.send_control(to, &out, now);
                }
            }
        } else {
            answer.values.to_vec()
        };
        let body = server::service_call_response(service, call, &encoding, &payload);
        let mut frame = Vec::with_capacity(body.len() + 10);
        if Framing::WebSocket.push_binary(&mut frame, &body) {
            self.send_raw(to, &frame, now);
        }
    }

    /// Tells `me` what changed in its domain's connection graph, if it
    /// watches it.
    fn foxglove_graph(&mut self, me: ConnRef, now: Instant) {
        let Some(domain) = self.conn(me.key).map(|c| c.domain()) else {
            return;
        };
        let mut out = Vec::new();
        self.foxglove_graph_into(me, domain, &mut out);
        if !out.is_empty() {
            self.send_control(me, &out, now);
        }
    }

    /// Appends to `out` the `connectionGraphUpdate` that brings `me` (if
    /// it watches the graph) to `domain`'s graph now: the topics and
    /// services it is advertised (hidden ones left out, the same bounds),
    /// with their nodes.
    fn foxglove_graph_into(&mut self, me: ConnRef, domain: Domain, out: &mut Vec<u8>) {
        if !self
            .conn(me.key)
            .and_then(|c| c.foxglove())
            .is_some_and(|s| s.watches_graph())
        {
            return;
        }
        let reg = &self.registries[domain as usize];
        let mut g = Graph::default();
        for (name, _) in reg.topics_sorted(false).take(MAX_FOXGLOVE_CHANNELS) {
            if is_hidden(name) {
                continue;
            }
            let Some(t) = reg.topic_id(name) else {
                continue;
            };
            for (role, into) in [
                (Role::Publisher, &mut g.published),
                (Role::Subscriber, &mut g.subscribed),
            ] {
                let mut ids: Vec<String> = reg
                    .topic_nodes(t, role)
                    .into_iter()
                    .map(|(who, tag)| self.node_label(who, tag))
                    .collect();
                if ids.is_empty() {
                    continue;
                }
                ids.sort();
                ids.dedup();
                into.insert(name.to_owned(), ids);
            }
        }
        for name in reg.service_names(false).take(MAX_FOXGLOVE_SERVICES) {
            if let Some(svc) = reg.service(name) {
                let id = self.node_label(svc.provider(), svc.node());
                g.services.insert(name.to_owned(), vec![id]);
            }
        }
        let Some(d) = self
            .live_mut(me)
            .and_then(|c| c.foxglove_mut())
            .and_then(|s| s.graph_update(g))
        else {
            return;
        };
        let u = server::GraphUpdate {
            published: ends(&d.published),
            subscribed: ends(&d.subscribed),
            services: ends(&d.services),
            removed_topics: d.removed_topics.iter().map(String::as_str).collect(),
            removed_services: d.removed_services.iter().map(String::as_str).collect(),
        };
        server::connection_graph_update(out, &u);
    }

    /// `getParameters`: the parameters this gateway holds (declared by
    /// its clients' nodes, or held for nobody) and those of nodes whose
    /// parameter services another provider serves (ROS 2 nodes, other
    /// gateways' nodes: asked through their `get_parameters`, and for an
    /// empty list their `list_parameters` first, as foxglove_bridge does;
    /// `hub/params_remote.rs`), that the role may read; all of them for an
    /// empty list. One `parameterValues` with the `id`, when every node
    /// asked answered or failed (a node that fails or times out is left
    /// out).
    fn foxglove_get_params(
        &mut self,
        me: ConnRef,
        names: &[String],
        id: Option<&str>,
        now: Instant,
    ) {
        let Some(domain) = self.conn(me.key).map(|c| c.domain()) else {
            return;
        };
        let role = self.viewer(me);
        let store = self.params.store(domain);
        let mut listed = Vec::new();
        // Nodes beyond this gateway to ask, with the names wanted of each
        // (empty: all of them), in the order first named.
        let mut asks: Vec<(String, Vec<String>)> = Vec::new();
        if names.is_empty() {
            for (node, param, p) in store.all().take(MAX_FOXGLOVE_PARAMS_LISTED) {
                let key = super::params::param_key(node, param);
                if self.visible(role, &[Class::ParamRead], &key) {
                    listed.push(param_json(&param_name(node, param), &p.value));
                }
            }
            let nodes: Vec<String> = self.registries[domain as usize]
                .service_names(true)
                .filter_map(|n| n.strip_suffix("/list_parameters"))
                .filter(|n| !n.is_empty() && store.owner(n).is_none())
                .map(str::to_owned)
                .collect();
            if nodes.len() > MAX_FOXGLOVE_PARAM_NODES {
                let why = format!(
                    "getParameters: {} nodes serve parameters; the first {MAX_FOXGLOVE_PARAM_NODES} are asked",
                    nodes.len()
                );
                self.send_status(me, Level::Warning, &why, None, now);
            }
            asks.extend(
                nodes
                    .into_iter()
                    .take(MAX_FOXGLOVE_PARAM_NODES)
                    .map(|n| (n, Vec::new())),
            );
        } else {
            for name in names.iter().take(MAX_FOXGLOVE_PARAMS_LISTED) {
                let (node, param) = split_param(name);
                let key = super::params::param_key(&node, param);
                if !self.visible(role, &[Class::ParamRead], &key) {
                    continue;
                }
                if let Some(p) = store.get(&node, param) {
                    listed.push(param_json(name, &p.value));
                } else if store.owner(&node).is_none() && node != crate::params::GLOBAL {
                    let full = asks.len() >= MAX_FOXGLOVE_PARAM_NODES;
                    match asks.iter_mut().find(|(n, _)| *n == node) {
                        Some((_, wanted)) => wanted.push(param.to_owned()),
                        None if !full => asks.push((node, vec![param.to_owned()])),
                        None => {}
                    }
                }
            }
        }
        if asks.is_empty() {
            return self.foxglove_send_values(me, &listed, id, now);
        }
        let Some((listed, id)) = self
            .foxglove_get_remote(me, domain, asks, (listed, id), now)
            .err()
        else {
            return;
        };
        self.foxglove_send_values(me, &listed, id.as_deref(), now);
    }

    /// `param` of `node` as `parameterValues` lists it (Foxglove's name).
    pub(super) fn foxglove_param_entry(
        &self,
        node: &str,
        param: &str,
        v: &ParamValue,
    ) -> serde_json::Value {
        param_json(&param_name(node, param), v)
    }

    /// One `parameterValues` of `listed` with the request's `id`.
    pub(super) fn foxglove_send_values(
        &mut self,
        me: ConnRef,
        listed: &[serde_json::Value],
        id: Option<&str>,
        now: Instant,
    ) {
        let mut out = Vec::new();
        server::parameter_values(&mut out, listed, id);
        self.send_control(me, &out, now);
    }

    /// Whether `me`'s role may read the parameter `p` (a `parameterValues`
    /// entry) names.
    pub(super) fn foxglove_may_read(&self, me: ConnRef, p: &serde_json::Value) -> bool {
        let name = p["name"].as_str().unwrap_or("");
        let (node, param) = split_param(name);
        let key = super::params::param_key(&node, param);
        self.visible(self.viewer(me), &[Class::ParamRead], &key)
    }

    /// `setParameters`: each change through the owner's rules and
    /// validation (`Hub::request_set`, as rosapi's `set_param`); each
    /// answer comes back to [`Hub::foxglove_set_answered`].
    fn foxglove_set_params(
        &mut self,
        me: ConnRef,
        params: &[serde_json::Value],
        id: Option<&str>,
        now: Instant,
    ) {
        let Some(domain) = self.conn(me.key).map(|c| c.domain()) else {
            return;
        };
        for p in params.iter().take(MAX_FOXGLOVE_PARAMS_LISTED) {
            let Some(name) = p.get("name").and_then(serde_json::Value::as_str) else {
                let why = "setParameters: each parameter needs a string \"name\"";
                self.protocol_error(me, ErrorCode::FoxgloveRequest, why, None, now);
                continue;
            };
            let value = match param_value(p) {
                Ok(v) => v,
                Err(why) => {
                    let why = format!("setParameters {name}: {why}; not set");
                    self.protocol_error(me, ErrorCode::FoxgloveRequest, &why, None, now);
                    continue;
                }
            };
            let (node, param) = split_param(name);
            let tail = serde_json::json!([name, id, param_json(name, &value)]);
            let set_id = serde_json::Value::from(format!("{SET_ID}{tail}")).to_string();
            let at = Answering {
                me,
                service: "/rosapi/set_param",
                id: Some(set_id.as_bytes()),
            };
            // As rosapi's `set_param`: a ROS 2 node's through its
            // `set_parameters`, this gateway's own through the store.
            self.set_param_anywhere(at, domain, &node, param, value, now);
        }
    }

    /// The end of one parameter's set (`rest`: the Foxglove name and the
    /// client's id): its value now in `parameterValues` with the id, or an
    /// error status naming the refusal.
    fn foxglove_set_answered(&mut self, to: ConnRef, rest: &str, answer: Answer<'_>, now: Instant) {
        let tail: serde_json::Value = serde_json::from_str(rest).unwrap_or_default();
        let name = tail[0].as_str().unwrap_or("").to_owned();
        let id = tail[1].as_str().map(str::to_owned);
        if answer.result != b"true" {
            let why = serde_json::from_slice::<String>(answer.values)
                .unwrap_or_else(|_| String::from_utf8_lossy(answer.values).into_owned());
            let why = format!("setParameters {name}: {why}");
            return self.protocol_error(to, ErrorCode::BadParameter, &why, None, now);
        }
        let Some(domain) = self.conn(to.key).map(|c| c.domain()) else {
            return;
        };
        let (node, param) = split_param(&name);
        // The store's value when this gateway holds the node; the value
        // set when its owner is elsewhere (a ROS 2 node accepted it).
        let listed = match self.params.store(domain).get(&node, param) {
            Some(p) => param_json(&name, &p.value),
            None => tail[2].clone(),
        };
        let mut out = Vec::new();
        server::parameter_values(&mut out, &[listed], id.as_deref());
        self.send_control(to, &out, now);
    }

    /// A parameter changed (`hub/params.rs` `param_event`): the sessions
    /// of `domain` watching it (and allowed to read it) hear its value
    /// (`null` when it went).
    pub(super) fn foxglove_param_changed(
        &mut self,
        domain: Domain,
        node: &str,
        param: &str,
        now: Instant,
    ) {
        if self.foxglove_conns.is_empty() {
            return;
        }
        let name = param_name(node, param);
        let key = super::params::param_key(node, param);
        let watching: Vec<ConnRef> = self
            .foxglove_conns
            .iter()
            .copied()
            .filter(|r| {
                self.conn(r.key).is_some_and(|c| {
                    c.gen() == r.gen
                        && c.is_open()
                        && c.domain() == domain
                        && c.foxglove().is_some_and(|s| s.watches_param(&name))
                })
            })
            .filter(|&r| self.visible(self.viewer(r), &[Class::ParamRead], &key))
            .collect();
        if watching.is_empty() {
            return;
        }
        let value = self
            .params
            .store(domain)
            .get(node, param)
            .map_or(ParamValue::NotSet, |p| p.value.clone());
        let mut out = Vec::new();
        server::parameter_values(&mut out, &[param_json(&name, &value)], None);
        for r in watching {
            self.send_control(r, &out, now);
        }
    }
}

/// A diff's entries as the encoder takes them.
fn ends(l: &[(String, Vec<String>)]) -> Vec<server::Endpoints<'_>> {
    l.iter().map(|(k, v)| (k.as_str(), v.as_slice())).collect()
}
