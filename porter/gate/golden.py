"""Golden outputs: ``porter record`` saves the source kernel's outputs for the plan a check runs,
so that a candidate can later be checked on a machine of another generation, where the source may
not run.

Inputs are not stored: they regenerate from the seeds (``porter.gate.inputs``). A folder holds
``manifest.json`` and one ``.npz`` of outputs per case. The manifest (:class:`Manifest`, read once
and checked whole by :func:`load_golden`) carries the spec's digest, the version of the way inputs
follow from seeds (:data:`~porter.gate.inputs.INPUTS_VERSION`), the source kernel's hash,
the cases with their sizes, seeds and value cases, a **reserve** of further cases at size sets
drawn from seeds no output shows, and a digest of the whole case list. A check refuses a folder
(:func:`check_golden`) recorded under another spec, one whose cases do not cover the plan the spec
implies for the recorded seeds (a manifest cut down to a subset), one whose digest does not match
its cases, and one recorded from the candidate itself; it runs the recorded plan and a sample of
the reserve drawn from its own fresh seed. A golden plan is replayable (its seeds are fixed): the
Verdict says so.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from porter.errors import EnvironmentProblem, InputError
from porter.gate.inputs import INPUTS_VERSION, fresh_seed, stream
from porter.gate.plan import Case, plan_cases, plan_seeds, unannounced_sizes
from porter.gate.spec import Spec, declared_spec

MANIFEST = "manifest.json"
RESERVE = 8  # unannounced size sets recorded beyond the plan, from seeds of their own
SAMPLED = 2  # of which each check runs this many, drawn from its fresh seed
REPLAYABLE = ("checked against golden outputs: the recorded seeds and size sets are fixed, so this plan is "
              "replayable (a kernel may have been tuned to it); only the reserve cases it sampled were unseen")


def spec_digest(spec: Spec) -> str:
    return hashlib.sha256(spec.path.read_bytes()).hexdigest()[:16]


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass(frozen=True)
class GoldenCase:
    """One recorded case: where its outputs are, and the case they answer for."""

    sizes: dict[str, int]
    seed: int
    values: str
    file: str

    def case(self, why: str = "golden") -> Case:
        return Case(self.sizes, self.seed, self.values, why=why)


@dataclass(frozen=True)
class Manifest:
    """A golden folder's ``manifest.json``, checked whole when read."""

    folder: Path
    source: str
    source_sha256: str
    entry: str
    spec_sha256: str
    gpu: str
    recorded: str
    cases: tuple[GoldenCase, ...]
    reserve: tuple[GoldenCase, ...]
    digest: str  # of cases and reserve: see cases_digest

    def plan(self, seed: int) -> tuple[GoldenCase, ...]:
        """The cases a check runs: every recorded one, and :data:`SAMPLED` of the reserve drawn
        from the check's own ``seed``."""
        rng = stream(seed, 4, {}, "reserve")
        picked = rng.permutation(len(self.reserve))[:SAMPLED] if self.reserve else ()
        return self.cases + tuple(self.reserve[int(i)] for i in picked)

    def file(self, case: GoldenCase) -> Path:
        return self.folder / case.file


def cases_digest(cases: list[dict[str, Any]], reserve: list[dict[str, Any]]) -> str:
    """The digest of a manifest's full case list (cases and reserve, in order)."""
    return hashlib.sha256(json.dumps([cases, reserve], sort_keys=True).encode()).hexdigest()


def load_golden(folder: Path) -> Manifest:
    """The manifest of a golden folder, checked: JSON, every field, every case's outputs present,
    the digest of the case list. Any problem is one InputError line (exit 2)."""
    manifest = folder / MANIFEST
    if not manifest.is_file():
        raise InputError(f"{folder}: not a golden folder (no {MANIFEST}; make one with `porter record`)")
    try:
        data = json.loads(manifest.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise InputError(f"{manifest}: not valid JSON ({err})") from None
    if not isinstance(data, dict):
        raise InputError(f"{manifest}: not a manifest (a JSON object written by `porter record`)")
    raw_cases, raw_reserve = data.get("cases"), data.get("reserve", [])
    if not isinstance(raw_cases, list) or not raw_cases:
        raise InputError(f"{manifest}: holds no cases: nothing to compare with (record again with `porter record`)")
    strings = ("source", "source_sha256", "entry", "spec_sha256", "gpu", "recorded", "digest")
    missing = [k for k in strings if not isinstance(data.get(k), str)]
    if missing or not isinstance(raw_reserve, list):
        raise InputError(f"{manifest}: no {', '.join(missing) or 'reserve list'}: recorded by an older porter or "
                         "edited; record again with `porter record`")
    if data.get("inputs") != INPUTS_VERSION:
        raise InputError(f"{manifest}: recorded with porter's inputs version {data.get('inputs', 1)}, not this "
                         f"porter's ({INPUTS_VERSION}): its outputs answer for other inputs; record again with "
                         "`porter record`")
    if cases_digest(raw_cases, raw_reserve) != data["digest"]:
        raise InputError(f"{manifest}: its case list does not match its digest: cases were removed or changed "
                         "after recording; record again")
    cases, reserve = (tuple(_golden_case(c, manifest) for c in raw) for raw in (raw_cases, raw_reserve))
    absent = [c.file for c in cases + reserve if not (folder / c.file).is_file()]
    if absent:
        raise InputError(f"{folder}: golden outputs missing: {', '.join(absent[:3])}")
    return Manifest(folder, source=data["source"], source_sha256=data["source_sha256"], entry=data["entry"],
                    spec_sha256=data["spec_sha256"], gpu=data["gpu"], recorded=data["recorded"], cases=cases,
                    reserve=reserve, digest=data["digest"])


def _golden_case(raw: object, manifest: Path) -> GoldenCase:
    if not (isinstance(raw, dict) and isinstance(raw.get("sizes"), dict) and isinstance(raw.get("seed"), int)
            and isinstance(raw.get("file"), str) and isinstance(raw.get("values", ""), str)
            and all(isinstance(k, str) and isinstance(v, int) for k, v in raw["sizes"].items())
            and Path(raw["file"]).name == raw["file"]):
        raise InputError(f"{manifest}: a case needs sizes, seed, values and a file in the folder (got {raw!r:.120})")
    return GoldenCase(dict(raw["sizes"]), raw["seed"], raw.get("values", ""), raw["file"])


def check_golden(manifest: Manifest, spec: Spec, candidate: Path | None = None) -> None:
    """Refuse golden outputs that cannot stand for this spec's reference: recorded under another
    spec (other inputs and sizes), not covering the plan the spec implies for the recorded seeds
    (with the default sizes timed), or recorded from ``candidate`` itself."""
    folder = manifest.folder
    if manifest.spec_sha256 != spec_digest(spec):
        raise InputError(f"{folder}: recorded with another spec ({spec.source} digest {spec_digest(spec)}, manifest "
                         f"{manifest.spec_sha256}): any change to the spec changes inputs or sizes, so record again")
    if candidate is not None and manifest.source_sha256 == file_digest(candidate):
        raise InputError(f"{folder}: recorded from {candidate} itself: a kernel's own outputs are no reference for it; "
                         "record the source kernel")
    seeds = tuple(dict.fromkeys(c.seed for c in manifest.cases))
    recorded = {c.case().key() for c in manifest.cases}
    absent = [c for c in plan_cases(spec, seeds, timed=[spec.default_sizes()]) if c.key() not in recorded]
    if absent:
        raise InputError(f"{folder}: does not cover the plan its spec implies ({len(absent)} cases absent, first "
                         f"{absent[0].why} at {absent[0].sizes}, seed {absent[0].seed}): record again")


def record(source: Path, spec: Spec, out: Path, *, seeds: tuple[int, ...] = (), runner: Any, cubin: bytes,
           device: str, force: bool = False) -> dict[str, Any]:
    """Run the source kernel on the plan a check would run (fresh seeds unless given) and on a
    reserve of :data:`RESERVE` size sets drawn from seeds of their own, and write the outputs to
    ``out``. Returns the manifest with the reserve as its count: its cases are never shown."""
    from porter.gate.runner.client import WorkerFault, run_job
    from porter.gate.runner.protocol import OutputsJob

    if (out / MANIFEST).exists() and not force:
        raise InputError(f"{out}: already holds golden outputs (use --force to replace them)")
    if out.exists() and not out.is_dir():
        raise InputError(f"{out}: exists and is not a folder")
    declared, launch = declared_spec(spec, source.read_text(encoding="utf-8", errors="replace"), source=str(source))
    out.mkdir(parents=True, exist_ok=True)
    plan = plan_cases(spec, plan_seeds(seeds), timed=[spec.default_sizes()])
    reserve = [Case(sizes, seed, why="reserve") for seed in (fresh_seed() for _ in range(RESERVE))
               if (sizes := unannounced_sizes(spec, seed)) is not None]
    written: list[list[dict[str, Any]]] = [[], []]
    for index, (case, into) in enumerate([(c, written[0]) for c in plan] + [(c, written[1]) for c in reserve]):
        try:
            reply = run_job(runner, OutputsJob(cubin=cubin, entry=declared.entry, launch=launch, spec_path=str(spec.path),
                                               sizes=case.sizes, seed=case.seed, values=case.values), 120.0)
        except WorkerFault as fault:
            raise EnvironmentProblem(f"the source kernel failed while recording: {fault}") from fault
        name = f"case{index:03d}-seed{case.seed}{'-' + case.values if case.values else ''}.npz"
        with open(out / name, "wb") as fh:
            # numpy's stub types **kwds as if they could be its allow_pickle: bool; these are arrays
            np.savez_compressed(fh, **reply.outputs)  # type: ignore[arg-type]
        into.append(asdict(GoldenCase(case.sizes, case.seed, case.values, name)))
    cases, kept = written
    manifest = {
        "source": str(source),
        "source_sha256": file_digest(source),
        "entry": declared.entry,
        "spec_sha256": spec_digest(spec),
        "inputs": INPUTS_VERSION,
        "gpu": device,
        "recorded": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "cases": cases,
        "reserve": kept,
        "digest": cases_digest(cases, kept),
    }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return {**manifest, "reserve": len(kept)}
