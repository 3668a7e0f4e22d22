//! QoS that users can see (`docs/protocol.md`, "QoS: latching, depth,
//! throttling, reliability, peers"): latching (transient
//! local), depth, throttling, reliability, the compatibility rule with its
//! warnings, and publishers told how many subscribers they have.
//!
//! Registrations that state nothing keep the fast path and today's
//! behaviour: a topic takes the path here only while some membership of it
//! stated QoS ([`crate::registry::Topic::has_qos`]).
//!
//! Invariants:
//! - a latched publisher's last `depth` messages (bounded per publisher by
//!   [`LATCH_BYTES_PER_PUBLISHER`], in all by [`LATCH_BYTES_TOTAL`]) go to
//!   a subscriber that joins later, at once and in publish order, before
//!   any live message; the cache goes with the publisher's membership;
//! - an incompatible (publisher, subscriber) pair exchanges nothing, and
//!   both were told, with the topic and both QoS, when the pair formed;
//! - a throttled subscription gets at most one message per interval, the
//!   newest, and never sits on one longer than the interval: one timer per
//!   subscription with a message waiting, never one per message;
//! - a reliable subscription's messages are never shed: its connection is
//!   warned past `--max-queue-bytes` and closed past twice that;
//! - after every loop turn, each publisher that asked for peer counts was
//!   last told its topic's current count of compatible subscribers; a
//!   crowd arriving in one turn makes one notification;
//! - the memory ledger counts each publish frame once, however many queues
//!   hold it (as on the fast path); latched caches and held throttle
//!   messages are their own copies, counted in the registry's bytes, so a
//!   queue dropping a frame's last reference is what frees it.

use std::collections::HashSet;
use std::rc::Rc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use rosgate_wire::encode::{self, Level};
use rosgate_wire::qos::{self, Durability, Qos, Reliability};
use rosgate_wire::Raw;

use super::Hub;
use crate::conn::{CloseReason, ConnRef};
use crate::counters::Counter;
use crate::encoding::Encoding;
use crate::limits::{TIMER_SLOTS, TIMER_TICK_MS};
use crate::nodes::Domain;
use crate::registry::{MemberQos, Registered, Role, Throttle, TopicId};
use crate::timer::TimerWheel;
use crate::transport::Framed;

/// Bytes one latched publisher may keep for late subscribers; older
/// messages are evicted first (a message bigger than this is not kept).
pub const LATCH_BYTES_PER_PUBLISHER: usize = 8 * 1024 * 1024;

/// Bytes all latched caches together may keep; past it new messages are
/// not kept (counted).
pub const LATCH_BYTES_TOTAL: usize = 64 * 1024 * 1024;

/// The shortest throttle interval honoured (a smaller `throttle_rate` is
/// this one).
pub const MIN_THROTTLE_MS: u64 = 10;

/// What a registration asks for beside its name.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Asked {
    pub qos: Qos,
    /// A publisher wants peer counts.
    pub peers: bool,
    /// A subscriber's `throttle_rate`, ms (0: none).
    pub throttle_ms: u64,
    /// A subscriber's `compression` and `fragment_size`.
    pub encoding: Encoding,
}

/// A `subscribe` or an `advertise` as decoded: the role, the topic (as the
/// client wrote it, until resolved), its type if given, and the QoS,
/// peer counts or throttle it asked for.
#[derive(Debug, Clone, Copy)]
pub(super) struct Registering<'a> {
    pub(super) role: Role,
    pub(super) topic: &'a str,
    pub(super) ty: Option<&'a str>,
    pub(super) asked: Asked,
}

impl<'a> Registering<'a> {
    /// A plain subscription (no type, nothing asked): the bridge's.
    pub(super) fn subscriber(topic: &'a str) -> Self {
        Registering {
            role: Role::Subscriber,
            topic,
            ty: None,
            asked: Asked::default(),
        }
    }
}

impl Asked {
    fn is_anything(&self) -> bool {
        self.qos.is_stated() || self.peers || self.throttle_ms > 0 || !self.encoding.is_plain()
    }
}

/// Throttled subscriptions waiting for the end of their interval.
#[derive(Debug)]
pub(super) struct QosTimers {
    wheel: TimerWheel,
    slots: slab::Slab<(Domain, Rc<str>, ConnRef)>,
    /// Topics whose peer counts may have changed this turn.
    peers_dirty: HashSet<(Domain, Rc<str>)>,
    /// Sequence of publishes through the QoS path (orders latched caches).
    pub(super) publish_seq: u64,
}

impl QosTimers {
    pub(super) fn new(now: Instant) -> Self {
        QosTimers {
            wheel: TimerWheel::new(now, Duration::from_millis(TIMER_TICK_MS), TIMER_SLOTS),
            slots: slab::Slab::new(),
            peers_dirty: HashSet::new(),
            publish_seq: 0,
        }
    }

    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.wheel.next_deadline()
    }

    pub(super) fn has_immediate(&self) -> bool {
        !self.peers_dirty.is_empty()
    }
}

/// The QoS a registration shows in messages (`any` where unstated).
fn shown(q: Option<&MemberQos>) -> String {
    q.map_or_else(|| Qos::default().to_string(), |m| m.qos.to_string())
}

impl Hub {
    /// After registration `r` of `me` (its topic resolved, `reg.topic`):
    /// its QoS state, the compatibility check, the latched messages for a
    /// new subscriber, the peer count for a publisher that asked.
    pub(super) fn apply_qos(
        &mut self,
        domain: Domain,
        me: ConnRef,
        r: Registering<'_>,
        reg: Registered,
        now: Instant,
    ) {
        let Registering {
            role,
            topic: name,
            asked,
            ..
        } = r;
        let t = reg.topic;
        let had = self.registries[domain as usize]
            .member_qos(me, role, t)
            .is_some();
        if asked.is_anything() || had {
            let state = asked.is_anything().then(|| MemberQos {
                qos: asked.qos,
                throttle: (role == Role::Subscriber && asked.throttle_ms > 0).then(|| Throttle {
                    interval: Duration::from_millis(asked.throttle_ms.max(MIN_THROTTLE_MS)),
                    last: None,
                    pending: None,
                    scheduled: false,
                }),
                peers: (role == Role::Publisher && asked.peers).then_some(None),
                cache: Default::default(),
                cache_bytes: 0,
                encoding: asked.encoding,
            });
            self.registries
                .update(domain, |r| r.set_member_qos(me, role, t, state));
            if role == Role::Subscriber {
                let reliable = asked.qos.reliability == Some(Reliability::Reliable);
                if let Some(c) = self.live_mut(me) {
                    c.out_settings_mut()
                        .set_topic_qos(t, asked.qos.depth, reliable);
                }
            }
        }
        if asked.qos.is_stated() {
            self.check_pairs(domain, me, role, t, name, now);
        }
        match role {
            Role::Subscriber => {
                if reg.new_member
                    && self.registries[domain as usize]
                        .topic(t)
                        .is_some_and(|e| e.latched() > 0)
                {
                    self.send_latched(domain, me, t, now);
                }
                self.peers_changed(domain, t);
            }
            Role::Publisher => {
                if asked.peers {
                    self.peers_changed(domain, t);
                }
            }
        }
    }

    /// After `me` left topic `t` as a subscriber (or may have): its queue
    /// forgets the topic's QoS, and peer counts may have changed.
    pub(super) fn after_unsubscribe(&mut self, domain: Domain, me: ConnRef, t: TopicId) {
        if let Some(c) = self.live_mut(me) {
            c.out_settings_mut().set_topic_qos(t, None, false);
        }
        self.peers_changed(domain, t);
    }

    /// Warns both sides of every incompatible pair `me`'s registration on
    /// `t` forms: an incompatible pair is never silent.
    fn check_pairs(
        &mut self,
        domain: Domain,
        me: ConnRef,
        role: Role,
        t: TopicId,
        name: &str,
        now: Instant,
    ) {
        let reg = &self.registries[domain as usize];
        let Some(topic) = reg.topic(t) else { return };
        let Some(mine) = reg.member_qos(me, role, t).map(|q| q.qos) else {
            return;
        };
        let others: Vec<ConnRef> = match role {
            Role::Subscriber => topic.publishers().to_vec(),
            Role::Publisher => topic.subscribers().to_vec(),
        };
        let other_role = match role {
            Role::Subscriber => Role::Publisher,
            Role::Publisher => Role::Subscriber,
        };
        let mut warnings = Vec::new();
        for o in others.into_iter().filter(|&o| o != me) {
            let theirs = reg
                .member_qos(o, other_role, t)
                .map_or(Qos::default(), |q| q.qos);
            let (offer, request) = match role {
                Role::Subscriber => (theirs, mine),
                Role::Publisher => (mine, theirs),
            };
            if let Err(why) = qos::check(&offer, &request) {
                warnings.push((o, offer, request, why));
            }
        }
        for (o, offer, request, why) in warnings {
            self.counters.inc(Counter::QosIncompatible);
            let (p, s) = match role {
                Role::Subscriber => (o, me),
                Role::Publisher => (me, o),
            };
            let msg = format!(
                "QoS mismatch on {name}: publisher {} offers {offer}, subscriber {} requests {request}: incompatible {}; no messages flow between them",
                self.conn_node_name(p),
                self.conn_node_name(s),
                why.label()
            );
            self.send_status(me, Level::Warning, &msg, None, now);
            self.send_status(o, Level::Warning, &msg, None, now);
        }
    }

    /// Sends the latched messages of `t`'s publishers (compatible with the
    /// subscriber, and unless it asked for volatile) to the new
    /// subscriber `me`, in publish order.
    fn send_latched(&mut self, domain: Domain, me: ConnRef, t: TopicId, now: Instant) {
        let reg = &self.registries[domain as usize];
        let Some(topic) = reg.topic(t) else { return };
        let request = reg
            .member_qos(me, Role::Subscriber, t)
            .map_or(Qos::default(), |q| q.qos);
        if request.durability == Some(Durability::Volatile) {
            return;
        }
        let mut frames: Vec<(u64, Rc<[u8]>)> = Vec::new();
        for &p in topic.publishers() {
            let Some(q) = reg.member_qos(p, Role::Publisher, t) else {
                continue;
            };
            if q.latched() && qos::check(&q.qos, &request).is_ok() {
                frames.extend(q.cache.iter().cloned());
            }
        }
        frames.sort_by_key(|(seq, _)| *seq);
        for (_, f) in frames {
            self.counters.inc(Counter::LatchedDelivered);
            // A copy: the cache's frames are counted in the registry's
            // bytes, and a queue holding a frame the cache also holds would
            // never see itself release it (the ledger would keep it).
            self.queue_one(domain, me, t, Rc::from(&f[..]), now);
        }
    }

    /// Queues one publish frame of topic `t` to `to` (its depth and
    /// reliability apply; a reliable backlog warns, then closes). `frame`
    /// must be held by nobody else: the ledger counts it as new.
    fn queue_one(
        &mut self,
        domain: Domain,
        to: ConnRef,
        t: TopicId,
        frame: Rc<[u8]>,
        now: Instant,
    ) -> bool {
        if !self.live(to) {
            return false;
        }
        let mut framed = Framed::new(frame, 1);
        let queued = self.queue_shared(domain, to, t, &mut framed, now);
        let (created, unused) = framed.finish();
        self.mem.frames = self.mem.frames + created - unused;
        queued
    }

    /// Queues the message of `framed` (shared by every subscriber of one
    /// publish, counted once by the caller's `finish`) to `to`, in the
    /// encoding its subscription asked for (made once per message, see
    /// `hub/encodings.rs`). Whether it was queued (a message that cannot
    /// be made in that encoding is not, counted).
    fn queue_shared(
        &mut self,
        domain: Domain,
        to: ConnRef,
        t: TopicId,
        framed: &mut Framed,
        now: Instant,
    ) -> bool {
        let Some(framing) = self.live_mut(to).map(|c| c.out().framing()) else {
            return false;
        };
        let enc = self.registries[domain as usize]
            .member_qos(to, Role::Subscriber, t)
            .map_or(Encoding::default(), |q| q.encoding);
        let Some(frames) = self.frames_for(domain, t, framed, framing, enc, now) else {
            return false;
        };
        let dropped = self.queue_framed(to, t, frames, now);
        self.counters.add(Counter::DepthDropped, dropped);
        self.check_reliable(to, now);
        true
    }

    /// A reliable subscriber that cannot keep up is told, then closed.
    fn check_reliable(&mut self, to: ConnRef, now: Instant) {
        let cap = self.limits.max_queue_bytes;
        let Some(c) = self.live_mut(to) else { return };
        let backlog = c.out().reliable_bytes();
        if backlog > 2 * cap {
            self.close(to.key, CloseReason::ReliableOverflow, now);
        } else if backlog > cap && !c.reliable_warned() {
            c.set_reliable_warned(true);
            self.counters.inc(Counter::ReliableWarnings);
            let msg = format!(
                "a reliable subscription cannot keep up: {backlog} bytes wait for this connection; past {} it is closed (reliable data is never dropped)",
                2 * cap
            );
            self.send_status(to, Level::Warning, &msg, None, now);
        } else if backlog <= cap / 2 {
            c.set_reliable_warned(false);
        }
    }

    /// The QoS path of a publish on `t` from `from` (the router's, for
    /// topics with QoS): latched caches, compatibility, throttles, depth
    /// and reliability, one message at a time (no batching); bridges are
    /// skipped when `skip_bridges` (a remote message). `cdr`: the ROS 2
    /// sample's own bytes, which `cbor-raw` subscribers get untouched.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn publish_qos(
        &mut self,
        domain: Domain,
        t: TopicId,
        from: Option<ConnRef>,
        msg: Raw<'_>,
        cdr: Option<&Rc<[u8]>>,
        skip_bridges: bool,
        now: Instant,
    ) {
        self.flush_publishes(now);
        let reg = &self.registries[domain as usize];
        let Some(topic) = reg.topic(t) else { return };
        // The line is joined only when something needs it (a latched
        // cache, a NDJSON subscriber, a text encoding): a megabyte image
        // for WebSocket and binary subscribers goes from its pieces
        // straight into their frames (`Framed::from_parts`). The prefix is
        // the topic's (a few dozen bytes), copied to outlive the borrow.
        let prefix = topic.prefix().to_vec();
        let frame_len = encode::publish_parts(&prefix, msg)
            .iter()
            .map(|p| p.len())
            .sum::<usize>();
        let offer = from
            .and_then(|p| reg.member_qos(p, Role::Publisher, t))
            .map(|q| (q.qos, q.latched()));
        let (offer_qos, latched) = offer.unwrap_or((Qos::default(), false));
        self.qos_timers.publish_seq += 1;
        let seq = self.qos_timers.publish_seq;
        if let (true, Some(p)) = (latched, from) {
            let depth = offer_qos.depth.unwrap_or(1) as usize;
            let total = self
                .registries
                .iter()
                .map(|r| r.cache_bytes())
                .sum::<usize>();
            if total + frame_len > LATCH_BYTES_TOTAL {
                self.counters.inc(Counter::LatchDropped);
            } else {
                // The cache's own copy, counted in the registry's bytes: a
                // frame shared with the queues would hide their release of
                // it from the ledger (see `queue_one`).
                let f: Rc<[u8]> = encode::publish_shared(&prefix, msg);
                let evicted = self.registries.update(domain, |r| {
                    r.cache_push(p, t, seq, f, depth, LATCH_BYTES_PER_PUBLISHER)
                });
                self.counters.add(Counter::LatchEvicted, evicted);
            }
        }
        let subs: Vec<ConnRef> = self.registries[domain as usize]
            .topic(t)
            .map_or(Vec::new(), |e| e.subscribers().to_vec());
        // One frame (and one copy per framing) for every subscriber, counted
        // once in the ledger, as on the fast path (`deliver`).
        let mut framed = Framed::from_parts(&prefix, msg);
        if let Some(cdr) = cdr {
            // A ROS 2 sample's own bytes, for `cbor-raw` (`frames_for`).
            framed.set_cdr(Rc::clone(cdr));
        }
        for sub in subs {
            // A subscriber closing this turn gets nothing (and nothing is
            // counted for it), as on the fast path (`deliver`).
            if !self.live(sub) || (skip_bridges && self.is_bridge(sub)) {
                continue;
            }
            let reg = &self.registries[domain as usize];
            let sq = reg.member_qos(sub, Role::Subscriber, t);
            if let Some(q) = sq {
                if qos::check(&offer_qos, &q.qos).is_err() {
                    self.counters.inc(Counter::QosSkipped);
                    continue;
                }
            }
            let throttled = sq.is_some_and(|q| q.throttle.is_some());
            if throttled && !self.throttle_admit(domain, sub, t, &mut framed, now) {
                continue;
            }
            if let (Some(cdr), true) = (cdr, self.is_bridge(sub)) {
                // A client's CDR (a bridge never gets a ROS 2 sample: it
                // skips bridges): its line carries the bytes too, for the
                // ROS 2 peers to put untouched (`crates/peers/src/driver.rs`);
                // other gateways get `msg` as before. Its own frame,
                // counted as made.
                let line = encode::publish_with_cdr(&prefix, msg, cdr);
                self.mem.frames += line.len();
                let dropped = self.queue_framed(sub, t, line, now);
                self.counters.add(Counter::DepthDropped, dropped);
                self.counters.inc(Counter::Delivered);
                continue;
            }
            if self.queue_shared(domain, sub, t, &mut framed, now) {
                self.counters.inc(Counter::Delivered);
            }
        }
        let (created, unused) = framed.finish();
        self.mem.frames = self.mem.frames + created - unused;
    }

    /// Whether a throttled subscriber gets the message of `framed` now; if
    /// not, a copy is held as the interval's newest (replacing an older
    /// one, counted) and a flush is scheduled for the interval's end.
    fn throttle_admit(
        &mut self,
        domain: Domain,
        sub: ConnRef,
        t: TopicId,
        framed: &mut Framed,
        now: Instant,
    ) -> bool {
        let reg = &self.registries[domain as usize];
        let Some(th) = reg
            .member_qos(sub, Role::Subscriber, t)
            .and_then(|q| q.throttle.as_ref())
        else {
            return true;
        };
        let within = th
            .last
            .filter(|&last| now.saturating_duration_since(last) < th.interval);
        let Some(last) = within else {
            // The interval is over: this message goes now. A message still
            // held from the last interval (its flush is due this very turn)
            // is older: sending it later would reorder, and a second
            // message within the new interval; the newest wins.
            let stale = self
                .registries
                .update(domain, |r| r.throttle_take(sub, t))
                .is_some();
            if stale {
                self.counters.inc(Counter::ThrottleDropped);
            }
            self.registries.update(domain, |r| {
                if let Some(th) = r
                    .member_qos_mut(sub, Role::Subscriber, t)
                    .and_then(|q| q.throttle.as_mut())
                {
                    th.last = Some(now);
                }
            });
            return true;
        };
        let schedule = (!th.scheduled).then(|| last + th.interval);
        let name: Rc<str> = match reg.topic(t) {
            Some(e) => Rc::from(e.name()),
            None => return false,
        };
        // The throttle's own copy (see `Throttle::pending`).
        let copy: Rc<[u8]> = Rc::from(&framed.get(crate::transport::Framing::Lines)[..]);
        let replaced = self
            .registries
            .update(domain, |r| r.throttle_hold(sub, t, copy));
        if replaced {
            self.counters.inc(Counter::ThrottleDropped);
        }
        if let Some(at) = schedule {
            self.registries.update(domain, |r| {
                if let Some(th) = r
                    .member_qos_mut(sub, Role::Subscriber, t)
                    .and_then(|q| q.throttle.as_mut())
                {
                    th.scheduled = true;
                }
            });
            let key = self.qos_timers.slots.insert((domain, name, sub)) as u64;
            self.qos_timers.wheel.insert(key, at);
        }
        false
    }

    /// Runs the throttle flushes that are due, and the peer counts of the
    /// turn (called once per turn from `expire`).
    pub(super) fn flush_qos(&mut self, now: Instant) {
        let mut due = Vec::new();
        self.qos_timers.wheel.expire(now, |k| due.push(k));
        for k in due {
            let Some((domain, name, sub)) = self.qos_timers.slots.try_remove(k as usize) else {
                continue;
            };
            let Some(t) = self.registries[domain as usize].topic_id(&name) else {
                continue;
            };
            let Some(th) = self.registries[domain as usize]
                .member_qos(sub, Role::Subscriber, t)
                .and_then(|q| q.throttle.as_ref())
            else {
                continue;
            };
            // A timer of an earlier subscription (the same connection
            // unsubscribed and subscribed again), or one whose interval
            // restarted, fires before the current interval ends: the held
            // message waits for that end, never going early.
            let end = th.last.map(|last| last + th.interval);
            if let Some(end) = end.filter(|&end| now < end) {
                if th.pending.is_some() {
                    let slot = self.qos_timers.slots.insert((domain, name, sub)) as u64;
                    self.qos_timers.wheel.insert(slot, end);
                } else {
                    // Nothing held (the interval restarted with a message
                    // sent at once): the next held message schedules anew.
                    self.registries.update(domain, |r| {
                        if let Some(th) = r
                            .member_qos_mut(sub, Role::Subscriber, t)
                            .and_then(|q| q.throttle.as_mut())
                        {
                            th.scheduled = false;
                        }
                    });
                }
                continue;
            }
            let pending = self.registries.update(domain, |r| {
                let th = r
                    .member_qos_mut(sub, Role::Subscriber, t)?
                    .throttle
                    .as_mut()?;
                th.scheduled = false;
                if th.pending.is_some() {
                    th.last = Some(now);
                }
                r.throttle_take(sub, t)
            });
            // Counted only when queued (a subscriber closing this turn
            // gets nothing, as on the fast path).
            if let (Some(frame), true) = (pending, self.live(sub)) {
                if self.queue_one(domain, sub, t, frame, now) {
                    self.counters.inc(Counter::Delivered);
                }
            }
        }
        // `expire` leaves for later only what a budget defers
        // (`has_expire_backlog`): the peer counts are settled this turn.
        // A `peers` line can overflow its publisher's control queue and
        // close it (P6); `close` then marks the topics that publisher
        // subscribed to (`peers_leaving`), and their other watchers are
        // owed a count without it. A round after the first runs only when
        // the one before closed a connection, and a connection closes
        // once, so the rounds are at most the connections plus one.
        //
        // A line queued to a publisher closed meanwhile never leaves (its
        // queue goes with it): only the lines to publishers still open
        // once the counts are settled are counted.
        let mut told = Vec::new();
        for _ in 0..=self.conns.len() {
            if !self.qos_timers.has_immediate() {
                break;
            }
            self.flush_peers(&mut told, now);
        }
        let sent = told.iter().filter(|&&p| self.live(p)).count();
        self.counters.add(Counter::PeerNotifications, sent as u64);
    }

    /// Marks `t`'s peer counts for recomputation at the end of the turn,
    /// if any publisher asked for them.
    pub(super) fn peers_changed(&mut self, domain: Domain, t: TopicId) {
        let Some(e) = self.registries[domain as usize].topic(t) else {
            return;
        };
        if e.peer_watchers() > 0 {
            self.qos_timers
                .peers_dirty
                .insert((domain, Rc::from(e.name())));
        }
    }

    /// Marks the peer counts of every topic `who` subscribes to in
    /// `domain` (it is leaving).
    pub(super) fn peers_leaving(&mut self, domain: Domain, who: ConnRef) {
        let topics = self.registries[domain as usize].watched_subscriptions(who);
        for t in topics {
            self.peers_changed(domain, t);
        }
    }

    /// Tells each watching publisher of a changed topic its count of
    /// compatible, open subscribers, if it changed; adds each publisher
    /// told to `told`.
    fn flush_peers(&mut self, told: &mut Vec<ConnRef>, now: Instant) {
        let mut dirty: Vec<(Domain, Rc<str>)> = self.qos_timers.peers_dirty.drain().collect();
        // In a stable order (the set's is random per process), so the
        // lines a turn sends, and which of them overflows a queue first,
        // are a function of the hub's inputs (crates/sim replays them).
        dirty.sort_unstable();
        for (domain, name) in dirty {
            let reg = &self.registries[domain as usize];
            let Some(t) = reg.topic_id(&name) else {
                continue;
            };
            let Some(topic) = reg.topic(t) else { continue };
            let subs: Vec<(ConnRef, Qos)> = topic
                .subscribers()
                .iter()
                .filter(|s| self.live(**s))
                .map(|&s| {
                    (
                        s,
                        reg.member_qos(s, Role::Subscriber, t)
                            .map_or(Qos::default(), |q| q.qos),
                    )
                })
                .collect();
            let watchers: Vec<(ConnRef, Qos, Option<u32>)> = topic
                .publishers()
                .iter()
                .filter(|p| self.live(**p))
                .filter_map(|&p| {
                    let q = reg.member_qos(p, Role::Publisher, t)?;
                    Some((p, q.qos, q.peers?))
                })
                .collect();
            for (p, offer, last) in watchers {
                // A federation's bridge stands for the other gateways'
                // subscribers of the topic.
                let n: u32 = subs
                    .iter()
                    .filter(|(_, request)| qos::check(&offer, request).is_ok())
                    .map(|(s, _)| self.peer_weight(domain, *s, &name))
                    .sum();
                if last == Some(n) {
                    continue;
                }
                self.registries.update(domain, |r| {
                    if let Some(q) = r.member_qos_mut(p, Role::Publisher, t) {
                        q.peers = Some(Some(n));
                    }
                });
                told.push(p);
                let mut out = Vec::new();
                out.extend_from_slice(br#"{"op":"peers","topic":"#);
                encode::json_string(&mut out, &name);
                out.extend_from_slice(br#","subscribers":"#);
                encode::push_u64(&mut out, u64::from(n));
                out.extend_from_slice(b"}\n");
                self.send_control(p, &out, now);
            }
        }
    }

    /// `/rosgate/topic_info`: a topic's endpoints with their QoS, and the
    /// incompatible pairs.
    pub(super) fn topic_info(&self, domain: Domain, name: &str) -> Value {
        let reg = &self.registries[domain as usize];
        let Some(t) = reg.topic_id(name) else {
            return json!({"topic": name, "type": "", "publishers": [], "subscribers": [], "incompatible": []});
        };
        let Some(topic) = reg.topic(t) else {
            return Value::Null;
        };
        let qos_json = |q: Option<&MemberQos>| -> Value {
            let q = q.map(|m| m.qos).unwrap_or_default();
            json!({
                "reliability": match q.reliability { Some(Reliability::Reliable) => "reliable", Some(Reliability::BestEffort) => "best_effort", None => "any" },
                "durability": match q.durability { Some(Durability::TransientLocal) => "transient_local", Some(Durability::Volatile) => "volatile", None => "any" },
                "depth": q.depth,
            })
        };
        let mut pubs = Vec::new();
        for &p in topic.publishers() {
            let q = reg.member_qos(p, Role::Publisher, t);
            for tag in reg.nodes_on(p, t, Role::Publisher) {
                pubs.push(json!({
                    "node": self.node_label(p, tag),
                    "qos": qos_json(q),
                    "latched_messages": q.map_or(0, |m| m.cache.len()),
                    "peers": q.is_some_and(|m| m.peers.is_some()),
                }));
            }
        }
        let mut subs = Vec::new();
        let mut bad = Vec::new();
        for &s in topic.subscribers() {
            let q = reg.member_qos(s, Role::Subscriber, t);
            for tag in reg.nodes_on(s, t, Role::Subscriber) {
                subs.push(json!({
                    "node": self.node_label(s, tag),
                    "qos": qos_json(q),
                    "throttle_ms": q.and_then(|m| m.throttle.as_ref()).map(|th| th.interval.as_millis() as u64),
                    "compression": q.map_or("none", |m| m.encoding.compression.label()),
                    "fragment_size": q.and_then(|m| m.encoding.fragment),
                }));
            }
            for &p in topic.publishers() {
                let offer = reg
                    .member_qos(p, Role::Publisher, t)
                    .map(|m| m.qos)
                    .unwrap_or_default();
                let request = q.map(|m| m.qos).unwrap_or_default();
                if let Err(why) = qos::check(&offer, &request) {
                    bad.push(json!({
                        "publisher": self.conn_node_name(p),
                        "subscriber": self.conn_node_name(s),
                        "offered": shown(reg.member_qos(p, Role::Publisher, t)),
                        "requested": shown(q),
                        "why": why.label(),
                    }));
                }
            }
        }
        json!({"topic": name, "type": topic.ty(), "publishers": pubs, "subscribers": subs, "incompatible": bad})
    }

    /// Queues `frames` (one message, framed for `to`'s queue) to `to`
    /// under topic `t`; returns the messages its depth dropped.
    fn queue_framed(&mut self, to: ConnRef, t: TopicId, frames: Rc<[u8]>, now: Instant) -> u64 {
        let cap = self.limits.max_queue_bytes;
        let Some(c) = self.conns.get_mut(to.key as usize) else {
            return 0;
        };
        let out = c.out_mut(now);
        let len = frames.len();
        let entries = out.entry_bytes();
        let d = out.push_topic(frames, t, 1, cap);
        self.mem.entries_changed(entries, out.entry_bytes());
        self.mem.queued = self.mem.queued + len - d.bytes as usize;
        self.mem.frames -= d.released as usize;
        self.counters.add(Counter::Dropped, d.frames);
        self.counters.add(Counter::DroppedBytes, d.bytes);
        if d.frames > 0 {
            // Told once per turn at most, debounced (`hub/foxglove.rs`).
            if let Some(s) = c.foxglove_mut() {
                s.note_dropped(d.frames);
            }
        }
        if c.set_dirty() {
            self.dirty.push(to.key);
        }
        d.by_depth
    }
}
