"""The package's layering, read from its imports (every import, lazy ones and TYPE_CHECKING ones too).

Layers, lowest first; a module may import its own layer and those below, never one above, and the
imports between modules form no cycle. Each package above the gate is a layer of its own (bench and
review, which import neither other, share one), and there is no list of allowed exceptions: an
import up the layers is fixed by moving what it needs down. The Verdict imports no tool runner.
"""

from __future__ import annotations

import ast
from pathlib import Path

PORTER = Path(__file__).resolve().parent.parent / "porter"

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("base", ("porter", "porter.errors", "porter.jsonable", "porter._toml", "porter._data", "porter.gitcmd",
              "porter.text")),
    ("toolchain", ("porter.ptx",)),
    ("emulator", ("porter.emu",)),
    ("gate", ("porter.gate",)),
    ("verifiers", ("porter.pool",)),
    ("agent loop", ("porter.agent",)),
    ("review and bench", ("porter.review", "porter.bench")),
    ("terminal report", ("porter.report",)),
    ("pre-merge bot", ("porter.ci",)),
    ("services", ("porter.services",)),
    ("MCP server", ("porter.mcp",)),
    ("command line", ("porter.cli", "porter.__main__")),
)
TOOL_RUNNERS = ("porter.ptx.toolchain", "porter.gate.nsight", "porter.gate.runner")


def _module_name(path: Path) -> str:
    parts = path.relative_to(PORTER.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PORTER.rglob("*.py"))}


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The porter modules ``name`` imports (``from pkg import sub`` counts as importing ``pkg.sub``)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in known else base)
    return {m for m in found if m in known and m != name}


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: _imports(name, path, known) for name, path in modules.items()}


def _layer(module: str) -> int:
    best = None
    for rank, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > best[1]):
                best = (rank, len(prefix))
    assert best is not None, f"{module} belongs to no layer: add it to LAYERS"
    return best[0]


def test_every_module_belongs_to_a_layer() -> None:
    for module in _modules():
        _layer(module)


def test_no_module_imports_a_higher_layer() -> None:
    bad = [f"{m} ({LAYERS[_layer(m)][0]}) imports {i} ({LAYERS[_layer(i)][0]})"
           for m, imports in _graph().items() for i in sorted(imports) if _layer(i) > _layer(m)]
    assert not bad, "\n".join(bad)


def test_the_imports_form_no_cycle() -> None:
    graph = _graph()
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start)):
            raise AssertionError("import cycle: " + " -> ".join(cycle))


def test_the_verdict_imports_no_tool_runner_and_the_gate_no_agent_loop() -> None:
    graph = _graph()
    seen, todo = set(), ["porter.gate.verdict"]
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(graph[module])
    runners = sorted(m for m in seen if m.startswith(TOOL_RUNNERS))
    assert not runners, f"porter.gate.verdict reaches {runners}"
    gate_imports = {i for m, imports in graph.items() if m.startswith("porter.gate") for i in imports}
    assert not [i for i in gate_imports if i.startswith("porter.agent")]


MAX_LINES = 800


def test_no_module_is_over_800_lines() -> None:
    """A module that does one job stays short (#31)."""
    root = PORTER.parent
    long = [f"{p.relative_to(root)}: {n} lines" for p in sorted(PORTER.rglob("*.py"))
            if (n := len(p.read_text().splitlines())) > MAX_LINES]
    assert not long, f"over {MAX_LINES} lines (split along the seams it marks):\n" + "\n".join(long)
