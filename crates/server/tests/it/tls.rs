//! TLS on both listeners (`--tls-cert FILE --tls-key FILE`): NDJSON over TLS
//! on the TCP port, `wss://` and HTTPS on the WebSocket port, against the
//! real binary with a certificate made at test time (rcgen, a temp dir;
//! nothing secret is committed) and a rustls client trusting it.
//!
//! Covered: publish/subscribe/call on both listeners and across them;
//! `/metrics` and the dashboard over HTTPS; a plaintext client on a TLS port
//! (closed, `closes.tls_error`, others served); a handshake that stalls
//! (closed at `--handshake-timeout-ms`); a 4 MiB message both ways; a slow
//! TLS reader (queue limits and the write stall apply, memory stays
//! bounded); start-up refusals naming the file; the CLI's `tls://`,
//! `wss://` and `--ca-file`.

use std::fs;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rosgate_wire::ws::client;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};
use serde_json::{json, Value};

use crate::http::{parse_reply, Exposition, Reply};
use crate::support::*;
use crate::wsclient::{masked, response_head, take_frame, upgrade_request, KEY};

// ---------------------------------------------------------------------------------------------
// Certificates and the gateway
// ---------------------------------------------------------------------------------------------

/// A self-signed certificate for `localhost` and `127.0.0.1`, made now, in a
/// temp dir removed on drop.
struct Certs {
    dir: PathBuf,
    cert: String,
    key: String,
}

impl Certs {
    fn new() -> Certs {
        Certs::for_names(&["localhost", "127.0.0.1"])
    }

    /// A self-signed certificate for these names (DNS names or addresses).
    fn for_names(names: &[&str]) -> Certs {
        let dir =
            std::env::temp_dir().join(format!("rosgate-tls-{}-{}", std::process::id(), uniq()));
        fs::create_dir_all(&dir).expect("temp dir");
        let certs = Certs {
            cert: dir.join("cert.pem").display().to_string(),
            key: dir.join("key.pem").display().to_string(),
            dir,
        };
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let made = rcgen::generate_simple_self_signed(names).expect("rcgen");
        fs::write(&certs.cert, made.cert.pem()).expect("write cert");
        fs::write(&certs.key, made.key_pair.serialize_pem()).expect("write key");
        certs
    }

    /// Writes `contents` to a file of the temp dir; returns its path.
    fn file(&self, name: &str, contents: &str) -> String {
        let p = self.dir.join(name);
        fs::write(&p, contents).expect("write file");
        p.display().to_string()
    }

    /// A client trusting this certificate and nothing else.
    fn client_config(&self) -> Arc<ClientConfig> {
        let mut roots = RootCertStore::empty();
        for c in CertificateDer::pem_file_iter(&self.cert).expect("open cert") {
            roots.add(c.expect("cert PEM")).expect("add root");
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        Arc::new(
            ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .expect("versions")
                .with_root_certificates(roots)
                .with_no_client_auth(),
        )
    }
}

impl Drop for Certs {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// A gateway serving TLS on both listeners; `gw.addr` is the TLS TCP port.
fn start(certs: &Certs, flags: &[&str]) -> Gateway {
    let mut args = vec!["--tls-cert", &certs.cert, "--tls-key", &certs.key];
    args.extend_from_slice(flags);
    Gateway::start(&args)
}

/// The `wss://` address of the start-up line.
fn wss_addr(gw: &Gateway) -> SocketAddr {
    gw.logs()
        .iter()
        .find_map(|l| {
            l.split("rosgate websocket listening on wss://")
                .nth(1)?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no wss:// line: {:?}", gw.logs()))
}

// ---------------------------------------------------------------------------------------------
// A TLS client: NDJSON lines or WebSocket frames, every read with a deadline
// ---------------------------------------------------------------------------------------------

struct Tls {
    s: StreamOwned<ClientConnection, TcpStream>,
    buf: Vec<u8>,
    /// Bytes of `buf` known to hold no newline (a 4 MiB line is scanned once).
    scanned: usize,
}

enum Fill {
    Data,
    Timeout,
    Closed,
}

impl Tls {
    fn connect(addr: SocketAddr, certs: &Certs) -> Tls {
        let sock = TcpStream::connect_timeout(&addr, REPLY).expect("connect");
        Tls::over(sock, certs)
    }

    /// TLS over a connected socket; the handshake completes here.
    fn over(mut sock: TcpStream, certs: &Certs) -> Tls {
        sock.set_nodelay(true).expect("nodelay");
        sock.set_read_timeout(Some(REPLY)).expect("timeout");
        sock.set_write_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let name = ServerName::try_from("localhost").expect("name");
        let mut conn = ClientConnection::new(certs.client_config(), name).expect("client");
        while conn.is_handshaking() {
            conn.complete_io(&mut sock).expect("TLS handshake");
        }
        Tls {
            s: StreamOwned::new(conn, sock),
            buf: Vec::new(),
            scanned: 0,
        }
    }

    fn send(&mut self, bytes: &[u8]) {
        self.s.write_all(bytes).expect("TLS write");
        self.s.flush().expect("TLS flush");
    }

    fn send_line(&mut self, line: &str) {
        self.send(format!("{line}\n").as_bytes());
    }

    /// Reads what arrives before `dl` into the buffer.
    fn fill(&mut self, dl: Instant) -> Fill {
        let now = Instant::now();
        if now >= dl {
            return Fill::Timeout;
        }
        self.s
            .sock
            .set_read_timeout(Some((dl - now).max(ms(1))))
            .expect("timeout");
        let mut tmp = [0u8; 65536];
        match self.s.read(&mut tmp) {
            Ok(0) => Fill::Closed,
            Ok(n) => {
                self.buf.extend_from_slice(&tmp[..n]);
                Fill::Data
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                Fill::Timeout
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => Fill::Data,
            Err(_) => Fill::Closed,
        }
    }

    // ----- NDJSON -----

    fn recv_line(&mut self, dl: Instant) -> Option<Vec<u8>> {
        loop {
            if let Some(i) = self.buf[self.scanned..].iter().position(|&b| b == b'\n') {
                let i = self.scanned + i;
                let line = self.buf[..i].to_vec();
                self.buf.drain(..=i);
                self.scanned = 0;
                return Some(line);
            }
            self.scanned = self.buf.len();
            if let Fill::Timeout | Fill::Closed = self.fill(dl) {
                return None;
            }
        }
    }

    fn recv(&mut self) -> Value {
        let line = self
            .recv_line(deadline(REPLY))
            .expect("a line before the deadline");
        parse_line(&String::from_utf8(line).expect("UTF-8 line"))
    }

    fn recv_until(&mut self, pred: impl Fn(&Value) -> bool) -> Value {
        loop {
            let v = self.recv();
            if pred(&v) {
                return v;
            }
        }
    }

    fn expect_info(&mut self, id: &str) {
        let v = self.recv();
        assert_status(&v, "info", Some(&json!(id)));
    }

    fn stats(&mut self) -> Value {
        let id = format!("stats-{}", uniq());
        self.send_line(&format!(
            r#"{{"op":"call_service","service":"/rosgate/stats","id":"{id}","args":{{}}}}"#
        ));
        let v = self.recv_until(|v| v["op"] == "service_response" && v["id"] == id.as_str());
        v["values"].clone()
    }

    /// Reads until the gateway closes; panics if it does not within `within`.
    fn expect_closed(&mut self, within: Duration) {
        let dl = deadline(within);
        loop {
            match self.fill(dl) {
                Fill::Data => self.buf.clear(),
                Fill::Closed => return,
                Fill::Timeout => panic!("TLS connection not closed within {within:?}"),
            }
        }
    }

    // ----- WebSocket -----

    fn upgrade(&mut self) {
        self.send(client::request("localhost", "/", KEY, &[]).as_bytes());
        let dl = deadline(REPLY);
        let head = loop {
            if let Some(head) = response_head(&self.buf) {
                break head;
            }
            assert!(matches!(self.fill(dl), Fill::Data), "no upgrade response");
        };
        self.buf.drain(..head.len);
        assert_eq!(head.check_accept(KEY), Ok(()), "{head:?}");
    }

    fn send_text(&mut self, text: &str) {
        self.send(&masked(0x1, true, text.as_bytes()));
    }

    /// The next server frame's (opcode, payload).
    fn frame(&mut self) -> (u8, Vec<u8>) {
        let dl = deadline(REPLY);
        loop {
            if let Some(f) = take_frame(&mut self.buf) {
                return f;
            }
            assert!(
                matches!(self.fill(dl), Fill::Data),
                "no WebSocket frame before the deadline"
            );
        }
    }

    fn json(&mut self) -> Value {
        let (op, payload) = self.frame();
        assert_eq!(op, 0x1, "text frame expected");
        serde_json::from_slice(&payload).expect("JSON frame")
    }
}

/// `/rosgate/stats` over a fresh TLS connection.
fn stats(gw: &Gateway, certs: &Certs) -> Value {
    Tls::connect(gw.addr, certs).stats()
}

fn wait_for_stats(gw: &Gateway, certs: &Certs, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let dl = deadline(Duration::from_secs(10));
    loop {
        let s = stats(gw, certs);
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

/// Everything a plain TCP socket gets until the gateway closes it.
fn read_until_closed(s: &mut TcpStream, within: Duration) -> Vec<u8> {
    let dl = deadline(within);
    let mut out = Vec::new();
    let mut tmp = [0u8; 4096];
    loop {
        let now = Instant::now();
        assert!(now < dl, "not closed within {within:?}; got {out:?}");
        s.set_read_timeout(Some((dl - now).max(ms(1))))
            .expect("timeout");
        match s.read(&mut tmp) {
            Ok(0) => return out,
            Ok(n) => out.extend_from_slice(&tmp[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return out,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Traffic on both listeners
// ---------------------------------------------------------------------------------------------

#[test]
fn ndjson_over_tls_publishes_subscribes_and_calls() {
    let certs = Certs::new();
    let gw = start(&certs, &[]);
    let mut sub = Tls::connect(gw.addr, &certs);
    sub.send_line(r#"{"op":"subscribe","topic":"/chatter","type":"std_msgs/String","id":"s1"}"#);
    sub.expect_info("s1");
    let mut publisher = Tls::connect(gw.addr, &certs);
    publisher.send_line(r#"{"op":"publish","topic":"/chatter","msg":{"data":"hello"}}"#);
    let v = sub.recv();
    assert_eq!(v["op"], "publish");
    assert_eq!(v["msg"], json!({"data": "hello"}));

    let mut provider = Tls::connect(gw.addr, &certs);
    provider
        .send_line(r#"{"op":"advertise_service","service":"/add","type":"example/Add","id":"a1"}"#);
    provider.expect_info("a1");
    let mut caller = Tls::connect(gw.addr, &certs);
    caller.send_line(r#"{"op":"call_service","service":"/add","id":"c1","args":{"a":1,"b":2}}"#);
    let call = provider.recv();
    assert_eq!(call["op"], "call_service");
    assert_eq!(call["args"], json!({"a": 1, "b": 2}));
    let rid = call["id"].as_str().expect("provider-side id");
    provider.send_line(&format!(
        r#"{{"op":"service_response","service":"/add","id":"{rid}","values":{{"sum":3}},"result":true}}"#
    ));
    let r = caller.recv();
    assert_eq!(r["op"], "service_response");
    assert_eq!(r["id"], "c1");
    assert_eq!(r["values"], json!({"sum": 3}));
    assert_eq!(r["result"], true);

    let s = caller.stats();
    assert!(counter(&s, "tls_handshakes") >= 4, "{s}");
    assert_eq!(counter(&s, "tls_handshake_failures"), 0, "{s}");
    assert_eq!(counter(&s, "closes.tls_error"), 0, "{s}");
    assert_eq!(counter(&s, "errors_total"), 0, "{s}");
}

#[test]
fn wss_publishes_subscribes_and_calls_across_both_tls_listeners() {
    let certs = Certs::new();
    let gw = start(&certs, &[]);
    let mut ws = Tls::connect(wss_addr(&gw), &certs);
    ws.upgrade();
    ws.send_text(r#"{"op":"subscribe","topic":"/chatter","type":"std_msgs/String"}"#);
    ws.send_text(r#"{"op":"advertise_service","service":"/echo","type":"example/Echo"}"#);
    // A barrier: the subscription and the service are in place.
    ws.send_text(r#"{"op":"call_service","service":"/rosapi/get_time","id":"b","args":{}}"#);
    assert_eq!(ws.json()["id"], "b");

    let mut tcp = Tls::connect(gw.addr, &certs);
    tcp.send_line(r#"{"op":"subscribe","topic":"/chatter","type":"std_msgs/String","id":"s"}"#);
    tcp.expect_info("s");
    tcp.send_line(r#"{"op":"publish","topic":"/chatter","msg":{"data":"from tls"}}"#);
    assert_eq!(ws.json()["msg"], json!({"data": "from tls"}));
    assert_eq!(tcp.recv()["msg"], json!({"data": "from tls"}));
    ws.send_text(r#"{"op":"publish","topic":"/chatter","msg":{"data":"from wss"}}"#);
    assert_eq!(tcp.recv()["msg"], json!({"data": "from wss"}));
    assert_eq!(ws.json()["msg"], json!({"data": "from wss"}));

    tcp.send_line(r#"{"op":"call_service","service":"/echo","id":"c","args":{"x":[1,2]}}"#);
    let call = ws.json();
    assert_eq!(call["op"], "call_service");
    assert_eq!(call["args"], json!({"x": [1, 2]}));
    ws.send_text(&format!(
        r#"{{"op":"service_response","service":"/echo","id":{},"values":{{"x":[1,2]}},"result":true}}"#,
        call["id"]
    ));
    let r = tcp.recv();
    assert_eq!(
        (r["id"].clone(), r["result"].clone()),
        (json!("c"), json!(true))
    );
    assert_eq!(r["values"], json!({"x": [1, 2]}));
    let s = tcp.stats();
    assert!(counter(&s, "tls_handshakes") >= 2, "{s}");
    assert_eq!(counter(&s, "closes.tls_error"), 0, "{s}");
}

/// One HTTPS request on the `wss://` port; the gateway answers and closes.
fn https_get(gw: &Gateway, certs: &Certs, path: &str) -> Reply {
    https_get_with(gw, certs, path, "")
}

/// `GET path` with more header lines (each ending in CRLF).
fn https_get_with(gw: &Gateway, certs: &Certs, path: &str, headers: &str) -> Reply {
    let mut c = Tls::connect(wss_addr(gw), certs);
    c.send(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n{headers}\r\n").as_bytes());
    let dl = deadline(REPLY);
    loop {
        match c.fill(dl) {
            Fill::Data => {}
            Fill::Closed => break,
            Fill::Timeout => panic!("GET {path}: not answered and closed in time"),
        }
    }
    let r = parse_reply(std::mem::take(&mut c.buf));
    let len: usize = r
        .header("content-length")
        .expect("Content-Length")
        .parse()
        .expect("number");
    assert_eq!(len, r.body.len(), "GET {path}: the whole body arrived");
    r
}

#[test]
fn metrics_and_the_dashboard_are_served_over_https() {
    let certs = Certs::new();
    let gw = start(&certs, &[]);
    let r = https_get(&gw, &certs, "/metrics");
    assert_eq!(r.status, 200);
    let text = r.text();
    let exp = Exposition::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    // This very request completed a handshake before it was answered.
    assert!(exp.value("rosgate_tls_handshakes_total") >= 1.0, "{text}");
    assert_eq!(exp.value("rosgate_tls_handshake_failures_total"), 0.0);
    assert!(
        text.contains("rosgate_closes_total{reason=\"tls_error\"} 0"),
        "{text}"
    );
    // The dashboard's biggest file (tens of KiB) arrives whole: last words
    // over TLS are not cut to one record.
    let index = https_get(&gw, &certs, "/");
    assert_eq!(index.status, 200);
    let js = https_get(&gw, &certs, "/dashboard.js");
    assert_eq!(js.status, 200);
    assert!(js.body.len() > 16 * 1024, "{}", js.body.len());
    let s = stats(&gw, &certs);
    assert_eq!(counter(&s, "closes.http_served"), 3, "{s}");
    assert_eq!(counter(&s, "closes.tls_error"), 0, "{s}");
}

#[test]
fn tokens_over_tls_on_a_network_address() {
    use crate::security::{token_file, ADMIN, BUILTIN_TOKENS, WRONG};
    let certs = Certs::new();
    let tokens = token_file(BUILTIN_TOKENS);
    // Beyond loopback with tokens and TLS: the configuration docs/security.md
    // recommends. It starts without the cleartext warning.
    let gw = Gateway::spawn_args(&[
        "--listen",
        "0.0.0.0:0",
        "--ws-listen",
        "0.0.0.0:0",
        "--auth-tokens",
        tokens.path(),
        "--tls-cert",
        &certs.cert,
        "--tls-key",
        &certs.key,
    ])
    .unwrap_or_else(|e| panic!("{e}"));
    let logs = gw.logs();
    assert!(
        logs.iter().any(|l| l.contains("authentication required")),
        "{logs:?}"
    );
    assert!(!logs.iter().any(|l| l.contains("unencrypted")), "{logs:?}");
    let tcp: SocketAddr = format!("127.0.0.1:{}", gw.addr.port()).parse().unwrap();

    // The auth op inside TLS, then anything the role allows.
    let mut c = Tls::connect(tcp, &certs);
    c.send_line(&format!(r#"{{"op":"auth","token":"{ADMIN}","id":"a"}}"#));
    let s = c.stats();
    assert_eq!(counter(&s, "authenticated"), 1, "{s}");
    assert!(counter(&s, "tls_handshakes") >= 1, "{s}");

    // A wrong token inside TLS: refused and closed, as in plain text.
    let mut bad = Tls::connect(tcp, &certs);
    bad.send_line(&format!(r#"{{"op":"auth","token":"{WRONG}","id":"b"}}"#));
    let v = bad.recv();
    assert_status(&v, "error", Some(&json!("b")));
    bad.expect_closed(REPLY);

    // HTTPS /metrics needs the bearer token too.
    let r = https_get(&gw, &certs, "/metrics");
    assert_eq!(r.status, 401, "{}", r.text());
    let r = https_get_with(
        &gw,
        &certs,
        "/metrics",
        &format!("Authorization: Bearer {ADMIN}\r\n"),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let text = r.text();
    let exp = Exposition::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert!(exp.value("rosgate_authenticated_total") >= 1.0, "{text}");
    let s = c.stats();
    assert_eq!(counter(&s, "closes.auth_failed"), 1, "{s}");
}

// ---------------------------------------------------------------------------------------------
// Failures
// ---------------------------------------------------------------------------------------------

#[test]
fn a_plaintext_client_on_a_tls_port_fails_cleanly_and_others_are_served() {
    let certs = Certs::new();
    let gw = start(&certs, &[]);
    let mut sub = Tls::connect(gw.addr, &certs);
    sub.send_line(r#"{"op":"subscribe","topic":"/t","type":"T","id":"s"}"#);
    sub.expect_info("s");

    let mut plain = TcpStream::connect(gw.addr).expect("connect");
    plain
        .write_all(b"{\"op\":\"publish\",\"topic\":\"/t\",\"msg\":{}}\n")
        .expect("send");
    let got = read_until_closed(&mut plain, REPLY);
    // A TLS alert record (content type 21), never JSON.
    assert_eq!(got.first(), Some(&0x15), "{got:?}");
    assert!(!got.contains(&b'{'), "{got:?}");

    let mut plain_ws = TcpStream::connect(wss_addr(&gw)).expect("connect");
    plain_ws
        .write_all(upgrade_request("/", "").as_bytes())
        .expect("send");
    let got = read_until_closed(&mut plain_ws, REPLY);
    assert_eq!(got.first(), Some(&0x15), "{got:?}");

    let s = stats(&gw, &certs);
    assert_eq!(counter(&s, "closes.tls_error"), 2, "{s}");
    assert_eq!(counter(&s, "tls_handshake_failures"), 2, "{s}");
    assert_eq!(
        counter(&s, "published"),
        0,
        "nothing of theirs reached the hub: {s}"
    );
    // The others never noticed.
    let mut publisher = Tls::connect(gw.addr, &certs);
    publisher.send_line(r#"{"op":"publish","topic":"/t","msg":{"n":1}}"#);
    assert_eq!(sub.recv()["msg"], json!({"n": 1}));
}

/// The first half of a real ClientHello.
fn half_a_client_hello(certs: &Certs) -> Vec<u8> {
    let name = ServerName::try_from("localhost").expect("name");
    let mut conn = ClientConnection::new(certs.client_config(), name).expect("client");
    let mut hello = Vec::new();
    conn.write_tls(&mut hello).expect("ClientHello");
    assert!(hello.len() > 100, "{}", hello.len());
    hello.truncate(hello.len() / 2);
    hello
}

#[test]
fn a_tls_handshake_that_stalls_is_closed_at_the_deadline() {
    let certs = Certs::new();
    let gw = start(&certs, &["--handshake-timeout-ms", "300"]);
    let mut fine = Tls::connect(gw.addr, &certs);
    fine.send_line(r#"{"op":"subscribe","topic":"/t","type":"T","id":"s"}"#);
    fine.expect_info("s");
    let t0 = Instant::now();
    let half = half_a_client_hello(&certs);
    let mut stalled = TcpStream::connect(gw.addr).expect("connect");
    stalled.write_all(&half).expect("send");
    let mut stalled_ws = TcpStream::connect(wss_addr(&gw)).expect("connect");
    stalled_ws.write_all(&half).expect("send");
    // A handshake that completed is not an opening: the first line is.
    let mut mute = Tls::connect(gw.addr, &certs);
    assert!(read_until_closed(&mut stalled, Duration::from_secs(5)).is_empty());
    assert!(read_until_closed(&mut stalled_ws, Duration::from_secs(5)).is_empty());
    mute.expect_closed(Duration::from_secs(5));
    assert!(t0.elapsed() >= ms(250), "closed before the deadline");
    let s = stats(&gw, &certs);
    assert_eq!(counter(&s, "closes.handshake_timeout"), 3, "{s}");
    assert_eq!(counter(&s, "closes.tls_error"), 0, "{s}");
    assert_eq!(counter(&s, "tls_handshake_failures"), 0, "{s}");
    assert_eq!(counter(&s, "connections_pending"), 0, "{s}");
    fine.send_line(r#"{"op":"publish","topic":"/t","msg":1}"#);
    assert_eq!(fine.recv()["msg"], 1);
}

// ---------------------------------------------------------------------------------------------
// Sizes and slow readers
// ---------------------------------------------------------------------------------------------

#[test]
fn a_four_mib_message_crosses_tls_intact_both_ways() {
    let certs = Certs::new();
    let gw = start(&certs, &[]);
    let big: String = (0..4 * 1024 * 1024 / 16)
        .map(|i| format!("{:015x}-", i))
        .collect();
    let mut tcp = Tls::connect(gw.addr, &certs);
    tcp.send_line(r#"{"op":"subscribe","topic":"/big","type":"T","id":"s"}"#);
    tcp.expect_info("s");
    let mut ws = Tls::connect(wss_addr(&gw), &certs);
    ws.upgrade();
    ws.send_text(r#"{"op":"subscribe","topic":"/big","type":"T"}"#);
    ws.send_text(r#"{"op":"call_service","service":"/rosapi/get_time","id":"b","args":{}}"#);
    assert_eq!(ws.json()["id"], "b");

    let mut publisher = Tls::connect(gw.addr, &certs);
    publisher.send_line(&format!(
        r#"{{"op":"publish","topic":"/big","msg":{{"data":"{big}"}}}}"#
    ));
    assert_eq!(tcp.recv()["msg"]["data"].as_str(), Some(big.as_str()));
    assert_eq!(ws.json()["msg"]["data"].as_str(), Some(big.as_str()));
    // And from the wss side, in one frame.
    let rev: String = big.chars().rev().collect();
    ws.send_text(&format!(
        r#"{{"op":"publish","topic":"/big","msg":{{"data":"{rev}"}}}}"#
    ));
    assert_eq!(tcp.recv()["msg"]["data"].as_str(), Some(rev.as_str()));
    assert_eq!(ws.json()["msg"]["data"].as_str(), Some(rev.as_str()));
}

fn rss_kib(pid: u32) -> u64 {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("VmRSS")
}

#[test]
fn a_slow_tls_reader_is_held_to_the_queue_limits_and_the_write_stall() {
    const QUEUE: u64 = 256 * 1024;
    let certs = Certs::new();
    let gw = start(
        &certs,
        &["--max-queue-bytes", "262144", "--write-stall-ms", "5000"],
    );
    let base = stats(&gw, &certs);
    let rss0 = rss_kib(gw.pid());

    // Subscribes, then never reads again, through a 4 KiB receive window.
    let slow_sock = {
        use socket2::{Domain, Socket, Type};
        let s = Socket::new(Domain::IPV4, Type::STREAM, None).expect("socket");
        s.set_recv_buffer_size(4096).expect("SO_RCVBUF");
        s.connect_timeout(&gw.addr.into(), REPLY).expect("connect");
        TcpStream::from(s)
    };
    let mut slow = Tls::over(slow_sock, &certs);
    slow.send_line(r#"{"op":"subscribe","topic":"/img","type":"T","id":"s"}"#);
    slow.expect_info("s");

    // 16 MiB of 16 KiB images: what a buffer without a bound would keep.
    let t0 = Instant::now();
    let mut publisher = Tls::connect(gw.addr, &certs);
    let pad = "p".repeat(16 * 1024);
    let line = format!(r#"{{"op":"publish","topic":"/img","msg":{{"data":"{pad}"}}}}"#) + "\n";
    let batch = line.repeat(64);
    for _ in 0..16 {
        publisher.send(batch.as_bytes());
    }
    let s = publisher.stats();
    let took = t0.elapsed();
    assert!(took < ms(4500), "publishing took {took:?}, past the stall");
    assert_eq!(counter(&s, "published") - counter(&base, "published"), 1024);
    assert!(
        counter(&s, "dropped") > 900,
        "most were shed (in {took:?}): {s}"
    );
    let queued = counter(&s, "queued_bytes");
    assert!(
        queued <= QUEUE + 64 * 1024 + 2 * line.len() as u64,
        "the queue limit holds over TLS: {queued} ({s})"
    );
    let grown = rss_kib(gw.pid()).saturating_sub(rss0);
    assert!(
        grown < 8 * 1024,
        "RSS grew {grown} KiB for a reader held to a 256 KiB queue"
    );
    // No progress: the write stall closes it, and only it.
    let s = wait_for_stats(&gw, &certs, "the write stall", |s| {
        counter(s, "closes.write_stall") == 1
    });
    assert_eq!(counter(&s, "subscriptions"), 0, "{s}");
    assert!(counter(&s, "queued_bytes") <= 1024, "{s}");
    assert_eq!(counter(&s, "closes.tls_error"), 0, "{s}");
    publisher.send_line(r#"{"op":"subscribe","topic":"/img","type":"T","id":"again"}"#);
    publisher.expect_info("again");
}

// ---------------------------------------------------------------------------------------------
// Start-up
// ---------------------------------------------------------------------------------------------

/// Runs the binary to completion with `env` added.
fn run(args: &[&str], env: &[(&str, &str)]) -> Output {
    run_to_exit(args, env, EXIT_WITHIN)
}

/// Start-up with these TLS flags must fail with exit status 2 and a message
/// containing every one of `names`.
fn refused(tls_flags: &[&str], names: &[&str]) {
    let mut args = vec!["--listen", "127.0.0.1:0", "--ws-listen", "127.0.0.1:0"];
    args.extend_from_slice(tls_flags);
    let out = run(&args, &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{tls_flags:?}: {err}");
    assert!(!err.contains("listening on"), "{tls_flags:?}: {err}");
    for n in names {
        assert!(
            err.contains(n),
            "{tls_flags:?}: the message names {n}: {err}"
        );
    }
}

#[test]
fn a_bad_certificate_or_key_stops_start_up_naming_the_file() {
    let certs = Certs::new();
    let other = Certs::new();
    let (cert, key) = (certs.cert.as_str(), certs.key.as_str());
    let missing = certs.dir.join("missing.pem").display().to_string();
    let text = certs.file("text.pem", "not a certificate\n");
    let broken = certs.file(
        "broken.pem",
        "-----BEGIN CERTIFICATE-----\nMIIB!!!notbase64\n-----END CERTIFICATE-----\n",
    );
    let garbage_der = certs.file(
        "garbage.pem",
        "-----BEGIN CERTIFICATE-----\naGVsbG8gd29ybGQ=\n-----END CERTIFICATE-----\n",
    );
    refused(
        &["--tls-cert", &missing, "--tls-key", key],
        &[&missing, "--tls-cert"],
    );
    refused(
        &["--tls-cert", &text, "--tls-key", key],
        &[&text, "no certificate"],
    );
    refused(&["--tls-cert", &broken, "--tls-key", key], &[&broken]);
    refused(
        &["--tls-cert", &garbage_der, "--tls-key", key],
        &[&garbage_der],
    );
    refused(
        &["--tls-cert", cert, "--tls-key", &missing],
        &[&missing, "--tls-key"],
    );
    refused(
        &["--tls-cert", cert, "--tls-key", cert],
        &[cert, "no private key"],
    );
    refused(
        &["--tls-cert", cert, "--tls-key", &text],
        &[&text, "--tls-key"],
    );
    refused(
        &["--tls-cert", cert, "--tls-key", &other.key],
        &[cert, &other.key, "does not match"],
    );
    refused(&["--tls-cert", cert], &[cert, "--tls-key"]);
    refused(&["--tls-key", key], &[key, "--tls-cert"]);
}

#[test]
fn the_start_up_lines_say_wss_and_tls_and_the_json_ones_too() {
    let certs = Certs::new();
    let gw = start(&certs, &[]);
    let logs = gw.logs();
    assert!(logs
        .iter()
        .any(|l| l.starts_with("rosgate websocket listening on wss://127.0.0.1:")));
    assert!(logs
        .iter()
        .any(|l| l.starts_with("rosgate ") && l.contains(" listening on tls://127.0.0.1:")));
    // JSON logs: the same addresses, with their schemes.
    let mut child = Command::new(BIN)
        .args(["--listen", "127.0.0.1:0", "--ws-listen", "127.0.0.1:0"])
        .args(["--foxglove-listen", "127.0.0.1:0"])
        .args(["--tls-cert", &certs.cert, "--tls-key", &certs.key])
        .args(["--log-format", "json"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for l in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(l);
        }
    });
    let mut lines: Vec<Value> = Vec::new();
    while lines.len() < 3 {
        let Ok(l) = rx.recv_timeout(Duration::from_secs(10)) else {
            break;
        };
        if let Ok(v) = serde_json::from_str::<Value>(&l) {
            if v["msg"] == "listening" {
                lines.push(v);
            }
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(
        lines[0]["addr"].as_str().unwrap().starts_with("wss://"),
        "{lines:?}"
    );
    // The Foxglove listener speaks TLS as the WebSocket one does.
    assert_eq!(lines[1]["transport"], "foxglove", "{lines:?}");
    assert!(
        lines[1]["addr"].as_str().unwrap().starts_with("wss://"),
        "{lines:?}"
    );
    assert!(
        lines[2]["addr"].as_str().unwrap().starts_with("tls://"),
        "{lines:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// The CLI
// ---------------------------------------------------------------------------------------------

#[test]
fn the_cli_speaks_tls_and_wss_trusting_ca_file() {
    let certs = Certs::new();
    let gw = start(&certs, &[]);
    let tls_url = format!("tls://localhost:{}", gw.addr.port());
    let wss_url = format!("wss://127.0.0.1:{}/", wss_addr(&gw).port());
    let ca = certs.cert.as_str();

    let out = run(
        &[
            "service",
            "call",
            "/rosapi/get_time",
            "rosapi/GetTime",
            "--url",
            &tls_url,
            "--ca-file",
            ca,
        ],
        &[],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(text.contains("sec:"), "{text}");

    let mut sub = Tls::connect(gw.addr, &certs);
    sub.send_line(r#"{"op":"subscribe","topic":"/from_cli","type":"std_msgs/String","id":"s"}"#);
    sub.expect_info("s");
    let out = run(
        &[
            "topic",
            "pub",
            "--once",
            "/from_cli",
            "std_msgs/String",
            "{data: hi}",
            "--url",
            &wss_url,
        ],
        &[("ROSGATE_CA_FILE", ca)],
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(sub.recv()["msg"], json!({"data": "hi"}));
    let out = run(
        &["topic", "list", "--url", &wss_url],
        &[("ROSGATE_CA_FILE", ca)],
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("/from_cli"),
        "{out:?}"
    );

    // Not trusted: unreachable (3), with the way out in the message.
    let out = run(&["topic", "list", "--url", &tls_url], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains("certificate") && err.contains("--ca-file"),
        "{err}"
    );
    // A CA file that is not one: a usage error naming it.
    let out = run(
        &["topic", "list", "--url", &tls_url, "--ca-file", &certs.key],
        &[],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(&certs.key), "{err}");
    // The name must match: a certificate for another name is refused.
    let robot = Certs::for_names(&["robot.invalid"]);
    let gw_robot = start(&robot, &[]);
    let out = run(
        &[
            "topic",
            "list",
            "--url",
            &format!("tls://localhost:{}", gw_robot.addr.port()),
            "--ca-file",
            &robot.cert,
        ],
        &[],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("not valid for name"), "{err}");

    // TLS to a plain gateway fails cleanly and says why.
    let plain = Gateway::start(&[]);
    let out = run(
        &[
            "topic",
            "list",
            "--timeout",
            "2",
            "--url",
            &format!("tls://127.0.0.1:{}", plain.addr.port()),
            "--ca-file",
            ca,
        ],
        &[],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("TLS"), "{err}");
    let s = stats(&gw, &certs);
    assert!(
        counter(&s, "tls_handshake_failures") >= 1,
        "untrusted clients abort: {s}"
    );
}
