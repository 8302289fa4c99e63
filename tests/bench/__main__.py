"""Benchmark runner: ``python -m tests.bench [NAME_FILTER ...]`` (``make bench``).

Runs every ``tests/bench/bench_*.py`` module's ``run() -> list[dict]`` (each dict: name, value, unit, target,
ok), writes ``bench-results/<timestamp>.json`` and prints a table. Targets are goals, not assertions: the exit
code is 0 unless a module raised.
"""

from __future__ import annotations

import importlib
import json
import platform
import sys
import time
import traceback
from pathlib import Path

from rich.console import Console
from rich.table import Table

BENCH_DIR = Path(__file__).resolve().parent
RESULTS_DIR = BENCH_DIR.parents[1] / "bench-results"


def main(argv: list[str]) -> int:
    filters = [a for a in argv if not a.startswith("-")]
    modules = sorted(p.stem for p in BENCH_DIR.glob("bench_*.py"))
    if filters:
        modules = [m for m in modules if any(f in m for f in filters)]
    console = Console()
    results: list[dict] = []
    failed = False
    for name in modules:
        console.print(f"[bold]running {name}[/bold]")
        started = time.monotonic()
        try:
            rows = importlib.import_module(f"tests.bench.{name}").run()
        except Exception:
            failed = True
            console.print(f"[red]{name} failed[/red]\n{traceback.format_exc()}")
            continue
        for row in rows:
            results.append({"module": name, **row})
        console.print(f"  {name}: {len(rows)} results in {time.monotonic() - started:.1f} s")
    stamp = time.strftime("%Y%m%dT%H%M%S")
    RESULTS_DIR.mkdir(exist_ok=True)
    out = RESULTS_DIR / f"{stamp}.json"
    meta = {"time": stamp, "python": sys.version.split()[0], "machine": platform.machine(), "results": results}
    out.write_text(json.dumps(meta, indent=2) + "\n")
    table = Table(title=f"benchmarks ({out.relative_to(RESULTS_DIR.parent)})")
    for col in ("module", "name", "value", "unit", "target", "ok"):
        table.add_column(col, justify="right" if col in ("value", "target") else "left")
    for r in results:
        ok = "[green]yes[/green]" if r.get("ok") else "[red]no[/red]"
        table.add_row(r["module"], r["name"], f"{r['value']:,.3f}", r["unit"], str(r.get("target", "")), ok)
    console.print(table)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
