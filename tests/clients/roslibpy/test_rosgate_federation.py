"""roslibpy across two federated gateways (docs/federation.md).

Not part of roslibpy's own suite: scripts/clients.sh runs the rosgate
tests once per roslibpy transport (ROSLIBPY_TRANSPORT). This file starts
its own two gateways from ROSGATE_BIN, joined over Zenoh on loopback.
Gateway A listens and B connects; there is no scouting. Each roslibpy
client talks to its own gateway:

- a subscriber on B receives what a publisher on A publishes, byte for
  byte as JSON, in order;
- a service advertised by a roslibpy client on A is called from B, and the
  answer comes back to the caller;
- a node's topics on A are listed by ``get_topics`` on B (one graph).

Skipped when ROSGATE_BIN is unset, or when that binary was built without
the ``federation`` feature.
"""

import os
import re
import subprocess
import sys
import threading
import time

import pytest
import roslibpy

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from rosgate_testing import free_zenoh_port, until as shared_until  # noqa: E402

BIN = os.environ.get("ROSGATE_BIN", "")
TRANSPORT = os.environ.get("ROSLIBPY_TRANSPORT", "twisted")
CROSS = 15.0  # seconds: the longest a change may take to cross (a bound, not a sleep)

pytestmark = pytest.mark.skipif(not BIN, reason="ROSGATE_BIN is not set (run via scripts/clients.sh)")



class Gateway(object):
    """A gateway process; its WebSocket port is read from its log."""

    def __init__(self, *zenoh):
        args = [BIN, "--listen", "127.0.0.1:0", "--ws-listen", "127.0.0.1:0", "--log-level", "warn"]
        self.proc = subprocess.Popen(args + list(zenoh), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.log = []
        self.ws_port = None
        ready = threading.Event()

        def drain():
            for line in self.proc.stderr:
                self.log.append(line)
                m = re.search(r"websocket listening on ws://127\.0\.0\.1:(\d+)", line)
                if m:
                    self.ws_port = int(m.group(1))
                    ready.set()
            ready.set()

        threading.Thread(target=drain, daemon=True).start()
        ready.wait(15)
        if self.ws_port is None:
            self.stop()
            text = "".join(self.log)
            if "built without federation" in text:
                pytest.skip("this rosgate was built without the federation feature")
            raise AssertionError("gateway did not start: %s" % text)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


@pytest.fixture
def federation():
    zport = free_zenoh_port()
    started = []
    try:
        a = Gateway("--zenoh-listen", "tcp/127.0.0.1:%d" % zport)
        started.append(a)
        b = Gateway("--zenoh-connect", "tcp/127.0.0.1:%d" % zport)
        started.append(b)
        opened = []

        def connect(gw):
            ros = roslibpy.Ros("127.0.0.1", gw.ws_port, transport=TRANSPORT)
            ros.run(timeout=10)
            assert ros.is_connected
            opened.append(ros)
            return ros

        yield a, b, connect
        for ros in opened:
            ros.close()
    finally:
        for g in started:
            g.stop()


def until(pred, what, timeout=CROSS, every=0.1):
    shared_until(pred, what, timeout, every)


def test_a_subscriber_on_one_gateway_hears_a_publisher_on_another(federation):
    a, b, connect = federation
    on_a, on_b = connect(a), connect(b)
    got = []
    lock = threading.Lock()

    def heard(msg):
        with lock:
            got.append(msg)

    sub = roslibpy.Topic(on_b, "/fed/chatter", "std_msgs/String")
    sub.subscribe(heard)
    pub = roslibpy.Topic(on_a, "/fed/chatter", "std_msgs/String")
    pub.advertise()
    # The interest crosses in its own time: publish probes until one lands.
    deadline = time.monotonic() + CROSS
    while not got and time.monotonic() < deadline:
        pub.publish(roslibpy.Message({"data": "probe"}))
        time.sleep(0.1)
    assert got, "nothing crossed within %.0f s" % CROSS
    until(lambda: len(got) > 0, "probes settled", timeout=1)
    time.sleep(0.5)  # probes still in flight drain before counting
    with lock:
        got.clear()
    for i in range(50):
        pub.publish(roslibpy.Message({"data": "msg %d" % i, "n": i}))
    until(lambda: len(got) >= 50, "all 50 messages crossed")
    with lock:
        assert [m["n"] for m in got[:50]] == list(range(50)), "in order"
        assert got[7] == {"data": "msg 7", "n": 7}


def test_a_service_on_one_gateway_is_called_from_another(federation):
    a, b, connect = federation
    on_a, on_b = connect(a), connect(b)

    def add(request, response):
        response["sum"] = request["a"] + request["b"]
        return True

    service = roslibpy.Service(on_a, "/fed/add_two_ints", "example_interfaces/AddTwoInts")
    service.advertise(add)
    until(lambda: "/fed/add_two_ints" in on_b.get_services(), "the service listed on B")
    client = roslibpy.Service(on_b, "/fed/add_two_ints", "example_interfaces/AddTwoInts")
    result = client.call(roslibpy.ServiceRequest({"a": 40, "b": 2}), timeout=10)
    assert result["sum"] == 42


def test_get_topics_on_one_gateway_lists_another_gateways_topics(federation):
    a, b, connect = federation
    on_a, on_b = connect(a), connect(b)
    pub = roslibpy.Topic(on_a, "/fed/odom", "nav_msgs/Odometry")
    pub.advertise()
    until(lambda: "/fed/odom" in on_b.get_topics(), "A's topic listed on B")
