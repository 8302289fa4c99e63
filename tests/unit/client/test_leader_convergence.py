"""The client's view of a bucket converges to the real leader and epoch whatever order answers arrive in
(docs/client.md "Bucket leader and epoch"): the answer sequences of a double kill -9, replayed on the fake.

The real sequence (issue 19): leader A at epoch N dies together with B; the coordinator moves the bucket to
B (N+1) and, B's death proven, to C (N+2). C, not yet told, is still a follower of B and names it; B, once
restarted, names C. Each test checks the invariant at the end: the bucket's entry is what the last
metadata answer says (leader C, epoch N+2, not a guess).
"""

from __future__ import annotations

import asyncio

import pytest

from fluss_py.client.consumer import Consumer
from fluss_py.client.metadata import ClusterMetadata
from fluss_py.client.options import ConsumerOptions, ProducerOptions, RetryOptions
from fluss_py.client.producer import Producer
from fluss_py.errors import UnknownLeaderEpochError
from fluss_py.types import TableBucket
from tests.unit.client.fake_cluster import FakeCluster
from tests.unit.client.helpers import poll_n

pytestmark = pytest.mark.timeout(30)

FAST = RetryOptions(backoff=0.005, backoff_max=0.05)
A, B, C, D = 0, 1, 2, 3


async def fill(cluster: FakeCluster, bootstrap: int, n: int, prefix: str) -> None:
    options = ProducerOptions(linger=0, retry=FAST)
    async with Producer(cluster.servers[bootstrap], options, transport=cluster) as p:
        await asyncio.gather(*[await p.send("t", f"{prefix}{i}".encode(), bucket=0) for i in range(n)])


def double_kill(cluster: FakeCluster, tb: TableBucket, rpc: str) -> None:
    """A and B die; the bucket moves to B then C; C still names B once, B (restarted after three refused
    calls) names C."""
    cluster.kill(A)
    cluster.move_leader(tb, B)
    cluster.move_leader(tb, C)
    cluster.fault(rpc, "not_leader_hint", address=cluster.servers[C], hint=B)
    cluster.fault(rpc, "disconnect", address=cluster.servers[B], times=3)


def assert_converged(cluster: FakeCluster, metadata, tb: TableBucket) -> None:
    loc = metadata.bucket(tb)
    assert (loc.leader, loc.leader_epoch, loc.hinted) == (C, cluster.buckets[tb].leader_epoch, False)


async def test_a_consumer_told_a_stale_leader_converges_to_the_real_one() -> None:
    cluster = FakeCluster(4)
    tb = TableBucket(cluster.create_table("fluss", "t"), 0)
    await fill(cluster, D, 5, "before")
    options = ConsumerOptions(retry=FAST, fetch_max_wait=0.01)
    async with Consumer(cluster.servers[D], options, transport=cluster) as c:
        await c.assign("t")
        got = await poll_n(c, 5)
        double_kill(cluster, tb, "FetchLog")
        await fill(cluster, D, 5, "after")
        got += await poll_n(c, 5)
        assert [r.value for r in got] == [f"before{i}".encode() for i in range(5)] + [
            f"after{i}".encode() for i in range(5)
        ]
        assert_converged(cluster, c.metadata, tb)
    fetched_from = [a for a, n, _ in cluster.calls if n == "FetchLog"]
    assert cluster.servers[B] in fetched_from  # the stale hint was followed, then corrected
    assert fetched_from[-1] == cluster.servers[C]


async def test_a_producer_told_a_stale_leader_converges_to_the_real_one() -> None:
    cluster = FakeCluster(4)
    tb = TableBucket(cluster.create_table("fluss", "t"), 0)
    await fill(cluster, D, 1, "before")
    double_kill(cluster, tb, "ProduceLog")
    cluster.kill(B)  # B stays dead: only a metadata answer can correct the guess
    async with Producer(cluster.servers[D], ProducerOptions(linger=0, retry=FAST), transport=cluster) as p:
        await p.metadata.update()
        md = await asyncio.wait_for(await p.send("t", b"x", bucket=0), 10)
        assert md.offset == 1
        assert_converged(cluster, p.metadata, tb)


async def test_a_producer_told_the_dead_leader_by_the_new_one_is_not_stalled_until_it_returns() -> None:
    """The second finding of the issue (acks=all stalls of 6-7 s after ONE kill -9, ending when the killed
    server came back): the new leader B, not yet told, refuses the produce naming the dead A (ProduceLog
    carries no epoch, so it cannot say "I am behind"). The guess A must not outrank the answer (B, 1)."""
    cluster = FakeCluster(4)
    tb = TableBucket(cluster.create_table("fluss", "t"), 0)
    await fill(cluster, D, 1, "before")
    cluster.kill(A)
    cluster.move_leader(tb, B)
    cluster.fault("ProduceLog", "not_leader_hint", address=cluster.servers[B], hint=A)
    async with Producer(cluster.servers[D], ProducerOptions(linger=0, retry=FAST), transport=cluster) as p:
        await p.metadata.update()
        assert (await asyncio.wait_for(await p.send("t", b"x", bucket=0), 10)).offset == 1
        loc = p.metadata.bucket(tb)
        assert (loc.leader, loc.leader_epoch, loc.hinted) == (B, 1, False)
    produced_at = [a for a, n, _ in cluster.calls if n == "ProduceLog"]
    assert produced_at.count(cluster.servers[A]) <= 2  # one try at the named server, then the answer wins


async def test_the_answer_sequence_itself_on_the_metadata_alone() -> None:
    """The client log of the issue, step by step, on ``ClusterMetadata``: no step may leave a guess that an
    answer cannot correct."""
    cluster = FakeCluster(4)
    tb = TableBucket(cluster.create_table("fluss", "t"), 0)
    md = ClusterMetadata(cluster.servers[D], cluster, retry=FAST)
    cluster.move_leader(tb, B)
    cluster.move_leader(tb, C)
    await md.update()  # C at epoch 2: what the consumer's request carried
    assert md.apply_leader_hint(tb, B, cluster.servers[B])  # 1. C, behind, names B: a guess, B at 3
    assert (md.leader_for(tb).id, md.leader_epoch(tb)) == (B, 3)
    await md.update()  # 2. B does not answer: refresh; the answer (C, 2) outranks the guess
    assert_converged(cluster, md, tb)
    assert md.apply_leader_hint(tb, B, cluster.servers[B])
    assert not md.apply_leader_hint(tb, C, cluster.servers[C])  # B restarted names C: back to the answer
    assert_converged(cluster, md, tb)  # 3. fetches carry epoch 2, not 3: no UNKNOWN_LEADER_EPOCH loop
    assert UnknownLeaderEpochError().invalid_metadata  # and were one refused so, the client refreshes
    await md.close()
