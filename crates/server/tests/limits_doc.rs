//! `docs/limits.md` must state the defaults the code uses.

use rosgate::config::*;

fn doc_rows() -> Vec<Vec<String>> {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/limits.md"))
            .expect("docs/limits.md exists");
    text.lines()
        .filter(|l| l.starts_with('|') && !l.starts_with("|---") && !l.starts_with("| limit"))
        .map(|l| {
            l.trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_string())
                .collect()
        })
        .collect()
}

#[test]
fn every_default_constant_is_documented_with_its_value() {
    let rows = doc_rows();
    let expected: [(&str, u128); 79] = [
        (
            "DEFAULT_MAX_PARAM_BYTES_PER_CONN",
            DEFAULT_MAX_PARAM_BYTES_PER_CONN as u128,
        ),
        (
            "DEFAULT_MAX_HELD_PARAM_BYTES",
            DEFAULT_MAX_HELD_PARAM_BYTES as u128,
        ),
        (
            "LATCH_BYTES_PER_PUBLISHER",
            rosgate_core::hub::LATCH_BYTES_PER_PUBLISHER as u128,
        ),
        (
            "LATCH_BYTES_TOTAL",
            rosgate_core::hub::LATCH_BYTES_TOTAL as u128,
        ),
        ("MAX_QOS_DEPTH", rosgate_wire::qos::MAX_QOS_DEPTH as u128),
        (
            "MIN_THROTTLE_MS",
            rosgate_core::hub::MIN_THROTTLE_MS as u128,
        ),
        (
            "MAX_PARAMS_PER_NODE",
            rosgate_core::params::MAX_PARAMS_PER_NODE as u128,
        ),
        (
            "MAX_HELD_PARAMS",
            rosgate_core::params::MAX_HELD_PARAMS as u128,
        ),
        (
            "MAX_PARAM_VALUE_BYTES",
            rosgate_core::params::MAX_PARAM_VALUE_BYTES as u128,
        ),
        (
            "MAX_PARAM_NAME_CHARS",
            rosgate_core::hub::MAX_PARAM_NAME_CHARS as u128,
        ),
        (
            "DEFAULT_MAX_GOALS_PER_CONN",
            DEFAULT_MAX_GOALS_PER_CONN as u128,
        ),
        (
            "DEFAULT_MAX_GOALS_PER_SERVER",
            DEFAULT_MAX_GOALS_PER_SERVER as u128,
        ),
        ("DEFAULT_GOAL_TIMEOUT_MS", DEFAULT_GOAL_TIMEOUT_MS as u128),
        (
            "DEFAULT_MAX_ACTIONS_PER_CONN",
            DEFAULT_MAX_ACTIONS_PER_CONN as u128,
        ),
        (
            "ORPHAN_TIMEOUT",
            rosgate_core::calls::ORPHAN_TIMEOUT.as_millis(),
        ),
        (
            "REGISTRATION_WORK",
            rosgate_core::limits::REGISTRATION_WORK as u128,
        ),
        (
            "SHED_ENTRIES_PER_PASS",
            rosgate_core::limits::SHED_ENTRIES_PER_PASS as u128,
        ),
        (
            "MAX_NODES_PER_CONN",
            rosgate_core::hub::MAX_NODES_PER_CONN as u128,
        ),
        (
            "MAX_REMAP_RULES",
            rosgate_wire::decode::MAX_REMAP_RULES as u128,
        ),
        (
            "MAX_NAME_CHARS",
            rosgate_wire::names::MAX_NAME_CHARS as u128,
        ),
        (
            "MAX_TOPIC_TYPE_BYTES",
            rosgate_core::registry::MAX_TOPIC_TYPE_BYTES as u128,
        ),
        ("MAX_LIST_ITEMS", rosgate_core::hub::MAX_LIST_ITEMS as u128),
        ("MAX_LIST_SCAN", rosgate_core::hub::MAX_LIST_SCAN as u128),
        (
            "MAX_GRAPH_EVENTS",
            rosgate_core::hub::MAX_GRAPH_EVENTS as u128,
        ),
        (
            "CONNECTED_CLIENTS_INTERVAL",
            rosgate_core::hub::CONNECTED_CLIENTS_INTERVAL.as_millis(),
        ),
        ("ROSOUT_PER_SEC", rosgate_core::hub::ROSOUT_PER_SEC as u128),
        ("MAX_PARAMS", rosgate_wire::query::MAX_PARAMS as u128),
        ("READ_MIN_QUANTUM", READ_MIN_QUANTUM as u128),
        ("READ_TURN_WORK_MAX", READ_TURN_WORK_MAX as u128),
        ("READ_TURN_WORK", READ_TURN_WORK as u128),
        ("READ_CHUNK_BYTES", READ_CHUNK_BYTES as u128),
        ("UNSENT_LOWAT_BYTES", UNSENT_LOWAT_BYTES as u128),
        ("TLS_WRITE_CHUNK_BYTES", TLS_WRITE_CHUNK_BYTES as u128),
        ("TLS_HANDSHAKES_PER_TURN", TLS_HANDSHAKES_PER_TURN as u128),
        ("MMAP_THRESHOLD", MMAP_THRESHOLD as u128),
        ("WRITE_TURN_CALLS", WRITE_TURN_CALLS as u128),
        ("FREE_TURN_BUDGET", FREE_TURN_BUDGET as u128),
        ("ENTRY_COST", rosgate_core::out::ENTRY_COST as u128),
        ("DEFAULT_MAX_MEMORY_BYTES", DEFAULT_MAX_MEMORY_BYTES as u128),
        (
            "DEFAULT_HANDSHAKE_TIMEOUT_MS",
            DEFAULT_HANDSHAKE_TIMEOUT_MS as u128,
        ),
        (
            "DEFAULT_PARTIAL_TIMEOUT_MS",
            DEFAULT_PARTIAL_TIMEOUT_MS as u128,
        ),
        ("DEFAULT_IDLE_TIMEOUT_MS", DEFAULT_IDLE_TIMEOUT_MS as u128),
        (
            "DEFAULT_CONTROL_SOFT_BYTES",
            DEFAULT_CONTROL_SOFT_BYTES as u128,
        ),
        ("DEFAULT_CONTROL_SOFT_MS", DEFAULT_CONTROL_SOFT_MS as u128),
        (
            "DEFAULT_MAX_SUBSCRIPTIONS_PER_CONN",
            DEFAULT_MAX_SUBSCRIPTIONS_PER_CONN as u128,
        ),
        (
            "DEFAULT_MAX_ADVERTISEMENTS_PER_CONN",
            DEFAULT_MAX_ADVERTISEMENTS_PER_CONN as u128,
        ),
        (
            "DEFAULT_MAX_SERVICES_PER_CONN",
            DEFAULT_MAX_SERVICES_PER_CONN as u128,
        ),
        (
            "DEFAULT_MAX_CONNECTIONS_PER_IP",
            DEFAULT_MAX_CONNECTIONS_PER_IP as u128,
        ),
        ("READ_TURN_BUDGET_BYTES", READ_TURN_BUDGET_BYTES as u128),
        ("WRITE_TURN_BUDGET_BYTES", WRITE_TURN_BUDGET_BYTES as u128),
        ("EXPIRE_BUDGET", EXPIRE_BUDGET as u128),
        (
            "DEFAULT_SHUTDOWN_GRACE_MS",
            DEFAULT_SHUTDOWN_GRACE_MS as u128,
        ),
        ("MAX_ID_BYTES", rosgate_wire::decode::MAX_ID_BYTES as u128),
        (
            "MAX_NAME_BYTES",
            rosgate_wire::decode::MAX_NAME_BYTES as u128,
        ),
        ("INBOX_CAPACITY", INBOX_CAPACITY as u128),
        ("INBOX_BUDGET", INBOX_BUDGET as u128),
        ("TRIM_INTERVAL", TRIM_INTERVAL.as_millis()),
        ("LISTEN_BACKLOG", LISTEN_BACKLOG as u128),
        ("DEFAULT_MAX_LINE_BYTES", DEFAULT_MAX_LINE_BYTES as u128),
        ("DEFAULT_MAX_QUEUE_BYTES", DEFAULT_MAX_QUEUE_BYTES as u128),
        (
            "DEFAULT_MAX_CONTROL_BYTES",
            DEFAULT_MAX_CONTROL_BYTES as u128,
        ),
        ("DEFAULT_WRITE_STALL_MS", DEFAULT_WRITE_STALL_MS as u128),
        ("DEFAULT_MAX_CONNECTIONS", DEFAULT_MAX_CONNECTIONS as u128),
        (
            "DEFAULT_MAX_CALLS_PER_CONN",
            DEFAULT_MAX_CALLS_PER_CONN as u128,
        ),
        ("DEFAULT_CALL_TIMEOUT_MS", DEFAULT_CALL_TIMEOUT_MS as u128),
        (
            "DEFAULT_MAX_CALL_TIMEOUT_MS",
            DEFAULT_MAX_CALL_TIMEOUT_MS as u128,
        ),
        ("MAX_JSON_DEPTH", MAX_JSON_DEPTH as u128),
        ("READ_BUDGET_BYTES", READ_BUDGET_BYTES as u128),
        ("WRITE_BUDGET_BYTES", WRITE_BUDGET_BYTES as u128),
        ("TIMER_TICK_MS", TIMER_TICK_MS as u128),
        ("CONN_LOGS_PER_SEC", CONN_LOGS_PER_SEC as u128),
        ("RECENT_CLOSES", RECENT_CLOSES as u128),
        ("MAX_TOKENS", rosgate_core::access::MAX_TOKENS as u128),
        (
            "MIN_TOKEN_BYTES",
            rosgate_core::access::MIN_TOKEN_BYTES as u128,
        ),
        (
            "MAX_TOKEN_BYTES",
            rosgate_core::access::MAX_TOKEN_BYTES as u128,
        ),
        ("MAX_ROLES", rosgate_core::access::MAX_ROLES as u128),
        ("MAX_GLOBS", rosgate_core::access::MAX_GLOBS as u128),
        (
            "MAX_GLOB_BYTES",
            rosgate_core::access::MAX_GLOB_BYTES as u128,
        ),
        (
            "DECISION_CACHE",
            rosgate_core::access::DECISION_CACHE as u128,
        ),
    ];
    for (name, value) in expected {
        let row = rows
            .iter()
            .find(|r| {
                r.get(4).is_some_and(|c| {
                    c == &format!("`{name}`") || c.starts_with(&format!("`{name}` ("))
                })
            })
            .unwrap_or_else(|| panic!("docs/limits.md has no row for {name}"));
        assert_eq!(
            row[1],
            value.to_string(),
            "default of {name} in docs/limits.md"
        );
    }
    let backoff = rows
        .iter()
        .find(|r| r[4].contains("ACCEPT_BACKOFF_MIN_MS"))
        .expect("accept back-off row");
    assert_eq!(
        backoff[1],
        format!("{ACCEPT_BACKOFF_MIN_MS} to {ACCEPT_BACKOFF_MAX_MS}")
    );
    let keep = rows
        .iter()
        .find(|r| r[4].contains("KEEP_CAPACITY"))
        .expect("keep-capacity row");
    assert_eq!(keep[1], rosgate_wire::line::KEEP_CAPACITY.to_string());
}

#[test]
fn every_flag_in_the_table_exists_in_the_usage_text() {
    let usage = std::process::Command::new(env!("CARGO_BIN_EXE_rosgate"))
        .arg("--help")
        .output()
        .expect("run rosgate --help");
    let usage = String::from_utf8_lossy(&usage.stdout);
    for row in doc_rows() {
        let flag = row[3].trim_matches('`');
        if flag.starts_with("--") {
            assert!(
                usage.contains(flag),
                "{flag} is documented but not in --help"
            );
        }
    }
}
