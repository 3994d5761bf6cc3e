"""The spec's data: the frozen types a checked spec is made of (params, fills, domains, launches,
tolerances, costs, value cases) and the constants that bound them (CUDA's launch limits, TMA's box,
the defaults a spec may leave out). Nothing here reads a file or evaluates an expression.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from porter.gate.dtypes import DType
from porter.gate.expr import Expr

KINDS = ("buffer", "scalar", "scratch", "tensormap")
SWIZZLES = {"none": 0, "32B": 32, "64B": 64, "128B": 128}  # swizzle name -> span in bytes
ROLES = ("in", "out", "inout")
FILLS = ("uniform", "normal", "randint")

POINTER_BYTES = 8  # buffers and scratch are passed as .u64 pointers
TENSORMAP_BYTES = 128  # a CUtensorMap, passed by value as .param .align 64 .b8 name[128]
MAX_BOX = 256  # TMA box extent per dimension
REDUCTION_BASE = 128  # tolerances grow with sqrt(reduction / REDUCTION_BASE), never shrink
# A reduction's atol also holds what a float32 accumulator may lose over its length: the unit
# roundoff times the length times the output's scale (:meth:`Spec.tolerance`). Tensor cores do not
# round to nearest: on the H100 an honest Triton GEMM's f32 accumulator, truncating at each k-step,
# drifted by up to 5 at K = 1.8M where the reference's RMS was 470 (2026-12-05).
ACCUMULATOR_UNIT = 2.0**-24  # float32's; float64 outputs use float64's (2^-53)
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
    and by what an accumulator may lose over that length (:meth:`Spec.tolerance`); rtol, the
    output's own rounding, does not."""

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
