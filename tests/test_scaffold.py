"""porter spec on what compilers really write: Triton 3.6 and nvcc 13 output for sm_90a, whose
interfaces are known (tools/make_triton_fixtures.py and tests/data/compiled/nvcc/kernels.cu say
what each kernel takes), and porter's own examples, whose hand-written specs are the truth.

Each scaffold must load (its todo list allowed), match its entry, and get right what the code
settles: param kinds, dtypes, roles, block, dynamic shared memory, clusters, scratch pointers;
what it cannot settle must be in the todo list, and nothing it did settle may be."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from porter._toml import tomllib
from porter.errors import InputError
from porter.gate.scaffold import choose_entry, scaffold_file, scaffold_spec
from porter.gate.spec import Spec, check_against_entry, load_spec
from porter.ptx import PtxModule, parse_ptx, read_ptx

ROOT = Path(__file__).resolve().parent.parent
COMPILED = ROOT / "tests" / "data" / "compiled"
TRITON = COMPILED / "triton"
NVCC = COMPILED / "nvcc" / "kernels.ptx"


def scaffold(kernel: Path, tmp_path: Path, entry: str | None = None) -> tuple[Spec, list[str], str]:
    """(the spec porter spec writes, its todo list, its text), written and loaded as a user would."""
    text, _ = scaffold_file(kernel, entry)
    path = tmp_path / "porter.toml"
    path.write_text(text)
    return load_spec(path, allow_todo=True), tomllib.loads(text)["todo"], text


def shape_of(spec: Spec) -> list[tuple]:
    """Each param as (kind, dtype, role) for buffers, (kind, dtype) for scalars, (kind,) for scratch."""
    out: list[tuple] = []
    for p in spec.params:
        if p.kind == "buffer":
            out.append(("buffer", str(p.dtype), p.role))
        elif p.kind == "scalar":
            out.append(("scalar", str(p.dtype)))
        else:
            out.append((p.kind,))
    return out


def b(dtype: str, role: str) -> tuple:
    return ("buffer", dtype, role)


def s(dtype: str) -> tuple:
    return ("scalar", dtype)


SCRATCH = ("scratch",)
I32 = s("i32")

# name -> (params, block, shared, cluster), as the kernels in tools/make_triton_fixtures.py take them
TRITON_TRUTH = {
    "matmul_kernel": ([b("f16", "in"), b("f16", "in"), b("f16", "out"), *[I32] * 6, SCRATCH, SCRATCH],
                      (128, 1, 1), 98304, None),
    "attn_fwd": ([b("f16", "in"), b("f16", "in"), b("f16", "in"), s("f32"), b("f32", "out"), b("f16", "out"),
                  *[I32] * 14, SCRATCH, SCRATCH], (256, 1, 1), 65536, None),
    "softmax_kernel": ([b("f32", "out"), b("f32", "in"), *[I32] * 3, SCRATCH, SCRATCH], (128, 1, 1), 16, None),
    "layer_norm_fwd": ([b("bf16", "in"), b("bf16", "out"), b("f32", "in"), b("f32", "in"), b("f32", "out"),
                        b("f32", "out"), I32, I32, s("f32"), SCRATCH, SCRATCH], (256, 1, 1), 32, None),
    "attn_bwd_preprocess": ([b("f16", "in"), b("f16", "in"), b("f32", "out"), I32, SCRATCH, SCRATCH],
                            (128, 1, 1), 512, None),
    "num_ctas2/matmul_kernel": ([b("f16", "in"), b("f16", "in"), b("f16", "out"), *[I32] * 6, SCRATCH, SCRATCH],
                                (128, 1, 1), 73728, (2, 1, 1)),
}


def test_the_triton_fixtures_are_triton_3_6_output_for_sm_90a() -> None:
    for name in TRITON_TRUTH:
        meta = json.loads((TRITON / f"{name}.json").read_text())
        assert meta["triton_version"] == "3.6.0" and meta["target"]["arch"] == 90
        assert read_ptx(TRITON / f"{name}.ptx").arch == "sm_90a"


@pytest.mark.parametrize("name", sorted(TRITON_TRUTH))
def test_triton_kernels_params_dtypes_block_shared_and_scratch_come_out_right(name: str, tmp_path: Path) -> None:
    params, block, shared, cluster = TRITON_TRUTH[name]
    spec, todo, _ = scaffold(TRITON / f"{name}.ptx", tmp_path)
    entry = read_ptx(TRITON / f"{name}.ptx").kernels[0]
    assert check_against_entry(spec, entry) == []
    assert shape_of(spec) == params
    sizes = spec.default_sizes()
    dims = spec.launch_dims(sizes)
    assert (dims.block, dims.shared, dims.cluster) == (block, shared, cluster)
    # Triton's global and profile scratch: 0 bytes a program in each one's metadata, so null pointers
    assert [spec.scratch_bytes(p, sizes) for p in spec.params if p.kind == "scratch"] == [0, 0]
    # Only what porter cannot know is left to the user: no dtype, role, block or shared memory.
    assert not [t for t in todo if t.endswith((".dtype", ".role")) or t in ("launch.block", "launch.shared")]
    shapes = [f"params[{i}].shape" for i, p in enumerate(spec.params) if p.kind == "buffer"]
    values = [f"params[{i}].value" for i, p in enumerate(spec.params) if p.kind == "scalar" and p.dtype.is_float]
    assert sorted(todo) == sorted(["sizes", *shapes, *values, "launch.grid", "reference"])


def test_the_matmul_and_attention_specs_say_where_they_read_each_value(tmp_path: Path) -> None:
    _, _, text = scaffold(TRITON / "attn_fwd.ptx", tmp_path)
    assert "f16 is the kernel's only 2-byte float type (wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16" in text
    assert 'shared = 65536  # attn_fwd.json: "shared": 65536' in text
    assert "Triton's profile scratch; attn_fwd.json: profile_scratch_size = 0, a null pointer" in text
    assert "block = [256, 1, 1]  # .reqntid 256" in text
    # the sequence length bounds the loop; the strides offset Q, K, V and Out
    assert 'value = "param_19"  # compared at line' in text and 'value = "param_8"  # offsets param_0' in text


def test_triton_scratch_with_a_size_is_a_guess_tied_to_the_grid(tmp_path: Path) -> None:
    # copy_tma builds its TMA descriptors in Triton's global scratch (256 bytes a program); its data
    # pointers only reach tensormap.replace, which porter does not follow: roles and dtypes are guesses.
    spec, todo, text = scaffold(TRITON / "copy_tma.ptx", tmp_path)
    assert [p.kind for p in spec.params] == ["buffer", "buffer", "scalar", "scalar", "scratch", "scratch"]
    assert "params[4].bytes" in todo and "global_scratch_size = 256 bytes a program" in text
    assert {"params[0].role", "params[1].role", "params[0].dtype", "params[1].dtype"} <= set(todo)
    assert "tensormap.replace.tile.global_address" in text


def test_without_the_metadata_the_ptx_still_settles_block_and_says_shared_is_unknown(tmp_path: Path) -> None:
    kernel = tmp_path / "attn_fwd.ptx"
    shutil.copyfile(TRITON / "attn_fwd.ptx", kernel)
    (tmp_path / "spec").mkdir()
    spec, todo, text = scaffold(kernel, tmp_path / "spec")
    assert spec.launch_dims(spec.default_sizes()).block == (256, 1, 1)
    assert "launch.shared" in todo and ".extern .shared global_smem[], line 10" in text
    # without Triton's word for it, an untouched trailing pointer is still scratch: nothing reads it
    assert [p.kind for p in spec.params][-2:] == ["scratch", "scratch"]
    assert [str(p.dtype) for p in spec.params[:6] if p.kind == "buffer"] == ["f16", "f16", "f16", "f32", "f16"]


@pytest.mark.parametrize("content, note", [
    ("not json", "is not JSON"),
    (json.dumps({"name": "other_kernel", "num_warps": 4, "shared": 1024}), "describes kernel 'other_kernel'"),
    (json.dumps({"hello": 1}), "is not Triton's compile metadata"),
])
def test_a_json_that_is_not_this_kernels_metadata_is_named_and_ignored(content: str, note: str, tmp_path: Path) -> None:
    shutil.copyfile(TRITON / "attn_fwd.ptx", tmp_path / "attn_fwd.ptx")
    (tmp_path / "attn_fwd.json").write_text(content)
    text, _ = scaffold_file(tmp_path / "attn_fwd.ptx")
    assert f"# note: attn_fwd.json {note}" in text and '"launch.shared"' in text


# entry -> params, as kernels.cu declares them; the block and shared memory that the PTX leaves open
NVCC_TRUTH = {
    "_Z7row_sumPK6__halfPfii": [b("f16", "in"), b("f32", "out"), I32, I32],
    "_Z10scale_bf16PK13__nv_bfloat16PS_if": [b("bf16", "in"), b("bf16", "out"), I32, s("f32")],
    "_Z9wmma_bf16PK13__nv_bfloat16S1_Pfiii": [b("bf16", "in"), b("bf16", "in"), b("f32", "out"), I32, I32, I32],
    "_Z9histogramPKiPjii": [b("i32", "in"), b("u32", "inout"), I32, I32],
    "axpy_inplace": [b("f32", "in"), b("f32", "inout"), SCRATCH, I32, s("f32")],
    "axpy_inplace_x2": [b("f32", "in"), b("f32", "inout"), SCRATCH, I32, s("f32")],
    "_Z10wgmma_tilePK13__nv_bfloat16S1_Pf": [b("bf16", "in"), b("bf16", "in"), b("f32", "out")],
}


@pytest.mark.parametrize("entry", sorted(NVCC_TRUTH))
def test_nvcc_kernels_params_dtypes_and_roles_come_out_right(entry: str, tmp_path: Path) -> None:
    spec, todo, _ = scaffold(NVCC, tmp_path, entry)
    assert check_against_entry(spec, read_ptx(NVCC).entry(entry)) == []
    assert shape_of(spec) == NVCC_TRUTH[entry]
    assert not [t for t in todo if t.endswith(".dtype")]


def test_nvcc_launch_bounds_clusters_and_dynamic_shared_memory(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    spec, todo, text = scaffold(NVCC, tmp_path / "a", "_Z7row_sumPK6__halfPfii")
    # __launch_bounds__(256) is .maxntid: a bound, not the block; extern __shared__ needs a size
    assert {"launch.block", "launch.shared"} <= set(todo)
    assert "(.extern .shared partial[], line 16)" in text
    assert 'description = "row_sum(const __half*, float*, int, int) for sm_90a"' in text
    (tmp_path / "b").mkdir()
    spec, todo, _ = scaffold(NVCC, tmp_path / "b", "_Z10scale_bf16PK13__nv_bfloat16PS_if")
    dims = spec.launch_dims(spec.default_sizes())
    assert dims.cluster == (2, 1, 1) and dims.grid[0] % 2 == 0 and "launch.shared" not in todo
    (tmp_path / "c").mkdir()
    _, todo, text = scaffold(NVCC, tmp_path / "c", "_Z9histogramPKiPjii")
    assert "params[1].role" in todo and "read-modify-written (1 atomic" in text
    (tmp_path / "d").mkdir()
    _, todo, text = scaffold(NVCC, tmp_path / "d", "axpy_inplace")
    assert 'bytes = "0"  # the kernel never loads or stores through it: a null pointer' in text


def test_several_entries_need_a_choice() -> None:
    module = read_ptx(NVCC)
    with pytest.raises(InputError, match=r"the module has 7 entries .*axpy_inplace.*: choose one with --entry"):
        choose_entry(module, None)
    with pytest.raises(InputError, match=r"--entry nope: no such \.entry \(entries: _Z7row_sum"):
        choose_entry(module, "nope")


# porter's examples: their hand-written specs are the truth (params in order: kind, dtype, role)
EXAMPLES = ["examples/vector_add/kernel.ptx", "examples/softmax/kernel.ptx", "examples/gemm_bf16/kernel_sm80.ptx",
            "examples/gemm_bt_tile/kernel_sm80.ptx", "examples/gemm_bt_tile/kernel_sm90a.ptx"]


@pytest.mark.parametrize("kernel", EXAMPLES)
def test_the_examples_scaffold_to_their_own_specs(kernel: str, tmp_path: Path) -> None:
    spec, _, _ = scaffold(ROOT / kernel, tmp_path)
    truth = load_spec(ROOT / kernel.rsplit("/", 1)[0] / "porter.toml")
    module = read_ptx(ROOT / kernel)
    assert check_against_entry(spec, choose_entry(module, None)) == []
    expected = shape_of(truth)
    if kernel.endswith("gemm_bf16/kernel_sm80.ptx"):
        # the hand spec makes C inout to keep its padding columns (ldc > N): the kernel only stores it
        expected[2] = b("bf16", "out")
    assert shape_of(spec) == expected


def test_the_scaffold_of_a_plain_kernel_loads_and_matches(tmp_path: Path) -> None:
    module = read_ptx(ROOT / "examples" / "inspect" / "plain_sm90.ptx")  # .maxntid 128, clusters of 2
    text = scaffold_spec(module, choose_entry(module, None))
    (tmp_path / "porter.toml").write_text(text)
    spec = load_spec(tmp_path / "porter.toml", allow_todo=True)
    assert check_against_entry(spec, module.kernels[0]) == []
    assert "block = [128, 1, 1]" in text and "cluster = [2, 1, 1]" in text


def test_the_command_writes_once_and_never_overwrites(tmp_path: Path) -> None:
    kernel = tmp_path / "k.ptx"
    kernel.write_text((ROOT / "examples" / "vector_add" / "kernel.ptx").read_text())
    run = [sys.executable, "-m", "porter", "spec", str(kernel)]
    first = subprocess.run(run, capture_output=True, text=True, cwd=ROOT)
    assert first.returncode == 0, first.stderr
    assert "fill in every item of its todo list" in first.stdout
    before = (tmp_path / "porter.toml").read_text()
    second = subprocess.run(run, capture_output=True, text=True, cwd=ROOT)
    assert second.returncode == 2 and "never overwrites" in second.stderr
    assert (tmp_path / "porter.toml").read_text() == before


def test_the_command_names_the_entries_of_a_module_of_several(tmp_path: Path) -> None:
    run = [sys.executable, "-m", "porter", "spec", str(NVCC), "--out", str(tmp_path / "s.toml")]
    r = subprocess.run(run, capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "choose one with --entry" in r.stderr
    r = subprocess.run([*run, "--entry", "axpy_inplace_x2"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert 'entry = "axpy_inplace_x2"' in (tmp_path / "s.toml").read_text()


# Triton 3.6.0 output made on the H200 (the lead's fixtures: each folder's launch.json records the
# call that compiled it: every argument's kind and dtype, num_warps). The outputs by name:
H200 = COMPILED / "triton_h200"
H200_OUTPUTS = {"attn_bwd_dkdv": {"dk_ptr", "dv_ptr"}, "attn_bwd_dq": {"dq_ptr"}, "attn_bwd_preprocess": {"delta_ptr"},
                "attn_fwd": {"o_ptr", "lse_ptr"}, "layernorm": {"y_ptr", "mean_ptr", "rstd_ptr"},
                "matmul": {"c_ptr"}, "softmax": {"y_ptr"}}
_NUMPY_NAMES = {"float16": "f16", "bfloat16": "bf16", "float32": "f32"}


@pytest.mark.parametrize("name", sorted(H200_OUTPUTS))
def test_triton_kernels_compiled_on_the_h200_come_out_as_they_were_called(name: str, tmp_path: Path) -> None:
    folder = H200 / name
    launch = json.loads((folder / "launch.json").read_text())
    (kernel,) = folder.glob("*.ptx")
    spec, todo, _ = scaffold(kernel, tmp_path)
    expected = []
    for arg, a in launch["args"].items():
        if a["kind"] == "tensor":
            expected.append(b(_NUMPY_NAMES[a["dtype"]], "out" if arg in H200_OUTPUTS[name] else "in"))
        else:
            expected.append(s("f32" if a["python"] == "float" else "i32"))
    assert shape_of(spec) == [*expected, SCRATCH, SCRATCH]
    meta = json.loads(kernel.with_suffix(".json").read_text())
    dims = spec.launch_dims(spec.default_sizes())
    assert (dims.block, dims.shared) == ((32 * launch["num_warps"], 1, 1), meta["shared"])
    assert not [t for t in todo if t.endswith((".dtype", ".role")) or t in ("launch.block", "launch.shared")]


def test_triton_ir_beside_the_ptx_names_the_params_and_says_what_was_specialised(tmp_path: Path) -> None:
    spec, _, text = scaffold(H200 / "layernorm" / "layernorm_kernel.ptx", tmp_path)
    assert [p.name for p in spec.params] == ["x_ptr", "w_ptr", "b_ptr", "y_ptr", "mean_ptr", "rstd_ptr", "N", "eps",
                                             "global_scratch", "profile_scratch"]
    assert list(spec.sizes) == ["N"] and 'dtype = "bf16"  # declared *bf16 in layernorm_kernel.ttgir' in text
    assert "Triton specialised" not in text  # layernorm's N was not a multiple of 16 when it was compiled
    (tmp_path / "mm").mkdir()
    _, _, text = scaffold(H200 / "matmul" / "matmul_kernel.ptx", tmp_path / "mm")
    assert "# Triton specialised M, N, K, stride_am, stride_bk, stride_cm as multiples of 16" in text


def test_triton_ir_that_does_not_fit_the_ptx_is_not_used(tmp_path: Path) -> None:
    for suffix in (".ptx", ".json"):
        shutil.copyfile(H200 / "softmax" / f"softmax_kernel{suffix}", tmp_path / f"softmax_kernel{suffix}")
    ir = (H200 / "softmax" / "softmax_kernel.ttgir").read_text()
    (tmp_path / "softmax_kernel.ttgir").write_text(ir.replace("%stride: i32", "%stride: !tt.ptr<f32>"))
    (tmp_path / "spec").mkdir()
    spec, _, _ = scaffold(tmp_path / "softmax_kernel.ptx", tmp_path / "spec")
    assert [p.name for p in spec.params][:4] == ["param_0", "param_1", "param_2", "param_3"]


_PARAM_TYPES = st.sampled_from([".u64", ".u64 .ptr .global .align 1", ".b64", ".u32", ".s32", ".f32", ".b32", ".f64"])
_LINES = st.sampled_from([
    "ld.param.u64 %rd1, [p0];", "ld.param.u64 %rd2, [p1];", "ld.param.b64 %rd3, [p2];", "ld.param.u32 %r1, [p1];",
    "cvta.to.global.u64 %rd4, %rd1;", "mul.wide.s32 %rd5, %r1, 4;", "add.s64 %rd6, %rd4, %rd5;",
    "ld.global.f32 %f1, [%rd6];", "st.global.f32 [%rd2], %f1;", "atom.global.add.u32 %r2, [%rd3], 1;",
    "setp.lt.s32 %p1, %r1, %r3;", "st.global.b16 [%rd3], %rs1;", "cvt.rn.bf16.f32 %rs1, %f1;",
])


@settings(max_examples=60, deadline=None)
@given(types=st.lists(_PARAM_TYPES, min_size=1, max_size=5), lines=st.lists(_LINES, max_size=12))
def test_any_entry_scaffolds_to_a_spec_that_loads_and_matches(types: list[str], lines: list[str],
                                                              tmp_path_factory: pytest.TempPathFactory) -> None:
    params = ", ".join(f".param {t} p{i}" for i, t in enumerate(types))
    text = (f".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k({params})\n{{\n"
            + "\n".join(lines) + "\nret;\n}\n")
    module = parse_ptx(text)
    if not any(t.split()[0] in (".u64", ".b64") for t in types):
        return  # no pointer, no output: nothing a spec could check
    folder = tmp_path_factory.mktemp("spec")
    (folder / "porter.toml").write_text(scaffold_spec(module, module.kernels[0]))
    spec = load_spec(folder / "porter.toml", allow_todo=True)
    assert check_against_entry(spec, module.kernels[0]) == []


def test_a_tma_descriptor_param_is_a_todo_item_and_the_rest_is_written(tmp_path: Path) -> None:
    """#29: a `.param .align 64 .b8 name[128]` made porter spec refuse the whole kernel."""
    kernel = ROOT / "examples" / "gemm_bf16" / "kernel_sm90a.ptx"
    module = read_ptx(kernel)
    text = scaffold_spec(module, choose_entry(module, None))
    (tmp_path / "porter.toml").write_text(text)
    spec = load_spec(tmp_path / "porter.toml", allow_todo=True)
    assert [p.kind for p in spec.params][-2:] == ["tensormap", "tensormap"]
    assert check_against_entry(spec, module.kernels[0]) == []
    assert '"params[9].tensor",' in text and '"params[10].tensor",' in text
    assert all(p.name not in spec.default_sizes() for p in spec.params if p.kind == "tensormap")
    struct = text_of_entry(".param .align 8 .b8 s[24]")
    with pytest.raises(InputError, match=r"b8\[24\] \(a struct\)"):
        scaffold_spec(struct, struct.kernels[0])


def text_of_entry(param: str) -> PtxModule:
    return parse_ptx(f".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k(.param .u64 p0, {param})\n"
                     "{\nld.param.u64 %rd1, [p0];\nst.global.f32 [%rd1], %f1;\nret;\n}\n")
