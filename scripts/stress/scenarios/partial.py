"""partial: unfinished lines of up to 16 MiB on many connections (budget, --partial-timeout-ms)."""

import selectors
import socket

from ..bounded import Bounded, counters, stat
from ..common import HOST, KiB, MiB, QUICK, mib, mono, pct

DESCRIPTION = "unfinished lines of up to 16 MiB on many connections (budget, --partial-timeout-ms)"
BUDGET_SECS = 300
BOUNDED = True


class PartialAttack:
    """Keeps `n` connections each holding an unfinished line of `line`
    bytes (opened first with one complete line, so only the partial-line
    rules apply); a connection the gateway closes is replaced at once, until
    `secs` have passed. Single-threaded, non-blocking."""

    def __init__(self, port, n, sizes, secs):
        self.port, self.n, self.sizes, self.secs = port, n, sizes, secs
        self.chunk = memoryview(b'{"op":"publish","topic":"/partial","msg":"' + b"A" * (1 * MiB))
        self.opened = 0
        self.closed_by_gw = 0
        self.full = 0  # connections that got their whole partial line in
        self.lifetimes = []  # partial line start -> closed by the gateway (s)
        self.max_live = 0

    def _open(self, sel, conns):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        s.connect_ex((HOST, self.port))
        self.opened += 1
        st = {"s": s, "sent": 0, "t_partial": None, "hello": False,
              "line": self.sizes[self.opened % len(self.sizes)]}
        conns[s.fileno()] = st
        sel.register(s, selectors.EVENT_READ | selectors.EVENT_WRITE, st)

    def run(self):
        sel = selectors.DefaultSelector()
        conns = {}
        end = mono() + self.secs
        while mono() < end:
            while len(conns) < self.n:
                self._open(sel, conns)
            self.max_live = max(self.max_live, len(conns))
            for key, ev in sel.select(timeout=0.05):
                st = key.data
                s = st["s"]
                gone = False
                if ev & selectors.EVENT_READ:
                    try:
                        d = s.recv(65536)
                        gone = not d
                    except BlockingIOError:
                        pass
                    except OSError:
                        gone = True
                if not gone and ev & selectors.EVENT_WRITE:
                    try:
                        if not st["hello"]:
                            if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                                gone = True
                            else:
                                s.send(b'{"op":"subscribe","topic":"/partial","type":"x"}\n')
                                st["hello"] = True
                        else:
                            if st["t_partial"] is None:
                                st["t_partial"] = mono()
                            left = st["line"] - st["sent"]
                            k = st["sent"] % MiB
                            piece = self.chunk[k:k + min(left, MiB)] if st["sent"] else self.chunk[:min(left, len(self.chunk))]
                            w = s.send(piece)
                            st["sent"] += w
                            if st["sent"] >= st["line"]:
                                self.full += 1
                                st["t_full"] = mono()
                                sel.modify(s, selectors.EVENT_READ, st)
                    except BlockingIOError:
                        pass
                    except OSError:
                        gone = True
                if gone:
                    self.closed_by_gw += 1
                    if st["t_partial"] is not None:
                        self.lifetimes.append((st["line"], mono() - st["t_partial"], "t_full" in st))
                    sel.unregister(s)
                    s.close()
                    del conns[key.fd]
        for st in conns.values():
            st["s"].close()
        sel.close()
        return self


def run(r):
    n = 12 if QUICK else 32
    # 64 KiB, 1 MiB, 4 MiB and just under --max-line-bytes (16 MiB): never
    # too long, only unfinished. n/4 of each: ~170 MiB wanted at n = 32.
    sizes = [64 * KiB, 1 * MiB, 4 * MiB, 16 * MiB - 4 * KiB]
    secs = 6 if QUICK else 20
    b = Bounded(r, "partial", ["--partial-timeout-ms", "2000"])
    try:
        b.begin()
        atk = PartialAttack(b.gw.port, n, sizes, secs).run()
        b.leave()  # run() closed the attackers
        st = b.end(conns=n + 3, opened=atk.opened)
        life = [t for _, t, _ in atk.lifetimes]
        by = []
        for sz in sizes:
            ts = [t for z, t, _ in atk.lifetimes if z == sz]
            full = sum(1 for z, _, f in atk.lifetimes if z == sz and f)
            by.append(f"{mib(sz)}: {len(ts)} closed ({full} after the whole line was in), "
                      f"lived p50 {pct(ts, 0.5):.2f} s max {max(ts, default=0):.2f} s")
        r.fig(f"attack: {n} connections at a time for {secs} s, each opened with one line then an unfinished "
              f"one; {atk.opened} opened, {atk.closed_by_gw} closed by the gateway and replaced")
        r.fig("partial line start -> close, by size: " + "; ".join(by))
        r.fig("counters: " + counters(st, ["closes.partial_timeout", "closes.memory_pressure", "closes.handshake_timeout",
                                           "memory_input_bytes", "errors.too_long"]))
        r.check(stat(st, "closes.partial_timeout") > 0 and stat(st, "closes.memory_pressure") > 0,
                "closed by both bounds: --partial-timeout-ms (closes.partial_timeout > 0) and the budget "
                "(closes.memory_pressure > 0)")
        r.check(atk.closed_by_gw > 0 and max(life, default=99) <= 2.0 + 1.5,
                f"no partial line lived past 2 s + 1.5 s (longest {max(life, default=0):.2f} s; before: forever)")
        r.check(stat(st, "memory_input_bytes") == 0, "no input held after the attackers left")
    finally:
        b.close()
