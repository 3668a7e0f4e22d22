//! `AuthBudget`: the per-address budget of wrong tokens (docs/security.md,
//! "Token guessing"). Sans-io: every call takes `now`.
//!
//! An address may present `--auth-failure-budget` wrong tokens
//! ([`DEFAULT_AUTH_FAILURE_BUDGET`]), each refused at once. Past that, the address is *locked*: a token it presents is not
//! checked at all; the connection is held for a delay that doubles with
//! each further attempt ([`AUTH_DELAY_FIRST_MS`] up to
//! [`AUTH_DELAY_MAX_MS`]) and then refused, and the attempt counts as one
//! more failure. An address that presents no wrong token for
//! [`AUTH_QUIET_MS`] starts again with a full budget.
//!
//! Why a locked address's tokens are not checked, right ones included: if a
//! right token were still answered at once and only wrong ones held, a
//! guesser would read "no answer within a few ms" as "wrong" and go on at
//! full speed; the delay would cost it nothing. Not checking makes
//! guessing from a locked address worthless whatever it does with the
//! delay, and the delay keeps a locked guesser's connections (and its
//! per-address connection slots) busy. The price: clients sharing a locked
//! address (behind one NAT, or all on one host) cannot authenticate until
//! it has been quiet for a minute. Other addresses are never affected.
//!
//! Invariants:
//! - at most [`MAX_AUTH_ADDRESSES`] addresses are remembered; a new one
//!   replaces the one whose last failure is oldest (O(log n));
//! - an address's failures only grow while it keeps failing, and drop to
//!   zero once it has been quiet for [`AUTH_QUIET_MS`].

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::time::{Duration, Instant};

use crate::limits::DEFAULT_AUTH_FAILURE_BUDGET;

/// Milliseconds. An address with no wrong token for this long starts again
/// with a full budget.
pub const AUTH_QUIET_MS: u64 = 60_000;

/// Milliseconds. How long the first attempt from a locked address is held
/// before it is refused; each further attempt doubles it.
pub const AUTH_DELAY_FIRST_MS: u64 = 250;

/// Milliseconds. The longest hold; below the opening deadline
/// (`--handshake-timeout-ms`, 10 s by default), so a held connection gets
/// its refusal rather than a time-out.
pub const AUTH_DELAY_MAX_MS: u64 = 8_000;

/// Addresses whose failures are remembered. A guesser with more addresses
/// than this pushes out the oldest; each of its addresses still gets only
/// its own budget per minute while remembered.
pub const MAX_AUTH_ADDRESSES: usize = 4096;

/// What to do with a token an address presents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// Check it.
    Check,
    /// Do not check it: hold the connection this long, then refuse it.
    Hold(Duration),
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    failures: u32,
    last: Instant,
    /// Key in `by_age`.
    stamp: u64,
}

/// See the module docs.
#[derive(Debug)]
pub struct AuthBudget {
    /// Wrong tokens an address may present before it is locked.
    free: u32,
    entries: HashMap<IpAddr, Entry>,
    /// Entries by the order of their last failure (oldest first).
    by_age: BTreeMap<u64, IpAddr>,
    next_stamp: u64,
}

impl Default for AuthBudget {
    fn default() -> Self {
        AuthBudget::new(DEFAULT_AUTH_FAILURE_BUDGET)
    }
}

impl AuthBudget {
    /// A budget of `free` wrong tokens per address (at least 1).
    pub fn new(free: u32) -> Self {
        AuthBudget {
            free: free.max(1),
            entries: HashMap::new(),
            by_age: BTreeMap::new(),
            next_stamp: 0,
        }
    }

    /// Whether `ip`'s token may be checked (`Gate::Check`), or the address
    /// is locked: then the attempt counts as a failure and the connection
    /// is to be held for the returned delay before it is refused.
    pub fn gate(&mut self, ip: IpAddr, now: Instant) -> Gate {
        let failures = self.current(ip, now);
        if failures < self.free {
            return Gate::Check;
        }
        self.failed(ip, now);
        Gate::Hold(delay(failures - self.free))
    }

    /// A token from `ip` was checked and was wrong.
    pub fn failed(&mut self, ip: IpAddr, now: Instant) {
        let failures = self.current(ip, now).saturating_add(1);
        if let Some(old) = self.entries.get(&ip) {
            self.by_age.remove(&old.stamp);
        } else if self.entries.len() >= MAX_AUTH_ADDRESSES {
            if let Some((_, oldest)) = self.by_age.pop_first() {
                self.entries.remove(&oldest);
            }
        }
        self.next_stamp += 1;
        let stamp = self.next_stamp;
        self.by_age.insert(stamp, ip);
        self.entries.insert(
            ip,
            Entry {
                failures,
                last: now,
                stamp,
            },
        );
    }

    /// Failures of `ip` that still count at `now` (a quiet address's are
    /// forgotten here).
    fn current(&mut self, ip: IpAddr, now: Instant) -> u32 {
        let Some(e) = self.entries.get(&ip).copied() else {
            return 0;
        };
        if now.saturating_duration_since(e.last) >= Duration::from_millis(AUTH_QUIET_MS) {
            self.entries.remove(&ip);
            self.by_age.remove(&e.stamp);
            return 0;
        }
        e.failures
    }

    /// Addresses remembered now.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// The hold of the `n`-th attempt (from 0) past the free failures.
fn delay(n: u32) -> Duration {
    let ms = AUTH_DELAY_FIRST_MS
        .checked_shl(n)
        .unwrap_or(u64::MAX)
        .min(AUTH_DELAY_MAX_MS);
    Duration::from_millis(ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    const AUTH_FREE_FAILURES: u32 = DEFAULT_AUTH_FAILURE_BUDGET;

    fn ip(last: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(127, 0, 0, last))
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn ten_failures_are_free_then_holds_double_up_to_the_cap() {
        let mut b = AuthBudget::default();
        let t0 = Instant::now();
        for i in 0..AUTH_FREE_FAILURES {
            assert_eq!(b.gate(ip(1), t0 + ms(i as u64)), Gate::Check, "attempt {i}");
            b.failed(ip(1), t0 + ms(i as u64));
        }
        let holds: Vec<Gate> = (0..8).map(|i| b.gate(ip(1), t0 + ms(100 + i))).collect();
        let want: Vec<Gate> = [250, 500, 1000, 2000, 4000, 8000, 8000, 8000]
            .iter()
            .map(|&m| Gate::Hold(ms(m)))
            .collect();
        assert_eq!(holds, want);
        // Another address is not affected.
        assert_eq!(b.gate(ip(2), t0 + ms(200)), Gate::Check);
    }

    #[test]
    fn a_quiet_minute_restores_the_budget_and_attempts_while_locked_extend_it() {
        let mut b = AuthBudget::default();
        let t0 = Instant::now();
        for _ in 0..AUTH_FREE_FAILURES {
            b.failed(ip(1), t0);
        }
        // Locked attempts count: the minute runs from the last of them.
        let t1 = t0 + ms(AUTH_QUIET_MS - 1);
        assert!(matches!(b.gate(ip(1), t1), Gate::Hold(_)));
        assert!(matches!(
            b.gate(ip(1), t1 + ms(AUTH_QUIET_MS - 1)),
            Gate::Hold(_)
        ));
        let t2 = t1 + ms(AUTH_QUIET_MS - 1) + ms(AUTH_QUIET_MS);
        assert_eq!(b.gate(ip(1), t2), Gate::Check);
        assert!(b.is_empty(), "a quiet address is forgotten");
        // Failures spread wider than the quiet interval never lock.
        for i in 0..3 * AUTH_FREE_FAILURES as u64 {
            let t = t2 + ms(i * AUTH_QUIET_MS);
            assert_eq!(b.gate(ip(1), t), Gate::Check);
            b.failed(ip(1), t);
        }
    }

    #[test]
    fn the_table_is_bounded_and_forgets_the_oldest() {
        let mut b = AuthBudget::default();
        let t0 = Instant::now();
        let v6 = |i: u32| IpAddr::from([0x2001, 0xdb8, 0, 0, 0, 0, (i >> 16) as u16, i as u16]);
        for _ in 0..AUTH_FREE_FAILURES {
            b.failed(ip(1), t0);
        }
        for i in 0..MAX_AUTH_ADDRESSES as u32 {
            b.failed(v6(i), t0 + ms(1));
        }
        assert_eq!(b.len(), MAX_AUTH_ADDRESSES);
        // 127.0.0.1 failed first: it was pushed out.
        assert_eq!(b.gate(ip(1), t0 + ms(2)), Gate::Check);
        // The newest are kept.
        for _ in 0..AUTH_FREE_FAILURES {
            b.failed(v6(5000), t0 + ms(3));
        }
        assert!(matches!(b.gate(v6(5000), t0 + ms(4)), Gate::Hold(_)));
        assert_eq!(b.len(), MAX_AUTH_ADDRESSES);
    }
}
