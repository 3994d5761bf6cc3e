"""``porter spec KERNEL.ptx``: a first porter.toml from the kernel's own signature.

A spec is the one thing porter cannot infer: what the kernel computes, the shapes and the launch.
The scaffold fills what the PTX does say (the entry, each parameter's width, pointer-ness and name,
the block size from .reqntid/.maxntid, clusters from .reqnctapercluster) and marks every guess with
a TODO, so that the spec loads at once and the engineer edits guesses rather than syntax.
"""

from __future__ import annotations

from porter.errors import InputError
from porter.ptx import Entry, PtxModule

_SCALARS = {".f64": "f64", ".f32": "f32", ".f16": "f16", ".bf16": "bf16", ".s8": "i8", ".s16": "i16",
            ".s32": "i32", ".s64": "i64", ".u8": "u8", ".u16": "u16", ".u32": "i32", ".u64": "u64",
            ".b8": "u8", ".b16": "u16", ".b32": "i32", ".b64": "u64"}


def choose_entry(module: PtxModule, name: str | None) -> Entry:
    kernels = module.kernels
    if name is not None:
        for e in kernels:
            if e.name == name:
                return e
        raise InputError(f"no .entry {name!r} (entries: {', '.join(e.name for e in kernels) or 'none'})")
    if len(kernels) != 1:
        raise InputError(f"the module has {len(kernels)} entries ({', '.join(e.name for e in kernels)}): "
                         "choose one with --entry")
    return kernels[0]


def _is_pointer(param) -> bool:
    return param.is_ptr or (param.type in (".u64", ".b64", ".s64") and not param.array_size)


def scaffold_spec(module: PtxModule, entry: Entry) -> str:
    """The text of a porter.toml for ``entry``; every guess carries a TODO."""
    pointers = [p for p in entry.params if _is_pointer(p)]
    block = entry.directive("reqntid") or entry.directive("maxntid")
    block_dims = list(block.values) + [1] * (3 - len(block.values)) if block else [256, 1, 1]
    lines = [
        f"# porter spec for {entry.name}, scaffolded from its PTX (.target {module.arch}).",
        "# Every TODO is a guess: fix it, then `porter check` the kernel against it.",
        "[kernel]",
        f'entry = "{entry.name}"',
        'description = "TODO: what the kernel computes, in one sentence"',
        "",
        "[sizes]",
        "n = 4096  # TODO: the size symbols the shapes and the launch are written in",
        "",
        "[[sweep]]  # TODO: ragged, tiny and large size sets; padded layouts",
        "n = 1",
        "[[sweep]]",
        "n = 1000",
        "",
    ]
    for index, p in enumerate(entry.params):
        lines.append("[[params]]")
        lines.append(f'name = "{p.name}"')
        if _is_pointer(p):
            role = "out" if p is pointers[-1] else "in"
            lines += ['kind = "buffer"', 'dtype = "f32"  # TODO: element type', 'shape = ["n"]  # TODO',
                      f'role = "{role}"  # TODO: in, out or inout']
        elif p.array_size:
            raise InputError(f"param {index} ({p.name}) is passed by value as {p.type}[{p.array_size}] "
                             "(a struct or a TMA descriptor): the spec cannot describe it yet")
        else:
            dtype = _SCALARS.get(p.type)
            if dtype is None:
                raise InputError(f"param {index} ({p.name}) has type {p.type}, which porter's specs do not know")
            value = '"n"' if dtype.startswith(("i", "u")) else '"1"'
            lines += ['kind = "scalar"', f'dtype = "{dtype}"', f"value = {value}  # TODO"]
        lines.append("")
    cluster = entry.directive("reqnctapercluster")
    cluster_dims = list(cluster.values) + [1] * (3 - len(cluster.values)) if cluster else None
    blocks = f"ceil_div(n, {block_dims[0]})"
    if cluster_dims and cluster_dims[0] > 1:  # the grid must be a whole number of clusters
        blocks = f"round_up({blocks}, {cluster_dims[0]})"
    lines += [
        "[launch]",
        f'grid = ["{blocks}", {cluster_dims[1] if cluster_dims else 1}, {cluster_dims[2] if cluster_dims else 1}]  # TODO',
        f"block = {block_dims}{'' if block else '  # TODO: no .reqntid/.maxntid in the PTX'}",
        "shared = 0  # TODO: dynamic shared memory, bytes",
    ]
    if cluster_dims:
        lines.append(f"cluster = {cluster_dims}")
    lines += ["", "# TODO: a reference. Until there is one, check a port against the source kernel itself:",
              "#   porter check PORT.ptx --spec porter.toml --against SOURCE.ptx",
              "# [reference]", '# python = "ref.py:reference"  # fn(args, sizes) -> {output: array}, see docs/spec.md', ""]
    return "\n".join(lines)
