"""Helpers the Python client suites share (imported by path: each suite
runs in its own virtualenv).

- ``free_zenoh_port()``: a loopback port for a Zenoh listener named up
  front, taken below Linux's ephemeral range (32768 and up) from a
  per-process sequence offset by the pid, as the Rust tests'
  ``free_zenoh_port`` does: a port found free there and released is not
  handed to the sockets that bind port 0 meanwhile (Zenoh's own among
  them), which is how "bind 0, release, reuse" can lose its port.
- ``until(pred, what, timeout, every)``: polls ``pred`` until it holds, or
  fails naming ``what`` after ``timeout`` seconds (a bound, not a sleep).
"""

import itertools
import os
import socket
import time

_next = itertools.count()


def free_zenoh_port():
    base = 20000 + os.getpid() % 500 * 20
    for _ in range(10000):
        port = base + next(_next) % 12000
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free loopback port in 20000-32767")


def until(pred, what, timeout, every=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(every)
    raise AssertionError("never %s within %.0f s" % (what, timeout))
