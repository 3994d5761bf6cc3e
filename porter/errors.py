"""porter's exit codes, and one exception family whose message is meant for the user.

The CLI prints ``str(error)`` on one line and exits with ``error.exit_code``: 2 for bad input or
usage, 3 for the environment (no GPU, no toolchain, model API down). Exit 1 is reserved for "the
kernel failed the gate" and is never raised as an exception. Any other exception is a bug in
porter: one line, exit 70 (:attr:`ExitCode.INTERNAL`).
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Every code porter exits with, in one place (the README's "Exit codes" lists them)."""

    OK = 0
    """Passed, or done."""
    FAILED = 1
    """The kernel failed the gate (or a port passed without the target's native instructions)."""
    INPUT = 2
    """Bad input or usage: the user's to fix."""
    ENVIRONMENT = 3
    """The machine lacks something porter needs (GPU, toolchain, a model's key), or the kernel could
    not run here: fixed by another machine or an install, not by changing the input."""
    INTERNAL = 70
    """A bug in porter. A code of its own, so that a script or CI job that retries or reroutes on 3
    (no GPU here) does not do so for a bug, and a bug is not reported as a missing GPU. 70 is
    ``EX_SOFTWARE`` of BSD's sysexits.h, "an internal software error"; it is clear of 0-3 and of the
    codes shells use (126 and up)."""
    INTERRUPTED = 130
    """Ctrl-C: 128 + SIGINT, as shells report it."""


class PorterError(Exception):
    """An error with a one-line, user-facing message."""

    exit_code: int = ExitCode.INPUT

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class InputError(PorterError):
    """The user's input (a file, a spec, an option) is wrong. Exit code 2."""

    exit_code = ExitCode.INPUT


class EnvironmentProblem(PorterError):
    """The machine lacks something porter needs (toolchain, GPU, driver). Exit code 3."""

    exit_code = ExitCode.ENVIRONMENT


def file_problem(err: OSError) -> InputError | None:
    """An OSError on a file or folder (permission denied, read-only file system, is a folder...)
    as the one line the user needs: the path and what the system said (exit 2: the path is the
    user's to fix). None for an OSError that names no path, which stays porter's own error."""
    if err.filename is None:
        return None
    where = f"{err.filename} -> {err.filename2}" if err.filename2 is not None else str(err.filename)
    return InputError(f"{where}: {err.strerror or type(err).__name__}")
