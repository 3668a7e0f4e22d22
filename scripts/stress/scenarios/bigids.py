"""bigids: calls with 1 MiB ids, and 1000-byte ids x 4096 per caller to a
provider that never answers."""

import json
import threading
import time

from ..bounded import Bounded, LEDGER_SLACK, LineReader, counters, stat
from ..common import Conn, MiB, QUICK, mib, mono

DESCRIPTION = "calls with 1 MiB ids, and 1000-byte ids x 4096 per caller to a provider that never answers"
BUDGET_SECS = 300
BOUNDED = True


def run(r):
    big = 16 if QUICK else 64
    callers = 16 if QUICK else 24
    per = 4096  # --max-calls-per-conn: the most one caller may have in flight
    hold = 2.0 if QUICK else 5.0
    svc = "/bigids/never"
    b = Bounded(r, "bigids", [])
    try:
        prov = Conn(b.gw.port)
        prov.request_ack({"op": "advertise_service", "service": svc, "type": "x/Never", "id": "adv"})
        forwarded = [0]

        def on_prov(line):
            if line.startswith(b'{"op":"call_service"'):
                forwarded[0] += 1
        prov_r = LineReader(prov, on_prov)
        prov_r.start()
        b.begin()
        # A: calls with 1 MiB ids, one connection
        a = Conn(b.gw.port, timeout=60)
        a_err = {"n": 0, "with_id": 0}

        def on_a(line):
            o = json.loads(line)
            if o.get("op") == "status" and o.get("level") == "error":
                a_err["n"] += 1
                if "id" in o:
                    a_err["with_id"] += 1
        a.send({"op": "subscribe", "topic": "/bigids/open", "type": "x"})  # its opening
        a_r = LineReader(a, on_a)
        a_r.start()
        line = b'{"op":"call_service","service":"%s","id":"%s","timeout":300,"args":{}}\n' % (svc.encode(), b"i" * MiB)
        ta = mono()
        for _ in range(big):
            a.send(line)
        while a_err["n"] < big and mono() - ta < 60:
            time.sleep(0.01)
        t_a = mono() - ta
        st_a = b.sc.get()
        fwd_a = forwarded[0]
        # B: `callers` x 4096 calls with 1000-byte ids and timeout 300
        def blob(c):
            parts = []
            for k in range(per):
                cid = f"{c:03d}-{k:05d}-".ljust(1000, "x")
                parts.append(b'{"op":"call_service","service":"%s","id":"%s","timeout":300,"args":{}}\n'
                             % (svc.encode(), cid.encode()))
            return b"".join(parts)
        res = {"sent_all": 0, "closed": 0, "closed_sending": 0, "responses": 0, "errors": []}
        lock = threading.Lock()
        conns = []

        def caller(c):
            try:
                cc = Conn(b.gw.port, timeout=60)
            except OSError as e:
                res["errors"].append(repr(e))
                return
            conns.append(cc)
            try:
                cc.send(blob(c))
                with lock:
                    res["sent_all"] += 1
            except OSError:
                with lock:
                    res["closed_sending"] += 1
                    res["closed"] += 1
                return
            while not stop_b.is_set():
                try:
                    ln = cc.readline(0.2)
                except TimeoutError:
                    continue
                except OSError:
                    ln = None
                if ln is None:
                    if not stop_b.is_set():
                        with lock:
                            res["closed"] += 1
                    return
                if ln.startswith(b'{"op":"service_response"'):
                    with lock:
                        res["responses"] += 1
        stop_b = threading.Event()
        tb = mono()
        ths = [threading.Thread(target=caller, args=(c,), daemon=True) for c in range(callers)]
        for t in ths:
            t.start()
        while mono() - tb < 60 and res["sent_all"] + res["closed_sending"] + len(res["errors"]) < callers:
            time.sleep(0.05)
        t_b = mono() - tb
        time.sleep(hold)
        st_b = b.sc.get()
        stop_b.set()
        b.quiet()
        for cc in conns:
            cc.close()
        a_r.stop()
        a.close()
        for t in ths:
            t.join(10)
        b.leave()
        st = b.end(conns=callers + 5, opened=callers + 2)
        prov_r.stop()
        pk = b.watch.peak
        r.fig(f"A: {big} calls with 1 MiB ids from one connection in {t_a:.2f} s: {a_err['n']} error statuses "
              f"({a_err['with_id']} echoed an id), forwarded to the provider {fwd_a}, calls_pending "
              f"{st_a['calls_pending']}, errors.id_too_long {stat(st_a, 'errors.id_too_long')} (before: every "
              f"one stored, 3 GiB from one connection)")
        r.fig(f"B: {callers} callers x {per} calls with 1000-byte ids and timeout 300 to a provider that "
              f"never answers ({callers * per} calls, {mib(callers * per * 1070)} of ids and lines) in {t_b:.1f} s: "
              f"{res['sent_all']} callers got all theirs in, {res['closed']} closed by the gateway, "
              f"{res['responses']} responses; provider got {forwarded[0] - fwd_a} forwarded")
        r.fig(f"B: peaks calls_pending={pk.get('calls_pending')} memory_calls_bytes={pk.get('memory_calls_bytes')} "
              f"memory_control_bytes={pk.get('memory_control_bytes')}; at the end of the hold: calls_pending="
              f"{st_b['calls_pending']} memory_bytes={st_b['memory_bytes']}")
        r.fig("counters: " + counters(st, ["errors.id_too_long", "closes.memory_pressure", "calls_failed_too_many",
                                           "calls_forwarded", "calls_pending", "closes.peer_closed"]))
        r.check(a_err["n"] == big and a_err["with_id"] == 0 and fwd_a == 0 and st_a["calls_pending"] == 0
                and stat(st_a, "errors.id_too_long") == big,
                "1 MiB ids refused (errors.id_too_long), never echoed, never stored or forwarded")
        r.check(stat(st, "closes.memory_pressure") > 0 and pk.get("memory_calls_bytes", 0) <= b.budget + LEDGER_SLACK,
                "calls with 1000-byte ids bounded by the budget (closes.memory_pressure > 0)")
        r.check(st["calls_pending"] == 0 and prov_r.eof is False, "nothing left in flight; the provider was kept")
        prov.close()
    finally:
        b.close()
