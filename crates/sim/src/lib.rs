//! Deterministic simulation of the [`Hub`]: a driver that feeds it a
//! sequence of client [`Action`]s on a fake clock, plus a model of what the
//! gateway must do, checked after every step.
//!
//! Used by the `core` fuzz target (actions decoded from bytes with
//! [`actions_from_bytes`]), by `tests/sim.rs` (actions drawn from a seeded
//! RNG with [`run_seed`]) and, through [`fuzzing`], by every fuzz target and
//! the `tests/replay.rs` corpus replay.
//!
//! The driver mirrors the server's loop turn: apply one action (open, bytes,
//! EOF, clock jump, read-mode change), `expire(now)`, flush the output of
//! the clients that read, then `take_closing`/`free` until nothing is left.
//!
//! The model predicts, independently of the hub's tables:
//! - who subscribes/advertises what, who provides each service, which calls
//!   are in flight and when each times out (the timer wheel rounds deadlines
//!   up to the next tick, counted from the hub's creation);
//! - every line each client must receive: statuses (matched by id), forwarded
//!   calls (in order, with their args), responses (matched by the caller's
//!   id, which is unique per caller: exactly one per call, success with the
//!   provider's payload or a `result:false` failure) and publish frames (in
//!   order, exact bytes; frames missing from a slow reader must be exactly
//!   the bytes the hub counted in `dropped_bytes` for it).
//!
//! Closes the hub decides (control overflow, write stall) are learned from
//! `take_closing` and validated: an overflow close needs more control bytes
//! queued than `max_control_bytes`; a stall close needs output pending
//! without progress for `write_stall`, and one is required once it has been
//! pending for `write_stall` plus the sweep interval.
//!
//! After every step the hub's tables (router topics and services, per
//! connection indexes, gauges) must equal the model's.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::fmt;
use std::fmt::Write as _;
use std::io::IoSlice;
use std::time::{Duration, Instant};

use serde_json::Value;

use rosgate_core::counters::{Counter, Gauge};
use rosgate_core::hub::{Hub, RESERVED_PREFIX, STATS_SERVICE};
use rosgate_core::limits::{Limits, TIMER_TICK_MS};
use rosgate_core::log::LogLevel;
use rosgate_core::out::MAX_IOVECS;
use rosgate_core::{CloseReason, ConnRef, Transport};
use rosgate_wire::encode;

/// Client slots the simulation drives (more than some `max_connections`).
pub const MAX_CLIENTS: usize = 8;

/// Topic names; some need escaping, one sits under the reserved prefix
/// (reserved for services only).
pub const TOPICS: [&str; 6] = ["/a", "/b", "/chatter", "/q\"uote", "/é/ü", "/rosgate/t"];

/// Service names: the built-in stats service, a reserved name nobody can
/// advertise, and ordinary ones.
pub const SERVICES: [&str; 6] = [
    "/s1",
    "/s2",
    "/echo",
    STATS_SERVICE,
    "/rosgate/x",
    "/s\\back",
];

/// Per-call `timeout` field texts (`None`: field absent).
const TIMEOUTS: [Option<&str>; 9] = [
    None,
    Some("0.05"),
    Some("0.3"),
    Some("1"),
    Some("2.5"),
    Some("0"),
    Some("-1"),
    Some("null"),
    Some("1e9"),
];

/// `result` field texts of provider responses.
const RESULTS: [&str; 6] = ["true", "false", "1", "\"ok\"", "null", "{\"a\":[1]}"];

/// `status` field texts of provider responses (`None`: absent).
const STATUSES: [Option<&str>; 5] = [
    None,
    Some("\"\""),
    Some("\"done\""),
    Some("7"),
    Some("null"),
];

// ---------------------------------------------------------------------------------------------
// RNG and byte source
// ---------------------------------------------------------------------------------------------

/// SplitMix64: tiny, deterministic, good enough for test schedules.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (0 when `n == 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }

    pub fn u8(&mut self) -> u8 {
        self.next_u64() as u8
    }

    pub fn u16(&mut self) -> u16 {
        self.next_u64() as u16
    }
}

/// Reads fixed-size fields from fuzzer bytes; zeros once exhausted.
#[derive(Debug)]
pub struct Bytes<'a> {
    data: &'a [u8],
}

impl<'a> Bytes<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Bytes { data }
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    pub fn u8(&mut self) -> u8 {
        match self.data.split_first() {
            Some((&b, rest)) => {
                self.data = rest;
                b
            }
            None => 0,
        }
    }

    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }

    pub fn take(&mut self, n: usize) -> &'a [u8] {
        let n = n.min(self.data.len());
        let (a, b) = self.data.split_at(n);
        self.data = b;
        a
    }
}

// ---------------------------------------------------------------------------------------------
// Configuration and actions
// ---------------------------------------------------------------------------------------------

/// The hub limits of one simulation, plus the seed of its internal RNG
/// (write sizes of reading clients).
#[derive(Debug, Clone)]
pub struct SimConfig {
    pub limits: Limits,
    pub seed: u64,
}

impl SimConfig {
    /// Small limits chosen by the bits of `sel`, so that lines are refused
    /// as too long, topic frames are shed, control overflow and write
    /// stalls close connections, and the per-connection call limit bites.
    pub fn from_selector(sel: u64) -> SimConfig {
        fn pick<T: Copy>(sel: u64, shift: u32, table: &[T]) -> T {
            table[((sel >> shift) as usize) % table.len()]
        }
        let ms = Duration::from_millis;
        let limits = Limits {
            max_line_bytes: pick(sel, 0, &[400, 700, 4096, 1500]),
            max_queue_bytes: pick(sel, 2, &[300, 1000, 4000, 1 << 20]),
            max_control_bytes: pick(sel, 4, &[1 << 20, 2000, 6000, 1 << 20]),
            write_stall: pick(sel, 6, &[ms(30_000), ms(2_000), ms(5_000), ms(400)]),
            max_connections: pick(sel, 8, &[MAX_CLIENTS, 6, 4, 7]),
            call_timeout: pick(sel, 10, &[ms(1_000), ms(300), ms(3_000), ms(5_000)]),
            max_call_timeout: pick(sel, 12, &[ms(10_000), ms(2_000)]),
            max_calls_per_conn: pick(sel, 13, &[3, 64, 1, 8]),
        };
        SimConfig {
            limits,
            seed: sel.rotate_left(17) ^ 0x5EED,
        }
    }
}

/// One thing a client or the world does. Parameters are raw numbers the
/// simulation maps onto its tables (modulo their sizes), so every value is
/// meaningful and actions round-trip through bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Open a connection in the lowest free slot.
    Connect,
    /// `how % 3`: 0 EOF, 1 reset, 2 a partial line then EOF.
    Disconnect { slot: u8, how: u8 },
    /// `mode`: 0 reads everything, 1 stops reading, n reads `4n` bytes/step.
    Read { slot: u8, mode: u8 },
    /// Advances the clock; see [`Action::clock_micros`].
    Clock { v: u16 },
    /// Sends one request line. `style` bits: 0 CRLF, 1 spaces, 2 escaped
    /// names and keys, 3 an unknown member, 4 reversed members, 5 decoy
    /// duplicate members before the real ones. `split`: 0 whole, 255 byte
    /// by byte, else two halves cut at `split/255` of the line.
    Send {
        slot: u8,
        style: u8,
        split: u8,
        req: Req,
    },
}

/// A request line's content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Req {
    Subscribe {
        topic: u8,
        id: u8,
    },
    Unsubscribe {
        topic: u8,
        id: u8,
    },
    Advertise {
        topic: u8,
        id: u8,
    },
    Unadvertise {
        topic: u8,
        id: u8,
    },
    Publish {
        topic: u8,
        payload: u16,
        id: u8,
    },
    AdvertiseService {
        service: u8,
        id: u8,
    },
    UnadvertiseService {
        service: u8,
        id: u8,
    },
    Call {
        service: u8,
        timeout: u8,
        args: u16,
        id: u8,
    },
    /// `kind % 8`: 0-2 a call id this provider received (preferring live
    /// ones), 3 one it received (preferring dead ones), 4 one another client
    /// received, 5 a forged id, 6 no id, 7 a response missing `values`.
    Respond {
        pick: u8,
        kind: u8,
        result: u8,
        status: u8,
    },
    /// A refused request; see `Sim::malformed`.
    Malformed {
        kind: u8,
        id: u8,
    },
    /// `#` followed by these bytes (newlines removed): never valid JSON.
    Garbage {
        bytes: Vec<u8>,
    },
    /// An empty line (`\n` or `\r\n`).
    Blank,
}

impl Action {
    /// The clock advance: the low 14 bits times 10 µs, 100 µs, 1 ms or 10 ms
    /// (top two bits).
    pub fn clock_micros(v: u16) -> u64 {
        let scale = [10u64, 100, 1_000, 10_000][(v >> 14) as usize];
        u64::from(v & 0x3fff) * scale
    }

    /// Decodes one action, or `None` at the end of the bytes.
    pub fn decode(b: &mut Bytes<'_>) -> Option<Action> {
        if b.is_empty() {
            return None;
        }
        let op = b.u8() % 16;
        Some(match op {
            0 => Action::Connect,
            1 => Action::Disconnect {
                slot: b.u8(),
                how: b.u8(),
            },
            2 => Action::Read {
                slot: b.u8(),
                mode: b.u8(),
            },
            3 => Action::Clock { v: b.u16() },
            _ => {
                let (slot, style, split) = (b.u8(), b.u8(), b.u8());
                let req = match op {
                    4 => Req::Subscribe {
                        topic: b.u8(),
                        id: b.u8(),
                    },
                    5 => Req::Unsubscribe {
                        topic: b.u8(),
                        id: b.u8(),
                    },
                    6 => Req::Advertise {
                        topic: b.u8(),
                        id: b.u8(),
                    },
                    7 => Req::Unadvertise {
                        topic: b.u8(),
                        id: b.u8(),
                    },
                    8 => Req::Publish {
                        topic: b.u8(),
                        payload: b.u16(),
                        id: b.u8(),
                    },
                    9 => Req::AdvertiseService {
                        service: b.u8(),
                        id: b.u8(),
                    },
                    10 => Req::UnadvertiseService {
                        service: b.u8(),
                        id: b.u8(),
                    },
                    11 => Req::Call {
                        service: b.u8(),
                        timeout: b.u8(),
                        args: b.u16(),
                        id: b.u8(),
                    },
                    12 => Req::Respond {
                        pick: b.u8(),
                        kind: b.u8(),
                        result: b.u8(),
                        status: b.u8(),
                    },
                    13 => Req::Malformed {
                        kind: b.u8(),
                        id: b.u8(),
                    },
                    14 => {
                        let n = b.u8() as usize;
                        Req::Garbage {
                            bytes: b.take(n).to_vec(),
                        }
                    }
                    _ => Req::Blank,
                };
                Action::Send {
                    slot,
                    style,
                    split,
                    req,
                }
            }
        })
    }

    /// The bytes [`Action::decode`] reads back as this action.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Action::Connect => out.push(0),
            Action::Disconnect { slot, how } => out.extend_from_slice(&[1, *slot, *how]),
            Action::Read { slot, mode } => out.extend_from_slice(&[2, *slot, *mode]),
            Action::Clock { v } => {
                out.push(3);
                out.extend_from_slice(&v.to_le_bytes());
            }
            Action::Send {
                slot,
                style,
                split,
                req,
            } => {
                let op = match req {
                    Req::Subscribe { .. } => 4,
                    Req::Unsubscribe { .. } => 5,
                    Req::Advertise { .. } => 6,
                    Req::Unadvertise { .. } => 7,
                    Req::Publish { .. } => 8,
                    Req::AdvertiseService { .. } => 9,
                    Req::UnadvertiseService { .. } => 10,
                    Req::Call { .. } => 11,
                    Req::Respond { .. } => 12,
                    Req::Malformed { .. } => 13,
                    Req::Garbage { .. } => 14,
                    Req::Blank => 15,
                };
                out.extend_from_slice(&[op, *slot, *style, *split]);
                match req {
                    Req::Subscribe { topic, id }
                    | Req::Unsubscribe { topic, id }
                    | Req::Advertise { topic, id }
                    | Req::Unadvertise { topic, id } => out.extend_from_slice(&[*topic, *id]),
                    Req::Publish { topic, payload, id } => {
                        out.push(*topic);
                        out.extend_from_slice(&payload.to_le_bytes());
                        out.push(*id);
                    }
                    Req::AdvertiseService { service, id }
                    | Req::UnadvertiseService { service, id } => {
                        out.extend_from_slice(&[*service, *id])
                    }
                    Req::Call {
                        service,
                        timeout,
                        args,
                        id,
                    } => {
                        out.extend_from_slice(&[*service, *timeout]);
                        out.extend_from_slice(&args.to_le_bytes());
                        out.push(*id);
                    }
                    Req::Respond {
                        pick,
                        kind,
                        result,
                        status,
                    } => out.extend_from_slice(&[*pick, *kind, *result, *status]),
                    Req::Malformed { kind, id } => out.extend_from_slice(&[*kind, *id]),
                    Req::Garbage { bytes } => {
                        let n = bytes.len().min(255);
                        out.push(n as u8);
                        out.extend_from_slice(&bytes[..n]);
                    }
                    Req::Blank => {}
                }
            }
        }
    }

    /// A random action, weighted towards the interesting ones.
    pub fn random(rng: &mut Rng) -> Action {
        let slot = rng.u8();
        let send = |rng: &mut Rng, req: Req| {
            let style = if rng.below(3) == 0 { rng.u8() } else { 0 };
            let split = match rng.below(8) {
                0 => 255,
                1 | 2 => 1 + rng.below(254) as u8,
                _ => 0,
            };
            Action::Send {
                slot,
                style,
                split,
                req,
            }
        };
        // Ids: mostly present (style 1-6), sometimes absent.
        let id = |rng: &mut Rng| {
            if rng.below(6) == 0 {
                0
            } else {
                1 + rng.below(6) as u8
            }
        };
        match rng.below(100) {
            0..=6 => Action::Connect,
            7..=9 => Action::Disconnect {
                slot,
                how: rng.u8(),
            },
            10..=14 => Action::Read {
                slot,
                mode: match rng.below(4) {
                    0 | 1 => 0,
                    2 => 1,
                    _ => 2 + rng.below(60) as u8,
                },
            },
            15..=23 => {
                let v = match rng.below(10) {
                    0..=5 => rng.below(5_000) as u16,                   // < 50 ms
                    6..=8 => (2 << 14) | (rng.below(1_000) as u16),     // < 1 s
                    _ => (2 << 14) | (1_000 + rng.below(5_000) as u16), // 1-6 s
                };
                Action::Clock { v }
            }
            24..=31 => {
                let r = Req::Subscribe {
                    topic: rng.u8(),
                    id: id(rng),
                };
                send(rng, r)
            }
            32..=34 => {
                let r = Req::Unsubscribe {
                    topic: rng.u8(),
                    id: id(rng),
                };
                send(rng, r)
            }
            35..=37 => {
                let r = Req::Advertise {
                    topic: rng.u8(),
                    id: id(rng),
                };
                send(rng, r)
            }
            38 => {
                let r = Req::Unadvertise {
                    topic: rng.u8(),
                    id: id(rng),
                };
                send(rng, r)
            }
            39..=52 => {
                let r = Req::Publish {
                    topic: rng.u8(),
                    payload: rng.u16(),
                    id: id(rng),
                };
                send(rng, r)
            }
            53..=58 => {
                let r = Req::AdvertiseService {
                    service: rng.u8(),
                    id: id(rng),
                };
                send(rng, r)
            }
            59..=61 => {
                let r = Req::UnadvertiseService {
                    service: rng.u8(),
                    id: id(rng),
                };
                send(rng, r)
            }
            62..=76 => {
                let r = Req::Call {
                    service: rng.u8(),
                    timeout: rng.u8(),
                    args: rng.u16(),
                    id: id(rng),
                };
                send(rng, r)
            }
            77..=93 => {
                let r = Req::Respond {
                    pick: rng.u8(),
                    kind: rng.u8(),
                    result: rng.u8(),
                    status: rng.u8(),
                };
                send(rng, r)
            }
            94..=96 => {
                let r = Req::Malformed {
                    kind: rng.u8(),
                    id: id(rng),
                };
                send(rng, r)
            }
            97..=98 => {
                let max = if rng.below(4) == 0 { 256 } else { 24 };
                let n = rng.below(max) as usize;
                let bytes = (0..n).map(|_| rng.u8()).collect();
                send(rng, Req::Garbage { bytes })
            }
            _ => send(rng, Req::Blank),
        }
    }
}

/// Splits fuzzer bytes into a configuration (first two bytes) and at most
/// 400 actions.
pub fn actions_from_bytes(data: &[u8]) -> (SimConfig, Vec<Action>) {
    let mut b = Bytes::new(data);
    let cfg = SimConfig::from_selector(u64::from(b.u16()));
    let mut actions = Vec::new();
    while actions.len() < 400 {
        match Action::decode(&mut b) {
            Some(a) => actions.push(a),
            None => break,
        }
    }
    (cfg, actions)
}

/// The bytes [`actions_from_bytes`] reads back as `selector` and `actions`.
pub fn actions_to_bytes(selector: u16, actions: &[Action]) -> Vec<u8> {
    let mut out = selector.to_le_bytes().to_vec();
    for a in actions {
        a.encode(&mut out);
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Model
// ---------------------------------------------------------------------------------------------

/// An invariant broken at some step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub step: u64,
    pub what: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "step {}: {}", self.step, self.what)
    }
}

impl std::error::Error for Violation {}

/// How a client reads its output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReadMode {
    All,
    Stopped,
    /// At most this many bytes per step.
    Slow(usize),
}

/// A request id: the JSON text sent and its canonical form (map key).
#[derive(Debug, Clone)]
struct Id {
    raw: String,
    key: String,
}

/// A publish frame a subscriber must receive unless it is shed.
#[derive(Debug)]
struct TopicFrame {
    bytes: Vec<u8>,
}

/// What a caller expects for one call id.
#[derive(Debug)]
enum Resp {
    /// In flight: model call index. Receiving a response now is a bug.
    Pending(usize),
    Failure {
        service: String,
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
}

#[derive(Debug, Default)]
struct Expect {
    /// Statuses with an id: (canonical id, is error) -> count.
    statuses: HashMap<(String, bool), u32>,
    anon_info: u32,
    anon_error: u32,
    /// Forwarded calls this provider must receive, in order.
    forwards: VecDeque<usize>,
    /// Responses by canonical caller id.
    responses: HashMap<String, Resp>,
    topic: VecDeque<TopicFrame>,
    /// Topic bytes the hub reported shed for this client and not yet seen
    /// missing.
    owed_drop: u64,
}

#[derive(Debug)]
struct Client {
    conn: ConnRef,
    mode: ReadMode,
    subs: BTreeSet<String>,
    pubs: BTreeSet<String>,
    next_id: u64,
    inbuf: Vec<u8>,
    exp: Expect,
    /// Raw provider-side ids this client received in forwarded calls.
    learned: Vec<String>,
    /// Model of the hub's `out_since`.
    out_since: Instant,
    empty_at_start: bool,
    wrote: bool,
    /// The simulation closed it (EOF or reset) this step.
    closed_by_us: bool,
}

#[derive(Debug)]
struct CallModel {
    caller: ConnRef,
    caller_slot: usize,
    id_key: String,
    service: String,
    args: Value,
    provider: ConnRef,
    /// Timer tick (from the hub's creation) at which it times out.
    due_tick: u64,
    alive: bool,
}

/// What happened during a simulation (for tuning and reports).
#[derive(Debug, Default, Clone)]
pub struct Counts {
    pub steps: u64,
    pub lines_sent: u64,
    pub lines_received: u64,
    pub publishes_received: u64,
    pub topic_bytes_shed: u64,
    pub calls_forwarded: u64,
    pub responses_ok: u64,
    pub responses_failed: u64,
    pub stale_responses: u64,
    pub rejected_connections: u64,
    pub closes_overflow: u64,
    pub closes_stall: u64,
    pub closes_by_client: u64,
    pub too_long: u64,
}

/// The simulation: a hub, a fake clock and the model. See the module docs.
pub struct Sim {
    hub: Hub,
    limits: Limits,
    base: Instant,
    offset: Duration,
    rng: Rng,
    clients: Vec<Option<Client>>,
    services: BTreeMap<String, ConnRef>,
    calls: Vec<CallModel>,
    rg_map: HashMap<String, usize>,
    all_learned: Vec<String>,
    counter: u64,
    step_no: u64,
    max_frame: usize,
    counts: Counts,
}

fn json_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// `s` as a JSON string; with `escape`, every ASCII character as `\u00XX`.
fn jstr(s: &str, escape: bool) -> String {
    if !escape {
        return json_string(s);
    }
    let mut o = String::from("\"");
    for ch in s.chars() {
        if ch.is_ascii() {
            let _ = write!(o, "\\u{:04x}", ch as u32);
        } else {
            o.push(ch);
        }
    }
    o.push('"');
    o
}

fn canon(v: &Value) -> String {
    v.to_string()
}

fn conn_tuple(c: ConnRef) -> (u32, u32) {
    (c.key, c.gen)
}

impl Sim {
    pub fn new(cfg: SimConfig) -> Sim {
        rosgate_core::log::set_level(LogLevel::Error);
        let base = Instant::now();
        Sim {
            hub: Hub::new(cfg.limits.clone(), base),
            limits: cfg.limits,
            base,
            offset: Duration::ZERO,
            rng: Rng::new(cfg.seed),
            clients: (0..MAX_CLIENTS).map(|_| None).collect(),
            services: BTreeMap::new(),
            calls: Vec::new(),
            rg_map: HashMap::new(),
            all_learned: Vec::new(),
            counter: 0,
            step_no: 0,
            max_frame: 0,
            counts: Counts::default(),
        }
    }

    pub fn hub(&self) -> &Hub {
        &self.hub
    }

    pub fn counts(&self) -> &Counts {
        &self.counts
    }

    pub fn now(&self) -> Instant {
        self.base + self.offset
    }

    fn violation(&self, what: impl Into<String>) -> Violation {
        Violation {
            step: self.step_no,
            what: what.into(),
        }
    }

    fn client(&self, slot: usize) -> &Client {
        self.clients[slot].as_ref().expect("live slot")
    }

    fn client_mut(&mut self, slot: usize) -> &mut Client {
        self.clients[slot].as_mut().expect("live slot")
    }

    /// The slot of the live client `c`, if any.
    fn slot_of(&self, c: ConnRef) -> Option<usize> {
        self.clients
            .iter()
            .position(|x| x.as_ref().is_some_and(|x| x.conn == c))
    }

    /// `slot` if live, else the next live slot after it.
    fn resolve(&self, slot: u8) -> Option<usize> {
        let s = slot as usize % MAX_CLIENTS;
        (0..MAX_CLIENTS)
            .map(|i| (s + i) % MAX_CLIENTS)
            .find(|&i| self.clients[i].is_some())
    }

    /// From `slot` on, the first client that received a call still in flight.
    fn holder(&self, slot: u8) -> Option<usize> {
        let s = slot as usize % MAX_CLIENTS;
        (0..MAX_CLIENTS).map(|i| (s + i) % MAX_CLIENTS).find(|&i| {
            self.clients[i].as_ref().is_some_and(|c| {
                c.learned.iter().any(|raw| {
                    self.rg_map
                        .get(raw)
                        .is_some_and(|&k| self.calls[k].alive && self.calls[k].provider == c.conn)
                })
            })
        })
    }

    fn tick_of(&self, since_base: Duration) -> u64 {
        (since_base.as_nanos() / Duration::from_millis(TIMER_TICK_MS).as_nanos()) as u64
    }

    // ----- one step ------------------------------------------------------------------------

    /// Applies one action, then runs the rest of a loop turn (expire, flush,
    /// free) and checks every invariant.
    pub fn step(&mut self, action: &Action) -> Result<(), Violation> {
        self.step_no += 1;
        self.counts.steps += 1;
        for c in self.clients.iter_mut().flatten() {
            c.empty_at_start = self.hub.out(c.conn.key).is_none_or(|q| q.is_empty());
            c.wrote = false;
            c.closed_by_us = false;
        }
        match action {
            Action::Connect => self.connect()?,
            Action::Disconnect { slot, how } => self.disconnect(*slot, *how),
            Action::Read { slot, mode } => {
                if let Some(s) = self.resolve(*slot) {
                    self.client_mut(s).mode = match *mode {
                        0 => ReadMode::All,
                        1 => ReadMode::Stopped,
                        n => ReadMode::Slow(4 * n as usize),
                    };
                }
            }
            Action::Clock { v } => {
                self.offset += Duration::from_micros(Action::clock_micros(*v));
            }
            Action::Send {
                slot,
                style,
                split,
                req,
            } => {
                // A response with a live call id goes from a provider that
                // holds one, if any does.
                let target = match req {
                    Req::Respond { kind, .. } if kind % 8 < 3 => {
                        self.holder(*slot).or_else(|| self.resolve(*slot))
                    }
                    _ => self.resolve(*slot),
                };
                if let Some(s) = target {
                    self.send(s, *style, *split, req)?;
                }
            }
        }
        self.expire_phase()?;
        self.flush_phase()?;
        self.free_phase()?;
        self.end_of_step()
    }

    fn connect(&mut self) -> Result<(), Violation> {
        let Some(slot) = self.clients.iter().position(Option::is_none) else {
            return Ok(());
        };
        let live = self.clients.iter().flatten().count();
        let now = self.now();
        let rejected_before = self.hub.counters().get(Counter::ConnectionsRejected);
        match self.hub.open(now) {
            None => {
                if live < self.limits.max_connections {
                    return Err(self.violation(format!(
                        "open refused with {live} of {} connections open",
                        self.limits.max_connections
                    )));
                }
                if self.hub.counters().get(Counter::ConnectionsRejected) != rejected_before + 1 {
                    return Err(self.violation("refused open not counted"));
                }
                let frame = self.hub.rejection_frame(Transport::Tcp);
                let v: Value = serde_json::from_slice(&frame)
                    .map_err(|e| self.violation(format!("rejection frame is not JSON: {e}")))?;
                if v["op"] != "status" || v["level"] != "error" || !frame.ends_with(b"\n") {
                    return Err(self.violation(format!("bad rejection frame {v}")));
                }
                self.counts.rejected_connections += 1;
            }
            Some(r) => {
                if live >= self.limits.max_connections {
                    return Err(self.violation(format!(
                        "open accepted with {live} of {} connections open",
                        self.limits.max_connections
                    )));
                }
                if self.clients.iter().flatten().any(|c| c.conn.key == r.key) {
                    return Err(self.violation(format!("slab key {} handed out twice", r.key)));
                }
                if self.hub.conn_ref(r.key) != Some(r) {
                    return Err(self.violation("conn_ref disagrees with open"));
                }
                self.clients[slot] = Some(Client {
                    conn: r,
                    mode: ReadMode::All,
                    subs: BTreeSet::new(),
                    pubs: BTreeSet::new(),
                    next_id: 0,
                    inbuf: Vec::new(),
                    exp: Expect::default(),
                    learned: Vec::new(),
                    out_since: now,
                    empty_at_start: true,
                    wrote: false,
                    closed_by_us: false,
                });
            }
        }
        Ok(())
    }

    fn disconnect(&mut self, slot: u8, how: u8) {
        let Some(s) = self.resolve(slot) else { return };
        let now = self.now();
        let key = self.client(s).conn.key;
        self.client_mut(s).closed_by_us = true;
        match how % 3 {
            0 => self.hub.on_eof(key, now),
            1 => self.hub.close(key, CloseReason::Reset, now),
            _ => {
                // A complete request without its newline: ignored at EOF.
                let partial = br#"{"op":"subscribe","topic":"/a","type":"t","id":"never"}"#;
                self.counts.lines_sent += 1;
                self.hub.on_bytes(key, partial, now);
                self.hub.on_eof(key, now);
            }
        }
    }

    fn fresh_id(&mut self, slot: usize, style: u8) -> Option<Id> {
        let c = self.client_mut(slot);
        c.next_id += 1;
        let n = c.next_id;
        let raw = match style % 7 {
            0 => return None,
            1 => format!("\"c{n}\""),
            2 => format!("{n}"),
            3 => format!("{{\"n\":{n}}}"),
            4 => format!("[{n},\"c\"]"),
            5 => format!("\"\\u0062{n}\""),
            _ => format!("{n}.5"),
        };
        let v: Value = serde_json::from_str(&raw).expect("sim id is JSON");
        Some(Id {
            key: canon(&v),
            raw,
        })
    }

    fn expect_status(&mut self, slot: usize, id: Option<&Id>, error: bool) {
        let e = &mut self.client_mut(slot).exp;
        match id {
            Some(id) => *e.statuses.entry((id.key.clone(), error)).or_default() += 1,
            None if error => e.anon_error += 1,
            None => e.anon_info += 1,
        }
    }

    /// A JSON payload with a unique counter; `spaced` adds insignificant
    /// whitespace (kept byte for byte by the gateway).
    fn payload(&mut self, shape: u16, spaced: bool) -> String {
        self.counter += 1;
        let n = self.counter;
        let fill = "x".repeat(((shape >> 2) % 700) as usize);
        let sp = if spaced { " " } else { "" };
        match shape % 4 {
            0 => format!("{{{sp}\"seq\"{sp}:{sp}{n},{sp}\"d\":{sp}\"{fill}\"{sp}}}"),
            1 => format!("[{sp}{n},{sp}\"{fill}\",null,true,-1.5e3,{sp}{{\"\\u00e9\":[]}}{sp}]"),
            2 => format!("\"s{n} {fill} \\\" \\\\ é\""),
            _ => format!("{{\"n\":{n},\"nested\":{{\"a\":[1,{{\"b\":\"{fill}\"}}]}},\"u\":12345678901234567890}}"),
        }
    }

    /// Builds the line for `members` in `style`.
    fn assemble(members: &[(&str, String)], style: u8) -> Vec<u8> {
        let esc = style & 4 != 0;
        let spaced = style & 2 != 0;
        let mut m: Vec<(String, String)> = members
            .iter()
            .map(|(k, v)| (jstr(k, esc), v.clone()))
            .collect();
        if style & 16 != 0 {
            m.reverse();
        }
        if style & 8 != 0 {
            let at = m.len() / 2;
            m.insert(
                at,
                (
                    "\"x_extra\"".into(),
                    r#"{"op":"subscribe","id":[1,{"topic":"/zz"}]}"#.into(),
                ),
            );
        }
        if style & 32 != 0 {
            for (k, decoy) in [
                ("op", "\"unadvertise\""),
                ("topic", "\"/decoy\""),
                ("service", "\"/decoy\""),
                ("id", "\"decoy\""),
                ("msg", "{\"decoy\":1}"),
                ("values", "\"decoy\""),
            ] {
                if members.iter().any(|(mk, _)| *mk == k) {
                    m.insert(0, (json_string(k), decoy.into()));
                }
            }
        }
        let (colon, comma) = if spaced { (" : ", " , ") } else { (":", ",") };
        let mut s = String::from(if spaced { "{ " } else { "{" });
        for (i, (k, v)) in m.iter().enumerate() {
            if i > 0 {
                s.push_str(comma);
            }
            s.push_str(k);
            s.push_str(colon);
            s.push_str(v);
        }
        s.push_str(if spaced { " }" } else { "}" });
        s.into_bytes()
    }

    /// Feeds `content` plus its terminator to the hub, whole, byte by byte
    /// or in two halves.
    fn feed(&mut self, slot: usize, content: &[u8], crlf: bool, split: u8) {
        let mut bytes = content.to_vec();
        if crlf {
            bytes.push(b'\r');
        }
        bytes.push(b'\n');
        let key = self.client(slot).conn.key;
        let now = self.now();
        self.counts.lines_sent += 1;
        match split {
            0 => self.hub.on_bytes(key, &bytes, now),
            255 => {
                for b in bytes.chunks(1) {
                    self.hub.on_bytes(key, b, now);
                }
            }
            s => {
                let cut = bytes.len() * s as usize / 255;
                let (a, b) = bytes.split_at(cut);
                self.hub.on_bytes(key, a, now);
                self.hub.on_bytes(key, b, now);
            }
        }
    }

    fn send(&mut self, slot: usize, style: u8, split: u8, req: &Req) -> Result<(), Violation> {
        let crlf = style & 1 != 0;
        let esc = style & 4 != 0;
        let spaced = style & 2 != 0;
        let me = self.client(slot).conn;
        let id_member = |id: &Option<Id>, m: &mut Vec<(&str, String)>| {
            if let Some(id) = id {
                m.push(("id", id.raw.clone()));
            }
        };
        // Build the line first; the model effect is applied only if the
        // line fits the limit.
        let mut members: Vec<(&str, String)> = Vec::new();
        let content: Vec<u8>;
        let effect: Effect;
        match req {
            Req::Subscribe { topic, id }
            | Req::Unsubscribe { topic, id }
            | Req::Advertise { topic, id }
            | Req::Unadvertise { topic, id } => {
                let name = TOPICS[*topic as usize % TOPICS.len()];
                let id = self.fresh_id(slot, *id);
                let op = match req {
                    Req::Subscribe { .. } => "subscribe",
                    Req::Unsubscribe { .. } => "unsubscribe",
                    Req::Advertise { .. } => "advertise",
                    _ => "unadvertise",
                };
                members.push(("op", json_string(op)));
                members.push(("topic", jstr(name, esc)));
                if matches!(req, Req::Subscribe { .. } | Req::Advertise { .. }) {
                    members.push(("type", jstr("std_msgs/String", esc)));
                }
                id_member(&id, &mut members);
                content = Self::assemble(&members, style);
                effect = Effect::Topic {
                    op,
                    name: name.to_string(),
                    id,
                };
            }
            Req::Publish { topic, payload, id } => {
                let name = TOPICS[*topic as usize % TOPICS.len()];
                let id = self.fresh_id(slot, *id);
                let msg = self.payload(*payload, spaced);
                members.push(("op", json_string("publish")));
                members.push(("topic", jstr(name, esc)));
                members.push(("msg", msg.clone()));
                id_member(&id, &mut members);
                content = Self::assemble(&members, style);
                effect = Effect::Publish {
                    name: name.to_string(),
                    msg,
                };
            }
            Req::AdvertiseService { service, id } | Req::UnadvertiseService { service, id } => {
                let name = SERVICES[*service as usize % SERVICES.len()];
                let id = self.fresh_id(slot, *id);
                let adv = matches!(req, Req::AdvertiseService { .. });
                let op = if adv {
                    "advertise_service"
                } else {
                    "unadvertise_service"
                };
                members.push(("op", json_string(op)));
                members.push(("service", jstr(name, esc)));
                if adv {
                    members.push(("type", jstr("std_srvs/Trigger", esc)));
                }
                id_member(&id, &mut members);
                content = Self::assemble(&members, style);
                effect = Effect::Service {
                    adv,
                    name: name.to_string(),
                    id,
                };
            }
            Req::Call {
                service,
                timeout,
                args,
                id,
            } => {
                let name = SERVICES[*service as usize % SERVICES.len()];
                let id = match self.fresh_id(slot, *id) {
                    Some(id) => id,
                    None => self.fresh_id(slot, 1).expect("style 1 has an id"),
                };
                let args_raw = self.payload(*args, spaced);
                let to = TIMEOUTS[*timeout as usize % TIMEOUTS.len()];
                members.push(("op", json_string("call_service")));
                members.push(("service", jstr(name, esc)));
                members.push(("args", args_raw.clone()));
                members.push(("id", id.raw.clone()));
                if let Some(t) = to {
                    members.push(("timeout", t.to_string()));
                }
                content = Self::assemble(&members, style);
                effect = Effect::Call {
                    name: name.to_string(),
                    args: serde_json::from_str(&args_raw).expect("sim args are JSON"),
                    timeout: to,
                    id,
                };
            }
            Req::Respond {
                pick,
                kind,
                result,
                status,
            } => {
                let c = self.client(slot);
                let own = &c.learned;
                let pick = *pick as usize;
                let alive = |raw: &String| {
                    self.rg_map
                        .get(raw)
                        .is_some_and(|&k| self.calls[k].alive && self.calls[k].provider == me)
                };
                let forged = |n: usize| {
                    [
                        "\"rg-999999999999\"",
                        "\"rg-18446744073709551616\"",
                        "\"rg-\"",
                        "\"RG-1\"",
                        "\"x-1\"",
                        "17",
                        "null",
                        "{\"rg\":1}",
                        "\"rg-1 \"",
                        "[\"rg-1\"]",
                    ][n % 10]
                        .to_string()
                };
                let k = kind % 8;
                let id_raw: Option<String> = match k {
                    0..=3 => {
                        let prefer_alive = k < 3;
                        let pool: Vec<&String> =
                            own.iter().filter(|r| alive(r) == prefer_alive).collect();
                        if !pool.is_empty() {
                            Some(pool[pick % pool.len()].clone())
                        } else if !own.is_empty() {
                            Some(own[pick % own.len()].clone())
                        } else {
                            Some(forged(pick))
                        }
                    }
                    4 => {
                        let others: Vec<&String> = self
                            .all_learned
                            .iter()
                            .filter(|r| !own.contains(r))
                            .collect();
                        if others.is_empty() {
                            Some(forged(pick))
                        } else {
                            Some(others[pick % others.len()].clone())
                        }
                    }
                    5 | 7 => Some(forged(pick)),
                    _ => None,
                };
                self.counter += 1;
                let values_raw = format!(
                    "{{\"by\":{slot},\"k\":{},\"for\":{}}}",
                    self.counter,
                    id_raw.as_deref().unwrap_or("null")
                );
                let result_raw = RESULTS[*result as usize % RESULTS.len()];
                let status_raw = STATUSES[*status as usize % STATUSES.len()];
                let service_name = id_raw
                    .as_ref()
                    .and_then(|r| self.rg_map.get(r))
                    .map_or("/s1", |&k| self.calls[k].service.as_str())
                    .to_string();
                members.push(("op", json_string("service_response")));
                members.push(("service", jstr(&service_name, esc)));
                if let Some(r) = &id_raw {
                    members.push(("id", r.clone()));
                }
                let missing_values = k == 7;
                if !missing_values {
                    members.push(("values", values_raw.clone()));
                }
                members.push(("result", result_raw.to_string()));
                if let Some(s) = status_raw {
                    members.push(("status", s.to_string()));
                }
                content = Self::assemble(&members, style);
                let id = id_raw.map(|raw| {
                    let v: Value = serde_json::from_str(&raw).expect("id JSON");
                    Id {
                        key: canon(&v),
                        raw,
                    }
                });
                effect = Effect::Respond {
                    id,
                    missing_values,
                    values: serde_json::from_str(&values_raw).expect("values JSON"),
                    result: serde_json::from_str(result_raw).expect("result JSON"),
                    status: status_raw.map(|s| serde_json::from_str(s).expect("status JSON")),
                };
            }
            Req::Malformed { kind, id } => {
                let id = self.fresh_id(slot, *id);
                let (line, with_id) = Self::malformed(*kind, id.as_ref(), style);
                content = line;
                effect = Effect::Error {
                    id: with_id.then_some(id).flatten(),
                };
            }
            Req::Garbage { bytes } => {
                let mut g = vec![b'#'];
                g.extend(bytes.iter().copied().filter(|&b| b != b'\n'));
                content = g;
                effect = Effect::Error { id: None };
            }
            Req::Blank => {
                content = Vec::new();
                effect = Effect::Nothing;
            }
        }

        let content_len = content.len() + usize::from(crlf);
        let visible = {
            let mut c = &content[..];
            if !crlf {
                if let Some(b'\r') = c.last() {
                    c = &c[..c.len() - 1];
                }
            }
            !c.is_empty()
        };
        if content_len > self.limits.max_line_bytes {
            self.counts.too_long += 1;
            self.expect_status(slot, None, true);
            self.feed(slot, &content, crlf, split);
            return Ok(());
        }
        if !visible {
            self.feed(slot, &content, crlf, split);
            return Ok(());
        }
        self.apply_effect(slot, effect, &content, crlf, split)
    }

    /// A refused request line and whether its error status carries the id.
    fn malformed(kind: u8, id: Option<&Id>, style: u8) -> (Vec<u8>, bool) {
        let idm = |m: &mut Vec<(&str, String)>| {
            if let Some(id) = id {
                m.push(("id", id.raw.clone()));
            }
        };
        let mut m: Vec<(&str, String)> = Vec::new();
        match kind % 10 {
            0 => {
                m.push(("op", "\"nope\"".into()));
                idm(&mut m);
            }
            1 => {
                m.push(("op", "\"subscribe\"".into()));
                idm(&mut m);
            }
            2 => {
                m.push(("op", "\"publish\"".into()));
                m.push(("topic", "5".into()));
                m.push(("msg", "1".into()));
                idm(&mut m);
            }
            3 => {
                // call_service without an id: refused, and nothing to echo.
                m.push(("op", "\"call_service\"".into()));
                m.push(("service", "\"/s1\"".into()));
                m.push(("args", "{}".into()));
                return (Self::assemble(&m, style & !32), false);
            }
            4 => {
                m.push(("op", "5".into()));
                idm(&mut m);
            }
            5 => idm(&mut m),
            6 => return (b"[1,2]".to_vec(), false),
            7 => {
                let deep = format!("{}{}", "[".repeat(130), "]".repeat(130));
                m.push(("op", "\"publish\"".into()));
                m.push(("topic", "\"/a\"".into()));
                m.push(("msg", deep));
                idm(&mut m);
            }
            8 => {
                m.push(("op", "\"call_service\"".into()));
                m.push(("service", "\"/s1\"".into()));
                m.push(("args", "[]".into()));
                m.push(("timeout", "\"soon\"".into()));
                idm(&mut m);
            }
            _ => {
                // Invalid UTF-8 inside a string: the id cannot be read.
                let mut l = br#"{"op":"subscribe","type":"t","topic":"/"#.to_vec();
                l.push(0xff);
                l.extend_from_slice(b"\"");
                if let Some(id) = id {
                    l.extend_from_slice(b",\"id\":");
                    l.extend_from_slice(id.raw.as_bytes());
                }
                l.push(b'}');
                return (l, false);
            }
        }
        let with_id = id.is_some();
        (Self::assemble(&m, style), with_id)
    }

    fn apply_effect(
        &mut self,
        slot: usize,
        effect: Effect,
        content: &[u8],
        crlf: bool,
        split: u8,
    ) -> Result<(), Violation> {
        let me = self.client(slot).conn;
        match effect {
            Effect::Nothing => self.feed(slot, content, crlf, split),
            Effect::Error { id } => {
                self.expect_status(slot, id.as_ref(), true);
                self.feed(slot, content, crlf, split);
            }
            Effect::Topic { op, name, id } => {
                let c = self.client_mut(slot);
                match op {
                    "subscribe" => c.subs.insert(name),
                    "unsubscribe" => c.subs.remove(&name),
                    "advertise" => c.pubs.insert(name),
                    _ => c.pubs.remove(&name),
                };
                self.expect_status(slot, id.as_ref(), false);
                self.feed(slot, content, crlf, split);
            }
            Effect::Publish { name, msg } => {
                let mut frame = encode::publish_prefix(&name).into_vec();
                frame.extend_from_slice(msg.as_bytes());
                frame.extend_from_slice(b"}\n");
                let len = frame.len();
                self.max_frame = self.max_frame.max(len);
                let before: Vec<(usize, usize)> = self
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
                self.feed(slot, content, crlf, split);
                let mut subscribers = 0u64;
                let mut shed_total = 0u64;
                let cap = self.limits.max_queue_bytes;
                for (s, b) in before {
                    let c = self.clients[s].as_ref().expect("live");
                    let after = self.hub.out(c.conn.key).map_or(0, |q| q.topic_bytes());
                    if !c.subs.contains(&name) {
                        if after != b {
                            return Err(self.violation(format!(
                                "publish on {name:?} changed the topic queue of non-subscriber slot {s} ({b} -> {after})"
                            )));
                        }
                        continue;
                    }
                    subscribers += 1;
                    if after < len || b + len < after {
                        return Err(self.violation(format!(
                            "slot {s}: topic bytes {b} -> {after} after queuing a {len}-byte frame (the newest frame must stay)"
                        )));
                    }
                    if after > cap.max(len + self.max_frame) {
                        return Err(self.violation(format!(
                            "slot {s}: {after} topic bytes queued, limit {cap}"
                        )));
                    }
                    let shed = (b + len - after) as u64;
                    shed_total += shed;
                    let c = self.clients[s].as_mut().expect("live");
                    c.exp.owed_drop += shed;
                    c.exp.topic.push_back(TopicFrame {
                        bytes: frame.clone(),
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
            }
            Effect::Service { adv, name, id } => {
                if adv {
                    if name.starts_with(RESERVED_PREFIX) {
                        self.expect_status(slot, id.as_ref(), true);
                    } else {
                        let old = self.services.insert(name, me);
                        if let Some(old) = old.filter(|&o| o != me) {
                            let s = self.slot_of(old).expect("providers are live");
                            self.expect_status(s, None, false);
                        }
                        self.expect_status(slot, id.as_ref(), false);
                    }
                } else if self.services.get(&name) == Some(&me) {
                    self.services.remove(&name);
                    let failing: Vec<usize> = (0..self.calls.len())
                        .filter(|&k| {
                            let c = &self.calls[k];
                            c.alive && c.provider == me && c.service == name
                        })
                        .collect();
                    for k in failing {
                        self.fail_call(k);
                    }
                    self.expect_status(slot, id.as_ref(), false);
                } else {
                    self.expect_status(slot, id.as_ref(), true);
                }
                self.feed(slot, content, crlf, split);
            }
            Effect::Call {
                name,
                args,
                timeout,
                id,
            } => {
                let in_flight = self
                    .calls
                    .iter()
                    .filter(|c| c.alive && c.caller == me)
                    .count();
                if name == STATS_SERVICE {
                    let g = self.model_gauges();
                    self.client_mut(slot)
                        .exp
                        .responses
                        .insert(id.key.clone(), Resp::Stats(g));
                } else if in_flight >= self.limits.max_calls_per_conn {
                    self.client_mut(slot)
                        .exp
                        .responses
                        .insert(id.key.clone(), Resp::Failure { service: name });
                } else if let Some(&provider) = self.services.get(&name) {
                    let secs = timeout.and_then(|t| {
                        if t == "null" {
                            None
                        } else {
                            t.parse::<f64>().ok()
                        }
                    });
                    let to = match secs {
                        Some(secs) if secs.is_finite() && secs > 0.0 => Duration::from_secs_f64(
                            secs.min(self.limits.max_call_timeout.as_secs_f64()),
                        ),
                        _ => self.limits.call_timeout,
                    };
                    let deadline = self.offset + to;
                    let tick = Duration::from_millis(TIMER_TICK_MS).as_nanos();
                    let due_tick = deadline.as_nanos().div_ceil(tick) as u64;
                    let k = self.calls.len();
                    self.calls.push(CallModel {
                        caller: me,
                        caller_slot: slot,
                        id_key: id.key.clone(),
                        service: name,
                        args,
                        provider,
                        due_tick,
                        alive: true,
                    });
                    self.client_mut(slot)
                        .exp
                        .responses
                        .insert(id.key.clone(), Resp::Pending(k));
                    let ps = self.slot_of(provider).expect("providers are live");
                    self.client_mut(ps).exp.forwards.push_back(k);
                    self.counts.calls_forwarded += 1;
                } else {
                    self.client_mut(slot)
                        .exp
                        .responses
                        .insert(id.key.clone(), Resp::Failure { service: name });
                }
                self.feed(slot, content, crlf, split);
            }
            Effect::Respond {
                id,
                missing_values,
                values,
                result,
                status,
            } => {
                if missing_values {
                    self.expect_status(slot, id.as_ref(), true);
                } else {
                    let call = id
                        .as_ref()
                        .and_then(|id| self.rg_map.get(&id.raw))
                        .copied()
                        .filter(|&k| self.calls[k].alive && self.calls[k].provider == me);
                    match call {
                        Some(k) => {
                            self.calls[k].alive = false;
                            let (caller, cs, key) = {
                                let c = &self.calls[k];
                                (c.caller, c.caller_slot, c.id_key.clone())
                            };
                            let service = self.calls[k].service.clone();
                            if self.clients[cs].as_ref().is_some_and(|c| c.conn == caller) {
                                self.set_resp(
                                    cs,
                                    k,
                                    &key,
                                    Resp::Success {
                                        service,
                                        values,
                                        result,
                                        status,
                                    },
                                )?;
                            }
                        }
                        None => {
                            self.counts.stale_responses += 1;
                            self.expect_status(slot, id.as_ref(), true);
                        }
                    }
                }
                self.feed(slot, content, crlf, split);
            }
        }
        Ok(())
    }

    fn set_resp(&mut self, slot: usize, k: usize, key: &str, r: Resp) -> Result<(), Violation> {
        let c = self.clients[slot].as_mut().expect("live");
        let current = c.exp.responses.get(key);
        if matches!(current, Some(Resp::Pending(x)) if *x == k) {
            c.exp.responses.insert(key.to_string(), r);
            return Ok(());
        }
        let msg = format!("model: call {k} completes but its caller expects {current:?}");
        Err(self.violation(msg))
    }

    /// The model's side of a call failing (timeout, provider gone,
    /// unadvertised): the caller, if still connected, gets one failure.
    fn fail_call(&mut self, k: usize) {
        let c = &mut self.calls[k];
        c.alive = false;
        let (caller, cs, key, service) =
            (c.caller, c.caller_slot, c.id_key.clone(), c.service.clone());
        if let Some(cl) = self.clients[cs].as_mut().filter(|cl| cl.conn == caller) {
            cl.exp.responses.insert(key, Resp::Failure { service });
        }
    }

    /// connections_open, calls_pending, topics, subscriptions, publishers,
    /// services.
    fn model_gauges(&self) -> [u64; 6] {
        let live = self.clients.iter().flatten();
        let mut topics = BTreeSet::new();
        let (mut subs, mut pubs) = (0, 0);
        for c in live.clone() {
            subs += c.subs.len();
            pubs += c.pubs.len();
            topics.extend(c.subs.iter().chain(c.pubs.iter()));
        }
        [
            live.count() as u64,
            self.calls.iter().filter(|c| c.alive).count() as u64,
            topics.len() as u64,
            subs as u64,
            pubs as u64,
            self.services.len() as u64,
        ]
    }

    // ----- the rest of the loop turn ---------------------------------------------------------

    fn expire_phase(&mut self) -> Result<(), Violation> {
        let now = self.now();
        self.hub.expire(now);
        let tick_now = self.tick_of(self.offset);
        let due: Vec<usize> = (0..self.calls.len())
            .filter(|&k| self.calls[k].alive && self.calls[k].due_tick <= tick_now)
            .collect();
        for k in due {
            self.fail_call(k);
        }
        // Write stalls: required once pending for write_stall plus the
        // longest sweep interval (a quarter of it, 10 ms to 1 s).
        let stall = self.limits.write_stall;
        let sweep = (stall / 4).clamp(Duration::from_millis(10), Duration::from_secs(1));
        for (s, c) in self.clients.iter().enumerate() {
            let Some(c) = c else { continue };
            let closing = self.hub.conn(c.conn.key).is_some_and(|x| !x.is_open());
            if !c.empty_at_start
                && !closing
                && now.saturating_duration_since(c.out_since) >= stall + sweep
            {
                return Err(self.violation(format!(
                    "slot {s}: output pending without progress for {:?} (write_stall {stall:?}) but not closed",
                    now.saturating_duration_since(c.out_since)
                )));
            }
        }
        Ok(())
    }

    fn flush_phase(&mut self) -> Result<(), Violation> {
        for s in 0..MAX_CLIENTS {
            let Some(c) = self.clients[s].as_ref() else {
                continue;
            };
            if self.hub.conn(c.conn.key).is_some_and(|x| !x.is_open()) {
                continue;
            }
            let budget = match c.mode {
                ReadMode::All => usize::MAX,
                ReadMode::Slow(n) => n,
                ReadMode::Stopped => continue,
            };
            self.drain(s, budget, false)?;
            let c = self.client(s);
            if c.inbuf.is_empty() && self.hub.out(c.conn.key).is_none_or(|q| q.is_empty()) {
                self.check_quiescent(s)?;
            }
        }
        Ok(())
    }

    /// Writes up to `budget` bytes of `slot`'s output in random-sized pieces
    /// and checks every complete line received.
    fn drain(&mut self, slot: usize, mut budget: usize, closing: bool) -> Result<(), Violation> {
        let key = self.client(slot).conn.key;
        let now = self.now();
        let mut got = Vec::new();
        let mut wrote = false;
        while let Some(q) = self.hub.out(key) {
            if q.is_empty() || budget == 0 {
                break;
            }
            let mut iov = [IoSlice::new(&[]); MAX_IOVECS];
            let n = q.fill(&mut iov, budget);
            let total: usize = iov[..n].iter().map(|s| s.len()).sum();
            if total == 0 {
                return Err(self.violation("fill returned nothing for a non-empty queue"));
            }
            let mut want = total.min(budget);
            if self.rng.below(4) == 0 {
                want = 1 + self.rng.below(want as u64) as usize;
            }
            let mut left = want;
            for s in &iov[..n] {
                let t = s.len().min(left);
                got.extend_from_slice(&s[..t]);
                left -= t;
                if left == 0 {
                    break;
                }
            }
            self.hub.wrote(key, want, now);
            budget -= want;
            wrote = true;
        }
        let c = self.client_mut(slot);
        c.wrote |= wrote;
        c.inbuf.extend_from_slice(&got);
        let Some(end) = c.inbuf.iter().rposition(|&b| b == b'\n') else {
            return Ok(());
        };
        let rest = c.inbuf.split_off(end + 1);
        let lines = std::mem::replace(&mut c.inbuf, rest);
        for line in lines.split(|&b| b == b'\n') {
            if line.is_empty() {
                continue;
            }
            self.on_line(slot, line, closing)?;
        }
        Ok(())
    }

    /// Checks one line `slot` received against the model.
    fn on_line(&mut self, slot: usize, line: &[u8], closing: bool) -> Result<(), Violation> {
        self.counts.lines_received += 1;
        let show = || {
            String::from_utf8_lossy(line)
                .chars()
                .take(300)
                .collect::<String>()
        };
        let v: Value = match serde_json::from_slice(line) {
            Ok(v) => v,
            Err(e) => {
                return Err(
                    self.violation(format!("slot {slot} got a non-JSON line ({e}): {}", show()))
                )
            }
        };
        let Some(op) = v.get("op").and_then(Value::as_str) else {
            return Err(self.violation(format!("slot {slot} got a line without op: {}", show())));
        };
        match op {
            "publish" => {
                self.counts.publishes_received += 1;
                let c = self.clients[slot].as_mut().expect("live");
                let pos = c
                    .exp
                    .topic
                    .iter()
                    .position(|f| &f.bytes[..f.bytes.len() - 1] == line);
                let Some(pos) = pos else {
                    return Err(self
                        .violation(format!("slot {slot} got an unexpected publish: {}", show())));
                };
                let step = self.step_no;
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
                    return Err(self.violation(format!("malformed publish frame {}", show())));
                }
            }
            "status" => {
                let level = v.get("level").and_then(Value::as_str);
                let error = match level {
                    Some("error") => true,
                    Some("info") => false,
                    _ => return Err(self.violation(format!("bad status level: {}", show()))),
                };
                if !v.get("msg").is_some_and(Value::is_string) {
                    return Err(self.violation(format!("status without msg: {}", show())));
                }
                let e = &mut self.clients[slot].as_mut().expect("live").exp;
                let ok = match v.get("id") {
                    Some(id) => match e.statuses.get_mut(&(canon(id), error)) {
                        Some(n) if *n > 0 => {
                            *n -= 1;
                            if *n == 0 {
                                e.statuses.remove(&(canon(id), error));
                            }
                            true
                        }
                        _ => false,
                    },
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
                    return Err(
                        self.violation(format!("slot {slot} got an unexpected status: {}", show()))
                    );
                }
            }
            "call_service" => {
                let c = self.clients[slot].as_mut().expect("live");
                let Some(k) = c.exp.forwards.pop_front() else {
                    return Err(self.violation(format!(
                        "slot {slot} got a call it was not the provider for: {}",
                        show()
                    )));
                };
                let call = &self.calls[k];
                let id_raw = match v.get("id") {
                    Some(Value::String(s)) => json_string(s),
                    _ => {
                        return Err(
                            self.violation(format!("forwarded call without string id: {}", show()))
                        )
                    }
                };
                if v.get("service").and_then(Value::as_str) != Some(call.service.as_str())
                    || v.get("args") != Some(&call.args)
                {
                    return Err(self.violation(format!(
                        "slot {slot} got forwarded call {} but expected service {:?} args {}",
                        show(),
                        call.service,
                        call.args
                    )));
                }
                if self.rg_map.insert(id_raw.clone(), k).is_some() {
                    return Err(self.violation(format!("provider-side id {id_raw} issued twice")));
                }
                self.all_learned.push(id_raw.clone());
                self.clients[slot]
                    .as_mut()
                    .expect("live")
                    .learned
                    .push(id_raw);
            }
            "service_response" => {
                let Some(id) = v.get("id") else {
                    return Err(self.violation(format!("response without id: {}", show())));
                };
                let key = canon(id);
                let c = self.clients[slot].as_mut().expect("live");
                let expected = c.exp.responses.remove(&key);
                let service = v.get("service").and_then(Value::as_str);
                let result = v.get("result");
                let bad = |why: &str| format!("slot {slot}: {why}: {}", show());
                match expected {
                    None => {
                        return Err(self.violation(bad(
                            "response for an id with no call (wrong caller or duplicate)",
                        )))
                    }
                    Some(Resp::Pending(k)) => {
                        let msg = bad(&format!("response while model call {k} is still in flight"));
                        return Err(self.violation(msg));
                    }
                    Some(Resp::Failure { service: s }) => {
                        self.counts.responses_failed += 1;
                        if service != Some(s.as_str())
                            || result != Some(&Value::Bool(false))
                            || !v.get("values").is_some_and(Value::is_string)
                        {
                            return Err(self
                                .violation(bad(&format!("expected a failure for service {s:?}"))));
                        }
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
                            let msg = bad(&format!("expected service {s:?} values {values} result {r} status {status:?}"));
                            return Err(self.violation(msg));
                        }
                    }
                    Some(Resp::Stats(g)) => {
                        let vals = &v["values"];
                        let names = [
                            "connections_open",
                            "calls_pending",
                            "topics",
                            "subscriptions",
                            "publishers",
                            "services",
                        ];
                        let got: Vec<Option<u64>> =
                            names.iter().map(|n| vals[n].as_u64()).collect();
                        let want: Vec<Option<u64>> = g.iter().map(|&x| Some(x)).collect();
                        if service != Some(STATS_SERVICE)
                            || result != Some(&Value::Bool(true))
                            || got != want
                        {
                            return Err(self.violation(bad(&format!(
                                "stats gauges {names:?} should be {g:?}"
                            ))));
                        }
                    }
                }
            }
            _ => return Err(self.violation(format!("slot {slot} got unknown op: {}", show()))),
        }
        let _ = closing;
        Ok(())
    }

    /// The hub has no output for `slot`: every expected line arrived.
    fn check_quiescent(&mut self, slot: usize) -> Result<(), Violation> {
        let step = self.step_no;
        let c = self.clients[slot].as_mut().expect("live");
        let v = |what: String| Violation { step, what };
        while let Some(f) = c.exp.topic.pop_front() {
            let n = f.bytes.len() as u64;
            if n > c.exp.owed_drop {
                return Err(v(format!(
                    "slot {slot} never got publish {} and it was not counted as shed",
                    String::from_utf8_lossy(&f.bytes).trim_end()
                )));
            }
            c.exp.owed_drop -= n;
        }
        if c.exp.owed_drop != 0 {
            return Err(v(format!(
                "slot {slot}: {} bytes counted as shed but every frame arrived",
                c.exp.owed_drop
            )));
        }
        if let Some(((id, error), n)) = c.exp.statuses.iter().next() {
            return Err(v(format!(
                "slot {slot} is missing {n} status(es) id={id} error={error}"
            )));
        }
        if c.exp.anon_error + c.exp.anon_info > 0 {
            return Err(v(format!(
                "slot {slot} is missing {} error and {} info statuses without id",
                c.exp.anon_error, c.exp.anon_info
            )));
        }
        if let Some(k) = c.exp.forwards.front() {
            return Err(v(format!("slot {slot} never got forwarded call {k}")));
        }
        if let Some((id, r)) = c
            .exp
            .responses
            .iter()
            .find(|(_, r)| !matches!(r, Resp::Pending(_)))
        {
            return Err(v(format!("slot {slot} never got response id={id}: {r:?}")));
        }
        Ok(())
    }

    fn free_phase(&mut self) -> Result<(), Violation> {
        let now = self.now();
        let mut keys = Vec::new();
        loop {
            self.hub.take_closing(&mut keys);
            if keys.is_empty() {
                return Ok(());
            }
            for &key in &keys {
                let Some(slot) = self
                    .clients
                    .iter()
                    .position(|c| c.as_ref().is_some_and(|c| c.conn.key == key))
                else {
                    return Err(self.violation(format!("hub closed unknown connection key {key}")));
                };
                let (gen, closed_by_us, empty_at_start, out_since, mode) = {
                    let c = self.client(slot);
                    (
                        c.conn.gen,
                        c.closed_by_us,
                        c.empty_at_start,
                        c.out_since,
                        c.mode,
                    )
                };
                let Some(conn) = self.hub.conn(key) else {
                    return Err(self.violation(format!("closing key {key} has no connection")));
                };
                if conn.gen() != gen {
                    return Err(self.violation(format!("closing key {key} has another generation")));
                }
                let reason = conn.closing();
                let control = conn.out().control_bytes();
                let pending = now.saturating_duration_since(out_since);
                match reason {
                    Some(CloseReason::PeerClosed | CloseReason::Reset) if closed_by_us => {
                        self.counts.closes_by_client += 1;
                    }
                    Some(CloseReason::ControlOverflow)
                        if control > self.limits.max_control_bytes =>
                    {
                        self.counts.closes_overflow += 1;
                    }
                    Some(CloseReason::WriteStall)
                        if !empty_at_start && pending >= self.limits.write_stall =>
                    {
                        self.counts.closes_stall += 1;
                    }
                    other => {
                        return Err(self.violation(format!(
                            "slot {slot} closed with {other:?} (closed by us: {closed_by_us}, control bytes {control}, output pending {pending:?}, empty at step start: {empty_at_start})"
                        )));
                    }
                }
                // Last words, like the server's final write attempt.
                if mode != ReadMode::Stopped {
                    let budget = match mode {
                        ReadMode::Slow(n) => n,
                        _ => usize::MAX,
                    };
                    self.drain(slot, budget, true)?;
                }
                self.hub.free(key, now);
                if self.hub.conn_ref(key).is_some_and(|r| r.gen == gen) {
                    return Err(self.violation("free left the connection in place"));
                }
                self.model_close(slot);
            }
        }
    }

    /// The model's side of `free`: registrations withdrawn, calls made
    /// forgotten, calls served failed.
    fn model_close(&mut self, slot: usize) {
        let c = self.clients[slot].take().expect("live");
        let me = c.conn;
        self.services.retain(|_, p| *p != me);
        for call in self.calls.iter_mut().filter(|x| x.alive && x.caller == me) {
            call.alive = false;
        }
        let served: Vec<usize> = (0..self.calls.len())
            .filter(|&k| self.calls[k].alive && self.calls[k].provider == me)
            .collect();
        for k in served {
            self.fail_call(k);
        }
    }

    fn end_of_step(&mut self) -> Result<(), Violation> {
        let now = self.now();
        let max_control = self.limits.max_control_bytes;
        for s in 0..MAX_CLIENTS {
            let Some(c) = self.clients[s].as_mut() else {
                continue;
            };
            let Some(q) = self.hub.out(c.conn.key) else {
                return Err(self.violation(format!("slot {s}: live client has no hub connection")));
            };
            let empty = q.is_empty();
            if c.wrote || (c.empty_at_start && !empty) {
                c.out_since = now;
            }
            if q.control_bytes() > max_control {
                let n = q.control_bytes();
                return Err(self.violation(format!(
                    "slot {s}: {n} control bytes queued (limit {max_control}) and still open"
                )));
            }
        }
        self.check_tables()
    }

    /// The hub's tables equal the model's.
    fn check_tables(&self) -> Result<(), Violation> {
        let g = self.hub.gauges();
        let m = self.model_gauges();
        let h = [
            Gauge::ConnectionsOpen,
            Gauge::CallsPending,
            Gauge::Topics,
            Gauge::Subscriptions,
            Gauge::Publishers,
            Gauge::Services,
        ]
        .map(|x| g.get(x));
        if h != m || self.hub.conn_count() as u64 != m[0] || self.hub.calls().len() as u64 != m[1] {
            return Err(self.violation(format!(
                "gauges [conns, calls, topics, subs, pubs, services]: hub {h:?}, model {m:?}"
            )));
        }
        // Services and their providers.
        let hub_services: BTreeMap<String, (u32, u32)> = self
            .hub
            .registry()
            .services()
            .map(|(n, s)| (n.to_string(), conn_tuple(s.provider())))
            .collect();
        let model_services: BTreeMap<String, (u32, u32)> = self
            .services
            .iter()
            .map(|(n, &p)| (n.clone(), conn_tuple(p)))
            .collect();
        if hub_services != model_services {
            return Err(self.violation(format!(
                "services: hub {hub_services:?}, model {model_services:?}"
            )));
        }
        // Topics, subscribers and publishers.
        type Members = (BTreeSet<(u32, u32)>, BTreeSet<(u32, u32)>);
        let mut model_topics: BTreeMap<String, Members> = BTreeMap::new();
        for c in self.clients.iter().flatten() {
            for t in &c.subs {
                model_topics
                    .entry(t.clone())
                    .or_default()
                    .0
                    .insert(conn_tuple(c.conn));
            }
            for t in &c.pubs {
                model_topics
                    .entry(t.clone())
                    .or_default()
                    .1
                    .insert(conn_tuple(c.conn));
            }
        }
        let hub_topics: BTreeMap<String, Members> = self
            .hub
            .registry()
            .topics()
            .map(|t| {
                (
                    t.name().to_string(),
                    (
                        t.subscribers().iter().copied().map(conn_tuple).collect(),
                        t.publishers().iter().copied().map(conn_tuple).collect(),
                    ),
                )
            })
            .collect();
        if hub_topics != model_topics {
            return Err(self.violation(format!(
                "topics: hub {hub_topics:?}, model {model_topics:?}"
            )));
        }
        // Per-connection indexes.
        for (s, c) in self.clients.iter().enumerate() {
            let Some(c) = c else { continue };
            let Some(hc) = self.hub.conn(c.conn.key) else {
                return Err(self.violation(format!("slot {s} missing from the hub")));
            };
            let made = self
                .calls
                .iter()
                .filter(|x| x.alive && x.caller == c.conn)
                .count();
            let served = self
                .calls
                .iter()
                .filter(|x| x.alive && x.provider == c.conn)
                .count();
            let owned = self.services.values().filter(|&&p| p == c.conn).count();
            let held = self.hub.registry().held_by(c.conn);
            let hub = (
                held.subscriptions,
                held.advertisements,
                held.services,
                self.hub.calls().in_flight(c.conn),
                self.hub.calls().serving(c.conn),
            );
            let model = (c.subs.len(), c.pubs.len(), owned, made, served);
            if hc.gen() != c.conn.gen || !hc.is_open() || hub != model {
                return Err(self.violation(format!(
                    "slot {s} indexes (subs, pubs, services, calls made, calls served): hub {hub:?}, model {model:?}"
                )));
            }
        }
        Ok(())
    }

    /// Lets everyone read, runs the clock past every deadline, checks that
    /// every call got its one response, then disconnects everyone and checks
    /// that every table is empty.
    pub fn finish(&mut self) -> Result<(), Violation> {
        for c in self.clients.iter_mut().flatten() {
            c.mode = ReadMode::All;
        }
        // Settle: output queued by frees is flushed on the next turn.
        for _ in 0..8 {
            self.step(&Action::Clock { v: 0 })?;
            let busy = self
                .clients
                .iter()
                .flatten()
                .any(|c| self.hub.out(c.conn.key).is_some_and(|q| !q.is_empty()));
            if !busy {
                break;
            }
        }
        let jump = self.limits.max_call_timeout.max(self.limits.call_timeout)
            + Duration::from_millis(3 * TIMER_TICK_MS);
        self.offset += jump;
        self.step(&Action::Clock { v: 0 })?;
        self.step(&Action::Clock { v: 0 })?;
        if let Some(k) = self.calls.iter().position(|c| c.alive) {
            return Err(self.violation(format!(
                "model call {k} still in flight after every deadline"
            )));
        }
        for s in 0..MAX_CLIENTS {
            if let Some(c) = &self.clients[s] {
                if let Some((id, r)) = c.exp.responses.iter().next() {
                    return Err(
                        self.violation(format!("slot {s}: call id={id} never answered ({r:?})"))
                    );
                }
                if !c.inbuf.is_empty() {
                    return Err(self.violation(format!("slot {s}: a partial line is left")));
                }
            }
        }
        let now = self.now();
        for s in 0..MAX_CLIENTS {
            if let Some(c) = self.clients[s].as_mut() {
                c.closed_by_us = true;
                let key = c.conn.key;
                self.hub.on_eof(key, now);
            }
        }
        self.free_phase()?;
        self.check_tables()?;
        let g = self.hub.gauges();
        let mut all: Vec<u64> = Gauge::ALL.iter().map(|&x| g.get(x)).collect();
        all.extend(
            [
                self.hub.conn_count(),
                self.hub.calls().len(),
                self.hub.registry().topic_count(),
                self.hub.registry().service_count(),
            ]
            .map(|x| x as u64),
        );
        if all.iter().any(|&x| x != 0) {
            return Err(self.violation(format!("tables not empty after everyone left: {all:?}")));
        }
        Ok(())
    }
}

/// The model effect of a request line that fits the line limit.
enum Effect {
    Nothing,
    Error {
        id: Option<Id>,
    },
    Topic {
        op: &'static str,
        name: String,
        id: Option<Id>,
    },
    Publish {
        name: String,
        msg: String,
    },
    Service {
        adv: bool,
        name: String,
        id: Option<Id>,
    },
    Call {
        name: String,
        args: Value,
        timeout: Option<&'static str>,
        id: Id,
    },
    Respond {
        id: Option<Id>,
        missing_values: bool,
        values: Value,
        result: Value,
        status: Option<Value>,
    },
}

/// Runs `steps` random actions from `seed`, then [`Sim::finish`]. The error
/// names the seed, the step and the last actions.
pub fn run_seed(seed: u64, steps: usize) -> Result<Counts, String> {
    let mut rng = Rng::new(seed);
    let sel = rng.next_u64();
    let cfg = SimConfig::from_selector(sel);
    let mut sim = Sim::new(cfg.clone());
    let mut recent: VecDeque<Action> = VecDeque::new();
    let report = |v: Violation, recent: &VecDeque<Action>| {
        let mut s = format!(
            "seed {seed}: {v}\nlimits: {:?}\nlast actions (oldest first):\n",
            cfg.limits
        );
        for a in recent {
            let _ = writeln!(s, "  {a:?}");
        }
        s
    };
    for _ in 0..steps {
        let a = Action::random(&mut rng);
        recent.push_back(a.clone());
        if recent.len() > 24 {
            recent.pop_front();
        }
        sim.step(&a).map_err(|v| report(v, &recent))?;
    }
    sim.finish().map_err(|v| report(v, &recent))?;
    Ok(sim.counts().clone())
}

// ---------------------------------------------------------------------------------------------
// Fuzz target bodies, shared with tests/replay.rs
// ---------------------------------------------------------------------------------------------

pub mod fuzzing;
pub mod scan_parity;
