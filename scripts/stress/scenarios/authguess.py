"""authguess: 32 token guessers on one address, without and with the budget of wrong tokens."""

import json
import os
import socket
import subprocess
import threading
import time

from ..bounded import PROBE_MAX, PROBE_P99, Probe, stat
from ..common import Gateway, HOST, QUICK, attacker_priority, finish_gateway, jline, mono, ms, pct

DESCRIPTION = "32 token guessers on one address, without and with the budget of wrong tokens"
BUDGET_SECS = 200
BOUNDED = False


AUTHGUESS_TOKEN = "stress-admin-token-0123456789abcdef"


def authed_stats(port, source):
    """The counters through a connection from `source` that authenticates
    with AUTHGUESS_TOKEN; also how long the token took to be admitted."""
    s = socket.create_connection((HOST, port), timeout=10, source_address=(source, 0))
    try:
        t = mono()
        s.sendall(jline({"op": "auth", "token": AUTHGUESS_TOKEN, "id": "a"}))
        f = s.makefile("rb")
        line = f.readline()
        admitted = mono() - t
        if b"authenticated as role" not in line:
            raise RuntimeError(f"not admitted: {line[:200]!r}")
        s.sendall(jline({"op": "call_service", "service": "/rosgate/stats", "id": "st", "args": {}}))
        while True:
            line = f.readline()
            if not line:
                raise EOFError("stats connection closed")
            v = json.loads(line)
            if v.get("op") == "service_response" and v.get("id") == "st":
                return v["values"], admitted
    finally:
        s.close()


def guess_tokens(port, secs, threads):
    """`threads` guessers on 127.0.0.1 present wrong tokens for `secs`, one
    connection each (auth, read to EOF). Returns (attempts, answered within
    100 ms, slowest answer)."""
    stop = mono() + secs
    out = {"n": 0, "fast": 0, "slow": 0.0}
    lock = threading.Lock()

    def run(i):
        line = jline({"op": "auth", "token": f"wrong-token-{i:04d}-0000000000", "id": "g"})
        while mono() < stop:
            try:
                s = socket.create_connection((HOST, port), timeout=15, source_address=("127.0.0.1", 0))
            except OSError:
                time.sleep(0.01)
                continue
            try:
                t = mono()
                s.sendall(line)
                while s.recv(4096):
                    pass
                took = mono() - t
            except OSError:
                took = None
            finally:
                s.close()
            with lock:
                out["n"] += 1
                if took is not None and took < 0.1:
                    out["fast"] += 1
                if took is not None:
                    out["slow"] = max(out["slow"], took)

    ts = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return out["n"], out["fast"], out["slow"]


def run(r):
    """Token guessing from one address (127.0.0.1), beside a probe that
    authenticated from 127.0.0.2: first against a gateway whose budget of
    wrong tokens is out of reach (every guess is checked: the rate a guesser
    gets without the budget), then with the default budget (10 a minute per
    address, then each attempt held 250 ms doubling to 8 s, unchecked). The
    tokens checked are closes.auth_failed minus auth_held."""
    import tempfile
    secs = 5 if QUICK else 20
    threads = 32
    d = tempfile.mkdtemp(prefix="rosgate-stress-auth-")
    tokens = os.path.join(d, "tokens.txt")
    with open(tokens, "w") as f:
        f.write(f"admin {AUTHGUESS_TOKEN}\n")
    try:
        for label, extra in (("budget out of reach", ["--auth-failure-budget", "1000000000"]),
                             ("default budget", [])):
            gw = Gateway(f"authguess-{label.split()[0]}", ["--auth-tokens", tokens, *extra])
            probe = Probe(gw.port, "/probe-authguess", token=AUTHGUESS_TOKEN, source="127.0.0.2")
            attacker_priority(True)
            try:
                time.sleep(0.3)
                t0 = mono()
                n, fast, slow = guess_tokens(gw.port, secs, threads)
                t1 = mono()
                time.sleep(0.3)
                probe.stop()
                attacker_priority(False)
                st, admitted = authed_stats(gw.port, "127.0.0.2")
                rtts, fails = probe.window(t0, t1)
                p50, p99, mx = pct(rtts, 0.5), pct(rtts, 0.99), max(rtts, default=0.0)
                held = stat(st, "auth_held")
                checked = stat(st, "closes.auth_failed") - held
                r.fig(f"{label}: {threads} guessers on 127.0.0.1 for {t1 - t0:.1f} s: {n} attempts "
                      f"({n / (t1 - t0):.0f}/s), {fast} answered within 100 ms, slowest {ms(slow)}; "
                      f"tokens checked {checked} ({checked / (t1 - t0):.1f}/s), held {held}")
                r.fig(f"{label}: probe (127.0.0.2, authenticated): {len(rtts)} round trips, p50 {ms(p50)} "
                      f"p99 {ms(p99)} max {ms(mx)}, failures {len(fails)} {fails[:2]}; a right token from "
                      f"127.0.0.2 afterwards admitted in {ms(admitted)}")
                r.check(admitted < 0.1, f"{label}: a right token from another address admitted at once")
                if not extra:
                    # The first phase only shows what a guesser gets without
                    # the budget (its probe figures are for comparison).
                    r.check(not fails and rtts and p99 < PROBE_P99 and mx < PROBE_MAX,
                            f"{label}: probe p99 {ms(p99)} < 10 ms and max {ms(mx)} < 100 ms, no failure")
                    r.check(checked <= 10, f"{label}: at most 10 tokens checked from the guessing address "
                            f"(checked {checked})")
            finally:
                attacker_priority(False)
                if probe.proc.poll() is None:
                    probe.stop()
                finish_gateway(r, gw)
    finally:
        subprocess.run(["rm", "-rf", d])
