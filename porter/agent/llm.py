"""The language model behind one small interface: :class:`ModelClient`.

``complete(messages, temperature=, max_tokens=, timeout_s=)`` returns a :class:`Reply` (text, token
usage, cost when known, finish reason, latency, attempts). Two implementations:

- :class:`LiteLLMModel` calls any provider litellm knows. litellm's own retries (its ``num_retries``
  and the OpenAI SDK's ``max_retries``, which default to 2 hidden retries) are switched off on every
  call, so the retry policy here is the only one: transient failures (429, timeouts, connection
  errors, 500/502/503 and any other 5xx) are retried with jittered exponential backoff, honouring
  ``Retry-After``; anything else (401, 400, 404, context window exceeded, ...) fails at once. Every failure surfaces as one :class:`ModelError` line.
- :class:`porter.agent.replay.ReplayModel` plays scripted replies from a TOML file, for demos and
  tests without a model.

The budget (:class:`Budget`, :class:`Spend`) is checked *before* each call: porter never starts a
call that it knows could exceed the rounds, tokens, dollars or wall-clock time it was given. The
dollar check uses the model's price from litellm's bundled price map and assumes the worst case (the
whole ``max_tokens`` is used). For a model without a known price the cost is only counted after the
fact, so ``max_usd`` then stops the run once the spend has reached it, not before.

Which model a command runs with, and whether it can be called at all, is
:mod:`porter.agent.model_choice`'s. Importing this module imports neither litellm (about 5 s) nor
tenacity; they load on first use.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import os
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

from porter.errors import EnvironmentProblem, InputError

if TYPE_CHECKING:
    import tenacity

log = logging.getLogger(__name__)

# Rough cost of a chat message's framing (role, separators) on top of its content, in tokens.
_MESSAGE_OVERHEAD_TOKENS = 4


class ModelError(EnvironmentProblem):
    """The model could not give a reply (API down, rate limited, bad key, script exhausted). Exit 3."""


@dataclass(frozen=True)
class Usage:
    """Tokens of one call, and its cost in US dollars when the price is known (None otherwise)."""

    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class Reply:
    """One model reply. ``latency_s`` covers the whole call as porter saw it, retries and waits included."""

    text: str
    usage: Usage
    finish_reason: str | None
    model: str
    latency_s: float
    attempts: int

    @property
    def truncated(self) -> bool:
        """The reply stopped at ``max_tokens``, so its text is probably incomplete."""
        return self.finish_reason == "length"


class ModelClient(Protocol):
    """What the session needs from a model. ``name`` identifies it in reports and prices it."""

    name: str

    def complete(
        self, messages: list[dict[str, str]], *, temperature: float, max_tokens: int, timeout_s: float
    ) -> Reply: ...


def estimate_tokens(text: str) -> int:
    """An *estimate* of the token count (about four characters a token for English and code).

    Used where no tokenizer's count is available: scripted replies, servers that report no usage,
    and the size of the next prompt in the budget check.
    """
    return math.ceil(len(text) / 4)


def estimate_prompt_tokens(messages: Sequence[Mapping[str, str]]) -> int:
    """An estimate of the prompt tokens of a chat: its contents plus a few tokens of framing each."""
    return sum(estimate_tokens(m.get("content", "")) + _MESSAGE_OVERHEAD_TOKENS for m in messages)


# ---------------------------------------------------------------------------------------------
# litellm


@functools.cache
def _litellm() -> ModuleType:
    """Import litellm once, offline and quiet: bundled price map, no debug banners, no telemetry,
    and no ``.env`` file read. In its default mode litellm's import loads a ``.env`` found walking up
    from its install folder, which with a virtual environment inside a checkout is the checkout's:
    a pull request could then set ``OPENAI_API_BASE`` and receive the bot's key. Keys and endpoints
    come from the environment porter was started with, and from its flags."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_MODE", "PRODUCTION")
    import litellm

    litellm.suppress_debug_info = True
    if hasattr(litellm, "telemetry"):  # removed in recent releases, present in older ones
        litellm.telemetry = False
    return litellm


def price_per_token(model: str) -> tuple[float, float] | None:
    """(input, output) US dollars per token for a litellm model name; None when litellm has no price.

    porter's own offline schemes (``replay:`` and ``mock:``) cost nothing and do not import litellm.
    """
    if model.startswith(("replay:", "mock:")):
        return (0.0, 0.0)
    try:
        info = _litellm().get_model_info(model)
    except Exception:  # litellm raises for any model missing from its price map
        return None
    prices = (info.get("input_cost_per_token"), info.get("output_cost_per_token"))
    if all(isinstance(p, int | float) for p in prices):
        return (float(prices[0]), float(prices[1]))
    return None


def _retry_after_s(exc: BaseException) -> float | None:
    """How long the server asked us to wait, if the error carries its response headers.

    OpenAI sends ``retry-after-ms``; the HTTP standard ``Retry-After`` is seconds or a date.
    """
    headers = getattr(getattr(exc, "response", None), "headers", None)
    if headers is None:
        return None
    value = headers.get("retry-after")
    for text, per_second in ((headers.get("retry-after-ms"), 1000), (value, 1)):
        if text:
            try:
                return max(0.0, float(text) / per_second)
            except ValueError:
                pass
    if not value:
        return None
    import email.utils  # only here: it pulls in socket and friends, ~25 ms

    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


# litellm prefixes messages with class names: "litellm.RateLimitError: RateLimitError: OpenAIException - ".
_PREFIX = re.compile(r"^(?:litellm\.\w+|\w*(?:Error|Exception)|Timeout Error)\s*[:-]\s*")


def _detail(exc: BaseException) -> str:
    """The provider's own words, without litellm's prefixes, on one short line."""
    text = str(exc)
    while m := _PREFIX.match(text):
        text = text[m.end() :]
    text = " ".join(text.split())
    return text if len(text) <= 200 else text[:197] + "..."


def _causes(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and len(chain) < 12 and all(seen is not c for c in chain):
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    return chain


@dataclass(frozen=True)
class _Failure:
    what: str  # a few words, with the HTTP status when the server sent one
    transient: bool
    detail: str = ""


def _failure(litellm: ModuleType, exc: BaseException, timeout_s: float) -> _Failure:
    """Classify a failed call: what happened, and whether trying again could help.

    litellm's exception class is the guide, with corrections found in the cause chain and status:

    - a reply body that is not JSON comes as an InternalServerError (500) that no server sent; it
      would come back the same, so it is not retried;
    - a refused connection also comes as an InternalServerError (500): it is a connection problem;
    - a server's 504 comes as a Timeout, like the client's own timeout, but with its real status;
    - statuses litellm has no class for (403, 409, 529 from an OpenAI-compatible server) come as a
      plain APIError: retried when they are 5xx, like every server-side failure.
    """
    import httpx
    import openai

    causes = _causes(exc)
    status = getattr(exc, "status_code", None)
    status = status if isinstance(status, int) else None
    # The SDK refusing to start a request (no API key, a bad client option) is not the server's 500
    # that litellm labels it: it would fail the same way every time.
    client_side = next((c for c in causes if isinstance(c, openai.OpenAIError) and not isinstance(c, openai.APIError)
                        and not isinstance(c, openai.APIConnectionError)), None)
    if client_side is not None:
        words = "missing credentials" if "credential" in str(client_side).lower() or "api_key" in str(client_side) \
            else "the client refused the request"
        return _Failure(words, transient=False, detail=_detail(client_side))
    bad_json = next((c for c in causes if isinstance(c, json.JSONDecodeError)), None)
    if bad_json is not None:
        return _Failure(f"malformed reply from the server (not valid JSON: {bad_json})", transient=False)
    if any(isinstance(c, openai.APITimeoutError | httpx.TimeoutException) for c in causes):
        if status not in (None, 408):
            return _Failure(f"the server timed out ({status})", transient=True, detail=_detail(exc))
        return _Failure(f"timed out (limit {timeout_s:g} s)", transient=True)
    if any(isinstance(c, openai.APIConnectionError | httpx.TransportError) for c in causes):
        return _Failure("cannot reach the API", transient=True, detail=_detail(exc))
    kinds: list[tuple[type[BaseException], str, bool]] = [
        (litellm.ContextWindowExceededError, "prompt too long for the model's context window", False),
        (litellm.AuthenticationError, "authentication failed", False),
        (litellm.PermissionDeniedError, "permission denied", False),
        (litellm.NotFoundError, "model or endpoint not found", False),
        (litellm.BadRequestError, "bad request", False),
        (litellm.RateLimitError, "rate limited", True),
        (litellm.InternalServerError, "server error", True),
        (litellm.BadGatewayError, "bad gateway", True),
        (litellm.ServiceUnavailableError, "service unavailable", True),
        (litellm.APIError, "API error", status is not None and status >= 500),
    ]
    what, transient = next(
        ((phrase, again) for cls, phrase, again in kinds if isinstance(exc, cls)), (type(exc).__name__, False)
    )
    if status is not None:
        what += f" ({status})"
    return _Failure(what, transient, _detail(exc))


class LiteLLMModel:
    """A model reached through litellm (``openai/gpt-4o``, ``anthropic/claude-...``, any api_base).

    API keys come from the environment as litellm expects (``OPENAI_API_KEY`` ...) unless ``api_key``
    is given. ``backoff_s`` scales the jittered exponential wait between retries (full jitter:
    uniform in [0, backoff_s * 2**retry]), capped at ``max_backoff_s``; a server's Retry-After is
    waited for at least, within the same cap. With ``mock_response`` litellm answers locally with that
    text (no network, no cost); the name then starts with ``mock:`` so nobody mistakes it for a model.
    """

    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        max_retries: int = 4,
        backoff_s: float = 1.0,
        max_backoff_s: float = 60.0,
        mock_response: str | None = None,
    ) -> None:
        if max_retries < 0 or backoff_s < 0 or max_backoff_s < 0:
            raise InputError("max_retries, backoff_s and max_backoff_s must not be negative")
        self.model = model
        self.name = model if mock_response is None else f"mock:{model}"
        self.api_base = api_base
        self.api_key = api_key
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.mock_response = mock_response

    def __repr__(self) -> str:
        return f"LiteLLMModel({self.name!r}, api_base={self.api_base!r})"

    def complete(
        self, messages: list[dict[str, str]], *, temperature: float, max_tokens: int, timeout_s: float
    ) -> Reply:
        litellm = _litellm()
        import tenacity

        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": temperature,
            "max_tokens": max_tokens,
            "timeout": timeout_s,
            # porter's retry policy is the only one: no litellm wrapper retries, no SDK retries.
            "num_retries": 0,
            "max_retries": 0,
            # Reasoning models reject some sampling parameters (temperature); drop them, don't fail.
            "drop_params": True,
        }
        if self.api_base is not None:
            kwargs["api_base"] = self.api_base
        if self.api_key is not None:
            kwargs["api_key"] = self.api_key
        if self.mock_response is not None:
            kwargs["mock_response"] = self.mock_response

        attempts = 0

        def attempt() -> Any:
            nonlocal attempts
            attempts += 1
            return litellm.completion(**kwargs)

        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(self.max_retries + 1),
            wait=self._wait,
            retry=tenacity.retry_if_exception(lambda e: _failure(litellm, e, timeout_s).transient),
            before_sleep=self._log_retry,
            reraise=True,
        )
        started = time.monotonic()
        try:
            response = retrying(attempt)
        except Exception as e:
            failure = _failure(litellm, e, timeout_s)
            if failure.what == "cannot reach the API" and self.api_base:
                failure = _Failure(f"cannot reach the API at {self.api_base}", failure.transient, failure.detail)
            after = f" after {attempts} attempts" if attempts > 1 else ""
            detail = f": {failure.detail}" if failure.detail else ""
            raise ModelError(f"model {self.name}: {failure.what}{after}{detail}") from e
        latency = time.monotonic() - started
        return self._reply(litellm, response, messages, latency=latency, attempts=attempts)

    def _wait(self, state: tenacity.RetryCallState) -> float:
        import tenacity

        jitter = tenacity.wait_random_exponential(multiplier=self.backoff_s, max=self.max_backoff_s)(state)
        failure = state.outcome.exception() if state.outcome else None
        hint = _retry_after_s(failure) if failure is not None else None
        return min(max(jitter, hint or 0.0), self.max_backoff_s)

    def _log_retry(self, state: tenacity.RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome else None
        wait = state.next_action.sleep if state.next_action else 0.0
        log.info(
            "model %s: attempt %d failed (%s); retrying in %.2f s",
            self.name,
            state.attempt_number,
            type(error).__name__,
            wait,
        )

    def _reply(
        self,
        litellm: ModuleType,
        response: Any,
        messages: list[dict[str, str]],
        *,
        latency: float,
        attempts: int,
    ) -> Reply:
        choices = getattr(response, "choices", None) or []
        if not choices:
            raise ModelError(f"model {self.name}: the reply has no choices (an empty or malformed answer)")
        choice = choices[0]
        text = getattr(choice.message, "content", None) or ""
        usage = getattr(response, "usage", None)
        prompt = getattr(usage, "prompt_tokens", None) or 0
        completion = getattr(usage, "completion_tokens", None) or 0
        if prompt == 0 and completion == 0:
            # The server reported no usage (litellm then says 0/0): estimate rather than count nothing.
            prompt, completion = estimate_prompt_tokens(messages), estimate_tokens(text)
        return Reply(
            text=text,
            usage=Usage(prompt, completion, self._cost(litellm, response)),
            finish_reason=choice.finish_reason,
            model=getattr(response, "model", None) or self.model,
            latency_s=latency,
            attempts=attempts,
        )

    def _cost(self, litellm: ModuleType, response: Any) -> float | None:
        if self.mock_response is not None:
            return 0.0
        try:
            cost = litellm.completion_cost(completion_response=response)
        except Exception:  # no price for this model (local servers, new models)
            return None
        return float(cost) if isinstance(cost, int | float) and cost >= 0 else None


# ---------------------------------------------------------------------------------------------
# Budget


@dataclass(frozen=True)
class Budget:
    """Limits for one porting session; None means no limit. A round is one model call."""

    max_rounds: int | None = 8
    max_tokens: int | None = None
    max_usd: float | None = None
    max_wall_s: float | None = None

    def __post_init__(self) -> None:
        for name in ("max_rounds", "max_tokens", "max_usd", "max_wall_s"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise InputError(f"budget: {name} must not be negative (got {value})")


def _usd(amount: float) -> str:
    return f"${amount:.6f}"


@dataclass(frozen=True)
class SpendRecord:
    """What a session had used when it was recorded: ``spend.json``, a port's result, its progress
    events. One type from the session to every reader (resume, bench, progress, MCP, PORT_REPORT)."""

    rounds: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    usd: float = 0.0
    wall_s: float = 0.0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def line(self) -> str:
        """The spend in a few words, as progress and summaries say it."""
        return f"{self.rounds} rounds, {self.tokens} tokens, ${self.usd:.4f}"


@dataclass
class Spend:
    """What a session has used so far. ``usd`` sums the known costs; unpriced calls add nothing."""

    rounds: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    usd: float = 0.0
    started: float = field(default_factory=time.monotonic)
    calls: list[Reply] = field(default_factory=list)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self.started

    @classmethod
    def going_on_from(cls, recorded: SpendRecord) -> Spend:
        """A Spend that goes on from a recorded one (its wall-clock time too): a resumed session's."""
        return cls(rounds=recorded.rounds, prompt_tokens=recorded.prompt_tokens,
                   completion_tokens=recorded.completion_tokens, usd=recorded.usd,
                   started=time.monotonic() - recorded.wall_s)

    def snapshot(self) -> SpendRecord:
        return SpendRecord(self.rounds, self.prompt_tokens, self.completion_tokens, round(self.usd, 6),
                           round(self.elapsed_s, 2))

    def record(self, reply: Reply) -> None:
        self.rounds += 1
        self.prompt_tokens += reply.usage.prompt_tokens
        self.completion_tokens += reply.usage.completion_tokens
        self.usd += reply.usage.cost_usd or 0.0
        self.calls.append(reply)

    def why_stop(
        self,
        budget: Budget,
        *,
        next_prompt_tokens: int,
        max_completion_tokens: int,
        price_per_token: tuple[float, float] | None,
    ) -> str | None:
        """Why the next call must not start (the worst case of it would break a limit), or None.

        ``price_per_token`` is (input, output) dollars per token, or None when unknown: then
        ``max_usd`` can only stop the session once the counted spend has reached it.
        """
        if budget.max_rounds is not None and self.rounds >= budget.max_rounds:
            return f"round budget spent: {self.rounds} of {budget.max_rounds} rounds used"
        if budget.max_wall_s is not None and self.elapsed_s >= budget.max_wall_s:
            return f"wall-clock budget spent: {self.elapsed_s:.1f} s of {budget.max_wall_s:g} s"
        if budget.max_tokens is not None:
            worst = self.total_tokens + next_prompt_tokens + max_completion_tokens
            if worst > budget.max_tokens:
                return (
                    f"would exceed the token budget: {self.total_tokens} used + {next_prompt_tokens} prompt"
                    f" + {max_completion_tokens} reply tokens = {worst} > {budget.max_tokens}"
                )
        if budget.max_usd is not None:
            if price_per_token is None:
                if self.usd >= budget.max_usd:
                    return f"cost budget spent: {_usd(self.usd)} of {_usd(budget.max_usd)}"
            else:
                next_cost = (
                    next_prompt_tokens * price_per_token[0] + max_completion_tokens * price_per_token[1]
                )
                if self.usd + next_cost > budget.max_usd:
                    return (
                        f"would exceed the cost budget: {_usd(self.usd)} spent + up to {_usd(next_cost)}"
                        f" for the next call > {_usd(budget.max_usd)}"
                    )
        return None


class BudgetExhausted(Exception):
    """The next call was not started because it could break the budget. A normal end, not an error."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def complete_within(
    client: ModelClient,
    messages: list[dict[str, str]],
    *,
    budget: Budget,
    spend: Spend,
    temperature: float,
    max_tokens: int,
    timeout_s: float,
) -> Reply:
    """Call the model only if the worst case of the call fits the budget; record what it used.

    Raises :class:`BudgetExhausted` (before any request is sent) when it does not fit.
    """
    reason = spend.why_stop(
        budget,
        next_prompt_tokens=estimate_prompt_tokens(messages),
        max_completion_tokens=max_tokens,
        price_per_token=price_per_token(client.name),
    )
    if reason is not None:
        raise BudgetExhausted(reason)
    reply = client.complete(messages, temperature=temperature, max_tokens=max_tokens, timeout_s=timeout_s)
    spend.record(reply)
    return reply
