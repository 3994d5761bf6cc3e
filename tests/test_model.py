"""The model layer, offline: litellm's mock_response, and litellm over a real socket to a local stub."""

from __future__ import annotations

import email.utils
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from openai_stub import OpenAIStub, Scripted, chat, error, raw, stall

from porter.agent.llm import (
    Budget,
    BudgetExhausted,
    LiteLLMModel,
    ModelError,
    Reply,
    Spend,
    Usage,
    _retry_after_s,  # the date form is hard to time over the wire
    complete_within,
    estimate_prompt_tokens,
    estimate_tokens,
    price_per_token,
)
from porter.agent.model_choice import check_model, make_model, resolve_model
from porter.agent.replay import ReplayModel
from porter.errors import EnvironmentProblem, InputError

MESSAGES = [{"role": "system", "content": "You port PTX."}, {"role": "user", "content": "Port this kernel."}]

StartStub = Callable[..., OpenAIStub]


@pytest.fixture
def stub() -> Iterator[StartStub]:
    """Start scripted servers on demand; every one is stopped when the test ends, pass or fail."""
    servers: list[OpenAIStub] = []

    def start(script: list[Scripted], **kwargs: float) -> OpenAIStub:
        server = OpenAIStub(script, **kwargs).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def wire_model(server: OpenAIStub, **kwargs: int | float) -> LiteLLMModel:
    return LiteLLMModel("openai/test-model", api_base=server.api_base, api_key="x", backoff_s=0.001, **kwargs)


def ask(model: LiteLLMModel | ReplayModel, *, timeout_s: float = 5.0, max_tokens: int = 64) -> Reply:
    return model.complete(MESSAGES, temperature=0.2, max_tokens=max_tokens, timeout_s=timeout_s)


# --- litellm's mock_response -------------------------------------------------------------------


def test_mock_response_gives_text_usage_and_no_cost() -> None:
    model = make_model("mock:.version 8.7\n.target sm_90a", api_base=None)
    assert isinstance(model, LiteLLMModel)
    assert model.name == "mock:openai/porter-mock"
    reply = ask(model)
    assert reply.text == ".version 8.7\n.target sm_90a"
    assert reply.usage.prompt_tokens > 0 and reply.usage.completion_tokens > 0
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens
    assert reply.usage.cost_usd == 0.0  # a mock is never billed, whatever model it imitates
    assert reply.attempts == 1 and not reply.truncated


# --- litellm over the wire to the local stub ---------------------------------------------------


def test_reply_over_the_wire(stub: StartStub) -> None:
    server = stub([chat("ported kernel", prompt_tokens=120, completion_tokens=30)])
    reply = ask(wire_model(server), max_tokens=77)
    assert reply.text == "ported kernel"
    assert reply.usage == Usage(120, 30, None)  # the stub's model has no price
    assert (reply.finish_reason, reply.model, reply.attempts) == ("stop", "test-model", 1)
    assert reply.latency_s > 0
    [request] = server.received
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer x"
    assert request.body["model"] == "test-model"
    assert request.body["messages"] == MESSAGES
    assert request.body["temperature"] == 0.2 and request.body["max_tokens"] == 77


def test_rate_limit_is_retried_then_succeeds(stub: StartStub) -> None:
    server = stub([error(429, "slow down"), chat("ok")])
    reply = ask(wire_model(server))
    assert (reply.text, reply.attempts) == ("ok", 2)
    assert len(server.received) == 2
    # Both went out as first tries of the OpenAI SDK: it did not retry on its own.
    assert [r.headers["x-stainless-retry-count"] for r in server.received] == ["0", "0"]


@pytest.mark.parametrize("header", [{"Retry-After": "0.3"}, {"retry-after-ms": "300"}])
def test_retry_after_is_honoured(stub: StartStub, header: dict[str, str]) -> None:
    server = stub([error(429, "slow down", headers=header), chat("ok")])
    reply = ask(wire_model(server))
    assert reply.attempts == 2
    assert reply.latency_s >= 0.3  # the backoff alone would have waited about a millisecond


def test_retry_after_forms() -> None:
    def wait(headers: dict[str, str]) -> float | None:
        return _retry_after_s(SimpleNamespace(response=SimpleNamespace(headers=headers)))  # type: ignore[arg-type]

    assert wait({"retry-after": "2"}) == 2.0
    assert wait({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    date = wait({"retry-after": email.utils.formatdate(time.time() + 30, usegmt=True)})
    assert date is not None and 28 <= date <= 31
    assert wait({"retry-after": "soon"}) is None
    assert wait({}) is None
    assert _retry_after_s(ValueError("no response")) is None


@pytest.mark.parametrize("status", [500, 502, 503, 504, 529])
def test_server_errors_are_retried_then_succeed(stub: StartStub, status: int) -> None:
    server = stub([error(status, "try again"), chat("ok")])
    assert ask(wire_model(server)).attempts == 2
    assert len(server.received) == 2


def test_retries_exhausted_names_model_status_and_attempts(stub: StartStub) -> None:
    server = stub([error(429, "quota")] * 3)
    with pytest.raises(ModelError) as caught:
        ask(wire_model(server, max_retries=2))
    assert str(caught.value) == "model openai/test-model: rate limited (429) after 3 attempts: quota"
    assert caught.value.exit_code == 3 and isinstance(caught.value, EnvironmentProblem)
    assert len(server.received) == 3


def test_timeout_is_retried_then_reported(stub: StartStub) -> None:
    server = stub([stall(5.0), stall(5.0)])
    started = time.monotonic()
    with pytest.raises(
        ModelError, match=r"^model openai/test-model: timed out \(limit 0\.5 s\) after 2 attempts$"
    ):
        ask(wire_model(server, max_retries=1), timeout_s=0.5)
    assert time.monotonic() - started < 3.0
    assert len(server.received) == 2


def test_unauthorized_fails_at_once(stub: StartStub) -> None:
    server = stub([error(401, "Incorrect API key provided"), chat("never sent")])
    with pytest.raises(ModelError) as caught:
        ask(wire_model(server))
    assert str(caught.value) == (
        "model openai/test-model: authentication failed (401): Incorrect API key provided"
    )
    assert len(server.received) == 1


def test_context_window_error_fails_at_once(stub: StartStub) -> None:
    server = stub([error(400, "This model's maximum context length is 8192 tokens"), chat("never sent")])
    with pytest.raises(ModelError, match=r"context window \(400\): This model's maximum context length"):
        ask(wire_model(server))
    assert len(server.received) == 1


def test_malformed_json_is_reported_and_not_retried(stub: StartStub) -> None:
    server = stub([raw(b"{not json"), chat("never sent")])
    with pytest.raises(
        ModelError, match=r"^model openai/test-model: malformed reply from the server \(not valid JSON: "
    ):
        ask(wire_model(server))
    assert len(server.received) == 1


def test_the_stub_is_bounded(stub: StartStub) -> None:
    server = stub([error(500, "boom"), chat("never sent")], max_requests=1)
    with pytest.raises(
        ModelError, match=r"service unavailable \(503\) after 3 attempts: stub: request cap reached"
    ):
        ask(wire_model(server, max_retries=2))
    assert len(server.received) == 3
    server = stub([])
    with pytest.raises(ModelError, match="no scripted response left"):
        ask(wire_model(server))
    assert len(server.received) == 1  # 418 is not retried


def test_reply_without_choices_is_an_error(stub: StartStub) -> None:
    server = stub([raw(b'{"id": "x", "object": "chat.completion", "choices": []}')])
    with pytest.raises(ModelError, match="the reply has no choices"):
        ask(wire_model(server))


def test_missing_usage_is_estimated(stub: StartStub) -> None:
    body = b'{"choices": [{"index": 0, "message": {"role": "assistant", "content": "12345678"}, "finish_reason": "stop"}]}'
    reply = ask(wire_model(stub([raw(body)])))
    assert reply.usage.prompt_tokens == estimate_prompt_tokens(MESSAGES)
    assert reply.usage.completion_tokens == 2


def test_cut_off_reply_is_truncated(stub: StartStub) -> None:
    reply = ask(wire_model(stub([chat("half a kern", finish_reason="length")])))
    assert reply.truncated and reply.finish_reason == "length"


def test_unreachable_server_is_retried_then_reported() -> None:
    with socket.socket() as s:  # a port that nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    model = LiteLLMModel(
        "openai/test-model",
        api_base=f"http://127.0.0.1:{port}/v1",
        api_key="x",
        max_retries=1,
        backoff_s=0.001,
    )
    with pytest.raises(ModelError, match=rf"^model openai/test-model: cannot reach the API at http://127.0.0.1:{port}/v1 "
                                         r"after 2 attempts"):  # the URL is named (#13.2)
        ask(model)


# --- budget ------------------------------------------------------------------------------------


def why(
    spend: Spend,
    budget: Budget,
    *,
    prompt: int = 100,
    reply: int = 100,
    price: tuple[float, float] | None = None,
) -> str | None:
    return spend.why_stop(
        budget, next_prompt_tokens=prompt, max_completion_tokens=reply, price_per_token=price
    )


def test_within_every_limit_there_is_no_reason_to_stop() -> None:
    budget = Budget(max_rounds=3, max_tokens=10_000, max_usd=1.0, max_wall_s=60)
    assert (
        why(Spend(rounds=2, prompt_tokens=500, completion_tokens=500, usd=0.5), budget, price=(1e-6, 2e-6))
        is None
    )
    assert why(Spend(rounds=100), Budget(max_rounds=None)) is None


def test_rounds_exhausted() -> None:
    assert why(Spend(rounds=8), Budget()) == "round budget spent: 8 of 8 rounds used"


def test_token_budget_counts_the_worst_case_of_the_next_call() -> None:
    spend = Spend(prompt_tokens=900, completion_tokens=100)
    budget = Budget(max_tokens=2000)
    assert why(spend, budget, prompt=500, reply=600) == (
        "would exceed the token budget: 1000 used + 500 prompt + 600 reply tokens = 2100 > 2000"
    )
    assert why(spend, budget, prompt=500, reply=500) is None  # landing exactly on the limit is allowed


def test_cost_budget_with_a_known_price_counts_the_worst_case() -> None:
    spend = Spend(usd=0.5)
    budget = Budget(max_usd=0.75)
    assert why(spend, budget, prompt=1000, reply=1000, price=(1e-4, 2e-4)) == (
        "would exceed the cost budget: $0.500000 spent + up to $0.300000 for the next call > $0.750000"
    )
    assert why(spend, budget, prompt=1000, reply=1000, price=(1e-4, 1e-4)) is None


def test_cost_budget_with_an_unknown_price_stops_only_after_the_fact() -> None:
    budget = Budget(max_usd=0.75)
    assert why(Spend(usd=0.5), budget) is None
    assert why(Spend(usd=0.8), budget) == "cost budget spent: $0.800000 of $0.750000"


def test_wall_clock_exceeded() -> None:
    spend = Spend(started=time.monotonic() - 100)
    reason = why(spend, Budget(max_wall_s=60))
    assert reason is not None and re.fullmatch(r"wall-clock budget spent: 10\d\.\d s of 60 s", reason)


def test_negative_budget_is_bad_input() -> None:
    with pytest.raises(InputError, match="max_tokens must not be negative"):
        Budget(max_tokens=-1)


def test_spend_records_replies() -> None:
    spend = Spend()
    spend.record(Reply("a", Usage(10, 5, 0.25), "stop", "m", 0.1, 1))
    spend.record(Reply("b", Usage(20, 7, None), "stop", "m", 0.1, 2))
    assert (spend.rounds, spend.prompt_tokens, spend.completion_tokens, spend.total_tokens) == (2, 30, 12, 42)
    assert spend.usd == 0.25 and len(spend.calls) == 2


def test_a_call_that_could_cross_the_token_budget_is_never_started(stub: StartStub) -> None:
    server = stub([chat("ok", prompt_tokens=40, completion_tokens=10)])
    model = wire_model(server)
    spend = Spend()
    with pytest.raises(BudgetExhausted, match="would exceed the token budget") as caught:
        complete_within(
            model,
            MESSAGES,
            budget=Budget(max_tokens=100),
            spend=spend,
            temperature=0,
            max_tokens=200,
            timeout_s=5,
        )
    assert caught.value.reason.startswith("would exceed the token budget")
    assert server.received == [] and spend.rounds == 0

    reply = complete_within(
        model, MESSAGES, budget=Budget(max_tokens=100), spend=spend, temperature=0, max_tokens=50, timeout_s=5
    )
    assert reply.text == "ok"
    assert (spend.rounds, spend.total_tokens, len(server.received)) == (1, 50, 1)


def test_prices_come_from_litellm_and_offline_schemes_are_free() -> None:
    assert price_per_token("replay:demo.toml") == (0.0, 0.0)
    assert price_per_token("mock:openai/porter-mock") == (0.0, 0.0)
    assert price_per_token("openai/test-model") is None
    known = price_per_token("gpt-4o-mini")
    assert known is not None and all(p > 0 for p in known)


def test_estimates() -> None:
    assert [estimate_tokens(s) for s in ("", "a", "abcd", "abcde")] == [0, 1, 1, 2]
    assert estimate_prompt_tokens([{"role": "user", "content": "abcdefgh"}]) == 2 + 4


# --- scripted replies --------------------------------------------------------------------------

SCRIPT = """\
label = "scripted replies for a demo, not a model"

[[reply]]
note = "first try: forgot the target"
text = '''
.version 8.7
.visible .entry k()
'''
prompt_tokens = 300
completion_tokens = 40

[[reply]]
text = '''abcdefgh'''
finish_reason = "length"
"""


def write(tmp_path: Path, text: str, name: str = "demo.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_replay_plays_in_order_then_runs_out(tmp_path: Path) -> None:
    model = make_model(f"replay:{write(tmp_path, SCRIPT)}", api_base=None)
    assert isinstance(model, ReplayModel) and model.name == "replay:demo.toml"
    assert model.replies[0].note == "first try: forgot the target"
    first, second = ask(model), ask(model)
    assert first.text == ".version 8.7\n.visible .entry k()\n"
    assert first.usage == Usage(300, 40, 0.0) and first.model == "replay:demo.toml"
    assert second.text == "abcdefgh" and second.truncated
    assert second.usage == Usage(estimate_prompt_tokens(MESSAGES), 2, 0.0)
    with pytest.raises(ModelError, match=r"^model replay:demo\.toml: scripted replies exhausted after 2$"):
        ask(model)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("label = 'scripted'\n[[reply]\ntext = 'x'\n", "TOML syntax error"),
        ("label = 'my replies'\n[[reply]]\ntext = 'x'\n", "label that says the replies are scripted"),
        ("label = 'scripted'\n", r"no \[\[reply\]\] tables"),
        ("label = 'scripted'\n[[reply]]\nnote = 'no text'\n", "reply 1: text must be a string"),
        (
            "label = 'scripted'\n[[reply]]\ntext = 'x'\nprompt_tokens = -3\n",
            "prompt_tokens must be a non-negative integer",
        ),
        ("label = 'scripted'\n[[reply]]\ntext = 'x'\ntxet = 'typo'\n", r"reply 1: unknown key\(s\) txet"),
    ],
)
def test_bad_script_is_bad_input_naming_the_file(tmp_path: Path, text: str, problem: str) -> None:
    path = write(tmp_path, text, "bad.toml")
    with pytest.raises(InputError, match=re.escape(str(path)) + ": .*" + problem):
        ReplayModel(path)


def test_missing_script_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="scripted replies file not found"):
        ReplayModel(tmp_path / "absent.toml")


# --- choosing the model ------------------------------------------------------------------------


def config(
    tmp_path: Path, text: str = 'model = "anthropic/claude-x"\napi_base = "http://proxy:4000"\n'
) -> Path:
    path = tmp_path / ".porter" / "config.toml"
    path.parent.mkdir()
    path.write_text(text)
    return path


def test_command_line_beats_environment_beats_config(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    env = {"PORTER_MODEL": "openai/gpt-env", "PORTER_API_BASE": "http://env:1/v1"}
    assert resolve_model("openai/gpt-cli", env=env, config_path=cfg) == (
        "openai/gpt-cli",
        "http://env:1/v1",
        "--model",
    )
    assert resolve_model(None, env=env, config_path=cfg) == (
        "openai/gpt-env",
        "http://env:1/v1",
        "PORTER_MODEL",
    )
    assert resolve_model(None, env={"PORTER_MODEL": ""}, config_path=cfg) == (
        "anthropic/claude-x",
        "http://proxy:4000",
        str(cfg),
    )
    assert resolve_model(None, env={}, config_path=tmp_path / "absent.toml") == (None, None, "none")
    assert resolve_model(None, env={}, config_path=None) == (None, None, "none")


def test_config_api_base_stays_with_the_config_model(tmp_path: Path) -> None:
    assert resolve_model("openai/gpt-cli", env={}, config_path=config(tmp_path)) == (
        "openai/gpt-cli",
        None,
        "--model",
    )


def test_bad_config_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"config\.toml: model must be a string"):
        resolve_model(None, env={}, config_path=config(tmp_path, "model = 3\n"))


def test_make_model() -> None:
    assert make_model(None, api_base=None) is None
    model = make_model("openai/gpt-x", api_base="http://127.0.0.1:9/v1")
    assert isinstance(model, LiteLLMModel)
    assert (model.name, model.api_base, model.api_key) == ("openai/gpt-x", "http://127.0.0.1:9/v1", None)


# --- import cost -------------------------------------------------------------------------------


def test_importing_the_module_loads_neither_litellm_nor_tenacity() -> None:
    code = "import sys, porter.agent.llm; print(sorted({'litellm', 'tenacity'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# --- pre-flight: can the model be called at all? (#13.2) ---------------------------------------


def _closed_port() -> int:
    with socket.socket() as s:  # a port that nothing listens on
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_missing_key_is_named_without_importing_litellm() -> None:
    code = ("import sys\nfrom porter.agent.llm import ModelError\nfrom porter.agent.model_choice import check_model\n"
            "try:\n    check_model('openai/gpt-4o', api_base=None, env={})\nexcept ModelError as e:\n"
            "    print(e.exit_code, e)\nprint('litellm' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[0].startswith("3 model openai/gpt-4o: OPENAI_API_KEY is not set")
    assert out[1] == "False"
    with pytest.raises(ModelError, match="ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN is not set"):
        check_model("anthropic/claude-x", api_base=None, env={"OPENAI_API_KEY": "k"})
    check_model("anthropic/claude-x", api_base=None, env={"ANTHROPIC_API_KEY": "k"})  # present: nothing to say
    check_model("replay:whatever.toml", api_base=None, env={})
    check_model(None, api_base=None, env={})
    with pytest.raises(ModelError, match="OPENAI_API_KEY is not set"):  # a bare name, routed as litellm does
        check_model("gpt-4o", api_base=None, env={})


def test_an_empty_key_counts_as_missing() -> None:
    with pytest.raises(ModelError, match="OPENAI_API_KEY is not set"):
        check_model("openai/gpt-4o", api_base=None, env={"OPENAI_API_KEY": ""})


def test_an_unreachable_api_base_is_named_at_once() -> None:
    port = _closed_port()
    started = time.monotonic()
    with pytest.raises(ModelError, match=rf"cannot reach the API at http://127.0.0.1:{port}/v1"):
        check_model("openai/local", api_base=f"http://127.0.0.1:{port}/v1", env={"OPENAI_API_KEY": "x"})
    assert time.monotonic() - started < 2
    with pytest.raises(ModelError, match=rf"cannot reach the API at http://127.0.0.1:{port}"):
        check_model("ollama_chat/llama3", api_base=None, env={"OLLAMA_API_BASE": f"http://127.0.0.1:{port}"})
    with pytest.raises(InputError, match="not a URL"):
        check_model("openai/local", api_base="http://:x", env={"OPENAI_API_KEY": "x"})


def test_a_reachable_api_base_passes(stub: StartStub) -> None:
    server = stub([])
    check_model("openai/local", api_base=server.api_base, env={"OPENAI_API_KEY": "x"})
    assert server.received == []  # a connection, not a request: nothing is spent


def test_an_unknown_provider_is_bad_input() -> None:
    with pytest.raises(InputError, match="litellm knows no such provider or model"):
        check_model("nosuchprovider/some-model", api_base=None, env={})


def test_the_key_table_agrees_with_litellm(monkeypatch: pytest.MonkeyPatch) -> None:
    """porter names the variables without importing litellm; litellm's validate_environment is the truth."""
    from porter.agent.llm import _litellm
    from porter.agent.model_choice import BARE_PREFIXES, PROVIDER_KEYS

    litellm = _litellm()
    for key in {k for keys in PROVIDER_KEYS.values() for k in keys}:
        monkeypatch.delenv(key, raising=False)
    for bare in ("gpt-4o", "o3-mini", "claude-haiku-4-5"):
        assert litellm.get_llm_provider(model=bare)[1] == next(p for prefixes, p in BARE_PREFIXES
                                                                if bare.startswith(prefixes))
    for provider, keys in PROVIDER_KEYS.items():
        missing = litellm.validate_environment(model=f"{provider}/some-model")["missing_keys"]
        assert missing and set(missing) <= set(keys), (provider, missing, keys)
        monkeypatch.setenv(keys[-1], "x")
        assert litellm.validate_environment(model=f"{provider}/some-model")["keys_in_environment"], provider
        monkeypatch.delenv(keys[-1])


def test_missing_credentials_at_call_time_fail_at_once(stub: StartStub, monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK's "Missing credentials" came as a 500 and was retried 5 times."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server = stub([chat("unused")])
    model = LiteLLMModel("openai/test-model", api_base=server.api_base, backoff_s=0.001)
    with pytest.raises(ModelError, match=r"^model openai/test-model: missing credentials: ") as caught:
        ask(model)
    assert "attempts" not in str(caught.value) and server.received == []
