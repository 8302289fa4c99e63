"""(e) The scale scenario as figures, at several sizes, and how each figure grows with the bucket count:
creation, idle CPU and RSS of every process, controlled shutdown (SIGTERM) of a server leading ~1/3, the
restart of that server until every ISR is full, kill -9 of a server until every bucket has a live leader.
The steps and how each is measured: tests/bench/scale.py (more than 4096 buckets go to several tables). The
behaviour (every bucket led, no acknowledged record lost) is asserted by tests/fault/test_scale.py
(--run-slow).

``FLUSS_BENCH_SCALE_BUCKETS`` lists the sizes (default ``2000,5000``; ``FLUSS_BENCH_SCALE_20K=1`` adds
20000, which takes a few minutes). With more than one size, growth rows follow: each figure at a size divided
by the same figure at the smallest size, next to the bucket ratio (a figure growing no faster than the work
has growth <= the bucket ratio; idle CPU should stay flat).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from tests.bench.common import row
from tests.bench.scale import ScaleResult, run_scenario


def sizes() -> list[int]:
    raw = os.environ.get("FLUSS_BENCH_SCALE_BUCKETS", "2000,5000")
    out = [int(x) for x in raw.split(",") if x.strip()]
    if os.environ.get("FLUSS_BENCH_SCALE_20K") == "1" and 20000 not in out:
        out.append(20000)
    return out


def figures(r: ScaleResult) -> dict[str, float]:
    """The growth table's figures of one run (idle CPU and RSS: the tablet servers' highest)."""
    servers = [n for n in r.idle_cpu_pct if n.startswith("tablet-server")]
    return {
        "create until every replica exists (s)": r.create_s,
        "idle CPU per tablet server (% core)": max(r.idle_cpu_pct[n] for n in servers),
        "RSS per tablet server (MB)": max(r.rss_mb[n] for n in servers),
        "SIGTERM of a server leading ~1/3 until exit (s)": r.shutdown_s,
        "restart until every ISR is full (s)": r.rejoin_s,
        "kill -9 of a server leading ~1/3 until all led (s)": r.kills[0][1] if r.kills else 0.0,
    }


def growth_rows(results: list[ScaleResult]) -> list[dict]:
    base = results[0]
    first = figures(base)
    out = []
    for r in results[1:]:
        ratio = r.buckets / base.buckets
        for name, value in figures(r).items():
            grew = value / first[name] if first[name] else 0.0
            flat = "idle CPU" in name
            target = "flat (<= 1.5)" if flat else f"<= {ratio:.1f}"
            ok = grew <= (1.5 if flat else ratio)
            out.append(row(f"(e) growth {base.buckets} -> {r.buckets} buckets: {name}", grew, "x", target, ok))
    return out


def run() -> list[dict]:
    results: list[ScaleResult] = []
    rows: list[dict] = []
    for n in sizes():
        with tempfile.TemporaryDirectory(prefix=f"bench-scale-{n}-") as d:
            result = run_scenario(Path(d), n, idle_seconds=10.0)
        results.append(result)
        rows += result.rows()
    return rows + growth_rows(results) if len(results) > 1 else rows


if __name__ == "__main__":
    for r in run():
        print(r)
