"""A fake ``ReplicaLayer`` for the tablet service's fencing tests (the servicer in front of it is real)."""

from __future__ import annotations

import logging
from typing import Any

from fluss_py.errors import ErrorCode
from fluss_py.rpc import convert
from fluss_py.rpc.pb import common_pb2, tablet_pb2

log = logging.getLogger(__name__)


def _refused() -> common_pb2.ErrorInfo:
    return convert.error_code(ErrorCode.INVALID_REQUEST, "refused by the fake replica layer")


class MetadataOnlyReplicaLayer:
    """Keeps UpdateMetadata's cluster view (served back by GetMetadata) and refuses everything else with
    INVALID_REQUEST: what the servicer passes on is visible, nothing else happens."""

    def __init__(self) -> None:
        self.metadata: common_pb2.ClusterMetadata | None = None

    async def produce_log(self, request: Any) -> Any:
        return tablet_pb2.ProduceLogResponse(error=_refused())

    async def fetch_log(self, request: Any) -> Any:
        return tablet_pb2.FetchLogResponse(error=_refused())

    async def list_offsets(self, request: Any) -> Any:
        return tablet_pb2.ListOffsetsResponse(error=_refused())

    async def offsets_for_leader_epoch(self, request: Any) -> Any:
        return tablet_pb2.OffsetsForLeaderEpochResponse(error=_refused())

    async def get_metadata(self, request: Any) -> Any:
        if self.metadata is None:
            info = convert.error_code(ErrorCode.COORDINATOR_NOT_AVAILABLE, "no metadata from a coordinator leader yet")
            return common_pb2.MetadataResponse(error=info)
        return common_pb2.MetadataResponse(error=convert.ok(), metadata=self.metadata)

    async def notify_leader_and_isr(self, request: Any) -> Any:
        results = [tablet_pb2.BucketResult(table_bucket=b.table_bucket, error=_refused()) for b in request.buckets]
        return tablet_pb2.NotifyLeaderAndIsrResponse(error=convert.ok(), buckets=results)

    async def stop_replica(self, request: Any) -> Any:
        results = [tablet_pb2.BucketResult(table_bucket=b.table_bucket, error=_refused()) for b in request.buckets]
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
