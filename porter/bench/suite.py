"""``porter bench``: what ports achieve on the three axes that matter, over a suite of tasks.

A suite is a folder of tasks; a task is a folder with ``task.toml`` (the source kernel, the target,
optionally a shipped reference port), the spec and its reference. For each task and model, porter
runs the port (or, with ``--solutions``, checks the reference port) and reports one row: does it
assemble, is it equivalent, are the target's own instructions in the SASS and did they execute, and
how fast is it against the source, the library and the roofline. Suite rates are taken over the
tasks that could run here: a task whose target is absent is ``not run``, never passed or failed.
Where no GPU here runs a task's kernel, porter's PTX emulator may have: the row's ``equivalent``
then says ``yes (emulated)`` (or ``no (emulated)``), and only a GPU's ``yes`` counts as correct.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from porter._toml import tomllib
from porter.agent.llm import SpendRecord
from porter.errors import ExitCode, InputError
from porter.gate.evidence import equivalence
from porter.gate.verdict import NoJudgement, Status, Verdict, exit_code_for_all, judge
from porter.pool.verifier import CheckJob, RunnerVerifier, Verifier


@dataclass(frozen=True)
class Task:
    name: str
    folder: Path
    source: Path
    spec: Path
    to_arch: str
    from_arch: str | None = None
    solution: Path | None = None


@dataclass(frozen=True)
class BenchRow:
    task: str
    model: str  # a model name, "solution" for a reference port, "none" for the retarget alone
    status: Status | NoJudgement  # the check's or port's status; no solution: the task ships no reference port
    assembled: bool | None
    equivalent: str  # yes | no | not run, marked "(emulated)" where porter's PTX emulator said it
    native_in_sass: bool | None
    native_executed: str  # yes | no | not run | not required
    speedup_vs_source: float | None
    speedup_vs_library: float | None
    roofline: float | None
    rounds: int = 0
    tokens: int = 0
    usd: float = 0.0
    reason: str = ""


@dataclass(frozen=True)
class BenchSummary:
    """The suite's counts, by each row's status (the table's column): a row that failed before it
    could run (ptxas rejected the port) counts as run and failed, never as not run."""

    tasks: int
    ran: int  # rows judged here: passed or failed, in whatever way
    not_run: int  # not run (here, or on target hardware), or an error of the environment
    no_solution: int
    correct: int
    native_executed: int
    faster_than_library: int
    with_library: int

    def share(self, n: int, of: int | None = None) -> str:
        total = self.ran if of is None else of
        return "-" if total == 0 else f"{n}/{total} ({100 * n / total:.0f}%)"


def load_tasks(path: Path) -> list[Task]:
    """The tasks of one task.toml: a ``[task]`` table, or several as ``[[task]]`` (one source
    ported to several targets)."""
    folder = path.parent
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        raise InputError(f"{path}: {err}") from err
    raw = data.get("task")
    tables = [raw] if isinstance(raw, dict) else raw if isinstance(raw, list) and raw else None
    if tables is None or not all(isinstance(t, dict) for t in tables):
        raise InputError(f"{path}: needs a [task] table or [[task]] tables")
    return [_task(path, folder, table, f"task[{i}]" if len(tables) > 1 else "task")
            for i, table in enumerate(tables)]


def _task(path: Path, folder: Path, table: dict[str, Any], key: str) -> Task:
    unknown = set(table) - {"name", "source", "spec", "to", "from", "solution"}
    if unknown:
        raise InputError(f"{path}: {key}.{sorted(unknown)[0]}: unknown key")
    for name in ("source", "to"):
        if not isinstance(table.get(name), str):
            raise InputError(f"{path}: {key}.{name} is missing")
    for name in ("name", "spec", "from", "solution"):
        if name in table and not isinstance(table[name], str):
            raise InputError(f"{path}: {key}.{name}: must be a string")
    source = folder / table["source"]
    spec = folder / table.get("spec", "porter.toml")
    solution = folder / table["solution"] if table.get("solution") else None
    for what, file in (("source", source), ("spec", spec), ("solution", solution)):
        if file is not None and not file.is_file():
            raise InputError(f"{path}: {key}.{what}: no file {file.name}")
    return Task(name=str(table.get("name", folder.name)), folder=folder, source=source, spec=spec,
                to_arch=table["to"], from_arch=table.get("from"), solution=solution)


def find_tasks(suite: Path) -> list[Task]:
    if suite.is_file() and suite.name == "task.toml":
        return load_tasks(suite)
    if not suite.is_dir():
        raise InputError(f"{suite}: no such suite folder")
    files = sorted({*suite.glob("task.toml"), *suite.glob("*/task.toml"), *suite.glob("*/*/task.toml")})
    if not files:
        raise InputError(f"{suite}: no task.toml in it or in its subfolders")
    return [task for f in files for task in load_tasks(f)]


def row_from_verdict(task: str, model: str, verdict: Verdict, *, require_native: bool,
              spend: SpendRecord | None = None, port: bool = False) -> BenchRow:
    """One bench row, read off a Verdict (the one currency: nothing is re-derived). The status is
    the check's (``port=False``: a reference port) or the port's judgement (:func:`porter.gate.verdict.judge`)."""
    gates = {g.name: g.status for g in verdict.gates}
    if not require_native:
        executed = "not required"
    elif verdict.native is None:
        executed = "not run"
    else:
        executed = {"executed": "yes", "not measured": "not run"}.get(verdict.native.state, "no")
    candidate = next((t for t in verdict.timings if t.name == "candidate"), None)
    spend = spend or SpendRecord()
    return BenchRow(
        task=task, model=model, status=judge(verdict, require_native=require_native if port else None).status,
        assembled=gates.get("assemble") == Status.PASSED if "assemble" in gates else None,
        equivalent=equivalence(verdict).label, native_in_sass=any(verdict.signature_sass.values()) if verdict.signature_sass else None,
        native_executed=executed, speedup_vs_source=verdict.speedup_vs_source,
        speedup_vs_library=verdict.speedup_vs_library,
        roofline=candidate.roofline_fraction if candidate else None,
        rounds=spend.rounds, tokens=spend.tokens, usd=spend.usd, reason=verdict.reason,
    )


def judged(rows: Sequence[BenchRow]) -> list[Status]:
    """The statuses of the rows that are a judgement (every row but ``no solution``: a task
    without a reference port)."""
    return [r.status for r in rows if isinstance(r.status, Status)]


def exit_code(rows: Sequence[BenchRow]) -> ExitCode:
    """``porter bench``'s exit code, as a check's: 1 if any row failed, else 3 if any was not run."""
    return exit_code_for_all(judged(rows))


def summarise(rows: Sequence[BenchRow]) -> BenchSummary:
    ran = [r for r in rows if isinstance(r.status, Status) and r.status.exit_code != ExitCode.ENVIRONMENT]
    with_library = [r for r in ran if r.speedup_vs_library is not None]
    missing = len(rows) - len(judged(rows))
    return BenchSummary(
        tasks=len(rows), ran=len(ran), not_run=len(rows) - len(ran) - missing, no_solution=missing,
        correct=sum(r.equivalent == "yes" for r in ran),
        native_executed=sum(r.native_executed == "yes" for r in ran),
        faster_than_library=sum((r.speedup_vs_library or 0) > 1 for r in with_library),
        with_library=len(with_library),
    )


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _yes(value: bool | None) -> str:
    return "-" if value is None else ("yes" if value else "no")


def render_markdown(rows: Sequence[BenchRow], summary: BenchSummary, *, header: str = "") -> str:
    lines = [header, ""] if header else []
    lines += ["| task | model | status | assembled | equivalent | native in SASS | native executed | vs source | "
              "vs library | roofline | rounds | tokens | USD |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        roof = "-" if r.roofline is None else f"{100 * r.roofline:.0f}%"
        lines.append(f"| {r.task} | {r.model} | {r.status} | {_yes(r.assembled)} | {r.equivalent} | "
                     f"{_yes(r.native_in_sass)} | {r.native_executed} | {_x(r.speedup_vs_source)} | "
                     f"{_x(r.speedup_vs_library)} | {roof} | {r.rounds} | {r.tokens} | {r.usd:.4f} |")
    s = summary
    missing = f"; {s.no_solution} tasks ship no reference port" if s.no_solution else ""
    lines += ["", f"Over the {s.ran} rows that ran here ({s.not_run} not run: their target is absent or there is "
                  f"no GPU; never counted as passed or failed{missing}):",
              f"- correct: {s.share(s.correct)}",
              f"- native instructions executed: {s.share(s.native_executed)}",
              f"- faster than the library: {s.share(s.faster_than_library, s.with_library)} "
              "(rows with a library baseline)"]
    return "\n".join(lines)


def run_bench(tasks: Sequence[Task], *, models: Sequence[str | None], solutions: bool, toolchain: Any,
              runner: Any = None, verifier: Verifier | None = None, api_base: str | None = None,
              on_row: Callable[[BenchRow], None] | None = None, runs_root: Path | None = None) -> list[BenchRow]:
    """Run every task (x model), or check every shipped solution; rows in task order. The tasks run
    side by side, as many at once as the verifier has GPUs (slots of a pool, workers of a cluster)."""
    from porter.gate.spec import load_spec

    verifier = verifier if verifier is not None else RunnerVerifier(runner, toolchain)
    work: list[Callable[[], BenchRow]] = []
    for task in tasks:
        spec = load_spec(task.spec)
        if solutions:
            work.append(partial(_solution_row, task, spec, verifier))
            continue
        for model_name in models:
            work.append(partial(_port_row, task, spec, model_name, toolchain, verifier, api_base, runs_root))
    rows: list[BenchRow] = []
    with ThreadPoolExecutor(max_workers=max(1, min(len(work), verifier.capacity)),
                            thread_name_prefix="porter-bench") as tasks_at_once:
        for future in [tasks_at_once.submit(job) for job in work]:
            row = future.result()
            rows.append(row)
            if on_row:
                on_row(row)
    return rows


def _port_row(task: Task, spec: Any, model_name: str | None, toolchain: Any, verifier: Verifier,
              api_base: str | None, runs_root: Path | None) -> BenchRow:
    from porter.agent.model_choice import make_model
    from porter.agent.session import run_port
    from porter.gitcmd import repo_root_of

    # Recorded where `porter runs` and `porter replay` look: the repository's .porter/runs.
    result = run_port(task.source, spec, task.to_arch, toolchain=toolchain, verifier=verifier,
                      model=make_model(model_name, api_base=api_base), from_arch=task.from_arch,
                      repo_root=repo_root_of(task.folder.absolute()) or Path.cwd(), runs_root=runs_root)
    assert result.best is not None
    # The port's own target and requirement: the session chose them, the row does not again.
    return row_from_verdict(task.name, model_name or "none", result.best.verdict,
                            require_native=result.require_native, spend=result.spend, port=True)


def _solution_row(task: Task, spec: Any, verifier: Verifier) -> BenchRow:
    """A task's shipped reference port, checked at the target and requirement a port of it would get."""
    from porter.agent.session import choose_target, native_required
    from porter.gate.check import CheckOptions
    from porter.ptx import read_ptx
    from porter.ptx.arch import get_profile

    if task.solution is None:
        return BenchRow(task.name, "solution", NoJudgement.NO_SOLUTION, None, "not run", None, "not run", None, None,
                        None, reason="the task ships no reference port")
    module = read_ptx(task.source)
    target, _ = choose_target(module, task.to_arch)
    require = native_required(module, get_profile(task.from_arch or module.arch), get_profile(target))
    verdict = verifier.verify([CheckJob(task.solution, spec,
                                        CheckOptions(arch=target, native=require, speed_baseline=task.source))])[0]
    return row_from_verdict(task.name, "solution", verdict, require_native=require)
