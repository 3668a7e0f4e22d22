//! Flags -> [`Config`]: the only code that reads argv. Every limit is a
//! flag; a repeated flag's last value wins (so a wrapper script's defaults
//! can be overridden); an error names the flag.

use std::ffi::OsString;
use std::time::Duration;

use crate::config::{self, Config, LogLevel};

/// What the command line asked for.
#[derive(Debug)]
pub enum Command {
    /// Run the gateway.
    Serve(Config),
    /// Print this text on stdout and exit 0 (`--help`, `--version`).
    Print(String),
}

/// The `--help` text, with every default.
pub fn usage() -> String {
    use config::*;
    format!(
        "\
rosgate - low-latency rosbridge-style TCP/JSON gateway

USAGE:
    rosgate [OPTIONS]

OPTIONS:
    --listen ADDR               TCP address to serve [default: {DEFAULT_LISTEN}]
    --ws-listen ADDR|off        WebSocket (rosbridge v2) address [default: {DEFAULT_WS_LISTEN}]
    --ws-status none|error|all  statuses sent to WebSocket clients [default: error]
    --max-line-bytes N          longest request line, bytes [default: {DEFAULT_MAX_LINE_BYTES}]
    --max-queue-bytes N         topic data queued per connection before the
                                oldest is dropped, bytes [default: {DEFAULT_MAX_QUEUE_BYTES}]
    --max-control-bytes N       control data queued per connection before it
                                is closed, bytes [default: {DEFAULT_MAX_CONTROL_BYTES}]
    --write-stall-ms N          close a connection whose pending output makes
                                no progress for this long [default: {DEFAULT_WRITE_STALL_MS}]
    --max-connections N         open connections [default: {DEFAULT_MAX_CONNECTIONS}]
    --call-timeout-ms N         service call timeout [default: {DEFAULT_CALL_TIMEOUT_MS}]
    --max-call-timeout-ms N     cap on a call's own `timeout` field [default: {DEFAULT_MAX_CALL_TIMEOUT_MS}]
    --max-calls-per-conn N      calls in flight per caller [default: {DEFAULT_MAX_CALLS_PER_CONN}]
    --log-level LEVEL           error|warn|info|debug [default: info]
    -h, --help                  print this help
    -V, --version               print the version

Signals: SIGINT/SIGTERM stop cleanly; SIGUSR1 logs the counters.
"
    )
}

fn millis(v: usize) -> Duration {
    Duration::from_millis(v as u64)
}

/// The value of `flag`, if given; when repeated, the last one wins (so a
/// wrapper script's defaults can be overridden). Errors name the flag.
fn opt<T>(args: &mut pico_args::Arguments, flag: &'static str) -> Result<Option<T>, String>
where
    T: std::str::FromStr,
    T::Err: std::fmt::Display,
{
    let values = args
        .values_from_fn(flag, |v| v.parse::<T>().map_err(|e| e.to_string()))
        .map_err(|e| match e {
            pico_args::Error::Utf8ArgumentParsingFailed { cause, value } => {
                format!("{flag}: invalid value {value:?}: {cause}")
            }
            other => format!("{flag}: {other}"),
        })?;
    Ok(values.into_iter().last())
}

/// Parses the arguments (without the program name).
pub fn parse(argv: Vec<OsString>) -> Result<Command, String> {
    let mut args = pico_args::Arguments::from_vec(argv);
    if args.contains(["-h", "--help"]) {
        return Ok(Command::Print(usage()));
    }
    if args.contains(["-V", "--version"]) {
        return Ok(Command::Print(format!(
            "rosgate {}\n",
            env!("CARGO_PKG_VERSION")
        )));
    }
    let mut c = Config::default();
    if let Some(v) = opt(&mut args, "--listen")? {
        c.listen = v;
    }
    let l = &mut c.limits;
    let positive = |name: &str, v: usize| {
        if v == 0 {
            Err(format!("{name} must be greater than 0"))
        } else {
            Ok(v)
        }
    };
    if let Some(v) = opt::<String>(&mut args, "--ws-listen")? {
        c.ws_listen = if v == "off" {
            None
        } else {
            Some(
                v.parse()
                    .map_err(|e| format!("--ws-listen: invalid address {v:?}: {e}"))?,
            )
        };
    }
    if let Some(v) = opt(&mut args, "--ws-status")? {
        c.ws_status = v;
    }
    if let Some(v) = opt(&mut args, "--max-line-bytes")? {
        l.max_line_bytes = positive("--max-line-bytes", v)?;
    }
    if let Some(v) = opt(&mut args, "--max-queue-bytes")? {
        l.max_queue_bytes = positive("--max-queue-bytes", v)?;
    }
    if let Some(v) = opt(&mut args, "--max-control-bytes")? {
        l.max_control_bytes = positive("--max-control-bytes", v)?;
    }
    if let Some(v) = opt(&mut args, "--write-stall-ms")? {
        l.write_stall = millis(positive("--write-stall-ms", v)?);
    }
    if let Some(v) = opt(&mut args, "--max-connections")? {
        l.max_connections = positive("--max-connections", v)?;
    }
    if let Some(v) = opt(&mut args, "--call-timeout-ms")? {
        l.call_timeout = millis(positive("--call-timeout-ms", v)?);
    }
    if let Some(v) = opt(&mut args, "--max-call-timeout-ms")? {
        l.max_call_timeout = millis(positive("--max-call-timeout-ms", v)?);
    }
    if let Some(v) = opt(&mut args, "--max-calls-per-conn")? {
        l.max_calls_per_conn = positive("--max-calls-per-conn", v)?;
    }
    if let Some(v) = opt::<LogLevel>(&mut args, "--log-level")? {
        c.log_level = v;
    }
    let rest = args.finish();
    if let Some(first) = rest.first() {
        return Err(format!("unexpected argument {:?}", first.to_string_lossy()));
    }
    Ok(Command::Serve(c))
}
