#!/bin/bash
# One gateway in a DDS ROS 2 graph and an rmw_zenoh one at once (issue 26,
# item 5), against real rclpy on both sides: rosgate --dds-domain D
# --ros-domain D --zenoh-connect (an rmw_zenohd router on a free loopback
# port). Checks:
#   1. an rclpy talker on Fast DDS -> an rclpy listener on rmw_zenoh;
#   2. an rclpy talker on rmw_zenoh -> an rclpy listener on Fast DDS;
#   3. no echo: an rclpy listener on Fast DDS beside the DDS talker, and
#      the rmw_zenoh listener, hear each sample once;
#   4. an rclpy client on rmw_zenoh calls an rclpy service on Fast DDS
#      (example_interfaces/srv/AddTwoInts), and one on Fast DDS calls one
#      on rmw_zenoh;
#   5. an rclpy action client on Fast DDS reaches an rclpy action server on
#      rmw_zenoh (example_interfaces/action/Fibonacci): feedback and result.
#
# Needs two shells' worth of ROS 2 (rclpy can run on one rmw per install
# here): set ROS2_ENV to a script that, sourced with ROS2_ROOT and
# ROS2_RMW (dds|zenoh) and ROS_DOMAIN_ID set (and ZENOH_ROUTER for zenoh),
# makes rclpy run on that rmw from that root; DDS_ROOT and ZENOH_ROOT the
# two roots; RMW_ZENOHD the router. The gateway must be built with
# `--features dds,ros2`.
#
#   ROS2_ENV=... DDS_ROOT=... ZENOH_ROOT=... RMW_ZENOHD=... \
#     scripts/ros2-dds-zenoh-check.sh [target/debug/rosgate]
#
# Everything runs on loopback in a domain of its own; every process it
# started is stopped at the end; exits 1 when a check fails.
set -u
: "${ROS2_ENV:?}" "${DDS_ROOT:?}" "${ZENOH_ROOT:?}" "${RMW_ZENOHD:?}"
RG=$(realpath "${1:-target/debug/rosgate}")
D=$((120 + $$ % 60)); ZP=$((20000 + $$ % 20000)); EP="tcp/127.0.0.1:$ZP"; TP=$((ZP + 1))
W=$(mktemp -d /tmp/rosgate-dds-zenoh-XXXXXX)
pids=()
stop() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  echo "logs in $W"
}
trap stop EXIT
cd "$W" || exit 1
cat > talker.py <<'EOF'
import rclpy, sys
from std_msgs.msg import String
rclpy.init(); n = rclpy.create_node(sys.argv[1])
p = n.create_publisher(String, sys.argv[2], 10)
i = 0
while True:
    p.publish(String(data=f"{sys.argv[1]} {i}")); i += 1
    rclpy.spin_once(n, timeout_sec=0.1)
EOF
cat > listener.py <<'EOF'
import rclpy, sys
from std_msgs.msg import String
rclpy.init(); n = rclpy.create_node(sys.argv[1])
n.create_subscription(String, sys.argv[2], lambda m: print("got", m.data, flush=True), 10)
rclpy.spin(n)
EOF
cat > server.py <<'EOF'
import rclpy, sys
from example_interfaces.srv import AddTwoInts
rclpy.init(); n = rclpy.create_node(sys.argv[1])
def add(req, res):
    res.sum = req.a + req.b + int(sys.argv[3]); return res
n.create_service(AddTwoInts, sys.argv[2], add)
rclpy.spin(n)
EOF
cat > client.py <<'EOF'
import rclpy, sys
from example_interfaces.srv import AddTwoInts
rclpy.init(); n = rclpy.create_node(sys.argv[1])
c = n.create_client(AddTwoInts, sys.argv[2])
print("ready", c.wait_for_service(timeout_sec=30), flush=True)
for i in range(3):
    f = c.call_async(AddTwoInts.Request(a=i, b=40))
    rclpy.spin_until_future_complete(n, f, timeout_sec=10)
    print("sum", f.result().sum if f.done() and f.result() else None, flush=True)
EOF
cat > fib_server.py <<'EOF'
import rclpy, sys, time
from rclpy.action import ActionServer
from example_interfaces.action import Fibonacci
rclpy.init(); n = rclpy.create_node(sys.argv[1])
def run(goal):
    seq = [0, 1]
    for i in range(1, goal.request.order):
        seq.append(seq[i] + seq[i - 1])
        goal.publish_feedback(Fibonacci.Feedback(sequence=seq)); time.sleep(0.05)
    goal.succeed(); return Fibonacci.Result(sequence=seq)
ActionServer(n, Fibonacci, sys.argv[2], run)
rclpy.spin(n)
EOF
cat > fib_client.py <<'EOF'
import rclpy, sys
from rclpy.action import ActionClient
from example_interfaces.action import Fibonacci
rclpy.init(); n = rclpy.create_node(sys.argv[1])
c = ActionClient(n, Fibonacci, sys.argv[2])
print("ready", c.wait_for_server(timeout_sec=30), flush=True)
fb = []
f = c.send_goal_async(Fibonacci.Goal(order=5), feedback_callback=lambda m: fb.append(1))
rclpy.spin_until_future_complete(n, f, timeout_sec=10)
h = f.result()
r = h.get_result_async()
rclpy.spin_until_future_complete(n, r, timeout_sec=20)
print("result", list(r.result().result.sequence), "feedback", len(fb), flush=True)
EOF
# Each runs in its own background subshell, which execs python: its pid is
# the one recorded.
dds() { export ROS2_ROOT=$DDS_ROOT ROS2_RMW=dds ROS_DOMAIN_ID=$D; source "$ROS2_ENV"; exec python3 "$@"; }
zen() { export ROS2_ROOT=$ZENOH_ROOT ROS2_RMW=zenoh ROS_DOMAIN_ID=$D ZENOH_ROUTER=$EP; source "$ROS2_ENV"; exec python3 "$@"; }
router() {
  export ROS2_ROOT=$ZENOH_ROOT ROS2_RMW=zenoh ROS_DOMAIN_ID=$D; source "$ROS2_ENV"
  export ZENOH_CONFIG_OVERRIDE="listen/endpoints=[\"$EP\"]"; exec "$RMW_ZENOHD"
}
router > router.log 2>&1 & pids+=($!)
sleep 1
"$RG" --listen "127.0.0.1:$TP" --ws-listen 127.0.0.1:0 --tcp-domain "$D" --dds-domain "$D" \
  --ros-domain "$D" --zenoh-connect "$EP" > rosgate.log 2>&1 & pids+=($!)
sleep 1
dds listener.py dds_listener /chatter > dds_listener.log 2>&1 & pids+=($!)
zen listener.py zen_listener /chatter > zen_listener.log 2>&1 & pids+=($!)
dds listener.py dds_back /back > dds_back.log 2>&1 & pids+=($!)
sleep 2
dds talker.py dds_talker /chatter > dds_talker.log 2>&1 & pids+=($!)
zen talker.py zen_talker /back > zen_talker.log 2>&1 & pids+=($!)
crossed=0
for i in $(seq 1 60); do
  if grep -aq "^got dds_talker" zen_listener.log && grep -aq "^got zen_talker" dds_back.log; then
    crossed=1; break
  fi
  sleep 0.5
done
sleep 5
count() { grep -ac '^got' "$1"; }
dups() { grep -a '^got' "$1" | sort | uniq -d | wc -l; }
fail=0
check() { if [ "$2" = 1 ]; then echo "ok    $1"; else echo "FAIL  $1"; fail=1; fi; }
check "Fast DDS talker -> rmw_zenoh listener: $(count zen_listener.log) samples" \
  "$([ $crossed = 1 ] && [ "$(count zen_listener.log)" -gt 0 ] && echo 1)"
check "rmw_zenoh talker -> Fast DDS listener: $(count dds_back.log) samples" \
  "$([ "$(count dds_back.log)" -gt 0 ] && echo 1)"
check "no echo: DDS listener $(count dds_listener.log) samples, $(dups dds_listener.log) twice; rmw_zenoh listener $(dups zen_listener.log) twice" \
  "$([ "$(dups dds_listener.log)" = 0 ] && [ "$(dups zen_listener.log)" = 0 ] && echo 1)"
dds server.py dds_adder /dds_add 100 > dds_adder.log 2>&1 & pids+=($!)
zen server.py zen_adder /zen_add 200 > zen_adder.log 2>&1 & pids+=($!)
zen fib_server.py zen_fib /zen_fib > zen_fib.log 2>&1 & pids+=($!)
sleep 2
zen client.py zen_caller /dds_add > zen_caller.log 2>&1 & c1=$!; pids+=($c1)
dds client.py dds_caller /zen_add > dds_caller.log 2>&1 & c2=$!; pids+=($c2)
dds fib_client.py dds_goal /zen_fib > dds_goal.log 2>&1 & c3=$!; pids+=($c3)
for p in $c1 $c2 $c3; do
  for i in $(seq 1 120); do kill -0 "$p" 2>/dev/null || break; sleep 0.5; done
done
sums() { grep -a '^sum' "$1" | awk '{print $2}' | tr '\n' ' '; }
check "rmw_zenoh client -> Fast DDS service: sums $(sums zen_caller.log)" \
  "$([ "$(sums zen_caller.log)" = "140 141 142 " ] && echo 1)"
check "Fast DDS client -> rmw_zenoh service: sums $(sums dds_caller.log)" \
  "$([ "$(sums dds_caller.log)" = "240 241 242 " ] && echo 1)"
check "Fast DDS action client -> rmw_zenoh action server: $(grep -a '^result' dds_goal.log)" \
  "$(grep -aq '^result \[0, 1, 1, 2, 3, 5\] feedback [1-9]' dds_goal.log && echo 1)"
"$RG" gateway list --url "tcp://127.0.0.1:$TP" 2>&1 | sed 's/^/      /'
exit $fail
