"""The review branch and PORT_REPORT.md, against real git in temporary repositories: the branch
holds the port, its evidence and the reproduce command, and the user's work is byte-identical after."""

from __future__ import annotations

import hashlib
import subprocess
import tempfile
from pathlib import Path

import pytest

from porter.agent.llm import SpendRecord
from porter.agent.runs import CandidateRecord
from porter.agent.session import PortResult
from porter.errors import InputError
from porter.gate.native import NativeEvidence
from porter.gate.verdict import CaseResult, Gate, OutputCheck, Status, Timing, Verdict
from porter.review.branch import branch_name, open_review_branch
from porter.review.port_report import render_port_report, reproduce_command

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "gemm_bt_tile"
SOURCE = ".version 8.0\n.target sm_80\n.address_size 64\n// source kernel\n"
PORTED = ".version 8.0\n.target sm_90a\n.address_size 64\n// ported kernel\n"
SPEC = '[kernel]\nentry = "gemm_bt_tile"\n'
BRANCH = "porter/kernel_sm80-sm_90a"


@pytest.fixture(autouse=True)
def _isolated_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No global or system git config, no identity from the environment, and a private temp folder
    so the test can see that porter's scratch worktree is gone afterwards."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_OPTIONAL_LOCKS", "0")  # the test's own `git status` must not refresh the index
    for var in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL",
                "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "EMAIL"):
        monkeypatch.delenv(var, raising=False)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    return scratch


def git(cwd: Path, *args: str, check: bool = True) -> str:
    done = subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)}: {done.stderr}")
    return done.stdout


def make_repo(tmp_path: Path, name: str = "repo") -> Path:
    repo = tmp_path / name
    git(tmp_path, "init", "-q", "-b", "main", str(repo))
    git(repo, "config", "user.name", "Test User")
    git(repo, "config", "user.email", "test@example.com")
    (repo / "k").mkdir()
    (repo / "k" / "kernel_sm80.ptx").write_text(SOURCE)
    (repo / "k" / "porter.toml").write_text(SPEC)
    (repo / "notes.txt").write_text("one\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "kernel")
    return repo


def _verdict(*, passed: bool, arch: str = "sm_90a") -> Verdict:
    out = OutputCheck("C", passed, 0.0 if passed else 3.5, 0.0, 1.2e-7 if passed else 0.4, 0 if passed else 12,
                      4096, 0, 0, 1e-2, 1e-2, "ok" if passed else "rows 0-15 wrong")
    cases = (CaseResult({"M": 64, "N": 64, "K": 16}, 0, Status.PASSED if passed else "failed",
                        "" if passed else "12 of 4096 elements differ", (out,)),)
    native = NativeEvidence(arch, "executed", "executed: HGMMA x256 (warp-level instructions)", ("HGMMA",),
                            {"HGMMA": 4}, {"HGMMA": 256}, {}, {"M": 2048, "N": 2048, "K": 1024})
    gates = (
        Gate("interface", Status.PASSED, "6 params match the spec"),
        Gate("assemble", Status.PASSED, f"ptxas -arch={arch} ok in 0.10 s"),
        Gate("equivalence", Status.PASSED if passed else "failed",
             "2 cases (size sets x seeds) equal to the reference" if passed else "1 of 2 cases failed"),
    )
    if passed:
        gates += (Gate("native", Status.PASSED, "executed: HGMMA x256"), Gate("timing", Status.PASSED, "candidate 0.4720 ms"))
    return Verdict(
        kernel="candidate.ptx", entry="gemm_bt_tile", arch=arch, status=Status.PASSED if passed else "failed",
        reason="every gate passed" if passed else "1 of 2 cases failed", gates=gates, cases=cases,
        timings=(Timing("candidate", 0.472, 0.47, 0.48, 50, 291.0, None, 0.29),
                 Timing("source", 0.9, 0.89, 0.91, 50, 150.0, None, 0.15),
                 Timing("library", 0.175, 0.17, 0.18, 50, 786.0, None, 0.79)) if passed else (),
        speedup_vs_source=1.91 if passed else None, speedup_vs_library=0.37 if passed else None,
        resources={"gemm_bt_tile": {"registers": 168 if passed else 128, "shared_bytes": 49152, "spill_stores": 0,
                                    "spill_loads": 0, "stack_frame": 0}},
        signature_sass={"HGMMA": 4 if passed else 0}, gpu="NVIDIA H200 (sm_90), driver 580.159.04",
        toolchain="ptxas 13.0.88", native=native if passed else None)


def make_result(tmp_path: Path, *, passed: bool = True) -> PortResult:
    """A two-candidate session by hand: the retarget baseline (failing) and a model candidate."""
    folder = tmp_path / "runs" / "20261202-120000-kernel_sm80-abcd" / "candidates"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "00.ptx").write_text(SOURCE.replace("sm_80", "sm_90a"))
    (folder / "01.ptx").write_text(PORTED)
    baseline = CandidateRecord(0, "retarget", 0, _verdict(passed=False), "HMMA only", folder / "00.ptx")
    model = CandidateRecord(1, "model", 1, _verdict(passed=passed), "", folder / "01.ptx")
    best = model
    return PortResult(run_id="20261202-120000-kernel_sm80-abcd", run_dir=folder.parent, status=best.status,
                      stop_reason="candidate 1 passes every gate" if passed else "round budget of 1 spent",
                      source_arch="sm_80", target="sm_90a", target_reason="sm_90a, as asked", require_native=True,
                      model="openai/gpt-test", best=best, candidates=(baseline, model),
                      spend=SpendRecord(rounds=1, prompt_tokens=1200, completion_tokens=800, usd=0.0123, wall_s=4.5))


def snapshot(repo: Path) -> dict[str, object]:
    """Everything of the user's that porter must leave alone, as bytes or text."""
    git_dir = repo / ".git"
    files = {p.relative_to(repo).as_posix(): p.read_bytes() for p in sorted(repo.rglob("*"))
             if p.is_file() and ".git" not in p.relative_to(repo).parts}
    return {
        "status": git(repo, "status", "--porcelain=v1", "--untracked-files=all"),
        "head": git(repo, "rev-parse", "HEAD"),
        "symbolic": git(repo, "symbolic-ref", "-q", "HEAD", check=False),
        "cached": git(repo, "diff", "--cached"),
        "diff": git(repo, "diff"),
        "stash": git(repo, "stash", "list"),
        "index": hashlib.sha256((git_dir / "index").read_bytes()).hexdigest(),
        "merge_head": (git_dir / "MERGE_HEAD").read_text() if (git_dir / "MERGE_HEAD").exists() else None,
        "rebase": sorted(p.name for p in (git_dir / "rebase-merge").iterdir()) if (git_dir / "rebase-merge").exists() else None,
        "worktrees": git(repo, "worktree", "list", "--porcelain"),
        "files": files,
    }


def review(result: PortResult, repo: Path, **options: object):
    return open_review_branch(result, kernel=repo / "k" / "kernel_sm80.ptx", spec_path=repo / "k" / "porter.toml",
                              **options)  # type: ignore[arg-type]


def show(repo: Path, rev: str, path: str) -> str:
    return git(repo, "show", f"{rev}:{path}")


def added(repo: Path, branch: str) -> set[str]:
    return set(git(repo, "diff", "--name-only", f"{branch}~1", branch).split())


def test_clean_repo_gets_a_branch_with_the_port_its_report_and_trailers(tmp_path, _isolated_git):
    repo = make_repo(tmp_path)
    result = make_result(tmp_path)
    before = snapshot(repo)
    outcome = review(result, repo)
    assert outcome.branch == BRANCH and outcome.warnings == () and outcome.reason == ""
    assert outcome.files == ("k/kernel_sm80.sm_90a.ptx", "k/PORT_REPORT.md")
    assert git(repo, "rev-parse", BRANCH).strip() == outcome.commit
    assert git(repo, "rev-parse", f"{BRANCH}~1") == before["head"]
    assert added(repo, BRANCH) == {"k/kernel_sm80.sm_90a.ptx", "k/PORT_REPORT.md"}
    assert show(repo, BRANCH, "k/kernel_sm80.sm_90a.ptx") == PORTED
    assert show(repo, BRANCH, "k/kernel_sm80.ptx") == SOURCE and show(repo, BRANCH, "k/porter.toml") == SPEC
    report = show(repo, BRANCH, "k/PORT_REPORT.md")
    assert "porter check k/kernel_sm80.sm_90a.ptx --spec k/porter.toml --arch sm_90a --native" in report
    message = git(repo, "log", "-1", "--format=%B", BRANCH)
    assert message.splitlines()[0] == "porter: port gemm_bt_tile to sm_90a (passed)"
    trailers = git(repo, "interpret-trailers", "--parse", input_file(tmp_path, message))
    assert trailers.splitlines() == ["Porter-Run: 20261202-120000-kernel_sm80-abcd", "Porter-Model: openai/gpt-test",
                                     "Porter-Status: passed"]
    assert git(repo, "log", "-1", "--format=%an <%ae>", BRANCH).strip() == "Test User <test@example.com>"
    assert snapshot(repo) == before
    assert list(_isolated_git.iterdir()) == []  # the scratch worktree is gone


def input_file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "message.txt"
    path.write_text(text)
    return str(path)


def test_dirty_staged_and_untracked_work_and_the_stash_stay_byte_identical(tmp_path):
    repo = make_repo(tmp_path)
    (repo / "notes.txt").write_text("stashed\n")
    git(repo, "stash", "-q")
    (repo / "notes.txt").write_text("dirty\n")
    (repo / "staged.txt").write_text("staged\n")
    git(repo, "add", "staged.txt")
    (repo / "staged.txt").write_text("staged, then changed again\n")
    (repo / "k" / "scratch.ptx").write_text("untracked\n")
    (repo / "untracked-dir").mkdir()
    (repo / "untracked-dir" / "a.txt").write_text("a\n")
    before = snapshot(repo)
    assert before["stash"] and before["cached"] and before["diff"]
    outcome = review(make_result(tmp_path), repo)
    assert outcome.branch == BRANCH
    assert snapshot(repo) == before
    assert added(repo, BRANCH) == {"k/kernel_sm80.sm_90a.ptx", "k/PORT_REPORT.md"}  # nothing of the user's


def test_detached_head_stays_detached(tmp_path):
    repo = make_repo(tmp_path)
    git(repo, "checkout", "-q", "--detach")
    before = snapshot(repo)
    outcome = review(make_result(tmp_path), repo)
    assert outcome.branch == BRANCH
    assert snapshot(repo) == before and before["symbolic"] == ""
    assert git(repo, "rev-parse", f"{BRANCH}~1") == before["head"]


def test_a_taken_name_gets_a_number(tmp_path):
    repo = make_repo(tmp_path)
    git(repo, "branch", BRANCH)
    old = git(repo, "rev-parse", BRANCH)
    first = review(make_result(tmp_path), repo)
    second = review(make_result(tmp_path), repo)
    assert (first.branch, second.branch) == (f"{BRANCH}-2", f"{BRANCH}-3")
    assert git(repo, "rev-parse", BRANCH) == old  # the existing branch did not move


@pytest.mark.parametrize("name", ["kernel sm80", "a..b", "-x.lock", "weird~^:?*[\\name", ".hidden", "@{x}"])
def test_branch_names_are_valid_refs(name):
    made = branch_name(name, "sm_90a")
    assert made.startswith("porter/")
    done = subprocess.run(["git", "check-ref-format", "--branch", made], capture_output=True, text=True, check=False)
    assert done.returncode == 0, made


def _conflict(repo: Path, how: str) -> None:
    git(repo, "switch", "-q", "-c", "theirs")
    (repo / "notes.txt").write_text("theirs\n")
    git(repo, "commit", "-q", "-am", "theirs")
    git(repo, "switch", "-q", "main")
    (repo / "notes.txt").write_text("ours\n")
    git(repo, "commit", "-q", "-am", "ours")
    if how == "merge":
        git(repo, "merge", "-q", "theirs", check=False)
        assert (repo / ".git" / "MERGE_HEAD").exists()
    else:
        git(repo, "rebase", "-q", "theirs", check=False)
        assert (repo / ".git" / "rebase-merge").exists()


@pytest.mark.parametrize("how", ["merge", "rebase"])
def test_a_conflicted_merge_or_rebase_is_left_exactly_as_it_was(tmp_path, how):
    repo = make_repo(tmp_path)
    _conflict(repo, how)
    before = snapshot(repo)
    assert "UU notes.txt" in before["status"]
    outcome = review(make_result(tmp_path), repo)
    assert outcome.branch == BRANCH
    assert snapshot(repo) == before
    assert git(repo, "rev-parse", f"{BRANCH}~1") == before["head"]
    assert added(repo, BRANCH) == {"k/kernel_sm80.sm_90a.ptx", "k/PORT_REPORT.md"}


def test_uncommitted_kernel_and_spec_are_warned_about_and_the_spec_is_carried(tmp_path):
    repo = make_repo(tmp_path)
    (repo / "k" / "kernel_sm80.ptx").write_text(SOURCE + "// edited\n")
    (repo / "k" / "porter.toml").write_text(SPEC + "# tuned tolerance\n")
    outcome = review(make_result(tmp_path), repo)
    assert any("k/kernel_sm80.ptx has uncommitted changes" in w for w in outcome.warnings)
    assert any("k/porter.toml has uncommitted changes" in w for w in outcome.warnings)
    assert added(repo, BRANCH) == {"k/kernel_sm80.sm_90a.ptx", "k/porter.toml", "k/PORT_REPORT.md"}
    assert show(repo, BRANCH, "k/porter.toml") == SPEC + "# tuned tolerance\n"
    assert show(repo, "main", "k/porter.toml") == SPEC  # the user's branch did not move


def test_an_untracked_kernel_is_warned_about(tmp_path):
    repo = make_repo(tmp_path)
    (repo / "k" / "new.ptx").write_text(SOURCE)
    outcome = open_review_branch(make_result(tmp_path), kernel=repo / "k" / "new.ptx",
                                 spec_path=repo / "k" / "porter.toml")
    assert outcome.branch == "porter/new-sm_90a"
    assert any("k/new.ptx is not committed" in w for w in outcome.warnings)


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _unusable(tmp_path: Path, case: str) -> tuple[Path, dict[str, object]]:
    """A kernel where no branch can be made, and the options that point porter at it."""
    if case == "not a repo":
        folder = tmp_path / "plain"
        folder.mkdir()
    elif case == "bare":
        folder = tmp_path / "bare.git"
        git(tmp_path, "init", "-q", "--bare", str(folder))
    elif case == "outside":
        make_repo(tmp_path)
        folder = tmp_path / "elsewhere"
        folder.mkdir()
    else:
        folder = make_repo(tmp_path) / "k"
        (tmp_path / "repo" / ".git" / "index.lock").write_text("")
    if case != "index.lock":
        (folder / "kernel_sm80.ptx").write_text(SOURCE)
        (folder / "porter.toml").write_text(SPEC)
    options: dict[str, object] = {"repo": tmp_path / "repo"} if case == "outside" else {}
    return folder, options


CASES = {"not a repo": "not in a git repository", "bare": "bare repository", "outside": "outside the repository",
         "index.lock": "index.lock exists"}


@pytest.mark.parametrize("case", list(CASES))
def test_no_usable_repository_is_an_input_error_and_writes_nothing(tmp_path, case):
    folder, options = _unusable(tmp_path, case)
    result = make_result(tmp_path)
    before = _tree(tmp_path)
    with pytest.raises(InputError, match=CASES[case]):
        open_review_branch(result, kernel=folder / "kernel_sm80.ptx", spec_path=folder / "porter.toml",
                           **options)  # type: ignore[arg-type]
    assert _tree(tmp_path) == before  # refs, objects, worktrees, files: nothing new anywhere


@pytest.mark.parametrize("case", list(CASES))
def test_with_an_output_folder_the_files_land_there_instead(tmp_path, case):
    folder, options = _unusable(tmp_path, case)
    out = tmp_path / "out"
    outcome = open_review_branch(make_result(tmp_path), kernel=folder / "kernel_sm80.ptx",
                                 spec_path=folder / "porter.toml", out_dir=out, **options)  # type: ignore[arg-type]
    assert outcome.branch is None and outcome.out_dir == out and CASES[case] in outcome.reason
    names = {Path(f).name for f in outcome.files}
    spec_copied = case != "index.lock"  # the locked repository still has HEAD's spec to compare with
    assert names == {"kernel_sm80.sm_90a.ptx", "PORT_REPORT.md", "COMMIT_MSG.txt"} | ({"porter.toml"} if spec_copied else set())
    assert (out / "kernel_sm80.sm_90a.ptx").read_text() == PORTED
    assert "Porter-Status: passed" in (out / "COMMIT_MSG.txt").read_text()
    assert f"porter check {out / 'kernel_sm80.sm_90a.ptx'}" in (out / "PORT_REPORT.md").read_text()
    written = _tree(out)
    with pytest.raises(InputError, match="does not overwrite"):
        open_review_branch(make_result(tmp_path), kernel=folder / "kernel_sm80.ptx",
                           spec_path=folder / "porter.toml", out_dir=out, **options)  # type: ignore[arg-type]
    assert _tree(out) == written


def test_a_failing_hand_made_session_is_branched_only_when_asked(tmp_path):
    repo = make_repo(tmp_path)
    result = make_result(tmp_path, passed=False)
    assert result.status == "failed"
    refs = git(repo, "for-each-ref")
    outcome = review(result, repo)
    assert outcome.branch is None and "failed" in outcome.reason
    assert git(repo, "for-each-ref") == refs
    outcome = review(result, repo, branch_on_failure=True)
    title = git(repo, "log", "-1", "--format=%s", outcome.branch).strip()
    assert title == "porter: NOT VERIFIED port of gemm_bt_tile to sm_90a (failed)"


def test_a_real_failing_session_is_committed_marked_not_verified(tmp_path, toolchain, no_gpu):
    from porter.agent.llm import Budget
    from porter.agent.session import PortRequest, PortSession
    from porter.gate.spec import load_spec

    repo = make_repo(tmp_path)
    for name in ("kernel_sm80.ptx", "porter.toml", "ref.py"):
        (repo / "k" / name).write_text((EXAMPLE / name).read_text())
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "the example")

    kernel = repo / "k" / "kernel_sm80.ptx"
    request = PortRequest(kernel=kernel, spec=load_spec(repo / "k" / "porter.toml"), to_arch="sm_90a",
                          budget=Budget(), runs_root=tmp_path / "runs")
    result = PortSession(request, toolchain=toolchain, runner=no_gpu, model=None).run()
    assert result.status == "failed"
    assert review(result, repo).branch is None
    outcome = review(result, repo, branch_on_failure=True)
    message = git(repo, "log", "-1", "--format=%B", outcome.branch)
    assert message.startswith("porter: NOT VERIFIED port of gemm_bt_tile to sm_90a (failed)\n")
    assert "Porter-Model: none" in message and "Porter-Status: failed" in message
    report = show(repo, outcome.branch, "k/PORT_REPORT.md")
    assert "# Port of `gemm_bt_tile` to sm_90a: failed (best failing candidate)" in report
    assert show(repo, outcome.branch, "k/kernel_sm80.sm_90a.ptx") == result.best.path.read_text()


def test_push_to_a_remote_and_a_failed_push_keeps_the_branch(tmp_path):
    repo = make_repo(tmp_path)
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(repo, "remote", "add", "origin", str(remote))
    outcome = review(make_result(tmp_path), repo, push="origin")
    assert outcome.pushed and outcome.push_error == ""
    assert git(remote, "rev-parse", f"refs/heads/{BRANCH}").strip() == outcome.commit
    failed = review(make_result(tmp_path), repo, push="nowhere")
    assert not failed.pushed and failed.push_error
    assert any("push" in w and "nowhere" in w for w in failed.warnings)
    assert git(repo, "rev-parse", f"refs/heads/{failed.branch}").strip() == failed.commit


def test_in_place_replaces_the_source_on_the_branch_only(tmp_path):
    repo = make_repo(tmp_path)
    before = snapshot(repo)
    outcome = review(make_result(tmp_path), repo, in_place=True)
    assert outcome.files == ("k/kernel_sm80.ptx", "k/PORT_REPORT.md")
    assert added(repo, BRANCH) == {"k/kernel_sm80.ptx", "k/PORT_REPORT.md"}
    assert show(repo, BRANCH, "k/kernel_sm80.ptx") == PORTED
    assert "porter check k/kernel_sm80.ptx --spec k/porter.toml" in show(repo, BRANCH, "k/PORT_REPORT.md")
    assert snapshot(repo) == before and (repo / "k" / "kernel_sm80.ptx").read_text() == SOURCE


def test_the_report_shows_what_a_reviewer_reads(tmp_path):
    result = make_result(tmp_path)
    command = reproduce_command("k/kernel_sm80.sm_90a.ptx", "k/porter.toml", "sm_90a", native=True)
    report = render_port_report(result, kernel_rel="k/kernel_sm80.ptx", spec_rel="k/porter.toml",
                                ported_rel="k/kernel_sm80.sm_90a.ptx", check_command=command,
                                toolchain="ptxas 13.0.88", gpu="NVIDIA H200 (sm_90), driver 580.159.04")
    assert report.startswith("# Port of `gemm_bt_tile` to sm_90a: passed\n")
    assert "| sizes | seed | status | max abs err | rel L2 | why |" in report
    assert "| M=64, N=64, K=16 | 0 | passed | 0 | 1.2e-07 | - |" in report
    assert "- executed (sm_90a): **executed** - executed: HGMMA x256 (warp-level instructions)" in report
    assert "- signature SASS for sm_90a in the cubin: HGMMA x4" in report
    assert "Speed-up vs source: 1.91x; vs library: 0.37x" in report
    assert "| before: candidate 0 (retarget) | gemm_bt_tile | 128 |" in report
    assert "| after: candidate 1 (model) | gemm_bt_tile | 168 |" in report
    assert "| openai/gpt-test | 1 | 1200 | 800 | 0.0123 | 4.5 |" in report
    assert "driver 580.159.04" in report and "20261202-120000-kernel_sm80-abcd" in report
    assert "| 1 | model | 1 | passed |" in report and "| 0 | retarget | 0 | failed |" in report
    assert "```sh\nporter check k/kernel_sm80.sm_90a.ptx --spec k/porter.toml --arch sm_90a --native\n```" in report
    assert "sanitizers (memcheck, racecheck, initcheck, synccheck): not run" in report  # what nobody checked
    assert "<" not in report.replace("<=", "")  # markdown only, no HTML


def test_the_report_of_a_failure_says_so_first(tmp_path):
    result = make_result(tmp_path, passed=False)
    report = render_port_report(result, kernel_rel="k/kernel_sm80.ptx", spec_rel="k/porter.toml",
                                ported_rel="k/kernel_sm80.sm_90a.ptx", check_command="porter check x", toolchain="",
                                gpu="")
    assert report.startswith("# Port of `gemm_bt_tile` to sm_90a: failed (best failing candidate)\n")
    assert "**Not verified.**" in report
    assert "equal to the reference over the sweep: **failed** - 1 of 2 cases failed" in report
    assert "| M=64, N=64, K=16 | 0 | failed | 3.5 | 0.4 | 12 of 4096 elements differ |" in report
    assert "- GPU and driver: none: no kernel ran" in report


def test_a_path_with_spaces_is_quoted_in_the_command():
    assert reproduce_command("my k/a.ptx", "s.toml", "sm_100a", native=False) == \
        "porter check 'my k/a.ptx' --spec s.toml --arch sm_100a"


def test_the_identity_falls_back_to_porter_only_where_the_repository_has_none(tmp_path):
    repo = make_repo(tmp_path)
    git(repo, "config", "--unset", "user.name")
    git(repo, "config", "--unset", "user.email")
    outcome = review(make_result(tmp_path), repo)
    assert git(repo, "log", "-1", "--format=%an <%ae>|%cn <%ce>", outcome.branch).strip() == \
        "porter <porter@localhost>|porter <porter@localhost>"
    assert git(repo, "config", "user.name", check=False) == ""  # nothing was written to the user's config



def test_git_variables_from_a_hook_do_not_redirect_porter_into_the_users_index(tmp_path, monkeypatch):
    repo = make_repo(tmp_path)
    (repo / "notes.txt").write_text("dirty\n")
    git(repo, "add", "notes.txt")
    monkeypatch.setenv("GIT_INDEX_FILE", str(repo / ".git" / "index"))
    before = snapshot(repo)
    assert review(make_result(tmp_path), repo).branch == BRANCH
    assert snapshot(repo) == before


def test_for_porter_ci_a_spec_linked_to_an_uncommitted_file_is_not_carried(tmp_path):
    """A pull request commits its spec as a link to the bot's untracked ``.env``: the branch (pushed
    with --push) must not carry the file's bytes."""
    repo = make_repo(tmp_path)
    (repo / ".env").write_text("OPENAI_API_KEY=sk-the-owners\n")
    (repo / "k" / "porter.toml").unlink()
    (repo / "k" / "porter.toml").symlink_to("../.env")
    git(repo, "add", "k/porter.toml")
    git(repo, "commit", "-q", "-m", "the spec, as a link")
    outcome = review(make_result(tmp_path), repo, committed_spec_only=True)
    assert added(repo, BRANCH) == {"k/kernel_sm80.sm_90a.ptx", "k/PORT_REPORT.md"}
    assert "sk-the-owners" not in git(repo, "log", "-p", "--all")
    # the link resolves to .env, which HEAD does not hold: said, and not carried (before, the branch held it)
    assert outcome.warnings == (".env in the working tree is not HEAD's: the branch carries no copy of it (the port "
                                "was checked with the spec of the revision that judged the kernel)",)


def test_a_review_branch_leaves_the_users_other_worktrees_registered(tmp_path):
    """One on a disk that is unmounted for now: its folder is missing, its record must stay."""
    repo = make_repo(tmp_path)
    away = tmp_path / "usb" / "wt"
    git(repo, "worktree", "add", "-q", "--detach", str(away))
    (away / "notes.txt").write_text("work in progress\n")
    git(away, "commit", "-q", "-am", "detached work")
    held = git(away, "rev-parse", "HEAD").strip()
    (tmp_path / "usb").rename(tmp_path / "usb-unmounted")
    review(make_result(tmp_path), repo)
    listed = git(repo, "worktree", "list", "--porcelain")
    assert str(away) in listed and held in listed
