"""Reference outputs kept for one port run, so that every candidate of the run is judged against
outputs computed once.

Within a port run the candidates share their seeds (the session draws them once), so the
reference at each (reference, spec, size set, seed, value case) is the same for all of them. The
first check that reaches a case has the worker compute it; later checks send the worker a
``held`` reference job, and the worker neither computes nor sends it. Nothing a candidate
controls is in the key: the reference's own identity (the callable's file and its modification
time, the source cubin's digest, the golden folder), the source spec's file and version, and the
case. A cache is made per run (never shared between runs, whose seeds differ) and is thread-safe:
a pool's checks run side by side. The arrays are handed out read-only.

A pool's checks of one round walk the same plan at once, so each case is asked for by several
checks within moments: the first to ask :meth:`ReferenceCache.take` computes it, and the others
wait for it (up to a bound, after which they compute their own) rather than compute it again.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from porter.gate.runner.protocol import Reference

if TYPE_CHECKING:
    from porter.gate.plan import CaseKey

DEFAULT_MAX_BYTES = 4 << 30


# A reference's key (ReferenceCache.key): the reference job's key, the spec's file, its version, the case's key.
ReferenceKey = tuple[str, str, int, "CaseKey"]


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    waits: int = 0  # hits that waited for another check computing the same reference


class ReferenceCache:
    """Reference outputs by case, least recently used first out past ``max_bytes``."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self.stats = CacheStats()
        self._items: OrderedDict[ReferenceKey, dict[str, np.ndarray]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self._computing: dict[ReferenceKey, threading.Event] = {}
        self._arrivals = 0

    def arrival(self) -> int:
        """How many checks of the run came before this one (0 for the first): where its cases start
        (see :func:`porter.gate.lanes.staggered`)."""
        with self._lock:
            self._arrivals += 1
            return self._arrivals - 1

    @staticmethod
    def key(reference: Reference, spec_path: str, case_key: CaseKey) -> ReferenceKey:
        """The key of one case's reference: the reference job's identity, the source spec's file
        (and its version: an edited spec is another spec) and the case (sizes, seed, value case)."""
        try:
            version = os.stat(spec_path).st_mtime_ns
        except OSError:
            version = 0
        return reference.key, spec_path, version, case_key

    def take(self, key: ReferenceKey, wait_s: float) -> dict[str, np.ndarray] | None:
        """The reference at ``key``, or None: then the caller computes it, and must :meth:`put` it
        or :meth:`abandon` the key. While another caller computes it, wait for that (at most
        ``wait_s``; past that, or if it was abandoned, the caller computes it too)."""
        with self._lock:
            found = self._items.get(key)
            if found is None:
                pending = self._computing.get(key)
                if pending is None:
                    self._computing[key] = threading.Event()
                    self.stats.misses += 1
                    return None
            else:
                self._items.move_to_end(key)
                self.stats.hits += 1
                return found
        pending.wait(wait_s)
        with self._lock:
            found = self._items.get(key)
            if found is None:
                self.stats.misses += 1
                return None
            self._items.move_to_end(key)
            self.stats.hits += 1
            self.stats.waits += 1
            return found

    def abandon(self, key: ReferenceKey) -> None:
        """The reference at ``key`` will not come from this caller (its case faulted): whoever
        waits for it computes it."""
        with self._lock:
            pending = self._computing.pop(key, None)
        if pending is not None:
            pending.set()

    def __contains__(self, key: ReferenceKey) -> bool:
        with self._lock:
            return key in self._items

    def put(self, key: ReferenceKey, outputs: dict[str, Any]) -> dict[str, np.ndarray]:
        """Keep ``outputs`` (read-only copies' views) under ``key``; returns what is kept."""
        kept = {}
        for name, value in outputs.items():
            array = np.asarray(value)
            array.flags.writeable = False
            kept[name] = array
        size = sum(a.nbytes for a in kept.values())
        try:
            with self._lock:
                if key in self._items:
                    return self._items[key]
                if size > self.max_bytes:
                    return kept
                self._items[key] = kept
                self._bytes += size
                while self._bytes > self.max_bytes and self._items:
                    _, old = self._items.popitem(last=False)
                    self._bytes -= sum(a.nbytes for a in old.values())
            return kept
        finally:
            self.abandon(key)  # kept or not, nobody need wait for it any longer

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)
