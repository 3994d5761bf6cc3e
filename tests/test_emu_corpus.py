"""Every kernel of the emulator's corpus (tests/emu_corpus.py) against its NumPy model of the PTX
ISA: the emulated outputs equal the model's bit for bit, or within the case's documented ulps."""

from __future__ import annotations

import numpy as np
import pytest
from emu_corpus import CorpusCase, Topic, topics, ulps_apart

from porter.emu import emulate

CASES = [(t, c) for t in topics() for c in t.cases]


@pytest.mark.parametrize(("topic", "case"), CASES, ids=[f"{t.name}-{c.entry}-{i}" for i, (t, c) in enumerate(CASES)])
def test_corpus_case(topic: Topic, case: CorpusCase) -> None:
    args = case.make_args(np.random.default_rng(7))
    made = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    expected = case.expect(made)
    res = emulate(topic.ptx, case.entry, case.grid, case.block, args, dynamic_smem=case.dynamic_smem)
    assert res.ok, [str(d) for d in res.diagnostics]
    for i in case.outputs:
        got, want = np.asarray(args[i]).reshape(-1), np.asarray(expected[i]).reshape(-1).astype(args[i].dtype)
        apart = ulps_apart(got, want)
        worst = int(np.argmax(apart))
        assert apart[worst] <= case.ulps, (f"output {i} element {worst}: emulated {got[worst]!r}, the ISA's "
                                           f"{want[worst]!r} ({apart[worst]} ulps; {case.ulps} allowed)")


def test_ulps_apart_counts_neighbours_and_nan() -> None:
    one = np.float32(1.0)
    a = np.array([one, np.nextafter(one, np.float32(2)), np.float32(np.nan), np.float32(0.0)], np.float32)
    b = np.array([one, one, np.float32(np.nan), np.float32(-0.0)], np.float32)
    assert ulps_apart(a, b).tolist() == [0, 1, 0, 0]
    assert ulps_apart(np.array([np.nan], np.float32), np.array([1.0], np.float32))[0] > 1 << 40
