//! Zenoh key expressions of the federation: where a topic's samples go,
//! and the liveliness tokens that say which gateway is up and which topics
//! it listens to.
//!
//! ```text
//! rosgate/<domain>/t/<ros name without its leading slash>   samples (ROS-valid names)
//! rosgate/<domain>/x/_<percent-encoded name>                samples (any other exact string)
//! rosgate/gw/<zenoh id>                                     a gateway is up
//! rosgate/i/<domain>/<zenoh id>/t/... or /x/...             that gateway has local subscribers
//! rosgate/<domain>/gt/<name>  (gx/_...)                      an action's goals (queryable)
//! rosgate/<domain>/ct/<name>  (cx/_...)                      an action's cancels (subscriber)
//! rosgate/p/<domain>/<zenoh id>/<s|a>_<type>/t/... or /x/... that gateway provides a service (s) or serves an action (a)
//! rosgate/g/<domain>/<zenoh id>                              that gateway's nodes and topics (JSON, put on change)
//! rosgate/m/<zenoh id>                                       that gateway's mail: calls to it, answers for it
//! ```
//!
//! Invariants: every key produced is a valid Zenoh key expression with no
//! wildcard (a topic name cannot become a pattern), and [`topic_of`] gives
//! back exactly the name [`topic_key`] was made from.

use rosgate_core::nodes::Domain;
use rosgate_core::registry::Provided;

/// The prefix of everything the federation puts into Zenoh.
pub const ROOT: &str = "rosgate";

/// Where samples of `topic` in `domain` are put.
pub fn topic_key(domain: Domain, topic: &str) -> String {
    format!("{ROOT}/{domain}/{}", tail(topic))
}

/// The liveliness token saying gateway `gw` has local subscribers of
/// `topic` in `domain`.
pub fn interest_key(domain: Domain, gw: &str, topic: &str) -> String {
    format!("{ROOT}/i/{domain}/{gw}/{}", tail(topic))
}

/// Where goals of `action` in `domain` are queried.
pub fn goal_key(domain: Domain, action: &str) -> String {
    format!("{ROOT}/{domain}/g{}", tail(action))
}

/// Where cancels of `action`'s goals in `domain` are put.
pub fn cancel_key(domain: Domain, action: &str) -> String {
    format!("{ROOT}/{domain}/c{}", tail(action))
}

/// The liveliness token saying gateway `gw` provides the service or
/// serves the action `name` (`kind`, of type `ty`) in `domain`.
pub fn provider_key(kind: Provided, domain: Domain, gw: &str, ty: &str, name: &str) -> String {
    let k = match kind {
        Provided::Service => 's',
        Provided::Action => 'a',
    };
    format!("{ROOT}/p/{domain}/{gw}/{k}_{}/{}", pct(ty), tail(name))
}

/// `(kind, domain, gateway, type, name)` of a provider token's key.
pub fn provider_of(key: &str) -> Option<(Provided, Domain, String, String, String)> {
    let rest = key.strip_prefix(ROOT)?.strip_prefix("/p/")?;
    let (domain, rest) = rest.split_once('/')?;
    let (gw, rest) = rest.split_once('/')?;
    let (ty, rest) = rest.split_once('/')?;
    let (kind, ty) = if let Some(t) = ty.strip_prefix("s_") {
        (Provided::Service, t)
    } else {
        (Provided::Action, ty.strip_prefix("a_")?)
    };
    let ty = unpct(ty)?;
    Some((
        kind,
        domain.parse().ok()?,
        gw.to_string(),
        ty,
        untail(rest)?,
    ))
}

/// Where gateway `gw` puts its graph of `domain` (nodes, topics).
pub fn graph_key(domain: Domain, gw: &str) -> String {
    format!("{ROOT}/g/{domain}/{gw}")
}

/// `(domain, gateway)` of a graph key.
pub fn graph_of(key: &str) -> Option<(Domain, &str)> {
    let rest = key.strip_prefix(ROOT)?.strip_prefix("/g/")?;
    let (domain, gw) = rest.split_once('/')?;
    Some((domain.parse().ok()?, gw))
}

/// What the graph subscriber listens to.
pub const GRAPHS_ALL: &str = "rosgate/g/**";

/// What a liveliness subscriber for provider tokens listens to.
pub const PROVIDERS_ALL: &str = "rosgate/p/**";

/// Where gateway `gw` takes its mail (calls of the services it provides,
/// answers to the calls it made: `mail.rs`).
pub fn mail_key(gw: &str) -> String {
    format!("{ROOT}/m/{gw}")
}

/// The liveliness token of a gateway that is up.
pub fn gateway_key(gw: &str) -> String {
    format!("{ROOT}/gw/{gw}")
}

/// What a liveliness subscriber for interest tokens listens to.
pub const INTEREST_ALL: &str = "rosgate/i/**";
/// What a liveliness subscriber for gateways listens to.
pub const GATEWAYS_ALL: &str = "rosgate/gw/*";

/// `(domain, topic)` of a sample key.
pub fn topic_of(key: &str) -> Option<(Domain, String)> {
    let rest = key.strip_prefix(ROOT)?.strip_prefix('/')?;
    let (domain, rest) = rest.split_once('/')?;
    Some((domain.parse().ok()?, untail(rest)?))
}

/// `(domain, gateway, topic)` of an interest token's key.
pub fn interest_of(key: &str) -> Option<(Domain, String, String)> {
    let rest = key.strip_prefix(ROOT)?.strip_prefix("/i/")?;
    let (domain, rest) = rest.split_once('/')?;
    let (gw, rest) = rest.split_once('/')?;
    Some((domain.parse().ok()?, gw.to_string(), untail(rest)?))
}

/// The gateway of a gateway token's key.
pub fn gateway_of(key: &str) -> Option<&str> {
    key.strip_prefix(ROOT)?.strip_prefix("/gw/")
}

/// Whether `id` is written as Zenoh writes a session's id (lowercase
/// hexadecimal of a 128-bit number, `ZenohId`'s `Display`): anything else
/// in a gateway's place is no gateway's (and could not collide with the
/// names the gateway uses itself, such as the ROS 2 graph's `ros2`).
pub fn is_zid(id: &str) -> bool {
    (1..=32).contains(&id.len()) && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// A ROS 2 name (`/a/b_1`) keeps its shape, so Zenoh tools show it
/// readably; any other exact string becomes one percent-encoded chunk.
fn tail(topic: &str) -> String {
    if is_plain(topic) {
        format!("t{topic}")
    } else {
        format!("x/_{}", pct(topic))
    }
}

/// Percent-encodes every byte but `[A-Za-z0-9_.-]`: one key chunk, never
/// a wildcard.
fn pct(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for &b in s.as_bytes() {
        if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn untail(rest: &str) -> Option<String> {
    if let Some(name) = rest.strip_prefix('t') {
        return is_plain(name).then(|| name.to_string());
    }
    unpct(rest.strip_prefix("x/_")?)
}

fn unpct(enc: &str) -> Option<String> {
    let mut bytes = Vec::with_capacity(enc.len());
    let mut it = enc.bytes();
    while let Some(b) = it.next() {
        if b == b'%' {
            let hi = (it.next()? as char).to_digit(16)?;
            let lo = (it.next()? as char).to_digit(16)?;
            bytes.push((hi * 16 + lo) as u8);
        } else if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.' {
            bytes.push(b);
        } else {
            return None;
        }
    }
    String::from_utf8(bytes).ok()
}

/// `/` then tokens of `[A-Za-z0-9_]` separated by single slashes.
fn is_plain(name: &str) -> bool {
    let Some(rest) = name.strip_prefix('/') else {
        return false;
    };
    !rest.is_empty()
        && rest
            .split('/')
            .all(|c| !c.is_empty() && c.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_zenoh_writes_as_a_session_id_is_a_gateway_id() {
        for id in ["7ea1", "0123456789abcdef0123456789abcdef", "a"] {
            assert!(is_zid(id), "{id}");
        }
        for id in [
            "",
            "ros2",
            "ABCDEF",
            "0123456789abcdef0123456789abcdef0",
            "ab/cd",
            "ab cd",
            "*",
        ] {
            assert!(!is_zid(id), "{id:?}");
        }
    }

    #[test]
    fn ros_names_stay_readable_and_round_trip() {
        assert_eq!(topic_key(0, "/chatter"), "rosgate/0/t/chatter");
        assert_eq!(topic_key(7, "/a/b_1"), "rosgate/7/t/a/b_1");
        assert_eq!(topic_of("rosgate/7/t/a/b_1"), Some((7, "/a/b_1".into())));
        assert_eq!(
            interest_key(3, "abc", "/x"),
            "rosgate/i/3/abc/t/x".to_string()
        );
        assert_eq!(
            interest_of("rosgate/i/3/abc/t/x"),
            Some((3, "abc".into(), "/x".into()))
        );
        assert_eq!(gateway_of(&gateway_key("z1")), Some("z1"));
        // Not a ROS name (a token starts with a digit), but a plain key.
        assert_eq!(topic_of(&topic_key(0, "/1x")), Some((0, "/1x".into())));
    }

    #[test]
    fn any_exact_string_becomes_one_wildcard_free_chunk() {
        for name in ["", "a", "/a//b", "/a/", "*", "/**/x", "$*", "é/ü", "a b?#%"] {
            let key = topic_key(0, name);
            let tail = key.strip_prefix("rosgate/0/").unwrap();
            assert!(tail.starts_with("x/_"), "{key}");
            assert!(!tail[2..].contains('/'), "{key}");
            for bad in ['*', '$', '?', '#'] {
                assert!(!key.contains(bad), "{key}");
            }
            assert_eq!(topic_of(&key), Some((0, name.to_string())), "{key}");
        }
    }

    #[test]
    fn services_actions_and_their_providers_round_trip() {
        assert_eq!(mail_key("ab12"), "rosgate/m/ab12");
        assert_eq!(topic_of(&mail_key("ab12")), None, "no topic's key");
        assert_eq!(goal_key(0, "/fib"), "rosgate/0/gt/fib");
        assert_eq!(cancel_key(0, "/fib"), "rosgate/0/ct/fib");
        let ty = "example_interfaces/srv/AddTwoInts";
        let k = provider_key(Provided::Service, 2, "gw", ty, "/add");
        assert_eq!(
            k,
            "rosgate/p/2/gw/s_example_interfaces%2Fsrv%2FAddTwoInts/t/add"
        );
        let want = (Provided::Service, 2, "gw".into(), ty.into(), "/add".into());
        assert_eq!(provider_of(&k), Some(want));
        let k = provider_key(Provided::Action, 0, "gw", "", "*");
        assert!(!k.contains('*'), "{k}");
        let want = (Provided::Action, 0, "gw".into(), String::new(), "*".into());
        assert_eq!(provider_of(&k), Some(want));
    }

    #[test]
    fn foreign_keys_are_refused() {
        for key in [
            "rosgate/0/t/a//b",
            "rosgate/0/t",
            "rosgate/x/t/a",
            "rosgate/0/x/_%zz",
            "rosgate/0/x/_%C3",
            "other/0/t/a",
            "rosgate/256/t/a",
        ] {
            assert_eq!(topic_of(key), None, "{key}");
        }
    }
}
