"""Coordinator failover on real processes: a kill -9 chain down to one coordinator, and a zombie leader
(SIGSTOP past its session, SIGCONT after a new leader exists) that is replaced only by session expiry (a
stopped process proves nothing) and must step down without writing to ZooKeeper, while tablet servers
reject requests stamped with its old epoch."""

import re

import grpc
import pytest

from fluss_py.errors import ErrorCode
from fluss_py.rpc.pb import common_pb2, tablet_pb2, tablet_pb2_grpc
from fluss_py.testing.faults import kill9, pause, resume
from fluss_py.testing.fixtures import SESSION_TIMEOUT_S
from fluss_py.testing.zkview import ZkView

pytestmark = pytest.mark.fault

FAILOVER_BUDGET_S = SESSION_TIMEOUT_S + 2.0  # acceptance: a new leader within session timeout + 2 s


def _leader_node(cluster, zk):
    return zk.get_json(f"{cluster.zk_root}/coordinator/leader")


def test_kill9_of_the_leader_elects_the_next_with_epoch_plus_one_until_one_is_left(cluster_factory):
    cluster = cluster_factory(coordinators=3, tablet_servers=0)
    leader = cluster.wait_for_leader(15)
    epoch = cluster.health(leader)["coordinator_epoch"]
    killed = []
    with ZkView(cluster.zookeeper_address) as zk:
        while len(killed) < 2:
            kill9(cluster, leader)
            killed.append(leader)
            new = cluster.wait_for_leader(FAILOVER_BUDGET_S, exclude=killed)
            new_epoch = cluster.health(new)["coordinator_epoch"]
            assert new_epoch == epoch + 1, f"{new} took over with epoch {new_epoch}, expected {epoch + 1}"
            cluster.wait_until(
                lambda n=new, e=new_epoch: (_leader_node(cluster, zk) or {}).get("server_id") == cluster.get(n).id
                and _leader_node(cluster, zk)["epoch"] == e,
                5, message="the leader znode naming the new leader and epoch",
            )  # fmt: skip
            assert zk.get_int(f"{cluster.zk_root}/coordinator/epoch") == new_epoch
            leader, epoch = new, new_epoch
    survivors = [n for n in cluster.names("coordinator") if cluster.alive(n)]
    assert survivors == [leader]


def _update_metadata(cluster, tablet: str, epoch: int, coordinator_id: int) -> int:
    req = tablet_pb2.UpdateMetadataRequest(
        coordinator_epoch=epoch, coordinator_id=coordinator_id, metadata=common_pb2.ClusterMetadata()
    )
    with grpc.insecure_channel(cluster.get(tablet).rpc_address) as ch:
        return tablet_pb2_grpc.TabletServiceStub(ch).UpdateMetadata(req, timeout=3).error.code


def test_zombie_leader_steps_down_without_writing_and_its_epoch_is_fenced(cluster_factory):
    cluster = cluster_factory(coordinators=3, tablet_servers=1)
    old = cluster.wait_for_leader(15)
    old_id, old_epoch = cluster.get(old).id, cluster.health(old)["coordinator_epoch"]
    root = cluster.zk_root
    with ZkView(cluster.zookeeper_address) as zk:
        pause(cluster, old)
        new = cluster.wait_for_leader(FAILOVER_BUDGET_S + 1, exclude=[old])
        new_epoch = cluster.health(new)["coordinator_epoch"]
        assert new_epoch == old_epoch + 1
        # slow path only: a stopped process proves nothing, so the new leader won by the zombie's session
        # expiring (its coordinator/servers node is gone with it), not by a proof of death
        assert old_id not in zk.registered_coordinators(root)
        assert not re.search(r"is dead: its connection broke", cluster.log_text(new))
        cluster.wait_until(lambda: (_leader_node(cluster, zk) or {}).get("epoch") == new_epoch, 5)
        epoch_stat = zk.client.exists(f"{root}/coordinator/epoch")
        leader_stat = zk.client.exists(f"{root}/coordinator/leader")
        log_before = cluster.log_text(old)

        resume(cluster, old)
        cluster.wait_until(
            lambda: (cluster.health(old) or {}).get("state") == "Standby", 15, message="the zombie back in Standby"
        )
        assert cluster.coordinator_leader() == new
        cluster.wait_until(lambda: cluster.health(old)["leader_id"] == cluster.get(new).id, 10)
        # No ZooKeeper write by the zombie: the fenced nodes are exactly as the new leader left them.
        after_epoch = zk.client.exists(f"{root}/coordinator/epoch")
        after_leader = zk.client.exists(f"{root}/coordinator/leader")
        assert (after_epoch.version, after_epoch.mzxid) == (epoch_stat.version, epoch_stat.mzxid)
        assert (after_leader.mzxid, after_leader.ephemeralOwner) == (leader_stat.mzxid, leader_stat.ephemeralOwner)
        assert zk.get_int(f"{root}/coordinator/epoch") == new_epoch
        # It rejoined the election as a candidate again.
        cluster.wait_until(lambda: len(zk.children(f"{root}/coordinator/election")) == 3, 10)
        new_log = cluster.log_text(old)[len(log_before) :]
        assert not re.search(r"(?i)became (coordinator )?leader", new_log), new_log
        # It tore its leader resources down, in the reverse order of their start.
        started = re.findall(r"Started leader resource \d+: ([\w-]+)", log_before)
        stopped = re.findall(r"Stopped leader resource: ([\w-]+)", new_log)
        assert started and stopped == started[::-1], (started, stopped)

    # A tablet server rejects a request stamped with the zombie's epoch.
    def rejected() -> bool:
        return _update_metadata(cluster, "tablet-server-1", old_epoch, old_id) == ErrorCode.INVALID_COORDINATOR_EPOCH

    cluster.wait_until(rejected, 10, message="UpdateMetadata with the old epoch rejected (code 13)")
