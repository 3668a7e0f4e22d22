//! `--url`: which gateway the CLI talks to and over which transport,
//! `tcp://HOST:PORT` (NDJSON) or `ws://HOST:PORT/PATH?QUERY` (rosbridge v2).

use std::fmt;
use std::str::FromStr;

/// `--url`: the transport and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Url {
    /// `tcp://host:port` (or `host:port`).
    Tcp { authority: String },
    /// `ws://host[:port][/path][?query]`.
    Ws { authority: String, target: String },
}

impl FromStr for Url {
    type Err = String;

    fn from_str(s: &str) -> Result<Url, String> {
        if let Some(rest) = s.strip_prefix("ws://") {
            let split = rest.find(['/', '?']).unwrap_or(rest.len());
            let (authority, target) = rest.split_at(split);
            if authority.is_empty() {
                return Err(format!("{s:?} has no host"));
            }
            let authority = if has_port(authority) {
                authority.to_string()
            } else {
                format!("{authority}:80")
            };
            let target = match target.as_bytes().first() {
                None => "/".to_string(),
                Some(b'?') => format!("/{target}"),
                _ => target.to_string(),
            };
            return Ok(Url::Ws { authority, target });
        }
        if s.starts_with("wss://") {
            return Err("wss:// (TLS) is not supported; use ws:// or tcp://".into());
        }
        let rest = s.strip_prefix("tcp://").unwrap_or(s);
        if rest.contains("://") {
            return Err(format!(
                "{s:?}: unknown scheme (tcp://HOST:PORT or ws://HOST:PORT/PATH)"
            ));
        }
        let rest = rest.trim_end_matches('/');
        if rest.is_empty() || rest.contains('/') {
            return Err(format!("{s:?} is not tcp://HOST:PORT"));
        }
        let authority = if has_port(rest) {
            rest.to_string()
        } else {
            format!("{rest}:9095")
        };
        Ok(Url::Tcp { authority })
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
            Url::Tcp { authority } => write!(f, "tcp://{authority}"),
            Url::Ws { authority, target } => write!(f, "ws://{authority}{target}"),
        }
    }
}
