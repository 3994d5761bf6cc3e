"""``porter mcp``: porter's gate as tools for coding agents, over the Model Context Protocol.

Built on the official Python SDK (``mcp``, 2.x): :func:`build_server` makes an ``MCPServer`` with

- tools ``inspect``, ``spec``, ``check`` (native, sanitize, time-at, seeds), ``profile``, ``port``
  (a budget; progress notifications while it runs), ``runs`` and ``replay``. Each result is the
  typed value porter's CLI prints with ``--json`` (the Verdict for ``check``, through
  :func:`porter.jsonable.to_jsonable`) as structured content, plus a short text summary;
- resources ``porter://profiles/<arch>`` (the architecture profiles) and ``porter://agents/<name>``
  (the agents' prompts, a repository's overrides included).

A porter error is an MCP error whose message is porter's one line (``invalid params`` for bad
input, exit code 2; ``internal error`` for the environment, exit 3), with the exit code in its
data; anything else is one line too, never a traceback. Tool calls run in worker threads and share
the GPU and the budget through :class:`porter.mcp.shared.Shared`. :func:`serve` runs it over stdio
or streamable HTTP on 127.0.0.1. Paths are taken relative to the folder the server was started in.

The SDK is imported here only: ``porter --help`` and every other command stay without it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.from_thread
import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resources import FunctionResource
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS, CallToolResult, TextContent

from porter.errors import InputError, PorterError
from porter.jsonable import to_jsonable
from porter.mcp.shared import Limits, Shared

if TYPE_CHECKING:
    from porter.gate.verdict import Verdict

T = TypeVar("T")
HOST = "127.0.0.1"
INSTRUCTIONS = (
    "porter checks PTX kernels on measured evidence. `check` assembles a candidate with ptxas, runs it "
    "on fresh random inputs over the spec's sweep against a reference, and times it: its Verdict says "
    "passed only for what was measured; on a machine without the GPU the runtime gates are `not run`. "
    "`inspect` tells which architectures a kernel can go to; `port` ports one with a model; `spec` writes "
    "a first porter.toml for a kernel."
)


def _error(err: BaseException) -> MCPError:
    if isinstance(err, PorterError):
        code = INVALID_PARAMS if err.exit_code == 2 else INTERNAL_ERROR
        return MCPError(code=code, message=str(err), data={"exit_code": err.exit_code})
    one_line = " ".join(f"{type(err).__name__}: {err}".split())
    return MCPError(code=INTERNAL_ERROR, message=f"internal error: {one_line}", data={"exit_code": 3})


async def _run(work: Callable[[], T]) -> T:
    """``work`` in a worker thread (tool calls run side by side); its errors as MCP errors."""
    try:
        return await anyio.to_thread.run_sync(work)
    except MCPError:
        raise
    except Exception as err:
        raise _error(err) from None


def _result(data: Any, summary: str) -> CallToolResult:
    structured = to_jsonable(data)
    if not isinstance(structured, dict):
        structured = {"items": structured}
    return CallToolResult(content=[TextContent(type="text", text=summary)], structured_content=structured)


def _path(text: str | None) -> Path | None:
    return None if text is None else Path(text).expanduser()


def verdict_summary(verdict: Verdict) -> str:
    """A Verdict in a few lines: the status word and reason, then each gate."""
    from porter.gate.verdict import judge

    judged = judge(verdict)
    lines = [f"{verdict.status.upper()} (exit {judged.exit_code}): {verdict.reason}",
             f"{verdict.kernel} [{verdict.entry}] for {verdict.arch}" + (f" on {verdict.gpu}" if verdict.gpu else "")]
    lines += [f"  {g.name}: {g.status} - {g.summary}" for g in verdict.gates]
    if verdict.native is not None:
        lines.append(f"  native instructions: {verdict.native.state}")
    if verdict.seeds:
        lines.append(f"  seeds {','.join(map(str, verdict.seeds))} reproduce the inputs")
    return "\n".join(lines)


def build_server(shared: Shared | None = None, *, root: Path | None = None) -> MCPServer:
    """porter's MCP server; ``shared`` holds its GPU worker, GPU lock and budget (default: a new one)."""
    from porter import __version__

    shared = shared or Shared()
    server = MCPServer("porter", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING")

    async def inspect(kernel: str, archs: list[str] | None = None, assemble: bool = True) -> CallToolResult:
        """Entries, params and architecture-specific features of a PTX kernel; for each architecture
        profile (or those in `archs`): assembles as is, needs a mechanical retarget, or cannot go there
        (with each offending instruction and line); resources and tensor-core SASS where it assembles."""
        from porter.ptx.inspection import inspect_file
        from porter.report.terminal import render_inspect

        report = await _run(lambda: inspect_file(Path(kernel), archs=archs or None, assemble=assemble))
        return _result(report, render_inspect(report))

    async def spec(kernel: str, entry: str | None = None, write: bool = False) -> CallToolResult:
        """A first porter.toml for a kernel, from its signature, with a TODO on every guess. With
        `write`, it is written beside the kernel (never over an existing one)."""

        def work() -> dict[str, Any]:
            from porter.gate.scaffold import choose_entry, scaffold_spec
            from porter.ptx import read_ptx

            module = read_ptx(Path(kernel))
            text = scaffold_spec(module, choose_entry(module, entry))
            target = Path(kernel).parent / "porter.toml"
            if write:
                if target.exists():
                    raise InputError(f"{target}: exists; porter spec never overwrites")
                target.write_text(text)
            return {"path": str(target), "written": write, "text": text}

        made = await _run(work)
        said = f"wrote {made['path']}" if made["written"] else "not written (write=true writes it beside the kernel)"
        return _result(made, f"{said}; edit every TODO before checking against it\n\n{made['text']}")

    async def check(candidate: str, spec: str | None = None, arch: str | None = None, against: str | None = None,
                    golden: str | None = None, native: bool = False, sanitize: bool = False,
                    time_at: list[dict[str, int]] | None = None, seeds: list[int] | None = None,
                    timing: bool = True, timeout_s: float = 60.0, gpu: bool = True) -> CallToolResult:
        """The gate on one candidate PTX: interface, assemble (ptxas), equivalence over the spec's sweep
        under two fresh seeds against the reference (or the `against` source kernel, or `golden`
        outputs), timing against the source and the library (at `time_at` size sets, e.g.
        [{"M": 8192, "N": 8192}]); `native`: ncu measures whether the target's own tensor-core
        instructions executed; `sanitize`: compute-sanitizer's four tools. The result is the Verdict:
        passed only on measured evidence, `not run` (with the reason) for what could not run here."""
        from porter import services
        from porter.gate.check import CheckOptions

        def work() -> Verdict:
            if against is not None and golden is not None:
                raise InputError("give against or golden, not both")
            if seeds is not None and (not seeds or any(s < 0 for s in seeds)):
                raise InputError(f"seeds: one or more non-negative integers (got {seeds})")
            target = services.arch_name(arch, "arch")
            loaded = services.find_spec(Path(candidate), _path(spec))
            for sizes in time_at or ():
                loaded.timing_sizes(sizes)  # unknown symbols and bad sizes: one line, before any GPU work
            options = CheckOptions(arch=target, against=_path(against), golden=_path(golden),
                                   seeds=tuple(seeds or ()), timing=timing, case_timeout_s=timeout_s, native=native,
                                   sanitize=sanitize, time_at=tuple(dict(s) for s in time_at or ()))
            if not gpu:
                return services.check(Path(candidate), loaded, options, gpu=False)
            with shared.gpu_work():
                return services.check(Path(candidate), loaded, options, runner=shared.runner())

        verdict = await _run(work)
        return _result(verdict, verdict_summary(verdict))

    async def profile(kernel: str, spec: str | None = None, from_csv: str | None = None,
                      write: bool = False) -> CallToolResult:
        """The hot loop under Nsight Compute (or an ncu CSV export): duration, rooflines, occupancy,
        top stalls; with `write`, recorded in the spec's [profile] for the porting agent."""
        from porter import services

        def work() -> Any:
            loaded = services.find_spec(Path(kernel), _path(spec))
            with shared.gpu_work():
                return services.profile(Path(kernel), loaded, from_csv=_path(from_csv), write=write)

        profiled = await _run(work)
        return _result(profiled, "\n".join(f"{k}: {v}" for k, v in profiled.facts.items()))

    async def port(kernel: str, to: str, ctx: Context, spec: str | None = None, model: str | None = None,
                   api_base: str | None = None, agent: str = "port", max_rounds: int | None = None,
                   max_tokens: int | None = None, max_usd: float | None = None, max_minutes: float | None = None,
                   require_native: bool | None = None, branch: bool = False, gpu: bool = True) -> CallToolResult:
        """Port a PTX hot loop to another architecture: the mechanical retarget, then a model
        (litellm name, or replay:FILE) proposes, porter verifies and feeds back, until a candidate
        passes or the budget (rounds, tokens, US dollars, minutes) ends; progress notifications while
        it runs. Every step is recorded under .porter/runs; `branch` makes the review branch of a port
        that passed. The result is the port's outcome with every candidate's Verdict."""
        from porter import services
        from porter.agent.llm import Budget
        from porter.cli.progress import PlainProgress

        asked = Budget(max_rounds=max_rounds, max_tokens=max_tokens, max_usd=max_usd,
                       max_wall_s=max_minutes * 60 if max_minutes is not None else None)
        granted = await _run(lambda: shared.allowance.reserve(asked))
        sent = 0

        class Notify(PlainProgress):
            def _say(self, text: str) -> None:
                nonlocal sent
                sent += 1
                with contextlib.suppress(Exception):  # a client that went away does not stop the port
                    anyio.from_thread.run(ctx.report_progress, sent, None, text)

        spent: dict[str, Any] = {}

        def work() -> Any:
            ported = services.port(Path(kernel), to, spec=_path(spec), model=model, api_base=api_base, agent=agent,
                                   budget=granted, require_native=require_native, branch=branch, gpu=gpu,
                                   on_event=Notify(), runner=shared.runner() if gpu else None,
                                   gpu_guard=shared.gpu_work)
            spent.update(ported.result.spend)
            return ported

        try:
            ported = await _run(work)
        finally:
            shared.allowance.settle(granted, spent)
        result = ported.result
        best = f"best: candidate {result.best.index} ({result.best.path})" if result.best is not None else "no candidate"
        summary = (f"{result.status.upper()}: {result.stop_reason}\n{best}\nrun {result.run_id}; "
                   f"spent {result.spend['rounds']} rounds, "
                   f"{result.spend['prompt_tokens'] + result.spend['completion_tokens']} tokens, "
                   f"${result.spend['usd']:.4f}")
        return _result(ported, summary)

    async def runs(root: str | None = None) -> CallToolResult:
        """The port runs recorded under the repository's .porter/runs (default: the server's folder's)."""
        from porter.agent.runs import list_runs
        from porter.services import repo_root

        def work() -> list[Any]:
            top = _path(root) or repo_root(Path.cwd())
            return list_runs(top / ".porter" / "runs")

        found = await _run(work)
        lines = [f"{r.id}: {r.status} ({r.candidates} candidates, {r.model})" for r in found]
        return _result({"runs": found}, "\n".join(lines) or "no runs recorded")

    async def replay(run: str, root: str | None = None, gpu: bool = True) -> CallToolResult:
        """Re-verify every candidate of a recorded run on this machine and compare with the record."""
        from porter import services

        def work() -> Any:
            top = _path(root) or services.repo_root(Path.cwd())
            if not gpu:
                return services.replay(run, top, gpu=False)
            with shared.gpu_work():
                return services.replay(run, top, runner=shared.runner())

        replayed = await _run(work)
        lines = [f"candidate {r.index} ({r.origin}): recorded {r.recorded}, now {r.verdict.status}"
                 f"{'' if r.agrees else ' DIFFERENT'}" for r in replayed.rows]
        rows = [{"index": r.index, "origin": r.origin, "recorded": r.recorded, "agrees": r.agrees,
                 "verdict": r.verdict} for r in replayed.rows]
        return _result({"run": replayed.run, "agrees": replayed.agrees, "rows": rows}, "\n".join(lines))

    for tool in (inspect, spec, check, profile, port, runs, replay):
        server.add_tool(tool, name=tool.__name__)
    _add_resources(server, root)
    return server


def _add_resources(server: MCPServer, root: Path | None) -> None:
    from porter._data import data_dir
    from porter.agent.prompts import list_agents

    for path in sorted(data_dir("profiles").glob("*.toml")):
        server.add_resource(FunctionResource(
            uri=f"porter://profiles/{path.stem}", name=f"profile {path.stem}", mime_type="application/toml",
            description=f"porter's architecture profile {path.stem}: accepted and rejected features, "
                        "signature SASS, peaks", fn=lambda path=path: path.read_text()))
    for agent in list_agents(root):
        server.add_resource(FunctionResource(
            uri=f"porter://agents/{agent.name}", name=f"agent {agent.name}", mime_type="text/markdown",
            description=agent.description, fn=lambda path=agent.path: path.read_text()))


def serve(*, http: bool = False, port: int = 8765, limits: Limits | None = None) -> None:
    """Serve until the client goes away (stdio) or Ctrl-C (HTTP, on 127.0.0.1:``port``, path /mcp)."""
    from porter.services import repo_root

    shared = Shared(limits=limits)
    server = build_server(shared, root=repo_root(Path.cwd()))
    try:
        if http:
            anyio.run(lambda: server.run_streamable_http_async(host=HOST, port=port))
        else:
            anyio.run(server.run_stdio_async)
    finally:
        shared.close()
