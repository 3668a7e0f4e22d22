#!/usr/bin/env bash
# "Across gateways, how does it compare?" (issue 30): two rosgate gateways
# federated over Zenoh against a two-node NATS cluster, same split, same
# rosgate-load scenarios, interleaved, median of REPS runs per cell, as a
# markdown table (OUT). scripts/compare.sh runs it after its own table
# (FEDERATION=1, the default) and appends the table; it also runs alone.
#
# The split: publishers, service providers and action servers on node A
# (`--source-addr`), subscribers and callers on node B (`--addr`), so every
# message and call crosses the link between the two.
#   rosgate: A `--zenoh-listen tcp/127.0.0.1:P`, B `--zenoh-connect` to it
#            (peer mode, the default), no WebSocket or Foxglove listeners;
#   NATS:    two `nats-server` with `-cluster`/`-routes` to each other.
# Both servers of a pair run on core 0 and the tool on core 1 (when taskset
# and two cores exist). Every pair is started afresh for every run and
# given SETTLE seconds for interest and providers to cross
# (`rosgate-load --settle`).
#
# Environment:
#   DURATION=5  measured seconds per run     REPS=3   repetitions
#   WARMUP=0.5  unmeasured lead-in           SETTLE=2 seconds after setup
#   SKIP_BUILD=1  use the existing target/release binaries (rosgate must
#               have been built with `--features zenoh`)
#   GATEWAY, LOAD  the binaries [target/release/rosgate, rosgate-load]
#   OUT=target/compare-federation.md
#   RESULTS=target/compare-federation-results.jsonl
#
# Bounded: about REPS x 10 x (DURATION + WARMUP + SETTLE + 6) seconds, about
# 7 minutes with the defaults. Exit status 0 when every run was clean
# (targets missed are reported, not failed), 1 otherwise.

set -euo pipefail

cd "$(dirname "$0")/.."

DURATION=${DURATION:-5}
REPS=${REPS:-3}
WARMUP=${WARMUP:-0.5}
SETTLE=${SETTLE:-2}
OUT=${OUT:-target/compare-federation.md}
RESULTS=${RESULTS:-target/compare-federation-results.jsonl}

note() { echo "compare-federation.sh: $*" >&2; }

for tool in jq nats-server; do
    if ! command -v "$tool" >/dev/null; then
        note "$tool is needed (apt-get install -y $tool)"
        exit 1
    fi
done

if [[ -z ${SKIP_BUILD:-} ]]; then
    cargo build --release --quiet -p rosgate -p rosgate-load --features rosgate/zenoh
fi
GATEWAY=${GATEWAY:-target/release/rosgate}
LOAD=${LOAD:-target/release/rosgate-load}
if ! "$GATEWAY" --help | grep -q -- '--zenoh-listen'; then
    note "$GATEWAY has no federation: build it with --features zenoh"
    exit 1
fi

# shellcheck source=scripts/bench-env.sh
source scripts/bench-env.sh
bench_env compare-federation.sh 1024

TMP=$(mktemp -d -t rosgate-compare-fed.XXXXXX)
PIDS=()
stop_all() {
    local p
    for p in "${PIDS[@]}"; do
        kill "$p" 2>/dev/null || true
    done
    for p in "${PIDS[@]}"; do
        wait "$p" 2>/dev/null || true
    done
    PIDS=()
}
cleanup() {
    stop_all
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A free loopback port (bound by Python, then released).
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# wait_log FILE SED-EXPR: prints what the expression extracts once FILE
# has it (within 10 s).
wait_log() {
    local a=
    for _ in $(seq 200); do
        a=$(sed -n "$2" "$1" 2>/dev/null | head -n 1)
        [[ -n $a ]] && break
        sleep 0.05
    done
    echo "$a"
}

# Sets SRC, DST (the nodes' client addresses), SRC_WS, DST_WS (their
# WebSocket addresses) and SRV_PID (node B's).
start_rosgate() {
    local z
    z=$(free_port)
    local args=(--listen 127.0.0.1:0 --ws-listen 127.0.0.1:0 --foxglove-listen off --log-level warn)
    "${PIN_SRV[@]}" "$GATEWAY" "${args[@]}" --zenoh-listen "tcp/127.0.0.1:$z" 2>"$TMP/a.log" &
    PIDS+=($!)
    "${PIN_SRV[@]}" "$GATEWAY" "${args[@]}" --zenoh-connect "tcp/127.0.0.1:$z" 2>"$TMP/b.log" &
    PIDS+=($!)
    SRV_PID=$!
    local expr='s/.*listening on \([0-9.]*:[0-9]*\).*/\1/p'
    SRC=$(wait_log "$TMP/a.log" "$expr")
    DST=$(wait_log "$TMP/b.log" "$expr")
    local ws='s/.*websocket listening on ws:\/\/\([0-9.]*:[0-9]*\).*/\1/p'
    SRC_WS=$(wait_log "$TMP/a.log" "$ws")
    DST_WS=$(wait_log "$TMP/b.log" "$ws")
    [[ -n $SRC && -n $DST && -n $SRC_WS && -n $DST_WS ]]
}

# nats_conf CLIENT WS ROUTE PEER-ROUTE: a node's configuration (the flags
# have no WebSocket listener).
nats_conf() {
    printf 'listen: "127.0.0.1:%s"\ncluster {\n  name: rosgate-compare\n  listen: "127.0.0.1:%s"\n  routes: ["nats://127.0.0.1:%s"]\n}\nwebsocket {\n  listen: "127.0.0.1:%s"\n  no_tls: true\n}\n' \
        "$1" "$3" "$4" "$2"
}

start_nats() {
    local ca cb ra rb wa wb
    ca=$(free_port) cb=$(free_port) ra=$(free_port) rb=$(free_port) wa=$(free_port) wb=$(free_port)
    nats_conf "$ca" "$wa" "$ra" "$rb" >"$TMP/na.conf"
    nats_conf "$cb" "$wb" "$rb" "$ra" >"$TMP/nb.conf"
    "${PIN_SRV[@]}" nats-server -c "$TMP/na.conf" >"$TMP/na.log" 2>&1 &
    PIDS+=($!)
    "${PIN_SRV[@]}" nats-server -c "$TMP/nb.conf" >"$TMP/nb.log" 2>&1 &
    PIDS+=($!)
    SRV_PID=$!
    # The route is up when both log it.
    local a b
    a=$(wait_log "$TMP/na.log" 's/.*\(Route connection created\).*/\1/p')
    b=$(wait_log "$TMP/nb.log" 's/.*\(Route connection created\).*/\1/p')
    SRC=127.0.0.1:$ca DST=127.0.0.1:$cb SRC_WS=127.0.0.1:$wa DST_WS=127.0.0.1:$wb
    [[ -n $a && -n $b ]]
}

# row | rosgate-load arguments | ws: over WebSocket (rosbridge's for
# rosgate, NATS's own for the cluster)
ROWS=(
    "fed-fanout-1x16|--scenario fanout --subs 16 --size 64|"
    "fed-calls-32|--scenario calls --callers 32 --inflight 1|"
    "fed-latency-1x1|--scenario latency --rate 5000 --subs 1|"
    "fed-fanout-1x16-ws|--scenario fanout --subs 16 --size 64|ws"
    "fed-calls-32-ws|--scenario calls --callers 32 --inflight 1|ws"
)
SYSTEMS=(rosgate nats)
LIMIT=$(awk -v d="$DURATION" -v w="$WARMUP" -v s="$SETTLE" 'BEGIN { printf "%d", d + w + s + 40 }')
mkdir -p "$(dirname "$RESULTS")" "$(dirname "$OUT")"
: >"$RESULTS"
FAILED=0
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
STARTED=$(date -u +%Y-%m-%dT%H:%M:%SZ)
T0=$SECONDS

note "${DURATION}s x ${REPS} reps; load average $LOAD_BEFORE"
for rep in $(seq "$REPS"); do
    for row in "${ROWS[@]}"; do
        IFS='|' read -r name args over <<<"$row"
        for sys in "${SYSTEMS[@]}"; do
            stop_all
            if ! "start_$sys"; then
                note "$sys pair did not start: $(tail -n 3 "$TMP"/*.log | tr '\n' ' ')"
                echo "{\"ok\":false,\"row\":\"$name\",\"server\":\"$sys\",\"rep\":$rep,\"rc\":3}" >>"$RESULTS"
                FAILED=1
                continue
            fi
            transport=$sys dst=$DST src=$SRC
            if [[ $over == ws ]]; then
                transport=ws dst=$DST_WS src=$SRC_WS
                [[ $sys == nats ]] && transport=nats-ws
            fi
            set +e
            # shellcheck disable=SC2086 # args is a word list by design
            out=$(timeout --kill-after=5 "$LIMIT" "${PIN_LOAD[@]}" "$LOAD" --transport "$transport" \
                --addr "$dst" --source-addr "$src" --server-pid "$SRV_PID" --settle "$SETTLE" \
                --duration "$DURATION" --warmup "$WARMUP" $args 2>"$TMP/stderr")
            rc=$?
            set -e
            json=$(grep '^RESULT ' <<<"$out" | sed 's/^RESULT //' | head -n 1 || true)
            [[ -z $json ]] && json='{"ok":false}'
            jq -c --arg row "$name" --arg srv "$sys" --argjson rep "$rep" --argjson rc "$rc" \
                '. + {row: $row, server: $srv, rep: $rep, rc: $rc}' <<<"$json" >>"$RESULTS"
            human=$(grep -v '^RESULT ' <<<"$out" || true)
            [[ -z $human ]] && human=$(tail -n 2 "$TMP/stderr" | tr '\n' ' ')
            printf '%-2s %-16s %-8s rc=%-3s %s\n' "$rep" "$name" "$sys" "$rc" "$human" >&2
            [[ $rc -ne 0 ]] && FAILED=1
        done
    done
done
stop_all
ELAPSED=$((SECONDS - T0))

median() { median_of "$RESULTS" "$@"; }
# spread ROW SERVER EXPR: "min-max" over the clean runs.
spread() {
    jq -r --arg row "$1" --arg srv "$2" \
        "select(.row == \$row and .server == \$srv and .ok == true) | ($3) // empty" "$RESULTS" |
        sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { if (NR) print lo, hi }'
}
other() { other_of "$RESULTS" "$@"; }

# cellof KIND MEDIAN ROW SERVER EXPR: "median (min-max)".
cellof() {
    local lo hi
    read -r lo hi <<<"$(spread "$3" "$4" "$5")"
    if [[ -z $2 ]]; then
        echo FAIL
    elif [[ $lo == "$hi" ]]; then
        fmt "$1" "$2"
    else
        echo "$(fmt "$1" "$2") ($(fmt "$1" "$lo")-$(fmt "$1" "$hi"))"
    fi
}

TABLE=()
# line LABEL ROW KIND EXPR TARGET-RATIO HIGHER-IS-BETTER
line() {
    local r n ratio res
    r=$(median "$2" rosgate "$4")
    n=$(median "$2" nats "$4")
    ratio=n/a res=n/a
    if [[ -n $r && -n $n ]]; then
        ratio=$(awk -v a="$r" -v b="$n" 'BEGIN { if (b > 0) printf "%.2f", a / b }')
        if [[ $6 == up ]]; then
            res=$(awk -v x="$ratio" -v t="$5" 'BEGIN { print (x >= t) ? "PASS" : "MISS" }')
        else
            res=$(awk -v x="$ratio" -v t="$5" 'BEGIN { print (x <= t) ? "PASS" : "MISS" }')
        fi
    fi
    local target
    if [[ $6 == up ]]; then target="≥ ${5}x"; else target="≤ ${5}x"; fi
    TABLE+=("| $1 | $(cellof "$3" "$r" "$2" rosgate "$4") | $(cellof "$3" "$n" "$2" nats "$4") | ${ratio}x | $target | $res | $(other "$2") |")
}
line "1->16 64 B across, delivered msg/s" fed-fanout-1x16 rate '.msgs_per_s' 2 up
line "calls across, 32 callers x1, calls/s" fed-calls-32 rate '.msgs_per_s' 2 up
line "calls across, 32 callers x1, p50" fed-calls-32 us '.latency_us.p50' 0.5 down
line "latency 1->1 @5k/s across, p50" fed-latency-1x1 us '.latency_us.p50' 0.5 down
line "latency 1->1 @5k/s across, p99" fed-latency-1x1 us '.latency_us.p99' 1 down
line "WebSocket: 1->16 64 B across, delivered msg/s" fed-fanout-1x16-ws rate '.msgs_per_s' 2 up
line "WebSocket: calls across, 32 callers x1, calls/s" fed-calls-32-ws rate '.msgs_per_s' 2 up

{
    echo "## Across two gateways: rosgate federation vs a NATS cluster"
    echo
    echo "- $STARTED, $(nproc) cores, kernel $(uname -r); load average before: $LOAD_BEFORE; after: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "- both servers of a pair on core 0, rosgate-load on core 1 (${PIN_SRV[*]:-unpinned} / ${PIN_LOAD[*]:-unpinned}); ${DURATION}s measured per run; median of ${REPS} (spread min-max in parentheses); ${ELAPSED}s total"
    echo "- rosgate $(git rev-parse --short HEAD 2>/dev/null || echo '?'): two gateways, Zenoh peer mode over loopback TCP; $(nats-server --version): two nodes, one route"
    echo
    echo "| metric | rosgate, 2 gateways | NATS, 2-node cluster | rosgate/NATS | target | result | other CPU |"
    echo "|---|---:|---:|---:|---|---|---:|"
    printf '%s\n' "${TABLE[@]}"
    echo
    echo "WebSocket rows: every client over WebSocket (rosgate-load ws: rosbridge v2 JSON; nats-ws: NATS's own)."
    echo "Publishers and providers on one node, subscribers and callers on the other; every delivery"
    echo "and answer verified by rosgate-load. Every run: $RESULTS."
} >"$OUT.tmp"
mv "$OUT.tmp" "$OUT"
cat "$OUT"
exit "$FAILED"
