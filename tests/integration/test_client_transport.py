"""GrpcTransport against a real gRPC server on loopback: a server that comes back on the same port is reached
by the next call, not after gRPC's reconnect backoff (found by tests/fault/test_rolling_restart.py: a
producer retried for ~0.3 s at a tablet server restarted a second earlier, every call refused at once).
"""

from __future__ import annotations

import asyncio
import time

import grpc
import grpc.aio

from fluss_py.client.transport import TABLET_GET_METADATA, GrpcTransport
from fluss_py.errors import NetworkExceptionError
from fluss_py.rpc.pb import common_pb2
from fluss_py.testing.ports import default_allocator


async def _serve(port: int) -> grpc.aio.Server:
    async def get_metadata(request: bytes, context: grpc.aio.ServicerContext) -> common_pb2.MetadataResponse:
        return common_pb2.MetadataResponse()

    handler = grpc.method_handlers_generic_handler(
        "fluss.v1.TabletService",
        {
            "GetMetadata": grpc.unary_unary_rpc_method_handler(
                get_metadata, response_serializer=lambda m: m.SerializeToString()
            )
        },
    )
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((handler,))
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    return server


async def test_a_restarted_server_is_reached_by_the_next_call_not_after_the_reconnect_backoff() -> None:
    port = default_allocator().allocate()
    address = f"127.0.0.1:{port}"
    transport = GrpcTransport()
    request = common_pb2.MetadataRequest()
    server = await _serve(port)
    try:
        await transport.call(address, TABLET_GET_METADATA, request, 5.0)
        await server.stop(0)
        # the server is down for ~1.5 s while the caller retries every 50 ms: gRPC's reconnect backoff grows
        down_until = time.monotonic() + 1.5
        while time.monotonic() < down_until:
            try:
                await transport.call(address, TABLET_GET_METADATA, request, 1.0)
            except NetworkExceptionError:
                pass
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
        await server.stop(0)
