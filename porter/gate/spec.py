"""The hot-loop spec (``porter.toml``): how a kernel is called and what it computes.

:func:`load_spec` reads and checks a spec completely before anything runs: every key, every
expression's symbols, and every size-dependent value (shapes, launch, scalars, fills, tolerances,
costs) evaluated for the default sizes and for each sweep entry. A spec that loads is one the
verifier can run; each error names the file and the key path (``porter.toml: params[2].shape[1]:
unknown size symbol 'ldb'``), and errors found under a sweep entry name it (``sweep[1]: ...``).
The format is described in docs/spec.md.
"""

from __future__ import annotations

import ast
import difflib
import keyword
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from porter._toml import tomllib
from porter.errors import InputError
from porter.gate import todo
from porter.gate.dtypes import DType, parse_dtype
from porter.gate.expr import Expr, Number, check_symbols, evaluate, free_symbols, resolve_sizes

if TYPE_CHECKING:
    from porter.ptx.model import Entry, PtxModule

KINDS = ("buffer", "scalar", "scratch", "tensormap")
SWIZZLES = {"none": 0, "32B": 32, "64B": 64, "128B": 128}  # swizzle name -> span in bytes
ROLES = ("in", "out", "inout")
FILLS = ("uniform", "normal", "randint")

POINTER_BYTES = 8  # buffers and scratch are passed as .u64 pointers
TENSORMAP_BYTES = 128  # a CUtensorMap, passed by value as .param .align 64 .b8 name[128]
MAX_BOX = 256  # TMA box extent per dimension
REDUCTION_BASE = 128  # tolerances grow with sqrt(reduction / REDUCTION_BASE), never shrink
NORMAL_SPREAD = 6  # normal(mean, std) must keep mean +- 6 std inside the dtype's finite range
DEFAULT_WIDE = 4.0  # porter's own wider-range value case scales every float fill by this much
WIDE = "wide"  # the name of porter's own value case: wider (or shifted) fills, perturbed float constants
PERTURB = 1.5  # porter's value case multiplies each fixed float scalar and value by a factor in [1/1.5, 1.5]
DEFAULT_NATIVE_SHARE = 0.9  # share of cost.flops the target's own instructions must execute
# A buffer's start is aligned to this many bytes unless its spec says otherwise (``align``): what
# every CUDA allocator gives and what a 16-byte access (ld.global.v4.b32, cp.async 16) needs. porter
# aligns no further than the contract says (see porter.gate.layout).
DEFAULT_ALIGN = 16
DEFAULT_MAX_TILE = 256  # the largest tile a kernel is assumed to use along any size symbol (kernel.max_tile)
DOMAINS = ("real", "positive", "nonnegative")

# CUDA launch limits common to every generation porter targets (sm_80 and later)
MAX_BLOCK = (1024, 1024, 64)
MAX_THREADS = 1024
MAX_GRID = (2**31 - 1, 65535, 65535)
MAX_SHARED = 227 * 1024  # largest opt-in dynamic shared memory per block (sm_90, sm_100)
MAX_CLUSTER = 16  # non-portable cluster size limit

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


@dataclass(frozen=True)
class FillSpec:
    """How an input buffer is filled: ``uniform(a, b)``, ``normal(a=mean, b=std)`` or ``randint(a, b)``.

    ``randint`` draws integers in ``[a, b)``, like numpy. ``a`` and ``b`` may be expressions over
    the size symbols (``randint(0, N)`` for an index buffer).
    """

    kind: str
    a: Expr
    b: Expr

    def __str__(self) -> str:
        return f"{self.kind}({self.a}, {self.b})"


def default_fill(dtype: DType) -> FillSpec:
    """uniform(-1, 1) for floats, randint(-8, 8) for signed and randint(0, 16) for unsigned integers."""
    if dtype.is_float:
        return FillSpec("uniform", -1, 1)
    return FillSpec("randint", -8, 8) if dtype.kind == "int" else FillSpec("randint", 0, 16)


def fill_span(fill: FillSpec) -> tuple[float, float] | None:
    """The values a float fill with number bounds draws ([mean - 6 std, mean + 6 std] for a normal
    one); None when a bound reads sizes or values (the draw clips to the domain), or for randint."""
    if fill.kind == "randint" or not all(isinstance(x, int | float) for x in (fill.a, fill.b)):
        return None
    a, b = float(fill.a), float(fill.b)
    return (a, b) if fill.kind == "uniform" else (a - NORMAL_SPREAD * b, a + NORMAL_SPREAD * b)


@dataclass(frozen=True)
class Domain:
    """The values an input buffer may hold (``domain`` and ``finite`` on a float buffer): porter
    draws from all of them, fill and beyond (see :mod:`porter.gate.inputs`).

    ``real`` (the default) is every value of the dtype, ``positive`` those above 0,
    ``nonnegative`` those from +0 up, ``[lo, hi]`` a closed interval (finite). ``finite``
    leaves out the infinities and NaN.
    """

    lo: float = -math.inf
    hi: float = math.inf
    finite: bool = False
    positive: bool = False  # lo = 0 is excluded: positive, not nonnegative

    def contains(self, a: float, b: float) -> bool:
        """Whether [a, b] lies inside the domain (a fill from 0 draws 0 itself with probability 0)."""
        return self.lo <= a and b <= self.hi


@dataclass(frozen=True)
class TensorMapSpec:
    """A TMA descriptor (CUtensorMap) over a buffer param, built by porter before each launch.

    ``dims`` are the extents the map covers, outer to inner like the buffer's shape (they may be
    smaller than the shape: padding columns stay outside); the row strides come from the buffer's
    shape. ``box`` is the tile one copy moves, outer to inner. Reads outside ``dims`` fill zeros.
    """

    tensor: str
    dims: tuple[Expr, ...]
    box: tuple[int, ...]
    swizzle: str = "none"


class TensorMapGeometry(NamedTuple):
    """A tensor map's values at one size set, outer to inner, as cuTensorMapEncodeTiled takes them
    (reversed): extents and box in elements, strides in bytes (one per outer dimension)."""

    dims: tuple[int, ...]
    strides: tuple[int, ...]
    box: tuple[int, ...]
    swizzle: str


@dataclass(frozen=True)
class ParamSpec:
    """One kernel parameter, in the entry's order.

    A buffer has ``dtype``, ``shape`` (row-major, elements), ``role`` and, unless it is an ``out``
    buffer (those are poisoned before each launch) or a derived input, ``fill``. With ``ld`` the
    shape is a view of padded rows: ``ld`` elements apart in memory (the elements past the shape's
    last extent are padding, which must come back unchanged). A derived input (``derive``) is
    computed from the other inputs by a reference-side function. An output that is
    ``deterministic = false`` (accumulated with atomics) is held to the reference within tolerance
    instead of bit for bit from launch to launch. A scalar has ``dtype`` and either a
    ``value`` or a ``range`` ``(lo, hi)`` from which each case draws its own value (so that a kernel
    cannot hard-code it); a fixed float scalar is perturbed in porter's own value case unless it
    is ``const`` (a compile-time constant). A float input's ``domain`` is what porter draws from.
    Scratch has ``bytes`` (0: a null pointer). A tensormap has ``tensormap``.
    """

    name: str
    kind: str  # "buffer" | "scalar" | "scratch" | "tensormap"
    dtype: DType | None = None
    shape: tuple[Expr, ...] = ()
    role: str = "in"  # "in" | "out" | "inout"; scalars and scratch are "in"
    fill: FillSpec | None = None
    value: Expr | None = None
    bytes: Expr | None = None
    tensormap: TensorMapSpec | None = None
    range: tuple[Expr, Expr] | None = None
    ld: Expr | None = None  # row pitch in elements of a padded buffer (>= the shape's last extent)
    derive: CallableRef | None = None  # a derived input: fn(args, sizes) -> {name: array}
    deterministic: bool = True  # False: an output accumulated in no fixed order (atomics)
    domain: Domain = Domain()  # the values a float input may hold (drawn across all of them)
    const: bool = False  # a fixed scalar compiled into the kernel: never perturbed
    align: int = DEFAULT_ALIGN  # bytes a buffer's start is aligned to: the contract's, and no more

    def alignment(self) -> int:
        """The bytes this buffer's start is aligned to: the spec's ``align``, at least one element."""
        return max(self.align, self.dtype.itemsize if self.dtype is not None else 1)

    @property
    def is_output(self) -> bool:
        return self.kind == "buffer" and self.role in ("out", "inout")

    @property
    def is_input(self) -> bool:
        return self.kind == "buffer" and self.role in ("in", "inout")


@dataclass(frozen=True)
class LaunchSpec:
    """Launch configuration as expressions; each of grid, block and cluster has exactly 3 entries."""

    grid: tuple[Expr, Expr, Expr]
    block: tuple[Expr, Expr, Expr]
    shared: Expr = 0
    cluster: tuple[Expr, Expr, Expr] | None = None


@dataclass(frozen=True)
class KernelStep:
    """One step of the hot loop: a kernel launch (``entry``, ``launch``, and ``args``: the param
    names in the order of the entry's PTX params), or porter zeroing buffers (``zero``), as a
    program does before kernels that accumulate into them."""

    entry: str = ""
    launch: LaunchSpec | None = None
    args: tuple[str, ...] = ()
    zero: tuple[str, ...] = ()

    def describe(self) -> str:
        return self.entry if self.entry else f"zero {', '.join(self.zero)}"


@dataclass(frozen=True)
class ValueSpec:
    """A typed value that is not a size (``[values]``): a softmax scale, an epsilon, a fill's
    amplitude. Fixed (``value``, which may read the sizes) or drawn per case from ``range``; fills
    and scalar params may read it, and the reference gets it in its ``args``, in its dtype. It
    never appears among the sizes."""

    name: str
    dtype: DType
    value: Expr | None = None
    range: tuple[Expr, Expr] | None = None
    const: bool = False  # a compile-time constant: never perturbed


class LaunchDims(NamedTuple):
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared: int
    cluster: tuple[int, int, int] | None


@dataclass(frozen=True)
class CallableRef:
    """``FILE.py:FUNCTION``, the file resolved against the spec's folder. Imported only when called."""

    path: Path
    function: str

    def __str__(self) -> str:
        return f"{self.path.name}:{self.function}"


@dataclass(frozen=True)
class ReferenceSpec:
    """Where expected outputs come from: a Python callable, the source kernel, or recorded goldens."""

    kind: str  # "python" | "source" | "golden"
    target: str  # the text as written in the spec
    callable: CallableRef | None = None  # set for kind "python"
    path: Path | None = None  # resolved against the spec's folder, for "source" and "golden"


@dataclass(frozen=True)
class Tolerance:
    """``|out - ref| <= atol + rtol * |ref|``; with ``reduction``, atol grows by sqrt(reduction / 128)
    (rtol, the output's own rounding, does not)."""

    atol: float
    rtol: float
    reduction: str | None = None


@dataclass(frozen=True)
class CostSpec:
    """FLOPs and DRAM bytes per launch, for rooflines and for the native-work share.

    A result above the roofline fails the timing gate, because a cost model is normally an exact
    count: ``approximate = true`` says it is not, and turns that into a warning. ``native_share``
    is the least share of ``flops`` that the target's own tensor-core instructions must execute
    when native instructions are required.
    """

    flops: Expr | None = None
    bytes: Expr | None = None
    approximate: bool = False
    native_share: float = DEFAULT_NATIVE_SHARE


@dataclass(frozen=True)
class ValueCase:
    """A case of input values beyond the default fills: some inputs filled otherwise, at one size set.

    ``at`` overrides ``[sizes]`` like a sweep entry (empty: the sweep's middle size set); the
    outputs' atol is multiplied by ``atol_scale`` (larger inputs give larger absolute errors).
    """

    name: str
    fills: dict[str, FillSpec]
    at: dict[str, int | str]
    atol_scale: float = 1.0


@dataclass(frozen=True)
class InputsSpec:
    """``[inputs]``: porter's wider-range case (``wide``: float fills scaled by it; 1 turns it off),
    the spec's own value cases, and whether a check adds a size set the spec does not list."""

    wide: float = DEFAULT_WIDE
    cases: tuple[ValueCase, ...] = ()
    unannounced: bool = True  # draw one size set per check that the spec does not list


@dataclass(frozen=True)
class Spec:
    """A checked spec. Methods that evaluate at given sizes take ``context`` (e.g. ``"sweep[1]"``),
    which their error messages carry after the file name."""

    entry: str
    description: str
    sizes: dict[str, int | str]  # the default size set, as written
    sweep: tuple[dict[str, int | str], ...]  # overrides of the defaults, one per size set
    params: tuple[ParamSpec, ...]
    launch: LaunchSpec
    reference: ReferenceSpec | None
    tolerances: dict[str, Tolerance]  # every output, dtype defaults filled in
    cost: CostSpec | None
    baseline: CallableRef | None
    profile: dict[str, Any]
    base_dir: Path
    source: str  # the spec's file name, for messages
    inputs_spec: InputsSpec = InputsSpec()
    require: tuple[str, ...] = ()  # the size contract: expressions every size set must satisfy
    values: tuple[ValueSpec, ...] = ()  # typed values that are not sizes
    kernels: tuple[KernelStep, ...] = ()  # a hot loop of several kernels (empty: entry + launch)
    max_tile: int = DEFAULT_MAX_TILE  # the largest tile along any size symbol: drawn sizes cover its residues
    max_sizes: dict[str, int] = field(default_factory=dict)  # the largest value of a size symbol a check may draw
    emulate: tuple[dict[str, int | str], ...] = ()  # [[emulate]]: overrides, one per size set run in emulation

    @property
    def path(self) -> Path:
        """The spec file (the worker and the profiling tools load it from here)."""
        return self.base_dir / self.source

    def named_files(self) -> tuple[Path, ...]:
        """The files (and folders) the spec names: its reference (a Python module, a source kernel or
        a golden folder), the derive functions of its inputs and its baseline."""
        ref = self.reference
        named = [ref.callable.path if ref is not None and ref.callable is not None else ref.path if ref else None,
                 *(p.derive.path for p in self.params if p.derive is not None),
                 self.baseline.path if self.baseline is not None else None]
        return tuple(dict.fromkeys(path for path in named if path is not None))

    # --- size sets -------------------------------------------------------------------------

    def default_sizes(self) -> dict[str, int]:
        return resolve_sizes(self.sizes, {}, where=f"{self.source}: sizes")

    def timing_sizes(self, overrides: Mapping[str, int]) -> dict[str, int]:
        """``[sizes]`` with some symbols replaced (``--time-at M=8192,N=8192``), derived ones recomputed."""
        where = "--time-at " + ",".join(f"{k}={v}" for k, v in overrides.items())
        unknown = sorted(set(overrides) - set(self.sizes))
        if unknown:
            raise InputError(f"{where}: {unknown[0]!r} is not a size symbol of {self.source} "
                             f"(symbols: {', '.join(self.sizes)})")
        sizes = resolve_sizes(self.sizes, overrides, where=where)
        self.check_sizes(sizes, context=where)
        return sizes

    def check_require(self, sizes: Mapping[str, int], *, context: str = "") -> None:
        """InputError naming the first rule of ``kernel.require`` that ``sizes`` break."""
        for i, rule in enumerate(self.require):
            where = f"{self._prefix(context)}kernel.require[{i}]"
            if not evaluate(rule, sizes, where=where):
                shown = ", ".join(f"{k}={sizes[k]}" for k in sorted(free_symbols(rule)))
                raise InputError(f"{where}: the size contract {rule!r} does not hold ({shown})")

    def size_sets(self) -> list[dict[str, int]]:
        """The equivalence sweep's size sets, resolved; just the defaults when there is no sweep."""
        return [sizes for _, sizes in self._labelled_size_sets()]

    def emulated_size_sets(self) -> list[dict[str, int]]:
        """The ``[[emulate]]`` size sets, resolved (empty: porter chooses from the sweep, see
        :func:`porter.gate.emulated.emulated_size_sets`)."""
        return [resolve_sizes(self.sizes, over, where=f"{self.source}: emulate[{i}]")
                for i, over in enumerate(self.emulate)]

    def _labelled_size_sets(self) -> list[tuple[str, dict[str, int]]]:
        if not self.sweep:
            return [("", self.default_sizes())]
        return [
            (f"sweep[{i}]", resolve_sizes(self.sizes, over, where=f"{self.source}: sweep[{i}]"))
            for i, over in enumerate(self.sweep)
        ]

    # --- params ------------------------------------------------------------------------------

    def param(self, name: str) -> ParamSpec:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)

    @property
    def outputs(self) -> tuple[ParamSpec, ...]:
        """Buffers the kernel writes (role out or inout), in param order."""
        return tuple(p for p in self.params if p.is_output)

    @property
    def inputs(self) -> tuple[ParamSpec, ...]:
        """Buffers porter fills before a launch (role in or inout), in param order."""
        return tuple(p for p in self.params if p.is_input)

    def sequence(self) -> tuple[KernelStep, ...]:
        """The hot loop's steps: ``[[kernels]]``, or the one kernel ``entry`` launched with
        ``[launch]`` on every param in order."""
        if self.kernels:
            return self.kernels
        return (KernelStep(self.entry, self.launch, tuple(p.name for p in self.params)),)

    @property
    def entries(self) -> tuple[str, ...]:
        """The PTX entries the hot loop launches, each once, in order of first launch."""
        return tuple(dict.fromkeys(s.entry for s in self.sequence() if s.entry))

    def value(self, name: str) -> ValueSpec:
        for v in self.values:
            if v.name == name:
                return v
        raise KeyError(name)

    def value_number(self, value: str | ValueSpec, sizes: Mapping[str, int], *,
                     context: str = "") -> Number | tuple[Number, Number]:
        """A ``[values]`` entry at these sizes: its number, or the ``(lo, hi)`` it is drawn from."""
        v = self.value(value) if isinstance(value, str) else value
        where = f"{self._prefix(context)}values.{v.name}"
        if v.range is None:
            assert v.value is not None
            return _typed_number(v.dtype, v.value, sizes, where, "value")
        lo, hi = (_typed_number(v.dtype, e, sizes, f"{where}.range[{j}]", "value") for j, e in enumerate(v.range))
        if not lo < hi:
            raise InputError(f"{where}.range: needs lo < hi (got {lo}, {hi})")
        return lo, hi

    def value_corners(self, sizes: Mapping[str, int], *, context: str = "") -> list[dict[str, Number]]:
        """The ``[values]`` with every ranged one at its low end, then at its high end: where a
        spec that loads is checked (one set when none is ranged)."""
        numbers = {v.name: self.value_number(v, sizes, context=context) for v in self.values}
        low = {k: (n[0] if isinstance(n, tuple) else n) for k, n in numbers.items()}
        high = {k: (n[1] if isinstance(n, tuple) else n) for k, n in numbers.items()}
        return [low] if low == high else [low, high]

    def param_signature(self) -> list[tuple[str, str, DType | None]]:
        """``(name, kind, dtype)`` per param, in order; scratch has no dtype."""
        return [(p.name, p.kind, p.dtype) for p in self.params]

    def _prefix(self, context: str) -> str:
        return f"{self.source}: {context}: " if context else f"{self.source}: "

    def _key(self, param: ParamSpec) -> str:
        return f"params[{self.params.index(param)}]"

    def _resolve(self, param: str | ParamSpec) -> ParamSpec:
        return self.param(param) if isinstance(param, str) else param

    def shape(
        self, param: str | ParamSpec, sizes: Mapping[str, int], *, context: str = ""
    ) -> tuple[int, ...]:
        """A buffer's shape in elements. ``context`` (e.g. ``"sweep[1]"``) is added to error messages."""
        p = self._resolve(param)
        where = self._prefix(context) + self._key(p)
        return tuple(_integer(e, sizes, f"{where}.shape[{j}]", least=1) for j, e in enumerate(p.shape))

    def memory_shape(self, param: str | ParamSpec, sizes: Mapping[str, int], *,
                     context: str = "") -> tuple[int, ...]:
        """A buffer's shape in memory: its ``shape``, with the last extent widened to ``ld`` when
        its rows are padded."""
        p = self._resolve(param)
        shape = self.shape(p, sizes, context=context)
        if p.ld is None:
            return shape
        where = f"{self._prefix(context)}{self._key(p)}.ld"
        ld = _integer(p.ld, sizes, where, least=1)
        if ld < shape[-1]:
            raise InputError(f"{where}: {ld} is less than the shape's last extent ({shape[-1]}): "
                             "a row cannot be narrower than the view of it")
        return (*shape[:-1], ld)

    def buffer_bytes(self, param: str | ParamSpec, sizes: Mapping[str, int], *, context: str = "") -> int:
        p = self._resolve(param)
        assert p.dtype is not None
        return math.prod(self.shape(p, sizes, context=context)) * p.dtype.itemsize

    def scalar_value(self, param: str | ParamSpec, sizes: Mapping[str, int], *, context: str = "") -> Number:
        """A fixed scalar's value: an int inside the integer dtype's range, or a finite float."""
        p = self._resolve(param)
        assert p.dtype is not None and p.value is not None, f"{p.name} is drawn from a range"
        return self._scalar_number(p, p.value, sizes, f"{self._prefix(context)}{self._key(p)}.value")

    def scalar_range(self, param: str | ParamSpec, sizes: Mapping[str, int], *,
                     context: str = "") -> tuple[Number, Number]:
        """A drawn scalar's ``(lo, hi)`` at these sizes: floats are drawn from [lo, hi), integers
        from lo to hi inclusive."""
        p = self._resolve(param)
        assert p.range is not None
        where = f"{self._prefix(context)}{self._key(p)}.range"
        lo, hi = (self._scalar_number(p, e, sizes, f"{where}[{j}]") for j, e in enumerate(p.range))
        if not lo < hi:
            raise InputError(f"{where}: needs lo < hi (got {lo}, {hi})")
        return lo, hi

    def _scalar_number(self, p: ParamSpec, expr: Expr, sizes: Mapping[str, int], where: str) -> Number:
        assert p.dtype is not None
        return _typed_number(p.dtype, expr, sizes, where)

    def scratch_bytes(self, param: str | ParamSpec, sizes: Mapping[str, int], *, context: str = "") -> int:
        p = self._resolve(param)
        assert p.bytes is not None
        return _integer(p.bytes, sizes, f"{self._prefix(context)}{self._key(p)}.bytes", least=0)

    def fill_bounds(
        self, param: str | ParamSpec, sizes: Mapping[str, int], *, context: str = "", values: str = ""
    ) -> tuple[Number, Number]:
        """The evaluated ``(a, b)`` of an input's fill (in value case ``values``), checked against
        the dtype's range."""
        p = self._resolve(param)
        return self._fill_bounds(p, self.fill_of(p, values), sizes, context=context)

    def _fill_bounds(self, p: ParamSpec, fill: FillSpec, sizes: Mapping[str, int], *,
                     context: str = "") -> tuple[Number, Number]:
        assert p.dtype is not None
        where = f"{self._prefix(context)}{self._key(p)}.fill"
        dtype = p.dtype
        a, b = (evaluate(e, sizes, where=where) for e in (fill.a, fill.b))
        lo, hi = dtype.value_range
        if fill.kind == "randint":
            if not (isinstance(a, int) and isinstance(b, int)):
                raise InputError(f"{where}: randint needs integer bounds (got {a!r}, {b!r})")
            if b - a < 2:
                raise InputError(f"{where}: randint({a}, {b}) draws from {a} to {b - 1}: it needs b >= a + 2")
            if a < lo or b - 1 > hi:
                raise InputError(f"{where}: randint({a}, {b}) does not fit in {dtype} ({lo} to {hi})")
        elif fill.kind == "uniform":
            if not a < b:
                raise InputError(f"{where}: uniform({a}, {b}) needs a < b")
            if a < lo or b > hi:
                raise InputError(f"{where}: uniform({a}, {b}) does not fit in {dtype} ({lo} to {hi})")
        else:
            if not b > 0:
                raise InputError(f"{where}: normal({a}, {b}) needs a positive standard deviation")
            if abs(a) + NORMAL_SPREAD * b > hi:
                raise InputError(f"{where}: normal({a}, {b}) overflows {dtype} (largest finite value {hi})")
        span = fill_span(FillSpec(fill.kind, a, b))
        if span is not None and not p.domain.contains(*span):
            raise InputError(f"{where}: {fill.kind}({a}, {b}) leaves the input's domain "
                             f"([{p.domain.lo:g}, {p.domain.hi:g}])")
        return a, b

    # --- launch, tolerance, cost ------------------------------------------------------------

    def launch_dims(self, sizes: Mapping[str, int], *, context: str = "",
                    step: KernelStep | None = None) -> LaunchDims:
        """Grid, block, dynamic shared bytes and cluster (of ``[launch]``, or of one step of the
        sequence), checked against CUDA's limits."""
        if step is not None and self.kernels:
            assert step.launch is not None
            where = f"{self._prefix(context)}kernels[{self.kernels.index(step)}]"
            launch = step.launch
        else:
            where = self._prefix(context) + "launch"
            launch = step.launch if step is not None and step.launch is not None else self.launch
        grid = _dims3(launch.grid, sizes, f"{where}.grid", MAX_GRID)
        block = _dims3(launch.block, sizes, f"{where}.block", MAX_BLOCK)
        if math.prod(block) > MAX_THREADS:
            raise InputError(f"{where}.block: {math.prod(block)} threads in a block (at most {MAX_THREADS})")
        shared = _integer(launch.shared, sizes, f"{where}.shared", least=0, most=MAX_SHARED)
        cluster = None
        if launch.cluster is not None:
            cluster = _dims3(launch.cluster, sizes, f"{where}.cluster", (MAX_CLUSTER,) * 3)
            if math.prod(cluster) > MAX_CLUSTER:
                raise InputError(
                    f"{where}.cluster: {math.prod(cluster)} blocks in a cluster (at most {MAX_CLUSTER})"
                )
            for k in range(3):
                if grid[k] % cluster[k]:
                    raise InputError(
                        f"{where}.grid[{k}]: {grid[k]} blocks are not a multiple of the cluster's {cluster[k]}"
                    )
        return LaunchDims(grid, block, shared, cluster)

    def tolerance(self, name: str, sizes: Mapping[str, int], *, context: str = "") -> tuple[float, float]:
        """``(atol, rtol)`` for an output at these sizes. With a reduction, atol is scaled by
        max(1, sqrt(reduction / 128)): the error of a sum in another order grows with its length,
        in absolute terms; rtol, the output's own rounding, does not."""
        tol = self.tolerances[name]
        if tol.reduction is None:
            return tol.atol, tol.rtol
        length = _integer(tol.reduction, sizes, f"{self._prefix(context)}tolerance.{name}.reduction", least=1)
        scale = max(1.0, math.sqrt(length / REDUCTION_BASE))
        return tol.atol * scale, tol.rtol

    def flops(self, sizes: Mapping[str, int], *, context: str = "") -> Number | None:
        """Floating-point (or integer) operations per launch; None when ``cost.flops`` is not given."""
        if self.cost is None or self.cost.flops is None:
            return None
        return _amount(self.cost.flops, sizes, f"{self._prefix(context)}cost.flops")

    def bytes(self, sizes: Mapping[str, int], *, context: str = "") -> Number:
        """DRAM bytes per launch: ``cost.bytes``, or else every buffer once (inout buffers twice)."""
        if self.cost is not None and self.cost.bytes is not None:
            return _amount(self.cost.bytes, sizes, f"{self._prefix(context)}cost.bytes")
        return sum(
            self.buffer_bytes(p, sizes, context=context) * (2 if p.role == "inout" else 1)
            for p in self.params
            if p.kind == "buffer"
        )

    def tensormap_geometry(self, param: str | ParamSpec, sizes: Mapping[str, int], *,
                           context: str = "") -> TensorMapGeometry:
        """A tensormap's extents, byte strides, box and swizzle at ``sizes``, checked against the
        limits TMA puts on them (strides multiples of 16 bytes, the box's inner row at most one
        swizzle span), so that a bad spec fails here and not inside the driver."""
        p = self._resolve(param)
        tm = p.tensormap
        assert tm is not None
        where = self._prefix(context) + self._key(p)
        buffer = self.param(tm.tensor)
        assert buffer.dtype is not None
        shape = self.memory_shape(buffer, sizes, context=context)
        dims = tuple(_integer(e, sizes, f"{where}.dims[{j}]", least=1, most=shape[j]) for j, e in enumerate(tm.dims))
        item = buffer.dtype.itemsize
        strides = tuple(math.prod(shape[j + 1:]) * item for j in range(len(shape) - 1))
        for j, stride in enumerate(strides):
            if stride % 16 or stride >= 2**40:
                raise InputError(f"{where}: {tm.tensor}'s stride over axis {j} is {stride} bytes; "
                                 "TMA needs a multiple of 16 below 2^40")
        row = tm.box[-1] * item
        if row % 16:
            raise InputError(f"{where}.box: the inner extent is {row} bytes; TMA needs a multiple of 16")
        span = SWIZZLES[tm.swizzle]
        if span and row > span:
            raise InputError(f"{where}.box: the inner extent is {row} bytes, more than the {tm.swizzle} swizzle span")
        return TensorMapGeometry(dims, strides, tm.box, tm.swizzle)

    def middle_sizes(self) -> dict[str, int]:
        """The sweep's size set of median bytes moved: where value cases and a second memcheck run
        (big enough to leave the first tiles, small enough to stay quick)."""
        sets = sorted(self.size_sets(), key=lambda sizes: sum(
            self.buffer_bytes(p, sizes) for p in self.params if p.kind == "buffer"))
        return sets[(len(sets) - 1) // 2]

    def value_cases(self) -> tuple[ValueCase, ...]:
        """The spec's own value cases, then porter's (``wide``): every float fill widened by
        ``[inputs] wide`` (multiplicatively for a fill of positive numbers, inside the input's
        domain) unless ``wide = 1``, and every fixed float constant perturbed (see
        :meth:`perturbed`). None when there is nothing to widen or perturb."""
        cases = list(self.inputs_spec.cases)
        factor = self.inputs_spec.wide
        widened = {p.name: _widen(p.fill, factor, p.dtype.max_finite / 2, p.domain) for p in self.inputs
                   if factor > 1 and p.fill is not None and p.dtype is not None and p.dtype.is_float}
        if (widened or self.perturbed()) and all(c.name != WIDE for c in cases):
            cases.append(ValueCase(WIDE, widened, {}, atol_scale=factor if widened else PERTURB))
        return tuple(cases)

    def perturbed(self) -> tuple[str, ...]:
        """The fixed float ``[values]`` and scalars that porter's value case perturbs: all but the
        ``const`` ones, and a scalar whose value reads a ``[values]`` entry (it follows that one)."""
        values = {v.name for v in self.values}
        return tuple(
            [v.name for v in self.values if v.range is None and v.dtype.is_float and not v.const]
            + [p.name for p in self.params if p.kind == "scalar" and p.range is None and p.dtype is not None
               and p.dtype.is_float and not p.const and not free_symbols(str(p.value)) & values])

    def value_case(self, name: str) -> ValueCase:
        for case in self.value_cases():
            if case.name == name:
                return case
        raise InputError(f"{self.source}: no value case {name!r}")

    def value_case_sizes(self, case: ValueCase) -> dict[str, int]:
        """Where a value case runs: its ``at``, else the sweep's middle size set (porter's own case
        is placed per check instead, see :func:`porter.gate.plan.check_plan`)."""
        if not case.at:
            return self.middle_sizes()
        return resolve_sizes(self.sizes, case.at, where=f"{self.source}: inputs.cases {case.name!r}.at")

    def fill_of(self, param: str | ParamSpec, values: str = "") -> FillSpec:
        """An input's fill in value case ``values`` ("" for the default fills)."""
        p = self._resolve(param)
        assert p.fill is not None
        if values:
            return self.value_case(values).fills.get(p.name, p.fill)
        return p.fill

    def validate(self) -> None:
        """Check every size-dependent value for the default sizes, each sweep entry and each value case."""
        self.check_sizes(self.default_sizes())
        if self.sweep:
            for label, sizes in self._labelled_size_sets():
                self.check_sizes(sizes, context=label)
        for i, sizes in enumerate(self.emulated_size_sets()):
            self.check_sizes(sizes, context=f"emulate[{i}]")
        for case in self.value_cases():
            context = f"inputs.cases {case.name!r}"
            where = self.size_sets() if case.name == WIDE and not case.at else [self.value_case_sizes(case)]
            for sizes in where:
                self.check_sizes(sizes, context=context)
                for symbols in self.symbol_sets(sizes, context=context):
                    for name, fill in case.fills.items():
                        self._fill_bounds(self.param(name), fill, symbols, context=context)

    def symbol_sets(self, sizes: Mapping[str, int], *, context: str = "") -> list[dict[str, Number]]:
        """What fills and scalar values are evaluated over when a spec is checked: the sizes with
        the ``[values]`` at each end of their ranges (see :meth:`value_corners`)."""
        return [{**sizes, **corner} for corner in self.value_corners(sizes, context=context)]

    def check_sizes(self, sizes: Mapping[str, int], *, context: str = "") -> None:
        """Evaluate every size-dependent value at ``sizes``, the size contract first; InputError
        for the first bad one."""
        self.check_require(sizes, context=context)
        for p in self.params:
            if p.kind == "buffer":
                self.memory_shape(p, sizes, context=context)
            elif p.kind == "tensormap":
                self.tensormap_geometry(p, sizes, context=context)
            elif p.kind == "scratch":
                self.scratch_bytes(p, sizes, context=context)
        for symbols in self.symbol_sets(sizes, context=context):
            for p in self.params:
                if p.kind == "buffer" and p.fill is not None:
                    self.fill_bounds(p, symbols, context=context)
                elif p.kind == "scalar" and p.range is not None:
                    self.scalar_range(p, symbols, context=context)
                elif p.kind == "scalar":
                    self.scalar_value(p, symbols, context=context)
        for step in self.sequence():
            if step.launch is not None:
                self.launch_dims(sizes, context=context, step=step)
        for name in self.tolerances:
            self.tolerance(name, sizes, context=context)
        self.flops(sizes, context=context)
        self.bytes(sizes, context=context)


def _widen(fill: FillSpec, factor: float, cap: float, domain: Domain) -> FillSpec:
    """A float fill with ``factor`` times its spread, kept inside +-``cap`` and the domain: about
    its centre, or multiplicatively (``uniform(a / factor, b * factor)``) for a fill of positive
    numbers, which an additive widening would push out of a positive domain. Numbers where the
    bounds are numbers, expressions where they read size symbols."""
    lo, hi = max(-cap, domain.lo), min(cap, domain.hi)
    if isinstance(fill.a, int | float) and isinstance(fill.b, int | float):
        if fill.kind == "normal":
            room = min(cap - abs(fill.a), hi - fill.a, fill.a - lo) / (NORMAL_SPREAD + 1)
            return FillSpec("normal", fill.a, min(factor * fill.b, room))
        if fill.a >= 0:
            return FillSpec("uniform", max(lo, fill.a / factor), min(hi, fill.b * factor))
        centre, half = (fill.a + fill.b) / 2, (fill.b - fill.a) / 2
        return FillSpec("uniform", max(lo, centre - factor * half), min(hi, centre + factor * half))
    a, b = f"({fill.a})", f"({fill.b})"
    if fill.kind == "normal":
        room = f"min({cap} - abs({a}), {hi} - {a}, {a} - ({lo}))"
        return FillSpec("normal", fill.a, f"min({factor} * {b}, {room} / {NORMAL_SPREAD + 1})")
    centre, half = f"(({a} + {b}) / 2)", f"(({b} - {a}) / 2)"
    return FillSpec("uniform", f"max({lo}, {centre} - {factor} * {half})", f"min({hi}, {centre} + {factor} * {half})")


def _typed_number(dtype: DType, expr: Expr, symbols: Mapping[str, Number], where: str, what: str = "scalar") -> Number:
    """An expression's value as a number of ``dtype``: an int inside an integer dtype's range, or a
    finite float inside a float dtype's."""
    value = evaluate(expr, symbols, where=where)
    lo, hi = dtype.value_range
    if not dtype.is_float and not isinstance(value, int):
        raise InputError(f"{where}: an {dtype} {what} needs an integer (got {value!r})")
    if not lo <= value <= hi:
        raise InputError(f"{where}: {value} does not fit in {dtype} ({lo} to {hi})")
    return float(value) if dtype.is_float else value


def _integer(expr: Expr, sizes: Mapping[str, int], where: str, *, least: int, most: int | None = None) -> int:
    value = evaluate(expr, sizes, where=where)
    if not isinstance(value, int):
        raise InputError(f"{where}: must be an integer (got {value!r}; use // for integer division)")
    if value < least:
        raise InputError(f"{where}: must be at least {least} (got {value})")
    if most is not None and value > most:
        raise InputError(f"{where}: must be at most {most} (got {value})")
    return value


def _dims3(
    exprs: tuple[Expr, Expr, Expr], sizes: Mapping[str, int], where: str, most: tuple[int, ...]
) -> tuple[int, int, int]:
    x, y, z = (_integer(e, sizes, f"{where}[{k}]", least=1, most=most[k]) for k, e in enumerate(exprs))
    return x, y, z


def _amount(expr: Expr, sizes: Mapping[str, int], where: str) -> Number:
    value = evaluate(expr, sizes, where=where)
    if value < 0:
        raise InputError(f"{where}: must not be negative (got {value})")
    return value


# --- loading ---------------------------------------------------------------------------------


_LAUNCH_DIRECTIVE = re.compile(r"^[ \t]*//[ \t]*porter-launch:(?P<body>.*)$", re.MULTILINE)
_PARAM_DIRECTIVE = re.compile(r"^[ \t]*//[ \t]*porter-param:(?P<body>.*)$", re.MULTILINE)
_KERNEL_DIRECTIVE = re.compile(r"^[ \t]*//[ \t]*porter-kernel:(?P<body>.*)$", re.MULTILINE)


def launch_directive(ptx_text: str, *, source: str) -> dict[str, Any] | None:
    """A candidate's own launch and added params, from comment lines in its PTX::

        // porter-launch: entry = "gemm_sm90a", grid = ["ceil_div(N, 256)", "ceil_div(M, 128)", 1], block = [384, 1, 1], shared = 196608
        // porter-param: name = "tmA", kind = "tensormap", tensor = "A", dims = ["M", "K"], box = [128, 64], swizzle = "128B"

    Each body is the inside of a TOML inline table. porter-launch has the keys of ``[launch]``
    (grid, block, shared, cluster) and optionally ``entry``; each porter-param line is one more
    ``[[params]]`` entry, appended in order after the spec's. A port often changes its block
    shape and shared memory, and a Hopper port takes TMA descriptors of the same buffers; this
    lets a candidate say so while the spec keeps describing the source.
    """
    directive: dict[str, Any] = {}
    match = _LAUNCH_DIRECTIVE.search(ptx_text)
    if match is not None:
        directive.update(_directive_table(ptx_text, match, "porter-launch", source))
    params = [_directive_table(ptx_text, m, "porter-param", source) for m in _PARAM_DIRECTIVE.finditer(ptx_text)]
    if params:
        directive["params"] = params
    kernels = [_directive_table(ptx_text, m, "porter-kernel", source) for m in _KERNEL_DIRECTIVE.finditer(ptx_text)]
    if kernels:
        directive["kernels"] = kernels
    return directive or None


def _directive_table(ptx_text: str, match: re.Match[str], name: str, source: str) -> dict[str, Any]:
    line = ptx_text.count("\n", 0, match.start()) + 1
    try:
        return dict(tomllib.loads("d = {" + match.group("body").strip() + "}")["d"])
    except tomllib.TOMLDecodeError as err:
        raise InputError(f"{source}:{line}: {name}: not the inside of a TOML inline table ({err})") from None


def with_launch(spec: Spec, directive: Mapping[str, Any], *, source: str) -> Spec:
    """The spec with a candidate's launch (and entry name), or its own sequence of kernels (its
    porter-kernel lines), and its added params, checked as strictly as the spec itself."""
    parser = _Parser(source=f"{source}: porter-launch", base_dir=spec.base_dir)
    table = dict(directive)
    extra = table.pop("params", [])
    steps = table.pop("kernels", None)
    if table and (steps is not None or spec.kernels):
        raise parser.error(next(iter(table)), "a hot loop of several kernels is declared with porter-kernel lines, "
                           "one per step (entry, grid, block, shared, args; or zero), not with porter-launch")
    entry = table.pop("entry", spec.entry)
    if not isinstance(entry, str) or not entry or entry.strip() != entry or " " in entry:
        raise parser.error("entry", f"must be a PTX entry name without spaces (got {entry!r})")
    launch = parser.launch(table, tuple(spec.sizes)) if table else spec.launch
    params = list(spec.params)
    added = []
    param_parser = _Parser(source=f"{source}: porter-param", base_dir=spec.base_dir)
    for raw in extra:
        key = f"params[{len(params)}]"
        if raw.get("kind") not in ("tensormap", "scratch"):
            raise param_parser.error(f"{key}.kind", "a candidate can add only tensormap params (built from the "
                                     "spec's buffers) and scratch (its own temporaries), so the contract stays the "
                                     f"spec's; got {raw.get('kind')!r}")
        param = param_parser.param(raw, key, tuple(spec.sizes))
        if any(p.name == param.name for p in params):
            raise param_parser.error(f"{key}.name", f"duplicate param name {param.name!r}")
        params.append(param)
        added.append(param)
    param_parser.tensormap_targets(params, added)
    kernels = spec.kernels
    if steps is not None:
        kernels = _Parser(source=source, base_dir=spec.base_dir).kernels(steps, "porter-kernel", tuple(spec.sizes),
                                                                          params)
        entry = next(k.entry for k in kernels if k.entry)
        launch = next(k.launch for k in kernels if k.entry == entry)
    changed = replace(spec, entry=entry, launch=launch, params=tuple(params), kernels=kernels)
    try:
        changed.validate()
    except InputError as err:  # evaluated against every size set: say whose launch it is
        what = "porter-kernel" if steps is not None else "porter-launch"
        raise InputError(f"{source}: {what}: {str(err).removeprefix(spec.source + ': ')}") from None
    return changed


def declared_spec(spec: Spec, ptx_text: str, *, source: str) -> tuple[Spec, dict[str, Any] | None]:
    """The spec as a kernel says it runs (its porter-launch and porter-param lines applied), and
    those lines as read (None when it has none: the spec describes it as is)."""
    directive = launch_directive(ptx_text, source=source)
    return (with_launch(spec, directive, source=source) if directive else spec), directive


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
    p = _Parser(source, Path(base_dir))
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
class _Parser:
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


# --- matching the PTX entry -----------------------------------------------------------------


def _describe(kind: str, dtype: DType | None) -> str:
    if kind == "scalar":
        return f"{dtype} scalar"
    if kind == "tensormap":
        return "tensor map (CUtensorMap)"
    return f"{dtype} buffer pointer" if kind == "buffer" else "scratch pointer"


def check_against_entry(spec: Spec, entry: Entry) -> list[str]:
    """How the spec's params disagree with a PTX entry's (count, byte width, float vs integer).

    Buffers and scratch are 8-byte pointers; a scalar is as wide as its dtype. An empty list means
    they agree as far as PTX can tell.
    """
    problems = []
    if entry.name != spec.entry:
        problems.append(f"the spec's kernel.entry is {spec.entry!r} but the PTX entry is {entry.name!r}")
    return problems + _param_problems(list(spec.params), entry, "params", "the spec lists")


def check_against_module(spec: Spec, module: PtxModule) -> list[str]:
    """:func:`check_against_entry` for every kernel of the hot loop: each step's entry is in the
    module and takes the step's ``args``, in order."""
    if not spec.kernels:
        return check_against_entry(spec, module.entry(spec.entry))
    problems = []
    names = ", ".join(e.name for e in module.kernels) or "none"
    for i, step in enumerate(spec.kernels):
        if not step.entry:
            continue
        try:
            entry = module.entry(step.entry)
        except KeyError:
            problems.append(f"kernels[{i}]: no .entry {step.entry!r} in the module (entries: {names})")
            continue
        params = [spec.param(name) for name in step.args]
        problems += _param_problems(params, entry, f"kernels[{i}].args", f"kernels[{i}] passes")
    return problems


def _param_problems(params: list[ParamSpec], entry: Entry, key: str, listing: str) -> list[str]:
    problems = []
    if len(params) != len(entry.params):
        problems.append(f"{listing} {len(params)} params but .entry {entry.name} has {len(entry.params)}")
    for i, (p, ptx) in enumerate(zip(params, entry.params, strict=False)):
        name, kind, dtype = p.name, p.kind, p.dtype
        width = (dtype.itemsize if kind == "scalar" and dtype is not None
                 else TENSORMAP_BYTES if kind == "tensormap" else POINTER_BYTES)
        ptx_text = f"{ptx.type}[{ptx.array_size}]" if ptx.array_size else ptx.type
        ptx_float = ptx.type.startswith(".f")
        ptx_int = ptx.type[1:2] in ("s", "u")
        spec_float = kind == "scalar" and dtype is not None and dtype.is_float
        if ptx.size_bytes != width:
            problems.append(
                f"{key}[{i}] {name!r}: {_describe(kind, dtype)} of {width} bytes, but PTX param "
                f"{ptx.name} is {ptx_text} ({ptx.size_bytes} bytes)"
            )
        elif (ptx_float and not spec_float) or (ptx_int and spec_float):
            problems.append(
                f"{key}[{i}] {name!r}: {_describe(kind, dtype)}, but PTX param {ptx.name} is {ptx_text}"
            )
        elif kind == "tensormap" and (ptx.align or 1) < 64:
            problems.append(
                f"{key}[{i}] {name!r}: a tensor map must be 64-byte aligned "
                f"(.param .align 64 .b8 {ptx.name}[128]), but PTX param {ptx.name} has align {ptx.align or 1}"
            )
    return problems
