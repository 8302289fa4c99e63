"""The replica layer's seam to the coordinator leader: AdjustIsr (the leader proposes ISR changes) and
ReportReplicaFaults (replicas this server can no longer serve, or can again: docs/storage.md §10).

``CoordinatorEndpoint`` is the Protocol (fakes in unit tests); ``GrpcCoordinatorEndpoint`` talks to whichever
coordinator currently leads, found through a callable the tablet server wires to its ZooKeeper view.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import grpc

from fluss_py.errors import CoordinatorNotAvailableError, ErrorCode
from fluss_py.replica.messages import AdjustIsrItem, AdjustIsrResult
from fluss_py.rpc import convert
from fluss_py.rpc.channels import open_channel
from fluss_py.rpc.pb import coordinator_pb2, coordinator_pb2_grpc
from fluss_py.rpc.peer import REPLICA_TOKEN_KEY, call_metadata
from fluss_py.types import TableBucket

log = logging.getLogger(__name__)


class CoordinatorEndpoint(Protocol):
    """What ``ReplicaManager`` needs from the coordinator leader."""

    async def adjust_isr(self, server_id: int, items: Sequence[AdjustIsrItem]) -> dict[TableBucket, AdjustIsrResult]:
        """Propose ISR changes; one result per bucket. Raises a retriable ApiError if no leader answered."""
        ...

    async def report_replica_faults(
        self, server_id: int, fault: int, buckets: Sequence[TableBucket], reason: str
    ) -> None:
        """Tell the coordinator leader (``fault``: a ``coordinator_pb2.ReplicaFault``); raises if unanswered."""
        ...


class GrpcCoordinatorEndpoint:
    """AdjustIsr over grpc.aio to the coordinator leader at ``leader_address()`` ("host:port" or None).

    One channel, replaced when the leader's address changes. A NOT_COORDINATOR_LEADER answer naming the
    new leader is followed once at once. Called from the ReplicaManager's ISR-change task only.
    """

    def __init__(
        self, leader_address: Callable[[], str | None], *, timeout_s: float = 5.0, replica_token: str = ""
    ) -> None:
        self._leader_address = leader_address
        self._timeout_s = timeout_s
        self._metadata = call_metadata(REPLICA_TOKEN_KEY, replica_token)  # proves who proposes (peer-trust.md)
        self._address: str | None = None
        self._channel: grpc.aio.Channel | None = None
        self._stub: coordinator_pb2_grpc.CoordinatorServiceStub | None = None

    async def _stub_for(self, address: str) -> coordinator_pb2_grpc.CoordinatorServiceStub:
        if address != self._address or self._stub is None:
            if self._channel is not None:
                log.info("coordinator leader moved from %s to %s", self._address, address)
                await self._channel.close()
            self._address = address
            self._channel = open_channel(address)
            self._stub = coordinator_pb2_grpc.CoordinatorServiceStub(self._channel)
        return self._stub

    async def adjust_isr(self, server_id: int, items: Sequence[AdjustIsrItem]) -> dict[TableBucket, AdjustIsrResult]:
        request = coordinator_pb2.AdjustIsrRequest(
            server_id=server_id,
            buckets=[
                coordinator_pb2.AdjustIsrBucket(
                    table_bucket=convert.table_bucket_to_pb(i.table_bucket),
                    leader_epoch=i.leader_epoch,
                    bucket_epoch=i.bucket_epoch,
                    new_isr=list(i.new_isr),
                )
                for i in items
            ],
        )
        response = await self._call("AdjustIsr", request)
        results: dict[TableBucket, AdjustIsrResult] = {}
        for b in response.buckets:
            tb = convert.table_bucket_from_pb(b.table_bucket)
            error = convert.error_of(b.error)
            lai = (
                convert.leader_and_isr_of(b.leader_and_isr) if error is None and b.HasField("leader_and_isr") else None
            )
            results[tb] = AdjustIsrResult(tb, error, lai)
        return results

    async def report_replica_faults(
        self, server_id: int, fault: int, buckets: Sequence[TableBucket], reason: str
    ) -> None:
        request = coordinator_pb2.ReportReplicaFaultsRequest(
            server_id=server_id, fault=fault, buckets=[convert.table_bucket_to_pb(tb) for tb in buckets], reason=reason
        )
        await self._call("ReportReplicaFaults", request)

    async def _call(self, method: str, request: Any) -> Any:
        """One call to the leader; a NOT_COORDINATOR_LEADER answer naming another is followed once."""
        address = self._leader_address()
        for attempt in range(2):
            if not address:
                raise CoordinatorNotAvailableError("no coordinator leader is known")
            try:
                stub = await self._stub_for(address)
                response = await getattr(stub, method)(request, timeout=self._timeout_s, metadata=self._metadata)
            except grpc.aio.AioRpcError as e:
                raise convert.network_error(e, f"{method} to coordinator {address}") from e
            error = convert.error_of(response.error)
            if error is None:
                return response
            if error.code is ErrorCode.NOT_COORDINATOR_LEADER and error.leader_address and attempt == 0:
                address = error.leader_address
                continue
            raise error
        raise AssertionError("unreachable")

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close()
        self._channel, self._stub, self._address = None, None, None
