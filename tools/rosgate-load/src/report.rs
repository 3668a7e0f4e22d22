//! Turning an [`Outcome`] into the two output lines: one for people, and
//! `RESULT {json}` for scripts. A run that lost, reordered or damaged
//! anything reports that instead of a rate, because a rate over a broken
//! run is not a measurement.

use serde_json::{json, Value};

use crate::histogram::Histogram;
use crate::runner::Outcome;
use crate::scenario::{human_bytes, Scenario};

/// CPU above this (percent of one core) marks the side that limited a run.
const SATURATED_PCT: f64 = 90.0;
/// Other processes' CPU above this is printed: the host was shared.
const BUSY_HOST_PCT: f64 = 10.0;

/// `12.3us`, `4.56ms`, `1.20s` from nanoseconds.
fn dur(ns: u64) -> String {
    let ns = ns as f64;
    if ns < 1e3 {
        format!("{ns:.0}ns")
    } else if ns < 1e6 {
        format!("{:.1}us", ns / 1e3)
    } else if ns < 1e9 {
        format!("{:.2}ms", ns / 1e6)
    } else {
        format!("{:.2}s", ns / 1e9)
    }
}

fn mib(b: u64) -> String {
    format!("{:.1}MiB", b as f64 / (1u64 << 20) as f64)
}

fn pct(v: Option<f64>) -> String {
    v.map_or_else(|| "n/a".into(), |v| format!("{v:.0}%"))
}

impl Outcome {
    pub fn rate(&self) -> f64 {
        let s = self.measured.as_secs_f64();
        if s > 0.0 {
            self.measured_good as f64 / s
        } else {
            0.0
        }
    }

    /// Goals: verified feedback messages per second.
    pub fn feedback_per_s(&self) -> f64 {
        let s = self.measured.as_secs_f64();
        if s > 0.0 {
            self.measured_feedback as f64 / s
        } else {
            0.0
        }
    }

    /// Payload megabytes (10^6) per second delivered.
    pub fn mb_per_s(&self) -> f64 {
        let s = self.measured.as_secs_f64();
        if s > 0.0 {
            self.measured_bytes as f64 / s / 1e6
        } else {
            0.0
        }
    }

    /// Which side ran out of CPU, if either did.
    pub fn bound(&self) -> Option<&'static str> {
        if self.cpu.client >= SATURATED_PCT * self.tool_cores as f64 {
            Some("tool-bound")
        } else if self.cpu.server.is_some_and(|s| s >= SATURATED_PCT) {
            Some("server-bound")
        } else {
            None
        }
    }

    fn server_dropped(&self) -> Option<u64> {
        match (self.stats_before, self.stats_after) {
            (Some(a), Some(b)) => Some(b.dropped.saturating_sub(a.dropped)),
            _ => None,
        }
    }

    fn rss_delta(&self) -> Option<i64> {
        match (self.server_rss_before, self.server_rss) {
            (Some(a), Some(b)) => Some(b as i64 - a as i64),
            _ => None,
        }
    }

    /// The human-readable line.
    pub fn human(&self) -> String {
        let p = &self.params;
        let t = &self.tally;
        let head = format!("{:<8} {}", p.scenario.name(), p.shape());
        let cpu = format!(
            "cpu tool {}{} server {}{}{}",
            pct(Some(self.cpu.client)),
            if self.tool_cores > 1 {
                format!(" of {} cores", self.tool_cores)
            } else {
                String::new()
            },
            pct(self.cpu.server),
            self.cpu
                .other
                .filter(|&o| o >= BUSY_HOST_PCT)
                .map(|o| format!(" other {o:.0}%"))
                .unwrap_or_default(),
            self.bound().map(|b| format!(" ({b})")).unwrap_or_default()
        );
        let rss = self
            .server_rss
            .map(|r| format!(" | server rss {}", mib(r)))
            .unwrap_or_default();
        if !self.clean() {
            let lost = self.lost();
            let of = self.expected.max(1);
            let dropped = self
                .server_dropped()
                .map(|d| format!(" server-dropped {d}"))
                .unwrap_or_default();
            let (failed, feedback) = match p.scenario {
                Scenario::Goals => (
                    "failed-goals",
                    format!(" lost-feedback {}", t.feedback_lost),
                ),
                _ => ("failed-calls", String::new()),
            };
            return format!(
                "{head}: FAILED lost {lost}/{} ({:.3}%) out-of-order {} corrupt {} misrouted {} \
                 {failed} {}{feedback} disconnects {}{dropped} | {cpu}{rss}",
                self.expected,
                lost as f64 * 100.0 / of as f64,
                t.out_of_order,
                t.corrupt,
                t.misrouted,
                t.calls_failed,
                t.disconnects,
            );
        }
        match p.scenario {
            Scenario::Idle => {
                let delta = self.rss_delta().map_or_else(
                    || "server rss n/a (need --server-pid)".into(),
                    |d| {
                        format!(
                            "server rss {:+.1}MiB ({:.1} KiB/conn)",
                            d as f64 / (1u64 << 20) as f64,
                            d as f64 / 1024.0 / p.conns as f64
                        )
                    },
                );
                format!(
                    "{head}: {delta}, held {:.0}s, stats rtt {} | {cpu} | setup {:.2}s",
                    self.measured.as_secs_f64(),
                    self.stats_rtt
                        .map_or_else(|| "n/a".into(), |d| dur(d.as_nanos() as u64)),
                    self.setup.as_secs_f64()
                )
            }
            Scenario::Latency => format!(
                "{head}: {} | n={} tool-lag p99 {} | loss 0 | {cpu}{rss}",
                quantiles(&t.latency),
                t.latency.count(),
                dur(t.send_lag.quantile(0.99)),
            ),
            Scenario::Calls => format!(
                "{head}: {:.0} calls/s | rtt {} | loss 0 | {cpu}{rss}",
                self.rate(),
                quantiles(&t.latency),
            ),
            Scenario::Goals => format!(
                "{head}: {:.0} goals/s {:.0} feedback/s | rtt {} | loss 0 | {cpu}{rss}",
                self.rate(),
                self.feedback_per_s(),
                quantiles(&t.latency),
            ),
            _ => format!(
                "{head}: {:.0} msg/s {:.1} MB/s delivered | p50 {} p99 {} | loss 0 | {cpu}{rss}",
                self.rate(),
                self.mb_per_s(),
                dur(t.latency.quantile(0.5)),
                dur(t.latency.quantile(0.99)),
            ),
        }
    }

    /// The machine-readable object printed after `RESULT `.
    pub fn json(&self) -> Value {
        let p = &self.params;
        let t = &self.tally;
        let clean = self.clean();
        json!({
            "scenario": p.scenario.name(),
            "transport": self.transport,
            "ok": clean,
            "params": {
                "pubs": p.pubs,
                "subs": p.subs,
                "callers": p.callers,
                "conns": p.conns,
                "size": p.size,
                "size_human": human_bytes(p.size),
                "window": p.window,
                "inflight": p.inflight,
                "feedback": if p.scenario == Scenario::Goals { json!(p.feedback) } else { Value::Null },
                "rate": if p.scenario == Scenario::Latency { json!(p.rate) } else { Value::Null },
                "duration_s": p.duration.as_secs_f64(),
                "warmup_s": p.warmup.as_secs_f64(),
            },
            // Rates only for clean runs: see the module docs.
            "msgs_per_s": if clean { json!(self.rate().round()) } else { Value::Null },
            // Verified deliveries per second in the measured window, also
            // for a run that failed: a server that sheds by design
            // (foxglove-sdk drops a slow client's oldest messages) still
            // has a delivered rate to compare; `out_of_order` says how
            // much it shed.
            "delivered_per_s": self.rate().round(),
            "mb_per_s": if clean { json!((self.mb_per_s() * 100.0).round() / 100.0) } else { Value::Null },
            "measured_s": self.measured.as_secs_f64(),
            "expected": self.expected,
            "delivered": t.delivered,
            "good": t.good,
            "lost": self.lost(),
            "out_of_order": t.out_of_order,
            "corrupt": t.corrupt,
            "misrouted": t.misrouted,
            "calls_failed": t.calls_failed,
            "feedback_per_s": if p.scenario == Scenario::Goals && clean { json!(self.feedback_per_s().round()) } else { Value::Null },
            "feedback_delivered": t.feedback_delivered,
            "feedback_good": t.feedback_good,
            "feedback_lost": t.feedback_lost,
            "disconnects": t.disconnects,
            "error_statuses": t.error_notices,
            "drained": self.drained,
            "latency_us": latency_json(&t.latency),
            "send_lag_us": if p.scenario == Scenario::Latency { latency_json(&t.send_lag) } else { Value::Null },
            "client_cpu_pct": (self.cpu.client * 10.0).round() / 10.0,
            "threads": p.threads,
            "tool_cores": self.tool_cores,
            "server_cpu_pct": self.cpu.server.map(|v| (v * 10.0).round() / 10.0),
            "other_cpu_pct": self.cpu.other.map(|v| (v * 10.0).round() / 10.0),
            "bound": self.bound(),
            "server_rss_bytes": self.server_rss,
            "server_rss_before_bytes": if p.scenario == Scenario::Idle { json!(self.server_rss_before) } else { Value::Null },
            "server_rss_per_conn_bytes": if p.scenario == Scenario::Idle {
                json!(self.rss_delta().map(|d| d / p.conns.max(1) as i64))
            } else { Value::Null },
            "server_dropped": self.server_dropped(),
            "stats_rtt_us": self.stats_rtt.map(|d| d.as_secs_f64() * 1e6),
            "setup_s": self.setup.as_secs_f64(),
        })
    }
}

fn quantiles(h: &Histogram) -> String {
    format!(
        "p50 {} p90 {} p99 {} p99.9 {} max {}",
        dur(h.quantile(0.5)),
        dur(h.quantile(0.9)),
        dur(h.quantile(0.99)),
        dur(h.quantile(0.999)),
        dur(h.max())
    )
}

fn latency_json(h: &Histogram) -> Value {
    if h.count() == 0 {
        return Value::Null;
    }
    let us = |ns: u64| (ns as f64 / 100.0).round() / 10.0;
    json!({
        "count": h.count(),
        "mean": us(h.mean()),
        "p50": us(h.quantile(0.5)),
        "p90": us(h.quantile(0.9)),
        "p99": us(h.quantile(0.99)),
        "p999": us(h.quantile(0.999)),
        "max": us(h.max()),
    })
}
