#!/usr/bin/env bash
# Transcripts of porter in a developer's terminal, one file each in $OUT (default ./demo-logs):
#   mcp.txt     a coding agent's MCP client lists porter's tools and gets a Verdict from `check`
#               (examples/gemm_bt_tile/kernel_sm90a.ptx --native; a bad path gives an MCP error)
#   resume.txt  a scripted port interrupted by SIGINT (as Ctrl-C), then `porter port --resume`, beside
#               the same port uninterrupted
#   steer.txt   a scripted port steered from a pseudo-terminal: a hint, an edit in $EDITOR, and (a
#               second port) an accept
# With a GPU (nvidia-smi answers) the ports are the real gemm_bt_tile scripted session. Without one,
# the interrupted port is vector_add on the tests' GPU double (tests/porter_with_doubles.py), so that
# it can pass on a CPU, and the steered one ends `not run on target hardware`, as it must there.
# Needs the mcp package for mcp.txt: installed from ./.wheels when it is not importable.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PYTHON:-python3}
export PYTHONPATH=$ROOT PYTHONUNBUFFERED=1 PORTER_CACHE_DIR=${PORTER_CACHE_DIR:-/tmp/porter-demo-cache}
unset PORTER_MODEL
OUT=${OUT:-$ROOT/demo-logs}; mkdir -p "$OUT"
WORK=$(mktemp -d /tmp/porter-demo.XXXXXX)
GEMM=$ROOT/examples/gemm_bt_tile
SCRIPT=$GEMM/scripted_session.toml
if nvidia-smi > /dev/null 2>&1; then HAVE_GPU=1; else HAVE_GPU=0; fi
run_id() { (cd "$1" && "$PY" -m porter runs --json | "$PY" -c 'import json,sys; print(json.load(sys.stdin)[-1]["id"])'); }
copy_gemm() { mkdir -p "$1" && cp "$GEMM"/{kernel_sm80.ptx,porter.toml,ref.py} "$1"/; }

# -- MCP -----------------------------------------------------------------------------------------
if ! "$PY" -c 'import mcp' 2> /dev/null && [ -d .wheels ]; then
  "$PY" -m pip install -q --no-index --find-links .wheels mcp 2>&1 | tail -2
fi
{
  echo "\$ python3 tools/mcp_demo.py examples/gemm_bt_tile/kernel_sm90a.ptx --native --bad-path"
  "$PY" tools/mcp_demo.py examples/gemm_bt_tile/kernel_sm90a.ptx --native --bad-path
  echo "[exit $?]"
} > "$OUT/mcp.txt" 2>&1

# -- interrupted and resumed -----------------------------------------------------------------------
{
  if [ "$HAVE_GPU" = 1 ]; then
    for d in whole cut; do copy_gemm "$WORK/$d"; done
    PORT=("$PY" -m porter port kernel_sm80.ptx --to sm_90a --model "replay:$SCRIPT" --no-branch)
    AT="candidate 2 (model, round 2): checking"
  else
    echo "(no GPU here: vector_add on the tests' GPU double, where only one kernel is right)"
    for d in whole cut; do
      mkdir -p "$WORK/$d"
      "$PY" -c "import sys; sys.path.insert(0, 'tests'); from pathlib import Path; from port_doubles import *; \
vector_add_copy(Path('$WORK/$d')); scripted_vector_add(Path('$WORK/$d/replies.toml'))"
    done
    PORT=("$PY" "$ROOT/tests/porter_with_doubles.py" port kernel.ptx --to sm_90 --model replay:replies.toml --no-branch)
    AT="candidate 1: failed"
    export PORTER_TEST_SLOW_FROM=1  # the double's model takes its time over reply 2: Ctrl-C lands there
  fi
  echo "== the port, uninterrupted"
  (cd "$WORK/whole" && env -u PORTER_TEST_SLOW_FROM "${PORT[@]}" 2>&1 | grep -E "^porter: |^porter port:|^best:")
  echo; echo "== the same port, interrupted: \$ ${PORT[*]}  (SIGINT at \"$AT\")"
  (cd "$WORK/cut" && "$PY" "$ROOT/tools/demo_interrupt.py" --at "$AT" -- "${PORT[@]}" | grep -E "^porter|^\[")
  unset PORTER_TEST_SLOW_FROM
  ID=$(run_id "$WORK/cut")
  echo; echo "\$ porter runs"; (cd "$WORK/cut" && "$PY" -m porter runs)
  echo; echo "\$ cat .porter/runs/$ID/result.json"; cat "$WORK/cut/.porter/runs/$ID/result.json"
  if [ "$HAVE_GPU" = 1 ]; then RESUME=("$PY" -m porter); else RESUME=("$PY" "$ROOT/tests/porter_with_doubles.py"); fi
  echo; echo "== \$ porter port --resume $ID --no-branch"
  (cd "$WORK/cut" && "${RESUME[@]}" port --resume "$ID" --no-branch 2>&1 | grep -E "^porter: |^porter port:|^best:")
  echo "[exit ${PIPESTATUS[0]}]"
  echo; echo "\$ porter runs"; (cd "$WORK/cut" && "$PY" -m porter runs)
} > "$OUT/resume.txt" 2>&1

# -- steered -------------------------------------------------------------------------------------
{
  copy_gemm "$WORK/steer"
  STEER=("$PY" -m porter port kernel_sm80.ptx --to sm_90a --model "replay:$SCRIPT" --interactive --no-branch)
  echo "== a hint after the retarget, then the developer's own kernel (examples/gemm_bt_tile/kernel_sm90a.ptx) as an edit"
  echo "\$ ${STEER[*]}"
  (cd "$WORK/steer" && "$PY" "$ROOT/tools/demo_steer.py" \
    --answer "h:Use wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 with one consumer warpgroup" \
    --answer "e:$GEMM/kernel_sm90a.ptx" -- "${STEER[@]}"; echo "[exit $?]")
  ID=$(run_id "$WORK/steer")
  echo; echo "the hint in the run record (session.json), and the end of the prompt round 1 was sent:"
  "$PY" -c "import json; s = json.load(open('$WORK/steer/.porter/runs/$ID/session.json')); print(s['hints']); \
print('...', s['messages'][1]['content'][-300:])"
  ls "$WORK/steer/.porter/runs/$ID/messages/"
  copy_gemm "$WORK/accept"
  echo; echo "== a second port: go on after the retarget, then accept after candidate 1"
  (cd "$WORK/accept" && "$PY" "$ROOT/tools/demo_steer.py" --answer c --answer a -- "${STEER[@]}"; echo "[exit $?]")
} > "$OUT/steer.txt" 2>&1
echo "transcripts in $OUT: $(ls "$OUT" | tr '\n' ' ')"
rm -rf "$WORK"
