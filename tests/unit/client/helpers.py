"""Helpers of the client's unit tests on the fake cluster: fast retries, filling a bucket, a consumer,
polling until n records arrive (with a deadline)."""

from __future__ import annotations

import asyncio

from fluss_py.client.consumer import Consumer
from fluss_py.client.options import ConsumerOptions, ProducerOptions, RetryOptions
from fluss_py.client.producer import Producer
from tests.unit.client.fake_cluster import FakeCluster

FAST = RetryOptions(backoff=0.005, backoff_max=0.05)


async def fill(cluster: FakeCluster, n: int, bucket: int = 0, prefix: str = "v", ts: int | None = None) -> None:
    async with Producer(cluster.servers[0], ProducerOptions(linger=0, retry=FAST), transport=cluster) as p:
        futs = [await p.send("t", f"{prefix}{i}".encode(), bucket=bucket, timestamp_ms=ts) for i in range(n)]
        await asyncio.gather(*futs)


def consumer(cluster: FakeCluster, **kw) -> Consumer:
    kw.setdefault("retry", FAST)
    kw.setdefault("fetch_max_wait", 0.01)
    return Consumer(cluster.servers[0], ConsumerOptions(**kw), transport=cluster)


async def poll_n(c: Consumer, n: int, timeout: float = 5.0) -> list:
    out: list = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while len(out) < n and loop.time() < deadline:
        out.extend(await c.poll(timeout=0.1))
    return out
