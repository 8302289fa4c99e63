"""The data path through a real local cluster, and the same workloads against the peer (NATS JetStream R3)
when ``nats-server`` and nats-py are installed (docs/performance.md; tests/bench/peers/).

fluss_py: ZooKeeper, 1 coordinator and 3 tablet-server processes with the deploy/conf settings, the Python
client over gRPC on loopback, everything sharing the machine's 2 cores with this process. acks=all with
idempotence, replication factor 3:
(a) pipelined produce throughput of 100 B and 1 KiB records into a 3-bucket table (every server leads one
    bucket), client defaults; NATS: ``publish_async`` with 1000 pending into an R3 file stream;
(b) one-at-a-time latency (send_and_wait of a 100 B record, 1-bucket table), p50 / p99; NATS: ``await
    js.publish``;
(c) produce -> consume latency at a fixed rate (E2E_RATE records/s for E2E_SECONDS, 100 B), p50 / p99: a
    consumer polls the bucket; NATS: a push subscription.

Rows carry ``peer`` (the NATS figure) and ``ratio`` (fluss_py / NATS) when the peer ran.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import uvloop

from fluss_py.client import Admin, Consumer, Producer, ProducerOptions
from fluss_py.security.identity import PeerIdentity
from fluss_py.testing.cluster import LocalCluster
from fluss_py.testing.cluster_file import TABLET_SERVER
from tests.bench.common import p50_p99_ms, paced, row

T = TypeVar("T")
LATENCY_TABLE = "fluss.bench_latency"
E2E_TABLE = "fluss.bench_e2e"
THROUGHPUT_TABLE = "fluss.bench_throughput_{size}"
SETTINGS = {"zookeeper.session-timeout": "6s", "log.level": "WARNING"}
SIZES = ((100, 100_000), (1024, 30_000))
LATENCY_N = 300
E2E_RATE, E2E_SECONDS = 200.0, 5.0


async def _ready(admin: Admin, table: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _, buckets = await admin.get_table_placement(table)
        if buckets and all(b.leader >= 0 and len(b.isr) == 3 for b in buckets):
            return
        await asyncio.sleep(0.1)
    raise TimeoutError(f"{table}: buckets without a leader or a full ISR after {timeout}s")


async def _latency(
    bootstrap: str, n: int, table: str = LATENCY_TABLE, security: PeerIdentity | None = None
) -> list[float]:
    out = []
    async with Producer(bootstrap, ProducerOptions(acks=-1), security=security) as producer:
        await producer.send_and_wait(table, b"warm-up")
        for i in range(n):
            value = b"%0100d" % i
            t = time.perf_counter()
            await producer.send_and_wait(table, value)
            out.append(time.perf_counter() - t)
    return out


async def _throughput(
    bootstrap: str, table: str, size: int, count: int, security: PeerIdentity | None = None
) -> tuple[float, float]:
    value = b"x" * size
    async with Producer(bootstrap, ProducerOptions(acks=-1), security=security) as producer:
        await producer.send_and_wait(table, value)  # metadata and writer id
        t = time.perf_counter()
        futures = [await producer.send(table, value) for _ in range(count)]
        await producer.flush()
        elapsed = time.perf_counter() - t
        for f in futures:
            f.result()  # every record acknowledged
    return count / elapsed, count * size / elapsed / 1e6


async def _e2e(bootstrap: str, rate: float, seconds: float) -> list[float]:
    """Send one 100 B record every 1/rate s (not waiting for acks); a consumer on the same loop records when
    each arrives. Returns receive - send per record."""
    sent: dict[int, float] = {}
    got: list[float] = []
    n = int(rate * seconds)
    async with Producer(bootstrap, ProducerOptions(acks=-1)) as producer, Consumer(bootstrap) as consumer:
        await producer.send_and_wait(E2E_TABLE, b"%010d" % -1)
        await consumer.assign(E2E_TABLE)
        consumer.seek_to_beginning()  # a fresh table: only the warm-up record precedes

        async def consume() -> None:
            while len(got) < n:
                for r in await consumer.poll(timeout=0.5):
                    i = int(r.value[:10]) if r.value else -1
                    if i in sent:
                        got.append(time.perf_counter() - sent[i])

        reader = asyncio.create_task(consume())
        async for i in paced(rate, n):
            sent[i] = time.perf_counter()
            await producer.send(E2E_TABLE, b"%010d" % i + b"x" * 90)
        await producer.flush()
        try:
            await asyncio.wait_for(reader, 10)
        except TimeoutError:
            pass  # fewer samples: reported as such
    return got


async def _fluss(bootstrap: str) -> dict[str, float]:
    out: dict[str, float] = {}
    async with Admin(bootstrap) as admin:
        for size, count in SIZES:
            table = THROUGHPUT_TABLE.format(size=size)
            await admin.create_table(table, num_buckets=3, replication_factor=3)
            await _ready(admin, table)
            out[f"tp{size}"], out[f"mb{size}"] = await _throughput(bootstrap, table, size, count)
        await admin.create_table(LATENCY_TABLE, num_buckets=1, replication_factor=3)
        await _ready(admin, LATENCY_TABLE)
        out["p50"], out["p99"] = p50_p99_ms(await _latency(bootstrap, LATENCY_N))
        await admin.create_table(E2E_TABLE, num_buckets=1, replication_factor=3)
        await _ready(admin, E2E_TABLE)
        out["e2e50"], out["e2e99"] = p50_p99_ms(await _e2e(bootstrap, E2E_RATE, E2E_SECONDS))
    return out


async def _nats(urls: list[str]) -> dict[str, float]:
    from tests.bench.peers import nats_load

    out: dict[str, float] = {}
    for size, _ in SIZES:
        out[f"tp{size}"], out[f"mb{size}"] = await nats_load.throughput(urls, size, 30_000)
    out["p50"], out["p99"] = p50_p99_ms(await nats_load.latency(urls, LATENCY_N))
    out["e2e50"], out["e2e99"] = p50_p99_ms(await nats_load.e2e_latency(urls, E2E_RATE, E2E_SECONDS))
    return out


def on_fresh_cluster(prefix: str, body: Callable[[str], Awaitable[T]]) -> T:
    """Run ``body(bootstrap)`` on a uvloop loop against a fresh LocalCluster (1 coordinator, 3 tablet servers,
    SETTINGS) in a temporary directory; the cluster is closed afterwards."""
    with tempfile.TemporaryDirectory(prefix=prefix) as d:
        cluster = LocalCluster(Path(d), coordinators=1, tablet_servers=3, overrides=SETTINGS, die_with_parent=True)
        try:
            cluster.start(timeout=60)
            cluster.wait_for_leader(30)
            bootstrap = ",".join(cluster.get(n).rpc_address for n in cluster.names(TABLET_SERVER))
            with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                return runner.run(body(bootstrap))
        finally:
            cluster.close()


def run_fluss() -> dict[str, float]:
    return on_fresh_cluster("bench-cluster-", _fluss)


def run_nats() -> dict[str, float] | None:
    from tests.bench.peers.nats import NatsCluster, available

    if not available():
        return None
    with (
        tempfile.TemporaryDirectory(prefix="bench-nats-") as d,
        NatsCluster(Path(d)) as nats_cluster,
        asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner,
    ):
        return runner.run(_nats(nats_cluster.urls))


def run() -> list[dict]:
    f = run_fluss()
    n = run_nats() or {}
    rows = []
    for size, _ in SIZES:
        recs, mb = f[f"tp{size}"], f[f"mb{size}"]
        name = f"(a) pipelined acks=all RF3 {size} B"
        if size == 100:
            rows.append(row(name, recs, "records/s", ">= 200k", recs >= 200_000, n.get(f"tp{size}")))
            rows.append(row(name, mb, "MB/s", "", True, n.get(f"mb{size}")))
        else:
            rows.append(row(name, recs, "records/s", "", True, n.get(f"tp{size}")))
            rows.append(row(name, mb, "MB/s", ">= 100", mb >= 100, n.get(f"mb{size}")))
    rows.append(row("(b) one-at-a-time acks=all p50", f["p50"], "ms", "<= 1.5", f["p50"] <= 1.5, n.get("p50")))
    rows.append(row("(b) one-at-a-time acks=all p99", f["p99"], "ms", "", True, n.get("p99")))
    what = f"(c) produce->consume at {E2E_RATE:.0f}/s"
    rows.append(row(f"{what} p50", f["e2e50"], "ms", "", True, n.get("e2e50")))
    rows.append(row(f"{what} p99", f["e2e99"], "ms", "", True, n.get("e2e99")))
    return rows


if __name__ == "__main__":
    for r in run():
        print(r)
