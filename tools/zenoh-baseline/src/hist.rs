//! Latency histogram: what the baseline's subscribers and queriers record.
//!
//! Invariants: 1 µs buckets below [`FINE_US`], 1 ms buckets above it up to
//! [`MAX_US`] (a longer latency counts in the last bucket); a percentile is
//! the upper edge of the bucket it falls in, so it never understates.

/// µs. Below this, buckets are 1 µs wide.
pub const FINE_US: u64 = 10_000;
/// µs. Latencies are recorded up to this (10 s); longer ones count here.
pub const MAX_US: u64 = 10_000_000;
const COARSE: usize = ((MAX_US - FINE_US) / 1000) as usize + 1;

/// Counts of latencies by bucket.
#[derive(Clone)]
pub struct Hist {
    buckets: Vec<u64>,
    n: u64,
}

impl Default for Hist {
    fn default() -> Self {
        Hist {
            buckets: vec![0; FINE_US as usize + COARSE],
            n: 0,
        }
    }
}

impl Hist {
    /// Records one latency in µs.
    pub fn add(&mut self, us: u64) {
        let i = if us < FINE_US {
            us as usize
        } else {
            FINE_US as usize + ((us.min(MAX_US) - FINE_US) / 1000) as usize
        };
        self.buckets[i] += 1;
        self.n += 1;
    }

    /// Adds another histogram's counts.
    pub fn merge(&mut self, o: &Hist) {
        for (a, b) in self.buckets.iter_mut().zip(&o.buckets) {
            *a += b;
        }
        self.n += o.n;
    }

    /// Latencies recorded.
    pub fn count(&self) -> u64 {
        self.n
    }

    /// The `q` quantile (0..=1) in µs: the upper edge of its bucket.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.n == 0 {
            return 0;
        }
        let want = ((self.n as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, c) in self.buckets.iter().enumerate() {
            seen += c;
            if seen >= want {
                return if (i as u64) < FINE_US {
                    i as u64 + 1
                } else {
                    FINE_US + (i as u64 - FINE_US + 1) * 1000
                };
            }
        }
        MAX_US
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_upper_bucket_edges() {
        let mut h = Hist::default();
        for us in 0..100 {
            h.add(us);
        }
        assert_eq!(h.quantile(0.5), 50);
        assert_eq!(h.quantile(0.99), 99);
        h.add(25_500);
        assert_eq!(h.quantile(1.0), 26_000);
        h.add(u64::MAX);
        assert_eq!(h.quantile(1.0), MAX_US + 1000);
    }
}
