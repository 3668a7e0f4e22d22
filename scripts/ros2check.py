"""What scripts/ros2-dds-check.py and scripts/ros2-real-check.py share: an
NDJSON client whose every read has a deadline, the processes a check starts
(each logging to a file of its own, all stopped at the end), the checks'
outcomes, a zenoh router for rmw_zenoh, and the rclpy Fibonacci action
server with the goal sent to it and its result checked.

Imported by those scripts as a sibling module (`python3 scripts/X.py` puts
scripts/ first on sys.path); not a script of its own.
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import time


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_for(what, fn, secs=30):
    """fn() polled until it is truthy (returned), or an AssertionError."""
    dl = time.monotonic() + secs
    while True:
        v = fn()
        if v or time.monotonic() > dl:
            assert v, f"no {what} within {secs} s"
            return v
        time.sleep(0.25)


def typed(code, types):
    """`code` with each @KEY@ replaced by types[KEY]; every @ must go."""
    for k, v in types.items():
        code = code.replace(f"@{k}@", v)
    assert "@" not in code, code
    return code


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


class Run:
    """The processes a check script started, each logging to WORK/NAME.log
    (stopped by stop(), last first), and its checks' outcomes."""

    def __init__(self, work, env):
        self.work = work
        self.env = env
        self.procs = []
        self.failures = []
        self.checks = 0

    def start(self, args, name, env=None):
        log = open(os.path.join(self.work, name + ".log"), "w")
        p = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                             env=self.env if env is None else env)
        self.procs.append(p)
        return p

    def log_of(self, name):
        with open(os.path.join(self.work, name + ".log")) as f:
            return f.read()

    def wait_log(self, name, text, secs=30):
        try:
            wait_for(f"{text!r} from {name}", lambda: text in self.log_of(name), secs)
        except AssertionError:
            raise AssertionError(f"{name} never said {text!r}: {self.log_of(name)[-800:]}")

    def check(self, name, fn):
        self.checks += 1
        t = time.monotonic()
        try:
            detail = fn()
            print(f"ok    {name} ({time.monotonic() - t:.1f} s){': ' + detail if detail else ''}")
        except Exception as e:  # a failed check is reported, the rest still run
            self.failures.append(name)
            print(f"FAIL  {name}: {e}")

    def stop(self):
        for p in reversed(self.procs):
            p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()

    def exit(self):
        print(f"{self.checks - len(self.failures)} passed, {len(self.failures)} failed "
              f"(logs in {self.work})")
        sys.exit(1 if self.failures else 0)


def zenohd():
    """The rmw_zenoh router's path, from $RMW_ZENOHD or PATH (or exit)."""
    path = os.environ.get("RMW_ZENOHD") or shutil.which("rmw_zenohd")
    if not path:
        sys.exit("rmw_zenohd not found: set RMW_ZENOHD or put it on PATH")
    return path


def start_router(run, router, endpoint, env):
    """rmw_zenohd listening on `endpoint` (env with the override), given a
    second to listen before anyone connects."""
    router_env = dict(env)
    router_env["ZENOH_CONFIG_OVERRIDE"] = f'listen/endpoints=["{endpoint}"]'
    run.start([router], "router", router_env)
    time.sleep(1.0)


# An rclpy Fibonacci action server: @ACTION_PKG@'s type (example_interfaces
# or test_msgs: the same fields), node @NODE@, action @ACTION@.
FIB_SERVER = r'''
import time, rclpy
from rclpy.action import ActionServer
from rclpy.node import Node
from @ACTION_PKG@.action import Fibonacci
class Fib(Node):
    def __init__(self):
        super().__init__("@NODE@")
        self.server = ActionServer(self, Fibonacci, "@ACTION@", self.execute)
        print("ready", flush=True)
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


def send_fib_goal(c, gid, action, action_type, timeout):
    """An NDJSON goal of order 5 with feedback, waiting for the server."""
    c.send({"op": "send_action_goal", "id": gid, "action": action, "action_type": action_type,
            "args": {"order": 5}, "feedback": True, "wait": True, "timeout": timeout})


def fib_result(c, gid, secs):
    """The result of send_fib_goal's goal `gid`: succeeded (status 4) with
    the sequence of order 5, after feedback. Returns the feedback count."""
    r = c.wait(lambda m: m.get("id") == gid and m.get("op") == "action_result",
               "the goal's result", secs)
    fb = [m for m in c.seen if m.get("op") == "action_feedback"]
    assert r["status"] == 4 and r["values"] == {"sequence": [0, 1, 1, 2, 3]}, r
    assert fb, "no feedback"
    return len(fb)
