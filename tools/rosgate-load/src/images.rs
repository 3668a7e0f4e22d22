//! The `images` scenario (issue 25): one publisher sends a
//! `sensor_msgs/msg/Image` (rgb8, 640x480 or 1280x720) open loop at a
//! camera's rate to N WebSocket subscribers, each asking for JSON, `cbor`
//! or `cbor-raw`; the run reports, per encoding, what arrived, how late,
//! and how many bytes, and the gateway's CPU per delivered image.
//!
//! What it owns: its own mio loop (one publisher over TCP JSON lines, the
//! subscribers over WebSocket), the per-subscriber sequence accounting and
//! the per-encoding tallies. The message layout and the decoders are in
//! `image`; this module never looks inside a frame.
//!
//! - The publisher speaks the gateway's TCP JSON lines (`--addr`), as every
//!   other scenario's publishers do: it advertises the topic with its type
//!   (`sensor_msgs/msg/Image`, so a gateway that knows the type can send
//!   `uint8[]` as CBOR bytes), then sends `publish` lines with `data` as
//!   base64, the rosbridge JSON form of `uint8[]`.
//! - Subscribers connect to `--ws-addr` with `rosgate_wire::ws::client`,
//!   raise their status level to `info` (rosbridge's `set_level`) so that
//!   the `subscribe` is acknowledged, and subscribe with the type and their
//!   encoding's `compression`.
//! - Open loop: image `k` is due at `start + k / rate` and stamped (header
//!   `stamp`) with that intended time even when sent late, so a stall
//!   shows in the latency of every image it delayed; `frame_id` carries the
//!   sequence number. A due image is skipped (and counted) when the
//!   publisher still has [`MAX_PUB_BACKLOG`] lines unsent: the gateway is
//!   not reading, and queueing more in the tool would only hide it.
//! - `--scenario strings` is the same loop for `std_msgs/msg/String`
//!   (see `text`): the publisher sends `data` `"<send ns> <seq> "` then
//!   padding, JSON subscribers only.
//! - `--publisher none` (issue 26): no publisher of ours; the topic's
//!   messages come from someone else on the same machine (an rclpy node on
//!   a ROS 2 graph the gateway joined). Its stamps must be wall-clock ns
//!   (`CLOCK_REALTIME`, Python's `time.time_ns()`), and the measured
//!   interval is wall-clock time too; its sequence numbers (Image:
//!   `frame_id`, String: the second number of `data`) may start anywhere:
//!   each subscriber syncs on the first one it sees and counts gaps from
//!   there. An outside Image must carry the tool's pixel pattern (byte `i`
//!   is `i % 251`). The drain ends when every subscriber has seen a stamp
//!   past the measured interval (or at `--drain`).
//! - Invariants of the accounting: every subscriber must see sequence
//!   numbers 0, 1, 2, ... (a gap is loss, a step back is reordering), every
//!   frame must decode, and in the encoding the subscriber asked for (a
//!   gateway that ignores `compression` shows as `wrong_encoding`). Latency,
//!   bytes and CPU count only images due within the measured interval;
//!   the checks count every image.

use std::collections::BTreeMap;
use std::io::{self, ErrorKind};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use memchr::memchr;
use mio::net::TcpStream;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use rosgate_wire::ws::client::{self as ws, parse_frame, FrameError, Response};
use rosgate_wire::ws::frame::{OP_BINARY, OP_CLOSE, OP_PING, OP_PONG, OP_TEXT};
use serde_json::{json, Value};

use crate::histogram::Histogram;
use crate::image::{Bad, Encoding, Image, ImageSize, Seen, IMAGE_TYPE};
use crate::net::{connect_done, Filled, RxBuf, TxBuf};
use crate::procfs::{CpuSample, CpuUse};
use crate::text::{Text, STRING_TYPE};
use crate::ticker::Ticker;

/// Most subscribers in one run.
pub const MAX_IMAGE_SUBS: usize = 256;
/// Longest WebSocket frame or TCP line accepted from the gateway: well
/// above a 1280x720 rgb8 image in JSON (3.7 MB of base64).
pub const MAX_IMAGE_FRAME: usize = 64 << 20;
/// Publish lines the publisher may have unsent before a due image is
/// skipped instead of queued.
pub const MAX_PUB_BACKLOG: usize = 4;
/// The same for the `strings` scenario: a String line is ~150 bytes, and
/// at tens of thousands a second a few lines are only microseconds of
/// slack.
pub const MAX_STRING_PUB_BACKLOG: usize = 1024;
/// Bytes read from one subscriber per loop turn before the others get
/// theirs.
pub const IMAGE_READ_BUDGET: usize = 4 << 20;

const TICKER: Token = Token(usize::MAX);
const PUBLISHER: usize = 0;

/// A run of the scenario, every default resolved.
#[derive(Debug, Clone)]
pub struct ImageParams {
    /// The gateway's TCP (JSON lines) address: the publisher's.
    pub addr: SocketAddr,
    /// The gateway's WebSocket address: the subscribers'.
    pub ws_addr: SocketAddr,
    pub size: ImageSize,
    /// Images per second.
    pub rate: u64,
    pub subs: usize,
    /// Subscriber `i` uses `encodings[i % len]`.
    pub encodings: Vec<Encoding>,
    pub duration: Duration,
    pub warmup: Duration,
    pub drain: Duration,
    pub setup_timeout: Duration,
    pub server_pid: Option<u32>,
    pub topic: String,
    /// Image or String.
    pub kind: Kind,
    /// No publisher of ours: someone else publishes (see the module doc).
    pub outside: bool,
    /// The outside publisher's process, for its CPU.
    pub publisher_pid: Option<u32>,
}

/// The message a run carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Image,
    /// `std_msgs/msg/String`, `data` this many bytes.
    String {
        size: usize,
    },
}

/// Highest `--rate` of our own String publisher, messages/s.
pub const MAX_STRING_RATE: u64 = 200_000;

impl ImageParams {
    pub fn validate(&self) -> Result<(), String> {
        if self.subs == 0 || self.subs > MAX_IMAGE_SUBS {
            return Err(format!("--subs must be in 1..={MAX_IMAGE_SUBS}"));
        }
        let max_rate = match self.kind {
            Kind::Image => 1000,
            Kind::String { .. } => MAX_STRING_RATE,
        };
        if !self.outside && (self.rate == 0 || self.rate > max_rate) {
            return Err(format!("--rate must be in 1..={max_rate}"));
        }
        if matches!(self.kind, Kind::String { .. })
            && self.encodings.iter().any(|e| *e != Encoding::Json)
        {
            return Err("strings: subscribers take json only".into());
        }
        if self.publisher_pid.is_some() && !self.outside {
            return Err("--publisher-pid needs --publisher none".into());
        }
        if self.duration.is_zero() {
            return Err("--duration must be positive".into());
        }
        for a in [self.addr, self.ws_addr] {
            if !a.ip().is_loopback() {
                return Err(format!("{a} is not a loopback address"));
            }
        }
        if self.encodings.is_empty() {
            return Err("--encodings is empty".into());
        }
        Ok(())
    }

    fn encoding_of(&self, sub: usize) -> Encoding {
        self.encodings[sub % self.encodings.len()]
    }
}

#[derive(Debug)]
pub enum RunError {
    Io(String, io::Error),
    Setup(String),
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Io(what, e) => write!(f, "{what}: {e}"),
            RunError::Setup(why) => f.write_str(why),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Connecting,
    /// WebSocket opening sent, `101` awaited.
    Opening,
    Open,
    Closed,
}

struct Conn {
    stream: TcpStream,
    rx: RxBuf,
    tx: TxBuf,
    state: State,
    readable: bool,
    writable: bool,
    /// Subscribers: the `Sec-WebSocket-Key` sent.
    key: String,
    /// Subscribers: the acknowledgement of the subscribe (the publisher:
    /// of the advertise) arrived.
    acked: bool,
    sub: Option<Sub>,
}

/// One subscriber's accounting.
#[derive(Debug)]
struct Sub {
    enc: Encoding,
    /// `next_seq` is known: from the start for our own publisher, from the
    /// first message for an outside one.
    synced: bool,
    /// Latest stamp seen in sequence, ns.
    last_stamp: u64,
    next_seq: u64,
    received: u64,
    lost: u64,
    reordered: u64,
    bad: u64,
    wrong_encoding: u64,
    /// Wire bytes (frame headers included) of images due in the measured
    /// interval, and how many.
    bytes: u64,
    measured: u64,
    /// First and last sequence number due in the measured interval: what
    /// the publisher sent in it, received or not.
    span: Option<(u64, u64)>,
}

/// What [`Sub::account`] made of a frame.
#[derive(Debug, PartialEq)]
enum Account {
    /// In sequence, due in the measured interval: its latency, ns.
    Measured { latency: u64 },
    /// In sequence, outside the measured interval (warm-up, drain).
    Counted,
    /// A sequence number already seen or passed.
    Reordered,
    /// Not the image we sent.
    Bad(Bad),
    /// Decoded, but not in the encoding asked for; `first` for the
    /// subscriber's first such frame.
    WrongEncoding { got: Encoding, first: bool },
}

impl Sub {
    fn new(enc: Encoding, synced: bool) -> Self {
        Sub {
            enc,
            synced,
            last_stamp: 0,
            next_seq: 0,
            received: 0,
            lost: 0,
            reordered: 0,
            bad: 0,
            wrong_encoding: 0,
            bytes: 0,
            measured: 0,
            span: None,
        }
    }

    /// Accounts one frame of `bytes` on the wire that arrived at `now`,
    /// against the measured interval `measure` (due times, ns): a gap in
    /// the sequence is loss, a step back reordering; latency and bytes
    /// count only in-sequence images due within `measure`.
    fn account(
        &mut self,
        d: Result<Seen, Bad>,
        bytes: u64,
        now: u64,
        (m0, m1): (u64, u64),
    ) -> Account {
        let seen = match d {
            Ok(seen) => seen,
            Err(e) => {
                self.bad += 1;
                // Take the bad frame for the next image, so that the next
                // good one is not also counted as a gap.
                self.next_seq += 1;
                return Account::Bad(e);
            }
        };
        if !self.synced {
            self.synced = true;
            self.next_seq = seen.seq;
        }
        if seen.encoding != self.enc {
            self.wrong_encoding += 1;
            self.received += 1;
            self.next_seq = self.next_seq.max(seen.seq + 1);
            return Account::WrongEncoding {
                got: seen.encoding,
                first: self.wrong_encoding == 1,
            };
        }
        if seen.seq < self.next_seq {
            self.reordered += 1;
            return Account::Reordered;
        }
        self.lost += seen.seq - self.next_seq;
        self.next_seq = seen.seq + 1;
        self.received += 1;
        self.last_stamp = seen.stamp_ns;
        if seen.stamp_ns < m0 || seen.stamp_ns >= m1 {
            return Account::Counted;
        }
        self.measured += 1;
        self.bytes += bytes;
        self.span = Some(match self.span {
            Some((first, _)) => (first, seen.seq),
            None => (seen.seq, seen.seq),
        });
        Account::Measured {
            latency: now.saturating_sub(seen.stamp_ns),
        }
    }
}

/// Per-encoding totals.
#[derive(Debug, Default)]
struct Tally {
    subs: usize,
    received: u64,
    expected: u64,
    lost: u64,
    reordered: u64,
    bad: u64,
    wrong_encoding: u64,
    bytes: u64,
    measured: u64,
    /// Messages published in the measured interval, as the subscriber that
    /// saw most of them counts them (first to last sequence number).
    published: u64,
    latency: Histogram,
}

/// The run's message, in the form the run needs.
#[derive(Debug)]
enum Msg {
    Image(Image),
    Text(Text),
}

impl Msg {
    fn type_name(&self) -> &'static str {
        match self {
            Msg::Image(_) => IMAGE_TYPE,
            Msg::Text(_) => STRING_TYPE,
        }
    }

    fn publish_line(&self, out: &mut Vec<u8>, seq: u64, stamp_ns: u64) {
        match self {
            Msg::Image(i) => i.publish_line(out, seq, stamp_ns),
            Msg::Text(t) => t.publish_line(out, seq, stamp_ns),
        }
    }

    fn line_len_hint(&self) -> usize {
        match self {
            Msg::Image(i) => i.line_len_hint(),
            Msg::Text(t) => t.line_len_hint(),
        }
    }

    fn decode_text(&self, frame: &[u8]) -> Result<Seen, Bad> {
        match self {
            Msg::Image(i) => i.decode_text(frame),
            Msg::Text(t) => t.decode_text(frame),
        }
    }

    fn decode_binary(&self, frame: &[u8]) -> Result<Seen, Bad> {
        match self {
            Msg::Image(i) => i.decode_binary(frame),
            Msg::Text(_) => Err(Bad("a binary frame for a json subscriber".into())),
        }
    }
}

/// Wall-clock ns (`CLOCK_REALTIME`): the clock of an outside publisher's
/// stamps.
fn wall_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// What a run measured.
#[derive(Debug)]
pub struct Outcome {
    p: ImageParams,
    sent: u64,
    skipped: u64,
    sent_measured: u64,
    measured_for: Duration,
    tallies: BTreeMap<Encoding, Tally>,
    all: Histogram,
    cpu: CpuUse,
    /// Gateway CPU time over the measured interval.
    server_cpu: Option<Duration>,
    /// The outside publisher's CPU over the measured interval, % of a core.
    publisher_cpu: Option<f64>,
    disconnects: u64,
    errors: Vec<String>,
    send_lag: Histogram,
}

pub struct Runner {
    p: ImageParams,
    msg: Msg,
    poll: Poll,
    events: Events,
    conns: Vec<Conn>,
    clock: Instant,
    ticker: Option<Ticker>,
    /// Due time of image 0, ns on `clock`; set when publishing starts.
    start_ns: Option<u64>,
    /// Measured interval, ns on `clock` (due times).
    measure: (u64, u64),
    /// Due slots used so far (sent or skipped).
    slot: u64,
    /// Images sent (= the next sequence number).
    sent: u64,
    skipped: u64,
    sent_measured: u64,
    producing: bool,
    latency: BTreeMap<Encoding, Histogram>,
    all: Histogram,
    send_lag: Histogram,
    disconnects: u64,
    /// First few problems, for the report.
    errors: Vec<String>,
    mask_seed: u32,
}

/// Problems printed in full; the rest are counted.
const MAX_IMAGE_ERRORS: usize = 5;

impl Runner {
    pub fn new(p: ImageParams) -> Result<Self, RunError> {
        p.validate().map_err(RunError::Setup)?;
        let poll = Poll::new().map_err(|e| RunError::Io("creating poll".into(), e))?;
        let msg = match p.kind {
            Kind::Image => Msg::Image(Image::new(p.size, &p.topic)),
            Kind::String { size } => Msg::Text(Text::new(&p.topic, size)),
        };
        Ok(Runner {
            msg,
            poll,
            events: Events::with_capacity(1024),
            conns: Vec::new(),
            clock: Instant::now(),
            ticker: None,
            start_ns: None,
            measure: (0, 0),
            slot: 0,
            sent: 0,
            skipped: 0,
            sent_measured: 0,
            producing: false,
            latency: BTreeMap::new(),
            all: Histogram::default(),
            send_lag: Histogram::default(),
            disconnects: 0,
            errors: Vec::new(),
            mask_seed: std::process::id(),
            p,
        })
    }

    /// Now, on the clock of the stamps: the run's own, or the wall clock
    /// for an outside publisher.
    fn ns(&self) -> u64 {
        if self.p.outside {
            wall_ns()
        } else {
            self.clock.elapsed().as_nanos() as u64
        }
    }

    fn log(&mut self, what: String) {
        if self.errors.len() < MAX_IMAGE_ERRORS {
            self.errors.push(what);
        }
    }

    fn mask(&mut self) -> [u8; 4] {
        // xorshift: masks need not be secret here (RFC 6455 §5.3 guards
        // against proxies; this is loopback), only not constant.
        let mut x = self.mask_seed;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.mask_seed = x;
        x.to_le_bytes()
    }

    fn connect(&mut self, addr: SocketAddr, sub: Option<Sub>) -> Result<(), RunError> {
        let stream =
            TcpStream::connect(addr).map_err(|e| RunError::Io(format!("connect {addr}"), e))?;
        let _ = stream.set_nodelay(true);
        let k = self.conns.len();
        let mut c = Conn {
            stream,
            rx: RxBuf::default(),
            tx: TxBuf::default(),
            state: State::Connecting,
            readable: false,
            writable: false,
            key: String::new(),
            acked: false,
            sub,
        };
        self.poll
            .registry()
            .register(
                &mut c.stream,
                Token(k),
                Interest::READABLE | Interest::WRITABLE,
            )
            .map_err(|e| RunError::Io("register".into(), e))?;
        self.conns.push(c);
        Ok(())
    }

    /// Runs setup, warm-up, the measured interval and the drain.
    pub fn run(mut self) -> Result<Outcome, RunError> {
        let deadline = Instant::now() + self.p.setup_timeout;
        if !self.p.outside {
            self.connect(self.p.addr, None)?;
        }
        for i in 0..self.p.subs {
            let sub = Sub::new(self.p.encoding_of(i), !self.p.outside);
            self.connect(self.p.ws_addr, Some(sub))?;
        }
        while !self.conns.iter().all(|c| c.acked) {
            if let Some(c) = self.conns.iter().find(|c| c.state == State::Closed) {
                let what = if c.sub.is_some() {
                    "a subscriber"
                } else {
                    "the publisher"
                };
                return Err(RunError::Setup(format!(
                    "the gateway closed {what} during setup: {}",
                    self.errors.join("; ")
                )));
            }
            if !self.errors.is_empty() {
                return Err(RunError::Setup(format!(
                    "setup failed: {}",
                    self.errors.join("; ")
                )));
            }
            if Instant::now() >= deadline {
                let acked = self.conns.iter().filter(|c| c.acked).count();
                return Err(RunError::Setup(format!(
                    "setup timed out: {acked} of {} connections ready",
                    self.conns.len()
                )));
            }
            self.turn(deadline)?;
        }

        let (t0, t1) = if self.p.outside {
            let now = Instant::now();
            let m0 = self.ns() + self.p.warmup.as_nanos() as u64;
            self.measure = (m0, m0 + self.p.duration.as_nanos() as u64);
            (now + self.p.warmup, now + self.p.warmup + self.p.duration)
        } else {
            self.start_publishing()
        };
        while Instant::now() < t0 {
            self.turn(t0)?;
        }
        let before = CpuSample::take(self.p.server_pid);
        let pub_before = self
            .p
            .publisher_pid
            .and_then(|p| crate::procfs::proc_cpu(p).ok());
        let server_before = self
            .p
            .server_pid
            .and_then(|p| crate::procfs::proc_cpu(p).ok());
        while Instant::now() < t1 {
            self.turn(t1)?;
        }
        let after = CpuSample::take(self.p.server_pid);
        let pub_after = self
            .p
            .publisher_pid
            .and_then(|p| crate::procfs::proc_cpu(p).ok());
        let server_after = self
            .p
            .server_pid
            .and_then(|p| crate::procfs::proc_cpu(p).ok());
        self.producing = false;
        let measured_for = t1.saturating_duration_since(t0);

        let drain_end = Instant::now() + self.p.drain;
        while !self.complete() && Instant::now() < drain_end {
            self.turn(drain_end)?;
        }
        if let Some(t) = self.ticker.take() {
            let _ = self.poll.registry().deregister(&mut SourceFd(&t.raw_fd()));
        }

        let mut tallies: BTreeMap<Encoding, Tally> = BTreeMap::new();
        for c in &self.conns {
            let Some(s) = &c.sub else { continue };
            let t = tallies.entry(s.enc).or_default();
            t.subs += 1;
            t.received += s.received;
            if self.p.outside {
                // What was published is known only by the gaps.
                t.expected += s.received + s.lost;
                t.lost += s.lost;
            } else {
                t.expected += self.sent;
                // Whatever did not arrive by the end of the drain is lost.
                t.lost += s.lost + self.sent.saturating_sub(s.next_seq);
            }
            t.reordered += s.reordered;
            t.bad += s.bad;
            t.wrong_encoding += s.wrong_encoding;
            t.bytes += s.bytes;
            t.measured += s.measured;
            let span = s.span.map_or(0, |(a, b)| b - a + 1);
            t.published = t.published.max(span);
        }
        for (enc, h) in std::mem::take(&mut self.latency) {
            tallies.entry(enc).or_default().latency = h;
        }
        Ok(Outcome {
            sent: self.sent,
            skipped: self.skipped,
            sent_measured: self.sent_measured,
            measured_for,
            tallies,
            all: std::mem::take(&mut self.all),
            cpu: before.until(&after),
            server_cpu: match (server_before, server_after) {
                (Some(a), Some(b)) => Some(b.saturating_sub(a)),
                _ => None,
            },
            publisher_cpu: match (pub_before, pub_after) {
                (Some(a), Some(b)) => Some(
                    b.saturating_sub(a).as_secs_f64() / measured_for.as_secs_f64().max(1e-9)
                        * 100.0,
                ),
                _ => None,
            },
            disconnects: self.disconnects,
            errors: std::mem::take(&mut self.errors),
            send_lag: std::mem::take(&mut self.send_lag),
            p: self.p,
        })
    }

    /// Starts our own publisher one period from now; returns the measured
    /// interval.
    fn start_publishing(&mut self) -> (Instant, Instant) {
        let period = Duration::from_nanos(1_000_000_000 / self.p.rate);
        match Ticker::new(period) {
            Ok(t) => {
                let fd = t.raw_fd();
                if let Err(e) =
                    self.poll
                        .registry()
                        .register(&mut SourceFd(&fd), TICKER, Interest::READABLE)
                {
                    eprintln!("rosgate-load: timerfd register: {e}; using poll timeouts");
                } else {
                    self.ticker = Some(t);
                }
            }
            Err(e) => eprintln!("rosgate-load: timerfd: {e}; using poll timeouts"),
        }
        let start = self.ns() + period.as_nanos() as u64;
        self.start_ns = Some(start);
        let m0 = start + self.p.warmup.as_nanos() as u64;
        let m1 = m0 + self.p.duration.as_nanos() as u64;
        self.measure = (m0, m1);
        self.producing = true;
        let at = |ns: u64| self.clock + Duration::from_nanos(ns);
        (at(m0), at(m1))
    }

    /// Every sent image reached every open subscriber (outside publisher:
    /// every open subscriber saw a stamp past the measured interval).
    fn complete(&self) -> bool {
        self.conns.iter().all(|c| match &c.sub {
            None => c.tx.pending() == 0 || c.state == State::Closed,
            Some(_) if c.state == State::Closed => true,
            Some(s) if self.p.outside => s.last_stamp >= self.measure.1,
            Some(s) => s.next_seq >= self.sent,
        })
    }

    /// One loop turn: poll, produce, read, write.
    fn turn(&mut self, deadline: Instant) -> Result<(), RunError> {
        let busy = self
            .conns
            .iter()
            .any(|c| c.readable && c.state != State::Closed);
        let mut timeout = if busy {
            Duration::ZERO
        } else {
            deadline.saturating_duration_since(Instant::now())
        };
        if self.ticker.is_none() && self.producing {
            timeout = timeout.min(Duration::from_millis(1));
        }
        if let Err(e) = self.poll.poll(&mut self.events, Some(timeout)) {
            if e.kind() == ErrorKind::Interrupted {
                return Ok(());
            }
            return Err(RunError::Io("poll".into(), e));
        }
        let mut ticked = false;
        let mut ready: Vec<(usize, bool, bool)> = Vec::new();
        for ev in self.events.iter() {
            if ev.token() == TICKER {
                ticked = true;
                continue;
            }
            ready.push((
                ev.token().0,
                ev.is_readable() || ev.is_read_closed() || ev.is_error(),
                ev.is_writable() || ev.is_error(),
            ));
        }
        if ticked {
            if let Some(t) = &self.ticker {
                t.drain();
            }
        }
        for (k, r, w) in ready {
            let Some(c) = self.conns.get_mut(k) else {
                continue;
            };
            c.readable |= r;
            c.writable |= w;
            if c.state == State::Connecting && c.writable {
                match connect_done(&c.stream) {
                    Ok(true) => self.opened(k),
                    Ok(false) => {}
                    Err(e) => {
                        self.log(format!("connect: {e}"));
                        self.close(k);
                    }
                }
            }
        }
        if self.producing {
            self.produce();
        }
        for k in 0..self.conns.len() {
            if self.conns[k].readable && self.conns[k].state != State::Connecting {
                self.read(k);
            }
        }
        for k in 0..self.conns.len() {
            self.flush(k);
        }
        Ok(())
    }

    /// The TCP connection is up: the publisher advertises, a subscriber
    /// sends its WebSocket opening.
    fn opened(&mut self, k: usize) {
        let c = &mut self.conns[k];
        if c.sub.is_none() {
            c.state = State::Open;
            let out = c.tx.buf();
            out.extend_from_slice(b"{\"op\":\"advertise\",\"topic\":");
            out.extend_from_slice(json!(self.p.topic).to_string().as_bytes());
            out.extend_from_slice(b",\"type\":\"");
            out.extend_from_slice(self.msg.type_name().as_bytes());
            out.extend_from_slice(b"\",\"id\":\"adv\"}\n");
            return;
        }
        let nonce: [u8; 16] = std::array::from_fn(|i| (k as u8).wrapping_mul(31) ^ i as u8);
        c.key = ws::key(nonce);
        let host = self.p.ws_addr.to_string();
        let req = ws::request(&host, "/", &c.key, &[("User-Agent", "rosgate-load")]);
        c.tx.buf().extend_from_slice(req.as_bytes());
        c.state = State::Opening;
    }

    /// The `101` arrived: ask for info statuses and subscribe.
    fn subscribe(&mut self, k: usize) {
        let Some(enc) = self.conns[k].sub.as_ref().map(|s| s.enc) else {
            return;
        };
        let mut sub = json!({
            "op": "subscribe",
            "id": format!("s{k}"),
            "topic": self.p.topic,
            "type": self.msg.type_name(),
        });
        if let Some(c) = enc.compression() {
            sub["compression"] = json!(c);
        }
        let msgs = [
            json!({"op": "set_level", "level": "info"}).to_string(),
            sub.to_string(),
        ];
        for m in msgs {
            let mask = self.mask();
            ws::push_frame(
                self.conns[k].tx.buf(),
                true,
                OP_TEXT,
                m.as_bytes(),
                Some(mask),
            );
        }
    }

    /// Queues every image due by now on the publisher.
    fn produce(&mut self) {
        let (Some(start), true) = (self.start_ns, self.producing) else {
            return;
        };
        let now = self.ns();
        let period = 1_000_000_000 / self.p.rate;
        loop {
            let due = start + self.slot * period;
            if due > now || due >= self.measure.1 {
                return;
            }
            self.slot += 1;
            let line_len = self.msg.line_len_hint();
            let c = &mut self.conns[PUBLISHER];
            if c.state != State::Open {
                return;
            }
            let backlog = match self.p.kind {
                Kind::Image => MAX_PUB_BACKLOG,
                Kind::String { .. } => MAX_STRING_PUB_BACKLOG,
            };
            if c.tx.pending() > backlog * line_len {
                self.skipped += 1;
                continue;
            }
            self.msg.publish_line(c.tx.buf(), self.sent, due);
            self.send_lag.record(now - due);
            if due >= self.measure.0 {
                self.sent_measured += 1;
            }
            self.sent += 1;
        }
    }

    fn flush(&mut self, k: usize) {
        let c = &mut self.conns[k];
        if c.state == State::Closed || c.state == State::Connecting || c.tx.pending() == 0 {
            return;
        }
        match c.tx.flush(&mut c.stream) {
            Ok(true) => {}
            Ok(false) => c.writable = false,
            Err(e) => {
                self.log(format!("write: {e}"));
                self.close(k);
            }
        }
    }

    fn close(&mut self, k: usize) {
        let c = &mut self.conns[k];
        if c.state != State::Closed {
            c.state = State::Closed;
            c.readable = false;
            let _ = self.poll.registry().deregister(&mut c.stream);
            self.disconnects += 1;
        }
    }

    /// Reads up to [`IMAGE_READ_BUDGET`] from connection `k` and handles every
    /// complete frame (line) in it.
    fn read(&mut self, k: usize) {
        let mut budget = IMAGE_READ_BUDGET;
        while budget > 0 && self.conns[k].readable && self.conns[k].state != State::Closed {
            let c = &mut self.conns[k];
            match c.rx.fill(&mut c.stream) {
                Ok(Filled::Bytes(n)) => budget = budget.saturating_sub(n),
                Ok(Filled::WouldBlock) => c.readable = false,
                Ok(Filled::Eof) => {
                    self.log("the gateway closed a connection".into());
                    self.close(k);
                    return;
                }
                Err(e) => {
                    self.log(format!("read: {e}"));
                    self.close(k);
                    return;
                }
            }
            let now = self.ns();
            if let Err(e) = self.handle_input(k, now) {
                self.log(e);
                self.close(k);
                return;
            }
        }
    }

    fn handle_input(&mut self, k: usize, now: u64) -> Result<(), String> {
        if self.conns[k].sub.is_none() {
            return self.publisher_input();
        }
        if self.conns[k].state == State::Opening {
            let c = &mut self.conns[k];
            let resp = match Response::parse(c.rx.unread()) {
                Ok(Some(r)) => r,
                Ok(None) => return Ok(()),
                Err(e) => return Err(format!("WebSocket opening: {e:?}")),
            };
            resp.check_accept(&c.key)
                .map_err(|e| format!("WebSocket opening refused: {e:?}"))?;
            c.rx.consume(resp.len);
            c.state = State::Open;
            self.subscribe(k);
        }
        loop {
            let (fin, opcode, wire, payload_at) =
                match parse_frame(self.conns[k].rx.unread(), MAX_IMAGE_FRAME) {
                    Ok(Some((f, used))) => (f.fin, f.opcode, used, used - f.payload.len()),
                    Ok(None) => return Ok(()),
                    Err(FrameError::TooLong(n)) => return Err(format!("a {n}-byte frame")),
                    Err(FrameError::Protocol(why)) => return Err(why.to_string()),
                };
            if !fin {
                // The gateway sends one frame per message (docs/protocol.md).
                return Err("a fragmented WebSocket message".into());
            }
            let result = match opcode {
                OP_TEXT | OP_BINARY => {
                    let body = &self.conns[k].rx.unread()[payload_at..wire];
                    if opcode == OP_TEXT && body.starts_with(b"{\"op\":\"status\"") {
                        let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
                        self.status(k, &v);
                        None
                    } else if opcode == OP_TEXT {
                        Some(self.msg.decode_text(body))
                    } else {
                        Some(self.msg.decode_binary(body))
                    }
                }
                OP_PING => {
                    let payload = self.conns[k].rx.unread()[payload_at..wire].to_vec();
                    let mask = self.mask();
                    ws::push_frame(self.conns[k].tx.buf(), true, OP_PONG, &payload, Some(mask));
                    None
                }
                OP_CLOSE => return Err("the gateway closed a WebSocket".into()),
                _ => None,
            };
            self.conns[k].rx.consume(wire);
            if let Some(d) = result {
                self.delivered(k, d, wire as u64, now);
            }
        }
    }

    /// Accounts one image frame at subscriber `k`: the rules are
    /// [`Sub::account`]'s; this records what it says.
    fn delivered(&mut self, k: usize, d: Result<Seen, Bad>, bytes: u64, now: u64) {
        let measure = self.measure;
        let Some(s) = self.conns[k].sub.as_mut() else {
            return;
        };
        let enc = s.enc;
        match s.account(d, bytes, now, measure) {
            Account::Counted | Account::Reordered => {}
            Account::Measured { latency } => {
                self.latency.entry(enc).or_default().record(latency);
                self.all.record(latency);
            }
            Account::Bad(e) => self.log(format!("subscriber {k} ({}): {e}", enc.name())),
            Account::WrongEncoding { got, first: true } => self.log(format!(
                "subscriber {k} asked for {} and got {} (the gateway ignored `compression`?)",
                enc.name(),
                got.name()
            )),
            Account::WrongEncoding { .. } => {}
        }
    }

    /// A status on a subscriber's WebSocket.
    fn status(&mut self, k: usize, v: &Value) {
        let id = v.get("id").and_then(Value::as_str);
        let level = v.get("level").and_then(Value::as_str).unwrap_or("");
        if level == "error" {
            let msg = v.get("msg").map(|m| m.to_string()).unwrap_or_default();
            self.log(format!("subscriber {k}: error status {msg}"));
            return;
        }
        if id == Some(format!("s{k}").as_str()) {
            self.conns[k].acked = true;
        }
    }

    /// Status lines on the publisher's TCP connection.
    fn publisher_input(&mut self) -> Result<(), String> {
        loop {
            let c = &mut self.conns[PUBLISHER];
            let buf = c.rx.unread();
            let Some(nl) = memchr(b'\n', buf) else {
                if buf.len() > MAX_IMAGE_FRAME {
                    return Err("a line over the limit from the gateway".into());
                }
                return Ok(());
            };
            let v: Value = serde_json::from_slice(&buf[..nl]).unwrap_or(Value::Null);
            c.rx.consume(nl + 1);
            let level = v.get("level").and_then(Value::as_str).unwrap_or("");
            if level == "error" {
                let msg = v.get("msg").map(|m| m.to_string()).unwrap_or_default();
                self.log(format!("publisher: error status {msg}"));
            } else if v.get("id").and_then(Value::as_str) == Some("adv") {
                self.conns[PUBLISHER].acked = true;
            }
        }
    }
}

fn us(ns: u64) -> f64 {
    (ns as f64 / 100.0).round() / 10.0
}

fn latency_json(h: &Histogram) -> Value {
    if h.count() == 0 {
        return Value::Null;
    }
    json!({
        "p50": us(h.quantile(0.5)),
        "p99": us(h.quantile(0.99)),
        "max": us(h.max()),
        "count": h.count(),
    })
}

impl Tally {
    fn clean(&self) -> bool {
        self.lost == 0 && self.reordered == 0 && self.bad == 0 && self.wrong_encoding == 0
    }
}

impl Outcome {
    /// No loss, no reordering, no bad or wrongly encoded frame, no image
    /// skipped by the publisher, no connection lost, and something sent.
    pub fn clean(&self) -> bool {
        (self.sent > 0 || (self.p.outside && self.delivered_measured() > 0))
            && self.skipped == 0
            && self.disconnects == 0
            && self.tallies.values().all(Tally::clean)
    }

    /// Images delivered (to all subscribers) that were due in the measured
    /// interval.
    fn delivered_measured(&self) -> u64 {
        self.tallies.values().map(|t| t.measured).sum()
    }

    /// Gateway CPU time per delivered image, microseconds.
    fn cpu_per_image_us(&self) -> Option<f64> {
        let n = self.delivered_measured();
        let cpu = self.server_cpu?;
        (n > 0).then(|| cpu.as_secs_f64() * 1e6 / n as f64)
    }

    fn bound(&self) -> Option<&'static str> {
        (self.cpu.client >= 90.0).then_some("tool-bound")
    }

    /// What was published, for the report: `images 640x480 rgb8 @30/s`,
    /// `strings 64 B from outside`.
    fn what(&self) -> String {
        let p = &self.p;
        let msg = match p.kind {
            Kind::Image => format!("images {} rgb8", p.size),
            Kind::String { size } => format!("strings {size} B"),
        };
        if p.outside {
            format!("{msg} from an outside publisher")
        } else {
            format!("{msg} @{}/s", p.rate)
        }
    }

    /// Messages per second each subscriber received in the measured
    /// interval.
    fn published_rate(&self) -> f64 {
        let secs = self.measured_for.as_secs_f64().max(1e-9);
        let n = self
            .tallies
            .values()
            .map(|t| t.published)
            .max()
            .unwrap_or(0);
        n as f64 / secs
    }

    fn per_sub_rate(&self) -> f64 {
        let secs = self.measured_for.as_secs_f64().max(1e-9);
        self.delivered_measured() as f64 / self.p.subs.max(1) as f64 / secs
    }

    pub fn human(&self) -> String {
        let p = &self.p;
        let mut out = format!(
            "{} -> {} ws subs ({}): {:.0} msg/s per sub of {:.0} published{}, server CPU {}{}, tool CPU {:.0}%{}",
            self.what(),
            p.subs,
            p.encodings
                .iter()
                .map(|e| e.name())
                .collect::<Vec<_>>()
                .join(","),
            self.per_sub_rate(),
            self.published_rate(),
            if p.outside {
                String::new()
            } else {
                format!(", sent {} (skipped {})", self.sent, self.skipped)
            },
            match (self.cpu.server, self.cpu_per_image_us()) {
                (Some(pct), Some(per)) => format!("{pct:.0}% ({per:.1} us/msg)"),
                (Some(pct), None) => format!("{pct:.0}%"),
                _ => "n/a".into(),
            },
            match self.publisher_cpu {
                Some(pct) => format!(", publisher CPU {pct:.0}%"),
                None => String::new(),
            },
            self.cpu.client,
            if self.clean() { "" } else { " FAILED" },
        );
        let secs = self.measured_for.as_secs_f64().max(1e-9);
        for (enc, t) in &self.tallies {
            let h = &t.latency;
            out.push_str(&format!(
                "\n  {:<8} {:>3} subs: received {}/{} lost {} reordered {} bad {} wrong-encoding {}; \
                 latency p50 {:.3} ms p99 {:.3} ms max {:.2} ms; {} B/msg, {:.1} MB/s per sub",
                enc.name(),
                t.subs,
                t.received,
                t.expected,
                t.lost,
                t.reordered,
                t.bad,
                t.wrong_encoding,
                h.quantile(0.5) as f64 / 1e6,
                h.quantile(0.99) as f64 / 1e6,
                h.max() as f64 / 1e6,
                t.bytes.checked_div(t.measured).unwrap_or(0),
                t.bytes as f64 / t.subs.max(1) as f64 / secs / 1e6,
            ));
        }
        for e in &self.errors {
            out.push_str(&format!("\n  error: {e}"));
        }
        out
    }

    pub fn json(&self) -> Value {
        let p = &self.p;
        let secs = self.measured_for.as_secs_f64().max(1e-9);
        let enc: serde_json::Map<String, Value> = self
            .tallies
            .iter()
            .map(|(e, t)| {
                (
                    e.name().to_string(),
                    json!({
                        "subs": t.subs,
                        "expected": t.expected,
                        "received": t.received,
                        "lost": t.lost,
                        "reordered": t.reordered,
                        "bad": t.bad,
                        "wrong_encoding": t.wrong_encoding,
                        "ok": t.clean(),
                        "latency_us": latency_json(&t.latency),
                        "bytes_per_image": t.bytes.checked_div(t.measured),
                        "mb_per_s_per_sub": (t.bytes as f64 / t.subs.max(1) as f64 / secs / 1e3).round() / 1e3,
                    }),
                )
            })
            .collect();
        let (scenario, message) = match p.kind {
            Kind::Image => (
                "images",
                json!({"type": IMAGE_TYPE, "image": p.size.to_string(), "image_bytes": p.size.data_len()}),
            ),
            Kind::String { size } => ("strings", json!({"type": STRING_TYPE, "data_bytes": size})),
        };
        json!({
            "scenario": scenario,
            "transport": "rosgate",
            "ok": self.clean(),
            "message": message,
            "image": (p.kind == Kind::Image).then(|| p.size.to_string()),
            "image_bytes": (p.kind == Kind::Image).then(|| p.size.data_len()),
            "publisher": if p.outside { "none" } else { "tool" },
            "rate": (!p.outside).then_some(p.rate),
            "msgs_per_s_per_sub": (self.per_sub_rate() * 10.0).round() / 10.0,
            "published_per_s": (self.published_rate() * 10.0).round() / 10.0,
            "subs": p.subs,
            "encodings": p.encodings.iter().map(|e| e.name()).collect::<Vec<_>>(),
            "duration_s": secs,
            "sent": self.sent,
            "skipped": self.skipped,
            "sent_measured": self.sent_measured,
            "delivered_measured": self.delivered_measured(),
            "disconnects": self.disconnects,
            "latency_us": latency_json(&self.all),
            "send_lag_us": latency_json(&self.send_lag),
            "per_encoding": enc,
            "server_cpu_pct": self.cpu.server.map(|v| (v * 10.0).round() / 10.0),
            "server_cpu_us_per_image": self.cpu_per_image_us().map(|v| (v * 10.0).round() / 10.0),
            "publisher_cpu_pct": self.publisher_cpu.map(|v| (v * 10.0).round() / 10.0),
            "client_cpu_pct": (self.cpu.client * 10.0).round() / 10.0,
            "other_cpu_pct": self.cpu.other.map(|v| (v * 10.0).round() / 10.0),
            "bound": self.bound(),
            "errors": self.errors,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(seq: u64, stamp_ns: u64, encoding: Encoding) -> Result<Seen, Bad> {
        Ok(Seen {
            seq,
            stamp_ns,
            encoding,
        })
    }

    #[test]
    fn loss_reordering_bad_frames_and_the_measured_interval() {
        let m = (100, 200);
        let mut s = Sub::new(Encoding::Json, true);
        // Warm-up: counted, not measured.
        assert_eq!(
            s.account(seen(0, 50, Encoding::Json), 10, 60, m),
            Account::Counted
        );
        assert_eq!(
            s.account(seen(1, 100, Encoding::Json), 10, 130, m),
            Account::Measured { latency: 30 }
        );
        // 2 and 3 lost, then a step back.
        assert_eq!(
            s.account(seen(4, 150, Encoding::Json), 10, 150, m),
            Account::Measured { latency: 0 }
        );
        assert_eq!(
            s.account(seen(3, 140, Encoding::Json), 10, 151, m),
            Account::Reordered
        );
        // A bad frame takes the place of image 5: 6 is not a gap.
        assert!(matches!(
            s.account(Err(Bad("x".into())), 10, 160, m),
            Account::Bad(_)
        ));
        assert_eq!(
            s.account(seen(6, 200, Encoding::Json), 10, 210, m),
            Account::Counted
        );
        assert_eq!(
            (
                s.received,
                s.lost,
                s.reordered,
                s.bad,
                s.measured,
                s.bytes,
                s.next_seq
            ),
            (4, 2, 1, 1, 2, 20, 7)
        );
    }

    #[test]
    fn a_frame_in_another_encoding_is_counted_once_as_such() {
        let m = (0, 1000);
        let mut s = Sub::new(Encoding::CborRaw, true);
        assert_eq!(
            s.account(seen(0, 10, Encoding::Json), 10, 20, m),
            Account::WrongEncoding {
                got: Encoding::Json,
                first: true
            }
        );
        assert_eq!(
            s.account(seen(1, 10, Encoding::Json), 10, 20, m),
            Account::WrongEncoding {
                got: Encoding::Json,
                first: false
            }
        );
        assert_eq!(
            s.account(seen(2, 10, Encoding::CborRaw), 10, 20, m),
            Account::Measured { latency: 10 }
        );
        assert_eq!((s.wrong_encoding, s.lost, s.received), (2, 0, 3));
    }

    #[test]
    fn an_outside_publisher_is_synced_on_its_first_message() {
        let m = (100, 200);
        let mut s = Sub::new(Encoding::Json, false);
        // It was publishing before we subscribed: 5000 is no loss.
        assert_eq!(
            s.account(seen(5000, 90, Encoding::Json), 10, 95, m),
            Account::Counted
        );
        assert_eq!(
            s.account(seen(5002, 120, Encoding::Json), 10, 125, m),
            Account::Measured { latency: 5 }
        );
        assert_eq!(
            (s.received, s.lost, s.next_seq, s.last_stamp),
            (2, 1, 5003, 120)
        );
    }
}
