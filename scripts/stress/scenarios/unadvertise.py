"""unadvertise: advertise/unadvertise of one service while its provider has 80k calls of another."""

import json
import threading
import time

from ..bounded import Bounded, LineReader, O1_RATIO, Phases, counters
from ..common import Conn, QUICK, mono, ms, pct

DESCRIPTION = "advertise/unadvertise of one service while its provider has 80k calls of another"
BUDGET_SECS = 400
BOUNDED = True


def run(r):
    calls = 20_000 if QUICK else 80_000
    per_caller = 4000  # under --max-calls-per-conn (4096)
    callers_n = -(-calls // per_caller)
    cycle_secs = 1.5 if QUICK else 5.0
    b = Bounded(r, "unadvertise", ["--call-timeout-ms", "120000"])
    try:
        prov = Conn(b.gw.port, timeout=60)
        prov.request_ack({"op": "advertise_service", "service": "/ua/busy", "type": "x/Busy", "id": "adv"})
        got = {"calls": [], "acks": set()}
        lock = threading.Lock()

        def on_prov(line):
            if line.startswith(b'{"op":"call_service"'):
                o = json.loads(line)
                with lock:
                    got["calls"].append(o["id"])
            elif line.startswith(b'{"op":"status"'):
                o = json.loads(line)
                if o.get("level") == "info":
                    got["acks"].add(o.get("id"))
                else:
                    got["acks"].add(("error", o.get("id")))
        prd = LineReader(prov, on_prov)
        prd.start()

        def cycle_pairs(secs, tag):
            lat = []
            end = mono() + secs
            k = 0
            while mono() < end:
                k += 1
                t = mono()
                a, u = f"{tag}-a{k}", f"{tag}-u{k}"
                prov.send(b'{"op":"advertise_service","service":"/ua/other","type":"x/O","id":"%s"}\n'
                          b'{"op":"unadvertise_service","service":"/ua/other","id":"%s"}\n' % (a.encode(), u.encode()))
                deadline = mono() + 10
                while u not in got["acks"] and mono() < deadline:
                    time.sleep(0.0002)
                lat.append(mono() - t)
            return lat
        ph = Phases(b.gw)
        b.begin()
        lat0 = []
        ph.run("pairs, 0 calls in flight", 0, lambda: lat0.extend(cycle_pairs(cycle_secs, "p0")))
        ph.rows[0] = (ph.rows[0][0], len(lat0), *ph.rows[0][2:])
        # callers: `calls` calls in flight to the same provider
        results = {"ok": 0, "fail": 0, "fail_samples": []}
        ccs = []
        for i in range(callers_n):
            cc = Conn(b.gw.port, timeout=120)
            n = min(per_caller, calls - i * per_caller)
            cc.send(b"".join(b'{"op":"call_service","service":"/ua/busy","id":%d,"args":{"c":%d}}\n' % (k, i)
                             for k in range(n)))
            ccs.append((cc, n))
        deadline = mono() + 60
        while len(got["calls"]) < calls and mono() < deadline:
            time.sleep(0.01)
        st_f = b.sc.get()
        lat1 = []
        ph.run(f"pairs, {st_f['calls_pending']} calls in flight", 0, lambda: lat1.extend(cycle_pairs(cycle_secs, "p1")))
        ph.rows[1] = (ph.rows[1][0], len(lat1), *ph.rows[1][2:])
        # then the provider serves them all
        t_srv = mono()
        with lock:
            ids = list(got["calls"])
        for k in range(0, len(ids), 2000):
            prov.s.sendall(b"".join(b'{"op":"service_response","service":"/ua/busy","id":%s,"values":{"ok":1},'
                                    b'"result":true}\n' % json.dumps(x).encode() for x in ids[k:k + 2000]))

        def collect(cc, n):
            k = 0
            while k < n:
                ln = cc.readline(60)
                if ln is None:
                    break
                if ln.startswith(b'{"op":"service_response"'):
                    k += 1
                    o = json.loads(ln)
                    if o.get("result") is True:
                        results["ok"] += 1
                    else:
                        results["fail"] += 1
                        if len(results["fail_samples"]) < 3:
                            results["fail_samples"].append(o.get("values"))
        ths = [threading.Thread(target=collect, args=x, daemon=True) for x in ccs]
        for t in ths:
            t.start()
        for t in ths:
            t.join(120)
        t_srv = mono() - t_srv
        b.quiet()
        for cc, _ in ccs:
            cc.close()
        prd.stop()
        prov.close()
        b.leave()
        st = b.end(conns=callers_n + 6, opened=callers_n + 2)
        p0, p1 = ph.per_op_us(ph.rows[0][0]), ph.per_op_us(ph.rows[1][0])
        r.fig(f"attack: one provider cycles advertise/unadvertise of /ua/other for {cycle_secs} s ({len(lat0)} "
              f"and {len(lat1)} pairs, each waiting for its acks) with 0, then "
              f"{st_f['calls_pending']} calls of /ua/busy in flight to it ({callers_n} callers x {per_caller}); "
              f"pair round trip p50/p99/max: {ms(pct(lat0, 0.5))}/{ms(pct(lat0, 0.99))}/{ms(max(lat0))} -> "
              f"{ms(pct(lat1, 0.5))}/{ms(pct(lat1, 0.99))}/{ms(max(lat1))} (before: 2.5 ms each, probe max 3.9 s)")
        r.fig("phases: " + ph.text())
        r.fig(f"then it served all {len(ids)} calls in {t_srv:.1f} s: {results['ok']} ok, {results['fail']} failed "
              f"{results['fail_samples']}; " + counters(st, ["calls_answered", "calls_timed_out",
                                                              "calls_failed_provider_gone", "calls_pending"]))
        r.check(st_f["calls_pending"] == calls and len(ids) == calls, f"{calls} calls were in flight to the provider")
        r.check(results["ok"] == calls and results["fail"] == 0,
                "every call of the other service answered, none failed by the unadvertisements")
        r.check(p1 <= O1_RATIO * max(p0, 1.0),
                f"advertise/unadvertise cost does not grow with the provider's calls in flight ({p0:.2f} -> "
                f"{p1:.2f} us gateway CPU per pair; <= {O1_RATIO:.0f}x, floor 1 us)")
    finally:
        b.close()
