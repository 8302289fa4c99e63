"""The only network seam of replication: a follower's view of one leader server.

``LeaderEndpoint`` is the Protocol the ``ReplicaFetcher`` uses (an in-memory fake in unit tests);
``GrpcLeaderEndpoint`` implements it over one grpc.aio channel to the leader's TabletService; its calls
present this server's replica token (docs/peer-trust.md), without which the leader refuses a follower fetch.
A fetch session travels on one ``FetchLogStream`` (``replica/fetch_stream.py``, docs/replication.md "Streamed
follower fetches") unless the leader has none (UNIMPLEMENTED: unary FetchLog calls for ``STREAM_RETRY_S``)
or ``stream`` is off; sessionless fetches are always unary.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any, Protocol

import grpc

from fluss_py.errors import NetworkExceptionError
from fluss_py.replica.fetch_stream import STREAM_RETRY_S, FetchStreamClient
from fluss_py.replica.messages import (
    NO_SESSION,
    EpochEndOffset,
    EpochRequest,
    EpochResult,
    FetchBucketResult,
    FetchRequest,
    FetchResponse,
    FetchResult,
)
from fluss_py.rpc import convert
from fluss_py.rpc.channels import open_channel, server_identity
from fluss_py.rpc.pb import tablet_pb2, tablet_pb2_grpc
from fluss_py.rpc.peer import REPLICA_TOKEN_KEY, call_metadata
from fluss_py.rpc.streams import GrpcStream
from fluss_py.types import ServerNode, TableBucket

log = logging.getLogger(__name__)


class LeaderEndpoint(Protocol):
    """A follower's connection to one leader server. Whole-call failures raise a retriable ApiError."""

    async def fetch(self, request: FetchRequest) -> FetchResponse: ...

    async def offsets_for_leader_epoch(
        self, replica_id: int, requests: Sequence[EpochRequest]
    ) -> dict[TableBucket, EpochResult]: ...

    async def close(self) -> None: ...


def fetch_request_pb(request: FetchRequest) -> Any:
    """The FetchLogRequest of ``request``, built in place with ``buckets.add`` (the same bytes as a list of
    FetchBucket messages, which protobuf copies, at half the cost: a request that opens a fetch session names
    every bucket the follower follows from that leader, ~667 at 2000 buckets on 3 servers)."""
    pb = tablet_pb2.FetchLogRequest(
        replica_id=request.replica_id,
        max_wait_ms=int(request.max_wait_s * 1000),
        min_bytes=request.min_bytes,
        max_bytes=request.max_bytes,
    )
    add = pb.buckets.add
    for b in request.buckets:
        add(
            table_bucket={"table_id": b.table_bucket.table_id, "bucket": b.table_bucket.bucket},
            fetch_offset=b.fetch_offset,
            max_bytes=b.max_bytes,
            current_leader_epoch=b.current_leader_epoch,
            last_fetched_epoch=b.last_fetched_epoch,
            flushed_offset=b.flushed_offset,
        )
    if request.session is not None:
        pb.session.SetInParent()  # present even when every field is 0
        pb.session.id = request.session.id
        pb.session.epoch = request.session.epoch
        forget = pb.session.forgotten.add
        for tb in request.session.forgotten:
            forget(table_id=tb.table_id, bucket=tb.bucket)
    return pb


def fetch_response_of(response: Any) -> FetchResponse:
    """The plain FetchResponse of a FetchLogResponse without a whole-request error."""
    results: FetchResult = {}
    for r in response.buckets:
        tb = convert.table_bucket_from_pb(r.table_bucket)
        diverging = (
            EpochEndOffset(r.diverging_epoch.epoch, r.diverging_epoch.end_offset)
            if r.HasField("diverging_epoch")
            else None
        )
        results[tb] = FetchBucketResult(
            tb, convert.error_of(r.error), r.high_watermark, r.log_start_offset, r.log_end_offset, r.records, diverging
        )
    return FetchResponse(results, response.session_id)


class GrpcLeaderEndpoint:
    """FetchLog / FetchLogStream / OffsetsForLeaderEpoch to ``leader`` over one channel; used by one
    ReplicaFetcher task."""

    def __init__(
        self, leader: ServerNode, *, rpc_timeout_s: float = 30.0, replica_token: str = "", stream: bool = True
    ) -> None:
        self.leader = leader
        self._timeout_s = rpc_timeout_s
        # the server's own credentials (a password, when it has one) with every call, the stream included (the
        # channel's credentials interceptor would cost a task per call and does not cover streams of requests)
        identity = server_identity()
        self._metadata = (identity.metadata() or ()) + call_metadata(REPLICA_TOKEN_KEY, replica_token)
        # big messages, short reconnect backoff: a restarted leader is reached again quickly
        self._channel = open_channel(leader.address, identity, send_credentials=False)
        self._stub = tablet_pb2_grpc.TabletServiceStub(self._channel)
        self.streams: FetchStreamClient | None = FetchStreamClient(self._open_stream) if stream else None
        self._unary_until = 0.0  # the leader had no FetchLogStream: unary calls until then (loop time)
        self._streamed = False  # the current session travels on the stream

    def _open_stream(self) -> GrpcStream:
        return GrpcStream(self._stub.FetchLogStream(metadata=self._metadata), "fetch stream")

    async def fetch(self, request: FetchRequest) -> FetchResponse:
        pb = fetch_request_pb(request)
        session = request.session
        opens = session is not None and session.id == NO_SESSION
        if opens:
            self._streamed = self.streams is not None and asyncio.get_running_loop().time() >= self._unary_until
        response = None
        if self._streamed and session is not None:
            response = await self._fetch_streamed(pb, opens, request.max_wait_s + self._timeout_s)
        if response is None:
            try:
                response = await self._stub.FetchLog(
                    pb, timeout=request.max_wait_s + self._timeout_s, metadata=self._metadata
                )
            except grpc.aio.AioRpcError as e:
                raise convert.network_error(e, f"FetchLog from leader {self.leader.id} at {self.leader.address}") from e
        convert.raise_for(response.error)
        return fetch_response_of(response)

    async def _fetch_streamed(self, pb: Any, opens: bool, timeout_s: float) -> Any:
        """The answer on the session's stream; None: the leader has no FetchLogStream, send it unary."""
        assert self.streams is not None
        what = f"FetchLogStream from leader {self.leader.id} at {self.leader.address}"
        try:
            async with asyncio.timeout(timeout_s):
                response = await self.streams.exchange(pb, opens_session=opens)
        except grpc.aio.AioRpcError as e:
            if e.code() is grpc.StatusCode.UNIMPLEMENTED and opens:  # handled nothing: the same request, unary
                log.info("leader %d has no FetchLogStream: unary FetchLog for %.0fs", self.leader.id, STREAM_RETRY_S)
                self._unary_until = asyncio.get_running_loop().time() + STREAM_RETRY_S
                self._streamed = False
                return None
            raise convert.network_error(e, what) from e
        except TimeoutError:
            raise NetworkExceptionError(f"{what}: no answer within {timeout_s}s") from None
        except asyncio.InvalidStateError as e:  # written to a call that had already finished
            raise NetworkExceptionError(f"{what}: the stream ended ({e})") from e
        if response.error.code != 0:  # a whole-request error ends the stream on both sides
            self.streams.drop()
        return response

    async def offsets_for_leader_epoch(
        self, replica_id: int, requests: Sequence[EpochRequest]
    ) -> dict[TableBucket, EpochResult]:
        pb = tablet_pb2.OffsetsForLeaderEpochRequest(
            replica_id=replica_id,
            buckets=[
                tablet_pb2.OffsetsForLeaderEpochBucket(
                    table_bucket=convert.table_bucket_to_pb(r.table_bucket),
                    leader_epoch=r.leader_epoch,
                    current_leader_epoch=r.current_leader_epoch,
                )
                for r in requests
            ],
        )
        try:
            response = await self._stub.OffsetsForLeaderEpoch(pb, timeout=self._timeout_s, metadata=self._metadata)
        except grpc.aio.AioRpcError as e:
            raise convert.network_error(e, f"OffsetsForLeaderEpoch from leader {self.leader.id}") from e
        convert.raise_for(response.error)
        return {
            convert.table_bucket_from_pb(r.table_bucket): EpochResult(
                convert.table_bucket_from_pb(r.table_bucket), convert.error_of(r.error), r.leader_epoch, r.end_offset
            )
            for r in response.buckets
        }

    async def close(self) -> None:
        if self.streams is not None:
            self.streams.drop()
        await self._channel.close()
