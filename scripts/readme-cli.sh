#!/usr/bin/env bash
# Runs the README's CLI block ("Look inside" > "The CLI") as a newcomer would:
# against a gateway plus `rosgate demo`, each command copy-pasted, and checks
# that each one exits 0 and prints what it should.
#
# The commands are read from README.md between the markers
# `<!-- readme-cli:begin` and `<!-- readme-cli:end -->`, so the README and
# this script cannot drift: a command without a check below fails, and a
# check whose command left the README is reported.
#
# A command whose README comment says "Ctrl-C" runs until interrupted: it
# gets SIGINT after RUN_SECS (and must then exit 0, as the CLI does on
# Ctrl-C); every other command must end on its own within CMD_SECS.
#
#   scripts/readme-cli.sh              start a gateway on ephemeral loopback
#                                      ports, and the demo against it
#   scripts/readme-cli.sh --url URL    use the gateway at URL (it must have
#                                      no demo of its own running)
#
# Environment: ROSGATE_BIN=path (default: target/release/rosgate, built if
# missing). Exit status 0 when every command passed.

set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CMD_SECS=30
RUN_SECS=4
URL=
while [[ $# -gt 0 ]]; do
    case $1 in
        --url) URL=${2:?--url needs a value}; shift 2 ;;
        -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
        *) echo "readme-cli.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done

log() { printf 'readme-cli.sh: %s\n' "$*" >&2; }

BIN=${ROSGATE_BIN:-$ROOT/target/release/rosgate}
if [[ -z ${ROSGATE_BIN:-} && ! -x $BIN ]]; then
    log "building the release binary"
    (cd "$ROOT" && cargo build --release --bin rosgate) || { log "build failed"; exit 1; }
fi
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")

WORK=$(mktemp -d "${TMPDIR:-/tmp}/readme-cli.XXXXXX")
GATEWAY_PID=
DEMO_PID=
cleanup() {
    if [[ -n $DEMO_PID ]]; then kill "$DEMO_PID" 2>/dev/null; wait "$DEMO_PID" 2>/dev/null; fi
    if [[ -n $GATEWAY_PID ]]; then kill "$GATEWAY_PID" 2>/dev/null; wait "$GATEWAY_PID" 2>/dev/null; fi
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# `rosgate` as the README writes it.
mkdir -p "$WORK/bin"
ln -s "$BIN" "$WORK/bin/rosgate"
export PATH="$WORK/bin:$PATH"

if [[ -z $URL ]]; then
    "$BIN" --listen 127.0.0.1:0 --ws-listen 127.0.0.1:0 2>"$WORK/gateway.log" &
    GATEWAY_PID=$!
    for _ in $(seq 100); do
        port=$(sed -n 's#^rosgate .* listening on 127\.0\.0\.1:\([0-9]*\)$#\1#p' "$WORK/gateway.log")
        [[ -n $port ]] && break
        kill -0 "$GATEWAY_PID" 2>/dev/null || break
        sleep 0.1
    done
    if [[ -z ${port:-} ]]; then
        log "the gateway did not start:"
        cat "$WORK/gateway.log" >&2
        exit 1
    fi
    URL=tcp://127.0.0.1:$port
fi
# Every command, copied as it is, reaches this gateway.
export ROSGATE_URL=$URL
log "gateway $URL"

rosgate demo >"$WORK/demo.log" 2>&1 &
DEMO_PID=$!
for _ in $(seq 100); do
    grep -q '^Ready\.' "$WORK/demo.log" && break
    kill -0 "$DEMO_PID" 2>/dev/null || break
    sleep 0.1
done
if ! grep -q '^Ready\.' "$WORK/demo.log"; then
    log "rosgate demo did not start:"
    cat "$WORK/demo.log" >&2
    exit 1
fi

# What each README command must print (an extended regex on its output, and
# on the file it writes with `> FILE`), by the command's start.
declare -A WANT=(
    ["rosgate topic list -t"]='^/chatter \[std_msgs/msg/String\]$'
    ["rosgate topic echo /chatter"]="^data: 'Hello World: [0-9]+'$"
    ["rosgate topic hz /chatter"]='^average rate: (9|10|11)\.[0-9]{3}$'
    ["rosgate topic echo /robot_description"]='<robot name=.*rosgate_demo'
    ["rosgate topic pub /chatter"]='^publishing #1: '
    ["rosgate service call /add_two_ints"]='^sum: 3$'
    ["rosgate action send_goal /fibonacci"]='^Goal finished with status: SUCCEEDED$'
    ["rosgate param list /demo/talker"]='^  publish_rate$'
    ["rosgate param set /demo/talker publish_rate"]='^Set parameter successful$'
    ["rosgate param get /demo/talker publish_rate"]='^Double value is: 2\.0$'
    ["rosgate param dump /demo/talker"]='^    publish_rate: 2\.0$'
    ["rosgate node list"]='^/demo/talker$'
    ["rosgate node info /demo/talker"]='^    /chatter: std_msgs/msg/String$'
)
# Besides its own output, what the demo must have printed after a command.
declare -A DEMO_WANT=(
    ["rosgate topic pub /chatter"]='I heard: \[hello\]'
    ["rosgate param set /demo/talker publish_rate"]='publish_rate is now 2 Hz'
)

mapfile -t COMMANDS < <(sed -n '/^<!-- readme-cli:begin/,/^<!-- readme-cli:end -->/p' "$ROOT/README.md" |
    grep '^rosgate ')
if [[ ${#COMMANDS[@]} -eq 0 ]]; then
    log "no commands between the readme-cli markers of README.md"
    exit 1
fi

pass=0
fail=0
declare -A USED=()
cd "$WORK" || exit 1
for cmd in "${COMMANDS[@]}"; do
    key=
    for k in "${!WANT[@]}"; do
        if [[ $cmd == "$k"* && ${#k} -gt ${#key} ]]; then key=$k; fi
    done
    if [[ -z $key ]]; then
        echo "  FAILED  $cmd"
        echo "          (no check in scripts/readme-cli.sh for this command)"
        fail=$((fail + 1))
        continue
    fi
    USED[$key]=1
    out=$WORK/out.log
    if [[ $cmd == *Ctrl-C* ]]; then
        # --foreground: one SIGINT to the command, as a terminal's Ctrl-C
        # sends (without it timeout signals its process group as well, and
        # the CLI reads a second Ctrl-C as "exit now", status 130).
        timeout --foreground --preserve-status -s INT -k 5 "$RUN_SECS" bash -c "$cmd" >"$out" 2>&1
    else
        timeout -k 5 "$CMD_SECS" bash -c "$cmd" >"$out" 2>&1
    fi
    rc=$?
    # What `> FILE` wrote counts as output.
    if [[ $cmd =~ \>\ *([A-Za-z0-9_./-]+) ]]; then
        cat "${BASH_REMATCH[1]}" >>"$out" 2>/dev/null
    fi
    ok=1
    [[ $rc -eq 0 ]] || ok=0
    grep -Eq -- "${WANT[$key]}" "$out" || ok=0
    if [[ -n ${DEMO_WANT[$key]:-} ]]; then
        for _ in $(seq 50); do
            grep -Eq -- "${DEMO_WANT[$key]}" "$WORK/demo.log" && break
            sleep 0.1
        done
        grep -Eq -- "${DEMO_WANT[$key]}" "$WORK/demo.log" || ok=0
    fi
    if [[ $ok -eq 1 ]]; then
        echo "  ok      $cmd"
        pass=$((pass + 1))
    else
        echo "  FAILED  $cmd"
        echo "          exit $rc; wanted /${WANT[$key]}/${DEMO_WANT[$key]:+ and the demo to print /${DEMO_WANT[$key]}/}; output:"
        sed 's/^/          | /' "$out"
        fail=$((fail + 1))
    fi
done
for k in "${!WANT[@]}"; do
    [[ -n ${USED[$k]:-} ]] || log "note: no README command starts with \"$k\" (stale check)"
done

# Ctrl-C ends the demo and withdraws what it served.
kill -INT "$DEMO_PID"
wait "$DEMO_PID"
rc=$?
DEMO_PID=
if [[ $rc -eq 0 ]] && grep -q 'withdrawn' "$WORK/demo.log" &&
    ! rosgate topic list | grep -qx /chatter; then
    echo "  ok      rosgate demo, then Ctrl-C (exit 0, /chatter withdrawn)"
    pass=$((pass + 1))
else
    echo "  FAILED  rosgate demo, then Ctrl-C: exit $rc; its output:"
    sed 's/^/          | /' "$WORK/demo.log"
    fail=$((fail + 1))
fi

echo "readme-cli: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
