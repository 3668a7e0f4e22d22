#!/usr/bin/env bash
# The dashboard in a real browser: builds the gateway, installs what the
# test needs if it is missing (Debian's chromium with apt-get, playwright-core
# from npm into tests/browser/node_modules), and runs
# tests/browser/dashboard.test.mjs with node:test. Screenshots land in
# target/dashboard.png and target/dashboard-dark.png.
#
# Every step is bounded in time. If the test run is cut short, only the
# processes it started are stopped: the test records the PIDs of the gateway
# and of the browser it launched, and this script signals exactly those
# (after checking they are still what was started).
#
# Environment:
#   ROSGATE_BIN=path          use this gateway binary, skip the build
#   BROWSER_TEST_TIMEOUT=180  seconds for the test run
#   CHROMIUM=/usr/bin/chromium

set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=$ROOT/tests/browser
BUDGET=${BROWSER_TEST_TIMEOUT:-180}
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

if [[ ! -f $DIR/node_modules/playwright-core/package.json ]] ||
   ! grep -q "\"version\": \"$(node -p "require('$DIR/package.json').dependencies['playwright-core']")\"" \
        "$DIR/node_modules/playwright-core/package.json"; then
    log "installing playwright-core (npm)"
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

rm -f "$ROOT/target/dashboard.png" "$ROOT/target/dashboard-dark.png"
log "running tests/browser/dashboard.test.mjs (at most ${BUDGET}s)"
set +e
(cd "$DIR" && exec timeout -k 10 "$BUDGET" node --test --test-reporter=spec dashboard.test.mjs) &
TEST_PID=$!
wait "$TEST_PID"
RC=$?
TEST_PID=
set -e

if [[ $RC -eq 124 || $RC -eq 137 ]]; then log "the test run exceeded ${BUDGET}s"; fi
for shot in dashboard.png dashboard-dark.png; do
    [[ -f $ROOT/target/$shot ]] && log "screenshot: target/$shot"
done
log "done in $(( $(date +%s) - START ))s (exit $RC)"
exit "$RC"
