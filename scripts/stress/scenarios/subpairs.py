"""subpairs: subscribe/unsubscribe pairs with 10k subscriptions held."""

import json
import time

from ..bounded import ATTACK_MIN, Bounded, LineReader, O1_RATIO, Phases, counters
from ..common import Conn, QUICK, mono

DESCRIPTION = "subscribe/unsubscribe pairs with 10k subscriptions held"
BUDGET_SECS = 300
BOUNDED = True


def run(r):
    held = 9_999  # + the pair's own: --max-subscriptions-per-conn (10 000)
    pairs = 20_000 if QUICK else 100_000
    b = Bounded(r, "subpairs", [])
    try:
        seen = {"info": 0, "error": 0, "barriers": set()}

        def on_line(line):
            if line.startswith(b'{"op":"service_response"'):
                seen["barriers"].add(json.loads(line).get("id"))
            elif b'"level":"error"' in line:
                seen["error"] += 1
            elif b'"level":"info"' in line:
                seen["info"] += 1
        pair = b'{"op":"subscribe","topic":"/sp/pair","type":"x"}\n{"op":"unsubscribe","topic":"/sp/pair"}\n'
        ph = Phases(b.gw)
        b.begin()
        rounds = 0
        held_seen = []
        while rounds == 0 or mono() - b.t0 < ATTACK_MIN:
            rounds += 1
            c = Conn(b.gw.port, timeout=60)
            rd = LineReader(c, on_line)
            rd.start()

            def send(blob, tag):
                c.s.sendall(blob)
                c.send({"op": "call_service", "service": "/rosgate/stats", "id": tag, "args": {}})
                deadline = mono() + 120
                while tag not in seen["barriers"] and mono() < deadline and not rd.eof:
                    time.sleep(0.002)
            ph.run("pairs, 0 held", pairs, lambda: send(pair * pairs, f"b1-{rounds}"))
            send(b"".join(b'{"op":"subscribe","topic":"/sp/held/%d","type":"x"}\n' % k for k in range(held)),
                 f"b2-{rounds}")
            held_seen.append(b.sc.get()["subscriptions"])
            ph.run(f"pairs, {held} held", pairs, lambda: send(pair * pairs, f"b3-{rounds}"))
            rd.stop()
            c.close()
        b.quiet()
        b.leave()
        st = b.end(conns=5, opened=rounds)
        p0, p1 = ph.per_op_us(ph.rows[0][0]), ph.per_op_us(ph.rows[1][0])
        wall1 = ph.rows[1][2] / ph.rows[1][1] * 1e6
        r.fig(f"attack: {rounds} rounds of one connection doing {pairs} subscribe/unsubscribe pairs with 0 and then "
              f"{held} other subscriptions held (subscriptions {sorted(set(held_seen))}); {wall1:.1f} us per pair "
              f"end to end with them held (before: 322 us each with 1M held)")
        r.fig("phases: " + ph.text())
        r.fig(f"statuses: {seen['info']} info, {seen['error']} error; "
              + counters(st, ["errors.too_many_registrations", "subscriptions"]))
        r.check(seen["error"] == 0 and seen["info"] == rounds * (4 * pairs + held),
                "every request acknowledged, none refused")
        r.check(p1 <= O1_RATIO * max(p0, 1.0),
                f"per-pair cost does not grow with the subscriptions held ({p0:.2f} -> {p1:.2f} us gateway CPU; "
                f"<= {O1_RATIO:.0f}x, floor 1 us)")
    finally:
        b.close()
