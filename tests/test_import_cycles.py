"""No import cycles among gpulab's modules.

A cycle hides as a function-level import (which is why it was written inside
the function) or a TYPE_CHECKING one, so every import statement counts, where
it sits. import-linter's `acyclic_siblings` contract compares whole packages
(gpulab.tui against gpulab.cli.commands), not modules, so this test builds the
module graph itself from the source with ast.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO

PACKAGE = REPO / "gpulab"
# Loops not yet broken, each with why (none today).
KNOWN: list[list[str]] = []


def module_name(path: Path, top: Path) -> str:
    parts = list(path.relative_to(top).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(path: Path, top: Path, modules: set[str]) -> set[str]:
    """The gpulab modules `path` imports anywhere in its body (functions included)."""
    name = module_name(path, top)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            # `from gpulab import hardware` imports the module gpulab.gpu.hardware.
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return {m for m in found if m in modules and m != name}


def import_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    paths, top = sorted(root.rglob("*.py")), root.parent
    modules = {module_name(p, top) for p in paths}
    return {module_name(p, top): imported_modules(p, top, modules) for p in paths}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_graph_sees_function_level_and_type_checking_imports(tmp_path):
    pkg = tmp_path / "gpulab"
    (pkg / "tui").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "tui" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from gpulab import b\n")
    (pkg / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from gpulab.tui.c import C\n"
    )
    (pkg / "tui" / "c.py").write_text("from .. import a\n")
    assert cycles(import_graph(pkg)) == [["gpulab.a", "gpulab.b", "gpulab.tui.c"]]


def test_no_import_cycles_among_gpulab_modules():
    found = [c for c in cycles(import_graph()) if c not in KNOWN]
    assert found == [], "import cycles (each line one loop):\n" + "\n".join(
        " <-> ".join(c) for c in found
    )
