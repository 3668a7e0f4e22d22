"""conns10k: 10 000 concurrent subscribers, one publish to all; RSS per connection."""

import selectors
import socket
import time

from ..common import (
    Conn, Gateway, HOST, KiB, QUICK, check_clean, finish_gateway, mib, mono, raise_nofile, stats,
)

DESCRIPTION = "10 000 concurrent subscribers, one publish to all; RSS per connection"
BUDGET_SECS = 600
BOUNDED = False


def run(r):
    n = 1000 if QUICK else 10000
    limit = raise_nofile(n + 200)
    if limit < n + 100:
        r.check(False, f"client fd limit {limit} < {n + 100}: raise `ulimit -n` (stress.sh does)")
        return
    gw = Gateway("conns10k", ["--max-connections", str(n + 16)])
    try:
        base = gw.rss()
        sel = selectors.DefaultSelector()
        socks = {}  # fd -> [sock, buf, state, publishes]
        opened = acked = failed = 0
        inflight = 0
        t0 = mono()
        deadline = t0 + 180
        topic = "/fanout"
        while acked + failed < n and mono() < deadline:
            while opened < n and inflight < 256:
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.setblocking(False)
                s.connect_ex((HOST, gw.port))
                socks[s.fileno()] = [s, bytearray(), "connecting", 0]
                sel.register(s, selectors.EVENT_WRITE)
                opened += 1
                inflight += 1
            for key, _ in sel.select(timeout=1.0):
                st = socks[key.fd]
                s = st[0]
                if st[2] == "connecting":
                    err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    if err:
                        st[2] = "failed"
                        failed += 1
                        inflight -= 1
                        sel.unregister(s)
                        continue
                    s.send(b'{"op":"subscribe","topic":"%s","type":"std_msgs/String","id":%d}\n'
                           % (topic.encode(), key.fd))
                    st[2] = "subscribing"
                    sel.modify(s, selectors.EVENT_READ)
                    continue
                try:
                    d = s.recv(4096)
                except BlockingIOError:
                    continue
                except OSError:
                    d = b""
                if not d:
                    st[2] = "failed"
                    failed += 1
                    inflight -= 1
                    sel.unregister(s)
                    continue
                st[1] += d
                if b"\n" in st[1]:
                    if b'"level":"info"' in st[1] and b'"id":%d' % key.fd in st[1]:
                        st[2] = "subscribed"
                        acked += 1
                    else:
                        st[2] = "failed"
                        failed += 1
                        sel.unregister(s)
                    st[1] = bytearray()
                    inflight -= 1
        t_sub = mono() - t0
        time.sleep(0.5)
        rss_sub = gw.rss()
        fds_gw = gw.nfds()
        st1 = stats(gw.port)
        r.fig(f"connections: {n} opened, {acked} subscribed, {failed} failed in {t_sub:.1f} s")
        r.fig(f"gateway fds: {fds_gw}; stats: connections_open={st1['connections_open']} "
              f"subscriptions={st1['subscriptions']}")
        # one publish reaching all of them
        pub = Conn(gw.port)
        t1 = mono()
        pub.send({"op": "publish", "topic": topic, "msg": {"data": "to everyone"}})
        got = 0
        dups = 0
        bad = 0
        deadline = mono() + 60
        while got < acked and mono() < deadline:
            for key, _ in sel.select(timeout=1.0):
                st = socks[key.fd]
                try:
                    d = st[0].recv(4096)
                except BlockingIOError:
                    continue
                except OSError:
                    d = b""
                if not d:
                    sel.unregister(st[0])
                    bad += 1
                    continue
                st[1] += d
                k = st[1].count(b'{"op":"publish","topic":"/fanout","msg":{"data":"to everyone"}}\n')
                if k:
                    if st[3] == 0:
                        got += 1
                    st[3] += k
                    if st[3] > 1:
                        dups += 1
                    st[1] = bytearray()
        t_fan = mono() - t1
        # a short extra wait: nobody must get a second copy
        end = mono() + 0.3
        while mono() < end:
            for key, _ in sel.select(timeout=0.1):
                st = socks[key.fd]
                try:
                    d = st[0].recv(4096)
                except OSError:
                    d = b""
                if d and b'"op":"publish"' in d:
                    dups += 1
        rss_fan = gw.rss()
        st2 = stats(gw.port)
        per = (rss_sub - base) / max(1, acked)
        r.fig(f"fan-out: 1 publish -> {got}/{acked} subscribers in {t_fan * 1000:.0f} ms, "
              f"duplicates {dups}, closed {bad}; delivered={st2['delivered']} dropped={st2['dropped']}")
        r.fig(f"RSS: baseline {mib(base)}, {acked} subscribed {mib(rss_sub)}, after fan-out {mib(rss_fan)}; "
              f"per connection {per / 1024:.1f} KiB")
        pub.close()
        t2 = mono()
        for st in socks.values():
            try:
                st[0].close()
            except OSError:
                pass
        sel.close()
        ok_clean, st3, text = check_clean(gw.port, timeout=30)
        r.fig(f"closed all in {mono() - t2:.1f} s; RSS after close {mib(gw.rss())}")
        r.fig(text)
        r.check(acked == n and failed == 0, f"all {n} connections subscribed")
        r.check(st1["subscriptions"] == n and st1["connections_open"] == n + 1, "gateway counts them")
        r.check(got == acked and dups == 0 and bad == 0, "the publish reached every subscriber exactly once")
        r.check(st2["delivered"] == n and st2["dropped"] == 0, "delivered counter matches")
        r.check(per < 32 * KiB, f"RSS per connection {per / 1024:.1f} KiB < 32 KiB")
        r.check(ok_clean, "no leak after close")
    finally:
        finish_gateway(r, gw)
