"""longline: a 100 MiB line with no newline, then garbage."""

import random
import time

from ..common import Gateway, MiB, QUICK, Sampler, answered, check_clean, finish_gateway, mib, mono, stats
from ..load import PingLoop, long_line_attack

DESCRIPTION = "a 100 MiB line with no newline, then garbage"
BUDGET_SECS = 400
BOUNDED = False


def run(r):
    size = 24 * MiB if QUICK else 100 * MiB
    max_line = 16 * MiB
    gw = Gateway("longline", ["--max-line-bytes", str(max_line)])
    try:
        stats(gw.port)
        time.sleep(0.2)
        base = gw.rss()
        sampler = Sampler(gw, 0.05)
        sampler.start()
        ping = PingLoop(gw.port)
        ping.start()
        rnd = random.Random(42)
        t0 = mono()
        answered, statuses = long_line_attack(gw.port, size, 2 * MiB, rnd)
        t_a = mono() - t0
        time.sleep(1.0)
        after_a = gw.rss()
        # a second one: the same line, no newline at all, then the client leaves
        t1 = mono()
        long_line_attack(gw.port, size, 0, rnd, then_newline=False, after_call=False)
        t_b = mono() - t1
        time.sleep(0.5)
        ping.stop()
        time.sleep(1.0)
        samples = sampler.stop()
        peak = max(x for _, x in samples)
        after = gw.rss()
        # once more: whatever stays resident must be reused, not added to
        long_line_attack(gw.port, size, 0, rnd, then_newline=False, after_call=False)
        time.sleep(1.0)
        after3 = gw.rss()
        st = stats(gw.port)
        e = st["errors"]
        r.fig(f"attacker A: {mib(size)} line, 2 MiB random bytes, NULs, invalid UTF-8, broken JSON in {t_a:.1f} s; "
              f"{statuses} error statuses; its next request answered: {answered}")
        r.fig(f"attacker B: {mib(size)} with no newline, then disconnect, in {t_b:.1f} s")
        r.fig(f"errors: too_long={e['too_long']} bad_utf8={e['bad_utf8']} bad_json={e['bad_json']} "
              f"not_object={e['not_object']} too_deep={e['too_deep']} missing_op={e['missing_op']} total={st['errors_total']}")
        r.fig(f"other client: {ping.count} round trips during the attack, max latency {ping.max_latency * 1000:.0f} ms, "
              f"failures {ping.failures[:2]}")
        r.fig(f"RSS: baseline {mib(base)}, peak {mib(peak)} (+{mib(peak - base)}), after {mib(after)} "
              f"(+{mib(after - base)}), after a third long line {mib(after3)} (+{mib(after3 - base)})")
        r.fig(f"RSS step by step: after attacker A alone +{mib(after_a - base)}, after B +{mib(after - base)}, "
              f"after a third +{mib(after3 - base)} (what stays is held by the allocator and reused, not lost)")
        ok_clean, _, text = check_clean(gw.port)
        r.fig(text)
        r.check(answered is True, "attacker's connection kept and served after the garbage")
        r.check(e["too_long"] >= 2 and e["bad_utf8"] >= 1 and e["bad_json"] >= 1 and e["too_deep"] >= 1,
                "errors counted by kind")
        r.check(ping.count > 10 and not ping.failures and ping.max_latency < 1.0,
                "the gateway kept serving another client (max latency < 1 s)")
        r.check(peak - base <= max_line + 8 * MiB, f"RSS peak within the line cap (+{mib(peak - base)} <= +{mib(max_line + 8 * MiB)})")
        r.check(after3 - after <= 1 * MiB, "RSS bounded: a third long line adds nothing")
        r.check(after - base <= 4 * MiB, f"RSS back near baseline (+{mib(after - base)} <= +4 MiB)")
        r.check(ok_clean, "no leak")
    finally:
        finish_gateway(r, gw)
