//! Security (docs/security.md): tokens (`--auth-tokens`) on TCP, WebSocket
//! and HTTP, roles with allowlists per class of operation (`--auth-roles`),
//! introspection filtered per role, browser origins, `/metrics` behind a
//! token, the start-up refusals, and the CLI's `--token`.
//!
//! Every gateway here is started with tokens from a temporary file. The
//! shared harness's `Gateway::stats` cannot be used on such a gateway (its
//! fresh connection has no token): [`stats`] authenticates first. WebSocket
//! peers ask for info statuses (`set_level info`) once they are admitted, so
//! both transports answer alike; the barrier ([`Peer::pending`]) is an
//! `unsubscribe`, which no allowlist restricts.

use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::http::{exchange, Reply};
use crate::peer::*;
use crate::support::*;
use crate::wsclient::*;

// ---------------------------------------------------------------------------------------------
// Tokens and roles
// ---------------------------------------------------------------------------------------------

/// Tokens of the built-in roles and of the roles files below. Distinct
/// enough that finding one in a log or a reply cannot be a coincidence.
pub(crate) const ADMIN: &str = "adm1n-T0ken-6f3c9a1e0d";
const VIEWER: &str = "v1ewer-T0ken-2b7d4c8f1a";
const OP: &str = "0perat0r-T0ken-9e1a5d3b7c";
const RB: &str = "r0sbr1dge-T0ken-4c6e8a2f5b";
const RBS: &str = "rb-spl1t-T0ken-7a3f1c9e2d";
const LIMITED: &str = "l1m1ted-T0ken-3d5b7f9a1c";
/// A token with characters a URL query must escape (`+` would be read as a
/// space, `&` and `=` split the query, `%` starts an escape).
const SPECIAL: &str = "Sp3c!al+t0ken/=&%~*x";
/// Configured nowhere.
pub(crate) const WRONG: &str = "wr0ng-T0ken-0000000000";

const STRING: &str = "std_msgs/msg/String";
const FIB: &str = "example_interfaces/action/Fibonacci";

/// `role token` lines for the built-in roles only.
pub(crate) const BUILTIN_TOKENS: &[(&str, &str)] = &[("admin", ADMIN), ("viewer", VIEWER)];

/// A roles file using every class by its own key (`op`), rosbridge's keys
/// (`rb`: combined globs, one in rosbridge's string form; `rbs`: the split
/// topic globs), and one restricted for introspection (`limited`).
const ROLES: &str = r#"# every class, by our keys
op:
  publish: ["/op/pub/*", "/robot_?/cmd", "/r1/plan"]
  subscribe: ["/op/sub/*"]
  call: ["/op/srv/*", "/rosapi/*", "/rosgate/*", "/op_node_*/get_parameters", "/op_node_*/list_parameters", "/op_node_*/set_parameters", "/op_node_*/set_parameters_atomically"]
  provide: ["/op/provided/*"]
  action_send: ["/op/act/*"]
  action_serve: ["/op/serve/*"]
  param_read: ["/op_node_*:read_*", "global_*"]
  param_write: ["/op_node_*:write_*", "/op_owner_*:own_*", "global_write_*"]
# rosbridge's keys
rb:
  topics_glob: "['/rb/t/*', '/rb/u']"
  services_glob: ["/rb/s/*", "/rosapi/*"]
  actions_glob: ["/rb/a/*"]
  params_glob: ["/rb_node_*:*"]
rbs:
  topics_pub_glob: ["/rbs/pub"]
  topics_sub_glob: ["/rbs/sub"]
limited:
  publish: ["/vis/pub"]
  subscribe: ["/vis/sub/*"]
  call: ["/rosapi/*", "/rosgate/*", "/vis/srv"]
  provide: ["/vis/provided"]
  action_send: ["/vis/act"]
  action_serve: ["/vis/served"]
  param_read: ["/vis_node:*"]
"#;

const ROLE_TOKENS: &[(&str, &str)] = &[
    ("admin", ADMIN),
    ("viewer", VIEWER),
    ("op", OP),
    ("rb", RB),
    ("rbs", RBS),
    ("limited", LIMITED),
];

/// Every token any test presents, right or wrong: none may ever be echoed.
const ALL_TOKENS: &[&str] = &[ADMIN, VIEWER, OP, RB, RBS, LIMITED, SPECIAL, WRONG];

/// `s` for a URL query: unreserved characters as they are, others `%XX`.
fn pct(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Files and gateways
// ---------------------------------------------------------------------------------------------

pub(crate) fn token_file(tokens: &[(&str, &str)]) -> TempFile {
    let mut text = String::from("# role token\n\n");
    for (role, token) in tokens {
        text.push_str(&format!("{role} {token}\n"));
    }
    TempFile::new("tokens.txt", &text)
}

/// A gateway with tokens (and roles); the files live as long as it.
struct Secure {
    gw: Gateway,
    _files: Vec<TempFile>,
}

impl std::ops::Deref for Secure {
    type Target = Gateway;
    fn deref(&self) -> &Gateway {
        &self.gw
    }
}

/// A failing test shows what its gateway logged.
impl Drop for Secure {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("gateway log:\n{}", self.gw.logs().join("\n"));
        }
    }
}

impl std::ops::DerefMut for Secure {
    fn deref_mut(&mut self) -> &mut Gateway {
        &mut self.gw
    }
}

fn secure(tokens: &[(&str, &str)], roles: Option<&str>, extra: &[&str]) -> Secure {
    let tf = token_file(tokens);
    let mut files = vec![];
    let mut args: Vec<String> = vec!["--auth-tokens".into(), tf.path().into()];
    files.push(tf);
    if let Some(r) = roles {
        let rf = TempFile::new("roles.yaml", r);
        args.push("--auth-roles".into());
        args.push(rf.path().into());
        files.push(rf);
    }
    // These tests present many wrong tokens from 127.0.0.1 on purpose;
    // the per-address budget of wrong tokens has its own test
    // (`token_guessing_from_one_address_is_held_past_its_budget`).
    args.extend(["--auth-failure-budget".into(), "1000000".into()]);
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Secure {
        gw: Gateway::start(&args),
        _files: files,
    }
}

/// The gateway with the built-in roles only.
fn builtin_gateway(extra: &[&str]) -> Secure {
    secure(BUILTIN_TOKENS, None, extra)
}

/// The gateway with [`ROLES`].
fn roles_gateway() -> Secure {
    secure(ROLE_TOKENS, Some(ROLES), &[])
}

// ---------------------------------------------------------------------------------------------
// WebSocket openings
// ---------------------------------------------------------------------------------------------

/// Opens a WebSocket; returns the response head and the socket.
fn ws_open(gw: &Gateway, target: &str, headers: &str) -> (String, Ws) {
    let mut ws = Ws::raw(gw);
    let head = ws.handshake(&upgrade_request(target, headers));
    (head, ws)
}

/// An opening that must be refused: the whole HTTP answer, after which the
/// gateway closed the connection.
fn ws_refused(gw: &Gateway, target: &str, headers: &str) -> Reply {
    exchange(ws_addr(gw), upgrade_request(target, headers).as_bytes())
}

fn assert_status_code(r: &Reply, status: u16, what: &str) {
    assert_eq!(
        r.status,
        status,
        "{what}: {}",
        String::from_utf8_lossy(&r.raw)
    );
}

// ---------------------------------------------------------------------------------------------
// A peer on either transport (crate::peer), authenticated
// ---------------------------------------------------------------------------------------------

/// The barrier of security's peers: an `unsubscribe`, which no allowlist
/// restricts (a rosapi call, the default, may be refused to a role).
fn barrier() -> Value {
    json!({"op":"unsubscribe","topic":"/security_barrier"})
}

impl Peer {
    /// TCP, authenticated with `token` by the `auth` op.
    fn tcp_as(gw: &Gateway, token: &str) -> Peer {
        let mut p = Peer::tcp(gw).with_barrier(barrier());
        let msg = p.ok(json!({"op":"auth","token":token}));
        assert!(msg.starts_with("authenticated as role "), "{msg}");
        p
    }

    /// WebSocket with `?token=`, asking for every status.
    fn ws_as(gw: &Gateway, token: &str) -> Peer {
        Peer::admitted(gw, &format!("/?token={}", pct(token)), "")
    }

    /// A WebSocket admitted at `target` with `headers`, asking for every
    /// status.
    fn admitted(gw: &Gateway, target: &str, headers: &str) -> Peer {
        Peer::ws_at(gw, target, headers).with_barrier(barrier())
    }

    fn open_as(gw: &Gateway, via: Via, token: &str) -> Peer {
        match via {
            Via::Tcp => Peer::tcp_as(gw, token),
            Via::Ws => Peer::ws_as(gw, token),
        }
    }

    /// `req` must be refused with exactly `forbidden: role ROLE may not
    /// VERB NAME`, carrying its id. Returns the request's id.
    fn forbidden(&mut self, req: Value, role: &str, verb: &str, name: &str) -> String {
        let v = self.request(req.clone());
        assert_eq!(
            (v["op"].as_str(), v["level"].as_str()),
            (Some("status"), Some("error")),
            "{}: {req} -> {v}",
            self.name
        );
        assert_eq!(
            v["msg"],
            format!("forbidden: role {role} may not {verb} {name}"),
            "{}: {req}",
            self.name
        );
        v["id"].as_str().expect("string id").to_string()
    }

    /// A call that must be refused: the `forbidden` status, then the failed
    /// response with the same id.
    fn call_forbidden(&mut self, role: &str, service: &str) {
        let id = self.forbidden(
            json!({"op":"call_service","service":service,"args":{}}),
            role,
            "call",
            service,
        );
        let want = json!(id);
        let (v, skipped) = self.until(|v| v["id"] == want);
        assert!(skipped.is_empty(), "{}: {skipped:?}", self.name);
        assert_eq!(v["op"], "service_response", "{v}");
        assert_eq!(v["service"], service, "{v}");
        assert_failure(&v);
        assert_eq!(v["values"], format!("forbidden: may not call {service}"));
    }

    /// A goal that must be refused: the `forbidden` status, then its failed
    /// `action_result` (status 0) with the same id.
    fn goal_forbidden(&mut self, role: &str, action: &str) {
        let id = self.forbidden(
            json!({"op":"send_action_goal","action":action,"action_type":FIB,"args":{"order":2}}),
            role,
            "send goals to",
            action,
        );
        let want = json!(id);
        let (v, skipped) = self.until(|v| v["id"] == want);
        assert!(skipped.is_empty(), "{}: {skipped:?}", self.name);
        assert_eq!(v["op"], "action_result", "{v}");
        assert_eq!(v["action"], action, "{v}");
        assert_eq!(v["status"], 0, "{v}");
        assert_eq!(v["result"], false, "{v}");
        assert_eq!(
            v["values"],
            format!("forbidden: may not send goals to {action}")
        );
    }

    /// The next forwarded call (`call_service` with an `rg-` id).
    fn forwarded_call(&mut self, service: &str) -> Value {
        let (v, skipped) = self.until(|v| v["op"] == "call_service");
        assert!(skipped.is_empty(), "{}: {skipped:?}", self.name);
        assert_eq!(v["service"], service, "{v}");
        v
    }

    /// The next forwarded goal.
    fn forwarded_goal(&mut self, action: &str) -> Value {
        let (v, skipped) = self.until(|v| v["op"] == "send_action_goal");
        assert!(skipped.is_empty(), "{}: {skipped:?}", self.name);
        assert_eq!(v["action"], action, "{v}");
        v
    }

    /// The next published message on `topic` (nothing else may come first).
    fn message(&mut self, topic: &str) -> Value {
        let (v, skipped) = self.until(|v| v["op"] == "publish");
        assert!(skipped.is_empty(), "{}: {skipped:?}", self.name);
        assert_eq!(v["topic"], topic, "{v}");
        v["msg"].clone()
    }
}

/// `/rosgate/stats` through a fresh admin connection (counted in
/// `authenticated`).
fn stats(gw: &Gateway) -> Value {
    Peer::tcp_as(gw, ADMIN).values("/rosgate/stats", json!({}))
}

/// Polls `/rosgate/stats` on `obs` until `pred` holds.
fn stats_until(obs: &mut Peer, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let dl = deadline(Duration::from_secs(10));
    loop {
        let s = obs.values("/rosgate/stats", json!({}));
        if pred(&s) {
            return s;
        }
        assert!(
            Instant::now() < dl,
            "stats never satisfied `{what}`; last: {s}"
        );
        std::thread::sleep(ms(20));
    }
}

/// The strings of a JSON array.
fn strs(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|s| {
            s.as_str()
                .unwrap_or_else(|| panic!("not a string: {s}"))
                .to_string()
        })
        .collect()
}

/// An `rcl_interfaces/msg/ParameterValue` holding integer `i` (type 0,
/// "not set", for None).
fn int_value(i: Option<i64>) -> Value {
    json!({
        "type": if i.is_some() { 2 } else { 0 }, "bool_value": false, "integer_value": i.unwrap_or(0),
        "double_value": 0.0, "string_value": "", "byte_array_value": [], "bool_array_value": [],
        "integer_array_value": [], "double_array_value": [], "string_array_value": [],
    })
}

/// Asserts no token (nor its URL-escaped form) appears in `text`.
fn assert_no_token(text: &str, where_: &str) {
    for t in ALL_TOKENS {
        assert!(
            !text.contains(t) && !text.contains(&pct(t)),
            "{where_} holds the token {t:?}: {text}"
        );
    }
}

// =============================================================================================
// Tokens
// =============================================================================================

const AUTH_FIRST: &str =
    r#"authenticate first: {"op":"auth","token":"..."} (or the WebSocket URL's ?token=)"#;

#[test]
fn tcp_clients_authenticate_with_the_auth_op_before_anything_else() {
    let gw = builtin_gateway(&[]);
    let mut obs = Peer::tcp_as(&gw, ADMIN);
    let base = obs.values("/rosgate/stats", json!({}));

    // No token yet: every request is refused with its id (string, number,
    // none), and the connection stays open.
    let mut c = gw.client();
    c.send_line(r#"{"op":"subscribe","topic":"/a","type":"std_msgs/msg/String","id":"s1"}"#);
    assert_eq!(c.expect_error("s1")["msg"], AUTH_FIRST);
    c.send_line(r#"{"op":"call_service","service":"/rosgate/stats","id":7,"args":{}}"#);
    assert_eq!(c.expect_error(7)["msg"], AUTH_FIRST);
    c.send_line(r#"{"op":"publish","topic":"/a","msg":{"data":"x"}}"#);
    assert_eq!(c.expect_error_no_id()["msg"], AUTH_FIRST);
    // The right token admits it with its role.
    c.send_json(&json!({"op":"auth","token":ADMIN,"id":"a1"}));
    assert_eq!(c.expect_info("a1")["msg"], "authenticated as role admin");
    assert_eq!(
        c.stats()["authenticated"],
        counter(&base, "authenticated") + 1
    );
    // A second auth changes nothing.
    c.send_json(&json!({"op":"auth","token":VIEWER,"id":"a2"}));
    assert_eq!(
        c.expect_info("a2")["msg"],
        "auth: already authenticated; ignored"
    );
    c.send_line(
        r#"{"op":"advertise","topic":"/still_admin","type":"std_msgs/msg/String","id":"ad"}"#,
    );
    c.expect_info("ad");

    // rosbridge's auth op, the token in `mac`, other fields as roslibjs'
    // Ros.authenticate sends them (ignored).
    let mut m = gw.client();
    m.send_json(
        &json!({"op":"auth","mac":VIEWER,"client":"192.168.1.101","dest":"192.168.1.111",
        "rand":"xyz","t":1700000000,"level":"admin","end":1700000100,"id":"m"}),
    );
    assert_eq!(m.expect_info("m")["msg"], "authenticated as role viewer");
    // `token` wins over `mac`.
    let mut both = gw.client();
    both.send_json(&json!({"op":"auth","token":VIEWER,"mac":ADMIN,"id":"b"}));
    assert_eq!(both.expect_info("b")["msg"], "authenticated as role viewer");

    // A wrong token: one error status (without the token), then the close.
    // Near misses too: the comparison is exact.
    let mut near = vec![
        WRONG.to_string(),
        ADMIN.to_uppercase(),
        ADMIN[..ADMIN.len() - 1].to_string(),
        format!("{ADMIN}x"),
        format!(" {ADMIN}"),
        "x".repeat(300),
    ];
    near.push(String::new());
    for bad in &near {
        let mut w = gw.client();
        w.send_json(&json!({"op":"auth","token":bad,"id":"w"}));
        let v = w.expect_error("w");
        assert_eq!(v["msg"], "auth: authentication failed; closing", "{bad:?}");
        w.expect_closed(REPLY);
    }
    // No token at all: the same.
    let mut n = gw.client();
    n.send_line(r#"{"op":"auth","id":"n"}"#);
    let v = n.expect_error("n");
    assert!(
        v["msg"].as_str().is_some_and(|m| m.contains("no token")),
        "{v}"
    );
    n.expect_closed(REPLY);
    // An unauthenticated client was not admitted anywhere: its subscribe
    // never happened.
    let s = stats_until(&mut obs, "closes counted", |s| {
        counter(s, "closes.auth_failed") == near.len() as u64 + 1
    });
    let delta = |path: &str| counter(&s, path) - counter(&base, path);
    // c, m and both; the near misses and the tokenless auth count nowhere.
    assert_eq!(delta("authenticated"), 3, "{s}");
    assert_eq!(delta("errors.unauthenticated"), 3, "{s}");
    assert_eq!(delta("errors.forbidden"), 0, "{s}");
    assert_eq!(counter(&s, "subscriptions"), 0, "{s}");
}

#[test]
fn websocket_clients_authenticate_by_header_query_or_auth_op() {
    let gw = secure(
        &[("admin", ADMIN), ("viewer", VIEWER), ("admin", SPECIAL)],
        None,
        &[],
    );
    let mut obs = Peer::tcp_as(&gw, ADMIN);
    let base = obs.values("/rosgate/stats", json!({}));
    let stats_req = r#"{"op":"call_service","service":"/rosgate/stats","id":"st","args":{}}"#;

    // Admitted at once: nothing else to send before a request.
    let admitted: Vec<(String, String)> = vec![
        ("/".into(), format!("Authorization: Bearer {ADMIN}\r\n")),
        ("/".into(), format!("authorization: bearer   {ADMIN} \r\n")),
        (format!("/?token={ADMIN}"), String::new()),
        (
            format!("/?node=tok_{}&token={}", uniq(), pct(ADMIN)),
            String::new(),
        ),
        (format!("/?token={}", pct(SPECIAL)), String::new()),
        ("/".into(), format!("Authorization: Bearer {SPECIAL}\r\n")),
        // The header is asked first.
        (
            format!("/?token={WRONG}"),
            format!("Authorization: Bearer {ADMIN}\r\n"),
        ),
    ];
    for (target, headers) in &admitted {
        let mut ws = Ws::connect_at(&gw, target, headers);
        ws.send_text(stats_req);
        let v = ws.json();
        assert_eq!(
            (&v["op"], &v["id"], &v["result"]),
            (&json!("service_response"), &json!("st"), &json!(true)),
            "{target} {headers:?}: {v}"
        );
    }
    // The token's role applies.
    let mut ws = Ws::connect_at(&gw, &format!("/?token={VIEWER}"), "");
    ws.send_text(r#"{"op":"advertise","topic":"/w","type":"std_msgs/msg/String","id":"adv"}"#);
    let v = ws.json();
    assert_eq!(
        v["msg"], "forbidden: role viewer may not publish on /w",
        "{v}"
    );
    assert_eq!(v["id"], "adv");

    // Wrong tokens: 401 and the close; the body does not hold the token.
    let refused: Vec<(String, String)> = vec![
        ("/".into(), format!("Authorization: Bearer {WRONG}\r\n")),
        (format!("/?token={WRONG}"), String::new()),
        // `+` in a query is a space: the token must be escaped.
        (format!("/?token={SPECIAL}"), String::new()),
        ("/?token=".into(), String::new()),
    ];
    for (target, headers) in &refused {
        let r = ws_refused(&gw, target, headers);
        assert_status_code(&r, 401, &format!("{target} {headers:?}"));
        assert_no_token(&String::from_utf8_lossy(&r.raw), "the 401 answer");
    }

    // No token (another scheme is none): upgraded, but nothing works
    // before the auth op; errors reach it (the default status level).
    for headers in ["", "Authorization: Basic YWxhZGRpbjpvcGVuc2VzYW1l\r\n"] {
        let mut ws = Ws::connect_at(&gw, "/", headers);
        ws.send_text(r#"{"op":"subscribe","topic":"/a","type":"std_msgs/msg/String","id":"s"}"#);
        let v = ws.json();
        assert_eq!(
            (&v["msg"], &v["id"]),
            (&json!(AUTH_FIRST), &json!("s")),
            "{v}"
        );
        // What roslibjs' Ros.authenticate(mac, client, dest, rand, t,
        // level, end) sends: no id, and no answer at the default level.
        ws.send_text(
            &json!({"op":"auth","mac":ADMIN,"client":"192.168.1.101","dest":"192.168.1.111",
                "rand":"xyz","t":1700000000,"level":"admin","end":1700000100})
            .to_string(),
        );
        ws.send_text(stats_req);
        let v = ws.json();
        assert_eq!(
            (&v["op"], &v["id"]),
            (&json!("service_response"), &json!("st")),
            "{v}"
        );
    }
    // A wrong auth op after a tokenless upgrade: the error, then the close.
    let mut ws = Ws::connect_at(&gw, "/", "");
    ws.send_text(&json!({"op":"auth","mac":WRONG,"id":"bad"}).to_string());
    let v = ws.json();
    assert_eq!(
        (&v["msg"], &v["id"]),
        (
            &json!("auth: authentication failed; closing"),
            &json!("bad")
        ),
        "{v}"
    );
    ws.expect_eof();

    let s = stats_until(&mut obs, "closes counted", |s| {
        counter(s, "closes.auth_failed") - counter(&base, "closes.auth_failed")
            == refused.len() as u64 + 1
    });
    let delta = |path: &str| counter(&s, path) - counter(&base, path);
    assert_eq!(delta("authenticated"), admitted.len() as u64 + 1 + 2, "{s}");
    assert_eq!(delta("errors.unauthenticated"), 2, "{s}");
}

#[test]
fn a_client_that_never_authenticates_is_closed_at_the_opening_deadline() {
    let gw = builtin_gateway(&["--handshake-timeout-ms", "500"]);
    let t0 = Instant::now();
    let mut admitted = Peer::tcp_as(&gw, VIEWER);
    let mut silent = gw.client();
    let mut chatty = gw.client();
    let mut ws = Ws::connect_at(&gw, "/", "");
    // Requests do not count as an opening.
    chatty.send_line(r#"{"op":"call_service","service":"/rosgate/stats","id":1,"args":{}}"#);
    assert_eq!(chatty.expect_error(1)["msg"], AUTH_FIRST);
    ws.send_text(r#"{"op":"call_service","service":"/rosgate/stats","id":2,"args":{}}"#);
    assert_eq!(ws.json()["msg"], AUTH_FIRST);
    silent.expect_closed(REPLY);
    chatty.expect_closed(REPLY);
    ws.expect_eof();
    let took = t0.elapsed();
    assert!(
        took >= ms(400),
        "closed before the deadline ({took:?} < 500 ms)"
    );
    // The admitted one stays, well past the deadline.
    let s = admitted.values("/rosgate/stats", json!({}));
    assert_eq!(counter(&s, "closes.handshake_timeout"), 3, "{s}");
    assert_eq!(counter(&s, "closes.auth_failed"), 0, "{s}");
    let s = stats(&gw);
    assert_eq!(counter(&s, "connections_open"), 2, "{s}");
    assert_eq!(counter(&s, "connections_pending"), 0, "{s}");
}

/// An unauthenticated connection counts among the unfinished openings that
/// make room for newcomers at the connection limit.
#[test]
fn unauthenticated_connections_make_room_at_the_connection_limit() {
    let gw = builtin_gateway(&["--max-connections", "3"]);
    let mut admitted = Peer::tcp_as(&gw, ADMIN);
    let mut waiting = gw.client();
    let mut ws = Ws::connect_at(&gw, "/", "");
    // Both are open (each answered), and the limit is reached.
    waiting.send_line(r#"{"op":"call_service","service":"/rosgate/stats","id":1,"args":{}}"#);
    assert_eq!(waiting.expect_error(1)["msg"], AUTH_FIRST);
    ws.send_text(r#"{"op":"call_service","service":"/rosgate/stats","id":2,"args":{}}"#);
    assert_eq!(ws.json()["msg"], AUTH_FIRST);
    // A newcomer gets in: the oldest unfinished opening goes.
    let mut newcomer = Peer::tcp_as(&gw, VIEWER);
    waiting.expect_closed(REPLY);
    let s = newcomer.values("/rosgate/stats", json!({}));
    assert_eq!(counter(&s, "closes.evicted"), 1, "{s}");
    assert_eq!(counter(&s, "connections_rejected"), 0, "{s}");
    // The admitted client was never a candidate.
    admitted.values("/rosgate/stats", json!({}));
}

/// A tokenless WebSocket opening may still authenticate with the `auth`
/// op; until then what its URL asks for (`?node=`) must not take effect,
/// or an unauthenticated client could put nodes into the graph and hold
/// their names.
#[test]
fn a_tokenless_opening_declares_no_node_before_authenticating() {
    let gw = builtin_gateway(&[]);
    let mut admin = Peer::tcp_as(&gw, ADMIN);
    let (head, _squatter) = ws_open(&gw, "/?node=controller", "");
    // Refusing the opening would do as well; admitting it must not
    // declare the node.
    if head.starts_with("HTTP/1.1 101 ") {
        let nodes = strs(&admin.values("/rosapi/nodes", json!({}))["nodes"]);
        assert!(!nodes.contains(&"/controller".to_string()), "{nodes:?}");
    }
    // The real controller, with a token, gets its name.
    let mut real = Peer::tcp_as(&gw, ADMIN);
    assert_eq!(real.node("controller", json!({})), "/controller");
}

#[test]
fn no_token_is_ever_echoed_in_statuses_logs_or_metrics() {
    let mut gw = secure(ROLE_TOKENS, Some(ROLES), &["--log-level", "debug"]);
    let mut seen = String::new();
    // TCP: right, wrong, mac, and lines that fail to decode around a
    // token.
    let mut a = Peer::tcp_as(&gw, OP);
    a.forbidden(
        json!({"op":"advertise","topic":"/nope","type":STRING}),
        "op",
        "publish on",
        "/nope",
    );
    seen += &a.call("/rosgate/connections", json!({})).to_string();
    seen += &a.call("/rosgate/stats", json!({})).to_string();
    for line in [
        format!(r#"{{"op":"auth","token":"{WRONG}","id":"w"}}"#),
        format!(r#"{{"op":"auth","token":"{ADMIN}",}}"#),
        format!(r#"{{"op":"auth","token":"{ADMIN}","id":}}"#),
        format!(r#"{{"op":"authx","token":"{ADMIN}","id":1}}"#),
        format!(r#"{{"op":"auth","token":["{ADMIN}"],"id":2}}"#),
        format!(r#"["{ADMIN}"]"#),
        format!(r#"{{"op":"auth","mac":"{VIEWER}\u0001","id":3}}"#),
    ] {
        let mut c = gw.client();
        c.send_line(&line);
        c.send_json(&json!({"op":"auth","token":WRONG}));
        for l in c.expect_closed(REPLY) {
            seen += &String::from_utf8_lossy(&l);
            seen.push('\n');
        }
    }
    // WebSocket: right and wrong, header and query, and the auth op.
    for (target, headers) in [
        (format!("/?token={WRONG}"), String::new()),
        (format!("/?token={}", pct(SPECIAL)), String::new()),
        (
            "/".to_string(),
            format!("Authorization: Bearer {WRONG}\r\n"),
        ),
    ] {
        let r = ws_refused(&gw, &target, &headers);
        seen += &String::from_utf8_lossy(&r.raw);
    }
    let mut ws = Peer::ws_as(&gw, VIEWER);
    seen += &ws.call("/rosgate/connections", json!({})).to_string();
    let mut ws = Peer::admitted(&gw, "/", &format!("Authorization: Bearer {RB}\r\n"));
    seen += &ws
        .request(json!({"op":"advertise","topic":"/x","type":STRING}))
        .to_string();
    let mut ws = Ws::connect_at(&gw, "/", "");
    ws.send_text(&json!({"op":"auth","mac":WRONG,"id":"w"}).to_string());
    while let Some((_, payload)) = ws.try_frame(deadline(REPLY)) {
        seen += &String::from_utf8_lossy(&payload);
    }
    // HTTP.
    for (path, headers) in [
        (format!("/metrics?token={WRONG}"), String::new()),
        (
            "/metrics".to_string(),
            format!("Authorization: Bearer {WRONG}\r\n"),
        ),
        (format!("/metrics?token={ADMIN}"), String::new()),
        (
            "/metrics".to_string(),
            format!("Authorization: Bearer {ADMIN}\r\n"),
        ),
        (format!("/healthz?token={ADMIN}"), String::new()),
    ] {
        let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\n{headers}\r\n");
        seen += &String::from_utf8_lossy(&exchange(ws_addr(&gw), req.as_bytes()).raw);
    }
    // What was received is what was meant to be checked.
    for want in [
        "rosgate_authenticated_total",
        "auth: authentication failed; closing",
        "401 Unauthorized",
        "forbidden: role rb may not publish on /x",
        "invalid JSON",
        "\"connections\"",
    ] {
        assert!(seen.contains(want), "{want:?} in {seen}");
    }
    assert_no_token(&seen, "what clients received");
    // The counters logged on SIGUSR1 and at shutdown too.
    gw.signal(libc::SIGUSR1);
    let dl = deadline(REPLY);
    while !gw.logs().iter().any(|l| l.contains("auth_failed")) {
        assert!(Instant::now() < dl, "no counters logged: {:?}", gw.logs());
        std::thread::sleep(ms(20));
    }
    gw.signal(libc::SIGTERM);
    assert!(gw.wait_exit(Duration::from_secs(10)).is_some(), "no exit");
    let logs = gw.logs().join("\n");
    assert!(logs.contains("auth_failed"), "{logs}");
    assert_no_token(&logs, "the log");
}

// =============================================================================================
// Roles
// =============================================================================================

/// `op` (every class by our keys) against an admin counterpart, on each
/// transport: each class allowed by its globs and refused outside them.
#[test]
fn every_class_is_allowed_by_its_globs_and_refused_outside_them() {
    let gw = roles_gateway();
    let mut obs = Peer::tcp_as(&gw, ADMIN);
    let base = obs.values("/rosgate/stats", json!({}));
    let mut refusals = 0u64;
    for via in VIAS {
        let tag = via.tag();
        let mut admin = Peer::tcp_as(&gw, ADMIN);
        let mut op = Peer::open_as(&gw, via, OP);

        // publish: advertise, and publish without advertising.
        let pubt = format!("/op/pub/{tag}_adv");
        let free = format!("/op/pub/{tag}/deep/free");
        let elsewhere = format!("/op/sub/{tag}_x");
        admin.ok(json!({"op":"subscribe","topic":pubt,"type":STRING}));
        admin.ok(json!({"op":"subscribe","topic":free,"type":STRING}));
        admin.ok(json!({"op":"subscribe","topic":elsewhere,"type":STRING}));
        op.ok(json!({"op":"advertise","topic":pubt,"type":STRING}));
        op.send(&json!({"op":"publish","topic":pubt,"msg":{"data":"adv"}}));
        op.send(&json!({"op":"publish","topic":free,"msg":{"data":"free"}}));
        op.forbidden(
            json!({"op":"advertise","topic":elsewhere,"type":STRING}),
            "op",
            "publish on",
            &elsewhere,
        );
        op.forbidden(
            json!({"op":"publish","topic":elsewhere,"msg":{"data":"no"}}),
            "op",
            "publish on",
            &elsewhere,
        );
        refusals += 2;
        op.quiet();
        assert_eq!(admin.message(&pubt), json!({"data":"adv"}));
        assert_eq!(admin.message(&free), json!({"data":"free"}));
        admin.quiet();
        // `?` is exactly one character.
        for t in ["/robot_1/cmd", "/robot_x/cmd"] {
            op.ok(json!({"op":"advertise","topic":t,"type":STRING}));
        }
        for t in ["/robot_12/cmd", "/robot_/cmd", "/robot_1/cmd2", "/robot_1"] {
            op.forbidden(
                json!({"op":"advertise","topic":t,"type":STRING}),
                "op",
                "publish on",
                t,
            );
            refusals += 1;
        }

        // subscribe: `*` spans slashes; publish-only names are not readable.
        let sub = format!("/op/sub/{tag}/a/b");
        op.ok(json!({"op":"subscribe","topic":sub,"type":STRING}));
        for t in [pubt.as_str(), "/op/sub", "/op/subx", "/rosout"] {
            op.forbidden(
                json!({"op":"subscribe","topic":t,"type":STRING}),
                "op",
                "subscribe to",
                t,
            );
            refusals += 1;
        }
        admin.ok(json!({"op":"advertise","topic":sub,"type":STRING}));
        admin.send(&json!({"op":"publish","topic":sub,"msg":{"data":"down"}}));
        assert_eq!(op.message(&sub), json!({"data":"down"}));

        // call: forwarded when allowed; refused with a failed response
        // (the provider never sees it) otherwise.
        let srv = format!("/op/srv/{tag}_add");
        let other = format!("/other/srv_{tag}");
        admin.ok(json!({"op":"advertise_service","service":srv,"type":"example_interfaces/srv/AddTwoInts"}));
        admin.ok(json!({"op":"advertise_service","service":other,"type":"example_interfaces/srv/AddTwoInts"}));
        let id = format!("c{}", uniq());
        op.send(&json!({"op":"call_service","service":srv,"id":id,"args":{"a":1,"b":2}}));
        let fwd = admin.forwarded_call(&srv);
        admin.send(&json!({"op":"service_response","service":srv,"id":fwd["id"],"values":{"sum":3},"result":true}));
        let want = json!(id);
        let (v, _) = op.until(|v| v["id"] == want);
        assert_eq!(
            (&v["values"], &v["result"]),
            (&json!({"sum":3}), &json!(true)),
            "{v}"
        );
        op.call_forbidden("op", &other);
        refusals += 1;
        admin.quiet();
        // The gateway's own services are calls like any other.
        op.values("/rosapi/topics", json!({}));
        op.values("rosapi/services", json!({}));
        op.values("/rosgate/stats", json!({}));

        // provide
        let provided = format!("/op/provided/{tag}_s");
        op.ok(json!({"op":"advertise_service","service":provided,"type":"std_srvs/srv/Trigger"}));
        let srv2 = format!("/op/srv/{tag}_mine");
        op.forbidden(
            json!({"op":"advertise_service","service":srv2,"type":"std_srvs/srv/Trigger"}),
            "op",
            "provide",
            &srv2,
        );
        refusals += 1;

        // action_send: forwarded when allowed; a refused goal also gets its
        // failed result.
        let act = format!("/op/act/{tag}_fib");
        let other_act = format!("/other/act_{tag}");
        admin.ok(json!({"op":"advertise_action","action":act,"type":FIB}));
        admin.ok(json!({"op":"advertise_action","action":other_act,"type":FIB}));
        let gid = format!("g{}", uniq());
        op.send(&json!({"op":"send_action_goal","id":gid,"action":act,"action_type":FIB,"args":{"order":2}}));
        let fwd = admin.forwarded_goal(&act);
        admin.send(&json!({"op":"action_result","id":fwd["id"],"action":act,"values":{"sequence":[0,1]},"status":4,"result":true}));
        let want = json!(gid);
        let (v, _) = op.until(|v| v["id"] == want && v["op"] == "action_result");
        assert_eq!(
            (&v["status"], &v["result"]),
            (&json!(4), &json!(true)),
            "{v}"
        );
        op.goal_forbidden("op", &other_act);
        refusals += 1;
        admin.quiet();

        // action_serve
        let serve = format!("/op/serve/{tag}_x");
        op.ok(json!({"op":"advertise_action","action":serve,"type":FIB}));
        let act2 = format!("/op/act/{tag}_mine");
        op.forbidden(
            json!({"op":"advertise_action","action":act2,"type":FIB}),
            "op",
            "serve",
            &act2,
        );
        refusals += 1;
        op.quiet();
        admin.quiet();
    }
    let s = obs.values("/rosgate/stats", json!({}));
    assert_eq!(
        counter(&s, "errors.forbidden") - counter(&base, "errors.forbidden"),
        refusals,
        "{s}"
    );
}

/// Parameters are matched as `<node>:<name>` (a global one by its bare
/// name): reads through rosapi and the node services, writes through rosapi,
/// the node services and the owner's own ops.
#[test]
fn parameters_are_read_and_written_by_their_node_and_name() {
    let gw = roles_gateway();
    let mut obs = Peer::tcp_as(&gw, ADMIN);
    let base = obs.values("/rosgate/stats", json!({}));
    let mut refusals = 0u64;
    for via in VIAS {
        let tag = via.tag();
        let mut owner = Peer::tcp_as(&gw, ADMIN);
        let node = owner.node(&format!("op_node_{tag}"), json!({}));
        for (name, value) in [("read_a", 1), ("write_b", 2), ("secret", 3)] {
            owner.ok(json!({"op":"declare_parameter","name":name,"value":value}));
        }
        let mut admin = Peer::tcp_as(&gw, ADMIN);
        let mut op = Peer::open_as(&gw, via, OP);

        // param_read through rosapi.
        let v = op.values(
            "/rosapi/get_param",
            json!({"name": format!("{node}:read_a")}),
        );
        assert_eq!(v["value"], "1", "{v}");
        // The name may come without the leading slash: the same key.
        let v = op.values(
            "rosapi/get_param",
            json!({"name": format!("op_node_{tag}:read_a")}),
        );
        assert_eq!(v["value"], "1", "{v}");
        for p in ["secret", "write_b"] {
            let why = op.fails("/rosapi/get_param", json!({"name": format!("{node}:{p}")}));
            assert_eq!(why, format!("forbidden: may not read parameter {node}:{p}"));
            refusals += 1;
            let v = op.values("/rosapi/has_param", json!({"name": format!("{node}:{p}")}));
            assert_eq!(v, json!({"exists": false}));
            refusals += 1;
        }
        let v = op.values(
            "/rosapi/has_param",
            json!({"name": format!("{node}:read_a")}),
        );
        assert_eq!(v, json!({"exists": true}));
        let names = strs(&op.values("/rosapi/get_param_names", json!({}))["names"]);
        let mine: Vec<&String> = names.iter().filter(|n| n.starts_with(&node)).collect();
        assert_eq!(mine, [&format!("{node}:read_a")], "{names:?}");
        // param_read through the node's services: unreadable ones look
        // unset, and are not listed.
        let v = op.values(
            &format!("{node}/get_parameters"),
            json!({"names":["read_a","secret","write_b"]}),
        );
        assert_eq!(
            v["values"],
            json!([int_value(Some(1)), int_value(None), int_value(None)])
        );
        let v = op.values(&format!("{node}/list_parameters"), json!({}));
        assert_eq!(v["result"]["names"], json!(["read_a"]), "{v}");
        // A node service the role may not call is refused as a call.
        op.call_forbidden("op", &format!("{node}/describe_parameters"));
        refusals += 1;

        // param_write through rosapi.
        let v = op.values(
            "/rosapi/set_param",
            json!({"name": format!("{node}:write_b"), "value": "5"}),
        );
        assert_eq!(v, json!({"successful": true, "reason": ""}));
        let why = op.fails(
            "/rosapi/set_param",
            json!({"name": format!("{node}:read_a"), "value": "9"}),
        );
        assert_eq!(
            why,
            format!("forbidden: may not set parameter {node}:read_a")
        );
        refusals += 1;
        let why = op.fails(
            "/rosapi/delete_param",
            json!({"name": format!("{node}:read_a")}),
        );
        assert_eq!(
            why,
            format!("forbidden: may not set parameter {node}:read_a")
        );
        refusals += 1;
        // ... and the node's services: each parameter on its own, or all
        // or nothing.
        let v = op.values(
            &format!("{node}/set_parameters"),
            json!({"parameters":[{"name":"write_b","value":6},{"name":"read_a","value":7}]}),
        );
        assert_eq!(v["results"][0], json!({"successful": true, "reason": ""}));
        assert_eq!(v["results"][1]["successful"], false, "{v}");
        assert_eq!(
            v["results"][1]["reason"],
            format!("forbidden: may not set parameter {node}:read_a")
        );
        refusals += 1;
        let v = op.values(
            &format!("{node}/set_parameters_atomically"),
            json!({"parameters":[{"name":"write_b","value":8},{"name":"secret","value":8}]}),
        );
        assert_eq!(v["result"]["successful"], false, "{v}");
        assert!(
            v["result"]["reason"]
                .as_str()
                .is_some_and(|r| r.contains("forbidden")),
            "{v}"
        );
        refusals += 1;
        // What changed, seen by the admin.
        let v = admin.values(
            &format!("{node}/get_parameters"),
            json!({"names":["read_a","write_b","secret"]}),
        );
        assert_eq!(
            v["values"],
            json!([int_value(Some(1)), int_value(Some(6)), int_value(Some(3))])
        );

        // Global parameters by their bare names.
        let gw_name = format!("global_write_{tag}");
        let gr_name = format!("global_read_{tag}");
        admin.values("/rosapi/set_param", json!({"name": gr_name, "value": "1"}));
        let v = op.values("/rosapi/set_param", json!({"name": gw_name, "value": "2"}));
        assert_eq!(v["successful"], true, "{v}");
        assert_eq!(
            op.values("/rosapi/get_param", json!({"name": gw_name}))["value"],
            "2"
        );
        assert_eq!(
            op.values("/rosapi/get_param", json!({"name": gr_name}))["value"],
            "1"
        );
        let why = op.fails("/rosapi/set_param", json!({"name": gr_name, "value": "3"}));
        assert_eq!(why, format!("forbidden: may not set parameter {gr_name}"));
        refusals += 1;
        let why = op.fails("/rosapi/get_param", json!({"name": "other_global"}));
        assert_eq!(why, "forbidden: may not read parameter other_global");
        refusals += 1;

        // The owner's own ops on a node of its own.
        let mut own = Peer::open_as(&gw, via, OP);
        let onode = own.node(&format!("op_owner_{tag}"), json!({}));
        own.ok(json!({"op":"declare_parameter","name":"own_x","value":1}));
        own.ok(json!({"op":"set_parameter","name":"own_x","value":2}));
        for req in [
            json!({"op":"declare_parameter","name":"other","value":1}),
            json!({"op":"set_parameter","name":"other","value":1}),
            json!({"op":"undeclare_parameter","name":"other"}),
        ] {
            own.forbidden(req, "op", "set parameter", &format!("{onode}:other"));
            refusals += 1;
        }
        own.ok(json!({"op":"undeclare_parameter","name":"own_x"}));
        let names = strs(&admin.values("/rosapi/get_param_names", json!({}))["names"]);
        assert!(!names.iter().any(|n| n.starts_with(&onode)), "{names:?}");
        op.quiet();
        own.quiet();
        owner.quiet();
    }
    let s = obs.values("/rosgate/stats", json!({}));
    assert_eq!(
        counter(&s, "errors.forbidden") - counter(&base, "errors.forbidden"),
        refusals,
        "{s}"
    );
}

/// Names are checked after the client's namespace and remaps.
#[test]
fn names_are_checked_after_namespace_and_remaps() {
    let gw = roles_gateway();
    for via in VIAS {
        let mut op = Peer::open_as(&gw, via, OP);
        op.node(
            &format!("planner_{}", via.tag()),
            json!({"namespace":"/r1","remap":["cmd:=/r1/plan"]}),
        );
        op.ok(json!({"op":"advertise","topic":"plan","type":STRING}));
        op.ok(json!({"op":"advertise","topic":"cmd","type":STRING}));
        op.forbidden(
            json!({"op":"advertise","topic":"/plan","type":STRING}),
            "op",
            "publish on",
            "/plan",
        );
        op.forbidden(
            json!({"op":"advertise","topic":"other","type":STRING}),
            "op",
            "publish on",
            "/r1/other",
        );
        op.forbidden(
            json!({"op":"publish","topic":"other","msg":{"data":"x"}}),
            "op",
            "publish on",
            "/r1/other",
        );
        // Built-in services keep their absolute names in any namespace.
        op.values("rosapi/topics", json!({}));
    }
}

/// rosbridge's keys: `topics_glob` (also in its string form), the split
/// topic globs, `services_glob`, `actions_glob`, `params_glob`.
#[test]
fn rosbridge_glob_keys_grant_both_classes_they_name() {
    let gw = roles_gateway();
    for via in VIAS {
        let tag = via.tag();
        let mut admin = Peer::tcp_as(&gw, ADMIN);
        let mut rb = Peer::open_as(&gw, via, RB);
        // topics_glob: publish and subscribe.
        let t = format!("/rb/t/{tag}");
        rb.ok(json!({"op":"advertise","topic":t,"type":STRING}));
        rb.ok(json!({"op":"subscribe","topic":t,"type":STRING}));
        rb.ok(json!({"op":"subscribe","topic":"/rb/u","type":STRING}));
        rb.forbidden(
            json!({"op":"advertise","topic":"/rb/v","type":STRING}),
            "rb",
            "publish on",
            "/rb/v",
        );
        rb.forbidden(
            json!({"op":"subscribe","topic":"/rb/v","type":STRING}),
            "rb",
            "subscribe to",
            "/rb/v",
        );
        // services_glob: call and provide.
        let mine = format!("/rb/s/{tag}_mine");
        rb.ok(json!({"op":"advertise_service","service":mine,"type":"std_srvs/srv/Trigger"}));
        let theirs = format!("/rb/s/{tag}_theirs");
        admin.ok(json!({"op":"advertise_service","service":theirs,"type":"std_srvs/srv/Trigger"}));
        rb.send(&json!({"op":"call_service","service":theirs,"id":"c","args":{}}));
        let fwd = admin.forwarded_call(&theirs);
        admin.send(&json!({"op":"service_response","service":theirs,"id":fwd["id"],"values":{"success":true,"message":""},"result":true}));
        let (v, _) = rb.until(|v| v["id"] == "c");
        assert_eq!(v["result"], true, "{v}");
        rb.forbidden(
            json!({"op":"advertise_service","service":"/other_rb","type":"std_srvs/srv/Trigger"}),
            "rb",
            "provide",
            "/other_rb",
        );
        rb.call_forbidden("rb", "/rosgate/stats");
        // actions_glob: send and serve.
        let served = format!("/rb/a/{tag}_mine");
        rb.ok(json!({"op":"advertise_action","action":served,"type":FIB}));
        let act = format!("/rb/a/{tag}_theirs");
        admin.ok(json!({"op":"advertise_action","action":act,"type":FIB}));
        rb.send(
            &json!({"op":"send_action_goal","id":"g","action":act,"action_type":FIB,"args":{}}),
        );
        admin.forwarded_goal(&act);
        rb.forbidden(
            json!({"op":"advertise_action","action":"/other_act","type":FIB}),
            "rb",
            "serve",
            "/other_act",
        );
        rb.goal_forbidden("rb", "/other_act");
        // params_glob: read and write.
        let p = format!("/rb_node_{tag}:p");
        let v = rb.values("/rosapi/set_param", json!({"name": p, "value": "4"}));
        assert_eq!(v["successful"], true, "{v}");
        assert_eq!(
            rb.values("/rosapi/get_param", json!({"name": p}))["value"],
            "4"
        );
        let why = rb.fails(
            "/rosapi/set_param",
            json!({"name": "/else:p", "value": "4"}),
        );
        assert_eq!(why, "forbidden: may not set parameter /else:p");
        let why = rb.fails("/rosapi/get_param", json!({"name": "/else:p"}));
        assert_eq!(why, "forbidden: may not read parameter /else:p");

        // topics_pub_glob / topics_sub_glob: one class each.
        let mut rbs = Peer::open_as(&gw, via, RBS);
        rbs.ok(json!({"op":"advertise","topic":"/rbs/pub","type":STRING}));
        rbs.ok(json!({"op":"subscribe","topic":"/rbs/sub","type":STRING}));
        rbs.forbidden(
            json!({"op":"subscribe","topic":"/rbs/pub","type":STRING}),
            "rbs",
            "subscribe to",
            "/rbs/pub",
        );
        rbs.forbidden(
            json!({"op":"advertise","topic":"/rbs/sub","type":STRING}),
            "rbs",
            "publish on",
            "/rbs/sub",
        );
        // A class it does not name allows nothing.
        rbs.call_forbidden("rbs", "/rosapi/topics");
        rbs.forbidden(
            json!({"op":"advertise_service","service":"/rbs/s","type":"std_srvs/srv/Trigger"}),
            "rbs",
            "provide",
            "/rbs/s",
        );
        rbs.goal_forbidden("rbs", "/rbs/a");
        rbs.forbidden(
            json!({"op":"advertise_action","action":"/rbs/a","type":FIB}),
            "rbs",
            "serve",
            "/rbs/a",
        );
        rbs.quiet();
        rb.quiet();
    }
}

/// The built-in `viewer`: subscribe to anything, call the introspection
/// services, read parameters; nothing else.
#[test]
fn the_viewer_role_looks_but_does_not_touch() {
    let gw = builtin_gateway(&[]);
    for via in VIAS {
        let tag = via.tag();
        let mut admin = Peer::tcp_as(&gw, ADMIN);
        let node = admin.node(&format!("viewed_{tag}"), json!({}));
        admin.ok(json!({"op":"declare_parameter","name":"gain","value":3}));
        let srv = format!("/robot/reset_{tag}");
        admin.ok(json!({"op":"advertise_service","service":srv,"type":"std_srvs/srv/Trigger"}));
        let act = format!("/navigate_{tag}");
        admin.ok(json!({"op":"advertise_action","action":act,"type":FIB}));
        let mut v = Peer::open_as(&gw, via, VIEWER);
        // Allowed.
        for t in ["/cmd_vel", "/rosout", "/parameter_events", "/rosgate/graph"] {
            v.ok(json!({"op":"subscribe","topic":t,"type":STRING}));
        }
        v.values("/rosapi/topics", json!({}));
        v.values("/rosapi/nodes", json!({}));
        v.values("/rosgate/stats", json!({}));
        // Each connection shows the role it authenticated as.
        let conns = v.values("/rosgate/connections", json!({}));
        let roles: Vec<&str> = conns["connections"]
            .as_array()
            .expect("connections")
            .iter()
            .filter_map(|c| c["role"].as_str())
            .collect();
        assert!(
            roles.contains(&"admin") && roles.contains(&"viewer"),
            "{conns}"
        );
        v.values("/rosgate/topic_stats", json!({}));
        let got = v.values("/rosapi/get_param", json!({"name": format!("{node}:gain")}));
        assert_eq!(got["value"], "3");
        // Refused.
        v.forbidden(
            json!({"op":"advertise","topic":"/cmd_vel","type":STRING}),
            "viewer",
            "publish on",
            "/cmd_vel",
        );
        v.forbidden(
            json!({"op":"publish","topic":"/cmd_vel","msg":{"data":"go"}}),
            "viewer",
            "publish on",
            "/cmd_vel",
        );
        v.call_forbidden("viewer", &srv);
        // A node's parameter services are calls: not in the viewer's globs.
        v.call_forbidden("viewer", &format!("{node}/get_parameters"));
        v.forbidden(
            json!({"op":"advertise_service","service":"/v/s","type":"std_srvs/srv/Trigger"}),
            "viewer",
            "provide",
            "/v/s",
        );
        v.goal_forbidden("viewer", &act);
        v.forbidden(
            json!({"op":"advertise_action","action":"/v/a","type":FIB}),
            "viewer",
            "serve",
            "/v/a",
        );
        let why = v.fails(
            "/rosapi/set_param",
            json!({"name": format!("{node}:gain"), "value": "4"}),
        );
        assert_eq!(why, format!("forbidden: may not set parameter {node}:gain"));
        let own = v.node(&format!("viewer_node_{tag}"), json!({}));
        v.forbidden(
            json!({"op":"declare_parameter","name":"mine","value":1}),
            "viewer",
            "set parameter",
            &format!("{own}:mine"),
        );
        // The admin saw no call, no goal, no change.
        admin.quiet();
        let got = admin.values("/rosapi/get_param", json!({"name": format!("{node}:gain")}));
        assert_eq!(got["value"], "3");
        v.quiet();
    }
}

/// A refused publish reaches no subscriber: with or without an
/// advertisement, on both transports. A permitted publisher's message sent
/// afterwards is the first (and only) one the subscriber gets.
#[test]
fn a_refused_publish_reaches_no_subscriber() {
    let gw = roles_gateway();
    for via in VIAS {
        let topic = format!("/guarded_{}", via.tag());
        let mut sub = Peer::open_as(&gw, via, ADMIN);
        sub.ok(json!({"op":"subscribe","topic":topic,"type":STRING}));
        for (role, token) in [("viewer", VIEWER), ("op", OP), ("rbs", RBS)] {
            let mut p = Peer::open_as(&gw, via, token);
            p.forbidden(
                json!({"op":"advertise","topic":topic,"type":STRING}),
                role,
                "publish on",
                &topic,
            );
            for i in 0..3 {
                p.forbidden(
                    json!({"op":"publish","topic":topic,"msg":{"data":format!("{role} {i}")}}),
                    role,
                    "publish on",
                    &topic,
                );
            }
            // Without an id, the refusal has none either.
            p.send(&json!({"op":"publish","topic":topic,"msg":{"data":"quiet"}}));
            let (v, _) = p.until(|v| v["op"] == "status");
            assert_eq!(
                v["msg"],
                format!("forbidden: role {role} may not publish on {topic}")
            );
            assert!(v.get("id").is_none(), "{v}");
        }
        let mut admin = Peer::open_as(&gw, via, ADMIN);
        admin.send(&json!({"op":"publish","topic":topic,"msg":{"data":"marker"}}));
        assert_eq!(sub.message(&topic), json!({"data":"marker"}));
        sub.quiet();
        let info = admin.values("/rosgate/topic_info", json!({"topic": topic}));
        assert_eq!(
            info["publishers"].as_array().map(Vec::len),
            Some(0),
            "{info}"
        );
    }
}

// =============================================================================================
// Introspection
// =============================================================================================

/// What rosapi and the gateway's own services show `limited`: only the
/// names it may use in some way; the admin sees everything.
#[test]
fn introspection_shows_a_role_only_what_it_may_use() {
    let gw = roles_gateway();
    // The graph, built by an admin: a node publishing, subscribing and
    // providing visible and hidden names (hidden ones with their own types,
    // so that type lists tell too), and two nodes with parameters.
    let mut admin = Peer::tcp_as(&gw, ADMIN);
    let node = admin.node("intro", json!({}));
    for (t, ty) in [
        ("/vis/pub", STRING),
        ("/vis/sub/a", STRING),
        ("/hidden/t", "secret_msgs/msg/Hidden"),
    ] {
        admin.ok(json!({"op":"advertise","topic":t,"type":ty}));
    }
    admin.ok(json!({"op":"subscribe","topic":"/hidden/sub","type":"secret_msgs/msg/Hidden"}));
    for (s, ty) in [
        ("/vis/srv", "std_srvs/srv/Trigger"),
        ("/vis/provided", "std_srvs/srv/Trigger"),
        ("/hidden/srv", "secret_srvs/srv/Hidden"),
    ] {
        admin.ok(json!({"op":"advertise_service","service":s,"type":ty}));
    }
    for (a, ty) in [
        ("/vis/act", FIB),
        ("/vis/served", FIB),
        ("/hidden/act", "secret_actions/action/Hidden"),
    ] {
        admin.ok(json!({"op":"advertise_action","action":a,"type":ty}));
    }
    admin.send(&json!({"op":"publish","topic":"/hidden/t","msg":{"x":1}}));
    admin.send(&json!({"op":"publish","topic":"/vis/pub","msg":{"data":"x"}}));
    let mut params = Peer::tcp_as(&gw, ADMIN);
    params.node("vis_node", json!({}));
    params.ok(json!({"op":"declare_parameter","name":"p1","value":1}));
    params.node("hid_node", json!({}));
    params.ok(json!({"op":"declare_parameter","name":"h1","value":2,"node":"hid_node"}));
    admin.quiet();

    for via in VIAS {
        let mut lim = Peer::open_as(&gw, via, LIMITED);
        let mut adm = Peer::open_as(&gw, via, ADMIN);
        let mut both = |service: &str, args: Value| -> (Value, Value) {
            (lim.values(service, args.clone()), adm.values(service, args))
        };

        let (l, a) = both("/rosapi/topics", json!({}));
        let lt = strs(&l["topics"]);
        assert_eq!(lt, ["/vis/pub", "/vis/sub/a"], "{l}");
        assert_eq!(strs(&l["types"]), [STRING, STRING], "{l}");
        let at = strs(&a["topics"]);
        for t in ["/vis/pub", "/hidden/t", "/hidden/sub", "/rosout"] {
            assert!(at.iter().any(|x| x == t), "admin sees {t}: {a}");
        }
        let (l, a) = both("/rosapi/topics_and_raw_types", json!({}));
        assert_eq!(strs(&l["topics"]), ["/vis/pub", "/vis/sub/a"], "{l}");
        assert!(a.to_string().contains("/hidden/t"), "{a}");
        let (l, a) = both(
            "/rosapi/topics_for_type",
            json!({"type":"secret_msgs/msg/Hidden"}),
        );
        assert_eq!(l["topics"], json!([]), "{l}");
        assert_eq!(strs(&a["topics"]), ["/hidden/sub", "/hidden/t"], "{a}");

        let (l, a) = both("/rosapi/services", json!({}));
        let ls = strs(&l["services"]);
        for s in [
            "/vis/srv",
            "/vis/provided",
            "/rosapi/topics",
            "/rosgate/stats",
        ] {
            assert!(ls.iter().any(|x| x == s), "limited sees {s}: {l}");
        }
        for s in [
            "/hidden/srv",
            "/hid_node/get_parameters",
            "/vis_node/get_parameters",
        ] {
            assert!(!ls.iter().any(|x| x == s), "limited does not see {s}: {l}");
            assert!(
                strs(&a["services"]).iter().any(|x| x == s),
                "admin sees {s}: {a}"
            );
        }
        let (l, a) = both(
            "/rosapi/services_for_type",
            json!({"type":"secret_srvs/srv/Hidden"}),
        );
        assert_eq!(l["services"], json!([]), "{l}");
        assert_eq!(a["services"], json!(["/hidden/srv"]), "{a}");

        let (l, a) = both("/rosapi/action_servers", json!({}));
        assert_eq!(
            strs(&l["action_servers"]),
            ["/vis/act", "/vis/served"],
            "{l}"
        );
        assert!(
            strs(&a["action_servers"]).contains(&"/hidden/act".to_string()),
            "{a}"
        );

        let (l, a) = both("/rosapi/interfaces", json!({}));
        assert!(!l.to_string().contains("secret_"), "{l}");
        for ty in [
            "secret_msgs/msg/Hidden",
            "secret_srvs/srv/Hidden",
            "secret_actions/action/Hidden",
        ] {
            assert!(
                strs(&a["interfaces"]).iter().any(|x| x == ty),
                "admin sees {ty}: {a}"
            );
        }

        let (l, a) = both("/rosapi/node_details", json!({"node": node}));
        assert_eq!(strs(&l["publishing"]), ["/vis/pub", "/vis/sub/a"], "{l}");
        assert_eq!(l["subscribing"], json!([]), "{l}");
        let mut ls = strs(&l["services"]);
        ls.sort();
        assert_eq!(ls, ["/vis/provided", "/vis/srv"], "{l}");
        assert!(
            strs(&a["publishing"]).contains(&"/hidden/t".to_string()),
            "{a}"
        );
        assert_eq!(strs(&a["subscribing"]), ["/hidden/sub"], "{a}");
        assert!(
            strs(&a["services"]).contains(&"/hidden/srv".to_string()),
            "{a}"
        );
        // Node names stay listed.
        let (l, _) = both("/rosapi/nodes", json!({}));
        assert!(strs(&l["nodes"]).contains(&"/hid_node".to_string()), "{l}");

        // Asked directly, a hidden name answers as one that does not exist.
        let (l, a) = both("/rosapi/topic_type", json!({"topic":"/hidden/t"}));
        assert_eq!(
            (&l["type"], &a["type"]),
            (&json!(""), &json!("secret_msgs/msg/Hidden"))
        );
        let (l, a) = both("/rosapi/publishers", json!({"topic":"/hidden/t"}));
        assert_eq!(
            (&l["publishers"], &a["publishers"]),
            (&json!([]), &json!([node]))
        );
        let (l, a) = both("/rosapi/subscribers", json!({"topic":"/hidden/sub"}));
        assert_eq!(
            (&l["subscribers"], &a["subscribers"]),
            (&json!([]), &json!([node]))
        );
        let (l, a) = both("/rosapi/publishers", json!({"topic":"/vis/pub"}));
        assert_eq!(
            (&l["publishers"], &a["publishers"]),
            (&json!([node]), &json!([node]))
        );
        let (l, a) = both("/rosapi/service_type", json!({"service":"/hidden/srv"}));
        assert_eq!(
            (&l["type"], &a["type"]),
            (&json!(""), &json!("secret_srvs/srv/Hidden"))
        );
        let (l, a) = both("/rosapi/service_node", json!({"service":"/hidden/srv"}));
        assert_eq!((&l["node"], &a["node"]), (&json!(""), &json!(node)));
        let (l, a) = both(
            "/rosapi/service_providers",
            json!({"service":"/hidden/srv"}),
        );
        assert_eq!(
            (&l["providers"], &a["providers"]),
            (&json!([]), &json!([node]))
        );
        let (l, a) = both("/rosapi/action_type", json!({"action":"/hidden/act"}));
        assert_eq!(
            (&l["type"], &a["type"]),
            (&json!(""), &json!("secret_actions/action/Hidden"))
        );
        let (l, a) = both("/rosapi/action_type", json!({"action":"/vis/act"}));
        assert_eq!((&l["type"], &a["type"]), (&json!(FIB), &json!(FIB)));

        // Parameters.
        let (l, a) = both("/rosapi/get_param_names", json!({}));
        assert_eq!(strs(&l["names"]), ["/vis_node:p1"], "{l}");
        let an = strs(&a["names"]);
        assert!(an.contains(&"/hid_node:h1".to_string()), "{a}");
        assert!(an.contains(&"/vis_node:p1".to_string()), "{a}");

        // The gateway's own: topic_stats and topic_info.
        let (l, a) = both("/rosgate/topic_stats", json!({}));
        let names = |v: &Value| -> Vec<String> {
            v["topics"]
                .as_array()
                .unwrap_or_else(|| panic!("{v}"))
                .iter()
                .map(|t| t["topic"].as_str().unwrap_or_default().to_string())
                .collect()
        };
        let mut ln = names(&l);
        ln.sort();
        assert_eq!(ln, ["/vis/pub", "/vis/sub/a"], "{l}");
        assert!(names(&a).contains(&"/hidden/t".to_string()), "{a}");
        let (l, a) = both("/rosgate/topic_info", json!({"topic":"/hidden/t"}));
        assert_eq!(l["type"], "", "{l}");
        assert_eq!(
            (&l["publishers"], &l["subscribers"]),
            (&json!([]), &json!([])),
            "{l}"
        );
        assert_eq!(a["type"], "secret_msgs/msg/Hidden", "{a}");
        assert_eq!(a["publishers"].as_array().map(Vec::len), Some(1), "{a}");
        let (l, _) = both("/rosgate/topic_info", json!({"topic":"/vis/pub"}));
        assert_eq!(l["type"], STRING, "{l}");
        lim.quiet();
    }
}

/// rosapi's `service_providers` also takes a service *type*; the services
/// of that type a role may not use must not show through it.
#[test]
fn service_providers_by_type_hides_what_the_role_may_not_use() {
    let gw = roles_gateway();
    let mut admin = Peer::tcp_as(&gw, ADMIN);
    let node = admin.node("typed", json!({}));
    admin.ok(
        json!({"op":"advertise_service","service":"/hidden/srv","type":"secret_srvs/srv/Hidden"}),
    );
    let ty = json!({"service":"secret_srvs/srv/Hidden"});
    let a = admin.values("/rosapi/service_providers", ty.clone());
    assert_eq!(a["providers"], json!([node]), "{a}");
    let mut lim = Peer::tcp_as(&gw, LIMITED);
    let l = lim.values("/rosapi/service_providers", ty);
    assert_eq!(l["providers"], json!([]), "{l}");
}

// =============================================================================================
// Origins
// =============================================================================================

/// Loopback pages, listed origins and non-browser clients (no `Origin`)
/// may open a WebSocket; any other page gets 403. With or without tokens.
#[test]
fn websocket_openings_from_foreign_browser_pages_are_refused() {
    let loopback = [
        "http://localhost:5173",
        "http://localhost",
        "https://localhost:8443/",
        "http://127.0.0.1:8080",
        "http://127.5.6.7",
        "https://[::1]",
        "http://[::1]:3000",
        "HTTP://LOCALHOST:5173",
    ];
    let foreign = [
        "https://evil.example.com",
        "null",
        "file://",
        "http://localhost.evil.com",
        "http://127.0.0.1.evil.com",
        "http://localhost:80x",
        "http://[::1]evil",
        "http://10.0.0.1:8080",
        "ws://localhost:5173",
    ];
    let listed = ["https://ops.example.com", "https://tablet.local:8443"];
    let not_quite = [
        "http://ops.example.com",
        "https://ops.example.com:444",
        "https://tablet.local",
        "https://sub.ops.example.com",
    ];
    for with_tokens in [false, true] {
        let allow = "https://ops.example.com/,https://Tablet.local:8443";
        let (gw, target) = if with_tokens {
            let gw = builtin_gateway(&["--ws-allowed-origins", allow]);
            (gw, format!("/?token={ADMIN}"))
        } else {
            let gw = Secure {
                gw: Gateway::start(&["--ws-allowed-origins", allow]),
                _files: vec![],
            };
            (gw, "/".to_string())
        };
        let mut admitted = 0;
        let mut refused = 0;
        for origin in loopback
            .iter()
            .chain(&listed)
            .copied()
            .chain(["https://OPS.example.com/"])
        {
            let mut ws = Ws::connect_at(&gw, &target, &format!("Origin: {origin}\r\n"));
            ws.send_text(
                r#"{"op":"call_service","service":"/rosapi/get_ros_version","id":"v","args":{}}"#,
            );
            assert_eq!(ws.json()["id"], "v", "{origin}");
            admitted += 1;
        }
        Ws::connect_at(&gw, &target, "");
        admitted += 1;
        for origin in foreign.iter().chain(&not_quite) {
            let r = ws_refused(&gw, &target, &format!("Origin: {origin}\r\n"));
            assert_status_code(&r, 403, origin);
            assert!(
                r.text().contains("--ws-allowed-origins"),
                "the refusal says how to allow it: {}",
                r.text()
            );
            refused += 1;
        }
        // Refused before the token is looked at: a right token does not help,
        // and a wrong one is not what is counted.
        let r = ws_refused(
            &gw,
            &format!("/?token={WRONG}"),
            "Origin: https://evil.example.com\r\n",
        );
        assert_status_code(&r, 403, "foreign origin, wrong token");
        refused += 1;
        let s = if with_tokens { stats(&gw) } else { gw.stats() };
        assert_eq!(counter(&s, "closes.origin_refused"), refused, "{s}");
        assert_eq!(counter(&s, "closes.auth_failed"), 0, "{s}");
        if with_tokens {
            assert_eq!(counter(&s, "authenticated"), admitted + 1, "{s}");
        }
    }
    // `*` allows every origin.
    let gw = builtin_gateway(&["--ws-allowed-origins", "*"]);
    for origin in foreign {
        Ws::connect_at(
            &gw,
            &format!("/?token={VIEWER}"),
            &format!("Origin: {origin}\r\n"),
        );
    }
    // And a tokenless opening from an allowed page still has to
    // authenticate.
    let mut ws = Ws::connect_at(&gw, "/", "Origin: http://localhost:5173\r\n");
    ws.send_text(r#"{"op":"call_service","service":"/rosapi/get_ros_version","id":"v","args":{}}"#);
    assert_eq!(ws.json()["msg"], AUTH_FIRST);
}

// =============================================================================================
// HTTP
// =============================================================================================

fn http_get(gw: &Gateway, path: &str, headers: &str) -> Reply {
    let req = format!("GET {path} HTTP/1.1\r\nHost: rosgate\r\n{headers}\r\n");
    exchange(ws_addr(gw), req.as_bytes())
}

#[test]
fn metrics_need_a_token_while_health_and_the_dashboard_stay_public() {
    let gw = builtin_gateway(&[]);
    for (path, headers) in [
        ("/metrics".to_string(), String::new()),
        (format!("/metrics?token={WRONG}"), String::new()),
        (
            "/metrics".to_string(),
            format!("Authorization: Bearer {WRONG}\r\n"),
        ),
        (
            "/metrics".to_string(),
            format!("Authorization: Basic {ADMIN}\r\n"),
        ),
        ("/metrics?token=".to_string(), String::new()),
    ] {
        let r = http_get(&gw, &path, &headers);
        assert_status_code(&r, 401, &format!("{path} {headers:?}"));
        assert_eq!(
            r.header("www-authenticate"),
            Some(r#"Bearer realm="rosgate""#),
            "{path}"
        );
        assert!(
            !r.text().contains("rosgate_"),
            "no metrics in a 401: {}",
            r.text()
        );
    }
    // Produce each counter once, then read them with either kind of token.
    let mut v = Peer::tcp_as(&gw, VIEWER);
    v.forbidden(
        json!({"op":"advertise","topic":"/m","type":STRING}),
        "viewer",
        "publish on",
        "/m",
    );
    let mut c = gw.client();
    c.send_line(r#"{"op":"subscribe","topic":"/m","type":"std_msgs/msg/String","id":1}"#);
    c.expect_error(1);
    c.send_json(&json!({"op":"auth","token":WRONG}));
    c.expect_closed(REPLY);
    let r = ws_refused(&gw, "/", "Origin: https://evil.example.com\r\n");
    assert_status_code(&r, 403, "origin");
    stats_until(&mut v, "the close counted", |s| {
        counter(s, "closes.auth_failed") == 1
    });
    for (path, headers) in [
        (
            "/metrics".to_string(),
            format!("Authorization: Bearer {ADMIN}\r\n"),
        ),
        (
            "/metrics".to_string(),
            format!("authorization: bearer {VIEWER}\r\n"),
        ),
        (format!("/metrics?token={VIEWER}"), String::new()),
    ] {
        let r = http_get(&gw, &path, &headers);
        assert_status_code(&r, 200, &format!("{path} {headers:?}"));
        let text = r.text();
        for line in [
            "rosgate_authenticated_total 1",
            r#"rosgate_closes_total{reason="auth_failed"} 1"#,
            r#"rosgate_closes_total{reason="origin_refused"} 1"#,
            r#"rosgate_errors_total{code="unauthenticated"} 1"#,
            r#"rosgate_errors_total{code="forbidden"} 1"#,
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in:\n{text}");
        }
    }
    for path in ["/healthz", "/version", "/"] {
        let r = http_get(&gw, path, "");
        assert_status_code(&r, 200, path);
    }
    // Without tokens, /metrics is open.
    let open = Gateway::start(&[]);
    assert_status_code(&http_get(&open, "/metrics", ""), 200, "no tokens");
}

// =============================================================================================
// Start-up
// =============================================================================================

/// Runs the binary to completion with `env` added (20 s: start-up
/// refusals read files before they exit).
fn run(args: &[&str], env: &[(&str, &str)]) -> Output {
    run_to_exit(args, env, Duration::from_secs(20))
}

/// `args` must stop start-up with exit status 2 and a message on stderr
/// holding each of `want` and no token; returns the message.
fn refused_start(args: &[&str], want: &[&str]) -> String {
    let out = run(args, &[]);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(2), "`{}`: {err}", args.join(" "));
    for w in want {
        assert!(
            err.contains(w),
            "`{}`: {w:?} not in {err:?}",
            args.join(" ")
        );
    }
    assert!(!err.contains("listening on"), "{err}");
    assert_no_token(&err, "the start-up refusal");
    err
}

#[test]
fn listening_beyond_loopback_needs_tokens_or_an_explicit_opt_out() {
    let hint = "--allow-unauthenticated-network";
    refused_start(
        &["--listen", "0.0.0.0:0", "--ws-listen", "127.0.0.1:0"],
        &[
            "refusing to listen on tcp 0.0.0.0:0 without authentication",
            "--auth-tokens",
            hint,
        ],
    );
    refused_start(
        &["--listen", "127.0.0.1:0", "--ws-listen", "0.0.0.0:0"],
        &[
            "refusing to listen on websocket 0.0.0.0:0 without authentication",
            hint,
        ],
    );
    refused_start(
        &["--listen", "0.0.0.0:0", "--ws-listen", "[::]:0"],
        &["tcp 0.0.0.0:0 and websocket [::]:0"],
    );
    // Loopback needs nothing (the harness starts every other gateway so);
    // `--ws-listen off` exposes nothing.
    Gateway::spawn_args(&["--listen", "127.0.0.1:0", "--ws-listen", "off"])
        .unwrap_or_else(|e| panic!("{e}"));

    // Asked for by name: it starts, and says so as a warning.
    let gw = Gateway::spawn_args(&["--listen", "0.0.0.0:0", "--ws-listen", "127.0.0.1:0", hint])
        .unwrap_or_else(|e| panic!("{e}"));
    let logs = gw.logs();
    assert!(
        logs.iter().any(|l| l.contains(" WARN ")
            && l.contains("reachable from the network WITHOUT authentication")
            && l.contains("network=tcp:0.0.0.0:0")
            && !l.contains("websocket")),
        "{logs:?}"
    );
    // With tokens it starts too, saying authentication is required.
    let tf = token_file(BUILTIN_TOKENS);
    let gw = Gateway::spawn_args(&[
        "--listen",
        "0.0.0.0:0",
        "--ws-listen",
        "0.0.0.0:0",
        "--auth-tokens",
        tf.path(),
    ])
    .unwrap_or_else(|e| panic!("{e}"));
    let logs = gw.logs();
    assert!(
        logs.iter()
            .any(|l| l.contains(" INFO authentication required")
                && l.contains("tokens=2")
                && l.contains("roles=admin,viewer")
                && l.contains("network=tcp:0.0.0.0:0,websocket:0.0.0.0:0")),
        "{logs:?}"
    );
    assert!(!logs.iter().any(|l| l.contains("WITHOUT")), "{logs:?}");
    // ... and, without TLS, that the tokens cross the network in clear.
    assert!(
        logs.iter().any(|l| l.contains(" WARN ")
            && l.contains("tokens cross the network unencrypted")
            && l.contains("--tls-cert")),
        "{logs:?}"
    );
    // It is reachable (here through loopback) and asks for the token.
    let mut c = Client::connect_addr(format!("127.0.0.1:{}", gw.addr.port()).parse().unwrap());
    c.send_line(r#"{"op":"call_service","service":"/rosgate/stats","id":1,"args":{}}"#);
    assert_eq!(c.expect_error(1)["msg"], AUTH_FIRST);
    // On loopback with tokens: required, and no network named.
    let gw = Gateway::start(&["--auth-tokens", tf.path()]);
    assert!(
        gw.logs()
            .iter()
            .any(|l| l.contains("authentication required") && l.contains("network=none")),
        "{:?}",
        gw.logs()
    );
    assert!(
        !gw.logs().iter().any(|l| l.contains("unencrypted")),
        "{:?}",
        gw.logs()
    );
}

#[test]
fn malformed_token_and_roles_files_stop_start_up() {
    let lo = ["--listen", "127.0.0.1:0", "--ws-listen", "127.0.0.1:0"];
    let with =
        |extra: &[&str]| -> Vec<String> { lo.iter().chain(extra).map(|s| s.to_string()).collect() };
    let check = |files: &[(&str, &TempFile)], want: &[&str]| -> String {
        let mut extra = vec![];
        for (flag, f) in files {
            extra.push(*flag);
            extra.push(f.path());
        }
        let args = with(&extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        refused_start(&args, want)
    };
    let roles_ok = TempFile::new("roles.yaml", "operator:\n  publish: ['/cmd_vel']\n");

    // A line that is not `ROLE TOKEN`: the file and the line (comments and
    // blank lines count).
    let f = TempFile::new("tokens.txt", format!("# ops\n\nadmin {ADMIN}\nviewer\n"));
    check(
        &[("--auth-tokens", &f)],
        &[f.path(), "line 4", "ROLE TOKEN"],
    );
    let f = TempFile::new("tokens.txt", format!("admin {ADMIN} {VIEWER}\n"));
    check(&[("--auth-tokens", &f)], &[f.path(), "line 1"]);
    // A file with no token at all.
    let f = TempFile::new("tokens.txt", "# nobody\n\n");
    check(&[("--auth-tokens", &f)], &[f.path(), "no tokens"]);
    // A file that does not exist.
    let missing = std::env::temp_dir().join(format!("rosgate_security_missing_{}", uniq()));
    let missing = missing.to_str().unwrap();
    refused_start(
        &with(&["--auth-tokens", missing])
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
        &[missing],
    );
    // Too short, unknown role, duplicate: what is wrong, never the token.
    let f = TempFile::new(
        "tokens.txt",
        format!("admin {ADMIN}\nviewer short-tok-15ch\n"),
    );
    check(&[("--auth-tokens", &f)], &["16-256 bytes"]);
    let f = TempFile::new(
        "tokens.txt",
        format!("admin {ADMIN}\nviewer {}\n", "t".repeat(257)),
    );
    check(&[("--auth-tokens", &f)], &["16-256 bytes"]);
    let f = TempFile::new("tokens.txt", format!("admin {ADMIN}\noperater {VIEWER}\n"));
    check(
        &[("--auth-tokens", &f), ("--auth-roles", &roles_ok)],
        &["unknown role \"operater\""],
    );
    let f = TempFile::new(
        "tokens.txt",
        format!("admin {ADMIN}\nviewer {OP}\noperator {ADMIN}\n"),
    );
    check(
        &[("--auth-tokens", &f), ("--auth-roles", &roles_ok)],
        &["duplicate token"],
    );
    // The same token under the same role twice is a duplicate too.
    let f = TempFile::new("tokens.txt", format!("viewer {VIEWER}\nviewer {VIEWER}\n"));
    check(&[("--auth-tokens", &f)], &["duplicate token"]);

    let f = TempFile::new(
        "tokens.txt",
        format!("admin {ADMIN}\nviewer t\u{f6}ken-long-enough-123\n"),
    );
    check(&[("--auth-tokens", &f)], &["printable ASCII"]);
    // The bounds: 1 024 tokens, 64 roles (the two built-in ones count),
    // 256 globs per role and class, 512 bytes per glob.
    let many: String = (0..1025)
        .map(|i| format!("viewer token-number-{i:06}\n"))
        .collect();
    let f = TempFile::new("tokens.txt", &many);
    check(&[("--auth-tokens", &f)], &["more than 1024 tokens"]);
    let roles: String = (0..63)
        .map(|i| format!("r{i}:\n  publish: ['/a']\n"))
        .collect();
    let f = TempFile::new("roles.yaml", &roles);
    let t = token_file(BUILTIN_TOKENS);
    check(
        &[("--auth-tokens", &t), ("--auth-roles", &f)],
        &["more than 64 roles"],
    );
    let roles: String = (0..62)
        .map(|i| format!("r{i}:\n  publish: ['/a']\n"))
        .collect();
    let f = TempFile::new("roles.yaml", &roles);
    Gateway::start(&["--auth-tokens", t.path(), "--auth-roles", f.path()]);
    let globs: Vec<String> = (0..257).map(|i| format!("'/g{i}'")).collect();
    let f = TempFile::new(
        "roles.yaml",
        format!("op:\n  call: [{}]\n", globs.join(", ")),
    );
    check(
        &[("--auth-tokens", &t), ("--auth-roles", &f)],
        &["role op: more than 256 call globs"],
    );
    let f = TempFile::new(
        "roles.yaml",
        format!("op:\n  call: ['/{}']\n", "g".repeat(512)),
    );
    check(
        &[("--auth-tokens", &t), ("--auth-roles", &f)],
        &["role op: glob longer than 512 bytes"],
    );

    // Roles without tokens.
    check(
        &[("--auth-roles", &roles_ok)],
        &["--auth-roles needs --auth-tokens"],
    );
    // Bad YAML, an unknown class, a class that is not a list.
    let tokens = token_file(BUILTIN_TOKENS);
    for (yaml, want) in [
        ("operator: [\n", "line"),
        ("operator:\n  publsh: ['/a']\n", "unknown class \"publsh\""),
        (
            "operator:\n  publish: 5\n",
            "publish must be a list of globs",
        ),
        ("operator:\n  - publish\n", "role operator"),
        ("- a\n- b\n", "role names"),
        (
            "operator:\n  publish: []\noperator:\n  subscribe: []\n",
            "operator",
        ),
    ] {
        let f = TempFile::new("roles.yaml", yaml);
        check(&[("--auth-tokens", &tokens), ("--auth-roles", &f)], &[want]);
    }
    let f = TempFile::new("roles.yaml", "operator:\n  publsh: ['/a']\n");
    check(
        &[("--auth-tokens", &tokens), ("--auth-roles", &f)],
        &[f.path()],
    );
    // A file that parses starts: classes it does not name allow nothing,
    // a role with no body at all too.
    let f = TempFile::new("roles.yaml", "operator:\n  publish: ['/a']\nguest:\n");
    let t = TempFile::new("tokens.txt", format!("operator {OP}\nguest {RB}\n"));
    let gw = Gateway::start(&["--auth-tokens", t.path(), "--auth-roles", f.path()]);
    let mut g = Peer::tcp_as(&gw, RB);
    g.forbidden(
        json!({"op":"subscribe","topic":"/a","type":STRING}),
        "guest",
        "subscribe to",
        "/a",
    );
    let mut o = Peer::tcp_as(&gw, OP);
    o.ok(json!({"op":"advertise","topic":"/a","type":STRING}));
    o.forbidden(
        json!({"op":"subscribe","topic":"/a","type":STRING}),
        "operator",
        "subscribe to",
        "/a",
    );
}

/// docs/security.md: "A malformed file stops start-up with a message
/// naming the file and the line, never the token" — for every kind of
/// error in the token file, not only a line that is not `ROLE TOKEN`.
#[test]
fn every_token_file_error_names_the_file_and_the_line() {
    let lo = ["--listen", "127.0.0.1:0", "--ws-listen", "127.0.0.1:0"];
    for body in [
        format!("# ops\n\nadmin {ADMIN}\nviewer short-tok-15ch\n"),
        format!("# ops\n\nadmin {ADMIN}\noperater {VIEWER}\n"),
        format!("# ops\n\nadmin {ADMIN}\nviewer {ADMIN}\n"),
    ] {
        let f = TempFile::new("tokens.txt", &body);
        let args: Vec<&str> = lo
            .iter()
            .copied()
            .chain(["--auth-tokens", f.path()])
            .collect();
        refused_start(&args, &[f.path(), "line 4"]);
    }
}

// =============================================================================================
// The CLI
// =============================================================================================

#[test]
fn the_cli_presents_its_token_over_tcp_and_websocket() {
    let gw = builtin_gateway(&[]);
    let mut admin = Peer::tcp_as(&gw, ADMIN);
    admin.ok(json!({"op":"advertise","topic":"/cli_visible","type":STRING}));
    let urls = [
        format!("tcp://{}", gw.addr),
        format!("ws://{}/", ws_addr(&gw)),
    ];
    let cli = |url: &str, args: &[&str], env: &[(&str, &str)]| -> Output {
        let mut all = args.to_vec();
        all.extend(["--url", url, "--timeout", "5"]);
        run(&all, env)
    };
    for url in &urls {
        // Right token, by flag or environment.
        for (args, env) in [
            (vec!["topic", "list", "--token", ADMIN], vec![]),
            (vec!["topic", "list"], vec![("ROSGATE_TOKEN", VIEWER)]),
            // The flag wins over the environment.
            (
                vec!["topic", "list", "--token", VIEWER],
                vec![("ROSGATE_TOKEN", WRONG)],
            ),
        ] {
            let out = cli(url, &args, &env);
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert_eq!(
                out.status.code(),
                Some(0),
                "{url} {args:?} {env:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(
                stdout.lines().any(|l| l == "/cli_visible"),
                "{url}: {stdout}"
            );
        }
        // No token: the gateway's refusal, exit 1.
        let out = cli(url, &["topic", "list"], &[]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{url}: {err}");
        assert!(err.contains("authenticate first"), "{url}: {err}");
        // A role's refusal is the command's failure.
        let out = cli(
            url,
            &[
                "topic",
                "pub",
                "/cli_visible",
                STRING,
                "{data: hi}",
                "--token",
                VIEWER,
            ],
            &[],
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{url}: {err}");
        assert!(
            err.contains("forbidden: role viewer may not publish on /cli_visible"),
            "{url}: {err}"
        );
        // A wrong token fails, without echoing it.
        let out = cli(url, &["topic", "list", "--token", WRONG], &[]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{url}: {err}");
        assert!(out.stdout.is_empty(), "{url}");
        assert_no_token(&err, "the CLI's error");
    }
    // Over WebSocket, the refused upgrade says why, and exits 1.
    let out = cli(&urls[1], &["topic", "list", "--token", WRONG], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("401"), "{err}");
    // One wrong token per transport in the loop, and this one.
    let s = admin.values("/rosgate/stats", json!({}));
    assert_eq!(counter(&s, "closes.auth_failed"), 3, "{s}");
}

/// docs/cli.md: "A wrong token exits 1" — over TCP too.
#[test]
fn the_cli_exits_1_for_a_wrong_token_over_tcp() {
    let gw = builtin_gateway(&[]);
    let url = format!("tcp://{}", gw.addr);
    let out = run(&["topic", "list", "--url", &url, "--token", WRONG], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("authentication failed"), "{err}");
}

/// A roles file may redefine the built-in roles.
#[test]
fn a_roles_file_may_redefine_the_builtin_roles() {
    let gw = secure(
        BUILTIN_TOKENS,
        Some("viewer:\n  subscribe: ['/only']\nadmin:\n  publish: ['*']\n"),
        &[],
    );
    let mut v = Peer::tcp_as(&gw, VIEWER);
    v.ok(json!({"op":"subscribe","topic":"/only","type":STRING}));
    v.forbidden(
        json!({"op":"subscribe","topic":"/rosout","type":STRING}),
        "viewer",
        "subscribe to",
        "/rosout",
    );
    v.call_forbidden("viewer", "/rosapi/topics");
    let mut a = Peer::tcp_as(&gw, ADMIN);
    a.ok(json!({"op":"advertise","topic":"/anything","type":STRING}));
    a.forbidden(
        json!({"op":"subscribe","topic":"/only","type":STRING}),
        "admin",
        "subscribe to",
        "/only",
    );
    a.call_forbidden("admin", "/rosgate/stats");
}

/// Decisions are cached per role and class (4 096 names, then the cache
/// is cleared): answers stay right across the clearing, and one role's
/// answers never leak into another's.
#[test]
fn decisions_stay_right_past_the_decision_cache() {
    let gw = roles_gateway();
    let mut sub = Peer::tcp_as(&gw, ADMIN);
    sub.ok(json!({"op":"subscribe","topic":"/op/pub/last","type":STRING}));
    let mut op = Peer::tcp_as(&gw, OP);
    let mut viewer = Peer::tcp_as(&gw, VIEWER);
    let Link::Tcp(c) = &mut op.link else {
        unreachable!()
    };
    // 3 rounds of 1 500 allowed and 1 500 refused names: more than the
    // cache holds per class, and each name asked twice.
    for round in 0..3 {
        let mut batch = String::new();
        for i in 0..1500 {
            let n = i + 1000 * round;
            batch.push_str(&format!(
                "{{\"op\":\"publish\",\"topic\":\"/op/pub/n{n}\",\"msg\":{{}}}}\n{{\"op\":\"publish\",\"topic\":\"/op/no/n{n}\",\"msg\":{{}},\"id\":{n}}}\n"
            ));
        }
        c.send_raw(batch.as_bytes());
        for i in 0..1500 {
            let n = i + 1000 * round;
            let v = c.recv();
            assert_eq!(v["id"], n, "{v}");
            assert_eq!(
                v["msg"],
                format!("forbidden: role op may not publish on /op/no/n{n}")
            );
        }
    }
    op.send(&json!({"op":"publish","topic":"/op/pub/last","msg":{"data":"end"}}));
    op.quiet();
    assert_eq!(sub.message("/op/pub/last"), json!({"data":"end"}));
    // The viewer, asked about the same names after op, is still refused.
    for n in [0, 2999, 3499] {
        let t = format!("/op/pub/n{n}");
        viewer.forbidden(
            json!({"op":"publish","topic":t,"msg":{}}),
            "viewer",
            "publish on",
            &t,
        );
    }
}

/// Without `--auth-tokens` every connection may do everything at once; the
/// `auth` op is answered and changes nothing, and a CLI given a token still
/// works.
#[test]
fn without_tokens_auth_is_off_and_the_auth_op_is_ignored() {
    let gw = Gateway::start(&[]);
    let mut c = gw.client();
    c.send_json(&json!({"op":"auth","token":WRONG,"id":"a"}));
    assert_eq!(
        c.expect_info("a")["msg"],
        "auth: authentication is not enabled on this gateway; ignored"
    );
    c.advertise("/open");
    let mut ws = Ws::connect(&gw);
    ws.send_text(&json!({"op":"auth","mac":WRONG}).to_string());
    ws.send_text(r#"{"op":"subscribe","topic":"/open","type":"std_msgs/msg/String"}"#);
    assert!(
        ws.barrier().is_empty(),
        "the auth op is answered at info level only"
    );
    c.publish("/open", r#"{"data":"x"}"#);
    assert_eq!(ws.json()["msg"], json!({"data":"x"}));
    let out = run(
        &[
            "topic",
            "list",
            "--url",
            &format!("tcp://{}", gw.addr),
            "--token",
            WRONG,
        ],
        &[],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = gw.stats();
    assert_eq!(counter(&s, "authenticated"), 0, "{s}");
    assert_eq!(counter(&s, "closes.auth_failed"), 0, "{s}");
}

// ---------------------------------------------------------------------------------------------
// Token guessing: the per-address budget of wrong tokens
// ---------------------------------------------------------------------------------------------

/// A TCP connection to `to` from the local address `from` (any of
/// 127.0.0.0/8 is this machine's loopback on Linux).
fn connect_from(from: [u8; 4], to: std::net::SocketAddr) -> std::net::TcpStream {
    use socket2::{Domain, Socket, Type};
    let s = Socket::new(Domain::IPV4, Type::STREAM, None).expect("socket");
    let src = std::net::SocketAddr::from((from, 0));
    s.bind(&src.into()).expect("bind a loopback source address");
    s.connect(&to.into()).expect("connect");
    let s: std::net::TcpStream = s.into();
    s.set_read_timeout(Some(Duration::from_secs(15)))
        .expect("read timeout");
    s
}

/// Sends `request` from `from`, reads until the gateway closes; returns
/// how long that took and what came.
fn attempt(from: [u8; 4], to: std::net::SocketAddr, request: &[u8]) -> (Duration, String) {
    use std::io::{Read, Write};
    let started = Instant::now();
    let mut s = connect_from(from, to);
    s.write_all(request).expect("write");
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    (
        started.elapsed(),
        String::from_utf8_lossy(&got).into_owned(),
    )
}

fn auth_line(token: &str) -> Vec<u8> {
    format!("{}\n", json!({"op":"auth","token":token,"id":"g"})).into_bytes()
}

#[test]
fn token_guessing_from_one_address_is_held_past_its_budget() {
    // The default budget (10 wrong tokens a minute per address).
    let tf = token_file(&[("admin", ADMIN)]);
    let gw = Gateway::start(&["--auth-tokens", tf.path()]);
    let (tcp, ws) = (gw.addr, ws_addr(&gw));
    let guesser = [127, 0, 0, 1];
    let other = [127, 0, 0, 2];
    let ms_of = |d: Duration| d.as_millis();

    // TCP: ten wrong tokens are refused at once.
    for i in 0..10 {
        let (took, got) = attempt(guesser, tcp, &auth_line(WRONG));
        assert!(got.contains("authentication failed"), "attempt {i}: {got}");
        assert!(took < Duration::from_secs(2), "attempt {i} took {took:?}");
    }
    // The 11th waits 250 ms before its refusal, the 12th (a right token:
    // not checked from a locked address) 500 ms.
    let (took, got) = attempt(guesser, tcp, &auth_line(WRONG));
    assert!(got.contains("authentication failed"), "{got}");
    assert!(ms_of(took) >= 250, "the 11th was refused after {took:?}");
    let (took, got) = attempt(guesser, tcp, &auth_line(ADMIN));
    assert!(got.contains("authentication failed"), "{got}");
    assert!(ms_of(took) >= 500, "the 12th was refused after {took:?}");
    // While the 13th is held (1 s), a right token from another address is
    // admitted at once.
    let held = std::thread::spawn(move || attempt(guesser, tcp, &auth_line(WRONG)));
    std::thread::sleep(ms(100));
    let mut good = Client::from_stream(connect_from(other, tcp));
    let started = Instant::now();
    good.send_json(&json!({"op":"auth","token":ADMIN,"id":"ok"}));
    assert_eq!(good.expect_info("ok")["msg"], "authenticated as role admin");
    let took_good = started.elapsed();
    let (took, got) = held.join().expect("held attempt");
    assert!(got.contains("authentication failed"), "{got}");
    assert!(ms_of(took) >= 1000, "the 13th was refused after {took:?}");
    assert!(
        took_good < Duration::from_millis(500),
        "the other address waited {took_good:?}"
    );

    // WebSocket, from a third address (its own budget): ten 401s at once,
    // then the 11th after 250 ms; the other address opens at once.
    let third = [127, 0, 0, 3];
    let wrong = upgrade_request(&format!("/?token={WRONG}"), "");
    for i in 0..10 {
        let (took, got) = attempt(third, ws, wrong.as_bytes());
        assert!(got.starts_with("HTTP/1.1 401 "), "attempt {i}: {got}");
        assert!(took < Duration::from_secs(2), "attempt {i} took {took:?}");
    }
    let (took, got) = attempt(third, ws, wrong.as_bytes());
    assert!(got.starts_with("HTTP/1.1 401 "), "{got}");
    assert!(ms_of(took) >= 250, "the 11th was refused after {took:?}");
    let started = Instant::now();
    let mut s = connect_from(other, ws);
    {
        use std::io::{Read, Write};
        s.write_all(upgrade_request(&format!("/?token={}", pct(ADMIN)), "").as_bytes())
            .expect("write");
        let mut head = [0u8; 12];
        s.read_exact(&mut head).expect("response");
        assert_eq!(&head, b"HTTP/1.1 101");
    }
    assert!(started.elapsed() < Duration::from_millis(500));

    // Counted: four attempts held, all fourteen wrong or unchecked tokens
    // and the ten WebSocket refusals closed as auth_failed.
    let s = good.stats();
    assert_eq!(counter(&s, "auth_held"), 4, "{s}");
    assert_eq!(counter(&s, "closes.auth_failed"), 24, "{s}");
    assert_eq!(counter(&s, "authenticated"), 2, "{s}");
}
