"""What a check runs: the cases of its plan, and the seeds they draw from.

A plan is every (size set, seed, value case) the candidate is launched on. It covers the sweep
under every seed, and also every size set that will be timed or profiled (a kernel may behave
at the timed size only), two size sets drawn for this check alone from its fresh seed (a kernel
may be right only at the sizes the spec lists): one inside the sweep's ranges at a residue drawn
modulo the kernel's largest tile, one above them where some buffer passes 2^24 elements, and the
spec's value cases with porter's own. ``porter record`` records the same plan, so a golden folder
can stand in for the reference exactly. What this guarantees is docs/spec.md, "What a check
guarantees".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

import numpy as np

from porter.errors import InputError
from porter.gate.inputs import fresh_seed, stream
from porter.gate.spec import WIDE, Spec

SEEDS_PER_SIZE = 2
LARGE_ELEMENTS = 1 << 24  # some buffer of the large case passes this many elements (float index math is exact below)
THOROUGH_BYTES = 1 << 31  # ... and, in a thorough check, this many bytes (32-bit byte offsets overflow)
BUDGET_BYTES = 2 << 30  # the large case's buffers together stay below this (a check stays bounded)
THOROUGH_BUDGET_BYTES = 12 << 30
FLOPS_FACTOR = 4  # with [cost] flops, the large case costs at most 4x the sweep's largest size set
LONG_EXTENT = 1 << 16  # the large case's drawn symbol passes this by itself first (16-bit counts wrap)
_TRIES = 64


# A case's key (Case.key): its size set (sorted name, value pairs), its seed and its value case.
CaseKey = tuple[tuple[tuple[str, int], ...], int, str]


@dataclass(frozen=True)
class Case:
    """One planned run of the candidate: a size set, a seed and a value case ("" = default fills)."""

    sizes: dict[str, int]
    seed: int
    values: str = ""
    why: str = "sweep"  # "sweep" | "timed" | "profiled" | "unannounced" | "large" | "timed-drawn" | a value case's name

    def key(self) -> CaseKey:
        return tuple(sorted(self.sizes.items())), self.seed, self.values


def plan_seeds(seeds: tuple[int, ...] = ()) -> tuple[int, ...]:
    """``seeds`` when given, else a fresh pair no candidate can have been tuned to."""
    if seeds:
        return seeds
    first = fresh_seed()
    return tuple(first + k for k in range(SEEDS_PER_SIZE))


def plan_cases(spec: Spec, seeds: tuple[int, ...], *, timed: list[dict[str, int]] | None = None,
               profiled: dict[str, int] | None = None, thorough: bool = False) -> list[Case]:
    """Every case a check runs: the sweep x seeds, each timed size set x seeds (timing rotates
    through those input sets: what is timed is what was verified), the profiled size set (first
    seed) when not already in it, one size set inside the sweep's ranges
    that the spec does not list, one above them (:func:`large_sizes`), one near the first timed
    set where it is timed beside it (:func:`near_timed_sizes`), and the value cases (first
    seed; porter's own at a size set of the sweep drawn per check)."""
    extra = [(profiled, "profiled")] if profiled else []
    near = near_timed_sizes(spec, timed[0], seeds[0]) if timed else None
    extra += [(drawn, why) for drawn, why in ((unannounced_sizes(spec, seeds[0]), "unannounced"),
                                              (large_sizes(spec, seeds[0], thorough=thorough), "large"),
                                              (near, "timed-drawn"))
              if drawn is not None]
    plan: list[Case] = []
    seen: set[CaseKey] = set()
    for case in [*(Case(sizes, seed) for sizes in spec.size_sets() for seed in seeds),
                 *(Case(sizes, seed, why="timed") for sizes in timed or [] for seed in seeds),
                 *(Case(sizes, seeds[0], why=why) for sizes, why in extra)]:
        if case.key() not in seen:  # the first of each size set and seed
            plan.append(case)
            seen.add(case.key())
    for value_case in spec.value_cases():
        sizes = (_drawn_size_set(spec, seeds[0]) if value_case.name == WIDE and not value_case.at
                 else spec.value_case_sizes(value_case))
        plan.append(Case(sizes, seeds[0], value_case.name, why=value_case.name))
    return plan


def _drawn_size_set(spec: Spec, seed: int) -> dict[str, int]:
    """One of the sweep's size sets, drawn from the check's seed: where porter's value case runs,
    so that across checks it runs at every one, the largest included."""
    sets = spec.size_sets()
    return sets[int(stream(seed, 4, {}, "wide").integers(len(sets)))]


def skipped_unannounced(spec: Spec, plan: list[Case]) -> str:
    """Why a plan has no unannounced or no large size set although the spec asks for them, or ''.
    A draw must stay inside the spec's size contract (``kernel.require``), the lattice the sweep
    implies and the size budget; when no draw does, the check says so rather than run the kernel
    out of contract."""
    if not spec.sweep or not spec.inputs_spec.unannounced:
        return ""
    contract = " and kernel.require" if spec.require else ""
    missing = [what for why, what in (("unannounced", "no size set the spec does not list could be drawn inside "
                                       f"the sweep's ranges{contract}"),
                                      ("large", "no size set above the sweep's could be drawn inside the size "
                                       f"budget{contract}"))
               if not any(c.why == why for c in plan)]
    return "; ".join(missing) + (": this check ran no such size set" if missing else "")


def _implied(spec: Spec) -> dict[str, tuple[int, int, int]]:
    """Every symbol's (smallest, largest, step) over the sweep and the defaults, derived ones too."""
    sets = [*spec.size_sets(), spec.default_sizes()]
    implied = {}
    for name in spec.sizes:
        values = sorted({sizes[name] for sizes in sets})
        implied[name] = (values[0], values[-1], math.gcd(*values))
    return implied


def free_symbols_of(spec: Spec) -> dict[str, tuple[int, int, int]]:
    """The size symbols a check may vary on its own, with their (smallest, largest, step): each
    integer of ``[sizes]`` the sweep varies, and each derived symbol (``lda = "K"``) that some
    sweep entry sets otherwise (a padded stride: the contract lets it vary)."""
    implied = _implied(spec)
    varied = {name for name, value in spec.sizes.items() if isinstance(value, int)}
    varied |= {name for name, value in spec.sizes.items() if isinstance(value, str)
               and any(name in entry and entry[name] != value for entry in spec.sweep)}
    return {name: implied[name] for name in spec.sizes if name in varied and implied[name][0] < implied[name][1]}


def with_residue(rng: np.random.Generator, value: int, step: int, tile: int) -> int:
    """``value`` moved to a residue modulo ``tile`` drawn uniformly among the multiples of ``step``
    (every residue class modulo each power of two up to the tile that the lattice allows), staying
    within one tile of where it was and at least ``step``."""
    period = max(tile, step)
    residue = step * int(rng.integers(period // step if period % step == 0 else 1))
    moved = value - value % period + residue
    if moved > value and moved - period >= step:
        moved -= period
    return moved if moved >= step else moved + period


def lowest_with_residue(value: int, step: int, tile: int) -> int:
    """A bound :func:`with_residue` never takes ``value`` below, whatever residue it draws."""
    return max(step, value - max(tile, step) + 1)


def _draw_in_range(rng: np.random.Generator, lo: int, hi: int, step: int, tile: int) -> int:
    """A value on the lattice of ``step`` in [lo, hi]: log-uniform, at a residue drawn modulo the
    tile (:func:`with_residue`); uniform over the lattice when the range holds fewer values than
    the tile has residues (a causal flag 0 or 1, a head dimension 64 or 128)."""
    first = -(-lo // step) * step
    if (hi - first) // step < max(tile // step, 1):
        return first + step * int(rng.integers((hi - first) // step + 1))
    value = math.exp(rng.uniform(math.log(max(lo, 1)), math.log(hi)))
    return with_residue(rng, int(value), step, tile)


def unannounced_sizes(spec: Spec, seed: int, tries: int = _TRIES, *, purpose: str = "unannounced",
                      ceiling: Mapping[str, int] | None = None, max_bytes: int | None = None,
                      avoid: Iterable[Mapping[str, int]] = ()) -> dict[str, int] | None:
    """A size set the spec does not list, drawn from ``seed``, inside the contract the sweep implies.

    Each symbol the check may vary (:func:`free_symbols_of`) is drawn log-uniformly between the
    smallest and largest value the sweep gives it, then moved to a residue modulo ``kernel.max_tile``
    drawn uniformly among the multiples of the sweep's step (a K that the sweep keeps a multiple of
    8 is then 8, 16, 24, ... modulo 256 with equal chance); a derived one that varies (a padded
    stride) is its expression plus a drawn multiple of its step; a symbol the sweep never varies
    keeps its value (a head dimension of 64 stays 64), other derived symbols are recomputed. A draw
    that leaves any symbol's range or lattice, or breaks ``kernel.require``, is drawn again. None
    when the spec has no sweep, opts out (``[inputs] unannounced = false``) or no draw passes.

    ``purpose`` keys the draw's stream (another purpose, another size set from the same seed);
    ``ceiling`` lowers a symbol's largest value, ``max_bytes`` bounds the buffers' bytes and the
    sets of ``avoid`` are never drawn (the emulator's drawn size set: porter.gate.emulated).
    """
    if not spec.sweep or not spec.inputs_spec.unannounced:
        return None
    implied, free = _implied(spec), free_symbols_of(spec)
    if not free:
        return None
    listed = {tuple(sorted(sizes.items())) for sizes in [*spec.size_sets(), spec.default_sizes(), *avoid]}
    rng = stream(seed, 4, {}, purpose)
    for _ in range(tries):
        base = spec.sweep[int(rng.integers(len(spec.sweep)))]
        overrides: dict[str, int | str] = {k: v for k, v in base.items() if k not in free}
        for name, (lo, hi, step) in free.items():
            if isinstance(spec.sizes[name], int):
                top = hi if ceiling is None or name not in ceiling else max(lo, min(hi, ceiling[name]))
                overrides[name] = _draw_in_range(rng, lo, top, step, spec.max_tile)
        sizes = _resolved(spec, overrides)
        for name, (_, _, step) in free.items():
            if isinstance(spec.sizes[name], str) and sizes is not None:
                overrides[name] = sizes[name] + step * int(rng.integers(max(spec.max_tile // step, 1) + 1))
        sizes = _resolved(spec, overrides)
        if sizes is None:
            continue
        inside = _keeps_lattice(sizes, implied) and all(lo <= sizes[k] <= hi for k, (lo, hi, _) in implied.items())
        small = max_bytes is None or total_buffer_bytes(spec, sizes) <= max_bytes
        if inside and small and tuple(sorted(sizes.items())) not in listed:
            return sizes
    return None


def near_timed_sizes(spec: Spec, timed: Mapping[str, int], seed: int, tries: int = _TRIES) -> dict[str, int] | None:
    """A size set drawn from ``seed`` near ``timed``, where speed is measured beside it: each
    integer symbol the check may vary (:func:`free_symbols_of`) drawn between half its timed
    value and the timed value as the unannounced set's are (:func:`_draw_in_range`: log-uniform,
    at a residue modulo ``kernel.max_tile`` drawn uniformly); the others as timed, derived symbols
    recomputed; on the sweep's lattice, never below a symbol's smallest listed value, inside
    ``kernel.require``, never a listed size set nor the timed one. None when no draw passes.

    The shape is the timed one's kind at a size nobody knows before the check: a kernel tuned
    for the timed shape alone is timed where it is not tuned, and no degenerate shape (the large
    case's one long symbol, where a library's split-K makes any tile kernel look 1000x slower)
    becomes a headline speed-up. It costs at most about what the timed set costs."""
    implied = _implied(spec)
    free = {k: v for k, v in free_symbols_of(spec).items() if isinstance(spec.sizes[k], int)}
    if not free:
        return None
    listed = {tuple(sorted(sizes.items())) for sizes in [*spec.size_sets(), spec.default_sizes(), timed]}
    rng = stream(seed, 4, {}, "timed-drawn")
    for _ in range(tries):
        overrides: dict[str, int | str] = {k: v for k, v in timed.items() if k not in free and isinstance(spec.sizes[k], int)}
        for name, (lo, _, step) in free.items():
            top = max(timed[name], lo)
            overrides[name] = _draw_in_range(rng, max(lo, top // 2), top, step, spec.max_tile)
        sizes = _resolved(spec, overrides)
        if sizes is None or not _keeps_lattice(sizes, implied):
            continue
        if all(sizes[k] >= implied[k][0] for k in free) and tuple(sorted(sizes.items())) not in listed:
            return sizes
    return None


def large_sizes(spec: Spec, seed: int, *, thorough: bool = False, tries: int = _TRIES) -> dict[str, int] | None:
    """A size set above the sweep's, drawn from ``seed``: one symbol the check may vary, drawn
    per check, at 2 to 4 times its largest listed value or more, until some buffer passes
    :data:`LARGE_ELEMENTS` elements (:data:`THOROUGH_BYTES` bytes when ``thorough``), with every
    other symbol at the sweep's smallest size set (so that the reference stays cheap) unless it
    must grow; inside ``kernel.max_sizes``, ``kernel.require``, the lattice the sweep implies, the
    size budget (:data:`BUDGET_BYTES` of buffers) and, with ``[cost] flops``, :data:`FLOPS_FACTOR`
    times the FLOPs of the sweep's largest size set; when no symbol reaches the mark, the largest
    size set above the sweep's inside those bounds. None when none fits (see
    :func:`skipped_unannounced`).

    The drawn symbol first grows by itself past :data:`LONG_EXTENT`, where the bounds let it (a
    count held in 16 bits wraps there), and only then do the symbols that share a buffer with it
    grow, in an order drawn too, each at most to its largest listed value (:func:`_grow_partner`),
    before the drawn one doubles on: a GEMM's K just past 2^16 with M or N grown to 256 passes the mark,
    where K alone grew to 3.8M with M = 1 and N = 8, a launch of one CTA that ran about 0.1 s on
    the H100 (2026-12-06), three times a case, and could be a third of a check's time. Not in a
    thorough check: its mark (2^31 bytes) is reached within the FLOPs bound only with the others
    small, and a port's passing candidate is confirmed by one (porter.agent.session)."""
    if not spec.sweep or not spec.inputs_spec.unannounced:
        return None
    implied = _implied(spec)
    free = {k: v for k, v in free_symbols_of(spec).items() if isinstance(spec.sizes[k], int)}
    smallest = smallest_size_set(spec)
    # The sweep's sets, not the timed one: the reference of every sweep set is computed in every check,
    # and one of a few times that cost stays cheap (attention's reference holds S x S scores).
    flops = FLOPS_FACTOR * max((spec.flops(sizes) or 0) for sizes in spec.size_sets())
    budget = THOROUGH_BUDGET_BYTES if thorough else BUDGET_BYTES
    rng = stream(seed, 4, {}, "large")

    def past(sizes: dict[str, int]) -> bool:
        return total_buffer_bytes(spec, sizes) > budget or bool(flops and (spec.flops(sizes) or 0) > flops)

    best = None  # the largest size set above the sweep's inside every bound: run when no symbol reaches the mark
    for name in rng.permutation(sorted(free)):
        # alone past LONG_EXTENT where that still reaches the mark (attention's S x S cost may not let
        # the partners grow after H = 65536), else the partners grow right after the first draw
        for alone_until in ((None,) if thorough else (LONG_EXTENT, 0)):
            for sizes in _growth(spec, implied, free, past, rng, smallest, str(name), alone_until, tries):
                if _passes(spec, sizes, thorough):
                    return sizes
                if best is None or total_buffer_bytes(spec, sizes) > total_buffer_bytes(spec, best):
                    best = sizes
    return best


def _growth(spec: Spec, implied: dict[str, tuple[int, int, int]], free: Mapping[str, tuple[int, int, int]],
            past: Callable[[dict[str, int]], bool], rng: np.random.Generator, smallest: Mapping[str, int],
            name: str, alone_until: int | None, tries: int) -> Iterator[dict[str, int]]:
    """The size sets inside the bounds (``past`` says which are not) with ``name`` above the
    sweep's, in the order the large case tries them: ``name`` at 2 to 4 times its largest listed
    value, then doubled, by itself until it passes ``alone_until`` (or meets a bound; forever when
    None), and from there each time after the partners have grown (:func:`_grow_partner`)."""
    _, hi, step = free[name]
    base = {k: smallest[k] for k in free if k != name}
    partners = [str(k) for k in rng.permutation(sorted(base))]
    most = spec.max_sizes.get(name, 1 << 40)
    value = min(most, int(hi * rng.uniform(2, 4)))
    inside: dict[str, int] | None = None  # the last size set found inside the bounds
    alone = True
    narrower = None  # the base before its last partner grew: back to it where that growth fits no lattice
    for _ in range(tries):
        sizes = _on_lattice(spec, implied, rng, base, name, value, step)
        out = sizes is not None and past(sizes)
        if (sizes is None or out) and narrower is not None:  # the last partner's growth did not fit
            base, narrower = narrower, None
            partners.pop(0)
            continue
        if sizes is None:
            return
        if out:
            if inside is None:  # the first draw was past a bound: back off toward the sweep
                if value <= hi + step:
                    return
                value = max(hi + step, value * 2 // 3)
                continue
            if alone_until is None or not alone:
                return  # the last size inside the bounds was the largest
            sizes, value, alone = inside, inside[name], False  # alone, it met a bound: the partners grow from there
        else:
            inside = sizes
        if sizes[name] > hi:
            if not out:
                yield sizes
            # alone until every later draw near ``value`` passes alone_until, not this one only
            lowest = lowest_with_residue(value, step, spec.max_tile)
            alone = alone and (alone_until is None or (lowest <= alone_until and value < most))
            wider = None if alone else _grow_partner(spec, free, base, name, sizes[name], partners)
            if wider is not None:
                base, narrower = wider, base
                continue
        narrower = None
        if value >= most or out:
            return
        value = min(most, value * 2)


def _grow_partner(spec: Spec, free: Mapping[str, tuple[int, int, int]], base: dict[str, int], name: str,
                  value: int, partners: list[str]) -> dict[str, int] | None:
    """``base`` with the first of ``partners`` that is below its largest listed value doubled (on
    its lattice), where that makes the buffers hold more elements with ``name`` at ``value``; None
    when no partner does. A partner that widens no buffer, or is at its largest value, is dropped
    from ``partners``: a symbol grows only where it brings the mark nearer."""
    now = _resolved(spec, {**base, name: value})
    held = _buffer_elements(spec, now) if now is not None else 0
    while partners:
        partner = partners[0]
        _, hi, step = free[partner]
        doubled = min(hi, 2 * base[partner]) // step * step
        if doubled > base[partner]:
            wider = _resolved(spec, {**base, name: value, partner: doubled})
            if wider is not None and _buffer_elements(spec, wider) > held:
                return {**base, partner: doubled}
        partners.pop(0)
    return None


def _buffer_elements(spec: Spec, sizes: dict[str, int]) -> int:
    """The elements every buffer at ``sizes`` holds, together."""
    return sum(spec.buffer_bytes(p, sizes) // p.dtype.itemsize for p in spec.params if p.kind == "buffer" and p.dtype)


def _on_lattice(spec: Spec, implied: dict[str, tuple[int, int, int]], rng: np.random.Generator,
                base: Mapping[str, int | str], name: str, value: int, step: int, tries: int = 64) -> dict[str, int] | None:
    """``name`` near ``value`` at a drawn residue, the others from ``base``, such that every symbol,
    derived ones too, stays on the lattice the sweep implies (a leading dimension ``ldb = "N"`` that
    every listed set keeps a multiple of 8 keeps N so); None when no residue drawn does."""
    for _ in range(tries):
        sizes = _resolved(spec, {**base, name: with_residue(rng, value, step, spec.max_tile)})
        if sizes is not None and _keeps_lattice(sizes, implied):
            return sizes
    return None


def _keeps_lattice(sizes: dict[str, int], implied: dict[str, tuple[int, int, int]]) -> bool:
    """Every symbol of ``sizes`` a multiple of the step the listed sets keep it at."""
    return all(sizes[k] % step == 0 for k, (_, _, step) in implied.items())


def _resolved(spec: Spec, overrides: dict[str, int | str]) -> dict[str, int] | None:
    """``[sizes]`` with ``overrides``, derived symbols recomputed; None when that breaks the spec."""
    try:
        return spec.timing_sizes(overrides)
    except InputError:
        return None


def smallest_size_set(spec: Spec) -> dict[str, int]:
    """The sweep's size set that moves the fewest bytes (where slow work runs: the sanitizers, and
    every symbol but one of the large case)."""
    return min(spec.size_sets(), key=lambda sizes: total_buffer_bytes(spec, sizes))


def total_buffer_bytes(spec: Spec, sizes: dict[str, int]) -> int:
    """The bytes of every buffer of ``sizes`` together."""
    return sum(spec.buffer_bytes(p, sizes) for p in spec.params if p.kind == "buffer")


def _passes(spec: Spec, sizes: dict[str, int], thorough: bool) -> bool:
    """Whether some buffer at ``sizes`` passes the large case's mark."""
    buffers = [p for p in spec.params if p.kind == "buffer"]
    if thorough:
        return any(spec.buffer_bytes(p, sizes) > THOROUGH_BYTES for p in buffers)
    return any(spec.buffer_bytes(p, sizes) // p.dtype.itemsize > LARGE_ELEMENTS for p in buffers if p.dtype)
