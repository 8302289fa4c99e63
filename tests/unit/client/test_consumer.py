"""Consumer against the fake cluster: seek variants, poll order, prefetch, leader change mid-poll."""

from __future__ import annotations

import asyncio

import pytest

from fluss_py.client.consumer.fetcher import _Session
from fluss_py.client.options import ProducerOptions
from fluss_py.client.producer import Producer
from fluss_py.errors import InvalidRequestError, OffsetOutOfRangeError, PartitionedTableError
from fluss_py.types import TableBucket
from tests.unit.client.fake_cluster import FakeCluster
from tests.unit.client.helpers import FAST, consumer, fill, poll_n

pytestmark = pytest.mark.timeout(30)


async def test_poll_from_earliest_returns_every_record_in_order() -> None:
    cluster = FakeCluster()
    tid = cluster.create_table("fluss", "t", num_buckets=2)
    await fill(cluster, 30, bucket=0)
    await fill(cluster, 10, bucket=1, prefix="w")
    async with consumer(cluster) as c:
        await c.assign("t")
        records = await poll_n(c, 40)
    by_bucket: dict[int, list] = {0: [], 1: []}
    for r in records:
        by_bucket[r.bucket.bucket].append((r.offset, r.value))
    assert by_bucket[0] == [(i, f"v{i}".encode()) for i in range(30)]
    assert by_bucket[1] == [(i, f"w{i}".encode()) for i in range(10)]
    assert all(r.bucket.table_id == tid for r in records)


async def test_seek_to_offset_end_and_timestamp() -> None:
    cluster = FakeCluster()
    tid = cluster.create_table("fluss", "t")
    tb = TableBucket(tid, 0)
    await fill(cluster, 5, ts=1000)
    await fill(cluster, 5, prefix="late", ts=2000)
    async with consumer(cluster) as c:
        await c.assign([tb])
        c.seek(tb, 7)
        assert [r.offset for r in await poll_n(c, 3)] == [7, 8, 9]

        c.seek_to_timestamp(1500)
        assert await c.position(tb) == 5
        assert [r.value for r in await poll_n(c, 5)] == [f"late{i}".encode() for i in range(5)]

        c.seek_to_end()
        assert await c.position(tb) == 10
        await fill(cluster, 2, prefix="new")
        assert [r.value for r in await poll_n(c, 2)] == [b"new0", b"new1"]

        c.seek_to_beginning()
        assert (await poll_n(c, 1))[0].offset == 0


async def test_poll_respects_max_records_and_continues_where_it_stopped() -> None:
    cluster = FakeCluster()
    cluster.create_table("fluss", "t")
    await fill(cluster, 20)
    async with consumer(cluster) as c:
        await c.assign("t")
        got = []
        while len(got) < 20:
            batch = await c.poll(timeout=1.0, max_records=3)
            assert len(batch) <= 3
            got.extend(batch)
    assert [r.offset for r in got] == list(range(20))


async def test_leader_change_mid_poll_is_transparent() -> None:
    cluster = FakeCluster()
    tid = cluster.create_table("fluss", "t")
    tb = TableBucket(tid, 0)
    await fill(cluster, 10)
    async with consumer(cluster) as c:
        await c.assign("t")
        first = await poll_n(c, 10)
        cluster.move_leader(tb, 2)  # the old leader now answers NOT_LEADER (with a hint)
        await fill(cluster, 10, prefix="after")
        cluster.fault("FetchLog", "not_leader")  # and once without a hint: a metadata refresh
        second = await poll_n(c, 10)
    assert [r.offset for r in first + second] == list(range(20))
    assert [r.value for r in second] == [f"after{i}".encode() for i in range(10)]
    fetches = [a for a, n, _ in cluster.calls if n == "FetchLog"]
    assert fetches[-1] == cluster.servers[2]


async def test_fetch_disconnects_and_fenced_epochs_are_retried() -> None:
    cluster = FakeCluster()
    cluster.create_table("fluss", "t")
    await fill(cluster, 5)
    async with consumer(cluster) as c:
        cluster.fault("FetchLog", "disconnect")
        cluster.fault("FetchLog", "fenced")
        await c.assign("t")
        assert [r.offset for r in await poll_n(c, 5)] == list(range(5))


async def test_out_of_range_resets_by_policy_or_raises() -> None:
    cluster = FakeCluster()
    tid = cluster.create_table("fluss", "t")
    tb = TableBucket(tid, 0)
    await fill(cluster, 3)
    async with consumer(cluster) as c:
        await c.assign([tb])
        c.seek(tb, 50)
        assert [r.offset for r in await poll_n(c, 3)] == [0, 1, 2]  # auto reset to earliest
    async with consumer(cluster, auto_offset_reset="none") as c:
        await c.assign([tb])
        with pytest.raises(InvalidRequestError, match="seek first"):
            await c.poll(timeout=0.1)
        c.seek(tb, 50)
        with pytest.raises(OffsetOutOfRangeError):
            await poll_n(c, 1)


async def test_a_paused_leader_is_left_for_the_new_one_without_waiting_for_the_request_timeout() -> None:
    cluster = FakeCluster()
    tid = cluster.create_table("fluss", "t")
    tb = TableBucket(tid, 0)
    await fill(cluster, 5)
    async with consumer(cluster, request_timeout=30.0) as c:
        cluster.fault("FetchLog", "hang", then=lambda: cluster.move_leader(tb, 1))
        await c.assign("t")
        loop = asyncio.get_running_loop()
        started = loop.time()
        assert [r.offset for r in await poll_n(c, 5, timeout=10)] == list(range(5))
        assert loop.time() - started < 5


@pytest.mark.parametrize("seed", range(4))
async def test_every_record_once_in_order_under_random_fetch_faults(seed: int) -> None:
    import random

    rng = random.Random(seed)
    cluster = FakeCluster()
    tid = cluster.create_table("fluss", "t", num_buckets=3)
    kinds = ["disconnect", "timeout", "not_leader", "not_leader_hint", "fenced"]

    async def chaos() -> None:
        while True:
            await asyncio.sleep(rng.uniform(0.002, 0.01))
            tb = TableBucket(tid, rng.randrange(3))
            kind = rng.choice([*kinds, "move"])
            if kind == "move":
                cluster.move_leader(tb, rng.randrange(3))
            elif len(cluster.faults) < 3:
                cluster.fault("FetchLog", kind, bucket=None if kind in ("disconnect", "timeout") else tb)

    async with consumer(cluster) as c:
        await c.assign("t")
        chaos_task = asyncio.create_task(chaos())
        try:
            for b in range(3):
                await fill(cluster, 40, bucket=b, prefix=f"b{b}-")
            got = await poll_n(c, 120, timeout=10)
        finally:
            chaos_task.cancel()
    for b in range(3):
        mine = [(r.offset, r.value) for r in got if r.bucket.bucket == b]
        assert mine == [(i, f"b{b}-{i}".encode()) for i in range(40)]


async def test_compressed_batches_round_trip() -> None:
    from fluss_py.record import CompressionType

    cluster = FakeCluster()
    cluster.create_table("fluss", "t")
    opts = ProducerOptions(linger=0.01, compression=CompressionType.LZ4, retry=FAST)
    async with Producer(cluster.servers[0], opts, transport=cluster) as p:
        futs = [await p.send("t", f"value-{i}".encode() * 10, key=b"k") for i in range(50)]
        await asyncio.gather(*futs)
    async with consumer(cluster) as c:
        await c.assign("t")
        got = await poll_n(c, 50)
    assert [r.value for r in got] == [f"value-{i}".encode() * 10 for i in range(50)]
    assert all(r.key == b"k" for r in got)


def test_fetch_session_names_only_moved_buckets_and_starts_over_after_a_reset() -> None:
    a, b, c = TableBucket(1, 0), TableBucket(1, 1), TableBucket(1, 2)
    s = _Session()
    assert s.delta({a: (0, 1), b: (0, 1)}) == ([a, b], [])  # no session yet: a full request
    s.answered(77)
    assert (s.id, s.epoch) == (77, 1)
    assert s.delta({a: (5, 1), b: (0, 1)}) == ([a], [])  # a moved
    s.answered(77)
    assert s.delta({b: (0, 2), c: (0, 1)}) == ([b, c], [a])  # b's leader epoch changed, c added, a dropped
    s.answered(77)
    assert (s.id, s.epoch) == (77, 3)
    assert s.delta({b: (0, 2), c: (0, 1)}) == ([], [])  # idle: nothing named
    s.reset()  # a failed call: the next request names everything again
    assert s.delta({b: (0, 2), c: (0, 1)}) == ([b, c], [])
    s.answered(5)
    s.delta({b: (0, 2), c: (0, 1)})
    s.answered(5)
    s.retry(c)  # its answer was an error (or dropped): name it again though its position did not move
    assert s.delta({b: (0, 2), c: (0, 1)}) == ([c], [])
    s.answered(5)
    s.retry(c)  # ...or forget it if it is no longer fetched from this server
    assert s.delta({b: (0, 2)}) == ([], [c])
    s.answered(0)  # a server without sessions: every request stays full
    assert s.id == 0 and s.delta({b: (0, 2)}) == ([b], [])


async def test_a_bad_batch_is_raised_after_every_record_before_it_and_until_the_user_seeks_past() -> None:
    """The batch at offset 10 claims 4 records but its fourth has a value length of 2^31-1 (the leader of a
    real cluster refuses it; a log written before that check, or by a faulty server, may still hold one)."""
    from fluss_py.errors import CorruptMessageError
    from fluss_py.record.batch import set_base_offset_and_epoch
    from fluss_py.testing.bad_batches import lying_value_length

    cluster = FakeCluster()
    tid = cluster.create_table("fluss", "t")
    await fill(cluster, 10, prefix="before")
    bucket = cluster.buckets[TableBucket(tid, 0)]
    bad = bytearray(lying_value_length(3))
    set_base_offset_and_epoch(bad, 0, bucket.leo, bucket.leader_epoch)
    bucket.batches.append(bytes(bad))
    bucket.leo += 4
    await fill(cluster, 5, prefix="after")
    async with consumer(cluster) as c:
        await c.assign("t")
        got = await poll_n(c, 10)
        assert [r.value for r in got] == [f"before{i}".encode() for i in range(10)]
        for _ in range(2):  # raised, and raised again: the position stays at the bad batch
            with pytest.raises(CorruptMessageError, match=r"offset 10 .*value length 2147483647.*seek past"):
                await poll_n(c, 1)
            assert await c.position(TableBucket(tid, 0)) == 10
        c.seek(TableBucket(tid, 0), 14)
        rest = await poll_n(c, 5)
    assert [(r.offset, r.value) for r in rest] == [(14 + i, f"after{i}".encode()) for i in range(5)]


async def test_reading_a_partitioned_tables_logical_table_is_refused_naming_a_partition() -> None:
    cluster = FakeCluster()
    spec = {"table.auto-partition.time-unit": "day", "table.partition.key": "dt"}
    cluster.create_table("fluss", "events", num_buckets=2, properties=spec)
    part = cluster.create_table("fluss", "events$20261201", num_buckets=2, properties=spec)
    c = consumer(cluster)
    try:
        with pytest.raises(PartitionedTableError) as e:
            await c.assign("events")
        assert not e.value.retriable and "events$<slot>" in str(e.value)
        await c.assign("events$20261201")  # a partition is a table
        assert {tb.table_id for tb in c.assignment()} == {part}
    finally:
        await c.close()
