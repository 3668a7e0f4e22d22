#!/bin/bash
# Performance of rosgate in a real ROS 2 graph (issue 26, "Performance"):
# rclpy publishers on Fast DDS (rosgate --dds-domain) and, for comparison,
# on rmw_zenoh (rosgate --ros-domain through an rmw_zenohd router), to 1
# and 16 WebSocket subscribers (rosgate-load --publisher none).
#
# Part 1, throughput: for each rep, message, subscriber count and
# middleware (interleaved: DDS and rmw_zenoh alternate, so drift of a
# shared machine hits both), a fresh gateway and a fresh rclpy publisher
# (scripts/ros2-perf-node.py):
#   - string: std_msgs/msg/String, 64 B, as fast as rclpy publishes;
#   - image:  sensor_msgs/msg/Image rgb8 640x480 at 30 Hz;
# rosgate-load reports the delivered rate per subscriber, the rate the
# publisher published at in the measured interval (its sequence numbers),
# loss, latency from the rclpy publish (stamp in the message,
# time.time_ns()) to the subscriber, and CPU of gateway, publisher and
# tool over the measured interval.
# Part 2, the hop alone: one rclpy publisher at a fixed rate (String
# 1000/s, Image 30/s) heard at once by an rclpy subscriber in the same
# graph and, through rosgate, by one WebSocket subscriber: both measure
# latency from the same stamps, so the difference is what the gateway's
# way (DDS reader in rosgate, the WebSocket, the tool's JSON) costs beyond
# the plain rmw way (rmw reader, rclpy's take and callback).
#
# Needs: ROS2_ENV (a script that, sourced with ROS2_ROOT, ROS2_RMW
# (dds|zenoh), ROS_DOMAIN_ID and, for zenoh, ZENOH_ROUTER set, makes
# python3 run rclpy on that rmw), DDS_ROOT and ZENOH_ROOT (the two roots),
# RMW_ZENOHD (the router); a release gateway built with --features dds,ros2
# and a release rosgate-load.
#
#   ROS2_ENV=... DDS_ROOT=... ZENOH_ROOT=... RMW_ZENOHD=... \
#     scripts/ros2-dds-perf.sh [target/release/rosgate] [target/release/rosgate-load]
#
# MWS (default "dds zenoh": the middlewares run), REPS (default 2), SECS
# (measured seconds per run, default 5), PARTS
# ("1 2" by default), KINDS ("string image"), SUBS ("1 16"), DEPTH (the
# publisher's keep-last depth, default 10: at 50 000 String/s a depth of
# 10 is 200 us of slack before a reliable writer overwrites what a reader
# has not acknowledged). Everything runs on loopback in a ROS domain of its
# own (150-199) with ephemeral ports; every process it started is stopped
# at the end (and each run's gateway and publisher after the run). Writes
# every result as one JSON line to $OUT (default: results.jsonl in its
# work directory) and prints a table; exits 0 unless a run could not be
# carried out.
set -u
: "${ROS2_ENV:?}" "${DDS_ROOT:?}" "${ZENOH_ROOT:?}" "${RMW_ZENOHD:?}"
RG=$(realpath "${1:-target/release/rosgate}")
LOAD=$(realpath "${2:-target/release/rosgate-load}")
NODE=$(realpath "$(dirname "$0")/ros2-perf-node.py")
REPS=${REPS:-2}; SECS=${SECS:-5}; PARTS=${PARTS:-1 2}; KINDS=${KINDS:-string image}
SUBS=${SUBS:-1 16}; DEPTH=${DEPTH:-10}
WARMUP=2; SETTLE=3
D=$((150 + $$ % 50))
W=$(mktemp -d /tmp/rosgate-dds-perf-XXXXXX)
OUT=${OUT:-$W/results.jsonl}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
ZP=$(free_port); EP="tcp/127.0.0.1:$ZP"
pids=()
stop() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  echo "logs in $W"
}
trap stop EXIT
cd "$W" || exit 1
echo "machine: $(nproc) cores, $(uptime | sed 's/.*load/load/'); ROS domain $D" | tee machine.txt

# Each runs in a background subshell that execs its program: $! is its pid.
ros() { # ros dds|zenoh ARGS...: python3 ARGS with rclpy on that rmw
  local m=$1; shift
  if [ "$m" = dds ]; then export ROS2_ROOT=$DDS_ROOT ROS2_RMW=dds; else export ROS2_ROOT=$ZENOH_ROOT ROS2_RMW=zenoh ZENOH_ROUTER=$EP; fi
  export ROS_DOMAIN_ID=$D; source "$ROS2_ENV"; exec python3 "$@"
}
router() {
  export ROS2_ROOT=$ZENOH_ROOT ROS2_RMW=zenoh ROS_DOMAIN_ID=$D; source "$ROS2_ENV"
  export ZENOH_CONFIG_OVERRIDE="listen/endpoints=[\"$EP\"]"; exec "$RMW_ZENOHD"
}
router > router.log 2>&1 & pids+=($!)
sleep 2

gw=; gwport=
start_gateway() { # start_gateway dds|zenoh LOG
  gwport=$(free_port)
  local side=(--dds-domain "$D")
  [ "$1" = zenoh ] && side=(--ros-domain "$D" --zenoh-connect "$EP")
  "$RG" --listen 127.0.0.1:0 --ws-listen "127.0.0.1:$gwport" --ws-domain "$D" --tcp-domain "$D" \
    "${side[@]}" > "$2" 2>&1 & gw=$!; pids+=($gw)
  for _ in $(seq 1 50); do
    (exec 3<>"/dev/tcp/127.0.0.1/$gwport") 2>/dev/null && return 0
    sleep 0.1
  done
  echo "gateway did not open its WebSocket port (see $2)"; return 1
}
stop_pid() { kill "$1" 2>/dev/null; for _ in $(seq 1 30); do kill -0 "$1" 2>/dev/null || return; sleep 0.1; done; kill -9 "$1" 2>/dev/null; }
# record KEY=VALUE... FILE: the RESULT line of FILE with the keys added.
record() {
  local file=${*: -1}
  python3 - "$@" >> "$OUT" <<'EOF'
import json, sys
*kv, file = sys.argv[1:]
row = {}
for a in kv:
    k, v = a.split("=", 1)
    row[k] = v
for line in open(file, errors="replace"):
    for tag in ("RESULT ", "PUB ", "SUB "):
        if line.startswith(tag):
            row[tag.strip().lower()] = json.loads(line[len(tag):])
print(json.dumps(row))
EOF
}

failed=0
if [[ " $PARTS " == *" 1 "* ]]; then
  for rep in $(seq 1 "$REPS"); do
    for kind in $KINDS; do
      for subs in $SUBS; do
        for m in ${MWS:-dds zenoh}; do
          tag="p1-$kind-$subs-$m-$rep"
          start_gateway "$m" "$tag.rosgate.log" || { failed=1; continue; }
          ros "$m" "$NODE" pub "$kind" "/perf/$kind" --depth "$DEPTH" --secs $((SETTLE + WARMUP + SECS + 8)) \
            > "$tag.pub.log" 2>&1 & pub=$!; pids+=($pub)
          sleep "$SETTLE"
          scen=images; [ "$kind" = string ] && scen=strings
          "$LOAD" --scenario "$scen" --publisher none --publisher-pid "$pub" --server-pid "$gw" \
            --ws-addr "127.0.0.1:$gwport" --topic "/perf/$kind" --subs "$subs" \
            --duration "$SECS" --warmup "$WARMUP" --drain 3 --setup-timeout 20 > "$tag.load.log" 2>&1
          rc=$?
          stop_pid "$pub"; stop_pid "$gw"
          [ "$rc" -ge 2 ] && { failed=1; echo "run $tag could not be carried out: $(tail -1 "$tag.load.log")"; }
          cat "$tag.pub.log" >> "$tag.load.log"
          record part=1 mw="$m" kind="$kind" subs="$subs" rep="$rep" depth="$DEPTH" rc="$rc" "$tag.load.log"
          echo "$tag: $(head -1 "$tag.load.log")"
        done
      done
    done
  done
fi

if [[ " $PARTS " == *" 2 "* ]]; then
  for rep in $(seq 1 "$REPS"); do
    for kind in $KINDS; do
      for m in ${MWS:-dds zenoh}; do
        tag="p2-$kind-$m-$rep"
        rate=30; [ "$kind" = string ] && rate=1000
        start_gateway "$m" "$tag.rosgate.log" || { failed=1; continue; }
        total=$((SETTLE + WARMUP + SECS + 8))
        ros "$m" "$NODE" sub "$kind" "/perf/$kind" --depth "$DEPTH" --secs $((total - 2)) --warmup $((SETTLE + WARMUP)) \
          > "$tag.sub.log" 2>&1 & sub=$!; pids+=($sub)
        ros "$m" "$NODE" pub "$kind" "/perf/$kind" --depth "$DEPTH" --rate "$rate" --secs "$total" \
          > "$tag.pub.log" 2>&1 & pub=$!; pids+=($pub)
        sleep "$SETTLE"
        scen=images; [ "$kind" = string ] && scen=strings
        "$LOAD" --scenario "$scen" --publisher none --publisher-pid "$pub" --server-pid "$gw" \
          --ws-addr "127.0.0.1:$gwport" --topic "/perf/$kind" --subs 1 \
          --duration "$SECS" --warmup "$WARMUP" --drain 3 --setup-timeout 20 > "$tag.load.log" 2>&1
        rc=$?
        for _ in $(seq 1 100); do kill -0 "$sub" 2>/dev/null || break; sleep 0.1; done
        stop_pid "$sub"; stop_pid "$pub"; stop_pid "$gw"
        [ "$rc" -ge 2 ] && { failed=1; echo "run $tag could not be carried out: $(tail -1 "$tag.load.log")"; }
        cat "$tag.pub.log" "$tag.sub.log" >> "$tag.load.log"
        record part=2 mw="$m" kind="$kind" subs=1 rate="$rate" rep="$rep" rc="$rc" "$tag.load.log"
        echo "$tag: $(head -1 "$tag.load.log") | $(grep -a '^SUB' "$tag.sub.log")"
      done
    done
  done
fi

python3 - "$OUT" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def g(d, *ks):
    for k in ks:
        d = d.get(k) if isinstance(d, dict) else None
    return d
def f(v, fmt="{:.0f}"):
    return "-" if v is None else fmt.format(v)
print("\nPart 1: rclpy publisher -> rosgate -> N WebSocket subscribers (each row one run)")
print("| middleware | message | subs | depth | rep | published/s | delivered/s per sub | lost | p50 us | p99 us | gateway CPU % | gateway us/msg | rclpy pub CPU % | tool CPU % | other CPU % |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    if r["part"] != "1": continue
    res = r.get("result") or {}
    lost = sum((e.get("lost") or 0) for e in (res.get("per_encoding") or {}).values())
    print(f"| {'Fast DDS' if r['mw']=='dds' else 'rmw_zenoh'} | {r['kind']} | {r['subs']} | {r.get('depth', '10')} | {r['rep']} | "
          f"{f(res.get('published_per_s'))} | {f(res.get('msgs_per_s_per_sub'))} | {lost} | "
          f"{f(g(res,'latency_us','p50'))} | {f(g(res,'latency_us','p99'))} | {f(res.get('server_cpu_pct'))} | "
          f"{f(res.get('server_cpu_us_per_image'), '{:.1f}')} | {f(res.get('publisher_cpu_pct'))} | {f(res.get('client_cpu_pct'))} | {f(res.get('other_cpu_pct'))} |")
p2 = [r for r in rows if r["part"] == "2"]
if p2:
    print("\nPart 2: one rclpy publisher at a fixed rate, heard at once by an rclpy subscriber and (through rosgate) a WebSocket subscriber")
    print("| middleware | message | rate | rep | rclpy sub p50 us | rclpy sub p99 us | via rosgate p50 us | via rosgate p99 us | difference p50 us | gateway CPU % |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in p2:
        res = r.get("result") or {}
        a, b = g(r, "sub", "latency_us", "p50"), g(res, "latency_us", "p50")
        d = None if a is None or b is None else b - a
        print(f"| {'Fast DDS' if r['mw']=='dds' else 'rmw_zenoh'} | {r['kind']} | {r['rate']} | {r['rep']} | "
              f"{f(a)} | {f(g(r,'sub','latency_us','p99'))} | {f(b)} | {f(g(res,'latency_us','p99'))} | {f(d, '{:+.0f}')} | {f(res.get('server_cpu_pct'))} |")
EOF
echo "machine after: $(uptime | sed 's/.*load/load/')"
exit $failed
