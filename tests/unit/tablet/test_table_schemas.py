"""A tablet server learns each hosted table's schema (docs/primary-key-tables.md §2): from NotifyLeaderAndIsr
with a bucket's role, and a newer version (a column added) from UpdateMetadata; never an older one. The
metadata cache answers a table's schema; a schema that does not check costs only its own table's buckets.
(ReplicaManagers over real logs in a temp dir, tests/unit/replica/harness.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from fluss_py.errors import ErrorCode
from fluss_py.replica.schemas import TableSchemas
from fluss_py.rpc import convert
from fluss_py.rpc.pb import common_pb2, tablet_pb2
from fluss_py.schema.schema import parse_column, parse_schema
from fluss_py.tablet.metadata_cache import MetadataCache
from fluss_py.tablet.replica_layer import ManagerReplicaLayer
from fluss_py.types import LeaderAndIsr, TableBucket
from tests.unit.replica.fakes import FakeClock
from tests.unit.replica.harness import ReplicaCluster, node

PK = parse_schema("id BIGINT, name STRING", primary_key="id")
PK2 = PK.add_column(parse_column("note STRING"))
LEADER = LeaderAndIsr(1, 0, (1,), 1, 0)


@pytest.fixture
async def cluster(tmp_path: Path):
    c = ReplicaCluster(2, FakeClock(), tmp_path)
    yield c
    await c.close()


def _info(table_id: int, schema=None, raw: common_pb2.TableSchema | None = None) -> common_pb2.TableInfo:
    descriptor = common_pb2.TableDescriptor(num_buckets=2, replication_factor=1)
    if schema is not None:
        descriptor.schema.CopyFrom(convert.schema_to_pb(schema))
    if raw is not None:
        descriptor.schema.CopyFrom(raw)
    path = common_pb2.TablePath(database="fluss", table=f"t{table_id}")
    return common_pb2.TableInfo(table_id=table_id, path=path, descriptor=descriptor)


def _notify(buckets: list[TableBucket], infos: list[common_pb2.TableInfo]) -> tablet_pb2.NotifyLeaderAndIsrRequest:
    return tablet_pb2.NotifyLeaderAndIsrRequest(
        coordinator_epoch=1,
        coordinator_id=1,
        buckets=[convert.leader_and_isr_to_pb(tb, LEADER, (1,)) for tb in buckets],
        tables=infos,
        servers=[convert.server_node_to_pb(node(i)) for i in (1, 2)],
    )


def _update(infos: list[common_pb2.TableInfo], version: int) -> tablet_pb2.UpdateMetadataRequest:
    view = common_pb2.ClusterMetadata(
        tablet_servers=[convert.server_node_to_pb(node(i)) for i in (1, 2)],
        tables=[common_pb2.TableMetadata(info=i) for i in infos],
        coordinator_epoch=1,
    )
    return tablet_pb2.UpdateMetadataRequest(coordinator_epoch=1, metadata=view, metadata_version=version)


async def test_the_schema_comes_with_the_role_and_a_new_version_with_update_metadata(cluster) -> None:
    manager = cluster.managers[1]
    layer = ManagerReplicaLayer(manager, MetadataCache(), cluster.config)
    answer = await layer.notify_leader_and_isr(
        _notify([TableBucket(5, 0), TableBucket(6, 0)], [_info(5, PK), _info(6)])
    )
    assert answer.error.code == ErrorCode.NONE and list(answer.buckets) == []
    assert manager.schemas.get(5) == PK and manager.schemas.get(6) is None  # 6: a log table without a schema

    await layer.update_metadata(_update([_info(5, PK2), _info(6)], 1))
    assert manager.schemas.get(5) == PK2 and layer.metadata.table_schema(5) == PK2
    assert layer.metadata.table_schema(6) is None and layer.metadata.table_schema(99) is None

    # an older word (a NotifyLeaderAndIsr built before the column was added) never takes a version back
    await layer.notify_leader_and_isr(_notify([TableBucket(5, 1)], [_info(5, PK)]))
    assert manager.schemas.get(5) == PK2
    # a table not hosted here is not kept; a stopped table is forgotten
    await layer.update_metadata(_update([_info(5, PK2), _info(6), _info(7, PK)], 2))
    assert manager.schemas.get(7) is None and layer.metadata.table_schema(7) == PK
    stopped = [tablet_pb2.StopReplicaBucket(table_bucket=convert.table_bucket_to_pb(TableBucket(5, b))) for b in (0, 1)]
    stop = tablet_pb2.StopReplicaRequest(coordinator_epoch=1, coordinator_id=1, buckets=stopped)
    await layer.stop_replica(stop)
    assert manager.schemas.get(5) is None


async def test_without_the_table_in_the_request_the_last_view_is_used(cluster) -> None:
    manager = cluster.managers[1]
    layer = ManagerReplicaLayer(manager, MetadataCache(), cluster.config)
    await layer.update_metadata(_update([_info(5, PK2)], 1))
    answer = await layer.notify_leader_and_isr(_notify([TableBucket(5, 0)], []))
    assert list(answer.buckets) == [] and manager.schemas.get(5) == PK2


async def test_a_schema_that_does_not_check_costs_only_its_tables_buckets(cluster) -> None:
    manager = cluster.managers[1]
    layer = ManagerReplicaLayer(manager, MetadataCache(), cluster.config)
    bad = common_pb2.TableSchema(
        versions=[common_pb2.SchemaVersion(schema_id=1, columns=[common_pb2.SchemaColumn(name="a", type="NOPE")])]
    )
    answer = await layer.notify_leader_and_isr(
        _notify([TableBucket(5, 0), TableBucket(6, 0)], [_info(5, raw=bad), _info(6, PK)])
    )
    (failed,) = answer.buckets
    assert convert.table_bucket_from_pb(failed.table_bucket) == TableBucket(5, 0)
    assert failed.error.code == ErrorCode.INVALID_REQUEST and "NOPE" in failed.error.message
    assert manager.schemas.get(6) == PK and TableBucket(6, 0) in manager._replicas
    assert TableBucket(5, 0) not in manager._replicas


def test_table_schemas_keep_the_newest_of_hosted_tables() -> None:
    schemas = TableSchemas()
    assert not schemas.update(1, PK)  # not hosted
    schemas.learn(1, PK2)
    schemas.learn(1, PK)
    assert schemas.get(1) == PK2 and not schemas.update(1, PK)
    schemas.learn(2, None)
    assert schemas.get(2) is None
    schemas.retain({2})
    assert schemas.get(1) is None
