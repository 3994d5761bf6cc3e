"""Triton's compile metadata: the ``<kernel>.json`` that Triton's cache keeps beside ``<kernel>.ptx``.

Triton (3.x) writes, per compiled kernel, ``name``, ``num_warps``, ``num_ctas``, ``shared`` (the
dynamic shared memory the launch must give, in bytes), ``global_scratch_size`` /
``profile_scratch_size`` (bytes per program of the two scratch pointers its launcher appends after
the kernel's own arguments, null when 0), ``target`` and ``triton_version``; older releases also
``cluster_dims``. Triton's launcher runs ``num_warps * 32`` threads a block, clusters of
``(num_ctas, 1, 1)`` and ``num_ctas`` times the program grid along x, and allocates each scratch
buffer as ``size * programs * num_ctas`` bytes.

A ``.json`` that does not parse or lacks ``name`` and ``shared`` is not Triton's and is read as no metadata
(with the reason, for the caller to show); one that names another kernel is not this kernel's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class TritonMetadata:
    path: Path
    name: str
    num_warps: int | None  # None when the file does not say
    num_ctas: int
    shared: int  # dynamic shared memory, bytes
    warp_size: int = 32
    cluster_dims: tuple[int, int, int] | None = None  # only older Triton writes it
    global_scratch_size: int = 0  # bytes per program
    profile_scratch_size: int = 0
    target: str | None = None  # "sm_90" from {"backend": "cuda", "arch": 90}
    triton_version: str | None = None
    launch_pdl: bool = False
    launch_cooperative_grid: bool = False

    @property
    def block(self) -> tuple[int, int, int] | None:
        return (self.num_warps * self.warp_size, 1, 1) if self.num_warps else None

    @property
    def cluster(self) -> tuple[int, int, int]:
        return self.cluster_dims or (self.num_ctas, 1, 1)


def _int(data: dict[str, object], key: str, default: int | None = None) -> int | None:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def read_triton_metadata(ptx: Path, entry: str | None = None) -> tuple[TritonMetadata | None, str]:
    """The metadata beside ``ptx`` (same stem, ``.json``) and ``""``; or None and why there is none
    (``""`` when there is simply no such file)."""
    meta = ptx.with_suffix(".json")
    if not meta.is_file():
        return None, ""
    try:
        data = json.loads(meta.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as err:
        return None, f"{meta.name} is not JSON ({type(err).__name__}), ignored"
    if not isinstance(data, dict) or not isinstance(data.get("name"), str) or _int(data, "shared") is None:
        return None, f"{meta.name} is not Triton's compile metadata (no name and shared), ignored"
    if entry is not None and data["name"] != entry:
        return None, f"{meta.name} describes kernel {data['name']!r}, not {entry!r}, ignored"
    target = data.get("target")
    arch = target.get("arch") if isinstance(target, dict) else None
    cluster = data.get("cluster_dims")
    cluster_dims = None
    if isinstance(cluster, list) and len(cluster) == 3 and all(isinstance(c, int) and c >= 1 for c in cluster):
        cluster_dims = (cluster[0], cluster[1], cluster[2])
    version = data.get("triton_version")
    return TritonMetadata(
        path=meta,
        name=data["name"],
        num_warps=_int(data, "num_warps") or None,
        num_ctas=_int(data, "num_ctas", 1) or 1,
        shared=_int(data, "shared") or 0,
        warp_size=_int(data, "warp_size", 32) or 32,
        cluster_dims=cluster_dims,
        global_scratch_size=_int(data, "global_scratch_size", 0) or 0,
        profile_scratch_size=_int(data, "profile_scratch_size", 0) or 0,
        target=f"sm_{arch}" if isinstance(arch, int) and not isinstance(arch, bool) else None,
        triton_version=version if isinstance(version, str) else None,
        launch_pdl=data.get("launch_pdl") is True,
        launch_cooperative_grid=data.get("launch_cooperative_grid") is True,
    ), ""


# -- the kernel's signature, from Triton's IR beside the PTX ------------------------------------

_IR_TYPES = {"f16": "f16", "bf16": "bf16", "f32": "f32", "f64": "f64", "f8E4M3FN": "e4m3", "f8E5M2": "e5m2",
             "i8": "i8", "i16": "i16", "i32": "i32", "i64": "i64", "i1": "u8"}


@dataclass(frozen=True)
class TritonArg:
    """One argument of a Triton kernel as its IR declares it: ``%a_ptr: !tt.ptr<f16> {tt.divisibility = 16}``."""

    name: str
    dtype: str | None  # a pointer's element type or a scalar's type, as a spec dtype (None: not one)
    pointer: bool
    divisible_by_16: bool  # Triton specialised it (tt.divisibility = 16): the kernel may rely on it

    def __str__(self) -> str:
        return f"{'*' if self.pointer else ''}{self.dtype or '?'} {self.name}"


def _split_top(text: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in text:
        if ch in "(<{[":
            depth += 1
        elif ch in ")>}]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    if "".join(current).strip():
        parts.append("".join(current))
    return parts


def _ir_arg(text: str) -> TritonArg | None:
    text = text.strip()
    if not text.startswith("%") or ":" not in text:
        return None
    name, _, rest = text[1:].partition(":")
    rest = rest.strip()
    type_text = rest.split(" {", 1)[0].split(" loc(", 1)[0].strip()
    pointer = type_text.startswith("!tt.ptr<") and type_text.endswith(">")
    element = type_text[len("!tt.ptr<"):-1] if pointer else type_text
    return TritonArg(name=name.strip(), dtype=_IR_TYPES.get(element), pointer=pointer,
                     divisible_by_16="tt.divisibility = 16" in rest)


def read_triton_signature(ptx: Path, entry: str) -> tuple[TritonArg, ...] | None:
    """The arguments of ``entry`` as Triton's IR beside the PTX declares them (``<stem>.ttgir``,
    else ``<stem>.ttir``, as Triton's cache keeps them): names, types and which ones Triton
    specialised as multiples of 16. None without such a file, or when it does not declare ``entry``."""
    for suffix in (".ttgir", ".ttir"):
        path = ptx.with_suffix(suffix)
        if not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
        start = text.find(f"tt.func public @{entry}(")
        if start < 0:
            return None
        i = text.index("(", start) + 1
        depth = 1
        j = i
        while j < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[j], 0)
            j += 1
        args = [_ir_arg(part) for part in _split_top(text[i:j - 1])]
        return None if any(a is None for a in args) else tuple(a for a in args if a is not None)
    return None
