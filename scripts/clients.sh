#!/usr/bin/env bash
# Real-client tests: three rosbridge client libraries, installed from their
# registries at test time, against a freshly built rosgate.
#
#   roslibpy    roslibpy 2.1.0's own pytest suite (sdist from PyPI), pointed
#               at rosgate's WebSocket port, with a /fibonacci action server
#               (tests/clients/fibonacci_server.py) as another client of the
#               gateway; known-inapplicable tests are in
#               tests/clients/roslibpy/expected_failures.txt. Then rosgate's
#               own roslibpy tests, tests/clients/roslibpy/test_*.py (QoS,
#               compression: what roslibpy decodes, xfail where it cannot;
#               TF: roslibpy's TFClient against the gateway's own
#               tf2_web_republisher);
#               then that gateway's /metrics is read by prometheus_client's
#               parser (tests/clients/metrics_check.py, counted with roslibpy)
#   roslib      roslib (npm, 2.x) tests in tests/clients/roslib, over the
#               WebSocket port and over the NDJSON TCP port (custom transport);
#               typedefs.test.mjs also parses every rosapi definition text
#               with @foxglove/rosmsg (the Foxglove app's parser, a devDependency)
#   foxglove    @foxglove/ws-protocol's FoxgloveClient (npm 0.8, unchanged) in
#               tests/clients/foxglove, on the Foxglove listener and on the
#               rosbridge port's subprotocol; messages decoded with
#               @foxglove/rosmsg + @foxglove/rosmsg2-serialization; and the
#               @foxglove/ws-protocol-examples CLIs (simple-client,
#               mcap-record read back with @mcap/core, perf-test-client)
#   roslibrust  tests/clients/roslibrust, a standalone cargo crate
#   readme      the README's client examples (examples/add_two_ints.mjs and
#               .py, which the README shows verbatim) run as a newcomer would,
#               against a gateway, and must print their answers; then the
#               README's CLI block against that gateway plus `rosgate demo`
#               (scripts/readme-cli.sh: each command, its exit status and
#               output)
#   security    roslibpy (each transport) and roslib against a gateway started
#               with --auth-tokens (fresh random tokens for an admin and a
#               viewer): tests/clients/roslibpy/security and
#               tests/clients/roslib/security (token in the URL, in a header,
#               by the auth op; what a viewer may not do); then the gateway's
#               log must hold neither token
#   tls         a gateway with --tls-cert/--tls-key (a certificate made now
#               with openssl): roslibpy (Ros(host, port, is_secure=True),
#               both transports; the asyncio one trusting the certificate
#               through SSL_CERT_FILE) and roslib in node (NODE_EXTRA_CA_CERTS)
#               publish, subscribe and call a service over wss:// with a
#               token in the URL (the gateway also has --auth-tokens)
#               (tests/clients/*/tls_check.*); untrusted, they are refused
#   ros2        rosgate in a ROS 2 graph that runs rmw_zenoh (docs/ros2.md):
#               tests/clients/ros2/test_ros2_peer.py with zenoh-ros2-sdk
#               (PyPI, a pure-Python rmw_zenoh node) as the ROS 2 side and
#               roslibpy plus a plain TCP client as rosgate's; once with the
#               current eclipse-zenoh and once with the one Jazzy's
#               rmw_zenoh 0.2.9 vendored (ROS2_ZENOH_VERSIONS)
#   bag         `rosgate bag` against outside tools (tests/clients/bag/check_bag.py):
#               a bag it records is opened by PyPI rosbags (its own Jazzy type
#               store deserializes every message) and by mcap +
#               mcap-ros2-support (read and decoded from the ros2msg schemas);
#               a bag rosbags' writer makes (MCAP storage) is played through
#               the gateway to a roslibpy subscriber
#
# Each suite gets its own gateway on ephemeral loopback ports, bounded in
# time. Prints per-suite counts and exits non-zero if anything unexpected
# failed (an expected failure that passes is reported, not fatal).
#
# Environment:
#   CLIENT_SUITES="roslibpy roslib foxglove roslibrust readme security tls"   suites to run
#   ROSLIBPY_TRANSPORTS="twisted asyncio"        roslibpy's transports (one pytest run each)
#   ROSGATE_BIN=path                             use this gateway binary, skip the build
#   FIBONACCI_PERIOD=1.0                         seconds per step of the /fibonacci action
#                                                server roslibpy's action tests use
#
# Needs: cargo, python3 (with venv), node >= 20 and npm, openssl (tls); network access to
# PyPI, npm and crates.io for the installs (cached afterwards).

set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CLIENTS=$ROOT/tests/clients
WORK=$CLIENTS/.work
SUITES=${CLIENT_SUITES:-roslibpy roslib foxglove roslibrust readme security tls ros2 bag}
# 1.10.2: current; 1.6.2: what Jazzy's rmw_zenoh 0.2.9 vendored (0.2.10's
# 1.8.0 has no binary wheel, and building it needs Rust 1.93).
ROS2_ZENOH_VERSIONS=${ROS2_ZENOH_VERSIONS:-1.10.2 1.6.2}
ROSLIBPY_TRANSPORTS=${ROSLIBPY_TRANSPORTS:-twisted asyncio}
ROSLIBPY_VERSION=2.1.0
RLR_TARGET=$CLIENTS/roslibrust/target

mkdir -p "$WORK"
rm -f "$WORK"/*.log "$WORK"/*.xml

log() { printf 'clients.sh: %s\n' "$*" >&2; }

# ------------------------------------------------------------- processes

GATEWAY_PID=
COMPILE_PID=
FIBONACCI_PID=
cleanup() {
    if [[ -n $FIBONACCI_PID ]]; then kill "$FIBONACCI_PID" 2>/dev/null; wait "$FIBONACCI_PID" 2>/dev/null; fi
    if [[ -n $GATEWAY_PID ]]; then kill "$GATEWAY_PID" 2>/dev/null; wait "$GATEWAY_PID" 2>/dev/null; fi
    if [[ -n $COMPILE_PID ]]; then kill "$COMPILE_PID" 2>/dev/null; wait "$COMPILE_PID" 2>/dev/null; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Starts a gateway on ephemeral ports, with any further flags given (under
# --tls-cert its lines say wss:// and tls://); sets WS_PORT, TCP_PORT,
# FOXGLOVE_PORT, GATEWAY_PID.
start_gateway() {
    local name=$1
    shift
    local err=$WORK/gateway-$name.log
    : >"$err"
    "$BIN" --listen 127.0.0.1:0 --ws-listen 127.0.0.1:0 --foxglove-listen 127.0.0.1:0 "$@" 2>"$err" &
    GATEWAY_PID=$!
    WS_PORT=
    TCP_PORT=
    FOXGLOVE_PORT=
    for _ in $(seq 100); do
        WS_PORT=$(sed -n 's#^rosgate websocket listening on wss\{0,1\}://127\.0\.0\.1:\([0-9]*\)$#\1#p' "$err")
        FOXGLOVE_PORT=$(sed -n 's#^rosgate foxglove listening on wss\{0,1\}://127\.0\.0\.1:\([0-9]*\)$#\1#p' "$err")
        TCP_PORT=$(sed -n 's#^rosgate .* listening on \(tls://\)\{0,1\}127\.0\.0\.1:\([0-9]*\)$#\2#p' "$err")
        [[ -n $WS_PORT && -n $TCP_PORT ]] && return 0
        kill -0 "$GATEWAY_PID" 2>/dev/null || break
        sleep 0.1
    done
    log "gateway for $name did not start:"
    cat "$err" >&2
    return 1
}

# Reports the gateway's protocol error counters (what clients sent that it
# refused) and whether it survived; stops it. Returns 1 if it had died.
# GATEWAY_TOKEN, when set, is presented first (a gateway with tokens);
# GATEWAY_CA set: the gateway speaks TLS, trusting that certificate.
GATEWAY_TOKEN=
GATEWAY_CA=
stop_gateway() {
    local name=$1 alive=0
    if kill -0 "$GATEWAY_PID" 2>/dev/null; then
        GATEWAY_TOKEN=$GATEWAY_TOKEN python3 - "$TCP_PORT" "$GATEWAY_CA" <<'EOF' || true
import json, os, socket, ssl, sys
try:
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
    if sys.argv[2]:
        s = ssl.create_default_context(cafile=sys.argv[2]).wrap_socket(s, server_hostname="localhost")
    if os.environ.get("GATEWAY_TOKEN"):
        s.sendall(json.dumps({"op": "auth", "token": os.environ["GATEWAY_TOKEN"]}).encode() + b"\n")
    s.sendall(b'{"op":"call_service","service":"/rosgate/stats","id":"s","args":{}}\n')
    buf = b""
    while b'"id":"s"' not in buf or not buf.endswith(b"\n"):
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
    v = [json.loads(l) for l in buf.splitlines() if b'"id":"s"' in l][0]["values"]
    errs = {k: n for k, n in v["errors"].items() if n}
    print("  gateway: %d connections, %d requests, %d published, %d calls forwarded; refused requests: %s"
          % (v["connections_accepted"], v["lines_in"], v["published"], v["calls_forwarded"],
             json.dumps(errs) if errs else "none"))
    if sys.argv[2]:
        print("  gateway: %d TLS handshakes, %d failed, closes.tls_error %d"
              % (v["tls_handshakes"], v["tls_handshake_failures"], v["closes"]["tls_error"]))
except Exception as e:  # diagnostics only
    print("  gateway: stats unavailable (%s)" % e)
EOF
        kill "$GATEWAY_PID" 2>/dev/null
    else
        alive=1
        log "the gateway of suite $name DIED during the suite; its stderr:"
        tail -20 "$WORK/gateway-$name.log" >&2
    fi
    wait "$GATEWAY_PID" 2>/dev/null
    GATEWAY_PID=
    return $alive
}

# The /fibonacci action server (tests/clients/fibonacci_server.py, a client
# of the gateway on its TCP port) that roslibpy's tests/ros2/test_actions.py
# sends goals to; sets FIBONACCI_PID once it has advertised the action.
start_fibonacci() {
    local out=$WORK/fibonacci-server.log
    : >"$out"
    python3 "$CLIENTS/fibonacci_server.py" --tcp "127.0.0.1:$TCP_PORT" --period "${FIBONACCI_PERIOD:-1.0}" \
        >"$out" 2>&1 &
    FIBONACCI_PID=$!
    for _ in $(seq 100); do
        grep -qx ready "$out" && return 0
        kill -0 "$FIBONACCI_PID" 2>/dev/null || break
        sleep 0.1
    done
    log "the /fibonacci action server did not start:"
    cat "$out" >&2
    stop_fibonacci
    return 1
}

# Stops the action server; returns 1 if it had died during the suite.
stop_fibonacci() {
    local died=0
    [[ -n $FIBONACCI_PID ]] || return 0
    if kill -0 "$FIBONACCI_PID" 2>/dev/null; then
        kill "$FIBONACCI_PID" 2>/dev/null
    else
        died=1
    fi
    wait "$FIBONACCI_PID" 2>/dev/null
    FIBONACCI_PID=
    return $died
}

# --------------------------------------------------------------- results

declare -A PASS FAIL XFAIL XPASS SKIP NOTE
record() { # suite pass fail xfail xpass skip [note]
    PASS[$1]=$2 FAIL[$1]=$3 XFAIL[$1]=$4 XPASS[$1]=$5 SKIP[$1]=$6 NOTE[$1]=${7:-}
}
# A suite that could not run at all counts as one failure.
broken() { record "$1" 0 1 0 0 0 "$2"; log "$1: $2"; }

# The count `ℹ WHAT N` of a `node --test --test-reporter=spec` log (empty
# when the run did not get as far as its summary).
node_count() { sed -n "s/^ℹ $1 \([0-9]*\)\$/\1/p" "$2"; } # what log
# Whether such a run did not finish: no pass count, or a non-zero exit
# with nothing failed or cancelled.
node_unfinished() { [[ -z $1 || $2 -ne 0 && ${3:-0}${4:-0} == 00 ]]; } # pass exit fail cancelled

# ----------------------------------------------------------------- build

if [[ -n ${ROSGATE_BIN:-} ]]; then
    BIN=$ROSGATE_BIN
else
    log "building the release gateway"
    (cd "$ROOT" && timeout 600 cargo build --release --bin rosgate) || { log "gateway build failed"; exit 1; }
    BIN=$(cd "$ROOT" && cargo metadata --format-version 1 --no-deps 2>/dev/null |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/release/rosgate
fi
[[ -x $BIN ]] || { log "no gateway binary at $BIN"; exit 1; }

want() { [[ " $SUITES " == *" $1 "* ]]; }

# The roslibrust crate's compile is the long pole: start it now, at low
# priority, while the other suites (mostly waiting on sockets) run.
if want roslibrust; then
    log "compiling tests/clients/roslibrust in the background"
    (cd "$CLIENTS/roslibrust" &&
        CARGO_TARGET_DIR=$RLR_TARGET exec nice -n 10 timeout 600 cargo test --locked --no-run) \
        >"$WORK/roslibrust-build.log" 2>&1 &
    COMPILE_PID=$!
fi

# -------------------------------------------------------------- roslibpy

# Adds one pytest run (log $1, exit status $2, label $3) to run_roslibpy's
# totals (its locals p f xf xp s note).
roslibpy_tally() {
    local out=$1 rc=$2 label=$3 line n kind
    grep -E '^(FAILED|ERROR|XPASS) |rosgate:|^  tests/' "$out" | sed 's/^/  /'
    line=$(grep -E '^=* *[0-9]+ (passed|failed|xfailed|error)' "$out" | tail -1)
    echo "  $label: ${line:-no summary (exit $rc)}"
    for kind in passed failed errors error xfailed xpassed skipped; do
        n=$(grep -oE "[0-9]+ $kind\b" <<<"$line" | grep -oE '^[0-9]+' || true)
        n=${n:-0}
        case $kind in
            passed) p=$((p + n)) ;;
            failed | errors | error) f=$((f + n)) ;;
            xfailed) xf=$((xf + n)) ;;
            xpassed) xp=$((xp + n)) ;;
            skipped) s=$((s + n)) ;;
        esac
    done
    if [[ -z $line || $rc -ge 2 ]]; then
        f=$((f + 1))
        note+="[$label: pytest exit $rc, see $out] "
        tail -30 "$out" | sed 's/^/  | /'
    fi
}

run_roslibpy() {
    local dir=$CLIENTS/roslibpy venv=$CLIENTS/roslibpy/.venv
    local sdist=$dir/sdist src=$dir/sdist/roslibpy-$ROSLIBPY_VERSION
    if [[ ! -x $venv/bin/python ]]; then
        python3 -m venv "$venv" || { broken roslibpy "cannot create a venv"; return; }
    fi
    timeout 300 "$venv/bin/python" -m pip install -q --disable-pip-version-check \
        -r "$dir/requirements.txt" >"$WORK/roslibpy-install.log" 2>&1 ||
        { cat "$WORK/roslibpy-install.log" >&2; broken roslibpy "pip install failed"; return; }
    if [[ ! -d $src/tests ]]; then
        rm -rf "$sdist" && mkdir -p "$sdist"
        timeout 120 "$venv/bin/python" -m pip download -q --disable-pip-version-check \
            "roslibpy==$ROSLIBPY_VERSION" --no-binary :all: --no-deps -d "$sdist" \
            >>"$WORK/roslibpy-install.log" 2>&1 &&
            tar -xzf "$sdist/roslibpy-$ROSLIBPY_VERSION.tar.gz" -C "$sdist" ||
            { cat "$WORK/roslibpy-install.log" >&2; broken roslibpy "sdist download failed"; return; }
    fi

    start_gateway roslibpy || { broken roslibpy "gateway did not start"; return; }
    if ! start_fibonacci; then
        stop_gateway roslibpy
        broken roslibpy "the /fibonacci action server did not start"
        return
    fi
    local p=0 f=0 xf=0 xp=0 s=0 note= transport out
    for transport in $ROSLIBPY_TRANSPORTS; do
        out=$WORK/roslibpy-$transport.log
        log "roslibpy $ROSLIBPY_VERSION test suite, $transport transport -> ws://127.0.0.1:$WS_PORT"
        (cd "$src" && ROSGATE_WS_PORT=$WS_PORT ROSLIBPY_TRANSPORT=$transport ROSGATE_FORCE_EXIT=1 \
            PYTHONPATH=$dir timeout -k 10 420 "$venv/bin/python" -m pytest -p rosgate_plugin \
            -p no:cacheprovider --timeout=60 --timeout-method=signal -q -rfEX \
            --junitxml="$WORK/roslibpy-$transport.xml" tests) >"$out" 2>&1
        roslibpy_tally "$out" $? "roslibpy[$transport]"
        # rosgate's own roslibpy tests (tests/clients/roslibpy/test_*.py:
        # QoS options, compression, and federation across two gateways of its own when
        # the binary has it), same transport, with no expected failures.
        out=$WORK/roslibpy-rosgate-$transport.log
        log "rosgate's roslibpy tests, $transport transport -> ws://127.0.0.1:$WS_PORT"
        (cd "$dir" && ROSGATE_WS_PORT=$WS_PORT ROSLIBPY_TRANSPORT=$transport ROSGATE_FORCE_EXIT=1 \
            ROSGATE_BIN=$BIN ROSGATE_EXPECTED_FAILURES=/dev/null PYTHONPATH=$dir timeout -k 10 300 "$venv/bin/python" \
            -m pytest -p rosgate_plugin -p no:cacheprovider --timeout=60 --timeout-method=signal -q -rfEX \
            --junitxml="$WORK/roslibpy-rosgate-$transport.xml" test_*.py) >"$out" 2>&1
        roslibpy_tally "$out" $? "roslibpy-rosgate[$transport]"
    done
    # The same gateway's /metrics, after the suite's traffic, read by the
    # Prometheus Python client's own parser (tests/clients/metrics_check.py).
    out=$WORK/metrics-check.log
    if timeout 120 "$venv/bin/python" -m pip install -q --disable-pip-version-check prometheus_client==0.26.0 \
        >"$out" 2>&1 && timeout 30 "$venv/bin/python" "$CLIENTS/metrics_check.py" \
        "http://127.0.0.1:$WS_PORT/metrics" >>"$out" 2>&1; then
        p=$((p + 1))
    else
        f=$((f + 1))
        note+="[metrics_check failed, see $out] "
    fi
    sed 's/^/  /' "$out"
    stop_fibonacci || {
        f=$((f + 1))
        note+="[/fibonacci server died, see $WORK/fibonacci-server.log] "
        tail -20 "$WORK/fibonacci-server.log" | sed 's/^/  | /'
    }
    stop_gateway roslibpy || { f=$((f + 1)); note+="[gateway died] "; }
    record roslibpy "$p" "$f" "$xf" "$xp" "$s" "$note"
}

# ---------------------------------------------------------------- roslib

run_roslib() {
    local dir=$CLIENTS/roslib out=$WORK/roslib.log
    command -v node >/dev/null && command -v npm >/dev/null || { broken roslib "node/npm not found"; return; }
    (cd "$dir" && timeout 300 npm ci --no-audit --no-fund --loglevel=error) >"$WORK/roslib-install.log" 2>&1 ||
        { cat "$WORK/roslib-install.log" >&2; broken roslib "npm ci failed"; return; }
    start_gateway roslib || { broken roslib "gateway did not start"; return; }
    log "roslib $(cd "$dir" && node -p 'require("./node_modules/roslib/package.json").version' 2>/dev/null || echo '?') tests, node $(node --version) -> ws://127.0.0.1:$WS_PORT and tcp 127.0.0.1:$TCP_PORT"
    (cd "$dir" && ROSGATE_WS_URL=ws://127.0.0.1:$WS_PORT ROSGATE_TCP_ADDR=127.0.0.1:$TCP_PORT \
        timeout -k 10 300 node --test --test-concurrency=1 --test-timeout=60000 --test-reporter=spec \
        ./*.test.mjs) >"$out" 2>&1
    local rc=$?
    grep -E '✖|# TODO' "$out" | grep -v 'failing tests:' | sed 's/^/  /' | sort -u
    local p f t s c note=
    p=$(node_count pass "$out")
    f=$(node_count fail "$out")
    t=$(node_count todo "$out")
    s=$(node_count skipped "$out")
    c=$(node_count cancelled "$out")
    echo "  roslib: pass ${p:-?} fail ${f:-?} cancelled ${c:-?} todo ${t:-?} skipped ${s:-?} (exit $rc)"
    if node_unfinished "$p" "$rc" "$f" "$c"; then
        note="node --test exit $rc, see $out"
        tail -30 "$out" | sed 's/^/  | /'
        f=$((${f:-0} + 1))
    fi
    # Pending tests are marked `todo` (node counts them apart from pass/fail).
    stop_gateway roslib || { f=$((f + 1)); note+=" [gateway died]"; }
    record roslib "${p:-0}" "$((${f:-0} + ${c:-0}))" "${t:-0}" 0 "${s:-0}" "$note"
}

# -------------------------------------------------------------- foxglove

run_foxglove() {
    local dir=$CLIENTS/foxglove out=$WORK/foxglove.log
    command -v node >/dev/null && command -v npm >/dev/null || { broken foxglove "node/npm not found"; return; }
    (cd "$dir" && timeout 300 npm ci --no-audit --no-fund --loglevel=error) >"$WORK/foxglove-install.log" 2>&1 ||
        { cat "$WORK/foxglove-install.log" >&2; broken foxglove "npm ci failed"; return; }
    # --foxglove-assets: one package with one file, for the assets test.
    local assets=$WORK/foxglove-assets asset_text="solid rosgate-clients-asset"
    mkdir -p "$assets/robot/meshes"
    printf '%s' "$asset_text" >"$assets/robot/meshes/base.stl"
    start_gateway foxglove --foxglove-assets "$assets" || { broken foxglove "gateway did not start"; return; }
    log "@foxglove/ws-protocol $(cd "$dir" && node -p 'require("./node_modules/@foxglove/ws-protocol/package.json").version' 2>/dev/null || echo '?') tests, node $(node --version) -> ws://127.0.0.1:$FOXGLOVE_PORT and ws://127.0.0.1:$WS_PORT"
    (cd "$dir" && ROSGATE_FOXGLOVE_URL=ws://127.0.0.1:$FOXGLOVE_PORT ROSGATE_WS_URL=ws://127.0.0.1:$WS_PORT \
        ROSGATE_FOXGLOVE_ASSET_TEXT="$asset_text" \
        timeout -k 10 300 node --test --test-concurrency=1 --test-timeout=60000 --test-reporter=spec \
        ./*.test.mjs) >"$out" 2>&1
    local rc=$?
    grep -E '✖' "$out" | grep -v 'failing tests:' | sed 's/^/  /' | sort -u
    local p f c note=
    p=$(node_count pass "$out")
    f=$(node_count fail "$out")
    c=$(node_count cancelled "$out")
    echo "  foxglove: pass ${p:-?} fail ${f:-?} cancelled ${c:-?} (exit $rc)"
    if node_unfinished "$p" "$rc" "$f" "$c"; then
        note="node --test exit $rc, see $out"
        tail -30 "$out" | sed 's/^/  | /'
        f=$((${f:-0} + 1))
    fi
    stop_gateway foxglove || { f=$((f + 1)); note+=" [gateway died]"; }
    record foxglove "${p:-0}" "$((${f:-0} + ${c:-0}))" 0 0 0 "$note"
}

# ------------------------------------------------------------ roslibrust

run_roslibrust() {
    local dir=$CLIENTS/roslibrust out=$WORK/roslibrust.log
    log "waiting for the roslibrust compile"
    wait "$COMPILE_PID"
    local rc=$?
    COMPILE_PID=
    if ((rc != 0)); then
        tail -40 "$WORK/roslibrust-build.log" >&2
        broken roslibrust "cargo test --no-run failed (exit $rc)"
        return
    fi
    # roslibrust's service server answers one call at a time, each through
    # tokio's spawn_blocking: 200 concurrent calls (many_concurrent_calls)
    # are served one after another, and on a busy 2-core machine the last
    # waited past the 5 s default call timeout (the gateway's timeout was
    # right; the queue was the client's). The suite tests what the client
    # sees, not how fast it is: a 30 s timeout.
    start_gateway roslibrust --call-timeout-ms 30000 || { broken roslibrust "gateway did not start"; return; }
    log "roslibrust $(grep -A1 '^name = "roslibrust"$' "$dir/Cargo.lock" | sed -n 's/^version = "\(.*\)"/\1/p') tests -> ws://127.0.0.1:$WS_PORT"
    # One test at a time: some compare the gateway's global counters.
    (cd "$dir" && ROSGATE_WS_URL=ws://127.0.0.1:$WS_PORT CARGO_TARGET_DIR=$RLR_TARGET \
        timeout -k 10 300 cargo test --locked -q -- --test-threads=1) >"$out" 2>&1
    rc=$?
    # A panic's message is the line after "panicked at": show both.
    awk '/^test .* \.\.\. (FAILED|ignored)/ { print } /panicked/ { print; if (getline > 0) print }' "$out" | sed 's/^/  /'
    local p=0 f=0 i=0 line
    while read -r line; do
        p=$((p + $(sed -E 's/.* ([0-9]+) passed.*/\1/' <<<"$line")))
        f=$((f + $(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"$line")))
        i=$((i + $(sed -E 's/.* ([0-9]+) ignored.*/\1/' <<<"$line")))
    done < <(grep -E '^test result: ' "$out")
    echo "  roslibrust: $p passed, $f failed, $i ignored (exit $rc)"
    local note=
    if ((rc != 0 && f == 0)); then
        note="cargo test exit $rc, see $out"
        tail -30 "$out" | sed 's/^/  | /'
        f=1
    fi
    stop_gateway roslibrust || { f=$((f + 1)); note+=" [gateway died]"; }
    # Pending tests are #[ignore = "PENDING: ..."]: counted as expected failures.
    record roslibrust "$p" "$f" "$i" 0 0 "$note"
}

# ------------------------------------------------------------------- run

STARTED=$SECONDS
# ---------------------------------------------------------------- readme

# Runs one README example (a copy pointed at this gateway's port) and checks
# what it prints; returns 0 on success.
run_example() {
    local label=$1 want=$2 out=$WORK/readme-$1.log
    shift 2
    (timeout -k 5 30 "$@") >"$out" 2>&1
    local rc=$?
    if [[ $rc -eq 0 ]] && grep -q "$want" "$out" && grep -q '^heard hello$' "$out"; then
        echo "  readme[$label]: ok"
        return 0
    fi
    echo "  readme[$label]: FAILED (exit $rc), output:"
    sed 's/^/  | /' "$out"
    return 1
}

# Installs roslib (npm) and roslibpy (a venv) for a suite that uses both,
# once (cached afterwards, shared with the roslib and roslibpy suites); on
# failure the suite is marked broken and the install log printed.
install_clients() {
    local suite=$1 log=$WORK/$1-install.log js=$CLIENTS/roslib py=$CLIENTS/roslibpy
    if [[ ! -d $js/node_modules/roslib ]] &&
        ! (cd "$js" && timeout 300 npm ci --no-audit --no-fund --loglevel=error) >"$log" 2>&1; then
        cat "$log" >&2
        broken "$suite" "npm ci failed"
        return 1
    fi
    if [[ ! -x $py/.venv/bin/python ]] && ! {
        python3 -m venv "$py/.venv" && timeout 300 "$py/.venv/bin/python" -m pip install -q \
            --disable-pip-version-check -r "$py/requirements.txt"
    } >>"$log" 2>&1; then
        cat "$log" >&2
        broken "$suite" "pip install failed"
        return 1
    fi
}

run_readme() {
    local js=$CLIENTS/roslib py=$CLIENTS/roslibpy p=0 f=0 note=
    install_clients readme || return
    # The README shows the example files verbatim.
    local file
    for file in examples/add_two_ints.mjs examples/add_two_ints.py; do
        if python3 -c 'import sys; r, f = (open(p).read() for p in sys.argv[1:]); sys.exit(f not in r)' \
                "$ROOT/README.md" "$ROOT/$file"; then
            p=$((p + 1))
        else
            f=$((f + 1))
            note+="[README differs from $file] "
            echo "  readme: the README does not show $file verbatim"
        fi
    done
    start_gateway readme || { broken readme "gateway did not start"; return; }
    # ESM resolves `roslib` from the file's directory: the copy sits beside
    # the roslib suite's node_modules.
    sed "s#ws://127.0.0.1:9090#ws://127.0.0.1:$WS_PORT#" "$ROOT/examples/add_two_ints.mjs" >"$js/.readme-example.mjs"
    sed "s#port=9090#port=$WS_PORT#" "$ROOT/examples/add_two_ints.py" >"$WORK/readme-example.py"
    if run_example roslibjs '^1 + 2 = 3$' node "$js/.readme-example.mjs"; then p=$((p + 1)); else f=$((f + 1)); fi
    if run_example roslibpy '^1 + 2 = 3$' "$py/.venv/bin/python" "$WORK/readme-example.py"; then p=$((p + 1)); else f=$((f + 1)); fi
    rm -f "$js/.readme-example.mjs"
    if ROSGATE_BIN=$BIN timeout -k 5 300 "$ROOT/scripts/readme-cli.sh" --url "tcp://127.0.0.1:$TCP_PORT" \
            >"$WORK/readme-cli.log" 2>&1; then
        echo "  readme[cli]: ok ($(tail -n 1 "$WORK/readme-cli.log"))"
        p=$((p + 1))
    else
        echo "  readme[cli]: FAILED, output:"
        sed 's/^/  | /' "$WORK/readme-cli.log"
        f=$((f + 1))
        note+="[README CLI block] "
    fi
    stop_gateway readme || { f=$((f + 1)); note+="[gateway died] "; }
    record readme "$p" "$f" 0 0 0 "$note"
}

# -------------------------------------------------------------- security

run_security() {
    local py=$CLIENTS/roslibpy js=$CLIENTS/roslib p=0 f=0 xf=0 xp=0 s=0 note= transport out rc
    install_clients security || return
    # Fresh tokens for this run, in a file only we can read.
    local tokens=$WORK/security-tokens.txt admin viewer
    admin=$(python3 -c 'import secrets; print(secrets.token_hex(16))')
    viewer=$(python3 -c 'import secrets; print(secrets.token_hex(16))')
    (umask 077 && printf 'admin %s\nviewer %s\n' "$admin" "$viewer" >"$tokens")
    start_gateway security --auth-tokens "$tokens" || { broken security "gateway did not start"; return; }
    GATEWAY_TOKEN=$admin
    for transport in $ROSLIBPY_TRANSPORTS; do
        out=$WORK/security-roslibpy-$transport.log
        log "roslibpy with tokens, $transport transport -> ws://127.0.0.1:$WS_PORT"
        (cd "$py" && ROSGATE_WS_PORT=$WS_PORT ROSLIBPY_TRANSPORT=$transport ROSGATE_FORCE_EXIT=1 \
            ROSGATE_EXPECTED_FAILURES=/dev/null ROSGATE_ADMIN_TOKEN=$admin ROSGATE_VIEWER_TOKEN=$viewer \
            PYTHONPATH=$py timeout -k 10 300 "$py/.venv/bin/python" -m pytest -p rosgate_plugin \
            -p no:cacheprovider --timeout=60 --timeout-method=signal -q -rfEX \
            --junitxml="$WORK/security-roslibpy-$transport.xml" security) >"$out" 2>&1
        roslibpy_tally "$out" $? "security-roslibpy[$transport]"
    done
    out=$WORK/security-roslib.log
    log "roslib with tokens -> ws://127.0.0.1:$WS_PORT"
    (cd "$js" && ROSGATE_WS_URL=ws://127.0.0.1:$WS_PORT ROSGATE_TCP_ADDR=127.0.0.1:$TCP_PORT \
        ROSGATE_ADMIN_TOKEN=$admin ROSGATE_VIEWER_TOKEN=$viewer \
        timeout -k 10 120 node --test --test-concurrency=1 --test-timeout=60000 --test-reporter=spec \
        security/*.test.mjs) >"$out" 2>&1
    rc=$?
    grep -E '✖' "$out" | grep -v 'failing tests:' | sed 's/^/  /' | sort -u
    local np nf nc
    np=$(node_count pass "$out")
    nf=$(node_count fail "$out")
    nc=$(node_count cancelled "$out")
    echo "  security-roslib: pass ${np:-?} fail ${nf:-?} cancelled ${nc:-?} (exit $rc)"
    p=$((p + ${np:-0}))
    f=$((f + ${nf:-0} + ${nc:-0}))
    if node_unfinished "$np" "$rc" "$nf" "$nc"; then
        f=$((f + 1))
        note+="[security-roslib: node --test exit $rc, see $out] "
        tail -30 "$out" | sed 's/^/  | /'
    fi
    stop_gateway security || { f=$((f + 1)); note+="[gateway died] "; }
    GATEWAY_TOKEN=
    # The tokens were presented hundreds of times: the log holds neither.
    if grep -qF -e "$admin" -e "$viewer" "$WORK/gateway-security.log"; then
        f=$((f + 1))
        note+="[a token is in $WORK/gateway-security.log] "
        echo "  security: a token appears in the gateway's log"
    else
        p=$((p + 1))
        echo "  security: no token in the gateway's log"
    fi
    rm -f "$tokens"
    record security "$p" "$f" "$xf" "$xp" "$s" "$note"
}

# ------------------------------------------------------------------- tls

# Runs one TLS check (label, then the command); counts it in run_tls's p/f.
tls_check() {
    local label=$1 out=$WORK/tls-$1.log
    shift
    if (timeout -k 5 30 "$@") >"$out" 2>&1; then
        p=$((p + 1))
        echo "  tls[$label]: ok ($(tr '\n' ' ' <"$out" | sed 's/ *$//'))"
    else
        f=$((f + 1))
        note+="[$label failed, see $out] "
        echo "  tls[$label]: FAILED, output:"
        sed 's/^/  | /' "$out"
    fi
}

run_tls() {
    local js=$CLIENTS/roslib py=$CLIENTS/roslibpy dir=$WORK/tls p=0 f=0 note=
    command -v openssl >/dev/null || { broken tls "openssl not found"; return; }
    install_clients tls || return
    # A fresh self-signed certificate for localhost, never committed.
    rm -rf "$dir" && mkdir -p "$dir"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
        -keyout "$dir/key.pem" -out "$dir/cert.pem" -days 2 -subj /CN=localhost \
        -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
        -addext "basicConstraints=critical,CA:FALSE" >"$WORK/tls-openssl.log" 2>&1 ||
        { cat "$WORK/tls-openssl.log" >&2; broken tls "openssl could not make a certificate"; return; }
    # Tokens too, as a gateway exposed on a network runs (docs/security.md).
    local token
    token=$(python3 -c 'import secrets; print(secrets.token_hex(16))')
    (umask 077 && printf 'admin %s\n' "$token" >"$dir/tokens.txt")
    start_gateway tls --tls-cert "$dir/cert.pem" --tls-key "$dir/key.pem" \
        --auth-tokens "$dir/tokens.txt" || { broken tls "gateway did not start"; return; }
    GATEWAY_CA=$dir/cert.pem
    GATEWAY_TOKEN=$token
    log "roslibpy and roslib over wss://localhost:$WS_PORT with a token in the URL"
    local transport
    for transport in $ROSLIBPY_TRANSPORTS; do
        tls_check "roslibpy-$transport" env SSL_CERT_FILE="$dir/cert.pem" \
            "$py/.venv/bin/python" "$py/tls_check.py" "$WS_PORT" "$transport" --token "$token"
    done
    # Only the asyncio transport checks certificates (twisted's takes any).
    tls_check roslibpy-untrusted env -u SSL_CERT_FILE \
        "$py/.venv/bin/python" "$py/tls_check.py" "$WS_PORT" asyncio --expect-refused
    tls_check roslib env NODE_EXTRA_CA_CERTS="$dir/cert.pem" \
        node "$js/tls_check.mjs" "wss://localhost:$WS_PORT/?token=$token"
    tls_check roslib-untrusted env -u NODE_EXTRA_CA_CERTS \
        node "$js/tls_check.mjs" "wss://localhost:$WS_PORT/?token=$token" --expect-refused
    # Trusted, but without a token: the gateway closes it.
    tls_check roslib-no-token env NODE_EXTRA_CA_CERTS="$dir/cert.pem" \
        node "$js/tls_check.mjs" "wss://localhost:$WS_PORT/?node=x" --expect-refused
    stop_gateway tls || { f=$((f + 1)); note+="[gateway died] "; }
    GATEWAY_CA=
    GATEWAY_TOKEN=
    record tls "$p" "$f" 0 0 0 "$note"
}

# ------------------------------------------------------------------ ros2

run_ros2() {
    local dir=$CLIENTS/ros2 share=${ROSGATE_ROS_SHARE:-$ROOT/target/ros-interfaces/share}
    local p=0 f=0 xf=0 xp=0 s=0 note="" v venv out rc
    # The definitions the gateway bundles (a no-op when the build fetched them).
    if ! timeout 300 python3 "$ROOT/scripts/ros-interfaces.py" "$(dirname "$share")" >"$WORK/ros2-interfaces.log" 2>&1; then
        broken ros2 "cannot fetch the ROS 2 interfaces (see $WORK/ros2-interfaces.log)"
        return
    fi
    for v in $ROS2_ZENOH_VERSIONS; do
        venv=$dir/.venv-$v
        if [[ ! -x $venv/bin/python ]]; then
            python3 -m venv "$venv" || { f=$((f + 1)); note+="[zenoh $v: no venv] "; continue; }
        fi
        if ! timeout 300 "$venv/bin/python" -m pip install -q --disable-pip-version-check \
            -r "$dir/requirements.txt" "eclipse-zenoh==$v" >"$WORK/ros2-pip-$v.log" 2>&1; then
            f=$((f + 1))
            note+="[zenoh $v: pip install failed, see $WORK/ros2-pip-$v.log] "
            continue
        fi
        out=$WORK/ros2-$v.log
        log "ROS 2 peer (zenoh-ros2-sdk, eclipse-zenoh $v) <-> rosgate ($BIN)"
        ROSGATE_BIN=$BIN ROSGATE_ROS_SHARE=$share timeout -k 10 300 "$venv/bin/python" \
            -m pytest -q -p no:cacheprovider --timeout 120 "$dir/test_ros2_peer.py" >"$out" 2>&1
        rc=$?
        roslibpy_tally "$out" "$rc" "ros2[zenoh $v]"
    done
    record ros2 "$p" "$f" "$xf" "$xp" "$s" "$note"
}

run_bag() {
    local dir=$CLIENTS/bag venv=$CLIENTS/bag/.venv out=$WORK/bag.log p f
    if [[ ! -x $venv/bin/python ]]; then
        python3 -m venv "$venv" || { broken bag "cannot create a venv"; return; }
    fi
    timeout 300 "$venv/bin/python" -m pip install -q --disable-pip-version-check \
        -r "$dir/requirements.txt" >"$WORK/bag-install.log" 2>&1 ||
        { cat "$WORK/bag-install.log" >&2; broken bag "pip install failed"; return; }
    start_gateway bag || { broken bag "gateway did not start"; return; }
    rm -rf "$WORK/bag"
    mkdir -p "$WORK/bag"
    log "rosgate bag <-> rosbags, mcap-ros2-support, roslibpy ($BIN)"
    timeout -k 10 180 "$venv/bin/python" "$dir/check_bag.py" "$BIN" "$WS_PORT" "$WORK/bag" >"$out" 2>&1
    cat "$out" >&2
    p=$(sed -n 's/^passed \([0-9]*\) failed \([0-9]*\)$/\1/p' "$out")
    f=$(sed -n 's/^passed \([0-9]*\) failed \([0-9]*\)$/\2/p' "$out")
    if [[ -z $p ]]; then p=0 f=1; fi
    stop_gateway bag || f=$((f + 1))
    rm -rf "$WORK/bag"
    record bag "$p" "$f" 0 0 0 ""
}

for suite in roslibpy roslib foxglove roslibrust readme security tls ros2 bag; do
    want "$suite" || continue
    t0=$SECONDS
    "run_$suite"
    log "$suite finished in $((SECONDS - t0)) s"
done

echo
echo "Real-client suites against rosgate ($((SECONDS - STARTED)) s):"
printf '  %-11s %7s %7s %17s %16s %8s\n' suite passed failed expected-failures unexpected-pass skipped
TP=0 TF=0 TX=0 TS=0 STATUS=0
for suite in roslibpy roslib foxglove roslibrust readme security tls ros2 bag; do
    want "$suite" || continue
    printf '  %-11s %7s %7s %17s %16s %8s  %s\n' "$suite" "${PASS[$suite]}" "${FAIL[$suite]}" \
        "${XFAIL[$suite]}" "${XPASS[$suite]}" "${SKIP[$suite]}" "${NOTE[$suite]}"
    TP=$((TP + PASS[$suite] + XPASS[$suite]))
    TF=$((TF + FAIL[$suite]))
    TX=$((TX + XFAIL[$suite]))
    TS=$((TS + SKIP[$suite]))
    ((FAIL[$suite] == 0)) || STATUS=1
    ((XPASS[$suite] == 0)) || log "$suite: ${XPASS[$suite]} expected failure(s) passed: update its expected-failure list"
done
echo "clients: $TP passed, $TF failed, $((TX + TS)) skipped"
exit $STATUS
