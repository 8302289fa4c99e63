"""The layering of fluss_py as docs/architecture.md writes it, and the imports that break it.

The page holds one fenced block marked ``layers``: the units (a subpackage, a top-level module, ``__init__``
for the package's own) highest first, one layer per line; a unit imports only units on lower lines, never one
on its own line. Below the layers, rules about particular imports::

    never: client -> common console log zk        these units never import those (units or outside names)
    only: zk testing -> kazoo                      nothing but these units imports that outside name

Every kind of import counts (module level, inside a function, under ``TYPE_CHECKING``): a deferred or
type-only import is a dependency all the same.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from tests.unit.import_graph import PACKAGE, ROOT_NAME, Edge, module_files, unit_of

DOC = PACKAGE.parent / "docs" / "architecture.md"
_BLOCK = re.compile(r"^```layers\n(.*?)^```", re.M | re.S)


def _unit(short: str) -> str:
    return ROOT_NAME if short == "__init__" else f"{ROOT_NAME}.{short}"


def _short(unit: str) -> str:
    return "__init__" if unit == ROOT_NAME else unit.removeprefix(ROOT_NAME + ".")


@dataclass
class Layering:
    rank: dict[str, int] = field(default_factory=dict)  # unit -> layer, 0 the lowest
    never: dict[str, set[str]] = field(default_factory=dict)  # unit -> what it never imports
    only: dict[str, set[str]] = field(default_factory=dict)  # outside name -> the units that may import it


def parse(text: str) -> Layering:
    """The layering of the page's ``layers`` block (ValueError when the page has none, or it is malformed)."""
    found = _BLOCK.search(text)
    if found is None:
        raise ValueError(f"{DOC.name} has no ```layers block")
    layers: list[list[str]] = []
    out = Layering()
    for raw in found.group(1).splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        rule = re.fullmatch(r"(never|only):\s*(.+?)\s*->\s*(.+)", line)
        if rule is None:
            layers.append(line.split())
            continue
        kind, left, right = rule.group(1), rule.group(2).split(), rule.group(3).split()
        for a in left:
            for b in right:
                if kind == "never":
                    out.never.setdefault(_unit(a), set()).add(_unit(b) if _is_unit_name(b) else b)
                else:
                    out.only.setdefault(b, set()).add(_unit(a))
    for depth, names in enumerate(reversed(layers)):
        for name in names:
            if _unit(name) in out.rank:
                raise ValueError(f"{name} is placed twice in the layering")
            out.rank[_unit(name)] = depth
    return out


def _is_unit_name(name: str) -> bool:
    return name == "__init__" or (PACKAGE / name).is_dir() or (PACKAGE / f"{name}.py").is_file()


def declared() -> Layering:
    return parse(DOC.read_text(encoding="utf-8"))


def units(package: Path = PACKAGE) -> set[str]:
    return {unit_of(m) for m in module_files(package)}


def violations(edges: list[Edge], layering: Layering | None = None) -> list[tuple[Edge, str]]:
    """Every import against the layering, with the reason, in file order."""
    layering = layering or declared()
    out: list[tuple[Edge, str]] = []
    for e in edges:
        a = unit_of(e.importer)
        internal = e.imported == ROOT_NAME or e.imported.startswith(ROOT_NAME + ".")
        b = unit_of(e.imported) if internal else e.imported
        if b in layering.never.get(a, ()):
            out.append((e, f"{_short(a)} never imports {_short(b)}"))
        if not internal:
            allowed = layering.only.get(b)
            if allowed is not None and a not in allowed:
                out.append((e, f"only {' '.join(sorted(_short(u) for u in allowed))} import {b}"))
            continue
        if a == b or b == ROOT_NAME:
            continue
        if a not in layering.rank or b not in layering.rank:
            missing = a if a not in layering.rank else b
            out.append((e, f"{_short(missing)} is not placed in the layering"))
        elif layering.rank[a] == layering.rank[b]:
            out.append((e, f"{_short(a)} and {_short(b)} share a layer: neither imports the other"))
        elif layering.rank[a] < layering.rank[b]:
            out.append((e, f"wrong way: {_short(a)} lies below {_short(b)}"))
    return sorted(out, key=lambda v: (v[0].path, v[0].line, v[0].imported))
