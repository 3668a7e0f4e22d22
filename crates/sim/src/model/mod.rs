//! The expected-state model, kept independently of the hub's tables: the
//! live clients (their transport, what each registered, how it reads,
//! every line it is owed), the services and their providers, and every
//! call with its caller, provider, deadline and fate. The data of goals
//! and waiting requests, of QoS and of parameters (with the validations
//! sent to their owners) are in the children `goals.rs`, `qos.rs` and
//! `params.rs`, and a request's model [`Effect`] in `requests.rs`;
//! validations count among their requesters' calls here.
//!
//! Two kinds of client share the routing: NDJSON over TCP (the protocol
//! file: registrations per connection, every status) and rosbridge over
//! WebSocket ([`WsSide`]: registrations per request id, statuses through
//! the filter the hub had when it opened, frames instead of lines).
//!
//! Each client is in a domain, may declare nodes ([`NodeModel`]) and
//! resolves names once it has (or under `--names strict`); every
//! registration key says which of its nodes made it (`None`: the
//! connection itself), services and topics are per domain, and the nodes'
//! bytes are part of the registrations in the ledger.
//!
//! Besides the routing, the model keeps what bounds a client's share of
//! the gateway (P17-P21): whether it completed its opening, when it last
//! sent or read, since when it holds a partial request and how many bytes
//! of it, the exact topic frames queued for it (and so the distinct shared
//! frames alive), and the bytes its calls and registrations count for, as
//! `docs/limits.md` states them.
//!
//! Nothing here looks at the hub. The driver (`driver/mod.rs`,
//! `driver/feed.rs`, `driver/effects.rs`) updates the model as it feeds
//! requests in; the reader (`driver/reader.rs`) crosses off each line a
//! client receives; `driver/accounting.rs` and `driver/checks.rs` compare
//! the model with the hub after every hub call and every step.
//!
//! Layering: this module and its children are the data layer. They depend
//! on `actions`, `names`, `ws` and `rng` only, never on `driver` (the
//! behaviour, `impl Sim`, sits on top of them).

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::rc::Rc;
use std::time::Duration;

use serde_json::Value;

use rosgate_core::codes::ErrorCode;
use rosgate_core::counters::Counter;
use rosgate_core::limits::TIMER_TICK_MS;
use rosgate_core::{CloseReason, ConnRef, StatusFilter};
use rosgate_wire::encode;

use crate::actions::MAX_CLIENTS;
use crate::names::NodeModel;
use crate::ws::Answer;
use crate::ws_decode::Reassembler;
use encodings::EncM;
use goals::{Fate, GoalModel, GoalResp, WaitModel};
use params::ParamsModel;
use qos::{PubState, SubState, ThrottleTimer};
use requests::Effect;

pub(crate) mod encodings;
pub(crate) mod foxglove;
pub(crate) mod goals;
pub(crate) mod params;
pub(crate) mod qos;
pub(crate) mod requests;

/// Bytes counted per topic entry beyond its names (`docs/limits.md`: "per
/// topic its name twice, its publish prefix and 480 bytes").
const TOPIC_BYTES: usize = 480;
/// Per membership, and per rosbridge id ("64 bytes plus the id").
const MEMBER_BYTES: usize = 64;
/// Per service ("its name three times, its type and 192 bytes": twice as
/// text, once as a JSON string).
const SERVICE_BYTES: usize = 192;
/// Per call in flight ("its caller's id, the service name and 160 bytes").
const CALL_BYTES: usize = 160;
/// Per topic entry per queue, beyond its frame ("entries: 64 bytes per
/// topic entry per queue"); counted in the topic limit and the budget.
pub(crate) const ENTRY_BYTES: usize = 64;

/// `s` as the JSON string the gateway writes.
pub(crate) fn json_name(s: &str) -> Vec<u8> {
    let mut out = Vec::new();
    encode::json_string(&mut out, s);
    out
}

/// The tick a deadline `d` (clock offset) fires at: the timer wheel
/// rounds deadlines up to a tick, counted from the hub's creation.
pub(crate) fn tick_ceil(d: Duration) -> u64 {
    let tick = Duration::from_millis(TIMER_TICK_MS).as_nanos();
    d.as_nanos().div_ceil(tick) as u64
}

/// How a client reads its output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadMode {
    All,
    Stopped,
    /// At most this many bytes per step.
    Slow(usize),
}

/// A request id: the JSON text sent and its canonical form (map key).
#[derive(Debug, Clone)]
pub(crate) struct Id {
    pub raw: String,
    pub key: String,
}

/// A publish queued for a subscriber: it receives it unless it is shed.
#[derive(Debug, Clone)]
pub(crate) struct TopicFrame {
    /// Which publish (unique per run): with the framing, the shared frame
    /// the hub holds once for every queue.
    pub msg: u64,
    /// The JSON line, without its newline: what a TCP line or a WebSocket
    /// text frame carries.
    pub line: Rc<[u8]>,
    /// The bytes it takes in this subscriber's queue (line and newline, or
    /// frame header and line), exactly as written.
    pub wire: Rc<[u8]>,
    /// Framed for WebSocket.
    pub ws: bool,
    /// The encoding it was made in (plain for TCP, goal feedback and
    /// subscriptions that asked for none).
    pub enc: EncM,
    /// The topic it was published on (its queue bucket, for depth and
    /// reliability); `None` for goal feedback (a bucket of its own).
    pub topic: Option<Bucket>,
}

/// A topic as the queues of one domain know it: its name and which
/// incarnation of its entry (a topic nobody holds is removed, and a new
/// entry of the same name is another topic for the queues).
pub(crate) type Bucket = (String, u64);

/// A shared frame in the ledger: publish, framing, encoding.
pub(crate) type FrameKey = (u64, bool, EncM);

impl TopicFrame {
    /// The key of the shared frame in the ledger.
    pub fn key(&self) -> FrameKey {
        (self.msg, self.ws, self.enc)
    }
}

/// What a caller expects for one call id.
#[derive(Debug)]
pub(crate) enum Resp {
    /// In flight: model call index. Receiving a response now is a bug.
    Pending(usize),
    Failure {
        service: String,
        /// Text the reason must contain (the shutdown's), if fixed.
        why: Option<&'static str>,
    },
    Success {
        service: String,
        values: Value,
        result: Value,
        status: Option<Value>,
    },
    /// The built-in stats service, with the gauges at call time:
    /// connections_open, calls_pending, topics, subscriptions, publishers,
    /// services.
    Stats([u64; 6]),
    /// Waiting for a provider (model waiting index).
    Waiting(usize),
    /// Answered by the gateway itself with exactly these `values` (and
    /// `result: true`).
    Builtin { service: String, values: Value },
    /// Answered by the gateway with `result: true` and `values` that match
    /// this pattern (see [`matches()`]).
    Shape { service: String, values: Value },
    /// A parameter change waiting for its owner's validation (model
    /// validation index).
    Validating(usize),
}

impl Resp {
    /// Not settled yet: in flight, waiting for a provider, or for an
    /// owner's validation.
    pub fn unsettled(&self) -> bool {
        matches!(
            self,
            Resp::Pending(_) | Resp::Waiting(_) | Resp::Validating(_)
        )
    }
}

/// In a [`Resp::Shape`] pattern: any string.
pub(crate) const ANY: &str = "\u{0}any string";

/// Whether `actual` matches `pattern`: every member of a pattern object is
/// in the actual object and matches (others may follow), lists match
/// element by element, [`ANY`] matches any string, anything else is equal.
pub(crate) fn matches(pattern: &Value, actual: &Value) -> bool {
    match (pattern, actual) {
        (Value::String(p), Value::String(_)) if p == ANY => true,
        (Value::Object(p), Value::Object(a)) => p
            .iter()
            .all(|(k, v)| a.get(k).is_some_and(|x| matches(v, x))),
        (Value::Array(p), Value::Array(a)) => {
            p.len() == a.len() && p.iter().zip(a).all(|(x, y)| matches(x, y))
        }
        _ => pattern == actual,
    }
}

/// Something forwarded to a provider or action server, in order: a call
/// (model call index), a goal (model goal index) or a parameter
/// validation to the parameters' owner (model validation index).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fwd {
    Call(usize),
    Goal(usize),
    Validation(usize),
}

/// The level of a status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Lvl {
    Info,
    Warning,
    Error,
}

impl Lvl {
    /// The level for an error (`true`) or an info status.
    pub fn of(error: bool) -> Lvl {
        if error {
            Lvl::Error
        } else {
            Lvl::Info
        }
    }
}

/// Every line one client is owed and has not received yet.
#[derive(Debug, Default)]
pub(crate) struct Expect {
    /// Statuses with an id: (canonical id, level) -> count.
    pub statuses: HashMap<(String, Lvl), u32>,
    pub anon_info: u32,
    pub anon_warning: u32,
    pub anon_error: u32,
    /// Forwarded calls and goals this provider (or action server) must
    /// receive, in order.
    pub forwards: VecDeque<Fwd>,
    /// Cancels this action server must receive (model goal indexes), each
    /// after its goal; in any order among themselves (the hub sends those
    /// of one turn in timer order).
    pub cancels: Vec<usize>,
    /// Goal results by canonical caller id (several for an id reused while
    /// in flight: the duplicate fails at once), told apart by content.
    pub goal_results: Vec<(String, GoalResp)>,
    /// `peers` notifications owed, per topic: the counts in order.
    pub peers: VecDeque<(String, u64)>,
    /// Responses by canonical caller id.
    pub responses: HashMap<String, Resp>,
    /// Responses to calls made without an id (rosbridge dialect), which
    /// come back without one: told apart by content.
    pub anon_responses: Vec<Resp>,
    /// Pong payloads owed, in ping order.
    pub pongs: VecDeque<Vec<u8>>,
    /// Topic frames queued, in order: exactly what is in the hub's queue
    /// (frames shed are identified and removed as they go).
    pub topic: VecDeque<TopicFrame>,
}

/// One registration: the node it was made for (the model's node uid;
/// `None`: the connection itself) and, on WebSocket, the raw request id
/// (`None`: no id; always `None` on TCP).
pub(crate) type RegKey = (Option<u64>, Option<String>);

/// Registrations of one kind: topic (as the hub names it, expanded when
/// the client resolves names) -> its keys. A TCP connection holds one key
/// per node; a WebSocket connection one per node and request id.
pub(crate) type Regs = BTreeMap<String, BTreeSet<RegKey>>;

/// The WebSocket side of a client: handshake, control frames, dialect.
#[derive(Debug)]
pub(crate) struct WsSide {
    /// Statuses the hub sends this connection (fixed when it opened).
    pub status: StatusFilter,
    /// A handshake request not sent yet: it goes with the first frames.
    pub pending_handshake: Option<Vec<u8>>,
    /// The handshake request was sent in full (the hub has answered it or
    /// refused it).
    pub hs_done: bool,
    /// The handshake answer owed and not read yet.
    pub answer: Option<Answer>,
    /// The 101 was read: frames follow.
    pub open: bool,
    /// The payload of the close frame the server must send last: the echo
    /// of ours, or 1002 after a protocol error.
    pub close: Option<Vec<u8>>,
    /// The server's close frame (or refusal) arrived: nothing may follow.
    pub done: bool,
    /// We broke the protocol (or the handshake): the hub must close the
    /// connection as a protocol error.
    pub protocol_close: bool,
    /// Our opening named a browser origin that is not allowed: the hub
    /// must answer 403 and close as `origin_refused`.
    pub origin_refused: bool,
    /// The outgoing fragmented message being received, if any, and its
    /// frames so far (as the server sent them).
    pub fragments: Option<Reassembler>,
    pub fragment_wire: Vec<u8>,
    /// The id of the last fragmented message received (they grow).
    pub last_fragment_id: u64,
    /// A Foxglove session (opened with its subprotocol) instead of a
    /// rosbridge client.
    pub fx: Option<Box<foxglove::FxSide>>,
}

/// One unit of a client's write, for what a partial write leaves buffered
/// in the hub (`Link::buffered`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unit {
    /// A TCP line with its terminator.
    Line(usize),
    /// A WebSocket handshake request.
    Handshake(usize),
    /// A data frame (`len` bytes on the wire) carrying `payload` bytes of a
    /// message that fits the limit.
    Data {
        len: usize,
        payload: usize,
        fin: bool,
    },
    /// A control frame (ping, pong), answered once whole.
    Control(usize),
}

impl Unit {
    pub fn len(self) -> usize {
        match self {
            Unit::Line(n) | Unit::Handshake(n) | Unit::Control(n) => n,
            Unit::Data { len, .. } => len,
        }
    }
}

/// The bytes the hub holds after the first `fed` bytes of `units` arrived
/// (on a connection that held nothing before them): a partial line, or a
/// partial handshake head, or the fragments of the current message plus
/// the partial frame.
pub(crate) fn held_after(units: &[Unit], mut fed: usize) -> usize {
    let mut msg = 0;
    for &u in units {
        if fed >= u.len() {
            fed -= u.len();
            if let Unit::Data { payload, fin, .. } = u {
                msg = if fin { 0 } else { msg + payload };
            }
            continue;
        }
        return msg + fed;
    }
    msg
}

/// A request a trickling client has sent part of.
#[derive(Debug)]
pub(crate) struct Pending {
    /// The bytes not sent yet.
    pub rest: Vec<u8>,
    /// The whole write, and how much of it was sent.
    pub units: Vec<Unit>,
    pub fed: usize,
    /// The handshake request it carries first (WebSocket), if any, and
    /// whether it is accepted.
    pub handshake: Option<(usize, bool)>,
    /// Applied as the last byte goes.
    pub effect: Effect,
}

/// How a client is connected.
#[derive(Debug)]
pub(crate) enum Link {
    Tcp,
    Ws(WsSide),
}

/// One connected client as the model sees it.
#[derive(Debug)]
pub(crate) struct Client {
    pub conn: ConnRef,
    pub link: Link,
    /// The domain its registrations and lookups are in.
    pub domain: u8,
    /// The nodes it declared, in order (the first is its default node).
    pub nodes: Vec<NodeModel>,
    /// It resolves names by the ROS 2 rules: it declared a node once, or
    /// the gateway runs with `--names strict`.
    pub resolves: bool,
    pub mode: ReadMode,
    pub subs: Regs,
    pub pubs: Regs,
    pub next_id: u64,
    /// Received bytes not yet making a whole line or frame.
    pub inbuf: Vec<u8>,
    pub exp: Expect,
    /// Raw provider-side ids this client received in forwarded calls.
    pub learned: Vec<String>,
    /// Raw gateway ids of the goals this client was sent.
    pub learned_goals: Vec<String>,
    /// Raw provider-side ids of the validations this client was sent.
    pub learned_validations: Vec<String>,
    /// Model of the hub's `out_since`: last write progress, or when output
    /// became pending (clock offset).
    pub out_since: Duration,
    pub empty_at_start: bool,
    pub wrote: bool,
    /// The simulation closed it (EOF or reset) this step.
    pub closed_by_us: bool,
    /// The hub marked it closing, and why (it is freed at the end of the
    /// step).
    pub closing: Option<CloseReason>,
    /// Order of admission (the oldest unfinished opening is evicted).
    pub opened_seq: u64,
    /// When it was admitted (clock offset).
    pub opened_at: Duration,
    /// Completed its opening: a whole line (TCP), the upgrade (WebSocket).
    pub established: bool,
    /// Last input or write progress (clock offset).
    pub last_active: Duration,
    /// Since when the hub has held a partial request of it.
    pub partial_since: Option<Duration>,
    /// Bytes of partial input the hub holds for it.
    pub held: usize,
    /// A request it has sent part of.
    pub pending: Option<Pending>,
    /// The QoS state of its subscriptions and advertisements that stated
    /// any, by topic (as registered).
    pub sub_qos: BTreeMap<String, SubState>,
    pub pub_qos: BTreeMap<String, PubState>,
    /// Its queue's depth per topic bucket, and the reliable buckets.
    pub depth: BTreeMap<Bucket, u32>,
    pub reliable: BTreeSet<Bucket>,
    /// It was warned of its reliable backlog (until it falls to half).
    pub reliable_warned: bool,
    /// Since when its control bytes have been above the soft limit.
    pub soft_since: Option<Duration>,
    /// A write this step brought its control bytes to the soft limit or
    /// below.
    pub soft_dipped: bool,
    /// The deadlines of the `fragment` messages it sent that the gateway
    /// refused (each stays in its table until then; `driver/fragments.rs`).
    pub failed_fragments: Vec<Duration>,
}

impl Client {
    pub fn new(conn: ConnRef, link: Link, at: Duration, seq: u64) -> Client {
        Client {
            conn,
            link,
            domain: 0,
            nodes: Vec::new(),
            resolves: false,
            mode: ReadMode::All,
            subs: Regs::new(),
            pubs: Regs::new(),
            next_id: 0,
            inbuf: Vec::new(),
            exp: Expect::default(),
            learned: Vec::new(),
            learned_goals: Vec::new(),
            learned_validations: Vec::new(),
            out_since: at,
            empty_at_start: true,
            wrote: false,
            closed_by_us: false,
            closing: None,
            opened_seq: seq,
            opened_at: at,
            established: false,
            last_active: at,
            partial_since: None,
            held: 0,
            pending: None,
            sub_qos: BTreeMap::new(),
            pub_qos: BTreeMap::new(),
            depth: BTreeMap::new(),
            reliable: BTreeSet::new(),
            reliable_warned: false,
            soft_since: None,
            soft_dipped: false,
            failed_fragments: Vec::new(),
        }
    }

    /// Registrations of one kind as the hub counts them against the
    /// per-connection limit: every rosbridge id, or every topic.
    pub fn entries(&self, sub: bool) -> usize {
        let regs = if sub { &self.subs } else { &self.pubs };
        regs.values().map(BTreeSet::len).sum()
    }

    /// Bytes its subscriptions and advertisements count for.
    pub fn membership_bytes(&self) -> usize {
        let ids = |regs: &Regs| -> usize {
            regs.values()
                .flatten()
                .map(|(_, id)| MEMBER_BYTES + id.as_ref().map_or(0, String::len))
                .sum()
        };
        ids(&self.subs) + ids(&self.pubs)
    }

    /// Bytes its declared nodes count for.
    pub fn node_bytes(&self) -> usize {
        self.nodes.iter().map(NodeModel::bytes).sum()
    }

    /// Holds a registration or a node: its domain is fixed.
    pub fn holds_anything(&self, services: &Services, actions: &Services) -> bool {
        !self.subs.is_empty()
            || !self.pubs.is_empty()
            || !self.nodes.is_empty()
            || services.values().any(|s| s.provider == self.conn)
            || actions.values().any(|s| s.provider == self.conn)
    }

    /// Its node called `name` (its name or full name; the first declared
    /// wins).
    pub fn find_node(&self, name: &str) -> Option<&NodeModel> {
        self.nodes.iter().find(|n| n.name == name || n.full == name)
    }

    /// The full name of its node `uid` (`None`: the connection's own
    /// name, `/rosgate_<transport>_<n>`).
    pub fn node_label(&self, uid: Option<u64>) -> String {
        let Some(uid) = uid else {
            return format!("/rosgate_{}_{}", self.transport(), self.conn.gen);
        };
        match self.nodes.iter().find(|n| n.uid == uid) {
            Some(n) => n.full.clone(),
            None => format!("(destroyed node {uid})"),
        }
    }

    /// `tcp` or `ws`, as in its own node name.
    pub fn transport(&self) -> &'static str {
        if self.rosbridge() {
            "ws"
        } else {
            "tcp"
        }
    }

    /// How the hub resolves `raw` from this client for the node `node`
    /// names (or its default node): the node's uid (`None`: the
    /// connection) and the name as registered, or the error it gets.
    pub fn resolve(
        &self,
        raw: &str,
        node: Option<&str>,
    ) -> Result<(Option<u64>, String), ErrorCode> {
        let chosen = match node {
            Some(n) => Some(self.find_node(n).ok_or(ErrorCode::UnknownNode)?),
            None => self.nodes.first(),
        };
        if let Some(n) = chosen {
            return n
                .resolve(raw)
                .map(|name| (Some(n.uid), name))
                .ok_or(ErrorCode::InvalidName);
        }
        if !self.resolves {
            return Ok((None, raw.to_string()));
        }
        NodeModel::connection(self.transport(), self.conn.gen)
            .expand(raw)
            .map(|name| (None, name))
            .ok_or(ErrorCode::InvalidName)
    }

    pub fn ws(&self) -> Option<&WsSide> {
        match &self.link {
            Link::Ws(w) => Some(w),
            Link::Tcp => None,
        }
    }

    pub fn ws_mut(&mut self) -> Option<&mut WsSide> {
        match &mut self.link {
            Link::Ws(w) => Some(w),
            Link::Tcp => None,
        }
    }

    /// What the client received of the entry at the head of its queue
    /// and has not finished: the frames of a fragmented message taken so
    /// far (one queue entry: `model/encodings.rs`), then the partial
    /// frame or line it holds.
    pub fn head_part(&self) -> Vec<u8> {
        let mut part = self.ws().map_or(Vec::new(), |w| w.fragment_wire.clone());
        part.extend_from_slice(&self.inbuf);
        part
    }

    /// Speaks the rosbridge dialect (WebSocket): per-id registrations,
    /// lenient decoding, rosbridge-style answers.
    pub fn rosbridge(&self) -> bool {
        self.ws().is_some()
    }

    /// Whether the hub sends this client statuses of this level.
    pub fn wants_status(&self, level: Lvl) -> bool {
        match self.ws().map(|w| w.status) {
            None | Some(StatusFilter::All) => true,
            Some(StatusFilter::Warnings) => level != Lvl::Info,
            Some(StatusFilter::Errors) => level == Lvl::Error,
            Some(StatusFilter::None) => false,
        }
    }

    /// Whether it is open, as far as the hub is concerned.
    pub fn is_open(&self) -> bool {
        self.closing.is_none()
    }

    /// The key of a registration for `node` with `id` (raw).
    pub fn key(&self, node: Option<u64>, id: Option<&str>) -> RegKey {
        (node, id.filter(|_| self.rosbridge()).map(str::to_string))
    }

    /// `subscribe` (`sub`) or `advertise` for `node` with `id` (raw).
    pub fn register(&mut self, sub: bool, topic: &str, node: Option<u64>, id: Option<&str>) {
        let key = self.key(node, id);
        let regs = if sub { &mut self.subs } else { &mut self.pubs };
        regs.entry(topic.to_string()).or_default().insert(key);
    }

    /// `unsubscribe` (`sub`) or `unadvertise` for `node` with `id` (raw):
    /// only `node`'s registrations go; per connection, all of them; per
    /// id, an id removes only its own registration and no id removes all
    /// of the node's.
    pub fn unregister(&mut self, sub: bool, topic: &str, node: Option<u64>, id: Option<&str>) {
        let id = id.filter(|_| self.rosbridge()).map(str::to_string);
        let regs = if sub { &mut self.subs } else { &mut self.pubs };
        if let Some(keys) = regs.get_mut(topic) {
            keys.retain(|(n, i)| *n != node || id.is_some() && *i != id);
            if keys.is_empty() {
                regs.remove(topic);
            }
        }
    }

    /// Withdraws every topic registration node `uid` made.
    pub fn withdraw_node(&mut self, uid: u64) {
        for regs in [&mut self.subs, &mut self.pubs] {
            regs.retain(|_, keys| {
                keys.retain(|(n, _)| *n != Some(uid));
                !keys.is_empty()
            });
        }
    }
}

/// One call the model knows of, from the moment it was forwarded.
#[derive(Debug)]
pub(crate) struct CallModel {
    pub caller: ConnRef,
    pub caller_slot: usize,
    /// The caller's canonical id; `None` for a rosbridge call without one.
    pub id_key: Option<String>,
    pub service: String,
    pub args: Value,
    pub provider: ConnRef,
    /// Timer tick (from the hub's creation) at which it times out.
    pub due_tick: u64,
    pub alive: bool,
    /// The caller's id as sent (`None`: no id).
    pub id_raw: Option<String>,
}

impl CallModel {
    /// Bytes it counts for while in flight.
    pub fn bytes(&self) -> usize {
        CALL_BYTES + json_name(&self.service).len() + self.id_raw.as_ref().map_or(0, String::len)
    }
}

/// One service: its current provider, the node it advertised it for and
/// the `type` it gave.
#[derive(Debug, Clone)]
pub(crate) struct ServiceModel {
    pub provider: ConnRef,
    pub node: Option<u64>,
    pub ty: &'static str,
}

/// Services by (domain, name).
pub(crate) type Services = BTreeMap<(u8, String), ServiceModel>;

/// See the module docs.
#[derive(Debug)]
pub(crate) struct Model {
    pub clients: Vec<Option<Client>>,
    /// (domain, service name) -> its provider.
    pub services: Services,
    /// Every call ever forwarded, by model call index.
    pub calls: Vec<CallModel>,
    /// Raw provider-side id -> the call or goal it names.
    pub rg_map: HashMap<String, Fwd>,
    /// Every raw provider-side id any client received in a call.
    pub all_learned: Vec<String>,
    /// Every raw gateway id any server received in a goal.
    pub all_learned_goals: Vec<String>,
    /// (domain, action name) -> its server.
    pub actions: Services,
    /// Every goal ever sent to a server, by model goal index.
    pub goals: Vec<GoalModel>,
    /// Every request that waited for a provider, in arrival order.
    pub waiting: Vec<WaitModel>,
    /// Parameters of every domain, and validations sent to their owners.
    pub params: ParamsModel,
    /// What the hub's counters of actions, parameters and QoS must read.
    pub counted: [u64; Counter::COUNT],
    /// Topic entries held now (domain, name), and how many times each
    /// went (see [`Bucket`]).
    pub topics_held: BTreeSet<(u8, String)>,
    pub epochs: BTreeMap<(u8, String), u64>,
    /// Publishes through the QoS path so far (orders latched caches).
    pub publish_seq: u64,
    /// Throttle flushes scheduled.
    pub throttle_timers: Vec<ThrottleTimer>,
    /// The status filter WebSocket connections opened now get.
    pub ws_status: StatusFilter,
    /// The domain WebSocket connections start in.
    pub ws_domain: u8,
    /// `--names strict`.
    pub strict: bool,
    /// Node declarations so far: each node's uid.
    pub node_uids: u64,
    /// Shared topic frames alive: (publish, framing) -> (bytes, queues
    /// holding it).
    pub frames: HashMap<FrameKey, (usize, u32)>,
    /// Messages the hub has cut into `fragment` frames so far (the id of
    /// the last; `model/encodings.rs`).
    pub fragment_ids: u64,
    /// Their bytes: what `memory().frames` must be.
    pub frames_bytes: usize,
    /// Shutting down: input is ignored.
    pub draining: bool,
    /// When the hub's periodic sweep runs next (clock offset).
    pub next_sweep: Duration,
    /// Admissions so far.
    pub opened: u64,
}

impl Model {
    pub fn new(
        ws_status: StatusFilter,
        ws_domain: u8,
        strict: bool,
        first_sweep: Duration,
    ) -> Model {
        Model {
            clients: (0..MAX_CLIENTS).map(|_| None).collect(),
            services: BTreeMap::new(),
            calls: Vec::new(),
            rg_map: HashMap::new(),
            all_learned: Vec::new(),
            all_learned_goals: Vec::new(),
            actions: BTreeMap::new(),
            goals: Vec::new(),
            waiting: Vec::new(),
            params: ParamsModel::default(),
            counted: [0; Counter::COUNT],
            topics_held: BTreeSet::new(),
            epochs: BTreeMap::new(),
            publish_seq: 0,
            throttle_timers: Vec::new(),
            ws_status,
            ws_domain,
            strict,
            node_uids: 0,
            frames: HashMap::new(),
            fragment_ids: 0,
            frames_bytes: 0,
            draining: false,
            next_sweep: first_sweep,
            opened: 0,
        }
    }

    /// Queues topic frame `f` for `slot` (one more queue holds it).
    pub fn queue_frame(&mut self, slot: usize, f: TopicFrame) {
        let e = self.frames.entry(f.key()).or_insert((f.wire.len(), 0));
        if e.1 == 0 {
            self.frames_bytes += e.0;
        }
        e.1 += 1;
        self.client_mut(slot).exp.topic.push_back(f);
    }

    /// One queue no longer holds frame `key` (written, shed or freed).
    pub fn release_frame(&mut self, key: FrameKey) {
        if let Some(e) = self.frames.get_mut(&key) {
            e.1 -= 1;
            if e.1 == 0 {
                self.frames_bytes -= e.0;
                self.frames.remove(&key);
            }
        }
    }

    /// Bytes the calls and goals `caller` has in flight count for (its
    /// orphans are nobody's, and waiting requests are not in the table).
    pub fn calls_bytes_of(&self, caller: ConnRef) -> usize {
        let calls: usize = self
            .calls
            .iter()
            .filter(|c| c.alive && c.caller == caller)
            .map(CallModel::bytes)
            .sum();
        let goals: usize = self
            .goals
            .iter()
            .filter(|g| g.fate == Fate::Alive && g.caller == caller)
            .map(GoalModel::bytes)
            .sum();
        calls + goals + self.params.validation_bytes(Some(caller))
    }

    /// Bytes every call, goal (orphans included) and waiting request
    /// counts for.
    pub fn calls_bytes(&self) -> usize {
        let calls: usize = self
            .calls
            .iter()
            .filter(|c| c.alive)
            .map(CallModel::bytes)
            .sum();
        let goals: usize = self
            .goals
            .iter()
            .filter(|g| g.in_table())
            .map(GoalModel::bytes)
            .sum();
        let waiting: usize = self
            .waiting
            .iter()
            .filter(|w| w.alive)
            .map(WaitModel::bytes)
            .sum();
        calls + goals + waiting + self.params.validation_bytes(None)
    }

    /// Counts one event of `c` the hub must count too.
    pub fn count(&mut self, c: Counter) {
        self.counted[c.index()] += 1;
    }

    /// Requests of `caller` waiting for a provider.
    pub fn waiting_of(&self, caller: ConnRef) -> usize {
        self.waiting
            .iter()
            .filter(|w| w.alive && w.caller == caller)
            .count()
    }

    /// Service calls `caller` has in flight (what the per-connection call
    /// limit counts with its waiting requests; its goals have their own).
    pub fn calls_in_flight(&self, caller: ConnRef) -> usize {
        self.calls_made(caller)
    }

    /// Replaces `slot`'s expectation for waiting call `w` by `r`.
    pub fn settle_waiting(&mut self, slot: usize, w: usize, id: Option<&Id>, r: Resp) {
        let e = &mut self.client_mut(slot).exp;
        let waiting = |x: &Resp| matches!(x, Resp::Waiting(v) if *v == w);
        match id {
            Some(id) => {
                if e.responses.get(&id.key).is_some_and(waiting) {
                    e.responses.insert(id.key.clone(), r);
                }
            }
            None => {
                if let Some(x) = e.anon_responses.iter_mut().find(|x| waiting(x)) {
                    *x = r;
                }
            }
        }
    }

    /// Bytes one service entry counts for.
    fn service_bytes(name: &str, s: &ServiceModel) -> usize {
        SERVICE_BYTES + 2 * name.len() + json_name(name).len() + s.ty.len()
    }

    /// Bytes the registrations of `slot` count for in its domain's
    /// registry (its memberships, ids and services; topic entries belong
    /// to no one, and its nodes are in the node table).
    pub fn reg_bytes_of(&self, slot: usize) -> usize {
        let c = self.client(slot);
        let services: usize = self
            .services
            .iter()
            .chain(self.actions.iter())
            .filter(|(_, s)| s.provider == c.conn)
            .map(|((_, n), s)| Self::service_bytes(n, s))
            .sum();
        // Latched caches and held throttled messages (their own copies).
        let caches: usize = c
            .pub_qos
            .values()
            .flat_map(|q| q.cache.iter().map(|(_, f)| f.len()))
            .sum();
        let held: usize = c
            .sub_qos
            .values()
            .filter_map(|q| q.throttle.as_ref()?.pending.as_ref().map(|f| f.len()))
            .sum();
        c.membership_bytes() + services + caches + held
    }

    /// Bytes every registration counts for, topic entries (one per domain
    /// and name), declared nodes and parameters included.
    pub fn reg_bytes(&self) -> usize {
        let mut topics = BTreeSet::new();
        let mut total = 0;
        for (s, c) in self.clients.iter().enumerate() {
            let Some(c) = c else { continue };
            topics.extend(c.subs.keys().chain(c.pubs.keys()).map(|t| (c.domain, t)));
            total += self.reg_bytes_of(s) + c.node_bytes();
        }
        let topic_bytes: usize = topics
            .iter()
            .map(|(_, t)| TOPIC_BYTES + 2 * t.len() + encode::publish_prefix(t).len())
            .sum();
        total + topic_bytes + self.params.bytes()
    }

    /// Bytes the declared nodes count for.
    pub fn node_bytes(&self) -> usize {
        self.live().map(Client::node_bytes).sum()
    }

    pub fn client(&self, slot: usize) -> &Client {
        self.clients[slot].as_ref().expect("live slot")
    }

    pub fn client_mut(&mut self, slot: usize) -> &mut Client {
        self.clients[slot].as_mut().expect("live slot")
    }

    pub fn live(&self) -> impl Iterator<Item = &Client> + Clone {
        self.clients.iter().flatten()
    }

    /// The slot of the live client `c`, if any.
    pub fn slot_of(&self, c: ConnRef) -> Option<usize> {
        self.clients
            .iter()
            .position(|x| x.as_ref().is_some_and(|x| x.conn == c))
    }

    /// The slot of the live client with slab key `key`, if any.
    pub fn slot_of_key(&self, key: u32) -> Option<usize> {
        self.clients
            .iter()
            .position(|c| c.as_ref().is_some_and(|c| c.conn.key == key))
    }

    /// `slot` if live, else the next live slot after it.
    pub fn resolve(&self, slot: u8) -> Option<usize> {
        let s = slot as usize % MAX_CLIENTS;
        (0..MAX_CLIENTS)
            .map(|i| (s + i) % MAX_CLIENTS)
            .find(|&i| self.clients[i].is_some())
    }

    /// From `slot` on, the first live client that declared a node.
    pub fn with_nodes(&self, slot: u8) -> Option<usize> {
        let s = slot as usize % MAX_CLIENTS;
        (0..MAX_CLIENTS).map(|i| (s + i) % MAX_CLIENTS).find(|&i| {
            self.clients[i]
                .as_ref()
                .is_some_and(|c| !c.nodes.is_empty())
        })
    }

    /// From `slot` on, the first live WebSocket client.
    pub fn resolve_ws(&self, slot: u8) -> Option<usize> {
        let s = slot as usize % MAX_CLIENTS;
        (0..MAX_CLIENTS)
            .map(|i| (s + i) % MAX_CLIENTS)
            .find(|&i| self.clients[i].as_ref().is_some_and(Client::rosbridge))
    }

    /// Whether provider-side id `raw` names a call in flight that was
    /// forwarded to `provider`.
    pub fn serving(&self, raw: &str, provider: ConnRef) -> bool {
        matches!(self.rg_map.get(raw), Some(&Fwd::Call(k))
            if self.calls[k].alive && self.calls[k].provider == provider)
    }

    /// From `slot` on, the first client that received a call still in flight.
    pub fn holder(&self, slot: u8) -> Option<usize> {
        let s = slot as usize % MAX_CLIENTS;
        (0..MAX_CLIENTS).map(|i| (s + i) % MAX_CLIENTS).find(|&i| {
            self.clients[i]
                .as_ref()
                .is_some_and(|c| c.learned.iter().any(|raw| self.serving(raw, c.conn)))
        })
    }

    /// From `slot` on, the first client that was sent a goal still in the
    /// table.
    pub fn goal_holder(&self, slot: u8) -> Option<usize> {
        let s = slot as usize % MAX_CLIENTS;
        (0..MAX_CLIENTS).map(|i| (s + i) % MAX_CLIENTS).find(|&i| {
            self.clients[i].as_ref().is_some_and(|c| {
                c.learned_goals.iter().any(|raw| {
                    matches!(self.rg_map.get(raw), Some(&Fwd::Goal(g))
                        if self.goals[g].in_table() && self.goals[g].server == c.conn)
                })
            })
        })
    }

    /// Calls in flight made by `conn` (validations it asked for
    /// included: they are calls of the requester).
    pub fn calls_made(&self, conn: ConnRef) -> usize {
        let calls = self
            .calls
            .iter()
            .filter(|x| x.alive && x.caller == conn)
            .count();
        calls + self.params.validations_where(|v| v.caller == conn)
    }

    /// Calls in flight forwarded to `conn` (validations included).
    pub fn calls_served(&self, conn: ConnRef) -> usize {
        let calls = self
            .calls
            .iter()
            .filter(|x| x.alive && x.provider == conn)
            .count();
        calls + self.params.validations_where(|v| v.owner == conn)
    }

    /// `slot` is owed one status, matched by `id` if it has one, unless
    /// its status filter withholds that level.
    pub fn expect_status(&mut self, slot: usize, id: Option<&Id>, error: bool) {
        self.expect_level(slot, id, Lvl::of(error));
    }

    /// [`Model::expect_status`] at any level.
    pub fn expect_level(&mut self, slot: usize, id: Option<&Id>, level: Lvl) {
        let c = self.client_mut(slot);
        if !c.wants_status(level) {
            return;
        }
        let e = &mut c.exp;
        match id {
            Some(id) => *e.statuses.entry((id.key.clone(), level)).or_default() += 1,
            None => match level {
                Lvl::Error => e.anon_error += 1,
                Lvl::Warning => e.anon_warning += 1,
                Lvl::Info => e.anon_info += 1,
            },
        }
    }

    /// Replaces the caller's `Pending(k)` (under `key`, or among its
    /// id-less calls) by its outcome `r`; an error if the caller expects
    /// something else.
    pub fn set_resp(
        &mut self,
        slot: usize,
        k: usize,
        key: Option<&str>,
        r: Resp,
    ) -> Result<(), String> {
        let e = &mut self.clients[slot].as_mut().expect("live").exp;
        let pending = |x: &Resp| matches!(x, Resp::Pending(p) if *p == k);
        let entry = match key {
            Some(key) => e.responses.get_mut(key),
            None => e.anon_responses.iter_mut().find(|x| pending(x)),
        };
        match entry {
            Some(x) if pending(x) => {
                *x = r;
                Ok(())
            }
            other => Err(format!(
                "model: call {k} completes but its caller expects {other:?}"
            )),
        }
    }

    /// A call failing (timeout, provider gone, unadvertised, shutdown):
    /// the caller, if still connected, gets one failure, whose reason
    /// contains `why` if given.
    pub fn fail_call_why(&mut self, k: usize, why: Option<&'static str>) {
        let c = &mut self.calls[k];
        c.alive = false;
        let (caller, cs, key, service) =
            (c.caller, c.caller_slot, c.id_key.clone(), c.service.clone());
        let Some(cl) = self.clients[cs].as_mut().filter(|cl| cl.conn == caller) else {
            return;
        };
        let failure = Resp::Failure { service, why };
        match key {
            Some(key) => {
                cl.exp.responses.insert(key, failure);
            }
            None => match cl
                .exp
                .anon_responses
                .iter_mut()
                .find(|x| matches!(x, Resp::Pending(p) if *p == k))
            {
                Some(x) => *x = failure,
                None => cl.exp.anon_responses.push(failure),
            },
        }
    }

    /// Fails every call in flight that `pred` selects.
    pub fn fail_calls_where(&mut self, pred: impl Fn(&CallModel) -> bool) {
        self.fail_calls_where_why(pred, None);
    }

    /// [`Model::fail_calls_where`] with a reason text each failure must
    /// contain.
    pub fn fail_calls_where_why(
        &mut self,
        pred: impl Fn(&CallModel) -> bool,
        why: Option<&'static str>,
    ) {
        let failing: Vec<usize> = (0..self.calls.len())
            .filter(|&k| self.calls[k].alive && pred(&self.calls[k]))
            .collect();
        for k in failing {
            self.fail_call_why(k, why);
        }
    }

    /// connections_open, calls_pending, topics, subscriptions, publishers,
    /// services.
    pub fn gauges(&self) -> [u64; 6] {
        let mut topics = BTreeSet::new();
        let (mut subs, mut pubs) = (0, 0);
        for c in self.live() {
            subs += c.subs.len();
            pubs += c.pubs.len();
            topics.extend(c.subs.keys().chain(c.pubs.keys()).map(|t| (c.domain, t)));
        }
        [
            self.live().count() as u64,
            (self.calls.iter().filter(|c| c.alive).count()
                + self.goals.iter().filter(|g| g.in_table()).count()
                + self.params.validations_where(|_| true)) as u64,
            topics.len() as u64,
            subs as u64,
            pubs as u64,
            self.services.len() as u64,
        ]
    }

    /// actions, goals (orphans included) and waiting requests now.
    pub fn gauges_more(&self) -> [u64; 3] {
        [
            self.actions.len() as u64,
            self.goals.iter().filter(|g| g.in_table()).count() as u64,
            self.waiting.iter().filter(|w| w.alive).count() as u64,
        ]
    }

    /// The model's side of `free`: registrations withdrawn, queued frames
    /// released, calls made forgotten, calls served failed.
    pub fn close(&mut self, slot: usize) {
        let c = self.clients[slot].take().expect("live");
        let me = c.conn;
        for f in &c.exp.topic {
            self.release_frame(f.key());
        }
        self.services.retain(|_, s| s.provider != me);
        self.actions.retain(|_, s| s.provider != me);
        for call in self.calls.iter_mut().filter(|x| x.alive && x.caller == me) {
            call.alive = false;
        }
        self.fail_calls_where(|c| c.provider == me);
    }
}
