"""The leader's side of a ``ProduceLogStream``: produce requests on one bidirectional stream, each handled
as a unary ProduceLog and answered with its correlation id (docs/client.md "Produce on a stream").

::

    read a message ──(room for it? else wait: at most max_pending unanswered)──> refused? ──yes──> answer the refusal
                                                                                  │no    └─raised──> answer those
                                                                                  v                 in flight, end
                                          a task: produce(request) ──> answer (in completion order)

Messages are read in order and each one's task is started in that order (the append is the synchronous
first step of ``produce``, so the appends of a stream happen in its order). Answers go out one write at a
time: the task that finds no write in progress writes, the others queue behind it. The stream ending (the
client cancelled or went away, a write failed) cancels the unanswered tasks, as the end of a unary call
cancels its handler: the client treats their fate as unknown and retries them under the same writer id and
sequence. The client closing its side ends the stream once every message read has been answered. A refusal
check that raises (the interceptor's ``StreamRevoked``: the stream's principal is no longer proven) ends the
stream the same way: the message it was asked about is not handled, the messages read before it are
answered (their appends may have happened: the client must learn their fate), then the exception goes on
to the interceptor, which closes the stream with it.

Free of gRPC (the servicer passes the request iterator, ``context.write``, the replica layer's produce and the
interceptor's per-message check), so unit tests drive it over in-memory streams.

Who calls: the tablet servicer's ``ProduceLogStream`` handler, one ``ProduceStreamHandler`` per stream, on
the server's loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from fluss_py.errors import ApiError
from fluss_py.rpc import convert
from fluss_py.rpc.pb import tablet_pb2

log = logging.getLogger(__name__)

MAX_PENDING = 64
"""Messages of one stream handled at once; past it the stream is not read (HTTP/2 flow control holds the client)."""


class ProduceStreamHandler:
    """One ProduceLogStream at the leader. ``run`` once, from the stream's handler task; owns the message
    tasks it starts and the queue of answers."""

    def __init__(
        self,
        produce: Callable[[Any], Awaitable[Any]],
        write: Callable[[Any], Awaitable[None]],
        refusal: Callable[[Any], ApiError | None],
        max_pending: int = MAX_PENDING,
    ) -> None:
        self._produce = produce
        self._write = write
        self._refusal = refusal
        self._room = asyncio.Semaphore(max_pending)
        self._tasks: set[asyncio.Task[None]] = set()
        self._outbox: deque[Any] = deque()
        self._writing = False
        self._main: asyncio.Task[Any] | None = None
        self.handled = 0  # messages read (tests, logs)

    async def run(self, requests: AsyncIterator[Any]) -> None:
        """Handle the stream's messages until the client closes its side (then answer what is left) or the
        stream ends (cancelled: the unanswered messages' tasks are cancelled)."""
        self._main = asyncio.current_task()
        try:
            async for request in requests:
                await self._room.acquire()
                self.handled += 1
                try:
                    refused = self._refusal(request)
                except Exception:  # the stream may not go on: answer what was read before this message
                    await self._finish()
                    raise
                if refused is not None:
                    answer = tablet_pb2.ProduceLogResponse(
                        error=convert.error_info(refused), correlation_id=request.correlation_id
                    )
                    await self._answer(answer)
                    continue
                task = asyncio.get_running_loop().create_task(self._handle(request))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            await self._finish()
        finally:
            for task in list(self._tasks):
                task.cancel()

    async def _finish(self) -> None:
        """Wait until every message read so far has been answered."""
        while self._tasks:
            await asyncio.wait(set(self._tasks))

    async def _handle(self, request: Any) -> None:
        try:
            response = await self._produce(request)
        except Exception:
            log.exception("ProduceLogStream: a message failed unexpectedly; ending the stream")
            self._end()
            return
        response.correlation_id = request.correlation_id
        await self._answer(response)

    async def _answer(self, response: Any) -> None:
        """Queue ``response``; write the queue unless another task is writing it already."""
        self._outbox.append(response)
        if self._writing:
            return
        self._writing = True
        try:
            while self._outbox:
                await self._write(self._outbox.popleft())
                self._room.release()
        except asyncio.CancelledError:
            raise
        except Exception as e:  # the stream is gone: nothing more can be answered on it
            log.debug("ProduceLogStream: write failed (%s); ending the stream", e)
            self._end()
        finally:
            self._writing = False

    def _end(self) -> None:
        if self._main is not None and not self._main.done():
            self._main.cancel()
