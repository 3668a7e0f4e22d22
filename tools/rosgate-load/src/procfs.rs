//! CPU and memory accounting for this process and the server under test.
//!
//! Our own CPU comes from `getrusage` (microsecond resolution); the server's
//! from `/proc/<pid>/stat` (clock ticks, usually 10 ms, which is 0.2 % of a
//! 5 s run) and its resident memory from `/proc/<pid>/status`. Comparing the
//! two CPU figures tells a reader who was the bottleneck: a result with the
//! tool at 100 % measures the tool, not the gateway.

use std::io;
use std::time::{Duration, Instant};

/// CPU time (user + system) this process has used.
pub fn self_cpu() -> Duration {
    // SAFETY: `getrusage` writes a plain C struct we own; zeroed is a valid
    // bit pattern for it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer to a writable `rusage`.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    if rc != 0 {
        return Duration::ZERO;
    }
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
    };
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// CPU time (utime + stime) process `pid` has used.
pub fn proc_cpu(pid: u32) -> io::Result<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The command name (field 2) may contain spaces and parentheses; the
    // fields we want are counted from the last ')'.
    let after = stat
        .rfind(')')
        .map(|i| &stat[i + 1..])
        .ok_or_else(|| bad("no ')' in stat"))?;
    // After ')': state is field 3, so utime (14) and stime (15) are the
    // 12th and 13th whitespace-separated tokens.
    let mut it = after.split_ascii_whitespace().skip(11);
    let mut field = || -> io::Result<u64> {
        it.next()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| bad("short stat"))
    };
    let ticks = field()? + field()?;
    Ok(Duration::from_secs_f64(ticks as f64 / clock_ticks()))
}

/// Resident set size of process `pid`, bytes.
pub fn proc_rss(pid: u32) -> io::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .ok_or_else(|| bad("no VmRSS"))?;
    let kib: u64 = line
        .split_ascii_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad("bad VmRSS"))?;
    Ok(kib * 1024)
}

fn clock_ticks() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        hz as f64
    } else {
        100.0
    }
}

fn bad(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_string())
}

/// Raises the soft open-file limit to the hard limit (the idle scenario
/// holds thousands of sockets) and returns the resulting soft limit.
pub fn raise_nofile() -> u64 {
    // SAFETY: plain C struct, written by getrlimit before it is read.
    let mut rl: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) } != 0 {
        return 0;
    }
    if rl.rlim_cur < rl.rlim_max {
        let want = libc::rlimit {
            rlim_cur: rl.rlim_max,
            rlim_max: rl.rlim_max,
        };
        // SAFETY: valid pointer; failure leaves the old limit in place.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &want) } == 0 {
            return want.rlim_cur as u64;
        }
    }
    rl.rlim_cur as u64
}

/// Busy CPU time of the whole host, all cores, from the `cpu` line of
/// `/proc/stat` (everything but idle and iowait).
pub fn host_busy() -> io::Result<Duration> {
    let stat = std::fs::read_to_string("/proc/stat")?;
    let line = stat
        .lines()
        .find(|l| l.starts_with("cpu "))
        .ok_or_else(|| bad("no cpu line"))?;
    let f: Vec<u64> = line
        .split_ascii_whitespace()
        .skip(1)
        .map(|s| s.parse().unwrap_or(0))
        .collect();
    if f.len() < 4 {
        return Err(bad("short cpu line"));
    }
    // user nice system idle iowait irq softirq steal; guest time is
    // already inside user and nice.
    let busy: u64 = f.iter().take(8).sum::<u64>() - f[3] - f.get(4).copied().unwrap_or(0);
    Ok(Duration::from_secs_f64(busy as f64 / clock_ticks()))
}

/// One reading of every clock the report uses.
#[derive(Debug, Clone, Copy)]
pub struct CpuSample {
    wall: Instant,
    client: Duration,
    server: Option<Duration>,
    host: Option<Duration>,
}

/// CPU use over an interval, percent of one core.
#[derive(Debug, Clone, Copy, Default)]
pub struct CpuUse {
    pub client: f64,
    pub server: Option<f64>,
    /// Everything else on the host: builds, tests, other benchmarks. A
    /// large value means the numbers were taken on a shared machine.
    pub other: Option<f64>,
}

impl CpuSample {
    pub fn take(server_pid: Option<u32>) -> Self {
        CpuSample {
            wall: Instant::now(),
            client: self_cpu(),
            server: server_pid.and_then(|p| proc_cpu(p).ok()),
            host: host_busy().ok(),
        }
    }

    /// CPU use between `self` and the later `end`.
    pub fn until(&self, end: &CpuSample) -> CpuUse {
        let wall = end.wall.saturating_duration_since(self.wall).as_secs_f64();
        if wall <= 0.0 {
            return CpuUse::default();
        }
        let pct = |a: Duration, b: Duration| b.saturating_sub(a).as_secs_f64() / wall * 100.0;
        let diff = |a: Option<Duration>, b: Option<Duration>| match (a, b) {
            (Some(a), Some(b)) => Some(pct(a, b)),
            _ => None,
        };
        let client = pct(self.client, end.client);
        let server = diff(self.server, end.server);
        let other =
            diff(self.host, end.host).map(|host| (host - client - server.unwrap_or(0.0)).max(0.0));
        CpuUse {
            client,
            server,
            other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_our_own_process() {
        let pid = std::process::id();
        assert!(proc_rss(pid).expect("rss") > 0);
        let before = proc_cpu(pid).expect("cpu");
        let t = Instant::now();
        let mut x = 0u64;
        while t.elapsed() < Duration::from_millis(50) {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        assert!(x > 0);
        assert!(proc_cpu(pid).expect("cpu") >= before);
        assert!(self_cpu() > Duration::ZERO);
        assert!(host_busy().expect("host") > Duration::ZERO);
    }
}
