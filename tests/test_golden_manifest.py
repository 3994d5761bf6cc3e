"""Golden folders as properties: a manifest covers the plan its spec implies and says so by a digest
of its whole case list, keeps a reserve no output shows, is refused (one line, exit 2) when cut
down, edited, recorded from the candidate, or missing, on any machine (docs/spec.md, "What a check
guarantees")."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from porter.errors import InputError
from porter.gate.check import CheckOptions, run_check
from porter.gate.golden import MANIFEST, SAMPLED, cases_digest, check_golden, load_golden, record
from porter.gate.inputs import INPUTS_VERSION
from porter.gate.runner.protocol import Job, OutputsReply, Reply
from porter.gate.spec import load_spec

ROOT = Path(__file__).resolve().parent.parent
VECTOR_ADD = ROOT / "examples" / "vector_add"


class Outputs:
    """A runner whose source kernel writes small outputs (their values do not matter here)."""

    def call(self, job: Job, timeout_s: float) -> Reply:
        return OutputsReply({"out": np.zeros(4, np.float32)})


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> tuple[Path, dict[str, Any]]:
    folder = tmp_path_factory.mktemp("golden") / "g"
    spec = load_spec(VECTOR_ADD / "porter.toml")
    shown = record(VECTOR_ADD / "kernel.ptx", spec, folder, seeds=(3, 4), runner=Outputs(), cubin=b"", device="fake")
    return folder, shown


def test_a_recorded_manifest_covers_its_plan_and_keeps_its_reserve_unshown(recorded) -> None:
    folder, shown = recorded
    spec = load_spec(VECTOR_ADD / "porter.toml")
    manifest = load_golden(folder)
    check_golden(manifest, spec)
    assert isinstance(shown["reserve"], int) and shown["reserve"] == len(manifest.reserve) > SAMPLED


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**48))
def test_every_check_runs_every_recorded_case_and_a_sample_of_the_reserve(recorded, seed) -> None:
    manifest = load_golden(recorded[0])
    plan = manifest.plan(seed)
    assert plan[:len(manifest.cases)] == manifest.cases
    sampled = plan[len(manifest.cases):]
    keys = {c.case().key() for c in sampled}
    assert len(keys) == SAMPLED and keys <= {c.case().key() for c in manifest.reserve}


def _edited(folder: Path, tmp_path: Path, edit) -> Path:
    copy = tmp_path / "edited"
    shutil.copytree(folder, copy)
    data = json.loads((copy / MANIFEST).read_text())
    edit(data)
    (copy / MANIFEST).write_text(json.dumps(data))
    return copy


def test_a_manifest_cut_down_or_edited_is_refused(recorded, tmp_path: Path) -> None:
    spec = load_spec(VECTOR_ADD / "porter.toml")
    cut = _edited(recorded[0], tmp_path / "a", lambda d: d["cases"].pop())
    with pytest.raises(InputError, match="does not match its digest"):
        load_golden(cut)

    def cut_and_digest(d: dict) -> None:
        d["cases"].pop()
        d["digest"] = cases_digest(d["cases"], d["reserve"])
    resigned = _edited(recorded[0], tmp_path / "b", cut_and_digest)
    with pytest.raises(InputError, match="does not cover the plan"):
        check_golden(load_golden(resigned), spec)


@pytest.mark.parametrize("version", [None, 1, INPUTS_VERSION + 1])
def test_a_manifest_recorded_on_inputs_drawn_another_way_is_refused(recorded, tmp_path: Path, version) -> None:
    """Its outputs answer for other inputs than the seeds draw now: comparing with them would fail
    an honest kernel (or, with luck, pass a wrong one)."""
    assert load_golden(recorded[0])  # the folder as recorded is accepted

    def set_version(d: dict) -> None:
        if version is None:
            d.pop("inputs")
        else:
            d["inputs"] = version
    with pytest.raises(InputError, match=r"inputs version .* record again"):
        load_golden(_edited(recorded[0], tmp_path, set_version))


def test_a_manifest_recorded_from_the_candidate_is_refused(recorded) -> None:
    spec = load_spec(VECTOR_ADD / "porter.toml")
    with pytest.raises(InputError, match=r"recorded from .* itself"):
        check_golden(load_golden(recorded[0]), spec, VECTOR_ADD / "kernel.ptx")


@pytest.mark.parametrize("make", ["missing", "empty", "unparsable", "other spec"])
def test_a_bad_golden_folder_is_bad_input_even_without_a_gpu(make: str, tmp_path: Path, recorded, toolchain,
                                                             no_gpu) -> None:
    folder = tmp_path / "g"
    if make != "missing":
        folder.mkdir()
    if make == "unparsable":
        (folder / MANIFEST).write_text("{not json")
    if make == "other spec":
        folder = _edited(recorded[0], tmp_path, lambda d: d.update(spec_sha256="0" * 16))
    spec = load_spec(VECTOR_ADD / "porter.toml")
    with pytest.raises(InputError) as err:
        run_check(VECTOR_ADD / "kernel.ptx", spec,
                  CheckOptions(golden=folder), toolchain=toolchain, runner=no_gpu)
    assert "\n" not in str(err.value)
