"""How porter starts a Python process of its own (a GPU worker, a profiler's launch of one kernel):
importing nothing from the folder porter runs in, and holding none of the model provider's keys.

``python -c`` and ``python -m`` put the current folder first on the new process's import path,
ahead of the standard library and of porter. ``porter ci`` runs in a pull request's checkout, so a
``multiprocessing.py`` or a ``porter/`` package committed there would run in porter's child, as the
bot's user and with the bot's environment, before a line of porter's code. Each child therefore
starts in an empty folder of its own with ``PYTHONSAFEPATH`` set (Python 3.11 and later then leave
the folder off the path; the empty folder is what holds on 3.10), and without any variable whose
name says key, token, secret, password or credential (porter's own digest key aside: the children
must share it). multiprocessing's spawn takes neither a folder nor an environment for its child,
so its children start through a small launcher script that sets both (:func:`launcher`); a spawned
child moves back to the parent's folder only after its start-up, when its import path is the
parent's.
"""

from __future__ import annotations

import atexit
import functools
import os
import re
import shlex
import shutil
import sys
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path

from porter.gate.runner.digestkey import DIGEST_KEY_ENV

_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
_KEPT = frozenset({DIGEST_KEY_ENV})
_launcher_lock = threading.Lock()


def secret_names(environ: Mapping[str, str]) -> list[str]:
    """The variables of ``environ`` a child of porter's never receives."""
    return sorted(name for name in environ if _SECRET_NAME.search(name) and name not in _KEPT)


def child_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``environ`` (this process's by default) for a Python child: no secrets, no unsafe path."""
    source = os.environ if environ is None else environ
    dropped = set(secret_names(source))
    env = {name: value for name, value in source.items() if name not in dropped}
    env["PYTHONSAFEPATH"] = "1"
    return env


@functools.cache
def _home() -> Path:
    home = Path(tempfile.mkdtemp(prefix="porter-child-"))  # this user's alone (0700)
    (home / "cwd").mkdir()
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    return home


def empty_folder() -> Path:
    """The folder porter's Python children start in: empty, and writable by this user only."""
    return _home() / "cwd"


def launcher() -> str:
    """An executable that runs this Python in :func:`empty_folder`, with :func:`child_env`'s
    changes to this process's present environment: what multiprocessing's spawn should start.
    Where there is no POSIX shell, this Python itself (``PYTHONSAFEPATH`` then holds on 3.11+
    only where the caller's environment sets it)."""
    if os.name != "posix":
        return sys.executable
    unset = " ".join(f"-u {shlex.quote(name)}" for name in secret_names(os.environ))
    script = (f"#!/bin/sh\ncd {shlex.quote(str(empty_folder()))} || exit 1\n"
              f"exec /usr/bin/env {unset} PYTHONSAFEPATH=1 {shlex.quote(sys.executable)} \"$@\"\n")
    path = _home() / "python"
    with _launcher_lock:
        if not path.is_file() or path.read_text() != script:
            staged = path.with_name(f"python.{os.getpid()}.{threading.get_ident()}")
            staged.write_text(script)
            staged.chmod(0o700)
            os.replace(staged, path)
    return str(path)
