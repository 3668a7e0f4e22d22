"""wsids: WebSocket subscribes with distinct ids up to the limit and past it."""

import json
import time

from ..bounded import ATTACK_MIN, Bounded, O1_RATIO, Phases, counters, stat
from ..common import Conn, QUICK, mono
from ..ws import WsConn, WsReader, ws_frame

DESCRIPTION = "WebSocket subscribes with distinct ids up to the limit and past it"
BUDGET_SECS = 300
BOUNDED = True


def run(r):
    limit = 10_000  # --max-subscriptions-per-conn; each rosbridge id counts
    total = 20_000 if QUICK else 100_000
    b = Bounded(r, "wsids", [])
    try:
        seen = {"errors": 0, "too_many": 0, "other": 0, "barriers": set(), "pub": 0}
        ids_refused = []

        def on_frame(op, payload):
            if op != 0x1:
                return
            o = json.loads(payload)
            if o.get("op") == "service_response":
                seen["barriers"].add(o.get("id"))
            elif o.get("op") == "status" and o.get("level") == "error":
                seen["errors"] += 1
                if "too many" in str(o.get("msg", "")) or "limit" in str(o.get("msg", "")):
                    seen["too_many"] += 1
                if len(ids_refused) < 3:
                    ids_refused.append(o.get("id"))
            elif o.get("op") == "publish":
                seen["pub"] += 1
            else:
                seen["other"] += 1

        def send_range(lo, hi, tag):
            frames = b"".join(ws_frame(0x1, b'{"op":"subscribe","topic":"/wsids","type":"x","id":"s%d"}' % k)
                              for k in range(lo, hi))
            ws.s.sendall(frames)
            ws.send_text({"op": "call_service", "service": "/rosgate/stats", "id": tag, "args": {}})
            deadline = mono() + 120
            while tag not in seen["barriers"] and mono() < deadline and not rd.eof:
                time.sleep(0.002)
        ph = Phases(b.gw)
        b.begin()
        st_a = b.sc.get()
        rounds = 0
        rd_errors = []
        pubs_per_round = []
        while rounds == 0 or mono() - b.t0 < ATTACK_MIN:
            rounds += 1
            ws = WsConn(b.gw.ws_port, timeout=60)
            rd = WsReader(ws, on_frame)
            rd.start()
            ph.run("ids 0-999 (accepted)", 1000, lambda: send_range(0, 1000, f"b1-{rounds}"))
            ph.run(f"ids 1000-{limit - 1} (accepted, up to the limit)", limit - 1000,
                   lambda: send_range(1000, limit, f"b2-{rounds}"))
            st_mid = b.sc.get()
            ph.run(f"ids {limit}-{total - 1} (past the limit)", total - limit,
                   lambda: send_range(limit, total, f"b3-{rounds}"))
            # one publish: the WebSocket client gets one copy, however many ids
            before = seen["pub"]
            p = Conn(b.gw.port)
            p.send({"op": "publish", "topic": "/wsids", "msg": {"one": 1}})
            p.send({"op": "call_service", "service": "/rosgate/stats", "id": "p", "args": {}})
            p.wait_for(lambda o: o.get("id") == "p")
            ws.send_text({"op": "call_service", "service": "/rosgate/stats", "id": f"b4-{rounds}", "args": {}})
            deadline = mono() + 10
            while f"b4-{rounds}" not in seen["barriers"] and mono() < deadline:
                time.sleep(0.002)
            pubs_per_round.append(seen["pub"] - before)
            p.close()
            rd.stop()
            rd_errors += rd.errors
            ws.close()
        b.quiet()
        b.leave()
        st = b.end(conns=5, opened=2)
        refused = stat(st, "errors.too_many_registrations") - stat(st_a, "errors.too_many_registrations")
        r.fig(f"attack: {rounds} rounds of one WebSocket connection sending {total} subscribes to one topic with "
              f"distinct ids ({limit} allowed); {sum(x[2] for x in ph.rows) / rounds:.2f} s per round (before: "
              f"100k took 12.5 s, probe p99 575 ms)")
        r.fig("phases: " + ph.text())
        r.fig(f"WebSocket clients got {seen['errors']} error statuses (first ids {ids_refused}), copies of one "
              f"publish per round {sorted(set(pubs_per_round))}; subscriptions (memberships) at the limit: "
              f"{st_mid['subscriptions']}; "
              + counters(st, ["errors.too_many_registrations"]))
        p1, p2, p3 = (ph.per_op_us(x[0]) for x in ph.rows)
        r.check(refused == rounds * (total - limit) and seen["errors"] == refused,
                f"exactly the {total - limit} ids past the limit refused each round (errors.too_many_registrations "
                f"+{refused} in {rounds} rounds)")
        r.check(pubs_per_round == [1] * rounds, "one copy of a publish, whatever the number of ids")
        r.check(p2 <= O1_RATIO * max(p1, 1.0) and p3 <= O1_RATIO * max(p1, 1.0),
                f"per-id cost does not grow with the ids held ({p1:.2f} / {p2:.2f} / {p3:.2f} us; "
                f"<= {O1_RATIO:.0f}x the first phase, floor 1 us)")
        r.check(not rd_errors, f"clients read cleanly {rd_errors[:2]}")
    finally:
        b.close()
