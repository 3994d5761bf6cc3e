"""``porter profile``: the hot loop under Nsight Compute, summarised into the spec's [profile].

The agent's prompt carries these facts (duration, achieved FLOP/s and bytes/s against the
roofline, registers, occupancy, the top stall reasons), so a port starts from where the source
kernel spends its time. An existing ``ncu --csv --page details`` export can be imported instead.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import tempfile
from pathlib import Path

from porter.errors import InputError
from porter.gate.nsight import LaunchJob, NcuRun, parse_details_csv, run_ncu

PROFILE_SECTIONS = ("SpeedOfLight", "Occupancy", "LaunchStats", "WarpStateStats")
STALL_METRICS = ("regex:smsp__average_warps_issue_stalled_.*_per_issue_active\\.ratio",)
_STALL = re.compile(r"smsp__average_warps_issue_stalled_(?P<reason>.+)_per_issue_active\.ratio")
_TIME_UNITS = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3, "second": 1e6, "s": 1e6}


def summarise(metrics: dict[str, tuple[str, float | str]], *, flops: float | None, nbytes: float | None,
              peak_tflops: float, peak_tbps: float) -> dict[str, object]:
    """Profile facts from ncu's details page: pure, so recorded exports are testable anywhere."""
    facts: dict[str, object] = {}
    duration = metrics.get("Duration")
    if duration and isinstance(duration[1], float) and duration[0] in _TIME_UNITS:
        time_us = duration[1] * _TIME_UNITS[duration[0]]
        facts["time_us"] = round(time_us, 3)
        seconds = time_us / 1e6
        if flops:
            facts["tflops"] = round(flops / seconds / 1e12, 2)
            facts["compute_roofline"] = round(flops / seconds / 1e12 / peak_tflops, 3)
        if nbytes:
            facts["tbps"] = round(nbytes / seconds / 1e12, 3)
            facts["memory_roofline"] = round(nbytes / seconds / 1e12 / peak_tbps, 3)
    for key, name in (("registers", "Registers Per Thread"), ("achieved_occupancy_pct", "Achieved Occupancy"),
                      ("theoretical_occupancy_pct", "Theoretical Occupancy"),
                      ("sm_throughput_pct", "Compute (SM) Throughput"), ("dram_throughput_pct", "DRAM Throughput")):
        value = metrics.get(name)
        if value and isinstance(value[1], float):
            facts[key] = int(value[1]) if key == "registers" else round(value[1], 1)
    stalls = sorted(((m.group("reason"), v[1]) for name, v in metrics.items()
                     if (m := _STALL.fullmatch(name)) and isinstance(v[1], float) and v[1] > 0),
                    key=lambda kv: kv[1], reverse=True)
    total = sum(v for _, v in stalls)
    if total:
        facts["top_stalls"] = [f"{reason} {100 * v / total:.0f}%" for reason, v in stalls[:3]]
    return facts


def profile_kernel(job: LaunchJob) -> NcuRun:
    return run_ncu(job, metrics=STALL_METRICS, sections=PROFILE_SECTIONS)


def import_details(path: Path) -> dict[str, tuple[str, float | str]]:
    try:
        metrics = parse_details_csv(path.read_text(errors="replace"))
    except OSError as err:
        raise InputError(f"{path}: cannot read: {err.strerror}") from err
    if not metrics:
        raise InputError(f"{path}: not an `ncu --csv --page details` export (no Metric Name/Value columns)")
    return metrics


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'


def replace_profile_table(text: str, facts: dict[str, object]) -> str:
    """The spec text with its [profile] table replaced (or appended); other lines untouched."""
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    skipping = False
    for line in lines:
        header = line.strip()
        if header.startswith("[") and not header.startswith("[["):
            skipping = header.split("#")[0].strip() == "[profile]"
        elif header.startswith("[["):
            skipping = False
        if not skipping:
            out.append(line)
    body = "".join(out).rstrip("\n") + "\n\n[profile]\n"
    body += "".join(f"{key} = {_toml_value(value)}\n" for key, value in facts.items())
    return body


def write_profile(spec_path: Path, facts: dict[str, object]) -> None:
    """Rewrite the spec's [profile] table atomically, after checking the result still loads."""
    from porter.gate.spec import load_spec

    new_text = replace_profile_table(spec_path.read_text(), facts)
    fd, tmp = tempfile.mkstemp(prefix=".porter-", suffix=".toml", dir=spec_path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(new_text)
        load_spec(Path(tmp))  # never leave the user a spec that does not load
        os.replace(tmp, spec_path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def stamp(gpu: str, tool: str) -> dict[str, object]:
    return {"gpu": gpu, "source": f"{tool}, {dt.date.today().isoformat()}"}
