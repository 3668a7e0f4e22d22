//! `rosgate topic list|info|echo|pub|hz|bw`.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use rosgate_ros2::registry::Registry;
use rosgate_wire::encode;
use rosgate_wire::Raw;

use super::args::{self, Args};
use super::client::{json_quote, Client, Event, Frame, Req};
use super::output;
use super::{input, print, Ctx, Error};

pub const COMMANDS: &[(&str, &str)] = &[
    ("list", "list the topics (rosapi topics)"),
    (
        "info",
        "a topic's type, publishers and subscribers, with their QoS",
    ),
    ("echo", "print the messages of a topic"),
    ("pub", "publish a message"),
    ("hz", "print a topic's publishing rate"),
    ("bw", "print a topic's bandwidth"),
];

pub fn help(cmd: &str) -> Option<&'static str> {
    Some(match cmd {
        "list" => {
            "\
rosgate topic list - list the topics of the gateway's graph (rosapi topics)

USAGE:
    rosgate topic list [-t] [-c] [--include-hidden]

OPTIONS:
    -t, --show-types    print each topic's type: /chatter [std_msgs/msg/String]
    -c, --count-topics  print only the number of topics
    --include-hidden    include hidden topics (a name token starting with `_`)
"
        }
        "info" => {
            "\
rosgate topic info - a topic's type, publishers and subscribers (/rosgate/topic_info)

USAGE:
    rosgate topic info TOPIC [-v]

OPTIONS:
    -v, --verbose       each publisher and subscriber with its node and QoS,
                        and the incompatible QoS pairs
"
        }
        "echo" => {
            "\
rosgate topic echo - print the messages of a topic as they arrive

USAGE:
    rosgate topic echo TOPIC [TYPE] [OPTIONS]

Prints each message as YAML followed by `---` (as `ros2 topic echo`), until
Ctrl-C or the count. TYPE defaults to the topic's type in the graph.

OPTIONS:
    --once                  exit after the first message
    --count N               exit after N messages
    --json                  print each message as one line of JSON, as received
    --qos-reliability R     reliable|best_effort
    --qos-durability D      volatile|transient_local (latched messages)
    --qos-depth N           keep at most N messages waiting for this subscriber
    --compression C         none|cbor|cbor-raw: have the gateway send the
                            messages so (WebSocket URLs only); cbor-raw's CDR is
                            decoded here by TYPE (bundled definitions), other
                            types print the raw frame (secs, nsecs, bytes)
"
        }
        "pub" => {
            "\
rosgate topic pub - publish a message to a topic

USAGE:
    rosgate topic pub TOPIC TYPE [MSG] [OPTIONS]

MSG is JSON ('{\"data\": \"hi\"}') or YAML ('{data: hi}', as `ros2 topic pub`
takes it) [default: {}]. Publishes at --rate until Ctrl-C, or --once, or
--times N.

OPTIONS:
    -r, --rate HZ                       publishing rate [default: 1]
    -1, --once                          publish one message and exit
    -t, --times N                       publish N messages and exit
    -w, --wait-matching-subscriptions N wait for N subscribers first
                                        [default: 1 with --once/--times, else 0]
    --max-wait-time-secs S              give up waiting after S seconds (exit 1)
                                        [default: 10]
    --qos-reliability R                 reliable|best_effort
    --qos-durability D                  volatile|transient_local (latched)
    --qos-depth N                       messages kept for late subscribers
"
        }
        "hz" => {
            "\
rosgate topic hz - print the average publishing rate of a topic every second

USAGE:
    rosgate topic hz TOPIC [--window N]

Measured from the arrival times at this client (as `ros2 topic hz`): average
rate, min and max interval, their standard deviation and the window.

OPTIONS:
    -w, --window N      intervals the statistics cover [default: 10000]
"
        }
        "bw" => {
            "\
rosgate topic bw - print the bandwidth of a topic every second

USAGE:
    rosgate topic bw TOPIC [--window N]

Sizes are those of the messages' JSON (the bytes the gateway forwards).

OPTIONS:
    -w, --window N      messages the statistics cover [default: 100]
"
        }
        _ => return None,
    })
}

pub fn run(cmd: &str, mut a: Args, ctx: &Ctx) -> Result<(), Error> {
    match cmd {
        "list" => {
            let types = a.flag(["-t", "--show-types"]);
            let count = a.flag(["-c", "--count-topics"]);
            let hidden = a.flag("--include-hidden") | a.flag("--include-hidden-topics");
            a.finish(&[], 0)?;
            list(ctx, types, count, hidden)
        }
        "info" => {
            let verbose = a.flag(["-v", "--verbose"]);
            let p = a.finish(&["TOPIC"], 0)?;
            info(ctx, &p[0], verbose)
        }
        "echo" => {
            let once = a.flag("--once");
            let count = args::positive("--count", a.opt::<u64>(&["--count"])?)?;
            let json = a.flag("--json");
            let qos = qos(&mut a)?;
            let compression = a.opt::<String>(&["--compression"])?;
            if let Some(c) = &compression {
                // png frames are pixels for a browser's canvas; not read here.
                if !matches!(c.as_str(), "none" | "cbor" | "cbor-raw") {
                    return Err(Error::Usage(format!(
                        "--compression: {c:?} is not none|cbor|cbor-raw"
                    )));
                }
            }
            let p = a.finish(&["TOPIC"], 1)?;
            let count = if once { Some(1) } else { count };
            let opts = EchoOpts {
                qos,
                count,
                json,
                compression,
            };
            echo(ctx, &p[0], p.get(1).cloned(), opts)
        }
        "pub" => {
            let rate = args::positive("--rate", a.opt::<f64>(&["-r", "--rate"])?)?;
            let once = a.flag(["-1", "--once"]);
            let times = args::positive("--times", a.opt::<u64>(&["-t", "--times"])?)?;
            let wait = a.opt::<u64>(&["-w", "--wait-matching-subscriptions"])?;
            let max_wait = args::positive(
                "--max-wait-time-secs",
                a.opt::<f64>(&["--max-wait-time-secs"])?,
            )?;
            let qos = qos(&mut a)?;
            let p = a.finish(&["TOPIC", "TYPE"], 1)?;
            let msg = input::to_json(p.get(2).map_or("", String::as_str))
                .map_err(|e| Error::Usage(format!("MSG: {e}")))?;
            let times = if once { Some(1) } else { times };
            let opts = PubOpts {
                period: Duration::try_from_secs_f64(1.0 / rate.unwrap_or(1.0))
                    .map_err(|e| Error::Usage(format!("--rate: {e}")))?,
                times,
                wait: wait.unwrap_or(if times.is_some() { 1 } else { 0 }),
                max_wait: Duration::try_from_secs_f64(max_wait.unwrap_or(DEFAULT_MAX_WAIT_SECS))
                    .map_err(|e| Error::Usage(format!("--max-wait-time-secs: {e}")))?,
                qos,
            };
            publish(ctx, &p[0], &p[1], &msg, &opts)
        }
        "hz" => {
            let window = args::positive("--window", a.opt::<usize>(&["-w", "--window"])?)?;
            let p = a.finish(&["TOPIC"], 0)?;
            hz(ctx, &p[0], window.unwrap_or(10_000))
        }
        "bw" => {
            let window = args::positive("--window", a.opt::<usize>(&["-w", "--window"])?)?;
            let p = a.finish(&["TOPIC"], 0)?;
            bw(ctx, &p[0], window.unwrap_or(100))
        }
        _ => Err(Error::Usage(format!("unknown command {cmd:?}"))),
    }
}

/// `--qos-*` as the `qos` member of a subscribe or advertise.
fn qos(a: &mut Args) -> Result<Option<String>, Error> {
    let rel = a.opt::<String>(&["--qos-reliability"])?;
    let dur = a.opt::<String>(&["--qos-durability"])?;
    let depth = args::positive("--qos-depth", a.opt::<u32>(&["--qos-depth"])?)?;
    let mut parts = Vec::new();
    if let Some(r) = rel {
        if !matches!(r.as_str(), "reliable" | "best_effort" | "system_default") {
            return Err(Error::Usage(format!(
                "--qos-reliability: {r:?} is not reliable|best_effort"
            )));
        }
        parts.push(format!("\"reliability\":{}", json_quote(&r)));
    }
    if let Some(d) = dur {
        if !matches!(
            d.as_str(),
            "volatile" | "transient_local" | "system_default"
        ) {
            return Err(Error::Usage(format!(
                "--qos-durability: {d:?} is not volatile|transient_local"
            )));
        }
        parts.push(format!("\"durability\":{}", json_quote(&d)));
    }
    if let Some(n) = depth {
        if n > rosgate_wire::qos::MAX_QOS_DEPTH {
            return Err(Error::Usage(format!(
                "--qos-depth: at most {}",
                rosgate_wire::qos::MAX_QOS_DEPTH
            )));
        }
        parts.push(format!("\"depth\":{n}"));
    }
    Ok((!parts.is_empty()).then(|| format!("{{{}}}", parts.join(","))))
}

/// A list of strings from a reply member (`[]` when absent).
pub fn strings(values: &str, key: &str) -> Vec<String> {
    let Some(f) = Frame::parse(values.as_bytes()) else {
        return Vec::new();
    };
    let Some(raw) = f.raw(key) else {
        return Vec::new();
    };
    serde_json::from_str::<Vec<String>>(raw).unwrap_or_default()
}

/// A string member of a reply (`""` when absent).
pub fn string(values: &str, key: &str) -> String {
    Frame::parse(values.as_bytes())
        .and_then(|f| f.str(key).map(|s| s.into_owned()))
        .unwrap_or_default()
}

/// `{"include_hidden":true}` or `{}`.
pub fn hidden_args(hidden: bool) -> &'static str {
    if hidden {
        "{\"include_hidden\":true}"
    } else {
        "{}"
    }
}

fn list(ctx: &Ctx, types: bool, count: bool, hidden: bool) -> Result<(), Error> {
    let mut c = ctx.connect()?;
    let v = c.call("/rosapi/topics", hidden_args(hidden))?;
    c.close();
    let topics = strings(&v, "topics");
    let tys = strings(&v, "types");
    let mut out = String::new();
    if count {
        out.push_str(&format!("{}\n", topics.len()));
    } else {
        for (i, t) in topics.iter().enumerate() {
            if types {
                let ty = tys.get(i).map_or("", String::as_str);
                out.push_str(&format!("{t} [{ty}]\n"));
            } else {
                out.push_str(&format!("{t}\n"));
            }
        }
    }
    print(&out)
}

fn info(ctx: &Ctx, topic: &str, verbose: bool) -> Result<(), Error> {
    let mut c = ctx.connect()?;
    let args = format!("{{\"topic\":{}}}", json_quote(topic));
    let v = c.call("/rosgate/topic_info", &args)?;
    c.close();
    let f = Frame::parse(v.as_bytes())
        .ok_or_else(|| Error::Failed("unexpected answer from /rosgate/topic_info".into()))?;
    let list = |key: &str| -> Vec<String> {
        f.raw(key)
            .and_then(|r| serde_json::from_str::<Vec<&serde_json::value::RawValue>>(r).ok())
            .map(|v| v.iter().map(|r| r.get().to_string()).collect())
            .unwrap_or_default()
    };
    let ty = f.str("type").unwrap_or_default().into_owned();
    let pubs = list("publishers");
    let subs = list("subscribers");
    let bad = list("incompatible");
    if ty.is_empty() && pubs.is_empty() && subs.is_empty() {
        return Err(Error::Failed(format!("unknown topic {topic:?}")));
    }
    let mut out = format!("Type: {ty}\n");
    if !verbose {
        out.push_str(&format!(
            "Publisher count: {}\nSubscription count: {}\n",
            pubs.len(),
            subs.len()
        ));
        if !bad.is_empty() {
            out.push_str(&format!("Incompatible QoS pairs: {} (see -v)\n", bad.len()));
        }
        return print(&out);
    }
    let endpoint = |out: &mut String, e: &str, kind: &str| {
        let node = string(e, "node");
        out.push_str(&format!(
            "Node name: {node}\nEndpoint type: {kind}\nQoS profile:\n"
        ));
        let q = Frame::parse(e.as_bytes()).and_then(|f| f.raw("qos").map(str::to_string));
        let q = q.unwrap_or_else(|| "{}".into());
        let upper = |k: &str| match string(&q, k).as_str() {
            "" | "any" => "UNSTATED (matches any)".to_string(),
            s => s.to_ascii_uppercase(),
        };
        out.push_str(&format!("  Reliability: {}\n", upper("reliability")));
        out.push_str(&format!("  Durability: {}\n", upper("durability")));
        let depth = Frame::parse(q.as_bytes())
            .and_then(|f| f.raw("depth").map(str::to_string))
            .filter(|d| d != "null");
        match depth {
            Some(d) => out.push_str(&format!("  History (Depth): KEEP_LAST ({d})\n")),
            None => out.push_str("  History (Depth): UNSTATED\n"),
        }
        let ef = Frame::parse(e.as_bytes());
        let member = |k: &str| ef.as_ref().and_then(|f| f.raw(k).map(str::to_string));
        if let Some(n) = member("latched_messages") {
            out.push_str(&format!("Latched messages kept: {n}\n"));
        }
        if member("peers").as_deref() == Some("true") {
            out.push_str("Subscriber count notifications: yes\n");
        }
        if let Some(ms) = member("throttle_ms").filter(|m| m != "null") {
            out.push_str(&format!("Throttle: {ms} ms\n"));
        }
        out.push('\n');
    };
    out.push_str(&format!("\nPublisher count: {}\n\n", pubs.len()));
    for p in &pubs {
        endpoint(&mut out, p, "PUBLISHER");
    }
    out.push_str(&format!("Subscription count: {}\n\n", subs.len()));
    for s in &subs {
        endpoint(&mut out, s, "SUBSCRIPTION");
    }
    if !bad.is_empty() {
        out.push_str(&format!("Incompatible QoS pairs: {}\n\n", bad.len()));
        for b in &bad {
            out.push_str(&format!(
                "Publisher: {}\nSubscriber: {}\nOffered: {}\nRequested: {}\nWhy: {}\n\n",
                string(b, "publisher"),
                string(b, "subscriber"),
                Frame::parse(b.as_bytes())
                    .and_then(|f| f.raw("offered").map(str::to_string))
                    .unwrap_or_default(),
                Frame::parse(b.as_bytes())
                    .and_then(|f| f.raw("requested").map(str::to_string))
                    .unwrap_or_default(),
                string(b, "why"),
            ));
        }
    }
    print(&out)
}

/// Subscribes to `topic` (with its type from the graph unless given);
/// returns the request id, whose error status means the subscribe failed.
fn subscribe(
    c: &mut Client,
    topic: &str,
    ty: Option<String>,
    qos: Option<&str>,
) -> Result<String, Error> {
    subscribe_as(c, topic, ty, qos, None).map(|(id, _)| id)
}

/// [`subscribe`] in a `compression`; returns the request id and the type
/// subscribed with.
fn subscribe_as(
    c: &mut Client,
    topic: &str,
    ty: Option<String>,
    qos: Option<&str>,
    compression: Option<&str>,
) -> Result<(String, String), Error> {
    let ty = match ty {
        Some(t) => t,
        None => {
            let v = c.call(
                "/rosapi/topic_type",
                &format!("{{\"topic\":{}}}", json_quote(topic)),
            )?;
            string(&v, "type")
        }
    };
    let id = c.next_id();
    let mut req = Req::new("subscribe")
        .str("topic", topic)
        .str("type", &ty)
        .raw("id", &id);
    if let Some(q) = qos {
        req = req.raw("qos", q);
    }
    if let Some(comp) = compression {
        req = req.str("compression", comp);
    }
    c.send(&req.finish())?;
    Ok((id, ty))
}

/// What a subscriber's loop got.
enum Got {
    Msg(Frame),
    Tick,
    Stop,
}

/// The next message of the subscription `id` (or the tick at `until`, or
/// Ctrl-C); a refused subscription is an error.
fn next_msg(c: &mut Client, id: &str, until: Option<Instant>) -> Result<Got, Error> {
    loop {
        match c.next(until)? {
            Event::Stop => return Ok(Got::Stop),
            Event::Timeout => return Ok(Got::Tick),
            Event::Frame(f) => match f.op().as_ref() {
                "publish" => return Ok(Got::Msg(f)),
                "status" if f.has_id(id) => {
                    return Err(Error::Failed(f.str("msg").unwrap_or_default().into_owned()))
                }
                _ => {}
            },
        }
    }
}

/// `topic echo`'s options.
struct EchoOpts {
    qos: Option<String>,
    count: Option<u64>,
    json: bool,
    compression: Option<String>,
}

/// A `cbor-raw` message (`{"secs","nsecs","bytes":[..]}` as the CLI reads
/// the frame) decoded from its CDR by `ty`, when the definitions bundled
/// here know it.
fn raw_to_json(types: &Registry, ty: &str, msg: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(msg).ok()?;
    let bytes: Vec<u8> = v
        .get("bytes")?
        .as_array()?
        .iter()
        .map(|x| x.as_u64().and_then(|n| u8::try_from(n).ok()))
        .collect::<Option<_>>()?;
    let mut out = Vec::new();
    rosgate_ros2::cdr::decode_json(types, ty, &bytes, &mut out).ok()?;
    String::from_utf8(out).ok()
}

fn echo(ctx: &Ctx, topic: &str, ty: Option<String>, o: EchoOpts) -> Result<(), Error> {
    let EchoOpts {
        qos,
        count,
        json,
        compression,
    } = o;
    let mut c = ctx.connect()?;
    let (id, ty) = subscribe_as(&mut c, topic, ty, qos.as_deref(), compression.as_deref())?;
    let raw = compression.as_deref() == Some("cbor-raw");
    let types = raw.then(Registry::bundled_shared);
    let mut seen = 0u64;
    while count.is_none_or(|n| seen < n) {
        match next_msg(&mut c, &id, None)? {
            Got::Msg(f) => {
                let msg = f.raw("msg").unwrap_or("null");
                let decoded = types.as_ref().and_then(|t| raw_to_json(t, &ty, msg));
                let msg = decoded.as_deref().unwrap_or(msg);
                if json {
                    print(&format!("{msg}\n"))?;
                } else {
                    print(&format!("{}---\n", output::yaml(msg, 0)))?;
                }
                seen += 1;
            }
            Got::Tick => {}
            Got::Stop => break,
        }
    }
    c.close();
    Ok(())
}

/// How long `topic pub` waits for its matching subscribers unless
/// `--max-wait-time-secs` says. `ros2 topic pub` waits forever by default;
/// a bounded wait tells a script (or a newcomer) that nobody listens
/// instead of hanging, and 10 s covers a subscriber started alongside.
pub const DEFAULT_MAX_WAIT_SECS: f64 = 10.0;

struct PubOpts {
    /// 1 / `--rate`.
    period: Duration,
    times: Option<u64>,
    /// Matching subscribers to wait for before the first message (0: none).
    wait: u64,
    /// The longest that wait may take.
    max_wait: Duration,
    qos: Option<String>,
}

fn publish(ctx: &Ctx, topic: &str, ty: &str, msg: &str, o: &PubOpts) -> Result<(), Error> {
    let mut c = ctx.connect()?;
    let id = c.next_id();
    let mut req = Req::new("advertise")
        .str("topic", topic)
        .str("type", ty)
        .raw("id", &id);
    if o.wait > 0 {
        req = req.raw("peers", "true");
    }
    if let Some(q) = &o.qos {
        req = req.raw("qos", q);
    }
    c.send(&req.finish())?;
    c.check(&[&id])?;
    if o.wait > 0 {
        let s = if o.wait == 1 { "" } else { "s" };
        print(&format!(
            "Waiting for at least {} matching subscription{s}...\n",
            o.wait
        ))?;
        // A wait too long for the clock is no deadline at all.
        let until = Instant::now().checked_add(o.max_wait);
        let mut seen = 0;
        loop {
            match c.next(until)? {
                Event::Stop => {
                    c.close();
                    return Ok(());
                }
                Event::Timeout => {
                    c.close();
                    return Err(Error::Failed(format!(
                        "timed out waiting for subscribers: expected {} matching subscription{s}, \
                         found {seen} within {} s (--max-wait-time-secs); nothing was published",
                        o.wait,
                        o.max_wait.as_secs_f64()
                    )));
                }
                Event::Frame(f) if f.op() == "peers" => {
                    seen = f
                        .raw("subscribers")
                        .and_then(|n| n.parse::<u64>().ok())
                        .unwrap_or(0);
                    if seen >= o.wait {
                        break;
                    }
                }
                Event::Frame(_) => {}
            }
        }
    }
    let prefix = encode::publish_prefix(topic);
    let mut frame = Vec::new();
    encode::publish(&mut frame, &prefix, Raw::from_valid_json(msg));
    while frame.last() == Some(&b'\n') {
        frame.pop();
    }
    let period = o.period;
    print("publisher: beginning loop\n")?;
    let mut next = Instant::now();
    let mut n = 0u64;
    loop {
        c.send(&frame)?;
        n += 1;
        print(&format!("publishing #{n}: {msg}\n"))?;
        if o.times.is_some_and(|t| n >= t) {
            break;
        }
        next += period;
        if !pace(&mut c, next)? {
            c.close();
            return Ok(());
        }
    }
    // Everything published is handled before we leave.
    c.check(&[])?;
    c.close();
    Ok(())
}

/// Waits until `until` (reading what comes meanwhile); false on Ctrl-C.
fn pace(c: &mut Client, until: Instant) -> Result<bool, Error> {
    loop {
        match c.next(Some(until))? {
            Event::Stop => return Ok(false),
            Event::Timeout => return Ok(true),
            Event::Frame(_) => {}
        }
    }
}

/// `ros2 topic hz`'s statistics over the intervals between arrivals.
#[derive(Debug, PartialEq)]
pub struct Rate {
    pub rate: f64,
    pub min: f64,
    pub max: f64,
    pub std_dev: f64,
    /// Arrivals covered (intervals + 1).
    pub window: usize,
}

/// Statistics of `intervals` (seconds); `None` for none.
pub fn rate(intervals: &VecDeque<f64>) -> Option<Rate> {
    let n = intervals.len();
    if n == 0 {
        return None;
    }
    let mean = intervals.iter().sum::<f64>() / n as f64;
    let var = intervals.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / n as f64;
    Some(Rate {
        rate: if mean > 0.0 { 1.0 / mean } else { 0.0 },
        min: intervals.iter().copied().fold(f64::INFINITY, f64::min),
        max: intervals.iter().copied().fold(0.0, f64::max),
        std_dev: var.sqrt(),
        window: n + 1,
    })
}

fn hz(ctx: &Ctx, topic: &str, window: usize) -> Result<(), Error> {
    let mut c = ctx.connect()?;
    let id = subscribe(&mut c, topic, None, None)?;
    let mut intervals: VecDeque<f64> = VecDeque::new();
    let mut last: Option<Instant> = None;
    let mut fresh = false;
    let mut tick = Instant::now() + Duration::from_secs(1);
    loop {
        match next_msg(&mut c, &id, Some(tick))? {
            Got::Msg(_) => {
                let now = Instant::now();
                if let Some(prev) = last {
                    intervals.push_back((now - prev).as_secs_f64());
                    if intervals.len() > window {
                        intervals.pop_front();
                    }
                    fresh = true;
                }
                last = Some(now);
            }
            Got::Tick => {
                tick += Duration::from_secs(1);
                if !fresh {
                    if last.is_some() {
                        print("no new messages\n")?;
                    }
                    continue;
                }
                fresh = false;
                if let Some(r) = rate(&intervals) {
                    print(&format!(
                        "average rate: {:.3}\n\tmin: {:.3}s max: {:.3}s std dev: {:.5}s window: {}\n",
                        r.rate, r.min, r.max, r.std_dev, r.window
                    ))?;
                }
            }
            Got::Stop => break,
        }
    }
    c.close();
    Ok(())
}

fn bw(ctx: &Ctx, topic: &str, window: usize) -> Result<(), Error> {
    let mut c = ctx.connect()?;
    let id = subscribe(&mut c, topic, None, None)?;
    print(&format!("Subscribed to [{topic}]\n"))?;
    let mut seen: VecDeque<(Instant, usize)> = VecDeque::new();
    let mut fresh = false;
    let mut tick = Instant::now() + Duration::from_secs(1);
    loop {
        match next_msg(&mut c, &id, Some(tick))? {
            Got::Msg(f) => {
                let size = f.raw("msg").map_or(0, str::len);
                seen.push_back((Instant::now(), size));
                if seen.len() > window {
                    seen.pop_front();
                }
                fresh = true;
            }
            Got::Tick => {
                tick += Duration::from_secs(1);
                if !fresh {
                    continue;
                }
                fresh = false;
                let total: usize = seen.iter().map(|(_, s)| s).sum();
                let since = seen.front().map_or(0.0, |(t, _)| t.elapsed().as_secs_f64());
                let per_sec = if since > 0.0 {
                    total as f64 / since
                } else {
                    0.0
                };
                let n = seen.len();
                let min = seen.iter().map(|(_, s)| *s).min().unwrap_or(0);
                let max = seen.iter().map(|(_, s)| *s).max().unwrap_or(0);
                print(&format!(
                    "{}/s from {n} messages\n\tMessage size mean: {} min: {} max: {}\n",
                    output::bytes(per_sec),
                    output::bytes(total as f64 / n.max(1) as f64),
                    output::bytes(min as f64),
                    output::bytes(max as f64),
                ))?;
            }
            Got::Stop => break,
        }
    }
    c.close();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_statistics() {
        let iv: VecDeque<f64> = [0.05, 0.05, 0.04, 0.06].into_iter().collect();
        let r = rate(&iv).unwrap();
        assert!((r.rate - 20.0).abs() < 1e-9, "{r:?}");
        assert_eq!((r.min, r.max, r.window), (0.04, 0.06, 5));
        assert!((r.std_dev - 0.007_071).abs() < 1e-5, "{r:?}");
        assert!(rate(&VecDeque::new()).is_none());
    }
}
