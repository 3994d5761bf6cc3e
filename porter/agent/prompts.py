"""Agents as data, and the first prompt of a port.

An agent is a markdown file: front matter between two ``---`` lines (``key: value`` per line) and
the system prompt as the body. Shipped agents live in ``agents/``; a repository overrides or adds
agents in ``<repo>/.porter/agents/<name>.md``, which wins over a shipped agent of the same name.

The system prompt may name placeholders such as ``{target}`` (see :func:`placeholder_values`). They are
filled by name, one pass, and every other brace is left alone: prompts quote PTX, whose vector
operands (``{%r1, %r2}``) and scopes are written with braces.

:func:`build_messages` is pure: everything the model is told comes from a :class:`PortContext`.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from porter._data import data_dir
from porter.agent.edits import EditMode, format_instructions
from porter.errors import InputError
from porter.gate.spec import ParamSpec, Spec
from porter.gate.verdict import Verdict, size_label
from porter.ptx.arch import ArchProfile, Offender, tensor_core_change
from porter.ptx.isa import IsaSupport
from porter.ptx.model import PtxModule
from porter.text import fence_for

EditFormat = Literal["whole", "search-replace", "auto"]
EDIT_FORMATS: tuple[EditFormat, ...] = ("whole", "search-replace", "auto")
# With edit_format "auto", a kernel longer than this is answered with SEARCH/REPLACE edits: a whole
# file that long costs many output tokens and is the reply most likely to be cut off.
BIG_KERNEL_LINES = 400
_OVERRIDE_DIR = Path(".porter") / "agents"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_KEYS = ("name", "description", "edit_format", "temperature", "max_rounds", "max_tokens_per_reply")
_MAX_LINES_PER_FEATURE = 12  # offending lines quoted per feature; the rest are listed by number
_MAX_SWEEP_SHOWN = 12


@dataclass(frozen=True)
class AgentDef:
    name: str
    description: str
    edit_format: EditFormat
    temperature: float
    max_rounds: int  # model replies per port, the first included
    max_tokens_per_reply: int
    system_prompt: str  # the body, placeholders not yet filled
    path: Path

    def edit_mode(self, kernel_lines: int) -> EditMode:
        """The reply forms to ask for when the current kernel has ``kernel_lines`` lines."""
        if self.edit_format == "whole":
            return "whole"
        if self.edit_format == "search-replace" or kernel_lines > BIG_KERNEL_LINES:
            return "search-replace"
        return "either"


# --- loading ----------------------------------------------------------------------------------


def load_agent(name: str = "port", *, repo_root: Path | None = None) -> AgentDef:
    """The agent ``name``: ``<repo_root>/.porter/agents/<name>.md`` if present, else the shipped one."""
    if not _NAME.match(name):
        raise InputError(f"{name!r} is not an agent name (letters, digits, '_', '-' and '.')")
    for folder in _folders(repo_root):
        path = folder / f"{name}.md"
        if path.is_file():
            return parse_agent(_read(path), path=path)
    known = sorted(_agent_files(repo_root))
    close = difflib.get_close_matches(name, known, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise InputError(f"no agent {name!r}{hint}; agents: {', '.join(known) or 'none'}")


def list_agents(repo_root: Path | None = None) -> tuple[AgentDef, ...]:
    """Every agent, by name; a repository's override stands in for the shipped agent it names."""
    files = _agent_files(repo_root)
    return tuple(parse_agent(_read(files[name]), path=files[name]) for name in sorted(files))


def _folders(repo_root: Path | None) -> tuple[Path, ...]:
    """Where agents are looked up, first hit wins."""
    shipped = data_dir("agents")
    return (Path(repo_root) / _OVERRIDE_DIR, shipped) if repo_root is not None else (shipped,)


def _agent_files(repo_root: Path | None) -> dict[str, Path]:
    files: dict[str, Path] = {}
    for folder in reversed(_folders(repo_root)):  # later folders override earlier ones
        if folder.is_dir():
            for path in folder.glob("*.md"):
                if path.name.lower() != "readme.md":
                    files[path.stem] = path
    return files


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: cannot read the agent ({e})") from None


def parse_agent(text: str, *, path: Path) -> AgentDef:
    """Read an agent file's text; InputError naming ``path`` and the line for anything wrong."""
    lines = text.replace("\r\n", "\n").split("\n")
    if not lines or lines[0].strip() != "---":
        raise InputError(f"{path}: line 1: an agent starts with a '---' line opening its front matter")
    values: dict[str, str] = {}
    lines_of: dict[str, int] = {}
    end = None
    for number, raw in enumerate(lines[1:], 2):
        line = raw.strip()
        if line == "---":
            end = number
            break
        if not line or line.startswith("#"):
            continue
        key, colon, value = line.partition(":")
        key = key.strip()
        if not colon or not key:
            raise InputError(f"{path}: line {number}: expected 'key: value' (got {line!r})")
        if key not in _KEYS:
            close = difflib.get_close_matches(key, _KEYS, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise InputError(f"{path}: line {number}: unknown key {key!r} ({hint}keys: {', '.join(_KEYS)})")
        if key in values:
            raise InputError(f"{path}: line {number}: {key} is given twice (also line {lines_of[key]})")
        values[key], lines_of[key] = _unquote(value.strip()), number
    if end is None:
        raise InputError(f"{path}: line 1: the front matter is not closed by a second '---' line")
    body = "\n".join(lines[end:]).strip()
    if not body:
        raise InputError(f"{path}: line {end}: no system prompt after the front matter")

    def where(key: str) -> str:
        return f"{path}: line {lines_of[key]}: {key}"

    name = values.get("name", path.stem)
    if name != path.stem:
        raise InputError(f"{where('name')}: {name!r} must match the file name ({path.stem!r})")
    edit_format = values.get("edit_format", "auto")
    if edit_format not in EDIT_FORMATS:
        raise InputError(
            f"{where('edit_format')}: must be whole, search-replace or auto (got {edit_format!r})"
        )
    return AgentDef(
        name=name,
        description=values.get("description", ""),
        edit_format=edit_format,
        temperature=_number(values, "temperature", 0.2, where, integer=False, lo=0.0, hi=2.0),
        max_rounds=int(_number(values, "max_rounds", 8, where, integer=True, lo=1, hi=100)),
        max_tokens_per_reply=int(
            _number(values, "max_tokens_per_reply", 16384, where, integer=True, lo=256, hi=1_000_000)
        ),
        system_prompt=body,
        path=path,
    )


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def _number(
    values: Mapping[str, str],
    key: str,
    default: float,
    where: Callable[[str], str],
    *,
    integer: bool,
    lo: float,
    hi: float,
) -> float:
    if key not in values:
        return default
    try:
        value = int(values[key]) if integer else float(values[key])
    except ValueError:
        what = "an integer" if integer else "a number"
        raise InputError(f"{where(key)}: must be {what} (got {values[key]!r})") from None
    if not lo <= value <= hi:
        raise InputError(f"{where(key)}: must be from {lo:g} to {hi:g} (got {value})")
    return value


# --- prompts ----------------------------------------------------------------------------------


def fill_placeholders(template: str, values: Mapping[str, str]) -> str:
    """Replace each ``{name}`` whose name is in ``values``; leave every other brace as written."""
    return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), template)


@dataclass(frozen=True)
class PortContext:
    """Everything the first prompt of a port is built from."""

    source_ptx: str
    source: PtxModule
    src_profile: ArchProfile
    dst_profile: ArchProfile
    target: str  # "sm_100a"
    target_reason: str  # why this target was chosen, in a sentence
    spec: Spec
    baseline: Verdict | None = None  # the source retargeted to the target, checked
    baseline_feedback: str = ""
    require_native: bool = True
    offenders: tuple[Offender, ...] = ()  # from porter.ptx.arch.compatibility(source, target)
    isa: IsaSupport | None = None  # the PTX ISA versions the user's ptxas accepts


def placeholder_values(ctx: PortContext) -> dict[str, str]:
    """The placeholders an agent's system prompt may use, and what each stands for in this port."""
    return {
        "entry": ctx.spec.entry,
        "source_arch": ctx.src_profile.name,
        "source_generation": ctx.src_profile.generation,
        "target": ctx.target,
        "target_generation": ctx.dst_profile.generation,
        "target_tensor_core": ctx.dst_profile.tensor_core,
    }


def build_messages(agent: AgentDef, ctx: PortContext) -> list[dict[str, str]]:
    """The system message (the agent's prompt, filled) and the first user message of a port."""
    system = fill_placeholders(agent.system_prompt, placeholder_values(ctx))
    lines = len(ctx.source_ptx.splitlines())
    sections = [
        _task(ctx),
        _changes(ctx),
        _computes(ctx.spec),
        _profile_facts(ctx.spec.profile),
        _source(ctx, lines),
        _baseline(ctx),
        _reply_format(agent.edit_mode(lines)),
    ]
    user = "\n\n".join(s for s in sections if s)
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _reply_format(mode: EditMode) -> str:
    where = (
        ""
        if mode == "whole"
        else "SEARCH/REPLACE edits apply to the source kernel exactly as shown above.\n\n"
    )
    return f"## Reply format\n\n{where}{format_instructions(mode)}"


def _task(ctx: PortContext) -> str:
    src, dst = ctx.src_profile, ctx.dst_profile
    out = [
        f"# Port `{ctx.spec.entry}` from {src.name} ({src.generation}) to {ctx.target} ({dst.generation})",
        "",
        f"The source is `.version {ctx.source.version}` / `.target {ctx.source.arch}`. "
        f"Target: {ctx.target}, because {ctx.target_reason.rstrip('.')}.",
    ]
    if ctx.isa is not None:
        out.append(
            f"Write `.version {ctx.isa.max_ptx}` or lower (and at least {dst.min_ptx}, {ctx.target}'s minimum): "
            f"porter assembles with the user's ptxas {ctx.isa.ptxas}, which accepts PTX ISA up to "
            f"{ctx.isa.max_ptx} and refuses a newer `.version` whatever the kernel uses."
        )
    if ctx.require_native:
        out.append(
            f"Native code is required: the port passes only when {ctx.target}'s own tensor-core path "
            f"({dst.tensor_core}: {', '.join(dst.signature_ptx)}) is used. porter checks the SASS for "
            f"{', '.join(dst.signature_sass)} and, on an {ctx.target} GPU, that they execute."
        )
    else:
        out.append(
            f"Native code is not required: a kernel that is correct on {ctx.target} and fast passes. Use "
            f"{ctx.target}'s own instructions where they pay."
        )
    return "\n".join(out)


def _changes(ctx: PortContext) -> str:
    src, dst = ctx.src_profile, ctx.dst_profile
    out = ["## What changes between the architectures", ""]
    change = tensor_core_change(src, dst)
    out.append(change or f"Both use the same tensor-core model ({dst.tensor_core}).")
    out.append("")
    if ctx.offenders:
        out.append(f"### Instructions {ctx.target} does not have")
        source_lines = ctx.source_ptx.splitlines()
        for feature, group in _by_feature(ctx.offenders).items():
            out.append("")
            out.append(f"`{feature}` ({len(group)} instruction(s)). What to use instead: {group[0].hint}")
            for o in group[:_MAX_LINES_PER_FEATURE]:
                text = source_lines[o.line - 1].strip() if 0 < o.line <= len(source_lines) else o.opcode
                out.append(f"- line {o.line}: `{text}`")
            rest = group[_MAX_LINES_PER_FEATURE:]
            if rest:
                out.append(f"- and {len(rest)} more, at lines {', '.join(str(o.line) for o in rest)}")
    else:
        out.append(f"Every instruction of the source exists on {ctx.target}.")
    notes = [src] if src.name == dst.name else [src, dst]
    for profile in notes:
        out += ["", f"### {profile.name} ({profile.generation})", "", profile.notes]
    return "\n".join(out)


def _by_feature(offenders: Iterable[Offender]) -> dict[str, list[Offender]]:
    groups: dict[str, list[Offender]] = {}
    for o in offenders:
        groups.setdefault(o.feature, []).append(o)
    return groups


def _computes(spec: Spec) -> str:
    out = ["## What the kernel computes", "", spec.description or "(the spec gives no description)", ""]
    out.append("Parameters, in order (the harness passes exactly these; keep the param list as it is):")
    out += [f"- {_describe_param(p)}" for p in spec.params]
    launch = spec.launch
    shape = [
        f"grid ({_exprs(launch.grid)})",
        f"block ({_exprs(launch.block)})",
        f"dynamic shared memory {launch.shared} bytes",
    ]
    if launch.cluster is not None:
        shape.append(f"cluster ({_exprs(launch.cluster)})")
    out += ["", "Launch, fixed by the spec: " + ", ".join(shape) + "."]
    resolved = spec.default_sizes()
    if resolved:
        sizes = [
            f"{name}={resolved[name]}"
            if not isinstance(written, str)
            else f"{name}={written} (={resolved[name]})"
            for name, written in spec.sizes.items()
        ]
        out.append("Default sizes (timing): " + ", ".join(sizes) + ".")
    if spec.sweep:
        sets = spec.size_sets()
        shown = "; ".join(size_label(s) for s in sets[:_MAX_SWEEP_SHOWN])
        more = f"; and {len(sets) - _MAX_SWEEP_SHOWN} more" if len(sets) > _MAX_SWEEP_SHOWN else ""
        out.append(f"Equivalence is checked on fresh random inputs at {len(sets)} size sets: {shown}{more}.")
    out.append("Every launch starts with fresh inputs (read-only), outputs NaN-poisoned or random and shared memory "
               "overwritten; module globals carry from case to case and are reset before each timed launch; every "
               "timed launch must reproduce the verified outputs; the timed sizes, one unlisted size set and "
               "wider-range inputs are checked too. Compute every output from the inputs on every launch.")
    out.append("Tolerance, |out - ref| <= atol + rtol * |ref| per element:")
    for name, tol in spec.tolerances.items():
        grow = f", both scaled by max(1, sqrt({tol.reduction}/128))" if tol.reduction else ""
        out.append(f"- {name}: atol {tol.atol:g}, rtol {tol.rtol:g}{grow}")
    return "\n".join(out)


def _describe_param(p: ParamSpec) -> str:
    if p.kind == "buffer":
        fill = {"out": "poisoned before each launch: write every element"}.get(p.role, f"filled {p.fill}")
        return f"`{p.name}`: {p.dtype}[{_exprs(p.shape)}] buffer, {p.role}, {fill}"
    if p.kind == "scalar":
        if p.range is not None:
            return f"`{p.name}`: {p.dtype} scalar, drawn per case from [{p.range[0]}, {p.range[1]}]: read the param"
        return f"`{p.name}`: {p.dtype} scalar = {p.value}"
    if p.tensormap is not None:
        tm = p.tensormap
        return (f"`{p.name}`: CUtensorMap by value (.param .align 64 .b8 [128]) over `{tm.tensor}`, extents "
                f"[{_exprs(tm.dims)}], box [{_exprs(tm.box)}] (outer to inner), swizzle {tm.swizzle}, zeros outside")
    return f"`{p.name}`: scratch pointer, {p.bytes} bytes (0 means null)"


def _exprs(values: Iterable[object]) -> str:
    return ", ".join(str(v) for v in values)


def _profile_facts(profile: Mapping[str, object]) -> str:
    if not profile:
        return ""
    return "## Profile of the source kernel\n\n" + "\n".join(f"- {k}: {v}" for k, v in profile.items())


def _source(ctx: PortContext, lines: int) -> str:
    fence = fence_for(ctx.source_ptx)
    body = ctx.source_ptx.rstrip("\n")
    return f"## Source kernel ({ctx.src_profile.name}, {lines} lines)\n\n{fence}ptx\n{body}\n{fence}"


def _baseline(ctx: PortContext) -> str:
    if ctx.baseline is None and not ctx.baseline_feedback:
        return ""
    out = [f"## Baseline: the source with only `.target`/`.version` changed for {ctx.target}", ""]
    v = ctx.baseline
    if v is not None:
        out.append(f"Verdict: {v.status} ({v.reason})")
        out += [f"- {g.name}: {g.status}: {g.summary}" for g in v.gates]
    if ctx.baseline_feedback:
        out += ["", ctx.baseline_feedback.strip()]
    return "\n".join(out)
