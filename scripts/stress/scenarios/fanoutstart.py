"""fanoutstart: 10 publishers start streaming to 10 000 subscribers that never read."""

import threading
import time

from ..bounded import Bounded, PROBE_MAX, close_all, counters, mass_connect
from ..common import Conn, KiB, QUICK, mono, ms, raise_nofile

DESCRIPTION = "10 publishers start streaming to 10 000 subscribers that never read"
BUDGET_SECS = 600
BOUNDED = True


def run(r):
    n = 1000 if QUICK else 10_000
    pubs_n = 10
    rate = 10  # messages per second per publisher: a 10 Hz state stream
    size = 1 * KiB
    secs = 5.0 if QUICK else 15.0
    limit = raise_nofile(n + 600)
    if limit < n + 300:
        r.check(False, f"client fd limit {limit} < {n + 300}: raise `ulimit -n` (stress.sh does)")
        return
    b = Bounded(r, "fanoutstart", ["--max-connections", str(n + 200)])
    try:
        hello = b"".join(b'{"op":"subscribe","topic":"/fan/%d","type":"x"}\n' % k for k in range(pubs_n))
        t_set = mono()
        subs, failed = mass_connect(b.gw.port, n, rcvbuf=4096, hello=lambda i: hello, expect=pubs_n, timeout=300)
        t_set = mono() - t_set
        pubs = []
        for k in range(pubs_n):
            p = Conn(b.gw.port, timeout=60)
            p.request_ack({"op": "advertise", "topic": f"/fan/{k}", "type": "x", "id": "a"})
            pubs.append(p)
        st_set = b.sc.get()
        b.begin()
        time.sleep(1.0)  # a quiet second first: the start is what is measured
        t_start = mono()
        stop = threading.Event()
        sent = [0] * pubs_n
        worst_send = [0.0] * pubs_n

        def stream(k):
            p = pubs[k]
            pad = b"f" * (size - 60)
            i = 0
            t0 = mono()
            while not stop.is_set():
                due = t0 + i / rate
                if due > mono():
                    stop.wait(due - mono())
                    continue
                t = mono()
                try:
                    p.s.sendall(b'{"op":"publish","topic":"/fan/%d","msg":{"seq":%d,"pad":"%s"}}\n' % (k, i, pad))
                except OSError:
                    return
                worst_send[k] = max(worst_send[k], mono() - t)
                i += 1
                sent[k] = i
        ths = [threading.Thread(target=stream, args=(k,), daemon=True) for k in range(pubs_n)]
        for t in ths:
            t.start()
        stop.wait(secs)
        stop.set()
        for t in ths:
            t.join(30)
        st_in = b.sc.get()
        b.quiet()
        close_all(subs)
        for p in pubs:
            p.close()
        b.leave()
        st = b.end(conns=n + pubs_n + 5, opened=n + pubs_n)
        # the probe's worst round trip after the start, separately
        after = [x for t, x in b.probe.samples if t >= t_start and t <= b.t_probe_end]
        first = [x for t, x in b.probe.samples if t_start <= t <= t_start + 1.0]
        r.fig(f"set-up: {len(subs)} subscribers (SO_RCVBUF 4096, never read; {failed} failed) x {pubs_n} topics in "
              f"{t_set:.1f} s; subscriptions={st_set['subscriptions']}")
        r.fig(f"attack: {pubs_n} publishers start streaming {size} B messages at {rate}/s each to all of them for "
              f"{secs:.0f} s ({sum(sent)} publishes, {sum(sent) * len(subs)} deliveries wanted); longest publisher "
              f"send() {ms(max(worst_send))}")
        r.fig(f"probe from the start: worst {ms(max(after, default=0))}, worst in the first second "
              f"{ms(max(first, default=0))} (before: one 4.5-5.1 s pause)")
        r.fig("counters: " + counters(st_in, ["published", "delivered", "dropped", "dropped_for_memory", "queued_bytes",
                                              "memory_frames_bytes", "closes.memory_pressure", "closes.write_stall"]))
        r.check(len(subs) == n and failed == 0, f"{n} subscribers set up")
        r.check(max(after, default=1.0) < PROBE_MAX, f"the probe's worst round trip after the start "
                                                     f"{ms(max(after, default=0))} < 100 ms")
        r.check(st_in["delivered"] > 0, "deliveries happened (delivered > 0)")
    finally:
        b.close()
