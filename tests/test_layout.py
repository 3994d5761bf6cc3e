"""Where buffers lie (porter.gate.layout): nothing a kernel reads of its pointers singles out a kind of launch.

The pure placements are checked as properties over sizes, alignments and pages; the worker's use
of them runs on the fake device of tests/fake_cupy.py, with kernels that behave only where they
find what porter used to give them (over-aligned pointers) or that remember an earlier answer.
"""

from __future__ import annotations

import shutil
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent))

import fake_cupy
from fake_cupy import at

from porter.errors import InputError
from porter.gate import layout
from porter.gate.runner.jobs import job_case, job_time
from porter.gate.runner.launch import Launch
from porter.gate.runner.protocol import INITIAL_STATES, CaseJob, CaseReply, Contender, Reference, TimeJob
from porter.gate.runner.state import WorkerState
from porter.gate.spec import load_spec

VECTOR_ADD = Path(__file__).resolve().parents[1] / "examples" / "vector_add" / "porter.toml"

_aligns = st.sampled_from([2, 4, 8, 16, 32, 128, 4096])
_pages = st.sampled_from([4096, 65536, 2 << 20])


@settings(max_examples=300, deadline=None)
@given(nbytes=st.integers(0, 1 << 26), align=_aligns, page=_pages)
def test_a_flush_buffer_ends_at_unmapped_memory_as_closely_as_its_alignment_allows(nbytes: int, align: int,
                                                                                   page: int) -> None:
    place = layout.flush(nbytes, align, page)
    assert place.family == "fenced"
    assert place.size(nbytes) % page == 0 and place.lead >= 0
    assert place.lead % align == 0  # the start keeps the contract's alignment (pages are multiples of it)
    assert 0 <= place.tail < align  # one element past the end is unmapped unless alignment forbids it
    if nbytes % align == 0:
        assert place.tail == 0


@settings(max_examples=300, deadline=None)
@given(nbytes=st.integers(0, 1 << 24), align=_aligns, page=_pages, seed=st.integers(0, 2**32),
       family=st.sampled_from(["fenced", "plain"]))
def test_a_drawn_buffer_keeps_the_contract_alignment_and_no_more(nbytes: int, align: int, page: int, seed: int,
                                                                 family: layout.Family) -> None:
    place = layout.drawn(np.random.default_rng(seed), nbytes, align, page, family)
    assert place.family == family and place.lead % align == 0
    assert 0 <= place.lead <= layout.GUARD_SPAN and place.tail >= 0
    if family == "fenced":
        assert place.size(nbytes) % page == 0


@pytest.mark.parametrize("align", [4, 16, 256])
def test_alignment_beyond_the_contract_is_never_constant(align: int) -> None:
    """Over draws, leads land both on and off every multiple of twice the alignment."""
    leads = [layout.drawn(np.random.default_rng(seed), 1000, align, 2 << 20, "plain").lead for seed in range(64)]
    assert {lead % (2 * align) for lead in leads} == {0, align}


def test_the_spec_states_a_buffers_alignment_and_rejects_an_impossible_one(tmp_path: Path) -> None:
    spec = load_spec(VECTOR_ADD)
    assert [p.alignment() for p in spec.params if p.kind == "buffer"] == [16, 16, 16]
    text = VECTOR_ADD.read_text().replace('name = "y"\nkind = "buffer"', 'name = "y"\nkind = "buffer"\nalign = 4', 1)
    (tmp_path / "ref.py").write_text((VECTOR_ADD.parent / "ref.py").read_text())
    (tmp_path / "porter.toml").write_text(text)
    assert load_spec(tmp_path / "porter.toml").param("y").alignment() == 4
    (tmp_path / "porter.toml").write_text(text.replace("align = 4", "align = 2"))
    with pytest.raises(InputError, match=r"params\[1\]\.align.*power of two of bytes from the element's 4"):
        load_spec(tmp_path / "porter.toml")
    (tmp_path / "porter.toml").write_text(text.replace("align = 4", "align = 24"))
    with pytest.raises(InputError, match=r"params\[1\]\.align"):
        load_spec(tmp_path / "porter.toml")


# --- the worker, on the fake device ---------------------------------------------------------------

def _vector_add(*, picky: bool = False, memory: dict[str, Any] | None = None) -> Any:
    """out = alpha * x + y. ``picky``: right only when every pointer is 32-byte aligned (more than the
    contract's 16). ``memory``: once armed, answers with the first result it computes, whatever it is given."""

    def body(grid: Any, block: Any, x: Any, y: Any, out: Any, alpha: Any, n: Any) -> None:
        count = int(n)
        result = (np.float32(alpha) * at(x, count, np.float32) + at(y, count, np.float32)).astype(np.float32)
        if picky and any(int(p) % 32 for p in (x, y, out)):
            result = result + np.float32(1)
        if memory is not None and memory.get("armed"):
            result = memory.setdefault("answer", result)
        at(out, count, np.float32)[:] = result

    return body


def _state(body: Any) -> WorkerState:
    fake_cupy.KERNELS.clear()
    fake_cupy.KERNELS["vector_add"] = body
    state = WorkerState(fake_cupy, fenced=False)
    state._flush = fake_cupy.empty(1024, fake_cupy.uint8)
    return state


def _case(state: WorkerState, seed: int, n: int = 1000) -> CaseReply:
    return job_case(state, CaseJob(cubin=b"fake", entry="vector_add", spec_path=str(VECTOR_ADD), sizes={"n": n},
                                   seed=seed, reference=Reference("python", path=str(VECTOR_ADD.parent / "ref.py"),
                                                                  function="vector_add")))


def _wrong(reply: CaseReply) -> bool:
    """Some run's outputs differ from the reference where f32 holds it (porter's inputs include the
    special values and magnitudes near the range's ends)."""
    assert reply.reference is not None
    ref = np.asarray(reply.reference["out"], dtype=np.float64)
    held = np.isfinite(ref.astype(np.float32)) | np.isnan(ref)
    runs = [run if run is not None else reply.outputs[0] for run in reply.outputs]
    return any(not np.allclose(run["out"][held], ref[held], rtol=1e-5, atol=1e-5, equal_nan=True) for run in runs)


def _fresh(state: WorkerState, reply: Any) -> Any:
    """``reply``, its buffers then let go: the next case (of another check) gets buffers laid out
    from its own seed, where one check's consecutive cases of a size set share them."""
    state.drop_case_launch()
    return reply


def test_a_kernel_right_only_on_over_aligned_pointers_goes_wrong_in_some_checked_run() -> None:
    state = _state(_vector_add(picky=True))
    try:
        assert any(_wrong(_fresh(state, _case(state, seed))) for seed in range(1, 9))
    finally:
        state.close()
    honest = _state(_vector_add())
    try:
        assert not any(_wrong(_case(honest, seed)) for seed in range(1, 9))
    finally:
        honest.close()


def test_the_sanitizers_launch_holds_exactly_the_data() -> None:
    state = _state(_vector_add())
    spec = load_spec(VECTOR_ADD)
    from porter.gate.inputs import make_args

    launch = Launch(state, spec, {"n": 33}, make_args(spec, {"n": 33}, 5), 5, "exact")
    try:
        assert all(buf.lead == 0 and buf.raw.size == buf.nbytes == 33 * 4 for buf in launch.buffers.values())
    finally:
        launch.release()
        state.close()


def test_every_timed_launch_runs_on_a_checked_input_set_in_turn() -> None:
    """Timing rotates through the checked sets: launch r's digests are those verified on set r % 2,
    and a kernel that keeps answering with the first set's outputs leaves the wrong ones."""
    for memory, rotates in ((None, True), ({}, False)):
        state = _state(_vector_add(memory=memory))
        try:
            verified = [_case(state, seed, 4097).digests for seed in (11, 12)]
            if memory is not None:
                memory["armed"] = True  # from the timing run on
            reply = job_time(state, TimeJob(spec_path=str(VECTOR_ADD), sizes={"n": 4097}, seeds=(11, 12),
                                            contenders=(Contender("candidate", "kernel", cubin=b"fake",
                                                                  entry="vector_add"),), budget_s=0.0, min_reps=4))
        finally:
            state.close()
        launches = reply.digests[0]
        assert len(launches) == 4
        assert (launches == [verified[r % 2][0] for r in range(4)]) is rotates


def _device_case(state: WorkerState, seed: int, reference: Reference | None = None) -> CaseReply:
    ref = reference or Reference("python", key="ref", path=str(VECTOR_ADD.parent / "ref.py"), function="vector_add")
    return job_case(state, CaseJob(cubin=b"fake", entry="vector_add", spec_path=str(VECTOR_ADD), sizes={"n": 1000},
                                   seed=seed, reference=ref, judge="device"))


def test_a_case_judged_on_the_device_sends_summaries_and_a_wrong_one_its_outputs() -> None:
    """The worker's device path on the fake device: an honest kernel's case comes back as each
    run's summaries (no outputs, no reference), equal to what the host's judgement of the same
    case's outputs finds; a kernel wrong in some run sends that case's outputs to the host."""
    from porter.gate.compare import compare
    from porter.gate.summary import output_terms

    spec = load_spec(VECTOR_ADD)
    honest = _state(_vector_add())
    try:
        for seed in (1, 2):
            device = _device_case(honest, seed)
            host = _case(honest, seed)
            assert device.outputs == [] and device.reference is None and len(device.summaries) == len(INITIAL_STATES)
            assert device.digests == host.digests and device.guards == host.guards == []
            assert host.reference is not None
            atol, rtol, limit = output_terms(np, spec, "out", {"n": 1000}, "", host.reference["out"].reshape(-1))
            check = compare("out", host.outputs[0]["out"], host.reference["out"], atol=atol, rtol=rtol, limit=limit)
            s = device.summaries[0]["out"]
            assert (s.passed, s.mismatches, s.unjudged, s.max_abs_err, s.warnings) == (
                check.passed, check.mismatches, check.unjudged, check.max_abs_err, check.warnings)
        held = _device_case(honest, 2, Reference("held", key="ref", outputs=host.reference))  # seed 2's
        assert held.summaries and held.reference is None
        with pytest.raises(RuntimeError, match="without its arrays"):
            _device_case(honest, 1, Reference("held", key="ref"))
    finally:
        honest.close()
    picky = _state(_vector_add(picky=True))
    try:
        replies = [_fresh(picky, _device_case(picky, seed)) for seed in range(1, 9)]
        shipped = [r for r in replies if not r.summaries]
        assert shipped and all(r.outputs and r.reference is not None for r in shipped)
        assert all(r.outputs == [] for r in replies if r.summaries)
    finally:
        picky.close()


def test_runs_that_repeat_the_first_runs_bytes_are_judged_once_and_a_differing_one_goes_to_the_host(monkeypatch: Any) -> None:
    """The reference goes up (and the comparison runs) once for a case whose later runs repeat the
    first run's bytes: they have its summaries. A later run that differs, even by one element within
    tolerance, is not taken for the first: its outputs go to the host."""
    from porter.gate.runner import judge

    compared: list[int] = []
    real = judge.compare
    monkeypatch.setattr(judge, "compare", lambda *a, **k: compared.append(1) or real(*a, **k))
    honest = _state(_vector_add())
    try:
        reply = _device_case(honest, 3)
    finally:
        honest.close()
    assert len(compared) == 1 and len(reply.summaries) == len(INITIAL_STATES) and reply.outputs == []
    assert all(s == reply.summaries[0] for s in reply.summaries)

    launches: list[int] = []

    def drifting(grid: Any, block: Any, x: Any, y: Any, out: Any, alpha: Any, n: Any) -> None:
        count = int(n)
        launches.append(1)
        result = (np.float32(alpha) * at(x, count, np.float32) + at(y, count, np.float32)).astype(np.float32)
        result[:1] = np.nextafter(result[:1], np.float32(np.inf)) if len(launches) > 1 else result[:1]
        at(out, count, np.float32)[:] = result

    compared.clear()
    state = _state(drifting)
    try:
        reply = _device_case(state, 3)
    finally:
        state.close()
    assert reply.outputs and reply.outputs[1] is not None and reply.summaries == []


def test_a_case_whose_runs_all_pass_waits_for_the_device_once(monkeypatch: Any) -> None:
    """Every run of a case launches before anything is read, and the runs' checks and the first
    run's judgement come back together: one read-back a case, whatever its size set or seed."""
    reads: list[int] = []
    real = fake_cupy.ndarray.get
    monkeypatch.setattr(fake_cupy.ndarray, "get", lambda self, *a, **k: reads.append(1) or real(self, *a, **k))
    state = _state(_vector_add())
    try:
        for seed in (3, 4):
            reads.clear()
            reply = _device_case(state, seed)
            assert len(reads) == 1 and len(reply.summaries) == len(INITIAL_STATES) and reply.outputs == []
    finally:
        state.close()


def test_a_later_run_that_rewrites_an_earlier_runs_outputs_is_found(monkeypatch: Any) -> None:
    """The runs launch one after another before any is read: a launch that writes into the outputs
    of an earlier run (a wild write, outside its own buffers) is found before their judgement is used."""
    seen: list[int] = []

    def body(grid: Any, block: Any, x: Any, y: Any, out: Any, alpha: Any, n: Any) -> None:
        count = int(n)
        at(out, count, np.float32)[:] = np.float32(float(alpha)) * at(x, count, np.float32) + at(y, count, np.float32)
        if seen:  # a later run: spoil the first run's outputs, which lie elsewhere
            at(seen[0], count, np.float32)[:1] += 1
        seen.append(int(out))

    state = _state(body)
    try:
        with pytest.raises(RuntimeError, match="a later launch wrote into the buffers of an earlier one"):
            _device_case(state, 5)
    finally:
        state.close()


def test_a_fault_hidden_behind_a_librarys_error_is_named_by_the_context(monkeypatch: Any) -> None:
    """A case's runs launch one after another, so a kernel's fault surfaces at the next call, which
    may be cuRAND's (a later run's random initial state): the case names the context's own error,
    which makes the worker restart (a poisoned context kept would fail every later check)."""
    from porter.gate.runner.worker import is_sticky

    poisoned: list[bool] = []

    def faulting(grid: Any, block: Any, x: Any, y: Any, out: Any, alpha: Any, n: Any) -> None:
        poisoned.append(True)

    def synchronize(self: Any) -> None:
        if poisoned:
            raise RuntimeError("CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered")

    real = fake_cupy.random.RandomState

    def generator(seed: int) -> Any:
        if poisoned:
            raise RuntimeError("CURANDError: CURAND_STATUS_LAUNCH_FAILURE")
        return real(seed)

    monkeypatch.setattr(fake_cupy._Device, "synchronize", synchronize)
    monkeypatch.setattr(fake_cupy.random, "RandomState", generator)
    state = _state(faulting)
    try:
        with pytest.raises(RuntimeError) as raised:
            _device_case(state, 6)
    finally:
        poisoned.clear()
        state.close()
    assert "CUDA_ERROR_ILLEGAL_ADDRESS" in str(raised.value) and is_sticky(raised.value), raised.value


def test_an_input_written_by_the_kernel_is_found_on_the_device() -> None:
    def body(grid: Any, block: Any, x: Any, y: Any, out: Any, alpha: Any, n: Any) -> None:
        count = int(n)
        at(out, count, np.float32)[:] = at(x, count, np.float32) + at(y, count, np.float32)
        at(x, count, np.float32)[3:5] = 7

    state = _state(body)
    try:
        reply = _device_case(state, 1)
    finally:
        state.close()
    assert reply.modified and reply.modified[0].startswith("x: ") and "(first at byte 12)" in reply.modified[0]


def test_an_input_written_with_the_device_image_it_is_restored_from_is_still_found() -> None:
    """A kernel that also rewrites porter's device copy of the input (a wild write: it lies on the
    device during the launch) is held to the input's image from the host, uploaded afresh."""
    state = _state(_vector_add())
    spec = load_spec(VECTOR_ADD)
    try:
        launch = Launch(state, spec, {"n": 1000}, state.inputs(spec, {"n": 1000}, 4), 4, "plain")
        launch.reset()
        assert launch.changed_inputs() == []
        for device in (launch.buffers["x"].data, launch._pristine["x"]):  # both rewritten alike
            device[12:20] = 7
        found = launch.changed_inputs()
        launch.release()
    finally:
        state.close()
    assert len(found) == 1 and found[0].startswith("x: ") and "(first at byte 12)" in found[0]


def test_a_run_wrong_only_from_zeros_ships_the_first_run_and_its_own_outputs() -> None:
    """Judged on the device, the third run (from zeros) fails:
    the host gets the first run's outputs, None for the second (it passed like the first) and the
    third's, and says the kernel depends on the output's initial contents."""
    from porter.gate.equivalence import judge_case
    from porter.gate.plan import Case

    def body(grid: Any, block: Any, x: Any, y: Any, out: Any, alpha: Any, n: Any) -> None:
        count = int(n)
        result = np.float32(float(alpha)) * at(x, count, np.float32) + at(y, count, np.float32)
        dest = at(out, count, np.float32)
        keep = (np.arange(count) >= count // 2) & (dest == 0)  # leaves upper-half zeros as they are
        dest[:] = np.where(keep, dest, result)

    state = _state(body)
    try:
        reply = _device_case(state, 5)
    finally:
        state.close()
    assert reply.summaries == [] or len(reply.summaries) < len(INITIAL_STATES)
    assert reply.outputs[0] is not None and reply.outputs[1] is None and reply.outputs[2] is not None
    result = judge_case(load_spec(VECTOR_ADD), Case({"n": 1000}, 5), reply)
    assert result.status == "failed" and "when the output starts as zeros" in result.reason, result.reason


def test_the_next_cases_inputs_are_drawn_in_a_thread_while_this_case_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """A case job names the next cases of its check: the worker draws those cases's inputs in a thread
    of its own during this job, and the next jobs take them (drawn once, the same arrays as a draw
    made then); of the draws named and not asked for yet, the newest PREFETCH_DEPTH are kept."""
    import threading

    from porter.gate import inputs
    from porter.gate.runner.protocol import PREFETCH_DEPTH, Upcoming

    drawn: list[tuple[int, str]] = []
    real = inputs.make_args

    def counted(spec: Any, sizes: Any, seed: int, values: str = "", **kwargs: Any) -> Any:
        drawn.append((seed, threading.current_thread().name))
        return real(spec, sizes, seed, values, **kwargs)

    monkeypatch.setattr(inputs, "make_args", counted)
    reference = Reference("python", path=str(VECTOR_ADD.parent / "ref.py"), function="vector_add")

    def case(seed: int, coming: int | None) -> CaseReply:
        return job_case(state, CaseJob(cubin=b"fake", entry="vector_add", spec_path=str(VECTOR_ADD), sizes={"n": 1000},
                                       seed=seed, reference=reference,
                                       upcoming=(Upcoming({"n": 1000}, coming),) if coming is not None else ()))

    state = _state(_vector_add())
    try:
        first = case(31, 32)
        second = case(32, 33)
        case(34, 35)  # 33 drawn ahead and not asked for yet: kept beside 35 (PREFETCH_DEPTH)
        case(33, None)
        case(36, 37)
        case(38, 39)  # 37 drawn ahead, then 39: 35, the oldest not asked for, is dropped
        third = case(35, None)
    finally:
        state.close()
    assert PREFETCH_DEPTH == 2
    seeds = [seed for seed, _ in drawn]
    assert all(seeds.count(s) == 1 for s in (31, 32, 33, 34, 36, 38))
    assert not [thread for seed, thread in drawn if seed == 35][-1].startswith("porter-inputs")  # drawn when asked
    threads = dict(drawn)
    assert threads[32].startswith("porter-inputs") and not threads[31].startswith("porter-inputs")
    expected = real(load_spec(VECTOR_ADD), {"n": 1000}, 32)
    assert second.reference is not None and first.reference is not None and third.reference is not None
    np.testing.assert_array_equal(second.reference["out"],
                                  np.float64(expected["alpha"]) * expected["x"].astype(np.float64)
                                  + expected["y"].astype(np.float64))


class _PoolWatch:
    """On the fake device: whether a scrubbed pool is open now (``inside``), and for each float64
    array of ``size`` elements that goes up to the device, whether one was open then (``uploads``)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, size: int) -> None:
        self.inside = False
        self.uploads: list[bool] = []
        real_asarray = fake_cupy.asarray

        @contextmanager
        def watched(allocator: Any) -> Any:
            self.inside = True
            try:
                yield
            finally:
                self.inside = False

        def uploading(value: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(value, np.ndarray) and value.dtype == np.float64 and value.size == size:
                self.uploads.append(self.inside)
            return real_asarray(value, *args, **kwargs)

        monkeypatch.setattr(fake_cupy.cuda, "using_allocator", watched)
        monkeypatch.setattr(fake_cupy, "asarray", uploading)


def test_a_held_reference_is_on_the_device_only_between_timed_launches(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """An output declared nondeterministic is held to its reference after every timed launch. The
    reference goes up only inside the scrubbed block of each comparison (its memory zeroed and
    freed when the block ends), and no candidate launch runs inside one: a kernel never shares the
    device with the reference, so it can neither make the reference match nor copy it."""

    folder = tmp_path / "va"
    shutil.copytree(VECTOR_ADD.parent, folder)
    spec_path = folder / "porter.toml"
    text = spec_path.read_text()
    spec_path.write_text(text.replace('name = "out"\nkind = "buffer"', 'name = "out"\nkind = "buffer"\ndeterministic = false', 1))
    watch = _PoolWatch(monkeypatch, 4097)
    body = _vector_add()
    launches: list[bool] = []

    def launched(*args: Any) -> None:
        launches.append(watch.inside)
        body(*args)

    state = _state(launched)
    reference = Reference("python", key="ref", path=str(folder / "ref.py"), function="vector_add")
    try:
        for seed in (11, 12):
            job_case(state, CaseJob(cubin=b"fake", entry="vector_add", spec_path=str(spec_path), sizes={"n": 4097},
                                    seed=seed, reference=reference))
        watch.uploads.clear()
        launches.clear()
        reply = job_time(state, TimeJob(spec_path=str(spec_path), sizes={"n": 4097}, seeds=(11, 12),
                                        contenders=(Contender("candidate", "kernel", cubin=b"fake",
                                                              entry="vector_add"),), budget_s=0.0, min_reps=4,
                                        references=(reference, reference)))
    finally:
        state.close()
    assert reply.digests[0] is not None and set(reply.digests[0]) == {0}  # every timed launch within tolerance
    assert watch.uploads and all(watch.uploads) and launches and not any(launches)


def test_a_python_reference_on_the_gpu_computes_inside_the_scrubbed_pool(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A reference that computes on the device (CuPy, as examples/gemm_bf16's does) allocates only
    inside a judgement's scrubbed pool, so nothing of it is left where a candidate's next launch
    could read it; the CuPy arrays it returns are taken as its outputs, equal to NumPy's."""
    folder = tmp_path / "va"
    shutil.copytree(VECTOR_ADD.parent, folder)
    (folder / "ref.py").write_text(
        "import sys\n"
        "import numpy as np\n"
        "def vector_add(args, sizes):\n"
        "    cp = sys.modules['fake_cupy']\n"
        "    n = int(sizes['n'])\n"
        "    x = cp.asarray(np.asarray(args['x'], dtype=np.float64)[:n])\n"
        "    return {'out': float(args['alpha']) * x + cp.asarray(np.asarray(args['y'], dtype=np.float64)[:n])}\n")
    watch = _PoolWatch(monkeypatch, 1000)
    state = _state(_vector_add())
    spec_path = folder / "porter.toml"
    try:
        on_device = job_case(state, CaseJob(cubin=b"fake", entry="vector_add", spec_path=str(spec_path),
                                            sizes={"n": 1000}, seed=5,
                                            reference=Reference("python", key="gpu", path=str(folder / "ref.py"),
                                                                function="vector_add")))
        state.drop_case_launch()
        on_host = _case(state, 5)
    finally:
        state.close()
    assert watch.uploads and all(watch.uploads)  # the reference's own device arrays: each made inside the pool
    assert on_device.reference is not None and on_host.reference is not None
    assert type(on_device.reference["out"]) is np.ndarray
    assert np.array_equal(on_device.reference["out"], on_host.reference["out"], equal_nan=True)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**40))
def test_a_timed_or_profiled_launch_starts_its_buffers_as_cudamalloc_would(seed: int) -> None:
    """The ``plain`` placing (a timing run's later sets, the profiled launch) lies as a program's
    tensors: each start a multiple of 256 bytes, as cudaMalloc aligns them."""
    state = _state(_vector_add())
    spec = load_spec(VECTOR_ADD)
    try:
        launch = Launch(state, spec, {"n": 1000}, state.inputs(spec, {"n": 1000}, seed), seed, "plain")
        leads = [buf.lead for buf in launch.buffers.values()]
        launch.release()
    finally:
        state.close()
    assert all(lead % layout.PROGRAM_ALIGN == 0 for lead in leads)


GEMM = Path(__file__).resolve().parents[1] / "examples" / "gemm_bf16" / "porter.toml"


@settings(max_examples=40, deadline=None)
@given(region=st.sampled_from(["lead", "tail", "padding", "input", "pristine input", "none"]),
       buffer=st.sampled_from(["A", "B", "C"]), where=st.floats(0, 1, exclude_max=True), bits=st.integers(1, 255),
       spoiled=st.booleans())
def test_the_one_pass_integrity_check_finds_what_the_checks_one_by_one_find(region: str, buffer: str, where: float,
                                                                            bits: int, spoiled: bool) -> None:
    """``Launch.integrity`` (one sum read back a run) says exactly what ``guard_problems`` and
    ``changed_inputs`` say, for one byte changed anywhere a kernel could change it: a guard band,
    a padded buffer's padding, an input, or an input and porter's device copy of it alike; and so
    it does where a kernel overwrote the digests of what porter wrote before their first read-back
    (they are on the device until then): no false report, nothing hidden."""
    state = _state(_vector_add())
    spec = load_spec(GEMM)
    sizes = {"M": 40, "N": 24, "K": 16, "lda": 24, "ldb": 32, "ldc": 40}
    try:
        launch = Launch(state, spec, sizes, state.inputs(spec, sizes, 3), 3, "flush")
        launch.reset()
        if spoiled:
            launch._witness[:] = np.uint64(0x5EED5EED5EED5EED)
        assert launch.integrity() == ([], [])
        buf = launch.buffers[buffer]
        rows, pitch = spec.memory_shape(buffer, sizes)[0], spec.memory_shape(buffer, sizes)[1] * 2
        width = spec.shape(buffer, sizes)[1] * 2
        changed = True
        if region == "lead" and buf.lead:
            at_byte = int(where * buf.lead)
        elif region == "tail" and buf.raw.size > buf.lead + buf.nbytes:
            at_byte = buf.lead + buf.nbytes + int(where * (buf.raw.size - buf.lead - buf.nbytes))
        elif region == "padding" and pitch > width:
            row, column = divmod(int(where * rows * (pitch - width)), pitch - width)
            at_byte = buf.lead + row * pitch + width + column
        elif region in ("input", "pristine input") and buffer != "C":
            at_byte = buf.lead + int(where * buf.nbytes)
        else:
            changed = False
        if changed:
            buf.raw[at_byte] ^= bits
            if region == "pristine input":
                launch._pristine[buffer][at_byte - buf.lead] ^= bits
        found = launch.integrity()
        assert found == (launch.guard_problems(), launch.changed_inputs())
        assert (found != ([], [])) == changed
        launch.release()
    finally:
        state.close()
