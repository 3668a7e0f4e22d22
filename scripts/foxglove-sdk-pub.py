#!/usr/bin/env python3
"""The foxglove-sdk side of scripts/foxglove-compare.sh (issue 27).

Starts foxglove-sdk's WebSocket server (Rust/tokio, in this process) and,
once --subs clients have subscribed, logs std_msgs/msg/String messages as
CDR on one channel as fast as the Python loop can, until --seconds have
passed. Each message's `data` is rosgate-load's stamped payload
(tools/rosgate-load/src/payload.rs: {"p":0,"s":<seq>,"t":0,"d":"<padding>"}
of exactly --size bytes), so `rosgate-load --transport foxglove-source`
verifies every delivery as it does against rosgate.

--no-server runs the same loop with no server and no sink (the channel's
log call then has nowhere to go): what the Python loop alone costs per
message, so the server's part of this process's CPU can be estimated.

Prints one JSON line at the end: messages logged, seconds spent logging,
process CPU seconds over that time.
"""

import argparse
import json
import struct
import sys
import threading
import time

import foxglove

ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
# `{"p":` `,"s":` `,"t":` `,"d":"` and `"}`.
FRAMING = 5 + 5 + 5 + 6 + 2


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=8766)
    ap.add_argument("--topic", default="/bench/0")
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--subs", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--setup-timeout", type=float, default=30.0)
    ap.add_argument("--no-server", action="store_true")
    a = ap.parse_args()

    pattern = ALPHABET * (a.size // len(ALPHABET) + 2)
    subscribed = threading.Event()
    count = [0]

    class Listener:
        def on_subscribe(self, client, channel):
            count[0] += 1
            if count[0] >= a.subs:
                subscribed.set()

    chan = foxglove.Channel(
        a.topic,
        message_encoding="cdr",
        schema=foxglove.Schema(
            name="std_msgs/msg/String", encoding="ros2msg", data=b"string data\n"
        ),
    )
    server = None
    if not a.no_server:
        server = foxglove.start_server(
            name="foxglove-sdk-bench",
            host="127.0.0.1",
            port=a.port,
            server_listener=Listener(),
        )
        print(f"foxglove-sdk-pub: listening on 127.0.0.1:{server.port}", file=sys.stderr, flush=True)
        if not subscribed.wait(a.setup_timeout):
            print(f"foxglove-sdk-pub: only {count[0]} of {a.subs} subscribed", file=sys.stderr)
            return 3

    t0 = time.monotonic()
    c0 = time.process_time()
    end = t0 + a.seconds
    seq = 0
    pack = struct.pack
    while True:
        # Check the clock every 64 messages: it is not free at 64 B.
        if seq & 63 == 0 and time.monotonic() >= end:
            break
        stamp = b'{"p":0,"s":%d,"t":0,"d":"' % seq
        pad = max(0, a.size - (FRAMING + 1 + len(str(seq)) + 1))
        off = seq % 64
        body = stamp + pattern[off : off + pad] + b'"}'
        # CDR: little-endian encapsulation, u32 length with the NUL, bytes, NUL.
        chan.log(b"\x00\x01\x00\x00" + pack("<I", len(body) + 1) + body + b"\x00")
        seq += 1
    wall = time.monotonic() - t0
    cpu = time.process_time() - c0
    print(json.dumps({"logged": seq, "seconds": wall, "cpu_s": cpu, "no_server": a.no_server}), flush=True)
    if server is not None:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
