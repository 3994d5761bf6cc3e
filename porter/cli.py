"""The ``porter`` command line. Thin: parse options, call the core, render, map errors to exit codes.

Exit codes: 0 passed / ok, 1 the kernel failed the gate, 2 bad input or usage, 3 environment
(no toolchain, no GPU) or an internal error. Heavy modules are imported inside each command so
that ``porter --help`` stays fast.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from porter.errors import PorterError

app = typer.Typer(
    name="porter",
    help="Port PTX hot loops across NVIDIA GPU generations, verified on measured evidence.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


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
    """Entries, params, features used, and for each architecture: can it go there, and what it costs."""
    from porter.inspect import inspect_file
    from porter.report import render_inspect

    report = inspect_file(kernel, archs=arch or None, assemble=not no_assemble)
    if as_json:
        _emit_json(report)
    else:
        typer.echo(render_inspect(report))


@app.command()
def doctor(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")] = False,
) -> None:
    """Toolchain paths and versions, GPU, driver and CuPy; how to install what is missing."""
    from porter.doctor import diagnose
    from porter.report import render_doctor

    report = diagnose()
    if as_json:
        _emit_json(report)
    else:
        typer.echo(render_doctor(report))
    if not report.ok:
        raise typer.Exit(3)


def _find_spec(kernel: Path, spec: Path | None):
    from porter.spec import load_spec

    path = spec if spec is not None else kernel.parent / "porter.toml"
    if spec is None and not path.is_file():
        from porter.errors import InputError

        raise InputError(f"{kernel}: no spec (porter.toml beside the kernel); give one with --spec")
    return load_spec(path)


def _seeds(text: str) -> tuple[int, ...]:
    from porter.errors import InputError

    try:
        seeds = tuple(int(s) for s in text.split(",") if s.strip())
    except ValueError:
        raise InputError(f"--seeds: expected comma-separated integers, got {text!r}") from None
    if not seeds:
        raise InputError("--seeds: give at least one seed")
    return seeds


EXIT_FOR_STATUS = {"passed": 0, "failed": 1, "not run": 3, "error": 3}


@app.command()
def check(
    candidate: Annotated[Path, typer.Argument(help="Candidate PTX file.")],
    spec: Annotated[Path | None, typer.Option(help="Hot-loop spec (default: porter.toml beside the kernel).")] = None,
    arch: Annotated[str | None, typer.Option(help="Assemble for this target (default: the PTX's .target).")] = None,
    against: Annotated[
        Path | None, typer.Option(help="Source kernel: the reference (instead of the spec's) and a speed baseline.")
    ] = None,
    golden: Annotated[Path | None, typer.Option(help="Golden outputs recorded by `porter record`.")] = None,
    seeds: Annotated[str, typer.Option(help="Comma-separated seeds; each size set runs once per seed.")] = "0,1",
    timing: Annotated[bool, typer.Option("--timing/--no-timing", help="Time the kernel after it passes.")] = True,
    timeout: Annotated[float, typer.Option(help="Seconds one case may take before the kernel counts as hung.")] = 60.0,
    gpu: Annotated[bool, typer.Option("--gpu/--no-gpu", help="Use the GPU (off: static checks only).")] = True,
    native: Annotated[
        bool, typer.Option("--native", help="Profile one case with ncu: were the target's own instructions executed?")
    ] = False,
    sanitize: Annotated[
        bool, typer.Option("--sanitize", help="Run memcheck, racecheck, initcheck and synccheck on the smallest case.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the verdict as JSON.")] = False,
) -> None:
    """Assemble a candidate, prove it equivalent over the sweep, and time it. Exit 0 passed, 1 failed,
    2 bad input, 3 not run / environment."""
    from porter.errors import InputError
    from porter.gate import CheckOptions, run_check
    from porter.report import render_verdict
    from porter.runner import Runner
    from porter.toolchain import find_toolchain

    if against is not None and golden is not None:
        raise InputError("give --against or --golden, not both")
    loaded = _find_spec(candidate, spec)
    toolchain = find_toolchain()
    toolchain.require("ptxas")
    options = CheckOptions(arch=arch, against=against, golden=golden, seeds=_seeds(seeds), timing=timing,
                           case_timeout_s=timeout, native=native, sanitize=sanitize)
    runner = Runner() if gpu else None
    try:
        verdict = run_check(candidate, loaded, options, toolchain=toolchain, runner=runner)
    finally:
        if runner is not None:
            runner.close()
    if as_json:
        _emit_json(verdict)
    else:
        typer.echo(render_verdict(verdict))
    raise typer.Exit(EXIT_FOR_STATUS[verdict.status])


@app.command()
def record(
    source: Annotated[Path, typer.Argument(help="Source PTX whose outputs become the golden reference.")],
    out: Annotated[Path, typer.Option(help="Folder to write the golden outputs to.")],
    spec: Annotated[Path | None, typer.Option(help="Hot-loop spec (default: porter.toml beside the kernel).")] = None,
    seeds: Annotated[str, typer.Option(help="Comma-separated seeds.")] = "0,1",
    force: Annotated[bool, typer.Option(help="Replace golden outputs already in --out.")] = False,
) -> None:
    """Save the source kernel's outputs for the whole sweep, to check a port later on other hardware."""
    from porter.errors import EnvironmentProblem
    from porter.gate import runnable_cubin
    from porter.golden import record as record_golden
    from porter.inspect import read_ptx
    from porter.runner import Runner, WorkerFault
    from porter.toolchain import find_toolchain

    loaded = _find_spec(source, spec)
    module = read_ptx(source)
    toolchain = find_toolchain()
    toolchain.require("ptxas")
    with Runner() as runner:
        try:
            device = runner.start()
        except WorkerFault as fault:
            raise EnvironmentProblem(f"porter record needs a GPU: {fault}") from fault
        cubin, note = runnable_cubin(module, None, device, toolchain, source.name)
        if cubin is None:
            raise EnvironmentProblem(f"{source}: {note}")
        manifest = record_golden(source, loaded, out, seeds=_seeds(seeds), runner=runner, cubin=cubin,
                                 device=device.describe(), force=force)
    typer.echo(f"recorded {len(manifest['cases'])} cases of {source} on {manifest['gpu']} into {out}")


@app.command()
def profile(
    kernel: Annotated[Path, typer.Argument(help="The hot loop's PTX.")],
    spec: Annotated[Path | None, typer.Option(help="Hot-loop spec (default: porter.toml beside the kernel).")] = None,
    from_csv: Annotated[
        Path | None, typer.Option("--from-csv", help="Import an `ncu --csv --page details` export instead of running ncu.")
    ] = None,
    write: Annotated[bool, typer.Option("--write/--dry-run", help="Write the facts into the spec's [profile].")] = True,
) -> None:
    """Profile the hot loop under Nsight Compute and record where it spends its time in the spec."""
    from porter.arch import get_profile
    from porter.errors import EnvironmentProblem
    from porter.gate import runnable_cubin
    from porter.golden import spec_path
    from porter.hotprofile import import_details, profile_kernel, stamp, summarise, write_profile
    from porter.inspect import read_ptx
    from porter.profiler import LaunchJob
    from porter.runner import Runner, WorkerFault
    from porter.toolchain import find_toolchain

    loaded = _find_spec(kernel, spec)
    sizes = loaded.default_sizes()
    if from_csv is not None:
        metrics = import_details(from_csv)
        gpu, tool = "imported", f"ncu export {from_csv.name}"
        arch = read_ptx(kernel).arch
    else:
        module = read_ptx(kernel)
        toolchain = find_toolchain()
        toolchain.require("ptxas")
        with Runner() as runner:
            try:
                device = runner.start()
            except WorkerFault as fault:
                raise EnvironmentProblem(f"porter profile needs a GPU: {fault}") from fault
        cubin, note = runnable_cubin(module, None, device, toolchain, kernel.name)
        if cubin is None:
            raise EnvironmentProblem(f"{kernel}: {note}")
        run = profile_kernel(LaunchJob(cubin, loaded.entry, spec_path(loaded), sizes))
        if not run.ok:
            raise EnvironmentProblem(f"ncu: {run.reason}")
        metrics, gpu, tool, arch = run.metrics, device.name, "ncu", device.arch
    tflops, tbps, part = get_profile(arch).peak_for(gpu)
    facts = {**stamp(gpu, tool), **summarise(metrics, flops=loaded.flops(sizes), nbytes=loaded.bytes(sizes),
                                             peak_tflops=tflops, peak_tbps=tbps)}
    facts["sizes"] = ", ".join(f"{k}={v}" for k, v in sizes.items())
    for key, value in facts.items():
        typer.echo(f"{key:>26}: {value}")
    if write:
        write_profile(spec_path(loaded), facts)
        typer.echo(f"wrote [profile] into {spec_path(loaded)} (roofline: {part})")


def main() -> None:
    """Console entry point: run the app, turning porter's errors into one line and an exit code."""
    try:
        code = app(standalone_mode=False)  # returns the exit code of a typer.Exit in this mode
    except PorterError as err:
        typer.echo(f"porter: error: {err}", err=True)
        sys.exit(err.exit_code)
    except typer.Exit as ex:
        sys.exit(ex.exit_code)
    except typer.Abort:
        typer.echo("porter: aborted", err=True)
        sys.exit(130)
    except KeyboardInterrupt:
        typer.echo("porter: interrupted", err=True)
        sys.exit(130)
    except Exception as err:  # a usage error from click (vendored by newer typer), or a bug in porter
        if callable(getattr(err, "show", None)) and isinstance(getattr(err, "exit_code", None), int):
            err.show()
            sys.exit(err.exit_code)
        if os.environ.get("PORTER_DEBUG"):
            raise
        typer.echo(
            f"porter: internal error: {type(err).__name__}: {err} (set PORTER_DEBUG=1 for the traceback)",
            err=True,
        )
        sys.exit(3)
    sys.exit(code if isinstance(code, int) else 0)
