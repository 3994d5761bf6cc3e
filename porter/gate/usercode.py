"""The user's Python next to a spec: references, baselines and derive functions, imported by path.

A spec names them as ``FILE.py:FUNCTION`` (:class:`porter.gate.spec.CallableRef`); they are
imported only when called (a spec loads without running any of its code), once per file, under a
module name of their own so that two specs' ``ref.py`` never collide.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from typing import Any


def load_callable(path: str, function: str) -> Any:
    """``function`` of the Python file at ``path`` (RuntimeError when either is missing)."""
    module_name = "porter_user_" + hashlib.sha1(path.encode()).hexdigest()[:12]
    module = sys.modules.get(module_name)
    if module is None:
        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None or spec.loader is None:
            raise RuntimeError(f"cannot import {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[module_name]
            raise
    fn = getattr(module, function, None)
    if fn is None:
        raise RuntimeError(f"{path} has no function {function!r}")
    return fn
