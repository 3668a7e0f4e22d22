//! `rosgate bag record|info|play`: rosbag2 bags (MCAP storage) recorded
//! from and played into a running gateway, without a ROS install.
//!
//! | module | owns |
//! |---|---|
//! | this one | flags, help, dispatch |
//! | `control` | play's pause/resume: schedule, player services, space key |
//! | `frame` | a `cbor-raw` frame and a CDR `header.stamp`, read (sans-io) |
//! | `metadata` | `metadata.yaml`: written as rosbag2 Jazzy does, parsed back |
//! | `record` | the recorder: subscriptions, discovery, MCAP files, splitting |
//! | `info` | a bag's summary; reading unfinished files |
//! | `play` | republishing a bag's CDR at the recorded pace |
//! | `qos` | `--qos-profile-overrides-path`: rosbag2's override file, mapped |
//! | `stream` | a bag file's messages read with bounded memory |
//!
//! Differences from `ros2 bag`: docs/cli.md, "rosgate bag".

mod control;
mod frame;
mod info;
mod metadata;
mod play;
mod qos;
mod record;
mod stream;

use record::MAX_BAG_TOPICS;

use std::time::Duration;

use regex::Regex;

use super::args::{self, Args};
use super::{Ctx, Error};

pub const COMMANDS: &[(&str, &str)] = &[
    ("record", "record topics to a rosbag2 bag (MCAP)"),
    ("info", "print a bag's files, times and topics"),
    ("play", "publish a bag's messages at the recorded pace"),
];

pub fn help(cmd: &str) -> Option<&'static str> {
    Some(match cmd {
        "record" => {
            "\
rosgate bag record - record topics to a rosbag2 bag (MCAP storage)

USAGE:
    rosgate bag record [TOPIC...] [-a] [-e RE] [OPTIONS] --url ws://HOST:PORT

Subscribes with cbor-raw (the CDR as published, reliable, deepest queue)
and writes DIR/metadata.yaml and DIR/DIR_0.mcap, DIR_1.mcap, ... until
Ctrl-C or SIGTERM, which finish the files and exit 0. Needs a WebSocket URL.

OPTIONS:
    -o, --output DIR            bag directory [default: rosbag2_<date>-<time>]
    -a, --all                   every topic, now and as they appear
    -e, --regex RE              topics matching RE, now and as they appear
    -x, --exclude RE            not the topics matching RE
    --include-hidden-topics     with -a/-e, hidden topics too
    --max-bag-size BYTES        start a new file past this size
    --max-bag-duration S        start a new file after S seconds
    --compression C             zstd|lz4|none: MCAP chunk compression [default: none]
    --qos-profile-overrides-path FILE
                                rosbag2 QoS overrides (YAML, topic -> profile)
                                for the recorder's subscriptions
"
        }
        "info" => {
            "\
rosgate bag info - print a bag's files, size, times and topics

USAGE:
    rosgate bag info DIR|FILE.mcap
"
        }
        "play" => {
            "\
rosgate bag play - publish a bag's messages at the recorded pace

USAGE:
    rosgate bag play DIR|FILE.mcap [OPTIONS]

Advertises each topic with its recorded type (latched where it was
transient local) and publishes its CDR as recorded (raw CDR publish).
Space pauses and resumes (stdin a terminal); any client can call the
services /rosbag2_player/pause, /resume, /toggle_paused, /is_paused.

OPTIONS:
    -r, --rate X            pace factor [default: 1]
    -l, --loop              start again at the end
    --topics T...           only these topics (repeat or list after it)
    --start-offset S        skip the first S seconds
    --clock [HZ]            publish /clock (rosgraph_msgs/Clock) [default HZ: 40]
    --start-paused          start paused (space, or the service
                            /rosbag2_player/resume, starts it)
    --qos-profile-overrides-path FILE
                            rosbag2 QoS overrides (YAML, topic -> profile)
                            for the player's publishers
"
        }
        _ => return None,
    })
}

fn regex(name: &str, v: Option<String>) -> Result<Option<Regex>, Error> {
    v.map(|r| Regex::new(&r).map_err(|e| Error::Usage(format!("{name}: {e}"))))
        .transpose()
}

/// `--qos-profile-overrides-path FILE`, read and mapped (notes on what
/// does not map go to stderr).
fn qos_overrides(a: &mut Args) -> Result<std::collections::BTreeMap<String, qos::Override>, Error> {
    let Some(path) = a.opt::<String>(&["--qos-profile-overrides-path"])? else {
        return Ok(Default::default());
    };
    let (m, notes) = qos::load(&path, MAX_BAG_TOPICS)
        .map_err(|e| Error::Usage(format!("--qos-profile-overrides-path: {e}")))?;
    for n in notes {
        eprintln!("[rosgate bag] QoS override: {n}");
    }
    Ok(m)
}

pub fn run(cmd: &str, mut a: Args, ctx: &Ctx) -> Result<(), Error> {
    match cmd {
        "record" => {
            let out = a.opt::<String>(&["-o", "--output"])?;
            let all = a.flag(["-a", "--all"]);
            let re = regex("--regex", a.opt::<String>(&["-e", "--regex"])?)?;
            let exclude = regex("--exclude", a.opt::<String>(&["-x", "--exclude"])?)?;
            let hidden = a.flag("--include-hidden-topics");
            let max_size = args::positive("--max-bag-size", a.opt::<u64>(&["--max-bag-size"])?)?;
            let max_dur =
                args::positive("--max-bag-duration", a.opt::<f64>(&["--max-bag-duration"])?)?;
            let compression = match a.opt::<String>(&["--compression"])?.as_deref() {
                None | Some("none") => None,
                Some("zstd") => Some(mcap::Compression::Zstd),
                Some("lz4") => Some(mcap::Compression::Lz4),
                Some(c) => {
                    return Err(Error::Usage(format!(
                        "--compression: {c:?} is not zstd|lz4|none"
                    )))
                }
            };
            let qos = qos_overrides(&mut a)?;
            let topics = a.finish(&[], MAX_BAG_TOPICS)?;
            let max_duration = max_dur
                .map(|s| {
                    Duration::try_from_secs_f64(s)
                        .map_err(|e| Error::Usage(format!("--max-bag-duration: {e}")))
                })
                .transpose()?;
            record::run(
                ctx,
                record::Opts {
                    out,
                    topics,
                    all,
                    regex: re,
                    exclude,
                    hidden,
                    max_size,
                    max_duration,
                    compression,
                    qos,
                },
            )
        }
        "info" => {
            let p = a.finish(&["DIR|FILE"], 0)?;
            info::run(&p[0])
        }
        "play" => {
            let rate = args::positive("--rate", a.opt::<f64>(&["-r", "--rate"])?)?.unwrap_or(1.0);
            let looping = a.flag(["-l", "--loop"]);
            let start_paused = a.flag("--start-paused");
            let offset = a.opt::<f64>(&["--start-offset"])?.unwrap_or(0.0);
            if offset.is_nan() || offset < 0.0 {
                return Err(Error::Usage(
                    "--start-offset: not a number of seconds >= 0".into(),
                ));
            }
            let mut topics: Vec<String> = Vec::new();
            if let Some(t) = a.opt::<String>(&["--topics"])? {
                topics.push(args::absolute(&t));
            }
            let clock = if a.flag("--clock") {
                Some(40.0)
            } else {
                args::positive("--clock-hz", a.opt::<f64>(&["--clock-hz"])?)?
            };
            let qos = qos_overrides(&mut a)?;
            let p = a.finish(&["DIR|FILE"], MAX_BAG_TOPICS)?;
            // `--topics a b` puts b among the positionals.
            topics.extend(p[1..].iter().map(|t| args::absolute(t)));
            play::run(
                ctx,
                &p[0],
                play::Opts {
                    rate,
                    looping,
                    topics,
                    offset_ns: (offset * 1e9) as u64,
                    clock_hz: clock,
                    qos,
                    start_paused,
                },
            )
        }
        _ => Err(Error::Usage(format!("unknown command {cmd:?}"))),
    }
}
