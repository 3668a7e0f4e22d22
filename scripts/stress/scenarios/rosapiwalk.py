"""rosapiwalk: 2000 pipelined rosapi calls that list or scan, 10 000 topics."""

from ..bounded import ATTACK_MIN, Bounded, hold_topics, stall_check
from ..common import Conn, jline, mono, ms

DESCRIPTION = "2000 pipelined rosapi calls that list or scan, 10 000 topics"
BUDGET_SECS = 300
BOUNDED = True


ROSAPI_WALKS = [
    ("/rosapi/topics", {}), ("/rosapi/topics_and_raw_types", {}), ("/rosapi/topics_for_type", {"type": "t3"}),
    ("/rosapi/services", {}), ("/rosapi/nodes", {}), ("/rosapi/interfaces", {}),
    ("/rosapi/services_for_type", {"type": "x"}), ("/rosapi/service_providers", {"service": "x"}),
    ("/rosapi/node_details", {"node": "/nobody"}), ("/rosapi/action_servers", {}),
]


def run(r):
    topics, calls_n = 10_000, 2000
    b = Bounded(r, "rosapiwalk", [], budget=1_000_000_000)
    try:
        holders = hold_topics(b.gw.port, topics, b"/rw")
        c = Conn(b.gw.port, timeout=60)
        b.begin()
        rounds, times, truncated = 0, [], 0
        while rounds == 0 or mono() - b.t0 < ATTACK_MIN:
            rounds += 1
            t0 = mono()
            c.send(b"".join(jline({"op": "call_service", "service": ROSAPI_WALKS[i % len(ROSAPI_WALKS)][0],
                                   "args": ROSAPI_WALKS[i % len(ROSAPI_WALKS)][1], "id": f"w{rounds}-{i}"})
                            for i in range(calls_n)))
            got = 0
            while got < calls_n:
                ln = c.readline(120)
                if ln is None:
                    raise RuntimeError("caller closed")
                if ln.startswith(b'{"op":"service_response"'):
                    got += 1
                    if b'"truncated":true' in ln:
                        truncated += 1
            times.append(mono() - t0)
        b.quiet()
        c.close()
        for h in holders:
            h.close()
        b.leave()
        b.end(conns=len(holders) + 6, opened=len(holders) + 1)
        r.fig(f"attack: {rounds} rounds of {calls_n} pipelined rosapi calls ({len(ROSAPI_WALKS)} kinds that list "
              f"or scan) over {topics} topics, each round answered in " + ", ".join(ms(x) for x in times[:8])
              + f"; {truncated} replies truncated")
        stall_check(r, b)
    finally:
        b.close()
