"""The house stays walkable: no hand-written module under fluss_py/ grows past 500 lines (generated gRPC
code in fluss_py/rpc/pb is exempt). A module about to cross it is split into rooms (docs/architecture.md)."""

from pathlib import Path

import fluss_py

MAX_LINES = 500
PACKAGE = Path(fluss_py.__file__).resolve().parent
GENERATED = PACKAGE / "rpc" / "pb"


def test_no_module_is_over_500_lines():
    sizes = {
        str(p.relative_to(PACKAGE.parent)): len(p.read_text(encoding="utf-8").splitlines())
        for p in PACKAGE.rglob("*.py")
        if GENERATED not in p.parents
    }
    assert len(sizes) > 100  # the walk found the package
    over = {path: n for path, n in sorted(sizes.items()) if n > MAX_LINES}
    assert not over, f"modules over {MAX_LINES} lines: {over}"
