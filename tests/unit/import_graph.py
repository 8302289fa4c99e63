"""The import graph of fluss_py, read from the source (ast; nothing is imported).

Every ``import`` / ``from ... import`` statement of every module under fluss_py/ becomes an edge
(importer module, imported module, line, kind). The kind says when the import runs:

- ``top``       at import time (module level, also inside ``try``/``if``/class bodies)
- ``function``  inside a function body: runs on the first call, still a dependency
- ``typing``    inside ``if TYPE_CHECKING:``: never runs, but names a dependency all the same

A unit is what the layering speaks of: a subpackage (``fluss_py.zk``) or a top-level module
(``fluss_py.errors``). ``python -m tests.unit.import_graph`` prints every unit edge with its count, every
cycle between units, and every edge against the layering of docs/architecture.md (``tests/unit/layering.py``).
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

import fluss_py

PACKAGE = Path(fluss_py.__file__).resolve().parent
ROOT_NAME = "fluss_py"


@dataclass(frozen=True)
class Edge:
    importer: str  # dotted module name
    imported: str  # a fluss_py module (dotted; a package is its __init__), or an outside top-level name
    line: int
    kind: str  # "top" | "function" | "typing"
    path: str  # the importer's file, relative to the repository

    def __str__(self) -> str:
        return f"{self.path}:{self.line} {self.importer} -> {self.imported} ({self.kind})"


def module_files(package: Path = PACKAGE) -> dict[str, Path]:
    """Every module of the package by dotted name (``fluss_py.zk`` is zk/__init__.py)."""
    out: dict[str, Path] = {}
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


# units deeper than the first level: the generated gRPC code depends on nothing of fluss_py (the wire
# vocabulary, under every package that handles a message), the rest of rpc/ sits above security/
SEPARATE = ("fluss_py.rpc.pb",)


def unit_of(module: str) -> str:
    """The layering unit of a module: a SEPARATE subpackage, its first-level subpackage, or the top-level
    module itself."""
    for unit in SEPARATE:
        if module == unit or module.startswith(unit + "."):
            return unit
    parts = module.split(".")
    if len(parts) == 1:
        return module
    return f"{ROOT_NAME}.{parts[1]}"


def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


class _Collector(ast.NodeVisitor):
    def __init__(self, module: str, is_package: bool, modules: set[str]) -> None:
        self.module = module
        self.package = module if is_package else module.rpartition(".")[0]
        self.modules = modules
        self.found: list[tuple[str, int, str]] = []
        self._function_depth = 0
        self._typing_depth = 0

    def _kind(self) -> str:
        if self._typing_depth:
            return "typing"
        return "function" if self._function_depth else "top"

    def _visit_function(self, node: ast.AST) -> None:
        self._function_depth += 1
        self.generic_visit(node)
        self._function_depth -= 1

    visit_FunctionDef = _visit_function
    visit_AsyncFunctionDef = _visit_function
    visit_Lambda = _visit_function

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):
            self._typing_depth += 1
            for child in node.body:
                self.visit(child)
            self._typing_depth -= 1
            for child in node.orelse:
                self.visit(child)
        else:
            self.generic_visit(node)

    def _add(self, target: str, line: int) -> None:
        self.found.append((target, line, self._kind()))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(self._resolve(alias.name), node.lineno)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            base_parts = self.package.split(".")
            if node.level > 1:
                base_parts = base_parts[: len(base_parts) - (node.level - 1)]
            base = ".".join(base_parts + ([node.module] if node.module else []))
        else:
            base = node.module or ""
        if not _internal(base):
            self._add(self._resolve(base), node.lineno)
            return
        for alias in node.names:
            candidate = f"{base}.{alias.name}"
            self._add(candidate if candidate in self.modules else self._resolve(base), node.lineno)

    def _resolve(self, name: str) -> str:
        """A fluss_py name: the longest prefix that is a module of the package (``a.b.Class`` -> ``a.b``);
        anything else: its top-level distribution name (``grpc.aio`` -> ``grpc``)."""
        if not _internal(name):
            return name.split(".")[0]
        parts = name.split(".")
        while parts and ".".join(parts) not in self.modules:
            parts.pop()
        return ".".join(parts) if parts else name


def _internal(name: str) -> bool:
    return name == ROOT_NAME or name.startswith(ROOT_NAME + ".")


def collect_edges(package: Path = PACKAGE) -> list[Edge]:
    """Every import made by a fluss_py module, self-imports left out, each statement and target once.
    ``imported`` is a fluss_py module, or the top-level name of anything else (``grpc``, ``asyncio``)."""
    files = module_files(package)
    names = set(files)
    edges: list[Edge] = []
    for module, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        collector = _Collector(module, path.name == "__init__.py", names)
        collector.visit(tree)
        rel = str(path.relative_to(package.parent))
        for target, line, kind in dict.fromkeys(collector.found):
            if target != module:
                edges.append(Edge(module, target, line, kind, rel))
    return edges


def unit_edges(edges: list[Edge]) -> dict[tuple[str, str], list[Edge]]:
    """Edges between different fluss_py units, grouped by (importer unit, imported unit). The package's own
    ``__init__`` is every module's parent (it runs first): an import of it is no edge."""
    out: dict[tuple[str, str], list[Edge]] = {}
    for e in edges:
        if not _internal(e.imported):
            continue
        a, b = unit_of(e.importer), unit_of(e.imported)
        if a != b and b != ROOT_NAME:
            out.setdefault((a, b), []).append(e)
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def strongconnect(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph):
        if v not in index:
            strongconnect(v)
    return sorted(found)


def main() -> int:
    from tests.unit.layering import declared, units, violations

    edges = collect_edges()
    unplaced = sorted(set(declared().rank) - units())
    if unplaced:
        print(f"placed in the layering but not in the package: {', '.join(unplaced)}\n")
    grouped = unit_edges(edges)
    print("unit edges (importer -> imported: top/function/typing counts):")
    for (a, b), es in sorted(grouped.items()):
        counts = {k: sum(1 for e in es if e.kind == k) for k in ("top", "function", "typing")}
        print(f"  {a} -> {b}: {counts['top']}/{counts['function']}/{counts['typing']}")
    graph: dict[str, set[str]] = {}
    for a, b in grouped:
        graph.setdefault(a, set()).add(b)
    found = cycles(graph)
    print(f"\ncycles between units ({len(found)}):")
    for comp in found:
        print("  " + " <-> ".join(comp))
    bad = violations(edges)
    print(f"\nedges against the layering ({len(bad)}):")
    for e, why in bad:
        print(f"  {e}: {why}")
    return 1 if bad or found or unplaced else 0


if __name__ == "__main__":
    raise SystemExit(main())
