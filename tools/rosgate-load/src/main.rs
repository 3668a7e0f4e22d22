//! `rosgate-load`: load generator for rosgate and, through the
//! [`transport::Codec`] seam, for Redis and NATS on the same scenarios
//! (`scripts/compare.sh`), plus a raw-TCP baseline.
//!
//! By default one thread, one mio poll loop, so the tool uses one core and
//! leaves the others to the server; `scripts/load.sh` pins both with
//! `taskset`. `--threads N` spreads the connections over N such loops
//! (`workers`), so that a fan-out run is limited by the server, not the
//! tool. This
//! file only parses flags, picks the transport, and prints; see `runner`
//! for the event loop and the verification rules.
//!
//! | module | owns |
//! |---|---|
//! | `scenario` | scenario kinds, `Params` and their defaults |
//! | `runner` | the event loop, flow control, per-message verification |
//! | `transport` | the `Codec` trait every adapter implements |
//! | `rosgate` | the rosbridge-style JSON adapter |
//! | `redis` | RESP2 pub/sub adapter |
//! | `foxglove` | Foxglove WebSocket subscribers (rosbridge TCP publishers of `std_msgs/msg/String`, or Foxglove `clientPublish` of its CDR) |
//! | `nats` | NATS text protocol adapter (pub/sub, request/reply) |
//! | `raw` | one loopback TCP stream, no server (baseline) |
//! | `payload` | payload stamping, padding, and its check |
//! | `net` | socket read/write buffers, connect completion |
//! | `histogram` | HDR-style latency histogram |
//! | `procfs` | CPU and RSS of the tool and the server |
//! | `report` | the human line and `RESULT {json}` |
//! | `ticker` | the timerfd that paces open-loop sends |
//! | `ws` | any codec over a WebSocket: `ws` (rosbridge JSON), `nats-ws` |
//! | `workers` | what the worker threads of one run share (`--threads`): progress, wake-ups, gates, pinning |
//! | `images` | the `images` scenario: its own loop (TCP publisher, WebSocket subscribers), per-encoding tallies and report |
//! | `image` | the Image message: the publisher's JSON line, the JSON / `cbor` / `cbor-raw` decoders, the CDR reader |
//! | `text` | the `strings` scenario's String message: its `data` layout and JSON decoder |
//! | `cbor` | a minimal CBOR reader |
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod cbor;
mod foxglove;
mod histogram;
mod image;
mod images;
mod nats;
mod net;
mod payload;
mod procfs;
mod raw;
mod redis;
mod report;
mod rosgate;
mod runner;
mod scenario;
mod text;
mod ticker;
mod transport;
mod workers;
mod ws;

use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use crate::foxglove::{Foxglove, FoxgloveCdr, FoxgloveCdrIds, FoxgloveSource};
use crate::image::ImageSize;
use crate::images::ImageParams;
use crate::nats::Nats;
use crate::raw::{Raw, Relay, SourceFormat};
use crate::redis::Redis;
use crate::rosgate::Rosgate;
use crate::runner::RunError;
use crate::scenario::{Overrides, Params, RunSettings, Scenario};
use crate::transport::Codec;
use crate::ws::{NatsWs, RosgateWs};

const USAGE: &str = "\
rosgate-load - load generator for rosgate (rosbridge-style TCP/JSON)

USAGE:
    rosgate-load [OPTIONS]

SCENARIOS (--scenario):
    fanout    1 publisher -> N subscribers on one topic, closed loop
    fanin     N publishers -> 1 subscriber on one topic, closed loop
    calls     C callers -> one echoing service provider, closed loop
    goals     C callers -> one action server (ROS 2 actions, rosbridge v2
              ops; rosgate transport only), closed loop: each goal gets
              --feedback feedback messages, then its result
    idle      K idle connections: server RSS per connection, idle CPU
    latency   open loop at --rate per publisher; latency from the intended
              send time (no coordinated omission)
    large     fanout of large messages (default 1 publisher, 1 subscriber,
              1 MiB)
    images    1 publisher (TCP JSON lines at --addr) sends sensor_msgs/msg/Image
              rgb8 open loop at --rate (default 30/s) to --subs WebSocket
              subscribers at --ws-addr, each in one of --encodings; reports
              loss, latency (from the header stamp), bytes per subscriber and
              server CPU per delivered image, per encoding
    strings   the same loop for std_msgs/msg/String (JSON subscribers
              only): data is \"<send ns> <seq> \" then x padding to --size
              bytes [default: 64], open loop at --rate [default: 1000]

OUTSIDE PUBLISHER (images, strings: --publisher none):
    The tool only subscribes; the topic's messages come from another
    process on this machine (e.g. an rclpy node in a ROS 2 graph the
    gateway joined; scripts/ros2-dds-perf.sh). Its stamps must be
    wall-clock ns (CLOCK_REALTIME, Python's time.time_ns()): Image in
    header.stamp, String as the first number of data. Its sequence number
    (Image: header.frame_id in decimal; String: the second number of
    data, \"<send ns> <seq> <padding>\") goes up by one per message from any
    start: each subscriber syncs on its first message and counts gaps
    from there as loss. An Image's data must be rgb8 of --image-size
    with byte i = i % 251 (the tool's own pattern). The measured interval
    is the wall-clock --duration after --warmup; latency is arrival minus
    stamp, so it includes the publisher's own send path. The report's
    msgs_per_s_per_sub is the delivered rate; --publisher-pid PID adds the
    publisher's CPU over the measured interval.

OPTIONS:
    --addr ADDR          gateway address, loopback only [default: 127.0.0.1:9095]
    --source-addr ADDR   publishers, service providers and action servers
                         connect here instead (another gateway of a
                         federation: measures the way across) [default: --addr]
    --settle SECS        wait after setup before the run, for a federation
                         to carry interest and providers across [default: 0]
    --scenario NAME      see above [default: fanout]
    --transport NAME     wire protocol adapter [default: rosgate]:
                           rosgate  rosbridge-style JSON lines
                           redis    RESP pub/sub (no calls, no goals)
                           nats     NATS pub/sub; calls as request/reply
                                    (no goals)
                           ws       rosbridge v2 JSON over WebSocket (the
                                    gateway's --ws-listen port as --addr),
                                    one message per text frame
                           nats-ws  the NATS protocol over nats-server's
                                    WebSocket listener (websocket {
                                    no_tls: true }), in binary frames
                           foxglove Foxglove WebSocket subscribers
                                    (offering foxglove.websocket.v1 and
                                    foxglove.sdk.v1) at --addr;
                                    publishers send std_msgs/msg/String
                                    (the payload as `data`) as rosbridge
                                    JSON lines to --source-addr, so the
                                    gateway makes CDR (measured: fanout, large)
                           foxglove-cdr  the same subscribers; the
                                    publishers are Foxglove clients at
                                    --addr too, publishing the String as
                                    CDR on a `cdr` client channel, which
                                    the gateway passes on untouched
                           foxglove-cdr-ids  the same, each subscriber
                                    with its own subscription id (one
                                    frame per id at the gateway)
                           foxglove-source  the same subscribers against
                                    a server that publishes by itself
                                    (scripts/foxglove-sdk-pub.py): no
                                    publishers; fanout/large, --pubs 1
                           raw      no server: one TCP stream from a
                                    --raw-source at --addr (baseline;
                                    fanout/large, --pubs 1 --subs 1)
                           relay    no server: --subs streams of a
                                    gateway's publish lines from a
                                    --raw-source --raw-format rosgate
                                    --subs N (the fan-out ceiling;
                                    fanout/large, --pubs 1)
    --raw-source         be the sender of a raw run instead: listen on --addr
                         (port 0: any; printed on stderr), wait for --subs
                         connections [default: 1] and stream the same --size
                         payloads of --topic to each until one closes; then
                         the next group; runs until killed
    --raw-format FMT     what a --raw-source writes: raw (frames for
                         --transport raw) or rosgate (a gateway's publish
                         lines, encoded once per message, for --transport
                         relay: the fan-out ceiling) [default: raw]
    --pubs N             publishers [fanout/latency/large: 1, fanin: 16]
    --subs N             subscribers [fanout: 16, others: 1]
    --callers N          callers [default: 32]
    --inflight N         calls (goals) each caller keeps outstanding
                         [default: 1]; rosgate fails goals beyond 1024 per
                         caller and 4096 per action server by default
    --feedback N         goals: feedback messages per goal [default: 4]
    --conns N            idle connections [default: 10000]
    --idle-subscribed    idle: each connection subscribes to --topic (one
                         topic, nothing published), acknowledged before the
                         RSS is read: the memory of an idle subscriber
    --size BYTES         payload size [default: 64; large: 1048576]
    --window N           closed loop: messages a publisher may be ahead of
                         its slowest subscriber [default: 1000, lowered so
                         that N x size <= 4 MiB]
    --rate N             latency: messages/s per publisher [default: 20000];
                         images: images/s [default: 30]; strings: [1000]
    --publisher WHO      images, strings: tool (ours, TCP JSON lines at
                         --addr) or none (see OUTSIDE PUBLISHER) [default: tool]
    --publisher-pid PID  with --publisher none: read its CPU from /proc/PID
    --duration SECS      measured time [default: 5]
    --warmup SECS        unmeasured (but verified) lead-in [default: 0.5]
    --drain SECS         wait for stragglers after the run [default: 3]
    --setup-timeout SECS connect + subscribe deadline [default: 30]
    --threads N          worker threads, each with its own poll loop and a
                         round-robin share of the connections (subscribers,
                         then publishers, provider, callers); every check
                         spans all of them [default: 1; idle: 1 only]
    --pin-cpus LIST      pin worker w to CPU LIST[w mod len], e.g. 1 or 0,1
                         or 2-3; the tool counts as saturated at 90% of
                         min(threads, distinct CPUs) cores [default: none]
    --server-pid PID     read the server's CPU and RSS from /proc/PID
    --ws-addr ADDR       images: the gateway's WebSocket address, loopback
                         only [default: 127.0.0.1:9090]
    --image-size WxH     images: 640x480 or 1280x720 [default: 640x480]
    --encodings LIST     images: comma-separated json, cbor, cbor-raw, or mix
                         (all three); subscriber i takes entry i mod length
                         [default: json]
    --topic NAME         topic used [default: /bench/0; images: /bench/image;
                         strings: /bench/string]
    --service NAME       service used [default: /bench/echo]
    --action NAME        action used [default: /bench/goal]
    -h, --help           print this help

PAYLOAD:
    Payload size is the size of the JSON object carried in `msg` (topics),
    `args` (calls, goals) or `values` (feedback), which the gateway
    forwards verbatim; the envelope
    around it (op, topic, newline) is extra. The object is
        {\"p\":<source>,\"s\":<seq>,\"t\":<intended send ns>,\"d\":\"<padding>\"}
    padded to exactly --size bytes (or the bare stamp, if larger). Every
    delivery is checked: sequence +1 per publisher at each subscriber,
    padding intact (a pattern offset by source and sequence), right topic;
    every call reply must carry its own call's arguments. Goals: every
    feedback carries its goal's stamp with `t` replaced by the feedback's
    index, and must be the next index of a goal still in flight; the
    result must carry the goal's own arguments and come after exactly
    --feedback feedbacks. MB/s counts payload bytes, 10^6 per MB.

OUTPUT:
    One human line, then `RESULT {json}`. A run with loss, reordering,
    corruption, failed calls or goals, lost feedback or dropped
    connections prints FAILED and the
    counts instead of a rate. Tool and server CPU (% of one core, over the
    measured interval; the tool's summed over its threads) show which side
    was the bottleneck: the tool is saturated at 90% of min(--threads, its
    CPUs) cores.

EXIT STATUS:
    0 clean run, 1 loss/corruption/reordering, 2 usage error, 3 the run
    could not be carried out (connect, setup timeout, protocol error).
";

fn main() -> ExitCode {
    let (transport, params, raw_source) = match parse_args() {
        Ok(Some(Mode::Images(p))) => return run_images(p),
        Ok(Some(Mode::Run(t, p, raw))) => (t, p, raw),
        Ok(None) => return ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("rosgate-load: {msg}\n\nRun `rosgate-load --help` for usage.");
            return ExitCode::from(2);
        }
    };
    if let Some((group, format)) = raw_source {
        if let Err(e) = raw::serve(params.addr, params.size, &params.topic, group, format) {
            eprintln!("rosgate-load: raw source on {}: {e}", params.addr);
        }
        return ExitCode::from(3);
    }
    // The idle scenario holds thousands of sockets.
    let nofile = procfs::raise_nofile();
    let needed = (params.conns + params.subs + params.pubs + params.callers + 64) as u64;
    if nofile > 0 && nofile < needed {
        eprintln!("rosgate-load: open-file limit {nofile} is below the {needed} this run needs");
        return ExitCode::from(2);
    }
    if params.scenario == Scenario::Goals
        && ![Rosgate::NAME, RosgateWs::NAME].contains(&transport.as_str())
    {
        eprintln!(
            "rosgate-load: transport {transport} has no actions: \
             --scenario goals needs --transport rosgate"
        );
        return ExitCode::from(2);
    }
    let outcome = match transport.as_str() {
        "rosgate" => run::<Rosgate>(params),
        "redis" => run::<Redis>(params),
        "nats" => run::<Nats>(params),
        "ws" => run::<RosgateWs>(params),
        "nats-ws" => run::<NatsWs>(params),
        "relay" => {
            let closed = matches!(params.scenario, Scenario::Fanout | Scenario::Large);
            if !closed || params.pubs != 1 {
                eprintln!(
                    "rosgate-load: --transport relay reads a --raw-source --raw-format rosgate: \
                     fanout or large with --pubs 1 only"
                );
                return ExitCode::from(2);
            }
            run::<Relay>(params)
        }
        "foxglove" => {
            // The publishers speak rosbridge TCP: not to the Foxglove port.
            if params.source_addr.is_none() && params.pubs > 0 {
                eprintln!(
                    "rosgate-load: --transport foxglove needs --source-addr \
                     (the gateway's TCP address, for the publishers)"
                );
                return ExitCode::from(2);
            }
            run::<Foxglove>(params)
        }
        "foxglove-cdr" => {
            // Publishers and subscribers both speak Foxglove, at --addr.
            let mut params = params;
            params.source_addr = None;
            run::<FoxgloveCdr>(params)
        }
        "foxglove-cdr-ids" => {
            let mut params = params;
            params.source_addr = None;
            run::<FoxgloveCdrIds>(params)
        }
        "foxglove-source" => {
            if params.pubs != 1 || !matches!(params.scenario, Scenario::Fanout | Scenario::Large) {
                eprintln!(
                    "rosgate-load: --transport foxglove-source is one server-side publisher: \
                     fanout or large with --pubs 1"
                );
                return ExitCode::from(2);
            }
            run::<FoxgloveSource>(params)
        }
        "raw" => {
            // The source sends as fast as TCP takes it: closed loop only.
            let closed = matches!(params.scenario, Scenario::Fanout | Scenario::Large);
            if !closed || params.pubs != 1 || params.subs != 1 {
                eprintln!(
                    "rosgate-load: --transport raw is one stream from a --raw-source: \
                     fanout or large with --pubs 1 --subs 1 only"
                );
                return ExitCode::from(2);
            }
            run::<Raw>(params)
        }
        other => {
            eprintln!("rosgate-load: unknown transport {other:?} (rosgate|redis|nats|ws|nats-ws|raw|foxglove|foxglove-cdr|foxglove-cdr-ids|foxglove-source)");
            return ExitCode::from(2);
        }
    };
    match outcome {
        // The checks cannot see a raw source that sent nothing at all.
        Ok(o) if [Raw::NAME, Relay::NAME].contains(&o.transport) && o.tally.delivered == 0 => {
            eprintln!(
                "rosgate-load: the raw source at {} sent nothing",
                o.params.addr
            );
            ExitCode::from(3)
        }
        Ok(o) => {
            // A closed stdout (`| head`) must not turn a result into a panic.
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{}", o.human());
            let _ = writeln!(out, "RESULT {}", o.json());
            let _ = out.flush();
            if o.clean() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(e) => {
            eprintln!("rosgate-load: {e}");
            ExitCode::from(3)
        }
    }
}

/// The `images` scenario runs its own loop (see `images`).
fn run_images(p: ImageParams) -> ExitCode {
    match images::Runner::new(p).and_then(images::Runner::run) {
        Ok(o) => {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{}", o.human());
            let _ = writeln!(out, "RESULT {}", o.json());
            let _ = out.flush();
            if o.clean() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(e) => {
            eprintln!("rosgate-load: images: {e}");
            ExitCode::from(3)
        }
    }
}

/// What the command line asks for.
enum Mode {
    /// A scenario of the shared runner: transport, run, and when the tool
    /// is to be a raw source instead, its group size and format.
    Run(String, Params, Option<(usize, SourceFormat)>),
    Images(ImageParams),
}

fn run<C: Codec + Send + 'static>(params: Params) -> Result<runner::Outcome, RunError> {
    runner::run::<C>(params)
}

fn secs(name: &str, v: f64) -> Result<Duration, String> {
    Duration::try_from_secs_f64(v)
        .map_err(|_| format!("{name}: {v} is not a valid number of seconds"))
}

/// `Ok(None)` when `--help` was answered; otherwise what to run.
fn parse_args() -> Result<Option<Mode>, String> {
    let mut args = pico_args::Arguments::from_env();
    if args.contains(["-h", "--help"]) {
        print!("{USAGE}");
        return Ok(None);
    }
    let raw_source = args.contains("--raw-source");
    let raw_format = match args
        .opt_value_from_str::<_, String>("--raw-format")
        .map_err(|e| e.to_string())?
        .as_deref()
    {
        None | Some("raw") => SourceFormat::Raw,
        Some("rosgate") => SourceFormat::Rosgate,
        Some(other) => return Err(format!("--raw-format {other:?}: raw or rosgate")),
    };
    let u = |e: pico_args::Error| e.to_string();
    let addr: SocketAddr = args
        .opt_value_from_str("--addr")
        .map_err(u)?
        .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 9095)));
    let scenario_name: Option<String> = args.opt_value_from_str("--scenario").map_err(u)?;
    if let Some(name @ ("images" | "strings")) = scenario_name.as_deref() {
        if raw_source {
            return Err(format!("--raw-source is not a sender of {name}"));
        }
        let strings = name == "strings";
        return parse_images(args, addr, strings).map(|p| Some(Mode::Images(p)));
    }
    let scenario: Scenario = match scenario_name {
        Some(s) => s.parse().map_err(|e: String| format!("{e} (or images)"))?,
        None => Scenario::Fanout,
    };
    let transport: String = args
        .opt_value_from_str("--transport")
        .map_err(u)?
        .unwrap_or_else(|| "rosgate".into());
    let o = Overrides {
        pubs: args.opt_value_from_str("--pubs").map_err(u)?,
        subs: args.opt_value_from_str("--subs").map_err(u)?,
        callers: args.opt_value_from_str("--callers").map_err(u)?,
        conns: args.opt_value_from_str("--conns").map_err(u)?,
        size: args.opt_value_from_str("--size").map_err(u)?,
        window: args.opt_value_from_str("--window").map_err(u)?,
        inflight: args.opt_value_from_str("--inflight").map_err(u)?,
        feedback: args.opt_value_from_str("--feedback").map_err(u)?,
        rate: args.opt_value_from_str("--rate").map_err(u)?,
    };
    // A raw source serves this many connections at once [default: 1].
    let raw_group = o.subs.unwrap_or(1);
    let mut dur = |name: &'static str, default: f64| -> Result<Duration, String> {
        let v: Option<f64> = args.opt_value_from_str(name).map_err(u)?;
        secs(name, v.unwrap_or(default))
    };
    let duration = dur("--duration", 5.0)?;
    let warmup = dur("--warmup", 0.5)?;
    let drain = dur("--drain", 3.0)?;
    let setup_timeout = dur("--setup-timeout", 30.0)?;
    let settle = dur("--settle", 0.0)?;
    let source_addr: Option<SocketAddr> = args.opt_value_from_str("--source-addr").map_err(u)?;
    let idle_subscribed = args.contains("--idle-subscribed");
    let threads: usize = args
        .opt_value_from_str("--threads")
        .map_err(u)?
        .unwrap_or(1);
    let pin_cpus = match args
        .opt_value_from_str::<_, String>("--pin-cpus")
        .map_err(u)?
    {
        Some(s) => workers::parse_cpus(&s)?,
        None => Vec::new(),
    };
    let server_pid: Option<u32> = args.opt_value_from_str("--server-pid").map_err(u)?;
    let topic: String = args
        .opt_value_from_str("--topic")
        .map_err(u)?
        .unwrap_or_else(|| "/bench/0".into());
    let service: String = args
        .opt_value_from_str("--service")
        .map_err(u)?
        .unwrap_or_else(|| "/bench/echo".into());
    let action: String = args
        .opt_value_from_str("--action")
        .map_err(u)?
        .unwrap_or_else(|| "/bench/goal".into());
    let rest = args.finish();
    if let Some(first) = rest.first() {
        return Err(format!("unexpected argument {:?}", first.to_string_lossy()));
    }
    if let Some(pid) = server_pid {
        if procfs::proc_cpu(pid).is_err() {
            return Err(format!("--server-pid {pid}: no such process"));
        }
    }
    let mut params = Params::resolve(
        scenario,
        addr,
        o,
        RunSettings {
            duration,
            warmup,
            drain,
            setup_timeout,
            server_pid,
            topic,
            service,
            action,
        },
    )?;
    params.idle_subscribed = idle_subscribed;
    if !(1..=workers::MAX_THREADS).contains(&threads) {
        return Err(format!(
            "--threads {threads}: 1 to {}",
            workers::MAX_THREADS
        ));
    }
    if threads > 1 && scenario == Scenario::Idle {
        // Its pacing reads server counters between batches: one loop.
        return Err("--scenario idle runs on one thread (--threads 1)".into());
    }
    params.threads = threads;
    params.pin_cpus = pin_cpus;
    if let Some(a) = source_addr {
        if !a.ip().is_loopback() {
            return Err(format!("--source-addr {a} is not a loopback address"));
        }
    }
    params.source_addr = source_addr;
    params.settle = settle;
    let raw_source = raw_source.then_some((raw_group, raw_format));
    Ok(Some(Mode::Run(transport, params, raw_source)))
}

/// The `images` scenario's flags (the shared ones it does not use are
/// refused as unexpected).
fn parse_images(
    mut args: pico_args::Arguments,
    addr: SocketAddr,
    strings: bool,
) -> Result<ImageParams, String> {
    let u = |e: pico_args::Error| e.to_string();
    let scenario = if strings { "strings" } else { "images" };
    let transport: Option<String> = args.opt_value_from_str("--transport").map_err(u)?;
    if transport.as_deref().is_some_and(|t| t != Rosgate::NAME) {
        return Err(format!("--scenario {scenario} needs --transport rosgate"));
    }
    let ws_addr: SocketAddr = args
        .opt_value_from_str("--ws-addr")
        .map_err(u)?
        .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 9090)));
    let size: ImageSize = args
        .opt_value_from_str("--image-size")
        .map_err(u)?
        .unwrap_or(ImageSize {
            width: 640,
            height: 480,
        });
    let encodings = match args
        .opt_value_from_str::<_, String>("--encodings")
        .map_err(u)?
    {
        Some(s) => image::parse_encodings(&s)?,
        None => vec![image::Encoding::Json],
    };
    let rate: u64 = args
        .opt_value_from_str("--rate")
        .map_err(u)?
        .unwrap_or(if strings { 1000 } else { 30 });
    let outside = match args
        .opt_value_from_str::<_, String>("--publisher")
        .map_err(u)?
        .as_deref()
    {
        None | Some("tool") => false,
        Some("none") => true,
        Some(other) => return Err(format!("--publisher {other:?}: tool or none")),
    };
    let publisher_pid: Option<u32> = args.opt_value_from_str("--publisher-pid").map_err(u)?;
    let data_size: usize = args.opt_value_from_str("--size").map_err(u)?.unwrap_or(64);
    let subs: usize = args.opt_value_from_str("--subs").map_err(u)?.unwrap_or(1);
    let mut dur = |name: &'static str, default: f64| -> Result<Duration, String> {
        let v: Option<f64> = args.opt_value_from_str(name).map_err(u)?;
        secs(name, v.unwrap_or(default))
    };
    let duration = dur("--duration", 5.0)?;
    let warmup = dur("--warmup", 0.5)?;
    let drain = dur("--drain", 3.0)?;
    let setup_timeout = dur("--setup-timeout", 30.0)?;
    let server_pid: Option<u32> = args.opt_value_from_str("--server-pid").map_err(u)?;
    let topic: String = args
        .opt_value_from_str("--topic")
        .map_err(u)?
        .unwrap_or_else(|| {
            if strings {
                "/bench/string".into()
            } else {
                "/bench/image".into()
            }
        });
    let rest = args.finish();
    if let Some(first) = rest.first() {
        return Err(format!(
            "unexpected argument {:?} for --scenario {scenario}",
            first.to_string_lossy()
        ));
    }
    for (flag, pid) in [
        ("--server-pid", server_pid),
        ("--publisher-pid", publisher_pid),
    ] {
        if let Some(pid) = pid {
            if procfs::proc_cpu(pid).is_err() {
                return Err(format!("{flag} {pid}: no such process"));
            }
        }
    }
    let p = ImageParams {
        addr,
        ws_addr,
        size,
        rate,
        subs,
        encodings,
        duration,
        warmup,
        drain,
        setup_timeout,
        server_pid,
        topic,
        kind: if strings {
            images::Kind::String { size: data_size }
        } else {
            images::Kind::Image
        },
        outside,
        publisher_pid,
    };
    p.validate()?;
    Ok(p)
}
