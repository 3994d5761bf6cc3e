"""Golden outputs: ``porter record`` saves the source kernel's outputs for the sweep, so that a
candidate can later be checked on a machine of another generation, where the source may not run.

Inputs are not stored: they regenerate from the seeds (``porter.gate.inputs``). A folder holds
``manifest.json`` (the spec's digest, entry, GPU, the cases with their sizes, seeds and value
cases) and one ``.npz`` of outputs per case. A golden folder answers only for the spec it was
recorded with: a check refuses a manifest whose spec digest differs, and one with no cases.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from porter.errors import EnvironmentProblem, InputError
from porter.gate.plan import check_plan, check_seeds
from porter.gate.spec import Spec, declared_spec

MANIFEST = "manifest.json"


def spec_digest(spec: Spec) -> str:
    return hashlib.sha256(spec.path.read_bytes()).hexdigest()[:16]


def load_golden(folder: Path) -> dict[str, Any]:
    manifest = folder / MANIFEST
    if not manifest.is_file():
        raise InputError(f"{folder}: not a golden folder (no {MANIFEST}; make one with `porter record`)")
    try:
        data = json.loads(manifest.read_text())
    except json.JSONDecodeError as err:
        raise InputError(f"{manifest}: not valid JSON ({err.msg} at line {err.lineno})") from err
    cases = data.get("cases")
    if not isinstance(cases, list) or not cases:
        raise InputError(f"{manifest}: holds no cases: nothing to compare with (record again with `porter record`)")
    for c in cases:
        if not (isinstance(c, dict) and isinstance(c.get("sizes"), dict) and isinstance(c.get("seed"), int)
                and isinstance(c.get("file"), str)):
            raise InputError(f"{manifest}: a case needs sizes, seed and file (got {c!r:.120})")
    missing = [c["file"] for c in cases if not (folder / c["file"]).is_file()]
    if missing:
        raise InputError(f"{folder}: golden outputs missing: {', '.join(missing[:3])}")
    return data


def check_golden(data: dict[str, Any], spec: Spec, folder: Path) -> None:
    """Refuse golden outputs recorded under another spec: their inputs and sizes are not this one's."""
    recorded = data.get("spec_sha256")
    if recorded != spec_digest(spec):
        raise InputError(f"{folder}: recorded with another spec ({spec.source} digest {spec_digest(spec)}, manifest "
                         f"{recorded or 'none'}): any change to the spec changes inputs or sizes, so record again")


def record(source: Path, spec: Spec, out: Path, *, seeds: tuple[int, ...] = (), runner: Any, cubin: bytes,
           device: str, force: bool = False) -> dict[str, Any]:
    """Run the source kernel on the plan a check would run (the sweep x seeds, the default sizes,
    the value cases; fresh seeds unless given), and write the outputs to ``out``."""
    from porter.gate.runner.client import WorkerFault

    if (out / MANIFEST).exists() and not force:
        raise InputError(f"{out}: already holds golden outputs (use --force to replace them)")
    if out.exists() and not out.is_dir():
        raise InputError(f"{out}: exists and is not a folder")
    declared, launch = declared_spec(spec, source.read_text(encoding="utf-8", errors="replace"), source=str(source))
    entry = declared.entry
    out.mkdir(parents=True, exist_ok=True)
    cases = []
    for index, case in enumerate(check_plan(spec, check_seeds(seeds), timed=[spec.default_sizes()])):
        try:
            reply = runner.call("outputs", 120.0, cubin=cubin, entry=entry, launch=launch,
                                spec_path=str(spec.path), sizes=case.sizes, seed=case.seed, values=case.values)
        except WorkerFault as fault:
            raise EnvironmentProblem(f"the source kernel failed while recording: {fault}") from fault
        name = f"case{index:03d}-seed{case.seed}{'-' + case.values if case.values else ''}.npz"
        with open(out / name, "wb") as fh:
            np.savez_compressed(fh, **reply["outputs"])
        cases.append({"sizes": case.sizes, "seed": case.seed, "values": case.values, "file": name})
    manifest = {
        "source": str(source),
        "source_sha256": hashlib.sha256(source.read_bytes()).hexdigest(),
        "entry": entry,
        "spec_sha256": spec_digest(spec),
        "gpu": device,
        "recorded": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "cases": cases,
    }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest
