//! [`Sim`]: the hub on a fake clock, driven like the server's loop turn.
//! One [`Sim::step`] applies one [`Action`] (open, bytes, EOF or reset,
//! clock jump, read-mode change, shutdown), then runs the rest of the turn:
//! `expire(now)`, flush the output of the clients that read (in
//! random-sized writes), during a shutdown `close_drained`, then
//! `take_closing`/`free` until nothing is left, and the end-of-step checks.
//! [`run_seed`] runs a whole seeded schedule.
//!
//! Every hub call goes through the accounting of `accounting.rs`: what it
//! queued, shed and closed is checked right after it, against the model.
//! How bytes reach the hub (lines, handshakes, masked frames cut into
//! reads, half-sent requests) is in `feed.rs`.
//!
//! The behaviour is split over this module's children, each an `impl Sim`
//! block for one concern: `accounting`, `feed`, `effects`, `controls`,
//! `reader`, `requests`, `goals`, `qos`, `params`, `param_access` and
//! `checks`. They call one another through `self` methods; the data they
//! share is in `crate::model` (and [`Violation`] in `crate::violation`),
//! so that a child imports from a sibling only a lower helper: the request
//! text of `requests.rs` (which imports no sibling), the accounting's
//! `Cause`, and `effects.rs`'s `answer_as_read`. Layers depend downward
//! only: `driver` on `model` on `actions`, `names`, `ws`, `rng`.

use std::collections::{BTreeSet, VecDeque};
use std::fmt::Write as _;
use std::io::IoSlice;
use std::time::{Duration, Instant, UNIX_EPOCH};

use serde_json::Value;

use rosgate_core::codes::ErrorCode;
use rosgate_core::counters::Counter;
use rosgate_core::hub::{GraphSettings, Hub};
use rosgate_core::limits::{Limits, TIMER_TICK_MS};
use rosgate_core::log::LogLevel;
use rosgate_core::out::MAX_IOVECS;
use rosgate_core::{CloseReason, Transport};
use rosgate_wire::ws::client;

use crate::actions::{Action, Req, SimConfig, MAX_CLIENTS};
use crate::model::encodings::{Comp, EncM};
use crate::model::requests::Effect;
use crate::model::{Client, Link, Model, ReadMode, Unit, WsSide};
use crate::names::NodeModel;
use crate::rng::Rng;
use crate::violation::Violation;
use crate::ws::{self, Answer, HandshakeFeed, OP_TEXT};
use accounting::Cause;

mod accounting;
mod checks;
mod controls;
mod effects;
mod encoded;
mod federation;
mod feed;
mod foxglove;
mod fragments;
mod goals;
mod param_access;
mod params;
mod qos;
mod reader;
mod requests;

/// The reason text of every call failed by a shutdown.
pub(crate) const SHUTDOWN_REASON: &str = "gateway shutting down";

/// The WebSocket close frame payload a shutdown says goodbye with (1001,
/// going away).
pub(crate) const GOING_AWAY: [u8; 2] = [0x03, 0xE9];

/// The error codes whose counters the model keeps.
pub(crate) const COUNTED_ERRORS: [ErrorCode; 12] = [
    ErrorCode::TooDeep,
    ErrorCode::IdTooLong,
    ErrorCode::NameTooLong,
    ErrorCode::NumberOutOfRange,
    ErrorCode::LoneSurrogate,
    ErrorCode::TooManyRegistrations,
    ErrorCode::InvalidName,
    ErrorCode::InvalidDomain,
    ErrorCode::DuplicateNode,
    ErrorCode::UnknownNode,
    ErrorCode::BadParameter,
    ErrorCode::BadArgs,
];

/// What a WebSocket URL's query declares, as the model reads it.
pub(crate) struct Query {
    /// The query string, `?` included.
    pub text: &'static str,
    /// Refused whatever the node: a domain that is no number of 0-232,
    /// or a namespace or remap without a node.
    pub bad: bool,
    pub domain: Option<u8>,
    /// The node declared: name, namespace, rules (refused if invalid).
    pub node: Option<(&'static str, Option<&'static str>, &'static [&'static str])>,
}

/// The URLs [`Action::ConnectWsAt`] connects to (percent-encoded values,
/// the `ns` spelling of `namespace`, repeated `remap`s, a parameter that
/// is not the gateway's), the last six refused with a 400.
pub(crate) const QUERIES: [Query; 14] = [
    Query {
        text: "?domain=3",
        bad: false,
        domain: Some(3),
        node: None,
    },
    Query {
        text: "?node=viewer",
        bad: false,
        domain: None,
        node: Some(("viewer", None, &[])),
    },
    Query {
        text: "?node=talker&namespace=/r1&domain=3",
        bad: false,
        domain: Some(3),
        node: Some(("talker", Some("/r1"), &[])),
    },
    Query {
        text: "?domain=3&node=talker&ns=%2Fr1&remap=chatter%3A%3D%2Ftalk",
        bad: false,
        domain: Some(3),
        node: Some(("talker", Some("/r1"), &["chatter:=/talk"])),
    },
    Query {
        text: "?node=listener&remap=chatter:=/talk&remap=scan:=other",
        bad: false,
        domain: None,
        node: Some(("listener", None, &["chatter:=/talk", "scan:=other"])),
    },
    Query {
        text: "?token=x&domain=7&node=cam",
        bad: false,
        domain: Some(7),
        node: Some(("cam", None, &[])),
    },
    Query {
        text: "?node=talker&domain=0",
        bad: false,
        domain: Some(0),
        node: Some(("talker", None, &[])),
    },
    Query {
        text: "?node=talker&remap=__ns:%3D/r1",
        bad: false,
        domain: None,
        node: Some(("talker", None, &["__ns:=/r1"])),
    },
    Query {
        text: "?domain=x",
        bad: true,
        domain: None,
        node: None,
    },
    Query {
        text: "?node=cam&domain=300",
        bad: true,
        domain: None,
        node: None,
    },
    Query {
        text: "?namespace=/r1",
        bad: true,
        domain: None,
        node: None,
    },
    Query {
        text: "?node=1bad&domain=3",
        bad: false,
        domain: Some(3),
        node: Some(("1bad", None, &[])),
    },
    Query {
        text: "?node=talker&namespace=r1",
        bad: false,
        domain: None,
        node: Some(("talker", Some("r1"), &[])),
    },
    Query {
        text: "?node=cam&remap=bad",
        bad: false,
        domain: None,
        node: Some(("cam", None, &["bad"])),
    },
];

/// A request as it goes out: its text and the action's style and split.
pub(crate) struct Outgoing {
    pub content: Vec<u8>,
    pub style: u8,
    pub split: u8,
}

impl Outgoing {
    pub fn crlf(&self) -> bool {
        self.style & 1 != 0
    }

    /// The WebSocket message: the text, and CRLF whitespace if the style
    /// asks for a CRLF.
    pub fn message(&self) -> Vec<u8> {
        let mut m = self.content.clone();
        if self.crlf() {
            m.extend_from_slice(b"\r\n");
        }
        m
    }
}

/// Declares [`Counts`] (every field a `u64`) and [`Counts::add`].
macro_rules! counts {
    ($($(#[$doc:meta])* $name:ident,)*) => {
        /// What happened during a simulation (for tuning and reports).
        #[derive(Debug, Default, Clone)]
        pub struct Counts {
            $($(#[$doc])* pub $name: u64,)*
        }

        impl Counts {
            /// Adds another run's counts to these.
            pub fn add(&mut self, other: &Counts) {
                $(self.$name += other.$name;)*
            }
        }
    };
}

counts! {
    steps,
    /// Messages from another gateway delivered (`Action::Remote`).
    remote_publishes,
    lines_sent,
    /// Requests sent as rosbridge `fragment` pieces, and those of them
    /// malformed (refused with an error status, nothing delivered).
    fragmented_sent,
    fragmented_refused,
    lines_received,
    publishes_received,
    topic_bytes_shed,
    calls_forwarded,
    responses_ok,
    responses_failed,
    stale_responses,
    rejected_connections,
    closes_overflow,
    closes_stall,
    closes_by_client,
    too_long,
    ws_connections,
    ws_handshakes_refused,
    /// Openings from a browser origin that is not allowed (403).
    ws_origins_refused,
    /// Publish frames WebSocket subscribers received.
    ws_publishes_received,
    /// Messages WebSocket subscribers received in `cbor` (binary frames)
    /// and `png`, `fragment` frames and the messages they joined to.
    ws_cbor_received,
    /// Of them, typed (the typed topic's, `uint8[]` a byte string).
    ws_cbor_typed_received,
    /// Of them, `cbor-raw` (none until the schedule asks for it).
    ws_cbor_raw_received,
    /// Foxglove sessions started, typed-topic channels they read
    /// advertised, subscriptions made and withdrawn (by `unsubscribe`, and
    /// with their channel), message data received and checked, drop
    /// warnings read.
    fx_sessions,
    fx_channels_learnt,
    fx_subscribes,
    fx_unsubscribes,
    fx_channels_gone,
    fx_received,
    fx_drop_warnings,
    /// Client channels a session advertised, and the messages it
    /// published on them.
    fx_client_channels,
    fx_client_publishes,
    /// Of them, on `cdr` channels, and of those, with a subscriber that
    /// reads the JSON the hub decodes.
    fx_client_cdr_publishes,
    fx_client_cdr_read_as_json,
    ws_png_received,
    ws_fragments_received,
    ws_fragmented_received,
    /// Calls a WebSocket provider answered (read the rosbridge way).
    ws_provided_answers,
    /// Responses WebSocket callers received.
    ws_responses_received,
    ws_pongs,
    /// Closes after a close frame (ours echoed) or a protocol error (1002).
    ws_close_frames,
    ws_protocol_errors,
    /// Unfinished openings closed to admit a newcomer.
    evictions,
    closes_handshake,
    closes_partial,
    closes_idle,
    closes_slow_consumer,
    /// Subscriptions, advertisements and services refused by a
    /// per-connection limit.
    registrations_refused,
    /// Topic frames shed to keep within the memory budget.
    memory_shed_frames,
    closes_memory,
    /// Requests refused at a per-item cap (id, name, number, surrogate).
    cap_errors,
    /// Requests sent in part (a trickling client).
    trickles,
    shutdowns,
    /// Calls failed by a shutdown, as callers received them.
    shutdown_failures_received,
    /// WebSocket close 1001 frames received at a shutdown.
    goodbyes_received,
    /// Connections closed once drained at a shutdown.
    closes_drained,
    /// Nodes declared (by `declare_node` or a WebSocket URL).
    nodes_declared,
    nodes_destroyed,
    /// Declarations that gave a domain's full name a second owner.
    duplicate_node_names,
    /// Warning statuses received.
    warnings_received,
    /// Registrations made for a declared node.
    node_registrations,
    /// Names resolved to something else than written.
    names_expanded,
    /// Clients that moved to another domain, and refused moves.
    domain_changes,
    domain_changes_refused,
    /// Subscribers of a published name, and providers of a called one,
    /// that are in another domain (and so must not be reached).
    isolated_by_domain,
    /// WebSocket URLs with a query the gateway accepted, and refused.
    ws_queries,
    ws_queries_refused,
    /// Goals sent to a server, and received by it.
    goals_sent,
    goals_received,
    /// Goals refused at once by a limit or a duplicate id, and for want of
    /// a server.
    goals_refused,
    goals_no_server,
    /// Results (the server's), `status` 0 failures and `status` 6
    /// failures callers received.
    goal_results_received,
    goal_refusals_received,
    goal_aborts_received,
    /// Feedback lines queued to callers.
    feedback_sent,
    /// Cancels owed to servers, and received.
    goal_cancels,
    cancels_received,
    /// Goals whose caller left, goals past their deadline, results of
    /// orphans dropped.
    goals_orphaned,
    goal_timeouts,
    orphan_results,
    /// Feedback, results and cancels naming no goal of their sender.
    stale_goal_messages,
    /// Calls of an action's cancel service answered by the gateway.
    cancel_services,
    /// Action servers displaced by another.
    actions_replaced,
    /// Calls and goals that waited for a provider, were released to one,
    /// failed at their deadline.
    waited,
    released,
    wait_timeouts,
    /// Incompatible QoS pairs formed, messages they did not exchange.
    qos_incompatible,
    qos_skipped,
    /// Reliable subscribers warned, and closed.
    reliable_warnings,
    reliable_overflows,
    /// Latched messages sent to late subscribers.
    latched_delivered,
    /// Messages a throttle held, and held messages flushed at an
    /// interval's end.
    throttle_held,
    throttle_flushes,
    /// Messages dropped by a subscription's depth.
    depth_dropped,
    /// Peer counts owed to publishers, and received.
    peer_notifications,
    peers_received,
    /// Parameters declared by owners, undeclared, set by their owners.
    params_declared,
    params_undeclared,
    params_set_by_owner,
    /// Changes applied for others: of owned parameters, and of parameters
    /// the gateway holds (created or changed); held ones deleted.
    param_sets_by_others,
    held_params_set,
    held_params_deleted,
    /// Changes refused (by others' requests), and why (owners' refused
    /// operations included).
    param_sets_rejected,
    param_undeclared_refusals,
    param_read_only_refusals,
    param_type_refusals,
    param_range_refusals,
    /// Declarations and changes refused by the byte limits: of one
    /// connection's parameters, of those the gateway holds.
    param_conn_byte_refusals,
    param_held_byte_refusals,
    /// Declarations refused because another connection's node of that
    /// name owns the table, and declarations that took a value the gateway
    /// held.
    param_owner_refusals,
    held_overrides,
    /// Reads (rosapi `get_param`, `get_parameters`), of them reads of a
    /// parameter an owned node did not declare; node service calls;
    /// atomic sets.
    param_reads,
    param_unset_reads,
    param_node_service_calls,
    atomic_sets,
    /// Validations sent to owners, received by them, accepted, rejected,
    /// timed out, failed as their owner left; sets refused because the
    /// owner could not validate.
    param_validations,
    param_validations_received,
    param_validations_accepted,
    param_validations_rejected,
    param_validation_timeouts,
    param_validations_owner_gone,
    param_cannot_validate,
    /// Parameters that went with their node or owner.
    params_dropped,
    /// Parameter events published, and received by watchers.
    param_events,
    param_events_received,
    /// Requests naming a node whose parameters are in another domain only;
    /// node services called under no node while global parameters exist.
    params_isolated,
    global_not_a_node,
}

/// The simulation: a hub, a fake clock and the model. See the crate docs.
pub struct Sim {
    pub(crate) hub: Hub,
    /// The topics the hub has said local clients want (federation).
    pub(crate) interest: BTreeSet<(u8, String)>,
    pub(crate) limits: Limits,
    base: Instant,
    pub(crate) offset: Duration,
    /// Write sizes of reading clients, masking keys, fragment boundaries.
    pub(crate) rng: Rng,
    pub(crate) model: Model,
    /// Makes every payload unique.
    pub(crate) counter: u64,
    pub(crate) step_no: u64,
    /// The longest publish frame queued so far.
    pub(crate) max_frame: usize,
    pub(crate) counts: Counts,
    /// Publishes so far: each frame's identity.
    pub(crate) publishes: u64,
    /// Frames queued by the request being fed, (slot, publish, bytes): what
    /// the hub call that completes it must deliver.
    pub(crate) deliveries: Vec<(usize, u64, usize)>,
    /// How often the hub checks its per-connection deadlines.
    pub(crate) sweep_interval: Duration,
    /// Closes (and refusals) by reason, as the model validated them.
    pub(crate) closes: [u64; CloseReason::COUNT],
    /// Requests refused under each of [`COUNTED_ERRORS`].
    pub(crate) errors: [u64; ErrorCode::COUNT],
    /// Calls the shutdown failed.
    pub(crate) failed_shutdown: u64,
    /// Of `deliveries`, those not counted in `delivered` (latched ones).
    pub(crate) uncounted: u64,
    /// Frames the depth of their subscription drops in the hub call being
    /// made: (slot, publish).
    pub(crate) depth_drops: Vec<(usize, u64)>,
    /// Control bytes each Foxglove session was sent in this `expire` after
    /// its memory enforcement (the channels re-made last in the turn):
    /// the budget's rule ran without them.
    pub(crate) fx_after_enforce: [usize; MAX_CLIENTS],
    /// Connections the hub call being made closes for their reliable
    /// backlog.
    pub(crate) reliable_closes: Vec<usize>,
    /// The one encoding that cuts messages into `fragment` frames in this
    /// run (`model/encodings.rs`): plain JSON or `png`, with a
    /// `fragment_size`.
    pub(crate) cut: EncM,
}

/// How often the hub sweeps: a quarter of the shortest per-connection
/// deadline, 10 ms to 1 s (`docs/limits.md`).
fn sweep_interval(l: &Limits) -> Duration {
    let mut shortest = l
        .write_stall
        .min(l.handshake_timeout)
        .min(l.partial_timeout)
        .min(l.control_soft_time);
    if let Some(idle) = l.idle_timeout {
        shortest = shortest.min(idle);
    }
    (shortest / 4).clamp(Duration::from_millis(10), Duration::from_secs(1))
}

/// The encoding that cuts messages in the run of `seed` (see [`Sim::cut`]).
fn cut_encoding(seed: u64) -> EncM {
    let bits = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 61;
    EncM {
        comp: if bits & 1 == 0 { Comp::None } else { Comp::Png },
        fragment: Some([100, 256, 300, 1000][(bits >> 1) as usize]),
    }
}

impl Sim {
    pub fn new(cfg: SimConfig) -> Sim {
        rosgate_core::log::set_level(LogLevel::Error);
        let base = Instant::now();
        let mut hub = Hub::new(cfg.limits.clone(), base);
        hub.set_ws_status(cfg.ws_status);
        // As a federated gateway: remote samples come in (`Action::Remote`)
        // and the interest the hub reports is checked every step.
        hub.enable_federation();
        hub.set_graph_settings(GraphSettings {
            tcp_domain: 0,
            ws_domain: cfg.ws_domain,
            strict_names: cfg.strict_names,
            ..GraphSettings::new(base, UNIX_EPOCH)
        });
        let interval = sweep_interval(&cfg.limits);
        Sim {
            hub,
            limits: cfg.limits,
            base,
            offset: Duration::ZERO,
            rng: Rng::new(cfg.seed),
            model: Model::new(cfg.ws_status, cfg.ws_domain, cfg.strict_names, interval),
            counter: 0,
            step_no: 0,
            max_frame: 0,
            counts: Counts::default(),
            publishes: 0,
            deliveries: Vec::new(),
            sweep_interval: interval,
            closes: [0; CloseReason::COUNT],
            errors: [0; ErrorCode::COUNT],
            failed_shutdown: 0,
            uncounted: 0,
            depth_drops: Vec::new(),
            fx_after_enforce: [0; MAX_CLIENTS],
            reliable_closes: Vec::new(),
            interest: BTreeSet::new(),
            cut: cut_encoding(cfg.seed),
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

    pub(crate) fn violation(&self, what: impl Into<String>) -> Violation {
        Violation {
            step: self.step_no,
            what: what.into(),
        }
    }

    /// The timer tick `since_base` falls in (ticks count from the hub's
    /// creation).
    pub(crate) fn tick_of(since_base: Duration) -> u64 {
        (since_base.as_nanos() / Duration::from_millis(TIMER_TICK_MS).as_nanos()) as u64
    }

    /// Applies one action, then runs the rest of a loop turn (expire, flush,
    /// free) and checks every invariant.
    pub fn step(&mut self, action: &Action) -> Result<(), Violation> {
        self.step_no += 1;
        self.counts.steps += 1;
        for c in self.model.clients.iter_mut().flatten() {
            c.empty_at_start = self.hub.out(c.conn.key).is_none_or(|q| q.is_empty());
            c.wrote = false;
            c.closed_by_us = false;
            c.soft_dipped = false;
        }
        if self.model.draining {
            self.act_draining(action)?;
        } else {
            self.act(action)?;
        }
        self.expire_phase()?;
        self.flush_phase()?;
        if self.model.draining {
            self.drained_phase()?;
        }
        self.free_phase()?;
        self.end_of_step()
    }

    fn act(&mut self, action: &Action) -> Result<(), Violation> {
        match action {
            Action::Connect => self.connect(None),
            Action::ConnectWs { how } => self.connect(Some(*how)),
            Action::ConnectWsAt { how, query } => self.connect_at(*how, *query),
            Action::WsControl { slot, kind, arg } => {
                let Some(mut s) = self.model.resolve_ws(*slot) else {
                    return Ok(());
                };
                // A session sends pings, pongs, close frames and protocol
                // violations; the binary and text messages of the
                // rosbridge dialect (Foxglove ops to it) go to the next
                // rosbridge client.
                if self.is_fx(s) && matches!(kind % 8, 2 | 6 | 7) {
                    match self.next_rosbridge(s, true) {
                        Some(r) => s = r,
                        None => return Ok(()),
                    }
                }
                self.complete_pending(s)?;
                if self.model.client(s).is_open() {
                    self.ws_control(s, *kind, *arg)?;
                }
                Ok(())
            }
            Action::WsStatus { filter } => {
                let f = Action::filter(*filter);
                self.hub.set_ws_status(f);
                self.model.ws_status = f;
                Ok(())
            }
            Action::Disconnect { slot, how } => self.disconnect(*slot, *how),
            Action::Read { slot, mode } => {
                if let Some(s) = self.model.resolve(*slot) {
                    self.model.client_mut(s).mode = match *mode {
                        0 => ReadMode::All,
                        1 => ReadMode::Stopped,
                        n => ReadMode::Slow(4 * n as usize),
                    };
                }
                Ok(())
            }
            Action::Clock { v } => {
                self.offset += Duration::from_micros(Action::clock_micros(*v));
                Ok(())
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
                    Req::Respond { kind, .. } if kind % 8 < 3 => self
                        .model
                        .holder(*slot)
                        .or_else(|| self.model.resolve(*slot)),
                    // A QoS publish from a publisher that stated QoS on
                    // its topic, if any did (so that incompatible pairs
                    // are put to the test).
                    Req::Qos(q) if q.op % 4 == 3 => self
                        .qos_publisher(*slot, q)
                        .or_else(|| self.model.resolve(*slot)),
                    // Feedback and results go from a server holding a goal.
                    Req::Goal(g) if matches!(g.op % 8, 4 | 5) => self
                        .model
                        .goal_holder(*slot)
                        .or_else(|| self.model.resolve(*slot)),
                    // Validation answers from an owner that was sent one.
                    Req::Param(p) if p.op % 16 == 9 => self
                        .validation_holder(*slot)
                        .or_else(|| self.model.resolve(*slot)),
                    // An owner's operations mostly from a client with a
                    // node.
                    Req::Param(p) if p.op % 16 <= 2 && p.target & 0x80 == 0 => self
                        .model
                        .with_nodes(*slot)
                        .or_else(|| self.model.resolve(*slot)),
                    _ => self.model.resolve(*slot),
                };
                let Some(mut s) = target else { return Ok(()) };
                if self.is_fx(s) {
                    // A Foxglove session takes the topic requests its
                    // protocol has; the rest go to the next rosbridge
                    // client, as if the session were not there.
                    if Self::fx_takes(req) {
                        if self.model.client(s).is_open() {
                            return self.fx_request(s, *style, *split, req);
                        }
                        return Ok(());
                    }
                    match self.next_rosbridge(s, false) {
                        Some(r) => s = r,
                        None => return Ok(()),
                    }
                }
                self.complete_pending(s)?;
                if self.model.client(s).is_open() {
                    self.send(s, *style, *split, req)?;
                }
                Ok(())
            }
            Action::Trickle {
                slot,
                style,
                cut,
                req,
            } => match self
                .model
                .resolve(*slot)
                .and_then(|s| self.next_rosbridge(s, false))
            {
                Some(s) => self.trickle(s, *style, *cut, req),
                None => Ok(()),
            },
            Action::Shutdown => self.shutdown(),
            Action::Remote { slot, topic, msg } => self.remote_publish(*slot, *topic, *msg),
        }
    }

    /// During a shutdown nothing is accepted (the listeners are closed)
    /// and every request is ignored; the clock, read modes and
    /// disconnects work as ever.
    fn act_draining(&mut self, action: &Action) -> Result<(), Violation> {
        match action {
            Action::Connect
            | Action::ConnectWs { .. }
            | Action::ConnectWsAt { .. }
            | Action::Remote { .. }
            | Action::Shutdown => Ok(()),
            Action::WsControl { slot, .. } => match self.model.resolve_ws(*slot) {
                Some(s) => self.ignored_input(s),
                None => Ok(()),
            },
            Action::Send { slot, .. } | Action::Trickle { slot, .. } => {
                match self.model.resolve(*slot) {
                    Some(s) => self.ignored_input(s),
                    None => Ok(()),
                }
            }
            other => self.act(other),
        }
    }

    /// Opens a TCP connection, or with `ws` (the handshake selector) a
    /// WebSocket one, and sends its handshake unless it is to go with the
    /// first frame. At the connection limit the oldest connection that has
    /// not completed its opening must be evicted for it; only when there is
    /// none is it refused.
    fn connect(&mut self, ws: Option<u8>) -> Result<(), Violation> {
        self.connect_with(ws, None)
    }

    /// A WebSocket connection to the URL with `QUERIES[query]`: accepted
    /// (and then in the domain it names, with the node it declares) or
    /// refused with a 400 as the model reads the query.
    fn connect_at(&mut self, how: u8, query: u8) -> Result<(), Violation> {
        let q = &QUERIES[query as usize % QUERIES.len()];
        let uid = self.model.node_uids + 1;
        let node = q
            .node
            .map(|(name, ns, remap)| NodeModel::new(uid, name, ns, remap));
        let opening = match node {
            _ if q.bad => None,
            Some(None) => None,
            Some(Some(n)) => Some(Effect::Opening {
                domain: q.domain,
                node: Some(n),
            }),
            None => Some(Effect::Opening {
                domain: q.domain,
                node: None,
            }),
        };
        self.connect_with(Some(how), Some((q.text, opening)))
    }

    /// [`Sim::connect`], for a WebSocket client whose URL carries a query:
    /// its text and what the hub must make of it (an `Effect::Opening`;
    /// `None`: a 400).
    fn connect_with(
        &mut self,
        ws: Option<u8>,
        query: Option<(&str, Option<Effect>)>,
    ) -> Result<(), Violation> {
        let Some(slot) = self.model.clients.iter().position(Option::is_none) else {
            return Ok(());
        };
        let open: Vec<usize> = (0..MAX_CLIENTS)
            .filter(|&s| self.model.clients[s].as_ref().is_some_and(Client::is_open))
            .collect();
        let at_limit = open.len() >= self.limits.max_connections;
        let victim = open
            .iter()
            .copied()
            .filter(|&s| !self.model.client(s).established)
            .min_by_key(|&s| self.model.client(s).opened_seq)
            .filter(|_| at_limit);
        let now = self.now();
        let pre = self.pre();
        let rejected_before = self.hub.counters().get(Counter::ConnectionsRejected);
        let transport = match ws {
            None => Transport::Tcp,
            Some(_) => Transport::WebSocket,
        };
        let Some(r) = self.hub.open_as(transport, now) else {
            if !at_limit || victim.is_some() {
                return Err(self.violation(format!(
                    "open refused with {} of {} connections open (waiting to open: {victim:?})",
                    open.len(),
                    self.limits.max_connections
                )));
            }
            self.check_refused_open(rejected_before, transport)?;
            self.closes[CloseReason::MaxConnections.index()] += 1;
            return self.after_call(Cause::Open { victim: None }, pre);
        };
        if at_limit && victim.is_none() {
            return Err(self.violation(format!(
                "open accepted with {} of {} connections open, all of them opened",
                open.len(),
                self.limits.max_connections
            )));
        }
        if self.model.live().any(|c| c.conn.key == r.key) {
            return Err(self.violation(format!("slab key {} handed out twice", r.key)));
        }
        if self.hub.inspect().conn_ref(r.key) != Some(r) {
            return Err(self.violation("conn_ref disagrees with open"));
        }
        self.model.opened += 1;
        let (at, seq) = (self.offset, self.model.opened);
        let strict = self.model.strict;
        let Some(how) = ws else {
            let mut c = Client::new(r, Link::Tcp, at, seq);
            c.resolves = strict;
            self.model.clients[slot] = Some(c);
            return self.after_call(Cause::Open { victim }, pre);
        };
        self.counts.ws_connections += 1;
        // Bits 6-7 set on a plain, valid opening: a Foxglove session
        // (`driver/foxglove.rs`).
        let foxglove = query.is_none() && how >> 6 == 3 && how & 3 != 3;
        let (request, mut answer, feed) = if foxglove {
            ws::handshake_foxglove(how)
        } else {
            ws::handshake(how, query.as_ref().map(|q| q.0))
        };
        // What an upgrade the URL's query makes the hub do, applied as it
        // completes; a query it refuses turns the 101 into a 400.
        let mut opening = None;
        if let (Answer::Accept(_), Some((_, o))) = (&answer, query) {
            match o {
                Some(effect) => {
                    self.counts.ws_queries += 1;
                    opening = Some(effect);
                }
                None => {
                    self.counts.ws_queries_refused += 1;
                    answer = Answer::BadQuery;
                }
            }
        }
        let refused = !matches!(answer, Answer::Accept(_) | Answer::AcceptFoxglove(_));
        let origin_refused = answer == Answer::Forbidden;
        let lazy = feed == HandshakeFeed::WithFirstFrame;
        let side = WsSide {
            fragments: None,
            fragment_wire: Vec::new(),
            last_fragment_id: 0,
            status: self.model.ws_status,
            pending_handshake: lazy.then(|| request.clone()),
            hs_done: false,
            answer: Some(answer),
            open: false,
            close: None,
            done: false,
            protocol_close: refused && !origin_refused,
            origin_refused,
            fx: foxglove.then(Default::default),
        };
        let mut c = Client::new(r, Link::Ws(side), at, seq);
        c.domain = self.model.ws_domain;
        c.resolves = strict;
        self.model.clients[slot] = Some(c);
        self.after_call(Cause::Open { victim }, pre)?;
        if refused {
            self.counts.ws_handshakes_refused += 1;
        }
        if origin_refused {
            self.counts.ws_origins_refused += 1;
        }
        let n = request.len();
        let cuts = match feed {
            HandshakeFeed::WithFirstFrame => return Ok(()),
            HandshakeFeed::Whole => vec![n],
            HandshakeFeed::ByteByByte => (1..=n).collect(),
            HandshakeFeed::Halves => vec![n / 2, n],
        };
        let w = feed::Write {
            bytes: request,
            units: vec![Unit::Handshake(n)],
            cuts,
            handshake: Some((n, !refused)),
        };
        // The hub starts the session as the opening completes, and the
        // client may read its first messages within this very write.
        if foxglove && !refused && !self.model.draining {
            self.fx_started(slot);
        }
        self.deliver(slot, w, opening, false, false)
    }

    /// `open` refused: counted, and the rejection is one error status line
    /// (TCP) or an HTTP 503 (WebSocket).
    fn check_refused_open(
        &mut self,
        rejected_before: u64,
        transport: Transport,
    ) -> Result<(), Violation> {
        if self.hub.counters().get(Counter::ConnectionsRejected) != rejected_before + 1 {
            return Err(self.violation("refused open not counted"));
        }
        let frame = self.hub.inspect().rejection_frame(transport);
        match transport {
            Transport::Tcp => {
                let v: Value = serde_json::from_slice(&frame)
                    .map_err(|e| self.violation(format!("rejection frame is not JSON: {e}")))?;
                if v["op"] != "status" || v["level"] != "error" || !frame.ends_with(b"\n") {
                    return Err(self.violation(format!("bad rejection frame {v}")));
                }
            }
            Transport::WebSocket => {
                ws::check_rejection(&frame).map_err(|e| self.violation(e))?;
            }
        }
        self.counts.rejected_connections += 1;
        Ok(())
    }

    fn disconnect(&mut self, slot: u8, how: u8) -> Result<(), Violation> {
        let Some(s) = self.model.resolve(slot) else {
            return Ok(());
        };
        let now = self.now();
        let key = self.model.client(s).conn.key;
        let c = self.model.client_mut(s);
        c.closed_by_us = true;
        // A half-sent request just goes with the connection.
        let how = if c.pending.take().is_some() && how % 4 == 2 {
            0
        } else {
            how
        };
        let partial = br#"{"op":"subscribe","topic":"/a","type":"t","id":"never"}"#;
        match how % 4 {
            0 | 1 | 3 => {}
            _ if self.model.client(s).rosbridge() => {
                // Half a text frame: ignored at EOF.
                let mut frame = Vec::new();
                client::push_frame(&mut frame, true, OP_TEXT, partial, Some(self.mask()));
                let unit = Unit::Data {
                    len: frame.len(),
                    payload: partial.len(),
                    fin: true,
                };
                frame.truncate(frame.len() / 2);
                self.counts.lines_sent += 1;
                let w = self.ws_write(s, vec![(frame, unit)], 0);
                let fed = w.bytes.len();
                let held = crate::model::held_after(&w.units, fed);
                if let Some((_, ok)) = w.handshake {
                    self.handshake_sent(s, ok);
                }
                self.bytes_in(s, &w.bytes, Some(held))?;
            }
            _ => {
                // A complete request without its newline: ignored at EOF.
                self.counts.lines_sent += 1;
                self.bytes_in(s, partial, Some(partial.len()))?;
            }
        }
        let pre = self.pre();
        if how % 4 == 1 {
            self.hub.close(key, CloseReason::Reset, now);
        } else {
            self.hub.on_eof(key, now);
        }
        self.after_call(Cause::Gone { slot: s }, pre)?;
        if how % 4 == 3 && !self.model.draining {
            // Two newcomers in the same turn: the connection closing (and
            // one the first may evict) no longer counts against the limit.
            self.connect(None)?;
            self.connect(None)?;
        }
        Ok(())
    }

    /// Sends one request from `slot`: builds it, then either expects the
    /// too-long error, feeds a blank line, or applies its effect.
    fn send(&mut self, slot: usize, style: u8, split: u8, req: &Req) -> Result<(), Violation> {
        let (content, effect) = self.request(slot, style, req);
        let out = Outgoing {
            content,
            style,
            split,
        };
        self.send_out(slot, &out, effect)
    }

    /// The begin of a graceful shutdown: every call in flight fails with
    /// the shutdown's reason, every WebSocket client that completed its
    /// upgrade is owed a close 1001 after what is queued for it, and input
    /// is ignored from now on.
    fn shutdown(&mut self) -> Result<(), Violation> {
        let pre = self.pre();
        let now = self.now();
        for c in self.model.clients.iter_mut().flatten() {
            let established = c.established;
            if let Some(w) = c.ws_mut().filter(|_| established) {
                w.close = Some(GOING_AWAY.to_vec());
            }
        }
        let alive = self.model.calls.iter().filter(|c| c.alive).count() as u64;
        self.model
            .fail_calls_where_why(|_| true, Some(SHUTDOWN_REASON));
        self.shutdown_goals();
        self.shutdown_params();
        self.model.draining = true;
        self.failed_shutdown += alive;
        self.counts.shutdowns += 1;
        self.hub.begin_shutdown(now);
        if !self.hub.inspect().is_draining() {
            return Err(self.violation("begin_shutdown did not start draining"));
        }
        self.after_call(Cause::Shutdown, pre)
    }

    // ----- the rest of the loop turn ---------------------------------------------------------

    fn expire_phase(&mut self) -> Result<(), Violation> {
        let now = self.now();
        let pre = self.pre();
        let sweep_due = self.offset >= self.model.next_sweep;
        let control = |sim: &Sim| -> [usize; MAX_CLIENTS] {
            std::array::from_fn(|s| match &sim.model.clients[s] {
                Some(c) if sim.is_fx(s) => sim.hub.out(c.conn.key).map_or(0, |q| q.control_bytes()),
                _ => 0,
            })
        };
        let before = control(self);
        self.hub.expire(now);
        let after = control(self);
        let tick_now = Self::tick_of(self.offset);
        self.model.fail_calls_where(|c| c.due_tick <= tick_now);
        self.expire_goals(tick_now);
        self.expire_waiting(tick_now);
        self.expire_validations(tick_now);
        if self.hub.inspect().has_expire_backlog() {
            return Err(self.violation(format!(
                "expire left work for later (overdue calls, failures of gone providers, graph or peer-count news, held requests) with {} calls in flight",
                self.hub.inspect().calls().len()
            )));
        }
        let sweep = sweep_due.then(|| {
            self.model.next_sweep = self.offset + self.sweep_interval;
            self.predict_sweep()
        });
        // The QoS flushes come last in the turn: whoever the sweep (or a
        // control overflow of the failures above) closed is gone by then.
        let mut gone = [false; MAX_CLIENTS];
        for (s, g) in gone.iter_mut().enumerate() {
            let Some(c) = self.model.clients[s].as_ref() else {
                continue;
            };
            let overflow = self
                .hub
                .conn(c.conn.key)
                .is_some_and(|h| h.closing() == Some(CloseReason::ControlOverflow));
            *g = overflow || sweep.as_ref().is_some_and(|p| p[s].is_some());
        }
        self.flush_qos(tick_now, gone);
        // Last in the hub's turn: the Foxglove sessions' channels.
        self.fx_sync_all(gone);
        self.fx_after_enforce = std::array::from_fn(|s| after[s].saturating_sub(before[s]));
        let r = self.after_call(Cause::Expire { sweep }, pre);
        self.fx_after_enforce = [0; MAX_CLIENTS];
        r
    }

    fn flush_phase(&mut self) -> Result<(), Violation> {
        for s in 0..MAX_CLIENTS {
            let Some(c) = self.model.clients[s].as_ref() else {
                continue;
            };
            if !c.is_open() {
                continue;
            }
            let budget = match c.mode {
                ReadMode::All => usize::MAX,
                ReadMode::Slow(n) => n,
                ReadMode::Stopped => continue,
            };
            self.drain(s, budget)?;
            let c = self.model.client(s);
            let idle = c.head_part().is_empty();
            if idle && self.hub.out(c.conn.key).is_none_or(|q| q.is_empty()) {
                self.check_quiescent(s)?;
            }
        }
        Ok(())
    }

    /// During a shutdown, after the flush: whoever has written everything
    /// goes.
    fn drained_phase(&mut self) -> Result<(), Violation> {
        let pre = self.pre();
        self.hub.close_drained(self.now());
        self.after_call(Cause::Drained, pre)
    }

    /// Writes up to `budget` bytes of `slot`'s output in random-sized pieces
    /// and checks everything received.
    pub(crate) fn drain(&mut self, slot: usize, mut budget: usize) -> Result<(), Violation> {
        let key = self.model.client(slot).conn.key;
        let now = self.now();
        let soft = self.limits.control_soft_bytes;
        let mut got = Vec::new();
        let mut wrote = false;
        let mut dipped = false;
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
            dipped |= self.hub.out(key).is_some_and(|q| q.control_bytes() <= soft);
            budget -= want;
            wrote = true;
        }
        let at = self.offset;
        let c = self.model.client_mut(slot);
        c.wrote |= wrote;
        c.soft_dipped |= dipped;
        if wrote {
            c.last_active = at;
        }
        self.receive(slot, &got)?;
        if wrote {
            self.reliable_drained(slot);
        }
        Ok(())
    }

    pub(crate) fn free_phase(&mut self) -> Result<(), Violation> {
        let now = self.now();
        let mut keys = Vec::new();
        loop {
            self.hub.take_closing(&mut keys);
            if keys.is_empty() {
                return Ok(());
            }
            for &key in &keys {
                let Some(slot) = self.model.slot_of_key(key) else {
                    return Err(self.violation(format!("hub closed unknown connection key {key}")));
                };
                let (gen, mode, reason) = {
                    let c = self.model.client(slot);
                    (c.conn.gen, c.mode, c.closing)
                };
                let hub_reason = self.hub.conn(key).and_then(|c| c.closing());
                let Some(reason) = reason.filter(|&r| Some(r) == hub_reason) else {
                    return Err(self.violation(format!(
                        "slot {slot}: the hub frees it as closing with {hub_reason:?}, the model saw {reason:?}"
                    )));
                };
                // Last words, like the server's final write attempt.
                if mode != ReadMode::Stopped {
                    let budget = match mode {
                        ReadMode::Slow(n) => n,
                        _ => usize::MAX,
                    };
                    self.drain(slot, budget)?;
                }
                if mode == ReadMode::All {
                    self.check_last_words(slot, reason)?;
                }
                let pre = self.pre();
                self.hub.free(key, now);
                if self
                    .hub
                    .inspect()
                    .conn_ref(key)
                    .is_some_and(|r| r.gen == gen)
                {
                    return Err(self.violation("free left the connection in place"));
                }
                self.params_leave(slot);
                self.goals_leave(slot);
                self.model.close(slot);
                self.sync_topics();
                self.after_call(Cause::Free, pre)?;
            }
        }
    }
}

/// Runs `steps` random actions from `seed` (fewer if one is a shutdown,
/// which ends the schedule), then [`Sim::finish`]. The error names the
/// seed, the step and the last actions.
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
        if a == Action::Shutdown {
            break;
        }
    }
    sim.finish().map_err(|v| report(v, &recent))?;
    Ok(sim.counts().clone())
}
