//! `rosgate demo`: a small robot for a fresh gateway, so that every command
//! of the README's CLI block has something to show (as `ros2 run
//! demo_nodes_cpp talker` does for `ros2`). It is a plain client of a
//! running gateway, like every other command: one blocking connection
//! ([`Client`]), the public protocol, the wire crate's encoder.
//!
//! It declares five nodes under `/demo` and serves:
//!
//! | node | what |
//! |---|---|
//! | `/demo/talker` | publishes `/chatter` (`std_msgs/msg/String`, `"Hello World: N"`) at `publish_rate` Hz; parameters `publish_rate` (double, 0.1-100, default 10), `greeting` (string), `enabled` (bool), followed live through `/parameter_events` |
//! | `/demo/listener` | subscribes `/chatter` and prints what others publish there (so `topic pub --once` finds a subscriber) |
//! | `/demo/add_two_ints_server` | serves `/add_two_ints` (`example_interfaces/srv/AddTwoInts`) |
//! | `/demo/fibonacci_action_server` | serves `/fibonacci` (`example_interfaces/action/Fibonacci`): one feedback per step, [`STEP`] apart, cancellable |
//! | `/demo/robot_state_publisher` | latches `/robot_description` (`std_msgs/msg/String`, a small URDF) |
//!
//! Ctrl-C (SIGINT) or SIGTERM ends it: goals in flight are aborted, every
//! registration is withdrawn (unadvertise, unsubscribe, destroy_node), the
//! gateway confirms, and the connection closes; exit 0. A gateway that
//! cannot be reached exits 3, a refused set-up 1.
//!
//! Each turn of its loop handles at most one frame from the gateway, then
//! the work that is due: at most one talker message (a late tick is
//! skipped, never bursted) and one step of each goal in flight, of which
//! there are at most [`MAX_GOALS`]. Nothing it keeps grows with time.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use rosgate_wire::encode;
use rosgate_wire::Raw;

use super::args::Args;
use super::client::{json_quote, Client, Event, Frame, Req};
use super::url::Url;
use super::{print, Ctx, Error};

/// The demo's namespace: its nodes are `/demo/<name>`.
const NAMESPACE: &str = "/demo";
const TALKER: &str = "talker";
const LISTENER: &str = "listener";
const ADDER: &str = "add_two_ints_server";
const FIBONACCI: &str = "fibonacci_action_server";
const STATE_PUBLISHER: &str = "robot_state_publisher";
const NODES: [&str; 5] = [TALKER, LISTENER, ADDER, FIBONACCI, STATE_PUBLISHER];

const CHATTER: &str = "/chatter";
const STRING_TYPE: &str = "std_msgs/msg/String";
const ADD_SERVICE: &str = "/add_two_ints";
const ADD_TYPE: &str = "example_interfaces/srv/AddTwoInts";
const FIB_ACTION: &str = "/fibonacci";
const FIB_TYPE: &str = "example_interfaces/action/Fibonacci";
const ROBOT_DESCRIPTION: &str = "/robot_description";
const PARAM_EVENTS: &str = "/parameter_events";
const PARAM_EVENT_TYPE: &str = "rcl_interfaces/msg/ParameterEvent";

/// The talker's rate unless `publish_rate` is set (Hz).
const DEFAULT_RATE_HZ: f64 = 10.0;
/// `publish_rate`'s declared range (Hz): the gateway refuses sets outside it.
const RATE_RANGE_HZ: (f64, f64) = (0.1, 100.0);
/// The talker's default greeting (`greeting`).
const DEFAULT_GREETING: &str = "Hello World";
/// The time between two steps (two feedbacks) of a Fibonacci goal.
pub const STEP: Duration = Duration::from_millis(500);
/// Goals in flight at once; a goal beyond is aborted at once with the reason.
pub const MAX_GOALS: usize = 16;
/// The largest `order` served: the sequence is `int32[]`, and F(47)
/// overflows an int32.
const MAX_ORDER: u64 = 46;
/// The talker's last messages, remembered so the listener can tell its own
/// node's messages (which the gateway echoes back to this connection) from
/// others'. At the largest rate a message comes back within a turn or two.
const OWN_ECHOES: usize = 16;

/// What `/robot_description` holds: a box with a laser on top.
const URDF: &str = r#"<?xml version="1.0"?>
<robot name="rosgate_demo">
  <link name="base_link">
    <visual><geometry><box size="0.4 0.3 0.1"/></geometry></visual>
  </link>
  <link name="laser">
    <visual><geometry><cylinder radius="0.03" length="0.04"/></geometry></visual>
  </link>
  <joint name="base_to_laser" type="fixed">
    <parent link="base_link"/>
    <child link="laser"/>
    <origin xyz="0.15 0 0.07" rpy="0 0 0"/>
  </joint>
</robot>
"#;

pub fn help() -> &'static str {
    "\
rosgate demo - serve a small demo robot through a running gateway

USAGE:
    rosgate demo [OPTIONS]

A client of the gateway (as `ros2 run demo_nodes_cpp talker`) that declares
nodes under /demo and serves, until Ctrl-C:
    /chatter            std_msgs/msg/String 'Hello World: N' at 10 Hz
                        (/demo/talker; its parameters publish_rate, greeting
                        and enabled change it live); /demo/listener prints
                        what others publish there
    /add_two_ints       example_interfaces/srv/AddTwoInts
    /fibonacci          example_interfaces/action/Fibonacci, one feedback
                        per step (0.5 s)
    /robot_description  std_msgs/msg/String, latched: a small URDF
Ctrl-C or SIGTERM withdraws everything and exits 0.
"
}

/// The talker's state: its parameters and its schedule.
struct Talker {
    rate: f64,
    greeting: String,
    enabled: bool,
    /// Messages published.
    count: u64,
    next: Instant,
    /// The raw JSON of its last [`OWN_ECHOES`] messages.
    recent: VecDeque<String>,
}

impl Talker {
    fn period(&self) -> Duration {
        Duration::from_secs_f64(1.0 / self.rate)
    }
}

/// A Fibonacci goal in flight.
struct Goal {
    /// The gateway's goal id, raw JSON (`"rg-7"`).
    id: String,
    order: u64,
    sequence: Vec<i64>,
    feedback: bool,
    next: Instant,
}

impl Goal {
    fn values(&self) -> String {
        let items: Vec<String> = self.sequence.iter().map(i64::to_string).collect();
        format!("{{\"sequence\":[{}]}}", items.join(","))
    }
}

fn full(node: &str) -> String {
    format!("{NAMESPACE}/{node}")
}

fn log(node: &str, text: &str) -> Result<(), Error> {
    print(&format!("[INFO] [{}]: {text}\n", full(node)))
}

/// Sends what an encoder wrote (it ends with a newline; the connection adds
/// its own framing).
fn send_encoded(c: &mut Client, mut frame: Vec<u8>) -> Result<(), Error> {
    while frame.last() == Some(&b'\n') {
        frame.pop();
    }
    c.send(&frame)
}

/// Sends `req` with a fresh id and the node it belongs to; returns the id.
fn request(c: &mut Client, req: Req, node: &str) -> Result<String, Error> {
    let id = c.next_id();
    let req = req.str("node", node).raw("id", &id).finish();
    c.send(&req)?;
    Ok(id)
}

pub fn run(a: Args, ctx: &Ctx) -> Result<(), Error> {
    a.finish(&[], 0)?;
    // Over TCP the demo's own nodes join `--domain`; the CLI's hidden node
    // would become their connection's default node instead.
    let mut common = ctx.common.clone();
    let domain = match common.url {
        Url::Tcp { .. } => common.domain.take(),
        Url::Ws { .. } => None,
    };
    let mut c = Client::connect(&common, ctx.stop.clone())?;
    c.refusals_fatal = false;
    let mut talker = Talker {
        rate: DEFAULT_RATE_HZ,
        greeting: DEFAULT_GREETING.to_string(),
        enabled: true,
        count: 0,
        next: Instant::now(),
        recent: VecDeque::with_capacity(OWN_ECHOES),
    };
    set_up(&mut c, domain)?;
    print(&format!(
        "rosgate demo: serving through {}{}; Ctrl-C withdraws everything\n\
         \x20 {talker:<32}publishes {CHATTER} [{STRING_TYPE}] at publish_rate Hz\n\
         \x20 {:<32}parameters publish_rate (double), greeting (string), enabled (bool)\n\
         \x20 {listener:<32}subscribes {CHATTER}, prints what others publish\n\
         \x20 {adder:<32}serves {ADD_SERVICE} [{ADD_TYPE}]\n\
         \x20 {fib:<32}serves {FIB_ACTION} [{FIB_TYPE}]\n\
         \x20 {rsp:<32}latches {ROBOT_DESCRIPTION} [{STRING_TYPE}]\n\
         Ready. Try: rosgate topic echo {CHATTER}\n",
        ctx.common.url,
        ctx.common
            .domain
            .map_or(String::new(), |d| format!(" in domain {d}")),
        "",
        talker = full(TALKER),
        listener = full(LISTENER),
        adder = full(ADDER),
        fib = full(FIBONACCI),
        rsp = full(STATE_PUBLISHER),
    ))?;
    let mut goals: VecDeque<Goal> = VecDeque::with_capacity(MAX_GOALS);
    let chatter = encode::publish_prefix(CHATTER);
    loop {
        let mut until = if talker.enabled {
            talker.next
        } else {
            Instant::now() + Duration::from_secs(1)
        };
        for g in &goals {
            until = until.min(g.next);
        }
        match c.next(Some(until))? {
            Event::Stop => break,
            Event::Timeout => {}
            Event::Frame(f) => handle(&mut c, &f, &mut talker, &mut goals)?,
        }
        let now = Instant::now();
        if talker.enabled && now >= talker.next {
            talk(&mut c, &chatter, &mut talker)?;
            talker.next += talker.period();
            if talker.next < now {
                // Late (a slow turn, a suspended process): skip, never burst.
                talker.next = now + talker.period();
            }
        }
        let mut i = 0;
        while i < goals.len() {
            if goals[i].next <= now && step(&mut c, &mut goals[i])? {
                goals.remove(i);
            } else {
                i += 1;
            }
        }
    }
    // Ctrl-C: a second one while withdrawing exits at once.
    c.clear_stop();
    withdraw(c, goals)
}

/// Declares the nodes and registers everything; any refusal ends the demo
/// with exit status 1.
fn set_up(c: &mut Client, domain: Option<u8>) -> Result<(), Error> {
    let mut ids = Vec::new();
    for node in NODES {
        let id = c.next_id();
        let mut req = Req::new("declare_node")
            .str("name", node)
            .str("namespace", NAMESPACE);
        if let Some(d) = domain {
            req = req.raw("domain", &d.to_string());
        }
        c.send(&req.raw("id", &id).finish())?;
        ids.push(id);
    }
    let advertise =
        |topic: &str, ty: &str| Req::new("advertise").str("topic", topic).str("type", ty);
    ids.push(request(c, advertise(CHATTER, STRING_TYPE), TALKER)?);
    let params: [(&str, String, String); 3] = [
        (
            "publish_rate",
            format!("{DEFAULT_RATE_HZ:?}"),
            format!(
                "{{\"description\":\"messages per second on /chatter\",\"floating_point_range\":{{\"from_value\":{:?},\"to_value\":{:?},\"step\":0.0}}}}",
                RATE_RANGE_HZ.0, RATE_RANGE_HZ.1
            ),
        ),
        (
            "greeting",
            json_quote(DEFAULT_GREETING),
            "{\"description\":\"the text before the count\"}".into(),
        ),
        (
            "enabled",
            "true".into(),
            "{\"description\":\"whether the talker publishes\"}".into(),
        ),
    ];
    for (name, value, descriptor) in &params {
        let req = Req::new("declare_parameter")
            .str("name", name)
            .raw("value", value)
            .raw("descriptor", descriptor);
        ids.push(request(c, req, TALKER)?);
    }
    let subscribe =
        |topic: &str, ty: &str| Req::new("subscribe").str("topic", topic).str("type", ty);
    ids.push(request(
        c,
        subscribe(PARAM_EVENTS, PARAM_EVENT_TYPE),
        TALKER,
    )?);
    ids.push(request(c, subscribe(CHATTER, STRING_TYPE), LISTENER)?);
    let req = Req::new("advertise_service")
        .str("service", ADD_SERVICE)
        .str("type", ADD_TYPE);
    ids.push(request(c, req, ADDER)?);
    let req = Req::new("advertise_action")
        .str("action", FIB_ACTION)
        .str("type", FIB_TYPE);
    ids.push(request(c, req, FIBONACCI)?);
    let req = advertise(ROBOT_DESCRIPTION, STRING_TYPE).raw("latch", "true");
    ids.push(request(c, req, STATE_PUBLISHER)?);
    let mut frame = Vec::new();
    let msg = format!("{{\"data\":{}}}", json_quote(URDF));
    encode::publish(
        &mut frame,
        &encode::publish_prefix(ROBOT_DESCRIPTION),
        Raw::from_valid_json(&msg),
    );
    send_encoded(c, frame)?;
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    c.check(&refs).map_err(|e| match e {
        Error::Failed(why) => {
            Error::Failed(format!("the gateway refused the demo's set-up: {why}"))
        }
        other => other,
    })
}

/// One talker message.
fn talk(c: &mut Client, prefix: &[u8], t: &mut Talker) -> Result<(), Error> {
    t.count += 1;
    let text = format!("{}: {}", t.greeting, t.count);
    let msg = format!("{{\"data\":{}}}", json_quote(&text));
    let mut frame = Vec::with_capacity(prefix.len() + msg.len() + 2);
    encode::publish(&mut frame, prefix, Raw::from_valid_json(&msg));
    send_encoded(c, frame)?;
    if t.count == 1 {
        log(
            TALKER,
            &format!("Publishing: '{text}' (then every {:.3} s)", 1.0 / t.rate),
        )?;
    }
    if t.recent.len() == OWN_ECHOES {
        t.recent.pop_front();
    }
    t.recent.push_back(msg);
    Ok(())
}

/// One frame from the gateway.
fn handle(
    c: &mut Client,
    f: &Frame,
    talker: &mut Talker,
    goals: &mut VecDeque<Goal>,
) -> Result<(), Error> {
    let name = |key: &str| f.str(key).unwrap_or_default().into_owned();
    match f.op().as_ref() {
        "publish" => match name("topic").as_str() {
            CHATTER => {
                let msg = f.raw("msg").unwrap_or("null");
                if !talker.recent.iter().any(|m| m == msg) {
                    let data = Frame::parse(msg.as_bytes())
                        .and_then(|m| m.str("data").map(|d| d.into_owned()))
                        .unwrap_or_else(|| msg.to_string());
                    log(LISTENER, &format!("I heard: [{data}]"))?;
                }
            }
            PARAM_EVENTS => parameter_event(f.raw("msg").unwrap_or("null"), talker)?,
            _ => {}
        },
        "call_service" => {
            let id = f.raw("id").unwrap_or("null");
            let service = json_quote(&name("service"));
            let mut out = Vec::new();
            if name("service") == ADD_SERVICE {
                match add(f.raw("args").unwrap_or("null")) {
                    Ok((a, b, sum)) => {
                        log(ADDER, &format!("Incoming request a: {a} b: {b}"))?;
                        let values = format!("{{\"sum\":{sum}}}");
                        encode::service_response(
                            &mut out,
                            service.as_bytes(),
                            Some(id.as_bytes()),
                            values.as_bytes(),
                            b"true",
                            None,
                        );
                    }
                    Err(why) => encode::service_failure(
                        &mut out,
                        service.as_bytes(),
                        Some(id.as_bytes()),
                        &why,
                    ),
                }
            } else {
                let why = format!("the demo does not serve {}", name("service"));
                encode::service_failure(&mut out, service.as_bytes(), Some(id.as_bytes()), &why);
            }
            send_encoded(c, out)?;
        }
        "send_action_goal" => {
            let id = f.raw("id").unwrap_or("null").to_string();
            let order = Frame::parse(f.raw("args").unwrap_or("null").as_bytes())
                .and_then(|a| a.raw("order").and_then(|o| o.parse::<u64>().ok()));
            let refuse = match order {
                _ if goals.len() >= MAX_GOALS => Some(format!(
                    "the demo runs at most {MAX_GOALS} goals at once (MAX_GOALS)"
                )),
                Some(o) if o <= MAX_ORDER => None,
                _ => Some(format!(
                    "order must be an integer in 0..={MAX_ORDER} (the sequence is int32[])"
                )),
            };
            let action = json_quote(FIB_ACTION);
            if let Some(why) = refuse {
                let mut out = Vec::new();
                encode::action_failure(&mut out, action.as_bytes(), id.as_bytes(), 6, &why);
                return send_encoded(c, out);
            }
            let order = order.unwrap_or(0);
            log(
                FIBONACCI,
                &format!("Received goal request with order {order}"),
            )?;
            goals.push_back(Goal {
                id,
                order,
                sequence: vec![0, 1],
                feedback: f.raw("feedback") == Some("true"),
                next: Instant::now() + STEP,
            });
        }
        "cancel_action_goal" => {
            let id = f.raw("id").unwrap_or("null");
            if let Some(i) = goals.iter().position(|g| g.id == id) {
                if let Some(g) = goals.remove(i) {
                    log(FIBONACCI, "Goal canceled")?;
                    let mut out = Vec::new();
                    let action = json_quote(FIB_ACTION);
                    encode::action_result(
                        &mut out,
                        action.as_bytes(),
                        g.id.as_bytes(),
                        g.values().as_bytes(),
                        b"5",
                        b"true",
                    );
                    send_encoded(c, out)?;
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// `{a, b}` -> `(a, b, a + b)`, or why not.
fn add(args: &str) -> Result<(i64, i64, i64), String> {
    let f = Frame::parse(args.as_bytes()).ok_or("args must be an object {a, b}")?;
    let int = |k: &str| {
        f.raw(k)
            .and_then(|v| v.parse::<i64>().ok())
            .ok_or_else(|| format!("{k} must be an int64"))
    };
    let (a, b) = (int("a")?, int("b")?);
    let sum = a
        .checked_add(b)
        .ok_or_else(|| format!("{a} + {b} does not fit an int64"))?;
    Ok((a, b, sum))
}

/// One step of a goal; true when it ended (its result sent).
fn step(c: &mut Client, g: &mut Goal) -> Result<bool, Error> {
    let action = json_quote(FIB_ACTION);
    let mut out = Vec::new();
    if g.sequence.len() as u64 <= g.order {
        let n = g.sequence.len();
        g.sequence.push(g.sequence[n - 1] + g.sequence[n - 2]);
        if g.feedback {
            encode::action_feedback(
                &mut out,
                action.as_bytes(),
                g.id.as_bytes(),
                g.values().as_bytes(),
            );
            send_encoded(c, std::mem::take(&mut out))?;
        }
    }
    if (g.sequence.len() as u64) <= g.order {
        g.next += STEP;
        return Ok(false);
    }
    log(FIBONACCI, "Goal succeeded")?;
    encode::action_result(
        &mut out,
        action.as_bytes(),
        g.id.as_bytes(),
        g.values().as_bytes(),
        b"4",
        b"true",
    );
    send_encoded(c, out)?;
    Ok(true)
}

/// Follows the talker's parameters as `/parameter_events` reports them.
fn parameter_event(msg: &str, t: &mut Talker) -> Result<(), Error> {
    let Ok(event) = serde_json::from_str::<serde_json::Value>(msg) else {
        return Ok(());
    };
    if event["node"] != full(TALKER).as_str() {
        return Ok(());
    }
    for key in ["new_parameters", "changed_parameters"] {
        let Some(list) = event[key].as_array() else {
            continue;
        };
        for p in list {
            let v = &p["value"];
            match p["name"].as_str() {
                Some("publish_rate") => {
                    // The gateway holds it to the declared range; the
                    // check keeps a bad event from making a bad period.
                    let in_range = |r: &f64| (RATE_RANGE_HZ.0..=RATE_RANGE_HZ.1).contains(r);
                    if let Some(r) = v["double_value"].as_f64().filter(in_range) {
                        if r != t.rate {
                            t.rate = r;
                            t.next = t.next.min(Instant::now() + t.period());
                            log(TALKER, &format!("publish_rate is now {r} Hz"))?;
                        }
                    }
                }
                Some("greeting") => {
                    if let Some(g) = v["string_value"].as_str().filter(|g| *g != t.greeting) {
                        t.greeting = g.to_string();
                        log(TALKER, &format!("greeting is now '{g}'"))?;
                    }
                }
                Some("enabled") => {
                    if let Some(e) = v["bool_value"].as_bool().filter(|e| *e != t.enabled) {
                        t.enabled = e;
                        t.next = Instant::now();
                        log(TALKER, if e { "enabled" } else { "disabled" })?;
                    }
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// Ends the goals in flight, withdraws every registration and node, waits
/// until the gateway handled it all, and closes.
fn withdraw(mut c: Client, goals: VecDeque<Goal>) -> Result<(), Error> {
    let action = json_quote(FIB_ACTION);
    for g in &goals {
        let mut out = Vec::new();
        encode::action_failure(
            &mut out,
            action.as_bytes(),
            g.id.as_bytes(),
            6,
            "the demo is stopping",
        );
        send_encoded(&mut c, out)?;
    }
    let mut ids = Vec::new();
    let unadvertise = |topic: &str| Req::new("unadvertise").str("topic", topic);
    let unsubscribe = |topic: &str| Req::new("unsubscribe").str("topic", topic);
    ids.push(request(
        &mut c,
        Req::new("unadvertise_action").str("action", FIB_ACTION),
        FIBONACCI,
    )?);
    ids.push(request(
        &mut c,
        Req::new("unadvertise_service").str("service", ADD_SERVICE),
        ADDER,
    )?);
    ids.push(request(&mut c, unadvertise(CHATTER), TALKER)?);
    ids.push(request(
        &mut c,
        unadvertise(ROBOT_DESCRIPTION),
        STATE_PUBLISHER,
    )?);
    ids.push(request(&mut c, unsubscribe(CHATTER), LISTENER)?);
    ids.push(request(&mut c, unsubscribe(PARAM_EVENTS), TALKER)?);
    for node in NODES {
        let id = c.next_id();
        let req = Req::new("destroy_node")
            .str("name", node)
            .raw("id", &id)
            .finish();
        c.send(&req)?;
        ids.push(id);
    }
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    c.check(&refs)?;
    c.close();
    print("rosgate demo: withdrawn (nodes, topics, service, action); bye\n")
}
