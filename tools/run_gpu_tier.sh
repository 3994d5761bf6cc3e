#!/usr/bin/env bash
# The GPU tier, in one call on a GPU machine (e.g. the H200): environment facts, the `gpu` tests,
# porter check on every example (plain, --native, --sanitize), the scripted port, the gate
# benchmark and raw profiler outputs for the parser fixtures. Logs go to $OUT (or ./gpu-logs),
# at most 8 files. Runs from a source checkout with PYTHONPATH: litellm and git are not imported.
#   tools/run_gpu_tier.sh [all | tests | tests-a | tests-b | cuda12 | checks | bench]
# tests: the gpu tests (over 9 minutes on the H200 since #28's checks: split it); tests-a: the attacks
# and the examples' gate tests; tests-b: the rest; cuda12: the gpu tests with CUDA 12's ptxas;
# checks: porter check on every example, the scripted port, the benchmark, the captures (about 4);
# bench: #32's figures alone (the gate benchmark, verdicts a minute for a round of 8 with 3 and 4
# workers over the same nine rounds, the emulator's calibration), about 2.5 minutes on an H100 (2026-12-06).
# tests-a, tests-b and checks each fit one 10-minute call; `all` does not. Each failure is written
# to $OUT/failures.txt as it happens (PORTER_FAILURE_LOG): a part cut by the machine's limit keeps them.
set -uo pipefail
PART=${1:-all}
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PORTER_CACHE_DIR=${PORTER_CACHE_DIR:-/tmp/porter-cache}
OUT=${OUT:-$PWD/gpu-logs}; mkdir -p "$OUT"
{
  date -u; nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader
  python3 -c 'import cupy, numpy; print("cupy", cupy.__version__, "numpy", numpy.__version__)'
  python3 -m porter doctor
} 2>&1 | tee "$OUT/env.txt"
# The optional extras' GPU tests (pool over dask, MCP) need their packages: from ./.wheels when absent.
python3 -c 'import mcp, distributed' 2> /dev/null || python3 -m pip install -q --no-index --find-links .wheels \
  mcp dask distributed 2>&1 | tail -2
# Every GPU test in one pytest spread over 6 processes (pytest-xdist, which the GPU image has; one
# process where it is missing): the GPU lock (porter/gate/runner/gpulock.py) keeps each timing run
# alone, so the ratios are those of a quiet GPU. On the H200 (2026-12-04) the CUDA 12 tier took
# 479 s this way; three hand-made groups at once took over 600 s, the example checks of
# test_gate_gpu.py holding the last group up. With CUDA 12's ptxas (tools/cuda12_ptxas.sh .cuda12,
# carried) the whole tier runs a second time on its cubins. JUnit files and logs go into one
# archive ($OUT takes few files).
LOGS=$(mktemp -d)
PARALLEL=()
python3 -c 'import xdist' 2> /dev/null && PARALLEL=(-n 6 -p no:benchmark)
GROUP_A=(tests/test_attacks_gpu.py tests/test_gate_gpu.py tests/test_cuda_releases.py)
# every other file with gpu tests (found, not listed: a new one cannot be left out)
mapfile -t GROUP_B < <(grep -l "mark.gpu" tests/test_*.py | grep -v -x -F "${GROUP_A[@]/#/-e}" | sort)
export PORTER_FAILURE_LOG=$OUT/failures.txt
tier() { # name cuda_home test paths...
  local name=$1 home=$2
  shift 2
  PORTER_CUDA_HOME=$home PORTER_CACHE_DIR=$PORTER_CACHE_DIR/$name python3 -m pytest -q -m gpu -p no:cacheprovider \
    "${PARALLEL[@]}" -rfEs --durations=15 --junitxml="$LOGS/$name.xml" "$@" > "$LOGS/$name.txt" 2>&1
  echo "$name: $(tail -1 "$LOGS/$name.txt")"
}
if [ "$PART" = bench ]; then
  # each part under its own limit, so that one running long leaves the others' figures in a 10-minute call
  timeout 220 python3 tools/bench_gate.py --repeats 3 --profile /tmp/gate-profile 2>&1 | tee "$OUT/bench-gate.txt"
  tar czf "$OUT/gate-profile.tgz" -C /tmp gate-profile
  timeout 240 python3 tools/bench_throughput.py --candidates 8 --per-gpu 3,4 --rounds 9 --no-sequential \
    --json "$OUT/throughput.json" 2>&1 | tail -12 | tee "$OUT/bench-throughput.txt"
  # the whole table (examples, fixtures and the instruction corpus); its out-of-bound rows on screen
  timeout 180 python3 tools/emu_calibrate.py "$OUT/emu.json" > "$OUT/emu-calibrate.txt" 2>&1
  grep -E "^GPU|False|WRONG|ERROR" "$OUT/emu-calibrate.txt" | cut -c1-200
  exit 0
fi
{
  case $PART in  # the toolchain porter picks, or the one named
    all|tests) tier tests "${PORTER_CUDA_HOME:-}" tests/ ;;
    tests-a) tier tests-a "${PORTER_CUDA_HOME:-}" "${GROUP_A[@]}" ;;
    tests-b) tier tests-b "${PORTER_CUDA_HOME:-}" "${GROUP_B[@]}" ;;
  esac
  if { [ "$PART" = all ] || [ "$PART" = cuda12 ]; } && [ -x .cuda12/bin/ptxas ]; then
    tier cuda12 "$PWD/.cuda12" tests/
  fi
  grep -h -A20 "short test summary" "$LOGS"/*.txt | cut -c1-300
} 2>&1 | tee "$OUT/gpu-tests.txt"
tar czf "$OUT/gpu-tests.tgz" -C "$LOGS" .
[ "$PART" = all ] || [ "$PART" = checks ] || exit 0
{
  for ex in examples/*/porter.toml; do
    for k in "$(dirname "$ex")"/kernel*.ptx; do python3 -m porter check "$k" --against "$k"; done
  done
  k=examples/gemm_bt_tile/kernel_sm80.ptx
  for flags in "" "--native" "--sanitize"; do
    python3 -m porter check $k --arch sm_90a --no-timing $flags --json > /tmp/v.json
    python3 -c "import json; v=json.load(open('/tmp/v.json')); print('check $flags:', v['status'], round(v['wall_s'], 2), 's;', [(g['name'], g['status'], g['summary'][:90]) for g in v['gates'][3:]])"
  done
} 2>&1 | tee "$OUT/checks.txt"
rm -rf /tmp/port-demo && mkdir -p /tmp/port-demo && cp -r examples/gemm_bt_tile /tmp/port-demo/ && git -C /tmp/port-demo init -q && git -C /tmp/port-demo add -A && git -C /tmp/port-demo -c user.name=porter -c user.email=porter@localhost commit -qm demo
python3 -m porter port /tmp/port-demo/gemm_bt_tile/kernel_sm80.ptx --to sm_90a \
  --model replay:examples/gemm_bt_tile/scripted_session.toml 2>&1 | tee "$OUT/port-scripted.txt"; git -C /tmp/port-demo show "$(git -C /tmp/port-demo for-each-ref --format='%(refname:short)' 'refs/heads/porter/*' | head -1)":gemm_bt_tile/PORT_REPORT.md > "$OUT/PORT_REPORT.md"
python3 tools/bench_gate.py --repeats 5 2>&1 | tee "$OUT/bench-gate.txt"
mkdir -p /tmp/cap && python3 tools/capture_profiler_outputs.py /tmp/cap > /dev/null 2>&1; tar czf "$OUT/captures.tgz" -C /tmp cap
