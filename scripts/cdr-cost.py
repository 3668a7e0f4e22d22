#!/usr/bin/env python3
"""Gateway CPU per delivered byte of `cbor-raw` from a real ROS 2 CDR
source, against plain forwarding of the same bytes (issue 25, "CDR straight
through"): the figure docs/performance.md quotes.

Run A (CDR source): an rclpy node on rmw_zenoh publishes rgb8
sensor_msgs/msg/Image (WIDTHxHEIGHT) at RATE Hz; SUBS WebSocket clients
subscribe to it with `compression: cbor-raw`, so every image leaves as the
CDR the node put (nothing decoded: the gateway's `cdr_passed_through`
counter must equal `cdr_in`).

Run B (plain forwarding): a TCP client publishes std_msgs/msg/String
messages whose JSON line is as long as one image's CDR at the same rate;
SUBS WebSocket clients subscribe to it as JSON (no compression). Nothing is
decoded either: the gateway checks the line and frames it once for all.

For each run: the gateway's CPU time (utime + stime of its process,
/proc/PID/stat, every thread: Zenoh's included) over the measured
seconds, the bytes its subscribers received, and CPU nanoseconds per
delivered byte. The target is A within 10% of B.

Needs a shell where rclpy runs on rmw_zenoh_cpp and `rmw_zenohd` in
$RMW_ZENOHD (as scripts/ros2-real-check.py), and a release gateway built
with `--features ros2`:

    scripts/cdr-cost.py --rosgate target/release/rosgate [--subs 8] [--secs 10]

Everything runs on loopback on free ports; every process it starts is
stopped at the end; each wait has a deadline. Exit status 1 when a run
lost messages or a cbor-raw message was decoded.
"""

import argparse
import base64
import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time

PUBLISHER = r'''
import sys, time, rclpy
from sensor_msgs.msg import Image
rclpy.init()
n = rclpy.create_node("camera")
p = n.create_publisher(Image, "/camera", 10)
w, h, rate, secs = (int(a) for a in sys.argv[1:5])
img = Image(width=w, height=h, encoding="rgb8", step=3 * w)
img.data = bytes(range(256)) * (3 * w * h // 256) + bytes(3 * w * h % 256)
print("ready", flush=True)
t0 = time.monotonic(); k = 0
while time.monotonic() - t0 < secs:
    now = n.get_clock().now().to_msg()
    img.header.stamp = now
    p.publish(img); k += 1
    time.sleep(max(0.0, t0 + k / rate - time.monotonic()))
print("sent", k, flush=True)
'''


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(port, deadline):
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"port {port} not listening")


class WsSub(threading.Thread):
    """A WebSocket subscriber counting the messages and payload bytes it
    reads (frames parsed by their headers only)."""

    def __init__(self, port, request):
        super().__init__(daemon=True)
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            (
                "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                "Sec-WebSocket-Version: 13\r\n\r\n"
            ).encode()
        )
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise SystemExit("handshake refused")
            head += chunk
        self.buf = bytearray(head.split(b"\r\n\r\n", 1)[1])
        payload = json.dumps(request).encode()
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(bytes([0x81, 0x80 | len(payload)]) + mask + masked)
        self.msgs = 0
        self.bytes = 0
        self.binary = 0
        self.counting = False
        self.stop = False

    def run(self):
        self.sock.settimeout(0.5)
        buf = self.buf
        while not self.stop:
            # Parse every whole frame in the buffer.
            while len(buf) >= 2:
                op, n = buf[0] & 0x0F, buf[1] & 0x7F
                at = 2
                if n == 126:
                    if len(buf) < 4:
                        break
                    n, at = struct.unpack(">H", buf[2:4])[0], 4
                elif n == 127:
                    if len(buf) < 10:
                        break
                    n, at = struct.unpack(">Q", buf[2:10])[0], 10
                if len(buf) < at + n:
                    break
                if self.counting and op in (1, 2):
                    self.msgs += 1
                    self.bytes += n
                    self.binary += op == 2
                del buf[: at + n]
            try:
                chunk = self.sock.recv(1 << 20)
            except socket.timeout:
                continue
            if not chunk:
                return
            buf += chunk


def cpu_ns(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])
    return ticks * 1_000_000_000 // os.sysconf("SC_CLK_TCK")


def stats(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b'{"op":"call_service","service":"/rosgate/stats","id":"s","args":{}}\n')
    f = s.makefile("rb")
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        line = json.loads(f.readline())
        if line.get("id") == "s":
            s.close()
            return line["values"]
    raise SystemExit("no stats")


def counter(st, name):
    v = st.get("counters", st).get(name, 0)
    return v


def run(args, mode, cdr_len):
    tcp, ws = free_port(), free_port()
    gw_args = [args.rosgate, "--listen", f"127.0.0.1:{tcp}", "--ws-listen", f"127.0.0.1:{ws}"]
    procs = []
    if mode == "cdr":
        router = free_port()
        env = dict(os.environ)
        env["ZENOH_CONFIG_OVERRIDE"] = f'listen/endpoints=["tcp/127.0.0.1:{router}"]'
        procs.append(subprocess.Popen([os.environ["RMW_ZENOHD"]], env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        gw_args += ["--ros-domain", "0", "--zenoh-connect", f"tcp/127.0.0.1:{router}"]
        os.environ["ZENOH_CONFIG_OVERRIDE"] = f'connect/endpoints=["tcp/127.0.0.1:{router}"]'
    gw = subprocess.Popen(gw_args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs.append(gw)
    try:
        wait_port(ws, time.monotonic() + 10)
        if mode == "cdr":
            req = {"op": "subscribe", "topic": "/camera", "type": "sensor_msgs/msg/Image",
                   "compression": "cbor-raw"}
        else:
            req = {"op": "subscribe", "topic": "/blob", "type": "std_msgs/msg/String"}
        subs = [WsSub(ws, req) for _ in range(args.subs)]
        for s in subs:
            s.start()
        total = args.warmup + args.secs + 1
        if mode == "cdr":
            pub = subprocess.Popen([sys.executable, "-c", PUBLISHER, str(args.width),
                                    str(args.height), str(args.rate), str(int(total) + 1)],
                                   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            procs.append(pub)
            if pub.stdout.readline().strip() != "ready":
                raise SystemExit("publisher did not start")
        else:
            # A JSON line as long as one image's CDR.
            pad = cdr_len - len('{"op":"publish","topic":"/blob","msg":{"data":""}}')
            line = json.dumps({"op": "publish", "topic": "/blob",
                               "msg": {"data": "x" * pad}}, separators=(",", ":")).encode() + b"\n"
            pub_sock = socket.create_connection(("127.0.0.1", tcp), timeout=10)
            pub_sock.sendall(b'{"op":"advertise","topic":"/blob","type":"std_msgs/msg/String"}\n')

            def publish():
                t0, k = time.monotonic(), 0
                while time.monotonic() - t0 < total:
                    pub_sock.sendall(line)
                    k += 1
                    time.sleep(max(0.0, t0 + k / args.rate - time.monotonic()))

            threading.Thread(target=publish, daemon=True).start()
        time.sleep(args.warmup + (2.0 if mode == "cdr" else 0.5))
        for s in subs:
            s.counting = True
        c0, t0 = cpu_ns(gw.pid), time.monotonic()
        time.sleep(args.secs)
        c1, t1 = cpu_ns(gw.pid), time.monotonic()
        for s in subs:
            s.counting = False
        msgs = sum(s.msgs for s in subs)
        delivered = sum(s.bytes for s in subs)
        binary = sum(s.binary for s in subs)
        st = stats(tcp)
        for s in subs:
            s.stop = True
        expected = args.rate * (t1 - t0) * args.subs
        return {
            "mode": mode,
            "secs": round(t1 - t0, 2),
            "msgs": msgs,
            "expected_msgs": round(expected),
            "binary_msgs": binary,
            "delivered_mb": round(delivered / 1e6, 1),
            "cpu_ms": round((c1 - c0) / 1e6),
            "cpu_ns_per_byte": round((c1 - c0) / max(delivered, 1), 3),
            "cdr_in": counter(st, "cdr_in"),
            "cdr_passed_through": counter(st, "cdr_passed_through"),
            "dropped": counter(st, "dropped"),
        }
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rosgate", default="target/release/rosgate")
    ap.add_argument("--subs", type=int, default=8)
    ap.add_argument("--secs", type=float, default=10)
    ap.add_argument("--warmup", type=float, default=1)
    ap.add_argument("--rate", type=int, default=30)
    ap.add_argument("--width", type=int, default=640)
    ap.add_argument("--height", type=int, default=480)
    args = ap.parse_args()
    if "RMW_ZENOHD" not in os.environ:
        raise SystemExit("set RMW_ZENOHD to rmw_zenoh's router (see the docstring)")
    # Image CDR: header (stamp 8, frame_id "" 4+1, pad to 4), height,
    # width, encoding "rgb8" (4+5, pad), is_bigendian, step, data (4 + n).
    n = 3 * args.width * args.height
    cdr_len = 4 + 8 + 8 + 4 + 4 + 4 + 4 + 5 + 3 + 4 + 4 + n
    rows = [run(args, "cdr", cdr_len), run(args, "json", cdr_len)]
    for r in rows:
        print(json.dumps(r))
    a, b = rows
    ratio = a["cpu_ns_per_byte"] / max(b["cpu_ns_per_byte"], 1e-9)
    print(f"cbor-raw from CDR / plain forwarding, CPU per delivered byte: {ratio:.2f}")
    bad = False
    for r in rows:
        if r["msgs"] < 0.98 * r["expected_msgs"]:
            print(f"{r['mode']}: lost messages ({r['msgs']} of ~{r['expected_msgs']})")
            bad = True
    if a["cdr_in"] == 0 or a["cdr_passed_through"] != a["cdr_in"]:
        print("cbor-raw: some CDR was decoded (cdr_passed_through != cdr_in)")
        bad = True
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
