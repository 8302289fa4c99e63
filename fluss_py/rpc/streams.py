"""One open bidirectional grpc.aio stream as the narrow ``write`` / ``read`` / ``cancel`` edge that the
stream clients use (the follower's ``FetchStreamClient``, the producer's ``ProduceStreamClient``, the
consumer's ``LockstepStreamClient``); their unit tests plug in in-memory streams instead.

Who calls: the endpoint or transport that opened the call, on its event loop.
"""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import grpc.aio

from fluss_py.errors import NetworkExceptionError

PRODUCE_STREAM_ACCEPTED = ("fluss-stream", "produce")
"""Initial metadata a leader sends as soon as its handler takes a ProduceLogStream (before any answer)."""
CONSUMER_FETCH_STREAM_ACCEPTED = ("fluss-stream", "consumer-fetch")
"""Initial metadata a leader sends as soon as its handler takes a ConsumerFetchStream (before any answer)."""


class GrpcStream:
    """One stream-stream call: ``read`` returns the next message and raises when the peer ended the stream
    (EOF, as NETWORK_EXCEPTION naming ``what``; a failed call raises its ``AioRpcError``)."""

    __slots__ = ("_call", "_what")

    def __init__(self, call: Any, what: str) -> None:
        self._call = call
        self._what = what

    async def write(self, message: Any) -> None:
        try:
            await self._call.write(message)
        except (grpc.aio.AioRpcError, asyncio.InvalidStateError) as e:
            # a write into a call the peer already ended fails with whatever the write op met (gRPC reports
            # INTERNAL for a write racing a server's UNIMPLEMENTED): the call's own status says why it ended
            code = await self._call.code()
            if code is grpc.StatusCode.OK:
                raise NetworkExceptionError(f"the leader ended the {self._what}") from e
            details = await self._call.details()
            raise grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details) from e

    async def read(self) -> Any:
        answer = await self._call.read()
        if answer is grpc.aio.EOF:
            raise NetworkExceptionError(f"the leader ended the {self._what}")
        return answer

    async def ready(self, marker: tuple[str, str]) -> None:
        """Wait until the server accepted the call: its initial metadata carries ``marker``, which the handler
        sends as soon as it runs. A server without the method (UNIMPLEMENTED) or refusing the caller
        (UNAUTHENTICATED, PERMISSION_DENIED) ends the call without it: raise the call's status. Writing
        before this is known races that status (gRPC then reports INTERNAL for the write and for the call)."""
        metadata = await self._call.initial_metadata()
        if metadata is not None and marker in tuple(metadata):
            return
        code = await self._call.code()
        details = await self._call.details()
        raise grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details)

    def cancel(self) -> None:
        self._call.cancel()
