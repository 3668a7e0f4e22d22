#!/usr/bin/env python3
"""The gateway against a real ROS 2 Jazzy graph on rmw_zenoh: rclpy nodes
and the `ros2` CLI, not the in-process fakes of crates/server/tests/ros2.rs.

Needs a shell where rclpy runs on rmw_zenoh_cpp (a sourced ROS 2 Jazzy
with RMW_IMPLEMENTATION=rmw_zenoh_cpp, example_interfaces installed) and
`rmw_zenohd` on PATH or in $RMW_ZENOHD. CI cannot build that in its time
budget, so this is run by hand; docs/ros2.md says when it last passed.

    scripts/ros2-real-check.py [--rosgate target/debug/rosgate]

(the gateway must be built with `--features ros2`, as the test
command builds it). Everything runs on loopback: a router on a free port,
the gateway joined to it with --ros-domain, rclpy nodes in subprocesses.
Each check has a deadline; the script stops every process it started and
exits 1 if any check failed.

Checks:
1. a goal sent with "wait": true before the rclpy action server exists
   reaches it once the server has declared its entities (rclpy declares
   them one after another) and succeeds with its feedback;
2. `rosgate param set` of an rclpy node's parameter calls the node's
   set_parameters: the node's value changes (`ros2 param get` reads it),
   the node's refusal of a wrong type exits 1 with its reason, and rosapi
   get_param/set_param read and set the node's own value.
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SERVER = r'''
import sys, time, rclpy
from rclpy.action import ActionServer
from rclpy.node import Node
from example_interfaces.action import Fibonacci

class Fib(Node):
    def __init__(self):
        super().__init__("fibonacci_server")
        self.server = ActionServer(self, Fibonacci, "/fibonacci", self.execute)
        print("serving", flush=True)

    def execute(self, handle):
        seq = [0, 1]
        for i in range(1, handle.request.order):
            seq.append(seq[i] + seq[i - 1])
            fb = Fibonacci.Feedback()
            fb.sequence = seq
            handle.publish_feedback(fb)
            time.sleep(0.05)
        handle.succeed()
        r = Fibonacci.Result()
        r.sequence = seq[: handle.request.order]
        return r

rclpy.init()
rclpy.spin(Fib())
'''

PARAM_NODE = r'''
import rclpy
from rclpy.node import Node
rclpy.init()
n = Node("rclpy_node")
n.declare_parameter("gain", 1.0)
print("ready", flush=True)
rclpy.spin(n)
'''


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Line:
    """A NDJSON connection to the gateway; every read has a deadline."""

    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.f = self.s.makefile("rb")
        self.seen = []

    def send(self, obj):
        self.s.sendall((json.dumps(obj) + "\n").encode())

    def wait(self, pred, what, secs=30):
        dl = time.monotonic() + secs
        while time.monotonic() < dl:
            self.s.settimeout(max(0.05, dl - time.monotonic()))
            try:
                line = self.f.readline()
            except socket.timeout:
                break
            if not line:
                break
            m = json.loads(line)
            self.seen.append(m)
            if pred(m):
                return m
        raise AssertionError(f"no {what} within {secs} s; seen: {self.seen[-5:]}")

    def call(self, service, args, secs=15):
        cid = f"c{time.monotonic_ns()}"
        self.send({"op": "call_service", "service": service, "args": args, "id": cid})
        return self.wait(lambda m: m.get("id") == cid, f"answer of {service}", secs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rosgate", default=os.path.join(ROOT, "target/debug/rosgate"))
    a = ap.parse_args()
    zenohd = os.environ.get("RMW_ZENOHD") or shutil.which("rmw_zenohd")
    if not zenohd:
        sys.exit("rmw_zenohd not found: set RMW_ZENOHD or put it on PATH")
    procs = []
    failures = []
    work = tempfile.mkdtemp(prefix="rosgate-ros2-real-")

    def start(args, name, env=None):
        log = open(os.path.join(work, name + ".log"), "w")
        p = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env)
        procs.append(p)
        return p

    def log_of(name):
        with open(os.path.join(work, name + ".log")) as f:
            return f.read()

    def wait_log(name, text, secs=30):
        dl = time.monotonic() + secs
        while time.monotonic() < dl:
            if text in log_of(name):
                return
            time.sleep(0.1)
        raise AssertionError(f"{name} never said {text!r}: {log_of(name)[-800:]}")

    def check(name, fn):
        t = time.monotonic()
        try:
            detail = fn()
            print(f"ok    {name} ({time.monotonic() - t:.1f} s){': ' + detail if detail else ''}")
        except Exception as e:  # a failed check is reported, the rest still run
            failures.append(name)
            print(f"FAIL  {name}: {e}")

    router = free_port()
    endpoint = f"tcp/127.0.0.1:{router}"
    env = dict(os.environ)
    env["ZENOH_CONFIG_OVERRIDE"] = f'listen/endpoints=["{endpoint}"]'
    node_env = dict(os.environ)
    node_env["ZENOH_CONFIG_OVERRIDE"] = f'connect/endpoints=["{endpoint}"]'
    try:
        start([zenohd], "router", env)
        time.sleep(1.0)
        port = free_port()
        start([a.rosgate, "--listen", f"127.0.0.1:{port}", "--ws-listen", "127.0.0.1:0",
               "--ros-domain", "0", "--zenoh-connect", endpoint, "--log-level", "debug"], "rosgate")
        wait_log("rosgate", "listening on")
        url = f"tcp://127.0.0.1:{port}"

        def goal_before_server():
            c = Line(port)
            c.send({"op": "send_action_goal", "id": "early", "action": "/fibonacci",
                    "action_type": "example_interfaces/action/Fibonacci", "args": {"order": 5},
                    "feedback": True, "wait": True, "timeout": 60})
            time.sleep(1.0)
            start([sys.executable, "-c", SERVER], "fib_server", node_env)
            r = c.wait(lambda m: m.get("id") == "early" and m.get("op") == "action_result",
                       "the goal's result", 60)
            fb = [m for m in c.seen if m.get("op") == "action_feedback"]
            assert r["status"] == 4 and r["values"] == {"sequence": [0, 1, 1, 2, 3]}, r
            assert fb, "no feedback"
            return f"status 4, {len(fb)} feedback messages, result {r['values']}"

        def cli(*args):
            return subprocess.run([a.rosgate, *args, "--url", url], capture_output=True,
                                  text=True, timeout=30)

        def param_set():
            start([sys.executable, "-c", PARAM_NODE], "param_node", node_env)
            wait_log("param_node", "ready")
            dl = time.monotonic() + 30
            while True:
                out = cli("param", "set", "/rclpy_node", "gain", "3.0")
                if out.returncode == 0 or time.monotonic() > dl:
                    break
                time.sleep(0.5)
            assert out.returncode == 0 and "Set parameter successful" in out.stdout, out
            got = subprocess.run(["ros2", "param", "get", "--no-daemon", "--spin-time", "3",
                                  "/rclpy_node", "gain"], capture_output=True, text=True,
                                 timeout=60, env=node_env)
            assert "3.0" in got.stdout, got
            bad = cli("param", "set", "/rclpy_node", "gain", "fast")
            assert bad.returncode == 1 and "Setting parameter failed" in bad.stderr, bad
            c = Line(port)
            v = c.call("/rosapi/get_param", {"name": "/rclpy_node:gain"})
            assert v["result"] and v["values"]["value"] == "3.0", v
            v = c.call("/rosapi/set_param", {"name": "/rclpy_node:gain", "value": "0.5"})
            assert v["result"], v
            v = c.call("/rosapi/set_param", {"name": "/rclpy_node:gain", "value": "\"x\""})
            assert not v["result"], v
            v = c.call("/rosapi/get_param", {"name": "/rclpy_node:gain"})
            assert v["values"]["value"] == "0.5", v
            shown = [ln for ln in got.stdout.splitlines() if "value is" in ln]
            return f"ros2 param get: {shown}; refusal: {bad.stderr.strip()!r}"

        check("a goal sent with wait before the rclpy action server starts", goal_before_server)
        check("rosgate param set and rosapi reach an rclpy node's parameters", param_set)
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
    print(f"{2 - len(failures)} passed, {len(failures)} failed (logs in {work})")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
