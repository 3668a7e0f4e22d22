//! Socket buffers: [`RxBuf`] (read side, frames parsed in place) and
//! [`TxBuf`] (write side, partial writes resumed), plus non-blocking connect
//! completion.
//!
//! Readiness is edge-triggered in mio, so the owner keeps a sticky
//! `readable`/`writable` flag per socket and clears it only on
//! `WouldBlock`; these helpers report `WouldBlock` back instead of hiding it.

use std::io::{self, ErrorKind, Read, Write};

use mio::net::TcpStream;

/// Bytes asked of the kernel per `read`: large enough that a busy subscriber
/// costs few syscalls, small enough to stay in L2.
const READ_CHUNK: usize = 256 * 1024;

/// Received bytes not yet decoded: `buf[start..end]`.
#[derive(Debug, Default)]
pub struct RxBuf {
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

/// What one `read` call produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Filled {
    Bytes(usize),
    Eof,
    WouldBlock,
}

impl RxBuf {
    /// The bytes received and not yet consumed.
    pub fn unread(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    /// Marks `n` bytes of [`RxBuf::unread`] as used.
    pub fn consume(&mut self, n: usize) {
        self.start = (self.start + n).min(self.end);
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }

    /// Moves the last `n` unread bytes (those of the latest read) out to
    /// `into` (replacing its contents), for a framed transport to unframe.
    pub fn take_tail(&mut self, n: usize, into: &mut Vec<u8>) {
        let n = n.min(self.end - self.start);
        into.clear();
        into.extend_from_slice(&self.buf[self.end - n..self.end]);
        self.end -= n;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }

    /// Appends `bytes` to the unread bytes, growing the buffer as needed.
    pub fn push(&mut self, bytes: &[u8]) {
        if self.buf.len() - self.end < bytes.len() {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            if self.buf.len() - self.end < bytes.len() {
                self.buf.resize(self.end + bytes.len(), 0);
            }
        }
        self.buf[self.end..self.end + bytes.len()].copy_from_slice(bytes);
        self.end += bytes.len();
    }

    /// One `read` into the free space, making room first: the unread tail
    /// moves to the front, and the buffer grows when a frame longer than it
    /// is being assembled (large-message scenario).
    pub fn fill(&mut self, stream: &mut TcpStream) -> io::Result<Filled> {
        if self.buf.len() - self.end < READ_CHUNK {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            if self.buf.len() - self.end < READ_CHUNK {
                let want = (self.end + READ_CHUNK).max(self.buf.len() * 2);
                self.buf.resize(want, 0);
            }
        }
        loop {
            match stream.read(&mut self.buf[self.end..]) {
                Ok(0) => return Ok(Filled::Eof),
                Ok(n) => {
                    self.end += n;
                    return Ok(Filled::Bytes(n));
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(Filled::WouldBlock),
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

/// Encoded requests waiting for the socket: `buf[sent..]`.
#[derive(Debug, Default)]
pub struct TxBuf {
    buf: Vec<u8>,
    sent: usize,
}

impl TxBuf {
    /// Where new requests are appended.
    pub fn buf(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    pub fn pending(&self) -> usize {
        self.buf.len() - self.sent
    }

    /// Writes until empty (`Ok(true)`) or `WouldBlock` (`Ok(false)`).
    pub fn flush(&mut self, stream: &mut TcpStream) -> io::Result<bool> {
        while self.sent < self.buf.len() {
            match stream.write(&self.buf[self.sent..]) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(n) => self.sent += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    self.compact();
                    return Ok(false);
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.buf.clear();
        self.sent = 0;
        Ok(true)
    }

    /// Drops the written prefix once it dominates, so appending never grows
    /// the buffer without bound while the socket is slow.
    fn compact(&mut self) {
        if self.sent > 0 && self.sent >= self.buf.len() / 2 {
            self.buf.drain(..self.sent);
            self.sent = 0;
        }
    }
}

/// State of a non-blocking connect after a writable event: `Ok(true)` when
/// established, `Ok(false)` while still in progress, `Err` when it failed.
pub fn connect_done(stream: &TcpStream) -> io::Result<bool> {
    if let Some(e) = stream.take_error()? {
        return Err(e);
    }
    match stream.peer_addr() {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == ErrorKind::NotConnected => Ok(false),
        Err(e) => Err(e),
    }
}
