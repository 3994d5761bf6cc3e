"""The checked spec, :class:`Spec`: a kernel's size sets, params, launch, tolerances, costs and
value cases, and every size-dependent value evaluated from them (shapes, bytes, fills, launch
dimensions, tensor-map geometry), each checked against the limits it must keep. A :class:`Spec` is
built by :mod:`porter.gate.spec.reader`, which calls :meth:`Spec.validate` before handing it out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from porter.errors import InputError
from porter.gate.dtypes import DType
from porter.gate.expr import Expr, Number, evaluate, free_symbols, resolve_sizes
from porter.gate.spec.types import (
    ACCUMULATOR_UNIT,
    DEFAULT_MAX_TILE,
    MAX_BLOCK,
    MAX_CLUSTER,
    MAX_GRID,
    MAX_SHARED,
    MAX_THREADS,
    NORMAL_SPREAD,
    PERTURB,
    REDUCTION_BASE,
    SWIZZLES,
    WIDE,
    CallableRef,
    CostSpec,
    Domain,
    FillSpec,
    InputsSpec,
    KernelStep,
    LaunchDims,
    LaunchSpec,
    ParamSpec,
    ReferenceSpec,
    TensorMapGeometry,
    Tolerance,
    ValueCase,
    ValueSpec,
    fill_span,
)


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
    inputs_spec: InputsSpec = InputsSpec()  # noqa: RUF009 (frozen: one shared default is safe)
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

    def timing_sizes(self, overrides: Mapping[str, int | str]) -> dict[str, int]:
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

    def scalar_value(self, param: str | ParamSpec, sizes: Mapping[str, Number], *, context: str = "") -> Number:
        """A fixed scalar's value: an int inside the integer dtype's range, or a finite float."""
        p = self._resolve(param)
        assert p.dtype is not None and p.value is not None, f"{p.name} is drawn from a range"
        return self._scalar_number(p, p.value, sizes, f"{self._prefix(context)}{self._key(p)}.value")

    def scalar_range(self, param: str | ParamSpec, sizes: Mapping[str, Number], *,
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

    def _scalar_number(self, p: ParamSpec, expr: Expr, sizes: Mapping[str, Number], where: str) -> Number:
        assert p.dtype is not None
        return _typed_number(p.dtype, expr, sizes, where)

    def scratch_bytes(self, param: str | ParamSpec, sizes: Mapping[str, int], *, context: str = "") -> int:
        p = self._resolve(param)
        assert p.bytes is not None
        return _integer(p.bytes, sizes, f"{self._prefix(context)}{self._key(p)}.bytes", least=0)

    def fill_bounds(
        self, param: str | ParamSpec, sizes: Mapping[str, Number], *, context: str = "", values: str = ""
    ) -> tuple[Number, Number]:
        """The evaluated ``(a, b)`` of an input's fill (in value case ``values``), checked against
        the dtype's range."""
        p = self._resolve(param)
        return self._fill_bounds(p, self.fill_of(p, values), sizes, context=context)

    def _fill_bounds(self, p: ParamSpec, fill: FillSpec, sizes: Mapping[str, Number], *,
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

    def tolerance(self, name: str, sizes: Mapping[str, int], *, scale: float = 0.0,
                  context: str = "") -> tuple[float, float]:
        """``(atol, rtol)`` for an output at these sizes. With a reduction of length L, atol is
        scaled by max(1, sqrt(L / 128)) (the error of a sum in another order grows with its
        length, in absolute terms) and grows by L x the accumulator's unit roundoff x ``scale``
        (the reference's 90th-percentile magnitude: :func:`porter.gate.summary.reference_scale`),
        what an accumulator that truncates at each step (a tensor core's) may lose at the
        magnitude its partial sums run at; near a sum that cancels to 0 the output's own scale
        is the one that counts. rtol, the output's own rounding, does not grow."""
        tol = self.tolerances[name]
        if tol.reduction is None:
            return tol.atol, tol.rtol
        length = _integer(tol.reduction, sizes, f"{self._prefix(context)}tolerance.{name}.reduction", least=1)
        grown = max(1.0, math.sqrt(length / REDUCTION_BASE))
        dtype = self.param(name).dtype
        unit = 2.0**-53 if dtype is not None and dtype.numpy == "float64" else ACCUMULATOR_UNIT
        return tol.atol * grown + length * unit * scale, tol.rtol

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
        is placed per check instead, see :func:`porter.gate.plan.plan_cases`)."""
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
        headroom = f"min({cap} - abs({a}), {hi} - {a}, {a} - ({lo}))"
        return FillSpec("normal", fill.a, f"min({factor} * {b}, {headroom} / {NORMAL_SPREAD + 1})")
    middle, spread = f"(({a} + {b}) / 2)", f"(({b} - {a}) / 2)"
    return FillSpec("uniform", f"max({lo}, {middle} - {factor} * {spread})",
                    f"min({hi}, {middle} + {factor} * {spread})")


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
