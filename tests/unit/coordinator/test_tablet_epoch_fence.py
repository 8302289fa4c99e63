"""Tablet servers keep the highest coordinator epoch seen and refuse requests from older coordinators."""

import pytest

from fluss_py.errors import ErrorCode, InvalidCoordinatorEpochError
from fluss_py.rpc.pb import common_pb2, tablet_pb2
from fluss_py.tablet.service import CoordinatorEpochFence, TabletServicer, UnimplementedReplicaLayer


def test_lower_rejected_equal_accepted_higher_adopted():
    fence = CoordinatorEpochFence()
    fence.observe(3)
    fence.check(3, 1, "UpdateMetadata")
    with pytest.raises(InvalidCoordinatorEpochError):
        fence.check(2, 1, "UpdateMetadata")
    fence.check(5, 2, "NotifyLeaderAndIsr")
    assert fence.highest == 5
    fence.observe(4)  # an older leader node seen late does not lower it
    assert fence.highest == 5


async def test_servicer_fences_every_control_request():
    fence = CoordinatorEpochFence()
    fence.observe(7)
    svc = TabletServicer(fence, UnimplementedReplicaLayer())
    old = dict(coordinator_epoch=6, coordinator_id=1)
    r1 = await svc.UpdateMetadata(tablet_pb2.UpdateMetadataRequest(**old, metadata=common_pb2.ClusterMetadata()), None)
    r2 = await svc.NotifyLeaderAndIsr(tablet_pb2.NotifyLeaderAndIsrRequest(**old), None)
    r3 = await svc.StopReplica(tablet_pb2.StopReplicaRequest(**old), None)
    assert {r.error.code for r in (r1, r2, r3)} == {ErrorCode.INVALID_COORDINATOR_EPOCH}
    md = common_pb2.ClusterMetadata(coordinator_epoch=7, tablet_servers=[common_pb2.ServerNode(id=1)])
    ok = await svc.UpdateMetadata(
        tablet_pb2.UpdateMetadataRequest(coordinator_epoch=7, coordinator_id=2, metadata=md), None
    )
    assert ok.error.code == ErrorCode.NONE
    got = await svc.GetMetadata(common_pb2.MetadataRequest(), None)
    assert got.metadata.coordinator_epoch == 7 and [s.id for s in got.metadata.tablet_servers] == [1]
    produce = await svc.ProduceLog(tablet_pb2.ProduceLogRequest(), None)
    assert produce.error.code == ErrorCode.INVALID_REQUEST
