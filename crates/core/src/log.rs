//! Minimal stderr logging: one line per event, never per message.
//!
//! The level and format are process-wide and set once by the server's
//! `main`; the core logs only rate-limited events (connections opening and
//! closing, forced closes), never per message. Text lines look like
//! `2026-12-01T20:54:30.123Z WARN close conn=3 peer=10.0.0.7:51234 reason=write_stall`;
//! with [`LogFormat::Json`] each line is one JSON object
//! (`{"ts":..,"level":"warn","msg":"close","conn":3,..}`) for log shippers.
//!
//! Invariant: every line is one line (values never carry a raw newline)
//! and, in JSON, parses as one object whatever the values hold.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Log verbosity, most to least severe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    Error,
    Warn,
    Info,
    Debug,
}

impl std::str::FromStr for LogLevel {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "error" => Ok(LogLevel::Error),
            "warn" => Ok(LogLevel::Warn),
            "info" => Ok(LogLevel::Info),
            "debug" => Ok(LogLevel::Debug),
            _ => Err(format!("invalid log level {s:?} (error|warn|info|debug)")),
        }
    }
}

/// How lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// `timestamp LEVEL message key=value ...`, for people.
    Text,
    /// One JSON object per line, for log shippers.
    Json,
}

impl std::str::FromStr for LogFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            _ => Err(format!("invalid log format {s:?} (text|json)")),
        }
    }
}

static LEVEL: AtomicU8 = AtomicU8::new(LogLevel::Info as u8);
static JSON: AtomicBool = AtomicBool::new(false);

pub fn set_level(level: LogLevel) {
    LEVEL.store(level as u8, Ordering::Relaxed);
}

pub fn set_format(format: LogFormat) {
    JSON.store(format == LogFormat::Json, Ordering::Relaxed);
}

/// A field value of a structured line.
#[derive(Debug, Clone, Copy)]
pub enum Val<'a> {
    Str(&'a str),
    Num(u64),
    Float(f64),
    /// Already serialized JSON from the gateway itself (the counters).
    Json(&'a str),
}

impl<'a> From<&'a str> for Val<'a> {
    fn from(s: &'a str) -> Self {
        Val::Str(s)
    }
}

impl From<u64> for Val<'_> {
    fn from(n: u64) -> Self {
        Val::Num(n)
    }
}

impl From<u32> for Val<'_> {
    fn from(n: u32) -> Self {
        Val::Num(u64::from(n))
    }
}

impl From<f64> for Val<'_> {
    fn from(n: f64) -> Self {
        Val::Float(n)
    }
}

pub fn enabled(level: LogLevel) -> bool {
    level as u8 <= LEVEL.load(Ordering::Relaxed)
}

fn tag(level: LogLevel) -> &'static str {
    match level {
        LogLevel::Error => "ERROR",
        LogLevel::Warn => "WARN",
        LogLevel::Info => "INFO",
        LogLevel::Debug => "DEBUG",
    }
}

/// Writes one free-form line if `level` is enabled. Use the `log!` macro.
pub fn write(level: LogLevel, args: std::fmt::Arguments<'_>) {
    if enabled(level) {
        let line = render(
            tag(level),
            &args.to_string(),
            &[],
            JSON.load(Ordering::Relaxed),
        );
        eprintln!("{line}");
    }
}

/// Writes one structured line (`msg` then `key=value` fields) if `level`
/// is enabled.
pub fn event(level: LogLevel, msg: &str, fields: &[(&str, Val<'_>)]) {
    if enabled(level) {
        let line = render(tag(level), msg, fields, JSON.load(Ordering::Relaxed));
        eprintln!("{line}");
    }
}

/// Writes one structured line whatever the level (where the gateway
/// listens: scripts wait for it).
pub fn notice(msg: &str, fields: &[(&str, Val<'_>)]) {
    notice_at("INFO", msg, fields);
}

/// [`notice`] with another level tag (`ERROR` for a fatal start-up error).
pub fn notice_at(tag: &str, msg: &str, fields: &[(&str, Val<'_>)]) {
    let line = render(tag, msg, fields, JSON.load(Ordering::Relaxed));
    eprintln!("{line}");
}

/// Writes the counters (SIGUSR1 whatever the level; the caller checks the
/// level for the shutdown's `stopped` line, which is info): text
/// `ts STATS {..}` (or `ts INFO <msg> {..}`), JSON with the counters as an
/// object.
pub fn counters(msg: &str, counters_json: &str) {
    let line = if JSON.load(Ordering::Relaxed) {
        render("INFO", msg, &[("counters", Val::Json(counters_json))], true)
    } else if msg == "stats" {
        format!("{} STATS {counters_json}", timestamp())
    } else {
        format!("{} INFO {msg}: {counters_json}", timestamp())
    };
    eprintln!("{line}");
}

/// Whether lines are JSON.
pub fn is_json() -> bool {
    JSON.load(Ordering::Relaxed)
}

/// One line, without its newline.
fn render(tag: &str, msg: &str, fields: &[(&str, Val<'_>)], json: bool) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(64 + msg.len() + 24 * fields.len());
    if json {
        let _ = write!(
            s,
            "{{\"ts\":\"{}\",\"level\":\"{}\",\"msg\":{}",
            timestamp(),
            tag.to_ascii_lowercase(),
            serde_json::Value::from(msg)
        );
        for (k, v) in fields {
            let _ = write!(s, ",{}:", serde_json::Value::from(*k));
            match v {
                Val::Str(x) => {
                    let _ = write!(s, "{}", serde_json::Value::from(*x));
                }
                Val::Num(n) => {
                    let _ = write!(s, "{n}");
                }
                // NaN and infinities are not JSON.
                Val::Float(f) if f.is_finite() => {
                    let _ = write!(s, "{f:.3}");
                }
                Val::Float(_) => s.push_str("null"),
                Val::Json(j) => s.push_str(j),
            }
        }
        s.push('}');
    } else {
        let _ = write!(s, "{} {tag} {}", timestamp(), msg.replace('\n', "\\n"));
        for (k, v) in fields {
            let _ = match v {
                Val::Str(x) if x.is_empty() || x.contains([' ', '"', '=', '\n']) => {
                    write!(s, " {k}={:?}", x)
                }
                Val::Str(x) => write!(s, " {k}={x}"),
                Val::Num(n) => write!(s, " {k}={n}"),
                Val::Float(f) => write!(s, " {k}={f:.3}"),
                Val::Json(j) => write!(s, " {k}={j}"),
            };
        }
    }
    s
}

fn timestamp() -> String {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, dd) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{dd:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        d.subsec_millis()
    )
}

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian
/// calendar; Howard Hinnant's algorithm
/// (<http://howardhinnant.github.io/date_algorithms.html#civil_from_days>).
/// The one copy: the log's stamps and the CLI's dates use it.
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// `log!(Warn, "close conn={} reason={}", k, r)`
#[macro_export]
macro_rules! log {
    ($level:ident, $($arg:tt)*) => {
        $crate::log::write($crate::log::LogLevel::$level, format_args!($($arg)*))
    };
}

#[cfg(test)]
mod tests {
    use super::{render, Val};

    #[test]
    fn json_lines_parse_whatever_the_values_hold() {
        let line = render(
            "WARN",
            "close \"x\"\n",
            &[
                ("conn", Val::Num(3)),
                ("peer", Val::Str("10.0.0.7:5\u{0}1\n")),
                ("lived_s", Val::Float(f64::NAN)),
                ("age", Val::Float(1.5)),
            ],
            true,
        );
        assert!(!line.contains('\n'));
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["level"], "warn");
        assert_eq!(v["msg"], "close \"x\"\n");
        assert_eq!(v["conn"], 3);
        assert_eq!(v["peer"], "10.0.0.7:5\u{0}1\n");
        assert!(v["lived_s"].is_null());
        assert_eq!(v["age"], 1.5);
    }

    #[test]
    fn text_lines_stay_one_line_and_quote_odd_values() {
        let line = render(
            "INFO",
            "open",
            &[
                ("conn", Val::Num(3)),
                ("client", Val::Str("a b\nc")),
                ("peer", Val::Str("1.2.3.4:5")),
            ],
            false,
        );
        assert!(!line.contains('\n'));
        assert!(
            line.ends_with(" INFO open conn=3 client=\"a b\\nc\" peer=1.2.3.4:5"),
            "{line}"
        );
    }

    #[test]
    fn dates() {
        assert_eq!(super::civil_from_days(0), (1970, 1, 1));
        assert_eq!(super::civil_from_days(20_788), (2026, 12, 1));
    }
}
