#!/usr/bin/env bash
# Four federated gateways in four network namespaces (issue 30, item 5),
# in a LINE (g1-g2-g3-g4) and in a STAR (hub g1; leaves g2, g3, g4).
#
# Runtime: about 4.5 minutes for `all` (probe, line and star 1.5 each);
# bounded: the whole script is killed after MESH_TIMEOUT seconds (default
# 600). Needs root (ip netns) and a
# gateway built with `cargo build --release --features zenoh`, plus
# target/release/rosgate-load.
#
#   scripts/federation-mesh.sh probe  # which Zenoh modes forward across a middle gateway
#   scripts/federation-mesh.sh line   # counts per link, latency per hop, services, middle gateway killed
#   scripts/federation-mesh.sh star   # the same with the hub
#   scripts/federation-mesh.sh all    # probe, line, star
#
# What it does, per topology: four namespaces `<prefix><pid>g1..g4`, joined
# by veth pairs only along the topology's edges, with IP forwarding off in
# every namespace (so g1 cannot reach g3 in the line: whatever crosses does
# so through the gateways). Each namespace runs one gateway, its TCP and
# WebSocket ports on that namespace's own loopback (127.0.0.1:9095, :9090),
# and Zenoh on its veth addresses. Everything made is removed by the EXIT
# trap (processes by their pid, then the namespaces, which takes their veth
# ends with them).
#
# Why --allow-unauthenticated-network is fine here: rosgate refuses a Zenoh
# endpoint beyond loopback without mutual TLS or user/password
# (docs/security.md, "Zenoh"), because anyone on the network could join.
# These endpoints are on veth pairs between private namespaces that exist
# only for this script's run: no other host, and no process outside these
# namespaces, can reach them.
#
# Results go to stdout (lines starting with RESULT are machine-readable);
# logs stay in $MESH_WORK (default a temporary directory, removed at exit
# unless MESH_KEEP=1).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${ROSGATE_BIN:-$ROOT/target/release/rosgate}"
LOAD="${ROSGATE_LOAD_BIN:-$ROOT/target/release/rosgate-load}"
WHAT="${1:-all}"
TIMEOUT="${MESH_TIMEOUT:-600}"
P="rgm$$"
WORK="${MESH_WORK:-$(mktemp -d /tmp/rgmesh.XXXXXX)}"
mkdir -p "$WORK"
# Gateways on core 0, measuring tools on core 1 (a 2-core machine).
GW_CPU="${MESH_GW_CPU:-0}"
TOOL_CPU="${MESH_TOOL_CPU:-1}"
declare -A GW_PID=()
declare -A GW_ARGS=()
EXTRA_PIDS=()
NS_MADE=()

[ "$(id -u)" = 0 ] || { echo "federation-mesh: needs root (ip netns)" >&2; exit 2; }
[ -x "$BIN" ] || { echo "federation-mesh: no $BIN" >&2; exit 2; }
# A gateway built without Zenoh says so for any --zenoh-* flag.
if "$BIN" --zenoh-mode bogus 2>&1 | grep -q 'built without Zenoh'; then
  echo "federation-mesh: $BIN lacks Zenoh: cargo build --release --features zenoh" >&2
  exit 2
fi

cleanup() {
  set +e
  for p in "${EXTRA_PIDS[@]}"; do kill "$p" 2>/dev/null; done
  for g in "${!GW_PID[@]}"; do kill "${GW_PID[$g]}" 2>/dev/null; done
  sleep 0.3
  for g in "${!GW_PID[@]}"; do kill -9 "${GW_PID[$g]}" 2>/dev/null; done
  for n in "${NS_MADE[@]}"; do ip netns del "$n" 2>/dev/null; done
  if [ "${MESH_KEEP:-0}" != 1 ] && [ -z "${MESH_WORK:-}" ]; then rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# The bound: the whole run is ended after $TIMEOUT seconds (the trap cleans).
( sleep "$TIMEOUT"; echo "federation-mesh: timeout after ${TIMEOUT}s" >&2; kill -TERM $$ ) &
WATCHDOG=$!
EXTRA_PIDS+=("$WATCHDOG")

ns() { echo "${P}g$1"; }
# Not for background jobs: $! of a backgrounded function is a subshell,
# not the process (background jobs call ip netns exec directly).
inns() { local g=$1; shift; ip netns exec "$(ns "$g")" "$@"; }

# make_nets: four fresh namespaces, loopback up, forwarding off.
make_nets() {
  for g in 1 2 3 4; do
    ip netns add "$(ns "$g")"
    NS_MADE+=("$(ns "$g")")
    inns "$g" ip link set lo up
    inns "$g" sysctl -qw net.ipv4.ip_forward=0
  done
}

# link A B NET: a veth pair A<->B, 10.77.NET.A/24 on A's end and
# 10.77.NET.B/24 on B's. Interface names: <prefix><pid>aAB / bAB.
link() {
  local a=$1 b=$2 net=$3
  local ea="${P}a$a$b" eb="${P}b$a$b"
  ip link add "$ea" type veth peer name "$eb"
  ip link set "$ea" netns "$(ns "$a")"
  ip link set "$eb" netns "$(ns "$b")"
  inns "$a" ip addr add "10.77.$net.$a/24" dev "$ea"
  inns "$b" ip addr add "10.77.$net.$b/24" dev "$eb"
  inns "$a" ip link set "$ea" up
  inns "$b" ip link set "$eb" up
}

remove_nets() {
  stop_all
  for g in 1 2 3 4; do ip netns del "$(ns "$g")" 2>/dev/null || true; done
  NS_MADE=()
}

# start_gw G ARGS...: gateway G in its namespace, pinned to $GW_CPU, with
# the Zenoh ARGS given; waits until its /metrics answers.
start_gw() {
  local g=$1; shift
  GW_ARGS[$g]="$*"
  ip netns exec "$(ns "$g")" taskset -c "$GW_CPU" "$BIN" --listen 127.0.0.1:9095 --ws-listen 127.0.0.1:9090 \
    --foxglove-listen off --allow-unauthenticated-network "$@" >>"$WORK/g$g.log" 2>&1 &
  GW_PID[$g]=$!
  local i
  for i in $(seq 1 100); do
    if inns "$g" curl -sf -m 1 http://127.0.0.1:9090/metrics >/dev/null 2>&1; then return 0; fi
    if ! kill -0 "${GW_PID[$g]}" 2>/dev/null; then
      echo "gateway g$g exited:" >&2; tail -5 "$WORK/g$g.log" >&2; return 1
    fi
    sleep 0.1
  done
  echo "gateway g$g not ready" >&2; return 1
}

restart_gw() { local g=$1; # shellcheck disable=SC2086
  start_gw "$g" ${GW_ARGS[$g]}; }

stop_gw() {
  local g=$1
  [ -n "${GW_PID[$g]:-}" ] || return 0
  kill -9 "${GW_PID[$g]}" 2>/dev/null || true
  wait "${GW_PID[$g]}" 2>/dev/null || true
  unset "GW_PID[$g]"
}

stop_all() { for g in 1 2 3 4; do stop_gw "$g"; done; }

# metric G NAME: the counter NAME of gateway G's /metrics.
metric() {
  inns "$1" curl -sf -m 2 http://127.0.0.1:9090/metrics \
    | awk -v n="$2" '$1 == n || $1 ~ "^"n"[{ ]" { print $2; exit }'
}

# linkbytes G IFACE: "tx_packets tx_bytes rx_packets rx_bytes" of IFACE in G.
linkbytes() {
  inns "$1" cat "/sys/class/net/$2/statistics/tx_packets" "/sys/class/net/$2/statistics/tx_bytes" \
    "/sys/class/net/$2/statistics/rx_packets" "/sys/class/net/$2/statistics/rx_bytes" | tr '\n' ' '
}

# A Zenoh JSON5 file: what rosgate sets itself without --zenoh-config (lease
# 3 s, connect retry at most 1 s; crates/zenoh/src/lib.rs), plus $1.
zconf() {
  local f="$WORK/zenoh-$2.json5"
  cat >"$f" <<EOF
{
  transport: { link: { tx: { lease: 3000 } } },
  connect: { retry: { period_init_ms: 250, period_max_ms: 1000, period_increase_factor: 2 } },
  $1
}
EOF
  echo "$f"
}

# line_args G MODE [CONFIG]: gateway G's Zenoh flags in the line: it
# listens on its veth addresses and connects to its left neighbour.
line_args() {
  local g=$1 mode=$2 conf=${3:-}
  local a=()
  a+=(--zenoh-mode "$mode")
  [ "$g" -gt 1 ] && a+=(--zenoh-listen "tcp/10.77.$((g - 1))$g.$g:7447")
  [ "$g" -lt 4 ] && a+=(--zenoh-listen "tcp/10.77.$g$((g + 1)).$g:7447")
  [ "$g" -gt 1 ] && a+=(--zenoh-connect "tcp/10.77.$((g - 1))$g.$((g - 1)):7447")
  [ -n "$conf" ] && a+=(--zenoh-config "$conf")
  echo "${a[@]}"
}

# star_args G MODE [CONFIG]: the hub (g1) listens on its three veth
# addresses; each leaf connects to the hub.
star_args() {
  local g=$1 mode=$2 conf=${3:-}
  local a=(--zenoh-mode "$mode")
  if [ "$g" = 1 ]; then
    a+=(--zenoh-listen tcp/10.77.12.1:7447 --zenoh-listen tcp/10.77.13.1:7447 \
        --zenoh-listen tcp/10.77.14.1:7447)
  else
    a+=(--zenoh-listen "tcp/10.77.1$g.$g:7447" --zenoh-connect "tcp/10.77.1$g.1:7447")
  fi
  [ -n "$conf" ] && a+=(--zenoh-config "$conf")
  echo "${a[@]}"
}

make_line() { make_nets; link 1 2 12; link 2 3 23; link 3 4 34; }
make_star() { make_nets; link 1 2 12; link 1 3 13; link 1 4 14; }

# reach FROM TO...: does a message published on FROM reach a subscriber on
# each TO? Prints "gN:yes|no" per TO.
reach() {
  local from=$1; shift
  local t
  for t in "$@"; do
    ip netns exec "$(ns "$t")" timeout 12 python3 "$ROOT/scripts/mesh-sub.py" --topic /probe --duration 10 \
      --out "$WORK/probe-g$t.txt" &
    EXTRA_PIDS+=($!)
  done
  sleep 3
  inns "$from" timeout 10 python3 "$ROOT/scripts/mesh-pub.py" --topic /probe --rate 50 \
    --duration 5 --lead 1 >/dev/null
  wait_extra
  local out=""
  for t in "$@"; do
    if [ -s "$WORK/probe-g$t.txt" ]; then out+=" g$t:yes($(wc -l <"$WORK/probe-g$t.txt"))"
    else out+=" g$t:no"; fi
  done
  echo "$out"
}

wait_extra() {
  local p keep=()
  for p in "${EXTRA_PIDS[@]}"; do
    if [ "$p" = "$WATCHDOG" ]; then keep+=("$p"); continue; fi
    wait "$p" 2>/dev/null || true
  done
  EXTRA_PIDS=("${keep[@]}")
}

# probe: which Zenoh modes carry a topic across a middle gateway.
probe_line() {
  local label=$1 m1=$2 m2=$3 m3=$4 m4=$5 conf=${6:-}
  make_line
  local g modes=("" "$m1" "$m2" "$m3" "$m4")
  for g in 1 2 3 4; do
    # shellcheck disable=SC2046
    start_gw "$g" $(line_args "$g" "${modes[$g]}" "$conf")
  done
  sleep 2
  echo "RESULT probe line $label: g1 ->$(reach 1 2 3 4)"
  remove_nets
}

probe_star() {
  local label=$1 hub=$2 leaf=$3 conf=${4:-}
  make_star
  # shellcheck disable=SC2046
  start_gw 1 $(star_args 1 "$hub" "$conf")
  local g
  # shellcheck disable=SC2046
  for g in 2 3 4; do start_gw "$g" $(star_args "$g" "$leaf" "$conf"); done
  sleep 2
  echo "RESULT probe star $label: g2 ->$(reach 2 1 3 4)"
  remove_nets
}

probe() {
  probe_line "all-peer" peer peer peer peer
  probe_line "middle-routers" peer router router peer
  probe_line "all-routers" router router router router
  probe_line "all-peer-linkstate" peer peer peer peer \
    "$(zconf 'routing: { peer: { mode: "linkstate" } },' linkstate)"
  probe_star "all-peer" peer peer
  probe_star "hub-router" router peer
  probe_star "hub-router-leaf-clients" router client
}


# snapshot TAG: every gateway's federation counters and every veth's
# counters, to $WORK/snap-TAG.
snapshot() {
  local f="$WORK/snap-$1" g e
  : >"$f"
  for g in 1 2 3 4; do
    echo "g$g federation_in $(metric "$g" rosgate_federation_in_total) federation_out $(metric "$g" rosgate_federation_out_total)" >>"$f"
    for e in $(inns "$g" ls /sys/class/net | grep "^$P"); do
      echo "g$g $e $(linkbytes "$g" "$e")" >>"$f"
    done
  done
}

# counts LABEL PUB SUBS N: N messages of 1000 B published on PUB at 500/s,
# a subscriber on each of SUBS; prints per gateway the federation counters'
# change and per link the bytes and packets sent each way, per message.
counts() {
  local label=$1 pub=$2 subs=$3 n=$4 t
  for t in $subs; do
    ip netns exec "$(ns "$t")" taskset -c "$TOOL_CPU" python3 "$ROOT/scripts/mesh-sub.py" --topic /count \
      --duration $((n / 500 + 8)) --out "$WORK/count-$label-g$t.txt" &
    EXTRA_PIDS+=($!)
  done
  sleep 3
  snapshot "$label-before"
  ip netns exec "$(ns "$pub")" taskset -c "$TOOL_CPU" python3 "$ROOT/scripts/mesh-pub.py" --topic /count \
    --rate 500 --duration $((n / 500)) --size 1000 --lead 1.5 >/dev/null
  sleep 1.5
  snapshot "$label-after"
  wait_extra
  python3 - "$WORK" "$label" "$n" "$subs" "$P" <<'PY'
import sys
work, label, n, subs, prefix = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4].split(), sys.argv[5]
def read(tag):
    d = {}
    for line in open(f"{work}/snap-{label}-{tag}"):
        f = line.split()
        if f[1] == "federation_in":
            d[(f[0], "in")] = int(float(f[2] or 0)); d[(f[0], "out")] = int(float(f[4] or 0))
        else:
            d[(f[0], f[1])] = [int(x) for x in f[2:6]]
    return d
b, a = read("before"), read("after")
got = {t: sum(1 for _ in open(f"{work}/count-{label}-g{t}.txt")) for t in subs}
print(f"RESULT counts {label}: published {n} x 1000 B; received " +
      " ".join(f"g{t}={got[t]}" for t in subs))
for g in ("g1", "g2", "g3", "g4"):
    print(f"RESULT counts {label}: {g} federation_in +{a[(g,'in')]-b[(g,'in')]} federation_out +{a[(g,'out')]-b[(g,'out')]}")
seen = set()
for (g, e), v in sorted(a.items()):
    if e in ("in", "out"):
        continue
    pair = e[len(prefix) + 1:]  # "12" of <prefix>a12 / <prefix>b12
    if e[len(prefix)] != "a":
        continue
    a_end, b_end = f"g{pair[0]}", f"g{pair[1]}"
    d = [x - y for x, y in zip(v, b[(g, e)])]
    print(f"RESULT counts {label}: link {a_end}-{b_end}: {a_end}->{b_end} {d[1]} B in {d[0]} packets "
          f"({d[1]/n:.0f} B/message), {b_end}->{a_end} {d[3]} B in {d[2]} packets ({d[3]/n:.0f} B/message)")
PY
}

# hops LABEL PUB "G:HOPS ..." RATE: open-loop at RATE msgs/s of 64 B from PUB,
# rosgate-load strings subscribers (--publisher none) on each G at once;
# one RESULT line per G with its hop count, delivered rate, loss, latency.
hops() {
  local label=$1 pub=$2 subs=$3 rate=$4 gh g
  for gh in $subs; do
    g=${gh%%:*}
    ip netns exec "$(ns "$g")" taskset -c "$TOOL_CPU" "$LOAD" --scenario strings --publisher none \
      --ws-addr 127.0.0.1:9090 --addr 127.0.0.1:9095 --topic /mesh --size 64 --subs 1 \
      --warmup 4 --duration 5 --drain 2 >"$WORK/hops-$label-$rate-g$g.txt" 2>&1 &
    EXTRA_PIDS+=($!)
  done
  sleep 0.5
  ip netns exec "$(ns "$pub")" taskset -c "$TOOL_CPU" python3 "$ROOT/scripts/mesh-pub.py" --topic /mesh \
    --rate "$rate" --duration 9 --size 64 --lead 1.5 >/dev/null &
  EXTRA_PIDS+=($!)
  wait_extra
  for gh in $subs; do
    g=${gh%%:*}
    python3 - "$WORK/hops-$label-$rate-g$g.txt" "$label" "$rate" "g$g" "${gh##*:}" <<'PY'
import json, sys
path, label, rate, g, hops = sys.argv[1:]
r = None
for line in open(path):
    if line.startswith("RESULT "):
        r = json.loads(line[7:])
if r is None:
    print(f"RESULT hops {label} rate {rate}: {g} ({hops} hops): no result: " + open(path).read()[-300:].replace("\n", " "))
    sys.exit(0)
lat = r.get("latency_us") or {}
lost = sum(v.get("lost", 0) for v in (r.get("per_encoding") or {}).values())
print(f"RESULT hops {label} rate {rate}/s: {g} ({hops} hops): delivered {r['msgs_per_s_per_sub']}/s, "
      f"lost {lost}, ok {r['ok']}, p50 {lat.get('p50')} us, p99 {lat.get('p99')} us, max {lat.get('max')} us")
PY
  done
}

# heal LABEL PUB VICTIM SUBS: PUB publishes 200/s; subscribers on SUBS log
# arrivals; VICTIM is killed (SIGKILL) at 6 s and started again at 10 s.
# Prints per subscriber the outage and the time from the restart to its
# first message after it.
heal() {
  local label=$1 pub=$2 victim=$3 subs=$4 t
  for t in $subs; do
    ip netns exec "$(ns "$t")" taskset -c "$TOOL_CPU" python3 "$ROOT/scripts/mesh-sub.py" --topic /heal \
      --duration 24 --out "$WORK/heal-$label-g$t.txt" &
    EXTRA_PIDS+=($!)
  done
  sleep 2
  ip netns exec "$(ns "$pub")" taskset -c "$TOOL_CPU" python3 "$ROOT/scripts/mesh-pub.py" --topic /heal \
    --rate 200 --duration 20 --size 64 --lead 1 >/dev/null &
  EXTRA_PIDS+=($!)
  sleep 6
  local kill_ns; kill_ns=$(date +%s%N)
  stop_gw "$victim"
  sleep 4
  local start_ns; start_ns=$(date +%s%N)
  restart_gw "$victim"
  local ready_ns; ready_ns=$(date +%s%N)
  wait_extra
  python3 - "$WORK" "$label" "$victim" "$kill_ns" "$start_ns" "$ready_ns" $subs <<'PY'
import sys
work, label, victim, kill_ns, start_ns, ready_ns, *subs = sys.argv[1:]
kill_ns, start_ns, ready_ns = int(kill_ns), int(start_ns), int(ready_ns)
print(f"RESULT heal {label}: g{victim} killed, restarted {(start_ns-kill_ns)/1e9:.2f} s later; "
      f"its /metrics answered {(ready_ns-start_ns)/1e6:.0f} ms after the start")
for t in subs:
    rows = [tuple(map(int, l.split())) for l in open(f"{work}/heal-{label}-g{t}.txt")]
    before = [r for r in rows if r[0] < kill_ns]
    after = [r for r in rows if r[0] > start_ns]
    if not after:
        print(f"RESULT heal {label}: g{t}: nothing after the restart ({len(before)} before the kill)")
        continue
    last, first = before[-1] if before else (0, -1), after[0]
    print(f"RESULT heal {label}: g{t}: first message {(first[0]-start_ns)/1e6:.0f} ms after the restart "
          f"({(first[0]-ready_ns)/1e6:.0f} ms after it was ready), outage {(first[0]-last[0])/1e9:.2f} s, "
          f"{first[1]-last[1]-1} messages missed, {len(after)} after, in order: "
          f"{all(b[1] == a[1] + 1 for a, b in zip(after, after[1:]))}")
PY
}

# MESH_PARTS: which measurements `line` and `star` make (default all four).
PARTS="${MESH_PARTS:-counts hops services heal}"
part() { [[ " $PARTS " == *" $1 "* ]]; }
# MESH_RATES: the open-loop rates of the hop measurements, messages/s.
RATES="${MESH_RATES:-1000 10000 30000}"

# services LABEL PROVIDER CALLERS: `rosgate demo` on PROVIDER; from each of
# CALLERS, /add_two_ints is called (Zenoh's routers carry the query: no
# gateway's bridge passes a call on) and `rosgate gateway list` counted.
services() {
  local label=$1 prov=$2 callers=$3 c
  ip netns exec "$(ns "$prov")" timeout 30 "$BIN" demo >/dev/null 2>&1 &
  local demo=$!
  EXTRA_PIDS+=("$demo")
  sleep 3
  for c in $callers; do
    local t0 out gws; t0=$(date +%s%N)
    out=$(inns "$c" "$BIN" service call /add_two_ints example_interfaces/srv/AddTwoInts \
      '{a: 20, b: 22}' 2>&1 | tr '\n' ' ' || true)
    gws=$(inns "$c" "$BIN" gateway list 2>/dev/null | grep -oE '[0-9a-f]{16,}' | sort -u | wc -l || true)
    echo "RESULT services $label: g$c -> demo on g$prov: ${out} ($(( ($(date +%s%N) - t0) / 1000000 )) ms with the CLI's start); gateways its gateway list names: $gws"
  done
  kill "$demo" 2>/dev/null || true
  wait_extra
}

# The configurations the probe found to forward (docs/federation.md).
LINE_MODES=("" peer router router peer)
STAR_HUB=router
STAR_LEAF=client

run_line() {
  make_line
  local g
  # shellcheck disable=SC2046
  for g in 1 2 3 4; do start_gw "$g" $(line_args "$g" "${LINE_MODES[$g]}"); done
  sleep 2
  if part counts; then counts line-all 1 "2 3 4" 2000; counts line-g4 1 "4" 2000; fi
  if part hops; then for r in $RATES; do hops line 1 "2:1 3:2 4:3" "$r"; done; fi
  if part services; then services line 1 "2 3 4"; fi
  if part heal; then heal line 1 2 "3 4"; fi
  remove_nets
}

run_star() {
  make_star
  # shellcheck disable=SC2046
  start_gw 1 $(star_args 1 "$STAR_HUB")
  local g
  # shellcheck disable=SC2046
  for g in 2 3 4; do start_gw "$g" $(star_args "$g" "$STAR_LEAF"); done
  sleep 2
  if part counts; then counts star-all 2 "1 3 4" 2000; fi
  if part hops; then for r in $RATES; do hops star 2 "1:1 3:2 4:2" "$r"; done; fi
  if part services; then services star 2 "1 3 4"; fi
  if part heal; then heal star 2 1 "3 4"; fi
  remove_nets
}

case "$WHAT" in
  probe) probe ;;
  line) run_line ;;
  star) run_star ;;
  all) probe; run_line; run_star ;;
  *) echo "usage: $0 probe|line|star|all" >&2; exit 2 ;;
esac
