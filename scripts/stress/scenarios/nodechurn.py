"""nodechurn: 10 000 declare_node/destroy_node pairs with a /rosgate/graph subscriber."""

from ..bounded import ATTACK_MIN, Bounded, LineReader, stall_check
from ..common import Conn, mono, ms

DESCRIPTION = "10 000 declare_node/destroy_node pairs with a /rosgate/graph subscriber"
BUDGET_SECS = 300
BOUNDED = True


def run(r):
    pairs = 10_000
    b = Bounded(r, "nodechurn", [])
    try:
        g = Conn(b.gw.port, timeout=60)
        g.request_ack({"op": "subscribe", "topic": "/rosgate/graph", "type": "rosgate_msgs/msg/GraphEvents",
                       "id": "g"})
        events = {"n": 0}

        def on_graph(line):
            if line.startswith(b'{"op":"publish"'):
                events["n"] += 1
        gr = LineReader(g, on_graph)
        gr.start()
        b.begin()
        rounds, times = 0, []
        while rounds == 0 or mono() - b.t0 < ATTACK_MIN:
            rounds += 1
            c = Conn(b.gw.port, timeout=120)
            t0 = mono()
            c.send(b"".join(b'{"op":"declare_node","name":"churn_%d"}\n{"op":"destroy_node","name":"churn_%d"}\n'
                            % (k, k) for k in range(pairs)))
            c.call("/rosgate/stats", {}, "barrier", timeout=120)
            times.append(mono() - t0)
            c.close()
        b.quiet()
        gr.stop()
        g.close()
        b.leave()
        b.end(conns=6, opened=rounds + 1)
        r.fig(f"attack: {rounds} rounds of {pairs} declare_node/destroy_node pairs pipelined, a /rosgate/graph "
              f"subscriber reading; each round in " + ", ".join(ms(x) for x in times[:8])
              + f"; {events['n']} graph messages received")
        stall_check(r, b)
    finally:
        b.close()
