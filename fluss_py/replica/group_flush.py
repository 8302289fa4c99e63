"""GroupFlusher: the group commit of ``log.flush.on-ack`` (docs/replication.md "Durable acknowledgement").

Appends to on-ack logs (the leader's, and the follower fetcher's) request a flush of their log; one task runs
rounds. A round takes every log requested since the previous round began, runs the three steps of
docs/storage.md §7 (``begin_flush`` on the loop, the fsyncs in a worker thread, ``end_flush`` on the loop),
then reports the logs to ``on_flushed``. Requests made while a round syncs go to the next round, so one
fsync per segment covers every batch appended meanwhile, however many requests they came in::

    request(log) ──► pending ──(round starts)──► syncing ──► on_flushed(logs); the round's future resolves
                       ▲                            │
                       └── requests meanwhile ◄─────┘  (next round)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable

from fluss_py.errors import ApiError, StorageError
from fluss_py.log.manager import sync_and_close
from fluss_py.log.results import FlushJob
from fluss_py.log.tablet import LogTablet

log = logging.getLogger(__name__)

FlushOutcome = BaseException | None
"""A round's result: None when every requested log was fsynced, else the error (as a value: nobody has to
retrieve it)."""


class GroupFlusher:
    """Owns the pending set of logs to flush and the flush task. Owned by ``ReplicaManager`` (which starts
    and stops ``run()`` as one of its background tasks); ``request``/``flush`` are called on the event loop
    by the manager's produce path and by the replica fetchers.

    ``on_flushed(logs)`` runs on the loop after each successful round; ``on_failed(logs, error)`` after a
    failed one (the manager answers the produces waiting on those logs).
    """

    def __init__(
        self,
        on_flushed: Callable[[list[LogTablet]], None],
        on_failed: Callable[[list[LogTablet], ApiError], None],
    ) -> None:
        self._on_flushed = on_flushed
        self._on_failed = on_failed
        self._pending: dict[int, LogTablet] = {}  # id(log) -> log, in request order
        self._next: asyncio.Future[FlushOutcome] | None = None  # resolves when the next round ends
        self._wakeup: asyncio.Event | None = None
        self.rounds = 0  # completed rounds (fsync batches), for /metrics and the group-commit test
        self.flushed_logs = 0  # log flushes they covered
        self.failures = 0

    def request(self, tablet: LogTablet) -> asyncio.Future[FlushOutcome]:
        """Flush ``tablet`` in the next round; the future resolves when that round ended."""
        self._pending[id(tablet)] = tablet
        if self._next is None or self._next.done():
            self._next = asyncio.get_running_loop().create_future()
        if self._wakeup is None:
            self._wakeup = asyncio.Event()
        self._wakeup.set()
        return self._next

    async def flush(self, tablets: Iterable[LogTablet]) -> None:
        """Request ``tablets`` and wait for the round that syncs them; raises StorageError if it failed."""
        future = None
        for t in tablets:
            future = self.request(t)
        if future is None:
            return
        outcome = await asyncio.shield(future)
        if outcome is not None:
            raise outcome

    async def run(self) -> None:
        """The flush task: one round per wake-up, until cancelled."""
        if self._wakeup is None:
            self._wakeup = asyncio.Event()
        done: asyncio.Future[FlushOutcome] | None = None
        try:
            while True:
                await self._wakeup.wait()
                self._wakeup.clear()
                tablets, self._pending = list(self._pending.values()), {}
                done, self._next = self._next, None
                outcome = await self._round(tablets)
                if done is not None and not done.done():
                    done.set_result(outcome)
        finally:  # cancelled (shutdown) or died: nobody may wait forever for a round that will not come
            stopped = StorageError("the group flush task stopped")
            for future in (done, self._next):
                if future is not None and not future.done():
                    future.set_result(stopped)

    async def _round(self, tablets: list[LogTablet]) -> FlushOutcome:
        jobs: list[FlushJob] = []
        jobs_closing: list[FlushJob] = []
        try:
            for t in tablets:
                job = t.begin_flush()
                if job is not None:
                    jobs.append(job)
            if jobs:
                sync = asyncio.get_running_loop().run_in_executor(None, sync_and_close, jobs)
                jobs_closing, jobs = jobs, []
                try:
                    await asyncio.shield(sync)
                except asyncio.CancelledError:
                    with contextlib.suppress(Exception):  # the thread closes the descriptors; nothing moves
                        await sync
                    raise
                for job in jobs_closing:
                    job.tablet.end_flush(job)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            for job in jobs:  # begun but never handed to the thread
                job.close()
            for job in jobs_closing:  # a failed fsync: that log's data dir goes offline (docs/storage.md §10)
                job.report_failure()
            self.failures += 1
            error = e if isinstance(e, ApiError) else StorageError(f"group flush failed: {e}")
            log.error("group flush of %d logs failed: %s", len(tablets), error)
            self._on_failed(tablets, error)
            return error
        self.rounds += 1
        self.flushed_logs += len(tablets)
        self._on_flushed(tablets)
        return None
