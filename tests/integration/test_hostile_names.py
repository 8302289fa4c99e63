"""Names and values a client makes up, against a real ZooKeeper and real coordinator processes.

- Group names are znode names: kazoo drops empty path components, so FetchOffsets of "secret/" read group
  "secret" (whose DESCRIBE the authorizer had not checked), ".." was kazoo's ValueError (UNKNOWN on the
  wire), and names ZooKeeper refuses in a path (an emoji: a surrogate pair in Java; U+FFF0-U+FFFF) got
  BadArguments from ZooKeeper. Each is INVALID_REQUEST before any ZooKeeper call.
- A database name with a trailing newline passed a ``re.match(...$)`` check; ZooKeeper refused the path, and
  the failed fenced commit read as a lost leadership: the coordinator leader resigned on one request.
- A table property value of 2 MB (" " * 2_000_000 + "60s" is a valid 60 s) went into the table znode, over
  ZooKeeper's 1 MiB limit: ZooKeeper dropped the leader's connection. Now INVALID_CONFIG.
"""

from __future__ import annotations

import grpc
import pytest

from fluss_py.coordinator.context import CoordinatorContext
from fluss_py.coordinator.events import CommitOffsets, ConsumerHeartbeat, CreateDatabase, FetchOffsets
from fluss_py.coordinator.groups import GroupOffsets
from fluss_py.coordinator.handlers import MetadataHandlers
from fluss_py.errors import ErrorCode, InvalidDatabaseNameError, InvalidRequestError
from fluss_py.rpc.pb import common_pb2, coordinator_pb2, coordinator_pb2_grpc
from fluss_py.testing.cluster import LocalCluster
from fluss_py.testing.fixtures import SESSION_TIMEOUT_S
from fluss_py.types import TableBucket
from fluss_py.zk.client import ZkClient
from fluss_py.zk.paths import CoordinatorEpochZNode, DatabaseZNode
from fluss_py.zk.values import EpochFence

pytestmark = pytest.mark.integration

TABLES = {1: 4}  # table id -> buckets


async def _client(zookeeper, root: str) -> tuple[ZkClient, EpochFence]:
    zk = ZkClient(zookeeper.address, root, session_timeout=SESSION_TIMEOUT_S, connection_timeout=10)
    await zk.start()
    await zk.ensure_path(CoordinatorEpochZNode.path(root))
    await zk.ensure_path(DatabaseZNode.parent(root))
    return zk, EpochFence(1, (await zk.get(CoordinatorEpochZNode.path(root)))[1].version)


def _groups(zk: ZkClient, fence: EpochFence) -> GroupOffsets:
    async def num_buckets(table_id: int) -> int | None:
        return TABLES.get(table_id)

    return GroupOffsets(zk, lambda: fence, num_buckets)


async def test_group_names_that_are_no_znode_name_are_refused_before_zookeeper(zookeeper, zk_root):
    zk, fence = await _client(zookeeper, zk_root)
    groups = _groups(zk, fence)
    try:
        await groups.commit(CommitOffsets("secret", {TableBucket(1, 0): 42}))
        for name in ("secret/", "/secret", "secret//", "..", ".", "g\U0001f600", "g\ufffd"):
            with pytest.raises(InvalidRequestError):
                await groups.fetch(FetchOffsets(name))
            with pytest.raises(InvalidRequestError):
                await groups.commit(CommitOffsets(name, {TableBucket(1, 0): 1}))
            with pytest.raises(InvalidRequestError):
                hb = ConsumerHeartbeat(name, "", 0, "", 10_000, frozenset({1}), frozenset(), "ipv4:127.0.0.1:1")
                await groups.members.heartbeat(hb)
        assert await groups.fetch(FetchOffsets("secret")) == [(TableBucket(1, 0), 42)]
        # what ZooKeeper can store is a group: letters of any script, dots, blanks
        for name in ("Grüße", "名前", "g.v1", "a b"):
            await groups.commit(CommitOffsets(name, {TableBucket(1, 1): 7}))
            assert await groups.fetch(FetchOffsets(name)) == [(TableBucket(1, 1), 7)]
    finally:
        await zk.close()


async def test_a_database_name_with_a_trailing_newline_is_invalid(zookeeper, zk_root):
    zk, fence = await _client(zookeeper, zk_root)
    try:
        handlers = MetadataHandlers(zk, CoordinatorContext(1, fence, "127.0.0.1", 1))
        for name in ("db\n", "db\r\n"):
            with pytest.raises(InvalidDatabaseNameError):
                await handlers.create_database(CreateDatabase(name, False))
        assert await zk.get_children(DatabaseZNode.parent(zk_root)) == []
    finally:
        await zk.close()


def _create_table(stub, table: str, **descriptor) -> coordinator_pb2.CreateTableResponse:
    return stub.CreateTable(
        coordinator_pb2.CreateTableRequest(
            path=common_pb2.TablePath(database="fluss", table=table),
            descriptor=common_pb2.TableDescriptor(num_buckets=1, replication_factor=1, **descriptor),
        ),
        timeout=30,
    )


def test_bad_names_and_values_are_answered_and_the_leader_stays(cluster_factory):
    cluster: LocalCluster = cluster_factory(coordinators=2, tablet_servers=1)
    leader = cluster.wait_for_leader(20)
    epoch = cluster.health(leader)["coordinator_epoch"]
    with grpc.insecure_channel(cluster.get(leader).rpc_address) as channel:
        stub = coordinator_pb2_grpc.CoordinatorServiceStub(channel)
        created = stub.CreateDatabase(coordinator_pb2.CreateDatabaseRequest(name="fluss", ignore_if_exists=True))
        assert created.error.code == 0, created.error
        answer = stub.CreateDatabase(coordinator_pb2.CreateDatabaseRequest(name="db\n"), timeout=10)
        assert answer.error.code == ErrorCode.INVALID_DATABASE_NAME, answer.error
        answer = _create_table(stub, "t$2026120105\n")
        assert answer.error.code == ErrorCode.INVALID_TABLE_NAME, answer.error
        answer = _create_table(stub, "big", properties={"log.segment.max-age": " " * 2_000_000 + "60s"})
        assert answer.error.code == ErrorCode.INVALID_CONFIG and "1024 bytes" in answer.error.message
        table = cluster.wait_until(lambda: (r := _create_table(stub, "t")).error.code == 0 and r, 30, "table t")
        for group in ("g\U0001f600", "g/", ".."):
            answer = stub.CommitOffsets(coordinator_pb2.CommitOffsetsRequest(group=group, offsets=[
                coordinator_pb2.BucketOffset(table_bucket=common_pb2.TableBucket(table_id=table.table_id), offset=1)
            ]), timeout=10)  # fmt: skip
            assert answer.error.code == ErrorCode.INVALID_REQUEST, answer.error
            fetched = stub.FetchOffsets(coordinator_pb2.FetchOffsetsRequest(group=group), timeout=10)
            assert fetched.error.code == ErrorCode.INVALID_REQUEST, fetched.error
    assert cluster.wait_for_leader(20) == leader
    assert cluster.health(leader)["coordinator_epoch"] == epoch  # no failover
