"""One open bidirectional grpc.aio stream as the narrow ``write`` / ``read`` / ``cancel`` edge that the
stream clients use (the follower's ``FetchStreamClient``, the producer's ``ProduceStreamClient``); their
unit tests plug in in-memory streams instead.

Who calls: the endpoint or transport that opened the call, on its event loop.
"""

from __future__ import annotations

from typing import Any

import grpc.aio

from fluss_py.errors import NetworkExceptionError


class GrpcStream:
    """One stream-stream call: ``read`` returns the next message and raises when the peer ended the stream
    (EOF, as NETWORK_EXCEPTION naming ``what``; a failed call raises its ``AioRpcError``)."""

    __slots__ = ("_call", "_what")

    def __init__(self, call: Any, what: str) -> None:
        self._call = call
        self._what = what

    async def write(self, message: Any) -> None:
        await self._call.write(message)

    async def read(self) -> Any:
        answer = await self._call.read()
        if answer is grpc.aio.EOF:
            raise NetworkExceptionError(f"the leader ended the {self._what}")
        return answer

    def cancel(self) -> None:
        self._call.cancel()
