"""Imports run one way in ``backend/``, ``state/`` and ``components/``: no module cycle (issue
#17). A cycle means two modules each need the other's internals; the orchestrator's parts get
their collaborators injected instead, and the UI's panel substates come before the workspace
that coordinates them (docs/architecture.md)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(package: str = "backend") -> dict[str, set[str]]:
    """Module → the modules of ``package`` it imports (type-checking imports included: a
    cycle hidden behind ``TYPE_CHECKING`` is still a cycle in the design)."""
    files = {_module_name(path): path for path in (ROOT / package).rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    target = f"{node.module}.{alias.name}"
                    if target in files:
                        graph[name].add(target)
                    elif node.module in files:
                        graph[name].add(node.module)
            elif isinstance(node, ast.Import):
                graph[name].update(alias.name for alias in node.names if alias.name in files)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_cycle_finder_sees_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_backend_has_no_import_cycle() -> None:
    graph = import_graph()
    assert "backend.orchestrator.service" in graph["backend.runtime"]  # the graph is real
    assert cycles(graph) == []


def test_orchestrator_parts_never_import_the_service() -> None:
    graph = import_graph()
    parts = [name for name in graph if name.startswith("backend.orchestrator.")]
    assert [p for p in parts if "backend.orchestrator.service" in graph[p]] == []


@pytest.mark.parametrize("package", ["state", "components"])
def test_the_ui_has_no_import_cycle(package: str) -> None:
    graph = import_graph(package)
    assert len(graph) > 5  # the graph is real
    assert cycles(graph) == []


def test_the_panels_never_import_the_workspace() -> None:
    graph = import_graph("state")
    panels = ["app_state", "task_list", "board", "session_view", "composer", "overlay"]
    assert [p for p in panels if "state.workspace" in graph[f"state.{p}"]] == []
