#!/usr/bin/env bash
# The project's benchmark gate on the small generated set synth-sift-20k: measure ivf beside
# faiss-ivf-flat (plus the baseline headline's parameters), then gate recall (absolute, at the
# baseline's parameters) and the ivf/faiss-ivf-flat QPS ratio (against the baseline's ratio).
# Usage: benchmarks/ci_gate.sh [OUT_DIR]      (exit 0 pass, 1 regression, 2 bad usage)
set -euo pipefail
cd "$(dirname "$0")/.."
VDBBENCH=${VDBBENCH:-vdbbench}
BASE=benchmarks/baselines/synth-sift-20k
OUT=${1:-vdbbench-results/ci-gate}
rc=0
$VDBBENCH run --index ivf --dataset synth-sift-20k --compare faiss-ivf-flat --threads 1 --mode batch \
    --repeats 7 --stat best --baseline "$BASE/ivf.json" --out "$OUT" || rc=$?
[ "$rc" -le 1 ] || exit "$rc"   # 1 = target missed: still gate, so the failing rule is printed
# QPS tolerance: 10% suits a dedicated runner; on a shared one (several jobs per core) the
# ratio itself moves by 20-30% between runs, so allow MAX_QPS_DROP there.
$VDBBENCH gate "$OUT/ivf.json" --baseline "$BASE/ivf.json" --peer faiss-ivf-flat --max-qps-drop "${MAX_QPS_DROP:-0.10}"
