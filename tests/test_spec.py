"""The hot-loop spec: a full valid spec, every class of error with its key path, dtypes, fills,
tolerances, and the match against a PTX entry's params."""

from __future__ import annotations

import copy
import math
import sys
from pathlib import Path
from typing import Any

import pytest

from porter.errors import InputError
from porter.gate.dtypes import ALIASES, DTYPES, parse_dtype
from porter.gate.spec import (
    CallableRef,
    FillSpec,
    LaunchDims,
    Tolerance,
    check_against_entry,
    default_fill,
    load_spec,
    parse_spec,
)
from porter.ptx.model import Entry, Param

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

GEMM = """
[kernel]
entry = "gemm_bf16_sm80"
description = "C = A·B + bias"

[sizes]
lda = "K + 8"        # derived, written before the symbols it reads
M = 1024
N = 1024
K = 1024
T = 128

[[sweep]]
M = 128
N = 128
K = 64
[[sweep]]
M = 1000             # ragged: not a multiple of the tile
N = 999
K = 72

[[params]]
name = "A"
kind = "buffer"
dtype = "bf16"
shape = ["M", "lda"]
role = "in"
fill = "uniform(-1, 1)"

[[params]]
name = "B"
kind = "buffer"
dtype = "bfloat16"
shape = ["K", "N"]
fill = "normal(0, 0.5)"

[[params]]
name = "idx"
kind = "buffer"
dtype = "int32"
shape = ["M"]
fill = "randint(0, N)"

[[params]]
name = "C"
kind = "buffer"
dtype = "f32"
shape = ["M", "N"]
role = "out"

[[params]]
name = "acc"
kind = "buffer"
dtype = "i32"
shape = ["ceil_div(M, 128)"]
role = "inout"

[[params]]
name = "M"
kind = "scalar"
dtype = "i32"
value = "M"

[[params]]
name = "alpha"
kind = "scalar"
dtype = "f32"
value = 0.5

[[params]]
name = "scratch"
kind = "scratch"
bytes = "0"

[launch]
grid = ["ceil_div(N, T)", "ceil_div(M, T)"]
block = [128]
shared = "2 * T * 64 * 2"

[reference]
python = "ref.py:gemm"

[tolerance]
C = { atol = 2e-2, rtol = 2e-2, reduction = "K" }

[cost]
flops = "2*M*N*K"

[baseline]
python = "ref.py:cublas"

[profile]
gpu = "H100 SXM"
time_us = 812.0
share = 0.31
note = "free-form facts are kept"
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "ref.py").write_text("def gemm(args, sizes):\n    raise AssertionError('not imported')\n")
    (tmp_path / "porter.toml").write_text(GEMM, encoding="utf-8")
    return tmp_path


def _data() -> dict[str, Any]:
    return copy.deepcopy(tomllib.loads(GEMM))


def _error(folder: Path, data: dict[str, Any]) -> str:
    with pytest.raises(InputError) as info:
        parse_spec(data, base_dir=folder, source="porter.toml")
    message = str(info.value)
    assert "\n" not in message
    return message


# --- a valid spec ---------------------------------------------------------------------------


def test_full_spec(folder: Path) -> None:
    spec = load_spec(folder / "porter.toml")
    assert spec.entry == "gemm_bf16_sm80"
    assert spec.source == "porter.toml"
    assert spec.base_dir == folder.resolve()
    assert [p.name for p in spec.params] == ["A", "B", "idx", "C", "acc", "M", "alpha", "scratch"]
    assert [p.name for p in spec.outputs] == ["C", "acc"]
    assert [p.name for p in spec.inputs] == ["A", "B", "idx", "acc"]
    assert spec.param("B").dtype is DTYPES["bf16"]
    assert spec.param("B").role == "in"
    assert spec.param("C").fill is None
    assert spec.param("acc").fill == FillSpec("randint", -8, 8)
    assert spec.param("idx").fill == FillSpec("randint", 0, "N")
    assert spec.launch.grid == ("ceil_div(N, T)", "ceil_div(M, T)", 1)
    assert spec.launch.block == (128, 1, 1)
    assert spec.launch.cluster is None
    assert spec.reference is not None and spec.reference.kind == "python"
    assert spec.reference.callable == CallableRef(folder.resolve() / "ref.py", "gemm")
    assert str(spec.reference.callable) == "ref.py:gemm"
    assert spec.baseline == CallableRef(folder.resolve() / "ref.py", "cublas")
    assert spec.profile["note"] == "free-form facts are kept"


def test_size_sets_reevaluate_derived_symbols(folder: Path) -> None:
    spec = load_spec(folder)  # a folder means its porter.toml
    assert spec.default_sizes() == {"lda": 1032, "M": 1024, "N": 1024, "K": 1024, "T": 128}
    assert spec.size_sets() == [
        {"lda": 72, "M": 128, "N": 128, "K": 64, "T": 128},
        {"lda": 80, "M": 1000, "N": 999, "K": 72, "T": 128},
    ]


def test_size_sets_without_sweep_are_the_defaults(folder: Path) -> None:
    data = _data()
    del data["sweep"]
    spec = parse_spec(data, base_dir=folder, source="porter.toml")
    assert spec.size_sets() == [spec.default_sizes()]


def test_evaluated_values(folder: Path) -> None:
    spec = load_spec(folder / "porter.toml")
    ragged = spec.size_sets()[1]
    assert spec.shape("A", ragged) == (1000, 80)
    assert spec.shape(spec.param("acc"), ragged) == (8,)
    assert spec.buffer_bytes("A", ragged) == 1000 * 80 * 2
    assert spec.scalar_value("M", ragged) == 1000
    assert spec.scalar_value("alpha", ragged) == 0.5
    assert isinstance(spec.scalar_value("alpha", ragged), float)
    assert spec.scratch_bytes("scratch", ragged) == 0
    assert spec.fill_bounds("idx", ragged) == (0, 999)
    assert spec.fill_bounds("B", ragged) == (0, 0.5)
    assert spec.launch_dims(ragged) == LaunchDims((8, 8, 1), (128, 1, 1), 32768, None)
    assert spec.flops(ragged) == 2 * 1000 * 999 * 72
    # no cost.bytes: every buffer once, inout buffers twice
    expected = 1000 * 80 * 2 + 72 * 999 * 2 + 1000 * 4 + 1000 * 999 * 4 + 2 * 8 * 4
    assert spec.bytes(ragged) == expected


def test_cost_bytes_and_missing_flops(folder: Path) -> None:
    data = _data()
    data["cost"] = {"bytes": "2*(M*K + K*N) + 4*M*N"}
    spec = parse_spec(data, base_dir=folder, source="porter.toml")
    sizes = spec.default_sizes()
    assert spec.flops(sizes) is None
    assert spec.bytes(sizes) == 2 * (1024 * 1024 * 2) + 4 * 1024 * 1024


def test_param_signature(folder: Path) -> None:
    spec = load_spec(folder / "porter.toml")
    signature = spec.param_signature()
    assert signature[0] == ("A", "buffer", DTYPES["bf16"])
    assert signature[5] == ("M", "scalar", DTYPES["i32"])
    assert signature[7] == ("scratch", "scratch", None)


def test_reference_is_not_imported(folder: Path) -> None:
    # ref.py raises when run; parsing only checks that the file exists
    spec = load_spec(folder / "porter.toml")
    assert spec.reference is not None and spec.reference.callable is not None


@pytest.mark.parametrize(
    ("table", "kind"),
    [({"source": "gemm.ptx"}, "source"), ({"golden": "golden/"}, "golden")],
)
def test_other_references(folder: Path, table: dict[str, str], kind: str) -> None:
    (folder / "gemm.ptx").write_text("// source kernel\n")
    data = _data()
    data["reference"] = table
    spec = parse_spec(data, base_dir=folder, source="porter.toml")
    assert spec.reference is not None
    assert spec.reference.kind == kind
    assert spec.reference.callable is None
    assert spec.reference.path == folder / next(iter(table.values()))


def test_cluster(folder: Path) -> None:
    data = _data()
    data["launch"]["cluster"] = [2]
    data["launch"]["grid"] = ["round_up(ceil_div(N, T), 2)", "ceil_div(M, T)"]
    spec = parse_spec(data, base_dir=folder, source="porter.toml")
    assert spec.launch_dims(spec.size_sets()[1]).cluster == (2, 1, 1)


# --- tolerances -----------------------------------------------------------------------------


def test_tolerance_defaults_and_reduction_scaling(folder: Path) -> None:
    spec = load_spec(folder / "porter.toml")
    assert spec.tolerances["C"] == Tolerance(2e-2, 2e-2, "K")
    assert spec.tolerances["acc"] == Tolerance(0.0, 0.0)  # integers compare exactly
    sizes = spec.default_sizes()  # K = 1024: sqrt(1024 / 128)
    atol, rtol = spec.tolerance("C", sizes)
    assert atol == pytest.approx(2e-2 * math.sqrt(8))
    assert rtol == 2e-2  # the output's own rounding does not grow with the sum's length
    small = spec.size_sets()[0]  # K = 64: never below 1x
    assert spec.tolerance("C", small) == (2e-2, 2e-2)
    assert spec.tolerance("acc", sizes) == (0.0, 0.0)


def test_tolerance_partial_override_keeps_dtype_default(folder: Path) -> None:
    data = _data()
    data["tolerance"] = {"C": {"rtol": 1e-3, "reduction": 512}}
    spec = parse_spec(data, base_dir=folder, source="porter.toml")
    assert spec.tolerances["C"] == Tolerance(1e-5, 1e-3, "512")
    assert spec.tolerance("C", spec.default_sizes()) == pytest.approx((2e-5, 1e-3))


@pytest.mark.parametrize(
    ("dtype", "atol", "rtol"),
    [
        ("f64", 1e-12, 1e-9),
        ("f32", 1e-5, 1e-4),
        ("f16", 1e-3, 1e-2),
        ("bf16", 1e-2, 2e-2),
        ("e4m3", 0.125, 0.125),
        ("e5m2", 0.25, 0.25),
        ("i8", 0.0, 0.0),
        ("u64", 0.0, 0.0),
    ],
)
def test_default_tolerances(folder: Path, dtype: str, atol: float, rtol: float) -> None:
    data = _data()
    data["params"][3]["dtype"] = dtype
    del data["tolerance"]
    spec = parse_spec(data, base_dir=folder, source="porter.toml")
    assert spec.tolerance("C", spec.default_sizes()) == (atol, rtol)


# --- dtypes ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("alias", "name"),
    [
        ("float32", "f32"),
        ("fp32", "f32"),
        ("FP16", "f16"),
        ("half", "f16"),
        ("bfloat16", "bf16"),
        ("double", "f64"),
        ("fp8_e4m3", "e4m3"),
        ("float8_e4m3fn", "e4m3"),
        ("e4m3fn", "e4m3"),
        ("fp8_e5m2", "e5m2"),
        ("float8_e5m2", "e5m2"),
        ("int32", "i32"),
        ("s16", "i16"),
        ("uint8", "u8"),
        (" u64 ", "u64"),
    ],
)
def test_dtype_aliases(alias: str, name: str) -> None:
    assert parse_dtype(alias).name == name


def test_every_alias_points_at_a_dtype() -> None:
    assert set(ALIASES.values()) <= set(DTYPES)


@pytest.mark.parametrize("name", ["float", "int", "f8", "complex64", 32])
def test_unknown_dtype_lists_valid_names(name: object) -> None:
    with pytest.raises(InputError) as info:
        parse_dtype(name, "porter.toml: params[0].dtype")
    message = str(info.value)
    assert message.startswith(f"porter.toml: params[0].dtype: unknown dtype {name!r}")
    assert "f64 f32 f16 bf16 e4m3 e5m2 i8 i16 i32 i64 u8 u16 u32 u64" in message


@pytest.mark.parametrize("name", list(DTYPES))
def test_numpy_types_and_poison(name: str) -> None:
    np = pytest.importorskip("numpy")
    pytest.importorskip("ml_dtypes")
    dtype = DTYPES[name]
    assert dtype.numpy.itemsize == dtype.itemsize
    poisoned = np.frombuffer(dtype.poison_bytes * 4, dtype=dtype.numpy)
    if dtype.is_float:
        assert np.isnan(poisoned.astype(np.float64)).all()
        assert float(np.finfo(dtype.numpy).max) == dtype.max_finite
    else:
        assert dtype.poison_bytes == b"\x5a" * dtype.itemsize
        info = np.iinfo(dtype.numpy)
        assert dtype.value_range == (info.min, info.max)


# --- fills ----------------------------------------------------------------------------------


def test_default_fills() -> None:
    assert default_fill(DTYPES["bf16"]) == FillSpec("uniform", -1, 1)
    assert default_fill(DTYPES["i8"]) == FillSpec("randint", -8, 8)
    assert default_fill(DTYPES["u32"]) == FillSpec("randint", 0, 16)
    assert str(FillSpec("uniform", -1, 1)) == "uniform(-1, 1)"


@pytest.mark.parametrize(
    ("text", "fill"),
    [
        ("uniform(-1, 1)", FillSpec("uniform", -1, 1)),
        (" normal(0, 1) ", FillSpec("normal", 0, 1)),
        ("randint(-4, 4)", FillSpec("randint", -4, 4)),
        ("uniform(-2**-3, 0.5)", FillSpec("uniform", -0.125, 0.5)),
        ("randint(0, ceil_div(N, 2))", FillSpec("randint", 0, "ceil_div(N, 2)")),
    ],
)
def test_fill_parsing(folder: Path, text: str, fill: FillSpec) -> None:
    data = _data()
    data["params"][0]["fill"] = text
    spec = parse_spec(data, base_dir=folder, source="porter.toml")
    assert spec.param("A").fill == fill


@pytest.mark.parametrize("fill", ["zeros", "ones", "zeros()", "full(3)", "constant(1)", "0", "-1.5", 0, 1.0])
def test_constant_fills_are_refused(folder: Path, fill: object) -> None:
    data = _data()
    data["params"][0]["fill"] = fill
    message = _error(folder, data)
    assert message.startswith("porter.toml: params[0].fill: constant fills like")
    assert "hide indexing bugs" in message


@pytest.mark.parametrize(
    ("index", "fill", "problem"),
    [
        (0, "random", "params[0].fill: must be uniform(lo, hi), normal(mean, std) or randint(lo, hi)"),
        (0, "uniform(-1)", "params[0].fill: must be uniform(lo, hi)"),
        (0, "uniform(lo=-1, hi=1)", "params[0].fill: must be uniform(lo, hi)"),
        (0, "uniform(-1, X)", "params[0].fill: unknown size symbol 'X'"),
        (0, "uniform(1, 1)", "params[0].fill: uniform(1, 1) needs a < b"),
        (0, "normal(0, 0)", "params[0].fill: normal(0, 0) needs a positive standard deviation"),
        (0, ["uniform", -1, 1], "params[0].fill: must be a string"),
        (
            2,
            "uniform(-1, 1)",
            "params[2].fill: uniform fills float buffers; use randint(lo, hi) for an i32 buffer",
        ),
        (2, "randint(0, 1)", "params[2].fill: randint(0, 1) draws from 0 to 0: it needs b >= a + 2"),
        (2, "randint(0, 2**40)", "params[2].fill: randint(0, 1099511627776) does not fit in i32"),
        (2, "randint(0, N / 2)", "params[2].fill: randint needs integer bounds"),
        (3, "uniform(-1, 1)", "params[3].fill: out buffers are poisoned, not filled"),
    ],
)
def test_bad_fills(folder: Path, index: int, fill: object, problem: str) -> None:
    data = _data()
    data["params"][index]["fill"] = fill
    assert _error(folder, data).startswith(f"porter.toml: {problem}")


def test_fill_range_against_small_dtypes(folder: Path) -> None:
    data = _data()
    data["params"][2]["dtype"] = "u8"
    data["params"][2]["fill"] = "randint(-8, 8)"
    assert _error(folder, data).startswith(
        "porter.toml: params[2].fill: randint(-8, 8) does not fit in u8 (0 to 255)"
    )
    data = _data()
    data["params"][0]["dtype"] = "e4m3"
    data["params"][0]["fill"] = "normal(0, 100)"
    assert _error(folder, data).startswith("porter.toml: params[0].fill: normal(0, 100) overflows e4m3")


def test_fill_checked_per_sweep_entry(folder: Path) -> None:
    data = _data()
    data["params"][2]["fill"] = "randint(0, N - 998)"
    assert _error(folder, data) == (
        "porter.toml: sweep[0]: params[2].fill: randint(0, -870) draws from 0 to -871: it needs b >= a + 2"
    )


# --- errors, with their key paths ---------------------------------------------------------------


def _set(data: dict[str, Any], path: tuple[Any, ...], value: Any) -> None:
    target = data
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (
            ("params", 3, "shape"),
            ["M", "ldb"],
            "porter.toml: params[3].shape[1]: unknown size symbol 'ldb' (size symbols: K, M, N, T, lda)",
        ),
        (("launch", "block"), [32, 2, 2, 2], "porter.toml: launch.block: needs 1 to 3 entries (got 4)"),
        (("launch", "grid"), [], "porter.toml: launch.grid: needs 1 to 3 entries (got 0)"),
        (
            ("params", 0, "role"),
            "output",
            "porter.toml: params[0].role: must be in, out or inout (got 'output')",
        ),
        (
            ("params", 1, "kind"),
            "array",
            "porter.toml: params[1].kind: must be buffer, scalar, scratch or tensormap (got 'array')",
        ),
        (("params", 1, "dtype"), "float", "porter.toml: params[1].dtype: unknown dtype 'float'"),
        (
            ("params", 1, "shap"),
            ["K"],
            "porter.toml: params[1].shap: unknown key for a buffer param (did you mean 'shape'?",
        ),
        (("params", 5, "shape"), ["M"], "porter.toml: params[5].shape: unknown key for a scalar param"),
        (("params", 1, "shape"), [], "porter.toml: params[1].shape: must be a non-empty array"),
        (
            ("params", 1, "shape"),
            ["K", True],
            "porter.toml: params[1].shape[1]: must be a number or an expression string",
        ),
        (
            ("params", 1, "shape"),
            ["K", "open(N)"],
            "porter.toml: params[1].shape[1]: function 'open' is not allowed",
        ),
        (("params", 1, "shape"), ["K", "N +"], "porter.toml: params[1].shape[1]: syntax error in 'N +'"),
        (
            ("params", 1, "name"),
            "A",
            "porter.toml: params[1].name: duplicate param name 'A' (also params[0])",
        ),
        (("params", 1, "name"), "", "porter.toml: params[1].name: must be a non-empty string"),
        (("params", 5, "value"), "2**40", "porter.toml: params[5].value: 1099511627776 does not fit in i32"),
        (
            ("params", 5, "value"),
            "M / 2",
            "porter.toml: params[5].value: an i32 scalar needs an integer (got 512.0)",
        ),
        (("params", 7, "bytes"), "M - 2000", "porter.toml: params[7].bytes: must be at least 0 (got -976)"),
        (("kernel", "entry"), "", "porter.toml: kernel.entry: must be a non-empty string"),
        (
            ("kernel", "entry"),
            "my kernel",
            "porter.toml: kernel.entry: must be a PTX entry name without spaces",
        ),
        (("kernel", "name"), "x", "porter.toml: kernel.name: unknown key (allowed: entry, description, require, max_tile, max_sizes)"),
        (
            ("tolerances",),
            {},
            "porter.toml: tolerances: unknown key at the top level (did you mean 'tolerance'?",
        ),
        (("launch", "threads"), 128, "porter.toml: launch.threads: unknown key"),
        (("launch", "shared"), 300_000, "porter.toml: launch.shared: must be at most 232448 (got 300000)"),
        (("launch", "block"), [2048], "porter.toml: launch.block[0]: must be at most 1024 (got 2048)"),
        (("launch", "block"), [64, 32], "porter.toml: launch.block: 2048 threads in a block (at most 1024)"),
        (
            ("launch", "grid"),
            ["N / 128"],
            "porter.toml: launch.grid[0]: must be an integer (got 8.0; use // for integer division)",
        ),
        (
            ("launch", "cluster"),
            [3],
            "porter.toml: launch.grid[0]: 8 blocks are not a multiple of the cluster's 3",
        ),
        (("launch", "cluster"), [4, 8], "porter.toml: launch.cluster: 32 blocks in a cluster (at most 16)"),
        (
            ("tolerance", "D"),
            {"atol": 1.0},
            "porter.toml: tolerance.D: 'D' is not an output (outputs: C, acc)",
        ),
        (("tolerance", "A"), {"atol": 1.0}, "porter.toml: tolerance.A: 'A' is not an output"),
        (
            ("tolerance", "C"),
            0.01,
            "porter.toml: tolerance.C: must be a table such as { atol = 1e-3, rtol = 1e-3 }",
        ),
        (("tolerance", "C"), {"atol": -1}, "porter.toml: tolerance.C.atol: must be a number >= 0 (got -1)"),
        (
            ("tolerance", "C"),
            {"atl": 1e-3},
            "porter.toml: tolerance.C.atl: unknown key (did you mean 'atol'?",
        ),
        (
            ("tolerance", "C"),
            {"reduction": "KK"},
            "porter.toml: tolerance.C.reduction: unknown size symbol 'KK'",
        ),
        (
            ("tolerance", "C"),
            {"reduction": "K - 2000"},
            "porter.toml: tolerance.C.reduction: must be at least 1 (got -976)",
        ),
        (
            ("reference",),
            {"python": "ref.py"},
            "porter.toml: reference.python: must be \"FILE.py:FUNCTION\" (got 'ref.py')",
        ),
        (("reference",), {"python": "ref.py:"}, 'porter.toml: reference.python: must be "FILE.py:FUNCTION"'),
        (("reference",), {"python": "nope.py:gemm"}, "porter.toml: reference.python: 'nope.py' not found in"),
        (("reference",), {"source": "nope.ptx"}, "porter.toml: reference.source: 'nope.ptx' not found in"),
        (("reference",), {}, "porter.toml: reference: needs exactly one of python, source or golden"),
        (
            ("reference", "golden"),
            "g/",
            "porter.toml: reference: needs exactly one of python, source or golden",
        ),
        (("baseline",), {}, "porter.toml: baseline.python is missing"),
        (("cost", "flops"), "2*M*N*K*Q", "porter.toml: cost.flops: unknown size symbol 'Q'"),
        (("cost", "flops"), "-M", "porter.toml: cost.flops: must not be negative (got -1024)"),
        (("profile", "share"), 1.5, "porter.toml: profile.share: must be a number from 0 to 1 (got 1.5)"),
        (("profile", "time_us"), "fast", "porter.toml: profile.time_us: must be a number >= 0 (got 'fast')"),
        (
            ("sizes", "lda"),
            "ldb + 8",
            "porter.toml: sizes.lda: unknown size symbol 'ldb' (size symbols: K, M, N, T, lda)",
        ),
        (
            ("sizes", "lda"),
            "K / 2",
            "porter.toml: sizes.lda: must be an integer (got 512.0; use // for integer division)",
        ),
        (("sizes", "M"), 10.5, "porter.toml: sizes.M: must be an integer or an expression string (got 10.5)"),
        (("sizes", "if"), 1, "porter.toml: sizes.if: a size symbol must be a name like M or lda"),
        (("sweep", 1, "Kk"), 8, "porter.toml: sweep[1].Kk: not a size symbol of [sizes] (did you mean 'K'?"),
        (
            ("sweep", 0, "M"),
            1.5,
            "porter.toml: sweep[0].M: must be an integer or an expression string (got 1.5)",
        ),
        (("sweep",), {"M": 8}, "porter.toml: sweep: must be an array of tables, written [[sweep]]"),
        (("params",), [], "porter.toml: params: must be a non-empty array of tables"),
        (("launch",), [1], "porter.toml: launch: must be a table (got an array)"),
    ],
)
def test_errors_name_file_and_key(folder: Path, path: tuple[Any, ...], value: Any, message: str) -> None:
    data = _data()
    _set(data, path, value)
    assert _error(folder, data).startswith(message)


@pytest.mark.parametrize(
    ("path", "message"),
    [
        (("kernel", "entry"), "porter.toml: kernel.entry is missing"),
        (("kernel",), "porter.toml: kernel.entry is missing"),
        (("launch", "grid"), "porter.toml: launch.grid is missing"),
        (("launch",), "porter.toml: the [launch] table is missing"),
        (("params",), "porter.toml: no [[params]]: list every kernel parameter, in order"),
        (("params", 0, "name"), "porter.toml: params[0].name is missing"),
        (("params", 0, "kind"), "porter.toml: params[0].kind is missing (buffer, scalar, scratch or tensormap)"),
        (("params", 0, "dtype"), "porter.toml: params[0].dtype is missing"),
        (("params", 0, "shape"), "porter.toml: params[0].shape is missing"),
        (("params", 5, "value"), "porter.toml: params[5].value is missing"),
    ],
)
def test_missing_keys(folder: Path, path: tuple[Any, ...], message: str) -> None:
    data = _data()
    target = data
    for step in path[:-1]:
        target = target[step]
    del target[path[-1]]
    assert _error(folder, data) == message


def test_no_output_buffer(folder: Path) -> None:
    data = _data()
    data["params"] = [p for p in data["params"] if p.get("role") not in ("out", "inout")]
    del data["tolerance"]
    assert (
        _error(folder, data) == "porter.toml: params: no out or inout buffer: porter needs an output to check"
    )


def test_size_cycle(folder: Path) -> None:
    data = _data()
    data["sizes"]["M"] = "lda * 2"
    data["sizes"]["K"] = "M - 8"
    assert _error(folder, data) == "porter.toml: sizes: size symbols form a cycle: lda -> K -> M -> lda"


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"M": 0}, "porter.toml: sweep[1]: params[0].shape[0]: must be at least 1 (got 0)"),
        ({"M": -5}, "porter.toml: sweep[1]: params[0].shape[0]: must be at least 1 (got -5)"),
        ({"T": 0}, "porter.toml: sweep[1]: launch.grid[0]: division by zero"),
        ({"T": 2048}, "porter.toml: sweep[1]: launch.shared: must be at most 232448 (got 524288)"),
        ({"K": "M // (N - 999)"}, "porter.toml: sweep[1].K: division by zero"),
        ({"M": 2**31}, "porter.toml: sweep[1]: params[5].value: 2147483648 does not fit in i32"),
    ],
)
def test_bad_sweep_entry_is_reported_with_its_index(
    folder: Path, override: dict[str, Any], message: str
) -> None:
    data = _data()
    data["sweep"][1].update(override)
    assert _error(folder, data).startswith(message)


def test_too_many_threads_in_a_sweep_entry(folder: Path) -> None:
    data = _data()
    data["sizes"]["W"] = 4
    data["launch"]["block"] = [128, "W"]
    data["sweep"][0]["W"] = 16
    assert (
        _error(folder, data) == "porter.toml: sweep[0]: launch.block: 2048 threads in a block (at most 1024)"
    )


def test_default_sizes_are_checked_even_with_a_sweep(folder: Path) -> None:
    data = _data()
    data["sizes"]["M"] = 0
    assert _error(folder, data) == "porter.toml: params[0].shape[0]: must be at least 1 (got 0)"


def test_toml_syntax_error(tmp_path: Path) -> None:
    (tmp_path / "porter.toml").write_text('[kernel]\nentry = "k"\nsizes = = 1\n[launch]\n')
    with pytest.raises(InputError) as info:
        load_spec(tmp_path / "porter.toml")
    message = str(info.value)
    assert message.startswith("porter.toml: TOML syntax error: ")
    assert "line 3" in message


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="spec file not found"):
        load_spec(tmp_path / "absent.toml")
    with pytest.raises(InputError, match=r"porter\.toml: spec file not found"):
        load_spec(tmp_path)


def test_not_utf8(tmp_path: Path) -> None:
    (tmp_path / "porter.toml").write_bytes(b'[kernel]\nentry = "\xff"\n')
    with pytest.raises(InputError, match=r"^porter\.toml: not UTF-8 text$"):
        load_spec(tmp_path / "porter.toml")


def test_public_methods_name_the_context(folder: Path) -> None:
    spec = load_spec(folder / "porter.toml")
    sizes = {**spec.default_sizes(), "M": 0}
    with pytest.raises(
        InputError, match=r"^porter\.toml: run 3: params\[0\]\.shape\[0\]: must be at least 1"
    ):
        spec.shape("A", sizes, context="run 3")


# --- matching the PTX entry -------------------------------------------------------------------


def _entry(*types: str, name: str = "gemm_bf16_sm80") -> Entry:
    params = tuple(Param(f"{name}_param_{i}", t, line=3 + i) for i, t in enumerate(types))
    return Entry(name=name, kind="entry", line=1, end_line=40, params=params)


_MATCHING = (".u64", ".u64", ".u64", ".u64", ".u64", ".u32", ".f32", ".u64")


def test_check_against_entry_agrees(folder: Path) -> None:
    spec = load_spec(folder / "porter.toml")
    assert check_against_entry(spec, _entry(*_MATCHING)) == []
    assert (
        check_against_entry(spec, _entry(".b64", ".s64", ".u64", ".u64", ".u64", ".b32", ".b32", ".u64"))
        == []
    )


def test_check_against_entry_count(folder: Path) -> None:
    spec = load_spec(folder / "porter.toml")
    problems = check_against_entry(spec, _entry(*_MATCHING[:-1]))
    assert problems == ["the spec lists 8 params but .entry gemm_bf16_sm80 has 7"]


def test_check_against_entry_widths_and_classes(folder: Path) -> None:
    spec = load_spec(folder / "porter.toml")
    types = list(_MATCHING)
    types[1] = ".u32"  # a pointer passed as 32 bits
    types[5] = ".u64"  # an i32 scalar passed as 64 bits
    types[6] = ".s32"  # an f32 scalar as an integer
    types[7] = ".f64"  # a pointer as a double
    assert check_against_entry(spec, _entry(*types)) == [
        "params[1] 'B': bf16 buffer pointer of 8 bytes, but PTX param gemm_bf16_sm80_param_1 is .u32 (4 bytes)",
        "params[5] 'M': i32 scalar of 4 bytes, but PTX param gemm_bf16_sm80_param_5 is .u64 (8 bytes)",
        "params[6] 'alpha': f32 scalar, but PTX param gemm_bf16_sm80_param_6 is .s32",
        "params[7] 'scratch': scratch pointer, but PTX param gemm_bf16_sm80_param_7 is .f64",
    ]


def test_check_against_entry_struct_param_and_name(folder: Path) -> None:
    spec = load_spec(folder / "porter.toml")
    params = (
        *(Param(f"p{i}", t, line=i) for i, t in enumerate(_MATCHING[:-1])),
        Param("desc", ".b8", line=9, align=64, array_size=128),
    )
    entry = Entry(name="other", kind="entry", line=1, end_line=2, params=params)
    assert check_against_entry(spec, entry) == [
        "the spec's kernel.entry is 'gemm_bf16_sm80' but the PTX entry is 'other'",
        "params[7] 'scratch': scratch pointer of 8 bytes, but PTX param desc is .b8[128] (128 bytes)",
    ]


# --- a candidate's own launch ---------------------------------------------------------------------


def test_a_candidate_declares_its_own_launch_and_entry() -> None:
    from porter.gate.spec import launch_directive, with_launch

    spec = load_spec(Path(__file__).resolve().parent.parent / "examples" / "gemm_bf16" / "porter.toml")
    text = ('.version 8.0\n// porter-launch: entry = "gemm_sm90a", grid = ["ceil_div(N, 256)", "ceil_div(M, 128)", 1], '
            "block = [384], shared = 196608\n")
    ported = with_launch(spec, launch_directive(text, source="k.ptx"), source="k.ptx")
    assert ported.entry == "gemm_sm90a"
    dims = ported.launch_dims({**spec.default_sizes(), "M": 4096, "N": 4096})
    assert dims.grid == (16, 32, 1) and dims.block == (384, 1, 1) and dims.shared == 196608
    assert spec.entry == "gemm_bf16_sm80"  # the spec itself is unchanged
    assert launch_directive(".version 8.0\n", source="k.ptx") is None


def test_a_bad_launch_directive_names_the_line_and_key() -> None:
    from porter.gate.spec import launch_directive, with_launch

    spec = load_spec(Path(__file__).resolve().parent.parent / "examples" / "vector_add" / "porter.toml")
    with pytest.raises(InputError, match=r"k\.ptx:2: porter-launch: not the inside of a TOML inline table"):
        launch_directive("x\n// porter-launch: grid = [\n", source="k.ptx")
    with pytest.raises(InputError, match=r"porter-launch: launch\.grid\[0\]: unknown size symbol 'Q'"):
        with_launch(spec, {"grid": ["Q"], "block": [256]}, source="k.ptx")
    with pytest.raises(InputError, match=r"k\.ptx: porter-launch: launch\.block\[0\]: must be at most 1024 \(got 2048\)"):
        with_launch(spec, {"grid": [1], "block": [2048]}, source="k.ptx")


# --- tensor maps (TMA descriptors) ----------------------------------------------------------------

GEMM_SPEC = Path(__file__).resolve().parent.parent / "examples" / "gemm_bf16" / "porter.toml"
TMA_A = 'name = "tmA", kind = "tensormap", tensor = "A", dims = ["M", "K"], box = [128, 64], swizzle = "128B"'


def _with_params(*bodies: str):
    from porter.gate.spec import launch_directive, with_launch

    text = "".join(f"// porter-param: {body}\n" for body in bodies) + ".version 8.0\n"
    return with_launch(load_spec(GEMM_SPEC), launch_directive(text, source="k.ptx"), source="k.ptx")


def test_a_candidate_adds_tensor_maps_over_the_specs_buffers() -> None:
    spec = _with_params(TMA_A)
    assert spec.params[-1].kind == "tensormap" and spec.launch == load_spec(GEMM_SPEC).launch
    geometry = spec.tensormap_geometry("tmA", {**spec.default_sizes(), "M": 77, "K": 40, "lda": 48})
    assert geometry.dims == (77, 40) and geometry.strides == (96,) and geometry.box == (128, 64)
    entry = Entry(name="gemm_bf16_sm80", kind="entry", line=1, end_line=2,
                  params=(*(Param(f"p{i}", ".u64" if i < 3 else ".u32", i) for i in range(9)),
                          Param("t", ".b8", 10, align=64, array_size=128)))
    assert check_against_entry(spec, entry) == []
    misaligned = Entry(name="gemm_bf16_sm80", kind="entry", line=1, end_line=2,
                       params=(*entry.params[:9], Param("t", ".b8", 10, align=8, array_size=128)))
    assert check_against_entry(spec, misaligned) == [
        "params[9] 'tmA': a tensor map must be 64-byte aligned (.param .align 64 .b8 t[128]), but PTX param t has align 8"
    ]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (TMA_A.replace('tensor = "A"', 'tensor = "M"'), r"params\[9\]\.tensor: must name a buffer param \(got 'M'"),
        (TMA_A.replace('["M", "K"]', '["K"]').replace("[128, 64]", "[64]"), r"params\[9\]\.dims: has 1 extents but buffer 'A' has 2 axes"),
        (TMA_A.replace("[128, 64]", "[128]"), r"params\[9\]\.box: must be an array of 2 integers"),
        (TMA_A.replace("[128, 64]", "[512, 64]"), r"params\[9\]\.box\[0\]: must be an integer from 1 to 256"),
        (TMA_A.replace('"128B"', '"96B"'), r"params\[9\]\.swizzle: must be one of none, 32B, 64B, 128B"),
        (TMA_A.replace('"128B"', '"64B"'), r"inner extent is 128 bytes, more than the 64B swizzle span"),
        (TMA_A.replace("[128, 64]", "[128, 4]"), r"inner extent is 8 bytes; TMA needs a multiple of 16"),
        (TMA_A.replace('["M", "K"]', '["M", "lda + 8"]'), r"dims\[1\]: must be at most"),
        ('name = "M", kind = "tensormap", tensor = "A", dims = ["M", "K"], box = [1, 8]', r"duplicate param name 'M'"),
        ('name = "extra", kind = "scalar", dtype = "i32", value = 1', r"a candidate can add only tensormap params"),
    ],
)
def test_bad_tensor_maps_are_refused_with_the_key(body: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        _with_params(body)


def test_a_tensor_map_over_a_stride_that_is_not_16_byte_aligned_is_refused_at_that_size() -> None:
    spec = _with_params(TMA_A)
    with pytest.raises(InputError, match=r"A's stride over axis 0 is 84 bytes; TMA needs a multiple of 16"):
        spec.tensormap_geometry("tmA", {**spec.default_sizes(), "K": 40, "lda": 42})


def test_time_at_overrides_sizes_and_recomputes_derived_ones() -> None:
    spec = load_spec(GEMM_SPEC)
    sizes = spec.timing_sizes({"M": 8192, "N": 7168, "K": 5120})
    assert sizes == {"M": 8192, "N": 7168, "K": 5120, "lda": 5120, "ldb": 7168, "ldc": 7168}
    with pytest.raises(InputError, match=r"--time-at Q=1: 'Q' is not a size symbol"):
        spec.timing_sizes({"Q": 1})
