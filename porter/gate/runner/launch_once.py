"""Launch a kernel once, in a process of its own, for tools that wrap a whole process.

``ncu`` and ``compute-sanitizer`` profile or check a program, not a function call, so porter
hands them ``python -m porter.gate.runner.launch_once JOB.json``. The job names a cubin, the entry,
the spec, the sizes and the seed (a hot loop of several kernels runs them all, in order), and
where the buffers lie (:mod:`porter.gate.layout`): ``plain`` for the profiler, as a program's
tensors (and a timing run's later input sets) lie; ``exact`` for the sanitizers, each buffer a
cudaMalloc of its own size with CuPy's pool off, so that their bounds checks see each buffer's true end (guard bytes would hide
an off-by-one write from them). The launch starts from the same restored state as
the worker's, and its outputs' digests go to the job's ``result_path``: a kernel that behaves
otherwise when profiled than when checked is caught (an output declared nondeterministic
leaves 0 there: it is not held to a digest). Exit 0 after a clean launch, 1 on a CUDA error.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(job_path: str) -> int:
    import cupy as cp

    from porter.gate.inputs import make_args
    from porter.gate.runner.launch import Launch, output_digests
    from porter.gate.runner.state import WorkerState

    job = json.loads(Path(job_path).read_text())
    placing = job.get("placing", "exact")
    if placing == "exact":
        cp.cuda.set_allocator(None)  # plain cudaMalloc per buffer: exact bounds for memcheck
    state = WorkerState(cp, fenced=placing != "exact", folder=Path(job_path).parent)
    spec = state.spec(job["spec_path"], job.get("launch"), job.get("entry"))
    sizes = {k: int(v) for k, v in job["sizes"].items()}
    seed = int(job["seed"])
    module = state.module(Path(job["cubin_path"]).read_bytes())
    launch = Launch(state, spec, sizes, make_args(spec, sizes, seed), seed, placing)
    try:
        launch.reset()
        launch.run(module)
        cp.cuda.Device().synchronize()
        digests = output_digests(state, launch)
    except Exception as err:  # a CUDA error: the tool wrapping us reports the details
        print(f"porter launch_once: {type(err).__name__}: {err}", file=sys.stderr)
        return 1
    if job.get("result_path"):  # what the launch left: the gate holds it to the verified launch
        Path(job["result_path"]).write_text(json.dumps({"digests": digests}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
