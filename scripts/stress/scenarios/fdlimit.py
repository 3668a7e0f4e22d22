"""fdlimit: fd exhaustion: clamped limit, and EMFILE on accept."""

import os
import signal
import subprocess
import time

from ..common import Conn, Gateway, QUICK, check_clean, finish_gateway, mono, stats
from ..load import open_many

DESCRIPTION = "fd exhaustion: clamped limit, and EMFILE on accept"
BUDGET_SECS = 180
BOUNDED = False


def classify(socks):
    """(rejected: got an error status then EOF, silent: nothing yet)"""
    rejected = silent = 0
    for s in socks:
        data = b""
        eof = False
        try:
            while True:
                d = s.recv(4096)
                if not d:
                    eof = True
                    break
                data += d
        except BlockingIOError:
            pass
        except OSError:
            eof = True
        if b"too many connections" in data or eof:
            rejected += 1
        elif not data:
            silent += 1
    return rejected, silent


def cpu_over(gw, secs):
    c0 = gw.cpu()
    time.sleep(secs)
    return gw.cpu() - c0


def run(r):
    extra = 100 if QUICK else 200
    # A: the limit known at start: max connections clamped to 64 - 32
    gw = Gateway("fdlimit-clamped", nofile=64)
    try:
        clamped = "max connections lowered from 10000 to 32" in gw.stderr_text()
        c0 = Conn(gw.port)
        c0.call("/rosgate/stats", {}, "a0")
        socks = open_many(gw.port, extra)
        time.sleep(1.0)
        cpu = cpu_over(gw, 2.0)
        rej, silent = classify(socks)
        st_in = c0.call("/rosgate/stats", {}, "a1")["values"]
        alive = gw.alive()
        for s in socks:
            s.close()
        c0.close()
        t = mono()
        ok_clean, st, text = check_clean(gw.port)
        r.fig(f"A (prlimit --nofile=64:64 at start; clamp logged: {clamped}): {extra} more connections -> "
              f"{silent} held, {rej} rejected with an error status; gateway fds {gw.nfds()}")
        r.fig(f"A: gateway CPU over 2 s while saturated: {cpu * 1000:.0f} ms; counters from a held connection: "
              f"connections_open={st_in['connections_open']} connections_rejected={st_in['connections_rejected']}")
        r.fig(f"A: after clients left, stats answered in {(mono() - t) * 1000:.0f} ms; "
              f"closes.max_connections={st['closes']['max_connections']}; {text}")
        r.check(clamped and alive, "A: gateway up, limit clamped to 32")
        r.check(st_in["connections_open"] == 32 and rej == extra - 31 and silent == 31,
                f"A: 32 served, the {extra - 31} beyond the limit rejected")
        r.check(cpu < 0.25, f"A: no busy loop ({cpu * 1000:.0f} ms CPU in 2 s < 250 ms)")
        r.check(ok_clean, "A: service resumes, no leak")
    finally:
        finish_gateway(r, gw, "A: ")
    # B: the limit lowered under a running gateway: real EMFILE on accept (P10)
    gw = Gateway("fdlimit-emfile")
    try:
        c0 = Conn(gw.port)
        c0.call("/rosgate/stats", {}, "b0")
        fds0 = gw.nfds()
        subprocess.run(["prlimit", f"--pid={gw.pid}", "--nofile=64:64"], check=True)
        socks = open_many(gw.port, extra)
        time.sleep(1.0)
        cpu = cpu_over(gw, 2.0)
        fds1 = gw.nfds()
        st_in = c0.call("/rosgate/stats", {}, "b1")["values"]
        rej, silent = classify(socks)
        os.kill(gw.pid, signal.SIGUSR1)
        time.sleep(0.3)
        logged = "STATS" in gw.stderr_text()
        alive = gw.alive()
        for s in socks:
            s.close()
        t = mono()
        st_back = stats(gw.port, timeout=15)
        t_back = mono() - t
        c0.close()
        ok_clean, st, text = check_clean(gw.port)
        r.fig(f"B (prlimit --pid lowered to 64 while running, {fds0} fds open): {extra} more connections -> "
              f"gateway fds {fds1}, connections_open={st_in['connections_open']}, accept_errors={st_in['accept_errors']}, "
              f"waiting in backlog {silent - (st_in['connections_open'] - 1)}")
        r.fig(f"B: gateway CPU over 2 s while out of fds: {cpu * 1000:.0f} ms; SIGUSR1 counters logged: {logged}")
        r.fig(f"B: after clients left, a new client was served in {t_back * 1000:.0f} ms "
              f"(connections_open={st_back['connections_open']}); {text}")
        r.check(alive and st_in["accept_errors"] > 0, "B: gateway up and counting accept errors")
        r.check(cpu < 0.25, f"B: no busy loop ({cpu * 1000:.0f} ms CPU in 2 s < 250 ms)")
        r.check(t_back < 5.0, "B: service resumes after clients leave")
        r.check(ok_clean, "B: no leak")
    finally:
        finish_gateway(r, gw, "B: ")
