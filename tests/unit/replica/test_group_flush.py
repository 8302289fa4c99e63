"""GroupFlusher: one round per wake-up covers every log requested before it began; later requests wait for
the next round; a failed round and a stopped task answer their waiters (no socket, no disk)."""

from __future__ import annotations

import asyncio
import contextlib

from fluss_py.errors import ApiError, StorageError
from fluss_py.log.results import FlushJob
from fluss_py.replica.group_flush import GroupFlusher


class FakeLog:
    """A log whose flush has nothing to fsync (a job without descriptors), counting the steps."""

    def __init__(self, fail: bool = False) -> None:
        self.begun = self.ended = 0
        self.fail = fail

    def begin_flush(self) -> FlushJob:
        self.begun += 1
        if self.fail:
            raise StorageError("flush failed: [Errno 28] No space left on device")
        return FlushJob(self, 0, 0)  # type: ignore[arg-type]

    def end_flush(self, job: FlushJob) -> None:
        self.ended += 1


class Recorder:
    def __init__(self) -> None:
        self.flushed: list[list[FakeLog]] = []
        self.failed: list[tuple[list[FakeLog], ApiError]] = []

    def flusher(self) -> GroupFlusher:
        return GroupFlusher(self.flushed.append, lambda logs, e: self.failed.append((logs, e)))


async def test_one_round_covers_every_log_requested_before_it_began_later_ones_wait_for_the_next() -> None:
    rec = Recorder()
    flusher = rec.flusher()
    task = asyncio.create_task(flusher.run())
    try:
        a, b, c = FakeLog(), FakeLog(), FakeLog()
        first = flusher.request(a)
        assert flusher.request(b) is first and flusher.request(a) is first  # a twice: flushed once
        while not a.begun:
            await asyncio.sleep(0)
        later = flusher.request(c)  # the first round has begun: c waits for the next
        assert later is not first
        assert await first is None and (a.begun, a.ended, b.begun) == (1, 1, 1)
        assert await later is None and c.ended == 1
        assert rec.flushed == [[a, b], [c]] and flusher.rounds == 2 and flusher.flushed_logs == 3
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_failed_round_answers_its_waiters_and_the_next_round_runs() -> None:
    rec = Recorder()
    flusher = rec.flusher()
    task = asyncio.create_task(flusher.run())
    try:
        bad, good = FakeLog(fail=True), FakeLog()
        outcome = await flusher.request(bad)
        assert isinstance(outcome, StorageError) and "No space left" in outcome.message
        assert rec.failed and rec.failed[0][0] == [bad] and flusher.failures == 1
        try:
            await flusher.flush([good, bad])
            raise AssertionError("flush() of a failing log returned")
        except StorageError:
            pass
        bad.fail = False
        await flusher.flush([good, bad])
        assert flusher.rounds == 1 and not task.done()  # the task survives failed rounds
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_stopped_flusher_answers_whoever_waits() -> None:
    flusher = Recorder().flusher()
    task = asyncio.create_task(flusher.run())
    log = FakeLog()

    def cancelled() -> FlushJob:
        raise asyncio.CancelledError  # the task is cancelled in the middle of a round (shutdown)

    log.begin_flush = cancelled  # type: ignore[method-assign]
    waiting = flusher.request(log)
    with contextlib.suppress(asyncio.CancelledError):
        await task
    outcome = await waiting  # answered, not left hanging (a follower fetcher may be waiting on it)
    assert isinstance(outcome, StorageError) and "stopped" in outcome.message
