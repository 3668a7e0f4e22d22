#!/usr/bin/env python3
"""Subscriber that logs arrivals, for scripts/federation-mesh.sh's failure
runs (stdlib only).

Subscribes to a String topic on a rosgate gateway's TCP port (JSON lines)
and writes one line per message to --out: "<arrival ns> <seq>", where seq
is the second number of data (scripts/mesh-pub.py's layout). Runs until
--duration has passed. If the gateway it talks to goes away it reconnects
(its own gateway is never the one killed in the runs, but this keeps the
log honest if it were).
"""

import argparse
import json
import socket
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--addr", default="127.0.0.1:9095")
    ap.add_argument("--topic", default="/mesh")
    ap.add_argument("--duration", type=float, default=30.0)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    host, port = a.addr.rsplit(":", 1)
    end = time.monotonic() + a.duration
    with open(a.out, "w") as out:
        while time.monotonic() < end:
            try:
                s = socket.create_connection((host, int(port)), timeout=2)
            except OSError:
                time.sleep(0.1)
                continue
            sub = {"op": "subscribe", "topic": a.topic, "type": "std_msgs/msg/String"}
            s.sendall((json.dumps(sub) + "\n").encode())
            s.settimeout(0.2)
            buf = b""
            while time.monotonic() < end:
                try:
                    chunk = s.recv(65536)
                except socket.timeout:
                    continue
                except OSError:
                    break
                if not chunk:
                    break
                now = time.time_ns()
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    try:
                        m = json.loads(line)
                    except ValueError:
                        continue
                    if m.get("op") != "publish":
                        continue
                    parts = m.get("msg", {}).get("data", "").split(" ")
                    if len(parts) >= 2 and parts[1].isdigit():
                        out.write("%d %s\n" % (now, parts[1]))
            s.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
