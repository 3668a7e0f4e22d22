//! The timing harness shared by the benches: warm up in doubling batches,
//! then time `rounds` rounds and report the median, the fastest round and
//! the spread. `--quick` (or running without `--bench`, as under
//! `cargo test --benches`) shortens every phase tenfold; other non-flag
//! arguments are returned as case filters.

use std::time::{Duration, Instant};

pub struct Timer {
    pub warmup: Duration,
    pub round: Duration,
    pub rounds: usize,
}

/// Median, fastest round and relative spread of the per-operation times, in ns.
pub struct Sample {
    pub ns: f64,
    #[allow(dead_code)] // not every bench prints the fastest round
    pub min: f64,
    pub spread: f64,
}

impl Timer {
    /// A timer whose warm-up and rounds last `phase` each (a tenth of it in
    /// quick mode), and the filters given on the command line.
    pub fn from_args(phase: Duration) -> (Timer, Vec<String>) {
        let args: Vec<String> = std::env::args().skip(1).collect();
        let quick = args.iter().any(|a| a == "--quick") || !args.iter().any(|a| a == "--bench");
        let filters = args.into_iter().filter(|a| !a.starts_with('-')).collect();
        let scale = if quick { 10 } else { 1 };
        let timer = Timer {
            warmup: phase / scale,
            round: phase / scale,
            rounds: 5,
        };
        (timer, filters)
    }

    pub fn measure(&self, mut f: impl FnMut()) -> Sample {
        // Warm up in doubling batches; the last batches calibrate `iters`.
        let start = Instant::now();
        let mut batch = 1u64;
        let mut done = 0u64;
        while start.elapsed() < self.warmup {
            for _ in 0..batch {
                f();
            }
            done += batch;
            batch *= 2;
        }
        let per_op = start.elapsed().as_secs_f64() / done as f64;
        let iters = ((self.round.as_secs_f64() / per_op).ceil() as u64).max(1);
        let mut ns: Vec<f64> = (0..self.rounds)
            .map(|_| {
                let t = Instant::now();
                for _ in 0..iters {
                    f();
                }
                t.elapsed().as_nanos() as f64 / iters as f64
            })
            .collect();
        ns.sort_by(f64::total_cmp);
        let median = ns[ns.len() / 2];
        Sample {
            ns: median,
            min: ns[0],
            spread: (ns[ns.len() - 1] - ns[0]) / median,
        }
    }
}

/// Bytes per second in MB/s (10^6 bytes).
#[allow(dead_code)] // used by the decode and cdr benches only
pub fn mb_per_s(bytes: usize, ns: f64) -> f64 {
    bytes as f64 / ns * 1e3
}
