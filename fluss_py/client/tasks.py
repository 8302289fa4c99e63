"""``TaskSet``: the background tasks a client object owns (request tasks of the sender and fetcher).

Each task is tracked until done; a task that dies with an exception is reported to ``on_error`` (never
swallowed), and ``on_done`` runs after every task (the owners use it to wake their loop). ``cancel_all``
cancels and awaits them. One event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from typing import Any

log = logging.getLogger(__name__)


class TaskSet:
    def __init__(self, on_error: Callable[[BaseException], None], on_done: Callable[[], None]) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()
        self._on_error = on_error
        self._on_done = on_done

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str | None = None) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("background task %s failed", task.get_name(), exc_info=exc)
            self._on_error(exc)
        self._on_done()

    async def cancel_all(self, *extra: asyncio.Task[Any] | None) -> None:
        tasks = [t for t in (*extra, *self._tasks) if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
