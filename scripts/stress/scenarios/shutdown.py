"""shutdown: SIGTERM with 30 000 messages queued, calls in flight, WebSocket clients."""

import json
import signal
import subprocess
import threading
import time

from ..bounded import (
    ALLOW_FIXED, ALLOW_FRACTION, ALLOW_PER_CONN, ATTACK_MIN, Bounded, LineReader, NEWCOMER_LIMIT,
    PROBE_MAX, PROBE_P99,
)
from ..common import Conn, KiB, MiB, mib, mono, ms, pct, seq_of
from ..ws import WsConn

DESCRIPTION = "SIGTERM with 30 000 messages queued, calls in flight, WebSocket clients"
BUDGET_SECS = 300
BOUNDED = True


def run(r):
    n_msgs = 30_000
    size = 500  # 15 MB per subscriber: more than the kernel buffers take (tcp_wmem max 4 MiB), so most waits in the gateway
    callers_n, calls_each = 10, 100
    idle_ws_n = 20
    # --max-queue-bytes 32 MiB: the 15 MB must be queued whole, not thinned
    b = Bounded(r, "shutdown", ["--max-queue-bytes", str(32 * MiB)])
    try:
        port = b.gw.port
        # A subscriber that reads, but not until the signal: with SO_RCVBUF
        # 64 KiB nearly all of the 30 000 messages wait in the gateway.
        sub = Conn(port, rcvbuf=64 * KiB, timeout=30)
        sub.request_ack({"op": "subscribe", "topic": "/shut", "type": "x", "id": "s"})
        wsub = WsConn(b.gw.ws_port, rcvbuf=64 * KiB)
        wsub.send_text({"op": "subscribe", "topic": "/shut", "type": "x"})
        wsub.send_text({"op": "call_service", "service": "/rosgate/stats", "id": "w", "args": {}})
        wsub.wait_for(lambda o: o.get("id") == "w")
        idle_ws = [WsConn(b.gw.ws_port) for _ in range(idle_ws_n)]
        prov = Conn(port, timeout=30)
        prov.request_ack({"op": "advertise_service", "service": "/shut/never", "type": "x/N", "id": "adv"})
        prov_r = LineReader(prov)
        prov_r.start()
        callers = [Conn(port, timeout=30) for _ in range(callers_n)]
        pub = Conn(port, timeout=60)
        pub.request_ack({"op": "advertise", "topic": "/shut", "type": "x", "id": "a"})
        b.begin(newcomers=True)
        for i, c in enumerate(callers):
            c.send(b"".join(b'{"op":"call_service","service":"/shut/never","id":%d,"args":{}}\n' % k
                            for k in range(calls_each)))
        pad = b"s" * (size - 60)
        pub.send(b"".join(b'{"op":"publish","topic":"/shut","msg":{"seq":%d,"pad":"%s"}}\n' % (k, pad)
                          for k in range(n_msgs)))
        pub.call("/rosgate/stats", {}, "sync", 30)  # every publish processed
        deadline = mono() + 30
        while b.sc.get()["calls_pending"] < callers_n * calls_each and mono() < deadline:
            time.sleep(0.05)
        st_pre = b.sc.get()
        time.sleep(max(0.0, min(ATTACK_MIN, 3.0) - (mono() - b.t0)))
        b.quiet()
        b.t_leave = mono()
        b.t_probe_end = mono()
        b.sched1 = b.gw.schedstat()
        b.probe.stop()
        out = {"sub": [], "sub_eof": False, "ws_msgs": 0, "ws_close": None, "ws_order": True,
               "idle_close": [], "calls": [], "late": None}
        go = threading.Event()

        def read_sub():
            go.wait()
            last = -1
            while True:
                try:
                    ln = sub.readline(10)
                except TimeoutError:
                    return
                if ln is None:
                    out["sub_eof"] = True
                    return
                if ln.startswith(b'{"op":"publish"'):
                    seq = seq_of(ln)
                    out["sub"].append(seq)
                    last = seq

        def read_ws(ws, key):
            go.wait()
            while True:
                try:
                    f = ws.frame(10)
                except (TimeoutError, OSError):
                    return
                if f is None:
                    return
                if f[0] == 0x8:
                    code = int.from_bytes(f[1][:2], "big") if len(f[1]) >= 2 else None
                    if key == "ws":
                        out["ws_close"] = code
                    else:
                        out["idle_close"].append(code)
                    return
                if key == "ws" and f[0] == 0x1 and f[1].startswith(b'{"op":"publish"'):
                    if seq_of(f[1]) != out["ws_msgs"]:
                        out["ws_order"] = False
                    out["ws_msgs"] += 1

        def read_caller(c):
            go.wait()
            got = []
            while len(got) < calls_each:
                try:
                    ln = c.readline(10)
                except TimeoutError:
                    break
                if ln is None:
                    break
                o = json.loads(ln)
                if o.get("op") == "service_response":
                    got.append((o.get("result"), str(o.get("values"))))
            out["calls"].append(got)
        ths = [threading.Thread(target=read_sub, daemon=True), threading.Thread(target=read_ws, args=(wsub, "ws"), daemon=True)]
        ths += [threading.Thread(target=read_ws, args=(w, "idle"), daemon=True) for w in idle_ws]
        ths += [threading.Thread(target=read_caller, args=(c,), daemon=True) for c in callers]
        for t in ths:
            t.start()
        t_sig = mono()
        b.gw.proc.send_signal(signal.SIGTERM)
        go.set()
        time.sleep(0.1)
        try:  # a client arriving after the signal must not be served
            late = Conn(port, timeout=3)
            try:
                late.request_ack({"op": "subscribe", "topic": "/late", "type": "x", "id": "late"}, 3)
                out["late"] = "served"
            except (TimeoutError, EOFError, OSError) as e:
                out["late"] = f"not served ({type(e).__name__})"
            late.close()
        except OSError as e:
            out["late"] = f"refused ({type(e).__name__})"
        try:
            rc = b.gw.proc.wait(15)
        except subprocess.TimeoutExpired:
            rc = None
        t_exit = mono() - t_sig
        for t in ths:
            t.join(15)
        samples = b.sampler.stop()
        peak = max(x for _, x in samples)
        rtts, fails = b.probe.window(b.t0, b.t_probe_end)
        p99, mx = pct(rtts, 0.99), max(rtts, default=0.0)
        seqs = out["sub"]
        calls_false = sum(1 for g in out["calls"] for res, v in g if res is False and "shutting down" in v)
        calls_got = sum(len(g) for g in out["calls"])
        allowance = b.base + ALLOW_FIXED + int(ALLOW_FRACTION * b.budget) + ALLOW_PER_CONN * 40
        r.fig(f"probe: {len(rtts)} round trips before the signal, p50 {ms(pct(rtts, 0.5))} p99 {ms(p99)} max {ms(mx)}, "
              f"failures {len(fails)}; RSS baseline {mib(b.base)}, peak {mib(peak)} (bound {mib(b.budget + allowance)}); "
              f"RSS after: n/a (the process exits)")
        r.fig(f"before SIGTERM: {n_msgs} messages of {size} B published, queued_bytes={st_pre['queued_bytes']}, calls_pending="
              f"{st_pre['calls_pending']}, {idle_ws_n + 1} WebSocket clients, connections_open={st_pre['connections_open']}")
        r.fig(f"after SIGTERM: exit status {rc} after {t_exit:.2f} s (--shutdown-grace-ms 2000); TCP subscriber got "
              f"{len(seqs)}/{n_msgs} (in order {seqs == list(range(len(seqs)))}, then EOF {out['sub_eof']}); WebSocket "
              f"subscriber got {out['ws_msgs']}/{n_msgs} (in order {out['ws_order']}) then close {out['ws_close']}; idle "
              f"WebSocket clients' close codes {sorted(set(map(str, out['idle_close'])))} ({len(out['idle_close'])}/{idle_ws_n}); "
              f"callers got {calls_got}/{callers_n * calls_each} responses, {calls_false} result:false 'shutting down'; "
              f"a client connecting 0.1 s after the signal: {out['late']} (before: 3939 of 30 000 arrived, no "
              f"result:false, browsers saw 1006)")
        r.check(not fails and rtts and p99 < PROBE_P99 and mx < PROBE_MAX,
                f"probe p99 {ms(p99)} < 10 ms and max {ms(mx)} < 100 ms before the signal")
        r.check(peak <= b.budget + allowance, f"peak RSS {mib(peak)} <= {mib(b.budget + allowance)}")
        r.check(b.nc is not None and b.nc.all_times() and not b.nc.failures and max(b.nc.all_times()) < NEWCOMER_LIMIT,
                "newcomers got in within 3 s before the signal")
        r.check(st_pre["queued_bytes"] > n_msgs * size // 3,
                f"the messages were queued in the gateway at the signal (queued_bytes {st_pre['queued_bytes']} > "
                f"a third of {n_msgs * size})")
        r.check(len(seqs) == n_msgs and seqs == list(range(n_msgs)) and out["sub_eof"],
                f"all {n_msgs} queued messages reached the TCP subscriber, in order, then EOF")
        r.check(out["ws_msgs"] == n_msgs and out["ws_order"] and out["ws_close"] == 1001,
                "the WebSocket subscriber got all of them, then close 1001")
        r.check(out["idle_close"] == [1001] * idle_ws_n, "every idle WebSocket client got close 1001")
        r.check(calls_false == callers_n * calls_each, "every call in flight failed with result:false 'shutting down'")
        r.check(rc == 0 and t_exit < 2.0 + 1.0, f"exit status 0 within the grace + 1 s (rc {rc}, {t_exit:.2f} s)")
        r.check(out["late"] is not None and not out["late"].startswith("served"), "no new client served after the signal")
        for c in callers + idle_ws + [sub, wsub, prov, pub]:
            c.close()
        prov_r.stop()
    finally:
        b.close(exited=True)
