"""Shared test setup: the `gpu` marker skips with the reason when this machine cannot run kernels."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from porter.install import install_hint
from porter.ptx import retarget

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


@functools.lru_cache(maxsize=1)
def gpu_unavailable_reason() -> str | None:
    """None when CuPy sees a GPU, else why not (checked once, in a child process via the runner)."""
    from porter.gate.doctor import detect_gpus

    gpus, note = detect_gpus()
    if not gpus:
        return note or "no NVIDIA GPU"
    try:
        import cupy  # noqa: F401
    except ImportError:
        return f"CuPy is not installed ({install_hint('cupy')})"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = None
    for item in items:
        if "gpu" in item.keywords:
            reason = reason or gpu_unavailable_reason()
            if reason:
                item.add_marker(pytest.mark.skip(reason=f"gpu test: {reason}"))


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep ptxas results out of the user's ~/.cache; one cache per test session is plenty."""
    monkeypatch.setenv("PORTER_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "ptxas-cache"))


class NoGpuRunner:
    """A runner whose worker cannot start, as on a CPU-only machine: for CPU tests of GPU paths."""

    info = None
    restarts = 0

    def start(self):
        from porter.gate.runner import WorkerFault

        raise WorkerFault("no usable GPU: none here", kind="unavailable")

    def close(self) -> None:
        pass


@pytest.fixture
def no_gpu() -> NoGpuRunner:
    return NoGpuRunner()


@pytest.fixture(scope="session")
def runner():
    from porter.gate.runner import Runner

    with Runner() as r:
        yield r


@pytest.fixture(scope="session")
def toolchain():
    from porter.ptx.toolchain import find_toolchain

    tc = find_toolchain()
    if tc.ptxas is None:
        pytest.skip("ptxas not found (pip install nvidia-cuda-nvcc)")
    return tc


def plain_git(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep the user's git configuration (signing, hooks, default branch) out of the test repos;
    a test module takes it as ``_plain_git = pytest.fixture(autouse=True)(plain_git)``."""
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for key in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{key}_NAME", "porter test")
        monkeypatch.setenv(f"GIT_{key}_EMAIL", "porter@example.invalid")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout.strip()


def example_repo(root: Path, example: Path, names: tuple[str, ...], folder: str) -> Path:
    """A git repository at ``root`` whose one commit holds ``names`` of ``example`` in ``folder``
    (a port's source, as a user's repository holds it)."""
    (root / folder).mkdir(parents=True)
    for name in names:
        (root / folder / name).write_text((example / name).read_text())
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", folder)
    return root


def commit(repo: Path, message: str, files: dict[str, str]) -> str:
    """Write ``files`` (repository path: text) into ``repo`` and commit everything; the new commit."""
    for path, text in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def small_vector_add(folder: Path, *, marker: str = "") -> tuple[Path, Path]:
    """vector_add with a small sweep (fast on a CPU); the kernel with a ``.global`` named ``marker``."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(EXAMPLES / "vector_add" / "ref.py", folder / "ref.py")
    text = (EXAMPLES / "vector_add" / "porter.toml").read_text()
    head, _, rest = text.partition("[[params]]")
    head = head.split("[sizes]")[0] + "[sizes]\nn = 4096\n\n[[sweep]]\nn = 33\n[[sweep]]\nn = 1000\n\n"
    (folder / "porter.toml").write_text(head + "[[params]]" + rest)
    kernel = (EXAMPLES / "vector_add" / "kernel.ptx").read_text()
    if marker:
        kernel = kernel.replace(".address_size 64", f".address_size 64\n.global .u32 {marker};", 1)
    (folder / "kernel.ptx").write_text(kernel)
    return folder / "kernel.ptx", folder / "porter.toml"


def as_nvcc_of(toolchain, source: Path, folder: Path) -> Path:
    """``source``, nvcc 13's output (``.version 9.0``), as the nvcc of the toolchain's CUDA release
    writes it: for a CUDA 12 ptxas, a copy in ``folder`` with the newest ``.version`` it accepts
    (what nvcc 12 writes); else ``source`` itself."""
    isa = toolchain.isa()
    text = source.read_text()
    if isa is None or isa.accepts("9.0") or ".version 9.0" not in text:
        return source
    folder.mkdir(parents=True, exist_ok=True)
    copy = folder / source.name
    copy.write_text(text.replace(".version 9.0", f".version {isa.max_ptx}", 1))
    return copy


def candidates(tmp_path: Path, n: int, *, marker: str = "") -> list[Path]:
    kernel, _ = small_vector_add(tmp_path, marker=marker)
    paths = []
    for k in range(n):  # distinct texts, as a model's candidates are (ptxas runs for each)
        path = tmp_path / f"cand{k}.ptx"
        path.write_text(retarget(kernel.read_text(), "sm_90", min_version="7.8") + f"\n// candidate {k}\n")
        paths.append(path)
    return paths


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """With PORTER_FAILURE_LOG set, each failure's report is appended there as it happens: a GPU
    tier cut short by its machine's time limit still leaves what failed and why."""
    path = os.environ.get("PORTER_FAILURE_LOG")
    if path and report.failed:
        with open(path, "a") as log:
            log.write(f"== {report.nodeid} ({report.when})\n{report.longreprtext[-4000:]}\n")
