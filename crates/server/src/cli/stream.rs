//! The CLI's byte stream: plain TCP, or TLS over it for `tls://` and
//! `wss://` URLs (rustls, blocking). The gateway's certificate is checked
//! against the certificates of `--ca-file FILE` (or `$ROSGATE_CA_FILE`),
//! and its name against the URL's host. There are no built-in roots: a
//! gateway's certificate is usually self-signed or from a private CA; to
//! trust the system's public CAs, pass their bundle
//! (`--ca-file /etc/ssl/certs/ca-certificates.crt`).

use std::io::{self, ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};

use super::Error;

/// A connection to the gateway, plain or TLS.
pub enum Stream {
    Plain(TcpStream),
    Tls(Box<StreamOwned<ClientConnection, TcpStream>>),
}

impl Stream {
    fn sock(&self) -> &TcpStream {
        match self {
            Stream::Plain(s) => s,
            Stream::Tls(t) => &t.sock,
        }
    }

    pub fn set_read_timeout(&self, d: Option<Duration>) -> io::Result<()> {
        self.sock().set_read_timeout(d)
    }

    /// Ends our sending side: TLS says `close_notify` first.
    pub fn shutdown_write(&mut self) {
        if let Stream::Tls(t) = self {
            t.conn.send_close_notify();
            let _ = t.flush();
        }
        let _ = self.sock().shutdown(Shutdown::Write);
    }

    /// Wraps a connected socket in TLS and completes the handshake before
    /// `deadline`; `host` is the URL's (a name or an address) and must be
    /// in the gateway's certificate.
    pub fn tls(
        mut sock: TcpStream,
        host: &str,
        ca_file: Option<&str>,
        deadline: Instant,
    ) -> Result<Stream, Error> {
        let config = client_config(ca_file)?;
        let name = ServerName::try_from(host.to_string())
            .map_err(|e| Error::Usage(format!("--url: {host:?} is not a TLS server name: {e}")))?;
        let mut conn = ClientConnection::new(config, name)
            .map_err(|e| Error::Unreachable(format!("TLS: {e}")))?;
        while conn.is_handshaking() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Error::Unreachable(
                    "TLS handshake: no answer in time".into(),
                ));
            }
            sock.set_read_timeout(Some(left))
                .map_err(|e| Error::Unreachable(format!("socket: {e}")))?;
            match conn.complete_io(&mut sock) {
                Ok(_) => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(handshake_error(e, ca_file)),
            }
        }
        Ok(Stream::Tls(Box::new(StreamOwned::new(conn, sock))))
    }
}

fn handshake_error(e: io::Error, ca_file: Option<&str>) -> Error {
    let text = e.to_string();
    if e.kind() == ErrorKind::UnexpectedEof {
        Error::Unreachable(
            "the gateway closed the connection during the TLS handshake \
             (does it serve TLS there? if not, use tcp:// or ws://)"
                .into(),
        )
    } else if text.contains("certificate") && ca_file.is_none() {
        Error::Unreachable(format!(
            "TLS handshake: {text} (trust the gateway's certificate with --ca-file FILE or $ROSGATE_CA_FILE)"
        ))
    } else if text.contains("InvalidContentType") || text.contains("corrupt message") {
        Error::Unreachable(format!(
            "TLS handshake: {text} (does the gateway serve TLS there? if not, use tcp:// or ws://)"
        ))
    } else {
        Error::Unreachable(format!("TLS handshake: {text}"))
    }
}

/// Trusts the certificates of `ca_file` (PEM), and nothing else.
fn client_config(ca_file: Option<&str>) -> Result<Arc<ClientConfig>, Error> {
    let mut roots = RootCertStore::empty();
    if let Some(file) = ca_file {
        let pem = crate::files::read("--ca-file", file).map_err(Error::Usage)?;
        let certs = CertificateDer::pem_slice_iter(pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| Error::Usage(format!("--ca-file {file}: {e}")))?;
        if certs.is_empty() {
            return Err(Error::Usage(format!(
                "--ca-file {file}: no certificate in it (expected PEM, -----BEGIN CERTIFICATE-----)"
            )));
        }
        for c in certs {
            roots
                .add(c)
                .map_err(|e| Error::Usage(format!("--ca-file {file}: {e}")))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Unreachable(format!("TLS set-up: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.read(buf),
            // A gateway that closes without close_notify has closed all the
            // same; what it sent is framed, so nothing is silently cut.
            Stream::Tls(t) => match t.read(buf) {
                Err(e) if e.kind() == ErrorKind::UnexpectedEof => Ok(0),
                other => other,
            },
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.write(buf),
            Stream::Tls(t) => t.write(buf),
        }
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match self {
            Stream::Plain(s) => s.write_all(buf),
            // rustls takes everything, then it goes out in full.
            Stream::Tls(t) => {
                t.write_all(buf)?;
                t.flush()
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Plain(s) => s.flush(),
            Stream::Tls(t) => t.flush(),
        }
    }
}
