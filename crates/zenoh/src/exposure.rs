//! Whether the Zenoh configuration reaches beyond this machine without
//! authentication: start-up refuses it unless `--allow-unauthenticated-network`
//! says the network is trusted (docs/security.md, "Zenoh"), as it does for
//! the TCP and WebSocket listeners.
//!
//! Any Zenoh peer that joins can announce graphs, subscribe to and publish
//! on every topic, call every service and provide services to the other
//! gateways: joining is what must be authenticated. An endpoint counts as
//! authenticated when
//! - it is a `tls/` endpoint with mutual TLS: `transport.link.tls` with
//!   `enable_mtls: true` and a `root_ca_certificate` (the peer must show a
//!   certificate that CA signed, and this gateway checks it), or
//! - Zenoh's user/password authentication is configured
//!   (`transport.auth.usrpwd`): for a listener a `dictionary_file` of the
//!   users it accepts, for a connection a `user` and `password` to show.
//!
//! Loopback endpoints (`127.0.0.0/8`, `::1`, `localhost`) need neither.
//! Multicast scouting joins whoever answers on the local network, so it
//! always counts as an exposure.
//!
//! Pure: reads the configuration, opens nothing.

use std::net::IpAddr;

use serde_json::Value;

/// What the configuration says about authentication.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Auth {
    /// `transport.link.tls`: `enable_mtls` and a root CA.
    mtls: bool,
    /// `transport.auth.usrpwd.dictionary_file`: listeners check users.
    usrpwd_accept: bool,
    /// `transport.auth.usrpwd.user` and `password`: this gateway shows them.
    usrpwd_present: bool,
}

fn get(c: &zenoh::Config, key: &str) -> Value {
    c.get_json(key)
        .ok()
        .and_then(|j| serde_json::from_str(&j).ok())
        .unwrap_or(Value::Null)
}

fn set(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::String(s) => !s.is_empty(),
        _ => true,
    }
}

fn auth(c: &zenoh::Config) -> Auth {
    let tls = |k: &str| get(c, &format!("transport/link/tls/{k}"));
    let ca = set(&tls("root_ca_certificate")) || set(&tls("root_ca_certificate_base64"));
    let usr = |k: &str| get(c, &format!("transport/auth/usrpwd/{k}"));
    Auth {
        mtls: tls("enable_mtls") == Value::Bool(true) && ca,
        usrpwd_accept: set(&usr("dictionary_file")),
        usrpwd_present: set(&usr("user")) && set(&usr("password")),
    }
}

/// The endpoints of `key` (`listen/endpoints`, `connect/endpoints`) for
/// `mode`: Zenoh allows one list, or one per mode.
fn endpoints(c: &zenoh::Config, key: &str, mode: &str) -> Vec<String> {
    let v = get(c, key);
    let list = match &v {
        Value::Object(m) => m.get(mode).cloned().unwrap_or(Value::Null),
        other => other.clone(),
    };
    list.as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e.as_str().map(str::to_string))
        .collect()
}

/// Whether `endpoint` (`proto/host:port?metadata#config`) stays on this
/// machine.
pub(crate) fn is_local(endpoint: &str) -> bool {
    let (proto, rest) = endpoint.split_once('/').unwrap_or(("", endpoint));
    if proto.starts_with("unix") {
        return true;
    }
    let address = rest.split(['?', '#']).next().unwrap_or("");
    let host = match address.rsplit_once(':') {
        Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => address,
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.eq_ignore_ascii_case("localhost") {
        return true;
    }
    host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Whether `endpoint`'s own configuration (after `#`) turns mutual TLS off.
fn mtls_off_here(endpoint: &str) -> bool {
    endpoint
        .split_once('#')
        .is_some_and(|(_, conf)| conf.split(';').any(|kv| kv.trim() == "enable_mtls=false"))
}

fn authenticated(endpoint: &str, auth: Auth, listening: bool) -> bool {
    let tls = endpoint.starts_with("tls/") && auth.mtls && !mtls_off_here(endpoint);
    let usrpwd = if listening {
        auth.usrpwd_accept
    } else {
        auth.usrpwd_present
    };
    tls || usrpwd
}

/// What the configuration exposes to the network without authentication:
/// one line per endpoint (and for multicast scouting), empty when nothing.
pub(crate) fn unauthenticated(c: &zenoh::Config) -> Vec<String> {
    let mode = match get(c, "mode") {
        Value::String(m) => m,
        _ => "peer".to_string(),
    };
    let auth = auth(c);
    let mut out = Vec::new();
    for (key, listening) in [("listen/endpoints", true), ("connect/endpoints", false)] {
        for ep in endpoints(c, key, &mode) {
            if !is_local(&ep) && !authenticated(&ep, auth, listening) {
                let what = if listening { "listen" } else { "connect" };
                out.push(format!("{what} {ep}"));
            }
        }
    }
    if get(c, "scouting/multicast/enabled") == Value::Bool(true) {
        out.push("multicast scouting".to_string());
    }
    out
}

/// `Err` naming what is exposed, unless nothing is or `allowed`.
pub(crate) fn check(c: &zenoh::Config, allowed: bool) -> Result<(), String> {
    let open = unauthenticated(c);
    if open.is_empty() || allowed {
        return Ok(());
    }
    Err(format!(
        "refusing to reach beyond this machine over Zenoh without authentication ({}): any peer that joins could announce graphs, publish, subscribe, call and provide services. Use mutual TLS (tls/ endpoints, transport.link.tls with enable_mtls and root_ca_certificate) or user/password authentication (transport.auth.usrpwd) in --zenoh-config (docs/security.md, \"Zenoh\"), or pass --allow-unauthenticated-network if this network is trusted",
        open.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(json5: &str) -> zenoh::Config {
        zenoh::Config::from_json5(json5).expect("config")
    }

    #[test]
    fn loopback_and_unix_endpoints_are_local_and_others_not() {
        for ep in [
            "tcp/127.0.0.1:7447",
            "tcp/127.9.9.9:0",
            "tcp/[::1]:7447",
            "tcp/localhost:7447",
            "tls/localhost:7447#iface=lo",
            "unixsock-stream//tmp/z.sock",
        ] {
            assert!(is_local(ep), "{ep}");
        }
        for ep in [
            "tcp/0.0.0.0:7447",
            "tcp/[::]:0",
            "tcp/192.0.2.1:7447",
            "tls/robot.example:7447",
            "udp/10.0.0.1:7447",
            "tcp/127.0.0.1.example:7447",
        ] {
            assert!(!is_local(ep), "{ep}");
        }
    }

    #[test]
    fn a_network_endpoint_needs_mutual_tls_or_usrpwd() {
        let open = config(
            r#"{listen: {endpoints: ["tcp/0.0.0.0:7447"]}, connect: {endpoints: ["tcp/192.0.2.1:7447", "tcp/127.0.0.1:7447"]}}"#,
        );
        assert_eq!(
            unauthenticated(&open),
            vec!["listen tcp/0.0.0.0:7447", "connect tcp/192.0.2.1:7447"]
        );
        assert!(check(&open, false).is_err());
        assert!(check(&open, true).is_ok());
        // Per mode: the peer's list is the one a peer uses.
        let modes = config(
            r#"{listen: {endpoints: {router: ["tcp/0.0.0.0:7447"], peer: ["tcp/127.0.0.1:0"]}}}"#,
        );
        assert!(unauthenticated(&modes).is_empty());
        // Mutual TLS covers tls/ endpoints only.
        let mtls = config(
            r#"{listen: {endpoints: ["tls/0.0.0.0:7447", "tcp/0.0.0.0:7448"]},
                transport: {link: {tls: {enable_mtls: true, root_ca_certificate: "ca.pem"}}}}"#,
        );
        assert_eq!(unauthenticated(&mtls), vec!["listen tcp/0.0.0.0:7448"]);
        // TLS without client certificates authenticates only the server.
        let tls = config(
            r#"{listen: {endpoints: ["tls/0.0.0.0:7447"]},
                transport: {link: {tls: {root_ca_certificate: "ca.pem"}}}}"#,
        );
        assert_eq!(unauthenticated(&tls), vec!["listen tls/0.0.0.0:7447"]);
        // usrpwd: a dictionary for listeners, credentials for connections.
        let dict = config(
            r#"{listen: {endpoints: ["tcp/0.0.0.0:7447"]}, connect: {endpoints: ["tcp/192.0.2.1:7447"]},
                transport: {auth: {usrpwd: {dictionary_file: "users.txt"}}}}"#,
        );
        assert_eq!(unauthenticated(&dict), vec!["connect tcp/192.0.2.1:7447"]);
        let both = config(
            r#"{listen: {endpoints: ["tcp/0.0.0.0:7447"]}, connect: {endpoints: ["tcp/192.0.2.1:7447"]},
                transport: {auth: {usrpwd: {user: "gw", password: "secret", dictionary_file: "users.txt"}}}}"#,
        );
        assert!(unauthenticated(&both).is_empty());
        // Scouting joins whoever answers on the network.
        let scouting = config(
            r#"{listen: {endpoints: ["tcp/127.0.0.1:0"]}, scouting: {multicast: {enabled: true}}}"#,
        );
        assert_eq!(unauthenticated(&scouting), vec!["multicast scouting"]);
    }

    /// The configurations docs/security.md shows ("Locking it down") are
    /// ones zenoh 1.10 reads, and each authenticates what it claims to.
    #[test]
    fn the_security_docs_zenoh_examples_are_valid_configurations() {
        let doc = include_str!("../../../docs/security.md");
        let start = doc.find("### Locking it down").expect("the section");
        let section = &doc[start..];
        let end = section[4..].find("\n### ").map_or(section.len(), |e| e + 4);
        let blocks: Vec<&str> = section[..end]
            .split("```json5\n")
            .skip(1)
            .filter_map(|b| b.split("```").next())
            .collect();
        assert_eq!(blocks.len(), 3, "{blocks:?}");
        let configs: Vec<zenoh::Config> = blocks
            .iter()
            .map(|b| zenoh::Config::from_json5(b).unwrap_or_else(|e| panic!("{e}: {b}")))
            .collect();
        assert!(unauthenticated(&configs[0]).is_empty());
        let usrpwd = auth(&configs[1]);
        assert!(usrpwd.usrpwd_accept && usrpwd.usrpwd_present);
        assert_eq!(
            get(&configs[2], "access_control/enabled"),
            Value::Bool(true)
        );
        assert_eq!(
            get(&configs[2], "access_control/default_permission"),
            Value::String("deny".into())
        );
    }
}
