"""Steady load and attackers of the first scenarios (churn, slowsub,
longline, fdlimit, providerchurn), mixed again by the soak: a sequenced
stream, connection churn, a publisher flood, churning service providers,
long lines, a ping loop."""

import json
import random
import selectors
import socket
import threading
import time

from .common import Conn, HOST, KiB, MiB, Rejected, answered, jline, mono, seq_of


class Burst:
    """When conns_burst runs, the gateway sits at its connection limit and
    turns new clients away: a client whose connection is refused or reset
    while a burst overlapped its lifetime was turned away, not failed."""

    active = 0
    last_end = -1.0

    @classmethod
    def overlapped(cls, since):
        return cls.active > 0 or cls.last_end >= since


TURNED_AWAY = (Rejected, EOFError, BrokenPipeError, ConnectionResetError)


# --------------------------------------------------------------------------
# Reusable workloads


class SteadyStream:
    """A publisher streaming numbered `size`-byte messages at `rate` msg/s to
    one steady subscriber that checks for loss and reordering."""

    def __init__(self, port, topic, rate, size=64):
        self.port, self.topic, self.rate, self.size = port, topic, rate, size
        self.stop_evt = threading.Event()
        self.sent = 0
        self.received = 0
        self.lost = 0
        self.reordered = 0
        self.last = -1
        self.max_send_block = 0.0
        self.errors = []
        self.topic_json = json.dumps(topic).encode()
        self.sub = Conn(port)
        self.sub.request_ack({"op": "subscribe", "topic": topic, "type": "test/Seq", "id": "steady-sub"})
        self.pub = Conn(port)
        self.pub.request_ack({"op": "advertise", "topic": topic, "type": "test/Seq", "id": "steady-adv"})
        self.done_reading = threading.Event()
        self.t_pub = threading.Thread(target=self._publish, daemon=True)
        self.t_sub = threading.Thread(target=self._subscribe, daemon=True)

    def start(self):
        self.t_sub.start()
        self.t_pub.start()
        return self

    def _line(self, i):
        digits = len(str(i))
        pad = "p" * (self.size - len('{"seq":,"pad":""}') - digits)
        return b'{"op":"publish","topic":%s,"msg":{"seq":%d,"pad":"%s"}}\n' % (
            self.topic_json, i, pad.encode())

    def _publish(self):
        try:
            t0 = mono()
            i = 0
            while not self.stop_evt.is_set():
                target = int((mono() - t0) * self.rate)
                if target <= i:
                    time.sleep(0.001)
                    continue
                hi = min(target, i + 500)
                batch = b"".join(self._line(k) for k in range(i, hi))
                t = mono()
                self.pub.send(batch)
                self.max_send_block = max(self.max_send_block, mono() - t)
                i = hi
                self.sent = i
        except Exception as e:  # noqa: BLE001
            self.errors.append(f"publisher: {e!r}")

    def _subscribe(self):
        s = self.sub.s
        buf = bytearray(self.sub.buf)
        s.settimeout(0.2)
        try:
            while not self.done_reading.is_set():
                try:
                    d = s.recv(256 * KiB)
                except socket.timeout:
                    continue
                if not d:
                    self.errors.append("steady subscriber: EOF from gateway")
                    return
                buf += d
                end = buf.rfind(b"\n")
                if end < 0:
                    continue
                chunk = bytes(buf[: end + 1])
                del buf[: end + 1]
                pos = 0
                while True:
                    nl = chunk.find(b"\n", pos)
                    if nl < 0:
                        break
                    if chunk.startswith(b'{"op":"publish"', pos):
                        seq = seq_of(chunk, pos)
                        if seq is not None:
                            self.received += 1
                            if seq > self.last + 1:
                                self.lost += seq - self.last - 1
                            if seq <= self.last:
                                self.reordered += 1
                            else:
                                self.last = seq
                    pos = nl + 1
        except Exception as e:  # noqa: BLE001
            self.errors.append(f"subscriber: {e!r}")

    def stop(self, drain_timeout=15.0):
        self.stop_evt.set()
        self.t_pub.join()
        deadline = mono() + drain_timeout
        while self.last < self.sent - 1 and mono() < deadline and self.t_sub.is_alive():
            time.sleep(0.02)
        self.done_reading.set()
        self.t_sub.join()
        self.lost += max(0, self.sent - 1 - self.last)  # the tail never seen
        self.pub.close()
        self.sub.close()
        return self


class Churner:
    """Threads doing connect/disconnect cycles of several kinds."""

    MODES = ("close", "sub_ack", "sub_read", "partial_line", "sub_rst", "adv_unsub")

    def __init__(self, port, topic, threads, cycles=None, rate=None):
        self.port, self.topic = port, topic
        self.cycles = cycles  # total, or None for "until stopped"
        self.rate = rate  # cycles/s per thread, or None for "as fast as possible"
        self.stop_evt = threading.Event()
        self.done = 0
        self.failures = 0
        self.rejected = 0  # turned away at the connection limit (soak bursts)
        self.fail_samples = []
        self.lock = threading.Lock()
        self.counter = 0
        self.ths = [threading.Thread(target=self._run, args=(k,), daemon=True) for k in range(threads)]

    def start(self):
        for t in self.ths:
            t.start()
        return self

    def _take(self):
        with self.lock:
            if self.cycles is not None and self.counter >= self.cycles:
                return None
            self.counter += 1
            return self.counter

    def _cycle(self, n):
        mode = self.MODES[n % len(self.MODES)]
        c = Conn(self.port, timeout=10)
        try:
            if mode == "close":
                pass
            elif mode in ("sub_ack", "sub_read", "sub_rst"):
                c.request_ack({"op": "subscribe", "topic": self.topic, "type": "test/Seq", "id": n})
                if mode == "sub_read":
                    c.wait_for(lambda o: o.get("op") == "publish", 5)
            elif mode == "partial_line":
                c.send(b'{"op":"subscribe","topic":"%s","ty' % self.topic.encode())
            elif mode == "adv_unsub":
                c.send({"op": "advertise", "topic": self.topic, "type": "test/Seq"})
                c.send({"op": "subscribe", "topic": f"/churn-{n}", "type": "x"})
                c.request_ack({"op": "unsubscribe", "topic": f"/churn-{n}", "id": n})
        finally:
            c.close(rst=(mode == "sub_rst"))

    def _run(self, k):
        t0 = mono()
        mine = 0
        while not self.stop_evt.is_set():
            n = self._take()
            if n is None:
                return
            began = mono()
            try:
                self._cycle(n)
            except TURNED_AWAY as e:
                with self.lock:
                    if isinstance(e, Rejected) or Burst.overlapped(began):
                        self.rejected += 1
                    else:
                        self.failures += 1
                        if len(self.fail_samples) < 5:
                            self.fail_samples.append(repr(e))
            except Exception as e:  # noqa: BLE001
                with self.lock:
                    self.failures += 1
                    if len(self.fail_samples) < 5:
                        self.fail_samples.append(repr(e))
            with self.lock:
                self.done += 1
            mine += 1
            if self.rate:
                delay = t0 + mine / self.rate - mono()
                if delay > 0:
                    self.stop_evt.wait(delay)

    def join(self, timeout=None):
        deadline = None if timeout is None else mono() + timeout
        for t in self.ths:
            t.join(None if deadline is None else max(0.0, deadline - mono()))

    def stop(self):
        self.stop_evt.set()
        self.join(30)
        return self


class Flood:
    """A publisher of big numbered messages, one fast subscriber that must get
    every message in order, and (optionally) a subscriber that never reads,
    created with a small SO_RCVBUF before connect."""

    def __init__(self, port, topic, msg_bytes, total_bytes=None, rate_bps=None, slow=True,
                 stats_at=None, slow_lifetime=None):
        self.port, self.topic, self.msg_bytes = port, topic, msg_bytes
        self.total_msgs = None if total_bytes is None else max(1, total_bytes // msg_bytes)
        self.rate_bps = rate_bps
        self.stats_at = stats_at
        self.slow_lifetime = slow_lifetime
        self.stop_evt = threading.Event()
        self.errors = []
        self.sent = 0
        self.sent_bytes = 0
        self.pub_time = None
        self.max_send_block = 0.0
        self.stats_latency = None
        self.fast_received = 0
        self.fast_bytes = 0
        self.fast_lost = 0
        self.fast_reordered = 0
        self.fast_last = -1
        self.fast_done_at = None
        self.slow_sessions = []  # (received, in_order, last_seq, closed_by_gateway)
        self.slow_rejected = 0
        self.slow = None
        if slow:
            self.slow = self._new_slow()
        self.fast = Conn(port)
        self.fast.request_ack({"op": "subscribe", "topic": topic, "type": "test/Blob", "id": "fast"})
        self.pub = Conn(port)
        self.pub.request_ack({"op": "advertise", "topic": topic, "type": "test/Blob", "id": "flood-adv"})
        self.payload = (b"0123456789abcdef" * (msg_bytes // 16 + 1))[:msg_bytes]
        self.stats_sent_at = None
        self.stats_evt = threading.Event()
        self.fast_stop = threading.Event()
        self.ths = [threading.Thread(target=f, daemon=True) for f in (self._publish, self._fast, self._pub_reader)]
        if slow and slow_lifetime:
            self.ths.append(threading.Thread(target=self._slow_cycle, daemon=True))

    def _new_slow(self):
        c = Conn(self.port, rcvbuf=4096)
        c.request_ack({"op": "subscribe", "topic": self.topic, "type": "test/Blob", "id": "slow"})
        return c

    def drain_slow(self, conn, timeout=3.0):
        """Reads what the gateway kept for a non-reading subscriber."""
        received, in_order, last, closed = 0, True, -1, False
        s = conn.s
        buf = bytearray(conn.buf)
        deadline = mono() + timeout
        idle_until = mono() + 1.0
        while mono() < deadline and mono() < idle_until:
            s.settimeout(0.2)
            try:
                d = s.recv(1 * MiB)
            except socket.timeout:
                continue
            except OSError:
                d = b""
            if not d:
                closed = True
                break
            idle_until = mono() + 1.0
            buf += d
            while True:
                nl = buf.find(b"\n")
                if nl < 0:
                    break
                line = bytes(buf[:nl])
                del buf[: nl + 1]
                if line.startswith(b'{"op":"publish"'):
                    seq = seq_of(line)
                    received += 1
                    if seq is None or seq <= last:
                        in_order = False
                    else:
                        last = seq
        conn.close()
        return received, in_order, last, closed

    def _slow_cycle(self):
        while not self.stop_evt.wait(self.slow_lifetime):
            began = mono()
            try:
                old = self.slow
                self.slow = self._new_slow()
                self.slow_sessions.append(self.drain_slow(old))
            except TURNED_AWAY as e:
                if not (isinstance(e, Rejected) or Burst.overlapped(began)):
                    self.errors.append(f"slow cycle: {e!r}")
                else:
                    self.slow_rejected += 1  # at the limit (soak burst): keep the old one
            except Exception as e:  # noqa: BLE001
                self.errors.append(f"slow cycle: {e!r}")

    def start(self):
        self.t0 = mono()
        for t in self.ths:
            t.start()
        return self

    def _publish(self):
        prefix = b'{"op":"publish","topic":%s,"msg":{"seq":' % json.dumps(self.topic).encode()
        mid = b',"data":"'
        tail = b'"}}\n'
        try:
            t0 = mono()
            i = 0
            while not self.stop_evt.is_set():
                if self.total_msgs is not None and i >= self.total_msgs:
                    break
                if self.rate_bps:
                    due = t0 + (i * self.msg_bytes) / self.rate_bps
                    delay = due - mono()
                    if delay > 0:
                        self.stop_evt.wait(delay)
                        continue
                line = b"".join((prefix, b"%d" % i, mid, self.payload, tail))
                t = mono()
                self.pub.s.sendall(line)
                self.max_send_block = max(self.max_send_block, mono() - t)
                i += 1
                self.sent = i
                self.sent_bytes += len(line)
                if self.stats_at is not None and i == self.stats_at:
                    self.stats_sent_at = mono()
                    self.pub.s.sendall(jline({"op": "call_service", "service": "/rosgate/stats",
                                              "id": "pub-stats", "args": {}}))
            self.pub_time = mono() - t0
        except Exception as e:  # noqa: BLE001
            self.errors.append(f"flood publisher: {e!r}")

    def _pub_reader(self):
        s = self.pub.s
        buf = bytearray()
        while not self.fast_stop.is_set():
            try:
                s.settimeout(0.2)
                d = s.recv(64 * KiB)
            except socket.timeout:
                continue
            except OSError:
                return
            if not d:
                return
            buf += d
            if b'"id":"pub-stats"' in buf and self.stats_sent_at is not None and not self.stats_evt.is_set():
                self.stats_latency = mono() - self.stats_sent_at
                self.stats_evt.set()
            if len(buf) > 1 * MiB:
                del buf[:-1024]

    def _fast(self):
        s = self.fast.s
        buf = bytearray(self.fast.buf)
        try:
            while not self.fast_stop.is_set():
                s.settimeout(0.2)
                try:
                    d = s.recv(1 * MiB)
                except socket.timeout:
                    continue
                if not d:
                    self.errors.append("fast subscriber: EOF from gateway")
                    return
                self.fast_bytes += len(d)
                buf += d
                pos = 0
                while True:
                    nl = buf.find(b"\n", pos)
                    if nl < 0:
                        break
                    if buf.startswith(b'{"op":"publish"', pos):
                        seq = seq_of(bytes(buf[pos:pos + 120]))
                        self.fast_received += 1
                        if seq is None or seq <= self.fast_last:
                            self.fast_reordered += 1
                        else:
                            if seq > self.fast_last + 1:
                                self.fast_lost += seq - self.fast_last - 1
                            self.fast_last = seq
                            if self.total_msgs is not None and seq == self.total_msgs - 1:
                                self.fast_done_at = mono()
                    pos = nl + 1
                del buf[:pos]
        except Exception as e:  # noqa: BLE001
            self.errors.append(f"fast subscriber: {e!r}")

    def wait_published(self, timeout):
        self.ths[0].join(timeout)
        return not self.ths[0].is_alive()

    def stop(self, drain_timeout=30.0):
        self.stop_evt.set()
        for t in self.ths:
            if t is not self.ths[1] and t is not self.ths[2]:
                t.join(60)
        deadline = mono() + drain_timeout
        while self.fast_last < self.sent - 1 and mono() < deadline and self.ths[1].is_alive():
            time.sleep(0.02)
        self.fast_lost += max(0, self.sent - 1 - self.fast_last)
        self.fast_stop.set()
        self.ths[1].join()
        self.ths[2].join()
        if self.slow is not None:
            self.slow_sessions.append(self.drain_slow(self.slow))
        self.fast.close()
        self.pub.close()
        return self


class ProviderChurn:
    """Callers keep calling one service while providers connect, advertise,
    answer a few calls and vanish in various ways. Every caller checks that
    each call gets exactly one response and that successful responses carry
    its own arguments back (so a misrouted response is caught)."""

    PMODES = ("answer_close", "answer_rst", "unadvertise", "drop_last", "bogus_ids", "slow_answers")

    def __init__(self, port, service, callers, calls_per_caller=None, window=8, pace=0.001):
        self.port, self.service = port, service
        self.calls_per_caller = calls_per_caller
        self.window, self.pace = window, pace
        self.stop_evt = threading.Event()
        self.callers_done = threading.Event()
        self.results = []
        self.errors = []
        self.providers = 0
        self.provider_answers = 0
        self.bogus_sent = 0
        self.provider_rejected = 0
        self.others_ids = []  # (provider n, provider-side id) seen by providers
        self.lock = threading.Lock()
        self.mgr = threading.Thread(target=self._manager, daemon=True)
        self.cths = [threading.Thread(target=self._caller, args=(c,), daemon=True) for c in range(callers)]

    def start(self):
        self.mgr.start()
        time.sleep(0.05)
        for t in self.cths:
            t.start()
        return self

    # providers ----------------------------------------------------------
    def _manager(self):
        rnd = random.Random(7)
        live = []
        n = 0
        while not self.stop_evt.is_set():
            n += 1
            mode = self.PMODES[n % len(self.PMODES)]
            k = rnd.randint(1, 6)
            ready = threading.Event()
            t = threading.Thread(target=self._provider, args=(n, mode, k, ready, rnd.random() < 0.4), daemon=True)
            t.start()
            live.append(t)
            ready.wait(2.0)
            if getattr(ready, "rejected", False):
                self.stop_evt.wait(0.05)  # at the connection limit: try again shortly
            live = [x for x in live if x.is_alive()]
            if rnd.random() < 0.5:  # no overlap: wait for it to vanish
                t.join(3.0)
            if rnd.random() < 0.2:  # a gap with no provider at all
                self.stop_evt.wait(rnd.uniform(0.001, 0.02))
        for t in live:
            t.join(5)

    def _provider(self, n, mode, k, ready, linger):
        rnd = random.Random(n)
        began = mono()
        try:
            c = Conn(self.port, timeout=5)
        except Exception as e:  # noqa: BLE001
            self.errors.append(f"provider connect: {e!r}")
            ready.rejected = True
            ready.set()
            return
        try:
            try:
                c.request_ack({"op": "advertise_service", "service": self.service, "type": "test/Echo",
                               "id": f"adv-{n}"})
            except TURNED_AWAY as e:
                if not (isinstance(e, Rejected) or Burst.overlapped(began)):
                    raise
                with self.lock:
                    self.provider_rejected += 1
                ready.rejected = True
                return
            with self.lock:
                self.providers += 1
            answered = 0
            deadline = mono() + 2.0
            pending = []
            while answered < k and mono() < deadline and not self.stop_evt.is_set():
                try:
                    line = c.readline(0.05)
                except TimeoutError:
                    continue
                if line is None:
                    break
                obj = json.loads(line)
                if obj.get("op") != "call_service":
                    continue
                pid = obj["id"]
                with self.lock:
                    self.others_ids.append((n, pid))
                    del self.others_ids[:-64]
                if mode == "drop_last" and answered == k - 1:
                    answered += 1  # never answered: the caller must get a failure
                    break
                if mode == "slow_answers":
                    time.sleep(rnd.uniform(0, 0.02))
                if mode == "bogus_ids":
                    # ids this connection was never given: ones forwarded to
                    # other providers (answered or still outstanding there),
                    # ids never issued, and the caller-side id shape
                    with self.lock:
                        theirs = [i for (m, i) in self.others_ids if m != n][-3:]
                    for fake in (*theirs, "rg-0", "rg-999999999", 1):
                        c.send({"op": "service_response", "service": self.service, "id": fake,
                                "values": {"c": -1, "n": -1}, "result": True})
                        with self.lock:
                            self.bogus_sent += 1
                c.send({"op": "service_response", "service": self.service, "id": pid,
                        "values": obj.get("args"), "result": True})
                answered += 1
                with self.lock:
                    self.provider_answers += 1
            ready.set()
            if mode == "unadvertise":
                c.send({"op": "unadvertise_service", "service": self.service, "id": f"unadv-{n}"})
            if linger:
                # keep answering calls already forwarded while a successor starts
                end = mono() + 0.03
                while mono() < end:
                    try:
                        line = c.readline(max(0.0, end - mono()))
                    except TimeoutError:
                        break
                    if line is None:
                        break
                    obj = json.loads(line)
                    if obj.get("op") == "call_service":
                        c.send({"op": "service_response", "service": self.service, "id": obj["id"],
                                "values": obj.get("args"), "result": True})
                        with self.lock:
                            self.provider_answers += 1
        except Exception as e:  # noqa: BLE001
            self.errors.append(f"provider {n} ({mode}): {e!r}")
        finally:
            ready.set()
            c.close(rst=(mode == "answer_rst"))

    # callers --------------------------------------------------------------
    def _caller(self, cidx):
        r = dict(sent=0, responses=0, ok=0, no_provider=0, provider_gone=0, unadvertised=0,
                 timed_out=0, other_fail=0, duplicate_or_unknown=0, misrouted=0, unanswered=0,
                 max_latency=0.0, eof=False)
        self.results.append(r)
        try:
            c = Conn(self.port, timeout=5)
        except Exception as e:  # noqa: BLE001
            self.errors.append(f"caller connect: {e!r}")
            return
        outstanding = {}
        n = 0
        last_send = 0.0
        limit = self.calls_per_caller
        try:
            while True:
                now = mono()
                stopping = self.stop_evt.is_set() or (limit is not None and n >= limit)
                if stopping and not outstanding:
                    break
                while (not stopping and len(outstanding) < self.window
                       and now - last_send >= self.pace and (limit is None or n < limit)):
                    c.send({"op": "call_service", "service": self.service, "id": n,
                            "args": {"c": cidx, "n": n}})
                    outstanding[n] = now
                    r["sent"] += 1
                    n += 1
                    last_send = now
                try:
                    line = c.readline(max(self.pace, 0.002) if not stopping else 1.0)
                except TimeoutError:
                    if stopping and mono() - max(outstanding.values(), default=now) > 15:
                        break  # something is badly wrong; do not hang
                    continue
                if line is None:
                    r["eof"] = True
                    break
                self._take_response(cidx, line, outstanding, r)
            # anything arriving now is a second response to a finished call
            end = mono() + 0.5
            while mono() < end:
                try:
                    line = c.readline(max(0.0, end - mono()))
                except TimeoutError:
                    break
                if line is None:
                    break
                self._take_response(cidx, line, outstanding, r)
        except Exception as e:  # noqa: BLE001
            self.errors.append(f"caller {cidx}: {e!r}")
        r["unanswered"] = len(outstanding)
        c.close()

    def _take_response(self, cidx, line, outstanding, r):
        obj = json.loads(line)
        if obj.get("op") != "service_response":
            return
        cid = obj.get("id")
        if cid not in outstanding:
            r["duplicate_or_unknown"] += 1
            return
        t0 = outstanding.pop(cid)
        r["responses"] += 1
        r["max_latency"] = max(r["max_latency"], mono() - t0)
        if obj.get("result") is True:
            if obj.get("values") == {"c": cidx, "n": cid}:
                r["ok"] += 1
            else:
                r["misrouted"] += 1
        else:
            v = str(obj.get("values"))
            if "no provider" in v:
                r["no_provider"] += 1
            elif "disconnected" in v:
                r["provider_gone"] += 1
            elif "unadvertised" in v:
                r["unadvertised"] += 1
            elif "timed out" in v:
                r["timed_out"] += 1
            else:
                r["other_fail"] += 1

    def wait_callers(self, timeout):
        deadline = mono() + timeout
        for t in self.cths:
            t.join(max(0.0, deadline - mono()))
        return all(not t.is_alive() for t in self.cths)

    def stop(self):
        self.stop_evt.set()
        self.wait_callers(30)
        self.mgr.join(30)
        return self

    def totals(self):
        tot = {}
        for r in self.results:
            for k, v in r.items():
                if k == "max_latency":
                    tot[k] = max(tot.get(k, 0.0), v)
                elif k == "eof":
                    tot[k] = tot.get(k, False) or v
                else:
                    tot[k] = tot.get(k, 0) + v
        return tot


def long_line_attack(port, line_bytes, garbage_bytes, rnd, then_newline=True, after_call=True):
    """One connection sends `line_bytes` with no newline, then garbage: random
    bytes, NULs, invalid UTF-8, broken JSON. Returns whether a valid request
    afterwards was still answered on the same connection."""
    c = Conn(port, timeout=30)
    answered = None
    got = {"statuses": 0}
    stop = threading.Event()

    def reader():  # keeps the error statuses flowing so control data never piles up
        s = c.s
        buf = bytearray()
        while not stop.is_set():
            s.settimeout(0.2)
            try:
                d = s.recv(256 * KiB)
            except socket.timeout:
                continue
            except OSError:
                return
            if not d:
                return
            buf += d
            got["statuses"] += d.count(b'"op":"status"')
            if b'"id":"after-attack"' in buf:
                got["answered"] = True
            if len(buf) > 64 * KiB:
                del buf[:-256]

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    try:
        c.send(b'{"op":"publish","topic":"/x","msg":"')
        chunk = b"A" * MiB
        left = line_bytes
        while left > 0:
            c.send(chunk[: min(left, MiB)])
            left -= min(left, MiB)
        if then_newline:
            c.send(rnd.randbytes(garbage_bytes))
            c.send(b"\x00" * 100000 + b"\n")
            c.send(b"\n".join([
                b'{"op":"publish","topic":"/x","msg":"\xff\xfe"}',
                b"\xc0\xaf\xc0\xaf",
                b'{"op":"\xed\xa0\x80"}',
                b"\x80\x80\x80",
                b'{"op":"subscribe","topic":',
                b"[1,2,3]",
                b'{"a":' * 300 + b"1" + b"}" * 300,
                b'{"op":"publish","topic":"/x","msg":{"a":1}',
                b"\x00\x00\x00",
                b"\r",
                b"",
            ]) + b"\n")
        if after_call:
            c.send(jline({"op": "call_service", "service": "/rosgate/stats", "id": "after-attack", "args": {}}))
            deadline = mono() + 20
            while mono() < deadline and not got.get("answered"):
                time.sleep(0.02)
            answered = bool(got.get("answered"))
    finally:
        stop.set()
        t.join()
        c.close()
    return answered, got["statuses"]


class PingLoop(threading.Thread):
    """A well-behaved client doing publish round trips to itself and stats
    calls; records latency and failures."""

    def __init__(self, port, topic="/ping", period=0.01):
        super().__init__(daemon=True)
        self.c = Conn(port)
        self.c.request_ack({"op": "subscribe", "topic": topic, "type": "x", "id": "ping-sub"})
        self.topic = topic
        self.period = period
        self.stop_evt = threading.Event()
        self.count = 0
        self.failures = []
        self.max_latency = 0.0

    def run(self):
        i = 0
        while not self.stop_evt.wait(self.period):
            i += 1
            t = mono()
            try:
                if i % 10 == 0:
                    r = self.c.call("/rosgate/stats", {}, f"ping-stats-{i}", 10)
                    if r.get("result") is not True:
                        raise RuntimeError(f"stats failed: {r}")
                else:
                    self.c.send({"op": "publish", "topic": self.topic, "msg": {"i": i}})
                    self.c.wait_for(lambda o, i=i: o.get("op") == "publish" and o.get("msg") == {"i": i}, 10)
                self.count += 1
                self.max_latency = max(self.max_latency, mono() - t)
            except Exception as e:  # noqa: BLE001
                self.failures.append(repr(e))
                return

    def stop(self):
        self.stop_evt.set()
        self.join()
        self.c.close()


def open_many(port, n, timeout=5.0):
    """n non-blocking connects (they complete in the kernel backlog even
    when the gateway does not accept); returns the sockets."""
    out = []
    for _ in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        s.connect_ex((HOST, port))
        out.append(s)
    deadline = mono() + timeout
    sel = selectors.DefaultSelector()
    for s in out:
        sel.register(s, selectors.EVENT_WRITE)
    pending = len(out)
    while pending and mono() < deadline:
        for key, _ in sel.select(0.2):
            sel.unregister(key.fileobj)
            pending -= 1
    sel.close()
    return out
