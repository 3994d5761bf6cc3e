"""Scripted replies: a model that plays the ``[[reply]]`` tables of a TOML file, for demos and
tests without a model (``--model replay:FILE``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from porter._toml import tomllib
from porter.agent.llm import ModelError, Reply, Usage, estimate_prompt_tokens, estimate_tokens
from porter.errors import InputError


@dataclass(frozen=True)
class ScriptedReply:
    """One ``[[reply]]`` table; token counts left out are estimated when the reply is played."""

    text: str
    note: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    finish_reason: str


_REPLY_KEYS = {"text", "note", "prompt_tokens", "completion_tokens", "finish_reason"}


class ReplayModel:
    """Plays the ``[[reply]]`` tables of a TOML file in order, one per call; nothing is billed.

    The file's top-level ``label`` must say that the replies are scripted, so that no report built
    from a replay can pass for a real model's work. Token counts default to estimates. ``start``
    skips the replies a resumed run has already had; ``received`` keeps every prompt it was sent.
    """

    def __init__(self, path: Path, *, start: int = 0) -> None:
        self.path = Path(path)
        self.name = f"replay:{self.path.name}"
        self.label, self.replies = _load_script(self.path)
        self._next = start
        self.received: list[list[dict[str, str]]] = []

    def __repr__(self) -> str:
        return f"ReplayModel({str(self.path)!r})"

    def complete(
        self, messages: list[dict[str, str]], *, temperature: float, max_tokens: int, timeout_s: float
    ) -> Reply:
        self.received.append([dict(m) for m in messages])
        if self._next >= len(self.replies):
            raise ModelError(f"model {self.name}: scripted replies exhausted after {len(self.replies)}")
        scripted = self.replies[self._next]
        self._next += 1
        prompt = scripted.prompt_tokens
        completion = scripted.completion_tokens
        return Reply(
            text=scripted.text,
            usage=Usage(
                prompt if prompt is not None else estimate_prompt_tokens(messages),
                completion if completion is not None else estimate_tokens(scripted.text),
                0.0,
            ),
            finish_reason=scripted.finish_reason,
            model=self.name,
            latency_s=0.0,
            attempts=1,
        )


def _load_script(path: Path) -> tuple[str, tuple[ScriptedReply, ...]]:
    def bad(problem: str) -> InputError:
        return InputError(f"{path}: {problem}")

    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise bad("scripted replies file not found") from None
    except OSError as e:
        raise bad(f"cannot read the scripted replies ({e.strerror})") from None
    except UnicodeDecodeError:
        raise bad("not UTF-8 text") from None
    except tomllib.TOMLDecodeError as e:
        raise bad(f"TOML syntax error: {e}") from None
    unknown = sorted(set(data) - {"label", "reply"})
    if unknown:
        raise bad(f"unknown top-level key(s) {', '.join(unknown)} (expected label and [[reply]])")
    label = data.get("label")
    if not isinstance(label, str) or "scripted" not in label.lower():
        raise bad('needs a top-level label that says the replies are scripted, e.g. label = "scripted demo"')
    tables = data.get("reply")
    if not isinstance(tables, list) or not tables:
        raise bad("no [[reply]] tables")
    replies = []
    for i, table in enumerate(tables, 1):
        if not isinstance(table, dict):
            raise bad(f"reply {i}: expected a [[reply]] table")
        extra = sorted(set(table) - _REPLY_KEYS)
        if extra:
            raise bad(f"reply {i}: unknown key(s) {', '.join(extra)}")
        text, note, finish = table.get("text"), table.get("note"), table.get("finish_reason", "stop")
        if not isinstance(text, str):
            raise bad(f"reply {i}: text must be a string (use '''...''' for several lines)")
        if note is not None and not isinstance(note, str):
            raise bad(f"reply {i}: note must be a string")
        if not isinstance(finish, str):
            raise bad(f"reply {i}: finish_reason must be a string")
        counts = {}
        for key in ("prompt_tokens", "completion_tokens"):
            value = table.get(key)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
                raise bad(f"reply {i}: {key} must be a non-negative integer")
            counts[key] = value
        replies.append(
            ScriptedReply(text, note, counts["prompt_tokens"], counts["completion_tokens"], finish)
        )
    return label, tuple(replies)
