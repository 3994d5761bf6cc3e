"""Reading a spec: :func:`load_spec` reads ``porter.toml`` and :func:`parse_spec` checks its parsed
TOML, key by key (:class:`SpecReader`), into a :class:`~porter.gate.spec.model.Spec`, then has the
spec evaluate every size-dependent value. Each error names the file and the key path.
"""

from __future__ import annotations

import ast
import difflib
import keyword
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from porter._toml import tomllib
from porter.errors import InputError
from porter.gate import todo
from porter.gate.dtypes import DType, parse_dtype
from porter.gate.expr import Expr, check_symbols, evaluate, free_symbols, resolve_sizes
from porter.gate.spec.model import Spec
from porter.gate.spec.types import (
    DEFAULT_ALIGN,
    DEFAULT_MAX_TILE,
    DEFAULT_NATIVE_SHARE,
    DEFAULT_WIDE,
    DOMAINS,
    FILLS,
    KINDS,
    MAX_BOX,
    ROLES,
    SWIZZLES,
    CallableRef,
    CostSpec,
    Domain,
    FillSpec,
    InputsSpec,
    KernelStep,
    LaunchSpec,
    ParamSpec,
    ReferenceSpec,
    TensorMapSpec,
    Tolerance,
    ValueCase,
    ValueSpec,
    default_fill,
    fill_span,
)

_TOP_KEYS = (
    "kernel",
    "sizes",
    "values",
    "kernels",
    "sweep",
    "emulate",
    "params",
    "launch",
    "reference",
    "tolerance",
    "cost",
    "baseline",
    "profile",
    "inputs",
    "todo",
)
_PARAM_KEYS = {
    "buffer": ("name", "kind", "dtype", "shape", "role", "fill", "ld", "derive", "deterministic", "domain", "finite",
               "align"),
    "scalar": ("name", "kind", "dtype", "value", "range", "const"),
    "scratch": ("name", "kind", "bytes"),
    "tensormap": ("name", "kind", "tensor", "dims", "box", "swizzle"),
}
_STEP_KEYS = ("entry", "grid", "block", "shared", "cluster", "args", "zero")
_CONSTANT_FILLS = frozenset({"zeros", "zero", "ones", "one", "full", "constant", "const", "fill", "empty"})
_FILL_USAGE = "uniform(lo, hi), normal(mean, std) or randint(lo, hi)"


def load_spec(path: Path, *, allow_todo: bool = False) -> Spec:
    """Read and check a spec file (a folder means its ``porter.toml``). A spec whose ``todo`` list
    is not empty is refused with the list (see :mod:`porter.gate.todo`) unless ``allow_todo``."""
    path = Path(path)
    if path.is_dir():
        path = path / "porter.toml"
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{path}: spec file not found") from None
    except OSError as e:
        raise InputError(f"{path}: cannot read the spec ({e.strerror})") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise InputError(f"{path.name}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"{path.name}: TOML syntax error: {e}") from None
    left = todo.pending(data, path.name)
    if left and not allow_todo:
        raise todo.refusal(left, path.name)
    return parse_spec(data, base_dir=path.resolve().parent, source=path.name)


def parse_spec(data: Mapping[str, Any], *, base_dir: Path, source: str) -> Spec:
    """Check a spec's parsed TOML and build the :class:`Spec`; ``source`` names the file in messages."""
    p = SpecReader(source, Path(base_dir))
    return p.spec(p.table(data, ""))


def _toml_type(value: object) -> str:
    names = {
        dict: "a table",
        list: "an array",
        str: "a string",
        bool: "a boolean",
        int: "an integer",
        float: "a float",
    }
    return names.get(type(value), type(value).__name__)


@dataclass(frozen=True)
class SpecReader:
    """The parsing steps, sharing the file name (for messages) and the spec's folder."""

    source: str
    base_dir: Path

    def error(self, key: str, problem: str) -> InputError:
        message = f"{self.source}: {key}: {problem}" if key else f"{self.source}: {problem}"
        return InputError(message.replace("\r", "\\r").replace("\n", "\\n"))  # one line, whatever a key holds

    def table(self, value: object, key: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.error(key, f"must be a table (got {_toml_type(value)})")
        return value

    def keys(self, table: Mapping[str, Any], allowed: tuple[str, ...], key: str, what: str = "") -> None:
        for k in table:
            if k not in allowed:
                close = difflib.get_close_matches(k, allowed, n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                raise self.error(
                    f"{key}.{k}" if key else k, f"unknown key{what} ({hint}allowed: {', '.join(allowed)})"
                )

    def string(self, table: Mapping[str, Any], name: str, key: str, *, default: str | None = None) -> str:
        value = table.get(name, default)
        if value is None:
            raise self.error("", f"{key}.{name} is missing")
        if not isinstance(value, str) or (default is None and not value.strip()):
            raise self.error(f"{key}.{name}", f"must be a non-empty string (got {value!r})")
        return value

    def expr(self, value: object, key: str, known: tuple[str, ...]) -> Expr:
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise self.error(key, f"must be a number or an expression string (got {_toml_type(value)})")
        check_symbols(value, known, where=f"{self.source}: {key}")
        return value

    def spec(self, data: dict[str, Any]) -> Spec:
        self.keys(data, _TOP_KEYS, "", " at the top level")
        kernel = self.table(data.get("kernel", {}), "kernel")
        self.keys(kernel, ("entry", "description", "require", "max_tile", "max_sizes"), "kernel")
        sequence = "kernels" in data
        entry = self.entry_name(kernel.get("entry"), "kernel.entry") if "entry" in kernel or not sequence else ""
        description = self.string(kernel, "description", "kernel", default="")

        sizes, known = self.sizes(data.get("sizes", {}))
        require = self.require(kernel.get("require", []), known)
        max_tile = kernel.get("max_tile", DEFAULT_MAX_TILE)
        if isinstance(max_tile, bool) or not isinstance(max_tile, int) or max_tile < 1 or max_tile & (max_tile - 1):
            raise self.error("kernel.max_tile", f"must be a power of two (got {max_tile!r})")
        max_sizes = self.table(kernel.get("max_sizes", {}), "kernel.max_sizes")
        for name, most in max_sizes.items():
            if name not in known:
                raise self.error(f"kernel.max_sizes.{name}", f"not a size symbol of [sizes] ({', '.join(known)})")
            if isinstance(most, bool) or not isinstance(most, int) or most < 1:
                raise self.error(f"kernel.max_sizes.{name}", f"must be a positive integer (got {most!r})")
        values = self.values(data.get("values", {}), known)
        valued = known + tuple(v.name for v in values)
        reference = self.reference(data["reference"]) if "reference" in data else None
        sweep = self.sweep(data.get("sweep", []), known)
        emulate = self.sweep(data.get("emulate", []), known, "emulate")
        params = self.params(data.get("params"), known, valued, reference)
        for v in values:
            if any(p.name == v.name for p in params):
                raise self.error(f"values.{v.name}", "is also a param's name: the reference gets both in its args")
        outputs = {p.name: p for p in params if p.is_output}
        if not outputs:
            raise self.error("params", "no out or inout buffer: porter needs an output to check")
        kernels: tuple[KernelStep, ...] = ()
        if sequence:
            if "launch" in data:
                raise self.error("launch", "give [launch] for one kernel or [[kernels]] for a sequence, not both")
            kernels = self.kernels(data["kernels"], "kernels", known, params)
            entries = [k.entry for k in kernels if k.entry]
            if not entry:
                entry = entries[0]
            elif entry not in entries:
                raise self.error("kernel.entry", f"with [[kernels]], names the hot loop by one of its entries "
                                 f"({', '.join(entries)}); got {entry!r}")
            launch = next(k.launch for k in kernels if k.entry == entry)
            assert launch is not None
        elif "launch" not in data:
            raise self.error("", "the [launch] table is missing")
        else:
            launch = self.launch(data["launch"], known)
        spec = Spec(
            entry=entry,
            description=description,
            sizes=sizes,
            sweep=sweep,
            params=params,
            launch=launch,
            reference=reference,
            tolerances=self.tolerances(data.get("tolerance", {}), outputs, known),
            cost=self.cost(data["cost"], known) if "cost" in data else None,
            baseline=self.baseline(data["baseline"]) if "baseline" in data else None,
            profile=self.profile(data.get("profile", {})),
            base_dir=self.base_dir,
            source=self.source,
            inputs_spec=self.inputs(data.get("inputs", {}), params, known, valued),
            require=require,
            values=values,
            kernels=kernels,
            max_tile=max_tile,
            max_sizes=dict(max_sizes),
            emulate=emulate,
        )
        spec.validate()
        return spec

    def entry_name(self, value: object, key: str) -> str:
        if value is None:
            raise self.error("", f"{key} is missing")
        if not isinstance(value, str) or not value.strip():
            raise self.error(key, f"must be a non-empty string (got {value!r})")
        if value.strip() != value or " " in value:
            raise self.error(key, f"must be a PTX entry name without spaces (got {value!r})")
        return value

    def require(self, raw: object, known: tuple[str, ...]) -> tuple[str, ...]:
        """``kernel.require``: the size contract, expressions over the sizes (non-zero: holds)."""
        if not isinstance(raw, list):
            raise self.error("kernel.require", 'must be an array of expressions, e.g. ["N % 16 == 0", "D == 64"]')
        for i, rule in enumerate(raw):
            if not isinstance(rule, str):
                raise self.error(f"kernel.require[{i}]", f"must be an expression string (got {_toml_type(rule)})")
            check_symbols(rule, known, where=f"{self.source}: kernel.require[{i}]")
        return tuple(raw)

    def values(self, raw: object, known: tuple[str, ...]) -> tuple[ValueSpec, ...]:
        """``[values]``: name = { dtype, value } or { dtype, range = [lo, hi] }, over the sizes."""
        table = self.table(raw, "values")
        values = []
        for name, entry in table.items():
            key = f"values.{name}"
            if not name.isidentifier() or keyword.iskeyword(name):
                raise self.error(key, "a value's name must be a name like eps or scale")
            if name in known:
                raise self.error(key, "is also a size symbol: a value is not a size")
            if not isinstance(entry, dict):
                raise self.error(key, 'must be a table such as { dtype = "f32", value = 1e-5 } or '
                                 '{ dtype = "f32", range = [0.5, 2.0] }')
            self.keys(entry, ("dtype", "value", "range", "const"), key)
            if "dtype" not in entry:
                raise self.error("", f"{key}.dtype is missing")
            dtype = parse_dtype(entry["dtype"], f"{self.source}: {key}.dtype")
            value, span = self.value_or_range(entry, key, known)
            values.append(ValueSpec(name, dtype, value=value, range=span, const=self.flag(entry, "const", key)))
        return tuple(values)

    def value_or_range(self, table: Mapping[str, Any], key: str,
                       known: tuple[str, ...]) -> tuple[Expr | None, tuple[Expr, Expr] | None]:
        """A scalar's or a value's ``value`` (fixed) or ``range = [lo, hi]`` (drawn per case)."""
        if "value" not in table and "range" not in table:
            raise self.error("", f"{key}.value is missing")
        if "value" in table and "range" in table:
            raise self.error(f"{key}.range", "give value (fixed) or range = [lo, hi] (drawn per case), not both")
        if "value" in table:
            return self.expr(table["value"], f"{key}.value", known), None
        raw = table["range"]
        if not isinstance(raw, list) or len(raw) != 2:
            raise self.error(f"{key}.range", f"must be [lo, hi] (got {raw!r})")
        lo, hi = (self.expr(v, f"{key}.range[{j}]", known) for j, v in enumerate(raw))
        return None, (lo, hi)

    def kernels(self, raw: object, key: str, known: tuple[str, ...],
                params: tuple[ParamSpec, ...] | list[ParamSpec]) -> tuple[KernelStep, ...]:
        """``[[kernels]]``: the hot loop's steps, in order; each a launch of an entry on params by
        name, or ``zero = [buffers]``."""
        if not isinstance(raw, list) or not raw:
            raise self.error(key, "must be a non-empty array of tables, written [[kernels]]")
        names = {p.name: p for p in params}
        steps = []
        for i, entry in enumerate(raw):
            at = f"{key}[{i}]"
            table = self.table(entry, at)
            self.keys(table, _STEP_KEYS, at)
            if "zero" in table:
                if len(table) > 1:
                    raise self.error(f"{at}.zero", "a zero step takes no other key (it launches no kernel)")
                zero = table["zero"]
                if not isinstance(zero, list) or not zero:
                    raise self.error(f"{at}.zero", 'must be a non-empty array of buffer names, e.g. ["dQ"]')
                for j, name in enumerate(zero):
                    if not (isinstance(name, str) and name in names and names[name].is_output):
                        raise self.error(f"{at}.zero[{j}]", f"must name an out or inout buffer (got {name!r})")
                steps.append(KernelStep(zero=tuple(zero)))
                continue
            step_entry = self.entry_name(table.get("entry"), f"{at}.entry")
            args = table.get("args")
            if not isinstance(args, list):
                raise self.error(f"{at}.args", "must be an array of param names, in the order of the entry's PTX params")
            for j, name in enumerate(args):
                if not (isinstance(name, str) and name in names):
                    close = difflib.get_close_matches(str(name), names, n=1)
                    hint = f"did you mean {close[0]!r}? " if close else ""
                    raise self.error(f"{at}.args[{j}]", f"not a param ({hint}params: {', '.join(names)}; got {name!r})")
            launch = self.launch({k: v for k, v in table.items() if k not in ("entry", "args")}, known, at)
            steps.append(KernelStep(step_entry, launch, tuple(args)))
        if not any(s.entry for s in steps):
            raise self.error(key, "launches no kernel (every step is a zero step)")
        return tuple(steps)

    def sizes(self, raw: object) -> tuple[dict[str, int | str], tuple[str, ...]]:
        table = self.table(raw, "sizes")
        for name, value in table.items():
            if not name.isidentifier() or keyword.iskeyword(name):
                raise self.error(f"sizes.{name}", "a size symbol must be a name like M or lda")
            if isinstance(value, bool) or not isinstance(value, int | str):
                raise self.error(
                    f"sizes.{name}", f"must be an integer or an expression string (got {value!r})"
                )
        resolve_sizes(table, {}, where=f"{self.source}: sizes")
        return dict(table), tuple(table)

    def sweep(self, raw: object, known: tuple[str, ...], table_name: str = "sweep") -> tuple[dict[str, int | str], ...]:
        """``[[sweep]]`` (or ``[[emulate]]``, written alike): size overrides, one table per size set."""
        if not isinstance(raw, list):
            raise self.error(table_name, f"must be an array of tables, written [[{table_name}]]")
        entries = []
        for i, entry in enumerate(raw):
            key = f"{table_name}[{i}]"
            table = self.table(entry, key)
            for name, value in table.items():
                if name not in known:
                    close = difflib.get_close_matches(name, known, n=1)
                    hint = f"did you mean {close[0]!r}? " if close else ""
                    raise self.error(
                        f"{key}.{name}",
                        f"not a size symbol of [sizes] ({hint}size symbols: {', '.join(sorted(known))})",
                    )
                if isinstance(value, bool) or not isinstance(value, int | str):
                    raise self.error(
                        f"{key}.{name}", f"must be an integer or an expression string (got {value!r})"
                    )
            entries.append(dict(table))
        return tuple(entries)

    def params(self, raw: object, known: tuple[str, ...], valued: tuple[str, ...] | None = None,
               reference: ReferenceSpec | None = None) -> tuple[ParamSpec, ...]:
        if raw is None:
            raise self.error("", "no [[params]]: list every kernel parameter, in order")
        if not isinstance(raw, list) or not raw:
            raise self.error("params", "must be a non-empty array of tables, written [[params]]")
        params: list[ParamSpec] = []
        seen: dict[str, int] = {}
        for i, entry in enumerate(raw):
            param = self.param(self.table(entry, f"params[{i}]"), f"params[{i}]", known, valued, reference)
            if param.name in seen:
                raise self.error(
                    f"params[{i}].name",
                    f"duplicate param name {param.name!r} (also params[{seen[param.name]}])",
                )
            seen[param.name] = i
            params.append(param)
        self.tensormap_targets(params, params)
        return tuple(params)

    def tensormap_targets(self, params: list[ParamSpec], new: list[ParamSpec]) -> None:
        """Each new tensormap names a buffer among ``params`` and has one extent per buffer axis."""
        buffers = {p.name: p for p in params if p.kind == "buffer"}
        for p in new:
            if p.tensormap is None:
                continue
            key = f"params[{params.index(p)}]"
            target = buffers.get(p.tensormap.tensor)
            if target is None:
                raise self.error(f"{key}.tensor", f"must name a buffer param (got {p.tensormap.tensor!r}; "
                                 f"buffers: {', '.join(buffers) or 'none'})")
            if target.align < 16:
                raise self.error(f"{key}.tensor", f"buffer {target.name!r} has align = {target.align}, but a tensor "
                                 "map's global address must be 16-byte aligned (align = 16 or more)")
            if len(p.tensormap.dims) != len(target.shape):
                raise self.error(f"{key}.dims", f"has {len(p.tensormap.dims)} extents but buffer "
                                 f"{target.name!r} has {len(target.shape)} axes")

    def param(self, table: dict[str, Any], key: str, known: tuple[str, ...], valued: tuple[str, ...] | None = None,
              reference: ReferenceSpec | None = None) -> ParamSpec:
        """One ``[[params]]`` entry. Shapes, ``ld``, scratch bytes and tensor maps read the sizes
        (``known``); fills and scalar values also the ``[values]`` (``valued``)."""
        valued = known if valued is None else valued
        name = self.string(table, "name", key)
        if "kind" not in table:
            raise self.error("", f"{key}.kind is missing (buffer, scalar, scratch or tensormap)")
        kind = table["kind"]
        if kind not in KINDS:
            raise self.error(f"{key}.kind", f"must be buffer, scalar, scratch or tensormap (got {kind!r})")
        self.keys(table, _PARAM_KEYS[kind], key, f" for a {kind} param")
        if kind == "tensormap":
            return ParamSpec(name, kind, tensormap=self.tensormap(table, key, known))
        if kind == "scratch":
            return ParamSpec(name, kind, bytes=self.expr(table.get("bytes", 0), f"{key}.bytes", known))
        if "dtype" not in table:
            raise self.error("", f"{key}.dtype is missing")
        dtype = parse_dtype(table["dtype"], f"{self.source}: {key}.dtype")
        if kind == "scalar":
            value, span = self.value_or_range(table, key, valued)
            return ParamSpec(name, kind, dtype, value=value, range=span, const=self.flag(table, "const", key))

        if "shape" not in table:
            raise self.error("", f"{key}.shape is missing")
        raw_shape = table["shape"]
        if not isinstance(raw_shape, list) or not raw_shape:
            raise self.error(f"{key}.shape", 'must be a non-empty array of sizes, e.g. ["M", "K"]')
        shape = tuple(self.expr(e, f"{key}.shape[{j}]", known) for j, e in enumerate(raw_shape))
        role = table.get("role", "in")
        if role not in ROLES:
            raise self.error(f"{key}.role", f"must be in, out or inout (got {role!r})")
        ld = None
        if "ld" in table:
            if len(shape) < 2:
                raise self.error(f"{key}.ld", "pads rows: it needs a shape of 2 or more axes")
            ld = self.expr(table["ld"], f"{key}.ld", known)
        deterministic = table.get("deterministic", True)
        if not isinstance(deterministic, bool):
            raise self.error(f"{key}.deterministic", f"must be true or false (got {deterministic!r})")
        if not deterministic and (role == "in" or not dtype.is_float):
            raise self.error(f"{key}.deterministic", "false is for float outputs accumulated in no fixed order "
                             "(atomics); integer sums and inputs are the same in any order")
        derive = None
        fill = None
        if "derive" in table:
            if role != "in":
                raise self.error(f"{key}.derive", "derives an input: the param's role must be in")
            if "fill" in table:
                raise self.error(f"{key}.fill", "a derived input is computed by its derive function, not filled")
            derive = self.derive(table["derive"], f"{key}.derive", reference)
        elif role == "out":
            if "fill" in table:
                raise self.error(
                    f"{key}.fill",
                    'out buffers are poisoned, not filled; use role = "inout" to pass initial values',
                )
        else:
            fill = self.fill(table.get("fill"), dtype, f"{key}.fill", valued)
        domain = self.domain(table, dtype, key)
        span = fill_span(fill) if fill is not None else None
        if span is not None and not domain.contains(*span):
            raise self.error(f"{key}.fill", f"{fill} leaves the input's domain ({table.get('domain', 'real')})")
        return ParamSpec(name, kind, dtype, shape=shape, role=role, fill=fill, ld=ld, derive=derive,
                         deterministic=deterministic, domain=domain, align=self.align(table, dtype, key))

    def align(self, table: Mapping[str, Any], dtype: DType, key: str) -> int:
        """A buffer's ``align``: a power of two of bytes, at least one element."""
        value = table.get("align", max(DEFAULT_ALIGN, dtype.itemsize))
        if isinstance(value, bool) or not isinstance(value, int) or value < dtype.itemsize or value & (value - 1) \
                or value > 4096:
            raise self.error(f"{key}.align", f"must be a power of two of bytes from the element's {dtype.itemsize} "
                             f"to 4096 (got {value!r})")
        return value

    def flag(self, table: Mapping[str, Any], name: str, key: str) -> bool:
        value = table.get(name, False)
        if not isinstance(value, bool):
            raise self.error(f"{key}.{name}", f"must be true or false (got {value!r})")
        return value

    def domain(self, table: Mapping[str, Any], dtype: DType, key: str) -> Domain:
        """A float input's ``domain`` (real, positive, nonnegative or [lo, hi]) and ``finite``."""
        raw, finite = table.get("domain", "real"), self.flag(table, "finite", key)
        if not dtype.is_float and ("domain" in table or "finite" in table):
            raise self.error(f"{key}.domain", "is for float buffers: an integer input's values are its fill's")
        if isinstance(raw, list):
            if (len(raw) != 2 or any(isinstance(x, bool) or not isinstance(x, int | float) for x in raw)
                    or not -dtype.max_finite <= raw[0] < raw[1] <= dtype.max_finite):
                raise self.error(f"{key}.domain", f"must be [lo, hi] with lo < hi inside {dtype} (got {raw!r})")
            return Domain(float(raw[0]), float(raw[1]), finite=True)
        if raw not in DOMAINS:
            raise self.error(f"{key}.domain", f"must be real, positive, nonnegative or [lo, hi] (got {raw!r})")
        lo = -math.inf if raw == "real" else 0.0
        return Domain(lo, math.inf, finite=finite, positive=raw == "positive")

    def derive(self, raw: object, key: str, reference: ReferenceSpec | None) -> CallableRef:
        """``"FILE.py:FUNCTION"``, or a function of the ``[reference] python`` file by its name."""
        if isinstance(raw, str) and raw.isidentifier():
            if reference is None or reference.callable is None:
                raise self.error(key, f"{raw!r} names a function of [reference] python, which this spec has not; "
                                 'write "FILE.py:FUNCTION"')
            return CallableRef(reference.callable.path, raw)
        return self.callable_ref(raw, key)

    def tensormap(self, table: dict[str, Any], key: str, known: tuple[str, ...]) -> TensorMapSpec:
        tensor = self.string(table, "tensor", key)
        raw_dims, raw_box = table.get("dims"), table.get("box")
        if not isinstance(raw_dims, list) or not 1 <= len(raw_dims) <= 5:
            raise self.error(f"{key}.dims", 'must be an array of 1 to 5 extents, outer to inner, e.g. ["M", "K"]')
        if not isinstance(raw_box, list) or len(raw_box) != len(raw_dims):
            raise self.error(f"{key}.box", f"must be an array of {len(raw_dims)} integers, one per dims entry")
        for j, b in enumerate(raw_box):
            if not isinstance(b, int) or isinstance(b, bool) or not 1 <= b <= MAX_BOX:
                raise self.error(f"{key}.box[{j}]", f"must be an integer from 1 to {MAX_BOX} (got {b!r})")
        swizzle = table.get("swizzle", "none")
        if swizzle not in SWIZZLES:
            raise self.error(f"{key}.swizzle", f"must be one of {', '.join(SWIZZLES)} (got {swizzle!r})")
        dims = tuple(self.expr(e, f"{key}.dims[{j}]", known) for j, e in enumerate(raw_dims))
        return TensorMapSpec(tensor, dims, tuple(raw_box), swizzle)

    def fill(self, raw: object, dtype: DType, key: str, known: tuple[str, ...]) -> FillSpec:
        if raw is None:
            return default_fill(dtype)
        constant = self.error(
            key,
            f"constant fills like {raw!r} are not allowed: inputs must be random, because zeros hide "
            f"indexing bugs; use {_FILL_USAGE}",
        )
        if isinstance(raw, int | float):
            raise constant
        if not isinstance(raw, str):
            raise self.error(key, f'must be a string such as "uniform(-1, 1)" (got {_toml_type(raw)})')
        text = raw.strip()
        try:
            node = ast.parse(text, mode="eval").body
        except (SyntaxError, ValueError):
            node = None
        head = node.func if isinstance(node, ast.Call) else node
        if isinstance(node, ast.Constant | ast.UnaryOp) or (
            isinstance(head, ast.Name) and head.id in _CONSTANT_FILLS
        ):
            raise constant
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in FILLS
            and len(node.args) == 2
            and not node.keywords
        ):
            raise self.error(key, f"must be {_FILL_USAGE} (got {raw!r})")
        kind = node.func.id
        if kind != "randint" and not dtype.is_float:
            raise self.error(key, f"{kind} fills float buffers; use randint(lo, hi) for an {dtype} buffer")
        a, b = (self.fill_arg(ast.get_source_segment(text, arg) or "", key, known) for arg in node.args)
        return FillSpec(kind, a, b)

    def fill_arg(self, text: str, key: str, known: tuple[str, ...]) -> Expr:
        """A fill bound: a number when it reads no size symbols, else the expression text."""
        where = f"{self.source}: {key}"
        check_symbols(text, known, where=where)
        return text if free_symbols(text) else evaluate(text, {}, where=where)

    def launch(self, raw: object, known: tuple[str, ...], key: str = "launch") -> LaunchSpec:
        table = self.table(raw, key)
        self.keys(table, ("grid", "block", "shared", "cluster"), key)
        for name in ("grid", "block"):
            if name not in table:
                raise self.error("", f"{key}.{name} is missing")
        cluster = self.dims(table["cluster"], f"{key}.cluster", known) if "cluster" in table else None
        return LaunchSpec(
            grid=self.dims(table["grid"], f"{key}.grid", known),
            block=self.dims(table["block"], f"{key}.block", known),
            shared=self.expr(table.get("shared", 0), f"{key}.shared", known),
            cluster=cluster,
        )

    def dims(self, raw: object, key: str, known: tuple[str, ...]) -> tuple[Expr, Expr, Expr]:
        """1 to 3 entries (a single value is one entry), padded with 1."""
        items = raw if isinstance(raw, list) else [raw]
        if not 1 <= len(items) <= 3:
            raise self.error(key, f"needs 1 to 3 entries (got {len(items)})")
        x, y, z = (*(self.expr(v, f"{key}[{k}]", known) for k, v in enumerate(items)), 1, 1)[:3]
        return x, y, z

    def callable_ref(self, raw: object, key: str) -> CallableRef:
        usage = f'must be "FILE.py:FUNCTION" (got {raw!r})'
        if not isinstance(raw, str) or ":" not in raw:
            raise self.error(key, usage)
        file, _, function = raw.rpartition(":")
        if not file.endswith(".py") or not function.isidentifier():
            raise self.error(key, usage)
        path = self.base_dir / file
        if not path.is_file():
            raise self.error(key, f"{file!r} not found in {self.base_dir}")
        return CallableRef(path, function)

    def reference(self, raw: object) -> ReferenceSpec:
        table = self.table(raw, "reference")
        kinds = ("python", "source", "golden")
        self.keys(table, kinds, "reference")
        if len(table) != 1:
            raise self.error("reference", "needs exactly one of python, source or golden")
        ((kind, target),) = table.items()
        key = f"reference.{kind}"
        if not isinstance(target, str) or not target.strip():
            raise self.error(key, f"must be a non-empty string (got {target!r})")
        if kind == "python":
            return ReferenceSpec(kind, target, callable=self.callable_ref(target, key))
        path = self.base_dir / target
        # goldens are written by `porter record`, so only the source kernel must exist already
        if kind == "source" and not path.is_file():
            raise self.error(key, f"{target!r} not found in {self.base_dir}")
        return ReferenceSpec(kind, target, path=path)

    def tolerances(
        self, raw: object, outputs: Mapping[str, ParamSpec], known: tuple[str, ...]
    ) -> dict[str, Tolerance]:
        table = self.table(raw, "tolerance")
        result = {}
        for name, param in outputs.items():
            assert param.dtype is not None
            result[name] = Tolerance(*param.dtype.tolerance)
        for name, entry in table.items():
            key = f"tolerance.{name}"
            if name not in outputs:
                raise self.error(key, f"{name!r} is not an output (outputs: {', '.join(outputs)})")
            if not isinstance(entry, dict):
                raise self.error(key, "must be a table such as { atol = 1e-3, rtol = 1e-3 }")
            self.keys(entry, ("atol", "rtol", "reduction"), key)
            atol, rtol = (
                self.non_negative(entry.get(k, d), f"{key}.{k}")
                for k, d in zip(("atol", "rtol"), (result[name].atol, result[name].rtol), strict=True)
            )
            reduction = entry.get("reduction")
            if reduction is not None:
                reduction = str(self.expr(reduction, f"{key}.reduction", known))
            result[name] = Tolerance(atol, rtol, reduction)
        return result

    def non_negative(self, value: object, key: str) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < math.inf:
            raise self.error(key, f"must be a number >= 0 (got {value!r})")
        return float(value)

    def cost(self, raw: object, known: tuple[str, ...]) -> CostSpec:
        table = self.table(raw, "cost")
        self.keys(table, ("flops", "bytes", "approximate", "native_share"), "cost")
        flops, nbytes = (
            self.expr(table[k], f"cost.{k}", known) if k in table else None for k in ("flops", "bytes")
        )
        approximate = table.get("approximate", False)
        if not isinstance(approximate, bool):
            raise self.error("cost.approximate", f"must be true or false (got {approximate!r})")
        share = self.non_negative(table.get("native_share", DEFAULT_NATIVE_SHARE), "cost.native_share")
        if share > 1:
            raise self.error("cost.native_share", f"must be a share from 0 to 1 (got {share!r})")
        return CostSpec(flops, nbytes, approximate, share)

    def inputs(self, raw: object, params: tuple[ParamSpec, ...], known: tuple[str, ...],
               valued: tuple[str, ...] | None = None) -> InputsSpec:
        table = self.table(raw, "inputs")
        self.keys(table, ("wide", "cases", "unannounced"), "inputs")
        unannounced = table.get("unannounced", True)
        if not isinstance(unannounced, bool):
            raise self.error("inputs.unannounced", f"must be true or false (got {unannounced!r})")
        wide = table.get("wide", DEFAULT_WIDE)
        if isinstance(wide, bool) or not isinstance(wide, int | float) or not 1 <= wide <= 1e6:
            raise self.error("inputs.wide", f"must be a number >= 1 (1 turns porter's wide case off; got {wide!r})")
        raw_cases = table.get("cases", [])
        if not isinstance(raw_cases, list):
            raise self.error("inputs.cases", "must be an array of tables, written [[inputs.cases]]")
        inputs = {p.name: p for p in params if p.is_input and p.derive is None}
        cases: list[ValueCase] = []
        for i, entry in enumerate(raw_cases):
            key = f"inputs.cases[{i}]"
            case = self.table(entry, key)
            self.keys(case, ("name", "fill", "at", "atol_scale"), key)
            name = self.string(case, "name", key)
            if any(c.name == name for c in cases):
                raise self.error(f"{key}.name", f"duplicate value case {name!r}")
            fills_raw = self.table(case.get("fill", {}), f"{key}.fill")
            fills = {}
            for pname, text in fills_raw.items():
                if pname not in inputs:
                    raise self.error(f"{key}.fill.{pname}", f"not an input buffer (inputs: {', '.join(inputs)})")
                dtype = inputs[pname].dtype
                assert dtype is not None
                fills[pname] = self.fill(text, dtype, f"{key}.fill.{pname}", valued or known)
            if not fills:
                raise self.error(f"{key}.fill", "give at least one input's fill, e.g. { x = \"uniform(-100, 100)\" }")
            at = self.table(case.get("at", {}), f"{key}.at")
            for sym, value in at.items():
                if sym not in known:
                    raise self.error(f"{key}.at.{sym}", f"not a size symbol of [sizes] ({', '.join(known)})")
                if isinstance(value, bool) or not isinstance(value, int | str):
                    raise self.error(f"{key}.at.{sym}", f"must be an integer or an expression string (got {value!r})")
            scale = self.non_negative(case.get("atol_scale", 1.0), f"{key}.atol_scale")
            cases.append(ValueCase(name, fills, dict(at), max(scale, 1.0)))
        return InputsSpec(float(wide), tuple(cases), unannounced)

    def baseline(self, raw: object) -> CallableRef:
        table = self.table(raw, "baseline")
        self.keys(table, ("python",), "baseline")
        if "python" not in table:
            raise self.error("", "baseline.python is missing")
        return self.callable_ref(table["python"], "baseline.python")

    def profile(self, raw: object) -> dict[str, Any]:
        """Free-form facts; the ones porter reads are type-checked."""
        table = self.table(raw, "profile")
        if "gpu" in table and not isinstance(table["gpu"], str):
            raise self.error("profile.gpu", f"must be a string (got {_toml_type(table['gpu'])})")
        for name, least, most in (("time_us", 0.0, math.inf), ("share", 0.0, 1.0)):
            value = table.get(name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int | float) or not least <= value <= most
            ):
                bound = "a number >= 0" if most == math.inf else f"a number from {least:g} to {most:g}"
                raise self.error(f"profile.{name}", f"must be {bound} (got {value!r})")
        return dict(table)
