//! `--url`: which gateway the CLI talks to and over which transport,
//! `tcp://HOST:PORT` (NDJSON) or `ws://HOST:PORT/PATH?QUERY` (rosbridge v2),
//! or the same over TLS: `tls://HOST:PORT`, `wss://HOST:PORT/PATH?QUERY`.

use std::fmt;
use std::str::FromStr;

/// `--url`: the transport and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Url {
    /// `tcp://host:port` (or `host:port`); `tls://host:port` with `tls`.
    Tcp { authority: String, tls: bool },
    /// `ws://host[:port][/path][?query]`; `wss://...` with `tls`.
    Ws {
        authority: String,
        target: String,
        tls: bool,
    },
}

impl Url {
    /// `host:port` (or `[v6]:port`).
    pub fn authority(&self) -> &str {
        match self {
            Url::Tcp { authority, .. } | Url::Ws { authority, .. } => authority,
        }
    }

    /// Whether the URL asks for TLS (`tls://`, `wss://`).
    pub fn is_tls(&self) -> bool {
        match self {
            Url::Tcp { tls, .. } | Url::Ws { tls, .. } => *tls,
        }
    }

    /// The host part of the authority, without brackets: the name the
    /// gateway's certificate must carry.
    pub fn host(&self) -> &str {
        let a = self.authority();
        let host = match a.rsplit_once(':') {
            Some((h, _)) if has_port(a) => h,
            _ => a,
        };
        host.trim_start_matches('[').trim_end_matches(']')
    }
}

impl FromStr for Url {
    type Err = String;

    fn from_str(s: &str) -> Result<Url, String> {
        let ws = match (s.strip_prefix("ws://"), s.strip_prefix("wss://")) {
            (Some(rest), _) => Some((rest, false)),
            (_, Some(rest)) => Some((rest, true)),
            _ => None,
        };
        if let Some((rest, tls)) = ws {
            let split = rest.find(['/', '?']).unwrap_or(rest.len());
            let (authority, target) = rest.split_at(split);
            if authority.is_empty() {
                return Err(format!("{s:?} has no host"));
            }
            let authority = if has_port(authority) {
                authority.to_string()
            } else if tls {
                format!("{authority}:443")
            } else {
                format!("{authority}:80")
            };
            let target = match target.as_bytes().first() {
                None => "/".to_string(),
                Some(b'?') => format!("/{target}"),
                _ => target.to_string(),
            };
            return Ok(Url::Ws {
                authority,
                target,
                tls,
            });
        }
        let (rest, tls) = match (s.strip_prefix("tcp://"), s.strip_prefix("tls://")) {
            (Some(rest), _) => (rest, false),
            (_, Some(rest)) => (rest, true),
            _ => (s, false),
        };
        if rest.contains("://") {
            return Err(format!(
                "{s:?}: unknown scheme (tcp://HOST:PORT, ws://HOST:PORT/PATH, or over TLS tls:// and wss://)"
            ));
        }
        let rest = rest.trim_end_matches('/');
        if rest.is_empty() || rest.contains('/') {
            return Err(format!("{s:?} is not tcp://HOST:PORT (or tls://HOST:PORT)"));
        }
        let authority = if has_port(rest) {
            rest.to_string()
        } else {
            format!("{rest}:9095")
        };
        Ok(Url::Tcp { authority, tls })
    }
}

/// `host:port` or `[v6]:port` (a bare IPv6 address has colons but no port).
fn has_port(authority: &str) -> bool {
    match authority.rsplit_once(':') {
        Some((host, port)) => {
            !port.is_empty()
                && port.bytes().all(|b| b.is_ascii_digit())
                && (!host.contains(':') || host.ends_with(']'))
        }
        None => false,
    }
}

impl fmt::Display for Url {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Url::Tcp { authority, tls } => {
                write!(f, "{}://{authority}", if *tls { "tls" } else { "tcp" })
            }
            Url::Ws {
                authority,
                target,
                tls,
            } => write!(
                f,
                "{}://{authority}{target}",
                if *tls { "wss" } else { "ws" }
            ),
        }
    }
}
