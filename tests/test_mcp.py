"""``porter mcp`` driven by the MCP SDK's own client: over stdio as a coding agent starts it (list
tools, inspect and check an example, a bad path, two calls at once, a port with progress), over
streamable HTTP on 127.0.0.1 with its bearer token, and in process with a GPU double, where the lock
around GPU work and the shared budget can be watched. What a caller cannot do (reach files outside
the root, redirect the model, read a file through errors) is tests/test_mcp_boundary.py."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import anyio
import pytest

mcp = pytest.importorskip("mcp", reason="the MCP SDK is not installed (pip install 'porter-kernels[mcp]')")

import httpx2  # noqa: E402
from mcp import Client, StdioServerParameters  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from port_doubles import OnlyGoodCubins, good_cubins, scripted_vector_add, vector_add_copy  # noqa: E402

from porter.agent.llm import Budget, SpendRecord  # noqa: E402
from porter.errors import EnvironmentProblem  # noqa: E402
from porter.gate.runner.protocol import Job, Reply  # noqa: E402
from porter.gate.verdict import Verdict  # noqa: E402
from porter.jsonable import from_jsonable  # noqa: E402
from porter.mcp.server import ModelChoice, build_server  # noqa: E402
from porter.mcp.shared import Allowance, Limits, Shared  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
VECTOR_ADD = ROOT / "examples" / "vector_add" / "kernel.ptx"
GEMM = ROOT / "examples" / "gemm_bt_tile"


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PORTER_MODEL", None)
    return env


def _stdio(cwd: Path = ROOT, *options: str, env: dict[str, str] | None = None) -> Client:
    return Client(StdioServerParameters(command=sys.executable, args=["-m", "porter", "mcp", *options],
                                        env=env or _env(), cwd=str(cwd)), read_timeout_seconds=300)


def test_an_agent_lists_the_tools_and_gets_a_verdict_over_stdio(toolchain):
    async def session() -> None:
        async with _stdio() as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert set(tools) == {"inspect", "spec", "check", "profile", "port", "runs", "replay"}
            assert {"native", "sanitize", "time_at", "seeds"} <= set(tools["check"].input_schema["properties"])
            assert {"max_rounds", "max_tokens", "max_usd", "max_minutes"} <= set(
                tools["port"].input_schema["properties"])
            # The model is the server's: a call cannot name one, nor where to send the key.
            assert not {"model", "api_base"} & set(tools["port"].input_schema["properties"])
            assert all(t.input_schema["additionalProperties"] is False for t in tools.values())

            inspected = await client.call_tool("inspect", {"kernel": str(VECTOR_ADD), "archs": ["sm_90a"]})
            assert [a["arch"] for a in inspected.structured_content["archs"]] == ["sm_90a"]
            assert "vector_add" in inspected.content[0].text

            checked = await client.call_tool("check", {"candidate": "examples/vector_add/kernel.ptx"})
            verdict = from_jsonable(Verdict, checked.structured_content)  # the Verdict, typed again
            # No GPU here: it assembled, and what needs the GPU is `not run`, with the reason.
            assert verdict.status == "not run" and verdict.gate("assemble").status == "passed"
            assert verdict.gate("equivalence").status == "not run" and verdict.gate("equivalence").summary
            assert checked.content[0].text.startswith("NOT RUN (exit 3): ")

            # porter's errors are tool results the model reads (isError), with porter's line and exit code.
            bad = await client.call_tool("check", {"candidate": "examples/nope.ptx"})
            assert bad.is_error and bad.structured_content == {
                "error": f"{ROOT / 'examples' / 'nope.ptx'}: no such file", "exit_code": 2}
            assert bad.content[0].text == bad.structured_content["error"]
            sizes = await client.call_tool("check", {"candidate": str(VECTOR_ADD), "time_at": [{"Q": 4}]})
            assert sizes.is_error and sizes.structured_content["exit_code"] == 2
            assert "'Q' is not a size symbol" in sizes.structured_content["error"]
            assert "Traceback" not in sizes.content[0].text

            # Two calls at once: both answered, each with its own Verdict.
            results: dict[str, Any] = {}

            async def call(name: str, args: dict[str, Any]) -> None:
                results[name] = await client.call_tool("check", args)

            async with anyio.create_task_group() as group:
                group.start_soon(call, "vector_add", {"candidate": str(VECTOR_ADD)})
                group.start_soon(call, "gemm", {"candidate": str(GEMM / "kernel_sm90a.ptx"), "native": True})
            assert results["vector_add"].structured_content["entry"] == "vector_add"
            assert results["gemm"].structured_content["entry"] == "gemm_bt_tile"
            assert {r.structured_content["status"] for r in results.values()} == {"not run"}

            resources = {str(r.uri) for r in (await client.list_resources()).resources}
            assert {"porter://profiles/sm_90a", "porter://agents/port"} <= resources
            profile = await client.read_resource("porter://profiles/sm_90a")
            assert "wgmma" in profile.contents[0].text

    anyio.run(session)


def test_a_port_over_stdio_sends_progress_and_ends_in_the_port_outcome(tmp_path):
    work = tmp_path / "gemm"
    work.mkdir()
    for name in ("kernel_sm80.ptx", "porter.toml", "ref.py", "scripted_session.toml"):
        (work / name).write_text((GEMM / name).read_text())

    async def session() -> None:
        progress: list[str] = []

        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            progress.append(message or "")

        async with _stdio(work, "--model", "replay:scripted_session.toml") as client:  # the model: the server's
            ported = await client.call_tool(
                "port", {"kernel": "kernel_sm80.ptx", "to": "sm_90a", "max_rounds": 3, "gpu": False},
                progress_callback=on_progress)
            result = ported.structured_content["result"]
            assert result["status"] == "not run on target hardware" and result["best"]["index"] == 3
            assert ported.content[0].text.startswith("EQUIVALENT IN EMULATION, NOT RUN ON TARGET HARDWARE: "
                                                     "candidate 3 assembles")
            assert any("candidate 1: failed" in m for m in progress) and any(m.startswith("done:") for m in progress)
            listed = await client.call_tool("runs", {})
            assert [r["id"] for r in listed.structured_content["runs"]] == [result["run_id"]]

    anyio.run(session)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _post(port: int, headers: dict[str, str]) -> tuple[int, dict[str, str]]:
    """A raw MCP initialize request; the HTTP status and headers of the answer."""
    body = (b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", '
            b'"capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}}')
    request = urllib.request.Request(f"http://127.0.0.1:{port}/mcp", data=body, method="POST", headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, dict(answer.headers)
    except urllib.error.HTTPError as refused:
        return refused.code, dict(refused.headers)


def test_streamable_http_on_localhost_takes_only_requests_with_its_token(tmp_path):
    port = _free_port()
    env = {**_env(), "XDG_STATE_HOME": str(tmp_path / "state")}
    proc = subprocess.Popen([sys.executable, "-m", "porter", "mcp", "--http", "--port", str(port)], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1][-2000:]
                time.sleep(0.2)
        token_file = tmp_path / "state" / "porter" / f"mcp-{port}.token"
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600  # the owner's only
        token = token_file.read_text().strip()
        assert len(token) >= 32

        for headers in ({}, {"Authorization": "Bearer wrong-token"}, {"Authorization": f"Basic {token}"},
                        {"Authorization": f"Bearer {token}x"}):
            status, answer = _post(port, headers)
            assert status == 401 and answer["www-authenticate"].startswith("Bearer"), headers
        assert _post(port, {"Authorization": f"Bearer {token}"})[0] == 200

        async def session() -> None:
            async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http, \
                    Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http)) as client:
                assert "check" in {t.name for t in (await client.list_tools()).tools}
                inspected = await client.call_tool("inspect", {"kernel": str(VECTOR_ADD), "assemble": False})
                assert inspected.structured_content["archs"]

        anyio.run(session)
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert err.decode().count(token) == 1  # said once, on stderr, for the owner


def test_a_token_file_others_can_read_is_refused(tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("x" * 40 + "\n")
    token_file.chmod(0o644)
    done = subprocess.run([sys.executable, "-m", "porter", "mcp", "--http", "--port", str(_free_port()),
                           "--token-file", str(token_file)], cwd=ROOT, env=_env(), capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip() == (f"porter: error: --token-file {token_file}: group or others may read or write it "
                                   "(mode 644); chmod 600 it")


# -- in process, on a GPU double ----------------------------------------------------------------

class Watched(OnlyGoodCubins):
    """The double, counting how many jobs run at once (each takes a little while)."""

    def __init__(self, good: set[bytes]) -> None:
        super().__init__(good)
        self.running = 0
        self.most = 0
        self.jobs = 0
        self._count = threading.Lock()

    def call(self, job: Job, timeout_s: float) -> Reply:
        with self._count:
            self.running += 1
            self.jobs += 1
            self.most = max(self.most, self.running)
        try:
            time.sleep(0.01)
            return super().call(job, timeout_s)
        finally:
            with self._count:
                self.running -= 1


def test_concurrent_checks_share_one_gpu_worker_one_job_at_a_time(tmp_path, toolchain):
    kernel = vector_add_copy(tmp_path / "va")
    watched = Watched(good_cubins(toolchain))
    made: list[Watched] = []
    shared = Shared(runner_factory=lambda: made.append(watched) or watched)
    fixed = tmp_path / "va" / "fixed.ptx"
    from port_doubles import fixed_kernel

    fixed.write_text(fixed_kernel())

    async def session() -> None:
        async with Client(build_server(shared, root=tmp_path)) as client:
            results = {}

            async def call(name: str, path: Path) -> None:
                results[name] = await client.call_tool("check", {"candidate": str(path), "arch": "sm_90"})

            async with anyio.create_task_group() as group:
                group.start_soon(call, "source", kernel)
                group.start_soon(call, "fixed", fixed)
            assert results["fixed"].structured_content["status"] == "passed"  # the double's one right kernel
            assert results["source"].structured_content["status"] == "failed"
            assert results["fixed"].content[0].text.startswith("PASSED (exit 0)")

    anyio.run(session)
    assert len(made) == 1 and watched.jobs > 20  # one worker for both calls, kept between them
    assert watched.most == 1  # never two jobs at once


def test_concurrent_ports_never_spend_more_than_the_server_was_given(tmp_path, toolchain, monkeypatch):
    kernel = vector_add_copy(tmp_path / "va")
    script = scripted_vector_add(tmp_path / "replies.toml")
    shared = Shared(runner_factory=lambda: Watched(good_cubins(toolchain)), limits=Limits(rounds=3))
    monkeypatch.chdir(tmp_path)  # the runs go under the server's folder

    async def session() -> list[dict[str, Any]]:
        async with Client(build_server(shared, root=tmp_path, model=ModelChoice(f"replay:{script}"))) as client:
            outcomes = []

            async def call() -> None:
                ported = await client.call_tool("port", {"kernel": str(kernel), "to": "sm_90", "max_rounds": 2})
                outcomes.append(ported.structured_content["result"])

            async with anyio.create_task_group() as group:
                group.start_soon(call)
                group.start_soon(call)
            return outcomes

    outcomes = anyio.run(session)
    used = sum(o["spend"]["rounds"] for o in outcomes)
    assert used <= 3 and sorted(o["status"] for o in outcomes) == ["failed", "passed"]
    assert shared.allowance.left()["rounds"] == 3 - used


def test_the_allowance_reserves_and_gives_back():
    allowance = Allowance(Limits(rounds=5, usd=1.0))
    first = allowance.reserve(Budget(max_rounds=4, max_usd=0.5))
    assert (first.max_rounds, first.max_usd) == (4, 0.5)
    second = allowance.reserve(Budget(max_rounds=4))  # no dollar limit asked: what is left
    assert (second.max_rounds, second.max_usd) == (1, 0.5)
    with pytest.raises(EnvironmentProblem, match=r"the server's budget is spent \(rounds, usd\)"):
        allowance.reserve(Budget(max_rounds=1))
    allowance.settle(first, SpendRecord(rounds=1, usd=0.25))
    assert allowance.left() == {"rounds": 3, "tokens": None, "usd": 0.25}
    unlimited = Allowance().reserve(Budget(max_rounds=None))
    assert unlimited.max_rounds is None


@pytest.mark.gpu
def test_check_over_mcp_on_the_gpu_passes_with_native_evidence():
    async def session() -> Verdict:
        async with _stdio() as client:
            checked = await client.call_tool("check", {"candidate": str(GEMM / "kernel_sm90a.ptx"), "native": True})
            assert checked.content[0].text.startswith("PASSED (exit 0): "), checked.content[0].text
            return from_jsonable(Verdict, checked.structured_content)

    verdict = anyio.run(session)
    assert verdict.status == "passed" and verdict.gate("native").status == "passed"
    assert verdict.native is not None and verdict.native.state == "executed" and "HGMMA" in verdict.native.summary
