"""The delivery timeout bounds a record from ``send`` to its outcome, even while its request is on the wire to
a silent leader; and the options refuse a delivery timeout shorter than one linger plus one request."""

from __future__ import annotations

import asyncio

import pytest

from fluss_py.client.options import ProducerOptions
from fluss_py.client.producer import Producer
from fluss_py.errors import ConfigError, RequestTimedOutError
from fluss_py.types import TableBucket
from tests.unit.client.fake_cluster import FakeCluster
from tests.unit.client.helpers import FAST

pytestmark = pytest.mark.timeout(30)


def test_a_delivery_timeout_shorter_than_linger_plus_request_timeout_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"delivery_timeout \(2.0s\).*linger \(0.5s\).*request_timeout \(3.0s\)"):
        ProducerOptions(delivery_timeout=2.0, linger=0.5, request_timeout=3.0)
    assert ProducerOptions(delivery_timeout=3.5, linger=0.5, request_timeout=3.0).delivery_timeout == 3.5


async def test_a_batch_on_the_wire_to_a_silent_leader_fails_at_its_delivery_deadline() -> None:
    """The leader is paused (SIGSTOP): its request would end only at request_timeout + 2 s (3 s here); the
    record fails at its delivery timeout (1 s), saying it may or may not have been written."""
    cluster = FakeCluster()
    tid = cluster.create_table("fluss", "t", num_buckets=1)
    tb = TableBucket(tid, 0)
    options = ProducerOptions(retry=FAST, delivery_timeout=1.0, request_timeout=1.0)
    async with Producer(cluster.servers[0], options, transport=cluster) as p:
        await (await p.send("t", b"warm"))
        leader = cluster.servers[cluster.buckets[tb].leader]
        cluster.paused.add(leader)
        loop = asyncio.get_running_loop()
        start = loop.time()
        fut = await p.send("t", b"lost")
        with pytest.raises(RequestTimedOutError, match="may or may not have been written"):
            await fut
        took = loop.time() - start
        assert 1.0 <= took < 1.8, took
        # The leader answers again: the next record goes under a new writer id (the given-up batch keeps its
        # sequence under the old one), and is written once.
        cluster.paused.discard(leader)
        allocations = sum(1 for _, name, _ in cluster.calls if name == "AllocateWriterId")
        r = await asyncio.wait_for(await p.send("t", b"next"), 10)
        assert sum(1 for _, name, _ in cluster.calls if name == "AllocateWriterId") == allocations + 1
    assert [v for _, _, v in cluster.buckets[tb].records()] == [b"warm", b"next"]
    assert r.offset == 1
