"""statsburst: 1000 /rosgate/stats calls in bursts with 1M topics registered."""

import json
import time

from ..bounded import ATTACK_MIN, Bounded
from ..common import Conn, QUICK, answered, mib, mono, ms

DESCRIPTION = "1000 /rosgate/stats calls in bursts with 1M topics registered"
BUDGET_SECS = 600
BOUNDED = True


def run(r):
    topics = 100_000 if QUICK else 1_000_000
    per = 10_000  # --max-subscriptions-per-conn
    holders_n = topics // per
    callers_n, calls_each = 10, 100
    # 1M topics cost ~0.3 GB of registrations in the ledger: far beyond the
    # 64 MB budget, so this scenario runs with 1 GB (printed).
    budget = 1_000_000_000
    b = Bounded(r, "statsburst", [], budget=budget)
    try:
        t_setup = mono()
        holders = []
        for h in range(holders_n):
            c = Conn(b.gw.port, timeout=60)
            blob = b"".join(b'{"op":"subscribe","topic":"/sb/%d/%d","type":"x"}\n' % (h, k) for k in range(per))
            c.send(blob)
            holders.append(c)
            got = 0
            while got < per:
                ln = c.readline(60)
                if ln is None:
                    raise RuntimeError("holder closed during set-up")
                if b'"level":"error"' in ln:
                    raise RuntimeError(f"subscribe refused: {ln[:200]!r}")
                got += 1
        t_setup = mono() - t_setup
        st_set = b.sc.get()
        rss_set = b.gw.rss()
        callers = [Conn(b.gw.port, timeout=60) for _ in range(callers_n)]
        for c in callers:
            c.request_ack({"op": "subscribe", "topic": "/sb/caller", "type": "x", "id": "open"})
        b.begin()
        time.sleep(1.0)
        burst_times, worst_call, answered, topics_seen = [], 0.0, 0, set()
        cpu0 = b.gw.cpu_ns()
        k = 0
        while k == 0 or mono() - b.t0 < ATTACK_MIN:
            k += 1
            t0 = mono()
            for i, c in enumerate(callers):
                c.send(b"".join(b'{"op":"call_service","service":"/rosgate/stats","id":"b%d-%d-%d","args":{}}\n'
                                % (k, i, j) for j in range(calls_each)))
            for c in callers:
                got = 0
                while got < calls_each:
                    ln = c.readline(60)
                    if ln is None:
                        raise RuntimeError("caller closed")
                    o = json.loads(ln)
                    if o.get("op") == "service_response" and o.get("result") is True:
                        got += 1
                        answered += 1
                        topics_seen.add(o["values"]["topics"])
                        worst_call = max(worst_call, mono() - t0)
            burst_times.append(mono() - t0)
            time.sleep(1.0)
        cpu = (b.gw.cpu_ns() - cpu0) / 1e9
        bursts = k
        b.quiet()
        for c in callers + holders:
            c.close()
        b.leave()
        st = b.end(conns=holders_n + callers_n + 5, opened=holders_n + callers_n)
        r.fig(f"set-up (before the attack window): {holders_n} connections x {per} subscriptions = "
              f"{st_set['topics'] - st0_topics(b)} topics in {t_setup:.1f} s; memory_registrations_bytes="
              f"{st_set['memory_registrations_bytes']}, RSS {mib(rss_set)}")
        r.fig(f"attack: {bursts} bursts of {callers_n * calls_each} /rosgate/stats calls ({callers_n} connections "
              f"x {calls_each} pipelined), 1 s apart: each burst answered in "
              + ", ".join(ms(x) for x in burst_times)
              + f"; slowest answer {ms(worst_call)}; gateway CPU {cpu * 1e6 / max(1, answered):.1f} us per call "
                f"(before: 4.3 s stalls)")
        r.check(answered == bursts * callers_n * calls_each and topics_seen and min(topics_seen) >= topics,
                f"every stats call answered, each reporting >= {topics} topics ({sorted(topics_seen)[:3]})")
        r.check(max(burst_times) < 1.0, f"each burst of 1000 answered within 1 s (slowest {ms(max(burst_times))})")
    finally:
        b.close()


def st0_topics(b):
    return b.st0.get("topics", 0)
