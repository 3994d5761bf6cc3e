"""The digest key: one per porter run, shared with the processes it starts, and what the digest depends on."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import fake_cupy
import numpy as np
import pytest

from porter.gate.runner import Runner
from porter.gate.runner.digestkey import DIGEST_KEY_ENV, digest_key
from porter.gate.runner.fake import act, serve
from porter.gate.runner.protocol import OutputsReply
from porter.gate.runner.state import WorkerState

ROOT = Path(__file__).resolve().parent.parent


def _child_key(env: dict[str, str]) -> str:
    """The key a fresh Python process started with ``env`` reads (as 16 hex digits)."""
    code = "from porter.gate.runner.digestkey import digest_key; print(f'{digest_key():016x}')"
    env = {**env, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          check=True).stdout.strip()


@pytest.fixture
def no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process whose environment holds no key yet (put back as it was afterwards)."""
    monkeypatch.delenv(DIGEST_KEY_ENV, raising=False)


def test_a_process_draws_a_key_once_and_the_processes_it_starts_share_it(no_key: None) -> None:
    key = digest_key()
    assert os.environ[DIGEST_KEY_ENV] == f"{key:016x}" and digest_key() == key
    assert _child_key(dict(os.environ)) == f"{key:016x}"


def test_a_process_started_without_a_key_draws_another(no_key: None) -> None:
    key = digest_key()
    other = _child_key({k: v for k, v in os.environ.items() if k != DIGEST_KEY_ENV})
    assert len(other) == 16 and int(other, 16) != key


def test_a_key_given_in_the_environment_is_read() -> None:
    assert _child_key({DIGEST_KEY_ENV: "00000000000000fF"}) == "00000000000000ff"


@pytest.mark.parametrize("value", ["", "not hex", "ff", "0x00000000000000ff", "1" * 17])
def test_a_value_that_is_not_64_bits_of_hex_is_replaced(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(DIGEST_KEY_ENV, value)
    key = digest_key()
    assert os.environ[DIGEST_KEY_ENV] == f"{key:016x}" != value


def test_the_worker_gets_the_key_of_the_process_that_started_it(no_key: None) -> None:
    with Runner(target=serve, startup_timeout_s=60) as runner:
        reply = runner.call(act("digest_key"), 30)
    assert isinstance(reply, OutputsReply)
    assert int(reply.outputs["key"]) == int(os.environ[DIGEST_KEY_ENV], 16)


def _digest(state: WorkerState, data: bytes) -> int:
    """The digest ``state`` takes of ``data`` on the fake device."""
    out = fake_cupy.zeros(1, fake_cupy.uint64)
    state.digest(fake_cupy.asarray(np.frombuffer(data, dtype=np.uint8)), out, 0)
    return int(out[0])


def _state(monkeypatch: pytest.MonkeyPatch, key: str, folder: Path) -> WorkerState:
    monkeypatch.setenv(DIGEST_KEY_ENV, key)
    return WorkerState(fake_cupy, fenced=False, folder=folder)


def test_equal_bytes_give_equal_digests_and_another_key_another_digest(monkeypatch: pytest.MonkeyPatch,
                                                                       tmp_path: Path) -> None:
    data = bytes(range(7)) * 5  # 35 bytes: words and a tail
    state = _state(monkeypatch, "0123456789abcdef", tmp_path)
    other = _state(monkeypatch, "fedcba9876543210", tmp_path)
    try:
        assert _digest(state, data) == _digest(state, bytes(data))
        assert _digest(state, data) != _digest(state, data[:-1] + b"\xff")
        assert _digest(state, data) != _digest(other, data)
    finally:
        state.close()
        other.close()
