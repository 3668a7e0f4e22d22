#!/usr/bin/env python3
"""A /fibonacci action server (example_interfaces/action/Fibonacci) that is
itself a client of rosgate, over its NDJSON TCP port, with rosbridge v2's
action ops. roslibpy's tests/ros2/test_actions.py needs one: against
rosbridge it is a ROS 2 node beside the bridge; against rosgate the server
is just another client.

Semantics follow the ROS 2 action tutorial's Fibonacci server:

- the sequence starts [0, 1] and gets `order - 1` more elements, one per
  step; each step publishes the sequence so far as feedback, then waits one
  step period (1 s in the tutorial; --period);
- a cancel is checked at the start of each step: the goal then ends with
  status 5 (CANCELED) and an empty result, like the tutorial's
  `goal_handle.canceled(); return Fibonacci.Result()`;
- otherwise it ends with status 4 (SUCCEEDED) and the whole sequence.

A cancel also cuts the current step's wait short, so it is noticed at the
next step without waiting out the period. Goals run concurrently, one thread
each. A goal whose `order` is not an integer is aborted (status 6,
`result: false`).

Usage: fibonacci_server.py --tcp 127.0.0.1:PORT [--action /fibonacci]
       [--period 1.0]. Prints "ready" on stdout once rosgate has confirmed
the advertisement; exits when rosgate closes the connection, or on SIGTERM.
Standard library only.
"""

import argparse
import json
import os
import signal
import socket
import sys
import threading

ACTION_TYPE = "example_interfaces/action/Fibonacci"
STATUS_SUCCEEDED = 4
STATUS_CANCELED = 5
STATUS_ABORTED = 6


def log(msg):
    print("fibonacci_server: %s" % msg, file=sys.stderr, flush=True)


class Server:
    def __init__(self, sock, action, period):
        self.sock = sock
        self.action = action
        self.period = period
        self.write_lock = threading.Lock()
        self.goals = {}  # gateway goal id -> threading.Event (cancel requested)
        self.goals_lock = threading.Lock()

    def send(self, obj):
        line = json.dumps(obj, separators=(",", ":")) + "\n"
        with self.write_lock:
            self.sock.sendall(line.encode("utf-8"))

    def lines(self):
        reader = self.sock.makefile("r", encoding="utf-8", newline="\n")
        for line in reader:
            line = line.strip()
            if line:
                yield json.loads(line)

    def advertise(self, messages):
        self.send({"op": "advertise_action", "id": "advertise", "action": self.action, "type": ACTION_TYPE})
        for msg in messages:
            if msg.get("op") == "status" and msg.get("id") == "advertise":
                if msg.get("level") == "error":
                    raise RuntimeError("advertise_action refused: %s" % msg.get("msg"))
                return
            self.dispatch(msg)
        raise RuntimeError("connection closed before the advertisement was confirmed")

    def dispatch(self, msg):
        op = msg.get("op")
        if op == "send_action_goal":
            goal_id = msg["id"]
            cancel = threading.Event()
            with self.goals_lock:
                self.goals[goal_id] = cancel
            args = msg.get("args") or {}
            threading.Thread(target=self.execute, args=(goal_id, args, cancel), daemon=True).start()
        elif op == "cancel_action_goal":
            with self.goals_lock:
                cancel = self.goals.get(msg.get("id"))
            if cancel is not None:
                cancel.set()
            # else: the goal already ended; its result is on its way.
        elif op == "status":
            if msg.get("level") in ("error", "warning"):
                log("rosgate says: %s" % msg.get("msg"))
        else:
            log("ignored %s" % json.dumps(msg)[:200])

    def result(self, goal_id, values, status, ok=True):
        with self.goals_lock:
            self.goals.pop(goal_id, None)
        self.send({"op": "action_result", "id": goal_id, "action": self.action,
                   "values": values, "status": status, "result": ok})

    def execute(self, goal_id, args, cancel):
        try:
            order = args.get("order") if isinstance(args, dict) else None
            if isinstance(order, bool) or not isinstance(order, int):
                return self.result(goal_id, "order must be an integer, got %s" % json.dumps(order),
                                   STATUS_ABORTED, ok=False)
            sequence = [0, 1]
            for i in range(1, order):
                if cancel.is_set():
                    return self.result(goal_id, {"sequence": []}, STATUS_CANCELED)
                sequence.append(sequence[i] + sequence[i - 1])
                self.send({"op": "action_feedback", "id": goal_id, "action": self.action,
                           "values": {"sequence": sequence}})
                cancel.wait(self.period)
            self.result(goal_id, {"sequence": sequence}, STATUS_SUCCEEDED)
        except OSError:
            pass  # the connection is gone; the main loop exits


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tcp", default=os.environ.get("ROSGATE_TCP_ADDR"),
                        help="rosgate's NDJSON TCP address, host:port (default: $ROSGATE_TCP_ADDR)")
    parser.add_argument("--action", default="/fibonacci")
    parser.add_argument("--period", type=float, default=float(os.environ.get("FIBONACCI_PERIOD", "1.0")),
                        help="seconds per step (default: $FIBONACCI_PERIOD or 1.0, as in the tutorial)")
    opts = parser.parse_args()
    if not opts.tcp:
        parser.error("--tcp host:port (or ROSGATE_TCP_ADDR) is required")
    host, _, port = opts.tcp.rpartition(":")
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))

    sock = socket.create_connection((host, int(port)), timeout=10)
    sock.settimeout(None)
    server = Server(sock, opts.action, opts.period)
    messages = server.lines()
    server.advertise(messages)
    print("ready", flush=True)
    log("serving %s (%s) on %s, %.3g s per step" % (opts.action, ACTION_TYPE, opts.tcp, opts.period))
    for msg in messages:
        server.dispatch(msg)
    log("rosgate closed the connection")


if __name__ == "__main__":
    main()
