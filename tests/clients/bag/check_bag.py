"""rosgate bag against outside readers and writers (scripts/clients.sh, suite `bag`).

1. `rosgate bag record` records topics a roslibpy client publishes
   (std_msgs/String, a latched one, geometry_msgs/PoseStamped with a header);
   PyPI `rosbags` opens the bag directory and deserializes every message with
   its own Jazzy type store; PyPI `mcap` + `mcap-ros2-support` read the .mcap
   and decode every message from its ros2msg schema.
   A burst recorded best effort with depth 1 (`--qos-profile-overrides-path`
   in rosbag2's format) loses messages; rosbags opens that bag and reads the
   per-topic drop count from `custom_data` (`rosgate.dropped./bag_burst`).
2. A bag written by `rosbags`' writer (MCAP storage) is played by
   `rosgate bag play` to a roslibpy subscriber.

Usage: check_bag.py ROSGATE_BIN WS_PORT WORKDIR. Prints one line per check
and `passed N failed M`; exits 1 when a check failed. Every wait is bounded.
"""

import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import roslibpy
from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory
from rosbags.rosbag2 import Reader, StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore

BIN, PORT, WORK = sys.argv[1], int(sys.argv[2]), sys.argv[3]
URL = f"ws://127.0.0.1:{PORT}/"
results = {"passed": 0, "failed": 0}


def check(name, ok, detail=""):
    results["passed" if ok else "failed"] += 1
    print(f"{'ok  ' if ok else 'FAIL'} {name}{'' if ok else ': ' + str(detail)}", flush=True)


def wait_for(pred, secs):
    end = time.time() + secs
    while time.time() < end:
        if pred():
            return True
        time.sleep(0.05)
    return pred()


ros = roslibpy.Ros(host="127.0.0.1", port=PORT)
ros.run(timeout=10)
chatter = roslibpy.Topic(ros, "/bag_chatter", "std_msgs/msg/String")
latched = roslibpy.Topic(ros, "/bag_latched", "std_msgs/msg/String", latch=True)
pose = roslibpy.Topic(ros, "/bag_pose", "geometry_msgs/msg/PoseStamped")
for t in (chatter, latched, pose):
    t.advertise()
latched.publish(roslibpy.Message({"data": "latched"}))
time.sleep(0.3)

# 1. record
bag = os.path.join(WORK, "rec_bag")
shutil.rmtree(bag, ignore_errors=True)
err = open(os.path.join(WORK, "record.log"), "w")
rec = subprocess.Popen(
    [BIN, "bag", "record", "/bag_chatter", "/bag_latched", "/bag_pose", "-o", bag, "--url", URL],
    stderr=err,
    stdout=subprocess.DEVNULL,
)
log = lambda: open(os.path.join(WORK, "record.log")).read()
check("recorder subscribed", wait_for(lambda: log().count("subscribed to") == 3, 10), log())
time.sleep(0.3)
N = 20
for i in range(N):
    chatter.publish(roslibpy.Message({"data": f"m{i}"}))
    pose.publish(roslibpy.Message({
        "header": {"stamp": {"sec": 1000 + i, "nanosec": 5}, "frame_id": "map"},
        "pose": {"position": {"x": float(i), "y": 0.0, "z": 0.0},
                 "orientation": {"x": 0.0, "y": 0.0, "z": 0.0, "w": 1.0}},
    }))
    time.sleep(0.01)
time.sleep(0.7)
rec.send_signal(signal.SIGINT)
try:
    code = rec.wait(timeout=15)
except subprocess.TimeoutExpired:
    rec.kill()
    code = None
check("recorder exits 0 on SIGINT", code == 0, log())

store = get_typestore(Stores.ROS2_JAZZY)
counts, texts, xs = {}, [], []
try:
    with Reader(bag) as r:
        for conn, _t, raw in r.messages():
            m = store.deserialize_cdr(raw, conn.msgtype)
            counts[conn.topic] = counts.get(conn.topic, 0) + 1
            if conn.topic == "/bag_chatter":
                texts.append(m.data)
            if conn.topic == "/bag_pose":
                xs.append(m.pose.position.x)
        qos = {c.topic: c.ext.offered_qos_profiles for c in r.connections}
    check("rosbags: every /bag_chatter message, in order", texts == [f"m{i}" for i in range(N)], texts)
    check("rosbags: every /bag_pose message", xs == [float(i) for i in range(N)], xs)
    check("rosbags: the latched message", counts.get("/bag_latched") == 1, counts)
    lq = qos.get("/bag_latched") or []
    check("rosbags: latched topic offered transient local",
          any("TRANSIENT_LOCAL" in str(q.durability) for q in lq), lq)
except Exception as e:  # noqa: BLE001 - any failure to read is the finding
    check("rosbags opens and deserializes the bag", False, repr(e))

try:
    name = os.path.basename(bag)
    decoded, stamps = 0, []
    with open(os.path.join(bag, f"{name}_0.mcap"), "rb") as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        summary = reader.get_summary()
        check("mcap: summary with statistics", summary is not None and summary.statistics is not None)
        check("mcap: profile ros2", reader.get_header().profile == "ros2")
        for schema, channel, message, msg in reader.iter_decoded_messages():
            decoded += 1
            if channel.topic == "/bag_pose":
                stamps.append((message.publish_time, msg.header.stamp.sec))
    check("mcap-ros2-support decodes every message", decoded == 2 * N + 1, decoded)
    check("mcap: publish time from header.stamp",
          all(p == s * 1_000_000_000 + 5 for p, s in stamps) and len(stamps) == N, stamps[:3])
except Exception as e:  # noqa: BLE001
    check("mcap reads and decodes the file", False, repr(e))

# 1b. drops per topic in custom_data, read by rosbags
burst = roslibpy.Topic(ros, "/bag_burst", "std_msgs/msg/String")
burst.advertise()
time.sleep(0.3)
dbag = os.path.join(WORK, "drop_bag")
shutil.rmtree(dbag, ignore_errors=True)
qos_file = os.path.join(WORK, "qos.yaml")
with open(qos_file, "w") as f:
    f.write("/bag_burst:\n  history: keep_last\n  depth: 1\n  reliability: best_effort\n")
derr = open(os.path.join(WORK, "drop.log"), "w")
rec = subprocess.Popen(
    [BIN, "bag", "record", "/bag_burst", "-o", dbag, "--qos-profile-overrides-path", qos_file,
     "--url", URL],
    stderr=derr,
    stdout=subprocess.DEVNULL,
)
dlog = lambda: open(os.path.join(WORK, "drop.log")).read()
check("burst recorder subscribed", wait_for(lambda: "subscribed to" in dlog(), 10), dlog())
time.sleep(0.3)
B = 3000
body = "b" * 5000
for i in range(B):
    burst.publish(roslibpy.Message({"data": f"{i} {body}"}))
time.sleep(2.0)
rec.send_signal(signal.SIGINT)
try:
    code = rec.wait(timeout=15)
except subprocess.TimeoutExpired:
    rec.kill()
    code = None
check("burst recorder exits 0", code == 0, dlog())
try:
    with Reader(dbag) as r:
        kept = sum(1 for _ in r.messages())
        # rosbags 0.11 keeps custom_data on the directory reader it wraps
        # (ReaderMetadata.custom); Reader has no property for it.
        custom = r.storage.metadata.custom or {}
    lost = int(custom.get("rosgate.dropped./bag_burst", "0"))
    check("rosbags reads the per-topic drops in custom_data", lost > 0, custom)
    check("kept + dropped = published", kept + lost == B, (kept, lost, custom))
except Exception as e:  # noqa: BLE001
    check("rosbags opens a bag with drops in custom_data", False, repr(e))

# 2. a bag written by rosbags, played through rosgate to roslibpy
wbag = os.path.join(WORK, "rosbags_bag")
shutil.rmtree(wbag, ignore_errors=True)
String = store.types["std_msgs/msg/String"]
t0 = 1_700_000_000_000_000_000
M = 10
with Writer(wbag, version=9, storage_plugin=StoragePlugin.MCAP) as w:
    conn = w.add_connection("/bag_played", "std_msgs/msg/String", typestore=store)
    for i in range(M):
        w.write(conn, t0 + i * 50_000_000, store.serialize_cdr(String(data=f"p{i}"), "std_msgs/msg/String"))
got, times = [], []
lock = threading.Lock()


def on_msg(m):
    with lock:
        got.append(m["data"])
        times.append(time.time())


sub = roslibpy.Topic(ros, "/bag_played", "std_msgs/msg/String")
sub.subscribe(on_msg)
time.sleep(0.5)
play = subprocess.run([BIN, "bag", "play", wbag, "--url", URL], capture_output=True, timeout=30, text=True)
check("play of a rosbags bag exits 0", play.returncode == 0, play.stderr)
wait_for(lambda: len(got) >= M, 5)
check("roslibpy gets every played message in order", got == [f"p{i}" for i in range(M)], got)
if len(times) >= M:
    span = times[-1] - times[0]
    check("played at the recorded pace (0.45 s)", abs(span - 0.45) < 0.2, span)
sub.unsubscribe()
ros.terminate()
print(f"passed {results['passed']} failed {results['failed']}")
sys.exit(1 if results["failed"] else 0)
