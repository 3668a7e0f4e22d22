#!/usr/bin/env python3
"""Helpers of scripts/bag-perf.sh (issue 28's recording and replay numbers).

Standard library only. Every mode talks rosbridge-style JSON lines over
TCP to a gateway on loopback and stops by itself (a deadline on every
wait).

  pub-images ADDR TOPIC RATE DURATION GO   1280x720 rgb8 sensor_msgs/msg/Image
  pub-small  ADDR TOPIC RATE DURATION GO   std_msgs/msg/String, 32-byte data
      advertise, wait for the file GO to exist (the recorder is
      subscribed), publish open loop at RATE/s for DURATION s, print
      {"topic", "sent", "secs"} as JSON.
  sub ADDR EXPECT DEADLINE OUT TOPIC:TYPE...
      subscribe, write one "topic arrival_ns" line per message to OUT
      until EXPECT messages arrived or DEADLINE s passed; touches OUT.ready
      once subscribed.
  timing MCAP ARRIVALS RATE
      compares arrivals with the log times of an uncompressed MCAP file
      (message i of each topic with arrival i of that topic) and prints
      JSON: count matched and the timing error percentiles.
"""

import json
import os
import socket
import struct
import sys
import time


def connect(addr):
    host, port = addr.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=10)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def wait_go(go, limit=60.0):
    end = time.monotonic() + limit
    while not os.path.exists(go):
        if time.monotonic() > end:
            sys.exit("bag-perf.py: GO file never appeared")
        time.sleep(0.01)


def publish(addr, topic, ty, rate, duration, go, make):
    s = connect(addr)
    s.sendall(json.dumps({"op": "advertise", "topic": topic, "type": ty}).encode() + b"\n")
    wait_go(go)
    # Open loop: message i is due at t0 + i / rate; whatever is due is
    # sent in one write (a tick of at most 1 ms).
    t0 = time.monotonic()
    total = int(rate * duration)
    sent = 0
    while sent < total:
        now = time.monotonic()
        due = min(total, int((now - t0) * rate) + 1)
        if due > sent:
            s.sendall(b"".join(make(i) for i in range(sent, due)))
            sent = due
        else:
            time.sleep(min(0.001, (t0 + sent / rate) - now))
    secs = time.monotonic() - t0
    time.sleep(0.5)
    s.close()
    print(json.dumps({"topic": topic, "sent": sent, "secs": round(secs, 3)}))


def pub_images(addr, topic, rate, duration, go):
    import base64

    w, h = 1280, 720
    data = base64.b64encode(bytes(range(256)) * (w * h * 3 // 256)).decode()
    tail = (
        f'}},"frame_id":"cam"}},"height":{h},"width":{w},"encoding":"rgb8",'
        f'"is_bigendian":0,"step":{w * 3},"data":"{data}"}}}}\n'
    ).encode()
    head = f'{{"op":"publish","topic":"{topic}","msg":{{"header":{{"stamp":'

    def make(i):
        ns = time.time_ns()
        stamp = f'{{"sec":{ns // 10**9},"nanosec":{ns % 10**9}'
        return (head + stamp).encode() + tail

    publish(addr, topic, "sensor_msgs/msg/Image", rate, duration, go, make)


def pub_small(addr, topic, rate, duration, go):
    head = f'{{"op":"publish","topic":"{topic}","msg":{{"data":"'

    def make(i):
        return f'{head}{i:032d}"}}}}\n'.encode()

    publish(addr, topic, "std_msgs/msg/String", rate, duration, go, make)


def sub(addr, expect, deadline, out, specs):
    s = connect(addr)
    s.settimeout(1.0)
    for spec in specs:
        topic, ty = spec.split(":", 1)
        s.sendall(
            json.dumps(
                {
                    "op": "subscribe",
                    "topic": topic,
                    "type": ty,
                    "qos": {"reliability": "reliable"},
                }
            ).encode()
            + b"\n"
        )
    open(out + ".ready", "w").close()
    end = time.monotonic() + deadline
    lines = []
    buf = bytearray()
    n = 0
    while n < expect and time.monotonic() < end:
        try:
            chunk = s.recv(1 << 20)
        except socket.timeout:
            continue
        now = time.monotonic_ns()
        if not chunk:
            break
        # Only the new bytes are searched for line ends (an image line is
        # megabytes long and arrives in many reads).
        start = len(buf)
        buf += chunk
        pos = 0
        k = buf.find(b"\n", start)
        while k >= 0:
            head = bytes(buf[pos : min(k, pos + 160)])
            p = head.find(b'"topic":"')
            if p >= 0 and b'"op":"publish"' in head:
                q = head.find(b'"', p + 9)
                lines.append(f"{head[p + 9 : q].decode()} {now}\n")
                n += 1
            pos = k + 1
            k = buf.find(b"\n", pos)
        # One move per read, not one per line.
        del buf[:pos]
    with open(out, "w") as f:
        f.writelines(lines)
    print(json.dumps({"received": n}))


def mcap_messages(path):
    """(topic, log_time) of every message, in file order; chunks must be
    uncompressed (`bag record --compression none`)."""
    with open(path, "rb") as f:
        raw = f.read()
    channels = {}
    out = []

    def walk(b, pos, end):
        while pos + 9 <= end:
            op = b[pos]
            (ln,) = struct.unpack_from("<Q", b, pos + 1)
            body = pos + 9
            if op == 0x04:  # Channel: id u16, schema u16, topic string
                (cid,) = struct.unpack_from("<H", b, body)
                (tl,) = struct.unpack_from("<I", b, body + 4)
                channels[cid] = b[body + 8 : body + 8 + tl].decode()
            elif op == 0x05:  # Message: channel u16, seq u32, log u64
                cid, _seq, log = struct.unpack_from("<HIQ", b, body)
                out.append((channels[cid], log))
            elif op == 0x06:  # Chunk: 3 u64, crc u32, compression, records
                p = body + 28
                (cl,) = struct.unpack_from("<I", b, p)
                comp = b[p + 4 : p + 4 + cl]
                if comp:
                    sys.exit(f"bag-perf.py: chunk compressed with {comp!r}")
                p += 4 + cl
                (rl,) = struct.unpack_from("<Q", b, p)
                walk(b, p + 8, p + 8 + rl)
            elif op == 0x0F:  # Footer
                return
            pos = body + ln

    walk(raw, 8, len(raw))
    return out


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else None


def timing(mcaps, arrivals, rate):
    rec = []
    for m in mcaps.split(","):
        rec.extend(mcap_messages(m))
    rec.sort(key=lambda r: r[1])
    arr = {}
    with open(arrivals) as f:
        for line in f:
            t, ns = line.split()
            arr.setdefault(t, []).append(int(ns))
    # Pair message i of a topic with arrival i of that topic (reliable,
    # in order on one connection).
    seen = {}
    pairs = []
    for topic, log in rec:
        i = seen.get(topic, 0)
        seen[topic] = i + 1
        if i < len(arr.get(topic, [])):
            pairs.append((topic, log, arr[topic][i]))
    if not pairs:
        print(json.dumps({"matched": 0}))
        return
    # Offset removed: the error of message i is its arrival relative to
    # the first pair minus its recorded log time relative to the first,
    # scaled by the rate; then the median is taken out (a constant
    # delay is not a timing error).
    log0, arr0 = pairs[0][1], pairs[0][2]
    abs_err = [(a - arr0) - (lg - log0) / rate for _, lg, a in pairs]
    med = pct(abs_err, 0.5)
    err = [abs(e - med) for e in abs_err]
    # Inter-message: gap between consecutive messages of one topic on
    # arrival against the recorded gap.
    gaps = {}
    prev = {}
    for topic, lg, a in pairs:
        if topic in prev:
            pl, pa = prev[topic]
            gaps.setdefault(topic, []).append(abs((a - pa) - (lg - pl) / rate))
        prev[topic] = (lg, a)
    us = lambda v: None if v is None else round(v / 1000, 1)  # noqa: E731
    res = {
        "recorded": len(rec),
        "matched": len(pairs),
        "abs_p50_us": us(pct(err, 0.5)),
        "abs_p99_us": us(pct(err, 0.99)),
        "abs_max_us": us(max(err)),
        "gap": {
            t: {
                "p50_us": us(pct(g, 0.5)),
                "p99_us": us(pct(g, 0.99)),
            }
            for t, g in gaps.items()
        },
    }
    print(json.dumps(res))


def main():
    a = sys.argv[1:]
    if not a:
        sys.exit(__doc__)
    mode = a[0]
    if mode == "pub-images":
        pub_images(a[1], a[2], float(a[3]), float(a[4]), a[5])
    elif mode == "pub-small":
        pub_small(a[1], a[2], float(a[3]), float(a[4]), a[5])
    elif mode == "sub":
        sub(a[1], int(a[2]), float(a[3]), a[4], a[5:])
    elif mode == "timing":
        timing(a[1], a[2], float(a[3]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
