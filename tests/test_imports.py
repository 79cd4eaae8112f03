"""The import graph of the house: one-way layers and no cycles, read from the source (every import, lazy ones too)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("server", "pipeline", "models", "training", "bench")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, known: set[str]) -> dict[str, bool]:
    """The project modules a file imports, each with whether the import runs at module load (not inside a function)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    lazy = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) for n in ast.walk(f)}
    found: dict[str, bool] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            if name in known:
                found[name] = found.get(name, False) or id(node) not in lazy
    return found


def import_graph() -> dict[str, dict[str, bool]]:
    files = {module_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}
    return {name: imports_of(path, set(files)) for name, path in files.items()}


def cycles(graph: dict[str, dict[str, bool]]) -> list[list[str]]:
    """One cycle through each module that is on one (depth-first search)."""
    found, done = [], set()

    def visit(node: str, path: list[str]) -> None:
        if node in path:
            found.append(path[path.index(node) :] + [node])
            return
        if node in done:
            return
        for nxt in sorted(graph.get(node, {})):
            visit(nxt, path + [node])
        done.add(node)

    for node in sorted(graph):
        visit(node, [])
    return found


def test_the_project_has_no_import_cycles():
    assert cycles(import_graph()) == []


def test_the_layers_import_one_way():
    graph = import_graph()
    layer = lambda module: module.split(".")[0]  # noqa: E731
    for module, targets in graph.items():
        used = {layer(t) for t in targets}
        if layer(module) in ("models", "pipeline"):
            assert not used & {"server", "training", "bench"}, module
        if layer(module) == "models":
            assert "pipeline" not in used, module
        if layer(module) == "server":
            eager = {layer(t) for t, at_load in targets.items() if at_load}
            assert not eager & {"training", "bench"}, f"{module} imports training or bench at load"


def test_serving_loads_no_training_code():
    code = "import sys, server.cli, server.app; print(sorted(m for m in sys.modules if m.split('.')[0] in ('training', 'bench')))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
