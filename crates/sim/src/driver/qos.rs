//! QoS (`docs/protocol.md`, "QoS: latching, depth, throttling,
//! reliability, peers"), modelled from the protocol page: subscriptions
//! and advertisements state QoS (a `qos` object, rosbridge's `latch`,
//! `queue_length` and `throttle_rate`, `peers`), and the model predicts
//! what each subscriber receives and each publisher is told:
//!
//! - latching: a transient-local publisher's last `depth` messages (its
//!   own copies, counted in its registrations' bytes) go to a subscriber
//!   that joins later, at once, in publish order, unless it asked for
//!   volatile or their QoS do not match; they are `latched_delivered`, not
//!   `delivered`; the cache goes with the publisher's membership, and a
//!   new registration's QoS replaces the old one (cache included);
//! - depth: a subscription with depth N never has more than N of its
//!   topic's messages waiting, the oldest dropped first (`depth_dropped`);
//!   a message partly written is being delivered and does not wait;
//! - throttling: at most one message per interval (at least 10 ms), the
//!   first at once and the newest of an interval at its end, held meanwhile
//!   (its bytes counted), flushed by one timer per subscription; the
//!   flushes' timing follows the timer wheel's ticks;
//! - reliability: a reliable subscription's messages are never shed (by
//!   the queue limit or the memory budget); past `--max-queue-bytes` of
//!   them waiting its connection is warned once (again after falling to
//!   half), past twice that it is closed (`reliable_overflow`);
//! - compatibility: an incompatible (publisher, subscriber) pair exchanges
//!   nothing (`qos_skipped`) and both are warned when it forms
//!   (`qos_incompatible`);
//! - peers: after every turn, each publisher that asked has last been told
//!   its topic's count of open, compatible subscribers (the model computes
//!   every watcher's count after every `expire` and owes a notification
//!   exactly when it changed).
//!
//! A topic the queues know is a [`Bucket`]: its name and which incarnation
//! of its registry entry (one nobody holds goes, and a later one of the
//! same name is another topic for depth and reliability).
//!
//! Runs with a small memory budget leave throttles, peer counts and
//! waiting requests out (their requests are sent without them): their
//! effects come at the end of a turn, after the budget's enforcement, and
//! the accounting's re-run of the budget's rule sees a turn's state only
//! as a whole.
//!
//! This file is the behaviour; what a registration states and the QoS
//! state the model keeps ([`QosM`], [`Asked`], [`SubState`], [`PubState`])
//! are in `model/qos.rs`.

use std::collections::VecDeque;
use std::rc::Rc;
use std::time::Duration;

use rosgate_core::counters::Counter;
use rosgate_core::hub::MIN_THROTTLE_MS;
use rosgate_core::limits::DEFAULT_MAX_MEMORY_BYTES;
use rosgate_core::registry::Role;
use rosgate_wire::encode;

use super::requests::{CallLine, Form, Spec};
use super::Sim;
use crate::actions::{QosReq, MAX_CLIENTS, SERVICES, TOPICS};
use crate::model::encodings::{ws_wire, Comp, EncM, CBOR_RAW, TYPED_TOPIC};
use crate::model::qos::{compatible, Asked, PubState, QosM, SubState, ThrottleM};
use crate::model::requests::Effect;
use crate::model::{tick_ceil, Bucket, Lvl, TopicFrame};
use crate::violation::Violation;

/// How many of [`TOPICS`] QoS requests use (plain requests use them too).
const QOS_TOPICS: usize = 3;

/// Subscriber QoS specs a [`crate::Req::Qos`] picks from: the members it
/// adds and what they state (`None`: the decoder refuses the request).
const SUB_SPECS: [Spec; 14] = [
    (
        &[("qos", r#"{"reliability":"reliable"}"#)],
        Some(a(Some(true), None, None, 0)),
    ),
    (
        &[("qos", r#"{"reliability":"best_effort","depth":2}"#)],
        Some(a(Some(false), None, Some(2), 0)),
    ),
    (
        &[("qos", r#"{"durability":"transient_local"}"#)],
        Some(a(None, Some(true), None, 0)),
    ),
    (
        &[("qos", r#"{"durability":"volatile","depth":1}"#)],
        Some(a(None, Some(false), Some(1), 0)),
    ),
    (&[("queue_length", "1")], Some(a(None, None, Some(1), 0))),
    (&[("throttle_rate", "50")], Some(a(None, None, None, 50))),
    (
        &[("throttle_rate", "5"), ("queue_length", "3")],
        Some(a(None, None, Some(3), 5)),
    ),
    (
        &[
            ("qos", r#"{"reliability":"reliable","depth":3}"#),
            ("throttle_rate", "30"),
        ],
        Some(a(Some(true), None, Some(3), 30)),
    ),
    (&[("queue_length", "0")], Some(a(None, None, None, 0))),
    (
        &[(
            "qos",
            r#"{"reliability":"system_default","history":"keep_last"}"#,
        )],
        Some(a(None, None, None, 0)),
    ),
    (&[("qos", r#"{"depth":1001}"#)], None),
    (&[("throttle_rate", r#""x""#)], None),
    (
        &[(
            "qos",
            r#"{"durability":"transient_local","reliability":"reliable"}"#,
        )],
        Some(a(Some(true), Some(true), None, 0)),
    ),
    (&[("queue_length", "2.7")], Some(a(None, None, Some(2), 0))),
];

/// Publisher QoS specs (as [`SUB_SPECS`]; `peers` in the last field).
const PUB_SPECS: [Spec; 12] = [
    (&[("latch", "true")], Some(a(None, Some(true), None, 0))),
    (
        &[("qos", r#"{"durability":"transient_local","depth":3}"#)],
        Some(a(None, Some(true), Some(3), 0)),
    ),
    (
        &[("qos", r#"{"reliability":"best_effort"}"#)],
        Some(a(Some(false), None, None, 0)),
    ),
    (
        &[("qos", r#"{"durability":"volatile"}"#)],
        Some(a(None, Some(false), None, 0)),
    ),
    (&[("peers", "true")], Some(p(a(None, None, None, 0)))),
    (
        &[
            ("peers", "true"),
            ("qos", r#"{"reliability":"best_effort"}"#),
        ],
        Some(p(a(Some(false), None, None, 0))),
    ),
    (
        &[("latch", "true"), ("peers", "true")],
        Some(p(a(None, Some(true), None, 0))),
    ),
    (&[], Some(a(None, None, None, 0))),
    (
        &[("qos", r#"{"reliability":"reliable"}"#)],
        Some(a(Some(true), None, None, 0)),
    ),
    (
        &[("latch", "true"), ("qos", r#"{"durability":"volatile"}"#)],
        Some(a(None, Some(false), None, 0)),
    ),
    (&[("latch", "false")], Some(a(None, None, None, 0))),
    (&[("peers", "1")], None),
];

/// An [`Asked`] in a const table.
const fn a(reliable: Option<bool>, transient: Option<bool>, depth: Option<u32>, ms: u64) -> Asked {
    Asked {
        qos: QosM {
            reliable,
            transient,
            depth,
        },
        throttle_ms: ms,
        peers: false,
        enc: EncM {
            comp: Comp::None,
            fragment: None,
        },
    }
}

/// `x` asking for peer counts too.
const fn p(mut x: Asked) -> Asked {
    x.peers = true;
    x
}

/// The topic a [`crate::Req::Qos`] names: a quarter of them the typed
/// topic, the rest one of the first topics.
fn qos_topic(topic: u8) -> &'static str {
    if topic >= 0xc0 {
        TYPED_TOPIC
    } else {
        TOPICS[topic as usize % QOS_TOPICS]
    }
}

impl Sim {
    /// From `slot` on, the first client (not a Foxglove session) that
    /// advertised the topic of QoS request `q` stating QoS.
    pub(crate) fn qos_publisher(&self, slot: u8, q: &QosReq) -> Option<usize> {
        let name = qos_topic(q.topic);
        let s = slot as usize % MAX_CLIENTS;
        (0..MAX_CLIENTS).map(|i| (s + i) % MAX_CLIENTS).find(|&i| {
            self.model.clients[i]
                .as_ref()
                .is_some_and(|c| c.pub_qos.contains_key(name))
                && !self.is_fx(i)
        })
    }

    /// Whether this run leaves throttles, peer counts and waiting out (a
    /// small memory budget; see the module docs).
    pub(crate) fn tight_budget(&self) -> bool {
        self.limits.max_memory_bytes < DEFAULT_MAX_MEMORY_BYTES
    }

    /// Whether this run's requests wait for no provider: a small memory
    /// budget, or a small control limit (a release sends lines to callers
    /// and servers within one request, and which of them a control
    /// overflow closed before the others were sent is the hub's to know).
    pub(crate) fn no_waiting(&self) -> bool {
        self.tight_budget() || self.limits.max_control_bytes < 1 << 20
    }

    /// The line of [`crate::Req::Qos`] and its effect: by `op % 4` a
    /// subscribe or advertise stating QoS (spec `spec`; a WebSocket
    /// subscribe an outgoing encoding too), a call that waits for its
    /// provider, a publish, on one of the first topics or the typed one.
    pub(crate) fn qos_request(&mut self, slot: usize, f: Form, q: QosReq) -> (Vec<u8>, Effect) {
        let QosReq {
            op,
            topic,
            spec,
            payload,
            id,
        } = q;
        let name = qos_topic(topic);
        let tight = self.tight_budget();
        match op % 4 {
            0 | 1 => {
                let sub = op % 4 == 0;
                let spec = if sub {
                    SUB_SPECS[spec as usize % SUB_SPECS.len()]
                } else {
                    PUB_SPECS[spec as usize % PUB_SPECS.len()]
                };
                let (members, asked) = spec;
                let throttled = asked.is_some_and(|x| x.throttle_ms > 0);
                let peers = members.iter().any(|(k, _)| *k == "peers");
                if tight && (throttled || peers) {
                    // Stated without what comes at a turn's end.
                    let op = if sub { "subscribe" } else { "advertise" };
                    return self.topic_request(slot, f, op, name, None, id);
                }
                let op = if sub { "subscribe" } else { "advertise" };
                let enc = if sub && f.rosbridge {
                    self.pick_encoding(payload, throttled, name == TYPED_TOPIC)
                } else {
                    EncM::default()
                };
                let spec = (spec.0, spec.1.map(|x| Asked { enc, ..x }));
                self.qos_topic_request(slot, f, op, name, spec, id)
            }
            2 => {
                let call = CallLine {
                    name: SERVICES[topic as usize % SERVICES.len()],
                    node: None,
                    timeout: (payload >> 13) as u8,
                    args: payload,
                    id,
                    wait: !self.no_waiting(),
                };
                self.call_request(slot, f, call)
            }
            _ => {
                let payload = payload & !(0xff << 4);
                self.publish_request(slot, f, name, None, payload, id)
            }
        }
    }

    /// The outgoing encoding a WebSocket subscribe asks for, by the bits
    /// 0-2 of `pick`: none, `cbor` (two of them), `png`, `cbor` with a
    /// `fragment_size` (binary messages are never cut; on the typed topic
    /// `cbor-raw` instead, once [`CBOR_RAW`] allows it) or, for three of
    /// them, the run's
    /// cutting encoding ([`Sim::cut`]; not with a throttle, whose flushes
    /// the hub makes in its timers' order: see `model/encodings.rs`).
    fn pick_encoding(&self, pick: u16, throttled: bool, typed: bool) -> EncM {
        let plain = EncM::default();
        match pick & 7 {
            6 | 7 if typed && CBOR_RAW => EncM {
                comp: Comp::CborRaw,
                fragment: None,
            },
            1..=3 if !throttled => self.cut,
            4 | 7 => EncM {
                comp: Comp::Cbor,
                fragment: None,
            },
            5 => EncM {
                comp: Comp::Png,
                fragment: None,
            },
            6 => EncM {
                comp: Comp::Cbor,
                fragment: self.cut.fragment,
            },
            _ => plain,
        }
    }

    // ----- registrations --------------------------------------------------------------

    /// After a subscribe or advertise of `name` (as registered) by `slot`
    /// (`new_member`: it joined the topic's list): its QoS state is
    /// replaced by what it asked (or cleared, when it asks nothing and had
    /// some), an incompatible pair it forms warns both sides, a new
    /// subscriber gets the latched messages, and the peer counts follow
    /// (computed at the turn's end).
    pub(crate) fn after_register(
        &mut self,
        slot: usize,
        sub: bool,
        name: &str,
        asked: Asked,
        new_member: bool,
    ) {
        let c = self.model.client(slot);
        let domain = c.domain;
        let had = if sub {
            c.sub_qos.contains_key(name)
        } else {
            c.pub_qos.contains_key(name)
        };
        if asked.anything() || had {
            let c = self.model.client_mut(slot);
            if sub {
                c.sub_qos.remove(name);
                if asked.anything() {
                    let throttle = (asked.throttle_ms > 0).then(|| ThrottleM {
                        interval: Duration::from_millis(asked.throttle_ms.max(MIN_THROTTLE_MS)),
                        last: None,
                        pending: None,
                        scheduled: false,
                    });
                    c.sub_qos.insert(
                        name.to_string(),
                        SubState {
                            qos: asked.qos,
                            throttle,
                            enc: asked.enc,
                        },
                    );
                }
                let b = self.bucket(domain, name);
                let c = self.model.client_mut(slot);
                match asked.qos.depth {
                    Some(d) => {
                        c.depth.insert(b.clone(), d.max(1));
                    }
                    None => {
                        c.depth.remove(&b);
                    }
                }
                if asked.qos.reliable == Some(true) {
                    c.reliable.insert(b);
                } else {
                    c.reliable.remove(&b);
                }
            } else {
                c.pub_qos.remove(name);
                if asked.anything() {
                    c.pub_qos.insert(
                        name.to_string(),
                        PubState {
                            qos: asked.qos,
                            peers: asked.peers.then_some(None),
                            cache: VecDeque::new(),
                        },
                    );
                }
            }
        }
        if asked.qos.stated() {
            self.check_pairs(slot, sub, name, asked.qos);
        }
        if sub && new_member {
            self.send_latched(slot, name);
        }
    }

    /// A registration stating QoS: both sides of every incompatible pair it
    /// forms (with another connection) are warned.
    fn check_pairs(&mut self, slot: usize, sub: bool, name: &str, mine: QosM) {
        let (me, domain) = {
            let c = self.model.client(slot);
            (c.conn, c.domain)
        };
        let mut warned = Vec::new();
        for s in 0..MAX_CLIENTS {
            let Some(o) = self.model.clients[s].as_ref() else {
                continue;
            };
            if o.conn == me || o.domain != domain {
                continue;
            }
            let theirs = if sub {
                if !o.pubs.contains_key(name) {
                    continue;
                }
                o.pub_qos.get(name).map_or(QosM::default(), |q| q.qos)
            } else {
                if !o.subs.contains_key(name) {
                    continue;
                }
                o.sub_qos.get(name).map_or(QosM::default(), |q| q.qos)
            };
            let (offer, request) = if sub { (theirs, mine) } else { (mine, theirs) };
            if !compatible(&offer, &request) {
                warned.push(s);
            }
        }
        for s in warned {
            self.model.count(Counter::QosIncompatible);
            self.counts.qos_incompatible += 1;
            self.model.expect_level(slot, None, Lvl::Warning);
            self.model.expect_level(s, None, Lvl::Warning);
        }
    }

    /// `slot`'s membership of `name` as subscriber (`sub`) or publisher
    /// went: its QoS state (and cache) with it; a subscription's queue
    /// forgets the topic's depth and reliability.
    pub(crate) fn after_leave(&mut self, slot: usize, sub: bool, name: &str) {
        let domain = self.model.client(slot).domain;
        if sub {
            let b = self.bucket(domain, name);
            let c = self.model.client_mut(slot);
            c.sub_qos.remove(name);
            c.depth.remove(&b);
            c.reliable.remove(&b);
        } else {
            self.model.client_mut(slot).pub_qos.remove(name);
        }
    }

    /// The bucket frames of `name` in `domain` are queued under now.
    pub(crate) fn bucket(&self, domain: u8, name: &str) -> Bucket {
        let epoch = self
            .model
            .epochs
            .get(&(domain, name.to_string()))
            .copied()
            .unwrap_or(0);
        (name.to_string(), epoch)
    }

    /// A topic entry nobody holds any more is gone: a later one of that
    /// name is another topic for the queues.
    pub(crate) fn sync_topics(&mut self) {
        let mut held = std::collections::BTreeSet::new();
        for c in self.model.live() {
            for t in c.subs.keys().chain(c.pubs.keys()) {
                held.insert((c.domain, t.clone()));
            }
        }
        let gone: Vec<(u8, String)> = self.model.topics_held.difference(&held).cloned().collect();
        for k in gone {
            *self.model.epochs.entry(k).or_default() += 1;
        }
        self.model.topics_held = held;
    }

    // ----- publishing -----------------------------------------------------------------

    /// A publish of `msg` on `name` in `domain` by `from` (a slot; `None`:
    /// the gateway): kept by a latched publisher, then to every open
    /// subscriber its offer meets, through its throttle, depth and
    /// reliability.
    pub(crate) fn publish_to(&mut self, domain: u8, name: &str, msg: &str, from: Option<usize>) {
        let mut line = encode::publish_prefix(name).into_vec();
        line.extend_from_slice(msg.as_bytes());
        line.push(b'}');
        let mut tcp = line.clone();
        tcp.push(b'\n');
        let tcp: Rc<[u8]> = tcp.into();
        let offer = from.and_then(|s| {
            let c = self.model.client(s);
            (c.domain == domain && c.pubs.contains_key(name))
                .then(|| c.pub_qos.get(name).cloned())
                .flatten()
        });
        self.model.publish_seq += 1;
        let seq = self.model.publish_seq;
        if let (Some(s), Some(q)) = (from, offer.as_ref().filter(|q| q.latched())) {
            let depth = q.qos.depth.unwrap_or(1).max(1) as usize;
            let cache = &mut self
                .model
                .client_mut(s)
                .pub_qos
                .get_mut(name)
                .expect("latched")
                .cache;
            cache.push_back((seq, Rc::clone(&tcp)));
            let mut evicted = 0;
            while cache.len() > depth {
                cache.pop_front();
                evicted += 1;
            }
            for _ in 0..evicted {
                self.model.count(Counter::LatchEvicted);
            }
        }
        let offer_qos = offer.map_or(QosM::default(), |q| q.qos);
        // One shared frame per framing for the whole publish.
        self.publishes += 1;
        let n = self.publishes;
        let line: Rc<[u8]> = line.into();
        // Made once per encoding, when a subscriber first takes it.
        let mut made: Vec<(EncM, Rc<[u8]>)> = Vec::new();
        for s in 0..MAX_CLIENTS {
            let Some(c) = self.model.clients[s].as_ref() else {
                continue;
            };
            if !c.is_open() || !c.subs.contains_key(name) {
                continue;
            }
            if c.domain != domain {
                self.counts.isolated_by_domain += 1;
                continue;
            }
            if let Some(q) = c.sub_qos.get(name) {
                if !compatible(&offer_qos, &q.qos) {
                    self.model.count(Counter::QosSkipped);
                    self.counts.qos_skipped += 1;
                    continue;
                }
            }
            let throttled = c.sub_qos.get(name).is_some_and(|q| q.throttle.is_some());
            let ws = c.rosbridge();
            if throttled && !self.throttle_admit(s, domain, name, &tcp) {
                continue;
            }
            let enc = self.enc_of(s, name);
            let wire = if !ws {
                Rc::clone(&tcp)
            } else if let Some((_, w)) = made.iter().find(|(e, _)| *e == enc) {
                Rc::clone(w)
            } else {
                let w = ws_wire(name, &line, enc, &mut self.model.fragment_ids, self.offset);
                made.push((enc, Rc::clone(&w)));
                w
            };
            let f = TopicFrame {
                msg: n,
                line: Rc::clone(&line),
                wire,
                ws,
                enc,
                topic: Some(self.bucket(domain, name)),
            };
            self.queue_topic(s, f, true);
        }
    }

    /// The encoding `slot`'s subscription of `name` asked for.
    fn enc_of(&self, slot: usize, name: &str) -> EncM {
        let c = self.model.client(slot);
        c.sub_qos.get(name).map_or(EncM::default(), |q| q.enc)
    }

    /// Queues topic frame `f` to `slot` (counted in `delivered` when
    /// `counted`): its depth drops the oldest waiting frames of its topic
    /// beyond it, and a reliable backlog warns, then closes.
    pub(crate) fn queue_topic(&mut self, slot: usize, f: TopicFrame, counted: bool) {
        let (n, len) = (f.msg, f.wire.len());
        let bucket = f.topic.clone();
        self.max_frame = self.max_frame.max(len);
        self.deliveries.push((slot, n, len));
        if !counted {
            self.uncounted += 1;
        }
        self.model.queue_frame(slot, f);
        let Some(b) = bucket else { return };
        if let Some(&depth) = self.model.client(slot).depth.get(&b) {
            // The frame partly written is being delivered: it does not wait.
            let head = self.peek_head(slot);
            let dropped = &self.depth_drops;
            let waiting: Vec<u64> = self
                .model
                .client(slot)
                .exp
                .topic
                .iter()
                .filter(|x| x.topic.as_ref() == Some(&b) && Some(x.msg) != head)
                .filter(|x| !dropped.contains(&(slot, x.msg)))
                .map(|x| x.msg)
                .collect();
            let excess = waiting.len().saturating_sub(depth as usize);
            for &m in &waiting[..excess] {
                self.depth_drops.push((slot, m));
            }
        }
        // The hub checks a reliable backlog on its QoS path only (a topic
        // with a membership that states QoS, `hub/topics.rs`), never on
        // the fast path or for goal feedback (`hub/qos.rs` `queue_shared`).
        if self.qos_path(slot, b.0.as_str()) {
            self.check_reliable(slot);
        }
    }

    /// Whether a publish on `name` to `slot` takes the hub's QoS path: some
    /// registration of the topic in its domain states QoS (an encoding
    /// counts, `model/encodings.rs`).
    fn qos_path(&self, slot: usize, name: &str) -> bool {
        let domain = self.model.client(slot).domain;
        // Every client the model holds: one closing this turn keeps its
        // registrations until it is freed.
        self.model.clients.iter().flatten().any(|c| {
            c.domain == domain && (c.sub_qos.contains_key(name) || c.pub_qos.contains_key(name))
        })
    }

    /// The reliable backlog of `slot` after a queueing: past the queue
    /// limit its connection is warned (once, until it falls to half), past
    /// twice that it is closed.
    fn check_reliable(&mut self, slot: usize) {
        let cap = self.limits.max_queue_bytes;
        let backlog = self.reliable_backlog(slot);
        let c = self.model.client(slot);
        if self.reliable_closes.contains(&slot) {
            return;
        }
        if backlog > 2 * cap {
            self.reliable_closes.push(slot);
        } else if backlog > cap && !c.reliable_warned {
            self.model.client_mut(slot).reliable_warned = true;
            self.model.count(Counter::ReliableWarnings);
            self.counts.reliable_warnings += 1;
            self.model.expect_level(slot, None, Lvl::Warning);
        } else if backlog <= cap / 2 {
            self.model.client_mut(slot).reliable_warned = false;
        }
    }

    /// `slot` read some of its output: a reliable backlog that fell to half
    /// the limit is warned of again when it next passes the limit.
    pub(crate) fn reliable_drained(&mut self, slot: usize) {
        let half = self.limits.max_queue_bytes / 2;
        let c = self.model.client(slot);
        if c.reliable_warned && self.reliable_backlog(slot) <= half {
            self.model.client_mut(slot).reliable_warned = false;
        }
    }

    /// Bytes of `slot`'s reliable subscriptions' frames waiting (whole,
    /// a partly written one included), less those dropped by depth in the
    /// call being made.
    fn reliable_backlog(&self, slot: usize) -> usize {
        let dropped = &self.depth_drops;
        let c = self.model.client(slot);
        c.exp
            .topic
            .iter()
            .filter(|f| f.topic.as_ref().is_some_and(|b| c.reliable.contains(b)))
            .filter(|f| !dropped.contains(&(slot, f.msg)))
            .map(|f| f.wire.len())
            .sum()
    }

    /// A new subscriber `slot` of `name` gets the latched messages of its
    /// topic's transient-local publishers whose offer meets its request
    /// (none if it asked for volatile), in publish order.
    fn send_latched(&mut self, slot: usize, name: &str) {
        let c = self.model.client(slot);
        let domain = c.domain;
        let request = c.sub_qos.get(name).map_or(QosM::default(), |q| q.qos);
        if request.transient == Some(false) {
            return;
        }
        let mut frames: Vec<(u64, Rc<[u8]>)> = Vec::new();
        for o in self.model.live() {
            if o.domain != domain || !o.pubs.contains_key(name) {
                continue;
            }
            if let Some(q) = o.pub_qos.get(name) {
                if q.latched() && compatible(&q.qos, &request) {
                    frames.extend(q.cache.iter().cloned());
                }
            }
        }
        frames.sort_by_key(|(seq, _)| *seq);
        for (_, tcp) in frames {
            self.model.count(Counter::LatchedDelivered);
            self.counts.latched_delivered += 1;
            self.deliver_copy(slot, domain, name, &tcp, false);
        }
    }

    /// Queues a copy of `tcp` (a publish line with its newline) to `slot`,
    /// as its own frame.
    fn deliver_copy(&mut self, slot: usize, domain: u8, name: &str, tcp: &Rc<[u8]>, counted: bool) {
        let line: Rc<[u8]> = tcp[..tcp.len() - 1].into();
        let ws = self.model.client(slot).rosbridge();
        let enc = self.enc_of(slot, name);
        let wire: Rc<[u8]> = if ws {
            ws_wire(name, &line, enc, &mut self.model.fragment_ids, self.offset)
        } else {
            Rc::from(&tcp[..])
        };
        self.publishes += 1;
        let f = TopicFrame {
            msg: self.publishes,
            line,
            wire,
            ws,
            enc,
            topic: Some(self.bucket(domain, name)),
        };
        self.queue_topic(slot, f, counted);
    }

    // ----- throttling -----------------------------------------------------------------

    /// Whether throttled subscriber `slot` gets `tcp` now (its interval is
    /// over: a message still held is older, and dropped); if not, it is
    /// held as the interval's newest (replacing one, dropped) and a flush
    /// is scheduled for the interval's end if none is.
    fn throttle_admit(&mut self, slot: usize, domain: u8, name: &str, tcp: &Rc<[u8]>) -> bool {
        let at = self.offset;
        let conn = self.model.client(slot).conn;
        let th = self
            .model
            .client_mut(slot)
            .sub_qos
            .get_mut(name)
            .and_then(|q| q.throttle.as_mut())
            .expect("throttled");
        let within = th
            .last
            .filter(|&last| at.saturating_sub(last) < th.interval);
        let Some(last) = within else {
            let stale = th.pending.take().is_some();
            th.last = Some(at);
            if stale {
                self.model.count(Counter::ThrottleDropped);
            }
            return true;
        };
        let schedule = (!th.scheduled).then(|| last + th.interval);
        let replaced = th.pending.replace(Rc::clone(tcp)).is_some();
        if schedule.is_some() {
            th.scheduled = true;
        }
        if replaced {
            self.model.count(Counter::ThrottleDropped);
        }
        self.counts.throttle_held += 1;
        if let Some(end) = schedule {
            self.model
                .throttle_timers
                .push((domain, name.to_string(), conn, tick_ceil(end)));
        }
        false
    }

    /// The end of a turn's `expire`: due throttle flushes (a held message
    /// goes at its interval's end; a timer of an earlier interval or
    /// subscription that fires before it reschedules), then every
    /// watching publisher's peer count.
    pub(crate) fn flush_qos(&mut self, tick_now: u64, gone: [bool; MAX_CLIENTS]) {
        let at = self.offset;
        let timers = std::mem::take(&mut self.model.throttle_timers);
        let (due, rest): (Vec<_>, Vec<_>) = timers.into_iter().partition(|t| t.3 <= tick_now);
        self.model.throttle_timers = rest;
        for (domain, name, conn, _) in due {
            let Some(s) = self.model.slot_of(conn) else {
                continue;
            };
            if self.model.client(s).domain != domain {
                continue;
            }
            let Some(th) = self
                .model
                .client_mut(s)
                .sub_qos
                .get_mut(&name)
                .and_then(|q| q.throttle.as_mut())
            else {
                continue;
            };
            let end = th.last.map(|last| last + th.interval);
            if let Some(end) = end.filter(|&end| at < end) {
                if th.pending.is_some() {
                    self.model
                        .throttle_timers
                        .push((domain, name, conn, tick_ceil(end)));
                } else {
                    th.scheduled = false;
                }
                continue;
            }
            th.scheduled = false;
            let Some(tcp) = th.pending.take() else {
                continue;
            };
            th.last = Some(at);
            let open = self.model.client(s).is_open() && !gone[s];
            if open && !self.reliable_closes.contains(&s) {
                self.counts.throttle_flushes += 1;
                self.deliver_copy(s, domain, &name, &tcp, true);
            }
        }
        self.flush_peers(gone);
    }

    // ----- peers ----------------------------------------------------------------------

    /// Every open publisher that asked for peer counts is owed one when
    /// its count of open, compatible subscribers differs from the last it
    /// was told.
    fn flush_peers(&mut self, mut gone: [bool; MAX_CLIENTS]) {
        for &s in &self.reliable_closes {
            gone[s] = true;
        }
        let open = |sim: &Sim, s: usize| {
            !gone[s] && sim.model.clients[s].as_ref().is_some_and(|c| c.is_open())
        };
        for s in 0..MAX_CLIENTS {
            if !open(self, s) {
                continue;
            }
            let c = self.model.client(s);
            let domain = c.domain;
            let watched: Vec<(String, QosM, Option<u64>)> = c
                .pub_qos
                .iter()
                .filter_map(|(t, q)| Some((t.clone(), q.qos, q.peers?)))
                .collect();
            for (topic, offer, last) in watched {
                let n = (0..MAX_CLIENTS)
                    .filter(|&o| open(self, o))
                    .map(|o| self.model.client(o))
                    .filter(|o| o.domain == domain && o.subs.contains_key(&topic))
                    .filter(|o| {
                        let request = o.sub_qos.get(&topic).map_or(QosM::default(), |q| q.qos);
                        compatible(&offer, &request)
                    })
                    .count() as u64;
                if last == Some(n) {
                    continue;
                }
                self.model.count(Counter::PeerNotifications);
                self.counts.peer_notifications += 1;
                let c = self.model.client_mut(s);
                if let Some(q) = c.pub_qos.get_mut(&topic) {
                    q.peers = Some(Some(n));
                }
                c.exp.peers.push_back((topic, n));
            }
        }
    }

    /// A `peers` line to `slot`: the first notification owed for its topic.
    pub(crate) fn on_peers(
        &mut self,
        slot: usize,
        line: &[u8],
        v: &serde_json::Value,
    ) -> Result<(), Violation> {
        let show = String::from_utf8_lossy(line).into_owned();
        let topic = v.get("topic").and_then(serde_json::Value::as_str);
        let n = v.get("subscribers").and_then(serde_json::Value::as_u64);
        let e = &mut self.model.client_mut(slot).exp.peers;
        let first = e.iter().position(|(t, _)| Some(t.as_str()) == topic);
        match first {
            Some(i) if Some(e[i].1) == n => {
                e.remove(i);
                self.counts.peers_received += 1;
                Ok(())
            }
            _ => {
                let owed: Vec<(String, u64)> = e.iter().cloned().collect();
                Err(self.violation(format!(
                    "slot {slot} got peers it is not owed next: {show} (owed {owed:?})"
                )))
            }
        }
    }

    // ----- the hub's view -------------------------------------------------------------

    /// The partly written head of `slot`'s queue, if it is a topic frame.
    pub(crate) fn peek_head(&self, slot: usize) -> Option<u64> {
        if self.model.client(slot).head_part().is_empty() {
            return None;
        }
        self.peek_head_msg(slot)
    }

    /// Every membership's QoS state equals the model's: what it states,
    /// its throttle interval and held message, its peer watch and latched
    /// cache.
    pub(crate) fn check_qos(&self) -> Result<(), Violation> {
        for (s, c) in self.model.clients.iter().enumerate() {
            let Some(c) = c else { continue };
            let r = self.hub.inspect().registry_in(c.domain);
            for (role, regs) in [(Role::Subscriber, &c.subs), (Role::Publisher, &c.pubs)] {
                for t in regs.keys() {
                    let Some(id) = r.topic_id(t) else {
                        return Err(self.violation(format!("slot {s}: topic {t:?} not in the hub")));
                    };
                    let hub = r.member_qos(c.conn, role, id).map(|q| {
                        let held = q
                            .throttle
                            .as_ref()
                            .and_then(|th| th.pending.as_ref().map(|f| f.len()));
                        (
                            QosM {
                                reliable: q
                                    .qos
                                    .reliability
                                    .map(|x| x == rosgate_wire::qos::Reliability::Reliable),
                                transient: q
                                    .qos
                                    .durability
                                    .map(|x| x == rosgate_wire::qos::Durability::TransientLocal),
                                depth: q.qos.depth,
                            },
                            q.throttle.as_ref().map(|th| th.interval),
                            held,
                            q.peers,
                            q.cache.iter().map(|(_, f)| f.len()).collect::<Vec<_>>(),
                        )
                    });
                    let model = match role {
                        Role::Subscriber => c.sub_qos.get(t).map(|q| {
                            (
                                q.qos,
                                q.throttle.as_ref().map(|th| th.interval),
                                q.throttle
                                    .as_ref()
                                    .and_then(|th| th.pending.as_ref().map(|f| f.len())),
                                None,
                                Vec::new(),
                            )
                        }),
                        Role::Publisher => c.pub_qos.get(t).map(|q| {
                            (
                                q.qos,
                                None,
                                None,
                                q.peers.map(|p| p.map(|n| n as u32)),
                                q.cache.iter().map(|(_, f)| f.len()).collect(),
                            )
                        }),
                    };
                    if hub != model {
                        return Err(self.violation(format!(
                            "slot {s} {role:?} of {t:?}: QoS (stated, throttle, held, peers told, cache) hub {hub:?}, model {model:?}"
                        )));
                    }
                }
            }
        }
        Ok(())
    }
}
