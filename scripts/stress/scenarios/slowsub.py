"""slowsub: a subscriber that never reads while 200 MiB flow."""

from ..common import Gateway, KiB, MiB, QUICK, Sampler, check_clean, finish_gateway, mib, stats
from ..load import Flood

DESCRIPTION = "a subscriber that never reads while 200 MiB flow"
BUDGET_SECS = 400
BOUNDED = False


def run(r):
    total = 20 * MiB if QUICK else 200 * MiB
    msg = 64 * KiB
    max_queue = 8 * MiB
    gw = Gateway("slowsub", ["--max-queue-bytes", str(max_queue)])
    try:
        st0 = stats(gw.port)
        base = gw.rss()
        sampler = Sampler(gw, 0.05)
        sampler.start()
        fl = Flood(gw.port, "/flood", msg, total_bytes=total, slow=True, stats_at=(total // msg) // 2)
        fl.start()
        fl.wait_published(240)
        st_mid = stats(gw.port)  # slow subscriber still attached
        fl.stop()
        samples = sampler.stop()
        peak = max(x for _, x in samples)
        st = stats(gw.port)
        slow_recv, slow_order, slow_last, slow_closed = fl.slow_sessions[-1]
        mb = fl.sent_bytes / 1e6
        cap = 2 * (max_queue + msg + 256) + 8 * MiB
        r.fig(f"publisher: {fl.sent} x {msg // 1024} KiB = {mib(fl.sent_bytes)} in {fl.pub_time:.2f} s "
              f"({mb / max(fl.pub_time or 1e-9, 1e-9):.0f} MB/s), longest send() {fl.max_send_block * 1000:.0f} ms, "
              f"own stats call answered in {1000 * fl.stats_latency if fl.stats_latency is not None else -1:.0f} ms")
        lag = (fl.fast_done_at - fl.t0 - fl.pub_time) if fl.fast_done_at else None
        r.fig(f"fast subscriber: {fl.fast_received}/{fl.sent} msgs, lost {fl.fast_lost}, reordered {fl.fast_reordered}, "
              f"finished {lag * 1000 if lag is not None else -1:.0f} ms after the publisher")
        r.fig(f"slow subscriber (SO_RCVBUF 4096, never reads): kept {slow_recv} msgs (newest seq {slow_last}, "
              f"in order {slow_order}), gateway dropped {st['dropped']} msgs / {mib(st['dropped_bytes'])}, "
              f"closed by gateway {slow_closed}; closes={st['closes']}")
        r.fig(f"RSS: baseline {mib(base)}, peak {mib(peak)} (+{mib(peak - base)}), after {mib(gw.rss())}; "
              f"cap for 2 subscriber queues + slack: +{mib(cap)}")
        ok_clean, _, text = check_clean(gw.port)
        r.fig(text)
        r.check(not fl.errors, f"no client errors {fl.errors[:3]}")
        r.check(fl.fast_lost == 0 and fl.fast_reordered == 0 and fl.fast_received == fl.sent,
                "second subscriber kept up: every message, in order")
        r.check(fl.pub_time is not None and fl.max_send_block < 2.0,
                f"publisher never stalled (longest send() {fl.max_send_block * 1000:.0f} ms < 2000 ms)")
        r.check(fl.stats_latency is not None and fl.stats_latency < 1.0,
                "publisher's own request answered in < 1 s while the slow subscriber exists")
        r.check(st["dropped"] > 0 and st_mid["subscriptions"] == 2, "slow subscriber lost old data, stayed subscribed")
        if not slow_closed:
            r.check(slow_order and slow_last == fl.sent - 1, "slow subscriber: kept data in order, newest message kept")
        r.check(peak - base <= cap, f"RSS peak within caps (+{mib(peak - base)} <= +{mib(cap)})")
        r.check(st0["connections_open"] == 1, "started clean")
        r.check(ok_clean, "no leak after the flood")
    finally:
        finish_gateway(r, gw)
