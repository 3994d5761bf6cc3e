"""The cluster on a CPU: a real dask scheduler (LocalCluster), porter's own workers (WorkerGroup, in
this process or in child processes) on simulated GPUs that advertise their architectures, and the
Verdicts back as data. Routing by architecture, a worker killed mid-candidate (retried once
elsewhere, then `error`), a missing architecture (`not run` at once, naming it) and an unreachable
scheduler (exit 3 in under 10 s)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("distributed")

from conftest import candidates, small_vector_add
from distributed import Client, LocalCluster

from porter.errors import EnvironmentProblem, InputError
from porter.gate.check import CheckOptions
from porter.gate.runner.fake import FakeGpu
from porter.gate.spec import load_spec
from porter.gate.verdict import judge
from porter.pool.bundle import pack, unpack
from porter.pool.cluster import ClusterVerifier
from porter.pool.dask_workers import Gpu, WorkerGroup, offered_targets
from porter.pool.verifier import CheckJob

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def scheduler():
    cluster = LocalCluster(n_workers=0, processes=False, protocol="tcp", host="127.0.0.1", dashboard_address=None)
    try:
        yield cluster.scheduler_address
    finally:
        cluster.close()


def _workers(address: str, *gpus: FakeGpu) -> WorkerGroup:
    return WorkerGroup(address, [Gpu(i, g.runner(), g.info) for i, g in enumerate(gpus)], name="cpu").start()


def test_a_worker_offers_every_target_its_gpu_loads() -> None:
    assert offered_targets("sm_90") == ["sm_90", "sm_90a"]
    assert "sm_100a" in offered_targets("sm_100") and "sm_90a" not in offered_targets("sm_100")


def test_candidates_run_on_workers_of_their_target(toolchain, tmp_path: Path, scheduler: str) -> None:
    hopper, blackwell = FakeGpu(arch="sm_90a", name="Fake H200"), FakeGpu(arch="sm_100a", name="Fake B200")
    group = _workers(scheduler, hopper, blackwell)
    verifier = ClusterVerifier(scheduler, toolchain=toolchain)
    try:
        paths = candidates(tmp_path, 4)
        spec = load_spec(tmp_path / "porter.toml")
        targets = ["sm_90a", "sm_100a", "sm_100a", "sm_90a"]
        verdicts = verifier.verify([CheckJob(p, spec, CheckOptions(seeds=(1, 2), arch=a))
                                    for p, a in zip(paths, targets, strict=True)])
    finally:
        verifier.close()
        group.close()
    assert [v.status for v in verdicts] == ["passed"] * 4, [v.reason for v in verdicts]
    assert [v.gpu.split(" (")[0] for v in verdicts] == ["Fake H200", "Fake B200", "Fake B200", "Fake H200"]
    assert [v.kernel for v in verdicts] == [str(p) for p in paths]  # the caller's paths, not the worker's
    assert [v.arch for v in verdicts] == targets
    assert {e[0] for e in hopper.log} == {"case", "time", "repeat"} == {e[0] for e in blackwell.log}


def test_the_cluster_gives_the_same_verdicts_as_the_local_pool(toolchain, tmp_path: Path, scheduler: str) -> None:
    from porter.pool.local import LocalPool

    kernel, spec_path = small_vector_add(tmp_path / "wrong", marker="porter_fake_wrong")
    right = candidates(tmp_path / "right", 1)[0]
    spec = load_spec(spec_path)
    todo = [CheckJob(p, spec, CheckOptions(seeds=(7, 8), arch="sm_90a")) for p in (right, kernel)]
    local = LocalPool(toolchain, devices=[0], per_gpu=1, runner_factory=lambda d: FakeGpu(arch="sm_90a").runner())
    here = local.verify(todo)
    group = _workers(scheduler, FakeGpu(arch="sm_90a"))
    verifier = ClusterVerifier(scheduler, toolchain=toolchain)
    try:
        there = verifier.verify(todo)
    finally:
        verifier.close()
        group.close()
    assert [v.status for v in there] == [v.status for v in here] == ["passed", "failed"]
    assert [(g.name, g.status) for g in there[1].gates] == [(g.name, g.status) for g in here[1].gates]
    assert there[1].gate("equivalence") == here[1].gate("equivalence")
    assert there[1].cases == here[1].cases


def test_no_worker_of_the_target_is_not_run_at_once_naming_it(toolchain, tmp_path: Path, scheduler: str) -> None:
    group = _workers(scheduler, FakeGpu(arch="sm_90a"))
    verifier = ClusterVerifier(scheduler, toolchain=toolchain)
    try:
        path = candidates(tmp_path, 1)[0]
        start = time.monotonic()
        verdict = verifier.verify([CheckJob(path, load_spec(tmp_path / "porter.toml"), CheckOptions(arch="sm_100a"))])[0]
        took = time.monotonic() - start
    finally:
        verifier.close()
        group.close()
    assert verdict.status == "not run"
    equivalence = verdict.gate("equivalence")
    assert "offers the resource sm_100a" in equivalence.summary and "sm_90a on 1 worker" in equivalence.summary
    assert verdict.gate("assemble").status == "passed"  # what needs no GPU was checked here
    assert judge(verdict, require_native=False).status == "not run on target hardware"
    assert took < 10, took


def test_without_an_arch_a_kernel_runs_where_its_ptx_can_be_assembled(toolchain, tmp_path: Path,
                                                                       scheduler: str) -> None:
    kernel, spec_path = small_vector_add(tmp_path / "k")  # .target sm_80, checked with no --arch
    group = _workers(scheduler, FakeGpu(arch="sm_90a", name="Fake H200"))
    verifier = ClusterVerifier(scheduler, toolchain=toolchain)
    try:
        verdict = verifier.verify([CheckJob(kernel, load_spec(spec_path), CheckOptions(seeds=(1, 2)))])[0]
        strict = verifier.verify([CheckJob(kernel, load_spec(spec_path), CheckOptions(arch="sm_80"))])[0]
    finally:
        verifier.close()
        group.close()
    assert verdict.status == "passed" and verdict.gpu.startswith("Fake H200")
    assert any("ran as sm_90" in w for w in verdict.warnings)
    assert strict.status == "not run" and "sm_80" in strict.gate("equivalence").summary


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_scheduler_is_exit_3_within_10_seconds(toolchain, tmp_path: Path) -> None:
    address = f"tcp://127.0.0.1:{_free_port()}"
    start = time.monotonic()
    with pytest.raises(EnvironmentProblem, match="does not answer") as raised:
        ClusterVerifier(address, toolchain=toolchain)
    assert raised.value.exit_code == 3
    assert time.monotonic() - start < 10
    path = candidates(tmp_path, 1)[0]
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "porter", "check", str(path), "--arch", "sm_90a", "--cluster", address],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)
    assert done.returncode == 3, done.stderr
    assert "does not answer" in done.stderr and "Traceback" not in done.stderr
    assert time.monotonic() - start < 10


def test_a_worker_whose_scheduler_does_not_answer_says_so() -> None:
    gpu = FakeGpu()
    start = time.monotonic()
    with pytest.raises(EnvironmentProblem, match="did not accept the workers"):
        WorkerGroup(f"tcp://127.0.0.1:{_free_port()}", [Gpu(0, gpu.runner(), gpu.info)], death_timeout_s=2).start()
    assert time.monotonic() - start < 10


def test_a_bundle_carries_what_the_check_reads(tmp_path: Path) -> None:
    kernel, spec_path = small_vector_add(tmp_path / "k")
    spec = load_spec(spec_path)
    bundle = pack(kernel, spec, CheckOptions(speed_baseline=kernel, seeds=(1, 2)))
    assert set(bundle.spec_files) >= {"porter.toml", "ref.py"}
    spec_folder, job_folder = unpack(bundle, tmp_path / "there")
    assert load_spec(spec_folder / bundle.spec).reference.callable.path.read_text() == (tmp_path / "k" / "ref.py").read_text()
    assert (job_folder / bundle.candidate).read_text() == kernel.read_text()
    other = pack(candidates(tmp_path / "c", 1)[0], load_spec(tmp_path / "c" / "porter.toml"), CheckOptions())
    assert unpack(other, tmp_path / "there")[0] == spec_folder  # the same spec, the same folder: caches hold
    with pytest.raises(InputError, match="golden"):
        pack(kernel, spec, CheckOptions(golden=tmp_path))


# --- workers that die ----------------------------------------------------------------------------

WORKER_SCRIPT = """
import sys
from porter.gate.runner.fake import FakeGpu
from porter.pool.dask_workers import Gpu, WorkerGroup
gpu = FakeGpu(arch="sm_90a", die_first=int(sys.argv[2]), marker=sys.argv[3])
WorkerGroup(sys.argv[1], [Gpu(0, gpu.runner(), gpu.info)], name=sys.argv[4]).run()
"""


def _dying_workers(tmp_path: Path, address: str, deaths: int, count: int = 2) -> tuple[list[subprocess.Popen], Path]:
    script = tmp_path / "worker.py"
    script.write_text(WORKER_SCRIPT)
    marker = tmp_path / "deaths"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, str(script), address, str(deaths), str(marker), f"w{i}"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for i in range(count)]
    with Client(address, timeout=10) as client:
        deadline = time.monotonic() + 60
        while len(client.scheduler_info(n_workers=-1)["workers"]) < count:
            assert time.monotonic() < deadline, "the workers did not join"
            time.sleep(0.2)
    return procs, marker


def _stop(procs: list[subprocess.Popen]) -> list[int | None]:
    codes = []
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
        codes.append(proc.returncode)
    return codes


def test_a_worker_killed_mid_candidate_is_retried_once_elsewhere(toolchain, tmp_path: Path, scheduler: str) -> None:
    procs, marker = _dying_workers(tmp_path, scheduler, deaths=1)
    verifier = ClusterVerifier(scheduler, toolchain=toolchain)
    try:
        path = candidates(tmp_path / "c", 1)[0]
        verdict = verifier.verify([CheckJob(path, load_spec(tmp_path / "c" / "porter.toml"),
                                            CheckOptions(arch="sm_90a", seeds=(1, 2)))])[0]
    finally:
        verifier.close()
        codes = _stop(procs)
    assert marker.read_text() == "1"  # one worker died at the candidate's first case
    assert 17 in codes
    assert verdict.status == "passed", verdict.reason


def test_a_candidate_whose_workers_die_twice_is_an_error_with_the_reason(toolchain, tmp_path: Path,
                                                                         scheduler: str) -> None:
    procs, marker = _dying_workers(tmp_path, scheduler, deaths=2)
    verifier = ClusterVerifier(scheduler, toolchain=toolchain)
    try:
        path = candidates(tmp_path / "c", 1)[0]
        verdict = verifier.verify([CheckJob(path, load_spec(tmp_path / "c" / "porter.toml"),
                                            CheckOptions(arch="sm_90a"))])[0]
    finally:
        verifier.close()
        codes = _stop(procs)
    assert marker.read_text() == "2" and codes == [17, 17]
    assert verdict.status == "error"
    assert "died while checking it, twice" in verdict.reason
    assert verdict.gate("assemble").status == "passed"


@pytest.mark.parametrize("address", ["tcp//10.0.0.5:8786", "tcp://10.0.0.5", "http://10.0.0.5:8786",
                                     "tcp://10.0.0.5:99999", "10.0.0.5:port"])
def test_a_malformed_address_is_exit_2_at_once(tmp_path: Path, address: str) -> None:
    """#29: a malformed --cluster took 9 s, exit 3 and left a Client.__del__ traceback."""
    kernel, _ = small_vector_add(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": ""}
    for args in (["check", str(kernel), "--cluster", address], ["worker", "--scheduler", address]):
        start = time.monotonic()
        r = subprocess.run([sys.executable, "-m", "porter", *args], capture_output=True, text=True, env=env, timeout=60)
        assert r.returncode == 2, (args, r.stderr)
        assert "not a dask scheduler address" in r.stderr or "protocol" in r.stderr or "port must be" in r.stderr
        assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
        assert time.monotonic() - start < 5


def test_a_dask_worker_not_started_by_porter_is_named(toolchain, tmp_path: Path, scheduler: str) -> None:
    """#29: a plain dask worker that offers the target ended in `internal error: KeyError: 'porter-gpu'`."""
    from distributed import Worker

    async def plain_worker() -> Worker:
        return await Worker(scheduler, nthreads=1, resources={"sm_90a": 1}, dashboard=False)

    verifier = ClusterVerifier(scheduler, toolchain=toolchain)
    worker = verifier.client.sync(plain_worker)
    try:
        path = candidates(tmp_path, 1)[0]
        with pytest.raises(EnvironmentProblem, match=r"not started by `porter worker`.*porter worker --scheduler"):
            verifier.verify([CheckJob(path, load_spec(tmp_path / "porter.toml"), CheckOptions(arch="sm_90a"))])
    finally:
        verifier.client.sync(worker.close)
        verifier.close()
