"""``porter mcp`` as a boundary, attacked through the real MCP SDK client: a caller that names
another model endpoint (a real local HTTP server standing in for a provider, which logs what it
gets), files outside the root and secrets inside it, a spec whose Python lies outside the root
(imported by the simulated GPU when it is allowed), out-of-range arguments; and the token file."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp", reason="the MCP SDK is not installed (pip install 'porter-kernels[mcp]')")

from mcp import Client, StdioServerParameters
from mcp_types import CallToolResult
from openai_stub import OpenAIStub, chat
from port_doubles import vector_add_copy

from porter.errors import InputError
from porter.gate.runner.fake import FakeGpu
from porter.mcp.auth import read_token, server_token
from porter.mcp.server import build_server
from porter.mcp.shared import Shared

ROOT = Path(__file__).resolve().parent.parent
GEMM = ROOT / "examples" / "gemm_bt_tile"
SECRET = "sk_SECRET_MARKER_7f3a9c"  # one PTX token: a parser would quote it whole


def _said(result: CallToolResult) -> str:
    """Everything a result carries back to the caller, as one string."""
    return json.dumps([c.model_dump() for c in result.content]) + json.dumps(result.structured_content)


def _refused(result: CallToolResult, exit_code: int = 2) -> str:
    assert result.is_error, _said(result)
    assert result.structured_content["exit_code"] == exit_code
    assert result.content[0].text == result.structured_content["error"]
    return result.structured_content["error"]


def _calls(server: Any, calls: list[tuple[str, dict[str, Any]]]) -> list[CallToolResult]:
    async def session() -> list[CallToolResult]:
        async with Client(server) as client:
            return [await client.call_tool(name, args) for name, args in calls]

    return anyio.run(session)


# -- the model and the key ----------------------------------------------------------------------

def test_a_port_sends_the_key_only_to_the_endpoint_the_owner_started_the_server_with(tmp_path):
    work = tmp_path / "gemm"
    work.mkdir()
    for name in ("kernel_sm80.ptx", "porter.toml", "ref.py"):
        (work / name).write_text((GEMM / name).read_text())
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENAI_API_KEY": "sk-test-secret"}
    env.pop("PORTER_MODEL", None)
    env.pop("PORTER_API_BASE", None)

    with OpenAIStub([chat("no kernel in this reply")] * 4) as owners, OpenAIStub([chat("thanks")] * 4) as callers:
        server = StdioServerParameters(command=sys.executable, cwd=str(work), env=env, args=[
            "-m", "porter", "mcp", "--model", "openai/test-model", "--api-base", owners.api_base])

        async def session() -> tuple[CallToolResult, ...]:
            async with Client(server, read_timeout_seconds=300) as client:
                redirected = await client.call_tool("port", {
                    "kernel": "kernel_sm80.ptx", "to": "sm_90a", "gpu": False, "max_rounds": 1,
                    "model": "openai/test-model", "api_base": callers.api_base})
                scripted = await client.call_tool("port", {
                    "kernel": "kernel_sm80.ptx", "to": "sm_90a", "gpu": False, "max_rounds": 1,
                    "model": "replay:/dev/null"})
                owned = await client.call_tool("port", {"kernel": "kernel_sm80.ptx", "to": "sm_90a", "gpu": False,
                                                        "max_rounds": 1})
                return redirected, scripted, owned

        redirected, scripted, owned = anyio.run(session)

    assert _refused(redirected) == ("port: model: not an argument of port; api_base: not an argument of port")
    assert _refused(scripted) == "port: model: not an argument of port"
    assert callers.received == []  # the caller's endpoint never heard from the server
    assert not owned.is_error, _said(owned)
    assert owned.structured_content["result"]["model"] == "openai/test-model"
    assert len(owners.received) == 1  # the owner's endpoint, with the owner's key
    assert owners.received[0].headers["authorization"] == "Bearer sk-test-secret"


# -- files: inside the root only, never quoted --------------------------------------------------

@pytest.fixture
def repo(tmp_path: Path) -> dict[str, Path]:
    """A root holding vector_add and secrets that are not kernels, and a folder outside it."""
    root = tmp_path / "repo"
    kernel = vector_add_copy(root / "va")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(f"TOKEN {SECRET}\n")
    (outside / "kernel.ptx").write_text(kernel.read_text())
    (root / ".env").write_text(f"OPENAI_API_KEY={SECRET}\n")
    (root / "token.txt").write_text(f"{SECRET}\n")
    (root / "secrets.toml").write_text(f'{SECRET} = "{SECRET}"\n')  # TOML, not a spec
    (root / "half.ptx").write_text(f".version 8.0\n.target sm_90\n.address_size 64\n{SECRET} {SECRET};\n")
    (root / "app").mkdir()  # some other tool's config.json: named as a run, porter reads it as a run record
    (root / "app" / "config.json").write_text(json.dumps({"kernel": [SECRET], "spec": "porter.toml"}))
    (root / "link.ptx").symlink_to(outside / "secret.txt")
    (root / "linked").symlink_to(outside)
    return {"root": root, "kernel": kernel, "outside": outside}


def test_files_outside_the_root_are_refused_and_files_inside_never_quoted(repo):
    root, kernel, outside = repo["root"], str(repo["kernel"]), repo["outside"]
    secret_outside = str(outside / "secret.txt")
    named_outside = [
        ("inspect", {"kernel": secret_outside}),
        ("inspect", {"kernel": "va/../../outside/secret.txt"}),
        ("inspect", {"kernel": "link.ptx"}),  # a symlink out of the root
        ("inspect", {"kernel": "linked/kernel.ptx"}),
        ("spec", {"kernel": str(outside / "kernel.ptx"), "write": True}),
        ("check", {"candidate": secret_outside}),
        ("check", {"candidate": kernel, "spec": secret_outside}),
        ("check", {"candidate": kernel, "against": secret_outside}),
        ("check", {"candidate": kernel, "golden": str(outside)}),
        ("profile", {"kernel": kernel, "from_csv": secret_outside}),
        ("port", {"kernel": secret_outside, "to": "sm_90"}),
        ("runs", {"root": str(outside)}),
        ("replay", {"run": str(outside)}),
    ]
    not_kernels = [
        ("inspect", {"kernel": ".env"}),
        ("inspect", {"kernel": "half.ptx"}),
        ("inspect", {"kernel": "token.txt"}),
        ("spec", {"kernel": ".env"}),
        ("check", {"candidate": ".env"}),
        ("check", {"candidate": kernel, "spec": ".env"}),
        ("check", {"candidate": kernel, "spec": "secrets.toml"}),
        ("check", {"candidate": kernel, "spec": "token.txt"}),
        ("check", {"candidate": kernel, "against": "half.ptx"}),
        ("check", {"candidate": kernel, "golden": "va"}),
        ("profile", {"kernel": kernel, "from_csv": ".env"}),
        ("port", {"kernel": ".env", "to": "sm_90"}),
        ("replay", {"run": "./app", "gpu": False}),
    ]
    results = _calls(build_server(root=root), named_outside + not_kernels)
    for (name, args), result in zip(named_outside + not_kernels, results, strict=True):
        error = _refused(result)
        assert SECRET not in _said(result), (name, args, error)
    for (_, args), result in zip(named_outside, results[:len(named_outside)], strict=True):
        assert "outside the repository porter mcp serves" in result.structured_content["error"], args
    said = [r.structured_content["error"] for r in results[len(named_outside):]]
    assert said[0] == f"{root / '.env'}:1: expected a PTX directive"  # the file, the line, the kind of problem
    assert said[1] == f"{root / 'half.ptx'}:4: expected a PTX directive"
    assert said[2] == f"{root / 'token.txt'}:1: expected a PTX directive"
    assert said[5] == ".env: TOML syntax error at line 1, column 16"
    assert said[6].startswith("secrets.toml: not a porter spec porter can load")
    assert said[-1] == f"{root / 'app' / 'config.json'}: unreadable run record"
    assert not (outside / "porter.toml").exists()  # spec write=true wrote nothing outside


def test_the_cli_still_quotes_a_file_to_its_owner(repo):
    """The owner's terminal keeps porter's full message: the content-free wording is MCP's only."""
    from porter.ptx import read_ptx

    with pytest.raises(InputError, match=f"expected a PTX directive, got '{SECRET}'"):
        read_ptx(repo["root"] / "token.txt")


def test_spec_write_never_follows_a_link_out_of_the_root(repo):
    folder = repo["kernel"].parent
    (folder / "porter.toml").unlink()
    (folder / "porter.toml").symlink_to(repo["outside"] / "planted.toml")  # dangling: exists() is False
    [result] = _calls(build_server(root=repo["root"]), [("spec", {"kernel": str(repo["kernel"]), "write": True})])
    assert _refused(result).endswith("porter.toml: exists; porter spec never overwrites")
    assert not (repo["outside"] / "planted.toml").exists()


def _importing_reference(folder: Path, marker: Path) -> None:
    """vector_add's ref.py in ``folder``, which leaves ``marker`` when it is imported."""
    ref = folder / "ref.py"
    ref.write_text((ROOT / "examples" / "vector_add" / "ref.py").read_text()
                   + f"\nfrom pathlib import Path as _Path\n_Path({str(marker)!r}).write_text('imported')\n")


def test_a_check_imports_only_python_that_lies_in_the_root(repo, tmp_path):
    root, kernel, outside = repo["root"], repo["kernel"], repo["outside"]
    for folder in (kernel.parent, outside):
        (folder / "porter.toml").write_text((kernel.parent / "porter.toml").read_text())
    _importing_reference(kernel.parent, inside_marker := tmp_path / "inside-imported")
    _importing_reference(outside, outside_marker := tmp_path / "outside-imported")
    (root / "va" / "points_out.toml").write_text(
        (kernel.parent / "porter.toml").read_text().replace('"ref.py:', '"../../outside/ref.py:'))
    assert "../../outside/ref.py:" in (root / "va" / "points_out.toml").read_text()
    # A git repository around the root: the nearest porter.toml above a kernel may lie above the root.
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "porter.toml").write_text((kernel.parent / "porter.toml").read_text())
    (tmp_path / "ref.py").write_text((outside / "ref.py").read_text())
    (root / "bare").mkdir()
    (root / "bare" / "kernel.ptx").write_text(kernel.read_text())

    shared = Shared(runner_factory=lambda: FakeGpu().runner())  # a simulated GPU that imports the reference
    calls = [("check", {"candidate": str(kernel), "spec": str(outside / "porter.toml"), "timing": False}),
             ("check", {"candidate": str(kernel), "spec": "va/points_out.toml", "timing": False}),
             ("check", {"candidate": "bare/kernel.ptx", "timing": False}),
             ("check", {"candidate": str(kernel), "timing": False})]
    spec_outside, reference_outside, found_above, inside = _calls(build_server(shared, root=root), calls)

    assert "outside the repository porter mcp serves" in _refused(spec_outside)
    assert _refused(reference_outside).startswith("points_out.toml: a file it names: outside the repository")
    assert _refused(found_above).startswith(f"the spec for kernel.ptx ({tmp_path / 'porter.toml'}): outside")
    assert not outside_marker.exists()  # the outside ref.py was never imported
    # The same check with the spec inside the root imports its reference: the marker would show an import.
    assert not inside.is_error and inside.structured_content["status"] == "passed", _said(inside)
    assert inside_marker.exists()


# -- arguments and failures ---------------------------------------------------------------------

def test_arguments_are_bounded_and_every_failure_is_an_error_result(repo, monkeypatch):
    kernel = str(repo["kernel"])
    calls = [
        ("port", {"kernel": kernel, "to": "sm_90", "max_rounds": -1}),
        ("port", {"kernel": kernel, "to": "sm_90", "max_usd": -0.5}),
        ("check", {"candidate": kernel, "timeout_s": 0}),
        ("check", {"candidate": kernel, "seeds": list(range(9))}),
        ("check", {"candidate": kernel, "seeds": [-1]}),
        ("check", {"candidate": kernel, "time_at": [{"n": 0}]}),
        ("check", {"candidate": "x" * 5000}),
        ("inspect", {"kernel": kernel, "archs": [f"sm_{i}" for i in range(17)]}),
        ("spec", {"kernel": kernel, "entry": "e" * 300}),
        ("check", {"candidate": "va/missing.ptx"}),
        ("check", {"candidate": kernel, "against": kernel, "golden": "va"}),
        ("inspect", {"kernel": kernel, "archs": ["sm_90a", "sm_90a"], "assemble": False}),
    ]
    results = _calls(build_server(root=repo["root"]), calls)
    said = [_refused(r) for r in results[:-1]]
    assert said[0] == "port: max_rounds: Input should be greater than or equal to 0"
    assert said[1] == "port: max_usd: Input should be greater than or equal to 0"
    assert said[2] == "check: timeout_s: Input should be greater than 0"
    assert said[3].startswith("check: seeds: List should have at most 8 items")
    assert said[4] == "check: seeds.0: Input should be greater than or equal to 0"
    assert said[5] == "check: time_at.0.n: Input should be greater than or equal to 1"
    assert said[6] == "check: candidate: String should have at most 4096 characters"
    assert said[7].startswith("inspect: archs: List should have at most 16 items")
    assert said[8] == "spec: entry: String should have at most 256 characters"
    assert said[9] == f"{repo['root'] / 'va' / 'missing.ptx'}: no such file"
    assert said[10] == "give against or golden, not both"
    assert [a["arch"] for a in results[-1].structured_content["archs"]] == ["sm_90a"]  # duplicates dropped

    from porter import services

    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError(f"a bug that quotes {SECRET}\nover two lines")

    monkeypatch.setattr(services, "check", broken)
    [crashed] = _calls(build_server(root=repo["root"]), [("check", {"candidate": kernel, "gpu": False})])
    assert _refused(crashed, exit_code=70) == "internal error: RuntimeError (the server's log has the details)"
    assert SECRET not in _said(crashed) and "Traceback" not in _said(crashed)


# -- the HTTP token's file ----------------------------------------------------------------------

def test_the_token_file_is_the_owners_alone_and_holds_a_long_token(tmp_path):
    made = server_token(tmp_path / "state" / "porter" / "mcp-1.token", reuse=False)
    assert made.made and stat.S_IMODE(made.file.stat().st_mode) == 0o600
    assert stat.S_IMODE(made.file.parent.stat().st_mode) == 0o700
    assert made.file.read_text() == made.value + "\n"
    again = server_token(made.file, reuse=True)  # --token-file: the token there, not a new one
    assert not again.made and again.value == made.value
    restarted = server_token(made.file, reuse=False)  # the default file: a new token at each start
    assert restarted.made and restarted.value != made.value and made.file.read_text() == restarted.value + "\n"

    loose = tmp_path / "loose"
    loose.write_text("y" * 40)
    for mode in (0o640, 0o604, 0o620):
        loose.chmod(mode)
        with pytest.raises(InputError, match="group or others may read or write it"):
            read_token(loose)
    short = tmp_path / "short"
    for text in ("", "abc\n", "y" * 31, "has spaces " * 4):
        short.write_text(text)
        short.chmod(0o600)
        with pytest.raises(InputError, match="needs one token of 32 or more characters"):
            read_token(short)
    with pytest.raises(InputError, match="not a regular file"):
        read_token(tmp_path)
