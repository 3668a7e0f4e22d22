//! `RateLimit`: at most N events per second, counting what it suppressed,
//! for log lines (P15) and other per-event notices that must not flood.

use std::time::{Duration, Instant};

/// Admits at most `per_sec` events in each one-second window.
#[derive(Debug)]
pub struct RateLimit {
    per_sec: u32,
    window_start: Option<Instant>,
    in_window: u32,
    suppressed: u64,
}

/// What [`RateLimit::admit`] decided.
#[derive(Debug, PartialEq, Eq)]
pub enum Admit {
    /// Go ahead; `suppressed` events were refused since the last admitted one.
    Yes {
        suppressed: u64,
    },
    No,
}

impl RateLimit {
    pub fn new(per_sec: u32) -> Self {
        RateLimit {
            per_sec,
            window_start: None,
            in_window: 0,
            suppressed: 0,
        }
    }

    pub fn admit(&mut self, now: Instant) -> Admit {
        let fresh = self
            .window_start
            .is_none_or(|s| now.saturating_duration_since(s) >= Duration::from_secs(1));
        if fresh {
            self.window_start = Some(now);
            self.in_window = 0;
        }
        if self.in_window < self.per_sec {
            self.in_window += 1;
            Admit::Yes {
                suppressed: std::mem::take(&mut self.suppressed),
            }
        } else {
            self.suppressed += 1;
            Admit::No
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admits_per_window_and_reports_suppressed() {
        let t0 = Instant::now();
        let mut r = RateLimit::new(2);
        assert_eq!(r.admit(t0), Admit::Yes { suppressed: 0 });
        assert_eq!(r.admit(t0), Admit::Yes { suppressed: 0 });
        assert_eq!(r.admit(t0), Admit::No);
        assert_eq!(r.admit(t0), Admit::No);
        let t1 = t0 + Duration::from_secs(1);
        assert_eq!(r.admit(t1), Admit::Yes { suppressed: 2 });
    }
}
