"""The replica layer's two gRPC seams against real grpc.aio servers on loopback: GrpcLeaderEndpoint
(FetchLog, OffsetsForLeaderEpoch) and GrpcCoordinatorEndpoint (AdjustIsr, following NOT_COORDINATOR_LEADER)."""

from __future__ import annotations

import asyncio

import grpc.aio
import pytest

from fluss_py.errors import (
    ErrorCode,
    FetchSessionNotFoundError,
    NetworkExceptionError,
    ReplicaNotAuthenticatedError,
)
from fluss_py.replica.fetcher.leader_endpoint import GrpcLeaderEndpoint
from fluss_py.replica.gateway import GrpcCoordinatorEndpoint
from fluss_py.replica.messages import (
    AdjustIsrItem,
    EpochRequest,
    FetchBucketRequest,
    FetchRequest,
    FetchSessionRequest,
)
from fluss_py.rpc.pb import common_pb2, coordinator_pb2, coordinator_pb2_grpc, tablet_pb2, tablet_pb2_grpc
from fluss_py.rpc.peer import REPLICA_TOKEN_KEY, TokenReplicaVerifier, presented
from fluss_py.rpc.server import start_rpc_server
from fluss_py.tablet.service import TabletServicer
from fluss_py.testing.ports import free_port
from fluss_py.testing.procs import async_wait_until
from fluss_py.types import ServerNode, TableBucket

pytestmark = pytest.mark.integration

TB = TableBucket(3, 1)
PB_TB = common_pb2.TableBucket(table_id=3, bucket=1)


class Leader(tablet_pb2_grpc.TabletServiceServicer):
    def __init__(self) -> None:
        self.requests: list = []
        self.tokens: list[str] = []  # the replica token each FetchLog presented

    async def FetchLog(self, request, context):
        self.requests.append(request)
        self.tokens.append(presented(context, REPLICA_TOKEN_KEY))
        b = request.buckets[0]
        return tablet_pb2.FetchLogResponse(
            session_id=request.session.id or 77,
            buckets=[
                tablet_pb2.FetchBucketResult(
                    table_bucket=b.table_bucket,
                    high_watermark=5,
                    log_start_offset=1,
                    log_end_offset=9,
                    records=b"\x01\x02",
                    diverging_epoch=tablet_pb2.EpochEndOffset(epoch=2, end_offset=7),
                ),
                tablet_pb2.FetchBucketResult(
                    table_bucket=common_pb2.TableBucket(table_id=3, bucket=2),
                    error=common_pb2.ErrorInfo(code=int(ErrorCode.NOT_LEADER_OR_FOLLOWER), leader_id=4),
                ),
            ],
        )

    async def OffsetsForLeaderEpoch(self, request, context):
        self.requests.append(request)
        return tablet_pb2.OffsetsForLeaderEpochResponse(
            buckets=[tablet_pb2.OffsetsForLeaderEpochBucketResult(table_bucket=PB_TB, leader_epoch=1, end_offset=42)]
        )


class Coordinator(coordinator_pb2_grpc.CoordinatorServiceServicer):
    def __init__(self, leader_address: str | None) -> None:
        self.leader_address = leader_address
        self.requests: list = []

    async def AdjustIsr(self, request, context):
        self.requests.append(request)
        if self.leader_address is not None:
            return coordinator_pb2.AdjustIsrResponse(
                error=common_pb2.ErrorInfo(
                    code=int(ErrorCode.NOT_COORDINATOR_LEADER), leader_id=1, leader_address=self.leader_address
                )
            )
        b = request.buckets[0]
        return coordinator_pb2.AdjustIsrResponse(
            buckets=[
                coordinator_pb2.AdjustIsrBucketResult(
                    table_bucket=b.table_bucket,
                    leader_and_isr=common_pb2.BucketLeaderAndIsr(
                        table_bucket=b.table_bucket,
                        leader=1,
                        leader_epoch=b.leader_epoch,
                        isr=list(b.new_isr),
                        coordinator_epoch=3,
                        bucket_epoch=b.bucket_epoch + 1,
                    ),
                )
            ]
        )


async def serve(register) -> tuple[grpc.aio.Server, int]:
    return await start_rpc_server("127.0.0.1", 0, [register])


async def test_leader_endpoint_round_trip() -> None:
    leader = Leader()
    server, port = await serve(lambda s: tablet_pb2_grpc.add_TabletServiceServicer_to_server(leader, s))
    endpoint = GrpcLeaderEndpoint(ServerNode(1, "127.0.0.1", port), replica_token="secret-of-7")
    try:
        request = FetchRequest(7, 0.25, 1, 1024, (FetchBucketRequest(TB, 3, 512, 2, 1),), FetchSessionRequest())
        response = await endpoint.fetch(request)
        sent = leader.requests[0]
        assert (sent.replica_id, sent.max_wait_ms, sent.min_bytes, sent.max_bytes) == (7, 250, 1, 1024)
        assert sent.HasField("session") and (sent.session.id, sent.session.epoch) == (0, 0)  # opens a session
        b = sent.buckets[0]
        assert (b.fetch_offset, b.max_bytes, b.current_leader_epoch, b.last_fetched_epoch) == (3, 512, 2, 1)
        assert response.session_id == 77
        result = response.buckets
        r = result[TB]
        assert (r.error, r.high_watermark, r.log_start_offset, r.log_end_offset, r.records) == (None, 5, 1, 9, b"\1\2")
        assert (r.diverging_epoch.epoch, r.diverging_epoch.end_offset) == (2, 7)
        other = result[TableBucket(3, 2)]
        assert other.error_code is ErrorCode.NOT_LEADER_OR_FOLLOWER and other.error.leader_id == 4
        assert other.diverging_epoch is None
        incremental = FetchRequest(
            7, 0.25, 1, 1024, (FetchBucketRequest(TB, 4, 512, 2, 1),), FetchSessionRequest(77, 1, (TableBucket(3, 2),))
        )
        assert (await endpoint.fetch(incremental)).session_id == 77
        sent = leader.requests[1]
        assert (sent.session.id, sent.session.epoch, [(f.table_id, f.bucket) for f in sent.session.forgotten]) == (
            77,
            1,
            [(3, 2)],
        )
        sessionless = FetchRequest(7, 0.25, 1, 1024, (FetchBucketRequest(TB, 4, 512),))
        await endpoint.fetch(sessionless)
        assert not leader.requests[2].HasField("session")
        assert leader.tokens == ["secret-of-7"] * 3  # every fetch proves who the follower is (peer-trust.md)
        epochs = await endpoint.offsets_for_leader_epoch(7, [EpochRequest(TB, 1, 2)])
        assert (epochs[TB].leader_epoch, epochs[TB].end_offset, epochs[TB].error) == (1, 42, None)
    finally:
        await endpoint.close()
        await server.stop(None)


async def test_leader_endpoint_unreachable_is_a_retriable_network_error() -> None:
    endpoint = GrpcLeaderEndpoint(ServerNode(1, "127.0.0.1", free_port()), rpc_timeout_s=2.0)
    try:
        with pytest.raises(NetworkExceptionError) as e:
            await endpoint.fetch(FetchRequest(7, 0.1, 1, 1024, (FetchBucketRequest(TB, 0, 512),)))
        assert e.value.retriable
    finally:
        await endpoint.close()


async def test_gateway_follows_the_named_coordinator_leader() -> None:
    real = Coordinator(None)
    add = coordinator_pb2_grpc.add_CoordinatorServiceServicer_to_server
    real_server, real_port = await serve(lambda s: add(real, s))
    standby = Coordinator(f"127.0.0.1:{real_port}")
    standby_server, standby_port = await serve(lambda s: add(standby, s))
    gateway = GrpcCoordinatorEndpoint(lambda: f"127.0.0.1:{standby_port}")
    try:
        results = await gateway.adjust_isr(2, [AdjustIsrItem(TB, 4, 6, (1, 2))])
        assert len(standby.requests) == 1 and len(real.requests) == 1
        assert real.requests[0].server_id == 2
        lai = results[TB].leader_and_isr
        assert results[TB].error is None and (lai.leader_epoch, lai.isr, lai.bucket_epoch) == (4, (1, 2), 7)
    finally:
        await gateway.close()
        await real_server.stop(None)
        await standby_server.stop(None)


# ---------------------------------------------------------------- FetchLogStream through the real servicer


class StreamLayer:
    """The replica layer behind a real TabletServicer: answers every fetch in session 41, or parks it until
    ``release`` is set when ``park`` is (and records a cancelled park)."""

    def __init__(self) -> None:
        self.handled: list = []
        self.park = False
        self.release = asyncio.Event()
        self.cancelled = 0

    async def fetch_log(self, request):
        self.handled.append(request)
        if self.park:
            try:
                await self.release.wait()
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
        return tablet_pb2.FetchLogResponse(
            error=common_pb2.ErrorInfo(code=0),
            session_id=41,
            buckets=[tablet_pb2.FetchBucketResult(table_bucket=PB_TB, high_watermark=len(self.handled))],
        )


def session_fetch(session_id: int, epoch: int) -> FetchRequest:
    bucket = FetchBucketRequest(TB, 3, 512, 2, 1)
    return FetchRequest(7, 0.25, 1, 1024, (bucket,), FetchSessionRequest(session_id, epoch))


async def stream_leader() -> tuple[grpc.aio.Server, int, StreamLayer, TokenReplicaVerifier]:
    verifier = TokenReplicaVerifier(1)
    verifier.update({7: "secret-of-7"})
    layer = StreamLayer()
    servicer = TabletServicer(None, layer, verifier)  # type: ignore[arg-type]  (no control requests here)
    server, port = await serve(lambda s: tablet_pb2_grpc.add_TabletServiceServicer_to_server(servicer, s))
    return server, port, layer, verifier


async def test_a_session_travels_on_one_stream_bound_to_the_proven_replica() -> None:
    server, port, layer, verifier = await stream_leader()
    endpoint = GrpcLeaderEndpoint(ServerNode(1, "127.0.0.1", port), replica_token="secret-of-7")
    try:
        assert (await endpoint.fetch(session_fetch(0, 0))).session_id == 41
        for epoch in (1, 2, 3):
            answer = await endpoint.fetch(session_fetch(41, epoch))
            assert answer.buckets[TB].high_watermark == epoch + 1  # each answer is its own request's
        assert endpoint.streams is not None and endpoint.streams.opened == 1 and len(layer.handled) == 4
        # server 7 restarted since (a new token handed out): its old process loses the stream at once
        verifier.update({7: "secret-of-7-restarted"})
        with pytest.raises(ReplicaNotAuthenticatedError):
            await endpoint.fetch(session_fetch(41, 4))
        with pytest.raises(FetchSessionNotFoundError):  # the session ended with its stream
            await endpoint.fetch(session_fetch(41, 5))
        with pytest.raises(ReplicaNotAuthenticatedError):  # a new stream is proven afresh: refused
            await endpoint.fetch(session_fetch(0, 0))
        assert len(layer.handled) == 4
    finally:
        await endpoint.close()
        await server.stop(None)


async def test_an_abandoned_exchange_cancels_the_leaders_long_poll_and_the_next_session_gets_a_new_stream() -> None:
    server, port, layer, _ = await stream_leader()
    endpoint = GrpcLeaderEndpoint(ServerNode(1, "127.0.0.1", port), replica_token="secret-of-7")
    try:
        await endpoint.fetch(session_fetch(0, 0))
        layer.park = True
        parked = asyncio.ensure_future(endpoint.fetch(session_fetch(41, 1)))
        await async_wait_until(lambda: len(layer.handled) == 2)
        parked.cancel()  # as the fetcher does when buckets are added during a long poll
        with pytest.raises(asyncio.CancelledError):
            await parked
        await async_wait_until(lambda: layer.cancelled == 1)  # the leader stopped handling it
        layer.park = False
        answer = await endpoint.fetch(session_fetch(0, 0))
        assert answer.buckets[TB].high_watermark == 3 and endpoint.streams.opened == 2
    finally:
        await endpoint.close()
        await server.stop(None)


async def test_a_leader_without_fetch_streams_is_fetched_from_with_unary_calls() -> None:
    leader = Leader()  # an older server: no FetchLogStream (UNIMPLEMENTED)
    server, port = await serve(lambda s: tablet_pb2_grpc.add_TabletServiceServicer_to_server(leader, s))
    endpoint = GrpcLeaderEndpoint(ServerNode(1, "127.0.0.1", port), replica_token="secret-of-7")
    try:
        assert (await endpoint.fetch(session_fetch(0, 0))).session_id == 77
        assert (await endpoint.fetch(session_fetch(77, 1))).session_id == 77
        assert (await endpoint.fetch(session_fetch(0, 0))).session_id == 77  # a new session: still unary
        assert len(leader.requests) == 3 and endpoint.streams.opened == 1  # tried once, then unary
    finally:
        await endpoint.close()
        await server.stop(None)
