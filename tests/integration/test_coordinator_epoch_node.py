"""The coordinator epoch node against a real ZooKeeper: a value that is not a non-negative integer is refused,
and a deleted node never restarts epochs (nor fencing tokens) below what the stored metadata names."""

from __future__ import annotations

import pytest

from fluss_py.tablet.coordinator_fence import CoordinatorFence, ZkCoordinatorRecords
from fluss_py.testing.fixtures import SESSION_TIMEOUT_S
from fluss_py.types import CoordinatorLeaderInfo, LeaderAndIsr
from fluss_py.zk.client import ZkClient
from fluss_py.zk.election import LeaderElection, fence_become_leader
from fluss_py.zk.epoch_node import InvalidEpochNodeError
from fluss_py.zk.paths import CandidateZNode, CoordinatorEpochZNode, LeaderIsrZNode
from fluss_py.zk.values import CreateOp, EpochFencedError

pytestmark = pytest.mark.integration


@pytest.fixture
async def zk(zookeeper, zk_root):
    client = ZkClient(zookeeper.address, zk_root, session_timeout=SESSION_TIMEOUT_S, connection_timeout=10)
    await client.start()
    await client.ensure_path(CandidateZNode.parent(zk_root))
    yield client
    await client.close()


async def _lead(zk: ZkClient, root: str, server_id: int = 1):
    election = LeaderElection(zk, root, server_id, lambda: None)
    assert (await election.check()).leader
    return await fence_become_leader(zk, root, election.candidate_path), election


async def _store_leader_isr(zk: ZkClient, root: str, coordinator_epoch: int) -> None:
    lai = LeaderAndIsr(1, 0, (1,), coordinator_epoch, 0)
    await zk.create(LeaderIsrZNode.path(root, 7, 0), LeaderIsrZNode.encode(lai), makepath=True)


@pytest.mark.parametrize("value", [b"-5", b"five"])
async def test_an_epoch_node_without_a_non_negative_integer_is_refused_and_left_alone(zk, zk_root, value):
    path = CoordinatorEpochZNode.path(zk_root)
    await zk.create(path, value)
    with pytest.raises(InvalidEpochNodeError, match=path):
        await _lead(zk, zk_root)
    data, stat = await zk.get(path)
    assert (data, stat.version) == (value, 0)


async def test_a_brand_new_cluster_starts_at_epoch_one(zk, zk_root):
    fence, _ = await _lead(zk, zk_root)
    assert (fence.epoch, fence.zk_version) == (1, 1)


async def test_a_deleted_epoch_node_restarts_above_the_stored_epochs_and_tablet_servers_accept_it(zk, zk_root):
    await zk.create(CoordinatorEpochZNode.path(zk_root), b"3")  # three terms so far
    old, election = await _lead(zk, zk_root)
    assert (old.epoch, old.zk_version) == (4, 4)  # the version is padded to the epoch
    await _store_leader_isr(zk, zk_root, old.epoch)
    tablet = CoordinatorFence(ZkCoordinatorRecords(zk))
    tablet.observe_leader(CoordinatorLeaderInfo(1, 4, "127.0.0.1", 9123, token="old"))
    await election.resign()
    tablet.observe_leader(None)
    await zk.delete(CoordinatorEpochZNode.path(zk_root))  # an operator's mistake
    new, _ = await _lead(zk, zk_root, server_id=2)
    assert (new.epoch, new.zk_version) == (5, 5)
    tablet.observe_leader(CoordinatorLeaderInfo(2, new.epoch, "127.0.0.1", 9124, token="new"))
    await tablet.check(new.epoch, 2, "new", "NotifyLeaderAndIsr")  # accepted: above what it saw


async def test_an_old_terms_fence_never_passes_after_the_epoch_node_was_re_created(zk, zk_root):
    old, election = await _lead(zk, zk_root)
    await _store_leader_isr(zk, zk_root, old.epoch)
    await election.resign()
    await zk.delete(CoordinatorEpochZNode.path(zk_root))
    new, _ = await _lead(zk, zk_root)
    assert new.zk_version != old.zk_version and new.epoch > old.epoch
    with pytest.raises(EpochFencedError):
        await zk.commit([CreateOp(f"{zk_root}/written-by-the-old-leader")], fence=old)
