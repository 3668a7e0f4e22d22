//! The interface types a gateway knows: the bundled Jazzy packages plus any
//! loaded from a `share/` directory (`--interfaces DIR`), looked up by the
//! names clients and ROS 2 use for them, with their RIHS01 hashes.
//!
//! Owns: the types by full name (`pkg/msg/Name`, `pkg/srv/Name_Request`,
//! ...), name normalization, the load limits, and the hash table.
//! Invariants:
//! - a definition loaded later replaces an earlier one of the same name
//!   (a user's directory may override a bundled type);
//! - after [`Registry::check`] succeeds every nested reference resolves and
//!   no type contains itself, so a codec walking a type terminates;
//! - [`Registry::hash`] never returns a hash computed from an incomplete
//!   closure: it is `None` until every referenced type is known;
//! - [`Registry::load_dir`] is all or nothing, and bounded by
//!   [`MAX_FILES`] files of at most [`MAX_FILE_BYTES`] each.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::fs;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::model::{ActionDef, Base, Kind, MsgDef, SrvDef};
use crate::parse::{self, ParseError, Parsed};
use crate::rihs::{self, Member};

/// The definitions compiled in (see build.rs): the bundled packages, and,
/// for tests, test_msgs and rosidl's published hashes.
pub mod bundled {
    include!(concat!(env!("OUT_DIR"), "/bundled.rs"));
}

/// Most definition files [`Registry::load_dir`] reads from one directory.
pub const MAX_FILES: usize = 10_000;
/// Largest definition file [`Registry::load_dir`] reads.
pub const MAX_FILE_BYTES: u64 = parse::MAX_DEFINITION_BYTES as u64;

#[derive(Debug, Default, Clone)]
pub struct Registry {
    msgs: BTreeMap<String, MsgDef>,
    srvs: BTreeMap<String, SrvDef>,
    actions: BTreeMap<String, ActionDef>,
    /// Every complete type's hash, computed together on first use (they
    /// are ~1000 and cheap) and dropped whenever a definition is added.
    hashes: OnceLock<BTreeMap<String, String>>,
}

/// The codec looks nested types up through this.
impl crate::cdr::Types for Registry {
    fn msg(&self, full_name: &str) -> Option<&MsgDef> {
        Registry::msg(self, full_name)
    }
}

/// Why [`Registry::load_dir`] failed; the registry is then unchanged.
#[derive(Debug)]
pub enum LoadError {
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    Parse {
        path: PathBuf,
        error: ParseError,
    },
    TooManyFiles {
        dir: PathBuf,
    },
    TooLarge {
        path: PathBuf,
        bytes: u64,
    },
    BadFileName {
        path: PathBuf,
    },
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::Io { path, error } => write!(f, "{}: {error}", path.display()),
            LoadError::Parse { path, error } => write!(f, "{}: {error}", path.display()),
            LoadError::TooManyFiles { dir } => write!(
                f,
                "{}: more than {MAX_FILES} definition files",
                dir.display()
            ),
            LoadError::TooLarge { path, bytes } => write!(
                f,
                "{}: {bytes} bytes, more than the limit of {MAX_FILE_BYTES}",
                path.display()
            ),
            LoadError::BadFileName { path } => write!(
                f,
                "{}: not a valid type name ([A-Z][A-Za-z0-9]*)",
                path.display()
            ),
        }
    }
}

impl std::error::Error for LoadError {}

/// What [`Registry::check`] found wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckError {
    /// `type_name`'s field `field` refers to `missing`, which is not loaded.
    Unresolved {
        type_name: String,
        field: String,
        missing: String,
    },
    /// These types contain each other (the first is repeated at the end):
    /// such a message would be infinitely large.
    Cycle(Vec<String>),
}

impl fmt::Display for CheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CheckError::Unresolved {
                type_name,
                field,
                missing,
            } => write!(f, "{type_name}: field {field} has unknown type {missing}"),
            CheckError::Cycle(types) => write!(f, "recursive types: {}", types.join(" -> ")),
        }
    }
}

impl std::error::Error for CheckError {}

/// The full name `pkg/<kind>/Name` for a name in any form clients use:
/// full (`std_msgs/msg/String`), short (`std_msgs/String`, ROS 1 and
/// rosbridge style; `kind` supplies the middle part), or DDS-mangled
/// (`std_msgs::msg::dds_::String_`, also without `dds_::`/the `_`).
pub fn full_name(name: &str, kind: Kind) -> Option<String> {
    if name.contains("::") {
        let parts: Vec<&str> = name.split("::").collect();
        let (pkg, middle, ty) = match parts.as_slice() {
            [pkg, middle, "dds_", ty] => (*pkg, *middle, ty.strip_suffix('_')?),
            [pkg, middle, ty] => (*pkg, *middle, *ty),
            _ => return None,
        };
        Kind::parse(middle)?;
        return well_formed(pkg, middle, ty);
    }
    match name.split('/').collect::<Vec<_>>().as_slice() {
        [pkg, ty] => well_formed(pkg, kind.as_str(), ty),
        [pkg, middle, ty] if Kind::parse(middle).is_some() => well_formed(pkg, middle, ty),
        _ => None,
    }
}

/// Synthesized names (`Fibonacci_SendGoal_Request`) have underscores, so the
/// type part is checked loosely; lookups decide whether it exists.
fn well_formed(pkg: &str, middle: &str, ty: &str) -> Option<String> {
    let ok_ty = ty.starts_with(|c: char| c.is_ascii_uppercase())
        && ty.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    (parse::valid_package_name(pkg) && ok_ty).then(|| format!("{pkg}/{middle}/{ty}"))
}

impl Registry {
    /// No types at all.
    pub fn empty() -> Registry {
        Registry::default()
    }

    /// The bundled Jazzy packages (std_msgs, geometry_msgs, sensor_msgs,
    /// nav_msgs, tf2_msgs, visualization_msgs, rcl_interfaces, action_msgs,
    /// example_interfaces, std_srvs and what they depend on). Every one of
    /// them parses and checks (a test proves it), so nothing is skipped.
    pub fn bundled() -> Registry {
        Registry::bundled_shared().as_ref().clone()
    }

    /// The bundled packages, parsed once per process and shared (a hub, a
    /// test or a ROS 2 link that starts from them takes this `Arc`).
    pub fn bundled_shared() -> std::sync::Arc<Registry> {
        static BUNDLED: OnceLock<std::sync::Arc<Registry>> = OnceLock::new();
        BUNDLED
            .get_or_init(|| std::sync::Arc::new(Registry::parse_bundled()))
            .clone()
    }

    fn parse_bundled() -> Registry {
        let mut r = Registry::empty();
        for (pkg, kind, name, text) in bundled::DEFS {
            if let Some(kind) = Kind::parse(kind) {
                // Cannot fail: `bundled_definitions_parse_and_check`.
                let _ = r.add(pkg, kind, name, text);
            }
        }
        r
    }

    /// Parses and adds one definition file's types.
    pub fn add(&mut self, pkg: &str, kind: Kind, name: &str, text: &str) -> Result<(), ParseError> {
        let parsed = parse::parse(pkg, kind, name, text)?;
        self.insert(parsed);
        Ok(())
    }

    /// Adds the types of a `TypeDescription` a node sent (JSON, as the
    /// codec decodes `~/get_type_description`'s answer): the ones not
    /// known yet (a known type is never replaced). Returns the full names
    /// of the types added. Nothing is added when any part is refused, or
    /// when the result would not pass [`Registry::check`].
    pub fn add_description(
        &mut self,
        description: &serde_json::Value,
    ) -> Result<Vec<String>, String> {
        let (msgs, srv) = crate::describe::types(description)?;
        let mut next = self.clone();
        let mut added = Vec::new();
        for m in msgs {
            if !next.msgs.contains_key(&m.name) {
                added.push(m.name.clone());
                next.msgs.insert(m.name.clone(), m);
            }
        }
        if let Some(s) = srv {
            if !next.srvs.contains_key(&s.name) {
                added.push(s.name.clone());
                next.srvs.insert(s.name.clone(), s);
            }
        }
        next.hashes = OnceLock::new();
        next.check().map_err(|e| e.to_string())?;
        *self = next;
        Ok(added)
    }

    fn insert(&mut self, parsed: Parsed) {
        self.hashes = OnceLock::new();
        for m in parsed.msgs {
            self.msgs.insert(m.name.clone(), m);
        }
        for s in parsed.srvs {
            self.srvs.insert(s.name.clone(), s);
        }
        for a in parsed.actions {
            self.actions.insert(a.name.clone(), a);
        }
    }

    /// Loads `dir/<pkg>/{msg,srv,action}/*.{msg,srv,action}` (the layout of
    /// a ROS `share/` directory; an install prefix holding `share/` works
    /// too). Other files and directories are ignored. Returns the number of
    /// definition files loaded. Call [`Registry::check`] afterwards.
    pub fn load_dir(&mut self, dir: &Path) -> Result<usize, LoadError> {
        let share = dir.join("share");
        let root = if share.is_dir() {
            share
        } else {
            dir.to_path_buf()
        };
        let mut staged = Vec::new();
        for pkg_dir in sorted_entries(&root)? {
            let Some(pkg) = pkg_dir.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            if !parse::valid_package_name(pkg) || !pkg_dir.is_dir() {
                continue;
            }
            for kind in Kind::ALL {
                let kind_dir = pkg_dir.join(kind.as_str());
                if !kind_dir.is_dir() {
                    continue;
                }
                for path in sorted_entries(&kind_dir)? {
                    if path.extension().and_then(|e| e.to_str()) != Some(kind.as_str()) {
                        continue;
                    }
                    if staged.len() == MAX_FILES {
                        return Err(LoadError::TooManyFiles { dir: root });
                    }
                    let parsed = load_file(&path, pkg, kind)?;
                    staged.push(parsed);
                }
            }
        }
        let n = staged.len();
        for parsed in staged {
            self.insert(parsed);
        }
        Ok(n)
    }

    /// Verifies that every nested reference resolves and that no type
    /// contains itself. Reports the first problem in name order.
    pub fn check(&self) -> Result<(), CheckError> {
        for def in self.msgs.values() {
            for f in &def.fields {
                if let Base::Nested(n) = &f.base {
                    if !self.msgs.contains_key(n) {
                        return Err(CheckError::Unresolved {
                            type_name: def.name.clone(),
                            field: f.name.clone(),
                            missing: n.clone(),
                        });
                    }
                }
            }
        }
        self.find_cycle()
            .map_or(Ok(()), |c| Err(CheckError::Cycle(c)))
    }

    /// Depth-first search without recursion (a user's directory may chain
    /// thousands of types).
    fn find_cycle(&self) -> Option<Vec<String>> {
        let mut done: BTreeSet<&str> = BTreeSet::new();
        for start in self.msgs.keys() {
            if done.contains(start.as_str()) {
                continue;
            }
            // Each frame: a type on the current path and its next child.
            let mut path: Vec<(&str, usize)> = vec![(start, 0)];
            while let Some((name, next)) = path.last_mut() {
                let children = self.children(name);
                let Some(child) = children.get(*next).copied() else {
                    done.insert(name);
                    path.pop();
                    continue;
                };
                *next += 1;
                if let Some(pos) = path.iter().position(|(n, _)| *n == child) {
                    let mut cycle: Vec<String> =
                        path[pos..].iter().map(|(n, _)| (*n).to_owned()).collect();
                    cycle.push(child.to_owned());
                    return Some(cycle);
                }
                if !done.contains(child) && self.msgs.contains_key(child) {
                    path.push((child, 0));
                }
            }
        }
        None
    }

    fn children(&self, name: &str) -> Vec<&str> {
        self.msgs.get(name).map_or_else(Vec::new, |def| {
            def.fields
                .iter()
                .filter_map(|f| match &f.base {
                    Base::Nested(n) => Some(n.as_str()),
                    Base::Prim(_) => None,
                })
                .collect()
        })
    }

    /// A struct type by any name form ([`full_name`]; short names mean `msg`).
    pub fn msg(&self, name: &str) -> Option<&MsgDef> {
        // Full names (what the codec asks for, per field) need no
        // normalising, so no allocation.
        if let Some(d) = self.msgs.get(name) {
            return Some(d);
        }
        self.msgs.get(&full_name(name, Kind::Msg)?)
    }

    /// A service by any name form (short names mean `srv`). An action's
    /// `pkg/action/A_SendGoal` and `_GetResult` are services too.
    pub fn srv(&self, name: &str) -> Option<&SrvDef> {
        self.srvs.get(&full_name(name, Kind::Srv)?)
    }

    /// An action by any name form (short names mean `action`).
    pub fn action(&self, name: &str) -> Option<&ActionDef> {
        self.actions.get(&full_name(name, Kind::Action)?)
    }

    /// The full name of a struct type given in any form.
    pub fn canonical_msg(&self, name: &str) -> Option<&str> {
        self.msg(name).map(|d| d.name.as_str())
    }

    pub fn canonical_srv(&self, name: &str) -> Option<&str> {
        self.srv(name).map(|d| d.name.as_str())
    }

    pub fn canonical_action(&self, name: &str) -> Option<&str> {
        self.action(name).map(|d| d.name.as_str())
    }

    /// All struct types, by full name.
    pub fn msgs(&self) -> impl Iterator<Item = &MsgDef> {
        self.msgs.values()
    }

    pub fn srvs(&self) -> impl Iterator<Item = &SrvDef> {
        self.srvs.values()
    }

    pub fn actions(&self) -> impl Iterator<Item = &ActionDef> {
        self.actions.values()
    }

    /// The RIHS01 hash (`RIHS01_` + 64 hex digits) of a struct, service or
    /// action, by full name (`pkg/srv/S` is the service-level hash rmw_zenoh
    /// puts in service keys). `None` for unknown types and types whose
    /// references are not all loaded.
    pub fn hash(&self, full_name: &str) -> Option<String> {
        self.hashes
            .get_or_init(|| self.all_hashes())
            .get(full_name)
            .cloned()
    }

    fn all_hashes(&self) -> BTreeMap<String, String> {
        let lookup = |n: &str| self.members(n);
        self.msgs
            .keys()
            .chain(self.srvs.keys())
            .chain(self.actions.keys())
            .filter_map(|n| Some((n.clone(), rihs::rihs01(n, lookup)?)))
            .collect()
    }

    /// What rosidl describes for a name: a struct's fields, or a service's
    /// or action's component types.
    fn members(&self, name: &str) -> Option<Vec<Member<'_>>> {
        if let Some(def) = self.msgs.get(name) {
            Some(rihs::members(def))
        } else if let Some(srv) = self.srvs.get(name) {
            Some(rihs::service_members(srv))
        } else {
            self.actions.get(name).map(rihs::action_members)
        }
    }
}

fn sorted_entries(dir: &Path) -> Result<Vec<PathBuf>, LoadError> {
    let io = |error| LoadError::Io {
        path: dir.to_path_buf(),
        error,
    };
    let mut paths = fs::read_dir(dir)
        .map_err(io)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(io)?;
    paths.sort();
    Ok(paths)
}

fn load_file(path: &Path, pkg: &str, kind: Kind) -> Result<Parsed, LoadError> {
    let io = |error| LoadError::Io {
        path: path.to_path_buf(),
        error,
    };
    let Some(name) = path.file_stem().and_then(|s| s.to_str()) else {
        return Err(LoadError::BadFileName {
            path: path.to_path_buf(),
        });
    };
    if !parse::valid_type_name(name) {
        return Err(LoadError::BadFileName {
            path: path.to_path_buf(),
        });
    }
    // Read at most one byte past the limit: the size on disk may change
    // between a metadata call and the read.
    let mut bytes = Vec::new();
    fs::File::open(path)
        .map_err(io)?
        .take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(LoadError::TooLarge {
            path: path.to_path_buf(),
            bytes: fs::metadata(path).map_or(bytes.len() as u64, |m| m.len()),
        });
    }
    let text = String::from_utf8(bytes).map_err(|_| {
        io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "not UTF-8",
        ))
    })?;
    parse::parse(pkg, kind, name, &text).map_err(|error| LoadError::Parse {
        path: path.to_path_buf(),
        error,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_tests() -> Registry {
        let mut r = Registry::bundled();
        for (pkg, kind, name, text) in bundled::TEST_DEFS {
            r.add(pkg, Kind::parse(kind).unwrap(), name, text)
                .unwrap_or_else(|e| panic!("{pkg}/{kind}/{name}: {e}"));
        }
        r
    }

    #[test]
    fn bundled_definitions_parse_and_check() {
        let mut r = Registry::empty();
        for (pkg, kind, name, text) in bundled::DEFS {
            let kind = Kind::parse(kind).unwrap();
            r.add(pkg, kind, name, text)
                .unwrap_or_else(|e| panic!("{pkg}/{}/{name}: {e}", kind.as_str()));
        }
        r.check().unwrap();
        assert!(bundled::DEFS.len() > 150, "{}", bundled::DEFS.len());
        let pkgs: BTreeSet<&str> = bundled::DEFS.iter().map(|d| d.0).collect();
        assert_eq!(pkgs.len(), 17, "{pkgs:?}");
        assert!(!pkgs.contains("test_msgs"));
        // Every bundled type has a hash (its closure is complete).
        for name in r.msgs.keys().chain(r.srvs.keys()).chain(r.actions.keys()) {
            assert!(r.hash(name).is_some(), "{name}");
        }
    }

    #[test]
    fn every_official_hash_matches() {
        let r = with_tests();
        r.check().unwrap();
        let mut compared = 0;
        let mut names = BTreeSet::new();
        for (name, official) in bundled::OFFICIAL_HASHES {
            assert_eq!(r.hash(name).as_deref(), Some(*official), "{name}");
            compared += 1;
            names.insert(*name);
        }
        assert!(compared > 600, "only {compared} hashes compared");
        assert!(names.len() > 250, "only {} distinct types", names.len());
        assert!(names.iter().any(|n| n.starts_with("test_msgs/action/")));
    }

    /// Defaults are not hashed, so the hash oracle cannot catch a wrong
    /// one: compare with the values rosidl wrote into test_msgs' .json.
    #[test]
    #[allow(clippy::approx_constant)] // test_msgs' 3.1415 is data, not π
    fn test_msgs_defaults_match_rosidl() {
        use serde_json::json;
        let r = with_tests();
        let default = |ty: &str, field: &str| {
            let def = r.msg(ty).unwrap();
            let f = def.fields.iter().find(|f| f.name == field).unwrap();
            f.default.clone().unwrap()
        };
        for (field, want) in [
            ("string_value_default1", "Hello world!"),
            ("string_value_default2", "Hello'world!"),
            ("string_value_default3", "Hello\"world!"),
            ("string_value_default4", "Hello'world!"),
            ("string_value_default5", "Hello\"world!"),
            ("bounded_string_value_default4", "Hello'world!"),
        ] {
            assert_eq!(
                default("test_msgs/msg/Strings", field),
                json!(want),
                "{field}"
            );
        }
        let arrays = "test_msgs/msg/Arrays";
        assert_eq!(
            default(arrays, "bool_values_default"),
            json!([false, true, false])
        );
        // test_msgs' own literal, not an approximation of pi.
        #[allow(clippy::approx_constant)]
        let pi_ish = 3.1415;
        assert_eq!(
            default(arrays, "float64_values_default"),
            json!([pi_ish, 0.0, -pi_ish])
        );
        assert_eq!(
            default(arrays, "int64_values_default"),
            json!([0, 9223372036854775807i64, -9223372036854775808i64])
        );
        assert_eq!(
            default(arrays, "uint64_values_default"),
            json!([0, 1, 18446744073709551615u64])
        );
        assert_eq!(
            default(arrays, "string_values_default"),
            json!(["", "max value", "min value"])
        );
        assert_eq!(default("geometry_msgs/msg/Quaternion", "w"), json!(1.0));
        let wstrings = "test_msgs/msg/WStrings";
        assert_eq!(
            default(wstrings, "wstring_value_default3"),
            json!("ハローワールド")
        );
        let consts = &r.msg("test_msgs/msg/Constants").unwrap().constants;
        assert!(consts.iter().any(|c| c.name == "UINT64_CONST"));
    }

    #[test]
    fn hash_vectors() {
        let r = Registry::bundled();
        for (name, hash) in [
            (
                "std_msgs/msg/String",
                "df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18",
            ),
            (
                "geometry_msgs/msg/Twist",
                "9c45bf16fe0983d80e3cfe750d6835843d265a9a6c46bd2e609fcddde6fb8d2a",
            ),
            (
                "sensor_msgs/msg/Image",
                "d31d41a9a4c4bc8eae9be757b0beed306564f7526c88ea6a4588fb9582527d47",
            ),
            (
                "std_msgs/msg/Char",
                "3ad2d04dd29ba19d04b16659afa3ccaedd691914b02a64e82e252f2fa6a586a9",
            ),
            (
                "std_srvs/srv/Empty_Request",
                "458eaf200a3f63d9cc53d19436edebc0c140ef4c93ca75d5bd4ce19fd7759e35",
            ),
            (
                "example_interfaces/srv/AddTwoInts",
                "e118de6bf5eeb66a2491b5bda11202e7b68f198d6f67922cf30364858239c81a",
            ),
            (
                "example_interfaces/srv/AddTwoInts_Request",
                "000c5fd92d6b2e1a05949348f584d6d652adea1e92d691792011ac2273508302",
            ),
            (
                "example_interfaces/srv/AddTwoInts_Response",
                "de5c030d4af33cba2749310b249737b631594703f9300495f48bffb2b44dcc2f",
            ),
            (
                "example_interfaces/srv/AddTwoInts_Event",
                "32c1d140259c71e5c355115942bcb31df98b4330e4d906b1b75ccb1c9b3ce6c8",
            ),
            (
                "tf2_msgs/msg/TFMessage",
                "e369d0f05a23ae52508854b66f6aa0437f3449d652e8cbf22d5abe85d020f087",
            ),
            (
                "tf2_msgs/msg/TF2Error",
                "db2485e7d6a0ec75bf087e058ee45df682acc3a621ca7780503d10aac141809a",
            ),
            (
                "tf2_msgs/srv/FrameGraph",
                "0d1fbc6222c018ba5f33822904a2fdd4063705289956d3fdde07cd8c50fe8067",
            ),
            (
                "example_interfaces/action/Fibonacci",
                "9508051da1ea4658de144b09bd0690ff3de52104683d847aed764d2915906f51",
            ),
            (
                "example_interfaces/action/Fibonacci_Goal",
                "226cb437e4355dcd3e914f930382a3b0cc1da81545bd319ed554e95a03255f51",
            ),
            (
                "example_interfaces/action/Fibonacci_SendGoal",
                "d1a57fb2a4afe8c21e34fb10db206f16ce6729b28531141472df92277c55b557",
            ),
            (
                "example_interfaces/action/Fibonacci_GetResult",
                "1b0de0d5d29dc955d92f546706568428632771db13ec84c15ec1c1a59f424a57",
            ),
            (
                "example_interfaces/action/Fibonacci_FeedbackMessage",
                "c1de71afd52e49a89c53d8262366884185bc0a02f78ce051c4e46b0a7fe59bb2",
            ),
        ] {
            assert_eq!(r.hash(name), Some(format!("RIHS01_{hash}")), "{name}");
        }
    }

    #[test]
    fn canonical_json_bytes() {
        let r = Registry::bundled();
        let json = |n: &str| rihs::canonical_json(n, |x| r.members(x)).unwrap();
        assert_eq!(
            json("std_msgs/msg/String"),
            r#"{"type_description": {"type_name": "std_msgs/msg/String", "fields": [{"name": "data", "type": {"type_id": 17, "capacity": 0, "string_capacity": 0, "nested_type_name": ""}}]}, "referenced_type_descriptions": []}"#
        );
        assert_eq!(
            json("geometry_msgs/msg/Twist"),
            r#"{"type_description": {"type_name": "geometry_msgs/msg/Twist", "fields": [{"name": "linear", "type": {"type_id": 1, "capacity": 0, "string_capacity": 0, "nested_type_name": "geometry_msgs/msg/Vector3"}}, {"name": "angular", "type": {"type_id": 1, "capacity": 0, "string_capacity": 0, "nested_type_name": "geometry_msgs/msg/Vector3"}}]}, "referenced_type_descriptions": [{"type_name": "geometry_msgs/msg/Vector3", "fields": [{"name": "x", "type": {"type_id": 11, "capacity": 0, "string_capacity": 0, "nested_type_name": ""}}, {"name": "y", "type": {"type_id": 11, "capacity": 0, "string_capacity": 0, "nested_type_name": ""}}, {"name": "z", "type": {"type_id": 11, "capacity": 0, "string_capacity": 0, "nested_type_name": ""}}]}]}"#
        );
    }

    #[test]
    fn lookups_by_every_name_form() {
        let r = Registry::bundled();
        for name in [
            "std_msgs/msg/String",
            "std_msgs/String",
            "std_msgs::msg::dds_::String_",
            "std_msgs::msg::String",
        ] {
            assert_eq!(r.canonical_msg(name), Some("std_msgs/msg/String"), "{name}");
        }
        for name in [
            "example_interfaces/srv/AddTwoInts",
            "example_interfaces/AddTwoInts",
            "example_interfaces::srv::dds_::AddTwoInts_",
        ] {
            assert_eq!(
                r.canonical_srv(name),
                Some("example_interfaces/srv/AddTwoInts"),
                "{name}"
            );
        }
        for name in [
            "example_interfaces/action/Fibonacci",
            "example_interfaces/Fibonacci",
            "example_interfaces::action::dds_::Fibonacci_",
        ] {
            assert_eq!(
                r.canonical_action(name),
                Some("example_interfaces/action/Fibonacci"),
                "{name}"
            );
        }
        assert!(r
            .msg("example_interfaces::srv::dds_::AddTwoInts_Request_")
            .is_some());
        assert!(r
            .msg("example_interfaces/action/Fibonacci_SendGoal_Request")
            .is_some());
        assert!(r
            .srv("example_interfaces/action/Fibonacci_SendGoal")
            .is_some());
        assert!(r.msg("std_msgs/Nope").is_none());
        assert!(r.msg("std_msgs/srv/String").is_none());
        for bad in [
            "",
            "String",
            "a/b/c/d",
            "std_msgs/foo/String",
            "x::y",
            "std_msgs::msg::dds_::String",
        ] {
            assert!(r.msg(bad).is_none(), "{bad}");
        }
        assert!(r.msg("std_msgs/Header").is_some());
        assert!(r.hash("std_msgs/String").is_none(), "hash takes full names");
    }

    #[test]
    fn check_rejects_unresolved_and_recursive_types() {
        let mut r = Registry::empty();
        r.add("p", Kind::Msg, "A", "B b\n").unwrap();
        let e = r.check().unwrap_err();
        assert_eq!(
            e,
            CheckError::Unresolved {
                type_name: "p/msg/A".into(),
                field: "b".into(),
                missing: "p/msg/B".into()
            }
        );
        assert_eq!(r.hash("p/msg/A"), None);
        r.add("p", Kind::Msg, "B", "int32 x\nq/C[] c\n").unwrap();
        r.add("q", Kind::Msg, "C", "p/A[<=1] a\n").unwrap();
        let e = r.check().unwrap_err();
        assert_eq!(
            e,
            CheckError::Cycle(vec![
                "p/msg/A".into(),
                "p/msg/B".into(),
                "q/msg/C".into(),
                "p/msg/A".into()
            ])
        );
        assert!(e.to_string().contains("p/msg/A -> p/msg/B"), "{e}");
        let mut r = Registry::empty();
        r.add("p", Kind::Msg, "Selfish", "Selfish[] children\n")
            .unwrap();
        assert!(matches!(r.check(), Err(CheckError::Cycle(_))));
    }

    struct TempDir(PathBuf);

    impl TempDir {
        fn new(tag: &str) -> TempDir {
            let dir = std::env::temp_dir().join(format!(
                "rosgate-ros2-{tag}-{}-{:?}",
                std::process::id(),
                std::thread::current().id()
            ));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir).unwrap();
            TempDir(dir)
        }

        fn write(&self, rel: &str, text: &str) {
            let path = self.0.join(rel);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, text).unwrap();
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn load_dir_reads_a_share_tree() {
        let tmp = TempDir::new("load");
        tmp.write(
            "share/my_msgs/msg/Thing.msg",
            "std_msgs/Header header\nPart[] parts\n",
        );
        tmp.write("share/my_msgs/msg/Part.msg", "float64 x 1.5\n");
        tmp.write("share/my_msgs/msg/Part.idl", "not read");
        tmp.write("share/my_msgs/msg/Part.json", "{}");
        tmp.write("share/my_msgs/srv/Do.srv", "Thing t\n---\nbool ok\n");
        tmp.write("share/my_msgs/action/Go.action", "---\n---\n");
        tmp.write("share/my_msgs/package.xml", "<package/>");
        tmp.write("share/Not-A-Package/msg/X.msg", "garbage here");

        let mut r = Registry::bundled();
        // The install prefix and its share/ are the same tree.
        assert_eq!(r.load_dir(&tmp.0).unwrap(), 4);
        assert_eq!(r.load_dir(&tmp.0.join("share")).unwrap(), 4);
        r.check().unwrap();
        assert!(r.msg("my_msgs/Thing").is_some());
        assert!(r.srv("my_msgs/Do").is_some());
        assert!(r.action("my_msgs/Go").is_some());
        assert!(r.hash("my_msgs/srv/Do").is_some());

        // One bad file: an error naming it, and nothing loaded.
        tmp.write("share/other_msgs/msg/Bad.msg", "int32 ok\nint32 Bad\n");
        tmp.write("share/other_msgs/msg/Good.msg", "int32 ok\n");
        let before = r.msgs().count();
        let e = r.load_dir(&tmp.0).unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("Bad.msg") && text.contains("line 2"),
            "{text}"
        );
        assert_eq!(r.msgs().count(), before);
        assert!(r.msg("other_msgs/Good").is_none());

        fs::remove_file(tmp.0.join("share/other_msgs/msg/Bad.msg")).unwrap();
        tmp.write("share/other_msgs/msg/lower.msg", "int32 ok\n");
        assert!(matches!(
            r.load_dir(&tmp.0),
            Err(LoadError::BadFileName { .. })
        ));
        fs::remove_file(tmp.0.join("share/other_msgs/msg/lower.msg")).unwrap();
        tmp.write(
            "share/other_msgs/msg/Huge.msg",
            &"int32 a\n".repeat(MAX_FILE_BYTES as usize / 8 + 1),
        );
        assert!(matches!(
            r.load_dir(&tmp.0),
            Err(LoadError::TooLarge { .. })
        ));

        let missing = tmp.0.join("nope");
        assert!(matches!(
            Registry::empty().load_dir(&missing),
            Err(LoadError::Io { .. })
        ));
    }

    #[test]
    fn later_definitions_replace_earlier_ones_and_rehash() {
        let mut r = Registry::empty();
        r.add("p", Kind::Msg, "A", "int32 x\n").unwrap();
        let h1 = r.hash("p/msg/A").unwrap();
        r.add("p", Kind::Msg, "A", "int64 x\n").unwrap();
        assert_ne!(r.hash("p/msg/A").unwrap(), h1);
    }

    #[test]
    fn a_description_gives_the_same_type_and_hash_as_its_definition() {
        let mut from_text = Registry::bundled();
        from_text
            .add(
                "custom_msgs",
                crate::model::Kind::Msg,
                "Blip",
                "int32 a\nstring<=8 tag\ngeometry_msgs/Point[] pts\nfloat64[9] m\n",
            )
            .expect("parse");
        let mut learned = Registry::bundled();
        let added = learned
            .add_description(&crate::describe::tests::blip())
            .expect("description");
        assert_eq!(added, vec!["custom_msgs/msg/Blip".to_string()]);
        assert_eq!(
            learned.msg("custom_msgs/msg/Blip"),
            from_text.msg("custom_msgs/msg/Blip")
        );
        assert_eq!(
            learned.hash("custom_msgs/msg/Blip"),
            from_text.hash("custom_msgs/msg/Blip")
        );
    }
}
