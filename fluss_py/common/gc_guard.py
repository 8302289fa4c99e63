"""Keeping a server's memory bounded when garbage arrives faster than the cyclic collector counts it.

CPython starts a young collection after a number of container *allocations* (``GC_THRESHOLDS`` in
``cli/servers.py``: 50,000 in a server, so that a large request's temporaries are freed by reference counting
instead of being promoted, which made full collections cost seconds at 20,000 buckets). It does not count
bytes: a reference cycle of a few objects holding a megabyte of bytes (a refused HTTP request used to leave
one, docs/observability.md "Memory") counts as a few allocations, and hundreds of them pile up before the
next young collection.

``GcGuard.run()`` reads the process's resident set size (``/proc/self/statm``, ten reads a second, ~10 µs
each) and, whenever it grew by ``step`` bytes since the last collection the guard ran, collects the young
generations (generation 0, or 1 when CPython's own trigger would take it: ``young_generation``; never the full
heap, so the cost is that of the objects allocated since, milliseconds), then calls glibc's ``malloc_trim``
(the allocator keeps freed pages otherwise: the RSS would not show what was freed and the next garbage would
be counted from a higher mark). A growth the collection does not take back (a heap that grows for good:
replicas loaded, caches filled) becomes the new baseline, so it costs one young collection per ``step``::

    rss < baseline             -> baseline = rss (memory went back)
    rss - baseline < step      -> nothing
    otherwise                  -> collect the young generations, trim; baseline = RSS after it

Measured with the HTTP port's own fix taken out (``common/http_input.py``; 1,000 requests with a 1 MB
header, each leaving a cycle): a process grew by 1,126 MB without the guard, 51 MB with it.

``due(rss, baseline, step)`` is that decision (pure). Where ``/proc`` cannot be read the guard stops at its
first read and says so once.

Who may call: ``cli/servers.serve`` spawns ``run()`` as a task of the server's loop and cancels it at exit.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import gc
import logging
import os
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

STEP_BYTES = 32 * 1024 * 1024
INTERVAL_S = 0.1
LOG_EVERY_S = 60.0
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def due(rss: int, baseline: int, step: int) -> bool:
    """Has the RSS grown by ``step`` bytes since ``baseline``?"""
    return rss - baseline >= step


def young_generation(counts: tuple[int, int, int], thresholds: tuple[int, ...]) -> int:
    """The generation a young collection should take, as CPython's own trigger picks it: 1 once generation
    0 was collected ``thresholds[1]`` times since generation 1 was (each of those promoted what was alive
    then), else 0. Never 2: a full collection walks every object of every replica."""
    return 1 if counts[1] >= thresholds[1] else 0


def resident_bytes() -> int | None:
    """This process's resident set size, None where ``/proc/self/statm`` cannot be read."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


def malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim`` (returns the free pages of the heap to the system), None elsewhere."""
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim  # type: ignore[no-any-return]
    except (OSError, AttributeError):
        return None


class GcGuard:
    """Owns the RSS baseline and the count of collections it ran (``collections``, ``freed``)."""

    def __init__(
        self,
        step: int = STEP_BYTES,
        interval: float = INTERVAL_S,
        rss: Callable[[], int | None] = resident_bytes,
        collect: Callable[[int], int] = gc.collect,
        trim: Callable[[int], int] | None = None,
    ) -> None:
        self.step = step
        self.interval = interval
        self._rss = rss
        self._collect = collect
        self._trim = trim if trim is not None else malloc_trim()
        self.collections = 0
        self.freed = 0
        self._logged = -LOG_EVERY_S

    def check(self, baseline: int) -> int | None:
        """One round: collect the young generations when due; the new baseline (None: RSS unknown)."""
        rss = self._rss()
        if rss is None:
            return None
        if rss < baseline:  # memory went back: growth counts from here
            return rss
        if not due(rss, baseline, self.step):
            return baseline
        freed = self._collect(young_generation(gc.get_count(), gc.get_threshold()))
        if self._trim is not None:
            self._trim(0)  # hand the freed pages back: else the RSS would stay and hide what was freed
        after = self._rss() or rss
        self.collections += 1
        self.freed += freed
        now = time.monotonic()
        if now - self._logged >= LOG_EVERY_S:  # a flood of garbage would otherwise log every second
            self._logged = now
            log.info("RSS grew %d MiB: young collection freed %d objects (RSS now %d MiB; %d such collections)",
                     (rss - baseline) >> 20, freed, after >> 20, self.collections)  # fmt: skip
        return after

    async def run(self) -> None:
        baseline = self._rss()
        if baseline is None:
            log.info("no /proc/self/statm: memory-driven collections are off")
            return
        while True:
            await asyncio.sleep(self.interval)
            checked = self.check(baseline)
            if checked is None:
                return
            baseline = checked
