//! What Zenoh's threads learn, shared with the loop: which gateways are up,
//! which topics they (and ROS 2's subscriptions, for the ROS 2 peer) want,
//! which services and actions they provide, their graphs, and the goals
//! from them waiting here (their calls: `calls.rs`, kept here too). The
//! samples, calls and answers they send go to the loop through the
//! hand-off (`inbox.rs`), which owns that budget.
//!
//! Invariants:
//! - callbacks never block: a lock held for a few map operations, a
//!   non-blocking send to the loop (`inbox.rs`);
//! - a remote gateway's interest is kept per (domain, topic, gateway), so
//!   the hub hears of a topic once when the first gateway wants it and once
//!   when the last one stops (its token deleted, or its whole gateway lost);
//! - the tables are bounded ([`MAX_GATEWAYS`], [`MAX_REMOTE_INTEREST`],
//!   [`MAX_PENDING_GRAPH_BYTES`]): beyond them, announcements are ignored
//!   and counted; what they hold is reported to the memory ledger
//!   ([`Shared::held_bytes`]);
//! - a graph is taken only from a gateway whose presence token is alive
//!   (any Zenoh peer can put on a graph key: an invented gateway id, with
//!   no token, is ignored and counted), and it goes when the token goes;
//! - a graph is parsed here, on Zenoh's thread; the loop only installs
//!   it, a bounded number of items per turn ([`GRAPH_ITEMS_PER_TURN`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use rosgate_core::bridge::PeerId;
use rosgate_core::hub::{RemoteGoal, RemoteGraph};
use rosgate_core::nodes::Domain;
use rosgate_core::registry::Provided;
use rosgate_wire::decode::{self, Op, Request, MAX_NAME_BYTES};
use rosgate_wire::Raw;
use zenoh::query::{Query, Reply};
use zenoh::sample::{Sample, SampleKind};
use zenoh::Wait;

use super::calls::{Calls, MAX_REMOTE_CALLS};
use crate::keys;
use rosgate_peers::lines::aborted_line;
use rosgate_peers::Inbox;

/// Gateways. Other gateways remembered; more are ignored (and counted).
pub const MAX_GATEWAYS: usize = 1024;

/// (domain, topic, gateway) interest entries remembered; more are ignored
/// (and counted). Provider entries count against the same limit.
pub const MAX_REMOTE_INTEREST: usize = 65536;

/// What the loop learns from the other gateways (graphs come apart:
/// [`Shared::take_graphs`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Change {
    /// Some other gateway wants the topic (or none any more).
    Interest(Domain, String, bool, PeerId),
    /// The first of a peer's kind (another gateway, or a ROS 2 node)
    /// provides the service or serves the action, of this type (or the
    /// last of that kind no longer does).
    Provider(Provided, Domain, String, Option<String>, PeerId),
    /// A gateway left: its graphs go.
    Left(String),
}

/// Bytes. The largest graph announcement taken from another gateway.
pub const MAX_GRAPH_BYTES: usize = 4 << 20;

/// Bytes. Graphs parsed and waiting for the loop, all gateways together
/// (one per gateway and domain: a newer one replaces it); beyond, further
/// announcements are ignored (and counted) until the loop catches up.
pub const MAX_PENDING_GRAPH_BYTES: usize = 16 << 20;

/// Items. Graph nodes, topics and parameters the loop installs per turn
/// (at least one graph); the rest wait for the next turn.
pub const GRAPH_ITEMS_PER_TURN: usize = 20_000;

/// Bytes the ledger counts per entry of the tables here (gateways,
/// interest, providers) beyond its names.
const TABLE_ENTRY_COST: usize = 64;

#[derive(Debug, Default)]
struct Tables {
    /// Other gateways up, with when this one first saw them (Unix ms).
    gateways: BTreeMap<String, u64>,
    /// Topics other gateways want, and which gateways.
    interest: HashMap<(Domain, String), BTreeSet<String>>,
    /// Services other gateways provide: which gateways, with which type.
    providers: HashMap<(Provided, Domain, String), BTreeMap<String, String>>,
    entries: usize,
    /// Transitions the loop has not taken yet.
    changes: Vec<Change>,
    /// Graphs parsed and not yet installed by the loop, by domain and
    /// gateway, and their bytes (at most [`MAX_PENDING_GRAPH_BYTES`]).
    graphs: HashMap<(Domain, String), RemoteGraph>,
    graph_bytes: usize,
    /// Bytes of the entries of `gateways`, `interest` and `providers` (as
    /// the ledger counts them).
    bytes: usize,
    /// Gateways that came or went, ever.
    joined: u64,
    left: u64,
    ignored: u64,
    /// Ignored since the loop last took the count (for `/metrics`).
    ignored_new: u64,
}

impl Tables {
    fn ignore(&mut self) {
        self.ignored += 1;
        self.ignored_new += 1;
    }
}

/// See the module docs.
pub(crate) struct Shared {
    zid: String,
    /// The hand-off to the loop (shared with the ROS 2 peer).
    inbox: Arc<Inbox>,
    tables: Mutex<Tables>,
    /// Service calls between gateways, both ways (`calls.rs`).
    pub(crate) calls: Calls,
    /// Goals from other gateways in progress here, by the id the bridge
    /// sends them with.
    queries: Mutex<HashMap<u64, Query>>,
    /// Goals from other gateways in progress here: their caller's gateway
    /// and goal id (what a cancel names) to the query.
    origins: Mutex<HashMap<String, u64>>,
    next_query: AtomicU64,
    changed: AtomicBool,
    /// Goes up whenever any provider token comes or goes, so the loop
    /// knows when the gateway it picked for a service may have changed.
    pub(crate) provider_epoch: AtomicU64,
    /// A gateway joined: everyone's graph must be announced again.
    pub(crate) republish: AtomicBool,
}

impl Shared {
    pub(crate) fn new(zid: String, inbox: Arc<Inbox>) -> Shared {
        Shared {
            calls: Calls::new(zid.clone(), inbox.clone()),
            zid,
            inbox,
            tables: Mutex::new(Tables::default()),
            queries: Mutex::new(HashMap::new()),
            origins: Mutex::new(HashMap::new()),
            next_query: AtomicU64::new(1),
            changed: AtomicBool::new(false),
            provider_epoch: AtomicU64::new(0),
            republish: AtomicBool::new(false),
        }
    }

    fn tables(&self) -> MutexGuard<'_, Tables> {
        // A panic elsewhere while holding it leaves plain maps behind.
        self.tables.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wakes the loop for a change of the tables it takes in its next
    /// turn ([`Shared::take_changes`]).
    fn wake(&self) {
        self.changed.store(true, Ordering::Release);
        self.inbox.wake();
    }

    /// A gateway's presence token came or went.
    pub(crate) fn on_gateway(&self, s: &Sample) {
        let Some(gw) = keys::gateway_of(s.key_expr().as_str()) else {
            return;
        };
        if gw == self.zid {
            return;
        }
        let mut t = self.tables();
        if !keys::is_zid(gw) {
            t.ignore();
            return;
        }
        match s.kind() {
            SampleKind::Put => {
                if !t.gateways.contains_key(gw) && t.gateways.len() >= MAX_GATEWAYS {
                    t.ignore();
                    return;
                }
                if !t.gateways.contains_key(gw) {
                    t.gateways.insert(gw.to_string(), unix_ms());
                    t.bytes += gw.len() + TABLE_ENTRY_COST;
                    t.joined += 1;
                    rosgate_core::log!(Info, "federation: gateway {gw} joined");
                    drop(t);
                    self.republish.store(true, Ordering::Release);
                    self.wake();
                }
            }
            SampleKind::Delete => {
                if t.gateways.remove(gw).is_some() {
                    t.bytes -= gw.len() + TABLE_ENTRY_COST;
                    t.left += 1;
                    rosgate_core::log!(Info, "federation: gateway {gw} left");
                    // Its graphs go, those waiting for the loop too.
                    let mut freed = 0;
                    t.graphs.retain(|(_, g), graph| {
                        let keep = g != gw;
                        if !keep {
                            freed += graph.bytes();
                        }
                        keep
                    });
                    t.graph_bytes -= freed;
                    t.changes.push(Change::Left(gw.to_string()));
                    drop(t);
                    self.calls.gateway_left(gw);
                    self.wake();
                }
            }
        }
    }

    /// The other rosgate gateways of this federation (at most
    /// [`MAX_GATEWAYS`]) when they changed since `seen`, with the number
    /// to pass next time (the ROS 2 link drops their publishers' samples).
    // Used by the ROS 2 peer only.
    #[cfg_attr(not(feature = "ros2"), allow(dead_code))]
    pub(crate) fn gateways_since(&self, seen: u64) -> Option<(u64, Vec<String>)> {
        let t = self.tables();
        let now = t.joined + t.left;
        (now != seen).then(|| (now, t.gateways.keys().cloned().collect()))
    }

    /// Another gateway announced its graph of a domain: taken only from a
    /// gateway whose presence token is alive, parsed here, and kept for the
    /// loop (replacing one of the same gateway and domain still waiting).
    pub(crate) fn on_graph(&self, s: &Sample) {
        let Some((domain, gw)) = keys::graph_of(s.key_expr().as_str()) else {
            return;
        };
        if gw == self.zid {
            return;
        }
        let present = |t: &Tables| t.gateways.contains_key(gw);
        let payload = s.payload();
        {
            let mut t = self.tables();
            if !present(&t) || payload.len() > MAX_GRAPH_BYTES {
                t.ignore();
                return;
            }
        }
        // Parsed without the lock (it may take milliseconds).
        let bytes = payload.to_bytes();
        let graph = std::str::from_utf8(&bytes).ok().map(RemoteGraph::parse);
        let mut t = self.tables();
        let Some(graph) = graph.filter(|_| present(&t)) else {
            t.ignore();
            return;
        };
        let key = (domain, gw.to_string());
        let old = t.graphs.get(&key).map_or(0, RemoteGraph::bytes);
        let size = graph.bytes();
        if t.graph_bytes - old + size > MAX_PENDING_GRAPH_BYTES {
            t.ignore();
            return;
        }
        t.graph_bytes = t.graph_bytes - old + size;
        t.graphs.insert(key, graph);
        drop(t);
        self.wake();
    }

    /// Graphs waiting for the loop, up to about `items` items (at least
    /// one graph); whether more are left.
    pub(crate) fn take_graphs(&self, items: usize) -> (Vec<(Domain, String, RemoteGraph)>, bool) {
        let mut t = self.tables();
        if t.graphs.is_empty() {
            return (Vec::new(), false);
        }
        let mut out = Vec::new();
        let mut taken = 0;
        let keys: Vec<(Domain, String)> = t.graphs.keys().cloned().collect();
        for key in keys {
            if taken >= items && !out.is_empty() {
                break;
            }
            if let Some(g) = t.graphs.remove(&key) {
                taken += g.items().max(1);
                t.graph_bytes -= g.bytes();
                out.push((key.0, key.1, g));
            }
        }
        let more = !t.graphs.is_empty();
        (out, more)
    }

    /// Another gateway's interest token for a topic came or went.
    pub(crate) fn on_interest(&self, s: &Sample) {
        let Some((domain, gw, topic)) = keys::interest_of(s.key_expr().as_str()) else {
            return;
        };
        if gw == self.zid {
            return;
        }
        if !keys::is_zid(&gw) {
            self.tables().ignore();
            return;
        }
        self.interest(domain, topic, gw, s.kind() == SampleKind::Put);
    }

    /// `who` (another gateway, or a ROS 2 subscription) wants `topic` of
    /// `domain`, or no longer does: the hub hears of it, as the interest
    /// of `who`'s kind of peer ([`peer_of`]), when the first of that kind
    /// comes and when its last goes.
    pub(crate) fn interest(&self, domain: Domain, topic: String, who: String, on: bool) {
        let mut t = self.tables();
        let cost = key_cost(&topic, &who);
        let peer = peer_of(&who);
        let key = (domain, topic);
        let change = if on {
            if t.entries >= MAX_REMOTE_INTEREST || key.1.len() > MAX_NAME_BYTES {
                t.ignore();
                return;
            }
            let set = t.interest.entry(key.clone()).or_default();
            let first = !set.iter().any(|w| peer_of(w) == peer);
            let added = set.insert(who);
            t.entries += usize::from(added);
            if added {
                t.bytes += cost;
            }
            first && added
        } else {
            let Some(set) = t.interest.get_mut(&key) else {
                return;
            };
            let removed = set.remove(&who);
            let last = removed && !set.iter().any(|w| peer_of(w) == peer);
            if set.is_empty() {
                t.interest.remove(&key);
            }
            t.entries -= usize::from(removed);
            if removed {
                t.bytes -= cost;
            }
            last
        };
        if change {
            t.changes.push(Change::Interest(key.0, key.1, on, peer));
            drop(t);
            self.wake();
        }
    }

    /// Another gateway's provider token for a service came or went.
    pub(crate) fn on_provider(&self, s: &Sample) {
        let Some((kind, domain, gw, ty, name)) = keys::provider_of(s.key_expr().as_str()) else {
            return;
        };
        if gw == self.zid {
            return;
        }
        if !keys::is_zid(&gw) {
            self.tables().ignore();
            return;
        }
        let on = (s.kind() == SampleKind::Put).then_some(ty);
        self.provider(kind, domain, name, gw, on);
    }

    /// `who` (another gateway, or a ROS 2 service server) provides `name`
    /// of `domain` with type `on`, or (`None`) no longer does: the hub
    /// hears of it when the first comes and when the last goes.
    pub(crate) fn provider(
        &self,
        kind: Provided,
        domain: Domain,
        name: String,
        who: String,
        on: Option<String>,
    ) {
        let mut t = self.tables();
        self.provider_epoch.fetch_add(1, Ordering::AcqRel);
        let cost = key_cost(&name, &who);
        let peer = peer_of(&who);
        let key = (kind, domain, name);
        let change = match on {
            Some(ty) => {
                if t.entries >= MAX_REMOTE_INTEREST
                    || key.2.len() > MAX_NAME_BYTES
                    || ty.len() > MAX_NAME_BYTES
                {
                    t.ignore();
                    return;
                }
                let map = t.providers.entry(key.clone()).or_default();
                let first = !map.keys().any(|w| peer_of(w) == peer);
                let before = map.insert(who, ty.clone());
                match &before {
                    None => {
                        t.entries += 1;
                        t.bytes += cost + ty.len();
                    }
                    Some(b) => t.bytes = t.bytes - b.len() + ty.len(),
                }
                first.then_some(Some(ty))
            }
            None => {
                let Some(map) = t.providers.get_mut(&key) else {
                    return;
                };
                let removed = map.remove(&who);
                let last = removed.is_some() && !map.keys().any(|w| peer_of(w) == peer);
                if map.is_empty() {
                    t.providers.remove(&key);
                }
                if let Some(ty) = removed {
                    t.entries -= 1;
                    t.bytes -= cost + ty.len();
                }
                last.then_some(None)
            }
        };
        if let Some(ty) = change {
            t.changes
                .push(Change::Provider(key.0, key.1, key.2, ty, peer));
            drop(t);
            self.wake();
        }
    }

    /// Mail from another gateway (`mail.rs`): calls of services provided
    /// here and answers to calls forwarded from here (`calls.rs`).
    pub(crate) fn on_mail(&self, s: &Sample) {
        let present = |gw: &str| self.tables().gateways.contains_key(gw);
        self.calls
            .on_mail(&s.payload().to_bytes(), present, valid_msg);
    }

    /// The gateway a call of `service` in `domain` goes to: of those that
    /// provide it, the one with the lowest Zenoh id (every caller picks the
    /// same), or none.
    pub(crate) fn gateway_for(&self, domain: Domain, service: &str) -> Option<Arc<str>> {
        let t = self.tables();
        let key = (Provided::Service, domain, service.to_string());
        t.providers
            .get(&key)?
            .keys()
            .find(|w| peer_of(w) == PeerId::Gateways)
            .map(|w| Arc::from(w.as_str()))
    }

    /// A goal from another gateway for an action served here: kept until
    /// its result comes back ([`Shared::goal_update`]), handed to the loop
    /// as a goal of the bridge. The payload is
    /// `{"args":..,"action_type":"..","origin":"<gateway>/<goal id>"}`.
    pub(crate) fn on_goal(&self, domain: Domain, action: &str, q: Query) {
        #[derive(serde::Deserialize)]
        struct Goal<'a> {
            #[serde(borrow)]
            args: &'a serde_json::value::RawValue,
            action_type: String,
            origin: String,
        }
        let payload = q
            .payload()
            .map(|p| p.to_bytes().into_owned())
            .unwrap_or_default();
        let parsed = serde_json::from_slice::<Goal<'_>>(&payload)
            .ok()
            .and_then(|g| Some((valid_msg(g.args.get().as_bytes())?, g.action_type, g.origin)));
        let Some((args, ty, origin)) = parsed else {
            let _ = q.reply_err("not a goal of a rosgate gateway").wait();
            return;
        };
        let Some(n) = self.keep_query(q) else {
            return;
        };
        self.origins
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(origin, n);
        let action = action.to_string();
        let sent = self.inbox.send(move |hub, now| {
            let args = Raw::from_valid_json(&args);
            let id = goal_id(n);
            let goal = RemoteGoal {
                action: &action,
                id: &id,
                ty: &ty,
                args,
            };
            hub.remote_goal(PeerId::Gateways, domain, goal, now);
        });
        if !sent {
            if let Some(q) = self.take_query(n) {
                let _ = q
                    .reply_err("the action server's gateway is too busy")
                    .wait();
            }
        }
    }

    /// A cancel from another gateway for a goal it sent here (`origin`).
    pub(crate) fn on_cancel(&self, domain: Domain, action: &str, s: &Sample) {
        let origin = String::from_utf8_lossy(&s.payload().to_bytes()).into_owned();
        let n = self
            .origins
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&origin)
            .copied();
        if let Some(n) = n {
            let action = action.to_string();
            let sent = self.inbox.send(move |hub, now| {
                hub.remote_cancel(PeerId::Gateways, domain, &action, &goal_id(n), now)
            });
            if !sent {
                self.inbox.drop_one();
            }
        }
    }

    /// Feedback (`result` None) or the result of the goal the bridge sent
    /// as `id`: replied to the goal's query; the result ends it.
    pub(crate) fn goal_update(&self, id: &str, values: &str, result: Option<(&str, &str)>) {
        let Some(n) = id
            .strip_prefix("\"fg")
            .and_then(|r| r.strip_suffix('"'))
            .and_then(|r| r.parse::<u64>().ok())
        else {
            return;
        };
        let payload = match result {
            None => format!("{{\"feedback\":{values}}}"),
            Some((status, ok)) => {
                format!(
                    "{{\"result\":{{\"values\":{values},\"status\":{status},\"result\":{ok}}}}}"
                )
            }
        };
        let q = if result.is_some() {
            self.origins
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .retain(|_, &mut v| v != n);
            self.take_query(n)
        } else {
            None
        };
        match q {
            Some(q) => {
                let _ = q.reply(q.key_expr().clone(), payload).wait();
            }
            None => {
                let qs = self.queries.lock().unwrap_or_else(|p| p.into_inner());
                if let Some(q) = qs.get(&n) {
                    let _ = q.reply(q.key_expr().clone(), payload).wait();
                }
            }
        }
    }

    /// A reply to a goal this gateway's bridge forwarded (feedback or the
    /// result), or (`None`) the end of its query: handed to the loop as the
    /// bridge's `action_feedback` / `action_result` for goal `id`. Returns
    /// whether the goal ended.
    pub(crate) fn on_goal_reply(
        &self,
        domain: Domain,
        action: &str,
        id: &str,
        reply: Option<&Reply>,
    ) -> bool {
        let (line, ended) = match reply.map(Reply::result) {
            Some(Ok(sample)) => match goal_line(action, id, &sample.payload().to_bytes()) {
                Some(x) => x,
                None => (
                    aborted_line(action, id, "the action server's gateway sent an invalid reply"),
                    true,
                ),
            },
            Some(Err(e)) => {
                let why = String::from_utf8_lossy(&e.payload().to_bytes()).into_owned();
                let why = format!("the action server's gateway refused the goal: {why}");
                (aborted_line(action, id, &why), true)
            }
            None => (
                aborted_line(
                    action,
                    id,
                    "the action server's gateway did not answer (it left, or the goal ended there without a result)",
                ),
                true,
            ),
        };
        self.inbox.reply_line(domain, line);
        ended
    }

    /// Keeps `q` under a fresh number, or refuses it (too many).
    fn keep_query(&self, q: Query) -> Option<u64> {
        let n = self.next_query.fetch_add(1, Ordering::Relaxed);
        let mut qs = self.queries.lock().unwrap_or_else(|p| p.into_inner());
        if qs.len() >= MAX_REMOTE_CALLS {
            drop(qs);
            let _ = q
                .reply_err("the gateway has too many goals from other gateways in progress")
                .wait();
            return None;
        }
        qs.insert(n, q);
        Some(n)
    }

    fn take_query(&self, n: u64) -> Option<Query> {
        self.queries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&n)
    }

    /// A sample of a topic this gateway wants: one message, or a turn's
    /// run of them joined by `\n` (`mod.rs`, `Batch`); each validated
    /// here, on Zenoh's thread, then all handed to the loop in one job.
    pub(crate) fn on_sample(&self, domain: Domain, topic: &str, s: &Sample) {
        if self.inbox.is_full() {
            self.inbox.drop_one();
            return;
        }
        let payload = s.payload().to_bytes();
        let mut msgs = Vec::new();
        for piece in payload.split(|&b| b == b'\n') {
            match valid_msg(piece) {
                Some(m) => msgs.push(m),
                None => self.inbox.drop_one(),
            }
        }
        let latched = s.attachment().and_then(|a| {
            let a = a.to_bytes();
            let depth = std::str::from_utf8(&a)
                .ok()?
                .strip_prefix(crate::LATCHED_ATTACHMENT)?
                .parse::<u32>()
                .ok()?;
            Some(depth.clamp(1, rosgate_wire::qos::MAX_QOS_DEPTH))
        });
        self.inbox.deliver_many(domain, topic, msgs, latched);
    }

    /// Transitions since the last call, in the order they came.
    pub(crate) fn take_changes(&self) -> Vec<Change> {
        if !self.changed.swap(false, Ordering::AcqRel) {
            return Vec::new();
        }
        std::mem::take(&mut self.tables().changes)
    }

    /// Announcements ignored since the last call.
    pub(crate) fn take_ignored(&self) -> u64 {
        std::mem::take(&mut self.tables().ignored_new)
    }

    /// What the tables here hold, in bytes, as the memory ledger counts
    /// them (the samples waiting for the loop are the inbox's).
    pub(crate) fn held_bytes(&self) -> usize {
        let t = self.tables();
        t.bytes + t.graph_bytes
    }

    /// The network side of `/rosgate/federation`.
    pub(crate) fn status_json(&self, wanted: usize) -> String {
        let (calls_out, calls_in) = self.calls.in_flight();
        let t = self.tables();
        let gateways: Vec<serde_json::Value> = t
            .gateways
            .iter()
            .map(|(id, since)| serde_json::json!({"id": id, "since_ms": since}))
            .collect();
        serde_json::json!({
            "gateway": self.zid,
            "gateways": gateways,
            "topics_wanted_here": wanted,
            "remote_interest_entries": t.entries,
            "remote_services": t.providers.len(),
            "remote_calls_in_progress": calls_in,
            "remote_goals_in_progress": self.queries.lock().map_or(0, |q| q.len()),
            "calls_to_gateways_in_progress": calls_out,
            "gateways_joined": t.joined,
            "gateways_left": t.left,
            "announcements_ignored": t.ignored,
            "samples_received": self.inbox.received(),
            "samples_dropped": self.inbox.dropped_total(),
            "inbox_bytes": self.inbox.pending_bytes(),
        })
        .to_string()
    }
}

/// `payload` as one JSON value the wire decoder accepts (the same checks
/// as a client's `msg`: UTF-8, depth, numbers), with raw CR and LF (JSON
/// whitespace) blanked so it cannot split an NDJSON line.
fn valid_msg(payload: &[u8]) -> Option<String> {
    const HEAD: &str = "{\"op\":\"publish\",\"topic\":\"/x\",\"msg\":";
    let text = std::str::from_utf8(payload).ok()?;
    let blanked;
    let text = if text.bytes().any(|b| b == b'\n' || b == b'\r') {
        blanked = text.replace(['\n', '\r'], " ");
        blanked.as_str()
    } else {
        text
    };
    let mut line = String::with_capacity(HEAD.len() + text.len() + 1);
    line.push_str(HEAD);
    line.push_str(text);
    line.push('}');
    match decode::decode(line.as_bytes()) {
        Ok(Request {
            op: Op::Publish { msg, .. },
            ..
        }) if msg.get() == text => Some(text.to_string()),
        _ => None,
    }
}

/// Which kind of peer an entry of `providers` is: a ROS 2 node's names
/// start with the ROS 2 graph's name (`ROS_GRAPH` in `ros2/mod.rs`), a
/// gateway's is its Zenoh id (hexadecimal).
fn peer_of(who: &str) -> PeerId {
    if who.starts_with("ros2:") {
        PeerId::Ros2
    } else {
        PeerId::Gateways
    }
}

/// The id the bridge sends goal `n` with: a JSON string.
fn goal_id(n: u64) -> String {
    format!("fg{n}")
}

/// The bridge's `action_feedback` or `action_result` for goal `id` (raw
/// JSON) of `action` from another gateway's reply `{"feedback":..}` or
/// `{"result":{"values":..,"status":..,"result":..}}`; whether it ends the
/// goal. The id goes last, so a reply cannot name another goal.
fn goal_line(action: &str, id: &str, payload: &[u8]) -> Option<(String, bool)> {
    use serde_json::value::RawValue;
    #[derive(serde::Deserialize)]
    struct GoalReply<'a> {
        #[serde(borrow)]
        feedback: Option<&'a RawValue>,
        #[serde(borrow)]
        result: Option<&'a RawValue>,
    }
    #[derive(serde::Deserialize)]
    struct Ended<'a> {
        #[serde(borrow)]
        values: &'a RawValue,
        #[serde(borrow)]
        status: &'a RawValue,
        #[serde(borrow)]
        result: &'a RawValue,
    }
    let text = valid_msg(payload)?;
    let reply: GoalReply<'_> = serde_json::from_str(&text).ok()?;
    let name = serde_json::Value::from(action);
    // Values travel as the server wrote them (raw spans, not re-encoded).
    let (line, ended) = match (reply.feedback, reply.result) {
        (Some(f), None) => (
            format!(
                "{{\"op\":\"action_feedback\",\"action\":{name},\"values\":{},\"id\":{id}}}",
                f.get()
            ),
            false,
        ),
        (None, Some(r)) => {
            let r: Ended<'_> = serde_json::from_str(r.get()).ok()?;
            (
                format!(
                    "{{\"op\":\"action_result\",\"action\":{name},\"values\":{},\"status\":{},\"result\":{},\"id\":{id}}}",
                    r.values.get(),
                    r.status.get(),
                    r.result.get()
                ),
                true,
            )
        }
        _ => return None,
    };
    match decode::decode(line.as_bytes()) {
        Ok(Request { id: Some(got), .. }) if got.get() == id => Some((line, ended)),
        _ => None,
    }
}

/// What an interest or provider entry costs in the ledger: its names and
/// [`TABLE_ENTRY_COST`].
fn key_cost(name: &str, who: &str) -> usize {
    name.len() + who.len() + TABLE_ENTRY_COST
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::{valid_msg, Change, PeerId, Provided, Shared};

    /// The hub learns, per kind of peer, the first provider and the last
    /// going: a gateway's provider does not hide that ROS 2 provides the
    /// same service, nor the other way round.
    #[test]
    fn provider_changes_name_the_peer_first_and_last_of_its_kind() {
        let inbox = rosgate_peers::Inbox::new(std::sync::Arc::new(|_: crate::Job| true));
        let s = Shared::new("me".into(), std::sync::Arc::new(inbox));
        let ty = || Some("pkg/srv/Add".to_string());
        let svc = || "/add".to_string();
        s.provider(Provided::Service, 0, svc(), "aa11".into(), ty());
        s.provider(Provided::Service, 0, svc(), "bb22".into(), ty());
        s.provider(Provided::Service, 0, svc(), "ros2:n1".into(), ty());
        s.provider(Provided::Service, 0, svc(), "ros2:n2".into(), ty());
        let add = |peer| Change::Provider(Provided::Service, 0, svc(), ty(), peer);
        assert_eq!(
            s.take_changes(),
            vec![add(PeerId::Gateways), add(PeerId::Ros2)]
        );
        s.provider(Provided::Service, 0, svc(), "ros2:n1".into(), None);
        s.provider(Provided::Service, 0, svc(), "aa11".into(), None);
        assert!(s.take_changes().is_empty(), "one of each kind is left");
        s.provider(Provided::Service, 0, svc(), "ros2:n2".into(), None);
        let gone = |peer| Change::Provider(Provided::Service, 0, svc(), None, peer);
        assert_eq!(s.take_changes(), vec![gone(PeerId::Ros2)]);
        s.provider(Provided::Service, 0, svc(), "bb22".into(), None);
        assert_eq!(s.take_changes(), vec![gone(PeerId::Gateways)]);
    }

    /// The ROS 2 side names its providers after its graph (`ROS_GRAPH`).
    #[cfg(feature = "ros2")]
    #[test]
    fn ros2_providers_are_the_ros2_peers() {
        let who = format!("{}:node", crate::ROS_GRAPH);
        assert_eq!(super::peer_of(&who), PeerId::Ros2);
        assert_eq!(super::peer_of("0123abcd"), PeerId::Gateways);
    }

    #[test]
    fn only_one_valid_json_value_passes_and_line_breaks_are_blanked() {
        assert_eq!(
            valid_msg(br#"{"data":1}"#).as_deref(),
            Some(r#"{"data":1}"#)
        );
        assert_eq!(valid_msg(b"{\"a\":\n1}").as_deref(), Some("{\"a\": 1}"));
        for bad in [
            &b""[..],
            b"{",
            b"{\"a\":1}}",
            b"{\"a\":1},\"op\":\"x\"",
            b"\xff",
            b"{\"a\":1e999}",
        ] {
            assert_eq!(valid_msg(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }
}
