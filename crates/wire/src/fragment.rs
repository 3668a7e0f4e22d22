//! rosbridge's `fragment` op (ROSBRIDGE_PROTOCOL.md §3.1.1), both ways:
//! splitting an outgoing frame into `fragment` frames, and reassembling a
//! client's fragments, sans-io (pieces and `now` in, whole messages out).
//!
//! What it owns: the `fragment` frame's layout, where a text is cut, and the
//! bounds on what one connection's partial messages may hold.
//!
//! Splitting follows rosbridge_library/src/rosbridge_library/protocol.py
//! `send` and capabilities/fragmentation.py: a frame whose text is longer
//! than the client's `fragment_size` is sent as `total` frames
//! `{"op":"fragment","id":<id>,"data":<piece>,"num":<0..total>,"total":<n>}`,
//! each `data` the next `fragment_size` characters of the text, so that the
//! `data` strings concatenated in `num` order are the text exactly. Here:
//! - lengths count characters (Unicode scalar values), as Python's `len`
//!   counts rosbridge's text, and a cut never splits a UTF-8 sequence;
//! - `total` is an integer (rosbridge under Python 3 computes it with `/`
//!   and can send a fraction such as `3.4`);
//! - a `fragment_size` below [`MIN_FRAGMENT_CHARS`] is taken as that, so a
//!   client cannot make one message cost a frame header per character;
//! - `id` is the caller's choice, any JSON value: rosbridge uses the
//!   message's own `id` when it has one and otherwise `0` for every message
//!   (its counter lives on a `Fragmentation` built anew per message). The
//!   fragments of one message must be sent consecutively and whole (a
//!   receiver keyed by `id` cannot tell two interleaved messages apart).
//!
//! Reassembly ([`Reassembly`], one per connection) takes each fragment's
//! `id` (its JSON text, as written: ids spelled differently are different
//! messages), `data`, `num` and `total`, and returns the text once every
//! `num` in `0..total` has arrived exactly once, joined in `num` order
//! (rosbridge's defragmentation.py joins them in arrival order). Invariants:
//! - bytes held, all partial messages together, never pass the table's
//!   `max_bytes` (the caller's line limit: a reassembled message is a line),
//!   counting each piece's data, [`PIECE_OVERHEAD`] per piece and
//!   [`MESSAGE_OVERHEAD`] plus the id per message;
//!   [`Reassembly::held_bytes`] reports them for the memory ledger;
//! - at most [`MAX_FRAGMENTED_IN_FLIGHT`] messages (partial or failed) per
//!   connection; a piece of a further id is refused and leaves nothing;
//! - each message has a deadline, its first piece's arrival plus the
//!   table's timeout (an age, not an idle time: trickling pieces does not
//!   extend it); [`Reassembly::expire`] drops what is past it;
//! - a refused piece (each reason a [`FragmentError`]) fails its whole
//!   message: its pieces are freed at once, and the id stays failed, every
//!   later piece of it refused, until the message's deadline, so nothing
//!   is ever delivered for a message one of whose pieces was refused. A
//!   message that completed leaves nothing: its id may start a new one
//!   (rosbridge reuses `0`);
//! - every operation is O(log pieces) or O(in-flight); nothing recurses,
//!   nothing panics.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::encode::json_string;
use crate::Raw;

/// The smallest `fragment_size` honoured, in characters; a smaller one is
/// taken as this.
pub const MIN_FRAGMENT_CHARS: usize = 256;

/// Partial (or failed) fragmented messages one connection may have at once.
pub const MAX_FRAGMENTED_IN_FLIGHT: usize = 16;

/// The default time a fragmented message has to complete, from its first
/// piece.
pub const FRAGMENT_TIMEOUT_MS: u64 = 10_000;

/// Bytes counted per piece held, on top of its data.
pub const PIECE_OVERHEAD: usize = 32;

/// Bytes counted per message held, on top of its id and pieces.
pub const MESSAGE_OVERHEAD: usize = 96;

/// One piece of a split text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece<'a> {
    pub data: &'a str,
    pub num: u64,
    pub total: u64,
}

impl Piece<'_> {
    /// Appends this piece's frame,
    /// `{"op":"fragment","id":<id>,"data":"<piece>","num":n,"total":t}` and
    /// a newline, like the frames of [`crate::encode`].
    pub fn write(&self, out: &mut Vec<u8>, id: Raw<'_>) {
        out.extend_from_slice(br#"{"op":"fragment","id":"#);
        out.extend_from_slice(id.as_bytes());
        out.extend_from_slice(br#","data":"#);
        json_string(out, self.data);
        out.extend_from_slice(br#","num":"#);
        out.extend_from_slice(self.num.to_string().as_bytes());
        out.extend_from_slice(br#","total":"#);
        out.extend_from_slice(self.total.to_string().as_bytes());
        out.extend_from_slice(b"}\n");
    }
}

/// The pieces of `text` (a frame's JSON, without its newline) for a
/// client's `fragment_size` of `max_chars` (at least
/// [`MIN_FRAGMENT_CHARS`]), or `None` when the text is not longer than
/// that and goes whole.
pub fn split(text: &str, max_chars: usize) -> Option<Split<'_>> {
    let size = max_chars.max(MIN_FRAGMENT_CHARS);
    let ascii = text.is_ascii();
    let chars = if ascii {
        text.len()
    } else {
        text.chars().count()
    };
    if chars <= size {
        return None;
    }
    Some(Split {
        rest: text,
        size,
        ascii,
        num: 0,
        total: chars.div_ceil(size) as u64,
    })
}

/// Iterator over the pieces of a text, in order; see [`split`].
#[derive(Debug, Clone)]
pub struct Split<'a> {
    rest: &'a str,
    size: usize,
    ascii: bool,
    num: u64,
    total: u64,
}

impl Split<'_> {
    /// How many pieces the text makes.
    pub fn total(&self) -> u64 {
        self.total
    }
}

impl<'a> Iterator for Split<'a> {
    type Item = Piece<'a>;

    fn next(&mut self) -> Option<Piece<'a>> {
        if self.num == self.total {
            return None;
        }
        let cut = if self.ascii {
            self.size.min(self.rest.len())
        } else {
            self.rest
                .char_indices()
                .nth(self.size)
                .map_or(self.rest.len(), |(i, _)| i)
        };
        let (data, rest) = self.rest.split_at(cut);
        self.rest = rest;
        let p = Piece {
            data,
            num: self.num,
            total: self.total,
        };
        self.num += 1;
        Some(p)
    }
}

/// Why a piece was refused. Each fails the piece's message (see the module
/// docs), except [`FragmentError::TooManyInFlight`] and
/// [`FragmentError::IdTooLong`], which leave nothing behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FragmentError {
    /// `total` is 0.
    ZeroTotal,
    /// `num` is not below `total`.
    NumOutOfRange,
    /// `total` differs from the message's first piece's.
    TotalChanged,
    /// This `num` has arrived already.
    Duplicate,
    /// Held bytes would pass the table's `max_bytes`.
    TooLarge,
    /// [`MAX_FRAGMENTED_IN_FLIGHT`] messages are in flight already.
    TooManyInFlight,
    /// The id is longer than [`crate::decode::MAX_ID_BYTES`].
    IdTooLong,
    /// The message failed earlier; its pieces are refused until its
    /// deadline.
    Failed,
}

impl FragmentError {
    /// A short reason, for an error status.
    pub fn reason(self) -> &'static str {
        match self {
            FragmentError::ZeroTotal => "fragment total is 0",
            FragmentError::NumOutOfRange => "fragment num is not below total",
            FragmentError::TotalChanged => "fragment total differs from the message's first piece",
            FragmentError::Duplicate => "fragment num arrived twice",
            FragmentError::TooLarge => "fragmented message is over the line limit",
            FragmentError::TooManyInFlight => "too many fragmented messages in flight",
            FragmentError::IdTooLong => "fragment id is too long",
            FragmentError::Failed => "an earlier fragment of this message was refused",
        }
    }
}

/// The partial messages of one connection. See the module docs.
#[derive(Debug)]
pub struct Reassembly {
    max_bytes: usize,
    timeout: Duration,
    held: usize,
    entries: Vec<Entry>,
}

#[derive(Debug)]
struct Entry {
    id: Box<str>,
    total: u64,
    deadline: Instant,
    /// `None` once failed.
    open: Option<Partial>,
}

#[derive(Debug, Default)]
struct Partial {
    /// Pieces `0..next`, joined.
    text: String,
    next: u64,
    /// Pieces past a gap, by `num`.
    later: BTreeMap<u64, String>,
    /// Bytes counted for this message (data and overheads, id included).
    held: usize,
}

impl Reassembly {
    /// A table holding at most `max_bytes`, giving each message `timeout`
    /// to complete.
    pub fn new(max_bytes: usize, timeout: Duration) -> Reassembly {
        Reassembly {
            max_bytes,
            timeout,
            held: 0,
            entries: Vec::new(),
        }
    }

    /// Bytes held by partial messages, as the memory ledger counts them.
    pub fn held_bytes(&self) -> usize {
        self.held
    }

    /// Messages in flight, failed ones included.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The earliest deadline, for the caller's timer.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.entries.iter().map(|e| e.deadline).min()
    }

    /// Drops the messages whose deadline is at or before `now`; returns
    /// how many were partial (not failed), for a counter.
    pub fn expire(&mut self, now: Instant) -> usize {
        self.expire_each(now, |_| {})
    }

    /// [`Reassembly::expire`], calling `dropped` with the id of each
    /// partial message dropped (for the status that tells its sender).
    pub fn expire_each(&mut self, now: Instant, mut dropped: impl FnMut(&str)) -> usize {
        let mut n = 0;
        let held = &mut self.held;
        self.entries.retain(|e| {
            if e.deadline > now {
                return true;
            }
            if let Some(p) = &e.open {
                *held -= p.held;
                n += 1;
                dropped(&e.id);
            }
            false
        });
        n
    }

    /// Takes one piece; returns the whole text when it completes its
    /// message.
    pub fn piece(
        &mut self,
        id: &str,
        data: &str,
        num: u64,
        total: u64,
        now: Instant,
    ) -> Result<Option<String>, FragmentError> {
        if id.len() > crate::decode::MAX_ID_BYTES {
            return Err(FragmentError::IdTooLong);
        }
        let k = match self.entries.iter().position(|e| *e.id == *id) {
            Some(k) => k,
            None => {
                if self.entries.len() >= MAX_FRAGMENTED_IN_FLIGHT {
                    return Err(FragmentError::TooManyInFlight);
                }
                self.entries.push(Entry {
                    id: id.into(),
                    total,
                    deadline: now + self.timeout,
                    open: Some(Partial::default()),
                });
                self.entries.len() - 1
            }
        };
        match self.add(k, data, num, total) {
            Ok(true) => {
                let e = self.entries.swap_remove(k);
                let p = e.open.unwrap_or_default();
                self.held -= p.held;
                Ok(Some(p.text))
            }
            Ok(false) => Ok(None),
            Err(err) => {
                if let Some(p) = self.entries[k].open.take() {
                    self.held -= p.held;
                }
                Err(err)
            }
        }
    }

    /// Adds a piece to entry `k`; true when the message is complete.
    fn add(&mut self, k: usize, data: &str, num: u64, total: u64) -> Result<bool, FragmentError> {
        let room = self.max_bytes.saturating_sub(self.held);
        let e = &mut self.entries[k];
        let Some(p) = e.open.as_mut() else {
            return Err(FragmentError::Failed);
        };
        if total == 0 {
            return Err(FragmentError::ZeroTotal);
        }
        if total != e.total {
            return Err(FragmentError::TotalChanged);
        }
        if num >= total {
            return Err(FragmentError::NumOutOfRange);
        }
        if num < p.next || p.later.contains_key(&num) {
            return Err(FragmentError::Duplicate);
        }
        let mut cost = data.len() + PIECE_OVERHEAD;
        if p.next == 0 && p.later.is_empty() {
            // The message's first piece brings the message's own cost.
            cost += MESSAGE_OVERHEAD + e.id.len();
        }
        if cost > room {
            return Err(FragmentError::TooLarge);
        }
        p.held += cost;
        self.held += cost;
        if num == p.next {
            p.text.push_str(data);
            p.next += 1;
            while let Some(s) = p.later.remove(&p.next) {
                p.text.push_str(&s);
                p.next += 1;
            }
        } else {
            p.later.insert(num, data.to_owned());
        }
        Ok(p.next == total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(text: &str, max: usize, id: &str) -> Vec<String> {
        let mut out = Vec::new();
        for p in split(text, max).expect("split") {
            let mut f = Vec::new();
            p.write(&mut f, Raw::from_valid_json(id));
            out.push(String::from_utf8(f).unwrap());
        }
        out
    }

    /// The `data` of each frame, parsed back, joined.
    fn join(frames: &[String]) -> String {
        let mut text = String::new();
        for (i, f) in frames.iter().enumerate() {
            let v: serde_json::Value = serde_json::from_str(f).unwrap();
            assert_eq!(v["op"], "fragment");
            assert_eq!(v["num"], i as u64);
            assert_eq!(v["total"], frames.len() as u64);
            text.push_str(v["data"].as_str().unwrap());
        }
        text
    }

    #[test]
    fn short_texts_go_whole_and_long_ones_split_at_characters() {
        let small = r#"{"op":"publish","topic":"/t","msg":{"data":"hi"}}"#;
        assert!(split(small, 10).is_none(), "raised to MIN_FRAGMENT_CHARS");
        let exact = "x".repeat(300);
        assert!(split(&exact, 300).is_none());
        assert_eq!(split(&exact, 299).map(|s| s.total()), Some(2));

        let text = format!(
            r#"{{"op":"publish","topic":"/t","msg":{{"data":"{}\"\\\n{}"}}}}"#,
            "a".repeat(1000),
            "é水🤖".repeat(400)
        );
        for max in [256, 257, 300, 1000, 1023] {
            let f = frames(&text, max, "\"m-1\"");
            let chars = text.chars().count();
            assert_eq!(f.len(), chars.div_ceil(max));
            assert_eq!(join(&f), text, "max {max}");
            for p in split(&text, max).unwrap() {
                let n = p.data.chars().count();
                assert!(n == max || p.num == p.total - 1, "piece {} has {n}", p.num);
            }
        }
        let f = frames(&"y".repeat(600), 256, "0");
        assert_eq!(
            f[2],
            format!(
                "{{\"op\":\"fragment\",\"id\":0,\"data\":\"{}\",\"num\":2,\"total\":3}}\n",
                "y".repeat(88)
            )
        );
    }

    fn table(max: usize) -> (Reassembly, Instant) {
        (
            Reassembly::new(max, Duration::from_millis(FRAGMENT_TIMEOUT_MS)),
            Instant::now(),
        )
    }

    #[test]
    fn pieces_in_any_order_reassemble_in_num_order() {
        let text = format!(r#"{{"op":"publish","msg":"{}"}}"#, "é".repeat(1000));
        let pieces: Vec<Piece<'_>> = split(&text, 256).unwrap().collect();
        let n = pieces.len();
        for order in [
            (0..n).collect::<Vec<_>>(),
            (0..n).rev().collect(),
            vec![1, 0, 4, 3, 2],
        ] {
            let (mut r, t0) = table(1 << 20);
            let mut got = None;
            for (step, &i) in order.iter().enumerate() {
                let p = pieces[i];
                let res = r.piece("7", p.data, p.num, p.total, t0).unwrap();
                if step + 1 < n {
                    assert!(res.is_none());
                    assert!(r.held_bytes() > 0);
                } else {
                    got = res;
                }
            }
            assert_eq!(got.as_deref(), Some(text.as_str()), "{order:?}");
            assert_eq!((r.held_bytes(), r.len()), (0, 0));
        }
        // A completed id starts afresh; a one-piece message completes.
        let (mut r, t0) = table(1 << 20);
        assert_eq!(r.piece("0", "a", 0, 1, t0), Ok(Some("a".into())));
        assert_eq!(r.piece("0", "b", 0, 1, t0), Ok(Some("b".into())));
    }

    #[test]
    fn each_refusal_fails_its_message_until_the_deadline() {
        let cases: &[(&[(u64, u64)], FragmentError)] = &[
            (&[(0, 0)], FragmentError::ZeroTotal),
            (&[(3, 3)], FragmentError::NumOutOfRange),
            (&[(0, 3), (1, 4)], FragmentError::TotalChanged),
            (&[(0, 3), (0, 3)], FragmentError::Duplicate),
            (&[(2, 3), (2, 3)], FragmentError::Duplicate),
        ];
        for (pieces, want) in cases {
            let (mut r, t0) = table(1 << 20);
            let (last, first) = pieces.split_last().unwrap();
            for &(num, total) in first {
                assert_eq!(r.piece("\"x\"", "ab", num, total, t0), Ok(None));
            }
            assert_eq!(r.piece("\"x\"", "ab", last.0, last.1, t0), Err(*want));
            // Freed at once, remembered as failed.
            assert_eq!(r.held_bytes(), 0, "{want:?}");
            assert_eq!(r.len(), 1);
            // Nothing more for this id, even a valid complete set ...
            for num in 0..3 {
                assert_eq!(
                    r.piece("\"x\"", "ab", num, 3, t0),
                    Err(FragmentError::Failed)
                );
            }
            // ... other ids are unaffected ...
            assert_eq!(r.piece("\"y\"", "z", 0, 1, t0), Ok(Some("z".into())));
            // ... until the deadline, which frees the id.
            let t1 = t0 + Duration::from_millis(FRAGMENT_TIMEOUT_MS);
            assert_eq!(r.next_deadline(), Some(t1));
            assert_eq!(r.expire(t1 - Duration::from_millis(1)), 0);
            assert_eq!(r.expire(t1), 0, "a failed message is not counted again");
            assert!(r.is_empty());
            assert_eq!(r.piece("\"x\"", "ab", 0, 1, t1), Ok(Some("ab".into())));
        }
    }

    #[test]
    fn bounds_hold() {
        // Bytes: all messages together within max_bytes.
        let (mut r, t0) = table(1000);
        let big = "x".repeat(300);
        assert_eq!(r.piece("1", &big, 0, 3, t0), Ok(None));
        assert_eq!(r.piece("2", &big, 0, 3, t0), Ok(None));
        assert!(r.held_bytes() <= 1000);
        assert_eq!(r.piece("1", &big, 1, 3, t0), Err(FragmentError::TooLarge));
        assert_eq!(r.held_bytes(), MESSAGE_OVERHEAD + 1 + 300 + PIECE_OVERHEAD);
        // A message whose own overhead does not fit fails at once.
        let (mut r, t0) = table(MESSAGE_OVERHEAD);
        assert_eq!(r.piece("12", "", 0, 2, t0), Err(FragmentError::TooLarge));
        assert_eq!((r.held_bytes(), r.len()), (0, 1));
        // Empty pieces still cost: a flood of them is bounded.
        let (mut r, t0) = table(10_000);
        let mut refused = None;
        for num in 0..u64::MAX {
            if let Err(e) = r.piece("f", "", num, u64::MAX, t0) {
                refused = Some((num, e));
                break;
            }
        }
        assert_eq!(
            refused,
            Some((
                ((10_000 - MESSAGE_OVERHEAD - 1) / PIECE_OVERHEAD) as u64,
                FragmentError::TooLarge
            ))
        );
        // Messages in flight.
        let (mut r, t0) = table(1 << 20);
        for i in 0..MAX_FRAGMENTED_IN_FLIGHT {
            assert_eq!(r.piece(&i.to_string(), "a", 0, 2, t0), Ok(None));
        }
        assert_eq!(
            r.piece("new", "a", 0, 2, t0),
            Err(FragmentError::TooManyInFlight)
        );
        assert_eq!(r.len(), MAX_FRAGMENTED_IN_FLIGHT);
        // Pieces of a message in flight are still taken.
        assert_eq!(r.piece("3", "b", 1, 2, t0), Ok(Some("ab".into())));
        // Ids are capped.
        let long = "9".repeat(crate::decode::MAX_ID_BYTES + 1);
        assert_eq!(r.piece(&long, "", 0, 1, t0), Err(FragmentError::IdTooLong));
        // The deadline counts from the first piece: trickling does not
        // extend it.
        let (mut r, t0) = table(1 << 20);
        let step = Duration::from_millis(FRAGMENT_TIMEOUT_MS / 4);
        for num in 0..4 {
            assert_eq!(r.piece("t", "a", num, 10, t0 + step * num as u32), Ok(None));
        }
        assert_eq!(r.expire(t0 + step * 4), 1);
        assert_eq!((r.held_bytes(), r.len()), (0, 0));
    }
}
