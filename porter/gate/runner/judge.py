"""A case's outputs judged on the GPU (``CaseJob.judge == "device"``): each run's outputs compared
with the reference where they lie, by :func:`porter.gate.summary.summarize` over CuPy (the code and
the rule the host's :func:`porter.gate.compare.compare` runs over NumPy), so that an output that
passes crosses to the parent as a summary of a few numbers instead of its arrays and the reference.
An output that fails, and a run whose outputs differ from the first run's, is copied back and
judged on the host exactly as before (``jobs.job_case``).

Security: the candidate runs in porter's own CUDA context, so anything on the device while one of
its kernels runs is within reach of a wild write (or read) at a guessed address. Hence:

- the reference reaches the device only once the run's last launch has completed (the device is
  synchronised), and each run is judged before the next one launches, so neither the reference nor
  a run's outputs are on the device while a candidate kernel that could rewrite them runs (a later
  run whose every output has the first run's digest has the first run's summaries: the reference
  goes up once a case);
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

from typing import Any

import numpy as np

from porter.gate.runner.hold import decoder, elements, float32_as_float64
from porter.gate.runner.launch import Launch
from porter.gate.runner.memory import scrubbed
from porter.gate.runner.pinned import upload
from porter.gate.summary import OutputSummary, output_terms, summarize_output

DEVICE_CHUNK = 1 << 24  # elements judged at a time: whole arrays but the largest, with bounded temporaries


def summaries(state: Any, launch: Launch, spec: Any, sizes: dict[str, int], values: str,
              reference: dict[str, np.ndarray]) -> dict[str, OutputSummary] | None:
    """Each output of ``launch``'s last run (completed) compared with ``reference`` on the device,
    or None where an output cannot be judged from a summary (the reference lacks it or has another
    shape: the host's comparison says how). ``spec`` is the source spec (its tolerances)."""
    cp = state.cp
    decoders = {p.name: decoder(cp, p.dtype, launch.tables) for p in spec.outputs}  # before the pool
    for p in spec.outputs:
        if p.name not in reference or np.shape(reference[p.name]) != tuple(spec.shape(p, sizes)):
            return None
    with scrubbed(cp):
        return {p.name: _summary(cp, launch, spec, p, sizes, values, reference[p.name], decoders[p.name])
                for p in spec.outputs}


def _summary(cp: Any, launch: Launch, spec: Any, p: Any, sizes: dict[str, int], values: str, host_ref: np.ndarray,
             decode: Any) -> OutputSummary:
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
    return summarize_output(cp, spec, p.name, sizes, values, out, upload(cp, ref), decode=decode,
                            decode_reference=widen, chunk=DEVICE_CHUNK, terms=terms)
