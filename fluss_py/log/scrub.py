"""Checking segments that recovery would otherwise trust: the CRC of every batch (docs/storage.md §6, §9).

Two callers, one check:

- the loader, after an unclean shutdown, on every segment below the recovery point and on the segment
  holding it up to the batch holding it (those bytes are loaded from indexes; a byte flipped there by the
  medium, or a write an fsync claimed and the disk lost, would otherwise go unnoticed until a reader met
  it);
- the ``Scrubber`` of the replica layer, which walks every closed segment of every log at a bounded rate
  (``log.scrub.rate``), in a worker thread, one pass every ``log.scrub.interval``.

A finding is a ``Corruption``: the base offset of the first bad batch (what the log is truncated to when
the replica repairs itself from the leader), its position and why. Nothing here changes a file.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fluss_py.log.segment import scan_batches
from fluss_py.record.batch import LOG_OVERHEAD, RecordBatch

SCAN_BUFFER = 1024 * 1024  # reused for every read of one check


@dataclass(frozen=True, slots=True)
class Corruption:
    """The first bad batch of a segment: ``offset`` is where the good prefix ends."""

    segment: Path
    segment_base: int
    offset: int
    position: int
    reason: str

    def __str__(self) -> str:
        return f"{self.segment}: corrupt batch at offset {self.offset} (position {self.position}): {self.reason}"


class RateLimiter:
    """Sleeps the calling thread so that ``take(n)`` calls average at most ``bytes_per_s`` (0: unlimited).
    Used from one worker thread at a time."""

    def __init__(self, bytes_per_s: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.bytes_per_s = bytes_per_s
        self._clock = clock
        self._start = clock()
        self._taken = 0
        self.total = 0  # bytes taken since creation (the scrubber's progress)

    def take(self, n: int) -> None:
        self.total += n
        if self.bytes_per_s <= 0:
            return
        self._taken += n
        ahead = self._taken / self.bytes_per_s - (self._clock() - self._start)
        if ahead > 0:
            time.sleep(min(ahead, 1.0))
        if self._taken > self.bytes_per_s * 10:  # forget the distant past (no burst after an idle hour)
            self._start, self._taken = self._clock(), 0


def verify_fd(fd: int, path: Path, base_offset: int, end: int, limiter: RateLimiter | None = None) -> Corruption | None:
    """Check every batch of the segment open at ``fd`` up to position ``end``: each one's header and CRC, the
    base offsets following on, and the batches filling ``end`` exactly. None when all is well."""
    return check_batches(fd, path, base_offset, end, limiter=limiter).corruption


@dataclass(frozen=True, slots=True)
class Checked:
    """What ``check_batches`` found: the first bad batch (None: none), and where the check stopped — at the
    bad batch, at the batch holding ``stop_offset``, or at the end of the whole batches."""

    corruption: Corruption | None
    position: int
    offset: int  # the base offset expected at ``position``


def check_batches(
    fd: int,
    path: Path,
    base_offset: int,
    end: int,
    *,
    start: tuple[int, int] | None = None,
    stop_offset: int | None = None,
    limiter: RateLimiter | None = None,
) -> Checked:
    """``verify_fd``'s walk from ``start`` (offset, position; default the segment's start), stopping before the
    batch holding ``stop_offset`` (the recovery point: the loader re-validates from that batch on). Bytes left
    after the last whole batch are a corruption when they lie below ``stop_offset`` (or with no stop offset)."""
    expected, pos = start if start is not None else (base_offset, 0)
    for pos, h, view in scan_batches(fd, pos, end, bytearray(SCAN_BUFFER)):  # noqa: B020 - pos moves on
        if h[0] != expected:
            return Checked(Corruption(path, base_offset, expected, pos, f"base offset {h[0]}, expected {expected}"),
                           pos, expected)  # fmt: skip
        if stop_offset is not None and h[0] + h[6] >= stop_offset:
            return Checked(None, pos, expected)
        try:
            RecordBatch(view).ensure_valid()
        except Exception as e:  # any invalid batch ends the good prefix
            return Checked(Corruption(path, base_offset, expected, pos, str(e)), pos, expected)
        expected = h[0] + h[6] + 1
        pos += h[1] + LOG_OVERHEAD
        if limiter is not None:
            limiter.take(h[1] + LOG_OVERHEAD)
    if pos != end and (stop_offset is None or expected < stop_offset):
        why = f"{end - pos} bytes after the last whole batch"
        return Checked(Corruption(path, base_offset, expected, pos, why), pos, expected)
    return Checked(None, pos, expected)


def verify_segment_file(
    path: Path, base_offset: int, end: int, limiter: RateLimiter | None = None
) -> Corruption | None:
    """``verify_fd`` on a descriptor of its own (any thread: the segment's own may be closed meanwhile).
    Raises OSError when the file cannot be read (a disk error, which the caller reports as such)."""
    return check_segment_file(path, base_offset, end, limiter=limiter).corruption


def check_segment_file(path: Path, base_offset: int, end: int, **kw: Any) -> Checked:
    """``check_batches`` on a descriptor of its own; OSError when the file cannot be read."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return check_batches(fd, path, base_offset, end, **kw)
    finally:
        os.close(fd)
