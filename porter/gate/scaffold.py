"""``porter spec KERNEL.ptx``: a first porter.toml from what the kernel's own code says.

A spec is what porter cannot infer: what the kernel computes, its shapes and its grid. Everything
else the compiler already wrote down, and the scaffold reads it:

- the entry and its parameters (count, widths, pointer-ness, and C++ types where nvcc kept them in
  the mangled name, :mod:`porter.ptx.mangled`);
- each pointer's role, element width and dtype from the loads, stores and atomics its address
  reaches and the conversions, arithmetic and tensor-core instructions that touch its values
  (:mod:`porter.ptx.dataflow`); a pointer the kernel never dereferences is scratch (Triton appends
  two: global and profile scratch);
- the block from ``.reqntid`` (``.maxntid`` is only a bound), clusters from ``.reqnctapercluster``,
  whether the entry uses an ``.extern .shared`` array;
- Triton's compile metadata beside the PTX, when there is one (:mod:`porter.ptx.triton_meta`):
  warps, dynamic shared bytes, clusters, scratch sizes.

Each value says where it was read in a comment. Whatever is a guess (sizes, shapes, grid, the
reference, and any dtype, role, block or shared size the code did not settle) is named in the
spec's top-level ``todo`` list, which porter refuses to check or port against until it is empty
(:mod:`porter.gate.todo`). So the spec loads at once, and the engineer edits guesses, not syntax.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from porter.errors import InputError
from porter.gate.spec import TENSORMAP_BYTES
from porter.gate.todo import render_todo
from porter.ptx import Entry, PtxModule
from porter.ptx.dataflow import DTYPE_BYTES, FLOAT_DTYPES, EntryFacts, PointerFacts, ScalarFacts, entry_facts
from porter.ptx.mangled import demangle
from porter.ptx.model import Param
from porter.ptx.triton_meta import TritonArg, TritonMetadata, read_triton_metadata, read_triton_signature

_SCALARS = {".f64": "f64", ".f32": "f32", ".f16": "f16", ".bf16": "bf16", ".s8": "i8", ".s16": "i16",
            ".s32": "i32", ".s64": "i64", ".u8": "u8", ".u16": "u16", ".u32": "i32", ".u64": "u64",
            ".b8": "u8", ".b16": "u16", ".b32": "i32", ".b64": "u64"}
_GUESS_BY_WIDTH = {1: "u8", 2: "f16", 4: "f32", 8: "f64"}
DEFAULT_SIZE = 64  # every size symbol's first value: a multiple of 16, as Triton's specialisation likes
DEFAULT_ELEMENTS = 4096


def choose_entry(module: PtxModule, name: str | None, *, option: str = "--entry") -> Entry:
    """The kernel called ``name``, or the module's only one; one line listing the entries otherwise."""
    kernels = module.kernels
    listing = ", ".join(e.name for e in kernels) or "none"
    if name is not None:
        for e in kernels:
            if e.name == name:
                return e
        raise InputError(f"{option} {name}: no such .entry (entries: {listing})")
    if len(kernels) != 1:
        raise InputError(f"the module has {len(kernels)} entries ({listing}): choose one with {option}")
    return kernels[0]


def _q(text: str) -> str:
    return json.dumps(text)


@dataclass
class _Writer:
    """The spec's text, and the todo items, as they are decided."""

    lines: list[str] = field(default_factory=list)
    todo: list[tuple[str, str]] = field(default_factory=list)  # (key path, what to do)

    def add(self, key: str, value: str, comment: str = "") -> None:
        self.lines.append(f"{key} = {value}" + (f"  # {comment}" if comment else ""))

    def guess(self, path: str, key: str, value: str, why: str) -> None:
        self.todo.append((path, why))
        self.add(key, value, f"TODO(porter): {why}")


@dataclass(frozen=True)
class _Declared:
    """A param's type as its source declared it: nvcc's mangled C++ type, or Triton's IR."""

    dtype: str | None  # the element's (a pointer's) or the value's spec dtype
    text: str  # "const __half*", "!tt.ptr<f16>"
    where: str  # "in the mangled name", "in attn_fwd.ttgir"
    const: bool = False  # a pointer to const elements
    lanes: int = 1  # a vector type's elements a value (__half2: 2)
    divisible_by_16: bool = False  # Triton specialised it as a multiple of 16

    def __str__(self) -> str:
        return f"{self.text} {self.where}"


def _declared_types(entry: Entry, triton_args: tuple[TritonArg, ...] | None, triton_ir: str
                    ) -> tuple[list[_Declared | None] | None, list[str] | None, str]:
    """Each param's declared type (None where there is none) and name, from Triton's IR when it is
    beside the PTX and agrees with it, else from the mangled name; and how the function reads."""
    params = entry.params
    if triton_args is not None:
        extra = len(params) - len(triton_args)
        fits = extra in (0, 2) and all(a.pointer == _is_pointer(p) for a, p in zip(triton_args, params, strict=False))
        if fits:
            declared: list[_Declared | None] = [
                _Declared(a.dtype, f"{'*' if a.pointer else ''}{a.dtype or '?'}", f"in {triton_ir}",
                          divisible_by_16=a.divisible_by_16) for a in triton_args]
            names = [a.name for a in triton_args] + ["global_scratch", "profile_scratch"][:extra]
            return declared + [None] * extra, names, f"{entry.name}({', '.join(map(str, triton_args))})"
    found = demangle(entry.name)
    if found is None or len(found[1]) != len(params):
        return None, None, ""
    function, types = found
    return ([_Declared(t.dtype, str(t), "in the mangled name", const=t.const and t.pointers > 0, lanes=t.lanes)
             for t in types], None, f"{function}({', '.join(map(str, types))})")


def _short(name: str, entry: str) -> str:
    """``attn_fwd_param_3`` -> ``param_3``: the entry's prefix off its parameter names."""
    return name[len(entry) + 1:] if name.startswith(entry + "_") and name[len(entry) + 1:].isidentifier() else name


def _scratch_indices(entry: Entry, facts: EntryFacts, meta: TritonMetadata | None) -> dict[int, str]:
    """Pointer params that are scratch, by index -> which: Triton's two trailing ones when its
    metadata is here; otherwise every pointer the kernel never touches."""
    pointers = [p.index for p in facts.pointers]
    found: dict[int, str] = {}
    if meta is not None and len(pointers) >= 2 and pointers[-2:] == [len(entry.params) - 2, len(entry.params) - 1]:
        found[pointers[-2]] = "global"
        found[pointers[-1]] = "profile"
    for p in facts.pointers:
        if p.index not in found and not p.touched and not p.escapes:
            found[p.index] = "unused"
    unused = [i for i, which in found.items() if which == "unused"]
    if unused and len(found) == len(pointers):  # a spec needs a buffer to check: the last one the code leaves alone
        del found[unused[-1]]
    return found


def _dtype_for(p: PointerFacts, declared: _Declared | None, facts: EntryFacts) -> tuple[str, str, bool]:
    """(dtype, why, settled): the declared type, else what the code shows, else the element
    width's only float type in the kernel; anything else is a guess (settled False)."""
    shown = p.dtype
    if declared is not None and declared.dtype is not None:
        why = f"declared {declared}" + (
            f" ({declared.lanes} {declared.dtype} a value: count elements of {declared.dtype})" if declared.lanes > 1 else "")
        if shown is not None and shown[0] != declared.dtype:
            return declared.dtype, f"{why}, but the code treats it as {shown[0]} at {shown[1]}", False
        return declared.dtype, why, True
    width = p.element_bytes
    width_why = f"{width}-byte elements ({p.scale_evidence})" if p.scale_evidence else (
        f"{width}-byte accesses" if width else "")
    if shown is not None:
        why = f"{shown[1]}" + (f"; {width_why}" if width_why else "")
        if p.conflicts:
            others = ", ".join(f"{d} ({e})" for d, e in p.conflicts)
            return shown[0], f"{why}; but also {others}", False
        return shown[0], why, True
    if width is not None:
        kinds = [(d, e) for d, e in facts.float_types.get(width, ()) if d in FLOAT_DTYPES]
        if len(kinds) == 1:
            d, e = kinds[0]
            return d, f"{width_why}; {d} is the kernel's only {width}-byte float type ({e})", True
        if kinds:
            names = ", ".join(f"{d} ({e})" for d, e in kinds)
            return kinds[0][0], f"{width_why}; the kernel uses several {width}-byte float types: {names}", False
        guess = _GUESS_BY_WIDTH.get(width, "f32")
        return guess, f"{width_why}; nothing in the code says which {width}-byte type", False
    return "f32", "the code never shows this pointer's element type", False


def _role_for(p: PointerFacts, declared: _Declared | None) -> tuple[str, str, bool]:
    def lines(name: str, where: tuple[int, ...]) -> str:
        return f"{len(where)} {name}{'s' if len(where) != 1 else ''}, first at line {where[0]}"

    if p.escapes:
        return ("in" if declared is not None and declared.const else "inout",
                f"passed on where porter cannot follow it ({p.escapes[0]})", False)
    if p.atomics:
        return "inout", (f"read-modify-written ({lines('atomic', p.atomics)}): porter fills it before each launch and "
                         "the reference must add to those values; a float sum is not bitwise repeatable"), False
    if not p.touched:
        return "in", "the code never loads or stores through it", False
    parts = [lines(n, w) for n, w in (("load", p.loads), ("store", p.stores)) if w]
    role = p.role or "in"
    why = "; ".join(parts) + ("; never stored" if role == "in" else "; never loaded" if role == "out" else "")
    if declared is not None and declared.const and role != "in":
        return role, f"{why}, though declared {declared}", False
    return role, why, True


def _scalar_hint(s: ScalarFacts, names: dict[str, str]) -> str:
    if not s.read:
        return "the kernel never reads it"
    hints = []
    if s.compared is not None:
        hints.append(f"compared at line {s.compared.line}: a size?")
    if s.scales:
        targets = ", ".join(names.get(n, n) for n, _ in s.scales[:3])
        hints.append(f"offsets {targets} (line {s.scales[0][1].line}): a stride?")
    return "; ".join(hints)


def _block(entry: Entry, meta: TritonMetadata | None, w: _Writer) -> tuple[int, int, int]:
    req, most = entry.directive("reqntid"), entry.directive("maxntid")
    if req is not None:
        dims = (*req.values, 1, 1)[:3]
        also = f"; {meta.num_warps} warps in {meta.path.name}" if meta is not None and meta.block else ""
        if meta is not None and meta.block and meta.block != tuple(dims):
            also = f"; {meta.path.name} says {meta.num_warps} warps ({meta.block[0]} threads): the PTX wins"
        w.add("block", str(list(dims)), f".reqntid {', '.join(map(str, req.values))} (line {req.line}){also}")
        return dims[0], dims[1], dims[2]
    if meta is not None and meta.block:
        w.add("block", str(list(meta.block)), f"{meta.num_warps} warps of {meta.warp_size} in {meta.path.name}")
        return meta.block
    if most is not None:
        dims = (*most.values, 1, 1)[:3]
        w.guess("launch.block", "block", str(list(dims)),
                f".maxntid {', '.join(map(str, most.values))} (line {most.line}) is an upper bound: the block the "
                "kernel is launched with")
        return dims[0], dims[1], dims[2]
    w.guess("launch.block", "block", "[256, 1, 1]", "no .reqntid or .maxntid in the PTX: the block it is launched with")
    return 256, 1, 1


def scaffold_spec(module: PtxModule, entry: Entry, *, meta: TritonMetadata | None = None, source: str = "",
                  notes: tuple[str, ...] = (), triton_args: tuple[TritonArg, ...] | None = None,
                  triton_ir: str = "") -> str:
    """The text of a porter.toml for ``entry``; every guess is in its ``todo`` list."""
    facts = entry_facts(module, entry)
    declared, ir_names, function = _declared_types(entry, triton_args, triton_ir)
    for index, p in enumerate(entry.params):
        if p.array_size and not _is_tensormap(p):
            raise InputError(f"param {index} ({p.name}) is passed by value as {p.type}[{p.array_size}] "
                             "(a struct): porter spec cannot describe it; write that param by hand")
        if not _is_pointer(p) and not _is_tensormap(p) and p.type not in _SCALARS:
            raise InputError(f"param {index} ({p.name}) has type {p.type}, which porter's specs do not know")
    names = {p.name: ir_names[i] if ir_names else _short(p.name, entry.name) for i, p in enumerate(entry.params)}
    pointer_facts = {p.index: p for p in facts.pointers}
    scalar_facts = {s.index: s for s in facts.scalars}
    scratch = _scratch_indices(entry, facts, meta)
    size_symbols = [names[p.name] for i, p in enumerate(entry.params)
                    if i in scalar_facts and not p.array_size and _SCALARS[p.type][0] in "iu"] or ["n"]

    body = _Writer()
    body.lines += ["[kernel]", f"entry = {_q(entry.name)}"]
    if meta is not None:
        what = f"{entry.name}, compiled by Triton{' ' + meta.triton_version if meta.triton_version else ''}"
    else:
        what = function or entry.name
    body.add("description", _q(f"{what} for {module.arch}"), "say what it computes")
    body.lines += ["", "[sizes]"]
    body.todo.append(("sizes", "the size symbols: their default values, and [[sweep]] entries (tiny, ragged, large)"))
    body.lines.append("# TODO(porter): one symbol per integer parameter: which are sizes, which strides or derived "
                      "(lda = \"K\"), and add [[sweep]] entries")
    specialised = [names[p.name] for i, p in enumerate(entry.params)
                   if declared and (d := declared[i]) is not None and d.divisible_by_16 and not _is_pointer(p)]
    if specialised:
        body.lines.append(f"# Triton specialised {', '.join(specialised)} as multiples of 16 ({triton_ir}: "
                          "tt.divisibility): the kernel may rely on it, so keep every size set so")
    for symbol in size_symbols:
        body.add(symbol, str(DEFAULT_SIZE))
    body.lines.append("")

    outputs = 0
    for index, p in enumerate(entry.params):
        name = names[p.name]
        body.lines += ["[[params]]", f"name = {_q(name)}"]
        cxx = declared[index] if declared is not None else None
        if index in scratch:
            _scratch(body, index, p, scratch[index], meta)
        elif _is_tensormap(p):
            _tensormap(body, index, names[entry.params[_first_buffer(entry, scratch)].name])
        elif _is_pointer(p):
            outputs += _buffer(body, index, pointer_facts[index], cxx, facts, need_output=_last_buffer(
                entry, scratch) == index and not outputs)
        else:
            _scalar(body, index, p, name, scalar_facts.get(index), cxx, names)
        body.lines.append("")
    _launch(body, entry, facts, meta)
    body.lines.append("")
    body.lines += ["# TODO(porter): a reference: a Python function, or check against the source kernel itself",
                   "# (porter check PORT.ptx --against SOURCE.ptx) and delete \"reference\" from todo.",
                   "# [reference]",
                   '# python = "ref.py:reference"  # fn(args, sizes) -> {output name: numpy array}, see docs/spec.md']
    body.todo.append(("reference", "what the outputs should be: [reference] python = ..., or check with --against"))

    made_from = f"{source or 'its PTX'} (.target {module.arch})" + (f" and {meta.path.name}" if meta else "")
    head = [f"# porter spec for {entry.name}, written by `porter spec` from {made_from}."]
    head += [f"# note: {n}" for n in notes]
    head += ["# Comments say where each value was read. The guesses are listed in `todo`: porter check and",
             "# porter port refuse this spec until the list is empty. Fix each one, then delete it from the list.",
             render_todo(body.todo), ""]
    return "\n".join(head + body.lines) + "\n"


def _last_buffer(entry: Entry, scratch: dict[int, str]) -> int | None:
    """The last pointer param that is a buffer (it becomes the output when nothing is stored)."""
    found = [i for i, p in enumerate(entry.params) if _is_pointer(p) and i not in scratch]
    return found[-1] if found else None


def _first_buffer(entry: Entry, scratch: dict[int, str]) -> int:
    return next(i for i, p in enumerate(entry.params) if _is_pointer(p) and i not in scratch)


def _is_tensormap(p: Param) -> bool:
    """A TMA descriptor passed by value: ``.param .align 64 .b8 name[128]`` (a CUtensorMap)."""
    return p.type == ".b8" and p.array_size == TENSORMAP_BYTES


def _tensormap(w: _Writer, index: int, buffer: str) -> None:
    """A TMA descriptor: which buffer it maps and how cannot be read off the PTX (the kernel only
    takes its address), so every key is a guess that loads (the buffer's one axis, a 16-element box)."""
    w.add("kind", '"tensormap"')
    w.guess(f"params[{index}].tensor", "tensor", _q(buffer),
            "a TMA descriptor (128 bytes by value): the buffer it maps, then its dims (the extents, outer to "
            "inner, over the size symbols), box (the tile one copy moves) and swizzle; see docs/spec.md")
    w.add("dims", f"[{_q(str(DEFAULT_ELEMENTS))}]", "TODO(porter): with tensor")
    w.add("box", "[16]", "TODO(porter): with tensor")
    w.add("swizzle", '"none"', "TODO(porter): with tensor")


def _is_pointer(p: Param) -> bool:
    return p.is_ptr or (p.type in (".u64", ".b64", ".s64") and not p.array_size)


def _buffer(w: _Writer, index: int, p: PointerFacts, cxx: _Declared | None, facts: EntryFacts, *,
            need_output: bool) -> int:
    """Write one buffer param; 1 when it is an output."""
    w.add("kind", '"buffer"')
    dtype, why, settled = _dtype_for(p, cxx, facts)
    if settled:
        w.add("dtype", _q(dtype), why)
    else:
        w.guess(f"params[{index}].dtype", "dtype", _q(dtype), why)
    w.guess(f"params[{index}].shape", "shape", f"[{DEFAULT_ELEMENTS}]", "its shape over the size symbols, row-major")
    role, why, settled = _role_for(p, cxx)
    if need_output and role == "in":  # a spec needs an output; this kernel shows none being written
        role, why, settled = "out", f"{why}; but a spec needs an output and nothing else is written", False
    if settled:
        w.add("role", _q(role), why)
    else:
        w.guess(f"params[{index}].role", "role", _q(role), why)
    return int(role != "in")


def _scratch(w: _Writer, index: int, p: Param, which: str, meta: TritonMetadata | None) -> None:
    w.add("kind", '"scratch"')
    if which == "unused" or meta is None:
        w.add("bytes", '"0"', "the kernel never loads or stores through it: a null pointer")
        return
    size = meta.global_scratch_size if which == "global" else meta.profile_scratch_size
    key = f"{which}_scratch_size"
    if size == 0:
        w.add("bytes", '"0"', f"Triton's {which} scratch; {meta.path.name}: {key} = 0, a null pointer")
        return
    ctas = f" * {meta.num_ctas}" if meta.num_ctas > 1 else ""
    w.guess(f"params[{index}].bytes", "bytes", _q(f"{size}{ctas} * 1"),
            f"Triton's {which} scratch: {key} = {size} bytes a program ({meta.path.name}), times the programs "
            "of the grid: write it over the same sizes as launch.grid")


def _scalar(w: _Writer, index: int, p: Param, name: str, s: ScalarFacts | None, cxx: _Declared | None,
            names: dict[str, str]) -> None:
    dtype = _SCALARS[p.type]
    why = ""
    if cxx is not None and cxx.dtype is not None and DTYPE_BYTES.get(cxx.dtype) == DTYPE_BYTES.get(dtype) and \
            (cxx.dtype in FLOAT_DTYPES) == (dtype in FLOAT_DTYPES):
        dtype, why = cxx.dtype, f"declared {cxx}"
    w.add("kind", '"scalar"')
    w.add("dtype", _q(dtype), why)
    hint = _scalar_hint(s, names) if s is not None else ""
    if dtype in FLOAT_DTYPES:
        w.guess(f"params[{index}].value", "value", "1.0",
                "its value (or range = [lo, hi], drawn per case)" + (f"; {hint}" if hint else ""))
    else:
        w.add("value", _q(name), hint)


def _launch(w: _Writer, entry: Entry, facts: EntryFacts, meta: TritonMetadata | None) -> None:
    w.lines.append("[launch]")
    directive = entry.directive("reqnctapercluster")
    cluster = None
    if directive is not None:
        cluster = tuple((*directive.values, 1, 1)[:3])
    elif meta is not None and meta.cluster != (1, 1, 1):
        cluster = meta.cluster
    grid = list(cluster) if cluster else [1, 1, 1]
    extra = f"; a multiple of the cluster {list(cluster)}" if cluster else ""
    if meta is not None and meta.num_ctas > 1:
        extra += f"; Triton launches num_ctas = {meta.num_ctas} times its program grid along x"
    w.guess("launch.grid", "grid", str(grid), f"blocks along x, y, z over the size symbols{extra}")
    _block(entry, meta, w)
    uses = facts.dynamic_shared
    if meta is not None:
        where = f" (the kernel's .extern .shared {uses.what}[], line {uses.line})" if uses else ""
        w.add("shared", str(meta.shared), f"{meta.path.name}: \"shared\": {meta.shared}{where}")
    elif uses is not None:
        w.guess("launch.shared", "shared", "0",
                f"the kernel uses dynamic shared memory (.extern .shared {uses.what}[], line {uses.line}): how many "
                "bytes it needs, over the size symbols")
    else:
        w.add("shared", "0", "the kernel uses no .extern .shared array")
    if cluster:
        if directive is not None:
            why = f".reqnctapercluster {', '.join(map(str, directive.values))} (line {directive.line})"
        else:
            why = f"num_ctas = {meta.num_ctas} in {meta.path.name}" if meta is not None else ""
        w.add("cluster", str(list(cluster)), why)


def _assembles(module: PtxModule, kernel: Path) -> list[str]:
    """A spec describes a kernel that can run: one ptxas rejects for its own .target is refused
    (InputError, exit 2), as ``porter port`` refuses such a source. Without ptxas, a note says so."""
    from porter.gate.source import check_source_assembles
    from porter.ptx.toolchain import find_toolchain

    toolchain = find_toolchain()
    if toolchain.ptxas is None:
        return [f"not assembled: no ptxas here, so nothing says ptxas takes it for {module.arch}"]
    check_source_assembles(module, None, toolchain, kernel)
    return []


def scaffold_file(kernel: Path, entry: str | None = None) -> tuple[str, Entry]:
    """The spec text for one entry of a PTX file (Triton's metadata beside it read when present)."""
    from porter.ptx import read_ptx

    module = read_ptx(kernel)
    chosen = choose_entry(module, entry)
    meta, why_not = read_triton_metadata(kernel, chosen.name)
    notes = [why_not] if why_not else []
    notes += _assembles(module, kernel)
    if meta is not None:
        if meta.target is not None and not module.arch.startswith(meta.target):
            notes.append(f"{meta.path.name} says target {meta.target}, the PTX .target {module.arch}")
        if meta.launch_pdl or meta.launch_cooperative_grid:
            notes.append(f"{meta.path.name} asks for a {'programmatic-dependent' if meta.launch_pdl else 'cooperative'} "
                         "launch, which porter does not make")
    args = read_triton_signature(kernel, chosen.name)
    ir = next((kernel.with_suffix(x).name for x in (".ttgir", ".ttir") if kernel.with_suffix(x).is_file()), "")
    return scaffold_spec(module, chosen, meta=meta, source=kernel.name, notes=tuple(notes), triton_args=args,
                         triton_ir=ir), chosen
