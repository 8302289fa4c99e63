"""Cost of one tablet-server /metrics scrape with 2000 buckets on one server (docs/observability.md).

One ReplicaManager over real logs (temp dir) leads 2000 buckets of replication factor 3 (the worst case for
one server: every bucket led here, so every per-bucket family has samples; 2 followers each). Measures
``stats()`` alone, the whole replica text of a scrape (stats() + rendering) and its size. Nothing is
updated per request for these series; the per-request metrics (``MeteredReplicaLayer``: two clock reads and
one histogram observation) are measured as the added time per call over an inner layer that answers at once.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from prometheus_client import CollectorRegistry

from fluss_py.rpc.pb import common_pb2, tablet_pb2
from fluss_py.tablet.metrics import replica_metrics_text
from fluss_py.tablet.request_metrics import MeteredReplicaLayer, RequestMetrics
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


class _Immediate:
    """A replica layer answering every fetch at once (what is left to measure is the metering)."""

    response = tablet_pb2.FetchLogResponse(error=common_pb2.ErrorInfo(code=0))

    async def fetch_log(self, request: object) -> object:
        return self.response


async def _request_overhead_us(n: int = 100_000) -> float:
    inner = _Immediate()
    metered = MeteredReplicaLayer(inner, RequestMetrics(CollectorRegistry()))
    request = tablet_pb2.FetchLogRequest(replica_id=2)
    per_call = []
    for call in (metered.fetch_log, inner.fetch_log):
        t = time.perf_counter()
        for _ in range(n):
            await call(request)
        per_call.append((time.perf_counter() - t) / n)
    return (per_call[0] - per_call[1]) * 1e6


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
    overhead_us = await _request_overhead_us()
    return [
        row("per-request metrics overhead", overhead_us, "us/request", "< 10 us", overhead_us < 10),
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
