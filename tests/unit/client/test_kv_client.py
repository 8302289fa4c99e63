"""The KV client against the fake cluster's primary-key tables: Upserter/Deleter on the producer's pipeline,
batched lookups with their retries, prefix lookups, bucket scans, sync wrappers."""

from __future__ import annotations

import asyncio
from decimal import Decimal

import pytest

from fluss_py.client import ProducerOptions, SyncLookuper, SyncUpserter
from fluss_py.client.kv import Deleter, Lookuper, Upserter
from fluss_py.client.options import LookupOptions
from fluss_py.errors import (
    ErrorCode,
    InvalidRowError,
    PartitionedTableError,
    RequestTimedOutError,
    TableTypeMismatchError,
)
from fluss_py.record import iter_batches
from fluss_py.record.batch import CHANGELOG, KV_BATCH
from fluss_py.schema.changelog import ChangeType, decode_change
from fluss_py.schema.schema import parse_schema
from fluss_py.types import TableBucket
from tests.unit.client.fake_kv import FakeKvCluster
from tests.unit.client.helpers import FAST

pytestmark = pytest.mark.timeout(30)

USERS = parse_schema("id BIGINT, name STRING, score DECIMAL(10,2), nick STRING", primary_key="id")
ORDERS = parse_schema("user_id INT, order_id BIGINT, item STRING", primary_key="user_id,order_id", bucket_key="user_id")


def upserter(cluster: FakeKvCluster, table: str = "users", **kw) -> Upserter:
    return Upserter(cluster.servers[0], table, ProducerOptions(linger=0.0, retry=FAST), transport=cluster, **kw)


def lookuper(cluster: FakeKvCluster, **kw) -> Lookuper:
    kw.setdefault("retry", FAST)
    return Lookuper(cluster.servers[0], LookupOptions(**kw), transport=cluster)


def calls(cluster: FakeKvCluster, name: str) -> list:
    return [req for _, n, req in cluster.calls if n == name]


async def test_upserts_and_deletes_travel_as_kv_batches_and_become_the_changelog() -> None:
    cluster = FakeKvCluster()
    tid = cluster.create_kv_table("users", USERS, num_buckets=1)
    async with upserter(cluster) as up:
        first = await up.upsert_and_wait({"id": 1, "name": "ada", "score": Decimal("9.50")})
        second = await up.upsert_and_wait([1, "ada l.", Decimal("9.75"), None])
        await up.delete_and_wait(1)
    tb = TableBucket(tid, 0)
    assert (first.bucket, first.offset, second.offset) == (tb, 0, 1)
    sent = [bytes(pb.records) for req in calls(cluster, "ProduceLog") for pb in req.buckets]
    assert sent and all(next(iter_batches(s)).attributes & KV_BATCH for s in sent)
    changes = [
        (batch.attributes & CHANGELOG, decode_change(r.value).type)
        for data in cluster.buckets[tb].batches
        for batch in iter_batches(data)
        for r in batch.records()
    ]
    assert changes == [(CHANGELOG, ChangeType.INSERT), (CHANGELOG, ChangeType.UPDATE), (CHANGELOG, ChangeType.DELETE)]
    assert cluster.rows(tb) == {}


async def test_a_bad_row_raises_at_once_and_sends_nothing() -> None:
    cluster = FakeKvCluster()
    cluster.create_kv_table("users", USERS)
    async with upserter(cluster) as up:
        bad = [
            {"id": None, "name": "x"},  # a null key
            {"id": 1, "colour": "red"},  # an unknown column
            {"id": "one"},  # the wrong type
            [1, "too few"],  # not every column
            {"id": 1, "score": Decimal("123456789.123")},  # more digits than DECIMAL(10,2)
        ]
        for row in bad:
            with pytest.raises(InvalidRowError):
                await up.upsert(row)
        for key in ({"name": "ada"}, [1, 2], None):
            with pytest.raises(InvalidRowError):
                await up.delete(key)
        await up.flush()
    assert calls(cluster, "ProduceLog") == []


async def test_partial_updates_change_only_their_columns() -> None:
    cluster = FakeKvCluster()
    cluster.create_kv_table("users", USERS)
    async with upserter(cluster) as up, lookuper(cluster) as lk:
        await up.upsert_and_wait({"id": 7, "name": "grace", "score": Decimal("1.00"), "nick": "g"})
        async with upserter(cluster, partial=("id", "score"), producer=up.producer) as partial:
            await partial.upsert_and_wait({"id": 7, "score": Decimal("2.25")})
            with pytest.raises(InvalidRowError, match="not a target"):
                await partial.upsert({"id": 7, "name": "no"})
        assert await lk.lookup("users", 7) == {"id": 7, "name": "grace", "score": Decimal("2.25"), "nick": "g"}
        with pytest.raises(InvalidRowError, match="primary key"):
            await upserter(cluster, partial=("score",), producer=up.producer).upsert({"score": Decimal(1)})


async def test_lookups_of_many_keys_go_as_one_request_per_leader_server() -> None:
    cluster = FakeKvCluster(num_servers=3)
    cluster.create_kv_table("users", USERS, num_buckets=6)
    async with upserter(cluster) as up, lookuper(cluster) as lk:
        futures = [await up.upsert({"id": i, "name": f"u{i}"}) for i in range(60)]
        await asyncio.gather(*futures)
        rows = await lk.lookup_many("users", [*range(60), 1000, 1001])
        assert rows[:60] == [{"id": i, "name": f"u{i}", "score": None, "nick": None} for i in range(60)]
        assert rows[60:] == [None, None]
        lookups = calls(cluster, "Lookup")
        assert len(lookups) == 3  # six buckets led by three servers: one request each
        assert sum(len(b.keys) for req in lookups for b in req.buckets) == 62
        # lookups asked one by one in the same turn are coalesced too
        cluster.calls.clear()
        many = await asyncio.gather(*(lk.lookup("users", i) for i in range(30)))
        assert [r["id"] for r in many] == list(range(30))  # type: ignore[index]
        assert len(calls(cluster, "Lookup")) == 3


async def test_a_lookup_follows_the_leader_and_waits_out_kv_not_ready() -> None:
    cluster = FakeKvCluster()
    tid = cluster.create_kv_table("users", USERS)
    tb = TableBucket(tid, 0)
    async with upserter(cluster) as up, lookuper(cluster) as lk:
        await up.upsert_and_wait({"id": 1, "name": "ada"})
        await lk.lookup("users", 1)  # metadata known
        cluster.move_leader(tb, 1)  # the client still believes in server 0, which names the new leader
        cluster.fault("Lookup", "error", code=ErrorCode.KV_NOT_READY, address=cluster.servers[1], times=2)
        assert (await lk.lookup("users", 1)) == {"id": 1, "name": "ada", "score": None, "nick": None}
        servers = [addr for addr, n, _ in cluster.calls if n == "Lookup"]
        assert servers[-4:] == [cluster.servers[0], cluster.servers[1], cluster.servers[1], cluster.servers[1]]


async def test_a_lookup_fails_at_once_on_a_fatal_error_and_times_out_on_a_retriable_one() -> None:
    cluster = FakeKvCluster()
    cluster.create_kv_table("users", USERS)
    async with lookuper(cluster, request_timeout=0.3) as lk:
        cluster.fault("Lookup", "error", code=ErrorCode.INVALID_ROW)
        with pytest.raises(InvalidRowError):
            await lk.lookup("users", 1)
        cluster.fault("Lookup", "error", code=ErrorCode.KV_NOT_READY, times=1000)
        with pytest.raises(RequestTimedOutError, match="KV"):
            await lk.lookup("users", 1)


async def test_prefix_lookups_and_paged_scans_read_in_key_order() -> None:
    cluster = FakeKvCluster()
    cluster.create_kv_table("orders", ORDERS, num_buckets=4)
    async with upserter(cluster, "orders") as up, lookuper(cluster) as lk:
        futures = [await up.upsert([u, o, f"item-{u}-{o}"]) for u in range(5) for o in range(7)]
        await asyncio.gather(*futures)
        rows = await lk.prefix_lookup("orders", {"user_id": 3})
        assert [r["order_id"] for r in rows] == list(range(7)) and not rows.truncated
        assert [r["item"] for r in await lk.prefix_lookup("orders", 4, max_rows=2)] == ["item-4-0", "item-4-1"]
        scanned = [row for b in range(4) for row in await lk.scan_bucket("orders", b, page_rows=3)]
        assert sorted((r["user_id"], r["order_id"]) for r in scanned) == [(u, o) for u in range(5) for o in range(7)]
        assert len(calls(cluster, "ScanKv")) >= 35 // 3
        with pytest.raises(InvalidRowError):
            await lk.prefix_lookup("orders", {"order_id": 1})


async def test_a_scan_resumes_after_its_last_key_at_a_new_leader() -> None:
    cluster = FakeKvCluster()
    tid = cluster.create_kv_table("users", USERS)
    async with upserter(cluster) as up, lookuper(cluster) as lk:
        await asyncio.gather(*[await up.upsert({"id": i}) for i in range(10)])
        scan = lk.scan("users", 0, page_rows=4)
        first = await scan.next_page()
        cluster.move_leader(TableBucket(tid, 0), 2)
        rest = [row async for row in scan]
    assert [r["id"] for r in first + rest] == list(range(10))  # type: ignore[operator]


async def test_log_tables_and_partitioned_tables_are_refused() -> None:
    cluster = FakeKvCluster()
    cluster.create_table("fluss", "events")
    cluster.create_table(
        "fluss", "daily", properties={"table.auto-partition.time-unit": "day", "table.partition.key": "dt"}
    )
    async with upserter(cluster, "events") as up, lookuper(cluster) as lk:
        with pytest.raises(TableTypeMismatchError):
            await up.upsert({"id": 1})
        with pytest.raises(TableTypeMismatchError):
            await lk.lookup("events", 1)
        with pytest.raises(PartitionedTableError):
            await lk.lookup("daily", 1)


async def test_a_deleter_deletes_by_key_forms() -> None:
    cluster = FakeKvCluster()
    tid = cluster.create_kv_table("orders", ORDERS)
    async with upserter(cluster, "orders") as up:
        await asyncio.gather(*[await up.upsert([1, o, "x"]) for o in range(3)])
        async with Deleter(None, "orders", producer=up.producer) as deleter:
            await deleter.delete_and_wait([1, 0])
            await deleter.delete_and_wait({"user_id": 1, "order_id": 2})
    assert len(cluster.rows(TableBucket(tid, 0))) == 1


def test_sync_wrappers_upsert_and_look_up() -> None:
    cluster = FakeKvCluster()
    cluster.create_kv_table("users", USERS, num_buckets=2)
    with SyncUpserter(cluster.servers[0], "users", ProducerOptions(retry=FAST), transport=cluster) as up:
        futures = [up.upsert({"id": i, "name": str(i)}) for i in range(20)]
        assert len({(f.result(5).bucket, f.result(5).offset) for f in futures}) == 20
        up.delete(3).result(5)
    with SyncLookuper(cluster.servers[0], LookupOptions(retry=FAST), transport=cluster) as lk:
        assert lk.lookup("users", 2)["name"] == "2"
        assert lk.lookup("users", 3) is None
        assert sorted(r["id"] for b in range(2) for r in lk.scan("users", b, page_rows=3)) == [
            i for i in range(20) if i != 3
        ]


async def test_keys_asked_while_a_request_is_on_the_wire_travel_together_in_the_next() -> None:
    cluster = FakeKvCluster(num_servers=1)
    cluster.create_kv_table("users", USERS)
    async with upserter(cluster) as up, lookuper(cluster, max_in_flight_per_server=1) as lk:
        await asyncio.gather(*[await up.upsert({"id": i}) for i in range(10)])
        await lk.lookup("users", 0)
        cluster.calls.clear()
        cluster.latency = 0.05
        first = asyncio.create_task(lk.lookup("users", 1))
        await asyncio.sleep(0.01)  # the first request is on the wire
        later = []
        for i in range(2, 10):
            later.append(asyncio.create_task(lk.lookup("users", i)))
            await asyncio.sleep(0)  # each asked in a turn of its own
        rows = await asyncio.gather(first, *later)
    assert [r["id"] for r in rows] == list(range(1, 10))  # type: ignore[index]
    assert [sum(len(b.keys) for b in req.buckets) for req in calls(cluster, "Lookup")] == [1, 8]


async def test_a_lookup_stuck_at_a_paused_leader_goes_to_the_new_one() -> None:
    """The leader stops answering (SIGSTOP) and the bucket moves: after the stall check's metadata refresh the key
    is sent to the new leader and answered there, long before its deadline (it waited out the deadline before)."""
    cluster = FakeKvCluster()
    tid = cluster.create_kv_table("users", USERS)
    async with upserter(cluster) as up, lookuper(cluster, request_timeout=20.0) as lk:
        await up.upsert_and_wait({"id": 1, "name": "ada"})
        await lk.lookup("users", 1)
        cluster.paused.add(cluster.servers[0])
        started = asyncio.get_running_loop().time()
        task = asyncio.create_task(lk.lookup("users", 1))
        await asyncio.sleep(0.2)
        cluster.move_leader(TableBucket(tid, 0), 1)
        row = await asyncio.wait_for(task, 5.0)
        elapsed = asyncio.get_running_loop().time() - started
    assert row is not None and row["name"] == "ada"
    assert elapsed < 3.0
    assert [a for a, n, _ in cluster.calls if n == "Lookup"][-2:] == [cluster.servers[0], cluster.servers[1]]
