"""idleflood: 10 000 idle TCP connections, then 10 000 WebSocket upgrades
trickled a byte at a time."""

import errno
import selectors
import socket
import threading
import time

from ..bounded import Bounded, NewcomerLoop, counters, stat
from ..common import HOST, QUICK, mono, raise_nofile
from ..ws import ws_key, ws_request

DESCRIPTION = "10 000 idle TCP connections, then 10 000 WebSocket upgrades trickled a byte at a time"
BUDGET_SECS = 400
BOUNDED = True


class PrefixReport:
    """A Report whose figures and checks carry a prefix (two phases, one scenario)."""

    def __init__(self, r, prefix):
        self.r, self.prefix = r, prefix

    def fig(self, text):
        self.r.fig(self.prefix + text)

    def check(self, ok, text):
        return self.r.check(ok, self.prefix + text)


class IdleHolder(threading.Thread):
    """Keeps `n` connections open to `port` that never complete their
    opening: silent (trickle=None) or sending one byte of a WebSocket upgrade
    request per connection every `trickle` seconds. Once all `n` are open,
    every connection the gateway closes is replaced, at most `reopen_rate`
    per second (an attacker reconnecting flat out at the limit would only
    evict its own connections, and none would live to the opening
    deadline), until stopped."""

    def __init__(self, port, n, trickle=None, reopen_rate=500):
        super().__init__(daemon=True)
        self.port, self.n, self.trickle, self.reopen_rate = port, n, trickle, reopen_rate
        self.stop_evt = threading.Event()
        self.opened = 0
        self.closed_by_gw = 0
        self.live = 0
        self.connect_errors = 0
        self.bytes_sent = 0
        self.ready = threading.Event()
        self.request = ws_request(ws_key())

    def _open(self, sel, conns):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        err = s.connect_ex((HOST, self.port))
        if err not in (0, errno.EINPROGRESS):
            self.connect_errors += 1
            s.close()
            return False
        conns[s.fileno()] = [s, 0]
        sel.register(s, selectors.EVENT_READ)
        self.opened += 1
        return True

    def run(self):
        sel = selectors.DefaultSelector()
        conns = {}
        next_trickle = mono() + (self.trickle or 0)
        allowance, t_last = 0.0, mono()
        while not self.stop_evt.is_set():
            now = mono()
            if self.ready.is_set():
                allowance = min(self.reopen_rate * 0.1, allowance + (now - t_last) * self.reopen_rate)
            t_last = now
            k = 0
            while len(conns) < self.n and k < 512 and (not self.ready.is_set() or allowance >= 1):
                if not self._open(sel, conns):
                    break
                k += 1
                if self.ready.is_set():
                    allowance -= 1
            self.live = len(conns)
            if len(conns) >= self.n:
                self.ready.set()
            for key, _ in sel.select(timeout=0.02):
                s = key.fileobj
                try:
                    d = s.recv(4096)
                    gone = not d
                except BlockingIOError:
                    gone = False
                except OSError:
                    gone = True
                if gone:
                    self.closed_by_gw += 1
                    sel.unregister(s)
                    del conns[key.fd]
                    s.close()
            if self.trickle and mono() >= next_trickle:
                next_trickle += self.trickle
                req = self.request
                for fd, st in list(conns.items()):
                    if st[1] >= len(req):
                        continue
                    try:
                        st[0].send(req[st[1]:st[1] + 1])
                        st[1] += 1
                        self.bytes_sent += 1
                    except (BlockingIOError, OSError):
                        pass  # not connected yet, or closed: the read side sees that
        for st in conns.values():
            st[0].close()
        sel.close()

    def stop(self):
        self.stop_evt.set()
        self.join(60)
        return self


def run(r):
    n = 2000 if QUICK else 10_000
    secs = 8.0 if QUICK else 25.0
    hs = ["--handshake-timeout-ms", "3000"] if QUICK else []  # full size: the default 10 s
    limit = raise_nofile(n + 600)
    if limit < n + 300:
        r.check(False, f"client fd limit {limit} < {n + 300}: raise `ulimit -n` (stress.sh does)")
        return
    for tag, trickle, what in (("A: ", None, f"{n} idle TCP connections"),
                               ("B: ", 1.0, f"{n} WebSocket upgrade requests trickled one byte per second")):
        pr = PrefixReport(r, tag)
        # --max-connections n: the attacker alone fills it, so every newcomer
        # must be admitted by evicting the oldest connection not yet opened.
        b = Bounded(pr, "idleflood-" + ("tcp" if trickle is None else "ws"), ["--max-connections", str(n), *hs])
        try:
            clamped = "max connections lowered" in b.gw.stderr_text()
            port = b.gw.port if trickle is None else b.gw.ws_port
            h = IdleHolder(port, n, trickle)
            b.begin(newcomers=False)
            h.start()
            h.ready.wait(60)
            t_full = mono() - b.t0
            b.nc = NewcomerLoop(b.gw)
            b.nc.start()
            time.sleep(max(0.0, secs - (mono() - b.t0)))
            st_in = b.sc.get()
            b.quiet()
            h.stop()
            b.leave()
            st = b.end(conns=n + 5, opened=n)
            pr.fig(f"attack: {what} for {secs:.0f} s, --max-connections {n} (clamped: {clamped}), "
                   f"handshake timeout {hs[1] if hs else '10000 (default)'} ms; the attacker had all {n} open "
                   f"after {t_full:.1f} s: {h.opened} opened, {h.closed_by_gw} closed by the "
                   f"gateway and replaced (at most {h.reopen_rate}/s), {h.connect_errors} connect errors, "
                   f"{h.bytes_sent} bytes trickled")
            pr.fig(f"during: connections_open={st_in['connections_open']} connections_pending="
                   f"{st_in['connections_pending']}; " + counters(st, ["closes.evicted", "closes.handshake_timeout",
                                                                       "connections_rejected", "closes.max_connections",
                                                                       "accept_errors"]))
            pr.check(stat(st, "closes.evicted") > 0 and stat(st, "closes.handshake_timeout") > 0,
                     "unopened connections evicted for newcomers and closed at the opening deadline "
                     "(closes.evicted, closes.handshake_timeout > 0; before: newcomers locked out)")
            pr.check(stat(st, "connections_rejected") == 0, "no newcomer refused while unopened connections existed")
        finally:
            b.close(tag)
