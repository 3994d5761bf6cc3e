#!/usr/bin/env bash
# The GPU tier, in one call on a GPU machine (e.g. the H200): environment facts, the `gpu` tests,
# `porter check` on every example, and the gate benchmark. Logs go to $OUT (or ./gpu-logs).
# Runs from a source checkout with PYTHONPATH (no install needed; litellm etc. are not imported).
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PORTER_CACHE_DIR=${PORTER_CACHE_DIR:-/tmp/porter-cache}
OUT=${OUT:-$PWD/gpu-logs}; mkdir -p "$OUT"
{
  date -u; nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader
  python3 -c 'import cupy, numpy; print("cupy", cupy.__version__, "numpy", numpy.__version__)'
  python3 -m porter doctor
} 2>&1 | tee "$OUT/env.txt"
python3 -m pytest -q -m gpu -p no:cacheprovider "${@:-tests}" 2>&1 | tee "$OUT/gpu-tests.txt"
for ex in examples/*/porter.toml; do
  d=$(dirname "$ex"); k=$(ls "$d"/kernel*.ptx | head -1)
  python3 -m porter check "$k" --against "$k" 2>&1 | tee "$OUT/check-$(basename "$d").txt"
done
python3 tools/bench_gate.py --repeats 5 2>&1 | tee "$OUT/bench-gate.txt"
