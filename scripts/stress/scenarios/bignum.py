"""bignum: integers of 4301+ digits, 1e400, lone surrogates: every line sent must parse."""

import json
import math
import threading
import time

from ..bounded import ATTACK_MIN, Bounded, LineReader, stat
from ..common import Conn, QUICK, mono
from ..ws import WsConn, WsReader

DESCRIPTION = "integers of 4301+ digits, 1e400, lone surrogates: every line sent must parse"
BUDGET_SECS = 300
BOUNDED = True


def strict_json(line):
    """json.loads, then what Python accepts but serde_json would refuse: a
    non-finite float (1e400 parses as inf) or a string with a lone surrogate."""
    v = json.loads(line)

    def walk(x):
        if isinstance(x, float):
            if not math.isfinite(x):
                raise ValueError(f"non-finite number {x}")
        elif isinstance(x, str):
            x.encode("utf-8")  # raises on a lone surrogate
        elif isinstance(x, list):
            for y in x:
                walk(y)
        elif isinstance(x, dict):
            for k, y in x.items():
                walk(k)
                walk(y)
    walk(v)
    return v


BAD_PAYLOADS = [
    ("number_out_of_range", "1" + "0" * 4300),  # 4301 digits: Python's int limit too
    ("number_out_of_range", "-" + "9" * 5000),
    ("number_out_of_range", "1e400"),
    ("number_out_of_range", "-1e400"),
    ("number_out_of_range", "2e308"),
    ("number_out_of_range", "1" + "0" * 309),
    ("number_out_of_range", '{"a":[1,{"b":1e309}]}'),
    ("lone_surrogate", '"\\ud800"'),
    ("lone_surrogate", '"\\udc00"'),
    ("lone_surrogate", '"a\\ud800b"'),
    ("lone_surrogate", '{"\\udfff":1}'),
    ("lone_surrogate", '"\\ud800\\ud800"'),
    ("lone_surrogate", '"\\udc00\\ud800"'),
    ("lone_surrogate", '["x","\\ud83d"]'),
]
GOOD_PAYLOADS = [
    "1.79769313486231e308", "-1.79769313486231e308", "1e-400", '"\\ud83d\\ude00"', "12345678901234567890",
    "1" + "0" * 308, '{"k":"\\u00e9"}', '"\\\\ud800"',
]


def run(r):
    rounds = 50 if QUICK else 1000
    b = Bounded(r, "bignum", [])
    try:
        res = {"sub": 0, "ws": 0, "bad_lines": [], "errors_by_id": {}, "pub_lines": 0}
        lock = threading.Lock()

        def bad(where, line, e):
            with lock:
                if len(res["bad_lines"]) < 5:
                    res["bad_lines"].append(f"{where}: {e!r} in {line[:80]!r}")
                res.setdefault("nbad", 0)
                res["nbad"] = res.get("nbad", 0) + 1

        def on_sub(line):
            try:
                o = strict_json(line)
            except Exception as e:  # noqa: BLE001
                bad("tcp subscriber", line, e)
                return
            if o.get("op") == "publish":
                res["sub"] += 1

        def on_ws(op, payload):
            try:
                o = strict_json(payload.decode("utf-8"))
            except Exception as e:  # noqa: BLE001
                bad("ws subscriber", payload, e)
                return
            if o.get("op") == "publish":
                res["ws"] += 1

        def on_pub(line):
            res["pub_lines"] += 1
            try:
                o = strict_json(line)
            except Exception as e:  # noqa: BLE001
                bad("publisher", line, e)
                return
            if o.get("op") == "status" and o.get("level") == "error":
                res["errors_by_id"][o.get("id")] = o.get("msg")
        sub = Conn(b.gw.port, timeout=60)
        sub.request_ack({"op": "subscribe", "topic": "/bignum", "type": "x", "id": "s"})
        ws = WsConn(b.gw.ws_port)
        ws.send_text({"op": "subscribe", "topic": "/bignum", "type": "x"})
        ws.send_text({"op": "call_service", "service": "/rosgate/stats", "id": "w", "args": {}})
        ws.wait_for(lambda o: o.get("id") == "w")
        pub = Conn(b.gw.port, timeout=60)
        pub.request_ack({"op": "advertise", "topic": "/bignum", "type": "x", "id": "a"})
        rds = [LineReader(sub, on_sub), WsReader(ws, on_ws), LineReader(pub, on_pub)]
        for x in rds:
            x.start()
        st_a = b.sc.get()
        b.begin()
        cases = [(c, p, True) for c, p in BAD_PAYLOADS] + [(None, p, False) for p in GOOD_PAYLOADS]
        ids_bad = set()
        t0 = mono()
        for k in range(rounds):
            lines = []
            for i, (code, payload, is_bad) in enumerate(cases):
                pid = f"{k}-{i}"
                if is_bad:
                    ids_bad.add(pid)
                lines.append(b'{"op":"publish","id":"%s","topic":"/bignum","msg":%s}\n' % (pid.encode(), payload.encode()))
            pub.send(b"".join(lines))
            if QUICK:
                time.sleep(ATTACK_MIN / rounds)
        pub.send({"op": "call_service", "service": "/rosgate/stats", "id": "done", "args": {}})
        want = rounds * len(GOOD_PAYLOADS)
        deadline = mono() + 60
        while (res["sub"] < want or res["ws"] < want or len(res["errors_by_id"]) < len(ids_bad)) and mono() < deadline:
            time.sleep(0.01)
        t_all = mono() - t0
        time.sleep(0.3)
        b.quiet()
        for x in rds:
            x.stop()
        sub.close()
        ws.close()
        pub.close()
        b.leave()
        st = b.end(conns=7, opened=3)
        d_num = stat(st, "errors.number_out_of_range") - stat(st_a, "errors.number_out_of_range")
        d_sur = stat(st, "errors.lone_surrogate") - stat(st_a, "errors.lone_surrogate")
        n_num = sum(1 for c, _ in BAD_PAYLOADS if c == "number_out_of_range")
        n_sur = len(BAD_PAYLOADS) - n_num
        wrong_ids = [i for i in res["errors_by_id"] if i not in ids_bad]
        r.fig(f"attack: {rounds} rounds of {len(BAD_PAYLOADS)} refusable payloads (4301- and 5000-digit integers, "
              f"1e400, 2e308, 1e309 nested, lone and reversed surrogates in values and keys) and "
              f"{len(GOOD_PAYLOADS)} edge cases that must pass (1.79769313486231e308, 1e-400, a 309-digit integer, "
              f"a surrogate pair, an escaped backslash) in {t_all:.1f} s")
        r.fig(f"subscribers: TCP got {res['sub']}, WebSocket got {res['ws']} of {want}; lines that Python's json.loads "
              f"(or the serde_json rules: finite, no lone surrogate) refused: {res.get('nbad', 0)} {res['bad_lines'][:3]}")
        r.fig(f"publisher: {len(res['errors_by_id'])} error statuses for {len(ids_bad)} refused publishes, "
              f"{len(wrong_ids)} for ids that should pass; errors.number_out_of_range +{d_num}, "
              f"errors.lone_surrogate +{d_sur}")
        r.check(res.get("nbad", 0) == 0, "every line and frame the gateway sent parsed (strictly) with json.loads")
        r.check(res["sub"] == want and res["ws"] == want, "every acceptable payload delivered on both transports")
        r.check(len(res["errors_by_id"]) == len(ids_bad) and not wrong_ids
                and d_num == rounds * n_num and d_sur == rounds * n_sur,
                "each refused publish got its error status with its id, counted by kind")
    finally:
        b.close()
