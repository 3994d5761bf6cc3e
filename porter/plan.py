"""What a check runs: the cases of its plan, and the seeds they draw from.

A plan is every (size set, seed, value case) the candidate is launched on. It covers the sweep
under every seed, and also every size set that will be timed or profiled (a kernel may behave
at the timed size only), and the spec's value cases with porter's wider-range one. ``porter
record`` records the same plan, so a golden folder can stand in for the reference exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

from porter.inputs import fresh_seed
from porter.spec import Spec

SEEDS_PER_SIZE = 2


@dataclass(frozen=True)
class Case:
    """One planned run of the candidate: a size set, a seed and a value case ("" = default fills)."""

    sizes: dict[str, int]
    seed: int
    values: str = ""
    why: str = "sweep"  # "sweep" | "timed" | "profiled" | the value case's name

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
    for value_case in spec.value_cases():
        plan.append(Case(spec.value_case_sizes(value_case), seeds[0], value_case.name, why=value_case.name))
    return plan
