"""Large arrays parked in files and read back: what the parent gets is what the worker sent."""

from __future__ import annotations

import os

import ml_dtypes
import numpy as np

from porter.gate.runner.transfer import PARK_BYTES, Parked, Parking, unpark


def test_parked_arrays_read_back_bit_for_bit_and_their_files_go(tmp_path) -> None:
    big = np.random.default_rng(0).standard_normal((1024, 1024)).astype(ml_dtypes.bfloat16)
    strided = np.arange(2 * PARK_BYTES, dtype=np.uint8).reshape(2, -1)[:, ::2]  # not contiguous
    reply = {"outputs": [{"C": big}, None], "reference": {"C": big.astype(np.float32)}, "strided": strided,
             "small": np.ones(4), "n": 3}
    parked = Parking(str(tmp_path)).park(reply)
    assert isinstance(parked["outputs"][0]["C"], Parked) and isinstance(parked["reference"]["C"], Parked)
    assert parked["outputs"][1] is None and parked["n"] == 3 and isinstance(parked["small"], np.ndarray)
    back = unpark(parked)
    assert back["outputs"][0]["C"].dtype == big.dtype
    assert back["outputs"][0]["C"].tobytes() == big.tobytes()
    assert np.array_equal(back["reference"]["C"], big.astype(np.float32))
    assert np.array_equal(back["strided"], strided)
    assert os.listdir(tmp_path) == []


def test_an_array_sent_again_is_written_once_and_the_oldest_kept_file_goes_past_the_cap(tmp_path) -> None:
    """A kept array's file serves every job that sends it (the receiver reads it and leaves it); a
    new array of the same contents is written anew; past keep_bytes the oldest kept file goes."""
    rng = np.random.default_rng(1)
    first, second = (rng.standard_normal(PARK_BYTES // 8).astype(np.float64) for _ in range(2))
    parking = Parking(str(tmp_path), prefix="job-", keep_bytes=2 * PARK_BYTES)
    sent = [parking.park({"C": first}) for _ in range(3)]
    assert len({p["C"].path for p in sent}) == 1 and all(p["C"].kept for p in sent)
    for job in sent:  # every job reads it, and it stays
        assert np.array_equal(unpark(job)["C"], first)
    assert os.listdir(tmp_path) == [os.path.basename(sent[0]["C"].path)]
    copy = parking.park({"C": first.copy()})["C"]  # the same bytes, another array: its own file
    assert copy.path != sent[0]["C"].path
    newest = parking.park({"C": second})["C"]  # three kept arrays pass the cap of two: the first goes
    assert sorted(os.listdir(tmp_path)) == sorted(os.path.basename(p.path) for p in (copy, newest))
    assert np.array_equal(unpark({"C": newest})["C"], second)
    too_big = Parking(str(tmp_path), keep_bytes=PARK_BYTES // 2).park(first)
    assert not too_big.kept
    unpark(too_big)
    assert not os.path.exists(too_big.path)


def test_without_a_directory_nothing_is_parked() -> None:
    big = np.zeros(PARK_BYTES, dtype=np.uint8)
    assert Parking(None).park({"a": big})["a"] is big


def test_the_worker_state_keeps_its_files_in_its_folder_and_close_removes_them(tmp_path) -> None:
    from porter.gate.runner.state import WorkerState

    state = WorkerState(None, fenced=False, folder=tmp_path)
    assert state.tmp.parent == tmp_path and state.tmp.is_dir()
    state.close()
    assert not state.tmp.exists() and os.listdir(tmp_path) == []
