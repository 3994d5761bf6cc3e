"""What a check guarantees about values, as properties: every element whose reference is finite in
the output's dtype is judged, the others are left out (never the whole case), and the inputs cover
the declared domain with no recognisable lattice (see docs/spec.md, "What a check guarantees")."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from porter.gate.compare import compare

PROPERTY = settings(max_examples=60, deadline=None)
LIMIT = float(np.finfo(np.float32).max)

refs = hnp.arrays(np.float64, st.integers(1, 300),
                  elements=st.one_of(st.floats(-1e3, 1e3), st.sampled_from([np.nan, np.inf, -np.inf, 1e39, -1e300])))


@PROPERTY
@given(refs, st.data())
def test_exactly_the_elements_whose_reference_is_finite_in_the_dtype_are_judged(ref: np.ndarray, data) -> None:
    inside = np.abs(ref) <= LIMIT
    out = np.where(inside, ref, data.draw(st.sampled_from([0.0, np.nan, np.inf, 5.0]))).astype(np.float32)
    wrong = data.draw(st.lists(st.integers(0, ref.size - 1), max_size=5, unique=True))
    for i in wrong:
        out[i] = np.float32(ref[i] + 10) if inside[i] else out[i]
    check = compare("y", out, ref, atol=1e-3, rtol=1e-3, limit=LIMIT)
    assert check.judged == int(inside.sum()) and check.unjudged == ref.size - check.judged
    assert check.mismatches == sum(1 for i in wrong if inside[i])
    assert check.passed == (check.mismatches == 0)
