"""Where the data folders (profiles/, agents/) live.

In a wheel they are shipped inside the package as ``porter/_data/<name>``; in a source checkout
(editable install, or PYTHONPATH pointing at the repository) they are the top-level folders.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """Return the folder holding the shipped data ``name`` ("profiles" or "agents")."""
    for candidate in (_PACKAGE / "_data" / name, _PACKAGE.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"porter's data folder {name!r} is missing from this installation")
