"""retarget rewrites exactly the .target and .version lines; version_tuple compares versions."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from porter.errors import InputError
from porter.ptx import parse_ptx
from porter.ptx.retarget import retarget, version_tuple

DATA = Path(__file__).parent / "data" / "ptx"
FIXTURES = sorted(p.name for p in DATA.glob("*.ptx"))


def load(name: str) -> str:
    return (DATA / name).read_text()


def changed_lines(before: str, after: str) -> list[int]:
    a, b = before.splitlines(keepends=True), after.splitlines(keepends=True)
    return [n for n, (x, y) in enumerate(zip(a, b, strict=True), start=1) if x != y]


def test_version_tuple() -> None:
    assert version_tuple("8.0") == (8, 0)
    assert version_tuple("9.0") > version_tuple("8.8")
    assert version_tuple("8.10") > version_tuple("8.9")
    for bad in ("", "8", "8.x", "v8.0", "8.0.1"):
        with pytest.raises(InputError, match="bad PTX version"):
            version_tuple(bad)


def test_triton_sm90a_to_sm100a() -> None:
    before = load("triton_matmul_sm90a.ptx")
    after = retarget(before, "sm_100a", min_version="8.6")
    m = parse_ptx(after)
    assert (m.target, m.version) == (("sm_100a",), "8.6")
    assert changed_lines(before, after) == [5, 6]
    assert after.splitlines()[4:6] == [".version 8.6", ".target sm_100a"]
    old = parse_ptx(before)
    assert m.entries == old.entries  # nothing else moved


def test_never_lowers_without_explicit_version() -> None:
    before = load("vector_add.ptx")  # .version 7.8
    after = retarget(before, "sm_100a", min_version="7.0")
    assert parse_ptx(after).version == "7.8"
    assert changed_lines(before, after) == [10]
    assert retarget(before, "sm_90") == before  # same target, no version change: identical


def test_explicit_version_may_lower() -> None:
    after = retarget(load("vector_add.ptx"), "sm_80", version="7.0")
    assert (parse_ptx(after).version, parse_ptx(after).arch) == ("7.0", "sm_80")
    after = retarget(load("vector_add.ptx"), "sm_100a", version="8.8", min_version="8.6")
    assert parse_ptx(after).version == "8.8"
    with pytest.raises(InputError, match="below the minimum"):
        retarget(load("vector_add.ptx"), "sm_100a", version="8.0", min_version="8.6")


def test_keeps_other_target_options_and_comments() -> None:
    before = load("edge_cases.ptx")
    after = retarget(before, "sm_120a", min_version="8.7")
    assert after.splitlines()[4:6] == [
        ".version 8.7 // trailing comment",
        ".target sm_120a, texmode_independent",
    ]
    assert parse_ptx(after).target == ("sm_120a", "texmode_independent")
    assert changed_lines(before, after) == [5, 6]


def test_keeps_debug_option_of_a_debug_build() -> None:
    before = load("indirect_debug.ptx")
    after = retarget(before, "sm_100a")
    assert parse_ptx(after).target == ("sm_100a", "debug")
    assert changed_lines(before, after) == [10]


def test_only_the_directive_is_touched_not_comments() -> None:
    before = "// .target sm_52 and .version 1.0\n.version 8.0\n.target sm_80 // was .target sm_70\n"
    after = retarget(before, "sm_90a", min_version="8.1")
    assert after == "// .target sm_52 and .version 1.0\n.version 8.1\n.target sm_90a // was .target sm_70\n"


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_line_endings_and_trailing_text_preserved(newline: str) -> None:
    before = load("reduce_asm.ptx").replace("\n", newline).rstrip("\r\n")  # no final line break
    after = retarget(before, "sm_100f", min_version="7.0")
    want = before.replace(
        f".version 7.8{newline}.target sm_90{newline}", f".version 7.8{newline}.target sm_100f{newline}"
    )
    assert after == want
    after = retarget(before, "sm_110a", min_version="9.0")
    assert after.count(newline) == before.count(newline)


def test_idempotent() -> None:
    once = retarget(load("rdc_cluster.ptx"), "sm_120", min_version="8.7")
    assert retarget(once, "sm_120", min_version="8.7") == once


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (".target sm_90\n.entry k() {\n}\n", "<ptx>: no .version directive"),
        (".version 8.0\n.entry k() {\n}\n", "<ptx>: no .target directive"),
        ("garbage", "<ptx>:1: expected a PTX directive"),
        ("", "<ptx>: empty file"),
    ],
)
def test_refuses_modules_without_header(text: str, message: str) -> None:
    with pytest.raises(InputError) as info:
        retarget(text, "sm_90")
    assert str(info.value).startswith(message)


def test_error_names_the_file() -> None:
    with pytest.raises(InputError, match=r"^gemm\.ptx: no \.target directive"):
        retarget(".version 8.0\n", "sm_90", filename="gemm.ptx")


@pytest.mark.parametrize("target", ["compute_90", "sm90", "sm_", "sm_90, debug", "", "sm_90ab"])
def test_bad_target_argument(target: str) -> None:
    with pytest.raises(InputError, match="bad target"):
        retarget(load("vector_add.ptx"), target)


@pytest.mark.parametrize(("version", "min_version"), [("x", None), (None, "8"), ("8.0.0", None)])
def test_bad_version_argument(version: str | None, min_version: str | None) -> None:
    with pytest.raises(InputError, match="bad PTX version"):
        retarget(load("vector_add.ptx"), "sm_90", version=version, min_version=min_version)


@settings(max_examples=100, deadline=None)
@given(
    name=st.sampled_from(FIXTURES),
    target=st.sampled_from(["sm_80", "sm_90", "sm_90a", "sm_100a", "sm_100f", "sm_120a", "sm_121f"]),
    floor=st.tuples(st.integers(6, 9), st.integers(0, 9)),
)
def test_round_trip(name: str, target: str, floor: tuple[int, int]) -> None:
    before = load(name)
    old = parse_ptx(before)
    min_version = f"{floor[0]}.{floor[1]}"
    after = retarget(before, target, min_version=min_version)
    new = parse_ptx(after)
    assert new.arch == target
    assert new.target[1:] == old.target[1:]
    assert version_tuple(new.version) == max(version_tuple(old.version), floor)
    assert set(changed_lines(before, after)) <= {old.version_line, old.target_line}
    assert new.entries == old.entries
