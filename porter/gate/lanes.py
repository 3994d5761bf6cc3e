"""Which worker runs which case of a check, where a check has several workers on its GPU.

A check's cases are mostly the worker's own Python and CUDA calls around small launches (on the
H200, about 25 ms a sweep case against well under 1 ms of kernels), so two worker processes on one
GPU run a check's cases side by side in little more than half the time, where the pool has a slot
with no candidate of its own (``porter check`` of one kernel, the candidate a port run confirms).
Timing stays with the check's own worker, and so do the cases whose inputs it times: the worker
keeps the inputs it drew, and the timing run on a set it checked draws nothing again.

The split is fixed before the first case runs (no case waits to learn where it goes; a worker
draws its own next cases' inputs ahead), largest cases first onto the least loaded lane, each
lane's cases then in the plan's order, or :func:`staggered`: where a port run's checks start side
by side in a pool, each starts at another size set, so that they compute different references at
once instead of waiting, one behind the other, for the one that computes each.
"""

from __future__ import annotations

from collections.abc import Sequence

CASE_OVERHEAD_BYTES = 16 << 20  # a case's fixed cost, as bytes of buffers that cost as much


def split(costs: Sequence[int], lanes: int, first_lane: Sequence[int] = ()) -> list[list[int]]:
    """The indices of ``costs`` (one a case) dealt to ``lanes`` lanes: those in ``first_lane`` to
    lane 0, every other one, largest first, to the lane with the least cost so far; each lane's in
    ascending order. Every index lands in exactly one lane."""
    if lanes < 1:
        raise ValueError("a check needs at least one lane")
    dealt: list[list[int]] = [[] for _ in range(lanes)]
    load = [0] * lanes
    pinned = set(first_lane)
    for index in sorted(pinned):
        dealt[0].append(index)
        load[0] += costs[index]
    for index in sorted((i for i in range(len(costs)) if i not in pinned), key=lambda i: (-costs[i], i)):
        lane = min(range(lanes), key=lambda k: (load[k], k))
        dealt[lane].append(index)
        load[lane] += costs[index]
    return [sorted(indices) for indices in dealt]


def staggered(indices: Sequence[int], groups: Sequence[object], start: int) -> list[int]:
    """``indices`` (in order) begun at their ``start``-th run of equal ``groups[i]`` (a case's size
    set and value case), modulo the number of runs, and wrapped around: each run stays whole and
    in order, so that the cases of one size set still follow each other on the same buffers with
    new data (see ``WorkerState.case_launch``); ``start`` 0 keeps the order as it is."""
    runs: list[list[int]] = []
    for index in indices:
        if runs and groups[runs[-1][-1]] == groups[index]:
            runs[-1].append(index)
        else:
            runs.append([index])
    if not runs:
        return []
    first = start % len(runs)
    return [index for run in runs[first:] + runs[:first] for index in run]
