"""Agents as data (loading, overrides, front-matter errors) and the first prompt of a port."""

from __future__ import annotations

from pathlib import Path

import pytest

from porter._data import data_dir
from porter.agent.prompts import (
    BIG_KERNEL_LINES,
    AgentDef,
    PortContext,
    build_messages,
    fill_placeholders,
    list_agents,
    load_agent,
    parse_agent,
    placeholder_values,
)
from porter.errors import InputError
from porter.gate.spec import Spec, parse_spec
from porter.gate.verdict import Gate, Status, Verdict
from porter.ptx import parse_ptx
from porter.ptx.arch import compatibility, get_profile, load_features

ROOT = Path(__file__).resolve().parent.parent
WGMMA = ROOT / "examples" / "inspect" / "wgmma_sm90a.ptx"

AGENT = """\
---
name: {name}
description: {description}
edit_format: whole
temperature: 0.5
max_rounds: 3
max_tokens_per_reply: 4096
---
Port {{entry}} to {{target}}. Keep {{%r1, %r2}} and {{unknown}} as written.
"""


def _write_agent(folder: Path, name: str, description: str = "a test agent", text: str | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.md"
    path.write_text(text if text is not None else AGENT.format(name=name, description=description))
    return path


def _spec(tmp_path: Path) -> Spec:
    data = {
        "kernel": {
            "entry": "wgmma_tile_sm90a",
            "description": "C = A * Bt^T with bf16 inputs and f32 output",
        },
        "sizes": {"M": 256, "N": 128, "K": 1024, "ldk": "K"},
        "sweep": [{"M": 64, "N": 64, "K": 16}, {"M": 128, "N": 192, "K": 256}],
        "params": [
            {"name": "A", "kind": "buffer", "dtype": "bf16", "shape": ["M", "ldk"]},
            {"name": "Bt", "kind": "buffer", "dtype": "bf16", "shape": ["N", "ldk"]},
            {"name": "C", "kind": "buffer", "dtype": "f32", "shape": ["M", "N"], "role": "out"},
            {"name": "M", "kind": "scalar", "dtype": "i32", "value": "M"},
            {"name": "N", "kind": "scalar", "dtype": "i32", "value": "N"},
            {"name": "K", "kind": "scalar", "dtype": "i32", "value": "K"},
        ],
        "launch": {"grid": ["N // 64", "M // 64"], "block": 256},
        "tolerance": {"C": {"reduction": "K"}},
        "profile": {"gpu": "H100 SXM", "time_us": 12.5},
    }
    return parse_spec(data, base_dir=tmp_path, source="porter.toml")


def _context(tmp_path: Path, **overrides: object) -> PortContext:
    text = WGMMA.read_text()
    module = parse_ptx(text)
    fields: dict[str, object] = dict(
        source_ptx=text,
        source=module,
        src_profile=get_profile("sm_90a"),
        dst_profile=get_profile("sm_100a"),
        target="sm_100a",
        target_reason="the deployment GPU is a B200",
        spec=_spec(tmp_path),
        offenders=compatibility(module, "sm_100a").offenders,
    )
    fields.update(overrides)
    return PortContext(**fields)  # type: ignore[arg-type]


# --- loading ----------------------------------------------------------------------------------


def test_the_shipped_port_agent_loads() -> None:
    agent = load_agent()
    assert agent.name == "port"
    assert agent.path == data_dir("agents") / "port.md"
    assert agent.edit_format == "auto"
    assert 0 <= agent.temperature <= 1 and agent.max_rounds >= 1 and agent.max_tokens_per_reply >= 4096
    assert "{entry}" in agent.system_prompt and "---" not in agent.system_prompt.splitlines()[0]


def test_a_repository_override_wins(tmp_path: Path) -> None:
    override = _write_agent(tmp_path / ".porter" / "agents", "port", "my own port agent")
    _write_agent(tmp_path / ".porter" / "agents", "quick")
    assert load_agent("port", repo_root=tmp_path).path == override
    assert load_agent("port", repo_root=tmp_path).description == "my own port agent"
    assert load_agent("port").path == data_dir("agents") / "port.md"  # no repository: the shipped one
    assert load_agent("port", repo_root=tmp_path / "elsewhere").path == data_dir("agents") / "port.md"
    agents = {a.name: a for a in list_agents(tmp_path)}
    assert agents["port"].path == override and "quick" in agents
    assert "README" not in agents
    assert [a.name for a in list_agents()] == ["port"]


def test_unknown_agent_names_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"no agent 'prot' \(did you mean 'port'\?\); agents: port"):
        load_agent("prot", repo_root=tmp_path)
    with pytest.raises(InputError, match="not an agent name"):
        load_agent("../port")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (
            "---\nname: bad\ntemprature: 0.2\n---\nprompt\n",
            r"line 3: unknown key 'temprature' \(did you mean 'temperature'",
        ),
        (
            "---\nname: bad\nedit_format: diff\n---\nprompt\n",
            "line 3: edit_format: must be whole, search-replace or auto",
        ),
        ("---\n\n# a comment\ntemperature: hot\n---\nprompt\n", "line 4: temperature: must be a number"),
        ("---\nmax_rounds: 0\n---\nprompt\n", "line 2: max_rounds: must be from 1 to 100"),
        ("---\nmax_rounds: 2.5\n---\nprompt\n", "line 2: max_rounds: must be an integer"),
        ("---\nname: other\n---\nprompt\n", "line 2: name: 'other' must match the file name"),
        ("---\ndescription: a\ndescription: b\n---\nprompt\n", "line 3: description is given twice"),
        ("---\njust words\n---\nprompt\n", "line 2: expected 'key: value'"),
        ("---\nname: bad\ndescription: no closing line\n", "line 1: the front matter is not closed"),
        ("name: bad\n---\nprompt\n", "line 1: an agent starts with a '---' line"),
        ("---\nname: bad\n---\n\n", "line 3: no system prompt"),
    ],
)
def test_bad_front_matter_names_the_file_and_line(tmp_path: Path, text: str, problem: str) -> None:
    path = _write_agent(tmp_path / ".porter" / "agents", "bad", text=text)
    with pytest.raises(InputError, match=problem) as error:
        load_agent("bad", repo_root=tmp_path)
    assert str(path) in str(error.value)


def test_front_matter_values_may_be_quoted_and_default() -> None:
    agent = parse_agent('---\ndescription: "quoted: with a colon"\n---\nbody {x}\n', path=Path("a.md"))
    assert agent.description == "quoted: with a colon"
    assert (agent.name, agent.edit_format, agent.max_rounds) == ("a", "auto", 8)
    assert agent.system_prompt == "body {x}"


def test_edit_mode_follows_the_format_and_the_kernel_size() -> None:
    def agent(edit_format: str) -> AgentDef:
        return parse_agent(f"---\nedit_format: {edit_format}\n---\nbody\n", path=Path("a.md"))

    assert agent("auto").edit_mode(BIG_KERNEL_LINES) == "either"
    assert agent("auto").edit_mode(BIG_KERNEL_LINES + 1) == "search-replace"
    assert agent("whole").edit_mode(5000) == "whole"
    assert agent("search-replace").edit_mode(10) == "search-replace"


# --- prompts ----------------------------------------------------------------------------------


def test_the_readme_documents_every_placeholder(tmp_path: Path) -> None:
    readme = (data_dir("agents") / "README.md").read_text()
    for name in placeholder_values(_context(tmp_path)):
        assert f"`{{{name}}}`" in readme


def test_placeholders_fill_by_name_and_leave_other_braces() -> None:
    template = "to {target}: {%r1, %r2} { .reg .b32 t; } {unknown} {{target}}"
    assert fill_placeholders(template, {"target": "sm_100a"}) == (
        "to sm_100a: {%r1, %r2} { .reg .b32 t; } {unknown} {sm_100a}"
    )


def test_the_prompt_states_the_ptx_isa_the_users_ptxas_accepts(tmp_path: Path) -> None:
    from porter.ptx.isa import IsaSupport

    text = build_messages(load_agent(), _context(tmp_path, isa=IsaSupport("12.9.86", "8.8", "probed")))[1]["content"]
    assert ("Write `.version 8.8` or lower (and at least 8.6, sm_100a's minimum): porter assembles with the user's "
            "ptxas 12.9.86, which accepts PTX ISA up to 8.8") in text
    assert "Write `.version" not in build_messages(load_agent(), _context(tmp_path))[1]["content"]


def test_first_prompt_carries_what_the_model_needs(tmp_path: Path) -> None:
    ctx = _context(tmp_path)
    system, user = build_messages(load_agent(), ctx)
    assert system["role"] == "system" and user["role"] == "user"
    assert "porting the kernel `wgmma_tile_sm90a`" in system["content"]
    assert "sm_100a" in system["content"] and "{target}" not in system["content"]
    text = user["content"]
    # the architectures and what changes
    assert "to sm_100a (Blackwell)" in text and "B200" in text
    assert "wgmma does not exist on sm_100a" in text  # tensor_core_change
    assert load_features()["wgmma"].replacement_hint in text
    for line in (239, 252, 256, 260):
        assert f"- line {line}: `wgmma." in text
    assert get_profile("sm_100a").notes in text and get_profile("sm_90a").notes in text
    assert "UTCHMMA" in text  # native is required: the signature to reach
    # what the kernel computes
    assert "C = A * Bt^T with bf16 inputs and f32 output" in text
    assert "- `A`: bf16[M, ldk] buffer, in, filled uniform(-1, 1)" in text
    assert "- `C`: f32[M, N] buffer, out, poisoned" in text
    assert "- `K`: i32 scalar = K" in text
    assert "grid (N // 64, M // 64, 1), block (256, 1, 1)" in text
    assert "M=256, N=128, K=1024, ldk=K (=1024)" in text
    assert "M=64, N=64, K=16, ldk=16" in text
    assert "C: atol 1e-05, rtol 0.0001, both scaled by max(1, sqrt(K/128))" in text
    assert "- gpu: H100 SXM" in text and "- time_us: 12.5" in text
    # the source, verbatim, braces included
    assert "```ptx\n" + ctx.source_ptx.rstrip("\n") + "\n```" in text
    assert "{%f288, %f287," in text
    # the reply format: either form for a 320-line kernel
    assert "## Reply format" in text and "<<<<<<< SEARCH" in text and "one ```ptx block" in text
    assert text.index("## What changes") < text.index("## What the kernel computes") < text.index("```ptx")


def test_big_kernels_are_asked_for_edits(tmp_path: Path) -> None:
    base = WGMMA.read_text()
    padded = base + "// padding\n" * BIG_KERNEL_LINES
    user = build_messages(load_agent(), _context(tmp_path, source_ptx=padded))[1]["content"]
    assert "The kernel is long: send SEARCH/REPLACE blocks" in user


def test_agent_placeholders_and_ptx_braces_survive(tmp_path: Path) -> None:
    _write_agent(tmp_path / ".porter" / "agents", "custom")
    system, user = build_messages(load_agent("custom", repo_root=tmp_path), _context(tmp_path))
    assert system["content"] == (
        "Port wgmma_tile_sm90a to sm_100a. Keep {%r1, %r2} and {unknown} as written."
    )
    assert "SEARCH/REPLACE" not in user["content"].split("## Reply format")[1]  # edit_format: whole


def test_native_not_required_and_the_baseline(tmp_path: Path) -> None:
    baseline = Verdict(
        kernel="baseline.ptx",
        entry="wgmma_tile_sm90a",
        arch="sm_100a",
        status=Status.FAILED,
        reason="assemble: ptxas -arch=sm_100a: 4 errors",
        gates=(Gate("assemble", Status.FAILED, "ptxas -arch=sm_100a: 4 errors"),),
    )
    ctx = _context(
        tmp_path, require_native=False, baseline=baseline, baseline_feedback="line 239: wgmma.fence ..."
    )
    text = build_messages(load_agent(), ctx)[1]["content"]
    assert "Native code is not required" in text
    assert "Verdict: failed (assemble: ptxas -arch=sm_100a: 4 errors)" in text
    assert "- assemble: failed: ptxas -arch=sm_100a: 4 errors" in text
    assert "line 239: wgmma.fence ..." in text
    plain = build_messages(load_agent(), _context(tmp_path, offenders=()))[1]["content"]
    assert "Every instruction of the source exists on sm_100a." in plain
    assert "## Baseline" not in plain
