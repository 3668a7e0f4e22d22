#!/usr/bin/env bash
# Load-test rosgate on this machine: build, start a gateway on a free
# loopback port, run the default scenario set with rosgate-load, print a
# summary, stop the gateway. Bounded: about 12 x (DURATION + 2) seconds.
#
# The gateway is pinned to core 0 and the tool to core 1 (when taskset and
# two cores exist), so each result line's "cpu tool / server" says which
# side was saturated; "other" is everything else on the host.
#
# Environment:
#   DURATION=5        measured seconds per scenario
#   WARMUP=0.5        unmeasured lead-in per scenario
#   IDLE_CONNS=10000  connections for the idle scenario
#   RESULTS=target/load-results.jsonl   RESULT objects, one per line
#   SKIP_BUILD=1      use the existing target/release binaries
#   SCENARIOS="..."   only the named rows (e.g. "fanout-1x16 calls-32")
#
# Exit status: 0 when every scenario ran clean, 1 otherwise.

set -euo pipefail

cd "$(dirname "$0")/.."

DURATION=${DURATION:-5}
WARMUP=${WARMUP:-0.5}
IDLE_CONNS=${IDLE_CONNS:-10000}
RESULTS=${RESULTS:-target/load-results.jsonl}
SCENARIOS=${SCENARIOS:-}

if [[ -z ${SKIP_BUILD:-} ]]; then
    cargo build --release --quiet -p rosgate -p rosgate-load
fi
GATEWAY=target/release/rosgate
LOAD=target/release/rosgate-load

# The idle scenario holds IDLE_CONNS sockets in the tool and as many in the
# gateway; both raise their soft limit to the hard one themselves, this
# covers the shell's children too.
# shellcheck source=scripts/bench-env.sh
source scripts/bench-env.sh
bench_env load.sh $((IDLE_CONNS + 256))

GW_LOG=$(mktemp -t rosgate-load-gw.XXXXXX)
GW_PID=
cleanup() {
    if [[ -n $GW_PID ]] && kill -0 "$GW_PID" 2>/dev/null; then
        kill "$GW_PID" 2>/dev/null || true
        wait "$GW_PID" 2>/dev/null || true
    fi
    rm -f "$GW_LOG"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Port 0: the kernel picks a free port and the gateway prints it, so there
# is no window in which another process can take a port we probed.
GW_ARGS=(--listen 127.0.0.1:0 --max-connections $((IDLE_CONNS + 64)) --log-level warn)
# The WebSocket listener (fixed port 9090 by default) is not under test and
# would collide with any other gateway running on this host.
if "$GATEWAY" --help 2>/dev/null | grep -q -- '--ws-listen'; then
    GW_ARGS+=(--ws-listen off)
fi
"${PIN_SRV[@]}" "$GATEWAY" "${GW_ARGS[@]}" 2>"$GW_LOG" &
GW_PID=$!
ADDR=
for _ in $(seq 100); do
    ADDR=$(sed -n 's/.*listening on \([0-9.]*:[0-9]*\).*/\1/p' "$GW_LOG" | head -n 1)
    [[ -n $ADDR ]] && break
    kill -0 "$GW_PID" 2>/dev/null || break
    sleep 0.05
done
if [[ -z $ADDR ]]; then
    echo "load.sh: gateway did not start:" >&2
    cat "$GW_LOG" >&2
    exit 1
fi
echo "gateway pid $GW_PID on $ADDR (${PIN_SRV[*]:-unpinned}); tool ${PIN_LOAD[*]:-unpinned}; ${DURATION}s per scenario"

# name | rosgate-load arguments. Idle runs first, on a fresh gateway:
# later, its allocator reuses memory freed by earlier scenarios and the
# RSS delta per connection would read low.
ROWS=(
    "idle-${IDLE_CONNS}|--scenario idle --conns ${IDLE_CONNS}"
    "fanout-1x1|--scenario fanout --subs 1 --size 64"
    "fanout-1x16|--scenario fanout --subs 16 --size 64"
    "fanout-1x256|--scenario fanout --subs 256 --size 64"
    "fanout-1x16-1k|--scenario fanout --subs 16 --size 1024"
    "fanin-16x1|--scenario fanin --pubs 16 --size 64"
    "calls-32|--scenario calls --callers 32"
    "goals-32|--scenario goals --callers 32"
    "latency-1x1|--scenario latency --rate 20000 --subs 1"
    "latency-1x16|--scenario latency --rate 20000 --subs 16"
    "large-1m|--scenario large --size 1048576"
)

mkdir -p "$(dirname "$RESULTS")"
: >"$RESULTS"
SUMMARY=()
FAILED=0
# Setup (up to 10000 connects), warm-up, drain and slack around DURATION.
LIMIT=$(awk -v d="$DURATION" -v w="$WARMUP" 'BEGIN { printf "%d", d + w + 40 }')

for row in "${ROWS[@]}"; do
    name=${row%%|*}
    args=${row#*|}
    if [[ -n $SCENARIOS && " $SCENARIOS " != *" $name "* ]]; then
        continue
    fi
    set +e
    # shellcheck disable=SC2086 # args is a word list by design
    out=$(timeout --kill-after=5 "$LIMIT" "${PIN_LOAD[@]}" "$LOAD" --addr "$ADDR" \
        --server-pid "$GW_PID" --duration "$DURATION" --warmup "$WARMUP" $args)
    rc=$?
    set -e
    human=$(grep -v '^RESULT ' <<<"$out" || true)
    grep '^RESULT ' <<<"$out" | sed 's/^RESULT //' >>"$RESULTS" || true
    case $rc in
        0) status=ok ;;
        1) status=FAIL ;;
        124 | 137) status=TIMEOUT human="(killed after ${LIMIT}s)" ;;
        *) status="ERR($rc)" ;;
    esac
    [[ $rc -ne 0 ]] && FAILED=1
    [[ -z $human ]] && human="(no result; see messages above)"
    printf '%-16s %-8s %s\n' "$name" "$status" "$human"
    SUMMARY+=("$(printf '%-16s %-8s %s' "$name" "$status" "$human")")
    if ! kill -0 "$GW_PID" 2>/dev/null; then
        echo "load.sh: gateway exited during $name; its log:" >&2
        tail -n 20 "$GW_LOG" >&2
        GW_PID=
        FAILED=1
        break
    fi
done

echo
echo "== rosgate load summary ($(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) cores, ${DURATION}s each) =="
printf '%-16s %-8s %s\n' scenario status result
printf '%s\n' "${SUMMARY[@]}"
echo "RESULT lines: $RESULTS"
if grep -qiE 'warn|error' "$GW_LOG"; then
    echo "gateway warnings/errors (last 10):"
    grep -iE 'warn|error' "$GW_LOG" | tail -n 10
fi
exit "$FAILED"
