"""One exception family whose message is meant for the user.

The CLI prints ``str(error)`` on one line and exits with ``error.exit_code``:
2 for bad input or usage, 3 for the environment (no GPU, no toolchain, model API down).
Exit 1 is reserved for "the kernel failed the gate" and is never raised as an exception.
"""

from __future__ import annotations


class PorterError(Exception):
    """An error with a one-line, user-facing message."""

    exit_code = 2

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class InputError(PorterError):
    """The user's input (a file, a spec, an option) is wrong. Exit code 2."""

    exit_code = 2


class EnvironmentProblem(PorterError):
    """The machine lacks something porter needs (toolchain, GPU, driver). Exit code 3."""

    exit_code = 3


def file_problem(err: OSError) -> InputError | None:
    """An OSError on a file or folder (permission denied, read-only file system, is a folder...)
    as the one line the user needs: the path and what the system said (exit 2: the path is the
    user's to fix). None for an OSError that names no path, which stays porter's own error."""
    if err.filename is None:
        return None
    where = f"{err.filename} -> {err.filename2}" if err.filename2 is not None else str(err.filename)
    return InputError(f"{where}: {err.strerror or type(err).__name__}")
