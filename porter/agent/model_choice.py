"""Which model a command runs with (``--model``, ``PORTER_MODEL``, the project's config file), whether
it can be called at all before anything is spent (keys, a local server's reach), and its client."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from porter._toml import tomllib
from porter.agent.llm import LiteLLMModel, ModelClient, ModelError, _litellm
from porter.agent.replay import ReplayModel
from porter.errors import InputError

# Where resolve_model's caller looks for the project's model settings, relative to the project root.
CONFIG_FILE = Path(".porter") / "config.toml"



def resolve_model(
    cli_model: str | None, *, env: Mapping[str, str], config_path: Path | None
) -> tuple[str | None, str | None, str]:
    """(model, api_base, where it came from): ``--model``, then ``PORTER_MODEL``, then the config file.

    The api_base travels with its model: the config file's ``api_base`` applies only to the config
    file's ``model``. ``PORTER_API_BASE`` applies to a model from ``--model`` or ``PORTER_MODEL``;
    a command's ``--api-base`` option overrides either (see :func:`open_model`). Empty values count
    as unset.
    """
    env_base = env.get("PORTER_API_BASE") or None
    if cli_model:
        return cli_model, env_base, "--model"
    if env.get("PORTER_MODEL"):
        return env["PORTER_MODEL"], env_base, "PORTER_MODEL"
    if config_path is not None and config_path.is_file():
        try:
            data = tomllib.loads(config_path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
            raise InputError(f"{config_path}: cannot read the porter config ({e})") from None
        _refuse_unknown_config_keys(data, config_path)
        model, api_base = data.get("model"), data.get("api_base")
        for key, value in (("model", model), ("api_base", api_base)):
            if value is not None and not isinstance(value, str):
                raise InputError(f"{config_path}: {key} must be a string")
        if model:
            return model, api_base or None, str(config_path)
    return None, None, "none"


CONFIG_KEYS = ("model", "api_base")


def _refuse_unknown_config_keys(data: Mapping[str, Any], config_path: Path) -> None:
    """A key porter does not read is a typo until shown otherwise: ``modle = ...`` would otherwise
    run the port without a model, and say so only at the end."""
    for key in data:
        if key not in CONFIG_KEYS:
            close = difflib.get_close_matches(key, CONFIG_KEYS, n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise InputError(f"{config_path}: unknown key {key!r}{hint}; porter reads {' and '.join(CONFIG_KEYS)}")


# The environment variables litellm needs for the providers porter's users name most; any one of a
# group is enough. They follow litellm.validate_environment (tests/test_model.py holds the two in
# agreement) and are checked without importing litellm, which takes 5-8 s: a missing key is said at
# once. Other providers are asked of litellm itself.
PROVIDER_KEYS: dict[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    "mistral": ("MISTRAL_API_KEY",),
    "groq": ("GROQ_API_KEY",),
    "deepseek": ("DEEPSEEK_API_KEY",),
    "xai": ("XAI_API_KEY",),
    "openrouter": ("OPENROUTER_API_KEY",),
    "together_ai": ("TOGETHERAI_API_KEY",),
    "fireworks_ai": ("FIREWORKS_AI_API_KEY", "FIREWORKS_API_KEY", "FIREWORKSAI_API_KEY", "FIREWORKS_AI_TOKEN"),
    "cohere": ("COHERE_API_KEY",),
    "deepinfra": ("DEEPINFRA_API_KEY",),
    "cerebras": ("CEREBRAS_API_KEY",),
    "nvidia_nim": ("NVIDIA_NIM_API_KEY",),
    "perplexity": ("PERPLEXITYAI_API_KEY",),
}
# Local servers take no key; where they listen by default (or the variable litellm reads instead).
LOCAL_PROVIDERS: dict[str, tuple[str, str | None]] = {
    "ollama": ("OLLAMA_API_BASE", "http://localhost:11434"),
    "ollama_chat": ("OLLAMA_API_BASE", "http://localhost:11434"),
    "hosted_vllm": ("HOSTED_VLLM_API_BASE", None),
}
# Bare model names (no "provider/") litellm routes by their prefix, for the key check only.
BARE_PREFIXES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("gpt-", "chatgpt-", "o1", "o3", "o4"), "openai"),
    (("claude-",), "anthropic"),
)
REACH_TIMEOUT_S = 3.0


def check_model(model: str | None, *, api_base: str | None, env: Mapping[str, str],
                reach_timeout_s: float = REACH_TIMEOUT_S) -> None:
    """Before a session spends anything: can this model be called at all?

    Raises :class:`ModelError` (exit 3) naming the missing environment variable, or the URL of a
    server that does not accept a connection; :class:`InputError` (exit 2) for a provider litellm
    does not know. ``replay:`` and ``mock:`` need nothing. The credentials of the common providers
    are checked without importing litellm; only a server porter is told about (``--api-base``, or a
    local provider's default) is contacted, with one TCP connection.
    """
    if model is None or model.startswith(("replay:", "mock:")):
        return
    provider, slash, _ = model.partition("/")
    provider = provider if slash else next((p for prefixes, p in BARE_PREFIXES if model.startswith(prefixes)), "")
    base = api_base
    if provider in PROVIDER_KEYS:
        keys = PROVIDER_KEYS[provider]
        if not any(env.get(k) for k in keys):
            hint = "; a local OpenAI-compatible server that takes no key accepts any value" if api_base else ""
            raise ModelError(f"model {model}: {' or '.join(keys)} is not set (litellm reads the {provider} key from "
                             f"it){hint}")
    elif provider in LOCAL_PROVIDERS:
        variable, default = LOCAL_PROVIDERS[provider]
        base = api_base or env.get(variable) or default
        if base is None:
            raise InputError(f"model {model}: give the server's URL with --api-base (or set {variable})")
    else:
        _check_with_litellm(model, api_base=api_base, env=env)
    if base:
        _reachable(model, base, reach_timeout_s)


def _check_with_litellm(model: str, *, api_base: str | None, env: Mapping[str, str]) -> None:
    litellm = _litellm()
    try:
        _, provider, _, _ = litellm.get_llm_provider(model=model, api_base=api_base)
    except Exception:
        provider = model.partition("/")[0] if "/" in model else model
        raise InputError(f"model {model!r}: litellm knows no such provider or model ({provider!r}); name it as "
                         f"provider/model, e.g. openai/gpt-4o or anthropic/claude-sonnet-4-5") from None
    missing = [k for k in litellm.validate_environment(model=model, api_base=api_base).get("missing_keys") or []
               if not env.get(k)]
    if missing and not (api_base and all(k.endswith("_API_BASE") for k in missing)):
        raise ModelError(f"model {model}: {' and '.join(missing)} not set (litellm needs it for {provider})")


def _reachable(model: str, url: str, timeout_s: float) -> None:
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(url if "://" in url else f"http://{url}")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise InputError(f"model {model}: --api-base {url!r} is not a URL") from None
    if not parts.hostname:
        raise InputError(f"model {model}: --api-base {url!r} is not a URL")
    try:
        socket.create_connection((parts.hostname, port), timeout=timeout_s).close()
    except OSError as err:
        why = err.strerror or str(err) or type(err).__name__
        raise ModelError(f"model {model}: cannot reach the API at {url} ({why})") from None


def make_model(model: str | None, *, api_base: str | None,
               replay_model: type[ReplayModel] = ReplayModel) -> ModelClient | None:
    """The client for a model spec: None (no model; porter makes the mechanical baseline only),
    ``replay:FILE`` (scripted replies, played by ``replay_model``), ``mock:TEXT`` (litellm answers
    TEXT locally), or a litellm model name such as ``openai/gpt-4o``."""
    if model is None:
        return None
    if model.startswith("replay:"):
        return replay_model(Path(model.removeprefix("replay:")))
    if model.startswith("mock:"):
        return LiteLLMModel("openai/porter-mock", mock_response=model.removeprefix("mock:"))
    return LiteLLMModel(model, api_base=api_base)


def open_model(model: str | None, *, api_base: str | None, env: Mapping[str, str],
               config_path: Path | None, replay_model: type[ReplayModel] = ReplayModel) -> ModelClient | None:
    """The model a command runs with, ready to call: resolved (``--model``, ``PORTER_MODEL``, the
    config file; ``api_base``, the ``--api-base`` option, overrides the one resolved with it),
    checked (:func:`check_model`: a missing key is one line, exit 3, before any work) and made."""
    name, base, _where = resolve_model(model, env=env, config_path=config_path)
    check_model(name, api_base=api_base or base, env=env)
    return make_model(name, api_base=api_base or base, replay_model=replay_model)
