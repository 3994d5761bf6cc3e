"""Before a reply's kernel is verified: is it a kernel of this port at all?

A model's reply can hold well-formed code that is still not a candidate of this port: the entry
renamed (``gemm_bt_tile`` -> ``gemm_bt_tile_sm90a``), the ``.version``, ``.target`` or
``.address_size`` line left out or changed, a porter-launch line that does not read. The gate
cannot judge such a kernel (it checks the entry the spec names, on the port's target), so without
this screen the port would end on the gate's input error. Each problem here is a message for the
model instead: the round gives no candidate, the model is told exactly what to change, and the
port goes on within its budget.

porter never repairs a reply itself (no renaming the entry back, no adding a missing line): the
candidate on disk is what the model wrote, its edits applied, so that the run's records, its
replay and the repair pairs exported from it pair each reply with its own kernel.

What a kernel that passes this screen still gets wrong (a ``.version`` too old for its
instructions, params that differ from the spec's) is the gate's to judge, as a failed candidate.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from porter.agent.edits import EditOutcome, ErrorKind
from porter.errors import InputError
from porter.gate.spec import Spec, declared_spec
from porter.ptx import PtxModule, parse_ptx
from porter.ptx.arch import normalize_arch

_HEADER = re.compile(r"^[ \t]*(\.version|\.target|\.address_size)\b[ \t]*([^\n;/]*)", re.MULTILINE)


@dataclass(frozen=True)
class PortShape:
    """What every candidate of a port declares: the port's target, the source's address size and
    the entry (or entries) the spec names; ``version`` is the retarget's, suggested when a reply
    leaves the line out; ``entry`` is ``--entry`` when given."""

    spec: Spec
    target: str
    address_size: int
    version: str
    entry: str | None = None


def screened(outcome: EditOutcome, current: str, shape: PortShape) -> EditOutcome:
    """``outcome`` when its kernel is a candidate of this port (or it was no kernel to begin with),
    else a failed outcome that tells the model why, with ``current`` unchanged."""
    if not outcome.ok:
        return outcome
    subject = "The kernel your edits make" if outcome.kind == "edits" else "The kernel in your reply"
    problem = screen_kernel(outcome.text, shape, subject)
    if problem is None:
        return outcome
    kind, message = problem
    return EditOutcome(ok=False, text=current, kind=outcome.kind, error=message, error_kind=kind)


def screen_kernel(text: str, shape: PortShape,
                  subject: str) -> tuple[ErrorKind, str] | None:
    """The first reason ``text`` is not a candidate of this port (its kind, and the message for the
    model, about ``subject``: what is wrong and what to write instead), or None when the gate can judge it."""
    header = _header_problem(text, shape, subject)
    if header is not None:
        return "header", header
    try:
        module = parse_ptx(text, filename="your kernel")
        declared, _ = declared_spec(shape.spec, text, source="your kernel")
    except InputError as err:
        return "unreadable", (f"porter cannot read {subject.lower()}: {err}. Fix that line; the rest of "
                              "the kernel can stay as it is.")
    wanted = (shape.entry,) if shape.entry else declared.entries
    entry = _entry_problem(module, wanted, shape, subject)
    return ("entry", entry) if entry is not None else None


def _header_problem(text: str, shape: PortShape, subject: str) -> str | None:
    """A missing or wrong ``.version``/``.target``/``.address_size`` line, said with the line to write."""
    found = {name: value.strip() for name, value in reversed(_HEADER.findall(text))}  # the first of each
    want_target, want_size = shape.target, str(shape.address_size)
    if ".version" not in found:
        return (f"{subject} has no `.version` line. Start it with `.version {shape.version}` (the "
                f"PTX ISA the mechanical retarget to {want_target} uses; raise it if an instruction needs more), "
                f"then `.target {want_target}` and `.address_size {want_size}`.")
    if ".target" not in found:
        return (f"{subject} has no `.target` line. Put `.target {want_target}` right after "
                f"`.version {found['.version']}`: porter assembles and checks it for {want_target}.")
    target = found[".target"].split(",")[0].strip()
    if _arch(target) != want_target:
        return (f"{subject} says `.target {target}`, but this port is to {want_target}. Write "
                f"`.target {want_target}`: porter assembles and checks the kernel for {want_target}, and the port "
                "must say so itself.")
    size = found.get(".address_size")
    if size is None:
        return (f"{subject} has no `.address_size` line: PTX then uses 32-bit addresses, but the "
                f"source kernel's pointers are {want_size}-bit. Put `.address_size {want_size}` after "
                f"`.target {want_target}`.")
    if size != want_size:
        return (f"{subject} says `.address_size {size}`, but the source kernel's is {want_size}: its "
                f"pointer params are {want_size}-bit. Write `.address_size {want_size}`.")
    return None


def _arch(name: str) -> str:
    try:
        return normalize_arch(name)
    except InputError:
        return name


def _entry_problem(module: PtxModule, wanted: tuple[str, ...], shape: PortShape, subject: str) -> str | None:
    """An entry the port launches that the kernel lacks, said with the rename or addition that fixes it."""
    names = [e.name for e in module.kernels]
    missing = [name for name in wanted if name not in names]
    if not missing:
        return None
    want = missing[0]
    named_by = "--entry" if shape.entry else f"{shape.spec.source} names it"
    keep = ("Keep the source kernel's entry name and its params exactly (their types, in order): the caller "
            "launches the kernel by that name with those arguments.")
    if not names:
        return f"{subject} has no `.entry`. The port's entry is `{want}` ({named_by}). {keep}"
    extra = [name for name in names if name not in wanted]
    if len(missing) == 1 and len(extra) == 1:
        declare = "" if shape.entry else (f" If the port must have the new name, declare it instead: "
                                          f"`entry = \"{extra[0]}\"` on the kernel's `// porter-launch:` line.")
        return (f"{subject} renames the entry: it has `.entry {extra[0]}`, but the port's entry is "
                f"`{want}` ({named_by}). Rename `.entry {extra[0]}` back to `.entry {want}` (and its params, if "
                f"you renamed them, back to the source's). {keep}{declare}")
    return (f"{subject} has no `.entry {want}` ({named_by}); its entries are "
            f"{', '.join(names)}. {keep}")
