//! Topic operations: subscribe, unsubscribe, advertise, unadvertise, and
//! publish with one encoding shared by every subscriber.
//!
//! Registrations are per connection in the strict dialect (the protocol
//! file) and per request id within the connection in the rosbridge dialect
//! (the connection's [`crate::transport::Policy`] says which), and made for
//! a node; the [`crate::registry::Registry`] of the connection's domain
//! keeps them. Names are resolved first (`hub/graph.rs`) when the
//! connection resolves names; otherwise they are used as written.

use std::rc::Rc;
use std::time::Instant;

use rosgate_wire::encode::{self, Level};
use rosgate_wire::Raw;

use super::batch::{TopicKey, BATCH_MAX_BYTES};
use super::qos::Asked;
use super::Hub;
use crate::access::Class;
use crate::conn::{Conn, ConnRef};
use crate::counters::{Counter, Counters, ErrorCode};
use crate::memory::Ledger;
use crate::nodes::Domain;
use crate::registry::{Role, TooMany};
use crate::transport::Framed;

impl Hub {
    /// Whether `me` keys its registrations by request id.
    fn per_id(&self, me: ConnRef) -> bool {
        self.conn(me.key)
            .is_some_and(|c| c.policy().registrations_per_id())
    }

    /// `subscribe` or `advertise` of `topic` (as the client wrote it) for
    /// `node` (or the connection's default node).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn register(
        &mut self,
        me: ConnRef,
        role: Role,
        topic: &str,
        node: Option<&str>,
        ty: Option<&str>,
        asked: Asked,
        id: Option<&[u8]>,
        now: Instant,
    ) {
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
        self.apply_qos(domain, me, role, &topic, registered, asked, now);
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

    /// Routes one publish: appended to the current batch (delivered by
    /// [`Hub::flush_publishes`]), or, when large, delivered at once from its
    /// own shared allocation.
    pub(super) fn publish(
        &mut self,
        domain: Domain,
        topic: &str,
        from: Option<ConnRef>,
        msg: Raw<'_>,
        now: Instant,
    ) {
        self.counters.inc(Counter::Published);
        if self.sim_time_watch(domain, topic) {
            self.note_clock(domain, msg);
        }
        let payload = msg.get().as_bytes();
        let Some((t, e)) = self.registries.publish_on(domain, topic, payload.len()) else {
            return;
        };
        // QoS stated by someone (latched publishers count even with no
        // subscriber: their cache must fill).
        if e.has_qos() {
            return self.publish_qos(domain, t, from, msg, now);
        }
        if e.subscribers().is_empty() {
            return;
        }
        let key = (domain, t);
        let mut entry = e;
        if self.batch.topic().is_some_and(|b| b != key) {
            self.flush_publishes(now);
            match self.registries.get(domain).topic(t) {
                Some(e) => entry = e,
                None => return,
            }
        }
        if self.batch.is_empty() && payload.len() >= BATCH_MAX_BYTES {
            let lines = encode::publish_shared(entry.prefix(), msg);
            return self.deliver(key, lines, 1, now);
        }
        self.batch
            .push(key, &encode::publish_parts(entry.prefix(), msg));
        if self.batch.len_bytes() >= BATCH_MAX_BYTES {
            self.flush_publishes(now);
        }
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
        self.deliver(t, lines, msgs, now);
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
    /// subscriber; subscribers with the same framing share one copy.
    fn deliver(&mut self, (domain, t): TopicKey, lines: Rc<[u8]>, msgs: u32, now: Instant) {
        let Some(topic) = self.registries[domain as usize].topic(t) else {
            return;
        };
        let mut framed = Framed::new(lines, msgs as usize);
        let cap = self.limits.max_queue_bytes;
        for &sub in topic.subscribers() {
            let Some(c) = self.conns.get_mut(sub.key as usize) else {
                continue;
            };
            if c.gen() != sub.gen || !c.is_open() || (self.fed.injecting && c.is_bridge()) {
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
