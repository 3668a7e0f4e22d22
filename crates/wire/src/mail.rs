//! The mail between federated gateways: calls of services and their
//! answers, many to a Zenoh sample, put to the receiving gateway's own key
//! (`rosgate_zenoh::keys::mail_key`). Encoding and decoding only (sans-io);
//! who sends and keeps what is `crates/zenoh/src/gateways/calls.rs`.
//!
//! Why not a Zenoh query per call: a query costs, on both gateways, a
//! routing entry, a clean-up task with its own timer on Zenoh's runtime
//! (a thread wake-up each), and a final message after the reply; a loop
//! turn's calls to one gateway as one put cost one message. Measured in
//! docs/performance.md ("Across gateways (issue 30)").
//!
//! ```text
//! mail   = version:u8 (1)  sender_len:u8  sender (the sender's Zenoh id)  record*
//! record = 'C' domain:u8 n:u64 service_len:u32 service args_len:u32 args
//!        | 'A' n:u64 status:u8 body_len:u32 body
//! ```
//! Integers are little-endian. `n` is the caller's number for the call;
//! an answer echoes it. `status`: [`Status`].
//!
//! Invariants: [`Mail::decode`] never panics and never reads past its
//! input, whatever the bytes; a record cut short or of an unknown kind
//! ends the decoding (the records before it stand).

/// A rosgate domain (`rosgate_core::nodes::Domain`).
pub type Domain = u8;

/// The version byte this gateway writes and reads.
pub const VERSION: u8 = 1;

/// Bytes. A mail put holds records up to about this much; a record that
/// would pass it starts the next put (one alone may be larger: a call's
/// arguments are bounded by the client's line limits).
pub const MAIL_BATCH_BYTES: usize = 60 * 1024;

/// How a call ended at the providing gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// The provider answered `result: false`; the body is its `values`.
    Failed = 0,
    /// The provider answered `result: true`; the body is its `values`.
    Ok = 1,
    /// The providing gateway refused the call; the body says why (UTF-8).
    Refused = 2,
}

/// One record of a mail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record<'a> {
    /// A call of `service` in `domain`, number `n` at the caller.
    Call {
        domain: Domain,
        n: u64,
        service: &'a str,
        args: &'a [u8],
    },
    /// The answer to the caller's call `n`.
    Answer {
        n: u64,
        status: Status,
        body: &'a [u8],
    },
}

/// A decoded mail: who sent it and its records.
#[derive(Debug)]
pub struct Mail<'a> {
    pub sender: &'a str,
    pub records: Vec<Record<'a>>,
}

/// The records for one receiving gateway, being written.
#[derive(Debug, Default)]
pub struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    /// Whether nothing is written yet.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    fn head(&mut self, sender: &str) {
        if self.buf.is_empty() {
            self.buf.push(VERSION);
            // Zenoh ids are at most 32 hexadecimal digits.
            let s = &sender.as_bytes()[..sender.len().min(u8::MAX as usize)];
            self.buf.push(s.len() as u8);
            self.buf.extend_from_slice(s);
        }
    }

    /// Adds a call.
    pub fn call(&mut self, sender: &str, domain: Domain, n: u64, service: &str, args: &[u8]) {
        self.head(sender);
        self.buf.push(b'C');
        self.buf.push(domain);
        self.buf.extend_from_slice(&n.to_le_bytes());
        push_bytes(&mut self.buf, service.as_bytes());
        push_bytes(&mut self.buf, args);
    }

    /// Adds an answer.
    pub fn answer(&mut self, sender: &str, n: u64, status: Status, body: &[u8]) {
        self.head(sender);
        self.buf.push(b'A');
        self.buf.extend_from_slice(&n.to_le_bytes());
        self.buf.push(status as u8);
        push_bytes(&mut self.buf, body);
    }

    /// The mail written so far; the writer starts again empty.
    pub fn take(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.buf)
    }
}

fn push_bytes(buf: &mut Vec<u8>, b: &[u8]) {
    // A call's arguments are bounded by the line limits (far below 4 GiB).
    let len = u32::try_from(b.len()).unwrap_or(u32::MAX);
    buf.extend_from_slice(&len.to_le_bytes());
    buf.extend_from_slice(&b[..len as usize]);
}

/// A cursor over untrusted bytes: every read checks what is left.
struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }

    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    fn u64(&mut self) -> Option<u64> {
        let b: [u8; 8] = self.take(8)?.try_into().ok()?;
        Some(u64::from_le_bytes(b))
    }

    fn bytes(&mut self) -> Option<&'a [u8]> {
        let b: [u8; 4] = self.take(4)?.try_into().ok()?;
        self.take(u32::from_le_bytes(b) as usize)
    }

    fn record(&mut self) -> Option<Record<'a>> {
        match self.u8()? {
            b'C' => {
                let domain = self.u8()?;
                let n = self.u64()?;
                let service = std::str::from_utf8(self.bytes()?).ok()?;
                let args = self.bytes()?;
                Some(Record::Call {
                    domain,
                    n,
                    service,
                    args,
                })
            }
            b'A' => {
                let n = self.u64()?;
                let status = match self.u8()? {
                    0 => Status::Failed,
                    1 => Status::Ok,
                    2 => Status::Refused,
                    _ => return None,
                };
                let body = self.bytes()?;
                Some(Record::Answer { n, status, body })
            }
            _ => None,
        }
    }
}

impl<'a> Mail<'a> {
    /// The mail in `bytes`, or `None` when its head is not one this
    /// gateway reads. At most `max_records` records are decoded.
    pub fn decode(bytes: &'a [u8], max_records: usize) -> Option<Mail<'a>> {
        let mut c = Cursor(bytes);
        if c.u8()? != VERSION {
            return None;
        }
        let len = c.u8()? as usize;
        let sender = std::str::from_utf8(c.take(len)?).ok()?;
        let mut records = Vec::new();
        while !c.0.is_empty() && records.len() < max_records {
            match c.record() {
                Some(r) => records.push(r),
                None => break,
            }
        }
        Some(Mail { sender, records })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_and_answers_come_back_as_written() {
        let mut w = Writer::default();
        assert!(w.is_empty());
        w.call("ab12", 3, 7, "/add", b"{\"a\":1}");
        w.answer("ab12", 9, Status::Refused, b"too busy");
        w.call("ab12", 0, u64::MAX, "", b"");
        let bytes = w.take();
        assert!(w.is_empty());
        let m = Mail::decode(&bytes, 100).expect("mail");
        assert_eq!(m.sender, "ab12");
        assert_eq!(
            m.records,
            vec![
                Record::Call {
                    domain: 3,
                    n: 7,
                    service: "/add",
                    args: b"{\"a\":1}"
                },
                Record::Answer {
                    n: 9,
                    status: Status::Refused,
                    body: b"too busy"
                },
                Record::Call {
                    domain: 0,
                    n: u64::MAX,
                    service: "",
                    args: b""
                },
            ]
        );
        assert_eq!(Mail::decode(&bytes, 1).expect("mail").records.len(), 1);
    }

    /// Every cut of a valid mail, and every byte flipped, decodes to a
    /// prefix of its records or to nothing, never a panic.
    #[test]
    fn cut_or_damaged_mail_decodes_to_a_prefix_or_nothing() {
        let mut w = Writer::default();
        w.call("ab12", 1, 2, "/s", b"[1,2]");
        w.answer("ab12", 2, Status::Ok, b"{}");
        let bytes = w.take();
        let full = Mail::decode(&bytes, 10).expect("mail").records;
        for cut in 0..bytes.len() {
            if let Some(m) = Mail::decode(&bytes[..cut], 10) {
                assert!(full.starts_with(&m.records), "cut {cut}");
            }
        }
        for i in 0..bytes.len() {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut b = bytes.clone();
                b[i] ^= flip;
                let _ = Mail::decode(&b, 10);
            }
        }
        assert!(Mail::decode(&[2, 0], 10).is_none(), "another version");
        let huge = [
            1u8, 0, b'C', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff,
        ];
        assert!(Mail::decode(&huge, 10).expect("head").records.is_empty());
    }
}
