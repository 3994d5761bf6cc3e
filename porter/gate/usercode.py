"""The user's Python next to a spec: references, baselines and derive functions, imported by path.

A spec names them as ``FILE.py:FUNCTION`` (:class:`porter.gate.spec.CallableRef`); they are
imported only when called (a spec loads without running any of its code), once per file, under a
module name of their own so that two specs' ``ref.py`` never collide.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np

_IMPORTING = threading.RLock()  # one import of a user's file at a time (a pool's checks call in threads)


def load_callable(path: str, function: str) -> Any:
    """``function`` of the Python file at ``path`` (RuntimeError when either is missing). Thread
    safe: a module is in ``sys.modules`` only once its file has run, so a second thread never finds
    it half made (without its functions yet)."""
    module_name = "porter_user_" + hashlib.sha1(path.encode()).hexdigest()[:12]
    with _IMPORTING:
        module = sys.modules.get(module_name)
        if module is None:
            spec = importlib.util.spec_from_file_location(module_name, path)
            if spec is None or spec.loader is None:
                raise RuntimeError(f"cannot import {path}")
            module = importlib.util.module_from_spec(spec)
            sys.modules[module_name] = module  # as an import does: the file may import itself
            try:
                spec.loader.exec_module(module)
            except BaseException:
                del sys.modules[module_name]
                raise
    fn = getattr(module, function, None)
    if fn is None:
        raise RuntimeError(f"{path} has no function {function!r}")
    return fn


def on_host(value: Any, empty: Any = None) -> Any:
    """What a reference returned for one output, as a NumPy array: a device array (CuPy's, or any
    with ``get``) copied down, into ``empty(count, dtype)``'s array where given (the worker's are
    page-locked)."""
    if not hasattr(value, "__cuda_array_interface__"):
        return np.asarray(value)
    if empty is None:
        return np.asarray(value.get())
    host = empty(value.size, value.dtype).reshape(value.shape)
    try:
        value.get(out=host)
    except Exception:  # an array type whose get takes no out, or not this one (a strided view)
        return np.asarray(value.get())
    return host


def callable_problem(path: Path, function: str) -> str:
    """Why ``function`` of the Python file at ``path`` cannot be a reference, said without running
    any of the file (a spec's code runs only when called, and then in the GPU worker): the file is
    missing or unreadable, does not parse, or binds no top-level ``function``; '' when it may be
    imported. A file that star-imports may bind it there: that is left for the import to say."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except OSError as err:
        return f"{path}: cannot read: {err.strerror}"
    except (SyntaxError, ValueError, UnicodeDecodeError) as err:
        line = f" line {err.lineno}:" if isinstance(err, SyntaxError) and err.lineno else ""
        return f"{path} does not import:{line} {getattr(err, 'msg', None) or err}"
    if function in _top_level_names(tree) or "*" in _top_level_names(tree):
        return ""
    return f"{path} has no function {function!r}"


def _top_level_names(tree: ast.Module) -> set[str]:
    """The names a module binds at its top level (definitions, assignments, imports; ``*`` for a
    star import), looking into top-level ``if``/``try`` blocks (``try: import x`` / ``except``)."""
    names: set[str] = set()
    todo: list[ast.stmt] = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            todo += [*node.body, *getattr(node, "orelse", []), *getattr(node, "finalbody", []),
                     *(s for h in getattr(node, "handlers", []) for s in h.body)]
    return names
