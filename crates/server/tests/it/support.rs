//! Shared harness for the wire-level integration tests: start the real `rosgate` binary on an
//! ephemeral port, talk to it over TCP, and read its own accounting through `/rosgate/stats`.
//!
//! Every read has a deadline. Nothing here sleeps for a fixed time where polling works.

use serde_json::Value;
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_rosgate");

/// Generous deadline for a reply that must come.
pub const REPLY: Duration = Duration::from_secs(5);

pub fn deadline(d: Duration) -> Instant {
    Instant::now() + d
}

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// How long a run of the binary that must exit by itself may take.
pub const EXIT_WITHIN: Duration = Duration::from_secs(10);

/// Runs the binary to completion with `args` (killed after [`EXIT_WITHIN`]).
pub fn run(args: &[&str]) -> Output {
    run_to_exit(args, &[], EXIT_WITHIN)
}

/// Runs the binary to completion with `args` and `env` added (the caller's
/// own `$ROSGATE_URL`, `$ROSGATE_TOKEN` and `$ROSGATE_CA_FILE` removed, so
/// a developer's shell cannot change the outcome); kills it and fails the
/// test if it has not exited within `within`.
pub fn run_to_exit(args: &[&str], env: &[(&str, &str)], within: Duration) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .env_remove("ROSGATE_URL")
        .env_remove("ROSGATE_TOKEN")
        .env_remove("ROSGATE_CA_FILE")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let dl = deadline(within);
    loop {
        if child.try_wait().expect("try_wait").is_some() {
            return child.wait_with_output().expect("output");
        }
        if Instant::now() >= dl {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!(
                "`rosgate {}` did not exit within {within:?}; stderr: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        thread::sleep(ms(10));
    }
}

static SEQ: AtomicU64 = AtomicU64::new(1);

/// A process-wide unique number, for ids and topic names.
pub fn uniq() -> u64 {
    SEQ.fetch_add(1, Ordering::Relaxed)
}

// ---------------------------------------------------------------------------------------------
// Gateway process
// ---------------------------------------------------------------------------------------------

pub struct Gateway {
    child: Option<Child>,
    pub addr: SocketAddr,
    logs: Arc<Mutex<Vec<String>>>,
}

/// Extracts the socket address that follows "listening on " (and `tls://`) in a log line.
pub fn parse_listen(line: &str) -> Option<SocketAddr> {
    let at = line.find("listening on ")?;
    let rest = &line[at + "listening on ".len()..];
    let token = rest.split_whitespace().next()?;
    let token = token.trim_matches(|c: char| matches!(c, '"' | '\'' | ',' | ';' | ')' | '('));
    // Under --tls-cert the TCP line says `tls://ADDR`.
    token.strip_prefix("tls://").unwrap_or(token).parse().ok()
}

impl Gateway {
    /// Starts `rosgate --listen 127.0.0.1:0 FLAGS...` and waits for its "listening on" line.
    pub fn start(flags: &[&str]) -> Gateway {
        // The WebSocket listener gets an ephemeral port too, so parallel
        // gateways never fight over 9090; the Foxglove listener is off
        // unless a test asks for it (8765 is the user's).
        let mut args = vec![
            "--listen",
            "127.0.0.1:0",
            "--ws-listen",
            "127.0.0.1:0",
            "--foxglove-listen",
            "off",
        ];
        args.extend_from_slice(flags);
        Gateway::spawn_args(&args).unwrap_or_else(|e| panic!("gateway failed to start: {e}"))
    }

    /// Starts the binary with exactly these arguments and waits for the "listening on" line.
    pub fn spawn_args(args: &[&str]) -> Result<Gateway, String> {
        Gateway::spawn_with(Command::new(BIN), args)
    }

    /// As [`Gateway::spawn_args`], in network namespace `ns`
    /// (`ip netns exec`, which execs the gateway: its pid is the gateway's).
    pub fn spawn_in_netns(ns: &str, args: &[&str]) -> Result<Gateway, String> {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", ns, BIN]);
        Gateway::spawn_with(cmd, args)
    }

    fn spawn_with(mut cmd: Command, args: &[&str]) -> Result<Gateway, String> {
        let mut child = cmd
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("spawn {BIN}: {e}"))?;
        let stderr = child.stderr.take().expect("piped stderr");
        let logs = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = mpsc::channel::<String>();
        let sink = logs.clone();
        thread::spawn(move || {
            // Keep draining stderr for the whole life of the process so the pipe never fills.
            let mut r = BufReader::new(stderr);
            let mut buf = Vec::new();
            loop {
                buf.clear();
                match r.read_until(b'\n', &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        let line = String::from_utf8_lossy(&buf).trim_end().to_string();
                        sink.lock().unwrap().push(line.clone());
                        let _ = tx.send(line);
                    }
                }
            }
        });
        let mut gw = Gateway {
            child: Some(child),
            addr: "127.0.0.1:1".parse().unwrap(),
            logs,
        };
        let dl = deadline(Duration::from_secs(10));
        loop {
            let now = Instant::now();
            if now >= dl {
                return Err(format!(
                    "no 'listening on' line within 10 s; stderr so far: {:?}",
                    gw.logs()
                ));
            }
            match rx.recv_timeout(dl - now) {
                Ok(line) => {
                    if let Some(addr) = parse_listen(&line) {
                        gw.addr = addr;
                        return Ok(gw);
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let st = gw.wait_exit(Duration::from_secs(5));
                    return Err(format!(
                        "gateway exited before listening ({st:?}); stderr: {:?}",
                        gw.logs()
                    ));
                }
            }
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("child").id()
    }

    /// All stderr lines seen so far.
    pub fn logs(&self) -> Vec<String> {
        self.logs.lock().unwrap().clone()
    }

    pub fn signal(&self, sig: i32) {
        let rc = unsafe { libc::kill(self.pid() as libc::pid_t, sig) };
        assert_eq!(rc, 0, "kill({}, {sig}) failed", self.pid());
    }

    /// Polls for process exit up to `within`; None if still running.
    pub fn wait_exit(&mut self, within: Duration) -> Option<ExitStatus> {
        let dl = deadline(within);
        let child = self.child.as_mut()?;
        loop {
            if let Ok(Some(st)) = child.try_wait() {
                return Some(st);
            }
            if Instant::now() >= dl {
                return None;
            }
            thread::sleep(ms(10));
        }
    }

    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// Asserts the process is still alive (never terminated by hostile input).
    pub fn assert_alive(&mut self) {
        assert!(
            self.is_running(),
            "gateway process died; stderr: {:?}",
            self.logs()
        );
    }

    pub fn client(&self) -> Client {
        Client::connect(self)
    }

    /// `/rosgate/stats` values, asked on a fresh connection (which counts itself as open).
    pub fn stats(&self) -> Value {
        let mut c = Client::connect(self);
        c.name = "stats".into();
        c.stats()
    }

    /// Polls stats until `pred` holds; panics with the last snapshot after `within`.
    pub fn wait_for_stats_within(
        &self,
        what: &str,
        within: Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        let dl = deadline(within);
        loop {
            let s = self.stats();
            if pred(&s) {
                return s;
            }
            if Instant::now() >= dl {
                panic!("stats never satisfied `{what}` within {within:?}; last: {s}");
            }
            thread::sleep(ms(20));
        }
    }

    pub fn wait_for_stats(&self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        self.wait_for_stats_within(what, Duration::from_secs(10), pred)
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Reads a counter by dotted path ("closes.write_stall"); panics if absent or not an integer.
pub fn counter(stats: &Value, path: &str) -> u64 {
    let mut v = stats;
    for part in path.split('.') {
        v = v
            .get(part)
            .unwrap_or_else(|| panic!("stats has no `{path}`: {stats}"));
    }
    v.as_u64()
        .unwrap_or_else(|| panic!("stats `{path}` is not a non-negative integer: {v}"))
}

/// The sum of all counters in `stats.errors`.
pub fn total_errors(stats: &Value) -> u64 {
    stats["errors"]
        .as_object()
        .unwrap_or_else(|| panic!("stats.errors not an object: {stats}"))
        .values()
        .map(|v| v.as_u64().unwrap_or(0))
        .sum()
}

// ---------------------------------------------------------------------------------------------
// Client connection
// ---------------------------------------------------------------------------------------------

#[derive(Debug)]
pub enum Recv {
    Line(Vec<u8>),
    Timeout,
    /// Orderly EOF; carries bytes of an unterminated final line, if any.
    Eof(Vec<u8>),
    /// Connection reset or another read error.
    Error(std::io::Error),
}

#[derive(Clone, Copy, Debug)]
pub enum Mode {
    Whole,
    ByteByByte,
    Halves,
}

pub const MODES: [Mode; 3] = [Mode::Whole, Mode::ByteByByte, Mode::Halves];

pub struct Client {
    pub stream: TcpStream,
    buf: Vec<u8>,
    start: usize,
    pub name: String,
}

impl Client {
    pub fn connect(gw: &Gateway) -> Client {
        Client::connect_addr(gw.addr)
    }

    pub fn connect_addr(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
            .unwrap_or_else(|e| panic!("connect {addr}: {e}"));
        Client::from_stream(stream)
    }

    /// Connects with SO_RCVBUF set before connect (so the window stays small): a slow consumer.
    pub fn connect_small_rcvbuf(gw: &Gateway, rcvbuf: usize) -> Client {
        use socket2::{Domain, Socket, Type};
        let s = Socket::new(Domain::IPV4, Type::STREAM, None).expect("socket");
        s.set_recv_buffer_size(rcvbuf).expect("SO_RCVBUF");
        s.connect_timeout(&gw.addr.into(), Duration::from_secs(5))
            .expect("connect");
        Client::from_stream(s.into())
    }

    pub fn from_stream(stream: TcpStream) -> Client {
        stream.set_nodelay(true).unwrap();
        stream
            .set_write_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        Client {
            stream,
            buf: Vec::new(),
            start: 0,
            name: format!("client-{}", uniq()),
        }
    }

    // ----- sending -----

    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.stream
            .write_all(bytes)
            .unwrap_or_else(|e| panic!("{}: write failed: {e}", self.name));
    }

    pub fn try_send_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// Sends `line` followed by `\n`.
    pub fn send_line(&mut self, line: &str) {
        let mut b = Vec::with_capacity(line.len() + 1);
        b.extend_from_slice(line.as_bytes());
        b.push(b'\n');
        self.send_raw(&b);
    }

    pub fn send_json(&mut self, v: &Value) {
        self.send_line(&v.to_string());
    }

    /// Sends `bytes` whole, one byte per write, or in two halves with a pause in between.
    pub fn send_mode(&mut self, bytes: &[u8], mode: Mode) {
        match mode {
            Mode::Whole => self.send_raw(bytes),
            Mode::ByteByByte => {
                for b in bytes {
                    self.send_raw(std::slice::from_ref(b));
                    thread::sleep(Duration::from_micros(100));
                }
            }
            Mode::Halves => {
                let mid = bytes.len() / 2;
                self.send_raw(&bytes[..mid]);
                thread::sleep(ms(30));
                self.send_raw(&bytes[mid..]);
            }
        }
    }

    pub fn shutdown_write(&self) {
        let _ = self.stream.shutdown(Shutdown::Write);
    }

    // ----- receiving -----

    fn take_line(&mut self) -> Option<Vec<u8>> {
        let pending = &self.buf[self.start..];
        let pos = pending.iter().position(|&b| b == b'\n')?;
        let line = pending[..pos].to_vec();
        self.start += pos + 1;
        if self.start > 1 << 20 && self.start * 2 > self.buf.len() {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        Some(line)
    }

    /// Next raw line (without `\n`), or why there is none.
    pub fn try_recv_line(&mut self, dl: Instant) -> Recv {
        let mut tmp = vec![0u8; 64 * 1024];
        loop {
            if let Some(line) = self.take_line() {
                return Recv::Line(line);
            }
            let now = Instant::now();
            if now >= dl {
                return Recv::Timeout;
            }
            let wait = (dl - now).max(ms(1));
            self.stream.set_read_timeout(Some(wait)).unwrap();
            match self.stream.read(&mut tmp) {
                Ok(0) => {
                    let rest = self.buf[self.start..].to_vec();
                    self.buf.clear();
                    self.start = 0;
                    return Recv::Eof(rest);
                }
                Ok(n) => self.buf.extend_from_slice(&tmp[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                    ) => {}
                Err(e) => return Recv::Error(e),
            }
        }
    }

    /// Next raw line as text; panics on timeout or close.
    pub fn recv_raw(&mut self, dl: Instant) -> String {
        match self.try_recv_line(dl) {
            Recv::Line(l) => String::from_utf8(l)
                .unwrap_or_else(|e| panic!("{}: output line is not UTF-8: {e}", self.name)),
            other => panic!("{}: expected a line, got {other:?}", self.name),
        }
    }

    /// Next line parsed as JSON; panics on timeout, close or non-JSON output.
    pub fn recv_json(&mut self, dl: Instant) -> Value {
        let raw = self.recv_raw(dl);
        parse_line(&raw)
    }

    /// Next line parsed as JSON, waiting up to REPLY.
    pub fn recv(&mut self) -> Value {
        self.recv_json(deadline(REPLY))
    }

    /// Reads until a line matches `pred`; returns (match, everything skipped before it).
    pub fn recv_until(
        &mut self,
        pred: impl Fn(&Value) -> bool,
        dl: Instant,
    ) -> (Value, Vec<Value>) {
        let mut skipped = Vec::new();
        loop {
            match self.try_recv_line(dl) {
                Recv::Line(l) => {
                    let v = parse_line(&String::from_utf8_lossy(&l));
                    if pred(&v) {
                        return (v, skipped);
                    }
                    skipped.push(v);
                }
                other => panic!(
                    "{}: wanted a matching line, got {other:?}; skipped so far: {skipped:?}",
                    self.name
                ),
            }
        }
    }

    /// Like `recv_until` but keeps raw text of the matching line.
    pub fn recv_raw_until(&mut self, pred: impl Fn(&Value) -> bool, dl: Instant) -> String {
        loop {
            match self.try_recv_line(dl) {
                Recv::Line(l) => {
                    let raw = String::from_utf8(l).expect("UTF-8 output");
                    if pred(&parse_line(&raw)) {
                        return raw;
                    }
                }
                other => panic!("{}: wanted a matching line, got {other:?}", self.name),
            }
        }
    }

    /// The next line must be a status of `level` with exactly this id (None: no id field).
    pub fn expect_status(&mut self, level: &str, id: Option<Value>) -> Value {
        let v = self.recv();
        assert_status(&v, level, id.as_ref());
        v
    }

    pub fn expect_info(&mut self, id: impl Into<Value>) -> Value {
        self.expect_status("info", Some(id.into()))
    }

    pub fn expect_error(&mut self, id: impl Into<Value>) -> Value {
        self.expect_status("error", Some(id.into()))
    }

    pub fn expect_error_no_id(&mut self) -> Value {
        self.expect_status("error", None)
    }

    /// Sends a side-effect-free request with a unique id and reads up to its reply.
    /// Returns every frame that arrived before the reply.
    pub fn barrier(&mut self) -> Vec<Value> {
        let id = format!("barrier-{}", uniq());
        self.send_line(&format!(
            r#"{{"op":"unsubscribe","topic":"/__barrier__","id":"{id}"}}"#
        ));
        let want = Value::String(id.clone());
        let (reply, before) =
            self.recv_until(|v| v["op"] == "status" && v["id"] == want, deadline(REPLY));
        assert_eq!(reply["level"], "info", "barrier reply: {reply}");
        before
    }

    /// Asserts nothing arrived (or arrives before the barrier reply).
    pub fn assert_quiet(&mut self) {
        let extra = self.barrier();
        assert!(
            extra.is_empty(),
            "{}: unexpected frames: {extra:?}",
            self.name
        );
    }

    /// Reads and discards until the peer closes. Returns the lines received meanwhile.
    pub fn expect_closed(&mut self, within: Duration) -> Vec<Vec<u8>> {
        let dl = deadline(within);
        let mut lines = Vec::new();
        loop {
            match self.try_recv_line(dl) {
                Recv::Line(l) => lines.push(l),
                Recv::Eof(_) | Recv::Error(_) => return lines,
                Recv::Timeout => panic!(
                    "{}: connection not closed within {within:?} ({} lines read)",
                    self.name,
                    lines.len()
                ),
            }
        }
    }

    // ----- protocol helpers -----

    pub fn subscribe(&mut self, topic: &str) {
        let id = format!("sub-{}", uniq());
        self.send_line(&format!(
            r#"{{"op":"subscribe","topic":"{topic}","type":"test/T","id":"{id}"}}"#
        ));
        self.expect_info(id);
    }

    pub fn unsubscribe(&mut self, topic: &str) {
        let id = format!("unsub-{}", uniq());
        self.send_line(&format!(
            r#"{{"op":"unsubscribe","topic":"{topic}","id":"{id}"}}"#
        ));
        self.expect_info(id);
    }

    pub fn advertise(&mut self, topic: &str) {
        let id = format!("adv-{}", uniq());
        self.send_line(&format!(
            r#"{{"op":"advertise","topic":"{topic}","type":"test/T","id":"{id}"}}"#
        ));
        self.expect_info(id);
    }

    pub fn publish(&mut self, topic: &str, msg: &str) {
        self.send_line(&format!(
            r#"{{"op":"publish","topic":"{topic}","msg":{msg}}}"#
        ));
    }

    pub fn advertise_service(&mut self, service: &str) {
        let id = format!("advsrv-{}", uniq());
        self.send_line(&format!(
            r#"{{"op":"advertise_service","service":"{service}","type":"test/S","id":"{id}"}}"#
        ));
        self.expect_info(id);
    }

    /// Sends a call; `id` and `args` are raw JSON text.
    pub fn call(&mut self, service: &str, id: &str, args: &str) {
        self.send_line(&format!(
            r#"{{"op":"call_service","service":"{service}","id":{id},"args":{args}}}"#
        ));
    }

    /// Reads the next forwarded call (skipping nothing) and returns it.
    pub fn expect_forwarded(&mut self, service: &str) -> Value {
        let v = self.recv();
        assert_eq!(
            v["op"], "call_service",
            "{}: expected forwarded call, got {v}",
            self.name
        );
        assert_eq!(v["service"], service, "forwarded call: {v}");
        let id = v["id"]
            .as_str()
            .unwrap_or_else(|| panic!("forwarded call id is not a string: {v}"));
        assert!(id.starts_with("rg-"), "forwarded call id not rg-<n>: {v}");
        v
    }

    /// Sends a provider response; `id_json`, `values`, `result` are raw JSON text.
    pub fn respond(&mut self, service: &str, id_json: &str, values: &str, result: &str) {
        self.send_line(&format!(
            r#"{{"op":"service_response","service":"{service}","id":{id_json},"values":{values},"result":{result}}}"#
        ));
    }

    /// Reads the next frame; it must be a service_response for `id` (compared as JSON).
    pub fn expect_response(&mut self, service: &str, id: &Value) -> Value {
        let v = self.recv();
        assert_eq!(
            v["op"], "service_response",
            "{}: expected response, got {v}",
            self.name
        );
        assert_eq!(v["service"], service, "response: {v}");
        assert_eq!(&v["id"], id, "response id: {v}");
        v
    }

    /// Reads the next frame; it must be a clean failure response for `id`.
    pub fn expect_failure(&mut self, service: &str, id: &Value) -> Value {
        let v = self.expect_response(service, id);
        assert_failure(&v);
        v
    }

    /// Stats over this connection (reads through unrelated frames).
    pub fn stats(&mut self) -> Value {
        let id = format!("stats-{}", uniq());
        self.send_line(&format!(
            r#"{{"op":"call_service","service":"/rosgate/stats","id":"{id}","args":{{}}}}"#
        ));
        let want = Value::String(id);
        let (v, _) = self.recv_until(
            |v| v["op"] == "service_response" && v["id"] == want,
            deadline(REPLY),
        );
        assert_eq!(v["service"], "/rosgate/stats", "stats reply: {v}");
        assert_eq!(v["result"], true, "stats reply: {v}");
        assert!(v["values"].is_object(), "stats values not an object: {v}");
        v["values"].clone()
    }
}

pub fn parse_line(raw: &str) -> Value {
    let v: Value = serde_json::from_str(raw)
        .unwrap_or_else(|e| panic!("output line is not JSON ({e}): {raw:?}"));
    assert!(v.is_object(), "output line is not a JSON object: {raw}");
    v
}

pub fn assert_status(v: &Value, level: &str, id: Option<&Value>) {
    assert_eq!(v["op"], "status", "expected a status, got {v}");
    assert_eq!(v["level"], level, "status level: {v}");
    assert!(
        v["msg"].as_str().is_some_and(|m| !m.is_empty()),
        "status msg must be a non-empty string: {v}"
    );
    match id {
        Some(id) => assert_eq!(&v["id"], id, "status id: {v}"),
        None => assert!(v.get("id").is_none(), "status must carry no id: {v}"),
    }
}

pub fn assert_failure(v: &Value) {
    assert_eq!(v["op"], "service_response", "failure: {v}");
    assert_eq!(v["result"], false, "failure must have result:false: {v}");
    assert!(
        v["values"].as_str().is_some_and(|s| !s.is_empty()),
        "failure values must be a reason string: {v}"
    );
    assert!(v.get("status").is_none(), "failure carries no status: {v}");
}

/// A JSON value nested `depth` arrays deep: [[[...1...]]].
pub fn nested(depth: usize) -> String {
    let mut s = String::with_capacity(depth * 2 + 1);
    s.push_str(&"[".repeat(depth));
    s.push('1');
    s.push_str(&"]".repeat(depth));
    s
}

/// True when a line has no whitespace outside JSON strings (compact serialization).
pub fn is_compact(raw: &str) -> bool {
    let mut in_str = false;
    let mut esc = false;
    for c in raw.chars() {
        if in_str {
            if esc {
                esc = false;
            } else if c == '\\' {
                esc = true;
            } else if c == '"' {
                in_str = false;
            }
        } else if c == '"' {
            in_str = true;
        } else if c.is_whitespace() {
            return false;
        }
    }
    !in_str
}

/// Runs `f` on a thread and returns its handle: for concurrent clients.
pub fn spawn<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> thread::JoinHandle<T> {
    thread::spawn(f)
}

/// A free loopback port for a Zenoh listener that the test must name up
/// front (another gateway connects to it). Taken below Linux's ephemeral
/// range (32768 and up), from a per-process sequence offset by the pid:
/// a port found free and released there is not handed to the many
/// sockets that bind port 0 meanwhile (Zenoh's own listeners among them),
/// which is how "bind 0, release, reuse" lost its port under load.
#[allow(dead_code)] // used by the Zenoh tests only
pub fn free_zenoh_port() -> u16 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let base = 20_000 + u64::from(std::process::id()) % 500 * 20;
    for _ in 0..10_000 {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = (base + n % 12_000) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port in 20000-32767");
}

/// A temporary file, named after what it holds (`what`), removed when
/// dropped.
pub struct TempFile(std::path::PathBuf);

impl TempFile {
    pub fn new(what: &str, bytes: impl AsRef<[u8]>) -> TempFile {
        let path = std::env::temp_dir().join(format!(
            "rosgate_test_{}_{}_{what}",
            std::process::id(),
            uniq()
        ));
        std::fs::write(&path, bytes).expect("write temp file");
        TempFile(path)
    }

    pub fn path(&self) -> &str {
        self.0.to_str().expect("UTF-8 temp path")
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
