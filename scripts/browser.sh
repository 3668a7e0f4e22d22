#!/usr/bin/env bash
# The dashboard in a real browser: builds the gateway, installs what the
# test needs if it is missing (Debian's chromium with apt-get, playwright-core
# and roslib from npm into tests/browser/node_modules), and runs, one after
# the other, with node:test:
#   tests/browser/dashboard.test.mjs         the dashboard; screenshots land in
#                                            target/dashboard.png and
#                                            target/dashboard-dark.png
#   tests/browser/roslib_encodings.test.mjs  roslib 2.1 in the page subscribing
#                                            to a 640x480 image with compression
#                                            none, cbor, cbor-raw and png; its
#                                            receipt-to-callback figures are
#                                            printed and kept in
#                                            target/browser-encodings.txt
#                                            (about 15 s)
#
# Every step is bounded in time. If the test run is cut short, only the
# processes it started are stopped: the test records the PIDs of the gateway
# and of the browser it launched, and this script signals exactly those
# (after checking they are still what was started).
#
# Environment:
#   ROSGATE_BIN=path          use this gateway binary, skip the build
#   BROWSER_TEST_TIMEOUT=240  seconds for the test run
#   ENCODINGS_N=30            images per encoding in roslib_encodings.test.mjs
#   CHROMIUM=/usr/bin/chromium

set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=$ROOT/tests/browser
BUDGET=${BROWSER_TEST_TIMEOUT:-240}
export CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
START=$(date +%s)

log() { printf 'browser.sh: %s\n' "$*" >&2; }

# ------------------------------------------------------------- chromium

if [[ ! -x $CHROMIUM ]]; then
    if [[ $CHROMIUM != /usr/bin/chromium ]]; then
        log "no browser at $CHROMIUM"; exit 1
    fi
    SUDO=
    if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; fi
    log "installing Debian's chromium (apt-get)"
    timeout 300 $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive timeout 900 $SUDO apt-get install -y -qq chromium >/dev/null
fi
log "$("$CHROMIUM" --version 2>/dev/null || echo 'chromium: version unknown')"

# ------------------------------------------------------------- npm deps

# Each dependency at the version package.json pins (playwright-core, roslib).
deps_current() {
    local dep
    for dep in playwright-core roslib; do
        [[ -f $DIR/node_modules/$dep/package.json ]] &&
            grep -q "\"version\": \"$(node -p "require('$DIR/package.json').dependencies['$dep']")\"" \
                "$DIR/node_modules/$dep/package.json" || return 1
    done
}
if ! deps_current; then
    log "installing playwright-core and roslib (npm ci)"
    (cd "$DIR" && timeout 300 npm ci --no-audit --no-fund --loglevel=error)
fi

# ------------------------------------------------------------- gateway

if [[ -z ${ROSGATE_BIN:-} ]]; then
    log "building the gateway (cargo build)"
    (cd "$ROOT" && timeout 1800 cargo build --quiet -p rosgate --bin rosgate)
    export ROSGATE_BIN=$ROOT/target/debug/rosgate
fi
export ROSGATE_BIN

# ------------------------------------------------------------- the test

PIDFILE=$(mktemp "${TMPDIR:-/tmp}/rosgate-browser-pids.XXXXXX")
export PIDFILE
TEST_PID=

# Stops what the test started and is still running: the browser's process
# group (playwright starts it as a group leader) and the gateway, each only
# if the PID still names the program it was recorded for.
cleanup() {
    if [[ -n $TEST_PID ]] && kill -0 "$TEST_PID" 2>/dev/null; then
        kill "$TEST_PID" 2>/dev/null || true
        wait "$TEST_PID" 2>/dev/null || true
    fi
    if [[ -s $PIDFILE ]]; then
        while read -r pid what; do
            [[ -r /proc/$pid/cmdline ]] || continue
            case $what in
                chromium)
                    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q 'rosgate-dash-chromium-' || continue
                    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true ;;
                rosgate)
                    [[ $(readlink "/proc/$pid/exe" 2>/dev/null) == "$(readlink -f "$ROSGATE_BIN")"* ]] || continue
                    kill -TERM "$pid" 2>/dev/null || true ;;
            esac
            log "stopped $what ($pid) left over by the test"
        done <"$PIDFILE"
    fi
    rm -f "$PIDFILE"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

rm -f "$ROOT/target/dashboard.png" "$ROOT/target/dashboard-dark.png" "$ROOT/target/browser-encodings.txt"
log "running tests/browser/dashboard.test.mjs and roslib_encodings.test.mjs (at most ${BUDGET}s)"
set +e
# One file at a time: the encodings figures are not taken while the
# dashboard test's browser and gateway compete for the cores.
(cd "$DIR" && exec timeout -k 10 "$BUDGET" node --test --test-concurrency=1 --test-reporter=spec \
    dashboard.test.mjs roslib_encodings.test.mjs) &
TEST_PID=$!
wait "$TEST_PID"
RC=$?
TEST_PID=
set -e

if [[ $RC -eq 124 || $RC -eq 137 ]]; then log "the test run exceeded ${BUDGET}s"; fi
for shot in dashboard.png dashboard-dark.png; do
    [[ -f $ROOT/target/$shot ]] && log "screenshot: target/$shot"
done
if [[ -f $ROOT/target/browser-encodings.txt ]]; then
    log "target/browser-encodings.txt:"
    cat "$ROOT/target/browser-encodings.txt" >&2
fi
log "done in $(( $(date +%s) - START ))s (exit $RC)"
exit "$RC"
