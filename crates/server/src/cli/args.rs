//! A command's flags and positionals (pico-args, like the gateway's own
//! flags), and the options every command shares (`--url`, `--timeout`,
//! `--domain`).
//!
//! Flags may come anywhere after the command; a repeated flag's last value
//! wins; `--` ends the flags (so a positional may start with `-`); a
//! positional that looks like a negative number (`-5`, `-0.5`) is one.

use std::ffi::OsString;
use std::str::FromStr;
use std::time::Duration;

use super::url::Url;
use super::Error;

/// Where the CLI connects when neither `--url` nor `$ROSGATE_URL` says.
pub const DEFAULT_URL: &str = "tcp://127.0.0.1:9095";

/// Seconds to wait for the connection and for each answer.
pub const DEFAULT_TIMEOUT_SECS: f64 = 5.0;

/// The options part of every command's `--help`.
pub const COMMON_HELP: &str = "
COMMON OPTIONS:
    --url URL           the gateway: tcp://HOST:PORT (NDJSON) or
                        ws://HOST:PORT/PATH?QUERY (rosbridge v2); over TLS
                        tls://HOST:PORT or wss://HOST:PORT/PATH?QUERY
                        [default: $ROSGATE_URL, else tcp://127.0.0.1:9095]
    --ca-file FILE      TLS: trust the PEM certificate(s) in FILE (the
                        gateway's own, or its CA) [default: $ROSGATE_CA_FILE]
    --timeout SECS      to connect and for each answer [default: 5]
    --token TOKEN       authenticate with TOKEN [default: $ROSGATE_TOKEN]
    --domain N          work in domain N (0-232): over TCP the CLI declares a
                        hidden node `_rosgate_cli_<pid>` there; over
                        WebSocket it adds `domain=N` to the URL
    -h, --help          print this help

EXIT STATUS: 0 success, 1 the gateway answered with a failure, 2 usage error,
3 the gateway could not be reached or did not answer in time, 130 interrupted.
";

/// The options every command takes.
#[derive(Debug, Clone)]
pub struct Common {
    pub url: Url,
    pub timeout: Duration,
    pub domain: Option<u8>,
    /// `--token` (or `$ROSGATE_TOKEN`): presented when the gateway requires
    /// authentication.
    pub token: Option<String>,
    /// `--ca-file` (or `$ROSGATE_CA_FILE`): certificates trusted for TLS.
    pub ca_file: Option<String>,
}

/// One command's arguments, consumed flag by flag, then the positionals.
pub struct Args(pico_args::Arguments);

impl Args {
    pub fn new(argv: Vec<OsString>) -> Args {
        Args(pico_args::Arguments::from_vec(argv))
    }

    /// The command name (first argument, unless it is a flag).
    pub fn subcommand(&mut self) -> Result<Option<String>, String> {
        self.0
            .subcommand()
            .map_err(|e| format!("invalid command: {e}"))
    }

    /// `-h` / `--help`.
    pub fn help(&mut self) -> bool {
        self.flag(["-h", "--help"])
    }

    /// A flag without a value (all its occurrences are consumed).
    pub fn flag<K: Into<pico_args::Keys> + Copy>(&mut self, keys: K) -> bool {
        let mut seen = false;
        while self.0.contains(keys) {
            seen = true;
        }
        seen
    }

    /// The value of a flag (the last one when repeated); `names` is its
    /// long name, or its short and long names. Errors name the flag.
    pub fn opt<T>(&mut self, names: &[&'static str]) -> Result<Option<T>, Error>
    where
        T: FromStr,
        T::Err: std::fmt::Display,
    {
        let (keys, name): (pico_args::Keys, &str) = match *names {
            [long] => (long.into(), long),
            [short, long] => ([short, long].into(), long),
            _ => return Err(Error::Usage("internal: bad flag names".into())),
        };
        let values = self
            .0
            .values_from_fn(keys, |v| v.parse::<T>().map_err(|e| e.to_string()))
            .map_err(|e| {
                Error::Usage(match e {
                    pico_args::Error::Utf8ArgumentParsingFailed { cause, value } => {
                        format!("{name}: invalid value {value:?}: {cause}")
                    }
                    other => format!("{name}: {other}"),
                })
            })?;
        Ok(values.into_iter().last())
    }

    /// `--url`, `--timeout`, `--domain`, `--ca-file`.
    pub fn common(&mut self) -> Result<Common, String> {
        let url_text = match self.opt::<String>(&["--url"]).map_err(usage_text)? {
            Some(u) => u,
            None => std::env::var("ROSGATE_URL")
                .ok()
                .filter(|u| !u.is_empty())
                .unwrap_or_else(|| DEFAULT_URL.to_string()),
        };
        let url: Url = url_text.parse().map_err(|e| format!("--url: {e}"))?;
        let secs = self
            .opt::<f64>(&["--timeout"])
            .map_err(usage_text)?
            .unwrap_or(DEFAULT_TIMEOUT_SECS);
        if !(secs > 0.0 && secs <= 86_400.0) {
            return Err(format!(
                "--timeout: {secs} is not a number of seconds in (0, 86400]"
            ));
        }
        let domain = match self.opt::<u64>(&["--domain"]).map_err(usage_text)? {
            None => None,
            Some(d) => Some(
                u8::try_from(d)
                    .ok()
                    .filter(|d| *d <= rosgate_core::nodes::MAX_DOMAIN)
                    .ok_or_else(|| format!("--domain: {d} is out of range (0-232)"))?,
            ),
        };
        let token = self.opt_or_env("--token", "ROSGATE_TOKEN")?;
        let ca_file = self.opt_or_env("--ca-file", "ROSGATE_CA_FILE")?;
        Ok(Common {
            url,
            timeout: Duration::from_secs_f64(secs),
            domain,
            token,
            ca_file,
        })
    }

    /// `flag`'s value, else the environment variable `var` when set and
    /// not empty.
    fn opt_or_env(&mut self, flag: &'static str, var: &str) -> Result<Option<String>, String> {
        match self.opt::<String>(&[flag]).map_err(usage_text)? {
            Some(v) => Ok(Some(v)),
            None => Ok(std::env::var(var).ok().filter(|v| !v.is_empty())),
        }
    }

    /// The positionals: `required` names (for the error message) then up to
    /// `optional` more. An unknown flag is an error.
    pub fn finish(self, required: &[&str], optional: usize) -> Result<Vec<String>, Error> {
        let mut out = Vec::new();
        let mut flags_done = false;
        for a in self.0.finish() {
            let a = a
                .into_string()
                .map_err(|a| Error::Usage(format!("argument {a:?} is not UTF-8")))?;
            if !flags_done && a == "--" {
                flags_done = true;
                continue;
            }
            if !flags_done && looks_like_flag(&a) {
                return Err(Error::Usage(format!("unknown option {a:?}")));
            }
            out.push(a);
        }
        if out.len() < required.len() {
            return Err(Error::Usage(format!("missing {}", required[out.len()])));
        }
        if out.len() > required.len() + optional {
            return Err(Error::Usage(format!(
                "unexpected argument {:?}",
                out[required.len() + optional]
            )));
        }
        Ok(out)
    }
}

fn usage_text(e: Error) -> String {
    match e {
        Error::Usage(m) => m,
        other => format!("{other:?}"),
    }
}

/// `-x`, `--xyz`; not `-`, `-5` or `-.5`.
fn looks_like_flag(a: &str) -> bool {
    match a.as_bytes() {
        [b'-', b'-', ..] => true,
        [b'-', c, ..] => !(c.is_ascii_digit() || *c == b'.'),
        _ => false,
    }
}

/// A rate in Hz, a count, ...: parsed and checked to be positive.
pub fn positive<T>(name: &str, v: Option<T>) -> Result<Option<T>, Error>
where
    T: PartialOrd + Default + std::fmt::Display + Copy,
{
    match v {
        Some(x) if x <= T::default() => Err(Error::Usage(format!(
            "{name}: must be greater than 0 (got {x})"
        ))),
        other => Ok(other),
    }
}

/// A node name as written by the user, made absolute (`talker` -> `/talker`).
pub fn absolute(name: &str) -> String {
    if name.starts_with('/') {
        name.to_string()
    } else {
        format!("/{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Args {
        Args::new(v.iter().map(OsString::from).collect())
    }

    #[test]
    fn negative_numbers_are_positionals_and_unknown_flags_are_errors() {
        let a = args(&["/n", "x", "-5"]);
        assert_eq!(a.finish(&["NODE", "NAME", "VALUE"], 0).unwrap()[2], "-5");
        let a = args(&["/n", "--bogus"]);
        assert!(matches!(a.finish(&["NODE"], 0), Err(Error::Usage(_))));
        let a = args(&["--", "--not-a-flag"]);
        assert_eq!(a.finish(&["X"], 0).unwrap(), ["--not-a-flag"]);
        let a = args(&[]);
        assert!(matches!(a.finish(&["TOPIC"], 0), Err(Error::Usage(m)) if m == "missing TOPIC"));
    }

    #[test]
    fn repeated_values_take_the_last_and_bad_values_name_the_flag() {
        let mut a = args(&["--rate", "2", "--rate", "5"]);
        assert_eq!(a.opt::<f64>(&["--rate"]).unwrap(), Some(5.0));
        let mut a = args(&["--count", "x"]);
        match a.opt::<u64>(&["--count"]) {
            Err(Error::Usage(m)) => assert!(m.starts_with("--count"), "{m}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn common_options() {
        let mut a = args(&[
            "--url",
            "ws://h:1/p?x=1",
            "--timeout",
            "0.5",
            "--domain",
            "7",
        ]);
        let c = a.common().unwrap();
        assert_eq!(c.timeout, Duration::from_millis(500));
        assert_eq!(c.domain, Some(7));
        assert!(args(&["--domain", "233"]).common().is_err());
        assert!(args(&["--timeout", "0"]).common().is_err());
        assert!(args(&["--url", "http://x"]).common().is_err());
    }
}
