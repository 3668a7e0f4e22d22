#!/usr/bin/env python3
"""Stress scenarios for rosgate (run through scripts/stress.sh).

Not part of the default test suite. Everything talks to 127.0.0.1 only, every
scenario is bounded in connections, bytes and time, and each one starts its
own gateway (so the figures are independent) and stops it by PID at the end.

    scripts/stress.sh                       # every scenario, full size
    scripts/stress.sh conns10k churn        # a selection
    QUICK=1 scripts/stress.sh               # everything shortened (soak 30 s)
    SOAK_SECS=1200 scripts/stress.sh soak   # a longer soak

Scenarios: conns10k churn slowsub longline fdlimit providerchurn soak.
Each prints its figures and PASS/FAIL; the run ends with `N passed, N failed`
and exits non-zero when anything failed.

Python 3.11 standard library only.
"""

import json
import os
import random
import resource
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("ROSGATE_BIN", os.path.join(ROOT, "target", "release", "rosgate"))
HOST = "127.0.0.1"
QUICK = os.environ.get("QUICK", "0") not in ("", "0")
SOAK_SECS = float(os.environ.get("SOAK_SECS", "30" if QUICK else "600"))
PIDFILE = os.environ.get("STRESS_PIDFILE")
LOGDIR = os.environ.get("STRESS_LOGDIR") or os.path.join(ROOT, "target", "stress")
CLK_TCK = os.sysconf("SC_CLK_TCK")
MiB = 1024 * 1024
KiB = 1024

mono = time.monotonic


def log(msg):
    print(msg, flush=True)


def mib(n):
    return f"{n / MiB:.1f} MiB"


# --------------------------------------------------------------------------
# The gateway process


class Gateway:
    """One rosgate process on an ephemeral loopback port."""

    current = None  # for the watchdog and signal handlers

    def __init__(self, name, args=(), nofile=None):
        os.makedirs(LOGDIR, exist_ok=True)
        self.name = name
        self.log_path = os.path.join(LOGDIR, f"{name}.stderr")
        cmd = [BIN, "--listen", f"{HOST}:0", "--ws-listen", "off", *args]
        if nofile is not None:
            # prlimit execs the gateway: the PID stays the gateway's.
            cmd = ["prlimit", f"--nofile={nofile}:{nofile}", "--", *cmd]
        self.logf = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.logf
        )
        self.pid = self.proc.pid
        Gateway.current = self
        if PIDFILE:
            with open(PIDFILE, "w") as f:
                f.write(f"{self.pid}\n")
        self.port = None
        deadline = mono() + 15
        while mono() < deadline:
            text = self.stderr_text()
            i = text.find("listening on 127.0.0.1:")
            if i >= 0:
                rest = text[i + len("listening on 127.0.0.1:"):]
                digits = ""
                for ch in rest:
                    if not ch.isdigit():
                        break
                    digits += ch
                if digits and "\n" in rest:
                    self.port = int(digits)
                    break
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        if self.port is None:
            self.stop()
            raise RuntimeError(f"gateway did not start: {self.stderr_text()[-2000:]}")

    def stderr_text(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def alive(self):
        return self.proc.poll() is None

    def rss(self):
        """VmRSS in bytes (0 when the process is gone)."""
        try:
            with open(f"/proc/{self.pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            pass
        return 0

    def cpu(self):
        """utime + stime in seconds."""
        with open(f"/proc/{self.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK

    def nfds(self):
        try:
            return len(os.listdir(f"/proc/{self.pid}/fd"))
        except OSError:
            return -1

    def stop(self):
        """SIGTERM, then SIGKILL after 10 s; returns the exit code."""
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGTERM)
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.logf.close()
        if Gateway.current is self:
            Gateway.current = None
        if PIDFILE:
            try:
                with open(PIDFILE, "w"):
                    pass
            except OSError:
                pass
        return self.proc.returncode


# --------------------------------------------------------------------------
# Client helpers


class Rejected(Exception):
    """The gateway was at its connection limit and turned us away."""


class _Burst:
    """When conns_burst runs, the gateway sits at its connection limit and
    turns new clients away: a client whose connection is refused or reset
    while a burst overlapped its lifetime was turned away, not failed."""

    active = 0
    last_end = -1.0

    @classmethod
    def overlapped(cls, since):
        return cls.active > 0 or cls.last_end >= since


TURNED_AWAY = (Rejected, EOFError, BrokenPipeError, ConnectionResetError)


def jline(obj):
    return (json.dumps(obj, separators=(",", ":")) + "\n").encode()


class Conn:
    """A blocking client connection with a line reader."""

    def __init__(self, port, rcvbuf=None, timeout=10.0):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        s.settimeout(timeout)
        try:
            s.connect((HOST, port))
        except BaseException:
            s.close()
            raise
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.s = s
        self.buf = bytearray()
        self.eof = False

    def send(self, data):
        if not isinstance(data, (bytes, bytearray, memoryview)):
            data = jline(data)
        self.s.sendall(data)

    def readline(self, timeout=10.0):
        """The next line (without newline); None at EOF; TimeoutError."""
        deadline = mono() + timeout
        while True:
            i = self.buf.find(b"\n")
            if i >= 0:
                line = bytes(self.buf[:i])
                del self.buf[: i + 1]
                return line
            if self.eof:
                return None
            left = deadline - mono()
            if left <= 0:
                raise TimeoutError("readline timed out")
            self.s.settimeout(left)
            try:
                d = self.s.recv(256 * KiB)
            except socket.timeout:
                raise TimeoutError("readline timed out") from None
            except (ConnectionResetError, BrokenPipeError):
                d = b""
            if not d:
                self.eof = True
            else:
                self.buf += d

    def wait_for(self, pred, timeout=10.0):
        """Reads JSON lines until pred(obj) holds; returns obj."""
        deadline = mono() + timeout
        while True:
            line = self.readline(max(0.0, deadline - mono()))
            if line is None:
                raise EOFError("connection closed by the gateway")
            if not line.strip():
                continue
            obj = json.loads(line)
            if pred(obj):
                return obj
            if (obj.get("op") == "status" and obj.get("level") == "error"
                    and str(obj.get("msg", "")).startswith("too many connections")):
                raise Rejected(obj["msg"])

    def request_ack(self, req, timeout=10.0):
        """Sends req (with an id) and waits for the status that echoes it."""
        self.send(req)
        return self.wait_for(
            lambda o: o.get("op") == "status" and o.get("id") == req["id"], timeout
        )

    def call(self, service, args, cid, timeout=10.0):
        self.send({"op": "call_service", "service": service, "id": cid, "args": args})
        return self.wait_for(
            lambda o: o.get("op") == "service_response" and o.get("id") == cid, timeout
        )

    def close(self, rst=False):
        try:
            if rst:
                self.s.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00"
                )
            self.s.close()
        except OSError:
            pass


_stats_seq = [0]


def stats(port, timeout=10.0):
    """The gateway counters, through a fresh connection (counted in them)."""
    _stats_seq[0] += 1
    c = Conn(port, timeout=timeout)
    try:
        r = c.call("/rosgate/stats", {}, f"stats-{_stats_seq[0]}", timeout)
    finally:
        c.close()
    if r.get("result") is not True:
        raise RuntimeError(f"stats call failed: {r}")
    return r["values"]


def check_clean(port, timeout=10.0):
    """Polls the counters until every registration is gone. Returns
    (ok, stats, text)."""
    deadline = mono() + timeout
    while True:
        try:
            st = stats(port)
        except Rejected:
            # clients that just left may not be reaped yet when we arrive
            # (the loop accepts before it reads their EOFs): ask again
            if mono() > deadline:
                raise
            time.sleep(0.05)
            continue
        bad = []
        if st["connections_open"] != 1:
            bad.append(f"connections_open={st['connections_open']} (want 1)")
        for k in ("subscriptions", "topics", "publishers", "services", "calls_pending"):
            if st.get(k, 0) != 0:
                bad.append(f"{k}={st[k]} (want 0)")
        if not bad or mono() > deadline:
            text = (
                f"after: connections_open={st['connections_open']} subscriptions={st['subscriptions']} "
                f"topics={st['topics']} publishers={st['publishers']} services={st['services']} "
                f"calls_pending={st['calls_pending']} queued_bytes={st['queued_bytes']}"
            )
            return (not bad, st, text + ("" if not bad else "  LEAK: " + ", ".join(bad)))
        time.sleep(0.1)


class Sampler(threading.Thread):
    """Samples the gateway's RSS every `interval` seconds."""

    def __init__(self, gw, interval):
        super().__init__(daemon=True)
        self.gw = gw
        self.interval = interval
        self.stop_evt = threading.Event()
        self.t0 = mono()
        self.samples = [(0.0, gw.rss())]

    def run(self):
        while not self.stop_evt.wait(self.interval):
            r = self.gw.rss()
            if r:
                self.samples.append((mono() - self.t0, r))

    def stop(self):
        self.stop_evt.set()
        self.join()
        self.samples.append((mono() - self.t0, self.gw.rss()))
        return self.samples

    @property
    def peak(self):
        return max(r for _, r in self.samples)


class Report:
    def __init__(self, name):
        self.name = name
        self.lines = []
        self.failures = []

    def fig(self, text):
        self.lines.append(text)
        log(f"  {text}")

    def check(self, ok, text):
        mark = "ok  " if ok else "FAIL"
        log(f"  [{mark}] {text}")
        if not ok:
            self.failures.append(text)
        return ok


def raise_nofile(want):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < want:
        new = want if hard == resource.RLIM_INFINITY else min(want, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
        except (ValueError, OSError):
            pass
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def seq_of(line, start=0):
    """The integer after the first `"seq":` in line[start:], or None."""
    i = line.find(b'"seq":', start)
    if i < 0:
        return None
    i += 6
    j = i
    n = len(line)
    while j < n and 48 <= line[j] <= 57:
        j += 1
    return int(line[i:j]) if j > i else None


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
                    if isinstance(e, Rejected) or _Burst.overlapped(began):
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
                if not (isinstance(e, Rejected) or _Burst.overlapped(began)):
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
                if not (isinstance(e, Rejected) or _Burst.overlapped(began)):
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


# --------------------------------------------------------------------------
# Scenarios


def sc_conns10k(r):
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


def sc_churn(r):
    cycles = 500 if QUICK else 5000
    gw = Gateway("churn")
    try:
        base = gw.rss()
        steady = SteadyStream(gw.port, "/steady", rate=5000, size=64).start()
        time.sleep(0.2)
        t0 = mono()
        ch = Churner(gw.port, "/steady", threads=4, cycles=cycles).start()
        ch.join(240)
        t_churn = mono() - t0
        time.sleep(0.2)
        steady.stop()
        st = stats(gw.port)
        r.fig(f"churn: {ch.done} connect/disconnect cycles from 4 clients in {t_churn:.1f} s "
              f"({ch.done / max(t_churn, 1e-9):.0f}/s), {ch.failures} failed {ch.fail_samples[:3]}")
        r.fig(f"steady subscriber: sent {steady.sent} x 64 B msgs, received {steady.received}, "
              f"lost {steady.lost}, reordered {steady.reordered}, publisher max send() {steady.max_send_block * 1000:.1f} ms"
              + (f", errors {steady.errors}" if steady.errors else ""))
        r.fig(f"gateway: accepted={st['connections_accepted']} closes={st['closes']} dropped={st['dropped']} "
              f"errors_total={st['errors_total']}; RSS {mib(base)} -> {mib(gw.rss())}")
        ok_clean, _, text = check_clean(gw.port)
        r.fig(text)
        r.check(ch.done == cycles and ch.failures == 0, f"{cycles} cycles, none failed")
        r.check(steady.sent > 0 and steady.lost == 0 and steady.reordered == 0 and steady.received == steady.sent
                and not steady.errors, "steady subscriber: zero loss, zero reordering")
        r.check(st["dropped"] == 0, "no slow-consumer drops")
        r.check(ok_clean, "no leak after churn")
    finally:
        finish_gateway(r, gw)


def sc_slowsub(r):
    total = 20 * MiB if QUICK else 200 * MiB
    msg = 64 * KiB
    max_queue = 8 * MiB
    gw = Gateway("slowsub", ["--max-queue-bytes", str(max_queue)])
    try:
        st0 = stats(gw.port)
        base = gw.rss()
        sampler = Sampler(gw, 0.05)
        sampler.start()
        fl = Flood(gw.port, "/flood", msg, total_bytes=total, slow=True, stats_at=(total // msg) // 2)
        fl.start()
        fl.wait_published(240)
        st_mid = stats(gw.port)  # slow subscriber still attached
        fl.stop()
        samples = sampler.stop()
        peak = max(x for _, x in samples)
        st = stats(gw.port)
        slow_recv, slow_order, slow_last, slow_closed = fl.slow_sessions[-1]
        mb = fl.sent_bytes / 1e6
        cap = 2 * (max_queue + msg + 256) + 8 * MiB
        r.fig(f"publisher: {fl.sent} x {msg // 1024} KiB = {mib(fl.sent_bytes)} in {fl.pub_time:.2f} s "
              f"({mb / max(fl.pub_time or 1e-9, 1e-9):.0f} MB/s), longest send() {fl.max_send_block * 1000:.0f} ms, "
              f"own stats call answered in {1000 * fl.stats_latency if fl.stats_latency is not None else -1:.0f} ms")
        lag = (fl.fast_done_at - fl.t0 - fl.pub_time) if fl.fast_done_at else None
        r.fig(f"fast subscriber: {fl.fast_received}/{fl.sent} msgs, lost {fl.fast_lost}, reordered {fl.fast_reordered}, "
              f"finished {lag * 1000 if lag is not None else -1:.0f} ms after the publisher")
        r.fig(f"slow subscriber (SO_RCVBUF 4096, never reads): kept {slow_recv} msgs (newest seq {slow_last}, "
              f"in order {slow_order}), gateway dropped {st['dropped']} msgs / {mib(st['dropped_bytes'])}, "
              f"closed by gateway {slow_closed}; closes={st['closes']}")
        r.fig(f"RSS: baseline {mib(base)}, peak {mib(peak)} (+{mib(peak - base)}), after {mib(gw.rss())}; "
              f"cap for 2 subscriber queues + slack: +{mib(cap)}")
        ok_clean, _, text = check_clean(gw.port)
        r.fig(text)
        r.check(not fl.errors, f"no client errors {fl.errors[:3]}")
        r.check(fl.fast_lost == 0 and fl.fast_reordered == 0 and fl.fast_received == fl.sent,
                "second subscriber kept up: every message, in order")
        r.check(fl.pub_time is not None and fl.max_send_block < 2.0,
                f"publisher never stalled (longest send() {fl.max_send_block * 1000:.0f} ms < 2000 ms)")
        r.check(fl.stats_latency is not None and fl.stats_latency < 1.0,
                "publisher's own request answered in < 1 s while the slow subscriber exists")
        r.check(st["dropped"] > 0 and st_mid["subscriptions"] == 2, "slow subscriber lost old data, stayed subscribed")
        if not slow_closed:
            r.check(slow_order and slow_last == fl.sent - 1, "slow subscriber: kept data in order, newest message kept")
        r.check(peak - base <= cap, f"RSS peak within caps (+{mib(peak - base)} <= +{mib(cap)})")
        r.check(st0["connections_open"] == 1, "started clean")
        r.check(ok_clean, "no leak after the flood")
    finally:
        finish_gateway(r, gw)


def sc_longline(r):
    size = 24 * MiB if QUICK else 100 * MiB
    max_line = 16 * MiB
    gw = Gateway("longline", ["--max-line-bytes", str(max_line)])
    try:
        stats(gw.port)
        time.sleep(0.2)
        base = gw.rss()
        sampler = Sampler(gw, 0.05)
        sampler.start()
        ping = PingLoop(gw.port)
        ping.start()
        rnd = random.Random(42)
        t0 = mono()
        answered, statuses = long_line_attack(gw.port, size, 2 * MiB, rnd)
        t_a = mono() - t0
        time.sleep(1.0)
        after_a = gw.rss()
        # a second one: the same line, no newline at all, then the client leaves
        t1 = mono()
        long_line_attack(gw.port, size, 0, rnd, then_newline=False, after_call=False)
        t_b = mono() - t1
        time.sleep(0.5)
        ping.stop()
        time.sleep(1.0)
        samples = sampler.stop()
        peak = max(x for _, x in samples)
        after = gw.rss()
        # once more: whatever stays resident must be reused, not added to
        long_line_attack(gw.port, size, 0, rnd, then_newline=False, after_call=False)
        time.sleep(1.0)
        after3 = gw.rss()
        st = stats(gw.port)
        e = st["errors"]
        r.fig(f"attacker A: {mib(size)} line, 2 MiB random bytes, NULs, invalid UTF-8, broken JSON in {t_a:.1f} s; "
              f"{statuses} error statuses; its next request answered: {answered}")
        r.fig(f"attacker B: {mib(size)} with no newline, then disconnect, in {t_b:.1f} s")
        r.fig(f"errors: too_long={e['too_long']} bad_utf8={e['bad_utf8']} bad_json={e['bad_json']} "
              f"not_object={e['not_object']} too_deep={e['too_deep']} missing_op={e['missing_op']} total={st['errors_total']}")
        r.fig(f"other client: {ping.count} round trips during the attack, max latency {ping.max_latency * 1000:.0f} ms, "
              f"failures {ping.failures[:2]}")
        r.fig(f"RSS: baseline {mib(base)}, peak {mib(peak)} (+{mib(peak - base)}), after {mib(after)} "
              f"(+{mib(after - base)}), after a third long line {mib(after3)} (+{mib(after3 - base)})")
        r.fig(f"RSS step by step: after attacker A alone +{mib(after_a - base)}, after B +{mib(after - base)}, "
              f"after a third +{mib(after3 - base)} (what stays is held by the allocator and reused, not lost)")
        ok_clean, _, text = check_clean(gw.port)
        r.fig(text)
        r.check(answered is True, "attacker's connection kept and served after the garbage")
        r.check(e["too_long"] >= 2 and e["bad_utf8"] >= 1 and e["bad_json"] >= 1 and e["too_deep"] >= 1,
                "errors counted by kind")
        r.check(ping.count > 10 and not ping.failures and ping.max_latency < 1.0,
                "the gateway kept serving another client (max latency < 1 s)")
        r.check(peak - base <= max_line + 8 * MiB, f"RSS peak within the line cap (+{mib(peak - base)} <= +{mib(max_line + 8 * MiB)})")
        r.check(after3 - after <= 1 * MiB, "RSS bounded: a third long line adds nothing")
        r.check(after - base <= 4 * MiB, f"RSS back near baseline (+{mib(after - base)} <= +4 MiB)")
        r.check(ok_clean, "no leak")
    finally:
        finish_gateway(r, gw)


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


def classify(socks):
    """(rejected: got an error status then EOF, silent: nothing yet)"""
    rejected = silent = 0
    for s in socks:
        data = b""
        eof = False
        try:
            while True:
                d = s.recv(4096)
                if not d:
                    eof = True
                    break
                data += d
        except BlockingIOError:
            pass
        except OSError:
            eof = True
        if b"too many connections" in data or eof:
            rejected += 1
        elif not data:
            silent += 1
    return rejected, silent


def cpu_over(gw, secs):
    c0 = gw.cpu()
    time.sleep(secs)
    return gw.cpu() - c0


def sc_fdlimit(r):
    extra = 100 if QUICK else 200
    # A: the limit known at start: max connections clamped to 64 - 32
    gw = Gateway("fdlimit-clamped", nofile=64)
    try:
        clamped = "max connections lowered from 10000 to 32" in gw.stderr_text()
        c0 = Conn(gw.port)
        c0.call("/rosgate/stats", {}, "a0")
        socks = open_many(gw.port, extra)
        time.sleep(1.0)
        cpu = cpu_over(gw, 2.0)
        rej, silent = classify(socks)
        st_in = c0.call("/rosgate/stats", {}, "a1")["values"]
        alive = gw.alive()
        for s in socks:
            s.close()
        c0.close()
        t = mono()
        ok_clean, st, text = check_clean(gw.port)
        r.fig(f"A (prlimit --nofile=64:64 at start; clamp logged: {clamped}): {extra} more connections -> "
              f"{silent} held, {rej} rejected with an error status; gateway fds {gw.nfds()}")
        r.fig(f"A: gateway CPU over 2 s while saturated: {cpu * 1000:.0f} ms; counters from a held connection: "
              f"connections_open={st_in['connections_open']} connections_rejected={st_in['connections_rejected']}")
        r.fig(f"A: after clients left, stats answered in {(mono() - t) * 1000:.0f} ms; "
              f"closes.max_connections={st['closes']['max_connections']}; {text}")
        r.check(clamped and alive, "A: gateway up, limit clamped to 32")
        r.check(st_in["connections_open"] == 32 and rej == extra - 31 and silent == 31,
                f"A: 32 served, the {extra - 31} beyond the limit rejected")
        r.check(cpu < 0.25, f"A: no busy loop ({cpu * 1000:.0f} ms CPU in 2 s < 250 ms)")
        r.check(ok_clean, "A: service resumes, no leak")
    finally:
        finish_gateway(r, gw, "A: ")
    # B: the limit lowered under a running gateway: real EMFILE on accept (P10)
    gw = Gateway("fdlimit-emfile")
    try:
        c0 = Conn(gw.port)
        c0.call("/rosgate/stats", {}, "b0")
        fds0 = gw.nfds()
        subprocess.run(["prlimit", f"--pid={gw.pid}", "--nofile=64:64"], check=True)
        socks = open_many(gw.port, extra)
        time.sleep(1.0)
        cpu = cpu_over(gw, 2.0)
        fds1 = gw.nfds()
        st_in = c0.call("/rosgate/stats", {}, "b1")["values"]
        rej, silent = classify(socks)
        os.kill(gw.pid, signal.SIGUSR1)
        time.sleep(0.3)
        logged = "STATS" in gw.stderr_text()
        alive = gw.alive()
        for s in socks:
            s.close()
        t = mono()
        st_back = stats(gw.port, timeout=15)
        t_back = mono() - t
        c0.close()
        ok_clean, st, text = check_clean(gw.port)
        r.fig(f"B (prlimit --pid lowered to 64 while running, {fds0} fds open): {extra} more connections -> "
              f"gateway fds {fds1}, connections_open={st_in['connections_open']}, accept_errors={st_in['accept_errors']}, "
              f"waiting in backlog {silent - (st_in['connections_open'] - 1)}")
        r.fig(f"B: gateway CPU over 2 s while out of fds: {cpu * 1000:.0f} ms; SIGUSR1 counters logged: {logged}")
        r.fig(f"B: after clients left, a new client was served in {t_back * 1000:.0f} ms "
              f"(connections_open={st_back['connections_open']}); {text}")
        r.check(alive and st_in["accept_errors"] > 0, "B: gateway up and counting accept errors")
        r.check(cpu < 0.25, f"B: no busy loop ({cpu * 1000:.0f} ms CPU in 2 s < 250 ms)")
        r.check(t_back < 5.0, "B: service resumes after clients leave")
        r.check(ok_clean, "B: no leak")
    finally:
        finish_gateway(r, gw, "B: ")


def sc_providerchurn(r):
    calls = 300 if QUICK else 2500
    callers = 4
    gw = Gateway("providerchurn", ["--call-timeout-ms", "2000"])
    try:
        t0 = mono()
        pc = ProviderChurn(gw.port, "/churn_svc", callers, calls_per_caller=calls).start()
        done = pc.wait_callers(240)
        t = mono() - t0
        pc.stop()
        st = stats(gw.port)
        tot = pc.totals()
        r.fig(f"{callers} callers x {calls} calls in {t:.1f} s; {pc.providers} providers came and went, "
              f"answering {pc.provider_answers} calls, {pc.bogus_sent} bogus service_responses sent")
        r.fig(f"responses: {tot['responses']}/{tot['sent']} ok={tot['ok']} no_provider={tot['no_provider']} "
              f"provider_gone={tot['provider_gone']} unadvertised={tot['unadvertised']} timed_out={tot['timed_out']} "
              f"other={tot['other_fail']}; unanswered={tot['unanswered']} duplicate_or_unknown={tot['duplicate_or_unknown']} "
              f"misrouted={tot['misrouted']}; max latency {tot['max_latency'] * 1000:.0f} ms")
        r.fig(f"gateway: calls_forwarded={st['calls_forwarded']} calls_answered={st['calls_answered']} "
              f"responses_stale={st['responses_stale']} failed_no_provider={st['calls_failed_no_provider']} "
              f"failed_provider_gone={st['calls_failed_provider_gone']} timed_out={st['calls_timed_out']}")
        ok_clean, _, text = check_clean(gw.port)
        r.fig(text)
        r.check(done and not pc.errors, f"callers finished, no client errors {pc.errors[:3]}")
        r.check(tot["sent"] == callers * calls and tot["responses"] == tot["sent"] and tot["unanswered"] == 0,
                "every call got a response")
        r.check(tot["duplicate_or_unknown"] == 0, "no call got two responses")
        r.check(tot["misrouted"] == 0, "no response reached the wrong caller")
        r.check(tot["ok"] > 0 and tot["provider_gone"] + tot["unadvertised"] > 0, "both answers and provider losses happened")
        r.check(st["responses_stale"] >= pc.bogus_sent, "every bogus response was refused as stale")
        r.check(ok_clean, "no leak")
    finally:
        finish_gateway(r, gw)


def conns_burst(port, n, topic):
    """n connections subscribe, one publish, everyone accepted gets it, close.
    Returns (accepted, rejected, received)."""
    p = Conn(port)  # before the burst, so the limit never turns it away
    _Burst.active += 1
    try:
        return _conns_burst(port, n, topic, p)
    finally:
        _Burst.active -= 1
        _Burst.last_end = mono()


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


def sc_soak(r):
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


def finish_gateway(r, gw, prefix=""):
    alive = gw.alive()
    rc = gw.stop()
    if not alive:
        r.fig(f"{prefix}gateway DIED (exit {rc}); stderr tail: {gw.stderr_text()[-1500:]}")
    r.check(alive and rc == 0, f"{prefix}gateway alive to the end, clean exit on SIGTERM (rc {rc})")


SCENARIOS = {
    "conns10k": (sc_conns10k, "10 000 concurrent subscribers, one publish to all; RSS per connection", 600),
    "churn": (sc_churn, "5 000 connect/disconnect cycles beside a steady 64 B stream", 400),
    "slowsub": (sc_slowsub, "a subscriber that never reads while 200 MiB flow", 400),
    "longline": (sc_longline, "a 100 MiB line with no newline, then garbage", 400),
    "fdlimit": (sc_fdlimit, "fd exhaustion: clamped limit, and EMFILE on accept", 180),
    "providerchurn": (sc_providerchurn, "service providers churn while callers call", 400),
    "soak": (sc_soak, "all of the above, mixed, at a moderate rate", None),
}


def watchdog(budget, name):
    def fire():
        log(f"  [FAIL] {name}: watchdog: still running after {budget:.0f} s; stopping")
        gw = Gateway.current
        if gw is not None:
            try:
                gw.proc.kill()
            except OSError:
                pass
        print(f"{name}: FAIL (watchdog)\n0 passed, 1 failed (aborted)", flush=True)
        os._exit(3)

    t = threading.Timer(budget, fire)
    t.daemon = True
    t.start()
    return t


def main(argv):
    names = argv or list(SCENARIOS)
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        print(f"unknown scenario(s): {' '.join(unknown)}; choose from: {' '.join(SCENARIOS)}", file=sys.stderr)
        return 2
    if not os.access(BIN, os.X_OK):
        print(f"{BIN} not found: run `cargo build --release` (stress.sh does)", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    log(f"rosgate stress: {' '.join(names)}  (QUICK={int(QUICK)}, SOAK_SECS={SOAK_SECS:.0f}, logs in {LOGDIR})")
    passed = failed = 0
    for name in names:
        fn, desc, budget = SCENARIOS[name]
        if budget is None:
            budget = SOAK_SECS + 300
        log(f"\n== {name}: {desc}")
        r = Report(name)
        wd = watchdog(budget, name)
        t0 = mono()
        try:
            fn(r)
        except KeyboardInterrupt:
            r.check(False, "interrupted")
            wd.cancel()
            gw = Gateway.current
            if gw is not None:
                gw.stop()
            log(f"{name}: FAIL")
            failed += 1
            break
        except Exception as e:  # noqa: BLE001
            r.check(False, f"scenario raised {e!r}")
            traceback.print_exc()
            gw = Gateway.current
            if gw is not None:
                gw.stop()
        wd.cancel()
        ok = not r.failures and not getattr(r, "aborted", False)
        log(f"{name}: {'PASS' if ok else 'FAIL'} ({mono() - t0:.0f} s)")
        if ok:
            passed += 1
        else:
            failed += 1
    log(f"\n{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


def _kill_current_gateway():
    gw = Gateway.current
    if gw is not None and gw.proc.poll() is None:
        gw.proc.kill()


if __name__ == "__main__":
    import atexit

    atexit.register(_kill_current_gateway)  # even if a scenario dies half-way
    sys.exit(main(sys.argv[1:]))
