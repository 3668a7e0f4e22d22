#!/usr/bin/env bash
# Issue 25's image scenario: `rosgate-load --scenario images` against a
# fresh rosgate (TCP and WebSocket on loopback ports of their own), one
# run per row, printed as a markdown table and written to target/images.md.
#
# One publisher (TCP JSON lines: `data` as base64, the advertise naming
# sensor_msgs/msg/Image) sends rgb8 images open loop at RATE per second to
# 1, 8 and 32 WebSocket subscribers in JSON, `cbor`, `cbor-raw` and a mix
# of the three; then the second configuration, 1280x720 to 8 cbor-raw plus
# 8 JSON subscribers at once, whose target (no drops, p99 < 30 ms) is
# reported, not failed. The gateway is restarted for every run so that
# its CPU per delivered image is the run's own.
#
# A gateway that ignores `compression` (it sends JSON text to a subscriber
# that asked for CBOR) is found by a short probe first: that encoding's
# rows (and the mix) are skipped with a note, and the second configuration
# runs its JSON half only.
#
# Environment:
#   DURATION=5     measured seconds per run
#   WARMUP=0.5     unmeasured lead-in per run
#   RATE=30        images per second
#   SIZE=640x480   image size of the first table (640x480|1280x720)
#   SUBS="1 8 32"  subscriber counts (SUBS= with HD=1: the 1280x720 run only)
#   ENCODINGS="json cbor cbor-raw mix"
#   HD=1           run the 1280x720 8 cbor-raw + 8 JSON configuration
#   PIN=0          do not pin the gateway and the tool to cores 0 and 1
#   SKIP_BUILD=1   use the existing target/release binaries
#   ROSGATE_BIN, LOAD_BIN  other binaries (a before/after comparison)
#   OUT=target/images.md
#   RESULTS=target/images-results.jsonl
#
# Bounded: each run is killed after DURATION + WARMUP + 40 s; about
# 13 x (DURATION + 2) seconds with the defaults (under 2 minutes). Exit
# status 0 when every run that was not skipped was clean (targets missed
# are reported, not failed), 1 otherwise.

set -euo pipefail

cd "$(dirname "$0")/.."

DURATION=${DURATION:-5}
WARMUP=${WARMUP:-0.5}
RATE=${RATE:-30}
SIZE=${SIZE:-640x480}
SUBS=${SUBS-1 8 32}
ENCODINGS=${ENCODINGS-json cbor cbor-raw mix}
HD=${HD:-1}
OUT=${OUT:-target/images.md}
RESULTS=${RESULTS:-target/images-results.jsonl}

note() { echo "images.sh: $*" >&2; }

command -v jq >/dev/null || {
    note "jq is needed to read the results"
    exit 1
}

if [[ -z ${SKIP_BUILD:-} ]]; then
    cargo build --release --quiet -p rosgate -p rosgate-load
fi
GATEWAY=${ROSGATE_BIN:-target/release/rosgate}
LOAD=${LOAD_BIN:-target/release/rosgate-load}

# shellcheck source=scripts/bench-env.sh
source scripts/bench-env.sh
bench_env images.sh 256
if [[ ${PIN:-1} == 0 ]]; then
    PIN_SRV=()
    PIN_LOAD=()
fi

TMP=$(mktemp -d -t rosgate-images.XXXXXX)
GW_PID=
stop_gateway() {
    if [[ -n $GW_PID ]] && kill -0 "$GW_PID" 2>/dev/null; then
        kill "$GW_PID" 2>/dev/null || true
        wait "$GW_PID" 2>/dev/null || true
    fi
    GW_PID=
}
cleanup() {
    stop_gateway
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Starts a fresh gateway; sets GW_PID, TCP, WS.
start_gateway() {
    stop_gateway
    "${PIN_SRV[@]}" "$GATEWAY" --listen 127.0.0.1:0 --ws-listen 127.0.0.1:0 \
        --log-level warn 2>"$TMP/gw.log" &
    GW_PID=$!
    TCP= WS=
    for _ in $(seq 200); do
        TCP=$(sed -n 's/^rosgate .* listening on \(tcp:\/\/\)\{0,1\}\([0-9.]*:[0-9]*\).*/\2/p' "$TMP/gw.log" | head -n 1)
        WS=$(sed -n 's/.*websocket listening on \(ws:\/\/\)\{0,1\}\([0-9.]*:[0-9]*\).*/\2/p' "$TMP/gw.log" | head -n 1)
        [[ -n $TCP && -n $WS ]] && return 0
        kill -0 "$GW_PID" 2>/dev/null || break
        sleep 0.05
    done
    note "the gateway did not start: $(tail -n 3 "$TMP/gw.log" | tr '\n' ' ')"
    return 1
}

LIMIT=$(awk -v d="$DURATION" -v w="$WARMUP" 'BEGIN { printf "%d", d + w + 40 }')
mkdir -p "$(dirname "$RESULTS")" "$(dirname "$OUT")"
: >"$RESULTS"
FAILED=0
NOTES=()
declare -A UNSUPPORTED=()
STARTED=$(date -u +%Y-%m-%dT%H:%M:%SZ)
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
T0=$SECONDS

# run ROW ARGS...: one rosgate-load run on a fresh gateway; its RESULT goes
# to RESULTS tagged with the row and exit status.
run() {
    local row=$1 rc out json
    shift
    if ! start_gateway; then
        FAILED=1
        echo "{\"row\":\"$row\",\"ok\":false,\"rc\":3}" >>"$RESULTS"
        return 0
    fi
    set +e
    out=$(timeout --kill-after=5 "$LIMIT" "${PIN_LOAD[@]}" "$LOAD" --scenario images \
        --addr "$TCP" --ws-addr "$WS" --server-pid "$GW_PID" \
        --duration "$DURATION" --warmup "$WARMUP" --rate "$RATE" "$@" 2>"$TMP/stderr")
    rc=$?
    set -e
    stop_gateway
    json=$(grep '^RESULT ' <<<"$out" | sed 's/^RESULT //' | head -n 1 || true)
    [[ -z $json ]] && json='{"ok":false}'
    jq -c --arg row "$row" --argjson rc "$rc" '. + {row: $row, rc: $rc}' <<<"$json" >>"$RESULTS"
    printf '%-22s rc=%s %s\n' "$row" "$rc" "$(grep -v '^RESULT ' <<<"$out" | head -n 1)" >&2
    [[ $rc -ne 0 && -z $out ]] && note "$(tail -n 2 "$TMP/stderr" | tr '\n' ' ')"
    [[ $rc -ne 0 ]] && FAILED=1
    return 0
}

# probe ENC: one subscriber for a moment; a gateway that answers a
# `compression: ENC` subscribe with JSON text marks ENC unsupported.
probe() {
    local enc=$1 out
    start_gateway || return 0
    out=$(timeout --kill-after=5 30 "${PIN_LOAD[@]}" "$LOAD" --scenario images \
        --addr "$TCP" --ws-addr "$WS" --duration 0.2 --warmup 0 --drain 1 \
        --subs 1 --encodings "$enc" 2>/dev/null || true)
    stop_gateway
    if grep '^RESULT ' <<<"$out" | sed 's/^RESULT //' |
        jq -e --arg e "$enc" '(.per_encoding[$e].wrong_encoding // 0) > 0' >/dev/null 2>&1; then
        UNSUPPORTED[$enc]=1
        NOTES+=("this gateway ignores \`compression: $enc\` (it sends JSON text): $enc runs skipped")
        note "${NOTES[-1]}"
    fi
}

note "$SIZE @${RATE}/s; ${DURATION}s per run; encodings: $ENCODINGS; subscribers: $SUBS"
for enc in cbor cbor-raw; do
    if [[ " $ENCODINGS " == *" $enc "* || " $ENCODINGS " == *" mix "* ]] ||
        [[ $enc == cbor-raw && $HD == 1 ]]; then
        probe "$enc"
    fi
done
ROWS=()
for enc in $ENCODINGS; do
    for n in $SUBS; do
        # mix is json,cbor,cbor-raw round robin; an unsupported one skips it.
        if [[ $enc == mix ]]; then
            [[ -n ${UNSUPPORTED[cbor]:-}${UNSUPPORTED[cbor-raw]:-} ]] && continue
            list=json,cbor,cbor-raw
        else
            [[ -n ${UNSUPPORTED[$enc]:-} ]] && continue
            list=$enc
        fi
        run "$enc-$n" --image-size "$SIZE" --subs "$n" --encodings "$list"
        ROWS+=("$enc-$n")
    done
done
if [[ $HD == 1 ]]; then
    if [[ -n ${UNSUPPORTED[cbor-raw]:-} ]]; then
        NOTES+=("hd row: cbor-raw unsupported, so only its 8 JSON subscribers ran")
        run hd-1280x720-8json --image-size 1280x720 --subs 8 --encodings json
        ROWS+=(hd-1280x720-8json)
    else
        run hd-1280x720-8raw+8json --image-size 1280x720 --subs 16 --encodings cbor-raw,json
        ROWS+=(hd-1280x720-8raw+8json)
    fi
fi
ELAPSED=$((SECONDS - T0))

# ----------------------------------------------------------------- table

ms() { awk -v v="$1" 'BEGIN { if (v == "" || v == "null") print "n/a"; else printf "%.2f", v / 1000 }'; }

TABLE=()
for row in "${ROWS[@]}"; do
    r=$(jq -c --arg row "$row" 'select(.row == $row)' "$RESULTS" | tail -n 1)
    [[ -z $r ]] && continue
    if ! jq -e '.per_encoding' <<<"$r" >/dev/null 2>&1 || [[ $(jq -r '.per_encoding | length' <<<"$r") == 0 ]]; then
        TABLE+=("| $row | | | | FAIL (rc $(jq -r '.rc' <<<"$r")) | | | | | | | | |")
        continue
    fi
    cpu=$(jq -r '.server_cpu_pct // "n/a"' <<<"$r")
    per=$(jq -r '.server_cpu_us_per_image // "n/a"' <<<"$r")
    other=$(jq -r '.other_cpu_pct // "n/a"' <<<"$r")
    run_ok=$(jq -r '.ok' <<<"$r")
    sent="$(jq -r '.sent' <<<"$r") ($(jq -r '.skipped' <<<"$r"))"
    while IFS=$'\t' read -r enc subs recv exp lost p50 p99 max bpi mbs ok; do
        verdict=ok
        [[ $ok != true || $run_ok != true ]] && verdict=FAIL
        if [[ $row == hd-* ]]; then
            if [[ $lost == 0 && $ok == true && $run_ok == true ]] && awk -v p="$p99" 'BEGIN { exit !(p != "null" && p < 30000) }'; then
                verdict="PASS (target: 0 drops, p99 < 30 ms)"
            else
                verdict="MISS (target: 0 drops, p99 < 30 ms)"
            fi
        fi
        TABLE+=("| $row | $sent | $enc | $subs | $recv/$exp | $lost | $(ms "$p50") | $(ms "$p99") | $(ms "$max") | $bpi | $mbs | ${cpu}% / ${per} us | $verdict | ${other}% |")
    done < <(jq -r '.per_encoding | to_entries[] | [.key, .value.subs, .value.received, .value.expected,
        .value.lost, (.value.latency_us.p50 // "null"), (.value.latency_us.p99 // "null"),
        (.value.latency_us.max // "null"), (.value.bytes_per_image // "n/a"),
        .value.mb_per_s_per_sub, .value.ok] | @tsv' <<<"$r")
done

{
    echo "## Images (issue 25): sensor_msgs/msg/Image to WebSocket subscribers"
    echo
    echo "- $STARTED, $(nproc) cores ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)), kernel $(uname -r)"
    echo "- load average before: $LOAD_BEFORE; after: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "- gateway on core 0, rosgate-load on core 1 (${PIN_SRV[*]:-unpinned} / ${PIN_LOAD[*]:-unpinned}); loopback; $SIZE rgb8 at ${RATE}/s, ${DURATION}s measured (+${WARMUP}s warm-up) per run, a fresh gateway each; ${ELAPSED}s total"
    echo "- rosgate $("$GATEWAY" --version 2>/dev/null | awk '{print $2}') ($(git rev-parse --short HEAD 2>/dev/null || echo '?'))"
    for n in "${NOTES[@]}"; do echo "- note: $n"; done
    echo
    echo "| run | sent (skipped) | encoding | subs | received/expected | lost | p50 ms | p99 ms | max ms | B/image | MB/s per sub | gateway CPU / per image | result | other CPU |"
    echo "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|"
    printf '%s\n' "${TABLE[@]}"
    echo
    echo "One publisher over TCP JSON lines (\`data\` as base64), open loop; \"skipped\": images due while"
    echo "the publisher still had 4 lines unsent (the gateway was not reading it), which fails the run."
    echo "Latency from the image's header stamp (its intended send time) to the frame's arrival."
    echo "\"received/expected\" sums over the encoding's subscribers; B/image is the WebSocket frame"
    echo "(header included); gateway CPU is % of one core over the measured interval, and per"
    echo "delivered image (all encodings of the run together). \"other CPU\": the rest of the host."
} >"$OUT.tmp"
mv "$OUT.tmp" "$OUT"
echo
cat "$OUT"
exit "$FAILED"
