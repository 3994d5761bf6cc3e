"""Matching a spec against PTX: whether the params the spec (or a step of its hot loop) passes
agree with a PTX entry's in number, byte width and float versus integer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from porter.gate.dtypes import DType
from porter.gate.spec.model import Spec
from porter.gate.spec.types import POINTER_BYTES, TENSORMAP_BYTES, ParamSpec

if TYPE_CHECKING:
    from porter.ptx.model import Entry, PtxModule


def _describe(kind: str, dtype: DType | None) -> str:
    if kind == "scalar":
        return f"{dtype} scalar"
    if kind == "tensormap":
        return "tensor map (CUtensorMap)"
    return f"{dtype} buffer pointer" if kind == "buffer" else "scratch pointer"


def check_against_entry(spec: Spec, entry: Entry) -> list[str]:
    """How the spec's params disagree with a PTX entry's (count, byte width, float vs integer).

    Buffers and scratch are 8-byte pointers; a scalar is as wide as its dtype. An empty list means
    they agree as far as PTX can tell.
    """
    problems = []
    if entry.name != spec.entry:
        problems.append(f"the spec's kernel.entry is {spec.entry!r} but the PTX entry is {entry.name!r}")
    return problems + _param_problems(list(spec.params), entry, "params", "the spec lists")


def check_against_module(spec: Spec, module: PtxModule) -> list[str]:
    """:func:`check_against_entry` for every kernel of the hot loop: each step's entry is in the
    module and takes the step's ``args``, in order."""
    if not spec.kernels:
        return check_against_entry(spec, module.entry(spec.entry))
    problems = []
    names = ", ".join(e.name for e in module.kernels) or "none"
    for i, step in enumerate(spec.kernels):
        if not step.entry:
            continue
        try:
            entry = module.entry(step.entry)
        except KeyError:
            problems.append(f"kernels[{i}]: no .entry {step.entry!r} in the module (entries: {names})")
            continue
        params = [spec.param(name) for name in step.args]
        problems += _param_problems(params, entry, f"kernels[{i}].args", f"kernels[{i}] passes")
    return problems


def _param_problems(params: list[ParamSpec], entry: Entry, key: str, listing: str) -> list[str]:
    problems = []
    if len(params) != len(entry.params):
        problems.append(f"{listing} {len(params)} params but .entry {entry.name} has {len(entry.params)}")
    for i, (p, ptx) in enumerate(zip(params, entry.params, strict=False)):
        name, kind, dtype = p.name, p.kind, p.dtype
        width = (dtype.itemsize if kind == "scalar" and dtype is not None
                 else TENSORMAP_BYTES if kind == "tensormap" else POINTER_BYTES)
        ptx_text = f"{ptx.type}[{ptx.array_size}]" if ptx.array_size else ptx.type
        ptx_float = ptx.type.startswith(".f")
        ptx_int = ptx.type[1:2] in ("s", "u")
        spec_float = kind == "scalar" and dtype is not None and dtype.is_float
        if ptx.size_bytes != width:
            problems.append(
                f"{key}[{i}] {name!r}: {_describe(kind, dtype)} of {width} bytes, but PTX param "
                f"{ptx.name} is {ptx_text} ({ptx.size_bytes} bytes)"
            )
        elif (ptx_float and not spec_float) or (ptx_int and spec_float):
            problems.append(
                f"{key}[{i}] {name!r}: {_describe(kind, dtype)}, but PTX param {ptx.name} is {ptx_text}"
            )
        elif kind == "tensormap" and (ptx.align or 1) < 64:
            problems.append(
                f"{key}[{i}] {name!r}: a tensor map must be 64-byte aligned "
                f"(.param .align 64 .b8 {ptx.name}[128]), but PTX param {ptx.name} has align {ptx.align or 1}"
            )
    return problems
