"""roslibpy over wss:// against a rosgate started with --tls-cert.

Run by scripts/clients.sh (suite `tls`): ``tls_check.py PORT TRANSPORT
[--token TOKEN] [--expect-refused]``. Connects with ``Ros('localhost', PORT,
is_secure=True)``, or with a token ``Ros('wss://localhost:PORT/?token=TOKEN')``
(the gateway runs with ``--auth-tokens``), subscribes and publishes, advertises and calls a
service, and prints what it heard; exits non-zero on any failure. The
certificate is trusted the way a user would: the asyncio transport uses
Python's default SSL context, which reads ``SSL_CERT_FILE``. (roslibpy's
twisted transport does not verify certificates at all.)

With ``--expect-refused`` (no ``SSL_CERT_FILE``) the connection must fail:
the certificate is not trusted.
"""

import sys
import threading

import roslibpy

port, transport = int(sys.argv[1]), sys.argv[2]
expect_refused = "--expect-refused" in sys.argv[3:]
token = sys.argv[sys.argv.index("--token") + 1] if "--token" in sys.argv else None

if token:
    ros = roslibpy.Ros("wss://localhost:%d/?token=%s" % (port, token), transport=transport)
else:
    ros = roslibpy.Ros("localhost", port, is_secure=True, transport=transport)
try:
    ros.run(timeout=2 if expect_refused else 10)
except Exception as e:  # roslibpy raises on a connection that never opens
    if expect_refused:
        print("refused: %s" % type(e).__name__)
        sys.exit(0)
    raise
if expect_refused:
    print("connected although the certificate is not trusted")
    sys.exit(1)

heard = threading.Event()


def on_message(m):
    print("heard", m["data"])
    heard.set()


chatter = roslibpy.Topic(ros, "/tls_chatter", "std_msgs/msg/String")
chatter.subscribe(on_message)
chatter.publish(roslibpy.Message({"data": "hello"}))


def add(request, response):
    response["sum"] = request["a"] + request["b"]
    return True


server = roslibpy.Service(ros, "/tls_add", "example_interfaces/srv/AddTwoInts")
server.advertise(add)
client = roslibpy.Service(ros, "/tls_add", "example_interfaces/srv/AddTwoInts")
print("1 + 2 =", client.call(roslibpy.ServiceRequest({"a": 1, "b": 2}), timeout=5)["sum"])
if not heard.wait(5):
    print("never heard /tls_chatter")
    sys.exit(1)
ros.terminate()
