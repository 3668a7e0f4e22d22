//! A bag's `metadata.yaml`: written as rosbag2 Jazzy writes it (format
//! version 9: rosbag2_storage's `yaml.hpp`), read back for `bag info` and
//! `bag play` with yaml-rust2 (already the gateway's `--params` parser, so
//! no new YAML crate). Writing is by hand: every string goes through
//! [`quote`], so a topic or type name cannot break the document.
//!
//! rosgate's own numbers go in `custom_data` (rosbag2's free-form
//! string-to-string map, which `ros2 bag info` and rosbags ignore):
//! `rosgate.dropped` (messages the gateway dropped on this recorder's
//! connection), `rosgate.unreadable` (frames that were not `cbor-raw`
//! publishes) and `rosgate.json_topics` (topics recorded as JSON).

use yaml_rust2::{Yaml, YamlLoader};

/// rosbag2's metadata version in Jazzy.
pub const VERSION: i64 = 9;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Topic {
    pub name: String,
    pub ty: String,
    /// `cdr`, or `json` for a topic whose type the gateway did not know.
    pub format: String,
    /// Offered transient local (a latched publisher).
    pub latched: bool,
    pub count: u64,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct File {
    pub path: String,
    pub start_ns: u64,
    pub duration_ns: u64,
    pub count: u64,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Metadata {
    pub start_ns: u64,
    pub duration_ns: u64,
    pub count: u64,
    pub topics: Vec<Topic>,
    pub files: Vec<File>,
    pub custom: Vec<(String, String)>,
}

/// `s` as a YAML double-quoted scalar.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A QoS profile list as rosbag2 9 writes it (durations 0: the
/// default), each line indented by `indent` spaces: in `metadata.yaml`
/// and, unindented, in each MCAP channel's `offered_qos_profiles` (where
/// rosbags reads it too, every key required).
pub fn qos(latched: bool, indent: usize) -> String {
    let dur = if latched {
        "transient_local"
    } else {
        "volatile"
    };
    let body = format!(
        "- history: keep_last\n  depth: 1\n  reliability: reliable\n  durability: {dur}\n  deadline:\n    sec: 0\n    nsec: 0\n  lifespan:\n    sec: 0\n    nsec: 0\n  liveliness: automatic\n  liveliness_lease_duration:\n    sec: 0\n    nsec: 0\n  avoid_ros_namespace_conventions: false\n"
    );
    let pad = " ".repeat(indent);
    body.lines().map(|l| format!("{pad}{l}\n")).collect()
}

impl Metadata {
    pub fn to_yaml(&self) -> String {
        let mut s = String::from("rosbag2_bagfile_information:\n");
        s.push_str(&format!(
            "  version: {VERSION}\n  storage_identifier: mcap\n"
        ));
        s.push_str(&format!(
            "  duration:\n    nanoseconds: {}\n  starting_time:\n    nanoseconds_since_epoch: {}\n  message_count: {}\n",
            self.duration_ns, self.start_ns, self.count
        ));
        s.push_str("  topics_with_message_count:\n");
        for t in &self.topics {
            s.push_str(&format!(
                "    - topic_metadata:\n        name: {}\n        type: {}\n        serialization_format: {}\n        offered_qos_profiles:\n{}        type_description_hash: \"\"\n      message_count: {}\n",
                quote(&t.name),
                quote(&t.ty),
                quote(&t.format),
                qos(t.latched, 8),
                t.count
            ));
        }
        s.push_str(
            "  compression_format: \"\"\n  compression_mode: \"\"\n  relative_file_paths:\n",
        );
        for f in &self.files {
            s.push_str(&format!("    - {}\n", quote(&f.path)));
        }
        s.push_str("  files:\n");
        for f in &self.files {
            s.push_str(&format!(
                "    - path: {}\n      starting_time:\n        nanoseconds_since_epoch: {}\n      duration:\n        nanoseconds: {}\n      message_count: {}\n",
                quote(&f.path),
                f.start_ns,
                f.duration_ns,
                f.count
            ));
        }
        if self.custom.is_empty() {
            s.push_str("  custom_data: ~\n");
        } else {
            s.push_str("  custom_data:\n");
            for (k, v) in &self.custom {
                s.push_str(&format!("    {}: {}\n", quote(k), quote(v)));
            }
        }
        s.push_str("  ros_distro: jazzy\n");
        s
    }

    /// Reads a `metadata.yaml` (rosbag2 versions 4-9: the fields read here
    /// have not changed since).
    pub fn parse(text: &str) -> Result<Metadata, String> {
        let docs = YamlLoader::load_from_str(text).map_err(|e| format!("not YAML: {e}"))?;
        let root = docs
            .first()
            .map(|d| &d["rosbag2_bagfile_information"])
            .filter(|d| !d.is_badvalue())
            .ok_or("no rosbag2_bagfile_information")?;
        let u = |y: &Yaml| y.as_i64().and_then(|n| u64::try_from(n).ok()).unwrap_or(0);
        let mut m = Metadata {
            start_ns: u(&root["starting_time"]["nanoseconds_since_epoch"]),
            duration_ns: u(&root["duration"]["nanoseconds"]),
            count: u(&root["message_count"]),
            ..Metadata::default()
        };
        let storage = root["storage_identifier"].as_str().unwrap_or("");
        if storage != "mcap" {
            return Err(format!(
                "storage {storage:?}: only mcap bags are read (sqlite3 is not)"
            ));
        }
        for t in root["topics_with_message_count"]
            .as_vec()
            .into_iter()
            .flatten()
        {
            let md = &t["topic_metadata"];
            let qos = &md["offered_qos_profiles"];
            // Version 9 writes a list; earlier ones a YAML string of it.
            let latched = match qos {
                Yaml::Array(v) => v.iter().any(is_transient_local),
                Yaml::String(s) => YamlLoader::load_from_str(s)
                    .ok()
                    .and_then(|d| d.into_iter().next())
                    .and_then(|d| d.into_vec())
                    .is_some_and(|v| v.iter().any(is_transient_local)),
                _ => false,
            };
            m.topics.push(Topic {
                name: md["name"].as_str().unwrap_or("").to_string(),
                ty: md["type"].as_str().unwrap_or("").to_string(),
                format: md["serialization_format"]
                    .as_str()
                    .unwrap_or("cdr")
                    .to_string(),
                latched,
                count: u(&t["message_count"]),
            });
        }
        for f in root["files"].as_vec().into_iter().flatten() {
            m.files.push(File {
                path: f["path"].as_str().unwrap_or("").to_string(),
                start_ns: u(&f["starting_time"]["nanoseconds_since_epoch"]),
                duration_ns: u(&f["duration"]["nanoseconds"]),
                count: u(&f["message_count"]),
            });
        }
        if m.files.is_empty() {
            for p in root["relative_file_paths"].as_vec().into_iter().flatten() {
                if let Some(p) = p.as_str() {
                    m.files.push(File {
                        path: p.to_string(),
                        ..File::default()
                    });
                }
            }
        }
        if let Some(h) = root["custom_data"].as_hash() {
            for (k, v) in h {
                if let (Some(k), Some(v)) = (k.as_str(), v.as_str()) {
                    m.custom.push((k.to_string(), v.to_string()));
                }
            }
        }
        Ok(m)
    }
}

/// A profile's durability: `transient_local` (version 9) or 1 (rmw's
/// `RMW_QOS_POLICY_DURABILITY_TRANSIENT_LOCAL`, earlier versions).
fn is_transient_local(p: &Yaml) -> bool {
    match &p["durability"] {
        Yaml::String(s) => s == "transient_local",
        Yaml::Integer(n) => *n == 1,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let m = Metadata {
            start_ns: 1_700_000_000_000_000_000,
            duration_ns: 5,
            count: 3,
            topics: vec![
                Topic {
                    name: "/a \"b\"".into(),
                    ty: "std_msgs/msg/String".into(),
                    format: "cdr".into(),
                    latched: true,
                    count: 2,
                },
                Topic {
                    name: "/j".into(),
                    ty: "x/msg/Y".into(),
                    format: "json".into(),
                    latched: false,
                    count: 1,
                },
            ],
            files: vec![File {
                path: "b_0.mcap".into(),
                start_ns: 1,
                duration_ns: 2,
                count: 3,
            }],
            custom: vec![("rosgate.dropped".into(), "0".into())],
        };
        assert_eq!(Metadata::parse(&m.to_yaml()).unwrap(), m);
    }

    #[test]
    fn refuses_other_storage() {
        let y = "rosbag2_bagfile_information:\n  storage_identifier: sqlite3\n";
        assert!(Metadata::parse(y).unwrap_err().contains("sqlite3"));
        assert!(Metadata::parse("x: 1").is_err());
    }
}
