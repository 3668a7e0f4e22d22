//! Flags -> [`Config`]: the only code that reads argv. Every limit is a
//! flag; a repeated flag's last value wins (so a wrapper script's defaults
//! can be overridden); an error names the flag.

use std::ffi::OsString;
use std::time::Duration;

use rosgate_core::access::ConfigError;

use crate::config::{self, Config, LogFormat, LogLevel};

/// What the command line asked for.
#[derive(Debug)]
pub enum Command {
    /// Run the gateway.
    Serve(Box<Config>),
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
    rosgate [OPTIONS]                 run the gateway
    rosgate GROUP COMMAND [ARGS]      talk to a running gateway (docs/cli.md)
    rosgate demo                      serve a demo robot through a running gateway

GROUPS (`rosgate GROUP --help` lists the commands):
    topic       list, info, echo, pub, hz, bw
    service     list, type, call
    action      list, send_goal
    param       list, get, set, dump
    node        list, info
    gateway     list (a federation's gateways)
    demo        serve a small demo robot (/chatter, /add_two_ints, /fibonacci, ...)

OPTIONS:
    --listen ADDR               TCP address to serve [default: {DEFAULT_LISTEN}]
    --ws-listen ADDR|off        WebSocket (rosbridge v2) address [default: {DEFAULT_WS_LISTEN}]
    --foxglove-listen ADDR|off  Foxglove WebSocket protocol address (the rosbridge
                                port answers Foxglove clients too)
                                [default: {DEFAULT_FOXGLOVE_LISTEN}]
    --foxglove-assets DIR       serve Foxglove fetchAsset (the assets capability):
                                package://PKG/path as DIR/PKG/path, file:// only
                                inside DIR
    --ws-status LEVEL           statuses sent to WebSocket clients:
                                none|error|warning|all [default: warning]
    --tcp-domain N              domain (0-232) of TCP clients that choose none [default: 0]
    --ws-domain N               domain of WebSocket clients whose URL chooses none [default: 0]
    --names opaque|strict       strict: every client's names follow the ROS 2
                                rules (else only clients that declared a node)
                                [default: opaque]
    --use-sim-time              rosapi get_time answers with the latest /clock
    --params FILE               start-up parameter overrides, ROS 2 YAML layout
                                (node: ros__parameters: ...); repeatable
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
    --goal-timeout-ms N         action goal deadline when the goal names none;
                                0: none [default: {DEFAULT_GOAL_TIMEOUT_MS}]
    --max-goals-per-conn N      action goals in flight per caller [default: {DEFAULT_MAX_GOALS_PER_CONN}]
    --max-goals-per-server N    action goals in flight per server [default: {DEFAULT_MAX_GOALS_PER_SERVER}]
    --max-actions-per-conn N    actions one connection serves [default: {DEFAULT_MAX_ACTIONS_PER_CONN}]
    --max-param-bytes-per-conn N
                                parameters of one connection's nodes, together,
                                bytes [default: {DEFAULT_MAX_PARAM_BYTES_PER_CONN}]
    --max-held-param-bytes N    parameters the gateway holds for nodes nobody
                                owns, all domains, bytes [default: {DEFAULT_MAX_HELD_PARAM_BYTES}]
    --max-memory-bytes N        everything clients make the gateway hold, together;
                                above it topic data is shed, then the biggest
                                holders closed [default: {DEFAULT_MAX_MEMORY_BYTES}]
    --handshake-timeout-ms N    to complete the WebSocket upgrade or send the
                                first TCP line [default: {DEFAULT_HANDSHAKE_TIMEOUT_MS}]
    --partial-timeout-ms N      a partial line or message may sit unfinished
                                this long [default: {DEFAULT_PARTIAL_TIMEOUT_MS}]
    --fragment-timeout-ms N     a client's fragmented message must complete
                                this long after its first piece [default: {DEFAULT_FRAGMENT_TIMEOUT_MS}]
    --idle-timeout-ms N         close after no traffic for this long; 0: never
                                [default: {DEFAULT_IDLE_TIMEOUT_MS}]
    --control-soft-bytes N      control data above this for --control-soft-ms
                                closes the connection [default: {DEFAULT_CONTROL_SOFT_BYTES}]
    --control-soft-ms N         see --control-soft-bytes [default: {DEFAULT_CONTROL_SOFT_MS}]
    --max-subscriptions-per-conn N  (each rosbridge id counts) [default: {DEFAULT_MAX_SUBSCRIPTIONS_PER_CONN}]
    --max-advertisements-per-conn N [default: {DEFAULT_MAX_ADVERTISEMENTS_PER_CONN}]
    --max-services-per-conn N   services one connection provides [default: {DEFAULT_MAX_SERVICES_PER_CONN}]
    --max-connections-per-ip N  from one non-loopback address [default: {DEFAULT_MAX_CONNECTIONS_PER_IP}]
    --shutdown-grace-ms N       on SIGTERM, flush queued output this long
                                [default: {DEFAULT_SHUTDOWN_GRACE_MS}]
    --auth-tokens FILE          clients must authenticate with a token from FILE
                                (one `ROLE TOKEN` per line; docs/security.md)
    --auth-roles FILE           what each role may do: globs per class of
                                operation (YAML); built in: admin, viewer
    --auth-failure-budget N     wrong tokens one address may present within a
                                minute; past it its tokens are not checked and
                                each attempt is held, then refused
                                (docs/security.md) [default: {DEFAULT_AUTH_FAILURE_BUDGET}]
    --ws-allowed-origins LIST   browser origins (comma-separated, or *) that may
                                open a WebSocket besides loopback pages
    --allow-unauthenticated-network
                                listen beyond loopback without --auth-tokens,
                                and reach Zenoh peers beyond loopback without
                                mutual TLS or user/password, or DDS beyond
                                loopback (docs/security.md)
    --tls-cert FILE             TLS: PEM certificate chain (server first); with
                                --tls-key, both listeners speak TLS (wss://,
                                and TLS on the TCP port)
    --tls-key FILE              TLS: the certificate's PEM private key
    --zenoh-connect ENDPOINT    federation: a Zenoh endpoint of another gateway or
                                a router to connect to (tcp/HOST:PORT; repeatable)
    --zenoh-listen ENDPOINT     federation: a Zenoh endpoint to listen on
                                (tcp/HOST:PORT; repeatable)
    --zenoh-mode MODE           peer|client|router [default: peer]
    --zenoh-config FILE         Zenoh JSON5 configuration for the rest (TLS,
                                access control); the flags above override it
    --zenoh-scouting            allow Zenoh's multicast scouting (off otherwise)
    --ros-domain N              join the ROS 2 graph of domain N that runs
                                rmw_zenoh (repeatable; bridged with rosgate
                                domain N); without --zenoh-connect/--zenoh-listen
                                connects to rmw_zenoh's router at
                                tcp/localhost:7447 (docs/ros2.md)
    --dds-domain N              join the ROS 2 graph of domain N that runs DDS
                                (Fast DDS, rmw_fastrtps; repeatable; bridged
                                with rosgate domain N; docs/ros2.md)
    --dds-network ADDR          the interface DDS discovery and data use
                                [default: 127.0.0.1]; another needs
                                --allow-unauthenticated-network
    --interfaces DIR            more .msg/.srv/.action types beside the bundled
                                ones, for rosapi's definitions, the binary
                                encodings and --ros-domain
                                (DIR/<pkg>/msg/*.msg ...; repeatable)
    --log-level LEVEL           error|warn|info|debug [default: info]
    --log-format FORMAT         text|json (one JSON object per line) [default: text]
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
/// The listeners reachable beyond this machine (not bound to loopback).
pub fn exposed(c: &Config) -> Vec<(&'static str, std::net::SocketAddr)> {
    let mut v = Vec::new();
    if !c.listen.ip().is_loopback() {
        v.push(("tcp", c.listen));
    }
    if let Some(ws) = c.ws_listen.filter(|a| !a.ip().is_loopback()) {
        v.push(("websocket", ws));
    }
    if let Some(fx) = c.foxglove_listen.filter(|a| !a.ip().is_loopback()) {
        v.push(("foxglove", fx));
    }
    v
}

/// Refuses to listen beyond loopback without authentication unless that is
/// asked for by name: anyone on the network could publish `/cmd_vel`.
fn refuse_exposure(c: &Config) -> Result<(), String> {
    let open = exposed(c);
    if open.is_empty() || c.access.required() || c.allow_unauthenticated_network {
        return Ok(());
    }
    let list: Vec<String> = open.iter().map(|(k, a)| format!("{k} {a}")).collect();
    Err(format!(
        "refusing to listen on {} without authentication: anyone who can reach it could publish, call and set parameters. Give clients tokens with --auth-tokens FILE (docs/security.md), or pass --allow-unauthenticated-network if this network is trusted",
        list.join(" and ")
    ))
}

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
    if let Some(v) = opt::<String>(&mut args, "--foxglove-listen")? {
        c.foxglove_listen_default = false;
        c.foxglove_listen = if v == "off" {
            None
        } else {
            Some(
                v.parse()
                    .map_err(|e| format!("--foxglove-listen: invalid address {v:?}: {e}"))?,
            )
        };
    }
    if let Some(v) = opt::<String>(&mut args, "--foxglove-assets")? {
        c.foxglove_assets = Some(std::path::PathBuf::from(v));
    }
    if let Some(v) = opt(&mut args, "--ws-status")? {
        c.ws_status = v;
    }
    let domain = |name: &str, v: u64| {
        u8::try_from(v)
            .ok()
            .filter(|d| *d <= rosgate_core::nodes::MAX_DOMAIN)
            .ok_or_else(|| format!("{name}: domain {v} is out of range (0-232)"))
    };
    if let Some(v) = opt::<u64>(&mut args, "--tcp-domain")? {
        c.tcp_domain = domain("--tcp-domain", v)?;
    }
    if let Some(v) = opt::<u64>(&mut args, "--ws-domain")? {
        c.ws_domain = domain("--ws-domain", v)?;
    }
    if let Some(v) = opt::<String>(&mut args, "--names")? {
        c.strict_names = match v.as_str() {
            "strict" => true,
            "opaque" => false,
            other => return Err(format!("--names: invalid value {other:?} (opaque|strict)")),
        };
    }
    c.use_sim_time = args.contains("--use-sim-time");
    c.allow_unauthenticated_network = args.contains("--allow-unauthenticated-network");
    let tokens_file = opt::<String>(&mut args, "--auth-tokens")?;
    let tokens = match &tokens_file {
        Some(f) => crate::access_file::load_tokens(f)?,
        None => Vec::new(),
    };
    let roles_file = opt::<String>(&mut args, "--auth-roles")?;
    let roles = match &roles_file {
        Some(f) => crate::access_file::load_roles(f)?,
        None => Vec::new(),
    };
    let origins: Vec<String> = match opt::<String>(&mut args, "--ws-allowed-origins")? {
        Some(list) => list.split(',').map(str::to_string).collect(),
        None => Vec::new(),
    };
    if roles_file.is_some() && tokens.is_empty() {
        return Err("--auth-roles needs --auth-tokens (roles are given to tokens)".into());
    }
    c.access = rosgate_core::access::Access::new(tokens, roles, origins).map_err(|e| match e {
        ConfigError::Tokens(e) => format!(
            "--auth-tokens {}: {e}",
            tokens_file.as_deref().unwrap_or("")
        ),
        ConfigError::Roles(e) => {
            format!("--auth-roles {}: {e}", roles_file.as_deref().unwrap_or(""))
        }
    })?;
    let files: Vec<String> = args
        .values_from_str("--params")
        .map_err(|e| format!("--params: {e}"))?;
    for f in files {
        for (node, params) in crate::params_file::load(&f)? {
            c.param_overrides.entry(node).or_default().extend(params);
        }
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
    if let Some(v) = opt::<usize>(&mut args, "--goal-timeout-ms")? {
        l.goal_timeout = (v > 0).then(|| millis(v));
    }
    if let Some(v) = opt(&mut args, "--max-goals-per-conn")? {
        l.max_goals_per_conn = positive("--max-goals-per-conn", v)?;
    }
    if let Some(v) = opt(&mut args, "--max-goals-per-server")? {
        l.max_goals_per_server = positive("--max-goals-per-server", v)?;
    }
    if let Some(v) = opt(&mut args, "--max-actions-per-conn")? {
        l.max_actions_per_conn = positive("--max-actions-per-conn", v)?;
    }
    if let Some(v) = opt(&mut args, "--max-param-bytes-per-conn")? {
        l.max_param_bytes_per_conn = positive("--max-param-bytes-per-conn", v)?;
    }
    if let Some(v) = opt(&mut args, "--max-held-param-bytes")? {
        l.max_held_param_bytes = positive("--max-held-param-bytes", v)?;
    }
    if let Some(v) = opt(&mut args, "--max-memory-bytes")? {
        l.max_memory_bytes = positive("--max-memory-bytes", v)?;
    }
    if let Some(v) = opt(&mut args, "--handshake-timeout-ms")? {
        l.handshake_timeout = millis(positive("--handshake-timeout-ms", v)?);
    }
    if let Some(v) = opt(&mut args, "--partial-timeout-ms")? {
        l.partial_timeout = millis(positive("--partial-timeout-ms", v)?);
    }
    if let Some(v) = opt(&mut args, "--fragment-timeout-ms")? {
        l.fragment_timeout = millis(positive("--fragment-timeout-ms", v)?);
    }
    if let Some(v) = opt::<usize>(&mut args, "--idle-timeout-ms")? {
        l.idle_timeout = (v > 0).then(|| millis(v));
    }
    if let Some(v) = opt(&mut args, "--control-soft-bytes")? {
        l.control_soft_bytes = positive("--control-soft-bytes", v)?;
    }
    if let Some(v) = opt(&mut args, "--control-soft-ms")? {
        l.control_soft_time = millis(positive("--control-soft-ms", v)?);
    }
    if let Some(v) = opt(&mut args, "--max-subscriptions-per-conn")? {
        l.max_subscriptions_per_conn = positive("--max-subscriptions-per-conn", v)?;
    }
    if let Some(v) = opt(&mut args, "--max-advertisements-per-conn")? {
        l.max_advertisements_per_conn = positive("--max-advertisements-per-conn", v)?;
    }
    if let Some(v) = opt(&mut args, "--max-services-per-conn")? {
        l.max_services_per_conn = positive("--max-services-per-conn", v)?;
    }
    if let Some(v) = opt(&mut args, "--max-connections-per-ip")? {
        l.max_connections_per_ip = positive("--max-connections-per-ip", v)?;
    }
    if let Some(v) = opt(&mut args, "--auth-failure-budget")? {
        let v = positive("--auth-failure-budget", v)?;
        l.auth_failure_budget = u32::try_from(v)
            .map_err(|_| format!("--auth-failure-budget: at most {} (got {v})", u32::MAX))?;
    }
    if let Some(v) = opt::<usize>(&mut args, "--shutdown-grace-ms")? {
        c.shutdown_grace = millis(v);
    }
    if let Some(v) = opt::<LogLevel>(&mut args, "--log-level")? {
        c.log_level = v;
    }
    if let Some(v) = opt::<LogFormat>(&mut args, "--log-format")? {
        c.log_format = v;
    }
    c.zenoh.connect = args
        .values_from_str("--zenoh-connect")
        .map_err(|e| format!("--zenoh-connect: {e}"))?;
    c.zenoh.listen = args
        .values_from_str("--zenoh-listen")
        .map_err(|e| format!("--zenoh-listen: {e}"))?;
    c.zenoh.mode = opt::<String>(&mut args, "--zenoh-mode")?;
    c.zenoh.config_file = opt::<String>(&mut args, "--zenoh-config")?.map(Into::into);
    if let Some(f) = &c.zenoh.config_file {
        // Zenoh reads the file again itself (`zenoh::Config::from_file`,
        // which reads it whole); this read refuses one past the size cap
        // first. JSON5 has no aliases, and Zenoh's YAML reader (serde_yaml)
        // stops alias expansion at its own repetition limit.
        crate::files::read("--zenoh-config", &f.to_string_lossy())?;
    }
    c.zenoh.scouting = args.contains("--zenoh-scouting");
    for d in args
        .values_from_str::<_, u64>("--ros-domain")
        .map_err(|e| format!("--ros-domain: {e}"))?
    {
        let max = rosgate_core::nodes::MAX_DOMAIN;
        match u8::try_from(d) {
            Ok(d) if d <= max => c.zenoh.ros_domains.push(d),
            _ => return Err(format!("--ros-domain {d}: ROS domain ids go up to {max}")),
        }
    }
    for d in args
        .values_from_str::<_, u64>("--dds-domain")
        .map_err(|e| format!("--dds-domain: {e}"))?
    {
        let max = rosgate_core::nodes::MAX_DOMAIN;
        match u8::try_from(d) {
            Ok(d) if d <= max => c.dds.domains.push(d),
            _ => return Err(format!("--dds-domain {d}: ROS domain ids go up to {max}")),
        }
    }
    c.dds.network = opt::<std::net::IpAddr>(&mut args, "--dds-network")?;
    if c.dds.network.is_some() && c.dds.domains.is_empty() {
        return Err("--dds-network goes with --dds-domain".into());
    }
    if !c.dds.domains.is_empty() && !cfg!(feature = "dds") {
        return Err(
            "--dds-domain: this rosgate was built without DDS; build it with `cargo build --release --features dds`".into(),
        );
    }
    c.interfaces = args
        .values_from_str::<_, String>("--interfaces")
        .map_err(|e| format!("--interfaces: {e}"))?
        .into_iter()
        .map(Into::into)
        .collect();
    if c.zenoh.given() && !cfg!(feature = "zenoh") {
        return Err(
            "--zenoh-* and --ros-domain: this rosgate was built without Zenoh; build it with `cargo build --release --features zenoh` (or `--features ros2`)".into(),
        );
    }
    if !c.zenoh.ros_domains.is_empty() && !cfg!(feature = "ros2") {
        return Err(
            "--ros-domain: this rosgate was built without ROS 2 interop; build it with `cargo build --release --features ros2`".into(),
        );
    }
    let tls_cert = opt::<String>(&mut args, "--tls-cert")?;
    let tls_key = opt::<String>(&mut args, "--tls-key")?;
    c.tls = crate::tls::from_flags(tls_cert, tls_key)?;
    let rest = args.finish();
    if let Some(first) = rest.first() {
        return Err(format!("unexpected argument {:?}", first.to_string_lossy()));
    }
    refuse_exposure(&c)?;
    Ok(Command::Serve(Box::new(c)))
}
