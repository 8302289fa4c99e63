"""Producer against the in-memory fake cluster: batching, routing, retries, ordering, exactly-once."""

from __future__ import annotations

import asyncio

import pytest

from fluss_py.client.options import ProducerOptions, RetryOptions
from fluss_py.client.producer import Producer
from fluss_py.client.producer.accumulator import RecordAccumulator
from fluss_py.errors import (
    ErrorCode,
    OutOfOrderSequenceError,
    PartitionNotExistError,
    RecordBatchTooLargeError,
    RequestTimedOutError,
    TableNotExistError,
)
from fluss_py.record import CompressionType, iter_batches
from fluss_py.record.batch import KV_BATCH
from fluss_py.types import TableBucket
from tests.unit.client.fake_cluster import FakeCluster

pytestmark = pytest.mark.timeout(30)

FAST = RetryOptions(backoff=0.005, backoff_max=0.05)


def make(cluster: FakeCluster, **kw) -> Producer:
    kw.setdefault("retry", FAST)
    kw.setdefault("linger", 0.0)
    return Producer(cluster.servers[0], ProducerOptions(**kw), transport=cluster)


def produce_calls(cluster: FakeCluster) -> list[tuple[str, list[tuple[int, int]]]]:
    return [
        (addr, [(b.table_bucket.table_id, b.table_bucket.bucket) for b in req.buckets])
        for addr, name, req in cluster.calls
        if name == "ProduceLog"
    ]


def values(cluster: FakeCluster, tb: TableBucket) -> list[bytes | None]:
    return [v for _, _, v in cluster.buckets[tb].records()]


async def test_send_returns_bucket_and_offset_and_appends_in_order() -> None:
    cluster = FakeCluster()
    tid = cluster.create_table("fluss", "t", num_buckets=1)
    async with make(cluster) as p:
        futs = [await p.send("t", f"v{i}".encode()) for i in range(20)]
        results = [await f for f in futs]
    tb = TableBucket(tid, 0)
    assert [r.offset for r in results] == list(range(20))
    assert all(r.bucket == tb for r in results)
    assert values(cluster, tb) == [f"v{i}".encode() for i in range(20)]


async def test_key_hashing_is_stable_and_keyless_records_stick_per_batch() -> None:
    cluster = FakeCluster()
    cluster.create_table("fluss", "t", num_buckets=4)
    async with make(cluster, linger=0.05) as p:
        a = [await (await p.send("t", b"x", key=b"user-1")) for _ in range(3)]
        futs = [await p.send("t", b"y") for _ in range(10)]
        keyless = [await f for f in futs]
    assert len({r.bucket for r in a}) == 1
    assert len({r.bucket for r in keyless}) == 1  # one lingering batch: one sticky bucket


async def test_batches_fill_by_size_and_linger() -> None:
    cluster = FakeCluster()
    tid = cluster.create_table("fluss", "t", num_buckets=1)
    async with make(cluster, linger=0.2, batch_size=1000) as p:
        futs = [await p.send("t", b"x" * 100) for _ in range(25)]  # ~116 B per record -> 3 full batches
        await asyncio.gather(*futs)
    calls = produce_calls(cluster)
    assert 3 <= len(calls) <= 4
    assert len(cluster.buckets[TableBucket(tid, 0)].batches) == len(calls)

    cluster2 = FakeCluster()
    cluster2.create_table("fluss", "t", num_buckets=1)
    async with make(cluster2, linger=0.05) as p:
        futs = [await p.send("t", b"x") for _ in range(50)]
        await asyncio.gather(*futs)
    assert len(produce_calls(cluster2)) == 1  # all 50 lingered into one batch


async def test_one_request_per_server_carries_many_buckets() -> None:
    cluster = FakeCluster(num_servers=1)
    tid = cluster.create_table("fluss", "t", num_buckets=4, rf=1)
    async with make(cluster, linger=0.05) as p:
        futs = [await p.send("t", b"v", bucket=b) for b in range(4) for _ in range(3)]
        await asyncio.gather(*futs)
    calls = produce_calls(cluster)
    assert len(calls) == 1
    assert sorted(calls[0][1]) == [(tid, b) for b in range(4)]


async def test_not_leader_with_hint_goes_to_the_new_leader_without_a_metadata_refresh() -> None:
    cluster = FakeCluster()
    tid = cluster.create_table("fluss", "t")
    tb = TableBucket(tid, 0)
    async with make(cluster) as p:
        await (await p.send("t", b"first"))
        cluster.move_leader(tb, 1)
        metadata_calls = sum(1 for _, n, _ in cluster.calls if n == "GetMetadata")
        r = await (await p.send("t", b"second"))
        assert r.offset == 1
        assert sum(1 for _, n, _ in cluster.calls if n == "GetMetadata") == metadata_calls
    calls = produce_calls(cluster)
    assert [a for a, _ in calls[-2:]] == [cluster.servers[0], cluster.servers[1]]


async def test_not_leader_without_hint_refreshes_metadata() -> None:
    cluster = FakeCluster()
    tid = cluster.create_table("fluss", "t")
    tb = TableBucket(tid, 0)
    async with make(cluster) as p:
        await (await p.send("t", b"first"))
        before = sum(1 for _, n, _ in cluster.calls if n == "GetMetadata")
        cluster.fault("ProduceLog", "not_leader", then=lambda: cluster.move_leader(tb, 2))
        r = await (await p.send("t", b"second"))
        assert r.offset == 1
        assert sum(1 for _, n, _ in cluster.calls if n == "GetMetadata") > before
    assert produce_calls(cluster)[-1][0] == cluster.servers[2]


async def test_fenced_and_disconnect_and_timeout_are_retried() -> None:
    cluster = FakeCluster()
    tid = cluster.create_table("fluss", "t")
    async with make(cluster) as p:
        cluster.fault("ProduceLog", "fenced")
        cluster.fault("ProduceLog", "disconnect")
        cluster.fault("ProduceLog", "timeout")
        r = await (await p.send("t", b"v"))
    assert r.offset == 0
    assert values(cluster, TableBucket(tid, 0)) == [b"v"]
    assert len(produce_calls(cluster)) == 4


async def test_lost_answer_retry_is_a_duplicate_with_the_original_offset() -> None:
    cluster = FakeCluster()
    tid = cluster.create_table("fluss", "t")
    tb = TableBucket(tid, 0)
    async with make(cluster) as p:
        await (await p.send("t", b"a"))
        cluster.fault("ProduceLog", "append_then_disconnect")
        r = await (await p.send("t", b"b"))
        r2 = await (await p.send("t", b"c"))
    assert (r.offset, r2.offset) == (1, 2)
    assert values(cluster, tb) == [b"a", b"b", b"c"]  # exactly once


async def test_in_flight_batches_are_retried_in_order_exactly_once_after_a_leader_change() -> None:
    """Five batches in flight; the first is refused (leader moved), so the others get OUT_OF_ORDER_SEQUENCE
    or NOT_LEADER: all are re-sent to the new leader in sequence order, none is duplicated or lost, and
    no error reaches the user."""
    cluster = FakeCluster()
    tid = cluster.create_table("fluss", "t")
    tb = TableBucket(tid, 0)
    cluster.latency = 0.002
    async with make(cluster, batch_size=200, linger=0.0) as p:
        await (await p.send("t", b"warmup"))
        # The first batch after this point is refused; the leader moves while later ones are in flight.
        cluster.fault("ProduceLog", "not_leader", then=lambda: cluster.move_leader(tb, 1))
        futs = [await p.send("t", f"r{i:03d}".encode() + b"." * 60) for i in range(40)]
        results = await asyncio.gather(*futs)
    got = values(cluster, tb)
    expected = [b"warmup"] + [f"r{i:03d}".encode() + b"." * 60 for i in range(40)]
    assert got == expected
    assert [r.offset for r in results] == list(range(1, 41))
    assert ErrorCode.NOT_LEADER_OR_FOLLOWER in cluster.produce_errors


async def test_out_of_order_sequence_while_an_earlier_batch_retries_is_not_an_error() -> None:
    cluster = FakeCluster()
    tid = cluster.create_table("fluss", "t")
    tb = TableBucket(tid, 0)
    cluster.latency = 0.002
    async with make(cluster, batch_size=100, max_in_flight_per_bucket=5) as p:
        await (await p.send("t", b"w"))
        # The first batch fails (not appended) with a retriable error; the 4 behind it hit a gap.
        cluster.fault("ProduceLog", "error", code=ErrorCode.NOT_ENOUGH_REPLICAS)
        futs = [await p.send("t", bytes([65 + i]) * 80) for i in range(10)]
        results = await asyncio.gather(*futs)
    assert values(cluster, tb) == [b"w"] + [bytes([65 + i]) * 80 for i in range(10)]
    assert [r.offset for r in results] == list(range(1, 11))
    assert ErrorCode.OUT_OF_ORDER_SEQUENCE in cluster.produce_errors  # the gap really happened


async def test_lost_writer_state_restarts_sequences_under_a_new_writer_id() -> None:
    cluster = FakeCluster()
    tid = cluster.create_table("fluss", "t")
    tb = TableBucket(tid, 0)
    async with make(cluster, acks=1) as p:
        for v in (b"a", b"b", b"c"):
            await (await p.send("t", v))
        cluster.truncate(tb, 2)  # an acks=1 loss on failover: "c" and its writer state are gone
        r = await (await p.send("t", b"d"))
        assert p.lost_writer_state == 1  # counted (and logged), not shown to the caller: acks=1 allows it
    assert values(cluster, tb) == [b"a", b"b", b"d"]
    assert r.offset == 2
    assert sum(1 for _, n, _ in cluster.calls if n == "AllocateWriterId") == 2


async def test_a_leader_that_lost_acks_all_records_fails_the_next_send() -> None:
    """With acks=all a leader without records it acknowledged is a lost write (an unclean election or a
    replication bug), never the silent reset of acks=1: the next send fails saying so; the one after it is
    written under a new writer id."""
    cluster = FakeCluster()
    tid = cluster.create_table("fluss", "t")
    tb = TableBucket(tid, 0)
    async with make(cluster) as p:  # acks=all is the default
        for v in (b"a", b"b", b"c"):
            await (await p.send("t", v))
        cluster.truncate(tb, 2)  # "c" was acknowledged with acks=all and is gone
        with pytest.raises(OutOfOrderSequenceError, match="acknowledged records may have been lost"):
            await asyncio.wait_for(await p.send("t", b"d"), 10.0)
        assert p.lost_writer_state == 1
        r = await asyncio.wait_for(await p.send("t", b"e"), 10.0)
    assert values(cluster, tb) == [b"a", b"b", b"e"]
    assert r.offset == 2
    assert sum(1 for _, n, _ in cluster.calls if n == "AllocateWriterId") == 2


async def test_a_bucket_waiting_for_a_new_writer_id_still_fails_its_record_at_the_delivery_timeout() -> None:
    """The writer state is lost (power cut) and no new writer id can be had (no coordinator answers): the
    record fails once its delivery timeout passes; the caller is not left waiting for the coordinator."""
    cluster = FakeCluster()
    tid = cluster.create_table("fluss", "t")
    tb = TableBucket(tid, 0)
    async with make(cluster, acks=1, delivery_timeout=0.5, request_timeout=0.2) as p:
        for v in (b"a", b"b", b"c"):
            await (await p.send("t", v))
        cluster.truncate(tb, 2)
        cluster.dead.add(cluster.coordinator_address)
        fut = await p.send("t", b"d")
        with pytest.raises(RequestTimedOutError, match="delivery timeout"):
            await asyncio.wait_for(fut, 10.0)  # (without the bound the test would hang: its only failure mode)
        cluster.dead.discard(cluster.coordinator_address)
        r = await asyncio.wait_for(await p.send("t", b"e"), 10.0)  # the reset completes once it answers
    assert values(cluster, tb) == [b"a", b"b", b"e"]
    assert r.offset == 2


async def test_non_retriable_error_fails_only_that_batch() -> None:
    cluster = FakeCluster()
    tid = cluster.create_table("fluss", "t")
    async with make(cluster) as p:
        cluster.fault("ProduceLog", "error", code=ErrorCode.RECORD_BATCH_TOO_LARGE)
        with pytest.raises(RecordBatchTooLargeError):
            await (await p.send("t", b"big"))
        r = await (await p.send("t", b"ok"))
    assert r.offset == 0
    assert values(cluster, TableBucket(tid, 0)) == [b"ok"]


async def test_delivery_timeout_fails_records_when_no_leader_answers() -> None:
    cluster = FakeCluster()
    cluster.create_table("fluss", "t")
    async with make(cluster, delivery_timeout=0.3, request_timeout=0.2) as p:
        await (await p.send("t", b"a"))
        cluster.kill(0)  # the leader is gone and nobody takes over
        fut = await p.send("t", b"b")
        with pytest.raises(RequestTimedOutError, match="delivery timeout"):
            await fut


async def test_buffer_memory_bounds_unacknowledged_bytes() -> None:
    cluster = FakeCluster()
    cluster.create_table("fluss", "t")
    async with make(
        cluster, buffer_memory=2000, batch_size=1000, max_block=0.2, delivery_timeout=5, request_timeout=1
    ) as p:
        await (await p.send("t", b"a"))
        cluster.kill(0)
        for _ in range(17):  # 1 + 17 records of 116 B fit in 2000 B
            await p.send("t", b"x" * 100)
        with pytest.raises(RequestTimedOutError, match="buffer memory"):
            await p.send("t", b"x" * 100)
        assert p._pool.used <= 2000
        # The leader comes back: the buffer drains and sending resumes.
        cluster.dead.clear()
        r = await (await p.send("t", b"y" * 100))
        assert r.offset == 18


async def test_flush_sends_lingering_batches_and_close_waits_for_them() -> None:
    cluster = FakeCluster()
    tid = cluster.create_table("fluss", "t")
    p = make(cluster, linger=30.0)
    futs = [await p.send("t", b"v") for _ in range(3)]
    await p.flush(timeout=5)
    assert all(f.done() for f in futs)
    fut = await p.send("t", b"w")
    await p.close()
    assert (await fut).offset == 3
    assert len(cluster.buckets[TableBucket(tid, 0)].records()) == 4


async def test_acks_one_without_idempotence_still_retries() -> None:
    cluster = FakeCluster()
    tid = cluster.create_table("fluss", "t")
    async with make(cluster, acks=1, idempotence=False) as p:
        cluster.fault("ProduceLog", "disconnect")
        r = await (await p.send("t", b"v"))
    assert r.offset == 0
    assert not any(n == "AllocateWriterId" for _, n, _ in cluster.calls)
    assert values(cluster, TableBucket(tid, 0)) == [b"v"]


async def test_a_leader_that_stops_answering_is_abandoned_once_the_leader_moves() -> None:
    """The leader hangs (paused process): after the stall check the client refreshes metadata, sees the
    new leader and re-sends there, long before the request timeout; the late answer is ignored."""
    cluster = FakeCluster()
    tid = cluster.create_table("fluss", "t")
    tb = TableBucket(tid, 0)
    async with make(cluster, request_timeout=30.0) as p:
        await (await p.send("t", b"a"))
        cluster.fault("ProduceLog", "hang", then=lambda: cluster.move_leader(tb, 1))
        loop = asyncio.get_running_loop()
        started = loop.time()
        r = await (await p.send("t", b"b"))
        assert loop.time() - started < 5
    assert r.offset == 1
    assert values(cluster, tb) == [b"a", b"b"]


@pytest.mark.parametrize("seed", range(12))
async def test_exactly_once_in_order_under_random_faults(seed: int) -> None:
    """Random disconnects, lost answers (appended, then the connection dies), refusals, timeouts and
    leader moves while 4 buckets are written with up to 5 batches in flight each: every record is
    acknowledged, lands exactly once, in send order per bucket, at the offset its future reported."""
    import random

    rng = random.Random(seed)
    cluster = FakeCluster()
    tid = cluster.create_table("fluss", "t", num_buckets=4)
    cluster.latency = 0.001
    kinds = ["disconnect", "append_then_disconnect", "not_leader", "not_leader_hint", "timeout", "fenced"]

    async def chaos() -> None:
        while True:
            await asyncio.sleep(rng.uniform(0.002, 0.01))
            if len(cluster.faults) >= 3:
                continue
            tb = TableBucket(tid, rng.randrange(4))
            kind = rng.choice([*kinds, "move"])
            if kind == "move":
                cluster.move_leader(tb, rng.randrange(3))
            elif kind in ("not_leader", "not_leader_hint", "fenced", "append_then_disconnect"):
                cluster.fault("ProduceLog", kind, bucket=tb)
            else:
                cluster.fault("ProduceLog", kind)

    chaos_task = asyncio.create_task(chaos())
    sent: dict[int, list[bytes]] = {b: [] for b in range(4)}
    try:
        async with make(cluster, batch_size=300, linger=0.001) as p:
            futs = []
            for i in range(400):
                b = rng.randrange(4)
                value = f"{seed}-{i}".encode()
                sent[b].append(value)
                futs.append((b, value, await p.send("t", value, bucket=b)))
                if i % 50 == 0:
                    await asyncio.sleep(0.005)
            await asyncio.sleep(0.05)
            chaos_task.cancel()  # then let the retries finish
            results = [(b, v, await f) for b, v, f in futs]
    finally:
        chaos_task.cancel()
    for b in range(4):
        log = cluster.buckets[TableBucket(tid, b)].records()
        assert [v for _, _, v in log] == sent[b]  # exactly once, in order
        offsets = {v: o for o, _, v in log}
        for bb, v, meta in results:
            if bb == b and meta.offset >= 0:
                assert offsets[v] == meta.offset
    assert len(cluster.produce_errors) > 0


async def test_a_refused_first_batch_is_not_overtaken_by_later_ones() -> None:
    """A leader accepts any sequence from a writer it has no state for, so the first batch under a writer
    id goes alone: a later batch must not be appended ahead of a refused first one."""
    cluster = FakeCluster()
    tid = cluster.create_table("fluss", "t")
    tb = TableBucket(tid, 0)
    cluster.latency = 0.002
    cluster.fault("ProduceLog", "error", code=ErrorCode.NOT_ENOUGH_REPLICAS)
    async with make(cluster, batch_size=100) as p:
        futs = [await p.send("t", bytes([65 + i]) * 80) for i in range(8)]
        results = await asyncio.gather(*futs)
    assert values(cluster, tb) == [bytes([65 + i]) * 80 for i in range(8)]
    assert [r.offset for r in results] == list(range(8))


async def test_send_to_an_unknown_table_fails_fast_with_table_not_exist() -> None:
    cluster = FakeCluster()
    async with make(cluster, max_block=30) as p:
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(TableNotExistError):
            await p.send("db.nope", b"v")
        assert loop.time() - started < 1


async def test_leader_death_is_a_pause_not_an_error() -> None:
    """Leader kill in miniature: one record at a time, each awaited; the leader dies and a new one is elected
    only after a 'session timeout'. No send fails; every record is in the log once, in order."""
    cluster = FakeCluster()
    tid = cluster.create_table("fluss", "t")
    tb = TableBucket(tid, 0)
    loop = asyncio.get_running_loop()

    async def kill_then_elect() -> None:
        await asyncio.sleep(0.05)
        cluster.kill(0)
        await asyncio.sleep(0.4)  # the coordinator notices only after the session timeout
        cluster.move_leader(tb, 1)

    failover = asyncio.create_task(kill_then_elect())
    async with make(cluster) as p:
        offsets, longest = [], 0.0
        for i in range(60):
            started = loop.time()
            offsets.append((await (await p.send("t", f"r{i}".encode()))).offset)
            longest = max(longest, loop.time() - started)
            await asyncio.sleep(0.01)
    await failover
    assert offsets == list(range(60))
    assert values(cluster, tb) == [f"r{i}".encode() for i in range(60)]
    assert 0.3 < longest < 2.0  # the pause is the election delay plus at most one backoff


async def test_a_recreated_table_is_written_under_its_new_id_after_a_metadata_refresh() -> None:
    """``send`` caches table lookups per metadata version: a refresh that recreated a table must not
    leave records going to the old table id."""
    cluster = FakeCluster()
    old = cluster.create_table("fluss", "t", num_buckets=2)
    async with make(cluster) as p:
        first = await p.send_and_wait("t", b"a")
        cluster.tables.pop(("fluss", "t"))
        new = cluster.create_table("fluss", "t", num_buckets=3)
        await p.metadata.request_update()
        second = await p.send_and_wait("t", b"b")
    assert first.bucket.table_id == old and second.bucket.table_id == new
    assert [v for tb in cluster.buckets if tb.table_id == new for v in values(cluster, tb)] == [b"b"]


async def test_a_caller_that_never_blocks_lets_full_batches_go_while_it_appends() -> None:
    """``send`` yields to the event loop after a batch filled up, so requests overlap with the appends of
    a caller that never waits (it would otherwise hold the loop until the buffer memory ran out)."""
    cluster = FakeCluster()
    cluster.create_table("fluss", "t", num_buckets=1)
    async with make(cluster, batch_size=1024) as p:
        await p.send_and_wait("t", b"warm-up")
        sent_before = len(produce_calls(cluster))
        futs = [await p.send("t", b"x" * 100) for _ in range(100)]  # ~9 records per batch
        sent_while_appending = len(produce_calls(cluster)) - sent_before
        await p.flush()
    assert sent_while_appending >= 5
    assert [f.result().offset for f in futs] == list(range(1, 101))


DAY_SPEC = {"table.auto-partition.time-unit": "day", "table.partition.key": "dt"}
DEC_1 = 1_796_083_200_000  # 2026-12-01T00:00:00Z in ms


async def test_a_partitioned_table_routes_each_record_to_the_partition_of_its_timestamp() -> None:
    """docs/partitioning.md: the producer names the logical table; the record's timestamp picks the slot,
    computed by the coordinator's rule; a slot with no partition fails PARTITION_NOT_EXIST (not retried)."""
    cluster = FakeCluster()
    cluster.create_table("fluss", "events", num_buckets=2, properties=DAY_SPEC)
    dec1 = cluster.create_table("fluss", "events$20261201", num_buckets=2, properties=DAY_SPEC)
    dec2 = cluster.create_table("fluss", "events$20261202", num_buckets=2, properties=DAY_SPEC)
    async with make(cluster, max_block=30) as p:
        a = await p.send_and_wait("events", b"last-ms-of-dec-1", key=b"k", timestamp_ms=DEC_1 + 86_399_999)
        b = await p.send_and_wait("fluss.events", b"dec-2", key=b"k", timestamp_ms=DEC_1 + 86_400_000)
        c = await p.send_and_wait("events$20261201", b"named", key=b"k", timestamp_ms=DEC_1 + 86_400_000)
        loop = asyncio.get_running_loop()
        started = loop.time()
        for missing, name in ((DEC_1 - 1, "events$20261130"), (DEC_1 + 2 * 86_400_000, "events$20261203")):
            with pytest.raises(PartitionNotExistError) as e:  # expired / not created yet
                await p.send("events", b"lost", timestamp_ms=missing)
            assert not e.value.retriable
            assert name in str(e.value)
        assert loop.time() - started < 5  # answered by the coordinator, not after max_block
    assert a.bucket.table_id == dec1 and c.bucket.table_id == dec1 and b.bucket.table_id == dec2
    assert values(cluster, a.bucket) == [b"last-ms-of-dec-1", b"named"]
    assert values(cluster, b.bucket) == [b"dec-2"]


async def test_a_record_without_a_timestamp_goes_to_the_current_slot() -> None:
    import time as _time

    from fluss_py.partitioning import partition_for, routing_unit

    cluster = FakeCluster()
    cluster.create_table("fluss", "events", properties=DAY_SPEC)
    unit = routing_unit("events", DAY_SPEC)
    assert unit is not None
    now_ms = int(_time.time() * 1000)
    today = partition_for("events", now_ms, unit)
    tid = cluster.create_table("fluss", today, properties=DAY_SPEC)
    cluster.create_table("fluss", partition_for("events", now_ms + 86_400_000, unit), properties=DAY_SPEC)
    async with make(cluster) as p:
        r = await p.send_and_wait("events", b"now")
    assert r.bucket.table_id == tid or partition_for("events", int(_time.time() * 1000), unit) != today


async def test_records_of_other_attributes_never_share_a_batch() -> None:
    acc = RecordAccumulator(1 << 20, 1.0, CompressionType.NONE, 60.0)
    tb = TableBucket(1, 0)
    _, plain = acc.append(tb, b"k", b"v", None, 20)
    _, kv1 = acc.append(tb, b"k", b"\x01", None, 20, KV_BATCH)
    _, kv2 = acc.append(tb, b"k2", b"\x01", None, 20, KV_BATCH)
    _, plain2 = acc.append(tb, b"k", b"v", None, 20)
    assert kv1 is kv2 and len({id(plain), id(kv1), id(plain2)}) == 3
    built = [acc.pop_head(tb).payload for _ in range(3)]
    assert [next(iter_batches(bytes(p))).attributes for p in built] == [0, KV_BATCH, 0]  # type: ignore[arg-type]
    assert [next(iter_batches(bytes(p))).record_count for p in built] == [1, 2, 1]  # type: ignore[arg-type]
