"""The data path through a real local cluster: ZooKeeper, 1 coordinator and 3 tablet-server processes with the
deploy/conf settings (seed 000: follower fetch min 1 KB, wait 500 ms), the Python client over gRPC on
loopback, everything sharing the machine's cores with this process.

Measures acks=all with idempotence, replication factor 3:
- one-at-a-time latency (send_and_wait of a 100 B record, 1-bucket table), p50 / p99;
- produce throughput of 100 B and 1 KiB records into a 3-bucket table (every server leads one bucket),
  client defaults (batch 64 KiB, linger 0, 5 batches in flight per bucket).
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import uvloop

from fluss_py.client import Admin, Producer, ProducerOptions
from fluss_py.testing.cluster import LocalCluster
from fluss_py.testing.cluster_file import TABLET_SERVER

LATENCY_TABLE = "fluss.bench_latency"
THROUGHPUT_TABLE = "fluss.bench_throughput_{size}"
SETTINGS = {"zookeeper.session-timeout": "6s", "log.level": "WARNING"}


async def _ready(admin: Admin, table: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _, buckets = await admin.get_table_placement(table)
        if buckets and all(b.leader >= 0 and len(b.isr) == 3 for b in buckets):
            return
        await asyncio.sleep(0.1)
    raise TimeoutError(f"{table}: buckets without a leader or a full ISR after {timeout}s")


async def _latency(bootstrap: str, n: int) -> list[float]:
    out = []
    async with Producer(bootstrap, ProducerOptions(acks=-1)) as producer:
        await producer.send_and_wait(LATENCY_TABLE, b"warm-up")
        for i in range(n):
            value = b"%0100d" % i
            t = time.perf_counter()
            await producer.send_and_wait(LATENCY_TABLE, value)
            out.append(time.perf_counter() - t)
    return out


async def _throughput(bootstrap: str, table: str, size: int, count: int) -> tuple[float, float]:
    value = b"x" * size
    async with Producer(bootstrap, ProducerOptions(acks=-1)) as producer:
        await producer.send_and_wait(table, value)  # metadata and writer id
        t = time.perf_counter()
        futures = [await producer.send(table, value) for _ in range(count)]
        await producer.flush()
        elapsed = time.perf_counter() - t
        for f in futures:
            f.result()  # every record acknowledged
    return count / elapsed, count * size / elapsed / 1e6


async def _main(bootstrap: str) -> list[dict]:
    rows: list[dict] = []
    async with Admin(bootstrap) as admin:
        await admin.create_table(LATENCY_TABLE, num_buckets=1, replication_factor=3)
        await _ready(admin, LATENCY_TABLE)
        lat = sorted(await _latency(bootstrap, 300))
        p50, p99 = statistics.median(lat) * 1e3, lat[int(len(lat) * 0.99)] * 1e3
        rows.append(
            dict(name="cluster acks=all latency p50, 1 record", value=p50, unit="ms", target="< 10", ok=p50 < 10)
        )
        rows.append(
            dict(name="cluster acks=all latency p99, 1 record", value=p99, unit="ms", target="< 50", ok=p99 < 50)
        )
        for size, count in ((100, 100_000), (1024, 30_000)):
            table = THROUGHPUT_TABLE.format(size=size)
            await admin.create_table(table, num_buckets=3, replication_factor=3)
            await _ready(admin, table)
            recs, mb = await _throughput(bootstrap, table, size, count)
            rows.append(dict(name=f"cluster acks=all RF3 {size} B", value=recs, unit="records/s", target="", ok=True))
            rows.append(dict(name=f"cluster acks=all RF3 {size} B", value=mb, unit="MB/s", target="", ok=True))
    return rows


def run() -> list[dict]:
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as d:
        cluster = LocalCluster(Path(d), coordinators=1, tablet_servers=3, overrides=SETTINGS, die_with_parent=True)
        try:
            cluster.start(timeout=60)
            cluster.wait_for_leader(30)
            bootstrap = ",".join(cluster.get(n).rpc_address for n in cluster.names(TABLET_SERVER))
            with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                return runner.run(_main(bootstrap))
        finally:
            cluster.close()


if __name__ == "__main__":
    for row in run():
        print(row)
