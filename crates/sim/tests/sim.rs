//! Seeded simulation of the core (see `src/sim.rs`): random connects,
//! subscribes, publishes, calls, replies, slow readers, disconnects and clock
//! jumps, with the model's invariants checked after every step.
//!
//! `ROSGATE_SIM_SEED=<n>` replays one seed (and prints what it did);
//! `ROSGATE_SIM_STEPS=<n>` changes the number of steps per seed;
//! `ROSGATE_SIM_SEEDS=<n>` the number of seeds.

use std::panic::{catch_unwind, AssertUnwindSafe};

use rosgate_sim::run_seed;

const SEEDS: u64 = 256;
const STEPS: usize = 300;

fn env(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    Some(
        v.trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a number")),
    )
}

/// Runs one seed; a panic inside the hub or the model is reported with the
/// seed like a violation.
fn one(seed: u64, steps: usize) -> Result<rosgate_sim::Counts, String> {
    match catch_unwind(AssertUnwindSafe(|| run_seed(seed, steps))) {
        Ok(r) => r,
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| p.downcast_ref::<&str>().copied())
                .unwrap_or("(non-string panic)");
            Err(format!("seed {seed}: panicked: {msg}"))
        }
    }
}

#[test]
fn seeded_simulation() {
    let steps = env("ROSGATE_SIM_STEPS").map_or(STEPS, |n| n as usize);
    if let Some(seed) = env("ROSGATE_SIM_SEED") {
        match one(seed, steps) {
            Ok(c) => println!("seed {seed}: ok after {steps} steps: {c:?}"),
            Err(e) => panic!("{e}\nreplay: ROSGATE_SIM_SEED={seed} ROSGATE_SIM_STEPS={steps} cargo test --test sim"),
        }
        return;
    }
    let seeds = env("ROSGATE_SIM_SEEDS").unwrap_or(SEEDS);
    let mut failures = Vec::new();
    let mut total = rosgate_sim::Counts::default();
    for seed in 0..seeds {
        match one(seed, steps) {
            Ok(c) => {
                total.steps += c.steps;
                total.calls_forwarded += c.calls_forwarded;
                total.responses_ok += c.responses_ok;
                total.responses_failed += c.responses_failed;
                total.topic_bytes_shed += c.topic_bytes_shed;
                total.closes_overflow += c.closes_overflow;
                total.closes_stall += c.closes_stall;
                total.stale_responses += c.stale_responses;
                total.publishes_received += c.publishes_received;
            }
            Err(e) => {
                eprintln!("{e}\n");
                failures.push(seed);
            }
        }
    }
    println!("{seeds} seeds x {steps} steps: {total:?}");
    assert!(
        failures.is_empty(),
        "simulation failed for seeds {failures:?}; replay one with ROSGATE_SIM_SEED=<seed> cargo test --test sim -- --nocapture"
    );
    // The schedule must actually exercise the interesting paths.
    assert!(
        total.responses_ok > 0 && total.responses_failed > 0,
        "{total:?}"
    );
    assert!(
        total.topic_bytes_shed > 0 && total.closes_stall > 0 && total.closes_overflow > 0,
        "{total:?}"
    );
}
