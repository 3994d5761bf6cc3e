#!/usr/bin/env bash
# Put CUDA 12's ptxas at DIR/bin/ptxas (default DIR: .cuda12, which git ignores), for
# `PORTER_CUDA_HOME=DIR` or `porter --toolchain DIR` on a machine that cannot reach a package index
# (the GPU machine): make the folder here and carry it there. The binary is the one of the
# nvidia-cuda-nvcc-cu12 wheel (35 MB, static): taken from this Python's site-packages when the
# wheel is installed (the dev and cuda12 extras install it), else downloaded with pip.
#   usage: tools/cuda12_ptxas.sh [DIR] [VERSION]     (VERSION: 12.9.86 when downloading)
set -euo pipefail
dest=${1:-.cuda12}
version=${2:-12.9.86}
python=${PYTHON:-python3}
mkdir -p "$dest/bin"
installed=$("$python" - <<'PY'
import sys
from pathlib import Path
for entry in sys.path:
    candidate = Path(entry or ".") / "nvidia" / "cuda_nvcc" / "bin" / "ptxas"
    if entry and candidate.is_file():
        print(candidate)
        break
PY
)
if [ -n "$installed" ] && [ -z "${2:-}" ]; then
  cp "$installed" "$dest/bin/ptxas"
else
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  "$python" -m pip download -q --no-deps "nvidia-cuda-nvcc-cu12==$version" -d "$tmp"
  "$python" - "$tmp" "$dest/bin/ptxas" <<'PY'
import shutil, sys, zipfile
from pathlib import Path
(wheel,) = Path(sys.argv[1]).glob("*.whl")
with zipfile.ZipFile(wheel) as archive, archive.open("nvidia/cuda_nvcc/bin/ptxas") as src, open(sys.argv[2], "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
fi
chmod 755 "$dest/bin/ptxas"
"$dest/bin/ptxas" --version | tail -2 | head -1
echo "PORTER_CUDA_HOME=$(cd "$dest" && pwd)"
