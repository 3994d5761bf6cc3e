"""How a timing run spends its launches, as pure functions: where each input set's buffers lie,
the contenders' order in each round, how many rounds each batch runs and when to stop. The
worker (``jobs.job_time``) and the fake GPU (``fake.FakeGpu``) both run :func:`adaptive_rounds`,
so the loop's logic is the same, and testable, without a GPU.

A round launches every contender once, on input set ``r % sets`` for round ``r``. Rounds run in
batches: the events of a batch are read (one synchronize) only between batches, never inside a
timed window. After each batch the run stops when, on every input set, every contender's median
is known to the target (:func:`should_stop`), or at the cap the budget sets.

The target is on each contender's median and not on the candidate-to-contender ratios: the
headline ratio is one of medians (per input set, then the lowest), and with each median inside
±t at 95%, the ratio of two lies inside about ±2t (each bound the ratio of the two intervals'
opposite ends, at joint confidence above 90%). A paired, per-round ratio would resist drift better
but estimate a different quantity (the median of ratios) than the one reported.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from porter.gate.layout import Placing
from porter.gate.median_ci import relative_half_width

REPEAT_LAUNCHES = 64  # consecutive untimed launches after the timing loop, globals carried over


def set_placing(index: int) -> Placing:
    """Where the buffers of a timing run's input set ``index`` lie: set 0 as a checked case's first
    run (flush), every later set as a program's tensors lie (the plain family, offsets drawn from
    its seed as a checked run's are), whatever family the checked runs drew: a speed measured only
    in porter's fenced layouts would be one no program sees. The caller passes a single checked
    seed twice, so that every timing run times both (see ``timing.timed_seeds``)."""
    return "flush" if index == 0 else "plain"


def cycle(sets: int) -> int:
    """Rounds after which every input set has run as often as every other, in each contender order."""
    return 2 * sets


def round_order(rep: int, sets: int, contenders: int) -> list[int]:
    """The contenders' order in round ``rep``: forward, then reversed, alternating every ``sets``
    rounds, so that on every input set each contender runs first as often as last (alternating
    every round would tie the order to the set when there are two)."""
    order = list(range(contenders))
    return order if (rep // sets) % 2 == 0 else order[::-1]


def _round_up(n: int, step: int) -> int:
    return -(-n // step) * step


def rep_cap(budget_s: float, round_s: float, min_reps: int, max_reps: int, sets: int) -> int:
    """The most rounds a run may take: what ``budget_s`` buys at ``round_s`` a round, within
    ``min_reps`` and ``max_reps``, in whole cycles (at least one)."""
    step = cycle(sets)
    want = int(min(max_reps, max(min_reps, budget_s / max(round_s, 1e-9))))
    return max(_round_up(max(min_reps, 1), step), want // step * step)


def next_total(done: int, min_reps: int, cap: int, sets: int) -> int:
    """The rounds run once the next batch is done: ``min_reps`` first, then half again as many
    as so far (a synchronize per batch, so their count grows as the log of the rounds), in whole
    cycles, never past ``cap``."""
    step = cycle(sets)
    return min(cap, max(_round_up(max(min_reps, done + done // 2), step), done + step))


def per_set(samples: Sequence[float], sets: int) -> list[list[float]]:
    """One contender's times split by input set (round ``r`` ran on set ``r % sets``)."""
    return [list(samples[s::sets]) for s in range(sets)]


def within_target(samples: Sequence[Sequence[float]], sets: int, target: float) -> bool:
    """Whether, on every input set, every contender's median has a 95% interval within ±``target``."""
    return all(relative_half_width(own) <= target for times in samples for own in per_set(times, sets))


def should_stop(samples: Sequence[Sequence[float]], sets: int, target: float, reps: int, cap: int) -> bool:
    """Whether a run with ``samples`` (per contender, one time per round) after ``reps`` rounds is
    done: at the cap, or with every median known to ``target`` (see :func:`within_target`)."""
    return reps >= cap or within_target(samples, sets, target)


def adaptive_rounds(run_batch: Callable[[int, int], list[list[float]]], contenders: int, sets: int, min_reps: int,
                    cap: int, target: float) -> list[list[float]]:
    """Per contender, its time in each round run. ``run_batch(first, end)`` runs rounds ``first``
    to ``end - 1`` and returns each contender's times in them."""
    times: list[list[float]] = [[] for _ in range(contenders)]
    done = 0
    while not done or not should_stop(times, sets, target, done, cap):
        end = next_total(done, min_reps, cap, sets)
        for own, new in zip(times, run_batch(done, end), strict=True):
            own.extend(new)
        done = end
    return times
