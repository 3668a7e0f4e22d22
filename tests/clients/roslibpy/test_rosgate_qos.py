"""roslibpy's QoS options against rosgate (docs/protocol.md, "QoS").

Not part of roslibpy's own suite: scripts/clients.sh runs this file in its
own pytest run, once per roslibpy transport (ROSLIBPY_TRANSPORT), against
the gateway the suite started (ROSGATE_WS_PORT).

- ``Topic(latch=True)``: a subscriber that arrives later gets the last
  message, then live ones;
- ``Topic(throttle_rate=T)``: the first message at once, the interval's
  newest at its end, the ones between skipped;
- ``Topic(queue_length=N)``: a subscriber that stops reading keeps only
  the newest N waiting at the gateway; the older ones are dropped (and
  counted), the order is kept.

Bounds on time are generous; waits poll with deadlines.
"""

import itertools
import json
import os
import threading
import time

import pytest
import roslibpy
from websockets.sync.client import connect as ws_connect

PORT = int(os.environ.get("ROSGATE_WS_PORT") or 0)
TRANSPORT = os.environ.get("ROSLIBPY_TRANSPORT", "twisted")
URL = "ws://127.0.0.1:%d" % PORT
STRING = "std_msgs/String"

pytestmark = pytest.mark.skipif(not PORT, reason="ROSGATE_WS_PORT is not set (run via scripts/clients.sh)")

_names = itertools.count()


def unique(base):
    return "/roslibpy_%s/%s_%d_%d" % (TRANSPORT, base, os.getpid(), next(_names))


def call(ros, name, args=None, timeout=5):
    return roslibpy.Service(ros, name, "any/Any").call(roslibpy.ServiceRequest(args or {}), timeout=timeout)


def stats(ros):
    """A round trip on ros's own connection: the gateway handles a
    connection's requests in order, so everything sent before has been
    applied (and what it caused delivered) once this answers."""
    return call(ros, "/rosgate/stats")


class Collector(object):
    def __init__(self):
        self.messages = []
        self.times = []
        self._cond = threading.Condition()

    def __call__(self, msg):
        with self._cond:
            self.messages.append(msg)
            self.times.append(time.monotonic())
            self._cond.notify_all()

    def wait_for(self, n, timeout=5.0):
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self.messages) < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError("expected %d messages, got %r" % (n, self.messages))
                self._cond.wait(left)
            return list(self.messages)


class RawClient(object):
    """A plain WebSocket client (not roslibpy): publishes and reads the
    gateway's stats while a roslibpy connection is kept from reading."""

    def __init__(self):
        self.ws = ws_connect(URL, max_size=None, open_timeout=5)
        self.ids = itertools.count()

    def send(self, obj):
        self.ws.send(json.dumps(obj, separators=(",", ":")))

    def stats(self):
        id_ = "raw-stats-%d" % next(self.ids)
        self.send({"op": "call_service", "service": "/rosgate/stats", "id": id_, "args": {}})
        deadline = time.monotonic() + 10
        while True:
            v = json.loads(self.ws.recv(timeout=max(0.1, deadline - time.monotonic())))
            if v.get("op") == "service_response" and v.get("id") == id_:
                return v["values"]

    def close(self):
        self.ws.close()


def test_latch_reaches_a_later_subscriber(connect):
    name = unique("latch")
    pub_ros = connect()
    talker = roslibpy.Topic(pub_ros, name, STRING, latch=True)
    talker.advertise()
    talker.publish(roslibpy.Message({"data": "first"}))
    talker.publish(roslibpy.Message({"data": "last"}))
    stats(pub_ros)

    sub_ros = connect()
    got = Collector()
    roslibpy.Topic(sub_ros, name, STRING).subscribe(got)
    assert got.wait_for(1) == [{"data": "last"}]
    stats(sub_ros)
    assert got.messages == [{"data": "last"}], "only the last message is kept"

    talker.publish(roslibpy.Message({"data": "live"}))
    assert got.wait_for(2)[1] == {"data": "live"}

    # Without latch, a later subscriber gets nothing old.
    plain = unique("plain")
    t = roslibpy.Topic(pub_ros, plain, STRING)
    t.advertise()
    t.publish(roslibpy.Message({"data": "old"}))
    stats(pub_ros)
    late = Collector()
    roslibpy.Topic(sub_ros, plain, STRING).subscribe(late)
    stats(sub_ros)
    assert late.messages == []


def test_throttle_rate_sends_the_first_then_the_intervals_newest(connect):
    name = unique("throttle")
    sub_ros = connect()
    pub_ros = connect()
    got = Collector()
    roslibpy.Topic(sub_ros, name, STRING, throttle_rate=500).subscribe(got)
    stats(sub_ros)
    info = call(sub_ros, "/rosgate/topic_info", {"topic": name})
    assert [s["throttle_ms"] for s in info["subscribers"]] == [500], info

    talker = roslibpy.Topic(pub_ros, name, STRING)
    t0 = time.monotonic()
    talker.publish(roslibpy.Message({"data": "0"}))
    got.wait_for(1)
    for i in range(1, 10):
        talker.publish(roslibpy.Message({"data": str(i)}))
    stats(pub_ros)
    msgs = got.wait_for(2)
    assert [m["data"] for m in msgs] == ["0", "9"], msgs
    second = got.times[1] - t0
    assert 0.45 <= second < 3.0, "the newest by the interval's end, not after %.3f s" % second
    stats(sub_ros)
    assert len(got.messages) == 2, "one per interval: %r" % got.messages


def test_queue_length_keeps_the_newest_for_a_subscriber_that_stops_reading(connect):
    # 1500 x 40 KB = 60 MB: many times what the socket buffers hold.
    m_total = 1500
    depth = 3
    name = unique("queue_length")
    sub_ros = connect()
    raw = RawClient()
    try:
        before = raw.stats()
        blocked = threading.Event()
        release = threading.Event()
        got = []
        done = threading.Event()

        def slow(msg):
            # The first message blocks roslibpy's receiving thread: it reads
            # nothing more until released.
            if not got:
                blocked.set()
                release.wait(30)
            got.append(msg["seq"])
            if msg["seq"] == m_total - 1:
                done.set()

        roslibpy.Topic(sub_ros, name, "test/Pad", queue_length=depth).subscribe(slow)
        stats(sub_ros)
        info = call(sub_ros, "/rosgate/topic_info", {"topic": name})
        assert [s["qos"]["depth"] for s in info["subscribers"]] == [depth], info

        pad = "p" * 40000
        raw.send({"op": "publish", "topic": name, "msg": {"seq": 0, "pad": pad}})
        assert blocked.wait(5), "the first message came"
        for i in range(1, m_total):
            raw.send({"op": "publish", "topic": name, "msg": {"seq": i, "pad": pad}})
        during = raw.stats()  # every publish handled
        release.set()
        assert done.wait(30), "the newest message came; got %d" % len(got)
        stats(sub_ros)
        after = raw.stats()
    finally:
        release.set()
        raw.close()

    assert all(a < b for a, b in zip(got, got[1:])), "in order, each once"
    dropped = after["depth_dropped"] - before["depth_dropped"]
    assert during["depth_dropped"] > before["depth_dropped"], "drops while it did not read"
    assert dropped == m_total - len(got), "every message is received or counted as dropped"
    assert len(got) < m_total // 2, "most of them were dropped: %d received" % len(got)
    # What waited at the gateway when it was released: the newest `depth`,
    # or the newest `depth` - 1 behind a message the gateway had partly
    # written when the socket filled (kept whole, never cut).
    assert got[-(depth - 1) :] == list(range(m_total - depth + 1, m_total)), got[-depth:]
