"""GPU architecture profiles and PTX feature gating.

The data lives in ``profiles/``: ``features.toml`` names the instruction families porter recognises
(regexes over full dotted opcodes) and ``<arch>.toml`` says, per target, which families ptxas accepts,
how to prove the native tensor-core path ran (PTX/SASS opcodes, ncu metrics), the flagship part's peaks,
and a programming-model note for the agent's prompt. The accept/reject lists come from ptxas 13.0 and are
re-checked against the installed ptxas by ``tests/test_profiles_vs_ptxas.py``.

:func:`can_compile` encodes ptxas's ``.target`` -> ``-arch`` rules (plain targets are forward
compatible, ``f`` targets stay within their SM family, ``a`` targets run only on themselves), and
:func:`compatibility` combines both to say whether a module assembles for an arch as is, needs its
``.target``/``.version`` rewritten, or uses instructions that the arch does not have.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Any, Literal, Protocol

from porter._data import data_dir
from porter._toml import tomllib
from porter.errors import InputError
from porter.ptx.isa import IsaNeed, IsaSupport, lowered, ptx_key, too_new
from porter.ptx.model import PtxModule

# "needs newer ptxas": the arch has every instruction, but the ptxas in use is too old for the PTX
# ISA the module needs there (see :func:`negotiate_version`).
Status = Literal["as-is", "retarget", "incompatible", "needs newer ptxas"]

_ARCH = re.compile(r"^(?:sm_?|compute_?)?(\d{2,3})([af]?)$")


@dataclass(frozen=True)
class Feature:
    """An instruction family, e.g. ``wgmma`` (every opcode starting ``wgmma.``)."""

    name: str
    description: str
    patterns: tuple[re.Pattern[str], ...]
    replacement_hint: str
    # The lowest PTX ISA version that has it, where that is above the minimum of the targets that have it.
    min_ptx: str | None = None

    def matches(self, opcode: str) -> bool:
        return any(p.match(opcode) for p in self.patterns)


@dataclass(frozen=True)
class NcuInfo:
    """The Nsight Compute chip name and the pipe metrics that count tensor-core instructions on it."""

    chip: str
    metrics: tuple[str, ...]
    source: str  # where the names come from (checked with ncu, or assumed)


@dataclass(frozen=True)
class Peak:
    """Datasheet peaks of one part (a product built on the arch), for rooflines."""

    part: str
    match: tuple[str, ...]  # substrings of the CUDA device name that identify the part ("H200")
    sm_count: int
    bf16_dense_tflops: float
    mem_tbps: float
    smem_per_block_optin_bytes: int
    source: str
    note: str = ""


@dataclass(frozen=True)
class ArchProfile:
    """One compilation target (``sm_90a``) as described by ``profiles/<name>.toml``."""

    name: str
    compute_capability: str  # "9.0"
    min_ptx: str  # lowest .version ptxas accepts with this .target
    suffix: str  # "", "a" or "f"
    family: str  # the SM family (same major compute capability), e.g. "sm_100" for sm_100/100a/100f/103a
    generation: str
    # The native tensor-core model: "mma.sync", "wgmma" or "tcgen05" (each also a feature name).
    tensor_core: str
    accepts: tuple[str, ...]
    rejects: tuple[str, ...]
    # Opcodes whose presence proves the arch's own tensor-core model is in use.
    signature_ptx: tuple[str, ...]  # PTX opcode prefixes ("wgmma.mma_async")
    signature_sass: tuple[str, ...]  # SASS opcode bases ("HGMMA")
    ncu: NcuInfo
    peak: Peak  # the flagship part
    peak_variants: tuple[Peak, ...]  # other parts of the same arch (H200 next to H100)
    notes: str

    def supports(self, feature: str) -> bool:
        return feature in self.accepts

    def peak_for(self, device_name: str) -> tuple[float, float, str]:
        """(bf16 dense TFLOP/s, memory TB/s, part name) of the part whose longest ``match`` is in ``device_name``.

        Longest wins so that "NVIDIA GH200 480GB" picks GH200 over H200 and "NVIDIA L40S" picks L40S over L4;
        an unknown name gets the flagship.
        """
        name = device_name.lower()
        best, best_length = self.peak, 0
        for part in (self.peak, *self.peak_variants):
            for token in part.match:
                if token.lower() in name and len(token) > best_length:
                    best, best_length = part, len(token)
        return best.bf16_dense_tflops, best.mem_tbps, best.part


@dataclass(frozen=True)
class FeatureUse:
    feature: str
    line: int
    opcode: str


@dataclass(frozen=True)
class Offender:
    """An instruction that the destination arch cannot assemble."""

    line: int
    opcode: str
    feature: str
    message: str  # "`wgmma.mma_async...` at line 500 exists only on sm_90a"
    hint: str  # what to use instead (the feature's replacement_hint)


@dataclass(frozen=True)
class Compatibility:
    """Whether a module assembles for ``arch``: as is, after a ``.target``/``.version`` rewrite, or not at all."""

    arch: str
    status: Status
    reason: str
    offenders: tuple[Offender, ...] = ()
    new_target: str | None = None
    new_version: str | None = None
    note: str = ""  # how the .version was negotiated with the ptxas in use, when it was lowered


class _HasOpcode(Protocol):
    @property
    def line(self) -> int: ...

    @property
    def opcode(self) -> str: ...


def normalize_arch(name: str) -> str:
    """``"sm90a"``, ``"90a"``, ``"SM_90A"``, ``"compute_90a"`` -> ``"sm_90a"``; InputError if it is not an SM name."""
    match = _ARCH.match(name.strip().lower())
    if not match:
        raise InputError(f"{name!r} is not a GPU architecture name (expected e.g. sm_90a, sm_100f or 120a)")
    return f"sm_{match.group(1)}{match.group(2)}"


def _split(arch: str) -> tuple[int, str]:
    """``"sm_103a"`` -> ``(103, "a")``."""
    match = _ARCH.match(arch)
    assert match, arch  # callers pass normalised names
    return int(match.group(1)), match.group(2)


def _unwrap(text: str) -> str:
    """Join hard-wrapped lines into one line per paragraph (the TOML is wrapped for reading, prompts are not)."""
    paragraphs = re.split(r"\n\s*\n", text.strip())
    return "\n\n".join(" ".join(line.strip() for line in p.splitlines()) for p in paragraphs)


def _read_toml(path: Path) -> dict[str, Any]:
    with path.open("rb") as handle:
        data: dict[str, Any] = tomllib.load(handle)  # tomli (Python 3.10) is unannotated
    return data


def _peak(raw: dict[str, Any]) -> Peak:
    fields = {k: v for k, v in raw.items() if k != "variants"}
    return Peak(**{**fields, "match": tuple(fields["match"])})


@cache
def _features() -> tuple[Feature, ...]:
    path = data_dir("profiles") / "features.toml"
    features = []
    for raw in _read_toml(path)["feature"]:
        features.append(
            Feature(
                name=raw["name"],
                description=raw["description"],
                patterns=tuple(re.compile(p) for p in raw["patterns"]),
                replacement_hint=raw["replacement_hint"],
                min_ptx=raw.get("min_ptx"),
            )
        )
    return tuple(features)


def load_features() -> dict[str, Feature]:
    """Every feature of ``profiles/features.toml``, by name, in file order."""
    return {f.name: f for f in _features()}


@cache
def _profiles() -> tuple[ArchProfile, ...]:
    known = [f.name for f in _features()]
    profiles = []
    for path in sorted(data_dir("profiles").glob("*.toml")):
        if path.name == "features.toml":
            continue
        raw = _read_toml(path)
        accepts, rejects = tuple(raw["accepts"]), tuple(raw["rejects"])
        # A feature in neither list would silently count as accepted, so a profile must place every one.
        if sorted(accepts + rejects) != sorted(known):
            raise ValueError(
                f"{path}: accepts + rejects must list every feature of features.toml exactly once"
            )
        if raw["name"] != path.stem or normalize_arch(raw["name"]) != raw["name"]:
            raise ValueError(
                f"{path}: name {raw['name']!r} must be the normalised arch and match the file name"
            )
        profiles.append(
            ArchProfile(
                name=raw["name"],
                compute_capability=raw["compute_capability"],
                min_ptx=raw["min_ptx"],
                suffix=raw["suffix"],
                family=raw["family"],
                generation=raw["generation"],
                tensor_core=raw["tensor_core"],
                accepts=accepts,
                rejects=rejects,
                signature_ptx=tuple(raw["signature"]["ptx"]),
                signature_sass=tuple(raw["signature"]["sass"]),
                ncu=NcuInfo(
                    chip=raw["ncu"]["chip"], metrics=tuple(raw["ncu"]["metrics"]), source=raw["ncu"]["source"]
                ),
                peak=_peak(raw["peak"]),
                peak_variants=tuple(_peak(v) for v in raw["peak"].get("variants", ())),
                notes=_unwrap(raw["notes"]),
            )
        )
    return tuple(sorted(profiles, key=lambda p: (_split(p.name)[0], p.suffix)))


def load_profiles() -> dict[str, ArchProfile]:
    """Every profile, by name (``"sm_90a"``), ordered by compute capability then suffix."""
    return {p.name: p for p in _profiles()}


def get_profile(name: str) -> ArchProfile:
    """The profile for ``name`` in any spelling :func:`normalize_arch` accepts; InputError if porter has none."""
    profiles = load_profiles()
    arch = normalize_arch(name)
    if arch not in profiles:
        raise InputError(f"no profile for architecture {name!r}; known: {', '.join(profiles)}")
    return profiles[arch]


def features_used(instructions: Iterable[_HasOpcode]) -> list[FeatureUse]:
    """Every (feature, instruction) match, in instruction order; an instruction may match several features."""
    return [
        FeatureUse(feature=name, line=ins.line, opcode=ins.opcode)
        for ins in instructions
        for name in _features_of(ins.opcode)
    ]


@lru_cache(maxsize=4096)
def _features_of(opcode: str) -> tuple[str, ...]:
    """The features ``opcode`` belongs to (a module repeats few opcodes many times)."""
    return tuple(f.name for f in _features() if f.matches(opcode))


def can_compile(module_target: str, arch: str) -> tuple[bool, str]:
    """Whether ptxas assembles PTX with ``.target module_target`` for ``-arch=arch``, and why (ptxas's wording on failure).

    The rules, from ``ptxas --help`` and checked pair by pair against ptxas 13.0: sm_XY compiles to every sm_MN,
    sm_MNa, sm_MNf with MN >= XY; sm_XYf to sm_XZ, sm_XZa, sm_XZf with Z >= Y in the same family (same major
    compute capability: sm_100f covers sm_103 but not sm_110 or sm_120); sm_XYa only to sm_XYa.
    """
    src, dst = normalize_arch(module_target), normalize_arch(arch)
    (src_cc, src_suffix), (dst_cc, _) = _split(src), _split(dst)
    if dst_cc < src_cc:
        return False, "SM version specified by .target is higher than default SM version assumed"
    if src == dst:
        return True, f".target {src} is {dst}"
    if src_suffix == "a":
        if dst_cc == src_cc:
            return False, f"PTX with .target '{src}' cannot be compiled for architecture '{dst}'"
        return False, f"Program with .target '{src}' cannot be compiled to future architecture"
    if src_suffix == "f":
        if dst_cc // 10 != src_cc // 10:
            return (
                False,
                f"Program with .target '{src}' cannot be compiled to different SM-family architecture",
            )
        return True, f".target {src} covers {dst} (same SM family, equal or higher minor version)"
    return True, f".target {src} is forward-compatible with {dst}"


def cubin_runs_on(cubin_arch: str, device_arch: str) -> bool:
    """Whether a cubin for ``cubin_arch`` loads on a device of ``device_arch`` (binary compatibility).

    A plain sm_XY cubin runs on sm_XZ devices with Z >= Y (same major); an arch-specific sm_XYa
    cubin only on sm_XY; a family sm_XYf cubin on the family's later minors.
    """
    cnum, csuf = _split(normalize_arch(cubin_arch))
    dnum, _ = _split(normalize_arch(device_arch))
    if cnum // 10 != dnum // 10:
        return False
    return dnum == cnum if csuf == "a" else dnum >= cnum


def ptx_runs_on(ptx_arch: str, device_arch: str) -> tuple[bool, str]:
    """Whether PTX of ``.target ptx_arch`` can run on a device, and why not: built for its own
    target when that cubin loads there (sm_90a PTX on sm_90), else for the device when ptxas allows
    it (sm_80 PTX on sm_90)."""
    if cubin_runs_on(ptx_arch, device_arch):
        return True, ""
    return can_compile(ptx_arch, device_arch)


def _availability(feature: str) -> str:
    """Where ``feature`` exists, in words: "exists only on sm_90a", "needs sm_90 or newer", or a list."""
    profiles = _profiles()
    having = [p for p in profiles if feature in p.accepts]
    if not having:
        return "is not supported by any known target"
    if len(having) == 1:
        return f"exists only on {having[0].name}"
    lowest = min(_split(p.name)[0] for p in having)
    if len(having) == sum(1 for p in profiles if _split(p.name)[0] >= lowest):
        return f"needs sm_{lowest} or newer"
    return "exists only on " + ", ".join(p.name for p in having)


def _offenders(uses: Iterable[FeatureUse], profile: ArchProfile) -> tuple[Offender, ...]:
    """One offender per instruction that uses a feature ``profile`` rejects.

    When an instruction falls in several rejected families (``tcgen05.shift`` is also ``tcgen05``), the family
    accepted by the fewest profiles is the binding constraint, so that one is reported.
    """
    width = {f.name: sum(1 for p in _profiles() if f.name in p.accepts) for f in _features()}
    hints = {f.name: f.replacement_hint for f in _features()}
    worst: dict[tuple[int, str], FeatureUse] = {}
    for use in uses:
        if use.feature in profile.rejects:
            current = worst.get((use.line, use.opcode))
            if current is None or width[use.feature] < width[current.feature]:
                worst[use.line, use.opcode] = use
    return tuple(
        Offender(
            line=use.line,
            opcode=use.opcode,
            feature=use.feature,
            message=f"`{use.opcode}` at line {use.line} {_availability(use.feature)}",
            hint=hints[use.feature],
        )
        for use in sorted(worst.values(), key=lambda u: u.line)
    )


@cache
def _directive_minima() -> dict[str, str]:
    """Entry directives with a PTX ISA minimum of their own (``[[directive]]`` in features.toml)."""
    raw = _read_toml(data_dir("profiles") / "features.toml")
    return {d["name"]: d["min_ptx"] for d in raw.get("directive", ())}


def isa_needs(module: PtxModule, target: str | None = None) -> tuple[IsaNeed, ...]:
    """Why ``module`` with ``.target target`` (default: its own) needs a PTX ISA version: the target's
    minimum, each instruction of a family with a ``min_ptx`` and each entry directive with one."""
    arch = normalize_arch(target or module.arch)
    needs: list[IsaNeed] = []
    profile = load_profiles().get(arch)
    if profile is not None:
        line = module.target_line if arch == normalize_arch(module.arch) else None
        needs.append(IsaNeed(profile.min_ptx, f".target {arch}", line))
    features = load_features()
    for use in features_used(module.instructions()):
        if minimum := features[use.feature].min_ptx:
            needs.append(IsaNeed(minimum, f"`{use.opcode}` ({use.feature})", use.line))
    directives = _directive_minima()
    for entry in module.entries:
        for d in entry.directives:
            if d.name in directives:
                needs.append(IsaNeed(directives[d.name], f".{d.name} on {entry.name}", d.line))
    return tuple(needs)


def isa_floor(module: PtxModule, target: str | None = None) -> IsaNeed | None:
    """The need that binds: the lowest ``.version`` the module can carry for ``target`` (the first of
    the highest, in the order of :func:`isa_needs`); None when porter knows of none."""
    needs = isa_needs(module, target)
    return max(needs, key=lambda n: ptx_key(n.version)) if needs else None


@dataclass(frozen=True)
class VersionChoice:
    """The ``.version`` to write for a target and a ptxas: ``problem`` (one line) when there is none."""

    version: str
    note: str = ""  # said when the version was lowered for this ptxas
    problem: str = ""  # the module needs a newer PTX ISA than this ptxas accepts


def negotiate_version(module: PtxModule, target: str | None = None, isa: IsaSupport | None = None) -> VersionChoice:
    """The ``.version`` the module should carry with ``.target target`` (default: its own).

    At least what the target and the module's instructions need (:func:`isa_floor`), and not below
    the module's own. With ``isa`` (what the ptxas in use accepts), a ``.version`` newer than ptxas
    takes is lowered to the newest it takes when nothing needs more (``note`` says so); when
    something does, ``problem`` names it, its line, the ISA it needs and the CUDA release that brings it.
    """
    floor = isa_floor(module, target)
    wanted = max(module.version, floor.version, key=ptx_key) if floor is not None else module.version
    if isa is None or isa.accepts(wanted):
        return VersionChoice(wanted)
    if floor is not None and not isa.accepts(floor.version):
        return VersionChoice(wanted, problem=too_new(floor, isa))
    return VersionChoice(isa.max_ptx, note=lowered(module.version, isa.max_ptx, floor, isa))


def version_problem(module: PtxModule, target: str | None = None, isa: IsaSupport | None = None) -> str | None:
    """Why this ptxas cannot take the module as written, in one line; None when it can (as far as
    porter knows: ptxas has the last word). For a candidate, which porter judges as written: what it
    needs that this ptxas lacks, or the ``.version`` it should carry instead."""
    if isa is None:
        return None
    choice = negotiate_version(module, target, isa)
    if choice.problem:
        return choice.problem
    if isa.accepts(module.version):
        return None
    floor = isa_floor(module, target)
    needs = f"; nothing in it needs more than {floor.version} ({floor.what})" if floor is not None else ""
    return (f".version {module.version} (line {module.version_line}) is newer than ptxas {isa.ptxas} accepts "
            f"(PTX ISA up to {isa.max_ptx}): write .version {choice.version} or lower{needs}")


def compatibility(module: PtxModule, arch: str, isa: IsaSupport | None = None) -> Compatibility:
    """Whether ``module`` assembles for ``arch`` as is, after a ``.target``/``.version`` rewrite, or not at all.

    Only the ``.target`` decides "as is": ptxas assembles an old ``.version`` for a newer ``-arch`` as long as
    the ``.target`` is compatible (``.version 7.0`` / ``.target sm_80`` assembles for sm_100a), so the module's
    version is raised only when the target is rewritten. With ``isa`` (what the ptxas in use accepts), a
    ``.version`` newer than that is a rewrite too, lowering it where nothing needs it
    (:func:`negotiate_version`), and "needs newer ptxas" where something does.
    """
    profile = get_profile(arch)
    uses = features_used(module.instructions())
    offenders = _offenders(uses, profile)
    if offenders:
        missing = sorted({o.feature for o in offenders})
        return Compatibility(
            arch=profile.name,
            status="incompatible",
            reason=(
                f"{len(offenders)} instruction(s) use features that {profile.name} does not have "
                f"({', '.join(missing)}); first: {offenders[0].message}"
            ),
            offenders=offenders,
        )
    src = normalize_arch(module.arch)
    ok, why = can_compile(src, profile.name)
    if ok:
        reason = f"assembles as is ({why})"
        if src != profile.name:
            extra = "its arch-specific instructions" if profile.suffix else f"instructions newer than {src}"
            reason += f"; retarget to .target {profile.name} to use {extra}"
        if isa is not None and not isa.accepts(profile.min_ptx):  # a ptxas older than the arch itself
            need = IsaNeed(profile.min_ptx, f"assembling for {profile.name}")
            return Compatibility(arch=profile.name, status="needs newer ptxas", reason=too_new(need, isa))
        if isa is None or isa.accepts(module.version):
            return Compatibility(arch=profile.name, status="as-is", reason=reason)
        choice = negotiate_version(module, src, isa)
        if choice.problem:
            return Compatibility(arch=profile.name, status="needs newer ptxas", reason=choice.problem)
        return Compatibility(arch=profile.name, status="retarget", reason=f"{choice.note}; then it {reason}",
                             new_target=src, new_version=choice.version, note=choice.note)
    choice = negotiate_version(module, profile.name, isa)
    if choice.problem:
        return Compatibility(arch=profile.name, status="needs newer ptxas", reason=choice.problem)
    reason = f"every instruction exists on {profile.name}, but ptxas refuses the .target: {why}"
    return Compatibility(
        arch=profile.name,
        status="retarget",
        reason=f"{reason}; {choice.note}" if choice.note else reason,
        new_target=profile.name,
        new_version=choice.version,
        note=choice.note,
    )


_TENSOR_CORE_MODELS = {
    "mma.sync": "warp-level mma.sync (HMMA/QMMA) with ldmatrix-loaded register fragments and register accumulators",
    "wgmma": (
        "warpgroup wgmma.mma_async: 128 threads issue MMAs on shared-memory descriptors, accumulators in "
        "registers, completion through wgmma.commit_group/wait_group"
    ),
    "tcgen05": (
        "tcgen05.mma: one thread issues MMAs on shared-memory descriptors plus an instruction descriptor, "
        "accumulators in tensor memory (tcgen05.alloc, tcgen05.ld), completion through tcgen05.commit to an mbarrier"
    ),
}


def tensor_core_change(src: ArchProfile, dst: ArchProfile) -> str | None:
    """How the native tensor-core model changes from ``src`` to ``dst``; None when it is the same.

    A change means a straight retarget cannot reach ``dst``'s tensor-core throughput: the main loop needs
    ``dst``'s own instructions (see ``dst.signature``).
    """
    if src.tensor_core == dst.tensor_core:
        return None
    if dst.supports(src.tensor_core):
        fate = f"{src.tensor_core} still assembles on {dst.name} but is not its native tensor-core path"
    else:
        fate = f"{src.tensor_core} does not exist on {dst.name}"
    return (
        f"{src.name} uses {_TENSOR_CORE_MODELS[src.tensor_core]}; {fate}. "
        f"{dst.name}'s native model is {_TENSOR_CORE_MODELS[dst.tensor_core]}."
    )
