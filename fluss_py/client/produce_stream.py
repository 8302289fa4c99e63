"""The client's side of ``ProduceLogStream``: produce requests to one leader on one bidirectional stream,
matched to their answers by correlation id (docs/client.md "Produce on a stream").

``ProduceStreamClient.call(request, timeout)`` behaves like one unary ProduceLog call — the answer, or an
exception — so the sender does not know which way a request went::

    open ──> wait until the server accepted the stream (its initial metadata), writing nothing before
    call ──> id = next id; pending[id] = future ──> write (one writer at a time, in order) ──> await future
    reader task: each answer ──> pending.pop(answer.correlation_id).set_result(answer)  (unknown ids dropped)
    the stream ends (read or write fails, EOF) ──> every pending future fails with broken(error); next call
                                                     opens a new stream
    timeout / cancel of one call ──> that id is forgotten; the stream stays

A broken stream fails its pending requests with what ``broken`` makes of the failure (the transport maps a
gRPC status exactly as for a unary call): their fate is unknown, and the sender retries them with the same
writer id and sequence, as after a failed unary call.

Free of gRPC: the stream is a narrow ``DuplexStream`` (an in-memory one in the unit tests).
Who calls: ``GrpcTransport`` (one client per address), from the client's event loop; ``call`` from many tasks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from fluss_py.errors import NetworkExceptionError, RequestTimedOutError
from fluss_py.rpc.pb import tablet_pb2
from fluss_py.rpc.streams import PRODUCE_STREAM_ACCEPTED as ACCEPTED

log = logging.getLogger(__name__)


class DuplexStream(Protocol):
    """One open bidirectional stream: ``read`` returns the next answer and raises when the stream ended
    (EOF included); ``write`` raises when it cannot send; ``cancel`` ends it (idempotent)."""

    async def write(self, message: Any) -> None: ...

    async def read(self) -> Any: ...

    async def ready(self, marker: tuple[str, str]) -> None:
        """Return once the server accepted the stream (its initial metadata carries ``marker``); raise the
        stream's status when it refused it."""
        ...

    def cancel(self) -> None: ...


def with_correlation_id(request: Any, correlation_id: int) -> Any:
    """``request`` (a ProduceLogRequest or an ``EncodedRequest`` of one) carrying ``correlation_id``."""
    field = tablet_pb2.ProduceLogRequest(correlation_id=correlation_id).SerializeToString()
    if hasattr(request, "with_field"):
        return request.with_field(field)  # no copy of the batches
    message = tablet_pb2.ProduceLogRequest()
    message.CopyFrom(request)
    message.correlation_id = correlation_id
    return message


class _Open:
    """One open stream and what is pending on it (replaced, never reused, when it breaks)."""

    __slots__ = ("accepted", "outbox", "pending", "reader", "stream", "writing")

    def __init__(self, stream: DuplexStream) -> None:
        self.stream = stream
        self.accepted = False  # the server took the stream: messages may be written
        self.pending: dict[int, asyncio.Future[Any]] = {}
        self.outbox: deque[Any] = deque()
        self.writing = False
        self.reader: asyncio.Task[None] | None = None


class ProduceStreamClient:
    """At most one open stream to one leader, opened on the first call after the last one broke.
    Owns that stream and its reader task; ``close`` ends both."""

    def __init__(
        self, open_stream: Callable[[], DuplexStream], broken: Callable[[BaseException], BaseException], what: str
    ) -> None:
        self._open_stream = open_stream
        self._broken = broken  # the exception a stream's failure becomes for its pending calls
        self._what = what
        self._open: _Open | None = None
        self._next_id = 1
        self.opened = 0  # streams opened so far (tests, logs)

    @property
    def pending(self) -> int:
        return 0 if self._open is None else len(self._open.pending)

    async def call(self, request: Any, timeout: float) -> Any:
        """Send ``request`` on the stream and return its answer (see the module docstring)."""
        current = self._open
        if current is None:
            current = self._open = _Open(self._open_stream())
            self.opened += 1
            current.reader = asyncio.get_running_loop().create_task(self._read(current), name="produce-stream-read")
        correlation_id = self._next_id
        self._next_id += 1
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        current.pending[correlation_id] = future
        try:
            async with asyncio.timeout(timeout):
                current.outbox.append(with_correlation_id(request, correlation_id))
                if not current.writing:
                    await self._write(current)
                return await future
        except TimeoutError:
            raise RequestTimedOutError(f"{self._what}: no answer within {timeout:.1f}s") from None
        finally:
            current.pending.pop(correlation_id, None)

    async def _write(self, current: _Open) -> None:
        """Write the outbox in order (the one writer of ``current`` until it is empty)."""
        current.writing = True
        try:
            if not current.accepted:
                await current.stream.ready(ACCEPTED)
                current.accepted = True
            while current.outbox and self._open is current:
                await current.stream.write(current.outbox.popleft())
        except BaseException as e:  # a cancelled write may leave the stream half-written: end it
            self._end(current, e)
            if isinstance(e, asyncio.CancelledError):
                raise
        finally:
            current.writing = False

    async def _read(self, current: _Open) -> None:
        try:
            while True:
                answer = await current.stream.read()
                future = current.pending.pop(answer.correlation_id, None)
                if future is not None and not future.done():
                    future.set_result(answer)
        except asyncio.CancelledError:
            self._end(current, NetworkExceptionError(f"{self._what}: the stream was closed"))
            raise
        except BaseException as e:
            self._end(current, e)

    def _end(self, current: _Open, cause: BaseException) -> None:
        """``current`` is over: fail what is pending on it with what ``cause`` means, cancel it."""
        if self._open is current:
            self._open = None
        if isinstance(cause, asyncio.CancelledError):
            error: BaseException = NetworkExceptionError(f"{self._what}: a write was cancelled")
        else:
            error = self._broken(cause)
        pending, current.pending = current.pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(error)
        current.outbox.clear()
        current.stream.cancel()
        if current.reader is not None and current.reader is not asyncio.current_task():
            current.reader.cancel()
        if pending:
            log.debug("%s: the stream ended with %d request(s) pending: %s", self._what, len(pending), error)

    async def close(self) -> None:
        current, self._open = self._open, None
        if current is None:
            return
        self._end(current, NetworkExceptionError(f"{self._what}: the client closed"))
        if current.reader is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await current.reader
