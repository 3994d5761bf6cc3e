"""Turn porter's result dataclasses into plain JSON-ready values.

One converter for every ``--json`` output, so that no module hand-writes its own ``to_dict``.
Bytes (cubins) are summarised by their length: JSON output is for reading, not for binaries.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from pathlib import Path
from typing import Any


def to_jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: to_jsonable(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if f.repr  # fields declared repr=False (module text, raw blobs) stay out of reports
        }
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
