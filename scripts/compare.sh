#!/usr/bin/env bash
# "How does it compare?": the same rosgate-load scenarios against rosgate,
# redis-server and nats-server, interleaved, with the median of REPS runs
# per cell, printed as a markdown table with ratios and written to
# target/compare.md. Anyone can rerun it; the numbers are only as good as
# the machine is quiet (the header records the load average, and the last
# column the CPU other processes used during the runs).
#
# Each server runs pinned to core 0 and the tool to core 1 (when taskset
# and two cores exist), on a loopback port of its own. Every server is
# restarted at the start of each repetition, so the idle row (run first)
# measures a fresh process. Within a repetition each scenario runs against
# rosgate, redis, nats in turn, so slow drifts in host load hit all three.
# Redis has no request/reply: its calls cell is n/a. The large-message row
# is also run against `rosgate-load --raw-source` (one loopback TCP stream
# from a sender on core 0 to the tool on core 1, no server in between) as
# the baseline for its ratio.
#
# Peers are Debian packages: a missing one is installed with apt-get, and
# skipped with a note when that fails.
#
# Issue 30 (load tool threads, WebSocket rows, ceiling relay): every run
# but idle gets `--threads $THREADS`. The fan-out 1->16 64 B row is also
# run against the ceiling relay (`rosgate-load --raw-source --raw-format
# rosgate --subs 16` on the server's core: the lines a gateway sends its
# subscribers, encoded once per message and written to 16 streams, no
# publisher, no parsing, no routing), so the table can say how close
# rosgate comes to what the tool can receive at all (target >= 0.8x). The
# WebSocket rows run fan-in 16->1 and fan-out 1->16 (64 B) against
# rosgate's rosbridge WebSocket (`--transport ws`) and nats-server's
# WebSocket listener (`--transport nats-ws`); Redis has none.
#
# Environment:
#   DURATION=5        measured seconds per run (idle holds 1 s: it measures RSS)
#   REPS=3            repetitions; each cell is the median of the clean runs
#   WARMUP=0.5        unmeasured lead-in per run
#   IDLE_CONNS=10000  connections in the idle row
#   SERVERS="rosgate redis nats"   which servers to run
#   SKIP_BUILD=1      use the existing target/release binaries
#   OUT=target/compare.md
#   RESULTS=target/compare-results.jsonl   every RESULT, tagged with
#                     row/server/rep/rc
#   FEDERATION=1      then run scripts/compare-federation.sh (issue 30: two
#                     gateways over Zenoh vs a two-node NATS cluster, same
#                     DURATION and REPS) and append its table; 0 skips it
#   THREADS=1         rosgate-load worker threads (--threads). With more
#                     cores than THREADS, the tool runs on cores 1..THREADS
#                     (--pin-cpus); on 2 cores every thread shares core 1,
#                     which measured no faster than one (docs/performance.md,
#                     "Load tool threads and WebSocket rows")
#   LOAD_CPUS=        CPUs for the tool's threads instead (taskset and
#                     --pin-cpus), e.g. LOAD_CPUS=0,1 THREADS=2 on 2 cores:
#                     the tool then shares the servers' core 0
#   WS=1              the WebSocket rows; 0 skips them
#   IMAGES=1          then run scripts/images.sh (issue 25: sensor_msgs/Image
#                     to WebSocket subscribers in JSON/cbor/cbor-raw, rosgate
#                     only, one repetition) and append its table; 0 skips it
#
# Bounded: about REPS x (32 x (DURATION + 1.5) + 30) seconds, which is
# about 11 minutes with the defaults (27 runs per repetition before issue
# 30, plus 1 ceiling-relay and 4 WebSocket runs; REPS=1 DURATION=3 took
# 127 s on 2 cores), plus about 13 x (DURATION + 2) seconds for the images
# section and REPS x 10 x (DURATION + 8.5) for the federation section
# (about 4 minutes). Exit status 0 when every run was clean (targets
# missed are reported, not failed), 1 otherwise.

set -euo pipefail

cd "$(dirname "$0")/.."

DURATION=${DURATION:-5}
REPS=${REPS:-3}
WARMUP=${WARMUP:-0.5}
IDLE_CONNS=${IDLE_CONNS:-10000}
IMAGES=${IMAGES:-1}
FEDERATION=${FEDERATION:-1}
# ---- issue 30: load tool threads, WebSocket rows (see the header)
THREADS=${THREADS:-1}
LOAD_CPUS=${LOAD_CPUS:-}
WS=${WS:-1}
# ---- end issue 30
SERVERS=${SERVERS:-rosgate redis nats}
OUT=${OUT:-target/compare.md}
RESULTS=${RESULTS:-target/compare-results.jsonl}

note() { echo "compare.sh: $*" >&2; }

# ---------------------------------------------------------------- tools

as_root() {
    if ((EUID == 0)); then
        "$@"
    elif command -v sudo >/dev/null; then
        sudo -n "$@"
    else
        return 1
    fi
}

APT_UPDATED=
apt_install() {
    command -v apt-get >/dev/null || return 1
    if [[ -z $APT_UPDATED ]]; then
        as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null 2>&1 || true
        APT_UPDATED=1
    fi
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null 2>&1
}

if ! command -v jq >/dev/null; then
    apt_install jq || {
        note "jq is needed to read the results and could not be installed"
        exit 1
    }
fi

# Which binary each peer needs; a peer that is not there is installed, or
# dropped from SERVERS with a note.
declare -A BIN=([redis]=redis-server [nats]=nats-server)
NOTES=()
ACTIVE=()
for s in $SERVERS; do
    case $s in
        rosgate) ACTIVE+=(rosgate) ;;
        redis | nats)
            if ! command -v "${BIN[$s]}" >/dev/null; then
                note "${BIN[$s]} missing; apt-get install -y ${BIN[$s]}"
                apt_install "${BIN[$s]}" || true
            fi
            if command -v "${BIN[$s]}" >/dev/null; then
                ACTIVE+=("$s")
            else
                NOTES+=("$s skipped: ${BIN[$s]} is not installed and could not be installed")
                note "${NOTES[-1]}"
            fi
            ;;
        *)
            note "unknown server $s (rosgate|redis|nats)"
            exit 2
            ;;
    esac
done

if [[ -z ${SKIP_BUILD:-} ]]; then
    # Zenoh for the federation section; federation off (no --zenoh-*) the
    # single-gateway rows run the same code (docs/performance.md,
    # "Federation (issue 16)": one boolean per delivery).
    features=()
    [[ $FEDERATION == 1 ]] && features=(--features rosgate/zenoh)
    cargo build --release --quiet -p rosgate -p rosgate-load "${features[@]}"
fi
GATEWAY=target/release/rosgate
LOAD=target/release/rosgate-load

# shellcheck source=scripts/bench-env.sh
source scripts/bench-env.sh
bench_env compare.sh $((IDLE_CONNS + 256))

# ---- issue 30: the tool's threads and where they run
THREAD_ARGS=(--threads "$THREADS")
if [[ -n $LOAD_CPUS ]]; then
    PIN_LOAD=(taskset -c "$LOAD_CPUS")
    THREAD_ARGS+=(--pin-cpus "$LOAD_CPUS")
elif ((THREADS > 1)) && ((${#PIN_LOAD[@]} > 0)) && (($(nproc) > THREADS)); then
    PIN_LOAD=(taskset -c "1-$THREADS")
    THREAD_ARGS+=(--pin-cpus "1-$THREADS")
fi
# ---- end issue 30

# -------------------------------------------------------------- servers

declare -A PID=() ADDR=() LOG=()
# Issue 30: each server's WebSocket address and the transport that speaks
# to it (redis has no WebSocket).
declare -A WS_ADDR=()
declare -A WS_TRANSPORT=([rosgate]=ws [nats]=nats-ws)
TMP=$(mktemp -d -t rosgate-compare.XXXXXX)

stop_server() {
    local s=$1 pid=${PID[$1]:-}
    if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    fi
    PID[$s]=
}

cleanup() {
    local s
    for s in "${!PID[@]}"; do
        stop_server "$s"
    done
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Waits until the log of server $1 matches the sed expression $2 (which
# prints the address), or the server dies; sets ADDR.
await_addr() {
    local s=$1 expr=$2 a=
    for _ in $(seq 200); do
        a=$(sed -n "$expr" "${LOG[$s]}" | head -n 1)
        [[ -n $a ]] && break
        kill -0 "${PID[$s]}" 2>/dev/null || break
        sleep 0.05
    done
    ADDR[$s]=$a
    [[ -n $a ]]
}

start_rosgate() {
    local args=(--listen 127.0.0.1:0 --max-connections $((IDLE_CONNS + 64)) --log-level warn)
    # Issue 30: the rosbridge WebSocket on a port of its own for the WS
    # rows; the Foxglove listener (a fixed port by default) stays off.
    if "$GATEWAY" --help 2>/dev/null | grep -q -- '--ws-listen'; then
        if [[ $WS == 1 ]]; then
            args+=(--ws-listen 127.0.0.1:0)
        else
            args+=(--ws-listen off)
        fi
    fi
    if "$GATEWAY" --help 2>/dev/null | grep -q -- '--foxglove-listen'; then
        args+=(--foxglove-listen off)
    fi
    "${PIN_SRV[@]}" "$GATEWAY" "${args[@]}" 2>"${LOG[rosgate]}" &
    PID[rosgate]=$!
    await_addr rosgate 's/.*listening on \([0-9.]*:[0-9]*\).*/\1/p' || return 1
    WS_ADDR[rosgate]=$(sed -n 's/.*websocket listening on ws:\/\/\([0-9.]*:[0-9]*\).*/\1/p' "${LOG[rosgate]}" | head -n 1)
}

start_nats() {
    # -p -1: the server picks a free port and logs it.
    # Issue 30: its WebSocket listener for the WS rows (port -1: any).
    local conf=()
    if [[ $WS == 1 ]]; then
        printf 'websocket {\n  listen: "127.0.0.1:-1"\n  no_tls: true\n}\n' >"$TMP/nats.conf"
        conf=(-c "$TMP/nats.conf")
    fi
    "${PIN_SRV[@]}" nats-server -a 127.0.0.1 -p -1 "${conf[@]}" >"${LOG[nats]}" 2>&1 &
    PID[nats]=$!
    await_addr nats 's/.*Listening for client connections on \([0-9.]*:[0-9]*\).*/\1/p' || return 1
    WS_ADDR[nats]=$(sed -n 's/.*Listening for websocket clients on ws:\/\/\([0-9.]*:[0-9]*\).*/\1/p' "${LOG[nats]}" | head -n 1)
}

start_raw() {
    "${PIN_SRV[@]}" "$LOAD" --raw-source --addr 127.0.0.1:0 --size 1048576 2>"${LOG[raw]}" &
    PID[raw]=$!
    await_addr raw 's/.*listening on \([0-9.]*:[0-9]*\).*/\1/p'
}

# Issue 30: the ceiling relay of the fan-out 1->16 64 B row (see the
# header and tools/rosgate-load/src/raw.rs).
start_relay() {
    "${PIN_SRV[@]}" "$LOAD" --raw-source --raw-format rosgate --subs 16 --size 64 \
        --addr 127.0.0.1:0 2>"${LOG[relay]}" &
    PID[relay]=$!
    await_addr relay 's/.*listening on \([0-9.]*:[0-9]*\).*/\1/p'
}

start_redis() {
    # Redis cannot report a kernel-chosen port: try ports below the
    # ephemeral range (the tool's own connections never take them) until
    # one binds.
    local port
    for _ in 1 2 3 4 5 6 7 8; do
        port=$((20000 + RANDOM % 12000))
        "${PIN_SRV[@]}" redis-server --port "$port" --bind 127.0.0.1 --protected-mode no \
            --save '' --appendonly no --daemonize no --logfile '' \
            --maxclients $((IDLE_CONNS + 64)) \
            --client-output-buffer-limit 'pubsub 0 0 0' >"${LOG[redis]}" 2>&1 &
        PID[redis]=$!
        if await_addr redis "s/.*Ready to accept connections.*/127.0.0.1:$port/p"; then
            return 0
        fi
        stop_server redis
    done
    return 1
}

# (Re)starts server $1; on failure drops it from ACTIVE with a note.
restart() {
    local s=$1
    stop_server "$s"
    LOG[$s]=$TMP/$s.log
    if ! "start_$s"; then
        NOTES+=("$s dropped: it did not start ($(tail -n 3 "${LOG[$s]}" | tr '\n' ' '))")
        note "${NOTES[-1]}"
        stop_server "$s"
        return 1
    fi
}

# ------------------------------------------------------------------ runs

# row | rosgate-load arguments | servers beyond the active ones ("raw":
# the raw-TCP baseline, large messages only; its source sends 1 MiB).
# Idle runs first, right after the (re)start: later, allocators reuse
# memory freed by the other scenarios and the RSS delta would read low.
ROWS=(
    "idle|--scenario idle --idle-subscribed --conns $IDLE_CONNS --duration 1|"
    "fanout-1x1|--scenario fanout --subs 1 --size 64|"
    "fanout-1x16|--scenario fanout --subs 16 --size 64|relay"
    "fanout-1x256|--scenario fanout --subs 256 --size 64|"
    "fanout-1x16-1k|--scenario fanout --subs 16 --size 1024|"
    "fanin-16x1|--scenario fanin --pubs 16 --size 64|"
    "calls-32|--scenario calls --callers 32 --inflight 1|"
    "latency-1x1|--scenario latency --rate 20000 --subs 1|"
    "latency-1x16|--scenario latency --rate 20000 --subs 16|"
    "large-1m|--scenario large --size 1048576|raw"
)

# ---- issue 30: row | rosgate-load arguments, over each server's WebSocket
WS_ROWS=(
    "fanin-16x1-ws|--scenario fanin --pubs 16 --size 64"
    "fanout-1x16-ws|--scenario fanout --subs 16 --size 64"
)
# ---- end issue 30

# Setup (up to IDLE_CONNS connects), warm-up, drain and slack.
LIMIT=$(awk -v d="$DURATION" -v w="$WARMUP" 'BEGIN { printf "%d", d + w + 40 }')
mkdir -p "$(dirname "$RESULTS")" "$(dirname "$OUT")"
: >"$RESULTS"
FAILED=0
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
STARTED=$(date -u +%Y-%m-%dT%H:%M:%SZ)
T0=$SECONDS

# run ROW SERVER REP ARGS...: one rosgate-load run, its RESULT appended to
# RESULTS with the row, server, repetition and exit status. ON_WS=1: over
# the server's WebSocket (issue 30).
run() {
    local row=$1 srv=$2 rep=$3 rc out human status
    shift 3
    local transport=$srv addr=${ADDR[$srv]}
    if [[ ${ON_WS:-0} == 1 ]]; then
        transport=${WS_TRANSPORT[$srv]} addr=${WS_ADDR[$srv]}
    fi
    local target=(--transport "$transport" --addr "$addr" --server-pid "${PID[$srv]}")
    # Issue 30: the tool's threads (idle is one loop by design).
    [[ " $* " == *" --scenario idle "* ]] || target+=("${THREAD_ARGS[@]}")
    # A row may set its own duration (idle).
    [[ " $* " == *" --duration "* ]] || target+=(--duration "$DURATION")
    set +e
    out=$(timeout --kill-after=5 "$LIMIT" "${PIN_LOAD[@]}" "$LOAD" "${target[@]}" \
        --warmup "$WARMUP" "$@" 2>"$TMP/stderr")
    rc=$?
    set -e
    human=$(grep -v '^RESULT ' <<<"$out" || true)
    local json
    json=$(grep '^RESULT ' <<<"$out" | sed 's/^RESULT //' | head -n 1 || true)
    [[ -z $json ]] && json='{"ok":false}'
    jq -c --arg row "$row" --arg srv "$srv" --argjson rep "$rep" --argjson rc "$rc" \
        '. + {row: $row, server: $srv, rep: $rep, rc: $rc}' <<<"$json" >>"$RESULTS"
    case $rc in
        0) status=ok ;;
        1) status=FAIL ;;
        124 | 137) status=TIMEOUT human="(killed after ${LIMIT}s)" ;;
        *) status="ERR($rc)" ;;
    esac
    if [[ -z $human ]]; then
        human="$(tail -n 2 "$TMP/stderr" | tr '\n' ' ')"
    fi
    printf '%-2s %-15s %-8s %-8s %s\n' "$rep" "$row" "$srv" "$status" "$human" >&2
    [[ $rc -ne 0 ]] && FAILED=1
    return 0
}

note "servers: ${ACTIVE[*]}; ${DURATION}s x ${REPS} reps; load average $LOAD_BEFORE"
for rep in $(seq "$REPS"); do
    LIVE=()
    for s in "${ACTIVE[@]}" raw relay; do
        restart "$s" && LIVE+=("$s")
    done
    for row in "${ROWS[@]}"; do
        IFS='|' read -r name args extra <<<"$row"
        for srv in "${LIVE[@]}"; do
            # Redis pub/sub has no request/reply.
            [[ $name == calls-* && $srv == redis ]] && continue
            [[ $srv == raw && " $extra " != *" raw "* ]] && continue
            [[ $srv == relay && " $extra " != *" relay "* ]] && continue
            if ! kill -0 "${PID[$srv]}" 2>/dev/null; then
                note "$srv exited; restarting it"
                restart "$srv" || continue
            fi
            # shellcheck disable=SC2086 # args is a word list by design
            run "$name" "$srv" "$rep" $args
        done
    done
    # ---- issue 30: the WebSocket rows
    if [[ $WS == 1 ]]; then
        for row in "${WS_ROWS[@]}"; do
            IFS='|' read -r name args <<<"$row"
            for srv in "${LIVE[@]}"; do
                [[ -n ${WS_TRANSPORT[$srv]:-} && -n ${WS_ADDR[$srv]:-} ]] || continue
                kill -0 "${PID[$srv]}" 2>/dev/null || continue
                # shellcheck disable=SC2086 # args is a word list by design
                ON_WS=1 run "$name" "$srv" "$rep" $args
            done
        done
    fi
    # ---- end issue 30
done
ELAPSED=$((SECONDS - T0))
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)

# ----------------------------------------------------------------- table

# median ROW SERVER JQ-EXPR: median over the clean runs, empty if none.
median() { median_of "$RESULTS" "$@"; }

# count ROW SERVER [FILTER]: runs (matching FILTER).
count() {
    jq -r --arg row "$1" --arg srv "$2" \
        "select(.row == \$row and .server == \$srv and (${3:-true})) | 1" "$RESULTS" | wc -l
}

# ratio A B: A / B as "1.23x", n/a when either is missing.
ratio() {
    if [[ -z $1 || -z $2 ]]; then
        echo n/a
        return 0
    fi
    awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2fx", a / b }'
}

# ge A B K: A >= K x B.
ge() { awk -v a="$1" -v b="$2" -v k="$3" 'BEGIN { exit !(a >= k * b) }'; }
gt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a > b) }'; }

# cell ROW SERVER KIND EXPR: formatted median, with "(k/n)" when not every
# run was clean, "*" when the tool was saturated in a run, FAIL/n/a.
cell() {
    local n ok v tb s
    n=$(count "$1" "$2")
    if ((n == 0)); then
        echo "n/a"
        return
    fi
    ok=$(count "$1" "$2" '.ok == true')
    v=$(median "$1" "$2" "$4")
    if [[ -z $v ]]; then
        echo "FAIL (0/$n)"
        return
    fi
    s=$(fmt "$3" "$v")
    tb=$(count "$1" "$2" '.ok == true and .bound == "tool-bound"')
    ((tb > 0)) && s="$s*"
    ((ok < n)) && s="$s ($ok/$n)"
    echo "$s"
}

# other ROW: median CPU% of other processes over the row's runs.
other() { other_of "$RESULTS" "$@"; }

TABLE=()
# line LABEL ROW KIND EXPR TARGET-TEXT VERDICT-FN
line() {
    local label=$1 row=$2 kind=$3 expr=$4 target=$5 verdict=$6
    local r d n
    r=$(median "$row" rosgate "$expr")
    d=$(median "$row" redis "$expr")
    n=$(median "$row" nats "$expr")
    local res
    res=$("$verdict" "$r" "$d" "$n")
    TABLE+=("| $label | $(cell "$row" rosgate "$kind" "$expr") | $(cell "$row" redis "$kind" "$expr") \
| $(cell "$row" nats "$kind" "$expr") | $(ratio "$r" "$d") | $(ratio "$r" "$n") | $target | $res \
| $(other "$row") |")
}

# Verdicts: PASS, MISS, or n/a when a needed number is missing.
v_redis15() { [[ -z $1 || -z $2 ]] && echo n/a && return; ge "$1" "$2" 1.5 && echo PASS || echo MISS; }
v_redis2_nats() {
    [[ -z $1 || -z $2 || -z $3 ]] && echo n/a && return
    ge "$1" "$2" 2 && gt "$1" "$3" && echo PASS || echo MISS
}
v_nats2() { [[ -z $1 || -z $3 ]] && echo n/a && return; ge "$1" "$3" 2 && echo PASS || echo MISS; }
v_below_nats() { [[ -z $1 || -z $3 ]] && echo n/a && return; gt "$3" "$1" && echo PASS || echo MISS; }
v_le_redis() { [[ -z $1 || -z $2 ]] && echo n/a && return; ge "$2" "$1" 1 && echo PASS || echo MISS; }
v_idle() { [[ -z $1 ]] && echo n/a && return; ge 1 "$1" 1 && echo PASS || echo MISS; }
RAW_MBS=$(median large-1m raw '.mb_per_s')
v_raw() { [[ -z $1 || -z $RAW_MBS ]] && echo n/a && return; ge "$1" "$RAW_MBS" 0.5 && echo PASS || echo MISS; }

RATE='.msgs_per_s'
P50='.latency_us.p50'
line "1->1 64 B, delivered msg/s" fanout-1x1 rate "$RATE" "≥ 2x redis, > nats" v_redis2_nats
line "1->16 64 B, delivered msg/s" fanout-1x16 rate "$RATE" "≥ 1.5x redis" v_redis15
line "1->256 64 B, delivered msg/s" fanout-1x256 rate "$RATE" "≥ 1.5x redis" v_redis15
line "1->16 1 KiB, delivered msg/s" fanout-1x16-1k rate "$RATE" "≥ 1.5x redis" v_redis15
line "16->1 64 B, delivered msg/s" fanin-16x1 rate "$RATE" "≥ 2x redis, > nats" v_redis2_nats
line "calls, 32 callers x1, calls/s" calls-32 rate "$RATE" "≥ 2x nats" v_nats2
line "calls, 32 callers x1, p50" calls-32 us "$P50" "< nats" v_below_nats
line "idle subscribed, ${IDLE_CONNS} conns, server RSS/conn" idle kib '(.server_rss_per_conn_bytes // empty) / 1024' \
    "≤ 1 KiB" v_idle
line "latency 1->1 @20k/s, p50" latency-1x1 us "$P50" "≤ redis" v_le_redis
line "latency 1->16 @20k/s, p50" latency-1x16 us "$P50" "≤ redis" v_le_redis
RAW_TXT="≥ 0.5x raw TCP"
if [[ -n $RAW_MBS ]]; then
    r=$(median large-1m rosgate '.mb_per_s')
    RAW_TXT="≥ 0.5x raw TCP ($(fmt mbs "$RAW_MBS")${r:+: $(ratio "$r" "$RAW_MBS")})"
fi
line "large 1 MiB 1->1, MB/s" large-1m mbs '.mb_per_s' "$RAW_TXT" v_raw

# ---- issue 30: rosgate against the ceiling relay, and the WebSocket rows
CEIL=$(median fanout-1x16 relay "$RATE")
v_ceiling() { [[ -z $1 || -z $CEIL ]] && echo n/a && return; ge "$1" "$CEIL" 0.8 && echo PASS || echo MISS; }
v_above_nats() { [[ -z $1 || -z $3 ]] && echo n/a && return; gt "$1" "$3" && echo PASS || echo MISS; }
CEIL_TXT="≥ 0.8x ceiling relay"
if [[ -n $CEIL ]]; then
    r=$(median fanout-1x16 rosgate "$RATE")
    CEIL_TXT="≥ 0.8x ceiling relay ($(cell fanout-1x16 relay rate "$RATE")${r:+: $(ratio "$r" "$CEIL")})"
fi
line "1->16 64 B vs ceiling relay, msg/s" fanout-1x16 rate "$RATE" "$CEIL_TXT" v_ceiling
if [[ $WS == 1 ]]; then
    line "WebSocket 16->1 64 B, delivered msg/s" fanin-16x1-ws rate "$RATE" "> nats" v_above_nats
    line "WebSocket 1->16 64 B, delivered msg/s" fanout-1x16-ws rate "$RATE" "> nats" v_above_nats
fi
# ---- end issue 30

{
    echo "## rosgate vs redis-server vs nats-server"
    echo
    echo "- $STARTED, $(nproc) cores ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)), kernel $(uname -r)"
    echo "- load average before: $LOAD_BEFORE; after: $LOAD_AFTER; $(uptime | sed 's/^ *//')"
    echo "- servers on core 0, rosgate-load on core 1 (${PIN_SRV[*]:-unpinned} / ${PIN_LOAD[*]:-unpinned}; ${THREAD_ARGS[*]}); loopback; ${DURATION}s measured (+${WARMUP}s warm-up) per run; median of ${REPS} interleaved repetitions; ${ELAPSED}s total"
    echo "- rosgate $("$GATEWAY" --version 2>/dev/null | awk '{print $2}') ($(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD -- src 2>/dev/null || echo ', src modified'))"
    for s in "${ACTIVE[@]}"; do
        case $s in
            redis) echo "- $(redis-server --version | cut -d' ' -f1-3) (--save '' --appendonly no --client-output-buffer-limit 'pubsub 0 0 0')" ;;
            nats) echo "- $(nats-server --version)" ;;
        esac
    done
    for n in "${NOTES[@]}"; do echo "- note: $n"; done
    echo
    echo "| metric | rosgate | redis | nats | rosgate/redis | rosgate/nats | target | result | other CPU |"
    echo "|---|---:|---:|---:|---:|---:|---|---|---:|"
    printf '%s\n' "${TABLE[@]}"
    echo
    echo "Payloads are identical for every server and every delivery is verified (sequence, integrity);"
    echo "a cell is the median of the clean runs, \"(k/n)\" when only k of n runs were clean, FAIL when none was."
    echo "\"*\": the tool was at ≥ 90% CPU in a run, so the tool, not the server, limited that number."
    echo "Redis pub/sub has no request/reply (calls n/a). Raw TCP: one loopback stream from"
    echo "\`rosgate-load --raw-source\` on core 0 to the tool on core 1, no server in between, same"
    echo "payloads and checks; a server run moves every byte over two such streams."
    echo "\"other CPU\": median CPU (% of one core) used by other processes during the row's runs;"
    echo "anything well above 0 means a shared, noisy host. Every run: $RESULTS."
    echo "Ceiling relay (issue 30): \`rosgate-load --raw-source --raw-format rosgate --subs 16\` on core 0"
    echo "writes the lines a gateway sends its 16 subscribers, each encoded once, with no publisher, parsing"
    echo "or routing; the tool checks them as in a gateway run. Its rate is what the tool can receive at all."
    echo "WebSocket rows: rosgate's rosbridge WebSocket (\`--transport ws\`) vs nats-server's (\`nats-ws\`)."
} >"$OUT.tmp"
mv "$OUT.tmp" "$OUT"

# The images section: its own gateway per run (TCP and WebSocket), so the
# servers above are stopped first.
if [[ $IMAGES == 1 ]]; then
    for s in "${!PID[@]}"; do
        stop_server "$s"
    done
    IMAGES_OUT=$(dirname "$OUT")/images.md
    rm -f "$IMAGES_OUT"
    if ! SKIP_BUILD=1 DURATION=$DURATION WARMUP=$WARMUP OUT=$IMAGES_OUT \
        RESULTS=$(dirname "$RESULTS")/images-results.jsonl scripts/images.sh >/dev/null; then
        FAILED=1
    fi
    if [[ -f $IMAGES_OUT ]]; then
        { echo; cat "$IMAGES_OUT"; } >>"$OUT"
    fi
fi
# The federation section: two gateways against a NATS cluster, each pair
# started by the script itself, so the servers above are stopped first.
if [[ $FEDERATION == 1 ]]; then
    for s in "${!PID[@]}"; do
        stop_server "$s"
    done
    FED_OUT=$(dirname "$OUT")/compare-federation.md
    rm -f "$FED_OUT"
    if ! SKIP_BUILD=1 DURATION=$DURATION WARMUP=$WARMUP REPS=$REPS OUT=$FED_OUT \
        RESULTS=$(dirname "$RESULTS")/compare-federation-results.jsonl \
        scripts/compare-federation.sh >/dev/null; then
        FAILED=1
    fi
    if [[ -f $FED_OUT ]]; then
        { echo; cat "$FED_OUT"; } >>"$OUT"
    fi
fi
echo
cat "$OUT"
exit "$FAILED"
