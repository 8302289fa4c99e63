"""The leader's side of a ``ConsumerFetchStream``: a consumer's fetch requests on one bidirectional stream,
each authorized and handled as a unary FetchLog, answered in order, one at a time (docs/client.md "Consumer
fetches on a stream")::

    read a message ──> replica_id != -1? ──yes──> answer INVALID_REQUEST, end the stream
                           │no
                           v
                       refused (the interceptor's per-message check)? ──yes──> answer the refusal, go on
                           │no                     (it raises when the stream's principal is no longer proven:
                           │                        the stream ends with it; nothing is in flight)
                           v
                       answer fetch(request)  (a long poll parks here, as a unary FetchLog's handler does)
                           │
                           v
                       read the next message (lockstep: nothing is read while a fetch is being handled)

The stream is a transport only: the fetch session, its epochs, the leader epochs and the long poll are the
FetchLog's, unchanged. The stream ending (the client cancelled or went away) cancels the fetch being handled,
as the end of a unary call cancels its handler.

Free of gRPC (the servicer passes the request iterator, ``context.write``, the replica layer's fetch and the
interceptor's per-message check), so unit tests drive it over in-memory streams.

Who calls: the tablet servicer's ``ConsumerFetchStream`` handler, once per stream, on the server's loop.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from fluss_py.errors import ApiError, InvalidRequestError
from fluss_py.rpc import convert
from fluss_py.rpc.pb import tablet_pb2


async def serve_consumer_fetches(
    requests: AsyncIterator[Any],
    fetch: Callable[[Any], Awaitable[Any]],
    write: Callable[[Any], Awaitable[None]],
    refusal: Callable[[Any], ApiError | None],
) -> int:
    """Answer the stream's fetches in order until the client closes its side; returns how many were read."""
    handled = 0
    async for request in requests:
        handled += 1
        if request.replica_id != -1:  # a follower's fetch needs its proof: FetchLog or FetchLogStream
            error = InvalidRequestError(f"replica_id {request.replica_id}: a consumer fetch stream carries -1 only")
            await write(tablet_pb2.FetchLogResponse(error=convert.error_info(error)))
            return handled
        refused = refusal(request)
        if refused is not None:
            await write(tablet_pb2.FetchLogResponse(error=convert.error_info(refused)))
            continue
        await write(await fetch(request))
    return handled
