"""The secret that keys porter's output digests (``porter_digest`` in :mod:`porter.gate.runner.state`).

A digest stands for a launch's output bytes: a case's later runs, the timed launches and the
launches under ncu or compute-sanitizer are held to the digests of the verified run. Were its
coefficients public, a kernel that knew the right output could write other bytes with the same
digest. Each coefficient is therefore a mix of the word's place and a 64-bit key the kernel does
not know.

Every digest compared within a porter run comes from this process or from one it started (the GPU
workers, spawned; ``launch_once`` under a tool, given this process's environment), so the key lives
in the environment: the first call draws it and sets :data:`DIGEST_KEY_ENV`, and every process
started after that reads the same key. It reaches the GPU only as an argument of porter's own digest
launch, never in memory a candidate's launch is handed. The limit: a kernel could read it from the
worker's host memory only at an address it would have to guess.
"""

from __future__ import annotations

import os
import re
import secrets

DIGEST_KEY_ENV = "PORTER_DIGEST_KEY"

_KEY = re.compile(r"[0-9a-fA-F]{16}")  # 64 bits, as this module writes it


def digest_key() -> int:
    """This run's key: :data:`DIGEST_KEY_ENV` (16 hex digits) where it holds one, else a fresh
    key, which is written there for the processes started from now on."""
    value = os.environ.get(DIGEST_KEY_ENV, "")
    if _KEY.fullmatch(value):
        return int(value, 16)
    key = secrets.randbits(64)
    os.environ[DIGEST_KEY_ENV] = f"{key:016x}"
    return key
