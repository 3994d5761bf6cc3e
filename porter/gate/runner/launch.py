"""One run of a hot loop on the GPU: its buffers, its arguments and the state before each launch."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, cast

import numpy as np

from porter.gate import layout
from porter.gate.layout import Placement
from porter.gate.runner.memory import DeviceBuffer, initial_contents, scrub_and_free, scrubbed
from porter.gate.runner.pinned import upload
from porter.gate.spec import DEFAULT_ALIGN


class Device(Protocol):
    """What a launch needs of the worker (``state.WorkerState``): CuPy, where buffers may lie, and
    porter's own kernels."""

    cp: Any
    fenced: bool

    def placement(self, placing: str, nbytes: int, align: int, rng: np.random.Generator,
                  family: layout.Family) -> Placement: ...

    def scrub_kernel_memory(self) -> None: ...

    def fill_random(self, data: Any, key: int) -> None: ...

    def digest(self, data: Any, out: Any, slot: int) -> None: ...


class Kernels(Protocol):
    """A loaded module, as a launch runs it (``state.LoadedModule``)."""

    def function(self, entry: str, shared: int) -> Any: ...


@dataclass(frozen=True)
class Pending:
    """A run's checks (:meth:`Launch.check`), computed on the device and not yet read."""

    values: Any  # uint64 device array: the outputs' digests, the bands', the inputs', the padding count, the witness
    outputs: int
    bands: int
    inputs: tuple[str, ...]  # the input buffers digested, by name
    padding: bool
    due: frozenset[int]  # the witness slots this read-back is the first to read


@dataclass(frozen=True)
class Settled:
    """What a run left (:meth:`Launch.settle`): each output's keyed digest, in the spec's order,
    writes outside the buffers (guard bands, padding) and inputs changed, described."""

    outputs: list[int]
    guards: list[str]
    modified: list[str]


def _scalar_arg(dtype: Any, value: float | int) -> Any:
    """A kernel argument of exactly the param's width (16-bit and 8-bit floats travel as raw bits)."""
    host = np.asarray(value).astype(dtype.numpy)
    if dtype.kind == "float" and dtype.itemsize <= 2:
        return host.view({1: np.uint8, 2: np.uint16}[dtype.itemsize])[()]
    return host[()]


class Launch:
    """The buffers and arguments of one run of the hot loop on one size set (one kernel, or the
    spec's sequence of kernels and zero steps), and the state before each run.

    ``seed`` drives everything random around the inputs: guard patterns, the padding of padded
    buffers, the outputs' random initial contents and the scratch contents (the inputs themselves
    come with ``host_args``).
    """

    def __init__(self, state: Device, spec: Any, sizes: dict[str, int], host_args: dict[str, Any],
                 seed: int, placing: str = "flush") -> None:
        """``placing`` says where the buffers lie (see :mod:`porter.gate.layout`): ``flush`` (each
        ends at unmapped memory), ``drawn`` (a family and offsets drawn from ``seed``), ``plain``
        (the offsets drawn from ``seed``, in the plain family: near each other, as a program's
        tensors) or ``exact`` (plain allocations of exactly the data, for compute-sanitizer's
        bounds checks)."""
        from porter.gate.inputs import GUARDS, stream
        from porter.gate.runner.padding import Padding

        cp = state.cp
        self.state, self.spec, self.sizes, self.seed = state, spec, sizes, seed
        self.buffers: dict[str, DeviceBuffer] = {}
        self.padding: dict[str, Padding] = {}
        self.held: dict[str, Any] = {}  # nondeterministic outputs held to the reference (see hold)
        self._pristine: dict[str, Any] = {}
        self.tables: dict[str, Any] = {}  # decoding tables of 8- and 16-bit floats (see hold)
        where = stream(seed, GUARDS, sizes, "layout")
        family = layout.draw_family(where, state.fenced)  # drawn even for "plain": the offsets stay the seed's
        if placing == "plain":
            family = "plain"
        for p in spec.params:  # buffers first: a tensormap may describe a buffer listed after it
            nbytes = 0
            align = p.alignment() if p.kind == "buffer" else DEFAULT_ALIGN
            if p.kind == "buffer":
                memory = spec.memory_shape(p, sizes)
                nbytes = int(np.prod(memory, dtype=np.int64)) * p.dtype.itemsize
                padding = Padding.of(memory, spec.shape(p, sizes), p.dtype.itemsize)
                if padding is not None:
                    self.padding[p.name] = padding
            elif p.kind == "scratch":
                nbytes = spec.scratch_bytes(p, sizes)
            if p.kind == "buffer" or (p.kind == "scratch" and nbytes > 0):
                if placing == "plain":  # as a program's tensors start (see layout.PROGRAM_ALIGN)
                    align = max(align, layout.PROGRAM_ALIGN)
                placement = state.placement(placing, nbytes, align, where, family)
                keys = (int(where.integers(2**62)), int(where.integers(2**62)))  # its guard patterns
                self.buffers[p.name] = DeviceBuffer(cp, nbytes, placement, state.fill_random, keys,
                                                    read_only=p.kind == "buffer" and p.role == "in")
        self.steps = spec.sequence()
        self.dims = [spec.launch_dims(sizes, step=step) if step.entry else None for step in self.steps]
        # What porter wrote, digested as it is written (see settle): a slot per guard band, then one
        # per param (an input's image); each read back with the next run's digests, once.
        bands = [band for buf in self.buffers.values() for band in buf.guard_bands()]
        self._witness = cp.zeros(len(bands) + len(spec.params), dtype=cp.uint64)
        for slot, band in enumerate(bands):
            state.digest(band, self._witness, slot)
        self._witness_read: dict[int, int] = {}  # slot -> its digest as read back
        self._witness_due = set(range(len(bands)))  # slots computed, not yet read back
        self._redraw(seed)
        self.rebind(host_args, seed)

    def _redraw(self, seed: int) -> None:
        """Forget every image drawn from the last seed and draw the padding patterns from ``seed``."""
        from porter.gate.inputs import GUARDS, stream

        self.seed = seed
        self._pristine = {}
        for index, p in enumerate(self.spec.params):
            if p.name in self.padding:
                rng = stream(seed, GUARDS, self.sizes, index, "padding")
                pattern = rng.integers(0, 256, self.buffers[p.name].nbytes, dtype=np.uint8)
                self._pristine[f"padding:{p.name}"] = (pattern, self.state.cp.asarray(pattern))

    def rebind(self, host_args: dict[str, Any], seed: int) -> None:
        """New inputs and scalars in the same buffers: the next case of the same sizes runs where
        the last one ran, as a program calls a kernel again and again on new data. What else the
        state before a launch holds (padding patterns, the outputs' random contents, scratch) is
        drawn from ``seed``, so that a case's launches are the same wherever its buffers came from."""
        self.host_args = host_args
        if seed != self.seed:
            self._redraw(seed)
        else:  # the same draws: only the inputs' images are the last case's
            self._pristine = {k: v for k, v in self._pristine.items()
                              if k.startswith(("initial:", "scratch:", "padding:"))}
        args: dict[str, Any] = {}
        for p in self.spec.params:
            if p.kind in ("buffer", "scratch"):
                buf = self.buffers.get(p.name)
                args[p.name] = np.uint64(buf.kernel_ptr if buf is not None else 0)
            elif p.kind == "tensormap":
                from porter.gate.runner.tensormap import encode_tiled

                target = self.spec.param(p.tensormap.tensor)
                args[p.name] = encode_tiled(self.buffers[target.name].kernel_ptr, target.dtype.name,
                                            target.dtype.itemsize, self.spec.tensormap_geometry(p, self.sizes))
            else:
                args[p.name] = _scalar_arg(p.dtype, host_args[p.name])
        self.args = [tuple(args[name] for name in step.args) for step in self.steps]

    def reset(self, initial: str = "poison") -> None:
        """The state before a launch: inputs uploaded afresh, outputs set to ``initial`` (see
        INITIAL_STATES), the padding of padded buffers to its pattern, scratch random, every SM's
        shared memory and every thread's local memory overwritten. Guard bands are written once and
        checked after each launch. The module's globals are left as the last launch left them, as in a program (a timed
        launch restores them first: see job_time)."""
        for index, p in enumerate(self.spec.params):
            buf = self.buffers.get(p.name)
            if buf is None:
                continue
            if p.kind == "scratch":
                buf.copy_from(self._device_pattern(p.name, index, buf.nbytes))
            elif p.role == "out":
                buf.copy_from(self._initial(p, index, initial))
            else:
                if p.name not in self._pristine:
                    self._pristine[p.name] = image = upload(self.state.cp, self._input_image(p))
                    slot = self._input_slot(index)  # the image's digest as it came up, before any kernel runs on it
                    self._witness[slot:slot + 1] = 0
                    self.state.digest(image, self._witness, slot)
                    self._witness_read.pop(slot, None)
                    self._witness_due.add(slot)
                buf.copy_from(self._pristine[p.name])
        self.state.scrub_kernel_memory()

    def _initial(self, p: Any, index: int, initial: str) -> Any:
        """An output's whole buffer before a launch: the view poisoned, random or zero, the padding its pattern."""
        from porter.gate.inputs import INITIAL, stream

        cp = self.state.cp
        key = f"initial:{p.name}:{initial}"
        if key not in self._pristine:
            padding = self.padding.get(p.name)
            nbytes = padding.view_bytes if padding is not None else self.buffers[p.name].nbytes
            rng = stream(self.seed, INITIAL, self.sizes, index, initial)
            view = initial_contents(cp, p.dtype, nbytes, initial, int(rng.integers(2**62)))
            if padding is not None:
                view = padding.image(cp, view, self._pristine[f"padding:{p.name}"][1])
            self._pristine[key] = view
        return self._pristine[key]

    def _input_image(self, p: Any) -> np.ndarray:
        """An input's whole buffer as host bytes: its values, in the padding's pattern if padded."""
        host = np.ascontiguousarray(self.host_args[p.name]).reshape(-1).view(np.uint8)
        padding = self.padding.get(p.name)
        if padding is None:
            return host
        return cast(np.ndarray, padding.image(np, host, self._pristine[f"padding:{p.name}"][0]))

    def _device_pattern(self, name: str, index: int, nbytes: int) -> Any:
        from porter.gate.inputs import INITIAL, stream

        key = f"scratch:{name}"
        if key not in self._pristine:
            rng = stream(self.seed, INITIAL, self.sizes, index, "scratch")
            self._pristine[key] = self.state.cp.asarray(rng.integers(0, 256, nbytes, dtype=np.uint8))
        return self._pristine[key]

    def run(self, module: Kernels) -> None:
        """One run of the hot loop: every step in order, with nothing between them (no sync, no
        reset), as the program runs them."""
        for step, dims, args in zip(self.steps, self.dims, self.args, strict=True):
            if dims is None:
                for name in step.zero:
                    self._zero(name)
                continue
            fn = module.function(step.entry, dims.shared)
            fn(tuple(dims.grid), tuple(dims.block), args, shared_mem=int(dims.shared))

    def _zero(self, name: str) -> None:
        buf = self.buffers[name]
        padding = self.padding.get(name)
        if padding is None:
            buf.data.fill(0)
        else:
            padding.fill_view(buf.data, 0)

    def guard_problems(self) -> list[str]:
        """Writes into the guard bands, and into the padding of padded buffers, described."""
        problems = [problem for name, buf in self.buffers.items() if (problem := buf.guard_violation(name))]
        for name, padding in self.padding.items():
            changed = padding.changes(self.state.cp, self.buffers[name].data, self._pristine[f"padding:{name}"][1],
                                      name, self.spec.memory_shape(name, self.sizes)[-1])
            if changed:
                problems.append(changed)
        return problems

    def hold(self, reference: dict[str, np.ndarray]) -> None:
        """Hold the nondeterministic outputs to ``reference`` (see :mod:`porter.gate.runner.hold`)
        from now on: their digest slots get the count of elements outside the tolerance."""
        from porter.gate.runner.hold import HeldOutput
        from porter.gate.summary import reference_scale

        for p in self.spec.outputs:
            if not p.deterministic:
                ref = np.ascontiguousarray(np.asarray(reference[p.name], dtype=np.float64).reshape(-1))
                atol, rtol = self.spec.tolerance(p.name, self.sizes, scale=reference_scale(np, self.spec, p.name, ref))
                self.held[p.name] = HeldOutput(ref, atol, rtol)

    def digest_outputs(self, out: Any, first_slot: int) -> None:
        """One number per output into consecutive slots of ``out``, from ``first_slot``: the
        digest of its buffer, or for a nondeterministic output the count of its elements outside
        the tolerance of the reference it is held to (0 when it is held to none). The reference is
        on the device only while it is compared (see :mod:`porter.gate.runner.hold`)."""
        from porter.gate.runner.hold import decoder, elements

        cp = self.state.cp
        for k, p in enumerate(self.spec.outputs):
            buf = self.buffers[p.name]
            if p.deterministic:
                self.state.digest(buf.data, out, first_slot + k)
            elif p.name in self.held:
                padding = self.padding.get(p.name)
                raw = padding.view(cp, buf.data) if padding is not None else buf.data
                decode = decoder(cp, p.dtype, self.tables)  # its table made outside the scrubbed pool
                with scrubbed(cp):
                    count = self.held[p.name].outside(cp, decode(elements(raw, p.dtype)))
                    out[first_slot + k: first_slot + k + 1] = count.astype(cp.uint64)

    def collect(self) -> tuple[dict[str, np.ndarray], list[str], list[str]]:
        """Outputs (host, the view of padded ones), guard violations, and inputs that the kernel modified."""
        return (self.outputs(), *self.integrity())

    def integrity(self) -> tuple[list[str], list[str]]:
        """:meth:`guard_problems` and :meth:`changed_inputs` after a run (see :meth:`settle`)."""
        settled = self.settle()
        return settled.guards, settled.modified

    def settle(self) -> Settled:
        """What the run that was just launched left (:meth:`check`), read with one synchronisation
        (which raises its kernel's error, if it had one)."""
        pending = self.check()
        (found,) = read_back(self.state.cp, [pending.values])
        return self.settled(pending, [int(x) for x in found])

    def check(self) -> Pending:
        """What the run that was just launched left, computed on the device behind it in stream
        order and not read: the keyed digest (:mod:`porter.gate.runner.digestkey`) of every output
        buffer, of every guard band and input buffer, the count of padding bytes that differ from
        their pattern, and a copy of the digests of what porter wrote (see :meth:`settled`). The
        caller reads the values with whatever else it reads then (:func:`read_back`): a case reads
        its runs' checks and its judgement at once."""
        cp = self.state.cp
        inputs = [p.name for p in self._inputs()]
        padding = [padding.changed_count(cp, self.buffers[name].data, self._pristine[f"padding:{name}"][1])
                   for name, padding in self.padding.items()]
        bands = [band for buf in self.buffers.values() for band in buf.guard_bands()]
        outputs = [self.buffers[p.name].data for p in self.spec.outputs]
        parts = [digests(self.state, [*outputs, *bands, *(self.buffers[name].data for name in inputs)])]
        if padding:
            parts.append(sum(padding[1:], padding[0]).astype(cp.uint64).reshape(1))
        parts.append(self._witness)  # copied as it is now, in stream order
        return Pending(cp.concatenate(parts), len(outputs), len(bands), tuple(inputs), bool(padding),
                       frozenset(self._witness_due))

    def settled(self, pending: Pending, found: list[int]) -> Settled:
        """:meth:`check`'s values as read: each output's digest, and the guard bands' and inputs'
        problems (:meth:`guard_problems`, :meth:`changed_inputs`).

        Every guard band and input buffer is held to the digest it had when porter wrote it; every
        padding is compared with its pattern. Those digests of what porter wrote were computed on
        the device as it was written, before any kernel could run on it (a guard band's when the
        buffer was made, an input's when its image went up), and come back with the first run's
        digests after that: until then they are within a kernel's reach, which could change one but
        not make it the digest of other bytes without the key (the same limit as for a digest of a
        timed launch). Only where something differs are the problems found again one by one, byte
        by byte, and described. A kernel that rewrote an input and porter's device copy of it alike
        differs from the digest of what porter uploaded."""
        witness = found[len(found) - len(self._witness):]
        for slot in pending.due:
            self._witness_read[slot] = witness[slot]
        self._witness_due -= pending.due
        digests = found[:pending.outputs]
        checked = found[pending.outputs:len(found) - len(self._witness)]
        index = {p.name: k for k, p in enumerate(self.spec.params)}
        expected = [*(self._witness_read.get(slot) for slot in range(pending.bands)),
                    *(self._witness_read.get(self._input_slot(index[name])) for name in pending.inputs),
                    *([0] if pending.padding else [])]
        if checked == expected:
            return Settled(digests, [], [])
        return Settled(digests, self.guard_problems(), self.changed_inputs())

    def _input_slot(self, index: int) -> int:
        """The witness slot of the image of param ``index``."""
        return len(self._witness) - len(self.spec.params) + index

    def _inputs(self) -> list[Any]:
        """The input buffers a run must leave as they were (those of no bytes have nothing to compare)."""
        return [p for p in self.spec.params if p.kind == "buffer" and p.role == "in"
                and (buf := self.buffers.get(p.name)) is not None and buf.nbytes]

    def outputs(self) -> dict[str, np.ndarray]:
        """The outputs, copied to the host (the view of padded ones)."""
        outputs: dict[str, np.ndarray] = {}
        for p in self.spec.outputs:
            data = self.buffers[p.name].download()
            padding = self.padding.get(p.name)
            view = padding.view(np, data) if padding is not None else data
            outputs[p.name] = view.view(p.dtype.numpy).reshape(self.spec.shape(p, self.sizes)).copy()
        return outputs

    def changed_inputs(self) -> list[str]:
        """The input buffers that differ from their image on the host (padding included),
        compared on the GPU, described. The image goes up afresh for the comparison and is
        scrubbed after it: the device copy the inputs are restored from was within the kernel's
        reach, and a kernel that rewrote both would otherwise go unseen."""
        cp = self.state.cp
        modified: list[str] = []
        for p in self._inputs():
            with scrubbed(cp):
                changed = cp.flatnonzero(self.buffers[p.name].data != upload(cp, self._input_image(p)))
                count, first = int(changed.size), int(changed[0]) if changed.size else 0
            if count:
                modified.append(f"{p.name}: {count} bytes changed (first at byte {first})")
        return modified

    def release(self) -> None:
        scrub_and_free(self.state.cp, list(self.buffers.values()))
        self.buffers.clear()
        self._pristine.clear()


def digests(state: Device, arrays: list[Any]) -> Any:
    """The keyed digest of each device array (see :mod:`porter.gate.runner.digestkey`), computed in
    stream order into a uint64 device array, not read."""
    out = state.cp.zeros(len(arrays), dtype=state.cp.uint64)
    for slot, array in enumerate(arrays):
        state.digest(array, out, slot)
    return out


def read_back(cp: Any, arrays: list[Any]) -> list[np.ndarray]:
    """The elements of each uint64 device array, copied to the host with one synchronisation: on a
    GPU another process shares, each wait for the device waits out that process's time slice
    (about 2.3 ms on the H100, 2026-12-06)."""
    flat = [array.reshape(-1) for array in arrays]
    whole = cp.concatenate(flat).get() if flat else np.zeros(0, np.uint64)
    ends = np.cumsum([array.size for array in flat])
    return [whole[end - array.size:end] for array, end in zip(flat, ends, strict=True)]


def output_digests(state: Device, launch: Launch) -> list[int]:
    """The digest of each output of the last launch (as the timing loop computes them)."""
    out = state.cp.zeros(len(launch.spec.outputs), dtype=state.cp.uint64)
    launch.digest_outputs(out, 0)
    return [int(x) for x in out.get()]
