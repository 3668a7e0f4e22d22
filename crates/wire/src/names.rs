//! ROS 2 names (design.ros2.org/articles/topic_and_service_names.html and
//! static_remapping.html; `docs/protocol.md`, "Names"): validation,
//! expansion and remapping, as pure functions. Used for connections that
//! declared a node, and for everyone under `--names strict`; other names
//! stay opaque exact strings, as the base protocol (`docs/protocol.md`)
//! allows.
//!
//! Rules, on the expanded (fully qualified) name:
//! - tokens separated by `/`, each of ASCII letters, digits and `_`, not
//!   starting with a digit;
//! - no empty token (`//`), no trailing `/`, no `__` anywhere;
//! - `~` only as a leading `~/` (before expansion);
//! - at most [`MAX_NAME_CHARS`] characters after expansion.
//!
//! Expansion, for a node `name` in namespace `ns`:
//! - `/a/b` (absolute) stays;
//! - `a/b` (relative) becomes `<ns>/a/b`;
//! - `~/a` (private) becomes `<ns>/<name>/a`.
//!
//! Remapping (`from:=to`, as `--ros-args -r`) matches on expanded names:
//! both sides are expanded with the node's namespace and name, and the first
//! rule whose `from` equals the expanded name replaces it with its `to`.
//! `__ns:=/x` replaces the node's namespace and `__node:=x` its name before
//! anything is expanded. A name with a token starting with `_` is hidden.

use std::fmt;

/// Longest fully qualified name (the DDS topic name limit).
pub const MAX_NAME_CHARS: usize = 256;

/// Why a name, node name, namespace or remap rule was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NameError {
    Empty,
    /// A character other than letters, digits, `_`, `/` and a leading `~`.
    BadChar(char),
    /// A token starts with a digit.
    DigitFirst,
    /// `//` (an empty token).
    EmptyToken,
    /// A trailing `/`.
    TrailingSlash,
    /// `__` somewhere.
    DoubleUnderscore,
    /// `~` not followed by `/`, or not first.
    BadTilde,
    /// Longer than [`MAX_NAME_CHARS`] after expansion.
    TooLong(usize),
    /// A node name holding `/` (it is one token).
    NotOneToken,
    /// A namespace that does not start with `/`.
    RelativeNamespace,
    /// A remap rule without `:=`.
    NotARule,
}

impl fmt::Display for NameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NameError::Empty => f.write_str("the name is empty"),
            NameError::BadChar(c) => write!(
                f,
                "{c:?} is not allowed (tokens hold letters, digits and '_')"
            ),
            NameError::DigitFirst => f.write_str("a token starts with a digit"),
            NameError::EmptyToken => f.write_str("'//' (an empty token)"),
            NameError::TrailingSlash => f.write_str("a trailing '/'"),
            NameError::DoubleUnderscore => f.write_str("'__' is not allowed"),
            NameError::BadTilde => f.write_str("'~' is only allowed as a leading '~/'"),
            NameError::TooLong(n) => write!(
                f,
                "{n} characters after expansion (at most {MAX_NAME_CHARS})"
            ),
            NameError::NotOneToken => f.write_str("a node name is one token (no '/')"),
            NameError::RelativeNamespace => f.write_str("a namespace must start with '/'"),
            NameError::NotARule => f.write_str("a remap rule is 'from:=to'"),
        }
    }
}

impl std::error::Error for NameError {}

/// Checks one token.
fn token(t: &str) -> Result<(), NameError> {
    let mut chars = t.chars();
    match chars.next() {
        None => return Err(NameError::EmptyToken),
        Some(c) if c.is_ascii_digit() => return Err(NameError::DigitFirst),
        _ => {}
    }
    if let Some(c) = t
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_'))
    {
        return Err(NameError::BadChar(c));
    }
    Ok(())
}

/// Checks a fully qualified name (starts with `/`).
fn fully_qualified(name: &str) -> Result<(), NameError> {
    let n = name.chars().count();
    if n > MAX_NAME_CHARS {
        return Err(NameError::TooLong(n));
    }
    if name == "/" {
        return Err(NameError::Empty);
    }
    if name.ends_with('/') {
        return Err(NameError::TrailingSlash);
    }
    if name.contains("__") {
        return Err(NameError::DoubleUnderscore);
    }
    name.split('/').skip(1).try_for_each(token)
}

/// A node's identity: its name (one token) and namespace (absolute).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NodeName {
    namespace: String,
    name: String,
}

impl NodeName {
    /// Validates `name` (one token) and `namespace` (`/` or an absolute
    /// name; `""` means `/`, and a missing leading `/` is refused).
    pub fn new(name: &str, namespace: &str) -> Result<NodeName, NameError> {
        if name.is_empty() {
            return Err(NameError::Empty);
        }
        if name.contains('/') {
            return Err(NameError::NotOneToken);
        }
        if name.contains("__") {
            return Err(NameError::DoubleUnderscore);
        }
        token(name)?;
        let namespace = match namespace {
            "" | "/" => "/".to_string(),
            ns if !ns.starts_with('/') => return Err(NameError::RelativeNamespace),
            ns => {
                fully_qualified(ns)?;
                ns.to_string()
            }
        };
        let node = NodeName {
            namespace,
            name: name.to_string(),
        };
        fully_qualified(&node.full_name())?;
        Ok(node)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// `<namespace>/<name>`.
    pub fn full_name(&self) -> String {
        join(&self.namespace, &self.name)
    }

    /// Expands `name` (absolute, relative or private) and checks the result.
    pub fn expand(&self, name: &str) -> Result<String, NameError> {
        if name.is_empty() {
            return Err(NameError::Empty);
        }
        let expanded = if let Some(rest) = name.strip_prefix('~') {
            let rest = rest.strip_prefix('/').ok_or(NameError::BadTilde)?;
            if rest.is_empty() {
                return Err(NameError::TrailingSlash);
            }
            join(&self.full_name(), rest)
        } else if name.starts_with('/') {
            name.to_string()
        } else {
            join(&self.namespace, name)
        };
        if expanded.contains('~') {
            return Err(NameError::BadTilde);
        }
        fully_qualified(&expanded)?;
        Ok(expanded)
    }
}

fn join(ns: &str, rest: &str) -> String {
    if ns == "/" {
        format!("/{rest}")
    } else {
        format!("{ns}/{rest}")
    }
}

/// One `from:=to` rule, as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Remap {
    from: String,
    to: String,
}

impl Remap {
    /// Parses `from:=to`.
    pub fn parse(rule: &str) -> Result<Remap, NameError> {
        let (from, to) = rule.split_once(":=").ok_or(NameError::NotARule)?;
        if from.is_empty() || to.is_empty() {
            return Err(NameError::NotARule);
        }
        Ok(Remap {
            from: from.to_string(),
            to: to.to_string(),
        })
    }

    pub fn from(&self) -> &str {
        &self.from
    }

    pub fn to(&self) -> &str {
        &self.to
    }
}

/// A node with its remap rules: resolves every name it uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolver {
    node: NodeName,
    /// Name rules, both sides expanded.
    rules: Vec<(String, String)>,
}

impl Resolver {
    /// The node `name` in `namespace` with `remaps` applied: `__ns` and
    /// `__node` rules change the node first, then every other rule is
    /// expanded with the resulting node. Any invalid part refuses the whole.
    pub fn new(name: &str, namespace: &str, remaps: &[Remap]) -> Result<Resolver, NameError> {
        let (mut name, mut namespace) = (name.to_string(), namespace.to_string());
        for r in remaps {
            match r.from.as_str() {
                "__ns" => namespace = r.to.clone(),
                "__node" | "__name" => name = r.to.clone(),
                _ => {}
            }
        }
        let node = NodeName::new(&name, &namespace)?;
        let rules = remaps
            .iter()
            .filter(|r| !matches!(r.from.as_str(), "__ns" | "__node" | "__name"))
            .map(|r| Ok((node.expand(&r.from)?, node.expand(&r.to)?)))
            .collect::<Result<Vec<_>, NameError>>()?;
        Ok(Resolver { node, rules })
    }

    pub fn node(&self) -> &NodeName {
        &self.node
    }

    /// Bytes held by the names and rules (for memory accounting).
    pub fn bytes(&self) -> usize {
        self.node.name.len()
            + self.node.namespace.len()
            + self
                .rules
                .iter()
                .map(|(a, b)| a.len() + b.len() + 48)
                .sum::<usize>()
    }

    /// The remap rules as `from:=to`, both sides expanded.
    pub fn rules(&self) -> impl Iterator<Item = (&str, &str)> {
        self.rules.iter().map(|(a, b)| (a.as_str(), b.as_str()))
    }

    /// Expands `name`, then applies the first rule that matches it.
    pub fn resolve(&self, name: &str) -> Result<String, NameError> {
        let expanded = self.node.expand(name)?;
        Ok(self
            .rules
            .iter()
            .find(|(from, _)| *from == expanded)
            .map_or(expanded, |(_, to)| to.clone()))
    }
}

/// Checks a name that is used as written (absolute), as `--names strict`
/// does for connections without a node.
pub fn check_absolute(name: &str) -> Result<(), NameError> {
    if !name.starts_with('/') {
        return Err(if name.is_empty() {
            NameError::Empty
        } else {
            NameError::RelativeNamespace
        });
    }
    fully_qualified(name)
}

/// Whether a fully qualified name is hidden: one of its tokens starts with
/// `_` (`ros2 topic list` shows them only with `--include-hidden-topics`).
pub fn is_hidden(name: &str) -> bool {
    name.split('/').any(|t| t.starts_with('_'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, ns: &str) -> NodeName {
        NodeName::new(name, ns).expect("valid node")
    }

    #[test]
    fn relative_absolute_and_private_names_expand_as_in_ros2() {
        let n = node("my_node", "/my_ns");
        assert_eq!(
            n.expand("camera/image_raw").as_deref(),
            Ok("/my_ns/camera/image_raw")
        );
        assert_eq!(
            n.expand("/camera/image_raw").as_deref(),
            Ok("/camera/image_raw")
        );
        assert_eq!(
            n.expand("~/image_raw").as_deref(),
            Ok("/my_ns/my_node/image_raw")
        );
        assert_eq!(n.full_name(), "/my_ns/my_node");
        let root = node("talker", "/");
        assert_eq!(root.expand("chatter").as_deref(), Ok("/chatter"));
        assert_eq!(root.expand("~/x").as_deref(), Ok("/talker/x"));
        assert_eq!(node("a", "").full_name(), "/a");
    }

    #[test]
    fn invalid_names_say_why() {
        let n = node("n", "/ns");
        for (name, err) in [
            ("", NameError::Empty),
            ("~foo", NameError::BadTilde),
            ("a/~/b", NameError::BadTilde),
            ("~", NameError::BadTilde),
            ("a//b", NameError::EmptyToken),
            ("a/", NameError::TrailingSlash),
            ("foo__bar", NameError::DoubleUnderscore),
            ("1abc", NameError::DigitFirst),
            ("a/9b", NameError::DigitFirst),
            ("a-b", NameError::BadChar('-')),
            ("a b", NameError::BadChar(' ')),
            ("é", NameError::BadChar('é')),
            ("/", NameError::Empty),
        ] {
            assert_eq!(n.expand(name), Err(err.clone()), "{name:?}");
            assert!(!err.to_string().is_empty());
        }
        let long = "a".repeat(MAX_NAME_CHARS);
        assert_eq!(
            n.expand(&long),
            Err(NameError::TooLong(MAX_NAME_CHARS + 4)),
            "the namespace counts"
        );
        assert!(n.expand(&"a".repeat(MAX_NAME_CHARS - 4)).is_ok());
        assert!(n.expand("_hidden/ok_9").is_ok());
    }

    #[test]
    fn node_names_and_namespaces_are_checked() {
        assert_eq!(NodeName::new("a/b", "/"), Err(NameError::NotOneToken));
        assert_eq!(NodeName::new("", "/"), Err(NameError::Empty));
        assert_eq!(NodeName::new("2x", "/"), Err(NameError::DigitFirst));
        assert_eq!(NodeName::new("a__b", "/"), Err(NameError::DoubleUnderscore));
        assert_eq!(NodeName::new("a", "ns"), Err(NameError::RelativeNamespace));
        assert_eq!(NodeName::new("a", "/ns/"), Err(NameError::TrailingSlash));
        assert_eq!(
            node("cam", "/robot_1/sensors").full_name(),
            "/robot_1/sensors/cam"
        );
    }

    #[test]
    fn remaps_match_on_expanded_names() {
        let rules = |rs: &[&str]| -> Vec<Remap> {
            rs.iter().map(|r| Remap::parse(r).expect("rule")).collect()
        };
        // A relative name remapped to an absolute one: `scan:=/lidar_front/scan`
        // in /robot_1.
        let r = Resolver::new("nav", "/robot_1", &rules(&["scan:=/lidar_front/scan"])).expect("ok");
        assert_eq!(r.resolve("scan").as_deref(), Ok("/lidar_front/scan"));
        assert_eq!(
            r.resolve("/robot_1/scan").as_deref(),
            Ok("/lidar_front/scan")
        );
        assert_eq!(
            r.resolve("/scan").as_deref(),
            Ok("/scan"),
            "no match: /scan"
        );
        // Written fully qualified, the rule matches the same name.
        let r = Resolver::new("nav", "/robot_1", &rules(&["/robot_1/scan:=front"])).expect("ok");
        assert_eq!(r.resolve("scan").as_deref(), Ok("/robot_1/front"));
        // Private names remap too; the first matching rule wins.
        let r = Resolver::new("n", "/a", &rules(&["~/x:=/y", "~/x:=/z"])).expect("ok");
        assert_eq!(r.resolve("~/x").as_deref(), Ok("/y"));
        // `__ns` and `__node` change the node before anything is expanded.
        let r = Resolver::new(
            "n",
            "/a",
            &rules(&["__ns:=/robot_2", "__node:=cam", "x:=y"]),
        )
        .expect("ok");
        assert_eq!(r.node().full_name(), "/robot_2/cam");
        assert_eq!(r.resolve("x").as_deref(), Ok("/robot_2/y"));
        assert_eq!(r.resolve("~/i").as_deref(), Ok("/robot_2/cam/i"));
        // An invalid rule refuses the node.
        assert_eq!(Remap::parse("x"), Err(NameError::NotARule));
        assert_eq!(
            Resolver::new("n", "/", &rules(&["a:=b//c"])),
            Err(NameError::EmptyToken)
        );
        assert_eq!(
            Resolver::new("n", "/", &rules(&["__ns:=rel"])),
            Err(NameError::RelativeNamespace)
        );
    }

    #[test]
    fn hidden_names_and_absolute_checks() {
        assert!(is_hidden("/foo/_debug"));
        assert!(is_hidden("/_private/x"));
        assert!(!is_hidden("/foo/debug_"));
        assert_eq!(check_absolute("/a/b"), Ok(()));
        assert_eq!(check_absolute("a/b"), Err(NameError::RelativeNamespace));
        assert_eq!(check_absolute("/a b"), Err(NameError::BadChar(' ')));
    }
}
