//! `--qos-profile-overrides-path FILE`: rosbag2's QoS override file (a
//! YAML map from topic name to a profile: `history`, `depth`,
//! `reliability`, `durability`, `deadline`, `lifespan`, `liveliness`,
//! `liveliness_lease_duration`, `avoid_ros_namespace_conventions`; as
//! rosbag2's `qos.cpp` reads it, values by name or by rmw's enum number)
//! mapped onto the gateway's registration QoS (docs/protocol.md, "QoS":
//! `reliability`, `durability`, `depth` 1-1000). Sans-io: text in, a map
//! out.
//!
//! What the gateway has no equivalent for (deadline, lifespan,
//! liveliness and its lease, namespace conventions) is not applied; a
//! value other than the default is returned as a note to print.

use std::collections::BTreeMap;

use yaml_rust2::{Yaml, YamlLoader};

// The gateway's largest depth (docs/protocol.md, "QoS").
use rosgate_wire::qos::MAX_QOS_DEPTH;

/// One topic's profile as the gateway can state it; `None`: unstated.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Override {
    pub reliability: Option<&'static str>,
    pub durability: Option<&'static str>,
    /// Keep last N; `None` with keep all or unstated.
    pub depth: Option<u32>,
}

impl Override {
    /// The `qos` member of an `advertise` or `subscribe`.
    pub fn json(&self) -> String {
        let mut parts = Vec::new();
        if let Some(r) = self.reliability {
            parts.push(format!("\"reliability\":\"{r}\""));
        }
        if let Some(d) = self.durability {
            parts.push(format!("\"durability\":\"{d}\""));
        }
        if let Some(n) = self.depth {
            parts.push(format!("\"depth\":{n}"));
        }
        format!("{{{}}}", parts.join(","))
    }
}

/// Topic -> override, and notes on what was not applied.
pub type Overrides = (BTreeMap<String, Override>, Vec<String>);

fn name_or_number(
    y: &Yaml,
    what: &str,
    topic: &str,
    names: &[(&str, i64, Option<&'static str>)],
) -> Result<Option<&'static str>, String> {
    let hit = match y {
        Yaml::BadValue | Yaml::Null => return Ok(None),
        Yaml::String(s) => names.iter().find(|n| n.0 == s.as_str()),
        Yaml::Integer(i) => names.iter().find(|n| n.1 == *i),
        _ => None,
    };
    match hit {
        Some(n) => Ok(n.2),
        None => Err(format!(
            "{topic}: {what}: {y:?} is not one of {}",
            names.iter().map(|n| n.0).collect::<Vec<_>>().join(", ")
        )),
    }
}

fn is_zero_duration(y: &Yaml) -> bool {
    match y {
        Yaml::BadValue | Yaml::Null => true,
        Yaml::Hash(_) => {
            let z = |k: &str| matches!(&y[k], Yaml::BadValue | Yaml::Integer(0));
            z("sec") && z("nsec")
        }
        Yaml::Integer(0) => true,
        _ => false,
    }
}

/// Parses an override file (`max_topics` at most).
pub fn parse(text: &str, max_topics: usize) -> Result<Overrides, String> {
    let docs = YamlLoader::load_from_str(text).map_err(|e| format!("not YAML: {e}"))?;
    let mut out = BTreeMap::new();
    let mut notes = Vec::new();
    let Some(root) = docs.first() else {
        return Ok((out, notes));
    };
    let Some(map) = root.as_hash() else {
        return Err("not a map from topic names to QoS profiles".into());
    };
    if map.len() > max_topics {
        return Err(format!("{} topics: at most {max_topics}", map.len()));
    }
    for (k, p) in map {
        let Some(topic) = k.as_str() else {
            return Err(format!("{k:?}: not a topic name"));
        };
        let topic = super::super::args::absolute(topic);
        if p.as_hash().is_none() {
            return Err(format!("{topic}: not a QoS profile (a map)"));
        }
        let mut o = Override {
            // rmw's enums: rmw/types.h (RMW_QOS_POLICY_*).
            reliability: name_or_number(
                &p["reliability"],
                "reliability",
                &topic,
                &[
                    ("system_default", 0, None),
                    ("reliable", 1, Some("reliable")),
                    ("best_effort", 2, Some("best_effort")),
                ],
            )?,
            durability: name_or_number(
                &p["durability"],
                "durability",
                &topic,
                &[
                    ("system_default", 0, None),
                    ("transient_local", 1, Some("transient_local")),
                    ("volatile", 2, Some("volatile")),
                ],
            )?,
            depth: None,
        };
        let history = name_or_number(
            &p["history"],
            "history",
            &topic,
            &[
                ("system_default", 0, None),
                ("keep_last", 1, Some("keep_last")),
                ("keep_all", 2, Some("keep_all")),
            ],
        )?;
        let depth = match &p["depth"] {
            Yaml::BadValue | Yaml::Null => None,
            Yaml::Integer(n) if *n >= 0 => Some(*n),
            d => return Err(format!("{topic}: depth: {d:?} is not a number >= 0")),
        };
        if history != Some("keep_all") {
            match depth {
                // Depth 0 with keep last is rmw's "system default" depth.
                None | Some(0) => {}
                Some(n) if n > i64::from(MAX_QOS_DEPTH) => {
                    notes.push(format!(
                        "{topic}: depth {n} is more than the gateway keeps ({MAX_QOS_DEPTH}); {MAX_QOS_DEPTH} is used"
                    ));
                    o.depth = Some(MAX_QOS_DEPTH);
                }
                Some(n) => o.depth = u32::try_from(n).ok(),
            }
        }
        for k in ["deadline", "lifespan", "liveliness_lease_duration"] {
            if !is_zero_duration(&p[k]) {
                notes.push(format!(
                    "{topic}: {k} is not applied (the gateway has no equivalent)"
                ));
            }
        }
        if !matches!(
            &p["liveliness"],
            Yaml::BadValue | Yaml::Null | Yaml::Integer(0) | Yaml::Integer(1)
        ) && !matches!(
            p["liveliness"].as_str(),
            Some("system_default" | "automatic")
        ) {
            notes.push(format!(
                "{topic}: liveliness is not applied (the gateway has no equivalent)"
            ));
        }
        if p["avoid_ros_namespace_conventions"].as_bool() == Some(true) {
            notes.push(format!(
                "{topic}: avoid_ros_namespace_conventions is not applied"
            ));
        }
        out.insert(topic, o);
    }
    Ok((out, notes))
}

/// Reads and parses `path`.
pub fn load(path: &str, max_topics: usize) -> Result<Overrides, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    parse(&text, max_topics).map_err(|e| format!("{path}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rosbag2_file() {
        let y = "/chatter:\n  history: keep_last\n  depth: 5\n  reliability: best_effort\n  durability: transient_local\n  deadline:\n    sec: 0\n    nsec: 0\n  lifespan:\n    sec: 2\n    nsec: 0\n  liveliness: automatic\n  avoid_ros_namespace_conventions: false\nrel:\n  history: 2\n  depth: 9\n  reliability: 1\n  durability: 2\n";
        let (m, notes) = parse(y, 10).unwrap();
        assert_eq!(
            m["/chatter"],
            Override {
                reliability: Some("best_effort"),
                durability: Some("transient_local"),
                depth: Some(5)
            }
        );
        assert_eq!(
            m["/chatter"].json(),
            r#"{"reliability":"best_effort","durability":"transient_local","depth":5}"#
        );
        assert_eq!(
            m["/rel"],
            Override {
                reliability: Some("reliable"),
                durability: Some("volatile"),
                depth: None
            },
            "keep_all: no depth"
        );
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains("lifespan"));
        assert!(parse("/a:\n  reliability: sometimes\n", 10)
            .unwrap_err()
            .contains("reliability"));
        assert!(parse("- 1\n", 10).is_err());
        assert!(parse("/a: {}\n/b: {}\n", 1).is_err());
        assert_eq!(parse("", 1).unwrap().0.len(), 0);
    }
}
