"""Growing a table's bucket count (coordinator/table_alter.py) against the in-memory ZooKeeper: the new
buckets are written with the table node in one transaction and told to their replicas; the old ones are
untouched; every refusal writes nothing; a new leader loads the grown table."""

import pytest

from fluss_py.coordinator.channel import NOTIFY, UPDATE
from fluss_py.coordinator.events import AlterTableBuckets, CreateTable
from fluss_py.coordinator.table_alter import TableAlter, max_added, plan_growth
from fluss_py.coordinator.tables import TableRegistration as TableInfo
from fluss_py.errors import InvalidReplicationFactorError, InvalidRequestError, TableNotExistError
from fluss_py.types import TableBucket, TablePath
from fluss_py.zk.paths import TableAssignmentZNode, TableZNode

from . import test_processor
from .harness import ROOT, Harness

T = test_processor.T
h = test_processor.h  # the processor fixture: a started TableProcessor, three live servers


async def test_growing_adds_buckets_with_leaders_and_leaves_the_old_ones_alone(h):
    table_id = await h.proc.create_table(CreateTable(T, num_buckets=2, replication_factor=2))
    await h.drain()
    before = {b: (h.lai(table_id, b), h.proc.view.buckets[TableBucket(table_id, b)].replicas) for b in (0, 1)}
    h.gateway.calls.clear()
    await TableAlter(h.proc).alter(AlterTableBuckets(T, 5))
    await h.drain()
    assert TableZNode.decode(h.zk.data(TableZNode.path(ROOT, "fluss", "orders")))["num_buckets"] == 5
    assignment = TableAssignmentZNode.decode(h.zk.data(TableAssignmentZNode.path(ROOT, table_id)))
    assert sorted(assignment) == [0, 1, 2, 3, 4] and all(len(r) == 2 for r in assignment.values())
    for b in (0, 1):  # untouched
        assert (h.lai(table_id, b), assignment[b]) == before[b]
    for b in (2, 3, 4):
        lai = h.lai(table_id, b)
        assert lai.leader == assignment[b][0] and lai.isr == assignment[b] and lai.leader_epoch == 0
        assert h.view_lai(table_id, b) == lai
    assert h.proc.view.tables[table_id].num_buckets == 5
    told = {(tb.table_bucket.bucket) for s in (1, 2, 3) for n in h.gateway.of(NOTIFY, s) for tb in n.buckets}
    assert told == {2, 3, 4}  # only the new buckets' replicas are told their roles
    (update,) = h.gateway.of(UPDATE, 1)[-1:]
    assert update.metadata.tables[0].info.descriptor.num_buckets == 5

    # a new leader loads the grown table as it is
    await h.channel.close()
    h2 = Harness(h.zk, {1: "", 2: "", 3: ""}, h.zk.fence(2))
    await h2.start()
    assert h2.proc.view.tables[table_id].num_buckets == 5
    assert sorted(tb.bucket for tb, _ in h2.proc.view.table_buckets(table_id)) == [0, 1, 2, 3, 4]
    await h2.channel.close()


async def test_refusals_write_nothing(h):
    await h.proc.create_table(CreateTable(T, num_buckets=3, replication_factor=3))
    await h.drain()
    alter = TableAlter(h.proc)
    before = h.zk.snapshot()
    for event, error in (
        (AlterTableBuckets(TablePath("fluss", "nope"), 4), TableNotExistError),
        (AlterTableBuckets(T, 2), InvalidRequestError),  # never shrinks
        (AlterTableBuckets(T, 5000), InvalidRequestError),  # beyond MAX_BUCKETS
        (AlterTableBuckets(T, 3 + max_added(h.proc.store.max_ops) + 1), InvalidRequestError),  # > one transaction
    ):
        with pytest.raises(error):
            await alter.alter(event)
    assert h.zk.snapshot() == before
    await alter.alter(AlterTableBuckets(T, 3))  # the same count: nothing to do (a retried alter succeeds)
    assert h.zk.snapshot() == before
    await h.kill(3)
    before = h.zk.snapshot()
    with pytest.raises(InvalidReplicationFactorError):  # rf 3, two live servers
        await alter.alter(AlterTableBuckets(T, 4))
    assert h.zk.snapshot() == before


async def test_a_partitioned_table_only_changes_what_its_next_partitions_get(h):
    spec = {"table.partition.key": "dt", "table.auto-partition.time-unit": "day"}
    logical = await h.proc.create_table(CreateTable(T, num_buckets=2, replication_factor=2, properties=spec))
    await TableAlter(h.proc).alter(AlterTableBuckets(T, 4))
    assert h.proc.view.tables[logical].num_buckets == 4
    assert TableAssignmentZNode.decode(h.zk.data(TableAssignmentZNode.path(ROOT, logical))) == {}
    assert not [p for p in h.zk.nodes if p.startswith(TableAssignmentZNode.path(ROOT, logical) + "/buckets/")]


def test_plan_growth_places_new_buckets_as_a_create_would() -> None:
    info = TableInfo(7, T, 2, 2)
    servers = {1: "", 2: "", 3: ""}
    growth = plan_growth(info, 6, servers, {1, 2, 3}, coordinator_epoch=4)
    assert sorted(growth.replicas) == [2, 3, 4, 5] and growth.info.num_buckets == 6
    assert all(len(set(r)) == 2 for r in growth.replicas.values())
    assert {growth.leaders[b].leader for b in growth.replicas} == {1, 2, 3}  # leaders spread
    assert all(lai.coordinator_epoch == 4 for lai in growth.leaders.values())
    with pytest.raises(InvalidReplicationFactorError):  # the new replicas include no live server
        plan_growth(info, 3, {1: "", 2: ""}, set(), coordinator_epoch=4)
