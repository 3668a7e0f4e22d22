//! The CLI's connection to a gateway: TCP (NDJSON lines) or WebSocket
//! (one JSON object per text frame), blocking, one request/reply at a time
//! or pipelined by id.
//!
//! - Every read has a deadline: the socket's read timeout is at most
//!   [`POLL`], so a wait also notices Ctrl-C (the stop flag) within that.
//!   Waiting for an answer ends after `--timeout` (plus [`GRACE`] for the
//!   gateway's own timeout of a call to fire first).
//! - Incoming frames are split by the wire crate ([`LineReader`] for TCP)
//!   and their top-level members read with its scanner ([`scan`]); the
//!   requests are written with its encoder ([`encode`]).
//! - Frames nobody waited for yet are queued in order; a reply is matched by
//!   its `id` (ours are `"rosgate-cli-<n>"`). Info statuses are dropped;
//!   warnings go to stderr.
//! - An error status that carries none of our ids is still a refusal of
//!   something this connection sent (a `publish` carries no id, and a line
//!   refused at the door may have lost it): the next wait fails with it, so
//!   the command exits 1 (`docs/cli.md`, "Exit statuses"), unless the
//!   command lives with refusals ([`Client::refusals_fatal`]).

use std::borrow::Cow;
use std::collections::VecDeque;
use std::fmt;
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rosgate_wire::decode::json_str;
use rosgate_wire::encode;
use rosgate_wire::line::{Frame as Line, LineReader};
use rosgate_wire::scan;
use rosgate_wire::ws::client::close_payload;
use rosgate_wire::Raw;

use super::args::Common;
use super::stream::Stream;
use super::url::Url;
use super::ws::{self, WsIn, WsReader};
use super::{Error, POLL};

/// Extra wait for the answer to a call beyond the `timeout` the call
/// carries, so the gateway's own timeout (and its reason) comes first.
pub const GRACE: Duration = Duration::from_secs(2);

/// Largest frame accepted from the gateway (its own line limit is 16 MiB
/// by default; a publish frame adds the topic name).
const MAX_FRAME: usize = 256 * 1024 * 1024;

/// Prefix of every request id the CLI sends.
const ID_PREFIX: &str = "rosgate-cli-";

/// `s` for a URL query value: unreserved characters as they are, the rest
/// as `%XX`.
fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// One JSON object from the gateway with its top-level members located.
#[derive(Debug)]
pub struct Frame {
    text: String,
    /// (key, value) spans in `text`, in document order.
    members: Vec<(Range<usize>, Range<usize>)>,
    /// A binary message kept as it came ([`Client::keep_binary`]); `text`
    /// is then `{"op":"publish"}`.
    pub binary: Option<Vec<u8>>,
}

impl Frame {
    /// `None` when `bytes` is not a JSON object (the gateway sends none).
    pub fn parse(bytes: &[u8]) -> Option<Frame> {
        let text = std::str::from_utf8(bytes).ok()?.to_string();
        let base = text.as_ptr() as usize;
        let span = |s: &str| {
            let start = s.as_ptr() as usize - base;
            start..start + s.len()
        };
        let mut members = Vec::new();
        scan::scan_object(&text, usize::MAX, |m| {
            members.push((span(m.key), span(m.value)));
        })
        .ok()?;
        Some(Frame {
            text,
            members,
            binary: None,
        })
    }

    /// A binary message kept as its bytes (op `publish`).
    fn binary(bytes: Vec<u8>) -> Option<Frame> {
        let mut f = Frame::parse(br#"{"op":"publish"}"#)?;
        f.binary = Some(bytes);
        Some(f)
    }

    /// The raw JSON of member `key` (the last one if repeated).
    pub fn raw(&self, key: &str) -> Option<&str> {
        self.members
            .iter()
            .rev()
            .find(|(k, _)| &self.text[k.clone()] == key)
            .map(|(_, v)| &self.text[v.clone()])
    }

    /// Member `key` when it is a string.
    pub fn str(&self, key: &str) -> Option<Cow<'_, str>> {
        json_str(Raw::from_valid_json(self.raw(key)?))
    }

    /// The `op`, or `""`.
    pub fn op(&self) -> Cow<'_, str> {
        self.str("op").unwrap_or_default()
    }

    /// Whether the frame's `id` is `id` (raw JSON, as we sent it).
    pub fn has_id(&self, id: &str) -> bool {
        self.raw("id") == Some(id)
    }
}

/// A request under construction: `{"op":..,` then members, as JSON text.
pub struct Req(Vec<u8>);

impl Req {
    pub fn new(op: &str) -> Req {
        let mut out = b"{\"op\":".to_vec();
        encode::json_string(&mut out, op);
        Req(out)
    }

    /// A string member.
    pub fn str(mut self, key: &str, value: &str) -> Req {
        self.key(key);
        encode::json_string(&mut self.0, value);
        self
    }

    /// A member whose value is JSON text (validated by the caller).
    pub fn raw(mut self, key: &str, json: &str) -> Req {
        self.key(key);
        self.0.extend_from_slice(json.as_bytes());
        self
    }

    fn key(&mut self, key: &str) {
        self.0.push(b',');
        encode::json_string(&mut self.0, key);
        self.0.push(b':');
    }

    /// The finished object, without a line terminator.
    pub fn finish(mut self) -> Vec<u8> {
        self.0.push(b'}');
        self.0
    }
}

/// A JSON string literal.
pub fn json_quote(s: &str) -> String {
    let mut out = Vec::with_capacity(s.len() + 2);
    encode::json_string(&mut out, s);
    String::from_utf8(out).unwrap_or_default()
}

/// What a wait produced.
pub enum Event {
    Frame(Frame),
    /// The deadline passed.
    Timeout,
    /// Ctrl-C or SIGTERM.
    Stop,
}

enum Conn {
    Tcp(LineReader),
    Ws(WsReader),
}

/// A connection to the gateway; see the module docs.
pub struct Client {
    stream: Stream,
    conn: Conn,
    queue: VecDeque<Frame>,
    seq: u64,
    /// How long to wait for an answer.
    pub timeout: Duration,
    stop: Arc<AtomicBool>,
    buf: Vec<u8>,
    /// The first error status that answered none of our ids and was not
    /// reported yet.
    refused: Option<String>,
    /// Whether such a refusal fails the next wait (true for every command
    /// but `demo`, which reports it and keeps serving).
    pub refusals_fatal: bool,
    /// Binary messages queued as their bytes ([`Frame::binary`]) rather
    /// than read as JSON: `bag record` parses `cbor-raw` frames itself.
    pub keep_binary: bool,
}

impl Client {
    /// Connects (and, with `--domain` over TCP, joins the domain).
    pub fn connect(common: &Common, stop: Arc<AtomicBool>) -> Result<Client, Error> {
        let timeout = common.timeout;
        let deadline = Instant::now() + timeout;
        let (authority, ws_target) = match &common.url {
            Url::Tcp { authority, .. } => (authority, None),
            Url::Ws {
                authority, target, ..
            } => {
                let mut target = target.clone();
                if let Some(d) = common.domain {
                    target.push(if target.contains('?') { '&' } else { '?' });
                    target.push_str(&format!("domain={d}"));
                }
                if let Some(t) = &common.token {
                    target.push(if target.contains('?') { '&' } else { '?' });
                    target.push_str("token=");
                    target.push_str(&percent_encode(t));
                }
                (authority, Some(target))
            }
        };
        let unreachable =
            |e: &dyn fmt::Display| Error::Unreachable(format!("cannot reach {}: {e}", common.url));
        let addrs: Vec<_> = authority
            .to_socket_addrs()
            .map_err(|e| unreachable(&e))?
            .collect();
        let mut last = None;
        let mut stream = None;
        for a in addrs {
            match TcpStream::connect_timeout(&a, timeout) {
                Ok(s) => {
                    stream = Some(s);
                    break;
                }
                Err(e) => last = Some(e),
            }
        }
        let Some(stream) = stream else {
            return Err(match last {
                Some(e) => unreachable(&e),
                None => unreachable(&"no address"),
            });
        };
        let _ = stream.set_nodelay(true);
        stream
            .set_write_timeout(Some(timeout))
            .map_err(|e| unreachable(&e))?;
        let mut stream = if common.url.is_tls() {
            Stream::tls(
                stream,
                common.url.host(),
                common.ca_file.as_deref(),
                deadline,
            )
            .map_err(|e| match e {
                Error::Unreachable(m) => unreachable(&m),
                other => other,
            })?
        } else {
            Stream::Plain(stream)
        };
        let (conn, leftover) = match ws_target {
            None => (Conn::Tcp(LineReader::new()), Vec::new()),
            Some(target) => {
                let rest = ws::handshake(&mut stream, authority, &target, deadline, &stop)?;
                (Conn::Ws(WsReader::new()), rest)
            }
        };
        let mut client = Client {
            stream,
            conn,
            queue: VecDeque::new(),
            seq: 0,
            timeout,
            stop,
            buf: vec![0; 64 * 1024],
            refused: None,
            refusals_fatal: true,
            keep_binary: false,
        };
        if !leftover.is_empty() {
            client.ingest(&leftover)?;
        }
        if let (Some(token), Url::Tcp { .. }) = (&common.token, &common.url) {
            let id = client.next_id();
            let req = Req::new("auth").str("token", token).raw("id", &id).finish();
            client.send(&req)?;
            // A refusal is an error status with our id, then the gateway
            // closes: the reason is read before the close is reported.
            match client.check(&[&id]) {
                Err(Error::Unreachable(why)) => {
                    return Err(match client.take_error(&id) {
                        Some(msg) => Error::Failed(msg),
                        None => Error::Unreachable(why),
                    })
                }
                other => other?,
            }
        }
        if let (Some(domain), Url::Tcp { .. }) = (common.domain, &common.url) {
            let id = client.next_id();
            let req = Req::new("declare_node")
                .str("name", &format!("_rosgate_cli_{}", std::process::id()))
                .raw("domain", &domain.to_string())
                .raw("id", &id)
                .finish();
            client.send(&req)?;
            client.check(&[&id])?;
        }
        Ok(client)
    }

    /// A fresh request id, as JSON text (`"rosgate-cli-7"`).
    pub fn next_id(&mut self) -> String {
        self.seq += 1;
        format!("\"{ID_PREFIX}{}\"", self.seq)
    }

    /// Whether Ctrl-C (or SIGTERM) arrived.
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Forgets a Ctrl-C that was handled (a cancel sent): the next one
    /// stops the wait again, a second one while handling exits at once.
    pub fn clear_stop(&self) {
        self.stop.store(false, Ordering::Relaxed);
    }

    /// Sends one request (a JSON object without terminator).
    pub fn send(&mut self, json: &[u8]) -> Result<(), Error> {
        let res = match &self.conn {
            Conn::Tcp(_) => {
                let mut line = Vec::with_capacity(json.len() + 1);
                line.extend_from_slice(json);
                line.push(b'\n');
                self.stream.write_all(&line)
            }
            Conn::Ws(_) => self.stream.write_all(&ws::client_frame(ws::OP_TEXT, json)),
        };
        res.map_err(|e| match e.kind() {
            ErrorKind::WouldBlock | ErrorKind::TimedOut => {
                Error::Unreachable("the gateway stopped reading from this connection".into())
            }
            _ => Error::Unreachable(format!("sending to the gateway: {e}")),
        })
    }

    /// A refusal that arrived since the last wait, as the error that ends
    /// the command.
    fn refusal(&mut self) -> Result<(), Error> {
        match self.refused.take() {
            Some(msg) => Err(Error::Failed(format!(
                "the gateway refused a request: {msg}"
            ))),
            None => Ok(()),
        }
    }

    /// The next frame, waiting until `until` (forever if `None`).
    pub fn next(&mut self, until: Option<Instant>) -> Result<Event, Error> {
        loop {
            self.refusal()?;
            if let Some(f) = self.queue.pop_front() {
                return Ok(Event::Frame(f));
            }
            if self.stopped() {
                return Ok(Event::Stop);
            }
            if !self.read_some(until)? {
                return Ok(Event::Timeout);
            }
        }
    }

    /// The first frame (queued or new) for which `pred` holds; others stay
    /// queued. Fails after `until`, or on Ctrl-C.
    pub fn wait_for(
        &mut self,
        until: Instant,
        mut pred: impl FnMut(&Frame) -> bool,
    ) -> Result<Frame, Error> {
        let mut checked = 0;
        loop {
            self.refusal()?;
            if let Some(i) = self.queue.iter().skip(checked).position(&mut pred) {
                if let Some(frame) = self.queue.remove(checked + i) {
                    return Ok(frame);
                }
            }
            checked = self.queue.len();
            if self.stopped() {
                return Err(Error::Interrupted);
            }
            if !self.read_some(Some(until))? {
                return Err(Error::Unreachable(format!(
                    "no answer from the gateway within {:.1} s",
                    self.timeout.as_secs_f64()
                )));
            }
        }
    }

    /// Reads once (at most [`POLL`], and not past `until`); false when
    /// `until` passed without data.
    fn read_some(&mut self, until: Option<Instant>) -> Result<bool, Error> {
        let wait = match until {
            None => POLL,
            Some(u) => {
                let left = u.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Ok(false);
                }
                left.min(POLL)
            }
        };
        self.stream
            .set_read_timeout(Some(wait))
            .map_err(|e| Error::Unreachable(format!("socket: {e}")))?;
        let mut buf = std::mem::take(&mut self.buf);
        let res = self.stream.read(&mut buf);
        let out = match res {
            Ok(0) => Err(Error::Unreachable(
                "the gateway closed the connection".into(),
            )),
            Ok(n) => self.ingest(&buf[..n]).map(|()| true),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                Ok(until.is_none_or(|u| Instant::now() < u))
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => Ok(true),
            Err(e) => Err(Error::Unreachable(format!("reading from the gateway: {e}"))),
        };
        self.buf = buf;
        out
    }

    /// Splits bytes into frames and queues them.
    fn ingest(&mut self, bytes: &[u8]) -> Result<(), Error> {
        // Text frames, and binary ones kept as bytes, in arrival order.
        let mut frames: Vec<(Vec<u8>, bool)> = Vec::new();
        let keep_binary = self.keep_binary;
        let mut reply = Vec::new();
        let mut closed = None;
        match &mut self.conn {
            Conn::Tcp(lines) => lines.feed(bytes, MAX_FRAME, |f| {
                if let Line::Line(l) = f {
                    frames.push((l.to_vec(), false));
                }
            }),
            Conn::Ws(reader) => reader.feed(bytes, MAX_FRAME, |e| match e {
                WsIn::Text(t) => frames.push((t.to_vec(), false)),
                // The `cbor` and `cbor-raw` compressions: read as JSON.
                WsIn::Binary(t) if keep_binary => frames.push((t.to_vec(), true)),
                WsIn::Binary(t) => frames.push((
                    super::cbor::to_json(t).unwrap_or_default().into_bytes(),
                    false,
                )),
                WsIn::Ping(p) => reply.extend_from_slice(&ws::client_frame(ws::OP_PONG, p)),
                WsIn::Pong(_) => {}
                WsIn::Close(code) => {
                    reply.extend_from_slice(&ws::client_frame(
                        ws::OP_CLOSE,
                        &close_payload(code, ""),
                    ));
                    closed = Some(match code {
                        Some(c) => format!("the gateway closed the WebSocket (code {c})"),
                        None => "the gateway closed the WebSocket".into(),
                    });
                }
                WsIn::Protocol(why) => {
                    closed = Some(format!("WebSocket protocol error from the gateway: {why}"));
                }
                WsIn::TooLong => {
                    closed =
                        Some("WebSocket protocol error from the gateway: message too long".into());
                }
            }),
        }
        if !reply.is_empty() {
            let _ = self.stream.write_all(&reply);
        }
        for (f, binary) in frames {
            let frame = if binary {
                Frame::binary(f)
            } else {
                Frame::parse(&f)
            };
            if let Some(frame) = frame {
                self.admit(frame);
            }
        }
        match closed {
            Some(why) => Err(Error::Unreachable(why)),
            None => Ok(()),
        }
    }

    /// Queues a frame. Of statuses, only errors answering one of our ids
    /// are queued; other errors are refusals (see the module docs),
    /// warnings go to stderr, info statuses are dropped.
    fn admit(&mut self, frame: Frame) {
        if frame.op() != "status" {
            self.queue.push_back(frame);
            return;
        }
        let ours = frame
            .raw("id")
            .is_some_and(|id| id.starts_with(&format!("\"{ID_PREFIX}")));
        let level = frame.str("level").unwrap_or_default().into_owned();
        match level.as_str() {
            "info" => {}
            "error" if ours => self.queue.push_back(frame),
            "error" if self.refusals_fatal => {
                if self.refused.is_none() {
                    self.refused = Some(frame.str("msg").unwrap_or_default().into_owned());
                }
            }
            _ => {
                let msg = frame.str("msg").unwrap_or_default();
                eprintln!("rosgate: gateway {level}: {msg}");
            }
        }
    }

    /// The error status for request `id`, if one is queued (it is removed).
    pub fn take_error(&mut self, id: &str) -> Option<String> {
        let i = self
            .queue
            .iter()
            .position(|f| f.op() == "status" && f.has_id(id))?;
        let f = self.queue.remove(i)?;
        Some(f.str("msg").unwrap_or_default().into_owned())
    }

    /// Waits until the gateway handled everything sent so far (a built-in
    /// call answers after every earlier request was processed), then fails
    /// with the error status of any of `ids`.
    pub fn check(&mut self, ids: &[&str]) -> Result<(), Error> {
        self.call("/rosapi/get_time", "{}")?;
        for id in ids {
            if let Some(msg) = self.take_error(id) {
                return Err(Error::Failed(msg));
            }
        }
        Ok(())
    }

    /// Sends a `call_service` and returns its id.
    pub fn send_call(
        &mut self,
        service: &str,
        args: &str,
        extra: &[(&str, &str)],
    ) -> Result<String, Error> {
        let id = self.next_id();
        let mut req = Req::new("call_service")
            .str("service", service)
            .raw("id", &id)
            .raw("args", args)
            .raw("timeout", &format!("{}", self.timeout.as_secs_f64()));
        for (k, v) in extra {
            req = req.raw(k, v);
        }
        self.send(&req.finish())?;
        Ok(id)
    }

    /// Waits for the answer to call `id`: `Ok(values)` (raw JSON) or
    /// `Err(reason)` for `result: false` / an error status.
    pub fn reply(&mut self, id: &str) -> Result<Result<String, String>, Error> {
        let until = Instant::now() + self.timeout + GRACE;
        let f = self.wait_for(until, |f| {
            f.has_id(id) && matches!(f.op().as_ref(), "service_response" | "status")
        })?;
        if f.op() == "status" {
            return Ok(Err(f.str("msg").unwrap_or_default().into_owned()));
        }
        let values = f.raw("values").unwrap_or("null");
        if f.raw("result") == Some("true") {
            Ok(Ok(values.to_string()))
        } else {
            Ok(Err(reason(values)))
        }
    }

    /// Calls a service and waits for its answer; `result: false` is
    /// [`Error::Failed`] with the reason.
    pub fn call(&mut self, service: &str, args: &str) -> Result<String, Error> {
        let id = self.send_call(service, args, &[])?;
        self.reply(&id)?.map_err(Error::Failed)
    }

    /// Several calls at once (pipelined), answers in the same order.
    pub fn calls(
        &mut self,
        reqs: &[(String, String)],
    ) -> Result<Vec<Result<String, String>>, Error> {
        let mut out = Vec::with_capacity(reqs.len());
        // A window well below the gateway's calls-in-flight limit.
        for chunk in reqs.chunks(256) {
            let mut ids = Vec::with_capacity(chunk.len());
            for (service, args) in chunk {
                ids.push(self.send_call(service, args, &[])?);
            }
            for id in ids {
                out.push(self.reply(&id)?);
            }
        }
        Ok(out)
    }

    /// Closes politely: our side first, then what the gateway still sends
    /// is read and dropped for a moment, so nothing we sent is lost to a
    /// reset.
    pub fn close(mut self) {
        match self.conn {
            Conn::Tcp(_) => self.stream.shutdown_write(),
            Conn::Ws(_) => {
                let _ = self.stream.write_all(&ws::client_frame(
                    ws::OP_CLOSE,
                    &close_payload(Some(1000), ""),
                ));
            }
        }
        let until = Instant::now() + Duration::from_millis(500);
        let _ = self
            .stream
            .set_read_timeout(Some(Duration::from_millis(50)));
        let mut buf = [0u8; 16 * 1024];
        while Instant::now() < until {
            match self.stream.read(&mut buf) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(_) => break,
            }
        }
    }
}

/// The reason of a failed call: the `values` string, or its JSON.
pub fn reason(values: &str) -> String {
    json_str(Raw::from_valid_json(values))
        .map(Cow::into_owned)
        .unwrap_or_else(|| values.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let u = |s: &str| s.parse::<Url>();
        assert_eq!(
            u("tcp://127.0.0.1:9095").unwrap(),
            Url::Tcp {
                authority: "127.0.0.1:9095".into(),
                tls: false
            }
        );
        assert_eq!(
            u("localhost").unwrap(),
            Url::Tcp {
                authority: "localhost:9095".into(),
                tls: false
            }
        );
        assert_eq!(
            u("ws://h:9090?domain=3").unwrap(),
            Url::Ws {
                authority: "h:9090".into(),
                target: "/?domain=3".into(),
                tls: false
            }
        );
        assert_eq!(
            u("ws://[::1]/x").unwrap(),
            Url::Ws {
                authority: "[::1]:80".into(),
                target: "/x".into(),
                tls: false
            }
        );
        assert_eq!(
            u("wss://h").unwrap(),
            Url::Ws {
                authority: "h:443".into(),
                target: "/".into(),
                tls: true
            }
        );
        assert_eq!(
            u("tls://[::1]").unwrap(),
            Url::Tcp {
                authority: "[::1]:9095".into(),
                tls: true
            }
        );
        assert_eq!(u("tls://[::1]:9").unwrap().host(), "::1");
        assert_eq!(u("wss://robot.local:9090/x").unwrap().host(), "robot.local");
        assert_eq!(u("tls://h:7").unwrap().to_string(), "tls://h:7");
        assert_eq!(u("wss://h:7/?a=b").unwrap().to_string(), "wss://h:7/?a=b");
        assert!(u("http://h").is_err());
        assert!(u("tcp://h:1/x").is_err());
        assert_eq!(u("ws://h:1/a?b=c").unwrap().to_string(), "ws://h:1/a?b=c");
    }

    #[test]
    fn frames_and_requests() {
        let f = Frame::parse(br#"{"op":"status","level":"error","msg":"a\"b","id":"rosgate-cli-1","id":"rosgate-cli-2"}"#)
            .unwrap();
        assert_eq!(f.op(), "status");
        assert_eq!(f.str("msg").unwrap(), "a\"b");
        assert!(f.has_id("\"rosgate-cli-2\""));
        assert!(Frame::parse(b"[1]").is_none());
        let r = Req::new("subscribe")
            .str("topic", "/a\"b")
            .raw("id", "1")
            .finish();
        assert_eq!(r, br#"{"op":"subscribe","topic":"/a\"b","id":1}"#);
        assert_eq!(reason("\"no provider\""), "no provider");
        assert_eq!(reason("{\"x\":1}"), "{\"x\":1}");
    }
}
