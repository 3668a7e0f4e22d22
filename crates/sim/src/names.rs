//! The model's ROS 2 names (`docs/protocol.md`, "Names"),
//! written from the documented rules rather than from
//! `rosgate_wire::names`, so the two can disagree: which node names,
//! namespaces, remap rules and names are valid, how a name a node uses
//! expands (relative, private `~/`, absolute) and which remap rule then
//! applies, and the bytes a declared node counts for in the memory ledger.

/// Longest fully qualified name, in characters.
const MAX_CHARS: usize = 256;

/// Bytes counted per declared node beyond its names (`docs/limits.md`).
const NODE_BYTES: usize = 192;

/// Bytes counted per remap rule beyond its two expanded sides.
const RULE_BYTES: usize = 48;

/// One token: letters, digits and `_`, not starting with a digit.
fn token(t: &str) -> bool {
    match t.chars().next() {
        None => false,
        Some(c) if c.is_ascii_digit() => false,
        Some(_) => t.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
    }
}

/// A fully qualified name: `/` then tokens separated by single `/`, no
/// `__`, no trailing `/`, at most [`MAX_CHARS`] characters.
fn qualified(n: &str) -> bool {
    let Some(rest) = n.strip_prefix('/') else {
        return false;
    };
    n.chars().count() <= MAX_CHARS && !n.contains("__") && rest.split('/').all(token)
}

/// `ns` and `rest` joined by one `/`.
fn join(ns: &str, rest: &str) -> String {
    if ns == "/" {
        format!("/{rest}")
    } else {
        format!("{ns}/{rest}")
    }
}

/// A declared node as the model knows it.
#[derive(Debug, Clone)]
pub(crate) struct NodeModel {
    /// Unique per run: the model's identity of this declaration.
    pub uid: u64,
    pub name: String,
    pub namespace: String,
    pub full: String,
    /// Remap rules, both sides expanded, in order.
    pub rules: Vec<(String, String)>,
}

impl NodeModel {
    /// The node `name` in `namespace` (`None`: the root) with the remap
    /// rules `remap` as written; `None` when any part is invalid (the
    /// whole declaration is refused).
    pub fn new(uid: u64, name: &str, namespace: Option<&str>, remap: &[&str]) -> Option<NodeModel> {
        let mut rules = Vec::new();
        for r in remap {
            let (from, to) = r.split_once(":=")?;
            if from.is_empty() || to.is_empty() {
                return None;
            }
            rules.push((from, to));
        }
        let (mut name, mut ns) = (name, namespace.unwrap_or("/"));
        for &(from, to) in &rules {
            match from {
                "__ns" => ns = to,
                "__node" | "__name" => name = to,
                _ => {}
            }
        }
        if !token(name) || name.contains("__") {
            return None;
        }
        let namespace = match ns {
            "" | "/" => "/".to_string(),
            ns if qualified(ns) => ns.to_string(),
            _ => return None,
        };
        let full = join(&namespace, name);
        if !qualified(&full) {
            return None;
        }
        let mut node = NodeModel {
            uid,
            name: name.to_string(),
            namespace,
            full,
            rules: Vec::new(),
        };
        let mut expanded = Vec::new();
        for (from, to) in rules {
            if matches!(from, "__ns" | "__node" | "__name") {
                continue;
            }
            expanded.push((node.expand(from)?, node.expand(to)?));
        }
        node.rules = expanded;
        Some(node)
    }

    /// What a connection with no node resolves names as (under `--names
    /// strict`, or once it destroyed every node it declared): node
    /// `rosgate_<transport>_<n>` in the root namespace, no rules.
    pub fn connection(transport: &str, gen: u32) -> NodeModel {
        let name = format!("rosgate_{transport}_{gen}");
        NodeModel {
            uid: 0,
            full: format!("/{name}"),
            name,
            namespace: "/".into(),
            rules: Vec::new(),
        }
    }

    /// `raw` expanded for this node, if valid.
    pub fn expand(&self, raw: &str) -> Option<String> {
        let expanded = if let Some(rest) = raw.strip_prefix('~') {
            let rest = rest.strip_prefix('/')?;
            join(&self.full, rest)
        } else if raw.starts_with('/') {
            raw.to_string()
        } else {
            join(&self.namespace, raw)
        };
        (!expanded.contains('~') && qualified(&expanded)).then_some(expanded)
    }

    /// `raw` expanded, then the first rule matching it applied.
    pub fn resolve(&self, raw: &str) -> Option<String> {
        let name = self.expand(raw)?;
        Some(
            self.rules
                .iter()
                .find(|(from, _)| *from == name)
                .map_or(name, |(_, to)| to.clone()),
        )
    }

    /// Bytes the node counts for: its full name twice, its name and
    /// namespace, each rule's sides and overhead, and the node's overhead.
    pub fn bytes(&self) -> usize {
        NODE_BYTES
            + 2 * self.full.len()
            + self.name.len()
            + self.namespace.len()
            + self
                .rules
                .iter()
                .map(|(a, b)| a.len() + b.len() + RULE_BYTES)
                .sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expansion_and_remaps() {
        let n =
            NodeModel::new(1, "talker", Some("/r1"), &["chatter:=/talk", "~/x:=y"]).expect("valid");
        assert_eq!(n.full, "/r1/talker");
        assert_eq!(n.resolve("chatter").as_deref(), Some("/talk"));
        assert_eq!(n.resolve("/r1/chatter").as_deref(), Some("/talk"));
        assert_eq!(n.resolve("/chatter").as_deref(), Some("/chatter"));
        assert_eq!(n.resolve("~/x").as_deref(), Some("/r1/y"));
        assert_eq!(n.resolve("~/cmd").as_deref(), Some("/r1/talker/cmd"));
        for bad in [
            "~bad", "a//b", "9lives", "a/", "a__b", "a-b", "", "~/", "a/~/b",
        ] {
            assert_eq!(n.resolve(bad), None, "{bad}");
        }
        let r =
            NodeModel::new(2, "talker", Some("/r1"), &["__ns:=/r2", "__node:=cam"]).expect("valid");
        assert_eq!(r.full, "/r2/cam");
        assert!(NodeModel::new(3, "1bad", None, &[]).is_none());
        assert!(NodeModel::new(3, "ok", Some("r1"), &[]).is_none());
        assert!(NodeModel::new(3, "ok", Some("/r1/"), &[]).is_none());
        assert!(NodeModel::new(3, "ok", None, &["bad"]).is_none());
        assert!(NodeModel::new(3, "ok", None, &["a:=1x"]).is_none());
        assert_eq!(
            NodeModel::new(3, "ok", Some(""), &[]).map(|n| n.full),
            Some("/ok".into())
        );
    }
}
