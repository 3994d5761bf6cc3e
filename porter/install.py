"""How to install what porter lacks: every hint porter prints comes from here, so that ``porter
doctor``, ``porter inspect`` and the errors agree.

porter is installed from its source checkout (the name ``porter-kernels`` is not published on
PyPI), so a hint names the checkout's extra, as the README does: ``pip install -e '.[cuda13]'``.
"""

from __future__ import annotations

CUDA_EXTRAS = "cuda13"  # the extra with the CUDA 13 toolchain and CuPy; "cuda12" for CUDA 12 drivers

# What brings each tool or package, where an extra does.
_EXTRA_OF = {"ptxas": CUDA_EXTRAS, "nvdisasm": CUDA_EXTRAS, "cuobjdump": CUDA_EXTRAS, "cupy": CUDA_EXTRAS,
             "dask": "cluster", "mcp": "mcp"}
_OTHERWISE = {
    "ncu": "install Nsight Compute from the CUDA toolkit (needed for executed-instruction evidence)",
    "compute-sanitizer": "install compute-sanitizer from the CUDA toolkit (needed for --sanitize)",
    "litellm": "pip install litellm   (needed only for model-driven ports)",
}


def extra_hint(extra: str) -> str:
    """The command that installs one of porter's extras, from porter's source checkout."""
    return f"pip install -e '.[{extra}]' in porter's source checkout"


def install_hint(what: str) -> str:
    """How to install ``what`` (a tool or package porter uses); KeyError for one porter does not know."""
    if what in _OTHERWISE:
        return _OTHERWISE[what]
    extra = _EXTRA_OF[what]
    cuda12 = " (CUDA 12 drivers: '.[cuda12]')" if extra == CUDA_EXTRAS else ""
    return extra_hint(extra) + cuda12
