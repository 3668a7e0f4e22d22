# Shared set-up of scripts/load.sh, compare.sh and compare-federation.sh; source it.
#
# bench_env NAME NEED_FDS: raises the open-file limit to the hard limit
# (the tool and the servers hold NEED_FDS sockets) and sets PIN_SRV and
# PIN_LOAD to taskset prefixes putting the server on core 0 and the load
# tool on core 1, or to nothing where that is impossible.
bench_env() {
    local name=$1 need=$2
    ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
    if (($(ulimit -n) < need)); then
        echo "$name: open-file limit $(ulimit -n) is too low (need $need)" >&2
        exit 1
    fi
    PIN_SRV=()
    PIN_LOAD=()
    if command -v taskset >/dev/null && (($(nproc) >= 2)); then
        PIN_SRV=(taskset -c 0)
        PIN_LOAD=(taskset -c 1)
    else
        echo "$name: taskset or a second core unavailable; running unpinned" >&2
    fi
}

# median_of RESULTS ROW SERVER JQ-EXPR: the median of JQ-EXPR over the
# clean runs (`.ok == true`) of ROW against SERVER in RESULTS (one JSON
# result per line, as scripts/compare.sh and compare-federation.sh write
# them); nothing when there is none.
median_of() {
    jq -r --arg row "$2" --arg srv "$3" \
        "select(.row == \$row and .server == \$srv and .ok == true) | ($4) // empty" "$1" |
        sort -g | awk '{ v[NR] = $1 } END {
            if (NR == 0) exit
            if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# fmt KIND VALUE: VALUE for a table cell (rate: M/s, k/s; us: us or ms;
# kib; mbs: MB/s); nothing when VALUE is empty.
fmt() {
    [[ -z $2 ]] && return 0
    awk -v k="$1" -v v="$2" 'BEGIN {
        if (k == "rate") {
            if (v >= 1e6) printf "%.2fM/s", v / 1e6
            else if (v >= 1e3) printf "%.1fk/s", v / 1e3
            else printf "%.0f/s", v
        } else if (k == "us") {
            if (v >= 1000) printf "%.2f ms", v / 1000; else printf "%.1f us", v
        } else if (k == "kib") printf "%.2f KiB", v
        else if (k == "mbs") printf "%.0f MB/s", v
        else printf "%s", v }'
}

# other_of RESULTS ROW: the median CPU (% of one core) other processes used
# during ROW's runs, as "12%"; nothing when no run recorded it.
other_of() {
    local v
    v=$(jq -r --arg row "$2" 'select(.row == $row) | .other_cpu_pct // empty' "$1" |
        sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }')
    if [[ -n $v ]]; then
        printf '%.0f%%' "$v"
    fi
}
