//! `rosgate` binary: argv -> [`rosgate::args`] -> [`rosgate::server::Server`],
//! or, when the first argument names a command group (`rosgate topic echo
//! /chatter`), the command-line client in [`rosgate::cli`].

use std::process::ExitCode;

use rosgate::args::{self, Command};
use rosgate::server::Server;
use rosgate_core::log;

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
    let mut server = match Server::bind(&config) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("rosgate: cannot start: {e}");
            return ExitCode::from(1);
        }
    };
    // Tests and scripts wait for these exact lines; the TCP one comes last.
    match server.ws_local_addr() {
        Some(Ok(addr)) => eprintln!("rosgate websocket listening on ws://{addr}"),
        Some(Err(e)) => eprintln!("rosgate: websocket local_addr: {e}"),
        None => {}
    }
    match server.local_addr() {
        Ok(addr) => eprintln!("rosgate {} listening on {addr}", env!("CARGO_PKG_VERSION")),
        Err(e) => eprintln!("rosgate: local_addr: {e}"),
    }
    match server.run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rosgate: event loop failed: {e}");
            ExitCode::from(1)
        }
    }
}
