"""Every parser of user or tool input, fuzzed: it returns a result or raises porter's one-line
InputError, never anything else (a traceback is a bug)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from porter.agent.prompts import parse_agent
from porter.errors import InputError
from porter.gate.nsight import parse_details_csv, parse_sanitizer, parse_source_csv
from porter.gate.spec import launch_directive, parse_spec, with_launch

ROOT = Path(__file__).resolve().parent.parent
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True),
                    st.text(max_size=20))
toml_like = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                          st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                         max_leaves=20)
keys = st.sampled_from(["kernel", "sizes", "sweep", "params", "launch", "reference", "tolerance", "cost",
                        "baseline", "profile", "entry", "grid", "block", "name", "kind", "dtype", "shape", "role"])


@FUZZ
@given(st.dictionaries(keys, toml_like, max_size=8))
def test_spec_parser_takes_any_table(data) -> None:
    try:
        parse_spec(data, base_dir=ROOT / "examples" / "vector_add", source="fuzz.toml")
    except InputError as err:
        assert "\n" not in str(err)


def _vector_add_spec():
    from porter.gate.spec import load_spec

    return load_spec(ROOT / "examples" / "vector_add" / "porter.toml")


@FUZZ
@given(st.text(max_size=200))
def test_launch_directive_takes_any_line(body: str) -> None:
    text = f".version 8.0\n// porter-launch:{body}\n"
    try:
        table = launch_directive(text, source="k.ptx")
        if table is not None:
            with_launch(_vector_add_spec(), table, source="k.ptx")
    except InputError as err:
        assert str(err).startswith("k.ptx")


@FUZZ
@given(st.dictionaries(st.sampled_from(["entry", "grid", "block", "shared", "cluster", "other"]), toml_like,
                       max_size=5))
def test_launch_override_takes_any_table(table) -> None:
    try:
        with_launch(_vector_add_spec(), table, source="k.ptx")
    except InputError as err:
        assert str(err).startswith("k.ptx")


@FUZZ
@given(st.text(max_size=400))
def test_tool_output_parsers_never_raise(text: str) -> None:
    parse_source_csv(text)
    parse_details_csv(text)
    parse_sanitizer("memcheck", text)
    parse_source_csv('"Address","Source","Instructions Executed"\n' + text)
    parse_sanitizer("racecheck", "========= " + text.replace("\n", "\n========= "))


@FUZZ
@given(st.text(max_size=300))
def test_agent_files_take_any_text(body: str) -> None:
    for text in (body, f"---\n{body}\n---\nprompt\n", f"---\nname: fuzz\n{body}\n---\n{body}"):
        try:
            parse_agent(text, path=Path("fuzz.md"))
        except InputError as err:
            assert "fuzz.md" in str(err)


@FUZZ
@given(st.text(max_size=300))
def test_script_and_task_files_take_any_text(tmp_path_factory, body: str) -> None:
    from porter.agent.replay import ReplayModel
    from porter.bench.suite import load_tasks

    folder = tmp_path_factory.mktemp("fuzz")
    for text in (body, f'label = "scripted"\n[[reply]]\n{body}\n', f"[task]\n{body}\n"):
        (folder / "f.toml").write_text(text)
        for load in (ReplayModel, load_tasks):
            try:
                load(folder / "f.toml")
            except InputError as err:
                assert "f.toml" in str(err)
