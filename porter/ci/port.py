"""``porter ci --port-to ARCH``: a budgeted port of each changed kernel, proposed as a review branch.

A pull request's head is untrusted, so a port runs on trusted material only: the spec, reference
and derive code of the revision that judged the kernel (the base revision; the head's only with
``--trust-head``) and the base revision's agents (``.porter/agents``), all written from git objects
into a temporary folder that stands in for the repository. The kernel ported is the head's (PTX is
data: it runs on the GPU, never as Python). The model and its endpoint are the bot's own (its
``--model``/``--api-base`` flags or ``PORTER_MODEL``/``PORTER_API_BASE``): nothing in the checkout
chooses where a request carrying the bot's key goes. Each kernel's port gets a worker process of
its own.

The review branch starts at HEAD, so ports run only when ``--head`` is HEAD. A port is proposed
(branch, pushed with ``--push``) only when it passed; any other outcome is reported with its
status word and makes no branch. Ports never change the bot's exit code: a port that fails is not
a failing pull request.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from porter.ci.change import CiKernel, CiOutcome, CiPort, spec_candidates
from porter.ci.revision import write_file, write_folder, write_spec_folder
from porter.errors import PorterError
from porter.gate.runner.client import opened
from porter.gate.verdict import NoJudgement, Status
from porter.gitcmd import GitRepo

AGENTS = ".porter/agents"


def _spec_at_head(repo: Path, kernel: str, checked_with: str) -> Path:
    """The spec as it stands in the checked-out tree, for the review branch: the nearest porter.toml
    above the kernel (the one the kernel was checked with may be the base revision's copy at a path
    the change moved)."""
    return next((repo / c for c in spec_candidates(kernel) if (repo / c).is_file()), repo / checked_with)


def _linked(root: Path, paths: tuple[str, ...]) -> str:
    """The first of ``paths`` (under ``root``) that is a symbolic link, or "": the checkout is the
    pull request's, and a link it commits could send porter's writes out of the repository."""
    return next((p for p in paths if (root / p).is_symlink()), "")


def trusted_tree(git: GitRepo, outcome: CiOutcome, kernel: CiKernel, root: Path) -> tuple[Path, Path]:
    """Write under ``root`` what porting ``kernel`` may read: its spec folder from the revision that
    judged it, the base revision's agents, and the head's kernel. Returns (kernel file, spec file)."""
    spec_file = write_spec_folder(git, outcome.head if kernel.spec_new else outcome.spec_revision, kernel.spec, root)
    if not (root / AGENTS).exists():
        (root / AGENTS).mkdir(parents=True)
        write_folder(git, outcome.base, AGENTS, root)
    return write_file(git, outcome.head, kernel.path, root), spec_file


def port_changed(outcome: CiOutcome, repo: Path, *, to_arch: str, model: str | None, api_base: str | None,
                 budget: Any, push: str | None, toolchain: Any, runner_factory: Any) -> tuple[CiPort, ...]:
    """Port every checked kernel of ``outcome`` to ``to_arch`` (see the module docstring)."""
    from porter.agent.model_choice import check_model, make_model
    from porter.agent.session import run_port
    from porter.gate.spec import load_spec
    from porter.review.branch import open_review_branch

    kernels = [k for k in outcome.kernels if not k.config_error]
    if not kernels:
        return ()
    git = GitRepo.open(repo)
    if outcome.head != git.commit("HEAD"):
        why = "not ported: --port-to ports the checked-out revision, so --head must be HEAD"
        return tuple(CiPort(k.path, NoJudgement.NOT_PORTED, why) for k in kernels)
    try:  # a model that cannot be called is said once, before any port starts
        check_model(model, api_base=api_base, env=os.environ)
    except PorterError as err:
        return tuple(CiPort(k.path, NoJudgement.NOT_PORTED, f"not ported: {err}") for k in kernels)
    runs_root, linked = git.root / ".porter" / "runs", _linked(git.root, (".porter", ".porter/runs"))
    if linked:
        why = f"not ported: {linked} is a symbolic link in the checkout, and no run record is written through one"
        return tuple(CiPort(k.path, NoJudgement.NOT_PORTED, why) for k in kernels)
    ports = []
    with tempfile.TemporaryDirectory(prefix="porter-ci-port-") as tmp:
        root = Path(tmp).resolve()
        for k in kernels:
            try:
                kernel, spec_file = trusted_tree(git, outcome, k, root)
                with opened(runner_factory) as runner:
                    result = run_port(kernel, load_spec(spec_file), to_arch, toolchain=toolchain, runner=runner,
                                      model=make_model(model, api_base=api_base), budget=budget, repo_root=root,
                                      runs_root=runs_root)
            except PorterError as err:
                ports.append(CiPort(k.path, NoJudgement.NOT_PORTED, f"not ported: {err}"))
                continue
            if result.status != Status.PASSED:
                ports.append(CiPort(k.path, result.status, f"{result.stop_reason}; no branch for a port that did not pass",
                                    result.run_id))
                continue
            review = open_review_branch(result, kernel=git.root / k.path, spec_path=_spec_at_head(git.root, k.path, k.spec),
                                        push=push, committed_spec_only=True)
            ports.append(CiPort(k.path, result.status, result.stop_reason, result.run_id, review.branch, review.pushed,
                                review.warnings + ((review.push_error,) if review.push_error else ())))
    return tuple(ports)
