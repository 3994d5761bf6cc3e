"""`porter port --candidates N`: N independent samples per round, verified together on the pool, and
the round's best (its best pass, else its best failure) fed back as the one reply of the round."""

from __future__ import annotations

import io
from pathlib import Path

from conftest import small_vector_add

from porter.agent.llm import Budget, Reply, Usage
from porter.agent.session import PortRequest, PortSession
from porter.cli.progress import PlainProgress
from porter.gate.runner.fake import FakeGpu
from porter.gate.spec import load_spec
from porter.pool.local import LocalPool
from porter.ptx import retarget


class Scripted:
    """A model that plays ``replies`` in order and keeps the conversation each call was sent."""

    name = "replay:test"

    def __init__(self, replies: list[str]) -> None:
        self.replies = list(replies)
        self.sent: list[list[dict[str, str]]] = []

    def complete(self, messages, *, temperature, max_tokens, timeout_s) -> Reply:
        from porter.agent.llm import ModelError

        self.sent.append([dict(m) for m in messages])
        if not self.replies:
            raise ModelError("scripted replies exhausted")
        return Reply(self.replies.pop(0), Usage(100, 100, 0.0), "stop", self.name, 0.0, 1)


def _kernel(path: Path, *, wrong: bool, note: str) -> str:
    text = retarget(path.read_text(), "sm_90", min_version="7.8")
    if not wrong:
        text = text.replace(".global .u32 porter_fake_wrong;", "")
    return f"Here is the kernel ({note}).\n\n```ptx\n{text}\n```\n"


def _port(toolchain, tmp_path: Path, model: Scripted, candidates: int, rounds: int = 8, on_event=None):
    kernel, spec_path = small_vector_add(tmp_path / "k", marker="porter_fake_wrong")  # the retarget fails
    request = PortRequest(kernel=kernel, spec=load_spec(spec_path), to_arch="sm_90", require_native=False,
                          budget=Budget(max_rounds=rounds), runs_root=tmp_path / "runs", candidates=candidates)
    gpu = FakeGpu(case_s=0.01)
    pool = LocalPool(toolchain, devices=[0], per_gpu=3, runner_factory=lambda d: gpu.runner())
    return PortSession(request, toolchain=toolchain, model=model, verifier=pool, on_event=on_event).run(), kernel


def test_one_round_of_three_samples_is_verified_together_and_the_pass_wins(toolchain, tmp_path: Path) -> None:
    kernel, _ = small_vector_add(tmp_path / "k", marker="porter_fake_wrong")
    model = Scripted(["no kernel in this reply", _kernel(kernel, wrong=True, note="still wrong"),
                      _kernel(kernel, wrong=False, note="right")])
    result, _ = _port(toolchain, tmp_path, model, candidates=3)
    assert result.status == "passed"
    assert result.spend.rounds == 3 and len(model.sent) == 3
    assert model.sent[0] == model.sent[1] == model.sent[2]  # independent samples of one conversation
    model_candidates = [c for c in result.candidates if c.origin == "model"]
    assert [c.status for c in model_candidates] == ["failed", "passed"]  # the malformed one is no candidate
    assert {c.round for c in model_candidates} == {1}  # one round of three samples, not three rounds
    assert result.best.index == model_candidates[1].index


def test_the_best_failure_of_a_round_is_what_the_model_sees_next(toolchain, tmp_path: Path) -> None:
    kernel, _ = small_vector_add(tmp_path / "k", marker="porter_fake_wrong")
    broken = "```ptx\n.version 9.0\n.target sm_90\n.address_size 64\n.visible .entry vector_add() { ret; }\n```\n"
    wrong = _kernel(kernel, wrong=True, note="assembles, wrong values")
    model = Scripted([broken, wrong, _kernel(kernel, wrong=False, note="right")])
    result, _ = _port(toolchain, tmp_path, model, candidates=2)
    assert result.status == "passed"
    first_round = [c for c in result.candidates if c.origin == "model" and c.round == 1]
    assert len(first_round) == 2
    # The second round's conversation holds one reply of the first: the better failure (it assembled).
    second = model.sent[2]
    replies = [m["content"] for m in second if m["role"] == "assistant"]
    assert len(replies) == 1 and "assembles, wrong values" in replies[0]
    assert "elements wrong" in second[-1]["content"]


def test_rounds_and_samples_are_numbered_and_a_sample_without_a_candidate_is_said(toolchain, tmp_path: Path) -> None:
    kernel, _ = small_vector_add(tmp_path / "k", marker="porter_fake_wrong")
    renamed = _kernel(kernel, wrong=False, note="renamed").replace(".entry vector_add(", ".entry vector_add_sm90(")
    model = Scripted(["no kernel in this reply", _kernel(kernel, wrong=True, note="wrong"), renamed,  # round 1
                      "still no kernel", "nor here", "", _kernel(kernel, wrong=False, note="right")])  # rounds 2, 3
    out = io.StringIO()
    result, _ = _port(toolchain, tmp_path, model, candidates=3, on_event=PlainProgress(out))
    assert result.status == "passed"
    lines = [line.removeprefix("porter: ") for line in out.getvalue().splitlines()]
    said = [line.split(" (")[0] for line in lines if line.startswith("round")]
    assert said == ["round 1, sample 1 of 3: reply received", "round 1, sample 1 of 3: no candidate",
                    "round 1, sample 2 of 3: reply received", "round 1, sample 3 of 3: reply received",
                    "round 1, sample 3 of 3: no candidate",
                    "round 2, sample 1 of 3: reply received", "round 2, sample 1 of 3: no candidate",
                    "round 2, sample 2 of 3: reply received", "round 2, sample 2 of 3: no candidate",
                    "round 2, sample 3 of 3: reply received", "round 2, sample 3 of 3: no candidate",
                    "round 2: no candidate this round; the model is told why",
                    "round 3, sample 1 of 3: reply received"]
    assert "round 1, sample 3 of 3: no candidate (entry): The kernel in your reply renames the entry" in out.getvalue()
    assert [(c.origin, c.round) for c in result.candidates] == [("retarget", 0), ("model", 1), ("model", 3)]
    assert "candidate 1 (model, round 1): checking" in lines and "candidate 2 (model, round 3): checking" in lines
    assert result.spend.rounds == 7  # the budget counts model calls: three samples a round, one in the last
