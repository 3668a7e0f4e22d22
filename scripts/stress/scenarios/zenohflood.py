"""zenohflood: a raw Zenoh peer floods samples into a gateway with 1000
subscribers that never read: the samples are applied under the loop's
per-turn work budget and shed at the inbox, never a stall."""

import json
import time

from ..bounded import Bounded, close_all, mass_connect, stall_check, stat
from ..common import HOST, QUICK, mono
from ..zenohpeer import free_loopback_port, zenoh_available, zenoh_peer, zenoh_peer_line

DESCRIPTION = "a raw Zenoh peer floods samples into a gateway with 1000 subscribers that never read"
BUDGET_SECS = 300
BOUNDED = True


def run(r):
    if not zenoh_available():
        r.check(False, "needs Python eclipse-zenoh (pip install eclipse-zenoh)")
        return
    n = 300 if QUICK else 1000
    secs = 5.0 if QUICK else 15.0
    zport = free_loopback_port()
    b = Bounded(r, "zenohflood", ["--zenoh-listen", f"tcp/{HOST}:{zport}"])
    try:
        hello = b'{"op":"subscribe","topic":"/zflood","type":"std_msgs/msg/String"}\n'
        subs, failed = mass_connect(b.gw.port, n, rcvbuf=4096, hello=lambda i: hello, expect=0)
        deadline = mono() + 30
        while b.sc.get().get("subscriptions", 0) < n and mono() < deadline:
            time.sleep(0.1)
        st0 = b.sc.get()
        peer = zenoh_peer("flood", f"tcp/{HOST}:{zport}", "rosgate/0/t/zflood", secs, 64)
        zenoh_peer_line(peer, 30)  # ready
        b.begin()
        done = json.loads(zenoh_peer_line(peer, secs + 60))
        peer.wait(30)
        st_mid = b.sc.get()
        b.quiet()
        close_all(subs)
        b.leave()
        st = b.end(conns=n + 5, opened=n)
        d = lambda k: stat(st, k) - stat(st0, k)  # noqa: E731
        r.fig(f"attack: a raw Zenoh peer put {done['puts']} samples of ~76 B on rosgate/0/t/zflood in "
              f"{done['secs']:.1f} s ({done['puts'] / done['secs']:.0f}/s) into a gateway with {len(subs)} "
              f"subscribers that never read (SO_RCVBUF 4096; {failed} failed to connect)")
        r.fig(f"counters: federation_in +{d('federation_in')} (delivered, each to every subscriber), "
              f"federation_in_dropped +{d('federation_in_dropped')} (shed at the inbox), delivered "
              f"+{d('delivered')}, dropped +{d('dropped')}; memory_federation_bytes at the end "
              f"{stat(st_mid, 'memory_federation_bytes')}")
        r.check(st0.get("subscriptions", 0) >= n, f"{n} non-readers subscribed")
        r.check(d("federation_in") > 0, "samples from the peer were delivered")
        r.check(d("federation_in_dropped") > 0, "the flood was shed and counted (federation_in_dropped)")
        stall_check(r, b)
    finally:
        b.close()
