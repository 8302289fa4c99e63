"""Replica layer in one process: 3 ReplicaManagers over real logs (tmp dir), followers fetching through
in-memory endpoints (no gRPC), the production fetch settings (min 1KB, wait 500 ms). Measures what the replica layer
itself costs: acks=all latency one at a time, acks=all throughput (100 B / 1 KiB records, batches of 100,
8 requests in flight), and one idle follower fetch round over 1000 buckets."""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import uvloop

from fluss_py.replica.fetcher.state import FetchSettings
from fluss_py.replica.manager import ReplicaSettings
from fluss_py.replica.messages import FetchBucketRequest, FetchRequest, FetchSessionRequest
from fluss_py.types import TableBucket
from tests.unit.replica.fakes import FakeClock, batch
from tests.unit.replica.harness import ReplicaCluster

SETTINGS = ReplicaSettings(
    min_insync_replicas=2,
    lag_time_s=30.0,
    checkpoint_interval_s=1.0,
    fetch=FetchSettings(wait_max_s=0.5, min_bytes=1024, max_bytes=10 << 20, backoff_s=0.05),
)
R3 = (1, 2, 3)
TB = TableBucket(1, 0)


async def _latency(c: ReplicaCluster, n: int) -> list[float]:
    leader = c.managers[1]
    out = []
    for i in range(n):
        data = batch(b"%0100d" % i)
        t = time.perf_counter()
        r = await leader.append(-1, 5.0, {TB: data})
        out.append(time.perf_counter() - t)
        assert r[TB].error is None, r[TB].error
    return out


async def _throughput(c: ReplicaCluster, tb: TableBucket, size: int, seconds: float) -> tuple[float, float]:
    leader = c.managers[1]
    data = batch(*[b"x" * size] * 100)
    done = 0
    end = time.perf_counter() + seconds

    async def worker() -> None:
        nonlocal done
        while time.perf_counter() < end:
            r = await leader.append(-1, 5.0, {tb: data})
            assert r[tb].error is None, r[tb].error
            done += 100

    t = time.perf_counter()
    await asyncio.gather(*[worker() for _ in range(8)])
    elapsed = time.perf_counter() - t
    return done / elapsed, done * size / elapsed / 1e6


async def _idle_fetch_round(c: ReplicaCluster, buckets: list[TableBucket]) -> tuple[float, float]:
    """Seconds per idle round on the leader: a sessionless (or session-opening) fetch naming every bucket,
    and an incremental session fetch with nothing new (docs/replication.md "Fetch sessions")."""
    leader = c.managers[1]
    reqs = tuple(FetchBucketRequest(tb, 0, 1 << 20, 0) for tb in buckets)
    rounds = 20
    t = time.perf_counter()
    for _ in range(rounds):
        await leader.fetch(3, 0, 1024, 10 << 20, reqs)
    full = (time.perf_counter() - t) / rounds
    opened = await leader.fetch_in_session(FetchRequest(3, 0, 1024, 10 << 20, reqs, FetchSessionRequest()))
    t = time.perf_counter()
    for epoch in range(1, rounds + 1):
        session = FetchSessionRequest(opened.session_id, epoch)
        await leader.fetch_in_session(FetchRequest(3, 0, 1024, 10 << 20, (), session))
    return full, (time.perf_counter() - t) / rounds


async def _main(root: Path) -> list[dict]:
    c = ReplicaCluster(3, FakeClock(), root, SETTINGS)
    rows = []
    try:
        await c.create(TB, R3)
        lat = sorted(await _latency(c, 300))
        p50, p99 = statistics.median(lat) * 1e3, lat[int(len(lat) * 0.99)] * 1e3
        rows.append(dict(name="acks=all latency p50, 1 record", value=p50, unit="ms", target="< 5", ok=p50 < 5))
        rows.append(dict(name="acks=all latency p99, 1 record", value=p99, unit="ms", target="< 20", ok=p99 < 20))
        for size, tb in ((100, TableBucket(2, 0)), (1024, TableBucket(3, 0))):
            await c.create(tb, R3)
            recs, mb = await _throughput(c, tb, size, 3.0)
            rows.append(dict(name=f"acks=all RF3 {size} B records", value=recs, unit="records/s", target="", ok=True))
            rows.append(dict(name=f"acks=all RF3 {size} B records", value=mb, unit="MB/s", target="", ok=True))
        many = [TableBucket(100, b) for b in range(1000)]
        for tb in many:
            await c.create(tb, R3)
        full, incremental = await _idle_fetch_round(c, many)
        for name, seconds in (("full request", full), ("in a fetch session", incremental)):
            ms = seconds * 1e3
            rows.append(
                dict(
                    name=f"follower fetch round, 1000 idle buckets, {name}",
                    value=ms,
                    unit="ms",
                    target="< 50",
                    ok=ms < 50,
                )
            )
    finally:
        await c.close()
    return rows


def run() -> list[dict]:
    with (
        tempfile.TemporaryDirectory(prefix="bench-replica-") as d,
        asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner,
    ):
        return runner.run(_main(Path(d)))


if __name__ == "__main__":
    for row in run():
        print(row)
