//! What a run does: the [`Scenario`] kinds and the resolved [`Params`] the
//! runner executes. Defaults that depend on the scenario (how many
//! publishers, the window for large messages) are settled here, once, so
//! the runner and the report see the same numbers.

use std::fmt;
use std::net::SocketAddr;
use std::str::FromStr;
use std::time::Duration;

/// Bytes of publications a closed-loop publisher may have in flight when
/// `--window` is not given: W is capped at this divided by the payload size,
/// because a gateway sheds best-effort topic data beyond a per-connection
/// queue (rosgate: 8 MiB by default), and a benchmark that provokes shedding
/// measures the drop policy, not throughput.
pub const AUTO_WINDOW_BYTES: usize = 4 * 1024 * 1024;
/// Messages in flight per publisher when `--window` is not given.
pub const DEFAULT_WINDOW: usize = 1000;
/// Goals: feedback messages per goal when `--feedback` is not given.
pub const DEFAULT_FEEDBACK: usize = 4;
/// Goals: most feedback messages per goal; the action server writes them
/// all in one go, so this bounds what one goal adds to its output.
pub const MAX_FEEDBACK: usize = 10_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// One publisher, N subscribers, closed loop.
    Fanout,
    /// N publishers, one subscriber, closed loop.
    Fanin,
    /// C callers, one echoing provider, closed loop.
    Calls,
    /// C callers, one action server answering each goal with F feedback
    /// messages and a result, closed loop (ROS 2 actions; rosgate only).
    Goals,
    /// K idle connections: server memory per connection and idle CPU.
    Idle,
    /// Open loop at a fixed rate: latency from the intended send time.
    Latency,
    /// Fan-out of large messages (default 1 MiB, 1 subscriber).
    Large,
}

impl Scenario {
    pub const ALL: [Scenario; 7] = [
        Scenario::Fanout,
        Scenario::Fanin,
        Scenario::Calls,
        Scenario::Goals,
        Scenario::Idle,
        Scenario::Latency,
        Scenario::Large,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Scenario::Fanout => "fanout",
            Scenario::Fanin => "fanin",
            Scenario::Calls => "calls",
            Scenario::Goals => "goals",
            Scenario::Idle => "idle",
            Scenario::Latency => "latency",
            Scenario::Large => "large",
        }
    }

    /// Publishers/subscribers move topic data in this scenario.
    pub fn is_topic(self) -> bool {
        matches!(
            self,
            Scenario::Fanout | Scenario::Fanin | Scenario::Latency | Scenario::Large
        )
    }

    /// Callers keep requests outstanding against one provider (a service
    /// or an action server).
    pub fn has_callers(self) -> bool {
        matches!(self, Scenario::Calls | Scenario::Goals)
    }
}

impl FromStr for Scenario {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Scenario::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Scenario::ALL.iter().map(|c| c.name()).collect();
                format!("unknown scenario {s:?} ({})", names.join("|"))
            })
    }
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Everything a run needs, with every default resolved.
#[derive(Debug, Clone)]
pub struct Params {
    pub scenario: Scenario,
    pub addr: SocketAddr,
    /// Where publishers, service providers and action servers connect
    /// (`--source-addr`; another gateway of a federation), if not `addr`.
    pub source_addr: Option<SocketAddr>,
    /// Waited after setup before the run (`--settle`): the time a
    /// federation needs to carry the subscribers' interest across.
    pub settle: Duration,
    pub pubs: usize,
    pub subs: usize,
    pub callers: usize,
    pub conns: usize,
    /// Payload (`msg` / `args` object) bytes.
    pub size: usize,
    /// Closed loop: messages a publisher may be ahead of its slowest
    /// subscriber.
    pub window: usize,
    /// Calls (goals) each caller keeps outstanding.
    pub inflight: usize,
    /// Goals: feedback messages the action server sends per goal before
    /// its result.
    pub feedback: usize,
    /// Open loop: messages per second per publisher (`latency` only).
    pub rate: u64,
    pub duration: Duration,
    /// Run before measuring starts; its traffic is checked but not counted
    /// in rates or latencies.
    pub warmup: Duration,
    /// After the measured period: how long to wait for stragglers before
    /// declaring them lost.
    pub drain: Duration,
    /// Connecting and subscribing must finish within this.
    pub setup_timeout: Duration,
    pub server_pid: Option<u32>,
    pub topic: String,
    pub service: String,
    pub action: String,
    /// Idle: each connection subscribes to `topic` (one topic for all;
    /// nothing is published on it), so the row measures an idle
    /// *subscribed* connection (`--idle-subscribed`).
    pub idle_subscribed: bool,
    /// Worker threads the connections are spread over (`--threads`).
    pub threads: usize,
    /// CPUs the workers are pinned to, worker `w` on entry `w mod len`
    /// (`--pin-cpus`); empty: not pinned.
    pub pin_cpus: Vec<usize>,
}

/// Raw values from the command line; `None` means "scenario default".
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub pubs: Option<usize>,
    pub subs: Option<usize>,
    pub callers: Option<usize>,
    pub conns: Option<usize>,
    pub size: Option<usize>,
    pub window: Option<usize>,
    pub inflight: Option<usize>,
    pub feedback: Option<usize>,
    pub rate: Option<u64>,
}

/// What the command line sets for every scenario, taken as given: the
/// run's timings, the server to sample and the names to use (see
/// [`Params`] for each).
#[derive(Debug, Clone)]
pub struct RunSettings {
    pub duration: Duration,
    pub warmup: Duration,
    pub drain: Duration,
    pub setup_timeout: Duration,
    pub server_pid: Option<u32>,
    pub topic: String,
    pub service: String,
    pub action: String,
}

impl Params {
    /// Applies the scenario's defaults to whatever the user left unset.
    pub fn resolve(
        scenario: Scenario,
        addr: SocketAddr,
        o: Overrides,
        run: RunSettings,
    ) -> Result<Params, String> {
        let RunSettings {
            duration,
            warmup,
            drain,
            setup_timeout,
            server_pid,
            topic,
            service,
            action,
        } = run;
        let (pubs, subs, size) = match scenario {
            Scenario::Fanout => (1, 16, 64),
            Scenario::Fanin => (16, 1, 64),
            Scenario::Latency => (1, 1, 64),
            Scenario::Large => (1, 1, 1 << 20),
            Scenario::Calls | Scenario::Goals | Scenario::Idle => (0, 0, 64),
        };
        let size = o.size.unwrap_or(size);
        let (pubs, subs) = if scenario.is_topic() {
            (o.pubs.unwrap_or(pubs), o.subs.unwrap_or(subs))
        } else {
            (0, 0)
        };
        let callers = if scenario.has_callers() {
            o.callers.unwrap_or(32)
        } else {
            0
        };
        let conns = if scenario == Scenario::Idle {
            o.conns.unwrap_or(10_000)
        } else {
            0
        };
        let window = o
            .window
            .unwrap_or_else(|| DEFAULT_WINDOW.min(AUTO_WINDOW_BYTES / size.max(1)).max(1));
        let p = Params {
            scenario,
            addr,
            source_addr: None,
            settle: Duration::ZERO,
            pubs,
            subs,
            callers,
            conns,
            size,
            window,
            inflight: o.inflight.unwrap_or(1),
            feedback: if scenario == Scenario::Goals {
                o.feedback.unwrap_or(DEFAULT_FEEDBACK)
            } else {
                0
            },
            rate: o.rate.unwrap_or(20_000),
            duration,
            warmup,
            drain,
            setup_timeout,
            server_pid,
            topic,
            service,
            action,
            idle_subscribed: false,
            threads: 1,
            pin_cpus: Vec::new(),
        };
        p.validate()?;
        Ok(p)
    }

    fn validate(&self) -> Result<(), String> {
        if self.scenario.is_topic() && (self.pubs == 0 || self.subs == 0) {
            return Err("--pubs and --subs must be at least 1".into());
        }
        if self.scenario.has_callers() && self.callers == 0 {
            return Err("--callers must be at least 1".into());
        }
        if self.scenario == Scenario::Idle && self.conns == 0 {
            return Err("--conns must be at least 1".into());
        }
        if self.window == 0 || self.inflight == 0 {
            return Err("--window and --inflight must be at least 1".into());
        }
        if self.feedback > MAX_FEEDBACK {
            return Err(format!("--feedback is capped at {MAX_FEEDBACK}"));
        }
        if self.rate == 0 || self.rate > 10_000_000 {
            return Err("--rate must be in 1..=10000000".into());
        }
        if self.duration.is_zero() {
            return Err("--duration must be positive".into());
        }
        if self.size > 256 << 20 {
            return Err("--size is capped at 256 MiB".into());
        }
        if !self.addr.ip().is_loopback() {
            // The tool floods its target; refuse to aim it off the host.
            return Err(format!("--addr {} is not a loopback address", self.addr));
        }
        Ok(())
    }

    /// Short description of the shape, e.g. `1->16 64B`.
    pub fn shape(&self) -> String {
        match self.scenario {
            Scenario::Calls => format!(
                "{} callers x{} {}",
                self.callers,
                self.inflight,
                human_bytes(self.size)
            ),
            Scenario::Goals => format!(
                "{} callers x{} F={} {}",
                self.callers,
                self.inflight,
                self.feedback,
                human_bytes(self.size)
            ),
            Scenario::Idle => format!("{} conns", self.conns),
            Scenario::Latency => format!(
                "{}->{} {} @{}/s",
                self.pubs,
                self.subs,
                human_bytes(self.size),
                self.rate
            ),
            _ => format!(
                "{}->{} {} W={}",
                self.pubs,
                self.subs,
                human_bytes(self.size),
                self.window
            ),
        }
    }
}

/// `64B`, `1KiB`, `1MiB`, `1500B`.
pub fn human_bytes(n: usize) -> String {
    if n >= 1 << 20 && n % (1 << 20) == 0 {
        format!("{}MiB", n >> 20)
    } else if n >= 1 << 10 && n % (1 << 10) == 0 {
        format!("{}KiB", n >> 10)
    } else {
        format!("{n}B")
    }
}
