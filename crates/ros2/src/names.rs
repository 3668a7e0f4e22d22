//! The names a ROS 2 graph announces (rmw_zenoh's liveliness tokens),
//! checked by the rules rmw itself applies before a node may use them
//! (rmw's `validate_full_topic_name.c`, `validate_node_name.c` and
//! `validate_namespace.c`): a real node never announces a name that fails
//! them, so one that does comes from a peer posing as a node (`/..`,
//! `/sp ace`, a zero-width character meant to look like another name) and
//! is neither listed nor bridged.
//!
//! The rules are the strict client rules of `rosgate_wire::names` but for
//! one: rmw accepts `__` inside a name (rcl reserves it for arguments, it
//! does not refuse it in names it meets), so a real node using one is not
//! hidden.
//!
//! Pure functions, no allocation.

use crate::rmw::{self, Token};

/// Characters. The longest node name, namespace or topic name rmw accepts
/// (`RMW_NODE_NAME_MAX_NAME_LENGTH`, `RMW_TOPIC_MAX_NAME_LENGTH`).
pub const MAX_ROS_NAME_CHARS: usize = 255;

/// A fully qualified topic or service name: `/` then `/`-separated tokens
/// of ASCII letters, digits and `_`, none empty or starting with a digit.
pub fn valid_topic_name(name: &str) -> bool {
    name.len() <= MAX_ROS_NAME_CHARS && rmw::is_fq_topic_name(name)
}

/// A node name: one token of ASCII letters, digits and `_`, not starting
/// with a digit.
pub fn valid_node_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_ROS_NAME_CHARS
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// A namespace: `/`, or a name as [`valid_topic_name`] wants it.
pub fn valid_namespace(ns: &str) -> bool {
    ns == "/" || valid_topic_name(ns)
}

/// Whether every name a token carries passes: its node's name and
/// namespace, and its endpoint's topic or service name.
pub fn valid_token_names(tok: &Token) -> bool {
    valid_node_name(&tok.node)
        && valid_namespace(&tok.namespace)
        && tok
            .endpoint
            .as_ref()
            .is_none_or(|ep| valid_topic_name(&ep.name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_real_nodes_use_pass() {
        for n in [
            "/chatter",
            "/robot1/cmd_vel",
            "/fibonacci/_action/send_goal",
            "/_ros2cli_daemon_0/get_parameters",
            "/a__b",
        ] {
            assert!(valid_topic_name(n), "{n}");
        }
        for n in ["talker", "_hidden", "n0de", "a__b"] {
            assert!(valid_node_name(n), "{n}");
        }
        for ns in ["/", "/robot1", "/a/b"] {
            assert!(valid_namespace(ns), "{ns}");
        }
    }

    #[test]
    fn names_no_real_node_can_announce_fail() {
        for n in [
            "/..",
            "/sp ace",
            "/chat\u{200b}ter",
            "/caf\u{e9}",
            "chatter",
            "/",
            "//a",
            "/a/",
            "/1a",
            "/a.b",
            "/a*",
            "",
        ] {
            assert!(!valid_topic_name(n), "{n:?}");
        }
        assert!(!valid_topic_name(&format!(
            "/{}",
            "a".repeat(MAX_ROS_NAME_CHARS)
        )));
        for n in ["", "a/b", "1a", "sp ace", "t\u{200b}", ".."] {
            assert!(!valid_node_name(n), "{n:?}");
        }
        for ns in ["", "robot", "/robot/", "/..", "//"] {
            assert!(!valid_namespace(ns), "{ns:?}");
        }
    }

    #[test]
    fn a_token_passes_only_when_all_its_names_do() {
        let ok = Token::node(0, "abc", 1, "/", "talker");
        assert!(valid_token_names(&ok));
        for (ns, node) in [("/..", "talker"), ("/", "tal ker"), ("/", "t\u{200b}")] {
            assert!(!valid_token_names(&Token::node(0, "abc", 1, ns, node)));
        }
        let key = "@ros2_lv/0/abc/1/2/MP/%/%/talker/%sp ace/std_msgs::msg::dds_::String_/RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18/::,7:,:,:,,";
        if let Some(tok) = Token::parse(key) {
            assert!(!valid_token_names(&tok));
        }
    }
}
