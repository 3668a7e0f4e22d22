//! The limits the sans-io core enforces, and their defaults.
//!
//! Each `DEFAULT_*` constant carries its unit and the reason for its value;
//! `docs/limits.md` mirrors these and a test keeps the two in sync; the
//! labels in parentheses, `(P5)`, are the policies its "Policy labels"
//! table defines. The server's own constants (addresses, socket budgets,
//! back-offs) live in the `rosgate` crate's `config.rs`.

use std::time::Duration;

/// Bytes. Longest accepted line, enforced before its newline arrives (P1).
/// 16 MiB holds a 4K RGBA frame as base64 with room to spare.
pub const DEFAULT_MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// Bytes. Topic data queued for one connection before the oldest frames are
/// dropped, fairly across its subscriptions (P5). Topic data is best-effort, so
/// a consumer that falls 8 MiB behind loses old samples rather than memory.
pub const DEFAULT_MAX_QUEUE_BYTES: usize = 8 * 1024 * 1024;

/// Bytes. Control data (statuses, forwarded calls, responses) queued for one
/// connection; beyond it the connection is closed because it is not reading
/// (P6). Control data cannot be dropped without breaking correlation.
pub const DEFAULT_MAX_CONTROL_BYTES: usize = 64 * 1024 * 1024;

/// Milliseconds. Output pending with no write progress for this long closes
/// the connection (P7). NATS uses 10 s; robots on Wi-Fi stall longer.
pub const DEFAULT_WRITE_STALL_MS: u64 = 30_000;

/// Connections. Beyond this an accepted socket gets an error status and is
/// closed (P9). The server clamps it at start-up to the file-descriptor
/// limit minus its reserve.
pub const DEFAULT_MAX_CONNECTIONS: usize = 10_000;

/// Milliseconds. Service call timeout when the call names none (P12);
/// rosbridge's `default_call_service_timeout` is 5 s.
pub const DEFAULT_CALL_TIMEOUT_MS: u64 = 5_000;

/// Milliseconds. Upper bound for a per-call `timeout` field (P12): a call must
/// never wait indefinitely, whatever the client asks for.
pub const DEFAULT_MAX_CALL_TIMEOUT_MS: u64 = 300_000;

/// Calls. In-flight calls one caller connection may have (P11); the excess
/// call fails at once instead of growing the call table without bound.
pub const DEFAULT_MAX_CALLS_PER_CONN: usize = 4096;

/// Bytes. Everything clients make the gateway hold, together: partial
/// lines, queued output (a shared topic frame counted once), calls in
/// flight with their ids, registrations (P17). Above it topic data is shed
/// first, then the connections holding the most are closed (Redis
/// `maxmemory-clients`). 256 MiB fits a small robot computer (a 2 GiB
/// Raspberry Pi keeps most of its memory for the robot's own processes).
pub const DEFAULT_MAX_MEMORY_BYTES: usize = 256 * 1024 * 1024;

/// Milliseconds. A connection must complete its opening within this: the
/// WebSocket upgrade request, or a TCP client's first complete line (P21).
/// A connection that opens and says nothing holds a slot for nobody.
pub const DEFAULT_HANDSHAKE_TIMEOUT_MS: u64 = 10_000;

/// Milliseconds. A partial line (or WebSocket message) may sit unfinished
/// at most this long (P18, P21): a trickled 16 MiB line is refused instead
/// of pinning memory. 60 s carries the largest line over a 2 Mbit/s link.
pub const DEFAULT_PARTIAL_TIMEOUT_MS: u64 = 60_000;

/// Milliseconds. A client's fragmented message (rosbridge's `fragment`
/// op) must complete within this from its first piece; then its pieces
/// are dropped and the client told. rosbridge's `fragment_timeout` is
/// 600 s, but it keeps a partial message only while pieces keep coming;
/// here the pieces count against the memory budget, and a client that
/// sends pieces at line speed finishes 16 MiB in far less.
pub const DEFAULT_FRAGMENT_TIMEOUT_MS: u64 = rosgate_wire::fragment::FRAGMENT_TIMEOUT_MS;

/// Milliseconds. With no input and no output for this long a connection is
/// closed (P21); 0, the default, turns it off (Redis `timeout 0`): a
/// subscriber of a quiet topic is legitimately silent.
pub const DEFAULT_IDLE_TIMEOUT_MS: u64 = 0;

/// Bytes. Control data queued above this soft limit for longer than
/// [`DEFAULT_CONTROL_SOFT_MS`] closes the connection (P19, Redis
/// `client-output-buffer-limit` soft limit): trickle-reading is not
/// progress.
pub const DEFAULT_CONTROL_SOFT_BYTES: usize = 4 * 1024 * 1024;

/// Milliseconds. See [`DEFAULT_CONTROL_SOFT_BYTES`].
pub const DEFAULT_CONTROL_SOFT_MS: u64 = 30_000;

/// Registrations. Subscriptions one connection may hold; in the rosbridge
/// dialect every (topic, id) pair counts (P20): bounds the work of freeing
/// a connection and the registry memory one client can take.
pub const DEFAULT_MAX_SUBSCRIPTIONS_PER_CONN: usize = 10_000;

/// Registrations. Advertisements one connection may hold, counted as
/// subscriptions are.
pub const DEFAULT_MAX_ADVERTISEMENTS_PER_CONN: usize = 10_000;

/// Services one connection may provide.
pub const DEFAULT_MAX_SERVICES_PER_CONN: usize = 1_000;

/// Connections. Open connections from one non-loopback address (P21): one
/// remote host cannot take every slot. Loopback peers are not limited
/// (they are this machine; the connection limit and the eviction of
/// unfinished openings protect them).
pub const DEFAULT_MAX_CONNECTIONS_PER_IP: usize = 256;

/// Goals. Goals in flight one caller connection may have; the excess goal
/// fails at once (`status` 0, `result:false`). Goals are long: this bounds
/// what one client can make servers hold, as calls per caller do.
pub const DEFAULT_MAX_GOALS_PER_CONN: usize = 1024;

/// Goals. Goals one action server connection may have in flight (orphans
/// included); a goal beyond it fails at once, so no caller crowd can pile
/// unbounded work on one server.
pub const DEFAULT_MAX_GOALS_PER_SERVER: usize = 4096;

/// Milliseconds. Goal deadline when the goal names none; 0: none (actions
/// are long-running: navigation, trajectories). A per-goal `timeout` (in
/// seconds) is still honoured, capped by `--max-call-timeout-ms`.
pub const DEFAULT_GOAL_TIMEOUT_MS: u64 = 0;

/// Actions one connection may serve.
pub const DEFAULT_MAX_ACTIONS_PER_CONN: usize = 1_000;

/// Bytes. Parameters of the nodes one connection declared, together (as
/// the memory ledger counts them: 128 bytes, the name, the value and the
/// descriptor per parameter). The per-node and per-value limits alone let
/// one client hold 64 nodes x 1024 parameters x 64 KiB = 4 GiB; a ROS 2
/// node's whole configuration is kilobytes (a robot description of a few
/// hundred KiB is the big case), so 16 MiB leaves room and keeps one
/// client to 1/16 of the default memory budget.
pub const DEFAULT_MAX_PARAM_BYTES_PER_CONN: usize = 16 * 1024 * 1024;

/// Bytes. Parameters the gateway holds for nodes nobody owns (rosapi
/// `set_param`, ROS 1 style), all domains together, counted as above.
/// They belong to no connection, so the memory budget can close nobody to
/// free them: this limit is their only bound. All domains share it, since
/// a per-domain limit would multiply by the 233 domains a client may
/// enter; 16 MiB is 1/16 of the default budget.
pub const DEFAULT_MAX_HELD_PARAM_BYTES: usize = 16 * 1024 * 1024;

/// Calls. Timed-out calls failed per loop turn; the rest fail on the next
/// turn, so a mass time-out cannot stall the loop (P20).
pub const EXPIRE_BUDGET: usize = 10_000;

/// Calls and goals. Failures sent per loop turn for calls whose provider
/// left or withdrew the service or action they were forwarded to (P13,
/// P20); the rest wait in order for the next turns. An action server
/// leaving with 4099 goals in flight failed them all in one turn and held
/// the loop for 92-270 ms (stress `goalsleave`).
pub const GONE_FAILS_PER_TURN: usize = 512;

/// Work units one registration change (subscribe, advertise, their undo,
/// a service or node declared or withdrawn) counts for in
/// [`crate::Hub::work`]: it costs 2-5 µs (names indexed, sorted, hashed),
/// 30-50 times a delivery, and the shell bounds each loop turn's work
/// (stress `subpairs`: counted as one line, 10 000 pipelined pairs made a
/// 40 ms turn).
pub const REGISTRATION_WORK: u64 = 40;

/// Queue entries one memory-budget pass sheds at most (P17, P20): a
/// subscriber crowd sharing the same frames holds hundreds of thousands of
/// entries, and shedding them all at once made a 5-15 ms pause (stress
/// `nonreaders`); the next pass, at the next read or turn, goes on.
pub const SHED_ENTRIES_PER_PASS: usize = 32 * 1024;

/// Milliseconds. Resolution of the timer wheel that expires calls.
pub const TIMER_TICK_MS: u64 = 10;

/// Slots of the timer wheel: 512 x 10 ms covers the default 5 s timeout in
/// one lap.
pub const TIMER_SLOTS: usize = 512;

/// Connection log lines (open, close, refused) per second before they are
/// summarised (P15).
pub const CONN_LOGS_PER_SEC: u32 = 20;

/// Closed connections remembered for `/rosgate/connections` and the
/// dashboard.
pub const RECENT_CLOSES: usize = 64;

/// Wrong tokens. One address may present this many wrong tokens within a
/// minute, each refused at once; past it the address is locked: its tokens
/// are not checked, and each attempt is held for a growing delay, then
/// refused (`auth_budget.rs`). A person mistyping, or a client
/// restarting with an old token a few times, stays within it.
pub const DEFAULT_AUTH_FAILURE_BUDGET: u32 = 10;

/// The limits the core enforces. Built by the server from flags; unit tests,
/// the simulation and the fuzz targets build one without an address.
#[derive(Debug, Clone)]
pub struct Limits {
    pub max_line_bytes: usize,
    pub max_queue_bytes: usize,
    pub max_control_bytes: usize,
    pub write_stall: Duration,
    pub max_connections: usize,
    pub call_timeout: Duration,
    pub max_call_timeout: Duration,
    pub max_calls_per_conn: usize,
    pub max_memory_bytes: usize,
    pub handshake_timeout: Duration,
    pub partial_timeout: Duration,
    /// A fragmented message's time to complete, from its first piece.
    pub fragment_timeout: Duration,
    /// `None`: off.
    pub idle_timeout: Option<Duration>,
    pub control_soft_bytes: usize,
    pub control_soft_time: Duration,
    pub max_subscriptions_per_conn: usize,
    pub max_advertisements_per_conn: usize,
    pub max_services_per_conn: usize,
    pub max_connections_per_ip: usize,
    pub max_goals_per_conn: usize,
    pub max_goals_per_server: usize,
    /// `None`: goals have no deadline unless they name one.
    pub goal_timeout: Option<Duration>,
    pub max_actions_per_conn: usize,
    /// Bytes of parameters one connection's nodes may hold together.
    pub max_param_bytes_per_conn: usize,
    /// Bytes of parameters the gateway may hold for nobody, all domains.
    pub max_held_param_bytes: usize,
    /// Wrong tokens per address before it is locked (`auth_budget`).
    pub auth_failure_budget: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            max_queue_bytes: DEFAULT_MAX_QUEUE_BYTES,
            max_control_bytes: DEFAULT_MAX_CONTROL_BYTES,
            write_stall: Duration::from_millis(DEFAULT_WRITE_STALL_MS),
            max_connections: DEFAULT_MAX_CONNECTIONS,
            call_timeout: Duration::from_millis(DEFAULT_CALL_TIMEOUT_MS),
            max_call_timeout: Duration::from_millis(DEFAULT_MAX_CALL_TIMEOUT_MS),
            max_calls_per_conn: DEFAULT_MAX_CALLS_PER_CONN,
            max_memory_bytes: DEFAULT_MAX_MEMORY_BYTES,
            handshake_timeout: Duration::from_millis(DEFAULT_HANDSHAKE_TIMEOUT_MS),
            partial_timeout: Duration::from_millis(DEFAULT_PARTIAL_TIMEOUT_MS),
            fragment_timeout: Duration::from_millis(DEFAULT_FRAGMENT_TIMEOUT_MS),
            idle_timeout: None,
            control_soft_bytes: DEFAULT_CONTROL_SOFT_BYTES,
            control_soft_time: Duration::from_millis(DEFAULT_CONTROL_SOFT_MS),
            max_subscriptions_per_conn: DEFAULT_MAX_SUBSCRIPTIONS_PER_CONN,
            max_advertisements_per_conn: DEFAULT_MAX_ADVERTISEMENTS_PER_CONN,
            max_services_per_conn: DEFAULT_MAX_SERVICES_PER_CONN,
            max_connections_per_ip: DEFAULT_MAX_CONNECTIONS_PER_IP,
            max_goals_per_conn: DEFAULT_MAX_GOALS_PER_CONN,
            max_goals_per_server: DEFAULT_MAX_GOALS_PER_SERVER,
            goal_timeout: None,
            max_actions_per_conn: DEFAULT_MAX_ACTIONS_PER_CONN,
            max_param_bytes_per_conn: DEFAULT_MAX_PARAM_BYTES_PER_CONN,
            max_held_param_bytes: DEFAULT_MAX_HELD_PARAM_BYTES,
            auth_failure_budget: DEFAULT_AUTH_FAILURE_BUDGET,
        }
    }
}
