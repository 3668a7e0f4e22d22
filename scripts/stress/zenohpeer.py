"""A raw Zenoh peer that is no gateway (issue 24, "the trust boundary"): a
Zenoh session in its own process (Python eclipse-zenoh, `pip install
eclipse-zenoh`), joined to a gateway's Zenoh listener on loopback, that
floods samples or announces fake ROS 2 nodes. Used by the zenohflood and
fakenodes scenarios."""

import socket
import subprocess
import sys

from .common import HOST, children, readable

ZENOH_PEER = r"""
import json, sys, time
import zenoh

def session(endpoint):
    c = zenoh.Config()
    c.insert_json5("mode", '"peer"')
    c.insert_json5("connect/endpoints", json.dumps([endpoint]))
    c.insert_json5("listen/endpoints", "[]")
    c.insert_json5("scouting/multicast/enabled", "false")
    return zenoh.open(c)

def flood(endpoint, key, secs, size):
    s = session(endpoint)
    time.sleep(1.0)  # the gateway's subscriber declaration reaches us
    pub = s.declare_publisher(key)
    payload = b'{"data":"' + b"x" * size + b'"}'
    print("ready", flush=True)
    n, t0 = 0, time.monotonic()
    while time.monotonic() - t0 < secs:
        for _ in range(256):
            pub.put(payload)
        n += 256
    print(json.dumps({"puts": n, "secs": time.monotonic() - t0}), flush=True)
    s.close()

HASH = "RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18"
DDS = "std_msgs::msg::dds_::String_"
QOS = "::,7:,:,:,,"

def fakenodes(endpoint, n, bad, hold):
    # rmw_zenoh's liveliness tokens (crates/ros2/src/rmw.rs has the layout):
    # @ros2_lv/<domain>/<zid>/<node id>/<entity id>/<kind>/<enclave>/<ns>/<node>[/<topic>/<type>/<hash>/<qos>]
    s = session(endpoint)
    zid = str(s.zid())
    lv = s.liveliness()
    toks = []
    t0 = time.monotonic()
    for i in range(n + bad):
        nid = 2 * i + 1
        # The last `bad` nodes break the ROS 2 name rules in one way each.
        node = f"fake_{i}" if i < n else ["sp ace", "..", "zero\u200bwidth"][i % 3]
        topic = f"%fake%t{i}" if i < n else "%sp ace"
        toks.append(lv.declare_token(f"@ros2_lv/0/{zid}/{nid}/{nid}/NN/%/%/{node}"))
        toks.append(lv.declare_token(
            f"@ros2_lv/0/{zid}/{nid}/{nid + 1}/MP/%/%/{node}/{topic}/{DDS}/{HASH}/{QOS}"))
    print(json.dumps({"declared": len(toks), "secs": time.monotonic() - t0}), flush=True)
    time.sleep(hold)
    t0 = time.monotonic()
    for t in toks:
        t.undeclare()
    print(json.dumps({"undeclared": len(toks), "secs": time.monotonic() - t0}), flush=True)
    s.close()

if __name__ == "__main__":
    what = sys.argv[1]
    if what == "flood":
        flood(sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5]))
    else:
        fakenodes(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]))
"""


def zenoh_available():
    try:
        import zenoh  # noqa: F401
        return True
    except ImportError:
        return False


def free_loopback_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((HOST, 0))
    port = s.getsockname()[1]
    s.close()
    return port


def zenoh_peer(*args):
    """The raw Zenoh peer as a child process (nice 10 like the other
    attackers: it inherits this process's priority)."""
    p = subprocess.Popen([sys.executable, "-c", ZENOH_PEER, *map(str, args)],
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    children.append(p)
    return p


def zenoh_peer_line(p, timeout):
    line = p.stdout.readline() if readable(p.stdout, timeout) else b""
    if not line:
        err = p.stderr.read().decode("utf-8", "replace")[-1500:] if p.poll() is not None else ""
        raise RuntimeError(f"zenoh peer said nothing within {timeout:.0f} s {err}")
    return line.decode().strip()


