//! What the simulation does: [`SimConfig`] (the hub limits of one run),
//! [`Action`] and [`Req`] (one step of a client or the world), and the two
//! ways to get them: drawn from an [`Rng`] ([`Action::random`]) or decoded
//! from fuzzer bytes ([`actions_from_bytes`]), which [`actions_to_bytes`]
//! inverts.
//!
//! Action parameters are raw numbers that the driver maps onto its tables
//! (modulo their sizes), so every byte string is a meaningful schedule and
//! every action round-trips through bytes.
//!
//! Byte format: four selector bytes ([`SimConfig::from_selector`], little
//! endian), then one action after another, each an action byte (modulo
//! [`ACTION_KINDS`]) followed by its fields. Action bytes 0-15 are the
//! TCP-era actions, 16-18 the WebSocket ones, 19 [`Action::Trickle`], 20
//! [`Action::Shutdown`], which ends the schedule (nothing after it is
//! decoded), 21-24 the nodes, names and domains ones (three requests
//! and [`Action::ConnectWsAt`]), 25 actions ([`Req::Goal`]), 26 QoS
//! ([`Req::Qos`]), 27 parameters ([`Req::Param`]) and 28 federation
//! ([`Action::Remote`]). The selector grew from two bytes to four
//! with the bounded memory limits, so the seed corpus was regenerated then.
//!
//! New kinds only ever go after the old ones, so that [`Action::encode`]'s
//! bytes (every action byte below the old [`ACTION_KINDS`], every trickled
//! request byte below the old count) decode to the same actions as before:
//! the corpus written by `tests/replay.rs` keeps its meaning. (Bytes a
//! fuzzer wrote above those counts are read modulo the new ones.) Its
//! seeded schedules (`seed-NN`, drawn by [`Action::random`]) were
//! regenerated when nodes joined, so that they hold node actions too.

use std::time::Duration;

use rosgate_core::hub::STATS_SERVICE;
use rosgate_core::limits::{
    Limits, DEFAULT_CONTROL_SOFT_BYTES, DEFAULT_CONTROL_SOFT_MS, DEFAULT_HANDSHAKE_TIMEOUT_MS,
    DEFAULT_MAX_ACTIONS_PER_CONN, DEFAULT_MAX_ADVERTISEMENTS_PER_CONN, DEFAULT_MAX_GOALS_PER_CONN,
    DEFAULT_MAX_GOALS_PER_SERVER, DEFAULT_MAX_HELD_PARAM_BYTES, DEFAULT_MAX_MEMORY_BYTES,
    DEFAULT_MAX_PARAM_BYTES_PER_CONN, DEFAULT_MAX_SERVICES_PER_CONN,
    DEFAULT_MAX_SUBSCRIPTIONS_PER_CONN, DEFAULT_PARTIAL_TIMEOUT_MS,
};
use rosgate_core::StatusFilter;

use crate::rng::{Bytes, Rng};

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

/// Action names a goal request picks from: absolute, relative and private
/// ones (expanded for a client with a node), one that needs escaping.
pub const ACTIONS: [&str; 5] = ["/fib", "/nav", "fib", "~/move", "/q\"act"];

/// Names a node-aware request ([`Req::Named`]) writes: relative, private
/// (`~/`), absolute (some shared with [`TOPICS`] and [`SERVICES`]) and
/// invalid ones. A connection without a node and without `--names strict`
/// uses them as written.
pub const NAMES: [&str; 10] = [
    "chatter",
    "~/cmd",
    "/chatter",
    "scan",
    "arm/joint",
    "/a",
    "/s1",
    "~bad",
    "a//b",
    "9lives",
];

/// Node names [`Req::DeclareNode`] picks from (two spell `talker`, so
/// that full names collide; the last four are invalid).
pub const NODE_NAMES: [&str; 8] = [
    "talker", "listener", "talker", "cam", "1bad", "a__b", "x/y", "",
];

/// Namespaces [`Req::DeclareNode`] picks from (`None`: the field is left
/// out; the last three are invalid).
pub const NAMESPACES: [Option<&str>; 8] = [
    None,
    Some("/r1"),
    Some("/"),
    Some("/r1/arm"),
    Some(""),
    Some("r1"),
    Some("/r1/"),
    Some("/2x"),
];

/// Remap rule lists [`Req::DeclareNode`] picks from (the last two hold an
/// invalid rule).
pub const REMAPS: [&[&str]; 8] = [
    &[],
    &[],
    &["chatter:=/talk"],
    &["~/cmd:=/cmd_r", "chatter:=/never"],
    &["__ns:=/r2"],
    &["__node:=renamed", "scan:=other"],
    &["bad"],
    &["a:=1x"],
];

/// The `domain` field texts of [`Req::DeclareNode`] (`None`: left out):
/// the domains the simulation uses, one out of range and two that are not
/// numbers of the right type.
pub const DOMAIN_FIELDS: [Option<&str>; 10] = [
    None,
    None,
    None,
    Some("0"),
    Some("3"),
    Some("3"),
    Some("7"),
    Some("233"),
    Some("\"3\""),
    Some("-1"),
];

/// The domains any client of the simulation can be in (the checks compare
/// these registries one by one, and every domain's through the gauges).
pub const SIM_DOMAINS: [u8; 3] = [0, 3, 7];

/// How many of the parameter names requests pick from are valid (they come
/// first in `model::params::PARAM_NAMES`).
pub(crate) const VALID_PARAM_NAMES: u64 = 5;

/// How many of the parameter value texts requests pick from are valid
/// values (they come first, see `model::params::param_value`).
pub(crate) const VALID_VALUES: u64 = 17;

/// Most actions a fuzz input decodes to (see [`actions_from_bytes`]).
const MAX_ACTIONS: usize = 400;

/// Action bytes are read modulo this.
pub const ACTION_KINDS: u8 = 29;

/// Requests a trickle carries: the twelve of the first simulation, the
/// three of nodes, names and domains, then actions, QoS and parameters.
const TRICKLE_KINDS: u8 = 18;

/// The status filters [`Action::WsStatus`] picks from.
const FILTERS: [StatusFilter; 3] = [StatusFilter::Errors, StatusFilter::All, StatusFilter::None];

/// The hub limits of one simulation, the status filter WebSocket
/// connections start with, and the seed of the driver's own RNG (write
/// sizes, masking keys, fragment boundaries).
#[derive(Debug, Clone)]
pub struct SimConfig {
    pub limits: Limits,
    pub ws_status: StatusFilter,
    pub seed: u64,
    /// `--names strict`: every connection resolves names by the ROS 2
    /// rules, not only those that declared a node.
    pub strict_names: bool,
    /// The domain WebSocket connections start in (`--ws-domain`); TCP
    /// ones start in 0.
    pub ws_domain: u8,
}

impl SimConfig {
    /// Small limits chosen by the bits of `sel`, so that lines are refused
    /// as too long, topic frames are shed, control overflow and write
    /// stalls close connections, the per-connection call limit bites,
    /// openings, partial requests, idle connections and slow consumers time
    /// out, registrations are refused and the memory budget sheds and
    /// closes; each of these is off (the default) in some configurations.
    ///
    /// Bits: 0-1 line, 2-3 topic queue, 4-5 control, 6-7 write stall, 8-9
    /// connections, 10-11 call timeout, 12 its cap, 13-14 calls per
    /// connection, 15-16 the WebSocket status filter (warnings and
    /// errors, all, errors, none), 17-18 opening deadline, 19-20
    /// partial-request deadline, 21-22 idle timeout, 23-24 control soft
    /// limit and time, 25-26 memory budget, 27-28 registrations per
    /// connection, 29-31 the graph: 6 and 7 `--names strict`, 5 and 7
    /// WebSocket connections in domain 3 (TCP ones always start in 0).
    /// Bits of the mix (see below): 0-1 goal deadline, 2-3 goals per
    /// caller, 4-5 per server, 6-7 actions per connection, 8-9 parameter
    /// bytes per connection, 10-11 parameter bytes held by the gateway.
    ///
    /// The first filter is the gateway's default (`--ws-status warning`);
    /// it used to be errors only, which is the same for runs without
    /// nodes (nothing else is sent at the warning level).
    ///
    /// A small memory budget comes with topic queues of 1 MiB: the budget
    /// then binds long before a queue's own limit, so every topic frame
    /// dropped in such a run is shed for memory and every one dropped in
    /// the other runs by the queue limit, and the checks can tell which
    /// policy dropped what (see `accounting.rs`).
    pub fn from_selector(sel: u64) -> SimConfig {
        fn pick<T: Copy>(sel: u64, shift: u32, table: &[T]) -> T {
            table[((sel >> shift) as usize) % table.len()]
        }
        let ms = Duration::from_millis;
        let memory = pick(
            sel,
            25,
            &[
                DEFAULT_MAX_MEMORY_BYTES,
                DEFAULT_MAX_MEMORY_BYTES,
                6_000,
                2_500,
            ],
        );
        let queue = if memory < DEFAULT_MAX_MEMORY_BYTES {
            1 << 20
        } else {
            pick(sel, 2, &[300, 1000, 4000, 1 << 20])
        };
        let (soft_bytes, soft_time) = pick(
            sel,
            23,
            &[
                (DEFAULT_CONTROL_SOFT_BYTES, ms(DEFAULT_CONTROL_SOFT_MS)),
                (1500, ms(1_000)),
                (4000, ms(3_000)),
                (600, ms(500)),
            ],
        );
        let (subs, advs, services) = pick(
            sel,
            27,
            &[
                (
                    DEFAULT_MAX_SUBSCRIPTIONS_PER_CONN,
                    DEFAULT_MAX_ADVERTISEMENTS_PER_CONN,
                    DEFAULT_MAX_SERVICES_PER_CONN,
                ),
                (2, 2, 1),
                (4, 3, 2),
                (1, 1, 1),
            ],
        );
        // The limits added with actions, parameters and QoS take their
        // choices from a mix of all 32 bits: the selector keeps its four
        // bytes (and the corpus its meaning).
        let mix = sel.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
        let limits = Limits {
            max_line_bytes: pick(sel, 0, &[400, 700, 4096, 1500]),
            max_queue_bytes: queue,
            max_control_bytes: pick(sel, 4, &[1 << 20, 2000, 6000, 1 << 20]),
            write_stall: pick(sel, 6, &[ms(30_000), ms(2_000), ms(5_000), ms(400)]),
            max_connections: pick(sel, 8, &[MAX_CLIENTS, 6, 4, 7]),
            call_timeout: pick(sel, 10, &[ms(1_000), ms(300), ms(3_000), ms(5_000)]),
            max_call_timeout: pick(sel, 12, &[ms(10_000), ms(2_000)]),
            max_calls_per_conn: pick(sel, 13, &[3, 64, 1, 8]),
            handshake_timeout: pick(
                sel,
                17,
                &[
                    ms(DEFAULT_HANDSHAKE_TIMEOUT_MS),
                    ms(2_000),
                    ms(5_000),
                    ms(3_000),
                ],
            ),
            partial_timeout: pick(
                sel,
                19,
                &[
                    ms(DEFAULT_PARTIAL_TIMEOUT_MS),
                    ms(1_000),
                    ms(3_000),
                    ms(2_000),
                ],
            ),
            idle_timeout: pick(sel, 21, &[None, None, Some(ms(4_000)), Some(ms(9_000))]),
            control_soft_bytes: soft_bytes,
            control_soft_time: soft_time,
            max_memory_bytes: memory,
            max_subscriptions_per_conn: subs,
            max_advertisements_per_conn: advs,
            max_services_per_conn: services,
            goal_timeout: pick(mix, 0, &[None, None, Some(ms(500)), Some(ms(2_000))]),
            max_goals_per_conn: pick(mix, 2, &[DEFAULT_MAX_GOALS_PER_CONN, 2, 5, 64]),
            max_goals_per_server: pick(mix, 4, &[DEFAULT_MAX_GOALS_PER_SERVER, 3, 64, 1]),
            max_actions_per_conn: pick(mix, 6, &[DEFAULT_MAX_ACTIONS_PER_CONN, 1, 2, 64]),
            // A parameter of the simulation counts 200-260 bytes: room for
            // two or four per connection, three or six held.
            max_param_bytes_per_conn: pick(
                mix,
                8,
                &[
                    DEFAULT_MAX_PARAM_BYTES_PER_CONN,
                    450,
                    900,
                    DEFAULT_MAX_PARAM_BYTES_PER_CONN,
                ],
            ),
            max_held_param_bytes: pick(
                mix,
                10,
                &[
                    DEFAULT_MAX_HELD_PARAM_BYTES,
                    700,
                    DEFAULT_MAX_HELD_PARAM_BYTES,
                    1400,
                ],
            ),
            ..Limits::default()
        };
        let ws_status = pick(
            sel,
            15,
            &[
                StatusFilter::Warnings,
                StatusFilter::All,
                StatusFilter::Errors,
                StatusFilter::None,
            ],
        );
        let graph = (sel >> 29) & 7;
        SimConfig {
            limits,
            ws_status,
            seed: sel.rotate_left(17) ^ 0x5EED,
            strict_names: graph >= 6,
            ws_domain: if graph == 5 || graph == 7 { 3 } else { 0 },
        }
    }
}

/// One thing a client or the world does. Parameters are raw numbers the
/// simulation maps onto its tables (modulo their sizes), so every value is
/// meaningful and actions round-trip through bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Open a TCP connection in the lowest free slot.
    Connect,
    /// Open a WebSocket connection in the lowest free slot and send the
    /// handshake `how` selects (see `ws::handshake`): spelling, key, how it
    /// is fed (whole, byte by byte, in two reads, or with the first frame),
    /// or a request the hub must refuse.
    ConnectWs { how: u8 },
    /// Open a WebSocket connection whose URL declares what the client is
    /// (`?domain=3&node=talker&namespace=/r1&remap=...`), `query` picking
    /// from `driver::QUERIES` (some refused with a 400); `how` as for
    /// [`Action::ConnectWs`], except that a handshake left for the first
    /// frame is sent whole at once.
    ConnectWsAt { how: u8, query: u8 },
    /// A WebSocket client (the first from `slot` on) sends, by `kind % 8`:
    /// 0 a ping of `arg % 126` bytes, 1 an unsolicited pong, 2 a binary
    /// message (fragmented when `arg` is odd), 3 a close frame with a code
    /// (and a reason when `arg` is odd), 4 an empty close frame, 5 a
    /// protocol violation (`arg` picks which), 6 a 70 000-byte text message
    /// (over every limit), 7 a `set_level` or `auth` request.
    WsControl { slot: u8, kind: u8, arg: u8 },
    /// WebSocket connections opened from now on get status filter
    /// `filter % 3`: errors only, all, none.
    WsStatus { filter: u8 },
    /// `how % 4`: 0 EOF, 1 reset, 2 a partial line then EOF, 3 EOF and two
    /// TCP newcomers in the same loop turn (before the leaving connection
    /// is freed).
    Disconnect { slot: u8, how: u8 },
    /// `mode`: 0 reads everything, 1 stops reading, n reads `4n` bytes/step.
    Read { slot: u8, mode: u8 },
    /// Advances the clock; see [`Action::clock_micros`].
    Clock { v: u16 },
    /// Another gateway of a federation publishes message `msg` (modulo the
    /// driver's few) on `TOPICS[topic]` in the domain of the client in
    /// `slot` (0 without one): `Bridges::remote_publish`. Decoded from fuzz
    /// input only: seeded schedules do not draw it yet (see
    /// `driver::federation`).
    Remote { slot: u8, topic: u8, msg: u8 },
    /// Sends one request line (a text message on WebSocket). `style` bits:
    /// 0 CRLF (on WebSocket: trailing CRLF whitespace), 1 spaces (on
    /// WebSocket: raw CR/LF whitespace, which the hub blanks), 2 escaped
    /// names and keys, 3 an unknown member, 4 reversed members, 5 decoy
    /// duplicate members before the real ones; on WebSocket only, 6 a ping
    /// between the message's frames, 7 optional fields left out (`type`,
    /// `args`). `split` on TCP: 0 whole, 255 byte by byte, else two halves
    /// cut at `split/255` of the line; on WebSocket: bits 0-1 one to four
    /// fragments, bits 2-7 how the bytes are read (see `Sim::ws_write`).
    /// Either way, `split % 8 == 3` sends the request as rosbridge
    /// `fragment` pieces when it fits (`Sim::fragmented_write`).
    Send {
        slot: u8,
        style: u8,
        split: u8,
        req: Req,
    },
    /// A trickling client: if `slot` (the first client from it on) has a
    /// request half sent, it sends `cut/256` of what is left, or the rest
    /// when that would be all of it; otherwise it starts `req` (written in
    /// `style` as by [`Action::Send`], without a ping inside; on WebSocket
    /// in `1 + cut % 3` fragments, after its handshake if that was left for
    /// the first frame) and sends only the first `1 + cut/256` of its
    /// bytes. The rest goes before the
    /// client's next request or control frame. A request that does not
    /// fit the line limit, or an empty line, is sent whole instead.
    Trickle {
        slot: u8,
        style: u8,
        cut: u8,
        req: Req,
    },
    /// The gateway shuts down (SIGTERM): the last action of a schedule.
    Shutdown,
}

/// A request line's content. The `id` fields pick an id spelling (see
/// `requests`), 0 for none; a WebSocket client's topic requests take their
/// ids from a small pool instead, so that its ids repeat and an
/// `unsubscribe` can name one registration among several.
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
    /// `timeout % 9` picks the `timeout` field text; on WebSocket, an `id`
    /// of 0 (`id % 7 == 0`) sends no id.
    Call {
        service: u8,
        timeout: u8,
        args: u16,
        id: u8,
    },
    /// `kind % 8`: 0-2 a call id this provider received (preferring live
    /// ones), 3 one it received (preferring dead ones), 4 one another client
    /// received, 5 a forged id, 6 no id, 7 a response missing `values` (on
    /// TCP with a forged id; on WebSocket, where `values` is optional, with
    /// an id as for 0-2). `result % 6` picks the `result` text and
    /// `result / 6 % 4` the shape of `values` (object, object, array,
    /// string); `status % 5` the `status` text.
    Respond {
        pick: u8,
        kind: u8,
        result: u8,
        status: u8,
    },
    /// A refused request, or one at a per-item cap; see
    /// `requests::malformed` (kind 3, a call without an id, is a valid
    /// call on WebSocket; kinds 14 and 15 are accepted at the caps).
    Malformed {
        kind: u8,
        id: u8,
    },
    /// `#` followed by these bytes (newlines removed): never valid JSON.
    Garbage {
        bytes: Vec<u8>,
    },
    /// An empty line (`\n` or `\r\n`); on WebSocket an empty (or
    /// whitespace) text message, which is not JSON.
    Blank,
    /// `declare_node`: the name from `NODE_NAMES`, the namespace from
    /// `NAMESPACES`, the rules from `REMAPS`, the `domain` field from
    /// `DOMAIN_FIELDS` (each modulo its table).
    DeclareNode {
        name: u8,
        ns: u8,
        remap: u8,
        domain: u8,
        id: u8,
    },
    /// `destroy_node` of one of the client's nodes (`pick` modulo their
    /// number plus one; the extra pick names a node it never declared), by
    /// its name (even `pick`) or full name.
    DestroyNode {
        pick: u8,
        id: u8,
    },
    /// A registration, publish or call of one of [`NAMES`] for a node: see [`NamedReq`].
    Named(NamedReq),
    /// An action request: see [`GoalReq`].
    Goal(GoalReq),
    /// A QoS request: see [`QosReq`].
    Qos(QosReq),
    /// A parameter request: see [`ParamReq`].
    Param(ParamReq),
}

/// A registration, publish or call (`op % 8`: subscribe, unsubscribe,
/// advertise, unadvertise, publish, advertise_service,
/// unadvertise_service, call_service) of one of `NAMES`, with the
/// `node` field picked by `node % 8`: 0-3 none (the default node), 4
/// the client's first node by name, 5 its last by full name, 6 its
/// second by name, 7 (and 4-6 when it has no such node) one it never
/// declared. `payload` is the message or args; its top three bits pick
/// a call's timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NamedReq {
    pub op: u8,
    pub name: u8,
    pub node: u8,
    pub payload: u16,
    pub id: u8,
}

/// An action request of [`ACTIONS`]`[action]`, by
/// `op % 8`: 0 `advertise_action`, 1 `unadvertise_action`, 2
/// `send_action_goal` (`payload`: bit 0 feedback, bits 1-2 both set
/// `wait`, bits 3-6 the `timeout` text, the rest the args; no id when
/// `id` is 0), 3 `cancel_action_goal` (`pick % 4`: 0-1 a goal of the
/// caller in flight, 2 any it sent, 3 a fresh id), 4
/// `action_feedback` and 5 `action_result` from a server holding a
/// goal (`pick % 8`: 0-4 a goal it was sent, in flight if it has any,
/// 5 any it was sent, 6 another server's, 7 a forged id or a call's;
/// a result's `status` by `pick / 8`, its `result` by `payload`, no
/// `values` when `payload & 3 == 1`), 6 a call of the action's
/// `_action/cancel_goal` service, 7 a goal under the id of one of the
/// caller's goals in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GoalReq {
    pub op: u8,
    pub action: u8,
    pub pick: u8,
    pub payload: u16,
    pub id: u8,
}

/// A QoS request on one of the first three [`TOPICS`] (`topic`), by
/// `op % 4`: 0 a subscribe stating the subscriber QoS `spec` picks
/// (`qos`, `queue_length`, `throttle_rate`; some refused), 1 an
/// advertise stating the publisher QoS it picks (`latch`, `qos`,
/// `peers`), 2 a call of [`SERVICES`]`[topic]` with `"wait": true`
/// (`payload` as a call's args, its top three bits the timeout), 3 a
/// publish (`payload` as for [`Req::Publish`], small).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QosReq {
    pub op: u8,
    pub topic: u8,
    pub spec: u8,
    pub payload: u16,
    pub id: u8,
}

/// A parameter request (see `params.rs` and `param_access.rs`), by
/// `op % 16`: 0 `declare_parameter`, 1 `set_parameter`, 2
/// `undeclare_parameter` (by the owner, for the `"node"` `target`
/// picks), 3-5 rosapi's `set_param`, `get_param`, `has_param`,
/// `delete_param`, `get_param_names`, 6-8 a node's parameter services,
/// 9 an owner's answer to a validation (`extra` picks accept or refuse),
/// 10-15 a subscribe or unsubscribe of `/parameter_events`. `name`
/// picks the parameter name, `value` the value text, `extra` the
/// descriptor and variants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParamReq {
    pub op: u8,
    pub target: u8,
    pub name: u8,
    pub value: u8,
    pub extra: u8,
    pub id: u8,
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
        let op = b.u8() % ACTION_KINDS;
        Some(match op {
            0 => Action::Connect,
            16 => Action::ConnectWs { how: b.u8() },
            24 => Action::ConnectWsAt {
                how: b.u8(),
                query: b.u8(),
            },
            17 => Action::WsControl {
                slot: b.u8(),
                kind: b.u8(),
                arg: b.u8(),
            },
            18 => Action::WsStatus { filter: b.u8() },
            1 => Action::Disconnect {
                slot: b.u8(),
                how: b.u8(),
            },
            2 => Action::Read {
                slot: b.u8(),
                mode: b.u8(),
            },
            3 => Action::Clock { v: b.u16() },
            19 => {
                let (slot, style, cut) = (b.u8(), b.u8(), b.u8());
                let op = match b.u8() % TRICKLE_KINDS {
                    k @ 0..=11 => 4 + k,
                    k @ 12..=14 => 21 + (k - 12),
                    k => 25 + (k - 15),
                };
                Action::Trickle {
                    slot,
                    style,
                    cut,
                    req: Req::decode(op, b),
                }
            }
            20 => Action::Shutdown,
            28 => Action::Remote {
                slot: b.u8(),
                topic: b.u8(),
                msg: b.u8(),
            },
            _ => {
                let (slot, style, split) = (b.u8(), b.u8(), b.u8());
                Action::Send {
                    slot,
                    style,
                    split,
                    req: Req::decode(op, b),
                }
            }
        })
    }

    /// The bytes [`Action::decode`] reads back as this action.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Action::Connect => out.push(0),
            Action::ConnectWs { how } => out.extend_from_slice(&[16, *how]),
            Action::ConnectWsAt { how, query } => out.extend_from_slice(&[24, *how, *query]),
            Action::WsControl { slot, kind, arg } => {
                out.extend_from_slice(&[17, *slot, *kind, *arg])
            }
            Action::WsStatus { filter } => out.extend_from_slice(&[18, *filter]),
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
                out.extend_from_slice(&[req.op(), *slot, *style, *split]);
                req.encode_fields(out);
            }
            Action::Trickle {
                slot,
                style,
                cut,
                req,
            } => {
                let kind = match req.op() {
                    op @ 4..=15 => op - 4,
                    op @ 21..=23 => 12 + (op - 21),
                    op => 15 + (op - 25),
                };
                out.extend_from_slice(&[19, *slot, *style, *cut, kind]);
                req.encode_fields(out);
            }
            Action::Shutdown => out.push(20),
            Action::Remote { slot, topic, msg } => {
                out.extend_from_slice(&[28, *slot, *topic, *msg])
            }
        }
    }

    /// The status filter of [`Action::WsStatus`].
    pub fn filter(filter: u8) -> StatusFilter {
        FILTERS[filter as usize % FILTERS.len()]
    }

    /// A random action, weighted towards the interesting ones.
    pub fn random(rng: &mut Rng) -> Action {
        let slot = rng.u8();
        match rng.below(200) {
            0..=2 => Action::Connect,
            6 => Action::ConnectWsAt {
                how: rng.below(3) as u8 | (rng.u8() & !3),
                query: rng.u8(),
            },
            3..=5 => {
                // Spelling 0-2 valid, 3 refused (one time in twelve);
                // bits 2-3 the feeding; bits 4-7 key or mistake.
                let spelling = if rng.below(12) == 0 {
                    3
                } else {
                    rng.below(3) as u8
                };
                let how = spelling | (rng.u8() & !3);
                Action::ConnectWs { how }
            }
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
            100..=103 => Action::WsControl {
                slot,
                kind: rng.u8(),
                arg: rng.u8(),
            },
            104 => Action::WsStatus { filter: rng.u8() },
            105..=109 => {
                let style = if rng.below(3) == 0 { rng.u8() } else { 0 };
                let cut = rng.u8();
                let roll = if rng.below(8) == 0 {
                    111 + rng.below(89)
                } else {
                    24 + rng.below(76)
                };
                Action::Trickle {
                    slot,
                    style,
                    cut,
                    req: Req::random(rng, roll),
                }
            }
            // Rare: a shutdown ends the run.
            110 if rng.below(12) == 0 => Action::Shutdown,
            110 => Action::Clock {
                v: rng.below(5_000) as u16,
            },
            roll => {
                let req = Req::random(rng, roll);
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
            }
        }
    }
}

impl Req {
    /// The action byte of a `Send` carrying this request (4 to 15, 21 to
    /// 23).
    fn op(&self) -> u8 {
        match self {
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
            Req::DeclareNode { .. } => 21,
            Req::DestroyNode { .. } => 22,
            Req::Named(_) => 23,
            Req::Goal(_) => 25,
            Req::Qos(_) => 26,
            Req::Param(_) => 27,
        }
    }

    /// Decodes the fields of the request whose action byte is `op` (4 to
    /// 15, 21 to 23).
    fn decode(op: u8, b: &mut Bytes<'_>) -> Req {
        match op {
            21 => Req::DeclareNode {
                name: b.u8(),
                ns: b.u8(),
                remap: b.u8(),
                domain: b.u8(),
                id: b.u8(),
            },
            22 => Req::DestroyNode {
                pick: b.u8(),
                id: b.u8(),
            },
            23 => Req::Named(NamedReq {
                op: b.u8(),
                name: b.u8(),
                node: b.u8(),
                payload: b.u16(),
                id: b.u8(),
            }),
            25 => Req::Goal(GoalReq {
                op: b.u8(),
                action: b.u8(),
                pick: b.u8(),
                payload: b.u16(),
                id: b.u8(),
            }),
            26 => Req::Qos(QosReq {
                op: b.u8(),
                topic: b.u8(),
                spec: b.u8(),
                payload: b.u16(),
                id: b.u8(),
            }),
            27 => Req::Param(ParamReq {
                op: b.u8(),
                target: b.u8(),
                name: b.u8(),
                value: b.u8(),
                extra: b.u8(),
                id: b.u8(),
            }),
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
        }
    }

    /// The bytes [`Req::decode`] reads back as this request's fields.
    fn encode_fields(&self, out: &mut Vec<u8>) {
        match self {
            Req::Subscribe { topic, id }
            | Req::Unsubscribe { topic, id }
            | Req::Advertise { topic, id }
            | Req::Unadvertise { topic, id } => out.extend_from_slice(&[*topic, *id]),
            Req::Publish { topic, payload, id } => {
                out.push(*topic);
                out.extend_from_slice(&payload.to_le_bytes());
                out.push(*id);
            }
            Req::AdvertiseService { service, id } | Req::UnadvertiseService { service, id } => {
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
            Req::DeclareNode {
                name,
                ns,
                remap,
                domain,
                id,
            } => out.extend_from_slice(&[*name, *ns, *remap, *domain, *id]),
            Req::DestroyNode { pick, id } => out.extend_from_slice(&[*pick, *id]),
            Req::Named(NamedReq {
                op,
                name,
                node,
                payload,
                id,
            }) => {
                out.extend_from_slice(&[*op, *name, *node]);
                out.extend_from_slice(&payload.to_le_bytes());
                out.push(*id);
            }
            Req::Goal(GoalReq {
                op,
                action,
                pick,
                payload,
                id,
            }) => {
                out.extend_from_slice(&[*op, *action, *pick]);
                out.extend_from_slice(&payload.to_le_bytes());
                out.push(*id);
            }
            Req::Qos(QosReq {
                op,
                topic,
                spec,
                payload,
                id,
            }) => {
                out.extend_from_slice(&[*op, *topic, *spec]);
                out.extend_from_slice(&payload.to_le_bytes());
                out.push(*id);
            }
            Req::Param(ParamReq {
                op,
                target,
                name,
                value,
                extra,
                id,
            }) => out.extend_from_slice(&[*op, *target, *name, *value, *extra, *id]),
        }
    }

    /// The request of a random `Send`, by `roll` (24 to 99, 111 to 199) of
    /// [`Action::random`]'s weights.
    fn random(rng: &mut Rng, roll: u64) -> Req {
        // Ids: mostly present (style 1-6), sometimes absent.
        let id = |rng: &mut Rng| {
            if rng.below(6) == 0 {
                0
            } else {
                1 + rng.below(6) as u8
            }
        };
        match roll {
            24..=31 => Req::Subscribe {
                topic: rng.u8(),
                id: id(rng),
            },
            32..=34 => Req::Unsubscribe {
                topic: rng.u8(),
                id: id(rng),
            },
            35..=37 => Req::Advertise {
                topic: rng.u8(),
                id: id(rng),
            },
            38 => Req::Unadvertise {
                topic: rng.u8(),
                id: id(rng),
            },
            39..=52 => Req::Publish {
                topic: rng.u8(),
                payload: rng.u16(),
                id: id(rng),
            },
            53..=58 => Req::AdvertiseService {
                service: rng.u8(),
                id: id(rng),
            },
            59..=61 => Req::UnadvertiseService {
                service: rng.u8(),
                id: id(rng),
            },
            62..=76 => Req::Call {
                service: rng.u8(),
                timeout: rng.u8(),
                args: rng.u16(),
                id: id(rng),
            },
            77..=93 => Req::Respond {
                pick: rng.u8(),
                kind: rng.u8(),
                result: rng.u8(),
                status: rng.u8(),
            },
            94..=96 => Req::Malformed {
                kind: rng.u8(),
                id: id(rng),
            },
            97..=98 => {
                let max = if rng.below(4) == 0 { 256 } else { 24 };
                let n = rng.below(max) as usize;
                let bytes = (0..n).map(|_| rng.u8()).collect();
                Req::Garbage { bytes }
            }
            // Mostly valid picks (the tables put the invalid ones last).
            111..=114 => Req::DeclareNode {
                name: valid_mostly(rng, 4),
                ns: valid_mostly(rng, 5),
                remap: valid_mostly(rng, 6),
                domain: valid_mostly(rng, 7),
                id: id(rng),
            },
            115 | 116 => Req::DestroyNode {
                pick: rng.u8(),
                id: id(rng),
            },
            117..=124 => Req::Named(NamedReq {
                op: rng.u8(),
                name: valid_mostly(rng, 7),
                node: rng.u8(),
                payload: rng.u16(),
                id: id(rng),
            }),
            125..=144 => {
                // Sends and results most, then advertisements and
                // feedback; rarely an unadvertise, the cancel service or
                // a duplicate id.
                const OPS: [u8; 20] = [0, 0, 0, 1, 2, 2, 2, 2, 2, 2, 3, 3, 4, 4, 4, 5, 5, 5, 5, 6];
                let op = if rng.below(20) == 0 {
                    7
                } else {
                    OPS[rng.below(OPS.len() as u64) as usize]
                };
                Req::Goal(GoalReq {
                    op,
                    action: rng.below(8) as u8,
                    pick: rng.u8(),
                    payload: rng.u16(),
                    id: 1 + rng.below(6) as u8,
                })
            }
            145..=164 => {
                // Subscribes and publishes most, then advertisements, few
                // waiting calls.
                const OPS: [u8; 10] = [0, 0, 0, 1, 1, 3, 3, 3, 3, 2];
                Req::Qos(QosReq {
                    op: OPS[rng.below(OPS.len() as u64) as usize],
                    topic: rng.u8(),
                    spec: rng.u8(),
                    payload: rng.u16(),
                    id: id(rng),
                })
            }
            165..=199 => {
                // Owners declaring and setting, others setting and reading
                // through rosapi and the node services, owners answering
                // validations; fewer undeclares, listings and watches.
                const OPS: [u8; 20] = [0, 0, 0, 0, 1, 1, 2, 3, 3, 3, 4, 5, 6, 6, 7, 8, 9, 9, 9, 10];
                // The top bit of `target` (an owner's operation from any
                // client, even one without a node) rarely.
                let target = rng.u8() & if rng.below(8) == 0 { 0xff } else { 0x7f };
                Req::Param(ParamReq {
                    op: OPS[rng.below(OPS.len() as u64) as usize],
                    target,
                    name: valid_mostly(rng, VALID_PARAM_NAMES),
                    value: valid_mostly(rng, VALID_VALUES),
                    extra: rng.u8(),
                    id: id(rng),
                })
            }
            _ => Req::Blank,
        }
    }
}

/// An index below `valid` five times in six, else any byte (the table
/// modulo its length: sometimes an invalid entry).
fn valid_mostly(rng: &mut Rng, valid: u64) -> u8 {
    if rng.below(6) == 0 {
        rng.u8()
    } else {
        rng.below(valid) as u8
    }
}

/// Splits fuzzer bytes into a configuration (first four bytes) and at most
/// 400 actions, the last of them a shutdown if one is decoded.
pub fn actions_from_bytes(data: &[u8]) -> (SimConfig, Vec<Action>) {
    let mut b = Bytes::new(data);
    let cfg = SimConfig::from_selector(u64::from(b.u32()));
    let mut actions = Vec::new();
    while actions.len() < MAX_ACTIONS {
        match Action::decode(&mut b) {
            Some(a) => {
                let last = a == Action::Shutdown;
                actions.push(a);
                if last {
                    break;
                }
            }
            None => break,
        }
    }
    (cfg, actions)
}

/// The bytes [`actions_from_bytes`] reads back as `selector` and `actions`.
pub fn actions_to_bytes(selector: u32, actions: &[Action]) -> Vec<u8> {
    let mut out = selector.to_le_bytes().to_vec();
    for a in actions {
        a.encode(&mut out);
    }
    out
}
