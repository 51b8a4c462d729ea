#!/usr/bin/env bash
# The one benchmark command (issue 7). Installs what it needs (tools/setup.sh,
# tools/setup-bench.sh), then runs, in this order:
#   1. the FMU call overhead (C master via dlopen, Rust direct, fmpy)
#                                          -> benches/peers/results/fmu_overhead.json
#   2. problem by problem: the peers harness (benches/peers: SUNDIALS CVODE / IDA and our
#      integrators on the same engine equations, tolerance sweeps)
#                                          -> benches/peers/results/sundials.json
#      and Exudyn on the same physical models -> benches/peers/results/exudyn.json
#   3. cargo bench --bench rig, bdf_table2, bdf_quarter_car, scaling and suite_matrix when those
#      bench targets exist (each writes its own section)
#   3b. benches/peers' minimal_peers (issue 15): CVODE on hand-written minimal-coordinate C
#      right-hand sides, our FMU through the C ABI in both formulations, Exudyn on the
#      slider-crank, all at communication points -> section minimal_peers of docs/benchmarks.md
#   4. tools/peers/report.py: the `machine`, `peers` and `fmu_overhead` sections of
#      docs/benchmarks.md (ratios ours / peer taken only between rows of this run)
#
# Usage: tools/bench.sh [--quick] [--only LIST] [--problems LIST] [--repeats N] [--no-setup]
#   --quick          dp, slider-crank and chain N = 4 only, 1 run per point (benches with
#                    BENCH_QUICK=1, bdf_table2 at N = 12 only); about 100 s
#   --only LIST      any of peers,exudyn,fmu,rig,bdf_table2,bdf_quarter_car,scaling,suite_matrix,
#                    minimal_peers,report
#                    (default all)
#   --problems LIST  peers problems (dp,slider,chain4,chain8,chain16,chain32,chain64)
#   --repeats N      runs per measured point (default 3; long points are run 3 times at most,
#                    and once when a single run exceeds --budget seconds)
# Cost: see README ("Benchmarks"); SUNDIALS and Exudyn at chain N = 32, 64 dominate.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"

quick=0 only="peers,exudyn,fmu,rig,bdf_table2,bdf_quarter_car,scaling,suite_matrix,minimal_peers,report" problems="" repeats=3 setup=1
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) quick=1 ;;
        --only) only="$2"; shift ;;
        --problems) problems="$2"; shift ;;
        --repeats) repeats="$2"; shift ;;
        --no-setup) setup=0 ;;
        -h|--help) sed -n 2,26p "$0"; exit 0 ;;
        *) echo "bench.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done
want() { [[ ",$only," == *",$1,"* ]]; }

export BENCH_RUN_ID=${BENCH_RUN_ID:-$(date -u +%Y-%m-%dT%H:%M:%SZ)}
load_at_start=$(cut -d' ' -f1-3 /proc/loadavg)
t_start=$(date +%s)
if [ "$quick" = 1 ]; then
    [ -n "$problems" ] || problems="dp,slider,chain4"
    repeats=1
    export BENCH_QUICK=1
fi
[ -n "$problems" ] || problems="dp,slider,chain4,chain8,chain16,chain32,chain64"

if [ "$setup" = 1 ]; then
    bash tools/setup.sh
    bash tools/setup-bench.sh
fi
py="$here/.venv/bin/python"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$here/target}
# The peers crate is its own workspace (own lock file) and builds mbsfmu itself. Its own target
# directory: mbsfmu is a cdylib + rlib, whose files carry no hash, so a peers build in the root's
# target directory overwrites the root's libmbsfmu.rlib with one linked against the peers' copy of
# fmi-sys, and the root's benches then fail to link (duplicate symbol `callback_log`).
export PEERS_TARGET_DIR=${PEERS_TARGET_DIR:-$CARGO_TARGET_DIR/peers}
mkdir -p benches/peers/results
failed=()
step() { echo; echo "=== bench.sh: $* ($(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg))"; }

if want fmu; then
    step "FMU call overhead"
    bash tools/fmu-overhead.sh "$([ "$quick" = 1 ] && echo 3 || echo 7)" || failed+=(fmu)
fi
# Problem by problem, the peers harness and Exudyn back to back: a run cut short still leaves
# complete, pairable problems (ratios are formed within one run only).
if want peers; then
    (cd benches/peers && CARGO_TARGET_DIR="$PEERS_TARGET_DIR" cargo build --release --quiet)
fi
for p in ${problems//,/ }; do
    if want peers; then
        step "peers harness, $p: SUNDIALS and ours"
        args=(--problems "$p" --repeats "$repeats" --budget 60)
        [ "$quick" = 1 ] && args+=(--max-run 5)
        "$PEERS_TARGET_DIR/release/mbsfmu-peers" "${args[@]}" || failed+=("peers:$p")
    fi
    if want exudyn; then
        step "Exudyn, $p"
        "$py" -W ignore tools/peers/exudyn_bench.py --problems "$p" --repeats "$repeats" --budget 60 \
            || failed+=("exudyn:$p")
    fi
done
# Bench targets other parts of the project add; each rewrites its own section.
has_bench() { grep -A2 '^\[\[bench\]\]' Cargo.toml | grep -q "^name = \"$1\""; }
for b in rig bdf_table2 bdf_quarter_car scaling suite_matrix; do
    want "$b" || continue
    if ! has_bench "$b"; then
        step "cargo bench --bench $b: no such bench target in Cargo.toml, skipped"
        continue
    fi
    step "cargo bench --bench $b"
    if [ "$b" = bdf_table2 ] && [ "$quick" = 1 ]; then
        cargo bench --bench "$b" -- 12 || failed+=("$b")
    else
        cargo bench --bench "$b" || failed+=("$b")
    fi
done
if want minimal_peers; then
    step "minimal_peers: CVODE on minimal-coordinate C, ours through the C ABI, Exudyn (issue 15)"
    mp=(--repeats "$repeats")
    [ "$quick" = 1 ] && mp+=(--cases dp10,slider10 --methods bdf --print)
    if cargo build --release --lib --quiet \
        && (cd benches/peers && CARGO_TARGET_DIR="$PEERS_TARGET_DIR" cargo build --release --quiet --bin minimal_peers); then
        PEERS_PYTHON="$py" MBSFMU_LIB="$CARGO_TARGET_DIR/release/libmbsfmu.so" \
            "$PEERS_TARGET_DIR/release/minimal_peers" "${mp[@]}" || failed+=(minimal_peers)
    else
        failed+=(minimal_peers)
    fi
fi
if want report; then
    step "docs/benchmarks.md: machine, peers, fmu_overhead"
    "$py" tools/peers/report.py --run-id "$BENCH_RUN_ID" --load "$load_at_start" \
        --duration "$(( $(date +%s) - t_start ))" || failed+=(report)
fi
echo
echo "bench.sh: run $BENCH_RUN_ID done in $(( $(date +%s) - t_start )) s (load at start $load_at_start)"
if [ ${#failed[@]} -gt 0 ]; then
    echo "bench.sh: failed: ${failed[*]}" >&2
    exit 1
fi
