"""``porter ci`` on real temporary git repositories, without a GPU (and one GPU test for slowdowns)."""

from __future__ import annotations

import json
import shutil
import time
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import NoGpuRunner, commit, git, plain_git

import porter.ci.bot
from porter.ci.bot import (
    Change,
    CiKernel,
    CiOutcome,
    Finding,
    Skipped,
    Target,
    exit_code,
    judge_speed,
    material_edits,
    parse_name_status,
    plan,
    run_ci,
)
from porter.ci.output import (
    MAX_ANNOTATIONS,
    annotation,
    render_annotations,
    render_junit,
    render_markdown,
)
from porter.gate.verdict import Gate, Status, Timing, Verdict

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "vector_add"
SLOW = ROOT / "tests" / "data" / "ci" / "slow_vector_add.ptx"
FOLDER = "kernels/vector_add"
KERNEL = f"{FOLDER}/kernel.ptx"
SPEC = f"{FOLDER}/porter.toml"


_plain_git = pytest.fixture(autouse=True)(plain_git)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / FOLDER).mkdir(parents=True)
    for name in ("kernel.ptx", "porter.toml", "ref.py"):
        shutil.copy(EXAMPLE / name, root / FOLDER / name)
    (root / "README.md").write_text("kernels\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "vector_add")
    return root


def kernel_text() -> str:
    return (EXAMPLE / "kernel.ptx").read_text()


def ci(repo: Path, toolchain, **options) -> tuple[CiOutcome, list[str]]:
    printed: list[str] = []
    options.setdefault("runner_factory", NoGpuRunner)
    options.setdefault("env", {})
    outcome = run_ci(repo, toolchain=toolchain, echo=printed.append, **options)
    return outcome, printed


# ---------------------------------------------------------------------------------------------
# Real repositories
# ---------------------------------------------------------------------------------------------


def test_a_kernel_that_does_not_assemble_fails_at_its_line(repo: Path, toolchain, tmp_path: Path) -> None:
    lines = kernel_text().splitlines()
    bad_line = next(i for i, line in enumerate(lines, 1) if "fma.rn.f32" in line)
    commit(repo, "typo", {KERNEL: kernel_text().replace("fma.rn.f32", "fmaa.rn.f32")})
    junit = tmp_path / "out" / "junit.xml"
    outcome, printed = ci(repo, toolchain, base="HEAD~1", annotations=True, junit=junit)
    assert outcome.exit_code == 1
    (kernel,) = outcome.kernels
    assert kernel.status == "failed" and kernel.verdict.gate("assemble").status == "failed"
    errors = [p for p in printed if p.startswith("::error ")]
    assert errors[0].startswith(f"::error file={KERNEL},line={bad_line},title=porter::ptxas -arch=sm_80: ")
    assert "fmaa" in errors[0]
    suite = ET.parse(junit).getroot()
    assert (suite.tag, suite.get("name"), suite.get("failures")) == ("testsuite", "porter", "1")
    (case,) = suite.iter("testcase")
    assert case.get("name") == KERNEL
    assert "assemble" in case.find("failure").get("message")


def test_a_change_to_other_files_only_ends_at_once(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    commit(repo, "docs", {"README.md": "kernels, documented\n"})

    def forbidden(*_args, **_kwargs):
        raise AssertionError("no toolchain or GPU is needed when no kernel changed")

    monkeypatch.setattr(porter.ci.bot, "find_toolchain", forbidden)
    started = time.perf_counter()
    outcome, printed = ci(repo, None, runner_factory=forbidden)
    assert outcome.exit_code == 0
    assert outcome.message == "no kernel changed"
    assert outcome.base_ref == "HEAD~1" and outcome.base == git(repo, "rev-parse", "HEAD~1")
    assert "no kernel changed" in printed[0]
    assert time.perf_counter() - started < 10


def test_without_a_gpu_a_valid_change_is_not_run_with_its_static_results(repo: Path, toolchain,
                                                                          tmp_path: Path) -> None:
    commit(repo, "comment", {KERNEL: kernel_text() + "// tuned\n"})
    junit, report = tmp_path / "junit.xml", tmp_path / "ci.json"
    outcome, printed = ci(repo, toolchain, base="HEAD~1", junit=junit, json_out=report,
                          summary_path=tmp_path / "summary.md")
    assert outcome.exit_code == 3
    data = json.loads(report.read_text())
    (kernel,) = data["kernels"]
    assert kernel["status"] == "not run" and kernel["path"] == KERNEL
    gates = {g["name"]: g["status"] for g in kernel["verdict"]["gates"]}
    assert gates["interface"] == gates["assemble"] == "passed"
    assert gates["equivalence"] == "not run"
    assert gates["emulation"] == "passed"  # the runner has no GPU: the cases ran in porter's PTX emulator
    assert "no usable GPU" in kernel["reason"]
    summary = (tmp_path / "summary.md").read_text()
    assert f"| `{KERNEL}` | **not run** | passed (sm_80) | yes (emulated) | - |" in summary
    (case,) = ET.parse(junit).getroot().iter("testcase")
    assert "no usable GPU" in case.find("skipped").get("message")
    assert not any(p.startswith("::") for p in printed)  # annotations are off outside GitHub Actions


def test_without_a_gpu_a_wrong_change_fails_in_emulation_and_says_so(repo: Path, toolchain) -> None:
    fma = "fma.rn.f32 \t%f4, %f2, %f1, %f3;"
    assert fma in kernel_text()
    commit(repo, "x - y", {KERNEL: kernel_text().replace(fma, "sub.f32 \t%f4, %f2, %f3;")})
    outcome, printed = ci(repo, toolchain, base="HEAD~1")
    assert outcome.exit_code == 1
    (kernel,) = outcome.kernels
    assert kernel.status == "failed" and kernel.reason.startswith("emulation: at n=1")
    assert f"| `{KERNEL}` | **failed** | passed (sm_80) | no (emulated) |" in render_markdown(outcome)
    row = next(line for line in printed[0].splitlines() if line.startswith(KERNEL))
    assert row.split()[1:6] == ["failed", "passed", "(sm_80)", "no", "(emulated)"], printed[0]


def test_the_step_summary_is_appended_to(repo: Path, toolchain, tmp_path: Path) -> None:
    commit(repo, "comment", {KERNEL: kernel_text() + "// tuned\n"})
    summary = tmp_path / "step_summary.md"
    summary.write_text("## an earlier step\n")
    env = {"GITHUB_STEP_SUMMARY": str(summary), "GITHUB_ACTIONS": "true"}
    ci(repo, toolchain, base="HEAD~1", env=env)
    ci(repo, toolchain, base="HEAD~1", env=env)
    text = summary.read_text()
    assert text.startswith("## an earlier step\n")
    assert text.count("## porter ci: 1 kernel(s) checked: 1 not run") == 2


def test_a_bad_base_is_a_configuration_error(repo: Path, toolchain, tmp_path: Path) -> None:
    outcome, printed = ci(repo, toolchain, base="no-such-branch", junit=tmp_path / "junit.xml", annotations=True)
    assert outcome.exit_code == 2
    assert "no-such-branch" in outcome.message
    assert printed[-1].startswith("::error title=porter::")
    (case,) = ET.parse(tmp_path / "junit.xml").getroot().iter("testcase")
    assert "no-such-branch" in case.find("error").get("message")


def test_the_spec_comes_from_the_base_revision(repo: Path, toolchain) -> None:
    base = git(repo, "rev-parse", "HEAD")
    spec_text = (repo / SPEC).read_text()
    commit(repo, "kernel and a spec the change should not get to use", {
        KERNEL: kernel_text() + "// tuned\n",
        SPEC: spec_text.replace("[tolerance]", "[tolerance\nbroken"),  # invalid at head
    })
    outcome, _ = ci(repo, toolchain)
    assert outcome.spec_from == "base" and outcome.spec_revision == base
    assert outcome.exit_code == 1  # checked with the base spec; the change's spec needs trust to pass
    assert [s.path for s in outcome.skipped] == [KERNEL] and "needs a trusted spec" in outcome.skipped[0].reason
    allowed, _ = ci(repo, toolchain, allow_unchecked=True)
    assert allowed.exit_code == 3  # static gates passed, no GPU
    assert outcome.kernels[0].verdict.gate("assemble").status == "passed"
    assert outcome.notes == (f"{SPEC}: edited in this change, not used here: specs, references and their Python "
                             "come from the base revision",)
    assert f"this change edits {SPEC}: checked against the base revision's copy" in outcome.kernels[0].spec_note

    trusted, _ = ci(repo, toolchain, spec_from="head")
    assert trusted.exit_code == 2 and trusted.spec_revision == git(repo, "rev-parse", "HEAD")
    (kernel,) = trusted.kernels
    assert kernel.config_error and "TOML syntax error" in kernel.reason
    assert kernel.findings[0].path == SPEC


def test_a_looser_tolerance_in_the_change_is_not_used(repo: Path, toolchain) -> None:
    base = git(repo, "rev-parse", "HEAD")
    loose = (repo / SPEC).read_text().replace("atol = 1e-5, rtol = 1e-4", "atol = 1e9, rtol = 1e9")
    commit(repo, "loosen", {SPEC: loose, KERNEL: kernel_text() + "// tuned\n"})
    outcome, _ = ci(repo, toolchain, base="HEAD~1")
    assert outcome.spec_revision == base
    assert git(repo, "show", f"{outcome.spec_revision}:{SPEC}") == (EXAMPLE / "porter.toml").read_text().strip()


def test_a_spec_only_change_is_noted_under_the_base_spec_and_rechecks_under_the_head_spec(
        repo: Path, toolchain) -> None:
    commit(repo, "ref", {f"{FOLDER}/ref.py": (EXAMPLE / "ref.py").read_text() + "# edited\n"})
    outcome, _ = ci(repo, toolchain)
    assert (outcome.exit_code, outcome.message) == (0, "no kernel changed")
    assert outcome.notes and outcome.notes[0].startswith(f"{FOLDER}/ref.py: edited in this change, not used here")
    rechecked, _ = ci(repo, toolchain, spec_from="head")
    assert rechecked.exit_code == 3
    (kernel,) = rechecked.kernels
    assert kernel.path == KERNEL and kernel.base_path is None  # unchanged: nothing to time it against


def test_a_kernel_added_with_its_own_new_spec_needs_a_trusted_spec(repo: Path, toolchain, tmp_path: Path) -> None:
    commit(repo, "new kernel", {
        "kernels/copy/kernel.ptx": kernel_text(),
        "kernels/copy/porter.toml": (EXAMPLE / "porter.toml").read_text(),
        "kernels/copy/ref.py": (EXAMPLE / "ref.py").read_text(),
    })
    outcome, printed = ci(repo, toolchain, summary_path=tmp_path / "summary.md")
    assert not outcome.kernels and outcome.exit_code == 1
    (skipped,) = outcome.skipped
    assert skipped.path == "kernels/copy/kernel.ptx"
    assert skipped.reason.startswith("not checked: needs a trusted spec: its spec kernels/copy/porter.toml is new")
    assert "needs a trusted spec" in "\n".join(printed)
    assert "needs a trusted spec" in (tmp_path / "summary.md").read_text()
    allowed, _ = ci(repo, toolchain, allow_unchecked=True)
    assert allowed.exit_code == 0 and allowed.skipped
    trusted, _ = ci(repo, toolchain, spec_from="head")
    (kernel,) = trusted.kernels
    assert kernel.path == "kernels/copy/kernel.ptx" and kernel.spec_new and "spec new in this change" in kernel.spec_note
    assert trusted.exit_code == 3 and kernel.verdict.gate("assemble").status == "passed"  # no GPU here


def test_a_new_kernel_with_a_wrong_new_spec_fails_on_its_own_spec(repo: Path, toolchain) -> None:
    spec = (EXAMPLE / "porter.toml").read_text().replace('entry = "vector_add"', 'entry = "vadd"')
    commit(repo, "new kernel", {"kernels/copy/kernel.ptx": kernel_text(), "kernels/copy/porter.toml": spec,
                                "kernels/copy/ref.py": (EXAMPLE / "ref.py").read_text()})
    outcome, _ = ci(repo, toolchain, spec_from="head")
    assert outcome.exit_code == 1 and "no .entry 'vadd'" in outcome.kernels[0].reason


def test_renaming_a_kernels_folder_checks_it_against_the_base_spec(repo: Path, toolchain) -> None:
    """#12.10: a folder renamed in the pull request made the spec "new", the kernel was skipped, exit 0."""
    git(repo, "mv", FOLDER, "kernels/vadd")
    (repo / "kernels/vadd/kernel.ptx").write_text(kernel_text().replace("fma.rn.f32", "fmaa.rn.f32"))
    (repo / "kernels/vadd/porter.toml").write_text((EXAMPLE / "porter.toml").read_text()
                                                   .replace("atol = 1e-5, rtol = 1e-4", "atol = 1e9, rtol = 1e9"))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "move the folder, loosen its spec, break the kernel")
    outcome, _ = ci(repo, toolchain)
    (kernel,) = outcome.kernels
    assert kernel.path == "kernels/vadd/kernel.ptx" and kernel.spec == SPEC  # the base revision's spec judges
    assert "moved" in kernel.spec_note or SPEC in kernel.spec_note
    assert kernel.status == "failed" and outcome.exit_code == 1
    assert [s.path for s in outcome.skipped] == ["kernels/vadd/kernel.ptx"]  # its spec moved with edits


def test_a_spec_that_moves_unpaired_leaves_the_new_kernel_unchecked_and_that_fails(repo: Path, toolchain,
                                                                                  tmp_path: Path) -> None:
    # Too different for git to pair with the removed spec (git's similarity is under 50%).
    spec = "".join(f"# rewritten, note {i}\n" for i in range(120)) + (EXAMPLE / "porter.toml").read_text()
    git(repo, "rm", "-q", SPEC)
    commit(repo, "a 'new' kernel and spec; the old spec goes", {
        "kernels/copy/kernel.ptx": kernel_text(), "kernels/copy/porter.toml": spec,
        "kernels/copy/ref.py": (EXAMPLE / "ref.py").read_text()})
    junit = tmp_path / "junit.xml"
    outcome, printed = ci(repo, toolchain, annotations=True, junit=junit)
    assert outcome.skipped, (outcome.message, outcome.kernels)
    (skipped,) = outcome.skipped
    assert skipped.path == "kernels/copy/kernel.ptx" and SPEC in skipped.reason
    assert outcome.exit_code == 1 and "not checked" in outcome.message
    assert any(p.startswith("::error file=kernels/copy/kernel.ptx,title=porter::not checked") for p in printed)
    assert ET.parse(junit).getroot().get("failures") == "1"
    allowed, _ = ci(repo, toolchain, allow_unchecked=True)
    assert allowed.exit_code == 0 and "allowed by --allow-unchecked" in allowed.message


def test_a_kernel_in_a_subfolder_is_checked_against_the_spec_above_it(repo: Path, toolchain) -> None:
    """#12.10: a wrong kernel added in a subfolder with no porter.toml beside it gave "no kernel changed"."""
    commit(repo, "variant", {f"{FOLDER}/variants/fast.ptx": kernel_text().replace("fma.rn.f32", "fmaa.rn.f32")})
    outcome, _ = ci(repo, toolchain)
    (kernel,) = outcome.kernels
    assert (kernel.path, kernel.spec) == (f"{FOLDER}/variants/fast.ptx", SPEC)
    assert kernel.status == "failed" and outcome.exit_code == 1


def test_a_changed_kernel_without_any_spec_fails_unless_allowed(repo: Path, toolchain) -> None:
    commit(repo, "stray kernel", {"tools/scratch.ptx": kernel_text()})
    outcome, _ = ci(repo, toolchain)
    assert outcome.exit_code == 1 and not outcome.kernels
    (skipped,) = outcome.skipped
    assert skipped.path == "tools/scratch.ptx" and "no porter.toml" in skipped.reason
    allowed, _ = ci(repo, toolchain, allow_unchecked=True)
    assert allowed.exit_code == 0


def test_a_kernels_own_porter_launch_line_decides_its_entry(tmp_path: Path, toolchain) -> None:
    """#13.11: ci said "no .entry 'gemm_bf16_sm80', which porter.toml names" where porter check accepts."""
    family = ROOT / "examples" / "gemm_bf16"
    root = tmp_path / "repo"
    folder = root / "examples" / "gemm_bf16"
    folder.mkdir(parents=True)
    for name in ("kernel_sm80.ptx", "kernel_sm90a.ptx", "porter.toml", "ref.py"):
        shutil.copy(family / name, folder / name)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "gemm family")
    commit(root, "tune", {"examples/gemm_bf16/kernel_sm90a.ptx": (family / "kernel_sm90a.ptx").read_text() + "// tuned\n"})
    outcome, _ = ci(root, toolchain)
    (kernel,) = outcome.kernels
    assert "no .entry" not in kernel.reason, kernel.reason
    assert kernel.verdict.entry == "gemm_bf16_sm90a" and kernel.verdict.gate("assemble").status == "passed"
    assert outcome.exit_code == 3  # no GPU here


def test_the_work_tree_is_neither_read_nor_touched(repo: Path, toolchain) -> None:
    commit(repo, "comment", {KERNEL: kernel_text() + "// tuned\n"})
    (repo / KERNEL).write_text("this uncommitted text would not parse\n")
    outcome, _ = ci(repo, toolchain, base="HEAD~1")
    assert outcome.exit_code == 3  # the committed head was checked, not the work tree
    assert git(repo, "status", "--porcelain") == f"M {KERNEL}"
    assert (repo / KERNEL).read_text() == "this uncommitted text would not parse\n"


def test_the_default_base_is_the_merge_base_with_origin_main(repo: Path, toolchain) -> None:
    fork = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "-b", "feature")
    commit(repo, "comment", {KERNEL: kernel_text() + "// tuned\n"})
    git(repo, "checkout", "-q", "main")
    commit(repo, "main moves on", {"README.md": "later\n"})
    git(repo, "update-ref", "refs/remotes/origin/main", "main")
    git(repo, "checkout", "-q", "feature")
    commit(repo, "docs", {"NOTES.md": "n\n"})
    outcome, _ = ci(repo, toolchain, port_to="sm_90a")
    assert outcome.base == fork and outcome.base_ref == "merge-base of HEAD and origin/main"
    assert [k.path for k in outcome.kernels] == [KERNEL]  # README.md on main is not this change's
    assert outcome.port_to == "sm_90a"
    # No model: the port is the retarget alone; sm_90a cannot run here, so it is not proposed.
    (port,) = outcome.ports
    assert port.path == KERNEL and port.branch is None and port.run_id
    assert f"port of {KERNEL} to sm_90a: " in render_markdown(outcome)


def test_port_to_runs_a_scripted_port_and_proposes_only_what_passed(repo: Path, toolchain) -> None:
    tile = ROOT / "examples" / "gemm_bt_tile"
    folder = "kernels/gemm_bt_tile"
    commit(repo, "add the tile gemm", {f"{folder}/{n}": (tile / n).read_text()
                                       for n in ("kernel_sm80.ptx", "porter.toml", "ref.py")})
    commit(repo, "retune", {f"{folder}/kernel_sm80.ptx": (tile / "kernel_sm80.ptx").read_text() + "// retuned\n"})
    outcome, printed = ci(repo, toolchain, base="HEAD~1", port_to="sm_90a",
                          model=f"replay:{tile / 'scripted_session.toml'}")
    (port,) = outcome.ports
    # Without a GPU the third reply cannot be verified: the port stops at "not run on target
    # hardware", and the bot makes no branch of it, nor does the port change the exit code (3: no GPU).
    assert port.status == "not run on target hardware" and port.branch is None
    assert outcome.exit_code == 3
    assert not git(repo, "branch", "--list", "porter/*")
    assert any(f"port of {folder}/kernel_sm80.ptx to sm_90a: not run on target hardware" in line
               for line in "\n".join(printed).splitlines())


def test_port_to_needs_the_checked_out_head(repo: Path, toolchain) -> None:
    commit(repo, "comment", {KERNEL: kernel_text() + "// tuned\n"})
    commit(repo, "docs", {"NOTES.md": "n\n"})
    outcome, _ = ci(repo, toolchain, base="HEAD~2", head="HEAD~1", port_to="sm_90a")
    (port,) = outcome.ports
    assert port.status == "not ported" and "--head must be HEAD" in port.reason


def test_a_renamed_kernel_is_checked_with_its_old_path_as_base(repo: Path, toolchain) -> None:
    git(repo, "mv", KERNEL, f"{FOLDER}/kernel_v2.ptx")
    git(repo, "commit", "-q", "-m", "rename")
    outcome, _ = ci(repo, toolchain)
    (kernel,) = outcome.kernels
    assert (kernel.path, kernel.base_path) == (f"{FOLDER}/kernel_v2.ptx", KERNEL)


def test_a_kernel_without_the_spec_entry_fails(repo: Path, toolchain) -> None:
    commit(repo, "rename entry", {KERNEL: kernel_text().replace("vector_add", "vadd")})
    outcome, printed = ci(repo, toolchain, annotations=True)
    assert outcome.exit_code == 1
    assert "no .entry 'vector_add'" in outcome.kernels[0].reason
    assert printed[-1].startswith(f"::error file={KERNEL},title=porter::")


# ---------------------------------------------------------------------------------------------
# Pure parts
# ---------------------------------------------------------------------------------------------


def _timed(head_ms: float, base_ms: float, status: Status = Status.PASSED) -> Verdict:
    return Verdict(kernel=KERNEL, entry="vector_add", arch="sm_80", status=status, reason="",
                   gates=(Gate("equivalence", status, ""), Gate("timing", Status.PASSED, "")),
                   timings=(Timing("candidate", head_ms, head_ms, head_ms, 50), Timing("source", base_ms, base_ms, base_ms, 50)),
                   speedup_vs_source=base_ms / head_ms)


def test_a_slowdown_beyond_the_allowed_one_fails_with_the_ratio() -> None:
    slow = judge_speed(_timed(1.25, 1.0), 0.03)
    assert slow.status == "failed"
    assert slow.summary.startswith("1.25x slower than the base kernel (1.2500 ms vs 1.0000 ms): 25.0% more time")
    assert judge_speed(_timed(1.02, 1.0), 0.03).status == "passed"
    assert judge_speed(_timed(1.02, 1.0), 0.01).status == "failed"
    faster = judge_speed(_timed(0.5, 1.0), 0.0)
    assert faster.status == "passed" and faster.speedup == 2.0


def test_an_unmeasured_speed_is_not_run_with_the_reason() -> None:
    unloadable = Verdict(kernel=KERNEL, entry="vector_add", arch="sm_90a", status=Status.PASSED, reason="",
                         gates=(Gate("timing", Status.PASSED, "candidate 0.0100 ms"),),
                         warnings=("source kernel base/kernel.ptx: needs a sm_100a GPU to run",))
    speed = judge_speed(unloadable, 0.03)
    assert speed.status == "not run" and speed.summary == "not measured: source kernel base/kernel.ptx: needs a sm_100a GPU to run"
    untimed = Verdict(kernel=KERNEL, entry="vector_add", arch="sm_80", status=Status.PASSED, reason="",
                      gates=(Gate("timing", Status.ERROR, "timing failed: the worker died"),))
    assert judge_speed(untimed, 0.03).summary == "not measured: timing failed: the worker died"


def _kernel(status: Status, config_error: bool = False) -> CiKernel:
    return CiKernel(KERNEL, SPEC, KERNEL, status, "", config_error=config_error)


def test_exit_codes_take_the_most_severe() -> None:
    assert exit_code([]) == 0
    assert exit_code([_kernel(Status.PASSED)]) == 0
    assert exit_code([_kernel(Status.PASSED), _kernel(Status.NOT_RUN)]) == 3
    assert exit_code([_kernel(Status.NOT_RUN), _kernel(Status.ERROR)]) == 3
    assert exit_code([_kernel(Status.NOT_RUN), _kernel(Status.FAILED)]) == 1
    assert exit_code([_kernel(Status.FAILED), _kernel(Status.ERROR, config_error=True)]) == 2


def test_name_status_with_renames() -> None:
    raw = b"M\0a/kernel.ptx\0R087\0old/k.ptx\0new/k.ptx\0D\0gone.ptx\0A\0README.md\0"
    assert parse_name_status(raw) == (
        Change("M", "a/kernel.ptx"), Change("R", "new/k.ptx", "old/k.ptx"), Change("D", "gone.ptx"),
        Change("A", "README.md"),
    )
    assert parse_name_status(b"") == ()


def test_plan_picks_kernels_with_a_spec_at_the_spec_revision() -> None:
    changes = [Change("M", "a/kernel.ptx"), Change("A", "b/kernel.ptx"), Change("M", "c/kernel.ptx"),
               Change("D", "a/old.ptx"), Change("M", "a/ref.py"), Change("M", "docs/x.md")]
    edited = material_edits(changes, {"a/porter.toml", "b/porter.toml"}, {})
    assert edited == {"a/porter.toml": ("a/ref.py",)}
    targets, skipped, notes = plan(changes, spec_from="base", specs={"a/porter.toml"},
                                   other_specs={"a/porter.toml", "b/porter.toml"}, folder_kernels={}, edited=edited)
    (target,) = targets
    assert (target.path, target.base_path, target.spec) == ("a/kernel.ptx", "a/kernel.ptx", "a/porter.toml")
    assert "this change edits a/ref.py" in target.spec_note
    assert [s.path for s in skipped] == ["a/kernel.ptx", "b/kernel.ptx", "c/kernel.ptx"]
    assert skipped[0].reason.startswith("needs a trusted spec: this change edits a/ref.py")
    assert "needs a trusted spec" in skipped[1].reason and "no porter.toml" in skipped[2].reason
    assert notes == ("a/old.ptx: deleted in this change",
                     "a/ref.py: edited in this change, not used here: specs, references and their Python come from "
                     "the base revision")
    targets, _, notes = plan([Change("M", "a/ref.py")], spec_from="head", specs={"a/porter.toml"}, other_specs=set(),
                             folder_kernels={"a/porter.toml": ["a/kernel.ptx"]}, edited={"a/porter.toml": ("a/ref.py",)})
    assert targets == (Target("a/kernel.ptx", None, "a/porter.toml"),) and notes == ()


def test_plan_walks_up_and_follows_moves() -> None:
    # The nearest spec above the kernel's folder governs it.
    (t,), _, _ = plan([Change("A", "a/sub/deep/k.ptx")], spec_from="base", specs={"a/porter.toml"},
                      other_specs={"a/porter.toml"}, folder_kernels={})
    assert t.spec == "a/porter.toml" and not t.spec_new
    # A spec moved with its kernel: the base copy at the old path judges.
    moved = [Change("R", "new/porter.toml", "old/porter.toml"), Change("R", "new/k.ptx", "old/k.ptx")]
    (t,), skipped, _ = plan(moved, spec_from="base", specs={"old/porter.toml"}, other_specs={"new/porter.toml"},
                            folder_kernels={})
    assert (t.spec, t.base_path, t.spec_new, skipped) == ("old/porter.toml", "old/k.ptx", False, ())
    # The spec moved, the kernel was rewritten (unpaired): the spec's move still finds the base copy.
    moved = [Change("R", "new/porter.toml", "old/porter.toml"), Change("D", "old/k.ptx"), Change("A", "new/k.ptx")]
    (t,), _, _ = plan(moved, spec_from="base", specs={"old/porter.toml"}, other_specs={"new/porter.toml"},
                      folder_kernels={})
    assert t.spec == "old/porter.toml" and "moved" in t.spec_note
    # A closer spec added beside an existing kernel does not get to judge it.
    (t,), _, _ = plan([Change("M", "a/b/k.ptx"), Change("A", "a/b/porter.toml")], spec_from="base",
                      specs={"a/porter.toml"}, other_specs={"a/porter.toml", "a/b/porter.toml"}, folder_kernels={})
    assert t.spec == "a/porter.toml" and not t.spec_new
    # Deleting the spec does not stop the base copy from judging.
    (t,), _, _ = plan([Change("M", "a/k.ptx"), Change("D", "a/porter.toml")], spec_from="base",
                      specs={"a/porter.toml"}, other_specs=set(), folder_kernels={})
    assert t.spec == "a/porter.toml"


def test_annotations_are_escaped_and_capped() -> None:
    finding = Finding("dir,x/k:1.ptx", 7, "50% wrong\r\nsee: details")
    assert annotation(finding) == "::error file=dir%2Cx/k%3A1.ptx,line=7,title=porter::50%25 wrong%0D%0Asee: details"
    many = tuple(Finding(KERNEL, n, f"error {n}") for n in range(1, 14))
    outcome = CiOutcome(1, "1 kernel(s) checked: 1 failed",
                        kernels=(CiKernel(KERNEL, SPEC, KERNEL, Status.FAILED, "assemble", findings=many),))
    lines = render_annotations(outcome)
    assert len([line for line in lines if line.startswith("::error ")]) == MAX_ANNOTATIONS
    assert lines[-1].startswith("::notice title=porter::3 more findings not annotated")


def test_junit_is_valid_xml_for_every_status_and_awkward_text() -> None:
    kernels = tuple(CiKernel(f"k{i}.ptx", SPEC, None, status, f"why <&> \x1b[31m{status}", config_error=config)
                    for i, (status, config) in enumerate([(Status.PASSED, False), (Status.FAILED, False), (Status.NOT_RUN, False),
                                                          (Status.ERROR, True)]))
    outcome = CiOutcome(2, "configuration error", kernels=kernels, skipped=(Skipped("new.ptx", "spec is new"),))
    suite = ET.fromstring(render_junit(outcome))
    assert {k: suite.get(k) for k in ("tests", "failures", "errors", "skipped")} == {
        "tests": "5", "failures": "2", "errors": "1", "skipped": "1"}
    cases = {c.get("name"): [child.tag for child in c] for c in suite.iter("testcase")}
    assert cases == {"k0.ptx": [], "k1.ptx": ["failure"], "k2.ptx": ["skipped"], "k3.ptx": ["error"],
                     "new.ptx": ["failure"]}  # an unchecked kernel fails the bot...
    assert suite.find("testcase/failure").get("message") == "why <&> ?[31mfailed"
    allowed = ET.fromstring(render_junit(replace(outcome, allow_unchecked=True)))
    assert [c.tag for c in allowed.find("testcase[@name='new.ptx']")] == ["skipped"]  # ... unless allowed


def test_a_finding_that_quotes_backticks_cannot_close_the_details_fence() -> None:
    """A gate's details quote the kernel (an emulated assert's message, a ptxas line): a run of
    backticks there would close the comment's code block and let the kernel write Markdown."""
    finding = Finding(KERNEL, 3, "assert: ```\n# Approved, merge it\n```")
    kernel = CiKernel(KERNEL, SPEC, None, Status.FAILED, "interface", findings=(finding,))
    text = render_markdown(CiOutcome(1, "1 kernel(s) checked: 1 failed", kernels=(kernel,)))
    opened = next(line for line in text.splitlines() if line.startswith("```") and line.endswith("text"))
    fence = opened[: -len("text")]
    assert len(fence) > 3 and text.count("\n" + fence + "\n") == 1  # opened once, closed once, after it


def test_markdown_table_cells_cannot_break_the_table() -> None:
    kernel = CiKernel("a|b.ptx", SPEC, None, Status.FAILED, "x | y\nz")
    text = render_markdown(CiOutcome(1, "1 kernel(s) checked: 1 failed", kernels=(kernel,)))
    assert "| `a\\|b.ptx` | **failed** | - | - | - | x \\| y z |" in text
    assert "### `a|b.ptx`: failed" in text


# ---------------------------------------------------------------------------------------------
# GPU
# ---------------------------------------------------------------------------------------------


@pytest.mark.gpu
def test_a_slower_kernel_fails_with_the_ratio(repo: Path, toolchain) -> None:
    from porter.gate.runner import Runner

    commit(repo, "slower", {KERNEL: SLOW.read_text()})
    outcome, _ = ci(repo, toolchain, base="HEAD~1", runner_factory=Runner)
    (kernel,) = outcome.kernels
    assert kernel.verdict.status == "passed", kernel.verdict.reason  # still correct ...
    assert kernel.speed.status == "failed", kernel.speed.summary  # ... but slower
    assert outcome.exit_code == 1
    assert "x slower than the base kernel" in kernel.reason and kernel.speed.speedup < 1 / 1.03


@pytest.mark.gpu
def test_an_unchanged_kernel_keeps_its_speed(repo: Path, toolchain) -> None:
    from porter.gate.runner import Runner

    commit(repo, "comment", {KERNEL: kernel_text() + "// tuned\n"})
    outcome, _ = ci(repo, toolchain, base="HEAD~1", runner_factory=Runner)
    (kernel,) = outcome.kernels
    assert outcome.exit_code == 0, kernel.reason
    assert kernel.speed.status == "passed" and kernel.speed.speedup is not None


@pytest.mark.gpu
def test_a_change_that_fixes_a_wrong_kernel_passes_and_is_timed(repo: Path, toolchain) -> None:
    """The base kernel is the speed baseline only: a head that differs from it because it is right passes."""
    from porter.gate.runner import Runner

    wrong = kernel_text().replace("%f4, %f2, %f1, %f3;", "%f4, %f3, %f1, %f2;")  # alpha * y + x
    assert wrong != kernel_text()
    commit(repo, "wrong", {KERNEL: wrong})
    commit(repo, "fix", {KERNEL: kernel_text()})
    outcome, _ = ci(repo, toolchain, base="HEAD~1", runner_factory=Runner)
    (kernel,) = outcome.kernels
    assert kernel.verdict.status == "passed", kernel.verdict.reason
    assert kernel.speed.speedup is not None, kernel.speed.summary


def test_port_to_with_a_model_that_cannot_be_called_ports_nothing_and_says_why(repo: Path, toolchain,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    commit(repo, "comment", {KERNEL: kernel_text() + "// tuned\n"})
    outcome, _ = ci(repo, toolchain, base="HEAD~1", port_to="sm_90a", model="openai/gpt-4o")
    (port,) = outcome.ports
    assert port.status == "not ported" and "OPENAI_API_KEY is not set" in port.reason
    assert outcome.exit_code == 3  # the ports never change the bot's exit code


def test_ci_runs_from_a_subfolder_of_the_repository(repo: Path, toolchain) -> None:
    commit(repo, "comment", {KERNEL: kernel_text() + "// tuned\n"})
    outcome, _ = ci(repo / FOLDER, toolchain, base="HEAD~1")
    assert [k.path for k in outcome.kernels] == [KERNEL] and outcome.exit_code == 3


def test_port_to_writes_no_run_record_through_a_link_the_pull_request_commits(repo: Path, toolchain,
                                                                               tmp_path: Path) -> None:
    outside = tmp_path / "another-project"
    outside.mkdir()
    (repo / ".porter").symlink_to(outside)
    (repo / KERNEL).write_text(kernel_text() + "// tuned\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "tuned, and .porter elsewhere")
    outcome, _ = ci(repo, toolchain, base="HEAD~1", port_to="sm_90a")
    (port,) = outcome.ports
    assert port.status == "not ported" and ".porter is a symbolic link in the checkout" in port.reason
    assert not any(outside.iterdir())
