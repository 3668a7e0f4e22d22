"""goalsleave: an action server leaving with 4096 goals in flight."""

import time

from ..bounded import ATTACK_MIN, Bounded, stall_check
from ..common import Conn, mono, ms

DESCRIPTION = "an action server leaving with 4096 goals in flight"
BUDGET_SECS = 300
BOUNDED = True


def run(r):
    goals, served = 4100, 4096
    b = Bounded(r, "goalsleave", [])
    try:
        b.begin()
        rounds, times = 0, []
        while rounds == 0 or mono() - b.t0 < ATTACK_MIN:
            rounds += 1
            srv = Conn(b.gw.port, timeout=60)
            srv.request_ack({"op": "advertise_action", "action": "/gl/act", "type": "x/action/Y", "id": "adv"})
            # 1024 goals per caller, 4096 per server (the defaults): the
            # last 4 of 4100 are refused at once, 4096 stay in flight.
            callers = [Conn(b.gw.port, timeout=60) for _ in range(5)]
            split = [goals // 5] * 5
            for i, c in enumerate(callers):
                c.send(b"".join(b'{"op":"send_action_goal","id":"g%d","action":"/gl/act","action_type":"x/action/Y",'
                                b'"args":{},"timeout":60}\n' % k for k in range(split[i])))
            got = 0
            while got < served:
                ln = srv.readline(60)
                if ln is None:
                    raise RuntimeError("server closed")
                if ln.startswith(b'{"op":"send_action_goal"'):
                    got += 1
            t0 = mono()
            srv.close()
            for i, c in enumerate(callers):
                n = 0
                while n < split[i]:
                    ln = c.readline(60)
                    if ln is None:
                        raise RuntimeError("caller closed")
                    if ln.startswith(b'{"op":"action_result"'):
                        n += 1
            times.append(mono() - t0)
            for c in callers:
                c.close()
            time.sleep(0.2)
        b.quiet()
        b.leave()
        b.end(conns=8, opened=3 * rounds)
        r.fig(f"attack: {rounds} rounds of an action server leaving with {served} goals in flight (5 callers); "
              f"every goal failed to its caller within " + ", ".join(ms(x) for x in times[:8]))
        stall_check(r, b)
    finally:
        b.close()
