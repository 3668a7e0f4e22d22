"""services: advertise_service past the per-connection limit on one connection."""

import json
import time

from ..bounded import ATTACK_MIN, Bounded, LineReader, O1_RATIO, Phases, counters, stat
from ..common import Conn, QUICK, mono

DESCRIPTION = "advertise_service past the per-connection limit on one connection"
BUDGET_SECS = 300
BOUNDED = True


def run(r):
    limit = 1000  # --max-services-per-conn
    total = 20_000 if QUICK else 100_000
    b = Bounded(r, "services", [])
    try:
        seen = {"info": 0, "error": 0, "barriers": set(), "forwarded": 0}

        def on_line(line):
            if line.startswith(b'{"op":"service_response"'):
                seen["barriers"].add(json.loads(line).get("id"))
            elif line.startswith(b'{"op":"call_service"'):
                seen["forwarded"] += 1
            elif b'"level":"error"' in line:
                seen["error"] += 1
            elif b'"level":"info"' in line:
                seen["info"] += 1
        ph = Phases(b.gw)
        b.begin()
        st_a = b.sc.get()
        rounds = 0
        at_limit = []
        calls_ok = []
        while rounds == 0 or mono() - b.t0 < ATTACK_MIN:
            rounds += 1
            c = Conn(b.gw.port, timeout=60)
            rd = LineReader(c, on_line)
            rd.start()
            # Service names are distinct across rounds too: a round's
            # connection closes after it, withdrawing its services.
            base = rounds * total

            def send_range(lo, hi, tag):
                c.s.sendall(b"".join(b'{"op":"advertise_service","service":"/svc/%d","type":"x/Y","id":%d}\n'
                                     % (base + k, k) for k in range(lo, hi)))
                c.send({"op": "call_service", "service": "/rosgate/stats", "id": tag, "args": {}})
                deadline = mono() + 120
                while tag not in seen["barriers"] and mono() < deadline and not rd.eof:
                    time.sleep(0.002)
            ph.run("services 0-99 (accepted)", 100, lambda: send_range(0, 100, f"b1-{rounds}"))
            ph.run(f"services 100-{limit - 1} (accepted, up to the limit)", limit - 100,
                   lambda: send_range(100, limit, f"b2-{rounds}"))
            at_limit.append(b.sc.get()["services"])
            ph.run(f"services {limit}-{total - 1} (past the limit)", total - limit,
                   lambda: send_range(limit, total, f"b3-{rounds}"))
            # an accepted service still reaches its provider
            fwd = seen["forwarded"]
            cl = Conn(b.gw.port)
            cl.send({"op": "call_service", "service": f"/svc/{base + 7}", "id": "c7", "args": {"x": 1}})
            deadline = mono() + 5
            while seen["forwarded"] == fwd and mono() < deadline:
                time.sleep(0.002)
            calls_ok.append(seen["forwarded"] > fwd)
            cl.close()
            rd.stop()
            c.close()
        b.quiet()
        b.leave()
        st = b.end(conns=5, opened=2 * rounds)
        refused = stat(st, "errors.too_many_registrations") - stat(st_a, "errors.too_many_registrations")
        r.fig(f"attack: {rounds} rounds of one connection advertising {total} distinct services ({limit} allowed); "
              f"{sum(x[2] for x in ph.rows) / rounds:.2f} s per round (before: 100k took 14.4 s)")
        r.fig("phases: " + ph.text())
        r.fig(f"statuses: {seen['info']} info, {seen['error']} error; services at the limit each round "
              f"{sorted(set(at_limit))}; a call to an accepted service forwarded each round: {all(calls_ok)}; "
              + counters(st, ["errors.too_many_registrations", "services"]))
        p1, p2, p3 = (ph.per_op_us(x[0]) for x in ph.rows)
        r.check(refused == rounds * (total - limit) and at_limit == [limit + st_a["services"]] * rounds
                and seen["error"] == refused and all(calls_ok),
                f"{limit} services kept per connection and working, the {total - limit} past the limit refused "
                f"(errors.too_many_registrations +{refused} in {rounds} rounds)")
        r.check(p2 <= O1_RATIO * max(p1, 1.0) and p3 <= O1_RATIO * max(p1, 1.0),
                f"per-advertisement cost does not grow with the services held ({p1:.2f} / {p2:.2f} / {p3:.2f} us; "
                f"<= {O1_RATIO:.0f}x the first phase, floor 1 us)")
    finally:
        b.close()
