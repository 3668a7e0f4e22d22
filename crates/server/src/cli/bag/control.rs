//! `bag play`'s controls: the paced schedule with pause and resume
//! ([`Pace`], sans-io: every method takes `now`), the player services
//! rosbag2's player offers (`/rosbag2_player/pause`, `resume`,
//! `toggle_paused`, `is_paused`; rosbag2_interfaces, as in rosbag2's
//! `rosbag2_transport/src/rosbag2_transport/player_service_client.cpp`
//! and `player.cpp`), answered from the `call_service` frames the gateway
//! forwards ([`answer`]), and space on a terminal ([`Keys`]).
//!
//! Invariants:
//! - a message is due at `wall0 + (log - t0) / rate`; a pause moves
//!   `wall0` forward by its length when it ends, so the messages after it
//!   keep their recorded spacing and none is sent in a burst to catch up;
//! - simulated time (`/clock`) stands still while paused;
//! - the terminal is put in non-canonical, no-echo mode only when stdin
//!   is a terminal and the player is its foreground job, keeping signals (Ctrl-C still stops), and is restored
//!   when [`Keys`] is dropped: on every return, error or panic of the
//!   player (a second Ctrl-C while stopping exits at once, before that).

use std::io::{IsTerminal, Read};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rosgate_wire::encode;

use super::super::client::{json_quote, Frame};

/// Key presses waiting for the player to look (it looks every 50 ms);
/// more are dropped.
pub const MAX_PENDING_KEYS: usize = 64;

/// The services, their rosbag2_interfaces types, as rosbag2's player
/// names them under its node `/rosbag2_player`.
pub const SERVICES: &[(&str, &str)] = &[
    ("/rosbag2_player/pause", "rosbag2_interfaces/srv/Pause"),
    ("/rosbag2_player/resume", "rosbag2_interfaces/srv/Resume"),
    (
        "/rosbag2_player/toggle_paused",
        "rosbag2_interfaces/srv/TogglePaused",
    ),
    (
        "/rosbag2_player/is_paused",
        "rosbag2_interfaces/srv/IsPaused",
    ),
];

/// The playback schedule (see the module invariants).
pub struct Pace {
    rate: f64,
    /// Where log time `t0` falls on the wall clock (pauses move it).
    wall0: Instant,
    /// Log time of the first message played; `None` before it.
    t0: Option<u64>,
    paused_since: Option<Instant>,
}

impl Pace {
    pub fn new(rate: f64, now: Instant, paused: bool) -> Pace {
        Pace {
            rate,
            wall0: now,
            t0: None,
            paused_since: paused.then_some(now),
        }
    }

    /// Starts the schedule at the first message (`log`), at `now`.
    pub fn first(&mut self, log: u64, now: Instant) {
        if self.t0.is_none() {
            self.t0 = Some(log);
            self.wall0 = now;
            if self.paused_since.is_some() {
                self.paused_since = Some(now);
            }
        }
    }

    /// Starts again (a `--loop` round) at `now`, keeping a pause.
    pub fn restart(&mut self, now: Instant) {
        self.t0 = None;
        self.wall0 = now;
        if self.paused_since.is_some() {
            self.paused_since = Some(now);
        }
    }

    /// When the message logged at `log` is due; `None` while paused.
    pub fn due(&self, log: u64) -> Option<Instant> {
        if self.paused_since.is_some() {
            return None;
        }
        let t0 = self.t0.unwrap_or(log);
        Some(self.wall0 + Duration::from_secs_f64(log.saturating_sub(t0) as f64 / 1e9 / self.rate))
    }

    /// Simulated time elapsed since the schedule started (frozen while
    /// paused), in ns of log time.
    pub fn elapsed_ns(&self, now: Instant) -> u64 {
        let at = self.paused_since.unwrap_or(now);
        (at.saturating_duration_since(self.wall0).as_secs_f64() * self.rate * 1e9) as u64
    }

    pub fn paused(&self) -> bool {
        self.paused_since.is_some()
    }

    /// Pauses or resumes; true when that changed anything.
    pub fn set_paused(&mut self, paused: bool, now: Instant) -> bool {
        match (self.paused_since, paused) {
            (None, true) => {
                self.paused_since = Some(now);
                true
            }
            (Some(since), false) => {
                self.wall0 += now.saturating_duration_since(since);
                self.paused_since = None;
                true
            }
            _ => false,
        }
    }
}

/// The reply to a forwarded `call_service` of one of [`SERVICES`]
/// (applied to `pace`), with what to say on stderr; `None` for any other
/// frame.
pub fn answer(f: &Frame, pace: &mut Pace, now: Instant) -> Option<(Vec<u8>, Option<&'static str>)> {
    if f.op() != "call_service" {
        return None;
    }
    let service = f.str("service")?.into_owned();
    let id = f.raw("id");
    let before = pace.paused();
    let values = match service.as_str() {
        "/rosbag2_player/pause" => {
            pace.set_paused(true, now);
            "{}".to_string()
        }
        "/rosbag2_player/resume" => {
            pace.set_paused(false, now);
            "{}".to_string()
        }
        "/rosbag2_player/toggle_paused" => {
            pace.set_paused(!before, now);
            "{}".to_string()
        }
        "/rosbag2_player/is_paused" => format!("{{\"paused\":{before}}}"),
        _ => {
            let mut out = Vec::new();
            let why = format!("bag play does not serve {service}");
            encode::service_failure(
                &mut out,
                json_quote(&service).as_bytes(),
                id.map(str::as_bytes),
                &why,
            );
            return Some((out, None));
        }
    };
    let mut out = Vec::new();
    encode::service_response(
        &mut out,
        json_quote(&service).as_bytes(),
        id.map(str::as_bytes),
        values.as_bytes(),
        b"true",
        None,
    );
    let said = match (before, pace.paused()) {
        (false, true) => Some("paused"),
        (true, false) => Some("resumed"),
        _ => None,
    };
    Some((out, said))
}

/// Space presses from a terminal's stdin (see the module invariants).
pub struct Keys {
    rx: mpsc::Receiver<u8>,
    saved: libc::termios,
}

impl Keys {
    /// `None` when stdin is not a terminal (or cannot be switched).
    pub fn open() -> Option<Keys> {
        let stdin = std::io::stdin();
        if !stdin.is_terminal() {
            return None;
        }
        // Only in the terminal's foreground: a background job that set
        // the terminal would be stopped (SIGTTOU), as would its reads.
        // SAFETY: plain queries on fd 0 and this process.
        if unsafe { libc::tcgetpgrp(0) != libc::getpgrp() } {
            return None;
        }
        // SAFETY: termios is a plain C struct (zeroed is valid) that
        // tcgetattr fills for fd 0, which is open (a terminal, above).
        let mut saved: libc::termios = unsafe { std::mem::zeroed() };
        if unsafe { libc::tcgetattr(0, &mut saved) } != 0 {
            return None;
        }
        let mut raw = saved;
        // Keys arrive one by one, unechoed; ISIG stays, so Ctrl-C is
        // still SIGINT (the player's clean stop).
        raw.c_lflag &= !(libc::ICANON | libc::ECHO);
        raw.c_cc[libc::VMIN] = 1;
        raw.c_cc[libc::VTIME] = 0;
        // SAFETY: as above; `raw` is a valid termios derived from `saved`.
        if unsafe { libc::tcsetattr(0, libc::TCSANOW, &raw) } != 0 {
            return None;
        }
        let (tx, rx) = mpsc::sync_channel(MAX_PENDING_KEYS);
        // Blocked in read until a key or the process ends; nothing to join.
        std::thread::spawn(move || {
            let mut b = [0u8; 1];
            let mut stdin = std::io::stdin();
            while let Ok(1) = stdin.read(&mut b) {
                match tx.try_send(b[0]) {
                    Ok(()) | Err(mpsc::TrySendError::Full(_)) => {}
                    Err(mpsc::TrySendError::Disconnected(_)) => break,
                }
            }
        });
        Some(Keys { rx, saved })
    }

    /// Spaces pressed since the last look.
    pub fn spaces(&self) -> usize {
        self.rx.try_iter().filter(|&k| k == b' ').count()
    }
}

impl Drop for Keys {
    fn drop(&mut self) {
        // SAFETY: restores the settings tcgetattr read for fd 0.
        unsafe {
            libc::tcsetattr(0, libc::TCSANOW, &self.saved);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pause_shifts_what_follows_and_freezes_sim_time() {
        let t = Instant::now();
        let s = Duration::from_secs;
        let mut p = Pace::new(2.0, t, false);
        p.first(1_000_000_000, t);
        assert_eq!(p.due(3_000_000_000), Some(t + s(1)), "2 s of log at rate 2");
        assert!(p.set_paused(true, t + s(1)));
        assert_eq!(p.due(3_000_000_000), None);
        assert_eq!(p.elapsed_ns(t + s(5)), 2_000_000_000, "frozen at the pause");
        assert!(p.set_paused(false, t + s(4)));
        assert_eq!(p.due(3_000_000_000), Some(t + s(4)), "3 s later");
        assert!(!p.set_paused(false, t + s(4)));
        // Started paused: the pause counts from the first message.
        let mut p = Pace::new(1.0, t, true);
        p.first(0, t + s(2));
        p.set_paused(false, t + s(3));
        assert_eq!(p.due(1_000_000_000), Some(t + s(4)));
    }

    #[test]
    fn services_answer_and_toggle() {
        let t = Instant::now();
        let mut p = Pace::new(1.0, t, false);
        let call = |svc: &str| {
            Frame::parse(
                format!(r#"{{"op":"call_service","service":"{svc}","id":"c1","args":{{}}}}"#)
                    .as_bytes(),
            )
            .unwrap()
        };
        let (out, said) = answer(&call("/rosbag2_player/toggle_paused"), &mut p, t).unwrap();
        assert_eq!(said, Some("paused"));
        assert!(String::from_utf8(out).unwrap().contains(r#""id":"c1""#));
        let (out, _) = answer(&call("/rosbag2_player/is_paused"), &mut p, t).unwrap();
        assert!(String::from_utf8(out).unwrap().contains(r#""paused":true"#));
        let (_, said) = answer(&call("/rosbag2_player/resume"), &mut p, t).unwrap();
        assert_eq!(said, Some("resumed"));
        let (out, _) = answer(&call("/x"), &mut p, t).unwrap();
        assert!(String::from_utf8(out).unwrap().contains("\"result\":false"));
        let pubf = Frame::parse(br#"{"op":"publish","topic":"/a","msg":{}}"#).unwrap();
        assert!(answer(&pubf, &mut p, t).is_none());
    }
}
