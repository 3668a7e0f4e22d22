//! `rosgate` binary: flags -> `Config` -> `Server`. The only place that
//! reads argv or the environment.

use std::process::ExitCode;
use std::time::Duration;

use rosgate::config::{self, Config, LogLevel};
use rosgate::log;
use rosgate::server::Server;

const USAGE: &str = "\
rosgate - low-latency rosbridge-style TCP/JSON gateway

USAGE:
    rosgate [OPTIONS]

OPTIONS:
    --listen ADDR               TCP address to serve [default: 127.0.0.1:9095]
    --max-line-bytes N          longest request line, bytes [default: 16777216]
    --max-queue-bytes N         topic data queued per connection before the
                                oldest is dropped, bytes [default: 8388608]
    --max-control-bytes N       control data queued per connection before it
                                is closed, bytes [default: 67108864]
    --write-stall-ms N          close a connection whose pending output makes
                                no progress for this long [default: 30000]
    --max-connections N         open connections [default: 10000]
    --call-timeout-ms N         service call timeout [default: 5000]
    --max-call-timeout-ms N     cap on a call's own `timeout` field [default: 300000]
    --max-calls-per-conn N      calls in flight per caller [default: 4096]
    --log-level LEVEL           error|warn|info|debug [default: info]
    -h, --help                  print this help
    -V, --version               print the version

Signals: SIGINT/SIGTERM stop cleanly; SIGUSR1 logs the counters.
";

fn main() -> ExitCode {
    let config = match parse_args() {
        Ok(Some(c)) => c,
        Ok(None) => return ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("rosgate: {msg}\n\nRun `rosgate --help` for usage.");
            return ExitCode::from(2);
        }
    };
    log::set_level(config.log_level);
    let mut server = match Server::bind(&config) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("rosgate: cannot listen on {}: {e}", config.listen);
            return ExitCode::from(1);
        }
    };
    match server.local_addr() {
        // Tests and scripts wait for this exact line.
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

/// `Ok(None)` when `--help`/`--version` was answered.
fn parse_args() -> Result<Option<Config>, String> {
    let mut args = pico_args::Arguments::from_env();
    if args.contains(["-h", "--help"]) {
        print!("{USAGE}");
        return Ok(None);
    }
    if args.contains(["-V", "--version"]) {
        println!("rosgate {}", env!("CARGO_PKG_VERSION"));
        return Ok(None);
    }
    let mut c = Config::default();
    let err = |e: pico_args::Error| e.to_string();
    if let Some(v) = args.opt_value_from_str("--listen").map_err(err)? {
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
    if let Some(v) = args.opt_value_from_str("--max-line-bytes").map_err(err)? {
        l.max_line_bytes = positive("--max-line-bytes", v)?;
    }
    if let Some(v) = args.opt_value_from_str("--max-queue-bytes").map_err(err)? {
        l.max_queue_bytes = positive("--max-queue-bytes", v)?;
    }
    if let Some(v) = args
        .opt_value_from_str("--max-control-bytes")
        .map_err(err)?
    {
        l.max_control_bytes = positive("--max-control-bytes", v)?;
    }
    if let Some(v) = args.opt_value_from_str("--write-stall-ms").map_err(err)? {
        l.write_stall = Duration::from_millis(positive("--write-stall-ms", v)? as u64);
    }
    if let Some(v) = args.opt_value_from_str("--max-connections").map_err(err)? {
        l.max_connections = positive("--max-connections", v)?;
    }
    if let Some(v) = args.opt_value_from_str("--call-timeout-ms").map_err(err)? {
        l.call_timeout = Duration::from_millis(positive("--call-timeout-ms", v)? as u64);
    }
    if let Some(v) = args
        .opt_value_from_str("--max-call-timeout-ms")
        .map_err(err)?
    {
        l.max_call_timeout = Duration::from_millis(positive("--max-call-timeout-ms", v)? as u64);
    }
    if let Some(v) = args
        .opt_value_from_str("--max-calls-per-conn")
        .map_err(err)?
    {
        l.max_calls_per_conn = positive("--max-calls-per-conn", v)?;
    }
    if let Some(v) = args
        .opt_value_from_str::<_, LogLevel>("--log-level")
        .map_err(err)?
    {
        c.log_level = v;
    }
    let rest = args.finish();
    if let Some(first) = rest.first() {
        return Err(format!("unexpected argument {:?}", first.to_string_lossy()));
    }
    let _ = config::DEFAULT_LISTEN;
    Ok(Some(c))
}
