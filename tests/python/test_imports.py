"""No import cycles among pstrain's modules: every module of python/pstrain is
parsed with ast and every import counted, at module level and inside functions
(an import put inside a function to dodge a cycle is still a cycle). A cycle
is reported as the modules in import order."""
from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "python" / "pstrain"


def modules(package: pathlib.Path) -> dict[str, pathlib.Path]:
    """Dotted name -> file of every module of the package (a package is its __init__)."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports(name: str, path: pathlib.Path, known: dict[str, pathlib.Path]) -> set[str]:
    """The package's modules `name` imports anywhere in its file. `from X import y`
    imports X.y when that is a module, else X itself. The implicit import of a
    module's parent package is not counted (it is no edge the module chose)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    edges: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            edges |= {alias.name for alias in node.names if alias.name in known}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            for alias in node.names:
                if f"{origin}.{alias.name}" in known:
                    edges.add(f"{origin}.{alias.name}")
                elif origin in known:
                    edges.add(origin)
    edges.discard(name)
    return edges


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph as [a, b, ..., a], or None (depth-first search)."""
    state: dict[str, int] = {}          # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            found = visit(start)
            if found:
                return found
    return None


def import_graph(package: pathlib.Path) -> dict[str, set[str]]:
    known = modules(package)
    return {name: imports(name, path, known) for name, path in known.items()}


def test_pstrain_has_no_import_cycle():
    graph = import_graph(PACKAGE)
    assert "pstrain.runner" in graph and "pstrain.launch" in graph   # the walk saw the package
    assert "pstrain.launchers" in graph["pstrain.runner"]
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_walk_finds_a_cycle_hidden_in_a_function(tmp_path):
    """The check can fail: a cycle closed by an import inside a function, a
    relative one two levels up, and `from . import x` of a module."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .sub import b\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "b.py").write_text("from . import c\n")
    (pkg / "sub" / "c.py").write_text("def late():\n    from ..a import name\n    return name\n")
    graph = import_graph(pkg)
    assert graph["pkg.a"] == {"pkg.sub.b"}
    assert graph["pkg.sub.b"] == {"pkg.sub.c"}
    assert graph["pkg.sub.c"] == {"pkg.a"}
    assert find_cycle(graph) == ["pkg.a", "pkg.sub.b", "pkg.sub.c", "pkg.a"]
    (pkg / "sub" / "c.py").write_text("import json\n")
    assert find_cycle(import_graph(pkg)) is None
