#!/usr/bin/env bash
# Issue 27, "Performance": rosgate's Foxglove WebSocket server against
# foxglove-sdk's own (PyPI `foxglove-sdk`, a Rust/tokio server inside a
# Python process), the same 16 Foxglove subscribers on both
# (`rosgate-load --transport foxglove` / `foxglove-source`), fan-out of
# 64 B and of 1 MiB std_msgs/msg/String messages (CDR). Prints a markdown
# table: verified deliveries/s at the subscribers, server CPU %, and server
# CPU microseconds per delivered message.
#
# - rosgate: fed by rosgate-load's own rosbridge TCP publisher (closed
#   loop: at most --window messages ahead of the slowest subscriber); the
#   gateway encodes each JSON publish to CDR once. Server CPU is the
#   gateway process's.
# - rosgate-cdr: the same, fed by a Foxglove client publisher
#   (`--transport foxglove-cdr`: `clientPublish` on a `cdr` channel) with
#   the String already CDR, which the gateway passes on untouched: the
#   like-for-like input of foxglove-sdk's `Channel.log` of CDR.
# - foxglove-sdk: scripts/foxglove-sdk-pub.py logs CDR as fast as its
#   Python loop can (open loop: foxglove-sdk drops a slow client's oldest
#   messages, which the subscribers see as gaps, `out_of_order`). Its
#   server threads and the Python loop share one process, so "server CPU"
#   there includes the loop; the `--no-server` run of the same loop gives
#   the loop's own CPU per logged message, and the "est. server only" column
#   subtracts it (loop cost x messages logged per second).
#
# Servers (and the Python loop) on core 0, the tool on core 1, as
# scripts/compare.sh does (scripts/bench-env.sh). Every run is bounded:
# about REPS x 4 x (DURATION + 4) seconds plus the two loop-alone runs.
#
# Environment:
#   DURATION=5  measured seconds per run     REPS=1  repetitions
#   SERVERS="rosgate rosgate-cdr foxglove-sdk"   the rows, in run order
#   SUBS=16     Foxglove subscribers         SKIP_BUILD=1  use target/release
#   PYTHON=python3 (needs `foxglove` importable: pip install foxglove-sdk)
#   OUT=target/foxglove-compare.md
#   RESULTS=target/foxglove-compare-results.jsonl   every RESULT, tagged
#                  with server and rep (the publisher's line as .pub)

set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-5}
REPS=${REPS:-1}
SUBS=${SUBS:-16}
PYTHON=${PYTHON:-python3}
OUT=${OUT:-target/foxglove-compare.md}
RESULTS=${RESULTS:-target/foxglove-compare-results.jsonl}
WARMUP=0.5
SERVERS=${SERVERS:-rosgate rosgate-cdr foxglove-sdk}

note() { echo "foxglove-compare.sh: $*" >&2; }

command -v jq >/dev/null || { note "jq is needed"; exit 1; }
"$PYTHON" -c 'import foxglove' 2>/dev/null || {
    note "$PYTHON cannot import foxglove: pip install foxglove-sdk (or set PYTHON)"
    exit 1
}
if [[ -z ${SKIP_BUILD:-} ]]; then
    cargo build --release --quiet -p rosgate -p rosgate-load
fi
GATEWAY=target/release/rosgate
LOAD=target/release/rosgate-load

# shellcheck source=scripts/bench-env.sh
source scripts/bench-env.sh
bench_env foxglove-compare.sh 256

TMP=$(mktemp -d -t rosgate-fxcmp.XXXXXX)
SRV=
cleanup() {
    if [[ -n $SRV ]] && kill -0 "$SRV" 2>/dev/null; then
        kill "$SRV" 2>/dev/null || true
        wait "$SRV" 2>/dev/null || true
    fi
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# run_rosgate SIZE SCENARIO TRANSPORT -> RESULT json on stdout
run_rosgate() {
    local size=$1 scenario=$2 transport=$3 tcp= fx=
    # Port 0 for both; the addresses are read from the start-up lines.
    # Emptied here, not by the background job's redirection, which may
    # come after the first look and show the last run's addresses.
    : >"$TMP/gw.log"
    "${PIN_SRV[@]}" "$GATEWAY" --listen 127.0.0.1:0 --ws-listen off \
        --foxglove-listen 127.0.0.1:0 --log-level warn >"$TMP/gw.log" 2>&1 &
    SRV=$!
    for _ in $(seq 200); do
        fx=$(sed -n 's|.*foxglove listening on ws://\([0-9.]*:[0-9]*\).*|\1|p' "$TMP/gw.log" | head -n 1)
        tcp=$(sed -n 's|.* listening on \([0-9.]*:[0-9]*\)$|\1|p' "$TMP/gw.log" | head -n 1)
        [[ -n $fx && -n $tcp ]] && break
        kill -0 "$SRV" 2>/dev/null || break
        sleep 0.05
    done
    if [[ -z $fx || -z $tcp ]]; then
        note "rosgate did not start: $(tail -n 3 "$TMP/gw.log")"
        return 0
    fi
    "${PIN_LOAD[@]}" timeout $((${DURATION%.*} + 60)) "$LOAD" --transport "$transport" \
        --scenario "$scenario" --size "$size" --subs "$SUBS" \
        --addr "$fx" --source-addr "$tcp" \
        --duration "$DURATION" --warmup "$WARMUP" --server-pid "$SRV" \
        | sed -n 's/^RESULT //p' || true
    kill "$SRV" 2>/dev/null || true
    wait "$SRV" 2>/dev/null || true
    SRV=
}

# run_sdk SIZE SCENARIO -> RESULT json with the publisher's line as .pub
run_sdk() {
    local size=$1 scenario=$2 addr= res
    # Port 0: the publisher prints the port the server got. It logs for
    # the tool's warm-up, run and one second of drain, then stops. The
    # log is emptied here for the reason given in run_rosgate.
    : >"$TMP/pub.log"
    "${PIN_SRV[@]}" "$PYTHON" scripts/foxglove-sdk-pub.py --port 0 --size "$size" \
        --subs "$SUBS" --seconds "$(echo "$DURATION + $WARMUP + 1" | bc)" \
        >"$TMP/pub.json" 2>"$TMP/pub.log" &
    SRV=$!
    for _ in $(seq 200); do
        addr=$(sed -n 's/.*listening on \([0-9.]*:[0-9]*\).*/\1/p' "$TMP/pub.log" | head -n 1)
        [[ -n $addr ]] && break
        kill -0 "$SRV" 2>/dev/null || break
        sleep 0.05
    done
    if [[ -z $addr ]]; then
        note "foxglove-sdk did not start: $(tail -n 3 "$TMP/pub.log")"
        return 0
    fi
    res=$("${PIN_LOAD[@]}" timeout $((${DURATION%.*} + 60)) "$LOAD" --transport foxglove-source \
        --scenario "$scenario" --size "$size" --subs "$SUBS" --addr "$addr" \
        --duration "$DURATION" --warmup "$WARMUP" --drain 1 --server-pid "$SRV" \
        | sed -n 's/^RESULT //p' || true)
    wait "$SRV" 2>/dev/null || true
    SRV=
    jq -c --slurpfile p "$TMP/pub.json" '. + {pub: ($p[0] // null)}' <<<"$res"
}

# loop_alone SIZE -> CPU seconds per logged message of the Python loop
loop_alone() {
    "${PIN_SRV[@]}" "$PYTHON" scripts/foxglove-sdk-pub.py --no-server --size "$1" --seconds 2 \
        | jq '.cpu_s / .logged'
}

: >"$RESULTS"
declare -A LOOP
for size in 64 1048576; do
    LOOP[$size]=$(loop_alone "$size")
    note "Python loop alone, $size B: $(jq -n "${LOOP[$size]} * 1e6") us CPU per logged message"
done

ROWS=()
for rep in $(seq "$REPS"); do
    for size in 64 1048576; do
        scenario=fanout
        ((size > 64)) && scenario=large
        for srv in $SERVERS; do
            note "rep $rep: $srv, $size B to $SUBS subscribers"
            case $srv in
                rosgate) r=$(run_rosgate "$size" "$scenario" foxglove) ;;
                rosgate-cdr) r=$(run_rosgate "$size" "$scenario" foxglove-cdr) ;;
                *) r=$(run_sdk "$size" "$scenario") ;;
            esac
            [[ -n $r ]] || { note "$srv $size: no result"; continue; }
            ROWS+=("$(jq -r --arg srv "$srv" --arg rep "$rep" --argjson loop "${LOOP[$size]}" '
                (.delivered_per_s) as $d | (.server_cpu_pct // 0) as $c
                | (if .pub then (.pub.logged / .pub.seconds) else null end) as $lr
                | (if $lr then ($c / 100 - $lr * $loop) else null end) as $srvonly
                | "| \($srv) | \(.params.size_human) | \($rep) | \($d) | \(.out_of_order) | \($c) | "
                  + (if $d > 0 then "\((1e6 * $c / 100 / $d * 100 | round) / 100)" else "n/a" end) + " | "
                  + (if $srvonly and $d > 0 then "\((1e6 * $srvonly / $d * 100 | round) / 100)" else "-" end) + " | "
                  + (if $lr then "\($lr | round)" else "-" end) + " | \(.client_cpu_pct) | \(.other_cpu_pct) |"' <<<"$r")")
            jq -c --arg srv "$srv" --arg rep "$rep" '. + {server: $srv, rep: ($rep | tonumber)}' <<<"$r" >>"$RESULTS"
        done
    done
done

{
    echo "Foxglove fan-out to $SUBS subscribers, $(date -u +%F) $(git rev-parse --short HEAD 2>/dev/null), load average $(cut -d' ' -f1-3 /proc/loadavg), ${DURATION}s per run"
    echo
    echo "| server | size | rep | delivered msg/s | gaps (shed) | server CPU % | server CPU us / delivered | est. server only us / delivered | logged msg/s (Python) | tool CPU % | other CPU % |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|"
    printf '%s\n' "${ROWS[@]}"
    echo
    echo "Python loop alone (no server): 64 B $(jq -n "${LOOP[64]} * 1e6 * 100 | round / 100") us, 1 MiB $(jq -n "${LOOP[1048576]} * 1e6 * 100 | round / 100") us CPU per logged message."
} | tee "$OUT"
