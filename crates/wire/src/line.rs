//! `LineReader`: resumable newline framing with a length limit.
//!
//! Owns the bytes of at most one incomplete line per connection.
//! Invariants:
//! - every input byte is scanned for `\n` once: a long line arriving in small
//!   pieces costs O(n), not O(n^2) (the pending buffer never holds a `\n`);
//! - the pending buffer never exceeds `max` bytes: a line that grows past
//!   `max` is reported as [`Frame::TooLong`] at once, before its newline
//!   arrives, and its remaining bytes are skipped through the next `\n`;
//! - complete lines found in the input are handed out straight from the input
//!   slice, so a connection whose reads end on line boundaries never copies;
//! - `\r\n` is treated as `\n`, and empty lines are skipped (P2);
//! - an idle reader keeps at most [`KEEP_CAPACITY`] bytes allocated once
//!   [`LineReader::trim`] ran (the hub's sweep calls it), and an over-long
//!   line never leaves its buffer behind.

/// Bytes of pending-line capacity kept between lines; larger buffers (left by
/// a big message) are released so idle connections stay small (Redis does the
/// same with its query buffer).
pub const KEEP_CAPACITY: usize = 16 * 1024;

/// One framing event, in input order.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// A complete, non-empty line without its terminator.
    Line(&'a [u8]),
    /// A line exceeded the limit; its bytes up to the next `\n` are skipped.
    TooLong,
}

/// Resumable line splitter. See the module docs for its invariants.
#[derive(Debug, Default)]
pub struct LineReader {
    pending: Vec<u8>,
    discarding: bool,
}

impl LineReader {
    pub fn new() -> Self {
        Self::default()
    }

    /// Bytes of an incomplete line held right now.
    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// Bytes allocated for the pending line.
    pub fn capacity(&self) -> usize {
        self.pending.capacity()
    }

    /// True while the rest of an over-long line is being skipped.
    pub fn is_discarding(&self) -> bool {
        self.discarding
    }

    /// Splits `input` (the next bytes of the stream) into frames, calling
    /// `on_frame` for each in order. `max` is the longest accepted line,
    /// terminator excluded.
    pub fn feed(&mut self, mut input: &[u8], max: usize, mut on_frame: impl FnMut(Frame<'_>)) {
        if self.discarding {
            match memchr::memchr(b'\n', input) {
                None => return,
                Some(i) => {
                    self.discarding = false;
                    input = &input[i + 1..];
                }
            }
        }
        if !self.pending.is_empty() {
            match memchr::memchr(b'\n', input) {
                None => {
                    if self.pending.len() + input.len() > max {
                        self.start_discarding();
                        on_frame(Frame::TooLong);
                    } else {
                        self.pending.extend_from_slice(input);
                    }
                    return;
                }
                Some(i) => {
                    if self.pending.len() + i > max {
                        self.release();
                        on_frame(Frame::TooLong);
                    } else {
                        self.pending.extend_from_slice(&input[..i]);
                        emit(&self.pending, &mut on_frame);
                        // Keep the capacity: the next big line reuses it
                        // instead of faulting in fresh pages; `trim` frees
                        // it once the connection is idle.
                        self.pending.clear();
                    }
                    input = &input[i + 1..];
                }
            }
        }
        loop {
            match memchr::memchr(b'\n', input) {
                Some(i) => {
                    if i > max {
                        on_frame(Frame::TooLong);
                    } else {
                        emit(&input[..i], &mut on_frame);
                    }
                    input = &input[i + 1..];
                }
                None => {
                    if input.len() > max {
                        self.start_discarding();
                        on_frame(Frame::TooLong);
                    } else {
                        self.pending.extend_from_slice(input);
                    }
                    return;
                }
            }
        }
    }

    fn start_discarding(&mut self) {
        self.release();
        self.discarding = true;
    }

    /// Empties the pending buffer, freeing it if a big line inflated it.
    fn release(&mut self) {
        self.pending.clear();
        self.trim();
    }

    /// Frees a pending buffer over [`KEEP_CAPACITY`] that holds no partial
    /// line. Called by the hub's periodic sweep, so a connection streaming
    /// big messages keeps its buffer while an idle one gives it back.
    pub fn trim(&mut self) {
        if self.pending.is_empty() && self.pending.capacity() > KEEP_CAPACITY {
            self.pending = Vec::new();
        }
    }
}

fn emit(line: &[u8], on_frame: &mut impl FnMut(Frame<'_>)) {
    let line = match line.last() {
        Some(b'\r') => &line[..line.len() - 1],
        _ => line,
    };
    if !line.is_empty() {
        on_frame(Frame::Line(line));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(chunks: &[&[u8]], max: usize) -> Vec<Option<Vec<u8>>> {
        let mut r = LineReader::new();
        let mut out = Vec::new();
        for c in chunks {
            r.feed(c, max, |f| {
                out.push(match f {
                    Frame::Line(l) => Some(l.to_vec()),
                    Frame::TooLong => None,
                })
            });
        }
        out
    }

    fn all_splits(input: &[u8], max: usize) -> Vec<Option<Vec<u8>>> {
        let whole = collect(&[input], max);
        let bytes: Vec<&[u8]> = input.chunks(1).collect();
        assert_eq!(collect(&bytes, max), whole, "byte by byte");
        for cut in 0..=input.len() {
            let (a, b) = input.split_at(cut);
            assert_eq!(collect(&[a, b], max), whole, "split at {cut}");
        }
        whole
    }

    #[test]
    fn splits_lines_and_skips_empty_and_cr() {
        let out = all_splits(b"a\n\r\n\nbc\r\nd", 100);
        assert_eq!(out, vec![Some(b"a".to_vec()), Some(b"bc".to_vec())]);
    }

    #[test]
    fn too_long_is_reported_once_and_the_rest_skipped() {
        let out = all_splits(b"ok\n0123456789abc\nnext\n", 10);
        assert_eq!(
            out,
            vec![Some(b"ok".to_vec()), None, Some(b"next".to_vec())]
        );
    }

    #[test]
    fn exactly_max_is_accepted() {
        let out = all_splits(b"0123456789\n01234567890\n", 10);
        assert_eq!(out, vec![Some(b"0123456789".to_vec()), None]);
    }

    #[test]
    fn too_long_fires_before_the_newline() {
        let mut r = LineReader::new();
        let mut n = 0;
        r.feed(&[b'x'; 8], 10, |_| n += 1);
        assert_eq!(n, 0);
        r.feed(&[b'x'; 8], 10, |f| {
            assert_eq!(f, Frame::TooLong);
            n += 1
        });
        assert_eq!(n, 1);
        assert!(r.is_discarding());
        assert_eq!(r.pending_len(), 0);
        r.feed(&[b'x'; 1000], 10, |_| n += 1);
        assert_eq!(n, 1, "no second error for the same line");
        r.feed(b"\nok\n", 10, |f| {
            assert_eq!(f, Frame::Line(b"ok"));
            n += 1
        });
        assert_eq!(n, 2);
    }

    #[test]
    fn big_buffers_are_kept_until_trimmed() {
        let mut r = LineReader::new();
        let big = vec![b'x'; 100_000];
        r.feed(&big, 1 << 20, |_| {});
        assert!(r.capacity() >= 100_000);
        r.trim();
        assert!(r.capacity() >= 100_000, "a partial line is never dropped");
        r.feed(b"\n", 1 << 20, |_| {});
        assert!(r.capacity() >= 100_000, "kept for the next big line");
        r.trim();
        assert_eq!(r.capacity(), 0);
    }

    #[test]
    fn too_long_lines_free_their_buffer_at_once() {
        let mut r = LineReader::new();
        r.feed(&vec![b'x'; 100_000], 150_000, |_| {});
        r.feed(&vec![b'x'; 100_000], 150_000, |_| {});
        assert_eq!(r.capacity(), 0);
    }
}
