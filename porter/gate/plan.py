"""What a check runs: the cases of its plan, and the seeds they draw from.

A plan is every (size set, seed, value case) the candidate is launched on. It covers the sweep
under every seed, and also every size set that will be timed or profiled (a kernel may behave
at the timed size only), one size set drawn for this check alone (a kernel may be right only at
the sizes the spec lists), and the spec's value cases with porter's wider-range one. ``porter
record`` records the same plan, so a golden folder can stand in for the reference exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from porter.errors import InputError
from porter.gate.inputs import fresh_seed, stream
from porter.gate.spec import Spec

SEEDS_PER_SIZE = 2


@dataclass(frozen=True)
class Case:
    """One planned run of the candidate: a size set, a seed and a value case ("" = default fills)."""

    sizes: dict[str, int]
    seed: int
    values: str = ""
    why: str = "sweep"  # "sweep" | "timed" | "profiled" | "unannounced" | the value case's name

    def key(self) -> tuple:
        return tuple(sorted(self.sizes.items())), self.seed, self.values


def check_seeds(seeds: tuple[int, ...] = ()) -> tuple[int, ...]:
    """``seeds`` when given, else a fresh pair no candidate can have been tuned to."""
    if seeds:
        return seeds
    first = fresh_seed()
    return tuple(first + k for k in range(SEEDS_PER_SIZE))


def check_plan(spec: Spec, seeds: tuple[int, ...], *, timed: list[dict[str, int]] | None = None,
               profiled: dict[str, int] | None = None) -> list[Case]:
    """Every case a check runs: the sweep x seeds, each timed or profiled size set not already in
    it (first seed: what is timed is what was verified), and the spec's value cases (first seed)."""
    plan = [Case(sizes, seed) for sizes in spec.size_sets() for seed in seeds]
    seen = {c.key() for c in plan}
    extra = [(sizes, "timed") for sizes in timed or []] + ([(profiled, "profiled")] if profiled else [])
    for sizes, why in extra:
        case = Case(sizes, seeds[0], why=why)
        if case.key() not in seen:
            plan.append(case)
            seen.add(case.key())
    drawn = unannounced_sizes(spec, seeds[0])
    if drawn is not None and Case(drawn, seeds[0]).key() not in seen:
        plan.append(Case(drawn, seeds[0], why="unannounced"))
    for value_case in spec.value_cases():
        plan.append(Case(spec.value_case_sizes(value_case), seeds[0], value_case.name, why=value_case.name))
    return plan


def skipped_unannounced(spec: Spec, plan: list[Case]) -> str:
    """Why a plan has no unannounced size set although the spec asks for one, or ''. The draw
    must stay inside the spec's size contract (``kernel.require``) and the lattice the sweep
    implies; when no draw does, the check says so rather than run the kernel out of contract."""
    if not spec.sweep or not spec.inputs_spec.unannounced or any(c.why == "unannounced" for c in plan):
        return ""
    contract = " and kernel.require" if spec.require else ""
    return ("no size set the spec does not list could be drawn inside the sweep's ranges" + contract
            + ": this check ran no unannounced size set")


def unannounced_sizes(spec: Spec, seed: int, tries: int = 64) -> dict[str, int] | None:
    """A size set the spec does not list, drawn from ``seed``, inside the contract the sweep implies.

    Each size symbol that the sweep varies (an integer in ``[sizes]``) is drawn log-uniformly
    between the smallest and largest value the sweep gives it, as an odd multiple of their greatest
    common divisor (a sweep of K = 64, 72, 1000... gives a K that is a multiple of 8 but not of 16:
    ragged against any larger tile); a symbol the sweep
    never varies keeps its value (a head dimension of 64 stays 64), and derived symbols are
    recomputed from the sweep entry drawn as the base, a draw that leaves any symbol's range or
    lattice (a leading dimension the sweep keeps a multiple of 8) is drawn again, and so is one
    that breaks the size contract (``kernel.require``). None when the spec has no sweep, opts out
    (``[inputs] unannounced = false``) or no draw passes the spec's checks.
    """
    if not spec.sweep or not spec.inputs_spec.unannounced:
        return None
    sets = spec.size_sets()
    implied = {}  # every symbol's (smallest, largest, step) over the sweep, derived ones too
    for name in spec.sizes:
        values = sorted({sizes[name] for sizes in sets})
        implied[name] = (values[0], values[-1], math.gcd(*values))
    ranges = {name: implied[name] for name, value in spec.sizes.items()
              if isinstance(value, int) and implied[name][0] < implied[name][1]}
    if not ranges:
        return None
    listed = {tuple(sorted(sizes.items())) for sizes in sets} | {tuple(sorted(spec.default_sizes().items()))}
    rng = stream(seed, 4, {}, "unannounced")
    for _ in range(tries):
        base = spec.sweep[int(rng.integers(len(spec.sweep)))]
        overrides: dict[str, int | str] = {k: v for k, v in base.items() if k not in ranges}
        for name, (lo, hi, step) in ranges.items():
            value = math.exp(rng.uniform(math.log(max(lo, 1)), math.log(hi)))
            units = max(1, round(value / step))
            units += 1 - units % 2  # an odd multiple of the step: no rounder than the contract demands
            overrides[name] = max(lo, step * (units if step * units <= hi else units - 2))
        try:
            sizes = spec.timing_sizes(overrides)
        except InputError:
            continue
        inside = all(lo <= sizes[k] <= hi and sizes[k] % step == 0 for k, (lo, hi, step) in implied.items())
        if inside and tuple(sorted(sizes.items())) not in listed:
            return sizes
    return None
