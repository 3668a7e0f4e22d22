//! Seeded simulation of the core (see `src/lib.rs`): random TCP and
//! WebSocket connects, subscribes, publishes, calls, replies, pings, close
//! frames, protocol violations, slow readers, trickled requests,
//! disconnects, clock jumps and shutdowns, nodes declared (by op or URL)
//! and destroyed, ROS names and domains, with the model's invariants
//! checked after every hub call and every step.
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
            Err(e) => panic!("{e}\nreplay: ROSGATE_SIM_SEED={seed} ROSGATE_SIM_STEPS={steps} cargo test -p rosgate-sim --test sim"),
        }
        return;
    }
    let seeds = env("ROSGATE_SIM_SEEDS").unwrap_or(SEEDS);
    let mut failures = Vec::new();
    let mut total = rosgate_sim::Counts::default();
    for seed in 0..seeds {
        match one(seed, steps) {
            Ok(c) => add(&mut total, &c),
            Err(e) => {
                eprintln!("{e}\n");
                failures.push(seed);
            }
        }
    }
    println!("{seeds} seeds x {steps} steps: {total:?}");
    assert!(
        failures.is_empty(),
        "simulation failed for seeds {failures:?}; replay one with ROSGATE_SIM_SEED=<seed> cargo test -p rosgate-sim --test sim -- --nocapture"
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
    // ... and the rosbridge dialect: WebSocket subscribers received
    // publishes, WebSocket providers answered calls, WebSocket callers got
    // responses, and the control frames and refusals happened.
    assert!(
        total.ws_publishes_received > 0
            && total.ws_provided_answers > 0
            && total.ws_responses_received > 0,
        "{total:?}"
    );
    assert!(
        total.ws_pongs > 0
            && total.ws_close_frames > 0
            && total.ws_protocol_errors > 0
            && total.ws_handshakes_refused > 0
            && total.ws_origins_refused > 0,
        "{total:?}"
    );
    // ... and the bounds on memory and work: an unfinished opening evicted
    // at the connection limit, the opening, partial-request and
    // slow-consumer deadlines, a registration refused, topic data shed
    // for the memory budget and a connection closed for it, the per-item
    // caps, and a shutdown that failed calls, said goodbye and closed
    // drained connections.
    assert!(
        total.evictions > 0
            && total.closes_handshake > 0
            && total.closes_partial > 0
            && total.closes_slow_consumer > 0
            && total.closes_idle > 0,
        "{total:?}"
    );
    assert!(
        total.registrations_refused > 0
            && total.memory_shed_frames > 0
            && total.closes_memory > 0
            && total.cap_errors > 0
            && total.trickles > 0,
        "{total:?}"
    );
    assert!(
        total.shutdowns > 0
            && total.shutdown_failures_received > 0
            && total.goodbyes_received > 0
            && total.closes_drained > 0,
        "{total:?}"
    );
    // ... and nodes, names and domains: nodes declared and destroyed,
    // registrations made for them under expanded names, full names shared
    // (both owners warned), clients moving domain (and refused once they
    // hold something), subscribers and providers of another domain left
    // alone, WebSocket URLs declaring a node or refused.
    assert!(
        total.nodes_declared > 0
            && total.nodes_destroyed > 0
            && total.node_registrations > 0
            && total.names_expanded > 0
            && total.duplicate_node_names > 0
            && total.warnings_received > 0,
        "{total:?}"
    );
    assert!(
        total.domain_changes > 0
            && total.domain_changes_refused > 0
            && total.isolated_by_domain > 0
            && total.ws_queries > 0
            && total.ws_queries_refused > 0,
        "{total:?}"
    );
}

/// Adds one seed's counts to the total.
fn add(total: &mut rosgate_sim::Counts, c: &rosgate_sim::Counts) {
    let rosgate_sim::Counts {
        steps,
        lines_sent,
        lines_received,
        publishes_received,
        topic_bytes_shed,
        calls_forwarded,
        responses_ok,
        responses_failed,
        stale_responses,
        rejected_connections,
        closes_overflow,
        closes_stall,
        closes_by_client,
        too_long,
        ws_connections,
        ws_handshakes_refused,
        ws_origins_refused,
        ws_publishes_received,
        ws_provided_answers,
        ws_responses_received,
        ws_pongs,
        ws_close_frames,
        ws_protocol_errors,
        evictions,
        closes_handshake,
        closes_partial,
        closes_idle,
        closes_slow_consumer,
        registrations_refused,
        memory_shed_frames,
        closes_memory,
        cap_errors,
        trickles,
        shutdowns,
        shutdown_failures_received,
        goodbyes_received,
        closes_drained,
        nodes_declared,
        nodes_destroyed,
        duplicate_node_names,
        warnings_received,
        node_registrations,
        names_expanded,
        domain_changes,
        domain_changes_refused,
        isolated_by_domain,
        ws_queries,
        ws_queries_refused,
    } = c;
    total.steps += steps;
    total.lines_sent += lines_sent;
    total.lines_received += lines_received;
    total.publishes_received += publishes_received;
    total.topic_bytes_shed += topic_bytes_shed;
    total.calls_forwarded += calls_forwarded;
    total.responses_ok += responses_ok;
    total.responses_failed += responses_failed;
    total.stale_responses += stale_responses;
    total.rejected_connections += rejected_connections;
    total.closes_overflow += closes_overflow;
    total.closes_stall += closes_stall;
    total.closes_by_client += closes_by_client;
    total.too_long += too_long;
    total.ws_connections += ws_connections;
    total.ws_handshakes_refused += ws_handshakes_refused;
    total.ws_origins_refused += ws_origins_refused;
    total.ws_publishes_received += ws_publishes_received;
    total.ws_provided_answers += ws_provided_answers;
    total.ws_responses_received += ws_responses_received;
    total.ws_pongs += ws_pongs;
    total.ws_close_frames += ws_close_frames;
    total.ws_protocol_errors += ws_protocol_errors;
    total.evictions += evictions;
    total.closes_handshake += closes_handshake;
    total.closes_partial += closes_partial;
    total.closes_idle += closes_idle;
    total.closes_slow_consumer += closes_slow_consumer;
    total.registrations_refused += registrations_refused;
    total.memory_shed_frames += memory_shed_frames;
    total.closes_memory += closes_memory;
    total.cap_errors += cap_errors;
    total.trickles += trickles;
    total.shutdowns += shutdowns;
    total.shutdown_failures_received += shutdown_failures_received;
    total.goodbyes_received += goodbyes_received;
    total.closes_drained += closes_drained;
    total.nodes_declared += nodes_declared;
    total.nodes_destroyed += nodes_destroyed;
    total.duplicate_node_names += duplicate_node_names;
    total.warnings_received += warnings_received;
    total.node_registrations += node_registrations;
    total.names_expanded += names_expanded;
    total.domain_changes += domain_changes;
    total.domain_changes_refused += domain_changes_refused;
    total.isolated_by_domain += isolated_by_domain;
    total.ws_queries += ws_queries;
    total.ws_queries_refused += ws_queries_refused;
}
