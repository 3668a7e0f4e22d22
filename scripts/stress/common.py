"""What every scenario shares: the configuration read from the
environment (`ROSGATE_BIN`, `QUICK`, `SOAK_SECS`, `STRESS_PIDFILE`,
`STRESS_LOGDIR`), the priorities attackers and the gateway run at, the
gateway process (`Gateway`), a line-protocol client (`Conn`), the stats
service, RSS sampling, the report a scenario fills (`Report`), and the
child processes to kill at exit (`children`)."""

import json
import os
import resource
import select as select_
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
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


def normal_priority():
    """In a child before exec: nice 0 again, if the parent lowered its own
    priority (attacker_priority) and we may raise it back (CAP_SYS_NICE)."""
    try:
        if os.getpriority(os.PRIO_PROCESS, 0) != 0:
            os.setpriority(os.PRIO_PROCESS, 0, 0)
    except OSError:
        pass


ATTACKER_NICE = 10


def attacker_priority(on):
    """The bounded-memory scenarios run their attackers in this process, on
    the same (small) machine as the gateway: at nice 10 they yield the CPU to
    the gateway and the probe (both started at nice 0 by normal_priority),
    so the probe measures the gateway rather than the attackers' competition
    for a CPU; the attacks keep whatever CPU is left, which on 2 CPUs is a
    whole one. Linux nice values are per thread and inherited by threads
    created later: call this on the main thread before a scenario starts
    its threads. Returns whether the children can run above the attacker
    (raising a priority back needs CAP_SYS_NICE)."""
    try:
        os.setpriority(os.PRIO_PROCESS, 0, ATTACKER_NICE if on else 0)
    except OSError:
        return False
    if not on:
        return True
    try:  # can a child go back to 0? (try in a throwaway child)
        rc = subprocess.run([sys.executable, "-c", "import os; os.setpriority(os.PRIO_PROCESS, 0, 0)"],
                            stderr=subprocess.DEVNULL).returncode
    except OSError:
        return False
    return rc == 0


def mib(n):
    return f"{n / MiB:.1f} MiB"


# --------------------------------------------------------------------------
# The gateway process


class Gateway:
    """One rosgate process on an ephemeral loopback port."""

    current = None  # for the watchdog and signal handlers

    def __init__(self, name, args=(), nofile=None, ws=False):
        os.makedirs(LOGDIR, exist_ok=True)
        self.name = name
        self.log_path = os.path.join(LOGDIR, f"{name}.stderr")
        ws_arg = f"{HOST}:0" if ws else "off"
        cmd = [BIN, "--listen", f"{HOST}:0", "--ws-listen", ws_arg, *args]
        if nofile is not None:
            # prlimit execs the gateway: the PID stays the gateway's.
            cmd = ["prlimit", f"--nofile={nofile}:{nofile}", "--", *cmd]
        self.logf = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.logf,
            preexec_fn=normal_priority,
        )
        self.pid = self.proc.pid
        Gateway.current = self
        if PIDFILE:
            with open(PIDFILE, "w") as f:
                f.write(f"{self.pid}\n")
        self.port = None
        self.ws_port = None
        deadline = mono() + 15
        while mono() < deadline:
            text = self.stderr_text()
            if ws and self.ws_port is None:
                self.ws_port = self._port_after(text, "websocket listening on ws://127.0.0.1:")
            if not ws or self.ws_port is not None:
                # (the WebSocket line says "listening on ws://", not this;
                # under --tls-cert the TCP line says tls://)
                self.port = (self._port_after(text, "listening on 127.0.0.1:")
                             or self._port_after(text, "listening on tls://127.0.0.1:"))
                if self.port is not None:
                    break
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        if self.port is None:
            self.stop()
            raise RuntimeError(f"gateway did not start: {self.stderr_text()[-2000:]}")

    @staticmethod
    def _port_after(text, marker):
        i = text.find(marker)
        if i < 0:
            return None
        rest = text[i + len(marker):]
        digits = ""
        for ch in rest:
            if not ch.isdigit():
                break
            digits += ch
        return int(digits) if digits and "\n" in rest else None

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

    def schedstat(self):
        """(ns on a CPU, ns runnable but waiting for a CPU), summed over the
        gateway's threads (/proc schedstat: finer than cpu()'s clock ticks)."""
        run = wait = 0
        try:
            for tid in os.listdir(f"/proc/{self.pid}/task"):
                try:
                    with open(f"/proc/{self.pid}/task/{tid}/schedstat") as f:
                        a = f.read().split()
                    run += int(a[0])
                    wait += int(a[1])
                except OSError:
                    pass
        except OSError:
            pass
        return run, wait

    def cpu_ns(self):
        return self.schedstat()[0]

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


def answered(socks, timeout):
    """Waits until every socket received something (the server's handshake
    flight); returns how many did, and when the last one did."""
    sel = selectors.DefaultSelector()
    for s in socks:
        sel.register(s, selectors.EVENT_READ)
    got, last, deadline = 0, mono(), mono() + timeout
    while got < len(socks) and mono() < deadline:
        for key, _ in sel.select(timeout=0.5):
            try:
                d = key.fileobj.recv(65536)
            except BlockingIOError:
                continue
            except OSError:
                d = b""
            sel.unregister(key.fileobj)
            if d:
                got += 1
                last = mono()
    sel.close()
    return got, last


def finish_gateway(r, gw, prefix=""):
    alive = gw.alive()
    rc = gw.stop()
    if not alive:
        r.fig(f"{prefix}gateway DIED (exit {rc}); stderr tail: {gw.stderr_text()[-1500:]}")
    r.check(alive and rc == 0, f"{prefix}gateway alive to the end, clean exit on SIGTERM (rc {rc})")


def readable(sock, timeout):
    """Whether sock has something to read (data, EOF or an error) within
    timeout seconds. poll(), not select(): descriptors go past 1024 here."""
    p = select_.poll()
    p.register(sock, select_.POLLIN)
    return bool(p.poll(max(0, int(timeout * 1000))))


def pct(xs, q):
    """The q-quantile (nearest rank) of xs; 0.0 for an empty list."""
    if not xs:
        return 0.0
    xs = sorted(xs)
    k = max(0, min(len(xs) - 1, int(-(-q * len(xs) // 1)) - 1))
    return xs[k]


def ms(x):
    return f"{x * 1000:.1f} ms"


children = []  # probe processes, killed by PID at exit
