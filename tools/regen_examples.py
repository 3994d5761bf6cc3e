#!/usr/bin/env python3
"""Regenerate (or check) the PTX of every example under ``examples/``.

Every ``*.cu`` file under ``examples/`` that carries a directive line near its top::

    // porter-regen: arch=sm_80 ptxas=sm_80,sm_90,sm_90a reject=sm_100a out=kernel.ptx

is compiled with ``nvcc -ptx -arch=<arch> -O3`` (no ``-lineinfo``, so the PTX has no ``.loc``
noise) into ``<out>`` beside the source (default: the source's stem + ``.ptx``). nvcc runs in the
source's folder on the bare file name, so no path leaks into the PTX. Keys:

- ``arch``    the ``-arch`` given to nvcc (required), e.g. ``sm_80``, ``sm_90``, ``sm_90a``.
- ``ptxas``   targets that ``--ptxas`` assembles the PTX for (``ptxas -v -arch=<t>``); each must pass.
- ``reject``  targets for which the PTX must *fail* to assemble, checked two ways: as is (the
              ``.target`` line untouched) and with the ``.target`` line rewritten to that target,
              which is what a porter retarget does and what yields the per-instruction
              "not supported on .target" diagnostics.
- ``out``     the output file name, relative to the source's folder.

Usage (from the repository root)::

    python tools/regen_examples.py               # rewrite every example's PTX
    python tools/regen_examples.py --check       # exit 1 if a committed PTX differs
    python tools/regen_examples.py --check --ignore-toolchain   # ... ignoring the nvcc banner and .version
    python tools/regen_examples.py --ptxas       # also assemble for the ptxas= / reject= targets
    python tools/regen_examples.py --only gemm   # only sources whose path contains "gemm"

nvcc is looked up in this order: ``--nvcc``, ``$PORTER_CUDA_HOME/bin``, ``$CUDA_HOME/bin``,
``PATH``, then the pip wheel ``nvidia-cuda-nvcc`` (``site-packages/nvidia/cu13/bin``). ptxas is
taken from the same folder as nvcc, else the same search.

nvcc writes the ``.version`` of its own release (13.0 writes 9.0, 13.5 writes 9.5), which older
ptxas releases refuse outright (ptxas 12.9 stops at 8.8). So every PTX written here carries the
lowest ``.version`` its instructions allow instead: the most of its ``.target``'s minimum and its
instruction families' (``profiles/``, :func:`porter.ptx.arch.isa_floor`), which ptxas 12.9 and 13.x
both accept (``tests/test_cuda_releases.py`` assembles every example with each ptxas it finds).
``--lower FILE...`` does the same to PTX files that have no ``.cu`` source here (hand-written
kernels, test data) and writes nothing else.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import site
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from porter.ptx import parse_ptx  # noqa: E402
from porter.ptx import retarget as retarget_ptx  # noqa: E402
from porter.ptx.arch import isa_floor  # noqa: E402

EXAMPLES = REPO / "examples"
DIRECTIVE = re.compile(r"^\s*//\s*porter-regen:\s*(?P<body>.+?)\s*$")
HEADER_SCAN_LINES = 20
NVCC_FLAGS = ["-ptx", "-O3"]
# Lines that depend only on the toolchain, not on the kernel: nvcc's banner and .version.
TOOLCHAIN_LINE = re.compile(r"^(//.*|\.version\s+\S+)\s*$")


@dataclass(frozen=True)
class Build:
    """One ``.cu`` -> ``.ptx`` job, read from a source's ``porter-regen`` directive."""

    source: Path
    arch: str
    out: Path
    ptxas: tuple[str, ...] = field(default_factory=tuple)
    reject: tuple[str, ...] = field(default_factory=tuple)

    @property
    def rel_out(self) -> str:
        return str(self.out.relative_to(REPO))


def parse_directive(source: Path) -> Build | None:
    """The build described by ``source``'s directive, or None when it has none."""
    with source.open(encoding="utf-8") as fh:
        head = [next(fh, "") for _ in range(HEADER_SCAN_LINES)]
    for line in head:
        m = DIRECTIVE.match(line)
        if not m:
            continue
        keys: dict[str, str] = {}
        for token in m.group("body").split():
            if "=" not in token:
                raise SystemExit(f"{source}: porter-regen: expected key=value, got {token!r}")
            key, value = token.split("=", 1)
            if key not in {"arch", "ptxas", "reject", "out"}:
                raise SystemExit(f"{source}: porter-regen: unknown key {key!r}")
            keys[key] = value
        if "arch" not in keys:
            raise SystemExit(f"{source}: porter-regen: missing arch=")
        out = source.parent / keys.get("out", source.stem + ".ptx")

        def targets(key: str, keys: dict[str, str] = keys) -> tuple[str, ...]:
            return tuple(t for t in keys.get(key, "").split(",") if t)

        return Build(source, keys["arch"], out, targets("ptxas"), targets("reject"))
    return None


def discover(root: Path, only: str | None) -> list[Build]:
    builds = []
    for source in sorted(root.rglob("*.cu")):
        if only and only not in str(source.relative_to(REPO)):
            continue
        build = parse_directive(source)
        if build is None:
            print(f"skip  {source.relative_to(REPO)} (no porter-regen directive)")
            continue
        builds.append(build)
    return builds


def _pip_cuda_bins() -> list[Path]:
    dirs = [*site.getsitepackages(), site.getusersitepackages(), *sys.path]
    return [Path(d) / "nvidia" / "cu13" / "bin" for d in dirs if d]


def find_tool(name: str, explicit: str | None = None, beside: Path | None = None) -> Path:
    """Locate ``name`` (nvcc or ptxas) in the documented order."""
    candidates: list[Path] = []
    if explicit:
        candidates.append(Path(explicit))
    if beside is not None:
        candidates.append(beside.parent / name)
    for var in ("PORTER_CUDA_HOME", "CUDA_HOME"):
        home = os.environ.get(var)
        if home:
            candidates.append(Path(home) / "bin" / name)
    on_path = shutil.which(name)
    if on_path:
        candidates.append(Path(on_path))
    candidates.extend(d / name for d in _pip_cuda_bins())
    for cand in candidates:
        if cand.is_file() and os.access(cand, os.X_OK):
            return cand.absolute()  # nvcc runs in each source's folder
    raise SystemExit(
        f"{name} not found (tried --nvcc, PORTER_CUDA_HOME, CUDA_HOME, PATH, pip nvidia/cu13/bin)"
    )


def tool_version(tool: Path) -> str:
    out = subprocess.run([str(tool), "--version"], capture_output=True, text=True, check=False).stdout
    m = re.search(r"release (\S+), (V\S+)", out)
    return f"{m.group(1).rstrip(',')} ({m.group(2)})" if m else out.strip().splitlines()[-1]


# A kernel whose launch (or TMA descriptor params, or sequence of kernels) differ from its
# spec's declares them in its source; nvcc drops comments, so the directives are carried to the
# top of the PTX, where porter reads them.
LAUNCH_LINE = re.compile(r"^[ \t]*//[ \t]*porter-(?:launch|param|kernel):.*$", re.MULTILINE)


def compile_ptx(nvcc: Path, build: Build, dest: Path) -> str:
    cmd = [str(nvcc), *NVCC_FLAGS, f"-arch={build.arch}", "-o", str(dest), build.source.name]
    proc = subprocess.run(cmd, cwd=build.source.parent, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"nvcc failed for {build.source.relative_to(REPO)}:\n{proc.stderr}")
    launch = LAUNCH_LINE.findall(build.source.read_text(encoding="utf-8"))
    return lowest_version("".join(f"{line.strip()}\n" for line in launch) + dest.read_text(encoding="utf-8"))


def lowest_version(text: str, filename: str = "<ptx>") -> str:
    """``text`` with the lowest ``.version`` its ``.target`` and instructions allow (never raised)."""
    module = parse_ptx(text, filename=filename)
    floor = isa_floor(module)
    if floor is None or tuple(map(int, floor.version.split("."))) >= tuple(map(int, module.version.split("."))):
        return text
    return retarget_ptx(text, module.arch, version=floor.version, filename=filename)


def strip_toolchain(text: str) -> list[str]:
    return [line for line in text.splitlines() if not TOOLCHAIN_LINE.match(line)]


def ptx_version(text: str) -> str | None:
    m = re.search(r"^\.version\s+(\S+)", text, re.MULTILINE)
    return m.group(1) if m else None


def ptxas_summary(stderr: str) -> str:
    """``Used N registers, ... smem`` lines of ``ptxas -v``, one per entry."""
    lines = []
    for line in stderr.splitlines():
        m = re.search(r"Used (\d+) registers.*", line)
        if m:
            lines.append(m.group(0))
        m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and (m.group(1) != "0" or m.group(2) != "0"):
            lines.append(m.group(0))
    return "; ".join(lines) or "(no summary)"


def run_ptxas(ptxas: Path, ptx: str, target: str, retarget: bool) -> subprocess.CompletedProcess[str]:
    if retarget:
        ptx = re.sub(r"^\.target\s+\S+", f".target {target}", ptx, count=1, flags=re.MULTILINE)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "k.ptx"
        path.write_text(ptx, encoding="utf-8")
        return subprocess.run(
            [str(ptxas), "-v", f"-arch={target}", str(path), "-o", str(Path(tmp) / "k.cubin")],
            capture_output=True,
            text=True,
            check=False,
        )


def check_ptxas(ptxas: Path, build: Build, ptx: str) -> bool:
    ok = True
    for target in build.ptxas:
        proc = run_ptxas(ptxas, ptx, target, retarget=False)
        if proc.returncode == 0:
            print(f"  ptxas {target:8s} ok    {ptxas_summary(proc.stderr)}")
        else:
            ok = False
            print(f"  ptxas {target:8s} FAIL  {proc.stderr.strip()}")
    for target in build.reject:
        for retarget in (False, True):
            proc = run_ptxas(ptxas, ptx, target, retarget=retarget)
            how = f"(.target {target})" if retarget else "(as is)"
            first = next((ln for ln in proc.stderr.splitlines() if "error" in ln or "fatal" in ln), "")
            first = re.sub(r"^ptxas \S+, ", "", first)
            if proc.returncode != 0:
                print(f"  ptxas {target:8s} rejected {how}: {first.strip()}")
            else:
                ok = False
                print(f"  ptxas {target:8s} UNEXPECTEDLY ACCEPTED {how}")
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed PTX; write nothing")
    parser.add_argument(
        "--ignore-toolchain",
        action="store_true",
        help="with --check: ignore nvcc's banner comments and the .version line",
    )
    parser.add_argument(
        "--ptxas", action="store_true", help="assemble for the directive's ptxas=/reject= targets"
    )
    parser.add_argument("--nvcc", help="nvcc to use (default: PORTER_CUDA_HOME, CUDA_HOME, PATH, pip wheel)")
    parser.add_argument("--only", help="only sources whose repo-relative path contains this string")
    parser.add_argument("--examples", type=Path, default=EXAMPLES, help="root to scan (default: examples/)")
    parser.add_argument("--lower", type=Path, nargs="+", metavar="FILE",
                        help="only lower the .version of these PTX files to what their instructions allow")
    args = parser.parse_args(argv)
    if args.lower:
        for path in args.lower:
            old = path.read_text(encoding="utf-8")
            new = lowest_version(old, str(path))
            if new != old:
                path.write_text(new, encoding="utf-8")
            version = parse_ptx(new).version
            print(f"{'lowered' if new != old else 'same   '} {path} (.version {version})")
        return 0

    nvcc = find_tool("nvcc", args.nvcc)
    ptxas = find_tool("ptxas", beside=nvcc) if args.ptxas else None
    print(f"nvcc  {nvcc}  {tool_version(nvcc)}")
    if ptxas is not None:
        print(f"ptxas {ptxas}  {tool_version(ptxas)}")

    builds = discover(args.examples.resolve(), args.only)
    if not builds:
        print("no sources with a porter-regen directive found")
        return 1
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        for build in builds:
            fresh = compile_ptx(nvcc, build, Path(tmp) / build.out.name)
            label = f"{build.source.relative_to(REPO)} -> {build.rel_out} [{build.arch}]"
            if args.check:
                committed = build.out.read_text(encoding="utf-8") if build.out.exists() else None
                if committed == fresh:
                    print(f"same  {label}")
                elif committed is None:
                    failed = True
                    print(f"MISSING {label}")
                elif strip_toolchain(committed) == strip_toolchain(fresh):
                    note = (
                        f"toolchain only: committed .version {ptx_version(committed)}, "
                        f"this nvcc writes {ptx_version(fresh)}"
                    )
                    if args.ignore_toolchain:
                        print(f"same  {label} ({note})")
                    else:
                        failed = True
                        print(f"DIFF  {label} ({note}; --ignore-toolchain accepts this)")
                else:
                    failed = True
                    print(f"DIFF  {label} (kernel text differs: rerun without --check)")
            else:
                old = build.out.read_text(encoding="utf-8") if build.out.exists() else None
                if old != fresh:
                    build.out.write_text(fresh, encoding="utf-8")
                print(f"{'wrote' if old != fresh else 'same '} {label}")
            if ptxas is not None and not check_ptxas(ptxas, build, fresh):
                failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
