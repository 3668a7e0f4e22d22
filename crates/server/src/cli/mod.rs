//! `rosgate <group> <command>`: a command-line client of a running gateway,
//! modelled on the `ros2` CLI (`rosgate topic echo /chatter`, `rosgate param
//! dump /controller`, ...). It talks to the gateway like any other client,
//! over the TCP NDJSON port or the WebSocket port (`--url`), plain or TLS, and needs no
//! ROS installation. `rosgate` without a group still runs the gateway.
//!
//! | module | owns |
//! |---|---|
//! | this one | dispatch: group and command -> handler; exit statuses; signals |
//! | `args` | flags and positionals (pico-args), the options every command shares |
//! | `client` | the connection: URLs, request/reply by id, every read with a deadline |
//! | `cbor` | binary frames (the `cbor` and `cbor-raw` compressions) read as JSON |
//! | `ws` | the blocking WebSocket client transport: handshake, masked frames |
//! | `stream` | plain TCP or TLS (`tls://`, `wss://`, `--ca-file`) under either transport |
//! | `input` | messages, requests, goals and values from the command line (JSON or YAML) -> JSON |
//! | `output` | the YAML-style printer (`ros2 topic echo`'s layout) and other formatting |
//! | `topic`, `service`, `action`, `param`, `node`, `gateway`, `tf` | one command group each |
//! | `bag` | `rosgate bag record|info|play`: rosbag2 bags in MCAP |
//! | `demo` | `rosgate demo`: a small robot served through the gateway, for the README's commands |
//!
//! Exit statuses: 0 success; 1 the gateway answered with a failure (the
//! reason on stderr); 2 usage error; 3 the gateway could not be reached or
//! stopped answering in time; 130 interrupted while waiting for an answer.
//! Commands that run until stopped (`topic echo`, `hz`, `bw`, `pub`) exit 0
//! on Ctrl-C; `action send_goal` cancels its goal first and exits 130.
//! Details and example sessions: `docs/cli.md`.

mod action;
mod args;
mod bag;
mod cbor;
mod client;
mod demo;
mod gateway;
mod input;
mod node;
mod output;
mod param;
mod service;
mod stream;
mod tf;
mod topic;
mod url;
mod ws;

use std::ffi::OsString;
use std::io::{self, Write};
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use args::{Args, Common};
use client::Client;

/// Longest read timeout: how often a wait looks at the stop flag.
pub const POLL: std::time::Duration = std::time::Duration::from_millis(100);

/// The command groups, the first argument that selects the CLI (`demo` is
/// a command on its own).
pub const GROUPS: &[&str] = &[
    "topic", "service", "action", "param", "node", "gateway", "bag", "tf", DEMO,
];

/// `rosgate demo`, a command without subcommands.
const DEMO: &str = "demo";

/// True when `argv` (without the program name) is a CLI command rather than
/// the gateway's own flags.
pub fn is_command(argv: &[OsString]) -> bool {
    argv.first()
        .and_then(|a| a.to_str())
        .is_some_and(|a| GROUPS.contains(&a))
}

/// Why a command did not succeed; each maps to one exit status.
#[derive(Debug)]
pub enum Error {
    /// A bad command line: exit 2.
    Usage(String),
    /// The gateway answered with a failure: exit 1.
    Failed(String),
    /// The gateway could not be reached, refused the connection, closed it
    /// or did not answer within `--timeout`: exit 3.
    Unreachable(String),
    /// Ctrl-C or SIGTERM while waiting for an answer: exit 130.
    Interrupted,
    /// Writing the output failed; a closed pipe (`| head`) ends quietly.
    Output(io::Error),
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Error {
        Error::Output(e)
    }
}

/// Exit status for usage errors (and `rosgate topic` without a command).
const EXIT_USAGE: u8 = 2;
/// Exit status when the gateway cannot be reached or does not answer.
const EXIT_UNREACHABLE: u8 = 3;
/// Exit status after Ctrl-C interrupted a wait (128 + SIGINT).
const EXIT_INTERRUPTED: u8 = 130;

/// What every command gets: the shared options and the stop flag that
/// SIGINT/SIGTERM raise.
pub(crate) struct Ctx {
    pub common: Common,
    pub stop: Arc<AtomicBool>,
}

impl Ctx {
    /// Connects to the gateway named by `--url`.
    pub fn connect(&self) -> Result<Client, Error> {
        Client::connect(&self.common, self.stop.clone())
    }
}

/// Writes `text` to stdout and flushes it (one message at a time, so a
/// pipe sees each as it arrives).
pub(crate) fn print(text: &str) -> Result<(), Error> {
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

/// Runs `rosgate <group> ...`; `argv` starts with the group.
pub fn run(argv: Vec<OsString>) -> ExitCode {
    let mut argv = argv.into_iter();
    let group = argv
        .next()
        .and_then(|g| g.into_string().ok())
        .unwrap_or_default();
    let mut args = Args::new(argv.collect());
    if group == DEMO {
        return run_demo(args);
    }
    let cmd = match args.subcommand() {
        Ok(c) => c,
        Err(e) => return usage_error(&group, None, &e),
    };
    let Some(cmd) = cmd else {
        // `rosgate topic` or `rosgate topic --help`.
        let help = group_help(&group);
        if args.help() {
            let _ = print(&help);
            return ExitCode::SUCCESS;
        }
        eprint!("{help}");
        return ExitCode::from(EXIT_USAGE);
    };
    let Some(help) = command_help(&group, &cmd) else {
        return usage_error(
            &group,
            None,
            &format!("unknown command {cmd:?}; run `rosgate {group} --help`"),
        );
    };
    if args.help() {
        let _ = print(&format!("{help}{}", args::COMMON_HELP));
        return ExitCode::SUCCESS;
    }
    let common = match args.common() {
        Ok(c) => c,
        Err(e) => return usage_error(&group, Some(&cmd), &e),
    };
    let ctx = Ctx {
        common,
        stop: stop_flag(),
    };
    let result = match group.as_str() {
        "topic" => topic::run(&cmd, args, &ctx),
        "service" => service::run(&cmd, args, &ctx),
        "action" => action::run(&cmd, args, &ctx),
        "param" => param::run(&cmd, args, &ctx),
        "node" => node::run(&cmd, args, &ctx),
        "gateway" => gateway::run(&cmd, args, &ctx),
        "bag" => bag::run(&cmd, args, &ctx),
        "tf" => tf::run(&cmd, args, &ctx),
        _ => Err(Error::Usage(format!("unknown group {group:?}"))),
    };
    exit_status(&group, Some(&cmd), result)
}

/// `rosgate demo [OPTIONS]`.
fn run_demo(mut args: Args) -> ExitCode {
    if args.help() {
        let _ = print(&format!("{}{}", demo::help(), args::COMMON_HELP));
        return ExitCode::SUCCESS;
    }
    let common = match args.common() {
        Ok(c) => c,
        Err(e) => return usage_error(DEMO, None, &e),
    };
    let ctx = Ctx {
        common,
        stop: stop_flag(),
    };
    let result = demo::run(args, &ctx);
    exit_status(DEMO, None, result)
}

/// The flag SIGINT and SIGTERM raise. A second one while the first is
/// being handled (a cancel that is not answered, the demo withdrawing)
/// exits at once.
fn stop_flag() -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        let _ = signal_hook::flag::register_conditional_shutdown(
            sig,
            i32::from(EXIT_INTERRUPTED),
            stop.clone(),
        );
        let _ = signal_hook::flag::register(sig, stop.clone());
    }
    stop
}

/// A command's outcome as its exit status, the reason on stderr.
fn exit_status(group: &str, cmd: Option<&str>, result: Result<(), Error>) -> ExitCode {
    let path = match cmd {
        Some(c) => format!("{group} {c}"),
        None => group.to_string(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Error::Usage(msg)) => usage_error(group, cmd, &msg),
        Err(Error::Failed(msg)) => {
            eprintln!("rosgate {path}: {msg}");
            ExitCode::from(1)
        }
        Err(Error::Unreachable(msg)) => {
            eprintln!("rosgate {path}: {msg}");
            ExitCode::from(EXIT_UNREACHABLE)
        }
        Err(Error::Interrupted) => ExitCode::from(EXIT_INTERRUPTED),
        Err(Error::Output(e)) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(Error::Output(e)) => {
            eprintln!("rosgate {path}: writing the output: {e}");
            ExitCode::from(1)
        }
    }
}

fn usage_error(group: &str, cmd: Option<&str>, msg: &str) -> ExitCode {
    let path = match cmd {
        Some(c) => format!("{group} {c}"),
        None => group.to_string(),
    };
    eprintln!("rosgate {path}: {msg}\n\nRun `rosgate {path} --help` for usage.");
    ExitCode::from(EXIT_USAGE)
}

/// `rosgate <group> --help`.
fn group_help(group: &str) -> String {
    let (about, cmds): (&str, &[(&str, &str)]) = match group {
        "topic" => ("Topics of a running gateway", topic::COMMANDS),
        "service" => ("Services of a running gateway", service::COMMANDS),
        "action" => ("Actions of a running gateway", action::COMMANDS),
        "param" => ("Parameters of a running gateway's nodes", param::COMMANDS),
        "gateway" => ("The gateways of a federation", gateway::COMMANDS),
        "tf" => (
            "TF through the gateway's own tf2_web_republisher",
            tf::COMMANDS,
        ),
        "bag" => (
            "rosbag2 bags (MCAP) recorded from and played into a gateway",
            bag::COMMANDS,
        ),
        _ => ("Nodes of a running gateway", node::COMMANDS),
    };
    let mut s = format!("rosgate {group} - {about}\n\nUSAGE:\n    rosgate {group} COMMAND [ARGS] [OPTIONS]\n\nCOMMANDS:\n");
    for (name, what) in cmds {
        s.push_str(&format!("    {name:<12}{what}\n"));
    }
    s.push_str(&format!(
        "\nRun `rosgate {group} COMMAND --help` for a command's arguments and options.\n"
    ));
    s
}

/// A command's `--help` text, or `None` for an unknown command.
fn command_help(group: &str, cmd: &str) -> Option<&'static str> {
    match group {
        "topic" => topic::help(cmd),
        "service" => service::help(cmd),
        "action" => action::help(cmd),
        "tf" => tf::help(cmd),
        "param" => param::help(cmd),
        "node" => node::help(cmd),
        "gateway" => gateway::help(cmd),
        "bag" => bag::help(cmd),
        _ => None,
    }
}
