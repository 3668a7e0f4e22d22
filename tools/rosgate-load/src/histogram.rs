//! `Histogram`: a fixed-size log-linear latency histogram in the style of
//! HdrHistogram.
//!
//! Values are nanoseconds. Each power-of-two range is split into 64 linear
//! buckets, so a reported quantile is at most 1/64 (about 1.6 %) above the
//! true value, over the whole `u64` range, in 30 KiB and with an O(1)
//! `record` (a leading-zero count and a shift). Quantiles report a bucket's
//! upper bound, as HdrHistogram does, so they never flatter the server; the
//! maximum is kept exactly.

/// Linear sub-buckets per power of two are `2^(SUB_BITS - 1)`; values below
/// `2^SUB_BITS` get a bucket each.
const SUB_BITS: u32 = 7;
const HALF: usize = 1 << (SUB_BITS - 1);
/// Index of the largest `u64`, plus one.
const BUCKETS: usize = (64 - SUB_BITS as usize + 1) * HALF + HALF;

#[derive(Clone)]
pub struct Histogram {
    counts: Box<[u64; BUCKETS]>,
    total: u64,
    max: u64,
    sum: u128,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: Box::new([0; BUCKETS]),
            total: 0,
            max: 0,
            sum: 0,
        }
    }
}

impl std::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Histogram")
            .field("total", &self.total)
            .field("max", &self.max)
            .finish_non_exhaustive()
    }
}

impl Histogram {
    pub fn record(&mut self, v: u64) {
        self.counts[index(v)] += 1;
        self.total += 1;
        self.max = self.max.max(v);
        self.sum += u128::from(v);
    }

    /// Adds every value recorded in `other` (the run's worker threads
    /// each keep their own histogram).
    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a += b;
        }
        self.total += other.total;
        self.max = self.max.max(other.max);
        self.sum += other.sum;
    }

    pub fn count(&self) -> u64 {
        self.total
    }

    pub fn max(&self) -> u64 {
        self.max
    }

    pub fn mean(&self) -> u64 {
        if self.total == 0 {
            0
        } else {
            (self.sum / u128::from(self.total)) as u64
        }
    }

    /// Smallest recorded bucket bound at or above quantile `q` (0..=1); the
    /// exact maximum for `q >= 1`; 0 when empty.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        if q >= 1.0 {
            return self.max;
        }
        // Rank of the sample we want, 1-based; at least the first sample.
        let rank = ((q * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return highest_equivalent(i).min(self.max);
            }
        }
        self.max
    }
}

/// Bucket of `v`: exact below `2^SUB_BITS`, else the top `SUB_BITS` bits.
fn index(v: u64) -> usize {
    if v < (1 << SUB_BITS) {
        return v as usize;
    }
    let msb = 63 - v.leading_zeros();
    let shift = msb - (SUB_BITS - 1);
    let top = (v >> shift) as usize; // in HALF..2*HALF
    ((shift as usize) << (SUB_BITS - 1)) + top
}

/// Lowest value in bucket `i`.
fn lowest(i: usize) -> u64 {
    if i < (1 << SUB_BITS) {
        return i as u64;
    }
    let shift = i / HALF - 1;
    let top = (i - shift * HALF) as u64;
    top << shift
}

/// Highest value in bucket `i`.
fn highest_equivalent(i: usize) -> u64 {
    if i + 1 >= BUCKETS {
        return u64::MAX;
    }
    lowest(i + 1) - 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_contiguous_and_cover_u64() {
        for i in 0..BUCKETS - 1 {
            assert_eq!(index(lowest(i)), i, "bucket {i}");
            assert_eq!(index(highest_equivalent(i)), i, "bucket {i}");
        }
        assert_eq!(index(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn relative_error_is_bounded() {
        let mut v = 1u64;
        while v < u64::MAX / 3 {
            let hi = highest_equivalent(index(v));
            assert!(hi >= v);
            assert!((hi - v) as f64 <= v as f64 / 64.0 + 1.0, "{v} -> {hi}");
            v = v * 3 + 1;
        }
    }

    #[test]
    fn quantiles() {
        let mut h = Histogram::default();
        assert_eq!(h.quantile(0.5), 0);
        for v in 1..=10_000u64 {
            h.record(v * 1000);
        }
        let p50 = h.quantile(0.5);
        assert!(
            (5_000_000..=5_000_000 + 5_000_000 / 64).contains(&p50),
            "{p50}"
        );
        let p99 = h.quantile(0.99);
        assert!(
            (9_900_000..=9_900_000 + 9_900_000 / 64).contains(&p99),
            "{p99}"
        );
        assert_eq!(h.quantile(1.0), 10_000_000);
        assert!(h.quantile(0.9999) <= h.max());
        assert_eq!(h.count(), 10_000);
        assert_eq!(h.mean(), 5_000_500);
    }

    #[test]
    fn merged_halves_equal_the_whole() {
        let (mut whole, mut a, mut b) = (
            Histogram::default(),
            Histogram::default(),
            Histogram::default(),
        );
        for v in 1..=1000u64 {
            whole.record(v * 37);
            if v % 2 == 0 {
                a.record(v * 37)
            } else {
                b.record(v * 37)
            }
        }
        a.merge(&b);
        assert_eq!(
            (a.count(), a.max(), a.mean()),
            (whole.count(), whole.max(), whole.mean())
        );
        for q in [0.5, 0.9, 0.99, 1.0] {
            assert_eq!(a.quantile(q), whole.quantile(q));
        }
    }
}
