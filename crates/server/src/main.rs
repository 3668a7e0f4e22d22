//! `rosgate` binary: argv -> [`rosgate::args`] -> [`rosgate::server::Server`],
//! or, when the first argument names a command group (`rosgate topic echo
//! /chatter`), the command-line client in [`rosgate::cli`].
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

use std::process::ExitCode;

use rosgate::args::{self, Command};
use rosgate::server::Server;
use rosgate_core::log::{self, LogLevel, Val};

fn main() -> ExitCode {
    let argv: Vec<_> = std::env::args_os().skip(1).collect();
    if rosgate::cli::is_command(&argv) {
        return rosgate::cli::run(argv);
    }
    let config = match args::parse(argv) {
        Ok(Command::Serve(c)) => c,
        Ok(Command::Print(text)) => {
            print!("{text}");
            return ExitCode::SUCCESS;
        }
        Err(msg) => {
            eprintln!("rosgate: {msg}\n\nRun `rosgate --help` for usage.");
            return ExitCode::from(2);
        }
    };
    log::set_level(config.log_level);
    log::set_format(config.log_format);
    let mut server = match Server::bind(&config) {
        Ok(s) => s,
        Err(e) => {
            fatal("cannot start", &e.to_string());
            return ExitCode::from(1);
        }
    };
    log_access(&config);
    // Tests and scripts wait for these exact lines; the TCP one comes last.
    // Under TLS they read `wss://ADDR` and `tls://ADDR`.
    if log::is_json() {
        announce_json(&server);
    } else {
        announce(&server);
    }
    match server.run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            fatal("event loop failed", &e.to_string());
            ExitCode::from(1)
        }
    }
}

/// Says who may connect: what is reachable beyond loopback, and with which
/// authentication.
fn log_access(config: &rosgate::config::Config) {
    let exposed: Vec<String> = args::exposed(config)
        .iter()
        .map(|(k, a)| format!("{k}:{a}"))
        .collect();
    let exposed = exposed.join(",");
    let access = &config.access;
    if access.required() {
        let roles = access.roles_in_use().join(",");
        let tokens = access.token_count() as u64;
        log::event(
            LogLevel::Info,
            "authentication required",
            &[
                ("tokens", Val::Num(tokens)),
                ("roles", Val::Str(&roles)),
                (
                    "network",
                    Val::Str(if exposed.is_empty() { "none" } else { &exposed }),
                ),
            ],
        );
        if !exposed.is_empty() && config.tls.is_none() {
            // Tokens would cross the network in clear: anyone on the path
            // can read one and replay it.
            log::event(
                LogLevel::Warn,
                "tokens cross the network unencrypted: give --tls-cert and --tls-key (docs/security.md)",
                &[("network", Val::Str(&exposed))],
            );
        }
    } else if !exposed.is_empty() {
        log::event(
            LogLevel::Warn,
            "reachable from the network WITHOUT authentication (--allow-unauthenticated-network)",
            &[("network", Val::Str(&exposed))],
        );
    }
}

/// A fatal error: text for people, or a JSON line when logs are JSON.
fn fatal(what: &str, error: &str) {
    if log::is_json() {
        log::notice_at("ERROR", what, &[("error", Val::Str(error))]);
    } else {
        eprintln!("rosgate: {what}: {error}");
    }
}

/// The URL schemes of the announcements: `ws://` and a bare address, or
/// under TLS `wss://` and `tls://`.
fn schemes(server: &Server) -> (&'static str, &'static str) {
    if server.is_tls() {
        ("wss://", "tls://")
    } else {
        ("ws://", "")
    }
}

fn announce(server: &Server) {
    let (ws, tcp) = schemes(server);
    match server.ws_local_addr() {
        Some(Ok(addr)) => eprintln!("rosgate websocket listening on {ws}{addr}"),
        Some(Err(e)) => eprintln!("rosgate: websocket local_addr: {e}"),
        None => {}
    }
    match server.foxglove_local_addr() {
        Some(Ok(addr)) => eprintln!("rosgate foxglove listening on {ws}{addr}"),
        Some(Err(e)) => eprintln!("rosgate: foxglove local_addr: {e}"),
        None => {}
    }
    match server.local_addr() {
        Ok(addr) => eprintln!(
            "rosgate {} listening on {tcp}{addr}",
            env!("CARGO_PKG_VERSION")
        ),
        Err(e) => eprintln!("rosgate: local_addr: {e}"),
    }
}

/// The same announcements as JSON lines, so a log shipper gets no text line.
fn announce_json(server: &Server) {
    let version = env!("CARGO_PKG_VERSION");
    let (ws, tcp) = schemes(server);
    if let Some(Ok(addr)) = server.ws_local_addr() {
        let addr = format!("{ws}{addr}");
        log::notice(
            "listening",
            &[("transport", Val::Str("ws")), ("addr", Val::Str(&addr))],
        );
    }
    if let Some(Ok(addr)) = server.foxglove_local_addr() {
        let addr = format!("{ws}{addr}");
        log::notice(
            "listening",
            &[
                ("transport", Val::Str("foxglove")),
                ("addr", Val::Str(&addr)),
            ],
        );
    }
    if let Ok(addr) = server.local_addr() {
        let addr = format!("{tcp}{addr}");
        log::notice(
            "listening",
            &[
                ("transport", Val::Str("tcp")),
                ("addr", Val::Str(&addr)),
                ("version", Val::Str(version)),
            ],
        );
    }
}
