"""Record raw ncu and compute-sanitizer outputs on a GPU machine, as fixtures for porter's parsers.

    PYTHONPATH=$PWD python3 tools/capture_profiler_outputs.py OUTDIR

Writes ncu source/details CSV pages and sanitizer logs for small kernels from tests/data, so the
CPU tests can hold the parsers against what the tools really print.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from porter.gate.nsight import LaunchJob, _child_env, _launch_command, find_tool  # noqa: E402
from porter.gate.spec import load_spec  # noqa: E402
from porter.ptx import read_ptx  # noqa: E402
from porter.ptx.toolchain import find_toolchain  # noqa: E402


def job_for(ptx: Path, spec_dir: Path, arch: str) -> LaunchJob:
    spec = load_spec(spec_dir / "porter.toml")
    res = find_toolchain().assemble(read_ptx(ptx).text, arch)
    assert res.ok, res.log
    return LaunchJob(res.cubin, spec.entry, spec_dir / "porter.toml", spec.size_sets()[0], 0)


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    ncu, san = find_tool("ncu"), find_tool("compute-sanitizer")
    data = ROOT / "tests" / "data"
    runs = {
        "wgmma": (data / "native" / "wgmma.ptx", data / "native", "sm_90a"),
        "wgmma_never": (data / "native" / "wgmma_never.ptx", data / "native", "sm_90a"),
        "vector_add": (ROOT / "examples" / "vector_add" / "kernel.ptx", ROOT / "examples" / "vector_add", "sm_90"),
    }
    for name, (ptx, spec_dir, arch) in runs.items():
        job = job_for(ptx, spec_dir, arch)
        with tempfile.TemporaryDirectory() as tmp:
            jp = job.write(Path(tmp))
            rep = Path(tmp) / "r"
            cmd = [str(ncu), "--clock-control", "none", "--target-processes", "all", "-k", f"regex:^{job.entry}$",
                   "-c", "1", "-f", "-o", str(rep), "--section", "SourceCounters", "--section", "SpeedOfLight",
                   "--section", "Occupancy", "--section", "LaunchStats", "--section", "WarpStateStats",
                   "--metrics", "sm__inst_executed_pipe_tensor_op_gmma.sum,sm__inst_executed_pipe_tensor_op_hmma.sum,"
                   "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\\.ratio",
                   *_launch_command(jp)]
            r = subprocess.run(cmd, capture_output=True, text=True, env=_child_env())
            (out / f"ncu_{name}_run.txt").write_text(" ".join(cmd) + "\n" + r.stdout + r.stderr)
            for page in ("source", "details"):
                extra = ["--print-source", "sass"] if page == "source" else []
                r = subprocess.run([str(ncu), "-i", str(rep) + ".ncu-rep", "--page", page, *extra, "--csv"],
                                   capture_output=True, text=True)
                (out / f"ncu_{name}_{page}.csv").write_text(r.stdout + r.stderr)
    broken = data / "broken"
    for name, tool in (("oob", "memcheck"), ("smem_race", "racecheck"), ("reads_unwritten", "initcheck"),
                       ("vector_add_ok", "synccheck")):
        ptx = ROOT / "examples" / "vector_add" / "kernel.ptx" if name == "vector_add_ok" else broken / f"{name}.ptx"
        job = job_for(ptx, ROOT / "examples" / "vector_add", "sm_90")
        with tempfile.TemporaryDirectory() as tmp:
            jp = job.write(Path(tmp))
            r = subprocess.run([str(san), "--tool", tool, "--print-limit", "20", "--target-processes", "all",
                                *_launch_command(jp)], capture_output=True, text=True, env=_child_env())
            (out / f"sanitizer_{name}_{tool}.txt").write_text(r.stdout + r.stderr)
    print("captured into", out)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
