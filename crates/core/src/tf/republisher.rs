//! `Republisher`: the TF subscriptions web clients hold, as
//! tf2_web_republisher keeps them (github.com/RobotWebTools/
//! tf2_web_republisher, `src/tf_web_republisher.cpp`, `include/tf_pair.h`):
//! each has a target frame, source frames, thresholds and a rate; at each
//! tick it looks every source up in the target and sends the transforms
//! that moved past a threshold since last sent (the first always).
//!
//! Invariants:
//! - a subscription's ticks come from the one timer wheel here, keyed by
//!   its id; ids are never reused, so a stale wheel entry never fires for
//!   another subscription;
//! - a connection holds at most [`MAX_TF_SUBS_PER_CONN`] subscriptions,
//!   the gateway at most [`MAX_TF_SUBS`]; a subscription at most
//!   `MAX_TF_FRAMES_PER_SUB` sources (`msg.rs`);
//! - a source frame that cannot be looked up is warned about once, when it
//!   breaks (again once after it worked and broke again), never per tick;
//! - one call of [`Republisher::due`] hands out ticks of at most
//!   [`MAX_TF_LOOKUPS_PER_TURN`] source frames (at least one
//!   subscription); the rest wait in order, each subscription at most once;
//! - with a zero threshold every tick sends (as tf2_web_republisher's
//!   `TFPair::updateNeeded`).

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use super::buffer::{LookupError, TfBuffer};
use super::math::Transform;
use super::msg::Request;
use crate::conn::ConnRef;
use crate::nodes::{Domain, DOMAINS};
use crate::timer::TimerWheel;

/// TF subscriptions one connection may hold.
pub const MAX_TF_SUBS_PER_CONN: usize = 16;

/// TF subscriptions the gateway holds, all connections.
pub const MAX_TF_SUBS: usize = 10_000;

/// Source frames looked up per loop turn, all subscriptions together
/// (P20): ticks due beyond it wait for the next turn, in order. A lookup
/// walks a chain of a few frames (about a microsecond), so a turn spends
/// a few milliseconds on TF at most.
pub const MAX_TF_LOOKUPS_PER_TURN: usize = 5_000;

/// The subscriptions' timer wheel: 5 ms ticks (a 100 Hz subscription is
/// at most half a period late), 512 slots (2.56 s a lap).
pub const TF_TIMER_TICK_MS: u64 = 5;
/// See [`TF_TIMER_TICK_MS`].
pub const TF_TIMER_SLOTS: usize = 512;

/// How a subscription's transforms reach its client.
#[derive(Debug, Clone, PartialEq)]
pub enum Delivery {
    /// `/republish_tfs`: a `TFArray` topic; ends after `timeout` without a
    /// subscriber.
    Topic {
        topic: Box<str>,
        timeout: Duration,
        /// Since when nobody subscribes (the start counts as lonely).
        lonely_since: Option<Instant>,
    },
    /// ROS 1 actionlib goal (`/tf2_web_republisher/goal`): feedback on
    /// `<server>/feedback` with this goal id.
    Ros1Goal { server: Box<str>, goal_id: Box<str> },
    /// ROS 2 goal (`send_action_goal`): `action_feedback` to its caller
    /// under the caller's id (JSON bytes).
    Ros2Goal { action: Box<str>, id: Box<[u8]> },
}

/// One source frame of a subscription.
#[derive(Debug, Clone)]
pub struct Pair {
    pub source: String,
    last_sent: Option<Transform>,
    /// Looked up fine last time (or not tried yet): a failure then warns.
    ok: bool,
}

/// See the module docs.
#[derive(Debug)]
pub struct Sub {
    pub id: u64,
    pub owner: ConnRef,
    pub domain: Domain,
    pub delivery: Delivery,
    pub target: String,
    pub pairs: Vec<Pair>,
    pub angular_thres: f64,
    pub trans_thres: f64,
    pub period: Duration,
    /// When its current tick is due: the next is one period after it,
    /// not after the (later) time it fired, so the rate does not drift.
    pub due: Instant,
    /// Transforms sent so far.
    pub sent: u64,
}

/// What one tick of a subscription yields.
#[derive(Debug, Default)]
pub struct Tick {
    /// `(source, transform)` to send, in the subscription's order.
    pub transforms: Vec<(String, Transform)>,
    /// Sources that just broke, with why (warn once).
    pub broke: Vec<(String, LookupError)>,
}

/// Why a subscription was not added.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// The connection holds [`MAX_TF_SUBS_PER_CONN`].
    PerConn,
    /// The gateway holds [`MAX_TF_SUBS`].
    Total,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::PerConn => write!(
                f,
                "this connection holds {MAX_TF_SUBS_PER_CONN} TF subscriptions, the limit"
            ),
            Refused::Total => write!(
                f,
                "the gateway holds {MAX_TF_SUBS} TF subscriptions, the limit"
            ),
        }
    }
}

/// See the module docs.
#[derive(Debug)]
pub struct Republisher {
    subs: HashMap<u64, Sub>,
    per_conn: HashMap<ConnRef, usize>,
    per_domain: [usize; DOMAINS],
    wheel: TimerWheel,
    /// Fired, not yet ticked (the turn's lookups ran out): each id once,
    /// out of the wheel until it ticks.
    ready: VecDeque<u64>,
    next_id: u64,
}

impl Pair {
    fn new(source: String) -> Self {
        Pair {
            source,
            last_sent: None,
            ok: true,
        }
    }
}

impl Sub {
    /// One tick: looks every source up in `buf` and keeps what is to be
    /// sent.
    pub fn tick(&mut self, buf: Option<&TfBuffer>) -> Tick {
        let mut out = Tick::default();
        let empty = TfBuffer::new();
        let buf = buf.unwrap_or(&empty);
        for p in &mut self.pairs {
            match buf.lookup(&self.target, &p.source) {
                Ok((tf, _)) => {
                    p.ok = true;
                    let send = match p.last_sent {
                        None => true,
                        Some(_) if self.trans_thres == 0.0 || self.angular_thres == 0.0 => true,
                        Some(last) => {
                            last.t.distance(tf.t) > self.trans_thres
                                || last.r.angle_to(tf.r) > self.angular_thres
                        }
                    };
                    if send {
                        p.last_sent = Some(tf);
                        out.transforms.push((p.source.clone(), tf));
                    }
                }
                Err(e) => {
                    if p.ok {
                        p.ok = false;
                        out.broke.push((p.source.clone(), e));
                    }
                }
            }
        }
        self.sent += out.transforms.len() as u64;
        out
    }
}

impl Republisher {
    pub fn new(now: Instant) -> Self {
        Republisher {
            subs: HashMap::new(),
            per_conn: HashMap::new(),
            per_domain: [0; DOMAINS],
            wheel: TimerWheel::new(now, Duration::from_millis(TF_TIMER_TICK_MS), TF_TIMER_SLOTS),
            ready: VecDeque::new(),
            next_id: 1,
        }
    }

    /// Subscriptions held.
    pub fn len(&self) -> usize {
        self.subs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.subs.is_empty()
    }

    /// Subscriptions in `domain`: the lazy rule (the hub taps `/tf` there
    /// only while this is not 0).
    pub fn in_domain(&self, domain: Domain) -> usize {
        self.per_domain.get(domain as usize).copied().unwrap_or(0)
    }

    /// A new subscription; its first tick is one period from `now`.
    pub fn add(
        &mut self,
        owner: ConnRef,
        domain: Domain,
        delivery: Delivery,
        req: Request,
        now: Instant,
    ) -> Result<u64, Refused> {
        if self.per_conn.get(&owner).copied().unwrap_or(0) >= MAX_TF_SUBS_PER_CONN {
            return Err(Refused::PerConn);
        }
        if self.subs.len() >= MAX_TF_SUBS || (domain as usize) >= DOMAINS {
            return Err(Refused::Total);
        }
        let id = self.next_id;
        self.next_id += 1;
        let period = Duration::from_secs_f64(1.0 / req.rate_hz);
        self.subs.insert(
            id,
            Sub {
                id,
                owner,
                domain,
                delivery,
                target: req.target,
                pairs: req.sources.into_iter().map(Pair::new).collect(),
                angular_thres: req.angular_thres,
                trans_thres: req.trans_thres,
                period,
                due: now + period,
                sent: 0,
            },
        );
        *self.per_conn.entry(owner).or_insert(0) += 1;
        self.per_domain[domain as usize] += 1;
        self.wheel.insert(id, now + period);
        Ok(id)
    }

    pub fn get(&self, id: u64) -> Option<&Sub> {
        self.subs.get(&id)
    }

    pub fn get_mut(&mut self, id: u64) -> Option<&mut Sub> {
        self.subs.get_mut(&id)
    }

    /// Ends a subscription (its wheel entry is dropped lazily).
    pub fn remove(&mut self, id: u64) -> Option<Sub> {
        let s = self.subs.remove(&id)?;
        if let Some(n) = self.per_conn.get_mut(&s.owner) {
            *n -= 1;
            if *n == 0 {
                self.per_conn.remove(&s.owner);
            }
        }
        self.per_domain[s.domain as usize] -= 1;
        // Stale entries fire once and are dropped, but only while ticks
        // run: with no subscription left nothing expires the wheel, and its
        // deadline would stay in the past (a loop that never sleeps).
        if self.subs.is_empty() {
            self.ready.clear();
        }
        if self.subs.is_empty() || self.wheel.len() > 4 * self.subs.len() + 64 {
            let subs = &self.subs;
            self.wheel.retain(|k| subs.contains_key(&k));
        }
        Some(s)
    }

    /// The ids of `owner`'s subscriptions matching `pred`.
    pub fn find(&self, owner: ConnRef, mut pred: impl FnMut(&Sub) -> bool) -> Vec<u64> {
        if !self.per_conn.contains_key(&owner) {
            return Vec::new();
        }
        let mut ids: Vec<u64> = self
            .subs
            .values()
            .filter(|s| s.owner == owner && pred(s))
            .map(|s| s.id)
            .collect();
        ids.sort_unstable();
        ids
    }

    /// Subscriptions whose tick is due at `now`, oldest first, with at
    /// most `max_lookups` source frames among them (always at least one
    /// subscription); each is scheduled again one period later (the caller
    /// may `remove` it instead). The rest wait for the next call
    /// ([`Republisher::has_ready`]).
    pub fn due(&mut self, now: Instant, max_lookups: usize) -> Vec<u64> {
        let ready = &mut self.ready;
        self.wheel.expire(now, |k| ready.push_back(k));
        let mut out = Vec::new();
        let mut lookups = 0;
        while let Some(id) = self.ready.pop_front() {
            let Some(s) = self.subs.get_mut(&id) else {
                continue;
            };
            let n = s.pairs.len().max(1);
            if !out.is_empty() && lookups + n > max_lookups {
                self.ready.push_front(id);
                break;
            }
            lookups += n;
            // One period after the tick was due: the loop wakes a little
            // after a deadline and the wheel rounds up to its next 5 ms
            // slot, so `now + period` made a 10 Hz subscription tick at
            // 9.5 Hz and a 100 Hz one at 67 Hz (docs/performance.md, "TF
            // for the web"). A tick more than a period late skips the
            // missed ones instead of bursting.
            let mut next = s.due + s.period;
            if next <= now {
                next = now + s.period;
            }
            s.due = next;
            self.wheel.insert(id, next);
            out.push(id);
        }
        out
    }

    /// Whether ticks wait for the next turn (the loop must not sleep).
    pub fn has_ready(&self) -> bool {
        !self.ready.is_empty()
    }

    /// When the next tick is due, if any.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.wheel.next_deadline()
    }

    /// All subscriptions, by id.
    pub fn iter(&self) -> impl Iterator<Item = &Sub> {
        self.subs.values()
    }
}

#[cfg(test)]
mod tests {
    use super::super::math::{Quat, Vec3};
    use super::super::msg::parse_request;
    use super::*;
    use serde_json::json;

    fn conn(key: u32) -> ConnRef {
        ConnRef { key, gen: 1 }
    }

    fn req(v: serde_json::Value) -> Request {
        parse_request(&v).unwrap()
    }

    fn at(x: f64, yaw: f64) -> Transform {
        Transform::new(
            Vec3 { x, y: 0.0, z: 0.0 },
            Quat {
                x: 0.0,
                y: 0.0,
                z: (yaw / 2.0).sin(),
                w: (yaw / 2.0).cos(),
            },
        )
        .unwrap()
    }

    fn topic() -> Delivery {
        Delivery::Topic {
            topic: "/t".into(),
            timeout: Duration::from_secs(1),
            lonely_since: None,
        }
    }

    /// A subscription of connection 1 in `domain` to frames relative to
    /// `w` at `rate` Hz, made at `t0`.
    fn at_rate(r: &mut Republisher, domain: Domain, rate: u32, t0: Instant) -> u64 {
        let q = req(json!({"target_frame": "w", "rate": rate}));
        r.add(conn(1), domain, topic(), q, t0).unwrap()
    }

    #[test]
    fn thresholds_decide_what_is_sent_and_the_first_always_goes() {
        let t0 = Instant::now();
        let mut r = Republisher::new(t0);
        let id = r
            .add(
                conn(1),
                0,
                topic(),
                req(
                    json!({"source_frames": ["base", "ghost"], "target_frame": "odom",
                "angular_thres": 0.1, "trans_thres": 0.05, "rate": 10}),
                ),
                t0,
            )
            .unwrap();
        let mut buf = TfBuffer::new();
        buf.insert("base", "odom", 0, at(0.0, 0.0), false, None)
            .unwrap();
        let s = r.get_mut(id).unwrap();
        let tick = s.tick(Some(&buf));
        assert_eq!(tick.transforms.len(), 1);
        assert_eq!(tick.broke.len(), 1, "ghost warned once");
        assert_eq!(tick.broke[0].0, "ghost");
        // Below both thresholds: nothing; the broken frame is not warned again.
        buf.insert("base", "odom", 1, at(0.04, 0.05), false, None)
            .unwrap();
        let tick = s.tick(Some(&buf));
        assert!(tick.transforms.is_empty() && tick.broke.is_empty());
        // Past the translation threshold since the last *sent* one.
        buf.insert("base", "odom", 2, at(0.06, 0.05), false, None)
            .unwrap();
        assert_eq!(s.tick(Some(&buf)).transforms.len(), 1);
        // Past the angular threshold.
        buf.insert("base", "odom", 3, at(0.06, 0.2), false, None)
            .unwrap();
        assert_eq!(s.tick(Some(&buf)).transforms.len(), 1);
        // ghost appears, then breaks again: warned again, once.
        buf.insert("ghost", "odom", 0, at(1.0, 0.0), true, Some(9))
            .unwrap();
        assert_eq!(s.tick(Some(&buf)).transforms.len(), 1);
        buf.forget_owner(9);
        let tick = s.tick(Some(&buf));
        assert_eq!(tick.broke.len(), 1);
        assert!(s.tick(Some(&buf)).broke.is_empty());
    }

    #[test]
    fn a_zero_threshold_sends_every_tick() {
        let t0 = Instant::now();
        let mut r = Republisher::new(t0);
        let id = r
            .add(
                conn(1),
                0,
                topic(),
                req(json!({"source_frames": ["base"], "target_frame": "odom", "trans_thres": 0})),
                t0,
            )
            .unwrap();
        let mut buf = TfBuffer::new();
        buf.insert("base", "odom", 0, at(0.0, 0.0), false, None)
            .unwrap();
        let s = r.get_mut(id).unwrap();
        for _ in 0..3 {
            assert_eq!(s.tick(Some(&buf)).transforms.len(), 1);
        }
    }

    #[test]
    fn ticks_come_at_the_rate_from_the_wheel_and_limits_hold() {
        let t0 = Instant::now();
        let mut r = Republisher::new(t0);
        let a = at_rate(&mut r, 0, 10, t0);
        let b = at_rate(&mut r, 3, 2, t0);
        assert_eq!((r.in_domain(0), r.in_domain(3)), (1, 1));
        let mut fired = Vec::new();
        for ms in (0..=1000).step_by(5) {
            for id in r.due(t0 + Duration::from_millis(ms), usize::MAX) {
                fired.push(id);
            }
        }
        assert_eq!(fired.iter().filter(|&&i| i == a).count(), 10);
        assert_eq!(fired.iter().filter(|&&i| i == b).count(), 2);
        assert!(r.remove(a).is_some());
        assert!(r
            .due(t0 + Duration::from_secs(5), usize::MAX)
            .iter()
            .all(|&i| i == b));
        assert!(r.remove(b).is_some());
        assert_eq!(r.next_deadline(), None, "no subscription, no wake-up");
        for _ in 0..MAX_TF_SUBS_PER_CONN {
            r.add(conn(1), 0, topic(), req(json!({"target_frame": "w"})), t0)
                .unwrap();
        }
        assert_eq!(
            r.add(conn(1), 0, topic(), req(json!({"target_frame": "w"})), t0),
            Err(Refused::PerConn)
        );
        assert!(r
            .add(conn(2), 0, topic(), req(json!({"target_frame": "w"})), t0)
            .is_ok());
        assert_eq!(r.find(conn(2), |_| true).len(), 1);
    }

    #[test]
    fn ticks_keep_their_rate_when_the_loop_wakes_late() {
        // The loop wakes 1.3 ms after each 5 ms slot: ticks still come
        // at 10 Hz and 100 Hz over 10 s (one period after the tick was
        // due, not after it fired), and a long stall skips ticks rather
        // than sending them in a burst.
        let t0 = Instant::now();
        let mut r = Republisher::new(t0);
        let slow = at_rate(&mut r, 0, 10, t0);
        let fast = at_rate(&mut r, 0, 100, t0);
        let mut fired = Vec::new();
        let late = Duration::from_micros(1_300);
        for ms in (0..10_000).step_by(5) {
            fired.extend(r.due(t0 + Duration::from_millis(ms) + late, usize::MAX));
        }
        fn count(fired: &[u64], id: u64) -> usize {
            fired.iter().filter(|&&i| i == id).count()
        }
        let (n_slow, n_fast) = (count(&fired, slow), count(&fired, fast));
        assert!((99..=100).contains(&n_slow), "10 Hz: {n_slow}");
        assert!((999..=1000).contains(&n_fast), "100 Hz: {n_fast}");
        // A 1 s stall: each fires once, then one period later.
        fired.clear();
        let after = t0 + Duration::from_secs(11);
        fired.extend(r.due(after, usize::MAX));
        fired.extend(r.due(after + Duration::from_millis(5), usize::MAX));
        assert_eq!((count(&fired, slow), count(&fired, fast)), (1, 1));
        fired.extend(r.due(after + Duration::from_millis(10), usize::MAX));
        assert_eq!((count(&fired, slow), count(&fired, fast)), (1, 2));
    }

    #[test]
    fn one_turn_looks_up_a_bounded_number_of_frames_and_the_rest_follow() {
        let t0 = Instant::now();
        let mut r = Republisher::new(t0);
        let frames: Vec<String> = (0..100).map(|i| format!("f{i}")).collect();
        for c in 0..10 {
            r.add(
                conn(c),
                0,
                topic(),
                req(json!({"source_frames": frames, "target_frame": "w", "rate": 1})),
                t0,
            )
            .unwrap();
        }
        let at = t0 + Duration::from_secs(1);
        let first = r.due(at, 250);
        assert_eq!(first.len(), 2, "200 lookups fit, a third 100 does not");
        assert!(r.has_ready());
        let mut all = first.clone();
        while r.has_ready() {
            let next = r.due(at, 250);
            assert!(!next.is_empty() && next.len() <= 2);
            all.extend(next);
        }
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 10, "each ticks once");
        // One over the budget still ticks (alone).
        let big = r.due(t0 + Duration::from_secs(2), 10);
        assert_eq!(big.len(), 1);
    }
}
