"""porter's services: ``check``, ``port``, ``replay``, ``record``, ``profile``, ``bench`` and ``ci`` as
library functions under the interfaces (the CLI, an MCP server, a notebook).

Each service owns what a command needs for its whole run: where candidates are verified (one
:func:`porter.pool.open_verifier` context per command: the local pool over every GPU, a cluster, or
:func:`gpu_runner`'s one worker; closed whatever happens; on the :class:`Seams` given, porter's own
unless a test passes doubles), the toolchain, the spec search and
the model's resolution and pre-flight (:func:`porter.agent.model_choice.open_model`). The interfaces only parse
arguments, call one of these and render what it returns; exit codes come from
:func:`porter.gate.verdict.judge`.

Heavy modules are imported inside the functions, so that importing this module (and
``porter --help``) stays fast.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from porter.errors import EnvironmentProblem, ExitCode, InputError
from porter.gate.verdict import Status, exit_code_for_all, size_label

if TYPE_CHECKING:
    from porter.agent.llm import Budget
    from porter.agent.replay import ReplayModel
    from porter.agent.runs import RunConfig
    from porter.agent.session import PortResult
    from porter.agent.steering import Steering
    from porter.bench.suite import BenchRow, BenchSummary
    from porter.ci.bot import CiOutcome
    from porter.gate.check import CheckOptions
    from porter.gate.runner import GpuRunner
    from porter.gate.runner.client import DeviceInfo
    from porter.gate.spec import Spec
    from porter.gate.verdict import Verdict
    from porter.pool.local import RunnerFactory
    from porter.ptx.toolchain import Toolchain
    from porter.review.branch import ReviewOutcome


# -- what every command shares ------------------------------------------------------------------


@dataclass(frozen=True)
class Seams:
    """What a command runs on that a test can replace: the GPU worker of a device (each of the local
    pool's and of ``porter worker``, and the one of ``record`` and ``profile``) and the class that plays a ``replay:``
    script. None is porter's own. Passed in rather than patched into module globals, so that a test
    driving the real command line (``tests/porter_with_doubles.py``) changes nothing it does not pass."""

    runner_factory: RunnerFactory | None = None
    replay_model: type[ReplayModel] | None = None


REAL = Seams()


@contextmanager
def gpu_runner(gpu: bool = True, seams: Seams = REAL) -> Iterator[GpuRunner | None]:
    """The GPU worker for one command, on the first GPU (None with ``gpu=False``: static checks
    only), closed on exit."""
    from porter.gate.runner.client import Runner, opened

    factory = partial(seams.runner_factory, 0) if seams.runner_factory is not None else Runner
    with opened(factory if gpu else None) as runner:
        yield runner


def assembler() -> Toolchain:
    """The toolchain, with ptxas (every command that checks a kernel needs it: one line, exit 3, if not)."""
    from porter.ptx.toolchain import find_toolchain

    toolchain = find_toolchain()
    toolchain.require("ptxas")
    return toolchain


def find_spec(kernel: Path, spec: Path | None) -> Spec:
    """The spec given, else the nearest porter.toml walking up from the kernel's folder to the top
    of its repository (only its own folder outside one): the same search as ``porter ci``'s."""
    from porter.gate.spec import load_spec
    from porter.gitcmd import repo_root_of

    if not kernel.exists():  # say so before complaining about the spec beside it
        raise InputError(f"{kernel}: no such file")
    if spec is not None:
        return load_spec(spec)
    folder = kernel.absolute().parent
    top = repo_root_of(folder)
    for candidate in (folder, *folder.parents):
        if (candidate / "porter.toml").is_file():
            return load_spec(candidate / "porter.toml")
        if top is None or candidate == top:
            break
    where = "beside the kernel" if top is None else "in its folder or any folder above it in the repository"
    raise InputError(f"{kernel}: no spec (porter.toml {where}); give one with --spec")


def repo_root(path: Path) -> Path:
    """The git work tree holding ``path`` (for .porter/), else the current folder."""
    from porter.gitcmd import repo_root_of

    return repo_root_of(path) or Path.cwd()


def _kernel_on_this_gpu(kernel: Path, runner: GpuRunner, command: str) -> tuple[DeviceInfo, bytes]:
    """This GPU (from the runner) and a cubin of ``kernel`` it can load, or a one-line error (exit 3)."""
    from porter.gate.check import runnable_cubin
    from porter.gate.runner.client import started
    from porter.ptx import read_ptx

    module = read_ptx(kernel)
    toolchain = assembler()
    device = started(runner, command)
    cubin, note = runnable_cubin(module, None, device, toolchain, kernel.name)
    if cubin is None:
        raise EnvironmentProblem(f"{kernel}: {note}")
    return device, cubin


# -- check, record, profile ---------------------------------------------------------------------


def check(candidate: Path, spec: Spec, options: CheckOptions, *, gpu: bool = True, cluster: str | None = None,
          runner: GpuRunner | None = None, seams: Seams = REAL) -> Verdict:
    """``porter check``: the gate on one candidate, here (in ``runner``, a long-lived server's, when
    one is given) or on a worker of the cluster at ``cluster``."""
    from porter.gate.check import check_inputs
    from porter.pool import CheckJob, open_verifier

    check_inputs(spec, options)  # a wrong --against or reference is exit 2 here too, not `not run`
    toolchain = assembler()
    with open_verifier(toolchain, gpu=gpu, cluster=cluster, runner=runner,
                       runner_factory=seams.runner_factory) as verifier:
        return verifier.verify([CheckJob(candidate, spec, options)])[0]


def record(source: Path, spec: Spec, out: Path, *, seeds: tuple[int, ...] = (), force: bool = False,
           seams: Seams = REAL) -> dict[str, Any]:
    """``porter record``: the source kernel's outputs for the whole sweep, as a golden folder; its manifest."""
    from porter.gate.golden import record as record_golden

    with gpu_runner(seams=seams) as runner:
        assert runner is not None
        device, cubin = _kernel_on_this_gpu(source, runner, "record")
        return record_golden(source, spec, out, seeds=seeds, runner=runner, cubin=cubin, device=device.describe(),
                             force=force)


@dataclass(frozen=True)
class Profiled:
    facts: dict[str, object]  # what goes into the spec's [profile]
    roofline: str  # which roofline the peaks are ("H200 SXM", ...)


def profile(kernel: Path, spec: Spec, *, from_csv: Path | None = None, write: bool = True,
            seams: Seams = REAL) -> Profiled:
    """``porter profile``: the hot loop under Nsight Compute (or an ncu export), written into the
    spec's ``[profile]`` unless ``write=False``."""
    from porter.gate.hotspots import import_details, profile_kernel, stamp, summarise, write_profile
    from porter.gate.nsight import LaunchJob
    from porter.ptx import read_ptx
    from porter.ptx.arch import get_profile

    sizes = spec.default_sizes()
    if from_csv is not None:
        metrics = import_details(from_csv)
        gpu, tool = "imported", f"ncu export {from_csv.name}"
        arch = read_ptx(kernel).arch
    else:
        with gpu_runner(seams=seams) as runner:
            assert runner is not None
            device, cubin = _kernel_on_this_gpu(kernel, runner, "profile")
        run = profile_kernel(LaunchJob(cubin, spec.entry, spec.path, sizes))
        if not run.ok:
            raise EnvironmentProblem(f"ncu: {run.reason}")
        metrics, gpu, tool, arch = run.metrics, device.name, "ncu", device.arch
    tflops, tbps, part = get_profile(arch).peak_for(gpu)
    facts = {**stamp(gpu, tool), **summarise(metrics, flops=spec.flops(sizes), nbytes=spec.bytes(sizes),
                                             peak_tflops=tflops, peak_tbps=tbps)}
    facts["sizes"] = size_label(sizes)
    if write:
        write_profile(spec.path, facts)
    return Profiled(facts, part)


# -- port ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ported:
    result: PortResult
    review: ReviewOutcome | None  # None: no branch was asked for, or the port did not pass


def port(kernel: Path, to_arch: str, *, spec: Path | None = None, from_arch: str | None = None,
         model: str | None = None, api_base: str | None = None, model_fixed: bool = False, agent: str = "port",
         budget: Budget | None = None, optimize: bool = False, require_native: bool | None = None, branch: bool | None = None,
         branch_on_failure: bool = False, in_place: bool = False, push: str | None = None, out: Path | None = None,
         gpu: bool = True, on_event: Callable[..., None] | None = None,
         env: Mapping[str, str] | None = None, candidates: int = 1, cluster: str | None = None,
         steering: Steering | None = None, runner: GpuRunner | None = None, entry: str | None = None,
         gpu_guard: Callable[[], AbstractContextManager[Any]] | None = None, seams: Seams = REAL) -> Ported:
    """``porter port``: checks first (the spec, the architectures, the model's key and server, that a
    branch asked for can be made), then the session, then the review branch of a port that passed.
    ``steering`` is asked between rounds (``--interactive``); ``runner`` and ``gpu_guard`` are a
    server's shared GPU worker and the lock held around each candidate's check. ``model_fixed``:
    ``model`` and ``api_base`` are the whole choice (a server's, made when it started; None is no
    model): no config file is read for it."""
    from porter.agent.llm import Budget
    from porter.agent.model_choice import open_model
    from porter.agent.replay import ReplayModel
    from porter.agent.session import run_port
    from porter.pool import open_verifier
    from porter.review.branch import branch_problem

    # Absolute paths from here on: git runs in the repository's top folder, not where porter was started.
    kernel = kernel.absolute()
    loaded = find_spec(kernel, spec.absolute() if spec is not None else None)
    arch_name(to_arch, "--to")
    if from_arch is not None:
        arch_name(from_arch, "--from")
    root = repo_root(kernel)
    # The model is resolved and its credentials checked before any work (and before the session's
    # heavier imports): a missing key is one line, exit 3, in about a second.
    client = open_model(model, api_base=api_base, env=os.environ if env is None else env,
                        config_path=None if model_fixed else root / ".porter" / "config.toml",
                        replay_model=seams.replay_model or ReplayModel)
    # A branch that cannot be made is said now, not after every round has been spent.
    asked_for_branch = branch is True or branch_on_failure or push is not None or in_place
    no_branch = branch_problem(kernel) if branch is not False else ""
    if no_branch and asked_for_branch and out is None:
        raise InputError(f"no review branch can be made: {no_branch} (give --out DIR for the files, or --no-branch)")
    if push is not None and not no_branch:
        _check_push_remote(kernel.parent, push)
    if candidates < 1:
        raise InputError(f"--candidates: at least 1 (got {candidates})")
    toolchain = assembler()
    with open_verifier(toolchain, gpu=gpu, cluster=cluster, runner=runner,
                       runner_factory=seams.runner_factory) as verifier:
        result = run_port(kernel, loaded, to_arch, toolchain=toolchain, verifier=verifier, model=client,
                          from_arch=from_arch, agent=agent, budget=budget or Budget(), optimize=optimize,
                          require_native=require_native, repo_root=root, on_event=on_event, candidates=candidates,
                          steering=steering, gpu_guard=gpu_guard, entry=entry)
    review = _review(result, kernel, loaded.path, toolchain, no_branch=no_branch, branch=branch,
                     branch_on_failure=branch_on_failure, in_place=in_place, push=push, out=out)
    return Ported(result, review)


def _check_push_remote(where: Path, remote: str) -> None:
    """``--push REMOTE`` names a remote of the repository at ``where`` (a URL or a path is taken as
    git takes it): said before any work, not after every round was spent and the branch made."""
    if "/" in remote or ":" in remote:
        return
    from porter.gitcmd import run_git

    remotes = run_git(where, "remote", check=False).stdout.split()
    if remote not in remotes:
        raise InputError(f"--push {remote}: the repository has no remote {remote!r} (remotes: "
                         f"{', '.join(remotes) or 'none'}); add it with `git remote add {remote} URL`, or name another")


def _review(result: PortResult, kernel: Path | None, spec_path: Path, toolchain: Toolchain, *, no_branch: str,
            branch: bool | None, branch_on_failure: bool, in_place: bool, push: str | None,
            out: Path | None) -> ReviewOutcome | None:
    """The review branch of a port that passed (or any, with ``branch_on_failure``); none for a port
    the developer stopped."""
    from porter.review.branch import ReviewOutcome, open_review_branch

    if branch is False or result.stopped or not (result.status == Status.PASSED or branch_on_failure):
        return None
    if kernel is None or (no_branch and out is None):
        why = no_branch or "the ported kernel is not in this repository"
        return ReviewOutcome(None, None, (), reason=f"{why} (--out DIR writes the files instead)")
    return open_review_branch(result, kernel=kernel, spec_path=spec_path, in_place=in_place,
                              branch_on_failure=branch_on_failure, push=push,
                              out_dir=out.absolute() if out is not None else None,
                              toolchain=f"ptxas {toolchain.ptxas.version}" if toolchain.ptxas else "")


def resume(run: str, root: Path, *, budget: Budget | None = None, api_base: str | None = None,
           branch: bool | None = None, branch_on_failure: bool = False, in_place: bool = False,
           push: str | None = None, out: Path | None = None, gpu: bool = True,
           on_event: Callable[..., None] | None = None, env: Mapping[str, str] | None = None,
           steering: Steering | None = None, runner: GpuRunner | None = None, cluster: str | None = None,
           gpu_guard: Callable[[], AbstractContextManager[Any]] | None = None, seams: Seams = REAL) -> Ported:
    """``porter port --resume RUN``: go on with a recorded run from its last step, with the kernel,
    spec, model and conversation it recorded, and ``budget`` on top of what it spent. The review
    branch goes where the kernel is in this clone of the repository."""
    from porter.agent.replay import ReplayModel
    from porter.agent.resume import reopen_model, resume_point
    from porter.agent.runs import find_run
    from porter.agent.session import resume_port
    from porter.pool import open_verifier
    from porter.review.branch import branch_problem

    point = resume_point(find_run(root / ".porter" / "runs", run))
    config = point.config
    client = reopen_model(point, api_base=api_base, env=os.environ if env is None else env,
                          replay_model=seams.replay_model or ReplayModel)
    here = [root / rel for rel in (config.kernel_in_repo,) if rel] + [Path(config.kernel)]
    kernel = next((p for p in here if p.is_file()), None)
    no_branch = branch_problem(kernel) if kernel is not None and branch is not False else ""
    if push is not None and kernel is not None and not no_branch:
        _check_push_remote(kernel.parent, push)
    in_repo = root / config.spec_in_repo if config.spec_in_repo else None
    spec_path = in_repo if in_repo is not None and in_repo.is_file() else point.run_dir / point.inputs.spec
    toolchain = assembler()
    with open_verifier(toolchain, gpu=gpu, cluster=cluster, runner=runner,
                       runner_factory=seams.runner_factory) as verifier:
        result = resume_port(point, toolchain=toolchain, verifier=verifier, model=client, budget=budget,
                             repo_root=root, on_event=on_event, steering=steering, gpu_guard=gpu_guard)
    review = _review(result, kernel, spec_path, toolchain, no_branch=no_branch, branch=branch,
                     branch_on_failure=branch_on_failure, in_place=in_place, push=push, out=out)
    return Ported(result, review)


def arch_name(arch: str | None, option: str) -> str | None:
    """An --arch/--to value as a profile name, or one line (exit 2) for a name porter has no profile for."""
    if arch is None:
        return None
    from porter.ptx.arch import get_profile

    try:
        return get_profile(arch).name
    except InputError as err:
        raise InputError(f"{option}: {err}") from None


# -- runs ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReplayRow:
    index: int
    origin: str
    recorded: Status | None  # the recorded verdict's status; None where the candidate has no record
    verdict: Verdict  # this machine's

    @property
    def agrees(self) -> bool:
        return self.recorded is not None and self.recorded == self.verdict.status

    @property
    def recorded_word(self) -> str:
        """The recorded status as tables and answers say it: ``?`` without a record."""
        return "?" if self.recorded is None else str(self.recorded)

    @property
    def outcome(self) -> Status:
        """What the replay of this candidate amounts to: ``not run`` where it could not run here
        (whatever was recorded: nothing was compared), else ``passed`` when this machine's status is
        the recorded one and ``failed`` when it is not (the record does not reproduce)."""
        if self.verdict.status.exit_code == Status.NOT_RUN.exit_code:
            return Status.NOT_RUN
        return Status.PASSED if self.agrees else Status.FAILED


@dataclass(frozen=True)
class Replayed:
    run: Path
    rows: tuple[ReplayRow, ...]

    @property
    def agrees(self) -> bool:
        return all(r.agrees for r in self.rows)

    @property
    def exit_code(self) -> ExitCode:
        """As a check's: 1 if a candidate's record does not reproduce, else 3 if one could not run here."""
        return exit_code_for_all(r.outcome for r in self.rows)

    def as_data(self) -> dict[str, Any]:
        """The replay as ``--json`` (and the MCP tool) give it: each candidate's recorded status,
        this machine's Verdict, and whether they agree."""
        return {"run": self.run, "agrees": self.agrees, "exit_code": self.exit_code,
                "rows": [{"index": r.index, "origin": r.origin, "recorded": r.recorded_word, "agrees": r.agrees,
                          "outcome": r.outcome, "verdict": r.verdict} for r in self.rows]}


def recorded_spec(config: RunConfig, root: Path) -> Path:
    """The spec a recorded run is checked against: at the same place in this clone of the
    repository first; the recording machine's absolute path last."""
    in_repo = root / config.spec_in_repo if config.spec_in_repo else None
    return in_repo if in_repo is not None and in_repo.is_file() else Path(config.spec)


def replay(run: str, root: Path, *, gpu: bool = True, runner: GpuRunner | None = None,
           seams: Seams = REAL) -> Replayed:
    """``porter replay``: re-verify every candidate of a recorded run on this machine."""
    from porter.agent.runs import candidates, find_run, read_config
    from porter.gate.check import CheckOptions
    from porter.gate.spec import load_spec
    from porter.pool import CheckJob, open_verifier

    folder = find_run(root / ".porter" / "runs", run)
    config = read_config(folder)
    loaded = load_spec(recorded_spec(config, root))
    options = CheckOptions(arch=config.target, native=config.require_native)
    recorded = list(candidates(folder))
    with open_verifier(assembler(), gpu=gpu, runner=runner, runner_factory=seams.runner_factory) as verifier:
        verdicts = verifier.verify([CheckJob(folder / "candidates" / f"{index:02d}.ptx", loaded, options)
                                    for index, _text, _record in recorded])
    rows = [ReplayRow(index, record.origin if record is not None else "?",
                      record.verdict.status if record is not None else None, verdict)
            for (index, _text, record), verdict in zip(recorded, verdicts, strict=True)]
    return Replayed(folder, tuple(rows))


# -- bench and ci -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Benched:
    rows: list[BenchRow]
    summary: BenchSummary
    gpu: str  # "NVIDIA H200 (sm_90), ..." or "no GPU"


def bench(suite: Path, *, models: Sequence[str | None] = (None,), solutions: bool = False,
          api_base: str | None = None, gpu: bool = True, on_row: Callable[[BenchRow], None] | None = None,
          env: Mapping[str, str] | None = None, cluster: str | None = None, seams: Seams = REAL) -> Benched:
    """``porter bench``: every task of a suite ported by every model (or its reference port checked),
    the tasks spread over every local GPU (or the cluster's workers)."""
    from porter.agent.model_choice import check_model
    from porter.bench.suite import find_tasks, run_bench, summarise
    from porter.pool import open_verifier

    tasks = find_tasks(suite)
    if not solutions:
        for name in models:
            check_model(name, api_base=api_base, env=os.environ if env is None else env)  # a missing key: one line
    toolchain = assembler()
    with open_verifier(toolchain, gpu=gpu, cluster=cluster, runner_factory=seams.runner_factory) as verifier:
        rows = run_bench(tasks, models=list(models) or [None], solutions=solutions, toolchain=toolchain,
                         verifier=verifier, api_base=api_base, on_row=on_row)
        name = verifier.describe()
    return Benched(rows, summarise(rows), name)


def serve_gpus(scheduler: str, *, name: str | None = None, echo: Callable[[str], None] = print,
               seams: Seams = REAL) -> None:
    """``porter worker``: this machine's GPUs as dask workers of ``scheduler``, until interrupted."""
    from porter.install import install_hint
    from porter.pool.address import scheduler_address

    scheduler = scheduler_address(scheduler, "--scheduler")  # before any GPU is started
    try:
        from porter.pool.dask_workers import WorkerGroup, local_gpus
    except ImportError:
        raise EnvironmentProblem(f"porter worker needs dask.distributed: {install_hint('dask')}") from None
    gpus = local_gpus(seams.runner_factory) if seams.runner_factory is not None else local_gpus()
    group = WorkerGroup(scheduler, gpus, name=name)
    echo(f"porter worker: joining {scheduler} with {group.describe()}")
    try:
        group.run()
    finally:
        for gpu in gpus:
            gpu.runner.close()
    echo("porter worker: stopped")


def ci(repo: Path, *, model: str | None = None, api_base: str | None = None, port_to: str | None = None,
       gpu: bool = True, env: Mapping[str, str] | None = None, **options: Any) -> CiOutcome:
    """``porter ci``: the pre-merge bot (see :mod:`porter.ci.bot`). The model for ``--port-to`` is
    the bot's own: ``--model``/``--api-base``, else ``PORTER_MODEL``/``PORTER_API_BASE``; never a
    config file in the checkout, which the pull request under review writes."""
    from porter.ci.bot import run_ci
    from porter.gate.runner import Runner

    name, base = None, None
    if port_to:
        from porter.agent.model_choice import resolve_model

        name, base, _ = resolve_model(model, env=os.environ if env is None else env, config_path=None)
    return run_ci(repo, port_to=port_to, model=name, api_base=api_base or base,
                  runner_factory=Runner if gpu else None, **options)
