//! [`Raw`]: a single loopback TCP stream with no server in between, the
//! baseline for the large-message ratio.
//!
//! The other end is `rosgate-load --raw-source` ([`serve`]): a blocking
//! sender, pinned where a server would be, that writes publisher 0's
//! messages (the same payloads, stamps and padding as every other run) to
//! each connection as fast as TCP takes them. The tool connects its one
//! subscriber to it and checks every delivery exactly as it does for a
//! server ([`Codec::REMOTE_SOURCE`]); sequence gaps and damage fail the
//! run. Payloads cross one stream here and two (in and out of the server)
//! in a server run, which is what the "large >= 0.5x raw" target allows
//! for. The source stamps no send time, so the run reports no latency.
//!
//! A frame is `<u32 BE payload length><u8 topic length><topic><payload>`,
//! so the subscriber still sees which topic a message was for.
//!
//! [`Relay`] is the fan-out ceiling (issue 30): the source, started with
//! `--raw-format rosgate --subs N`, waits for N connections and writes the
//! very lines a gateway sends its subscribers (`{"op":"publish",...}`,
//! encoded once per message by the [`Rosgate`] codec) to each of them in
//! turn, so the tool's subscribers decode and check exactly what they do
//! in a gateway run, and the only work on the server's core is one encode
//! per message and one `write` per subscriber per batch: no publisher to
//! read, no parse, no routing. What the tool receives from it is what the
//! tool (and loopback TCP) can take with no server in the way: the
//! ceiling a gateway's fan-out row is compared with.

use std::io::{self, Write};
use std::net::{SocketAddr, TcpListener};

use crate::payload::{Payload, Stamp};
use crate::rosgate::Rosgate;
use crate::transport::{Codec, DecodeError, Event};

const HEADER: usize = 5;
/// The source writes at least this much per `write` (small messages are
/// batched, as a closed-loop publisher's buffer batches them).
const SOURCE_BATCH: usize = 256 << 10;

#[derive(Debug)]
pub struct Raw {
    max_frame: usize,
}

impl Codec for Raw {
    const NAME: &'static str = "raw";
    const REMOTE_SOURCE: bool = true;

    fn new(max_frame: usize) -> Self {
        Raw { max_frame }
    }

    fn subscribe(&mut self, _out: &mut Vec<u8>, _topic: &str, _token: u64) {}

    fn publish(&mut self, out: &mut Vec<u8>, topic: &str, payload: &[u8]) {
        let topic = &topic.as_bytes()[..topic.len().min(255)];
        out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        out.push(topic.len() as u8);
        out.extend_from_slice(topic);
        out.extend_from_slice(payload);
    }

    fn advertise_service(&mut self, _out: &mut Vec<u8>, _service: &str, _token: u64) -> bool {
        false
    }

    fn call(&mut self, _out: &mut Vec<u8>, _service: &str, _id: u64, _args: &[u8]) {}

    fn respond(&mut self, _out: &mut Vec<u8>, _service: &str, _id: &[u8], _values: &[u8]) {}

    fn decode<'a>(&mut self, buf: &'a [u8]) -> Result<Option<(Event<'a>, usize)>, DecodeError> {
        let Some(head) = buf.get(..HEADER) else {
            return Ok(None);
        };
        let len = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) as usize;
        if len > self.max_frame {
            return Err(DecodeError(format!(
                "frame of {len} bytes exceeds {}",
                self.max_frame
            )));
        }
        let start = HEADER + usize::from(head[4]);
        let end = start + len;
        if buf.len() < end {
            return Ok(None);
        }
        let ev = Event::Delivery {
            topic: &buf[HEADER..start],
            payload: &buf[start..end],
        };
        Ok(Some((ev, end)))
    }
}

/// What a `--raw-source` writes (`--raw-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceFormat {
    /// [`Raw`] frames.
    Raw,
    /// A gateway's publish lines ([`Relay`]).
    Rosgate,
}

/// [`Relay`]: the subscribers of a fan-out ceiling run read a raw source
/// writing a gateway's publish lines; see the module docs.
#[derive(Debug)]
pub struct Relay(Rosgate);

impl Codec for Relay {
    const NAME: &'static str = "relay";
    const REMOTE_SOURCE: bool = true;

    fn new(max_frame: usize) -> Self {
        Relay(Rosgate::new(max_frame))
    }

    fn subscribe(&mut self, _out: &mut Vec<u8>, _topic: &str, _token: u64) {}

    fn publish(&mut self, _out: &mut Vec<u8>, _topic: &str, _payload: &[u8]) {}

    fn advertise_service(&mut self, _out: &mut Vec<u8>, _service: &str, _token: u64) -> bool {
        false
    }

    fn call(&mut self, _out: &mut Vec<u8>, _service: &str, _id: u64, _args: &[u8]) {}

    fn respond(&mut self, _out: &mut Vec<u8>, _service: &str, _id: &[u8], _values: &[u8]) {}

    fn decode<'a>(&mut self, buf: &'a [u8]) -> Result<Option<(Event<'a>, usize)>, DecodeError> {
        self.0.decode(buf)
    }
}

/// The `--raw-source` server: listens on `addr` (port 0 picks one; the
/// address is printed on stderr), then serves `group` connections at a
/// time, writing the same `size`-byte payloads from sequence 0 to each of
/// them (a batch to each in turn) until one goes away. Runs until killed.
pub fn serve(
    addr: SocketAddr,
    size: usize,
    topic: &str,
    group: usize,
    format: SourceFormat,
) -> io::Result<()> {
    let listener = TcpListener::bind(addr)?;
    eprintln!(
        "rosgate-load raw source listening on {}",
        listener.local_addr()?
    );
    let payload = Payload::new(size);
    let mut raw = Raw::new(usize::MAX);
    let mut lines = Rosgate::new(usize::MAX);
    let mut body = Vec::with_capacity(size + 128);
    let mut batch = Vec::with_capacity(size.max(SOURCE_BATCH) + 256);
    let mut streams = Vec::with_capacity(group);
    for conn in listener.incoming() {
        let stream = match conn {
            Ok(s) => s,
            Err(e) => {
                eprintln!("rosgate-load raw source: accept: {e}");
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        streams.push(stream);
        if streams.len() < group.max(1) {
            continue;
        }
        let mut seq = 0;
        'group: loop {
            batch.clear();
            while batch.len() < SOURCE_BATCH {
                body.clear();
                let st = Stamp {
                    src: 0,
                    seq,
                    t_ns: 0,
                };
                payload.encode(&mut body, st);
                match format {
                    SourceFormat::Raw => raw.publish(&mut batch, topic, &body),
                    SourceFormat::Rosgate => lines.publish(&mut batch, topic, &body),
                }
                seq += 1;
            }
            for stream in &mut streams {
                // The tool closes (resets) the streams when its run ends.
                if stream.write_all(&batch).is_err() {
                    break 'group;
                }
            }
        }
        streams.clear();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip() {
        let mut c = Raw::new(16);
        let mut out = Vec::new();
        c.publish(&mut out, "/t", b"abc");
        c.publish(&mut out, "/t", b"");
        assert_eq!(c.decode(&out[..7]).expect("ok"), None);
        let (ev, used) = c.decode(&out).expect("ok").expect("full");
        assert_eq!(
            ev,
            Event::Delivery {
                topic: b"/t",
                payload: b"abc"
            }
        );
        assert_eq!(used, 10);
        assert!(matches!(c.decode(&out[10..]), Ok(Some((_, 7)))));
        let mut big = Vec::new();
        c.publish(&mut big, "/t", &[b'x'; 17]);
        assert!(c.decode(&big).is_err());
    }

    #[test]
    fn relay_reads_the_gateways_publish_lines() {
        let mut out = Vec::new();
        Rosgate::new(64).publish(&mut out, "/t", b"{\"a\":1}");
        let mut r = Relay::new(64);
        let (ev, used) = r.decode(&out).expect("ok").expect("full");
        assert_eq!(
            ev,
            Event::Delivery {
                topic: b"/t",
                payload: b"{\"a\":1}"
            }
        );
        assert_eq!(used, out.len());
    }
}
