#!/usr/bin/env python3
"""rclpy publisher and subscriber of scripts/ros2-dds-perf.sh (issue 26).

  ros2-perf-node.py pub string TOPIC [--rate 0] [--size 64] [--secs S]
  ros2-perf-node.py pub image TOPIC [--rate 30] [--secs S]
  ros2-perf-node.py sub string|image TOPIC [--secs S] [--warmup W]

Run it where rclpy runs on the rmw wanted (Fast DDS or rmw_zenoh):
scripts/ros2-dds-perf.sh sources its $ROS2_ENV for that first.

The messages follow rosgate-load's outside-publisher convention
(`rosgate-load --help`, OUTSIDE PUBLISHER):
- std_msgs/msg/String: data is "<time.time_ns()> <seq> " then "x" padding
  to --size bytes;
- sensor_msgs/msg/Image: rgb8 640x480, header.stamp = time.time_ns() at
  publish, header.frame_id = the sequence number in decimal, data byte i =
  i % 251.
The sequence starts at 0 and goes up by one per publish.

`pub` publishes with a reliable, volatile, keep-last --depth (10) QoS, as fast as
rclpy goes (--rate 0) or paced at --rate, for --secs, then prints one line
`PUB {json}`: messages published, rate, and this process's CPU (% of one
core) over the publishing time.

`sub` (the DDS hop alone: rclpy publisher -> rclpy subscriber) subscribes
with the same QoS, and after --secs prints `SUB {json}`: messages received
after --warmup, loss (gaps in the sequence), latency p50/p99 (receive
time.time_ns() minus the stamp, us) and its CPU.
"""
import argparse
import array
import json
import os
import sys
import time

import rclpy
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy



def qos(depth):
    return QoSProfile(
        depth=depth,
        history=HistoryPolicy.KEEP_LAST,
        reliability=ReliabilityPolicy.RELIABLE,
        durability=DurabilityPolicy.VOLATILE,
    )


W, H = 640, 480


def cpu():
    t = os.times()
    return t.user + t.system


def pub(a, node):
    if a.kind == "string":
        from std_msgs.msg import String as T
    else:
        from sensor_msgs.msg import Image as T
    p = node.create_publisher(T, a.topic, qos(a.depth))
    msg = T()
    if a.kind == "image":
        msg.height, msg.width, msg.encoding, msg.is_bigendian, msg.step = H, W, "rgb8", 0, W * 3
        n = W * H * 3
        pattern = bytes(range(251))
        msg.data = array.array("B", (pattern * (n // 251 + 1))[:n])
    period = 1.0 / a.rate if a.rate > 0 else 0.0
    # Let discovery settle before the clock starts.
    time.sleep(a.settle)
    seq = 0
    c0, t0 = cpu(), time.monotonic()
    end = t0 + a.secs
    nxt = t0
    while True:
        now = time.monotonic()
        if now >= end:
            break
        if period:
            if now < nxt:
                time.sleep(nxt - now)
            nxt += period
        if a.kind == "string":
            head = f"{time.time_ns()} {seq} "
            msg.data = head + "x" * (a.size - len(head))
        else:
            ns = time.time_ns()
            msg.header.stamp.sec, msg.header.stamp.nanosec = ns // 10**9, ns % 10**9
            msg.header.frame_id = str(seq)
        p.publish(msg)
        seq += 1
    secs = time.monotonic() - t0
    out = {
        "kind": a.kind,
        "published": seq,
        "secs": round(secs, 3),
        "rate": round(seq / secs, 1),
        "cpu_pct": round((cpu() - c0) / secs * 100, 1),
    }
    print("PUB", json.dumps(out), flush=True)


def sub(a, node):
    if a.kind == "string":
        from std_msgs.msg import String as T
    else:
        from sensor_msgs.msg import Image as T
    lat = []
    st = {"n": 0, "lost": 0, "next": None}
    t_measure = [None]

    def on(m):
        now = time.time_ns()
        if a.kind == "string":
            parts = m.data.split(" ", 2)
            stamp, seq = int(parts[0]), int(parts[1])
        else:
            stamp = m.header.stamp.sec * 10**9 + m.header.stamp.nanosec
            seq = int(m.header.frame_id)
        if st["next"] is not None and seq > st["next"]:
            st["lost"] += seq - st["next"]
        st["next"] = seq + 1
        if t_measure[0] is not None and time.monotonic() >= t_measure[0]:
            st["n"] += 1
            lat.append(now - stamp)

    node.create_subscription(T, a.topic, on, qos(a.depth))
    t0 = time.monotonic()
    t_measure[0] = t0 + a.warmup
    end = t0 + a.secs
    c0 = None
    while time.monotonic() < end:
        if c0 is None and time.monotonic() >= t_measure[0]:
            c0, tc = cpu(), time.monotonic()
        rclpy.spin_once(node, timeout_sec=0.05)
    lat.sort()

    def q(f):
        return round(lat[min(len(lat) - 1, int(f * len(lat)))] / 1000, 1) if lat else None

    secs = time.monotonic() - tc if c0 is not None else 1
    out = {
        "kind": a.kind,
        "received": st["n"],
        "rate": round(st["n"] / secs, 1),
        "lost": st["lost"],
        "latency_us": {"p50": q(0.5), "p99": q(0.99), "max": q(1.0)},
        "cpu_pct": round((cpu() - c0) / secs * 100, 1) if c0 is not None else None,
    }
    print("SUB", json.dumps(out), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("role", choices=["pub", "sub"])
    ap.add_argument("kind", choices=["string", "image"])
    ap.add_argument("topic")
    ap.add_argument("--rate", type=float, default=None)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--depth", type=int, default=10, help="keep-last depth of the QoS")
    ap.add_argument("--secs", type=float, default=10.0)
    ap.add_argument("--settle", type=float, default=0.0)
    ap.add_argument("--warmup", type=float, default=2.0)
    a = ap.parse_args()
    if a.rate is None:
        a.rate = 0 if a.kind == "string" else 30
    rclpy.init()
    node = rclpy.create_node(f"perf_{a.role}_{a.kind}_{os.getpid()}")
    try:
        (pub if a.role == "pub" else sub)(a, node)
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    sys.exit(main())
