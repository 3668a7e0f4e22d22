"""trickle: a client draining 4 KiB every 5 s while its requests generate statuses."""

import threading
import time

from ..bounded import Bounded, counters, stat
from ..common import Conn, QUICK, mib, mono, readable

DESCRIPTION = "a client draining 4 KiB every 5 s while its requests generate statuses"
BUDGET_SECS = 300
BOUNDED = True


def run(r):
    soft_ms = 3000 if QUICK else 12000
    every = 1.0 if QUICK else 5.0
    soft = 1_000_000
    n_req = 10000  # ~11 MB of error statuses echoing 1000-byte ids: under the budget and --max-control-bytes
    b = Bounded(r, "trickle", ["--control-soft-bytes", str(soft), "--control-soft-ms", str(soft_ms)])
    try:
        t = Conn(b.gw.port, rcvbuf=4096)
        t.request_ack({"op": "subscribe", "topic": "/trickle", "type": "x", "id": "open"})
        b.begin()
        line = b'{"op":"nope","id":"%s"}\n' % (b"q" * 1000)
        sent = {"n": 0, "err": None}

        def sender():
            try:
                for _ in range(n_req // 100):
                    t.s.sendall(line * 100)
                    sent["n"] += 100
            except OSError as e:
                sent["err"] = repr(e)
        ts = mono()
        th = threading.Thread(target=sender, daemon=True)
        th.start()
        drained = 0
        reads = 0
        deadline = ts + soft_ms / 1000 + 3 * every + 10
        next_read = ts + every
        while mono() < deadline:
            time.sleep(max(0.0, next_read - mono()))
            next_read += every
            try:  # select, not a socket timeout: the sender thread shares the socket
                d = t.s.recv(4096) if readable(t.s, 0.5) else None
            except OSError:
                d = b""
            reads += 1
            if d:
                drained += len(d)
            if "closes.slow_consumer" in b.watch.first:
                break
        held = b.sc.get()
        th.join(10)
        b.quiet()
        t.close()
        b.leave()
        st = b.end(conns=4, opened=1)
        pk = b.watch.peak
        # The gateway's close, as its counter first showed it (sampled every
        # 250 ms); the client itself only sees EOF once it has drained what
        # the kernel still holds for it, minutes later at 4 KiB per read.
        closed_at = b.watch.first.get("closes.slow_consumer")
        life = (closed_at - ts) if closed_at else None
        r.fig(f"attack: {sent['n']} requests whose error statuses echo a 1000-byte id (~{mib(sent['n'] * 1060)}), "
              f"read 4 KiB every {every:.0f} s through SO_RCVBUF 4096; drained {drained} B in {reads} reads; "
              + (f"closed by the gateway {life:.1f} s after the requests began (counter sampled every 0.25 s)"
                 if life else f"NOT closed after {mono() - ts:.0f} s (memory_control_bytes "
                 f"{held['memory_control_bytes']})"))
        r.fig(f"peak memory_control_bytes={pk.get('memory_control_bytes')} (soft limit {soft}, "
              f"--control-soft-ms {soft_ms}; before: 55 MiB queued, never closed)")
        r.fig("counters: " + counters(st, ["closes.slow_consumer", "closes.write_stall", "closes.control_overflow",
                                           "closes.memory_pressure", "errors.unknown_op", "memory_control_bytes"]))
        r.check(stat(st, "closes.slow_consumer") == 1 and life is not None and life <= soft_ms / 1000 + 2.0,
                f"the trickle reader was closed as slow_consumer within --control-soft-ms + 2 s "
                f"({life if life else -1:.1f} s <= {soft_ms / 1000 + 2:.0f} s)")
        r.check(stat(st, "closes.write_stall") == 0 and stat(st, "closes.control_overflow") == 0
                and stat(st, "closes.memory_pressure") == 0, "by the soft rule, not by another one")
        r.check(drained > 0 and st["memory_control_bytes"] == 0, "it did trickle; nothing held afterwards")
    finally:
        b.close()
