//! [`Redis`]: RESP2 pub/sub, for comparing rosgate with `redis-server` on
//! the topic scenarios.
//!
//! - subscribers send `SUBSCRIBE <topic>`; the `subscribe` confirmation
//!   (`*3 subscribe <topic> :<count>`) is the acknowledgement, matched to
//!   tokens in request order;
//! - deliveries are `*3\r\n$7\r\nmessage\r\n$<n>\r\n<topic>\r\n$<n>\r\n<payload>\r\n`
//!   pushes, framed by the bulk lengths (payloads may hold any byte);
//! - publishers send `PUBLISH <topic> <payload>` and read (and ignore) the
//!   `:<receivers>` answer to each, as every Redis client must;
//! - server counters come from `INFO clients` (`connected_clients`), which
//!   lets the idle scenario pace its connects as it does with rosgate;
//! - Redis pub/sub has no request/reply, so `calls` is refused.

use std::collections::VecDeque;

use memchr::memchr;

use crate::payload::push_u64;
use crate::transport::{Codec, DecodeError, Event, ServerCounters};

/// Longest simple-string, error or integer line accepted.
const MAX_LINE: usize = 64 << 10;

#[derive(Debug)]
pub struct Redis {
    max_frame: usize,
    /// Tokens of our `SUBSCRIBE`s, oldest first.
    subscribes: VecDeque<u64>,
}

impl Codec for Redis {
    const NAME: &'static str = "redis";

    fn new(max_frame: usize) -> Self {
        Redis {
            max_frame,
            subscribes: VecDeque::new(),
        }
    }

    fn subscribe(&mut self, out: &mut Vec<u8>, topic: &str, token: u64) {
        command(out, &[b"SUBSCRIBE", topic.as_bytes()]);
        self.subscribes.push_back(token);
    }

    fn publish(&mut self, out: &mut Vec<u8>, topic: &str, payload: &[u8]) {
        command(out, &[b"PUBLISH", topic.as_bytes(), payload]);
    }

    fn advertise_service(&mut self, _out: &mut Vec<u8>, _service: &str, _token: u64) -> bool {
        false
    }

    fn call(&mut self, _out: &mut Vec<u8>, _service: &str, _id: u64, _args: &[u8]) {}

    fn respond(&mut self, _out: &mut Vec<u8>, _service: &str, _id: &[u8], _values: &[u8]) {}

    fn stats_request(&mut self, out: &mut Vec<u8>) -> bool {
        command(out, &[b"INFO", b"clients"]);
        true
    }

    fn parse_stats(values: &[u8]) -> Option<ServerCounters> {
        let text = std::str::from_utf8(values).ok()?;
        let n = text
            .lines()
            .find_map(|l| l.strip_prefix("connected_clients:"))?
            .trim()
            .parse()
            .ok()?;
        Some(ServerCounters {
            connections_open: n,
            ..ServerCounters::default()
        })
    }

    fn decode<'a>(&mut self, buf: &'a [u8]) -> Result<Option<(Event<'a>, usize)>, DecodeError> {
        let Some(&kind) = buf.first() else {
            return Ok(None);
        };
        match kind {
            b'*' => self.array(buf),
            b'$' => {
                // Only `INFO` is answered with a bare bulk string.
                let Some((values, used)) = self.bulk(buf, 0)? else {
                    return Ok(None);
                };
                Ok(Some((Event::Stats { values }, used)))
            }
            b'+' | b'-' | b':' => {
                let Some((line, used)) = line(buf, 0)? else {
                    return Ok(None);
                };
                let ev = Event::Notice {
                    error: kind == b'-',
                    text: line,
                };
                Ok(Some((ev, used)))
            }
            other => Err(DecodeError(format!(
                "unexpected RESP type byte {:?}",
                char::from(other)
            ))),
        }
    }
}

impl Redis {
    /// `*<n>` of bulk strings and integers: a pushed `message` or a
    /// `subscribe` confirmation.
    fn array<'a>(&mut self, buf: &'a [u8]) -> Result<Option<(Event<'a>, usize)>, DecodeError> {
        let Some((count, mut at)) = line(buf, 0)? else {
            return Ok(None);
        };
        let n = parse_u64(&count[1..])
            .filter(|&n| (1..=8).contains(&n))
            .ok_or_else(|| bad("array length", count))?;
        let mut items: [&[u8]; 8] = [&[]; 8];
        for item in items.iter_mut().take(n as usize) {
            let next = match buf.get(at) {
                None => return Ok(None),
                Some(b'$') => self.bulk(buf, at)?,
                Some(b':') => line(buf, at)?.map(|(l, used)| (&l[1..], used)),
                Some(_) => return Err(bad("array element", &buf[at..buf.len().min(at + 40)])),
            };
            let Some((v, used)) = next else {
                return Ok(None);
            };
            *item = v;
            at = used;
        }
        let ev = match (&items[..n as usize], items[0]) {
            ([_, topic, payload], b"message") => Event::Delivery { topic, payload },
            ([_, _, _], b"subscribe") => match self.subscribes.pop_front() {
                Some(token) => Event::Ack { token },
                None => Event::Notice {
                    error: true,
                    text: b"subscribe confirmation we did not ask for",
                },
            },
            (_, first) => Event::Notice {
                error: false,
                text: first,
            },
        };
        Ok(Some((ev, at)))
    }

    /// `$<n>\r\n<n bytes>\r\n` at `at`; the bytes and the offset after.
    fn bulk<'a>(&self, buf: &'a [u8], at: usize) -> Result<Option<(&'a [u8], usize)>, DecodeError> {
        let Some((head, start)) = line(buf, at)? else {
            return Ok(None);
        };
        let len = parse_u64(&head[1..]).ok_or_else(|| bad("bulk length", head))? as usize;
        if len > self.max_frame {
            return Err(DecodeError(format!(
                "bulk string of {len} bytes exceeds {}",
                self.max_frame
            )));
        }
        let end = start + len;
        if buf.len() < end + 2 {
            return Ok(None);
        }
        if &buf[end..end + 2] != b"\r\n" {
            return Err(DecodeError("bulk string not followed by CRLF".into()));
        }
        Ok(Some((&buf[start..end], end + 2)))
    }
}

/// The line at `at` without its CRLF, and the offset after it.
fn line(buf: &[u8], at: usize) -> Result<Option<(&[u8], usize)>, DecodeError> {
    let rest = &buf[at..];
    let Some(nl) = memchr(b'\n', &rest[..rest.len().min(MAX_LINE + 1)]) else {
        if rest.len() > MAX_LINE {
            return Err(DecodeError(format!("RESP line longer than {MAX_LINE}")));
        }
        return Ok(None);
    };
    let l = rest[..nl]
        .strip_suffix(b"\r")
        .ok_or_else(|| bad("line ending", &rest[..nl]))?;
    Ok(Some((l, at + nl + 1)))
}

/// A command as a RESP array of bulk strings.
fn command(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.push(b'*');
    push_u64(out, args.len() as u64);
    out.extend_from_slice(b"\r\n");
    for a in args {
        out.push(b'$');
        push_u64(out, a.len() as u64);
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

fn bad(what: &str, b: &[u8]) -> DecodeError {
    DecodeError(format!(
        "bad RESP {what}: {}",
        String::from_utf8_lossy(&b[..b.len().min(200)])
    ))
}

fn parse_u64(b: &[u8]) -> Option<u64> {
    if b.is_empty() || b.len() > 20 || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(b).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_resp_arrays() {
        let mut c = Redis::new(1 << 10);
        let mut out = Vec::new();
        c.subscribe(&mut out, "/bench/0", 5);
        c.publish(&mut out, "/bench/0", b"a\r\nb");
        assert_eq!(
            out,
            b"*2\r\n$9\r\nSUBSCRIBE\r\n$8\r\n/bench/0\r\n\
              *3\r\n$7\r\nPUBLISH\r\n$8\r\n/bench/0\r\n$4\r\na\r\nb\r\n"
        );
        assert!(!c.advertise_service(&mut out, "/s", 1));
    }

    #[test]
    fn pushes_confirmations_and_replies() {
        let mut c = Redis::new(1 << 10);
        let mut out = Vec::new();
        c.subscribe(&mut out, "/bench/0", 5);
        let confirm = b"*3\r\n$9\r\nsubscribe\r\n$8\r\n/bench/0\r\n:1\r\n";
        assert_eq!(
            c.decode(confirm).expect("ok"),
            Some((Event::Ack { token: 5 }, confirm.len()))
        );
        let msg = b"*3\r\n$7\r\nmessage\r\n$8\r\n/bench/0\r\n$4\r\na\r\nb\r\n:3\r\n";
        for cut in 0..msg.len() - 4 {
            assert_eq!(c.decode(&msg[..cut]).expect("ok"), None, "cut {cut}");
        }
        assert_eq!(
            c.decode(msg).expect("ok"),
            Some((
                Event::Delivery {
                    topic: b"/bench/0",
                    payload: b"a\r\nb"
                },
                msg.len() - 4
            ))
        );
        assert!(matches!(
            c.decode(b":3\r\n"),
            Ok(Some((Event::Notice { error: false, .. }, 4)))
        ));
        assert!(matches!(
            c.decode(b"-ERR no\r\n"),
            Ok(Some((Event::Notice { error: true, .. }, 9)))
        ));
        assert!(c.decode(b"*3\r\n$2000\r\n").is_err());
        assert!(c.decode(b"?\r\n").is_err());
    }

    #[test]
    fn info_gives_connection_count() {
        let mut c = Redis::new(1 << 10);
        let info = b"$44\r\n# Clients\r\nconnected_clients:12\r\nblocked:0\r\n\r\n";
        let (ev, used) = c.decode(info).expect("ok").expect("full");
        assert_eq!(used, info.len());
        let Event::Stats { values } = ev else {
            panic!("not stats")
        };
        assert_eq!(
            Redis::parse_stats(values).map(|s| s.connections_open),
            Some(12)
        );
    }
}
