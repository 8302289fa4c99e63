"""Calls racing ``close``: a producer's send waiting for buffer room, a consumer's poll waiting for records.
Each ends with a closed error (or a future that completes), never a future left pending forever."""

from __future__ import annotations

import asyncio
import threading

import pytest

from fluss_py.client import ConsumerClosedError, ProducerClosedError, ProducerOptions, SyncProducer
from fluss_py.client.producer import Producer
from fluss_py.types import TableBucket
from tests.unit.client.fake_cluster import FakeCluster
from tests.unit.client.helpers import FAST, consumer, fill

pytestmark = pytest.mark.timeout(30)

SMALL = ProducerOptions(retry=FAST, batch_size=1000, buffer_memory=1000)


def leaderless(cluster: FakeCluster) -> None:
    """Kill the leader of bucket 0 of table t: nothing is acknowledged any more."""
    tid = cluster.tables[("fluss", "t")][0]
    cluster.kill(cluster.buckets[TableBucket(tid, 0)].leader)


async def test_a_send_waiting_for_buffer_memory_fails_when_the_producer_closes() -> None:
    cluster = FakeCluster()
    cluster.create_table("fluss", "t", num_buckets=1)
    p = Producer(cluster.servers[0], SMALL, transport=cluster)
    await (await p.send("t", b"warm"))  # metadata and writer id known
    leaderless(cluster)
    first = await p.send("t", b"x" * 900)  # the buffer memory is full
    blocked = asyncio.create_task(p.send("t", b"y" * 900))
    await asyncio.sleep(0.05)
    assert not blocked.done()
    await p.close(timeout=0.1)
    with pytest.raises(ProducerClosedError):
        await first
    with pytest.raises(ProducerClosedError):
        await asyncio.wait_for(blocked, 2)
    assert p._pool.used == 0


async def test_a_send_that_resumes_after_close_queues_nothing() -> None:
    cluster = FakeCluster()
    cluster.create_table("fluss", "t", num_buckets=1)
    p = Producer(cluster.servers[0], SMALL, transport=cluster)
    send = asyncio.create_task(p.send("t", b"v"))  # waits for the table's metadata
    await asyncio.sleep(0)
    await p.close(timeout=0)
    with pytest.raises(ProducerClosedError):
        await asyncio.wait_for(send, 2)
    assert not p._accumulator.incomplete and p._pool.used == 0
    with pytest.raises(ProducerClosedError):
        await p.send("t", b"after")


def test_a_sync_send_waiting_for_buffer_memory_is_released_by_close() -> None:
    cluster = FakeCluster()
    cluster.create_table("fluss", "t", num_buckets=1)
    p = SyncProducer(cluster.servers[0], SMALL, transport=cluster)
    p.send("t", b"warm").result(5)
    leaderless(cluster)
    first = p.send("t", b"x" * 900)
    outcome: list[BaseException | None] = []

    def blocked() -> None:
        try:
            outcome.append(p.send("t", b"y" * 900).exception(timeout=3))
        except BaseException as e:
            outcome.append(e)

    t = threading.Thread(target=blocked, daemon=True)
    t.start()
    for _ in range(500):  # until it waits for room (at most 5 s)
        if p._client._pool._waiters:
            break
        t.join(0.01)
    p.close(timeout=0.1)
    assert isinstance(first.exception(timeout=3), ProducerClosedError)
    t.join(5)
    assert not t.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], ProducerClosedError), outcome


async def test_a_poll_waiting_for_records_ends_when_the_consumer_closes() -> None:
    cluster = FakeCluster()
    cluster.create_table("fluss", "t")
    await fill(cluster, 1)
    c = consumer(cluster)
    await c.assign("t")
    poll = asyncio.create_task(c.poll(timeout=0.5))
    got = await poll
    assert len(got) == 1
    poll = asyncio.create_task(c.poll(timeout=20))  # nothing more to read
    await asyncio.sleep(0.05)
    await c.close()
    with pytest.raises(ConsumerClosedError):
        await asyncio.wait_for(poll, 2)
    with pytest.raises(ConsumerClosedError):
        await c.poll(timeout=0)
