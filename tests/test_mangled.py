"""Reading a kernel's C++ parameter types from its mangled name: names nvcc 13 really wrote, a
round trip through a mangler written here from the Itanium ABI's rules, and garbage."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from porter.ptx import read_ptx
from porter.ptx.mangled import CxxType, demangle, mangled_params

NVCC = Path(__file__).parent / "data" / "compiled" / "nvcc" / "kernels.ptx"


def test_the_names_nvcc_wrote_for_the_fixture_kernels() -> None:
    names = {e.name: demangle(e.name) for e in read_ptx(NVCC).kernels}
    shown = {k: (v[0], [str(t) for t in v[1]]) if v else None for k, v in names.items()}
    assert shown == {
        "_Z7row_sumPK6__halfPfii": ("row_sum", ["const __half*", "float*", "int", "int"]),
        "_Z10scale_bf16PK13__nv_bfloat16PS_if": ("scale_bf16", ["const __nv_bfloat16*", "__nv_bfloat16*", "int",
                                                                "float"]),
        "_Z9wmma_bf16PK13__nv_bfloat16S1_Pfiii": ("wmma_bf16", ["const __nv_bfloat16*", "const __nv_bfloat16*",
                                                                "float*", "int", "int", "int"]),
        "_Z9histogramPKiPjii": ("histogram", ["const int*", "unsigned int*", "int", "int"]),
        "axpy_inplace": None,  # extern "C": no types in the name
        "axpy_inplace_x2": None,
        "_Z10wgmma_tilePK13__nv_bfloat16S1_Pf": ("wgmma_tile", ["const __nv_bfloat16*", "const __nv_bfloat16*",
                                                                "float*"]),
    }


@pytest.mark.parametrize("symbol, types, dtypes", [
    # namespaces are substitution candidates too: S0_ is cutlass::bfloat16_t, S2_ the const pointer
    ("_Z3barPKN7cutlass10bfloat16_tES2_PS0_m", ["const cutlass::bfloat16_t*"] * 2 + ["cutlass::bfloat16_t*",
                                                                                    "unsigned long"],
     ["bf16", "bf16", "bf16", "u64"]),
    ("_Z3bazPKfPfPKS0_", ["const float*", "float*", "const float**"], ["f32", "f32", "f32"]),
    ("_Z4packP7__half2P6float4", ["__half2*", "float4*"], ["f16", "f32"]),
    ("_Z1fv", [], []),
    # nvcc 13's name for a kernel of 14 pointers: the sequence numbers go on in base 36 (SA_, SM_)
    ("_Z1fPP13__nv_bfloat16PPKS_PPKdPK6__halfSA_PfPKfPiPKiPjPKjPsPKsSM_",
     ["__nv_bfloat16**", "const __nv_bfloat16**", "const double**", "const __half*", "const __half*", "float*",
      "const float*", "int*", "const int*", "unsigned int*", "const unsigned int*", "short*", "const short*",
      "const short*"], ["bf16", "bf16", "f64", "f16", "f16", "f32", "f32", "i32", "i32", "u32", "u32", "i16", "i16",
                        "i16"]),
])
def test_substitutions_namespaces_and_vector_types(symbol: str, types: list[str], dtypes: list[str]) -> None:
    found = mangled_params(symbol)
    assert found is not None and [str(t) for t in found] == types and [t.dtype for t in found] == dtypes


@pytest.mark.parametrize("symbol", ["axpy", "_Z1fIiEvT_", "_Z", "_Z3fooS_", "_Z3foo", "_Z99x", "_ZN3a1bEv_junk"])
def test_what_it_cannot_read_is_none_not_a_guess(symbol: str) -> None:
    assert mangled_params(symbol) is None


_ELEMENTS = {"f": "float", "d": "double", "i": "int", "j": "unsigned int", "s": "short", "h": "unsigned char",
             "6__half": "__half", "13__nv_bfloat16": "__nv_bfloat16", "x": "long long"}


def _base36(n: int) -> str:
    """A substitution's sequence number, in the ABI's base 36 (0-9 then A-Z)."""
    digits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    return digits[n] if n < 36 else _base36(n // 36) + digits[n % 36]


def _mangle(params: list[tuple[str, int, bool]]) -> str:
    """The Itanium mangling of ``f(params)``: each (element code, pointer depth, const element).
    A type is written from the outside in and becomes a substitution candidate once written, inner
    first; a candidate seen before is written as its reference (S_, S0_, S1_, ...)."""
    subs: list[tuple[str, int, bool]] = []

    def emit(node: tuple[str, int, bool]) -> str:
        code, depth, const = node
        candidate = depth > 0 or const or code[0].isdigit()  # builtins are never substituted
        if candidate and node in subs:
            i = subs.index(node)
            return "S_" if i == 0 else f"S{_base36(i - 1)}_"
        text = "P" + emit((code, depth - 1, const)) if depth else "K" + emit((code, 0, False)) if const else code
        if candidate:
            subs.append(node)
        return text

    return "_Z1f" + "".join(emit(p) for p in params)


@given(st.lists(st.tuples(st.sampled_from(sorted(_ELEMENTS)), st.integers(0, 3), st.booleans()), min_size=1,
                max_size=12))
def test_round_trip_through_an_independent_mangler(params: list[tuple[str, int, bool]]) -> None:
    params = [(c, d, k and d > 0) for c, d, k in params]  # const matters only behind a pointer
    found = mangled_params(_mangle(params))
    assert found == tuple(CxxType(_ELEMENTS[c], d, k) for c, d, k in params), _mangle(params)


def test_the_mangler_here_agrees_with_nvcc(tmp_path: Path) -> None:
    nvcc = Path("/usr/local/cuda/bin/nvcc")
    if not nvcc.exists():
        pytest.skip("no nvcc at /usr/local/cuda/bin")
    src = tmp_path / "k.cu"
    src.write_text('#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n'
                   "__global__ void f(const __half* a, const __half* b, __half** c, const float* d, const float* e,"
                   " __nv_bfloat16* g, const __nv_bfloat16** h, int n) {}\n")
    subprocess.run([str(nvcc), "--ptx", "-arch=sm_90", str(src), "-o", str(tmp_path / "k.ptx")], check=True)
    (entry,) = read_ptx(tmp_path / "k.ptx").kernels
    params = [("6__half", 1, True), ("6__half", 1, True), ("6__half", 2, False), ("f", 1, True), ("f", 1, True),
              ("13__nv_bfloat16", 1, False), ("13__nv_bfloat16", 2, True), ("i", 0, False)]
    assert entry.name == _mangle(params)


@given(st.text(alphabet="_Z0123456789PKVrSNEIfijhsdv_abc", max_size=40))
def test_any_text_reads_or_is_none(text: str) -> None:
    found = mangled_params(text)
    assert found is None or all(isinstance(t, CxxType) for t in found)
