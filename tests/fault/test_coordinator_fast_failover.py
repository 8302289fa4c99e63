"""Coordinator failover without waiting for the ZooKeeper session (docs/coordinator-ha.md "Fast failover").

With a 15 s session on a ZooKeeper that allows it:
- kill -9 of the leader: the next candidate proves it dead (connection broke, ports refuse) and serves while
  the dead leader's session still exists (its ``coordinator/servers`` node is still there);
- kill -9 of the leader and of the next candidate at once: the third proves both dead in turn and serves
  while both sessions still exist; a tablet server then refuses the dead leader's epoch.
The slow path (SIGSTOP: no proof, failover only by session expiry, the zombie's writes fenced after SIGCONT)
is ``test_coordinator_failover.py::test_zombie_leader_steps_down_without_writing_and_its_epoch_is_fenced``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fluss_py.testing.cluster import LocalCluster
from fluss_py.testing.faults import kill9
from fluss_py.testing.fixtures import TEST_OVERRIDES
from fluss_py.testing.zkview import ZkView
from fluss_py.testing.zookeeper import ZooKeeperProcess

pytestmark = pytest.mark.fault

SESSION_S = 15.0
PROOF_LINE = r"Coordinator \d+ at \S+ is dead: its connection broke"


@pytest.fixture
def cluster(long_session_zookeeper: ZooKeeperProcess, tmp_path: Path, zk_root: str) -> Iterator[LocalCluster]:
    cluster = LocalCluster(
        tmp_path / "cluster",
        3,
        1,
        zookeeper=long_session_zookeeper.address,
        zk_root=zk_root,
        overrides={**TEST_OVERRIDES, "zookeeper.session-timeout": f"{SESSION_S:g}s"},
        die_with_parent=True,
    )
    try:
        cluster.start(timeout=60)
        yield cluster
    finally:
        cluster.close(grace=3.0)


def _election_order(cluster: LocalCluster, zk: ZkView) -> list[str]:
    """Coordinator names by candidate sequence (the leader first)."""
    parent = f"{cluster.zk_root}/coordinator/election"
    by_id = {cluster.get(n).id: n for n in cluster.names("coordinator")}
    return [by_id[zk.get_int(f"{parent}/{c}")] for c in sorted(zk.children(parent), key=lambda c: c[-10:])]


def test_kill9_of_the_leader_fails_over_before_its_session_expires(cluster):
    leader = cluster.wait_for_leader(15)
    epoch = cluster.health(leader)["coordinator_epoch"]
    dead_id = cluster.get(leader).id
    with ZkView(cluster.zookeeper_address) as zk:
        cluster.wait_until(lambda: len(zk.children(f"{cluster.zk_root}/coordinator/election")) == 3, 15)
        successor = _election_order(cluster, zk)[1]
        kill9(cluster, leader)
        # the deadline is the session timeout: waiting for the session would miss it
        new = cluster.wait_for_leader(SESSION_S - 3, exclude=[leader])
        assert dead_id in zk.registered_coordinators(cluster.zk_root), "the dead leader's session had already expired"
        assert new == successor
        assert cluster.health(new)["coordinator_epoch"] == epoch + 1
        cluster.wait_for_log(new, PROOF_LINE, 5)
        leader_node = zk.get_json(f"{cluster.zk_root}/coordinator/leader")
        assert (leader_node["server_id"], leader_node["epoch"]) == (cluster.get(new).id, epoch + 1)


def test_kill9_of_the_leader_and_the_next_candidate_at_once(cluster):
    cluster.wait_for_leader(15)
    with ZkView(cluster.zookeeper_address) as zk:
        cluster.wait_until(lambda: len(zk.children(f"{cluster.zk_root}/coordinator/election")) == 3, 15)
        leader, second, third = _election_order(cluster, zk)
        epoch = cluster.health(leader)["coordinator_epoch"]
        dead = {cluster.get(leader).id, cluster.get(second).id}
        kill9(cluster, second)
        kill9(cluster, leader)
        new = cluster.wait_for_leader(SESSION_S - 3, exclude=[leader, second])
        assert dead <= zk.registered_coordinators(cluster.zk_root), "a dead coordinator's session had already expired"
        assert new == third
        assert cluster.health(new)["coordinator_epoch"] == epoch + 1
        assert len(cluster.wait_for_log(new, PROOF_LINE, 5).re.findall(cluster.log_text(new))) == 2
        # the tablet server follows the new leader: it adopted its epoch
        cluster.wait_until(
            lambda: (cluster.health("tablet-server-1") or {}).get("coordinator_epoch") == epoch + 1, 10,
            message="the tablet server on the new coordinator epoch",
        )  # fmt: skip
