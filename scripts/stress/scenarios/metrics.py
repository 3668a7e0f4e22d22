"""metrics: 64 concurrent /metrics scrapers."""

import socket
import threading
import time

from ..bounded import ATTACK_MIN, Bounded, stall_check
from ..common import Conn, HOST, KiB

DESCRIPTION = "64 concurrent /metrics scrapers"
BUDGET_SECS = 300
BOUNDED = True


def http_get(port, path, timeout=10.0):
    s = socket.create_connection((HOST, port), timeout=timeout)
    try:
        s.sendall(b"GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" % path.encode())
        buf = bytearray()
        while True:
            d = s.recv(256 * KiB)
            if not d:
                return bytes(buf)
            buf += d
    finally:
        s.close()


def run(r):
    scrapers = 64
    b = Bounded(r, "metrics", [])
    try:
        idle = [Conn(b.gw.port, timeout=30) for _ in range(200)]
        stop = threading.Event()
        done, bad = [0], []

        def scrape():
            while not stop.is_set():
                try:
                    body = http_get(b.gw.ws_port, "/metrics")
                    if b"rosgate_connections_open" not in body:
                        bad.append(body[:100])
                    done[0] += 1
                except OSError as e:
                    bad.append(repr(e))
        b.begin()
        ts = [threading.Thread(target=scrape, daemon=True) for _ in range(scrapers)]
        for t in ts:
            t.start()
        time.sleep(ATTACK_MIN)
        stop.set()
        for t in ts:
            t.join(30)
        b.quiet()
        for c in idle:
            c.close()
        b.leave()
        b.end(conns=scrapers + 206, opened=scrapers + 200)
        r.fig(f"attack: {scrapers} concurrent /metrics scrapers for {ATTACK_MIN:.0f} s beside 200 idle clients: "
              f"{done[0]} scrapes, {len(bad)} bad {bad[:2]}")
        r.check(not bad and done[0] > 0, "every scrape answered with the exposition")
        stall_check(r, b)
    finally:
        b.close()
