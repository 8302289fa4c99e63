"""The periodic flush and offset checkpoint of a tablet server's logs, off the event loop (docs/storage.md §7).

Storage is synchronous (``log/`` knows nothing of asyncio): a ``LogManager`` offers the halves — the loop half
(``flush_rounds``, ``checkpoint_snapshot``), the thread half (``sync_and_close``, ``write_checkpoints``) and
the closing half (``end_flush_all``). This module runs the thread half in the default executor. Cancelled, a
step still waits for its thread (shielded) and moves no recovery point. With several data directories
(``LogDirs``), a disk error of one takes only that directory offline (``LogDirs.fail``); the others go on.

Who may call: the ``ReplicaManager``'s checkpoint task (and tests), on the server's loop.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from fluss_py.errors import StorageError
from fluss_py.log.dirs import LogDirs
from fluss_py.log.manager import LogManager, sync_and_close


async def flush_all(logs: LogManager | LogDirs) -> None:
    """``flush_all`` with the fsyncs in a worker thread, so the event loop keeps serving while the disk syncs."""
    await _each(logs, _flush)


async def checkpoint(logs: LogManager | LogDirs) -> None:
    """``checkpoint`` with the writes and fsyncs in a worker thread; the offsets are read here, on the loop."""
    await _each(logs, _checkpoint)


async def _flush(manager: LogManager) -> None:
    rounds = manager.flush_rounds()  # bounded rounds of the logs changed since their last flush
    try:
        for jobs in rounds:
            await _in_thread(sync_and_close, jobs)
            manager.end_flush_all(jobs)
    finally:
        rounds.close()  # stopped early: the logs not flushed stay due for the next flush


async def _checkpoint(manager: LogManager) -> None:
    if manager.checkpoint_due:  # no offset changed: the files already say it
        await _in_thread(manager.write_checkpoints, manager.checkpoint_snapshot())


async def _in_thread(fn: Callable[..., None], *args: object) -> None:
    work = asyncio.get_running_loop().run_in_executor(None, fn, *args)
    try:
        await asyncio.shield(work)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):  # the next flush (or close) syncs again
            await work
        raise


async def _each(logs: LogManager | LogDirs, step: Callable[[LogManager], Awaitable[None]]) -> None:
    if isinstance(logs, LogManager):
        await step(logs)
        return
    for path, manager in logs.online_managers():
        try:
            await step(manager)
        except (OSError, StorageError) as e:
            logs.fail(path, e)
