"""``porter ci --port-to ARCH``: a budgeted port of each changed kernel, proposed as a review branch.

Ports are made from the checked-out revision (the review branch starts at HEAD), with the spec as
it stands there, so they run only when ``--head`` is HEAD. A port is proposed (branch, pushed
with ``--push``) only when it passed; any other outcome is reported with its status word and
makes no branch. Ports never change the bot's exit code: a port that fails is not a failing pull
request.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from porter.ci.change import CiOutcome, CiPort, spec_candidates
from porter.errors import PorterError
from porter.gate.runner.client import opened
from porter.gitcmd import GitRepo


def _spec_at_head(repo: Path, kernel: str, checked_with: str) -> Path:
    """The spec as it stands in the checked-out tree: the nearest porter.toml above the kernel (the
    one the kernel was checked with may be the base revision's copy at a path the change moved)."""

    return next((repo / c for c in spec_candidates(kernel) if (repo / c).is_file()), repo / checked_with)


def port_changed(outcome: CiOutcome, repo: Path, *, to_arch: str, model: str | None, api_base: str | None,
                 budget: Any, push: str | None, toolchain: Any, runner_factory: Any) -> tuple[CiPort, ...]:
    """Port every checked kernel of ``outcome`` (a CiOutcome) to ``to_arch``."""
    from porter.agent.llm import check_model, make_model
    from porter.agent.session import run_port
    from porter.gate.spec import load_spec
    from porter.review.branch import open_review_branch

    kernels = [k for k in outcome.kernels if not k.config_error]
    if not kernels:
        return ()

    if outcome.head != GitRepo.open(repo).commit("HEAD"):
        why = "not ported: --port-to ports the checked-out revision, so --head must be HEAD"
        return tuple(CiPort(k.path, "not ported", why) for k in kernels)
    try:  # a model that cannot be called is said once, before any port starts
        check_model(model, api_base=api_base, env=os.environ)
    except PorterError as err:
        return tuple(CiPort(k.path, "not ported", f"not ported: {err}") for k in kernels)
    ports = []
    with opened(runner_factory) as runner:
        for k in kernels:
            kernel, spec_path = repo / k.path, _spec_at_head(repo, k.path, k.spec)
            try:
                result = run_port(kernel, load_spec(spec_path), to_arch, toolchain=toolchain, runner=runner,
                                  model=make_model(model, api_base=api_base), budget=budget, repo_root=repo)
            except PorterError as err:
                ports.append(CiPort(k.path, "not ported", f"not ported: {err}"))
                continue
            if result.status != "passed":
                ports.append(CiPort(k.path, result.status, f"{result.stop_reason}; no branch for a port that did not pass",
                                    result.run_id))
                continue
            review = open_review_branch(result, kernel=kernel, spec_path=spec_path, push=push)
            ports.append(CiPort(k.path, result.status, result.stop_reason, result.run_id, review.branch, review.pushed,
                                review.warnings + ((review.push_error,) if review.push_error else ())))
    return tuple(ports)
