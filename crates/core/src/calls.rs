//! `Calls`: service calls and action goals in flight, their deadlines, and
//! the indexes of which connection made and which serves each. It is the
//! one owner of the rule "every call ends exactly once": a call leaves
//! through [`Calls::take`] (answered or failed by the hub),
//! [`Calls::expire`] (timed out), [`Calls::fail_provided`] (its provider
//! unadvertised) or [`Calls::drop_conn`] (its caller or provider left), and
//! each of those removes it from the table, the timer wheel's view and
//! every index.
//!
//! A goal is a call of kind [`CallKind::Goal`]: it has no deadline unless
//! one was asked for, it can be found by its caller's id (for cancels), and
//! when its caller can no longer hear the result (the caller left, or the
//! goal timed out) it becomes an *orphan*: out of its caller's indexes,
//! still in its server's, until the server's late result arrives (dropped
//! and counted, not an error) or [`ORPHAN_TIMEOUT`] passes.
//!
//! Invariants:
//! - a provider-side id (`rg-<seq>`) is issued once for the life of the
//!   process, so a stale or forged response can never match a newer call;
//! - a response completes a call only if it comes from the connection the
//!   call was forwarded to (same slab key *and* generation): [`Calls::answer`];
//! - every call is in exactly one caller index and one provider index
//!   (per service), and leaves all three together;
//! - timer entries are cancelled lazily: an entry whose call is gone is
//!   ignored, and [`Calls::compact`] bounds how many such entries pile up.

use std::collections::HashMap;
use std::collections::HashSet;
use std::time::{Duration, Instant};

use crate::bridge::PeerId;
use crate::conn_ref::ConnRef;
use crate::encoding::Encoding;
pub use crate::hash::{SeqBuild, SeqHasher};
use crate::limits::{TIMER_SLOTS, TIMER_TICK_MS};
use crate::timer::TimerWheel;

/// Stale timer entries tolerated beyond twice the live calls before
/// [`Calls::compact`] rebuilds the wheel.
const TIMER_COMPACT_SLACK: usize = 1024;

/// Bytes counted per call beyond its names: the table entry, two index
/// entries and a timer entry.
const CALL_OVERHEAD: usize = 160;

/// How long an orphaned goal (see the module docs) waits for its server's
/// result before it is forgotten.
pub const ORPHAN_TIMEOUT: Duration = Duration::from_secs(60);

/// What a call in the table is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallKind {
    /// A service call.
    Service,
    /// An action goal; `feedback`: its caller asked for feedback.
    Goal { feedback: bool },
}

impl CallKind {
    fn index(self) -> usize {
        match self {
            CallKind::Service => 0,
            CallKind::Goal { .. } => 1,
        }
    }
}

/// A call forwarded to a provider and not yet answered.
#[derive(Debug)]
pub struct Call {
    seq: u64,
    caller: ConnRef,
    provider: ConnRef,
    /// Escaped service name followed by the caller's raw id bytes (one
    /// allocation per call); `split` separates them.
    names: Box<[u8]>,
    split: usize,
    /// `false` when the caller sent no id (allowed in the rosbridge dialect).
    has_id: bool,
    deadline: Option<Instant>,
    kind: CallKind,
    /// A goal whose caller can no longer hear its result.
    orphaned: bool,
    /// When it was made (latency and duration histograms).
    started: Instant,
    /// The peer beyond the bridge when a bridge is its caller (the peer it
    /// came from).
    caller_peer: Option<PeerId>,
    /// The peer beyond the bridge when a bridge is its provider (the peer
    /// that serves it). Both are set when one ROS 2 side calls the other's
    /// service through the bridge (`PeerId::forwards_to`).
    provider_peer: Option<PeerId>,
    /// How the caller asked for the answer (`compression`,
    /// `fragment_size`, rosbridge).
    encoding: Encoding,
}

impl Call {
    /// The provider-side sequence number (`rg-<seq>`).
    pub fn seq(&self) -> u64 {
        self.seq
    }

    pub fn caller(&self) -> ConnRef {
        self.caller
    }

    pub fn provider(&self) -> ConnRef {
        self.provider
    }

    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    pub fn kind(&self) -> CallKind {
        self.kind
    }

    /// The peer beyond its calling bridge (see [`Calls::set_caller_peer`]).
    pub fn caller_peer(&self) -> Option<PeerId> {
        self.caller_peer
    }

    /// The peer beyond its providing bridge (see
    /// [`Calls::set_provider_peer`]).
    pub fn provider_peer(&self) -> Option<PeerId> {
        self.provider_peer
    }

    /// When it was made.
    pub fn started(&self) -> Instant {
        self.started
    }

    /// Whether it is a goal whose caller can no longer hear its result.
    pub fn is_orphaned(&self) -> bool {
        self.orphaned
    }

    /// The service (or action) name as a JSON string literal.
    pub fn service_json(&self) -> &[u8] {
        &self.names[..self.split]
    }

    /// The caller's id exactly as it sent it.
    /// Bytes counted for this call in the memory budget.
    pub fn bytes_held(&self) -> usize {
        CALL_OVERHEAD + self.names.len()
    }

    pub fn caller_id(&self) -> Option<&[u8]> {
        self.has_id.then(|| &self.names[self.split..])
    }

    /// How the caller asked for the answer (plain JSON unless it gave
    /// `compression` or `fragment_size`).
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }
}

type SeqSet = HashSet<u64, SeqBuild>;

/// Why an answer was not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotOutstanding {
    /// No call with that id is in flight.
    Unknown,
    /// The call exists but was forwarded to another connection.
    OtherProvider,
}

/// The calls one connection made (orphans excluded).
#[derive(Debug, Default)]
struct Made {
    seqs: SeqSet,
    bytes: usize,
    /// Goals among them, by the caller's id.
    goals: HashMap<Box<[u8]>, u64>,
}

/// By provider, then by service (or action) name as JSON.
type Served = HashMap<ConnRef, HashMap<Box<[u8]>, SeqSet>>;

/// See the module docs.
#[derive(Debug)]
pub struct Calls {
    next_seq: u64,
    table: HashMap<u64, Call, SeqBuild>,
    timers: TimerWheel,
    /// Calls each connection made, and the bytes counted for them.
    made: HashMap<ConnRef, Made>,
    /// Bytes counted for every call in flight.
    bytes: usize,
    /// Calls past their deadline not failed yet (a mass time-out is spread
    /// over several turns).
    overdue: std::collections::VecDeque<u64>,
    /// Calls and goals forwarded to each connection, by name (as JSON),
    /// by [`CallKind::index`].
    served: [Served; 2],
    /// Goals in the table, orphans included.
    goals: usize,
}

impl Calls {
    pub fn new(now: Instant) -> Self {
        Calls {
            next_seq: 0,
            table: HashMap::default(),
            timers: TimerWheel::new(now, Duration::from_millis(TIMER_TICK_MS), TIMER_SLOTS),
            made: HashMap::new(),
            bytes: 0,
            overdue: std::collections::VecDeque::new(),
            served: [HashMap::new(), HashMap::new()],
            goals: 0,
        }
    }

    /// Goals in flight, orphans included (the rest of [`Calls::len`] are
    /// service calls).
    pub fn goal_count(&self) -> usize {
        self.goals
    }

    /// Bytes counted for the calls in flight (ids, names, table entries).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Bytes counted for the calls `caller` has in flight.
    pub fn bytes_of(&self, caller: ConnRef) -> usize {
        self.made.get(&caller).map_or(0, |m| m.bytes)
    }

    pub fn len(&self) -> usize {
        self.table.len()
    }

    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    pub fn get(&self, seq: u64) -> Option<&Call> {
        self.table.get(&seq)
    }

    /// Service calls `caller` has in flight (what `max_calls_per_conn`
    /// bounds). Its goals are not counted: they have their own limit
    /// ([`Calls::goals_in_flight`]), and counting them here let a caller's
    /// goals take its call slots, even the one the cancel-goal service
    /// needs to cancel them. Its goals are a subset of its `seqs`.
    pub fn in_flight(&self, caller: ConnRef) -> usize {
        self.made
            .get(&caller)
            .map_or(0, |m| m.seqs.len().saturating_sub(m.goals.len()))
    }

    /// The calls and goals `caller` has in flight, unsorted.
    pub fn made_seqs(&self, caller: ConnRef) -> Vec<u64> {
        self.made
            .get(&caller)
            .map_or(Vec::new(), |m| m.seqs.iter().copied().collect())
    }

    /// Goals `caller` has in flight (orphans excluded).
    pub fn goals_in_flight(&self, caller: ConnRef) -> usize {
        self.made.get(&caller).map_or(0, |m| m.goals.len())
    }

    /// Calls forwarded to `provider` and not answered.
    pub fn serving(&self, provider: ConnRef) -> usize {
        self.served[0]
            .get(&provider)
            .map_or(0, |m| m.values().map(HashSet::len).sum())
    }

    /// Goals sent to `server` and not ended (orphans included).
    pub fn serving_goals(&self, server: ConnRef) -> usize {
        self.served[1]
            .get(&server)
            .map_or(0, |m| m.values().map(HashSet::len).sum())
    }

    /// Registers a service call and returns its provider-side sequence
    /// number.
    pub fn insert(
        &mut self,
        caller: ConnRef,
        provider: ConnRef,
        service_json: &[u8],
        caller_id: Option<&[u8]>,
        now: Instant,
        deadline: Instant,
    ) -> u64 {
        self.add(
            caller,
            provider,
            service_json,
            caller_id,
            (now, Some(deadline)),
            CallKind::Service,
        )
    }

    /// Registers a goal (its caller's id is unique among the caller's
    /// goals: the caller checks [`Calls::goal_of`] first) and returns its
    /// server-side sequence number.
    #[allow(clippy::too_many_arguments)]
    pub fn insert_goal(
        &mut self,
        caller: ConnRef,
        server: ConnRef,
        action_json: &[u8],
        caller_id: &[u8],
        feedback: bool,
        now: Instant,
        deadline: Option<Instant>,
    ) -> u64 {
        let seq = self.add(
            caller,
            server,
            action_json,
            Some(caller_id),
            (now, deadline),
            CallKind::Goal { feedback },
        );
        if let Some(made) = self.made.get_mut(&caller) {
            made.goals.insert(caller_id.into(), seq);
        }
        seq
    }

    fn add(
        &mut self,
        caller: ConnRef,
        provider: ConnRef,
        name_json: &[u8],
        caller_id: Option<&[u8]>,
        (started, deadline): (Instant, Option<Instant>),
        kind: CallKind,
    ) -> u64 {
        self.next_seq += 1;
        let seq = self.next_seq;
        let id = caller_id.unwrap_or(b"");
        let mut names = Vec::with_capacity(name_json.len() + id.len());
        names.extend_from_slice(name_json);
        names.extend_from_slice(id);
        let call = Call {
            seq,
            caller,
            provider,
            names: names.into_boxed_slice(),
            split: name_json.len(),
            has_id: caller_id.is_some(),
            deadline,
            kind,
            orphaned: false,
            caller_peer: None,
            provider_peer: None,
            encoding: Encoding::default(),
            started,
        };
        let bytes = CALL_OVERHEAD + call.names.len();
        self.index_served(&call);
        self.goals += usize::from(call.kind != CallKind::Service);
        self.table.insert(seq, call);
        if let Some(d) = deadline {
            self.timers.insert(seq, d);
        }
        self.bytes += bytes;
        let made = self.made.entry(caller).or_default();
        made.seqs.insert(seq);
        made.bytes += bytes;
        seq
    }

    fn index_served(&mut self, call: &Call) {
        let by_name = self.served[call.kind.index()]
            .entry(call.provider)
            .or_default();
        match by_name.get_mut(call.service_json()) {
            Some(set) => {
                set.insert(call.seq);
            }
            None => {
                let mut set = SeqSet::default();
                set.insert(call.seq);
                by_name.insert(call.service_json().into(), set);
            }
        }
    }

    /// Records how the caller of call `seq` asked for its answer.
    pub fn set_encoding(&mut self, seq: u64, encoding: Encoding) {
        if let Some(c) = self.table.get_mut(&seq) {
            c.encoding = encoding;
        }
    }

    /// Records the peer beyond the bridge that made call `seq`.
    pub fn set_caller_peer(&mut self, seq: u64, peer: PeerId) {
        if let Some(c) = self.table.get_mut(&seq) {
            c.caller_peer = Some(peer);
        }
    }

    /// Records the peer beyond the bridge that serves call `seq`.
    pub fn set_provider_peer(&mut self, seq: u64, peer: PeerId) {
        if let Some(c) = self.table.get_mut(&seq) {
            c.provider_peer = Some(peer);
        }
    }

    /// Removes a call from the table and every index.
    pub fn take(&mut self, seq: u64) -> Option<Call> {
        let call = self.table.remove(&seq)?;
        self.unindex(&call);
        Some(call)
    }

    fn unindex(&mut self, call: &Call) {
        let bytes = CALL_OVERHEAD + call.names.len();
        self.bytes -= bytes;
        self.goals -= usize::from(call.kind != CallKind::Service);
        if !call.orphaned {
            self.unindex_caller(call, bytes);
        }
        let served = &mut self.served[call.kind.index()];
        if let Some(by_name) = served.get_mut(&call.provider) {
            if let Some(set) = by_name.get_mut(call.service_json()) {
                set.remove(&call.seq);
                if set.is_empty() {
                    by_name.remove(call.service_json());
                }
            }
            if by_name.is_empty() {
                served.remove(&call.provider);
            }
        }
    }

    fn unindex_caller(&mut self, call: &Call, bytes: usize) {
        if let Some(made) = self.made.get_mut(&call.caller) {
            made.seqs.remove(&call.seq);
            made.bytes -= bytes;
            if let (CallKind::Goal { .. }, Some(id)) = (call.kind, call.caller_id()) {
                made.goals.remove(id);
            }
            if made.seqs.is_empty() {
                self.made.remove(&call.caller);
            }
        }
    }

    /// Takes the service call `seq` if `from` is the connection it was
    /// forwarded to (a goal's id is not a call's).
    pub fn answer(&mut self, seq: u64, from: ConnRef) -> Result<Call, NotOutstanding> {
        match self.table.get(&seq) {
            Some(c) if c.kind != CallKind::Service => Err(NotOutstanding::Unknown),
            None => Err(NotOutstanding::Unknown),
            Some(c) if c.provider != from => Err(NotOutstanding::OtherProvider),
            Some(_) => self.take(seq).ok_or(NotOutstanding::Unknown),
        }
    }

    /// The goal `seq` if `from` is the server it was sent to (feedback).
    pub fn goal_from(&self, seq: u64, from: ConnRef) -> Result<&Call, NotOutstanding> {
        match self.table.get(&seq) {
            Some(c) if matches!(c.kind, CallKind::Goal { .. }) => {
                if c.provider == from {
                    Ok(c)
                } else {
                    Err(NotOutstanding::OtherProvider)
                }
            }
            _ => Err(NotOutstanding::Unknown),
        }
    }

    /// Takes the goal `seq` if `from` is the server it was sent to (its
    /// result); an orphan comes out too, for the hub to drop.
    pub fn finish_goal(&mut self, seq: u64, from: ConnRef) -> Result<Call, NotOutstanding> {
        self.goal_from(seq, from)?;
        self.take(seq).ok_or(NotOutstanding::Unknown)
    }

    /// The goal `caller` sent with its id `id`, if it is in flight.
    pub fn goal_of(&self, caller: ConnRef, id: &[u8]) -> Option<&Call> {
        let seq = self.made.get(&caller)?.goals.get(id)?;
        self.table.get(seq)
    }

    /// The goals `caller` has in flight for `action_json`, in the order
    /// they were sent.
    pub fn goals_for(&self, caller: ConnRef, action_json: &[u8]) -> Vec<u64> {
        let Some(made) = self.made.get(&caller) else {
            return Vec::new();
        };
        let mut seqs: Vec<u64> = made
            .goals
            .values()
            .copied()
            .filter(|s| {
                self.table
                    .get(s)
                    .is_some_and(|c| c.service_json() == action_json)
            })
            .collect();
        seqs.sort_unstable();
        seqs
    }

    /// Puts `call` (a goal just taken out) back as an orphan until
    /// `deadline`: its server may still answer.
    pub fn adopt_orphan(&mut self, mut call: Call, deadline: Instant) {
        call.orphaned = true;
        call.deadline = Some(deadline);
        self.bytes += CALL_OVERHEAD + call.names.len();
        self.goals += 1;
        self.index_served(&call);
        self.timers.insert(call.seq, deadline);
        self.table.insert(call.seq, call);
    }

    /// Takes every service call of `service_json` forwarded to `provider`,
    /// in the order they were made: O(those calls).
    pub fn fail_service(&mut self, provider: ConnRef, service_json: &[u8]) -> Vec<Call> {
        self.fail_provided(CallKind::Service, provider, service_json)
    }

    /// Takes every call (or goal, orphans included) of `name_json`
    /// forwarded to `provider`, in the order they were made.
    pub fn fail_provided(
        &mut self,
        kind: CallKind,
        provider: ConnRef,
        name_json: &[u8],
    ) -> Vec<Call> {
        let served = &mut self.served[kind.index()];
        let seqs = served
            .get_mut(&provider)
            .and_then(|m| m.remove(name_json))
            .unwrap_or_default();
        if served.get(&provider).is_some_and(HashMap::is_empty) {
            served.remove(&provider);
        }
        self.take_all(seqs)
    }

    /// Everything of `who` leaves: the service calls it made are forgotten
    /// (their providers' late answers become stale); its goals become
    /// orphans until `orphan_deadline` and are returned (their servers are
    /// told to cancel); the calls and goals forwarded to it are returned,
    /// in the order they were made, for the hub to fail. Returns
    /// (forwarded to it, its goals orphaned).
    pub fn drop_conn(&mut self, who: ConnRef, orphan_deadline: Instant) -> (Vec<Call>, Vec<u64>) {
        let mut orphaned = Vec::new();
        if let Some(made) = self.made.remove(&who) {
            for seq in made.seqs {
                let Some(call) = self.table.remove(&seq) else {
                    continue;
                };
                let bytes = CALL_OVERHEAD + call.names.len();
                self.goals -= usize::from(call.kind != CallKind::Service);
                let serving_itself = call.provider == who;
                if matches!(call.kind, CallKind::Goal { .. }) && !serving_itself {
                    // Its made-entry is gone already; only the bytes move.
                    self.bytes -= bytes;
                    self.unindex_served_only(&call);
                    orphaned.push(seq);
                    self.adopt_orphan(call, orphan_deadline);
                } else {
                    self.bytes -= bytes;
                    self.unindex_served_only(&call);
                }
            }
        }
        orphaned.sort_unstable();
        let mut seqs = SeqSet::default();
        for served in self.served.iter_mut() {
            if let Some(m) = served.remove(&who) {
                seqs.extend(m.into_values().flatten());
            }
        }
        (self.take_all(seqs), orphaned)
    }

    fn unindex_served_only(&mut self, call: &Call) {
        let served = &mut self.served[call.kind.index()];
        if let Some(by_name) = served.get_mut(&call.provider) {
            if let Some(set) = by_name.get_mut(call.service_json()) {
                set.remove(&call.seq);
                if set.is_empty() {
                    by_name.remove(call.service_json());
                }
            }
            if by_name.is_empty() {
                served.remove(&call.provider);
            }
        }
    }

    fn take_all(&mut self, seqs: SeqSet) -> Vec<Call> {
        let mut seqs: Vec<u64> = seqs.into_iter().collect();
        seqs.sort_unstable();
        seqs.into_iter().filter_map(|s| self.take(s)).collect()
    }

    /// Takes every call in flight, in the order they were made (shutdown).
    pub fn take_every(&mut self) -> Vec<Call> {
        let seqs: SeqSet = self.table.keys().copied().collect();
        self.take_all(seqs)
    }

    /// Takes the calls whose deadline is `<= now`, at most `budget` of them
    /// (the rest wait in order for the next call), oldest timer slot first.
    pub fn expire(&mut self, now: Instant, budget: usize) -> Vec<Call> {
        let overdue = &mut self.overdue;
        self.timers.expire(now, |seq| overdue.push_back(seq));
        let mut out = Vec::new();
        while out.len() < budget {
            let Some(seq) = self.overdue.pop_front() else {
                break;
            };
            if self
                .table
                .get(&seq)
                .is_some_and(|c| c.deadline.is_some_and(|d| d <= now))
            {
                if let Some(call) = self.take(seq) {
                    out.push(call);
                }
            }
        }
        out
    }

    /// Whether timed-out calls wait for the next [`Calls::expire`].
    pub fn has_overdue(&self) -> bool {
        !self.overdue.is_empty()
    }

    /// When [`Calls::expire`] has work next, if ever.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.timers.next_deadline()
    }

    /// Drops timer entries of calls that already ended, once they dominate
    /// (answered calls leave theirs behind until their deadline; with long
    /// per-call timeouts and a high call rate they would pile up).
    /// Amortised O(1) per call.
    pub fn compact(&mut self) {
        if self.timers.len() > 2 * self.table.len() + TIMER_COMPACT_SLACK {
            let table = &self.table;
            self.timers.retain(|seq| table.contains_key(&seq));
        }
    }

    /// Gives back capacity of tables that emptied out.
    pub fn shrink(&mut self) {
        if self.table.capacity() > 4 * self.table.len() + 64 {
            self.table.shrink_to_fit();
        }
        if self.made.capacity() > 4 * self.made.len() + 64 {
            self.made.shrink_to_fit();
        }
        for served in self.served.iter_mut() {
            if served.capacity() > 4 * served.len() + 64 {
                served.shrink_to_fit();
            }
        }
        if self.overdue.capacity() > 4 * self.overdue.len() + 64 {
            self.overdue.shrink_to_fit();
        }
    }

    /// Timer entries held, including lazily cancelled ones.
    pub fn timer_entries(&self) -> usize {
        self.timers.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: ConnRef = ConnRef { key: 1, gen: 1 };
    const P: ConnRef = ConnRef { key: 2, gen: 2 };

    #[test]
    fn sequence_numbers_are_never_reused() {
        let now = Instant::now();
        let mut t = Calls::new(now);
        let a = t.insert(A, A, b"\"/s\"", Some(b"1"), now, now);
        assert!(t.take(a).is_some());
        let b = t.insert(A, A, b"\"/s\"", Some(b"1"), now, now);
        assert_ne!(a, b);
        let c = t.get(b).expect("present");
        assert_eq!(c.service_json(), b"\"/s\"");
        assert_eq!(c.caller_id(), Some(&b"1"[..]));
    }

    #[test]
    fn answers_only_from_the_provider() {
        let now = Instant::now();
        let mut t = Calls::new(now);
        let s = t.insert(A, P, b"\"/s\"", None, now, now);
        assert_eq!(t.answer(s, A).err(), Some(NotOutstanding::OtherProvider));
        assert_eq!(t.answer(s, P).map(|c| c.caller_id().is_none()), Ok(true));
        assert_eq!(t.answer(s, P).err(), Some(NotOutstanding::Unknown));
        assert_eq!((t.in_flight(A), t.serving(P)), (0, 0));
    }

    #[test]
    fn indexes_follow_every_exit() {
        let now = Instant::now();
        let mut t = Calls::new(now);
        let later = now + Duration::from_secs(1);
        let s1 = t.insert(A, P, b"\"/a\"", Some(b"1"), now, later);
        let s2 = t.insert(A, P, b"\"/b\"", Some(b"2"), now, later);
        let s3 = t.insert(A, P, b"\"/a\"", Some(b"3"), now, now);
        assert_eq!((t.in_flight(A), t.serving(P)), (3, 3));
        let failed: Vec<u64> = t.fail_service(P, b"\"/a\"").iter().map(Call::seq).collect();
        assert_eq!(failed, vec![s1, s3]);
        assert_eq!((t.in_flight(A), t.serving(P)), (1, 1));
        assert!(t.expire(now, usize::MAX).is_empty(), "s3 already left");
        let gone: Vec<u64> = t.drop_conn(P, now).0.iter().map(Call::seq).collect();
        assert_eq!(gone, vec![s2]);
        assert!(t.is_empty());
        assert!(t.made.is_empty() && t.served.iter().all(HashMap::is_empty));
    }

    #[test]
    fn a_leaving_caller_is_forgotten() {
        let now = Instant::now();
        let mut t = Calls::new(now);
        t.insert(A, P, b"\"/a\"", Some(b"1"), now, now);
        assert!(
            t.drop_conn(A, now).0.is_empty(),
            "nothing to fail for the caller"
        );
        assert!(t.is_empty() && t.served.iter().all(HashMap::is_empty));
    }

    #[test]
    fn expiry_fires_at_the_deadline() {
        let now = Instant::now();
        let mut t = Calls::new(now);
        let s = t.insert(
            A,
            P,
            b"\"/a\"",
            Some(b"1"),
            now,
            now + Duration::from_millis(50),
        );
        assert!(t
            .expire(now + Duration::from_millis(40), usize::MAX)
            .is_empty());
        let due: Vec<u64> = t
            .expire(now + Duration::from_millis(60), usize::MAX)
            .iter()
            .map(Call::seq)
            .collect();
        assert_eq!(due, vec![s]);
        assert!(t.is_empty() && t.made.is_empty());
        assert_eq!(t.bytes(), 0);
    }

    #[test]
    fn a_mass_time_out_is_spread_over_turns() {
        let now = Instant::now();
        let mut t = Calls::new(now);
        for i in 0..10u8 {
            t.insert(A, P, b"\"/a\"", Some(&[b'0' + i]), now, now);
        }
        assert!(t.bytes() > 0 && t.bytes_of(A) == t.bytes());
        let later = now + Duration::from_millis(20);
        assert_eq!(t.expire(later, 4).len(), 4);
        assert!(t.has_overdue());
        assert_eq!(t.expire(later, 4).len(), 4);
        assert_eq!(t.expire(later, 4).len(), 2);
        assert!(!t.has_overdue() && t.is_empty());
        assert_eq!((t.bytes(), t.bytes_of(A)), (0, 0));
    }
}
