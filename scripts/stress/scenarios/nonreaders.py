"""nonreaders: 1500 subscribers that never read, small unbatched publishes."""

from ..bounded import Bounded, LineReader, SAFETY_RSS, close_all, counters, mass_connect, stat
from ..common import Conn, KiB, QUICK, mib, mono, ms

DESCRIPTION = "1500 subscribers that never read, small unbatched publishes"
BUDGET_SECS = 300
BOUNDED = True


def run(r):
    n = 300 if QUICK else 1500
    secs = 5.0 if QUICK else 20.0
    b = Bounded(r, "nonreaders", [])
    try:
        hello = b'{"op":"subscribe","topic":"/nr/a","type":"x"}\n{"op":"subscribe","topic":"/nr/b","type":"x"}\n'
        subs, failed = mass_connect(b.gw.port, n, rcvbuf=4096, hello=lambda i: hello, expect=2)
        pub = Conn(b.gw.port, timeout=120)
        for tp in ("/nr/a", "/nr/b"):
            pub.request_ack({"op": "advertise", "topic": tp, "type": "x", "id": tp})
        pub_r = LineReader(pub)
        pub_r.start()
        # Alternating topics: consecutive publishes never share a topic, so
        # none of them batch: one queue entry per message per subscriber.
        blob = b"".join(b'{"op":"publish","topic":"/nr/%s","msg":{"seq":%d,"pad":"%s"}}\n'
                        % (b"ab"[k % 2:k % 2 + 1], k, b"p" * 40) for k in range(600))
        b.begin()
        t0 = mono()
        sent = 0
        worst_send = 0.0
        capped = False
        while mono() - t0 < secs:
            t = mono()
            pub.s.sendall(blob)
            worst_send = max(worst_send, mono() - t)
            sent += 600
            if b.gw.rss() > SAFETY_RSS:
                capped = True  # protect the machine: the bound is long broken anyway
                break
        t_pub = mono() - t0
        st_mid = b.sc.get()
        rss_mid = b.gw.rss()
        b.quiet()
        close_all(subs)
        b.leave()
        st = b.end(conns=n + 5, opened=n)
        pub_r.stop()
        pub.close()
        pk = b.watch.peak
        r.fig(f"attack: {len(subs)} subscribers (SO_RCVBUF 4096, never read; {failed} failed to subscribe) on "
              f"two topics; {sent} publishes of ~90 B alternating the topics (never batched) in {t_pub:.1f} s "
              f"({sent / t_pub:.0f}/s), longest send() {ms(worst_send)}"
              + (f"; STOPPED EARLY: gateway RSS passed the safety cap {mib(SAFETY_RSS)}" if capped else ""))
        r.fig(f"RSS with the subscribers held: {mib(rss_mid)}, {(rss_mid - b.base) / max(1, len(subs)) / KiB:.1f} KiB "
              f"per non-reader (before: ~6.8 MiB each); peak memory_frames_bytes={pk.get('memory_frames_bytes')} "
              f"queued_bytes={pk.get('queued_bytes')}")
        r.fig("counters: " + counters(st, ["published", "delivered", "dropped", "dropped_for_memory",
                                           "closes.memory_pressure", "closes.write_stall"]))
        r.check(len(subs) == n and st_mid["subscriptions"] >= 2 * n, f"{n} non-readers subscribed and kept")
        r.check(stat(st, "dropped_for_memory") > 0 or stat(st, "dropped") > 0,
                "their topic data was shed (dropped / dropped_for_memory > 0)")
    finally:
        b.close()
