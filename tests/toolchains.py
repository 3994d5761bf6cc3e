"""Every ptxas release this machine has, for tests that run once per CUDA release.

The README's test command installs the ``dev`` extra, which brings CUDA 12's ptxas (the
``nvidia-cuda-nvcc-cu12`` wheel) beside the ``cuda13`` extra's: so the suite checks what porter
does with each, on every machine that runs it, CI included. Each release is named by the folder
that ``--toolchain`` / ``PORTER_CUDA_HOME`` would take to force it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from porter.ptx.isa import release_of
from porter.ptx.toolchain import Toolchain, find_copies, find_toolchain


@dataclass(frozen=True)
class Release:
    version: str  # ptxas's, "12.9.86"
    home: Path  # the folder to give --toolchain

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])

    def toolchain(self, cache_dir: Path | None = None) -> Toolchain:
        env = {**os.environ, "PORTER_CUDA_HOME": str(self.home)}
        if cache_dir is not None:
            env["PORTER_CACHE_DIR"] = str(cache_dir)
        return find_toolchain(env, driver=None)

    def env(self) -> dict[str, str]:
        """The environment that makes a porter command use this release."""
        return {**os.environ, "PORTER_CUDA_HOME": str(self.home)}


@cache
def releases() -> tuple[Release, ...]:
    """One per CUDA release (major.minor) of the ptxas copies porter can see, in search order."""
    found: dict[str, Release] = {}
    for ptxas in find_copies("ptxas"):
        release = release_of(ptxas.version)
        if release is None or release in found:
            continue
        home = ptxas.path.parent.parent if ptxas.path.parent.name == "bin" else ptxas.path.parent
        found[release] = Release(ptxas.version, home)
    return tuple(found.values())


def ids() -> list[str]:
    return [f"ptxas-{r.version}" for r in releases()]
