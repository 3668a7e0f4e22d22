#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each (default 60), one after the other,
# on stable Rust, and prints the executions per target.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]
#
# Uses `cargo fuzz run -s none` (no sanitizer: works on stable). For
# AddressSanitizer, run a target yourself on nightly features:
#   RUSTC_BOOTSTRAP=1 cargo fuzz run TARGET -- -dict=fuzz/json.dict
#
# The seed corpus (fuzz/corpus/TARGET, replayed by tests/replay.rs) is read
# but not written: new inputs go to fuzz/target/corpus/TARGET (git-ignored).
# Crashes land in fuzz/artifacts/TARGET; minimise one with
#   cargo fuzz tmin -s none TARGET fuzz/artifacts/TARGET/crash-...
# and keep it there so tests/replay.rs checks it from then on.
set -euo pipefail

cd "$(dirname "$0")/.."
secs="${1:-60}"
shift || true
targets=("$@")
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "installing cargo-fuzz" >&2
    cargo install cargo-fuzz
fi

if [ ${#targets[@]} -eq 0 ]; then
    # Every target declared in fuzz/Cargo.toml.
    mapfile -t targets < <(cargo fuzz list)
fi

echo "building fuzz targets" >&2
cargo fuzz build -s none

status=0
summary=()
for t in "${targets[@]}"; do
    work="fuzz/target/corpus/$t"
    mkdir -p "$work" "fuzz/artifacts/$t"
    log="fuzz/target/fuzz-$t.log"
    echo "== $t: ${secs}s" >&2
    # Bounded twice: libFuzzer's own limit, and timeout(1) with a margin in
    # case a slow input overruns it.
    if timeout --signal=INT "$((secs + 60))" \
        cargo fuzz run -s none "$t" "$work" "fuzz/corpus/$t" -- \
        -max_total_time="$secs" -dict=fuzz/json.dict -print_final_stats=1 \
        >"$log" 2>&1; then
        result=ok
    else
        result="FAILED (see $log and fuzz/artifacts/$t)"
        status=1
    fi
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
    if [ -z "$execs" ]; then
        execs=$(grep -oE '^#[0-9]+' "$log" | tail -1 | tr -d '#')
    fi
    summary+=("$(printf '%-12s %12s execs  %s' "$t" "${execs:-?}" "$result")")
done

echo
printf '%s\n' "${summary[@]}"
exit $status
