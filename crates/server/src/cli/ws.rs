//! The CLI's WebSocket glue (RFC 6455, client side), blocking: the opening
//! handshake read with a deadline, and masking keys drawn at random. The
//! protocol itself (the request, the check of the answer, frames both
//! ways) is [`rosgate_wire::ws::client`].

use std::io::{ErrorKind, Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use rosgate_wire::ws::client::{self, HandshakeError, Response};

pub use rosgate_wire::ws::client::{Event as WsIn, Reader as WsReader};
pub use rosgate_wire::ws::frame::{OP_CLOSE, OP_PONG, OP_TEXT};

use super::stream::Stream;
use super::{Error, POLL};

/// Eight unpredictable bytes, without a random-number crate: std's
/// `RandomState` is seeded from the OS per process and varies per call.
fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.finish()
}

/// A complete client frame, masked with a fresh random key (RFC 6455
/// §5.3: unpredictable to the page a browser runs, so we do it too).
pub fn client_frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    client::frame(opcode, payload, (random_u64() as u32).to_ne_bytes())
}

/// Sends the upgrade request for `target` and reads the answer until
/// `deadline`; returns the bytes read past the response head (the first
/// frames). A refusal (`400` with the gateway's reason, `503`) is
/// [`Error::Failed`]; no answer is [`Error::Unreachable`].
pub fn handshake(
    stream: &mut Stream,
    authority: &str,
    target: &str,
    deadline: Instant,
    stop: &AtomicBool,
) -> Result<Vec<u8>, Error> {
    let mut nonce = [0u8; 16];
    nonce[..8].copy_from_slice(&random_u64().to_ne_bytes());
    nonce[8..].copy_from_slice(&random_u64().to_ne_bytes());
    let key = client::key(nonce);
    let req = client::request(authority, target, &key, &[("User-Agent", "rosgate-cli")]);
    stream
        .write_all(req.as_bytes())
        .map_err(|e| Error::Unreachable(format!("WebSocket upgrade: {e}")))?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let mut eof = false;
    let head = loop {
        if buf.first() == Some(&b'{') {
            return Err(Error::Unreachable(format!(
                "{authority} answers NDJSON, not WebSocket: use tcp://{authority}"
            )));
        }
        match Response::parse(&buf) {
            Ok(Some(head)) => break head,
            Ok(None) => {}
            Err(e) => return Err(Error::Unreachable(format!("WebSocket upgrade: {e}"))),
        }
        if eof {
            return Err(Error::Unreachable(
                "the gateway closed the connection during the WebSocket upgrade".into(),
            ));
        }
        eof = read_until(stream, &mut buf, &mut chunk, deadline, stop)?;
    };
    match head.check_accept(&key) {
        Ok(()) => Ok(buf[head.len..].to_vec()),
        Err(HandshakeError::Refused { status, reason }) => {
            // The body (the gateway's plain-text reason) follows; the
            // gateway closes after it.
            let mut rest = buf[head.len..].to_vec();
            let short = Instant::now() + POLL * 5;
            while !eof
                && Instant::now() < short.min(deadline)
                && rest.len() < client::MAX_RESPONSE_HEAD
            {
                eof = read_until(stream, &mut rest, &mut chunk, short.min(deadline), stop)?;
            }
            let status = format!("HTTP/1.{} {status} {reason}", head.version);
            let body = String::from_utf8_lossy(&rest);
            let body = body.trim();
            Err(Error::Failed(if body.is_empty() {
                format!("WebSocket upgrade refused: {status}")
            } else {
                format!("WebSocket upgrade refused: {status}: {body}")
            }))
        }
        Err(e) => Err(Error::Unreachable(format!("WebSocket upgrade: {e}"))),
    }
}

/// One read into `buf` with a deadline; true at end of stream.
fn read_until(
    stream: &mut Stream,
    buf: &mut Vec<u8>,
    chunk: &mut [u8],
    deadline: Instant,
    stop: &AtomicBool,
) -> Result<bool, Error> {
    if stop.load(Ordering::Relaxed) {
        return Err(Error::Interrupted);
    }
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(Error::Unreachable(
            "no answer to the WebSocket upgrade in time".into(),
        ));
    }
    stream
        .set_read_timeout(Some(left.min(POLL)))
        .map_err(|e| Error::Unreachable(format!("socket: {e}")))?;
    match stream.read(chunk) {
        Ok(0) => Ok(true),
        Ok(n) => {
            buf.extend_from_slice(&chunk[..n]);
            Ok(false)
        }
        Err(e)
            if matches!(
                e.kind(),
                ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
            ) =>
        {
            Ok(false)
        }
        Err(e) => Err(Error::Unreachable(format!("WebSocket upgrade: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_frame_gets_a_fresh_mask() {
        let masks: std::collections::HashSet<Vec<u8>> = (0..8)
            .map(|_| client_frame(OP_TEXT, b"hello")[2..6].to_vec())
            .collect();
        assert!(masks.len() > 1, "one mask for every frame: {masks:?}");
        let f = client_frame(OP_TEXT, b"hello");
        let plain: Vec<u8> = f[6..]
            .iter()
            .enumerate()
            .map(|(i, b)| b ^ f[2 + i % 4])
            .collect();
        assert_eq!((f[0], f[1], &plain[..]), (0x81, 0x85, &b"hello"[..]));
    }
}
