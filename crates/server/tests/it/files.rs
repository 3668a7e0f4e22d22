//! Start-up files within bounds (`crates/server/src/files.rs`,
//! docs/limits.md): a file past the size cap or a YAML file that would
//! expand past its limits stops start-up at once, with a message naming
//! the file and the limit, before anything is bound.

use std::time::{Duration, Instant};

use crate::support::*;

/// Nine levels of ten aliases each under a node's parameters: 700 bytes
/// that yaml-rust2's loader would expand into 10^9 strings (it took 2 GiB
/// in 3 s, then the process aborted).
fn billion_laughs(top: &str) -> String {
    let mut t = format!("{top}\n    a0: &a0 \"lol\"\n");
    for i in 1..10 {
        let refs: Vec<String> = (0..10).map(|_| format!("*a{}", i - 1)).collect();
        t.push_str(&format!("    a{i}: &a{i} [{}]\n", refs.join(",")));
    }
    t
}

/// 1 MiB and one byte of text that would be valid but for its size.
fn oversize(line: &str) -> Vec<u8> {
    let mut v = Vec::new();
    while v.len() <= 1024 * 1024 {
        v.extend_from_slice(line.as_bytes());
    }
    v
}

/// Runs the gateway with `flags`; it must exit 2 within a few seconds,
/// bind nothing and name every string of `want` on stderr.
fn refused(flags: &[&str], want: &[&str]) {
    let mut args = vec!["--listen", "127.0.0.1:0", "--ws-listen", "127.0.0.1:0"];
    args.extend_from_slice(flags);
    let started = Instant::now();
    let out = run_to_exit(&args, &[], Duration::from_secs(10));
    let took = started.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{flags:?}: {err}");
    assert!(took < Duration::from_secs(5), "{flags:?} took {took:?}");
    assert!(!err.contains("listening on"), "{flags:?}: {err}");
    for w in want {
        assert!(err.contains(w), "{flags:?}: {w:?} not in {err:?}");
    }
}

#[test]
fn a_billion_laughs_params_file_is_refused_at_once_naming_the_file_and_the_limit() {
    let f = TempFile::new(
        "params.yaml",
        billion_laughs("talker:\n  ros__parameters:").as_bytes(),
    );
    assert!(std::fs::metadata(f.path()).expect("stat").len() < 800);
    refused(
        &["--params", f.path()],
        &["--params", f.path(), "1048576 nodes", "MAX_YAML_NODES"],
    );
}

#[test]
fn a_billion_laughs_roles_file_is_refused_too() {
    let tokens = TempFile::new("tokens.txt", b"operator 0123456789abcdef0123456789abcdef\n");
    let roles = TempFile::new(
        "roles.yaml",
        billion_laughs("operator:\n  publish: ['/a']\n  subscribe:").as_bytes(),
    );
    refused(
        &["--auth-tokens", tokens.path(), "--auth-roles", roles.path()],
        &["--auth-roles", roles.path(), "MAX_YAML_NODES"],
    );
}

#[test]
fn oversize_start_up_files_are_refused_naming_the_file_and_the_limit() {
    let limit = "larger than 1048576 bytes (MAX_CONFIG_FILE_BYTES)";
    let tokens = TempFile::new("tokens.txt", oversize("# a comment line\n"));
    refused(
        &["--auth-tokens", tokens.path()],
        &["--auth-tokens", tokens.path(), limit],
    );
    let params = TempFile::new("params.yaml", oversize("# a comment line\n"));
    refused(&["--params", params.path()], &[params.path(), limit]);
    let cert = TempFile::new("cert.pem", oversize("# not pem\n"));
    let key = TempFile::new("key.pem", b"");
    refused(
        &["--tls-cert", cert.path(), "--tls-key", key.path()],
        &["--tls-cert", cert.path(), limit],
    );
    let zenoh = TempFile::new("zenoh.json5", oversize("// a comment line\n"));
    refused(
        &["--zenoh-config", zenoh.path()],
        &["--zenoh-config", zenoh.path(), limit],
    );
}

#[test]
fn a_params_file_that_nests_too_deep_is_refused() {
    let deep = format!(
        "talker:\n  ros__parameters:\n    a: {}{}\n",
        "[".repeat(200),
        "]".repeat(200)
    );
    let f = TempFile::new("params.yaml", deep.as_bytes());
    refused(&["--params", f.path()], &[f.path(), "MAX_YAML_DEPTH"]);
}
