"""A tablet server obeys only the current coordinator leader (docs/peer-trust.md invariants 2 and 3): a higher
epoch is adopted only from ZooKeeper, and every control request must present the leader node's token."""

from __future__ import annotations

import asyncio

import pytest

from fluss_py.errors import ErrorCode
from fluss_py.rpc.pb import common_pb2, tablet_pb2
from fluss_py.rpc.peer import COORDINATOR_TOKEN_KEY, REPLICA_TOKEN_KEY, TokenReplicaVerifier
from fluss_py.tablet import coordinator_fence as cf
from fluss_py.tablet.coordinator_fence import CoordinatorFence, CoordinatorRefused
from fluss_py.tablet.service import TabletServicer
from fluss_py.types import CoordinatorLeaderInfo
from tests.unit.tablet.fake_replica_layer import MetadataOnlyReplicaLayer


class FakeRecords:
    """What ZooKeeper holds: the epoch node and the leader node; counts reads."""

    def __init__(self, epoch: int, leader: CoordinatorLeaderInfo | None) -> None:
        self.epoch_value, self.leader_value = epoch, leader
        self.reads = 0
        self.fail = False
        self.gate: asyncio.Event | None = None

    async def epoch(self) -> int:
        self.reads += 1
        if self.gate is not None:
            await self.gate.wait()
        if self.fail:
            raise ConnectionError("ZooKeeper unreachable")
        return self.epoch_value

    async def leader(self) -> CoordinatorLeaderInfo | None:
        return self.leader_value


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def leader(epoch: int, token: str, server_id: int = 1) -> CoordinatorLeaderInfo:
    return CoordinatorLeaderInfo(server_id, epoch, "127.0.0.1", 9123, token=token)


def fence_at(epoch: int, token: str) -> tuple[CoordinatorFence, FakeRecords, Clock]:
    records, clock = FakeRecords(epoch, leader(epoch, token)), Clock()
    fence = CoordinatorFence(records, clock=clock)
    fence.observe_leader(leader(epoch, token))
    return fence, records, clock


async def refused(fence: CoordinatorFence, epoch: int, cid: int, token: str) -> str:
    with pytest.raises(CoordinatorRefused) as info:
        await fence.check(epoch, cid, token, "UpdateMetadata")
    return info.value.kind


async def test_a_forged_higher_epoch_is_refused_and_costs_at_most_one_read_per_interval():
    fence, records, _clock = fence_at(3, "t3")
    assert await refused(fence, 2**31 - 1, 77, "") == cf.UNCONFIRMED
    assert fence.highest == 3 and records.reads == 1
    for _ in range(100):  # a flood within the interval reads ZooKeeper no more
        assert await refused(fence, 2**31 - 1, 77, "") == cf.UNCONFIRMED
    assert records.reads == 1
    await fence.check(3, 1, "t3", "UpdateMetadata")  # the real leader is still obeyed
    assert fence.highest == 3


async def test_a_new_epoch_is_adopted_after_one_read_of_zookeeper_and_older_ones_are_stale():
    fence, records, _clock = fence_at(3, "t3")
    records.epoch_value, records.leader_value = 4, leader(4, "t4", server_id=2)
    await fence.check(4, 2, "t4", "NotifyLeaderAndIsr")  # before the leader watch fired: one read confirms it
    assert fence.highest == 4 and records.reads == 1
    await fence.check(4, 2, "t4", "StopReplica")
    assert records.reads == 1  # one read per change
    assert await refused(fence, 3, 1, "t3") == cf.STALE


async def test_a_request_above_zookeepers_epoch_is_refused_even_when_zookeeper_moved_on():
    fence, records, _clock = fence_at(3, "t3")
    records.epoch_value, records.leader_value = 5, leader(5, "t5", server_id=2)
    assert await refused(fence, 6, 2, "t5") == cf.UNCONFIRMED
    assert fence.highest == 5  # ZooKeeper's word adopted, the request's not
    assert await refused(fence, 4, 2, "t5") == cf.STALE


async def test_the_current_epoch_needs_the_current_leaders_id_and_token():
    fence, _records, _clock = fence_at(3, "t3")
    assert await refused(fence, 3, 1, "") == cf.NOT_LEADER  # read the epoch off /health, no token
    assert await refused(fence, 3, 1, "guess") == cf.NOT_LEADER
    assert await refused(fence, 3, 2, "t3") == cf.NOT_LEADER  # the token, but another coordinator id
    await fence.check(3, 1, "t3", "StopReplica")


async def test_an_empty_token_in_the_leader_node_matches_nothing():
    fence, _records, _clock = fence_at(3, "")
    assert await refused(fence, 3, 1, "") == cf.NOT_LEADER


async def test_a_vanished_leader_node_refuses_its_zombie_and_a_new_node_is_read_once():
    fence, records, clock = fence_at(3, "t3")
    fence.observe_leader(None)
    records.leader_value = None
    assert await refused(fence, 3, 1, "t3") == cf.NOT_LEADER
    clock.now += 1
    records.leader_value = leader(3, "t3")  # (a new term would have a new epoch; this only shows the re-read)
    await fence.check(3, 1, "t3", "UpdateMetadata")
    assert records.reads == 2


async def test_concurrent_requests_share_one_read_and_a_failed_read_confirms_nothing():
    fence, records, clock = fence_at(3, "t3")
    records.epoch_value, records.leader_value = 4, leader(4, "t4")
    records.gate = asyncio.Event()
    checks = [asyncio.ensure_future(fence.check(4, 1, "t4", "UpdateMetadata")) for _ in range(5)]
    await asyncio.sleep(0)
    records.gate.set()
    await asyncio.gather(*checks)
    assert records.reads == 1 and fence.highest == 4
    records.gate, records.fail, records.epoch_value = None, True, 5
    clock.now += 1
    assert await refused(fence, 5, 1, "t5") == cf.UNCONFIRMED
    assert fence.highest == 4


class Context:
    """The parts of a grpc.aio ServicerContext the service reads."""

    def __init__(self, uris: tuple[str, ...] = (), **metadata: str) -> None:
        self._metadata = tuple(metadata.items())
        self._auth = {"peer_uri": [u.encode() for u in uris]} if uris else {}

    def invocation_metadata(self):
        return self._metadata

    def auth_context(self):
        return self._auth

    def peer(self) -> str:
        return "ipv4:127.0.0.1:5555"


def coordinator(token: str) -> Context:
    return Context(**{COORDINATOR_TOKEN_KEY: token})


async def test_servicer_checks_every_control_request_and_counts_refusals():
    fence, _, _ = fence_at(7, "t7")
    svc = TabletServicer(fence, MetadataOnlyReplicaLayer(), TokenReplicaVerifier(1))
    md = common_pb2.ClusterMetadata(coordinator_epoch=7, tablet_servers=[common_pb2.ServerNode(id=1)])
    old = dict(coordinator_epoch=6, coordinator_id=1)
    r1 = await svc.UpdateMetadata(tablet_pb2.UpdateMetadataRequest(**old, metadata=md), coordinator("t7"))
    r2 = await svc.NotifyLeaderAndIsr(tablet_pb2.NotifyLeaderAndIsrRequest(**old), coordinator("t7"))
    r3 = await svc.StopReplica(tablet_pb2.StopReplicaRequest(**old), coordinator("t7"))
    assert {r.error.code for r in (r1, r2, r3)} == {ErrorCode.INVALID_COORDINATOR_EPOCH}
    now = dict(coordinator_epoch=7, coordinator_id=1)
    stop = tablet_pb2.StopReplicaRequest(**now, buckets=[tablet_pb2.StopReplicaBucket(delete=True)])
    assert (await svc.StopReplica(stop, Context())).error.code == ErrorCode.COORDINATOR_NOT_AUTHENTICATED
    assert (await svc.StopReplica(stop, None)).error.code == ErrorCode.COORDINATOR_NOT_AUTHENTICATED
    assert svc.refusals.counts == {cf.STALE: 3, cf.NOT_LEADER: 2}
    ok = await svc.UpdateMetadata(tablet_pb2.UpdateMetadataRequest(**now, metadata=md), coordinator("t7"))
    assert ok.error.code == ErrorCode.NONE
    got = await svc.GetMetadata(common_pb2.MetadataRequest(), None)
    assert got.metadata.coordinator_epoch == 7 and [s.id for s in got.metadata.tablet_servers] == [1]


async def test_with_mutual_tls_a_control_request_needs_the_claimed_coordinators_certificate():
    fence, _, _ = fence_at(7, "t7")
    svc = TabletServicer(fence, MetadataOnlyReplicaLayer(), TokenReplicaVerifier(1), coordinator_certificates=True)
    now = dict(coordinator_epoch=7, coordinator_id=1)
    stop = tablet_pb2.StopReplicaRequest(**now, buckets=[tablet_pb2.StopReplicaBucket(delete=True)])
    for uris in ((), ("fluss://tablet-server/1",), ("fluss://coordinator/2",)):  # the right token every time
        answer = await svc.StopReplica(stop, Context(uris, **{COORDINATOR_TOKEN_KEY: "t7"}))
        assert answer.error.code == ErrorCode.COORDINATOR_NOT_AUTHENTICATED, uris
        assert "peer certificate" in answer.error.message
    assert svc.refusals.counts == {cf.NOT_LEADER: 3}
    wrong_token = await svc.StopReplica(stop, Context(("fluss://coordinator/1",), **{COORDINATOR_TOKEN_KEY: "t6"}))
    assert wrong_token.error.code == ErrorCode.COORDINATOR_NOT_AUTHENTICATED  # the token still counts
    md = common_pb2.ClusterMetadata(coordinator_epoch=7)
    update = tablet_pb2.UpdateMetadataRequest(**now, metadata=md)
    ok = await svc.UpdateMetadata(update, Context(("fluss://coordinator/1",), **{COORDINATOR_TOKEN_KEY: "t7"}))
    assert ok.error.code == ErrorCode.NONE


def fetch(replica_id: int) -> tablet_pb2.FetchLogRequest:
    return tablet_pb2.FetchLogRequest(replica_id=replica_id, buckets=[tablet_pb2.FetchBucket()])


async def test_servicer_serves_a_follower_fetch_only_to_the_server_holding_its_token():
    fence, _, _ = fence_at(7, "t7")
    svc = TabletServicer(fence, MetadataOnlyReplicaLayer(), TokenReplicaVerifier(1))
    tokens = [tablet_pb2.ReplicaToken(server_id=s, token=f"secret-{s}") for s in (1, 2, 3)]
    update = tablet_pb2.UpdateMetadataRequest(
        coordinator_epoch=7, coordinator_id=1, metadata=common_pb2.ClusterMetadata(), replica_tokens=tokens
    )
    assert (await svc.UpdateMetadata(update, coordinator("t7"))).error.code == ErrorCode.NONE
    not_authenticated = [
        (2, Context()),  # no token
        (2, Context(**{REPLICA_TOKEN_KEY: "secret-3"})),  # another server's token
        (99, Context(**{REPLICA_TOKEN_KEY: "secret-2"})),  # no such server
        (1, Context(**{REPLICA_TOKEN_KEY: "secret-1"})),  # the leader itself
    ]
    for claimed, context in not_authenticated:
        answer = await svc.FetchLog(fetch(claimed), context)
        assert answer.error.code == ErrorCode.REPLICA_NOT_AUTHENTICATED, claimed
    assert svc.refusals.counts == {"replica_not_authenticated": 4}
    assert (await svc.FetchLog(fetch(-7), Context())).error.code == ErrorCode.INVALID_REQUEST
    # proven: passed on to the replica layer (this fake refuses everything); clients need no token
    passed = await svc.FetchLog(fetch(2), Context(**{REPLICA_TOKEN_KEY: "secret-2"}))
    assert passed.error.code == ErrorCode.INVALID_REQUEST and "fake replica layer" in passed.error.message
    client = await svc.FetchLog(fetch(-1), Context())
    assert client.error.code == ErrorCode.INVALID_REQUEST and "fake replica layer" in client.error.message
