"""fakenodes: a raw Zenoh peer announces 10 000 fake ROS 2 nodes with
publishers at once (rmw_zenoh tokens), some with invalid names: bounded,
invalid names counted and not listed, never a stall."""

import json
import time

from ..bounded import ATTACK_MIN, Bounded, stall_check, stat
from ..common import HOST, QUICK, Conn, mono
from ..zenohpeer import free_loopback_port, zenoh_available, zenoh_peer, zenoh_peer_line

DESCRIPTION = ("a raw Zenoh peer announces 10 000 fake ROS 2 nodes with publishers at once "
               "(rmw_zenoh tokens), some with invalid names")
BUDGET_SECS = 400
BOUNDED = True


def run(r):
    if not zenoh_available():
        r.check(False, "needs Python eclipse-zenoh (pip install eclipse-zenoh)")
        return
    n, bad = (2000, 300) if QUICK else (10_000, 300)
    zport = free_loopback_port()
    b = Bounded(r, "fakenodes", ["--ros-domain", "0", "--zenoh-listen", f"tcp/{HOST}:{zport}"])
    try:
        st0 = b.sc.get()
        b.begin()
        peer = zenoh_peer("fakenodes", f"tcp/{HOST}:{zport}", n, bad, ATTACK_MIN)
        declared = json.loads(zenoh_peer_line(peer, 120))
        # While they are all there: introspection lists only valid names.
        c = Conn(b.gw.port, timeout=60)
        deadline = mono() + 30
        nodes = []
        while mono() < deadline:
            o = c.call("/rosapi/nodes", {}, f"n{mono()}", timeout=30)
            nodes = o.get("values", {}).get("nodes", [])
            if sum(1 for x in nodes if x.startswith("/fake_")) >= min(n, 9000):
                break
            time.sleep(0.25)
        st_mid = b.sc.get()
        left = json.loads(zenoh_peer_line(peer, ATTACK_MIN + 120))
        peer.wait(30)
        time.sleep(1.0)
        b.quiet()
        c.close()
        b.leave()
        st = b.end(conns=5, opened=2)
        d = lambda k: stat(st, k) - stat(st0, k)  # noqa: E731
        listed = sum(1 for x in nodes if x.startswith("/fake_"))
        invalid = [x for x in nodes if " " in x or ".." in x or "\u200b" in x]
        r.fig(f"attack: a raw Zenoh peer declared {declared['declared']} rmw_zenoh tokens ({n} nodes with a "
              f"publisher each, {bad} more with invalid names) in {declared['secs']:.1f} s, held them "
              f"{ATTACK_MIN:.0f} s, undeclared them in {left['secs']:.1f} s")
        r.fig(f"rosapi listed {listed} of the fake nodes, {len(invalid)} invalid names; counters: "
              f"ros2_names_rejected +{d('ros2_names_rejected')}, ros2_entities_refused "
              f"+{d('ros2_entities_refused')}; memory_federation_bytes with them "
              f"{stat(st_mid, 'memory_federation_bytes')}, after {stat(st, 'memory_federation_bytes')}")
        r.check(listed >= min(n, 9000), "the valid fake nodes were listed")
        r.check(not invalid and d("ros2_names_rejected") >= 2 * bad,
                "names breaking the ROS 2 rules were counted and not listed")
        stall_check(r, b)
    finally:
        b.close()
