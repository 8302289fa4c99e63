"""Tables end to end: real ZooKeeper, a real coordinator and real tablet-server processes (gRPC, kill -9).

- create a table with replication factor 3 on 3 tablet servers: leader_isr nodes hold the initial
  election (first replica leads, every replica in the ISR, epochs 0, the leader's coordinator epoch);
  every tablet server receives the table in UpdateMetadata;
- replication factor 4 on 3 servers: INVALID_REPLICATION_FACTOR and nothing is created in ZooKeeper;
- AdjustIsr and ControlledShutdown over gRPC change leader_isr conditionally, and only with the replica token
  of the server they name (without it: refused, nothing changes);
- kill -9 of a bucket leader: after its session expires the next ISR member leads and the dead one
  leaves every ISR; a coordinator failover keeps all of it (the new leader reloads from ZooKeeper).
"""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from fluss_py.client import ProducerOptions
from fluss_py.client.sync import SyncAdmin, SyncProducer
from fluss_py.errors import ErrorCode
from fluss_py.log.manager import bucket_dir_name
from fluss_py.rpc.pb import common_pb2, coordinator_pb2, coordinator_pb2_grpc, tablet_pb2_grpc
from fluss_py.rpc.peer import REPLICA_TOKEN_KEY, call_metadata
from fluss_py.testing.fixtures import SESSION_TIMEOUT_S
from fluss_py.testing.zkview import ZkView
from fluss_py.types import TableBucket
from fluss_py.zk.paths import (
    LeaderIsrZNode,
    TableAssignmentZNode,
    TableIdCounterZNode,
    TabletServerZNode,
    TableZNode,
)

pytestmark = pytest.mark.integration


def _coordinator(cluster, name):
    channel = grpc.insecure_channel(cluster.get(name).rpc_address)
    return channel, coordinator_pb2_grpc.CoordinatorServiceStub(channel)


def _create(stub, table, buckets, rf):
    request = coordinator_pb2.CreateTableRequest(
        path=common_pb2.TablePath(database="fluss", table=table),
        descriptor=common_pb2.TableDescriptor(num_buckets=buckets, replication_factor=rf),
    )
    return stub.CreateTable(request, timeout=5)


def _live_servers(stub):
    response = stub.GetMetadata(common_pb2.MetadataRequest(), timeout=3)
    return sorted(s.id for s in response.metadata.tablet_servers) if response.error.code == 0 else []


def _tablet_metadata(cluster, name):
    with grpc.insecure_channel(cluster.get(name).rpc_address) as channel:
        response = tablet_pb2_grpc.TabletServiceStub(channel).GetMetadata(common_pb2.MetadataRequest(), timeout=3)
    return response.metadata if response.error.code == 0 else None


def _as_server(zk, root, server_id):
    """Call metadata proving the caller is tablet server ``server_id``: the replica token of its registration."""
    registration = TabletServerZNode.decode(zk.get_bytes(TabletServerZNode.path(root, server_id)))
    return call_metadata(REPLICA_TOKEN_KEY, registration.replica_token)


def _zk_tables_state(zk, root):
    return (
        zk.children(TableAssignmentZNode.parent(root)),
        zk.children(TableZNode.parent(root, "fluss")),
        zk.get_bytes(TableIdCounterZNode.path(root)),
    )


def test_create_table_rf3_writes_leader_isr_and_rf4_creates_nothing(cluster_factory):
    cluster = cluster_factory(coordinators=1, tablet_servers=3)
    leader = cluster.wait_for_leader(15)
    root = cluster.zk_root
    channel, stub = _coordinator(cluster, leader)
    with channel, ZkView(cluster.zookeeper_address) as zk:
        cluster.wait_until(lambda: _live_servers(stub) == [1, 2, 3], 15, "coordinator sees 3 tablet servers")
        epoch = cluster.health(leader)["coordinator_epoch"]

        before = _zk_tables_state(zk, root)
        refused = _create(stub, "too_wide", 2, 4)
        assert refused.error.code == ErrorCode.INVALID_REPLICATION_FACTOR
        assert "replication factor 4" in refused.error.message and "(3)" in refused.error.message
        assert _zk_tables_state(zk, root) == before
        assert not zk.exists(TableZNode.path(root, "fluss", "too_wide"))

        created = _create(stub, "orders", 3, 3)
        assert created.error.code == ErrorCode.NONE, created.error.message
        table_id = created.table_id
        assignment = TableAssignmentZNode.decode(zk.get_bytes(TableAssignmentZNode.path(root, table_id)))
        assert sorted(assignment) == [0, 1, 2]
        assert sorted(r[0] for r in assignment.values()) == [1, 2, 3]  # one leader per server
        for bucket, replicas in assignment.items():
            assert sorted(replicas) == [1, 2, 3]
            assert zk.get_json(LeaderIsrZNode.path(root, table_id, bucket)) == {
                "version": 1, "leader": replicas[0], "leader_epoch": 0, "isr": list(replicas),
                "coordinator_epoch": epoch, "bucket_epoch": 0,
            }  # fmt: skip
        registration = zk.get_json(TableZNode.path(root, "fluss", "orders"))
        assert (registration["table_id"], registration["num_buckets"], registration["replication_factor"]) == (
            table_id, 3, 3,
        )  # fmt: skip

        again = _create(stub, "orders", 3, 3)
        assert again.error.code == ErrorCode.TABLE_ALREADY_EXIST
        tables = stub.ListTables(coordinator_pb2.ListTablesRequest(database="fluss"), timeout=3)
        assert list(tables.tables) == ["orders"]

        # AdjustIsr from bucket 0's leader: shrink, then a stale retry of another change is refused
        leader0, follower0, _ = assignment[0]
        shrink = coordinator_pb2.AdjustIsrRequest(server_id=leader0, buckets=[coordinator_pb2.AdjustIsrBucket(
            table_bucket=common_pb2.TableBucket(table_id=table_id, bucket=0), leader_epoch=0, bucket_epoch=0,
            new_isr=[leader0, follower0])])  # fmt: skip
        # without the named server's replica token the coordinator refuses it and changes nothing
        before_isr = zk.get_json(LeaderIsrZNode.path(root, table_id, 0))
        unproven = stub.AdjustIsr(shrink, timeout=3)
        assert unproven.error.code == ErrorCode.REPLICA_NOT_AUTHENTICATED and not unproven.buckets, unproven
        assert zk.get_json(LeaderIsrZNode.path(root, table_id, 0)) == before_isr
        # with it (read from the server's registration, as the server itself presents it) it is applied
        as_leader0 = _as_server(zk, root, leader0)
        (result,) = stub.AdjustIsr(shrink, timeout=3, metadata=as_leader0).buckets
        assert result.error.code == ErrorCode.NONE and list(result.leader_and_isr.isr) == [leader0, follower0]
        assert zk.get_json(LeaderIsrZNode.path(root, table_id, 0))["isr"] == [leader0, follower0]
        del shrink.buckets[0].new_isr[1:]
        (stale,) = stub.AdjustIsr(shrink, timeout=3, metadata=as_leader0).buckets
        assert stale.error.code == ErrorCode.INVALID_UPDATE_VERSION

        # controlled shutdown of server 1: it leads nothing afterwards and is in no ISR
        shutdown = coordinator_pb2.ControlledShutdownRequest(server_id=1)
        done = stub.ControlledShutdown(shutdown, timeout=5, metadata=_as_server(zk, root, 1))
        assert done.error.code == ErrorCode.NONE and list(done.remaining_leaders) == []
        for bucket in assignment:
            state = zk.get_json(LeaderIsrZNode.path(root, table_id, bucket))
            assert state["leader"] != 1 and 1 not in state["isr"]

    def every_server_knows_the_table() -> bool:
        views = [_tablet_metadata(cluster, n) for n in cluster.names("tablet-server")]
        return all(v is not None and [t.info.table_id for t in v.tables] == [table_id] for v in views)

    cluster.wait_until(every_server_knows_the_table, 10, "UpdateMetadata with the table on every tablet server")


def test_dead_leader_is_replaced_and_a_new_coordinator_keeps_the_state(cluster_factory):
    cluster = cluster_factory(coordinators=2, tablet_servers=3)
    leader = cluster.wait_for_leader(15)
    root = cluster.zk_root
    channel, stub = _coordinator(cluster, leader)
    with channel:
        cluster.wait_until(lambda: _live_servers(stub) == [1, 2, 3], 15, "coordinator sees 3 tablet servers")
        created = _create(stub, "events", 3, 3)
        assert created.error.code == ErrorCode.NONE, created.error.message
        first_writer = stub.AllocateWriterId(coordinator_pb2.AllocateWriterIdRequest(), timeout=3)
        assert (first_writer.error.code, first_writer.writer_id) == (ErrorCode.NONE, 1)
    table_id = created.table_id
    with ZkView(cluster.zookeeper_address) as zk:
        assignment = TableAssignmentZNode.decode(zk.get_bytes(TableAssignmentZNode.path(root, table_id)))
        victim = assignment[0][0]
        cluster.kill(f"tablet-server-{victim}")

        def state(bucket):
            return zk.get_json(LeaderIsrZNode.path(root, table_id, bucket))

        cluster.wait_until(
            lambda: all(victim not in state(b)["isr"] for b in assignment),
            SESSION_TIMEOUT_S + 10,
            "the dead server leaves every ISR",
        )
        for bucket, replicas in assignment.items():
            s = state(bucket)
            if replicas[0] == victim:
                assert (s["leader"], s["leader_epoch"]) == (replicas[1], 1)
            else:
                assert (s["leader"], s["leader_epoch"]) == (replicas[0], 0)
            assert s["isr"] == [r for r in replicas if r != victim] and s["bucket_epoch"] == 1

        cluster.kill(leader)
        successor = cluster.wait_for_leader(SESSION_TIMEOUT_S + 15, exclude=[leader])
        channel, stub = _coordinator(cluster, successor)
        with channel:

            def reloaded() -> bool:
                response = stub.GetMetadata(
                    common_pb2.MetadataRequest(tables=[common_pb2.TablePath(database="fluss", table="events")]),
                    timeout=3,
                )
                return response.error.code == 0 and len(response.metadata.tables) == 1

            cluster.wait_until(reloaded, 15, "the new coordinator serves the table")
            (table,) = stub.GetMetadata(common_pb2.MetadataRequest(), timeout=3).metadata.tables
            for b in table.buckets:
                s = state(b.table_bucket.bucket)
                assert (b.leader, b.leader_epoch, list(b.isr)) == (s["leader"], s["leader_epoch"], s["isr"])
                assert list(b.replicas) == list(assignment[b.table_bucket.bucket])
            writer = stub.AllocateWriterId(coordinator_pb2.AllocateWriterIdRequest(), timeout=3)
            # the old leader's block (1..1000) is never reused: the new leader reserves the next one
            assert (writer.error.code, writer.writer_id) == (ErrorCode.NONE, 1001)


def test_a_table_dropped_while_a_server_was_down_is_set_aside_on_its_return(cluster_factory):
    """tablet/strays.py: the returning server sets aside (renames ``...-stray``) the logs of tables that were
    dropped meanwhile (found from the coordinator's full UpdateMetadata), once a newer table exists; other
    logs are kept."""
    cluster = cluster_factory(coordinators=1, tablet_servers=3)
    cluster.wait_for_leader(15)
    servers = cluster.names("tablet-server")
    bootstrap = ",".join(cluster.get(n).rpc_address for n in servers)
    victim = "tablet-server-3"
    data = Path(cluster.get(victim).data_dir)

    def on_victim(table_id: int, buckets: int) -> list[bool]:
        return [(data / bucket_dir_name(TableBucket(table_id, b))).is_dir() for b in range(buckets)]

    with SyncAdmin(bootstrap, request_timeout=10.0) as admin:
        kept = admin.create_table("fluss.kept", num_buckets=1, replication_factor=3)
        dropped = admin.create_table("fluss.dropped", num_buckets=2, replication_factor=3)
        with SyncProducer(bootstrap, ProducerOptions(acks=-1, request_timeout=10.0)) as producer:
            for table, bucket in (("fluss.kept", 0), ("fluss.dropped", 0), ("fluss.dropped", 1)):
                producer.send_and_wait(table, b"v", bucket=bucket)  # a log's directory comes with its first write
        cluster.wait_until(lambda: all(on_victim(kept, 1) + on_victim(dropped, 2)), 15, "replicas on the victim")
        cluster.kill(victim)
        admin.drop_table("fluss.dropped")  # StopReplica(delete) reaches the two live servers only
        newer = admin.create_table("fluss.newer", num_buckets=1, replication_factor=2)
        assert newer > dropped
        cluster.start_process(victim, wait=True, timeout=30)
        cluster.wait_until(lambda: not any(on_victim(dropped, 2)), 20, "the dropped table's logs set aside")
        assert sorted(p.name for p in data.glob("*-stray")) == [f"{dropped}-0-stray", f"{dropped}-1-stray"]
        assert on_victim(kept, 1) == [True]
        for name in servers[:2]:  # the live servers deleted theirs at the drop
            live = Path(cluster.get(name).data_dir)
            assert not any((live / bucket_dir_name(TableBucket(dropped, b))).exists() for b in range(2))
