"""``porter port`` tells the truth about every outcome, checks its inputs before spending, and works in
ordinary repositories (#13): real ptxas, real temporary git repositories, the scripted model, no GPU."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import NoGpuRunner, git, plain_git

from porter.agent.llm import Budget
from porter.agent.replay import ReplayModel
from porter.agent.session import PortRequest, PortSession, choose_target
from porter.cli.progress import PlainProgress
from porter.errors import InputError
from porter.gate.spec import load_spec

ROOT = Path(__file__).resolve().parent.parent
VADD = ROOT / "examples" / "vector_add"
TILE = ROOT / "examples" / "gemm_bt_tile"
GEMM = ROOT / "examples" / "gemm_bf16"
SCRIPT = TILE / "scripted_session.toml"


def porter(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """The CLI as a user runs it; PYTHONPATH keeps this checkout's porter importable from any cwd."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    return subprocess.run([sys.executable, "-m", "porter", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=300)


_plain_git = pytest.fixture(autouse=True)(plain_git)


def make_repo(tmp_path: Path, source: Path, names: tuple[str, ...], folder: str = "kern") -> Path:
    root = tmp_path / "repo"
    (root / folder).mkdir(parents=True)
    for name in names:
        shutil.copy(source / name, root / folder / name)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "kernels")
    return root


def junk_script(tmp_path: Path, n: int = 4) -> Path:
    script = tmp_path / "junk.toml"
    script.write_text('label = "scripted junk"\n' + '[[reply]]\ntext = "no kernel here"\n' * n)
    return script


def session(tmp_path: Path, toolchain, kernel: Path, to: str, model=None, **more):
    events: list[tuple[str, dict]] = []
    request = PortRequest(kernel=kernel, spec=load_spec(kernel.parent / "porter.toml"), to_arch=to,
                          runs_root=tmp_path / "runs", **more)
    result = PortSession(request, toolchain=toolchain, runner=NoGpuRunner(), model=model,
                         on_event=lambda kind, **data: events.append((kind, data))).run()
    return result, events


# --- 1. not run is not failed; nothing is spent on what cannot be verified ------------------------


def test_a_plain_kernel_that_cannot_run_here_is_not_run_after_one_candidate(tmp_path, toolchain):
    result, _ = session(tmp_path, toolchain, VADD / "kernel.ptx", "sm_100", model=ReplayModel(junk_script(tmp_path)))
    assert result.status == "not run on target hardware"
    assert len(result.candidates) == 1 and result.spend.rounds == 0  # no model call was made
    assert "cannot run on this machine" in result.stop_reason


def test_the_cli_exits_3_for_a_plain_kernel_not_run_on_target_hardware(tmp_path):
    kernel = tmp_path / "k" / "kernel.ptx"
    kernel.parent.mkdir()
    for name in ("kernel.ptx", "porter.toml", "ref.py"):
        shutil.copy(VADD / name, kernel.parent / name)
    r = porter("port", str(kernel), "--to", "sm_100", "--model", f"replay:{junk_script(tmp_path)}", "--no-gpu",
               "--json", cwd=tmp_path)
    assert r.returncode == 3, r.stderr[-2000:]
    out = json.loads(r.stdout)["result"]
    assert out["status"] == "not run on target hardware" and out["spend"]["rounds"] == 0
    assert len(out["candidates"]) == 1


# --- 3. zero means zero ------------------------------------------------------------------------


def test_zero_rounds_is_the_baseline_alone(tmp_path, toolchain):
    result, _ = session(tmp_path, toolchain, TILE / "kernel_sm80.ptx", "sm_90a", model=ReplayModel(SCRIPT),
                        budget=Budget(max_rounds=0))
    assert result.spend.rounds == 0 and len(result.candidates) == 1
    assert "0 of 0 rounds" in result.stop_reason


def test_zero_minutes_on_the_command_line_is_a_budget(tmp_path):
    folder = _copy(tmp_path, TILE, ("kernel_sm80.ptx", "porter.toml", "ref.py"))  # runs go beside it, not here
    for option in ("--max-minutes", "--max-rounds"):
        r = porter("port", str(folder / "kernel_sm80.ptx"), "--to", "sm_90a", "--model", f"replay:{SCRIPT}",
                   option, "0", "--no-gpu", "--no-branch", "--json", cwd=tmp_path)
        out = json.loads(r.stdout)["result"]
        assert out["spend"]["rounds"] == 0, (option, r.stderr[-1000:])
        assert ("wall-clock budget spent" if option == "--max-minutes" else "0 of 0 rounds") in out["stop_reason"]


# --- 4. the target is what was asked, or the change is said loudly ------------------------------


def test_a_changed_target_is_said_first_and_recorded(tmp_path, toolchain):
    from porter.review.port_report import render_port_report

    stream = io.StringIO()
    request = PortRequest(kernel=TILE / "kernel_sm80.ptx", spec=load_spec(TILE / "porter.toml"), to_arch="sm_100",
                          runs_root=tmp_path / "runs")
    result = PortSession(request, toolchain=toolchain, runner=NoGpuRunner(), model=None,
                         on_event=PlainProgress(stream)).run()
    assert result.target == "sm_100a" and result.asked_target == "sm_100"
    first = stream.getvalue().splitlines()[0]
    assert first.startswith("porter: target sm_100a, not sm_100 as asked: ") and "--no-require-native" in first
    config = json.loads((result.run_dir / "config.json").read_text())
    assert (config["asked_target"], config["target"]) == ("sm_100", "sm_100a") and config["target_changed"]
    report = render_port_report(result, kernel_rel="k.ptx", spec_rel="porter.toml", ported_rel="p.ptx",
                                check_command="porter check", toolchain="", gpu="")
    assert "**not sm_100 as asked**" in report


def test_no_require_native_means_the_plain_target(toolchain):
    from porter.ptx import read_ptx

    wgmma = read_ptx(ROOT / "examples" / "inspect" / "wgmma_sm90a.ptx")
    assert choose_target(wgmma, "sm_100")[0] == "sm_100a"
    assert choose_target(wgmma, "sm_100", require_native=False)[0] == "sm_100"
    assert choose_target(wgmma, "sm_100a", require_native=False)[0] == "sm_100a"


# --- 5. pre-flight before the first model call -------------------------------------------------


def _copy(tmp_path: Path, source: Path, names: tuple[str, ...]) -> Path:
    folder = tmp_path / "k"
    folder.mkdir(exist_ok=True)
    for name in names:
        shutil.copy(source / name, folder / name)
    return folder


def test_a_source_that_does_not_assemble_is_bad_input_before_any_model_call(tmp_path):
    folder = _copy(tmp_path, VADD, ("porter.toml", "ref.py"))
    (folder / "kernel.ptx").write_text((VADD / "kernel.ptx").read_text().replace("fma.rn.f32", "fmaa.rn.f32"))
    r = porter("port", str(folder / "kernel.ptx"), "--to", "sm_90a", "--model", f"replay:{SCRIPT}", "--no-gpu",
               cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert "the source kernel does not assemble for sm_80" in r.stderr and "line 49" in r.stderr
    assert "Traceback" not in r.stderr and r.stderr.strip().count("\n") == 0
    assert not (tmp_path / ".porter" / "runs").exists() or not list((tmp_path / ".porter" / "runs").iterdir())


def test_from_contradicting_the_target_is_a_warning(toolchain, tmp_path):
    from porter.agent.preflight import source_arch_warning
    from porter.ptx import read_ptx

    sm90a = read_ptx(GEMM / "kernel_sm90a.ptx")
    assert "contradicts the kernel's .target sm_90a" in source_arch_warning(sm90a, "sm_80")
    assert source_arch_warning(read_ptx(VADD / "kernel.ptx"), "sm_90") is None  # sm_80 PTX runs on sm_90
    result, events = session(tmp_path, toolchain, GEMM / "kernel_sm90a.ptx", "sm_100a", from_arch="sm_80")
    assert any(kind == "warning" and "contradicts" in data["message"] for kind, data in events)
    assert result.warnings


def test_the_spec_must_match_the_source_block_and_shared_memory(tmp_path, toolchain):
    from porter.gate.source import check_spec_matches
    from porter.ptx import read_ptx

    folder = _copy(tmp_path, GEMM, ("kernel_sm80.ptx", "ref.py"))
    spec_text = (GEMM / "porter.toml").read_text()
    module = read_ptx(GEMM / "kernel_sm80.ptx")

    def spec_with(old: str, new: str):
        assert old in spec_text
        (folder / "porter.toml").write_text(spec_text.replace(old, new))
        return load_spec(folder / "porter.toml")

    check_spec_matches(load_spec(GEMM / "porter.toml"), module, GEMM / "kernel_sm80.ptx")  # the shipped spec fits
    with pytest.raises(InputError, match=r"allows at most \.maxntid \(256, 1, 1\)"):
        check_spec_matches(spec_with("block = [256, 1, 1]", "block = [512, 1, 1]"), module, folder / "kernel_sm80.ptx")
    with pytest.raises(InputError, match=r"declares dynamic shared memory \(\.extern \.shared smem\[\] at line 14\)"):
        check_spec_matches(spec_with("shared = 49152", "shared = 0"), module, folder / "kernel_sm80.ptx")
    # A compiler's metadata beside the kernel (Triton's <name>.json) says how much it needs.
    (folder / "kernel_sm80.json").write_text(json.dumps({"name": "gemm_bf16_sm80", "shared": 65536}))
    with pytest.raises(InputError, match=r"kernel_sm80\.json declares 65536"):
        check_spec_matches(load_spec(GEMM / "porter.toml"), module, folder / "kernel_sm80.ptx")
    text = (VADD / "kernel.ptx").read_text().replace(".maxntid 256, 1, 1", ".reqntid 128, 1, 1")
    (folder / "v.ptx").write_text(text)
    with pytest.raises(InputError, match=r"requires \.reqntid \(128, 1, 1\)"):
        check_spec_matches(load_spec(VADD / "porter.toml"), read_ptx(folder / "v.ptx"), folder / "v.ptx")


def test_a_spec_that_does_not_match_the_signature_fails_before_the_session(tmp_path, toolchain):
    folder = _copy(tmp_path, VADD, ("porter.toml", "ref.py"))
    text = (VADD / "kernel.ptx").read_text()
    extra = text.replace("\t.param .u32 vector_add_param_4\n)", "\t.param .u32 vector_add_param_4,\n\t.param .u32 extra\n)")
    assert extra != text
    (folder / "kernel.ptx").write_text(extra)
    with pytest.raises(InputError, match=r"does not match the source kernel: the spec lists 5 params but \.entry "
                                         "vector_add has 6"):
        session(tmp_path, toolchain, folder / "kernel.ptx", "sm_90a", model=ReplayModel(SCRIPT))
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").iterdir())


def test_a_branch_outside_a_repository_fails_at_once(tmp_path):
    _copy(tmp_path, VADD, ("kernel.ptx", "porter.toml", "ref.py"))
    started = time.monotonic()
    r = porter("port", "k/kernel.ptx", "--to", "sm_90a", "--branch-on-failure", "--model", f"replay:{SCRIPT}",
               "--no-gpu", cwd=tmp_path)
    assert r.returncode == 2 and "no review branch can be made" in r.stderr and "not in a git repository" in r.stderr
    assert time.monotonic() - started < 20 and not (tmp_path / ".porter").exists()
    # Without asking for one, a port outside a repository runs and says why there is no branch.
    r = porter("port", "k/kernel.ptx", "--to", "sm_80", "--no-gpu", cwd=tmp_path)
    assert r.returncode == 3, r.stderr


# --- 6. check --arch is validated --------------------------------------------------------------


@pytest.mark.parametrize("name", ["sm_99", "blackwell"])
def test_check_arch_is_validated(name):
    r = porter("check", str(VADD / "kernel.ptx"), "--arch", name, "--no-gpu")
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.startswith("porter: error: --arch: ") and r.stderr.strip().count("\n") == 0


# --- 8, 9, 10. from a subdirectory; runs ignore themselves; names people can tell apart -----------


def test_port_from_a_subdirectory_with_a_relative_path(tmp_path):
    repo = make_repo(tmp_path, VADD, ("kernel.ptx", "porter.toml", "ref.py"))
    (repo / ".porter").mkdir()
    (repo / ".porter" / "config.toml").write_text("# project settings\n")
    r = porter("port", "kernel.ptx", "--to", "sm_90a", "--branch-on-failure", "--no-gpu", "--json", cwd=repo / "kern")
    assert r.returncode == 3, r.stderr[-2000:]
    out = json.loads(r.stdout)
    assert out["review"]["branch"] == "porter/vector_add-sm_90a"  # the entry names it, not the file
    assert "vector_add-sm_90a" in out["result"]["run_id"]
    assert git(repo, "show", "porter/vector_add-sm_90a:kern/kernel.sm_90a.ptx").startswith("//")
    # The runs folder ignores itself; the project's own .porter files stay visible to git.
    assert git(repo, "status", "--porcelain", "--untracked-files=all") == "?? .porter/config.toml"
    listed = porter("runs", cwd=repo / "kern")  # found from any folder of the repository
    assert out["result"]["run_id"] in listed.stdout


def test_runs_of_two_kernel_ptx_files_are_told_apart_by_their_entries(tmp_path, toolchain):
    from porter.agent.runs import new_run_id

    a, b = new_run_id("softmax_kernel", "sm_100a"), new_run_id("matmul_kernel", "sm_100a")
    assert "softmax_kernel-sm_100a" in a and "matmul_kernel-sm_100a" in b
    assert "/" not in new_run_id("a/b c", "sm_90a")


# --- 13. packaging -----------------------------------------------------------------------------


def test_version():
    from porter import __version__

    r = porter("--version")
    assert r.returncode == 0 and r.stdout.strip().startswith("porter ") and __version__.split(".")[0] in r.stdout


def test_every_third_party_import_is_a_declared_dependency():
    import ast
    import re as _re

    from porter._toml import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime = {_re.split(r"[<>=!;\[ ]", d, maxsplit=1)[0].lower().replace("-", "_") for d in project["dependencies"]}
    optional = {_re.split(r"[<>=!;\[ ]", d, maxsplit=1)[0].lower().replace("-", "_")
                for extra in project["optional-dependencies"].values() for d in extra}
    import_names = {"cupy": "cupy_cuda13x", "yaml": "pyyaml"}
    via_litellm = {"httpx", "openai"}  # litellm's own dependencies, imported only beside it (agent/llm.py)
    cluster = {_re.split(r"[<>=!;\[ ]", d, maxsplit=1)[0] for d in project["optional-dependencies"]["cluster"]}
    # The MCP server (porter/mcp/, `porter mcp` only) imports the SDK of the `mcp` extra and what it brings
    # (pydantic for its tools' argument schemas, uvicorn to serve its HTTP app behind porter's token).
    via_mcp = {"mcp", "mcp_types", "anyio", "pydantic", "uvicorn"}
    assert any(d.startswith("mcp") for d in project["optional-dependencies"]["mcp"])
    imported = set()
    for path in (ROOT / "porter").rglob("*.py"):
        in_mcp = path.parent.name == "mcp"
        for node in ast.walk(ast.parse(path.read_text())):
            names = set()
            if isinstance(node, ast.Import):
                names = {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = {node.module.split(".")[0]}
            imported |= names - via_mcp if in_mcp else names
    third_party = {m for m in imported if m not in sys.stdlib_module_names and m not in ("porter", "tomli")}
    for module in sorted(third_party):
        name = import_names.get(module, module)
        assert (name in runtime or (module == "cupy" and any(o.startswith("cupy") for o in optional))
                or (module in via_litellm and "litellm" in runtime)
                or (module == "distributed" and module in cluster)), module  # porter.pool's cluster, lazily
    assert {"ml_dtypes", "rich"} <= runtime  # bf16 inputs and the live view need them at run time
    assert "gitpython" not in runtime  # porter's git goes through the git executable (porter/gitcmd.py)


def test_a_missing_key_ends_in_under_two_seconds_naming_the_variable(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    started = time.monotonic()
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    r = subprocess.run([sys.executable, "-m", "porter", "port", str(VADD / "kernel.ptx"), "--to", "sm_90a",
                        "--model", "openai/gpt-4o", "--no-gpu"], capture_output=True, text=True, cwd=tmp_path,
                       env=env, timeout=60)
    elapsed = time.monotonic() - started
    assert r.returncode == 3, r.stderr
    assert "OPENAI_API_KEY is not set" in r.stderr and r.stderr.strip().count("\n") == 0
    assert elapsed < 2.0, elapsed
    assert not (tmp_path / ".porter").exists()


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["port", "--help"], ["ci", "--help"]])
def test_help_and_version_import_neither_litellm_nor_cupy_nor_git(args):
    code = ("import sys\nfrom porter.cli.app import main\nsys.argv = ['porter', *sys.argv[1:]]\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print(sorted({'litellm', 'cupy', 'git', 'tenacity'} & set(sys.modules)), file=sys.stderr)")
    r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.stderr.strip().splitlines()[-1] == "[]", r.stderr


def test_bench_checks_its_models_before_any_task(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    r = subprocess.run([sys.executable, "-m", "porter", "bench", str(ROOT / "examples"), "--model", "openai/gpt-4o",
                        "--no-gpu"], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60)
    assert r.returncode == 3 and "OPENAI_API_KEY is not set" in r.stderr and r.stdout == ""


def test_a_bogus_provider_is_bad_input_before_the_retarget(tmp_path):
    folder = _copy(tmp_path, VADD, ("kernel.ptx", "porter.toml", "ref.py"))
    r = porter("port", str(folder / "kernel.ptx"), "--to", "sm_90a", "--model", "bogus/model", "--no-gpu", cwd=tmp_path)
    assert r.returncode == 2 and "litellm knows no such provider or model ('bogus')" in r.stderr
    assert r.stderr.strip().count("\n") == 0 and not (tmp_path / ".porter").exists()  # no run was started
