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
import os
import subprocess
import sys
import tempfile
import time

from ros2check import (FIB_SERVER, Line, Run, fib_result, free_port, send_fib_goal,
                       start_router, typed, zenohd)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SERVER = typed(FIB_SERVER, {"ACTION_PKG": "example_interfaces", "NODE": "fibonacci_server",
                            "ACTION": "/fibonacci"})

PARAM_NODE = r'''
import rclpy
from rclpy.node import Node
rclpy.init()
n = Node("rclpy_node")
n.declare_parameter("gain", 1.0)
print("ready", flush=True)
rclpy.spin(n)
'''


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rosgate", default=os.path.join(ROOT, "target/debug/rosgate"))
    a = ap.parse_args()
    router = zenohd()
    run = Run(tempfile.mkdtemp(prefix="rosgate-ros2-real-"), None)
    start, wait_log, check = run.start, run.wait_log, run.check

    endpoint = f"tcp/127.0.0.1:{free_port()}"
    node_env = dict(os.environ)
    node_env["ZENOH_CONFIG_OVERRIDE"] = f'connect/endpoints=["{endpoint}"]'
    try:
        start_router(run, router, endpoint, os.environ)
        port = free_port()
        start([a.rosgate, "--listen", f"127.0.0.1:{port}", "--ws-listen", "127.0.0.1:0",
               "--ros-domain", "0", "--zenoh-connect", endpoint, "--log-level", "debug"], "rosgate")
        wait_log("rosgate", "listening on")
        url = f"tcp://127.0.0.1:{port}"

        def goal_before_server():
            c = Line(port)
            send_fib_goal(c, "early", "/fibonacci", "example_interfaces/action/Fibonacci", 60)
            time.sleep(1.0)
            start([sys.executable, "-c", SERVER], "fib_server", node_env)
            fb = fib_result(c, "early", 60)
            return f"status 4, {fb} feedback messages, result [0, 1, 1, 2, 3]"

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
        run.stop()
    run.exit()


if __name__ == "__main__":
    main()
