//! `docs/limits.md` must list every limit in the code, with the default the
//! code uses.
//!
//! - [`every_limit_constant_in_the_source_is_documented`] scans the `src/`
//!   of every crate under `crates/` and `tools/` (directories, not a list
//!   of files, so a crate or module that moves is still scanned) for
//!   `const NAME: ... =` items whose name says they bound something
//!   ([`looks_like_a_limit`]) and requires each to be named in the
//!   `constant` column of a row, unless [`NOT_LIMITS`] says why it is not a
//!   limit (or, in a dev-only crate, [`DEV_ONLY_CONSTANTS`]); where a row
//!   names only this constant and its default is an integer, the default
//!   must be the constant's value when its expression is integer arithmetic
//!   over literals and other constants (`64 * 1024`, `4 << 20`,
//!   `parse::MAX_DEFINITION_BYTES as u64`). Every constant the table names
//!   must exist, in the file its row names.
//! - [`every_default_constant_is_documented_with_its_value`] checks the
//!   values of the constants the scan cannot evaluate (durations, re-exports,
//!   computed ones) through the crates' public items.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rosgate::config::*;

/// The rows of the page's limit tables (eight columns: limit, default,
/// unit, flag, constant, behaviour, counter, test); other tables, such as
/// the policy labels, are not limits.
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
                .collect::<Vec<String>>()
        })
        .filter(|r| r.len() >= 8)
        .collect()
}

#[test]
fn every_default_constant_is_documented_with_its_value() {
    let rows = doc_rows();
    let expected: [(&str, u128); 92] = [
        (
            "DEFAULT_AUTH_FAILURE_BUDGET",
            DEFAULT_AUTH_FAILURE_BUDGET as u128,
        ),
        (
            "AUTH_QUIET_MS",
            rosgate_core::auth_budget::AUTH_QUIET_MS as u128,
        ),
        (
            "AUTH_DELAY_FIRST_MS",
            rosgate_core::auth_budget::AUTH_DELAY_FIRST_MS as u128,
        ),
        (
            "AUTH_DELAY_MAX_MS",
            rosgate_core::auth_budget::AUTH_DELAY_MAX_MS as u128,
        ),
        (
            "MAX_AUTH_ADDRESSES",
            rosgate_core::auth_budget::MAX_AUTH_ADDRESSES as u128,
        ),
        ("MAX_AUTH_HELD", rosgate_core::hub::MAX_AUTH_HELD as u128),
        (
            "AUTH_RELEASES_PER_TURN",
            rosgate_core::hub::AUTH_RELEASES_PER_TURN as u128,
        ),
        (
            "MAX_CONFIG_FILE_BYTES",
            rosgate::files::MAX_CONFIG_FILE_BYTES as u128,
        ),
        ("MAX_YAML_ALIASES", rosgate::files::MAX_YAML_ALIASES as u128),
        ("MAX_YAML_NODES", rosgate::files::MAX_YAML_NODES as u128),
        (
            "MAX_YAML_TEXT_BYTES",
            rosgate::files::MAX_YAML_TEXT_BYTES as u128,
        ),
        ("MAX_YAML_DEPTH", rosgate::files::MAX_YAML_DEPTH as u128),
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
            "DEFAULT_FRAGMENT_TIMEOUT_MS",
            DEFAULT_FRAGMENT_TIMEOUT_MS as u128,
        ),
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

/// Constants whose names look like limits but that bound nothing a client
/// or an operator meets, each with the reason. A name here must exist in
/// the source and must not be documented (else it belongs in the table).
const NOT_LIMITS: &[(&str, &str)] = &[
    (
        "IDLE_QUEUE_CAPACITY",
        "when an output queue gives its buffer back (memory per idle connection), not a bound",
    ),
    // The rmw_zenoh shell's names for the ROS 2 link's own limits (one
    // owner: the link's constants have the rows).
    (
        "MAX_ROS_ENTITIES",
        "the shell's name for the link's MAX_ENTITIES",
    ),
    (
        "FETCH_TIMEOUT_SECS",
        "the shell's name for the link's FETCH_TIMEOUT",
    ),
    ("MAX_ROS_NODES", "the shell's name for the link's MAX_NODES"),
    (
        "MAX_ROS_ENTITIES_PER_NODE",
        "the shell's name for the link's MAX_ENTITIES_PER_NODE",
    ),
    // Bytes the memory ledger counts per table entry: accounting of what
    // is held, not a bound on it (docs/limits.md gives them in prose under
    // "The memory budget, in numbers"; `ENTRY_COST`, which the queue limit
    // also counts, has a row).
    ("CALL_OVERHEAD", "ledger cost per call"),
    ("WAITING_OVERHEAD", "ledger cost per waiting call"),
    ("NODE_OVERHEAD", "ledger cost per node"),
    ("PARAM_OVERHEAD", "ledger cost per parameter"),
    ("TOPIC_OVERHEAD", "ledger cost per topic"),
    ("MEMBER_OVERHEAD", "ledger cost per registration key"),
    ("SERVICE_OVERHEAD", "ledger cost per service"),
    (
        "BRIDGE_MSG_OVERHEAD",
        "ledger cost per message of the bridge outbox",
    ),
    (
        "REMOTE_ITEM_COST",
        "ledger cost per item of another gateway's graph",
    ),
    (
        "TABLE_ENTRY_COST",
        "ledger cost per entry of the federation's tables",
    ),
    ("ENTITY_COST", "ledger cost per ROS 2 entity remembered"),
    (
        "TF_SAMPLE_COST",
        "ledger cost per TF sample kept (crates/core/src/tf/buffer.rs)",
    ),
    (
        "TF_FRAME_COST",
        "ledger cost per TF frame kept beside its names (crates/core/src/tf/buffer.rs)",
    ),
    (
        "PIECE_OVERHEAD",
        "ledger cost per fragment piece held (crates/wire/src/fragment.rs)",
    ),
    (
        "MESSAGE_OVERHEAD",
        "ledger cost per fragmented message held (crates/wire/src/fragment.rs)",
    ),
    // `rosgate demo`'s starting parameter values, which any client may
    // change: content, not bounds.
    ("DEFAULT_RATE_HZ", "the demo talker's initial publish_rate"),
    ("DEFAULT_GREETING", "the demo talker's initial greeting"),
    // Sizes fixed by a wire format, not chosen by rosgate.
    ("HEADER_LEN", "the CDR encapsulation header (4 bytes)"),
    (
        "MAX_FRAME_HEADER",
        "the longest WebSocket frame header (RFC 6455 §5.2)",
    ),
    ("ATTACHMENT_LEN", "rmw_zenoh's attachment layout"),
    (
        "LEGACY_ATTACHMENT_LEN",
        "rmw_zenoh's older attachment layout",
    ),
    (
        "DEFAULT_DEPTH",
        "the depth rmw_zenoh substitutes for 0 (keep all)",
    ),
    (
        "FRAMING_BYTES",
        "the load generator's bytes around a payload's digits",
    ),
    // Addresses, not limits.
    ("DEFAULT_LISTEN", "the TCP listen address"),
    ("DEFAULT_WS_LISTEN", "the WebSocket listen address"),
    (
        "DEFAULT_FOXGLOVE_LISTEN",
        "the Foxglove WebSocket protocol's listen address",
    ),
    ("DEFAULT_URL", "where the CLI connects by default"),
    // Tuning of a data structure, invisible from outside.
    (
        "COALESCE_BYTES",
        "size at which a new control buffer is started",
    ),
    (
        "EXACT_SCAN_MAX",
        "timer entries up to which the earliest deadline is recomputed exactly",
    ),
];

/// Crates whose constants bound nothing in the gateway or in a tool a user
/// runs: the seeded simulation's model keeps its own copies of documented
/// numbers (the simulation checks the hub against them), and the
/// benchmarks size their inputs. Their limit-like constants are listed in
/// [`DEV_ONLY_CONSTANTS`] instead of the table.
const DEV_ONLY_CRATES: &[&str] = &["crates/sim", "crates/bench"];

/// Limit-like constants of the dev-only crates, each with what it is. A
/// name here must exist in a dev-only crate.
const DEV_ONLY_CONSTANTS: &[(&str, &str)] = &[
    ("MAX_CLIENTS", "client slots the simulation drives"),
    (
        "PUB_DEPTH",
        "the simulated transient local ROS 2 publisher's QoS depth",
    ),
    ("MAX_ACTIONS", "actions one fuzz input decodes to"),
    ("MAX_CHARS", "the model's copy of MAX_NAME_CHARS"),
    ("NODE_BYTES", "the model's copy of the ledger cost per node"),
    (
        "RULE_BYTES",
        "the model's copy of the ledger cost per remap rule",
    ),
    (
        "VALUE_MAX_DEPTH",
        "serde_json's recursion limit, for the scanner parity check",
    ),
    ("CALL_BYTES", "the model's copy of the ledger cost per call"),
    (
        "WAITING_BYTES",
        "the model's copy of the ledger cost per waiting call",
    ),
    (
        "TOPIC_BYTES",
        "the model's copy of the ledger cost per topic",
    ),
    (
        "MEMBER_BYTES",
        "the model's copy of the ledger cost per registration key",
    ),
    (
        "SERVICE_BYTES",
        "the model's copy of the ledger cost per service",
    ),
    ("ENTRY_BYTES", "the model's copy of ENTRY_COST"),
    (
        "PARAM_BYTES",
        "the model's copy of the ledger cost per parameter",
    ),
    (
        "DESCRIPTOR_BYTES",
        "the model's copy of the ledger cost per descriptor",
    ),
    ("MAX_NAME_CHARS", "the model's copy of MAX_PARAM_NAME_CHARS"),
    ("MAX_DOMAIN", "the model's copy of MAX_DOMAIN"),
    ("SHOW_CHARS", "how much of a line a violation quotes"),
    (
        "MAX_FUZZ_STEPS",
        "the most ROS 2 link steps one fuzz input drives",
    ),
    ("TIMEOUTS", "per-call `timeout` texts the simulation sends"),
];

/// Names in the table's `constant` column that are not constants of ours.
const NOT_OURS: &[&str] = &["TCP_NOTSENT_LOWAT"];

/// Whether a constant's name says it bounds something.
fn looks_like_a_limit(name: &str) -> bool {
    const PREFIXES: &[&str] = &["MAX_", "MIN_", "DEFAULT_"];
    const SUFFIXES: &[&str] = &[
        "_MAX",
        "_MIN",
        "_LIMIT",
        "_BYTES",
        "_MS",
        "_SECS",
        "_HOURS",
        "_TIMEOUT",
        "_CAPACITY",
        "_BUDGET",
        "_SLOTS",
        "_DEPTH",
        "_LEN",
        "_CHARS",
        "_ITEMS",
        "_INTERVAL",
        "_OVERHEAD",
        "_COST",
        "_THRESHOLD",
        "_SCAN",
        "_QUANTUM",
        "_BACKLOG",
        "_WORK",
        "_TURN",
        "_PASS",
        "_SEC",
    ];
    PREFIXES.iter().any(|p| name.starts_with(p))
        || SUFFIXES.iter().any(|s| name.ends_with(s))
        || name.contains("_PER_")
        || name.contains("TIMEOUT")
}

/// A `const` item of the source: its name, its expression's text, and
/// where it is.
struct Item {
    name: String,
    expr: String,
    /// `crates/core/src/limits.rs:12`.
    at: String,
    /// `crates/core`.
    krate: String,
}

impl Item {
    fn file(&self) -> &str {
        self.at.rsplit_once(':').map_or(&self.at, |(f, _)| f)
    }

    fn dev_only(&self) -> bool {
        DEV_ONLY_CRATES.contains(&self.krate.as_str())
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            // Unit tests live in `tests/` directories (`hub/tests/`).
            if p.file_name().is_some_and(|n| n != "tests") {
                rust_files(&p, out);
            }
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The `const` items of one file of crate `krate`, up to its inline
/// `#[cfg(test)] mod`.
fn const_items(krate: &str, path: &Path, text: &str) -> Vec<Item> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let t = lines[i].trim_start();
        if t == "#[cfg(test)]"
            && lines[i + 1..]
                .iter()
                .find(|l| !l.trim().is_empty())
                .is_some_and(|l| {
                    // An inline test module ends the scan; a declared one
                    // (`mod tests;`) lives in its own file.
                    let l = l.trim();
                    l.starts_with("mod ") && !l.ends_with(';')
                })
        {
            break;
        }
        let rest = t
            .strip_prefix("pub ")
            .or_else(|| t.strip_prefix("pub(crate) "))
            .or_else(|| t.strip_prefix("pub(super) "))
            .unwrap_or(t);
        if let Some(decl) = rest.strip_prefix("const ") {
            let name: String = decl
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                .collect();
            if !name.is_empty() && decl[name.len()..].trim_start().starts_with(':') {
                // The expression may continue on the next lines.
                let mut whole = decl.to_string();
                let mut j = i;
                while !whole.contains(';') && j + 1 < lines.len() {
                    j += 1;
                    whole.push(' ');
                    whole.push_str(lines[j].trim());
                }
                let expr = whole
                    .split_once('=')
                    .map(|(_, e)| e.split(';').next().unwrap_or("").trim().to_string())
                    .unwrap_or_default();
                out.push(Item {
                    name,
                    expr,
                    at: format!("{}:{}", path.display(), i + 1),
                    krate: krate.to_string(),
                });
            }
        }
        i += 1;
    }
    out
}

/// The value of integer arithmetic (`64 * 1024`, `4 << 20`, `10_000`,
/// `224 + MAX_TOPIC_TYPE_BYTES`, `parse::MAX_DEFINITION_BYTES as u64`),
/// with Rust's precedence (`*` before `+` before `<<`), other constants
/// read from `env` by their last path segment; `None` for anything else.
fn eval(expr: &str, env: &BTreeMap<String, u128>) -> Option<u128> {
    const CASTS: &[&str] = &[
        " as usize",
        " as u128",
        " as u64",
        " as u32",
        " as u16",
        " as u8",
    ];
    let mut expr = expr.to_string();
    for cast in CASTS {
        expr = expr.replace(cast, "");
    }
    let factor = |f: &str| -> Option<u128> {
        let f = f.trim();
        if f.starts_with(|c: char| c.is_ascii_digit()) {
            // `10_000`, `64u64`.
            let digits = f.replace('_', "");
            let digits = ["usize", "u128", "u64", "u32", "u16", "u8"]
                .iter()
                .find_map(|t| digits.strip_suffix(t))
                .unwrap_or(&digits);
            digits.parse().ok()
        } else {
            let name = f.rsplit("::").next()?;
            env.get(name).copied()
        }
    };
    let product = |p: &str| -> Option<u128> {
        p.split('*')
            .try_fold(1u128, |acc, f| acc.checked_mul(factor(f)?))
    };
    let sum = |p: &str| -> Option<u128> {
        p.split('+')
            .try_fold(0u128, |acc, t| acc.checked_add(product(t)?))
    };
    let mut parts = expr.split("<<");
    let mut v = sum(parts.next()?)?;
    for shift in parts {
        v = v.checked_shl(u32::try_from(sum(shift)?).ok()?)?;
    }
    Some(v)
}

/// The values of the constants `eval` can read, each through the others;
/// a name defined twice (in different crates or modules) is left out, so
/// that a reference to it is never read as the wrong one.
fn values(items: &[Item]) -> BTreeMap<String, u128> {
    let mut count: BTreeMap<&str, usize> = BTreeMap::new();
    for i in items {
        *count.entry(i.name.as_str()).or_default() += 1;
    }
    let mut env = BTreeMap::new();
    loop {
        let before = env.len();
        for i in items {
            if count[i.name.as_str()] == 1 && !env.contains_key(&i.name) {
                if let Some(v) = eval(&i.expr, &env) {
                    env.insert(i.name.clone(), v);
                }
            }
        }
        if env.len() == before {
            return env;
        }
    }
}

/// Backquoted constant names in a cell.
fn names_in(cell: &str) -> Vec<&str> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .filter(|n| {
            !n.is_empty()
                && n.chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        })
        .collect()
}

/// The source files of every crate under `crates/` and `tools/`, each with
/// its crate's directory (`crates/core`), sorted.
fn crate_sources(root: &Path) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    for parent in ["crates", "tools"] {
        let Ok(entries) = std::fs::read_dir(root.join(parent)) else {
            continue;
        };
        for e in entries.flatten() {
            let src = e.path().join("src");
            if !src.is_dir() {
                continue;
            }
            let krate = format!("{parent}/{}", e.file_name().to_string_lossy());
            let mut files = Vec::new();
            rust_files(&src, &mut files);
            out.extend(files.into_iter().map(|f| (krate.clone(), f)));
        }
    }
    out.sort();
    out
}

#[test]
fn every_limit_constant_in_the_source_is_documented() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let files = crate_sources(&root);
    let mut items = Vec::new();
    for (krate, f) in &files {
        let text = std::fs::read_to_string(f).expect("read source");
        items.extend(const_items(
            krate,
            f.strip_prefix(&root).unwrap_or(f),
            &text,
        ));
    }
    // The scan reaches every layer, the ROS 2 and Zenoh crates and the
    // tools included.
    for (name, krate) in [
        ("MAX_HEADERS", "crates/wire"),
        ("DEFAULT_MAX_LINE_BYTES", "crates/core"),
        ("READ_BUDGET_BYTES", "crates/server"),
        ("MAX_KEY_LEN", "crates/ros2"),
        ("MAX_ENCODED_BYTES", "crates/ros2"),
        ("INBOX_BYTES", ""),
        ("MAX_ROS_ENTITIES", ""),
        ("MAX_CONNECTING", "tools/rosgate-load"),
    ] {
        assert!(
            items
                .iter()
                .any(|i| i.name == name && i.krate.starts_with(krate)),
            "the scan finds {name} in {krate}"
        );
    }
    let env = values(&items);
    // Rows by the constants their `constant` column names.
    let rows = doc_rows();
    let mut documented: BTreeMap<&str, Vec<&Vec<String>>> = BTreeMap::new();
    for r in &rows {
        for n in r.get(4).map_or(vec![], |c| names_in(c)) {
            documented.entry(n).or_default().push(r);
        }
    }
    let mut missing = Vec::new();
    let mut wrong = Vec::new();
    for item in items.iter().filter(|i| looks_like_a_limit(&i.name)) {
        if item.dev_only() {
            if !DEV_ONLY_CONSTANTS.iter().any(|(n, _)| *n == item.name) {
                missing.push(format!(
                    "{} ({}): a dev-only crate's; add it to DEV_ONLY_CONSTANTS",
                    item.name, item.at
                ));
            }
            continue;
        }
        if NOT_LIMITS.iter().any(|(n, _)| *n == item.name) {
            continue;
        }
        let Some(rows) = documented.get(item.name.as_str()) else {
            missing.push(format!("{} ({})", item.name, item.at));
            continue;
        };
        let Some(value) = eval(&item.expr, &env) else {
            continue;
        };
        for row in rows.iter().filter(|r| names_in(&r[4]).len() == 1) {
            if let Ok(doc) = row[1].parse::<u128>() {
                if doc != value {
                    wrong.push(format!(
                        "{} = {value} ({}), docs/limits.md says {doc}",
                        item.name, item.at
                    ));
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "limits in the code that docs/limits.md does not name in its constant column \
         (add a row, or add them to NOT_LIMITS with the reason):\n{}",
        missing.join("\n")
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // The table names only what exists, where it says: a row that names
    // one constant and a file, `NAME` (crates/x/src/y.rs), must find it
    // there (a moved constant or file moves its row's path too).
    let mut stale = Vec::new();
    for r in &rows {
        let names = names_in(&r[4]);
        for n in &names {
            if !NOT_OURS.contains(n) && !items.iter().any(|i| i.name == *n) {
                stale.push(format!("{n}: no such constant in the source"));
            }
        }
        if let ([n], Some((_, rest))) = (names.as_slice(), r[4].split_once("` (")) {
            let file = rest.split([')', ',', ';']).next().unwrap_or("").trim();
            if file.ends_with(".rs") && !items.iter().any(|i| i.name == *n && i.file() == file) {
                stale.push(format!("{n}: not defined in {file}"));
            }
        }
    }
    assert!(
        stale.is_empty(),
        "docs/limits.md names constants that are not where it says:\n{}",
        stale.join("\n")
    );
    // The allow-lists stay true: every name exists and is not a limit row.
    for (name, why) in NOT_LIMITS {
        assert!(
            items.iter().any(|i| i.name == *name && !i.dev_only()),
            "NOT_LIMITS names {name} ({why}), which is no longer in the source"
        );
        assert!(
            !documented.contains_key(name),
            "{name} is documented as a limit: remove it from NOT_LIMITS"
        );
    }
    for (name, why) in DEV_ONLY_CONSTANTS {
        assert!(
            items.iter().any(|i| i.name == *name && i.dev_only()),
            "DEV_ONLY_CONSTANTS names {name} ({why}), which no dev-only crate has"
        );
    }
}

#[test]
fn the_expression_evaluator_reads_integer_arithmetic_only() {
    let env = BTreeMap::from([("MAX_TOPIC_TYPE_BYTES".to_string(), 256)]);
    assert_eq!(eval("64 * 1024", &env), Some(65536));
    assert_eq!(eval("4 << 20", &env), Some(4 << 20));
    assert_eq!(eval("10_000", &env), Some(10_000));
    assert_eq!(eval("16 * 1024 * 1024", &env), Some(16 << 20));
    assert_eq!(eval("5 + 5 + 5 + 6 + 2", &env), Some(23));
    assert_eq!(eval("1 + 1 << 4", &env), Some(32), "`+` binds tighter");
    assert_eq!(eval("224 + MAX_TOPIC_TYPE_BYTES", &env), Some(480));
    assert_eq!(
        eval("registry::MAX_TOPIC_TYPE_BYTES as u64", &env),
        Some(256)
    );
    assert_eq!(eval("64u64", &env), Some(64));
    assert_eq!(eval("Duration::from_secs(1)", &env), None);
    assert_eq!(eval("parse::MAX_DEFINITION_BYTES as u64", &env), None);
    assert_eq!(eval("UNKNOWN + 1", &env), None);
}
