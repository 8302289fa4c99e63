"""GrpcTransport against a real gRPC server on loopback: a server that comes back on the same port is reached
by the next call, not after gRPC's reconnect backoff — neither the transport's own channel nor a subchannel
shared with another channel of the process may keep it waiting (found by tests/fault/test_rolling_restart.py:
a producer retried for ~0.3-0.6 s at a tablet server restarted a second earlier, every call refused at once).
"""

from __future__ import annotations

import asyncio
import contextlib
import time

import grpc
import grpc.aio

from fluss_py.client.producer.request import encode_produce_request
from fluss_py.client.transport import FETCH_LOG, PRODUCE_LOG, TABLET_GET_METADATA, GrpcTransport
from fluss_py.errors import NetworkExceptionError
from fluss_py.rpc.channels import CLIENT_CHANNEL_OPTIONS
from fluss_py.rpc.pb import common_pb2, tablet_pb2
from fluss_py.testing.ports import default_allocator


async def _serve(port: int, handlers: dict | None = None) -> grpc.aio.Server:
    """A TabletService on ``port`` with ``handlers`` (default: GetMetadata answering an empty response)."""

    async def get_metadata(request: bytes, context: grpc.aio.ServicerContext) -> common_pb2.MetadataResponse:
        return common_pb2.MetadataResponse()

    serialize = lambda m: m.SerializeToString()  # noqa: E731
    calls = handlers if handlers is not None else {"GetMetadata": get_metadata}
    methods = {name: grpc.unary_unary_rpc_method_handler(c, response_serializer=serialize) for name, c in calls.items()}
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("fluss.v1.TabletService", methods),))
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    return server


async def test_a_restarted_server_is_reached_by_the_next_call_not_after_the_reconnect_backoff() -> None:
    port = default_allocator().allocate()
    address = f"127.0.0.1:{port}"
    transport = GrpcTransport()
    # another channel of this process to the same server, left in its reconnect backoff (gRPC shares
    # subchannels process-wide by default: a fresh channel would inherit that backoff)
    shared = [o for o in CLIENT_CHANNEL_OPTIONS if o[0] != "grpc.use_local_subchannel_pool"]
    other = grpc.aio.insecure_channel(address, options=shared)
    ping = other.unary_unary(TABLET_GET_METADATA.path, request_serializer=lambda m: m.SerializeToString())
    request = common_pb2.MetadataRequest()
    server = await _serve(port)
    try:
        await transport.call(address, TABLET_GET_METADATA, request, 5.0)
        await ping(request, timeout=5.0)
        await server.stop(0)
        # the server is down for ~1.5 s while callers retry every 50 ms: gRPC's reconnect backoff grows
        down_until = time.monotonic() + 1.5
        while time.monotonic() < down_until:
            with contextlib.suppress(NetworkExceptionError):
                await transport.call(address, TABLET_GET_METADATA, request, 1.0)
            with contextlib.suppress(grpc.aio.AioRpcError):
                await ping(request, timeout=1.0)
            await asyncio.sleep(0.05)
        server = await _serve(port)
        t0 = time.monotonic()
        failures = 0
        while True:
            try:
                await transport.call(address, TABLET_GET_METADATA, request, 5.0)
                break
            except NetworkExceptionError:
                failures += 1
                assert time.monotonic() - t0 < 5.0, "the restarted server was never reached"
                await asyncio.sleep(0.01)
        assert failures == 0, f"reached after {time.monotonic() - t0:.3f}s and {failures} refused calls"
    finally:
        await transport.close()
        await other.close()
        await server.stop(0)


async def test_a_server_without_the_produce_stream_gets_unary_produce_calls() -> None:
    """Compatibility (docs/client.md "Produce on a stream"): a server whose TabletService has only the unary
    ProduceLog answers UNIMPLEMENTED to the stream; the requests are sent unary, and so are the next ones."""
    port = default_allocator().allocate()
    seen: list[int] = []

    async def produce(request: bytes, context: grpc.aio.ServicerContext) -> tablet_pb2.ProduceLogResponse:
        seen.append(tablet_pb2.ProduceLogRequest.FromString(request).acks)
        return tablet_pb2.ProduceLogResponse(buckets=[tablet_pb2.ProduceBucketResult(base_offset=len(seen))])

    server = await _serve(port, {"ProduceLog": produce})
    transport = GrpcTransport()
    try:
        address = f"127.0.0.1:{port}"
        request = encode_produce_request(1, 5000, [(1, 0, b"x" * 200_000)])
        # pipelined, as a producer's first requests may be: writes race the server's UNIMPLEMENTED (gRPC then
        # fails them with INTERNAL, the call's status is UNIMPLEMENTED)
        answers = await asyncio.gather(*(transport.call(address, PRODUCE_LOG, request, 5.0) for _ in range(20)))
        later = await transport.call(address, PRODUCE_LOG, request, 5.0)
        assert sorted(a.buckets[0].base_offset for a in [*answers, later]) == list(range(1, 22))
        assert seen == [1] * 21  # each handled once, unary
        assert address not in transport.produce_streams  # not tried again for STREAM_RETRY_S
    finally:
        await transport.close()
        await server.stop(0)


async def test_a_server_without_the_consumer_fetch_stream_gets_unary_fetches() -> None:
    """Compatibility (docs/client.md "Consumer fetches on a stream"): a server whose TabletService has only the
    unary FetchLog answers UNIMPLEMENTED to ConsumerFetchStream; the fetch is sent unary, and so are the next."""
    port = default_allocator().allocate()
    seen: list[int] = []

    async def fetch(request: bytes, context: grpc.aio.ServicerContext) -> tablet_pb2.FetchLogResponse:
        seen.append(tablet_pb2.FetchLogRequest.FromString(request).replica_id)
        return tablet_pb2.FetchLogResponse(session_id=len(seen))

    server = await _serve(port, {"FetchLog": fetch})
    transport = GrpcTransport()
    try:
        address = f"127.0.0.1:{port}"
        request = tablet_pb2.FetchLogRequest(replica_id=-1, max_wait_ms=0)
        answers = [await transport.call(address, FETCH_LOG, request, 5.0) for _ in range(3)]
        assert [a.session_id for a in answers] == [1, 2, 3]
        assert seen == [-1] * 3  # each handled once, unary
        assert address not in transport.consumer_fetch_streams  # not tried again for STREAM_RETRY_S
    finally:
        await transport.close()
        await server.stop(0)
