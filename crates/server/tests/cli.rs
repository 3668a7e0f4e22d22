//! The command-line client (`rosgate topic echo ...`, docs/cli.md) against a
//! real gateway: each test starts its own gateway on ephemeral ports, plays
//! the other side (publisher, subscriber, service provider, action server,
//! parameter owner) with a raw TCP client, and runs the CLI as a subprocess.
//!
//! Every wait has a deadline; a CLI that does not exit in time is killed and
//! the test fails with its output.

#[path = "it/support.rs"]
#[allow(dead_code)]
mod support;

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::*;

/// How long a CLI that should exit may take.
const EXIT: Duration = Duration::from_secs(20);

fn tcp_url(gw: &Gateway) -> String {
    format!("tcp://{}", gw.addr)
}

fn ws_url(gw: &Gateway) -> String {
    let addr = gw
        .logs()
        .iter()
        .find_map(|l| {
            l.split("websocket listening on ws://")
                .nth(1)
                .map(|a| a.trim().to_string())
        })
        .expect("websocket listening line");
    format!("ws://{addr}/")
}

fn command(url: &str, args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.args(args)
        .arg("--url")
        .arg(url)
        .env_remove("ROSGATE_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// Runs `rosgate ARGS --url URL` to completion.
fn run_at(url: &str, args: &[&str]) -> Output {
    let child = command(url, args).spawn().expect("spawn the CLI");
    wait_output(child, args)
}

fn run(gw: &Gateway, args: &[&str]) -> Output {
    run_at(&tcp_url(gw), args)
}

/// Runs the binary with exactly `args` (no `--url`).
fn run_bare(args: &[&str]) -> Output {
    let child = Command::new(BIN)
        .args(args)
        .env_remove("ROSGATE_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the CLI");
    wait_output(child, args)
}

fn wait_output(mut child: Child, args: &[&str]) -> Output {
    let dl = Instant::now() + EXIT;
    loop {
        if child.try_wait().expect("try_wait").is_some() {
            return child.wait_with_output().expect("output");
        }
        if Instant::now() >= dl {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!(
                "`rosgate {}` did not exit within {EXIT:?}; stdout: {}; stderr: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        thread::sleep(ms(10));
    }
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Asserts the exit status, showing the output when it differs.
fn assert_exit(o: &Output, code: i32, what: &str) {
    assert_eq!(
        o.status.code(),
        Some(code),
        "{what}: exit status; stdout: {}; stderr: {}",
        stdout(o),
        stderr(o)
    );
}

/// A long-running CLI whose stdout lines arrive on a channel.
struct Running {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Running {
    fn start(url: &str, args: &[&str]) -> Running {
        let mut child = command(url, args).spawn().expect("spawn the CLI");
        let out = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Running {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Reads lines until `pred` held for `n` of them (counting from the start).
    fn wait_lines(&mut self, n: usize, within: Duration, pred: impl Fn(&str) -> bool) {
        let dl = Instant::now() + within;
        while self.seen.iter().filter(|l| pred(l)).count() < n {
            let left = dl.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) => self.seen.push(l),
                Err(_) => panic!(
                    "wanted {n} matching lines within {within:?}; got {:?}",
                    self.seen
                ),
            }
        }
    }

    fn interrupt(&self) {
        let rc = unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGINT) };
        assert_eq!(rc, 0, "kill(SIGINT)");
    }

    /// Waits for exit; returns the status code and every stdout line.
    fn finish(mut self) -> (Option<i32>, Vec<String>) {
        let dl = Instant::now() + EXIT;
        let status = loop {
            if let Some(st) = self.child.try_wait().expect("try_wait") {
                break st;
            }
            if Instant::now() >= dl {
                let _ = self.child.kill();
                panic!(
                    "the CLI did not exit within {EXIT:?}; stdout: {:?}",
                    self.seen
                );
            }
            thread::sleep(ms(10));
        };
        while let Ok(l) = self.lines.recv_timeout(ms(500)) {
            self.seen.push(l);
        }
        (status.code(), std::mem::take(&mut self.seen))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Publishes `msg` on `topic` every `period` (on an absolute schedule) until
/// dropped.
struct Publisher {
    stop: Arc<AtomicBool>,
    handle: Option<thread::JoinHandle<()>>,
}

impl Publisher {
    fn start(gw: &Gateway, topic: &str, msg: &str, period: Duration) -> Publisher {
        let mut c = gw.client();
        let id = format!("adv-{}", uniq());
        c.send_json(&json!({"op":"advertise","topic":topic,"type":"std_msgs/msg/String","id":id}));
        c.expect_info(id);
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let (topic, msg) = (topic.to_string(), msg.to_string());
        let handle = thread::spawn(move || {
            let mut next = Instant::now();
            while !flag.load(Ordering::Relaxed) {
                c.publish(&topic, &msg);
                next += period;
                if let Some(d) = next.checked_duration_since(Instant::now()) {
                    thread::sleep(d);
                }
            }
        });
        Publisher {
            stop,
            handle: Some(handle),
        }
    }
}

impl Drop for Publisher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Sends `req` (with a fresh id) and expects its info status.
fn request(c: &mut Client, mut req: Value) -> Value {
    let id = format!("req-{}", uniq());
    req["id"] = json!(id);
    c.send_json(&req);
    c.expect_info(id)
}

// ---------------------------------------------------------------------------------------------
// topic
// ---------------------------------------------------------------------------------------------

#[test]
fn topic_list_shows_the_graph_with_types() {
    let gw = Gateway::start(&[]);
    let mut c = gw.client();
    request(
        &mut c,
        json!({"op":"advertise","topic":"/cli/chatter","type":"std_msgs/msg/String"}),
    );
    request(
        &mut c,
        json!({"op":"advertise","topic":"/cli/_hidden","type":"std_msgs/msg/Int32"}),
    );

    let o = run(&gw, &["topic", "list", "-t"]);
    assert_exit(&o, 0, "topic list -t");
    let text = stdout(&o);
    assert!(
        text.contains("/cli/chatter [std_msgs/msg/String]\n"),
        "{text}"
    );
    assert!(
        text.contains("/rosout [rcl_interfaces/msg/Log]\n"),
        "{text}"
    );
    assert!(!text.contains("_hidden"), "{text}");

    let o = run(&gw, &["topic", "list"]);
    assert_exit(&o, 0, "topic list");
    let names: Vec<String> = stdout(&o).lines().map(str::to_string).collect();
    assert!(names.contains(&"/cli/chatter".to_string()), "{names:?}");
    assert!(names.iter().all(|n| !n.contains(' ')), "{names:?}");

    let o = run(&gw, &["topic", "list", "--include-hidden"]);
    assert!(stdout(&o).contains("/cli/_hidden\n"), "{}", stdout(&o));
    let o = run(&gw, &["topic", "list", "-c"]);
    assert_eq!(stdout(&o).trim(), names.len().to_string());
}

#[test]
fn topic_info_counts_endpoints_and_shows_qos() {
    let gw = Gateway::start(&[]);
    let mut p = gw.client();
    request(
        &mut p,
        json!({"op":"advertise","topic":"/cli/info","type":"std_msgs/msg/String","qos":{"reliability":"reliable","depth":5}}),
    );
    let mut s = gw.client();
    request(
        &mut s,
        json!({"op":"subscribe","topic":"/cli/info","type":"std_msgs/msg/String"}),
    );

    let o = run(&gw, &["topic", "info", "/cli/info"]);
    assert_exit(&o, 0, "topic info");
    assert_eq!(
        stdout(&o),
        "Type: std_msgs/msg/String\nPublisher count: 1\nSubscription count: 1\n"
    );
    let o = run(&gw, &["topic", "info", "/cli/info", "-v"]);
    assert_exit(&o, 0, "topic info -v");
    let text = stdout(&o);
    for want in [
        "Endpoint type: PUBLISHER",
        "Reliability: RELIABLE",
        "History (Depth): KEEP_LAST (5)",
        "Endpoint type: SUBSCRIPTION",
    ] {
        assert!(text.contains(want), "{want:?} missing from:\n{text}");
    }
    let o = run(&gw, &["topic", "info", "/cli/nobody_here"]);
    assert_exit(&o, 1, "topic info of an unknown topic");
    assert!(stderr(&o).contains("unknown topic"), "{}", stderr(&o));
}

#[test]
fn topic_echo_once_prints_one_message_as_yaml() {
    let gw = Gateway::start(&[]);
    let _p = Publisher::start(
        &gw,
        "/cli/echo",
        r#"{"data":"hello world","header":{"stamp":{"sec":1,"nanosec":2},"frame_id":""},"v":[1.5,-2]}"#,
        ms(50),
    );
    let o = run(&gw, &["topic", "echo", "/cli/echo", "--once"]);
    assert_exit(&o, 0, "topic echo --once");
    assert_eq!(
        stdout(&o),
        "data: hello world\nheader:\n  stamp:\n    sec: 1\n    nanosec: 2\n  frame_id: ''\nv:\n- 1.5\n- -2\n---\n"
    );

    let o = run(
        &gw,
        &["topic", "echo", "/cli/echo", "--count", "2", "--json"],
    );
    assert_exit(&o, 0, "topic echo --count 2 --json");
    let lines: Vec<Value> = stdout(&o).lines().map(parse_line).collect();
    assert_eq!(lines.len(), 2, "{}", stdout(&o));
    assert_eq!(lines[1]["header"]["stamp"]["nanosec"], 2);
}

#[test]
fn topic_pub_times_3_reaches_a_subscriber() {
    let gw = Gateway::start(&[]);
    let mut sub = gw.client();
    sub.subscribe("/cli/pub");

    let o = run(
        &gw,
        &[
            "topic",
            "pub",
            "/cli/pub",
            "std_msgs/msg/String",
            "{data: hi, n: [1, 2.5]}",
            "--times",
            "3",
            "--rate",
            "50",
        ],
    );
    assert_exit(&o, 0, "topic pub --times 3");
    assert!(stdout(&o).contains("publishing #3: "), "{}", stdout(&o));
    for _ in 0..3 {
        let (m, _) = sub.recv_until(|v| v["op"] == "publish", deadline(REPLY));
        assert_eq!(m["topic"], "/cli/pub");
        assert_eq!(m["msg"], json!({"data":"hi","n":[1,2.5]}));
    }
    // Exactly three.
    sub.assert_quiet();
}

#[test]
fn topic_pub_without_subscribers_gives_up_after_max_wait() {
    let gw = Gateway::start(&[]);
    let o = run(
        &gw,
        &[
            "topic",
            "pub",
            "/cli/nobody",
            "std_msgs/msg/String",
            "{}",
            "--once",
            "--max-wait-time-secs",
            "0.3",
        ],
    );
    assert_exit(&o, 1, "topic pub --once with nobody listening");
    assert!(
        stderr(&o).contains("timed out waiting for subscribers"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn topic_pub_once_without_subscribers_gives_up_after_the_default_wait() {
    let gw = Gateway::start(&[]);
    let t0 = Instant::now();
    let o = run(
        &gw,
        &[
            "topic",
            "pub",
            "/cli/nobody",
            "std_msgs/msg/String",
            "{}",
            "--once",
        ],
    );
    let took = t0.elapsed();
    assert_exit(
        &o,
        1,
        "topic pub --once with nobody listening, default wait",
    );
    assert!(
        stderr(&o).contains("expected 1 matching subscription, found 0 within 10 s"),
        "{}",
        stderr(&o)
    );
    assert!(!stdout(&o).contains("publishing #"), "{}", stdout(&o));
    // DEFAULT_MAX_WAIT_SECS, and not much more.
    assert!(
        (Duration::from_secs(10)..Duration::from_secs(14)).contains(&took),
        "{took:?}"
    );
}

#[test]
fn topic_pub_once_waits_for_a_subscriber_that_comes_then_exits_0() {
    let gw = Gateway::start(&[]);
    // Already there.
    let mut sub = gw.client();
    sub.subscribe("/cli/once");
    let o = run(
        &gw,
        &[
            "topic",
            "pub",
            "/cli/once",
            "std_msgs/msg/String",
            "{data: a}",
            "--once",
        ],
    );
    assert_exit(&o, 0, "topic pub --once with a subscriber");
    let (m, _) = sub.recv_until(|v| v["op"] == "publish", deadline(REPLY));
    assert_eq!(m["msg"], json!({"data":"a"}));

    // Arriving while it waits.
    let mut pubr = Running::start(
        &tcp_url(&gw),
        &[
            "topic",
            "pub",
            "/cli/later",
            "std_msgs/msg/String",
            "{data: b}",
            "--once",
        ],
    );
    pubr.wait_lines(1, Duration::from_secs(10), |l| {
        l.starts_with("Waiting for at least 1 matching subscription")
    });
    let mut late = gw.client();
    late.subscribe("/cli/later");
    let (code, lines) = pubr.finish();
    assert_eq!(code, Some(0), "{lines:?}");
    let (m, _) = late.recv_until(|v| v["op"] == "publish", deadline(REPLY));
    assert_eq!(m["msg"], json!({"data":"b"}));
}

#[test]
fn topic_pub_exits_1_when_the_gateway_refuses_the_message() {
    // A publish carries no id: the gateway's refusal (here: longer than
    // --max-line-bytes) is an error status without one.
    let gw = Gateway::start(&["--max-line-bytes", "1024"]);
    let big = format!("{{data: {}}}", "x".repeat(2000));
    for url in [tcp_url(&gw), ws_url(&gw)] {
        let o = run_at(
            &url,
            &[
                "topic",
                "pub",
                "/cli/refused",
                "std_msgs/msg/String",
                &big,
                "--times",
                "2",
                "-w",
                "0",
            ],
        );
        assert_exit(&o, 1, &format!("topic pub --times 2 refused ({url})"));
        assert!(
            stderr(&o).contains("the gateway refused a request: "),
            "{url}: {}",
            stderr(&o)
        );
    }
    // Publishing until Ctrl-C ends at the first refusal too.
    let o = run(
        &gw,
        &[
            "topic",
            "pub",
            "/cli/refused",
            "std_msgs/msg/String",
            &big,
            "--rate",
            "20",
        ],
    );
    assert_exit(&o, 1, "topic pub refused, no --times");
    assert_eq!(
        stdout(&o).matches("publishing #").count(),
        1,
        "{}",
        stdout(&o)
    );
}

#[test]
fn topic_hz_measures_a_20_hz_publisher_and_stops_on_ctrl_c() {
    let gw = Gateway::start(&[]);
    let _p = Publisher::start(&gw, "/cli/hz", r#"{"data":1}"#, ms(50));
    let mut hz = Running::start(&tcp_url(&gw), &["topic", "hz", "/cli/hz"]);
    hz.wait_lines(3, Duration::from_secs(10), |l| {
        l.starts_with("average rate: ")
    });
    hz.interrupt();
    let (code, lines) = hz.finish();
    assert_eq!(code, Some(0), "hz after Ctrl-C: {lines:?}");
    let last = lines
        .iter()
        .rposition(|l| l.starts_with("average rate: "))
        .expect("a rate line");
    let rate: f64 = lines[last]["average rate: ".len()..]
        .parse()
        .expect("a number");
    assert!((15.0..=25.0).contains(&rate), "rate {rate}: {lines:?}");
    // `\tmin: 0.049s max: 0.051s std dev: 0.00061s window: 41`
    let stats = &lines[last + 1];
    let fields: Vec<&str> = stats.split_whitespace().collect();
    assert_eq!(fields[0], "min:", "{stats:?}");
    assert_eq!(fields[2], "max:", "{stats:?}");
    assert_eq!(&fields[4..6], ["std", "dev:"], "{stats:?}");
    assert_eq!(fields[7], "window:", "{stats:?}");
    let secs = |s: &str| s.trim_end_matches('s').parse::<f64>().expect("seconds");
    let (min, max) = (secs(fields[1]), secs(fields[3]));
    // min and max are printed to the millisecond, so a steady 19.998 Hz
    // prints `min: 0.050s max: 0.050s`: allow half a printed unit.
    let half_unit = 0.0005;
    assert!(
        min - half_unit <= 1.0 / rate && 1.0 / rate <= max + half_unit,
        "{stats:?} at {rate} Hz"
    );
    let window: usize = fields[8].parse().expect("window");
    assert!(window >= 20, "{stats:?}");
}

#[test]
fn topic_bw_reports_the_json_sizes() {
    let gw = Gateway::start(&[]);
    let msg = r#"{"data":"0123456789"}"#;
    let _p = Publisher::start(&gw, "/cli/bw", msg, ms(50));
    let mut bw = Running::start(&tcp_url(&gw), &["topic", "bw", "/cli/bw"]);
    bw.wait_lines(1, Duration::from_secs(10), |l| {
        l.contains("Message size mean:")
    });
    bw.interrupt();
    let (code, lines) = bw.finish();
    assert_eq!(code, Some(0), "{lines:?}");
    assert_eq!(lines[0], "Subscribed to [/cli/bw]");
    let sizes = format!(
        "Message size mean: {n} B min: {n} B max: {n} B",
        n = msg.len()
    );
    assert!(
        lines.iter().any(|l| l.trim() == sizes),
        "{sizes:?} not in {lines:?}"
    );
    assert!(lines.iter().any(|l| l.contains("/s from ")), "{lines:?}");
}

// ---------------------------------------------------------------------------------------------
// service
// ---------------------------------------------------------------------------------------------

/// A provider of `/cli/add` that answers `sum = a + b` to `n` calls; its
/// thread returns the calls and the (still connected) provider.
fn adder(gw: &Gateway, n: usize) -> thread::JoinHandle<(Vec<Value>, Client)> {
    let mut p = gw.client();
    request(
        &mut p,
        json!({"op":"advertise_service","service":"/cli/add","type":"example_interfaces/srv/AddTwoInts"}),
    );
    thread::spawn(move || {
        let mut seen = Vec::new();
        for _ in 0..n {
            let (call, _) = p.recv_until(|v| v["op"] == "call_service", deadline(EXIT));
            let sum = call["args"]["a"].as_i64().unwrap() + call["args"]["b"].as_i64().unwrap();
            p.send_json(&json!({"op":"service_response","service":"/cli/add","id":call["id"],"values":{"sum":sum},"result":true}));
            seen.push(call);
        }
        (seen, p)
    })
}

#[test]
fn service_call_list_and_type() {
    let gw = Gateway::start(&[]);
    let provider = adder(&gw, 2);

    let o = run(
        &gw,
        &[
            "service",
            "call",
            "/cli/add",
            "example_interfaces/srv/AddTwoInts",
            "{a: 2, b: 3}",
        ],
    );
    assert_exit(&o, 0, "service call");
    assert_eq!(
        stdout(&o),
        "requester: making request: {\"a\":2,\"b\":3}\n\nresponse:\nsum: 5\n"
    );
    let o = run(
        &gw,
        &[
            "service",
            "call",
            "/cli/add",
            "example_interfaces/srv/AddTwoInts",
            r#"{"a": 40, "b": 2}"#,
            "--json",
        ],
    );
    assert_exit(&o, 0, "service call --json");
    assert_eq!(stdout(&o), "{\"sum\":42}\n");
    let (calls, _provider) = provider.join().expect("provider");
    assert_eq!(calls[0]["args"], json!({"a":2,"b":3}));

    let o = run(&gw, &["service", "list", "-t"]);
    assert_exit(&o, 0, "service list -t");
    let text = stdout(&o);
    assert!(
        text.contains("/cli/add [example_interfaces/srv/AddTwoInts]\n"),
        "{text}"
    );
    assert!(text.contains("/rosgate/stats ["), "{text}");
    let o = run(&gw, &["service", "type", "/cli/add"]);
    assert_exit(&o, 0, "service type");
    assert_eq!(stdout(&o), "example_interfaces/srv/AddTwoInts\n");
}

#[test]
fn a_failed_call_exits_1_with_the_reason_on_stderr() {
    let gw = Gateway::start(&[]);
    let o = run(&gw, &["service", "call", "/cli/nobody", "x/Y", "{}"]);
    assert_exit(&o, 1, "call without a provider");
    assert!(
        stderr(&o).contains("no provider for service /cli/nobody"),
        "{}",
        stderr(&o)
    );

    // A provider's own `result: false`.
    let mut p = gw.client();
    p.advertise_service("/cli/refuse");
    let h = thread::spawn(move || {
        let (call, _) = p.recv_until(|v| v["op"] == "call_service", deadline(EXIT));
        p.send_json(&json!({"op":"service_response","service":"/cli/refuse","id":call["id"],"values":"not today","result":false}));
        p
    });
    let o = run(&gw, &["service", "call", "/cli/refuse", "x/Y"]);
    assert_exit(&o, 1, "call refused by the provider");
    assert!(stderr(&o).contains("not today"), "{}", stderr(&o));
    drop(h.join());

    let o = run(&gw, &["service", "type", "/cli/nobody"]);
    assert_exit(&o, 1, "type of an unknown service");
}

// ---------------------------------------------------------------------------------------------
// action
// ---------------------------------------------------------------------------------------------

/// An action server for `/cli/fib`, driven by `serve` on its own thread,
/// which returns the goal and the (still connected) server.
fn action_server(
    gw: &Gateway,
    serve: impl FnOnce(&mut Client, Value) + Send + 'static,
) -> thread::JoinHandle<(Value, Client)> {
    let mut s = gw.client();
    request(
        &mut s,
        json!({"op":"advertise_action","action":"/cli/fib","type":"example_interfaces/action/Fibonacci"}),
    );
    thread::spawn(move || {
        let (goal, _) = s.recv_until(|v| v["op"] == "send_action_goal", deadline(EXIT));
        serve(&mut s, goal.clone());
        (goal, s)
    })
}

#[test]
fn action_send_goal_prints_feedback_and_the_result() {
    let gw = Gateway::start(&[]);
    let server = action_server(&gw, |s, goal| {
        let id = &goal["id"];
        for seq in [json!([0, 1]), json!([0, 1, 1])] {
            s.send_json(&json!({"op":"action_feedback","id":id,"action":"/cli/fib","values":{"sequence":seq}}));
            thread::sleep(ms(50));
        }
        s.send_json(&json!({"op":"action_result","id":id,"action":"/cli/fib","values":{"sequence":[0,1,1,2]},"status":4,"result":true}));
    });
    let o = run(
        &gw,
        &[
            "action",
            "send_goal",
            "/cli/fib",
            "example_interfaces/action/Fibonacci",
            "{order: 3}",
            "--feedback",
        ],
    );
    assert_exit(&o, 0, "send_goal");
    assert_eq!(
        stdout(&o),
        "Sending goal:\n    order: 3\n\n\
         Feedback:\n    sequence:\n    - 0\n    - 1\n\n\
         Feedback:\n    sequence:\n    - 0\n    - 1\n    - 1\n\n\
         Result:\n    sequence:\n    - 0\n    - 1\n    - 1\n    - 2\n\n\
         Goal finished with status: SUCCEEDED\n"
    );
    let (goal, _server) = server.join().expect("server");
    assert_eq!(goal["args"], json!({"order": 3}));
    assert_eq!(goal["feedback"], true);

    let o = run(&gw, &["action", "list", "-t"]);
    assert_exit(&o, 0, "action list -t");
    assert!(
        stdout(&o).contains("/cli/fib [example_interfaces/action/Fibonacci]\n"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn action_send_goal_ctrl_c_cancels_the_goal() {
    let gw = Gateway::start(&[]);
    let server = action_server(&gw, |s, goal| {
        let id = goal["id"].clone();
        s.send_json(
            &json!({"op":"action_feedback","id":id,"action":"/cli/fib","values":{"sequence":[0]}}),
        );
        let (cancel, _) = s.recv_until(|v| v["op"] == "cancel_action_goal", deadline(EXIT));
        assert_eq!(cancel["id"], id);
        s.send_json(&json!({"op":"action_result","id":id,"action":"/cli/fib","values":{"sequence":[0]},"status":5,"result":true}));
    });
    let mut cli = Running::start(
        &tcp_url(&gw),
        &[
            "action",
            "send_goal",
            "/cli/fib",
            "x/Fib",
            "{order: 30}",
            "--feedback",
        ],
    );
    cli.wait_lines(1, Duration::from_secs(10), |l| l == "Feedback:");
    cli.interrupt();
    let (code, lines) = cli.finish();
    assert_eq!(code, Some(130), "{lines:?}");
    assert_eq!(
        lines.last().map(String::as_str),
        Some("Goal finished with status: CANCELED")
    );
    server.join().expect("server saw the cancel");
}

#[test]
fn action_goal_without_a_server_fails() {
    let gw = Gateway::start(&[]);
    let o = run(&gw, &["action", "send_goal", "/cli/none", "x/Y", "{}"]);
    assert_exit(&o, 1, "goal without a server");
    assert!(stderr(&o).contains("/cli/none"), "{}", stderr(&o));
}

// ---------------------------------------------------------------------------------------------
// param
// ---------------------------------------------------------------------------------------------

/// A client owning node `/cli/ctl` with parameters (defaults as given).
fn param_owner(gw: &Gateway, max_vel: f64, name: &str, ids: &[i64], p: f64) -> Client {
    let mut c = gw.client();
    request(
        &mut c,
        json!({"op":"declare_node","name":"ctl","namespace":"/cli"}),
    );
    request(
        &mut c,
        json!({"op":"declare_parameter","name":"max_vel","value":max_vel,
               "descriptor":{"floating_point_range":{"from_value":0.0,"to_value":2.0,"step":0.0}}}),
    );
    request(
        &mut c,
        json!({"op":"declare_parameter","name":"robot_name","value":name}),
    );
    request(
        &mut c,
        json!({"op":"declare_parameter","name":"ids","value":ids}),
    );
    request(
        &mut c,
        json!({"op":"declare_parameter","name":"pid.p","value":p}),
    );
    c
}

#[test]
fn param_list_get_set_dump_and_the_dump_loads_as_params_file() {
    let gw = Gateway::start(&[]);
    let _owner = param_owner(&gw, 0.5, "robot", &[1, 2], 1.0);

    let o = run(&gw, &["param", "list", "/cli/ctl"]);
    assert_exit(&o, 0, "param list NODE");
    assert_eq!(stdout(&o), "  ids\n  max_vel\n  pid.p\n  robot_name\n");
    let o = run(&gw, &["param", "list"]);
    assert_exit(&o, 0, "param list");
    assert!(
        stdout(&o).contains("/cli/ctl:\n  ids\n  max_vel\n"),
        "{}",
        stdout(&o)
    );

    let o = run(&gw, &["param", "get", "/cli/ctl", "max_vel"]);
    assert_exit(&o, 0, "param get");
    assert_eq!(stdout(&o), "Double value is: 0.5\n");
    let o = run(&gw, &["param", "get", "cli/ctl", "robot_name"]);
    assert_eq!(stdout(&o), "String value is: robot\n");
    let o = run(&gw, &["param", "get", "/cli/ctl", "ids"]);
    assert_eq!(stdout(&o), "Integer values are: [1,2]\n");
    let o = run(&gw, &["param", "get", "/cli/ctl", "nope"]);
    assert_exit(&o, 1, "param get of an undeclared parameter");

    let o = run(&gw, &["param", "set", "/cli/ctl", "max_vel", "1.25"]);
    assert_exit(&o, 0, "param set");
    assert_eq!(stdout(&o), "Set parameter successful\n");
    let o = run(&gw, &["param", "get", "/cli/ctl", "max_vel"]);
    assert_eq!(stdout(&o), "Double value is: 1.25\n");
    // The owner's rules: the range, the type.
    let o = run(&gw, &["param", "set", "/cli/ctl", "max_vel", "5.0"]);
    assert_exit(&o, 1, "param set out of range");
    assert!(stderr(&o).contains("range"), "{}", stderr(&o));
    let o = run(&gw, &["param", "set", "/cli/ctl", "max_vel", "fast"]);
    assert_exit(&o, 1, "param set of the wrong type");
    let o = run(&gw, &["param", "set", "/cli/ctl", "ids", "[3, 4, 5]"]);
    assert_exit(&o, 0, "param set of an array");

    let o = run(&gw, &["param", "dump", "/cli/ctl"]);
    assert_exit(&o, 0, "param dump");
    let dump = stdout(&o);
    assert_eq!(
        dump,
        "/cli/ctl:\n  ros__parameters:\n    ids:\n    - 3\n    - 4\n    - 5\n    max_vel: 1.25\n    pid:\n      p: 1.0\n    robot_name: robot\n"
    );

    // The dump is a --params file: a second gateway applies it as overrides.
    let path = std::env::temp_dir().join(format!("rosgate-cli-dump-{}.yaml", std::process::id()));
    std::fs::write(&path, &dump).expect("write the dump");
    let gw2 = Gateway::start(&["--params", path.to_str().expect("path")]);
    let _ = std::fs::remove_file(&path);
    let _owner2 = param_owner(&gw2, 0.1, "other", &[9], 2.0);
    for (name, want) in [
        ("max_vel", "Double value is: 1.25\n"),
        ("robot_name", "String value is: robot\n"),
        ("ids", "Integer values are: [3,4,5]\n"),
        ("pid.p", "Double value is: 1.0\n"),
    ] {
        let o = run(&gw2, &["param", "get", "/cli/ctl", name]);
        assert_exit(&o, 0, name);
        assert_eq!(stdout(&o), want, "{name} after --params");
    }
}

#[test]
fn param_of_an_unknown_node() {
    let gw = Gateway::start(&[]);
    let o = run(&gw, &["param", "list", "/cli/ghost"]);
    assert_exit(&o, 1, "param list of an unknown node");
    assert!(stderr(&o).contains("not found"), "{}", stderr(&o));
    let o = run(&gw, &["param", "dump", "/cli/ghost"]);
    assert_exit(&o, 1, "param dump of an unknown node");
    let o = run(&gw, &["param", "get", "/cli/ghost", "x"]);
    assert_exit(&o, 1, "param get of an unknown node");
    // Nobody owns the node: the gateway holds the value (rosapi set_param).
    let o = run(&gw, &["param", "set", "/cli/ghost", "x", "3"]);
    assert_exit(&o, 0, "param set on a node nobody owns");
    let o = run(&gw, &["param", "get", "/cli/ghost", "x"]);
    assert_eq!(stdout(&o), "Integer value is: 3\n");
}

// ---------------------------------------------------------------------------------------------
// node
// ---------------------------------------------------------------------------------------------

#[test]
fn node_list_and_info() {
    let gw = Gateway::start(&[]);
    let mut c = gw.client();
    request(
        &mut c,
        json!({"op":"declare_node","name":"talker","namespace":"/cli_ns"}),
    );
    request(
        &mut c,
        json!({"op":"advertise","topic":"chatter","type":"std_msgs/msg/String"}),
    );
    request(
        &mut c,
        json!({"op":"subscribe","topic":"/cli_cmd","type":"std_msgs/msg/Int32"}),
    );
    request(
        &mut c,
        json!({"op":"advertise_service","service":"~/reset","type":"std_srvs/srv/Empty"}),
    );

    let o = run(&gw, &["node", "list"]);
    assert_exit(&o, 0, "node list");
    let text = stdout(&o);
    assert!(text.lines().any(|l| l == "/cli_ns/talker"), "{text}");
    assert!(text.lines().any(|l| l == "/rosgate"), "{text}");

    let o = run(&gw, &["node", "info", "/cli_ns/talker"]);
    assert_exit(&o, 0, "node info");
    assert_eq!(
        stdout(&o),
        "/cli_ns/talker\n  Subscribers:\n    /cli_cmd: std_msgs/msg/Int32\n  Publishers:\n    /cli_ns/chatter: std_msgs/msg/String\n  Service Servers:\n    /cli_ns/talker/reset: std_srvs/srv/Empty\n"
    );
    let o = run(&gw, &["node", "info", "/cli_ns/nobody"]);
    assert_exit(&o, 1, "node info of an unknown node");
}

// ---------------------------------------------------------------------------------------------
// transports, domains, exit statuses, help
// ---------------------------------------------------------------------------------------------

#[test]
fn topic_echo_with_a_compression_prints_the_message() {
    let gw = Gateway::start(&[]);
    let ws = ws_url(&gw);
    let _p = Publisher::start(&gw, "/cli/comp", r#"{"data":"squeezed"}"#, ms(50));
    for c in ["cbor", "cbor-raw"] {
        let o = run_at(
            &ws,
            &["topic", "echo", "/cli/comp", "--once", "--compression", c],
        );
        assert_exit(&o, 0, c);
        assert_eq!(stdout(&o), "data: squeezed\n---\n", "{c}");
    }
    // NDJSON has no binary frames: the gateway's refusal is the error.
    let o = run(
        &gw,
        &[
            "topic",
            "echo",
            "/cli/comp",
            "--once",
            "--compression",
            "cbor",
        ],
    );
    assert_exit(&o, 1, "compression over tcp");
    assert!(stderr(&o).contains("WebSocket"), "{}", stderr(&o));
}

#[test]
fn commands_work_over_a_websocket_url() {
    let gw = Gateway::start(&[]);
    let ws = ws_url(&gw);
    let _p = Publisher::start(&gw, "/cli/ws", r#"{"data":"over ws"}"#, ms(50));
    let provider = adder(&gw, 1);

    let o = run_at(&ws, &["topic", "list", "-t"]);
    assert_exit(&o, 0, "topic list over ws");
    assert!(
        stdout(&o).contains("/cli/ws [std_msgs/msg/String]\n"),
        "{}",
        stdout(&o)
    );
    let o = run_at(&ws, &["topic", "echo", "/cli/ws", "--once"]);
    assert_exit(&o, 0, "topic echo over ws");
    assert_eq!(stdout(&o), "data: over ws\n---\n");
    let o = run_at(
        &ws,
        &[
            "service",
            "call",
            "/cli/add",
            "x/Add",
            "{a: 1, b: 1}",
            "--json",
        ],
    );
    assert_exit(&o, 0, "service call over ws");
    assert_eq!(stdout(&o), "{\"sum\":2}\n");
    provider.join().expect("provider");

    // The URL's query reaches the gateway: a bad node name is refused (400).
    let bad = format!("{ws}?node=bad-name");
    let o = run_at(&bad, &["topic", "list"]);
    assert_exit(&o, 1, "refused WebSocket upgrade");
    assert!(stderr(&o).contains("400"), "{}", stderr(&o));
}

#[test]
fn domain_option_selects_the_graph_on_both_transports() {
    let gw = Gateway::start(&[]);
    let mut c = gw.client();
    request(&mut c, json!({"op":"declare_node","name":"d3","domain":3}));
    request(
        &mut c,
        json!({"op":"advertise","topic":"/cli/in_three","type":"std_msgs/msg/String"}),
    );
    let o = run(&gw, &["topic", "list"]);
    assert!(!stdout(&o).contains("/cli/in_three"), "{}", stdout(&o));
    let o = run(&gw, &["topic", "list", "--domain", "3"]);
    assert_exit(&o, 0, "topic list --domain 3");
    assert!(stdout(&o).contains("/cli/in_three\n"), "{}", stdout(&o));
    let o = run_at(&ws_url(&gw), &["topic", "list", "--domain", "3"]);
    assert_exit(&o, 0, "topic list --domain 3 over ws");
    assert!(stdout(&o).contains("/cli/in_three\n"), "{}", stdout(&o));
}

#[test]
fn usage_errors_exit_2() {
    let gw = Gateway::start(&[]);
    let cases: &[&[&str]] = &[
        &["topic"],
        &["topic", "bogus"],
        &["topic", "echo"],
        &["topic", "list", "--bogus"],
        &["topic", "list", "extra"],
        &["topic", "hz", "/x", "--window", "0"],
        &["topic", "echo", "/x", "--count", "many"],
        &["topic", "pub", "/x", "std_msgs/msg/String", "{a: [1,}"],
        &[
            "topic",
            "pub",
            "/x",
            "std_msgs/msg/String",
            "{}",
            "--rate",
            "-1",
        ],
        &["topic", "echo", "/x", "--qos-reliability", "maybe"],
        // Durations the clock cannot hold are refused, not a panic.
        &[
            "topic",
            "pub",
            "/x",
            "T",
            "--once",
            "--max-wait-time-secs",
            "1e300",
        ],
        &["topic", "pub", "/x", "T", "-w", "0", "--rate", "1e-320"],
        &["service", "call"],
        &["param", "get", "/node"],
        &["param", "set", "/node", "x", "{a: 1"],
        &["node", "info"],
        &["action", "send_goal", "/a", "T"],
    ];
    for args in cases {
        let o = run(&gw, args);
        assert_exit(&o, 2, &args.join(" "));
        assert!(stderr(&o).contains("rosgate"), "{args:?}: {}", stderr(&o));
    }
    for args in [
        ["topic", "list", "--url", "http://127.0.0.1:1"],
        ["topic", "list", "--timeout", "0"],
        ["topic", "list", "--domain", "300"],
    ] {
        let o = run_bare(&args);
        assert_exit(&o, 2, &args.join(" "));
    }
}

#[test]
fn an_unreachable_gateway_exits_3() {
    // A port nobody listens on.
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let o = run_at(&format!("tcp://127.0.0.1:{port}"), &["topic", "list"]);
    assert_exit(&o, 3, "connection refused");
    assert!(stderr(&o).contains("cannot reach"), "{}", stderr(&o));
    let o = run_at(&format!("ws://127.0.0.1:{port}/"), &["node", "list"]);
    assert_exit(&o, 3, "connection refused (ws)");

    // Something that accepts but never answers: the wait ends at --timeout.
    let silent = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("tcp://{}", silent.local_addr().expect("addr"));
    let t0 = Instant::now();
    let o = run_at(&url, &["topic", "list", "--timeout", "0.5"]);
    assert_exit(&o, 3, "no answer");
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    assert!(stderr(&o).contains("no answer"), "{}", stderr(&o));
}

#[test]
fn every_command_has_help() {
    let groups: &[(&str, &[&str])] = &[
        ("topic", &["list", "info", "echo", "pub", "hz", "bw"]),
        ("service", &["list", "type", "call"]),
        ("action", &["list", "send_goal"]),
        ("param", &["list", "get", "set", "dump"]),
        ("node", &["list", "info"]),
    ];
    for (group, cmds) in groups {
        let o = run_bare(&[group, "--help"]);
        assert_exit(&o, 0, &format!("{group} --help"));
        for cmd in *cmds {
            assert!(
                stdout(&o).contains(&format!("    {cmd} ")),
                "{group} --help lacks {cmd}"
            );
            let o = run_bare(&[group, cmd, "--help"]);
            assert_exit(&o, 0, &format!("{group} {cmd} --help"));
            let text = stdout(&o);
            assert!(
                text.starts_with(&format!("rosgate {group} {cmd} - ")),
                "{text}"
            );
            assert!(
                text.contains("USAGE:") && text.contains("--url URL"),
                "{text}"
            );
        }
    }
    // The gateway's own help names the groups; no group still means the gateway.
    let o = run_bare(&["--help"]);
    assert!(
        stdout(&o).contains("rosgate GROUP COMMAND"),
        "{}",
        stdout(&o)
    );
}

// ---------------------------------------------------------------------------------------------
// demo
// ---------------------------------------------------------------------------------------------

/// `rosgate demo` against `url`, once it said it is ready.
fn demo(url: &str, extra: &[&str]) -> Running {
    let mut args = vec!["demo"];
    args.extend_from_slice(extra);
    let mut d = Running::start(url, &args);
    d.wait_lines(1, Duration::from_secs(10), |l| l.starts_with("Ready."));
    d
}

fn lines_of(o: &Output) -> Vec<String> {
    stdout(o).lines().map(str::to_string).collect()
}

#[test]
fn demo_serves_the_readme_robot_and_withdraws_it_on_ctrl_c() {
    let gw = Gateway::start(&[]);
    let url = tcp_url(&gw);
    let mut d = demo(&url, &[]);

    // The talker, at 10 Hz.
    let o = run(&gw, &["topic", "echo", "/chatter", "--once"]);
    assert_exit(&o, 0, "echo /chatter");
    assert!(stdout(&o).contains("Hello World: "), "{}", stdout(&o));
    let mut hz = Running::start(&url, &["topic", "hz", "/chatter"]);
    hz.wait_lines(2, Duration::from_secs(10), |l| {
        l.starts_with("average rate: ")
    });
    hz.interrupt();
    let (_, lines) = hz.finish();
    let rate: f64 = lines
        .iter()
        .rfind(|l| l.starts_with("average rate: "))
        .and_then(|l| l["average rate: ".len()..].parse().ok())
        .expect("a rate");
    assert!((8.0..=12.0).contains(&rate), "{rate}: {lines:?}");

    // The latched URDF, for a subscriber that comes later.
    let o = run(&gw, &["topic", "echo", "/robot_description", "--once"]);
    assert_exit(&o, 0, "echo /robot_description");
    assert!(stdout(&o).contains("<robot name="), "{}", stdout(&o));

    // The service.
    let o = run(
        &gw,
        &[
            "service",
            "call",
            "/add_two_ints",
            "example_interfaces/srv/AddTwoInts",
            "{a: 2, b: 3}",
        ],
    );
    assert_exit(&o, 0, "call /add_two_ints");
    assert!(stdout(&o).contains("sum: 5"), "{}", stdout(&o));

    // The action, one feedback per step.
    let o = run(
        &gw,
        &[
            "action",
            "send_goal",
            "/fibonacci",
            "example_interfaces/action/Fibonacci",
            "{order: 4}",
            "--feedback",
        ],
    );
    assert_exit(&o, 0, "send_goal /fibonacci");
    let out = stdout(&o);
    assert_eq!(out.matches("Feedback:").count(), 3, "{out}");
    assert!(
        out.contains("Goal finished with status: SUCCEEDED"),
        "{out}"
    );
    let result = &out[out.find("Result:").expect("a result")..];
    let seq: Vec<&str> = result
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- "))
        .collect();
    assert_eq!(seq, ["0", "1", "1", "2", "3"], "{out}");

    // At most MAX_GOALS (16) at once: the 17th is aborted with the reason.
    let mut caller = gw.client();
    for i in 0..17 {
        caller.send_json(
            &json!({"op":"send_action_goal","id":format!("g{i}"),"action":"/fibonacci",
            "action_type":"example_interfaces/action/Fibonacci","args":{"order":46}}),
        );
    }
    let (r, _) = caller.recv_until(|v| v["op"] == "action_result", deadline(REPLY));
    assert_eq!(r["id"], "g16", "{r}");
    assert_eq!(
        (r["status"].clone(), r["result"].clone()),
        (json!(6), json!(false)),
        "{r}"
    );
    assert!(
        r["values"]
            .as_str()
            .is_some_and(|v| v.contains("at most 16 goals")),
        "{r}"
    );
    // Leaving cancels the other 16 at the demo, which keeps serving.
    drop(caller);

    // The parameters, with the owner's rules.
    let o = run(&gw, &["param", "list", "/demo/talker"]);
    assert_exit(&o, 0, "param list");
    let names: Vec<String> = lines_of(&o).iter().map(|l| l.trim().to_string()).collect();
    assert_eq!(
        names,
        ["enabled", "greeting", "publish_rate"],
        "{}",
        stdout(&o)
    );
    let o = run(&gw, &["param", "get", "/demo/talker", "publish_rate"]);
    assert_exit(&o, 0, "param get");
    assert!(
        stdout(&o).starts_with("Double value is: 10"),
        "{}",
        stdout(&o)
    );
    let o = run(
        &gw,
        &["param", "set", "/demo/talker", "publish_rate", "500.0"],
    );
    assert_exit(&o, 1, "param set out of range");
    let o = run(&gw, &["param", "set", "/demo/talker", "greeting", "Hi"]);
    assert_exit(&o, 0, "param set greeting");
    // The talker follows it.
    let dl = Instant::now() + Duration::from_secs(10);
    loop {
        let o = run(&gw, &["topic", "echo", "/chatter", "--once", "--json"]);
        if stdout(&o).contains("\"Hi: ") {
            break;
        }
        assert!(
            Instant::now() < dl,
            "the talker kept its greeting: {}",
            stdout(&o)
        );
    }

    // The listener is a subscriber `topic pub --once` finds, and it hears.
    let o = run(
        &gw,
        &[
            "topic",
            "pub",
            "/chatter",
            "std_msgs/msg/String",
            "{data: hello}",
            "--once",
        ],
    );
    assert_exit(&o, 0, "pub --once to the listener");
    d.wait_lines(1, Duration::from_secs(10), |l| {
        l == "[INFO] [/demo/listener]: I heard: [hello]"
    });

    // What the graph shows.
    let shown = |args: &[&str]| stdout(&run(&gw, args));
    let topics = shown(&["topic", "list"]);
    let services = shown(&["service", "list"]);
    let actions = shown(&["action", "list"]);
    let nodes = shown(&["node", "list"]);
    for t in ["/chatter", "/robot_description"] {
        assert!(topics.lines().any(|l| l == t), "{t}: {topics}");
    }
    for s in ["/add_two_ints", "/demo/talker/get_parameters"] {
        assert!(services.lines().any(|l| l == s), "{s}: {services}");
    }
    assert!(actions.lines().any(|l| l == "/fibonacci"), "{actions}");
    for n in [
        "/demo/talker",
        "/demo/listener",
        "/demo/add_two_ints_server",
        "/demo/fibonacci_action_server",
        "/demo/robot_state_publisher",
    ] {
        assert!(nodes.lines().any(|l| l == n), "{n}: {nodes}");
    }

    // Ctrl-C withdraws everything.
    d.interrupt();
    let (code, lines) = d.finish();
    assert_eq!(code, Some(0), "{lines:?}");
    assert!(lines.iter().any(|l| l.contains("withdrawn")), "{lines:?}");
    let topics = shown(&["topic", "list"]);
    let services = shown(&["service", "list"]);
    let actions = shown(&["action", "list"]);
    let nodes = shown(&["node", "list"]);
    assert!(
        !topics
            .lines()
            .any(|l| l == "/chatter" || l == "/robot_description"),
        "{topics}"
    );
    assert!(
        !services.contains("/add_two_ints") && !services.contains("/demo/"),
        "{services}"
    );
    assert!(!actions.contains("/fibonacci"), "{actions}");
    assert!(!nodes.contains("/demo/"), "{nodes}");
}

#[test]
fn demo_cancels_aborts_and_serves_over_websocket_in_a_domain() {
    let gw = Gateway::start(&[]);
    let ws = format!("{}?domain=3", ws_url(&gw));
    let mut d = demo(&ws, &[]);
    // Not in domain 0.
    let o = run(&gw, &["topic", "list"]);
    assert!(
        !stdout(&o).lines().any(|l| l == "/chatter"),
        "{}",
        stdout(&o)
    );
    let o = run(
        &gw,
        &["topic", "echo", "/chatter", "--once", "--domain", "3"],
    );
    assert_exit(&o, 0, "echo /chatter in domain 3");
    assert!(stdout(&o).contains("Hello World: "), "{}", stdout(&o));

    // A goal cancelled with Ctrl-C ends CANCELED with the partial sequence.
    let mut goal = Running::start(
        &tcp_url(&gw),
        &[
            "action",
            "send_goal",
            "/fibonacci",
            "example_interfaces/action/Fibonacci",
            "{order: 40}",
            "--feedback",
            "--domain",
            "3",
        ],
    );
    goal.wait_lines(1, Duration::from_secs(10), |l| l == "Feedback:");
    goal.interrupt();
    let (code, lines) = goal.finish();
    assert_eq!(code, Some(130), "{lines:?}");
    assert!(
        lines
            .iter()
            .any(|l| l == "Goal finished with status: CANCELED"),
        "{lines:?}"
    );
    // An order the demo does not serve is aborted with the reason.
    let o = run(
        &gw,
        &[
            "action",
            "send_goal",
            "/fibonacci",
            "example_interfaces/action/Fibonacci",
            "{order: 47}",
            "--domain",
            "3",
        ],
    );
    assert_exit(&o, 1, "order 47");
    assert!(stderr(&o).contains("0..=46"), "{}", stderr(&o));

    // SIGTERM ends it as Ctrl-C does.
    let rc = unsafe { libc::kill(d.child.id() as libc::pid_t, libc::SIGTERM) };
    assert_eq!(rc, 0);
    d.seen.clear();
    let (code, lines) = d.finish();
    assert_eq!(code, Some(0), "{lines:?}");
    let o = run(&gw, &["node", "list", "--domain", "3"]);
    assert!(!stdout(&o).contains("/demo/"), "{}", stdout(&o));
}

#[test]
fn demo_without_a_gateway_exits_3_and_refused_set_up_exits_1() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let o = run_at(&format!("tcp://127.0.0.1:{port}"), &["demo"]);
    assert_exit(&o, 3, "demo, nobody listening");
    assert!(
        stderr(&o).contains("rosgate demo: cannot reach"),
        "{}",
        stderr(&o)
    );

    // A gateway that refuses part of the set-up (the demo subscribes to two
    // topics): exit 1 with the reason.
    let gw = Gateway::start(&["--max-subscriptions-per-conn", "1"]);
    let o = run(&gw, &["demo"]);
    assert_exit(&o, 1, "demo refused");
    assert!(
        stderr(&o).contains("rosgate demo: the gateway refused the demo's set-up: "),
        "{}",
        stderr(&o)
    );

    let o = run_bare(&["demo", "--bogus"]);
    assert_exit(&o, 2, "demo --bogus");
    let o = run_bare(&["demo", "--help"]);
    assert_exit(&o, 0, "demo --help");
    assert!(stdout(&o).starts_with("rosgate demo - "), "{}", stdout(&o));
}
