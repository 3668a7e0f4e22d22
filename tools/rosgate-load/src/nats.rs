//! [`Nats`]: the NATS client text protocol, for comparing rosgate with
//! `nats-server` on the same scenarios.
//!
//! - `hello` sends `CONNECT {"verbose":false,"pedantic":false}`: no `+OK`
//!   per request, so the wire carries what a production client sends;
//! - subscribe / advertise are a `SUB` followed by a `PING`: the server
//!   answers `PING`s in order after processing everything before them, so
//!   the `PONG` is the acknowledgement (the queue of tokens in `pings`);
//! - topics map to subjects verbatim (`/bench/0` is one subject token);
//! - calls are request/reply: the provider subscribes to the service
//!   subject, a caller subscribes once to `_INBOX.<pid>.<n>.*` (before its
//!   first request, on the same connection, so the server has it before
//!   any reply exists) and publishes with the reply subject
//!   `_INBOX.<pid>.<n>.<call id>`; the provider echoes to that subject;
//! - the server's keep-alive `PING` is answered with `PONG` through
//!   [`Codec::take_output`], as every NATS client must.
//!
//! Deliveries are told apart by subscription id, so a reply can never be
//! mistaken for a topic message or a request.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

use memchr::memchr;

use crate::payload::push_u64;
use crate::transport::{Codec, DecodeError, Event};

/// The topic subscription.
const SID_TOPIC: &[u8] = b"1";
/// A caller's reply inbox.
const SID_INBOX: &[u8] = b"2";
/// A provider's service subscription.
const SID_SERVICE: &[u8] = b"3";
/// Longest control line accepted (the server's `INFO` is the longest).
const MAX_CONTROL: usize = 64 << 10;

/// Inboxes handed out in this process.
static INBOXES: AtomicU64 = AtomicU64::new(0);

#[derive(Debug)]
pub struct Nats {
    max_frame: usize,
    /// Tokens of our `PING`s, oldest first; each `PONG` answers one.
    pings: VecDeque<u64>,
    /// Server `PING`s not yet answered.
    pongs_owed: usize,
    /// Caller: `_INBOX.<pid>.<n>.`, once subscribed.
    inbox: Option<Vec<u8>>,
}

impl Nats {
    fn ping(&mut self, out: &mut Vec<u8>, token: u64) {
        out.extend_from_slice(b"PING\r\n");
        self.pings.push_back(token);
    }
}

impl Codec for Nats {
    const NAME: &'static str = "nats";

    fn new(max_frame: usize) -> Self {
        Nats {
            max_frame,
            pings: VecDeque::new(),
            pongs_owed: 0,
            inbox: None,
        }
    }

    fn hello(&mut self, out: &mut Vec<u8>) {
        out.extend_from_slice(
            b"CONNECT {\"verbose\":false,\"pedantic\":false,\"name\":\"rosgate-load\",\
              \"lang\":\"rust\",\"version\":\"0\"}\r\n",
        );
    }

    fn subscribe(&mut self, out: &mut Vec<u8>, topic: &str, token: u64) {
        sub(out, topic.as_bytes(), SID_TOPIC);
        self.ping(out, token);
    }

    fn publish(&mut self, out: &mut Vec<u8>, topic: &str, payload: &[u8]) {
        pub_frame(out, topic.as_bytes(), None, payload);
    }

    fn advertise_service(&mut self, out: &mut Vec<u8>, service: &str, token: u64) -> bool {
        sub(out, service.as_bytes(), SID_SERVICE);
        self.ping(out, token);
        true
    }

    fn call(&mut self, out: &mut Vec<u8>, service: &str, id: u64, args: &[u8]) {
        let inbox = self.inbox.get_or_insert_with(|| {
            let mut b = b"_INBOX.".to_vec();
            push_u64(&mut b, u64::from(std::process::id()));
            b.push(b'.');
            push_u64(&mut b, INBOXES.fetch_add(1, Ordering::Relaxed));
            b.push(b'.');
            let mut wild = b.clone();
            wild.push(b'*');
            sub(out, &wild, SID_INBOX);
            b
        });
        let mut reply = Vec::with_capacity(inbox.len() + 20);
        reply.extend_from_slice(inbox);
        push_u64(&mut reply, id);
        pub_frame(out, service.as_bytes(), Some(&reply), args);
    }

    fn respond(&mut self, out: &mut Vec<u8>, _service: &str, id: &[u8], values: &[u8]) {
        pub_frame(out, id, None, values);
    }

    fn barrier(&mut self, out: &mut Vec<u8>, token: u64) -> bool {
        self.ping(out, token);
        true
    }

    fn take_output(&mut self, out: &mut Vec<u8>) -> bool {
        if self.pongs_owed == 0 {
            return false;
        }
        for _ in 0..self.pongs_owed {
            out.extend_from_slice(b"PONG\r\n");
        }
        self.pongs_owed = 0;
        true
    }

    fn decode<'a>(&mut self, buf: &'a [u8]) -> Result<Option<(Event<'a>, usize)>, DecodeError> {
        let Some(nl) = memchr(b'\n', &buf[..buf.len().min(MAX_CONTROL + 1)]) else {
            if buf.len() > MAX_CONTROL {
                return Err(DecodeError(format!(
                    "control line longer than {MAX_CONTROL} bytes"
                )));
            }
            return Ok(None);
        };
        let line = strip_cr(&buf[..nl]);
        let (op, rest) = match memchr(b' ', line) {
            Some(i) => (&line[..i], &line[i + 1..]),
            None => (line, &b""[..]),
        };
        let ev = if op.eq_ignore_ascii_case(b"MSG") {
            return self.msg(buf, rest, nl + 1);
        } else if op.eq_ignore_ascii_case(b"PING") {
            self.pongs_owed += 1;
            Event::Notice {
                error: false,
                text: line,
            }
        } else if op.eq_ignore_ascii_case(b"PONG") {
            match self.pings.pop_front() {
                Some(token) => Event::Ack { token },
                None => Event::Notice {
                    error: true,
                    text: b"PONG without a PING",
                },
            }
        } else if op.eq_ignore_ascii_case(b"-ERR") {
            Event::Notice {
                error: true,
                text: line,
            }
        } else if op.eq_ignore_ascii_case(b"+OK") || op.eq_ignore_ascii_case(b"INFO") {
            Event::Notice {
                error: false,
                text: line,
            }
        } else {
            return Err(DecodeError(format!(
                "unknown NATS operation: {}",
                String::from_utf8_lossy(&line[..line.len().min(200)])
            )));
        };
        Ok(Some((ev, nl + 1)))
    }
}

impl Nats {
    /// `MSG <subject> <sid> [reply-to] <#bytes>\r\n<payload>\r\n`; `args`
    /// is the control line after `MSG `, `head` its length with the newline.
    fn msg<'a>(
        &mut self,
        buf: &'a [u8],
        args: &'a [u8],
        head: usize,
    ) -> Result<Option<(Event<'a>, usize)>, DecodeError> {
        let bad = || {
            DecodeError(format!(
                "bad MSG line: {}",
                String::from_utf8_lossy(&args[..args.len().min(200)])
            ))
        };
        let mut it = args
            .split(|&b| b == b' ' || b == b'\t')
            .filter(|a| !a.is_empty());
        let (Some(subject), Some(sid), Some(a3)) = (it.next(), it.next(), it.next()) else {
            return Err(bad());
        };
        let (reply, len) = match it.next() {
            Some(a4) => (Some(a3), a4),
            None => (None, a3),
        };
        if it.next().is_some() {
            return Err(bad());
        }
        let len = parse_u64(len).ok_or_else(bad)? as usize;
        if len > self.max_frame {
            return Err(DecodeError(format!(
                "MSG of {len} bytes exceeds {}",
                self.max_frame
            )));
        }
        let end = head + len;
        if buf.len() < end + 2 {
            return Ok(None);
        }
        if &buf[end..end + 2] != b"\r\n" {
            return Err(DecodeError("MSG payload not followed by CRLF".into()));
        }
        let payload = &buf[head..end];
        let ev = match sid {
            SID_TOPIC => Event::Delivery {
                topic: subject,
                payload,
            },
            SID_SERVICE => match reply {
                Some(id) => Event::Call { id, args: payload },
                None => Event::Notice {
                    error: true,
                    text: b"request without a reply subject",
                },
            },
            SID_INBOX => match self
                .inbox
                .as_deref()
                .and_then(|p| subject.strip_prefix(p))
                .and_then(parse_u64)
            {
                Some(id) => Event::Reply {
                    id,
                    values: payload,
                    ok: true,
                },
                None => Event::Notice {
                    error: true,
                    text: subject,
                },
            },
            _ => Event::Notice {
                error: true,
                text: b"MSG for an unknown subscription",
            },
        };
        Ok(Some((ev, end + 2)))
    }
}

/// `SUB <subject> <sid>`.
fn sub(out: &mut Vec<u8>, subject: &[u8], sid: &[u8]) {
    out.extend_from_slice(b"SUB ");
    out.extend_from_slice(subject);
    out.push(b' ');
    out.extend_from_slice(sid);
    out.extend_from_slice(b"\r\n");
}

/// `PUB <subject> [reply-to] <#bytes>\r\n<payload>\r\n`.
fn pub_frame(out: &mut Vec<u8>, subject: &[u8], reply: Option<&[u8]>, payload: &[u8]) {
    out.extend_from_slice(b"PUB ");
    out.extend_from_slice(subject);
    out.push(b' ');
    if let Some(r) = reply {
        out.extend_from_slice(r);
        out.push(b' ');
    }
    push_u64(out, payload.len() as u64);
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(payload);
    out.extend_from_slice(b"\r\n");
}

fn parse_u64(b: &[u8]) -> Option<u64> {
    if b.is_empty() || b.len() > 20 || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(b).ok()?.parse().ok()
}

fn strip_cr(b: &[u8]) -> &[u8] {
    b.strip_suffix(b"\r").unwrap_or(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscribe_is_acknowledged_by_pong() {
        let mut c = Nats::new(1 << 20);
        let mut out = Vec::new();
        c.hello(&mut out);
        c.subscribe(&mut out, "/bench/0", 7);
        let text = String::from_utf8(out).expect("ascii");
        assert!(text.starts_with("CONNECT {\"verbose\":false,\"pedantic\":false"));
        assert!(text.ends_with("SUB /bench/0 1\r\nPING\r\n"));
        let info = b"INFO {\"server_id\":\"x\"}\r\n";
        assert!(matches!(
            c.decode(info),
            Ok(Some((Event::Notice { error: false, .. }, 24)))
        ));
        assert_eq!(
            c.decode(b"PONG\r\n").expect("ok"),
            Some((Event::Ack { token: 7 }, 6))
        );
        assert!(matches!(
            c.decode(b"PONG\r\n"),
            Ok(Some((Event::Notice { error: true, .. }, 6)))
        ));
    }

    #[test]
    fn deliveries_are_framed_by_length() {
        let mut c = Nats::new(64);
        let frame = b"MSG /bench/0 1 5\r\nab\r\nc\r\nPING\r\n";
        assert_eq!(c.decode(&frame[..20]).expect("ok"), None);
        assert_eq!(c.decode(&frame[..23]).expect("ok"), None);
        assert_eq!(
            c.decode(frame).expect("ok"),
            Some((
                Event::Delivery {
                    topic: b"/bench/0",
                    payload: b"ab\r\nc"
                },
                25
            ))
        );
        let mut out = Vec::new();
        assert!(!c.take_output(&mut out));
        assert!(matches!(c.decode(&frame[25..]), Ok(Some((_, 6)))));
        assert!(c.take_output(&mut out));
        assert_eq!(out, b"PONG\r\n");
        assert!(c.decode(b"MSG a 1 65\r\n").is_err());
        assert!(c.decode(b"MSG a 1 3\r\nabcX\r\n").is_err());
        assert!(c.decode(b"WHAT\r\n").is_err());
    }

    #[test]
    fn request_reply_round_trip() {
        let mut caller = Nats::new(1 << 10);
        let mut provider = Nats::new(1 << 10);
        let mut out = Vec::new();
        assert!(provider.advertise_service(&mut out, "/bench/echo", 3));
        assert_eq!(out, b"SUB /bench/echo 3\r\nPING\r\n");
        out.clear();
        caller.call(&mut out, "/bench/echo", 42, b"{\"a\":1}");
        let text = String::from_utf8(out.clone()).expect("ascii");
        let mut lines = text.split("\r\n");
        let sub_line = lines.next().expect("sub");
        let pub_line = lines.next().expect("pub");
        assert!(sub_line.starts_with("SUB _INBOX.") && sub_line.ends_with(".* 2"));
        let reply = pub_line.split(' ').nth(2).expect("reply subject");
        assert!(reply.ends_with(".42"));
        // The server turns the PUB into a MSG for the provider.
        let req = format!("MSG /bench/echo 3 {reply} 7\r\n{{\"a\":1}}\r\n");
        let (ev, _) = provider.decode(req.as_bytes()).expect("ok").expect("full");
        let Event::Call { id, args } = ev else {
            panic!("not a call: {ev:?}")
        };
        let mut resp = Vec::new();
        provider.respond(&mut resp, "/bench/echo", id, args);
        assert_eq!(resp, format!("PUB {reply} 7\r\n{{\"a\":1}}\r\n").as_bytes());
        let back = format!("MSG {reply} 2 7\r\n{{\"a\":1}}\r\n");
        let (ev, _) = caller.decode(back.as_bytes()).expect("ok").expect("full");
        assert_eq!(
            ev,
            Event::Reply {
                id: 42,
                values: b"{\"a\":1}",
                ok: true
            }
        );
        // The inbox is subscribed once.
        out.clear();
        caller.call(&mut out, "/bench/echo", 43, b"{}");
        assert!(out.starts_with(b"PUB /bench/echo _INBOX."));
    }
}
