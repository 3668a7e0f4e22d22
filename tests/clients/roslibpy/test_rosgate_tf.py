"""roslibpy's TFClient, unchanged, against rosgate's own tf2_web_republisher
(docs/tf.md).

Not part of roslibpy's own suite: scripts/clients.sh runs this file in its
own pytest run, once per roslibpy transport (ROSLIBPY_TRANSPORT), against
the gateway the suite started (ROSGATE_WS_PORT).

Another connection publishes a /tf_static link (world -> odom, latched) and
a moving /tf link (odom -> base, re-sent every 50 ms as a robot's state
publisher does). roslibpy's TFClient (the /republish_tfs service and the
TFArray topic it names) must get base in world, composed, then follow it
when it moves past the translation threshold.
"""

import itertools
import os
import threading
import time

import pytest
import roslibpy
from roslibpy.tf import TFClient

PORT = int(os.environ.get("ROSGATE_WS_PORT") or 0)
TRANSPORT = os.environ.get("ROSLIBPY_TRANSPORT", "twisted")
TF_MESSAGE = "tf2_msgs/msg/TFMessage"

pytestmark = pytest.mark.skipif(not PORT, reason="ROSGATE_WS_PORT is not set (run via scripts/clients.sh)")

_names = itertools.count()


def unique(base):
    return "roslibpy_%s/%s_%d_%d" % (TRANSPORT, base, os.getpid(), next(_names))


def stamped(parent, child, x, y):
    now = time.time()
    return {
        "header": {"stamp": {"sec": int(now), "nanosec": int((now % 1) * 1e9)}, "frame_id": parent},
        "child_frame_id": child,
        "transform": {"translation": {"x": x, "y": y, "z": 0.0}, "rotation": {"x": 0.0, "y": 0.0, "z": 0.0, "w": 1.0}},
    }


def wait_for(cond, what, timeout=5.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.02)
    raise AssertionError("timed out after %.1f s: %s" % (timeout, what))


def test_tf_client_gets_a_composed_transform_and_follows_it(connect):
    robot = connect()
    ros = connect()
    prefix = unique("tf")
    world, odom, base = prefix + "/world", prefix + "/odom", prefix + "/base"
    tf_static = roslibpy.Topic(robot, "/tf_static", TF_MESSAGE, latch=True)
    tf = roslibpy.Topic(robot, "/tf", TF_MESSAGE)
    tf_static.publish(roslibpy.Message({"transforms": [stamped(world, odom, 1.0, 2.0)]}))
    pose = {"x": 0.5}
    stop = threading.Event()

    def publish_tf():
        while not stop.is_set():
            tf.publish(roslibpy.Message({"transforms": [stamped(odom, base, pose["x"], 0.0)]}))
            time.sleep(0.05)

    publisher = threading.Thread(target=publish_tf, daemon=True)
    publisher.start()
    try:
        got = []
        client = TFClient(ros, fixed_frame=world, rate=20.0)
        client.subscribe("/" + base, got.append)
        near = lambda a, b: abs(a - b) < 1e-6  # noqa: E731
        wait_for(lambda: any(near(t["translation"]["x"], 1.5) for t in got), "base at x 1.5 (1 static + 0.5 dynamic): %r" % got)
        first = next(t for t in got if near(t["translation"]["x"], 1.5))
        assert near(first["translation"]["y"], 2.0), first
        assert near(first["rotation"]["w"], 1.0), first
        pose["x"] = 3.0
        wait_for(lambda: any(near(t["translation"]["x"], 4.0) for t in got), "base follows to x 4: %r" % got[-3:])
        client.dispose()
    finally:
        stop.set()
        publisher.join(timeout=2)
