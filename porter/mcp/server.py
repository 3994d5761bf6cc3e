"""``porter mcp``: porter's gate as tools for coding agents, over the Model Context Protocol.

Built on the official Python SDK (``mcp``, 2.x): :func:`build_server` makes an ``MCPServer`` with

- tools ``inspect``, ``spec``, ``check`` (native, sanitize, time-at, seeds), ``profile``, ``port``
  (a budget; progress notifications while it runs), ``runs`` and ``replay``. Each result is the
  typed value porter's CLI prints with ``--json`` (the Verdict for ``check``, through
  :func:`porter.jsonable.to_jsonable`) as structured content, plus a short text summary; each
  failure is a result too, with ``isError`` and ``{"error", "exit_code"}`` (:mod:`porter.mcp.results`);
- resources ``porter://profiles/<arch>`` (the architecture profiles) and ``porter://agents/<name>``
  (the agents' prompts, a repository's overrides included).

The server is a boundary: it runs as its owner, for a caller that is a model. So a call's paths
must lie in the server's root and its files are never quoted (:mod:`porter.mcp.workspace`), its
arguments are bounded and undeclared ones refused, and the model a port talks to, with the owner's
key, is fixed when the server starts (:class:`ModelChoice`): no argument of a call can send the key
elsewhere. Over HTTP a bearer token keeps out the machine's other processes (:mod:`porter.mcp.auth`).

Tool calls run in worker threads and share the GPU and the budget through
:class:`porter.mcp.shared.Shared`. :func:`serve` runs it over stdio or streamable HTTP on 127.0.0.1.
The SDK is imported here only: ``porter --help`` and every other command stay without it.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import anyio
import anyio.from_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resources import FunctionResource
from mcp_types import CallToolResult
from pydantic import Field

from porter.agent.llm import SpendRecord
from porter.errors import InputError
from porter.mcp.results import answer, strict_tool, tool_result
from porter.mcp.shared import Limits, Shared
from porter.mcp.workspace import Workspace

if TYPE_CHECKING:
    from porter.gate.verdict import Verdict

HOST = "127.0.0.1"
INSTRUCTIONS = (
    "porter checks PTX kernels on measured evidence. `check` assembles a candidate with ptxas, runs it "
    "on fresh random inputs over the spec's sweep against a reference, and times it: its Verdict says "
    "passed only for what was measured; on a machine without the GPU the runtime gates are `not run`. "
    "`inspect` tells which architectures a kernel can go to; `port` ports one with the model the server "
    "was started with; `spec` writes a first porter.toml for a kernel. Paths are the repository's "
    "(relative ones from its top); a failure is a result with isError, its `error` and `exit_code`."
)

# Bounds on what a call may ask: lengths, list sizes, ranges (a value outside is an error result).
PathText = Annotated[str, Field(min_length=1, max_length=4096)]
Name = Annotated[str, Field(min_length=1, max_length=256)]
Size = Annotated[int, Field(ge=1, le=2**40)]
Seed = Annotated[int, Field(ge=0, le=2**63 - 1)]
MAX_ARCHS = 16
MAX_SEEDS = 8
MAX_TIME_AT = 8
MAX_SIZES = 32  # size symbols in one time_at entry


@dataclass(frozen=True)
class ModelChoice:
    """The model every port of a server talks to, its endpoint, and where the choice came from:
    made when the server starts (``--model``, ``PORTER_MODEL``, the owner's ``.porter/config.toml``;
    ``--api-base``), never by a tool call. None: no model (the mechanical retarget only)."""

    name: str | None = None
    api_base: str | None = None
    where: str = "none"


def choose_model(model: str | None, api_base: str | None, *, root: Path, env: Mapping[str, str]) -> ModelChoice:
    """The server's :class:`ModelChoice`, resolved as ``porter port`` resolves it; a ``replay:FILE``
    script is made absolute, so it is the file the owner named at start whatever the call."""
    from porter.agent.model_choice import resolve_model

    name, base, where = resolve_model(model, env=env, config_path=root / ".porter" / "config.toml")
    if name is not None and name.startswith("replay:"):
        name = "replay:" + str(Path(name.removeprefix("replay:")).absolute())
    return ModelChoice(name, api_base or base, where)


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


def build_server(shared: Shared | None = None, *, root: Path | None = None,
                 model: ModelChoice | None = None) -> MCPServer:
    """porter's MCP server for the repository at ``root`` (default: the one holding the working
    folder); ``shared`` holds its GPU worker, GPU lock and budget (default: a new one); ``model``
    is what its ports use (default: none)."""
    from porter import __version__
    from porter.services import repo_root

    shared = shared or Shared()
    work = Workspace.at(root or repo_root(Path.cwd()))
    chosen = model or ModelChoice()

    async def inspect(kernel: PathText, archs: Annotated[list[Name], Field(max_length=MAX_ARCHS)] | None = None,
                      assemble: bool = True) -> CallToolResult:
        """Entries, params and architecture-specific features of a PTX kernel; for each architecture
        profile (or those in `archs`): assembles as is, needs a mechanical retarget, or cannot go there
        (with each offending instruction and line); resources and tensor-core SASS where it assembles."""
        from porter.ptx.inspection import inspect_file
        from porter.report.terminal import render_inspect

        def run() -> CallToolResult:
            path = work.path(kernel, "kernel")
            work.ptx(path)
            report = inspect_file(path, archs=list(dict.fromkeys(archs or ())) or None, assemble=assemble)
            return tool_result(report, render_inspect(report))

        return await answer(run)

    async def spec(kernel: PathText, entry: Name | None = None, write: bool = False) -> CallToolResult:
        """A first porter.toml for a kernel, from its signature, with a TODO on every guess. With
        `write`, it is written beside the kernel (never over an existing one)."""
        from porter.gate.scaffold import choose_entry, scaffold_spec

        def run() -> CallToolResult:
            path = work.path(kernel, "kernel")
            module = work.ptx(path)
            text = scaffold_spec(module, choose_entry(module, entry))
            target = path.parent / "porter.toml"
            if write:
                if target.exists() or target.is_symlink():  # a link could point out of the repository
                    raise InputError(f"{target}: exists; porter spec never overwrites")
                target.write_text(text)
            said = f"wrote {target}" if write else "not written (write=true writes it beside the kernel)"
            return tool_result({"path": str(target), "written": write, "text": text},
                               f"{said}; edit every TODO before checking against it\n\n{text}")

        return await answer(run)

    async def check(candidate: PathText, spec: PathText | None = None, arch: Name | None = None,
                    against: PathText | None = None, golden: PathText | None = None, native: bool = False,
                    sanitize: bool = False,
                    time_at: Annotated[list[Annotated[dict[Name, Size], Field(min_length=1, max_length=MAX_SIZES)]],
                                       Field(max_length=MAX_TIME_AT)] | None = None,
                    seeds: Annotated[list[Seed], Field(min_length=1, max_length=MAX_SEEDS)] | None = None,
                    timing: bool = True, timeout_s: Annotated[float, Field(gt=0, le=3600, allow_inf_nan=False)] = 60.0,
                    gpu: bool = True) -> CallToolResult:
        """The gate on one candidate PTX: interface, assemble (ptxas), equivalence over the spec's sweep
        under two fresh seeds against the reference (or the `against` source kernel, or `golden`
        outputs), timing against the source and the library (at `time_at` size sets, e.g.
        [{"M": 8192, "N": 8192}]); `native`: ncu measures whether the target's own tensor-core
        instructions executed; `sanitize`: compute-sanitizer's four tools. The result is the Verdict:
        passed only on measured evidence, `not run` (with the reason) for what could not run here."""
        from porter import services
        from porter.gate.check import CheckOptions

        def run() -> CallToolResult:
            if against is not None and golden is not None:
                raise InputError("give against or golden, not both")
            path = work.path(candidate, "candidate")
            target = services.arch_name(arch, "arch")
            work.ptx(path)
            loaded = work.spec_for(path, work.optional(spec, "spec"))
            source = work.optional(against, "against")
            if source is not None:
                work.ptx(source)
            recorded = work.optional(golden, "golden")
            if recorded is not None:
                work.golden(recorded)
            for sizes in time_at or ():
                loaded.timing_sizes(sizes)  # unknown symbols and bad sizes: one line, before any GPU work
            options = CheckOptions(arch=target, against=source, golden=recorded, seeds=tuple(dict.fromkeys(seeds or ())),
                                   timing=timing, case_timeout_s=timeout_s, native=native, sanitize=sanitize,
                                   time_at=tuple(dict(s) for s in time_at or ()))
            if not gpu:
                verdict = services.check(path, loaded, options, gpu=False)
            else:
                with shared.gpu_work():
                    verdict = services.check(path, loaded, options, runner=shared.runner())
            return tool_result(verdict, verdict_summary(verdict))

        return await answer(run)

    async def profile(kernel: PathText, spec: PathText | None = None, from_csv: PathText | None = None,
                      write: bool = False) -> CallToolResult:
        """The hot loop under Nsight Compute (or an ncu CSV export): duration, rooflines, occupancy,
        top stalls; with `write`, recorded in the spec's [profile] for the porting agent."""
        from porter import services

        def run() -> CallToolResult:
            path = work.path(kernel, "kernel")
            work.ptx(path)
            loaded = work.spec_for(path, work.optional(spec, "spec"))
            export = work.optional(from_csv, "from_csv")
            if export is not None:
                work.ncu_export(export)
            with shared.gpu_work():
                profiled = services.profile(path, loaded, from_csv=export, write=write)
            return tool_result(profiled, "\n".join(f"{k}: {v}" for k, v in profiled.facts.items()))

        return await answer(run)

    async def port(kernel: PathText, to: Name, ctx: Context, spec: PathText | None = None, agent: Name = "port",
                   max_rounds: Annotated[int, Field(ge=0, le=1000)] | None = None,
                   max_tokens: Annotated[int, Field(ge=0, le=10**9)] | None = None,
                   max_usd: Annotated[float, Field(ge=0, le=10_000, allow_inf_nan=False)] | None = None,
                   max_minutes: Annotated[float, Field(ge=0, le=24 * 60, allow_inf_nan=False)] | None = None,
                   require_native: bool | None = None, branch: bool = False, gpu: bool = True) -> CallToolResult:
        """Port a PTX hot loop to another architecture: the mechanical retarget, then the model the
        server was started with (porter mcp --model, PORTER_MODEL or .porter/config.toml; a call
        cannot choose another) proposes, porter verifies and feeds back, until a candidate passes or
        the budget (rounds, tokens, US dollars, minutes) ends; progress notifications while it runs.
        Every step is recorded under .porter/runs; `branch` makes the review branch of a port that
        passed. The result is the port's outcome with every candidate's Verdict."""
        from porter import services
        from porter.agent.llm import Budget
        from porter.report.progress import progress_lines

        sent = 0

        def notify(kind: str, **data: Any) -> None:
            """Each line a terminal would print, as a progress notification."""
            nonlocal sent
            for line in progress_lines(kind, data):
                sent += 1
                with contextlib.suppress(Exception):  # a client that went away does not stop the port
                    anyio.from_thread.run(ctx.report_progress, sent, None, line)

        def run() -> CallToolResult:
            path = work.path(kernel, "kernel")
            work.ptx(path)
            loaded = work.spec_for(path, work.optional(spec, "spec"))
            granted = shared.allowance.reserve(Budget(
                max_rounds=max_rounds, max_tokens=max_tokens, max_usd=max_usd,
                max_wall_s=max_minutes * 60 if max_minutes is not None else None))
            spent = SpendRecord()
            try:
                ported = services.port(path, to, spec=loaded.path, model=chosen.name, api_base=chosen.api_base,
                                       model_fixed=True, agent=agent, budget=granted, require_native=require_native,
                                       branch=branch, gpu=gpu, on_event=notify,
                                       runner=shared.runner() if gpu else None, gpu_guard=shared.gpu_work)
                spent = ported.result.spend
            finally:
                shared.allowance.settle(granted, spent)
            return tool_result(ported, _port_summary(ported.result))

        return await answer(run)

    async def runs(root: PathText | None = None) -> CallToolResult:
        """The port runs recorded under a repository's .porter/runs (default: the server's; another
        must lie inside it)."""
        from porter.agent.runs import list_runs

        def run() -> CallToolResult:
            top = work.optional(root, "root") or work.root
            found = list_runs(top / ".porter" / "runs")
            lines = [f"{r.id}: {r.status} ({r.candidates} candidates, {r.model})" for r in found]
            return tool_result({"runs": found}, "\n".join(lines) or "no runs recorded")

        return await answer(run)

    async def replay(run: PathText, root: PathText | None = None, gpu: bool = True) -> CallToolResult:
        """Re-verify every candidate of a recorded run (its id, a unique prefix of it, or its folder)
        on this machine and compare with the record."""
        from porter import services

        def replayed() -> CallToolResult:
            top = work.optional(root, "root") or work.root
            folder = work.run(run, top / ".porter" / "runs")
            work.spec_file(services.recorded_spec(work.run_config(folder), top))
            if not gpu:
                done = services.replay(str(folder), top, gpu=False)
            else:
                with shared.gpu_work():
                    done = services.replay(str(folder), top, runner=shared.runner())
            lines = [f"candidate {r.index} ({r.origin}): recorded {r.recorded_word}, now {r.verdict.status}"
                     f"{'' if r.agrees else ' DIFFERENT'}" for r in done.rows]
            return tool_result(done.as_data(), "\n".join(lines))

        return await answer(replayed)

    tools = [strict_tool(fn, fn.__name__) for fn in (inspect, spec, check, profile, port, runs, replay)]
    server = MCPServer("porter", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING", tools=tools)
    _add_resources(server, work.root)
    return server


def _port_summary(result: Any) -> str:
    best = f"best: candidate {result.best.index} ({result.best.path})" if result.best is not None else "no candidate"
    return (f"{result.outcome.upper()}: {result.stop_reason}\n{best}\nrun {result.run_id}; "
            f"spent {result.spend.line()}")


def _add_resources(server: MCPServer, root: Path) -> None:
    from porter._data import data_dir
    from porter.agent.prompts import list_agents

    for path in sorted(data_dir("profiles").glob("*.toml")):
        server.add_resource(FunctionResource(
            uri=f"porter://profiles/{path.stem}", name=f"profile {path.stem}", mime_type="application/toml",
            description=f"porter's architecture profile {path.stem}: accepted and rejected features, "
                        "signature SASS, peaks", fn=path.read_text))
    for agent in list_agents(root):
        server.add_resource(FunctionResource(
            uri=f"porter://agents/{agent.name}", name=f"agent {agent.name}", mime_type="text/markdown",
            description=agent.description, fn=agent.path.read_text))


def serve(*, http: bool = False, port: int = 8765, limits: Limits | None = None, root: Path | None = None,
          model: str | None = None, api_base: str | None = None, token_file: Path | None = None) -> None:
    """Serve until the client goes away (stdio) or Ctrl-C (HTTP, on 127.0.0.1:``port``, path /mcp,
    with a bearer token: :mod:`porter.mcp.auth`)."""
    from porter.mcp.auth import default_token_file, serve_http, server_token
    from porter.services import repo_root

    if token_file is not None and not http:
        raise InputError("--token-file: only with --http (stdio needs no token: its client started the server)")
    work = Workspace.at(root or repo_root(Path.cwd()))
    chosen = choose_model(model, api_base, root=work.root, env=os.environ)
    shared = Shared(limits=limits)
    server = build_server(shared, root=work.root, model=chosen)
    try:
        if http:
            token = (server_token(token_file.absolute(), reuse=True) if token_file
                     else server_token(default_token_file(port), reuse=False))
            header = (f"'Authorization: Bearer {token.value}' (the token is also in {token.file}, readable by you "
                      f"only)" if token.made else f"'Authorization: Bearer <the token in {token.file}>'")
            print(f"porter mcp: http://{HOST}:{port}/mcp for {work.root}; clients send {header}", file=sys.stderr,
                  flush=True)
            anyio.run(lambda: serve_http(server, token.value, host=HOST, port=port))
        else:
            anyio.run(server.run_stdio_async)
    finally:
        shared.close()
