#!/usr/bin/env python3
"""The probe of the bounded-memory scenarios (bounded.py's `Probe`), run as
its own process so that the attackers' Python threads (and the GIL) never
delay it: what it measures is the gateway, not the test harness. Standalone
(no import from the package), started by path:

    python3 scripts/stress/probe.py PORT PERIOD_S MAX_S TOPIC

Connects to the gateway on 127.0.0.1:PORT, subscribes to TOPIC and, every
PERIOD_S seconds, publishes a numbered message to TOPIC and waits for it to
come back (a publish round trip to itself). Prints `ready` once subscribed.
Stops on a line `stop` (or EOF) on stdin, or after MAX_S seconds at the
latest, and then prints one JSON object on stdout:

    {"samples": [[t_sent, rtt_s], ...], "failures": [[t, "text"], ...]}

`t_sent` is time.monotonic() (CLOCK_MONOTONIC, shared by every process on
the machine, so the parent can cut the samples to its attack window). A
round trip that takes longer than 5 s, or a connection the gateway closes,
is a failure; the probe then reconnects and carries on. Python 3.11
standard library only. With STRESS_PROBE_CA=cert.pem in the environment it
speaks TLS (a gateway with --tls-cert), trusting that certificate for
localhost.
"""

import json
import os
import select
import socket
import ssl
import sys
import time

mono = time.monotonic
RTT_TIMEOUT = 5.0


class ProbeConn:
    def __init__(self, port, topic):
        # STRESS_PROBE_SOURCE: the loopback address to connect from (an
        # attack from 127.0.0.1 must not be the probe's own address).
        src = os.environ.get("STRESS_PROBE_SOURCE")
        self.s = socket.create_connection(
            ("127.0.0.1", port), timeout=10, source_address=(src, 0) if src else None)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        ca = os.environ.get("STRESS_PROBE_CA")
        if ca:
            self.s = ssl.create_default_context(cafile=ca).wrap_socket(self.s, server_hostname="localhost")
        self.topic = json.dumps(topic).encode()
        self.buf = bytearray()
        token = os.environ.get("STRESS_PROBE_TOKEN")
        if token:
            self.s.sendall(b'{"op":"auth","token":%s,"id":"probe-auth"}\n' % json.dumps(token).encode())
            self.wait(b'"id":"probe-auth"', mono() + 10)
        self.s.sendall(b'{"op":"subscribe","topic":%s,"type":"probe/Seq","id":"probe-sub"}\n' % self.topic)
        self.wait(b'"id":"probe-sub"', mono() + 10)

    def wait(self, needle, deadline):
        """Reads until a line containing needle arrived; drops lines before it."""
        while True:
            i = self.buf.find(needle)
            if i >= 0:
                nl = self.buf.find(b"\n", i)
                if nl >= 0:
                    del self.buf[: nl + 1]
                    return
            left = deadline - mono()
            if left <= 0:
                raise TimeoutError("round trip timed out")
            self.s.settimeout(left)
            try:
                d = self.s.recv(65536)
            except socket.timeout:
                raise TimeoutError("round trip timed out") from None
            if not d:
                raise EOFError("connection closed by the gateway")
            self.buf += d
            if len(self.buf) > 1 << 20:
                del self.buf[: -4096]

    def round_trip(self, i):
        self.s.sendall(b'{"op":"publish","topic":%s,"msg":{"probe":%d}}\n' % (self.topic, i))
        self.wait(b'{"probe":%d}' % i, mono() + RTT_TIMEOUT)

    def close(self):
        try:
            self.s.close()
        except OSError:
            pass


def main():
    port, period, max_s, topic = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
    end = mono() + max_s
    conn = ProbeConn(port, topic)
    print("ready", flush=True)
    samples, failures = [], []
    stdin = sys.stdin.buffer
    next_t = mono()
    i = 0
    while True:
        now = mono()
        if now >= end:
            break
        wait = max(0.0, next_t - now)
        r, _, _ = select.select([stdin], [], [], wait)
        if r:
            line = stdin.readline()
            if not line or line.strip() == b"stop":
                break
            continue
        if mono() < next_t:
            continue
        next_t += period
        if next_t < mono():  # a slow round trip: no catch-up burst
            next_t = mono() + period
        i += 1
        t = mono()
        try:
            if conn is None:
                conn = ProbeConn(port, topic)
            conn.round_trip(i)
            samples.append((t, mono() - t))
        except (OSError, EOFError, TimeoutError) as e:
            failures.append((t, f"{type(e).__name__}: {e}"))
            samples.append((t, mono() - t))
            if conn is not None:
                conn.close()
            conn = None
    if conn is not None:
        conn.close()
    sys.stdout.write(json.dumps({"samples": samples, "failures": failures}) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
