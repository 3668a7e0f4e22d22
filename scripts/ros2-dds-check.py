#!/usr/bin/env python3
"""The gateway against a real ROS 2 Jazzy graph on DDS: rclpy nodes on Fast
DDS (rmw_fastrtps_cpp) and the `ros2` CLI, joined with `--dds-domain`.

Needs a shell where rclpy runs on rmw_fastrtps_cpp: a sourced ROS 2 Jazzy,
or the PyPI `ros-<pkg>` wheels (Python 3.11). scripts/ros2-dds-env.sh makes
such a venv (pinned wheels, no `ros2` CLI, no example_interfaces: they have
no wheel) and runs a command in it; that is how .ci/run runs this script:

    scripts/ros2-dds-env.sh python3 scripts/ros2-dds-check.py --rosgate target/debug/rosgate

Set ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST in that shell (ros2-dds-env.sh
does): the gateway stays on loopback by default.

    scripts/ros2-dds-check.py [--rosgate target/debug/rosgate] [--domain N]
                              [--no-cli] [--wheel-types] [--logs DIR]
    scripts/ros2-dds-check.py --rmw zenoh    # the same checks over rmw_zenoh

What the environment lacks is replaced, never skipped (each check asserts
the same either way):
- without the `ros2` CLI on PATH (or with --no-cli), `ros2 node list` and
  `ros2 param get` are done as the CLI does them, with rclpy in a
  subprocess: the graph's node names after the CLI's 3 s spin, and the
  node's `~/get_parameters` service, printed in the CLI's words;
- without example_interfaces (or with --wheel-types), the service is
  test_msgs/srv/BasicTypes (int64_value + int32_value -> int64_value, for
  AddTwoInts' a + b -> sum) and the action test_msgs/action/Fibonacci (the
  same fields as example_interfaces'); the gateway, which bundles
  example_interfaces but not test_msgs, gets those two files with
  `--interfaces` (only those: test_msgs/msg/BasicTypes is still learned
  from its node in check 7).

(the gateway must be built with `--features dds`; with `--rmw zenoh`,
`--features ros2`, and rclpy must run on rmw_zenoh_cpp with `rmw_zenohd` on
PATH or in $RMW_ZENOHD: a router is started on a free loopback port and the
gateway joins with `--ros-domain`, so both sides pass the same scenarios). Everything runs on
loopback in a DDS domain of its own (default: 100 + pid % 100): the gateway
with --dds-domain, rclpy nodes in subprocesses. Each check has a deadline;
the script stops every process it started and exits 1 if any check failed.

Checks:
1. the graph: an rclpy node and its topics in rosapi, the gateway's node
   in `ros2 node list`;
2. topics: rclpy talker -> NDJSON subscriber (JSON) and `topic echo
   --compression cbor-raw` (the CDR untouched); NDJSON publish -> rclpy
   listener; a message of the wrong type refused;
3. transient local both ways: an rclpy latched message to a late NDJSON
   subscriber, a latched NDJSON publish to a late rclpy subscriber;
4. services both ways: rosgate -> rclpy AddTwoInts server, rclpy
   AddTwoInts client -> an NDJSON provider (or test_msgs BasicTypes, above);
5. parameters both ways: `rosgate param get/set` of an rclpy node, and
   `ros2 param get` of a gateway client's node;
6. actions both ways: an NDJSON goal (with feedback) to an rclpy Fibonacci
   action server (example_interfaces' or test_msgs'), and an rclpy action
   client's goal to an NDJSON action server;
7. a type the gateway does not bundle (`test_msgs/msg/BasicTypes`) learned
   from the publishing node's `~/get_type_description` (skipped when
   test_msgs is not installed);
8. with --roslibpy PYTHON: roslibpy, unchanged, over the rosbridge
   WebSocket port: the rclpy talker's topic, a call to the rclpy service, a
   goal to the rclpy action server (feedback and result), rosapi's nodes;
9. with --roslib DIR: roslib (Node), unchanged, the same topic, service
   and action.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from ros2check import (FIB_SERVER, Line, Run, fib_result, free_port, send_fib_goal,
                       start_router, typed, wait_for, zenohd)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

TALKER = r'''
import rclpy, time
from std_msgs.msg import String
from rclpy.qos import QoSProfile, DurabilityPolicy
rclpy.init(); n = rclpy.create_node("dds_talker")
n.declare_parameter("gain", 1.0)
p = n.create_publisher(String, "/chatter", 10)
lp = n.create_publisher(String, "/latched_from_ros2",
                        QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL))
lp.publish(String(data="latched hello"))
print("ready", flush=True)
i = 0
while True:
    p.publish(String(data=f"hi {i}")); i += 1
    rclpy.spin_once(n, timeout_sec=0.1)
'''

LISTENER = r'''
import rclpy, sys, time
from std_msgs.msg import String
from rclpy.qos import QoSProfile, DurabilityPolicy
rclpy.init(); n = rclpy.create_node("dds_listener_" + sys.argv[2])
qos = QoSProfile(depth=5, durability=DurabilityPolicy.TRANSIENT_LOCAL) if sys.argv[2] == "latched" else 10
n.create_subscription(String, sys.argv[1], lambda m: print("got", m.data, flush=True), qos)
print("ready", flush=True)
rclpy.spin(n)
'''

ADD_SERVER = r'''
import rclpy
from @SRV_PKG@.srv import @SRV@ as AddTwoInts
rclpy.init(); n = rclpy.create_node("dds_add_server")
def cb(req, resp):
    resp.@SUM@ = req.@A@ + req.@B@
    return resp
n.create_service(AddTwoInts, "/dds_add_two_ints", cb)
print("ready", flush=True)
rclpy.spin(n)
'''

ADD_CLIENT = r'''
import rclpy
from @SRV_PKG@.srv import @SRV@ as AddTwoInts
rclpy.init(); n = rclpy.create_node("dds_add_client")
c = n.create_client(AddTwoInts, "/rosgate_add")
print("service ready", c.wait_for_service(timeout_sec=20), flush=True)
for i in range(3):
    f = c.call_async(AddTwoInts.Request(@A@=i, @B@=40))
    rclpy.spin_until_future_complete(n, f, timeout_sec=10)
    print("sum", f.result().@SUM@ if f.done() and f.result() else None, flush=True)
'''


FIB_CLIENT = r'''
import rclpy
from rclpy.action import ActionClient
from rclpy.node import Node
from @ACTION_PKG@.action import Fibonacci
rclpy.init(); n = Node("dds_fibonacci_client")
c = ActionClient(n, Fibonacci, "/rosgate_fibonacci")
print("server ready", c.wait_for_server(timeout_sec=20), flush=True)
fbs = []
f = c.send_goal_async(Fibonacci.Goal(order=4), feedback_callback=lambda m: fbs.append(1))
rclpy.spin_until_future_complete(n, f, timeout_sec=10)
r = f.result().get_result_async()
rclpy.spin_until_future_complete(n, r, timeout_sec=20)
print("result", r.result().status, list(r.result().result.sequence), "feedback", len(fbs), flush=True)
'''


BASIC_TALKER = r'''
import rclpy
from test_msgs.msg import BasicTypes
rclpy.init(); n = rclpy.create_node("dds_basic_talker")
p = n.create_publisher(BasicTypes, "/basic", 10)
print("ready", flush=True)
i = 0
while True:
    m = BasicTypes()
    m.int32_value = i
    p.publish(m)
    i += 1
    rclpy.spin_once(n, timeout_sec=0.1)
'''

# roslibpy, unchanged, over rosgate's rosbridge WebSocket port, with the
# rclpy nodes on Fast DDS: a topic from the talker, a call to the rclpy
# service, a goal to the rclpy action server (feedback and result), and
# the talker in rosapi's nodes. Prints one JSON line.
ROSLIBPY_CLIENT = r"""
import json, os, sys, threading, time, roslibpy
port, srv, srv_type, a, b, s, action, action_type = sys.argv[1:9]
ros = roslibpy.Ros("127.0.0.1", int(port)); ros.run(timeout=10)
got, fb, done = [], [], threading.Event()
res = {}
roslibpy.Topic(ros, "/chatter", "std_msgs/msg/String").subscribe(lambda m: got.append(m["data"]))
answer = roslibpy.Service(ros, srv, srv_type).call(roslibpy.ServiceRequest({a: 2, b: 3}), timeout=20)
c = roslibpy.ActionClient(ros, action, action_type)
c.send_goal(roslibpy.Goal({"order": 5}), lambda r: (res.update(r["values"]), done.set()),
            lambda f: fb.append(f), lambda e: (res.update(error=str(e)), done.set()))
done.wait(30)
end = time.monotonic() + 20
while not got and time.monotonic() < end:
    time.sleep(0.05)
nodes = roslibpy.Service(ros, "/rosapi/nodes", "rosapi/Nodes").call(roslibpy.ServiceRequest(), timeout=10)
print(json.dumps({"chatter": got[:1], "sum": answer[s], "result": res, "feedback": len(fb),
                  "talker_in_rosapi": "/dds_talker" in nodes["nodes"]}), flush=True)
os._exit(0)
"""

# roslib (Node, ESM), unchanged, the same checks as ROSLIBPY_CLIENT.
ROSLIB_CLIENT = r"""
import { Ros, Topic, Service, Action } from "roslib";
const [port, srv, srvType, a, b, s, action, actionType] = process.argv.slice(2);
const ros = new Ros({ url: `ws://127.0.0.1:${port}` });
const fail = (why) => { console.log(JSON.stringify({ error: String(why) })); process.exit(1); };
setTimeout(() => fail("timed out"), 60000).unref();
ros.on("error", fail);
ros.on("connection", async () => {
  const chatter = new Promise((res) => new Topic({ ros, name: "/chatter",
    messageType: "std_msgs/msg/String" }).subscribe((m) => res(m.data)));
  const sum = await new Promise((res, rej) => new Service({ ros, name: srv, serviceType: srvType })
    .callService({ [a]: 2, [b]: 3 }, (r) => res(r[s]), rej));
  let feedback = 0;
  const result = await new Promise((res, rej) => new Action({ ros, name: action,
    actionType }).sendGoal({ order: 5 }, res, () => { feedback += 1; }, rej));
  console.log(JSON.stringify({ chatter: [await chatter], sum, result, feedback }));
  process.exit(0);
});
"""

# `ros2 node list --no-daemon --spin-time 3` without the CLI: a node that
# spins 3 s for discovery, then the graph's node names, one a line.
NODE_LIST = r'''
import time, rclpy
rclpy.init(); n = rclpy.create_node("_ros2cli_node_list")
end = time.monotonic() + 3.0
while time.monotonic() < end:
    rclpy.spin_once(n, timeout_sec=0.1)
for name, ns in sorted(n.get_node_names_and_namespaces()):
    if name != "_ros2cli_node_list":
        print(ns.rstrip("/") + "/" + name)
'''

# `ros2 param get NODE NAME --no-daemon --spin-time 3` without the CLI, as
# ros2param does it: "Node not found" unless NODE is in the graph within the
# spin time, then NODE's get_parameters service, printed in its words.
PARAM_GET = r'''
import sys, time, rclpy
from rcl_interfaces.msg import ParameterType
from rcl_interfaces.srv import GetParameters
target, name = sys.argv[1], sys.argv[2]
rclpy.init(); n = rclpy.create_node("_ros2cli_param_get")
end = time.monotonic() + 3.0
def listed():
    return target in [ns.rstrip("/") + "/" + nm for nm, ns in n.get_node_names_and_namespaces()]
while not listed() and time.monotonic() < end:
    rclpy.spin_once(n, timeout_sec=0.1)
if not listed():
    print("Node not found", file=sys.stderr); sys.exit(1)
c = n.create_client(GetParameters, target + "/get_parameters")
if not c.wait_for_service(timeout_sec=5.0):
    print("Wait for service timed out", file=sys.stderr); sys.exit(1)
f = c.call_async(GetParameters.Request(names=[name]))
rclpy.spin_until_future_complete(n, f, timeout_sec=10.0)
if not f.done() or f.result() is None:
    print("Exception while calling service of node", target, file=sys.stderr); sys.exit(1)
v = f.result().values[0]
words = {ParameterType.PARAMETER_BOOL: ("Boolean", v.bool_value),
         ParameterType.PARAMETER_INTEGER: ("Integer", v.integer_value),
         ParameterType.PARAMETER_DOUBLE: ("Double", v.double_value),
         ParameterType.PARAMETER_STRING: ("String", v.string_value)}
if v.type == ParameterType.PARAMETER_NOT_SET:
    print("Parameter not set."); sys.exit(1)
kind, value = words.get(v.type, ("Unknown", v))
print(f"{kind} value is: {value}")
'''

# The service and action types, from example_interfaces when rclpy has it,
# else from test_msgs (the wheels' only service and action with these
# shapes). A, B and SUM are the request's two addends and the response's sum.
EXAMPLE_TYPES = {"SRV_PKG": "example_interfaces", "SRV": "AddTwoInts", "A": "a", "B": "b",
                 "SUM": "sum", "ACTION_PKG": "example_interfaces"}
WHEEL_TYPES = {"SRV_PKG": "test_msgs", "SRV": "BasicTypes", "A": "int64_value",
               "B": "int32_value", "SUM": "int64_value", "ACTION_PKG": "test_msgs"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rosgate", default=os.path.join(ROOT, "target/debug/rosgate"))
    ap.add_argument("--domain", type=int, default=100 + os.getpid() % 100)
    ap.add_argument("--rmw", choices=["dds", "zenoh"], default="dds")
    ap.add_argument("--roslibpy", metavar="PYTHON",
                    help="a Python with roslibpy 2.x: also run roslibpy against --dds-domain")
    ap.add_argument("--roslib", metavar="DIR",
                    help="a directory whose node_modules has roslib 2.x: also run roslib (Node)")
    ap.add_argument("--no-cli", action="store_true", help="do `ros2 node list` and "
                    "`ros2 param get` with rclpy even if `ros2` is on PATH")
    ap.add_argument("--wheel-types", action="store_true", help="use test_msgs' service and "
                    "action even if example_interfaces is installed")
    ap.add_argument("--logs", help="directory for the processes' logs (emptied first; "
                    "default: a new temporary directory)")
    a = ap.parse_args()
    if a.logs:
        shutil.rmtree(a.logs, ignore_errors=True)
        os.makedirs(a.logs)
        work = a.logs
    else:
        work = tempfile.mkdtemp(prefix="rosgate-ros2-dds-")
    env = dict(os.environ)
    env["ROS_DOMAIN_ID"] = str(a.domain)
    env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")

    run = Run(work, env)
    start, log_of, check = run.start, run.log_of, run.check

    def py(code, name, *args):
        start([sys.executable, "-c", code, *args], name)
        wait_for(f"{name} ready", lambda: "ready" in log_of(name))

    port, ws = free_port(), free_port()
    url = f"tcp://127.0.0.1:{port}"

    def cli(*args, at=url):
        return subprocess.run([a.rosgate, *args, "--url", at], capture_output=True, text=True,
                              timeout=30)

    def importable(module):
        return subprocess.run([sys.executable, "-c", f"import {module}"], env=env,
                              capture_output=True).returncode == 0

    use_cli = not a.no_cli and shutil.which("ros2", path=env.get("PATH")) is not None
    use_example = not a.wheel_types and importable("example_interfaces.srv")
    types = EXAMPLE_TYPES if use_example else WHEEL_TYPES
    srv_type = f"{types['SRV_PKG']}/srv/{types['SRV']}"
    action_type = f"{types['ACTION_PKG']}/action/Fibonacci"
    print(f"rclpy: {sys.executable}; ros2 node list / param get: "
          f"{'the ros2 CLI' if use_cli else 'rclpy (no ros2 CLI)'}; "
          f"types: {srv_type}, {action_type}")

    def ros2(*args):
        if use_cli:
            return subprocess.run(["ros2", *args, "--no-daemon", "--spin-time", "3"],
                                  capture_output=True, text=True, timeout=60, env=env)
        if args == ("node", "list"):
            code, rest = NODE_LIST, []
        elif args[:2] == ("param", "get") and len(args) == 4:
            code, rest = PARAM_GET, list(args[2:])
        else:
            raise AssertionError(f"no rclpy equivalent of ros2 {' '.join(args)}")
        return subprocess.run([sys.executable, "-c", code, *rest], capture_output=True,
                              text=True, timeout=60, env=env)

    # test_msgs' service and action for the gateway (it bundles
    # example_interfaces, not test_msgs): those two files only, so that
    # test_msgs/msg/BasicTypes stays a type it must learn (check 7).
    extra = []
    if not use_example:
        share = subprocess.run([sys.executable, "-c", "from ament_index_python.packages import "
                                "get_package_share_directory as d; print(d('test_msgs'))"],
                               env=env, capture_output=True, text=True)
        assert share.returncode == 0, f"test_msgs not found: {share.stderr}"
        src = share.stdout.strip()
        for sub, name in (("srv", "BasicTypes.srv"), ("action", "Fibonacci.action")):
            os.makedirs(os.path.join(work, "interfaces", "test_msgs", sub), exist_ok=True)
            shutil.copy(os.path.join(src, sub, name),
                        os.path.join(work, "interfaces", "test_msgs", sub, name))
        extra = ["--interfaces", os.path.join(work, "interfaces")]

    join = ["--dds-domain", str(a.domain)]
    if a.rmw == "zenoh":
        router = zenohd()
        endpoint = f"tcp/127.0.0.1:{free_port()}"
        env["ZENOH_CONFIG_OVERRIDE"] = f'connect/endpoints=["{endpoint}"]'
        join = ["--ros-domain", str(a.domain), "--zenoh-connect", endpoint]
    try:
        if a.rmw == "zenoh":
            start_router(run, router, endpoint, env)
        start([a.rosgate, "--listen", f"127.0.0.1:{port}", "--ws-listen", f"127.0.0.1:{ws}",
               "--tcp-domain", str(a.domain), "--ws-domain", str(a.domain), *join, *extra],
              "rosgate")
        run.wait_log("rosgate", "listening on")
        py(TALKER, "talker")

        def graph():
            c = Line(port)
            nodes = wait_for("/dds_talker in rosapi", lambda: (
                lambda v: "/dds_talker" in v["values"]["nodes"] and v["values"]["nodes"])(
                    c.call("/rosapi/nodes", {})))
            # Nodes and topics may be announced apart (rmw_zenoh's tokens).
            wait_for("/chatter in rosapi", lambda: "/chatter" in c.call(
                "/rosapi/topics", {})["values"]["topics"])
            # One `ros2 node list` spins 3 s; on a loaded 2-core machine a fresh
            # participant can take longer to discover the graph, so ask again as
            # a person would (each attempt is the CLI's own 3 s).
            mine = wait_for("the gateway in ros2 node list", lambda: [
                n for n in ros2("node", "list").stdout.split() if n.startswith("/rosgate_")], 30)
            return f"rosapi nodes {nodes}; ros2 node list {mine}"

        def topics():
            c = Line(port)
            c.send({"op": "subscribe", "topic": "/chatter", "type": "std_msgs/msg/String"})
            m = c.wait(lambda m: m.get("op") == "publish", "a sample of /chatter", 30)
            raw = cli("topic", "echo", "/chatter", "--compression", "cbor-raw", "--once",
                      at=f"ws://127.0.0.1:{ws}")
            assert raw.returncode == 0 and "hi " in raw.stdout, raw
            py(LISTENER, "listener", "/from_rosgate", "volatile")
            p = Line(port)
            p.send({"op": "advertise", "topic": "/from_rosgate", "type": "std_msgs/msg/String"})

            def sent():
                p.send({"op": "publish", "topic": "/from_rosgate", "msg": {"data": "hello dds"}})
                return "got hello dds" in log_of("listener")
            wait_for("the message at the rclpy listener", sent)
            bad = cli("topic", "pub", "/from_rosgate", "std_msgs/msg/Int32", "{data: 3}", "--once")
            assert bad.returncode == 1 and "not std_msgs/msg/String" in bad.stderr, bad
            return f"JSON {m['msg']}, cbor-raw echoed, rclpy got it, Int32 refused"

        def latched():
            c = Line(port)
            c.send({"op": "subscribe", "topic": "/latched_from_ros2", "type": "std_msgs/msg/String"})
            m = c.wait(lambda m: m.get("op") == "publish", "the latched message", 30)
            assert m["msg"] == {"data": "latched hello"}, m
            p = Line(port)
            p.send({"op": "advertise", "topic": "/latched_from_rosgate",
                    "type": "std_msgs/msg/String", "latch": True})
            p.send({"op": "publish", "topic": "/latched_from_rosgate", "msg": {"data": "kept"}})
            time.sleep(1.0)
            py(LISTENER, "late", "/latched_from_rosgate", "latched")
            wait_for("the latched message at a late rclpy subscriber",
                     lambda: "got kept" in log_of("late"))
            return "both ways"

        def services():
            A, B, SUM = types["A"], types["B"], types["SUM"]
            py(typed(ADD_SERVER, types), "add_server")
            out = wait_for("an answer of the rclpy server", lambda: (
                lambda r: r.returncode == 0 and r)(cli(
                    "service", "call", "/dds_add_two_ints", srv_type,
                    f"{{{A}: 2, {B}: 3}}")))
            assert f"{SUM}: 5" in out.stdout, out
            prov = Line(port)
            prov.send({"op": "advertise_service", "service": "/rosgate_add", "type": srv_type})
            start([sys.executable, "-c", typed(ADD_CLIENT, types)], "add_client")
            for _ in range(3):
                call = prov.wait(lambda m: m.get("op") == "call_service", "a call from rclpy", 30)
                s = call["args"][A] + call["args"][B]
                prov.send({"op": "service_response", "service": call["service"],
                           "id": call["id"], "values": {SUM: s}, "result": True})
            wait_for("rclpy's answers", lambda: log_of("add_client").count("sum 4") == 3)
            return "rosgate -> rclpy sum 5; rclpy -> rosgate sums " + " ".join(
                ln.split()[1] for ln in log_of("add_client").splitlines() if ln.startswith("sum"))

        def params():
            got = cli("param", "get", "/dds_talker", "gain")
            assert got.returncode == 0 and "1.0" in got.stdout, got
            ok = cli("param", "set", "/dds_talker", "gain", "3.0")
            assert ok.returncode == 0, ok
            # "Node not found" when discovery outlasts the CLI's 3 s spin: ask again.
            wait_for("ros2 param get of the set value", lambda: (
                lambda r: "3.0" in r.stdout and r.stdout)(ros2("param", "get", "/dds_talker",
                                                               "gain")), 30)
            node = Line(port)
            node.send({"op": "declare_node", "name": "dds_client_node", "id": "n"})
            node.send({"op": "declare_parameter", "name": "speed", "value": 2.5, "id": "p"})
            seen = wait_for("the client node's parameter in ros2 param get", lambda: (
                lambda r: "2.5" in r.stdout and r.stdout)(ros2("param", "get", "/dds_client_node",
                                                               "speed")), 60)
            shown = [ln for ln in seen.splitlines() if "value is" in ln]
            return f"rclpy gain 1.0 -> 3.0; ros2 param get of a client node: {shown}"

        check("the graph: rclpy nodes and topics in rosapi, the gateway in ros2 node list", graph)
        check("topics both ways, typed and checked, CDR untouched for cbor-raw", topics)
        check("transient local both ways", latched)
        check(f"services both ways ({types['SRV']})", services)
        check("parameters both ways", params)

        def actions():
            py(typed(FIB_SERVER, {**types, "NODE": "dds_fibonacci_server",
                                  "ACTION": "/dds_fibonacci"}), "fib_server")
            c = Line(port)
            send_fib_goal(c, "g1", "/dds_fibonacci", action_type, 30)
            fb = fib_result(c, "g1", 40)
            srv = Line(port)
            srv.send({"op": "advertise_action", "action": "/rosgate_fibonacci",
                      "type": action_type})
            start([sys.executable, "-c", typed(FIB_CLIENT, types)], "fib_client")
            g = srv.wait(lambda m: m.get("op") == "send_action_goal", "a goal from rclpy", 40)
            srv.send({"op": "action_feedback", "action": g["action"], "id": g["id"],
                      "values": {"sequence": [0, 1]}})
            srv.send({"op": "action_result", "action": g["action"], "id": g["id"],
                      "values": {"sequence": [0, 1, 1, 2]}, "status": 4, "result": True})
            wait_for("rclpy's result", lambda: "result 4 [0, 1, 1, 2]" in log_of("fib_client"))
            return (f"rosgate -> rclpy: status 4, {fb} feedback; rclpy -> rosgate: "
                    + log_of("fib_client").splitlines()[-1])

        check(f"actions both ways ({action_type})", actions)

        def learned():
            if not importable("test_msgs.msg"):
                return "skipped: test_msgs is not installed"
            py(BASIC_TALKER, "basic_talker")
            c = Line(port)
            c.send({"op": "subscribe", "topic": "/basic", "type": "test_msgs/msg/BasicTypes"})
            m = c.wait(lambda m: m.get("op") == "publish", "a sample of an unbundled type", 40)
            assert "int32_value" in m["msg"], m
            return f"test_msgs/msg/BasicTypes learned; int32_value {m['msg']['int32_value']}"

        check("a type the gateway lacks learned from the node", learned)

        # The rclpy talker, AddTwoInts server and Fibonacci server of the
        # checks above are still running: real rosbridge clients reach them.
        client_args = [str(ws), "/dds_add_two_ints", srv_type, types["A"], types["B"],
                       types["SUM"], "/dds_fibonacci", action_type]

        def outside(name, cmd, cwd=None):
            out = subprocess.run(cmd + client_args, capture_output=True, text=True,
                                 timeout=90, cwd=cwd)
            assert out.returncode == 0, out
            got = json.loads(out.stdout.strip().splitlines()[-1])
            assert got["chatter"] and got["chatter"][0].startswith("hi "), got
            assert got["sum"] == 5, got
            assert list(got["result"].get("sequence", [])) == [0, 1, 1, 2, 3], got
            assert got["feedback"] >= 1, got
            return f"{name}: {json.dumps(got)}"

        if a.roslibpy:
            check(f"roslibpy (unchanged) against {join[0]}: topic, service, action, rosapi",
                  lambda: outside("roslibpy", [a.roslibpy, "-c", ROSLIBPY_CLIENT]))
        if a.roslib:
            script = os.path.join(a.roslib, "rosgate-dds-check.mjs")
            with open(script, "w") as f:
                f.write(ROSLIB_CLIENT)
            try:
                check(f"roslib (Node, unchanged) against {join[0]}: topic, service, action",
                      lambda: outside("roslib", ["node", script], cwd=a.roslib))
            finally:
                os.remove(script)
    finally:
        run.stop()
    run.exit()

if __name__ == "__main__":
    main()
