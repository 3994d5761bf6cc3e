"""``porter ci`` as a security boundary: a pull request's head runs none of its Python, sends the bot's
key nowhere, and cannot move the check to another kernel than the one the library runs.

Real git repositories, real ptxas, a real local HTTP server standing in for a model provider; a
simulated GPU (:class:`porter.gate.runner.fake.FakeGpu`, which imports the spec's reference and
computes it, as the real worker does) stands in for the GPU.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import NoGpuRunner, commit, git, plain_git, small_vector_add
from hypothesis import given, settings
from hypothesis import strategies as st
from openai_stub import OpenAIStub, chat

from porter import services
from porter.ci.bot import Change, material_edits, plan, run_ci
from porter.ci.change import nearest_spec
from porter.gate.check import CheckOptions, run_check
from porter.gate.runner.fake import FakeGpu
from porter.gate.spec import load_spec
from porter.ptx.retarget import retarget

ROOT = Path(__file__).resolve().parent.parent
FOLDER = "kernels/vector_add"
KERNEL = f"{FOLDER}/kernel.ptx"
SPEC = f"{FOLDER}/porter.toml"

_plain_git = pytest.fixture(autouse=True)(plain_git)


def kernel_text(marker: str = "") -> str:
    """The small vector_add kernel, for sm_90 (the fake GPU's): ``marker`` names a ``.global`` that
    the fake GPU reads as "this kernel computes a wrong result" (``porter_fake_wrong``)."""
    text = retarget((ROOT / "examples" / "vector_add" / "kernel.ptx").read_text(), "sm_90", min_version="7.8")
    return text.replace(".address_size 64", f".address_size 64\n.global .u32 {marker};", 1) if marker else text


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    small_vector_add(root / FOLDER)
    (root / KERNEL).write_text(kernel_text())
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "vector_add")
    return root


def ci(repo: Path, toolchain, **options):
    printed: list[str] = []
    options.setdefault("runner_factory", NoGpuRunner)
    options.setdefault("env", {})
    options.setdefault("sanitize", False)  # no compute-sanitizer on the simulated GPU
    return run_ci(repo, toolchain=toolchain, echo=printed.append, **options), printed


def marking_ref(marker: Path) -> str:
    """A reference that is right, and writes ``marker`` when imported: the change's Python ran."""
    ref = (ROOT / "examples" / "vector_add" / "ref.py").read_text().replace("from __future__ import annotations\n", "")
    return f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n{ref}"


# -- the change's Python never runs -------------------------------------------------------------


def test_a_new_spec_with_python_is_not_run_and_fails_the_bot(repo: Path, toolchain, tmp_path: Path) -> None:
    marker = tmp_path / "imported"
    commit(repo, "a kernel with its own spec and reference", {
        "kernels/copy/kernel.ptx": kernel_text(),
        "kernels/copy/porter.toml": (repo / SPEC).read_text(),
        "kernels/copy/ref.py": marking_ref(marker),
    })
    outcome, printed = ci(repo, toolchain, runner_factory=FakeGpu().runner)
    assert not marker.exists()
    assert outcome.exit_code == 1 and not outcome.kernels
    (skipped,) = outcome.skipped
    assert skipped.reason.startswith("not checked: needs a trusted spec")
    assert any("kernels/copy/kernel.ptx" in line and "needs a trusted spec" in line for line in printed)
    # The owner's explicit trust runs it: the flag does what it says.
    trusted, _ = ci(repo, toolchain, runner_factory=FakeGpu().runner, spec_from="head")
    assert marker.exists() and trusted.kernels[0].status == "passed"


def test_an_edited_reference_is_not_run_and_a_wrong_kernel_still_fails_against_the_base(
        repo: Path, toolchain, tmp_path: Path) -> None:
    """The attack of round 2: the change edits ref.py (imported in the worker) and breaks a kernel."""
    marker = tmp_path / "imported"
    commit(repo, "a faster kernel and a 'fixed' reference", {
        KERNEL: kernel_text(marker="porter_fake_wrong"),
        f"{FOLDER}/ref.py": marking_ref(marker),
    })
    outcome, _ = ci(repo, toolchain, runner_factory=FakeGpu().runner)
    assert not marker.exists()
    (kernel,) = outcome.kernels
    assert kernel.status == "failed" and outcome.exit_code == 1
    assert f"this change edits {FOLDER}/ref.py: checked against the base revision's copy" in kernel.spec_note
    # --allow-unchecked does not let a kernel out of a judgement it has.
    allowed, _ = ci(repo, toolchain, runner_factory=FakeGpu().runner, allow_unchecked=True)
    assert allowed.exit_code == 1 and not marker.exists()


def test_a_right_kernel_beside_an_edited_reference_passes_the_base_check_and_still_needs_trust(
        repo: Path, toolchain, tmp_path: Path) -> None:
    marker = tmp_path / "imported"
    commit(repo, "a tuned kernel and an edited reference", {
        KERNEL: kernel_text() + "// tuned\n", f"{FOLDER}/ref.py": marking_ref(marker)})
    outcome, _ = ci(repo, toolchain, runner_factory=FakeGpu().runner)
    assert not marker.exists()
    (kernel,) = outcome.kernels
    assert kernel.status == "passed" and outcome.exit_code == 1
    (skipped,) = outcome.skipped
    assert skipped.path == KERNEL and skipped.reason.startswith(f"needs a trusted spec: this change edits {FOLDER}/ref.py")
    assert any(line.startswith(f"::error file={KERNEL},title=porter::needs a trusted spec")
               for line in ci(repo, toolchain, runner_factory=FakeGpu().runner, annotations=True)[1])
    allowed, _ = ci(repo, toolchain, runner_factory=FakeGpu().runner, allow_unchecked=True)
    assert allowed.exit_code == 0 and not marker.exists()


def test_each_kernel_gets_a_fresh_worker(repo: Path, toolchain, tmp_path: Path) -> None:
    commit(repo, "a second kernel", {f"{FOLDER}/other.ptx": kernel_text()})
    commit(repo, "two changed kernels", {KERNEL: kernel_text() + "// tuned\n",
                                         f"{FOLDER}/other.ptx": kernel_text(marker="porter_fake_wrong")})
    gpu = FakeGpu()
    started = []

    def factory():
        started.append(gpu.runner())
        return started[-1]

    outcome, _ = ci(repo, toolchain, runner_factory=factory, base="HEAD~1")
    assert [k.status for k in outcome.kernels] == ["passed", "failed"]
    assert len(started) == 2 and len({id(r) for r in started}) == 2
    assert all(r.info is None for r in started)  # each closed when its kernel was done


def test_litellm_reads_no_dotenv_file(tmp_path: Path) -> None:
    """litellm's import loads a .env found above its install folder (a venv inside a checkout finds the
    checkout's): porter's import of it must not, so no file in a pull request sets the API's base."""
    marker = tmp_path / "loaded"
    program = (
        "import dotenv, pathlib\n"
        f"dotenv.load_dotenv = lambda *a, **k: pathlib.Path({str(marker)!r}).write_text('loaded')\n"
        "from porter.agent.llm import _litellm\n"
        "_litellm()\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "LITELLM_MODE"}
    subprocess.run([sys.executable, "-c", program], check=True, env=env, cwd=tmp_path, timeout=120)
    assert not marker.exists()


def test_the_bots_key_never_reaches_a_server_the_change_names(repo: Path, toolchain, monkeypatch) -> None:
    """The change adds a .porter/config.toml naming its own server; the bot ports with its own model."""
    tile = ROOT / "examples" / "gemm_bt_tile"
    folder = "kernels/gemm_bt_tile"
    commit(repo, "the tile gemm", {f"{folder}/{n}": (tile / n).read_text()
                                   for n in ("kernel_sm80.ptx", "porter.toml", "ref.py")})
    with OpenAIStub([chat("no code here")] * 4) as theirs, OpenAIStub([chat("no code here")] * 4) as ours:
        commit(repo, "retune, and a model of our own", {
            f"{folder}/kernel_sm80.ptx": (tile / "kernel_sm80.ptx").read_text() + "// retuned\n",
            ".porter/config.toml": f'model = "openai/their-model"\napi_base = "{theirs.api_base}"\n',
        })
        monkeypatch.setenv("OPENAI_API_KEY", "sk-bot-secret")
        monkeypatch.delenv("PORTER_MODEL", raising=False)
        monkeypatch.delenv("PORTER_API_BASE", raising=False)
        printed: list[str] = []
        # No model of the bot's own: the mechanical retarget alone, and nothing is sent.
        outcome = services.ci(repo, port_to="sm_90a", gpu=False, toolchain=toolchain, echo=printed.append,
                              base="HEAD~1", env={}, sanitize=False)
        assert outcome.ports and all(p.reason.startswith("no model configured") for p in outcome.ports)
        assert not theirs.received
        # The bot's own model and endpoint: requests go there, and only there.
        outcome = services.ci(repo, port_to="sm_90a", gpu=False, toolchain=toolchain, echo=printed.append,
                              base="HEAD~1", env={}, sanitize=False, model="openai/our-model",
                              api_base=ours.api_base)
        assert not theirs.received
        assert ours.received and all(r.body["model"] == "our-model" for r in ours.received)
        assert all(r.headers.get("authorization") == "Bearer sk-bot-secret" for r in ours.received), \
            [r.headers for r in ours.received]


# -- symbolic links ------------------------------------------------------------------------------


def test_a_kernel_that_is_a_link_is_checked_when_its_target_changes(repo: Path, toolchain) -> None:
    (repo / "src").mkdir()
    (repo / "src" / "vadd.txt").write_text(kernel_text())
    (repo / KERNEL).unlink()
    os.symlink("../../src/vadd.txt", repo / KERNEL)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "the kernel lives in src/")
    commit(repo, "break the kernel through its link's target",
           {"src/vadd.txt": kernel_text().replace("fma.rn.f32", "fmaa.rn.f32")})
    outcome, _ = ci(repo, toolchain)
    (kernel,) = outcome.kernels
    assert kernel.path == KERNEL and kernel.status == "failed" and outcome.exit_code == 1
    assert "fmaa" in kernel.reason or kernel.verdict.gate("assemble").status == "failed"


def test_a_link_that_leaves_the_repository_is_refused(repo: Path, toolchain, tmp_path: Path) -> None:
    outside = tmp_path / "outside.ptx"
    outside.write_text(kernel_text())
    (repo / KERNEL).unlink()
    os.symlink(os.path.relpath(outside, repo / FOLDER), repo / KERNEL)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "point the kernel outside")
    outcome, printed = ci(repo, toolchain)
    (kernel,) = outcome.kernels
    assert kernel.status == "failed" and outcome.exit_code == 1
    assert "outside the repository" in kernel.reason
    assert str(tmp_path) not in "\n".join(printed).replace(str(repo), "")  # nothing read from there


# -- directives ----------------------------------------------------------------------------------


def two_entries(text: str) -> str:
    """The module with a second entry, ``vector_add_decoy``, the same code under another name."""
    start = text.index(".visible .entry vector_add")
    return text + "\n" + text[start:].replace("vector_add", "vector_add_decoy", 1)


@pytest.mark.parametrize(("directive", "said"), [
    ('// porter-launch: entry = "vector_add_decoy"', "entry vector_add -> vector_add_decoy"),
    ('// porter-launch: grid = ["ceil_div(n, 128)", 1, 1], block = [128, 1, 1]', "block"),
    ('// porter-kernel: entry = "vector_add_decoy", grid = ["ceil_div(n, 256)", 1, 1], block = [256, 1, 1], '
     'args = ["x", "y", "out", "alpha", "n"]', "kernel sequence"),
])
def test_a_directive_that_changes_the_interface_fails_unless_allowed(repo: Path, toolchain, directive: str,
                                                                     said: str) -> None:
    broken = two_entries(kernel_text()).replace("fma.rn.f32", "sub.f32", 1)  # the shipped entry is wrong
    commit(repo, "redirect the check", {KERNEL: f"{directive}\n{broken}"})
    outcome, printed = ci(repo, toolchain)
    (kernel,) = outcome.kernels
    assert kernel.status == "failed" and outcome.exit_code == 1
    assert kernel.reason.startswith("interface change against its base version") and said in kernel.reason
    assert sum("interface change" in line for line in printed) >= 1
    allowed, _ = ci(repo, toolchain, allow_interface_change=True)
    assert "interface change" not in allowed.kernels[0].reason


def test_check_lets_a_directive_choose_another_entry_only_where_the_specs_is_absent(toolchain,
                                                                                   tmp_path: Path) -> None:
    _, spec_path = small_vector_add(tmp_path)
    spec = load_spec(spec_path)
    candidate = tmp_path / "cand.ptx"
    candidate.write_text('// porter-launch: entry = "vector_add_decoy"\n' + two_entries(kernel_text()))
    verdict = run_check(candidate, spec, CheckOptions(), toolchain=toolchain, runner=None)
    assert verdict.status == "failed"
    interface = verdict.gate("interface")
    assert interface.status == "failed" and any("spec's entry 'vector_add' is in the module" in d
                                                for d in interface.details)
    chosen = run_check(candidate, spec, CheckOptions(entry="vector_add_decoy"), toolchain=toolchain, runner=None)
    assert chosen.gate("interface").status == "passed"
    renamed = tmp_path / "renamed.ptx"
    renamed.write_text('// porter-launch: entry = "vadd_sm90"\n' + kernel_text().replace("vector_add", "vadd_sm90"))
    assert run_check(renamed, spec, CheckOptions(), toolchain=toolchain, runner=None).gate("interface").status == "passed"


# -- what the bot says ---------------------------------------------------------------------------


def test_bad_port_target_and_missing_repository_are_bad_input_at_once(repo: Path, toolchain, tmp_path) -> None:
    commit(repo, "tuned", {KERNEL: kernel_text() + "// tuned\n"})
    outcome, _ = ci(repo, toolchain, port_to="sm_999")
    assert outcome.exit_code == 2 and outcome.message.startswith("--port-to: no profile for architecture 'sm_999'")
    assert not outcome.kernels
    missing, _ = ci(tmp_path / "missing", toolchain)
    assert missing.exit_code == 2 and missing.message == f"--repo {tmp_path / 'missing'}: no such folder"


def test_a_deleted_kernel_is_said_and_a_renamed_one_too(repo: Path, toolchain) -> None:
    git(repo, "rm", "-q", KERNEL)
    git(repo, "commit", "-q", "-m", "drop the kernel")
    outcome, printed = ci(repo, toolchain)
    assert outcome.exit_code == 0 and outcome.message == f"no kernel to check: deleted in this change: {KERNEL}"
    assert any(KERNEL in line for line in printed)
    git(repo, "reset", "-q", "--hard", "HEAD~1")
    git(repo, "mv", KERNEL, f"{FOLDER}/vadd.ptx")
    git(repo, "commit", "-q", "-m", "rename")
    _, printed = ci(repo, toolchain)
    assert any(f"renamed from {KERNEL}" in line for line in printed)


# -- the plan, as a property ---------------------------------------------------------------------

_FOLDERS = ("a", "a/b", "c")
_paths = st.sampled_from([f"{f}/{n}" for f in _FOLDERS for n in ("k.ptx", "j.ptx", "porter.toml", "ref.py", "x.md")])


@st.composite
def _changes(draw):
    changes = []
    for path in draw(st.lists(_paths, min_size=1, max_size=6, unique=True)):
        status = draw(st.sampled_from("AMDR"))
        old = draw(_paths) if status == "R" else None
        if old == path:
            status, old = "M", None
        changes.append(Change(status, path, old, same_content=status == "R" and draw(st.booleans())))
    return changes


@given(changes=_changes(), base=st.sets(st.sampled_from([f"{f}/porter.toml" for f in _FOLDERS])),
       head=st.sets(st.sampled_from([f"{f}/porter.toml" for f in _FOLDERS])))
@settings(max_examples=300, deadline=None)
def test_with_the_base_spec_nothing_of_the_change_judges_and_no_judged_kernel_escapes(changes, base, head) -> None:
    edited = material_edits(changes, base | head, {})
    targets, skipped, _ = plan(changes, spec_from="base", specs=base, other_specs=head, folder_kernels={},
                               edited=edited)
    changed = {c.path for c in changes if c.status != "D" and c.path.endswith(".ptx")}
    checked, unchecked = [t.path for t in targets], [s.path for s in skipped]
    # Every changed kernel is checked or said to lack a trusted judgement (or both), each once.
    assert set(checked) | set(unchecked) == changed and len(set(checked)) == len(checked)
    assert len(set(unchecked)) == len(unchecked)
    for target in targets:  # judged by a spec of the base revision, never the change's
        assert target.spec in base and not target.spec_new
        if target.path in unchecked:
            continue
        # Green only where the judgement the change asks for is the base's, untouched: the head's
        # spec is the same one (or the same bytes moved), and the change edits none of its material.
        at_head = nearest_spec(target.path, head)
        moved_as_is = any(c.status == "R" and c.same_content and (c.old_path, c.path) == (target.spec, at_head)
                          for c in changes)
        assert target.spec not in edited and (at_head in (None, target.spec) or moved_as_is)
    for path in set(unchecked) - set(checked):  # a kernel with a base spec above it is never let out of its judgement
        assert nearest_spec(path, base) is None
