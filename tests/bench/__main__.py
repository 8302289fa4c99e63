"""Benchmark runner: ``python -m tests.bench [WORKLOAD ...]`` (``make bench``; the suite needs a source checkout, so it
is no ``fluss-py`` command).

Runs every ``tests/bench/bench_*.py`` module whose name contains one of the WORKLOAD words (all when none):
its ``run() -> list[dict]`` returns rows (name, value, unit, target, ok; optionally peer, the same workload's
figure on the peer system, and ratio = value / peer). Writes ``bench-results/<timestamp>.json`` and prints a
table. Targets are goals, not assertions: the exit code is 0 unless a module raised.

Workloads: cluster (a, b, c + NATS), produce (single bucket, d: kill -9 failover + NATS), scale (e: 2000
buckets), replacement (a server of 4 gone for good, issue 37), log, replica, control_plane, metrics (a
2000-bucket /metrics scrape), schema (the row codec of primary-key tables), kv (a primary-key leader's writes and
a replica's apply, per row), kv_cluster (primary-key tables on a cluster: upserts, lookups, changelog reads, the
KV leader failover). Each cluster workload starts its own fresh LocalCluster (and NATS cluster when
``nats-server`` and nats-py are installed).
"""

from __future__ import annotations

import importlib
import json
import os
import platform
import sys
import time
import traceback
from pathlib import Path

from rich.console import Console
from rich.table import Table

BENCH_DIR = Path(__file__).resolve().parent
RESULTS_DIR = BENCH_DIR.parents[1] / "bench-results"


def modules(filters: list[str]) -> list[str]:
    names = sorted(p.stem for p in BENCH_DIR.glob("bench_*.py"))
    return [m for m in names if any(f in m for f in filters)] if filters else names


def _fmt(v: object) -> str:
    return "" if v is None else f"{v:,.3f}" if isinstance(v, int | float) else str(v)


def machine() -> dict:
    cpu = ""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        cpu = next(line.split(":", 1)[1].strip() for line in lines if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"python": sys.version.split()[0], "machine": platform.machine(), "cpus": os.cpu_count(), "cpu": cpu}


def print_table(console: Console, results: list[dict], title: str) -> None:
    table = Table(title=title)
    for col in ("module", "name", "value", "unit", "target", "ok", "peer", "ratio"):
        table.add_column(col, justify="right" if col in ("value", "target", "peer", "ratio") else "left")
    for r in results:
        ok = "[green]yes[/green]" if r.get("ok") else "[red]no[/red]"
        table.add_row(
            r["module"].removeprefix("bench_"),
            r["name"],
            _fmt(r["value"]),
            r["unit"],
            str(r.get("target", "")),
            ok,
            _fmt(r.get("peer")),
            _fmt(r.get("ratio")),
        )
    console.print(table)


def main(argv: list[str]) -> int:
    filters = [a for a in argv if not a.startswith("-")]
    console = Console(width=None if sys.stdout.isatty() else 150)
    results: list[dict] = []
    failed = False
    for name in modules(filters):
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
    meta = {"time": stamp, **machine(), "results": results}
    out.write_text(json.dumps(meta, indent=2) + "\n")
    print_table(console, results, f"benchmarks ({out.relative_to(RESULTS_DIR.parent)}; ratio = value / peer)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
