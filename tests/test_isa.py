"""PTX ISA negotiation without a ptxas: the release table, what a module needs, and what porter says.

The same rules against real ptxas 12.9 and 13.x binaries are in ``test_cuda_releases.py``.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from porter.errors import EnvironmentProblem
from porter.ptx import parse_ptx
from porter.ptx.arch import compatibility, isa_floor, negotiate_version, version_problem
from porter.ptx.isa import (
    CUDA_PTX_ISA,
    IsaSupport,
    isa_of_release,
    parse_probe,
    ptx_key,
    release_for_isa,
    required_by_diagnostic,
)
from porter.ptx.retarget import fit_to_ptxas

PTXAS_12_9 = IsaSupport(ptxas="12.9.86", max_ptx="8.8", source="probed")
PTXAS_13_0 = IsaSupport(ptxas="13.0.88", max_ptx="9.0", source="probed")
PTXAS_12_6 = IsaSupport(ptxas="12.6.85", max_ptx="8.5", source="table")

BODY = "{\n.reg .b32 %r<2>;\nmov.u32 %r1, 1;\nret;\n}\n"


def module(version: str, target: str, body: str = BODY, entry_directives: str = ""):
    return parse_ptx(f".version {version}\n.target {target}\n.address_size 64\n\n"
                     f".visible .entry k(.param .u64 p){entry_directives}\n{body}")


def test_the_release_table() -> None:
    assert isa_of_release("12.9.86") == "8.8"
    assert isa_of_release("13.0") == "9.0"
    assert isa_of_release("12.8.93") == "8.7"
    assert isa_of_release("13.7.1") == "9.7"  # past the table, on the 13.x rule
    assert isa_of_release("14.0") is None and isa_of_release("unknown") is None
    assert release_for_isa("9.0") == "13.0"
    assert release_for_isa("8.8") == "12.9"
    assert release_for_isa("8.6") == "12.8"  # 12.7 never shipped
    assert release_for_isa("7.0") == "11.0"
    keys = [ptx_key(isa) for _, isa in CUDA_PTX_ISA]
    assert keys == sorted(keys), "a newer CUDA release never accepts less"


def test_ptxas_refusal_and_requirement_messages_are_read() -> None:
    assert parse_probe("ptxas probe.ptx, line 1; fatal   : Unsupported .version 99.9; current version is '8.8'\n"
                       "ptxas fatal   : Ptx assembly aborted due to errors") == "8.8"
    assert parse_probe("ptxas fatal   : Unknown option") is None
    assert required_by_diagnostic("Feature '.blocksareclusters' requires PTX ISA .version 9.0 or later") == "9.0"
    assert required_by_diagnostic("Arguments mismatch for instruction 'mov'") is None


def test_what_a_module_needs() -> None:
    plain = module("9.0", "sm_80")
    assert (isa_floor(plain).version, isa_floor(plain).what) == ("7.0", ".target sm_80")
    assert isa_floor(plain, "sm_100a").version == "8.6"
    elect = module("9.0", "sm_90", BODY.replace("mov.u32 %r1, 1;", "elect.sync %r1|%p1, -1;"))
    floor = isa_floor(elect)
    assert (floor.version, floor.line) == ("8.0", 8) and "elect.sync" in floor.what
    clusters = module("9.0", "sm_90", entry_directives="\n.blocksareclusters")
    assert (isa_floor(clusters).version, isa_floor(clusters).line) == ("9.0", 6)


def test_a_version_newer_than_ptxas_is_lowered_when_nothing_needs_it() -> None:
    choice = negotiate_version(module("9.0", "sm_80"), None, PTXAS_12_9)
    assert (choice.version, choice.problem) == ("8.8", "")
    assert choice.note == (".version 9.0 lowered to 8.8: ptxas 12.9.86 accepts PTX ISA up to 8.8, and nothing "
                           "in the module needs more than 7.0 (.target sm_80 at line 2)")
    # a ptxas that takes it: nothing changes, nothing is said
    assert negotiate_version(module("9.0", "sm_80"), None, PTXAS_13_0).version == "9.0"
    assert negotiate_version(module("9.0", "sm_80"), None, PTXAS_13_0).note == ""
    # without a ptxas to ask, porter only raises what the target needs
    assert negotiate_version(module("7.0", "sm_80"), "sm_100a").version == "8.6"


def test_what_needs_a_newer_ptx_isa_is_named_with_its_line_and_cuda_release() -> None:
    clusters = module("9.0", "sm_90", entry_directives="\n.blocksareclusters")
    problem = negotiate_version(clusters, None, PTXAS_12_9).problem
    assert problem == (".blocksareclusters on k at line 6 needs PTX ISA 9.0 (CUDA 13.0), but ptxas 12.9.86 accepts "
                       "PTX ISA up to 8.8: use CUDA 13.0 or newer (pip install -e '.[cuda13]' in porter's source "
                       "checkout, or --toolchain DIR / PORTER_CUDA_HOME)")
    assert "\n" not in problem
    thor = negotiate_version(module("9.0", "sm_110a"), None, PTXAS_12_9).problem
    assert thor.startswith(".target sm_110a at line 2 needs PTX ISA 9.0 (CUDA 13.0)")
    scaled = module("8.7", "sm_100a", BODY.replace(
        "mov.u32 %r1, 1;", "tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.scale_vec::4X [%r1], %rd1, %rd2, "
        "%r1, [%r1], [%r1], 1;"))
    problem = negotiate_version(scaled, None, PTXAS_12_6).problem
    assert problem.startswith("`tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.scale_vec::4X` "
                              "(tcgen05.mma.scale_vec) at line 8 needs PTX ISA 8.7 (CUDA 12.8), but ptxas "
                              "12.6.85 accepts PTX ISA up to 8.5")
    assert ".[cuda12]" in problem  # CUDA 12.9 brings it: no need for a CUDA 13 driver


def test_compatibility_follows_the_ptxas_in_use() -> None:
    kernel = module("9.0", "sm_100a")
    assert compatibility(kernel, "sm_100a").status == "as-is"
    lowered = compatibility(kernel, "sm_100a", PTXAS_12_9)
    assert (lowered.status, lowered.new_target, lowered.new_version) == ("retarget", "sm_100a", "8.8")
    assert lowered.reason.startswith(".version 9.0 lowered to 8.8") and lowered.note
    assert compatibility(kernel, "sm_100a", PTXAS_13_0).status == "as-is"
    retargeted = compatibility(module("9.0", "sm_90"), "sm_100", PTXAS_12_9)
    assert (retargeted.status, retargeted.new_version) == ("retarget", "8.8")
    too_old = compatibility(module("8.0", "sm_90"), "sm_110a", PTXAS_12_9)  # ptxas 12.9 has no sm_110a
    assert too_old.status == "needs newer ptxas"
    assert too_old.reason.startswith("assembling for sm_110a needs PTX ISA 9.0 (CUDA 13.0)")
    assert compatibility(module("8.0", "sm_90"), "sm_110a", PTXAS_13_0).status == "as-is"
    # an instruction the target lacks is still the first thing said
    wgmma = module("8.0", "sm_90a", BODY.replace("mov.u32 %r1, 1;", "wgmma.fence.sync.aligned;"))
    assert compatibility(wgmma, "sm_110a", PTXAS_12_9).status == "incompatible"


def test_a_candidate_is_told_which_version_to_write() -> None:
    assert version_problem(module("8.8", "sm_90"), None, PTXAS_12_9) is None
    assert version_problem(module("9.0", "sm_90"), None, None) is None
    said = version_problem(module("9.0", "sm_90"), None, PTXAS_12_9)
    assert said == (".version 9.0 (line 1) is newer than ptxas 12.9.86 accepts (PTX ISA up to 8.8): write .version "
                    "8.8 or lower; nothing in it needs more than 7.8 (.target sm_90)")
    clusters = module("8.8", "sm_90", entry_directives="\n.blocksareclusters")
    assert "needs PTX ISA 9.0 (CUDA 13.0)" in version_problem(clusters, None, PTXAS_12_9)


def test_a_source_is_fitted_to_the_ptxas_or_refused_in_one_line() -> None:
    kernel = module("9.0", "sm_80")
    text, note = fit_to_ptxas(kernel, PTXAS_12_9, filename="k.ptx")
    assert parse_ptx(text).version == "8.8" and "lowered to 8.8" in note
    assert text.replace(".version 8.8", ".version 9.0") == kernel.text  # nothing else changed
    assert fit_to_ptxas(kernel, PTXAS_13_0) == (kernel.text, "")
    with pytest.raises(EnvironmentProblem) as info:
        fit_to_ptxas(module("9.0", "sm_110a"), PTXAS_12_9, filename="k.ptx")
    assert str(info.value).startswith("k.ptx: .target sm_110a at line 2 needs PTX ISA 9.0 (CUDA 13.0)")
    assert info.value.exit_code == 3


VERSIONS = st.sampled_from([f"7.{n}" for n in range(9)] + [f"8.{n}" for n in range(9)] + ["9.0", "9.1", "9.5"])


@given(version=VERSIONS, accepted=VERSIONS, target=st.sampled_from(["sm_80", "sm_90", "sm_90a", "sm_100a", "sm_110a"]))
def test_negotiation_never_writes_what_ptxas_refuses_nor_less_than_needed(version: str, accepted: str,
                                                                         target: str) -> None:
    kernel = module(version, target)
    isa = IsaSupport("x", accepted, "table")
    choice = negotiate_version(kernel, None, isa)
    floor = isa_floor(kernel)
    assert floor is not None
    if ptx_key(floor.version) > ptx_key(accepted):
        assert choice.problem and floor.version in choice.problem
    else:
        assert not choice.problem
        assert ptx_key(floor.version) <= ptx_key(choice.version) <= ptx_key(accepted)
        assert choice.version == max(version, floor.version, key=ptx_key) or choice.version == accepted
        assert bool(choice.note) == (ptx_key(version) > ptx_key(accepted))
