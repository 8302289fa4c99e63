"""Imports point down the layering that docs/architecture.md writes ("Layers": the ```layers block): no
package imports one above it or beside it, and the never/only rules hold. Every kind of import counts:
module level, inside a function, under TYPE_CHECKING. A failure names each edge: file and line, importing
module, imported module, kind, and which rule it breaks. The whole graph: ``python -m tests.unit.import_graph``.
"""

from pathlib import Path

import pytest

from tests.unit.import_graph import collect_edges, cycles, unit_edges
from tests.unit.layering import declared, parse, units, violations

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def edges():
    return collect_edges()


def test_every_package_is_placed_in_the_layering_and_nothing_else():
    placed = set(declared().rank)
    present = units()
    if present - placed:
        pytest.fail(f"not placed in docs/architecture.md's layers block: {sorted(present - placed)}")
    if placed - present:
        pytest.fail(f"placed in the layers block but not in fluss_py/: {sorted(placed - present)}")


def test_no_import_goes_against_the_layering(edges):
    bad = violations(edges)
    if bad:
        lines = "\n".join(f"  {edge}: {why}" for edge, why in bad)
        pytest.fail(f"imports against the layering of docs/architecture.md:\n{lines}")


def test_no_two_packages_import_each_other(edges):
    graph: dict[str, set[str]] = {}
    for a, b in unit_edges(edges):
        graph.setdefault(a, set()).add(b)
    found = cycles(graph)
    if found:
        pytest.fail("packages importing each other: " + "; ".join(" <-> ".join(c) for c in found))


LAYERS = """
```layers
cli
coordinator
security
zk
types

never: zk -> grpc
only: zk -> kazoo
```
"""


def _package(root: Path, files: dict[str, str]) -> Path:
    package = root / "fluss_py"
    for name, text in {"__init__.py": "", **files}.items():
        path = package / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return package


def test_the_check_names_each_wrong_way_import_with_its_line_and_kind(tmp_path):
    package = _package(
        tmp_path,
        {
            "types.py": "",
            "security/__init__.py": "",
            "security/acl.py": "from fluss_py.types import x\nfrom fluss_py.zk import paths\n",  # down: legal
            "zk/__init__.py": "",
            "zk/paths.py": (
                "from typing import TYPE_CHECKING\n"
                "from fluss_py.security.acl import Acl\n"  # line 2: module level
                "if TYPE_CHECKING:\n"
                "    from ..coordinator import server\n"  # line 4: relative, type-only
                "def f():\n"
                "    import fluss_py.cli.main\n"  # line 6: in a function
                "    import grpc.aio\n"  # line 7: an outside name zk never imports
                "import kazoo.client\n"  # zk may import kazoo
            ),
            "coordinator/__init__.py": "",
            "coordinator/server.py": "from fluss_py.zk.paths import Node\nimport kazoo\n",
            "cli/__init__.py": "",
            "cli/main.py": "",
        },
    )
    found = [
        (e.importer, e.imported, e.line, e.kind, why) for e, why in violations(collect_edges(package), parse(LAYERS))
    ]
    assert found == [
        ("fluss_py.coordinator.server", "kazoo", 2, "top", "only zk import kazoo"),
        ("fluss_py.zk.paths", "fluss_py.security.acl", 2, "top", "wrong way: zk lies below security"),
        ("fluss_py.zk.paths", "fluss_py.coordinator.server", 4, "typing", "wrong way: zk lies below coordinator"),
        ("fluss_py.zk.paths", "fluss_py.cli.main", 6, "function", "wrong way: zk lies below cli"),
        ("fluss_py.zk.paths", "grpc", 7, "function", "zk never imports grpc"),
    ]


def test_a_package_beside_another_or_not_placed_is_named(tmp_path):
    package = _package(
        tmp_path,
        {
            "types.py": "",
            "a.py": "from fluss_py import b\n",
            "b.py": "",
            "c/__init__.py": "from fluss_py import types\n",
        },
    )
    layering = parse("```layers\na  b\ntypes\n```\n")
    found = [(e.importer, e.imported, why) for e, why in violations(collect_edges(package), layering)]
    assert found == [
        ("fluss_py.a", "fluss_py.b", "a and b share a layer: neither imports the other"),
        ("fluss_py.c", "fluss_py.types", "c is not placed in the layering"),
    ]
    assert units(package) == {"fluss_py", "fluss_py.a", "fluss_py.b", "fluss_py.c", "fluss_py.types"}


def test_a_page_without_the_block_or_placing_a_package_twice_is_refused():
    with pytest.raises(ValueError, match="no ```layers block"):
        parse("# Architecture\n")
    with pytest.raises(ValueError, match="zk is placed twice"):
        parse("```layers\nzk\ncli  zk\n```\n")
