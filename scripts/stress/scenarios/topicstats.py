"""topicstats: /rosgate/topic_stats walked over 100 000 topics."""

from ..bounded import ATTACK_MIN, Bounded, hold_topics, stall_check
from ..common import Conn, mono, ms, pct

DESCRIPTION = "/rosgate/topic_stats walked over 100 000 topics"
BUDGET_SECS = 300
BOUNDED = True


def run(r):
    topics = 100_000
    b = Bounded(r, "topicstats", [], budget=1_000_000_000)
    try:
        holders = hold_topics(b.gw.port, topics, b"/ts")
        c = Conn(b.gw.port, timeout=60)
        b.begin()
        walks, calls, per_call, seen_last = 0, 0, [], 0
        while walks == 0 or mono() - b.t0 < ATTACK_MIN:
            walks += 1
            args, seen = {}, 0
            while True:
                t0 = mono()
                calls += 1
                o = c.call("/rosgate/topic_stats", args, f"ts-{calls}", timeout=60)
                per_call.append(mono() - t0)
                if o.get("result") is not True:
                    raise RuntimeError(f"topic_stats failed: {str(o)[:200]}")
                v = o["values"]
                seen += len(v["topics"])
                nxt = v.get("next")
                if not nxt:
                    break
                args = {"after": nxt}
            seen_last = seen
        b.quiet()
        c.close()
        for h in holders:
            h.close()
        b.leave()
        b.end(conns=len(holders) + 6, opened=len(holders) + 1)
        r.fig(f"attack: {walks} walks of /rosgate/topic_stats over {topics} topics, {calls} calls "
              f"(p50 {ms(pct(per_call, 0.5))}, max {ms(max(per_call))} per call end to end); "
              f"topics seen per walk {seen_last}")
        r.check(seen_last >= topics, f"a walk sees every topic ({seen_last} >= {topics})")
        stall_check(r, b)
    finally:
        b.close()
