"""Golden outputs: ``porter record`` saves the source kernel's outputs for the sweep, so that a
candidate can later be checked on a machine of another generation, where the source may not run.

Inputs are not stored: they regenerate from the seeds (``porter.inputs``). A folder holds
``manifest.json`` (spec digest, entry, GPU, the cases) and one ``.npz`` of outputs per case.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from porter.errors import EnvironmentProblem, InputError
from porter.spec import Spec, declared_spec

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
    missing = [c["file"] for c in data.get("cases", []) if not (folder / c["file"]).is_file()]
    if missing:
        raise InputError(f"{folder}: golden outputs missing: {', '.join(missing[:3])}")
    return data


def record(source: Path, spec: Spec, out: Path, *, seeds: tuple[int, ...], runner: Any, cubin: bytes,
           device: str, force: bool = False) -> dict[str, Any]:
    """Run the source kernel on every size set and seed, and write the outputs to ``out``."""
    from porter.runner.client import WorkerFault

    if (out / MANIFEST).exists() and not force:
        raise InputError(f"{out}: already holds golden outputs (use --force to replace them)")
    if out.exists() and not out.is_dir():
        raise InputError(f"{out}: exists and is not a folder")
    declared, launch = declared_spec(spec, source.read_text(encoding="utf-8", errors="replace"), source=str(source))
    entry = declared.entry
    out.mkdir(parents=True, exist_ok=True)
    cases = []
    for index, sizes in enumerate(spec.size_sets()):
        for seed in seeds:
            try:
                reply = runner.call("outputs", 120.0, cubin=cubin, entry=entry, launch=launch,
                                    spec_path=str(spec.path), sizes=sizes, seed=seed)
            except WorkerFault as fault:
                raise EnvironmentProblem(f"the source kernel failed while recording: {fault}") from fault
            name = f"case{index:03d}-seed{seed}.npz"
            with open(out / name, "wb") as fh:
                np.savez_compressed(fh, **reply["outputs"])
            cases.append({"sizes": sizes, "seed": seed, "file": name})
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
