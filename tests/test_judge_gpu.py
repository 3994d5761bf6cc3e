"""Outputs judged on the GPU (#32), on a real one: the summary over CuPy is the summary over NumPy
on the same data (bf16 and fp8 decoded through the tables, integers exactly), the judgement's
memory comes from a pool of its own, and the GEMM's check judged on the device reaches the
host's verdict and figures."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from porter.gate.check import CheckOptions, run_check
from porter.gate.dtypes import DTYPES
from porter.gate.runner.hold import decoder, elements
from porter.gate.spec import load_spec
from porter.gate.summary import OutputSummary, summarize

pytestmark = pytest.mark.gpu

GEMM = Path(__file__).resolve().parent.parent / "examples" / "gemm_bf16"
SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 5e-324, 1e-310, 1e308, -1.7e308, 3.4e38, 65504.0, 1.0, -1.5])


def _same(a: OutputSummary, b: OutputSummary) -> None:
    assert {k: v for k, v in a.__dict__.items() if k != "rel_l2"} == {k: v for k, v in b.__dict__.items() if k != "rel_l2"}
    assert a.rel_l2 == b.rel_l2 or (math.isnan(a.rel_l2) and math.isnan(b.rel_l2)) or math.isclose(
        a.rel_l2, b.rel_l2, rel_tol=1e-12)


def _data(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    ref = rng.standard_normal(n) * 10.0 ** rng.integers(-30, 30, n)
    ref[rng.integers(0, n, n // 50)] = rng.choice(SPECIAL, n // 50)
    out = ref * (1 + rng.choice([0.0, 1e-6, 1e-2], n))
    out[rng.integers(0, n, n // 50)] = rng.choice(SPECIAL, n // 50)
    return out, ref


@pytest.mark.parametrize("name", ["f64", "f32", "f16", "bf16", "e4m3", "e5m2"])
@pytest.mark.parametrize("limited", [False, True])
def test_a_summary_on_the_gpu_is_the_summary_on_the_host(name: str, limited: bool) -> None:
    import cupy as cp

    dtype = DTYPES[name]
    rng = np.random.default_rng(7)
    out, ref = _data(rng, 3_000_001)
    with np.errstate(over="ignore", invalid="ignore"):
        raw = out.astype(dtype.numpy).view(np.uint8)
    ref32 = ref.astype(np.float32)
    limit = dtype.max_finite if limited else None
    kwargs: dict[str, Any] = dict(atol=1e-3, rtol=1e-2, limit=limit, exact=False, shape=(out.size,),
                                  dtype=str(np.dtype(dtype.numpy)))
    host = summarize(np, elements(raw, dtype), ref32, values=decoder(np, dtype, {}), **kwargs)
    for chunk in (1 << 20, 1 << 24):
        device = summarize(cp, elements(cp.asarray(raw), dtype), cp.asarray(ref32), values=decoder(cp, dtype, {}),
                           chunk=chunk, **kwargs)
        _same(device, host)


def test_integers_on_the_gpu_are_compared_exactly() -> None:
    import cupy as cp

    rng = np.random.default_rng(8)
    ref = rng.integers(-(2**62), 2**62, 1_000_003, dtype=np.int64)
    out = ref.copy()
    out[::1000] += 1
    kwargs: dict[str, Any] = dict(atol=0.0, rtol=0.0, limit=None, exact=True, shape=out.shape, dtype="int64")
    host = summarize(np, out, ref, **kwargs)
    assert host.mismatches == 1001
    _same(summarize(cp, cp.asarray(out), cp.asarray(ref), **kwargs), host)


def test_a_judgement_allocates_from_its_own_pool_and_leaves_none_of_it() -> None:
    import cupy as cp

    from porter.gate.runner.memory import scrubbed

    pool = cp.get_default_memory_pool()
    before = pool.used_bytes() + pool.free_bytes()
    with scrubbed(cp):
        x = cp.arange(1 << 22, dtype=cp.float64)
        assert float((x * x).sum()) > 0
        del x
    assert pool.used_bytes() + pool.free_bytes() == before


def test_a_later_judgement_finds_the_kept_pool_zeroed() -> None:
    """The scrubbed pool keeps its memory between judgements: what one judgement left there is
    zero when the next one is handed the same block."""
    import cupy as cp

    from porter.gate.runner.memory import scrubbed

    with scrubbed(cp):
        x = cp.full(1 << 20, 7, dtype=cp.uint32)
        ptr = int(x.data.ptr)
        del x
    with scrubbed(cp):
        y = cp.empty(1 << 20, dtype=cp.uint32)
        assert int(y.data.ptr) == ptr and not bool(y.any())
        del y


def _figures(verdict: Any) -> list[tuple[Any, ...]]:
    """Each case's figures; rel L2 apart (summed in chunks of another size on the device)."""
    return [(c.status, c.reason, tuple((o.name, o.passed, o.mismatches, o.total, o.unjudged, o.nan_count, o.inf_count,
                                        o.max_abs_err, o.max_rel_err, o.warnings) for o in c.outputs))
            for c in verdict.cases]


def test_the_gemm_judged_on_the_device_reaches_the_host_verdict(runner: Any, toolchain: Any) -> None:
    kernel = GEMM / "kernel_sm90a.ptx"
    from porter.ptx import read_ptx
    from porter.ptx.arch import ptx_runs_on

    if not ptx_runs_on(read_ptx(kernel).arch, runner.start().arch)[0]:
        pytest.skip("the sm_90a GEMM does not run on this GPU")
    spec = load_spec(GEMM / "porter.toml")
    verdicts = {judge: run_check(kernel, spec, CheckOptions(seeds=(1, 2), timing=False, judge=judge),
                                 toolchain=toolchain, runner=runner) for judge in ("device", "host")}
    device, host = verdicts["device"], verdicts["host"]
    assert device.status == host.status and device.gate("equivalence").status == "passed", device.reason
    assert device.gate("equivalence") == host.gate("equivalence")
    assert _figures(device) == _figures(host)
    for a, b in zip(device.cases, host.cases, strict=True):
        for x, y in zip(a.outputs, b.outputs, strict=True):
            assert math.isclose(x.rel_l2, y.rel_l2, rel_tol=1e-12, abs_tol=1e-300)


def test_float32_subnormals_reach_the_device_judgement_unflushed() -> None:
    """CuPy's float32 casts flush subnormals to zero (seen on the H200, 2026-12-05): an output or
    reference of 9e-41 became 0 on the device and not on the host, and max_rel_err differed. The
    decoder reads float32 by its bits, and references go up as their float32 bits (decoded the same
    way) or as float64 made on the host."""
    import cupy as cp

    from porter.gate.runner.hold import float32_as_float64

    rng = np.random.default_rng(3)
    bits = np.concatenate([rng.integers(0, 2**32, 1 << 20, dtype=np.uint64).astype(np.uint32),
                           np.arange(1, 1 << 16, dtype=np.uint32), np.arange(1, 1 << 16, dtype=np.uint32) | (1 << 31)])
    values = bits.view(np.float32)
    with np.errstate(invalid="ignore"):
        host = values.astype(np.float64)
    device = float32_as_float64(cp, cp.asarray(values)).get()
    same = ~np.isnan(host)
    assert np.array_equal(device.view(np.uint64)[same], host.view(np.uint64)[same])
    assert np.array_equal(np.isnan(device), np.isnan(host))
    tiny = np.arange(1, 4097, dtype=np.uint32).view(np.float32)  # every one a subnormal
    kwargs: dict[str, Any] = dict(atol=0.0, rtol=1e-6, limit=None, exact=False, shape=(tiny.size,), dtype="float32")
    on_host = summarize(np, tiny, tiny.astype(np.float64), values=decoder(np, DTYPES["f32"], {}), **kwargs)
    on_device = summarize(cp, cp.asarray(tiny), cp.asarray(tiny.astype(np.float64)),
                          values=decoder(cp, DTYPES["f32"], {}), **kwargs)
    assert on_host.passed and on_host.max_rel_err == 0.0
    _same(on_device, on_host)
    as_bits = summarize(cp, cp.asarray(tiny), cp.asarray(tiny.view(np.uint32)), values=decoder(cp, DTYPES["f32"], {}),
                        reference=lambda bits: float32_as_float64(cp, bits), **kwargs)
    _same(as_bits, on_host)
