//! Command line, startup and shutdown.

use crate::support::*;
use std::time::{Duration, Instant};

const FLAGS: &[&str] = &[
    "--listen",
    "--max-line-bytes",
    "--max-queue-bytes",
    "--max-control-bytes",
    "--write-stall-ms",
    "--max-connections",
    "--call-timeout-ms",
    "--max-call-timeout-ms",
    "--max-calls-per-conn",
    "--log-level",
    "--help",
    "--version",
];

#[test]
fn help_prints_usage_to_stdout_and_exits_zero() {
    let out = run(&["--help"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    let missing: Vec<&&str> = FLAGS.iter().filter(|f| !text.contains(**f)).collect();
    assert!(
        missing.is_empty(),
        "usage does not mention {missing:?}:\n{text}"
    );
}

#[test]
fn version_prints_name_and_version() {
    let out = run(&["--version"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        text.trim(),
        format!("rosgate {}", env!("CARGO_PKG_VERSION")),
        "stdout: {text:?}"
    );
}

#[test]
fn unknown_flags_and_bad_values_exit_2_with_a_message() {
    let cases: &[&[&str]] = &[
        &["--bogus"],
        &["--listen", "127.0.0.1:0", "--no-such-flag", "1"],
        &["--listen", "not-an-address"],
        &["--listen"],
        &["--listen", "127.0.0.1:0", "--max-line-bytes", "abc"],
        &["--listen", "127.0.0.1:0", "--max-line-bytes", "-1"],
        &["--listen", "127.0.0.1:0", "--max-queue-bytes", "1.5"],
        &["--listen", "127.0.0.1:0", "--max-control-bytes", ""],
        &["--listen", "127.0.0.1:0", "--write-stall-ms", "ten"],
        &["--listen", "127.0.0.1:0", "--max-connections", "-5"],
        &["--listen", "127.0.0.1:0", "--call-timeout-ms", "x"],
        &["--listen", "127.0.0.1:0", "--max-call-timeout-ms", "1e3"],
        &["--listen", "127.0.0.1:0", "--max-calls-per-conn", "many"],
        &["--listen", "127.0.0.1:0", "--log-level", "loud"],
        &["--listen", "127.0.0.1:0", "--max-calls-per-conn"],
    ];
    let mut bad = Vec::new();
    for args in cases {
        let out = run(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        if out.status.code() != Some(2) || stderr.trim().is_empty() {
            bad.push(format!(
                "{args:?}: exit {:?}, stderr {stderr:?}",
                out.status.code()
            ));
        }
    }
    assert!(
        bad.is_empty(),
        "expected exit 2 with a message:\n{}",
        bad.join("\n")
    );
}

#[test]
fn every_flag_with_a_valid_value_is_accepted() {
    let gw = Gateway::start(&[
        "--max-line-bytes",
        "65536",
        "--max-queue-bytes",
        "1048576",
        "--max-control-bytes",
        "4194304",
        "--write-stall-ms",
        "10000",
        "--max-connections",
        "100",
        "--call-timeout-ms",
        "1000",
        "--max-call-timeout-ms",
        "2000",
        "--max-calls-per-conn",
        "10",
        "--log-level",
        "debug",
    ]);
    let mut c = gw.client();
    c.subscribe("/flags");
    c.assert_quiet();
}

#[test]
fn every_log_level_starts_and_serves() {
    for level in ["error", "warn", "info", "debug"] {
        let gw = Gateway::spawn_args(&[
            "--listen",
            "127.0.0.1:0",
            "--ws-listen",
            "127.0.0.1:0",
            "--log-level",
            level,
        ])
        .unwrap_or_else(|e| panic!("--log-level {level}: {e}"));
        let mut c = gw.client();
        c.subscribe("/lvl");
    }
}

#[test]
fn listening_line_names_the_bound_address() {
    let gw = Gateway::start(&[]);
    assert_eq!(gw.addr.ip().to_string(), "127.0.0.1");
    assert_ne!(gw.addr.port(), 0);
    let logs = gw.logs();
    assert!(
        logs.iter().filter(|l| parse_listen(l).is_some()).count() == 1,
        "exactly one 'listening on ADDR' line expected: {logs:?}"
    );
    let mut c = gw.client();
    c.subscribe("/x");
}

/// The defaults are checked from the usage text (and by a unit test of
/// `Config::default()`), not by binding them: the README's first command
/// may be serving 9095 and 9090 while the tests run.
#[test]
fn default_listen_addresses_are_127_0_0_1_ports_9095_and_9090() {
    let out = run(&["--help"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let help = String::from_utf8_lossy(&out.stdout);
    let default_of = |flag: &str| {
        help.lines()
            .find(|l| l.trim_start().starts_with(flag))
            .and_then(|l| l.split("[default: ").nth(1))
            .and_then(|rest| rest.split(']').next())
            .map(str::to_string)
    };
    assert_eq!(
        default_of("--listen ").as_deref(),
        Some("127.0.0.1:9095"),
        "{help}"
    );
    assert_eq!(
        default_of("--ws-listen ").as_deref(),
        Some("127.0.0.1:9090"),
        "{help}"
    );
}

#[test]
fn listen_address_in_use_fails_instead_of_running() {
    let gw = Gateway::start(&[]);
    let addr = gw.addr.to_string();
    let out = run(&["--listen", &addr, "--ws-listen", "127.0.0.1:0"]);
    assert_ne!(out.status.code(), Some(0), "{out:?}");
    assert!(!out.stderr.is_empty());
}

fn signal_exits_zero_and_closes_sockets(sig: i32) {
    let mut gw = Gateway::start(&[]);
    let mut a = gw.client();
    a.subscribe("/sig");
    let mut p = gw.client();
    p.advertise_service("/sig-srv");
    gw.signal(sig);
    let st = gw
        .wait_exit(Duration::from_secs(5))
        .expect("gateway did not exit within 5 s of the signal");
    assert_eq!(
        st.code(),
        Some(0),
        "exit status {st:?}; logs {:?}",
        gw.logs()
    );
    a.expect_closed(Duration::from_secs(2));
    p.expect_closed(Duration::from_secs(2));
    assert!(
        std::net::TcpStream::connect_timeout(&gw.addr, Duration::from_secs(1)).is_err(),
        "listener still accepting after exit"
    );
}

#[test]
fn sigterm_exits_zero_and_closes_sockets() {
    signal_exits_zero_and_closes_sockets(libc::SIGTERM);
}

#[test]
fn sigint_exits_zero_and_closes_sockets() {
    signal_exits_zero_and_closes_sockets(libc::SIGINT);
}

#[test]
fn sigterm_exits_promptly_with_a_stuck_client() {
    let mut gw = Gateway::start(&[]);
    let mut slow = Client::connect_small_rcvbuf(&gw, 4096);
    slow.subscribe("/stuck");
    let mut p = gw.client();
    let big = format!(
        r#"{{"op":"publish","topic":"/stuck","msg":"{}"}}"#,
        "z".repeat(64 * 1024)
    );
    for _ in 0..64 {
        p.send_line(&big);
    }
    p.assert_quiet(); // all processed; output to `slow` is pending
    let t0 = Instant::now();
    gw.signal(libc::SIGTERM);
    let st = gw
        .wait_exit(Duration::from_secs(5))
        .expect("no exit within 5 s with a stuck client");
    assert_eq!(st.code(), Some(0));
    assert!(t0.elapsed() < Duration::from_secs(5));
}
