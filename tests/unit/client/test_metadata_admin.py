"""ClusterMetadata (bootstrap, refresh, hints, epoch monotonicity), Admin, and the gRPC error mapping."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from fluss_py.client.admin import Admin, OffsetSpec
from fluss_py.client.metadata import ClusterMetadata, parse_bootstrap
from fluss_py.client.options import RetryOptions
from fluss_py.client.transport import PRODUCE_LOG
from fluss_py.errors import ErrorCode, RequestTimedOutError, TableAlreadyExistError, TableNotExistError
from fluss_py.rpc.convert import map_grpc_error
from fluss_py.types import TableBucket, TablePath
from tests.unit.client.fake_cluster import FakeCluster

pytestmark = pytest.mark.timeout(30)

FAST = RetryOptions(backoff=0.005, backoff_max=0.05)


def test_bootstrap_parsing() -> None:
    assert parse_bootstrap("a:1, b:2") == ["a:1", "b:2"]
    with pytest.raises(ValueError):
        parse_bootstrap("nohost")
    with pytest.raises(ValueError):
        parse_bootstrap("")


def test_grpc_errors_map_to_api_errors() -> None:
    assert map_grpc_error("a:1", PRODUCE_LOG.name, grpc.StatusCode.UNAVAILABLE, "x").code == ErrorCode.NETWORK_EXCEPTION
    timeout = map_grpc_error("a:1", PRODUCE_LOG.name, grpc.StatusCode.DEADLINE_EXCEEDED, "")
    assert timeout.code == ErrorCode.REQUEST_TIMED_OUT and timeout.retriable
    assert map_grpc_error("a:1", PRODUCE_LOG.name, grpc.StatusCode.UNIMPLEMENTED, "").code == ErrorCode.INVALID_REQUEST


# What grpcio 1.6x reports (details of UNAVAILABLE) for a TLS refusal and for handshakes the network cut short.
_ADDR = "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:20209: "
REFUSED = [
    _ADDR + "Tls handshake failed (TSI_PROTOCOL_FAILURE): SSL_ERROR_SSL: error:1a000064:ECDSA routines:"
    "OPENSSL_internal:BAD_SIGNATURE: certificate signature failure",
    _ADDR + "Tls handshake failed (TSI_PROTOCOL_FAILURE): SSL_ERROR_SSL: error:1000007d:SSL routines:"
    "OPENSSL_internal:CERTIFICATE_VERIFY_FAILED",
]
CUT_SHORT = [
    _ADDR + "handshaker shutdown",  # seen when a coordinator's handshake was abandoned at load 18
    _ADDR + "Handshake read failed",
    _ADDR + "Tls handshake failed (TSI_PROTOCOL_FAILURE): SSL_ERROR_SYSCALL: Connection reset by peer",
    _ADDR + "Socket closed",
]


@pytest.mark.parametrize("details", REFUSED)
def test_a_tls_refusal_is_an_authentication_failure(details: str) -> None:
    error = map_grpc_error("a:1", PRODUCE_LOG.name, grpc.StatusCode.UNAVAILABLE, details)
    assert error.code == ErrorCode.AUTHENTICATION_FAILED and not error.retriable


@pytest.mark.parametrize("details", CUT_SHORT)
def test_a_handshake_cut_short_by_the_network_is_retriable(details: str) -> None:
    error = map_grpc_error("a:1", PRODUCE_LOG.name, grpc.StatusCode.UNAVAILABLE, details)
    assert error.code == ErrorCode.NETWORK_EXCEPTION and error.retriable


async def test_any_live_bootstrap_server_answers_including_a_coordinator() -> None:
    cluster = FakeCluster()
    cluster.create_table("fluss", "t", num_buckets=2)
    cluster.kill(0)
    # A dead tablet server first, then the coordinator (answers only the coordinator service).
    md = ClusterMetadata(f"{cluster.servers[0]},{cluster.coordinator_address}", cluster, retry=FAST)
    await md.update(timeout=5)
    info = md.table(TablePath("fluss", "t"))
    assert info is not None and info.num_buckets == 2
    assert md.leader_for(TableBucket(info.table_id, 1)).id == 1
    assert md.coordinator is not None and md.coordinator.address == cluster.coordinator_address
    await md.close()


async def test_refresh_keeps_retrying_until_a_server_answers() -> None:
    cluster = FakeCluster()
    cluster.create_table("fluss", "t")
    cluster.fault("GetMetadata", "disconnect", times=3)
    md = ClusterMetadata(cluster.servers[0], cluster, retry=FAST)
    await md.update(timeout=5)
    assert md.table(TablePath("fluss", "t")) is not None
    await md.close()


async def test_leader_hints_apply_at_once_and_only_older_answers_cannot_undo_them() -> None:
    cluster = FakeCluster()
    tid = cluster.create_table("fluss", "t")
    tb = TableBucket(tid, 0)
    md = ClusterMetadata(cluster.servers[0], cluster, retry=FAST)
    await md.update()
    stale = cluster._metadata()  # leader 0, epoch 0
    assert md.apply_leader_hint(tb, 2, cluster.servers[2])
    assert md.leader_for(tb).id == 2 and md.leader_epoch(tb) == 1 and md.bucket(tb).hinted
    md.apply(stale)  # an answer as new as the last one outranks the guess (docs/client.md)
    assert md.leader_for(tb).id == 0 and md.leader_epoch(tb) == 0 and not md.bucket(tb).hinted
    cluster.move_leader(tb, 1)
    cluster.move_leader(tb, 1)
    await md.update()  # epoch 2
    assert md.leader_for(tb).id == 1 and md.leader_epoch(tb) == 2
    md.apply(stale)  # an older answer changes nothing
    assert md.leader_for(tb).id == 1 and md.leader_epoch(tb) == 2
    assert md.apply_leader_hint(tb, 2, cluster.servers[2])
    md.apply(stale)  # not even a guess
    assert md.leader_for(tb).id == 2 and md.leader_epoch(tb) == 3
    await md.close()


async def test_leader_hints_ping_ponging_between_stale_servers_do_not_inflate_the_epoch() -> None:
    # The old leader already names the new one, the new one still names the old one: each answer hints.
    cluster = FakeCluster()
    tid = cluster.create_table("fluss", "t")
    tb = TableBucket(tid, 0)
    md = ClusterMetadata(cluster.servers[0], cluster, retry=FAST)
    await md.update()  # leader 0, epoch 0
    for _ in range(10):
        assert md.apply_leader_hint(tb, 1, cluster.servers[1])
        # naming the answered leader drops the guess, and is no reason to retry at once
        assert not md.apply_leader_hint(tb, 0, cluster.servers[0])
        assert md.leader_epoch(tb) == 0 and not md.bucket(tb).hinted
    assert md.apply_leader_hint(tb, 1, cluster.servers[1])
    assert md.leader_for(tb).id == 1 and md.leader_epoch(tb) == 1  # the last answer's epoch + 1, not + 10
    cluster.move_leader(tb, 1)
    await md.update()  # the real change (epoch 1) replaces the hint
    assert md.leader_for(tb).id == 1 and md.leader_epoch(tb) == 1 and not md.bucket(tb).hinted
    assert md.apply_leader_hint(tb, 2, cluster.servers[2])
    assert md.leader_epoch(tb) == 2  # hints count from the newest answer
    await md.close()


async def test_wait_for_unknown_table_raises_table_not_exist_once_the_coordinator_says_so() -> None:
    cluster = FakeCluster()
    md = ClusterMetadata(cluster.servers[0], cluster, retry=FAST)
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(TableNotExistError):
        await md.wait_for_table(TablePath("fluss", "nope"), timeout=20)
    assert loop.time() - started < 1
    cluster.kill(0)  # nobody answers: the wait ends at its timeout
    md2 = ClusterMetadata(cluster.servers[0], cluster, retry=FAST)
    with pytest.raises(RequestTimedOutError):
        await md2.wait_for_table(TablePath("fluss", "nope"), timeout=0.3)
    await md.close()
    await md2.close()


async def test_admin_ddl_and_describe() -> None:
    cluster = FakeCluster()
    async with Admin(cluster.servers[1], transport=cluster, retry=FAST) as admin:
        await admin.create_database("db")
        assert "db" in await admin.list_databases()
        tid = await admin.create_table("db.t", num_buckets=3, replication_factor=2)
        with pytest.raises(TableAlreadyExistError):
            await admin.create_table("db.t", num_buckets=3)
        assert await admin.create_table("db.t", ignore_if_exists=True) == tid
        assert await admin.list_tables("db") == ["t"]
        cluster._append(cluster.buckets[TableBucket(tid, 1)], bytearray(_batch()))
        desc = await admin.describe_table("db.t")
        assert desc.info.num_buckets == 3 and desc.info.replication_factor == 2
        assert [b.location.leader for b in desc.buckets] == [0, 1, 2]
        assert all(len(b.location.replicas) == 2 and b.location.isr == b.location.replicas for b in desc.buckets)
        assert [b.high_watermark for b in desc.buckets] == [0, 1, 0]
        offsets = await admin.list_offsets("db.t", spec=OffsetSpec.HIGH_WATERMARK)
        assert {b: o.offset for b, o in offsets.items()} == {0: 0, 1: 1, 2: 0}
        await admin.drop_table("db.t")
        with pytest.raises(TableNotExistError):
            await admin.describe_table("db.t")


async def test_placements_of_several_tables_in_one_request() -> None:
    cluster = FakeCluster()
    async with Admin(cluster.servers[1], transport=cluster, retry=FAST) as admin:
        await admin.create_database("db")
        t1 = await admin.create_table("db.a", num_buckets=2, replication_factor=2)
        t2 = await admin.create_table("db.b", num_buckets=3, replication_factor=2)
        before = len(cluster.calls)
        placements = await admin.get_table_placements(["db.a", TablePath("db", "b")])
        assert len(cluster.calls) == before + 1  # one GetMetadata for both
        assert {str(p): [loc.table_bucket for loc in bs] for p, (_, bs) in placements.items()} == {
            "db.a": [TableBucket(t1, 0), TableBucket(t1, 1)],
            "db.b": [TableBucket(t2, b) for b in range(3)],
        }
        with pytest.raises(TableNotExistError, match=r"db\.c"):
            await admin.get_table_placements(["db.a", "db.c"])


async def test_admin_follows_the_coordinator_through_failures() -> None:
    cluster = FakeCluster()
    cluster.fault("AllocateWriterId", "disconnect", times=2)
    async with Admin(cluster.servers[0], transport=cluster, retry=FAST) as admin:
        from fluss_py.client.producer.idempotence import WriterIdSource

        allocator = WriterIdSource(admin._gateway, timeout=5)
        assert await allocator.allocate() == 101


def _batch() -> bytes:
    from fluss_py.record import RecordBatchBuilder

    builder = RecordBatchBuilder()
    builder.append(b"x")
    return builder.build()
