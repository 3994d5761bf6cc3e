"""Whether a kernel's own directives change how it is called, against what the base revision says.

A kernel's ``// porter-launch:``, ``// porter-kernel:`` and ``// porter-param:`` lines let a port
declare its entry, launch geometry, sequence of kernels and TMA descriptors (see
:func:`porter.gate.spec.declared_spec`). In a pull request those lines are the change's own words:
a head that points the check at another entry of its module, or at another block size than the
library's host code launches, would have the bot judge a kernel nobody runs. So the bot compares
the interface the head declares with the one the base revision declares for the same kernel (the
base version's own lines applied to the base spec, or the base spec alone for a new kernel), and a
difference is an interface change that fails unless the owner allows it.
"""

from __future__ import annotations

from porter.gate.spec import LaunchSpec, Spec


def _launch_words(launch: LaunchSpec) -> dict[str, str]:
    words = {"grid": list(launch.grid), "block": list(launch.block), "shared": launch.shared,
             "cluster": list(launch.cluster) if launch.cluster is not None else None}
    return {k: str(v) for k, v in words.items()}


def _sequence(spec: Spec) -> list[str]:
    return [step.describe() for step in spec.kernels]


def interface_change(expected: Spec, declared: Spec) -> str:
    """What ``declared`` changes of ``expected``'s interface (entry, launch, kernel sequence, params),
    as one line; "" when it changes nothing."""
    said = []
    if declared.entry != expected.entry:
        said.append(f"entry {expected.entry} -> {declared.entry}")
    if declared.kernels != expected.kernels:
        before, after = _sequence(expected), _sequence(declared)
        said.append(f"kernel sequence [{', '.join(before) or expected.entry}] -> [{', '.join(after) or declared.entry}]"
                    if before != after else "the launches or arguments of its kernel sequence")
    elif declared.launch != expected.launch:
        was, now = _launch_words(expected.launch), _launch_words(declared.launch)
        said += [f"{key} {was[key]} -> {now[key]}" for key in was if was[key] != now[key]]
    if declared.params != expected.params:
        old = {p.name: p for p in expected.params}
        new = {p.name: p for p in declared.params}
        added = [name for name in new if name not in old]
        gone = [name for name in old if name not in new]
        edited = [name for name in new if name in old and new[name] != old[name]]
        said += ([f"params added: {', '.join(added)}"] if added else []) + \
                ([f"params removed: {', '.join(gone)}"] if gone else []) + \
                ([f"params changed: {', '.join(edited)}"] if edited else [])
    return "; ".join(said)
