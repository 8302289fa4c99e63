"""The coordinator leader's single-writer event loop (Fluss's CoordinatorEventManager + processor thread).

One asyncio task takes events off one queue and applies them one at a time with the handler registered
for the event's type; handlers are the only code that mutates ``CoordinatorContext``. Before each event
the loop awaits ``guard()``, which raises when this process may no longer act as leader (ZooKeeper
session lost, or the process was paused long enough for the session to expire): a zombie leader never
acts on queued events. A handler that hits ``EpochFencedError`` (a newer leader fenced our epoch) fails
its event with NOT_COORDINATOR_LEADER and calls ``on_fenced`` so the lifecycle steps down.

    put(event)            enqueue (any coroutine on the loop: RPC handlers, watch callbacks)
    await submit(event)   enqueue an event carrying a Future and wait for the handler's result
    start() / stop()      owned by the leader services; stop fails every queued Future

Who may call: coroutines and callbacks on the process's asyncio loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from fluss_py.coordinator.events import Event
from fluss_py.errors import NotCoordinatorLeaderError
from fluss_py.zk.values import EpochFencedError

log = logging.getLogger(__name__)

Handler = Callable[[Any], Awaitable[Any]]


class CoordinatorEventLoop:
    """Owns the event queue and the task applying events; the single writer of the leader's context."""

    def __init__(
        self,
        guard: Callable[[], Awaitable[None]],
        on_fenced: Callable[[], None],
        name: str = "coordinator-event-loop",
    ) -> None:
        self._guard = guard
        self._on_fenced = on_fenced
        self._name = name
        self._handlers: dict[type[Event], Handler] = {}
        self._queue: asyncio.Queue[Event] = asyncio.Queue()
        self._task: asyncio.Task | None = None
        self._accepting = True
        self.processed = 0
        self.last_event_ms = 0.0

    def register(self, event_type: type[Event], handler: Handler) -> None:
        """Set the handler of one event type (before ``start``); a second registration replaces the first."""
        self._handlers[event_type] = handler

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def put(self, event: Event) -> None:
        if not self._accepting:
            _fail(event, NotCoordinatorLeaderError("the coordinator leader is shutting down its services"))
            return
        self._queue.put_nowait(event)

    async def submit(self, event: Event) -> Any:
        event.future = asyncio.get_running_loop().create_future()
        self.put(event)
        return await event.future

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=self._name)

    async def stop(self) -> None:
        """Stop taking events, cancel the task and fail every queued event's Future."""
        self._accepting = False
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
        while not self._queue.empty():
            _fail(self._queue.get_nowait(), NotCoordinatorLeaderError("this coordinator lost its leadership"))

    async def _run(self) -> None:
        while True:
            # One loop turn between events: whoever waits on the last event's Future (an RPC handler with its
            # answer ready) runs before the next handler, which may hold the loop for a second (a death's
            # ISR round at 20,000 buckets) without giving it back.
            await asyncio.sleep(0)
            event = await self._queue.get()
            try:
                await self._guard()
            except Exception as e:
                log.warning("Not applying %s: %s", type(event).__name__, e)
                _fail(event, NotCoordinatorLeaderError(f"this coordinator may no longer act as leader: {e}"))
                continue
            handler = self._handlers.get(type(event))
            started = time.monotonic()
            try:
                if handler is None:
                    raise NotImplementedError(f"no handler for {type(event).__name__}")
                result = await handler(event)
            except EpochFencedError as e:
                log.error("Coordinator epoch fenced while applying %s: %s", type(event).__name__, e)
                _fail(event, NotCoordinatorLeaderError(f"fenced by a newer coordinator leader: {e}"))
                self._on_fenced()
                continue
            except asyncio.CancelledError:
                _fail(event, NotCoordinatorLeaderError("this coordinator lost its leadership"))
                raise
            except Exception as e:
                if event.future is None:
                    log.exception("Handling %s failed", type(event).__name__)
                _fail(event, e)
            else:
                if event.future is not None and not event.future.done():
                    event.future.set_result(result)
            finally:
                self.processed += 1
                self.last_event_ms = (time.monotonic() - started) * 1000


def _fail(event: Event, exc: BaseException) -> None:
    if event.future is not None and not event.future.done():
        event.future.set_exception(exc)


class Ticker:
    """Owns one task that puts ``make_event()`` on an event loop every ``interval`` seconds (first right away
    when ``immediately``). Used by the leader's periodic managers; ``close`` cancels and awaits the task."""

    def __init__(self, name: str, interval: float, make_event: Callable[[], Event], immediately: bool = False) -> None:
        self._name = name
        self.interval = interval
        self._make_event = make_event
        self._immediately = immediately
        self._task: asyncio.Task | None = None

    def start(self, loop: Any) -> None:
        async def run() -> None:
            if not self._immediately:
                await asyncio.sleep(self.interval)
            while True:
                loop.put(self._make_event())
                await asyncio.sleep(self.interval)

        self._task = asyncio.get_running_loop().create_task(run(), name=self._name)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
