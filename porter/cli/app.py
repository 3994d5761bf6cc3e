"""The ``porter`` command line. Thin: parse options, call the core, render, map errors to exit codes.

Exit codes (:class:`porter.errors.ExitCode`): 0 passed / ok, 1 the kernel failed the gate, 2 bad
input or usage, 3 environment (no toolchain, no GPU), 70 an internal error, 130 interrupted. Heavy modules are imported inside each command so
that ``porter --help`` stays fast.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypedDict

import typer

from porter.errors import ExitCode, InputError, PorterError, file_problem

if TYPE_CHECKING:
    from porter.services import Seams

app = typer.Typer(
    name="porter",
    help="Port PTX hot loops across NVIDIA GPU generations, verified on measured evidence.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        from porter import __version__

        try:
            from importlib.metadata import PackageNotFoundError, version

            installed = version("porter-kernels")
        except PackageNotFoundError:  # run from a checkout without installing
            installed = __version__
        typer.echo(f"porter {installed}")
        raise typer.Exit(ExitCode.OK)


@app.callback()
def _main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print porter's version and exit.")
    ] = False,
    toolchain: Annotated[
        Path | None,
        typer.Option("--toolchain", metavar="DIR", help="Use the CUDA tools in DIR/bin or DIR (ptxas first), as "
                     "PORTER_CUDA_HOME does; default: the best set found (see porter doctor)."),
    ] = None,
) -> None:
    """Port PTX hot loops across NVIDIA GPU generations, verified on measured evidence."""
    if toolchain is not None:
        from porter.ptx.toolchain import toolchain_home

        os.environ["PORTER_CUDA_HOME"] = str(toolchain_home(toolchain))


def _seams(ctx: typer.Context) -> Seams:
    """What the command runs on: porter's own, or the doubles a test's driver gave :func:`main`."""
    from porter.services import REAL

    return ctx.obj or REAL


def _emit_json(data: object) -> None:
    from porter.jsonable import to_jsonable

    typer.echo(json.dumps(to_jsonable(data), indent=2))


@app.command()
def inspect(
    kernel: Annotated[Path, typer.Argument(help="PTX file to inspect.")],
    arch: Annotated[
        list[str] | None,
        typer.Option("--arch", "-a", help="Architecture to check (repeatable); default: every profile."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")] = False,
    no_assemble: Annotated[
        bool, typer.Option("--no-assemble", help="Skip ptxas; report the static verdicts only.")
    ] = False,
) -> None:
    """Entries, params, features used, and for each architecture: can it go there, and what it costs.
    Exit 0, or 1 when ptxas rejects the kernel for every architecture it was assembled for; 2 bad input."""
    from porter.ptx.inspection import inspect_file
    from porter.report.terminal import render_inspect

    report = inspect_file(kernel, archs=arch or None, assemble=not no_assemble)
    if as_json:
        _emit_json(report)
    else:
        typer.echo(render_inspect(report))
    raise typer.Exit(ExitCode.FAILED if report.rejected_everywhere else ExitCode.OK)


@app.command()
def doctor(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")] = False,
) -> None:
    """Toolchain paths and versions, GPU, driver and CuPy; how to install what is missing."""
    from porter.gate.doctor import diagnose
    from porter.report.terminal import render_doctor

    report = diagnose()
    if as_json:
        _emit_json(report)
    else:
        typer.echo(render_doctor(report))
    if not report.ok:
        raise typer.Exit(ExitCode.ENVIRONMENT)


def _size_overrides(text: str, spec: Any) -> dict[str, int]:
    """``M=8192,N=8192`` -> {"M": 8192, "N": 8192}, checked against the spec's size symbols."""
    overrides: dict[str, int] = {}
    for item in (part.strip() for part in text.split(",")):
        name, eq, value = item.partition("=")
        if not eq or not name.strip() or not value.strip().isdigit():
            raise InputError(f"--time-at: expected NAME=INTEGER pairs separated by commas, got {text!r}")
        overrides[name.strip()] = int(value)
    spec.timing_sizes(overrides)  # unknown symbols and bad sizes fail here, before any GPU work
    return overrides


def _seeds(text: str, seed: int | None = None) -> tuple[int, ...]:
    """--seeds: comma-separated non-negative integers; --seed S: S and S+1 (what a verdict's seeds
    line gives back); neither: () (fresh seeds for this run)."""
    if seed is not None:
        if text.strip():
            raise InputError("give --seed or --seeds, not both")
        if seed < 0:
            raise InputError(f"--seed: a non-negative integer (got {seed})")
        return seed, seed + 1
    try:
        seeds = tuple(int(s) for s in text.split(",") if s.strip())
    except ValueError:
        raise InputError(f"--seeds: expected comma-separated integers, got {text!r}") from None
    if text.strip() and not seeds:
        raise InputError("--seeds: give at least one seed")
    if any(s < 0 for s in seeds):
        raise InputError(f"--seeds: seeds are non-negative integers (got {text!r})")
    return seeds


CLUSTER_HELP = ("A dask scheduler (tcp://HOST:8786): verify on its `porter worker`s of the target architecture "
                "instead of this machine's GPUs.")

SEEDS_HELP = ("Comma-separated seeds, each size set runs once per seed (default: a fresh pair every run, "
              "printed with the verdict; give them back here to reproduce its inputs).")


@app.command()
def check(
    ctx: typer.Context,
    candidate: Annotated[Path, typer.Argument(help="Candidate PTX file.")],
    spec: Annotated[Path | None, typer.Option(help="Hot-loop spec (default: porter.toml beside the kernel).")] = None,
    arch: Annotated[str | None, typer.Option(help="Assemble for this target (default: the PTX's .target).")] = None,
    against: Annotated[
        Path | None, typer.Option(help="Source kernel: the reference (instead of the spec's) and a speed baseline.")
    ] = None,
    golden: Annotated[Path | None, typer.Option(help="Golden outputs recorded by `porter record`.")] = None,
    seeds: Annotated[str, typer.Option(help=SEEDS_HELP)] = "",
    seed: Annotated[int | None, typer.Option(help="Seed S: the seeds S and S+1 (as a verdict's seeds line prints them).")] = None,
    timing: Annotated[bool, typer.Option("--timing/--no-timing", help="Time the kernel after it passes.")] = True,
    timeout: Annotated[float, typer.Option(help="Seconds one case may take before the kernel counts as hung.")] = 60.0,
    gpu: Annotated[bool, typer.Option("--gpu/--no-gpu", help="Use the GPU (off: static checks only).")] = True,
    native: Annotated[
        bool, typer.Option("--native", help="Profile one case with ncu: were the target's own instructions executed?")
    ] = False,
    sanitize: Annotated[
        bool, typer.Option("--sanitize", help="memcheck on the smallest and the middle size set; racecheck, initcheck "
                           "and synccheck on the smallest.")
    ] = False,
    time_at: Annotated[
        list[str] | None,
        typer.Option("--time-at", help="Time at these sizes instead of [sizes], e.g. M=8192,N=8192,K=8192 (repeatable)."),
    ] = None,
    entry: Annotated[
        str | None, typer.Option(help="The candidate's .entry to check, for a module of several kernels "
                                 "(default: the spec's kernel.entry, or the candidate's porter-launch entry).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the verdict as JSON.")] = False,
    cluster: Annotated[str | None, typer.Option(metavar="ADDRESS", help=CLUSTER_HELP)] = None,
    emulate: Annotated[
        bool | None, typer.Option("--emulate/--no-emulate", help="Also run the candidate in porter's PTX emulator at "
                                  "small size sets (default: only where no GPU here can run it). Never a pass alone.")
    ] = None,
) -> None:
    """Assemble a candidate, prove it equivalent over the sweep, and time it. Exit 0 passed, 1 failed,
    2 bad input, 3 not run / environment."""
    from porter import services
    from porter.gate.check import CheckOptions
    from porter.gate.verdict import judge
    from porter.report.terminal import render_verdict

    if against is not None and golden is not None:
        raise InputError("give --against or --golden, not both")
    arch = services.arch_name(arch, "--arch")
    loaded = services.find_spec(candidate, spec)
    options = CheckOptions(arch=arch, against=against, golden=golden, seeds=_seeds(seeds, seed), timing=timing,
                           case_timeout_s=timeout, native=native, sanitize=sanitize,
                           time_at=tuple(_size_overrides(t, loaded) for t in time_at or ()), entry=entry,
                           emulate=emulate)
    verdict = services.check(candidate, loaded, options, gpu=gpu, cluster=cluster, seams=_seams(ctx))
    if as_json:
        _emit_json(verdict)
    else:
        typer.echo(render_verdict(verdict))
    raise typer.Exit(judge(verdict).exit_code)


@app.command()
def record(
    ctx: typer.Context,
    source: Annotated[Path, typer.Argument(help="Source PTX whose outputs become the golden reference.")],
    out: Annotated[Path, typer.Option(help="Folder to write the golden outputs to.")],
    spec: Annotated[Path | None, typer.Option(help="Hot-loop spec (default: porter.toml beside the kernel).")] = None,
    seeds: Annotated[str, typer.Option(help=SEEDS_HELP)] = "",
    seed: Annotated[int | None, typer.Option(help="Seed S: the seeds S and S+1 (as a verdict's seeds line prints them).")] = None,
    force: Annotated[bool, typer.Option(help="Replace golden outputs already in --out.")] = False,
) -> None:
    """Save the source kernel's outputs for the whole sweep, to check a port later on other hardware."""
    from porter import services

    loaded = services.find_spec(source, spec)
    manifest = services.record(source, loaded, out, seeds=_seeds(seeds, seed), force=force, seams=_seams(ctx))
    typer.echo(f"recorded {len(manifest['cases'])} cases of {source} on {manifest['gpu']} into {out}")


@app.command()
def profile(
    ctx: typer.Context,
    kernel: Annotated[Path, typer.Argument(help="The hot loop's PTX.")],
    spec: Annotated[Path | None, typer.Option(help="Hot-loop spec (default: porter.toml beside the kernel).")] = None,
    from_csv: Annotated[
        Path | None, typer.Option("--from-csv", help="Import an `ncu --csv --page details` export instead of running ncu.")
    ] = None,
    write: Annotated[bool, typer.Option("--write/--dry-run", help="Write the facts into the spec's [profile].")] = True,
) -> None:
    """Profile the hot loop under Nsight Compute and record where it spends its time in the spec."""
    from porter import services

    loaded = services.find_spec(kernel, spec)
    profiled = services.profile(kernel, loaded, from_csv=from_csv, write=write, seams=_seams(ctx))
    for key, value in profiled.facts.items():
        typer.echo(f"{key:>26}: {value}")
    if write:
        typer.echo(f"wrote [profile] into {loaded.path} (roofline: {profiled.roofline})")


@app.command()
def port(
    ctx: typer.Context,
    kernel: Annotated[Path | None, typer.Argument(help="The hot loop's PTX (none with --resume).")] = None,
    to: Annotated[str | None, typer.Option("--to", help="Target architecture, e.g. sm_90a or sm_100.")] = None,
    from_arch: Annotated[str | None, typer.Option("--from", help="Source architecture (default: the PTX's .target).")] = None,
    spec: Annotated[Path | None, typer.Option(help="Hot-loop spec (default: porter.toml beside the kernel).")] = None,
    model: Annotated[str | None, typer.Option(help="litellm model (openai/..., anthropic/..., ollama_chat/...), or replay:FILE.")] = None,
    api_base: Annotated[str | None, typer.Option(help="API base URL for local servers (vLLM, Ollama, ...).")] = None,
    agent: Annotated[str, typer.Option(help="Agent name (agents/*.md or .porter/agents/*.md).")] = "port",
    max_rounds: Annotated[int | None, typer.Option(help="Model replies at most (default: the agent's).")] = None,
    max_tokens: Annotated[int | None, typer.Option(help="Tokens at most, prompts and replies together.")] = None,
    max_usd: Annotated[float | None, typer.Option(help="Spend at most this many US dollars.")] = None,
    max_minutes: Annotated[float | None, typer.Option(help="Wall-clock minutes at most.")] = None,
    optimize: Annotated[bool, typer.Option(help="Keep improving speed among passing candidates until the budget ends.")] = False,
    require_native: Annotated[
        bool | None, typer.Option("--require-native/--no-require-native",
                                  help="Require the target's own tensor-core instructions (default: when the model changes).")
    ] = None,
    branch: Annotated[
        bool | None, typer.Option("--branch/--no-branch",
                                  help="End in a review branch porter/<entry>-<arch> (default: when in a git repository).")
    ] = None,
    branch_on_failure: Annotated[
        bool, typer.Option(help="Also make a branch for a port that did not pass (its title says NOT VERIFIED).")
    ] = False,
    in_place: Annotated[bool, typer.Option(help="On the branch, replace the kernel instead of adding <stem>.<arch>.ptx.")] = False,
    push: Annotated[str | None, typer.Option(metavar="REMOTE", help="Push the review branch to this remote.")] = None,
    out: Annotated[
        Path | None, typer.Option(metavar="DIR", help="Where no branch can be made (not a git repository...), write the files here.")
    ] = None,
    gpu: Annotated[bool, typer.Option("--gpu/--no-gpu", help="Use the GPU (off: static checks only).")] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Result as JSON on stdout; events as JSON lines on stderr.")] = False,
    candidates: Annotated[int, typer.Option(help="Proposals per round: independent samples of the model, verified "
                                            "together; the round's best is fed back.")] = 1,
    cluster: Annotated[str | None, typer.Option(metavar="ADDRESS", help=CLUSTER_HELP)] = None,
    interactive: Annotated[
        bool, typer.Option("--interactive", "-i", help="After each candidate, show its verdict and diff and ask: "
                           "a hint for the model, edit it in $EDITOR, accept the best, stop, or go on.")
    ] = False,
    resume: Annotated[
        str | None, typer.Option(metavar="RUN", help="Go on with a recorded run (id, prefix or folder) from its last "
                                 "step, with its kernel, spec, model and history; budget options count from here.")
    ] = None,
    entry: Annotated[
        str | None, typer.Option(help="The .entry to port, for a module of several kernels (default: the spec's "
                                 "kernel.entry, or the kernel's porter-launch entry).")
    ] = None,
) -> None:
    """Port a hot loop to another architecture: retarget, then propose, verify and repair until it passes.
    Exit 0 passed, 1 failed (or passed without native instructions), 2 bad input, 3 not run on target
    hardware / environment (no toolchain, model unreachable or without its key); 130 interrupted."""
    from porter import services
    from porter.cli.progress import make_progress
    from porter.cli.steer import port_steering
    from porter.report.terminal import render_port, render_review

    _refuse_conflicting_port_flags(branch=branch, branch_on_failure=branch_on_failure, in_place=in_place, push=push,
                                   out=out)
    budget = _port_budget(max_rounds=max_rounds, max_tokens=max_tokens, max_usd=max_usd, max_minutes=max_minutes)
    steering = port_steering(interactive, as_json=as_json)
    progress = make_progress(as_json=as_json, live=steering is None)
    branching: _Branching = {"branch": branch, "branch_on_failure": branch_on_failure, "in_place": in_place,
                             "push": push, "out": out}
    if resume is not None:
        fixed = {"KERNEL": kernel, "--to": to, "--from": from_arch, "--spec": spec, "--model": model,
                 "--agent": agent if agent != "port" else None, "--optimize": optimize or None,
                 "--require-native": require_native, "--candidates": candidates if candidates != 1 else None,
                 "--entry": entry}
        given = [name for name, value in fixed.items() if value is not None]
        if given:
            raise InputError(f"--resume goes on with the run's own kernel, spec, target, model, agent and entry: drop "
                             f"{', '.join(given)}")
        ported = services.resume(resume, _runs_root(None), budget=budget, api_base=api_base, gpu=gpu,
                                 on_event=progress, steering=steering, cluster=cluster, seams=_seams(ctx), **branching)
    else:
        if kernel is None or to is None:
            raise InputError("porter port needs KERNEL and --to (or --resume RUN)")
        ported = services.port(kernel, to, spec=spec, from_arch=from_arch, model=model, api_base=api_base,
                               agent=agent, budget=budget, optimize=optimize, require_native=require_native, gpu=gpu,
                               on_event=progress, steering=steering, candidates=candidates, cluster=cluster,
                               entry=entry, seams=_seams(ctx), **branching)
    if as_json:
        _emit_json({"result": ported.result, "review": ported.review})
    else:
        typer.echo(render_port(ported.result))
        typer.echo(render_review(ported.review, ported.result, branch=branch is not False))
    raise typer.Exit(ported.result.status.exit_code)


class _Branching(TypedDict):
    """Where a port goes for review: the options ``porter port`` passes on as they are."""

    branch: bool | None
    branch_on_failure: bool
    in_place: bool
    push: str | None
    out: Path | None


def _refuse_conflicting_port_flags(*, branch: bool | None, branch_on_failure: bool, in_place: bool,
                                   push: str | None, out: Path | None) -> None:
    """One line (exit 2) naming two flags that ask for opposite things, before any work: each of
    --branch-on-failure, --push and --in-place needs the review branch --no-branch turns off, and
    --in-place edits the kernel on that branch while --out writes files instead of one."""
    needs_branch = [flag for flag, given in (("--branch-on-failure", branch_on_failure), ("--push", push is not None),
                                             ("--in-place", in_place)) if given]
    if branch is False and needs_branch:
        raise InputError(f"--no-branch and {needs_branch[0]} contradict each other: {needs_branch[0]} needs the "
                         "review branch that --no-branch turns off; drop one")
    if in_place and out is not None:
        raise InputError("--in-place and --out contradict each other: --in-place replaces the kernel on the review "
                         "branch, --out writes the files to a folder instead of a branch; drop one")


def _port_budget(*, max_rounds: int | None, max_tokens: int | None, max_usd: float | None,
                 max_minutes: float | None) -> Any:
    """The budget the flags give, each limit checked under the flag's own name (the Budget's fields
    are not what the user typed)."""
    from porter.agent.llm import Budget

    for flag, value in (("--max-rounds", max_rounds), ("--max-tokens", max_tokens), ("--max-usd", max_usd),
                        ("--max-minutes", max_minutes)):
        if value is not None and value < 0:
            raise InputError(f"{flag} must not be negative (got {value:g})")
    return Budget(max_rounds=max_rounds, max_tokens=max_tokens, max_usd=max_usd,
                  max_wall_s=max_minutes * 60 if max_minutes is not None else None)


def _runs_root(root: Path | None) -> Path:
    """``--root``, else the repository holding the current folder (runs are found from any folder of it)."""
    from porter.services import repo_root

    return root if root is not None else repo_root(Path.cwd())


@app.command()
def runs(
    root: Annotated[Path | None, typer.Option(help="Repository whose .porter/runs to list (default: this one).")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """List recorded port runs."""
    from porter.agent.runs import list_runs
    from porter.gate.tables import table

    root = _runs_root(root)
    found = list_runs(root / ".porter" / "runs")
    if as_json:
        _emit_json(found)
        return
    if not found:
        typer.echo(f"no runs under {root / '.porter' / 'runs'}")
        return
    typer.echo(table(["run", "kernel", "target", "model", "candidates", "status"],
                     [[r.id, r.kernel, r.target, r.model, r.candidates, r.status] for r in found]))


@app.command()
def replay(
    ctx: typer.Context,
    run: Annotated[str, typer.Argument(help="Run id (or unique prefix, or its folder).")],
    root: Annotated[Path | None, typer.Option(help="Repository holding .porter/runs (default: this one).")] = None,
    gpu: Annotated[bool, typer.Option("--gpu/--no-gpu")] = True,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Re-verify every candidate of a recorded run on this machine, and compare with what was recorded.
    Exit 0 every candidate reproduced its record, 1 one did not, 2 bad input, 3 one could not run here."""
    from porter import services
    from porter.gate.tables import table
    from porter.gate.verdict import Status

    replayed = services.replay(run, _runs_root(root), gpu=gpu, seams=_seams(ctx))
    if as_json:
        _emit_json(replayed.as_data())
    else:
        typer.echo(f"replayed {replayed.run.name} on this machine")
        typer.echo(table(["#", "origin", "recorded", "now", "agree", "verdict"],
                         [[r.index, r.origin, r.recorded_word, r.verdict.status,
                           "not run" if r.outcome == Status.NOT_RUN else "same" if r.agrees else "DIFFERENT",
                           r.verdict.reason[:80]] for r in replayed.rows]))
    raise typer.Exit(replayed.exit_code)


@app.command()
def export(
    run_refs: Annotated[list[str], typer.Argument(metavar="RUN...", help="Runs to export (ids, prefixes or folders).")],
    format: Annotated[str, typer.Option("--format", help="Export format: sft (chat-format repair pairs, JSONL).")] = "sft",
    root: Annotated[Path | None, typer.Option(help="Repository holding .porter/runs (default: this one).")] = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write here instead of stdout.")] = None,
    include_unverified: Annotated[
        bool, typer.Option("--include-unverified",
                           help="Also pair with later candidates that did not pass on hardware (marked verified: false).")
    ] = False,
) -> None:
    """Export repair pairs (a failing candidate and its feedback -> a later candidate that passed on
    hardware) for fine-tuning, each labelled by the failure it repairs, its architectures and its
    workload; duplicates (by normalised kernel text) dropped. Says so on stderr for each run that
    yields none, and ends with a coverage and balance report on stderr. Exit 0, 2 bad input."""
    import json as _json

    from porter.agent.export import coverage, coverage_report, drop_duplicates
    from porter.agent.runs import find_run, no_pairs_reason, repair_pairs

    if format != "sft":
        raise InputError(f"--format: only 'sft' is supported (got {format!r})")
    if output is not None and output.exists():
        raise InputError(f"{output}: exists; choose another file")
    runs_root = _runs_root(root) / ".porter" / "runs"
    folders = list(dict.fromkeys(find_run(runs_root, ref) for ref in run_refs))
    found = []
    for folder in folders:
        pairs = list(repair_pairs(folder, include_unverified=include_unverified))
        if not pairs:
            typer.echo(f"porter: run {folder.name}: no repair pairs: "
                       f"{no_pairs_reason(folder, include_unverified=include_unverified)}", err=True)
        found += pairs
    kept, duplicates = drop_duplicates(found)
    lines = [_json.dumps(pair) for pair in kept]
    text = "\n".join(lines) + ("\n" if lines else "")
    if output is None:
        typer.echo(text, nl=False)
    else:
        output.write_text(text)
        typer.echo(f"wrote {len(lines)} repair pairs to {output}", err=True)
    typer.echo(coverage_report(coverage(kept, runs=len(folders), duplicates=duplicates)), err=True)


@app.command()
def ci(
    base: Annotated[str | None, typer.Option(help="Base revision (default: merge-base with the upstream main).")] = None,
    head: Annotated[str, typer.Option(help="Head revision.")] = "HEAD",
    trust_head: Annotated[bool, typer.Option(
        "--trust-head", help="Take specs, references and their Python from the head revision: the change's code runs "
                             "with the bot's rights. Only for repositories whose every author is trusted.")] = False,
    max_slowdown: Annotated[float, typer.Option(help="Fail a kernel slower than its base version by more than this.")] = 0.03,
    junit: Annotated[Path | None, typer.Option(help="Write JUnit XML here.")] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the outcome as JSON here.")] = None,
    summary: Annotated[Path | None, typer.Option(help="Append the markdown summary here (default: $GITHUB_STEP_SUMMARY).")] = None,
    annotations: Annotated[
        bool | None, typer.Option("--annotations/--no-annotations", help="GitHub ::error lines (default: on GitHub Actions).")
    ] = None,
    port_to: Annotated[str | None, typer.Option(help="Also port each changed kernel to this architecture.")] = None,
    model: Annotated[str | None, typer.Option(help="Model for --port-to (default: PORTER_MODEL; never the checkout's config).")] = None,
    api_base: Annotated[str | None, typer.Option(help="API base URL for --model (default: PORTER_API_BASE).")] = None,
    push: Annotated[str | None, typer.Option(metavar="REMOTE", help="Push the review branches of passing ports here.")] = None,
    gpu: Annotated[bool, typer.Option("--gpu/--no-gpu", help="Run kernels (off: assemble and check statically).")] = True,
    repo: Annotated[Path, typer.Option(help="The repository.")] = Path("."),
    allow_unchecked: Annotated[bool, typer.Option(
        "--allow-unchecked", help="A changed kernel with no trusted spec to check it against does not fail the bot.")] = False,
    allow_interface_change: Annotated[bool, typer.Option(
        "--allow-interface-change", help="A kernel whose own directives change its entry, launch or kernel sequence "
                                         "against the base revision is checked as it declares, not failed.")] = False,
    sanitize: Annotated[
        bool, typer.Option("--sanitize/--no-sanitize", help="Run memcheck, racecheck, initcheck and synccheck on each kernel.")
    ] = True,
) -> None:
    """Gate the kernels a change touches: check each against its base revision's spec and reference and time it
    against its base version. Nothing of the change's own Python runs unless --trust-head.
    Exit 0 all passed, 1 a kernel failed, slowed down, changed its interface or could not be checked,
    2 configuration error, 3 infrastructure (no GPU, no toolchain)."""
    from porter import services

    outcome = services.ci(repo, model=model, api_base=api_base, port_to=port_to, gpu=gpu, base=base, head=head,
                          spec_from="head" if trust_head else "base", max_slowdown=max_slowdown, junit=junit,
                          json_out=json_out, summary_path=summary, annotations=annotations, push=push, echo=typer.echo,
                          allow_unchecked=allow_unchecked, allow_interface_change=allow_interface_change,
                          sanitize=sanitize)
    raise typer.Exit(outcome.exit_code)


@app.command()
def bench(
    ctx: typer.Context,
    suite: Annotated[Path, typer.Argument(help="A folder of tasks (each a folder with task.toml).")] = Path("examples"),
    model: Annotated[list[str] | None, typer.Option("--model", help="Model to port with (repeatable); none: retarget only.")] = None,
    solutions: Annotated[bool, typer.Option(help="Check the tasks' shipped reference ports instead of porting.")] = False,
    api_base: Annotated[str | None, typer.Option(help="API base URL for local servers.")] = None,
    gpu: Annotated[bool, typer.Option("--gpu/--no-gpu", help="Run kernels (off: static checks only).")] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print rows and rates as JSON.")] = False,
    cluster: Annotated[str | None, typer.Option(metavar="ADDRESS", help=CLUSTER_HELP)] = None,
) -> None:
    """Port (or check the reference ports of) every task in a suite, the tasks spread over every GPU; one row per
    task and model, and suite rates. Exit 0 every row passed, 1 a row failed, 2 bad input, 3 a row not run."""
    import datetime as dt

    from porter import services
    from porter.bench.suite import exit_code, render_markdown

    benched = services.bench(suite, models=model or [None], solutions=solutions, api_base=api_base, gpu=gpu, cluster=cluster,
                             seams=_seams(ctx), on_row=None if as_json else lambda r: typer.echo(f"  {r.task} [{r.model}]: {r.status}", err=True))
    if as_json:
        _emit_json({"rows": benched.rows, "summary": benched.summary, "gpu": benched.gpu})
    else:
        header = f"porter bench {suite} ({'reference ports' if solutions else 'ports'}) on {benched.gpu}, {dt.date.today()}"
        typer.echo(render_markdown(benched.rows, benched.summary, header=header))
    raise typer.Exit(exit_code(benched.rows))


@app.command()
def worker(
    ctx: typer.Context,
    scheduler: Annotated[str, typer.Option(metavar="ADDRESS", help="The dask scheduler to join (tcp://HOST:8786).")],
    name: Annotated[str | None, typer.Option(help="Name prefix of the workers (default: the host name).")] = None,
) -> None:
    """Offer this machine's GPUs to a dask cluster: one worker per GPU, advertising every target its GPU
    runs (sm_90a=1 on an H200). Runs until interrupted. Workers run the kernels they are sent: see the
    README's security notes."""
    from porter import services

    services.serve_gpus(scheduler, name=name, echo=lambda line: typer.echo(line, err=True), seams=_seams(ctx))


@app.command("mcp")
def mcp_server(
    http: Annotated[bool, typer.Option("--http", help="Streamable HTTP on 127.0.0.1, with a bearer token (default: stdio).")] = False,
    port: Annotated[int, typer.Option(help="The HTTP port (with --http); the path is /mcp.")] = 8765,
    token_file: Annotated[Path | None, typer.Option(help="With --http: the bearer token's file, reused if it exists (mode "
                                                    "0600, yours), else written (default: a new token in "
                                                    "~/.local/state/porter/mcp-PORT.token).")] = None,
    root: Annotated[Path | None, typer.Option(help="The only folder tool calls may name files in (default: the "
                                              "repository holding the current folder).")] = None,
    model: Annotated[str | None, typer.Option(help="The model of every port (default: PORTER_MODEL, then "
                                              ".porter/config.toml); calls cannot choose another.")] = None,
    api_base: Annotated[str | None, typer.Option(help="The model's API base URL (local servers: vLLM, Ollama, ...).")] = None,
    max_rounds: Annotated[int | None, typer.Option(help="Model replies all ports of this server may use together.")] = None,
    max_tokens: Annotated[int | None, typer.Option(help="Tokens all ports of this server may use together.")] = None,
    max_usd: Annotated[float | None, typer.Option(help="US dollars all ports of this server may spend together.")] = None,
) -> None:
    """Serve porter's gate to coding agents over the Model Context Protocol: tools inspect, spec, check,
    profile, port, runs and replay; the architecture profiles and agent prompts as resources. Tool calls
    may name files inside --root only, and ports use the model chosen here. Register it with e.g.
    `claude mcp add porter -- porter mcp`. Needs the mcp extra (pip install -e '.[mcp]' in porter's source checkout)."""
    try:
        from porter.mcp.server import serve
    except ImportError as err:
        from porter.errors import EnvironmentProblem
        from porter.install import install_hint

        raise EnvironmentProblem(f"porter mcp needs the MCP SDK ({err}): {install_hint('mcp')}") from None
    from porter.mcp.shared import Limits

    if not 0 < port < 65536:
        raise InputError(f"--port: 1 to 65535 (got {port})")
    serve(http=http, port=port, limits=Limits(rounds=max_rounds, tokens=max_tokens, usd=max_usd), root=root,
          model=model, api_base=api_base, token_file=token_file)


@app.command("spec")
def spec_scaffold(
    kernel: Annotated[Path, typer.Argument(help="The PTX whose entry the spec describes.")],
    entry: Annotated[str | None, typer.Option(help="The .entry to describe (needed when there are several).")] = None,
    out: Annotated[Path | None, typer.Option(help="Where to write it (default: porter.toml beside the kernel).")] = None,
) -> None:
    """Write a first porter.toml from what the kernel's PTX (and Triton's metadata beside it) says; every
    guess goes in its todo list, which porter check and port refuse until it is empty. Never overwrites."""
    from porter.gate.scaffold import scaffold_file

    target = out or kernel.parent / "porter.toml"
    if target.exists():
        raise InputError(f"{target}: exists; porter spec never overwrites (choose another --out)")
    text, chosen = scaffold_file(kernel, entry)
    target.write_text(text)
    spec_option = "" if out is None else f" --spec {target}"
    typer.echo(f"wrote {target} for {chosen.name}: fill in every item of its todo list (the [reference] the "
               f"outputs are checked against among them), then `porter check {kernel}{spec_option}` checks the "
               f"kernel against that reference, and `porter port {kernel}{spec_option} --to ARCH` ports it")


def main(seams: Seams | None = None) -> None:
    """Console entry point: run the app, turning porter's errors into one line and an exit code.
    ``seams``: what the commands run on, porter's own unless a test passes doubles."""
    try:
        try:
            code = app(standalone_mode=False, obj=seams)  # returns the exit code of a typer.Exit in this mode
        except OSError as err:  # a path porter cannot read or write: one line naming it
            problem = file_problem(err)
            if problem is None:
                raise
            raise problem from err
    except PorterError as err:
        typer.echo(f"porter: error: {err}", err=True)
        sys.exit(err.exit_code)
    except typer.Exit as ex:
        sys.exit(ex.exit_code)
    except typer.Abort:
        typer.echo("porter: aborted", err=True)
        sys.exit(ExitCode.INTERRUPTED)
    except KeyboardInterrupt:
        typer.echo("porter: interrupted", err=True)
        sys.exit(ExitCode.INTERRUPTED)
    except Exception as err:  # a usage error from click (vendored by newer typer), or a bug in porter
        show, code = getattr(err, "show", None), getattr(err, "exit_code", None)
        if callable(show) and isinstance(code, int):
            show()
            sys.exit(code)
        if os.environ.get("PORTER_DEBUG"):
            raise
        said = " ".join(str(err).split())  # one line, whatever the exception's message holds
        typer.echo(f"porter: internal error: {type(err).__name__}: {said} (set PORTER_DEBUG=1 for the traceback)",
                   err=True)
        sys.exit(ExitCode.INTERNAL)
    sys.exit(code if isinstance(code, int) else ExitCode.OK)
