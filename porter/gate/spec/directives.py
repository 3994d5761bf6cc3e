"""The launch directives: ``// porter-launch:``, ``// porter-param:`` and ``// porter-kernel:``
comment lines in a candidate's PTX, by which a port declares its own launch, added params and
sequence of kernels; read (:func:`launch_directive`) and applied to the spec (:func:`with_launch`,
:func:`declared_spec`), checked as strictly as the spec itself.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from porter._toml import tomllib
from porter.errors import InputError
from porter.gate.spec.model import Spec
from porter.gate.spec.reader import SpecReader

_LAUNCH_DIRECTIVE = re.compile(r"^[ \t]*//[ \t]*porter-launch:(?P<body>.*)$", re.MULTILINE)
_PARAM_DIRECTIVE = re.compile(r"^[ \t]*//[ \t]*porter-param:(?P<body>.*)$", re.MULTILINE)
_KERNEL_DIRECTIVE = re.compile(r"^[ \t]*//[ \t]*porter-kernel:(?P<body>.*)$", re.MULTILINE)


def launch_directive(ptx_text: str, *, source: str) -> dict[str, Any] | None:
    """A candidate's own launch and added params, from comment lines in its PTX::

        // porter-launch: entry = "gemm_sm90a", grid = ["ceil_div(N, 256)", "ceil_div(M, 128)", 1], block = [384, 1, 1], shared = 196608
        // porter-param: name = "tmA", kind = "tensormap", tensor = "A", dims = ["M", "K"], box = [128, 64], swizzle = "128B"

    Each body is the inside of a TOML inline table. porter-launch has the keys of ``[launch]``
    (grid, block, shared, cluster) and optionally ``entry``; each porter-param line is one more
    ``[[params]]`` entry, appended in order after the spec's. A port often changes its block
    shape and shared memory, and a Hopper port takes TMA descriptors of the same buffers; this
    lets a candidate say so while the spec keeps describing the source.
    """
    directive: dict[str, Any] = {}
    match = _LAUNCH_DIRECTIVE.search(ptx_text)
    if match is not None:
        directive.update(_directive_table(ptx_text, match, "porter-launch", source))
    params = [_directive_table(ptx_text, m, "porter-param", source) for m in _PARAM_DIRECTIVE.finditer(ptx_text)]
    if params:
        directive["params"] = params
    kernels = [_directive_table(ptx_text, m, "porter-kernel", source) for m in _KERNEL_DIRECTIVE.finditer(ptx_text)]
    if kernels:
        directive["kernels"] = kernels
    return directive or None


def _directive_table(ptx_text: str, match: re.Match[str], name: str, source: str) -> dict[str, Any]:
    line = ptx_text.count("\n", 0, match.start()) + 1
    try:
        return dict(tomllib.loads("d = {" + match.group("body").strip() + "}")["d"])
    except tomllib.TOMLDecodeError as err:
        raise InputError(f"{source}:{line}: {name}: not the inside of a TOML inline table ({err})") from None


def with_launch(spec: Spec, directive: Mapping[str, Any], *, source: str) -> Spec:
    """The spec with a candidate's launch (and entry name), or its own sequence of kernels (its
    porter-kernel lines), and its added params, checked as strictly as the spec itself."""
    parser = SpecReader(source=f"{source}: porter-launch", base_dir=spec.base_dir)
    table = dict(directive)
    extra = table.pop("params", [])
    steps = table.pop("kernels", None)
    if table and (steps is not None or spec.kernels):
        raise parser.error(next(iter(table)), "a hot loop of several kernels is declared with porter-kernel lines, "
                           "one per step (entry, grid, block, shared, args; or zero), not with porter-launch")
    entry = table.pop("entry", spec.entry)
    if not isinstance(entry, str) or not entry or entry.strip() != entry or " " in entry:
        raise parser.error("entry", f"must be a PTX entry name without spaces (got {entry!r})")
    launch = parser.launch(table, tuple(spec.sizes)) if table else spec.launch
    params = list(spec.params)
    added = []
    param_parser = SpecReader(source=f"{source}: porter-param", base_dir=spec.base_dir)
    for raw in extra:
        key = f"params[{len(params)}]"
        if raw.get("kind") not in ("tensormap", "scratch"):
            raise param_parser.error(f"{key}.kind", "a candidate can add only tensormap params (built from the "
                                     "spec's buffers) and scratch (its own temporaries), so the contract stays the "
                                     f"spec's; got {raw.get('kind')!r}")
        param = param_parser.param(raw, key, tuple(spec.sizes))
        if any(p.name == param.name for p in params):
            raise param_parser.error(f"{key}.name", f"duplicate param name {param.name!r}")
        params.append(param)
        added.append(param)
    param_parser.tensormap_targets(params, added)
    kernels = spec.kernels
    if steps is not None:
        kernels = SpecReader(source=source, base_dir=spec.base_dir).kernels(steps, "porter-kernel", tuple(spec.sizes),
                                                                          params)
        entry = next(k.entry for k in kernels if k.entry)
        launch = next(k.launch for k in kernels if k.entry == entry and k.launch is not None)
    changed = replace(spec, entry=entry, launch=launch, params=tuple(params), kernels=kernels)
    try:
        changed.validate()
    except InputError as err:  # evaluated against every size set: say whose launch it is
        what = "porter-kernel" if steps is not None else "porter-launch"
        raise InputError(f"{source}: {what}: {str(err).removeprefix(spec.source + ': ')}") from None
    return changed


def declared_spec(spec: Spec, ptx_text: str, *, source: str) -> tuple[Spec, dict[str, Any] | None]:
    """The spec as a kernel says it runs (its porter-launch and porter-param lines applied), and
    those lines as read (None when it has none: the spec describes it as is)."""
    directive = launch_directive(ptx_text, source=source)
    return (with_launch(spec, directive, source=source) if directive else spec), directive
