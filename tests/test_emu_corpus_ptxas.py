"""Every kernels.ptx of the emulator's corpus (tests/emu_corpus.py) assembles with ptxas for the
target its ``.target`` line names: the corpus holds only PTX the GPU would run."""

from __future__ import annotations

import os
import re
import subprocess
from typing import Any

import pytest
from emu_corpus import CORPUS

TOPICS = sorted(p for p in CORPUS.iterdir() if (p / "kernels.ptx").is_file())


@pytest.mark.parametrize("folder", TOPICS, ids=[p.name for p in TOPICS])
def test_corpus_ptx_assembles(folder: Any, toolchain: Any) -> None:
    ptx = folder / "kernels.ptx"
    target = re.search(r"^\.target\s+(sm_\w+)", ptx.read_text(), re.MULTILINE)
    assert target, f"{ptx} names no .target"
    run = subprocess.run([str(toolchain.ptxas.path), f"-arch={target.group(1)}", str(ptx), "-o", os.devnull],
                         capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
