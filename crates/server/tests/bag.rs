//! `rosgate bag record|info|play` (docs/cli.md, "rosgate bag") against a
//! real gateway: a raw TCP client publishes, the recorder runs as a
//! subprocess and is stopped with SIGINT, the bag is read back with the
//! `mcap` crate and `bag info`, and `bag play` is timed by a subscriber.
//!
//! Every wait has a deadline; a recorder that does not exit in time is
//! killed and the test fails with its stderr.

#[path = "it/support.rs"]
#[allow(dead_code)]
mod support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use support::*;

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

/// A fresh bag path under the temp dir (not created), removed on drop.
struct BagDir(PathBuf);

impl BagDir {
    fn new(what: &str) -> BagDir {
        let p = std::env::temp_dir().join(format!(
            "rosgate_bag_{}_{}_{what}",
            std::process::id(),
            uniq()
        ));
        BagDir(p)
    }
    fn s(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for BagDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A recorder subprocess with its stderr lines.
struct Recorder {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Recorder {
    fn start(url: &str, args: &[&str]) -> Recorder {
        let mut child = Command::new(BIN)
            .arg("bag")
            .arg("record")
            .args(args)
            .arg("--url")
            .arg(url)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the recorder");
        let err = child.stderr.take().unwrap();
        let (tx, lines) = mpsc::channel();
        thread::spawn(move || {
            for l in BufReader::new(err).lines() {
                let Ok(l) = l else { break };
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        Recorder {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    fn wait_line(&mut self, pred: impl Fn(&str) -> bool) {
        let dl = deadline(Duration::from_secs(10));
        while !self.seen.iter().any(|l| pred(l)) {
            match self
                .lines
                .recv_timeout(dl.saturating_duration_since(Instant::now()))
            {
                Ok(l) => self.seen.push(l),
                Err(_) => panic!("line not seen within 10 s; stderr: {:?}", self.seen),
            }
        }
    }

    /// SIGINT, then the exit status and stderr.
    fn stop(self) -> (Option<i32>, Vec<String>) {
        self.stop_with(libc::SIGINT)
    }

    /// `sig`, then the exit status and stderr.
    fn stop_with(mut self, sig: i32) -> (Option<i32>, Vec<String>) {
        let rc = unsafe { libc::kill(self.child.id() as libc::pid_t, sig) };
        assert_eq!(rc, 0);
        let dl = deadline(Duration::from_secs(15));
        let st = loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                break st;
            }
            if Instant::now() >= dl {
                let _ = self.child.kill();
                panic!("the recorder did not exit; stderr: {:?}", self.seen);
            }
            thread::sleep(ms(10));
        };
        while let Ok(l) = self.lines.recv_timeout(ms(300)) {
            self.seen.push(l);
        }
        (st.code(), std::mem::take(&mut self.seen))
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sends `line` and waits for the info status with `id`.
fn req(c: &mut Client, line: &str, id: &str) {
    c.send_line(line);
    c.expect_info(serde_json::Value::from(id));
}

fn advertise(c: &mut Client, topic: &str, ty: &str, latch: bool) {
    let id = format!("adv-{}", uniq());
    req(
        c,
        &format!(
            r#"{{"op":"advertise","topic":"{topic}","type":"{ty}","latch":{latch},"id":"{id}"}}"#
        ),
        &id,
    );
}

/// (topic, log time, publish time, data) of every message in `file`.
fn messages(file: &Path) -> Vec<(String, u64, u64, Vec<u8>)> {
    let buf = std::fs::read(file).unwrap();
    assert!(mcap::Summary::read(&buf).unwrap().is_some(), "no summary");
    mcap::MessageStream::new(&buf)
        .unwrap()
        .map(|m| {
            let m = m.unwrap();
            assert_eq!(m.channel.message_encoding, "cdr");
            let s = m.channel.schema.as_ref().unwrap();
            assert_eq!(s.encoding, "ros2msg");
            (
                m.channel.topic.clone(),
                m.log_time,
                m.publish_time,
                m.data.to_vec(),
            )
        })
        .collect()
}

/// A std_msgs/String's text from its CDR.
fn cdr_string(b: &[u8]) -> String {
    let n = u32::from_le_bytes(b[4..8].try_into().unwrap()) as usize;
    String::from_utf8(b[8..8 + n - 1].to_vec()).unwrap()
}

fn wall_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

const SKIP: &str = "^/(rosout|parameter_events|client_count|connected_clients|rosgate/.*)$";

/// SIGINT to a player child; waits (10 s at most) for it to exit 0 and
/// returns its stderr.
fn interrupt_player(child: &mut Child) -> String {
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let dl = deadline(Duration::from_secs(10));
    let st = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        assert!(Instant::now() < dl, "the player did not stop");
        thread::sleep(ms(20));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(st.code(), Some(0), "{err}");
    err
}

#[test]
fn record_latched_late_topics_then_info_and_play_at_pace() {
    let gw = Gateway::start(&[]);
    let url = ws_url(&gw);
    let mut p = Client::connect(&gw);
    advertise(&mut p, "/lat", "std_msgs/msg/String", true);
    p.publish("/lat", r#"{"data":"L"}"#);
    advertise(&mut p, "/chatter", "std_msgs/msg/String", false);
    p.barrier();
    let bag = BagDir::new("rec");
    let mut r = Recorder::start(&url, &["-a", "-x", SKIP, "-o", bag.s()]);
    r.wait_line(|l| l.contains("subscribed to /chatter"));
    r.wait_line(|l| l.contains("subscribed to /lat"));
    // The subscriptions are in before the first publish: a barrier on
    // the recorder's side is the topic_info the recorder waits for.
    thread::sleep(ms(300));
    let t0 = wall_ns();
    for i in 0..50 {
        p.publish("/chatter", &format!(r#"{{"data":"m{i}"}}"#));
        thread::sleep(ms(10));
    }
    // A topic that appears mid-recording is picked up by -a.
    advertise(&mut p, "/late", "std_msgs/msg/Int32", false);
    p.publish("/late", r#"{"data":-1}"#);
    r.wait_line(|l| l.contains("subscribed to /late"));
    thread::sleep(ms(300));
    for i in 0..5 {
        p.publish("/late", &format!(r#"{{"data":{i}}}"#));
    }
    p.barrier();
    thread::sleep(ms(500));
    let t1 = wall_ns();
    let (code, err) = r.stop();
    assert_eq!(code, Some(0), "{err:?}");
    let base = bag.0.file_name().unwrap().to_str().unwrap().to_string();
    let file = bag.0.join(format!("{base}_0.mcap"));
    let msgs = messages(&file);
    let chatter: Vec<_> = msgs.iter().filter(|m| m.0 == "/chatter").collect();
    let texts: Vec<String> = chatter.iter().map(|m| cdr_string(&m.3)).collect();
    let want: Vec<String> = (0..50).map(|i| format!("m{i}")).collect();
    assert_eq!(texts, want, "every message, in order");
    for m in &chatter {
        assert!(m.1 >= t0 && m.1 <= t1, "log time within the run");
        assert_eq!(m.1, m.2, "no header: publish time is log time");
    }
    assert!(chatter.windows(2).all(|w| w[0].1 <= w[1].1));
    let lat: Vec<_> = msgs.iter().filter(|m| m.0 == "/lat").collect();
    assert_eq!(lat.len(), 1, "the latched message, once");
    assert_eq!(cdr_string(&lat[0].3), "L");
    let late = msgs.iter().filter(|m| m.0 == "/late").count();
    assert!(late >= 5, "/late: {late}");
    let yaml = std::fs::read_to_string(bag.0.join("metadata.yaml")).unwrap();
    assert!(yaml.contains("storage_identifier: mcap"), "{yaml}");
    assert!(yaml.contains(&format!("- \"{base}_0.mcap\"")), "{yaml}");
    assert!(yaml.contains("durability: transient_local"), "{yaml}");
    assert!(yaml.contains("\"rosgate.dropped\": \"0\""), "{yaml}");
    assert!(
        yaml.contains(&format!("message_count: {}", msgs.len())),
        "{yaml}"
    );

    // info
    let o = run(&["bag", "info", bag.s()]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(
        out.contains(
            "Topic: /chatter | Type: std_msgs/msg/String | Count: 50 | Serialization Format: cdr"
        ),
        "{out}"
    );
    assert!(
        out.contains(&format!("Messages:          {}", msgs.len())),
        "{out}"
    );
    assert!(
        out.contains(
            "/lat | Type: std_msgs/msg/String | Count: 1 | Serialization Format: cdr | Latched"
        ),
        "{out}"
    );

    // play at 2x to a subscriber: same texts, in order, at half the span.
    let mut s = Client::connect(&gw);
    let id = "sub-play";
    req(
        &mut s,
        &format!(
            r#"{{"op":"subscribe","topic":"/chatter","type":"std_msgs/msg/String","id":"{id}"}}"#
        ),
        id,
    );
    let span = (chatter[49].1 - chatter[0].1) as f64 / 1e9;
    let player = thread::spawn({
        let (url, dir) = (url.clone(), bag.s().to_string());
        move || {
            run_to_exit(
                &[
                    "bag", "play", &dir, "--topics", "/chatter", "--rate", "2", "--url", &url,
                ],
                &[],
                Duration::from_secs(20),
            )
        }
    });
    let mut got = Vec::new();
    let mut times = Vec::new();
    let dl = deadline(Duration::from_secs(15));
    while got.len() < 50 {
        let v = s.recv_json(dl);
        if v["op"] == "publish" {
            got.push(v["msg"]["data"].as_str().unwrap().to_string());
            times.push(Instant::now());
        }
    }
    let o = player.join().unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(got, want);
    let played = times[49].duration_since(times[0]).as_secs_f64();
    assert!(
        (played - span / 2.0).abs() < 0.15 + span * 0.2,
        "played {played:.3} s, recorded {span:.3} s at rate 2"
    );
}

#[test]
fn record_splits_by_duration_and_metadata_lists_every_file() {
    let gw = Gateway::start(&[]);
    let url = ws_url(&gw);
    let mut p = Client::connect(&gw);
    advertise(&mut p, "/s", "std_msgs/msg/String", false);
    let bag = BagDir::new("split");
    let mut r = Recorder::start(
        &url,
        &[
            "/s",
            "-o",
            bag.s(),
            "--max-bag-duration",
            "0.3",
            "--compression",
            "zstd",
        ],
    );
    r.wait_line(|l| l.contains("subscribed to /s"));
    thread::sleep(ms(300));
    for i in 0..60 {
        p.publish("/s", &format!(r#"{{"data":"x{i}"}}"#));
        thread::sleep(ms(20));
    }
    p.barrier();
    thread::sleep(ms(300));
    let (code, err) = r.stop();
    assert_eq!(code, Some(0), "{err:?}");
    let yaml = std::fs::read_to_string(bag.0.join("metadata.yaml")).unwrap();
    let base = bag.0.file_name().unwrap().to_str().unwrap().to_string();
    let mut all = Vec::new();
    let mut n = 0;
    while bag.0.join(format!("{base}_{n}.mcap")).exists() {
        assert!(yaml.contains(&format!("{base}_{n}.mcap")), "{yaml}");
        all.extend(messages(&bag.0.join(format!("{base}_{n}.mcap"))));
        n += 1;
    }
    assert!(n >= 3, "{n} files: {yaml}");
    let texts: Vec<String> = all.iter().map(|m| cdr_string(&m.3)).collect();
    let want: Vec<String> = (0..60).map(|i| format!("x{i}")).collect();
    assert_eq!(texts, want);
    assert!(yaml.contains("message_count: 60"), "{yaml}");
}

#[test]
fn record_splits_by_size_and_sigterm_finishes_the_bag() {
    let gw = Gateway::start(&[]);
    let url = ws_url(&gw);
    let mut p = Client::connect(&gw);
    advertise(&mut p, "/z", "std_msgs/msg/String", false);
    let bag = BagDir::new("size");
    let mut r = Recorder::start(
        &url,
        &[
            "/z",
            "-o",
            bag.s(),
            "--max-bag-size",
            "250000",
            "--compression",
            "lz4",
        ],
    );
    r.wait_line(|l| l.contains("subscribed to /z"));
    thread::sleep(ms(300));
    let big = "z".repeat(50_000);
    for i in 0..20 {
        p.publish("/z", &format!(r#"{{"data":"{i} {big}"}}"#));
    }
    p.barrier();
    thread::sleep(ms(500));
    let (code, err) = r.stop_with(libc::SIGTERM);
    assert_eq!(code, Some(0), "{err:?}");
    let base = bag.0.file_name().unwrap().to_str().unwrap().to_string();
    let mut all = Vec::new();
    let mut n = 0;
    while bag.0.join(format!("{base}_{n}.mcap")).exists() {
        let msgs = messages(&bag.0.join(format!("{base}_{n}.mcap")));
        // A file is split once its messages reach the size: at most one
        // message past it.
        let bytes: usize = msgs.iter().map(|m| m.3.len()).sum();
        assert!(bytes < 250_000 + 60_000, "file {n}: {bytes} bytes");
        all.extend(msgs);
        n += 1;
    }
    assert!(n >= 4, "{n} files");
    let heads: Vec<String> = all
        .iter()
        .map(|m| cdr_string(&m.3).split(' ').next().unwrap().to_string())
        .collect();
    let want: Vec<String> = (0..20).map(|i| i.to_string()).collect();
    assert_eq!(heads, want);
    let o = run(&["bag", "info", bag.s()]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("Messages:          20"), "{out}");
}

#[test]
fn bad_input_gets_clear_messages_and_exit_statuses() {
    // Missing bag.
    let o = run(&["bag", "info", "/nonexistent/rosgate_bag"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no such file"));
    // Not an MCAP file.
    let f = TempFile::new("not.mcap", b"hello");
    let o = run(&["bag", "info", f.path()]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    // Record over TCP: a usage error (cbor-raw needs WebSocket).
    let o = run(&["bag", "record", "-a", "--url", "tcp://127.0.0.1:1"]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    // An unwritable output directory.
    let gw = Gateway::start(&[]);
    let url = ws_url(&gw);
    let o = run(&[
        "bag",
        "record",
        "-a",
        "-o",
        "/proc/rosgate_bag_x",
        "--url",
        &url,
    ]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("/proc/rosgate_bag_x"));

    // A truncated file (a recording killed): what can be read is read,
    // and the loss is said.
    let mut p = Client::connect(&gw);
    advertise(&mut p, "/t", "std_msgs/msg/String", false);
    let bag = BagDir::new("trunc");
    let mut r = Recorder::start(&url, &["/t", "-o", bag.s()]);
    r.wait_line(|l| l.contains("subscribed to /t"));
    thread::sleep(ms(300));
    // Enough data for several chunks (768 KiB each).
    let big = "y".repeat(100_000);
    for _ in 0..40 {
        p.publish("/t", &format!(r#"{{"data":"{big}"}}"#));
    }
    p.barrier();
    thread::sleep(ms(500));
    let (code, _) = r.stop();
    assert_eq!(code, Some(0));
    let base = bag.0.file_name().unwrap().to_str().unwrap().to_string();
    let file = bag.0.join(format!("{base}_0.mcap"));
    let bytes = std::fs::read(&file).unwrap();
    let cut = TempFile::new("cut.mcap", &bytes[..bytes.len() / 2]);
    let o = run(&["bag", "info", cut.path()]);
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert_eq!(o.status.code(), Some(0), "{out} {err}");
    assert!(err.contains("not finished"), "{err}");
    assert!(out.contains("Topic: /t"), "{out}");
}

/// A std_msgs/String's CDR holding `n` bytes: `i` in 8 digits, then `x`s.
fn string_cdr(i: u32, n: usize) -> Vec<u8> {
    let mut b = vec![0, 1, 0, 0];
    b.extend_from_slice(&(n as u32 + 1).to_le_bytes());
    b.extend_from_slice(format!("{i:08}").as_bytes());
    b.resize(8 + n, b'x');
    b.push(0);
    b
}

/// Writes `file`: `n` std_msgs/String messages on `topic`, `each` bytes
/// apart by `step_ns` of log time, with or without a summary.
fn write_bag(file: &Path, topic: &str, n: u32, each: usize, step_ns: u64) {
    use std::collections::BTreeMap;
    let f = std::fs::File::create(file).unwrap();
    let mut w = mcap::WriteOptions::new()
        .profile("ros2")
        .compression(None)
        .create(std::io::BufWriter::new(f))
        .unwrap();
    let s = w
        .add_schema("std_msgs/msg/String", "ros2msg", b"string data")
        .unwrap();
    let ch = w.add_channel(s, topic, "cdr", &BTreeMap::new()).unwrap();
    let t0 = 1_700_000_000_000_000_000u64;
    for i in 0..n {
        let data = string_cdr(i, each);
        w.write_to_known_channel(
            &mcap::records::MessageHeader {
                channel_id: ch,
                sequence: i,
                log_time: t0 + u64::from(i) * step_ns,
                publish_time: t0 + u64::from(i) * step_ns,
            },
            &data,
        )
        .unwrap();
    }
    w.finish().unwrap();
}

/// Runs `rosgate ARGS` to its exit within `within`: (status code, stderr,
/// peak RSS in bytes from its own rusage, `wait4`).
fn run_rss(args: &[&str], within: Duration) -> (Option<i32>, String, u64) {
    use std::io::Read;
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = child.stderr.take().unwrap();
    let reader = thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let pid = child.id() as libc::pid_t;
    let dl = deadline(within);
    let (code, rss) = loop {
        let mut status = 0;
        // SAFETY: plain out-parameters; `pid` is our unreaped child.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut ru) };
        if r == pid {
            let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
            break (code, ru.ru_maxrss as u64 * 1024);
        }
        if Instant::now() >= dl {
            let _ = child.kill();
            panic!("{args:?} did not exit within {within:?}");
        }
        thread::sleep(ms(20));
    };
    // Reaped by wait4: `child` must not be waited for again.
    std::mem::forget(child);
    (code, reader.join().unwrap(), rss)
}

#[test]
fn play_streams_a_bag_far_bigger_than_its_memory() {
    // 112 MiB of 1 MiB messages: more than the whole bound play claims
    // (MAX_PLAY_OVERLAP_BYTES 32 MiB of chunks + one MAX_PLAY_RECORD_BYTES
    // 64 MiB record, docs/limits.md); reading the file whole would show.
    const N: u32 = 112;
    const BOUND: u64 = 96 << 20;
    let gw = Gateway::start(&[]);
    let url = ws_url(&gw);
    let bag = BagDir::new("big");
    std::fs::create_dir_all(&bag.0).unwrap();
    let file = bag.0.join("big.mcap");
    write_bag(&file, "/big", N, 1 << 20, 1_000_000);
    let size = std::fs::metadata(&file).unwrap().len();
    assert!(size > BOUND + (16 << 20), "{size}");
    let mut s = Client::connect(&gw);
    req(
        &mut s,
        r#"{"op":"subscribe","topic":"/big","type":"std_msgs/msg/String","id":"sb"}"#,
        "sb",
    );
    let f = file.to_str().unwrap();
    let (code, err, rss) = run_rss(
        &["bag", "play", f, "--rate", "100000", "--url", &url],
        Duration::from_secs(120),
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains(&format!("published {N} messages")), "{err}");
    eprintln!("bag play: {size} byte bag, peak RSS {rss} bytes");
    assert!(rss < BOUND, "peak RSS {rss} bytes for a {size} byte bag");
    // What arrived is what was written, in order (this slow subscriber
    // is best effort: the gateway may shed, never reorder; the newest
    // message is always kept).
    let dl = deadline(Duration::from_secs(60));
    let mut last: Option<u32> = None;
    while last != Some(N - 1) {
        let v = s.recv_json(dl);
        if v["op"] != "publish" {
            continue;
        }
        let d = v["msg"]["data"].as_str().unwrap();
        assert_eq!(d.len(), 1 << 20);
        let i: u32 = d[..8].parse().unwrap();
        assert!(last.is_none_or(|l| i > l), "{i} after {last:?}");
        last = Some(i);
    }
}

#[test]
fn play_reads_a_file_without_summary_up_to_its_break() {
    let gw = Gateway::start(&[]);
    let url = ws_url(&gw);
    let bag = BagDir::new("cutplay");
    std::fs::create_dir_all(&bag.0).unwrap();
    let file = bag.0.join("whole.mcap");
    write_bag(&file, "/c", 400, 10_000, 1_000);
    let bytes = std::fs::read(&file).unwrap();
    let cut = bag.0.join("cut.mcap");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let o = run_to_exit(
        &["bag", "play", cut.to_str().unwrap(), "--url", &url],
        &[],
        Duration::from_secs(30),
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("no summary"), "{err}");
    assert!(err.contains("the rest of this file is not read"), "{err}");
    let n: u32 = err
        .split("published ")
        .nth(1)
        .and_then(|t| t.split(' ').next())
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("{err}"));
    assert!(n > 100 && n < 400, "{n}: {err}");
}

#[test]
fn drops_are_counted_per_topic_in_progress_summary_and_metadata() {
    let gw = Gateway::start(&[]);
    let url = ws_url(&gw);
    let mut p = Client::connect(&gw);
    advertise(&mut p, "/fast", "std_msgs/msg/String", false);
    advertise(&mut p, "/slow", "std_msgs/msg/String", false);
    let bag = BagDir::new("drops");
    // /fast is recorded best effort with depth 1 (an override in rosbag2's
    // format): a burst must lose messages, and each loss is counted.
    let q = TempFile::new(
        "qos.yaml",
        b"/fast:\n  history: keep_last\n  depth: 1\n  reliability: best_effort\n  durability: volatile\n",
    );
    let mut r = Recorder::start(
        &url,
        &[
            "/fast",
            "/slow",
            "-o",
            bag.s(),
            "--qos-profile-overrides-path",
            q.path(),
        ],
    );
    r.wait_line(|l| l.contains("subscribed to /fast"));
    r.wait_line(|l| l.contains("subscribed to /slow"));
    thread::sleep(ms(300));
    const N: usize = 3000;
    let body = "f".repeat(5000);
    for i in 0..N {
        p.publish("/fast", &format!(r#"{{"data":"{i} {body}"}}"#));
        if i % 150 == 0 {
            p.publish("/slow", &format!(r#"{{"data":"{i}"}}"#));
        }
    }
    p.barrier();
    // A progress line with the drops (every 10 s off a terminal: wait for
    // the summary instead, which the metadata must agree with).
    thread::sleep(ms(1500));
    let (code, err) = r.stop();
    assert_eq!(code, Some(0), "{err:?}");
    let base = bag.0.file_name().unwrap().to_str().unwrap().to_string();
    let msgs = messages(&bag.0.join(format!("{base}_0.mcap")));
    let fast = msgs.iter().filter(|m| m.0 == "/fast").count();
    let slow = msgs.iter().filter(|m| m.0 == "/slow").count();
    assert_eq!(slow, N / 150, "the reliable topic lost nothing");
    let yaml = std::fs::read_to_string(bag.0.join("metadata.yaml")).unwrap();
    let key = "\"rosgate.dropped./fast\": \"";
    let dropped: usize = yaml
        .split(key)
        .nth(1)
        .and_then(|t| t.split('"').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in {yaml}"));
    eprintln!("/fast: {fast} recorded, {dropped} dropped");
    assert!(dropped > 0, "{yaml}");
    assert_eq!(fast + dropped, N, "recorded + dropped = published: {yaml}");
    assert!(!yaml.contains("rosgate.dropped./slow"), "{yaml}");
    assert!(
        yaml.contains(&format!("\"rosgate.dropped\": \"{dropped}\"")),
        "{yaml}"
    );
    assert!(
        err.iter().any(|l| l.contains("/fast [std_msgs/msg/String]")
            && l.contains(&format!("{dropped} dropped"))),
        "{err:?}"
    );
    // bag info shows them.
    let o = run(&["bag", "info", bag.s()]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains(&format!("rosgate.dropped./fast: {dropped}")),
        "{out}"
    );
}

/// Calls a player service from `c` (waiting for its provider) and returns
/// the response's `values`.
fn player_call(c: &mut Client, svc: &str) -> serde_json::Value {
    let id = format!("pc-{}", uniq());
    c.send_line(&format!(
        r#"{{"op":"call_service","service":"/rosbag2_player/{svc}","id":"{id}","args":{{}},"wait":true,"timeout":10}}"#
    ));
    let v = c.expect_response(
        &format!("/rosbag2_player/{svc}"),
        &serde_json::Value::from(id),
    );
    assert_eq!(v["result"], true, "{v}");
    v["values"].clone()
}

/// The number in the next published /p message, `None` when none comes
/// within `within`.
fn next_played(s: &mut Client, within: Duration) -> Option<u32> {
    let dl = deadline(within);
    loop {
        let v: serde_json::Value = match s.try_recv_line(dl) {
            Recv::Line(l) => serde_json::from_slice(&l).unwrap(),
            Recv::Timeout => return None,
            other => panic!("{other:?}"),
        };
        if v["op"] == "publish" {
            return v["msg"]["data"].as_str().unwrap()[..8].parse().ok();
        }
    }
}

#[test]
fn play_pauses_and_resumes_through_the_rosbag2_player_services() {
    let gw = Gateway::start(&[]);
    let url = ws_url(&gw);
    let bag = BagDir::new("pause");
    std::fs::create_dir_all(&bag.0).unwrap();
    let file = bag.0.join("p.mcap");
    // 60 messages 25 ms apart: 1.5 s of playback.
    write_bag(&file, "/p", 60, 16, 25_000_000);
    let mut s = Client::connect(&gw);
    req(
        &mut s,
        r#"{"op":"subscribe","topic":"/p","type":"std_msgs/msg/String","id":"sp"}"#,
        "sp",
    );
    let player = thread::spawn({
        let (url, f) = (url.clone(), file.to_str().unwrap().to_string());
        move || {
            run_to_exit(
                &["bag", "play", &f, "--start-paused", "--url", &url],
                &[],
                Duration::from_secs(30),
            )
        }
    });
    let mut ctl = Client::connect(&gw);
    assert_eq!(player_call(&mut ctl, "is_paused")["paused"], true);
    assert_eq!(next_played(&mut s, ms(500)), None, "started paused");
    assert_eq!(player_call(&mut ctl, "resume"), serde_json::json!({}));
    assert_eq!(player_call(&mut ctl, "is_paused")["paused"], false);
    let mut got = Vec::new();
    while got.len() < 10 {
        got.push(next_played(&mut s, Duration::from_secs(5)).expect("playing"));
    }
    player_call(&mut ctl, "pause");
    // What was in flight when the pause came, then nothing.
    while let Some(i) = next_played(&mut s, ms(200)) {
        got.push(i);
    }
    let paused_at = got.len();
    assert!(paused_at < 40, "the pause stopped playback: {paused_at}");
    assert_eq!(next_played(&mut s, ms(600)), None, "nothing while paused");
    assert_eq!(player_call(&mut ctl, "is_paused")["paused"], true);
    let t = Instant::now();
    player_call(&mut ctl, "toggle_paused");
    while got.len() < 60 {
        got.push(next_played(&mut s, Duration::from_secs(5)).expect("resumed"));
    }
    // The rest keeps its recorded spacing: no burst to catch up.
    let rest = t.elapsed().as_secs_f64();
    let want = (60 - paused_at) as f64 * 0.025;
    assert!(
        rest > want * 0.7,
        "rest played in {rest:.3} s, recorded {want:.3} s"
    );
    assert_eq!(got, (0..60).collect::<Vec<u32>>());
    let o = player.join().unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("paused") && err.contains("resumed"), "{err}");
}

#[test]
fn play_applies_a_rosbag2_qos_override_file_and_loop_ends_when_nothing_plays() {
    let gw = Gateway::start(&[]);
    let url = ws_url(&gw);
    let bag = BagDir::new("qosplay");
    std::fs::create_dir_all(&bag.0).unwrap();
    let file = bag.0.join("q.mcap");
    write_bag(&file, "/q", 40, 16, 25_000_000);
    let q = TempFile::new(
        "qos_play.yaml",
        b"/q:\n  history: keep_last\n  depth: 3\n  reliability: best_effort\n  durability: transient_local\n  lifespan:\n    sec: 5\n    nsec: 0\n",
    );
    let mut child = Command::new(BIN)
        .args([
            "bag",
            "play",
            file.to_str().unwrap(),
            "--loop",
            "--qos-profile-overrides-path",
            q.path(),
            "--url",
            &url,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut c = Client::connect(&gw);
    let dl = deadline(Duration::from_secs(10));
    let publisher = loop {
        let id = format!("ti-{}", uniq());
        c.call(
            "/rosgate/topic_info",
            &format!("\"{id}\""),
            r#"{"topic":"/q"}"#,
        );
        let v = c.expect_response("/rosgate/topic_info", &serde_json::Value::from(id));
        if let Some(p) = v["values"]["publishers"].as_array().and_then(|p| p.first()) {
            break p.clone();
        }
        assert!(Instant::now() < dl, "the player never advertised /q: {v}");
        thread::sleep(ms(50));
    };
    assert_eq!(
        publisher["qos"],
        serde_json::json!({"reliability":"best_effort","durability":"transient_local","depth":3}),
        "{publisher}"
    );
    // A late subscriber gets the 3 latched messages at once.
    thread::sleep(ms(300));
    let mut s = Client::connect(&gw);
    s.send_line(r#"{"op":"subscribe","topic":"/q","type":"std_msgs/msg/String","id":"late"}"#);
    let mut got = 0;
    let dl = deadline(ms(20));
    while let Recv::Line(_) = s.try_recv_line(dl) {
        got += 1;
    }
    assert!(got >= 3, "{got} lines at once (status + 3 latched)");
    let err = interrupt_player(&mut child);
    assert!(err.contains("/q: lifespan is not applied"), "{err}");

    // --loop over nothing playable ends instead of spinning.
    let o = run_to_exit(
        &[
            "bag",
            "play",
            file.to_str().unwrap(),
            "--loop",
            "--topics",
            "/none",
            "--url",
            &url,
        ],
        &[],
        Duration::from_secs(10),
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("nothing to play"), "{err}");
    // A bad override file is a usage error.
    let bad = TempFile::new("qos_bad.yaml", b"/q:\n  reliability: sometimes\n");
    let o = run(&[
        "bag",
        "play",
        file.to_str().unwrap(),
        "--qos-profile-overrides-path",
        bad.path(),
        "--url",
        &url,
    ]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
}

/// Recording through a federation (docs/federation.md): the publisher is
/// a client of gateway A, the recorder of gateway B, joined over Zenoh.
/// Needs the `zenoh` feature (`cargo test -p rosgate --features zenoh
/// --test bag`; `cargo test --workspace` turns it on).
#[cfg(feature = "zenoh")]
#[test]
fn record_through_a_federation_gets_every_message_in_order() {
    let (pa, pb) = (free_zenoh_port(), free_zenoh_port());
    let la = format!("tcp/127.0.0.1:{pa}");
    let lb = format!("tcp/127.0.0.1:{pb}");
    let a = Gateway::start(&["--zenoh-listen", &la]);
    let b = Gateway::start(&["--zenoh-listen", &lb, "--zenoh-connect", &la]);
    let url_b = ws_url(&b);
    let mut p = Client::connect(&a);
    advertise(&mut p, "/fed/rec", "std_msgs/msg/String", false);
    p.publish("/fed/rec", r#"{"data":"before"}"#);
    p.barrier();
    let bag = BagDir::new("fed");
    let mut r = Recorder::start(&url_b, &["/fed/rec", "-o", bag.s()]);
    // B lists A's topic once the federation told it (the recorder reads
    // the topic list every second until the topic is there).
    r.wait_line(|l| l.contains("subscribed to /fed/rec"));
    // The recorder's interest has to reach A before A forwards: publish
    // until the first message arrives on B's side, then the run proper.
    let mut probe = Client::connect(&b);
    req(
        &mut probe,
        r#"{"op":"subscribe","topic":"/fed/rec","type":"std_msgs/msg/String","id":"pr"}"#,
        "pr",
    );
    let dl = deadline(Duration::from_secs(10));
    loop {
        p.publish("/fed/rec", r#"{"data":"warm"}"#);
        match probe.try_recv_line(deadline(ms(100))) {
            Recv::Line(l) if String::from_utf8_lossy(&l).contains("warm") => break,
            _ => assert!(Instant::now() < dl, "nothing crossed from A to B"),
        }
    }
    thread::sleep(ms(300));
    const N: usize = 200;
    for i in 0..N {
        p.publish("/fed/rec", &format!(r#"{{"data":"f{i}"}}"#));
        if i % 20 == 0 {
            thread::sleep(ms(5));
        }
    }
    p.barrier();
    // Wait until the probe (on B, like the recorder) saw the last one.
    let dl = deadline(Duration::from_secs(10));
    loop {
        match probe.try_recv_line(dl) {
            Recv::Line(l) if String::from_utf8_lossy(&l).contains(&format!("f{}", N - 1)) => break,
            Recv::Line(_) => {}
            other => panic!("the last message never reached B: {other:?}"),
        }
    }
    thread::sleep(ms(300));
    let (code, err) = r.stop();
    assert_eq!(code, Some(0), "{err:?}");
    let base = bag.0.file_name().unwrap().to_str().unwrap().to_string();
    let msgs = messages(&bag.0.join(format!("{base}_0.mcap")));
    let texts: Vec<String> = msgs
        .iter()
        .map(|m| cdr_string(&m.3))
        .filter(|t| t.starts_with('f'))
        .collect();
    let want: Vec<String> = (0..N).map(|i| format!("f{i}")).collect();
    assert_eq!(texts, want, "every message, in order, as CDR");
    let yaml = std::fs::read_to_string(bag.0.join("metadata.yaml")).unwrap();
    assert!(yaml.contains("\"rosgate.dropped\": \"0\""), "{yaml}");
    assert!(yaml.contains("type: \"std_msgs/msg/String\""), "{yaml}");
}

#[test]
fn space_on_a_terminal_pauses_and_the_terminal_is_restored() {
    use std::io::Write;
    use std::os::fd::FromRawFd;
    use std::os::unix::process::CommandExt;
    let gw = Gateway::start(&[]);
    let url = ws_url(&gw);
    let bag = BagDir::new("tty");
    std::fs::create_dir_all(&bag.0).unwrap();
    let file = bag.0.join("t.mcap");
    write_bag(&file, "/t", 400, 16, 25_000_000);
    // A pseudo-terminal the player gets as its controlling terminal.
    let (mut master, mut slave) = (0, 0);
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(rc, 0);
    let tty = unsafe { std::fs::File::from_raw_fd(slave) };
    let mut keys = unsafe { std::fs::File::from_raw_fd(master) };
    let mut cmd = Command::new(BIN);
    cmd.args(["bag", "play", file.to_str().unwrap(), "--url", &url])
        .stdin(tty.try_clone().unwrap())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // SAFETY: async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            libc::ioctl(0, libc::TIOCSCTTY, 0);
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    let mut ctl = Client::connect(&gw);
    assert_eq!(player_call(&mut ctl, "is_paused")["paused"], false);
    // Non-canonical and unechoed while it plays.
    let lflag = |f: &std::fs::File| {
        use std::os::fd::AsRawFd;
        let mut t: libc::termios = unsafe { std::mem::zeroed() };
        assert_eq!(unsafe { libc::tcgetattr(f.as_raw_fd(), &mut t) }, 0);
        t.c_lflag
    };
    let dl = deadline(Duration::from_secs(5));
    while lflag(&tty) & libc::ICANON != 0 {
        assert!(Instant::now() < dl, "never put in non-canonical mode");
        thread::sleep(ms(20));
    }
    assert_eq!(lflag(&tty) & libc::ECHO, 0);
    keys.write_all(b" ").unwrap();
    let dl = deadline(Duration::from_secs(5));
    while player_call(&mut ctl, "is_paused")["paused"] != true {
        assert!(Instant::now() < dl, "space did not pause");
        thread::sleep(ms(20));
    }
    keys.write_all(b" ").unwrap();
    let dl = deadline(Duration::from_secs(5));
    while player_call(&mut ctl, "is_paused")["paused"] != false {
        assert!(Instant::now() < dl, "space did not resume");
        thread::sleep(ms(20));
    }
    let err = interrupt_player(&mut child);
    assert!(err.contains("press space"), "{err}");
    assert_ne!(lflag(&tty) & libc::ICANON, 0, "restored: {err}");
    assert_ne!(lflag(&tty) & libc::ECHO, 0, "restored: {err}");
}
