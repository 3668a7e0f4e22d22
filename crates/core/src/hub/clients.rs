//! What an operator sees of connections: the `open`/`close` log lines
//! (rate-limited), the ring of recent closes, and the `/rosgate/connections`
//! reply the CLI and the dashboard read.
//!
//! Invariants:
//! - at most [`CONN_LOGS_PER_SEC`] connection lines a second whatever the
//!   crowd does; the next admitted line says how many were suppressed;
//! - the ring keeps the last [`RECENT_CLOSES`] closes, O(1) per close;
//! - a `/rosgate/connections` reply lists at most [`MAX_LIST_ITEMS`]
//!   connections (`"truncated":true` beyond) and is charged as work.

use std::collections::VecDeque;
use std::time::Instant;

use serde_json::{json, Value};

use super::rosapi::MAX_LIST_ITEMS;
use super::Hub;
use crate::codes::CloseReason;
use crate::conn::{Conn, ConnRef};
use crate::counters::Counter;
use crate::limits::{CONN_LOGS_PER_SEC, RECENT_CLOSES};
use crate::log::{self, LogLevel, Val};
use crate::nodes::Domain;
use crate::ratelimit::{Admit, RateLimit};
use crate::registry::NodeTag;
use crate::transport::Transport;

/// One connection that closed.
#[derive(Debug, Clone)]
struct Closed {
    id: u32,
    name: String,
    client: String,
    peer: String,
    transport: Transport,
    domain: Domain,
    reason: CloseReason,
    /// Wall clock seconds when it closed.
    at: (u64, u32),
    lived_s: f64,
    delivered: u64,
    dropped: u64,
}

/// The log limiter and the ring of recent closes.
#[derive(Debug)]
pub(super) struct ClientLog {
    limit: RateLimit,
    recent: VecDeque<Closed>,
}

impl ClientLog {
    pub(super) fn new() -> Self {
        ClientLog {
            limit: RateLimit::new(CONN_LOGS_PER_SEC),
            recent: VecDeque::with_capacity(RECENT_CLOSES),
        }
    }
}

fn peer_of(c: &Conn) -> String {
    c.peer().map(|p| p.to_string()).unwrap_or_default()
}

fn wall_json((sec, nanosec): (u64, u32)) -> Value {
    json!({"sec": sec, "nanosec": nanosec})
}

impl Hub {
    /// The name a connection is known by: its first declared node, else its
    /// implicit node name.
    pub(super) fn client_label(&self, me: ConnRef) -> String {
        match self.nodes.default_of(me) {
            Some(tag) => self.node_label(me, tag),
            None => self.conn_node_name(me),
        }
    }

    /// Writes a connection log line at `level` if the rate allows.
    fn conn_line(
        &mut self,
        level: LogLevel,
        msg: &str,
        fields: &mut Vec<(&str, Val<'_>)>,
        now: Instant,
    ) {
        if !log::enabled(level) {
            return;
        }
        if let Admit::Yes { suppressed } = self.client_log.limit.admit(now) {
            if suppressed > 0 {
                fields.push(("suppressed", Val::Num(suppressed)));
            }
            log::event(level, msg, fields);
        }
    }

    /// A connection was admitted (TCP) or completed its upgrade
    /// (WebSocket). `conn` is its number: the `<n>` of `/rosgate_tcp_<n>`,
    /// never reused while the gateway runs (unlike its slab key).
    pub(super) fn log_open(&mut self, me: ConnRef, now: Instant) {
        let Some(c) = self.conns.get(me.key as usize) else {
            return;
        };
        let (peer, transport, domain) = (peer_of(c), c.transport(), c.domain());
        let mut fields = vec![
            ("conn", Val::Num(u64::from(me.gen))),
            ("peer", Val::Str(&peer)),
            ("transport", Val::Str(transport.label())),
            ("domain", Val::Num(u64::from(domain))),
        ];
        self.conn_line(LogLevel::Info, "open", &mut fields, now);
    }

    /// A connection was refused before it was admitted.
    pub(super) fn log_refused(&mut self, transport: Transport, reason: CloseReason, now: Instant) {
        let mut fields = vec![
            ("transport", Val::Str(transport.label())),
            ("reason", Val::Str(reason.label())),
        ];
        self.conn_line(LogLevel::Warn, "refused", &mut fields, now);
    }

    /// Connection `me` is closing for `reason`: logs it (info, or warn when
    /// the gateway forced it) and remembers it in the ring. An answered
    /// HTTP request (a scrape, a health check) is logged at debug only and
    /// not remembered: a probe every second must not push real closes out.
    pub(super) fn note_closed(&mut self, me: ConnRef, reason: CloseReason, now: Instant) {
        let Some(c) = self.conns.get(me.key as usize) else {
            return;
        };
        let closed = Closed {
            id: me.gen,
            name: self.conn_node_name(me),
            client: String::new(),
            peer: peer_of(c),
            transport: c.transport(),
            domain: c.domain(),
            reason,
            at: self.wall(now),
            lived_s: now.saturating_duration_since(c.opened_at()).as_secs_f64(),
            delivered: c.out().queued_msgs(),
            dropped: c.out().dropped_msgs(),
        };
        let closed = Closed {
            client: self.client_label(me),
            ..closed
        };
        let http = reason == CloseReason::HttpServed;
        let level = if http {
            LogLevel::Debug
        } else if reason.is_forced() {
            LogLevel::Warn
        } else {
            LogLevel::Info
        };
        let mut fields = vec![
            ("conn", Val::Num(u64::from(me.gen))),
            ("peer", Val::Str(&closed.peer)),
            ("transport", Val::Str(closed.transport.label())),
            ("client", Val::Str(&closed.client)),
            ("reason", Val::Str(reason.label())),
            ("lived_s", Val::Float(closed.lived_s)),
            ("delivered", Val::Num(closed.delivered)),
            ("dropped", Val::Num(closed.dropped)),
        ];
        self.conn_line(level, "close", &mut fields, now);
        if http {
            return;
        }
        if self.client_log.recent.len() == RECENT_CLOSES {
            self.client_log.recent.pop_front();
        }
        self.client_log.recent.push_back(closed);
    }

    /// The `/rosgate/connections` reply: the open connections of every
    /// domain, with what they queued and dropped, and the recent closes.
    pub(super) fn connections_json(&mut self, now: Instant) -> Value {
        let mut list = Vec::new();
        let mut truncated = false;
        let keys: Vec<(u32, u32)> = self
            .conns
            .iter()
            .filter(|(_, c)| c.is_open())
            .map(|(k, c)| (k as u32, c.gen()))
            .collect();
        for (key, gen) in keys {
            if list.len() == MAX_LIST_ITEMS {
                truncated = true;
                break;
            }
            let me = ConnRef { key, gen };
            let Some(c) = self.conns.get(key as usize) else {
                continue;
            };
            let nodes: Vec<String> = self
                .nodes
                .of(me)
                .iter()
                .filter_map(|&k| self.nodes.get(NodeTag(k)))
                .map(|n| n.full_name().to_string())
                .collect();
            // The role it authenticated as (`null` with authentication off
            // or before it authenticated).
            let role = self
                .access
                .required()
                .then(|| self.viewer(me).map(|r| self.access.role_name(r)))
                .flatten();
            let out = c.out();
            // Drops by topic name, for a recorder that must say what it
            // lost per topic (`rosgate bag record`); absent when none.
            let reg = self.registries.get(c.domain());
            let by_topic: serde_json::Map<String, Value> = out
                .dropped_by_topic()
                .filter_map(|(t, n)| {
                    let name = reg.topic(t)?.name();
                    Some((name.to_string(), Value::from(n)))
                })
                .collect();
            list.push(json!({
                "id": gen,
                "name": self.conn_node_name(me),
                "client": self.client_label(me),
                "nodes": nodes,
                "peer": peer_of(c),
                // A federation link stands for the other gateways; a
                // Foxglove session is one on either WebSocket port.
                "transport": if c.is_bridge() {
                    "federation"
                } else if c.foxglove().is_some() {
                    "foxglove"
                } else {
                    c.transport().label()
                },
                "foxglove": c.foxglove().map(|s| json!({
                    "subprotocol": s.protocol(),
                    "channels": s.channel_count(),
                    "subscriptions": s.subscription_count(),
                })),
                "domain": c.domain(),
                "established": c.is_established(),
                "role": role,
                "opened": wall_json(self.wall(c.opened_at())),
                "age_s": now.saturating_duration_since(c.opened_at()).as_secs_f64(),
                "queued_bytes": out.topic_bytes() + out.control_bytes(),
                "delivered": out.queued_msgs(),
                "dropped": out.dropped_msgs(),
            }));
            if !by_topic.is_empty() {
                if let Some(Value::Object(m)) = list.last_mut() {
                    m.insert("dropped_topics".into(), Value::Object(by_topic));
                }
            }
        }
        let recent: Vec<Value> = self
            .client_log
            .recent
            .iter()
            .rev()
            .map(|r| {
                json!({
                    "id": r.id,
                    "name": r.name,
                    "client": r.client,
                    "peer": r.peer,
                    "transport": r.transport.label(),
                    "domain": r.domain,
                    "reason": r.reason.label(),
                    "forced": r.reason.is_forced(),
                    "closed": wall_json(r.at),
                    "lived_s": r.lived_s,
                    "delivered": r.delivered,
                    "dropped": r.dropped,
                })
            })
            .collect();
        self.counters.add(
            Counter::IntrospectionItems,
            (list.len() + recent.len()) as u64,
        );
        let mut v = json!({"connections": list, "recent_closes": recent});
        if truncated {
            v["truncated"] = json!(true);
        }
        v
    }
}
