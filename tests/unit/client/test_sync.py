"""The synchronous wrappers drive the asyncio clients on their private loop (fake cluster, no sockets)."""

from __future__ import annotations

import pytest

from fluss_py.client import ConsumerOptions, ProducerOptions, RetryOptions, SyncConsumer, SyncProducer
from tests.unit.client.fake_cluster import FakeCluster

pytestmark = pytest.mark.timeout(30)


def test_sync_producer_and_consumer_round_trip() -> None:
    cluster = FakeCluster()
    cluster.create_table("fluss", "t", num_buckets=2)
    fast = RetryOptions(backoff=0.005, backoff_max=0.05)
    with SyncProducer(cluster.servers[0], ProducerOptions(linger=0.001, retry=fast), transport=cluster) as p:
        futures = [p.send("t", f"v{i}".encode(), key=f"k{i % 3}".encode()) for i in range(30)]
        metas = [f.result(timeout=5) for f in futures]
        p.flush()
    assert len({(m.bucket, m.offset) for m in metas}) == 30
    with SyncConsumer(cluster.servers[0], ConsumerOptions(fetch_max_wait=0.01, retry=fast), transport=cluster) as c:
        c.assign("t")
        got = []
        for _ in range(100):
            got.extend(c.poll(0.05))
            if len(got) == 30:
                break
    assert sorted(r.value for r in got) == sorted(f"v{i}".encode() for i in range(30))
