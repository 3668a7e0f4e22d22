//! Who may connect and what they may do: tokens with roles, each role's
//! allowlists (globs per class of operation), and which browser origins
//! may open a WebSocket. Built by the server from `--auth-tokens`,
//! `--auth-roles` and `--ws-allowed-origins`; the hub asks it.
//!
//! Invariants:
//! - with no token configured, [`Access::required`] is false and every
//!   check answers "allowed" without looking at a name (the fast path);
//! - a presented token is compared with every configured token in time that
//!   depends only on [`MAX_TOKEN_BYTES`] and the number of tokens, never on
//!   the bytes that match; a token is never logged or echoed;
//! - a role's decision for a name is a pure function of its globs, so it is
//!   cached per role (at most [`DECISION_CACHE`] names per role and class,
//!   cleared when full): the publish path pays one hash lookup;
//! - globs are bounded in number and length, and matching is O(name x glob)
//!   without recursion.

use std::cell::RefCell;
use std::collections::HashMap;

/// Tokens configured at most (`--auth-tokens`).
pub const MAX_TOKENS: usize = 1024;
/// Longest token, bytes; the shortest accepted is [`MIN_TOKEN_BYTES`].
pub const MAX_TOKEN_BYTES: usize = 256;
/// Shortest token accepted in the token file: shorter ones are guessable.
pub const MIN_TOKEN_BYTES: usize = 16;
/// Globs per role and class at most.
pub const MAX_GLOBS: usize = 256;
/// Longest glob, bytes.
pub const MAX_GLOB_BYTES: usize = 512;
/// Roles at most.
pub const MAX_ROLES: usize = 64;
/// Cached decisions per role and class before the cache is cleared.
pub const DECISION_CACHE: usize = 4096;

/// A class of operation an allowlist is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Class {
    /// `advertise`, `publish` on a topic.
    Publish,
    /// `subscribe` to a topic.
    Subscribe,
    /// `call_service`.
    Call,
    /// `advertise_service`.
    Provide,
    /// `send_action_goal`, `cancel_action_goal`.
    ActionSend,
    /// `advertise_action`.
    ActionServe,
    /// Read a parameter (`<node>:<name>`).
    ParamRead,
    /// Set, declare or delete a parameter (`<node>:<name>`).
    ParamWrite,
}

impl Class {
    pub const ALL: [Class; 8] = [
        Class::Publish,
        Class::Subscribe,
        Class::Call,
        Class::Provide,
        Class::ActionSend,
        Class::ActionServe,
        Class::ParamRead,
        Class::ParamWrite,
    ];

    /// The key in a roles file.
    pub fn key(self) -> &'static str {
        match self {
            Class::Publish => "publish",
            Class::Subscribe => "subscribe",
            Class::Call => "call",
            Class::Provide => "provide",
            Class::ActionSend => "action_send",
            Class::ActionServe => "action_serve",
            Class::ParamRead => "param_read",
            Class::ParamWrite => "param_write",
        }
    }

    /// What the operation is called in a `forbidden` status.
    pub fn verb(self) -> &'static str {
        match self {
            Class::Publish => "publish on",
            Class::Subscribe => "subscribe to",
            Class::Call => "call",
            Class::Provide => "provide",
            Class::ActionSend => "send goals to",
            Class::ActionServe => "serve",
            Class::ParamRead => "read parameter",
            Class::ParamWrite => "set parameter",
        }
    }

    fn index(self) -> usize {
        self as usize
    }

    /// The classes a roles-file key names: ours, and rosbridge's globs
    /// (`topics_glob` is publish and subscribe, ...).
    pub fn from_key(key: &str) -> Option<&'static [Class]> {
        Some(match key {
            "publish" | "topics_pub_glob" => &[Class::Publish],
            "subscribe" | "topics_sub_glob" => &[Class::Subscribe],
            "topics_glob" => &[Class::Publish, Class::Subscribe],
            "call" => &[Class::Call],
            "provide" => &[Class::Provide],
            "services_glob" => &[Class::Call, Class::Provide],
            "action_send" => &[Class::ActionSend],
            "action_serve" => &[Class::ActionServe],
            "actions_glob" => &[Class::ActionSend, Class::ActionServe],
            "param_read" => &[Class::ParamRead],
            "param_write" => &[Class::ParamWrite],
            "params_glob" => &[Class::ParamRead, Class::ParamWrite],
            _ => return None,
        })
    }
}

/// `*` matches any run of characters (slashes included, as rosbridge's
/// fnmatch globs), `?` any one character; everything else itself.
/// Iterative with one backtrack point: O(name x glob).
pub fn glob_match(glob: &str, name: &str) -> bool {
    let (g, n) = (glob.as_bytes(), name.as_bytes());
    let (mut gi, mut ni) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if gi < g.len() && (g[gi] == b'?' || (g[gi] != b'*' && g[gi] == n[ni])) {
            gi += 1;
            ni += 1;
        } else if gi < g.len() && g[gi] == b'*' {
            star = Some((gi, ni));
            gi += 1;
        } else if let Some((sg, sn)) = star {
            gi = sg + 1;
            ni = sn + 1;
            star = Some((sg, sn + 1));
        } else {
            return false;
        }
    }
    g[gi..].iter().all(|&c| c == b'*')
}

/// One role: a glob list per class (an empty list allows nothing).
#[derive(Debug, Clone, Default)]
pub struct RoleDef {
    pub name: String,
    pub globs: [Vec<String>; 8],
}

impl RoleDef {
    /// A role allowed everything.
    pub fn admin() -> Self {
        RoleDef {
            name: "admin".into(),
            globs: std::array::from_fn(|_| vec!["*".to_string()]),
        }
    }

    /// A role that can look but not touch: subscribe, call the gateway's
    /// introspection, read parameters.
    pub fn viewer() -> Self {
        let mut r = RoleDef {
            name: "viewer".into(),
            ..RoleDef::default()
        };
        r.globs[Class::Subscribe.index()] = vec!["*".into()];
        r.globs[Class::Call.index()] = vec!["/rosapi/*".into(), "/rosgate/*".into()];
        r.globs[Class::ParamRead.index()] = vec!["*".into()];
        r
    }

    fn allows(&self, class: Class, name: &str) -> bool {
        self.globs[class.index()]
            .iter()
            .any(|g| glob_match(g, name))
    }
}

/// One role's cached decisions, per class: name -> allowed.
type Decisions = [HashMap<Box<str>, bool>; 8];

/// Index of a role in [`Access`].
pub type RoleId = u16;

/// Tokens, roles and origins. See the module docs. `Debug` shows counts,
/// never the tokens.
#[derive(Clone, Default)]
pub struct Access {
    /// (token, role), in file order.
    tokens: Vec<(Box<[u8]>, RoleId)>,
    roles: Vec<RoleDef>,
    /// Per role and class: name -> allowed (interior: asked through `&self`
    /// while the hub walks its tables).
    cache: RefCell<Vec<Decisions>>,
    /// `--ws-allowed-origins`, lower-cased, without a trailing slash.
    origins: Vec<String>,
    /// Whether any origin is allowed (`*` listed).
    any_origin: bool,
}

impl std::fmt::Debug for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Access")
            .field("tokens", &self.tokens.len())
            .field(
                "roles",
                &self
                    .roles
                    .iter()
                    .map(|r| r.name.as_str())
                    .collect::<Vec<_>>(),
            )
            .field("origins", &self.origins)
            .field("any_origin", &self.any_origin)
            .finish()
    }
}

/// Why an origin was refused or a token not accepted: for statuses and logs
/// (never containing the token).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Denied {
    /// A token was presented and matches none.
    BadToken,
    /// A browser origin not allowed.
    Origin(String),
}

/// One line of a token file.
#[derive(Debug, Clone)]
pub struct TokenLine {
    pub token: String,
    pub role: String,
    /// Its line in the file (1-based), for error messages.
    pub line: usize,
}

/// What is wrong with the configuration: about the token file (the message
/// starts with its line) or about the roles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    Tokens(String),
    Roles(String),
}

impl Access {
    /// `tokens` from the token file; `roles` the role definitions (`admin`
    /// and `viewer` exist unless redefined). Errors name the line or the
    /// role, never the token.
    pub fn new(
        tokens: Vec<TokenLine>,
        mut roles: Vec<RoleDef>,
        origins: Vec<String>,
    ) -> Result<Self, ConfigError> {
        let roles_err = ConfigError::Roles;
        let tokens_err = ConfigError::Tokens;
        for builtin in [RoleDef::admin(), RoleDef::viewer()] {
            if !roles.iter().any(|r| r.name == builtin.name) {
                roles.push(builtin);
            }
        }
        if roles.len() > MAX_ROLES {
            return Err(roles_err(format!("more than {MAX_ROLES} roles")));
        }
        for r in &roles {
            for (class, globs) in Class::ALL.iter().zip(r.globs.iter()) {
                if globs.len() > MAX_GLOBS {
                    return Err(roles_err(format!(
                        "role {}: more than {MAX_GLOBS} {} globs",
                        r.name,
                        class.key()
                    )));
                }
                if let Some(g) = globs.iter().find(|g| g.len() > MAX_GLOB_BYTES) {
                    return Err(roles_err(format!(
                        "role {}: glob longer than {MAX_GLOB_BYTES} bytes: {:?}...",
                        r.name,
                        g.chars().take(32).collect::<String>()
                    )));
                }
            }
        }
        if tokens.len() > MAX_TOKENS {
            return Err(tokens_err(format!("more than {MAX_TOKENS} tokens")));
        }
        let mut table: Vec<(Box<[u8]>, RoleId)> = Vec::with_capacity(tokens.len());
        for t in tokens {
            let line = t.line;
            if t.token.len() < MIN_TOKEN_BYTES || t.token.len() > MAX_TOKEN_BYTES {
                return Err(tokens_err(format!(
                    "line {line}: a token's length must be {MIN_TOKEN_BYTES}-{MAX_TOKEN_BYTES} bytes (openssl rand -hex 16 makes one)"
                )));
            }
            if !t.token.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(tokens_err(format!(
                    "line {line}: a token is printable ASCII without spaces"
                )));
            }
            let Some(id) = roles.iter().position(|r| r.name == t.role) else {
                let known: Vec<&str> = roles.iter().map(|r| r.name.as_str()).collect();
                return Err(tokens_err(format!(
                    "line {line}: unknown role {:?} (roles: {})",
                    t.role,
                    known.join(", ")
                )));
            };
            if table.iter().any(|(k, _)| **k == *t.token.as_bytes()) {
                return Err(tokens_err(format!(
                    "line {line}: duplicate token (each token has one role)"
                )));
            }
            table.push((t.token.into_bytes().into_boxed_slice(), id as RoleId));
        }
        let mut norm = Vec::new();
        let mut any_origin = false;
        for o in origins {
            let o = o.trim().trim_end_matches('/').to_ascii_lowercase();
            if o == "*" {
                any_origin = true;
            } else if !o.is_empty() {
                norm.push(o);
            }
        }
        Ok(Access {
            cache: RefCell::new(roles.iter().map(|_| Default::default()).collect()),
            tokens: table,
            roles,
            origins: norm,
            any_origin,
        })
    }

    /// Whether clients must authenticate.
    pub fn required(&self) -> bool {
        !self.tokens.is_empty()
    }

    /// The role a client without a token has when authentication is off.
    pub fn open_role(&self) -> RoleId {
        self.roles
            .iter()
            .position(|r| r.name == "admin")
            .unwrap_or(0) as RoleId
    }

    pub fn role_name(&self, id: RoleId) -> &str {
        self.roles.get(id as usize).map_or("?", |r| r.name.as_str())
    }

    pub fn token_count(&self) -> usize {
        self.tokens.len()
    }

    /// The names of the roles tokens use, for the start-up log.
    pub fn roles_in_use(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self
            .tokens
            .iter()
            .map(|(_, r)| self.role_name(*r))
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// The role of `presented`, compared with every token in constant time.
    pub fn authenticate(&self, presented: &[u8]) -> Result<RoleId, Denied> {
        let mut found: u32 = u32::MAX;
        for (i, (token, _)) in self.tokens.iter().enumerate() {
            let eq = ct_eq(token, presented);
            // Branch-free select of the first match.
            let take = u32::from(eq) & u32::from(found == u32::MAX);
            found = found ^ ((found ^ i as u32) & 0u32.wrapping_sub(take));
        }
        match self.tokens.get(found as usize) {
            Some((_, role)) => Ok(*role),
            None => Err(Denied::BadToken),
        }
    }

    /// Whether `role` may do `class` on `name` (a full name; parameters as
    /// `<node>:<name>`). Always true when authentication is off.
    pub fn allows(&self, role: RoleId, class: Class, name: &str) -> bool {
        if !self.required() {
            return true;
        }
        let Some(def) = self.roles.get(role as usize) else {
            return false;
        };
        let mut caches = self.cache.borrow_mut();
        let Some(cache) = caches.get_mut(role as usize) else {
            return false;
        };
        let c = &mut cache[class.index()];
        if let Some(&v) = c.get(name) {
            return v;
        }
        let v = def.allows(class, name);
        if c.len() >= DECISION_CACHE {
            c.clear();
        }
        c.insert(Box::from(name), v);
        v
    }

    /// Whether a WebSocket opening from `origin` (its `Origin` header) may
    /// proceed: no header (not a browser), a loopback page, or one listed.
    pub fn origin_allowed(&self, origin: Option<&str>) -> Result<(), Denied> {
        let Some(origin) = origin else {
            return Ok(());
        };
        let o = origin.trim().trim_end_matches('/').to_ascii_lowercase();
        if self.any_origin || is_loopback_origin(&o) || self.origins.contains(&o) {
            return Ok(());
        }
        Err(Denied::Origin(origin.chars().take(200).collect()))
    }
}

/// `http(s)://localhost`, `127.x.y.z` or `[::1]`, with any port.
fn is_loopback_origin(o: &str) -> bool {
    let Some(rest) = o
        .strip_prefix("http://")
        .or_else(|| o.strip_prefix("https://"))
    else {
        return false;
    };
    let host = if let Some(v6) = rest.strip_prefix('[') {
        match v6.split_once(']') {
            Some((h, tail)) if tail.is_empty() || tail.starts_with(':') => h,
            _ => return false,
        }
    } else {
        match rest.split_once(':') {
            Some((h, port)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => h,
            Some(_) => return false,
            None => rest,
        }
    };
    host == "localhost"
        || host == "::1"
        || host
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Equality in time that depends only on [`MAX_TOKEN_BYTES`]: every byte
/// position up to it is compared, the lengths folded in.
fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = u8::from(a.len() != b.len()) | u8::from(b.len() > MAX_TOKEN_BYTES);
    for i in 0..MAX_TOKEN_BYTES {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        diff |= x ^ y;
    }
    std::hint::black_box(diff) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(token: &str, role: &str, line: usize) -> TokenLine {
        TokenLine {
            token: token.into(),
            role: role.into(),
            line,
        }
    }

    fn access() -> Access {
        let mut op = RoleDef {
            name: "operator".into(),
            ..RoleDef::default()
        };
        op.globs[Class::Publish.index()] = vec!["/cmd_vel".into(), "/robot_?/cmd".into()];
        op.globs[Class::Subscribe.index()] = vec!["/camera/*".into()];
        Access::new(
            vec![
                line("0123456789abcdef-admin", "admin", 1),
                line("0123456789abcdef-op", "operator", 2),
                line("0123456789abcdef-view", "viewer", 3),
            ],
            vec![op],
            vec!["https://ops.example.com/".into()],
        )
        .expect("valid")
    }

    #[test]
    fn globs_match_like_fnmatch() {
        assert!(glob_match("*", "/a/b"));
        assert!(glob_match("/camera/*", "/camera/left/image"));
        assert!(!glob_match("/camera/*", "/cameras"));
        assert!(glob_match("/robot_?/cmd", "/robot_1/cmd"));
        assert!(!glob_match("/robot_?/cmd", "/robot_12/cmd"));
        assert!(glob_match("/a*b*c", "/axxbyyc"));
        assert!(!glob_match("/a*b*c", "/axxbyy"));
        assert!(glob_match("", ""));
        assert!(!glob_match("", "/x"));
        // A pathological glob against a long name: no recursion, no blow-up.
        let name = "a".repeat(1000);
        let glob = format!("{}b", "*a".repeat(200));
        assert!(!glob_match(&glob, &name));
        assert!(glob_match(&"*a".repeat(200), &name));
    }

    #[test]
    fn tokens_map_to_roles_and_bad_ones_are_refused() {
        let a = access();
        let op = a.authenticate(b"0123456789abcdef-op").expect("op");
        assert_eq!(a.role_name(op), "operator");
        assert_eq!(a.authenticate(b"0123456789abcdef-o"), Err(Denied::BadToken));
        assert_eq!(a.authenticate(b""), Err(Denied::BadToken));
        assert_eq!(a.authenticate(&[b'x'; 5000]), Err(Denied::BadToken));
    }

    #[test]
    fn roles_allow_per_class() {
        let a = access();
        let op = a.authenticate(b"0123456789abcdef-op").expect("op");
        let view = a.authenticate(b"0123456789abcdef-view").expect("view");
        let admin = a.authenticate(b"0123456789abcdef-admin").expect("admin");
        assert!(a.allows(op, Class::Publish, "/cmd_vel"));
        assert!(a.allows(op, Class::Publish, "/cmd_vel"), "cached");
        assert!(!a.allows(op, Class::Publish, "/other"));
        assert!(!a.allows(op, Class::Subscribe, "/cmd_vel"));
        assert!(a.allows(op, Class::Subscribe, "/camera/image"));
        assert!(!a.allows(op, Class::Call, "/rosapi/topics"));
        assert!(!a.allows(view, Class::Publish, "/cmd_vel"));
        assert!(a.allows(view, Class::Subscribe, "/anything"));
        assert!(a.allows(view, Class::Call, "/rosapi/topics"));
        assert!(!a.allows(view, Class::Call, "/robot/reset"));
        assert!(!a.allows(view, Class::ParamWrite, "/ctl:gain"));
        for c in Class::ALL {
            assert!(a.allows(admin, c, "/x"));
        }
    }

    #[test]
    fn no_tokens_means_open() {
        let a = Access::new(Vec::new(), Vec::new(), Vec::new()).expect("empty");
        assert!(!a.required());
        assert!(a.allows(a.open_role(), Class::Publish, "/cmd_vel"));
    }

    #[test]
    fn bad_token_files_are_refused_without_echoing_tokens() {
        let err = |tokens: Vec<TokenLine>| match Access::new(tokens, Vec::new(), Vec::new()) {
            Err(ConfigError::Tokens(e)) => e,
            other => panic!("{other:?}"),
        };
        let e = err(vec![line("short", "admin", 3)]);
        assert!(e.starts_with("line 3:") && !e.contains("short"), "{e}");
        let e = err(vec![line("0123456789abcdef-x", "ghost", 7)]);
        assert!(e.starts_with("line 7: unknown role \"ghost\""), "{e}");
        let e = err(vec![
            line("0123456789abcdef-x", "admin", 1),
            line("0123456789abcdef-x", "viewer", 4),
        ]);
        assert!(
            e.starts_with("line 4: duplicate") && !e.contains("0123"),
            "{e}"
        );
        let mut big = RoleDef::viewer();
        big.name = "big".into();
        big.globs[0] = vec!["*".into(); MAX_GLOBS + 1];
        assert!(matches!(
            Access::new(Vec::new(), vec![big], Vec::new()),
            Err(ConfigError::Roles(e)) if e.contains("role big")
        ));
    }

    #[test]
    fn token_comparison_is_exact_and_touches_every_position() {
        assert!(ct_eq(b"secret-token", b"secret-token"));
        // A prefix, an extension, one byte off at either end, a case change.
        for other in [
            &b"secret-toke"[..],
            b"secret-token!",
            b"Secret-token",
            b"secret-tokeN",
            b"",
        ] {
            assert!(!ct_eq(b"secret-token", other), "{other:?}");
        }
        // Longer than any token may be: never equal, even to itself (and
        // the loop still runs MAX_TOKEN_BYTES positions, not its length).
        let long = vec![b'a'; MAX_TOKEN_BYTES + 1];
        assert!(!ct_eq(&long, &long));
        let max = vec![b'a'; MAX_TOKEN_BYTES];
        assert!(ct_eq(&max, &max));
        // Zero bytes past the end are not padding that matches: the
        // lengths are folded in.
        assert!(!ct_eq(b"abc", b"abc\0"));
        // `authenticate` finds the first of several tokens and compares
        // against all of them.
        let a = access();
        assert!(a.authenticate(b"").is_err());
    }

    #[test]
    fn origins_loopback_listed_absent() {
        let a = access();
        assert!(a.origin_allowed(None).is_ok());
        for ok in [
            "http://localhost:5173",
            "http://127.0.0.1",
            "https://127.8.0.1:8443",
            "http://[::1]:3000",
            "https://OPS.example.com",
            "https://ops.example.com/",
        ] {
            assert!(a.origin_allowed(Some(ok)).is_ok(), "{ok}");
        }
        for bad in [
            "https://evil.example",
            "http://localhost.evil.example",
            "http://127.0.0.1.evil.example",
            "null",
            "file://",
            "http://localhost:80x",
            "https://ops.example.com:444",
        ] {
            assert!(a.origin_allowed(Some(bad)).is_err(), "{bad}");
        }
    }
}
