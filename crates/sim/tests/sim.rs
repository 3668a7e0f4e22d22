//! Seeded simulation of the core (see `src/lib.rs`): random TCP and
//! WebSocket connects, subscribes, publishes, calls, replies, pings, close
//! frames, protocol violations, slow readers, trickled requests,
//! disconnects, clock jumps and shutdowns, nodes declared (by op or URL)
//! and destroyed, ROS names and domains, actions (goals, feedback,
//! results, cancels, requests waiting for a provider), QoS
//! (compatibility, reliability, latching, throttling, depth, peer
//! counts), outgoing encodings (cbor, png, fragment_size), Foxglove
//! sessions (channels, subscriptions, message data), requests in
//! `fragment` pieces (valid and malformed) and parameters (declared, set,
//! read, validated, watched, held by the gateway), with the model's
//! invariants checked after every hub call and every step.
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
            Ok(c) => total.add(&c),
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
    // ... and requests sent as rosbridge `fragment` pieces, reassembled
    // to the same effect as whole, and malformed ones refused.
    assert!(
        total.fragmented_sent > 0 && total.fragmented_refused > 0,
        "{total:?}"
    );
    // ... and subscribers in outgoing encodings: cbor (typed too),
    // cbor-raw, png, fragments.
    assert!(
        total.ws_cbor_received > 0
            && total.ws_cbor_typed_received > 0
            && total.ws_cbor_raw_received > 0
            && total.ws_png_received > 0
            && total.ws_fragmented_received > 0,
        "{total:?}"
    );
    // ... and Foxglove sessions: opened with the subprotocol, the typed
    // topic's channel learnt from the hub's advertise, subscribed to, its
    // message data received (exact bytes, the CDR decoded back), and
    // subscriptions withdrawn by unsubscribe and with their channel, and
    // client channels advertised and published on.
    assert!(
        total.fx_client_channels > 0
            && total.fx_client_publishes > 0
            && total.fx_client_cdr_publishes > 0
            && total.fx_client_cdr_read_as_json > 0,
        "{total:?}"
    );
    assert!(
        total.fx_sessions > 0
            && total.fx_channels_learnt > 0
            && total.fx_subscribes > 0
            && total.fx_received > 0
            && total.fx_unsubscribes > 0
            && total.fx_channels_gone > 0,
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
    // ... and actions: goals sent to servers and received, refused at
    // once and for want of a server, results, refusals and aborts
    // received, feedback, cancels (by op, by the cancel service, by the
    // gateway) owed and received, orphans and their results, deadlines,
    // messages naming no goal, servers displaced, and requests waiting for
    // a provider released or timed out.
    assert!(
        total.goals_sent > 0
            && total.goals_received > 0
            && total.goals_refused > 0
            && total.goals_no_server > 0
            && total.goal_results_received > 0
            && total.goal_refusals_received > 0
            && total.goal_aborts_received > 0
            && total.feedback_sent > 0,
        "{total:?}"
    );
    assert!(
        total.goal_cancels > 0
            && total.cancels_received > 0
            && total.goals_orphaned > 0
            && total.goal_timeouts > 0
            && total.orphan_results > 0
            && total.stale_goal_messages > 0
            && total.cancel_services > 0
            && total.actions_replaced > 0,
        "{total:?}"
    );
    assert!(
        total.waited > 0 && total.released > 0 && total.wait_timeouts > 0,
        "{total:?}"
    );
    // ... and QoS: incompatible pairs that exchanged nothing, reliable
    // subscribers warned and closed, latched messages for late
    // subscribers, throttles holding and flushing, depths dropping, peer
    // counts owed and received.
    assert!(
        total.qos_incompatible > 0
            && total.qos_skipped > 0
            && total.reliable_warnings > 0
            && total.reliable_overflows > 0
            && total.latched_delivered > 0,
        "{total:?}"
    );
    assert!(
        total.throttle_held > 0
            && total.throttle_flushes > 0
            && total.depth_dropped > 0
            && total.peer_notifications > 0
            && total.peers_received > 0,
        "{total:?}"
    );
    // ... and parameters: owners declaring (over values the gateway
    // held), setting and withdrawing them; others setting them through
    // rosapi and the node services (one by one and atomically), creating
    // and deleting held ones, refused by every rule and by both byte
    // limits (a connection's parameters, the gateway's); reads, of undeclared
    // ones too; validations sent, read, accepted, rejected, timed out and
    // failed as their owner left; parameters going with their node; events
    // published and received; requests kept to their domain; no node
    // services for the global parameters. (A declaration refused because
    // another connection's node of that name owns the table, and a change
    // refused because its owner cannot validate it now, are modelled too,
    // but too rare to assert on.)
    assert!(
        total.params_declared > 0
            && total.params_undeclared > 0
            && total.params_set_by_owner > 0
            && total.param_sets_by_others > 0
            && total.held_params_set > 0
            && total.held_params_deleted > 0
            && total.held_overrides > 0
            && total.atomic_sets > 0,
        "{total:?}"
    );
    assert!(
        total.param_sets_rejected > 0
            && total.param_undeclared_refusals > 0
            && total.param_read_only_refusals > 0
            && total.param_type_refusals > 0
            && total.param_range_refusals > 0
            && total.param_conn_byte_refusals > 0
            && total.param_held_byte_refusals > 0
            && total.param_reads > 0
            && total.param_unset_reads > 0
            && total.param_node_service_calls > 0,
        "{total:?}"
    );
    assert!(
        total.param_validations > 0
            && total.param_validations_received > 0
            && total.param_validations_accepted > 0
            && total.param_validations_rejected > 0
            && total.param_validation_timeouts > 0
            && total.param_validations_owner_gone > 0,
        "{total:?}"
    );
    assert!(
        total.params_dropped > 0
            && total.param_events > 0
            && total.param_events_received > 0
            && total.params_isolated > 0
            && total.global_not_a_node > 0,
        "{total:?}"
    );
}
