"""churn: 5 000 connect/disconnect cycles beside a steady 64 B stream."""

import time

from ..common import Gateway, QUICK, check_clean, finish_gateway, mib, mono, stats
from ..load import Churner, SteadyStream

DESCRIPTION = "5 000 connect/disconnect cycles beside a steady 64 B stream"
BUDGET_SECS = 400
BOUNDED = False


def run(r):
    cycles = 500 if QUICK else 5000
    gw = Gateway("churn")
    try:
        base = gw.rss()
        steady = SteadyStream(gw.port, "/steady", rate=5000, size=64).start()
        time.sleep(0.2)
        t0 = mono()
        ch = Churner(gw.port, "/steady", threads=4, cycles=cycles).start()
        ch.join(240)
        t_churn = mono() - t0
        time.sleep(0.2)
        steady.stop()
        st = stats(gw.port)
        r.fig(f"churn: {ch.done} connect/disconnect cycles from 4 clients in {t_churn:.1f} s "
              f"({ch.done / max(t_churn, 1e-9):.0f}/s), {ch.failures} failed {ch.fail_samples[:3]}")
        r.fig(f"steady subscriber: sent {steady.sent} x 64 B msgs, received {steady.received}, "
              f"lost {steady.lost}, reordered {steady.reordered}, publisher max send() {steady.max_send_block * 1000:.1f} ms"
              + (f", errors {steady.errors}" if steady.errors else ""))
        r.fig(f"gateway: accepted={st['connections_accepted']} closes={st['closes']} dropped={st['dropped']} "
              f"errors_total={st['errors_total']}; RSS {mib(base)} -> {mib(gw.rss())}")
        ok_clean, _, text = check_clean(gw.port)
        r.fig(text)
        r.check(ch.done == cycles and ch.failures == 0, f"{cycles} cycles, none failed")
        r.check(steady.sent > 0 and steady.lost == 0 and steady.reordered == 0 and steady.received == steady.sent
                and not steady.errors, "steady subscriber: zero loss, zero reordering")
        r.check(st["dropped"] == 0, "no slow-consumer drops")
        r.check(ok_clean, "no leak after churn")
    finally:
        finish_gateway(r, gw)
