//! Every file the gateway reads at start-up (`--params`, `--auth-tokens`,
//! `--auth-roles`, `--tls-cert`, `--tls-key`, `--zenoh-config`) goes through
//! [`read`], which stops one byte past [`MAX_CONFIG_FILE_BYTES`]; YAML ones
//! then through [`yaml`], which measures what the document would expand to
//! before it is loaded. The CLI reads its `--ca-file` and its YAML
//! arguments through the same two. (`--interfaces` directories are bounded where they
//! are read, `rosgate_ros2::registry`: file count and size per file.)
//!
//! Why the YAML check: yaml-rust2's loader expands every alias by cloning
//! the anchored node, so a file of a few hundred bytes with nested anchors
//! ("billion laughs") asks for gigabytes. The check runs yaml-rust2's event
//! parser, which never expands anything, and counts the nodes and scalar
//! bytes each anchor stands for; an alias adds its anchor's whole count.
//! Only a document whose expansion fits is handed to the loader.
//!
//! Every refusal names the flag, the file and the limit.

use std::collections::HashMap;
use std::io::Read;

use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::Marker;
use yaml_rust2::{Yaml, YamlLoader};

/// Bytes. The largest start-up file read (parameters, tokens, roles, TLS
/// certificate chain and key, Zenoh configuration). Real ones are a few
/// KiB; a 1 MiB parameter file already holds some 250 000 numbers.
pub const MAX_CONFIG_FILE_BYTES: u64 = 1024 * 1024;

/// Aliases (`*name`) in one YAML file. ROS 2 parameter files and roles
/// files use a handful, if any.
pub const MAX_YAML_ALIASES: usize = 1024;

/// Nodes (scalars, lists, mappings) of a YAML file once every alias is
/// expanded. Enough for a file of [`MAX_CONFIG_FILE_BYTES`] without aliases
/// (a node takes at least 2 bytes of text), tens of MiB when loaded.
pub const MAX_YAML_NODES: u64 = 1 << 20;

/// Bytes of scalar text of a YAML file once every alias is expanded: an
/// alias of a long string clones the string.
pub const MAX_YAML_TEXT_BYTES: u64 = 16 * 1024 * 1024;

/// Levels of nesting in a YAML file: the loaded tree is dropped and walked
/// recursively, so depth is bounded like JSON's (`MAX_JSON_DEPTH`).
pub const MAX_YAML_DEPTH: usize = 64;

/// Reads the file `path` given to `flag` as UTF-8 text, refusing it past
/// [`MAX_CONFIG_FILE_BYTES`] without reading more than one byte beyond.
pub fn read(flag: &str, path: &str) -> Result<String, String> {
    read_capped(flag, path, MAX_CONFIG_FILE_BYTES)
}

fn read_capped(flag: &str, path: &str, limit: u64) -> Result<String, String> {
    let file =
        std::fs::File::open(path).map_err(|e| format!("{flag} {path}: cannot read it: {e}"))?;
    let mut bytes = Vec::new();
    // Not the size from metadata: a FIFO or /dev/zero has none, and a file
    // may grow between a metadata call and the read.
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{flag} {path}: cannot read it: {e}"))?;
    if bytes.len() as u64 > limit {
        return Err(format!(
            "{flag} {path}: the file is larger than {limit} bytes (MAX_CONFIG_FILE_BYTES)"
        ));
    }
    String::from_utf8(bytes).map_err(|e| {
        format!(
            "{flag} {path}: not UTF-8 text (byte {})",
            e.utf8_error().valid_up_to()
        )
    })
}

/// Loads YAML `text`, refusing it (with the limit named) if it nests deeper
/// than [`MAX_YAML_DEPTH`], holds more than [`MAX_YAML_ALIASES`] aliases or
/// would expand past [`MAX_YAML_NODES`] or [`MAX_YAML_TEXT_BYTES`]; syntax
/// errors name the line and column.
pub fn yaml(text: &str) -> Result<Vec<Yaml>, String> {
    yaml_fits(text)?;
    YamlLoader::load_from_str(text).map_err(|e| {
        let m = e.marker();
        format!("line {}, column {}: {}", m.line(), m.col() + 1, e.info())
    })
}

/// Whether YAML `text` may be handed to yaml-rust2's loader: `Err` names
/// the limit it passes. A syntax error is not reported here (the loader
/// reports it, having expanded no more than was counted before it).
pub fn yaml_fits(text: &str) -> Result<(), String> {
    let mut census = Census::default();
    let _syntax_error_is_the_loaders_to_report = Parser::new_from_str(text).load(&mut census, true);
    match census.refused {
        Some(refused) => Err(refused),
        None => Ok(()),
    }
}

/// What a subtree expands to.
#[derive(Debug, Clone, Copy, Default)]
struct Size {
    nodes: u64,
    text: u64,
}

/// Counts a YAML event stream as the loader would expand it; stops
/// counting at the first limit passed (the parser still reads to the end
/// of the text, which is at most [`MAX_CONFIG_FILE_BYTES`]).
#[derive(Debug, Default)]
struct Census {
    total: Size,
    aliases: usize,
    /// Open lists and mappings: their anchor id (0: none) and the total
    /// when they opened.
    open: Vec<(usize, Size)>,
    /// What each anchor stands for, expanded.
    anchors: HashMap<usize, Size>,
    refused: Option<String>,
}

impl Census {
    fn add(&mut self, s: Size, line: usize) {
        self.total.nodes = self.total.nodes.saturating_add(s.nodes);
        self.total.text = self.total.text.saturating_add(s.text);
        if self.total.nodes > MAX_YAML_NODES {
            self.refuse(format!(
                "line {line}: more than {MAX_YAML_NODES} nodes once aliases are expanded (MAX_YAML_NODES)"
            ));
        } else if self.total.text > MAX_YAML_TEXT_BYTES {
            self.refuse(format!(
                "line {line}: more than {MAX_YAML_TEXT_BYTES} bytes of text once aliases are expanded (MAX_YAML_TEXT_BYTES)"
            ));
        }
    }

    fn refuse(&mut self, why: String) {
        self.refused.get_or_insert(why);
    }
}

impl MarkedEventReceiver for Census {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        if self.refused.is_some() {
            return;
        }
        let line = mark.line();
        match ev {
            Event::Scalar(value, _, anchor, _) => {
                let s = Size {
                    nodes: 1,
                    text: value.len() as u64,
                };
                self.add(s, line);
                if anchor != 0 {
                    self.anchors.insert(anchor, s);
                }
            }
            Event::SequenceStart(anchor, _) | Event::MappingStart(anchor, _) => {
                if self.open.len() >= MAX_YAML_DEPTH {
                    return self.refuse(format!(
                        "line {line}: nested deeper than {MAX_YAML_DEPTH} levels (MAX_YAML_DEPTH)"
                    ));
                }
                self.open.push((anchor, self.total));
                self.add(Size { nodes: 1, text: 0 }, line);
            }
            Event::SequenceEnd | Event::MappingEnd => {
                if let Some((anchor, at)) = self.open.pop() {
                    if anchor != 0 {
                        let s = Size {
                            nodes: self.total.nodes - at.nodes,
                            text: self.total.text - at.text,
                        };
                        self.anchors.insert(anchor, s);
                    }
                }
            }
            Event::Alias(anchor) => {
                self.aliases += 1;
                if self.aliases > MAX_YAML_ALIASES {
                    return self.refuse(format!(
                        "line {line}: more than {MAX_YAML_ALIASES} aliases (MAX_YAML_ALIASES)"
                    ));
                }
                // An alias of an anchor still open (a recursive document)
                // is refused by the loader's own parse; count it as one.
                let s = self
                    .anchors
                    .get(&anchor)
                    .copied()
                    .unwrap_or(Size { nodes: 1, text: 0 });
                self.add(s, line);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nine levels of ten aliases each: 10^9 strings once expanded, 700
    /// bytes of text.
    pub(crate) fn billion_laughs() -> String {
        let mut t = String::from("a0: &a0 \"lol\"\n");
        for i in 1..10 {
            let refs: Vec<String> = (0..10).map(|_| format!("*a{}", i - 1)).collect();
            t.push_str(&format!("a{i}: &a{i} [{}]\n", refs.join(", ")));
        }
        t
    }

    #[test]
    fn nested_aliases_are_refused_before_they_expand() {
        let text = billion_laughs();
        assert!(text.len() < 800, "{}", text.len());
        let started = std::time::Instant::now();
        let e = yaml(&text).expect_err("billion laughs");
        assert!(e.contains("MAX_YAML_NODES"), "{e}");
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
    }

    #[test]
    fn a_long_string_aliased_many_times_is_refused_by_its_bytes() {
        let mut t = format!("s: &s \"{}\"\nl: [", "x".repeat(100_000));
        t.push_str(&vec!["*s"; 200].join(", "));
        t.push_str("]\n");
        let e = yaml(&t).expect_err("20 MB of text");
        assert!(e.contains("MAX_YAML_TEXT_BYTES"), "{e}");
    }

    #[test]
    fn aliases_and_depth_are_counted() {
        let mut t = String::from("a: &a 1\nl: [");
        t.push_str(&vec!["*a"; MAX_YAML_ALIASES + 1].join(", "));
        t.push_str("]\n");
        let e = yaml(&t).expect_err("too many aliases");
        assert!(e.contains("MAX_YAML_ALIASES"), "{e}");
        let deep = format!(
            "{}{}",
            "[".repeat(MAX_YAML_DEPTH + 1),
            "]".repeat(MAX_YAML_DEPTH + 1)
        );
        let e = yaml(&deep).expect_err("too deep");
        assert!(e.contains("MAX_YAML_DEPTH"), "{e}");
        let ok = format!(
            "{}{}",
            "[".repeat(MAX_YAML_DEPTH),
            "]".repeat(MAX_YAML_DEPTH)
        );
        yaml(&ok).expect("at the limit");
    }

    #[test]
    fn ordinary_anchors_still_load() {
        let docs = yaml("base: &b {p: 1.0, i: 2}\ntalker:\n  ros__parameters:\n    pid: *b\n")
            .expect("small aliases");
        assert_eq!(
            docs[0]["talker"]["ros__parameters"]["pid"]["i"].as_i64(),
            Some(2)
        );
    }

    #[test]
    fn files_past_the_cap_are_refused_naming_the_file_and_the_limit() {
        let p = std::env::temp_dir().join(format!("rosgate_files_{}", std::process::id()));
        std::fs::write(&p, vec![b'#'; 101]).expect("write");
        let path = p.to_str().expect("utf-8 temp dir");
        let e = read_capped("--auth-tokens", path, 100).expect_err("too big");
        assert!(e.contains(path) && e.contains("100 bytes"), "{e}");
        assert_eq!(read_capped("--x", path, 101).map(|t| t.len()), Ok(101));
        std::fs::write(&p, [b'a', 0xff]).expect("write");
        let e = read_capped("--x", path, 100).expect_err("not utf-8");
        assert!(e.contains("UTF-8"), "{e}");
        let _ = std::fs::remove_file(&p);
    }
}
