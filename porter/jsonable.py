"""Turn porter's result dataclasses into plain JSON-ready values, and back.

One converter for every ``--json`` output and run record, so that no module hand-writes its own
``to_dict``; :func:`from_jsonable` reads them back as the same types. Bytes (cubins) are
summarised by their length: JSON output is for reading, not for binaries (no Verdict holds bytes).
"""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import math
import types
import typing
from pathlib import Path
from typing import Any


def to_jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        data = {
            f.name: to_jsonable(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if f.repr  # fields declared repr=False (module text, raw blobs) stay out of reports
        }
        # Derived values a class names in JSON_DERIVED (a judgement's status word) are written for
        # readers of the JSON; from_jsonable ignores them, since they follow from the fields.
        for name in getattr(value, "JSON_DERIVED", ()):
            data[name] = to_jsonable(getattr(value, name))
        return data
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, bytes):
        return {"bytes": len(value)}
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # JSON has no NaN/Inf
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return to_jsonable(value.item())
    return value


def from_jsonable(kind: Any, value: Any) -> Any:
    """The inverse of :func:`to_jsonable`: rebuild a value of type ``kind`` (a dataclass, a
    container of them, an enum, ...) from what ``to_jsonable`` made of it, so that records read
    back are typed, never raw dicts. ``to_jsonable`` then ``from_jsonable`` gives back an equal value
    (non-finite floats, enums, int dict keys and tuples included).

    Records written by an older porter may lack fields added since: a missing field takes its
    default, else the empty value of its type (``""``, ``0``, ``()``, ``None`` ...). Keys that are
    no field (a status word written for readers of the JSON) are ignored.
    """
    if kind is Any or (value is None and _optional(kind)):
        return value
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        if value is None:
            return None
        if type(value) in args and type(value) in (int, float, str, bool):
            return value  # 3 for ``float | int`` stays an int
        for option in (a for a in args if a is not type(None)):
            try:
                return from_jsonable(option, value)
            except (TypeError, ValueError, KeyError):
                continue
        raise ValueError(f"{value!r} is none of {kind}")
    if origin is typing.Literal:
        return value
    if dataclasses.is_dataclass(kind) and isinstance(kind, type):
        if not isinstance(value, dict):
            raise TypeError(f"{kind.__name__}: expected an object, got {value!r}")
        hints = typing.get_type_hints(kind)
        fields = {}
        for f in dataclasses.fields(kind):
            if not f.init:
                continue
            if f.name in value:
                fields[f.name] = from_jsonable(hints[f.name], value[f.name])
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                fields[f.name] = _empty(hints[f.name])
        return kind(**fields)
    if origin is tuple or kind is tuple:
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"expected a list, got {value!r}")
        if (len(args) == 2 and args[1] is Ellipsis) or not args:
            return tuple(from_jsonable(args[0] if args else Any, v) for v in value)
        return tuple(from_jsonable(a, v) for a, v in zip(args, value, strict=True))
    if origin in (list, collections.abc.Sequence) or kind is list:
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"expected a list, got {value!r}")
        return [from_jsonable(args[0] if args else Any, v) for v in value]
    if origin in (dict, collections.abc.Mapping) or kind is dict:
        if not isinstance(value, dict):
            raise TypeError(f"expected an object, got {value!r}")
        key, item = args if args else (Any, Any)
        return {from_jsonable(key, k): from_jsonable(item, v) for k, v in value.items()}
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return kind(value)
    if kind is float:
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise TypeError(f"expected a number, got {value!r}")
        return float(value)  # "inf", "nan": how to_jsonable writes non-finite floats
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise TypeError(f"expected an integer, got {value!r}")
        return int(value)
    if kind is bool:
        if not isinstance(value, bool):
            raise TypeError(f"expected true or false, got {value!r}")
        return value
    if kind is str:
        if not isinstance(value, str):
            raise TypeError(f"expected a string, got {value!r}")
        return value
    if kind is Path:
        return Path(value)
    return value


def _optional(kind: Any) -> bool:
    return typing.get_origin(kind) in (typing.Union, types.UnionType) and type(None) in typing.get_args(kind)


def _empty(kind: Any) -> Any:
    """The value a field that a record lacks takes."""
    if _optional(kind) or kind is Any:
        return None
    origin = typing.get_origin(kind) or kind
    if isinstance(origin, type) and issubclass(origin, enum.Enum):
        return next(iter(origin))
    if origin is typing.Literal:
        return typing.get_args(kind)[0]
    if dataclasses.is_dataclass(origin):
        return from_jsonable(origin, {})
    empties = {str: "", int: 0, float: 0.0, bool: False, tuple: (), list: [], dict: {},
               collections.abc.Sequence: (), collections.abc.Mapping: {}, Path: Path()}
    return empties.get(origin)
