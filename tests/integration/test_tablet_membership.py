"""Tablet-server membership on real processes: registration, duplicate ids, session expiry, epoch fencing."""

from __future__ import annotations

import re
import subprocess
import sys
import time

import grpc
import pytest

from fluss_py.errors import ErrorCode
from fluss_py.rpc.pb import common_pb2, tablet_pb2, tablet_pb2_grpc
from fluss_py.testing.faults import pause, resume
from fluss_py.testing.fixtures import SESSION_TIMEOUT_S
from fluss_py.testing.ports import free_port
from fluss_py.testing.zkview import ZkView
from fluss_py.zk.paths import TabletServerZNode

pytestmark = pytest.mark.integration


def _update_metadata(cluster, tablet: str, epoch: int, coordinator_id: int) -> int:
    request = tablet_pb2.UpdateMetadataRequest(
        coordinator_epoch=epoch, coordinator_id=coordinator_id, metadata=common_pb2.ClusterMetadata()
    )
    with grpc.insecure_channel(cluster.get(tablet).rpc_address) as channel:
        return tablet_pb2_grpc.TabletServiceStub(channel).UpdateMetadata(request, timeout=3).error.code


def test_a_second_live_server_with_the_same_id_refuses_to_start(cluster_factory):
    cluster = cluster_factory(coordinators=0, tablet_servers=1)
    first = cluster.get("tablet-server-1")
    argv = list(first.argv)
    for i, arg in enumerate(argv):  # same id and ZooKeeper, its own ports and log dir
        if arg.startswith("rpc.port="):
            argv[i] = f"rpc.port={free_port()}"
        elif arg.startswith("http.port="):
            argv[i] = f"http.port={free_port()}"
        elif arg.startswith("log.dir="):
            argv[i] = f"log.dir={cluster.directory / 'duplicate'}"
        elif arg.startswith("data.dir="):  # its own (a shared one is refused earlier: test_disk_faults.py)
            argv[i] = f"data.dir={cluster.directory / 'duplicate-data'}"
    t0 = time.monotonic()
    result = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert result.returncode == 1, result.stderr
    assert "tablet server id 1 is already registered by a live server" in result.stderr
    assert f"at {first.rpc_address}" in result.stderr
    assert time.monotonic() - t0 < 10  # refused at once: the first server answers on its address
    assert cluster.health("tablet-server-1")["registered"] is True


def test_registration_comes_back_after_session_expiry_and_the_leader_sees_both(cluster_factory):
    cluster = cluster_factory(coordinators=1, tablet_servers=1)
    leader = cluster.wait_for_leader(15)
    cluster.wait_for_log(leader, r"Tablet server 1 joined at 127\.0\.0\.1:\d+", 10)
    path = TabletServerZNode.path(cluster.zk_root, 1)
    with ZkView(cluster.zookeeper_address) as zk:
        owner = zk.ephemeral_owner(path)
        assert zk.get_json(path)["port"] == cluster.get("tablet-server-1").rpc_port
        pause(cluster, "tablet-server-1")  # silent past its session timeout: ZooKeeper expires the session
        try:
            cluster.wait_until(lambda: not zk.exists(path), SESSION_TIMEOUT_S + 3, message="the ids node expiring")
            cluster.wait_for_log(leader, r"Tablet server 1 at \S+ died", 5)
        finally:
            resume(cluster, "tablet-server-1")
        cluster.wait_until(lambda: zk.exists(path), 10, message="tablet server 1 registering again")
        assert zk.ephemeral_owner(path) not in (None, owner)
        cluster.wait_for_log("tablet-server-1", r"New ZooKeeper session 0x[0-9a-f]+: registering tablet server 1", 5)
        cluster.wait_until(lambda: cluster.health("tablet-server-1")["registered"], 5)
        cluster.wait_until(  # joined twice: at start and after re-registering
            lambda: cluster.log_text(leader).count("Tablet server 1 joined") == 2, 5, message="the second join logged"
        )


def test_tablet_servers_follow_the_leader_epoch_and_reject_older_ones(cluster_factory):
    """Epochs come from ZooKeeper only; a request without the leader's token is refused even at the current
    epoch (docs/peer-trust.md), and the servers still follow the real leaders (their first UpdateMetadata
    is answered: the coordinator logs no refusal it could not get past)."""
    cluster = cluster_factory(coordinators=2, tablet_servers=1)
    old = cluster.wait_for_leader(15)
    old_epoch, old_id = cluster.health(old)["coordinator_epoch"], cluster.get(old).id
    cluster.wait_until(lambda: cluster.health("tablet-server-1")["coordinator_epoch"] == old_epoch, 10)
    assert _update_metadata(cluster, "tablet-server-1", old_epoch, old_id) == ErrorCode.COORDINATOR_NOT_AUTHENTICATED

    cluster.kill(old)
    new = cluster.wait_for_leader(SESSION_TIMEOUT_S + 5, exclude=[old])
    new_epoch = cluster.health(new)["coordinator_epoch"]
    assert new_epoch == old_epoch + 1
    cluster.wait_until(lambda: cluster.health("tablet-server-1")["coordinator_epoch"] == new_epoch, 10)
    assert _update_metadata(cluster, "tablet-server-1", old_epoch, old_id) == ErrorCode.INVALID_COORDINATOR_EPOCH
    assert _update_metadata(cluster, "tablet-server-1", new_epoch, cluster.get(new).id) == (
        ErrorCode.COORDINATOR_NOT_AUTHENTICATED  # the right epoch and id, but not the leader's token
    )
    # higher than ZooKeeper's: refused and not adopted (it was, and the real leader was refused until a restart)
    assert _update_metadata(cluster, "tablet-server-1", new_epoch + 1, 77) == ErrorCode.COORDINATOR_NOT_AUTHENTICATED
    assert cluster.health("tablet-server-1")["coordinator_epoch"] == new_epoch
    cluster.wait_for_log(new, r"Tablet server 1 joined", 10)
    assert not re.search(r"UpdateMetadata to tablet server 1 .*refused", cluster.log_text(new))


def test_tablet_server_unknown_key_exits_2():
    cmd = [sys.executable, "-m", "fluss_py.cli.main", "tablet-server", "-D", "coordinator.id=1"]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    assert result.returncode == 2 and "coordinator.id" in result.stderr
