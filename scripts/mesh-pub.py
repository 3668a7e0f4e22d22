#!/usr/bin/env python3
"""Open-loop String publisher for scripts/federation-mesh.sh (stdlib only).

Publishes std_msgs/msg/String on a rosgate gateway's TCP port (JSON lines)
in the layout `rosgate-load --scenario strings --publisher none` checks:
data is "<send ns> <seq> " then x padding to --size bytes
(tools/rosgate-load/src/text.rs). Message k is due at start + k/rate and
stamped with that intended wall-clock time (time.time_ns(), CLOCK_REALTIME),
so a stall shows in the latency of every message it delayed (no
coordinated omission); due messages are sent in one write per tick.

Usage: mesh-pub.py --addr 127.0.0.1:9095 --topic /mesh --rate 1000
                   --duration 10 [--size 64] [--lead 0]
--lead SECS: advertise, then wait this long before the first publish (for
the federation to carry the advertisement). Prints one line: sent=N.
"""

import argparse
import json
import socket
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--addr", default="127.0.0.1:9095")
    ap.add_argument("--topic", default="/mesh")
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--lead", type=float, default=0.0)
    a = ap.parse_args()
    host, port = a.addr.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=5)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    adv = {"op": "advertise", "topic": a.topic, "type": "std_msgs/msg/String"}
    s.sendall((json.dumps(adv) + "\n").encode())
    s.setblocking(False)

    def drain() -> None:
        # The gateway may send statuses; read them so its queue never fills.
        try:
            while s.recv(65536):
                pass
        except (BlockingIOError, InterruptedError):
            pass

    end_lead = time.monotonic() + a.lead
    while time.monotonic() < end_lead:
        drain()
        time.sleep(0.01)
    head = '{"op":"publish","topic":"%s","msg":{"data":"' % a.topic
    tail = '"}}\n'
    start_ns = time.time_ns()
    period_ns = int(1e9 / a.rate)
    total = int(a.rate * a.duration)
    seq = 0
    pending = b""
    while seq < total or pending:
        now = time.time_ns()
        due = min(total, (now - start_ns) // period_ns + 1)
        if due > seq:
            parts = []
            while seq < due:
                body = "%d %d " % (start_ns + seq * period_ns, seq)
                parts.append(head + body + "x" * max(0, a.size - len(body)) + tail)
                seq += 1
            pending += "".join(parts).encode()
        if pending:
            try:
                n = s.send(pending)
                pending = pending[n:]
            except (BlockingIOError, InterruptedError):
                pass
        drain()
        if not pending:
            time.sleep(0.0005)
    time.sleep(0.2)
    s.close()
    print("sent=%d" % seq)
    return 0


if __name__ == "__main__":
    sys.exit(main())
