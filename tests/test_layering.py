"""The package's import graph: imports point one way along the data path.

Every `import` of a ZynML module, at module level or inside a function (a function-level
import that dodges a cycle is still a cycle), is an edge. The graph must have no cycles,
and the runtime (which runs artifacts with only numpy, cuda-python and iree.runtime) must
never import the compiler's back end, passes, dialects or front end.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# installed package name -> folder of the checkout (pyproject.toml's package-dir)
PACKAGES = {"zynml": ROOT / "zynml", "zynml.passes": ROOT / "passes",
            "zynml.dialects": ROOT / "dialects"}


def _modules() -> dict[str, Path]:
    modules = {}
    for package, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            name = ".".join([package, *parts])
            if name.startswith("zynml.passes") and package == "zynml" or \
                    name.startswith("zynml.dialects") and package == "zynml":
                continue
            modules[name] = path
    return modules


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges = graph.setdefault(name, set())
        tree = ast.parse(path.read_text(), str(path))
        is_package = path.name == "__init__.py"
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(name, is_package, node)
                targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
            for target in targets:
                # the longest module that the imported name is, or lies in
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    edges.add(target)
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for succ in sorted(graph.get(node, ())):
            if state.get(succ) == 1:
                return stack[stack.index(succ):] + [succ]
            if succ not in state:
                found = visit(succ)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def _is_parent_package(module: str, target: str) -> bool:
    return module.startswith(target + ".")


def test_no_import_cycles():
    graph = import_graph()
    # a module importing its own package's __init__ (for a name it re-exports) is not a
    # cycle of modules; every other edge counts
    graph = {m: {t for t in edges if not _is_parent_package(m, t)} for m, edges in graph.items()}
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))


def test_runtime_imports_no_compiler_stage():
    forbidden = ("zynml.backend", "zynml.passes", "zynml.dialects", "zynml.frontend",
                 "zynml.cirgen", "zynml.compiler", "zynml.api")
    for module, edges in import_graph().items():
        if module.startswith("zynml.runtime"):
            bad = sorted(t for t in edges if t.startswith(forbidden))
            assert not bad, f"{module} imports {bad}"


def test_the_graph_sees_function_level_imports():
    # the check above would pass vacuously if it missed imports inside functions
    graph = import_graph()
    assert "zynml.api" in graph["zynml.cli.main"]
