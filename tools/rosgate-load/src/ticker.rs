//! [`Ticker`]: a periodic timerfd that wakes an open-loop sender's poll
//! loop. Poll timeouts have millisecond resolution, and an open-loop
//! schedule (the `latency` and `images` scenarios) needs its sends on time:
//! the timer's slack is set to 1 ns for the process, because the default
//! 50 us would be a floor under every latency.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// Periodic timerfd that wakes the loop for open-loop sends.
#[derive(Debug)]
pub struct Ticker {
    fd: OwnedFd,
}

impl Ticker {
    /// The descriptor to register with the poll (readable on expiry).
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    pub fn new(period: Duration) -> io::Result<Ticker> {
        // SAFETY: plain syscall; the result is checked before use.
        let raw = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh descriptor we now own exclusively.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let ts = libc::timespec {
            tv_sec: period.as_secs() as libc::time_t,
            tv_nsec: period.subsec_nanos().max(1) as libc::c_long,
        };
        let spec = libc::itimerspec {
            it_interval: ts,
            it_value: ts,
        };
        // SAFETY: valid fd and pointer; old value not requested.
        if unsafe { libc::timerfd_settime(fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) } < 0 {
            return Err(io::Error::last_os_error());
        }
        // The default 50 us slack would be a floor under every latency.
        // SAFETY: prctl with integer arguments only.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
        Ok(Ticker { fd })
    }

    /// Consumes expirations so the next one raises a new edge.
    pub fn drain(&self) {
        let mut n = [0u8; 8];
        // SAFETY: reads at most 8 bytes into a local buffer; errors (EAGAIN)
        // mean nothing was pending.
        let _ = unsafe { libc::read(self.fd.as_raw_fd(), n.as_mut_ptr().cast(), n.len()) };
    }
}
