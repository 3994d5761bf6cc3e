"""Nsight Compute and compute-sanitizer around one launch of a kernel.

Both tools wrap a whole process, so porter runs ``python -m porter.gate.runner.launch_once JOB`` under
them (see that module). Parsing is kept in pure functions (``parse_source_csv``,
``parse_details_csv``, ``parse_sanitizer``) so recorded outputs can be tested on any machine.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from porter.errors import EnvironmentProblem
from porter.gate.runner import sealed
from porter.gate.verdict import SanitizerFinding, SanitizerReport


def find_tool(name: str) -> Path | None:
    """ncu / compute-sanitizer: porter's CUDA search folders first, then PATH and the usual installs."""
    from porter.ptx.toolchain import search_dirs

    for folder in search_dirs():
        if (folder / name).is_file():
            return folder / name
    found = shutil.which(name)
    if found:
        return Path(found)
    for pattern in (f"/usr/local/cuda/bin/{name}", f"/opt/nvidia/nsight-compute/*/{name}"):
        hits = sorted(Path("/").glob(pattern.lstrip("/")))
        if hits:
            return hits[-1]
    return None


@dataclass(frozen=True)
class LaunchJob:
    """One launch for an external tool: written to a JSON file that launch_once reads."""

    cubin: bytes
    entry: str
    spec_path: Path
    sizes: dict[str, int]
    seed: int = 0
    launch: dict[str, Any] | None = None  # the candidate's own launch directive, if it declares one
    entries: tuple[str, ...] = ()  # a hot loop of several kernels: every entry it launches
    launches: int = 1  # kernel launches in one run of the hot loop (ncu profiles them all)
    device: int = 0  # the CUDA device index to launch on (the checked worker's GPU)

    def write(self, folder: Path, placing: str) -> Path:
        """The job file for launch_once, its buffers placed ``placing`` (see porter.gate.layout)."""
        cubin_path = folder / "kernel.cubin"
        cubin_path.write_bytes(self.cubin)
        job = folder / "job.json"
        job.write_text(json.dumps({"cubin_path": str(cubin_path), "entry": self.entry,
                                   "spec_path": os.path.abspath(self.spec_path), "sizes": self.sizes, "seed": self.seed,
                                   "launch": self.launch, "result_path": str(folder / "result.json"),
                                   "placing": placing}))
        return job


def _launch_digests(folder: Path) -> tuple[int, ...]:
    """The output digests launch_once left in ``folder`` (none when the launch failed)."""
    try:
        return tuple(int(d) for d in json.loads((folder / "result.json").read_text())["digests"])
    except (OSError, ValueError, KeyError, TypeError):
        return ()


def launch_failure(output: str) -> str:
    """The error launch_once printed when its launch did not complete, from the tool's output
    ("" when it printed none: the process died without a word)."""
    lines = [ln.strip() for ln in output.splitlines() if "porter launch_once:" in ln]
    return lines[-1].split("porter launch_once:", 1)[1].strip()[:300] if lines else ""


def _launch_command(job_path: Path) -> list[str]:
    return [sys.executable, "-m", "porter.gate.runner.launch_once", str(job_path)]


def _run_launch(command: list[str], timeout_s: float, device: int) -> subprocess.CompletedProcess[str]:
    """A tool's run of launch_once: from an empty folder, since ``python -m`` imports from the folder
    it starts in first (a pull request's checkout, in porter ci), every path in the job absolute."""
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, env=_child_env(device),
                          cwd=sealed.empty_folder())


def _child_env(device: int = 0) -> dict[str, str]:
    """This process's environment for a tool's launch, with porter importable and only GPU ``device``
    (an index among the GPUs this process sees) visible, as its device 0. It carries this run's
    digest key (:mod:`porter.gate.runner.digestkey`), as the GPU workers' environment does: the
    launch's digests are held to theirs; and, as theirs, no provider key and no unsafe import path
    (:mod:`porter.gate.runner.sealed`: the launch runs in an empty folder, :func:`_run_launch`)."""
    from porter.gate.runner.digestkey import digest_key

    digest_key()  # in os.environ from here on, had no worker been started yet
    env = sealed.child_env()
    root = str(Path(__file__).resolve().parents[2])  # the folder holding the porter package
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    if device:
        visible = [v for v in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
        env["CUDA_VISIBLE_DEVICES"] = visible[device] if device < len(visible) else str(device)
    return env


# -- Nsight Compute -------------------------------------------------------------------------------

def _number(text: str) -> float | None:
    cleaned = text.replace(",", "").strip()
    try:
        return float(cleaned)
    except ValueError:
        return None


def _csv_rows(text: str) -> list[list[str]]:
    """The CSV part of ncu's output (it prints its own ==PROF== lines around it)."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    return list(csv.reader(io.StringIO("\n".join(lines))))


@dataclass(frozen=True)
class SourceListing:
    """One kernel's listing on ncu's source page: executed warp-level instructions per full SASS opcode."""

    kernel: str
    counts: dict[str, int]


def parse_source_listings(text: str) -> list[SourceListing]:
    """The listings of ``--page source --print-source sass --csv``, in the order ncu prints them
    (each starts with a ``"Kernel Name"`` row, then a header naming ``Source`` and ``Instructions Executed``)."""
    listings: list[SourceListing] = []
    kernel, columns, counts = "", None, Counter[str]()

    def close() -> None:
        if columns is not None:
            listings.append(SourceListing(kernel, dict(counts)))

    for row in _csv_rows(text):
        if row and row[0] == "Kernel Name":
            close()
            kernel, columns, counts = (row[1] if len(row) > 1 else ""), None, Counter()
        elif "Source" in row and "Instructions Executed" in row:
            if columns is not None:  # a second header without a name row: a listing of its own
                close()
                counts = Counter()
            columns = (row.index("Source"), row.index("Instructions Executed"))
        elif columns is not None and len(row) > max(columns):
            opcode, value = sass_opcode(row[columns[0]]), _number(row[columns[1]])
            if opcode and value:
                counts[opcode] += int(value)
    close()
    return listings


def parse_source_csv(text: str) -> dict[str, int]:
    """Executed warp-level instructions per full SASS opcode, summed over the page's listings
    (a report of one launch: see ``executed_per_launch`` for several)."""
    total: Counter[str] = Counter()
    for listing in parse_source_listings(text):
        total.update(listing.counts)
    return dict(total)


def profiled_kernels(details_text: str) -> list[str]:
    """The kernel name of each result in a report, in order, from its ``--page details --csv``."""
    rows = _csv_rows(details_text)
    if not rows or "ID" not in rows[0] or "Kernel Name" not in rows[0]:
        return []
    id_i, name_i = rows[0].index("ID"), rows[0].index("Kernel Name")
    names: dict[str, str] = {}
    for row in rows[1:]:
        if len(row) > max(id_i, name_i):
            names.setdefault(row[id_i], row[name_i])
    return list(names.values())


class SourcePageMismatch(ValueError):
    """ncu's source page cannot be attributed to the report's launches, one listing each."""


def executed_per_launch(listings: list[SourceListing], kernels: list[str]) -> dict[str, int]:
    """Executed instructions per full SASS opcode over the profiled launches, each counted once.

    Nsight Compute 2025.3 (CUDA 13.0, on the H200) prints every listing twice on the source page of a
    report holding several launches (3 launches, 6 listings: A A B B C C, the copies identical);
    summing the page counted a three-kernel hot loop's tensor-core work twice, and so a port
    could pass the native share with half of it on the old instructions. Here a kernel's listings
    must be its launches times some k, in runs of k identical copies; one of each run counts.
    Anything else is a mismatch (the evidence is then not measured, not guessed).
    """
    if not kernels:
        raise SourcePageMismatch("the details page names no profiled launch")
    total: Counter[str] = Counter()
    for name in dict.fromkeys(kernels):
        launches = kernels.count(name)
        own = [listing.counts for listing in listings if listing.kernel == name]
        copies, extra = divmod(len(own), launches)
        if not copies or extra:
            raise SourcePageMismatch(f"{len(own)} source listings for {launches} launch(es) of {name}")
        runs = [own[i * copies:(i + 1) * copies] for i in range(launches)]
        if any(run.count(run[0]) != copies for run in runs):
            raise SourcePageMismatch(f"the {len(own)} source listings of {name} are not {copies} copies of each "
                                     f"of its {launches} launch(es)")
        for run in runs:
            total.update(run[0])
    strangers = sorted({listing.kernel for listing in listings} - set(kernels))
    if strangers:
        raise SourcePageMismatch(f"source listings of kernels the report did not profile: {', '.join(strangers)}")
    return dict(total)


def sass_opcode(instruction: str) -> str:
    """``@!P0 HGMMA.64x16x16.F32.BF16 R24, ...`` -> ``HGMMA.64x16x16.F32.BF16``."""
    tokens = instruction.strip().rstrip(";").split()
    if tokens and tokens[0].startswith("@"):
        tokens = tokens[1:]
    return tokens[0] if tokens else ""


def opcode_bases(counts: dict[str, int]) -> dict[str, int]:
    bases: Counter[str] = Counter()
    for opcode, n in counts.items():
        bases[opcode.split(".", 1)[0]] += n
    return dict(bases)


def parse_details_csv(text: str, *, summed: bool = False) -> dict[str, tuple[str, float | str]]:
    """Metric name -> (unit, value) from ``--page details --csv``: the first launch's, or with
    ``summed`` the counters (``*.sum`` metrics) added over every launch in the report (a hot loop's)."""
    rows = _csv_rows(text)
    if not rows:
        return {}
    header = rows[0]
    try:
        name_i, unit_i, value_i = header.index("Metric Name"), header.index("Metric Unit"), header.index("Metric Value")
    except ValueError:
        return {}
    id_i = header.index("ID") if "ID" in header else None
    first_id = rows[1][id_i] if id_i is not None and len(rows) > 1 else None
    metrics: dict[str, tuple[str, float | str]] = {}
    for row in rows[1:]:
        if len(row) <= value_i:
            continue
        name, number = row[name_i], _number(row[value_i])
        if id_i is not None and row[id_i] != first_id:
            current = metrics.get(name)
            if summed and name.endswith(".sum") and number is not None and current and isinstance(current[1], float):
                metrics[name] = (current[0], current[1] + number)
            continue
        metrics.setdefault(name, (row[unit_i], number if number is not None else row[value_i]))
    return metrics


@dataclass(frozen=True)
class NcuRun:
    ok: bool
    reason: str  # why not, when not ok; when ok, the launch's own error if it left no digests
    executed: dict[str, int] = field(default_factory=dict)  # full SASS opcode -> warp-level executed
    metrics: dict[str, tuple[str, float | str]] = field(default_factory=dict)
    wall_s: float = 0.0
    command: str = ""
    digests: tuple[int, ...] = ()  # of the profiled launch's outputs


def run_ncu(job: LaunchJob, *, metrics: tuple[str, ...] = (), sections: tuple[str, ...] = ("SourceCounters",),
            timeout_s: float = 600.0) -> NcuRun:
    """Profile the job's launches (one, or every kernel of a hot loop); read back per-opcode
    executed counts (summed over the launches, each counted once) and the details page (its
    counters summed over the launches, the rest of the first)."""
    ncu = find_tool("ncu")
    if ncu is None:
        return NcuRun(False, "ncu (Nsight Compute) not found")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="porter-ncu-") as tmp:
        folder = Path(tmp)
        # As a program's tensors lie (and a timing run's later sets): native where it will run.
        job_path = job.write(folder, "plain")
        report = folder / "report"
        command = [str(ncu), "--clock-control", "none", "--target-processes", "all",
                   "-k", f"regex:^({'|'.join(re.escape(e) for e in job.entries or (job.entry,))})$",
                   "-c", str(max(1, job.launches)), "-f", "-o", str(report)]
        for section in sections:
            command += ["--section", section]
        if metrics:
            command += ["--metrics", ",".join(metrics)]
        command += _launch_command(job_path)
        try:
            out = _run_launch(command, timeout_s, job.device)
        except subprocess.TimeoutExpired:
            return NcuRun(False, f"ncu did not finish in {timeout_s:.0f} s")
        rep = report.with_suffix(".ncu-rep")
        if not rep.is_file():
            text = (out.stdout + out.stderr).strip().splitlines()
            errors = [ln for ln in text if "ERROR" in ln or "error" in ln.lower()]
            return NcuRun(False, "ncu wrote no report: " + ((errors or text or ["no output"])[-1])[:300],
                          command=" ".join(command))
        source = subprocess.run([str(ncu), "-i", str(rep), "--page", "source", "--print-source", "sass", "--csv"],
                                capture_output=True, text=True, timeout=timeout_s)
        details = subprocess.run([str(ncu), "-i", str(rep), "--page", "details", "--csv"],
                                 capture_output=True, text=True, timeout=timeout_s)
        digests = _launch_digests(folder)
    try:
        executed = executed_per_launch(parse_source_listings(source.stdout), profiled_kernels(details.stdout))
    except SourcePageMismatch as err:
        return NcuRun(False, f"ncu's source page: {err}", command=" ".join(command))
    return NcuRun(True, "" if digests else launch_failure(out.stdout + out.stderr), executed,
                  parse_details_csv(details.stdout, summed=True), time.perf_counter() - start, " ".join(command),
                  digests)


# -- compute-sanitizer ----------------------------------------------------------------------------

SANITIZER_TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")

_LOCATION = re.compile(r"at (?P<func>[\w$.]+)\+0x(?P<offset>[0-9a-fA-F]+)")
_SUMMARY = re.compile(r"ERROR SUMMARY: (?P<n>\d+) error")
_HAZARDS = re.compile(r"RACECHECK SUMMARY: (?P<n>\d+) hazard")


def parse_sanitizer(tool: str, text: str) -> tuple[int, tuple[SanitizerFinding, ...]]:
    """Error count and findings from compute-sanitizer's ``=========``-prefixed output.

    A finding starts on a line with one space after the prefix (``========= Invalid __global__
    write ...``); its indented lines (``=========     at k+0x1b0``, ``by thread ...``) follow.
    """
    blocks: list[list[str]] = []
    for line in text.splitlines():
        if not line.startswith("========="):
            continue
        rest = line[len("========="):]
        stripped = rest.strip()
        if not stripped or stripped.startswith("COMPUTE-SANITIZER") or _SUMMARY.search(stripped) \
                or _HAZARDS.search(stripped):
            continue
        if rest.startswith(" ") and not rest.startswith("  "):
            blocks.append([stripped])
        elif blocks:
            blocks[-1].append(stripped)
    findings = []
    for head, *lines in blocks:
        if head.startswith(("Program hit", "Target application returned", "Saved host backtrace")):
            continue
        where = next((m for m in map(_LOCATION.search, [head, *lines]) if m), None)
        detail = [ln for ln in lines if not ln.startswith(("Saved host backtrace", "Host Frame", "#"))]
        findings.append(SanitizerFinding(
            tool=tool, message=head.removeprefix("Error: ").strip(),
            function=where.group("func") if where else "",
            offset=int(where.group("offset"), 16) if where else None,
            detail="; ".join(detail)[:400],
        ))
    summary = _SUMMARY.search(text)
    hazards = _HAZARDS.search(text)
    count = int(summary.group("n")) if summary else len(findings)
    if hazards:
        count = max(count, int(hazards.group("n")))
    return count, tuple(findings)


def run_sanitizer(job: LaunchJob, tool: str, *, timeout_s: float = 600.0) -> SanitizerReport:
    sanitizer = find_tool("compute-sanitizer")
    if sanitizer is None:
        return SanitizerReport(tool, False, 0, (), "compute-sanitizer not found")
    if tool not in SANITIZER_TOOLS:
        raise EnvironmentProblem(f"unknown sanitizer tool {tool!r}")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="porter-sanitizer-") as tmp:
        job_path = job.write(Path(tmp), "exact")  # the sanitizer sees each buffer's true bounds
        command = [str(sanitizer), "--tool", tool, "--print-limit", "20", "--target-processes", "all"]
        if tool == "racecheck":
            command += ["--racecheck-report", "hazard"]
        try:
            out = _run_launch(command + _launch_command(job_path), timeout_s, job.device)
        except subprocess.TimeoutExpired:
            return SanitizerReport(tool, False, 0, (), f"{tool} did not finish in {timeout_s:.0f} s")
        digests = _launch_digests(Path(tmp))
    text = out.stdout + out.stderr
    if "ERROR SUMMARY" not in text and "RACECHECK SUMMARY" not in text:
        tail = text.strip().splitlines()[-1:] or ["no output"]
        return SanitizerReport(tool, False, 0, (), f"{tool} did not report: {tail[0][:300]}",
                               time.perf_counter() - start)
    errors, findings = parse_sanitizer(tool, text)
    return SanitizerReport(tool, True, errors, findings, "" if digests else launch_failure(text),
                           time.perf_counter() - start, digests=digests)
