//! `Hub`: the sans-io core. Bytes and `now` in, queued frames and close
//! decisions out. It owns the connection slab and the owners of every
//! other table: the [`Registry`] (topics, services), the [`Calls`] (calls in
//! flight and their deadlines) and the [`Counters`]; it never touches a
//! socket or reads the clock.
//!
//! `Hub`'s public methods are the I/O shell's contract. The mio loop (the
//! `rosgate` crate's `server.rs`) calls:
//! 1. at start: `new`, `set_graph_settings`, `set_ws_status`,
//!    `set_access`, `set_http_settings`, `set_param_overrides`,
//!    `enable_federation` (with `--federation`);
//! 2. `open_from` for each accepted socket (`open_foxglove_from` on the
//!    Foxglove listener, `hub/foxglove.rs`; a `Refusal` to send and drop),
//!    `on_bytes` for what was read, `on_eof`/`close` when the peer goes
//!    away or I/O fails;
//! 3. `expire(now)` once per loop turn (call deadlines, write stalls, the
//!    memory budget, the turn's graph and QoS news), sleeping until
//!    `next_deadline` unless `has_backlog`;
//! 4. `take_dirty` (`has_dirty`, `mark_dirty`) then `out`/`wrote` to
//!    flush queued output;
//! 5. `take_closing` then `free_some` (bounded work a turn) for
//!    connections marked closed; `shrink_tables` when idle;
//! 6. `begin_shutdown`, `close_drained` until `conn_count` is 0;
//! 7. what it reads: `conn`, `conn_count`, `conn_keys`, `memory`,
//!    `counters`, `work` (the read budget), `stats_json`, and `count` for
//!    what it observed itself (accept errors).
//!
//! `open` and `open_as` (a peer without a per-address limit) and `free`
//! (all at once) are the same entry points in the simpler form the
//! simulation, the benches and the tests drive the hub with. Two narrow
//! facades sit beside the contract:
//! - the network side's: `bridges()`, everything a peer network (the
//!   Zenoh crate: other gateways, ROS 2 graphs) may make the hub do, over
//!   crate-private methods of `federation.rs`, `bridge_out.rs`,
//!   `topics.rs` and `types.rs` (`bridges.rs`);
//! - the simulation's and the tests' inspection: `inspect()`, a read-only
//!   view of the tables (`inspect.rs`, behind the `inspect` feature).
//!
//! Invariants:
//! - closes are deferred: `close` only marks; `free` asks each owner to
//!   drop the connection (`Registry::withdraw`, `Calls::drop_conn`), fails
//!   the calls waiting on it and releases the slab slot (P13, P14, cleanup);
//! - everything clients make the gateway hold is in the memory ledger
//!   (`memory.rs`) at all times, and above `max_memory_bytes` topic data is
//!   shed, then the biggest holders are closed (P17);
//! - no connection holds a slot without completing its opening in time,
//!   and at the connection limit the oldest unfinished opening gives way
//!   to a newcomer (P21);
//! - every call gets exactly one response: answered, or failed by missing
//!   provider, provider gone, unadvertise, timeout or the in-flight limit;
//!   the caller's original id bytes are used, and a response completes a call
//!   only when it comes from the very connection the call was forwarded to;
//! - a publish is encoded once and its bytes shared by all subscribers;
//! - a slow subscriber never blocks anyone: topic frames are shed (P5),
//!   control overflow closes only that connection (P6).

mod actions;
mod answer;
mod auth;
mod batch;
mod bridge_out;
mod bridges;
mod clients;
mod encodings;
mod federation;
mod foxglove;
mod foxglove_actions;
mod foxglove_assets;
mod fragments;
mod graph;
mod http;
#[cfg(any(test, feature = "inspect"))]
mod inspect;
mod params;
mod params_remote;
mod qos;
mod raw_publish;
mod rosapi;
mod services;
mod tf;
mod topics;
mod types;
mod waiting;

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant, UNIX_EPOCH};

use slab::Slab;

use rosgate_wire::decode::{self, DecodeError, Op, Request};
use rosgate_wire::encode::Level;
use rosgate_wire::ws::handshake::Opening;
use rosgate_wire::Raw;

pub use auth::{AUTH_RELEASES_PER_TURN, MAX_AUTH_HELD};
pub use bridges::Bridges;
pub use federation::{
    Forward, InterestChange, Offer, RemoteGoal, RemoteGraph, MAX_FORWARD_BYTES,
    MAX_REMOTE_GRAPH_BYTES_TOTAL, MAX_REMOTE_GRAPH_ITEMS, MAX_REMOTE_GRAPH_ITEMS_PER_GATEWAY,
    MAX_REMOTE_GRAPH_ITEMS_TOTAL,
};
pub use foxglove_assets::{AssetSource, MAX_FOXGLOVE_ASSET_BYTES};
pub use graph::{
    GraphSettings, CLIENT_COUNT, CLOCK, CONNECTED_CLIENTS, CONNECTED_CLIENTS_INTERVAL,
    GATEWAY_NODE, GATEWAY_TOPICS, GRAPH_TOPIC, MAX_GRAPH_EVENTS, MAX_NODES_PER_CONN, ROSOUT,
    ROSOUT_PER_SEC,
};
pub use http::{Asset, HttpSettings};
#[cfg(any(test, feature = "inspect"))]
pub use inspect::Inspect;
pub use params::{MAX_PARAM_NAME_CHARS, NODE_PARAM_SERVICES, PARAMETER_EVENTS, VALIDATE_SERVICE};
pub use qos::{LATCH_BYTES_PER_PUBLISHER, LATCH_BYTES_TOTAL, MIN_THROTTLE_MS};
pub use rosapi::{
    CONNECTIONS_SERVICE, FEDERATION_SERVICE, MAX_LIST_ITEMS, MAX_LIST_SCAN, ROSAPI_PREFIX,
    ROSAPI_SERVICES, STATS_SERVICE, TOPIC_INFO_SERVICE, TOPIC_STATS_SERVICE,
};
pub use services::CallFailure;
pub use tf::{
    MAX_TF_FRAMES_LISTED, REPUBLISH_TFS_SERVICE, REPUBLISH_TFS_TYPE, TF_ACTION, TF_ACTION_TYPE,
    TF_FRAMES_SERVICE,
};
pub(crate) use topics::Origin;
pub use topics::TypeCheck;

use crate::access::{Access, Class};
use crate::calls::Call;
use crate::calls::{CallKind, Calls};
use crate::conn::{CloseReason, Conn, ConnRef};
use crate::counters::{Counter, Counters, ErrorCode, Gauge, Gauges};
use crate::encoding::Encoding;
use crate::limits::{
    Limits, EXPIRE_BUDGET, GONE_FAILS_PER_TURN, REGISTRATION_WORK, SHED_ENTRIES_PER_PASS,
};
use crate::log::{self, LogLevel};
use crate::memory::{Ledger, MemoryUse, TARGET_DEN, TARGET_NUM};
use crate::nodes::{Domain, Nodes, DOMAINS};
use crate::out::{OutQueue, ENTRY_COST};
use crate::ratelimit::RateLimit;
use crate::registry::{Registries, Registry, Role};
use crate::transport::{Inbound, StatusFilter, Transport};

/// Names under this prefix are the gateway's own services.
pub const RESERVED_PREFIX: &str = "/rosgate/";

/// See the module docs.
#[derive(Debug)]
pub struct Hub {
    limits: Limits,
    conns: Slab<Conn>,
    next_gen: u32,
    /// Topics and services, one registry per domain.
    registries: Registries,
    /// Nodes connections declared.
    nodes: Nodes,
    calls: Calls,
    counters: Counters,
    /// Connections with output queued since the last `take_dirty`.
    dirty: Vec<u32>,
    /// Connections marked closed since the last `take_closing`.
    closing: Vec<u32>,
    /// Reused frame-building buffer.
    scratch: Vec<u8>,
    next_sweep: Instant,
    /// Connection log lines and the recent closes.
    client_log: clients::ClientLog,
    /// Statuses sent to WebSocket clients (`--ws-status`).
    ws_status: StatusFilter,
    /// Publishes read but not yet queued to subscribers (same turn).
    batch: batch::PublishBatch,
    /// ROS 2 types client publishes must fit (the router checks them).
    checks: topics::TypeChecks,
    /// What the hub itself accounts of the memory budget.
    mem: Ledger,
    /// Connections that had not completed their opening when admitted, in
    /// arrival order (entries that since opened or left are skipped).
    pending: VecDeque<ConnRef>,
    /// Connections that have not completed their opening, now.
    pending_count: usize,
    /// Marked closing and not yet freed.
    closing_count: usize,
    /// Open connections per limited (non-loopback) peer address.
    per_ip: HashMap<IpAddr, usize>,
    /// Shutting down: input is ignored, output drains.
    draining: bool,
    /// Domains, names, sim time, the wall clock.
    settings: GraphSettings,
    /// What the gateway publishes about the graph, waiting for the turn's end.
    graph: graph::GraphPending,
    /// `/rosout` lines per second.
    rosout_limit: RateLimit,
    /// Work of registration changes (see [`Hub::work`]).
    registration_work: u64,
    /// Parameters of every domain, and validations in progress.
    params: params::Params,
    /// rosapi parameter requests forwarded to the node that owns them.
    remote_params: params_remote::RemoteParams,
    /// Throttle flushes and peer counts waiting for their time.
    qos_timers: qos::QosTimers,
    /// TF: the buffers and the republisher's subscriptions (`tf.rs`).
    tf: tf::TfState,
    /// Calls and goals waiting for a provider.
    waiting: waiting::Waiting,
    /// Bridges to other gateways and the interest announced to them.
    fed: federation::Federation,
    /// What the HTTP side serves (dashboard files, version).
    http: http::HttpSettings,
    /// When the hub was made (the gateway's start).
    started: Instant,
    /// Tokens, roles and their allowlists, allowed origins.
    access: Access,
    /// Wrong tokens per address (token guessing).
    auth_budget: crate::auth_budget::AuthBudget,
    /// Token attempts from locked addresses, held until their refusal.
    held: auth::HeldAttempts,
    /// Calls taken from a provider that left or withdrew them, failed to
    /// their callers at most [`GONE_FAILS_PER_TURN`] a turn, in order.
    gone: VecDeque<(Call, CallFailure)>,
    /// Bytes of the calls in `gone` (in the memory budget's calls).
    gone_bytes: usize,
    /// Failures sent from `gone` this turn.
    gone_sent: usize,
    /// This turn's `/metrics` answer, shared by its scrapes (`hub/http.rs`).
    metrics_turn: Option<std::rc::Rc<[u8]>>,
    /// The interface types known (`types.rs`).
    types: types::Types,
    /// The `id` of the last message sent in `fragment` frames
    /// (`encodings.rs`): each such message has its own, from 1.
    fragment_ids: u64,
    /// Connections that became Foxglove sessions (`hub/foxglove.rs`),
    /// those gone pruned as they are met.
    foxglove_conns: Vec<ConnRef>,
    /// Where Foxglove `fetchAsset` reads files (`foxglove_assets.rs`):
    /// none, no `assets` capability.
    foxglove_assets: Option<Box<dyn AssetSource>>,
    /// Connections with fragmented messages in flight (`fragments.rs`).
    fragments: fragments::Fragments,
    /// The shell's clock for cost counters only (`encodings.rs`).
    cost_clock: Option<fn() -> Instant>,
    /// The binary encoders' buffer, kept between messages (`encodings.rs`,
    /// at most `MAX_ENCODE_SCRATCH_BYTES`).
    encode_scratch: Vec<u8>,
}

/// Why a connection was not admitted: what to send it, and the reason.
#[derive(Debug)]
pub struct Refusal {
    pub reason: CloseReason,
    /// Bytes to send before dropping the socket.
    pub frame: Vec<u8>,
}

impl Hub {
    pub fn new(limits: Limits, now: Instant) -> Self {
        let limits_budget = limits.auth_failure_budget;
        Hub {
            calls: Calls::new(now),
            next_sweep: now + sweep_interval(&limits),
            limits,
            conns: Slab::new(),
            next_gen: 0,
            registries: Registries::new(DOMAINS),
            nodes: Nodes::new(),
            counters: Counters::default(),
            dirty: Vec::new(),
            closing: Vec::new(),
            scratch: Vec::with_capacity(4096),
            client_log: clients::ClientLog::new(),
            ws_status: StatusFilter::Errors,
            batch: batch::PublishBatch::default(),
            checks: topics::TypeChecks::default(),
            mem: Ledger::default(),
            pending: VecDeque::new(),
            pending_count: 0,
            closing_count: 0,
            per_ip: HashMap::new(),
            draining: false,
            settings: GraphSettings::new(now, UNIX_EPOCH),
            graph: graph::GraphPending::new(now),
            rosout_limit: RateLimit::new(graph::ROSOUT_PER_SEC),
            registration_work: 0,
            params: params::Params::default(),
            remote_params: params_remote::RemoteParams::default(),
            qos_timers: qos::QosTimers::new(now),
            tf: tf::TfState::new(now),
            waiting: waiting::Waiting::new(now),
            fed: federation::Federation::default(),
            http: http::HttpSettings::default(),
            started: now,
            access: Access::default(),
            auth_budget: crate::auth_budget::AuthBudget::new(limits_budget),
            held: auth::HeldAttempts::default(),
            gone: VecDeque::new(),
            gone_bytes: 0,
            gone_sent: 0,
            metrics_turn: None,
            types: types::Types::default(),
            fragment_ids: 0,
            foxglove_conns: Vec::new(),
            foxglove_assets: None,
            fragments: fragments::Fragments::default(),
            cost_clock: None,
            encode_scratch: Vec::new(),
        }
    }

    /// Sets how the graph behaves (domains per listener, name rules, sim
    /// time, the wall clock for stamps).
    pub fn set_graph_settings(&mut self, settings: GraphSettings) {
        self.settings = settings;
    }

    /// What the memory budget covers, now.
    pub fn memory(&self) -> MemoryUse {
        MemoryUse {
            frames: self.mem.frames,
            entries: self.mem.entries,
            control: self.mem.control,
            input: self.mem.input,
            calls: self.calls.bytes() + self.waiting.bytes() + self.gone_bytes,
            registrations: self.registries.bytes() + self.nodes.bytes() + self.params.bytes(),
            federation: self.federation_bytes(),
            tf: self.tf.bytes(),
        }
    }

    /// Which statuses WebSocket connections opened from now on receive.
    pub fn set_ws_status(&mut self, filter: StatusFilter) {
        self.ws_status = filter;
    }

    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Work done so far, in units of about one delivery (60-100 ns): lines
    /// handled, messages delivered, entries listed by introspection, and
    /// [`REGISTRATION_WORK`] per registration change. The shell bounds each
    /// loop turn's reading by it (P20).
    pub fn work(&self) -> u64 {
        let c = &self.counters;
        c.get(Counter::Delivered)
            + c.get(Counter::LinesIn)
            + c.get(Counter::IntrospectionItems)
            + self.registration_work
    }

    /// Counts one registration change's work (see [`Hub::work`]).
    pub(crate) fn charge_registration(&mut self) {
        self.registration_work += REGISTRATION_WORK;
    }

    /// Counts `n` events the shell observed (federation traffic).
    pub(crate) fn count_n(&mut self, c: Counter, n: u64) {
        self.counters.add(c, n);
    }

    /// Counts an event the shell observed (accept errors).
    pub fn count(&mut self, c: Counter) {
        self.counters.inc(c);
    }

    /// The declared nodes (the ROS 2 bridge mirrors them).
    pub(crate) fn nodes(&self) -> &Nodes {
        &self.nodes
    }

    pub fn conn(&self, key: u32) -> Option<&Conn> {
        self.conns.get(key as usize)
    }

    pub fn conn_count(&self) -> usize {
        self.conns.len()
    }

    pub fn conn_keys(&self) -> impl Iterator<Item = u32> + '_ {
        self.conns.iter().map(|(k, _)| k as u32)
    }

    /// Gauges read from the tables.
    fn gauges(&self) -> Gauges {
        let mut g = Gauges::default();
        g.set(Gauge::ConnectionsOpen, self.conns.len() as u64);
        let sum = |f: fn(&Registry) -> usize| self.registries.iter().map(f).sum::<usize>() as u64;
        g.set(Gauge::Topics, sum(Registry::topic_count));
        g.set(Gauge::Subscriptions, sum(Registry::subscription_count));
        g.set(Gauge::Publishers, sum(Registry::publisher_count));
        g.set(Gauge::Services, sum(Registry::service_count));
        g.set(Gauge::Actions, sum(Registry::action_count));
        g.set(Gauge::Nodes, self.nodes.len() as u64);
        g.set(Gauge::Parameters, self.params.count() as u64);
        let domains = (0..DOMAINS as u16)
            .filter(|&d| self.graph.clients(d as Domain) > 0)
            .count();
        g.set(Gauge::Domains, domains as u64);
        g.set(Gauge::CallsPending, self.calls.len() as u64);
        g.set(Gauge::GoalsPending, self.calls.goal_count() as u64);
        g.set(Gauge::CallsWaiting, self.waiting.len() as u64);
        g.set(Gauge::QueuedBytes, self.mem.queued as u64);
        g.set(Gauge::ConnectionsPending, self.pending_count as u64);
        g.set(
            Gauge::FoxgloveSessions,
            self.foxglove_session_count() as u64,
        );
        let m = self.memory();
        g.set(Gauge::MemoryBytes, m.total() as u64);
        g.set(
            Gauge::MemoryBudgetBytes,
            self.limits.max_memory_bytes as u64,
        );
        g.set(Gauge::MemoryFramesBytes, m.frames as u64);
        g.set(Gauge::MemoryEntriesBytes, m.entries as u64);
        g.set(Gauge::MemoryControlBytes, m.control as u64);
        g.set(Gauge::MemoryInputBytes, m.input as u64);
        g.set(Gauge::MemoryCallsBytes, m.calls as u64);
        g.set(Gauge::MemoryRegistrationsBytes, m.registrations as u64);
        g.set(Gauge::MemoryFederationBytes, m.federation as u64);
        g.set(Gauge::MemoryTfBytes, m.tf as u64);
        g.set(Gauge::StartTimeSeconds, self.wall(self.started).0);
        g
    }

    /// Counters and gauges as one JSON object.
    pub fn stats_json(&self) -> String {
        self.counters.to_json(&self.gauges())
    }

    // ----- connection life cycle -------------------------------------------------

    /// Admits a new TCP connection (see [`Hub::open_from`]).
    pub fn open(&mut self, now: Instant) -> Option<ConnRef> {
        self.open_as(Transport::Tcp, now)
    }

    /// Admits a connection from the given listener whose peer is not
    /// limited per address (see [`Hub::open_from`]).
    pub fn open_as(&mut self, transport: Transport, now: Instant) -> Option<ConnRef> {
        self.open_from(transport, None, now).ok()
    }

    /// Admits a connection from the given listener and peer. At the
    /// connection limit the oldest connection that has not completed its
    /// opening is evicted to make room (P21); when there is none, or the
    /// peer (non-loopback) holds its limit, the newcomer is refused and the
    /// caller sends it [`Refusal::frame`] and drops the socket.
    pub fn open_from(
        &mut self,
        transport: Transport,
        peer: Option<SocketAddr>,
        now: Instant,
    ) -> Result<ConnRef, Refusal> {
        let limited = peer.map(|p| p.ip()).filter(|ip| !ip.is_loopback());
        if let Some(ip) = limited {
            if self.per_ip.get(&ip).copied().unwrap_or(0) >= self.limits.max_connections_per_ip {
                return Err(self.refuse(transport, CloseReason::PerIpLimit, now));
            }
        }
        if self.conns.len() - self.closing_count >= self.limits.max_connections
            && !self.evict_pending(now)
        {
            self.counters.inc(Counter::ConnectionsRejected);
            return Err(self.refuse(transport, CloseReason::MaxConnections, now));
        }
        self.next_gen = self.next_gen.wrapping_add(1);
        let gen = self.next_gen;
        let mut conn = Conn::new(gen, now, transport, self.ws_status, peer, limited);
        conn.set_domain(match transport {
            Transport::Tcp => self.settings.tcp_domain,
            Transport::WebSocket => self.settings.ws_domain,
        });
        if self.settings.strict_names {
            conn.set_resolves();
        }
        let key = self.conns.insert(conn) as u32;
        self.admit_role(key);
        if let Some(ip) = limited {
            *self.per_ip.entry(ip).or_default() += 1;
        }
        let me = ConnRef { key, gen };
        self.pending.push_back(me);
        self.pending_count += 1;
        if self.pending.len() > 2 * self.pending_count + 64 {
            // Amortised O(1): most entries opened or left long ago.
            let conns = &self.conns;
            self.pending.retain(|r| {
                conns
                    .get(r.key as usize)
                    .is_some_and(|c| c.gen() == r.gen && !c.is_established())
            });
        }
        self.counters.inc(Counter::ConnectionsAccepted);
        // A connection on the WebSocket port may turn out to be a plain
        // HTTP request (a scrape, a health check): it is logged as opened
        // when its upgrade completes.
        if transport == Transport::Tcp {
            self.log_open(me, now);
        }
        Ok(me)
    }

    fn refuse(&mut self, transport: Transport, reason: CloseReason, now: Instant) -> Refusal {
        self.counters.close(reason);
        self.log_refused(transport, reason, now);
        let frame = match reason {
            CloseReason::PerIpLimit => transport.refusal(
                503,
                "Service Unavailable",
                &format!(
                    "too many connections from your address (limit {}); try again later",
                    self.limits.max_connections_per_ip
                ),
            ),
            _ => self.rejection_frame(transport),
        };
        Refusal { reason, frame }
    }

    /// Closes the oldest open connection that has not completed its
    /// opening; false if there is none.
    fn evict_pending(&mut self, now: Instant) -> bool {
        while let Some(r) = self.pending.pop_front() {
            let waiting = self
                .conns
                .get(r.key as usize)
                .is_some_and(|c| c.gen() == r.gen && c.is_open() && !c.is_established());
            if waiting {
                self.close(r.key, CloseReason::Evicted, now);
                return true;
            }
        }
        false
    }

    /// Marks `me` as having completed its opening.
    fn establish(&mut self, me: ConnRef, now: Instant) {
        if let Some(c) = self.live_mut(me) {
            // With authentication on, the opening ends with a valid token.
            if !c.is_established() && c.is_authed() {
                c.establish();
                let ws = c.transport() != Transport::Tcp;
                self.pending_count -= 1;
                if ws {
                    self.log_open(me, now);
                }
                self.client_joined(me, now);
            }
        }
    }

    /// What a connection refused at the connection limit is sent before it
    /// is closed.
    fn rejection_frame(&self, transport: Transport) -> Vec<u8> {
        let msg = format!(
            "too many connections (limit {}); try again later",
            self.limits.max_connections
        );
        transport.refusal(503, "Service Unavailable", &msg)
    }

    /// Marks a connection closed; it is freed by `free` after this loop turn.
    pub fn close(&mut self, key: u32, reason: CloseReason, now: Instant) {
        let Some(c) = self.conns.get_mut(key as usize) else {
            return;
        };
        if !c.mark_closing(reason) {
            return;
        }
        // A federation link is established but was never a client.
        let (me, established, domain) = (
            ConnRef { key, gen: c.gen() },
            c.is_established() && !c.is_bridge(),
            c.domain(),
        );
        self.closing_count += 1;
        self.closing.push(key);
        self.counters.close(reason);
        self.note_closed(me, reason, now);
        // The graph loses it now: nothing reaches a closing connection.
        self.note_withdrawal(domain, me, None);
        self.peers_leaving(domain, me);
        self.interest_leaving(domain, me);
        self.services_leaving(domain, me);
        self.tf_conn_left(domain, me, now);
        let nodes: Vec<String> = self
            .nodes
            .of(me)
            .iter()
            .filter_map(|&k| self.nodes.get(crate::registry::NodeTag(k)))
            .map(|n| n.full_name().to_string())
            .collect();
        for n in nodes {
            self.note_node(domain, me, &n, false);
        }
        if established {
            self.client_left(me, reason.label(), reason.is_forced(), now);
        }
    }

    /// The peer closed its sending side. A final line without `\n` is
    /// ignored, as the protocol frames requests by newline.
    pub fn on_eof(&mut self, key: u32, now: Instant) {
        self.close(key, CloseReason::PeerClosed, now);
    }

    /// Connections marked closed since the last call.
    pub fn take_closing(&mut self, into: &mut Vec<u32>) {
        into.clear();
        std::mem::swap(into, &mut self.closing);
    }

    /// Withdraws everything `key` owned and frees its slot.
    pub fn free(&mut self, key: u32, now: Instant) {
        while let Freed::Partly(_) = self.free_some(key, now, usize::MAX) {}
    }

    /// Frees `key` with at most about `budget` work (a connection, each
    /// registration withdrawn, each call dropped), so the shell can bound
    /// the frees of one turn: a crowd holding a million registrations
    /// leaving at once must not stall the loop. A connection whose
    /// registrations exceed the budget is withdrawn over several calls; it
    /// is closed meanwhile, so nothing reaches it and its queue is gone.
    pub fn free_some(&mut self, key: u32, now: Instant, budget: usize) -> Freed {
        let Some(conn) = self.conns.get(key as usize) else {
            return Freed::Done(0);
        };
        let me = ConnRef {
            key,
            gen: conn.gen(),
        };
        let domain = conn.domain();
        let (all, withdrawn) = self
            .registries
            .update(domain, |r| r.withdraw_some(me, budget));
        if !all {
            self.release_queues(key);
            return Freed::Partly(withdrawn);
        }
        Freed::Done(withdrawn + self.free_rest(key, now))
    }

    /// Drops `key`'s queued output and buffered input from the ledger
    /// (idempotent).
    fn release_queues(&mut self, key: u32) {
        let Some(conn) = self.conns.get_mut(key as usize) else {
            return;
        };
        let entries = conn.out().entry_bytes();
        let (released, topic, control) = conn.clear_out();
        self.mem.entries_changed(entries, 0);
        self.mem.frames -= released;
        self.mem.control -= control;
        self.mem.queued -= topic + control;
    }

    /// The rest of a free once the registrations are withdrawn; returns its
    /// work (1 + calls dropped).
    fn free_rest(&mut self, key: u32, now: Instant) -> usize {
        self.release_queues(key);
        let Some(conn) = self.conns.get_mut(key as usize) else {
            return 0;
        };
        let me = ConnRef {
            key,
            gen: conn.gen(),
        };
        if !conn.mark_closing(CloseReason::Shutdown) {
            self.closing_count -= 1;
        }
        self.mem.input -= conn.input_held();
        if !conn.is_established() {
            self.pending_count -= 1;
        }
        if let Some(ip) = conn.limited_peer() {
            if let Some(n) = self.per_ip.get_mut(&ip) {
                *n -= 1;
                if *n == 0 {
                    self.per_ip.remove(&ip);
                }
            }
        }
        let domain = conn.domain();
        for (tag, node) in self.nodes.drop_conn(me) {
            self.drop_node_params(domain, node.full_name(), (me, tag), now);
        }
        let asked = self.calls.made_seqs(me);
        self.forget_validations(&asked);
        self.forget_remote_params(&asked);
        self.drop_waiting(me);
        let calls_before = self.calls.len();
        // Calls it made are forgotten (the providers' late answers are
        // stale), its goals' servers are told to cancel; calls and goals
        // waiting on it fail now (P13).
        let (served, orphaned) = self.calls.drop_conn(me, now + crate::calls::ORPHAN_TIMEOUT);
        self.fail_soon(served, CallFailure::ProviderGone, now);
        self.cancel_orphans(orphaned, now);
        self.conns.remove(key as usize);
        1 + calls_before.saturating_sub(self.calls.len())
    }

    // ----- input ---------------------------------------------------------------

    /// Feeds bytes read from `key`'s socket: its transport frames them into
    /// messages, and each is handled in order.
    pub fn on_bytes(&mut self, key: u32, bytes: &[u8], now: Instant) {
        self.counters.add(Counter::BytesIn, bytes.len() as u64);
        if self.draining {
            return;
        }
        let Some(conn) = self.conns.get_mut(key as usize) else {
            return;
        };
        // A held connection's input is ignored until its refusal.
        if !conn.is_open() || conn.is_held() {
            return;
        }
        let me = ConnRef {
            key,
            gen: conn.gen(),
        };
        // Taken out for the duration so handlers can borrow the hub.
        let mut link = conn.take_link();
        let max = self.limits.max_line_bytes;
        link.feed(bytes, max, |event| self.on_inbound(me, event, now));
        if let Some(conn) = self.conns.get_mut(key as usize) {
            if conn.gen() == me.gen {
                conn.restore_link(link);
                let delta = conn.after_input(now);
                self.mem.add_input(delta);
            }
        }
        self.flush_publishes(now);
        self.enforce_memory(now);
    }

    fn on_inbound(&mut self, me: ConnRef, event: Inbound<'_>, now: Instant) {
        match event {
            Inbound::Message(msg) => {
                self.establish(me, now);
                self.on_message(me, msg, now)
            }
            Inbound::TooLong => self.too_long(me, now),
            Inbound::Refused { code, msg } => {
                self.counters.inc(Counter::LinesIn);
                self.protocol_error(me, code, msg, None, now);
            }
            Inbound::Opened { response, opening } => self.on_opened(me, &response, &opening, now),
            Inbound::Reply(bytes) => self.send_raw(me, &bytes, now),
            Inbound::Http(req) => self.on_http(me, req, now),
            Inbound::FoxgloveText(msg) => self.foxglove_text(me, msg, now),
            Inbound::FoxgloveBinary(msg) => self.foxglove_binary(me, msg, now),
            Inbound::Close {
                reason,
                last,
                detail,
            } => {
                if reason == CloseReason::ProtocolError {
                    log::write(LogLevel::Debug, format_args!("conn={}: {detail}", me.key));
                }
                if let Some(last) = last {
                    self.send_raw(me, &last, now);
                }
                self.close(me.key, reason, now);
            }
        }
    }

    /// A WebSocket opening: the origin and token first, then what its URL
    /// asks for; the upgrade response, or a refusal and the close.
    fn on_opened(&mut self, me: ConnRef, response: &[u8], opening: &Opening, now: Instant) {
        if let Some(refusal) = self.foxglove_refusal(me, opening) {
            self.send_raw(me, &refusal, now);
            return self.close(me.key, CloseReason::ProtocolError, now);
        }
        let (refusal, reason) = match self.check_opening(me, opening, now) {
            Err(auth::OpeningRefused::Now(refusal, reason)) => (refusal, reason),
            Err(auth::OpeningRefused::Held) => return,
            Ok(()) => match self.apply_opening(me, opening, now) {
                Ok(node) => {
                    self.send_raw(me, response, now);
                    self.establish(me, now);
                    if let Some(protocol) = opening.foxglove {
                        self.foxglove_start(me, protocol, now);
                    }
                    if let Some(node) = node {
                        self.declare_opened(me, node, now);
                    }
                    return;
                }
                Err(refusal) => (refusal, CloseReason::ProtocolError),
            },
        };
        self.send_raw(me, &refusal, now);
        self.close(me.key, reason, now);
    }

    fn too_long(&mut self, me: ConnRef, now: Instant) {
        let msg = format!(
            "message longer than {} bytes; discarded",
            self.limits.max_line_bytes
        );
        self.protocol_error(me, ErrorCode::TooLong, &msg, None, now);
    }

    /// Handles one complete message (a line without its terminator).
    /// Inlined into `on_inbound`, the hot path, whatever its other callers
    /// (a reassembled fragment, a bridge's line): a call here cost a
    /// publish about 17 instructions (scripts/callgrind.sh).
    #[inline(always)]
    fn on_message(&mut self, me: ConnRef, line: &[u8], now: Instant) {
        let Some((dialect, at)) = self.live_mut(me).map(|c| {
            let at = Sender {
                domain: c.domain(),
                resolves: c.resolves(),
            };
            (c.policy().dialect(), at)
        }) else {
            return;
        };
        self.counters.inc(Counter::LinesIn);
        // Decoded with raw CRs and LFs read as spaces (they would split a
        // forwarded frame for NDJSON readers); lines without either (nearly
        // all) are not copied.
        decode::decode_blanked(line, dialect, |decoded| match decoded {
            // The hot path, on the request where it lies (it is moved only
            // into the general case): a plain publish goes to the router.
            Ok(ref req) if self.plain_publish(at, req) => {
                if let Op::Publish { ref topic, msg } = req.op {
                    let id = req.id.map(|r| r.get().as_bytes());
                    if raw_publish::maybe_cdr(msg) {
                        let origin = Origin::Client { conn: me, id };
                        return self.route_cdr(origin, at.domain, topic, msg, now);
                    }
                    self.route_client(me, id, at.domain, topic, msg, now)
                }
            }
            Ok(req) => self.apply(me, at, req, now),
            Err(e) => self.reject(me, &e, now),
        })
    }

    /// Sends the error status for a refused line.
    fn reject(&mut self, me: ConnRef, e: &DecodeError<'_>, now: Instant) {
        let msg = e.to_string();
        self.protocol_error(me, e.kind.into(), &msg, e.id, now);
    }

    /// Sends an error status with the raw id bytes `id` and counts it.
    pub(crate) fn error_with_id(
        &mut self,
        me: ConnRef,
        code: ErrorCode,
        msg: &str,
        id: Option<&[u8]>,
        now: Instant,
    ) {
        let raw = id
            .and_then(|b| std::str::from_utf8(b).ok())
            .map(Raw::from_valid_json);
        self.protocol_error(me, code, msg, raw, now);
    }

    /// Sends an error status and counts it under `code`.
    pub(crate) fn protocol_error(
        &mut self,
        me: ConnRef,
        code: ErrorCode,
        msg: &str,
        id: Option<Raw<'_>>,
        now: Instant,
    ) {
        self.counters.error(code);
        self.send_status(me, Level::Error, msg, id.map(|r| r.get().as_bytes()), now);
    }

    /// Whether `req` is a plain publish: no node named, no names to
    /// resolve, no tokens to check (the hot path, `on_message`).
    #[inline(always)]
    fn plain_publish(&self, at: Sender, req: &Request<'_>) -> bool {
        matches!(req.op, Op::Publish { .. })
            && !at.resolves
            && req.node.is_none()
            && !self.access.required()
    }

    /// Handles one decoded request but a plain publish. A publish goes to
    /// the router; anything else may be observed after the publishes read
    /// before it, so the batch is delivered first.
    #[inline(never)]
    fn apply(&mut self, me: ConnRef, at: Sender, req: Request<'_>, now: Instant) {
        if !matches!(req.op, Op::Publish { .. }) {
            self.flush_publishes(now);
        }
        let id = req.id.map(|r| r.get().as_bytes());
        if req.op.changes_registrations() {
            self.charge_registration();
        }
        let node = req.node.as_deref();
        if self.access.required() && !self.authed(me) {
            return match req.op {
                Op::Auth { token } => self.on_auth(me, token.as_deref(), id, now),
                _ => self.unauthenticated(me, id, now),
            };
        }
        match req.op {
            Op::Publish { topic, msg } => {
                let origin = Origin::Client { conn: me, id };
                if !at.resolves && node.is_none() {
                    if self.permit(me, Class::Publish, &topic, id, now) {
                        self.route_publish(origin, at.domain, &topic, msg, now)
                    }
                } else if let Some((domain, _, topic)) = self.resolve_for(me, &topic, node, id, now)
                {
                    if self.permit(me, Class::Publish, &topic, id, now) {
                        self.route_publish(origin, domain, &topic, msg, now)
                    }
                }
            }
            Op::Subscribe {
                topic,
                ty,
                qos,
                throttle_ms,
            } => {
                let (compression, fragment) = match &req.encoding {
                    Some(e) => (e.compression.as_deref(), e.fragment_size),
                    None => (None, None),
                };
                let encoding = match Encoding::asked(compression, fragment) {
                    Ok(e) => e,
                    Err(why) => {
                        let why = format!("{topic}: {why}");
                        return self.error_with_id(me, ErrorCode::BadCompression, &why, id, now);
                    }
                };
                let asked = qos::Asked {
                    qos,
                    peers: false,
                    throttle_ms,
                    encoding,
                };
                let r = qos::Registering {
                    role: Role::Subscriber,
                    topic: &topic,
                    ty: ty.as_deref(),
                    asked,
                };
                self.register(me, r, node, id, now)
            }
            Op::Unsubscribe { topic } => {
                self.unregister(me, Role::Subscriber, &topic, node, id, now)
            }
            Op::Advertise {
                topic,
                ty,
                qos,
                peers,
            } => {
                let asked = qos::Asked {
                    qos,
                    peers,
                    encoding: Encoding::default(),
                    throttle_ms: 0,
                };
                let r = qos::Registering {
                    role: Role::Publisher,
                    topic: &topic,
                    ty: ty.as_deref(),
                    asked,
                };
                self.register(me, r, node, id, now)
            }
            Op::Unadvertise { topic } => {
                self.unregister(me, Role::Publisher, &topic, node, id, now)
            }
            Op::AdvertiseService { service, ty } => {
                self.advertise_service(me, &service, node, ty.as_deref().unwrap_or(""), req.id, now)
            }
            Op::UnadvertiseService { service } => {
                self.unadvertise_service(me, &service, node, req.id, now)
            }
            Op::CallService {
                service,
                args,
                timeout,
                wait,
            } => {
                let (compression, fragment) = match &req.encoding {
                    Some(e) => (e.compression.as_deref(), e.fragment_size),
                    None => (None, None),
                };
                let Some(encoding) =
                    self.answer_encoding(me, &service, compression, fragment, id, now)
                else {
                    return;
                };
                let call = services::CallArgs {
                    args,
                    timeout,
                    wait,
                    encoding,
                    goal: None,
                };
                self.call_service(me, &service, node, call, id, now)
            }
            Op::ServiceResponse {
                values,
                result,
                status,
                ..
            } => self.service_response(me, req.id, values, result, status, now),
            Op::DeclareNode(d) => self.declare_node(me, &d, id, now),
            Op::DestroyNode { name } => self.destroy_node(me, &name, id, now),
            Op::SetLevel { level } => self.set_level(me, &level, id, now),
            Op::AdvertiseAction { action, ty } => {
                self.advertise_action(me, &action, node, ty.as_deref().unwrap_or(""), req.id, now)
            }
            Op::UnadvertiseAction { action } => {
                self.unadvertise_action(me, &action, node, req.id, now)
            }
            Op::SendActionGoal(g) => {
                if let Some(id) = id {
                    self.send_action_goal(me, &g, node, id, now)
                }
            }
            Op::CancelActionGoal { action } => {
                if let Some(id) = req.id {
                    self.cancel_action_goal(me, &action, id, now)
                }
            }
            Op::ActionFeedback { values, .. } => {
                if let Some(id) = req.id {
                    self.action_feedback(me, id, values, now)
                }
            }
            Op::ActionResult {
                values,
                status,
                result,
                ..
            } => {
                if let Some(id) = req.id {
                    self.action_result(me, id, values, status, result, now)
                }
            }
            Op::DeclareParameter {
                name,
                value,
                descriptor,
                validate,
            } => {
                let decl = params::Declaration {
                    name: &name,
                    value,
                    descriptor,
                    validate,
                };
                self.declare_parameter(me, node, decl, id, now)
            }
            Op::UndeclareParameter { name } => self.undeclare_parameter(me, node, &name, id, now),
            Op::SetParameter { name, value } => {
                self.set_own_parameter(me, node, &name, value, id, now)
            }
            Op::Auth { token } => self.on_auth(me, token.as_deref(), id, now),
            Op::Fragment { data, num, total } => {
                let piece = fragments::Piece {
                    id: req.id,
                    data: &data,
                    num,
                    total,
                };
                self.on_fragment(me, piece, now)
            }
            Op::Ignored(_) => {}
        }
    }

    // ----- output ----------------------------------------------------------------

    pub(crate) fn live(&self, r: ConnRef) -> bool {
        self.conns
            .get(r.key as usize)
            .is_some_and(|c| c.gen() == r.gen && c.is_open())
    }

    pub(crate) fn live_mut(&mut self, r: ConnRef) -> Option<&mut Conn> {
        self.conns
            .get_mut(r.key as usize)
            .filter(|c| c.gen() == r.gen && c.is_open())
    }

    pub(crate) fn send_status(
        &mut self,
        to: ConnRef,
        level: Level,
        msg: &str,
        id: Option<&[u8]>,
        now: Instant,
    ) {
        let wanted = self
            .conns
            .get(to.key as usize)
            .is_some_and(|c| c.policy().wants_status(level));
        if !wanted {
            return;
        }
        let mut out = Vec::with_capacity(64 + msg.len());
        if self.is_foxglove(to) {
            foxglove::status(&mut out, level, msg);
        } else {
            rosgate_wire::encode::status(&mut out, level, msg, id);
        }
        self.send_control(to, &out, now);
    }

    /// Queues control bytes (whole JSON lines); closes the connection past
    /// its control limit (P6).
    pub(crate) fn send_control(&mut self, to: ConnRef, bytes: &[u8], now: Instant) {
        self.enqueue_control(to, bytes, false, now);
    }

    /// Queues bytes to go out exactly as given (transport replies).
    pub(super) fn send_raw(&mut self, to: ConnRef, bytes: &[u8], now: Instant) {
        self.enqueue_control(to, bytes, true, now);
    }

    /// Queues control bytes to `to`: the only way output other than topic
    /// data reaches a queue, so the publish batch is delivered first here
    /// (anything a client observes after its publishes comes after them).
    fn enqueue_control(&mut self, to: ConnRef, bytes: &[u8], raw: bool, now: Instant) {
        self.flush_publishes(now);
        let (cap, soft) = (
            self.limits.max_control_bytes,
            self.limits.control_soft_bytes,
        );
        let Some(c) = self.live_mut(to) else { return };
        let out = c.out_mut(now);
        let before = out.control_bytes();
        let queued = if raw {
            out.push_raw(bytes)
        } else {
            out.push_control(bytes)
        };
        c.note_control(soft, now);
        let dirty = c.set_dirty();
        self.mem.control += queued - before;
        self.mem.queued += queued - before;
        if dirty {
            self.dirty.push(to.key);
        }
        if queued > cap {
            self.close(to.key, CloseReason::ControlOverflow, now);
        }
    }

    /// Connections with output queued since the last call.
    pub fn take_dirty(&mut self, into: &mut Vec<u32>) {
        into.clear();
        std::mem::swap(into, &mut self.dirty);
        for &k in into.iter() {
            if let Some(c) = self.conns.get_mut(k as usize) {
                c.clear_dirty();
            }
        }
    }

    /// True when some connection has output waiting for a flush.
    pub fn has_dirty(&self) -> bool {
        !self.dirty.is_empty()
    }

    /// Marks `key` as having output to flush (the shell uses this for
    /// connections whose previous flush stopped on its budget).
    pub fn mark_dirty(&mut self, key: u32) {
        if let Some(c) = self.conns.get_mut(key as usize) {
            if c.set_dirty() {
                self.dirty.push(key);
            }
        }
    }

    /// The output queue of `key`, for the shell to write from.
    pub fn out(&self, key: u32) -> Option<&OutQueue> {
        self.conns.get(key as usize).map(Conn::out)
    }

    /// Records that `n` bytes of `key`'s output were written.
    pub fn wrote(&mut self, key: u32, n: usize, now: Instant) {
        self.counters.add(Counter::BytesOut, n as u64);
        let soft = self.limits.control_soft_bytes;
        let half = self.limits.max_queue_bytes / 2;
        if let Some(c) = self.conns.get_mut(key as usize) {
            let entries = c.out().entry_bytes();
            let (released, control) = c.wrote(n, now);
            self.mem.entries_changed(entries, c.out().entry_bytes());
            c.note_control(soft, now);
            // A reliable backlog that fell back to half the limit is warned
            // of again when it next passes it (checked only as reliable
            // data is queued, this fall would go unseen when the next
            // message finds the backlog over the limit again).
            if c.reliable_warned() && c.out().reliable_bytes() <= half {
                c.set_reliable_warned(false);
            }
            self.mem.frames -= released;
            self.mem.control -= control;
            self.mem.queued -= n;
        }
    }

    /// Gives back table capacity a crowd that left no longer needs (called
    /// by the shell before it trims the heap).
    pub fn shrink_tables(&mut self) {
        if self.conns.capacity() > 4 * self.conns.len() + 64 {
            self.conns.shrink_to_fit();
        }
        if self.pending.capacity() > 4 * self.pending.len() + 64 {
            self.pending.shrink_to_fit();
        }
        self.registries.shrink();
        self.nodes.shrink();
        self.calls.shrink();
        self.release_encode_scratch();
    }

    // ----- shutdown --------------------------------------------------------------

    /// Starts a graceful shutdown (P23): input is ignored from now on,
    /// every call in flight fails with `result:false` ("gateway shutting
    /// down"), so does every request waiting for a provider (a waiting goal
    /// with `status` 6, as one in flight), and every connection whose transport has a goodbye (a
    /// WebSocket close 1001, going away) gets it after its queued output.
    /// The shell then closes each connection as it has written everything
    /// ([`Hub::close_drained`]) until none is left or its grace period
    /// ends.
    pub fn begin_shutdown(&mut self, now: Instant) {
        if self.draining {
            return;
        }
        self.draining = true;
        while let Some((call, why)) = self.gone.pop_front() {
            self.gone_bytes -= call.bytes_held();
            self.fail_call(call, why, now);
        }
        for call in self.calls.take_every() {
            self.fail_call(call, CallFailure::Shutdown, now);
        }
        self.fail_all_waiting(now);
        let goodbyes: Vec<(ConnRef, Vec<u8>)> = self
            .conns
            .iter()
            .filter(|(_, c)| c.is_open() && c.is_established())
            .filter_map(|(k, c)| {
                let r = ConnRef {
                    key: k as u32,
                    gen: c.gen(),
                };
                c.goodbye().map(|bytes| (r, bytes))
            })
            .collect();
        for (r, bytes) in goodbyes {
            self.send_raw(r, &bytes, now);
        }
    }

    /// During a shutdown, closes the connections that have written all
    /// their output.
    pub fn close_drained(&mut self, now: Instant) {
        let done: Vec<u32> = self
            .conns
            .iter()
            .filter(|(_, c)| c.is_open() && c.out().is_empty())
            .map(|(k, _)| k as u32)
            .collect();
        for k in done {
            self.close(k, CloseReason::Shutdown, now);
        }
    }

    // ----- time ------------------------------------------------------------------

    /// Expires due calls, enforces every per-connection deadline (write
    /// stall, opening, partial request, idle, slow drain) and the memory
    /// budget. Called once per loop turn: it also ends the turn's shared
    /// `/metrics` rendering and sends this turn's share of the failures of
    /// departed providers' calls.
    pub fn expire(&mut self, now: Instant) {
        self.metrics_turn = None;
        self.gone_sent = 0;
        self.fail_gone(now);
        for call in self.calls.expire(now, EXPIRE_BUDGET) {
            match call.kind() {
                CallKind::Service => self.fail_call(call, CallFailure::Timeout, now),
                // An orphan waited long enough for its server: forgotten.
                CallKind::Goal { .. } if call.is_orphaned() => {}
                CallKind::Goal { .. } => self.goal_timed_out(call, now),
            }
        }
        if now >= self.next_sweep {
            self.next_sweep = now + sweep_interval(&self.limits);
            self.sweep(now);
        }
        self.expire_fragments(now);
        self.enforce_memory(now);
        self.expire_waiting(now);
        self.tf_expire(now);
        self.release_held(now);
        // Last: the closes above are in the graph's news and peer counts.
        self.flush_qos(now);
        self.flush_graph(now);
        self.foxglove_sync_all(now);
    }

    /// Fails `calls` (taken from a provider that left or withdrew them)
    /// to their callers: as many as this turn's share allows now, the rest
    /// in order over the next turns (see [`GONE_FAILS_PER_TURN`]). They
    /// are out of the call table already, so each still ends exactly once
    /// and a late answer is stale.
    pub(super) fn fail_soon(&mut self, calls: Vec<Call>, why: CallFailure, now: Instant) {
        for call in calls {
            self.gone_bytes += call.bytes_held();
            self.gone.push_back((call, why));
        }
        self.fail_gone(now);
    }

    /// Sends what is left of this turn's share of `gone`'s failures.
    fn fail_gone(&mut self, now: Instant) {
        while self.gone_sent < GONE_FAILS_PER_TURN {
            let Some((call, why)) = self.gone.pop_front() else {
                return;
            };
            self.gone_sent += 1;
            self.gone_bytes -= call.bytes_held();
            self.fail_call(call, why, now);
        }
    }

    /// The periodic pass over every connection: O(connections), at most
    /// once per sweep interval.
    fn sweep(&mut self, now: Instant) {
        self.calls.compact();
        let l = &self.limits;
        let mut due = Vec::new();
        for (k, c) in self.conns.iter_mut() {
            c.link_mut().trim();
            if c.out().is_empty() {
                // Idle since the last sweep or not, its ring can go;
                // a busy one regrows it only once per sweep at most.
                c.out_mut(now).trim();
            }
            // A federation link has no socket and no client deadlines: its
            // queue is drained every turn and shed like any other.
            if !c.is_open() || c.is_bridge() {
                continue;
            }
            let since = |t: Instant| now.saturating_duration_since(t);
            let reason = if !c.out().is_empty() && since(c.out_since()) >= l.write_stall {
                Some(CloseReason::WriteStall)
            } else if c
                .soft_since()
                .is_some_and(|t| since(t) >= l.control_soft_time)
            {
                Some(CloseReason::SlowConsumer)
            } else if !c.is_established() && since(c.opened_at()) >= l.handshake_timeout {
                Some(CloseReason::HandshakeTimeout)
            } else if c
                .partial_since()
                .is_some_and(|t| since(t) >= l.partial_timeout)
            {
                Some(CloseReason::PartialTimeout)
            } else if l.idle_timeout.is_some_and(|d| since(c.last_active()) >= d) {
                Some(CloseReason::IdleTimeout)
            } else {
                None
            };
            if let Some(r) = reason {
                due.push((k as u32, r));
            }
        }
        for (k, r) in due {
            self.close(k, r, now);
        }
    }

    /// Bytes counted against the budget that `key` holds and that go when
    /// it is freed: its queue (a shared frame counted whole), partial
    /// input, the calls it made, its registrations, its nodes and their
    /// parameters (without them, a connection holding only nodes with big
    /// remap rules or big parameters would never be the one closed, and a
    /// closing one would be credited with less than it releases). A
    /// connection's parameters are all in its domain: it cannot move while
    /// it has nodes.
    fn held_by(&self, key: u32) -> usize {
        let Some(c) = self.conns.get(key as usize) else {
            return 0;
        };
        let r = ConnRef { key, gen: c.gen() };
        c.out().control_bytes()
            + c.out().topic_cost()
            + c.input_held()
            + self.calls.bytes_of(r)
            + self.registries.get(c.domain()).held_by(r).bytes
            + self.nodes.bytes_of(r)
            + self.params.store(c.domain()).owned_bytes(r)
    }

    /// Keeps the memory ledger within `max_memory_bytes` (P17): sheds topic
    /// data first, from the connections holding the most, then closes the
    /// connections holding the most of the rest. O(1) when within budget;
    /// what connections already closing will release counts as released.
    fn enforce_memory(&mut self, now: Instant) {
        let budget = self.limits.max_memory_bytes;
        if self.memory().total() <= budget {
            return;
        }
        let releasing = |hub: &Hub| -> usize { hub.closing.iter().map(|&k| hub.held_by(k)).sum() };
        let mut total = self.memory().total().saturating_sub(releasing(self));
        if total <= budget {
            return;
        }
        let target = budget / TARGET_DEN * TARGET_NUM;
        // 1. Topic data, biggest queues first.
        let mut queues: Vec<(usize, u32)> = self
            .conns
            .iter()
            .filter(|(_, c)| c.is_open() && c.out().topic_bytes() > 0)
            .map(|(k, c)| (c.out().topic_cost(), k as u32))
            .collect();
        queues.sort_unstable_by(|a, b| b.cmp(a));
        let mut shed_entries = 0;
        for (_, k) in queues {
            if total <= target {
                return;
            }
            if shed_entries >= SHED_ENTRIES_PER_PASS {
                // Bounded work per pass (P20): the next pass (the next read
                // or turn) goes on; nobody is closed while topic data is
                // left to shed.
                return;
            }
            let Some(c) = self.conns.get_mut(k as usize) else {
                continue;
            };
            shed_entries += c.out().entry_bytes() / ENTRY_COST;
            let entries = c.out().entry_bytes();
            let d = c.out_mut(now).shed_all();
            let entries_after = c.out().entry_bytes();
            self.mem.entries_changed(entries, entries_after);
            self.mem.frames -= d.released as usize;
            self.mem.queued -= d.bytes as usize;
            total = total.saturating_sub(d.released as usize + (entries - entries_after));
            self.counters.add(Counter::Dropped, d.frames);
            self.counters.add(Counter::DroppedBytes, d.bytes);
            self.counters.add(Counter::DroppedForMemory, d.frames);
        }
        if total <= target {
            return;
        }
        // 2. The biggest holders of what cannot be dropped. Their memory
        // goes when they are freed at the end of this turn.
        let mut holders: Vec<(usize, u32)> = self
            .conns
            .iter()
            .filter(|(_, c)| c.is_open())
            .map(|(k, _)| (self.held_by(k as u32), k as u32))
            .filter(|&(held, _)| held > 0)
            .collect();
        holders.sort_unstable_by(|a, b| b.cmp(a));
        for (held, k) in holders {
            if total <= target {
                break;
            }
            self.close(k, CloseReason::MemoryPressure, now);
            total = total.saturating_sub(held);
        }
    }

    /// Whether the hub has work for the shell's next turn (it then polls
    /// without sleeping): `expire`'s leftovers, or federation changes to
    /// take.
    pub fn has_backlog(&self) -> bool {
        self.has_expire_backlog() || self.fed.has_changes()
    }

    /// Whether `expire` has work left over from its last turn.
    fn has_expire_backlog(&self) -> bool {
        self.calls.has_overdue()
            || !self.gone.is_empty()
            || self.graph.has_immediate()
            || self.qos_timers.has_immediate()
            || self.tf.has_immediate()
            || self.held.has_overdue()
    }

    /// The earliest instant at which `expire` has work to do.
    pub fn next_deadline(&self) -> Instant {
        let t = match self.calls.next_deadline() {
            Some(t) => t.min(self.next_sweep),
            None => self.next_sweep,
        };
        let t = match self.graph.list_due_at() {
            Some(g) => t.min(g),
            None => t,
        };
        let t = match self.qos_timers.next_deadline() {
            Some(q) => t.min(q),
            None => t,
        };
        let t = match self.tf.next_deadline() {
            Some(q) => t.min(q),
            None => t,
        };
        let t = match self.held.next_deadline() {
            Some(h) => t.min(h),
            None => t,
        };
        let t = match self.federation_due() {
            Some(f) => t.min(f),
            None => t,
        };
        let t = match self.fragments.next_deadline() {
            Some(f) => t.min(f),
            None => t,
        };
        match self.waiting.next_deadline() {
            Some(w) => t.min(w),
            None => t,
        }
    }
}

/// What a request's handling needs to know of its sender up front.
#[derive(Debug, Clone, Copy)]
struct Sender {
    domain: Domain,
    /// Its names are resolved (see `Conn::resolves`).
    resolves: bool,
}

/// How far [`Hub::free_some`] got, with the work it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freed {
    /// The connection is gone.
    Done(usize),
    /// Registrations are left; call again.
    Partly(usize),
}

/// How often the per-connection deadlines are checked: often enough to close
/// within a quarter of the shortest one late, at most once a second.
fn sweep_interval(limits: &Limits) -> Duration {
    let mut shortest = limits
        .write_stall
        .min(limits.handshake_timeout)
        .min(limits.partial_timeout)
        .min(limits.control_soft_time);
    if let Some(idle) = limits.idle_timeout {
        shortest = shortest.min(idle);
    }
    (shortest / 4).clamp(Duration::from_millis(10), Duration::from_secs(1))
}

#[cfg(test)]
mod tests;
