//! TLS on both listeners (`--tls-cert FILE --tls-key FILE`): one rustls
//! [`ServerConnection`] per connection, a sans-io state machine the loop in
//! `server.rs` drives; no second event loop, no thread. The hub never sees
//! TLS: the shell decrypts what it reads before [`rosgate_core::Hub::on_bytes`]
//! and encrypts what it takes from the hub's output queue.
//!
//! How bytes flow, and what each connection holds:
//! - in: one socket read (the plain path's per-connection and per-turn
//!   budgets, counted in ciphertext bytes) is fed to rustls record by record
//!   ([`Session::receive`]); each run of plaintext goes to the hub at once,
//!   so rustls keeps at most one partial record (16 KiB + 2 KiB + 5 bytes,
//!   64 KiB during the handshake: rustls's own caps) and no plaintext;
//! - out: plaintext moves from the hub's queue into rustls only once rustls
//!   has written all its earlier ciphertext to the socket, at most
//!   [`TLS_WRITE_CHUNK_BYTES`] at a time ([`Session::encrypt`], with
//!   rustls's buffer limit set to the same); `Hub::wrote` is told as it
//!   moves. The hub's queue accounting (limits, drops, the write stall) is
//!   therefore ahead of the socket by at most one chunk of ciphertext held
//!   in rustls, as it is ahead of the peer by what the kernel holds
//!   (`TCP_NOTSENT_LOWAT`) on a plain connection: a peer that stops reading
//!   leaves the rest in the hub's queue, where `--max-queue-bytes` and
//!   `--write-stall-ms` apply;
//! - nothing of the hub's is encrypted before the handshake completes, and
//!   TLS bytes never reach the hub, so an unfinished handshake is an
//!   unfinished opening: `--handshake-timeout-ms` closes it.
//!
//! A TLS error (a plaintext client, no common version or cipher, a bad
//! record) queues rustls's alert; the shell writes it best-effort and
//! closes the connection as `tls_error`. A connection that ends normally
//! gets a `close_notify` after its last words.

use std::fmt;
#[cfg(test)]
use std::io::Read;
use std::io::{self, BufRead, IoSlice, Write};
use std::sync::Arc;

use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ServerConfig, ServerConnection};

/// Bytes. Plaintext moved from the hub's queue into rustls at a time, and
/// rustls's outgoing buffer limit: one TLS record, what the kernel holds
/// unsent per socket (`UNSENT_LOWAT_BYTES`). A peer that does not read
/// makes rustls hold at most this (plus record overhead) beyond the hub's
/// queue.
pub const TLS_WRITE_CHUNK_BYTES: usize = 16 * 1024;

/// Server handshake flights per loop turn, all connections together (P20):
/// answering a ClientHello costs an ECDHE key exchange and a signature,
/// 100-300 µs with ring (277 µs measured on a loaded 2-core machine), so
/// a crowd handshaking at once would stall one turn for everyone (500
/// ClientHellos: 150 ms). Past this many in a turn, connections still
/// handshaking are passed over (kept queued, read first next turn) while
/// everyone else is read as usual: a turn spends at most a few
/// milliseconds on handshakes, and an established client's request is
/// not queued behind the crowd.
pub const TLS_HANDSHAKES_PER_TURN: usize = 8;

/// The certificate and key of `--tls-cert`/`--tls-key`, loaded and checked
/// at start-up, shared by every connection.
#[derive(Clone)]
pub struct TlsConfig {
    config: Arc<ServerConfig>,
    cert: String,
}

impl fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsConfig")
            .field("cert", &self.cert)
            .finish_non_exhaustive()
    }
}

impl TlsConfig {
    /// The certificate file it was loaded from.
    pub fn cert_file(&self) -> &str {
        &self.cert
    }

    /// A fresh server session for one accepted connection.
    pub fn session(&self) -> Result<Session, rustls::Error> {
        let mut conn = ServerConnection::new(self.config.clone())?;
        conn.set_buffer_limit(Some(TLS_WRITE_CHUNK_BYTES));
        Ok(Session {
            conn,
            failed: false,
        })
    }
}

/// `--tls-cert`/`--tls-key` as given: both or neither.
pub fn from_flags(cert: Option<String>, key: Option<String>) -> Result<Option<TlsConfig>, String> {
    match (cert, key) {
        (None, None) => Ok(None),
        (Some(cert), Some(key)) => load(&cert, &key).map(Some),
        (Some(cert), None) => Err(format!(
            "--tls-cert {cert} needs --tls-key FILE (the certificate's private key)"
        )),
        (None, Some(key)) => Err(format!(
            "--tls-key {key} needs --tls-cert FILE (the certificate chain)"
        )),
    }
}

/// Loads a PEM certificate chain (the server's certificate first) and its
/// PEM private key (PKCS#8, PKCS#1 or SEC1), and checks that they belong
/// together. Every error names the file it is about; each file is read
/// within `MAX_CONFIG_FILE_BYTES` (`crate::files`).
pub fn load(cert: &str, key: &str) -> Result<TlsConfig, String> {
    // Read through the size cap of every start-up file (`crate::files`).
    let cert_pem = crate::files::read("--tls-cert", cert)?;
    let key_pem = crate::files::read("--tls-key", key)?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("--tls-cert {cert}: {}", pem_error(&e)))?;
    if certs.is_empty() {
        return Err(format!(
            "--tls-cert {cert}: no certificate in it (expected PEM, -----BEGIN CERTIFICATE-----)"
        ));
    }
    let key_der = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(|e| match e {
        pem::Error::NoItemsFound => format!(
            "--tls-key {key}: no private key in it (expected PEM, -----BEGIN PRIVATE KEY-----)"
        ),
        e => format!("--tls-key {key}: {}", pem_error(&e)),
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS set-up: {e}"))?
        .with_no_client_auth()
        .with_single_cert(certs, key_der)
        .map_err(|e| match e {
            rustls::Error::InconsistentKeys(_) => {
                format!("--tls-key {key} does not match the certificate in --tls-cert {cert} ({e})")
            }
            rustls::Error::InvalidCertificate(_) | rustls::Error::NoCertificatesPresented => {
                format!("--tls-cert {cert}: not a usable certificate ({e})")
            }
            e => format!("--tls-key {key}: not a usable private key ({e})"),
        })?;
    Ok(TlsConfig {
        config: Arc::new(config),
        cert: cert.to_string(),
    })
}

fn pem_error(e: &pem::Error) -> String {
    match e {
        pem::Error::Io(io) => format!("cannot read it: {io}"),
        pem::Error::NoItemsFound => "nothing usable in it (expected PEM)".into(),
        e => format!("malformed PEM: {e}"),
    }
}

/// What [`Session::receive`] hands on, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input<'a> {
    /// The handshake completed (before any plaintext of the peer's).
    HandshakeDone,
    /// Plaintext from the peer.
    Plain(&'a [u8]),
}

/// How [`Session::receive`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Received {
    /// Everything was consumed; more may come.
    Open,
    /// The peer sent `close_notify`: nothing more will come.
    PeerClosed,
}

/// A TLS error: the connection must close (after the alert, best effort).
#[derive(Debug)]
pub struct Failure {
    /// It happened before the handshake completed.
    pub in_handshake: bool,
    pub reason: String,
}

/// One connection's TLS state: see the module docs.
pub struct Session {
    conn: ServerConnection,
    /// A TLS error happened: the alert is the last thing sent.
    failed: bool,
}

impl Session {
    /// Whether the handshake is still under way.
    pub fn is_handshaking(&self) -> bool {
        self.conn.is_handshaking()
    }

    /// Whether the hub's plaintext may be encrypted now: the handshake
    /// completed and no TLS error happened.
    pub fn can_send(&self) -> bool {
        !self.failed && !self.conn.is_handshaking()
    }

    /// Feeds ciphertext read from the socket; `deliver` gets the end of the
    /// handshake and each run of plaintext, in order, as soon as its record
    /// is complete. All of `cipher` is consumed (rustls keeps a partial
    /// record), unless the peer closed or an error ends the connection.
    pub fn receive(
        &mut self,
        mut cipher: &[u8],
        mut deliver: impl FnMut(Input<'_>),
    ) -> Result<Received, Failure> {
        while !cipher.is_empty() {
            let was_handshaking = self.conn.is_handshaking();
            match self.conn.read_tls(&mut cipher) {
                // close_notify came: rustls reads nothing more.
                Ok(0) => break,
                Ok(_) => {}
                Err(e) => return Err(self.fail(was_handshaking, e.to_string())),
            }
            let state = match self.conn.process_new_packets() {
                Ok(state) => state,
                Err(e) => return Err(self.fail(self.conn.is_handshaking(), e.to_string())),
            };
            if was_handshaking && !self.conn.is_handshaking() {
                deliver(Input::HandshakeDone);
            }
            loop {
                let mut reader = self.conn.reader();
                let n = match reader.fill_buf() {
                    Ok(plain) if !plain.is_empty() => {
                        deliver(Input::Plain(plain));
                        plain.len()
                    }
                    _ => break,
                };
                reader.consume(n);
            }
            if state.peer_has_closed() {
                return Ok(Received::PeerClosed);
            }
        }
        Ok(Received::Open)
    }

    fn fail(&mut self, in_handshake: bool, reason: String) -> Failure {
        self.failed = true;
        Failure {
            in_handshake,
            reason,
        }
    }

    /// Whether rustls holds ciphertext (handshake, alerts, data) not yet
    /// written to the socket.
    pub fn wants_write(&self) -> bool {
        self.conn.wants_write()
    }

    /// Writes held ciphertext to `w` with one `write_vectored` call.
    pub fn write_to(&mut self, w: &mut impl Write) -> io::Result<usize> {
        self.conn.write_tls(w)
    }

    /// Encrypts plaintext for the peer (only once the handshake completed);
    /// returns how many bytes rustls took: all of them up to its buffer
    /// limit, which is [`TLS_WRITE_CHUNK_BYTES`] unless raised for last
    /// words.
    pub fn encrypt(&mut self, plain: &[IoSlice<'_>]) -> usize {
        self.conn.writer().write_vectored(plain).unwrap_or(0)
    }

    /// Lets rustls take up to `bytes` of plaintext at once (a closing
    /// connection's last words, written with one call).
    pub fn raise_limit(&mut self, bytes: usize) {
        self.conn.set_buffer_limit(Some(bytes));
    }

    /// Queues `close_notify` after what is queued, unless the connection
    /// failed or never completed its handshake.
    pub fn close(&mut self) {
        if self.can_send() {
            self.conn.send_close_notify();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::ServerName;
    use rustls::{ClientConfig, ClientConnection, RootCertStore};

    /// A server config and a client trusting it, from a certificate made now.
    fn pair() -> (TlsConfig, ClientConnection) {
        let made = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
        let dir = std::env::temp_dir().join(format!(
            "rosgate-tls-unit-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let (cert, key) = (dir.join("c.pem"), dir.join("k.pem"));
        std::fs::write(&cert, made.cert.pem()).unwrap();
        std::fs::write(&key, made.key_pair.serialize_pem()).unwrap();
        let server = load(cert.to_str().unwrap(), key.to_str().unwrap()).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        let mut roots = RootCertStore::empty();
        roots.add(made.cert.der().clone()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let name = ServerName::try_from("localhost").unwrap();
        (
            server,
            ClientConnection::new(Arc::new(config), name).unwrap(),
        )
    }

    /// Everything the client has to send.
    fn from_client(c: &mut ClientConnection) -> Vec<u8> {
        let mut out = Vec::new();
        while c.wants_write() {
            c.write_tls(&mut out).unwrap();
        }
        out
    }

    /// Everything the server session holds for the client, fed to it.
    fn to_client(s: &mut Session, c: &mut ClientConnection) -> usize {
        let mut out = Vec::new();
        while s.wants_write() {
            s.write_to(&mut out).unwrap();
        }
        let mut rd = &out[..];
        while !rd.is_empty() {
            c.read_tls(&mut rd).unwrap();
            c.process_new_packets().unwrap();
        }
        out.len()
    }

    #[test]
    fn the_handshake_comes_before_plaintext_and_output_moves_a_chunk_at_a_time() {
        let (config, mut client) = pair();
        let mut server = config.session().unwrap();
        let mut seen: Vec<String> = Vec::new();
        let mut record = |i: Input<'_>| match i {
            Input::HandshakeDone => seen.push("done".into()),
            Input::Plain(p) => seen.push(String::from_utf8_lossy(p).into_owned()),
        };
        while client.is_handshaking() || server.wants_write() {
            let hello = from_client(&mut client);
            assert_eq!(server.receive(&hello, &mut record).unwrap(), Received::Open);
            to_client(&mut server, &mut client);
        }
        // The client's Finished and its first line arrive together.
        client.writer().write_all(b"{\"op\":\"x\"}\n").unwrap();
        let bytes = from_client(&mut client);
        // Fed a byte at a time, nothing is delivered before its record is whole.
        for b in bytes.chunks(1) {
            server.receive(b, &mut record).unwrap();
        }
        assert_eq!(seen, ["done", "{\"op\":\"x\"}\n"]);
        assert!(server.can_send());
        // Session tickets went out first (the loop writes before it encrypts).
        to_client(&mut server, &mut client);

        // Offered 64 KiB, rustls takes one chunk; more only once that is written.
        let big = vec![b'a'; 64 * 1024];
        assert_eq!(server.encrypt(&[IoSlice::new(&big)]), TLS_WRITE_CHUNK_BYTES);
        assert_eq!(server.encrypt(&[IoSlice::new(&big)]), 0);
        let wire = to_client(&mut server, &mut client);
        assert!(wire > TLS_WRITE_CHUNK_BYTES && wire < TLS_WRITE_CHUNK_BYTES + 64);
        assert_eq!(
            server.encrypt(&[IoSlice::new(&big[..100]), IoSlice::new(&big[..28])]),
            128
        );
        to_client(&mut server, &mut client);
        let mut got = Vec::new();
        let mut buf = vec![0; 128 * 1024];
        while let Ok(n @ 1..) = client.reader().read(&mut buf) {
            got.extend_from_slice(&buf[..n]);
        }
        assert_eq!(got.len(), TLS_WRITE_CHUNK_BYTES + 128);

        // close_notify both ways.
        server.close();
        to_client(&mut server, &mut client);
        assert!(client.process_new_packets().unwrap().peer_has_closed());
        client.send_close_notify();
        let bye = from_client(&mut client);
        assert_eq!(server.receive(&bye, |_| {}).unwrap(), Received::PeerClosed);
    }

    #[test]
    fn a_plaintext_client_is_a_handshake_failure_with_an_alert_and_no_close_notify() {
        let (config, _) = pair();
        let mut server = config.session().unwrap();
        let err = server
            .receive(
                b"{\"op\":\"publish\",\"topic\":\"/a\",\"msg\":{}}\n",
                |_| panic!("nothing reaches the hub"),
            )
            .unwrap_err();
        assert!(err.in_handshake, "{err:?}");
        assert!(server.wants_write(), "an alert is queued");
        let mut alert = Vec::new();
        server.write_to(&mut alert).unwrap();
        assert_eq!(alert[0], 0x15, "an alert record: {alert:?}");
        assert!(!server.can_send());
        server.close();
        assert!(!server.wants_write(), "no close_notify after a fatal alert");
    }

    #[test]
    fn flags_come_in_pairs_and_errors_name_the_file() {
        assert!(from_flags(None, None).unwrap().is_none());
        let e = from_flags(Some("c.pem".into()), None).unwrap_err();
        assert!(e.contains("c.pem") && e.contains("--tls-key"), "{e}");
        let e = from_flags(None, Some("k.pem".into())).unwrap_err();
        assert!(e.contains("k.pem") && e.contains("--tls-cert"), "{e}");
        let e = load("/nonexistent/c.pem", "/nonexistent/k.pem").unwrap_err();
        assert!(
            e.starts_with("--tls-cert /nonexistent/c.pem: cannot read it"),
            "{e}"
        );
    }
}
