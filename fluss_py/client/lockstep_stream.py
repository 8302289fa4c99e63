"""The client's side of ``ConsumerFetchStream``: one request, then its answer, on an open bidirectional stream
(docs/client.md "Consumer fetches on a stream").

``LockstepStreamClient.call(request, timeout)`` behaves like one unary call — the answer, or an exception —
so the caller does not know which way a request went::

    call ──> take an idle open stream, else open one (and wait until the server accepted it: its initial
             metadata, writing nothing before) ──> write ──> read its answer ──> the stream is idle again
    anything else (the stream failed or ended, a timeout, a cancel) ──> that stream is ended, never reused:
             an answer still on its way can never be taken for the answer to a later request

Lockstep: a stream carries one exchange at a time, answers in request order. Two calls at once (two consumers
on one transport) use two streams. A failed stream becomes what ``broken`` makes of the failure (the
transport maps a gRPC status exactly as for a unary call); a timeout is REQUEST_TIMED_OUT.

Free of gRPC: the stream is a narrow ``DuplexStream`` (an in-memory one in the unit tests).
Who calls: ``GrpcTransport`` (one client per address), from the client's event loop; ``call`` from many tasks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from fluss_py.client.produce_stream import DuplexStream
from fluss_py.errors import NetworkExceptionError, RequestTimedOutError

MAX_IDLE = 4
"""Open streams kept for reuse per address; one more than this is ended after its exchange."""


class LockstepStreamClient:
    """The open streams to one server: idle ones kept for the next call, busy ones tracked so that ``close``
    ends them. Owned by ``GrpcTransport``; one event loop."""

    def __init__(
        self,
        open_stream: Callable[[], DuplexStream],
        broken: Callable[[BaseException], BaseException],
        accepted: tuple[str, str],
        what: str,
    ) -> None:
        self._open_stream = open_stream
        self._broken = broken  # the exception a stream's failure becomes for its call
        self._accepted = accepted  # the initial metadata by which the server takes a stream
        self._what = what
        self._idle: list[DuplexStream] = []
        self._busy: set[DuplexStream] = set()
        self._closed = False
        self.opened = 0  # streams opened so far (tests, logs)

    async def call(self, request: Any, timeout: float) -> Any:
        """Send ``request`` and return its answer (see the module docstring)."""
        if self._idle:
            stream, fresh = self._idle.pop(), False
        else:
            stream, fresh = self._open_stream(), True
            self.opened += 1
        self._busy.add(stream)
        try:
            async with asyncio.timeout(timeout):
                if fresh:
                    await stream.ready(self._accepted)
                await stream.write(request)
                answer = await stream.read()
        except TimeoutError:
            stream.cancel()
            raise RequestTimedOutError(f"{self._what}: no answer within {timeout:.1f}s") from None
        except asyncio.CancelledError:
            stream.cancel()
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # this task is being cancelled
            # the stream was cancelled under us (``close``; grpc.aio's read then raises CancelledError)
            raise NetworkExceptionError(f"{self._what}: the stream was closed") from None
        except BaseException as e:
            stream.cancel()
            raise self._broken(e) from e
        finally:
            self._busy.discard(stream)
        if self._closed or len(self._idle) >= MAX_IDLE:
            stream.cancel()
        else:
            self._idle.append(stream)
        return answer

    def close(self) -> None:
        """End every stream, idle or busy (a busy call then fails as its stream broke)."""
        self._closed = True
        streams, self._idle = [*self._idle, *self._busy], []
        for stream in streams:
            stream.cancel()
