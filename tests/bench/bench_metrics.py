"""Cost of one tablet-server /metrics scrape with 2000 buckets on one server (docs/observability.md).

One ReplicaManager over real logs (temp dir) leads 2000 buckets of replication factor 3 (the worst case for
one server: every bucket led here, so every per-bucket family has samples; 2 followers each). Measures
``stats()`` alone, the whole replica text of a scrape (stats() + rendering) and its size.
Nothing is updated per request, so produce/fetch pay nothing for these series.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from fluss_py.tablet.metrics import replica_metrics_text
from fluss_py.types import TableBucket
from tests.bench.common import row
from tests.unit.replica.fakes import FakeClock, batch
from tests.unit.replica.harness import ReplicaCluster

BUCKETS = 2000
ROUNDS = 20


def _median_ms(fn: object, rounds: int = ROUNDS) -> float:
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


async def _main(root: Path) -> list[dict]:
    c = ReplicaCluster(1, FakeClock(), root)
    try:
        manager = c.managers[1]
        for b in range(BUCKETS):
            tb = TableBucket(1 + b // 500, b % 500)
            await c.create(tb, (1, 2, 3))
            if b % 10 == 0:
                await manager.append(1, 1.0, {tb: batch(b"x" * 100)})
        text_of = replica_metrics_text(manager.stats)
        stats_ms = _median_ms(manager.stats)
        render_ms = _median_ms(text_of)
        text = text_of()
        series = sum(1 for line in text.splitlines() if line and not line.startswith(b"#"))
    finally:
        await c.close()
    return [
        row(f"stats() with {BUCKETS} led buckets", stats_ms, "ms"),
        row(f"/metrics render with {BUCKETS} led buckets", render_ms, "ms", "< 50 ms", render_ms < 50),
        row(f"/metrics size with {BUCKETS} led buckets", len(text) / 1024, "KiB"),
        row(f"/metrics samples with {BUCKETS} led buckets", series, "samples"),
    ]


def run() -> list[dict]:
    with tempfile.TemporaryDirectory(prefix="bench-metrics-") as d:
        return asyncio.run(_main(Path(d)))


if __name__ == "__main__":
    for r in run():
        print(r)
