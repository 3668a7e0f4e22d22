#!/usr/bin/env bash
# Instructions the gateway executes per delivered message (or per answered
# call) on the hot path, counted by callgrind: the repeatable measure of
# docs/performance.md ("Instructions per delivered message"), where wall
# time on a shared VM moves by 20% between runs.
#
# For each scenario: start the release gateway under
# `valgrind --tool=callgrind` on free loopback ports, drive it with
# rosgate-load for DURATION seconds, stop it with SIGTERM (callgrind writes
# its profile as the gateway exits), and divide the gateway's total
# instructions (the profile's `totals:` line, start-up and shutdown
# included) by the messages it delivered or the calls it answered over its
# whole life (its own `delivered` / `calls_answered` counters, from the
# `stopped` line it logs on SIGTERM). The tool's own count (`delivered`
# of its RESULT line, warm-up included) is printed beside it as a check.
#
# Scenarios: fanout 1 -> 16 and 1 -> 1 with 64 B payloads, calls with 32
# callers. Takes about RUNS x 3 x (DURATION + 3) seconds after the build
# (callgrind start-up, warm-up, drain, profile dump): ~20 s with the
# defaults, every wait bounded. Counts repeat within a fraction of a
# percent, so two builds can be compared run against run.
#
# Environment:
#   ROSGATE_BIN=...   gateway binary [target/release/rosgate]
#   LOAD_BIN=...      load tool binary [target/release/rosgate-load]; keep
#                     it the same when comparing two gateways
#   SKIP_BUILD=1      do not run cargo build first
#   DURATION=3        measured seconds per scenario
#   RUNS=1            runs of each scenario
#   SCENARIOS="..."   only the named rows (fanout-1x16 fanout-1x1 calls-32)
#   OUT_DIR=target/callgrind   profiles (callgrind.NAME.RUN.out), logs
#
# Exit status: 0 when every run was clean and measured, 1 otherwise.

set -euo pipefail

# Binaries named relative to the caller's directory, before the cd.
for var in ROSGATE_BIN LOAD_BIN; do
    if [[ -n ${!var:-} ]]; then
        printf -v "$var" '%s' "$(realpath -- "${!var}")"
    fi
done
cd "$(dirname "$0")/.."

DURATION=${DURATION:-3}
RUNS=${RUNS:-1}
SCENARIOS=${SCENARIOS:-}
OUT_DIR=${OUT_DIR:-target/callgrind}
GATEWAY=${ROSGATE_BIN:-target/release/rosgate}
LOAD=${LOAD_BIN:-target/release/rosgate-load}
# Under callgrind the gateway runs ~50x slower: start-up takes seconds.
START_TIMEOUT=60
# Setup, warm-up, the run, drain (3 s by default) and slack.
LOAD_TIMEOUT=$((DURATION + 60))
# Flushing queued output (bounded by --shutdown-grace-ms) and writing the
# profile.
STOP_TIMEOUT=60

for tool in valgrind jq timeout; do
    if ! command -v "$tool" >/dev/null; then
        echo "callgrind.sh: $tool is not installed" >&2
        exit 1
    fi
done

if [[ -z ${SKIP_BUILD:-} ]]; then
    cargo build --release --quiet -p rosgate -p rosgate-load
fi
for bin in "$GATEWAY" "$LOAD"; do
    if [[ ! -x $bin ]]; then
        echo "callgrind.sh: $bin is not an executable (build it or set ROSGATE_BIN/LOAD_BIN)" >&2
        exit 1
    fi
done
mkdir -p "$OUT_DIR"

GW_PID=
LOAD_PID=
cleanup() {
    local pid
    for pid in "$LOAD_PID" "$GW_PID"; do
        if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
            kill -KILL "$pid" 2>/dev/null || true
            wait "$pid" 2>/dev/null || true
        fi
    done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A counter of the gateway's `stopped` line (`ts INFO stopped: {..}`, or a
# JSON line with the counters under "counters"), or nothing.
counter() {
    local log=$1 name=$2
    grep -m1 -E 'INFO stopped: |"msg":"stopped"' "$log" | sed 's/^[^{]*//' |
        jq -r --arg k "$name" '(.counters // .)[$k] // empty' 2>/dev/null || true
}

# name | rosgate-load arguments | gateway counter that counts the work
ROWS=(
    "fanout-1x16|--scenario fanout --pubs 1 --subs 16 --size 64|delivered"
    "fanout-1x1|--scenario fanout --pubs 1 --subs 1 --size 64|delivered"
    "calls-32|--scenario calls --callers 32 --inflight 1|calls_answered"
)

# One measured run: sets RUN_INSTR, RUN_COUNT, RUN_TOOL, or returns 1.
measure() {
    local name=$1 args=$2 key=$3 run=$4
    local out="$OUT_DIR/callgrind.$name.$run.out"
    local log="$OUT_DIR/gateway.$name.$run.log"
    local addr= rc
    rm -f "$out"
    valgrind --tool=callgrind --callgrind-out-file="$out" \
        "$GATEWAY" --listen 127.0.0.1:0 --ws-listen 127.0.0.1:0 2>"$log" &
    GW_PID=$!
    for _ in $(seq $((START_TIMEOUT * 10))); do
        addr=$(sed -n 's/.*rosgate .*listening on \([0-9.]*:[0-9]*\).*/\1/p' "$log" | head -n 1)
        [[ -n $addr ]] && break
        kill -0 "$GW_PID" 2>/dev/null || break
        sleep 0.1
    done
    if [[ -z $addr ]]; then
        echo "callgrind.sh: $name: the gateway did not start within ${START_TIMEOUT}s:" >&2
        tail -n 20 "$log" >&2
        return 1
    fi
    # shellcheck disable=SC2086 # args is a word list by design
    timeout --kill-after=5 "$LOAD_TIMEOUT" "$LOAD" --addr "$addr" \
        --server-pid "$GW_PID" --duration "$DURATION" $args \
        >"$OUT_DIR/load.$name.$run.txt" 2>&1 &
    LOAD_PID=$!
    rc=0
    wait "$LOAD_PID" || rc=$?
    LOAD_PID=
    grep -v '^RESULT ' "$OUT_DIR/load.$name.$run.txt" | sed "s/^/  $name #$run: /" >&2 || true
    # Valgrind runs the gateway in its own process: this PID is the gateway.
    kill -TERM "$GW_PID" 2>/dev/null || true
    for _ in $(seq $((STOP_TIMEOUT * 10))); do
        kill -0 "$GW_PID" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$GW_PID" 2>/dev/null; then
        echo "callgrind.sh: $name: the gateway did not stop within ${STOP_TIMEOUT}s" >&2
        return 1
    fi
    wait "$GW_PID" 2>/dev/null || true
    GW_PID=
    if [[ $rc -ne 0 ]]; then
        echo "callgrind.sh: $name: rosgate-load exited with $rc (see $OUT_DIR/load.$name.$run.txt)" >&2
        return 1
    fi
    RUN_INSTR=$(sed -n 's/^totals: *\([0-9]*\).*/\1/p' "$out" 2>/dev/null | head -n 1)
    [[ -z $RUN_INSTR ]] && RUN_INSTR=$(sed -n 's/^summary: *\([0-9]*\).*/\1/p' "$out" 2>/dev/null | head -n 1)
    RUN_COUNT=$(counter "$log" "$key")
    RUN_TOOL=$(sed -n 's/^RESULT //p' "$OUT_DIR/load.$name.$run.txt" | jq -r '.delivered // empty')
    if [[ -z $RUN_INSTR || -z $RUN_COUNT || $RUN_COUNT -eq 0 ]]; then
        echo "callgrind.sh: $name: no instruction total in $out or no $key count in $log" >&2
        return 1
    fi
}

TABLE=()
FAILED=0
for row in "${ROWS[@]}"; do
    IFS='|' read -r name args key <<<"$row"
    if [[ -n $SCENARIOS && " $SCENARIOS " != *" $name "* ]]; then
        continue
    fi
    for run in $(seq "$RUNS"); do
        if measure "$name" "$args" "$key" "$run"; then
            per=$(awk -v i="$RUN_INSTR" -v n="$RUN_COUNT" 'BEGIN { printf "%.1f", i / n }')
            TABLE+=("| $name | $run | $RUN_INSTR | $key $RUN_COUNT | ${RUN_TOOL:-?} | $per |")
        else
            TABLE+=("| $name | $run | failed | | | |")
            FAILED=1
        fi
    done
done

echo
echo "gateway: $GATEWAY ($(stat -c %y "$GATEWAY" | cut -d. -f1)); load: $LOAD; ${DURATION}s per run"
echo
echo "| scenario | run | instructions | gateway count | tool count | instr / count |"
echo "|---|---:|---:|---:|---:|---:|"
printf '%s\n' "${TABLE[@]}"
exit "$FAILED"
