"""The host CUtensorMap porter asks the driver to encode is 64-byte aligned, as the driver requires
(#29: it lived in a NumPy scalar, aligned to 16 bytes at most). CPU: the driver is a stand-in."""

from __future__ import annotations

import ctypes
from typing import Any

import pytest

from porter.gate.runner import tensormap
from porter.gate.runner.tensormap import TENSORMAP_DTYPE, aligned_tensormap, encode_tiled
from porter.gate.spec import TensorMapGeometry


def test_every_allocation_is_64_byte_aligned_and_zeroed() -> None:
    held = [aligned_tensormap() for _ in range(2000)]  # held: each its own allocation
    assert {m.ctypes.data % 64 for m in held} == {0}
    assert all(m.dtype == TENSORMAP_DTYPE and m.shape == () and m.nbytes == 128 for m in held)
    assert not any(m.tobytes().strip(b"\0") for m in held)


class _Driver:
    """Records the address the descriptor is encoded at, and writes a pattern there."""

    def __init__(self) -> None:
        self.addresses: list[int] = []

    def cuTensorMapEncodeTiled(self, out: Any, *args: Any) -> int:
        self.addresses.append(out.value)
        ctypes.memset(out.value, 7, 128)
        return 0


def test_the_driver_encodes_into_aligned_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    driver = _Driver()
    monkeypatch.setattr(tensormap, "_driver", lambda: driver)
    geometry = TensorMapGeometry(dims=(64, 64), strides=(128,), box=(16, 16), swizzle="none")
    maps = [encode_tiled(0x7F0000000000, "f16", 2, geometry) for _ in range(500)]
    assert len(driver.addresses) == 500 and {a % 64 for a in driver.addresses} == {0}
    assert all(m.tobytes() == bytes([7]) * 128 for m in maps)
