"""The coordinator's table/leadership/ISR handlers against an in-memory ZooKeeper and a recording gateway."""

import asyncio
import json

import pytest

from fluss_py.coordinator.channel import NOTIFY, STOP, UPDATE
from fluss_py.coordinator.events import (
    AdjustIsr,
    AllocateWriterId,
    ControlledShutdown,
    CreateTable,
    DeadLeaveIsrs,
    DropDatabase,
    DropTable,
    GetMetadata,
    ListTables,
    ReplicasCorrupt,
    ReplicasFailed,
    ReplicasRecovered,
)
from fluss_py.coordinator.processor import options_from_config
from fluss_py.coordinator.state import BucketState, ReplicaState
from fluss_py.errors import (
    ConfigError,
    DatabaseNotExistError,
    ErrorCode,
    InvalidConfigError,
    InvalidReplicationFactorError,
    TableAlreadyExistError,
    TableNotExistError,
)
from fluss_py.rpc.pb import common_pb2, coordinator_pb2
from fluss_py.testing.procs import async_wait_until as wait_until
from fluss_py.types import NO_LEADER, LeaderAndIsr, TableBucket, TablePath
from fluss_py.zk.codecs import TabletServerRegistration
from fluss_py.zk.paths import LeaderIsrZNode, TableAssignmentZNode, TableZNode, WriterIdCounterZNode
from fluss_py.zk.values import EpochFencedError, SessionLostError

from .fakes import FakeZk
from .harness import ROOT, Harness, fresh_zk, registration

T = TablePath("fluss", "orders")


@pytest.fixture
async def h():
    zk, fence = fresh_zk()
    harness = Harness(zk, {1: "", 2: "", 3: ""}, fence)
    await harness.start()
    yield harness
    await harness.channel.close()


# ---------------------------------------------------------------- create / drop


async def test_create_table_rf3_writes_leader_isr_and_tells_every_replica(h):
    table_id = await h.proc.create_table(CreateTable(T, num_buckets=3, replication_factor=3))
    await h.drain()
    assignment = TableAssignmentZNode.decode(h.zk.data(TableAssignmentZNode.path(ROOT, table_id)))
    assert sorted(assignment) == [0, 1, 2] and all(sorted(r) == [1, 2, 3] for r in assignment.values())
    assert sorted(r[0] for r in assignment.values()) == [1, 2, 3]  # leaders spread
    for b, replicas in assignment.items():
        stored = json.loads(h.zk.data(LeaderIsrZNode.path(ROOT, table_id, b)))
        assert stored == {"version": 1, "leader": replicas[0], "leader_epoch": 0, "isr": list(replicas),
                          "coordinator_epoch": 1, "bucket_epoch": 0}  # fmt: skip
    reg = TableZNode.decode(h.zk.data(TableZNode.path(ROOT, "fluss", "orders")))
    assert reg["table_id"] == table_id and reg["num_buckets"] == 3 and reg["replication_factor"] == 3
    for s in (1, 2, 3):
        (notify,) = h.gateway.of(NOTIFY, s)
        assert notify.coordinator_epoch == 1 and len(notify.buckets) == 3
        assert {n.id for n in notify.servers} == {1, 2, 3} and notify.tables[0].table_id == table_id
        (update,) = h.gateway.of(UPDATE, s)[-1:]
        assert [t.info.table_id for t in update.metadata.tables] == [table_id]
        kinds = [k for sid, k, _ in h.gateway.calls if sid == s]
        assert kinds.index(UPDATE, 1) < kinds.index(NOTIFY)  # metadata before leadership
    for b in range(3):
        tb = TableBucket(table_id, b)
        assert h.proc.view.bucket_states.get(tb) is BucketState.ONLINE
        assert all(h.proc.view.replica_states.get((tb, s)) is ReplicaState.ONLINE for s in (1, 2, 3))


async def test_replication_factor_above_live_servers_creates_nothing(h):
    before = h.zk.snapshot()
    with pytest.raises(InvalidReplicationFactorError, match="replication factor 4"):
        await h.proc.create_table(CreateTable(T, num_buckets=2, replication_factor=4))
    assert h.zk.snapshot() == before and not h.proc.view.tables


async def test_a_partitioned_tables_logical_table_has_no_buckets_but_its_partitions_do(h):
    spec = {"table.partition.key": "dt", "table.auto-partition.time-unit": "day"}
    logical = await h.proc.create_table(CreateTable(T, num_buckets=3, replication_factor=2, properties=spec))
    await h.drain()
    assert TableAssignmentZNode.decode(h.zk.data(TableAssignmentZNode.path(ROOT, logical))) == {}
    assert h.proc.view.tables[logical].num_buckets == 3  # what its partitions get
    assert not list(h.proc.view.table_buckets(logical)) and not h.gateway.of(NOTIFY, 1)
    part = await h.proc.create_table(CreateTable(TablePath("fluss", "orders$20261201"), 3, 2, spec))
    await h.drain()
    assert sorted(TableAssignmentZNode.decode(h.zk.data(TableAssignmentZNode.path(ROOT, part)))) == [0, 1, 2]
    with pytest.raises(InvalidReplicationFactorError):  # still checked: its partitions must be placeable
        await h.proc.create_table(CreateTable(TablePath("fluss", "p2"), 1, 4, spec))


async def test_create_table_errors(h):
    with pytest.raises(DatabaseNotExistError):
        await h.proc.create_table(CreateTable(TablePath("nope", "t")))
    with pytest.raises(InvalidConfigError):
        await h.proc.create_table(CreateTable(T, replication_factor=2, properties={"min.insync.replicas": "3"}))
    with pytest.raises(ConfigError, match=r"table\.log\.ttl"):
        await h.proc.create_table(CreateTable(T, properties={"table.log.ttl": "soon"}))
    table_id = await h.proc.create_table(CreateTable(T, replication_factor=2))
    with pytest.raises(TableAlreadyExistError):
        await h.proc.create_table(CreateTable(T))
    assert await h.proc.create_table(CreateTable(T, ignore_if_exists=True)) == table_id
    second = await h.proc.create_table(CreateTable(TablePath("fluss", "other"), replication_factor=1))
    assert second == table_id + 1
    assert await h.proc.list_tables(ListTables("fluss")) == ["orders", "other"]
    with pytest.raises(DatabaseNotExistError):
        await h.proc.list_tables(ListTables("nope"))


async def test_a_property_value_that_would_swell_the_table_znode_is_refused(h):
    # " " * 2_000_000 + "60s" parses as 60 s; stored as given it made the znode larger than ZooKeeper's 1 MiB
    before = h.zk.snapshot()
    for value in (" " * 2_000_000 + "60s", "0" * 1025 + "1"):
        with pytest.raises(InvalidConfigError, match="longer than 1024 bytes"):
            await h.proc.create_table(CreateTable(T, properties={"log.segment.max-age": value}))
    with pytest.raises(InvalidConfigError, match="unknown"):
        await h.proc.create_table(CreateTable(T, properties={"k" * 2_000_000: "1"}))
    assert h.zk.snapshot() == before
    await h.proc.create_table(CreateTable(T, properties={"log.segment.max-age": " 60s "}))


async def test_a_table_znode_the_view_missed_is_table_already_exist_not_fencing(h):
    # ZooKeeper answers the fence's check with RolledBackError when the table's create fails with NodeExists
    h.zk.put(TableZNode.path(ROOT, T.database, T.table), b"{}")
    with pytest.raises(TableAlreadyExistError):
        await h.proc.create_table(CreateTable(T))


async def test_drop_table_deletes_nodes_and_replicas(h):
    table_id = await h.proc.create_table(CreateTable(T, num_buckets=2, replication_factor=3))
    await h.drain()
    h.gateway.clear()
    assert await h.proc.drop_table(DropTable(T)) is True
    await h.drain()
    assert not [p for p in h.zk.nodes if f"/tables/{table_id}" in p or p.endswith("/orders")]
    for s in (1, 2, 3):
        (stop,) = h.gateway.of(STOP, s)
        assert stop.coordinator_epoch == 1 and all(b.delete for b in stop.buckets) and len(stop.buckets) == 2
    assert not h.proc.view.tables and not h.proc.view.buckets
    with pytest.raises(TableNotExistError):
        await h.proc.drop_table(DropTable(T))
    assert await h.proc.drop_table(DropTable(T, ignore_if_not_exists=True)) is False


async def test_get_metadata(h):
    table_id = await h.proc.create_table(CreateTable(T, num_buckets=2, replication_factor=2))
    md = await h.proc.get_metadata(GetMetadata([T]))
    assert [s.id for s in md.tablet_servers] == [1, 2, 3] and md.coordinator.id == 100
    (table,) = md.tables
    assert table.info.table_id == table_id and [b.table_bucket.bucket for b in table.buckets] == [0, 1]
    assert all(b.leader == b.replicas[0] and len(b.isr) == 2 for b in table.buckets)
    with pytest.raises(TableNotExistError):
        await h.proc.get_metadata(GetMetadata([TablePath("fluss", "nope")]))


# ---------------------------------------------------------------- membership


async def test_dead_leader_is_replaced_from_the_isr_in_assignment_order(h):
    table_id = await h.proc.create_table(CreateTable(T, num_buckets=3, replication_factor=3))
    await h.drain()
    assignment = {b: h.proc.view.buckets[TableBucket(table_id, b)].replicas for b in range(3)}
    led_by_1 = [b for b, r in assignment.items() if r[0] == 1]
    h.gateway.clear()
    await h.kill(1)
    for b, replicas in assignment.items():
        lai = h.lai(table_id, b)
        assert 1 not in lai.isr and lai.bucket_epoch == 1
        if b in led_by_1:
            assert lai.leader == replicas[1] and lai.leader_epoch == 1
        else:
            assert lai.leader == replicas[0] and lai.leader_epoch == 0
        assert lai == h.view_lai(table_id, b)
    assert not h.gateway.of(NOTIFY, 1) and not h.gateway.of(UPDATE, 1)
    for s in (2, 3):
        kinds = [k for sid, k, _ in h.gateway.calls if sid == s]
        assert kinds[0] == UPDATE and NOTIFY in kinds
        assert {s.id for s in h.gateway.of(UPDATE, s)[-1].metadata.tablet_servers} == {2, 3}
    assert all(h.proc.view.replica_states.get((TableBucket(table_id, b), 1)) is ReplicaState.OFFLINE for b in range(3))


async def test_last_isr_member_dies_bucket_leaderless_then_recovers_when_it_returns(h):
    table_id = await h.proc.create_table(CreateTable(T, num_buckets=1, replication_factor=2))
    first, second = h.proc.view.buckets[TableBucket(table_id, 0)].replicas
    await h.kill(second)
    assert h.lai(table_id, 0).isr == (first,)
    await h.kill(first)
    lai = h.lai(table_id, 0)
    assert lai.leader == NO_LEADER and lai.isr == (first,)
    assert h.proc.view.bucket_states.get(TableBucket(table_id, 0)) is BucketState.OFFLINE
    await h.revive(second)  # not in the ISR: no unclean election
    assert h.lai(table_id, 0).leader == NO_LEADER
    h.gateway.clear()
    await h.revive(first)
    lai = h.lai(table_id, 0)
    assert lai.leader == first and lai.isr == (first,) and lai.leader_epoch == 2
    assert h.proc.view.bucket_states.get(TableBucket(table_id, 0)) is BucketState.ONLINE
    assert {s for s, k, _ in h.gateway.calls if k == NOTIFY} == {first, second}


async def test_returning_server_is_told_its_role(h):
    table_id = await h.proc.create_table(CreateTable(T, num_buckets=3, replication_factor=3))
    await h.kill(3)
    h.gateway.clear()
    await h.revive(3)
    (notify,) = h.gateway.of(NOTIFY, 3)
    assert len(notify.buckets) == 3 and all(3 not in b.isr for b in notify.buckets)
    assert all(3 not in h.lai(table_id, b).isr for b in range(3))  # the leader adds it back via AdjustIsr


async def test_dead_server_writes_are_batched_in_bounded_transactions():
    zk, fence = fresh_zk()
    h = Harness(zk, {1: "", 2: ""}, fence, max_ops=4)
    await h.start()
    table_id = await h.proc.create_table(CreateTable(T, num_buckets=10, replication_factor=2))
    zk.transactions.clear()
    led = sum(1 for b in range(10) if h.lai(table_id, b).leader == 1)
    await h.kill(1)
    # two rounds (the buckets 1 led, then those it followed), each in transactions of at most 4 ops
    rounds = -(-led // 4) + -(-(10 - led) // 4)
    assert len(zk.transactions) == rounds and all(len(t) <= 4 for t in zk.transactions)
    assert all(h.lai(table_id, b).leader == 2 and h.lai(table_id, b).isr == (2,) for b in range(10))
    await h.channel.close()


class SlowZk(FakeZk):
    """FakeZk whose transactions take a few loop turns each, counting how many are in flight at once."""

    in_flight = 0
    most_in_flight = 0

    async def commit(self, ops, fence=None):
        SlowZk.in_flight += 1
        SlowZk.most_in_flight = max(SlowZk.most_in_flight, SlowZk.in_flight)
        try:
            for _ in range(3):
                await asyncio.sleep(0)
            return await super().commit(ops, fence)
        finally:
            SlowZk.in_flight -= 1


async def test_dead_server_writes_are_pipelined_and_a_failed_chunk_still_goes_one_by_one():
    zk = SlowZk(ROOT)
    fresh = fresh_zk()[0]
    zk.nodes = dict(fresh.nodes)  # the parents and the database
    h = Harness(zk, {1: "", 2: ""}, zk.fence(1), max_ops=4)
    await h.start()
    table_id = await h.proc.create_table(CreateTable(T, num_buckets=40, replication_factor=2))
    stale = LeaderIsrZNode.path(ROOT, table_id, 5)
    zk.put(stale, zk.data(stale))  # changed behind our back: its chunk fails, the other 3 buckets are written
    SlowZk.most_in_flight = 0
    await h.kill(1)
    assert SlowZk.most_in_flight > 1  # before: one transaction at a time
    assert all(h.lai(table_id, b).leader == 2 for b in range(40) if b != 5)
    await h.channel.close()


# ---------------------------------------------------------------- reload


async def test_new_leader_reloads_state_and_reconciles_servers_that_died_meanwhile(h):
    table_id = await h.proc.create_table(CreateTable(T, num_buckets=3, replication_factor=3))
    await h.channel.close()
    fence2 = h.zk.fence(2)
    h2 = Harness(h.zk, {2: "", 3: ""}, fence2)  # server 1 died while no coordinator led
    await h2.proc.load_tables()
    assert h2.proc.view.tables[table_id].path == T
    await h2.proc.on_servers_changed(dict(h2.ctx.tablet_servers), [])
    await h2.drain()
    for b in range(3):
        lai = h2.lai(table_id, b)
        assert lai.leader in (2, 3) and 1 not in lai.isr and lai.coordinator_epoch == 2
    for s in (2, 3):
        (notify,) = h2.gateway.of(NOTIFY, s)
        assert notify.coordinator_epoch == 2 and len(notify.buckets) == 3
    await h2.channel.close()


async def test_load_deletes_assignment_debris_of_a_failed_create(h):
    h.zk.put(TableAssignmentZNode.path(ROOT, 77), TableAssignmentZNode.encode({0: (1, 2)}))
    h.zk.put(LeaderIsrZNode.path(ROOT, 77, 0), LeaderIsrZNode.encode(LeaderAndIsr(1, 0, (1, 2), 1, 0)))
    await h.proc.load_tables()
    assert not [p for p in h.zk.nodes if "/tables/77" in p]


async def test_bucket_without_leader_isr_stays_new_until_a_replica_is_live(h):
    h.zk.put(TableZNode.path(ROOT, "fluss", "late"), TableZNode.encode(
        {"table_id": 50, "num_buckets": 1, "replication_factor": 2, "properties": {}}))  # fmt: skip
    h.zk.put(TableAssignmentZNode.path(ROOT, 50), TableAssignmentZNode.encode({0: (4, 5)}))
    h.zk.put(f"{TableAssignmentZNode.path(ROOT, 50)}/buckets/0")
    await h.proc.load_tables()
    tb = TableBucket(50, 0)
    assert h.proc.view.bucket_states.get(tb) is BucketState.NEW
    await h.revive(1)  # not a replica: the bucket stays New
    assert h.proc.view.bucket_states.get(tb) is BucketState.NEW
    await h.revive(5)
    assert h.lai(50, 0) == LeaderAndIsr(5, 0, (5,), 1, 0)
    assert h.proc.view.bucket_states.get(tb) is BucketState.ONLINE


async def test_a_fenced_coordinator_writes_nothing(h):
    table_id = await h.proc.create_table(CreateTable(T, num_buckets=1, replication_factor=3))
    h.zk.fence(2)  # another leader bumped the epoch
    before = h.zk.snapshot()
    with pytest.raises(EpochFencedError):
        await h.proc.create_table(CreateTable(TablePath("fluss", "x")))
    leader = h.view_lai(table_id, 0).leader
    del h.ctx.tablet_servers[leader]
    with pytest.raises(EpochFencedError):
        await h.proc.on_servers_changed({}, [leader])
    assert h.zk.snapshot() == before
    assert h.view_lai(table_id, 0).leader == leader  # the view follows ZooKeeper, not the failed plan


async def test_leader_isr_changed_behind_our_back_is_reread_not_overwritten(h):
    table_id = await h.proc.create_table(CreateTable(T, num_buckets=2, replication_factor=3))
    foreign = LeaderAndIsr(2, 9, (2, 3), 1, 9)
    h.zk.put(LeaderIsrZNode.path(ROOT, table_id, 0), LeaderIsrZNode.encode(foreign))
    await h.kill(1)
    assert h.lai(table_id, 0) == foreign == h.view_lai(table_id, 0)
    assert 1 not in h.lai(table_id, 1).isr  # the other bucket of the batch was still written


# ---------------------------------------------------------------- AdjustIsr


def adjust(server, table_id, bucket, leader_epoch, bucket_epoch, isr):
    return AdjustIsr(coordinator_pb2.AdjustIsrRequest(server_id=server, buckets=[coordinator_pb2.AdjustIsrBucket(
        table_bucket=common_pb2.TableBucket(table_id=table_id, bucket=bucket), leader_epoch=leader_epoch,
        bucket_epoch=bucket_epoch, new_isr=isr)]))  # fmt: skip


async def test_adjust_isr_shrink_expand_and_rejections(h):
    table_id = await h.proc.create_table(CreateTable(T, num_buckets=1, replication_factor=3))
    leader, f1, f2 = h.proc.view.buckets[TableBucket(table_id, 0)].replicas
    resp = await h.proc.adjust_isr(adjust(leader, table_id, 0, 0, 0, [leader, f1]))
    (r,) = resp.buckets
    assert r.error.code == ErrorCode.NONE and list(r.leader_and_isr.isr) == [leader, f1]
    assert r.leader_and_isr.bucket_epoch == 1 and h.lai(table_id, 0).isr == (leader, f1)
    await h.drain()
    for s in (1, 2, 3):  # client metadata on every server shows the new ISR
        (bucket,) = h.gateway.of(UPDATE, s)[-1].metadata.tables[0].buckets
        assert list(bucket.isr) == [leader, f1]
    # a retry of the same change is answered with the current state
    (r,) = (await h.proc.adjust_isr(adjust(leader, table_id, 0, 0, 0, [leader, f1]))).buckets
    assert r.error.code == ErrorCode.NONE and r.leader_and_isr.bucket_epoch == 1
    (r,) = (await h.proc.adjust_isr(adjust(leader, table_id, 0, 0, 0, [leader]))).buckets
    assert r.error.code == ErrorCode.INVALID_UPDATE_VERSION
    (r,) = (await h.proc.adjust_isr(adjust(f1, table_id, 0, 0, 1, [f1]))).buckets
    assert r.error.code == ErrorCode.FENCED_LEADER_EPOCH
    (r,) = (await h.proc.adjust_isr(adjust(leader, 99, 0, 0, 1, [leader]))).buckets
    assert r.error.code == ErrorCode.UNKNOWN_TABLE_OR_BUCKET
    await h.kill(f2)
    (r,) = (await h.proc.adjust_isr(adjust(leader, table_id, 0, 0, 1, [leader, f1, f2]))).buckets
    assert r.error.code == ErrorCode.INELIGIBLE_REPLICA
    assert h.lai(table_id, 0).isr == (leader, f1)


# ---------------------------------------------------------------- controlled shutdown


async def test_controlled_shutdown_moves_leaders_and_leaves_isrs(h):
    table_id = await h.proc.create_table(CreateTable(T, num_buckets=3, replication_factor=3))
    single = await h.proc.create_table(CreateTable(TablePath("fluss", "single"), num_buckets=3, replication_factor=1))
    await h.drain()
    h.gateway.clear()
    remaining = await h.proc.controlled_shutdown(ControlledShutdown(1))
    await h.drain()
    assert remaining == []  # RF-1 buckets cannot move and are not waited for
    for b in range(3):
        lai = h.lai(table_id, b)
        assert lai.leader != 1 and 1 not in lai.isr
    followed = [b.table_bucket.bucket for stop in h.gateway.of(STOP, 1) for b in stop.buckets]
    assert followed and all(not b.delete for stop in h.gateway.of(STOP, 1) for b in stop.buckets)
    # the stopping server hears NotifyLeaderAndIsr only of the buckets it led; their leaders of the others
    told = [b.table_bucket.bucket for n in h.gateway.of(NOTIFY, 1) for b in n.buckets]
    assert sorted(told + followed) == [0, 1, 2] and not set(told) & set(followed)
    for b in followed:
        leader = h.lai(table_id, b).leader
        assert any(
            t.table_bucket.bucket == b and 1 not in t.isr for n in h.gateway.of(NOTIFY, leader) for t in n.buckets
        )
    assert any(h.lai(single, b).leader == 1 for b in range(3))
    # a shutting-down server cannot lead a bucket created meanwhile
    other = await h.proc.create_table(CreateTable(TablePath("fluss", "later"), num_buckets=4, replication_factor=2))
    assert all(1 not in h.proc.view.buckets[TableBucket(other, b)].replicas for b in range(4))
    await h.kill(1)
    assert 1 not in h.proc.view.shutting_down


async def test_controlled_shutdown_without_other_isr_member_reports_remaining(h):
    table_id = await h.proc.create_table(CreateTable(T, num_buckets=1, replication_factor=2))
    leader, follower = h.proc.view.buckets[TableBucket(table_id, 0)].replicas
    await h.kill(follower)
    assert await h.proc.controlled_shutdown(ControlledShutdown(leader)) == [TableBucket(table_id, 0)]
    assert await h.proc.controlled_shutdown(ControlledShutdown(42)) == []


# ---------------------------------------------------------------- writer ids


async def test_writer_ids_are_unique_across_coordinator_failovers():
    zk, fence = fresh_zk()
    a = Harness(zk, {1: ""}, fence, writer_id_block=3)
    ids_a = [await a.proc.allocate_writer_id(AllocateWriterId()) for _ in range(5)]
    b = Harness(zk, {1: ""}, zk.fence(2), writer_id_block=3)  # the new leader
    ids_b = [await b.proc.allocate_writer_id(AllocateWriterId()) for _ in range(4)]
    assert ids_a == [1, 2, 3, 4, 5] and ids_b == [7, 8, 9, 10]
    assert WriterIdCounterZNode.decode(zk.data(WriterIdCounterZNode.path(ROOT))) == 12
    with pytest.raises(EpochFencedError):  # the old leader cannot reserve a new block
        for _ in range(3):
            await a.proc.allocate_writer_id(AllocateWriterId())


# ---------------------------------------------------------------- wiring


class RecordingLoop:
    def __init__(self) -> None:
        self.handlers = {}

    def register(self, event_type, handler) -> None:
        self.handlers[event_type] = handler


async def test_install_registers_every_handler_and_cascades_database_drops(h):
    dropped = []

    async def drop_database(event):
        dropped.append((event.name, sorted(p.table for p in h.proc.view.by_path if p.database == event.name)))
        return True

    loop = RecordingLoop()
    h.proc.install(loop, drop_database=drop_database)
    assert set(h.proc.handlers) <= set(loop.handlers) and DropDatabase in loop.handlers
    table_id = await h.proc.create_table(CreateTable(T, num_buckets=1, replication_factor=1))
    assert await loop.handlers[DropDatabase](DropDatabase("fluss")) is True  # no cascade: tables untouched
    assert dropped == [("fluss", ["orders"])]
    await loop.handlers[DropDatabase](DropDatabase("fluss", cascade=True))
    assert dropped[-1] == ("fluss", []) and table_id not in h.proc.view.tables
    assert not await h.zk.get_children(TableAssignmentZNode.parent(ROOT))


def test_options_from_config():
    from fluss_py.config import load_config
    from fluss_py.coordinator.group_coordinator import GroupLimits

    config = load_config(
        "coordinator",
        None,
        {"default.bucket.number": "4", "default.replication.factor": "2", "group.max-session-timeout": "20s"},
    )
    assert options_from_config(config) == {
        "default_buckets": 4,
        "default_replication_factor": 2,
        "group_limits": GroupLimits(1000, 20_000, 500),
        "unclean_election": False,
    }
    config = load_config("coordinator", None, {"unclean.leader.election.enable": "true"})
    assert options_from_config(config)["unclean_election"] is True


async def test_a_failed_load_is_retried_by_the_next_table_event():
    zk, fence = fresh_zk()
    h = Harness(zk, {1: "", 2: "", 3: ""}, fence)
    await h.start()
    table_id = await h.proc.create_table(CreateTable(T, replication_factor=3))
    h2 = Harness(zk, {1: "", 2: "", 3: ""}, zk.fence(2))
    real = zk.get_children

    async def lost_once(path):
        zk.get_children = real
        raise SessionLostError("ZooKeeper session lost")

    zk.get_children = lost_once
    with pytest.raises(SessionLostError):
        await h2.proc.load_tables()
    assert await h2.proc.list_tables(ListTables("fluss")) == ["orders"]  # loaded on demand
    await h2.proc.on_servers_changed(dict(h2.ctx.tablet_servers), [])
    await h2.drain()
    assert len(h2.gateway.of(NOTIFY)) == 3 and h2.view_lai(table_id, 0).coordinator_epoch == 1
    await h.channel.close()
    await h2.channel.close()


async def test_a_server_that_restarted_unnoticed_loses_its_isr_places_and_is_told_its_roles():
    from fluss_py.coordinator.events import TabletServersChanged
    from fluss_py.coordinator.handlers import MetadataHandlers
    from fluss_py.zk.paths import TabletServerZNode

    zk, fence = fresh_zk()
    for s in (1, 2, 3):
        zk.put(TabletServerZNode.path(ROOT, s), TabletServerZNode.encode(registration(s)))
    h = Harness(zk, {}, fence)
    handlers = MetadataHandlers(zk, h.ctx)
    handlers.add_servers_listener(h.proc.on_servers_changed)
    await h.proc.load_tables()
    await handlers.tablet_servers_changed(TabletServersChanged(["1", "2", "3"]))
    table_id = await h.proc.create_table(CreateTable(T, num_buckets=3, replication_factor=3))
    led_by_2 = [b for b in range(3) if h.lai(table_id, b).leader == 2]
    await h.drain()
    h.gateway.clear()
    restarted = TabletServerRegistration("127.0.0.1", 9002, registered_ms=registration(2).registered_ms + 5000)
    zk.put(TabletServerZNode.path(ROOT, 2), TabletServerZNode.encode(restarted))
    await handlers.tablet_servers_changed(TabletServersChanged(["1", "2", "3"]))  # same children
    await h.drain()
    for b in range(3):
        lai = h.lai(table_id, b)
        assert 2 not in lai.isr and lai.leader != 2
        assert lai.leader_epoch == (1 if b in led_by_2 else 0)
    (notify,) = h.gateway.of(NOTIFY, 2)
    assert len(notify.buckets) == 3 and all(b.leader != 2 for b in notify.buckets)
    assert h.ctx.tablet_servers[2] == restarted
    await h.channel.close()


async def test_a_replica_reporting_a_storage_failure_loses_leadership_until_its_server_returns(h):
    loop = RecordingLoop()
    loop.events = []
    loop.put = loop.events.append
    h.proc.install(loop)
    table_id = await h.proc.create_table(CreateTable(T, num_buckets=3, replication_factor=3))
    await h.drain()
    h.gateway.bucket_errors[2] = ErrorCode.STORAGE_ERROR
    await h.kill(3)  # server 2 is told about changed buckets and answers STORAGE_ERROR
    await h.drain()
    for event in [e for e in loop.events if isinstance(e, DeadLeaveIsrs)]:
        await h.proc.dead_leave_isrs(event)  # the death's second round, queued as its own event
    await wait_until(lambda: any(isinstance(e, ReplicasFailed) for e in loop.events))
    await h.drain()  # (one event per NotifyLeaderAndIsr answered: the death's two rounds may send two)
    reports = [e for e in loop.events if isinstance(e, ReplicasFailed)]
    assert all(event.server_id == 2 and event.buckets for event in reports)
    failed = [tb for event in reports for tb in event.buckets]
    for event in reports:
        await h.proc.replicas_failed(event)
    await h.drain()
    for tb in failed:
        lai = h.lai(table_id, tb.bucket)
        assert lai.leader == 1 and lai.isr == (1,)
    # the failed replica may not rejoin the ISR ...
    tb = failed[0]
    lai = h.lai(table_id, tb.bucket)
    (r,) = (await h.proc.adjust_isr(adjust(1, table_id, tb.bucket, lai.leader_epoch, lai.bucket_epoch, [1, 2]))).buckets
    assert r.error.code == ErrorCode.INELIGIBLE_REPLICA
    # ... until its server re-registers (a restart with a repaired disk)
    del h.gateway.bucket_errors[2]
    await h.kill(2)
    await h.revive(2)
    (r,) = (await h.proc.adjust_isr(adjust(1, table_id, tb.bucket, lai.leader_epoch, lai.bucket_epoch, [1, 2]))).buckets
    assert r.error.code == ErrorCode.NONE


async def test_a_corrupt_replica_leaves_leadership_and_isr_and_a_recovered_one_is_told_its_role(h):
    table_id = await h.proc.create_table(CreateTable(T, num_buckets=1, replication_factor=3))
    await h.drain()
    before = h.lai(table_id, 0)
    leader = before.leader
    await h.proc.replicas_corrupt(ReplicasCorrupt(leader, [TableBucket(table_id, 0)]))
    await h.drain()
    after = h.lai(table_id, 0)
    assert after.leader != leader and leader not in after.isr and after.leader_epoch == before.leader_epoch + 1
    # it may rejoin once it caught up again (the new leader proposes it): it is not a failed replica
    (r,) = (
        await h.proc.adjust_isr(
            adjust(after.leader, table_id, 0, after.leader_epoch, after.bucket_epoch, [*after.isr, leader])
        )
    ).buckets
    assert r.error.code == ErrorCode.NONE
    h.gateway.calls.clear()
    await h.proc.replicas_recovered(ReplicasRecovered(leader, [TableBucket(table_id, 0)]))
    await h.drain()
    assert any(server == leader and kind == NOTIFY for server, kind, _ in h.gateway.calls)


async def test_dropping_a_partitioned_table_drops_its_partitions(h):
    spec = {"table.partition.key": "dt", "table.auto-partition.time-unit": "day"}
    await h.proc.create_table(CreateTable(T, num_buckets=1, replication_factor=1, properties=spec))
    for slot in ("20261230", "20261231"):
        await h.proc.create_table(CreateTable(TablePath("fluss", f"orders${slot}"), 1, 1, spec))
    other = await h.proc.create_table(CreateTable(TablePath("fluss", "orders2"), 1, 1))
    await h.drain()
    assert await h.proc.drop_table(DropTable(T)) is True
    await h.drain()
    assert list(h.proc.view.tables) == [other]
    assert [p.table for p in h.proc.view.by_path] == ["orders2"]
