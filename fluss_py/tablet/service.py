"""gRPC servicer of ``TabletService``: coordinator-epoch fencing, then delegation to the replica layer.

Control requests from the coordinator leader (NotifyLeaderAndIsr, StopReplica, UpdateMetadata) carry
``coordinator_epoch``. ``CoordinatorEpochFence`` keeps the highest epoch this server has seen (from those
requests and from the ``coordinator/leader`` node): a lower epoch is rejected with
INVALID_COORDINATOR_EPOCH, a higher one is adopted, an equal one accepted.

Everything else is the replica layer's job, plugged in through the narrow ``ReplicaLayer`` Protocol
(one coroutine per RPC, request in, response out). The server plugs in ``tablet/replica_layer.py``'s
``ManagerReplicaLayer``; ``UnimplementedReplicaLayer`` remains for fencing tests: data path methods answer
INVALID_REQUEST "not implemented yet"; UpdateMetadata is kept and served back by GetMetadata.

Who may call: grpc.aio on the process's loop; ``ReplicaLayer`` methods are called from that loop only.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

import grpc.aio

from fluss_py.errors import ErrorCode, InvalidCoordinatorEpochError
from fluss_py.rpc import convert
from fluss_py.rpc.pb import common_pb2, tablet_pb2, tablet_pb2_grpc

log = logging.getLogger("fluss_py.tablet.TabletService")


class CoordinatorEpochFence:
    """The highest coordinator epoch seen. Pure state, owned by the tablet server; loop-only."""

    def __init__(self) -> None:
        self.highest = 0

    def observe(self, epoch: int, source: str = "leader node") -> None:
        if epoch > self.highest:
            log.info("Coordinator epoch %d -> %d (from %s)", self.highest, epoch, source)
            self.highest = epoch

    def check(self, epoch: int, coordinator_id: int, what: str) -> None:
        """Accept ``epoch`` (adopting a higher one) or raise InvalidCoordinatorEpochError when it is lower."""
        if epoch < self.highest:
            log.warning(
                "Rejected %s from coordinator %d: its epoch %d is older than %d",
                what,
                coordinator_id,
                epoch,
                self.highest,
            )
            raise InvalidCoordinatorEpochError(
                f"{what} from coordinator {coordinator_id} carries coordinator epoch {epoch}, "
                f"older than the current epoch {self.highest}"
            )
        self.observe(epoch, f"{what} of coordinator {coordinator_id}")


class ReplicaLayer(Protocol):
    """What the tablet service delegates to (the replica manager implements it)."""

    async def produce_log(self, request: Any) -> Any: ...

    async def fetch_log(self, request: Any) -> Any: ...

    async def list_offsets(self, request: Any) -> Any: ...

    async def offsets_for_leader_epoch(self, request: Any) -> Any: ...

    async def get_metadata(self, request: Any) -> Any: ...

    async def notify_leader_and_isr(self, request: Any) -> Any: ...

    async def stop_replica(self, request: Any) -> Any: ...

    async def update_metadata(self, request: Any) -> Any: ...


def _not_implemented() -> common_pb2.ErrorInfo:
    return convert.error_code(ErrorCode.INVALID_REQUEST, "not implemented yet")


class UnimplementedReplicaLayer:
    """Default layer until replicas exist: keeps UpdateMetadata's cluster view, refuses the rest."""

    def __init__(self) -> None:
        self.metadata: common_pb2.ClusterMetadata | None = None

    async def produce_log(self, request: Any) -> Any:
        return tablet_pb2.ProduceLogResponse(error=_not_implemented())

    async def fetch_log(self, request: Any) -> Any:
        return tablet_pb2.FetchLogResponse(error=_not_implemented())

    async def list_offsets(self, request: Any) -> Any:
        return tablet_pb2.ListOffsetsResponse(error=_not_implemented())

    async def offsets_for_leader_epoch(self, request: Any) -> Any:
        return tablet_pb2.OffsetsForLeaderEpochResponse(error=_not_implemented())

    async def get_metadata(self, request: Any) -> Any:
        if self.metadata is None:
            info = convert.error_code(ErrorCode.COORDINATOR_NOT_AVAILABLE, "no metadata from a coordinator leader yet")
            return common_pb2.MetadataResponse(error=info)
        return common_pb2.MetadataResponse(error=convert.ok(), metadata=self.metadata)

    async def notify_leader_and_isr(self, request: Any) -> Any:
        results = [
            tablet_pb2.BucketResult(table_bucket=b.table_bucket, error=_not_implemented()) for b in request.buckets
        ]
        return tablet_pb2.NotifyLeaderAndIsrResponse(error=convert.ok(), buckets=results)

    async def stop_replica(self, request: Any) -> Any:
        results = [
            tablet_pb2.BucketResult(table_bucket=b.table_bucket, error=_not_implemented()) for b in request.buckets
        ]
        return tablet_pb2.StopReplicaResponse(error=convert.ok(), buckets=results)

    async def update_metadata(self, request: Any) -> Any:
        self.metadata = request.metadata
        log.info(
            "Metadata from coordinator %d (epoch %d): tablet servers %s",
            request.coordinator_id,
            request.coordinator_epoch,
            sorted(s.id for s in request.metadata.tablet_servers),
        )
        return tablet_pb2.UpdateMetadataResponse(error=convert.ok())


class TabletServicer(tablet_pb2_grpc.TabletServiceServicer):
    """Fences control requests by coordinator epoch, then delegates; owns nothing else."""

    def __init__(self, fence: CoordinatorEpochFence, layer: ReplicaLayer) -> None:
        self.fence = fence
        self.layer = layer
        self.liveness: Any = None  # tablet.liveness.LivenessBeacon, set by the tablet server before serving

    async def _fenced(self, request: Any, response_type: type, what: str, call: Any) -> Any:
        try:
            self.fence.check(request.coordinator_epoch, request.coordinator_id, what)
        except InvalidCoordinatorEpochError as e:
            return response_type(error=convert.error_info(e))
        return await call(request)

    # ---------------------------------------------------------------- coordinator -> tablet server
    async def NotifyLeaderAndIsr(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return await self._fenced(
            request, tablet_pb2.NotifyLeaderAndIsrResponse, "NotifyLeaderAndIsr", self.layer.notify_leader_and_isr
        )

    async def StopReplica(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return await self._fenced(request, tablet_pb2.StopReplicaResponse, "StopReplica", self.layer.stop_replica)

    async def UpdateMetadata(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return await self._fenced(
            request, tablet_pb2.UpdateMetadataResponse, "UpdateMetadata", self.layer.update_metadata
        )

    async def WatchLiveness(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        """Heartbeat stream for proof-of-death failure detection (docs/failure-detection.md); not fenced."""
        if self.liveness is None:
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, "no liveness beacon in this server")
        async for beat in self.liveness.stream(request):
            yield beat

    # ---------------------------------------------------------------- data path
    async def ProduceLog(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return await self.layer.produce_log(request)

    async def FetchLog(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return await self.layer.fetch_log(request)

    async def ListOffsets(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return await self.layer.list_offsets(request)

    async def OffsetsForLeaderEpoch(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return await self.layer.offsets_for_leader_epoch(request)

    async def GetMetadata(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return await self.layer.get_metadata(request)
