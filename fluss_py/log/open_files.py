"""A bound on the segment files a process holds open: least recently used descriptors are closed first.

A tablet server with 20,000 replicas has at least 20,000 segments, more than a usual ``ulimit -n`` allows
(and a hard limit cannot be raised from inside the process). So a ``LogSegment`` holds its ``.log``
descriptor only while it is among the ``capacity`` most recently used; the others are closed and reopened on
their next use (``open()`` of a file already in the page cache: a few microseconds). Closing loses nothing:
written bytes are in the page cache, and an ``fsync`` through a later descriptor syncs the whole file.

Invariant (docs/storage.md §12): a segment's descriptor is used only within one synchronous call on the
thread that owns the logs (the event loop), never kept across an ``await`` or handed to another thread;
threads get descriptors of their own (``os.dup``/``os.open``, closed by them). A descriptor can therefore be
closed by an eviction only between two uses, never during one.

Who may call: the thread that owns the logs (the tablet server's event loop; a tool's main thread).
"""

from __future__ import annotations

import os
import resource
from collections import OrderedDict
from typing import Protocol

MIN_CAPACITY = 16
SHARE_OF_LIMIT = 0.5  # of RLIMIT_NOFILE: the rest is for sockets, index writes, checkpoints, flush jobs


class Evictable(Protocol):
    def evict(self) -> None:
        """Close the descriptor (the owner reopens it on its next use)."""


def default_capacity() -> int:
    """Half of this process's soft ``RLIMIT_NOFILE`` (at least ``MIN_CAPACITY``)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        soft = 1 << 20
    return max(MIN_CAPACITY, int(soft * SHARE_OF_LIMIT))


class OpenFiles:
    """The open descriptors of segments, most recently used last; at most ``capacity`` at a time."""

    def __init__(self, capacity: int | None = None) -> None:
        self.capacity = max(1, capacity if capacity is not None else default_capacity())
        self._open: OrderedDict[int, Evictable] = OrderedDict()  # id(owner) -> owner
        self.opened = 0  # opens through this registry (for tests and metrics)
        self.evicted = 0

    def open(self, owner: Evictable, path: os.PathLike[str] | str, flags: int, mode: int = 0o644) -> int:
        """Open ``path`` for ``owner`` (which must not hold a descriptor); evicts the least recently used."""
        while len(self._open) >= self.capacity:
            _, victim = self._open.popitem(last=False)
            self.evicted += 1
            victim.evict()
        fd = os.open(path, flags, mode)
        self._open[id(owner)] = owner
        self.opened += 1
        return fd

    def touch(self, owner: Evictable) -> None:
        """``owner`` used its descriptor: it becomes the most recently used."""
        self._open.move_to_end(id(owner))

    def release(self, owner: Evictable) -> None:
        """``owner`` closed its descriptor itself."""
        self._open.pop(id(owner), None)

    def __len__(self) -> int:
        return len(self._open)


SEGMENTS = OpenFiles()
"""The process's registry of segment descriptors."""
