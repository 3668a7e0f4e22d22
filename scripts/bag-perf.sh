#!/usr/bin/env bash
# Issue 28's recording and replay numbers: `rosgate bag record` of a
# 1280x720 rgb8 sensor_msgs/msg/Image topic at 30 Hz (83 MB/s of pixels)
# plus a std_msgs/msg/String topic at 20000 msg/s (32-byte strings) for
# DURATION seconds, then `rosgate bag play --rate 1` of that bag to a
# subscriber that timestamps arrivals.
#
# Reports (a markdown table, also written to OUT):
#   - messages recorded per topic against published (zero drops?) and the
#     gateway drops the recorder reports;
#   - recorder CPU and gateway CPU (/proc/PID/stat, % of one core over the
#     publishing window);
#   - MB/s written (bag bytes / publishing seconds) against
#     `dd if=/dev/zero of=target/ddtest bs=1M count=1024 oflag=direct` on
#     the same filesystem (conv=fdatasync where O_DIRECT is refused);
#   - play: timing error of every message (arrival relative to the first,
#     against the recorded log time relative to the first, median offset
#     removed) p50/p99/max, and the per-topic inter-message gap error.
#
# The publishers and the subscriber are scripts/bag-perf.py (standard
# library Python, TCP JSON lines: the images' `data` goes as base64, which
# the gateway decodes to bytes, as a rosbridge client would send it).
# The recorder is a WebSocket client (cbor-raw, reliable, depth 1000),
# as `bag record` always is.
#
# Builds nothing: run `cargo build --release -p rosgate -p rosgate-load`
# first (ROSGATE_BIN overrides the binary, for a before/after).
#
# Environment:
#   DURATION=60   publishing seconds (DURATION=20 for a quick run)
#   IMG_RATE=30   images per second
#   SMALL_RATE=20000  small messages per second
#   OUT=target/bag-perf.md
#   PLAY_QUEUE_BYTES=67108864  --max-queue-bytes of the play gateway
#                 (the recording's gateway keeps the default)
#   KEEP=1        keep the bag (target/bag-perf/); by default it is
#                 deleted after measuring (it is DURATION x 85 MB)
#
# Bounded: every step has a timeout; about 2 x DURATION + 40 s. Needs
# 2 x DURATION x 85 MB free (the bag and dd's 1 GiB, one after the other).
# Exit 0 when nothing was lost and play delivered every message, 1
# otherwise.

set -euo pipefail

cd "$(dirname "$0")/.."

DURATION=${DURATION:-60}
IMG_RATE=${IMG_RATE:-30}
SMALL_RATE=${SMALL_RATE:-20000}
OUT=${OUT:-target/bag-perf.md}
PLAY_QUEUE_BYTES=${PLAY_QUEUE_BYTES:-67108864}
GATEWAY=${ROSGATE_BIN:-target/release/rosgate}
PY=scripts/bag-perf.py
IMG=/perf/image
SMALL=/perf/small

note() { echo "bag-perf.sh: $*" >&2; }

[[ -x $GATEWAY ]] || {
    note "$GATEWAY missing: cargo build --release -p rosgate -p rosgate-load"
    exit 1
}

WORK=target/bag-perf
rm -rf "$WORK"
mkdir -p "$WORK"
BAG=$WORK/bag
GW_PID= REC_PID= PIDS=()
cleanup() {
    for p in "${PIDS[@]}" $REC_PID $GW_PID; do
        if kill -0 "$p" 2>/dev/null; then
            kill "$p" 2>/dev/null || true
            wait "$p" 2>/dev/null || true
        fi
    done
    rm -f target/ddtest
    if [[ -z ${KEEP:-} ]]; then
        rm -rf "$BAG"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# cpu PID: utime + stime in clock ticks.
cpu() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }
HZ=$(getconf CLK_TCK)

# ------------------------------------------------------------- disk baseline

note "dd: 1 GiB to $(df --output=target target | tail -n 1) (direct I/O)"
DD=$( (timeout 120 dd if=/dev/zero of=target/ddtest bs=1M count=1024 oflag=direct 2>&1 ||
    timeout 120 dd if=/dev/zero of=target/ddtest bs=1M count=1024 conv=fdatasync 2>&1) |
    tail -n 1)
rm -f target/ddtest
DD_MBS=$(sed -n 's/.* s, \([0-9.,]*\) \([MG]\)B\/s.*/\1 \2/p' <<<"$DD" |
    awk '{ gsub(",", ".", $1); print ($2 == "G" ? $1 * 1000 : $1) }')
note "dd: $DD"

# ------------------------------------------------------------------ gateway

# start_gateway [ARGS...]: a fresh gateway on ports of its own.
start_gateway() {
    "$GATEWAY" --listen 127.0.0.1:0 --ws-listen 127.0.0.1:0 --foxglove-listen off --log-level warn \
        "$@" 2>"$WORK/gw.log" &
    GW_PID=$!
    TCP= WS=
    for _ in $(seq 200); do
        TCP=$(sed -n 's/^rosgate .* listening on \(tcp:\/\/\)\{0,1\}\([0-9.]*:[0-9]*\).*/\2/p' "$WORK/gw.log" | head -n 1)
        WS=$(sed -n 's/.*websocket listening on \(ws:\/\/\)\{0,1\}\([0-9.]*:[0-9]*\).*/\2/p' "$WORK/gw.log" | head -n 1)
        [[ -n $TCP && -n $WS ]] && return 0
        kill -0 "$GW_PID" 2>/dev/null || break
        sleep 0.05
    done
    note "the gateway did not start: $(tail -n 3 "$WORK/gw.log" | tr '\n' ' ')"
    exit 1
}
stop() {
    local p=$1
    if kill -0 "$p" 2>/dev/null; then
        kill -INT "$p" 2>/dev/null || true
        for _ in $(seq 100); do
            kill -0 "$p" 2>/dev/null || break
            sleep 0.1
        done
        kill "$p" 2>/dev/null || true
    fi
    wait "$p" 2>/dev/null || true
}

start_gateway
note "gateway tcp $TCP ws $WS; recording ${DURATION}s"

# ---------------------------------------------------------------- record

GO=$WORK/go
LIMIT=$((DURATION * 2 + 60))
python3 "$PY" pub-images "$TCP" "$IMG" "$IMG_RATE" "$DURATION" "$GO" \
    >"$WORK/pub-images.json" 2>"$WORK/pub-images.err" &
PUB1=$!
python3 "$PY" pub-small "$TCP" "$SMALL" "$SMALL_RATE" "$DURATION" "$GO" \
    >"$WORK/pub-small.json" 2>"$WORK/pub-small.err" &
PUB2=$!
PIDS=("$PUB1" "$PUB2")
sleep 1 # both advertised: the recorder finds their types

"$GATEWAY" bag record --url "ws://$WS/" -o "$BAG" --compression none "$IMG" "$SMALL" \
    >"$WORK/rec.out" 2>"$WORK/rec.err" &
REC_PID=$!
for _ in $(seq 200); do
    (($(grep -c 'subscribed to' "$WORK/rec.out" "$WORK/rec.err" | awk -F: '{ s += $2 } END { print s }') >= 2)) && break
    kill -0 "$REC_PID" 2>/dev/null || {
        note "recorder exited: $(tail -n 3 "$WORK/rec.err")"
        exit 1
    }
    sleep 0.05
done
sleep 0.5 # the subscribes reached the gateway

REC_CPU0=$(cpu "$REC_PID") GW_CPU0=$(cpu "$GW_PID")
P1_CPU0=$(cpu "$PUB1") P2_CPU0=$(cpu "$PUB2")
T0=$(date +%s.%N)
touch "$GO"
# Bag size every second: the peak one-second write rate.
PEAK=0 PREV=0
while kill -0 "$PUB1" 2>/dev/null || kill -0 "$PUB2" 2>/dev/null; do
    if (($(date +%s) - ${T0%.*} > LIMIT)); then
        note "publishers still running after ${LIMIT}s: stopped"
        kill "$PUB1" "$PUB2" 2>/dev/null || true
    fi
    P1_CPU1=$(cpu "$PUB1") P2_CPU1=$(cpu "$PUB2")
    sleep 1
    NOW=$(du -sb "$BAG" 2>/dev/null | cut -f1)
    ((NOW - PREV > PEAK)) && PEAK=$((NOW - PREV))
    PREV=$NOW
done
T1=$(date +%s.%N)
REC_CPU1=$(cpu "$REC_PID") GW_CPU1=$(cpu "$GW_PID")
wait "$PUB1" "$PUB2" || true
PIDS=()
# Drain: the recorder's count stops moving.
sleep 2
stop "$REC_PID"
REC_PID=
BAG_BYTES=$(du -sb "$BAG" | cut -f1)

SENT_IMG=$(sed -n 's/.*"sent": \([0-9]*\).*/\1/p' "$WORK/pub-images.json")
SENT_SMALL=$(sed -n 's/.*"sent": \([0-9]*\).*/\1/p' "$WORK/pub-small.json")
INFO=$("$GATEWAY" bag info "$BAG")
count() { sed -n "s/.*Topic: $(sed 's/\//\\\//g' <<<"$1") | .*Count: \([0-9]*\).*/\1/p" <<<"$INFO"; }
REC_IMG=$(count "$IMG")
REC_SMALL=$(count "$SMALL")
DROPS=$(sed -n 's/.*rosgate.dropped: \([0-9]*\).*/\1/p' <<<"$INFO")
SECS=$(awk -v a="$T0" -v b="$T1" 'BEGIN { printf "%.2f", b - a }')
pc() { awk -v a="$1" -v b="$2" -v s="$SECS" -v hz="$HZ" 'BEGIN { printf "%.0f", (b - a) / hz / s * 100 }'; }
REC_CPU=$(pc "$REC_CPU0" "$REC_CPU1")
GW_CPU=$(pc "$GW_CPU0" "$GW_CPU1")
PUB_CPU=$(awk -v a="$P1_CPU0" -v b="$P1_CPU1" -v c="$P2_CPU0" -v d="$P2_CPU1" -v s="$SECS" -v hz="$HZ" \
    'BEGIN { printf "%.0f", (b - a + d - c) / hz / s * 100 }')
MBS=$(awk -v b="$BAG_BYTES" -v s="$SECS" 'BEGIN { printf "%.1f", b / s / 1e6 }')
PEAK_MBS=$(awk -v b="$PEAK" 'BEGIN { printf "%.1f", b / 1e6 }')
note "recorded $REC_IMG/$SENT_IMG images, $REC_SMALL/$SENT_SMALL small; $MBS MB/s; drops $DROPS"

# ------------------------------------------------------------------ play

# A fresh gateway whose reliable budget holds what the Python subscriber
# (JSON, 3.7 MB per image line) falls behind: with the default 8 MiB it
# was closed (reliable_overflow) part way in some runs. The recording
# above ran with the default.
stop "$GW_PID"
GW_PID=
start_gateway --max-queue-bytes "$PLAY_QUEUE_BYTES"

EXPECT=$((REC_IMG + REC_SMALL))
timeout "$LIMIT" python3 "$PY" sub "$TCP" "$EXPECT" $((DURATION + 30)) "$WORK/arrivals" \
    "$IMG:sensor_msgs/msg/Image" "$SMALL:std_msgs/msg/String" >"$WORK/sub.json" 2>"$WORK/sub.err" &
SUB=$!
PIDS=("$SUB")
for _ in $(seq 100); do
    [[ -e $WORK/arrivals.ready ]] && break
    sleep 0.05
done
sleep 0.5
PLAY_CPU0=$(cpu "$GW_PID")
TP0=$(date +%s.%N)
set +e
"$GATEWAY" bag play --url "ws://$WS/" --rate 1 "$BAG" \
    >"$WORK/play.out" 2>"$WORK/play.err" &
PLAY=$!
PIDS=("$SUB" "$PLAY")
PLAY_CPU_P=0
while kill -0 "$PLAY" 2>/dev/null; do
    PLAY_CPU_P=$(cpu "$PLAY")
    if (($(date +%s) - ${TP0%.*} > LIMIT)); then
        note "play still running after ${LIMIT}s: stopped"
        kill "$PLAY"
    fi
    sleep 0.5
done
wait "$PLAY"
PLAY_RC=$?
set -e
TP1=$(date +%s.%N)
PLAY_GW=$(awk -v a="$PLAY_CPU0" -v b="$(cpu "$GW_PID")" -v s0="$TP0" -v s1="$TP1" -v hz="$HZ" \
    'BEGIN { printf "%.0f", (b - a) / hz / (s1 - s0) * 100 }')
PLAY_CPU=$(awk -v b="$PLAY_CPU_P" -v s0="$TP0" -v s1="$TP1" -v hz="$HZ" \
    'BEGIN { printf "%.0f", b / hz / (s1 - s0) * 100 }')
wait "$SUB" || true
PIDS=()
RECEIVED=$(sed -n 's/.*"received": \([0-9]*\).*/\1/p' "$WORK/sub.json")
MCAPS=$(find "$BAG" -name '*.mcap' | sort | paste -sd,)
TIMING=$(python3 "$PY" timing "$MCAPS" "$WORK/arrivals" 1)
j() { python3 -c "import json,sys; d=json.loads(sys.argv[1]); print(round(eval(sys.argv[2]), 2))" "$TIMING" "$1"; }

OK=1
[[ $REC_IMG == "$SENT_IMG" && $REC_SMALL == "$SENT_SMALL" && ${DROPS:-0} == 0 ]] || OK=0
[[ $PLAY_RC == 0 && ${RECEIVED:-0} == "$EXPECT" ]] || OK=0

{
    echo "bag-perf.sh, $(date -u +%Y-%m-%dT%H:%M:%SZ), DURATION=$DURATION, $(nproc) cores, load before $(cut -d' ' -f1-3 /proc/loadavg)"
    echo
    echo "| measure | value |"
    echo "|---|---|"
    echo "| $IMG (1280x720 rgb8 @ $IMG_RATE/s) recorded / published | $REC_IMG / $SENT_IMG |"
    echo "| $SMALL (String @ $SMALL_RATE/s) recorded / published | $REC_SMALL / $SENT_SMALL |"
    echo "| gateway drops (rosgate.dropped) | ${DROPS:-n/a} |"
    echo "| recorder CPU (% of a core) | $REC_CPU |"
    echo "| gateway CPU while recording (% of a core) | $GW_CPU |"
    echo "| publishers CPU (Python, % of a core) | $PUB_CPU |"
    echo "| bag written, mean over ${SECS}s (MB/s) | $MBS |"
    echo "| bag written, peak second (MB/s) | $PEAK_MBS |"
    echo "| dd 1 GiB direct on the same filesystem (MB/s) | ${DD_MBS:-n/a} |"
    echo "| play --rate 1: messages delivered / recorded | ${RECEIVED:-0} / $EXPECT (exit $PLAY_RC) |"
    echo "| play: timing error p50 / p99 / max (ms) | $(j 'd["abs_p50_us"]/1000') / $(j 'd["abs_p99_us"]/1000') / $(j 'd["abs_max_us"]/1000') |"
    echo "| play: $IMG gap error p50 / p99 (ms) | $(j "d['gap']['$IMG']['p50_us']/1000") / $(j "d['gap']['$IMG']['p99_us']/1000") |"
    echo "| play: $SMALL gap error p50 / p99 (ms) | $(j "d['gap']['$SMALL']['p50_us']/1000") / $(j "d['gap']['$SMALL']['p99_us']/1000") |"
    echo "| play: player CPU / gateway CPU (% of a core) | $PLAY_CPU / $PLAY_GW |"
} | tee "$OUT"
echo "timing: $TIMING" >&2
[[ $OK == 1 ]]
