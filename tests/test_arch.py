"""Arch profiles, feature matching, the ptxas target rules and the compatibility verdict (CPU only)."""

from __future__ import annotations

from pathlib import Path

import pytest

from porter.errors import InputError
from porter.ptx.arch import (
    ArchProfile,
    can_compile,
    compatibility,
    features_used,
    get_profile,
    load_features,
    load_profiles,
    normalize_arch,
    tensor_core_change,
)
from porter.ptx.model import Entry, Instruction, PtxModule

PROBES = Path(__file__).resolve().parent / "probes"

# Reference §1: the lowest .version ptxas accepts per .target.
MIN_PTX = {
    "sm_80": "7.0",
    "sm_86": "7.1",
    "sm_89": "7.8",
    "sm_90": "7.8",
    "sm_90a": "8.0",
    "sm_100": "8.6",
    "sm_100a": "8.6",
    "sm_100f": "8.8",
    "sm_103a": "8.8",
    "sm_110a": "9.0",
    "sm_120": "8.7",
    "sm_120a": "8.7",
}
REQUIRED_PROFILES = tuple(MIN_PTX)
REQUIRED_FEATURES = """
mma.sync mma.sync.fp8 mma.sync.f8f6f4 ldmatrix stmatrix cp.async cp.async.bulk cp.async.bulk.tensor mbarrier
mbarrier.expect_tx mbarrier.try_wait elect cluster fence.proxy.async griddepcontrol setmaxnreg wgmma tcgen05
tcgen05.shift tcgen05.mma.i8 clusterlaunchcontrol redux.sync.f32
""".split()  # noqa: SIM905 - a word list reads better here

WGMMA = "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16"
TCGEN05_MMA = "tcgen05.mma.cta_group::1.kind::f16"
MMA_BF16 = "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"
MMA_FP8 = "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32"
TMA_LOAD = "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"


def module(target: str, version: str, *opcodes: str) -> PtxModule:
    """A one-kernel module whose instructions sit on lines 10, 11, ..."""
    instructions = tuple(Instruction(line=10 + i, opcode=op) for i, op in enumerate(opcodes))
    entry = Entry(name="k", kind="entry", line=5, end_line=11 + len(opcodes), instructions=instructions)
    return PtxModule(
        version=version, target=(target,), address_size=64, entries=(entry,), version_line=1, target_line=2
    )


# --- loading ------------------------------------------------------------------------------------


def test_every_required_profile_exists_with_the_reference_minimum_ptx() -> None:
    profiles = load_profiles()
    assert set(REQUIRED_PROFILES) <= set(profiles)
    for name, version in MIN_PTX.items():
        assert profiles[name].min_ptx == version, name


def test_required_features_exist_and_min_ptx_matches_the_reference() -> None:
    features = load_features()
    assert set(REQUIRED_FEATURES) <= set(features)
    assert features["elect"].min_ptx == "8.0"
    assert features["cp.async.bulk.tensor"].min_ptx == "8.0"
    assert features["wgmma"].replacement_hint.startswith("Exists only on sm_90a")


@pytest.mark.parametrize("name", REQUIRED_PROFILES)
def test_profile_fields_are_consistent(name: str) -> None:
    p = load_profiles()[name]
    cc = int(name[3:].rstrip("af"))
    assert p.suffix == name[len(name.rstrip("af")) :]
    assert p.compute_capability == f"{cc // 10}.{cc % 10}"
    assert p.family == f"sm_{cc // 10}0"
    assert set(p.accepts) | set(p.rejects) == set(load_features())
    assert not set(p.accepts) & set(p.rejects)
    assert p.tensor_core in ("mma.sync", "wgmma", "tcgen05")
    assert p.supports(p.tensor_core)
    assert p.signature_ptx and p.signature_sass and p.ncu.metrics
    assert p.peak.source == "datasheet" and p.peak.sm_count > 0 and p.peak.bf16_dense_tflops > 0
    assert p.notes and "\n\n" not in p.notes.split("\n\n")[0]


def test_tensor_core_models_follow_the_reference() -> None:
    profiles = load_profiles()
    models = {name: p.tensor_core for name, p in profiles.items() if name in REQUIRED_PROFILES}
    assert models == {
        "sm_80": "mma.sync",
        "sm_86": "mma.sync",
        "sm_89": "mma.sync",
        "sm_90": "mma.sync",
        "sm_90a": "wgmma",
        "sm_100": "mma.sync",
        "sm_100a": "tcgen05",
        "sm_100f": "tcgen05",
        "sm_103a": "tcgen05",
        "sm_110a": "tcgen05",
        "sm_120": "mma.sync",
        "sm_120a": "mma.sync",
    }
    assert profiles["sm_90a"].signature_sass == ("HGMMA", "QGMMA", "IGMMA", "BGMMA")
    assert profiles["sm_90a"].ncu.metrics == ("sm__inst_executed_pipe_tensor_op_gmma.sum",)
    assert "UTCHMMA" in profiles["sm_100a"].signature_sass
    assert "sm__inst_executed_pipe_tc.sum" in profiles["sm_100a"].ncu.metrics
    assert {"QMMA", "OMMA"} <= set(profiles["sm_120a"].signature_sass)
    assert "neither wgmma nor tcgen05" in profiles["sm_120"].notes
    assert "wgmma exists only on sm_90a" in profiles["sm_90a"].notes


def test_notes_are_unwrapped_into_one_line_per_paragraph() -> None:
    notes = get_profile("sm_100a").notes
    assert "\n\n" in notes
    assert all("\n" not in paragraph for paragraph in notes.split("\n\n"))


def test_loaders_return_fresh_dicts() -> None:
    load_profiles().clear()
    load_features().clear()
    assert "sm_90a" in load_profiles() and "wgmma" in load_features()


# --- names ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("spelling", ["sm_90a", "sm90a", "90a", "SM_90A", " sm_90a ", "compute_90a"])
def test_arch_names_are_normalised(spelling: str) -> None:
    assert normalize_arch(spelling) == "sm_90a"
    assert get_profile(spelling).name == "sm_90a"


def test_unknown_arch_lists_the_known_ones() -> None:
    with pytest.raises(InputError) as info:
        get_profile("sm_95")
    assert "sm_95" in str(info.value) and "sm_80" in str(info.value) and "sm_120a" in str(info.value)
    assert info.value.exit_code == 2


@pytest.mark.parametrize("bad", ["", "hopper", "sm_9", "sm_90x", "sm_90af"])
def test_malformed_arch_names_are_input_errors(bad: str) -> None:
    with pytest.raises(InputError):
        normalize_arch(bad)


# --- feature matching ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("opcode", "expected"),
    [
        (MMA_BF16, {"mma.sync"}),
        (MMA_FP8, {"mma.sync", "mma.sync.fp8"}),
        ("mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.e2m1.e3m2.f32", {"mma.sync", "mma.sync.f8f6f4"}),
        ("mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.e4m3.e4m3.f32", {"mma.sync", "mma.sync.f8f6f4"}),
        ("mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.bf16.bf16.f32", {"mma.sync"}),
        ("ldmatrix.sync.aligned.m8n8.x4.shared.b16", {"ldmatrix"}),
        ("stmatrix.sync.aligned.m8n8.x4.shared.b16", {"stmatrix"}),
        ("cp.async.cg.shared.global", {"cp.async"}),
        ("cp.async.commit_group", {"cp.async"}),
        ("cp.async.wait_group", {"cp.async"}),
        ("cp.async.mbarrier.arrive.noinc.shared.b64", {"cp.async"}),
        ("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes", {"cp.async.bulk", "cluster"}),
        ("cp.async.bulk.commit_group", {"cp.async.bulk"}),
        (TMA_LOAD, {"cp.async.bulk.tensor", "cluster"}),
        ("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group", {"cp.async.bulk.tensor"}),
        ("cp.async.bulk.prefetch.tensor.2d.L2.global.tile", {"cp.async.bulk.tensor"}),
        ("cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group", {"cp.async.bulk.tensor"}),
        (
            "cp.async.bulk.tensor.2d.cta_group::2.shared::cluster.global.tile.mbarrier::complete_tx::bytes",
            {"cp.async.bulk.tensor", "cp.async.bulk.tensor.cta_group", "cluster"},
        ),
        ("mbarrier.init.shared.b64", {"mbarrier"}),
        ("mbarrier.arrive.expect_tx.shared::cta.b64", {"mbarrier", "mbarrier.expect_tx"}),
        ("mbarrier.try_wait.parity.shared::cta.b64", {"mbarrier", "mbarrier.try_wait"}),
        ("elect.sync", {"elect"}),
        ("fence.proxy.async.shared::cta", {"fence.proxy.async"}),
        ("fence.acq_rel.cluster", {"cluster"}),
        ("mapa.shared::cluster.u32", {"cluster"}),
        ("barrier.cluster.arrive", {"cluster"}),
        ("ld.shared::cluster.u32", {"cluster"}),
        ("griddepcontrol.wait", {"griddepcontrol"}),
        ("setmaxnreg.dec.sync.aligned.u32", {"setmaxnreg"}),
        (WGMMA, {"wgmma"}),
        ("wgmma.fence.sync.aligned", {"wgmma"}),
        (TCGEN05_MMA, {"tcgen05"}),
        ("tcgen05.mma.cta_group::1.kind::i8", {"tcgen05", "tcgen05.mma.i8"}),
        (
            "tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.scale_vec::4X",
            {"tcgen05", "tcgen05.mma.scale_vec"},
        ),
        ("tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.block16", {"tcgen05"}),
        ("tcgen05.shift.cta_group::1.down", {"tcgen05", "tcgen05.shift"}),
        ("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64", {"tcgen05", "cluster"}),
        (
            "clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128",
            {"clusterlaunchcontrol"},
        ),
        ("redux.sync.min.f32", {"redux.sync.f32"}),
        ("redux.sync.max.abs.NaN.f32", {"redux.sync.f32"}),
        ("redux.sync.add.u32", set()),
        ("cvt.rn.satfinite.e4m3x2.f32", {"cvt.fp8"}),
        ("cvt.rn.f16x2.e5m2x2", {"cvt.fp8"}),
        ("cvt.rn.satfinite.e2m1x2.f32", {"cvt.fp4"}),
        ("cvt.rn.f32.f16", set()),
        ("ld.global.v4.f32", set()),
        ("bar.sync", set()),
    ],
)
def test_opcodes_map_to_features(opcode: str, expected: set[str]) -> None:
    uses = features_used([Instruction(line=7, opcode=opcode)])
    assert {u.feature for u in uses} == expected
    assert all(u.line == 7 and u.opcode == opcode for u in uses)


def test_features_used_keeps_instruction_order() -> None:
    uses = features_used(module("sm_90a", "8.0", "elect.sync", "ld.global.u32", WGMMA).instructions())
    assert [(u.feature, u.line) for u in uses] == [("elect", 10), ("wgmma", 12)]


# --- ptxas target rules ---------------------------------------------------------------------------

FUTURE = "Program with .target '{src}' cannot be compiled to future architecture"
FAMILY = "Program with .target '{src}' cannot be compiled to different SM-family architecture"
SAME_CC = "PTX with .target '{src}' cannot be compiled for architecture '{dst}'"
LOWER = "SM version specified by .target is higher than default SM version assumed"


@pytest.mark.parametrize(
    ("src", "dst", "ok", "reason"),
    [
        # plain targets: forward compatible to every suffix
        ("sm_80", "sm_80", True, None),
        ("sm_80", "sm_86", True, None),
        ("sm_80", "sm_90a", True, None),
        ("sm_80", "sm_100a", True, None),
        ("sm_80", "sm_121f", True, None),
        ("sm_90", "sm_90a", True, None),
        ("sm_100", "sm_100f", True, None),
        ("sm_86", "sm_80", False, LOWER),
        ("sm_100", "sm_90a", False, LOWER),
        # 'f' targets: same family (major compute capability), equal or higher minor
        ("sm_100f", "sm_100", True, None),
        ("sm_100f", "sm_100a", True, None),
        ("sm_100f", "sm_103", True, None),
        ("sm_100f", "sm_103a", True, None),
        ("sm_100f", "sm_103f", True, None),
        ("sm_120f", "sm_121a", True, None),
        ("sm_100f", "sm_110a", False, FAMILY),
        ("sm_100f", "sm_120a", False, FAMILY),
        ("sm_110f", "sm_120", False, FAMILY),
        ("sm_103f", "sm_100", False, LOWER),
        ("sm_121f", "sm_120f", False, LOWER),
        # 'a' targets: only themselves
        ("sm_90a", "sm_90a", True, None),
        ("sm_90a", "sm_100a", False, FUTURE),
        ("sm_100a", "sm_103a", False, FUTURE),
        ("sm_100a", "sm_120a", False, FUTURE),
        ("sm_90a", "sm_90", False, SAME_CC),
        ("sm_100a", "sm_100", False, SAME_CC),
        ("sm_100a", "sm_100f", False, SAME_CC),
        ("sm_90a", "sm_89", False, LOWER),
    ],
)
def test_can_compile_follows_ptxas(src: str, dst: str, ok: bool, reason: str | None) -> None:
    got_ok, why = can_compile(src, dst)
    assert got_ok is ok
    if reason is not None:
        assert why == reason.format(src=src, dst=dst)


def test_can_compile_normalises_names() -> None:
    assert can_compile("90a", "SM_90A")[0]
    assert can_compile("sm80", "sm_100f") == (True, ".target sm_80 is forward-compatible with sm_100f")


# --- compatibility --------------------------------------------------------------------------------


def test_wgmma_module_is_incompatible_with_blackwell() -> None:
    m = module(
        "sm_90a", "8.0", "wgmma.fence.sync.aligned", WGMMA, "ld.global.u32", "wgmma.commit_group.sync.aligned"
    )
    c = compatibility(m, "sm_100a")
    assert c.status == "incompatible"
    assert c.new_target is None and c.new_version is None
    assert [(o.line, o.feature) for o in c.offenders] == [(10, "wgmma"), (11, "wgmma"), (13, "wgmma")]
    assert c.offenders[1].message == f"`{WGMMA}` at line 11 exists only on sm_90a"
    assert "tcgen05.mma" in c.offenders[1].hint
    assert "3 instruction(s)" in c.reason and "wgmma" in c.reason


def test_wgmma_module_assembles_as_is_on_its_own_target() -> None:
    c = compatibility(module("sm_90a", "8.0", WGMMA), "90a")
    assert (c.arch, c.status, c.offenders) == ("sm_90a", "as-is", ())
    assert "retarget" not in c.reason


def test_old_plain_module_is_forward_compatible_without_raising_the_version() -> None:
    m = module(
        "sm_80", "7.0", MMA_BF16, "cp.async.cg.shared.global", "ldmatrix.sync.aligned.m8n8.x4.shared.b16"
    )
    c = compatibility(m, "sm_100a")
    assert c.status == "as-is"
    assert c.new_target is None and c.new_version is None
    assert "forward-compatible" in c.reason
    assert "retarget to .target sm_100a to use its arch-specific instructions" in c.reason
    plain = compatibility(m, "sm_90")
    assert plain.status == "as-is" and "instructions newer than sm_80" in plain.reason


def test_arch_specific_module_is_retargeted_within_the_feature_set() -> None:
    m = module("sm_100a", "8.6", "tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32", TCGEN05_MMA)
    c = compatibility(m, "sm_103a")
    assert (c.status, c.new_target, c.new_version) == ("retarget", "sm_103a", "8.8")
    assert "cannot be compiled to future architecture" in c.reason
    f = compatibility(m, "sm_100f")
    assert (f.status, f.new_target, f.new_version) == ("retarget", "sm_100f", "8.8")
    assert compatibility(m, "sm_110a").new_version == "9.0"


def test_family_module_runs_on_a_later_member_as_is() -> None:
    c = compatibility(module("sm_100f", "8.8", TCGEN05_MMA), "sm_103a")
    assert c.status == "as-is"
    assert "same SM family" in c.reason


def test_tcgen05_is_incompatible_with_consumer_blackwell() -> None:
    c = compatibility(module("sm_100a", "8.6", TCGEN05_MMA), "sm_120a")
    assert c.status == "incompatible"
    assert (
        c.offenders[0].message
        == f"`{TCGEN05_MMA}` at line 10 exists only on sm_100a, sm_100f, sm_103a, sm_110a"
    )


def test_one_offender_per_instruction_names_the_narrowest_family() -> None:
    i8 = "tcgen05.mma.cta_group::1.kind::i8"
    c = compatibility(module("sm_100a", "8.6", i8), "sm_103a")
    assert c.status == "incompatible"
    assert [(o.feature, o.message) for o in c.offenders] == [
        ("tcgen05.mma.i8", f"`{i8}` at line 10 exists only on sm_100a, sm_110a")
    ]
    on_hopper = compatibility(module("sm_100a", "8.6", i8), "sm_90a")
    assert [o.feature for o in on_hopper.offenders] == ["tcgen05.mma.i8"]


def test_hopper_features_need_sm90_when_going_back_to_ampere() -> None:
    c = compatibility(module("sm_90", "8.0", "elect.sync", TMA_LOAD, MMA_BF16), "sm_80")
    assert c.status == "incompatible"
    assert [o.message for o in c.offenders] == [
        "`elect.sync` at line 10 needs sm_90 or newer",
        f"`{TMA_LOAD}` at line 11 needs sm_90 or newer",
    ]
    fp8 = compatibility(module("sm_89", "8.4", MMA_FP8), "sm_86")
    assert fp8.offenders[0].message == f"`{MMA_FP8}` at line 10 needs sm_89 or newer"


def test_retarget_version_is_the_highest_of_module_arch_and_features() -> None:
    # Down-porting a plain module: its own .version (7.8) and sm_89's (7.8) are below FP8 mma.sync's 8.4.
    c = compatibility(module("sm_90", "7.8", MMA_FP8), "sm_89")
    assert (c.status, c.new_target, c.new_version) == ("retarget", "sm_89", "8.4")
    # A Hopper TMA kernel without wgmma moves to sm_120 at sm_120's own minimum.
    t = compatibility(module("sm_90a", "8.0", TMA_LOAD, MMA_BF16), "sm_120")
    assert (t.status, t.new_version) == ("retarget", "8.7")
    # A module newer than the arch minimum keeps its version.
    assert compatibility(module("sm_90a", "8.5", MMA_BF16), "sm_120").new_version == "8.7"
    assert compatibility(module("sm_90a", "9.0", MMA_BF16), "sm_120").new_version == "9.0"


def test_compatibility_on_a_parsed_probe() -> None:
    parser = pytest.importorskip("porter.ptx.parser")
    path = PROBES / "wgmma.ptx"
    text = path.read_text()
    lines = [n for n, line in enumerate(text.splitlines(), 1) if line.strip().startswith("wgmma.")]
    c = compatibility(parser.parse_ptx(text, filename=path.name), "sm_100a")
    assert c.status == "incompatible"
    assert [o.line for o in c.offenders] == lines
    assert compatibility(parser.parse_ptx(text), "sm_90a").status == "as-is"


# --- tensor-core model changes and peaks ----------------------------------------------------------


def profiles(*names: str) -> list[ArchProfile]:
    return [get_profile(n) for n in names]


def test_tensor_core_change() -> None:
    hopper, b200, b200f, rtx, ampere, rtx_a = profiles(
        "sm_90a", "sm_100a", "sm_100f", "sm_120", "sm_80", "sm_120a"
    )
    to_blackwell = tensor_core_change(hopper, b200)
    assert to_blackwell is not None
    assert "wgmma does not exist on sm_100a" in to_blackwell and "tcgen05.mma" in to_blackwell
    to_hopper = tensor_core_change(ampere, hopper)
    assert to_hopper is not None and "mma.sync still assembles on sm_90a" in to_hopper
    to_consumer = tensor_core_change(b200, rtx)
    assert to_consumer is not None and "tcgen05 does not exist on sm_120" in to_consumer
    assert tensor_core_change(b200, b200f) is None
    assert tensor_core_change(ampere, rtx_a) is None


@pytest.mark.parametrize(
    ("arch", "device", "part", "tbps"),
    [
        ("sm_90a", "NVIDIA H200", "H200 SXM 141GB", 4.8),
        ("sm_90a", "NVIDIA H100 80GB HBM3", "H100 SXM5 80GB", 3.35),
        ("sm_90a", "NVIDIA H100 PCIe", "H100 PCIe 80GB", 2.0),
        ("sm_90a", "NVIDIA GH200 480GB", "GH200 (H100 96GB HBM3)", 4.0),
        ("sm_90a", "some future part", "H100 SXM5 80GB", 3.35),
        ("sm_89", "NVIDIA L40S", "L40S", 0.864),
        ("sm_89", "NVIDIA L4", "L4", 0.3),
        ("sm_80", "NVIDIA A100-SXM4-80GB", "A100 SXM4 80GB", 2.039),
        ("sm_80", "NVIDIA A100-SXM4-40GB", "A100 40GB (SXM4 or PCIe)", 1.555),
        ("sm_100a", "NVIDIA B200", "B200 SXM", 8.0),
    ],
)
def test_peak_for_picks_the_part_by_device_name(arch: str, device: str, part: str, tbps: float) -> None:
    tflops, got_tbps, got_part = get_profile(arch).peak_for(device)
    assert (got_part, got_tbps) == (part, tbps)
    assert tflops > 0
