"""rosgate in a ROS 2 graph that runs rmw_zenoh (docs/ros2.md), against a
peer nobody in this project wrote: zenoh-ros2-sdk (PyPI), a pure-Python
rmw_zenoh node (its own liveliness tokens, attachments, RIHS01 hashes and
CDR through rosbags).

scripts/clients.sh runs this file once per Zenoh version (the current
eclipse-zenoh, and 1.8.0, which ROS 2 Jazzy's rmw_zenoh vendors). The
gateway (ROSGATE_BIN) listens for Zenoh on a loopback port with
``--ros-domain 0``; the peer connects there as rmw_zenoh nodes connect to
their router. No scouting. The peer reads the message definitions rosgate
bundles (ROSGATE_ROS_SHARE), so it never fetches any.

Both directions, for std_msgs/msg/String, geometry_msgs/msg/Twist and
sensor_msgs/msg/Image, with a roslibpy client (WebSocket) and a plain TCP
client (NDJSON); example_interfaces/srv/AddTwoInts called both ways; roslibpy's and a TCP
client's goals to a ROS 2 action server (built from the SDK's services and
publisher); rosapi lists the ROS 2 peer's topics with their types; a message that does not fit
its type gets an error status naming the field.
"""

import base64
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time

import pytest
import roslibpy

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from rosgate_testing import free_zenoh_port, until as shared_until  # noqa: E402

BIN = os.environ.get("ROSGATE_BIN", "")
SHARE = os.environ.get("ROSGATE_ROS_SHARE", "")
TRANSPORT = os.environ.get("ROSLIBPY_TRANSPORT", "twisted")
CROSS = 15.0  # seconds: the longest anything may take to cross (a bound, not a sleep)

pytestmark = pytest.mark.skipif(not BIN, reason="ROSGATE_BIN is not set (run via scripts/clients.sh)")

if SHARE:
    # Before anything else of the SDK: its registry is a process-wide singleton.
    from zenoh_ros2_sdk import get_registry

    get_registry(messages_dir=SHARE)

from zenoh_ros2_sdk import (  # noqa: E402
    ROS2Publisher,
    ROS2ServiceClient,
    ROS2ServiceServer,
    ROS2Subscriber,
    get_message_class,
)



def until(pred, what, timeout=CROSS, every=0.05):
    shared_until(pred, what, timeout, every)


class Gateway(object):
    """The gateway process; its ports are read from its log."""

    def __init__(self, *flags):
        args = [BIN, "--listen", "127.0.0.1:0", "--ws-listen", "127.0.0.1:0", "--log-level", "info"]
        self.proc = subprocess.Popen(args + list(flags), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.log = []
        self.ws_port = self.tcp_port = None
        ready = threading.Event()

        def drain():
            for line in self.proc.stderr:
                self.log.append(line)
                m = re.search(r"websocket listening on ws://127\.0\.0\.1:(\d+)", line)
                if m:
                    self.ws_port = int(m.group(1))
                m = re.search(r"rosgate \S+ listening on 127\.0\.0\.1:(\d+)", line)
                if m:
                    self.tcp_port = int(m.group(1))
                if self.ws_port and self.tcp_port:
                    ready.set()
            ready.set()

        threading.Thread(target=drain, daemon=True).start()
        ready.wait(15)
        if not (self.ws_port and self.tcp_port):
            self.stop()
            raise AssertionError("gateway did not start: %s" % "".join(self.log))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


class Tcp(object):
    """A plain NDJSON client of the gateway's TCP port."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.sock.settimeout(0.1)
        self.buf = b""
        self.seen = []

    def send(self, obj):
        self.sock.sendall((json.dumps(obj) + "\n").encode())

    def poll(self):
        try:
            data = self.sock.recv(1 << 20)
            if not data:
                raise AssertionError("the gateway closed the connection")
            self.buf += data
        except socket.timeout:
            pass
        while b"\n" in self.buf:
            line, self.buf = self.buf.split(b"\n", 1)
            self.seen.append(json.loads(line))

    def wait(self, pred, what, timeout=CROSS):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for m in self.seen:
                if pred(m):
                    self.seen.remove(m)
                    return m
            self.poll()
        raise AssertionError("never %s within %.0f s; seen %r" % (what, timeout, self.seen[-5:]))

    def close(self):
        self.sock.close()


@pytest.fixture(scope="module")
def graph():
    """The gateway, and keyword arguments that put a peer entity in its graph."""
    assert SHARE and os.path.isdir(SHARE), "ROSGATE_ROS_SHARE must name rosgate's interface share dir"
    zport = free_zenoh_port()
    gw = Gateway("--zenoh-listen", "tcp/127.0.0.1:%d" % zport, "--ros-domain", "0")
    try:
        yield gw, dict(router_ip="127.0.0.1", router_port=zport, domain_id=0)
    finally:
        gw.stop()


@pytest.fixture
def ros(graph):
    gw, _ = graph
    client = roslibpy.Ros("127.0.0.1", gw.ws_port, transport=TRANSPORT)
    client.run(timeout=10)
    assert client.is_connected
    yield client
    client.close()


@pytest.fixture
def tcp(graph):
    gw, _ = graph
    c = Tcp(gw.tcp_port)
    yield c
    c.close()


def Vector3(**kw):
    return get_message_class("geometry_msgs/msg/Vector3")(**kw)


def Header(stamp_sec, frame_id):
    Time = get_message_class("builtin_interfaces/msg/Time")
    return get_message_class("std_msgs/msg/Header")(stamp=Time(sec=stamp_sec, nanosec=7), frame_id=frame_id)


# ------------------------------------------------------- ROS 2 -> clients


def test_a_ros2_string_reaches_roslibpy_and_tcp_subscribers(graph, ros, tcp):
    _, peer = graph
    got = []
    listener = roslibpy.Topic(ros, "/ros_chatter", "std_msgs/String")
    listener.subscribe(got.append)
    tcp.send({"op": "subscribe", "topic": "/ros_chatter", "type": "std_msgs/msg/String"})
    pub = ROS2Publisher(topic="/ros_chatter", msg_type="std_msgs/msg/String", **peer)
    try:
        n = 0

        def published_and_heard():
            nonlocal n
            n += 1
            pub.publish(data="héllo %d" % n)
            tcp.poll()
            return got and any(m.get("op") == "publish" for m in tcp.seen)

        until(published_and_heard, "heard the ROS 2 publisher", every=0.1)
        assert re.fullmatch(r"héllo \d+", got[0]["data"]), got[0]
        m = tcp.wait(lambda m: m.get("op") == "publish", "a publish on TCP")
        assert m["topic"] == "/ros_chatter"
        assert list(m["msg"]) == ["data"] and m["msg"]["data"].startswith("héllo ")
        # In order: the numbers roslibpy heard only go up.
        until(lambda: published_and_heard() and len(got) >= 3, "three messages", every=0.1)
        nums = [int(x["data"].split()[-1]) for x in got]
        assert nums == sorted(nums), nums
    finally:
        listener.unsubscribe()
        pub.close()


def test_a_ros2_twist_and_image_reach_clients_as_rosbridge_json(graph, ros, tcp):
    _, peer = graph
    twist = ROS2Publisher(topic="/ros_cmd_vel", msg_type="geometry_msgs/msg/Twist", **peer)
    image = ROS2Publisher(topic="/ros_camera", msg_type="sensor_msgs/msg/Image", **peer)
    seen_twist, seen_image = [], []
    t = roslibpy.Topic(ros, "/ros_cmd_vel", "geometry_msgs/Twist")
    t.subscribe(seen_twist.append)
    tcp.send({"op": "subscribe", "topic": "/ros_camera", "type": "sensor_msgs/msg/Image"})
    pixels = bytes(range(256)) * 3
    try:
        import numpy as np

        def both():
            twist.publish(linear=Vector3(x=1.5, y=-2.0, z=0.25), angular=Vector3(x=0.0, y=0.0, z=3.0))
            image.publish(
                header=Header(42, "cam"), height=16, width=16, encoding="rgb8", is_bigendian=0, step=48,
                data=np.frombuffer(pixels, dtype=np.uint8),
            )
            tcp.poll()
            return seen_twist and any(m.get("op") == "publish" for m in tcp.seen)

        until(both, "heard the Twist and the Image", every=0.1)
        assert seen_twist[0] == {"linear": {"x": 1.5, "y": -2.0, "z": 0.25}, "angular": {"x": 0.0, "y": 0.0, "z": 3.0}}
        img = tcp.wait(lambda m: m.get("op") == "publish", "an Image on TCP")["msg"]
        assert img["header"] == {"stamp": {"sec": 42, "nanosec": 7}, "frame_id": "cam"}
        assert (img["height"], img["width"], img["encoding"], img["is_bigendian"], img["step"]) == (16, 16, "rgb8", 0, 48)
        assert base64.b64decode(img["data"]) == pixels  # uint8[] is base64, as rosbridge sends it
    finally:
        t.unsubscribe()
        twist.close()
        image.close()


# ------------------------------------------------------- clients -> ROS 2


def test_roslibpy_and_tcp_publishes_reach_a_ros2_subscriber(graph, ros, tcp):
    _, peer = graph
    heard = []
    sub = ROS2Subscriber(topic="/to_ros", msg_type="std_msgs/msg/String", callback=lambda m: heard.append(m.data), **peer)
    talker = roslibpy.Topic(ros, "/to_ros", "std_msgs/String")
    talker.advertise()
    tcp.send({"op": "advertise", "topic": "/to_ros", "type": "std_msgs/msg/String"})
    try:
        n = 0

        def sent_and_heard():
            nonlocal n
            n += 1
            talker.publish(roslibpy.Message({"data": "from roslibpy %d" % n}))
            tcp.send({"op": "publish", "topic": "/to_ros", "msg": {"data": "from tcp %d" % n}})
            return any(h.startswith("from roslibpy") for h in heard) and any(h.startswith("from tcp") for h in heard)

        until(sent_and_heard, "the ROS 2 subscriber heard both clients", every=0.1)
        mine = [int(h.split()[-1]) for h in heard if h.startswith("from tcp")]
        assert mine == sorted(mine), mine
    finally:
        talker.unadvertise()
        sub.close()


def test_a_partial_twist_is_filled_with_defaults_and_an_image_crosses_from_base64_and_lists(graph, tcp):
    _, peer = graph
    twists, images = [], []
    s1 = ROS2Subscriber(topic="/to_ros_twist", msg_type="geometry_msgs/msg/Twist", callback=twists.append, **peer)
    s2 = ROS2Subscriber(topic="/to_ros_image", msg_type="sensor_msgs/msg/Image", callback=images.append, **peer)
    tcp.send({"op": "advertise", "topic": "/to_ros_twist", "type": "geometry_msgs/Twist"})
    tcp.send({"op": "advertise", "topic": "/to_ros_image", "type": "sensor_msgs/Image"})
    pixels = bytes([9, 8, 7, 6, 5, 4])
    try:
        def sent_and_heard():
            tcp.send({"op": "publish", "topic": "/to_ros_twist", "msg": {"linear": {"x": 0.5}}})
            tcp.send({"op": "publish", "topic": "/to_ros_image", "msg": {
                "header": {"frame_id": "b64", "stamp": {"sec": 1, "nanosec": 2}}, "height": 1, "width": 2,
                "encoding": "rgb8", "step": 6, "data": base64.b64encode(pixels).decode()}})
            tcp.send({"op": "publish", "topic": "/to_ros_image", "msg": {
                "header": {"frame_id": "list"}, "height": 1, "width": 2, "encoding": "rgb8", "step": 6,
                "data": list(pixels)}})
            return twists and {i.header.frame_id for i in images} >= {"b64", "list"}

        until(sent_and_heard, "the ROS 2 subscribers heard the Twist and both Images", every=0.1)
        tw = twists[0]
        assert (tw.linear.x, tw.linear.y, tw.linear.z) == (0.5, 0.0, 0.0)
        assert (tw.angular.x, tw.angular.y, tw.angular.z) == (0.0, 0.0, 0.0)
        for img in images[:2]:
            assert bytes(img.data) == pixels
            assert (img.height, img.width, img.step, img.encoding) == (1, 2, 6, "rgb8")
        b64 = next(i for i in images if i.header.frame_id == "b64")
        assert (b64.header.stamp.sec, b64.header.stamp.nanosec) == (1, 2)
    finally:
        s1.close()
        s2.close()


def test_a_message_that_does_not_fit_its_type_gets_an_error_naming_the_field(graph, tcp):
    _, peer = graph
    heard = []
    sub = ROS2Subscriber(topic="/to_ros_bad", msg_type="geometry_msgs/msg/Twist", callback=heard.append, **peer)
    tcp.send({"op": "advertise", "topic": "/to_ros_bad", "type": "geometry_msgs/msg/Twist", "id": "adv"})
    try:
        # Once the ROS 2 subscription is known, a bad message is refused by name.
        def refused():
            tcp.send({"op": "publish", "topic": "/to_ros_bad", "msg": {"linear": {"x": "fast"}}, "id": "bad"})
            tcp.poll()
            return any(m.get("id") == "bad" and m.get("op") == "status" for m in tcp.seen)

        until(refused, "an error status for the bad message", every=0.2)
        m = tcp.wait(lambda m: m.get("id") == "bad" and m.get("op") == "status", "the status")
        assert m["level"] == "error" and "linear.x" in m["msg"], m
        # The gateway and the topic still work (sent until heard: the
        # subscription's token may reach the gateway before its data route).
        def good():
            tcp.send({"op": "publish", "topic": "/to_ros_bad", "msg": {"angular": {"z": 1.0}}})
            return heard

        until(good, "a good message after the bad one", every=0.1)
        assert heard[0].angular.z == 1.0
    finally:
        sub.close()


# ------------------------------------------------------------- services


def test_a_ros2_add_two_ints_server_answers_roslibpy_and_tcp_callers(graph, ros, tcp):
    _, peer = graph
    server = None

    def add(req):
        return server.response_msg_class(sum=req.a + req.b)

    server = ROS2ServiceServer(service_name="/ros_add", srv_type="example_interfaces/srv/AddTwoInts", callback=add, **peer)
    try:
        svc = roslibpy.Service(ros, "/ros_add", "example_interfaces/srv/AddTwoInts")
        answer = {}

        def called():
            try:
                answer.update(svc.call(roslibpy.ServiceRequest({"a": 40, "b": 2}), timeout=3))
            except Exception:  # not yet known to the gateway: try again
                return False
            return True

        until(called, "roslibpy's call answered", every=0.2)
        assert answer == {"sum": 42}
        tcp.send({"op": "call_service", "service": "/ros_add", "args": {"a": -7, "b": 3}, "id": "c1"})
        m = tcp.wait(lambda m: m.get("id") == "c1", "the TCP call's answer")
        assert m == {"op": "service_response", "service": "/ros_add", "id": "c1", "values": {"sum": -4}, "result": True}
        # Arguments that do not fit the request type: refused by field, at once.
        tcp.send({"op": "call_service", "service": "/ros_add", "args": {"a": "x"}, "id": "c2"})
        m = tcp.wait(lambda m: m.get("id") == "c2", "the bad call's answer")
        assert m["result"] is False and "a" in m["values"], m
    finally:
        server.close()


def test_a_ros2_client_calls_a_service_a_rosgate_client_provides(graph, ros, tcp):
    _, peer = graph
    svc = roslibpy.Service(ros, "/rosgate_add", "example_interfaces/srv/AddTwoInts")
    svc.advertise(lambda req, resp: resp.update({"sum": req["a"] + req["b"]}) or True)
    tcp.send({"op": "advertise_service", "service": "/rosgate_mul", "type": "example_interfaces/AddTwoInts"})
    client = ROS2ServiceClient(service_name="/rosgate_add", srv_type="example_interfaces/srv/AddTwoInts", **peer)
    mul = ROS2ServiceClient(service_name="/rosgate_mul", srv_type="example_interfaces/srv/AddTwoInts", **peer)
    try:
        got = {}

        def answered():
            r = client.call(a=20, b=22)
            if r is not None:
                got["sum"] = r.sum
            return "sum" in got

        until(answered, "the ROS 2 client's call answered", every=0.2)
        assert got["sum"] == 42
        # The TCP provider: answers with the caller's values.
        result = {}
        th = threading.Thread(target=lambda: result.update(r=mul.call(a=6, b=7)), daemon=True)
        th.start()
        call = tcp.wait(lambda m: m.get("op") == "call_service", "the call on TCP")
        assert call["service"] == "/rosgate_mul" and call["args"] == {"a": 6, "b": 7}
        tcp.send({"op": "service_response", "service": "/rosgate_mul", "id": call["id"],
                  "values": {"sum": 42}, "result": True})
        th.join(CROSS)
        assert result["r"] is not None and result["r"].sum == 42
    finally:
        svc.unadvertise()
        client.close()
        mul.close()


# ------------------------------------------------------------- actions

FIB = "example_interfaces/action/Fibonacci"
# rosidl's RIHS01 hashes of the action's entities (what rmw_zenoh puts in
# their keys; rosgate computes the same).
FIB_HASHES = {
    "send_goal": "RIHS01_d1a57fb2a4afe8c21e34fb10db206f16ce6729b28531141472df92277c55b557",
    "get_result": "RIHS01_1b0de0d5d29dc955d92f546706568428632771db13ec84c15ec1c1a59f424a57",
    "feedback": "RIHS01_c1de71afd52e49a89c53d8262366884185bc0a02f78ce051c4e46b0a7fe59bb2",
    "cancel_goal": "RIHS01_573d8b0a534451d7bc2ac8c5ffde8ac14b8593b7001175d0cd6516dcbeb8689a",
    "status": "RIHS01_6c1684b00f177d37438febe6e709fc4e2b0d4248dca4854946f9ed8b30cda83e",
}


class PyFibonacciServer(object):
    """/py_fib as an rmw_zenoh action server, built from the SDK's service
    servers and publishers (the SDK has no actions): the five entities
    rcl_action declares under /py_fib/_action/ (send_goal, cancel_goal and
    get_result services, feedback and status topics), with rosidl's type
    names and hashes; rosgate offers the action once all five are known.
    Cancels are refused (return code 1, no goal canceling: an empty
    sequence is its count alone, whatever its element type, so the flat
    definition below is byte for byte the real one) and no status is
    published (the status topic is declared, as a server's is). The definitions are flattened: XCDR1 gives a nested struct
    no framing of its own, so {UUID goal_id; Fibonacci_Goal goal} is byte
    for byte {uint8[16] goal_id; int32 order}. A goal of order n >= 0 is
    accepted, gets feedback [0, 1] and the first n Fibonacci numbers."""

    def __init__(self, peer):
        import numpy

        self.goals = {}
        self.feedback = ROS2Publisher(
            topic="/py_fib/_action/feedback", msg_type=FIB + "_FeedbackMessage",
            msg_definition="uint8[16] goal_id\nint32[] sequence", type_hash=FIB_HASHES["feedback"], **peer)

        def send_goal(req):
            uuid = bytes(bytearray(req.goal_id))
            self.goals[uuid] = req.order
            accepted = req.order >= 0
            if accepted:
                self.feedback.publish(goal_id=numpy.frombuffer(uuid, dtype=numpy.uint8),
                                      sequence=numpy.array([0, 1], dtype=numpy.int32))
            return self.send.response_msg_class(accepted=accepted, sec=1, nanosec=0)

        def get_result(req):
            n = self.goals.get(bytes(bytearray(req.goal_id)))
            fib = [0, 1]
            while n is not None and len(fib) < n:
                fib.append(fib[-1] + fib[-2])
            status = 0 if n is None else 4
            return self.get.response_msg_class(
                status=status, sequence=numpy.array(fib[: n or 0], dtype=numpy.int32))

        self.send = ROS2ServiceServer(
            service_name="/py_fib/_action/send_goal", srv_type=FIB + "_SendGoal", callback=send_goal,
            request_definition="uint8[16] goal_id\nint32 order",
            response_definition="bool accepted\nint32 sec\nuint32 nanosec",
            type_hash=FIB_HASHES["send_goal"], **peer)
        self.get = ROS2ServiceServer(
            service_name="/py_fib/_action/get_result", srv_type=FIB + "_GetResult", callback=get_result,
            request_definition="uint8[16] goal_id",
            response_definition="int8 status\nint32[] sequence",
            type_hash=FIB_HASHES["get_result"], **peer)
        self.cancel = ROS2ServiceServer(
            service_name="/py_fib/_action/cancel_goal", srv_type="action_msgs/srv/CancelGoal",
            callback=lambda req: self.cancel.response_msg_class(
                return_code=1, goals_canceling=numpy.array([], dtype=numpy.uint32)),
            request_definition="uint8[16] goal_id\nint32 sec\nuint32 nanosec",
            response_definition="int8 return_code\nuint32[] goals_canceling",
            type_hash=FIB_HASHES["cancel_goal"], **peer)
        self.status = ROS2Publisher(
            topic="/py_fib/_action/status", msg_type="action_msgs/msg/GoalStatusArray",
            msg_definition="uint32[] status_list", type_hash=FIB_HASHES["status"], **peer)

    def close(self):
        for x in (self.send, self.get, self.cancel, self.feedback, self.status):
            x.close()


def test_roslibpy_and_tcp_goals_reach_a_ros2_action_server(graph, ros, tcp):
    _, peer = graph
    server = PyFibonacciServer(peer)
    try:
        client = roslibpy.ActionClient(ros, "/py_fib", FIB)
        got = {"feedback": [], "result": None, "error": None}

        def sent():
            done = threading.Event()

            def on_result(r):
                got["result"] = r
                done.set()

            def on_error(e):
                got["error"] = e
                done.set()

            got.update(feedback=[], result=None, error=None)
            client.send_goal(roslibpy.Goal({"order": 6}), on_result, got["feedback"].append, on_error)
            done.wait(CROSS)
            return got["result"] is not None  # no server yet: the error says so; try again

        until(sent, "roslibpy's goal answered by the ROS 2 server", every=0.2)
        assert got["result"]["status"] == roslibpy.GoalStatus.SUCCEEDED, got
        assert got["result"]["values"] == {"sequence": [0, 1, 1, 2, 3, 5]}, got
        assert got["feedback"] == [{"sequence": [0, 1]}], got
        # The goal carried a UUID the server kept, one per goal.
        assert len(server.goals) >= 1 and all(len(u) == 16 for u in server.goals)
        # Over TCP: a rejected goal ends at once, status 0, result false.
        tcp.send({"op": "send_action_goal", "id": "neg", "action": "/py_fib", "action_type": FIB,
                  "args": {"order": -1}})
        m = tcp.wait(lambda m: m.get("id") == "neg", "the rejected goal's end")
        assert m["op"] == "action_result" and m["status"] == 0 and m["result"] is False, m
        tcp.send({"op": "send_action_goal", "id": "ok", "action": "/py_fib", "action_type": FIB,
                  "args": {"order": 3}, "feedback": True})
        fb = tcp.wait(lambda m: m.get("id") == "ok", "the TCP goal's feedback")
        assert fb["op"] == "action_feedback" and fb["values"] == {"sequence": [0, 1]}, fb
        m = tcp.wait(lambda m: m.get("id") == "ok" and m.get("op") == "action_result", "the TCP goal's result")
        assert m["status"] == 4 and m["values"] == {"sequence": [0, 1, 1]}, m
    finally:
        server.close()


# ------------------------------------------------------------- the graph


def test_rosapi_lists_the_ros2_peers_topics_with_their_types(graph, ros):
    _, peer = graph
    pub = ROS2Publisher(topic="/ros_listed", msg_type="geometry_msgs/msg/Twist", node_name="listed_node", **peer)
    try:
        topics = roslibpy.Service(ros, "/rosapi/topics", "rosapi/Topics")
        nodes = roslibpy.Service(ros, "/rosapi/nodes", "rosapi/Nodes")
        seen = {}

        def listed():
            r = topics.call(roslibpy.ServiceRequest({}), timeout=5)
            seen.update(zip(r["topics"], r["types"]))
            return "/ros_listed" in seen

        until(listed, "/ros_listed in rosapi/topics", every=0.2)
        assert seen["/ros_listed"] == "geometry_msgs/msg/Twist"
        until(lambda: "/listed_node" in nodes.call(roslibpy.ServiceRequest({}), timeout=5)["nodes"],
              "the peer's node in rosapi/nodes", every=0.2)
    finally:
        pub.close()
