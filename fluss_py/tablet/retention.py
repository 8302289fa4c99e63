"""One pass of the tablet server's retention loop: ``table.log.ttl`` / ``table.log.retention-bytes`` and idle
writer expiry, log by log on the loop (a ``LogTablet`` is single-owner). The log of a primary-key bucket only
expires idle writers: it is the changelog its KV is rebuilt from (docs/primary-key-tables.md §1).

A pass gives the loop back (``pause``) after every log that deleted segments (unlinks are real disk work)
and otherwise every ``YIELD_EVERY`` logs: the pass before yielded after every log, 20,000 loop turns a
minute for a server of 20,000 idle logs, a burst of ~0.2 s of CPU on a server with nothing to do.

Who may call: ``TabletServer._retention_loop``, on the tablet server's loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

from fluss_py.log.tablet import LogTablet
from fluss_py.types import TableBucket

log = logging.getLogger(__name__)

YIELD_EVERY = 256  # idle logs checked between two loop turns (a check is a few microseconds)


class Logs(Protocol):
    """A ``LogManager`` or ``LogDirs``."""

    @property
    def logs(self) -> dict[TableBucket, LogTablet]: ...

    def get(self, tb: TableBucket) -> LogTablet | None: ...


async def _next_turn() -> None:
    await asyncio.sleep(0)


async def retention_pass(logs: Logs, now_ms: int, pause: Callable[[], Awaitable[None]] = _next_turn) -> int:
    """Apply retention to every log held now; returns how many segments were deleted. A log deleted or whose
    directory failed during the pass is skipped; one failing log does not stop the others (a disk error
    also takes its directory offline: ``LogDirs`` is told by the log itself)."""
    deleted = unyielded = 0
    for tb, tablet in list(logs.logs.items()):
        if logs.get(tb) is not tablet:  # deleted (StopReplica) or its dir failed meanwhile
            continue
        n = 0
        try:
            if tablet.holds_changelog:  # a primary-key bucket's log is its KV's only source: kept whole
                tablet.expire_writers(now_ms)
            else:
                n = tablet.apply_retention(now_ms)
        except Exception:  # it stays visible in the log, and is tried again next pass
            log.exception("Retention of bucket %s failed", tb)
        deleted += n
        unyielded += 1
        if n or unyielded >= YIELD_EVERY:
            unyielded = 0
            await pause()
    return deleted
