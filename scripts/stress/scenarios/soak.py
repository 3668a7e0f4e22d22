"""soak: the loads of the first scenarios (load.py: streams, churn, a
flood, churning providers, long lines, connection bursts) mixed, at a
moderate rate, for SOAK_SECS; judged on correctness, RSS trend and a clean
end."""

import random
import selectors
import time

from ..common import (
    Conn, Gateway, KiB, MiB, SOAK_SECS, check_clean, finish_gateway, mib, mono, raise_nofile, stats,
)
from ..load import Burst, Churner, Flood, PingLoop, ProviderChurn, SteadyStream, long_line_attack, open_many

DESCRIPTION = "all of the above, mixed, at a moderate rate"
BUDGET_SECS = None
BOUNDED = False


def conns_burst(port, n, topic):
    """n connections subscribe, one publish, everyone accepted gets it, close.
    Returns (accepted, rejected, received)."""
    p = Conn(port)  # before the burst, so the limit never turns it away,
    # and opened (one complete line): at the limit the gateway admits a
    # newcomer by evicting the oldest connection that never sent a line (P21)
    p.request_ack({"op": "advertise", "topic": topic, "type": "x", "id": "burst-pub"})
    Burst.active += 1
    try:
        return _conns_burst(port, n, topic, p)
    finally:
        Burst.active -= 1
        Burst.last_end = mono()


def _conns_burst(port, n, topic, p):
    socks = open_many(port, n, timeout=10)
    sel = selectors.DefaultSelector()
    state = {}
    for s in socks:
        try:
            s.send(b'{"op":"subscribe","topic":"%s","type":"x","id":1}\n' % topic.encode())
        except OSError:
            pass
        sel.register(s, selectors.EVENT_READ)
        state[s.fileno()] = [s, bytearray()]
    accepted, rejected = set(), set()
    deadline = mono() + 20
    while len(accepted) + len(rejected) < len(socks) and mono() < deadline:
        for key, _ in sel.select(0.5):
            st = state[key.fd]
            try:
                d = st[0].recv(4096)
            except BlockingIOError:
                continue
            except OSError:
                d = b""
            st[1] += d
            if b"too many connections" in st[1] or not d:
                rejected.add(key.fd)
                sel.unregister(st[0])
            elif b"subscribed" in st[1]:
                accepted.add(key.fd)
                st[1] = bytearray()
    p.send({"op": "publish", "topic": topic, "msg": {"burst": True}})
    waiting = set(accepted)
    deadline = mono() + 20
    while waiting and mono() < deadline:
        for key, _ in sel.select(0.5):
            st = state[key.fd]
            try:
                d = st[0].recv(4096)
            except BlockingIOError:
                continue
            except OSError:
                d = b""
            st[1] += d
            if b'"burst":true' in st[1]:
                waiting.discard(key.fd)
            if not d:
                waiting.discard(key.fd)
                sel.unregister(st[0])
    p.close()
    sel.close()
    for s in socks:
        s.close()
    return len(accepted), len(rejected), len(accepted) - len(waiting)


def run(r):
    secs = SOAK_SECS
    interval = 2.0 if secs < 120 else 10.0
    burst_every = 10.0 if secs < 120 else 60.0
    longline_every = 10.0 if secs < 120 else 30.0
    nofile = 1024  # max connections clamp to 992: the bursts go beyond it
    burst = 1100
    raise_nofile(burst + 500)
    # Moderate caps, so that what the allocator legitimately keeps after a
    # long line or a full slow-subscriber queue (see longline, slowsub) stays
    # small next to the growth a leak would show.
    max_line = max_queue = 1 * MiB
    gw = Gateway("soak", ["--max-line-bytes", str(max_line), "--max-queue-bytes", str(max_queue)], nofile=nofile)
    try:
        stats(gw.port)
        rss_start = gw.rss()
        steady = SteadyStream(gw.port, "/soak_steady", rate=1000, size=64).start()
        ch = Churner(gw.port, "/soak_steady", threads=1, rate=40).start()
        fl = Flood(gw.port, "/soak_flood", 16 * KiB, rate_bps=1 * MiB, slow=True,
                   slow_lifetime=45.0 if secs >= 120 else 8.0).start()
        pc = ProviderChurn(gw.port, "/soak_svc", callers=2, pace=0.01).start()
        ping = PingLoop(gw.port, "/soak_ping", period=0.05)
        ping.start()
        rnd = random.Random(3)
        # Warm-up, outside the trend: every allocation pattern twice (the
        # allocator keeps what the second long line used, see longline).
        tw = mono()
        bursts = [conns_burst(gw.port, burst, "/soak_burst")]
        attacks = [long_line_attack(gw.port, 8 * MiB, 256 * KiB, rnd)[0] for _ in range(2)]
        bursts.append(conns_burst(gw.port, burst, "/soak_burst"))
        r.fig(f"warm-up {mono() - tw:.0f} s (2 bursts, 2 long lines): RSS {mib(rss_start)} -> {mib(gw.rss())}")
        # RSS is sampled from this loop, between the bursts and the long-line
        # attacks it runs, so a sample never lands inside one of them.
        t0 = mono()
        samples = [(0.0, gw.rss())]
        next_sample = t0 + interval
        next_burst = t0 + burst_every / 2
        next_line = t0 + longline_every / 2
        while mono() - t0 < secs:
            now = mono()
            if now >= next_burst:
                bursts.append(conns_burst(gw.port, burst, "/soak_burst"))
                next_burst = now + burst_every
            elif now >= next_line:
                ans, _ = long_line_attack(gw.port, 8 * MiB, 256 * KiB, rnd)
                attacks.append(ans)
                next_line = now + longline_every
            else:
                time.sleep(min(0.5, max(0.0, min(next_burst, next_line, next_sample, t0 + secs) - now)))
            if mono() >= next_sample:
                samples.append((mono() - t0, gw.rss()))
                next_sample += interval
            if not gw.alive():
                break
        ping.stop()
        pc.stop()
        fl.stop()
        ch.stop()
        steady.stop()
        elapsed = mono() - t0
        st = stats(gw.port)
        tot = pc.totals()
        # trend: least squares over the samples after a warm-up of 20 %
        warm = [(t, x) for t, x in samples if t >= 0.2 * elapsed]
        if len(warm) >= 3:
            mt = sum(t for t, _ in warm) / len(warm)
            mx = sum(x for _, x in warm) / len(warm)
            var = sum((t - mt) ** 2 for t, _ in warm) or 1e-9
            slope = sum((t - mt) * (x - mx) for t, x in warm) / var
            span = warm[-1][0] - warm[0][0]
            third = max(1, len(warm) // 3)
            floor_growth = min(x for _, x in warm[-third:]) - min(x for _, x in warm[:third])
        else:
            slope, span, floor_growth = 0.0, 0.0, 0
        r.fig(f"soak {elapsed:.0f} s: RSS every {interval:.0f} s (MiB): "
              + " ".join(f"{x / MiB:.1f}" for _, x in samples))
        r.fig(f"RSS trend after warm-up: {slope * 60 / KiB:+.0f} KiB/min ({mib(slope * span)} over {span:.0f} s); "
              f"floor growth first->last third {floor_growth / KiB:+.0f} KiB")
        r.fig(f"steady: sent {steady.sent}, received {steady.received}, lost {steady.lost}, reordered {steady.reordered}; "
              f"churn cycles {ch.done} ({ch.failures} failed, {ch.rejected} turned away at the limit during bursts)")
        r.fig(f"flood: {fl.sent} x 16 KiB at 1 MiB/s, fast subscriber lost {fl.fast_lost} reordered {fl.fast_reordered}; "
              f"slow subscribers {len(fl.slow_sessions)} (closed by gateway {sum(1 for s in fl.slow_sessions if s[3])}), "
              f"dropped {st['dropped']}, slow re-subscribes turned away {fl.slow_rejected}"
              + (f", errors {fl.errors[:3]}" if fl.errors else ""))
        r.fig(f"services: {tot['sent']} calls, {tot['responses']} responses, ok {tot['ok']}, duplicate_or_unknown "
              f"{tot['duplicate_or_unknown']}, misrouted {tot['misrouted']}, unanswered {tot['unanswered']}; "
              f"{pc.providers} providers ({pc.provider_rejected} turned away during bursts)"
              + (f", errors {pc.errors[:3]}" if pc.errors else ""))
        r.fig(f"bursts of {burst} (limit 992): " + ", ".join(f"{a} served/{b} rejected/{g} got the publish" for a, b, g in bursts))
        r.fig(f"long-line attacks (8 MiB, limit 1 MiB): {len(attacks)}, connection kept each time: {all(attacks)}; other client "
              f"{ping.count} round trips, max latency {ping.max_latency * 1000:.0f} ms")
        r.fig(f"gateway: closes={st['closes']} accept_errors={st['accept_errors']} CPU {gw.cpu():.1f} s")
        ok_clean, _, text = check_clean(gw.port, timeout=15)
        r.fig(text)
        tol = max(4 * MiB, 0.05 * (sum(x for _, x in warm) / max(1, len(warm))))
        r.check(gw.alive(), "gateway stayed up")
        r.check(steady.lost == 0 and steady.reordered == 0 and not steady.errors, "steady stream: zero loss, zero reordering")
        r.check(ch.failures == 0, f"churn cycles all succeeded or were cleanly turned away {ch.fail_samples[:3]}")
        r.check(fl.fast_lost == 0 and fl.fast_reordered == 0 and not fl.errors, "flood: fast subscriber kept up")
        r.check(tot["responses"] == tot["sent"] and tot["duplicate_or_unknown"] == 0 and tot["misrouted"] == 0
                and not pc.errors, "services: exactly one correct response per call")
        r.check(all(a + b == burst and g == a for a, b, g in bursts), "bursts: every connection served or rejected")
        r.check(all(attacks) and not ping.failures and ping.max_latency < 1.0, "long lines: everyone kept being served")
        r.check(slope * span < tol and floor_growth < tol,
                f"no RSS growth trend ({mib(slope * span)} and {mib(floor_growth)} < {mib(tol)})")
        r.check(ok_clean, "no leak at the end")
    finally:
        finish_gateway(r, gw)
