#!/usr/bin/env bash
# Raw Zenoh against a rosgate federation, same payloads (issue 30, item 1;
# docs/performance.md, "Four gateways and the raw Zenoh baseline").
#
# Runtime: about 2 minutes (each run is bounded by `timeout`). Loopback
# only, ports 17701-17712. Needs:
#   cargo build --release -p rosgate --features rosgate/zenoh -p zenoh-baseline
#   target/release/rosgate-load
#
# Raw: zenoh-baseline router (a zenohd-equivalent) on core 0; publisher,
# 16 subscriber sessions, the queryable and the 32 queriers on core 1.
# rosgate: gateways A and B (B connects to A) on core 0; rosgate-load on
# core 1, its publisher/provider on A and its subscribers/callers on B.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
R="$ROOT/target/release"
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
RT=tcp/127.0.0.1:17701

raw_fanout() { raw_fanout_with 16; }
raw_fanout_1session() { raw_fanout_with 1; }
raw_latency() { raw_latency_with 16; }
raw_latency_1session() { raw_latency_with 1; }

# raw_fanout_with SESSIONS: 16 subscribers in SESSIONS Zenoh sessions.
raw_fanout_with() {
  timeout 20 taskset -c 0 "$R/zenoh-baseline" router --listen $RT --duration 15 2>/dev/null & PIDS+=($!)
  sleep 0.5
  timeout 20 taskset -c 1 "$R/zenoh-baseline" sub --connect $RT --subs 16 --sessions "$1" --warmup 2 --duration 5 2>/dev/null &
  local sub=$!
  sleep 1
  timeout 20 taskset -c 1 "$R/zenoh-baseline" pub --connect $RT --size 64 --rate 0 --duration 7
  wait $sub
  cleanup; PIDS=()
}

# Open loop at 20 000 publishes/s: latency without the closed loop's queue.
raw_latency_with() {
  timeout 20 taskset -c 0 "$R/zenoh-baseline" router --listen $RT --duration 15 2>/dev/null & PIDS+=($!)
  sleep 0.5
  timeout 20 taskset -c 1 "$R/zenoh-baseline" sub --connect $RT --subs 16 --sessions "$1" --warmup 2 --duration 5 2>/dev/null &
  local sub=$!
  sleep 1
  timeout 20 taskset -c 1 "$R/zenoh-baseline" pub --connect $RT --size 64 --rate 20000 --duration 7
  wait $sub
  cleanup; PIDS=()
}

raw_calls() {
  timeout 20 taskset -c 0 "$R/zenoh-baseline" router --listen $RT --duration 15 2>/dev/null & PIDS+=($!)
  sleep 0.5
  timeout 20 taskset -c 1 "$R/zenoh-baseline" queryable --connect $RT --duration 12 2>/dev/null & PIDS+=($!)
  sleep 0.5
  timeout 20 taskset -c 1 "$R/zenoh-baseline" query --connect $RT --callers 32 --size 64 --warmup 2 --duration 5
  cleanup; PIDS=()
}

gateways() {
  taskset -c 0 "$R/rosgate" --listen 127.0.0.1:17711 --ws-listen off --foxglove-listen off \
    --zenoh-listen $RT --log-level warn & PIDS+=($!)
  taskset -c 0 "$R/rosgate" --listen 127.0.0.1:17712 --ws-listen off --foxglove-listen off \
    --zenoh-connect $RT --log-level warn & PIDS+=($!)
  sleep 1
}

rosgate_fanout() {
  gateways
  timeout 60 taskset -c 1 "$R/rosgate-load" --scenario fanout --subs 16 --size 64 \
    --addr 127.0.0.1:17712 --source-addr 127.0.0.1:17711 --settle 2 --duration 5 | tail -2
  cleanup; PIDS=()
}

rosgate_latency() {
  gateways
  timeout 60 taskset -c 1 "$R/rosgate-load" --scenario latency --rate 20000 --subs 16 --size 64 \
    --addr 127.0.0.1:17712 --source-addr 127.0.0.1:17711 --settle 2 --duration 5 | tail -2
  cleanup; PIDS=()
}

rosgate_calls() {
  gateways
  timeout 60 taskset -c 1 "$R/rosgate-load" --scenario calls --callers 32 --size 64 \
    --addr 127.0.0.1:17712 --source-addr 127.0.0.1:17711 --settle 2 --duration 5 | tail -2
  cleanup; PIDS=()
}

for run in ${1:-raw_fanout raw_fanout_1session rosgate_fanout raw_latency raw_latency_1session rosgate_latency raw_calls rosgate_calls}; do
  echo "== $run"
  "$run"
  sleep 1
done
