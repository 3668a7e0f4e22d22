//! Topic operations: subscribe, unsubscribe, advertise, unadvertise, and
//! the publish router: [`Hub::route`], the one way a message reaches a
//! topic's subscribers, with one encoding shared by all of them.
//!
//! The router owns:
//! - the publish batch (`hub/batch.rs`): a client's consecutive publishes
//!   to one topic, delivered as one shared entry. It is delivered before
//!   anything else can be observed: before any other request is handled
//!   (`Hub::apply`), before any other output is queued (control lines,
//!   goal feedback), when the topic changes, and at the end of each read;
//! - the ROS 2 type check of a client's publish ([`TypeCheck`]);
//! - the no-echo rule: a message from another gateway or the ROS 2 graph
//!   ([`Origin::Remote`]) never goes to a bridge, so nothing goes back to
//!   the network it came from and nothing loops between gateways (a
//!   sample that crosses from one ROS 2 side to the other goes beside the
//!   router, as a `Forward` the driver puts to that side only:
//!   `hub/federation.rs`, `PeerId::forwards_to`).
//!
//! Registrations are per connection in the strict dialect (the protocol
//! file) and per request id within the connection in the rosbridge dialect
//! (the connection's [`crate::transport::Policy`] says which), and made for
//! a node; the [`crate::registry::Registry`] of the connection's domain
//! keeps them. Names are resolved first (`hub/graph.rs`) when the
//! connection resolves names; otherwise they are used as written.

use std::collections::HashMap;
use std::rc::Rc;
use std::time::Instant;

use rosgate_wire::encode::{self, Level};
use rosgate_wire::Raw;

use super::batch::{TopicKey, BATCH_MAX_BYTES};
use super::qos::Registering;
use super::Hub;
use crate::access::Class;
use crate::conn::{Conn, ConnRef};
use crate::counters::{Counter, Counters, ErrorCode};
use crate::memory::Ledger;
use crate::nodes::{Domain, DOMAINS};
use crate::registry::{Role, TooMany};
use crate::transport::Framed;

/// Where a published message comes from: what [`Hub::route`] checks, and
/// who it skips.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Origin<'a> {
    /// A client's `publish`: checked against the topic's ROS 2 type when
    /// it has one (refused with an error status carrying `id`), batched.
    Client { conn: ConnRef, id: Option<&'a [u8]> },
    /// The gateway itself (graph events, `/rosout`, parameter events).
    Gateway,
    /// Another gateway or the ROS 2 graph, through the domain's bridge:
    /// never delivered to a bridge. `latched`: it came from a latched
    /// (transient local) publisher that keeps that many messages; the
    /// bridge keeps them here too, as a latched publisher of the topic, for
    /// local subscribers that come later. Ignored with federation off.
    Remote { latched: Option<u32> },
}

/// Checks a message against a ROS 2 type before it reaches a topic that
/// ROS 2 nodes subscribe to (the shell installs one when it joins a ROS 2
/// graph; the core knows no types).
pub trait TypeCheck {
    /// `Err(why)`, naming the field, when `msg` (valid JSON) does not fit
    /// `ty`.
    fn check(&self, ty: &str, msg: &str) -> Result<(), String>;
}

/// The installed [`TypeCheck`].
struct Checker(Box<dyn TypeCheck>);

impl std::fmt::Debug for Checker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Checker")
    }
}

/// Topics whose messages must fit a ROS 2 type (ROS 2 subscribes to
/// them), and the check. One entry per topic a ROS 2 subscription names:
/// bounded by the ROS 2 link's entity limit.
#[derive(Debug, Default)]
pub(super) struct TypeChecks {
    checked: HashMap<(Domain, Rc<str>), Rc<str>>,
    checker: Option<Checker>,
}

impl TypeChecks {
    #[inline]
    fn is_empty(&self) -> bool {
        self.checked.is_empty()
    }

    /// Whether messages on `topic` of `domain` are checked against a type.
    pub(super) fn covers(&self, domain: Domain, topic: &str) -> bool {
        !self.checked.is_empty() && self.checked.contains_key(&(domain, Rc::<str>::from(topic)))
    }

    /// Why `msg` does not fit the type `topic` must carry, if it does not.
    fn mismatch(&self, domain: Domain, topic: &str, msg: Raw<'_>) -> Option<String> {
        let ty = self.checked.get(&(domain, Rc::<str>::from(topic)))?;
        let checker = self.checker.as_ref()?;
        checker
            .0
            .check(ty, msg.get())
            .err()
            .map(|why| format!("not {ty}: {why}"))
    }
}

impl Hub {
    /// Whether `me` keys its registrations by request id.
    fn per_id(&self, me: ConnRef) -> bool {
        self.conn(me.key)
            .is_some_and(|c| c.policy().registrations_per_id())
    }

    /// `subscribe` or `advertise` (`r`) for `node` (or the connection's
    /// default node).
    pub(super) fn register(
        &mut self,
        me: ConnRef,
        r: Registering<'_>,
        node: Option<&str>,
        id: Option<&[u8]>,
        now: Instant,
    ) {
        let Registering {
            role, topic, ty, ..
        } = r;
        if !self.live(me) {
            return;
        }
        let Some((domain, tag, topic)) = self.resolve_for(me, topic, node, id, now) else {
            return;
        };
        let class = match role {
            Role::Subscriber => Class::Subscribe,
            Role::Publisher => Class::Publish,
        };
        if !self.permit(me, class, &topic, id, now) {
            return;
        }
        if role == Role::Subscriber && !r.asked.encoding.is_plain() {
            let reg = &self.registries[domain as usize];
            let known = reg.topic_id(&topic).and_then(|t| reg.topic(t));
            let ty = ty
                .filter(|t| !t.is_empty())
                .or(known.map(|e| e.ty()))
                .unwrap_or("")
                .to_owned();
            if !self.check_encoding(me, r.asked.encoding, &topic, &ty, id, now) {
                return;
            }
        }
        let per_id = self.per_id(me);
        let max = match role {
            Role::Subscriber => self.limits.max_subscriptions_per_conn,
            Role::Publisher => self.limits.max_advertisements_per_conn,
        };
        let registered = match self.registries.update(domain, |r| {
            r.register(me, role, &topic, tag, id, per_id, max, ty)
        }) {
            Ok(r) => r,
            Err(TooMany { limit }) => {
                let what = match role {
                    Role::Subscriber => "subscriptions",
                    Role::Publisher => "advertisements",
                };
                let msg = format!(
                    "{topic}: this connection holds {limit} {what}, the limit; nothing changed"
                );
                return self.error_with_id(me, ErrorCode::TooManyRegistrations, &msg, id, now);
            }
        };
        if registered.new_node {
            self.note_endpoint(domain, me, tag, role, &topic, true);
        }
        let msg = match role {
            Role::Subscriber => format!("subscribed to {topic}"),
            Role::Publisher => format!("advertised {topic}"),
        };
        self.send_status(me, Level::Info, &msg, id, now);
        if role == Role::Subscriber && registered.new_member {
            self.greet_subscriber(domain, me, &topic, now);
            self.interest_changed(domain, &topic);
        }
        let r = Registering { topic: &topic, ..r };
        self.apply_qos(domain, me, r, registered, now);
    }

    /// `unsubscribe` or `unadvertise`; always safe to repeat.
    pub(super) fn unregister(
        &mut self,
        me: ConnRef,
        role: Role,
        topic: &str,
        node: Option<&str>,
        id: Option<&[u8]>,
        now: Instant,
    ) {
        if !self.live(me) {
            return;
        }
        let Some((domain, tag, topic)) = self.resolve_for(me, topic, node, id, now) else {
            return;
        };
        let per_id = self.per_id(me);
        let t = self.registries[domain as usize].topic_id(&topic);
        let gone = self
            .registries
            .update(domain, |r| r.unregister(me, role, &topic, tag, id, per_id));
        if let (Some(t), Role::Subscriber, true) = (t, role, gone.left) {
            self.after_unsubscribe(domain, me, t);
            // By name: the topic may have gone from the registry with it.
            self.interest_changed(domain, &topic);
        }
        if gone.node_left {
            self.note_endpoint(domain, me, tag, role, &topic, false);
        }
        let msg = match role {
            Role::Subscriber => format!("unsubscribed from {topic}"),
            Role::Publisher => format!("unadvertised {topic}"),
        };
        self.send_status(me, Level::Info, &msg, id, now);
    }

    /// The one way a message reaches a topic's subscribers, whoever sent
    /// it (see [`Origin`]). A client's publish is checked against the
    /// topic's ROS 2 type when it has one, then appended to the current
    /// batch (delivered by `Hub::flush_publishes`) or, when large,
    /// delivered at once from its own shared allocation. The gateway's own
    /// messages and remote ones are delivered at once, after the batch. A
    /// remote message never goes to a bridge: nothing is echoed to the
    /// network it came from.
    #[inline]
    pub(crate) fn route(
        &mut self,
        origin: Origin<'_>,
        domain: Domain,
        topic: &str,
        msg: Raw<'_>,
        now: Instant,
    ) {
        self.route_with_cdr(origin, domain, topic, msg, None, now);
    }

    /// [`Hub::route`] of a message that may carry its CDR bytes as it
    /// arrived (`cdr`: from the ROS 2 graph, or a Foxglove client's CDR
    /// message data): a `cbor-raw` or Foxglove subscriber gets those bytes
    /// untouched (`hub/encodings.rs`); everyone else gets `msg`.
    pub(crate) fn route_with_cdr(
        &mut self,
        origin: Origin<'_>,
        domain: Domain,
        topic: &str,
        msg: Raw<'_>,
        cdr: Option<&Rc<[u8]>>,
        now: Instant,
    ) {
        let (from, remote) = match origin {
            Origin::Client { conn, id } => {
                return match cdr {
                    None => self.route_client(conn, id, domain, topic, msg, now),
                    Some(cdr) => self.route_client_cdr(conn, id, domain, topic, msg, cdr, now),
                };
            }
            Origin::Gateway => (None, false),
            Origin::Remote { latched } => {
                if !self.federation_enabled() || (domain as usize) >= DOMAINS {
                    return;
                }
                self.counters.inc(Counter::FederationIn);
                let bridge = match latched {
                    Some(depth) => self.bridge_latches(domain, topic, depth, now),
                    None => None,
                };
                (bridge, true)
            }
        };
        self.fan_out(from, remote, domain, topic, msg, cdr, now);
        if remote {
            // As after a read from a socket: a remote message fanned out
            // to many slow subscribers is shed within the budget at once.
            self.enforce_memory(now);
        }
    }

    /// [`Hub::route`] of a client's publish (`conn`, its request `id`): the
    /// hot path, with the origin's flags constant in its copy of
    /// `fan_out`.
    pub(super) fn route_client(
        &mut self,
        conn: ConnRef,
        id: Option<&[u8]>,
        domain: Domain,
        topic: &str,
        msg: Raw<'_>,
        now: Instant,
    ) {
        if !self.checks.is_empty() && self.refused_by_type(domain, topic, conn, msg, id, now) {
            return;
        }
        self.fan_out(Some(conn), false, domain, topic, msg, None, now)
    }

    /// [`Hub::route_client`] of a message with its CDR (a Foxglove
    /// client's): the same checks; the CDR goes with it on the QoS path,
    /// where the subscribers that take CDR are. Off the hot path (its own
    /// copy of `fan_out`).
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    fn route_client_cdr(
        &mut self,
        conn: ConnRef,
        id: Option<&[u8]>,
        domain: Domain,
        topic: &str,
        msg: Raw<'_>,
        cdr: &Rc<[u8]>,
        now: Instant,
    ) {
        if !self.checks.is_empty() && self.refused_by_type(domain, topic, conn, msg, id, now) {
            return;
        }
        self.fan_out(Some(conn), false, domain, topic, msg, Some(cdr), now)
    }

    /// [`Hub::route`] past its origin: `from` the publisher whose QoS
    /// applies (a client, or the bridge as a latched publisher), `remote`
    /// skips bridges; only a client's publish (`from` and not `remote`)
    /// is batched. Inlined into `route_client` and `route`, so each copy
    /// has its origin's flags as constants (and `cdr`, only ever used on
    /// the QoS path where `cbor-raw` and Foxglove subscribers are, `None`
    /// on the client's hot path; `route_client_cdr` has its own copy).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn fan_out(
        &mut self,
        from: Option<ConnRef>,
        remote: bool,
        domain: Domain,
        topic: &str,
        msg: Raw<'_>,
        cdr: Option<&Rc<[u8]>>,
        now: Instant,
    ) {
        let batched = from.is_some() && !remote;
        let skip_bridges = remote;
        self.counters.inc(Counter::Published);
        if self.sim_time_watch(domain, topic) {
            self.note_clock(domain, msg);
        }
        // TF's tap (`tf.rs`): one prefix test here, the rest off the path.
        if topic.as_bytes().starts_with(b"/tf") {
            self.tf_tap(from, domain, topic, msg, now);
        }
        let payload = msg.get().as_bytes();
        let Some((t, e)) = self.registries.publish_on(domain, topic, payload.len()) else {
            return;
        };
        // QoS stated by someone (latched publishers count even with no
        // subscriber: their cache must fill), or a client's message with
        // its CDR, for a bridge's line (`publish_qos`; a remote sample
        // never goes to a bridge, and stays on the fast path).
        if e.has_qos() || (cdr.is_some() && !remote) {
            return self.publish_qos(domain, t, from, msg, cdr, skip_bridges, now);
        }
        if e.subscribers().is_empty() {
            return;
        }
        let key = (domain, t);
        let mut entry = e;
        if self.batch.topic().is_some_and(|b| b != key) || (!batched && !self.batch.is_empty()) {
            self.flush_publishes(now);
            match self.registries.get(domain).topic(t) {
                Some(e) => entry = e,
                None => return,
            }
        }
        if !batched || (self.batch.is_empty() && payload.len() >= BATCH_MAX_BYTES) {
            let lines = encode::publish_shared(entry.prefix(), msg);
            return self.deliver(key, lines, 1, skip_bridges, now);
        }
        self.batch
            .push(key, &encode::publish_parts(entry.prefix(), msg));
        if self.batch.len_bytes() >= BATCH_MAX_BYTES {
            self.flush_publishes(now);
        }
    }

    /// Installs the check of messages against ROS 2 types.
    pub(crate) fn set_type_checker(&mut self, c: Box<dyn TypeCheck>) {
        self.checks.checker = Some(Checker(c));
    }

    /// Messages published on `topic` of `domain` must fit `ty` from now
    /// on (ROS 2 subscribes to it), or (`None`) need not any more.
    pub(crate) fn set_topic_check(&mut self, domain: Domain, topic: &str, ty: Option<&str>) {
        let key = (domain, Rc::<str>::from(topic));
        match ty {
            Some(ty) => {
                self.checks.checked.insert(key, Rc::from(ty));
            }
            None => {
                self.checks.checked.remove(&key);
            }
        }
    }

    /// Whether the type check refused a client's publish (and said so,
    /// naming the field).
    #[cold]
    #[inline(never)]
    fn refused_by_type(
        &mut self,
        domain: Domain,
        topic: &str,
        me: ConnRef,
        msg: Raw<'_>,
        id: Option<&[u8]>,
        now: Instant,
    ) -> bool {
        let Some(why) = self.checks.mismatch(domain, topic, msg) else {
            return false;
        };
        let text = format!("publish on {topic}: {why}");
        self.error_with_id(me, ErrorCode::TypeMismatch, &text, id, now);
        true
    }

    /// Delivers the pending publish batch, if any.
    pub(super) fn flush_publishes(&mut self, now: Instant) {
        let Some(t) = self.batch.topic() else {
            return;
        };
        if self.batch.is_empty() {
            return self.batch.clear();
        }
        let lines: Rc<[u8]> = Rc::from(self.batch.lines());
        let msgs = self.batch.messages();
        self.batch.clear();
        self.deliver(t, lines, msgs, false, now);
    }

    /// Queues one JSON line to `to` as sheddable data in queue bucket
    /// `bucket` (goal feedback): dropped oldest first, fairly against its
    /// topics, when `to` does not read.
    pub(super) fn deliver_sheddable(
        &mut self,
        to: ConnRef,
        line: &[u8],
        bucket: u32,
        now: Instant,
    ) {
        if !self.live(to) {
            return;
        }
        // Other output: after the publishes read before it.
        self.flush_publishes(now);
        let mut framed = Framed::new(Rc::from(line), 1);
        let cap = self.limits.max_queue_bytes;
        if let Some(c) = self.conns.get_mut(to.key as usize) {
            let sink = Sink {
                mem: &mut self.mem,
                counters: &mut self.counters,
                dirty: &mut self.dirty,
            };
            sink.queue(c, to.key, &mut framed, bucket, 1, cap, now);
        }
        let (created, unused) = framed.finish();
        self.mem.frames = self.mem.frames + created - unused;
    }

    /// Queues `msgs` messages of topic `t` (JSON lines) to every live
    /// subscriber (but bridges, when `skip_bridges`); subscribers with the
    /// same framing share one copy.
    fn deliver(
        &mut self,
        (domain, t): TopicKey,
        lines: Rc<[u8]>,
        msgs: u32,
        skip_bridges: bool,
        now: Instant,
    ) {
        let Some(topic) = self.registries[domain as usize].topic(t) else {
            return;
        };
        let mut framed = Framed::new(lines, msgs as usize);
        let cap = self.limits.max_queue_bytes;
        for &sub in topic.subscribers() {
            let Some(c) = self.conns.get_mut(sub.key as usize) else {
                continue;
            };
            if c.gen() != sub.gen || !c.is_open() || (skip_bridges && c.is_bridge()) {
                continue;
            }
            let sink = Sink {
                mem: &mut self.mem,
                counters: &mut self.counters,
                dirty: &mut self.dirty,
            };
            sink.queue(c, sub.key, &mut framed, t, msgs, cap, now);
        }
        let (created, unused) = framed.finish();
        self.mem.frames = self.mem.frames + created - unused;
    }
}

/// What queueing topic data updates beside the connection: the ledger,
/// the counters and the dirty list (borrowed apart from the registry, so
/// fan-out walks a topic's subscribers without looking it up again).
struct Sink<'a> {
    mem: &'a mut Ledger,
    counters: &'a mut Counters,
    dirty: &'a mut Vec<u32>,
}

impl Sink<'_> {
    /// Queues `framed` (`msgs` messages) to connection `c` (key `key`)
    /// under queue bucket `t`, shedding past `cap`.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn queue(
        self,
        c: &mut Conn,
        key: u32,
        framed: &mut Framed,
        t: u32,
        msgs: u32,
        cap: usize,
        now: Instant,
    ) {
        let out = c.out_mut(now);
        let frames = framed.get(out.framing());
        let len = frames.len();
        let entries = out.entry_bytes();
        let d = out.push_topic(frames, t, msgs, cap);
        self.mem.entries_changed(entries, out.entry_bytes());
        self.mem.queued = self.mem.queued + len - d.bytes as usize;
        self.mem.frames -= d.released as usize;
        self.counters.add(Counter::Delivered, u64::from(msgs));
        self.counters.add(Counter::Dropped, d.frames);
        self.counters.add(Counter::DroppedBytes, d.bytes);
        if c.set_dirty() {
            self.dirty.push(key);
        }
    }
}
