"""A case's outputs judged on the GPU (``CaseJob.judge == "device"``): each run's outputs compared
with the reference where they lie, by :func:`porter.gate.summary.summarize` over CuPy (the code and
the rule the host's :func:`porter.gate.compare.compare` runs over NumPy), so that an output that
passes crosses to the parent as a summary of a few numbers instead of its arrays and the reference.
An output that fails, and a run whose outputs differ from the first run's, is copied back and
judged on the host exactly as before (``jobs.job_case``).

Security: the candidate runs in porter's own CUDA context, so anything on the device while one of
its kernels runs is within reach of a wild write (or read) at a guessed address. Hence:

- the reference reaches the device only behind the case's last launch, in stream order (an
  operation on a stream starts once the kernel before it has completed), so it is never on the
  device while a candidate kernel runs; a case's runs each have buffers of their own, and the
  digests of every run's outputs, taken behind that run and again behind the last, are read
  back with the judgement's figures: a later launch that rewrote an earlier run's outputs is
  found before any judgement of them is used (the digests are keyed: see ``Launch.check``). A
  later run whose every output has the first run's digest has the first run's summaries: the
  reference goes up once a case. The figures are read before the worker replies: no candidate
  kernel runs between their computing and their reading;
- everything the judgement allocates (the reference, its float64 chunks, every temporary) comes
  from a memory pool of its own (never the launches' pool) whose every byte is zeroed when the judgement
  ends (:func:`~porter.gate.runner.memory.scrubbed`): nothing of a reference is left for a later kernel (the next case, the
  next candidate) to find, and nothing is cached on the device across cases or candidates (the
  references the worker and the parent keep on the host stay as they are).

The judgement looks at exactly the elements ``Launch.outputs`` copies back: the view of a padded
buffer (the padding is checked with the guards), 8- and 16-bit floats decoded through a table of
every bit pattern.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from porter.gate.runner.hold import decoder, elements, float32_as_float64
from porter.gate.runner.launch import Launch, read_back
from porter.gate.runner.memory import scrubbed
from porter.gate.runner.pinned import upload
from porter.gate.summary import FIGURES, Figures, OutputSummary, output_figures, output_terms

DEVICE_CHUNK = 1 << 24  # elements judged at a time: whole arrays but the largest, with bounded temporaries


def summaries(state: Any, launch: Launch, spec: Any, sizes: dict[str, int], values: str,
              reference: dict[str, np.ndarray]) -> dict[str, OutputSummary] | None:
    """Each output of ``launch``'s last run (completed) compared with ``reference`` on the device,
    or None where an output cannot be judged from a summary (the reference lacks it or has another
    shape: the host's comparison says how). ``spec`` is the source spec (its tolerances)."""
    pending = compare(state, launch, spec, sizes, values, reference)
    if pending is None:
        return None
    (found,) = read_back(state.cp, [pending.values])
    return pending.summaries(found)


@dataclass(frozen=True)
class Comparison:
    """A run's outputs compared with the reference on the device, the figures not yet read
    (:func:`compare`): ``values`` holds every output's rows as uint64 words, outside the scrubbed
    pool, for the caller to read with the rest of what it reads then."""

    values: Any
    figures: dict[str, Figures]  # each output's, in order, its rows read from ``values``

    def summaries(self, found: np.ndarray) -> dict[str, OutputSummary]:
        """Each output's summary from ``values`` as read."""
        rows = np.ascontiguousarray(found).view(np.float64).reshape(-1, FIGURES)
        out: dict[str, OutputSummary] = {}
        at = 0
        for name, figures in self.figures.items():
            count = _rows(figures.total)
            out[name] = figures.summary(rows[at:at + count].tolist())
            at += count
        return out


def compare(state: Any, launch: Launch, spec: Any, sizes: dict[str, int], values: str,
            reference: dict[str, np.ndarray]) -> Comparison | None:
    """:func:`summaries`, computed in stream order behind the launches and not read. The figures
    are copied out of the scrubbed pool (zeroed, in stream order, as the comparison ends) into an
    array of their own, which holds nothing of the reference."""
    cp = state.cp
    decoders = {p.name: decoder(cp, p.dtype, launch.tables) for p in spec.outputs}  # before the pool
    for p in spec.outputs:
        if p.name not in reference or np.shape(reference[p.name]) != tuple(spec.shape(p, sizes)):
            return None
    counts = [_rows(int(np.prod(spec.shape(p, sizes), dtype=np.int64))) for p in spec.outputs]
    rows = cp.zeros((sum(counts), FIGURES), dtype=cp.float64)
    figures: dict[str, Figures] = {}
    at = 0
    with scrubbed(cp):
        for p, count in zip(spec.outputs, counts, strict=True):
            found = _figures(cp, launch, spec, p, sizes, values, reference[p.name], decoders[p.name])
            if count:
                rows[at:at + count] = found.rows
            figures[p.name] = replace(found, rows=None)  # its rows are in the pool, about to be zeroed
            at += count
    return Comparison(rows.view(cp.uint64), figures)


def _rows(total: int) -> int:
    """The chunks (rows of figures) a comparison of ``total`` elements takes."""
    return -(-total // DEVICE_CHUNK)


def _figures(cp: Any, launch: Launch, spec: Any, p: Any, sizes: dict[str, int], values: str, host_ref: np.ndarray,
             decode: Any) -> Figures:
    buf = launch.buffers[p.name]
    padding = launch.padding.get(p.name)
    raw = padding.view(cp, buf.data) if padding is not None else buf.data
    out = elements(raw, p.dtype)
    # CuPy has no bf16 or fp8, and its float32 casts flush subnormals to zero (see
    # hold.float32_as_float64), where the host's judgement keeps them: a float32 reference goes up
    # as its bits, decoded on the device; any other float as float64 made on the host.
    ref = np.ascontiguousarray(host_ref).reshape(-1)
    if ref.dtype.kind not in "biu" and not (ref.dtype == np.float32 and p.dtype.is_float):
        ref = ref.astype(np.float64)  # floats, and ml_dtypes' (kind "V"): integers are compared as they are
    # The terms (a reduction's scale is a quantile of a sample of the reference) from the host's
    # copy: the same numbers as from the device's, without a synchronisation.
    terms = output_terms(np, spec, p.name, sizes, values, ref)
    widen = None
    if ref.dtype == np.float32:
        ref, widen = ref.view(np.uint32), (lambda bits: float32_as_float64(cp, bits))
    return output_figures(cp, spec, p.name, sizes, values, out, upload(cp, ref), decode=decode,
                          decode_reference=widen, chunk=DEVICE_CHUNK, terms=terms)
