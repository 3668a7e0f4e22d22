"""roslibpy against a gateway that requires tokens (docs/security.md).

Not part of roslibpy's own suite: scripts/clients.sh (suite ``security``)
starts a gateway with ``--auth-tokens`` and runs this file once per roslibpy
transport (ROSLIBPY_TRANSPORT), giving the WebSocket port
(ROSGATE_WS_PORT) and an admin's and a viewer's token
(ROSGATE_ADMIN_TOKEN, ROSGATE_VIEWER_TOKEN).

- the token in the URL (``Ros('ws://host:port/?token=...')``: roslibpy
  takes a full URL as the host) and in an ``Authorization: Bearer`` header;
- ``Ros.authenticate(token, ...)`` on a connection opened without a token:
  rosbridge's ``auth`` op, the token in its ``mac`` field (roslibpy sends
  it once the connection is ready, so it is called before ``run()``);
- a publish/subscribe round trip and rosapi calls once admitted;
- a viewer's token: it subscribes and calls rosapi, but its publishes reach
  no subscriber and its calls to other services fail with ``forbidden``.

Waits poll with deadlines.
"""

import itertools
import os
import threading
import time
import urllib.parse

import pytest
import roslibpy

PORT = int(os.environ.get("ROSGATE_WS_PORT") or 0)
ADMIN = os.environ.get("ROSGATE_ADMIN_TOKEN", "")
VIEWER = os.environ.get("ROSGATE_VIEWER_TOKEN", "")
TRANSPORT = os.environ.get("ROSLIBPY_TRANSPORT", "twisted")
STRING = "std_msgs/String"

pytestmark = pytest.mark.skipif(
    not (PORT and ADMIN and VIEWER),
    reason="ROSGATE_WS_PORT / ROSGATE_ADMIN_TOKEN / ROSGATE_VIEWER_TOKEN are not set (run via scripts/clients.sh)",
)

_names = itertools.count()


def unique(base):
    return "/roslibpy_%s/secure_%s_%d_%d" % (TRANSPORT, base, os.getpid(), next(_names))


def url(token):
    return "ws://127.0.0.1:%d/?token=%s" % (PORT, urllib.parse.quote(token, safe=""))


@pytest.fixture
def connect():
    """Opens roslibpy connections for one test; closes them afterwards.

    ``connect(url)`` or ``connect("127.0.0.1", PORT, headers=...)``;
    ``authenticate=TOKEN`` calls roslibpy's ``Ros.authenticate`` before
    connecting: it sends the auth op when the connection is ready.
    """
    opened = []

    def make(host, port=None, headers=None, authenticate=None):
        ros = roslibpy.Ros(host, port, headers=headers, transport=TRANSPORT)
        if authenticate is not None:
            ros.authenticate(authenticate, "", "", "", 0, "", 0)
        ros.run(timeout=10)
        assert ros.is_connected
        opened.append(ros)
        return ros

    yield make
    for ros in opened:
        ros.close()


def call(ros, name, args=None, timeout=5):
    return roslibpy.Service(ros, name, "any/Any").call(roslibpy.ServiceRequest(args or {}), timeout=timeout)


def barrier(ros):
    """A round trip on ros's own connection: the gateway handles a
    connection's requests in order, so everything sent before is applied
    (and what it caused delivered) once this answers."""
    return call(ros, "/rosapi/get_ros_version")


class Collector(object):
    def __init__(self):
        self.messages = []
        self._cond = threading.Condition()

    def __call__(self, msg):
        with self._cond:
            self.messages.append(msg)
            self._cond.notify_all()

    def wait_for(self, n, timeout=5.0):
        end = time.monotonic() + timeout
        with self._cond:
            while len(self.messages) < n:
                left = end - time.monotonic()
                if left <= 0:
                    raise AssertionError("expected %d messages, got %r" % (n, self.messages))
                self._cond.wait(left)
            return list(self.messages)


def round_trip(ros, other):
    """Subscribes on ros, publishes on other, and checks one message and a
    rosapi call listing the topic."""
    name = unique("round_trip")
    got = Collector()
    listener = roslibpy.Topic(ros, name, STRING)
    listener.subscribe(got)
    barrier(ros)
    talker = roslibpy.Topic(other, name, STRING)
    talker.publish(roslibpy.Message({"data": "hello"}))
    assert got.wait_for(1) == [{"data": "hello"}]
    assert name in ros.get_topics()
    assert call(other, "/rosapi/topic_type", {"topic": name})["type"] == STRING
    talker.unadvertise()
    listener.unsubscribe()


def test_token_in_the_url(connect):
    ros = connect(url(ADMIN))
    other = connect(url(ADMIN))
    round_trip(ros, other)


def test_token_in_an_authorization_header(connect):
    headers = {"Authorization": "Bearer " + ADMIN}
    ros = connect("127.0.0.1", PORT, headers=headers)
    other = connect(url(ADMIN))
    round_trip(ros, other)


def test_authenticate_on_a_tokenless_connection(connect):
    # Without a token nothing is answered but an error status, which
    # roslibpy does not surface: the call times out.
    waiting = connect("ws://127.0.0.1:%d" % PORT)
    with pytest.raises(Exception):
        call(waiting, "/rosapi/get_ros_version", timeout=2)
    # Ros.authenticate (the auth op, the token in `mac`) admits it.
    # roslibpy 2.1.0 sends it when the connection becomes ready (and again
    # on each reconnection): it is called before run().
    ros = connect("127.0.0.1", PORT, authenticate=ADMIN)
    assert call(ros, "/rosapi/get_ros_version")["version"] == 2
    round_trip(ros, connect(url(ADMIN)))


def test_a_viewer_subscribes_and_introspects_but_cannot_publish_or_call(connect):
    admin = connect(url(ADMIN))
    viewer = connect(url(VIEWER))
    name = unique("guarded")
    got = Collector()
    roslibpy.Topic(admin, name, STRING).subscribe(got)
    seen_by_viewer = Collector()
    roslibpy.Topic(viewer, name, STRING).subscribe(seen_by_viewer)
    barrier(admin)
    barrier(viewer)
    # The viewer's publishes (and the advertisement roslibpy sends first)
    # are refused: they reach nobody.
    intruder = roslibpy.Topic(viewer, name, STRING)
    for i in range(3):
        intruder.publish(roslibpy.Message({"data": "intruder %d" % i}))
    barrier(viewer)
    roslibpy.Topic(admin, name, STRING).publish(roslibpy.Message({"data": "marker"}))
    assert got.wait_for(1) == [{"data": "marker"}]
    assert seen_by_viewer.wait_for(1) == [{"data": "marker"}]
    barrier(admin)
    assert got.messages == [{"data": "marker"}]
    # Introspection works for it...
    assert name in viewer.get_topics()
    assert "version" in barrier(viewer)
    # ...a call to anything else fails at once, with the reason.
    service_name = unique("reset")
    handled = []

    def handler(request, response):
        handled.append(request)
        return True

    service = roslibpy.Service(admin, service_name, "std_srvs/Trigger")
    service.advertise(handler)
    barrier(admin)
    with pytest.raises(Exception) as refused:
        call(viewer, service_name)
    assert "forbidden" in str(refused.value)
    assert call(admin, service_name) == {}
    assert len(handled) == 1
    service.unadvertise()
