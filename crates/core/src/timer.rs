//! `TimerWheel`: a hashed timing wheel of `u64` keys; `now` is passed in.
//!
//! Used for call deadlines. Insertion is O(1); expiry touches only the slots
//! whose tick has passed. Cancellation is lazy: the owner of the keys (the
//! call table) ignores keys that are already gone, and since call keys are
//! never reused a stale entry can never fire for a newer call.
//!
//! Invariants:
//! - a key fires at the first `expire(now)` with `now >= deadline`, never
//!   earlier, and at most one tick (`tick`) late relative to that call;
//! - `next_deadline()` is never later than the earliest live deadline.

use std::time::{Duration, Instant};

/// Up to this many entries, `expire` recomputes the exact earliest deadline.
const EXACT_SCAN_MAX: usize = 1024;

#[derive(Debug, Clone, Copy)]
struct Entry {
    key: u64,
    /// Absolute tick at or after which the entry fires.
    due: u64,
}

/// See the module docs.
#[derive(Debug)]
pub struct TimerWheel {
    origin: Instant,
    tick: Duration,
    slots: Vec<Vec<Entry>>,
    /// All ticks before this one have been processed.
    cursor: u64,
    len: usize,
    /// Lower bound of the earliest pending `due` (may be stale-low).
    earliest: u64,
}

impl TimerWheel {
    /// `slots` should cover the common timeout: 512 x 10 ms = 5.12 s.
    pub fn new(origin: Instant, tick: Duration, slots: usize) -> Self {
        TimerWheel {
            origin,
            tick,
            slots: (0..slots.max(1)).map(|_| Vec::new()).collect(),
            cursor: 0,
            len: 0,
            earliest: u64::MAX,
        }
    }

    /// Entries held, including lazily cancelled ones.
    pub fn len(&self) -> usize {
        self.len
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn tick_of(&self, t: Instant) -> u64 {
        let d = t.saturating_duration_since(self.origin);
        (d.as_nanos() / self.tick.as_nanos().max(1)) as u64
    }

    /// Schedules `key` to fire at `deadline` (rounded up to the next tick).
    pub fn insert(&mut self, key: u64, deadline: Instant) {
        let d = deadline.saturating_duration_since(self.origin).as_nanos();
        let t = self.tick.as_nanos().max(1);
        let due = (d.div_ceil(t) as u64).max(self.cursor);
        let n = self.slots.len() as u64;
        self.slots[(due % n) as usize].push(Entry { key, due });
        self.len += 1;
        self.earliest = self.earliest.min(due);
    }

    /// Keeps only the entries whose key `keep` accepts (compaction of
    /// lazily cancelled entries; O(entries)).
    pub fn retain(&mut self, mut keep: impl FnMut(u64) -> bool) {
        let mut len = 0;
        let mut earliest = u64::MAX;
        for slot in &mut self.slots {
            slot.retain(|e| keep(e.key));
            len += slot.len();
            for e in slot.iter() {
                earliest = earliest.min(e.due);
            }
            if slot.capacity() > 64 && slot.len() < slot.capacity() / 4 {
                slot.shrink_to_fit();
            }
        }
        self.len = len;
        self.earliest = earliest;
    }

    /// When the loop must wake up next for this wheel, if ever.
    pub fn next_deadline(&self) -> Option<Instant> {
        if self.len == 0 {
            return None;
        }
        let nanos = self.tick.as_nanos().saturating_mul(self.earliest as u128);
        Some(self.origin + Duration::from_nanos(nanos.min(u64::MAX as u128) as u64))
    }

    /// Calls `fire` for every key whose deadline is `<= now`.
    pub fn expire(&mut self, now: Instant, mut fire: impl FnMut(u64)) {
        let now_tick = self.tick_of(now);
        if self.len == 0 {
            self.cursor = now_tick + 1;
            self.earliest = u64::MAX;
            return;
        }
        if now_tick < self.earliest || now_tick < self.cursor {
            return;
        }
        let n = self.slots.len() as u64;
        // Visit each slot at most once even after a long pause.
        let last = now_tick.min(self.cursor + n - 1);
        let mut earliest = u64::MAX;
        for t in self.cursor..=last {
            let slot = &mut self.slots[(t % n) as usize];
            let mut i = 0;
            while i < slot.len() {
                if slot[i].due <= now_tick {
                    let e = slot.swap_remove(i);
                    self.len -= 1;
                    fire(e.key);
                } else {
                    earliest = earliest.min(slot[i].due);
                    i += 1;
                }
            }
            if slot.is_empty() && slot.capacity() > 64 {
                *slot = Vec::new();
            }
        }
        self.cursor = now_tick + 1;
        self.earliest = if self.len == 0 {
            u64::MAX
        } else if self.len <= EXACT_SCAN_MAX {
            // Few entries: find the true minimum so an idle loop sleeps
            // until the next deadline instead of waking every tick.
            self.slots
                .iter()
                .flatten()
                .map(|e| e.due)
                .min()
                .unwrap_or(u64::MAX)
        } else {
            // Unvisited slots only hold entries due after `now_tick`.
            earliest.min(self.cursor)
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn fires_at_deadline_not_before() {
        let t0 = Instant::now();
        let mut w = TimerWheel::new(t0, ms(10), 8);
        w.insert(1, t0 + ms(25));
        w.insert(2, t0 + ms(1000)); // several laps ahead
        let mut fired = Vec::new();
        w.expire(t0 + ms(20), |k| fired.push(k));
        assert!(fired.is_empty());
        w.expire(t0 + ms(30), |k| fired.push(k));
        assert_eq!(fired, vec![1]);
        w.expire(t0 + ms(990), |k| fired.push(k));
        assert_eq!(fired, vec![1]);
        w.expire(t0 + ms(5000), |k| fired.push(k));
        assert_eq!(fired, vec![1, 2]);
        assert!(w.is_empty());
        assert_eq!(w.next_deadline(), None);
    }

    #[test]
    fn next_deadline_is_a_lower_bound() {
        let t0 = Instant::now();
        let mut w = TimerWheel::new(t0, ms(10), 4);
        w.insert(7, t0 + ms(95));
        let nd = w.next_deadline().expect("pending");
        assert!(nd <= t0 + ms(100));
        let mut fired = Vec::new();
        w.expire(t0 + ms(100), |k| fired.push(k));
        assert_eq!(fired, vec![7]);
    }

    #[test]
    fn retain_drops_cancelled_keys_and_keeps_deadlines() {
        let t0 = Instant::now();
        let mut w = TimerWheel::new(t0, ms(10), 8);
        for k in 0..100 {
            w.insert(k, t0 + ms(10 * k));
        }
        w.retain(|k| k % 10 == 9);
        assert_eq!(w.len(), 10);
        assert!(w.next_deadline().is_some_and(|d| d <= t0 + ms(90)));
        let mut fired = Vec::new();
        w.expire(t0 + ms(2000), |k| fired.push(k));
        fired.sort_unstable();
        assert_eq!(fired, (0..10).map(|i| i * 10 + 9).collect::<Vec<_>>());
    }

    #[test]
    fn past_deadlines_fire_on_next_expire() {
        let t0 = Instant::now();
        let mut w = TimerWheel::new(t0, ms(10), 4);
        let mut fired = Vec::new();
        w.expire(t0 + ms(500), |k| fired.push(k));
        w.insert(3, t0 + ms(100));
        w.expire(t0 + ms(510), |k| fired.push(k));
        assert_eq!(fired, vec![3]);
    }
}
