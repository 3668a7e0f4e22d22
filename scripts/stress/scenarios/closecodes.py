"""closecodes: WebSocket close codes 1005, 1006, 0, 999, 5000 answered with 1002."""

from ..bounded import ATTACK_MIN, Bounded, stat
from ..common import mono
from ..ws import WsConn

DESCRIPTION = "WebSocket close codes 1005, 1006, 0, 999, 5000 answered with 1002"
BUDGET_SECS = 300
BOUNDED = True


def run(r):
    invalid = [1005, 1006, 0, 999, 5000, 1004, 1015, 2999]
    valid = [1000, 1001, 3000, 4999]
    b = Bounded(r, "closecodes", [])
    try:
        b.begin()
        st_a = b.sc.get()
        bad = []
        got = {}
        n = 0
        extra = {}

        def one(payload):
            ws = WsConn(b.gw.ws_port)
            try:
                ws.send_frame(0x8, payload)
                f = ws.frame(5)
                while f is not None and f[0] != 0x8:
                    f = ws.frame(5)
                eof = ws.frame(5) is None if f is not None else True
                return f, eof
            finally:
                ws.close()
        t0 = mono()
        while n == 0 or mono() - t0 < ATTACK_MIN:
            n += 1
            for code in invalid + valid:
                f, eof = one(code.to_bytes(2, "big"))
                want = 1002 if code in invalid else code
                reply = int.from_bytes(f[1][:2], "big") if f is not None and len(f[1]) >= 2 else None
                got.setdefault(code, set()).add(reply)
                if reply != want or not eof:
                    bad.append((code, reply, eof))
            if n == 1:
                for name, payload in (("empty", b""), ("1 byte", b"\x03"), ("1000+reason", b"\x03\xe8bye"),
                                      ("1000+bad UTF-8 reason", b"\x03\xe8\xff")):
                    f, eof = one(payload)
                    extra[name] = (f[1] if f is not None else None, eof)
        b.quiet()
        b.leave()
        st = b.end(conns=5, opened=2)
        d = stat(st, "closes.protocol_error") - stat(st_a, "closes.protocol_error")
        n_extra_bad = 2  # 1-byte payload, invalid UTF-8 reason: protocol errors under RFC 6455 7.1.5/5.5.1
        r.fig(f"attack: {n} rounds of {len(invalid) + len(valid)} WebSocket clients each sending one close frame; "
              f"answers: " + ", ".join(f"{c}->{sorted(v, key=str)}" for c, v in got.items()))
        r.fig("edge cases (not judged): " + ", ".join(f"{k} -> {v[0]!r} (then EOF {v[1]})" for k, v in extra.items()))
        r.fig("counters: closes.protocol_error +" + str(d))
        r.check(not bad, f"1005, 1006, 0, 999, 5000 (and 1004, 1015, 2999) answered with 1002, 1000/1001/3000/4999 "
                         f"echoed, then the connection closed {bad[:3]}")
        r.check(d >= n * len(invalid), f"closes.protocol_error moved by at least {n * len(invalid)} (+{d}; the "
                                       f"edge cases may add up to {n_extra_bad})")
    finally:
        b.close()
