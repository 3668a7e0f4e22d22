//! Topic operations: subscribe, unsubscribe, advertise, unadvertise, and
//! publish with one encoding shared by every subscriber.
//!
//! In the strict dialect registrations are per connection (the protocol
//! file). In the rosbridge dialect they are per request id within the
//! connection: `unsubscribe` with an id removes only the subscription made
//! with that id, without an id all of them; the router entry (and so
//! delivery, one copy per message) lasts while any remains.

use std::rc::Rc;
use std::time::Instant;

use crate::codec::Raw;

use super::batch::BATCH_MAX_BYTES;
use super::Hub;
use crate::codec::decode::Dialect;
use crate::codec::encode::{self, Level};
use crate::conn::{Conn, ConnRef, IdRegistrations};
use crate::out::Framing;
use crate::router::TopicId;

/// Subscriptions or advertisements: the two are handled alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Role {
    Subscriber,
    Publisher,
}

impl Role {
    fn lists(self, c: &mut Conn) -> (&mut Vec<TopicId>, &mut IdRegistrations) {
        match self {
            Role::Subscriber => (&mut c.subs, &mut c.sub_ids),
            Role::Publisher => (&mut c.pubs, &mut c.pub_ids),
        }
    }
}

impl Hub {
    /// `subscribe` or `advertise`.
    pub(super) fn register(
        &mut self,
        me: ConnRef,
        role: Role,
        topic: &str,
        id: Option<&[u8]>,
        now: Instant,
    ) {
        let (t, added) = match role {
            Role::Subscriber => self.router.subscribe(topic, me),
            Role::Publisher => self.router.advertise(topic, me),
        };
        if let Some(c) = self.live_mut(me) {
            let rosbridge = c.dialect == Dialect::Rosbridge;
            let (list, ids) = role.lists(c);
            if added {
                list.push(t);
            }
            // rosbridge keys registrations by id: repeating one is a no-op.
            if rosbridge && !ids.iter().any(|(x, i)| *x == t && i.as_deref() == id) {
                ids.push((t, id.map(Box::from)));
            }
        }
        let msg = match role {
            Role::Subscriber => format!("subscribed to {topic}"),
            Role::Publisher => format!("advertised {topic}"),
        };
        self.send_status(me, Level::Info, &msg, id, now);
    }

    /// `unsubscribe` or `unadvertise`; always safe to repeat.
    pub(super) fn unregister(
        &mut self,
        me: ConnRef,
        role: Role,
        topic: &str,
        id: Option<&[u8]>,
        now: Instant,
    ) {
        if let Some(t) = self.router.topic_id(topic) {
            let mut withdraw = true;
            if let Some(c) = self.live_mut(me) {
                if c.dialect == Dialect::Rosbridge {
                    let (_, ids) = role.lists(c);
                    match id {
                        Some(id) => ids.retain(|(x, i)| !(*x == t && i.as_deref() == Some(id))),
                        None => ids.retain(|(x, _)| *x != t),
                    }
                    withdraw = !ids.iter().any(|(x, _)| *x == t);
                }
            }
            let removed = withdraw
                && match role {
                    Role::Subscriber => self.router.unsubscribe(t, me),
                    Role::Publisher => self.router.unadvertise(t, me),
                };
            if removed {
                if let Some(c) = self.live_mut(me) {
                    role.lists(c).0.retain(|&x| x != t);
                }
            }
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
    pub(super) fn publish(&mut self, topic: &str, msg: Raw<'_>, now: Instant) {
        self.stats.published += 1;
        let Some(t) = self.router.topic_id(topic) else {
            return;
        };
        let Some(entry) = self.router.topic(t) else {
            return;
        };
        if entry.subscribers.is_empty() {
            return;
        }
        if self.batch.topic().is_some_and(|b| b != t) {
            self.flush_publishes(now);
        }
        let Some(entry) = self.router.topic(t) else {
            return;
        };
        let payload = msg.get().as_bytes();
        if self.batch.is_empty() && payload.len() >= BATCH_MAX_BYTES {
            let lines = encode::publish_shared(&entry.prefix, msg);
            return self.deliver(t, lines, 1, now);
        }
        self.batch
            .push(t, &encode::publish_parts(&entry.prefix, msg));
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

    /// Queues `msgs` messages of topic `t` (JSON lines) to every live
    /// subscriber; WebSocket subscribers share one framed copy, made on
    /// first need.
    fn deliver(&mut self, t: TopicId, lines: Rc<[u8]>, msgs: u32, now: Instant) {
        let mut ws: Option<Rc<[u8]>> = None;
        let Some(topic) = self.router.topic(t) else {
            return;
        };
        let cap = self.limits.max_queue_bytes;
        for &sub in &topic.subscribers {
            let Some(c) = self.conns.get_mut(sub.key as usize) else {
                continue;
            };
            if c.gen != sub.gen || c.closing.is_some() {
                continue;
            }
            if c.out.is_empty() {
                c.out_since = now;
            }
            let frames = match c.out.framing() {
                Framing::Lines => Rc::clone(&lines),
                Framing::WebSocket => Rc::clone(ws.get_or_insert_with(|| {
                    let mut framed = Vec::with_capacity(lines.len() + 10 * msgs as usize);
                    crate::ws::frame::push_text_lines(&mut framed, &lines);
                    Rc::from(framed)
                })),
            };
            let d = c.out.push_topic(frames, t, msgs, cap);
            self.stats.delivered += u64::from(msgs);
            self.stats.dropped += d.frames;
            self.stats.dropped_bytes += d.bytes;
            if !c.dirty {
                c.dirty = true;
                self.dirty.push(sub.key);
            }
        }
    }
}
